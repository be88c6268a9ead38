-- fathom.format.jsonl: JSON Lines, one record per line (compact JSON, numbers exact, keys
-- in fathom.format.json's order), for record streams (a sweep).
local json = require("fathom.format.json")
local util = require("fathom.format.util")

local M = {}

-- line(record) -> the record's line, newline included.
function M.line(record) return json.encode(record) .. "\n" end

-- encode(records) -> one line per record (a value that is not a list is one record).
function M.encode(records)
  if type(records) ~= "table" or not util.is_array(records) then records = { records } end
  local out = {}
  for i, r in ipairs(records) do out[i] = M.line(r) end
  return table.concat(out)
end

return M
