-- Search benchmark: wall time (an in-process monotonic clock), CPU time, strategies considered and
-- timed per second, and what the exact-pruning bounds skipped, for the reference searches.
-- Run: build/fathom bench/search_bench.lua [workers] [exhaustive|pruned] [offload=off]
--   workers     worker process counts, comma-separated (default 1,2: each search with one process,
--               then with two, interleaved so that both see the same load; 1 runs in-process only)
--   exhaustive  also run each search without the bounds (--no-prune), for before/after;
--               the 1T-MoE search then takes ~35 s on one core
--   offload=off (third argument) searches without offload, the space before issue 16's offload knob
-- wall: the in-process monotonic clock; cpu: CPU seconds of this process and its reaped workers (the
-- work itself, whatever else the machine runs). A benchmark, not a test: figures vary by machine and
-- load (the load average is printed with each row).
local core = require("fathom.core")
local proc = core.process
local search = require("fathom.search")

local counts = {}
for n in ((arg and arg[1]) or "1,2"):gmatch("%d+") do counts[#counts + 1] = tonumber(n) end
local exhaustive = arg and arg[2] == "exhaustive"
local offload_off = arg and arg[3] == "offload=off"

local function loadavg()
  local lf = io.open("/proc/loadavg")
  local s = lf and lf:read("l") or "?"
  if lf then lf:close() end
  return s:match("^(%S+)") or s
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

print(string.format("%-48s %-5s %5s %10s %9s %10s %9s %8s %8s %12s %12s %5s", "search", "prune", "procs",
  "considered", "timed", "skipped", "refs", "wall", "cpu", "timed/s", "considered/s", "load"))
for _, c in ipairs(cases) do
  local a = c[2]
  a.workload = "train_specs/search_default.yaml"
  a.top = 10
  if offload_off then
    a.fix = a.fix or {}
    a.fix.offload = "off"
  end
  for _, prune in ipairs(exhaustive and { "off", "on" } or { "on" }) do
    a.prune = prune
    local def = search.prepare(a)
    for _, jobs in ipairs(counts) do
      local t0, c0 = core.monotonic_s(), proc.cpu()
      local res = search.run(def, jobs, false)
      local dt, cpu = core.monotonic_s() - t0, proc.cpu() - c0
      local s = res.stats
      -- processes it ran in: one below search.MIN_WORK_PER_PROCESS (README "Strategy search")
      local procs = require("fathom.parallel").processes(jobs, search.work(def), search.MIN_WORK_PER_PROCESS)
      print(string.format("%-48s %-5s %5d %10d %9d %10d %9d %7.2fs %7.2fs %12.0f %12.0f %5s", c[1], prune, procs,
        s.considered, s.evaluated, s.pruned or 0, s.bound_evals or 0, dt, cpu, s.evaluated / dt, s.considered / dt,
        loadavg()))
    end
  end
end
