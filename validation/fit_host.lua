-- fit_host.lua: refit the host's time per operator of the Megatron-Core family
-- (lua/fathom/frameworks.lua TE_HOST_OP_SEC) and Grace's factor on it (the hardware
-- library's host_op_time_factor on GB200/GB300) over the Megatron-Bridge rows, with a
-- leave-one-release-out check: for each release, the grid point that fits the other
-- releases best and that release's median |error| there.
--
--   fathom validation/fit_host.lua [CASES.yaml ...]
--
-- Default cases: validation/megatron_bridge_cases.yaml. Loss: mean |log(predicted /
-- measured)| over the modelled rows (each row's first time metric, tokens/s/GPU where it
-- has one). Only workloads that model the host (host_op_sec > 0) and nodes with a factor
-- other than 1 change between grid points; nothing else is refitted.
local validate = require("fathom.validate")

local files = { ... }
if #files == 0 then files = { "validation/megatron_bridge_cases.yaml" } end
local HOST = { 8e-6, 15e-6, 20e-6, 25e-6, 30e-6, 35e-6, 40e-6, 50e-6 }
local GRACE = { 1.0, 1.25, 1.5, 1.75, 2.0, 2.75 }

local state = validate.state()
local jobs, skipped = validate.prepare(validate.load(files))
local grace_nodes = {}
for name, node in pairs(state.lib_doc.nodes) do
  if (node.host_op_time_factor or 1) ~= 1 then grace_nodes[#grace_nodes + 1] = name end
end
table.sort(grace_nodes)

-- errs(h, g) -> {source = {|log errors|}}, all, {source = {|relative errors|}}
local function errs(h, g)
  for _, j in ipairs(jobs) do
    local w = j.docs.workload
    if (w.host_op_sec or 0) > 0 then w.host_op_sec = h end
  end
  for _, n in ipairs(grace_nodes) do state.lib_doc.nodes[n].host_op_time_factor = g end
  state.libs = {} -- calibrated libraries are cached by node: rebuild them with this factor
  local recs = validate.evaluate(state, jobs)
  local by, all, rel = {}, {}, {}
  for _, r in ipairs(recs) do
    if r.fits and r.relative_error and r.workload == "training" then
      local e = math.abs(math.log(1 + r.relative_error))
      by[r.source] = by[r.source] or {}
      rel[r.source] = rel[r.source] or {}
      table.insert(by[r.source], e)
      table.insert(rel[r.source], math.abs(r.relative_error))
      all[#all + 1] = e
    end
  end
  return by, all, rel
end

local function mean(t)
  local s = 0
  for _, v in ipairs(t) do s = s + v end
  return #t > 0 and s / #t or 0
end

-- median_pct(t) -> the median of t in percent, as validate summarises a source
local function median_pct(t)
  local c = {}
  for i, v in ipairs(t) do c[i] = v end
  table.sort(c)
  return 100 * (validate.quantile(c, 0.5) or 0)
end

local grid, sources = {}, {}
for _, h in ipairs(HOST) do
  for _, g in ipairs(GRACE) do
    local by, all, rel = errs(h, g)
    grid[#grid + 1] = { h = h, g = g, by = by, all = all, rel = rel }
    for s in pairs(by) do sources[s] = true end
  end
end
local names = {}
for s in pairs(sources) do names[#names + 1] = s end
table.sort(names)

local function best(except)
  local b, bl
  for _, p in ipairs(grid) do
    local e = {}
    for s, t in pairs(p.by) do
      if s ~= except then for _, v in ipairs(t) do e[#e + 1] = v end end
    end
    local l = mean(e)
    if not bl or l < bl - 1e-12 then b, bl = p, l end
  end
  return b, bl
end

local b, bl = best(nil)
print(string.format("%d rows modelled, %d skipped; grid %d host times x %d Grace factors (%s)", #b.all, #skipped,
  #HOST, #GRACE, table.concat(grace_nodes, ", ")))
print(string.format("best over all rows: %.0f us, Grace %.2f (mean |log error| %.3f)", b.h * 1e6, b.g, bl))
local base
for _, p in ipairs(grid) do
  if p.h == 8e-6 and p.g == 2.75 then base = p end
end
print(string.format("%-40s %-18s %-20s %s", "left out", "fit on the rest", "its median |error|", "at 8 us, Grace 2.75"))
for _, s in ipairs(names) do
  local p = best(s)
  print(string.format("%-40s %3.0f us, Grace %.2f  %-20s %.1f%%", s, p.h * 1e6, p.g,
    string.format("%.1f%%", median_pct(p.rel[s] or {})), median_pct(base.rel[s] or {})))
end
