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

-- run{hardware_lib, physical, logical, workload, model, sweep, pass_mode} -> records.
-- Each input is a path or a loaded document. A single point with bad input
-- raises; in a sweep, a point whose inputs do not fit together is recorded
-- with its error instead.
function M.run(a)
  local docs = {
    hardware_lib = load(a.hardware_lib, "hardware library"),
    physical_topology = load(a.physical, "physical topology"),
    logical_topology = load(a.logical, "logical topology"),
    workload_spec = load(a.workload, "workload spec"),
    model_spec = load(a.model, "model spec"),
  }
  local sweep_doc = a.sweep and load(a.sweep, "sweep config") or nil
  local points = sweep.points(sweep_doc, docs)
  local lib_cache = {}
  local records = {}
  for i, pt in ipairs(points) do
    local lib = lib_cache[pt.docs.hardware_lib]
    if not lib then
      lib = spec.hardware_library(pt.docs.hardware_lib)
      lib_cache[pt.docs.hardware_lib] = lib
    end
    local function eval()
      local sc = scenario.new({ hardware_lib = lib, physical = pt.docs.physical_topology,
        logical = pt.docs.logical_topology, workload = pt.docs.workload_spec,
        model = pt.docs.model_spec, pass_mode = a.pass_mode })
      local raw = sc:evaluate()
      errors.check_finite(raw, "result")
      local rec = report.record(sc, raw)
      M.raw_of[rec] = { result = raw, scenario = sc }
      return rec
    end
    if #points == 1 then
      records[1] = eval()
    else
      local ok, rec = pcall(eval)
      if not ok then
        if not errors.is_input(rec) then error(rec, 0) end
        rec = { error = tostring(rec), valid = false }
      end
      rec.sweep_point = pt.label
      local mt = getmetatable(rec)
      if mt and mt.__order then table.insert(mt.__order, 1, "sweep_point") end
      records[i] = rec
    end
  end
  return records
end

return M
