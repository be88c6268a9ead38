-- fathom calibrate: fit one GPU's efficiency settings to the user's own measurements
-- (fathom.calibrate) and write a hardware-library overlay the other commands accept.
local analysis = require("fathom.analysis")
local args = require("fathom.args")
local calibrate = require("fathom.calibrate")
local errors = require("fathom.errors")
local output = require("fathom.output")
local tablefmt = require("fathom.format.table")
local util = require("fathom.format.util")

local M = {}

local spec = {
  { name = "cases", arg = "FILE", multi = true, required = true,
    help = "measurements in the validation schema (validation/*.yaml), repeatable" },
  { name = "gpu", arg = "NAME", required = true,
    help = "the GPU to fit: a node name or its start (H100 matches H100_SXM, H100_PCIE, ...) or a generation" },
  { name = "library", arg = "K",
    help = "fit only the cases of this kernel library (2023, 2024, 2025, torch2025, trt2023, ...) [default: "
      .. "every case; the generation's reference library is fitted, the others follow by their factors]" },
  { name = "source", arg = "S", help = "only the cases of this source" },
  { name = "hardware-lib", arg = "FILE",
    help = "hardware library (or overlay) to start from [default: configs/hardware/hardware_library.yaml]" },
  { name = "overlay", arg = "FILE", help = "write the fitted values there as a hardware-library overlay (YAML)" },
  { name = "no-loo", flag = true, help = "leave out the leave-one-out refits" },
  { name = "help", flag = true, help = "this help" },
}
spec = args.with_output(spec, { help = "table: fitted values, errors, residuals per case; yaml, json: all of "
  .. "it; csv: one row per case" })
M.spec = spec -- the option table (completion and the man page read it)

M.usage = "usage: fathom calibrate --cases FILE... --gpu NAME [--library K] [--source S] [--overlay F]\n" ..
  "                        [--hardware-lib F] [--no-loo] [--format table|yaml|json|csv] [--output-file F]\n\n" ..
  "Fits the efficiency settings of one GPU generation (efficiency: BF16 GEMMs; fp8_efficiency: FP8\n" ..
  "GEMMs; attention_efficiency: fused attention; each only where the cases exercise it) to your\n" ..
  "measurements, minimising the mean |log(predicted / measured)| over the cases (bounded, coordinate\n" ..
  "golden-section search; deterministic). Prints the fitted values with a 1-sigma uncertainty (Gauss-\n" ..
  "Newton, from the curvature of the log residuals), the error per case with the shipped and the\n" ..
  "fitted values, and the leave-one-out error (each case predicted by a refit without it; folds\n" ..
  "above " .. calibrate.max_loo_folds .. " cases). --overlay writes the fit as a hardware-library overlay that\n" ..
  "analyze, estimate, search, serve and validate take as --hardware-lib. The calibration is one\n" ..
  "setting per GPU generation, so the overlay sets every compute component of that generation.\n\n" ..
  "examples:\n" ..
  "  fathom calibrate --cases validation/modern_cases.yaml --gpu H100 --library 2025 --overlay h100.yaml\n" ..
  "  fathom estimate --model llama3.1_70b --hardware H100_SXM --gpus 64 --tp 8 --pp 2 --hardware-lib h100.yaml\n\n" ..
  args.usage(spec) .. "\n"

local function pct(x) return x and string.format("%+.1f%%", 100 * x) or "-" end
local function apct(x) return x and string.format("%.1f%%", 100 * x) or "-" end
local function f3(x) return x and string.format("%.3f", x) or "-" end

local function text(res, files, overlay_path)
  local out = setmetatable({}, { __newindex = function(t, k, v) -- tables end in a newline: one blank line
    rawset(t, k, (tostring(v):gsub("\n$", "")))
  end })
  out[#out + 1] = string.format("calibrate %s: generation %s, kernel library %s%s, %d cases of %s", res.gpu,
    res.generation, res.library, res.reference and " (its reference)" or "", #res.cases, table.concat(files, ", "))
  out[#out + 1] = ""
  local rows = {}
  for _, k in ipairs(calibrate.keys) do
    local f = res.fitted[k]
    if f then
      rows[#rows + 1] = { k, f3(f.value), f.std_error and f3(f.std_error) or "n/d", f3(f.shipped),
        f.shipped and pct(f.value / f.shipped - 1) or "-", string.format("%.2f-%.2f", f.lo, f.hi) }
    end
  end
  out[#out + 1] = tablefmt.render({ "setting", "fitted", "+-1 sigma", "shipped", "change", "bounds" }, rows)
  out[#out + 1] = ""
  local loo = res.loo and string.format("leave-one-out%s", res.folds < #res.cases and
    string.format(" (%d folds)", res.folds) or "") or nil
  local head = { "|predicted/measured - 1|", "shipped", "fitted" }
  if loo then head[#head + 1] = loo end
  local mean = { "mean", apct(res.before.mean_abs_error), apct(res.after.mean_abs_error) }
  local med = { "median", apct(res.before.median_abs_error), apct(res.after.median_abs_error) }
  if loo then
    mean[#mean + 1] = apct(res.loo.mean_abs_error)
    med[#med + 1] = apct(res.loo.median_abs_error)
  end
  out[#out + 1] = tablefmt.render(head, { mean, med })
  out[#out + 1] = ""
  rows = {}
  for _, c in ipairs(res.cases) do
    rows[#rows + 1] = { c.id, c.kernels, c.metric, string.format("%.4g", c.measured), pct(c.error_before),
      pct(c.error_after), pct(c.error_loo) }
  end
  out[#out + 1] = tablefmt.render({ "case", "kernels", "metric", "measured", "shipped", "fitted", "LOO" }, rows)
  if #res.skipped > 0 then
    local why = {}
    for _, s in ipairs(res.skipped) do why[s.reason] = (why[s.reason] or 0) + 1 end
    local reasons = {}
    for r, n in pairs(why) do reasons[#reasons + 1] = string.format("  %4d  %s", n, r) end
    table.sort(reasons)
    out[#out + 1] = string.format("\nskipped %d case%s of the file%s:\n%s", #res.skipped,
      #res.skipped == 1 and "" or "s", #res.skipped == 1 and "" or "s", table.concat(reasons, "\n"))
  end
  if overlay_path then
    out[#out + 1] = string.format("\noverlay written to %s (compute: %s); use it as --hardware-lib %s", overlay_path,
      table.concat(calibrate.components_of(res.state.lib_doc, res.generation), ", "), overlay_path)
  end
  return table.concat(out, "\n") .. "\n"
end

local function data(res)
  local fitted = {}
  for _, k in ipairs(calibrate.keys) do
    local f = res.fitted[k]
    if f then
      fitted[#fitted + 1] = util.ordered({ setting = k, value = f.value, std_error = f.std_error,
        shipped = f.shipped, lower_bound = f.lo, upper_bound = f.hi },
        { "setting", "value", "std_error", "shipped", "lower_bound", "upper_bound" })
    end
  end
  local cases = {}
  for i, c in ipairs(res.cases) do
    cases[i] = util.ordered(c, { "id", "source", "kernels", "metric", "measured", "predicted_before",
      "predicted_after", "error_before", "error_after", "error_loo" })
  end
  util.array(fitted)
  util.array(cases)
  local skipped = util.array(res.skipped)
  return util.ordered({ gpu = res.gpu, generation = res.generation, library = res.library,
    reference_library = res.reference, fitted = fitted, before = res.before, after = res.after,
    leave_one_out = res.loo, loo_folds = res.loo and res.folds or nil, cases = cases, skipped = skipped },
    { "gpu", "generation", "library", "reference_library", "fitted", "before", "after", "leave_one_out",
      "loo_folds", "cases", "skipped" })
end

function M.main(argv)
  local opts, extra = args.parse(argv, spec, "calibrate")
  if opts.help then
    io.stdout:write(M.usage)
    return 0
  end
  if #extra > 0 then errors.raise("calibrate: unexpected argument '%s'", extra[1]) end
  local files = {}
  for i, f in ipairs(opts.cases) do files[i] = analysis.resolve(f) end
  local lib_arg = opts.hardware_lib or "hardware/hardware_library.yaml"
  local res = calibrate.run({ cases = files, gpu = opts.gpu, library = opts.library, source = opts.source,
    hardware_lib = analysis.resolve(lib_arg), loo = not opts.no_loo })
  if opts.overlay then
    -- the shipped library by its configs/ name (portable); a library of the user's by its
    -- absolute path (the overlay may be read from elsewhere)
    local base = lib_arg
    if opts.hardware_lib then
      base = analysis.resolve(lib_arg)
      if base:sub(1, 1) ~= "/" and os.getenv("PWD") then base = os.getenv("PWD") .. "/" .. base end
    end
    output.write_file(opts.overlay, calibrate.overlay(res, base, opts.cases))
  end
  output.emit(opts, {
    table = function() return text(res, opts.cases, opts.overlay) end,
    data = function() return data(res) end,
    csv = function() return data(res).cases end,
  }, "calibrate")
  return 0
end

return M
