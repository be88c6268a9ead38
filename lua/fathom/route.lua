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
local SCHED = names.key("route_scheduler")
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
  redundant_experts = { type = "integer", min = 0, default = 0,
    hint = "extra expert slots for eplb, a multiple of gpus" },
  seed = { type = "integer", min = 0, default = 1 },
  hidden = { type = "number", above = 0, default = 4096 },
  act_bytes = { type = "number", above = 0, default = 2 },
  weight_bytes = { type = "number", min = 0, default = 4 },
  expert_id_bytes = { type = "number", min = 0, default = 2 },
  id_bytes = { type = "number", min = 0, default = 4 },
}

-- The mesh's defaults are the core's (fth_mesh_def_default): a 450 GB/s NVLink-class port
-- per GPU inside a cluster of 8, a 400 Gb/s NIC per GPU between clusters.
local MD = core.mesh_defaults
M.mesh_defaults = MD

M.mesh_schema = {
  links = { type = "integer", min = 1, default = MD.links },
  link_bw = { type = "number", above = 0, default = MD.link_bw, hint = "bytes/s per link" },
  packet_size = { type = "number", above = 0, default = MD.packet_size, hint = "bytes" },
  packet_prep_delay = { type = "number", min = 0, default = MD.packet_prep_delay },
  base_delay = { type = "number", min = 0, default = MD.base_delay },
  initial_cpu_delay = { type = "number", min = 0, default = MD.initial_cpu_delay },
  nic_rate = { type = "number", min = 0, default = MD.nic_rate, hint = "bytes per round; 0 = unlimited" },
  round_robin_max_packets = { type = "integer", min = 0, default = MD.round_robin_max_packets },
  overlap_prep = { type = "boolean", default = MD.overlap_prep },
  cluster_size = { type = "integer", min = 0, default = MD.cluster_size },
  inter_bw = { type = "number", min = 0, default = MD.inter_bw },
  port_bw = { type = "number", min = 0, default = MD.port_bw, hint = "bytes/s per GPU per direction; 0 = no port" },
  inter_port_bw = { type = "number", min = 0, default = MD.inter_port_bw,
    hint = "bytes/s per GPU per direction; 0 = no port" },
  scheduler = { type = "string", choices = names.route_scheduler, default = MD.scheduler },
  seed_window = { type = "number", above = 0, default = MD.seed_window, hint = "seconds" },
}

-- Time bounds (README, "Limits"): the routing loop draws top-k experts per token
-- without replacement, redrawing duplicates; the packet simulation visits every pair
-- of GPUs every round. Work beyond these is refused before it starts.
M.MAX_ROUTING_WORK = 1.5e9 -- estimated draws x duplicate checks (about 5 s)
M.MAX_SIMULATION_WORK = 1e9 -- estimated rounds x GPU pairs (about 5 s)
M.MAX_TRACE_ROWS = 1e7 -- rows of a --trace file (about 400 MB of CSV)
M.MAX_TOP_K = 256
M.FAIR_COST = 4

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

-- The GPUs of one cluster (all of them when cluster_size is 0 or covers the mesh).
local function cluster_of(mesh, n)
  local c = mesh.cluster_size or 0
  if c > 0 and c < n then return c end
  return n
end

-- port_loads(mesh, matrix, n) -> {busiest, mean} per level (1: inside a cluster, 2: between
-- clusters) of the bytes a GPU sends or receives there, and the busiest GPU's off-node
-- bytes either way (the seed's load_per_node).
function M.port_loads(mesh, matrix, n)
  local c = cluster_of(mesh, n)
  local lv = { { busiest = 0, total = 0 }, { busiest = 0, total = 0 } }
  local node_max = 0
  for a = 1, n do
    local out, inn, all_out, all_in = { 0, 0 }, { 0, 0 }, 0, 0
    for b = 1, n do
      if a ~= b then
        local l = ((a - 1) // c ~= (b - 1) // c) and 2 or 1
        local o, i = matrix:get(a, b), matrix:get(b, a)
        out[l], inn[l] = out[l] + o, inn[l] + i
        all_out, all_in = all_out + o, all_in + i
      end
    end
    for l = 1, 2 do
      lv[l].busiest = math.max(lv[l].busiest, out[l], inn[l])
      lv[l].total = lv[l].total + out[l]
    end
    node_max = math.max(node_max, all_out, all_in)
  end
  for l = 1, 2 do lv[l].mean = lv[l].total / n end
  return lv, node_max
end

-- alpha_beta(mesh, matrix, n) -> seconds for the same exchange as one direct all-to-all
-- (fth_collective) over the mesh's levels: a switched level at the port bandwidth inside a
-- cluster (or the pair links' sum when ports are off) and one between clusters. The busiest
-- GPU sets the pace: the mean exchange scaled by the busiest port's load over the mean,
-- at the level where that is largest, so skew moves it as it moves the simulation.
function M.alpha_beta(mesh, matrix, n)
  if n < 2 then return 0 end
  local c = cluster_of(mesh, n)
  local round = mesh.base_delay + mesh.packet_prep_delay
  local inter = mesh.inter_bw > 0 and mesh.inter_bw or mesh.link_bw
  local levels = { { group_size = c, dim_size = c, type = TOPO.switched, latency_s = round + mesh.initial_cpu_delay,
    bw_bytes_per_s = mesh.port_bw > 0 and mesh.port_bw or mesh.links * mesh.link_bw * (c - 1) } }
  if c < n then
    levels[2] = { group_size = n // c, dim_size = n // c, type = TOPO.switched, latency_s = 0,
      bw_bytes_per_s = mesh.inter_port_bw > 0 and mesh.inter_port_bw or mesh.links * inter * (n - c) }
  end
  local lv = M.port_loads(mesh, matrix, n)
  local skew = 0
  for l = 1, #levels do
    if lv[l].mean > 0 then skew = math.max(skew, lv[l].busiest / lv[l].mean) end
  end
  local mean_rank = 0
  for l = 1, #levels do mean_rank = mean_rank + lv[l].mean end
  -- the byte convention counts a rank's own share: (n - 1) / n of it leaves
  local m = mean_rank * n / (n - 1) * skew
  return core.collective(OP.all_to_all, ALGO.direct, m, levels).time_s
end

-- raise_core(where, e): the core's refusal `e` as an input error under `where`; a bug
-- (anything that is not a core error value) is raised again unchanged.
function M.raise_core(where, e)
  if not errors.is_core(e) then error(e, 0) end
  error(errors.new(where .. ": " .. tostring(e), e.kind), 0)
end

-- check_simulation(mesh, matrix, n, trace): refuse a packet simulation whose work exceeds
-- MAX_SIMULATION_WORK, or whose trace would exceed MAX_TRACE_ROWS. Round robin visits every
-- pair every round: rounds (the busiest resource's, fathom's closed form) x pairs. The fair
-- scheduler recomputes the shares once per flow completion (at most twice per flow, at most
-- once per round), each O(n) passes of O(n): measured, about FAIR_COST times a round robin
-- round per pair (64 GPUs, 4,194,304 tokens, 64-byte packets: 7,904 share computations x
-- 4,032 pairs in 0.54 s).
function M.check_simulation(mesh, matrix, n, trace)
  if n < 2 then return end
  local ok, seconds, rounds = pcall(core.mesh_busiest, mesh, matrix)
  if not ok then errors.pass(seconds) end
  if not ok or rounds ~= rounds or rounds == 0 then return end -- the simulation reports the bad mesh
  local pairs_n = n * (n - 1)
  local rows = rounds * pairs_n
  local work = rows
  if mesh.scheduler == SCHED.fair then
    rows = math.min(rounds, 2 * pairs_n) * pairs_n
    work = M.FAIR_COST * rows
  end
  if work > M.MAX_SIMULATION_WORK then
    errors.raise("route: the packet simulation needs about %.3g pair-steps over %d GPU pairs, over the limit of " ..
      "%.3g (larger --packet-size, fewer --tokens or fewer --gpus)", work, pairs_n, M.MAX_SIMULATION_WORK)
  end
  if trace and rows > M.MAX_TRACE_ROWS then
    errors.raise("route: the trace would have about %.3g rows, over the limit of %.3g (larger --packet-size " ..
      "or fewer --tokens)", rows, M.MAX_TRACE_ROWS)
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
  -- fathom's closed form at the busiest resource (under even load: every pair the mean)
  local closed, rounds = core.mesh_busiest(mesh_def, matrix)
  local _, node_max = M.port_loads(mesh_def, matrix, n)
  local seed_s, seed_rounds = core.mesh_seed_closed_form(mesh_def, node_max)
  res.simulation = sim
  res.closed_form = { time_s = closed, rounds = rounds }
  res.seed_closed_form = { time_s = seed_s, rounds = seed_rounds, load_per_node_bytes = node_max }
  res.alpha_beta_s = M.alpha_beta(mesh_def, matrix, n)
  res.matrix = matrix
  return res
end

-- Effective per-GPU bandwidth of a direct all-to-all over `levels` (the core's rule for each
-- topology type, read back from core.collective rather than restated): the bytes that leave a
-- GPU over the transfer time.
local function a2a_port_bw(levels)
  local g = 1
  for _, l in ipairs(levels) do g = g * l.group_size end
  if g < 2 then return 0 end
  local probe = 1e9
  local r = core.collective(OP.all_to_all, ALGO.direct, probe, levels)
  return probe * (g - 1) / g / r.transfer_s
end

-- step_mesh(levels, ep_su, packet_size, bytes, out_share) -> the mesh for simulating an EP
-- all-to-all of `bytes` per GPU over the EP group's `levels` (plan:group_levels("ep"):
-- bandwidth after the logical dimensions' sharing, as the alpha-beta cost sees it). Inside the
-- scale-up group (EP_SU GPUs) a GPU's port is the scale-up level's all-to-all bandwidth and one
-- flow may use all of it (a switch); between groups, the scale-out levels' likewise, times
-- `out_share` (default 1): the share of it the dispatcher reaches (the workload's
-- ep_a2a_scale_out_efficiency for NCCL's all-to-all, as the core's alpha-beta cost takes it).
-- Flows share the ports max-min fairly (the fair scheduler). The latency the collective pays is
-- paid once: packets pipeline back to back.
function M.step_mesh(levels, ep_su, packet_size, bytes, out_share)
  local su, so, g = {}, {}, 1
  for _, l in ipairs(levels) do
    if g < ep_su then su[#su + 1] = l else so[#so + 1] = l end
    g = g * l.group_size
  end
  local up = #su > 0 and a2a_port_bw(su) or 0
  local out = #so > 0 and a2a_port_bw(so) * (out_share or 1) or 0
  local lat = core.collective(OP.all_to_all, ALGO.direct, bytes, levels)
  local mesh = { links = 1, packet_size = packet_size, initial_cpu_delay = lat.latency_s, scheduler = SCHED.fair,
    cluster_size = #so > 0 and ep_su or 0 }
  if up > 0 then
    mesh.link_bw, mesh.port_bw = up, up
    mesh.inter_bw, mesh.inter_port_bw = out > 0 and out or up, out > 0 and out or up
  else -- EP only across scale-out
    mesh.link_bw, mesh.port_bw, mesh.inter_bw, mesh.inter_port_bw = out, out, out, out
  end
  return mesh
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
