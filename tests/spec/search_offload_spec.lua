-- Offload as a search knob (issue 16): weights (with their gradients), saved activations and
-- optimizer states may each move to the node's host memory; each strategy takes the fastest of
-- the least offloads that fit. MT-NLG 530B on 5,128 A100s (batch up to 2,520) is the case
-- Calculon answers with offload: without it fathom's best keeps ZeRO-3's weight gathers on the
-- critical path; with it, ZeRO-2 with the weights in host memory fits and is faster.
local core = require("fathom.core")
local h = require("helpers")
local search = require("fathom.search")

local function def_530b(fix, top)
  return search.prepare({ model = "megatron_gpt_530b", node = "A100_80GB_SXM", gpus = 5128, pod_size = 8,
    global_batch = 2520, seq = 2048, batch_rounding = "down", workload = "train_specs/search_default.yaml",
    top = top or 5, fix = fix })
end

describe("search offload", function()
  it("offloads only what memory needs and is never slower than keeping everything on the GPU", function()
    local off = search.run(def_530b({ offload = "off" }), 1, false)
    local on = search.run(def_530b(), 1, false)
    assert.is_true(#off.hits > 0 and #on.hits > 0)
    for _, hit in ipairs(off.hits) do
      assert.are.equal("xpu_memory", hit.offload_weights)
      assert.are.equal("xpu_memory", hit.offload_activations)
      assert.are.equal("xpu_memory", hit.offload_optimizer)
    end
    -- the offload space contains the no-offload one: its best is at least as good
    assert.is_true(on.hits[1].objective <= off.hits[1].objective)
    -- here strictly better, by moving the weights (ZeRO-2 keeps all of them per GPU)
    local best = on.hits[1]
    assert.is_true(best.objective < off.hits[1].objective * 0.95)
    assert.are.equal("host_memory", best.offload_weights)
    assert.are.equal("ZERO2", best.dp_variant)
    -- evaluating the hit alone (its offload fields place the parts) gives its step time
    local again = core.search_eval(def_530b(), best)
    h.near(best.step_time_s, again.step_time_s, 1e-12, "step time")
    assert.are.equal(best.offload_weights, again.offload_weights)
    -- no hit moves more than another strategy-identical hit needed: a strategy appears once
    local seen = {}
    for _, hit in ipairs(on.hits) do
      local key = table.concat({ hit.tp, hit.pp, hit.dp, hit.mb, hit.batch, hit.schedule, hit.recompute, hit.dp_variant,
        tostring(hit.sp), hit.vs }, " ")
      assert.is_nil(seen[key], key)
      seen[key] = true
    end
  end)

  it("the table shows which parts moved; --fix offload names a tier of the node or off", function()
    local r = h.run("search", "--model", "megatron_gpt_530b", "--hardware", "A100_80GB_SXM", "--gpus", "5128",
      "--global-batch", "2520", "--seq", "2048", "--batch-rounding", "down", "--top", "2", "--workers", "1")
    assert.are.equal(0, r.code, r.stderr)
    assert.is_truthy(r.stdout:find("offload", 1, true))
    assert.is_truthy(r.stdout:match("\n1 +8 +1 +641 .- w +%d"))
    local bad = h.run("search", "--model", "megatron_gpt_530b", "--hardware", "A100_80GB_SXM", "--gpus", "5128",
      "--global-batch", "2520", "--seq", "2048", "--fix", "offload=hots_memory")
    assert.are.equal(2, bad.code)
    assert.matches("offload=hots_memory: expected one of off, host_memory", bad.stderr)
    assert.matches("did you mean", bad.stderr)
    assert.are.equal(1, h.count_lines(bad.stderr))
  end)

  it("a space offloading to a tier the node lacks is refused with its key path", function()
    local def = def_530b()
    def.space.offload = "remote_memory" -- DGX A100 declares host memory and NVMe, no pooled memory
    local ok, err = pcall(core.search, def)
    assert.is_false(ok)
    assert.is_truthy(tostring(err.path or err):find("space.offload", 1, true))
  end)
end)
