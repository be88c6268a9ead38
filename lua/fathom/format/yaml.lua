-- fathom.format.yaml: write any result table as YAML (block style), keys in a
-- stable order, numbers that read back exactly. Reading is fathom.config's job.
local util = require("fathom.format.util")

local M = {}

-- A string's text (plain, or double-quoted with escapes where a reader would take it for
-- something else) is the core's rule (core.yaml_string, src/lua/ltext.c), which the C
-- sweep writer applies too.
local yaml_string = require("fathom.core").yaml_string

-- scalar(v) -> YAML text of a non-table value.
function M.scalar(v)
  local tv = type(v)
  if tv == "number" then
    local s = util.number(v)
    if s == nil then
      if v ~= v then return ".nan" end
      return v > 0 and ".inf" or "-.inf"
    end
    if math.type(v) == "float" and not s:find("[%.eEn]") then s = s .. ".0" end
    return s
  elseif tv == "boolean" then
    return v and "true" or "false"
  elseif tv == "nil" or (tv == "userdata" and v == nil) then
    return "null"
  elseif tv == "string" then
    return yaml_string(v)
  elseif tv == "userdata" then
    return "null" -- core.null
  end
  error("cannot write a " .. tv .. " value as YAML")
end

local function emit(out, v, indent, seen)
  if type(v) ~= "table" then
    out[#out + 1] = " " .. M.scalar(v) .. "\n"
    return
  end
  if seen[v] then error("cannot write a table that contains itself as YAML") end
  seen[v] = true
  local pad = string.rep("  ", indent)
  if util.is_array(v) then
    if #v == 0 then
      out[#out + 1] = " []\n"
    else
      out[#out + 1] = "\n"
      for _, item in ipairs(v) do
        out[#out + 1] = pad .. "-"
        emit(out, item, indent + 1, seen)
      end
    end
  else
    local keys = util.keys(v)
    if #keys == 0 then
      out[#out + 1] = " {}\n"
    else
      out[#out + 1] = "\n"
      for _, k in ipairs(keys) do
        out[#out + 1] = pad .. M.scalar(tostring(k)) .. ":"
        emit(out, v[k], indent + 1, seen)
      end
    end
  end
  seen[v] = nil
end

-- entry(key, value, indent) -> the text of `key: value` in a mapping `indent` levels deep
-- (value's lines below it when it is a non-empty table), as encode writes it.
function M.entry(key, value, indent)
  local out = { string.rep("  ", indent) .. M.scalar(tostring(key)) .. ":" }
  emit(out, value, indent + 1, {})
  return table.concat(out)
end

-- encode(value) -> YAML document text (ends with a newline).
function M.encode(value)
  local out = {}
  emit(out, value, 0, {})
  local s = table.concat(out)
  if type(value) == "table" and s:sub(1, 1) == "\n" then
    return s:sub(2)
  end
  return (s:gsub("^ ", ""))
end

return M
