-- fathom scenario run hoti25: the Hot Interconnects 2025 comparison, one table.
-- Usage: fathom run scenarios/hoti25/compare.lua [--format table|json]
local here = (arg and arg[0] or "scenarios/hoti25/compare.lua"):match("^(.*)/[^/]*$") or "."
local study = dofile(here .. "/study.lua")
local tablefmt = require("fathom.format.table")
local units = require("fathom.units")

local format = (arg[1] == "--format" and arg[2]) or "table"
local res = study.run()
if format == "json" then
  io.stdout:write(require("fathom.format.json").encode(res, true), "\n")
  return
end

local function ms(x) return string.format("%.0f", x * 1e3) end
local rows = {}
for _, row in ipairs(res.rows) do
  for _, name in ipairs({ "alternative", "slices128", "matched", "passage" }) do
    local s = row[name]
    rows[#rows + 1] = { "Config" .. row.config .. " (" .. row.experts .. "e)", study.systems[name].label,
      units.time(s.time_to_train_s), ms(s.step_s), ms(s.compute_s), ms(s.exposed_tp_s), ms(s.exposed_ep_s),
      ms(s.exposed_dp_s + s.exposed_pp_s), ms(s.bubble_s),
      string.format("%.2fx", row.alternative.time_to_train_s / s.time_to_train_s), s.fits and "yes" or "NO" }
  end
end
io.stdout:write("Hot Interconnects 2025: Passage vs electrical scale-up, 32,768 GPUs (step times in ms)\n\n")
io.stdout:write(tablefmt.render({ "model", "system", "time to train", "step", "compute", "exp. TP", "exp. EP a2a",
  "exp. DP+PP", "bubble", "speed-up", "fits" }, rows,
  { "l", "l", "r", "r", "r", "r", "r", "r", "r", "r", "l" }))
local p = study.published
local ep = study.placement(4, 256).ep
io.stdout:write(string.format([[

                                              fathom   published
Config4 speed-up, Passage vs alternative      %5.2fx   %.1fx
  the alternative as 128-GPU slices           %5.2fx
matched radix (512-GPU pods, 32 vs 14.4 Tb/s) %5.2fx   %.1fx
relative time-to-train, Config4:
  copper 14.4 Tb/s, 4 pods x 128              %5.2f    %.2f
  optical 14.4 Tb/s, 512-GPU pod              %5.2f    %.2f
  optical 32 Tb/s, 512-GPU pod                %5.2f    %.2f

What drives it: with 256 fine-grained experts (top-6), each MoE layer's dispatch and
combine all-to-alls move tokens x 6 x d_model bytes while the expert math per token shrinks.
A 512-GPU pod keeps EP 64, TP 8 and PP 8 inside scale-up; a 128-GPU pod must send half of
every all-to-all and a pipeline hop over 1.6 Tb/s scale-out, and its gradient reductions
span more pods. Passage's 32 Tb/s then roughly halves what remains exposed inside the pod.
On whole 144-GPU pods (ranks in order, 227 full pods and 80 GPUs of a 228th) %d of the
%d EP groups of 64 straddle two pods; the worst placed, %g GPUs in one pod and %g in the
next, sends %d of its 63 peers' share across and paces the step.
]], res.config4_speedup, p.config4_speedup, res.config4_speedup_128, res.matched_radix_speedup, p.matched_radix_speedup,
  res.series.copper_4x128, p.series.copper_4x128, res.series.optical_512_14p4, p.series.optical_512_14p4,
  res.series.optical_512_32, p.series.optical_512_32, ep.straddling, ep.groups, ep.levels[1],
  ep.size - ep.levels[1], ep.size - ep.levels[1]))
