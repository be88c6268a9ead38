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

-- check_size(m): refuse a timeline of m micro-batches over MAX_EVENTS (about 6 events each),
-- before anything is laid out.
function M.check_size(m)
  if 6 * m > M.MAX_EVENTS then
    require("fathom.errors").raise("trace: %d micro-batches make about %d events, over the limit of %d " ..
      "(about 150 MB; trace a smaller global batch or a larger micro-batch)", m, 6 * m, M.MAX_EVENTS)
  end
end

-- stage_order(tr, s) -> the passes of stage s in its schedule's order, from the core's trace
-- (fathom.core.trace_compile; tr:pass, the one owner of every schedule's order): a list of
-- {forward = bool, mb = 0-based micro-batch, chunk = model chunk}.
function M.stage_order(tr, s)
  local out = {}
  for k = 0, tr:info().stage_passes - 1 do
    local fwd, mb, c = tr:pass(s, k)
    out[#out + 1] = { forward = fwd, mb = mb, chunk = c }
  end
  return out
end

-- events(r, order, chunks) -> list of trace events for result `r` (raw core result): the
-- passes of `order` (stage_order of the first stage), each a model chunk's share (1 / chunks)
-- of the stage's forward or backward.
function M.events(r, order, chunks)
  local ev = {}
  local function add(name, cat, tid, start_s, dur_s, args)
    if dur_s > 0 then
      ev[#ev + 1] = { name = name, cat = cat, ph = "X", pid = 1, tid = tid, ts = us(start_s), dur = us(dur_s),
        args = args }
    end
  end
  local m = math.tointeger(r.microbatches) or math.floor(r.microbatches)
  M.check_size(m)
  chunks = chunks or 1
  local tf, tb = r.fwd_s / chunks, r.bwd_s / chunks
  local layer_exposed_f, layer_exposed_b = 0, 0
  for _, k in ipairs({ COMM.tp, COMM.tp_moe, COMM.ep, COMM.cp }) do
    local c = r.comm[k]
    if c.raw_s > 0 then
      -- the core reports exposure per step; drawn 1 : 2 between forward and backward,
      -- as their collectives are (backward repeats each forward collective's data twice)
      layer_exposed_f = layer_exposed_f + c.exposed_s / (3 * m * chunks)
      layer_exposed_b = layer_exposed_b + 2 * c.exposed_s / (3 * m * chunks)
    end
  end
  local t = 0
  -- the bubble: idle while the pipeline fills and drains, drawn at the step's start
  add("pipeline bubble", "bubble", 1, t, r.bubble_s, { seconds = r.bubble_s })
  t = t + r.bubble_s
  local pp_hop = r.comm.pp.exposed_s / #order -- exposed sends, spread over the passes
  for _, o in ipairs(order) do
    local is_f = o.forward
    local dur = is_f and tf or tb
    local label = chunks > 1 and string.format("%d.%d", o.mb + 1, o.chunk) or tostring(o.mb + 1)
    add((is_f and "forward " or "backward ") .. label, is_f and "forward" or "backward", 1, t, dur,
      { microbatch = o.mb + 1, chunk = o.chunk })
    add("exposed TP/EP/CP", "comm", 2, t + dur - (is_f and layer_exposed_f or layer_exposed_b),
      is_f and layer_exposed_f or layer_exposed_b, {})
    t = t + dur
    add("PP send", "comm", 3, t, pp_hop, {})
    t = t + pp_hop
  end
  -- gradient reduction: hidden under the backward (an interleaved schedule's chunks
  -- under more than the last one), ending where the compute does; the rest exposed after it
  local dp_raw = r.comm.dp.raw_s + r.comm.dp_moe.raw_s
  local dp_exposed = r.comm.dp.exposed_s + r.comm.dp_moe.exposed_s
  local dp_hidden = dp_raw - dp_exposed
  add("DP gradient reduction (hidden)", "comm", 4, math.max(0, t - dp_hidden), dp_hidden, {})
  add("DP gradient reduction (exposed)", "comm", 4, t, dp_exposed, {})
  t = t + dp_exposed
  -- the compute the hidden reduction displaced (fth_train.h dp_interference_s), charged
  -- on the compute track where the step ends
  add("DP interference", "compute", 1, t, r.dp_interference_s or 0, {})
  t = t + (r.dp_interference_s or 0)
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

-- Tracks of the whole-pipeline timeline: each stage is a process, its compute a thread and
-- each kind of communication one thread beside it.
local KIND_TRACKS = {
  { COMM.tp, "TP collectives" }, { COMM.tp_moe, "TP_MoE collectives" }, { COMM.ep, "EP dispatch / combine" },
  { COMM.cp, "CP K/V exchange" }, { COMM.pp, "PP send / recv" }, { COMM.dp, "DP gradients / weights" },
  { COMM.dp_moe, "DP_MoE gradients / weights" },
}
local TID = {}
for i, k in ipairs(KIND_TRACKS) do TID[k[1]] = i + 1 end

-- pipeline_events(tr, r) -> events, end_s: one training step of every pipeline stage, laid out
-- from the core's trace `tr` (fathom.core.trace_compile): each stage's passes in its schedule's
-- order (tr:pass: micro-batch and model chunk), each starting when the stage is free and its input
-- has arrived (the pass it receives from, tr:hop: the previous virtual stage's forward, the next
-- one's backward, plus one hand-off, info.pp_hop_s), so the bubble
-- falls where the schedule puts it and is drawn there; inside each pass, every kind of layer
-- collective on its own track, hidden part from the pass's start and exposed part at its end
-- (tr:stage_time); the PP hand-offs after each pass; the DP traffic of the step (record `r`):
-- hidden under each stage's last backward, the exposed rest after it; then the optimizer
-- (inference: the iteration's forwards only).
function M.pipeline_events(tr, r)
  local info = tr:info()
  local S, hop, np, C = info.stages, info.pp_hop_s, info.stage_passes, info.chunks
  if 8 * S * np > M.MAX_EVENTS then
    require("fathom.errors").raise("trace: %d stages x %d passes make about %d events, over the limit " ..
      "of %d", S, np, 8 * S * np, M.MAX_EVENTS)
  end
  local ev = {}
  local function add(name, cat, pid, tid, start_s, dur_s, args)
    if dur_s > 0 then
      ev[#ev + 1] = { name = name, cat = cat, ph = "X", pid = pid, tid = tid, ts = us(start_s), dur = us(dur_s),
        args = args }
    end
  end
  -- done[forward][stage x C + chunk][mb]: when that pass ended
  local times, nextk, free, done = {}, {}, {}, { [true] = {}, [false] = {} }
  for s = 0, S - 1 do
    times[s] = {}
    for c = 0, C - 1 do
      times[s][c] = tr:stage_time(s, c)
      done[true][s * C + c], done[false][s * C + c] = {}, {}
    end
    nextk[s], free[s] = 0, 0
  end
  local left = S * np
  while left > 0 do
    local progress = false
    for s = 0, S - 1 do
      while nextk[s] < np do
        local fwd, mb, c = tr:pass(s, nextk[s])
        local from, from_c = tr:hop(s, fwd, mb, c, false)
        local ready = 0
        if from then
          local t = done[fwd][from * C + from_c][mb]
          if not t then break end
          ready = t + hop
        end
        local start = math.max(free[s], ready)
        add("bubble", "bubble", s + 1, 1, free[s], start - free[s], { seconds = start - free[s] })
        local st = times[s][c]
        local dur = fwd and st.forward_s or st.backward_s
        local dir = fwd and "forward" or "backward"
        local label = C > 1 and string.format("%s %d.%d", dir, mb, c) or string.format("%s %d", dir, mb)
        add(label, dir, s + 1, 1, start, dur,
          { microbatch = mb, chunk = c, kernels_s = fwd and st.forward_kernel_s or st.backward_kernel_s })
        for i, k in ipairs(KIND_TRACKS) do
          local cm = st.comm[k[1]]
          local raw, exposed = cm[dir .. "_raw_s"], cm[dir .. "_exposed_s"]
          add("hidden", "comm", s + 1, i + 1, start, raw - exposed, { kind = k[1] })
          add("exposed", "comm", s + 1, i + 1, start + dur - exposed, exposed, { kind = k[1] })
        end
        local to, to_c = tr:hop(s, fwd, mb, c, true)
        if to then
          add(string.format("%s %d to stage %d%s", fwd and "send" or "send grad", mb, to,
            C > 1 and string.format(" chunk %d", to_c) or ""), "comm", s + 1, TID[COMM.pp], start + dur, hop,
            { microbatch = mb })
        end
        done[fwd][s * C + c][mb] = start + dur
        free[s] = start + dur
        nextk[s] = nextk[s] + 1
        left = left - 1
        progress = true
      end
    end
    if not progress then error("trace: the schedule deadlocks (internal)") end
  end
  local t_end = 0
  local dp_exposed = info.training and r.comm.dp.exposed_s + r.comm.dp_moe.exposed_s or 0
  -- the compute the hidden reductions displaced (fth_train.h dp_interference_s), after them
  local interference = info.training and r.dp_interference_s or 0
  for s = 0, S - 1 do
    if info.training then -- inference has no gradients and no optimizer
      for _, k in ipairs({ COMM.dp, COMM.dp_moe }) do
        local c = r.comm[k]
        local hidden = c.raw_s - c.exposed_s -- ends where the stage's compute does
        add("hidden", "comm", s + 1, TID[k], math.max(0, free[s] - hidden), hidden, { kind = k })
        add("exposed", "comm", s + 1, TID[k], free[s], c.exposed_s, { kind = k })
      end
      add("DP interference", "compute", s + 1, 1, free[s] + dp_exposed, interference, {})
      add("optimizer step", "optimizer", s + 1, 1, free[s] + dp_exposed + interference, r.optimizer_s, {})
    end
    t_end = math.max(t_end, free[s] + dp_exposed + interference + (info.training and r.optimizer_s or 0))
    -- DualPipe: the rank of stage s also runs stage S - 1 - s of the other direction
    local pname = (info.schedule == PP.DUALPIPE and C == 2) and string.format("stage %d (and %d)", s, S - 1 - s)
      or string.format("stage %d", s)
    ev[#ev + 1] = { name = "process_name", ph = "M", pid = s + 1, args = { name = pname } }
    ev[#ev + 1] = { name = "process_sort_index", ph = "M", pid = s + 1, args = { sort_index = s } }
    ev[#ev + 1] = { name = "thread_name", ph = "M", pid = s + 1, tid = 1, args = { name = "compute" } }
    for i, k in ipairs(KIND_TRACKS) do
      ev[#ev + 1] = { name = "thread_name", ph = "M", pid = s + 1, tid = i + 1, args = { name = k[2] } }
    end
  end
  return ev, t_end
end

-- encode_pipeline(tr, r) -> Chrome trace JSON text of every stage (pipeline_events).
function M.encode_pipeline(tr, r)
  local ev, t_end = M.pipeline_events(tr, r)
  -- the model's own figure for the same span: a training step, one decode step (time per
  -- output token) or the prefill of every micro-batch
  local model_s = r.step_time_s or ((r.tpot_s or 0) > 0 and r.tpot_s) or r.time_s
  return json.encode({ traceEvents = ev, displayTimeUnit = "ms",
    metadata = { step_s = t_end, step_model_step_s = model_s } }) .. "\n"
end

-- encode(r, order, chunks) -> Chrome trace JSON text (events).
function M.encode(r, order, chunks)
  local ev = M.events(r, order, chunks)
  return json.encode({ traceEvents = ev, displayTimeUnit = "ms" }) .. "\n"
end

return M
