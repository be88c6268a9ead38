-- fathom.format.pareto: a search's strategies as points (memory per GPU against step time
-- or tokens/s per GPU), the Pareto front drawn and labelled, a self-contained SVG.
local plot = require("fathom.format.plot")

local M = {}

local MAX_LABELS = 8

-- front(points, maximize) -> the points no other point beats on both axes (less memory
-- and a better y), by memory; ties keep the first (the search's rank order).
function M.front(points, maximize)
  local sorted = {}
  for i, p in ipairs(points) do sorted[i] = { p = p, i = i } end
  table.sort(sorted, function(a, b)
    if a.p.x ~= b.p.x then return a.p.x < b.p.x end
    if a.p.y ~= b.p.y then
      if maximize then return a.p.y > b.p.y end
      return a.p.y < b.p.y
    end
    return a.i < b.i
  end)
  local out, best = {}, nil
  for _, s in ipairs(sorted) do
    local y = s.p.y
    if best == nil or (maximize and y > best) or (not maximize and y < best) then
      out[#out + 1] = s.p
      best = y
    end
  end
  return out
end

-- encode{title, x_label, y_label, points = {{x, y, label}}, maximize = bool, x_scale, y_scale}
-- -> SVG text. x and y are raw SI numbers; x_scale / y_scale divide them for the axes (the
-- labels name the unit). Every point is drawn; the front is joined and labelled.
function M.encode(a)
  local xs, ys = a.x_scale or 1, a.y_scale or 1
  local pts = a.points
  local front = M.front(pts, a.maximize)
  local on_front = {}
  for _, p in ipairs(front) do on_front[p] = true end
  local xlo, xhi, ylo, yhi = math.huge, -math.huge, math.huge, -math.huge
  for _, p in ipairs(pts) do
    xlo, xhi = math.min(xlo, p.x / xs), math.max(xhi, p.x / xs)
    ylo, yhi = math.min(ylo, p.y / ys), math.max(yhi, p.y / ys)
  end
  if #pts == 0 then xlo, xhi, ylo, yhi = 0, 1, 0, 1 end
  local legend = { { "Pareto front (" .. #front .. ")", plot.palette[1], shape = "circle" } }
  if #pts > #front then legend[2] = { "other strategies that fit (" .. (#pts - #front) .. ")", plot.palette[10],
    shape = "circle" } end
  local out, x, y = plot.frame({ title = a.title, x_label = a.x_label, y_label = a.y_label,
    x_ticks = plot.nice_ticks(math.min(0, xlo), xhi), y_ticks = plot.nice_ticks(math.min(0, ylo), yhi),
    legend = legend, width = 760, height = 460 })
  for _, p in ipairs(pts) do
    if not on_front[p] then
      out[#out + 1] = string.format('<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"><title>%s</title></circle>',
        x(p.x / xs), y(p.y / ys), plot.palette[10], plot.esc(p.label))
    end
  end
  local path = {}
  for i, p in ipairs(front) do path[i] = string.format("%.1f,%.1f", x(p.x / xs), y(p.y / ys)) end
  if #path > 1 then
    out[#out + 1] = string.format('<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"/>',
      table.concat(path, " "), plot.palette[1])
  end
  -- at most MAX_LABELS labels (the ends and evenly between) so they stay legible; every
  -- point names itself on hover (<title>)
  local every = math.max(1, math.ceil(#front / MAX_LABELS))
  for i, p in ipairs(front) do
    local cx, cy = x(p.x / xs), y(p.y / ys)
    out[#out + 1] = string.format('<circle cx="%.1f" cy="%.1f" r="4" fill="%s"><title>%s</title></circle>', cx, cy,
      plot.palette[1], plot.esc(p.label))
    if (i - 1) % every == 0 or i == #front then
      out[#out + 1] = string.format('<text x="%.1f" y="%.1f" font-size="9" class="point">%s</text>', cx + 6, cy - 6,
        plot.esc(p.label))
    end
  end
  out[#out + 1] = "</svg>"
  return table.concat(out, "\n") .. "\n"
end

return M
