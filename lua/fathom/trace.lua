-- fathom.trace: execution traces of one training step, from the inputs `analyze`
-- takes. Chakra (what ASTRA-sim replays): one file per rank, DIR/<prefix>.<rank>.et,
-- and the communicator groups in ASTRA-sim's comm-group JSON (DIR/<prefix>.comm_groups.json,
-- its --comm-group-configuration); or, in class form, one file per distinct rank class
-- (a pipeline stage: every rank of a stage runs the same nodes, only its peers and
-- group ids differ) plus DIR/<prefix>.classes.json mapping every rank to its class.
-- Inference (--pass-mode inference_prefill / inference_decode): one iteration, every
-- micro-batch's forward through the pipeline. Perfetto: the timeline of fathom.format.trace.
-- Every set of files appears whole or not at all (temporary files beside their targets,
-- renamed at the end).
local analysis = require("fathom.analysis")
local core = require("fathom.core")
local errors = require("fathom.errors")
local names = require("fathom.names")
local output = require("fathom.output")

local M = {}

M.DEFAULT_PREFIX = "fathom"
-- Kinds of communication as the core names them, in its order (group ids follow it).
M.KINDS = names.comm_kind

-- compile(a) -> trace, raw: the core trace of one point: a training step, or one prefill or
-- decode iteration. `a` holds the arguments of fathom.analysis.run (the five files, pass_mode);
-- a sweep is refused.
function M.compile(a)
  if a.sweep then errors.raise("trace: --sweep-config is not taken (a trace is of one point)") end
  local records = analysis.run(a)
  local raw = analysis.raw_of[records[1]]
  local plan = raw.scenario:compile()
  local ok, tr = pcall(core.trace_compile, plan)
  if not ok then raw.scenario:raise_core(tr) end
  return tr, raw
end

-- parse_ranks(text, n) -> sorted list of distinct 0-based ranks from "0,4-7,12";
-- an input error names the bad part (a rank outside 0..n-1 included).
function M.parse_ranks(text, n)
  local seen, out = {}, {}
  for part in tostring(text):gmatch("[^,]+") do
    local a, b = part:match("^%s*(%d+)%s*%-%s*(%d+)%s*$")
    if not a then
      a = part:match("^%s*(%d+)%s*$")
      b = a
    end
    if not a then errors.raise("--ranks: expected ranks such as 0,4-7, got '%s'", part) end
    a, b = math.tointeger(tonumber(a)), math.tointeger(tonumber(b))
    if b < a then errors.raise("--ranks: empty range '%s'", part) end
    if b > n - 1 then
      errors.raise("--ranks: rank %d is outside the job (ranks 0 to %d)", b, n - 1)
    end
    for r = a, b do
      if not seen[r] then
        seen[r] = true
        out[#out + 1] = r
      end
    end
  end
  if #out == 0 then errors.raise("--ranks: expected at least one rank") end
  table.sort(out)
  return out
end

local function is_dir(path)
  local f = io.open(path .. "/.", "rb")
  if f then f:close() end
  return f ~= nil
end

local function shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- A directory that exists or is made (its parent must exist): true when made here.
local function ensure_dir(dir)
  if is_dir(dir) then return false end
  if io.open(dir, "rb") then errors.raise("cannot write traces to '%s': it is a file, not a directory", dir) end
  local ok = os.execute("mkdir " .. shell_quote(dir) .. " 2>/dev/null")
  if not ok or not is_dir(dir) then
    errors.raise("cannot write traces to '%s': the directory cannot be created (does its parent exist and " ..
      "is it writable?)", dir)
  end
  return true
end

-- The comm-group file: {"<id>": [ranks...]} for every group of more than one rank,
-- as ASTRA-sim's Workload::initialize_comm_groups reads it.
local function write_groups(w, tr, n)
  w:write("{")
  local first = true
  for k, kind in ipairs(M.KINDS) do
    local base = 1 + (k - 1) * n -- id = 1 + kind x ranks + the group's lowest rank
    for r = 0, n - 1 do
      local id = tr:group_id(kind, r)
      if id == base + r then
        local _, members = tr:group(kind, r)
        w:write(string.format('%s\n"%d": [%s]', first and "" or ",", id, table.concat(members, ",")))
        first = false
      end
    end
  end
  w:write("\n}\n")
end

-- The classes: one per pipeline stage, represented by its lowest rank.
local function classes(tr, n)
  local info = tr:info()
  local rep, map = {}, {}
  for s = 0, info.stages - 1 do rep[s + 1] = tr:stage_peer(0, s) end
  for r = 0, n - 1 do map[r + 1] = tr:stage(r) end
  return rep, map
end

-- ASTRA-sim's analytical network shapes for fathom's topology types, and the share of a GPU's
-- bandwidth one of its links carries there: a ring splits it between two neighbours, a mesh
-- among its size - 1 peers (as fathom's collectives do, fth_topology.h); a switch gives it whole.
local TOPO = names.key("topology_type")
local ASTRA_SHAPE = { [TOPO.switched] = "Switch", [TOPO.full_flat] = "Switch", [TOPO.two_tier] = "Switch",
  [TOPO.ring] = "Ring", [TOPO.torus] = "Ring", [TOPO.mesh] = "FullyConnected" }
-- ASTRA-sim's name of its ring collectives (Sys.cc), its own spelling, not fathom's enum
local ASTRA_RING_IMPL = string.lower("Ring")

-- astra_network(tr) -> the text of ASTRA-sim's analytical network file (congestion-unaware) for
-- the trace's physical topology: one entry per dimension of more than one GPU, innermost first
-- (fathom's rank order, which is ASTRA-sim's), bandwidth in GB/s of 2^30 bytes as ASTRA-sim
-- reads it (NetworkFunction.cpp bw_GBps_to_Bpns), latency in ns.
function M.astra_network(tr)
  local shape, npus, bw, lat = {}, {}, {}, {}
  local dims = tr:network()
  for _, d in ipairs(dims) do
    if d.size > 1 or (#dims == 1) then
      local kind = ASTRA_SHAPE[d.type] or "Switch"
      local share = kind == "Ring" and 0.5 or (kind == "FullyConnected" and 1 / (d.size - 1) or 1)
      shape[#shape + 1] = kind
      npus[#npus + 1] = string.format("%d", d.size)
      bw[#bw + 1] = string.format("%.4f", d.bandwidth_bytes_per_s * share / 2 ^ 30)
      lat[#lat + 1] = string.format("%.1f", d.latency_s * 1e9)
    end
  end
  return "# ASTRA-sim analytical network, written by fathom trace from the physical topology\n" ..
    "topology: [ " .. table.concat(shape, ", ") .. " ]\n" ..
    "npus_count: [ " .. table.concat(npus, ", ") .. " ]\n" ..
    "bandwidth: [ " .. table.concat(bw, ", ") .. " ]  # GB/s (2^30 bytes), per link\n" ..
    "latency: [ " .. table.concat(lat, ", ") .. " ]  # ns\n"
end

-- astra_system(tr) -> ASTRA-sim's system file: ring collectives on every dimension and the
-- roofline off, so compute nodes take fathom's durations (duration_micros) as written.
function M.astra_system(tr)
  local n = 0
  for _, d in ipairs(tr:network()) do n = n + ((d.size > 1) and 1 or 0) end
  local impl = {}
  for i = 1, math.max(n, 1) do impl[i] = '"' .. ASTRA_RING_IMPL .. '"' end
  local list = "[" .. table.concat(impl, ", ") .. "]"
  return "{\n" ..
    '  "scheduling-policy": "LIFO",\n  "endpoint-delay": 10,\n  "active-chunks-per-dimension": 1,\n' ..
    '  "preferred-dataset-splits": 1,\n' ..
    '  "all-reduce-implementation": ' .. list .. ',\n  "all-gather-implementation": ' .. list .. ',\n' ..
    '  "reduce-scatter-implementation": ' .. list .. ',\n  "all-to-all-implementation": ' .. list .. ',\n' ..
    '  "collective-optimization": "localBWAware",\n  "boost-mode": 0,\n  "roofline-enabled": 0\n}\n'
end

-- write_chakra(tr, dir, opts) -> summary {files, ranks, bytes, nodes, stats = {[rank] = stats}}.
-- opts: prefix, ranks (list of 0-based ranks, default all), classes (bool), keep_stats (bool),
-- astra_configs (bool: also DIR/<prefix>.network.yml, .system.json and .remote_memory.json,
-- the configuration files ASTRA-sim's analytical backend replays the traces with).
function M.write_chakra(tr, dir, opts)
  opts = opts or {}
  local prefix = opts.prefix or M.DEFAULT_PREFIX
  if prefix == "" or prefix:find("/") then errors.raise("--prefix: expected a file name prefix, got '%s'", prefix) end
  local n = tr:info().ranks
  local ranks = opts.ranks
  local rep, map
  if opts.classes then
    rep, map = classes(tr, n)
    ranks = rep
  end
  if not ranks then
    ranks = {}
    for r = 0, n - 1 do ranks[r + 1] = r end
  end
  local made = ensure_dir(dir)
  local pending = {} -- {tmp, final}
  local summary = { files = 0, ranks = #ranks, bytes = 0, nodes = 0, stats = opts.keep_stats and {} or nil }
  local ok, err = pcall(function()
    for _, r in ipairs(ranks) do
      errors.check_interrupt()
      local final = string.format("%s/%s.%d.et", dir, prefix, r)
      local tmp = output.temp_path(final)
      pending[#pending + 1] = { tmp, final }
      local st, werr = tr:write_rank(r, tmp)
      if not st then errors.raise("cannot write '%s': %s", final, tostring(werr)) end
      summary.bytes = summary.bytes + st.bytes
      summary.nodes = summary.nodes + st.nodes
      if summary.stats then summary.stats[r] = st end
    end
    local function text_file(name, fn)
      local final = string.format("%s/%s.%s", dir, prefix, name)
      local tmp = output.temp_path(final)
      pending[#pending + 1] = { tmp, final }
      local f, ferr = io.open(tmp, "wb")
      if not f then errors.raise("cannot write '%s': %s", final, tostring(ferr)) end
      local w = {}
      function w.write(_, s)
        local wok, werr = f:write(s)
        if not wok then errors.raise("cannot write '%s': %s", final, tostring(werr)) end
      end
      local fok, ferr2 = pcall(fn, w)
      local cok, cerr = f:close()
      if not fok then error(ferr2, 0) end
      if not cok then errors.raise("cannot write '%s': %s", final, tostring(cerr)) end
    end
    text_file("comm_groups.json", function(w) write_groups(w, tr, n) end)
    if opts.astra_configs then
      text_file("network.yml", function(w) w:write(M.astra_network(tr)) end)
      text_file("system.json", function(w) w:write(M.astra_system(tr)) end)
      text_file("remote_memory.json", function(w) w:write('{\n  "memory-type": "NO_MEMORY_EXPANSION"\n}\n') end)
    end
    if map then
      text_file("classes.json", function(w)
        local cls = {}
        for c, r in ipairs(rep) do
          cls[c] = string.format('{"class": %d, "stage": %d, "rank": %d, "file": "%s.%d.et"}', c - 1, c - 1, r,
            prefix, r)
        end
        w:write('{"classes": [\n' .. table.concat(cls, ",\n") .. '],\n"rank_class": [')
        w:write(table.concat(map, ","))
        w:write("]}\n")
      end)
    end
  end)
  if not ok then
    for _, p in ipairs(pending) do output.discard(p[1]) end
    if made then os.remove(dir) end
    error(err, 0)
  end
  for _, p in ipairs(pending) do output.commit(p[1], p[2]) end
  summary.files = #pending
  return summary
end

-- run{hardware, physical, logical, workload, model, pass_mode, format = "chakra"|"perfetto",
--     output_dir | output_file, prefix, ranks = {...} | "0,4-7", classes, astra_configs} -> summary:
-- what `fathom trace` does, for scripts (fathom.trace{...}). Input paths as fathom.analysis takes.
function M.run(a)
  local tr, raw = M.compile({ hardware_lib = a.hardware_lib or a.hardware, physical = a.physical,
    logical = a.logical, workload = a.workload, model = a.model, pass_mode = a.pass_mode,
    memory_reserve_bytes = a.memory_reserve_bytes })
  if (a.format or "chakra") == "perfetto" then
    if not a.output_file then errors.raise("trace: format perfetto needs output_file") end
    M.write_perfetto(tr, raw, a.output_file)
    return { files = 1, path = a.output_file }
  end
  if a.format and a.format ~= "chakra" then
    errors.raise("trace: format: expected chakra or perfetto, got '%s'", tostring(a.format))
  end
  if not a.output_dir then errors.raise("trace: format chakra needs output_dir") end
  local ranks = a.ranks
  if type(ranks) == "string" then ranks = M.parse_ranks(ranks, tr:info().ranks) end
  return M.write_chakra(tr, a.output_dir, { prefix = a.prefix, ranks = ranks, classes = a.classes,
    astra_configs = a.astra_configs })
end

-- write_perfetto(tr, raw, path): the Chrome / Perfetto timeline of the step, every pipeline
-- stage on its own tracks (fathom.format.trace.encode_pipeline).
function M.write_perfetto(tr, raw, path)
  output.write_file(path, require("fathom.format.trace").encode_pipeline(tr, raw.result))
end

return M
