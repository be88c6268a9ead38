-- fathom.format.json: JSON out with numbers that read back exactly (lua-cjson
-- prints 14 significant digits, so we write numbers ourselves), JSON in
-- through lua-cjson.
local util = require("fathom.format.util")

local M = {}

local escapes = {
  ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f",
  ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t",
}

local function string_text(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    return escapes[c] or string.format("\\u%04x", c:byte())
  end) .. '"'
end

local function emit(out, v, indent, seen)
  local tv = type(v)
  if tv == "number" then
    out[#out + 1] = util.number(v) or "null" -- JSON has no NaN/Infinity
  elseif tv == "string" then
    out[#out + 1] = string_text(v)
  elseif tv == "boolean" then
    out[#out + 1] = v and "true" or "false"
  elseif tv == "nil" or tv == "userdata" then
    out[#out + 1] = "null"
  elseif tv == "table" then
    if seen[v] then error("cannot write a table that contains itself as JSON") end
    seen[v] = true
    local nl = indent and ("\n" .. string.rep("  ", indent + 1)) or ""
    local close = indent and ("\n" .. string.rep("  ", indent)) or ""
    local sub = indent and indent + 1 or nil
    local sep = indent and ": " or ":"
    if util.is_array(v) then
      if #v == 0 then
        out[#out + 1] = "[]"
      else
        out[#out + 1] = "["
        for i, item in ipairs(v) do
          out[#out + 1] = (i > 1 and "," or "") .. nl
          emit(out, item, sub, seen)
        end
        out[#out + 1] = close .. "]"
      end
    else
      local keys = util.keys(v)
      if #keys == 0 then
        out[#out + 1] = "{}"
      else
        out[#out + 1] = "{"
        for i, k in ipairs(keys) do
          out[#out + 1] = (i > 1 and "," or "") .. nl .. string_text(tostring(k)) .. sep
          emit(out, v[k], sub, seen)
        end
        out[#out + 1] = close .. "}"
      end
    end
    seen[v] = nil
  else
    error("cannot write a " .. tv .. " value as JSON")
  end
end

-- encode(value [, pretty]) -> JSON text; `pretty` indents by two spaces.
function M.encode(value, pretty)
  local out = {}
  emit(out, value, pretty and 0 or nil, {})
  return table.concat(out)
end

-- decode(text [, name]) -> value | nil, message (lua-cjson; JSON null becomes nil in
-- objects and core.null-like cjson.null in arrays).
function M.decode(text, name)
  local ok_mod, cjson = pcall(require, "cjson.safe")
  if not ok_mod then return nil, "lua-cjson is not installed (apt-get install lua-cjson)" end
  cjson.decode_max_depth(64)
  local v, err = cjson.decode(text)
  if v == nil and err then return nil, (name or "<json>") .. ": " .. err end
  return v
end

return M
