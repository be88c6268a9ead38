-- fathom.config: reading input files (YAML or JSON) into Lua tables whose
-- every key and value keeps its file:line:col (see fathom.errors.where).
local core = require("fathom.core")
local errors = require("fathom.errors")

local M = {}

-- load_file(path) -> table. YAML (any extension but .json) through the C loader;
-- JSON through lua-cjson. Raises an input error "file:line:col: reason".
function M.load_file(path)
  if type(path) ~= "string" or path == "" then
    errors.raise("expected a file path, got %s", tostring(path))
  end
  if path:match("%.json$") then return M.load_json(path) end
  local v, marks = core.yaml_load(path)
  if v == nil and type(marks) == "string" then errors.raise("%s", marks) end
  if marks then errors.register(marks, path) end
  return v
end

-- Largest input file (as the YAML loader's limit).
M.MAX_BYTES = 64 * 1024 * 1024

-- line:col of byte `offset` (1-based) in `text`.
local function position(text, offset)
  local line, i = 1, 1
  while true do
    local nl = text:find("\n", i, true)
    if not nl or nl >= offset then break end
    line, i = line + 1, nl + 1
  end
  return line, math.max(offset - i + 1, 1)
end

-- load_json(path) -> value. Strict JSON syntax (lua-cjson, its error offset turned
-- into line:col), then read by the YAML loader -- JSON is YAML's flow style -- so
-- JSON gets what YAML gets: positions for every key and value, the size and depth
-- limits, duplicate keys refused, null values in objects omitted.
function M.load_json(path)
  local f, err = io.open(path, "rb")
  if not f then errors.raise("%s: cannot open file (%s)", path, tostring(err):gsub("^[^:]*: ", "")) end
  local size = f:seek("end")
  if size and size > M.MAX_BYTES then
    f:close()
    errors.raise("%s: file is larger than %d MiB", path, M.MAX_BYTES // (1024 * 1024))
  end
  f:seek("set")
  local text = f:read("a")
  f:close()
  if not text then errors.raise("%s: cannot read file (is it a directory?)", path) end
  local ok_mod, cjson = pcall(require, "cjson.safe")
  if not ok_mod then errors.raise("%s: lua-cjson is not installed (apt-get install lua-cjson)", path) end
  cjson = cjson.new() -- strict: no NaN, Infinity or hex numbers
  cjson.decode_invalid_numbers(false)
  cjson.decode_max_depth(64)
  local v, msg = cjson.decode(text)
  if v == nil and msg then msg = path .. ": " .. msg end
  if v == nil and msg then
    local at = tonumber(msg:match("at character (%d+)"))
    if at then
      local line, col = position(text, at)
      local what = msg:gsub("^.-: ", "", 1):gsub(" at character %d+", "")
      errors.raise("%s:%d:%d: %s", path, line, col, errors.one_line(what:sub(1, 1):lower() .. what:sub(2)))
    end
    errors.raise("%s", errors.one_line(msg))
  end
  local yv, marks = core.yaml_decode(text, path)
  if yv == nil and type(marks) == "string" then errors.raise("%s", marks) end
  if marks then errors.register(marks, path) end
  M.same_as_json(v, yv, yv, nil)
  return yv
end

-- same_as_json(j, y, parent, key): the YAML reading `y` of a JSON text holds what
-- lua-cjson read (`j`); a raw control character in a string is the one way they
-- part (YAML folds the line break), refused at its position.
function M.same_as_json(j, y, parent, key)
  if type(j) == "table" then
    if type(y) ~= "table" then return end -- null handling differs by design
    for k, jv in pairs(j) do M.same_as_json(jv, y[k], y, k) end
  elseif type(j) == "string" and j ~= y then
    errors.at(parent, key, key and tostring(key) or "", "expected a JSON string without raw control " ..
      "characters (write \\n, \\t, \\u00XX)")
  end
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
