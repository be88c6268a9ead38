-- fathom.analysis: load the five input files and a sweep, evaluate every
-- point, return records. Shared by `fathom analyze`, scenarios and scripts.
local config = require("fathom.config")
local errors = require("fathom.errors")
local report = require("fathom.report")
local scenario = require("fathom.scenario")
local spec = require("fathom.spec")
local sweep = require("fathom.sweep")

local M = {}

-- raw_of[record] = {result = raw core result, scenario = sc}, for formats (traces)
-- that need more than the record. Weak keys: it never keeps a record alive.
M.raw_of = setmetatable({}, { __mode = "k" })

local function exists(path)
  local f = io.open(path, "r")
  if f then f:close() end
  return f ~= nil
end

-- resolve(path) -> path as given if it exists, else under fathom's configs/
-- (so ScaleScope's relative paths work from anywhere), else as given.
function M.resolve(path)
  if path == nil or exists(path) or path:sub(1, 1) == "/" then return path end
  local paths = package.loaded["fathom.paths"]
  local data = paths and paths.data_dir
  if data then
    for _, cand in ipairs({ data .. "/configs/" .. path, data .. "/configs/" .. path .. ".yaml",
      data .. "/" .. path }) do
      if exists(cand) then return cand end
    end
  end
  if not path:match("%.ya?ml$") and exists(path .. ".yaml") then return path .. ".yaml" end
  return path
end

local function load(src, what)
  if type(src) == "table" then return src end
  return config.load_mapping(M.resolve(src), what)
end

-- Points of a sweep kept in memory at once by run() and the in-memory formats
-- (summary table, csv, svg); yaml and json output files are streamed instead.
M.MAX_IN_MEMORY = 100000

-- check(docs, pass_mode): the input checks of one point (the files, not the core).
local function check(docs, pass_mode)
  return pcall(function()
    scenario.new({ hardware_lib = spec.hardware_library(docs.hardware_lib), physical = docs.physical_topology,
      logical = docs.logical_topology, workload = docs.workload_spec, model = docs.model_spec,
      pass_mode = pass_mode })
  end)
end

-- open{...} -> docs, iterator, count: the five documents loaded and the sweep's
-- points as an iterator (fathom.sweep.iterate). Before the sweep runs, the base
-- inputs are checked once: an input error that is not at a value the sweep
-- replaces, and that the first point repeats word for word, does not depend on
-- the sweep; it is raised (exit 2, no output).
function M.open(a)
  local docs = {
    hardware_lib = type(a.hardware_lib) == "table" and a.hardware_lib -- an overlay too (fathom calibrate)
      or require("fathom.calibration").load_library(M.resolve(a.hardware_lib)),
    physical_topology = load(a.physical, "physical topology"),
    logical_topology = load(a.logical, "logical topology"),
    workload_spec = load(a.workload, "workload spec"),
    model_spec = load(a.model, "model spec"),
  }
  if a.memory_reserve_bytes then -- --memory-reserve wins over the file (a copy: the caller's table stays)
    local w = {}
    for k, v in pairs(docs.workload_spec) do w[k] = v end
    w.memory_reserve_bytes = a.memory_reserve_bytes
    docs.workload_spec = setmetatable(w, getmetatable(docs.workload_spec))
  end
  local sweep_doc = a.sweep and load(a.sweep, "sweep config") or nil
  if sweep_doc then
    local axes = sweep.axes(sweep_doc, docs)
    local swept = sweep.swept_positions(axes, docs)
    local ok, err = check(docs, a.pass_mode)
    if not ok then
      if not errors.is_input(err) then error(err, 0) end
      local where = tostring(err):match("^([^:]+:%d+:%d+)")
      if not (where and swept[where]) then
        local _, first = sweep.iterate(sweep_doc, docs)()
        local fok, ferr = check(first.docs, a.pass_mode)
        if not fok and tostring(ferr) == tostring(err) then error(err, 0) end
      end
    end
  end
  local it, count = sweep.iterate(sweep_doc, docs)
  return docs, it, count, sweep_doc
end

-- Points per round of a parallel sweep, per process: the round's records are held by the
-- parent until they are passed on in order, so memory stays bounded by this, not the sweep.
M.ROUND_PER_PROCESS = 512
-- Fewer points than this per process and a sweep runs in fewer processes (one for a small
-- sweep): a forked worker costs about a millisecond, a point about as much (README "Parallel").
M.MIN_POINTS_PER_PROCESS = 32

-- evaluator(a, docs) -> eval(pt, keep_raw) -> record (input errors raised),
-- point(pt, keep_raw) -> record (an input error turned into a record with its error):
-- one sweep point on the Lua path, as each() and the C batch path's checks make it.
function M.evaluator(a, docs)
  local base_lib
  local function eval(pt, keep_raw)
    local lib
    if pt.docs.hardware_lib == docs.hardware_lib then
      base_lib = base_lib or spec.hardware_library(pt.docs.hardware_lib)
      lib = base_lib
    end
    lib = lib or spec.hardware_library(pt.docs.hardware_lib)
    local sc = scenario.new({ hardware_lib = lib, physical = pt.docs.physical_topology,
      logical = pt.docs.logical_topology, workload = pt.docs.workload_spec,
      model = pt.docs.model_spec, pass_mode = a.pass_mode })
    local raw = sc:evaluate()
    errors.check_finite(raw, "result")
    local rec = report.record(sc, raw)
    if keep_raw then M.raw_of[rec] = { result = raw, scenario = sc } end
    return rec, sc, raw
  end
  local function point(pt, keep_raw)
    local ok, rec = pcall(eval, pt, keep_raw)
    if not ok then
      if not errors.is_input(rec) then error(rec, 0) end
      rec = { error = tostring(rec), valid = false, input_error = rec }
    end
    M.label(rec, pt.label)
    return rec
  end
  return eval, point
end

-- label(rec, label): the sweep point's label put first in a record.
function M.label(rec, label)
  rec.sweep_point = label
  local mt = getmetatable(rec)
  if mt and mt.__order and mt.__order[1] ~= "sweep_point" then table.insert(mt.__order, 1, "sweep_point") end
end

-- each(a, fn): evaluate every point in order, calling fn(record, i, count); memory
-- stays constant in the number of points. A single point with bad input raises; in
-- a sweep, a point whose inputs do not fit together is passed on as a record with
-- its error, and a sweep where no point is valid raises the first point's error.
-- a.jobs: local processes for a sweep (default fathom.parallel's: the core count);
-- under mpirun, the ranks share it. Records come back in order and byte for byte as
-- one process makes them (fathom.parallel.encode); raw_of is filled only with one process.
-- prep(record, i) (optional): what fn receives instead of the record, made where the point is
-- evaluated (a worker renders its own records, so the parent only writes them).
function M.each(a, fn, prep)
  local parallel = require("fathom.parallel")
  local docs, it, count = M.open(a)
  local valid, first_err = 0, nil
  local procs = count > 1 and parallel.processes(a.jobs, count, M.MIN_POINTS_PER_PROCESS) or 1
  -- a progress line on a terminal for long sweeps, cleared however the loop ends
  local quiet -- nil: a terminal decides; one point needs no line
  if count <= 1 then quiet = false end
  local bar <close> = require("fathom.progress").new({ label = "sweep", total = count, unit = "points",
    enabled = quiet })
  local eval, point = M.evaluator(a, docs)
  -- made(rec, i) -> {what fn gets, the error text of an invalid point or nil}
  local function made(rec, i)
    local err = rec.valid == false and rec.error or nil
    rec.input_error = nil -- an error object does not travel between processes; its text does
    return { prep and prep(rec, i) or rec, err }
  end
  local function pass_on(m, i, err_obj)
    if m[2] then
      first_err = first_err or err_obj or errors.new(m[2])
    else
      valid = valid + 1
    end
    fn(m[1], i, count)
    bar:update(i)
  end
  if count == 1 then
    local _, pt = it()
    local rec = eval(pt, true)
    fn(prep and prep(rec, 1) or rec, 1, 1)
  elseif procs == 1 then
    for i, pt in it do
      errors.check_interrupt() -- a signal caught under a point's pcall still stops the sweep
      local rec = point(pt, true)
      local err_obj = rec.input_error
      pass_on(made(rec, i), i, err_obj)
    end
  else
    local round, first = {}, 1
    local function flush()
      local base = first
      local out = parallel.map(round, function(pt, j)
        errors.check_interrupt()
        return made(point(pt), base + j - 1)
      end, { jobs = procs })
      for j, m in ipairs(out) do pass_on(m, first + j - 1) end
      first, round = first + #round, {}
    end
    for _, pt in it do
      round[#round + 1] = pt
      if #round >= procs * M.ROUND_PER_PROCESS then flush() end
    end
    if #round > 0 then flush() end
  end
  if count > 1 and valid == 0 then
    errors.raise("%s (no point of the %d-point sweep is valid; this is the first point's error)",
      tostring(first_err), count)
  end
end

-- run{hardware_lib, physical, logical, workload, model, sweep, pass_mode
--     [, memory_reserve_bytes]} -> records
-- (at most MAX_IN_MEMORY of them; stream larger sweeps with each()).
function M.run(a)
  local records = {}
  M.each(a, function(rec, i, count)
    if count > M.MAX_IN_MEMORY then
      errors.raise("the sweep has %d points; at most %d are kept in memory (write them with " ..
        "--output-file F --format yaml or json, which streams)", count, M.MAX_IN_MEMORY)
    end
    records[i] = rec
  end)
  return records
end

-- write_batch(a, path, format [, humanize]) -> points written to `path` as CSV, JSON Lines or
-- YAML (format "csv", "jsonl" or "yaml"; `humanize`: readable units in YAML) by the C batch
-- path (fathom.sweep_batch: the same bytes as fathom.format.csv of run()'s records, or as
-- stream()'s JSON Lines or YAML, in constant memory) and, with several processes, what they
-- cost (sweep_batch.write_parallel's stats); or nil, reason when the sweep takes the Lua path.
function M.write_batch(a, path, format, humanize)
  local batch_mod = require("fathom.sweep_batch")
  local docs, _, count, sweep_doc = M.open(a)
  local must = os.getenv(batch_mod.ENV) == "1" -- a spec or benchmark that needs the C path says so
  local function lua_path(why)
    if must then errors.raise("%s=1 but the sweep takes the Lua path: %s", batch_mod.ENV, why) end
    return nil, why
  end
  local batch, why = batch_mod.open(a, docs, sweep_doc)
  if not batch then return lua_path(why) end
  local bar <close> = require("fathom.progress").new({ label = "sweep", total = count, unit = "points" })
  local head
  if format == "jsonl" or format == "yaml" then
    head, why = batch_mod.prepare_nodes(batch, format, humanize)
  else
    head, why = batch_mod.prepare(batch, bar)
  end
  if not head then return lua_path(why) end
  -- --jobs: contiguous ranges of points in worker processes (one for a small sweep; under
  -- mpirun each rank runs the sweep and rank 0 writes it)
  local parallel = require("fathom.parallel")
  local procs = parallel.under_mpi() and 1 or parallel.processes(a.jobs, count, batch_mod.MIN_POINTS_PER_PROCESS)
  if procs > 1 then
    return count, batch_mod.write_parallel(batch, path, head, format, procs)
  end
  local w = require("fathom.output").open(path)
  local ok, err = pcall(function()
    w:write(head)
    batch_mod.write(batch, w, bar, format)
  end)
  if not ok then
    w:abort()
    error(err, 0)
  end
  w:close()
  return count
end

-- stream(a, path, format, transform) -> count, first record: every record written
-- to `path` as one YAML or JSON list, or as JSON Lines ("jsonl"), as it is made (the
-- file appears whole at the end, or not at all); transform(record) -> what to write.
function M.stream(a, path, format, transform)
  local yaml = require("fathom.format.yaml")
  local json = require("fathom.format.json")
  local w = require("fathom.output").open(path)
  local n, first = 0, nil
  -- each record is rendered where it is evaluated (a worker, with --jobs), then written in order
  local ok, err = pcall(M.each, a, function(m, i)
    if i == 1 then first = m.record end
    w:write(m.text)
    n = i
  end, function(rec, i)
    local v = transform and transform(rec) or rec
    local text
    if format == "jsonl" then
      text = require("fathom.format.jsonl").line(v)
    elseif format == "json" then
      text = json.encode({ v }, true)
      text = (i == 1 and "[\n" or ",\n") .. text:sub(3, -3)
    else
      text = yaml.encode({ v })
    end
    return { text = text, record = i == 1 and rec or nil }
  end)
  if not ok then
    w:abort() -- nothing left behind, whoever called
    error(err, 0)
  end
  if format == "json" then w:write(n == 0 and "[]\n" or "\n]\n") end -- jsonl: lines only
  w:close()
  return n, first
end

return M
