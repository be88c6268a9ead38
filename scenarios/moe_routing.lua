-- How routing skew slows an MoE step: hot-expert weight swept through the router and the step model.
-- Usage: fathom scenario run moe_routing
local fathom = require("fathom")
local tablefmt = require("fathom.format.table")
local units = require("fathom.units")

local rows = {}
for _, hot in ipairs({ 0.125, 0.3, 0.5, 0.7, 0.9 }) do
  local sc = fathom.scenario({
    hardware = "hardware_specs/hardware_library.yaml",
    physical = "topology_zoo/physical/hot_interconnects_2025/passage_physical_32768.yaml",
    logical = "topology_zoo/logical/hot_interconnects_2025/passage_logical_config_4__256_experts.yaml",
    model = "model_zoo/hot_interconnects_2025/gpt_moe_config_4__256_experts.yaml",
    workload = "train_specs/hot_interconnects_2025/train_spec.yaml",
  })
  -- 12.5% of the experts receive `hot` of the routings (hot = 0.125 is uniform)
  sc.workload.routing = { distribution = "hot", hot_ratio = 0.125, hot_weight = hot, seed = 1, tokens = 65536,
    placement = "contiguous" }
  local r = sc:evaluate()
  rows[#rows + 1] = { hot, string.format("%.2f", sc.workload.expert_imbalance), units.time(r.step_time_s),
    units.time(r.comm.ep.exposed_s) }
end
io.stdout:write(tablefmt.render({ "hot weight", "busiest EP rank / mean", "step", "exposed all-to-all" }, rows))
