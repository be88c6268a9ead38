-- ASTRA-sim replay (opt-in, not a test): writes fathom's Chakra traces of the 16-GPU trace job
-- (tests/fixtures/chakra) under 1F1B, interleaved and DualPipe with ASTRA-sim's configuration
-- files (--astra-configs), replays each with ASTRA-sim's analytical backend and prints its step
-- time next to fathom's (the step model's and the Perfetto timeline's).
-- Run: build/fathom bench/astra_replay.lua /path/to/AstraSim_Analytical_Congestion_Unaware [DIR]
-- (ASTRA-sim: ./build/astra_analytical/build.sh -t congestion_unaware in its checkout; README
-- "Execution traces"). ASTRA-sim prints "sys[r] finished, N cycles" per rank; the analytical
-- backend counts a cycle per nanosecond, so the step is the largest N in ns.
local trace = require("fathom.trace")
local fmt = require("fathom.format.trace")

local bin = arg and arg[1]
if not bin then
  io.stderr:write("usage: build/fathom bench/astra_replay.lua ASTRA_SIM_BINARY [DIR]\n")
  os.exit(2)
end
local dir = arg[2] or ((os.getenv("TMPDIR") or "/tmp") .. "/fathom-astra-replay")
local F = "tests/fixtures/chakra/"

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
os.execute("mkdir -p " .. q(dir))

local cases = { { "1F1B", "train.yaml" }, { "interleaved v = 2", "train_interleaved.yaml" },
  { "DualPipe", "train_dualpipe.yaml" } }
print(string.format("%-18s %14s %14s %14s %8s", "schedule", "fathom step", "timeline", "ASTRA-sim", "ratio"))
for _, c in ipairs(cases) do
  local a = { hardware_lib = "tests/fixtures/tiny/hardware.yaml", physical = F .. "physical.yaml",
    logical = F .. "logical.yaml", workload = F .. c[2], model = F .. "model.yaml", pass_mode = "training" }
  local tr, raw = trace.compile(a)
  local out = dir .. "/" .. c[2]:gsub("%.yaml$", "")
  os.execute("rm -rf " .. q(out))
  trace.write_chakra(tr, out, { astra_configs = true })
  local p = out .. "/fathom"
  local cmd = table.concat({ q(bin), "--workload-configuration=" .. q(p),
    "--comm-group-configuration=" .. q(p .. ".comm_groups.json"),
    "--system-configuration=" .. q(p .. ".system.json"),
    "--remote-memory-configuration=" .. q(p .. ".remote_memory.json"),
    "--network-configuration=" .. q(p .. ".network.yml") }, " ") .. " 2>&1"
  local h = assert(io.popen(cmd))
  local log = h:read("a")
  h:close()
  local worst, ranks = 0, 0
  for cycles in log:gmatch("finished, (%d+) cycles") do
    ranks = ranks + 1
    worst = math.max(worst, tonumber(cycles))
  end
  local _, t_end = fmt.pipeline_events(tr, raw.result)
  local step = raw.result.step_time_s
  if ranks ~= tr:info().ranks then
    print(string.format("%-18s %11.3f ms %11.3f ms  ASTRA-sim finished %d of %d ranks; its log's end:\n%s", c[1],
      step * 1e3, t_end * 1e3, ranks, tr:info().ranks, log:sub(-800)))
  else
    print(string.format("%-18s %11.3f ms %11.3f ms %11.3f ms %8.3f", c[1], step * 1e3, t_end * 1e3, worst * 1e-6,
      worst * 1e-9 / step))
  end
end
