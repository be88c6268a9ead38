-- fathom.parallel: work over several processes with the answer of one (local workers
-- forked by the host, or MPI ranks in a build with -DFATHOM_MPI=ON).
local core = require("fathom.core")
local errors = require("fathom.errors")
local parallel = require("fathom.parallel")
local h = require("helpers")

local T = "tests/fixtures/tiny/"

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- A 192-point sweep of the toy model (micro-batch 3 does not tile batch 8, 16 or 32: error records).
local SWEEP = "sweep:\n  workload_spec.micro_batch_size: [1, 2, 3]\n" ..
  "  workload_spec.seq_length: {start: 256, stop: 4096, step: 256}\n" ..
  "  workload_spec.global_batch_size: [8, 16, 24, 32]\n"

local function analyze_args(sweep, extra)
  local a = { "analyze", "--hardware-lib", T .. "hardware.yaml", "--physical-topology", T .. "physical.yaml",
    "--logical-topology", T .. "logical.yaml", "--workload-spec", T .. "train.yaml",
    "--model-spec", T .. "model.yaml", "--sweep-config", sweep }
  for _, x in ipairs(extra or {}) do a[#a + 1] = x end
  return a
end

local SEARCH = { "search", "--model", "gpt3_175b", "--hardware", "A100_80GB_SXM", "--gpus", "1024",
  "--global-batch", "1536", "--seq", "2048", "--format", "json", "--top", "50" }

local function with(list, extra)
  local out = { table.unpack(list) }
  for _, x in ipairs(extra) do out[#out + 1] = x end
  return table.unpack(out)
end

describe("fathom.core.process and fathom.core.mpi", function()
  it("fork, write, read_all, wait: a child's bytes and exit status come back to the parent", function()
    local proc = core.process
    local pid, fd = proc.fork()
    if pid == 0 then
      proc.write(fd, string.rep("x", 200000) .. "done") -- past a pipe's 64 KiB: read_all loops
      proc.close(fd)
      proc.exit(3)
    end
    local text = proc.read_all(fd)
    assert.are.equal(200004, #text)
    assert.are.equal("done", text:sub(-4))
    local how, code = proc.wait(pid)
    assert.are.equal("exit", how)
    assert.are.equal(3, code)
    assert.is_true(proc.pid() > 1 and proc.pid() ~= pid)
    local t0, c0 = proc.now(), proc.cpu()
    os.execute("sleep 0.05")
    local dt = proc.now() - t0
    assert.is_true(dt >= 0.05 and dt < 5, "monotonic clock: " .. dt)
    local spin = proc.now() + 0.05
    while proc.now() < spin do end -- CPU time: at least most of a 50 ms spin (a busy machine takes some)
    assert.is_true(proc.cpu() - c0 > 0.005 and proc.cpu() - c0 < 5)
  end)

  it("kill: a child ended by SIGKILL reads as that signal", function()
    local proc = core.process
    local pid, fd = proc.fork()
    if pid == 0 then
      pcall(function() while true do proc.pid() end end) -- until killed (never back into busted)
      proc.exit(0)
    end
    assert.is_true(proc.kill(pid, proc.SIGKILL))
    proc.close(fd)
    local how, sig = proc.wait(pid)
    assert.are.equal("signal", how)
    assert.are.equal(proc.SIGKILL, sig)
  end)

  it("mpi outside mpirun: not active; one rank of one; abort ends the process with its code", function()
    assert.is_false(core.mpi.active())
    core.mpi.finalize() -- nothing started: nothing to do
    if not core.mpi.available then assert.are.same({ "x" }, core.mpi.allgather("x")) end
    local script = os.tmpname() .. ".lua"
    write(script, "local m = require('fathom.core').mpi\n" ..
      "if not m.available then local r, n = m.init(true); assert(r == 0 and n == 1) end\n" ..
      "m.abort(3, 'fathom: rank 0 of 1: bye')\n")
    local r = h.run("run", script)
    os.remove(script)
    assert.are.equal(3, r.code)
    assert.are.equal("fathom: rank 0 of 1: bye\n", r.stderr)
  end)
end)

describe("fathom.parallel", function()
  describe("#encode() / #decode()", function()
    it("brings values back exactly: integer vs float, every bit, odd strings, key order", function()
      local ordered = require("fathom.format.util").ordered
      local v = {
        1, 2.0, -0.0, 0.1, 1 / 3, 2 ^ -1074, 1.7976931348623157e308, math.maxinteger, math.mininteger,
        1 / 0, -1 / 0, "a\0b\n\"\\\255", true, false,
        nested = ordered({ z = 1, a = { 3, 4 }, ["not an id"] = 5, ["end"] = 6 }, { "z", "a" }),
        empty = require("fathom.format.util").array({}),
        [7.5] = "float key", [true] = "bool key",
      }
      local back = parallel.decode(parallel.encode(v))
      for i = 1, 11 do
        assert.are.equal(math.type(v[i]), math.type(back[i]), "type of " .. i)
        assert.are.equal(string.format("%a", v[i]), string.format("%a", back[i]), "bits of " .. i)
      end
      assert.are.equal(v[12], back[12])
      assert.is_true(back[13])
      assert.is_false(back[14])
      assert.are.same({ "z", "a" }, getmetatable(back.nested).__order)
      assert.are.same(v.nested, back.nested)
      assert.is_true(getmetatable(back.empty).__array)
      assert.are.equal("float key", back[7.5])
      assert.are.equal("bool key", back[true])
      local nan = parallel.decode(parallel.encode(0 / 0))
      assert.is_true(nan ~= nan)
    end)

    it("refuses what cannot travel", function()
      assert.error_matches(function() parallel.encode({ f = print }) end, "cannot send a function")
      local loop = {}
      loop.self = loop
      assert.error_matches(function() parallel.encode(loop) end, "nested over 200 deep")
    end)
  end)

  describe("#map()", function()
    it("returns fn's results in input order for any number of processes, nil results included", function()
      local points = {}
      for i = 1, 23 do points[i] = i end
      local function fn(x, i)
        if x % 5 == 0 then return nil end
        return { x = x * 1.1, i = i, pid = core.process.pid() }
      end
      local one = parallel.map(points, fn, { jobs = 1 })
      for _, jobs in ipairs({ 2, 3, 7 }) do
        local many = parallel.map(points, fn, { jobs = jobs })
        local pids = {}
        for i = 1, 23 do
          if i % 5 == 0 then
            assert.is_nil(many[i])
          else
            assert.are.equal(one[i].x, many[i].x)
            assert.are.equal(i, many[i].i)
            pids[many[i].pid] = true
          end
        end
        local n = 0
        for _ in pairs(pids) do n = n + 1 end
        assert.are.equal(jobs, n, "processes that did work") -- round-robin: every process gets points
      end
    end)

    it("keeps a map nested in a worker's share in that worker", function()
      local outer = parallel.map({ 1, 2 }, function(x)
        local pids = parallel.map({ 1, 2, 3 }, function() return core.process.pid() end, { jobs = 3 })
        return { pids[1] == pids[2] and pids[2] == pids[3] and pids[1] == core.process.pid(), x }
      end, { jobs = 2 })
      assert.are.same({ { true, 1 }, { true, 2 } }, outer)
      assert.are.equal(3, parallel.processes(3, 100)) -- and outside, parallel again
    end)

    it("splits round-robin, or weighted heaviest first to the least-loaded share (by hand)", function()
      assert.are.same({ { 1, 3, 5 }, { 2, 4 } }, parallel.split(5, 2))
      -- weights 5 1 1 1 4 2: 1 -> A (5), 5 -> B (4), 6 -> B (6), 2 -> A (6), 3 -> A (7; tie, first), 4 -> B (7)
      local w = { 5, 1, 1, 1, 4, 2 }
      assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 } }, parallel.split(6, 2, function(i) return w[i] end))
      local out = parallel.map({ 10, 20, 30, 40, 50, 60 }, function(x) return x + 1 end,
        { jobs = 2, weight = function(_, i) return w[i] end })
      assert.are.same({ 11, 21, 31, 41, 51, 61 }, out)
    end)

    it("is fathom.parallel in the scripting API", function()
      assert.are.equal(parallel, require("fathom").parallel)
      assert.are.same({ 2, 4 }, require("fathom").parallel.map({ 1, 2 }, function(x) return 2 * x end, { jobs = 2 }))
    end)

    it("uses fewer processes than asked when there are few points per process", function()
      assert.are.equal(1, parallel.processes(4, 10, 32))
      assert.are.equal(2, parallel.processes(4, 64, 32))
      assert.are.equal(4, parallel.processes(4, 1000, 32))
    end)

    it("a worker's error names the worker; an input error stays one (exit 2)", function()
      local points = { 1, 2, 3, 4 }
      local ok, err = pcall(parallel.map, points, function(x)
        if x == 4 then error("boom", 0) end
        return x
      end, { jobs = 2 })
      assert.is_false(ok)
      assert.is_true(parallel.is_worker_error(err))
      assert.matches("^worker 2 of 2 %(pid %d+%) failed: boom$", tostring(err))
      ok, err = pcall(parallel.map, points, function(x)
        if x == 2 then errors.raise("bad input at %d", x) end
        return x
      end, { jobs = 2 })
      assert.is_false(ok)
      assert.is_true(errors.is_input(err))
      assert.are.equal("bad input at 2", tostring(err))
    end)

    it("a worker killed by SIGKILL ends the map with the worker, the pid and the signal", function()
      local ok, err = pcall(parallel.map, { 1, 2, 3 }, function(x)
        if x == 3 then core.process.kill(core.process.pid(), core.process.SIGKILL) end
        return x
      end, { jobs = 3 })
      assert.is_false(ok)
      assert.matches("^worker 3 of 3 %(pid %d+%) was killed by signal 9 %(SIGKILL%)$", tostring(err))
    end)
  end)
end)

describe("--jobs", function()
  it("analyze: a sweep's records are byte-identical with 1 and 2 processes (yaml, json, csv, table, svg)", function()
    local sweep = os.tmpname()
    write(sweep, SWEEP)
    for _, fmt in ipairs({ "yaml", "json", "csv", "table", "svg" }) do
      local outs = {}
      for _, jobs in ipairs({ "1", "2" }) do
        local out = os.tmpname()
        local r = h.run(table.unpack(analyze_args(sweep, { "--jobs", jobs, "--format", fmt, "--output-file", out })))
        assert.are.equal(0, r.code, r.stderr)
        outs[jobs] = read(out)
        os.remove(out)
      end
      assert.is_true(#outs["1"] > 5000, fmt)
      assert.are.equal(outs["1"], outs["2"], fmt)
    end
    local r1 = h.run(table.unpack(analyze_args(sweep, { "--jobs", "1" })))
    local r2 = h.run(table.unpack(analyze_args(sweep, { "--jobs", "2" })))
    os.remove(sweep)
    assert.are.equal(0, r2.code, r2.stderr)
    assert.matches("invalid", r1.stdout) -- the sweep holds error records, and they come back in place
    assert.are.equal(r1.stdout, r2.stdout)
  end)

  it("analyze: a sweep with no valid point is refused the same way with 1 and 2 processes (exit 2, no file)",
    function()
      local sweep, out = os.tmpname(), os.tmpname()
      os.remove(out)
      -- micro-batch 3 tiles none of the batches: 64 points, every one an error record
      write(sweep, "sweep:\n  workload_spec.micro_batch_size: [3]\n" ..
        "  workload_spec.seq_length: {start: 256, stop: 4096, step: 256}\n" ..
        "  workload_spec.global_batch_size: [8, 16, 32, 64]\n")
      local r1 = h.run(table.unpack(analyze_args(sweep, { "--jobs", "1", "--output-file", out })))
      local r2 = h.run(table.unpack(analyze_args(sweep, { "--jobs", "2", "--output-file", out })))
      os.remove(sweep)
      assert.are.equal(2, r1.code)
      assert.matches("no point of the 64%-point sweep is valid", r1.stderr)
      assert.are.equal(r1.code, r2.code)
      assert.are.equal(r1.stderr, r2.stderr)
      assert.is_false(exists(out))
    end)

  it("search: the ranking and its counts are byte-identical with 1 and 2 processes (--workers too)", function()
    local one = h.run(with(SEARCH, { "--jobs", "1" }))
    local two = h.run(with(SEARCH, { "--jobs", "2" }))
    local alias = h.run(with(SEARCH, { "--workers", "2" }))
    assert.are.equal(0, one.code, one.stderr)
    -- PP 64 joins (96 layers split unevenly), and PP 2 in 7 or 49 chunks (96 + 2 = 98: the
    -- embedding and the loss in chunks of their own)
    assert.matches('"considered": 325704', one.stdout)
    assert.are.equal(one.stdout, two.stdout)
    assert.are.equal(one.stdout, alias.stdout)
  end)

  it("a worker killed by SIGKILL: a message naming it, exit 1, no output file", function()
    local sweep, out = os.tmpname(), os.tmpname()
    os.remove(out)
    -- 18,432 points: long enough for a worker to be found and killed even when the machine
    -- is idle and each evaluates fast (1,152 finished first at times under ctest -j2, and
    -- 4,608 once beside a sanitizer build)
    local batches = "global_batch_size: {start: 8, stop: 3072, step: 8}"
    write(sweep, (SWEEP:gsub("global_batch_size: %[8, 16, 24, 32%]", batches)))
    local args = analyze_args(sweep, { "--jobs", "2", "--format", "yaml", "--output-file", out })
    -- the per-point path, whose workers take rounds of points (the C batch path, which a
    -- training sweep to YAML takes, keeps a sweep this small in one process)
    local parts = { "env", "FATHOM_SWEEP_BATCH=0", h.shell_quote(h.bin()) }
    for _, a in ipairs(args) do parts[#parts + 1] = h.shell_quote(a) end
    local err = os.tmpname()
    -- start it, wait for a worker (a child of the fathom process), SIGKILL that child alone
    local script = table.concat(parts, " ") .. " 2>" .. err .. " & p=$!; i=0; " ..
      "while [ $i -lt 400 ]; do c=$(pgrep -P $p | head -n 1); " ..
      "if [ -n \"$c\" ]; then kill -9 $c; break; fi; sleep 0.01; i=$((i+1)); done; wait $p; echo $?"
    local sh = io.popen(script)
    local code = tonumber(sh:read("a"))
    sh:close()
    local msg = read(err)
    os.remove(err)
    os.remove(sweep)
    assert.are.equal(1, code, msg)
    assert.matches("^fathom: worker 2 of 2 %(pid %d+%) was killed by signal 9 %(SIGKILL%)\n$", msg)
    assert.is_false(exists(out))
    local dir = out:match("^(.*)/") or "."
    local p = io.popen("ls -a " .. h.shell_quote(dir) .. " | grep -c " .. h.shell_quote(out:match("[^/]*$")))
    local left = tonumber(p:read("a"))
    p:close()
    assert.are.equal(0, left, "temporary files left beside the output")
  end)
end)

-- MPI: only in a build with -DFATHOM_MPI=ON and with mpirun on the path (`make mpi` runs these).
local MPIRUN = { "mpirun", "--allow-run-as-root", "--oversubscribe", "-n", "4" }
local function have_mpirun()
  local p = io.popen("command -v mpirun 2>/dev/null")
  local s = p:read("a")
  p:close()
  return s ~= ""
end
local mpi_ok = core.mpi.available and have_mpirun()

-- mpi(args...) -> {code, stdout, stderr}: the host under mpirun with 4 ranks.
local function mpi(...)
  local parts = {}
  for _, a in ipairs(MPIRUN) do parts[#parts + 1] = a end
  parts[#parts + 1] = h.shell_quote(h.bin())
  for _, a in ipairs({ ... }) do parts[#parts + 1] = h.shell_quote(a) end
  local out, err = os.tmpname(), os.tmpname()
  local _, _, code = os.execute(table.concat(parts, " ") .. " >" .. out .. " 2>" .. err)
  local r = { code = code, stdout = read(out), stderr = read(err) }
  os.remove(out)
  os.remove(err)
  return r
end

describe("mpirun -n 4 #mpi", function()
  if not mpi_ok then
    pending("needs a build with -DFATHOM_MPI=ON and mpirun (make mpi)")
    return
  end

  it("analyze: the sweep's output file and summary are byte-identical to one process", function()
    local sweep = os.tmpname()
    write(sweep, SWEEP)
    local one, four = os.tmpname(), os.tmpname()
    local r1 = h.run(table.unpack(analyze_args(sweep, { "--jobs", "1", "--format", "yaml", "--output-file", one })))
    local r4 = mpi(table.unpack(analyze_args(sweep, { "--format", "yaml", "--output-file", four })))
    assert.are.equal(0, r1.code, r1.stderr)
    assert.are.equal(0, r4.code, r4.stderr)
    assert.are.equal(read(one), read(four))
    assert.are.equal(r1.stderr:gsub(one, "F"), r4.stderr:gsub(four, "F")) -- rank 0 alone reports
    local t1 = h.run(table.unpack(analyze_args(sweep, { "--jobs", "1" })))
    local t4 = mpi(table.unpack(analyze_args(sweep)))
    os.remove(one)
    os.remove(four)
    os.remove(sweep)
    assert.are.equal(t1.stdout, t4.stdout) -- printed once, by rank 0
  end)

  it("search: byte-identical to one process", function()
    local one = h.run(with(SEARCH, { "--jobs", "1" }))
    local four = mpi(with(SEARCH, {}))
    assert.are.equal(0, four.code, four.stderr)
    assert.are.equal(one.stdout, four.stdout)
  end)

  it("fathom.parallel.map shares the points over the ranks, round-robin, results in order", function()
    local script = os.tmpname() .. ".lua"
    write(script, [[
local p = require("fathom.parallel")
local r = p.map({ 10, 20, 30, 40, 50, 60, 70, 80 }, function(x, i) return { x = x, i = i, rank = p.rank() } end)
for _, v in ipairs(r) do io.write(v.x, ":", v.i, ":", v.rank, " ") end
io.write(p.size(), "\n")
]])
    local r = mpi("run", script)
    os.remove(script)
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("10:1:0 20:2:1 30:3:2 40:4:3 50:5:0 60:6:1 70:7:2 80:8:3 4\n", r.stdout)
  end)

  it("a search inside a mapped point stays in its rank (no nested collective), the same as one process", function()
    local script = os.tmpname() .. ".lua"
    write(script, [[
local p = require("fathom.parallel")
local search = require("fathom.search")
local r = p.map({ 2, 4, 8 }, function(pod)
  local def = search.prepare({ hardware = "tests/fixtures/tiny/hardware.yaml", node = "TOY", gpus = 16,
    pod_size = pod, model = "tests/fixtures/tiny/model.yaml", workload = "tests/fixtures/tiny/train.yaml",
    global_batch = 32, top = 1 })
  local h = search.run(def, 4, false).hits[1]
  return string.format("%d:%d:%d:%.17g", h.tp, h.pp, h.mb, h.step_time_s)
end)
print(table.concat(r, " "))
]])
    local one = h.run("run", script)
    local four = mpi("run", script)
    os.remove(script)
    assert.are.equal(0, four.code, four.stderr)
    assert.are.equal(one.stdout, four.stdout)
  end)

  it("the FullFlat scenario prints the same report over 4 ranks as in one process", function()
    local one = h.run("scenario", "run", "fullflat", "--jobs", "1")
    local four = mpi("scenario", "run", "fullflat")
    assert.are.equal(0, four.code, four.stderr)
    assert.matches("FullFlat co%-design study", one.stdout)
    assert.are.equal(one.stdout, four.stdout)
  end)

  it("a rank whose share fails aborts the job with its rank and reason", function()
    local script = os.tmpname() .. ".lua"
    write(script, [[
local p = require("fathom.parallel")
p.map({ 1, 2, 3, 4 }, function(x) if x == 3 then error("point 3 is bad", 0) end return x end)
]])
    local r = mpi("run", script)
    os.remove(script)
    assert.are_not.equal(0, r.code)
    assert.matches("fathom: rank 2 of 4: point 3 is bad", r.stderr, 1, true)
  end)

  it("a rank killed by SIGKILL: mpirun names the rank, exit non-zero, no output file", function()
    local sweep, out, err = os.tmpname(), os.tmpname(), os.tmpname()
    os.remove(out)
    -- 96,000 points: long enough that the kill lands mid-run on a loaded machine (2,400
    -- finished within the 0.3 s wait once, under CI with other work running)
    local batches = "global_batch_size: {start: 8, stop: 16000, step: 8}"
    write(sweep, (SWEEP:gsub("global_batch_size: %[8, 16, 24, 32%]", batches)))
    local parts = {}
    for _, a in ipairs(MPIRUN) do parts[#parts + 1] = a end
    parts[#parts + 1] = h.shell_quote(h.bin())
    for _, a in ipairs(analyze_args(sweep, { "--format", "yaml", "--output-file", out })) do
      parts[#parts + 1] = h.shell_quote(a)
    end
    -- the ranks are mpirun's children: wait until all four run, then SIGKILL the last one alone
    local script = table.concat(parts, " ") .. " 2>" .. err .. " & p=$!; i=0; " ..
      "while [ $i -lt 500 ]; do n=$(pgrep -P $p | wc -l); " ..
      "if [ \"$n\" -ge 4 ]; then sleep 0.3; kill -9 $(pgrep -P $p | tail -n 1); break; fi; " ..
      "sleep 0.01; i=$((i+1)); done; wait $p; echo $?"
    local sh = io.popen(script)
    local code = tonumber(sh:read("a"))
    sh:close()
    local msg = read(err)
    os.remove(err)
    os.remove(sweep)
    assert.are_not.equal(0, code, msg)
    assert.matches("process rank %d with PID %d+ on node %S+ exited on signal 9", msg)
    assert.is_false(exists(out))
  end)
end)
