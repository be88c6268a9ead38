-- Headline figures users check first, run through `fathom validate`'s reader and the
-- calibrated hardware library (tests/fixtures/validation/headline_cases.yaml says where
-- each comes from). Nothing here is tuned to them.
local validate = require("fathom.validate")

describe("headline figures", function()
  local res = validate.run({ "tests/fixtures/validation/headline_cases.yaml" },
    "configs/hardware/hardware_library.yaml")
  local by = {}
  for _, c in ipairs(res.cases) do by[c.id] = c end

  it("Llama 3.1 405B on 16,384 H100 with Meta's layout lands within 10% of 40% MFU", function()
    local c = by.llama3_405b_meta_16k_h100
    assert.is_truthy(c, res.skipped[1] and res.skipped[1].reason)
    local mfu
    for _, m in ipairs(c.comparisons) do if m.metric == "mfu" then mfu = m.predicted end end
    io.stderr:write(string.format("\n  Llama 3.1 405B, 16K H100: MFU %.1f%%, %.0f TFLOP/s per GPU " ..
      "(Meta: 38-43%%, 400)\n", mfu, c.predicted))
    assert.is_true(math.abs(mfu - 40) <= 4, string.format("predicted %.1f%% MFU", mfu))
    -- KNOWN GAP (memory, not time): the footprint of this layout is over 80 GB (saved
    -- activations of 16 micro-batches in flight on the first stage without recomputation,
    -- ~70 GiB of the ~86), where Meta ran it. Not asserted until the footprint model
    -- matches; tracked in the README (Validation: what the remaining error is).
  end)

end)

-- Korthikanti et al. 2022 (arXiv 2205.05198) Table 5: end-to-end iteration time of four GPT
-- models (22B to 1T) on Selene, full recomputation vs selective recomputation + sequence
-- parallelism (validation/korthikanti2022_cases.yaml). Calculon (Isaev et al. 2023) reports a
-- mean |error| of 3.65% and a maximum of 8.87% over exactly these eight cases.
describe("Korthikanti et al. 2022 end to end", function()
  local file = "validation/korthikanti2022_cases.yaml"
  local res = validate.run({ file }, "configs/hardware/hardware_library.yaml")

  it("models all eight cases and beats Calculon's mean |error| (3.65%) and max (8.87%)", function()
    assert.are.equal(0, #res.skipped, res.skipped[1] and (res.skipped[1].id .. ": " .. res.skipped[1].reason))
    local want = {}
    for _, c in ipairs(require("fathom.config").load_mapping(file, "cases").cases) do want[c.id] = true end
    local sum, n, worst = 0, 0, 0
    io.stderr:write("\n  case                              predicted  measured  error\n")
    for _, c in ipairs(res.cases) do
      assert.is_true(want[c.id], c.id)
      want[c.id] = nil
      assert.are.equal("step_time_s", c.metric)
      local e = math.abs(c.relative_error)
      io.stderr:write(string.format("  %-32s %8.2f s %7.2f s %+6.1f%%\n", c.id, c.predicted, c.measured,
        100 * c.relative_error))
      sum, n, worst = sum + e, n + 1, math.max(worst, e)
      assert.is_true(e < 0.0887, string.format("%s: %+.1f%% (Calculon's max 8.87%%)", c.id, 100 * c.relative_error))
      assert.is_true(c.fits, c.id .. " should fit in 80 GB")
    end
    assert.are.equal(8, n)
    assert.is_nil(next(want))
    local mean = sum / n
    io.stderr:write(string.format("  mean |error| %.2f%%, max %.2f%% (Calculon: 3.65%%, 8.87%%)\n", 100 * mean,
      100 * worst))
    assert.is_true(mean < 0.0365, string.format("mean |error| %.2f%% is not below Calculon's 3.65%%", 100 * mean))
  end)
end)
