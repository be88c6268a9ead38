-- fathom.output: render a value in a format and write it to stdout or to a
-- file, whole or not at all (a temporary file renamed into place).
local errors = require("fathom.errors")

local M = {}

-- render(value, format) -> text; format is "yaml", "json" or a module under fathom.format.
function M.render(value, format)
  format = format or "yaml"
  local ok, mod = pcall(require, "fathom.format." .. format)
  if not ok then errors.raise("unknown output format '%s'", format) end
  if format == "json" then return mod.encode(value, true) .. "\n" end
  return mod.encode(value)
end

-- write_file(path, text): write atomically; raises an input error when the
-- directory is not writable. Nothing is left behind on failure.
function M.write_file(path, text)
  local tmp = string.format("%s.tmp.%d", path, math.random(1, 1e9))
  local f, err = io.open(tmp, "wb")
  if not f then errors.raise("cannot write '%s': %s", path, err) end
  local ok, werr = f:write(text)
  local cok, cerr = f:close()
  if not ok or not cok then
    os.remove(tmp)
    errors.raise("cannot write '%s': %s", path, tostring(werr or cerr))
  end
  local rok, rerr = os.rename(tmp, path)
  if not rok then
    os.remove(tmp)
    errors.raise("cannot write '%s': %s", path, tostring(rerr))
  end
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

return M
