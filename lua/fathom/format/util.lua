-- fathom.format.util: helpers shared by the formatters: exact number text,
-- stable key order, array detection.
local M = {}

-- number(x) -> shortest decimal text that reads back as exactly x ("%.17g" at worst);
-- nil for NaN and infinities (each format spells those its own way).
function M.number(x)
  if math.type(x) == "integer" then return tostring(x) end
  if x ~= x or x == math.huge or x == -math.huge then return nil end
  for prec = 15, 17 do
    local s = string.format("%." .. prec .. "g", x)
    if tonumber(s) == x then return s end
  end
  return string.format("%.17g", x)
end

-- ordered(t, keys) -> t, with `keys` fixing the order formatters print t's keys in
-- (keys not listed follow, sorted).
function M.ordered(t, keys)
  local mt = getmetatable(t) or {}
  mt.__order = keys
  return setmetatable(t, mt)
end

local function key_less(a, b)
  local ta, tb = type(a), type(b)
  if ta ~= tb then return ta < tb end
  return a < b
end

-- keys(t) -> list of t's keys in print order.
function M.keys(t)
  local out, seen = {}, {}
  local mt = getmetatable(t)
  if mt and mt.__order then
    for _, k in ipairs(mt.__order) do
      if t[k] ~= nil and not seen[k] then
        out[#out + 1] = k
        seen[k] = true
      end
    end
  end
  local rest = {}
  for k in pairs(t) do
    if not seen[k] then rest[#rest + 1] = k end
  end
  table.sort(rest, key_less)
  for _, k in ipairs(rest) do out[#out + 1] = k end
  return out
end

-- is_array(t) -> true when t's keys are exactly 1..#t (an empty table is an array
-- only when its metatable says __array).
function M.is_array(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  if n == 0 then
    local mt = getmetatable(t)
    return mt ~= nil and mt.__array == true
  end
  for i = 1, n do
    if t[i] == nil then return false end
  end
  return true
end

-- array(t) -> t marked as an array (so an empty one prints as [] not {}).
function M.array(t)
  local mt = getmetatable(t) or {}
  mt.__array = true
  return setmetatable(t, mt)
end

return M
