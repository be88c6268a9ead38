-- How routing skew slows an MoE step, and what expert placement wins back: hot-expert weight
-- swept through the router and the step model (HotI Passage, config 4: 256 experts, EP 64),
-- with experts placed contiguously and by EPLB (64 redundant experts, one more slot per GPU),
-- the all-to-all timed by alpha-beta and by the fair packet simulation.
-- Usage: fathom scenario run moe_routing
local fathom = require("fathom")
local tablefmt = require("fathom.format.table")
local units = require("fathom.units")

local function evaluate(hot, placement, sim)
  local sc = fathom.scenario({
    hardware = "hardware_specs/hardware_library.yaml",
    physical = "topology_zoo/physical/hot_interconnects_2025/passage_physical_32768.yaml",
    logical = "topology_zoo/logical/hot_interconnects_2025/passage_logical_config_4__256_experts.yaml",
    model = "model_zoo/hot_interconnects_2025/gpt_moe_config_4__256_experts.yaml",
    workload = "train_specs/hot_interconnects_2025/train_spec.yaml",
  })
  -- 12.5% of the experts receive `hot` of the routings (hot = 0.125 is uniform)
  sc.workload.routing = { distribution = "hot", hot_ratio = 0.125, hot_weight = hot, seed = 1, tokens = 65536,
    placement = placement, redundant_experts = placement == "eplb" and 64 or 0, hot_replicas = 2, zipf_s = 1,
    packet_simulation = sim, packet_size = 65536 }
  local r = sc:evaluate()
  return sc.workload.expert_imbalance, r
end

local rows = {}
for _, hot in ipairs({ 0.125, 0.3, 0.5, 0.7, 0.9 }) do
  local imb, r = evaluate(hot, "contiguous", false)
  local eimb, er = evaluate(hot, "eplb", false)
  local _, sr = evaluate(hot, "contiguous", true)
  rows[#rows + 1] = { hot, string.format("%.2f", imb), units.time(r.step_time_s), units.time(r.comm.ep.exposed_s),
    units.time(sr.comm.ep.exposed_s), string.format("%.2f", eimb), units.time(er.step_time_s) }
end
io.stdout:write(tablefmt.render({ "hot weight", "busiest EP rank / mean", "step", "exposed all-to-all",
  "(simulated)", "EPLB: busiest / mean", "EPLB: step" }, rows))
