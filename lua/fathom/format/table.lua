-- fathom.format.table: aligned console tables.
local M = {}

-- render(headers, rows [, align]) -> text. rows are lists of strings/numbers;
-- align[i] = "l" or "r" (default: numbers right, text left).
function M.render(headers, rows, align)
  local widths = {}
  local cells = {}
  for i, h in ipairs(headers) do widths[i] = #h end
  for r, row in ipairs(rows) do
    cells[r] = {}
    for i = 1, #headers do
      local v = row[i]
      local s = v == nil and "" or tostring(v)
      cells[r][i] = s
      if #s > widths[i] then widths[i] = #s end
    end
  end
  local function line(vals, is_header)
    local parts = {}
    for i, s in ipairs(vals) do
      local a = align and align[i] or ((not is_header and tonumber(s)) and "r" or "l")
      if a == "r" then
        parts[i] = string.rep(" ", widths[i] - #s) .. s
      else
        parts[i] = s .. string.rep(" ", widths[i] - #s)
      end
    end
    return (table.concat(parts, "  "):gsub("%s+$", ""))
  end
  local out = { line(headers, true) }
  local sep = {}
  for i = 1, #headers do sep[i] = string.rep("-", widths[i]) end
  out[#out + 1] = table.concat(sep, "  ")
  for _, row in ipairs(cells) do out[#out + 1] = line(row, false) end
  return table.concat(out, "\n") .. "\n"
end

return M
