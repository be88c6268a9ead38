-- fathom validate: predicted vs measured over a file of published cases.
local args = require("fathom.args")
local calibration = require("fathom.calibration")
local analysis = require("fathom.analysis")
local output = require("fathom.output")
local tablefmt = require("fathom.format.table")
local util = require("fathom.format.util")
local validate = require("fathom.validate")

local M = {}

local spec = {
  { name = "cases", arg = "FILE", multi = true,
    help = "cases file, repeatable [default: the seven validation/*_cases.yaml files above]" },
  { name = "hardware-lib", arg = "FILE",
    help = "hardware library (datasheet figures and the calibrated efficiencies)" },
  { name = "no-loso", flag = true, help = "leave out the leave-one-source-out errors (refits per source)" },
  { name = "fit", flag = true, help = "refit the per-generation calibration and print it" },
  { name = "help", flag = true, help = "this help" },
}
spec = args.with_output(spec, { help = "table: per case and per source; yaml, json: every "
  .. "case with its comparisons and the summaries; csv: one row per comparison" })
M.spec = spec -- the option table (completion and the man page read it)

M.usage = "usage: fathom validate [--cases FILE]... [--fit] [--no-loso] [--format table|yaml|json|csv]\n" ..
  "                       [--output-file F] [--raw-output]\n\n" ..
  "Runs every complete case of the measurement files (validation/published_cases.yaml,\n" ..
  "validation/modern_cases.yaml, validation/korthikanti2022_cases.yaml,\n" ..
  "validation/mlperf_cases.yaml, validation/mlperf_lora_cases.yaml,\n" ..
  "validation/amd_rocm_vllm_cases.yaml and validation/trtllm_perf_cases.yaml unless --cases is\n" ..
  "given) that fathom can model and prints\n" ..
  "predicted vs measured per case, per source the count, median and 90th-percentile absolute\n" ..
  "relative error, the runs the model calls \"does not fit\", the leave-one-source-out errors,\n" ..
  "and every skipped case with its reason.\n" ..
  "Calibration is one setting per GPU generation (the hardware library's efficiencies) and\n" ..
  "kernel library (lua/fathom/calibration.lua factors); nothing is tuned per case.\n\n" ..
  "examples:\n" ..
  "  fathom validate\n" ..
  "  fathom validate --cases validation/korthikanti2022_cases.yaml --no-loso --format csv\n\n" ..
  args.usage(spec) .. "\n"

local function default_cases()
  local out = {}
  for _, p in ipairs(validate.default_files) do
    local r = analysis.resolve(p)
    local f = io.open(r, "r")
    if not f then r = analysis.resolve("../shared/" .. p) f = io.open(r, "r") end
    if f then
      f:close()
      out[#out + 1] = r
    end
  end
  return out
end

local function pct(x) return x and string.format("%.1f%%", 100 * x) or "-" end

local function source_table(sources, loso, first, last)
  local srows, names = {}, {}
  for s in pairs(sources) do if s ~= last then names[#names + 1] = s end end
  table.sort(names)
  if last and sources[last] then names[#names + 1] = last end
  for _, s in ipairs(names) do
    local v = sources[s]
    local row = { s, v.count, pct(v.median_abs_error), pct(v.p90_abs_error), v.no_fit or "" }
    if loso then
      local l = loso[s]
      row[#row + 1] = l and pct(l.median_abs_error) or "-"
      row[#row + 1] = l and pct(l.p90_abs_error) or "-"
    end
    srows[#srows + 1] = row
  end
  local head = { first or "source", "cases", "median |err|", "p90 |err|", "no-fit" }
  if loso then
    head[#head + 1] = "LOSO median"
    head[#head + 1] = "LOSO p90"
  end
  return tablefmt.render(head, srows)
end

local function text(res)
  local rows = {}
  for i, c in ipairs(res.cases) do
    rows[i] = { c.id, c.metric, string.format("%.4g", c.predicted), string.format("%.4g", c.measured),
      string.format("%+.1f%%", 100 * c.relative_error), c.fits and "" or "no-fit", c.calibration or "" }
  end
  local out = { tablefmt.render({ "case", "metric", "predicted", "measured", "error", "", "calibration" }, rows),
    "", source_table(res.sources, res.loso) }
  if next(res.moe_models) then
    out[#out + 1] = "\nMoE training cases per model"
    out[#out + 1] = source_table(res.moe_models, nil, "model", validate.MOE_ALL)
  end
  if next(res.memory) then
    out[#out + 1] = "\npeak memory (measured vs predicted footprint)"
    out[#out + 1] = source_table(res.memory)
  end
  out[#out + 1] = string.format("\nmeasured runs the model calls \"does not fit\": %d of %d", res.no_fit,
    #res.cases)
  if res.fitted then
    -- the two places the calibration is stored: each generation's reference row (the hardware
    -- library's compute efficiencies) and the other kernel libraries' factors
    -- (fathom.calibration.factors)
    local refs, factors = calibration.to_factors(res.fitted)
    local lines = { "\nfitted calibration, reference kernel library per GPU generation (configs/hardware/" ..
      "hardware_library.yaml):" }
    local function f3(x) return x and string.format("%.3f", x) or "-" end
    local keys = {}
    for g, v in pairs(refs) do
      -- generations without cases are derived (fathom.calibration.derived): not refitted
      if not calibration.derived[g] then keys[#keys + 1] = string.format(
        "  %-24s efficiency %s  fp8_efficiency %s  attention_efficiency %s",
        g .. "/" .. calibration.reference_of(g), f3(v.efficiency), f3(v.fp8_efficiency), f3(v.attention_efficiency))
      end
    end
    table.sort(keys)
    local fk = {}
    for g, frows in pairs(factors) do
      for k, v in pairs(calibration.derived[g] and {} or frows) do
        local a = res.fitted[g][k]
        fk[#fk + 1] = string.format("  %-24s x %s  x %s  x %s   (%s  %s  %s)", g .. "/" .. k, f3(v.efficiency),
          f3(v.fp8_efficiency), f3(v.attention_efficiency), f3(a.efficiency), f3(a.fp8_efficiency),
          f3(a.attention_efficiency))
      end
    end
    table.sort(fk)
    out[#out + 1] = table.concat(lines, "\n") .. "\n" .. table.concat(keys, "\n") ..
      "\n\nkernel-library factors (lua/fathom/calibration.lua; efficiency, fp8, attention; the values):\n" ..
      table.concat(fk, "\n")
  end
  local why = {}
  for _, s in ipairs(res.skipped) do why[s.reason] = (why[s.reason] or 0) + 1 end
  local reasons = {}
  for r, n in pairs(why) do reasons[#reasons + 1] = string.format("  %4d  %s", n, r) end
  table.sort(reasons)
  out[#out + 1] = string.format("\nskipped %d case%s%s\n", #res.skipped, #res.skipped == 1 and "" or "s",
    #reasons > 0 and (":\n" .. table.concat(reasons, "\n")) or "")
  return table.concat(out, "\n")
end

function M.main(argv)
  local opts, extra = args.parse(argv, spec, "validate")
  if opts.help then
    io.stdout:write(M.usage)
    return 0
  end
  if #extra > 0 then require("fathom.errors").raise("validate: unexpected argument '%s'", extra[1]) end
  local files = (opts.cases and #opts.cases > 0) and opts.cases or default_cases()
  local res = validate.run(files, opts.hardware_lib and analysis.resolve(opts.hardware_lib),
    { loso = not opts.no_loso, fit = opts.fit })
  util.array(res.cases)
  util.array(res.skipped)
  for _, c in ipairs(res.cases) do
    util.array(c.comparisons)
    if c.notes then util.array(c.notes) end
  end
  output.emit(opts, {
    table = function() return text(res) end,
    data = function() return res end,
    csv = function() -- one row per comparison: the case's identity, then what was compared
      local rows = {}
      for _, c in ipairs(res.cases) do
        for _, m in ipairs(c.comparisons or {}) do
          rows[#rows + 1] = util.ordered({ id = c.id, source = c.source, framework = c.framework,
            workload = c.workload, calibration = c.calibration, fits = c.fits, class = m.class, metric = m.metric,
            unit = m.unit, predicted = m.predicted, measured = m.measured, relative_error = m.relative_error },
            { "id", "source", "framework", "workload", "calibration", "fits", "class", "metric", "unit", "predicted",
              "measured", "relative_error" })
        end
      end
      return rows
    end,
  }, "validate")
  return 0
end

return M
