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

return M
