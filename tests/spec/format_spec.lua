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
  end)
end)
