-- fathom.calibration: the achievable fraction of peak per GPU generation and kernel-library
-- generation (fathom.frameworks `kernels`), one setting per pair, never per case.
--   efficiency                fraction of the dense BF16/FP16 tensor peak GEMMs reach in the
--                             tiled kernel model (wave quantisation and small-GEMM padding on top)
--   fp8_efficiency            the same at the FP8 peak, for GEMMs run under a precision recipe
--                             (the recipe's cast kernels are costed by the core, outside it)
--   fp4_efficiency            the same at the FP4 peak (NVFP4/MXFP4)
--   attention_efficiency      fraction of the BF16 peak fused attention reaches
--   expert_gemm_overhead_sec  fixed cost per expert of a grouped expert GEMM
--
-- Where the numbers live: the hardware library (configs/hardware/hardware_library.yaml) holds
-- each GPU generation's setting for its REFERENCE kernel library (M.reference: today's
-- Transformer Engine 2.x / cuDNN stack, "2025", where the generation has one), so `search`,
-- `analyze` and `validate` use the same calibrated values. This file holds only how other
-- kernel libraries of that generation differ from the reference: M.factors, a ratio per
-- setting (PyTorch-native torchtitan, 2023's FlashAttention 2/Triton, TensorRT-LLM 2023).
-- `fathom validate --fit` refits both and prints them in these two forms.
local M = {}

-- Kernel-library generations in order (fathom.frameworks): the fallback walks to the
-- nearest calibrated one of the same GPU generation.
M.kernel_generations = { "2021", "2023", "trt2023", "torch2024", "vllm2024", "2024", "torch2025", "trt2025", "2025" }

-- lineage("torch2024") -> "torch"; Transformer Engine/cuDNN-era keys ("2024") -> ""
function M.lineage(k) return tostring(k):match("^%a+") or "" end

-- The settings a row carries (validate writes them on the node's compute component).
M.keys = { "efficiency", "fp8_efficiency", "fp4_efficiency", "attention_efficiency", "expert_gemm_overhead_sec" }
-- The settings that are fractions of a peak (what a derived generation's scale multiplies).
M.fractions = { "efficiency", "fp8_efficiency", "fp4_efficiency", "attention_efficiency" }

-- The kernel library whose setting the hardware library holds, per GPU generation: Ampere's
-- is LLM Foundry's 2023 stack (no 2025 training case runs on A100 here), every other
-- generation's Transformer Engine 2.x / cuDNN ("2025"). Derived generations take the
-- reference of the generation they derive from.
M.reference = { ampere = "2023" }

-- Kernel-library factors: setting = hardware library value x factor (fp4_efficiency follows
-- fp8_efficiency's). Fitted by `fathom validate --fit` over validation/published_cases.yaml,
-- modern_cases.yaml and korthikanti2022_cases.yaml; the sources each row rests on in the
-- comment (README: Validation).
M.factors = {
  cdna3 = {
    -- vLLM 2024 on ROCm (oci_mi300x_vllm: vLLM ROCm, Oct 2024, Llama 3.1 405B FP8): FP8
    -- linears through torch._scaled_mm / hipBLASLt with untuned decode shapes, Triton
    -- prefill attention, before AITER's kernels (2025) -- the large-batch decode and the
    -- prefill run at ~0.55-0.6 of CDNA 3's reference fractions (0.404 -> 0.22 of the nominal FP8 peak,
    -- 0.438 -> 0.27 of the BF16). Fitted on the six cases once the Infinity Fabric all-reduce
    -- latency is priced (hardware library, infinity_fabric_mi300), as 0.6 of the reference
    -- before Hopper's 2025 refit moved CDNA 3's derived values; rescaled so the fractions stay
    -- what the six cases gave. The other kernel libraries follow Hopper's factors
    vllm2024 = { efficiency = 0.62, fp8_efficiency = 0.54 },
  },
  ampere = {
    -- Megatron-LM 2021/2022 (narayanan2021, korthikanti2022): no fused attention, so
    -- attention_efficiency unused; 2023's floor (the 2023 reference sits on it)
    ["2021"] = { efficiency = 1.000, attention_efficiency = 0.997 },
    -- TensorRT-LLM v0.5/0.6 (trtllm_v061 A100, FP16 engines)
    trt2023 = { efficiency = 0.958, attention_efficiency = 1.243 },
  },
  hopper = {
    -- LLM Foundry 2023 (llmfoundry_mpt H100): FlashAttention 2 / Triton, TE 1.x FP8
    ["2023"] = { efficiency = 0.938, fp8_efficiency = 0.917, attention_efficiency = 0.237 },
    -- TensorRT-LLM v0.5/0.6 (trtllm_v061 H100; efficiency follows 2023's)
    trt2023 = { efficiency = 0.845, fp8_efficiency = 0.759, attention_efficiency = 0.999 },
    -- NeMo 24.x / MaxText 2024 (dgxc_benchmarking v25.01, nemo_long_sequence H100)
    ["2024"] = { efficiency = 0.995, fp8_efficiency = 0.931, attention_efficiency = 0.888 },
    -- torchtitan Dec 2024 / Jun 2025 (torchtitan_benchmarks; PyTorch-native GEMMs and SDPA),
    -- refitted once per-op selective checkpointing (recompute "op") prices the re-run GEMMs
    -- and eager runs pay for their unfused element-wise kernels (eager_elementwise)
    torch2024 = { efficiency = 0.993, fp8_efficiency = 1.243, attention_efficiency = 0.280 },
    torch2025 = { efficiency = 0.993, fp8_efficiency = 1.243, attention_efficiency = 0.281 },
    -- TensorRT-LLM 1.0 (PyTorch backend; trtllm_perf_overview: Llama 3.1 8B, 3.3 70B, 3.1 405B
    -- FP8 on H100/H200, 60 offline runs): the reference's fractions, not TRT-LLM 2023's that the
    -- lineage fallback gave (16.0% median / 28.8% p90 -> 9.1% / 20.0%; its prompt-heavy shapes
    -- were 12-33% too slow). Not fitted: the factors are 1. It also moves trtllm_dsr1's H200
    -- max-throughput row, too fast already, from +46% to +55%
    trt2025 = { efficiency = 1.0, fp8_efficiency = 1.0, attention_efficiency = 1.0 },
  },
}

-- reference_of(generation) -> the reference kernel library of a GPU generation.
function M.reference_of(gen)
  local seen = {}
  while gen and not seen[gen] do
    seen[gen] = true
    if M.reference[gen] then return M.reference[gen] end
    gen = M.derived[gen] and M.derived[gen].from
  end
  return "2025"
end

-- Generations without published cases here. `from` names the calibrated generation they
-- follow; `scale` is the ratio of what the part's kernels reach in public GEMM/attention
-- measurements to what that generation's reach (a datasheet-era neighbour, not a fit), on
-- the settings `scaled` names (default: the four fractions). The
-- hardware library's values for these parts were written as from's reference x scale, and
-- their other kernel libraries take from's factors (M.from_library); lookup also derives
-- from `from` when a generation has no row at all (leave-one-source-out refits). Where
-- `from` carries a GEMM tile cost (gemm_k_overhead_bytes: Hopper) and the part does not
-- (CDNA, Gaudi, TPU), the library's GEMM values take from's fraction on a K 8,192 GEMM
-- (Hopper: 0.599 BF16, 0.523 FP8), what the public GEMM measurements behind the scales
-- ran; lookup's derivation scales from's row itself, 3-6% higher (leave-one-out only). So B300,
-- GB300, MI350X/MI355X, Gaudi 3 and TPUs get a defensible prediction. `fit` (optional):
-- the settings the generation's own cases calibrate, the rest staying derived.
M.derived = {
  -- Blackwell Ultra (B300, GB300): the Blackwell kernels (cuBLASLt/TE/cuDNN) on 160 SMs (148
  -- on B200) with twice the SFU exponent rate. Its BF16/FP8 datasheet rates are Blackwell's,
  -- yet identical Megatron-Bridge recipes (performance summary 25.09-26.08: same model, GPUs,
  -- precision and layout) run 1.05-1.31x faster on GB300 than on GB200 (dense FP8 Llama 3
  -- ~1.24x) and 1.04-1.16x on B300 than on B200. The scale is fitted through the model on
  -- those pairs, where everything but the GPU cancels: 1.25 puts the median of predicted over
  -- measured GB300/GB200 pair ratios at 0.99 (53 pairs; dense Llama 0.97). (It was 1.15, the
  -- measured step ratio taken as the GEMMs' ratio, which the steps' non-GEMM time dilutes:
  -- predicted dense pairs then ran ~9% short.) Its NVFP4 rate already carries its gain (1.5x Blackwell's on the
  -- datasheet; identical NVFP4 Llama 3 70B recipes measure 1.49x), and fused attention stays
  -- at Blackwell's, the fit's ceiling. The pairs split by system: GB300 (NVL72, 1,400 W) gains
  -- ~1.22x over GB200, B300 (air-cooled HGX, 1,100 W) 1.11x over B200; the scale is GB300's
  -- (53 pairs), and B300 holds 0.92 of its nominal clock under a dense GEMM where GB300 holds
  -- its own (the library's dense_clock_fraction, fitted the same way on 17 B300/B200 pairs)
  blackwell_ultra = { from = "blackwell", scale = 1.25, scaled = { "efficiency", "fp8_efficiency" },
    why = "B300/GB300: Blackwell's kernels, BF16/FP8 GEMMs at 1.25x its fraction (identical-recipe pairs)" },
  -- Ada Lovelace (L40S, L4): SM 8.9 runs Ampere's kernel family (mma.sync tensor-core GEMMs,
  -- no wgmma/TMA; FlashAttention 2, FA3 being Hopper-only) -> Ampere's fractions; its FP8
  -- GEMMs (cuBLASLt on SM 8.9) are the same kernel family at twice the rate
  ada = { from = "ampere", why = "L40S/L4: Ada runs Ampere's kernel family (no wgmma, FA2)" },
  -- CDNA 2 (MI250X): rocBLAS/hipBLASLt BF16 GEMMs reach ~55-60% of peak per GCD, about
  -- A100's era; Frontier LLM-training reports land at 30-40% MFU
  cdna2 = { from = "ampere", scale = 0.85, why = "MI250X: CDNA 2, ~0.85 of A100's achieved fraction" },
  -- CDNA 3 (MI300X/MI325X): hipBLASLt BF16 GEMMs ~650-750 of 1,307 TFLOP/s (~0.55) and FP8
  -- ~1,200-1,300 of 2,615 (~0.48) against cuBLAS ~0.75 / ~0.65 on H100 -> ~0.75 of Hopper's
  -- GEMM fractions of the nominal peak on MI300X. Those measurements ran at the 1,207 MHz
  -- MI300X holds under a dense GEMM (AMD's MAF; the library's dense_clock_fraction 0.575,
  -- MI325X 0.689), which the core applies to the rates: of the peak at the held clock,
  -- 0.75 / 0.575 = 1.304 of Hopper's fractions of its nominal peak. `fit`: the settings
  -- CDNA 3's own cases calibrate (validate --fit leaves the others derived). Its fused
  -- attention (CK / AITER) is fitted on the 21 MLPerf LoRA runs (v5.0, v5.1; ROCm 6.4 / 7.0):
  -- 0.455 of the held-clock peak, half the 0.883 the ratio gave (0.26 of the nominal peak
  -- against Hopper's 0.68): the LoRA runs cannot tell FP8 GEMMs from attention apart (a flat
  -- valley, fathom calibrate's sigma > 1), so the GEMMs keep the kernel ratio and attention
  -- takes the rest, where AMD's kernels are known to lag (HipKittens, arXiv 2511.08083: AITER's
  -- and SDPA's GQA backward at 30% and 24% of the best on MI355X). Without those runs (LOSO)
  -- attention falls back to Hopper's x 1.304
  cdna3 = { from = "hopper", scale = 1.304, fit = { "attention_efficiency" },
    why = "MI300X/MI325X: ~0.75 of Hopper's GEMM fractions on MI300X, of the peak at the clock held under load; " ..
      "attention fitted" },
  -- CDNA 4 (MI350X/MI355X): the same ROCm stack on larger matrix cores; CDNA 3's fractions
  -- of the nominal peak on MI300X (x 0.575: no MAF is published for CDNA 4, so its rates stay
  -- nominal and its fractions carry MI300X's clock drop; MI350X's clock is MI355X's by the
  -- power law of AMD's MAF pair, its dense_clock_fraction), except fp8_efficiency, fitted
  -- (golden section, attention held) to the five MLPerf v5.1 LoRA runs: 0.674, the FP8 GEMMs
  -- of the liquid-cooled MI355X reaching 0.96 of CDNA 3's fraction of the held-clock peak
  -- where attention stays at MI300X's fraction of the nominal (validation/mlperf_lora_cases.yaml)
  cdna4 = { from = "cdna3", scale = 0.575, fit = { "fp8_efficiency" },
    why = "MI350X/MI355X: CDNA 3's achieved fractions on MI300X (same ROCm stack), FP8 fitted" },
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
  local seen, start = {}, generation
  local scale = { efficiency = 1.0, fp8_efficiency = 1.0, fp4_efficiency = 1.0, attention_efficiency = 1.0 }
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
        if generation == start then
          -- a derived generation's own rows: its reference was written into the hardware
          -- library from the generation it derives from (no case calibrates it)
          if M.derived[start] then name = string.format("%s (derived from %s)", name, M.derived[start].from) end
          return r, name
        end
        local out, shown = M.copy_row(r), {}
        for _, k in ipairs(M.fractions) do
          if out[k] then out[k] = out[k] * scale[k] end
          if scale[k] ~= 1.0 then shown[#shown + 1] = string.format("%s x %.2f", k, scale[k]) end
        end
        if #shown == 0 then return r, string.format("%s (derived: %s)", start, name) end
        return out, string.format("%s (derived: %s, %s)", start, name, table.concat(shown, ", "))
      end
    end
    local d = M.derived[generation]
    for _, k in ipairs(d and (d.scaled or M.fractions) or {}) do scale[k] = scale[k] * (d.scale or 1.0) end
    generation = d and d.from
  end
  return nil
end

-- copy_row(row) -> a copy of one setting.
function M.copy_row(r)
  local out = {}
  for _, k in ipairs(M.keys) do out[k] = r[k] end
  return out
end

-- copy(settings) -> a deep copy (refits change a copy).
function M.copy(settings)
  local out = {}
  for g, rows in pairs(settings) do
    out[g] = {}
    for k, v in pairs(rows) do out[g][k] = M.copy_row(v) end
  end
  return out
end

-- apply(ref, factor) -> the setting of a kernel library: the reference x its factors.
function M.apply(ref, f)
  local out = M.copy_row(ref)
  for _, k in ipairs({ "efficiency", "fp8_efficiency", "attention_efficiency" }) do
    if out[k] and f[k] then out[k] = math.min(1, out[k] * f[k]) end
  end
  if out.fp4_efficiency and f.fp8_efficiency then
    out.fp4_efficiency = math.min(1, out.fp4_efficiency * f.fp8_efficiency)
  end
  return out
end

-- from_library(lib_doc, gpus) -> settings {generation = {kernels = setting}}: each GPU
-- generation's reference row read from the hardware library (the compute component of the
-- first node of that generation in `gpus`, fathom.cases.gpus), the other kernel libraries
-- as the reference x M.factors (of the generation, else of the one it derives from).
function M.from_library(doc, gpus)
  local settings = {}
  for _, g in ipairs(gpus) do
    local node = doc.nodes and doc.nodes[g.node]
    local comp = node and doc.components.compute[node.device_compute]
    if comp and not settings[g.generation] then
      local ref = {}
      for _, k in ipairs(M.keys) do ref[k] = tonumber(comp[k]) end
      if ref.efficiency then settings[g.generation] = { [M.reference_of(g.generation)] = ref } end
    end
  end
  -- an overlay written by `fathom calibrate --library K` holds K's setting, not the
  -- reference's: K's row is the library's values, the reference follows by K's factors
  for gen, cal in pairs(type(doc.calibrated) == "table" and doc.calibrated or {}) do
    local rows, k = settings[gen], type(cal) == "table" and cal.kernels and tostring(cal.kernels)
    local rk = M.reference_of(gen)
    if rows and k and k ~= rk then
      local own, f = rows[rk], M.factors_of(gen)[k]
      rows[rk] = nil
      rows[k] = own
      if f then
        local ref = M.copy_row(own)
        for _, key in ipairs({ "efficiency", "fp8_efficiency", "attention_efficiency" }) do
          if ref[key] and f[key] then ref[key] = ref[key] / f[key] end
        end
        if ref.fp4_efficiency and f.fp8_efficiency then ref.fp4_efficiency = ref.fp4_efficiency / f.fp8_efficiency end
        rows[rk] = ref
      end
    end
  end
  for gen, rows in pairs(settings) do
    local ref = rows[M.reference_of(gen)]
    for k, f in pairs(ref and M.factors_of(gen) or {}) do
      if not rows[k] then rows[k] = M.apply(ref, f) end
    end
  end
  return settings
end

-- factors_of(generation) -> the kernel-library factors of a generation, else of the one it
-- derives from ({} when none).
function M.factors_of(gen)
  local out, from, seen = {}, gen, {}
  while from and not seen[from] do
    seen[from] = true
    for k, f in pairs(M.factors[from] or {}) do
      if out[k] == nil then out[k] = f end
    end
    from = M.derived[from] and M.derived[from].from
  end
  return out
end

-- Overlays -----------------------------------------------------------------------------------
-- A hardware-library overlay (what `fathom calibrate` writes) is a YAML mapping with
--   base: PATH            the library it changes (relative to the overlay's folder, else as
--                         --hardware-lib resolves it: configs/)
--   components: {compute|memory|interconnect: {NAME: {key: value}}}   keys replaced
--   nodes: {NAME: {key: value}}                                      keys replaced
--   calibrated: {GENERATION: {kernels: K, ...}}  which kernel library the compute
--                         efficiencies of that GPU generation were fitted for (validate reads
--                         them as K's setting; analyze, search and estimate use them as given)
--   description: TEXT
-- Anything a library accepts can be changed; a name the base lacks is an error at the
-- overlay's line. Every command that takes --hardware-lib takes an overlay (one loader).

local overlay_keys = { base = true, components = true, nodes = true, calibrated = true, description = true,
  notes = true }

-- merge_into(base, over) -> over's mapping with base's keys it lacks filled in (over's
-- table is kept, so an error in a value it sets points at the overlay's line)
local function merge_into(base, over)
  for k, v in pairs(base) do
    if over[k] == nil then over[k] = v end
  end
  return over
end

-- load_library(path [, seen]) -> the hardware library document at path, its overlays
-- (`base:`) applied. Errors name the overlay's file, line and column.
function M.load_library(path, seen)
  local config = require("fathom.config")
  local errors = require("fathom.errors")
  local doc = config.load_mapping(path, "hardware library")
  if doc.base == nil then return doc end
  seen = seen or {}
  if seen[path] then errors.at(doc, "base", "base", "overlays form a cycle through %s", path) end
  seen[path] = true
  for k in pairs(doc) do
    if not overlay_keys[k] then
      errors.at_key(doc, k, tostring(k), "unknown key in a hardware-library overlay (hint: base, components, " ..
        "nodes, calibrated, description)")
    end
  end
  if type(doc.base) ~= "string" then errors.at(doc, "base", "base", "expected the path of a hardware library") end
  local dir = path:match("^(.*)/[^/]*$")
  local base_path = doc.base
  if base_path:sub(1, 1) ~= "/" and dir then
    local f = io.open(dir .. "/" .. base_path, "r")
    if f then
      f:close()
      base_path = dir .. "/" .. base_path
    end
  end
  base_path = require("fathom.analysis").resolve(base_path)
  local f = io.open(base_path, "r")
  if not f then
    errors.at(doc, "base", "base", "no hardware library at '%s' (hint: a path relative to the overlay, " ..
      "or hardware/hardware_library.yaml)", doc.base)
  end
  f:close()
  local base = M.load_library(base_path, seen)
  local out = {}
  for k, v in pairs(base) do out[k] = v end
  out.components = {}
  for kind, defs in pairs(base.components or {}) do out.components[kind] = defs end
  local comps = doc.components
  if comps ~= nil and type(comps) ~= "table" then errors.at(doc, "components", "components", "expected a mapping") end
  for kind, defs in pairs(comps or {}) do
    local into = base.components and base.components[kind]
    if not into then
      errors.at_key(comps, kind, "components." .. tostring(kind), "no such component kind in the base library " ..
        "(hint: compute, memory, interconnect)")
    end
    local merged = {}
    for name, def in pairs(into) do merged[name] = def end
    for name, def in pairs(defs) do
      local path_s = "components." .. kind .. "." .. tostring(name)
      if not into[name] then errors.at_key(defs, name, path_s, "the base library has no %s '%s'", kind, name) end
      if type(def) ~= "table" then errors.at(defs, name, path_s, "expected a mapping of keys to replace") end
      merged[name] = merge_into(into[name], def)
    end
    out.components[kind] = merged
  end
  if doc.nodes ~= nil then
    if type(doc.nodes) ~= "table" then errors.at(doc, "nodes", "nodes", "expected a mapping") end
    out.nodes = {}
    for name, def in pairs(base.nodes or {}) do out.nodes[name] = def end
    for name, def in pairs(doc.nodes) do
      if type(def) ~= "table" then errors.at(doc.nodes, name, "nodes." .. tostring(name), "expected a mapping") end
      out.nodes[name] = base.nodes[name] and merge_into(base.nodes[name], def) or def
    end
  end
  if doc.calibrated ~= nil then
    if type(doc.calibrated) ~= "table" then errors.at(doc, "calibrated", "calibrated", "expected a mapping") end
    local cal = {}
    for g, v in pairs(base.calibrated or {}) do cal[g] = v end
    for g, v in pairs(doc.calibrated) do cal[g] = v end
    out.calibrated = cal
  end
  out.description = doc.description or base.description
  out.base = nil
  return out
end

-- to_factors(settings) -> references {generation = setting}, factors {generation = {kernels =
-- ratios}}: a fitted table split the way it is stored (hardware library, M.factors).
function M.to_factors(settings)
  local refs, factors = {}, {}
  for gen, rows in pairs(settings) do
    local rk = M.reference_of(gen)
    local ref = rows[rk]
    if ref then
      refs[gen] = ref
      for k, r in pairs(rows) do
        if k ~= rk then
          factors[gen] = factors[gen] or {}
          local f = {}
          for _, key in ipairs({ "efficiency", "fp8_efficiency", "attention_efficiency" }) do
            if r[key] and ref[key] then f[key] = r[key] / ref[key] end
          end
          factors[gen][k] = f
        end
      end
    end
  end
  return refs, factors
end

return M
