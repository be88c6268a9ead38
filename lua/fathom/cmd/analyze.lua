-- fathom analyze: ScaleScope's command line (same flags, same files), one
-- record per sweep point.
local args = require("fathom.args")
local analysis = require("fathom.analysis")
local errors = require("fathom.errors")
local output = require("fathom.output")
local passes = require("fathom.passes")
local report = require("fathom.report")
local tablefmt = require("fathom.format.table")

local M = {}

-- The inputs of one scenario (ScaleScope's five files and pass mode), shared
-- with the commands that take the same inputs (fathom trace).
M.input_spec = {
  { name = "hardware-lib", arg = "FILE", required = true, help = "hardware library YAML" },
  { name = "physical-topology", arg = "FILE", required = true, help = "physical topology YAML" },
  { name = "logical-topology", arg = "FILE", required = true, help = "logical topology YAML" },
  { name = "workload-spec", arg = "FILE", required = true, help = "training / prefill / decode spec YAML" },
  { name = "model-spec", arg = "FILE", required = true, help = "model spec YAML" },
  { name = "pass-mode", arg = "MODE", choices = passes.names,
    default = passes.names[1], help = "what to model" },
}

-- inputs_of(opts) -> the arguments of fathom.analysis (run, each, open) for parsed options.
function M.inputs_of(opts)
  return {
    hardware_lib = opts.hardware_lib, physical = opts.physical_topology,
    logical = opts.logical_topology, workload = opts.workload_spec, model = opts.model_spec,
    sweep = opts.sweep_config, pass_mode = opts.pass_mode, memory_reserve_bytes = opts.memory_reserve,
  }
end

local spec = {}
for _, o in ipairs(M.input_spec) do spec[#spec + 1] = o end
table.insert(spec, 6, { name = "sweep-config", arg = "FILE", help = "sweep config YAML (omit for one point)" })
for _, o in ipairs({
  { name = "memory-reserve", arg = "SIZE", bytes = true,
    help = "per-GPU runtime reserve (CUDA/ROCm context, library workspaces), e.g. 2GiB or 0; "
      .. "replaces the workload's memory_reserve_bytes [default: 1GiB]" },
  { name = "jobs", arg = "N", integer = { 1, args.max_workers() },
    help = "processes that share a sweep (same output as one) [default: the core count; under mpirun: the ranks]" },
  { name = "trace-file", arg = "FILE", help = "Chrome/Perfetto trace of the first point's step (training)" },
  { name = "help", flag = true, help = "this help" },
}) do spec[#spec + 1] = o end
spec = args.with_output(spec, { svg = true, jsonl = true, default = false,
  help = "table (the summary), yaml (readable units unless --raw-output), json, jsonl (JSON Lines: one "
    .. "record per line), csv (raw SI numbers) or svg "
    .. "(the sweep's step times as stacked bars); to --output-file [default: yaml] or, without it, to stdout "
    .. "[default: table]" })
M.spec = spec -- the option table (completion and the man page read it)

M.usage = "usage: fathom analyze --hardware-lib F --physical-topology F --logical-topology F \\\n" ..
  "                      --workload-spec F --model-spec F [--sweep-config F] \\\n" ..
  "                      [--pass-mode " .. table.concat(passes.names, "|") .. "] \\\n" ..
  "                      [--output-file F] [--raw-output] [--format table|yaml|json|jsonl|csv|svg] \\\n" ..
  "                      [--memory-reserve SIZE] [--trace-file F] [--jobs N]\n\n" ..
  "Predicts step time, where it goes and memory per XPU for every point of the\n" ..
  "sweep. Without --output-file, prints a summary table; with it, writes one\n" ..
  "record per point (configuration, model_configuration, expert_placement, time,\n" ..
  "compute/memory traffic/communication per batch per XPU, ratios, memory_footprint).\n" ..
  "Relative paths are tried in the current directory, then in fathom's configs/.\n\n" ..
  "examples:\n" ..
  "  fathom analyze --hardware-lib hardware/hardware_library.yaml \\\n" ..
  "      --physical-topology topology_zoo/physical/dgx_a100_1024.yaml \\\n" ..
  "      --logical-topology topology_zoo/logical/tp8_pp8.yaml --model-spec models/gpt3_175b.yaml \\\n" ..
  "      --workload-spec train_specs/gpt3_175b.yaml --sweep-config sweep_configs/tp_sweep.yaml\n" ..
  "  (the same) --format csv --output-file sweep.csv\n\n" ..
  args.usage(spec) .. "\n"

local function point_label(r)
  local label = {}
  for k, v in pairs(r.sweep_point or {}) do
    label[#label + 1] = (k:match("[^%.]+%.[^%.]+$") or k) .. "=" .. tostring(v)
  end
  table.sort(label)
  return table.concat(label, " ")
end

-- summary(records, row) -> the table: the layout of each point, then its pass mode's columns.
local function summary(records, row)
  local headers = { "#", "point", "TP", "PP", "DP", "EP" }
  for _, h in ipairs(row.summary.headers) do headers[#headers + 1] = h end
  local rows = {}
  for i, r in ipairs(records) do
    local cells
    if r.error then
      cells = { i, point_label(r) }
      for _ = 3, #headers - 1 do cells[#cells + 1] = "" end
      cells[#cells + 1] = "invalid: " .. r.error
    else
      local c = r.configuration
      cells = { i, point_label(r), c.tp_attn, c.pp, c.dp_attn, c.ep }
      for _, v in ipairs(row.summary.row(r)) do cells[#cells + 1] = v end
    end
    rows[i] = cells
  end
  return tablefmt.render(headers, rows)
end

function M.main(argv)
  for _, a in ipairs(argv) do
    if a == "--help" or a == "-h" then
      io.stdout:write(M.usage)
      return 0
    end
  end
  local opts, extra = args.parse(argv, spec, "analyze")
  if #extra > 0 then errors.raise("analyze: unexpected argument '%s' (see 'fathom analyze --help')", extra[1]) end
  local a = M.inputs_of(opts)
  -- the trace needs the first point's raw result, kept by one process
  a.jobs = opts.trace_file and 1 or opts.jobs
  local records, streamed
  if opts.output_file and not opts.format then opts.format = "yaml" end
  if opts.output_file and (opts.format == "csv" or opts.format == "jsonl" or opts.format == "yaml")
    and not opts.trace_file then
    -- a training sweep over keys the core reworks runs in C (fathom.sweep_batch), streamed
    local n = analysis.write_batch(a, opts.output_file, opts.format, not opts.raw_output)
    streamed = n
  end
  if streamed then -- nothing more to evaluate
    records = {}
  elseif opts.output_file and (opts.format == "yaml" or opts.format == "json" or opts.format == "jsonl") then
    -- constant memory
    -- readable units in YAML only: JSON and CSV carry raw SI numbers (units in the key names)
    local n, first = analysis.stream(a, opts.output_file, opts.format,
      (opts.format == "yaml" and not opts.raw_output) and report.humanize or nil)
    records, streamed = { first }, n
  else
    records = analysis.run(a)
  end
  if opts.trace_file then
    local raw = analysis.raw_of[records[1]]
    if not raw or not passes.get(opts.pass_mode).trace then
      errors.raise("analyze: --trace-file needs a valid training point")
    end
    local trace = require("fathom.format.trace")
    trace.check_size(math.tointeger(raw.result.microbatches) or math.floor(raw.result.microbatches))
    local ok, tr = pcall(require("fathom.core").trace_compile, raw.scenario:compile())
    if not ok then raw.scenario:raise_core(tr) end
    output.write_file(opts.trace_file, trace.encode(raw.result, trace.stage_order(tr, 0), tr:info().chunks))
  end
  if streamed then
    io.stderr:write(string.format("fathom: wrote %d record%s to %s\n", streamed, streamed == 1 and "" or "s",
      opts.output_file))
  elseif opts.output_file and opts.format == "table" then
    output.write_file(opts.output_file, summary(records, passes.get(opts.pass_mode)))
    io.stderr:write(string.format("fathom: wrote the summary of %d record%s to %s\n", #records,
      #records == 1 and "" or "s", opts.output_file))
  elseif opts.output_file or (opts.format and opts.format ~= "table") then
    local out = records
    if opts.format == "yaml" and not opts.raw_output then
      out = {}
      for i, r in ipairs(records) do out[i] = report.humanize(r) end
    end
    if opts.output_file then
      output.write(out, opts.format, opts.output_file)
      io.stderr:write(string.format("fathom: wrote %d record%s to %s\n", #records,
        #records == 1 and "" or "s", opts.output_file))
    else -- the asked format on stdout, so a pipe gets what it asked for
      io.stdout:write(output.render(out, opts.format))
    end
  else
    io.stdout:write(summary(records, passes.get(opts.pass_mode)))
  end
  return 0
end

return M
