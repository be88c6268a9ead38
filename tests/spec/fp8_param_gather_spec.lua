-- fp8_param_gather: a workload key the case reader sets from "FP8 params" (MLPerf v4.0
-- GPT-3 on 10,752 H100, TP 4 PP 6 DP 448, distributed optimizer). With it the distributed
-- optimizer's all-gather moves 1 byte a weight instead of the compute width's 2, so the
-- DP bytes a step fall by exactly the parameters this GPU gathers (ZeRO-1 re-gathers every
-- trained parameter), and the step gets no slower.
local validate = require("fathom.validate")
local cases = require("fathom.cases")
local calibration = require("fathom.calibration")
local scenario = require("fathom.scenario")

describe("fp8_param_gather", function()
  it("halves the distributed optimizer's weight all-gather under FP8", function()
    local case
    for _, c in ipairs(validate.load({ "validation/mlperf_cases.yaml" })) do
      if c.id == "mlperf40_gpt3_175b_h100_10752" then case = c end
    end
    local docs = assert(cases.training_docs(case))
    assert.is_true(docs.workload.fp8_param_gather)
    assert.are.equal(2, docs.workload.float_size_bytes)
    local state = validate.state("configs/hardware/hardware_library.yaml")
    local setting = calibration.lookup(docs.gpu.generation, docs.fw.kernels, state.settings)
    local lib = validate.calibrated_lib(state, docs.gpu.node, setting)
    local function run(flag)
      docs.workload.fp8_param_gather = flag
      return scenario.new({ hardware_lib = lib, physical = docs.physical, logical = docs.logical,
        model = docs.model, workload = docs.workload }):evaluate()
    end
    local on, off = run(true), run(false)
    local params = on.params_per_gpu
    assert.is_true(params > 1e9)
    assert.is_near(params, off.comm.dp.bytes_per_step - on.comm.dp.bytes_per_step, 1e-6 * params)
    assert.is_true(on.step_time_s < off.step_time_s)
  end)
end)
