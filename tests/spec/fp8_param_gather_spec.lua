-- fp8_param_gather: a workload key the case reader sets from "FP8 params" (MLPerf v4.0
-- GPT-3 on 10,752 H100, TP 4 PP 6 DP 448, distributed optimizer). With it the distributed
-- optimizer's all-gather moves 1 byte a weight instead of the compute width's 2, so the
-- DP bytes a step fall by exactly the parameters this GPU gathers (ZeRO-1 re-gathers every
-- trained parameter), and the step gets no slower.
local validate = require("fathom.validate")
local cases = require("fathom.cases")
local calibration = require("fathom.calibration")
local scenario = require("fathom.scenario")
local h = require("helpers")

-- run(docs) -> a function of the flag: the case evaluated with fp8_param_gather set to it,
-- on the calibrated library as validate builds it
local function runner(docs)
  local state = validate.state("configs/hardware/hardware_library.yaml")
  local setting = calibration.lookup(docs.gpu.generation, docs.fw.kernels, state.settings)
  local lib = validate.calibrated_lib(state, docs.gpu.node, setting)
  return function(flag)
    docs.workload.fp8_param_gather = flag
    return scenario.new({ hardware_lib = lib, physical = docs.physical, logical = docs.logical,
      model = docs.model, workload = docs.workload }):evaluate()
  end
end

describe("fp8_param_gather", function()
  it("halves the distributed optimizer's weight all-gather under FP8", function()
    local case = h.case("validation/mlperf_cases.yaml", "mlperf40_gpt3_175b_h100_10752")
    local docs = assert(cases.training_docs(case))
    assert.is_true(docs.workload.fp8_param_gather)
    assert.are.equal(2, docs.workload.float_size_bytes)
    local run = runner(docs)
    local on, off = run(true), run(false)
    local params = on.params_per_gpu
    assert.is_true(params > 1e9)
    assert.is_near(params, off.comm.dp.bytes_per_step - on.comm.dp.bytes_per_step, 1e-6 * params)
    assert.is_true(on.step_time_s < off.step_time_s)
  end)
end)

-- Megatron-Bridge's FP8 current-scaling and MXFP8 precision recipes (bf16_with_fp8_current_
-- scaling_mixed, bf16_with_mxfp8_mixed: fp8_param_gather = True) hold the weights as FP8
-- parameters: no BF16 compute copy, the FP32 master in the distributed optimizer's shard.
-- Its NVFP4 recipe gathers FP4 (fp4_param_gather), which the core costs as BF16; other
-- frameworks gather FP8 only where the case says so.
describe("fp8_param_gather as Megatron-Bridge's recipes set it", function()
  local function docs_of(id)
    return assert(cases.training_docs(h.case("validation/megatron_bridge_cases.yaml", id)))
  end

  it("is on for FP8-CS and MXFP8, off for NVFP4 and BF16, and off in other frameworks", function()
    assert.is_true(docs_of("mbr2604_llama31_405b_gb300_mxfp8_256gpu").workload.fp8_param_gather)
    assert.is_true(docs_of("mbr2511_llama3_70b_gb300_fp8cs_64gpu").workload.fp8_param_gather)
    assert.is_false(docs_of("mbr2604_llama31_405b_gb300_nvfp4_256gpu").workload.fp8_param_gather)
    assert.is_false(docs_of("mbr2511_qwen3_235b_a22b_gb300_bf16_256gpu").workload.fp8_param_gather)
    local fw = require("fathom.frameworks")
    assert.is_true(fw.holds_fp8_params(fw.lookup("Megatron-Bridge 26.04"), "mxfp8"))
    assert.is_false(fw.holds_fp8_params(fw.lookup("Megatron-Bridge 26.04"), "nvfp4"))
    assert.is_false(fw.holds_fp8_params(nil, "mxfp8"))
    assert.is_nil(fw.lookup("NeMo 25.04").fp8_param_recipes)
    -- a workload spec naming the framework gets the same, unless it says otherwise
    assert.is_true(fw.apply({ framework = "Megatron-Bridge", precision_recipe = "mxfp8" }).fp8_param_gather)
    assert.is_nil(fw.apply({ framework = "Megatron-Bridge", precision_recipe = "nvfp4" }).fp8_param_gather)
    assert.is_false(fw.apply({ framework = "Megatron-Bridge", precision_recipe = "fp8_current",
      fp8_param_gather = false }).fp8_param_gather)
    assert.is_nil(fw.apply({ framework = "NeMo 25.04", precision_recipe = "fp8_current" }).fp8_param_gather)
  end)

  it("fits Llama 3.1 405B at TP 2 PP 8 CP 2 on GB300 in MXFP8 (measured at 968 tokens/s/GPU)", function()
    -- 25.3B parameters a GPU (405B / TP 2 / PP 8): the BF16 copy of the linears (2 bytes
    -- each) goes, the row- and column-wise MXFP8 copies (2 x 1 byte + 1/32 scales) stay
    local run = runner(docs_of("mbr2604_llama31_405b_gb300_mxfp8_256gpu"))
    local on, off = run(true), run(false)
    assert.is_true(on.memory.fits)
    assert.is_false(off.memory.fits)
    local saved = off.memory.components.weights - on.memory.components.weights
    -- the linears' BF16 copy: about 2 bytes a parameter of the stage's linears
    assert.is_true(saved > 1.9 * 25e9 and saved < 2.05 * 25.4e9, string.format("%.4g bytes", saved))
  end)
end)
