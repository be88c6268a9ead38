-- fathom.format.yaml: write any result table as YAML (block style), keys in a
-- stable order, numbers that read back exactly. Reading is fathom.config's job.
local util = require("fathom.format.util")

local M = {}

local plain_bad = {
  ["true"] = true, ["false"] = true, ["True"] = true, ["False"] = true, ["TRUE"] = true,
  ["FALSE"] = true, ["null"] = true, ["Null"] = true, ["NULL"] = true, ["~"] = true,
  ["yes"] = true, ["no"] = true, ["on"] = true, ["off"] = true, ["y"] = true, ["n"] = true,
}

local function needs_quotes(s)
  if s == "" or plain_bad[s] then return true end
  if tonumber(s) or s:match("^[-+]?%.") or s:match("^0[xo]") then return true end
  if s:match("^[%s%-%?:,%[%]{}#&%*!|>'\"%%@`]") or s:match("%s$") then return true end
  if s:find(": ", 1, true) or s:find(" #", 1, true) or s:match(":$") then return true end
  if s:find("[%c\128-\255]") then return true end
  return false
end

local escapes = { ['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\t"] = "\\t", ["\r"] = "\\r" }

-- Double-quoted text a YAML reader takes back unchanged: ASCII controls, C1
-- controls (U+0080..U+009F), the line and paragraph separators and the BOM are
-- escaped; bytes that are not UTF-8 are written as \xNN (read back as U+00NN).
local function quote(s)
  local body = s:gsub('[%c"\\]', function(c)
    return escapes[c] or string.format("\\x%02x", c:byte())
  end)
  if utf8.len(body) == nil then
    body = body:gsub("[\128-\255]", function(c) return string.format("\\x%02x", c:byte()) end)
  else
    body = body:gsub("\194([\128-\159])", function(c) return string.format("\\x%02x", c:byte()) end)
      :gsub("\226\128\168", "\\L"):gsub("\226\128\169", "\\P"):gsub("\239\187\191", "\\uFEFF")
  end
  return '"' .. body .. '"'
end

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
    return needs_quotes(v) and quote(v) or v
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
