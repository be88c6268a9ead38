-- Serving simulation benchmark (not a test): build/fathom bench/serve_bench.lua [requests]
-- 1. requests simulated per second through a continuous-batching engine (Llama 3.1 70B, TP 4
--    on H100, every iteration costed by the core), for each batching policy;
-- 2. the capacity search for Llama 3.1 70B on 8 H100s: TP 1/2/4/8 x (8 / TP) replicas x
--    the continuous and chunked policies, each a --find-max-qps bisection (Vidur-Search
--    takes about an hour of CPU for its equivalent, Agrawal et al. 2024).
local serve = require("fathom.serve")

local function now()
  return os.clock() -- CPU time of this process: the simulation is single-threaded
end

local n = math.tointeger(tonumber(arg and arg[1] or "") or 1000000) or 1000000
local plan = serve.engine({ model = "llama3.1_70b", hardware = "H100_SXM", tp = 4 })
for _, policy in ipairs(require("fathom.names").serve_policy) do
  local t0 = now()
  local r = serve.run({ plan = plan, requests = n, rate_per_s = 14, policy = policy, max_batch_tokens = 2048,
    input = "lognormal:mean=512,sigma=0.5", output = "lognormal:mean=128,sigma=0.5" })
  local dt = now() - t0
  print(string.format("%-10s %d requests, %d iterations (mean batch %.1f): %.2f s CPU, %.0f requests/s, " ..
    "%.0f iterations/s", policy, n, r.iterations, r.mean_batch.requests, dt, n / dt, r.iterations / dt))
end

local t0 = now()
local rows, sims = {}, 0
for _, tp in ipairs({ 1, 2, 4, 8 }) do
  local p = serve.engine({ model = "llama3.1_70b", hardware = "H100_SXM", tp = tp })
  for _, policy in ipairs({ "continuous", "chunked" }) do
    local rate, _, steps = serve.find_max_qps({ plan = p, replicas = 8 // tp, requests = 1000, policy = policy,
      max_batch_tokens = 2048, input = "lognormal:mean=1024,sigma=0.5", output = "lognormal:mean=256,sigma=0.5",
      slo_ttft_s = 0.5, slo_tpot_s = 0.05 })
    sims = sims + #steps
    rows[#rows + 1] = string.format("  TP %d x %d replicas, %-10s %7.2f requests/s", tp, 8 // tp, policy, rate)
  end
end
local dt = now() - t0
print(string.format("capacity search, Llama 3.1 70B on 8 H100 (TTFT 0.5 s, TPOT 50 ms, 90%%): " ..
  "8 deployments, %d simulations of 1,000 requests: %.2f s CPU", sims, dt))
print(table.concat(rows, "\n"))
