-- fathom.serve: request-level serving studies over the C simulator (fth_serve).
--
--   local serve = require("fathom.serve")
--   local r = serve.run{ model = "llama3.1_70b", hardware = "H100_SXM", tp = 4, replicas = 2,
--     rate_per_s = 4, input = "lognormal:mean=512,sigma=0.5", output = 128,
--     policy = "chunked", slo_ttft_s = 1, slo_tpot_s = 0.05 }
--   print(r.ttft_s.p99, r.throughput.output_tokens_per_s_per_gpu, r.goodput.slo_attainment)
--
-- The engine is one replica's decode plan (core.infer_compile) for the model on TP x PP
-- GPUs of the node (EP over them for MoE models), built as `fathom search` builds its
-- inference deployments; every engine iteration is costed by the core's mixed-batch
-- iteration (prefill chunks and decodes, each with its own context), and the KV cache
-- holds what the memory model leaves after weights, transient and reserve.
local analysis = require("fathom.analysis")
local core = require("fathom.core")
local errors = require("fathom.errors")
local names = require("fathom.names")
local passes = require("fathom.passes")
local search = require("fathom.search")
local spec = require("fathom.spec")

local M = {}

local LEN = names.key("serve_length")

-- Parameters each length distribution takes (the core's fth_serve_dist fields).
local dist_params = {
  [LEN.fixed] = { "mean" },
  [LEN.uniform] = { "min", "max" },
  [LEN.normal] = { "mean", "sigma", "min", "max" },
  [LEN.lognormal] = { "mean", "sigma", "min", "max" },
  [LEN.zipf] = { "s", "min", "max" },
}

-- parse_length(text, what) -> distribution table {kind =, mean =, ...}: a number of
-- tokens ("512") or "KIND:key=value,..." ("lognormal:mean=512,sigma=0.5",
-- "uniform:min=16,max=1024", "zipf:s=1.2,min=16,max=4096"). `what` names the input in
-- errors ("--input-tokens").
function M.parse_length(text, what)
  if type(text) == "table" then return text end
  local n = tonumber(text)
  if n then return { kind = LEN.fixed, mean = n } end
  local kind, rest = tostring(text):match("^([%a_]+):(.*)$")
  if not kind then kind, rest = tostring(text), "" end
  local params = dist_params[kind]
  if not params then
    errors.raise("%s: expected a number of tokens or KIND:key=value,... with KIND one of %s, got '%s'%s", what,
      table.concat(names.serve_length, ", "), tostring(text), errors.suggest(kind, names.serve_length))
  end
  local out = { kind = kind }
  for item in rest:gmatch("[^,]+") do
    local k, v = item:match("^%s*([%a_]+)%s*=%s*(%S+)%s*$")
    local ok = false
    for _, p in ipairs(params) do if p == k then ok = true end end
    if not k or not ok then
      errors.raise("%s: %s takes %s, got '%s'%s", what, kind, table.concat(params, "=, ") .. "=", item,
        k and errors.suggest(k, params) or "")
    end
    local num = tonumber(v)
    if not num or num ~= num or num == math.huge or num == -math.huge then
      errors.raise("%s: %s=%s: expected a finite number", what, k, v)
    end
    out[k] = num
  end
  for _, p in ipairs(params) do
    local needed = p ~= "min" and (p ~= "max" or kind == LEN.uniform or kind == LEN.zipf)
    if needed and out[p] == nil then
      errors.raise("%s: %s needs %s= (%s)", what, kind, p, table.concat(params, "=, ") .. "=")
    end
  end
  return out
end

-- describe_length(dist) -> short text of a distribution table ("512", "lognormal(mean 512, sigma 0.5)").
function M.describe_length(d)
  if d.kind == LEN.fixed then return string.format("%g", d.mean) end
  local parts = {}
  for _, p in ipairs(dist_params[d.kind] or {}) do
    if d[p] ~= nil then parts[#parts + 1] = string.format("%s %g", p, d[p]) end
  end
  return string.format("%s(%s)", d.kind, table.concat(parts, ", "))
end

-- Column names a replayed trace may use (lower-cased), per field: fathom's own, Vidur's
-- (arrived_at, num_prefill_tokens, num_decode_tokens) and the usual others.
local trace_columns = {
  arrival_s = { "arrival_s", "arrival_time", "arrived_at", "timestamp", "time_s" },
  input = { "input_tokens", "input", "prompt_tokens", "num_prefill_tokens", "context_tokens" },
  output = { "output_tokens", "output", "completion_tokens", "num_decode_tokens", "generated_tokens" },
}
local trace_fields = { "arrival_s", "input", "output" }

local function column_of(name)
  name = name:lower():gsub("^%s+", ""):gsub("%s+$", "")
  for _, f in ipairs(trace_fields) do
    for _, alias in ipairs(trace_columns[f]) do if alias == name then return f end end
  end
  return nil
end

-- load_trace(path) -> {arrival_s = {...}, input = {...}, output = {...}} from a CSV file with
-- a header row or a JSON-lines file (one object per line), by extension (.jsonl/.json:
-- JSON lines). Arrival times are seconds, shifted so the first row arrives at 0; rows must
-- be in arrival order. A bad row is refused as "file:line:col: reason".
function M.load_trace(path)
  local f, err = io.open(path, "rb")
  if not f then errors.raise("cannot read trace '%s': %s", path, tostring(err)) end
  local text = f:read("a")
  f:close()
  local cols = { arrival_s = {}, input = {}, output = {} }
  local jsonl = path:match("%.jsonl?$") ~= nil
  local header, lineno = nil, 0
  local function fail(line, col, fmt, ...)
    errors.raise("%s:%d:%d: " .. fmt, path, line, col, ...)
  end
  local function add(line, values, cols_at)
    for _, fld in ipairs(trace_fields) do
      local v = values[fld]
      local n = tonumber(v)
      if n == nil or n ~= n or n == math.huge or n == -math.huge then
        fail(line, cols_at[fld] or 1, "%s: expected a number, got %s", fld,
          v == nil and "nothing" or ("'" .. tostring(v) .. "'"))
      end
      if fld ~= "arrival_s" and (math.tointeger(n) == nil or n < 1 or n > 2 ^ 30) then
        fail(line, cols_at[fld], "%s: expected a token count, an integer in [1, 2^30], got %s", fld, tostring(v))
      end
      local list = cols[fld]
      if fld == "arrival_s" and #list > 0 and n < list[#list] then
        fail(line, cols_at[fld], "arrival %s is before the previous row's %s: rows must be in arrival order",
          tostring(v), tostring(list[#list]))
      end
      list[#list + 1] = fld == "arrival_s" and n or math.tointeger(n)
    end
  end
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    lineno = lineno + 1
    line = line:gsub("\r$", "")
    if line:match("^%s*$") then goto continue end
    if jsonl then
      local obj, jerr = require("fathom.format.json").decode(line, path .. ":" .. lineno)
      if type(obj) ~= "table" then fail(lineno, 1, "expected a JSON object%s", jerr and (" (" .. jerr .. ")") or "") end
      local values, at = {}, {}
      for k, v in pairs(obj) do
        local fld = type(k) == "string" and column_of(k)
        if fld then
          values[fld] = v
          at[fld] = (line:find('"' .. k .. '"', 1, true)) or 1
        end
      end
      add(lineno, values, at)
    elseif not header then
      header = {}
      for cell in (line .. ","):gmatch("([^,]*),") do header[#header + 1] = column_of(cell) or false end
      for _, fld in ipairs(trace_fields) do
        local found = false
        for _, hf in ipairs(header) do if hf == fld then found = true end end
        if not found then
          fail(lineno, 1, "the header names no %s column (%s)", fld, table.concat(trace_columns[fld], ", "))
        end
      end
    else
      local values, at, col, i = {}, {}, 1, 0
      for cell in (line .. ","):gmatch("([^,]*),") do
        i = i + 1
        local fld = header[i]
        if fld then
          values[fld] = cell:match("^%s*(.-)%s*$")
          at[fld] = col
        end
        col = col + #cell + 1
      end
      add(lineno, values, at)
    end
    ::continue::
  end
  if #cols.arrival_s == 0 then errors.raise("%s: the trace has no rows", path) end
  local t0 = cols.arrival_s[1]
  for i, t in ipairs(cols.arrival_s) do cols.arrival_s[i] = t - t0 end
  return cols
end

-- scale_trace(trace, rate) -> a copy whose arrival times are stretched so that its mean
-- rate ((rows - 1) / span) is `rate` requests/s: the trace's burstiness at another load.
function M.scale_trace(trace, rate)
  local a, n = trace.arrival_s, #trace.arrival_s
  local span = a[n] - a[1]
  if n < 2 or span <= 0 then errors.raise("serve: a trace needs two distinct arrival times to be run at a rate") end
  local k = (n - 1) / span / rate
  local out = { arrival_s = {}, input = trace.input, output = trace.output }
  for i, t in ipairs(a) do out.arrival_s[i] = t * k end
  return out
end

-- trace_events(q) -> a Chrome/Perfetto trace (ui.perfetto.dev) of request lifetimes from
-- run()'s per-request columns: one process per replica, one track per request, spans
-- "queued" (arrival to first scheduled), "prefill" (to the first token), "decode" (to the
-- last), with the request's lengths and preemptions as arguments.
M.MAX_TRACE_REQUESTS = 300000

-- The acceptance of a draft when speculative decoding is asked for without one: DeepSeek-V3's
-- MTP module, whose second-token prediction is accepted 85-90% of the time (DeepSeek-AI
-- 2024, Sec. 5.4.3); the low end, as every later draft of a chain is taken at it too.
M.SPEC_ACCEPTANCE = 0.85
function M.trace_events(q)
  local n = #q.arrival_s
  if n > M.MAX_TRACE_REQUESTS then
    errors.raise("serve: --trace-file of %d requests is over the limit of %d (about 150 MB); trace fewer --requests",
      n, M.MAX_TRACE_REQUESTS)
  end
  local ev, replicas = {}, {}
  local function span(name, i, t0, t1)
    if t1 > t0 then
      ev[#ev + 1] = { name = name, cat = "request", ph = "X", pid = q.replica[i] + 1, tid = i, ts = t0 * 1e6,
        dur = (t1 - t0) * 1e6, args = { input = q.input[i], output = q.output[i], preemptions = q.preemptions[i] } }
    end
  end
  for i = 1, n do
    replicas[q.replica[i] + 1] = true
    span("retrieval", i, q.arrival_s[i], q.ready_s[i])
    span("queued", i, q.ready_s[i], q.admit_s[i])
    span("prefill", i, q.admit_s[i], q.first_token_s[i])
    span("decode", i, q.first_token_s[i], q.done_s[i])
  end
  for r in pairs(replicas) do
    ev[#ev + 1] = { name = "process_name", ph = "M", pid = r, args = { name = "replica " .. (r - 1) } }
  end
  table.sort(ev, function(x, y)
    if x.ph ~= y.ph then return x.ph == "M" end
    if x.ph == "M" then return x.pid < y.pid end
    if x.ts ~= y.ts then return x.ts < y.ts end
    return x.tid < y.tid
  end)
  return { traceEvents = ev, displayTimeUnit = "ms" }
end

local function model_path(name)
  if not name:find("/") and not name:match("%.ya?ml$") then return "models/" .. name .. ".yaml" end
  return name
end

-- The serving spec (`fathom serve SPEC.yaml`): run()'s keys, a `prefill` section for a
-- disaggregated deployment and `replay` (a trace file, relative to the spec).
local POLICY = names.key("serve_policy")
local length_schema = {
  kind = { type = "string", required = true, choices = names.serve_length },
  mean = { type = "number", above = 0 }, sigma = { type = "number", min = 0 }, min = { type = "number", min = 1 },
  max = { type = "number", min = 1 }, s = { type = "number", above = 0 },
}
local spec_schema = {
  model = { type = "string", required = true, hint = "a model of configs/models or a file" },
  hardware = { type = "string", required = true, hint = "a node of the hardware library" },
  hardware_lib = { type = "string" }, workload = { type = "string" },
  precision_recipe = { type = "string", choices = names.precision_recipe },
  tp = { type = "integer", min = 1, max = 4096 }, pp = { type = "integer", min = 1, max = 4096 },
  ep = { type = "integer", min = 1, max = 4096 }, pod_size = { type = "integer", min = 1, max = 4096 },
  replicas = { type = "integer", min = 1, max = 65536 }, routing = { type = "string", choices = names.serve_routing },
  arrival = { type = "string", choices = names.serve_arrival }, rate_per_s = { type = "number", above = 0 },
  burstiness = { type = "number", min = 0.01, max = 100 }, concurrency = { type = "integer", min = 1 },
  think_s = { type = "number", min = 0 }, requests = { type = "integer", min = 1, max = 100000000 },
  seed = { type = "integer", min = 0 }, input = { type = "any" }, output = { type = "any" },
  policy = { type = "string", choices = names.serve_policy }, max_batch = { type = "integer", min = 1, max = 65536 },
  max_batch_tokens = { type = "integer", min = 1 }, block_tokens = { type = "integer", min = 1, max = 65536 },
  watermark = { type = "number", min = 0, below = 1 }, prefix_hit_ratio = { type = "number", min = 0, below = 1 },
  slo_ttft_s = { type = "number", above = 0 }, slo_tpot_s = { type = "number", above = 0 },
  prefill = { type = "table" }, replay = { type = "string", hint = "a CSV or JSON-lines trace" },
  retrieval = { type = "table" }, kv_fetch = { type = "table" }, thinking_tokens = { type = "integer", min = 0 },
  dp_attention = { type = "integer", min = 1, max = 65536,
    hint = "replicas per engine whose DP ranks iterate in lock step" },
  swap_bw_bytes_per_s = { type = "number", above = 0, hint = "preempt by swap to host memory at this rate" },
  spec_tokens = { type = "integer", min = 0, max = 16, hint = "draft tokens a decode step verifies (MTP)" },
  spec_acceptance = { type = "number", min = 0, max = 1, hint = "probability each draft is accepted" },
  draft_model = { type = "string", hint = "a small model drafting spec_tokens tokens a step for `model`" },
}
local retrieval_schema = {
  servers = { type = "integer", min = 1, required = true }, s = { type = "number", min = 0 },
  embed_s = { type = "number", min = 0 }, corpus_vectors = { type = "number", min = 0 },
  dim = { type = "integer", min = 1 }, flops_per_s = { type = "number", above = 0 },
  efficiency = { type = "number", above = 0, max = 1 }, tokens = { type = "integer", min = 0 },
}
M.spec_schema, M.length_schema, M.model_path = spec_schema, length_schema, model_path -- serve_multi's

local kv_fetch_schema = {
  share = { type = "number", min = 0, below = 1, required = true },
  tier = { type = "string", choices = names.memory_tier },
  latency_s = { type = "number", min = 0 },
}
local prefill_schema = {
  replicas = { type = "integer", min = 1, max = 65536, required = true }, tp = { type = "integer", min = 1 },
  pp = { type = "integer", min = 1 }, ep = { type = "integer", min = 1 }, hardware = { type = "string" },
  kv_link = { type = "string", hint = "an interconnect of the hardware library" },
}

-- length_at(t, key, path) -> the length distribution t[key] gives (a mapping {kind =,
-- ...} or parse_length()'s text), refused at its position in the spec; nil when absent.
function M.length_at(t, k, path)
  local v = t[k]
  if type(v) == "table" then return require("fathom.check").fields(v, path, length_schema) end
  if v == nil then return nil end
  local ok, d = pcall(M.parse_length, v, path)
  if not ok then
    local msg = tostring(type(d) == "table" and d.msg or d):gsub("^" .. path:gsub("%p", "%%%0") .. ": ", "")
    errors.at(t, k, path, "%s", msg)
  end
  return d
end

-- load_spec(path) -> run()'s arguments from a serving spec (a path, or one under
-- configs/), every value checked where it is written ("file:line:col: key: reason"):
-- names of models, nodes and links included.
function M.load_spec(path)
  path = analysis.resolve(path) -- as given, else under fathom's configs/
  local doc = require("fathom.config").load_mapping(path, "serving spec")
  if doc.clients ~= nil then return require("fathom.serve_multi").from_doc(doc, path) end
  local a = require("fathom.check").fields(doc, "", spec_schema)
  for _, k in ipairs({ "input", "output" }) do a[k] = M.length_at(doc, k, k) end
  local lib_path = analysis.resolve(a.hardware_lib or "hardware/hardware_library.yaml")
  local lib = spec.hardware_library(lib_path)
  require("fathom.check").ref(doc, "hardware", "hardware", lib.nodes, "node")
  local mp = analysis.resolve(model_path(a.model))
  if not io.open(mp, "rb") then
    errors.at(doc, "model", "model", "no model '%s' (configs/models/NAME.yaml or a file)", a.model)
  end
  if a.draft_model and not io.open(analysis.resolve(model_path(a.draft_model)), "rb") then
    errors.at(doc, "draft_model", "draft_model", "no model '%s' (configs/models/NAME.yaml or a file)", a.draft_model)
  end
  if a.prefill then
    local p = require("fathom.check").fields(doc.prefill, "prefill", prefill_schema)
    if p.hardware then require("fathom.check").ref(doc.prefill, "hardware", "prefill.hardware", lib.nodes, "node") end
    if p.kv_link then
      require("fathom.check").ref(doc.prefill, "kv_link", "prefill.kv_link", lib.interconnect, "interconnect")
    end
    if a.policy == POLICY.static then
      errors.at(doc, "policy", "policy", "static batching runs prefill and decode together: not disaggregated")
    end
    a.prefill_replicas, a.prefill_tp, a.prefill_pp, a.prefill_ep = p.replicas, p.tp, p.pp, p.ep
    a.prefill_hardware, a.kv_link = p.hardware, p.kv_link
    a.prefill = nil
  end
  if a.retrieval then a.retrieval = require("fathom.check").fields(doc.retrieval, "retrieval", retrieval_schema) end
  if a.kv_fetch then a.kv_fetch = require("fathom.check").fields(doc.kv_fetch, "kv_fetch", kv_fetch_schema) end
  if a.replay then
    local dir = path:match("^(.*/)[^/]*$") or ""
    local file = a.replay:sub(1, 1) == "/" and a.replay or dir .. a.replay
    if not io.open(file, "rb") then errors.at(doc, "replay", "replay", "cannot read trace '%s'", file) end
    a.trace = M.load_trace(file)
    a.replay = nil
  end
  a.doc = doc
  return a
end

-- at_spec(a, e): re-raise a core refusal `e` at the spec key it names, when `a` came
-- from a spec file; otherwise as it is.
function M.at_spec(a, e)
  local doc = a and a.doc
  if doc and errors.is_core(e) then
    local path = tostring(e.path or ""):gsub("^serve%.", "")
    local top = path:match("^([%w_]+)")
    -- a request too long for the KV cache: the lengths are what the spec wrote
    if (top == "kv_capacity_tokens" or top == "prefill_kv_capacity_tokens") and doc.input ~= nil then
      top, path = "input", "input"
    end
    if top and doc[top] ~= nil then errors.at(doc, top, path, "%s", e.msg) end
  end
  error(e, 0)
end


-- engine{model=, hardware=, tp=, pp=, ep=, pod_size=, hardware_lib=, workload=} ->
-- plan (fathom.InferPlan), info {model, gpus, moe}. One replica: TP x PP GPUs of `hardware`
-- (pods of pod_size, default 8), experts over EP of them; the workload is the decode
-- search default (FP8 weights and KV cache, BF16 activations) unless given. A plan whose KV
-- tier has no room for one page of block_tokens (default 16) is refused, unless the caller
-- states kv_capacity_tokens or only probes the model's facts (probe = true); role = "prefill"
-- names the prefill pool's flags in the hint.
function M.engine(a)
  local tp, pp, ep = a.tp or 1, a.pp or 1, a.ep or 1
  for _, k in ipairs({ "tp", "pp", "ep" }) do
    local v = math.tointeger(a[k] or 1)
    if not v or v < 1 or v > 4096 then errors.raise("serve: %s must be an integer in [1, 4096], got %s", k, a[k]) end
  end
  local gpus = tp * pp
  local pod = math.min(math.tointeger(a.pod_size or 8) or 8, gpus)
  if gpus % pod ~= 0 then errors.raise("serve: TP x PP = %d GPUs is not a whole number of %d-GPU pods", gpus, pod) end
  local lib = spec.hardware_library(analysis.resolve(a.hardware_lib or "hardware/hardware_library.yaml"))
  local system = search.system(lib, a.hardware, gpus, pod)
  local model = spec.model(analysis.resolve(model_path(tostring(a.model))))
  local moe = (model.num_regular_experts or 0) > 1
  if ep > 1 and not moe then
    errors.raise("serve: --ep %d needs an MoE model; %s has no routed experts", ep, model.name or a.model)
  end
  if model.num_heads % tp ~= 0 then
    errors.raise("serve: TP=%d does not divide the %d attention heads of %s", tp, model.num_heads,
      model.name or a.model)
  end
  -- attention data parallelism: the engine's TP x PP GPUs hold dp_attention ranks, each
  -- with attention over tp / dp_attention of them (SGLang --tp T --dp R --enable-dp-attention)
  local dpa = math.tointeger(a.dp_attention or 1) or 1
  if dpa > 1 and tp % dpa ~= 0 then
    errors.raise("serve: dp_attention %d must divide TP %d (the engine's GPUs per pipeline stage)", dpa, tp)
  end
  local topo = search.infer_topology(system, tp // dpa, pp, ep, moe)
  if not topo then
    errors.raise("serve: TP %d x PP %d with EP %d does not tile %d GPUs in %d-GPU pods", tp, pp, ep, gpus, pod)
  end
  local row = passes.of_pass("decode")
  local w = row.load(analysis.resolve(a.workload or row.search_workload))
  if a.precision_recipe then w.precision_recipe = a.precision_recipe end
  w.global_batch_size, w.micro_batch_size = dpa, 1
  w.source_table, model.source_table = nil, nil
  local plan = row.compile(system.node, topo, model, w)
  -- a KV tier without room for one page (the simulator's own rule, fth_infer_kv_capacity_tokens):
  -- refused here, naming what takes the room and the knobs that free it; not for a probe of the
  -- model's facts (a.probe) nor where the caller states the capacity (a.kv_capacity_tokens)
  local block = a.block_tokens or 16
  if not a.probe and not a.kv_capacity_tokens and plan:kv_capacity_tokens() < block then
    local units = require("fathom.units")
    local mem = plan:evaluate().memory
    local tier = mem.tiers and mem.tiers.xpu_memory
    local knobs = a.role == "prefill" and "(--prefill-tp, --prefill-pp)" or "(--tp, --pp)"
    errors.raise("serve: %s on %s (TP %d, PP %d, EP %d) leaves no room for one KV-cache page (%g tokens): its "
      .. "weights take %s per GPU%s (hint: more GPUs a replica %s%s, or fewer bytes a weight: the workload's "
      .. "weight_float_size_bytes or precision_recipe, now %g)", model.name or a.model, a.hardware, tp, pp, ep, block,
      units.bytes(mem.components.weights),
      tier and tier.capacity_bytes and (" of " .. units.bytes(tier.capacity_bytes) .. " GPU memory") or "",
      knobs, moe and ", the experts over more of them (--ep)" or "",
      spec.infer_weight_bytes(w))
  end
  return plan, { model = model.name or a.model, gpus = gpus // dpa, moe = moe, lib = lib, system = system,
    heads = model.num_heads }
end

-- The keys run() takes: the simulator's (core.serve_run) and the engine's.
local engine_keys = { "model", "hardware", "hardware_lib", "workload", "precision_recipe", "tp", "pp", "ep", "pod_size",
  "draft_model", "draft_plan",
  "prefill_hardware", "prefill_tp", "prefill_pp", "prefill_ep", "kv_link", "prefill_plan", "retrieval", "kv_fetch" }
local sim_keys = { "requests", "seed", "arrival", "rate_per_s", "burstiness", "concurrency", "think_s", "input",
  "output", "policy", "max_batch", "max_batch_tokens", "block_tokens", "kv_capacity_tokens", "watermark",
  "swap_bw_bytes_per_s", "replicas", "dp_attention", "spec_tokens", "spec_acceptance",
  "routing", "gpus_per_replica", "slo_ttft_s", "slo_tpot_s",
  "per_request", "cost", "trace",
  "prefix_hit_ratio", "prefill_replicas", "prefill_kv_capacity_tokens", "prefill_gpus_per_replica",
  "kv_transfer_bytes_per_token", "retrieval_servers", "retrieval_s", "retrieval_tokens", "kv_fetch_share",
  "kv_fetch_bw_bytes_per_s", "kv_fetch_latency_s", "thinking_tokens",
  "kv_link_bw_bytes_per_s", "kv_link_latency_s" }

local known = {}
for _, k in ipairs(engine_keys) do known[k] = true end
for _, k in ipairs(sim_keys) do known[k] = true end
known.plan = true
known.doc = true -- load_spec()'s document, for positions

-- definition(a) -> the core's serve table from run()'s arguments (lengths parsed).
function M.definition(a)
  local all = {}
  for k in pairs(known) do all[#all + 1] = k end
  table.sort(all)
  for k in pairs(a) do
    if not known[k] then
      errors.raise("serve: unknown key '%s'%s", tostring(k), errors.suggest(tostring(k), all))
    end
  end
  local def = {}
  for _, k in ipairs(sim_keys) do def[k] = a[k] end
  if def.input ~= nil then def.input = M.parse_length(def.input, "input") end
  if def.output ~= nil then def.output = M.parse_length(def.output, "output") end
  if type(def.trace) == "string" then def.trace = M.load_trace(def.trace) end
  return def
end

-- run{...} -> metrics table (SI units; see README "Serving"), and with per_request =
-- true a second table of per-request columns. Keys: the engine's (model, hardware,
-- tp, pp, ep, pod_size, hardware_lib, workload) or `plan` (a compiled decode plan) or
-- `cost = {base_s, per_token_s}`; and the simulation's (requests, seed, arrival,
-- rate_per_s, burstiness, concurrency, think_s, input, output, policy, max_batch,
-- max_batch_tokens, block_tokens, kv_capacity_tokens, watermark, replicas, routing,
-- gpus_per_replica, slo_ttft_s, slo_tpot_s); `trace` (a path or load_trace()'s columns)
-- replays a request trace, its arrivals stretched to rate_per_s when that is given.
-- build(a) -> def, plan, prefill_plan, info, prefill_info: the core's arguments, and
-- engine() facts of each pool (info: nil when `a` gives a plan or a cost). A disaggregated deployment
-- (prefill_replicas > 0) runs prompts on prefill replicas of prefill_tp/pp/ep on
-- prefill_hardware (each defaulting to the decode replicas'), and moves each prompt's KV
-- over `kv_link` (an interconnect of the hardware library; default the decode node's
-- scale-out), every GPU of the prefill replica sending its shard on its own link.
function M.build(a)
  local def = M.definition(a)
  local plan, info = a.plan, nil
  if not plan and a.model then plan, info = M.engine(a) end
  local dplan = a.draft_plan
  if not dplan and a.draft_model and info then dplan = M.draft_engine(a, info) end
  local pplan, pinfo = a.prefill_plan, info
  if (def.prefill_replicas or 0) > 0 and info then
    if not pplan and (a.prefill_tp or a.prefill_pp or a.prefill_ep or a.prefill_hardware) then
      pplan, pinfo = M.engine({ model = a.model, hardware = a.prefill_hardware or a.hardware,
        hardware_lib = a.hardware_lib, workload = a.workload, precision_recipe = a.precision_recipe,
        pod_size = a.pod_size, tp = a.prefill_tp or a.tp,
        pp = a.prefill_pp or a.pp, ep = a.prefill_ep or a.ep, role = "prefill", block_tokens = a.block_tokens,
        kv_capacity_tokens = a.prefill_kv_capacity_tokens })
    end
    if def.kv_link_bw_bytes_per_s == nil then
      local ic = pinfo.system.scale_out
      if a.kv_link then
        ic = info.lib.interconnect[a.kv_link]
        if not ic then
          local all = {}
          for k in pairs(info.lib.interconnect) do all[#all + 1] = k end
          table.sort(all)
          errors.raise("serve: kv_link: no interconnect '%s' in the hardware library%s", tostring(a.kv_link),
            errors.suggest(tostring(a.kv_link), all))
        end
      end
      def.kv_link_bw_bytes_per_s = ic.bandwidth_nominal * (ic.num_links or 1) * (ic.efficiency or 1) * pinfo.gpus
      def.kv_link_latency_s = def.kv_link_latency_s or ic.latency_sec or 0
    end
  end
  if a.retrieval then
    local rt = a.retrieval
    def.retrieval_servers = rt.servers or 1
    def.retrieval_s = M.retrieval_seconds(rt)
    def.retrieval_tokens = rt.tokens or 0
  end
  if a.kv_fetch and info then
    -- the KV of the prompt's shared part from a memory tier of the node (every GPU of the
    -- replica reading its shard from its own share of the tier)
    local tier_name = a.kv_fetch.tier or names.key("memory_tier").remote_memory
    local tier = info.system.node.device_memory_tiers[tier_name]
    if not tier then
      local have = {}
      for k in pairs(info.system.node.device_memory_tiers) do have[#have + 1] = k end
      table.sort(have)
      errors.raise("serve: kv_fetch.tier: the node has no %s (it has %s)", tostring(tier_name),
        table.concat(have, ", "))
    end
    def.kv_fetch_share = a.kv_fetch.share
    def.kv_fetch_bw_bytes_per_s = tier.bandwidth_per_stack_nominal * (tier.num_stack or 1) * (tier.efficiency or 1)
      * info.gpus
    def.kv_fetch_latency_s = a.kv_fetch.latency_s or 0
  end
  return def, plan, pplan, info, pinfo, dplan
end

-- draft_engine(a, info) -> the plan of a's draft model (speculative decoding with a
-- separate small model, Leviathan et al. 2023): on the target replica's GPUs (same
-- node, same TP), its weights and KV beside the target's (core.serve_run takes them
-- out of the KV cache). It needs the drafts a step and their acceptance (both depend
-- on the pair of models and the data: no default), the target's vocabulary (the
-- target verifies the draft's tokens), one pipeline stage and aggregated serving.
function M.draft_engine(a, info)
  local draft = tostring(a.draft_model)
  if (a.spec_tokens or 0) < 1 then
    errors.raise("serve: draft model %s needs spec_tokens (--spec-tokens) K >= 1, the tokens it drafts a step", draft)
  end
  if a.spec_acceptance == nil then
    errors.raise("serve: draft model %s needs spec_acceptance (--spec-acceptance) A, the probability the target "
      .. "accepts a draft", draft)
  end
  if (a.prefill_replicas or 0) > 0 then
    errors.raise("serve: draft_model with disaggregated prefill is not modelled: drop prefill_replicas")
  end
  if (a.pp or 1) > 1 or (a.dp_attention or 1) > 1 then
    errors.raise("serve: draft_model is modelled on one pipeline stage without attention DP: drop pp / dp_attention")
  end
  local dm = spec.model(analysis.resolve(model_path(draft)))
  local tm = spec.model(analysis.resolve(model_path(tostring(a.model))))
  if dm.vocab_size ~= tm.vocab_size then
    errors.raise("serve: draft model %s has a vocabulary of %d tokens, %s of %d: a draft must share the "
      .. "target's tokenizer", draft, dm.vocab_size, info.model, tm.vocab_size)
  end
  local plan = M.engine({ model = draft, hardware = a.hardware, hardware_lib = a.hardware_lib,
    workload = a.workload, pod_size = a.pod_size, tp = a.tp })
  return plan
end

-- economics(r, gpus, power_w, price_per_gpu_hour [, pue]) -> {energy_j_per_output_token,
-- cost_per_million_output_tokens} of a run: fathom's goodput model's energy (GPUs x power
-- x time x PUE) and cost (GPUs x time x price) over the run's duration (no failures), per
-- output token. power_w is the board's rating: an upper bound at partial load. Either
-- field is absent when its input is (power 0, price nil).
function M.economics(r, gpus, power_w, price, pue)
  local g = core.goodput({ gpu_mtbf_s = math.huge, gpu_power_w = power_w or 0, pue = pue or 1,
    price_per_gpu_hour = price or 0 }, gpus, r.duration_s)
  local tokens = r.throughput.output_tokens_per_s * r.duration_s
  local out = {}
  if (power_w or 0) > 0 then out.energy_j_per_output_token = g.energy_j / tokens end
  if price then out.cost_per_million_output_tokens = g.cost / tokens * 1e6 end
  return out
end

-- retrieval_seconds{embed_s =, corpus_vectors =, dim =, flops_per_s =, efficiency =} -> the
-- service time of one RAG query on one retrieval server: embedding the query (embed_s),
-- then an exhaustive inner-product search of the corpus (FAISS IndexFlatIP: 2 x vectors
-- x dim FLOPs at flops_per_s x efficiency; an ANN index would scan a fraction), or `s`
-- when given outright.
function M.retrieval_seconds(rt)
  if rt.s then return rt.s end
  local flops = 2 * (rt.corpus_vectors or 0) * (rt.dim or 768)
  local rate = (rt.flops_per_s or 1e12) * (rt.efficiency or 0.5)
  return (rt.embed_s or 0) + flops / rate
end

function M.run(a)
  if a.clients then return require("fathom.serve_multi").run(a) end
  local def, plan, pplan, _, _, dplan = M.build(a)
  if def.trace and def.rate_per_s then def.trace = M.scale_trace(def.trace, def.rate_per_s) end
  return core.serve_run(def, plan, pplan, dplan)
end

-- lone(def, plan [, prefill_plan]) -> TTFT and TPOT of one request of the mean lengths
-- alone: the lowest latencies the deployment can give.
function M.lone(def, plan, pplan, dplan)
  local one = {}
  for k, v in pairs(def) do one[k] = v end
  local function mean_of(d)
    if not d then return nil end
    local m = d.mean or ((d.min or 1) + (d.max or d.min or 1)) / 2
    return { kind = LEN.fixed, mean = math.max(1, math.floor(m + 0.5)) }
  end
  one.input, one.output = mean_of(def.input), mean_of(def.output)
  one.requests, one.arrival, one.rate_per_s, one.replicas = 1, nil, 1, 1
  one.slo_ttft_s, one.slo_tpot_s, one.per_request, one.trace = nil, nil, nil, nil
  if one.prefill_replicas then one.prefill_replicas = 1 end
  local r = core.serve_run(one, plan, pplan, dplan)
  return r.ttft_s.mean, r.tpot_s.count > 0 and r.tpot_s.mean or 0
end

-- slo_refusal(def, plan, prefill_plan, draft_plan, slo_ttft_s, slo_tpot_s) -> key, reason
-- when a bound is below what a lone request of the mean lengths gets (lone()): no load
-- meets it, an input error rather than a zero goodput; nil when both can be met.
function M.slo_refusal(def, plan, pplan, dplan, slo_ttft, slo_tpot)
  if not slo_ttft and not slo_tpot then return nil end
  local ttft, tpot = M.lone(def, plan, pplan, dplan)
  local units = require("fathom.units")
  if slo_ttft and slo_ttft < ttft then
    return "slo_ttft_s", string.format("%g s is below the %s a lone request of the mean prompt takes to its first "
      .. "token: no load meets it", slo_ttft, units.time(ttft))
  end
  if slo_tpot and slo_tpot < tpot then
    return "slo_tpot_s", string.format("%g s is below the %s per output token of a lone request: no load meets it",
      slo_tpot, units.time(tpot))
  end
  return nil
end

-- find_max_qps(a, target) -> rate, result at that rate, steps {rate, slo_attainment}:
-- the highest open-loop rate whose SLO attainment (requests within both bounds) is at
-- least `target` (default 0.9), by doubling from 1 request/s (or halving) to bracket
-- it, then bisecting to 1%. The same seed at every rate.
function M.find_max_qps(a, target)
  target = target or 0.9
  local def, plan, pplan, _, _, dplan = M.build(a)
  if not def.slo_ttft_s and not def.slo_tpot_s then
    errors.raise("serve: --find-max-qps needs --slo-ttft and/or --slo-tpot")
  end
  local steps = {}
  local trace = def.trace
  local function at(rate)
    def.rate_per_s = rate
    if trace then def.trace = M.scale_trace(trace, rate) end
    local r = core.serve_run(def, plan, pplan, dplan)
    steps[#steps + 1] = { rate_per_s = rate, slo_attainment = r.goodput.slo_attainment }
    return r.goodput.slo_attainment >= target, r
  end
  local lo, hi, best = nil, nil, nil
  local rate = def.rate_per_s or 1
  local ok, r = at(rate)
  if ok then
    lo, best = rate, r
    for _ = 1, 40 do
      rate = rate * 2
      ok, r = at(rate)
      if not ok then hi = rate break end
      lo, best = rate, r
    end
    if not hi then errors.raise("serve: every rate up to %g requests/s meets the SLOs", lo) end
  else
    hi = rate
    for _ = 1, 40 do
      rate = rate / 2
      ok, r = at(rate)
      if ok then lo, best = rate, r break end
      hi = rate
    end
    if not lo then
      errors.raise("serve: no rate down to %g requests/s meets the SLOs (attainment %.3g < %g)", hi,
        steps[#steps].slo_attainment, target)
    end
  end
  while (hi - lo) / lo > 0.01 do
    local mid = (lo + hi) / 2
    ok, r = at(mid)
    if ok then lo, best = mid, r else hi = mid end
  end
  return lo, best, steps
end

-- search_deployments(a, gpus, opts) -> {deployments, points, front}: every way to serve
-- the model `a` describes on `gpus` GPUs of its node: TP of powers of two dividing the
-- heads, replicas = gpus / TP, each batching policy (opts.policies), and, when
-- opts.disaggregated, every split of the replicas into prefill and decode pools; each
-- gets its capacity at a's SLOs (find_max_qps with opts.target), ranked by capacity per
-- GPU. For the Pareto front (NVIDIA AIConfigurator's axes), each deployment is also run at
-- opts.loads (shares of its capacity): output tokens/s per GPU against tokens/s per user
-- (1 / mean TPOT); `front` keeps the points no other beats on both.
function M.search_deployments(a, gpus, opts)
  opts = opts or {}
  local loads = opts.loads or { 0.25, 0.5, 0.75, 1.0 }
  local deployments, points = {}, {}
  local model_heads
  do
    local _, info = M.engine({ model = a.model, hardware = a.hardware, hardware_lib = a.hardware_lib,
      workload = a.workload, tp = 1, probe = true })
    model_heads = info.heads
  end
  -- every deployment of `gpus`: TP that divides the heads, replicas of it, policies, and
  -- with opts.disaggregated every prefill:decode split
  local cands = {}
  local tp = 1
  while tp <= gpus do
    if gpus % tp == 0 and (not model_heads or model_heads % tp == 0) then
      local replicas = gpus // tp
      local splits = { 0 }
      if opts.disaggregated then
        for p = 1, replicas - 1 do splits[#splits + 1] = p end
      end
      for _, policy in ipairs(opts.policies or { names.serve_policy[1], names.serve_policy[2] }) do
        for _, p in ipairs(splits) do
          if not (p > 0 and policy == POLICY.static) then
            cands[#cands + 1] = { tp = tp, replicas = replicas, p = p, policy = policy }
          end
        end
      end
    end
    tp = tp * 2
  end
  -- each deployment's capacity and its load points, over local processes or MPI ranks
  -- (fathom.parallel: the same answer, in the same order, for any number of them)
  local done = require("fathom.parallel").map(cands, function(c)
    local b = {}
    for k, v in pairs(a) do b[k] = v end
    b.tp, b.policy = c.tp, c.policy
    b.replicas, b.prefill_replicas = c.replicas - c.p, c.p > 0 and c.p or nil
    -- find_max_qps and run() compile the engine once per call (not per simulation)
    local okr, rate, r = pcall(M.find_max_qps, b, opts.target)
    if not okr and not errors.is_input(rate) then error(rate, 0) end -- a bug, not a refusal
    if not okr then return { refused = true } end
    local d = { tp = c.tp, replicas = c.replicas - c.p, prefill_replicas = c.p, policy = c.policy,
      gpus = gpus, capacity_per_s = rate, capacity_per_s_per_gpu = rate / gpus,
      ttft_p99_s = r.ttft_s.p99, tpot_mean_s = r.tpot_s.mean,
      output_tokens_per_s_per_gpu = r.throughput.output_tokens_per_s_per_gpu }
    local pts = {}
    for _, f in ipairs(loads) do
      b.rate_per_s = rate * f
      local rr = M.run(b)
      if rr.tpot_s.mean > 0 then
        pts[#pts + 1] = { tp = c.tp, replicas = d.replicas, prefill_replicas = c.p, policy = c.policy,
          load = f, rate_per_s = rate * f,
          tokens_per_s_per_gpu = rr.throughput.output_tokens_per_s_per_gpu,
          tokens_per_s_per_user = 1 / rr.tpot_s.mean }
      end
    end
    return { deployment = d, points = pts }
  end, { jobs = opts.jobs })
  for _, x in ipairs(done) do
    if not x.refused then
      deployments[#deployments + 1] = x.deployment
      for _, pt in ipairs(x.points) do points[#points + 1] = pt end
    end
  end
  table.sort(deployments, function(x, y)
    if x.capacity_per_s ~= y.capacity_per_s then return x.capacity_per_s > y.capacity_per_s end
    if x.tp ~= y.tp then return x.tp < y.tp end
    if x.prefill_replicas ~= y.prefill_replicas then return x.prefill_replicas < y.prefill_replicas end
    return x.policy < y.policy
  end)
  local front = {}
  for _, pt in ipairs(points) do
    local beaten = false
    for _, o in ipairs(points) do
      if o ~= pt and o.tokens_per_s_per_gpu >= pt.tokens_per_s_per_gpu and o.tokens_per_s_per_user >=
        pt.tokens_per_s_per_user and (o.tokens_per_s_per_gpu > pt.tokens_per_s_per_gpu or
        o.tokens_per_s_per_user > pt.tokens_per_s_per_user) then
        beaten = true
        break
      end
    end
    if not beaten then front[#front + 1] = pt end
  end
  table.sort(front, function(x, y) return x.tokens_per_s_per_user < y.tokens_per_s_per_user end)
  return { deployments = deployments, points = points, front = front }
end

-- pareto_svg(res, title) -> SVG text: search_deployments()'s points (tokens/s per GPU
-- against tokens/s per user), the front drawn as a line, a colour per TP.
function M.pareto_svg(res, title)
  local w, hgt, left, bottom, top, right = 760, 460, 80, 60, 50, 170
  local pw, ph = w - left - right, hgt - top - bottom
  local mx, my = 0, 0
  for _, p in ipairs(res.points) do
    mx = math.max(mx, p.tokens_per_s_per_user)
    my = math.max(my, p.tokens_per_s_per_gpu)
  end
  mx, my = mx * 1.05, my * 1.05
  local function X(v) return left + pw * v / mx end
  local function Y(v) return top + ph - ph * v / my end
  local out = { string.format('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" ' ..
    'font-family="sans-serif" font-size="12">', w, hgt) }
  local function add(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
  local plot = require("fathom.format.plot")
  local esc = plot.esc
  add('<text x="%d" y="22" font-size="14" text-anchor="middle">%s</text>', left + pw / 2, esc(title))
  add('<rect x="%d" y="%d" width="%d" height="%d" fill="white" fill-opacity="0" stroke="black"/>', left, top, pw, ph)
  for k = 0, 4 do
    add('<text x="%.1f" y="%d" text-anchor="middle">%.4g</text>', X(mx * k / 4), top + ph + 16, mx * k / 4)
    add('<text x="%d" y="%.1f" text-anchor="end">%.4g</text>', left - 6, Y(my * k / 4) + 4, my * k / 4)
  end
  add('<text x="%d" y="%d" text-anchor="middle">%s</text>', left + pw / 2, top + ph + 40,
    "output tokens/s per user (1 / mean TPOT)")
  add('<text x="18" y="%d" transform="rotate(-90 18 %d)" text-anchor="middle">%s</text>', top + ph / 2,
    top + ph / 2, "output tokens/s per GPU")
  local colors = plot.palette -- colour-blind-safe (Okabe-Ito), one owner
  local tps, seen = {}, {}
  for _, p in ipairs(res.points) do
    if not seen[p.tp] then
      seen[p.tp] = true
      tps[#tps + 1] = p.tp
    end
  end
  table.sort(tps)
  local color_of = {}
  for i, t in ipairs(tps) do color_of[t] = colors[(i - 1) % #colors + 1] end
  for _, p in ipairs(res.points) do
    local shape = p.prefill_replicas > 0 and "rect" or "circle"
    if shape == "circle" then
      add('<circle cx="%.1f" cy="%.1f" r="4" fill="%s" fill-opacity="0.7"/>', X(p.tokens_per_s_per_user),
        Y(p.tokens_per_s_per_gpu), color_of[p.tp])
    else
      add('<rect x="%.1f" y="%.1f" width="8" height="8" fill="%s" fill-opacity="0.7"/>',
        X(p.tokens_per_s_per_user) - 4, Y(p.tokens_per_s_per_gpu) - 4, color_of[p.tp])
    end
  end
  local pts = {}
  for _, p in ipairs(res.front) do
    pts[#pts + 1] = string.format("%.1f,%.1f", X(p.tokens_per_s_per_user), Y(p.tokens_per_s_per_gpu))
  end
  add('<polyline points="%s" fill-opacity="0" stroke="black" stroke-width="1.5"/>', table.concat(pts, " "))
  local ly = top + 10
  for _, t in ipairs(tps) do
    add('<circle cx="%d" cy="%d" r="4" fill="%s"/><text x="%d" y="%d">TP %d</text>', left + pw + 20, ly,
      color_of[t], left + pw + 30, ly + 4, t)
    ly = ly + 18
  end
  add('<circle cx="%d" cy="%d" r="4" fill="gray"/><text x="%d" y="%d">aggregated</text>', left + pw + 20, ly,
    left + pw + 30, ly + 4)
  add('<rect x="%d" y="%d" width="8" height="8" fill="gray"/><text x="%d" y="%d">disaggregated</text>',
    left + pw + 16, ly + 14, left + pw + 30, ly + 22)
  add('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/><text x="%d" y="%d">Pareto front</text>',
    left + pw + 12, ly + 40, left + pw + 26, ly + 40, left + pw + 30, ly + 44)
  out[#out + 1] = "</svg>\n"
  return table.concat(out, "\n")
end

return M
