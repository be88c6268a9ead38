-- fathom estimate: one configuration from flags -- does it fit, and how fast? The
-- strategy goes through the search's own evaluation: a search whose every knob is
-- fixed (fathom.search.prepare, core.search: the same placement, tiling and memory
-- checks), then core.search_eval of the strategy it found for the full result. So an
-- estimate and `fathom search --fix` of the same strategy cannot disagree.
local args = require("fathom.args")
local core = require("fathom.core")
local errors = require("fathom.errors")
local names = require("fathom.names")
local output = require("fathom.output")
local passes = require("fathom.passes")
local precision = require("fathom.precision")
local report = require("fathom.report")
local search = require("fathom.search")
local tablefmt = require("fathom.format.table")
local units = require("fathom.units")
local util = require("fathom.format.util")

local M = {}

local ordered = util.ordered
local TIER = names.key("memory_tier")
local DEFAULT = core.defaults.train -- the core's schedule, DP variant and recompute defaults
local MAXDEG = 1024 -- a degree's bound, as --fix's (fathom.search.fix_max)

local spec = args.with_output({
  { name = "model", arg = "NAME|FILE", required = true,
    help = "a model of configs/models (e.g. llama3.1_70b) or a file" },
  { name = "hardware", arg = "NODE", required = true, help = "a node of the hardware library (e.g. H100_SXM)" },
  { name = "gpus", arg = "N", integer = { 1, 4194304 }, required = true, help = "GPUs in the system" },
  { name = "pod-size", arg = "K", integer = { 1, 4194304 }, default = 8, help = "GPUs per scale-up pod" },
  { name = "hardware-lib", arg = "FILE", help = "hardware library [default: configs/hardware/hardware_library.yaml]" },
  { name = "workload", arg = "FILE",
    help = "workload spec to start from [default: the pass mode's search_default.yaml]" },
  { name = "pass-mode", arg = "MODE", choices = passes.names, default = passes.names[1], help = "what to model" },
  { name = "tp", arg = "N", integer = { 1, MAXDEG }, default = 1, help = "tensor parallelism (inside the pod)" },
  { name = "pp", arg = "N", integer = { 1, MAXDEG }, default = 1, help = "pipeline stages" },
  { name = "pp-in", arg = "N", integer = { 1, MAXDEG },
    help = "training: stages inside the pod [default: the fastest placement, as the search picks]" },
  { name = "dp", arg = "N", integer = { 1, 4194304 },
    help = "data parallelism; checked against GPUs / (TP x CP x PP) [default: that quotient]" },
  { name = "cp", arg = "N", integer = { 1, MAXDEG }, default = 1, help = "training: context parallelism" },
  { name = "ep", arg = "N", integer = { 1, MAXDEG }, default = 1, help = "expert parallelism (MoE)" },
  { name = "tp-moe", arg = "N", integer = { 1, MAXDEG }, default = 1, help = "training: TP of the experts (MoE)" },
  { name = "micro-batch", arg = "B", integer = { 1, 65536 }, default = 1,
    help = "training: sequences per micro-batch; inference: sequences per pipeline stage in flight" },
  { name = "vs", arg = "V", integer = { 1, 256 }, default = 1,
    help = "training: virtual stages (INTERLEAVED needs V > 1; a GPU's layers may split into unequal chunks)" },
  { name = "global-batch", arg = "B", integer = { 1, 2147483647 }, help = "training: sequences per step" },
  { name = "seq", arg = "S", integer = { 1, 1073741824 }, help = "sequence length (decode: the prompt)" },
  { name = "gen", arg = "N", integer = { 1, 1073741824 }, help = "decode: tokens to generate" },
  { name = "recompute", arg = "MODE", choices = names.recompute, default = DEFAULT.recompute,
    help = "training: recomputation" },
  { name = "zero", arg = "VARIANT", choices = names.with_aliases("dp_variant"), default = DEFAULT.dp_variant,
    help = "training: data-parallel variant" },
  { name = "schedule", arg = "SCHED", choices = names.pp_schedule,
    help = "training: pipeline schedule [default: " .. DEFAULT.pp_variant .. "]" },
  { name = "sp", arg = "on|off", choices = { "on", "off" },
    help = "training: sequence parallelism [default: on when TP > 1]" },
  { name = "precision", arg = "P", choices = precision.names, help = "training: element width and GEMM recipe "
    .. "[default: the workload's; search_default: bf16]" },
  { name = "lora-rank", arg = "R", integer = { 1, 65536 },
    help = "training: LoRA fine-tuning, adapters of rank R, the base frozen [default: full training]" },
  { name = "lora-targets", arg = "T", choices = names.lora_targets,
    help = "training: the linears with LoRA adapters (with --lora-rank) [default: " .. DEFAULT.lora_targets .. "]" },
  { name = "memory-reserve", arg = "SIZE", bytes = true,
    help = "per-GPU runtime reserve (CUDA/ROCm context, library workspaces), e.g. 2GiB or 0 [default: 1GiB]" },
  { name = "offload", arg = "TIER", help = "training: let weights, saved activations and optimizer states move to "
    .. "this memory tier of the node when they do not fit (the least that fits, as the search does), or off "
    .. "[default: off: everything on the accelerator]" },
  { name = "help", flag = true, help = "this help" },
})

M.spec = spec

M.usage = "usage: fathom estimate --model NAME|FILE --hardware NODE --gpus N [--pod-size K]\n" ..
  "                       [--tp N] [--pp N] [--dp N] [--cp N] [--ep N] [--tp-moe N] [--micro-batch B]\n" ..
  "                       [--global-batch B] [--seq S] [--recompute MODE] [--zero VARIANT]\n" ..
  "                       [--schedule SCHED] [--vs V] [--sp on|off] [--precision P]\n" ..
  "                       [--lora-rank R [--lora-targets T]]\n" ..
  "                       [--pass-mode " .. table.concat(passes.names, "|") .. "]\n" ..
  "                       [--format table|yaml|json|csv] [--output-file F] [--raw-output]\n\n" ..
  "One configuration: where the step's time goes, the memory per GPU in each tier and\n" ..
  "whether it fits. It is evaluated exactly as `fathom search` evaluates a strategy (a\n" ..
  "search with every knob fixed), so the two agree. The workload starts from the pass\n" ..
  "mode's search_default.yaml (or --workload); the flags replace its fields. Under DualPipe\n" ..
  "(or an EP overlap made of micro-batch pairs) it says what share of the passes run in\n" ..
  "forward-backward pairs that hide their layer collectives; the rest run alone.\n\n" ..
  "examples:\n" ..
  "  fathom estimate --model llama3.1_70b --hardware H100_SXM --gpus 64 --tp 8 --pp 2\n" ..
  "  fathom estimate --model gpt3_175b --hardware A100_80GB_SXM --gpus 1024 --tp 8 --pp 8 \\\n" ..
  "      --global-batch 1536 --seq 2048 --micro-batch 2 --zero ZERO1 --schedule DUALPIPE --format json\n" ..
  "  fathom estimate --model llama3.1_70b --hardware H100_SXM --gpus 8 --tp 8 \\\n" ..
  "      --pass-mode inference_decode --micro-batch 64 --seq 4096 --gen 512\n\n" ..
  args.usage(spec) .. "\n"

local function fail(fmt, ...) errors.raise("estimate: " .. fmt, ...) end

-- A tiling refusal from the core as one estimate line (its `path: msg`, the path dropped
-- when it only says "strategy").
local function refusal(e)
  local msg = type(e) == "table" and e.msg or tostring(e)
  local path = type(e) == "table" and e.path or nil
  if path and path ~= "strategy" then msg = path .. ": " .. msg end
  return msg
end

-- The degrees the flags give, checked against the GPU count before anything is loaded.
local function check_degrees(opts, gpus, pod, training)
  local cp = training and opts.cp or 1
  local per = opts.tp * cp * opts.pp
  if gpus % per ~= 0 then
    fail("TP %d x CP %d x PP %d = %d does not divide %d GPUs", opts.tp, cp, opts.pp, per, gpus)
  end
  local dp = gpus // per
  if opts.dp and opts.dp ~= dp then
    fail("--dp %d: %d GPUs / (TP %d x CP %d x PP %d) = %d (DP follows from the GPUs)", opts.dp, gpus, opts.tp, cp,
      opts.pp, dp)
  end
  if opts.tp * cp > pod then
    fail("TP %d x CP %d = %d GPUs exceed the %d-GPU pod (TP and CP stay inside it)", opts.tp, cp, opts.tp * cp, pod)
  end
  return dp
end

-- The assumptions and inputs, recorded in every format.
local function inputs_of(opts, gpus, pod, w, workload_file, pass)
  return ordered({
    model = opts.model, hardware = opts.hardware, gpus = gpus, pod_size = pod, pass_mode = pass,
    workload = workload_file, precision = pass == "training" and precision.describe(w) or nil,
    global_batch = w.global_batch_size, seq_length = w.seq_length or w.prefill_seq_len,
    lora_rank = (w.lora_rank or 0) > 0 and w.lora_rank or nil,
    lora_targets = (w.lora_rank or 0) > 0 and w.lora_targets or nil,
    memory_reserve_bytes = math.tointeger(w.memory_reserve_bytes) or w.memory_reserve_bytes,
  }, { "model", "hardware", "gpus", "pod_size", "pass_mode", "workload", "precision", "global_batch", "seq_length",
    "lora_rank", "lora_targets", "memory_reserve_bytes" })
end

local function memory_of(fp)
  local comps = {}
  for _, c in ipairs(names.memory_component) do
    local v = fp.components[c]
    if v and v > 0 then comps[c .. "_bytes"] = v end
  end
  local order = {}
  for _, c in ipairs(names.memory_component) do order[#order + 1] = c .. "_bytes" end
  local tiers, torder = {}, {}
  for _, t in ipairs(names.memory_tier) do
    local x = fp.tiers[t]
    if x and (x.bytes > 0 or t == TIER.xpu_memory) then
      tiers[t] = ordered({ used_bytes = x.bytes, capacity_bytes = x.capacity_bytes,
        free_bytes = x.capacity_bytes - x.bytes, fits = x.fits },
        { "used_bytes", "capacity_bytes", "free_bytes", "fits" })
      torder[#torder + 1] = t
    end
  end
  return ordered({ components = ordered(comps, order), tiers = ordered(tiers, torder),
    peak_bytes = fp.peak_bytes, headroom_bytes = report.headroom_bytes(fp), fits = fp.fits,
    overflow_tier = fp.overflow_tier },
    { "fits", "peak_bytes", "headroom_bytes", "overflow_tier", "kv_cache_bytes", "max_global_batch", "components",
      "tiers" })
end

-- training(opts, gpus, pod) -> record {inputs, strategy, time, memory} (raw SI numbers).
local function training(opts, gpus, pod, row)
  local dp = check_degrees(opts, gpus, pod, true)
  local sched = opts.schedule or DEFAULT.pp_variant
  if opts.pp == 1 and opts.schedule and opts.schedule ~= DEFAULT.pp_variant then
    fail("--schedule %s needs --pp > 1 (one stage runs plain forward-backward)", opts.schedule)
  end
  local sp = opts.sp and opts.sp == "on" or (opts.sp == nil and opts.tp > 1)
  if sp and opts.tp == 1 then fail("--sp on needs --tp > 1 (sequence parallelism splits TP's activations)") end
  local workload_file = opts.workload or row.search_workload
  local fix = { tp = opts.tp, pp = opts.pp, cp = opts.cp, ep = opts.ep, tp_moe = opts.tp_moe, vs = opts.vs,
    mb = opts.micro_batch, recompute = opts.recompute, dp = names.canonical("dp_variant", opts.zero),
    schedule = sched, sp = { sp }, offload = opts.offload or "off" }
  if opts.pp_in then fix.pp_in = opts.pp_in end
  if opts.offload then
    -- --offload in estimate's words (the search would name its own --fix); the tiers are the search's
    local lib = require("fathom.spec").hardware_library(require("fathom.analysis").resolve(opts.hardware_lib
      or "hardware/hardware_library.yaml"))
    local choices = search.offload_choices(search.system(lib, opts.hardware, gpus, pod))
    local ok = false
    for _, c in ipairs(choices) do ok = ok or c == opts.offload end
    if not ok then
      fail("--offload %s: expected one of %s (off, or a memory tier %s has)%s", opts.offload,
        table.concat(choices, ", "), opts.hardware, errors.suggest(opts.offload, choices))
    end
  end
  local def, model, system = search.prepare({
    model = opts.model, hardware = opts.hardware_lib, node = opts.hardware, gpus = gpus, pod_size = pod,
    global_batch = opts.global_batch, seq = opts.seq, objective = "step_time", top = 1, fix = fix,
    workload = workload_file, memory_reserve_bytes = opts.memory_reserve, precision = opts.precision,
  })
  if opts.lora_targets and not opts.lora_rank then fail("--lora-targets needs --lora-rank") end
  if opts.lora_rank then
    def.workload.lora_rank = opts.lora_rank
    def.workload.lora_targets = opts.lora_targets or DEFAULT.lora_targets
  end
  local moe = (model.num_regular_experts or 0) > 1
  if not moe and (opts.ep > 1 or opts.tp_moe > 1) then
    fail("--ep and --tp-moe need a model with routed experts; %s has none", model.name or opts.model)
  end
  if model.num_heads % opts.tp ~= 0 then
    fail("TP %d does not divide the %d attention heads of %s", opts.tp, model.num_heads, model.name or opts.model)
  end
  local res = core.search(def)
  local strategy = res.hits[1] or res.stats.smallest_shortfall
  if not strategy then
    if res.stats.considered == 0 then
      fail("%s with --vs %d is not a strategy (INTERLEAVED needs --vs > 1, every other schedule --vs 1)", sched,
        opts.vs)
    end
    -- Ask the core why, with the placement the search would have tried first.
    local pp_in = opts.pp_in or 1
    if not opts.pp_in then
      while opts.pp % (pp_in * 2) == 0 and pod % (opts.tp * opts.cp * pp_in * 2) == 0 do pp_in = pp_in * 2 end
    end
    local ok, e = pcall(core.search_eval, def, { tp = opts.tp, cp = opts.cp, pp = opts.pp, pp_in = pp_in,
      tp_moe = opts.tp_moe, ep = opts.ep, vs = opts.vs, mb = opts.micro_batch, schedule = sched,
      recompute = opts.recompute, dp_variant = fix.dp, sp = sp })
    if ok then fail("the strategy does not tile %d GPUs in %d-GPU pods", gpus, pod) end
    if not errors.is_core(e) then error(e, 0) end
    fail("%s", refusal(e))
  end
  local hit, r = core.search_eval(def, strategy)
  local time = ordered({
    step_time_seconds = r.step_time_s, mfu = r.mfu, hfu = r.hfu,
    -- what MFU is measured against: the dense peak at the GEMM precision (the core's basis)
    mfu_basis_flops_per_second_per_gpu = r.mfu > 0 and tonumber(string.format("%.12g",
      r.achieved_flops_per_gpu / r.mfu)) or nil,
    tokens_per_second = r.tokens_per_s,
    tokens_per_second_per_gpu = r.tokens_per_s / gpus,
    total_time_seconds = r.total_time_s > 0 and r.total_time_s or nil,
    bubble_fraction = r.bubble_fraction, microbatches = math.tointeger(r.microbatches) or r.microbatches,
    -- the passes whose layer collectives hide in forward-backward pairs (DualPipe, an EP
    -- overlap made of pairs); absent when the schedule pairs none
    paired_pass_fraction = (r.paired_share or 0) > 0 and r.paired_share or nil,
    step_breakdown = report.step_breakdown(r),
  }, { "step_time_seconds", "mfu", "hfu", "mfu_basis_flops_per_second_per_gpu", "tokens_per_second",
    "tokens_per_second_per_gpu", "total_time_seconds",
    "bubble_fraction", "microbatches", "paired_pass_fraction", "step_breakdown" })
  local strat = ordered({ tp = hit.tp, pp = hit.pp, pp_in = hit.pp_in, dp = hit.dp, cp = hit.cp,
    ep = moe and hit.ep or nil,
    ep_in_pod = moe and hit.ep_su or nil, tp_moe = moe and hit.tp_moe or nil, virtual_stages = hit.vs,
    micro_batch = hit.mb, global_batch = hit.batch, schedule = hit.schedule, recompute = hit.recompute,
    zero = hit.dp_variant, sequence_parallel = hit.sp },
    { "tp", "pp", "pp_in", "dp", "cp", "ep", "ep_in_pod", "tp_moe", "virtual_stages", "micro_batch", "global_batch",
      "schedule", "recompute", "zero", "sequence_parallel" })
  assert(hit.dp == dp, "the search's DP differs from the flags'")
  return ordered({ inputs = inputs_of(opts, gpus, pod, def.workload, workload_file, row.name), strategy = strat,
    time = time, memory = memory_of(r.memory), model_name = model.name or opts.model, node = system.node_name },
    { "inputs", "strategy", "time", "memory" })
end

-- inference(opts, gpus, pod, row) -> record: the serving search's evaluation of one
-- (TP, PP, EP, batch), as `fathom search --pass-mode inference_* --fix` gives it.
local function inference(opts, gpus, pod, row)
  local dp = check_degrees(opts, gpus, pod, false)
  for _, k in ipairs({ "cp", "tp_moe", "vs" }) do
    if opts[k] ~= 1 then fail("--%s is for training (%s)", k:gsub("_", "-"), row.name) end
  end
  for _, k in ipairs({ "global_batch", "pp_in", "schedule", "sp", "precision", "lora_rank", "lora_targets" }) do
    if opts[k] ~= nil then fail("--%s is for training (%s)", k:gsub("_", "-"), row.name) end
  end
  if opts.recompute ~= DEFAULT.recompute or opts.zero ~= DEFAULT.dp_variant then
    fail("--recompute and --zero are for training")
  end
  local analysis = require("fathom.analysis")
  local spec_mod = require("fathom.spec")
  local lib = spec_mod.hardware_library(analysis.resolve(opts.hardware_lib or "hardware/hardware_library.yaml"))
  local system = search.system(lib, opts.hardware, gpus, pod)
  local model_path = opts.model
  if not model_path:find("/") and not model_path:match("%.ya?ml$") and not model_path:match("%.json$") then
    model_path = "models/" .. model_path .. ".yaml"
  end
  local model = spec_mod.model(analysis.resolve(model_path))
  local workload_file = opts.workload or row.search_workload
  local w = row.load(analysis.resolve(workload_file))
  if opts.seq then w[row.context_key] = opts.seq end
  if opts.gen then w.num_generated_tokens = opts.gen end
  if opts.memory_reserve then w.memory_reserve_bytes = opts.memory_reserve end
  w.source_table, model.source_table = nil, nil
  local moe = (model.num_regular_experts or 0) > 1
  if not moe and opts.ep > 1 then
    fail("--ep needs a model with routed experts; %s has none", model.name or opts.model)
  end
  -- placed as the serving search places it (fathom.search.infer_topology), compiled and
  -- evaluated by the same core model; PP micro-batches in flight per replica, as there
  local topo = search.infer_topology(system, opts.tp, opts.pp, opts.ep, moe)
  if not topo then
    fail("TP %d, PP %d, EP %d does not tile %d GPUs in %d-GPU pods", opts.tp, opts.pp, opts.ep, gpus, pod)
  end
  w.micro_batch_size = opts.micro_batch
  w.global_batch_size = opts.micro_batch * opts.pp * dp
  local ok, plan = pcall(row.compile, system.node, topo, model, w)
  if not ok then
    if errors.is_core(plan) then fail("%s", refusal(plan)) end
    error(plan, 0)
  end
  local r = plan:evaluate()
  local time = ordered({ [row.latency:gsub("_s$", "_seconds")] = r[row.latency], tokens_per_second = r.tokens_per_s,
    tokens_per_second_per_gpu = r.tokens_per_s_per_gpu }, { "tpot_seconds", "ttft_seconds", "tokens_per_second",
    "tokens_per_second_per_gpu" })
  local mem = memory_of(r.memory)
  mem.kv_cache_bytes, mem.max_global_batch = r.kv_cache_bytes_per_gpu, math.tointeger(r.max_global_batch) or
    r.max_global_batch
  local x = { tp = opts.tp, pp = opts.pp, dp = dp, ep = opts.ep, micro_batch = opts.micro_batch,
    batch = w.global_batch_size }
  return ordered({ inputs = inputs_of(opts, gpus, pod, w, workload_file, row.name),
    strategy = ordered({ tp = x.tp, pp = x.pp, dp = x.dp, ep = moe and x.ep or nil, micro_batch = x.micro_batch,
      global_batch = x.batch }, { "tp", "pp", "dp", "ep", "micro_batch", "global_batch" }),
    time = time, memory = mem, model_name = model.name or opts.model, node = system.node_name },
    { "inputs", "strategy", "time", "memory" })
end

-- The readable view: title, strategy, where the time goes, memory per tier, fit.
local function table_text(rec)
  local i, s, t, m = rec.inputs, rec.strategy, rec.time, rec.memory
  local out = {}
  local batch = s.global_batch and string.format(", batch %d x %d tokens", s.global_batch, i.seq_length) or ""
  local lora = i.lora_rank and string.format(", LoRA rank %d on %s", i.lora_rank, i.lora_targets) or ""
  out[#out + 1] = string.format("%s on %d %s (%d-GPU pods), %s%s%s%s\n", rec.model_name, i.gpus, rec.node, i.pod_size,
    i.pass_mode, batch, i.precision and (", " .. i.precision) or "", lora)
  local parts = { "TP " .. s.tp, "PP " .. s.pp .. (s.pp_in and s.pp > 1 and string.format(" (%d in the pod)", s.pp_in)
    or ""), "DP " .. s.dp }
  if s.cp and s.cp > 1 then parts[#parts + 1] = "CP " .. s.cp end
  if s.ep then parts[#parts + 1] = string.format("EP %d (%d in the pod), TP of the experts %d", s.ep, s.ep_in_pod or
    s.ep, s.tp_moe or 1) end
  if s.schedule and s.pp > 1 then
    parts[#parts + 1] = s.schedule .. (s.virtual_stages > 1 and (" x" .. s.virtual_stages) or "")
  end
  parts[#parts + 1] = "micro-batch " .. s.micro_batch
  if s.recompute then
    parts[#parts + 1] = "recompute " .. s.recompute
    parts[#parts + 1] = s.zero
    parts[#parts + 1] = "SP " .. (s.sequence_parallel and "on" or "off")
  end
  out[#out + 1] = "strategy: " .. table.concat(parts, ", ") .. "\n\n"
  if t.step_time_seconds then
    out[#out + 1] = string.format("step %s, MFU %s of %s, %s tokens/s (%s per GPU), bubble %s\n\n",
      units.time(t.step_time_seconds), units.percent(t.mfu),
      t.mfu_basis_flops_per_second_per_gpu and units.flops_rate(t.mfu_basis_flops_per_second_per_gpu) or "-",
      units.count(t.tokens_per_second),
      units.count(t.tokens_per_second_per_gpu), units.percent(t.bubble_fraction))
    if t.paired_pass_fraction then
      out[#out] = out[#out]:sub(1, -2) .. string.format(
        "pairs: %s of the passes run in forward-backward pairs that hide their layer collectives, the rest alone\n\n",
        units.percent(t.paired_pass_fraction))
    end
    local rows = {}
    local keys = {} -- the breakdown's own order, the exposed collectives in the core's order
    for _, k in ipairs(util.keys(t.step_breakdown)) do
      if not k:match("^exposed_") or k == "exposed_offload_seconds" then keys[#keys + 1] = k end
    end
    for _, c in ipairs(names.comm_kind) do keys[#keys + 1] = "exposed_" .. c .. "_seconds" end
    for _, k in ipairs(keys) do
      local v = t.step_breakdown[k] or 0
      if v > 0 then
        rows[#rows + 1] = { (k:gsub("_seconds$", ""):gsub("_", " ")), units.time(v),
          units.percent(v / t.step_time_seconds) }
      end
    end
    out[#out + 1] = tablefmt.render({ "step time", "seconds", "share" }, rows, { "l", "r", "r" })
  else
    local lat = t.tpot_seconds and "TPOT" or "TTFT"
    out[#out + 1] = string.format("%s %s, %s tokens/s (%s per GPU)\n", lat,
      units.time(t.tpot_seconds or t.ttft_seconds),
      units.count(t.tokens_per_second), units.count(t.tokens_per_second_per_gpu))
  end
  out[#out + 1] = "\n"
  if m.components then
    local rows = {}
    for _, k in ipairs(util.keys(m.components)) do
      rows[#rows + 1] = { (k:gsub("_bytes$", ""):gsub("_", " ")), units.bytes(m.components[k]) }
    end
    out[#out + 1] = tablefmt.render({ "memory per GPU", "bytes" }, rows, { "l", "r" }) .. "\n"
    rows = {}
    for _, k in ipairs(util.keys(m.tiers)) do
      local x = m.tiers[k]
      rows[#rows + 1] = { k, units.bytes(x.used_bytes), units.bytes(x.capacity_bytes), units.bytes(x.free_bytes),
        x.fits and "yes" or "NO" }
    end
    out[#out + 1] = tablefmt.render({ "tier", "used", "capacity", "free", "fits" }, rows, { "l", "r", "r", "r", "l" })
  end
  if m.kv_cache_bytes then
    out[#out + 1] = string.format("\nKV cache %s per GPU; %s\n", units.bytes(m.kv_cache_bytes),
      (m.max_global_batch or 0) > 0 and ("the largest batch that fits: " .. m.max_global_batch)
        or "no batch of this micro-batch fits")
  end
  out[#out + 1] = m.fits and string.format("\nfits: yes, %s free per GPU (reserve included)\n",
    units.bytes(m.headroom_bytes))
    or string.format("\nfits: NO, %s short in %s\n", units.bytes(-m.headroom_bytes), tostring(m.overflow_tier))
  return table.concat(out)
end

M.table_text = table_text

-- estimate(opts) -> the record of one configuration (raw SI numbers); opts as the flags
-- parse them (fathom.args), for scripts and specs.
function M.estimate(opts)
  local gpus, pod = opts.gpus, math.min(opts.pod_size, opts.gpus)
  if gpus % pod ~= 0 then fail("%d GPUs are not a whole number of %d-GPU pods (see --pod-size)", gpus, pod) end
  local row = passes.get(opts.pass_mode)
  if row.search == "training" then
    if opts.gen then fail("--gen is for inference_decode") end
    return training(opts, gpus, pod, row)
  end
  return inference(opts, gpus, pod, row)
end

function M.main(argv)
  local opts, extra = args.parse(argv, spec, "estimate")
  if opts.help then
    io.stdout:write(M.usage)
    return 0
  end
  if #extra > 0 then fail("unexpected argument '%s' (see 'fathom estimate --help')", extra[1]) end
  local rec = M.estimate(opts)
  local data = function()
    rec.model_name, rec.node = nil, nil -- the inputs name them
    return rec
  end
  output.emit(opts, { table = function() return table_text(rec) end, data = data }, "estimate")
  return 0
end

return M
