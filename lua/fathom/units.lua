-- fathom.units: human-readable quantities (SI prefixes for time, FLOPs and
-- rates; binary prefixes for bytes).
local M = {}

local function scaled(x, steps, unit)
  if x ~= x then return "nan" end
  if x == math.huge then return "inf" end
  local ax = math.abs(x)
  for _, s in ipairs(steps) do
    if ax >= s[1] then return string.format("%.4g %s%s", x / s[1], s[2], unit) end
  end
  local last = steps[#steps]
  return string.format("%.4g %s%s", x / last[1], last[2], unit)
end

local si = { { 1e18, "E" }, { 1e15, "P" }, { 1e12, "T" }, { 1e9, "G" }, { 1e6, "M" }, { 1e3, "k" }, { 1, "" } }

-- time(s) -> "1.234 ms", "3.2 h", "4.5 days".
function M.time(s)
  if s ~= s then return "nan" end
  if s == math.huge then return "inf" end
  local a = math.abs(s)
  if a >= 86400 * 2 then return string.format("%.4g days", s / 86400) end
  if a >= 3600 then return string.format("%.4g h", s / 3600) end
  if a >= 60 then return string.format("%.4g min", s / 60) end
  if a >= 1 or a == 0 then return string.format("%.4g s", s) end
  if a >= 1e-3 then return string.format("%.4g ms", s * 1e3) end
  if a >= 1e-6 then return string.format("%.4g us", s * 1e6) end
  return string.format("%.4g ns", s * 1e9)
end

-- bytes(b) -> "1.5 GiB".
function M.bytes(b)
  if b ~= b then return "nan" end
  local steps = { { 2 ^ 50, "Pi" }, { 2 ^ 40, "Ti" }, { 2 ^ 30, "Gi" }, { 2 ^ 20, "Mi" }, { 2 ^ 10, "Ki" }, { 1, "" } }
  return scaled(b, steps, "B")
end

local byte_units = { b = 1, kb = 1e3, mb = 1e6, gb = 1e9, tb = 1e12,
  kib = 2 ^ 10, mib = 2 ^ 20, gib = 2 ^ 30, tib = 2 ^ 40 }

-- parse_bytes(s) -> bytes of "2GiB", "1.5 GB", "512MiB", "0" or "3000000000" (a bare
-- number is bytes; KB/MB/GB/TB are decimal, KiB/MiB/GiB/TiB binary), or nil when
-- `s` is not a finite size >= 0.
function M.parse_bytes(s)
  local num, unit = tostring(s):match("^%s*([%d%.eE%+]+)%s*(%a*)%s*$")
  local n = num and tonumber(num)
  local scale = byte_units[(unit or ""):lower()] or (unit == "" and 1) or nil
  if not n or not scale or n ~= n or n < 0 or n * scale == math.huge then return nil end
  return n * scale
end

-- flops(f) -> "3.2 PFLOP"; rate(f) -> "3.2 TFLOP/s"; bw(b) -> "450 GB/s".
function M.flops(f) return scaled(f, si, "FLOP") end
function M.flops_rate(f) return scaled(f, si, "FLOP/s") end
function M.bandwidth(b) return scaled(b, si, "B/s") end
function M.count(x) return scaled(x, si, "") end
function M.percent(x) return string.format("%.2f%%", 100 * x) end

return M
