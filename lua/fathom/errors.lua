-- fathom.errors: the input-error kind and source positions of loaded YAML.
--
-- Input errors (bad files, bad flags, impossible requests) are raised as a
-- small table {kind = "input", msg = ...} with __tostring, so the CLI exits 2
-- with one line and no traceback; any other error is internal (exit 1).
local M = {}

local InputError = {}
InputError.__index = InputError
InputError.__tostring = function(e) return e.msg end
M.InputError = InputError

-- Weak map: table loaded from YAML -> {file = path, marks = marks entry}.
local origin = setmetatable({}, { __mode = "k" })

-- Kinds of refusal, all "bad input" to the CLI (exit 2): input (a value out of range
-- or inconsistent), range (a derived value overflowed), unsupported (valid, but not
-- modelled), tiling (sizes that do not divide each other). The C core raises the same
-- kinds as values (see is_core).
M.kinds = { input = true, range = true, unsupported = true, tiling = true }

-- is_core(err) -> boolean: is `err` an error value raised by fathom.core
-- ({kind, path, msg} with metatable fathom.Error)?
function M.is_core(err)
  local mt = type(err) == "table" and getmetatable(err)
  return mt ~= nil and mt ~= false and mt.__name == "fathom.Error"
end

-- is_input(err) -> boolean: a refusal of the input (M.raise, or the core's), not a bug.
function M.is_input(err)
  if type(err) ~= "table" then return false end
  return (getmetatable(err) == InputError or M.is_core(err)) and M.kinds[err.kind] == true
end

-- is_interrupt(err) -> boolean: is `err` the host's SIGINT/SIGTERM error
-- ({kind = "interrupt", signal = N})?
function M.is_interrupt(err)
  return type(err) == "table" and getmetatable(err) == nil and err.kind == "interrupt"
end

-- interrupted() -> the SIGINT/SIGTERM number the host caught, or nil.
function M.interrupted()
  local paths = package.loaded["fathom.paths"]
  local sig = paths and paths.interrupted and paths.interrupted()
  return sig and sig > 0 and sig or nil
end

-- acknowledge_interrupt(): the caller handles a caught signal; the host stops
-- raising it again (it repeats one that a pcall swallowed).
function M.acknowledge_interrupt()
  local paths = package.loaded["fathom.paths"]
  if paths and paths.acknowledge_interrupt then paths.acknowledge_interrupt() end
end

-- check_interrupt(): raise the interrupt error if the host caught a signal (loops
-- whose body runs under pcall call it, so a swallowed interrupt still stops them).
function M.check_interrupt()
  local sig = M.interrupted()
  if sig then error({ kind = "interrupt", signal = sig, msg = sig == 2 and "interrupted" or "terminated" }, 0) end
end

-- pass(err): re-raise `err` if it is an interrupt (for pcall sites that turn
-- failures into input errors).
function M.pass(err)
  if M.is_interrupt(err) then error(err, 0) end
  return err
end

-- is_memory(err) -> boolean: Lua's out-of-memory error (the input is too large).
function M.is_memory(err)
  return err == "not enough memory"
end

-- one_line(msg) -> msg with control characters (newlines included) escaped, so a
-- message echoing a user string stays on one line.
function M.one_line(msg)
  return (tostring(msg):gsub("[%c]", function(c)
    if c == "\n" then return "\\n" end
    if c == "\t" then return "\\t" end
    return string.format("\\x%02x", c:byte())
  end))
end

-- check_finite(t, what): raise an input error naming the first NaN or infinite
-- number in the result table `t` (keys walked in sorted order): an input whose
-- magnitudes make a result meaningless is refused rather than reported.
function M.check_finite(t, what, seen)
  seen = seen or {}
  if seen[t] then return end
  seen[t] = true
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(keys) do
    local v = t[k]
    local path = type(k) == "number" and string.format("%s[%d]", what, k) or (what .. "." .. tostring(k))
    if type(v) == "number" and (v ~= v or v == math.huge or v == -math.huge) then
      M.raise("%s: the inputs give a %s result (check the magnitudes of the inputs)", path,
        v ~= v and "NaN" or "infinite")
    elseif type(v) == "table" then
      M.check_finite(v, path, seen)
    end
  end
end

-- new(msg [, kind]) -> error object of the input kind (or `kind`), not raised.
function M.new(msg, kind)
  return setmetatable({ kind = kind or "input", msg = msg }, InputError)
end

-- raise(fmt, ...) raises an input error with a formatted message.
function M.raise(fmt, ...)
  local msg = select("#", ...) > 0 and string.format(fmt, ...) or fmt
  error(M.new(msg), 0)
end

-- register(marks, file): remember where every table of a loaded document came from.
function M.register(marks, file)
  for t, entry in pairs(marks) do
    origin[t] = { file = file, marks = entry }
  end
end

-- where(t [, key]) -> "file:line:col" of t[key] (its value, else its key), or of t
-- itself; nil when t did not come from a file.
function M.where(t, key)
  local o = type(t) == "table" and origin[t]
  if not o then return nil end
  local pos
  if key ~= nil then
    pos = o.marks.val[key] or o.marks.key[key]
  end
  pos = pos or o.marks.self
  return o.file .. ":" .. pos
end

-- where_key(t, key) -> "file:line:col" of the key itself (for unknown keys).
function M.where_key(t, key)
  local o = type(t) == "table" and origin[t]
  if not o then return nil end
  return o.file .. ":" .. (o.marks.key[key] or o.marks.self)
end

-- ordered_keys(t) -> the keys of t in document order (by the position of each key in
-- its file), keys without a position after them in a stable order: so the first
-- error reported is the first in the file, every time.
function M.ordered_keys(t)
  local o = type(t) == "table" and origin[t]
  local marks = o and o.marks.key or {}
  local keys, pos = {}, {}
  for k in pairs(t) do
    keys[#keys + 1] = k
    local p = marks[k]
    local line, col
    if type(p) == "string" then line, col = p:match("^(%d+):(%d+)") end
    pos[k] = line and (tonumber(line) * 1e6 + tonumber(col)) or math.huge
  end
  table.sort(keys, function(a, b)
    if pos[a] ~= pos[b] then return pos[a] < pos[b] end
    local ta, tb = type(a), type(b)
    if ta ~= tb then return ta < tb end
    if ta == "number" or ta == "string" then return a < b end
    return tostring(a) < tostring(b)
  end)
  return keys
end

-- source_file(t) -> path of the file t came from, or nil.
function M.source_file(t)
  local o = type(t) == "table" and origin[t]
  return o and o.file
end

-- copy_origin(from, to): a derived table (a sweep's copy) reports positions of its source.
function M.copy_origin(from, to)
  if origin[from] then origin[to] = origin[from] end
end

-- Longest key path echoed in a message (a 1 MB key is shown by its start).
M.MAX_PATH_SHOWN = 200

local function raise_at(where, path, fmt, ...)
  local msg = select("#", ...) > 0 and string.format(fmt, ...) or fmt
  local parts = {}
  if where then parts[#parts + 1] = where end
  if path and #path > M.MAX_PATH_SHOWN then
    path = path:sub(1, M.MAX_PATH_SHOWN) .. string.format("... (%d bytes)", #path)
  end
  if path and path ~= "" then parts[#parts + 1] = path end
  parts[#parts + 1] = msg
  error(M.new(table.concat(parts, ": ")), 0)
end

-- at(t, key, path, fmt, ...) raises "file:line:col: path: message" for t[key];
-- `path` is the dotted key path shown to the user.
function M.at(t, key, path, fmt, ...)
  raise_at(M.where(t, key), path, fmt, ...)
end

-- at_key(t, key, path, fmt, ...) is `at` pointing at the key itself (unknown keys).
function M.at_key(t, key, path, fmt, ...)
  raise_at(M.where_key(t, key), path, fmt, ...)
end

-- Levenshtein distance, for "did you mean" hints.
local function distance(a, b)
  local la, lb = #a, #b
  local prev, cur = {}, {}
  for j = 0, lb do prev[j] = j end
  for i = 1, la do
    cur[0] = i
    for j = 1, lb do
      local cost = a:sub(i, i) == b:sub(j, j) and 0 or 1
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
    end
    prev, cur = cur, prev
  end
  return prev[lb]
end

-- Longest name "did you mean" compares (the distance is quadratic in the lengths).
M.MAX_SUGGEST_LENGTH = 64

-- suggest(name, candidates) -> " (did you mean 'x'?)" or "".
function M.suggest(name, candidates)
  if #name > M.MAX_SUGGEST_LENGTH then return "" end
  local best, best_d
  for _, c in ipairs(candidates) do
    local d = #c <= M.MAX_SUGGEST_LENGTH and distance(name:lower(), c:lower()) or math.huge
    if not best_d or d < best_d or (d == best_d and c < best) then best, best_d = c, d end
  end
  if best and best_d <= math.max(2, #name // 3) then
    return string.format(" (did you mean '%s'?)", best)
  end
  return ""
end

return M
