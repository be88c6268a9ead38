-- Parallel benchmark: the FullFlat co-design scenario (scenarios/fullflat, default size: 28
-- points, each a full strategy search) and a 1,920-point analyze sweep streamed to YAML, each
-- with 1 and 2 processes (fathom.parallel): wall time on the in-process monotonic clock, and
-- CPU seconds of the parent and its workers (the cost of the work itself, whatever else the
-- machine runs: on a busy machine the wall-clock speed-up says more about the others' load).
-- Run: build/fathom bench/parallel_bench.lua [process counts, default 1,2] (a benchmark, not a test).
local analysis = require("fathom.analysis")
local proc = require("fathom.core").process
local study = dofile("scenarios/fullflat/study.lua")

local counts = {}
for n in ((arg and arg[1]) or "1,2"):gmatch("%d+") do counts[#counts + 1] = tonumber(n) end

local T = "tests/fixtures/tiny/"
local sweep = os.tmpname()
local f = assert(io.open(sweep, "w"))
f:write("sweep:\n  workload_spec.micro_batch_size: [1, 2, 4]\n" ..
  "  workload_spec.seq_length: {start: 64, stop: 8192, step: 64}\n" ..
  "  workload_spec.global_batch_size: [8, 16, 32, 64, 128]\n")
f:close()

local cases = {
  { "FullFlat study, default size (searches)", function(jobs)
    return #study.run({ jobs = jobs }).points
  end },
  { "analyze sweep to YAML, toy model", function(jobs)
    local out = os.tmpname()
    local n = analysis.stream({ hardware_lib = T .. "hardware.yaml", physical = T .. "physical.yaml",
      logical = T .. "logical.yaml", workload = T .. "train.yaml", model = T .. "model.yaml", sweep = sweep,
      pass_mode = "training", jobs = jobs }, out, "yaml")
    os.remove(out)
    return n
  end },
}

local function loadavg()
  local lf = io.open("/proc/loadavg")
  local s = lf and lf:read("l") or "?"
  if lf then lf:close() end
  return s:match("^(%S+)") or s
end

print(string.format("%-40s %5s %6s %8s %9s %9s %8s %8s %5s", "work", "procs", "points", "wall", "points/s",
  "/s/proc", "speed-up", "CPU s", "load"))
for _, c in ipairs(cases) do
  local base
  for _, jobs in ipairs(counts) do
    local t0, c0 = proc.now(), proc.cpu()
    local n = c[2](jobs)
    local dt, cpu = proc.now() - t0, proc.cpu() - c0
    base = base or dt
    print(string.format("%-40s %5d %6d %7.2fs %9.1f %9.1f %7.2fx %7.2fs %5s", c[1], jobs, n, dt, n / dt, n / dt / jobs,
      base / dt, cpu, loadavg())) -- load: the 1-minute load average after the run (other users of the machine)
  end
end
os.remove(sweep)

-- Load balance of the study's split (fathom.parallel.split, weighted by each point's space as
-- study.run does, against plain round-robin): each point timed alone (CPU seconds), then the
-- busiest share; the wall-clock speed-up on an otherwise idle machine is at most total / busiest.
local parallel = require("fathom.parallel")
local search = require("fathom.search")
local pts = study.points("default")
local costs = {}
for i, p in ipairs(pts) do
  local c0 = proc.cpu()
  study.evaluate(p, "default")
  costs[i] = proc.cpu() - c0
end
for _, jobs in ipairs(counts) do
  for _, how in ipairs({ "round-robin", "weighted" }) do
    local plan = parallel.split(#pts, jobs, how == "weighted" and function(i)
      return search.work(study.def(pts[i], "default")) end or nil)
    local total, busiest = 0, 0
    for _, idx in ipairs(plan) do
      local t = 0
      for _, i in ipairs(idx) do t = t + costs[i] end
      total, busiest = total + t, math.max(busiest, t)
    end
    print(string.format("FullFlat study, %d process%s, %-11s: busiest share %.2f s of %.2f s CPU; " ..
      "idle-machine speed-up bound %.2fx", jobs, jobs == 1 and "" or "es", how, busiest, total, total / busiest))
  end
end
