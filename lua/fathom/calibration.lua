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
M.kernel_generations = { "2021", "2023", "torch2024", "2024", "torch2025", "2025" }

-- Fitted by `fathom validate --fit` over validation/published_cases.yaml and
-- modern_cases.yaml (the sources each row rests on in the comment; README: Validation).
M.settings = {
  ampere = {
    -- Megatron-LM 2021 (narayanan2021): no fused attention, so attention_efficiency unused
    ["2021"] = { efficiency = 0.661, attention_efficiency = 0.30 },
    -- LLM Foundry 2023 (llmfoundry_mpt A100): FlashAttention 2 / Triton
    ["2023"] = { efficiency = 0.694, attention_efficiency = 0.304 },
  },
  hopper = {
    -- LLM Foundry 2023 (llmfoundry_mpt H100), TensorRT-LLM v0.6 rides along
    ["2023"] = { efficiency = 0.520, fp8_efficiency = 0.350, attention_efficiency = 0.179 },
    -- NeMo 24.x / MaxText 2024 (dgxc_benchmarking v25.01, nemo_long_sequence H100)
    ["2024"] = { efficiency = 0.604, fp8_efficiency = 0.441, attention_efficiency = 0.613 },
    -- NeMo 25.x, NeMo AutoModel (dgxc_benchmarking v25.05 H100, nemo_automodel_perf)
    ["2025"] = { efficiency = 0.647, fp8_efficiency = 0.442, attention_efficiency = 0.613 },
    -- torchtitan Dec 2024 / Jun 2025 (torchtitan_benchmarks)
    torch2024 = { efficiency = 0.378, fp8_efficiency = 0.325, attention_efficiency = 0.187 },
    torch2025 = { efficiency = 0.379, fp8_efficiency = 0.326, attention_efficiency = 0.346 },
  },
  blackwell = {
    -- NeMo 25.04 on GB200 NVL72 and DGX B200 (dgxc_benchmarking v25.05, nemo_long_sequence B200)
    ["2025"] = { efficiency = 0.489, fp8_efficiency = 0.366, attention_efficiency = 0.849 },
  },
}

-- Generations without published cases here: the neighbour whose settings they take.
M.derived = {
  cdna2 = { from = "ampere", why = "MI250X: CDNA 2 with rocBLAS/hipBLASLt of A100's era" },
  cdna3 = { from = "hopper", why = "MI300X/MI325X: hipBLASLt GEMMs reach about Hopper's fraction of peak" },
  cdna4 = { from = "blackwell", why = "MI350X/MI355X: no published cases; Blackwell-era fraction" },
  gaudi3 = { from = "hopper", why = "Gaudi 3: no published cases; Hopper-era fraction" },
  tpu_v5 = { from = "hopper", why = "TPU v5p: no published cases; Hopper-era fraction" },
  tpu_v6 = { from = "hopper", why = "TPU v6e: no published cases; Hopper-era fraction" },
}

local function index_of(list, v)
  for i, x in ipairs(list) do if x == v then return i end end
end

-- lookup(generation, kernels [, settings]) -> setting, "generation/kernels" it came from.
-- Falls back to the nearest calibrated kernel generation (newer preferred on ties), then
-- to the generation named in M.derived.
function M.lookup(generation, kernels, settings)
  settings = settings or M.settings
  local seen = {}
  while generation and not seen[generation] do
    seen[generation] = true
    local rows = settings[generation]
    if rows then
      if rows[kernels] then return rows[kernels], generation .. "/" .. kernels end
      local want = index_of(M.kernel_generations, kernels) or #M.kernel_generations
      local best, bestd
      for k in pairs(rows) do
        local i = index_of(M.kernel_generations, k) or 0
        local d = math.abs(i - want) - (i > want and 0.5 or 0)
        if bestd == nil or d < bestd then best, bestd = k, d end
      end
      if best then return rows[best], generation .. "/" .. best end
    end
    generation = M.derived[generation] and M.derived[generation].from
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
