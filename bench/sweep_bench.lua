-- Sweep benchmark: points per second written to CSV, on the C batch path (fathom.sweep_batch)
-- with one and two processes (--jobs) and on the per-point Lua path, and to YAML (readable
-- units, as `analyze --output-file F` writes) on both paths, GPT-3 175B on 1,024 A100s
-- (seq_length x micro-batch). Run: build/fathom bench/sweep_bench.lua [points]   (C path
-- points; default 200,000; the Lua path runs 1/100 of them). wall: the in-process monotonic
-- clock; cpu: CPU seconds of this process and its workers (core.process.cpu); load: the
-- 1-minute load average after the run (the machine is shared: wall rates move with it, CPU
-- rates much less). Peak memory: run it under /usr/bin/time -f %M. A benchmark, not a test.
local analysis = require("fathom.analysis")
local proc = require("fathom.core").process

local points = tonumber(arg and arg[1]) or 200000
local C = "configs/"

local function loadavg()
  local lf = io.open("/proc/loadavg")
  local s = lf and lf:read("l") or "?"
  if lf then lf:close() end
  return s:match("^(%S+)") or s
end

local function run(n, force, jobs, format)
  local seqs = n // 4
  local sweep = os.tmpname()
  local f = assert(io.open(sweep, "w"))
  f:write(string.format("sweep:\n  workload_spec.seq_length: {start: 1000, stop: %d}\n" ..
    "  workload_spec.micro_batch_size: [1, 2, 3, 4]\n", 1000 + seqs - 1))
  f:close()
  local out = os.tmpname()
  local a = { hardware_lib = C .. "hardware/hardware_library.yaml",
    physical = C .. "topology_zoo/physical/dgx_a100_1024.yaml", logical = C .. "topology_zoo/logical/tp8_pp8.yaml",
    model = C .. "models/gpt3_175b.yaml", workload = C .. "train_specs/gpt3_175b.yaml", sweep = sweep,
    pass_mode = "training", jobs = jobs }
  local t0, c0 = proc.now(), proc.cpu()
  local written, stats
  if force == "c" then
    written, stats = analysis.write_batch(a, out, format, true)
    assert(written)
  elseif format == "yaml" then
    written = analysis.stream(a, out, "yaml", require("fathom.report").humanize)
  else
    local records = analysis.run(a)
    require("fathom.output").write(records, "csv", out)
    written = #records
  end
  local dt, cpu = proc.now() - t0, proc.cpu() - c0
  os.remove(out)
  os.remove(sweep)
  return written, dt, cpu, stats
end

print(string.format("%-28s %5s %9s %8s %8s %12s %12s %5s", "sweep to", "procs", "points", "wall", "cpu",
  "points/s", "points/cpu-s", "load"))
for _, case in ipairs({ { "CSV, C batch path", "c", points, 1, "csv" }, { "CSV, C batch path", "c", points, 2, "csv" },
  { "CSV, Lua path", "lua", math.max(4, points // 100), 1, "csv" },
  { "YAML, C batch path", "c", math.max(4, points // 4), 1, "yaml" },
  { "YAML, Lua path", "lua", math.max(4, points // 100), 1, "yaml" } }) do
  local n, dt, cpu, stats = run(case[3], case[2], case[4], case[5])
  print(string.format("%-28s %5d %9d %7.2fs %7.2fs %12.0f %12.0f %5s", case[1], case[4], n, dt, cpu, n / dt, n / cpu,
    loadavg()))
  if stats then
    -- on an idle machine the ranges run side by side: the wall time is about the serial part
    -- (set-up, first pass, checks, the join) plus the busiest range, all in CPU seconds
    local busiest, sum, parts = 0, 0, {}
    for i, c in ipairs(stats.range_cpu) do
      busiest, sum, parts[i] = math.max(busiest, c), sum + c, string.format("%.2fs", c)
    end
    local serial = cpu - sum
    print(string.format("  ranges %s, serial %.2fs (join %.2fs): idle-machine estimate %.2fs, %.0f points/s",
      table.concat(parts, " + "), serial, stats.join_cpu, serial + busiest, n / (serial + busiest)))
  end
end
