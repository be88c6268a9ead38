-- fathom validate: predicted vs measured over a file of published cases.
local args = require("fathom.args")
local analysis = require("fathom.analysis")
local output = require("fathom.output")
local tablefmt = require("fathom.format.table")
local util = require("fathom.format.util")
local validate = require("fathom.validate")

local M = {}

local spec = {
  { name = "cases", arg = "FILE", help = "cases file [default: validation/published_cases.yaml]" },
  { name = "hardware-lib", arg = "FILE", help = "hardware library with the per-GPU calibration" },
  { name = "format", arg = "FMT", choices = { "table", "yaml", "json" }, default = "table", help = "output" },
  { name = "output-file", arg = "FILE", help = "write here instead of stdout" },
  { name = "help", flag = true, help = "this help" },
}

M.usage = "usage: fathom validate [--cases FILE] [--format table|yaml|json] [--output-file F]\n\n" ..
  "Runs every complete case of the published-measurements file that fathom can\n" ..
  "model, prints predicted vs measured per case, the median and 90th-percentile\n" ..
  "absolute relative error per source, and which cases were skipped and why.\n" ..
  "Calibration is one setting per GPU type in the hardware library; nothing is\n" ..
  "tuned per case.\n\n" .. args.usage(spec) .. "\n"

local function default_cases()
  for _, p in ipairs({ "validation/published_cases.yaml", "../shared/validation/published_cases.yaml",
    "shared/validation/published_cases.yaml" }) do
    local r = analysis.resolve(p)
    local f = io.open(r, "r")
    if f then
      f:close()
      return r
    end
  end
  return "validation/published_cases.yaml"
end

local function text(res)
  local rows = {}
  for i, c in ipairs(res.cases) do
    rows[i] = { c.id, c.metric, string.format("%.4g", c.predicted), string.format("%.4g", c.measured),
      string.format("%+.1f%%", 100 * c.relative_error), c.fits and "" or "no-fit" }
  end
  local out = { tablefmt.render({ "case", "metric", "predicted", "measured", "error", "" }, rows), "" }
  local srows = {}
  local names = {}
  for s in pairs(res.sources) do names[#names + 1] = s end
  table.sort(names)
  for _, s in ipairs(names) do
    local v = res.sources[s]
    srows[#srows + 1] = { s, v.count, string.format("%.1f%%", 100 * v.median_abs_error),
      string.format("%.1f%%", 100 * v.p90_abs_error) }
  end
  out[#out + 1] = tablefmt.render({ "source", "cases", "median |err|", "p90 |err|" }, srows)
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
  local res = validate.run(opts.cases or default_cases(), opts.hardware_lib and analysis.resolve(opts.hardware_lib))
  if opts.format == "table" then
    local t = text(res)
    if opts.output_file then output.write_file(opts.output_file, t) else io.stdout:write(t) end
  else
    util.array(res.cases)
    util.array(res.skipped)
    output.write(res, opts.format, opts.output_file)
  end
  return 0
end

return M
