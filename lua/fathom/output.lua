-- fathom.output: render a value in a format and write it to stdout or to a
-- file, whole or not at all (a temporary file renamed into place).
--
-- Temporary files are named `.<name>.fathom-<pid>-<n>.tmp` in the target's
-- directory (so the rename never crosses file systems and two runs never share
-- one) and registered until committed or discarded; `cleanup()` removes every
-- one still registered. The CLI calls it on every exit path, including SIGINT
-- and SIGTERM (the host turns them into an error that unwinds to the CLI).
local errors = require("fathom.errors")

local M = {}

local live = {} -- temporary path -> true, until committed or discarded
local counter = 0

local function pid()
  local paths = package.loaded["fathom.paths"]
  return paths and paths.pid or math.random(1, 1e9)
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- temp_path(target) -> a fresh, registered temporary path beside `target`.
function M.temp_path(target)
  local dir, base = tostring(target):match("^(.*/)([^/]*)$")
  if not dir then dir, base = "", tostring(target) end
  if base == "" then base = "out" end
  local path
  repeat
    counter = counter + 1
    path = string.format("%s.%s.fathom-%d-%d.tmp", dir, base, pid(), counter)
  until not exists(path)
  live[path] = true
  return path
end

-- temp_file(name) -> a registered temporary path in $TMPDIR (else /tmp) for files
-- that are not outputs (a search definition handed to workers).
function M.temp_file(name)
  return M.temp_path((os.getenv("TMPDIR") or "/tmp") .. "/" .. (name or "fathom"))
end

-- discard(tmp): remove a temporary file and forget it.
function M.discard(tmp)
  if tmp then
    os.remove(tmp)
    live[tmp] = nil
  end
end

-- commit(tmp, path): rename a temporary file into place; raises an input error
-- (removing it) when that fails.
function M.commit(tmp, path)
  local rok, rerr = os.rename(tmp, path)
  if not rok then
    M.discard(tmp)
    errors.raise("cannot write '%s': %s", path, tostring(rerr))
  end
  live[tmp] = nil
end

-- cleanup(): remove every temporary file not yet committed (idempotent).
function M.cleanup()
  for path in pairs(live) do
    os.remove(path)
    live[path] = nil
  end
end

-- pending() -> list of the registered temporary paths (for tests).
function M.pending()
  local out = {}
  for path in pairs(live) do out[#out + 1] = path end
  table.sort(out)
  return out
end

-- render(value, format) -> text; format is "yaml", "json" or a module under fathom.format.
function M.render(value, format)
  format = format or "yaml"
  local ok, mod = pcall(require, "fathom.format." .. format)
  if not ok then errors.raise("unknown output format '%s'", format) end
  if format == "json" then return mod.encode(value, true) .. "\n" end
  return mod.encode(value)
end

-- open(path) -> writer with :write(text) and :close() (commits) / :abort(): a file
-- written piece by piece into a temporary file, renamed into place only by close().
-- Under mpirun, only rank 0 writes: another rank's writer takes the text and drops it.
function M.open(path)
  local parallel = package.loaded["fathom.parallel"]
  if parallel and not parallel.is_root() then
    return { write = function() end, write_with = function() end, rewrite = function() end,
      close = function() end, abort = function() end }
  end
  local tmp = M.temp_path(path)
  local f, err = io.open(tmp, "wb")
  if not f then
    live[tmp] = nil
    errors.raise("cannot write '%s': %s", path, tostring(err))
  end
  local w = {}
  function w.write(_, text)
    local ok, werr = f:write(text)
    if not ok then
      f:close()
      M.discard(tmp)
      errors.raise("cannot write '%s': %s", path, tostring(werr))
    end
  end
  function w.close()
    local cok, cerr = f:close()
    if not cok then
      M.discard(tmp)
      errors.raise("cannot write '%s': %s", path, tostring(cerr))
    end
    M.commit(tmp, path)
  end
  function w.abort()
    pcall(f.close, f)
    M.discard(tmp)
  end
  -- w:write_with(fn): fn(file) writes to the open file itself (a C writer that streams
  -- from its own buffer) and returns true or nil, message, as file:write does.
  function w.write_with(_, fn)
    local ok, werr = fn(f)
    if not ok then
      f:close()
      M.discard(tmp)
      errors.raise("cannot write '%s': %s", path, tostring(werr))
    end
  end
  -- w:rewrite(fn): fn(from, to) copies what was written so far (from: an io file open for
  -- reading) into a fresh temporary file `to`, changed on the way, and returns true or nil,
  -- message; writing goes on in the fresh file (a C writer widening its CSV header).
  function w.rewrite(_, fn)
    local cok, cerr = f:close()
    local from = cok and io.open(tmp, "rb")
    local old = tmp
    tmp = M.temp_path(path)
    local nf, nerr = io.open(tmp, "wb")
    if not from or not nf then
      if from then from:close() end
      M.discard(old)
      M.discard(tmp)
      errors.raise("cannot write '%s': %s", path, tostring(cerr or nerr))
    end
    f = nf
    local ok, werr = fn(from, f)
    from:close()
    M.discard(old)
    if not ok then
      f:close()
      M.discard(tmp)
      errors.raise("cannot write '%s': %s", path, tostring(werr))
    end
  end
  return w
end

-- write_file(path, text): write atomically; raises an input error when the
-- directory is not writable. Nothing is left behind on failure.
function M.write_file(path, text)
  local w = M.open(path)
  w:write(text)
  w:close()
end

-- write(value, format, path): render first (so a rendering failure writes nothing),
-- then print or write the file.
function M.write(value, format, path)
  local text = M.render(value, format)
  if path then
    M.write_file(path, text)
  else
    io.stdout:write(text)
  end
end

-- emit(opts, views): write one result in the format `opts.format` (table when nil) to
-- `opts.output_file`, whole, or to stdout. `views` gives the result per format:
--   table = function() -> text; data = function() -> value (raw SI numbers: json; yaml
--   readable through fathom.report.humanize unless opts.raw_output); csv = function() ->
--   rows (default: data()); svg = function() -> SVG text; yaml = function() -> text (a
--   command's own YAML, instead of data()'s).
-- A format the command has no view for is an input error naming the command.
function M.emit(opts, views, command)
  local format = opts.format or "table"
  local text
  if format == "table" and views.table then
    text = views.table()
  elseif format == "svg" and views.svg then
    text = views.svg()
  elseif format == "csv" and (views.csv or views.data) then
    text = M.render((views.csv or views.data)(), "csv")
  elseif format == "yaml" and views.yaml then
    text = views.yaml()
  elseif (format == "json" or format == "yaml") and views.data then
    local v = views.data()
    if format == "yaml" and not opts.raw_output then v = require("fathom.report").humanize(v) end
    text = M.render(v, format)
  else
    errors.raise("%s: no %s output (see 'fathom %s --help')", command or "fathom", format, command or "")
  end
  if opts.output_file then
    M.write_file(opts.output_file, text)
  else
    io.stdout:write(text)
  end
end

return M
