-- fathom.calibration: the achievable fraction of peak per GPU generation and kernel-library
-- generation (fathom.frameworks `kernels`), one setting per pair, never per case.
--   efficiency            fraction of the dense tensor peak (at the precision run) that GEMMs
--                         reach in the tiled kernel model (the compute component's efficiency)
--   attention_efficiency  the same for fused attention kernels (FlashAttention-class)
-- `fathom validate --fit` refits the fitted rows from the published cases; rows marked
-- `derived` have no calibration data and take the value of the generation named in `from`
-- (a defensible datasheet-era neighbour), so B300, GB300, MI350X/MI355X get a prediction.
local M = {}

-- Kernel-library generations in order (fathom.frameworks): the fallback walks to the
-- nearest calibrated one of the same GPU generation.
M.kernel_generations = { "2021", "2023", "trt2023", "torch2024", "2024", "torch2025", "trt2025", "2025" }

-- lineage("torch2024") -> "torch"; Transformer Engine/cuDNN-era keys ("2024") -> ""
function M.lineage(k) return tostring(k):match("^%a+") or "" end

-- Fitted by `fathom validate --fit` over validation/published_cases.yaml and
-- modern_cases.yaml (the sources each row rests on in the comment; README: Validation).
M.settings = {
  ampere = {
    -- Megatron-LM 2021 (narayanan2021): no fused attention, so attention_efficiency unused
    ["2021"] = { efficiency = 0.660, attention_efficiency = 0.300 },
    -- LLM Foundry 2023 (llmfoundry_mpt A100): FlashAttention 2 / Triton
    ["2023"] = { efficiency = 0.694, attention_efficiency = 0.304 },
    -- TensorRT-LLM v0.5/0.6 (trtllm_v061 A100, FP16 engines)
    trt2023 = { efficiency = 0.700, attention_efficiency = 0.374 },
  },
  hopper = {
    -- LLM Foundry 2023 (llmfoundry_mpt H100)
    ["2023"] = { efficiency = 0.515, fp8_efficiency = 0.449, attention_efficiency = 0.181 },
    -- TensorRT-LLM v0.5/0.6 (trtllm_v061 H100, FP8 engines: efficiency follows hopper/2023)
    trt2023 = { efficiency = 0.520, fp8_efficiency = 0.419, attention_efficiency = 0.749 },
    -- NeMo 24.x / MaxText 2024 (dgxc_benchmarking v25.01, nemo_long_sequence H100)
    ["2024"] = { efficiency = 0.586, fp8_efficiency = 0.498, attention_efficiency = 0.644 },
    -- NeMo 25.x, NeMo AutoModel (dgxc_benchmarking v25.05 H100, nemo_automodel_perf, SGLang)
    ["2025"] = { efficiency = 0.650, fp8_efficiency = 0.508, attention_efficiency = 0.644 },
    -- torchtitan Dec 2024 / Jun 2025 (torchtitan_benchmarks)
    torch2024 = { efficiency = 0.360, fp8_efficiency = 0.380, attention_efficiency = 0.202 },
    torch2025 = { efficiency = 0.361, fp8_efficiency = 0.381, attention_efficiency = 0.416 },
  },
  blackwell = {
    -- NeMo 25.04 on GB200 NVL72 and DGX B200 (dgxc_benchmarking v25.05, nemo_long_sequence B200)
    ["2025"] = { efficiency = 0.489, fp8_efficiency = 0.444, attention_efficiency = 0.749 },
  },
}

-- Generations without published cases here. `from` names the calibrated generation whose
-- kernel-generation rows they follow; `scale` multiplies its settings by the ratio of what
-- the part's kernels reach in public GEMM/attention measurements to what Hopper's reach
-- (a datasheet-era neighbour, not a fit): so B300, GB300, MI350X/MI355X, Gaudi 3 and TPUs
-- get a defensible prediction and LOSO shows what an uncalibrated generation costs.
M.derived = {
  -- Blackwell Ultra (B300, GB300): the Blackwell kernels (cuBLASLt/TE/cuDNN) on more SMs
  blackwell_ultra = { from = "blackwell", why = "B300/GB300: Blackwell's kernels and fractions" },
  -- CDNA 2 (MI250X): rocBLAS/hipBLASLt BF16 GEMMs reach ~55-60% of peak per GCD, about
  -- A100's era; Frontier LLM-training reports land at 30-40% MFU
  cdna2 = { from = "ampere", scale = 0.85, why = "MI250X: CDNA 2, ~0.85 of A100's achieved fraction" },
  -- CDNA 3 (MI300X/MI325X): hipBLASLt BF16 GEMMs ~650-750 of 1,307 TFLOP/s (~0.55) and FP8
  -- ~1,200-1,300 of 2,615 (~0.48) against cuBLAS ~0.75 / ~0.65 on H100; CK FlashAttention
  -- forward ~0.35-0.4 of peak against FA3 ~0.6-0.75 -> ~0.75 of Hopper's fractions
  cdna3 = { from = "hopper", scale = 0.75, why = "MI300X/MI325X: ~0.75 of Hopper's achieved fractions" },
  -- CDNA 4 (MI350X/MI355X): the same ROCm stack on larger matrix cores; CDNA 3's fractions
  cdna4 = { from = "cdna3", why = "MI350X/MI355X: CDNA 3's achieved fractions (same ROCm stack)" },
  -- Gaudi 3: Intel quotes ~0.55-0.6 MME utilisation on large BF16 GEMMs -> ~0.8 of Hopper's
  gaudi3 = { from = "hopper", scale = 0.8, why = "Gaudi 3: ~0.8 of Hopper's achieved fractions" },
  -- TPU v5p/v6e: MaxText reports 55-65% MFU on dense models (XLA-fused kernels); Hopper's
  -- fractions are that neighbourhood
  tpu_v5 = { from = "hopper", why = "TPU v5p: Hopper's achieved fractions (MaxText-reported MFU ~55-65%)" },
  tpu_v6 = { from = "hopper", why = "TPU v6e: Hopper's achieved fractions" },
}

local function index_of(list, v)
  for i, x in ipairs(list) do if x == v then return i end end
end

-- lookup(generation, kernels [, settings]) -> setting, "generation/kernels" it came from.
-- Falls back to the nearest calibrated kernel generation (newer preferred on ties), then
-- to the generation named in M.derived.
function M.lookup(generation, kernels, settings)
  settings = settings or M.settings
  local seen, scale, start = {}, 1.0, generation
  while generation and not seen[generation] do
    seen[generation] = true
    local rows = settings[generation]
    if rows then
      local key = kernels
      if not rows[key] then
        -- nearest of the same lineage, else of the Transformer Engine/cuDNN lineage, else any
        local want = index_of(M.kernel_generations, kernels) or #M.kernel_generations
        local bestd
        key = nil
        for k in pairs(rows) do
          local i = index_of(M.kernel_generations, k) or 0
          local d = math.abs(i - want) - (i > want and 0.5 or 0)
          if M.lineage(k) ~= M.lineage(kernels) then d = d + (M.lineage(k) == "" and 100 or 200) end
          if bestd == nil or d < bestd then key, bestd = k, d end
        end
      end
      if key then
        local r = rows[key]
        local name = generation .. "/" .. key
        if generation == start then return r, name end
        if scale == 1.0 then return r, string.format("%s (derived: %s)", start, name) end
        return { efficiency = r.efficiency * scale, attention_efficiency = r.attention_efficiency * scale,
          fp8_efficiency = r.fp8_efficiency and r.fp8_efficiency * scale },
          string.format("%s (derived: %s x %.2f)", start, name, scale)
      end
    end
    local d = M.derived[generation]
    if d then scale = scale * (d.scale or 1.0) end
    generation = d and d.from
  end
  return nil
end

-- copy(settings) -> a deep copy (refits change a copy).
function M.copy(settings)
  local out = {}
  for g, rows in pairs(settings or M.settings) do
    out[g] = {}
    for k, v in pairs(rows) do
      out[g][k] = { efficiency = v.efficiency, attention_efficiency = v.attention_efficiency,
        fp8_efficiency = v.fp8_efficiency }
    end
  end
  return out
end

return M
