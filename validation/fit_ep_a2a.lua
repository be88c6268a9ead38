-- fit_ep_a2a.lua: refit the share of the scale-out network's collective rate that the EP
-- all-to-all reaches when it runs as NCCL's all-to-all(v) (the workload's
-- ep_a2a_scale_out_efficiency, src/core/fth_workload.h FTH_EP_A2A_SCALE_OUT_EFF), with a
-- leave-one-source-out check.
--
--   fathom validation/fit_ep_a2a.lua [CASES.yaml ...]
--
-- Default cases: the visible files (validation/modern_cases.yaml) and the Megatron-Bridge
-- rows (validation/megatron_bridge_cases.yaml). Only the rows whose prediction moves with the
-- share are fitted: training runs whose EP group crosses the scale-out network through NCCL's
-- all-to-all (not DeepEP's or HybridEP's per-node kernels). Loss: mean |log(predicted /
-- measured)| over them (each row's first time metric, tokens/s/GPU where it has one). For each
-- source left out: the share that fits the other sources' rows best and that source's mean
-- |error| there.
local validate = require("fathom.validate")

local files = { ... }
if #files == 0 then files = { "validation/modern_cases.yaml", "validation/megatron_bridge_cases.yaml" } end
local SHARES = { 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0 }

local state = validate.state()
local jobs, skipped = validate.prepare(validate.load(files))

-- errors(share) -> {id = {source, log, rel}} over the modelled training rows at that share
local function errors(share)
  for _, j in ipairs(jobs) do
    if j.docs and j.docs.workload then j.docs.workload.ep_a2a_scale_out_efficiency = share end
  end
  local out = {}
  for _, r in ipairs(validate.training_rows(validate.evaluate(state, jobs))) do
    out[r.id] = { source = r.source, log = math.abs(math.log(1 + r.relative_error)), rel = math.abs(r.relative_error) }
  end
  return out
end

local grid = {}
for i, s in ipairs(SHARES) do grid[i] = { share = s, rows = errors(s) } end

-- the rows the share moves: their error differs between the ends of the grid
local moved, sources = {}, {}
for id, e in pairs(grid[1].rows) do
  local f = grid[#grid].rows[id]
  if f and math.abs(f.log - e.log) > 1e-9 then
    moved[#moved + 1] = id
    sources[e.source] = (sources[e.source] or 0) + 1
  end
end
table.sort(moved)

-- loss(p, except, only) -> mean |log error| of the moved rows, leaving out source `except`
-- (or keeping only source `only`), and their mean |relative error|
local function loss(p, except, only)
  local l, r, n = 0, 0, 0
  for _, id in ipairs(moved) do
    local e = p.rows[id]
    if e and e.source ~= except and (not only or e.source == only) then
      l, r, n = l + e.log, r + e.rel, n + 1
    end
  end
  return n > 0 and l / n or 0, n > 0 and r / n or 0, n
end

local function best(except)
  local b, bl
  for _, p in ipairs(grid) do
    local l = loss(p, except)
    if not bl or l < bl - 1e-12 then b, bl = p, l end
  end
  return b, bl
end

local b, bl = best(nil)
print(string.format("%d training rows move with the share (%d cases skipped in all); grid %.2f-%.2f",
  #moved, #skipped, SHARES[1], SHARES[#SHARES]))
local _, at_one = loss(grid[#grid])
local _, at_best = loss(b)
print(string.format("best over them: %.2f (mean |log error| %.3f; mean |error| %.1f%% there, %.1f%% at 1.00)", b.share,
  bl, 100 * at_best, 100 * at_one))
print(string.format("%-36s %4s  %-16s %-18s %s", "left out (source)", "rows", "fit on the rest", "its mean |error|",
  "at 1.00"))
local names = {}
for k in pairs(sources) do names[#names + 1] = k end
table.sort(names)
for _, k in ipairs(names) do
  local p = best(k)
  local _, rel, n = loss(p, nil, k)
  local _, rel1 = loss(grid[#grid], nil, k)
  print(string.format("%-36s %4d  %-16.2f %-18s %.1f%%", k, n, p.share, string.format("%.1f%%", 100 * rel), 100 * rel1))
end
print("rows:")
for _, id in ipairs(moved) do
  local e1, eb = grid[#grid].rows[id], b.rows[id]
  print(string.format("  %-52s %6.1f%% -> %5.1f%%", id, 100 * e1.rel, 100 * eb.rel))
end
