-- fathom.units: human-readable quantities (SI prefixes for time, FLOPs and
-- rates; binary prefixes for bytes).
local M = {}

-- The text itself is the core's (core.unit_text, src/core/fth_numtext.c: fth_unit_text), so
-- the C sweep writer's readable YAML is these same bytes.
local unit_text = require("fathom.core").unit_text

-- time(s) -> "1.234 ms", "3.2 h", "4.5 days".
function M.time(s) return unit_text("time", s) end

-- bytes(b) -> "1.5 GiB".
function M.bytes(b) return unit_text("bytes", b) end

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
function M.flops(f) return unit_text("flops", f) end
function M.flops_rate(f) return unit_text("flops_rate", f) end
function M.bandwidth(b) return unit_text("bandwidth", b) end
function M.count(x) return unit_text("count", x) end
function M.percent(x) return unit_text("percent", x) end

return M
