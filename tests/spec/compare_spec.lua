-- fathom compare A B: field-by-field differences of two results.
local h = require("helpers")
local json = require("cjson")

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

describe("fathom compare", function()
  local compare = require("fathom.cmd.compare")

  describe("diff()", function()
    it("lists the numbers that differ with B - A and (B - A) / |A|, by dotted path", function()
      local rows = compare.diff({ time = { step = 2.0, mfu = 0.5 }, name = "x" },
        { time = { step = 1.5, mfu = 0.5 }, name = "y" })
      -- step: 1.5 - 2 = -0.5, -0.5 / 2 = -25%; mfu equal (left out); name differs (text)
      assert.are.equal(2, #rows)
      local by = {}
      for _, r in ipairs(rows) do by[r.field] = r end
      assert.are.equal(-0.5, by["time.step"].delta)
      assert.are.equal(-0.25, by["time.step"].relative)
      assert.are.equal("x", by.name.a)
      assert.are.equal("y", by.name.b)
      assert.is_nil(by.name.delta)
    end)

    it("pairs lists of records by position; a field on one side only is listed", function()
      local rows = compare.diff({ { t = 1 }, { t = 2 } }, { { t = 1 }, { t = 3 }, { t = 4 } })
      local by = {}
      for _, r in ipairs(rows) do by[r.field] = r end
      assert.is_nil(by["1.t"])
      assert.are.equal(1, by["2.t"].delta) -- 3 - 2
      assert.is_nil(by["3.t"].a)
      assert.are.equal(4, by["3.t"].b)
    end)

    it("--all keeps equal fields; --match filters; --rel-tol forgives rounding; A = 0 has no relative", function()
      assert.are.equal(2, #compare.diff({ a = 1, b = 2 }, { a = 1, b = 2 }, { all = true }))
      assert.are.equal(1, #compare.diff({ a = 1, bb = 2 }, { a = 5, bb = 3 }, { match = "bb" }))
      assert.are.equal(0, #compare.diff({ a = 1 }, { a = 1 + 1e-12 }, { rel_tol = 1e-9 }))
      assert.are.equal(1, #compare.diff({ a = 1 }, { a = 1 + 1e-12 }))
      local z = compare.diff({ a = 0 }, { a = 3 })[1]
      assert.are.equal(3, z.delta)
      assert.is_nil(z.relative)
    end)
  end)

  it("two estimates: the table names the files and the fields that differ", function()
    local a, b = os.tmpname(), os.tmpname()
    local base = { "estimate", "--model", "llama3.1_8b", "--hardware", "H100_SXM", "--gpus", "8", "--format", "json",
      "--output-file" }
    local args = { table.unpack(base) }
    args[#args + 1] = a
    args[#args + 1] = "--tp"
    args[#args + 1] = "2"
    assert.are.equal(0, h.run(table.unpack(args)).code)
    args[#args - 2] = b
    args[#args] = "4"
    assert.are.equal(0, h.run(table.unpack(args)).code)
    local r = h.run("compare", a, b, "--match", "strategy.")
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("^A: " .. a:gsub("%p", "%%%0") .. "\nB: ", r.stdout)
    -- TP 2 -> 4 halves DP (8 / 2 = 4 -> 8 / 4 = 2): -50%
    assert.matches("\nstrategy%.dp +4 +2 +%-2 +%-50%.00%%\n", r.stdout)
    assert.matches("\nstrategy%.tp +2 +4 +%+2 +%+100%.00%%\n", r.stdout)
    local j = json.decode(h.run("compare", a, b, "--format", "json").stdout)
    assert.is_true(#j > 3)
    local same = h.run("compare", a, a)
    assert.matches("\n0 of %d+ fields differ\n", same.stdout)
    os.remove(a)
    os.remove(b)
  end)

  it("bad input: one line, exit 2", function()
    local r = h.run("compare", "only-one.json")
    assert.are.equal(2, r.code)
    assert.matches("expected two files, got 1", r.stderr)
    local bad = os.tmpname()
    write(bad, "{not json")
    r = h.run("compare", bad, bad)
    assert.are.equal(2, r.code)
    assert.are.equal(1, h.count_lines(r.stderr))
    os.remove(bad)
  end)
end)
