-- fathom.config: reading input files (YAML or JSON) into Lua tables whose
-- every key and value keeps its file:line:col (see fathom.errors.where).
local core = require("fathom.core")
local errors = require("fathom.errors")
local json = require("fathom.format.json")

local M = {}

-- load_file(path) -> table. YAML (any extension but .json) through the C loader;
-- JSON through lua-cjson. Raises an input error "file:line:col: reason".
function M.load_file(path)
  if type(path) ~= "string" or path == "" then
    errors.raise("expected a file path, got %s", tostring(path))
  end
  if path:match("%.json$") then
    local f, err = io.open(path, "rb")
    if not f then errors.raise("%s", err) end
    local text = f:read("a")
    f:close()
    local v, msg = json.decode(text, path)
    if v == nil then errors.raise("%s", msg) end
    return v
  end
  local v, marks = core.yaml_load(path)
  if v == nil and type(marks) == "string" then errors.raise("%s", marks) end
  if marks then errors.register(marks, path) end
  return v
end

-- load_string(text, name) -> table from YAML text (positions name `name`).
function M.load_string(text, name)
  name = name or "<string>"
  local v, marks = core.yaml_decode(text, name)
  if v == nil and type(marks) == "string" then errors.raise("%s", marks) end
  if marks then errors.register(marks, name) end
  return v
end

-- load_mapping(path, what) -> table; the document must be a mapping.
function M.load_mapping(path, what)
  local v = M.load_file(path)
  if type(v) ~= "table" or v[1] ~= nil then
    local got = v == nil and "an empty document" or (type(v) == "table" and "a list" or type(v))
    errors.raise("%s:1:1: expected a %s (a YAML mapping), got %s", path, what or "mapping", got)
  end
  return v
end

return M
