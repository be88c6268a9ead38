-- fathom.format.trace: one training step of the busiest pipeline stage as a
-- Chrome / Perfetto trace (chrome://tracing, ui.perfetto.dev): forward and
-- backward of each micro-batch in schedule order, the pipeline bubble, exposed
-- layer communication inside each pass, the gradient reduction (hidden part
-- under the last backward, exposed part after it) and the optimizer step.
-- Every duration comes from the core's result; this module only lays them out.
local json = require("fathom.format.json")
local names = require("fathom.names")

local M = {}

local COMM = names.key("comm_kind")
local PP = names.key("pp_schedule")

local function us(s) return s * 1e6 end

-- Largest trace written (events, about 150 bytes each): refused above, not truncated.
M.MAX_EVENTS = 1000000

-- events(r, pp, schedule) -> list of trace events for result `r` (raw core result).
function M.events(r, pp, schedule)
  local ev = {}
  local function add(name, cat, tid, start_s, dur_s, args)
    if dur_s > 0 then
      ev[#ev + 1] = { name = name, cat = cat, ph = "X", pid = 1, tid = tid, ts = us(start_s), dur = us(dur_s),
        args = args }
    end
  end
  local m = math.tointeger(r.microbatches) or math.floor(r.microbatches)
  if 6 * m > M.MAX_EVENTS then
    require("fathom.errors").raise("trace: %d micro-batches make about %d events, over the limit of %d " ..
      "(about 150 MB; trace a smaller global batch or a larger micro-batch)", m, 6 * m, M.MAX_EVENTS)
  end
  local tf, tb = r.fwd_s, r.bwd_s
  local layer_exposed_f, layer_exposed_b = 0, 0
  for _, k in ipairs({ COMM.tp, COMM.tp_moe, COMM.ep, COMM.cp }) do
    local c = r.comm[k]
    if c.raw_s > 0 then
      -- the core reports exposure per step; drawn 1 : 2 between forward and backward,
      -- as their collectives are (backward repeats each forward collective's data twice)
      layer_exposed_f = layer_exposed_f + c.exposed_s / (3 * m)
      layer_exposed_b = layer_exposed_b + 2 * c.exposed_s / (3 * m)
    end
  end
  -- order of passes on the first stage: 1F1B warms up with min(pp - 1, m) forwards
  local order = {}
  if schedule == PP.GPIPE or pp <= 1 then
    for i = 1, m do order[#order + 1] = { "F", i } end
    for i = 1, m do order[#order + 1] = { "B", i } end
  else
    local warm = math.min(pp - 1, m)
    local f, b = 0, 0
    for _ = 1, warm do
      f = f + 1
      order[#order + 1] = { "F", f }
    end
    while b < m do
      if f < m then
        f = f + 1
        order[#order + 1] = { "F", f }
      end
      b = b + 1
      order[#order + 1] = { "B", b }
    end
  end
  local t = 0
  -- the bubble: idle while the pipeline fills and drains, drawn at the step's start
  add("pipeline bubble", "bubble", 1, t, r.bubble_s, { seconds = r.bubble_s })
  t = t + r.bubble_s
  local pp_hop = r.comm.pp.exposed_s / #order -- exposed sends, spread over the passes
  local last_b_start = t
  for _, o in ipairs(order) do
    local is_f = o[1] == "F"
    local dur = is_f and tf or tb
    if not is_f then last_b_start = t end
    add((is_f and "forward " or "backward ") .. o[2], is_f and "forward" or "backward", 1, t, dur,
      { microbatch = o[2] })
    add("exposed TP/EP/CP", "comm", 2, t + dur - (is_f and layer_exposed_f or layer_exposed_b),
      is_f and layer_exposed_f or layer_exposed_b, {})
    t = t + dur
    add("PP send", "comm", 3, t, pp_hop, {})
    t = t + pp_hop
  end
  -- gradient reduction: hidden under the last backward, the rest exposed after it
  local dp_raw = r.comm.dp.raw_s + r.comm.dp_moe.raw_s
  local dp_exposed = r.comm.dp.exposed_s + r.comm.dp_moe.exposed_s
  add("DP gradient reduction (hidden)", "comm", 4, last_b_start, dp_raw - dp_exposed, {})
  add("DP gradient reduction (exposed)", "comm", 4, t, dp_exposed, {})
  t = t + dp_exposed
  add("activation offload (exposed)", "offload", 4, t, r.offload_exposed_s or 0, {})
  t = t + (r.offload_exposed_s or 0)
  add("optimizer step", "optimizer", 1, t, r.optimizer_s, {})
  t = t + r.optimizer_s
  ev[#ev + 1] = { name = "thread_name", ph = "M", pid = 1, tid = 1, args = { name = "compute" } }
  ev[#ev + 1] = { name = "thread_name", ph = "M", pid = 1, tid = 2, args = { name = "layer collectives (exposed)" } }
  ev[#ev + 1] = { name = "thread_name", ph = "M", pid = 1, tid = 3, args = { name = "pipeline sends (exposed)" } }
  ev[#ev + 1] = { name = "thread_name", ph = "M", pid = 1, tid = 4, args = { name = "data parallel" } }
  ev[#ev + 1] = { name = "process_name", ph = "M", pid = 1, args = { name = "busiest pipeline stage, one step" } }
  return ev, t
end

-- encode(r, pp, schedule) -> Chrome trace JSON text.
function M.encode(r, pp, schedule)
  local ev = M.events(r, pp, schedule)
  return json.encode({ traceEvents = ev, displayTimeUnit = "ms" }) .. "\n"
end

return M
