-- Sweep benchmark: points per second written to CSV, on the C batch path (fathom.sweep_batch)
-- and on the per-point Lua path, GPT-3 175B on 1,024 A100s (seq_length x micro-batch).
-- Run: build/fathom bench/sweep_bench.lua [points]   (C path points; default 100,000; the Lua
-- path runs 1/50 of them). wall: an in-process monotonic clock; cpu: this process's CPU time.
-- Peak memory: run it under /usr/bin/time -f %M. A benchmark, not a test.
local core = require("fathom.core")
local analysis = require("fathom.analysis")

local points = tonumber(arg and arg[1]) or 100000
local C = "configs/"

local function run(n, force)
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
    pass_mode = "training", jobs = 1 }
  local t0, c0 = core.monotonic_s(), os.clock()
  local written
  if force == "c" then
    written = assert(analysis.write_batch(a, out, "csv"))
  else
    local records = analysis.run(a)
    require("fathom.output").write(records, "csv", out)
    written = #records
  end
  local dt, cpu = core.monotonic_s() - t0, os.clock() - c0
  os.remove(out)
  os.remove(sweep)
  return written, dt, cpu
end

print(string.format("%-28s %9s %8s %8s %12s %12s", "sweep to CSV", "points", "wall", "cpu", "points/s", "points/cpu-s"))
for _, case in ipairs({ { "C batch path", "c", points }, { "Lua path", "lua", math.max(4, points // 50) } }) do
  local n, dt, cpu = run(case[3], case[2])
  print(string.format("%-28s %9d %7.2fs %7.2fs %12.0f %12.0f", case[1], n, dt, cpu, n / dt, n / cpu))
end
