-- fathom.format.csv: records flattened to one row each (dotted column names),
-- RFC 4180 quoting, numbers written exactly.
local util = require("fathom.format.util")

local M = {}

-- an array of tables (a list of records) flattens by position, prefix.1.key, not into
-- the text of its tables
local function holds_tables(v)
  for _, x in ipairs(v) do
    if type(x) == "table" then return true end
  end
  return false
end

local function flatten(prefix, v, out, order)
  if type(v) == "table" and (not util.is_array(v) or holds_tables(v)) then
    for _, k in ipairs(util.keys(v)) do
      flatten(prefix == "" and tostring(k) or (prefix .. "." .. tostring(k)), v[k], out, order)
    end
  else
    if out[prefix] == nil then order[#order + 1] = prefix end
    if type(v) == "table" then
      local parts = {}
      for i, x in ipairs(v) do parts[i] = tostring(x) end
      v = table.concat(parts, ";")
    end
    out[prefix] = v
  end
end
M.flatten = flatten

local function cell(v)
  if v == nil then return "" end
  if type(v) == "number" then return util.number(v) or (v ~= v and "nan" or (v > 0 and "inf" or "-inf")) end
  local s = tostring(v)
  if s:find('[,"\n\r]') then s = '"' .. s:gsub('"', '""') .. '"' end
  return s
end
M.cell = cell

-- encode(records) -> CSV text with the union of all columns, in first-seen order.
function M.encode(records)
  if type(records) ~= "table" or not util.is_array(records) then records = { records } end
  local rows, order, seen = {}, {}, {}
  for i, r in ipairs(records) do
    local flat, ord = {}, {}
    flatten("", r, flat, ord)
    rows[i] = flat
    for _, k in ipairs(ord) do
      if not seen[k] then
        seen[k] = true
        order[#order + 1] = k
      end
    end
  end
  local out = {}
  local hdr = {}
  for i, k in ipairs(order) do hdr[i] = cell(k) end
  out[1] = table.concat(hdr, ",")
  for _, flat in ipairs(rows) do
    local line = {}
    for i, k in ipairs(order) do line[i] = cell(flat[k]) end
    out[#out + 1] = table.concat(line, ",")
  end
  return table.concat(out, "\n") .. "\n"
end

return M
