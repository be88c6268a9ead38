-- fathom search: the best parallelism strategies for a model on a system.
local args = require("fathom.args")
local core = require("fathom.core")
local errors = require("fathom.errors")
local names = require("fathom.names")
local output = require("fathom.output")
local passes = require("fathom.passes")
local precision = require("fathom.precision")
local search = require("fathom.search")
local tablefmt = require("fathom.format.table")
local units = require("fathom.units")
local util = require("fathom.format.util")

local M = {}

local spec = {
  { name = "model", arg = "NAME|FILE", required = true, help = "a model of configs/models (e.g. gpt3_175b) or a file" },
  { name = "hardware", arg = "NODE", required = true, help = "a node of the hardware library (e.g. A100_80GB_SXM)" },
  { name = "gpus", arg = "N", integer = { 1, 4194304 }, required = true, help = "GPUs in the system" },
  { name = "pod-size", arg = "K", integer = { 1, 4194304 }, default = 8, help = "GPUs per scale-up pod" },
  { name = "hardware-lib", arg = "FILE", help = "hardware library [default: configs/hardware/hardware_library.yaml]" },
  { name = "workload", arg = "FILE", help = "training spec to start from [default: train_specs/search_default.yaml]" },
  { name = "pass-mode", arg = "MODE", choices = passes.names,
    default = passes.names[1], help = "what to model" },
  { name = "gen", arg = "N", integer = { 1, 1073741824 }, help = "decode: tokens to generate" },
  { name = "latency-bound", arg = "S", number = true,
    help = "inference: keep strategies whose TPOT (decode) or TTFT (prefill) is within S seconds" },
  { name = "global-batch", arg = "B", integer = { 1, 2147483647 }, help = "sequences per step" },
  { name = "precision", arg = "P", choices = precision.names, help = "training: element width and GEMM recipe "
    .. "[default: the workload's; search_default: bf16]" },
  { name = "batch-rounding", arg = "MODE", choices = { "exact", "down" }, default = "exact",
    help = "exact: the global batch must tile; down: per strategy, the largest batch <= B that tiles" },
  { name = "seq", arg = "S", integer = { 1, 1073741824 }, help = "sequence length" },
  { name = "objective", arg = "OBJ", choices = { "step_time", "mfu", "tokens_per_s", "time_to_train", "headroom",
    "tpot", "ttft", "throughput" }, help = "what to rank by [default: step_time; inference: throughput]" },
  { name = "top", arg = "K", integer = { 1, 1000 }, default = 10, help = "strategies to show" },
  { name = "fix", arg = "K=V,...", multi = true,
    help = "fix dimensions, e.g. tp=8,pp=4 (tp, pp, cp, ep, tp_moe, vs, mb, offload=off|TIER, ...)" },
  { name = "memory-reserve", arg = "SIZE", bytes = true,
    help = "per-GPU runtime reserve (CUDA/ROCm context, library workspaces), e.g. 2GiB or 0; "
      .. "replaces the workload's memory_reserve_bytes [default: 1GiB]" },
  { name = "jobs", arg = "N", integer = { 1, args.max_workers() },
    help = "processes that share the search (same result as one; one for a small space) "
      .. "[default: the core count; under mpirun: the ranks]" },
  { name = "workers", arg = "N", integer = { 1, args.max_workers() }, help = "the same as --jobs" },
  { name = "no-prune", flag = true,
    help = "time every strategy (the bounds that skip strategies never change the best N; this checks it)" },
  { name = "help", flag = true, help = "this help" },
}
spec = args.with_output(spec, { svg = true, help = "table: ranked and explained; yaml (readable units unless "
  .. "--raw-output), json, csv: the inputs searched and the hits, raw SI numbers; svg: the Pareto front of step "
  .. "time (decode: tokens/s per GPU) against memory per GPU" })
M.spec = spec -- the option table (completion and the man page read it)

M.usage = "usage: fathom search --model NAME|FILE --hardware NODE --gpus N [--pod-size K]\n" ..
  "                     [--pass-mode " .. table.concat(passes.names, "|") .. "]\n" ..
  "                     [--global-batch B] [--batch-rounding exact|down] [--seq S] [--gen N]\n" ..
  "                     [--precision P]\n" ..
  "                     [--objective OBJ] [--top K] [--memory-reserve SIZE]\n" ..
  "                     [--latency-bound S] [--fix tp=8,pp=4] [--no-prune] [--format table|yaml|json|csv|svg]\n" ..
  "                     [--output-file F] [--raw-output] [--jobs N]\n\n" ..
  "Enumerates TP (attention and experts), PP (every pipeline schedule: GPipe, 1F1B,\n" ..
  "interleaved with virtual stages, ZB-H1, DualPipe; stages split between pod and\n" ..
  "cluster), DP with ZeRO-1/2/3, EP split between scale-up and scale-out, CP, SP,\n" ..
  "micro-batch, recomputation and offload; prunes what does not tile or fit (memory is checked\n" ..
  "before time) and ranks the rest. Infeasible counts are reported. Models and nodes are\n" ..
  "found by name in configs/.\n\n" ..
  "Micro-batch: every size up to " .. search.MB_MAX .. " that divides the local batch (global batch / DP);\n" ..
  "virtual stages: every divisor v > 1 of layers / PP (interleaved schedules). --fix mb=N\n" ..
  "or vs=N pins any value. --batch-rounding down turns the global batch into a maximum:\n" ..
  "each strategy runs the largest batch <= B that is a multiple of DP x micro-batch (and\n" ..
  "of what its schedule needs), every micro-batch up to the local batch is tried, the\n" ..
  "table shows the batch per row and strategies rank by time per sequence.\n\n" ..
  "Strategies that provably cannot enter the best K are skipped (bounds on memory and\n" ..
  "step time computed before timing; README \"Exact pruning\"): the result is the\n" ..
  "exhaustive search's, which --no-prune runs.\n\n" ..
  "Offload: weights (w), saved activations (a) and optimizer states (o) may each move to the\n" ..
  "node's host memory; each strategy takes the fastest placement of them that fits (the\n" ..
  "offload column). --fix offload=off keeps them on the GPU, --fix offload=nvme (any\n" ..
  "memory tier of the node) offloads there.\n\n" ..
  "The header states what was assumed: precision, workload file, objective, what MFU is\n" ..
  "measured against, the memory reserve.\n\n" ..
  "examples:\n" ..
  "  fathom search --model llama3.1_70b --hardware H100_SXM --gpus 64 --global-batch 512\n" ..
  "  fathom search --model gpt3_175b --hardware A100_80GB_SXM --gpus 1024 --fix tp=8,pp=8 --format json\n" ..
  "  fathom search --model llama3.1_70b --hardware H100_SXM --gpus 64 --format svg --output-file pareto.svg\n\n" ..
  args.usage(spec) .. "\n"

local function parse_fix(list)
  local fix = {}
  for _, item in ipairs(list or {}) do
    for kv in item:gmatch("[^,]+") do
      local k, v = kv:match("^%s*([%w_]+)%s*=%s*([^%s]+)%s*$")
      if not k then errors.raise("search: --fix expects key=value pairs, got '%s'", kv) end
      local n = tonumber(v)
      if v == "true" or v == "false" then n = v == "true" end
      if n == nil then n = v end
      if type(n) == "number" then n = math.tointeger(n) or n end
      local lo = search.zero_ok[k] and 0 or 1
      if type(n) == "number" and (math.type(n) ~= "integer" or n < lo or n > search.fix_max(k)) then
        errors.raise("search: --fix %s=%s: expected %s integer up to %d", k, v,
          lo == 0 and "a non-negative" or "a positive", search.fix_max(k))
      end
      fix[k] = n
    end
  end
  return fix
end

local function table_text(res, system, top, rounded, n_layers)
  local rows = {}
  for i, h in ipairs(res.hits) do
    if i > top then break end
    -- an uneven split (trimmed, or PP not dividing the layers) shows its end stages' layers:
    -- "8[11|12]" = 11 on the first, 12 on the last
    local split = ((h.trim_first or 0) > 0 or (h.trim_last or 0) > 0 or n_layers % h.pp ~= 0)
      and string.format("[%d|%d]", h.first_stage_layers, h.last_stage_layers) or ""
    rows[#rows + 1] = { i, h.tp, h.pp .. (h.vs > 1 and ("x" .. h.vs) or "") .. split, h.dp,
      h.ep > 1 and (h.ep .. (h.ep_su < h.ep and ("(" .. h.ep_su .. ")") or "")) or "-",
      h.ep > 1 and h.tp_moe or "-", h.cp,
      h.pp > 1 and h.schedule or "-", h.mb, h.recompute, h.dp_variant, h.sp and "on" or "off", search.offload_label(h),
      units.bytes(h.peak_bytes), units.bytes(h.headroom_bytes), units.time(h.step_time_s),
      units.percent(h.mfu),
      units.percent(h.bubble_fraction), units.time(h.exposed_s.tp + h.exposed_s.tp_moe),
      units.time(h.exposed_s.ep), units.time(h.exposed_s.pp), units.time(h.exposed_s.dp + h.exposed_s.dp_moe) }
    if rounded then table.insert(rows[#rows], 10, h.batch) end
  end
  local header = { "#", "TP", "PP", "DP", "EP(pod)", "TPe", "CP", "schedule", "mb", "recompute", "ZeRO",
    "SP", "offload", "mem/GPU", "free", "step", "MFU", "bubble", "exp.TP", "exp.EP", "exp.PP", "exp.DP" }
  if rounded then table.insert(header, 10, "batch") end
  local out = { tablefmt.render(header, rows) }
  local s = res.stats
  local tiers = {}
  for t, n in pairs(s.no_fit_by_tier or {}) do tiers[#tiers + 1] = string.format("%s %d", t, n) end
  table.sort(tiers)
  -- GPUs filling their last pod partly are placed in rank order (fth_search.h, num_xpus).
  local where = system.placed and string.format("%d GPUs in rank order on %d pods of %d (the last partly used; " ..
    "groups straddling pods costed as they fall; EP(pod) is the EP degree)", system.gpus, system.num_pods,
    system.pod_size) or string.format("%d x %d GPUs", system.num_pods, system.pod_size)
  if s.pruning == "on" then -- how many were timed depends on the processes' split
    out[#out + 1] = string.format("\n%d strategies considered on %s; bounds skipped what could not " ..
      "enter the best %d (--no-prune times and counts every one).\n", s.considered or 0, where,
      res.top or #res.hits)
  else
    out[#out + 1] = string.format("\n%d strategies considered on %s: %d timed, %d do not tile, " ..
      "%d refused by the model, %d do not fit%s.\n", s.considered or 0, where,
      s.evaluated or 0, s.not_tiling or 0, s.invalid or 0, s.no_fit or 0,
      #tiers > 0 and (" (" .. table.concat(tiers, ", ") .. ")") or "")
  end
  if #res.hits > 0 then
    out[#out + 1] = "\nrecommendation: #1 because\n"
    local runner = search.runner_up(res.hits)
    local rank = 2
    for i, h in ipairs(res.hits) do if h == runner then rank = i end end
    out[#out] = runner and string.format("\nrecommendation: #1; against #%d:\n", rank)
      or "\nrecommendation: #1:\n" -- nothing to compare it with
    for _, reason in ipairs(search.explain(res.hits[1], runner, system)) do
      out[#out + 1] = "  - " .. reason .. "\n"
    end
  end
  return table.concat(out)
end

-- inputs_of(def, opts, gpus, pod, res, row) -> what the search assumed and searched, recorded
-- in every format: precision, workload, objective, batch, the --fix pins, the reserve and
-- what MFU is measured against (the dense peak at the GEMM precision: the best hit's
-- achieved FLOP/s over its MFU, so it is the core's own basis).
local function inputs_of(def, opts, gpus, pod, res, row)
  local w = def.workload
  local basis
  if res.hits[1] then
    local _, r = core.search_eval(def, res.hits[1])
    -- 12 digits: the quotient of two rounded doubles, not a finer fact about the GPU
    basis = r.mfu > 0 and tonumber(string.format("%.12g", r.achieved_flops_per_gpu / r.mfu)) or nil
  end
  return util.ordered({
    model = opts.model, hardware = opts.hardware, gpus = gpus, pod_size = pod, pass_mode = row.name,
    workload = opts.workload or row.search_workload, precision = precision.describe(w),
    global_batch = w.global_batch_size, seq_length = w.seq_length, batch_rounding = def.batch_rounding,
    objective = def.objective, fix = #opts.fix > 0 and table.concat(opts.fix, ",") or nil,
    memory_reserve_bytes = math.tointeger(w.memory_reserve_bytes) or w.memory_reserve_bytes,
    memory_fragmentation_fraction = w.memory_fragmentation_fraction,
    mfu_basis_flops_per_second_per_gpu = basis,
  }, { "model", "hardware", "gpus", "pod_size", "pass_mode", "workload", "precision", "global_batch", "seq_length",
    "batch_rounding", "objective", "fix", "memory_reserve_bytes", "memory_fragmentation_fraction",
    "mfu_basis_flops_per_second_per_gpu" })
end

-- assumptions_line(inputs) -> the header's lines under the title: what the numbers below assume.
local function assumptions_line(i)
  return string.format("assumed: %s, workload %s, ranked by %s\n" ..
    "MFU against %s per GPU (the dense peak at the GEMM precision); memory reserve %s + %s%% of activations per GPU\n",
    i.precision, i.workload, i.objective == "headroom" and "free memory" or "step time",
    i.mfu_basis_flops_per_second_per_gpu and units.flops_rate(i.mfu_basis_flops_per_second_per_gpu) or "-",
    units.bytes(i.memory_reserve_bytes), string.format("%.3g", 100 * i.memory_fragmentation_fraction))
end

-- csv_rows(inputs, hits) -> one row per hit: its rank, the inputs searched, the hit.
local function csv_rows(inputs, hits)
  local rows = {}
  for i, h in ipairs(hits) do
    local row = { rank = i, inputs = inputs }
    for k, v in pairs(h) do row[k] = v end
    rows[i] = util.ordered(row, { "rank", "inputs" }) -- then the hit's fields, sorted
  end
  return rows
end

-- pareto_points(def, opts) -> every strategy among the fastest and the leanest that fit (up
-- to PARETO_TOP of each), as {x = memory per GPU, y = step time, label}.
local PARETO_TOP = 1024
local function pareto_points(def, opts)
  local seen, points = {}, {}
  for _, objective in ipairs({ "step_time", "headroom" }) do
    local d = {}
    for k, v in pairs(def) do d[k] = v end
    d.objective, d.top = objective, PARETO_TOP
    for _, h in ipairs(search.run(d, math.tointeger(opts.jobs or opts.workers) or 1, false).hits) do
      local key = string.format("%d/%d/%d/%d/%d/%d/%d/%d/%d/%s/%s/%s/%s/%d/%d", h.tp, h.pp, h.pp_in, h.cp, h.ep,
        h.ep_su, h.tp_moe, h.vs, h.mb, h.schedule, h.recompute, h.dp_variant, tostring(h.sp), h.trim_first or 0,
        h.trim_last or 0)
      if not seen[key] then
        seen[key] = true
        points[#points + 1] = { x = h.peak_bytes, y = h.step_time_s, label = string.format(
          "TP%d PP%d%s DP%d%s mb%d %s %s %s", h.tp, h.pp, h.vs > 1 and ("x" .. h.vs) or "", h.dp,
          h.ep > 1 and (" EP" .. h.ep) or "", h.mb, h.recompute, h.dp_variant, h.pp > 1 and h.schedule or "") }
      end
    end
  end
  return points
end

local function inference(opts, gpus, pod, row)
  local pass = row.pass
  if opts.precision then
    errors.raise("search: --precision is for training (%s: the workload's weight and KV-cache bytes)", row.name)
  end
  local analysis = require("fathom.analysis")
  local spec_mod = require("fathom.spec")
  local lib = spec_mod.hardware_library(analysis.resolve(opts.hardware_lib or "hardware/hardware_library.yaml"))
  local system = search.system(lib, opts.hardware, gpus, pod)
  local model_path = opts.model
  if not model_path:find("/") and not model_path:match("%.ya?ml$") then
    model_path = "models/" .. model_path .. ".yaml"
  end
  local model = spec_mod.model(analysis.resolve(model_path))
  local w = row.load(analysis.resolve(opts.workload or row.search_workload))
  if opts.seq then w[row.context_key] = math.tointeger(opts.seq) end
  if opts.gen then w.num_generated_tokens = math.tointeger(opts.gen) end
  if opts.memory_reserve then w.memory_reserve_bytes = opts.memory_reserve end
  w.source_table, model.source_table = nil, nil
  local objective = opts.objective or "throughput"
  if objective ~= "throughput" and objective ~= "tpot" and objective ~= "ttft" then
    errors.raise("search: objective '%s' is for training (inference: throughput, tpot, ttft)", objective)
  end
  local res = search.run_inference({ model = model, system = system, workload = w, pass = pass, objective = objective,
    latency_bound = opts.latency_bound, fix = parse_fix(opts.fix), top = math.tointeger(opts.top) })
  if #res.hits == 0 then
    errors.raise("search: no serving strategy fits%s (%d considered, %d do not fit, %d over the latency bound)",
      opts.latency_bound and " within the latency bound" or "", res.stats.considered, res.stats.no_fit,
      res.stats.over_latency)
  end
  local inputs = util.ordered({ model = opts.model, hardware = opts.hardware, gpus = gpus, pod_size = pod,
    pass_mode = row.name, workload = opts.workload or row.search_workload, seq_length = w[row.context_key],
    generated_tokens = w.num_generated_tokens, objective = objective, latency_bound_seconds = opts.latency_bound,
    fix = #opts.fix > 0 and table.concat(opts.fix, ",") or nil,
    memory_reserve_bytes = math.tointeger(w.memory_reserve_bytes) or w.memory_reserve_bytes },
    { "model", "hardware", "gpus", "pod_size", "pass_mode", "workload", "seq_length", "generated_tokens", "objective",
      "latency_bound_seconds", "fix", "memory_reserve_bytes" })
  local function table_view()
    local rows = {}
    for i, x in ipairs(res.hits) do
      rows[i] = { i, x.tp, x.pp, x.dp, x.ep > 1 and x.ep or "-", x.batch, units.time(x.latency_s),
        string.format("%.0f", x.tokens_per_s), string.format("%.0f", x.tokens_per_s_per_gpu), units.bytes(x.peak_bytes),
        units.bytes(x.headroom_bytes), units.bytes(x.kv_cache_bytes) }
    end
    local s = res.stats
    return string.format("%s %s on %d %s (%d-GPU pods), %s\n", model.name or opts.model, pass, gpus,
      opts.hardware, pod, objective == "throughput" and "most tokens/s" or ("lowest " .. objective)) ..
      string.format("assumed: workload %s, memory reserve %s per GPU\n\n", inputs.workload,
        units.bytes(inputs.memory_reserve_bytes)) ..
      tablefmt.render({ "#", "TP", "PP", "DP", "EP", "batch", row.latency_label,
        "tokens/s", "tok/s/GPU", "mem/GPU", "free", "KV/GPU" }, rows) ..
      string.format("\n%d strategies considered: %d evaluated, %d do not tile, %d refused, " ..
        "%d do not fit, %d over the latency bound.\n", s.considered, s.evaluated, s.not_tiling, s.invalid, s.no_fit,
        s.over_latency)
  end
  for i, x in ipairs(res.hits) do -- each pass's own latency only: a decode's TTFT is not modelled here
    local h = {}
    for k, v in pairs(x) do h[k] = v end
    if row.latency ~= "ttft_s" then h.ttft_s = nil end
    if row.latency ~= "tpot_s" then h.tpot_s = nil end
    res.hits[i] = h
  end
  output.emit(opts, {
    table = table_view,
    data = function()
      return util.ordered({ inputs = inputs, hits = util.array(res.hits), stats = res.stats },
        { "inputs", "hits", "stats" })
    end,
    csv = function() return csv_rows(inputs, res.hits) end,
    svg = function()
      local all = search.run_inference({ model = model, system = system, workload = w, pass = pass,
        objective = objective, latency_bound = opts.latency_bound, fix = parse_fix(opts.fix), top = PARETO_TOP })
      local points = {}
      for i, x in ipairs(all.hits) do
        points[i] = { x = x.peak_bytes, y = x.tokens_per_s_per_gpu, label = string.format("TP%d PP%d DP%d%s batch %d",
          x.tp, x.pp, x.dp, x.ep > 1 and (" EP" .. x.ep) or "", x.batch) }
      end
      return require("fathom.format.pareto").encode({ points = points, x_scale = 2 ^ 30, maximize = true,
        title = string.format("%s on %d %s, %s: tokens/s per GPU against memory per GPU", model.name or opts.model,
          gpus, opts.hardware, row.name),
        x_label = "memory per GPU (GiB)", y_label = "tokens/s per GPU" })
    end,
  }, "search")
  return 0
end

-- The strategy searches, by the pass mode's `search` (fathom.passes).
local searches = {}

function searches.inference(opts, extra, row)
  if #extra > 0 then errors.raise("search: unexpected argument '%s'", extra[1]) end
  local g, pz = math.tointeger(opts.gpus), math.tointeger(opts.pod_size)
  if not g or g < 1 or not pz or pz < 1 then errors.raise("search: --gpus and --pod-size must be positive") end
  return inference(opts, g, math.min(pz, g), row)
end

function M.main(argv)
  local opts, extra = args.parse(argv, spec, "search")
  if opts.help then
    io.stdout:write(M.usage)
    return 0
  end
  for _, k in ipairs({ "global_batch", "seq", "top", "workers", "jobs", "gen" }) do
    if opts[k] ~= nil and (math.tointeger(opts[k]) == nil or opts[k] < 1) then
      errors.raise("search: --%s must be a positive integer, got %s", k:gsub("_", "-"), tostring(opts[k]))
    end
  end
  local row = passes.get(opts.pass_mode)
  return searches[row.search](opts, extra, row)
end

function searches.training(opts, extra, row)
  if #extra > 0 then errors.raise("search: unexpected argument '%s'", extra[1]) end
  local gpus = math.tointeger(opts.gpus)
  local pod = math.tointeger(opts.pod_size)
  if not gpus or gpus < 1 then errors.raise("search: --gpus must be a positive integer") end
  if not pod or pod < 1 then errors.raise("search: --pod-size must be a positive integer") end
  if pod > gpus then pod = gpus end
  if opts.objective == "tpot" or opts.objective == "ttft" or opts.objective == "throughput" then
    errors.raise("search: objective '%s' needs --pass-mode inference_decode or inference_prefill", opts.objective)
  end
  local objective = opts.objective == "headroom" and "headroom" or "step_time"
  local def, model, system = search.prepare({
    model = opts.model, hardware = opts.hardware_lib, node = opts.hardware, gpus = gpus, pod_size = pod,
    global_batch = opts.global_batch and math.tointeger(opts.global_batch),
    seq = opts.seq and math.tointeger(opts.seq), objective = objective,
    top = math.max(opts.top, 2), fix = parse_fix(opts.fix),
    workload = opts.workload or row.search_workload, batch_rounding = opts.batch_rounding,
    memory_reserve_bytes = opts.memory_reserve, prune = opts.no_prune and "off" or "on",
    precision = opts.precision,
  })
  for _, t in ipairs(def.space.tp) do
    if model.num_heads % t ~= 0 then
      errors.raise("search: TP=%d does not divide the %d attention heads of %s", t, model.num_heads,
        model.name or "the model")
    end
  end
  local jobs = math.tointeger(opts.jobs or opts.workers) or require("fathom.parallel").default_jobs()
  local res = search.run(def, jobs)
  res.top = math.tointeger(opts.top)
  if #res.hits > 0 and def.prune ~= "off" then
    -- With bounds on, which strategies each process times (and so every outcome count but
    -- `considered`) depends on how the space was split: the output keeps only what every
    -- split gives alike, so --jobs 1, --jobs N and mpirun write the same bytes.
    res.stats = { considered = res.stats.considered, pruning = "on" }
  end
  if #res.hits == 0 then
    local s = res.stats
    if s.smallest_shortfall then
      local h = s.smallest_shortfall
      local tier = h.overflow_tier or names.memory_tier[1]
      local what = tier == names.memory_tier[1] and ("the " .. units.bytes(h.capacity_bytes) .. " of each GPU")
        or "each GPU's share"
      errors.raise("search: nothing fits: the closest (TP %d, PP %d, DP %d, EP %d, mb %d, recompute %s, %s, " ..
        "offload %s) needs %s more %s than %s", h.tp, h.pp, h.dp, h.ep, h.mb, h.recompute, h.dp_variant,
        search.offload_label(h), units.bytes(s.shortfall_bytes), tier, what)
    end
    errors.raise("search: no strategy tiles %d GPUs in %d-GPU pods for this model and batch " ..
      "(%d considered; try another --global-batch or --pod-size%s)", gpus, pod, s.considered or 0,
      def.batch_rounding == "exact" and ", or --batch-rounding down" or "")
  end
  local rounded = def.batch_rounding == "down"
  local inputs = inputs_of(def, opts, gpus, pod, res, row)
  local function hits_of(list, top)
    local hits = {}
    for i, h in ipairs(list) do
      if i > top then break end
      hits[i] = h
    end
    return hits
  end
  output.emit(opts, {
    table = function()
      return string.format("%s on %d %s (%d-GPU pods), batch %s%d x %d tokens%s\n", model.name or opts.model,
        gpus, opts.hardware, pod, rounded and "up to " or "", def.workload.global_batch_size, def.workload.seq_length,
        rounded and " (rounded down per strategy, ranked by time per sequence)" or "") ..
        assumptions_line(inputs) .. "\n" .. table_text(res, system, opts.top, rounded, model.n_layers)
    end,
    data = function()
      return util.ordered({ inputs = inputs, hits = util.array(hits_of(res.hits, opts.top)), stats = res.stats,
        recommendation = util.array(search.explain(res.hits[1], search.runner_up(res.hits), system)) },
        { "inputs", "hits", "stats", "recommendation" })
    end,
    csv = function() return csv_rows(inputs, hits_of(res.hits, opts.top)) end,
    svg = function()
      local points = pareto_points(def, opts)
      return require("fathom.format.pareto").encode({ points = points, x_scale = 2 ^ 30,
        title = string.format("%s on %d %s, training: step time against memory per GPU", model.name or opts.model,
          gpus, opts.hardware),
        x_label = "memory per GPU (GiB)", y_label = "step time (s)" })
    end,
  }, "search")
  return 0
end

return M
