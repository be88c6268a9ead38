-- fathom: the Lua API for scenario scripts (require "fathom").
--
--   local fathom = require("fathom")
--   local sc = fathom.scenario{
--     hardware = "configs/hardware/hardware_library.yaml",
--     physical = "configs/topology_zoo/physical/dgx_a100_1024.yaml",
--     logical  = "configs/topology_zoo/logical/tp8_pp8.yaml",
--     model    = "configs/models/gpt3_175b.yaml",
--     workload = "configs/train_specs/gpt3_175b.yaml",
--   }
--   local r = sc:evaluate()             -- raw SI numbers from the C core
--   print(r.step_time_s, r.mfu, r.memory.fits)
--   local recs = fathom.analyze{ ..., sweep = "configs/sweep_configs/tp_sweep.yaml" }
local analysis = require("fathom.analysis")
local config = require("fathom.config")
local errors = require("fathom.errors")
local output = require("fathom.output")
local report = require("fathom.report")
local scenario = require("fathom.scenario")
local spec = require("fathom.spec")

local M = {}

M.core = require("fathom.core")
M.version = M.core.version
M.errors = errors
-- fathom.parallel.map(points, fn [, {jobs}]): per-point work over local processes or MPI ranks.
M.parallel = require("fathom.parallel")

-- load(path) -> table: any YAML or JSON input file, positions kept for errors; a relative
-- path is tried here, then under fathom's configs/ (as every command and scenario{} do).
function M.load(path) return config.load_file(type(path) == "string" and analysis.resolve(path) or path) end

-- load_hardware(path|table) -> checked hardware library.
function M.load_hardware(src) return spec.hardware_library(type(src) == "string" and analysis.resolve(src) or src) end
-- load_model(path|table) -> checked, normalised model spec.
function M.load_model(src) return spec.model(type(src) == "string" and analysis.resolve(src) or src) end
-- load_train(path|table) -> checked, normalised training workload.
function M.load_train(src) return spec.train(type(src) == "string" and analysis.resolve(src) or src) end

local function resolve_all(args)
  local function r(v) return type(v) == "string" and analysis.resolve(v) or v end
  return {
    hardware_lib = r(args.hardware or args.hardware_lib),
    physical = r(args.physical or args.physical_topology),
    logical = r(args.logical or args.logical_topology),
    model = r(args.model or args.model_spec),
    workload = r(args.workload or args.workload_spec),
    pass_mode = args.pass_mode,
    sweep = r(args.sweep),
  }
end

-- scenario{hardware=, physical=, logical=, model=, workload=, pass_mode=} -> scenario
-- with :evaluate() -> raw result, :compile() -> C plan, :record() -> report record.
-- Each input is a path (tried here, then under fathom's configs/) or a table.
function M.scenario(args)
  local sc = scenario.new(resolve_all(args))
  function sc.record(self, raw)
    return report.record(self, raw or self:evaluate())
  end
  return sc
end

-- analyze{... as scenario, sweep = path|table} -> list of report records, one per sweep point.
function M.analyze(args)
  return analysis.run(resolve_all(args))
end

-- trace{... as scenario, output_dir= | output_file=, format=, ranks=, classes=, prefix=} ->
-- what it wrote: the point's execution traces (fathom.trace.run, as `fathom trace`).
function M.trace(args)
  local a = resolve_all(args)
  for _, k in ipairs({ "format", "output_dir", "output_file", "prefix", "ranks", "classes" }) do a[k] = args[k] end
  return require("fathom.trace").run(a)
end

-- serve{model=, hardware=, tp=, rate_per_s=, input=, output=, ...} -> serving metrics
-- (fathom.serve: a request-level simulation; see README "Serving"); serve{hardware=,
-- pools={...}, clients={...}} several models on one cluster (fathom.serve_multi).
function M.serve(args) return require("fathom.serve").run(args) end

-- search: the strategy search (fathom.search): search.prepare{model=, node=, gpus=, pod_size=,
-- workload=, global_batch=, seq=, fix=, objective=, top=, batch_rounding=, memory_reserve_bytes=}
-- -> def, model, system; search.run(def [, workers]) -> {hits, stats}; search.explain(a, b, system);
-- search.run_inference{...} for prefill/decode. README "Lua API" lists the fields of hits.
M.search = require("fathom.search")

-- estimate{model=, hardware=, gpus=, tp=, pp=, ...} -> the record `fathom estimate --format
-- json` prints (inputs, strategy, time, memory; raw SI numbers). Keys are the command's flags
-- with '_' for '-' (micro_batch, pod_size, pass_mode), checked as the flags are (one parser).
function M.estimate(t)
  local args = require("fathom.args")
  local cmd = require("fathom.cmd.estimate")
  local keys, argv = {}, {}
  for k in pairs(t) do keys[#keys + 1] = tostring(k) end
  table.sort(keys)
  for _, k in ipairs(keys) do
    argv[#argv + 1] = "--" .. k:gsub("_", "-")
    argv[#argv + 1] = tostring(t[k])
  end
  local rec = cmd.estimate((args.parse(argv, cmd.spec, "estimate")))
  rec.model_name, rec.node = nil, nil
  return rec
end

-- humanize(record) -> the record with readable times, bytes and FLOPs.
M.humanize = report.humanize

-- render(value, format) -> text in "yaml", "json" or "csv".
M.render = output.render

-- write(value, format, path): render then write whole (or print when path is nil).
M.write = output.write

return M
