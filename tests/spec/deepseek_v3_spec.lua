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
    -- top-8 of 8 nodes: min(8, 8, 8) / 8 = every copy crosses, as unrestricted
    assert.are.equal(free.comm.ep.raw_s, all.comm.ep.raw_s)
    -- 4 nodes: half the copies cross scale-out; the scale-up forwarding stays
    assert.is_true(limited.comm.ep.raw_s < 0.75 * free.comm.ep.raw_s)
    assert.is_true(limited.comm.ep.raw_s > 0.4 * free.comm.ep.raw_s)
    assert.are.equal(free.comm.ep.bytes_per_step, limited.comm.ep.bytes_per_step)
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
-- fathom with the report's layout and every mechanism it models (PP 16 DualPipe, EP 64 =
-- 8 GPUs x 8 nodes, node-limited to 4 nodes, ZeRO-1, fp8_blockwise GEMMs, FP8 dispatch, BF16
-- combine, 20 of 132 SMs held by DeepEP) predicts a 23.5 s step, ~64.1 days, 3.15M GPU-hours:
-- 18% over, outside 15%, so this spec asserts what fathom achieves, not the report (within
-- 5%: the H800 calibration is refitted now and then). Where the step goes (s): compute 11.24
-- on the busiest stage (9.58 with every SM), memory-bound time 2.03, bubble 1.41, exposed EP
-- all-to-all 8.68 (of 21.95 raw), DP 0.16. The gap is the all-to-all: its raw time is twice
-- the computation it hides under, because the scale-out part gets 1/3 of InfiniBand. fathom
-- splits a physical dimension evenly between the logical dimensions of a view mapped to it
-- (fth_topology.h), here EP_SO, PP and DP_MoE, as if all three ran at once all step long; in
-- fact the DP_MoE reduce-scatter runs once per step (~0.15 s) and PP sends 13 GiB a step
-- against the all-to-all's 700 GiB. Letting the once-per-step reductions not take bandwidth
-- from the layer and pipeline collectives (the physical topology's dp_bandwidth_apart: true)
-- gives ~46.9 days (-14%; EP 14.6 s raw, 2.8 s exposed), but as the default it moves the Hot
-- Interconnects study out of its published ratios (Config4 2.56x -> 2.11x against 2.7x;
-- 0.57 / 0.39 -> 0.65 / 0.47 against 0.60 / 0.37), whose numbers were built on the even
-- split; so the even split stays the default, the shipped H800 topology keeps it, and the
-- 46.9 days are a sensitivity, not the claim. Neither is DualPipe's pairing modelled in full:
-- each pass's collectives overlap that pass's kernels (fth_train.c), not the paired chunk of
-- the other direction. Not modelled: the MTP module; activations cached in FP8 beyond the
-- GEMM inputs (the layout is counted at 144 GiB per GPU and does not fit 80 GB here).
describe("DeepSeek-V3 pre-training on 2,048 H800 (report: 2.664M GPU-hours, ~54 days)", function()
  local r = fathom.scenario(case()):evaluate()
  local gpu_hours = r.total_time_s / 3600 * 2048

  it("steps as the report counts them", function()
    assert.are.equal(235240, r.steps)
  end)

  it("predicts 3.15M GPU-hours (+18% on the report's 2.664M; gap documented above)", function()
    assert.is_true(math.abs(gpu_hours / 3.149e6 - 1) < 0.05, string.format("%.4g GPU-hours", gpu_hours))
    assert.is_true(gpu_hours / 2.664e6 - 1 < 0.25)
  end)

  it("hides most of the all-to-all under DualPipe, the rest exposed by its scale-out share", function()
    assert.is_true(r.comm.ep.hidden_s > 0.5 * r.comm.ep.raw_s)
    assert.is_true(r.comm.ep.exposed_s > 0.3 * r.step_time_s)
  end)

  it("with DP's once-per-step reductions apart from the all-step collectives: ~46.9 days", function()
    local phys = config.load_mapping("configs/topology_zoo/physical/hgx_h800_2048.yaml", "physical topology")
    phys.dp_bandwidth_apart = true
    local c = case()
    c.physical = phys
    local a = fathom.scenario(c):evaluate()
    local days = a.total_time_s / 86400
    assert.is_true(math.abs(days / 46.85 - 1) < 0.05, string.format("%.4g days", days))
    assert.is_true(a.comm.ep.exposed_s < 0.5 * r.comm.ep.exposed_s)
  end)

  it("with the links shared by traffic (processor sharing): ~43.2 days, the all-to-all hidden", function()
    -- EP_SO moves ~700 GiB a step beside PP's 13 GiB and DP_MoE's 3.9 GiB on InfiniBand, so it
    -- gets 700 / (700 + 13 + 3.9) of the links instead of 1/3; DualPipe then hides all of it.
    -- The report's ~54 days lie between the even split (+18%) and this (-20%).
    local phys = config.load_mapping("configs/topology_zoo/physical/hgx_h800_2048.yaml", "physical topology")
    phys.bandwidth_by_traffic = true
    local c = case()
    c.physical = phys
    local a = fathom.scenario(c):evaluate()
    local days = a.total_time_s / 86400
    assert.is_true(math.abs(days / 43.22 - 1) < 0.05, string.format("%.4g days", days))
    assert.is_true(a.comm.ep.raw_s < 0.3 * r.comm.ep.raw_s)
    assert.are.equal(0, a.comm.ep.exposed_s)
    -- each all-to-all moves the same bytes; only the shares moved (the busiest stage may
    -- change with them: the last stage, with the LM head and one MoE layer fewer)
    assert.is_true(math.abs(a.comm.ep.bytes_per_call / r.comm.ep.bytes_per_call - 1) < 1e-12)
  end)

  it("owes its prediction to node-limited routing and FP8 dispatch; DeepEP's SMs slow compute", function()
    local w0 = config.load_mapping("configs/train_specs/deepseek_v3.yaml", "training workload spec")
    w0.moe_comm_compute_fraction = nil
    local all_sms = fathom.scenario(case(nil, w0)):evaluate()
    -- the MoE blocks' kernels on 112 of 132 SMs: compute 9.58 s -> 11.24 s
    assert.is_true(math.abs(r.compute_s / all_sms.compute_s - 11.24 / 9.58) < 0.02)
    local free = fathom.scenario(case(model_with({ topk_group = 0 }))):evaluate()
    assert.is_true(free.total_time_s > 1.5 * r.total_time_s)
    local w = config.load_mapping("configs/train_specs/deepseek_v3.yaml", "training workload spec")
    w.moe_dispatch_float_size_bytes = nil
    local bf16 = fathom.scenario(case(nil, w)):evaluate()
    assert.is_true(bf16.comm.ep.raw_s > 1.2 * r.comm.ep.raw_s)
  end)
end)
