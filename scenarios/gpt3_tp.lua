-- GPT-3 175B on 1,024 A100s: step time and memory as tensor parallelism grows (a script example).
-- Usage: fathom scenario run gpt3_tp
local fathom = require("fathom")
local tablefmt = require("fathom.format.table")
local units = require("fathom.units")

local rows = {}
for _, tp in ipairs({ 1, 2, 4, 8 }) do
  local sc = fathom.scenario({
    hardware = "hardware/hardware_library.yaml",
    physical = "topology_zoo/physical/dgx_a100_1024.yaml",
    logical = "topology_zoo/logical/tp8_pp8.yaml",
    model = "models/gpt3_175b.yaml",
    workload = "train_specs/gpt3_175b.yaml",
  })
  -- change the loaded logical topology in place: TP on the NVLink dimension; DP_Attn there is `auto`
  for _, d in ipairs(sc.logical.dimensions) do
    if d.logical_tag == "TP_Attn" then d.size = tp end
    if d.logical_tag == "DP_Attn" and d.phys_dim == 1 then d.size = 8 // tp end
  end
  local ok, r = pcall(sc.evaluate, sc)
  if not ok and not fathom.errors.is_input(r) then error(r, 0) end -- a bug, not a refusal
  if ok then
    rows[#rows + 1] = { tp, units.time(r.step_time_s), units.percent(r.mfu), units.time(r.comm.tp.exposed_s),
      units.time(r.bubble_s), units.bytes(r.memory.peak_bytes), r.memory.fits and "yes" or "no" }
  else
    local why = r.path and (r.path .. ": " .. r.reason) or tostring(r)
    rows[#rows + 1] = { tp, "-", "-", "-", "-", "-", "invalid: " .. why }
  end
end
io.stdout:write(tablefmt.render({ "TP", "step", "MFU", "exposed TP", "bubble", "memory/GPU", "fits" }, rows))
