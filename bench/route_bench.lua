-- Routing and all-to-all benchmark (not a test): build/fathom bench/route_bench.lua
local core = require("fathom.core")

local function now()
  local p = io.popen("date +%s.%N")
  local t = tonumber(p:read("a"))
  p:close()
  return t
end

local t0 = now()
local res = core.route({ tokens = 1000000, experts = 256, top_k = 8, gpus = 64, hidden = 7168,
  distribution = "hot", hot_ratio = 0.1, hot_weight = 0.3 })
local t1 = now()
print(string.format("route 1,000,000 tokens top-8 over 256 experts on 64 GPUs: %.3f s (%.0f routings/s)",
  t1 - t0, res.pairs / (t1 - t0)))

-- 64-node all-to-all of 1 GiB in total: 65,536 tokens x 8 x 2 KiB payload
local matrix
res, matrix = core.route({ tokens = 65536, experts = 256, top_k = 8, gpus = 64, hidden = 1024 })
t0 = now()
local sim = core.mesh_simulate({ links = 1, link_bw = 50e9, packet_size = 4096 }, matrix)
t1 = now()
print(string.format("simulate a 64-node all-to-all of %.2f GiB (%d packets, %d rounds): %.3f s",
  res.total_bytes / 2 ^ 30, sim.packets, sim.rounds, t1 - t0))
t0 = now()
sim = core.mesh_simulate({ links = 1, link_bw = 50e9, packet_size = 256 }, matrix)
t1 = now()
print(string.format("the same with 256-byte packets (%d packets, %d rounds): %.3f s", sim.packets, sim.rounds, t1 - t0))
