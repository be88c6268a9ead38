-- fathom analyze: ScaleScope's command line (same flags, same files), one
-- record per sweep point.
local args = require("fathom.args")
local analysis = require("fathom.analysis")
local errors = require("fathom.errors")
local output = require("fathom.output")
local report = require("fathom.report")
local tablefmt = require("fathom.format.table")
local units = require("fathom.units")

local M = {}

local spec = {
  { name = "hardware-lib", arg = "FILE", required = true, help = "hardware library YAML" },
  { name = "physical-topology", arg = "FILE", required = true, help = "physical topology YAML" },
  { name = "logical-topology", arg = "FILE", required = true, help = "logical topology YAML" },
  { name = "workload-spec", arg = "FILE", required = true, help = "training / prefill / decode spec YAML" },
  { name = "model-spec", arg = "FILE", required = true, help = "model spec YAML" },
  { name = "sweep-config", arg = "FILE", help = "sweep config YAML (omit for one point)" },
  { name = "pass-mode", arg = "MODE", choices = { "training", "inference_prefill", "inference_decode" },
    default = "training", help = "what to model" },
  { name = "output-file", arg = "FILE", help = "write every record here (whole or not at all)" },
  { name = "raw-output", flag = true, help = "plain numbers (seconds, bytes, FLOPs) instead of readable units" },
  { name = "format", arg = "FMT", choices = { "yaml", "json", "csv", "svg" }, default = "yaml",
    help = "output file format (svg: the sweep's step times as stacked bars)" },
  { name = "trace-file", arg = "FILE", help = "Chrome/Perfetto trace of the first point's step (training)" },
  { name = "help", flag = true, help = "this help" },
}

M.usage = "usage: fathom analyze --hardware-lib F --physical-topology F --logical-topology F \\\n" ..
  "                      --workload-spec F --model-spec F [--sweep-config F] \\\n" ..
  "                      [--pass-mode training|inference_prefill|inference_decode] \\\n" ..
  "                      [--output-file F] [--raw-output] [--format yaml|json|csv|svg] \\\n" ..
  "                      [--trace-file F]\n\n" ..
  "Predicts step time, where it goes and memory per XPU for every point of the\n" ..
  "sweep. Without --output-file, prints a summary table; with it, writes one\n" ..
  "record per point (configuration, model_configuration, expert_placement, time,\n" ..
  "compute/memory traffic/communication per batch per XPU, ratios, memory_footprint).\n" ..
  "Relative paths are tried in the current directory, then in fathom's configs/.\n\n" ..
  args.usage(spec) .. "\n"

local function point_label(r)
  local label = {}
  for k, v in pairs(r.sweep_point or {}) do
    label[#label + 1] = (k:match("[^%.]+%.[^%.]+$") or k) .. "=" .. tostring(v)
  end
  table.sort(label)
  return table.concat(label, " ")
end

local function fits_text(m)
  return m.fits and "yes" or ("NO: " .. tostring(m.overflow_tier))
end

local function summary(records, pass_mode)
  local inference = pass_mode ~= "training"
  local headers = inference
    and { "#", "point", "TP", "PP", "DP", "EP", pass_mode == "inference_decode" and "TPOT" or "TTFT", "total",
      "tokens/s", "tok/s/XPU", "mem/XPU", "max batch", "fits" }
    or { "#", "point", "TP", "PP", "DP", "EP", "step", "total", "MFU", "exp.comm", "bubble", "mem/XPU", "fits" }
  local rows = {}
  for i, r in ipairs(records) do
    if r.error then
      rows[i] = { i, point_label(r), "", "", "", "", "", "", "", "", "", "", "invalid: " .. r.error }
    elseif inference then
      local c, t, m = r.configuration, r.time, r.memory_footprint
      local latency = t.time_per_output_token_seconds or t.time_to_first_token_seconds
      rows[i] = { i, point_label(r), c.tp_attn, c.pp, c.dp_attn, c.ep, units.time(latency),
        units.time(t.total_time_seconds), string.format("%.0f", t.tokens_per_second),
        string.format("%.0f", t.tokens_per_second_per_xpu), units.bytes(m.total_peak_memory_per_chip_bytes),
        m.max_global_batch_size, fits_text(m) }
    else
      local c, t, m = r.configuration, r.time, r.memory_footprint
      local exposed = 0
      for k, v in pairs(t.step_breakdown) do
        if k:match("^exposed_") then exposed = exposed + v end
      end
      rows[i] = { i, point_label(r), c.tp_attn, c.pp, c.dp_attn, c.ep,
        units.time(t.step_time_seconds), units.time(t.total_time_seconds), units.percent(t.mfu),
        units.time(exposed), units.time(t.step_breakdown.bubble_seconds),
        units.bytes(m.total_peak_memory_per_chip_bytes), fits_text(m) }
    end
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
  local a = {
    hardware_lib = opts.hardware_lib, physical = opts.physical_topology,
    logical = opts.logical_topology, workload = opts.workload_spec, model = opts.model_spec,
    sweep = opts.sweep_config, pass_mode = opts.pass_mode,
  }
  local records, streamed
  if opts.output_file and (opts.format == "yaml" or opts.format == "json") then -- constant memory
    local n, first = analysis.stream(a, opts.output_file, opts.format, not opts.raw_output and report.humanize or nil)
    records, streamed = { first }, n
  else
    records = analysis.run(a)
  end
  if opts.trace_file then
    local raw = analysis.raw_of[records[1]]
    if not raw or opts.pass_mode ~= "training" then
      errors.raise("analyze: --trace-file needs a valid training point")
    end
    local d = raw.scenario:compile():degrees()
    output.write_file(opts.trace_file, require("fathom.format.trace").encode(raw.result, d.pp,
      raw.scenario.workload.pp_variant))
  end
  if streamed then
    io.stderr:write(string.format("fathom: wrote %d record%s to %s\n", streamed, streamed == 1 and "" or "s",
      opts.output_file))
  elseif opts.output_file then
    local out = records
    if not opts.raw_output and opts.format ~= "svg" then
      out = {}
      for i, r in ipairs(records) do out[i] = report.humanize(r) end
    end
    output.write(out, opts.format, opts.output_file)
    io.stderr:write(string.format("fathom: wrote %d record%s to %s\n", #records,
      #records == 1 and "" or "s", opts.output_file))
  else
    io.stdout:write(summary(records, opts.pass_mode))
  end
  return 0
end

return M
