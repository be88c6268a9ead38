-- fathom.format.plot: what every SVG plot shares: nice axis ticks, a colour-blind-safe
-- palette, escaping, and the frame (title, axes with titles and units, ticks, legend).
local M = {}

-- Okabe & Ito, "Color Universal Design" (2008): eight colours told apart under the
-- common colour-vision deficiencies: the seven hues, black, then greys for the rest
-- (told apart by lightness).
M.palette = { "#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#F0E442", "#000000",
  "#555555", "#999999", "#BBBBBB", "#DDDDDD", "#333333", "#777777" }

-- esc(s) -> s with XML's special characters escaped.
function M.esc(s)
  return (tostring(s):gsub("[<>&\"]", { ["<"] = "&lt;", [">"] = "&gt;", ["&"] = "&amp;", ['"'] = "&quot;" }))
end

-- nice_ticks(lo, hi [, n]) -> list of about n round values covering [lo, hi]: steps of
-- 1, 2, 2.5 or 5 x 10^k (Heckbert, "Nice numbers for graph labels", Graphics Gems, 1990).
function M.nice_ticks(lo, hi, n)
  n = n or 5
  if hi <= lo or hi ~= hi then hi = lo + (lo ~= 0 and math.abs(lo) or 1) end
  local raw = (hi - lo) / n
  local mag = 10 ^ math.floor(math.log(raw, 10))
  local step
  for _, m in ipairs({ 1, 2, 2.5, 5, 10 }) do
    step = m * mag
    if step >= raw then break end
  end
  local k = math.floor(lo / step + 1e-9)
  local ticks = {}
  repeat
    -- k x step, rounded to 12 digits: 3 x 0.1 is 0.3, not 0.30000000000000004
    local v = tonumber(string.format("%.12g", k * step))
    ticks[#ticks + 1] = v == 0 and 0 or v
    k = k + 1
  until v >= hi - step * 1e-9
  return ticks
end

-- tick_text(v) -> a tick label: at most 4 significant digits, no trailing zeros.
function M.tick_text(v)
  local s = string.format("%.4g", v)
  return s
end

-- frame{width, height, title, x_label, y_label, x_ticks (nil: none), y_ticks, legend = {{label, colour,
-- shape = "rect"|"circle"}}, margin = {left, right, top, bottom}} -> out (a list of SVG
-- lines, open), x(v) and y(v) (data to pixels) and the plot box.
function M.frame(f)
  local m = f.margin or {}
  local left, right, top, bottom = m.left or 80, m.right or 180, m.top or 50, m.bottom or 60
  local W, H = f.width or 720, f.height or 440
  local pw, ph = W - left - right, H - top - bottom
  local xt, yt = f.x_ticks or { 0, 1 }, f.y_ticks -- no x ticks: a categorical axis (bars)
  local x0, x1 = xt[1], xt[#xt]
  local y0, y1 = yt[1], yt[#yt]
  local function x(v) return left + pw * (v - x0) / ((x1 - x0) ~= 0 and (x1 - x0) or 1) end
  local function y(v) return top + ph - ph * (v - y0) / ((y1 - y0) ~= 0 and (y1 - y0) or 1) end
  local out = {
    string.format('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" ' ..
      'font-size="11">', W, H),
    string.format('<rect width="%d" height="%d" fill="white"/>', W, H),
    string.format('<text x="%d" y="22" font-size="14">%s</text>', left, M.esc(f.title)),
  }
  for _, v in ipairs(yt) do
    out[#out + 1] = string.format('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>', left, y(v),
      left + pw, y(v))
    out[#out + 1] = string.format('<text x="%d" y="%.1f" text-anchor="end">%s</text>', left - 6, y(v) + 4,
      M.tick_text(v))
  end
  for _, v in ipairs(f.x_ticks or {}) do
    out[#out + 1] = string.format('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black"/>', x(v), top + ph,
      x(v), top + ph + 4)
    out[#out + 1] = string.format('<text x="%.1f" y="%d" text-anchor="middle">%s</text>', x(v), top + ph + 16,
      M.tick_text(v))
  end
  out[#out + 1] = string.format('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>', left, top, left, top + ph)
  out[#out + 1] = string.format('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>', left, top + ph,
    left + pw, top + ph)
  out[#out + 1] = string.format('<text x="%.1f" y="%d" text-anchor="middle" class="x-title">%s</text>',
    left + pw / 2, H - 14, M.esc(f.x_label))
  out[#out + 1] = string.format('<text x="16" y="%.1f" text-anchor="middle" transform="rotate(-90 16 %.1f)" ' ..
    'class="y-title">%s</text>', top + ph / 2, top + ph / 2, M.esc(f.y_label))
  for k, l in ipairs(f.legend or {}) do
    local ly = top + (k - 1) * 18
    local lx = left + pw + 16
    if l.shape == "circle" then
      out[#out + 1] = string.format('<circle cx="%d" cy="%d" r="4" fill="%s"/>', lx + 5, ly + 5, l[2])
    else
      out[#out + 1] = string.format('<rect x="%d" y="%d" width="10" height="10" fill="%s"/>', lx, ly, l[2])
    end
    out[#out + 1] = string.format('<text x="%d" y="%d" class="legend">%s</text>', lx + 16, ly + 9, M.esc(l[1]))
  end
  return out, x, y, { left = left, top = top, width = pw, height = ph }
end

return M
