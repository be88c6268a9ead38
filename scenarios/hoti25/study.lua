-- Hot Interconnects 2025: "Accelerating Frontier MoE Training with 3D Integrated Optics"
-- (Bernadskiy et al., Lightmatter; arXiv 2510.15893). Passage (512-GPU optical scale-up pods
-- at 32 Tb/s per GPU) against an electrical 2027-class alternative (144-GPU pods at
-- 14.4 Tb/s), four MoE configs of 32..256 experts, 32,768 GPUs. The alternative's pods are
-- modelled as 144 GPUs (ranks placed in order: 227 full pods and 80 GPUs of a 228th, groups
-- that straddle two pods costed as they fall) and, for the presentation's series, as the
-- 128-GPU slices it names ("4 pods x 128").
--
-- This module computes the comparison; compare.lua prints it. Every number comes from the
-- shipped configs through the C core: nothing here is tuned per case.
local fathom = require("fathom")

local M = {}

M.configs = { { 1, 32 }, { 2, 64 }, { 3, 128 }, { 4, 256 } }

-- The systems compared: physical topology file, logical-topology family.
M.systems = {
  alternative = { physical = "alternative_physical_32768_144", logical = "alternative144",
    label = "electrical 14.4 Tb/s, 144-GPU pods" },
  slices128 = { physical = "alternative_physical_32768", logical = "alternative",
    label = "electrical 14.4 Tb/s, 144-GPU pods (128 used)" },
  passage = { physical = "passage_physical_32768", logical = "passage",
    label = "Passage 32 Tb/s, 512-GPU pods" },
  matched = { physical = "passage_physical_32768_14p4", logical = "passage",
    label = "optical 14.4 Tb/s, 512-GPU pods (matched radix)" },
}

M.published = {
  config4_speedup = 2.7,        -- Passage vs alternative, Config4 (paper)
  matched_radix_speedup = 1.4,  -- 512-GPU pods, 32 vs 14.4 Tb/s (paper)
  series = { copper_4x128 = 1.00, optical_512_14p4 = 0.60, optical_512_32 = 0.37 }, -- presentation
}

local function paths(system, k, experts)
  local s = M.systems[system]
  local zoo = "topology_zoo/"
  return {
    hardware = "hardware_specs/hardware_library.yaml",
    physical = zoo .. "physical/hot_interconnects_2025/" .. s.physical .. ".yaml",
    logical = string.format("%slogical/hot_interconnects_2025/%s_logical_config_%d__%d_experts.yaml", zoo,
      s.logical, k, experts),
    model = string.format("model_zoo/hot_interconnects_2025/gpt_moe_config_%d__%d_experts.yaml", k, experts),
    workload = "train_specs/hot_interconnects_2025/train_spec.yaml",
  }
end
M.paths = paths

-- evaluate(system, k, experts) -> raw result of one case.
function M.evaluate(system, k, experts)
  return fathom.scenario(paths(system, k, experts)):evaluate()
end

local function split(r)
  return {
    time_to_train_s = r.total_time_s,
    step_s = r.step_time_s,
    compute_s = r.compute_s + r.memory_exposed_s + r.optimizer_s,
    exposed_tp_s = r.comm.tp.exposed_s + r.comm.tp_moe.exposed_s,
    exposed_ep_s = r.comm.ep.exposed_s,
    exposed_dp_s = r.comm.dp.exposed_s + r.comm.dp_moe.exposed_s,
    exposed_pp_s = r.comm.pp.exposed_s,
    bubble_s = r.bubble_s,
    fits = r.memory.fits,
  }
end

-- run() -> {rows = {...}, config4_speedup, matched_radix_speedup, series = {...}}
-- How the alternative's Config-k groups fall on its 144-GPU pods (fth_topology_place): per
-- communication kind {size, groups, straddling, cross_fraction, pods, levels}.
function M.placement(k, experts)
  local plan = fathom.scenario(paths("alternative", k, experts)):compile()
  local out = {}
  for _, kind in ipairs({ "tp", "ep", "dp", "dp_moe", "pp" }) do out[kind] = plan:placement(kind) end
  return out
end

-- run() -> {rows = {...}, config4_speedup, config4_speedup_128, matched_radix_speedup, series}.
-- The paper's speed-up is against the alternative as it is (144-GPU pods); the
-- presentation's series names its baseline "copper 14.4 Tb/s, 4 pods x 128": the slices.
function M.run()
  local out = { rows = {} }
  for _, c in ipairs(M.configs) do
    local k, e = c[1], c[2]
    local row = { config = k, experts = e }
    for name in pairs(M.systems) do row[name] = split(M.evaluate(name, k, e)) end
    row.speedup = row.alternative.time_to_train_s / row.passage.time_to_train_s
    row.speedup_128 = row.slices128.time_to_train_s / row.passage.time_to_train_s
    row.matched_speedup = row.matched.time_to_train_s / row.passage.time_to_train_s
    out.rows[k] = row
  end
  local c4 = out.rows[4]
  out.config4_speedup = c4.speedup
  out.config4_speedup_128 = c4.speedup_128
  out.matched_radix_speedup = c4.matched_speedup
  out.series = {
    copper_4x128 = 1.0,
    optical_512_14p4 = c4.matched.time_to_train_s / c4.slices128.time_to_train_s,
    optical_512_32 = c4.passage.time_to_train_s / c4.slices128.time_to_train_s,
  }
  return out
end

return M
