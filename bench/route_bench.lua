-- Routing and all-to-all benchmark (not a test): build/fathom bench/route_bench.lua
-- Times are CPU seconds from os.clock() in this process (no subprocess per reading).
local core = require("fathom.core")

local function timed(f)
  local t0 = os.clock()
  local a, b = f()
  return os.clock() - t0, a, b
end

local dt, res = timed(function()
  return core.route({ tokens = 1000000, experts = 256, top_k = 8, gpus = 64, hidden = 7168,
    distribution = "hot", hot_ratio = 0.1, hot_weight = 0.3 })
end)
print(string.format("route 1,000,000 tokens top-8 over 256 experts on 64 GPUs: %.3f s (%.0f routings/s)",
  dt, res.pairs / dt))

dt, res = timed(function()
  return core.route({ tokens = 1000000, experts = 256, top_k = 8, gpus = 64, hidden = 7168,
    distribution = "hot", hot_ratio = 0.1, hot_weight = 0.3, placement = "eplb", redundant_experts = 64 })
end)
print(string.format("the same with EPLB, 64 redundant experts: %.3f s (busiest GPU / mean %.3f)", dt,
  res.gpu_imbalance))

-- 64-GPU all-to-all of 1 GiB in total: 65,536 tokens x 8 x 2 KiB payload
local matrix
res, matrix = core.route({ tokens = 65536, experts = 256, top_k = 8, gpus = 64, hidden = 1024 })
local seed_fabric = { links = 1, link_bw = 50e9, packet_size = 4096, port_bw = 0, cluster_size = 0,
  scheduler = "round_robin" }
local sim
dt, sim = timed(function() return core.mesh_simulate(seed_fabric, matrix) end)
print(string.format("round robin, 64-GPU full mesh of 50 GB/s pair links, %.2f GiB (%d packets, %d rounds): %.3f s",
  res.total_bytes / 2 ^ 30, sim.packets, sim.rounds, dt))
dt, sim = timed(function() return core.mesh_simulate({}, matrix) end)
print(string.format("fair shares, the defaults (8 x 450 GB/s NVLink domains, 400 Gb/s NICs): %d rounds in %d " ..
  "share computations: %.3f s", sim.rounds, sim.events, dt))
dt, sim = timed(function() return core.mesh_simulate({ packet_size = 256 }, matrix) end)
print(string.format("the same with 256-byte packets (%d rounds, %d share computations): %.3f s", sim.rounds,
  sim.events, dt))
