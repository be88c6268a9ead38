-- fit_megatron_bridge.lua: refit, jointly, the three settings only the Megatron-Bridge rows
-- calibrate, over those rows, with leave-one-release-out and leave-one-model-out checks:
--   * the host's time per operator of the Megatron-Core family (lua/fathom/frameworks.lua
--     TE_HOST_OP_SEC),
--   * Grace's factor on it (the hardware library's host_op_time_factor on GB200/GB300),
--   * Blackwell's further cost per expert of a grouped GEMM under an FP8/FP4 training recipe
--     (the library's expert_recipe_overhead_sec on B200, GB200, B300 and GB300: Transformer
--     Engine's grouped linear quantises each local expert's operands, with its own amax or
--     block scales, and runs its GEMM as its own call; rows whose recipe runs the fused
--     grouped MLP, grouped_expert_kernel, do not pay it).
-- The last two trade against each other on GB200/GB300's FP8 MoE rows, so they are fitted
-- together. For each release (model) left out: the grid point that fits the others best and
-- that release's (model's) median |error| there.
--
--   fathom validation/fit_megatron_bridge.lua [CASES.yaml ...]
--
-- Default cases: validation/megatron_bridge_cases.yaml. Loss: mean |log(predicted /
-- measured)| over the modelled rows (each row's first time metric, tokens/s/GPU where it
-- has one). Only workloads that model the host (host_op_sec > 0), the Grace nodes' rows and
-- MoE rows under an FP8/FP4 recipe on those GPUs change between grid points; nothing else
-- is refitted. No Blackwell kernel measurement exists: this fit is the
-- only evidence for the cost per expert, and it is made on rows `fathom validate` does not
-- run by default.
local validate = require("fathom.validate")

local files = { ... }
if #files == 0 then files = { "validation/megatron_bridge_cases.yaml" } end
local HOST = { 8e-6, 20e-6, 30e-6, 35e-6, 40e-6, 50e-6 }
local GRACE = { 1.0, 1.25, 1.5, 2.0, 2.75 }
local SCALE = { 0, 8e-6, 16e-6, 24e-6, 32e-6, 40e-6, 48e-6 }
-- the settings before any of this was fitted (2025: 8 us, TE #2053's 2.75, no cost per expert)
local BEFORE = { h = 8e-6, g = 2.75, s = 0 }
local MODELS = { "deepseek_v3", "kimi_k2", "qwen3_235b", "qwen3_30b", "gpt_oss", "llama" }

local state = validate.state()
local jobs, skipped = validate.prepare(validate.load(files))
-- the library's nodes with a Grace host, and Blackwell's
local grace_nodes, computes = { "GB200", "GB300" }, {}
for _, name in ipairs({ "B200", "GB200", "B300", "GB300" }) do
  computes[#computes + 1] = state.lib_doc.nodes[name].device_compute
end

local function model_of(id)
  for _, m in ipairs(MODELS) do
    if id:find(m, 1, true) then return m end
  end
  return "other"
end

-- point(h, g, s) -> {h, g, s, log = {release = {}, model = {}}, rel = {release = {}, model = {}},
-- all}: the |log errors| and |relative errors| of every modelled row, by release and by model
local function point(h, g, s)
  for _, j in ipairs(jobs) do
    local w = j.docs.workload
    if (w.host_op_sec or 0) > 0 then w.host_op_sec = h end
  end
  for _, n in ipairs(grace_nodes) do state.lib_doc.nodes[n].host_op_time_factor = g end
  for _, c in ipairs(computes) do state.lib_doc.components.compute[c].expert_recipe_overhead_sec = s end
  state.libs = {} -- calibrated libraries are cached by node: rebuild them with these values
  local p = { h = h, g = g, s = s, log = { release = {}, model = {} }, rel = { release = {}, model = {} }, all = {} }
  for _, r in ipairs(validate.training_rows(validate.evaluate(state, jobs))) do
    local e = math.abs(math.log(1 + r.relative_error))
    for fold, key in pairs({ release = r.source, model = model_of(r.id) }) do
      p.log[fold][key] = p.log[fold][key] or {}
      p.rel[fold][key] = p.rel[fold][key] or {}
      table.insert(p.log[fold][key], e)
      table.insert(p.rel[fold][key], math.abs(r.relative_error))
    end
    p.all[#p.all + 1] = e
  end
  return p
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

local grid = {}
for _, h in ipairs(HOST) do
  for _, g in ipairs(GRACE) do
    for _, s in ipairs(SCALE) do grid[#grid + 1] = point(h, g, s) end
  end
end
local before = point(BEFORE.h, BEFORE.g, BEFORE.s)

-- best(fold, except) -> the grid point with the least loss over every row but those of
-- `except` (a release or a model; nil: every row)
local function best(fold, except)
  local b, bl
  for _, p in ipairs(grid) do
    local e = {}
    for k, t in pairs(p.log[fold]) do
      if k ~= except then for _, v in ipairs(t) do e[#e + 1] = v end end
    end
    local l = mean(e)
    if not bl or l < bl - 1e-12 then b, bl = p, l end
  end
  return b, bl
end

local function settings(p)
  return string.format("%.0f us, Grace %.2f, %.0f us", p.h * 1e6, p.g, p.s * 1e6)
end

local b, bl = best("release", nil)
print(string.format("%d rows modelled, %d skipped; grid %d host times x %d Grace factors (%s) x %d costs per "
  .. "expert (%s)", #b.all, #skipped, #HOST, #GRACE, table.concat(grace_nodes, ", "), #SCALE,
  table.concat(computes, ", ")))
print(string.format("best over all rows: %.0f us an operator, Grace %.2f, %.0f us an expert (mean |log error| "
  .. "%.3f; %.3f at %s)", b.h * 1e6, b.g, b.s * 1e6, bl, mean(before.all), settings(before)))
for _, fold in ipairs({ "release", "model" }) do
  local names = {}
  for k in pairs(b.log[fold]) do names[#names + 1] = k end
  table.sort(names)
  print(string.format("%-40s %-26s %-20s %s", "left out (" .. fold .. ")", "fit on the rest",
    "its median |error|", "at " .. settings(before)))
  for _, k in ipairs(names) do
    local p = best(fold, k)
    print(string.format("%-40s %-26s %-20s %.1f%%", k, settings(p), string.format("%.1f%%", median_pct(p.rel[fold][k])),
      median_pct(before.rel[fold][k] or {})))
  end
end
