-- fathom.parallel: per-point work over several processes, with the result of one.
--
--   local parallel = require("fathom.parallel")
--   local results = parallel.map(points, function(p) return evaluate(p) end)
--
-- Two ways to run, the same answer: under `mpirun -n N fathom ...` (a build with
-- -DFATHOM_MPI=ON) the ranks share the work; otherwise local worker processes are
-- forked (`jobs`, default the core count or $FATHOM_JOBS). The split is
-- deterministic (point i goes to share (i - 1) % n), results come back in input
-- order, and every process ends with the whole list, so a script goes on the same
-- way whatever the count. Forked workers inherit the caller's state (points, the
-- function and its upvalues); only results travel, serialised by encode() with
-- integers, floats (bit for bit), strings and key order (format.util's __order)
-- kept, so output is byte-identical to one process. Under MPI, rank 0 alone
-- prints and writes (the others' stdout and stderr go to /dev/null). fn should return
-- what is to be printed rather than print it (a worker's prints come in any order).
--
-- Failures: an error in a worker's share ends the run with that error, naming the
-- worker (input errors stay input errors, exit 2); a worker that dies (SIGKILL)
-- ends it with "worker K of N (pid P) was killed by signal 9 (SIGKILL)". A failing
-- MPI rank aborts the job with its rank and reason. Nothing is written either way:
-- writers run after the gather, and fathom.output writes whole files or none.
local core = require("fathom.core")
local errors = require("fathom.errors")

local M = {}

local proc = core.process
local mpi = core.mpi

-- Context: one rank of one until init() finds an MPI launch. `inside`: running a share's
-- work, where a nested map or search runs in this process alone (under MPI a nested
-- collective would pair ranks that are at different points of their shares).
local ctx = { rank = 0, size = 1, mpi = false, inside = false }

-- within(fn, ...) -> fn(...), with nested parallel work kept in this process.
local function within(fn, ...)
  local was = ctx.inside
  ctx.inside = true
  local res = table.pack(pcall(fn, ...))
  ctx.inside = was
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

-- Environment variables an MPI launcher sets (Open MPI's mpirun, PMIx, PMI-2 / Slurm's srun --mpi).
local LAUNCH_VARS = { "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE" }

-- launched() -> whether this process was started by an MPI launcher.
local function launched()
  for _, v in ipairs(LAUNCH_VARS) do
    if os.getenv(v) then return true end
  end
  return false
end

-- init(): start MPI when fathom is built with it and was launched by mpirun / srun
-- (the CLI calls this first); otherwise nothing. Idempotent.
function M.init()
  if ctx.mpi or not mpi.available or not launched() then return ctx end
  local rank, size = mpi.init(true)
  ctx.rank, ctx.size, ctx.mpi = rank, size, size > 1
  return ctx
end

-- finish(): MPI_Finalize when MPI was started (the CLI calls this last).
function M.finish()
  if mpi.available then mpi.finalize() end
end

-- rank(), size(): this process's MPI rank and the job's size (0 and 1 without MPI).
function M.rank() return ctx.rank end
function M.size() return ctx.size end

-- is_root() -> true on the process that prints and writes (rank 0; always without MPI).
function M.is_root() return ctx.rank == 0 end

-- under_mpi() -> true when the work is shared by MPI ranks (more than one).
function M.under_mpi() return ctx.mpi end

-- default_jobs() -> local processes when none are asked for: $FATHOM_JOBS, else the core count.
function M.default_jobs()
  local env = math.tointeger(tonumber(os.getenv("FATHOM_JOBS") or ""))
  if env and env >= 1 then return env end
  local paths = package.loaded["fathom.paths"]
  return math.max(1, math.tointeger(paths and paths.cores) or 1)
end

-- Serialisation ------------------------------------------------------------------------------

-- encode(value) -> string: a Lua expression that decode() turns back into an equal value
-- (nil, booleans, numbers, strings, tables of them; format.util's key order and array marks);
-- numbers come back bit for bit. In C (src/lua/lprocess.c): it runs once per result.
M.encode = proc.encode

local function mark(t, order, array)
  return setmetatable(t, { __order = order, __array = array })
end

-- decode(string) -> value, or raises on text encode() did not make.
function M.decode(s)
  local f, err = load("return " .. s, "=parallel", "t", { M = mark })
  if not f then error("parallel: corrupt result: " .. tostring(err), 0) end
  return f()
end

-- Running shares ----------------------------------------------------------------------------

local SIGNALS = { [1] = "SIGHUP", [2] = "SIGINT", [6] = "SIGABRT", [9] = "SIGKILL", [11] = "SIGSEGV",
  [13] = "SIGPIPE", [15] = "SIGTERM" }

-- A failure of one share, raised in the parent: a table error the CLI prints as it is
-- (kind "worker", exit 1), or an input error (exit 2) when the share refused its input.
local WorkerError = { __tostring = function(e) return e.msg end }

local function worker_error(msg)
  return setmetatable({ kind = "worker", msg = msg }, WorkerError)
end

-- is_worker_error(e) -> true for the failure of a worker process or rank.
function M.is_worker_error(e)
  return getmetatable(e) == WorkerError
end

-- run_share(fn, share, shares) -> envelope {ok, value | msg, input}: fn's result or its error.
local function run_share(fn, share, shares)
  local ok, v = pcall(within, fn, share, shares)
  if ok then return { ok = true, value = v } end
  if errors.is_interrupt(v) then return { ok = false, msg = tostring(v.msg), interrupt = v.signal } end
  return { ok = false, msg = tostring(v), input = errors.is_input(v) or nil, worker = M.is_worker_error(v) or nil }
end

local function unwrap(env, who)
  if env.ok then return env.value end
  if env.input then error(errors.new(env.msg), 0) end
  if env.interrupt then
    error({ kind = "interrupt", signal = env.interrupt, msg = env.msg }, 0)
  end
  error(worker_error(env.worker and env.msg or (who .. " failed: " .. env.msg)), 0)
end

-- local_shares(n, fn) -> list of fn(share, n) for share = 0..n-1: shares 1..n-1 in forked
-- children, share 0 here (so n processes work in all).
local function local_shares(n, fn)
  local kids = {}
  local function reap_all()
    for _, k in ipairs(kids) do
      if not k.done then
        proc.kill(k.pid, proc.SIGTERM)
        if k.fd then proc.close(k.fd) end
        proc.wait(k.pid)
        k.done = true
      end
    end
  end
  for s = 1, n - 1 do
    local ok, pid, fd = pcall(proc.fork)
    if not ok then
      reap_all()
      error(worker_error("cannot start worker " .. (s + 1) .. " of " .. n .. ": " .. tostring(pid)), 0)
    end
    if pid == 0 then -- the child: its share, sent back, then out without unwinding into the parent's code
      local env = run_share(fn, s, n)
      local eok, text = pcall(M.encode, env)
      if not eok then text = M.encode({ ok = false, msg = tostring(text) }) end
      local wok = proc.write(fd, text)
      proc.exit(wok and 0 or 1)
    end
    kids[s] = { pid = pid, fd = fd, share = s }
  end
  local ok, mine = pcall(within, fn, 0, n)
  if not ok then -- this process's own share: its error as it is, once the workers are gone
    reap_all()
    error(mine, 0)
  end
  local results = { mine }
  for s = 1, n - 1 do
    local k = kids[s]
    local text = proc.read_all(k.fd)
    k.fd = nil
    local how, code = proc.wait(k.pid)
    k.done = true
    local who = string.format("worker %d of %d (pid %d)", s + 1, n, k.pid)
    if how == "signal" then
      reap_all()
      error(worker_error(string.format("%s was killed by signal %d (%s)", who, code, SIGNALS[code] or "?")), 0)
    end
    local dok, env = pcall(M.decode, text)
    if not dok or type(env) ~= "table" then
      reap_all()
      error(worker_error(string.format("%s exited with status %d and no result", who, code)), 0)
    end
    if not env.ok then reap_all() end
    results[s + 1] = unwrap(env, who)
  end
  return results
end

-- mpi_shares(fn) -> list of fn(rank, size) over the MPI ranks, on every rank. A rank whose
-- share fails aborts the whole job, naming itself.
local function mpi_shares(fn)
  local env = run_share(fn, ctx.rank, ctx.size)
  if env.interrupt then mpi.abort(128 + env.interrupt) end -- mpirun ending the job: it says why
  if not env.ok then
    mpi.abort(env.input and 2 or 1, string.format("fathom: rank %d of %d: %s", ctx.rank, ctx.size, env.msg))
  end
  local texts = mpi.allgather(M.encode(env))
  local out = {}
  for i, text in ipairs(texts) do out[i] = M.decode(text).value end
  return out
end

-- shares(n, fn) -> list of fn(share, shares) for every share, in share order. Under MPI the
-- shares are the ranks (n is ignored); else n local processes (n <= 1: fn(0, 1) here).
function M.shares(n, fn)
  if ctx.inside then return { fn(0, 1) } end
  if ctx.mpi then return mpi_shares(fn) end
  n = math.max(1, math.tointeger(n) or 1)
  if n == 1 then return { fn(0, 1) } end
  return local_shares(n, fn)
end

-- processes(jobs, count [, min_per_process]) -> how many processes `count` points are worth:
-- at most `jobs`, and at least `min_per_process` points each (one process for a small sweep,
-- where starting workers costs more than it saves). Under MPI, the ranks.
function M.processes(jobs, count, min_per)
  if ctx.inside then return 1 end
  if ctx.mpi then return ctx.size end
  jobs = jobs or M.default_jobs()
  return math.max(1, math.min(jobs, count // (min_per or 1)))
end

-- split(n, shares, weight) -> list per share of the point indices it computes: round-robin
-- (point i to share (i - 1) % shares), or with weight(i) -> estimated cost, greedy longest-
-- first (each point, heaviest first, ties by index, to the least-loaded share, ties by share):
-- deterministic either way, so every process (every MPI rank) computes the same split.
function M.split(n, shares, weight)
  local out = {}
  for s = 1, shares do out[s] = {} end
  if not weight then
    for i = 1, n do
      local s = (i - 1) % shares + 1
      out[s][#out[s] + 1] = i
    end
    return out
  end
  local order, w = {}, {}
  for i = 1, n do
    order[i] = i
    w[i] = weight(i)
  end
  table.sort(order, function(a, b)
    if w[a] ~= w[b] then return w[a] > w[b] end
    return a < b
  end)
  local load = {}
  for s = 1, shares do load[s] = 0 end
  for _, i in ipairs(order) do
    local best = 1
    for s = 2, shares do
      if load[s] < load[best] then best = s end
    end
    load[best] = load[best] + w[i]
    out[best][#out[best] + 1] = i
  end
  for s = 1, shares do table.sort(out[s]) end
  return out
end

-- map(points, fn [, opts]) -> {fn(points[1], 1), ..., fn(points[n], n)}, computed over the MPI
-- ranks or over opts.jobs local processes (default default_jobs()), split by M.split (opts.weight
-- (point, i) -> estimated cost balances unequal points); opts.min_per_process (default 1): fewer
-- processes when there are fewer points per process. fn's results must be what encode() sends
-- (no functions or userdata).
function M.map(points, fn, opts)
  opts = opts or {}
  local n = #points
  local procs = M.processes(opts.jobs, n, opts.min_per_process)
  if procs == 1 and (ctx.inside or not ctx.mpi) then
    local out = {}
    for i = 1, n do out[i] = fn(points[i], i) end
    return out
  end
  local shares_n = ctx.mpi and ctx.size or procs
  local plan = M.split(n, shares_n, opts.weight and function(i) return opts.weight(points[i], i) end)
  local parts = M.shares(procs, function(share)
    local mine = {}
    for k, i in ipairs(plan[share + 1]) do mine[k] = { fn(points[i], i) } end -- boxed: a result may be nil
    return mine
  end)
  local out = {}
  for s = 1, #parts do
    for k, i in ipairs(plan[s]) do out[i] = parts[s][k][1] end
  end
  return out
end

return M
