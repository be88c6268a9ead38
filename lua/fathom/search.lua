-- fathom.search: "for this model on these GPUs, which strategy is fastest, does it
-- fit, and why?" The policy lives here: which values each parallelism dimension may
-- take, which are fixed, how the best are ranked and explained. The C core
-- (core.search) places each strategy on the fabric, checks tiling and memory
-- (memory before time) and times what fits, keeping the best N; several worker
-- processes split the enumeration and their results merge deterministically.
local analysis = require("fathom.analysis")
local core = require("fathom.core")
local errors = require("fathom.errors")
local enums = require("fathom.names")
local passes = require("fathom.passes")
local spec = require("fathom.spec")
local units = require("fathom.units")

local M = {}

local TAG = enums.key("logical_tag")
local TOPO = enums.key("topology_type")
local TIER = enums.key("memory_tier")

local function copy(list)
  local out = {}
  for i, v in ipairs(list) do out[i] = v end
  return out
end

local function divisors(n, limit)
  local out = {}
  for i = 1, math.min(n, limit or n) do
    if n % i == 0 then out[#out + 1] = i end
  end
  return out
end

local function powers_of_two_dividing(n, limit)
  local out, x = {}, 1
  while x <= n and x <= (limit or n) do
    if n % x == 0 then out[#out + 1] = x end
    x = x * 2
  end
  return out
end

local function cap(list, n)
  -- the core takes at most 32 values per dimension: keep the smallest and largest
  if #list <= n then return list end
  local out = {}
  for i = 1, n // 2 do out[#out + 1] = list[i] end
  for i = #list - (n - #out) + 1, #list do out[#out + 1] = list[i] end
  return out
end

-- fix_max(key) -> the largest value --fix may give a numeric dimension (README
-- "Limits": every placement product stays in an int).
function M.fix_max(k)
  return (k == "mb" or k == "batch") and 65536 or k == "vs" and 256 or 1024
end

-- Knobs whose values start at 0 (every other numeric --fix value is >= 1).
M.zero_ok = { trim_first = true, trim_last = true }

-- Uneven pipeline splits searched by default: 0..TRIM_MAX layers taken off the even split's
-- first stage (beside the embedding) and off its last (beside the LM head), each pair a
-- strategy, the layers going to the middle stages (README "Uneven pipeline splits").
M.TRIM_MAX = 1

-- The recompute modes searched unless --fix names others: every mode but PyTorch's per-op
-- selective checkpointing, a policy of one framework (torchtitan) rather than a choice every
-- training stack offers; `--fix recompute=op` adds it.
local function default_recompute()
  local out = {}
  for _, n in ipairs(enums.recompute) do
    if n ~= "op" then out[#out + 1] = n end
  end
  return out
end

-- The memory tiers a search may offload to: "off" and every tier the node has beyond
-- the accelerator's.
function M.offload_choices(system)
  local out = { "off" }
  local tiers = system.node and system.node.device_memory_tiers or {}
  for _, t in ipairs(enums.memory_tier) do
    if t ~= TIER.xpu_memory and tiers[t] then out[#out + 1] = t end
  end
  return out
end

-- Offload searched by default: weights, saved activations and optimizer states may each
-- move to the node's host memory (fth_search.h: each strategy takes the fastest of the
-- least offloads that fit); `--fix offload=off` keeps everything on the accelerator,
-- `--fix offload=nvme` (any tier of the node) offloads there instead.
function M.default_offload(system)
  local tiers = system.node and system.node.device_memory_tiers or {}
  return tiers.host_memory and TIER.host_memory or "off"
end

-- The automatic micro-batch list stops at this size (a larger one is still tried with
-- --fix mb=N); README "Strategy search".
M.MB_MAX = 64

-- pipeline_degrees(n_layers, pod, pods) -> the PP values searched: every divisor of the layers,
-- and every other degree that tiles the GPUs (a power of two dividing the pod inside it, times a
-- divisor of the pod count across pods) and leaves each stage a layer, its stages split unevenly
-- (ceil(layers / PP) on the middle ones, the first and last lighter: fth_layout.c). Up to 128.
-- `placed` (the job's GPU count, when they fill their last pod partly): every degree dividing
-- it that leaves each stage a layer, the stages outermost in rank order.
function M.pipeline_degrees(n_layers, pod, pods, placed)
  local out = {}
  for p = 1, math.min(n_layers, 128) do
    if placed then
      if placed % p == 0 then out[#out + 1] = p end
      goto next
    end
    local tiles = false
    for _, inside in ipairs(powers_of_two_dividing(pod, pod)) do
      tiles = tiles or (p % inside == 0 and pods % (p // inside) == 0)
    end
    if n_layers % p == 0 or tiles then out[#out + 1] = p end
    ::next::
  end
  return out
end

-- space(model, system, workload, fix) -> the candidate values per dimension.
-- Pruning rules (what a strategy must satisfy before it is worth timing):
--   TP divides the heads and the pod, up to the pod (TP never crosses the scale-up fabric);
--   PP divides the layers, or tiles the GPUs with uneven stages (M.pipeline_degrees); the
--   stages inside the pod divide the pod;
--   EP divides the experts; CP only for long sequences; SP only with TP > 1.
-- Virtual stages and micro-batch are "auto": the core takes, per placement, every
-- divisor v > 1 of layers / PP (interleaved rows) and every micro-batch up to M.MB_MAX
-- that divides the local batch (global batch / DP; with batch rounding down, every
-- micro-batch up to the local batch, each strategy with its own rounded batch).
function M.space(model, system, workload, fix)
  local heads = model.num_heads
  local pod = system.pod_size
  local s = {
    tp = {},
    cp = { 1 },
    pp = cap(M.pipeline_degrees(model.n_layers, pod, system.num_pods, system.placed and system.gpus), 32),
    pp_in = system.placed and { 1 } or powers_of_two_dividing(pod, pod),
    tp_moe = { 1 },
    ep = { 1 },
    vs = "auto",
    mb = "auto",
    mb_max = M.MB_MAX,
    recompute = default_recompute(),
    dp = copy(enums.dp_variant),
    schedule = copy(enums.pp_schedule),
    sp = { false, true },
    offload = M.default_offload(system),
    trim_first = {},
    trim_last = {},
  }
  for t = 0, M.TRIM_MAX do
    s.trim_first[#s.trim_first + 1] = t
    s.trim_last[#s.trim_last + 1] = t
  end
  -- TP: every divisor of the pod that divides the heads, up to the whole scale-up domain
  -- (an NVL72 or a 144-GPU pod runs TP 12, 24, 36, 72 where the heads allow).
  for _, t in ipairs(divisors(pod)) do
    if heads % t == 0 then s.tp[#s.tp + 1] = t end
  end
  s.tp = cap(s.tp, 32)
  if workload.seq_length >= 32768 then
    s.cp = { 1, 2, 4, 8 }
  elseif workload.seq_length >= 8192 then
    s.cp = { 1, 2 }
  end
  if (model.num_regular_experts or 0) > 1 then
    s.tp_moe = powers_of_two_dividing(pod, 8)
    s.ep = cap(powers_of_two_dividing(model.num_regular_experts, 1024), 32)
  end
  local numeric = { tp = true, cp = true, pp = true, pp_in = true, tp_moe = true, ep = true, vs = true, mb = true,
    trim_first = true, trim_last = true }
  local choices = { recompute = copy(enums.recompute), dp = s.dp, schedule = s.schedule,
    offload = M.offload_choices(system) }
  for k, v in pairs(fix or {}) do
    if s[k] == nil or k == "mb_max" then
      local names = {}
      for n in pairs(s) do
        if n ~= "mb_max" then names[#names + 1] = n end
      end
      table.sort(names)
      errors.raise("search: cannot fix '%s'%s", k, errors.suggest(k, names))
    end
    local list = type(v) == "table" and v or { v }
    for _, x in ipairs(list) do
      local hi = M.fix_max(k)
      local lo = M.zero_ok[k] and 0 or 1
      if numeric[k] and (math.type(x) ~= "integer" or x < lo or x > hi) then
        errors.raise("search: --fix %s=%s: expected %s integer up to %d", k, tostring(x),
          lo == 0 and "a non-negative" or "a positive", hi)
      end
      if choices[k] then
        local ok = false
        for _, c in ipairs(choices[k]) do ok = ok or c == x end
        if not ok then
          errors.raise("search: --fix %s=%s: expected one of %s%s", k, tostring(x), table.concat(choices[k], ", "),
            errors.suggest(tostring(x), choices[k]))
        end
      end
    end
    s[k] = k == "offload" and list[1] or list
  end
  if #s.tp == 0 then
    errors.raise("search: no tensor-parallel degree divides both %d heads and the %d-GPU pod", heads, pod)
  end
  return s
end

local CHUNK_STRIDE = 2 ^ 40 -- enumeration indices of chunk c start at c x 2^40

-- Below this much work (M.work) per process a search runs in one process: a worker costs 10-30 ms
-- to fork and gather on a loaded machine, and searches below ~200,000 (Llama 3.1 8B on 8 GPUs,
-- 3 ms; 70B on 24 A100, 70 ms; GPT-3 175B on 1,024 A100, 0.2 s, break-even) gain nothing from a
-- second process (bench/search_bench.lua; README "Strategy search").
M.MIN_WORK_PER_PROCESS = 200000

-- work(def) -> a cheap size of the space: the product of its lists' lengths (auto micro-batch
-- and virtual stages count once). Only decides how many processes are worth starting.
function M.work(def)
  local n = 1
  for _, v in pairs(def.space) do
    if type(v) == "table" then n = n * math.max(1, #v) end
  end
  return n
end

-- run(def, jobs [, progress]) -> merged {hits, stats}: the same result for any number of
-- processes. The core splits the strategy space by work (enumeration slot % jobs), so each of
-- the `jobs` processes (local workers forked by fathom.parallel, or MPI ranks) searches every
-- TP degree for its slots; the results merge by (objective, enumeration index). TP degrees go
-- one at a time so the first process can draw a progress bar on a terminal.
function M.run(def, jobs, progress)
  local parallel = require("fathom.parallel")
  local tps = def.space.tp
  local top = def.top or 100
  local procs = parallel.processes(jobs or 1, M.work(def), M.MIN_WORK_PER_PROCESS)
  local parts = parallel.shares(procs, function(worker, workers)
    local mine = {}
    -- the first process draws a line with rate and ETA (on a terminal, or when asked), cleared
    -- when done
    local enabled = progress
    if not (worker == 0 and parallel.is_root()) then enabled = false end
    local bar <close> = require("fathom.progress").new({ label = "searching", total = #tps, unit = "TP degrees",
      enabled = enabled })
    for c, tp in ipairs(tps) do
      local d = {}
      for k, v in pairs(def) do d[k] = v end
      d.space = {}
      for k, v in pairs(def.space) do d.space[k] = v end
      d.space.tp = { tp }
      d.worker, d.workers = worker, workers
      -- the N-th best this process holds from its earlier TP degrees: the bounds skip what is
      -- beyond it from the start (exact: those strategies cannot enter the best N either)
      local so_far = #mine > 0 and M.merge(mine, top).hits
      if so_far and #so_far >= top and (def.objective or "step_time") == "step_time" then
        d.prune_above = so_far[top].objective
      end
      local part = core.search(d)
      for _, h in ipairs(part.hits) do h.index = h.index + (c - 1) * CHUNK_STRIDE end
      if part.stats.smallest_shortfall then
        part.stats.smallest_shortfall.index = part.stats.smallest_shortfall.index + (c - 1) * CHUNK_STRIDE
      end
      mine[#mine + 1] = part
      bar:update(c)
    end
    return M.merge(mine, top) -- the top of each process's slots holds its part of the top overall
  end)
  return M.merge(parts, top)
end

local int_fields = { "tp", "cp", "pp", "pp_in", "dp", "tp_moe", "ep", "ep_su", "vs", "mb", "batch", "index",
  "trim_first", "trim_last", "first_stage_layers", "last_stage_layers" }

-- JSON brings integers back as floats: restore them so every worker's hits look alike.
local function integers(h)
  if not h then return end
  for _, k in ipairs(int_fields) do h[k] = math.tointeger(h[k]) or h[k] end
end

-- merge(parts, top) -> one result: hits ordered by (objective, enumeration index), stats summed.
function M.merge(parts, top)
  local hits, stats = {}, { no_fit_by_tier = {} }
  for _, p in ipairs(parts) do
    integers(p.stats.smallest_shortfall)
    for k, v in pairs(p.stats) do
      if type(v) == "number" then p.stats[k] = math.tointeger(v) or v end
    end
    for _, h in ipairs(p.hits) do
      integers(h)
      hits[#hits + 1] = h
    end
    for k, v in pairs(p.stats) do
      if type(v) == "number" and k ~= "shortfall_bytes" then stats[k] = (stats[k] or 0) + v end
    end
    for t, n in pairs(p.stats.no_fit_by_tier or {}) do stats.no_fit_by_tier[t] = (stats.no_fit_by_tier[t] or 0) + n end
    local s = p.stats.shortfall_bytes
    if s and (stats.shortfall_bytes == nil or s < stats.shortfall_bytes or
      (s == stats.shortfall_bytes and p.stats.smallest_shortfall.index < stats.smallest_shortfall.index)) then
      stats.shortfall_bytes = s
      stats.smallest_shortfall = p.stats.smallest_shortfall
    end
  end
  table.sort(hits, function(a, b)
    if a.objective ~= b.objective then return a.objective < b.objective end
    return a.index < b.index
  end)
  for i = #hits, top + 1, -1 do hits[i] = nil end
  return { hits = hits, stats = stats }
end

-- system(args) -> the search's system table from a hardware library and a node name.
function M.system(lib, node_name, gpus, pod_size, placed_ok)
  local node = lib.nodes[node_name]
  if not node then
    local names = {}
    for n in pairs(lib.nodes) do names[#names + 1] = n end
    table.sort(names)
    errors.raise("search: unknown node '%s'%s", tostring(node_name),
      errors.suggest(tostring(node_name), names) ~= "" and errors.suggest(tostring(node_name), names)
        or " (known: " .. table.concat(names, ", ") .. ")")
  end
  -- GPUs that are not a whole number of pods fill them in rank order (the last one partly):
  -- training strategies are then placed as they fall (fth_search.h, num_xpus).
  local placed = gpus % pod_size ~= 0
  if placed and not placed_ok then
    errors.raise("search: %d GPUs are not a whole number of %d-GPU pods (only a training search places "
      .. "a partly used pod)", gpus, pod_size)
  end
  local ic = node.device_interconnects
  local up = ic.scale_up or ic.passage or ic.electrical
  local out = ic.scale_out
  if not up then errors.raise("search: node '%s' names no scale_up interconnect", node_name) end
  return {
    node = spec.node_table(lib, node_name),
    scale_up = lib.interconnect[up],
    scale_out = out and lib.interconnect[out] or lib.interconnect[up],
    -- the scale-up fabric as the library joins it (NVSwitch: switched; Infinity Fabric: a full mesh)
    scale_up_type = TOPO[lib.interconnect[up].topology] or TOPO.switched,
    scale_out_type = TOPO.two_tier,
    pod_size = pod_size,
    num_pods = (gpus + pod_size - 1) // pod_size,
    gpus = gpus,
    placed = placed,
    node_name = node_name,
    up_name = up,
  }
end

-- offload_label(hit) -> which parts live off the accelerator: "w", "a", "o" (weights, saved
-- activations, optimizer states) joined by "+", with the tier when it is not host memory; "-" for none.
function M.offload_label(h)
  local parts, tier = {}, nil
  for _, p in ipairs({ { h.offload_weights, "w" }, { h.offload_activations, "a" }, { h.offload_optimizer, "o" } }) do
    if p[1] and p[1] ~= TIER.xpu_memory then
      parts[#parts + 1] = p[2]
      tier = p[1]
    end
  end
  if #parts == 0 then return "-" end
  local label = table.concat(parts, "+")
  return tier == TIER.host_memory and label or (label .. "@" .. tier:gsub("_memory", ""))
end

-- runner_up(hits) -> the best strategy that differs from the winner in its parallel
-- layout (not only in a setting that does not change the time), else the second.
function M.runner_up(hits)
  local a = hits[1]
  for i = 2, #hits do
    local b = hits[i]
    if b.tp ~= a.tp or b.pp ~= a.pp or b.vs ~= a.vs or b.dp ~= a.dp or b.ep ~= a.ep or b.cp ~= a.cp
      or b.schedule ~= a.schedule or b.mb ~= a.mb or b.batch ~= a.batch or b.trim_first ~= a.trim_first
      or b.trim_last ~= a.trim_last then
      return b
    end
  end
  return hits[2]
end

-- step_parts(hit) -> the step's seconds by where they go, as the hit reports them: the
-- pipeline bubble, each kind's exposed communication (DP with the compute its hidden traffic
-- displaces), and the rest (the kernels, the optimizer, any offload).
local PART_LABELS = {
  { "bubble", "the pipeline bubble" }, { "dp", "exposed DP traffic (with the compute it displaces)" },
  { "ep", "the exposed EP all-to-all" }, { "tp", "exposed TP collectives" }, { "pp", "exposed PP sends" },
  { "cp", "exposed CP exchanges" }, { "rest", "the kernels (compute, memory, optimizer)" },
}
function M.step_parts(h)
  local e = h.exposed_s or {}
  local p = {
    bubble = (h.bubble_fraction or 0) * h.step_time_s,
    dp = (e.dp or 0) + (e.dp_moe or 0) + (h.dp_interference_s or 0),
    ep = e.ep or 0, tp = (e.tp or 0) + (e.tp_moe or 0), pp = e.pp or 0, cp = e.cp or 0,
  }
  p.rest = h.step_time_s - (p.bubble + p.dp + p.ep + p.tp + p.pp + p.cp)
  return p
end

-- largest_gain(best, runner) -> the line naming the part of the step where the best gains the
-- most over the runner-up (a part may differ by more than the whole step when others go the
-- other way), or nil when the runner-up is no slower.
function M.largest_gain(a, b)
  if b.step_time_s <= a.step_time_s then return nil end
  local pa, pb = M.step_parts(a), M.step_parts(b)
  local best, label
  for _, l in ipairs(PART_LABELS) do
    local d = pb[l[1]] - pa[l[1]]
    if not best or d > best then best, label = d, l end
  end
  return string.format("the largest difference is %s: %s vs %s", label[2], units.time(pa[label[1]]),
    units.time(pb[label[1]]))
end

-- explain(best, runner) -> list of reasons that separate the two.
function M.explain(a, b, system)
  if not b then return { "the only strategy that fits" } end
  local out = {}
  local function pct(x) return string.format("%.1f%%", 100 * x) end
  -- two shares that print alike are told apart with more digits, or said to be equal
  local function pcts(x, y)
    if pct(x) ~= pct(y) then return pct(x), pct(y) end
    if x == y then return pct(x), "the same" end
    return string.format("%.4f%%", 100 * x), string.format("%.4f%%", 100 * y)
  end
  if a.pp ~= b.pp or a.vs ~= b.vs or a.schedule ~= b.schedule then
    local pa, pb = pcts(a.bubble_fraction, b.bubble_fraction)
    out[#out + 1] = string.format("PP=%d %s%s has a %s bubble vs %s for PP=%d %s%s", a.pp, a.schedule,
      a.vs > 1 and ("x" .. a.vs) or "", pa, pb, b.pp, b.schedule,
      b.vs > 1 and ("x" .. b.vs) or "")
  end
  if a.pp == b.pp and ((a.trim_first or 0) ~= (b.trim_first or 0) or (a.trim_last or 0) ~= (b.trim_last or 0)) then
    out[#out + 1] = string.format("pipeline split: %d layers on the first stage and %d on the last vs %d and %d",
      a.first_stage_layers or 0, a.last_stage_layers or 0, b.first_stage_layers or 0, b.last_stage_layers or 0)
  end
  if a.tp ~= b.tp then
    -- exposed TP as the table's exp.TP column counts it: attention's and the experts' TP
    out[#out + 1] = string.format("TP=%d (exposed TP %s) vs TP=%d (%s); both stay inside the %d-GPU %s pod", a.tp,
      units.time(a.exposed_s.tp + a.exposed_s.tp_moe), b.tp, units.time(b.exposed_s.tp + b.exposed_s.tp_moe),
      system.pod_size, system.up_name)
  end
  if a.ep ~= b.ep then
    out[#out + 1] = string.format("EP=%d (%d in the pod) exposes %s of all-to-all vs %s for EP=%d", a.ep, a.ep_su,
      units.time(a.exposed_s.ep), units.time(b.exposed_s.ep), b.ep)
  end
  if a.dp_variant ~= b.dp_variant or a.dp ~= b.dp then
    -- what the DP traffic costs the step: its exposed part and the compute its hidden part
    -- displaces (dp_interference_s)
    out[#out + 1] = string.format("DP=%d %s (exposed DP %s + %s displaced, %s per GPU) vs DP=%d %s (%s + %s, %s)",
      a.dp, a.dp_variant, units.time(a.exposed_s.dp + a.exposed_s.dp_moe), units.time(a.dp_interference_s or 0),
      units.bytes(a.peak_bytes), b.dp, b.dp_variant, units.time(b.exposed_s.dp + b.exposed_s.dp_moe),
      units.time(b.dp_interference_s or 0), units.bytes(b.peak_bytes))
  end
  if a.recompute ~= b.recompute then
    out[#out + 1] = string.format("recompute %s vs %s: %s vs %s per GPU", a.recompute, b.recompute,
      units.bytes(a.peak_bytes), units.bytes(b.peak_bytes))
  end
  if a.mb ~= b.mb then
    out[#out + 1] = string.format("micro-batch %d vs %d", a.mb, b.mb)
  end
  if a.sp ~= b.sp then out[#out + 1] = "sequence parallelism " .. (a.sp and "on" or "off") end
  if M.offload_label(a) ~= M.offload_label(b) then
    out[#out + 1] = string.format("offload %s vs %s: %s vs %s per GPU", M.offload_label(a), M.offload_label(b),
      units.bytes(a.peak_bytes), units.bytes(b.peak_bytes))
  end
  if a.cp ~= b.cp then out[#out + 1] = string.format("CP=%d vs CP=%d", a.cp, b.cp) end
  if a.batch and b.batch and a.batch ~= b.batch then
    -- rounded down: steps of different batches compare per sequence
    local ta, tb = a.step_time_s / a.batch, b.step_time_s / b.batch
    out[#out + 1] = string.format("batch %d vs %d: step %s vs %s, %s vs %s per sequence (%.1f%% faster)", a.batch,
      b.batch, units.time(a.step_time_s), units.time(b.step_time_s), units.time(ta), units.time(tb),
      100 * (tb / ta - 1))
    return out
  end
  local gap = M.largest_gain(a, b)
  if gap then out[#out + 1] = gap end
  local ta, tb = units.time(a.step_time_s), units.time(b.step_time_s)
  if ta == tb then -- alike at four digits: more of them, or say they are equal
    if a.step_time_s == b.step_time_s then
      out[#out + 1] = string.format("step %s, the same", ta)
      return out
    end
    ta, tb = string.format("%.7g s", a.step_time_s), string.format("%.7g s", b.step_time_s)
    out[#out + 1] = string.format("step %s vs %s (%.2g%% faster)", ta, tb, 100 * (b.step_time_s / a.step_time_s - 1))
    return out
  end
  out[#out + 1] = string.format("step %s vs %s (%.1f%% faster)", ta, tb, 100 * (b.step_time_s / a.step_time_s - 1))
  return out
end

-- prepare{model=, hardware=, node=, gpus=, pod_size=, global_batch=, seq=, objective=, top=, fix=,
--         workload=, batch_rounding=, memory_reserve_bytes=, prune=} -> def for core.search, plus the loaded model
--         and system. prune: "on" (default), "off" (exhaustive) or "audit" (exhaustive, counting bound violations).
-- batch_rounding: "exact" (default; the global batch must tile) or "down" (each strategy
-- runs the largest batch <= global_batch that tiles, and is ranked by its rate).
function M.prepare(a)
  local lib = spec.hardware_library(analysis.resolve(a.hardware or "hardware/hardware_library.yaml"))
  local model_path = a.model
  if type(model_path) == "string" and not model_path:find("/") and not model_path:match("%.ya?ml$")
    and not model_path:match("%.json$") then
    model_path = "models/" .. model_path .. ".yaml"
  end
  local model = spec.model(type(model_path) == "string" and analysis.resolve(model_path) or model_path)
  local system = M.system(lib, a.node, a.gpus, a.pod_size or 8, true)
  local wdoc = a.workload or {}
  if type(wdoc) == "string" then wdoc = analysis.resolve(wdoc) end
  local base = type(wdoc) == "table" and wdoc or nil
  local w = spec.train(base or wdoc)
  -- a precision named on the command line (estimate, search --precision): its width and recipe
  if a.precision then require("fathom.precision").apply(w, a.precision) end
  w.global_batch_size = a.global_batch or w.global_batch_size
  -- without --seq: the workload's length, but never past what the model was built for
  w.seq_length = a.seq or math.min(w.seq_length, model.max_sequence_length or w.seq_length)
  w.memory_reserve_bytes = a.memory_reserve_bytes or w.memory_reserve_bytes
  w.source_table = nil
  model.source_table = nil
  local def = {
    node = system.node, scale_up = system.scale_up, scale_out = system.scale_out,
    scale_up_type = system.scale_up_type, scale_out_type = system.scale_out_type,
    pod_size = system.pod_size, num_pods = system.num_pods,
    num_xpus = system.placed and system.gpus or nil,
    model = model, workload = w,
    space = M.space(model, system, w, a.fix),
    objective = a.objective == "headroom" and "headroom" or "step_time",
    batch_rounding = a.batch_rounding or "exact",
    top = a.top or 100,
    prune = a.prune or "on",
  }
  if def.batch_rounding ~= "exact" and def.batch_rounding ~= "down" then
    errors.raise("search: batch rounding '%s': expected exact or down", tostring(def.batch_rounding))
  end
  return def, model, system
end

-- Inference ---------------------------------------------------------------------------------
-- Serving strategies are few (TP, PP, EP, the batch), so they are enumerated here
-- and each is compiled and evaluated by the core's inference model.

local function infer_topology(system, tp, pp, ep, moe)
  local pod, pods = system.pod_size, system.num_pods
  local dims = { { topology_type = system.scale_up_type, size = pod, interconnect = system.scale_up } }
  if pods > 1 then
    dims[2] = { topology_type = system.scale_out_type, size = pods, interconnect = system.scale_out }
  end
  -- TP and as much PP as fits inside the pod, the rest of PP across pods; DP fills.
  local pp_in = 1
  while pp_in * 2 <= pp and pod % (tp * pp_in * 2) == 0 and pp % (pp_in * 2) == 0 do pp_in = pp_in * 2 end
  local pp_out = pp // pp_in
  if pod % (tp * pp_in) ~= 0 or pods % pp_out ~= 0 then return nil end
  local logical = {
    { logical_tag = TAG.TP_Attn, phys_dim = 1, size = tp },
    { logical_tag = TAG.DP_Attn, phys_dim = 1, size = pod // (tp * pp_in) },
  }
  if pp_in > 1 then logical[#logical + 1] = { logical_tag = TAG.PP, phys_dim = 1, size = pp_in } end
  if moe then
    local room = pod // pp_in
    local ep_su = 1
    for x = ep, 1, -1 do
      if ep % x == 0 and room % x == 0 then
        ep_su = x
        break
      end
    end
    local ep_so = ep // ep_su
    if pods % (pp_out * ep_so) ~= 0 then return nil end
    logical[#logical + 1] = { logical_tag = TAG.EP_SU, phys_dim = 1, size = ep_su }
    logical[#logical + 1] = { logical_tag = TAG.DP_MoE, phys_dim = 1, size = room // ep_su }
    if pods > 1 then
      if ep_so > 1 then logical[#logical + 1] = { logical_tag = TAG.EP_SO, phys_dim = 2, size = ep_so } end
      logical[#logical + 1] = { logical_tag = TAG.DP_MoE, phys_dim = 2, size = pods // (pp_out * ep_so) }
    end
  end
  if pods > 1 then
    if pp_out > 1 then logical[#logical + 1] = { logical_tag = TAG.PP, phys_dim = 2, size = pp_out } end
    logical[#logical + 1] = { logical_tag = TAG.DP_Attn, phys_dim = 2, size = pods // pp_out }
  end
  return { dimensions = dims, logical = logical }
end

-- infer_topology(system, tp, pp, ep, moe) -> the placement a serving strategy gets (nil when
-- it does not tile): `fathom estimate` places one strategy exactly as the search does.
M.infer_topology = infer_topology

-- run_inference{model=, system=, workload=, pass=, objective=, latency_bound=, fix=, top=}
-- -> {hits, stats}. Objectives: "tpot" / "ttft" (smallest), "throughput" (most tokens/s,
-- among strategies within latency_bound seconds per output or first token).
function M.run_inference(a)
  local model, system, base = a.model, a.system, a.workload
  local row = passes.of_pass(a.pass)
  if not row then errors.raise("search: unknown inference pass '%s'", tostring(a.pass)) end
  local moe = (model.num_regular_experts or 0) > 1
  local fix = a.fix or {}
  local function values(key, default)
    local v = fix[key]
    if v == nil then return default end
    return type(v) == "table" and v or { v }
  end
  local tps, pps, eps, bs = {}, {}, { 1 }, {}
  for _, t in ipairs(powers_of_two_dividing(system.pod_size, 64)) do
    if model.num_heads % t == 0 then tps[#tps + 1] = t end
  end
  for _, p in ipairs(divisors(model.n_layers, 64)) do
    if p <= 32 then pps[#pps + 1] = p end
  end
  if moe then eps = powers_of_two_dividing(model.num_regular_experts, 1024) end
  local b = 1
  while b <= (a.max_batch or 4096) do
    bs[#bs + 1] = b
    b = b * 2
  end
  tps, pps, eps, bs = values("tp", tps), values("pp", pps), values("ep", eps), values("batch", bs)
  local gpus = system.pod_size * system.num_pods
  local hits, stats = {}, { considered = 0, not_tiling = 0, invalid = 0, no_fit = 0, evaluated = 0,
    over_latency = 0, no_fit_by_tier = {} }
  local index = 0
  for _, tp in ipairs(tps) do for _, pp in ipairs(pps) do for _, ep in ipairs(eps) do for _, per_rank in ipairs(bs) do
    index = index + 1
    stats.considered = stats.considered + 1
    local topo = infer_topology(system, tp, pp, ep, moe)
    local dp = gpus // (tp * pp)
    if not topo then
      stats.not_tiling = stats.not_tiling + 1
    else
      local w = {}
      for k, v in pairs(base) do w[k] = v end
      w.micro_batch_size = math.max(1, per_rank // pp)
      w.global_batch_size = w.micro_batch_size * pp * dp
      local ok, plan = pcall(row.compile, system.node, topo, model, w)
      if not ok and not errors.is_core(plan) then error(plan, 0) end -- a bug, not a refusal
      if not ok then
        stats.invalid = stats.invalid + 1
      else
        local r = plan:evaluate()
        if not r.memory.fits then
          stats.no_fit = stats.no_fit + 1
          local t = r.memory.overflow_tier or TIER.xpu_memory
          stats.no_fit_by_tier[t] = (stats.no_fit_by_tier[t] or 0) + 1
        else
          stats.evaluated = stats.evaluated + 1
          local latency = r[row.latency]
          if a.latency_bound and latency > a.latency_bound then
            stats.over_latency = stats.over_latency + 1
          else
            local obj = a.objective == "throughput" and -r.tokens_per_s or latency
            hits[#hits + 1] = { tp = tp, pp = pp, ep = ep, dp = dp, batch = w.global_batch_size,
              micro_batch = w.micro_batch_size, tpot_s = r.tpot_s, ttft_s = r.ttft_s, latency_s = latency,
              tokens_per_s = r.tokens_per_s, tokens_per_s_per_gpu = r.tokens_per_s_per_gpu,
              peak_bytes = r.memory.peak_bytes, kv_cache_bytes = r.kv_cache_bytes_per_gpu,
              headroom_bytes = r.memory.tiers[TIER.xpu_memory].capacity_bytes - r.memory.tiers[TIER.xpu_memory].bytes,
              max_global_batch = r.max_global_batch, objective = obj, index = index }
          end
        end
      end
    end
  end end end end
  table.sort(hits, function(x, y)
    if x.objective ~= y.objective then return x.objective < y.objective end
    return x.index < y.index
  end)
  for i = #hits, (a.top or 10) + 1, -1 do hits[i] = nil end
  return { hits = hits, stats = stats }
end

return M
