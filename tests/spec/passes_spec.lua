-- fathom.passes: one row per pass mode, the only place that knows them.
local passes = require("fathom.passes")

describe("fathom.passes", function()
  it("has a complete row for training, prefill and decode", function()
    assert.are.same({ "training", "inference_prefill", "inference_decode" }, passes.names)
    for _, row in ipairs(passes.rows) do
      assert.is_function(row.load, row.name)
      assert.is_function(row.compile, row.name)
      assert.is_function(row.record, row.name)
      assert.is_function(row.summary.row, row.name)
      assert.are.equal(8, #row.summary.headers, row.name)
      assert.is_string(row.search_workload, row.name)
      assert.is_string(row.search, row.name)
    end
    assert.are.equal(passes.get("inference_decode"), passes.of_pass("decode"))
    assert.are.equal("training", passes.get(nil).name)
  end)

  it("refuses an unknown pass mode as an input error", function()
    local ok, err = pcall(passes.get, "serving")
    assert.is_false(ok)
    assert.is_true(require("fathom.errors").is_input(err))
    assert.matches("unknown pass mode 'serving' %(training, inference_prefill or inference_decode%)", tostring(err))
  end)

  it("feeds the command-line choices", function()
    local r = require("helpers").run("analyze", "--help")
    assert.matches("--pass%-mode training|inference_prefill|inference_decode", r.stdout)
  end)
end)
