-- fathom.format.svg: a sweep as a stacked bar chart of the step time per point
-- (compute, exposed memory, recomputation, each kind of exposed communication,
-- bubble, optimizer), a self-contained SVG file. Takes raw analyze records. The
-- title names the model, the system and the pass mode; bars are labelled with their
-- full key=value pairs in sweep order; the legend lists the parts drawn, in the
-- colour-blind-safe palette of fathom.format.plot.
local plot = require("fathom.format.plot")
local util = require("fathom.format.util")
local esc = plot.esc

local M = {}

-- The parts of a training step, in stacking order (the analyze record's step_breakdown keys).
local parts = {
  { "compute_seconds", "compute" },
  { "memory_exposed_seconds", "memory (exposed)" },
  { "recompute_seconds", "recompute" },
  { "exposed_tp_seconds", "TP" },
  { "exposed_tp_moe_seconds", "TP (experts)" },
  { "exposed_ep_seconds", "EP all-to-all" },
  { "exposed_cp_seconds", "CP" },
  { "exposed_pp_seconds", "PP" },
  { "exposed_dp_seconds", "DP" },
  { "exposed_dp_moe_seconds", "DP (experts)" },
  { "dp_interference_seconds", "DP interference" },
  { "exposed_offload_seconds", "activation offload" },
  { "bubble_seconds", "bubble" },
  { "optimizer_seconds", "optimizer" },
}
M.parts = parts -- each drawn in a colour of its own (the palette holds as many)

-- An inference record has no breakdown: one bar of its own latency.
local latencies = {
  { "time_per_output_token_seconds", "time per output token" },
  { "time_to_first_token_seconds", "time to first token" },
}

-- short_keys(records) -> key -> the shortest dotted suffix (two components at least) that
-- still tells it apart from every other swept key ("PP.size" and "TP_Attn.size", never
-- "size" for both).
local function short_keys(records)
  local keys, seen = {}, {}
  for _, r in ipairs(records) do
    for k in pairs(r.sweep_point or {}) do
      if not seen[k] then
        seen[k] = true
        keys[#keys + 1] = k
      end
    end
  end
  local out = {}
  for _, k in ipairs(keys) do
    local parts_k = {}
    for p in k:gmatch("[^%.]+") do parts_k[#parts_k + 1] = p end
    for n = math.min(2, #parts_k), #parts_k do -- two components at least: "TP_Attn.size", not "size"
      local suffix = table.concat(parts_k, ".", #parts_k - n + 1)
      local unique = true
      for _, other in ipairs(keys) do
        if other ~= k and (other == suffix or other:sub(-#suffix - 1) == "." .. suffix) then unique = false end
      end
      if unique then
        out[k] = suffix
        break
      end
    end
    out[k] = out[k] or k
  end
  return out
end

local function label_of(rec, i, short)
  local sp = rec.sweep_point or {}
  local items = {}
  for _, k in ipairs(util.keys(sp)) do items[#items + 1] = (short[k] or k) .. "=" .. tostring(sp[k]) end
  return #items > 0 and table.concat(items, " ") or ("point " .. i)
end

local function value(t, key)
  return t and type(t[key]) == "number" and t[key] or 0
end

-- bar_parts(rec) -> list of {key, label} it stacks, and the table its values are in.
local function bar_parts(rec)
  if rec.time and rec.time.step_breakdown then return parts, rec.time.step_breakdown end
  for _, l in ipairs(latencies) do
    if rec.time and type(rec.time[l[1]]) == "number" then return { l }, rec.time end
  end
  return {}, {}
end

-- title_of(records) -> "model on node (topology), pass mode: step time per sweep point".
local function title_of(records)
  for _, r in ipairs(records) do
    if r.configuration then
      local c, m = r.configuration, r.model_configuration or {}
      local what = (r.time and r.time.step_breakdown) and "step time" or "latency"
      return string.format("%s on %s%s, %s: %s per sweep point", m.name or "model", c.node or "?",
        c.physical_topology and (" (" .. c.physical_topology .. ")") or "", c.pass_mode or "training", what)
    end
  end
  return "step time per sweep point"
end

-- encode(records) -> SVG text. Records must carry raw numbers (as analyze writes them).
function M.encode(records)
  if records.configuration or records.error then records = { records } end
  local n = #records
  local short = short_keys(records)
  -- the parts drawn: those with time in some record, in stacking order, each its colour
  local drawn, used, max_t, y_label = {}, {}, 0, "step time (s)"
  for _, r in ipairs(records) do
    local ps, t = bar_parts(r)
    local total = 0
    for _, p in ipairs(ps) do
      local v = value(t, p[1])
      total = total + v
      if v > 0 then used[p[1]] = true end
    end
    if ps[1] and ps[1] ~= parts[1] then y_label = "latency (s)" end
    max_t = math.max(max_t, total)
  end
  local colour = {}
  for _, p in ipairs(parts) do
    if used[p[1]] then
      drawn[#drawn + 1] = p
    end
  end
  for _, l in ipairs(latencies) do
    if used[l[1]] then drawn[#drawn + 1] = l end
  end
  local legend = {}
  for i, p in ipairs(drawn) do
    colour[p[1]] = plot.palette[i] or plot.palette[#plot.palette]
    legend[i] = { p[2], colour[p[1]] }
  end
  local W = math.max(640, 260 + 70 * n)
  local out, _, y, box = plot.frame({ title = title_of(records), x_label = "sweep point", y_label = y_label,
    y_ticks = plot.nice_ticks(0, max_t > 0 and max_t or 1), legend = legend, width = W,
    height = 520, margin = { bottom = 180 } })
  local slot = box.width / math.max(n, 1)
  local bw = math.min(50, slot * 0.7)
  for i, r in ipairs(records) do
    local x = box.left + (i - 1) * slot + (slot - bw) / 2
    local base = box.top + box.height
    if r.error or not r.time then
      out[#out + 1] = string.format('<text x="%.1f" y="%.1f" fill="#555555">invalid</text>', x, base - 5)
    else
      local ps, t = bar_parts(r)
      local top = base
      for _, p in ipairs(ps) do
        local v = value(t, p[1])
        if v > 0 then
          local hgt = base - y(v) -- pixels for v (y(0) is the base line)
          top = top - hgt
          out[#out + 1] = string.format('<rect x="%.1f" y="%.2f" width="%.1f" height="%.2f" fill="%s">' ..
            '<title>%s: %.6g s</title></rect>', x, top, bw, hgt, colour[p[1]], plot.esc(p[2]), v)
        end
      end
    end
    local lx, ly = x + bw / 2, base + 14
    out[#out + 1] = string.format('<text x="%.1f" y="%d" transform="rotate(35 %.1f %d)" class="point">%s</text>', lx,
      ly, lx, ly, plot.esc(label_of(r, i, short)))
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
