-- Every `fathom search` shown in README.md is what fathom prints today: the
-- title, the table's header and first rows (as many as the README shows), the
-- counts and the recommendation. An output that drifts fails here.
local h = require("helpers")

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function lines(s)
  local out = {}
  for l in (s .. "\n"):gmatch("([^\n]*)\n") do out[#out + 1] = l end
  while #out > 0 and out[#out] == "" do out[#out] = nil end
  return out
end

-- split a shown or printed search output into (head lines, rows, tail lines)
-- (the head: the title, what was assumed, the column headers, down to the dashes under them)
local function parts(ls)
  local head, rows, tail = {}, {}, {}
  local i = 1
  while i <= #ls and not (head[#head] or "x"):match("^%-[%- ]*$") do head[#head + 1] = ls[i]; i = i + 1 end
  while i <= #ls and ls[i] ~= "" do rows[#rows + 1] = ls[i]; i = i + 1 end
  while i <= #ls do tail[#tail + 1] = ls[i]; i = i + 1 end
  return head, rows, tail
end

local function blocks(text)
  local out = {}
  for body in text:gmatch("```\n(%$ fathom search.-)```") do
    local ls = lines(body)
    local cmd = ls[1]:gsub("^%$ fathom ", "")
    local first = 2
    if cmd:sub(-1) == "\\" then
      cmd = cmd:sub(1, -2) .. " " .. ls[2]:gsub("^%s+", "")
      first = 3
    end
    local shown = {}
    for i = first, #ls do shown[#shown + 1] = ls[i] end
    out[#out + 1] = { cmd = cmd, shown = shown }
  end
  return out
end

describe("README.md search outputs", function()
  local found = blocks(read("README.md"))
  it("shows at least the five reference searches", function()
    assert.is_true(#found >= 5)
  end)
  for _, b in ipairs(found) do
    it("matches: fathom " .. b.cmd, function()
      local args = {}
      for a in b.cmd:gmatch("%S+") do args[#args + 1] = a end
      local r = h.run(table.unpack(args))
      assert.are.equal(0, r.code, r.stderr)
      local sh, srows, stail = parts(b.shown)
      local ah, arows, atail = parts(lines(r.stdout))
      assert.are.same(sh, ah)
      assert.is_true(#srows >= 1 and #srows <= #arows)
      for i = 1, #srows do assert.are.equal(srows[i], arows[i]) end
      assert.are.same(stail, atail)
    end)
  end
end)
