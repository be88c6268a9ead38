-- fathom.passes: what fathom can model, one row per pass mode. Each row says how to
-- load its workload spec, compile a scenario, turn a result into a record, show a
-- record in analyze's summary table, and search strategies for it. Adding a model
-- (serving, say) is adding a row here, not finding the places that branch on it.
--
--   row = { name, load(src) -> workload, compile(node, topo, model, w) -> plan,
--           record(sc, r) -> record, summary = {headers, row(record) -> cells},
--           search = "training"|"inference" (which strategy search), and per-mode facts:
--           pass ("prefill"/"decode"), latency ("ttft_s"/"tpot_s"), context_key (the
--           workload key --seq sets), search_workload (the search's default spec),
--           trace (analyze --trace-file), packet_simulation (routing.packet_simulation),
--           times(time, r) (an inference record's own time fields) }
local core = require("fathom.core")
local errors = require("fathom.errors")
local report = require("fathom.report")
local spec = require("fathom.spec")
local units = require("fathom.units")

local M = {}

local function fits_text(m)
  return m.fits and "yes" or ("NO: " .. tostring(m.overflow_tier))
end

-- The accelerator's headroom: capacity less the footprint, reserve included.
local function free_text(m)
  return m.headroom_bytes and units.bytes(m.headroom_bytes) or "-"
end

local function exposed_total(breakdown)
  local exposed = 0
  for k, v in pairs(breakdown) do
    if k:match("^exposed_") then exposed = exposed + v end
  end
  return exposed
end

local training = {
  name = "training",
  load = function(src) return spec.train(src) end,
  compile = function(node, topo, model, w) return core.train_compile(node, topo, model, w) end,
  record = report.training_record,
  summary = {
    headers = { "step", "total", "MFU", "exp.comm", "bubble", "mem/XPU", "free", "fits" },
    row = function(r)
      local t, m = r.time, r.memory_footprint
      return { units.time(t.step_time_seconds), units.time(t.total_time_seconds), units.percent(t.mfu),
        units.time(exposed_total(t.step_breakdown)), units.time(t.step_breakdown.bubble_seconds),
        units.bytes(m.total_peak_memory_per_chip_bytes), free_text(m), fits_text(m) }
    end,
  },
  search = "training",
  search_workload = "train_specs/search_default.yaml",
  trace = true,
  packet_simulation = true,
}

-- inference(pass, latency, label, context_key, times) -> the row of prefill or decode.
local function inference(pass, latency, label, context_key, times)
  return {
    name = "inference_" .. pass,
    pass = pass,
    load = function(src) return spec.infer(src, pass) end,
    compile = function(node, topo, model, w) return core.infer_compile(node, topo, model, w, pass) end,
    record = report.inference_record,
    times = times,
    summary = {
      headers = { label, "total", "tokens/s", "tok/s/XPU", "mem/XPU", "free", "max batch", "fits" },
      row = function(r)
        local t, m = r.time, r.memory_footprint
        return { units.time(t.time_per_output_token_seconds or t.time_to_first_token_seconds),
          units.time(t.total_time_seconds), string.format("%.0f", t.tokens_per_second),
          string.format("%.0f", t.tokens_per_second_per_xpu), units.bytes(m.total_peak_memory_per_chip_bytes),
          free_text(m), m.max_global_batch_size, fits_text(m) }
      end,
    },
    search = "inference",
    search_workload = "inference_" .. pass .. "_specs/search_default.yaml",
    latency = latency,
    latency_label = label,
    context_key = context_key,
  }
end

M.rows = {
  training,
  inference("prefill", "ttft_s", "TTFT", "seq_length", report.prefill_times),
  inference("decode", "tpot_s", "TPOT", "prefill_seq_len", report.decode_times),
}

M.names = {}
local by_name, by_pass = {}, {}
for i, row in ipairs(M.rows) do
  M.names[i] = row.name
  by_name[row.name] = row
  if row.pass then by_pass[row.pass] = row end
end

-- get(name) -> the row of pass mode `name` (nil: training); an unknown name is an input error.
function M.get(name)
  local row = by_name[name or training.name]
  if not row then
    errors.raise("unknown pass mode '%s' (%s or %s)", tostring(name),
      table.concat(M.names, ", ", 1, #M.names - 1), M.names[#M.names])
  end
  return row
end

-- of_pass(pass) -> the row of an inference pass ("prefill", "decode"), or nil.
function M.of_pass(pass)
  return by_pass[pass]
end

return M
