-- fathom.calibrate: fit one GPU generation's efficiency settings (fathom.calibration) to a
-- file of measurements in the validation schema (fathom.cases), report how well they fit
-- and write a hardware-library overlay the other commands accept (--hardware-lib F).
--
-- The fit: the settings the cases exercise (efficiency with BF16/FP16 cases, fp8_efficiency
-- with FP8 ones, attention_efficiency where fused attention runs), bounded by
-- fathom.validate.fit_ranges, minimising the mean |log(predicted / measured)| of each case's
-- primary metric (an L1 loss: a case the model cannot express moves it no more than any
-- other; log so that over- and under-prediction by the same factor weigh the same) by
-- coordinate golden-section search (fathom.fit). Deterministic: no random restarts.
local calibration = require("fathom.calibration")
local cases = require("fathom.cases")
local errors = require("fathom.errors")
local fit = require("fathom.fit")
local validate = require("fathom.validate")

local M = {}

-- The settings a fit may move, in the order they are fitted and reported.
M.keys = { "efficiency", "fp8_efficiency", "attention_efficiency" }

-- Leave-one-out refits above this many cases become this many folds (each fold left out
-- in turn): a refit costs ~100 evaluations of every case.
M.max_loo_folds = 24

local function squash(s) return (tostring(s or ""):lower():gsub("[%s%-_]", "")) end

-- the GPU generation of a node of the hardware library (fathom.cases.gpus), or nil
local function generation_of(node)
  for _, g in ipairs(cases.gpus) do
    if g.node == node then return g.generation end
  end
end

-- matches(job, want) -> whether a prepared case ran on the GPU named by --gpu: its node's
-- name starts with it ("H100" matches H100_SXM, H100_PCIE, ...), or it is the generation.
local function matches(job, want)
  local w = squash(want)
  return squash(job.docs.gpu.node):sub(1, #w) == w or squash(job.generation) == w
end

-- pick(list, opts, where) -> jobs, skipped, generation: the cases of list on the GPU
-- (and kernel library, and source) asked for, prepared. Raises an input error naming the
-- cases file when none is left, with what the file does hold.
local function pick(list, opts, where)
  if opts.source then
    local keep = {}
    for _, c in ipairs(list) do if tostring(c.source) == opts.source then keep[#keep + 1] = c end end
    if #keep == 0 then
      local seen, names = {}, {}
      for _, c in ipairs(list) do
        if c.source and not seen[c.source] then seen[c.source], names[#names + 1] = true, tostring(c.source) end
      end
      table.sort(names)
      errors.raise("%s: no case has source '%s' (hint: sources there: %s)", where, opts.source,
        #names > 0 and table.concat(names, ", ") or "no case names one")
    end
    list = keep
  end
  local jobs, skipped = validate.prepare(list)
  local mine, gens, nodes = {}, {}, {}
  for _, job in ipairs(jobs) do
    nodes[job.docs.gpu.node] = true
    if matches(job, opts.gpu) and (opts.library == nil or job.kernels == opts.library) then
      mine[#mine + 1] = job
      gens[job.generation] = true
    end
  end
  if #mine == 0 then
    local names = {}
    for n in pairs(nodes) do names[#names + 1] = n end
    table.sort(names)
    errors.raise("%s: no case fathom can model ran on GPU '%s'%s (hint: GPUs there: %s)", where, opts.gpu,
      opts.library and (" with kernel library '" .. opts.library .. "'") or "",
      #names > 0 and table.concat(names, ", ") or "no case names one")
  end
  local gl = {}
  for g in pairs(gens) do gl[#gl + 1] = g end
  table.sort(gl)
  if #gl > 1 then
    errors.raise("calibrate: --gpu '%s' matches GPUs of %d generations (%s) (hint: name one GPU, e.g. H100)",
      opts.gpu, #gl, table.concat(gl, ", "))
  end
  return mine, skipped, gl[1]
end

-- which settings the cases exercise
local function free_keys(jobs)
  local wide, fp8, flash = false, false, false
  for _, job in ipairs(jobs) do
    if job.docs.precision.fp8 then fp8 = true else wide = true end
    if job.inference or job.docs.workload.flash_attention then flash = true end
  end
  local out = {}
  if wide then out[#out + 1] = "efficiency" end
  if fp8 then out[#out + 1] = "fp8_efficiency" end
  if flash then out[#out + 1] = "attention_efficiency" end
  return out
end

-- settings_with(base, gen, library, x) -> the calibration with x as the fitted row: the
-- library's own row (--library), else the generation's reference row with every other
-- kernel library of it following by its factors (fathom.calibration.factors).
local function settings_with(base, gen, library, x)
  local s = calibration.copy(base)
  s[gen] = s[gen] or {}
  local rows = s[gen]
  local key = library or calibration.reference_of(gen)
  local row = calibration.copy_row(calibration.lookup(gen, key, base) or {})
  for k, v in pairs(x) do row[k] = v end
  rows[key] = row
  if not library then
    for k, f in pairs(calibration.factors_of(gen)) do rows[k] = calibration.apply(row, f) end
  end
  return s
end

-- log errors of the primary metric, in job order (nil for a case the model rejects)
local function log_errors(state, jobs, settings)
  if state.tick then state.tick() end -- the progress line
  local recs = validate.evaluate(state, jobs, settings)
  local by = {}
  for _, r in ipairs(recs) do by[r.id] = r end
  local out = {}
  for i, job in ipairs(jobs) do
    local r = by[tostring(job.case.id)]
    out[i] = r and math.log(r.predicted / r.measured) or nil
  end
  return out, by
end

local function list_of(errs, n)
  local out = {}
  for i = 1, n do if errs[i] then out[#out + 1] = errs[i] end end
  return out
end

-- fit_on(state, jobs, gen, library, base, params, opts) -> x, loss
-- one round of coordinate golden-section search over the whole bounds (finds the basin),
-- then the simplex from there (follows the valley along which settings trade off)
local function fit_on(state, jobs, gen, library, base, params, opts)
  opts = opts or {}
  local function loss(t)
    local e = log_errors(state, jobs, settings_with(base, gen, library, t))
    return fit.mean_abs(list_of(e, #jobs)) or 0
  end
  local x = opts.start or fit.minimize(loss, params, { rounds = 1, iters = opts.iters or 12 })
  if #params == 1 then return fit.minimize(loss, params, { rounds = 1, iters = 6 + (opts.iters or 12) }) end
  return fit.nelder_mead(loss, params, x, { step = opts.step or 0.03, max_evals = opts.max_evals or 120 })
end

local function summary(errs)
  -- relative errors (predicted / measured - 1) from log errors
  local rel = {}
  for i, e in ipairs(errs) do rel[i] = math.exp(e) - 1 end
  return { cases = #errs, mean_abs_log_error = fit.mean_abs(errs), median_abs_error = fit.median_abs(rel),
    mean_abs_error = fit.mean_abs(rel) }
end

local function round3(v) return math.floor(v * 1000 + 0.5) / 1000 end

-- run{cases = {paths}, gpu = NAME, library = K, source = S, hardware_lib = PATH, loo = bool}
-- -> result {gpu, generation, library, fitted = {key = {value, shipped, std_error, lo, hi}},
-- before, after, loo (error summaries), cases (per case), skipped, settings, overlay}
function M.run(o)
  if not o.gpu or o.gpu == "" then errors.raise("calibrate: --gpu is required (hint: --gpu H100)") end
  if o.library then
    local known = false
    for _, k in ipairs(calibration.kernel_generations) do if k == o.library then known = true end end
    if not known then
      errors.raise("calibrate: unknown kernel library '%s' (hint: one of %s)", o.library,
        table.concat(calibration.kernel_generations, ", "))
    end
  end
  local state = validate.state(o.hardware_lib)
  local list = {}
  for _, path in ipairs(o.cases) do
    for _, c in ipairs(validate.load(path)) do list[#list + 1] = c end
  end
  local where = table.concat(o.cases, ", ")
  local jobs, skipped, gen = pick(list, o, where)
  local base = state.settings
  local library = o.library
  if library == calibration.reference_of(gen) then library = nil end -- the reference row itself
  -- the cases the model evaluates at the shipped calibration (the rest are skipped with the
  -- model's reason, as validate does)
  local _, rejected = validate.evaluate(state, jobs, base)
  for _, s in ipairs(rejected) do skipped[#skipped + 1] = s end
  local e0, by0 = log_errors(state, jobs, base)
  local kept, e0k = {}, {}
  for i, job in ipairs(jobs) do
    if e0[i] then kept[#kept + 1], e0k[#e0k + 1] = job, e0[i] end
  end
  e0 = e0k
  if #kept == 0 then
    errors.raise("%s: no case on GPU '%s' could be evaluated (hint: fathom validate --cases %s lists why)", where,
      o.gpu, o.cases[1])
  end
  jobs = kept
  local names = free_keys(jobs)
  local shipped = calibration.lookup(gen, o.library or calibration.reference_of(gen), base) or {}
  local params = {}
  for _, k in ipairs(names) do
    local r = validate.fit_ranges[k]
    params[#params + 1] = { name = k, lo = r[1], hi = r[2], start = shipped[k] or shipped.efficiency }
  end
  -- a progress line on a terminal: evaluations of the case set, at most what the fit,
  -- the uncertainty and the leave-one-out refits may take (the simplex often stops sooner)
  local folds = math.min(#jobs, M.max_loo_folds)
  local loo_on = o.loo ~= false and #jobs >= 2
  local total = 1 + #params * 14 + 120 + #params + 1 + 2 * #params + (loo_on and folds * (41 + #params) or 0)
  local done = 0
  local bar <close> = require("fathom.progress").new({ label = "calibrate", total = total, unit = "fits",
    enabled = o.progress })
  state.tick = function()
    done = math.min(done + 1, total)
    bar:update(done)
  end
  local x = fit_on(state, jobs, gen, library, base, params)
  for k, v in pairs(x) do x[k] = round3(v) end
  local fitted_settings = settings_with(base, gen, library, x)
  local e1, by1 = log_errors(state, jobs, fitted_settings)
  local se = fit.std_errors(function(t)
    return list_of(log_errors(state, jobs, settings_with(base, gen, library, t)), #jobs)
  end, x, names)
  -- leave-one-out: each case (or fold) predicted by a refit on the others: the simplex
  -- started at the full fit, inside +-0.1 of it (dropping one case moves the fit little)
  local loo = {}
  if loo_on then
    for f = 1, folds do
      local rest, own, idx = {}, {}, {}
      for i, job in ipairs(jobs) do
        if (i - 1) % folds == f - 1 then own[#own + 1], idx[#idx + 1] = job, i else rest[#rest + 1] = job end
      end
      local p2 = {}
      for i, p in ipairs(params) do
        p2[i] = { name = p.name, lo = math.max(p.lo, x[p.name] - 0.1), hi = math.min(p.hi, x[p.name] + 0.1),
          start = x[p.name] }
      end
      local xf = fit_on(state, rest, gen, library, base, p2, { start = x, iters = 8, step = 0.02, max_evals = 40 })
      local ef = log_errors(state, own, settings_with(base, gen, library, xf))
      for j, i in ipairs(idx) do loo[i] = ef[j] end
    end
  end
  local res = { gpu = o.gpu, generation = gen, library = o.library or calibration.reference_of(gen),
    reference = library == nil, fitted = {}, cases = {}, skipped = skipped, folds = folds }
  for _, k in ipairs(names) do
    res.fitted[k] = { value = x[k], shipped = shipped[k], std_error = se[k], lo = validate.fit_ranges[k][1],
      hi = validate.fit_ranges[k][2] }
  end
  local b, a, l = {}, {}, {}
  for i, job in ipairs(jobs) do
    local id = tostring(job.case.id)
    local r0, r1 = by0[id], by1[id]
    res.cases[i] = { id = id, source = job.case.source, kernels = job.kernels, metric = r1.metric,
      measured = r1.measured, predicted_before = r0.predicted, predicted_after = r1.predicted,
      error_before = r0.relative_error, error_after = r1.relative_error,
      error_loo = loo[i] and (math.exp(loo[i]) - 1) or nil }
    b[#b + 1], a[#a + 1] = e0[i], e1[i]
    if loo[i] then l[#l + 1] = loo[i] end
  end
  res.before, res.after = summary(b), summary(a)
  if #l > 0 then res.loo = summary(l) end
  res.settings = fitted_settings
  res.current = shipped
  res.state = state
  return res
end

-- components_of(lib_doc, generation) -> the names of the compute components of the nodes of
-- that generation (fathom's calibration is one setting per GPU generation, so every part of
-- it takes the fit), sorted.
function M.components_of(doc, gen)
  local seen, out = {}, {}
  for node, def in pairs(doc.nodes or {}) do
    local c = def.device_compute
    if generation_of(node) == gen and c and not seen[c] then
      seen[c] = true
      out[#out + 1] = c
    end
  end
  table.sort(out)
  return out
end

-- overlay(res, base_path, cases_paths) -> the YAML text of a hardware-library overlay
-- (fathom.calibration.load_library) holding the fitted values on every compute component
-- of the generation: the reference kernel library's setting, or with --library the
-- library's own setting and `calibrated:` saying so.
function M.overlay(res, base_path, case_paths)
  local doc = res.state.lib_doc
  local lines = {
    "# hardware-library overlay written by fathom calibrate: use it as --hardware-lib with",
    "# analyze, estimate, search, serve and validate (fathom.calibration.load_library)",
    string.format("# GPU %s (generation %s, kernel library %s), fitted to %d cases of %s", res.gpu, res.generation,
      res.library, #res.cases, table.concat(case_paths, ", ")),
    string.format("# mean |error| %.1f%% before, %.1f%% after, %s leave-one-out", 100 * res.before.mean_abs_error,
      100 * res.after.mean_abs_error, res.loo and string.format("%.1f%%", 100 * res.loo.mean_abs_error) or "no"),
    "base: " .. base_path,
    string.format("description: %s efficiencies fitted by fathom calibrate", res.generation),
  }
  if not res.reference then
    lines[#lines + 1] = "calibrated:"
    lines[#lines + 1] = string.format("  %s:", res.generation)
    lines[#lines + 1] = string.format("    kernels: \"%s\"", res.library)
    lines[#lines + 1] = string.format("    cases: %d", #res.cases)
  end
  lines[#lines + 1] = "components:"
  lines[#lines + 1] = "  compute:"
  for _, name in ipairs(M.components_of(doc, res.generation)) do
    local comp = doc.components.compute[name]
    lines[#lines + 1] = "    " .. name .. ":"
    for _, k in ipairs(M.keys) do
      local f = res.fitted[k]
      if not f and not res.reference and res.current[k] then
        -- the overlay holds the library's whole setting (validate reads it as the library's)
        lines[#lines + 1] = string.format("      %s: %.3f  # not fitted (no case exercises it): %s's current value",
          k, res.current[k], res.library)
      elseif f then
        lines[#lines + 1] = string.format("      %s: %.3f%s", k, f.value,
          f.std_error and string.format("  # +- %.3f (1 sigma); shipped %s", f.std_error,
            f.shipped and string.format("%.3f", f.shipped) or "-") or "")
      end
    end
    -- FP4 follows FP8 (fathom.calibration.apply)
    local fp8 = res.fitted.fp8_efficiency
    if fp8 and tonumber(comp.fp4_efficiency) and tonumber(comp.fp8_efficiency) then
      lines[#lines + 1] = string.format("      fp4_efficiency: %.3f  # follows fp8_efficiency",
        math.min(1, comp.fp4_efficiency * fp8.value / comp.fp8_efficiency))
    end
  end
  return table.concat(lines, "\n") .. "\n"
end

return M
