-- fathom.route: MoE routing and all-to-all, the policy around core.route and
-- core.mesh_simulate: defaults, checking a config (flags or YAML), the alpha-beta
-- comparison, and turning a routing distribution into a step model's imbalance.
local check = require("fathom.check")
local core = require("fathom.core")
local errors = require("fathom.errors")
local names = require("fathom.names")

local M = {}

local DIST = names.key("route_distribution")
local PLACE = names.key("route_placement")
local TOPO = names.key("topology_type")
local OP = names.key("collective_op")
local ALGO = names.key("collective_algorithm")

local fraction = { type = "number", above = 0, max = 1, hint = "a fraction in (0, 1]" }

M.router_schema = {
  tokens = { type = "integer", min = 1, default = 65536 },
  experts = { type = "integer", min = 1, default = 64 },
  top_k = { type = "integer", min = 1, default = 8 },
  gpus = { type = "integer", min = 1, default = 8 },
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

-- run(router, mesh, trace) -> result table with loads, imbalance, closed form,
-- simulated and alpha-beta times. `trace` = {path =, format =} or nil.
function M.run(router, mesh, trace)
  local ok, res, matrix = pcall(core.route, router)
  if not ok then M.raise_core("route", res) end
  local n = router.gpus
  local mesh_def = {}
  for k, v in pairs(mesh) do mesh_def[k] = v end
  mesh_def.nodes = n
  local tmp
  if trace then tmp = trace.path .. ".tmp" end
  local sok, sim = pcall(core.mesh_simulate, mesh_def, matrix, tmp, trace and trace.format or "csv")
  if not sok then
    if tmp then os.remove(tmp) end
    M.raise_core("route", sim)
  end
  if tmp then
    local rok, rerr = os.rename(tmp, trace.path)
    if not rok then
      os.remove(tmp)
      errors.raise("route: cannot write '%s': %s", trace.path, tostring(rerr))
    end
  end
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
  local ok, res = pcall(core.route, r)
  if not ok then M.raise_core("moe_spec_v2.routing", res) end
  return res.gpu_imbalance, res
end

return M
