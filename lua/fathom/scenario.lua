-- fathom.scenario: composing hardware, topologies, model and workload into
-- one evaluable scenario, and mapping the C core's complaints back to the
-- file, line and column they came from.
local core = require("fathom.core")
local errors = require("fathom.errors")
local names = require("fathom.names")
local passes = require("fathom.passes")
local spec = require("fathom.spec")

local M = {}

local TAG = names.key("logical_tag")

local Scenario = {}
Scenario.__index = Scenario
M.Scenario = Scenario

-- Split "a.b[2].c" into {"a", "b", 2, "c"}.
local function split_path(path)
  local out = {}
  for seg in path:gmatch("[^%.]+") do
    local name, rest = seg:match("^([^%[]*)(.*)$")
    if name ~= "" then out[#out + 1] = name end
    for idx in rest:gmatch("%[(%d+)%]") do out[#out + 1] = tonumber(idx) end
  end
  return out
end
M.split_path = split_path

-- Walk `doc` along `segs` from `first`; returns the deepest (table, key) that exists.
local function walk(doc, segs, first)
  local t, key = doc, nil
  for i = first or 1, #segs do
    local k = segs[i]
    if type(t) ~= "table" then break end
    key = k
    local v = t[k]
    if type(v) ~= "table" or i == #segs then break end
    t, key = v, nil
  end
  return t, key
end

-- locate(sc, path) -> "file:line:col" for a core error path, or nil.
function Scenario:locate(path)
  local segs = split_path(path)
  local head = segs[1]
  if head == "model" then
    local t, k = walk(self.model.source_table, segs, 2)
    return errors.where(t, k)
  elseif head == "workload" then
    local t, k = walk(self.workload.source_table, segs, 2)
    return errors.where(t, k)
  elseif head == "topology" then
    if segs[2] == "logical" then
      local t, k = walk(self.logical.source_table, segs, 3)
      return errors.where(t, k)
    end
    if segs[2] == "dimensions" and type(segs[3]) == "number" and segs[4] == "interconnect" then
      local dim = self.physical.dimensions[segs[3]]
      local ref = dim and dim.interconnect_ref
      local comp = ref and self.lib.doc.components.interconnect[ref]
      if comp then return errors.where(comp, segs[5]) end
    end
    local t, k = walk(self.physical.source_table, segs, 2)
    return errors.where(t, k)
  elseif head == "hardware" then
    local node = self.lib.nodes[self.physical.node_name]
    local comps = self.lib.doc.components
    if segs[2] == "device_compute" then
      return errors.where(comps.compute[node.device_compute], segs[3])
    elseif segs[2] == "device_memory_tiers" and segs[3] then
      local ref = node.device_memory_tiers[segs[3]]
      return errors.where(ref and comps.memory[ref] or node.source_table, segs[4])
    end
    return errors.where(node.source_table)
  end
  return nil
end

-- raise_core(e): a refusal raised by the core ({kind, path, msg}, see errors.is_core)
-- becomes an error of the same kind at the file position of its path, keeping its
-- parts (where, path, reason) for callers that show them; anything else is a bug and
-- is raised again as it is.
function Scenario:raise_core(e)
  if not errors.is_core(e) then error(e, 0) end
  local path, reason = e.path, e.msg
  local where = path ~= "" and self:locate(path) or nil
  -- Show the user's key path without our "workload."-style prefix when the file names it.
  local shown = where and path:gsub("^model%.", ""):gsub("^workload%.", ""):gsub("^topology%.", "")
    :gsub("^hardware%.", "") or path
  local parts = {}
  for _, part in ipairs({ where or false, shown ~= "" and shown or false, reason or false }) do
    if part then parts[#parts + 1] = part end
  end
  local out = errors.new(table.concat(parts, ": "), e.kind)
  out.where, out.path, out.reason = where, shown, reason
  error(out, 0)
end

-- new{hardware_lib=, physical=, logical=, workload=, model=, pass_mode=} -> scenario.
-- Each input is a path or an already-loaded table (sweeps pass modified copies).
function M.new(args)
  local self = setmetatable({}, Scenario)
  self.pass = passes.get(args.pass_mode)
  self.pass_mode = self.pass.name
  self.lib = type(args.hardware_lib) == "table" and args.hardware_lib.nodes and args.hardware_lib
    or spec.hardware_library(args.hardware_lib)
  self.physical = spec.physical(args.physical, self.lib)
  self.logical = spec.logical(args.logical, self.physical)
  self.model = spec.model(args.model)
  self.workload = self.pass.load(args.workload)
  self.files = {
    hardware_lib = type(args.hardware_lib) == "string" and args.hardware_lib or nil,
    physical = type(args.physical) == "string" and args.physical or nil,
    logical = type(args.logical) == "string" and args.logical or nil,
    workload = type(args.workload) == "string" and args.workload or nil,
    model = type(args.model) == "string" and args.model or nil,
  }
  return self
end

-- The expert-parallel degree of the logical topology (EP_SU x EP_SO).
function Scenario:ep_degree()
  local ep = 1
  for _, l in ipairs(self.logical.dimensions) do
    if l.logical_tag == TAG.EP_SU or l.logical_tag == TAG.EP_SO then ep = ep * l.size end
  end
  return ep
end

-- A routing distribution in moe_spec_v2.routing sets the imbalance: the busiest EP
-- rank's load over the mean, from routings drawn over the EP group (fathom.route).
function Scenario:apply_routing()
  local routing = self.workload.routing
  local m = self.model
  if not routing or (m.num_regular_experts or 0) <= 1 then return end
  local ep = self:ep_degree()
  if m.num_regular_experts % ep ~= 0 and ep % m.num_regular_experts ~= 0 then return end
  local imbalance, res = require("fathom.route").imbalance(routing, m.num_regular_experts,
    m.num_selected_experts, ep)
  self.workload.expert_imbalance = math.max(1.0, imbalance)
  self.routing_result = { gpu_imbalance = res.gpu_imbalance, expert_imbalance = res.expert_imbalance,
    distribution = routing.distribution, ep = ep }
  if routing.packet_simulation and self.pass.packet_simulation then self:simulate_all_to_all(routing, ep) end
end

-- Time one EP dispatch with the packet-level simulator (fathom.route): the tokens one
-- micro-batch sends from every EP rank, routed from the distribution, over the EP group's
-- levels as the core shares them (plan:group_levels, from a plan compiled without the
-- override): GPU ports inside the EP_SU group and between groups, shared max-min fairly by
-- the flows (route.step_mesh). Dispatch and combine are timed apart, each at its own width
-- (the dispatch at moe_dispatch_float_size_bytes with its 1x128 scales when narrower, the
-- combine at float_size_bytes: DeepSeek-V3 Sec. 3.3.2); the combine's matrix is the
-- dispatch's transposed, which on ports of the same bandwidth in and out takes the time of
-- the same matrix at the combine's width. The step model uses them instead of the
-- alpha-beta cost.
function Scenario:simulate_all_to_all(routing, ep)
  local w, m = self.workload, self.model
  local tp, cp = 1, 1
  for _, l in ipairs(self.logical.dimensions) do
    if l.logical_tag == TAG.TP_Attn then tp = tp * l.size end
    if l.logical_tag == TAG.CP then cp = cp * l.size end
  end
  local node = spec.node_table(self.lib, self.physical.node_name)
  local topo = spec.topology_table(self.physical, self.logical)
  local ok, plan = pcall(self.pass.compile, node, topo, self.model, w)
  if not ok then self:raise_core(plan) end
  local tokens = w.micro_batch_size * w.seq_length // (tp * cp) * ep
  local r = {}
  for k, v in pairs(routing) do r[k] = v end
  r.experts, r.top_k, r.gpus, r.tokens = m.num_regular_experts, m.num_selected_experts, ep, tokens
  r.packet_simulation, r.packet_size = nil, nil
  local route = require("fathom.route")
  local levels = plan:group_levels(names.key("comm_kind").ep)
  -- NCCL's all-to-all reaches a share of the scale-out rate; per-node dispatchers all of it
  local out_share = w.ep_dispatch_per_node and 1 or w.ep_a2a_scale_out_efficiency
  local function time(width)
    r.hidden, r.act_bytes = m.d_model, width
    local per_gpu = tokens // ep * m.num_selected_experts * m.d_model * width
    local mesh = route.step_mesh(levels, plan:degrees().ep_su, routing.packet_size, per_gpu, out_share)
    local router_def, mesh_def = route.config({ router = r, mesh = mesh })
    return route.run(router_def, mesh_def, nil)
  end
  local act = w.float_size_bytes
  local narrow = w.moe_dispatch_float_size_bytes
  local res = time(act)
  local dispatch = res
  if narrow and narrow < act then dispatch = time(narrow + core.defaults.moe.dispatch_scale_bytes) end
  w.ep_dispatch_sec, w.ep_combine_sec = dispatch.simulation.time_s, res.simulation.time_s
  self.routing_result.packet_simulation = { time_s = res.simulation.time_s, rounds = res.simulation.rounds,
    alpha_beta_s = res.alpha_beta_s, dispatch_s = dispatch.simulation.time_s,
    dispatch_rounds = dispatch.simulation.rounds }
end

-- compile() -> C plan (cached). Input problems the core finds become input errors.
function Scenario:compile()
  if self.plan then return self.plan end
  self:apply_routing()
  local node = spec.node_table(self.lib, self.physical.node_name)
  local topo = spec.topology_table(self.physical, self.logical)
  local ok, plan = pcall(self.pass.compile, node, topo, self.model, self.workload)
  if not ok then self:raise_core(plan) end
  -- ScaleScope's num_colocated_experts states the experts per XPU; it must agree with EP.
  local colocated = self.workload.num_colocated_experts
  local local_experts = plan:degrees().local_experts
  if colocated and (self.model.num_regular_experts or 0) > 1 and colocated ~= local_experts then
    local src = self.workload.source_table and self.workload.source_table.moe_spec_v2
    errors.at(src, "num_colocated_experts", "moe_spec_v2.num_colocated_experts",
      "%d experts per XPU, but %d experts over EP = %d puts %s on each (set it to that or to null)",
      colocated, self.model.num_regular_experts, self:ep_degree(),
      tostring(math.tointeger(local_experts) or local_experts))
  end
  self.plan = plan
  return plan
end

-- evaluate() -> raw result table from the core (SI units).
function Scenario:evaluate()
  return self:compile():evaluate()
end

return M
