-- Trace benchmark (not a test): the Hot Interconnects 2025 Config4 step (Passage, 256 experts,
-- 32,768 GPUs) written as Chakra traces, in full (one file per rank) and in class form (one per
-- pipeline stage), with wall time, bytes and the process's peak resident memory.
-- Run: build/fathom bench/trace_bench.lua [DIR] [full|classes|both]   (DIR default: $TMPDIR/fathom-trace-bench;
-- the full set is about 9 GB and is removed afterwards). Targets (issue 19): full < 2 min and
-- < 200 MiB; class form < 5 s.
local study = dofile("scenarios/hoti25/study.lua")
local trace = require("fathom.trace")

local dir = arg and arg[1] or ((os.getenv("TMPDIR") or "/tmp") .. "/fathom-trace-bench")
local which = arg and arg[2] or "both"

local function now()
  local p = io.popen("date +%s.%N")
  local t = tonumber(p:read("a"))
  p:close()
  return t
end

local function peak_rss_mib()
  local f = io.open("/proc/self/status")
  if not f then return 0 end
  local s = f:read("a")
  f:close()
  return (tonumber(s:match("VmHWM:%s*(%d+)")) or 0) / 1024
end

local function rm(p) os.execute("rm -rf '" .. p:gsub("'", "'\\''") .. "'") end

local p = study.paths("passage", 4, 256)
local t0 = now()
local tr = trace.compile({ hardware_lib = p.hardware, physical = p.physical, logical = p.logical,
  workload = p.workload, model = p.model, pass_mode = "training" })
local info = tr:info()
print(string.format("HotI Config4 (Passage, 256 experts): %d ranks, PP %d, %d micro-batches; compiled in %.2f s",
  info.ranks, info.stages, info.microbatches, now() - t0))

local function run(label, opts)
  rm(dir)
  local t = now()
  local s = trace.write_chakra(tr, dir, opts)
  local dt = now() - t
  print(string.format("%-12s %6d files %12.0f nodes %9.1f MiB %8.2f s %10.0f nodes/s   peak RSS %.0f MiB",
    label, s.files, s.nodes, s.bytes / 2 ^ 20, dt, s.nodes / dt, peak_rss_mib()))
  rm(dir)
end

if which == "classes" or which == "both" then run("class form", { classes = true }) end
if which == "full" or which == "both" then run("full", {}) end
