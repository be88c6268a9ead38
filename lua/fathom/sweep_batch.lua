-- fathom.sweep_batch: a training sweep to CSV or JSON Lines at C speed (fathom.core.sweep_new,
-- src/core/fth_sweep.c). The base inputs are compiled once; per point the C core
-- reworks the swept fields, evaluates, and writes the row from a column program
-- built here once: each CSV column of the record (fathom.report.training_record,
-- flattened by fathom.format.csv) is a constant, the point's label, or a value of
-- the result. Output is the same bytes as the per-point Lua path (analysis.run, then
-- fathom.format.csv): the header is the union of every record's columns in first-seen
-- order (a first pass in C over the first points finds which groups of columns they have;
-- a group met later widens what was written), and a sample of points is rendered on both
-- paths and compared before anything is written. JSON Lines and YAML (analysis.stream's
-- "jsonl" and "yaml") walk each record's tree as a node program instead (prepare_nodes). With --jobs, contiguous
-- ranges of points go to worker processes and their parts are joined (write_parallel).
--
-- Keys reworked in C: workload_spec.global_batch_size, .micro_batch_size, .seq_length
-- and logical_topology.dimensions.<name, tag or number>.size (integer values). Any
-- other key, another pass mode, a routing distribution (its imbalance is drawn per
-- point) or a `size: auto` logical dimension next to a swept size take the Lua path
-- (`open` says why). Failures, energy and cost (fth_goodput) are computed per point in C.
local core = require("fathom.core")
local csv = require("fathom.format.csv")
local json = require("fathom.format.json")
local yaml = require("fathom.format.yaml")
local util = require("fathom.format.util")
local names = require("fathom.names")
local report = require("fathom.report")
local spec = require("fathom.spec")
local sweep = require("fathom.sweep")

local M = {}

-- FATHOM_SWEEP_BATCH=0 in the environment: always the Lua path (specs compare the two);
-- =1: the C path or exit 2 saying why not (specs and benchmarks that measure it).
M.ENV = "FATHOM_SWEEP_BATCH"
-- Points rendered on both paths before the C path writes (first, last, spread between).
M.CHECK_POINTS = 16
-- Rows per chunk handed to the writer (a row of the full record is about 2.5 KB).
M.CHUNK = 1024

local FIELD = { global_batch_size = 0, micro_batch_size = 1, seq_length = 2 }
local LOGICAL_SIZE = 3

-- fth_sweep.h's enums, by position (keep in step with the header)
local SRC = { text = 0, label = 1, result = 2, bool = 3, name = 4, error = 5 }
local SV = {}
for i, n in ipairs({ "step_time", "total_time", "steps", "tokens_per_step", "tokens_per_s", "mfu", "hfu",
  "achieved_flops", "compute_s", "memory_exposed_s", "recompute_s", "bubble_s", "optimizer_s",
  "offload_exposed_s", "dp_interference_s", "bubble_fraction", "comm", "part", "pass_sum", "ratio", "component", "tier",
  "peak_bytes", "headroom_bytes", "fits", "overflow_tier", "degree", "work", "goodput" }) do
  SV[n] = i - 1
end
local SC = {}
for i, n in ipairs({ "collective", "algorithm", "group_size", "fabric", "fabric_levels", "bytes_per_call",
  "calls_per_step", "bytes_per_step", "raw_time_seconds", "hidden_time_seconds", "exposed_time_seconds" }) do
  SC[n] = i - 1
end
local SD = {}
for i, n in ipairs({ "tp", "tp_moe", "cp", "dp", "dp_moe", "ep", "ep_su", "ep_so", "pp", "layers_per_stage",
  "gpus", "microbatches", "local_experts", "params_total", "params_active" }) do
  SD[n] = i - 1
end
local G = { always = 0, valid = 1, error = 2, overflow = 3, comm = 4 }
G.tier = G.comm + #names.comm_kind

local function index_of(list)
  local t = {}
  for i, n in ipairs(list) do t[n] = i - 1 end
  return t
end
local KIND = index_of(names.comm_kind)
local PART = index_of(names.flop_part)
local TIER = index_of(names.memory_tier)
local COMPONENT = index_of(names.memory_component)
local COMM_LABEL = { tp_communication = "tp", tp_moe_communication = "tp_moe", moe_all_to_all = "ep",
  cp_communication = "cp", pp_communication = "pp", dp_communication = "dp",
  dp_moe_communication = "dp_moe" }
local PASS = { forward = 0, backward = 1 }
local CONFIG_DEGREE = { num_xpus = "gpus", tp_attn = "tp", tp_moe = "tp_moe", cp = "cp", dp_attn = "dp",
  dp_moe = "dp_moe", ep = "ep", ep_su = "ep_su", ep_so = "ep_so", pp = "pp",
  layers_per_stage = "layers_per_stage", microbatches_per_step = "microbatches" }
local CONFIG_WORK = { global_batch_size = 0, micro_batch_size = 1, seq_len = 2 }
local TIME = { total_time = "total_time", total_time_seconds = "total_time", step_time_seconds = "step_time",
  steps = "steps", tokens_per_step = "tokens_per_step", tokens_per_second = "tokens_per_s", mfu = "mfu",
  hfu = "hfu", model_flops_per_second_per_xpu = "achieved_flops" }
local BREAKDOWN = { compute_seconds = "compute_s", memory_exposed_seconds = "memory_exposed_s",
  recompute_seconds = "recompute_s", bubble_seconds = "bubble_s", optimizer_seconds = "optimizer_s",
  exposed_offload_seconds = "offload_exposed_s", dp_interference_seconds = "dp_interference_s" }
local RUN = { expected_time = 0, expected_time_seconds = 0, goodput = 1, expected_failures = 2,
  system_mtbf_seconds = 3, checkpoint_interval_seconds = 4, checkpoint_write_seconds = 5, energy_kwh = 6,
  cost_usd = 7 }
local RATIO = { comm_to_compute = 0, exposed_comm_to_step = 1, memory_to_compute = 2, compute_fraction = 3 }
local FP = names.key("flop_part")
local DETAILS = { attention_forward_bytes = { 0, FP.attention }, attention_backward_bytes = { 1, FP.attention },
  ffn_forward_bytes = { 0, FP.mlp }, ffn_backward_bytes = { 1, FP.mlp },
  unembedding_forward_bytes = { 0, FP.unembedding }, unembedding_backward_bytes = { 1, FP.unembedding } }

-- source(col, moe, part_of) -> {src, group, a, b, c} of a valid record's column, or nil (a constant).
local function source(col, moe, part_of)
  local segs = {}
  for s in col:gmatch("[^%.]+") do segs[#segs + 1] = s end
  local head, n = segs[1], #segs
  local function res(v, b, c, group) return { SRC.result, group or G.valid, SV[v], b or 0, c or 0 } end
  if head == "configuration" and n == 2 then
    if CONFIG_DEGREE[segs[2]] then return res("degree", SD[CONFIG_DEGREE[segs[2]]]) end
    if CONFIG_WORK[segs[2]] then return res("work", CONFIG_WORK[segs[2]]) end
  elseif head == "model_configuration" and n == 2 then
    if segs[2] == "total_params" then return res("degree", SD.params_total) end
    if segs[2] == "active_params" then return res("degree", SD.params_active) end
  elseif head == "expert_placement" and n == 2 then
    if segs[2] == "experts_per_xpu" then return res("degree", SD.local_experts) end
    if segs[2] == "ep_size" then return res("degree", SD.ep) end
    if segs[2] == "complete_expert_sets" and moe then return res("degree", SD.dp_moe) end
  elseif head == "time" and n == 2 and TIME[segs[2]] then
    return res(TIME[segs[2]])
  elseif head == "time" and n == 3 and segs[2] == "run_with_failures" and RUN[segs[3]] then
    return res("goodput", RUN[segs[3]])
  elseif head == "time" and n == 3 and segs[2] == "step_breakdown" then
    if BREAKDOWN[segs[3]] then return res(BREAKDOWN[segs[3]]) end
    local kind = segs[3]:match("^exposed_(.+)_seconds$")
    if kind and KIND[kind] then return res("comm", KIND[kind], SC.exposed_time_seconds) end
  elseif (head == "compute_per_batch_per_xpu" or head == "memory_traffic_per_batch_per_xpu") and n >= 3
    and PASS[segs[2]] then
    local mem = head == "memory_traffic_per_batch_per_xpu" and 2 or 0
    local pass = PASS[segs[2]]
    if n == 3 then
      if segs[3] == "time_seconds" then return res("pass_sum", pass, mem + 1) end
      if segs[3] == (mem > 0 and "bytes" or "flops") then return res("pass_sum", pass, mem) end
    elseif n == 4 and part_of[segs[3]] then
      local p = PART[part_of[segs[3]]]
      if segs[4] == "time_seconds" then return res("part", pass, p * 4 + mem + 1) end
      if segs[4] == (mem > 0 and "bytes" or "flops") then return res("part", pass, p * 4 + mem) end
    end
  elseif head == "communication_per_batch_per_xpu" and n == 3 and COMM_LABEL[segs[2]] and SC[segs[3]] then
    local k, f = KIND[COMM_LABEL[segs[2]]], SC[segs[3]]
    local src = (f == SC.collective or f == SC.algorithm or f == SC.fabric) and SRC.name or SRC.result
    return { src, G.comm + k, SV.comm, k, f }
  elseif head == "ratios" and n == 2 then
    if RATIO[segs[2]] then return res("ratio", RATIO[segs[2]]) end
    if segs[2] == "bubble_fraction" then return res("bubble_fraction") end
  elseif head == "memory_footprint" then
    if n == 3 and segs[2] == "components" then
      local c = segs[3]:match("^(.+)_bytes$")
      if c and COMPONENT[c] then return res("component", COMPONENT[c]) end
    elseif n == 4 and segs[2] == "tiers" and TIER[segs[3]] then
      local t = TIER[segs[3]]
      local f = ({ used_bytes = 0, capacity_bytes = 1, free_bytes = 2, fits = 3 })[segs[4]]
      if f == 3 then return { SRC.bool, G.tier + t, SV.tier, t, 3 } end
      if f then return res("tier", t, f, G.tier + t) end
    elseif n == 2 then
      if segs[2] == "total_peak_memory_per_chip_bytes" then return res("peak_bytes") end
      if segs[2] == "headroom_bytes" then return res("headroom_bytes") end
      if segs[2] == "fits" then return { SRC.bool, G.valid, SV.fits, 0, 0 } end
      if segs[2] == "overflow_tier" then return { SRC.name, G.overflow, SV.overflow_tier, 0, 0 } end
    end
  elseif head == "memory_traffic_details_per_batch" and n == 2 and DETAILS[segs[2]] then
    local d = DETAILS[segs[2]]
    return res("part", d[1], PART[d[2]] * 4 + 2)
  end
  return nil
end
M.source = source

-- keys(axes, docs) -> list of {field, index, axis, values} or nil, reason.
local function keys_of(axes, docs)
  local out = {}
  for a, ax in ipairs(axes) do
    for k, key in ipairs(ax.keys) do
      local segs = {}
      for s in key:gmatch("[^%.]+") do segs[#segs + 1] = s end
      local doc = sweep.aliases[segs[1]] or segs[1]
      local field, index
      if doc == "workload_spec" and #segs == 2 then
        field = FIELD[segs[2]]
      elseif doc == "logical_topology" and #segs == 4 and segs[2] == "dimensions" and segs[4] == "size" then
        local t = sweep.target(docs, key, {})
        for i, d in ipairs(docs.logical_topology.dimensions or {}) do
          if d == t then index = i - 1 end
        end
        for _, d in ipairs(docs.logical_topology.dimensions or {}) do
          if type(d) == "table" and d.size == "auto" then return nil, "a logical dimension is sized auto" end
        end
        field = index and LOGICAL_SIZE
      end
      if not field then return nil, "key " .. key .. " is not reworked in C" end
      for _, v in ipairs(ax.values[k]) do
        if math.type(v) ~= "integer" or v < 1 or v > 2 ^ 22 then
          return nil, "key " .. key .. " has a value that is not an integer in [1, 2^22]"
        end
      end
      out[#out + 1] = { field = field, index = index or 0, axis = a, values = ax.values[k], key = key }
    end
  end
  return out
end

-- full_raw(raw) -> a copy of a core result with every optional part present (each kind of
-- communication sending, every tier, an overflow tier): its record names every column
-- any point can have, in the record's order.
local function full_raw(raw)
  local out = {}
  for k, v in pairs(raw) do out[k] = v end
  out.comm = {}
  for k, c in pairs(raw.comm) do
    local cc = {}
    for f, v in pairs(c) do cc[f] = v end
    if cc.bytes_per_step <= 0 then cc.bytes_per_step = 1 end
    out.comm[k] = cc
  end
  local mem = {}
  for k, v in pairs(raw.memory) do mem[k] = v end
  mem.tiers = {}
  for _, t in ipairs(names.memory_tier) do
    mem.tiers[t] = raw.memory.tiers[t] or { bytes = 0, capacity_bytes = 0, fits = true }
  end
  mem.overflow_tier = mem.overflow_tier or names.memory_tier[1]
  out.memory = mem
  return out
end

-- row_of(rec, header) -> the CSV row fathom.format.csv writes for rec under header.
local function row_of(rec, header)
  local flat, order = {}, {}
  csv.flatten("", rec, flat, order)
  local cells, known = {}, {}
  for i, h in ipairs(header) do
    cells[i] = csv.cell(flat[h])
    known[h] = true
  end
  for _, k in ipairs(order) do
    if not known[k] then return nil, "column " .. k .. " is not in the C program" end
  end
  return table.concat(cells, ",") .. "\n"
end

-- open(a, docs, sweep_doc) -> batch (see write) or nil, reason: the C path for this sweep,
-- checked against the Lua path on a sample of points.
function M.open(a, docs, sweep_doc)
  if os.getenv(M.ENV) == "0" then return nil, M.ENV .. "=0" end
  if (a.pass_mode or "training") ~= "training" then return nil, "pass mode " .. a.pass_mode end
  if not sweep_doc then return nil, "no sweep" end
  local at, count, axes = sweep.at(sweep_doc, docs)
  if count < 2 then return nil, "one point" end
  local keys, why = keys_of(axes, docs)
  if not keys then return nil, why end
  local w = docs.workload_spec
  if type(w.moe_spec_v2) == "table" and (w.moe_spec_v2.routing ~= nil or w.moe_spec_v2.num_colocated_experts ~= nil)
    then
    return nil, "moe_spec_v2.routing or num_colocated_experts"
  end
  local analysis = require("fathom.analysis")
  local eval, point = analysis.evaluator(a, docs)
  -- the compiled inputs: the base documents (every swept field is set at every point)
  local ok, base = pcall(require("fathom.scenario").new, { hardware_lib = spec.hardware_library(docs.hardware_lib),
    physical = docs.physical_topology, logical = docs.logical_topology, workload = docs.workload_spec,
    model = docs.model_spec, pass_mode = a.pass_mode })
  if not ok then return nil, "the base inputs do not load: " .. tostring(base) end
  local axis_len = {}
  for i, ax in ipairs(axes) do axis_len[i] = #ax.values[1] end
  local made, sw = pcall(core.sweep_new, spec.node_table(base.lib, base.physical.node_name),
    spec.topology_table(base.physical, base.logical), base.model, base.workload,
    { axes = axis_len, keys = keys, goodput = report.goodput_def(base) })
  if not made then return nil, "the base inputs do not compile: " .. tostring(sw) end
  -- the first point the core evaluates, on the Lua path: its record gives the columns
  local first = sw:first_valid(count)
  if not first then return nil, "no point is valid" end
  local fok, _, sc, raw = pcall(eval, at(first))
  if not fok then return nil, "point " .. first .. " is valid in C, not on the Lua path" end
  local full = report.record(sc, full_raw(raw))
  analysis.label(full, at(first).label)
  local flat, order = {}, {}
  csv.flatten("", full, flat, order)
  -- the column program: the label, error and valid, then the valid record's columns
  local moe = (sc.model.num_regular_experts or 0) > 1
  local part_of = {}
  for p, l in pairs(report.part_labels_of(sc.model)) do part_of[l] = p end
  local columns, texts, master = {}, {}, {}
  local function text(t)
    texts[#texts + 1] = t
    return #texts
  end
  local key_of = {}
  for i, k in ipairs(keys) do key_of["sweep_point." .. k.key] = i end
  local error_col
  for _, name in ipairs(order) do
    if name:match("^sweep_point%.") then
      if not key_of[name] then return nil, "label column " .. name end
      columns[#columns + 1] = { src = SRC.label, group = G.always, a = key_of[name], b = 0, c = 0, int = 0 }
      master[#master + 1] = name
    end
  end
  columns[#columns + 1] = { src = SRC.error, group = G.error, a = 0, b = 0, c = 0, int = 0 }
  master[#master + 1] = "error"
  error_col = #columns
  columns[#columns + 1] = { src = SRC.text, group = G.error, a = text("false"), b = 0, c = 0, int = 0 }
  master[#master + 1] = "valid"
  for _, name in ipairs(order) do
    if not name:match("^sweep_point%.") then
      local s = source(name, moe, part_of)
      local col
      if s then
        col = { src = s[1], group = s[2], a = s[3], b = s[4], c = s[5],
          int = math.type(flat[name]) == "integer" and 1 or 0 }
      else
        col = { src = SRC.text, group = G.valid, a = text(csv.cell(flat[name])), b = 0, c = 0, int = 0 }
      end
      columns[#columns + 1] = col
      master[#master + 1] = name
    end
  end
  local fabric = {}
  for i, d in ipairs(sc.physical.dimensions) do fabric[i] = d.name or "" end
  sw:program({ columns = columns, texts = texts, fabric = fabric })
  local batch = { sw = sw, count = count, master = master, columns = columns, error_col = error_col,
    at = at, point = point, full = full, label = at(first).label, keys = keys }
  -- an invalid point's error text is the Lua path's (file:line:col, reason); nil if it finds
  -- the point valid, which the binding raises as a disagreement
  batch.err_of = function(i) return point(at(i)).error end
  return batch
end

-- header(batch, fresh, first_invalid) -> column numbers in the order fathom.format.csv's
-- union puts them: each group's columns when a record first has them (an invalid record
-- lists `error` before its label, its keys being sorted).
local function header(batch, fresh, first_invalid)
  local cols = {}
  for e, mask in ipairs(fresh) do
    if e == 1 and first_invalid then cols[#cols + 1] = batch.error_col end
    for i, c in ipairs(batch.columns) do
      if mask & (1 << c.group) ~= 0 and not (e == 1 and first_invalid and i == batch.error_col) then
        cols[#cols + 1] = i
      end
    end
  end
  return cols
end

-- the columns of `groups` (a mask) in the program's order: where a group first met after
-- the header was written goes (fathom.format.csv's union appends a record's new columns)
local function columns_of(batch, groups)
  local out = {}
  for i, c in ipairs(batch.columns) do
    if groups & (1 << c.group) ~= 0 then out[#out + 1] = i end
  end
  return out
end

local function header_text(batch, cols)
  local cells = {}
  for i, c in ipairs(cols) do cells[i] = csv.cell(batch.master[c]) end
  return table.concat(cells, ",") .. "\n"
end

-- prepare(batch, progress) -> header text or nil, reason: the first pass over the first
-- SCAN_AHEAD points (which columns their records have; a group of columns first met later
-- widens the file as it is written, see write) and the check of a sample of points
-- against the Lua path.
M.SCAN_AHEAD = 256
function M.prepare(batch, bar)
  local sw, count = batch.sw, batch.count
  local fresh, seen = {}, 0
  local scanned = math.min(count, M.SCAN_AHEAD)
  sw:reset()
  local got, first_invalid = sw:scan(1, scanned)
  for _, m in ipairs(got) do
    fresh[#fresh + 1] = m
    seen = seen | m
  end
  if bar then bar:update(scanned) end
  local cols = header(batch, fresh, first_invalid)
  sw:set_order(cols)
  batch.order = cols
  -- the sample: both ends and points spread between, each under the header widened by
  -- the groups it has that the first pass did not meet
  local sample, picked = {}, {}
  for j = 0, M.CHECK_POINTS - 1 do
    local i = 1 + (count - 1) * j // (M.CHECK_POINTS - 1)
    if not picked[i] then
      picked[i] = true
      sample[#sample + 1] = i
    end
  end
  for _, i in ipairs(sample) do
    local rec = batch.point(batch.at(i))
    rec.input_error = nil -- each() drops it too: an error object is not written
    local extra, cols_i = sw:mask(i) & ~seen, cols
    if extra ~= 0 then
      cols_i = table.move(cols, 1, #cols, 1, {})
      for _, c in ipairs(columns_of(batch, extra)) do cols_i[#cols_i + 1] = c end
      sw:set_order(cols_i)
    end
    local names_ = {}
    for k, c in ipairs(cols_i) do names_[k] = batch.master[c] end
    local want, why = row_of(rec, names_)
    local got_row = want and sw:rows(i, i, batch.err_of)
    sw:set_order(cols)
    if not want then return nil, "point " .. i .. ": " .. why end
    if got_row ~= want then return nil, "point " .. i .. " differs from the Lua path" end
  end
  return header_text(batch, cols)
end

-- widen(batch, w, groups, headless): a record met groups of columns the header lacks: their
-- columns go at the end of the header, and what was written gets as many empty cells a
-- row (`headless`: a worker's part, which has no header line).
local function widen(batch, w, groups, headless)
  local added = columns_of(batch, groups)
  for _, c in ipairs(added) do batch.order[#batch.order + 1] = c end
  batch.sw:set_order(batch.order)
  batch.sw:see(groups)
  local head = not headless and header_text(batch, batch.order) or nil
  w:rewrite(function(from, to) return batch.sw:widen(from, to, #added, head) end)
end

-- JSON Lines and YAML: a record's text is its tree (fathom.format.json's and .yaml's key
-- order) walked as a node program: an object opens and closes, a leaf is a column of the C
-- program or constant text. A node is written where its presence group is in the point's
-- mask (an object whose columns all belong to one optional group, e.g. one kind of
-- communication, has that group); JSON's commas go between the nodes written, YAML's
-- newline after an object's key once a member is written (" {}" when none is).
local NODE = { open = 0, close = 1, col = 2, const = 3 }

-- How each format spells a node: key(k, depth) the text before a member's value, open(k,
-- depth) an object's opening, close, const(k, v, depth) a constant member; the root's key is
-- root. YAML writes a record as fathom.analysis.stream does: one list item ("-"), members
-- two spaces deeper per level, numbers readable where `humanize` (report.unit_of; the column
-- node carries the unit, C writes it by core.unit_text's rule).
local STYLE = {
  jsonl = {
    root = "",
    key = function(k) return json.encode(tostring(k)) .. ":" end,
    open = function(key) return key .. "{" end,
    close = "}",
    const = function(key, v) return key .. json.encode(v) end,
  },
  yaml = {
    root = "-",
    key = function(k, depth) return string.rep("  ", depth) .. yaml.scalar(tostring(k)) .. ":" end,
    open = function(key) return key end,
    close = "",
    const = function(_, v, depth, k) return yaml.entry(k, v, depth) end,
  },
}

-- tree(value, col_of, columns, default, format, humanize) -> nodes or nil, reason: the node
-- program of a record.
local function tree(value, col_of, columns, default, format, humanize)
  local style, nodes = STYLE[format], {}
  local function walk(v, path, key, depth, k, times)
    if type(v) == "table" and not util.is_array(v) then
      local at = #nodes + 1
      nodes[at] = { t = NODE.open, text = style.open(key), group = default }
      local groups, n, only = {}, 0, nil
      for _, sk in ipairs(util.keys(v)) do
        local name = path == "" and tostring(sk) or (path .. "." .. tostring(sk))
        local sub, why = walk(v[sk], name, style.key(sk, depth + 1), depth + 1, sk, report.holds_times(sk))
        if not sub then return nil, why end
        for g in pairs(sub) do
          if not groups[g] then n, only = n + 1, g end
          groups[g] = true
        end
      end
      nodes[#nodes + 1] = { t = NODE.close, text = style.close, group = default }
      if n == 1 and only ~= G.always then nodes[at].group = only end
      return groups
    end
    local ci = col_of[path]
    if ci and columns[ci].src ~= SRC.text then
      local unit = humanize and columns[ci].src == SRC.result and report.unit_of(k, times) or nil
      nodes[#nodes + 1] = { t = NODE.col, text = key, col = ci, group = columns[ci].group, unit = unit }
      return { [columns[ci].group] = true }
    end
    for p in pairs(col_of) do -- a constant list holds no column of the program
      if p:sub(1, #path + 1) == path .. "." and columns[col_of[p]].src ~= SRC.text then
        return nil, "column " .. p .. " is inside a list"
      end
    end
    if humanize then v = report.humanize({ [k] = v }, times)[k] end
    nodes[#nodes + 1] = { t = NODE.const, text = style.const(key, v, depth, k), group = default }
    return {}
  end
  local ok, why = walk(value, "", style.root, 0, nil, false)
  if not ok then return nil, why end
  return nodes
end

-- encode(batch, rec) -> the Lua path's text of one record in the batch's format
local function encode(batch, rec)
  if batch.format == "jsonl" then return json.encode(rec) .. "\n" end
  return yaml.encode({ batch.humanize and report.humanize(rec) or rec })
end

-- prepare_nodes(batch, format [, humanize]) -> "" (JSON Lines and YAML have no header) or nil,
-- reason: the node programs of a valid and an invalid record for `format` ("jsonl" or
-- "yaml"; `humanize`: readable units in YAML, as analyze writes without --raw-output), and
-- the check of a sample of points against the Lua path.
function M.prepare_nodes(batch, format, humanize)
  local sw, count = batch.sw, batch.count
  batch.format, batch.humanize = format, humanize and format == "yaml"
  local col_of = {}
  for i, n in ipairs(batch.master) do col_of[n] = i end
  local valid, why = tree(batch.full, col_of, batch.columns, G.valid, format, batch.humanize)
  if not valid then return nil, why end
  local bad = { error = "", valid = false }
  require("fathom.analysis").label(bad, batch.label)
  local invalid
  invalid, why = tree(bad, col_of, batch.columns, G.error, format, batch.humanize)
  if not invalid then return nil, why end
  if format == "jsonl" then
    sw:json_program({ valid = valid, invalid = invalid })
  else
    for _, k in ipairs(batch.keys) do -- C writes a label as its integer's digits
      if batch.humanize and report.unit_of(k.key) then return nil, "key " .. k.key .. " is written in units" end
    end
    sw:yaml_program({ valid = valid, invalid = invalid })
  end
  for j = 0, M.CHECK_POINTS - 1 do
    local i = 1 + (count - 1) * j // (M.CHECK_POINTS - 1)
    local rec = batch.point(batch.at(i))
    rec.input_error = nil -- each() drops it too: an error object is not written
    if sw:lines(i, i, batch.err_of, format) ~= encode(batch, rec) then
      return nil, "point " .. i .. " differs from the Lua path"
    end
  end
  return ""
end

-- write(batch, w, bar, format [, first, last, part]): every row (format "csv"), line
-- ("jsonl") or YAML list item ("yaml") of points first..last (default: all), in chunks, to
-- writer w; a CSV record with columns the header lacks widens what was written (widen).
-- Returns the groups met so, in order. `part`: w has no header line (a worker's share).
function M.write(batch, w, bar, format, first, last, part)
  local sw = batch.sw
  local write = format == "csv" and sw.write_rows or function(s, f, l, err_of, file)
    return s:write_lines(f, l, err_of, file, format)
  end
  local f, met = first or 1, {}
  last = last or batch.count
  while f <= last do
    local l = math.min(last, f + M.CHUNK - 1)
    local stop, groups
    w:write_with(function(file)
      local ok, at, g = write(sw, f, l, batch.err_of, file)
      if ok == false then
        stop, groups = at, g
        return true
      end
      return ok, at
    end)
    if stop then
      widen(batch, w, groups, part)
      met[#met + 1] = groups
      f = stop
    else
      f = l + 1
    end
    if bar then bar:update(f - 1) end
  end
  return met
end

-- Points per process below which a C sweep stays in fewer processes (one for a small sweep):
-- a worker's start and its part's copy cost about what 10,000 points do.
M.MIN_POINTS_PER_PROCESS = 10000

-- write_parallel(batch, path, head, format, procs): the rows or lines written by `procs` processes,
-- each evaluating one contiguous range of points: the first range straight into the file
-- at `path` (this process: parallel.shares runs share 0 here), the others each into a part
-- file; the parts are appended in order, the same bytes as one process: a group of CSV
-- columns a later range met first widens the file the same way, in point order, and a
-- part's cells are rearranged to the joined header's columns (sweep:widen, sweep:reproject;
-- a part that needs neither is copied in the kernel). `head`: the header (CSV) or ""
-- (JSON Lines). The file is written whole once every range is done, or not at all.
-- Returns {range_cpu = {CPU seconds of each range}, join_cpu = CPU seconds of the join}.
function M.write_parallel(batch, path, head, format, procs)
  local output = require("fathom.output")
  local parallel = require("fathom.parallel")
  local pid, cpu = require("fathom.core").process.pid, require("fathom.core").process.cpu
  local count, sw, csv_ = batch.count, batch.sw, format == "csv"
  local initial = table.move(batch.order or {}, 1, #(batch.order or {}), 1, {})
  local parts = {}
  for k = 2, procs do parts[k] = output.temp_file("fathom-sweep-part") end
  local w = output.open(path) -- opened before the workers start, written by this process only
  local here = pid()
  local function discard_all()
    w:abort()
    for k = 2, procs do output.discard(parts[k]) end
  end
  local ok, met = pcall(parallel.shares, procs, function(share, n)
    local lo, hi = count * share // n + 1, count * (share + 1) // n
    batch.order = table.move(initial, 1, #initial, 1, {})
    if csv_ then sw:set_order(batch.order) end
    local c0 = cpu()
    if share == 0 and pid() == here then
      w:write(head)
      return { M.write(batch, w, nil, format, lo, hi, false), cpu() - c0 }
    end
    local pw = output.open(parts[share + 1])
    local wok, groups = pcall(M.write, batch, pw, nil, format, lo, hi, true)
    if not wok then
      pw:abort()
      error(groups, 0)
    end
    pw:close()
    return { groups, cpu() - c0 }
  end)
  if not ok then
    discard_all()
    error(met, 0)
  end
  -- what each range cost (CPU seconds, its own process) and what joining them costs: on an
  -- idle machine the wall time is about the busiest range plus the join (sweep_bench)
  local stats = { range_cpu = {} }
  for k, m in ipairs(met) do
    met[k], stats.range_cpu[k] = m[1], m[2]
  end
  local j0 = cpu()
  -- the joined header: the groups each range met, in point order (ranges are in point order)
  local final, seen = table.move(initial, 1, #initial, 1, {}), 0
  for _, c in ipairs(initial) do seen = seen | (1 << batch.columns[c].group) end
  local orders = {}
  for k, groups in ipairs(met) do
    local local_order = table.move(initial, 1, #initial, 1, {})
    for _, g in ipairs(groups) do
      for _, c in ipairs(columns_of(batch, g)) do local_order[#local_order + 1] = c end
      local new = g & ~seen
      for _, c in ipairs(columns_of(batch, new)) do final[#final + 1] = c end
      seen = seen | new
    end
    orders[k] = local_order
  end
  ok, met = pcall(function()
    if csv_ and #final > #orders[1] then -- the first range's columns are the joined header's first
      local text = header_text(batch, final)
      w:rewrite(function(from, to) return sw:widen(from, to, #final - #orders[1], text) end)
    end
    for k = 2, procs do
      -- cell j of a joined row is cell pos[final[j]] of the part's row
      local pos, map, widening = {}, {}, true
      for i, c in ipairs(orders[k]) do pos[c] = i - 1 end
      for j, c in ipairs(final) do
        map[j] = pos[c] or -1
        if map[j] ~= (j <= #orders[k] and j - 1 or -1) then widening = false end
      end
      w:write_with(function(file)
        local from = assert(io.open(parts[k], "rb"))
        local wok, werr
        if not csv_ or widening then
          wok, werr = sw:widen(from, file, csv_ and #final - #orders[k] or 0)
        else
          wok, werr = sw:reproject(from, file, map)
        end
        from:close()
        return wok, werr
      end)
      output.discard(parts[k])
    end
  end)
  if not ok then
    discard_all()
    error(met, 0)
  end
  w:close()
  stats.join_cpu = cpu() - j0
  return stats
end

return M
