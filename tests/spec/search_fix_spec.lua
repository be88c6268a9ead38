-- Every --fix key is honoured (issue 17: `--fix schedule=GPIPE` was validated, then a PP = 1
-- strategy reported 1F1B): for each key of the search space, every hit of a search with that
-- key pinned carries the pinned value.
local search = require("fathom.search")

local dense = { model = "llama3.1_8b", node = "H100_SXM", gpus = 16, pod_size = 8, global_batch = 64, seq = 2048 }
local moe = { model = "mixtral_8x7b", node = "H100_SXM", gpus = 16, pod_size = 8, global_batch = 64, seq = 4096 }

local function hits(p, fix)
  local a = { workload = "train_specs/search_default.yaml", top = 20, fix = fix }
  for k, v in pairs(p) do a[k] = v end
  return search.run((search.prepare(a)), 1, false).hits
end

-- key -> the problem, the value pinned, and the hit's field that must carry it
local cases = {
  { "tp", dense, 2, "tp" }, { "pp", dense, 2, "pp" }, { "cp", dense, 1, "cp" }, { "pp_in", dense, 2, "pp_in" },
  { "mb", dense, 2, "mb" }, { "vs", dense, 2, "vs" }, { "recompute", dense, "full", "recompute" },
  { "dp", dense, "ZERO3", "dp_variant" }, { "schedule", dense, "GPIPE", "schedule" },
  { "schedule", dense, "ZB_H1", "schedule" }, { "sp", dense, true, "sp" },
  { "trim_first", dense, 1, "trim_first" }, { "trim_last", dense, 1, "trim_last" },
  { "tp_moe", moe, 2, "tp_moe" }, { "ep", moe, 4, "ep" },
}

describe("search --fix", function()
  for _, c in ipairs(cases) do
    local key, p, value, field = c[1], c[2], c[3], c[4]
    it(string.format("%s=%s is honoured by every hit", key, tostring(value)), function()
      local list = hits(p, { [key] = value })
      assert.is_true(#list > 0, "the pinned search finds strategies")
      for i, h in ipairs(list) do
        assert.are.equal(value, h[field], string.format("hit %d: %s", i, field))
      end
    end)
  end

  it("offload=off keeps every part on the accelerator", function()
    for _, h in ipairs(hits(dense, { offload = "off" })) do assert.are.equal("-", search.offload_label(h)) end
  end)

  it("a trimmed split shows in the stage layer counts (32 layers on PP 2: 16 | 16)", function()
    for _, h in ipairs(hits(dense, { trim_first = 1, pp = 2 })) do
      assert.are.equal(15, h.first_stage_layers)
      assert.are.equal(17, h.last_stage_layers)
    end
  end)

  it("refuses a negative trim and an unknown key", function()
    assert.has_error(function() hits(dense, { trim_first = -1 }) end)
    assert.has_error(function() hits(dense, { trims = 1 }) end)
  end)
end)
