-- fathom.route: MoE routing and all-to-all, the policy around core.route and
-- core.mesh_simulate: defaults, checking a config (flags or YAML), the alpha-beta
-- comparison, and turning a routing distribution into a step model's imbalance.
local check = require("fathom.check")
local core = require("fathom.core")
local errors = require("fathom.errors")
local names = require("fathom.names")
local output = require("fathom.output")

local M = {}

local DIST = names.key("route_distribution")
local PLACE = names.key("route_placement")
local TOPO = names.key("topology_type")
local OP = names.key("collective_op")
local ALGO = names.key("collective_algorithm")

local fraction = { type = "number", above = 0, max = 1, hint = "a fraction in (0, 1]" }

M.router_schema = {
  tokens = { type = "integer", min = 1, default = 65536 },
  experts = { type = "integer", min = 1, max = 4096, default = 64 },
  top_k = { type = "integer", min = 1, max = 256, default = 8 },
  gpus = { type = "integer", min = 1, max = 1024, default = 8 },
  distribution = { type = "string", choices = names.route_distribution, default = DIST.uniform },
  hot_ratio = fraction,
  hot_weight = { type = "number", min = 0, max = 1, hint = "a fraction in [0, 1]" },
  zipf_s = { type = "number", min = 0 },
  histogram = { type = "list", hint = "one weight per expert" },
  placement = { type = "string", choices = names.route_placement, default = PLACE.contiguous },
  hot_replicas = { type = "integer", min = 1 },
  seed = { type = "integer", min = 0, default = 1 },
  hidden = { type = "number", above = 0, default = 4096 },
  act_bytes = { type = "number", above = 0, default = 2 },
  weight_bytes = { type = "number", min = 0, default = 4 },
  expert_id_bytes = { type = "number", min = 0, default = 2 },
  id_bytes = { type = "number", min = 0, default = 4 },
}

M.mesh_schema = {
  links = { type = "integer", min = 1, default = 1 },
  link_bw = { type = "number", above = 0, default = 50e9, hint = "bytes/s per link" },
  packet_size = { type = "number", above = 0, default = 4096, hint = "bytes" },
  packet_prep_delay = { type = "number", min = 0, default = 0 },
  base_delay = { type = "number", min = 0, default = 0 },
  initial_cpu_delay = { type = "number", min = 0, default = 0 },
  nic_rate = { type = "number", min = 0, default = 0, hint = "bytes per round; 0 = unlimited" },
  round_robin_max_packets = { type = "integer", min = 0, default = 0 },
  overlap_prep = { type = "boolean", default = false },
  cluster_size = { type = "integer", min = 0, default = 0 },
  inter_bw = { type = "number", min = 0, default = 0 },
}

-- Time bounds (README, "Limits"): the routing loop draws top-k experts per token
-- without replacement, redrawing duplicates; the packet simulation visits every pair
-- of GPUs every round. Work beyond these is refused before it starts.
M.MAX_ROUTING_WORK = 1.5e9 -- estimated draws x duplicate checks (about 5 s)
M.MAX_SIMULATION_WORK = 1e9 -- estimated rounds x GPU pairs (about 5 s)
M.MAX_TRACE_ROWS = 1e7 -- rows of a --trace file (about 400 MB of CSV)
M.MAX_TOP_K = 256

-- The normalised routing weights of a router, heaviest first (as fth_route draws them).
local function weights(r)
  local E, w = r.experts, {}
  if r.distribution == DIST.hot then
    local n_hot = math.max(1, math.floor(r.hot_ratio * E + 0.5))
    local n_cold = E - n_hot
    for i = 1, E do
      if i <= n_hot then w[i] = n_cold > 0 and r.hot_weight / n_hot or 1 / E
      else w[i] = (1 - r.hot_weight) / n_cold end
    end
  elseif r.distribution == DIST.zipf then
    for i = 1, E do w[i] = 1 / (i ^ (r.zipf_s or 1)) end
  elseif r.distribution == DIST.histogram then
    for i = 1, E do w[i] = tonumber(r.histogram[i]) or 0 end
  else
    for i = 1, E do w[i] = 1 end
  end
  table.sort(w, function(a, b) return a > b end)
  local sum = 0
  for i = 1, E do sum = sum + w[i] end
  for i = 1, E do w[i] = sum > 0 and w[i] / sum or 0 end
  return w
end

-- check_work(router, t, path): refuse a routing that cannot draw top_k distinct
-- experts, or whose expected work (the core's redraw loop, worst case: the heaviest
-- experts already taken) exceeds MAX_ROUTING_WORK. `t` is the table for positions.
function M.check_work(r, t, path)
  path = path or "router"
  if r.top_k > M.MAX_TOP_K then
    errors.at(t, "top_k", path .. ".top_k", "expected at most %d, got %d", M.MAX_TOP_K, r.top_k)
  end
  if r.distribution == "histogram" and type(r.histogram) == "table" then
    for i, v in ipairs(r.histogram) do
      if type(v) ~= "number" or v ~= v or v < 0 or v == math.huge then
        errors.at(r.histogram, i, string.format("%s.histogram[%d]", path, i),
          "expected a weight >= 0, got %s", check.describe(v))
      end
    end
  end
  local w = weights(r)
  local positive = 0
  for _, x in ipairs(w) do if x > 0 then positive = positive + 1 end end
  if positive < r.top_k then
    errors.at(t, "top_k", path .. ".top_k", "top_k %d needs %d experts with a positive weight, the %s " ..
      "distribution gives %d", r.top_k, r.top_k, r.distribution, positive)
  end
  local per_token, taken, K = 0, 0, r.top_k
  for j = 1, K do
    local left = 1 - taken
    local tries = left > 0 and 1 / left or math.huge
    if tries > 64 * K then per_token = per_token + 64 * K * j + r.experts * j / 8
    else per_token = per_token + tries * j end
    taken = taken + w[j]
  end
  local work = per_token * r.tokens
  if work > M.MAX_ROUTING_WORK then
    errors.at(t, "tokens", path .. ".tokens", "routing %d tokens to top-%d of %d experts (%s) is about %.3g " ..
      "draws, over the limit of %.3g (fewer tokens or a smaller top_k)", r.tokens, K, r.experts, r.distribution,
      work, M.MAX_ROUTING_WORK)
  end
end

-- config(t, path) -> router, mesh: a {router = {...}, mesh = {...}} table checked
-- against the schemas (positions kept when it came from a file).
function M.config(t, path)
  check.fields(t, path or "", { router = { type = "table", default = {} }, mesh = { type = "table", default = {} },
    description = { type = "string" } })
  local router = check.fields(t.router or {}, "router", M.router_schema)
  local mesh = check.fields(t.mesh or {}, "mesh", M.mesh_schema)
  if router.top_k > router.experts then
    errors.at(t.router, "top_k", "router.top_k", "top_k %d exceeds the %d experts", router.top_k, router.experts)
  end
  if router.distribution == DIST.hot then
    router.hot_ratio = router.hot_ratio or 0.25
    router.hot_weight = router.hot_weight or 0.5
  end
  if router.distribution == DIST.histogram and (router.histogram == nil or #router.histogram ~= router.experts) then
    errors.at(t.router or t, "histogram", "router.histogram", "expected %d weights (one per expert)", router.experts)
  end
  M.check_work(router, t.router, "router")
  return router, mesh
end

-- alpha_beta(router, mesh, result) -> seconds for the same exchange as one
-- direct all-to-all on a full mesh (fth_collective), the busiest sender's bytes.
function M.alpha_beta(mesh, matrix, n)
  local busiest = 0
  for s = 1, n do
    local row = 0
    for d = 1, n do row = row + matrix:get(s, d) end
    if row > busiest then busiest = row end
  end
  if n < 2 then return 0 end
  local round = mesh.base_delay + mesh.packet_prep_delay
  local level = { group_size = n, dim_size = n, type = TOPO.mesh, bw_bytes_per_s = mesh.links * mesh.link_bw * (n - 1),
    latency_s = round + mesh.initial_cpu_delay }
  return core.collective(OP.all_to_all, ALGO.direct, busiest, { level }).time_s
end

-- raise_core(where, e): the core's refusal `e` as an input error under `where`; a bug
-- (anything that is not a core error value) is raised again unchanged.
function M.raise_core(where, e)
  if not errors.is_core(e) then error(e, 0) end
  error(errors.new(where .. ": " .. tostring(e), e.kind), 0)
end

-- check_simulation(mesh, matrix, n, trace): refuse a packet simulation whose
-- rounds (the busiest pair's bytes at one pair's rate, the closed form's count)
-- times the GPU pairs exceed MAX_SIMULATION_WORK, or whose trace would exceed
-- MAX_TRACE_ROWS.
function M.check_simulation(mesh, matrix, n, trace)
  local busiest = 0
  for s = 1, n do
    for d = 1, n do
      if s ~= d then busiest = math.max(busiest, matrix:get(s, d)) end
    end
  end
  if n < 2 or busiest == 0 then return end
  local ok, seconds, rounds = pcall(core.mesh_closed_form, mesh, busiest)
  if not ok then errors.pass(seconds) end
  if not ok or rounds ~= rounds then return end -- the simulation reports the bad mesh
  local pairs_n = n * (n - 1)
  if rounds * pairs_n > M.MAX_SIMULATION_WORK then
    errors.raise("route: the packet simulation needs about %.3g rounds over %d GPU pairs, over the limit of " ..
      "%.3g pair-rounds (larger --packet-size, fewer --tokens or fewer --gpus)", rounds, pairs_n,
      M.MAX_SIMULATION_WORK)
  end
  if trace and rounds * pairs_n > M.MAX_TRACE_ROWS then
    errors.raise("route: the trace would have about %.3g rows, over the limit of %.3g (larger --packet-size " ..
      "or fewer --tokens)", rounds * pairs_n, M.MAX_TRACE_ROWS)
  end
end

-- run(router, mesh, trace) -> result table with loads, imbalance, closed form,
-- simulated and alpha-beta times. `trace` = {path =, format =} or nil.
function M.run(router, mesh, trace)
  local ok, res, matrix = pcall(core.route, router)
  if not ok then M.raise_core("route", res) end
  local n = router.gpus
  local mesh_def = {}
  for k, v in pairs(mesh) do mesh_def[k] = v end
  mesh_def.nodes = n
  M.check_simulation(mesh_def, matrix, n, trace)
  local tmp
  if trace then tmp = output.temp_path(trace.path) end
  local sok, sim = pcall(core.mesh_simulate, mesh_def, matrix, tmp, trace and trace.format or "csv")
  if not sok then
    if tmp then output.discard(tmp) end
    M.raise_core("route", sim)
  end
  if tmp then output.commit(tmp, trace.path) end
  -- The closed form assumes every pair carries the mean off-node load.
  local pairs_n = n * (n - 1)
  local mean_pair = pairs_n > 0 and res.offnode_bytes / pairs_n or 0
  local closed, rounds = core.mesh_closed_form(mesh_def, mean_pair)
  res.simulation = sim
  res.closed_form = { time_s = closed, rounds = rounds, bytes_per_pair = mean_pair }
  res.alpha_beta_s = M.alpha_beta(mesh, matrix, n)
  res.matrix = matrix
  return res
end

-- imbalance(routing, model, ep) -> busiest EP rank's load / mean, from routing drawn
-- with the model's experts and top-k over the EP group: what a step model uses
-- instead of a fixed expert_imbalance.
function M.imbalance(routing, experts, top_k, ep)
  local r = {}
  for k, v in pairs(routing) do r[k] = v end
  r.experts, r.top_k, r.gpus = experts, top_k, ep
  r.tokens = r.tokens or 65536
  r.hidden = 1
  M.check_work(r, nil, "moe_spec_v2.routing")
  local ok, res = pcall(core.route, r)
  if not ok then M.raise_core("moe_spec_v2.routing", res) end
  return res.gpu_imbalance, res
end

return M
