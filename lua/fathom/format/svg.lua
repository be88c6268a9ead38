-- fathom.format.svg: a sweep as a stacked bar chart of the step time per point
-- (compute, exposed memory, recomputation, each kind of exposed communication,
-- bubble, optimizer), a self-contained SVG file. Takes raw analyze records.
local M = {}

local parts = {
  { "compute_seconds", "compute", "#4e79a7" },
  { "memory_exposed_seconds", "memory (exposed)", "#a0cbe8" },
  { "recompute_seconds", "recompute", "#f28e2b" },
  { "exposed_tp_seconds", "TP", "#e15759" },
  { "exposed_tp_moe_seconds", "TP (experts)", "#ff9d9a" },
  { "exposed_ep_seconds", "EP all-to-all", "#b07aa1" },
  { "exposed_cp_seconds", "CP", "#d4a6c8" },
  { "exposed_pp_seconds", "PP", "#59a14f" },
  { "exposed_dp_seconds", "DP", "#edc948" },
  { "exposed_dp_moe_seconds", "DP (experts)", "#f1ce63" },
  { "exposed_offload_seconds", "activation offload", "#9c755f" },
  { "bubble_seconds", "bubble", "#bab0ac" },
  { "optimizer_seconds", "optimizer", "#79706e" },
}

local function esc(s)
  return (tostring(s):gsub("[<>&\"]", { ["<"] = "&lt;", [">"] = "&gt;", ["&"] = "&amp;", ['"'] = "&quot;" }))
end

local function label_of(rec, i)
  local keys = {}
  for k, v in pairs(rec.sweep_point or {}) do keys[#keys + 1] = (k:match("[^%.]+$") or k) .. "=" .. tostring(v) end
  table.sort(keys)
  return #keys > 0 and table.concat(keys, " ") or ("point " .. i)
end

-- encode(records) -> SVG text. Records must carry raw numbers (as analyze writes them).
function M.encode(records)
  if records.configuration then records = { records } end
  local n = #records
  local W, H, left, top, bottom = math.max(480, 120 + 70 * n), 420, 70, 40, 110
  local plot_h = H - top - bottom
  local max_t = 0
  for _, r in ipairs(records) do
    if r.time and type(r.time.step_time_seconds) == "number" then max_t = math.max(max_t, r.time.step_time_seconds) end
  end
  if max_t <= 0 then max_t = 1 end
  local out = {
    string.format('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" ' ..
      'font-size="11">', W + 150, H),
    string.format('<text x="%d" y="20" font-size="14">step time per sweep point (s)</text>', left),
    string.format('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>', left, top, left, top + plot_h),
    string.format('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>', left, top + plot_h, W, top + plot_h),
  }
  for k = 0, 4 do
    local v = max_t * k / 4
    local y = top + plot_h - plot_h * k / 4
    out[#out + 1] = string.format('<text x="%d" y="%.1f" text-anchor="end">%.3g</text>', left - 5, y + 4, v)
  end
  local bw = math.min(50, (W - left - 20) / n * 0.7)
  for i, r in ipairs(records) do
    local x = left + 10 + (i - 1) * (W - left - 20) / n
    local y = top + plot_h
    if r.error or not r.time then
      out[#out + 1] = string.format('<text x="%.1f" y="%.1f" fill="#999">invalid</text>', x, y - 5)
    else
      local b = r.time.step_breakdown
      for _, p in ipairs(parts) do
        local v = type(b[p[1]]) == "number" and b[p[1]] or 0
        local hgt = plot_h * v / max_t
        if hgt > 0 then
          y = y - hgt
          out[#out + 1] = string.format('<rect x="%.1f" y="%.2f" width="%.1f" height="%.2f" fill="%s">' ..
            '<title>%s: %.6g s</title></rect>', x, y, bw, hgt, p[3], esc(p[2]), v)
        end
      end
    end
    out[#out + 1] = string.format('<text x="%.1f" y="%d" transform="rotate(40 %.1f %d)">%s</text>', x,
      top + plot_h + 14, x, top + plot_h + 14, esc(label_of(r, i)))
  end
  for k, p in ipairs(parts) do
    local y = top + (k - 1) * 16
    out[#out + 1] = string.format('<rect x="%d" y="%d" width="10" height="10" fill="%s"/>', W + 10, y, p[3])
    out[#out + 1] = string.format('<text x="%d" y="%d">%s</text>', W + 25, y + 9, esc(p[2]))
  end
  out[#out + 1] = "</svg>"
  return table.concat(out, "\n") .. "\n"
end

local PALETTE = { "#4e79a7", "#e15759", "#59a14f", "#f28e2b", "#b07aa1", "#76b7b2", "#edc948", "#9c755f" }

-- lines{title, x_label, y_label, series = {{name, points = {{x, y}, ...}}, ...}, log_x} -> SVG
-- text: one polyline per series with markers, axes with ticks at the x values given, a legend.
function M.lines(p)
  local W, H, left, top, plot_w, plot_h = 640, 400, 70, 40, 400, 280
  local xs, xmin, xmax, ymax = {}, math.huge, -math.huge, 0
  local function fx(x) return p.log_x and math.log(x, 2) or x end
  for _, s in ipairs(p.series) do
    for _, pt in ipairs(s.points) do
      xs[pt[1]] = true
      xmin, xmax, ymax = math.min(xmin, fx(pt[1])), math.max(xmax, fx(pt[1])), math.max(ymax, pt[2])
    end
  end
  if xmax <= xmin then xmax = xmin + 1 end
  if ymax <= 0 then ymax = 1 end
  local function X(x) return left + plot_w * (fx(x) - xmin) / (xmax - xmin) end
  local function Y(y) return top + plot_h - plot_h * y / ymax end
  local out = {
    string.format('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" ' ..
      'font-size="11">', W, H),
    string.format('<text x="%d" y="20" font-size="14">%s</text>', left, esc(p.title)),
    string.format('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>', left, top, left, top + plot_h),
    string.format('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>', left, top + plot_h, left + plot_w,
      top + plot_h),
    string.format('<text x="%d" y="%d" text-anchor="middle">%s</text>', left + plot_w // 2, top + plot_h + 34,
      esc(p.x_label)),
    string.format('<text x="16" y="%d" transform="rotate(-90 16 %d)" text-anchor="middle">%s</text>',
      top + plot_h // 2, top + plot_h // 2, esc(p.y_label)),
  }
  for k = 0, 4 do
    local v = ymax * k / 4
    out[#out + 1] = string.format('<text x="%d" y="%.1f" text-anchor="end">%.3g</text>', left - 5, Y(v) + 4, v)
  end
  local ticks = {}
  for x in pairs(xs) do ticks[#ticks + 1] = x end
  table.sort(ticks)
  for _, x in ipairs(ticks) do
    out[#out + 1] = string.format('<text x="%.1f" y="%d" text-anchor="middle">%s</text>', X(x), top + plot_h + 16,
      esc(x))
  end
  for i, s in ipairs(p.series) do
    local color = PALETTE[(i - 1) % #PALETTE + 1]
    local pts = {}
    for j, pt in ipairs(s.points) do pts[j] = string.format("%.1f,%.1f", X(pt[1]), Y(pt[2])) end
    out[#out + 1] = string.format('<polyline fill-opacity="0" stroke="%s" stroke-width="2" points="%s"/>', color,
      table.concat(pts, " "))
    for _, pt in ipairs(s.points) do
      out[#out + 1] = string.format('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s: %s, %.4g</title>' ..
        '</circle>', X(pt[1]), Y(pt[2]), color, esc(s.name), esc(pt[1]), pt[2])
    end
    out[#out + 1] = string.format('<rect x="%d" y="%d" width="10" height="10" fill="%s"/>', left + plot_w + 15,
      top + (i - 1) * 16, color)
    out[#out + 1] = string.format('<text x="%d" y="%d">%s</text>', left + plot_w + 30, top + (i - 1) * 16 + 9,
      esc(s.name))
  end
  out[#out + 1] = "</svg>"
  return table.concat(out, "\n") .. "\n"
end

-- heatmap{title, x_label, y_label, xs, ys, value = function(x, y) -> number or nil, format} -> SVG
-- text: a cell per (x, y) shaded from white (smallest) to blue (largest), its value written in it.
function M.heatmap(p)
  local cw, ch, left, top = 90, 34, 230, 60
  local W, H = left + cw * #p.xs + 20, top + ch * #p.ys + 50
  local lo, hi = math.huge, -math.huge
  for _, y in ipairs(p.ys) do
    for _, x in ipairs(p.xs) do
      local v = p.value(x, y)
      if v then lo, hi = math.min(lo, v), math.max(hi, v) end
    end
  end
  if hi <= lo then hi = lo + 1 end
  local out = {
    string.format('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" ' ..
      'font-size="11">', W, H),
    string.format('<text x="10" y="20" font-size="14">%s</text>', esc(p.title)),
    string.format('<text x="%d" y="%d" text-anchor="middle">%s</text>', left + cw * #p.xs // 2, top - 24,
      esc(p.x_label)),
    string.format('<text x="10" y="%d">%s</text>', top - 8, esc(p.y_label)),
  }
  for i, x in ipairs(p.xs) do
    out[#out + 1] = string.format('<text x="%d" y="%d" text-anchor="middle">%s</text>', left + cw * (i - 1) + cw // 2,
      top - 6, esc(x))
  end
  for j, y in ipairs(p.ys) do
    local ty = top + ch * (j - 1)
    out[#out + 1] = string.format('<text x="%d" y="%d" text-anchor="end">%s</text>', left - 6, ty + ch // 2 + 4,
      esc(y))
    for i, x in ipairs(p.xs) do
      local v = p.value(x, y)
      local tx = left + cw * (i - 1)
      local fill = "#eeeeee"
      if v then
        local t = (v - lo) / (hi - lo)
        fill = string.format("#%02x%02x%02x", math.floor(255 - 177 * t), math.floor(255 - 134 * t),
          math.floor(255 - 88 * t))
      end
      out[#out + 1] = string.format('<rect x="%d" y="%d" width="%d" height="%d" fill="%s" stroke="white"/>', tx, ty,
        cw, ch, fill)
      out[#out + 1] = string.format('<text x="%d" y="%d" text-anchor="middle">%s</text>', tx + cw // 2,
        ty + ch // 2 + 4, v and esc(string.format(p.format or "%.3g", v)) or "n/a")
    end
  end
  out[#out + 1] = "</svg>"
  return table.concat(out, "\n") .. "\n"
end

return M
