-- Exact pruning (issue 16): the bounds the core takes before timing (memory per
-- placement; step time from the FLOPs and from a reference pass of each group) skip
-- strategies, never the answer. For dense, MoE and odd-GPU-count problems and several
-- N, the pruned search's best N are the exhaustive search's (same strategies, same
-- enumeration positions, same objectives to the bit), and the audit mode (exhaustive,
-- checking every timed strategy against its bounds) finds no bound above a step time.
local search = require("fathom.search")
local h = require("helpers")

local problems = {
  { name = "GPT-3 175B (dense), 1,024 A100, batch 1536", model = "gpt3_175b", node = "A100_80GB_SXM",
    gpus = 1024, pod_size = 8, global_batch = 1536, seq = 2048 },
  { name = "Mixtral 8x7B (MoE), 64 H100, batch 128", model = "mixtral_8x7b", node = "H100_SXM", gpus = 64,
    pod_size = 8, global_batch = 128, seq = 4096 },
  { name = "DeepSeek-V3 (MoE, MLA, MTP), 2,048 H800, batch 4096", model = "deepseek_v3", node = "H800_SXM",
    gpus = 2048, pod_size = 8, global_batch = 4096, seq = 4096 },
  { name = "MT-NLG 530B, 5,128 A100 (641 pods), batch up to 2520, rounded down", model = "megatron_gpt_530b",
    node = "A100_80GB_SXM", gpus = 5128, pod_size = 8, global_batch = 2520, seq = 2048, batch_rounding = "down",
    -- without offload only ~20 strategies fit, found late: there may be nothing to skip
    few = true },
  { name = "Llama 3.1 70B, 24 A100 (3 pods), batch 96", model = "llama3.1_70b", node = "A100_80GB_SXM",
    gpus = 24, pod_size = 8, global_batch = 96, seq = 4096 },
}

local function run(p, top, prune)
  local a = { workload = "train_specs/search_default.yaml", top = top, prune = prune }
  for k, v in pairs(p) do
    if k ~= "name" then a[k] = v end
  end
  return search.run(search.prepare(a), 1, false)
end

local KEYS = { "index", "objective", "step_time_s", "tp", "cp", "pp", "pp_in", "dp", "tp_moe", "ep", "ep_su", "vs",
  "mb", "batch", "schedule", "recompute", "dp_variant", "sp", "trim_first", "trim_last", "first_stage_layers",
  "last_stage_layers" }

describe("exact pruning", function()
  for _, p in ipairs(problems) do
    it("keeps the exhaustive best N: " .. p.name, function()
      local pruned_any = 0
      for _, top in ipairs({ 1, 10 }) do
        local ex = run(p, top, "off")
        local pr = run(p, top, "on")
        assert.is_true(#ex.hits > 0)
        assert.are.equal(#ex.hits, #pr.hits)
        for i, hit in ipairs(ex.hits) do
          for _, k in ipairs(KEYS) do
            assert.are.equal(hit[k], pr.hits[i][k], string.format("hit %d, %s", i, k))
          end
        end
        assert.are.equal(ex.stats.considered, pr.stats.considered)
        assert.are.equal(0, ex.stats.pruned)
        -- every strategy is accounted for once: timed, refused, not fitting or skipped
        local s = pr.stats
        assert.are.equal(s.considered, s.evaluated + s.not_tiling + s.invalid + s.no_fit + s.pruned)
        assert.is_true(s.evaluated <= ex.stats.evaluated)
        pruned_any = pruned_any + s.pruned
      end
      if not p.few then
        assert.is_true(pruned_any > 0, "the bounds skipped nothing: the comparison proves nothing")
      end
    end)
  end

  it("audit: no timed strategy is below its bounds (DeepSeek-V3, Mixtral, 530B rounded down)", function()
    for _, i in ipairs({ 2, 3, 4 }) do
      local res = run(problems[i], 10, "audit")
      assert.are.equal(0, res.stats.bound_violations, problems[i].name)
      assert.are.equal(0, res.stats.pruned)
      assert.is_true(res.stats.bound_evals > 0)
    end
  end)

  it("audit: none below its bounds either with an EP overlap made of micro-batch pairs (Mixtral)", function()
    -- the passes of a 1F1B-family schedule then depend on its steady state
    -- (fth_pp_steady_share): the group reference hides EP in every pass, a bound for all
    local w = require("fathom.config").load_mapping("configs/train_specs/search_default.yaml", "workload")
    w.ep_overlap_pairs = true
    local a = { workload = w, top = 10, prune = "audit" }
    for k, v in pairs(problems[2]) do
      if k ~= "name" then a[k] = v end
    end
    local res = search.run(search.prepare(a), 1, false)
    assert.are.equal(0, res.stats.bound_violations)
    assert.is_true(res.stats.bound_evals > 0)
  end)

  it("--no-prune runs the exhaustive search; the table says what the bounds skipped", function()
    local function out(extra)
      local r = h.run("search", "--model", "llama3.1_70b", "--hardware", "A100_80GB_SXM", "--gpus", "24",
        "--global-batch", "96", "--seq", "4096", "--top", "3", "--workers", "1", extra)
      assert.are.equal(0, r.code, r.stderr)
      return r.stdout
    end
    local pruned, full = out("--format=table"), out("--no-prune")
    assert.is_truthy(pruned:find("bounds skipped what could not enter the best 3", 1, true))
    assert.is_falsy(full:find("bounds skipped", 1, true))
    assert.is_truthy(full:find("timed", 1, true))
    -- the same table of hits above the summary line
    assert.are.equal(full:match("^(.-)\n%d+ strategies"), pruned:match("^(.-)\n%d+ strategies"))
  end)

  it("core.monotonic_s() is a clock that does not go back", function()
    local core = require("fathom.core")
    local a = core.monotonic_s()
    local b = core.monotonic_s()
    assert.is_true(a > 0 and b >= a)
  end)

  it("refuses an unknown prune mode with the key path", function()
    local core = require("fathom.core")
    local def = search.prepare({ model = "llama3.1_8b", node = "A100_80GB_SXM", gpus = 8, global_batch = 8, seq = 2048,
      workload = "train_specs/search_default.yaml", top = 1 })
    def.prune = "sometimes"
    local ok, err = pcall(core.search, def)
    assert.is_false(ok)
    assert.is_truthy(tostring(err.path or err):find("search.prune", 1, true))
  end)
end)
