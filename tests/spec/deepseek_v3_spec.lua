-- DeepSeek-V3 pre-training as the report ran it (DeepSeek-AI 2024, arXiv 2412.19437):
-- node-limited routing read from the model YAML, FP8 dispatch, and the run's GPU-hours, on the
-- shipped 2,048-H800 layout.
local config = require("fathom.config")
local fathom = require("fathom")

local function case(model, workload)
  return {
    hardware = "hardware_specs/hardware_library.yaml",
    physical = "topology_zoo/physical/hgx_h800_2048.yaml",
    logical = "topology_zoo/logical/deepseek_v3_pp16_ep64.yaml",
    model = model or "models/deepseek_v3.yaml",
    workload = workload or "train_specs/deepseek_v3.yaml",
  }
end

local function model_with(keys)
  local m = config.load_mapping("configs/models/deepseek_v3.yaml", "model spec")
  for k, v in pairs(keys) do m[k] = v end
  return m
end

describe("node-limited routing (topk_group of n_group, HF config names)", function()
  it("sends fewer copies over InfiniBand: EP 64 = 8 GPUs x 8 nodes, 4 of 8 nodes per token", function()
    local free = fathom.scenario(case(model_with({ n_group = 8, topk_group = 0 }))):evaluate()
    local limited = fathom.scenario(case(model_with({ n_group = 8, topk_group = 4 }))):evaluate()
    local all = fathom.scenario(case(model_with({ n_group = 8, topk_group = 8 }))):evaluate()
    -- Per-node dispatch: an unrestricted token's top-8 of 256 experts, 32 a node, misses a node
    -- with probability C(224, 8) / C(256, 8), so it reaches 8 (1 - that) = 5.29 of the 8 nodes;
    -- a limit of 8 of 8 groups changes nothing
    local miss = 1
    for i = 0, 7 do miss = miss * (224 - i) / (256 - i) end
    local reach = 8 * (1 - miss)
    assert.is_true(math.abs(reach - 5.29) < 0.01)
    assert.are.equal(free.comm.ep.raw_s, all.comm.ep.raw_s)
    -- 4 nodes instead of 5.29: the scale-out part, which sets each call's time, carries 4 / 5.29
    -- of the bytes; the scale-up forwarding stays. Per call: the busiest stage may change with
    -- the times (the last, with the LM head, one MoE layer fewer).
    local function per_call(r) return r.comm.ep.raw_s / r.comm.ep.calls_per_step end
    assert.is_true(math.abs(per_call(limited) / per_call(free) / (4 / reach) - 1) < 0.02)
    assert.are.equal(free.comm.ep.bytes_per_call, limited.comm.ep.bytes_per_call)
  end)

  it("saves scale-out bytes only with a per-node dispatcher (DeepEP), not with one copy per expert", function()
    local w = config.load_mapping("configs/train_specs/deepseek_v3.yaml", "training workload spec")
    w.ep_dispatch_per_node = false
    local per_copy = fathom.scenario(case(model_with({ n_group = 8, topk_group = 4 }), w)):evaluate()
    local free = fathom.scenario(case(model_with({ n_group = 8, topk_group = 0 }), w)):evaluate()
    local function per_call(r) return r.comm.ep.raw_s / r.comm.ep.calls_per_step end
    assert.is_true(math.abs(per_call(per_copy) / per_call(free) - 1) < 1e-12)
  end)

  it("refuses a limit without groups, or more groups than there are", function()
    local ok, err = pcall(function()
      return fathom.scenario(case(model_with({ n_group = 0, topk_group = 4 }))):evaluate()
    end)
    assert.is_false(ok)
    assert.matches("topk_group", tostring(err))
    ok, err = pcall(function()
      return fathom.scenario(case(model_with({ n_group = 8, topk_group = 9 }))):evaluate()
    end)
    assert.is_false(ok)
    assert.matches("topk_group", tostring(err))
  end)
end)

describe("moe_dispatch_float_size_bytes (FP8 dispatch, BF16 combine)", function()
  local function work(keys)
    local w = config.load_mapping("configs/train_specs/deepseek_v3.yaml", "training workload spec")
    w.float_size_bytes = 2
    w.moe_dispatch_float_size_bytes = nil
    for k, v in pairs(keys) do w[k] = v end
    return w
  end
  it("sends the dispatch at 1 B + 4 B per 128 elements, the combine at 2 B", function()
    local bf16 = fathom.scenario(case(nil, work({}))):evaluate()
    local fp8 = fathom.scenario(case(nil, work({ moe_dispatch_float_size_bytes = 1 }))):evaluate()
    -- bytes per element over both directions: (1 + 1/32 + 2) / (2 + 2) = 0.7578125
    assert.is_true(math.abs(fp8.comm.ep.bytes_per_step / bf16.comm.ep.bytes_per_step - 0.7578125) < 1e-12)
    local same = fathom.scenario(case(nil, work({ moe_dispatch_float_size_bytes = 2 }))):evaluate()
    assert.are.equal(bf16.step_time_s, same.step_time_s)
  end)

  it("is 1, 2 or 4", function()
    local ok, err = pcall(function()
      return fathom.scenario(case(nil, work({ moe_dispatch_float_size_bytes = 3 }))):evaluate()
    end)
    assert.is_false(ok)
    assert.matches("moe_dispatch_float_size_bytes", tostring(err))
  end)
end)

-- The report's pre-training: 2.664M H800 GPU-hours on 2,048 GPUs (Sec. 1, Table 1), 14.8T
-- tokens in steps of 15,360 x 4,096 = 62,914,560 tokens: 235,240 steps, so ~54.2 days and an
-- implied step of 2.664e6 h x 3600 / 2048 / 235,240 = 19.9 s.
--
-- fathom with the report's layout and every mechanism it models (PP 16 DualPipe with stages i
-- and 15 - i on one rank, EP 64 = 8 GPUs x 8 nodes, node-limited to 4 nodes, ZeRO-1,
-- fp8_blockwise GEMMs, FP8 dispatch, BF16 combine, 20 of 132 SMs held by DeepEP, the MTP
-- module, RMSNorm and the MLA up-projections recomputed in backward (Sec. 3.3.3), links
-- shared by traffic) predicts a 17.5 s step, ~47.5 days, 2.34M GPU-hours: 12.3% under, inside
-- the 15% the issue asks (16.2% under while DualPipe hid every all-to-all, also those of the
-- passes it runs alone; 18.7% before the data-parallel traffic was charged for the compute it
-- displaces). Where the step goes (s): compute 14.10 on the busiest rank (the first, which
-- DualPipe gives the first stage's 3 dense and 1 MoE layers and the last stage's 3 MoE layers,
-- MTP block, projection and two head passes, at half the micro-batches each, recomputing the
-- norms and up-projections of both), memory-bound time 1.67, bubble 0.88, the EP all-to-all
-- 3.73 raw: hidden in the 97 of 120 passes per direction dualpipe.py runs as forward-backward
-- pairs on that rank, 0.72 exposed in the 23 it runs alone (warm-up forwards, cool-down
-- backwards). InfiniBand carries the all-to-all beside ~13 GiB of pipeline sends and 3.9 GiB of
-- DP_MoE reduce-scatter a step, so processor sharing gives it ~97%. Under the even split (the
-- Hot Interconnects study's rule) it gets a third and ~11 s of it is exposed: ~72.5 days
-- (+34% on the report's 54.2, +53% on this prediction). Left out, all on the slow side:
-- checkpointing, restarts and evaluation inside the 2.664M hours.
describe("DeepSeek-V3 pre-training on 2,048 H800 (report: 2.664M GPU-hours, ~54 days)", function()
  local r = fathom.scenario(case()):evaluate()
  local gpu_hours = r.total_time_s / 3600 * 2048

  it("recomputes RMSNorm and the MLA up-projections as the report did (~1 day)", function()
    local w = config.load_mapping("configs/train_specs/deepseek_v3.yaml", "training workload spec")
    w.recompute_modules = {}
    local a = fathom.scenario(case(nil, w)):evaluate()
    assert.is_true(r.recompute_s > 0 and a.recompute_s == 0)
    assert.is_true(r.total_time_s > 1.01 * a.total_time_s)
    assert.is_true(r.memory.components.saved_activations < a.memory.components.saved_activations)
  end)

  it("steps as the report counts them", function()
    assert.are.equal(235240, r.steps)
  end)

  it("predicts 2.34M GPU-hours, -12.3% on the report's 2.664M: inside the 15% the issue asks", function()
    assert.is_true(math.abs(gpu_hours / 2.336e6 - 1) < 0.03, string.format("%.4g GPU-hours", gpu_hours))
    assert.is_true(math.abs(gpu_hours / 2.664e6 - 1) < 0.15, string.format("%.4g GPU-hours", gpu_hours))
  end)

  it("hides the all-to-all in DualPipe's pairs only: 23 of the first rank's 120 passes run alone", function()
    -- dualpipe.py on rank 0 of 16 (half_rank 0) with 120 micro-batches: its main step runs
    -- 120 / 2 - 16 + 0 + 1 = 45 iterations of two forward-backward pairs, its fifth 8 - 0 - 1 = 7
    -- of one: 97 of its 120 forward (and backward) passes are paired, 23 run alone and wait for
    -- their own dispatch and combine
    assert.is_true(r.comm.ep.raw_s > 0.2 * r.compute_s)
    assert.is_true(math.abs(r.comm.ep.exposed_s / r.comm.ep.raw_s - 23 / 120) < 1e-9,
      string.format("%.6g of the all-to-all exposed", r.comm.ep.exposed_s / r.comm.ep.raw_s))
  end)

  it("under the even split (the HotI study's rule): ~72.5 days, ~11 s of all-to-all exposed", function()
    local phys = config.load_mapping("configs/topology_zoo/physical/hgx_h800_2048.yaml", "physical topology")
    phys.bandwidth_by_traffic = false
    local c = case()
    c.physical = phys
    local a = fathom.scenario(c):evaluate()
    local days = a.total_time_s / 86400
    assert.is_true(math.abs(days / 72.50 - 1) < 0.05, string.format("%.4g days", days))
    assert.is_true(a.comm.ep.exposed_s > 0.3 * a.step_time_s)
    -- each all-to-all moves the same bytes; only the shares moved
    assert.is_true(math.abs(a.comm.ep.bytes_per_call / r.comm.ep.bytes_per_call - 1) < 1e-12)
    -- even, but DP's once-per-step reductions apart from the all-step collectives: ~54.3 days
    phys.dp_bandwidth_apart = true
    days = fathom.scenario(c):evaluate().total_time_s / 86400
    assert.is_true(math.abs(days / 54.34 - 1) < 0.05, string.format("%.4g days", days))
  end)

  it("owes ~3.5 days to its MTP module, on the rank DualPipe shares between the first and last stages", function()
    -- without it: ~44 days (the busiest rank a middle one, all MoE layers); with it on the
    -- last stage alone (a 1F1B-style placement, no pairing) the last stage would set the
    -- step: see the core test mtp_module for its FLOPs
    local a = fathom.scenario(case(model_with({ num_nextn_predict_layers = 0 }))):evaluate()
    local days = a.total_time_s / 86400
    assert.is_true(math.abs(days / 44.00 - 1) < 0.05, string.format("%.4g days", days))
    assert.is_true(r.compute_s > 1.15 * a.compute_s)
  end)

  it("owes its prediction to per-node dispatch and FP8 dispatch; DeepEP's SMs slow compute", function()
    local w0 = config.load_mapping("configs/train_specs/deepseek_v3.yaml", "training workload spec")
    w0.moe_comm_compute_fraction = nil
    local all_sms = fathom.scenario(case(nil, w0)):evaluate()
    -- the MoE blocks' kernels on 112 of 132 SMs
    assert.is_true(r.compute_s > 1.05 * all_sms.compute_s)
    -- one copy per expert over InfiniBand (NCCL's all-to-all): twice the time per call, more
    -- than DualPipe hides
    local wc = config.load_mapping("configs/train_specs/deepseek_v3.yaml", "training workload spec")
    wc.ep_dispatch_per_node = false
    local per_copy = fathom.scenario(case(nil, wc)):evaluate()
    assert.is_true(per_copy.total_time_s > 1.03 * r.total_time_s)
    -- without the node limit (5.29 nodes a token instead of 4) more copies cross InfiniBand:
    -- the passes DualPipe runs alone wait ~1.3x longer for them (~1.4% of the step)
    local free = fathom.scenario(case(model_with({ topk_group = 0 }))):evaluate()
    assert.is_true(free.comm.ep.exposed_s > 1.2 * r.comm.ep.exposed_s)
    assert.is_true(free.total_time_s > 1.005 * r.total_time_s and free.total_time_s < 1.03 * r.total_time_s)
    local w = config.load_mapping("configs/train_specs/deepseek_v3.yaml", "training workload spec")
    w.moe_dispatch_float_size_bytes = nil
    local bf16 = fathom.scenario(case(nil, w)):evaluate()
    assert.is_true(bf16.comm.ep.raw_s / bf16.comm.ep.calls_per_step > 1.2 * r.comm.ep.raw_s / r.comm.ep.calls_per_step)
  end)
end)

-- Issue 15: `fathom search` on DeepSeek-V3 / 2,048 H800 with the report's workload (FP8,
-- DeepEP, its batch) ranks a DeepSeek-like layout first -- PP 16 DualPipe, EP 64 over 8
-- nodes, ZeRO-1 (TP 2 where the report ran TP 1: the report's FP8 activation caching, which
-- fathom does not model, is what fits TP 1 in 80 GB) -- and says where its lead comes from.
describe("fathom search on DeepSeek-V3, 2,048 H800, the report's workload", function()
  local search = require("fathom.search")
  local res = search.run(search.prepare({ model = "deepseek_v3", node = "H800_SXM", gpus = 2048, pod_size = 8,
    global_batch = 15360, seq = 4096, workload = "train_specs/deepseek_v3.yaml", top = 10 }), 1, false)

  it("ranks PP 16 DualPipe, EP 64 over 8 nodes, ZeRO-1 in its top 5", function()
    local found
    for i = 1, 5 do
      local x = res.hits[i]
      if x and x.pp == 16 and x.schedule == "DUALPIPE" and x.ep == 64 and x.ep_su == 8 and x.dp_variant == "ZERO1" then
        found = found or i
      end
    end
    assert.is_not_nil(found, "no DeepSeek-like layout in the top 5")
  end)

  it("says why the winner wins: the knobs that differ and the part of the step that gains most", function()
    local why = search.explain(res.hits[1], search.runner_up(res.hits), { pod_size = 8, up_name = "nvlink" })
    local text = table.concat(why, "\n")
    assert.matches("the largest difference is ", text)
    assert.matches("step [%d.]+ s vs [%d.]+ s", text)
    -- the parts add up to the step, each at least 0
    for _, hit in ipairs({ res.hits[1], search.runner_up(res.hits) }) do
      local p, sum = search.step_parts(hit), 0
      for _, v in pairs(p) do
        assert.is_true(v >= -1e-9)
        sum = sum + v
      end
      assert.is_true(math.abs(sum - hit.step_time_s) < 1e-9 * hit.step_time_s)
    end
  end)
end)
