-- The Hot Interconnects 2025 study under the MoE mechanisms its configs do not switch on
-- (README, "The canned study"): each alone on Config4, the published ratios' four numbers.
package.path = "scenarios/?.lua;" .. package.path
local study = require("hoti25.study")
local fathom = require("fathom")
local config = require("fathom.config")
local h = require("helpers")

local function ttt(system, wmod, pmod)
  local p = study.paths(system, 4, 256)
  local w = config.load_mapping("configs/" .. p.workload, "training workload spec")
  local ph = config.load_mapping("configs/" .. p.physical, "physical topology")
  if wmod then wmod(w) end
  if pmod then pmod(ph) end
  p.workload, p.physical = w, ph
  return fathom.scenario(p):evaluate().total_time_s
end

-- Speed-up against the alternative's 144-GPU pods, the matched radix, and the series against
-- the presentation's "4 pods x 128" (study.run's ratios).
local function ratios(wmod, pmod)
  local a, m, pa = ttt("alternative", wmod, pmod), ttt("matched", wmod, pmod), ttt("passage", wmod, pmod)
  local s = ttt("slices128", wmod, pmod)
  return { a / pa, m / pa, m / s, pa / s }
end

local variants = {
  { "as shipped", { 2.98, 1.46, 0.57, 0.39 } },
  { "routing drawn (uniform), a2a simulated", { 2.88, 1.46, 0.58, 0.40 }, function(w)
    w.moe_spec_v2.routing = { distribution = "uniform", packet_simulation = true }
    w.moe_spec_v2.expert_imbalance = nil
  end },
  { "EP kernels hold 20 of 132 SMs (DeepEP)", { 2.83, 1.41, 0.58, 0.41 },
    function(w) w.moe_comm_compute_fraction = 20 / 132 end },
  { "EP not overlapped (alltoall dispatcher)", { 2.91, 1.43, 0.58, 0.40 }, function(w) w.ep_comm_overlap = false end },
  { "per-node dispatch (DeepEP normal kernels)", { 1.78, 1.46, 0.83, 0.57 },
    function(w) w.ep_dispatch_per_node = true end },
  { "links shared by traffic (fathom default)", { 1.95, 1.18, 0.71, 0.60 }, nil,
    function(p) p.bandwidth_by_traffic = true end },
  { "NCCL a2a at 0.75 of scale-out (default)", { 3.57, 1.46, 0.49, 0.34 },
    function(w) w.ep_a2a_scale_out_efficiency = nil end },
}

describe("HotI 2025 under the MoE mechanisms, Config4", function()
  local f = assert(io.open("README.md", "rb"))
  local readme = f:read("a")
  f:close()
  for _, v in ipairs(variants) do
    it(v[1], function()
      local got = ratios(v[3], v[4])
      if os.getenv("FATHOM_PRINT") then
        print(string.format("%-40s  %.2fx  %.2fx  %.2f / %.2f", v[1], got[1], got[2], got[3], got[4]))
      end
      for i = 1, 4 do h.near(v[2][i], got[i], 0.005 / v[2][i] + 1e-9, v[1] .. " #" .. i) end
      local line = string.format("%-40s  %.2fx  %.2fx  %.2f / %.2f", v[1], got[1], got[2], got[3], got[4])
      assert.is_truthy(readme:find(line, 1, true), "README lacks: " .. line)
    end)
  end

  it("the README's comparison block is what the scenario prints", function()
    local r = h.run("scenario", "run", "hoti25")
    assert.are.equal(0, r.code, r.stderr)
    local block = assert(readme:match("\n(                                              fathom   published\n.-)```"))
    for line in block:gmatch("([^\n]+)\n") do
      assert.is_truthy(r.stdout:find(line, 1, true), "not printed: " .. line)
    end
  end)
end)
