-- fathom's per-layer prediction against the transformer layers measured on one H100
-- (validation/measurements/h100_sxm/layers/, bench/gpu/compare_layers.lua; the table and what
-- the misfit says: validation/measurements/COMPARISON.md "Transformer layers").
--
-- The bands below are measured, not wished: each is the current value with room for
-- run-to-run noise in the measurements (1-3% between runs; 1.55x for one Inductor FP8 build,
-- below), so a change to a kernel model that moves a class of rows fails here and says by how
-- much. After a calibration or recipe change, run `build/fathom bench/gpu/compare_layers.lua`,
-- read the summary it prints and move a band here only with the mechanism in the comment.
local errors = require("fathom.errors")

local compare = dofile("bench/gpu/compare_layers.lua")

-- ratio = predicted / measured. Current numbers (hopper/2025 calibration, casts priced as
-- the mode writes them: cast_kernels compiled / eager, rowwise as fp8_rowwise; 2026-11-23):
--   group                  fwd+bwd median (range)   fwd median   saved activations median (range)
--   bf16/compile           1.04 (0.94-1.13)         1.19         1.14 (0.99-1.19)
--   fp8_tensorwise/compile 1.10 (0.82-1.33)         1.39         1.05 (0.53-1.44)
--   fp8_rowwise/compile    1.21 (0.81-1.38)         1.87         1.05 (0.53-1.44)
--   bf16/eager             1.27 (1.04-1.65)         1.41         1.04 (0.82-1.09)
--   fp8_tensorwise/eager   1.18 (1.07-1.35)         1.49         0.74 (0.44-1.04)
--   fp8_rowwise/eager      1.14 (1.05-1.26)         2.16         0.82 (0.66-0.84)
-- The FP8 forward alone is over-predicted most: the benchmark's no-grad forward writes only
-- the row-wise copy of X and W, the recipe's casts (priced in the forward) both.
local BANDS = {
  -- compiled BF16: GEMMs over-predicted ~1.3x, attention and the element-wise kernels under
  -- (COMPARISON.md): the sum lands within 6%.
  ["bf16/compile"] = { fwd_bwd = { 0.85, 1.15 }, row = { 0.7, 1.4 }, fwd = { 1.0, 1.35 }, saved = { 0.95, 1.25 } },
  -- compiled FP8 tensorwise: the lowest row is GPT-3 175B TP8 in run2 (8.58 ms measured;
  -- run1b measured the same configuration at 5.53 ms, Inductor's autotuned casts differ between
  -- compilations).
  ["fp8_tensorwise/compile"] = { fwd_bwd = { 0.95, 1.25 }, row = { 0.75, 1.45 }, fwd = { 1.2, 1.6 },
    saved = { 0.9, 1.2 } },
  -- rowwise: fp8_rowwise prices each operand quantised twice (10/6 of tensorwise's bytes, as
  -- measured eager); PyTorch 2.11's Inductor fuses part of that, so compiled rowwise is
  -- over-predicted (June 2025's torchtitan measured rowwise slower than tensorwise).
  ["fp8_rowwise/compile"] = { fwd_bwd = { 1.05, 1.35 }, row = { 0.7, 1.5 }, fwd = { 1.6, 2.1 } },
  -- eager BF16 over-predicted: eager_elementwise prices FP32 norm chains (36 B per element at
  -- BF16), PyTorch 2.11's F.rms_norm is one fused kernel (4 B); the TP8 shards, with the most
  -- norm elements per GEMM FLOP (32K tokens x 4096 against a 1/8 FFN), are 1.5-1.65x.
  ["bf16/eager"] = { fwd_bwd = { 1.1, 1.45 }, row = { 0.9, 1.8 }, fwd = { 1.2, 1.6 } },
  -- eager FP8: the unfused cast chains at their measured 9.5x traffic (cast_kernels eager)
  -- bring the casts within ~10%; what is left is the GEMMs' 1.5x.
  ["fp8_tensorwise/eager"] = { fwd_bwd = { 1.05, 1.3 }, row = { 0.95, 1.45 }, fwd = { 1.3, 1.7 } },
  ["fp8_rowwise/eager"] = { fwd_bwd = { 1.0, 1.3 }, row = { 0.95, 1.4 }, fwd = { 1.9, 2.4 } },
}

-- fathom's GEMM / attention / other split against the profiler's (median of predicted /
-- measured over the 6 profiled shapes; compare_layers.lua prints them as the summary's last
-- columns). Compiled BF16: GEMMs 1.30 (1.28-1.37: efficiency 0.601 of the BF16 peak against
-- the 0.74-0.80 measured), attention 0.72 (0.57-0.84: 0.652 against 0.44-0.55), other 0.60
-- (0.32-1.15). FP8 tensorwise: GEMMs 1.50 (fp8_efficiency 0.487 against 0.69-0.72), other
-- 0.78 (the casts at Inductor's measured traffic).
local SPLIT_BANDS = {
  ["bf16/compile"] = { gemm = { 1.15, 1.45 }, attention = { 0.6, 0.9 }, other = { 0.4, 0.85 } },
  ["fp8_tensorwise/compile"] = { gemm = { 1.3, 1.7 }, attention = { 0.6, 0.95 }, other = { 0.55, 1.0 } },
}

local function inside(v, band) return v >= band[1] and v <= band[2] end

-- violations(group, rows, summary) -> what lies outside the group's bands (empty: all inside)
local function violations(group, rows, summary)
  local band, s, out = BANDS[group], summary.groups[group], {}
  if not s then return { group .. " has no rows" } end
  local function check(what, v, b)
    if not inside(v, b) then
      out[#out + 1] = string.format("%s %s %.3f outside [%.2f, %.2f]", group, what, v, b[1], b[2])
    end
  end
  check("fwd+bwd median", s.fwd_bwd.median, band.fwd_bwd)
  check("fwd median", s.fwd.median, band.fwd)
  if band.saved then check("saved median", s.saved.median, band.saved) end
  for _, r in ipairs(rows) do
    if r.precision .. "/" .. r.mode == group then
      check(string.format("%s %s fwd+bwd (%.2f ms predicted, %.2f measured)", r.shape, r.run, r.pred.fwd_bwd_s * 1e3,
        r.fwd_bwd_s * 1e3), r.ratio_fwd_bwd, band.row)
    end
  end
  return out
end

describe("bench/gpu/compare_layers.lua: fathom per layer vs the measured H100 layers", function()
  local rows, summary = compare.compare()

  it("prices every measured row with the hopper reference calibration", function()
    assert.are.equal(91, #rows) -- 46 + 9 + 36 ok rows in the three CSVs
    assert.are.equal("hopper/2025", summary.calibration)
    io.stderr:write("\n  group                   rows  fwd  fwd+bwd (range)      saved\n")
    for _, g in ipairs(summary.order) do
      local s = summary.groups[g]
      io.stderr:write(string.format("  %-22s %5d %5.2f %5.2f (%.2f-%.2f) %5s\n", g, s.n, s.fwd.median,
        s.fwd_bwd.median, s.fwd_bwd.min, s.fwd_bwd.max, s.saved and string.format("%.2f", s.saved.median) or "-"))
    end
  end)

  for group in pairs(BANDS) do
    it(group .. ": median fwd and fwd+bwd ratios and every row inside the measured bands", function()
      local bad = violations(group, rows, summary)
      assert.are.equal(0, #bad, table.concat(bad, "\n"))
    end)
  end

  it("the bands catch a kernel-model change: 2023's kernels (FlashAttention 2 / Triton) fail them", function()
    local rows23, summary23 = compare.compare({ kernels = "2023" })
    assert.is_true(#violations("bf16/compile", rows23, summary23) > 0)
    assert.is_true(#violations("fp8_tensorwise/compile", rows23, summary23) > 0)
  end)

  it("the kernel classes partition the predicted layer time; GEMM, attention, other against the profile", function()
    for _, r in ipairs(rows) do
      local c = r.pred.classes
      assert.is_true(c.gemm > 0 and c.attention > 0 and c.other > 0)
      assert.is_near(r.pred.fwd_bwd_s, c.gemm + c.attention + c.other, 1e-9 * r.pred.fwd_bwd_s)
    end
    for group, bands in pairs(SPLIT_BANDS) do
      for cls, band in pairs(bands) do
        local m = summary.groups[group][cls].median
        assert.is_true(inside(m, band), string.format("%s %s median %.3f outside [%.2f, %.2f]", group, cls, m,
          band[1], band[2]))
      end
    end
  end)

  it("per layer = 2 layers - 1 layer: the kernel time and saved activations are linear in layers", function()
    local validate = require("fathom.validate")
    local calibration = require("fathom.calibration")
    local state = validate.state()
    local lib = validate.calibrated_lib(state, compare.node, (calibration.lookup("hopper", "2025", state.settings)))
    local row = rows[1]
    local r = {}
    for n = 1, 3 do r[n] = compare.evaluate(lib, row, n, "none") end
    local function d(n, f) return f(r[n + 1]) - f(r[n]) end
    for _, f in ipairs({
      function(x) return x.per_microbatch.forward_kernel_s end,
      function(x) return x.per_microbatch.backward_kernel_s end,
      function(x) return x.memory.components.saved_activations end,
    }) do
      assert.is_true(d(1, f) > 0)
      assert.is_near(d(1, f), d(2, f), 1e-9 * d(1, f))
    end
  end)

  it("prices the layer that was measured: forward FLOPs within 0.5% of the benchmark's count", function()
    -- the excess is fathom's element-wise FLOPs (norms, RoPE, SiLU, adds), which the benchmark's
    -- GEMM + causal-attention count leaves out: 0.05-0.4% today
    for _, r in ipairs(rows) do
      assert.is_true(r.ratio_flops >= 1.0 and r.ratio_flops <= 1.005,
        string.format("%s: fathom %.4g FLOP forward, benchmark %.4g", r.shape, r.pred.flops_fwd,
          r.gemm_flops_fwd + r.attn_flops_fwd))
    end
  end)

  it("a layer costs the same in every run of a configuration (one prediction per shape)", function()
    local seen = {}
    for _, r in ipairs(rows) do
      local k = r.shape .. r.precision .. r.mode
      if seen[k] then assert.are.equal(seen[k], r.pred.fwd_bwd_s) end
      seen[k] = r.pred.fwd_bwd_s
    end
  end)

  it("FP8 tensorwise predicts faster GEMMs and slower casts than BF16 for every shape", function()
    local by = {}
    for _, r in ipairs(rows) do by[r.shape .. r.mode .. r.precision] = r.pred end
    for _, r in ipairs(rows) do
      if r.precision == "bf16" then
        local f = by[r.shape .. r.mode .. "fp8_tensorwise"]
        assert.is_true(f.classes.gemm < r.pred.classes.gemm, r.shape)
        assert.is_true(f.classes.other > r.pred.classes.other, r.shape)
        assert.are.equal(r.pred.classes.attention, f.classes.attention)
      end
    end
  end)

  it("refuses a malformed measurement file with file:line, the column and a hint", function()
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write("shape,hidden,heads,kv_heads,head_dim,ffn,micro_batch,seq,precision,mode,status,fwd_s,fwd_bwd_s\n")
    f:write("a,4096,32,8,128,14336,1,8192,bf16,compile,ok,0.006,0.02\n")
    f:write("b,4096,32,8,128,14336,1,8192,bf16,compile,ok,fast,0.02\n")
    f:close()
    local ok, err = pcall(compare.read, path)
    os.remove(path)
    assert.is_false(ok)
    assert.is_true(errors.is_input(err))
    assert.matches(":3: fwd_s: 'fast' is not a non%-negative number", tostring(err))
    f = assert(io.open(path, "w"))
    f:write("shape,hidden,heads,kv_heads,head_dim,ffn,micro_batch,seq,precision,mode,status,fwd_s,fwd_bwd_s\n")
    f:write("a,4096,32,8,128,14336,1,8192,mxfp8,compile,ok,0.006,0.02\n")
    f:close()
    ok, err = pcall(compare.read, path)
    os.remove(path)
    assert.is_false(ok)
    assert.matches(":2: precision: 'mxfp8' is not one fathom maps", tostring(err))
    ok, err = pcall(compare.read, "/nonexistent/layers.csv")
    assert.is_false(ok)
    assert.matches("cannot read", tostring(err))
  end)
end)
