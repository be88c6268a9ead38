-- Search benchmark: wall time and strategies timed per second of the reference
-- searches, with 2 worker processes. Run: build/fathom bench/search_bench.lua [workers]
-- (a benchmark, not a test: figures vary by machine).
local search = require("fathom.search")

local workers = tonumber(arg and arg[1]) or 2

local function now()
  local p = io.popen("date +%s.%N")
  local t = tonumber(p:read("a"))
  p:close()
  return t
end

local cases = {
  { "GPT-3 175B, 1,024 A100 (8-GPU pods)", { model = "gpt3_175b", node = "A100_80GB_SXM", gpus = 1024,
    pod_size = 8, global_batch = 1536, seq = 2048 } },
  { "GPT-3 175B, 4,096 A100, wide space (mb 1..64)", { model = "gpt3_175b", node = "A100_80GB_SXM", gpus = 4096,
    pod_size = 8, global_batch = 4096, seq = 2048, fix = { mb = { 1, 2, 4, 8, 16, 32, 64 } } } },
  { "Llama-3.1 405B, 16,384 H100, seq 8192", { model = "llama3.1_405b", node = "H100_SXM", gpus = 16384,
    pod_size = 8, global_batch = 2048, seq = 8192 } },
  { "DeepSeek-V3, 2,048 H800", { model = "deepseek_v3", node = "H800_SXM", gpus = 2048, pod_size = 8,
    global_batch = 4096, seq = 4096 } },
  { "MT-NLG 530B, 5,128 A100, batch <= 2520 (down)", { model = "megatron_gpt_530b", node = "A100_80GB_SXM",
    gpus = 5128, pod_size = 8, global_batch = 2520, seq = 2048, batch_rounding = "down" } },
  { "1T-parameter MoE, 32,768 GPUs, 512-GPU pods", {
    model = "model_zoo/hot_interconnects_2025/gpt_moe_config_4__256_experts.yaml", node = "XPU_2027",
    gpus = 32768, pod_size = 512, global_batch = 16384, seq = 8192 } },
}

print(string.format("%-48s %12s %12s %9s %14s %14s", "search", "considered", "timed", "wall", "timed/s",
  "considered/s"))
for _, c in ipairs(cases) do
  local a = c[2]
  a.workload = "train_specs/search_default.yaml"
  a.top = 10
  local def = search.prepare(a)
  local t0 = now()
  local res = search.run(def, workers)
  local dt = now() - t0
  print(string.format("%-48s %12d %12d %8.2fs %14.0f %14.0f", c[1], res.stats.considered, res.stats.evaluated,
    dt, res.stats.evaluated / dt, res.stats.considered / dt))
end
