-- fathom.progress: one progress line on stderr for long work (sweeps, searches): done
-- of total, percent, rate and ETA, redrawn at most ten times a second and cleared when
-- done; silent unless stderr is a terminal (a pipe or a log file gets nothing), and
-- silent for work that ends within its first second.
local M = {}

local CLEAR = "\r\27[K" -- carriage return, erase to the end of the line (ECMA-48 EL)
local FIRST_S = 1.0     -- nothing is drawn before this much wall time has passed
local EVERY_S = 0.1     -- at most ten redraws a second

local tty
-- stderr_is_terminal() -> whether stderr is a terminal (asked once; FATHOM_PROGRESS=1 forces
-- the line on, =0 off, for tests and for logs that want it).
function M.stderr_is_terminal()
  local force = os.getenv("FATHOM_PROGRESS")
  if force == "1" then return true end
  if force == "0" then return false end
  if tty == nil then tty = os.execute("test -t 2") == true end
  return tty
end

-- clock() -> seconds since this module loaded: the larger of this process's CPU time
-- (fine-grained, but blind to workers it waits on) and wall time (os.time: whole seconds);
-- Lua has no finer wall clock, and a progress line needs no more.
local cpu0, wall0 = os.clock(), os.time()
local function clock()
  return math.max(os.clock() - cpu0, os.difftime(os.time(), wall0))
end

-- duration(s) -> "42 s", "3 min 5 s", "2 h 10 min".
function M.duration(s)
  if s ~= s or s == math.huge then return "?" end
  s = math.max(0, math.floor(s + 0.5))
  if s < 60 then return string.format("%d s", s) end
  if s < 3600 then return string.format("%d min %d s", s // 60, s % 60) end
  return string.format("%d h %d min", s // 3600, (s % 3600) // 60)
end

-- line(label, done, total, elapsed_s, unit) -> the text of one progress line.
function M.line(label, done, total, elapsed_s, unit)
  local rate = elapsed_s > 0 and done / elapsed_s or 0
  local eta = rate > 0 and (total - done) / rate or math.huge
  return string.format("%s %d/%d (%.0f%%), %.4g %s/s, ETA %s", label, done, total,
    total > 0 and 100 * done / total or 100, rate, unit or "points", M.duration(eta))
end

-- new{label, total, unit, enabled, write, now} -> p with p:update(done) and p:finish();
-- p is also a to-be-closed value (`local p <close> = progress.new{...}`), so the line is
-- cleared however the work ends, an error included. enabled (default: stderr is a
-- terminal), write (default: io.stderr:write) and now (clock) are for tests.
function M.new(o)
  local enabled = o.enabled
  if enabled == nil then enabled = M.stderr_is_terminal() end
  local write = o.write or function(s) io.stderr:write(s) end
  local now = o.now or clock
  local t0, last, drawn = now(), -math.huge, false
  local p = {}
  function p.update(_, done)
    if not enabled then return end
    local t = now()
    if t - t0 < FIRST_S or t - last < EVERY_S then return end
    last, drawn = t, true
    write(CLEAR .. M.line(o.label, done, o.total, t - t0, o.unit))
  end
  function p.finish()
    if drawn then write(CLEAR) end
    drawn = false
  end
  return setmetatable(p, { __close = function(self) self:finish() end })
end

return M
