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

  -- Korthikanti et al. 2022's eight end-to-end cases (mean |error| below Calculon's 3.65%)
  -- are not in the case files (validation/*.yaml), so there is nothing to check yet.
end)
