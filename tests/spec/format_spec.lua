local yaml = require("fathom.format.yaml")
local json = require("fathom.format.json")
local util = require("fathom.format.util")
local config = require("fathom.config")

describe("fathom.format", function()
  describe("util.number()", function()
    -- Each value must read back exactly: the shortest of %.15g..%.17g that does.
    local cases = { 0.1, 1 / 3, 1.8e15, 2 ^ 53 + 0.0, 123456789.123456789, 5e-324, -1.25e-9 }
    for _, x in ipairs(cases) do
      it(("round-trips %.17g"):format(x), function()
        assert.are.equal(x, tonumber(util.number(x)))
      end)
    end
    it("prints integers as integers and refuses non-finite values", function()
      assert.are.equal("42", util.number(42))
      assert.is_nil(util.number(0 / 0))
      assert.is_nil(util.number(math.huge))
      assert.are.equal("0.1", util.number(0.1))
    end)
  end)

  describe("yaml.encode()", function()
    it("writes keys sorted unless an order is given", function()
      assert.are.equal("a: 1\nb: 2\n", yaml.encode({ b = 2, a = 1 }))
      assert.are.equal("b: 2\na: 1\n", yaml.encode(util.ordered({ a = 1, b = 2 }, { "b", "a" })))
    end)

    it("quotes strings that would read back as something else", function()
      local text = yaml.encode({ s = "true", n = "12", e = "", c = "a: b", y = "y", ok = "plain text" })
      local back = config.load_string(text, "roundtrip")
      assert.are.same({ s = "true", n = "12", e = "", c = "a: b", y = "y", ok = "plain text" }, back)
    end)

    it("round-trips a nested result through the loader, numbers exactly", function()
      local v = {
        time = { total_time_seconds = 1 / 3, steps = 12345 },
        list = { 1, 2.5, "x", true },
        empty_map = {},
        empty_list = util.array({}),
        big = 1.8e15, tiny = 5e-324, float_int = 4.0,
      }
      local back = config.load_string(yaml.encode(v), "roundtrip")
      assert.are.equal(1 / 3, back.time.total_time_seconds)
      assert.are.equal(12345, back.time.steps)
      assert.are.same({ 1, 2.5, "x", true }, back.list)
      assert.are.equal(1.8e15, back.big)
      assert.are.equal(5e-324, back.tiny)
      assert.are.equal("float", math.type(back.float_int))
      assert.are.same({}, back.empty_map)
      assert.are.same({}, back.empty_list)
    end)

    it("writes non-finite numbers as YAML spells them", function()
      local text = yaml.encode({ a = math.huge, b = -math.huge, c = 0 / 0 })
      assert.are.equal("a: .inf\nb: -.inf\nc: .nan\n", text)
    end)

    it("refuses cycles", function()
      local t = {}
      t.self = t
      assert.has_error(function() yaml.encode(t) end)
    end)

    -- The string rule moved to the core (core.yaml_string, src/lua/ltext.c) so the C sweep
    -- writer shares it: it must write every string as the Lua rule it replaced did. That rule,
    -- kept here as the reference (fathom.format.yaml before the move):
    local plain_bad = { ["true"] = 1, ["false"] = 1, ["True"] = 1, ["False"] = 1, ["TRUE"] = 1, ["FALSE"] = 1,
      ["null"] = 1, ["Null"] = 1, ["NULL"] = 1, ["~"] = 1, ["yes"] = 1, ["no"] = 1, ["on"] = 1, ["off"] = 1,
      ["y"] = 1, ["n"] = 1 }
    local function needs_quotes(s)
      if s == "" or plain_bad[s] then return true end
      if tonumber(s) or s:match("^[-+]?%.") or s:match("^0[xo]") then return true end
      if s:match("^[%s%-%?:,%[%]{}#&%*!|>'\"%%@`]") or s:match("%s$") then return true end
      if s:find(": ", 1, true) or s:find(" #", 1, true) or s:match(":$") then return true end
      return s:find("[%c\128-\255]") ~= nil
    end
    local escapes = { ['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\t"] = "\\t", ["\r"] = "\\r" }
    local function reference(s)
      if not needs_quotes(s) then return s end
      local body = s:gsub('[%c"\\]', function(c) return escapes[c] or string.format("\\x%02x", c:byte()) end)
      if utf8.len(body) == nil then
        body = body:gsub("[\128-\255]", function(c) return string.format("\\x%02x", c:byte()) end)
      else
        body = body:gsub("\194([\128-\159])", function(c) return string.format("\\x%02x", c:byte()) end)
          :gsub("\226\128\168", "\\L"):gsub("\226\128\169", "\\P"):gsub("\239\187\191", "\\uFEFF")
      end
      return '"' .. body .. '"'
    end

    it("writes every string as the Lua rule it replaced: edge cases and 200,000 random strings", function()
      local core = require("fathom.core")
      local cases = { "", "true", "y", "n", "~", "12", " 12 ", "0x1F", "0x1p4", "1e5", "1e", ".5", "-.5", "+.5",
        "0o7", "0xg", "inf", "nan", "-inf", "1.5 GiB", "-1.5 GiB", "47.93%", "8.674e-10 ns", "a: b", "a:b", "a:",
        "a #b", "a#b", "#a", " a", "a ", "a\tb", "\0", "a\0b", "q\"uote", "back\\slash", "\127", "caf\195\169",
        "\194\133", "\194\160", "\226\128\168", "\226\128\169", "\239\187\191x", "\192\128", "\237\160\128",
        "\244\144\128\128", "\244\143\191\191", "\255", "\195", "x\226\128", "`a", "@a", "%a", "-", "- a", "?", "a?" }
      for _, s in ipairs(cases) do
        assert.are.equal(reference(s), core.yaml_string(s), ("%q"):format(s))
      end
      -- random strings over an alphabet weighted to the rule's edges: number characters,
      -- indicators, spaces, controls, and bytes of valid and broken UTF-8
      local alphabet = { "0", "1", "9", ".", "e", "E", "x", "p", "+", "-", " ", "\t", "\n", ":", "#", "a", "n",
        "\"", "\\", "\0", "\127", "\194", "\133", "\226", "\128", "\168", "\239", "\187", "\191", "\195",
        "\169", "\240", "\159", "\255", "'", "[", "~" }
      local rng, mismatches = 12345, 0
      local function nxt(n)
        rng = (rng * 1103515245 + 12345) % 2147483648
        return rng % n + 1
      end
      for _ = 1, 200000 do
        local parts = {}
        for k = 1, nxt(6) - 1 do parts[k] = alphabet[nxt(#alphabet)] end
        local s = table.concat(parts)
        if reference(s) ~= core.yaml_string(s) then
          mismatches = mismatches + 1
          if mismatches < 5 then print(("%q: %s vs %s"):format(s, reference(s), core.yaml_string(s))) end
        end
      end
      assert.are.equal(0, mismatches)
    end)
  end)

  describe("json", function()
    it("encode() round-trips numbers exactly through decode()", function()
      local v = { a = 1 / 3, b = { 1, 2, 3 }, c = "q\"uote\n", d = 1.8e15, e = 7 }
      local back = json.decode(json.encode(v))
      assert.are.same(v, back)
      back = json.decode(json.encode(v, true))
      assert.are.same(v, back)
    end)

    it("writes NaN as null and empty arrays as []", function()
      assert.are.equal('{"a":null,"b":[]}', json.encode({ a = 0 / 0, b = util.array({}) }))
    end)

    it("decode() reports bad JSON softly", function()
      local v, msg = json.decode("{bad", "x.json")
      assert.is_nil(v)
      assert.matches("^x%.json: ", msg)
    end)
  end)
end)

describe("fathom.format.svg", function()
  it("draws one stacked bar per valid point, heights in proportion to the step's parts", function()
    local svg = require("fathom.format.svg")
    local recs = {
      { sweep_point = { ["x.tp"] = 1 }, time = { step_time_seconds = 2.0,
        step_breakdown = { compute_seconds = 1.5, bubble_seconds = 0.5 } } },
      { sweep_point = { ["x.tp"] = 2 }, error = "does not tile" },
    }
    local text = svg.encode(recs)
    assert.matches("^<svg ", text)
    assert.matches("</svg>\n$", text)
    assert.matches("invalid", text)
    assert.matches("tp=1", text)
    -- the axis runs to a nice 2.0 (ticks 0, 0.5, ..., 2), so the tallest bar fills the 290 px
    -- plot (520 - 50 top - 180 bottom): compute 1.5 / 2.0 x 290 = 217.5, bubble 72.5; the two
    -- parts drawn take the palette's first two colours (Okabe-Ito blue and orange)
    assert.matches('height="217%.50" fill="#0072B2"', text)
    assert.matches('height="72%.50" fill="#E69F00"', text)
    assert.matches('class="legend">compute<', text)
    assert.matches('class="legend">bubble<', text)
    assert.is_nil(text:find('class="legend">TP<', 1, true)) -- not drawn, not in the legend
    -- a step with every part drawn still gives each its own colour
    assert.is_true(#require("fathom.format.plot").palette >= #svg.parts, "palette shorter than the parts")
  end)
end)
