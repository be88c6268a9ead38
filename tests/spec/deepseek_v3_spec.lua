-- DeepSeek-V3 pre-training as the report ran it (DeepSeek-AI 2024, arXiv 2412.19437):
-- node-limited routing read from the model YAML, on the shipped 2,048-H800 layout.
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
      return fathom.scenario(case(model_with({ topk_group = 4 }))):evaluate()
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
