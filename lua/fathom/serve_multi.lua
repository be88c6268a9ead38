-- fathom.serve_multi: several models served on one cluster at once (issue 18). Named
-- pools of engine replicas, each serving one model (pools may use the same kind of
-- hardware, never the same GPUs), and clients, each with its own model, traffic
-- (arrival process, lengths, or a replayed trace) and SLOs:
--
--   fathom.serve{ hardware = "H100_SXM",
--     pools = { big = { model = "llama3.1_70b", tp = 4, replicas = 2 },
--               small = { model = "llama3.1_8b", replicas = 2 } },
--     clients = { chat = { model = "llama3.1_70b", rate_per_s = 3, input = 1024, output = 256,
--                          slo_ttft_s = 1, slo_tpot_s = 0.05 },
--                 agents = { pool = "small", rate_per_s = 10, output = 64 } } }
--
-- Pools share no GPUs, so each is its own simulation (fathom.serve's engine and core
-- simulator); the clients of one pool are merged into one request stream by arrival
-- time (each client's own draws, core.serve_draw, or its trace), and each client's
-- metrics come from its own requests against its own SLOs (core.serve_run's
-- `clients`). Client i (in name order) draws with seed + i - 1 unless it sets `seed`;
-- a client alone on its pool gives exactly what `fathom serve` gives for that pool and
-- traffic with that seed. Every client's first request arrives at time 0.
local check = require("fathom.check")
local core = require("fathom.core")
local errors = require("fathom.errors")
local names = require("fathom.names")
local serve = require("fathom.serve")

local M = {}

local ARRIVAL = names.key("serve_arrival")

local function pick(keys, extra)
  local out = {}
  for _, k in ipairs(keys) do -- the rule as fathom.serve has it, optional here (defaults below)
    local r = {}
    for rk, rv in pairs(serve.spec_schema[k]) do r[rk] = rv end
    r.required = nil
    out[k] = r
  end
  for k, v in pairs(extra or {}) do out[k] = v end
  return out
end

-- What a pool sets: its model and engine (fathom.serve's keys, one owner of each rule).
M.POOL_KEYS = { "model", "hardware", "workload", "tp", "pp", "ep", "pod_size", "replicas", "routing", "policy",
  "max_batch", "max_batch_tokens", "block_tokens", "watermark", "prefix_hit_ratio", "dp_attention",
  "swap_bw_bytes_per_s", "spec_tokens", "spec_acceptance", "draft_model" }
-- What a client sets: its traffic and SLOs, and the model or pool serving it.
M.CLIENT_KEYS = { "arrival", "rate_per_s", "burstiness", "concurrency", "think_s", "requests", "seed",
  "input", "output", "slo_ttft_s", "slo_tpot_s", "replay" }
local pool_schema = pick(M.POOL_KEYS, { model = { type = "string", hint = "a model of configs/models or a file" } })
local client_schema = pick(M.CLIENT_KEYS, {
  model = { type = "string", hint = "the model the client calls" },
  pool = { type = "string", hint = "the pool that serves it (default: the one pool serving its model)" } })
local top_schema = pick({ "hardware", "hardware_lib", "workload", "seed", "requests" }, {
  pools = { type = "table", required = true, hint = "name: {model, tp, replicas, ...}" },
  clients = { type = "table", required = true, hint = "name: {model or pool, rate_per_s, input, output, ...}" } })

local function sorted_keys(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out, function(x, y) return tostring(x) < tostring(y) end)
  return out
end

local function model_exists(name)
  local f = io.open(require("fathom.analysis").resolve(serve.model_path(name)), "rb")
  if f then f:close() end
  return f ~= nil
end

-- check(a [, dir]) -> {pools = {{name, args, clients = {...}}, ...}, clients = {{name, pool, ...}}}:
-- the spec's pools and clients in name order, every reference resolved; a bad one is
-- refused at its key ("file:line:col: clients.NAME.pool: ...").
function M.check(a, dir)
  local top = check.fields(a, "", top_schema)
  top.dir = dir
  local lib = require("fathom.spec").hardware_library(require("fathom.analysis").resolve(
    top.hardware_lib or "hardware/hardware_library.yaml"))
  local pools, by_name = {}, {}
  for _, name in ipairs(sorted_keys(top.pools)) do
    local t = top.pools[name]
    local path = "pools." .. tostring(name)
    local p = check.fields(t, path, pool_schema)
    p.hardware = p.hardware or top.hardware
    if not p.hardware then
      errors.at(top.pools, name, path .. ".hardware", "missing: give the pool or the spec a hardware")
    end
    if t.hardware then
      check.ref(t, "hardware", path .. ".hardware", lib.nodes, "node")
    else
      check.ref(a, "hardware", "hardware", lib.nodes, "node")
    end
    for _, k in ipairs({ "model", "draft_model" }) do
      if p[k] and not model_exists(p[k]) then
        errors.at(t, k, path .. "." .. k, "no model '%s' (configs/models/NAME.yaml or a file)", p[k])
      end
    end
    local pool = { name = name, doc = t, parent = top.pools, path = path, args = p, clients = {},
      model_from = p.model and "its model key" }
    pools[#pools + 1] = pool
    by_name[name] = pool
  end
  local clients = {}
  for i, name in ipairs(sorted_keys(top.clients)) do
    local t = top.clients[name]
    local path = "clients." .. tostring(name)
    local c = check.fields(t, path, client_schema)
    c.input, c.output = serve.length_at(t, "input", path .. ".input"), serve.length_at(t, "output", path .. ".output")
    c.name, c.doc, c.path = name, t, path
    if c.model and not model_exists(c.model) then
      errors.at(t, "model", path .. ".model", "no model '%s' (configs/models/NAME.yaml or a file)", c.model)
    end
    local pool
    if c.pool then
      pool = check.ref(t, "pool", path .. ".pool", by_name, "pool")
    else
      if not c.model then errors.at(top.clients, name, path, "give the client a model or a pool") end
      local serving = {}
      for _, p in ipairs(pools) do
        if p.args.model == c.model then serving[#serving + 1] = p.name end
      end
      if #serving ~= 1 then
        errors.at(t, "model", path .. ".model", "%s: name the pool that serves it (pool: NAME; pools: %s)",
          #serving == 0 and ("no pool names model " .. c.model) or ("pools " .. table.concat(serving, ", ")
            .. " all serve " .. c.model), table.concat(sorted_keys(by_name), ", "))
      end
      pool = by_name[serving[1]]
    end
    -- a pool serves one model: its own, or its first client's
    local model = c.model or pool.args.model
    if not model then
      errors.at(t, "pool", path .. ".pool", "pool %s names no model and neither does this client", pool.name)
    end
    if pool.args.model and pool.args.model ~= model then
      errors.at(t, c.model and "model" or "pool", path .. (c.model and ".model" or ".pool"),
        "two models on pool %s: it serves %s (%s), this client calls %s; a pool serves one model: give it a pool "
          .. "of its own", pool.name, pool.args.model, pool.model_from, model)
    end
    pool.args.model = model
    pool.model_from = pool.model_from or ("client " .. tostring(name))
    c.model, c.pool = model, pool.name
    c.seed = c.seed or (top.seed or 1) + i - 1
    c.requests = c.requests or top.requests
    local closed = c.arrival == ARRIVAL.closed or (c.arrival == nil and c.concurrency ~= nil)
    if closed then c.arrival = ARRIVAL.closed end
    if not closed and not c.rate_per_s and not c.replay then
      errors.at(top.clients, name, path,
        "give the client a rate_per_s (open loop), a concurrency (closed loop) or a replay")
    end
    if c.replay then
      local file = c.replay:sub(1, 1) == "/" and c.replay or (top.dir or "") .. c.replay
      local f = io.open(file, "rb")
      if not f then errors.at(t, "replay", path .. ".replay", "cannot read trace '%s'", file) end
      f:close()
      c.trace = serve.load_trace(file)
      local n = math.min(c.requests or #c.trace.input, #c.trace.input)
      for _, k in ipairs({ "arrival_s", "input", "output" }) do
        for j = #c.trace[k], n + 1, -1 do c.trace[k][j] = nil end
      end
      c.requests = n
      if c.rate_per_s then c.trace = serve.scale_trace(c.trace, c.rate_per_s) end
    end
    clients[#clients + 1] = c
    pool.clients[#pool.clients + 1] = c
  end
  for _, p in ipairs(pools) do
    if #p.clients == 0 then errors.at(top.pools, p.name, p.path, "no client uses this pool") end
    if #p.clients > 1 then
      for _, c in ipairs(p.clients) do
        if c.arrival == ARRIVAL.closed then
          errors.at(c.doc, c.doc.arrival and "arrival" or "concurrency", c.path .. "." ..
            (c.doc.arrival and "arrival" or "concurrency"), "a closed loop shares no pool (its arrivals follow its "
            .. "own replies): give client %s a pool of its own, or an open-loop rate", c.name)
        end
      end
    end
  end
  return { pools = pools, clients = clients, top = top }
end

-- The traffic keys of a client, as fathom.serve's run() takes them.
local TRAFFIC = { "arrival", "rate_per_s", "burstiness", "concurrency", "think_s", "requests", "seed", "input",
  "output", "slo_ttft_s", "slo_tpot_s" }

-- merged(clients) -> trace columns with a `client` column: every client's stream (its
-- own draws, or its trace), in arrival order (ties: the client first in name order).
local function merged(clients)
  local rows = {}
  for ci, c in ipairs(clients) do
    local tr = c.trace
    if not tr then
      local d = {}
      for _, k in ipairs(TRAFFIC) do d[k] = c[k] end
      d.slo_ttft_s, d.slo_tpot_s = nil, nil
      tr = core.serve_draw(d)
    end
    for i = 1, #tr.arrival_s do
      rows[#rows + 1] = { tr.arrival_s[i], ci, i, tr.input[i], tr.output[i] }
    end
  end
  table.sort(rows, function(x, y)
    if x[1] ~= y[1] then return x[1] < y[1] end
    if x[2] ~= y[2] then return x[2] < y[2] end
    return x[3] < y[3]
  end)
  local out = { arrival_s = {}, input = {}, output = {}, client = {} }
  for i, r in ipairs(rows) do
    out.arrival_s[i], out.client[i], out.input[i], out.output[i] = r[1], r[2], r[4], r[5]
  end
  return out
end

-- The request-level fields of a client's metrics (core.serve_run's client results).
local CLIENT_FIELDS = { "requests_completed", "duration_s", "throughput", "ttft_s", "tpot_s", "e2e_s", "queue_s",
  "goodput", "preemptions" }

-- run_pool(pool, top) -> pool metrics, the per-client metrics in the pool's client order.
local function run_pool(pool, top)
  local b = {}
  for k, v in pairs(pool.args) do b[k] = v end
  b.hardware_lib, b.workload = top.hardware_lib, b.workload or top.workload
  local cl = pool.clients
  if #cl == 1 then
    for _, k in ipairs(TRAFFIC) do b[k] = cl[1][k] end
    b.trace = cl[1].trace
  else
    b.trace, b.seed = merged(cl), cl[1].seed
  end
  local ok, def, plan, pplan, info, _, dplan = pcall(serve.build, b)
  local r
  for _, c in ipairs(ok and cl or {}) do -- an SLO no request of this client meets even alone
    local one = {}
    for k, v in pairs(def) do one[k] = v end
    one.input, one.output, one.trace = c.input, c.output, nil
    -- (a lone request the engine refuses is reported by the pool's run below, at the pool)
    local fine, key, msg = pcall(serve.slo_refusal, one, plan, pplan, dplan, c.slo_ttft_s, c.slo_tpot_s)
    if fine and key then errors.at(c.doc, key, c.path .. "." .. key, "%s", msg) end
  end
  if ok then
    def.clients = {}
    for i, c in ipairs(cl) do def.clients[i] = { slo_ttft_s = c.slo_ttft_s or 0, slo_tpot_s = c.slo_tpot_s or 0 } end
    if #cl > 1 then def.slo_ttft_s, def.slo_tpot_s = nil, nil end
    ok, r = pcall(core.serve_run, def, plan, pplan, dplan)
  else
    r = def
  end
  if not ok then
    if not errors.is_input(r) and not errors.is_core(r) then error(r, 0) end
    local msg = errors.is_core(r) and ((r.path and (tostring(r.path):gsub("^serve%.", "") .. ": ") or "") .. r.msg)
      or tostring(type(r) == "table" and r.msg or r):gsub("^serve: ", "")
    errors.at(pool.parent, pool.name, pool.path, "%s", msg)
  end
  local gpus = (b.replicas or 1) * info.gpus
  local p = { model = b.model, hardware = b.hardware, gpus = gpus, replicas = b.replicas or 1, tp = b.tp or 1,
    pp = b.pp or 1, ep = b.ep or 1, policy = b.policy or names.serve_policy[1], draft_model = b.draft_model,
    clients = {}, requests_completed = r.requests_completed, throughput = r.throughput, kv_cache = r.kv_cache,
    preemptions = r.preemptions, iterations = r.iterations, busy_fraction = r.busy_fraction }
  for i, c in ipairs(cl) do p.clients[i] = c.name end
  local per = {}
  for i, c in ipairs(cl) do
    local cr = { model = c.model, pool = pool.name }
    -- (output tokens/s per GPU: the client's tokens over the pool's GPUs)
    for _, k in ipairs(CLIENT_FIELDS) do cr[k] = r.clients[i][k] end
    per[i] = cr
  end
  return p, per
end

-- run(a) -> {clients = {NAME = metrics}, pools = {NAME = pool metrics}, totals = {...}}:
-- every pool simulated, each client's metrics against its own SLOs; totals over the
-- cluster: requests, tokens and goodput summed, rates over the longest client's span,
-- output tokens/s per GPU over every pool's GPUs, SLO attainment over all requests.
function M.run(a)
  local cfg = a.checked or M.check(a)
  local out = { clients = {}, pools = {}, totals = {} }
  local req, good, in_tok, out_tok, dur, gpus, preempt = 0, 0, 0, 0, 0, 0, 0
  for _, pool in ipairs(cfg.pools) do
    local p, per = run_pool(pool, cfg.top)
    out.pools[pool.name] = p
    gpus, preempt = gpus + p.gpus, preempt + p.preemptions
    for i, c in ipairs(pool.clients) do
      local cr = per[i]
      out.clients[c.name] = cr
      local n = cr.requests_completed
      req = req + n
      good = good + cr.goodput.slo_attainment * n
      in_tok = in_tok + cr.throughput.input_tokens_per_s * cr.duration_s
      out_tok = out_tok + cr.throughput.output_tokens_per_s * cr.duration_s
      dur = math.max(dur, cr.duration_s)
    end
  end
  local t = out.totals
  t.requests_completed, t.duration_s, t.gpus, t.preemptions = req, dur, gpus, preempt
  t.throughput = { requests_per_s = dur > 0 and req / dur or 0, input_tokens_per_s = dur > 0 and in_tok / dur or 0,
    output_tokens_per_s = dur > 0 and out_tok / dur or 0 }
  t.throughput.output_tokens_per_s_per_gpu = t.throughput.output_tokens_per_s / gpus
  t.goodput = { requests_per_s = dur > 0 and good / dur or 0, slo_attainment = req > 0 and good / req or 0 }
  return out
end

-- from_doc(doc, path) -> run()'s argument from a loaded spec with `clients` (fathom
-- serve SPEC.yaml): checked here, so every refusal names its place in the file.
function M.from_doc(doc, path)
  local cfg = M.check(doc, path:match("^(.*/)[^/]*$") or "")
  return { clients = doc.clients, checked = cfg, doc = doc }
end

return M
