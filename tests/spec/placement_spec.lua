-- Rank-order placement (logical `placement: rank_order`, physical `num_xpus`): groups placed
-- as they fall on pods their degrees need not divide (fth_topology_place; README, Inputs).
local h = require("helpers")
local fathom = require("fathom")
local config = require("fathom.config")
package.path = "scenarios/?.lua;" .. package.path
local study = require("hoti25.study")

local T = "tests/fixtures/tiny/"

local write = h.write_temp

local function analyze(physical, logical)
  local r = h.run("analyze", "--hardware-lib", T .. "hardware.yaml", "--physical-topology", physical,
    "--logical-topology", logical, "--workload-spec", T .. "train.yaml", "--model-spec", T .. "model.yaml")
  return r
end

describe("rank-order placement", function()
  it("reproduces a layout that tiles its pods: Passage Config4 in rank order is the mapped one", function()
    -- Attention TP 8, DP 8, PP 8 inside a 512-GPU pod, DP 64 across; expert EP 64, PP 8 inside,
    -- DP 64 across (PP at stride 64 in both views): the same groups, levels and sharing.
    local p = study.paths("passage", 4, 256)
    local mapped = fathom.scenario(p):evaluate()
    p.logical = { name = "passage_rank_order", placement = "rank_order", dimensions = {
      { logical_tag = "TP_Attn", size = 8 }, { logical_tag = "DP_Attn", size = 8 },
      { logical_tag = "EP_SU", size = 64 }, { logical_tag = "PP", size = 8 },
      { logical_tag = "DP_Attn", size = 64 }, { logical_tag = "DP_MoE", size = 64 } } }
    local placed = fathom.scenario(p):evaluate()
    h.near(mapped.step_time_s, placed.step_time_s, 1e-12, "step")
    for _, k in ipairs({ "tp", "ep", "dp", "dp_moe", "pp" }) do
      h.near(mapped.comm[k].raw_s, placed.comm[k].raw_s, 1e-12, k)
    end
  end)

  it("places the alternative's Config1 EP groups of 32 on 144-GPU pods as counted", function()
    -- EP 32 at stride 1: boundaries 144 p (p = 1..227) fall inside a group unless 144 p is a
    -- multiple of 32 (p even): 114 of 1,024 groups straddle, each 16 | 16.
    h.placed_as(study.placement(1, 32).ep, 114, 1024, 16, 2)
  end)

  it("runs the 144-GPU alternative through analyze", function()
    local r = h.run("analyze", "--hardware-lib", "configs/hardware_specs/hardware_library.yaml",
      "--physical-topology", "configs/" .. study.paths("alternative", 4, 256).physical,
      "--logical-topology", "configs/" .. study.paths("alternative", 4, 256).logical,
      "--workload-spec", "configs/" .. study.paths("alternative", 4, 256).workload,
      "--model-spec", "configs/" .. study.paths("alternative", 4, 256).model, "--format", "json")
    assert.are.equal(0, r.code, r.stderr)
  end)

  it("refuses what it cannot place, one line each, exit 2", function()
    local phys = write("name: p\nnode_definition_ref: TOY\nnum_xpus: 3\ndimensions:\n" ..
      "  - {name: up, interconnect_name: scale_up, size: 2}\n  - {name: out, interconnect_name: scale_out, size: 2}\n")
    local mapped = write("dimensions:\n  - {logical_tag: TP_Attn, maps_to_physical_dimension_name: up, size: 2}\n")
    local r = analyze(phys, mapped)
    assert.are.equal(2, r.code)
    assert.matches("placement: .*runs 3 of its 4 GPUs %(num_xpus%).*set placement: rank_order", r.stderr)
    local named = write("placement: rank_order\ndimensions:\n" ..
      "  - {logical_tag: TP_Attn, maps_to_physical_dimension_name: up, size: 3}\n")
    r = analyze(phys, named)
    assert.are.equal(2, r.code)
    assert.matches("dimensions%[1%]%.maps_to_physical_dimension_name: placement: rank_order places", r.stderr)
    local bad = write("placement: rank_order\ndimensions:\n  - {logical_tag: TP_Attn, size: 2}\n")
    r = analyze(phys, bad)
    assert.are.equal(2, r.code)
    assert.matches("attention%-view degrees multiply to 2 but the job has 3 GPUs", r.stderr)
    local big = write("name: p\nnode_definition_ref: TOY\nnum_xpus: 5\ndimensions:\n" ..
      "  - {name: up, interconnect_name: scale_up, size: 2}\n  - {name: out, interconnect_name: scale_out, size: 2}\n")
    r = analyze(big, bad)
    assert.are.equal(2, r.code)
    assert.matches("num_xpus: 5 GPUs, but the dimensions hold 4", r.stderr)
    for _, f in ipairs({ phys, mapped, named, bad, big }) do os.remove(f) end
    local _ = config
  end)
end)
