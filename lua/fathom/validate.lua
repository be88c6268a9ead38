-- fathom.validate: run published measurements (validation/*.yaml: the case schema read
-- by fathom.cases) through the model and compare every metric in its own unit.
-- Calibration is one setting per GPU generation and kernel-library generation
-- (fathom.calibration); framework defaults come from fathom.frameworks; nothing here
-- is tuned per case.
local calibration = require("fathom.calibration")
local cases = require("fathom.cases")
local config = require("fathom.config")
local core = require("fathom.core")
local errors = require("fathom.errors")
local frameworks = require("fathom.frameworks")
local scenario = require("fathom.scenario")
local spec = require("fathom.spec")

local M = {}

M.default_files = { "validation/published_cases.yaml", "validation/modern_cases.yaml",
  "validation/korthikanti2022_cases.yaml", "validation/mlperf_cases.yaml", "validation/mlperf_lora_cases.yaml",
  "validation/amd_rocm_vllm_cases.yaml", "validation/trtllm_perf_cases.yaml" }

local function quantile(sorted, q)
  if #sorted == 0 then return nil end
  local pos = q * (#sorted - 1) + 1
  local lo = math.floor(pos)
  local hi = math.min(lo + 1, #sorted)
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo)
end
M.quantile = quantile

-- Metrics ----------------------------------------------------------------------------------
-- ctx: {case, r (core result), gpus, p (parallelism), peak (dense FLOP/s per GPU at the
-- precision run), recompute}. Each returns the prediction in the metric's own unit, or nil
-- when the case lacks what the metric needs.

local function tokens_per_step(ctx) return ctx.p.global_batch * ctx.p.seq_len end
local function step(ctx) return ctx.r.step_time_s end
local function model_flops_per_gpu_s(ctx)
  return ctx.r.model_flops_per_step * ctx.layer_scale / (ctx.r.step_time_s * ctx.gpus)
end

-- Narayanan et al. 2021 Eq. 3: F = 72 B s l h^2 (1 + s / 6h + V / 16 l h) per iteration
-- without recomputation, 96 (x 4/3) with full recomputation (the convention of
-- Megatron-LM's "achieved TFLOP/s").
local function megatron_flops(ctx)
  local m, p = ctx.case.model, ctx.p
  local B, s, l, h, V = p.global_batch + 0.0, p.seq_len + 0.0, m.layers + 0.0, m.hidden + 0.0, m.vocab + 0.0
  local k = ctx.recompute == "full" and 96 or 72
  return k * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
end

-- the peak a percentage is of: "% of 312 TFLOP/s" in the unit, else the GPU's dense peak
local function peak_of(ctx, m)
  local n = tostring(m.unit or ""):match("of%s*([%d%.]+)%s*[tT][fF][lL][oO][pP]")
  return n and tonumber(n) * 1e12 or ctx.peak
end

local function percent(m, frac)
  -- "%" units, or values above 1 written as percentages
  if tostring(m.unit or ""):find("%%") or m.value > 1.5 then return 100 * frac end
  return frac
end

-- time to train: tokens (or samples, steps) to train from the case; the metric's name may
-- carry them ("est_training_days_300B_tokens")
local scale = { K = 1e3, M = 1e6, B = 1e9, T = 1e12 }
local function train_seconds(ctx, m)
  local tr = ctx.case.training or {}
  local n, u = tostring(m.metric):match("_(%d+%.?%d*)([KMBT])_tokens")
  local tokens = n and tonumber(n) * scale[u]
    or tonumber(tr.train_tokens or tr.total_tokens or tr.tokens_to_train or tr.tokens)
  local steps = tonumber(tr.train_steps or tr.steps or tr.train_iters or tr.iterations)
  local samples = tonumber(tr.train_samples or tr.samples_to_train or tr.samples or tr.samples_to_converge)
  -- other spellings: any number under training whose key names tokens, samples or steps
  for k, v in pairs(tr) do
    local key, x = tostring(k):lower(), tonumber(v)
    if x and not key:find("time") and not key:find("per") then
      if not tokens and key:find("token") then tokens = x
      elseif not samples and (key:find("sample") or key:find("sequence")) then samples = x
      elseif not steps and (key:find("step") or key:find("iter")) then steps = x end
    end
  end
  if not (tokens or steps or samples) then
    -- "... after 1,234,567 samples" / "2.5B tokens" / "4,000 steps" in the measurement's note
    local note = tostring(m.note or "")
    local num, mult, what = note:match("([%d,%.]+)%s*([KMBT]?)%s*(%a+)")
    while num do
      local v = tonumber((num:gsub(",", "")))
      local k = (scale[mult] or 1)
      if v and what:find("^token") then tokens = v * k break end
      if v and what:find("^sample") then samples = v * k break end
      if v and (what:find("^step") or what:find("^iter")) then steps = v * k break end
      note = note:gsub("^.-" .. num:gsub("%p", "%%%0"), "", 1)
      num, mult, what = note:match("([%d,%.]+)%s*([KMBT]?)%s*(%a+)")
    end
  end
  if tokens then return tokens / tokens_per_step(ctx) * step(ctx) end
  if samples then return samples / ctx.p.global_batch * step(ctx) end
  if steps then return steps * step(ctx) end
end

M.metrics = {
  step_time_s = { class = "time", fn = step },
  train_step_time_s = { class = "time", fn = step },
  median_train_step_timing = { class = "time", fn = step },
  train_step_timing = { class = "time", fn = step },
  iteration_time_s = { class = "time", fn = step },
  step_time_ms = { class = "time", fn = function(c) return 1e3 * step(c) end },
  tokens_per_sec = { class = "time", fn = function(c) return tokens_per_step(c) / step(c) end },
  tokens_per_sec_total = { class = "time", fn = function(c) return tokens_per_step(c) / step(c) end },
  throughput_tokens_per_s = { class = "time", fn = function(c) return tokens_per_step(c) / step(c) end },
  tokens_per_sec_per_gpu = { class = "time", fn = function(c) return tokens_per_step(c) / step(c) / c.gpus end },
  throughput_tokens_per_s_per_gpu = { class = "time",
    fn = function(c) return tokens_per_step(c) / step(c) / c.gpus end },
  samples_per_sec = { class = "time", fn = function(c) return c.p.global_batch / step(c) end },
  throughput_samples_per_s = { class = "time", fn = function(c) return c.p.global_batch / step(c) end },
  samples_per_sec_per_gpu = { class = "time", fn = function(c) return c.p.global_batch / step(c) / c.gpus end },
  model_tflops_per_gpu = { class = "time", fn = function(c) return model_flops_per_gpu_s(c) / 1e12 end },
  tflops_per_gpu = { class = "time", fn = function(c) return model_flops_per_gpu_s(c) / 1e12 end },
  achieved_tflops_per_gpu = { class = "time",
    fn = function(c) return megatron_flops(c) / (step(c) * c.gpus) / 1e12 end },
  aggregate_pflops = { class = "time", fn = function(c) return megatron_flops(c) / step(c) / 1e15 end },
  percent_of_theoretical_peak = { class = "time",
    fn = function(c, m) return percent(m, megatron_flops(c) / (step(c) * c.gpus) / peak_of(c, m)) end },
  mfu = { class = "time", fn = function(c, m) return percent(m, model_flops_per_gpu_s(c) / peak_of(c, m)) end },
  hfu = { class = "time", fn = function(c, m)
    return percent(m, c.r.hardware_flops_per_step * c.layer_scale / (step(c) * c.gpus) / peak_of(c, m)) end },
  time_to_train_min = { class = "time", fn = function(c, m) local s = train_seconds(c, m) return s and s / 60 end },
  time_to_train_hours = { class = "time",
    fn = function(c, m) local s = train_seconds(c, m) return s and s / 3600 end },
  time_to_train_days = { class = "time",
    fn = function(c, m) local s = train_seconds(c, m) return s and s / 86400 end },
  peak_memory_gib = { class = "memory", fn = function(c) return c.r.memory.peak_bytes / 2 ^ 30 end },
  peak_memory_gb = { class = "memory", fn = function(c) return c.r.memory.peak_bytes / 1e9 end },
}

-- metric(name [, unit]) -> the row for a metric, by name (including the time-to-train family,
-- "est_training_days_300B_tokens"), else by its unit and the words of its name.
function M.metric(name, unit)
  name = tostring(name)
  if M.metrics[name] then return M.metrics[name] end
  local n, u = name:lower(), tostring(unit or ""):lower()
  local train = n:find("train") or n:find("ttt")
  local tunit = n:match("training_(%a+)_") or n:match("time_to_train_(%a+)") or (train and u:match("^%s*(%a+)"))
  if tunit then
    if tunit:find("^day") then return M.metrics.time_to_train_days end
    if tunit:find("^h") then return M.metrics.time_to_train_hours end
    if tunit:find("^min") then return M.metrics.time_to_train_min end
  end
  if u:find("gib") and n:find("mem") then return M.metrics.peak_memory_gib end
  if u:find("gb") and n:find("mem") then return M.metrics.peak_memory_gb end
  local per_gpu = u:find("gpu") or n:find("per_gpu") or n:find("per_device")
  if u:find("tok") and u:find("/s") then
    return per_gpu and M.metrics.tokens_per_sec_per_gpu or M.metrics.tokens_per_sec
  end
  if (u:find("sample") or u:find("seq")) and u:find("/s") then
    return per_gpu and M.metrics.samples_per_sec_per_gpu or M.metrics.samples_per_sec
  end
  if u:find("tflop") then return M.metrics.model_tflops_per_gpu end
  if n:find("mfu") then return M.metrics.mfu end
  if n:find("hfu") then return M.metrics.hfu end
  if n:find("step") or n:find("iter") then
    if u:find("^%s*ms") then return M.metrics.step_time_ms end
    if u:find("^%s*s") or u == "" then return M.metrics.step_time_s end
  end
end

-- The metric compared first when a case reports several (the most direct measurement).
M.priority = { "step_time_s", "train_step_time_s", "median_train_step_timing", "train_step_timing",
  "iteration_time_s", "step_time_ms", "tokens_per_sec_per_gpu", "throughput_tokens_per_s_per_gpu",
  "tokens_per_sec", "tokens_per_sec_total", "throughput_tokens_per_s", "samples_per_sec",
  "throughput_samples_per_s", "samples_per_sec_per_gpu", "achieved_tflops_per_gpu", "model_tflops_per_gpu",
  "tflops_per_gpu", "mfu", "time_to_train_min", "time_to_train_hours", "time_to_train_days" }

-- Hardware per calibration ------------------------------------------------------------------

-- rejected(err) -> the skip reason for a configuration the model refuses (errors.is_input:
-- an input, range, unsupported or tiling refusal); any other error is a bug and is raised
-- again, so it surfaces instead of passing as a skipped case.
local function rejected(err)
  errors.pass(err)
  if not errors.is_input(err) then error(err, 0) end
  return "model rejected the configuration: " .. errors.one_line(tostring(err))
end

-- A library whose node `node` carries `setting` on its compute component (efficiency,
-- fp8_efficiency, fp4_efficiency, attention_efficiency, expert_gemm_overhead_sec where
-- set); cached per node and setting. Precision is the core's business: under a training
-- recipe (workload precision_recipe) the linear GEMMs run at FP8/FP4 with fp8_/fp4_efficiency
-- and their cast kernels, attention stays at BF16 with attention_efficiency.
local setting_keys = { "efficiency", "fp8_efficiency", "fp4_efficiency", "attention_efficiency",
  "expert_gemm_overhead_sec" }
-- The scale-out fabric a case states (cases.scale_out: bits/s per GPU; RoCE, IB or unsaid) where it
-- is not the node's: the node's scale-out interconnect (a RoCE fabric's from the library's
-- roce_400g where the node's is InfiniBand) at that bandwidth, one link per GPU. Returns the
-- interconnect and its name, or nil when the node's already is the case's.
local function case_scale_out(doc, node, so)
  if not so then return nil end
  local ics = doc.components.interconnect
  local name = (doc.nodes[node].device_interconnects or {}).scale_out
  local base = name and ics[name]
  if not base then return nil end
  local bw = so.bits_per_s / 8
  local have = (base.bandwidth_nominal or 0) * (base.num_links or 1)
  local eth = base.type == "ethernet"
  local kind_differs = so.roce ~= nil and eth ~= so.roce
  if math.abs(bw - have) <= 0.01 * have and not kind_differs then return nil end
  if so.roce and not eth and ics.roce_400g then base = ics.roce_400g end
  local ic = {}
  for k, v in pairs(base) do ic[k] = v end
  ic.bandwidth_nominal, ic.num_links = bw, 1
  ic.description = string.format("the case's scale-out fabric: %.0f Gb/s per GPU%s", so.bits_per_s / 1e9,
    so.roce and " (RoCE)" or "")
  ic.source = "the validation case's system.inter_node_interconnect"
  return ic, string.format("case_scale_out_%.17g%s", so.bits_per_s, so.roce and "_roce" or "")
end

local function calibrated_lib(state, node, setting, power_limit, scale_out)
  local doc = state.lib_doc
  local comp_name = doc.nodes[node] and doc.nodes[node].device_compute
  local base = doc.components.compute[comp_name]
  local c = {}
  for k, v in pairs(base) do c[k] = v end
  for _, k in ipairs(setting_keys) do
    if setting[k] then c[k] = math.min(1, setting[k]) end
  end
  -- a power cap the case's GPUs ran under (the core scales their clocks)
  if power_limit then c.power_limit_watts = power_limit end
  local so, so_name = case_scale_out(doc, node, scale_out)
  local parts = { node, tostring(power_limit or 0), so_name or "" }
  for _, k in ipairs(setting_keys) do parts[#parts + 1] = string.format("%.6g", c[k] or 0) end
  local key = table.concat(parts, "|")
  local lib = state.libs[key]
  if lib then return lib end
  local compute = {}
  for k, v in pairs(doc.components.compute) do compute[k] = v end
  compute[comp_name] = c
  local comps = {}
  for k, v in pairs(doc.components) do comps[k] = v end
  comps.compute = compute
  local nodes = doc.nodes
  if so then
    local ics = {}
    for k, v in pairs(doc.components.interconnect) do ics[k] = v end
    ics[so_name] = so
    comps.interconnect = ics
    local n = {}
    for k, v in pairs(doc.nodes[node]) do n[k] = v end
    n.device_interconnects = {}
    for k, v in pairs(doc.nodes[node].device_interconnects) do n.device_interconnects[k] = v end
    n.device_interconnects.scale_out = so_name
    nodes = {}
    for k, v in pairs(doc.nodes) do nodes[k] = v end
    nodes[node] = n
  end
  lib = spec.hardware_library({ components = comps, nodes = nodes })
  state.libs[key] = lib
  return lib
end

M.calibrated_lib = calibrated_lib -- bench/gpu/compare_layers.lua prices layers on the same library

-- physical(state, docs) -> the case's physical topology with its scale-up dimension joined
-- as the node's scale-up fabric is (the library interconnect's `topology`: NVSwitch
-- "switched", Infinity Fabric's full "mesh" of 8), cached on the docs
local function physical(state, docs)
  if docs.physical_of == state.lib_doc then return docs.physical_fabric end
  local ph = docs.physical
  local node = state.lib_doc.nodes[ph.node_definition_ref]
  local up = node and (node.device_interconnects or {}).scale_up
  local ic = up and state.lib_doc.components.interconnect[up]
  local topo = ic and ic.topology
  local out = ph
  if topo and ph.dimensions[1] and ph.dimensions[1].name == "scale_up" and topo ~= ph.dimensions[1].topology_type then
    out = { name = ph.name, node_definition_ref = ph.node_definition_ref, dimensions = {} }
    for i, d in ipairs(ph.dimensions) do
      local c = {}
      for k, v in pairs(d) do c[k] = v end
      if i == 1 then c.topology_type = topo end
      out.dimensions[i] = c
    end
  end
  docs.physical_of, docs.physical_fabric = state.lib_doc, out
  return out
end

local function node_peak(lib, node, bytes)
  local c = lib.compute[lib.nodes[node].device_compute]
  if bytes <= 1 and (c.fp8_nominal or 0) > 0 then return c.fp8_nominal end
  if bytes == 4 then return c.fp32_nominal end
  return c.bf16_nominal
end

-- Training cases ---------------------------------------------------------------------------

-- prepare(case) -> job {case, docs, key = {generation, kernels}} or nil, reason
local function prepare_training(case)
  local docs, why = cases.training_docs(case)
  if not docs then return nil, why end
  return { case = case, docs = docs, generation = docs.gpu.generation, kernels = docs.fw.kernels }
end

local function evaluate_training(state, job, settings)
  local docs, case = job.docs, job.case
  local setting, from = calibration.lookup(job.generation, job.kernels, settings)
  if not setting then return nil, "no calibration for GPU generation '" .. tostring(job.generation) .. "'" end
  if not state.lib_doc.nodes[docs.gpu.node] then
    return nil, "hardware library has no node '" .. docs.gpu.node .. "'"
  end
  local lib = calibrated_lib(state, docs.gpu.node, setting, docs.power_limit_watts, docs.scale_out)
  local function run(workload)
    return pcall(function()
      return scenario.new({ hardware_lib = lib, physical = physical(state, docs), logical = docs.logical,
        model = docs.model, workload = workload }):evaluate()
    end)
  end
  local ok, r = run(docs.workload)
  if not ok then return nil, rejected(r) end
  local notes, recompute = docs.notes, docs.workload.recompute
  -- A recomputation the case leaves to the recipe: the least that fits, as a recipe picks it
  -- (the run was measured, so it fit); the case's own workload is left as read.
  if docs.recompute_assumed and not r.memory.fits then
    for _, rc in ipairs(cases.RECOMPUTE_ESCALATION[docs.workload.recompute] or {}) do
      local w = {}
      for k, v in pairs(docs.workload) do w[k] = v end
      w.recompute = rc
      local ok2, r2 = run(w)
      if ok2 and r2.memory.fits then
        r, recompute = r2, rc
        notes = { table.unpack(docs.notes) }
        notes[#notes + 1] = string.format("recompute not stated: %s, the least that fits (%s does not)", rc,
          docs.workload.recompute)
        break
      end
    end
  end
  local ctx = { case = case, r = r, gpus = docs.parallel.gpus, p = docs.parallel,
    peak = node_peak(lib, docs.gpu.node, docs.precision.gemm_bytes), recompute = recompute,
    layer_scale = docs.layer_scale or 1 }
  local rec = { id = case.id, source = case.source, workload = "training", fits = r.memory.fits,
    calibration = from, framework = docs.fw.name, notes = notes, comparisons = {},
    model = case.model and case.model.name, moe = (docs.model.num_regular_experts or 0) > 1 }
  for _, m in ipairs(case.measured or {}) do
    local row = M.metric(m.metric, m.unit)
    local value = tonumber(m.value)
    if row and value and value ~= 0 then
      local pred = row.fn(ctx, m)
      if pred then
        rec.comparisons[#rec.comparisons + 1] = { metric = m.metric, unit = m.unit, class = row.class,
          predicted = pred, measured = value, relative_error = (pred - value) / value }
      end
    end
  end
  for _, name in ipairs(M.priority) do
    for _, c in ipairs(rec.comparisons) do
      if not rec.metric and c.metric == name then
        rec.metric, rec.predicted, rec.measured, rec.relative_error = c.metric, c.predicted, c.measured,
          c.relative_error
      end
    end
  end
  if not rec.metric then
    for _, c in ipairs(rec.comparisons) do
      if not rec.metric and c.class == "time" then
        rec.metric, rec.predicted, rec.measured, rec.relative_error = c.metric, c.predicted, c.measured,
          c.relative_error
      end
    end
  end
  if not rec.metric then
    local names, ttt = {}, false
    for _, m in ipairs(case.measured or {}) do
      names[#names + 1] = tostring(m.metric)
      if M.metric(m.metric, m.unit) then ttt = true end
    end
    if ttt then
      return nil, "time to train needs training.train_tokens, train_samples or train_steps (" ..
        table.concat(names, ", ") .. ")"
    end
    return nil, "no measured time metric fathom predicts (" .. table.concat(names, ", ") .. ")"
  end
  for _, c in ipairs(rec.comparisons) do
    if c.class == "memory" then rec.memory = c end
  end
  return rec
end

-- Inference cases --------------------------------------------------------------------------

-- requests(inf, gpus) -> the requests in flight: a stated batch, else the concurrency, else
-- per-GPU or per-rank figures ("batch 1408 per rank", batch_per_gpu, "16384 tokens per GPU")
-- times the GPUs, else the engine's cap on running sequences (vLLM max_num_seqs, TensorRT-LLM
-- max_batch_size) over the prompts.
-- scenario_counts(inf) -> {concurrency, batch} a case's scenario text states where its fields
-- do not: "concurrency 64", "64 concurrent requests", "64 users"; "batch size 32", "batch 32",
-- "bs=32". Either may be nil.
function M.scenario_counts(inf)
  local s = tostring(inf.scenario or ""):lower()
  local function num(x) return cases.count(x) end
  return {
    concurrency = num(s:match("concurrency[%s:=]*(%d+)") or s:match("(%d+)%s*concurrent")
      or s:match("(%d+)%s*users?%f[%A]")),
    batch = num(s:match("batch[%s_%-]*size[%s:=]*(%d+)") or s:match("batch[%s_%-:=]*(%d+)")
      or s:match("%f[%a]bs[%s:=]*(%d+)")),
  }
end

local function requests(inf, gpus, isl)
  local b = cases.count(type(inf.batch) == "number" and inf.batch or nil)
    or cases.count(inf.concurrency) or cases.count(inf.max_concurrency)
  if b then return b end
  if cases.count(inf.batch_per_gpu) then return cases.count(inf.batch_per_gpu) * gpus end
  local s = tostring(inf.batch or ""):lower()
  local n = tonumber((s:match("([%d,]+)%s*tokens? per") or ""):gsub(",", "") or "")
  if n and isl and (s:find("per gpu") or s:find("per rank") or s:find("per device")) then
    return math.max(1, n // isl) * gpus
  end
  n = tonumber((s:match("([%d,]+)%s*per") or ""):gsub(",", "") or "")
  if n and (s:find("per gpu") or s:find("per rank") or s:find("per device")) then return n * gpus end
  n = tonumber((s:match("^%s*([%d,]+)%s*$") or ""):gsub(",", "") or "")
  if n then return n end
  local sc = M.scenario_counts(inf)
  if sc.concurrency or sc.batch then return sc.concurrency or sc.batch end
  local cap = cases.count(inf.max_num_seqs or inf.max_batch_size)
  local prompts = cases.count(inf.num_prompts or inf.num_requests)
  if cap or prompts then return math.min(cap or 256, prompts or cap) end
end

-- speculation(inf) -> {tokens, acceptance, stated} of a case's speculative decoding (nil
-- without), or nil, reason. The drafts a step: `spec_tokens`, else the count in the
-- `speculative` text ("MTP, 3 next-n layers"); the acceptance: `acceptance_rate` (each
-- draft's probability), else `acceptance_length` (tokens a step, 1 + a + ... + a^k, solved
-- for a), else fathom.serve.SPEC_ACCEPTANCE (DeepSeek-V3's MTP), noted as assumed.
function M.speculation(inf)
  if not inf.speculative and not inf.spec_tokens then return nil end
  local k = cases.count(inf.spec_tokens) or tonumber(tostring(inf.speculative or ""):match("(%d+)"))
  if not k or k < 1 or k > 16 then
    return nil, "speculative decoding (" .. tostring(inf.speculative) .. ") without a count of draft tokens"
  end
  local a, stated = tonumber(inf.acceptance_rate), true
  local len = tonumber(inf.acceptance_length)
  if not a and len then
    if len < 1 or len > k + 1 then return nil, "inference.acceptance_length is outside [1, drafts + 1]" end
    local lo, hi = 0.0, 1.0
    for _ = 1, 60 do
      local mid, sum, p = (lo + hi) / 2, 1.0, 1.0
      for _ = 1, k do p = p * mid; sum = sum + p end
      if sum < len then lo = mid else hi = mid end
    end
    a = (lo + hi) / 2
  end
  if a and not (a >= 0 and a <= 1) then return nil, "inference.acceptance_rate is not a probability" end
  if not a then a, stated = require("fathom.serve").SPEC_ACCEPTANCE, false end
  return { tokens = k, acceptance = a, stated = stated }
end

-- Build the specs of an inference case as one static batch: TP x PP engines, attention data
-- parallelism and expert parallelism laid out like training (fathom.cases.layout); prefill
-- then decode, or one phase for a disaggregated (PD) server.
function M.inference_docs(case)
  local sys, par, mdl, inf = case.system or {}, case.parallelism or {}, case.model or {}, case.inference or {}
  local g = cases.gpu(sys.gpu, sys.gpu_memory_gb)
  if not g then return nil, "no hardware library node matches GPU '" .. tostring(sys.gpu) .. "'" end
  local gpus, tp, pp = cases.count(sys.num_gpus), cases.count(par.tp) or 1, cases.count(par.pp) or 1
  if not gpus then return nil, "system.num_gpus is not given" end
  local specu, why_spec = M.speculation(inf)
  if why_spec then return nil, why_spec end
  local isl, stated_osl = M.lengths(inf)
  if not isl then return nil, "inference.isl is not given" end
  local phase = tostring(inf.phase or ""):lower()
  local prefill_only = phase:find("prefill") ~= nil
  local decode_only = phase:find("decode") ~= nil
  local osl = stated_osl or 1
  local batch = requests(inf, gpus, isl)
  if not batch then return nil, "inference.batch is not a number (" .. tostring(inf.batch) .. ")" end
  local prec = cases.precision(inf.precision)
  local model, notes = cases.model_doc(mdl, math.max(4096, isl + osl))
  if not model then return nil, notes end
  local fw = frameworks.lookup(inf.framework)
  -- EPLB's redundant experts: replicas of hot experts add expert slots (memory, placement);
  -- each token still goes to top_k of them
  local redundant = cases.count(par.redundant_experts)
  if redundant and (model.num_regular_experts or 0) > 1 then
    model.num_regular_experts = model.num_regular_experts + redundant
  end
  -- attention: TP engines, or data-parallel attention ranks (attention_dp: true or a count)
  local adp = par.attention_dp
  local dp_attn = (adp == true and (cases.count(par.dp) or gpus // pp)) or cases.count(adp)
  local tp_attn
  if dp_attn then
    if gpus % (pp * dp_attn) ~= 0 then return nil, "attention_dp does not divide the GPUs" end
    tp_attn = gpus // (pp * dp_attn)
  else
    if gpus % (tp * pp) ~= 0 then
      return nil, string.format("tp x pp = %d x %d does not divide %d GPUs", tp, pp, gpus)
    end
    tp_attn, dp_attn = tp, gpus // (tp * pp)
  end
  local ep = cases.count(par.ep)
  local moe = (model.num_regular_experts or 0) > 1
  -- An engine placing experts by EPLB holds the same number of expert slots on every EP rank:
  -- an EP that does not divide the experts implies the redundant ones that fill the slots
  -- (SGLang at EP 48: 256 + 32 = 288 = 48 x 6, the 32 its large-EP posts state)
  if moe and ep and fw.eplb_slots and not redundant and model.num_regular_experts % ep ~= 0 then
    local fill = ep - model.num_regular_experts % ep
    notes[#notes + 1] = string.format("EPLB: %d redundant experts fill %d slots per EP rank (%d experts over EP %d)",
      fill, (model.num_regular_experts + fill) // ep, model.num_regular_experts, ep)
    model.num_regular_experts = model.num_regular_experts + fill
  end
  local lay = { tp = tp_attn, cp = 1, dp = dp_attn, pp = pp }
  if moe then
    ep = ep or 1
    if gpus % (pp * ep) ~= 0 then return nil, "ep x pp does not divide the GPUs" end
    lay.ep = ep
    lay.etp = cases.count(par.expert_tp) or math.max(1, (tp_attn * dp_attn) // ep)
    if gpus % (pp * ep * lay.etp) ~= 0 then return nil, "expert tp x ep x pp does not divide the GPUs" end
    lay.dp_moe = gpus // (pp * ep * lay.etp)
  end
  if batch < dp_attn then return nil, string.format("%d requests over %d attention ranks", batch, dp_attn) end
  local mb = batch // dp_attn
  local domain = cases.scale_up_domain(sys, g)
  local phys, logical
  local d = math.min(domain, gpus)
  while d >= 1 and not phys do
    if gpus % d == 0 then phys, logical = cases.layout(lay, gpus, d) end
    d = d - 1
  end
  if not phys then return nil, "no placement of the serving layout fits the scale-up domains" end
  -- serving runs at the checkpoint's widths: FP8 engines at 1 byte, attention included unless
  -- the case keeps it 16-bit; an NVFP4 (or MXFP4) checkpoint as the block-scaled recipe
  -- (fth_infer_def.recipe: FP4 GEMMs, weights at 0.5 B + an FP8 scale per 16 elements),
  -- attention and the activations at 16 bits
  local width = math.max(1, math.floor(prec.gemm_bytes))
  -- the KV cache is FP8 only where the case says so (TensorRT-LLM and SGLang keep it in the
  -- model's 16-bit dtype unless kv_cache_dtype asks for FP8): "16-bit KV", "BF16 MLA/KV" or
  -- an unstated KV cache under FP8 weights are 2 bytes a value
  local kv_width = prec.fp8_attention and 1 or math.max(width, 2)
  -- FP8 engines without FP8 attention: the linears at FP8, attention and activations BF16
  local act_width, gemm_width, recipe = width, nil, nil
  if width == 1 and not prec.fp8_attention then act_width, gemm_width = 2, 1 end
  if prec.fp4 then act_width, gemm_width, recipe = 2, nil, prec.recipe end
  local function workload(extra)
    local w = { global_batch_size = mb * dp_attn, micro_batch_size = mb, float_size_bytes = act_width,
      weight_float_size_bytes = width, kv_cache_float_size_bytes = kv_width, gemm_float_size_bytes = gemm_width,
      precision_recipe = recipe,
      comp_comm_efficiency = fw.comp_comm_efficiency, comp_mem_efficiency = 1.0,
      comm_mem_efficiency = fw.comm_mem_efficiency, kernel_launch_sec = fw.kernel_launch_sec,
      kernel_model = "tiled", two_batch_overlap = inf.two_batch_overlap == true,
      decode_kv_reread = fw.decode_kv_reread,
      collective = fw.engine_allreduce }
    for k, v in pairs(extra) do w[k] = v end
    return w
  end
  local ctx_len = cases.count(inf.kv_cache_length) or isl
  local ngen = decode_only and 1 or (osl - 1)
  -- A benchmark at a stated concurrency (trtllm-bench --concurrency: N users, closed loop)
  -- runs through the serving simulator as it ran: each attention DP rank a replica with its
  -- own batch cap and KV cache, the ranks in lock step, prompts whole in the token budget.
  -- An offline throughput benchmark (vLLM benchmark_throughput: a count of prompts, no batch
  -- and no concurrency) submits every prompt at once; the engine runs what its batch cap
  -- (max_num_seqs) and KV cache hold and preempts when the cache fills, which a static batch
  -- of all the prompts cannot show: the same closed loop, every prompt a user.
  -- An online benchmark at a request rate (vLLM benchmark_serving --request-rate: Poisson
  -- arrivals, 1,000 prompts by default) is the simulator's open loop at that rate; a rate of
  -- "inf" submits every prompt at once, as the offline benchmark does.
  local sim
  local rate = M.request_rate(inf)
  local open = rate ~= nil and rate < math.huge
  local users = cases.count(inf.concurrency) or (not open and cases.count(inf.max_concurrency))
    or (not open and inf.batch == nil and M.scenario_counts(inf).concurrency) or nil
  local prompts = cases.count(inf.num_requests) or cases.count(inf.num_prompts)
  local offline = not users and not open and prompts ~= nil and type(inf.batch) ~= "number"
  -- (a run of more prompts than that keeps its steady state: at most 4 x the engine's cap, or
  -- M.OFFLINE_SIM_PROMPTS, of them are simulated, all at once)
  local stated_cap = cases.count(inf.max_batch_size_per_rank) or cases.count(inf.max_batch_size)
    or cases.count(inf.max_num_seqs)
  local kv_fit = offline and fw.offline_batch == "kv_fit" and not stated_cap and not cases.count(inf.max_num_tokens)
  local all_prompts = prompts
  if offline then
    users = math.min(prompts, math.max(M.OFFLINE_SIM_PROMPTS, 4 * mb * dp_attn))
    prompts = users
  end
  if (open or users) and stated_osl and not prefill_only and not decode_only then
    sim = { ranks = dp_attn, lockstep = adp ~= nil and adp ~= false and dp_attn > 1,
      max_batch_tokens = cases.count(inf.max_num_tokens),
      kv_fraction = tonumber(inf.kv_cache_free_gpu_mem_fraction), spec = specu }
    if open then
      if cases.count(inf.max_concurrency) then
        notes[#notes + 1] = "max_concurrency under a request rate is not modelled (arrivals at the rate, uncapped)"
      end
      sim.rate, sim.requests, sim.max_batch = rate, math.min(prompts or 1000, M.MAX_SIM_REQUESTS), stated_cap or mb
    else
      sim.concurrency, sim.requests, sim.offline = users, prompts or 4 * users, offline or nil
      if kv_fit then sim.kv_fit, sim.all_prompts, sim.pp = true, all_prompts, pp end
      sim.max_batch = cases.count(inf.max_batch_size_per_rank) or cases.count(inf.max_batch_size) or mb
    end
  end
  if specu and not sim then
    return nil, "speculative decoding outside a benchmark at a stated concurrency and output length is not modelled"
  end
  if specu and not specu.stated then
    notes[#notes + 1] = string.format("MTP acceptance %.2f assumed (DeepSeek-V3 report; the case states none)",
      specu.acceptance)
  end
  return {
    physical = { name = case.id, node_definition_ref = g.node, dimensions = phys },
    logical = { name = case.id, dimensions = logical },
    model = model, gpu = g, fw = fw, precision = prec, batch = mb * dp_attn, isl = isl, osl = osl, ngen = ngen,
    notes = notes, sim = sim,
    prefill = not decode_only and workload({ seq_length = isl }) or nil,
    decode = not prefill_only and ngen >= 1 and workload({ prefill_seq_len = ctx_len, num_generated_tokens = ngen })
      or nil,
  }
end

-- Serving metrics of a static batch (prefill, then decode): ctx {batch, isl, osl, gpus, gpn,
-- pre (prefill s), dec (decode s), t = pre + dec}. Per-GPU or per-node when the unit says so.
local function per(m, c, v)
  local u = tostring(m.unit or ""):lower() .. " " .. tostring(m.metric):lower()
  if u:find("per%s*%d*%-?gpu%s*node") or u:find("per_node") or u:find("per node") or u:find("/node") then
    return v / c.gpus * c.gpn
  end
  if u:find("per%s*gpu") or u:find("per_gpu") or u:find("/gpu") or u:find("not stated") then return v / c.gpus end
  return v
end
local function tpot(c) return c.ngen > 0 and c.dec > 0 and c.dec / c.ngen or c.pre end
local serving = {
  output_throughput = function(c, m) return per(m, c, c.batch * c.osl / c.t) end,
  output_token_throughput = function(c, m) return per(m, c, c.batch * c.osl / c.t) end,
  output_tokens_per_s = function(c, m) return per(m, c, c.batch * c.osl / c.t) end,
  generation_throughput = function(c, m) return per(m, c, c.batch * c.osl / c.t) end,
  output_throughput_per_gpu = function(c) return c.batch * c.osl / c.t / c.gpus end,
  total_output_throughput = function(c, m) return per(m, c, c.batch * c.osl / c.t) end,
  total_token_throughput = function(c, m) return per(m, c, c.batch * (c.isl + c.osl) / c.t) end,
  request_throughput = function(c, m) return per(m, c, c.batch / c.t) end,
  requests_per_s = function(c, m) return per(m, c, c.batch / c.t) end,
  per_user_output_throughput = function(c) return c.osl / c.t end,
  per_user_output_throughput_with_ctx = function(c) return c.osl / c.t end,
  first_token_latency = function(c) return c.pre * 1e3 end,
  ttft_ms = function(c) return c.pre * 1e3 end,
  mean_ttft_ms = function(c) return c.pre * 1e3 end,
  median_ttft_ms = function(c) return c.pre * 1e3 end,
  tpot_ms = function(c) return tpot(c) * 1e3 end,
  mean_tpot_ms = function(c) return tpot(c) * 1e3 end,
  median_tpot_ms = function(c) return tpot(c) * 1e3 end,
  itl_ms = function(c) return tpot(c) * 1e3 end,
  median_itl_ms = function(c) return tpot(c) * 1e3 end,
  avg_request_latency_ms = function(c) return c.t * 1e3 end,
  e2e_latency_ms = function(c) return c.t * 1e3 end,
  median_e2el_ms = function(c) return c.t * 1e3 end,
  prefill_input_throughput_per_gpu = function(c) return c.batch * c.isl / c.pre / c.gpus end,
  prefill_input_throughput_per_node = function(c) return c.batch * c.isl / c.pre / c.gpus * c.gpn end,
  decode_output_throughput_per_gpu = function(c) return c.batch / tpot(c) / c.gpus end,
  decode_output_throughput_per_node = function(c) return c.batch / tpot(c) / c.gpus * c.gpn end,
}
M.serving_metrics = serving

-- A latency's statistic as benchmarks name it (vLLM's benchmark_serving: mean_ttft_ms,
-- median_itl_ms, p99_e2el_ms): "mean" (also avg, average, or none named), or a percentile the
-- simulator reports ("p50" for median, "p90", "p95", "p99"); nil for another percentile.
local function statistic(n)
  local p = n:match("^p(%d+)%f[^%d]") or n:match("[^%a]p(%d+)%f[^%d]")
  if p then
    p = tonumber(p)
    return (p == 50 or p == 90 or p == 95 or p == 99) and ("p" .. p) or nil
  end
  if n:find("median") then return "p50" end
  return "mean"
end

-- Seconds per unit of a latency, from its unit ("ms", "msec", "milliseconds", "s", "sec",
-- "seconds", "us", "µs") or else its name's suffix (_ms, _s, _sec, _us); nil when neither says.
local function time_scale(u, n)
  u = u:gsub("%s", "")
  if u:find("^ms") or u:find("^msec") or u:find("^millisec") then return 1e3 end
  if u:find("^us") or u:find("^\194\181s") or u:find("^microsec") then return 1e6 end
  if u:find("^s$") or u:find("^sec") or u:find("^second") then return 1 end
  if n:find("_ms$") or n:find("_msec$") then return 1e3 end
  if n:find("_us$") then return 1e6 end
  if n:find("_s$") or n:find("_sec$") or n:find("_seconds?$") then return 1 end
end

-- A latency of the run in seconds (c.q: the simulator's distributions; a static batch has one
-- value per request, its mean): "ttft", "tpot" (inter-token) or "e2e" at a statistic.
local function latency_s(c, what, stat)
  if c.q and c.q[what] then return c.q[what][stat] end
  if what == "ttft" then return c.pre end
  if what == "tpot" then return tpot(c) end
  return c.t
end

-- serving_metric(m) -> the function for a serving metric: by name (M.serving_metrics), else
-- read from its name and unit as benchmarks and papers write them: a latency (TTFT: ttft,
-- first_token; TPOT: tpot, itl, inter_token, time_per_output_token; end to end: e2el, e2e,
-- end_to_end, request_latency, latency) at its statistic, in its time unit; a throughput of
-- requests (request, req, qps) or of tokens (output/generated/decode, input/prompt, prefill,
-- else total), per GPU or per node where the unit or name says so; per user.
function M.serving_metric(m)
  local name = tostring(m.metric)
  if serving[name] then return serving[name] end
  local u, n = tostring(m.unit or ""):lower(), name:lower()
  local all = n .. " " .. u
  if u:find("/user") or n:find("per_user") then return serving.per_user_output_throughput end
  local what = (n:find("ttft") or n:find("first[_%s%-]*token") or n:find("time[_%s%-]*to[_%s%-]*first")) and "ttft"
    or (n:find("tpot") or n:find("itl") or n:find("inter[_%s%-]*token") or n:find("per[_%s%-]*output[_%s%-]*token"))
      and "tpot"
    or (n:find("e2el") or n:find("e2e") or n:find("end[_%s%-]*to[_%s%-]*end") or n:find("latency")) and "e2e"
  if what then
    local per_s, stat = time_scale(u, n), statistic(n)
    if not per_s or not stat then return nil end
    return function(c) return latency_s(c, what, stat) * per_s end
  end
  local rate = all:find("/s") or all:find("per[_%s]*s") or all:find("throughput") or all:find("tps") or all:find("qps")
  if not rate then return nil end
  -- a unit that names neither tokens nor requests (images/s, GB/s) is not a serving rate
  local counted = u:find("tok") or u:find("tps") or u:find("req") or u:find("qps") or u:find("sample")
    or u:find("seq")
  if u:find("%a") and not counted then return nil end
  if all:find("req") or all:find("qps") or all:find("sample") or all:find("seq") then
    return serving.request_throughput
  end
  if all:find("output") or all:find("generat") then return serving.output_throughput end
  if n:find("decode") then
    return function(c, mm) return per(mm, c, c.batch / tpot(c)) end
  end
  if n:find("prefill") then
    return function(c, mm) return per(mm, c, c.batch * c.isl / c.pre) end
  end
  if all:find("input") or all:find("prompt") then
    return function(c, mm) return per(mm, c, c.batch * c.isl / c.t) end
  end
  return serving.total_token_throughput
end

-- lengths(inf) -> input and output tokens a request, as `isl`/`osl` or the names benchmarks
-- give them (input_len / output_len: vLLM's benchmark arguments; input_tokens, prompt_len,
-- input_length; output_tokens, output_length, max_tokens, gen_len); nil where not stated.
function M.lengths(inf)
  local function first(keys)
    for _, k in ipairs(keys) do
      local n = cases.count(inf[k])
      if n then return n end
    end
  end
  return first({ "isl", "input_len", "input_tokens", "input_length", "prompt_len", "prompt_tokens" }),
    first({ "osl", "output_len", "output_tokens", "output_length", "max_tokens", "gen_len" })
end

-- request_rate(inf) -> the request rate (per second) of an open-loop benchmark, math.huge for
-- "inf" (vLLM's default: every request at once), or nil: a field request_rate, qps or
-- arrival_rate, else the scenario's words ("request rate 4", "4 req/s", "4 requests per
-- second", "QPS 4"). Rates outside (0, 1e6] are not read.
function M.request_rate(inf)
  local function rate(v)
    if type(v) == "string" and v:lower():find("^%s*inf") then return math.huge end
    local n = tonumber(v)
    if n and n == math.huge then return n end
    if n and n > 0 and n <= 1e6 then return n end
  end
  for _, k in ipairs({ "request_rate", "qps", "arrival_rate" }) do
    local r = rate(inf[k])
    if r then return r end
  end
  local s = tostring(inf.scenario or ""):lower()
  if s:find("request[%s_%-]*rate[%s:=]*inf") then return math.huge end
  return rate(s:match("request[%s_%-]*rate[%s:=]*(%d+%.?%d*)") or s:match("(%d+%.?%d*)%s*req[%a]*%s*/%s*s")
    or s:match("(%d+%.?%d*)%s*requests?%s+per%s+second") or s:match("qps[%s:=]*(%d+%.?%d*)")
    or s:match("(%d+%.?%d*)%s*qps"))
end

-- Requests simulated per case at most: the benchmark's own count up to this (the ramp up
-- and the drain are a few percent of a run of 4 x the users already).
M.MAX_SIM_REQUESTS = 16384
-- Prompts an offline benchmark simulates at least (where it has more): TensorRT-LLM's 30,000
-- prompts of 128 + 128 tokens give the same rate within 0.05% from 4,096 of them
M.OFFLINE_SIM_PROMPTS = 4096

-- kv_fit_batch(capacity_tokens, isl, osl, pp) -> cap, token budget of an engine that sizes its
-- batch to its KV cache (frameworks' offline_batch "kv_fit"; trtllm-bench's calc_engine_setting
-- and finetune_setting in tensorrt_llm/bench/build/tuning.py): the requests whose whole
-- ISL + OSL the cache holds (GUARANTEED_NO_EVICT admits no more), at most 4,096 over PP, and
-- a token budget of that x (1 + ISL / OSL), at most 32,768, rounded up as trtllm-bench rounds
-- it (to 256 below 4,096 tokens and at least 2,048, to 512 below 8,192, else to 1,024).
function M.kv_fit_batch(capacity_tokens, isl, osl, pp)
  local raw = math.min(capacity_tokens / (isl + osl), 4096) / math.max(1, pp or 1)
  local cap = math.max(1, math.floor(raw))
  local tokens = math.min(raw * (1 + isl / osl), 32768)
  local budget
  if tokens < 4096 then budget = math.max(2048, 256 * math.ceil(tokens / 256))
  elseif tokens < 8192 then budget = 512 * math.ceil(tokens / 512)
  else budget = 1024 * math.ceil(tokens / 1024) end
  return cap, budget
end

-- simulate(docs, lib) -> core.serve_run's result, and the run it simulated (users, batch cap),
-- for the case's closed-loop benchmark on
-- its decode plan (one DP rank per replica; KV per rank as the memory model leaves it, times
-- the engine's kv_cache_free_gpu_mem_fraction where stated).
local function simulate(state, docs, lib)
  local sim = docs.sim
  local plan = scenario.new({ hardware_lib = lib, physical = physical(state, docs), logical = docs.logical,
    model = docs.model, workload = docs.decode, pass_mode = "inference_decode" }):compile()
  local def = { requests = math.min(sim.requests, math.max(M.MAX_SIM_REQUESTS, sim.concurrency or 0)),
    arrival = sim.rate and "poisson" or "closed", rate_per_s = sim.rate, concurrency = sim.concurrency,
    input = { kind = "fixed", mean = docs.isl }, output = { kind = "fixed", mean = docs.osl },
    policy = docs.fw.serving_policy or "chunked", max_batch = sim.max_batch,
    max_batch_tokens = sim.max_batch_tokens, replicas = sim.ranks,
    dp_attention = sim.lockstep and sim.ranks or 1, routing = "least_outstanding",
    spec_tokens = sim.spec and sim.spec.tokens or 0, spec_acceptance = sim.spec and sim.spec.acceptance or 0 }
  if sim.kv_fraction or sim.kv_fit then
    local one = { kind = "fixed", mean = 1 }
    local probe = core.serve_run({ requests = 1, input = one, output = one }, plan)
    def.kv_capacity_tokens = probe.kv_cache.capacity_tokens * (sim.kv_fraction or 1)
    if sim.kv_fit then
      local cap, budget = M.kv_fit_batch(def.kv_capacity_tokens, docs.isl, docs.osl, sim.pp)
      def.max_batch, def.max_batch_tokens = cap, budget
      -- the steady state of that many running: 4 x the cap of the case's prompts, at least
      -- M.OFFLINE_SIM_PROMPTS, all submitted at once
      def.concurrency = math.min(sim.all_prompts, math.max(M.OFFLINE_SIM_PROMPTS, 4 * cap * sim.ranks))
      def.requests = def.concurrency
    end
  end
  return core.serve_run(def, plan), def
end

local function prepare_inference(case)
  local docs, why = M.inference_docs(case)
  if not docs then return nil, why end
  local ok
  for _, m in ipairs(case.measured or {}) do if M.serving_metric(m) then ok = true end end
  if not ok then return nil, "no measured serving metric fathom predicts" end
  return { case = case, docs = docs, generation = docs.gpu.generation, kernels = docs.fw.kernels, inference = true }
end

local function evaluate_inference(state, job, settings)
  local docs, case = job.docs, job.case
  local setting, from = calibration.lookup(job.generation, job.kernels, settings)
  if not setting then return nil, "no calibration for GPU generation '" .. tostring(job.generation) .. "'" end
  local lib = calibrated_lib(state, docs.gpu.node, setting)
  local ok, res = pcall(function()
    local function run(mode, w)
      return scenario.new({ hardware_lib = lib, physical = physical(state, docs), logical = docs.logical,
        model = docs.model, workload = w, pass_mode = mode }):evaluate()
    end
    local pre = docs.prefill and run("inference_prefill", docs.prefill)
    local dec = docs.decode and run("inference_decode", docs.decode)
    local out = { pre = pre, dec = dec }
    if docs.sim then out.sim, out.run = simulate(state, docs, lib) end
    return out
  end)
  if not ok then return nil, rejected(res) end
  local ctx = { batch = docs.batch, isl = docs.isl, osl = docs.osl, ngen = docs.ngen,
    gpus = cases.count(case.system.num_gpus), gpn = cases.count(case.system.gpus_per_node) or 8,
    pre = res.pre and res.pre.ttft_s or 0, dec = res.dec and res.dec.time_s or 0 }
  ctx.t = (res.pre and res.pre.time_s or 0) + ctx.dec
  local path = "static batch"
  if res.sim then
    -- the same metric functions over the simulated run: N users each with one request in
    -- flight, so a request's time is N x OSL / output rate (Little's law) and per user the
    -- rate is output / N, as trtllm-bench reports them
    local r, n = res.sim, res.run.concurrency
    ctx.batch, ctx.pre = n, r.ttft_s.mean
    ctx.q = { ttft = r.ttft_s, tpot = r.tpot_s, e2e = r.e2e_s }
    ctx.dec = r.tpot_s.mean * ctx.ngen
    if n then
      ctx.t = n * docs.osl / r.throughput.output_tokens_per_s
    else -- open loop: a request's mean time, and the requests in flight by Little's law
      ctx.t = r.e2e_s.mean
      ctx.batch = r.throughput.requests_per_s * ctx.t
    end
    path = docs.sim.rate and string.format("simulated: %d requests at %g/s (Poisson arrivals), at most %d running",
        r.requests_completed, docs.sim.rate, res.run.max_batch)
      or docs.sim.offline and string.format("simulated: %d prompts at once, at most %d running%s", n,
        res.run.max_batch, docs.sim.kv_fit and " (as many as the KV cache holds at ISL + OSL)" or "")
      or string.format("simulated: %d users, %d requests, %s", n, r.requests_completed,
        docs.sim.lockstep and "DP ranks in lock step" or "independent replicas")
  end
  -- A static batch fits when all of it does; a simulated run when one request's KV cache
  -- fits beside the weights (the engine admits what the cache holds)
  local fits = (not res.pre or res.pre.memory.fits) and (not res.dec or res.dec.memory.fits)
  if res.sim then fits = res.sim.kv_cache.capacity_tokens >= docs.isl + docs.osl end
  local rec = { id = case.id, source = case.source, workload = "inference", calibration = from,
    framework = docs.fw.name, fits = fits, notes = docs.notes, comparisons = {}, serving_path = path }
  for _, m in ipairs(case.measured or {}) do
    local fn = M.serving_metric(m)
    local value = tonumber(m.value)
    if fn and value and value ~= 0 then
      local pred = fn(ctx, m)
      rec.comparisons[#rec.comparisons + 1] = { metric = m.metric, unit = m.unit, class = "serving",
        predicted = pred, measured = value, relative_error = (pred - value) / value }
    end
  end
  local c = rec.comparisons[1]
  rec.metric, rec.predicted, rec.measured, rec.relative_error = c.metric, c.predicted, c.measured, c.relative_error
  return rec
end

-- Running ----------------------------------------------------------------------------------

-- load(paths) -> list of cases (each tagged with its file)
function M.load(paths)
  if type(paths) == "string" then paths = { paths } end
  local out = {}
  for _, path in ipairs(paths) do
    local doc = config.load_mapping(path, "validation cases file")
    if type(doc.cases) ~= "table" then errors.at(doc, "cases", "cases", "expected a list of cases") end
    for _, c in ipairs(doc.cases) do
      c.file = path
      out[#out + 1] = c
    end
  end
  return out
end

-- prepare(list) -> jobs, skipped (each skipped {id, source, reason})
function M.prepare(list)
  local jobs, skipped = {}, {}
  for _, case in ipairs(list) do
    local job, why
    if cases.flag(case.incomplete) then
      why = "marked incomplete in the cases file"
    elseif case.workload == "training" then
      job, why = prepare_training(case)
    elseif case.workload == "inference" then
      job, why = prepare_inference(case)
    else
      why = "workload '" .. tostring(case.workload) .. "' is not modelled"
    end
    if job then jobs[#jobs + 1] = job
    else skipped[#skipped + 1] = { id = tostring(case.id), source = case.source, reason = why } end
  end
  return jobs, skipped
end

-- evaluate(state, jobs, settings) -> records, skipped
function M.evaluate(state, jobs, settings)
  settings = settings or state.settings
  local recs, skipped = {}, {}
  for _, job in ipairs(jobs) do
    local rec, why
    if job.inference then rec, why = evaluate_inference(state, job, settings)
    else rec, why = evaluate_training(state, job, settings) end
    if rec then recs[#recs + 1] = rec
    else skipped[#skipped + 1] = { id = tostring(job.case.id), source = job.case.source, reason = why } end
  end
  return recs, skipped
end

-- training_rows(records) -> the first record of each training case that fits and has an
-- error (its primary time metric: tokens/s/GPU where the case has one), in order: what the
-- fitting scripts under validation/ score, one row a case
function M.training_rows(recs)
  local out, seen = {}, {}
  for _, r in ipairs(recs) do
    if r.fits and r.relative_error and r.workload == "training" and not seen[r.id] then
      seen[r.id] = true
      out[#out + 1] = r
    end
  end
  return out
end

-- summarise(records) -> per source {count, median_abs_error, p90_abs_error, no_fit}
function M.summarise(recs)
  local by, nofit = {}, {}
  for _, c in ipairs(recs) do
    by[c.source] = by[c.source] or {}
    table.insert(by[c.source], math.abs(c.relative_error))
    if c.fits == false then nofit[c.source] = (nofit[c.source] or 0) + 1 end
  end
  local out = {}
  for src, errs in pairs(by) do
    table.sort(errs)
    out[src] = { count = #errs, median_abs_error = quantile(errs, 0.5), p90_abs_error = quantile(errs, 0.9),
      no_fit = nofit[src] or 0 }
  end
  return out
end

-- moe_summary(records) -> per model name {count, median_abs_error, p90_abs_error, no_fit} over
-- the MoE training cases, and the same over all of them under "all MoE training cases"
-- (issue 15: each MoE model within 15% median).
M.MOE_ALL = "all MoE training cases"
function M.moe_summary(recs)
  local moe = {}
  for _, c in ipairs(recs) do
    if c.moe and c.workload == "training" then
      moe[#moe + 1] = { source = tostring(c.model or c.id), relative_error = c.relative_error, fits = c.fits }
      moe[#moe + 1] = { source = M.MOE_ALL, relative_error = c.relative_error, fits = c.fits }
    end
  end
  return M.summarise(moe)
end

local function memory_summary(recs)
  local by = {}
  for _, c in ipairs(recs) do
    if c.memory then
      by[c.source] = by[c.source] or {}
      table.insert(by[c.source], math.abs(c.memory.relative_error))
    end
  end
  local out = {}
  for src, errs in pairs(by) do
    table.sort(errs)
    out[src] = { count = #errs, median_abs_error = quantile(errs, 0.5), p90_abs_error = quantile(errs, 0.9) }
  end
  return out
end

function M.state(lib_path)
  lib_path = lib_path or require("fathom.analysis").resolve("hardware/hardware_library.yaml")
  local doc = calibration.load_library(lib_path) -- an overlay too (fathom calibrate)
  -- the calibration: each GPU generation's reference row from the library, the other
  -- kernel libraries by fathom.calibration's factors
  return { lib_doc = doc, libs = {}, settings = calibration.from_library(doc, cases.gpus) }
end

-- Fitting ----------------------------------------------------------------------------------

-- loss(records) -> mean of |error| capped at 50% (robust to a few cases the model
-- cannot express) over the training time metrics
local function loss(recs)
  local s, n = 0, 0
  for _, c in ipairs(recs) do
    if c.workload == "training" then
      s = s + math.min(0.5, math.abs(c.relative_error))
      n = n + 1
    end
  end
  return n > 0 and s / n or 0
end

local golden = require("fathom.fit").golden

-- a kernel library gets its own row only with this many cases; fewer fall back to its
-- nearest calibrated neighbour (fathom.calibration.lookup)
M.min_fit_cases = 10

-- attention_efficiency tops out at 0.75: the best published fused-attention kernels reach
-- ~75% of the BF16 peak (FlashAttention-3 forward on H100, Shah et al. 2024) and less in FP8
M.fit_ranges = { efficiency = { 0.25, 0.95 }, fp8_efficiency = { 0.2, 0.95 },
  attention_efficiency = { 0.08, 0.75 } }

-- fit(state, jobs, settings) -> settings refitted: for every generation/kernels key that has
-- training jobs, coordinate descent (golden section per setting) on those jobs' loss.
-- fp8_efficiency is fitted only where the key has FP8 cases (else it follows efficiency).
function M.fit(state, jobs, settings, only)
  settings = calibration.copy(settings)
  local groups = {}
  for _, job in ipairs(jobs) do
    local g = job.generation .. "/" .. job.kernels
    -- serving records do not calibrate: the loss counts training time metrics only
    if (only == nil or only[g]) and not job.inference then
      groups[g] = groups[g] or { generation = job.generation, kernels = job.kernels, jobs = {}, fp8 = false,
        flash = false, wide = false }
      table.insert(groups[g].jobs, job)
      if job.docs.precision.fp8 then groups[g].fp8 = true else groups[g].wide = true end
      if job.inference or job.docs.workload.flash_attention then groups[g].flash = true end
    end
  end
  -- newer kernels of one lineage (Transformer Engine/cuDNN stacks "2021".."2025"; PyTorch-native
  -- "torch2024".."torch2025") are not slower: fit in kernel order, each bounded below by the
  -- previous key of its lineage on the same GPU generation (on a derived generation only one
  -- fitted in this run: a row that follows its neighbour's factors, CDNA 3's "2024" from
  -- Hopper's, is no evidence)
  local order = {}
  for _, grp in pairs(groups) do
    if #grp.jobs >= M.min_fit_cases then order[#order + 1] = grp end
  end
  local rank = {}
  for i, k in ipairs(calibration.kernel_generations) do rank[k] = i end
  table.sort(order, function(x, y)
    if x.generation ~= y.generation then return x.generation < y.generation end
    return (rank[x.kernels] or 0) < (rank[y.kernels] or 0)
  end)
  local lineage = calibration.lineage
  local fitted = {}
  local function floor_of(grp, key)
    local rows = settings[grp.generation] or {}
    local best, bi = nil, 0
    for k, v in pairs(rows) do
      local i = rank[k] or 0
      local evidence = fitted[grp.generation .. "/" .. k] or not calibration.derived[grp.generation]
      if k ~= grp.kernels and evidence and lineage(k) == lineage(grp.kernels)
        and i < (rank[grp.kernels] or 0) and i > bi then
        best, bi = v[key], i
      end
    end
    return best
  end
  for _, grp in ipairs(order) do
    local rows = settings[grp.generation]
    if not rows then
      rows = {}
      settings[grp.generation] = rows
    end
    local start = calibration.lookup(grp.generation, grp.kernels, settings) or { efficiency = 0.5,
      attention_efficiency = 0.3 }
    local cur = calibration.copy_row(start)
    if grp.fp8 then cur.fp8_efficiency = start.fp8_efficiency or start.efficiency end
    rows[grp.kernels] = cur
    -- efficiency only with BF16/FP16 cases, attention_efficiency only where fused attention
    -- runs, fp8_efficiency only with FP8 cases
    local keys = {}
    if grp.wide then keys[#keys + 1] = "efficiency" end
    if grp.flash then keys[#keys + 1] = "attention_efficiency" end
    if grp.fp8 then keys[#keys + 1] = "fp8_efficiency" end
    -- a derived generation's cases calibrate only the settings it names (`fit`); the rest
    -- follow its neighbour's by the stated ratio (fathom.calibration.derived)
    local only_keys = calibration.derived[grp.generation] and calibration.derived[grp.generation].fit
    if only_keys then
      local named, kept = {}, {}
      for _, k in ipairs(only_keys) do named[k] = true end
      for _, k in ipairs(keys) do if named[k] then kept[#kept + 1] = k end end
      keys = kept
    end
    local best
    for _ = 1, 2 do
      for _, key in ipairs(keys) do
        local range = M.fit_ranges[key]
        local lo = math.max(range[1], floor_of(grp, key) or range[1])
        local v, l = golden(function(x)
          cur[key] = x
          return loss((M.evaluate(state, grp.jobs, settings)))
        end, lo, math.max(lo + 1e-3, range[2]), 12)
        cur[key] = math.floor(v * 1000 + 0.5) / 1000
        best = l
      end
    end
    grp.loss = best
    fitted[grp.generation .. "/" .. grp.kernels] = true
  end
  return settings, groups
end

-- loso(state, jobs, settings) -> per source {count, median_abs_error, p90_abs_error}: each
-- source predicted with the settings refitted on every other source (keys only that source
-- calibrates fall back as for an uncalibrated GPU).
function M.loso(state, jobs, settings)
  local sources = {}
  for _, job in ipairs(jobs) do sources[job.case.source] = true end
  local out = {}
  for src in pairs(sources) do
    local rest, own = {}, {}
    for _, job in ipairs(jobs) do
      if job.case.source == src then own[#own + 1] = job else rest[#rest + 1] = job end
    end
    -- drop the keys this source alone calibrates, then refit on the rest
    local keys = {}
    local count = {}
    for _, job in ipairs(rest) do
      local k = job.generation .. "/" .. job.kernels
      count[k] = (count[k] or 0) + (job.inference and 0 or 1)
      if count[k] >= M.min_fit_cases then keys[k] = true end
    end
    local base = calibration.copy(settings)
    for g, rows in pairs(base) do
      for k in pairs(rows) do if not keys[g .. "/" .. k] then rows[k] = nil end end
      if next(rows) == nil then base[g] = nil end
    end
    local only = {}
    for _, job in ipairs(own) do only[job.generation .. "/" .. job.kernels] = true end
    local refit = M.fit(state, rest, base, only)
    local recs = M.evaluate(state, own, refit)
    out[src] = M.summarise(recs)[src]
  end
  return out
end

-- run(paths [, lib_path [, opts]]) -> {cases, sources, skipped, no_fit, memory [, loso, fitted]}
-- opts.loso: add leave-one-source-out errors; opts.fit: refit the settings first.
function M.run(paths, lib_path, opts)
  opts = opts or {}
  local state = M.state(lib_path)
  local jobs, skipped = M.prepare(M.load(paths or M.default_files))
  local settings = state.settings
  local out = {}
  if opts.fit then
    settings = M.fit(state, jobs, settings)
    out.fitted = settings
  end
  local recs, skipped2 = M.evaluate(state, jobs, settings)
  for _, s in ipairs(skipped2) do skipped[#skipped + 1] = s end
  out.cases, out.skipped = recs, skipped
  out.sources = M.summarise(recs)
  out.memory = memory_summary(recs)
  out.moe_models = M.moe_summary(recs)
  local nofit = 0
  for _, c in ipairs(recs) do if c.fits == false then nofit = nofit + 1 end end
  out.no_fit = nofit
  if opts.loso then out.loso = M.loso(state, jobs, settings) end
  return out
end

return M
