-- fathom.validate: run the published measurements in
-- shared/validation/published_cases.yaml (or a file of that format) through
-- the model and compare. One calibration per GPU type lives in the hardware
-- library (compute/memory/link efficiencies); nothing here is tuned per case.
local analysis = require("fathom.analysis")
local config = require("fathom.config")
local errors = require("fathom.errors")
local scenario = require("fathom.scenario")
local spec = require("fathom.spec")

local M = {}

-- GPU names in the cases -> node definitions of configs/hardware/hardware_library.yaml.
M.gpu_nodes = {
  { pattern = "A100", node = "A100_80GB_SXM" },
  { pattern = "H100", node = "H100_SXM" },
  { pattern = "H200", node = "H200_SXM" },
  { pattern = "H800", node = "H800_SXM" },
}

-- Settings shared by every case (not tuned per case): how well frameworks of
-- the era overlap communication with compute.
M.defaults = {
  comp_comm_efficiency = 0.8,
  comp_mem_efficiency = 1.0,
  comm_mem_efficiency = 0.5,
  kernel_launch_sec = 5e-6,   -- per-kernel launch and gap, the same for every case
  kernel_model = "tiled",     -- GEMM tiles and attention blocks in waves over the SMs
}

local function node_for(gpu)
  for _, g in ipairs(M.gpu_nodes) do
    if gpu:find(g.pattern, 1, true) then return g.node end
  end
end

local function recompute_of(s)
  s = (s or ""):lower()
  if s:find("full") then return "full" end
  if s:find("selective") then return "selective" end
  return "none"
end

-- Build the five in-memory specs for a training case, or nil and a reason to skip.
function M.training_docs(case, lib_doc)
  local sys, par, mdl, tr = case.system, case.parallelism, case.model, case.training or {}
  local node = node_for(sys.gpu or "")
  if not node then return nil, "no hardware definition for GPU '" .. tostring(sys.gpu) .. "'" end
  local gpus, gpn = sys.num_gpus, sys.gpus_per_node or 8
  local tp, pp, dp = par.tp or 1, par.pp or 1, par.dp or 1
  if tp * pp * dp ~= gpus then
    return nil, string.format("tp x pp x dp = %d x %d x %d does not equal %d GPUs", tp, pp, dp, gpus)
  end
  if (par.cp or 1) > 1 or (par.ep or 1) > 1 then return nil, "context/expert parallel cases are not mapped yet" end
  local per_node = math.min(gpn, gpus)
  local nodes = gpus // per_node
  if tp > per_node or per_node % tp ~= 0 then return nil, "TP does not fit inside one node" end
  if nodes % pp ~= 0 then return nil, "pipeline stages do not divide the node count" end
  local dims = { { name = "scale_up", interconnect_name = "scale_up", topology_type = "switched", size = per_node } }
  local logical = {
    { logical_tag = "TP_Attn", maps_to_physical_dimension_name = "scale_up", size = tp },
    { logical_tag = "DP_Attn", maps_to_physical_dimension_name = "scale_up", size = per_node // tp },
  }
  if nodes > 1 then
    dims[2] = { name = "scale_out", interconnect_name = "scale_out", topology_type = "two_tier", size = nodes }
    logical[#logical + 1] = { logical_tag = "PP", maps_to_physical_dimension_name = "scale_out", size = pp }
    logical[#logical + 1] = { logical_tag = "DP_Attn", maps_to_physical_dimension_name = "scale_out",
      size = nodes // pp }
  elseif pp > 1 then
    return nil, "pipeline inside one node is not mapped"
  end
  local framework = (tr.framework or ""):lower()
  local fsdp = (par.fsdp ~= nil) or case.id:find("ZeRO%-3") ~= nil
  local vpp = par.vpp or 1
  local model = {
    name = mdl.name, d_model = mdl.hidden, n_layers = mdl.layers, num_heads = mdl.heads,
    num_kv_heads = mdl.kv_heads, head_dim = mdl.head_dim, ffn_hidden_size = mdl.ffn,
    vocab_size = mdl.vocab, max_sequence_length = par.seq_len, learned_pos_emb = true, tied_embeddings = true,
    gated_mlp = false,
  }
  local fp8 = (tr.precision or ""):upper():find("FP8") ~= nil
  local workload = {
    global_batch_size = par.global_batch, micro_batch_size = par.micro_batch, seq_length = par.seq_len,
    float_size_bytes = fp8 and 1 or 2, full_precision_param_float_size = 4,
    recompute = recompute_of(tr.recompute),
    -- Megatron-LM of 2021 had no fused attention; MPT used FlashAttention/Triton.
    flash_attention = not framework:find("megatron"),
    sequence_parallel = par.sp == true,
    dp_spec = { variant = fsdp and "ZERO3" or "DDP" },
    pp_spec = { variant = vpp > 1 and "INTERLEAVED" or "1F1B", virtual_stages = vpp > 1 and vpp or nil },
    comp_comm_efficiency = M.defaults.comp_comm_efficiency,
    comp_mem_efficiency = M.defaults.comp_mem_efficiency,
    comm_mem_efficiency = M.defaults.comm_mem_efficiency,
    kernel_launch_sec = M.defaults.kernel_launch_sec, kernel_model = M.defaults.kernel_model,
  }
  return {
    hardware_lib = lib_doc,
    physical = { name = case.id, node_definition_ref = node, dimensions = dims },
    logical = { name = case.id, dimensions = logical },
    model = model,
    workload = workload,
  }
end

-- Build the specs of an inference case (TensorRT-LLM style: one node, TP x PP).
function M.inference_docs(case, lib_doc)
  local sys, par, mdl, inf = case.system, case.parallelism, case.model, case.inference or {}
  local node = node_for(sys.gpu or "")
  if not node then return nil, "no hardware definition for GPU '" .. tostring(sys.gpu) .. "'" end
  local gpus, tp, pp = sys.num_gpus, par.tp or 1, par.pp or 1
  if tp * pp ~= gpus then return nil, string.format("tp x pp = %d x %d is not %d GPUs", tp, pp, gpus) end
  if gpus > (sys.gpus_per_node or 8) then return nil, "multi-node inference cases are not mapped yet" end
  local fp8 = (inf.precision or ""):upper():find("FP8") ~= nil
  local width = fp8 and 1 or 2
  local arch = (mdl.arch or ""):lower()
  local gated = arch:find("llama") ~= nil or (mdl.name or ""):lower():find("llama") ~= nil
  local model = {
    name = mdl.name, d_model = mdl.hidden, n_layers = mdl.layers, num_heads = mdl.heads,
    num_kv_heads = mdl.kv_heads, head_dim = mdl.head_dim, ffn_hidden_size = mdl.ffn, vocab_size = mdl.vocab,
    max_sequence_length = math.max(4096, (inf.isl or 0) + (inf.osl or 0)), gated_mlp = gated,
  }
  local dims = { { name = "scale_up", interconnect_name = "scale_up", topology_type = "switched", size = gpus } }
  local logical = {
    { logical_tag = "TP_Attn", maps_to_physical_dimension_name = "scale_up", size = tp },
    { logical_tag = "TP_MoE", maps_to_physical_dimension_name = "scale_up", size = tp },
  }
  if pp > 1 then
    logical[3] = { logical_tag = "PP", maps_to_physical_dimension_name = "scale_up", size = pp }
  end
  local function workload(extra)
    local w = { global_batch_size = inf.batch, micro_batch_size = inf.batch, float_size_bytes = width,
      weight_float_size_bytes = width, kv_cache_float_size_bytes = width,
      comp_comm_efficiency = M.defaults.comp_comm_efficiency, comp_mem_efficiency = 1.0,
      comm_mem_efficiency = M.defaults.comm_mem_efficiency, kernel_launch_sec = M.defaults.kernel_launch_sec,
      kernel_model = M.defaults.kernel_model }
    for k, v in pairs(extra) do w[k] = v end
    return w
  end
  return {
    hardware_lib = lib_doc,
    physical = { name = case.id, node_definition_ref = node, dimensions = dims },
    logical = { name = case.id, dimensions = logical },
    model = model,
    prefill = workload({ seq_length = inf.isl }),
    decode = (inf.osl or 1) > 1 and workload({ prefill_seq_len = inf.isl, num_generated_tokens = inf.osl - 1 }) or nil,
  }
end

-- Narayanan et al. 2021 Eq. 3: FLOPs per iteration with full recomputation,
-- F = 96 B s l h^2 (1 + s / 6h + V / 16 l h).
local function megatron_flops(case)
  local m, p = case.model, case.parallelism
  -- floats: the product overflows 64-bit integers for the 1T model
  local B, s, l, h, V = p.global_batch + 0.0, p.seq_len + 0.0, m.layers + 0.0, m.hidden + 0.0, m.vocab + 0.0
  return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
end

-- The metric each source reports and how to predict it from a result.
M.metrics = {
  achieved_tflops_per_gpu = function(case, r, gpus)
    return megatron_flops(case) / (r.step_time_s * gpus) / 1e12
  end,
  tokens_per_sec_per_gpu = function(_, r, gpus) return r.tokens_per_s / gpus end,
}

local function quantile(sorted, q)
  if #sorted == 0 then return nil end
  local pos = q * (#sorted - 1) + 1
  local lo = math.floor(pos)
  local hi = math.min(lo + 1, #sorted)
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo)
end
M.quantile = quantile

-- run(cases_path [, hardware_lib_path]) -> {cases = {...}, sources = {...}, skipped = {...}}
function M.run(cases_path, lib_path)
  local doc = config.load_mapping(cases_path, "validation cases file")
  if type(doc.cases) ~= "table" then errors.at(doc, "cases", "cases", "expected a list of cases") end
  lib_path = lib_path or analysis.resolve("hardware/hardware_library.yaml")
  local lib_doc = config.load_mapping(lib_path, "hardware library")
  local lib = spec.hardware_library(lib_doc)
  local out = { cases = {}, sources = {}, skipped = {} }
  for _, case in ipairs(doc.cases) do
    local function skip(reason)
      out.skipped[#out.skipped + 1] = { id = case.id, source = case.source, reason = reason }
    end
    if case.incomplete then
      skip("marked incomplete in the cases file")
    elseif case.workload == "inference" then
      local docs, why = M.inference_docs(case, lib_doc)
      local m = case.measured and case.measured[1]
      if not docs then
        skip(why)
      elseif not m or (m.metric ~= "output_throughput" and m.metric ~= "first_token_latency") then
        skip("no measured metric fathom predicts")
      else
        local ok, res = pcall(function()
          local function run(mode, w)
            return scenario.new({ hardware_lib = lib, physical = docs.physical, logical = docs.logical,
              model = docs.model, workload = w, pass_mode = mode }):evaluate()
          end
          local pre = run("inference_prefill", docs.prefill)
          local dec = docs.decode and run("inference_decode", docs.decode)
          return { pre = pre, dec = dec }
        end)
        if not ok then
          skip("model rejected the configuration: " .. tostring(res))
        else
          local inf, gpus = case.inference, case.system.num_gpus
          local pred, fits
          if m.metric == "first_token_latency" then
            pred = res.pre.ttft_s * 1e3 -- ms
            fits = res.pre.memory.fits
          else
            local t = res.pre.time_s + (res.dec and res.dec.time_s or 0)
            pred = inf.batch * inf.osl / t / gpus
            fits = res.pre.memory.fits and (not res.dec or res.dec.memory.fits)
          end
          out.cases[#out.cases + 1] = { id = case.id, source = case.source, metric = m.metric,
            predicted = pred, measured = m.value, relative_error = (pred - m.value) / m.value, fits = fits }
        end
      end
    elseif case.workload ~= "training" then
      skip("workload '" .. tostring(case.workload) .. "' is not modelled")
    else
      local measured
      for _, m in ipairs(case.measured or {}) do
        if M.metrics[m.metric] then measured = m break end
      end
      if not measured then
        skip("no measured metric fathom predicts")
      else
        local docs, why = M.training_docs(case, lib_doc)
        if not docs then
          skip(why)
        else
          local ok, res = pcall(function()
            local sc = scenario.new({ hardware_lib = lib, physical = docs.physical, logical = docs.logical,
              model = docs.model, workload = docs.workload })
            local r = sc:evaluate()
            return { r = r, gpus = case.system.num_gpus }
          end)
          if not ok then
            skip("model rejected the configuration: " .. tostring(res))
          elseif not res.r.memory.fits then
            -- Still compared: the measurement proves it ran, so a no-fit is a model error to show.
            local pred = M.metrics[measured.metric](case, res.r, res.gpus)
            out.cases[#out.cases + 1] = { id = case.id, source = case.source, metric = measured.metric,
              predicted = pred, measured = measured.value,
              relative_error = (pred - measured.value) / measured.value, fits = false }
          else
            local pred = M.metrics[measured.metric](case, res.r, res.gpus)
            out.cases[#out.cases + 1] = { id = case.id, source = case.source, metric = measured.metric,
              predicted = pred, measured = measured.value,
              relative_error = (pred - measured.value) / measured.value, fits = true }
          end
        end
      end
    end
  end
  local by = {}
  for _, c in ipairs(out.cases) do
    by[c.source] = by[c.source] or {}
    table.insert(by[c.source], math.abs(c.relative_error))
  end
  for src, errs in pairs(by) do
    table.sort(errs)
    out.sources[src] = { count = #errs, median_abs_error = quantile(errs, 0.5),
      p90_abs_error = quantile(errs, 0.9) }
  end
  return out
end

return M
