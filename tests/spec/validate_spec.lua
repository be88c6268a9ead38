-- Published checks: Narayanan et al. 2021 Table 1 (Megatron-LM on Selene) end
-- to end, one A100 calibration shared by every case (configs/hardware).
local validate = require("fathom.validate")

describe("fathom.validate #paper", function()
  local res = validate.run("validation/published_cases.yaml", "configs/hardware/hardware_library.yaml")

  it("predicts every Megatron Table 1 case within 15% of the measured TFLOP/s per GPU", function()
    local n = 0
    io.stderr:write("\n  case                       predicted  measured  error\n")
    for _, c in ipairs(res.cases) do
      if c.id:match("^narayanan2021_t1_") then
        n = n + 1
        io.stderr:write(string.format("  %-26s %9.1f %9.1f %+6.1f%%\n", c.id, c.predicted, c.measured,
          100 * c.relative_error))
        assert.is_true(math.abs(c.relative_error) <= 0.15,
          string.format("%s: predicted %.1f, measured %.1f", c.id, c.predicted, c.measured))
        assert.is_true(c.fits, c.id .. " should fit in 80 GB")
      end
    end
    assert.are.equal(10, n)
  end)

  it("summarises every source with a median and p90 and names skipped cases", function()
    assert.is_truthy(res.sources.narayanan2021)
    assert.is_truthy(res.sources.llmfoundry_mpt)
    assert.are.equal(138, res.sources.llmfoundry_mpt.count)
    -- the TensorRT-LLM inference cases run too, one calibration per GPU for all of them
    assert.are.equal(45, res.sources.trtllm_v061.count)
    assert.is_true(res.sources.llmfoundry_mpt.median_abs_error < 0.15)
    for _, s in ipairs(res.skipped) do
      assert.is_string(s.reason)
      assert.is_string(s.id)
    end
  end)

  it("quantile() interpolates", function()
    assert.are.equal(2, validate.quantile({ 1, 2, 3 }, 0.5))
    assert.are.equal(2.5, validate.quantile({ 1, 2, 3, 4 }, 0.5))
    assert.is_nil(validate.quantile({}, 0.5))
  end)
end)
