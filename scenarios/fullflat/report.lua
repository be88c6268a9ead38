-- The FullFlat study's tables, plots and findings (study.lua computes them).
local svg = require("fathom.format.svg")
local tablefmt = require("fathom.format.table")
local units = require("fathom.units")

local M = {}

local function pct(x) return string.format("%.1f%%", 100 * x) end
local function mtok(x) return string.format("%.2fM", x / 1e6) end
local function ratio(x) return x and string.format("%.2fx", x) or "n/a" end

local function strategy(r)
  if not r.fits then return "nothing fits" end
  local pp = r.pp .. (r.vs and r.vs > 1 and ("x" .. r.vs) or "")
  local ep = r.ep > 1 and string.format(" EP %d(%d)", r.ep, r.ep_su) or ""
  return string.format("TP %d PP %s DP %d%s mb %d %s %s", r.tp, pp, r.dp, ep, r.mb, r.pp > 1 and r.schedule or "-",
    r.dp_variant)
end

-- text(study, res) -> the printed report.
function M.text(study, res)
  local sz = study.sizes[res.size]
  local out = {}
  out[#out + 1] = string.format("FullFlat co-design study (%s size): each point is the best strategy of a full "
    .. "search\n", res.size)
  out[#out + 1] = "B200-class GPU; two-tier = NVLink domain + 800 Gb/s per GPU leaf/spine; " ..
    "FullFlat = NVLink bandwidth to every GPU\n\n"
  local rows = {}
  for i, p in ipairs(res.points) do
    if p.kind == "grid" then
      local r = res.results[i]
      local adv = p.network == "full_flat" and study.advantage(res, p.model, p.domain) or nil
      local net = p.network == "full_flat" and "FullFlat" or "two-tier"
      rows[#rows + 1] = { study.model_of(p.model).label, p.domain, net, r.fits and pct(r.mfu) or "-",
        r.fits and mtok(r.tokens_per_s) or "-", r.fits and units.time(r.step_s) or "-", strategy(r),
        adv and ratio(adv) or "" }
    end
  end
  out[#out + 1] = "Network x scale-up domain (baseline hardware)\n\n"
  out[#out + 1] = tablefmt.render({ "model", "domain", "network", "MFU", "tokens/s", "step", "best strategy",
    "FullFlat gain" }, rows, { "l", "r", "l", "r", "r", "r", "l", "r" })
  rows = {}
  for i, p in ipairs(res.points) do
    if p.kind == "sensitivity" then
      local r = res.results[i]
      rows[#rows + 1] = { study.model_of(p.model).label, p.network == "full_flat" and "FullFlat" or "two-tier",
        p.change, r.fits and pct(r.mfu) or "-", r.fits and mtok(r.tokens_per_s) or "-",
        ratio(study.gain(res, p.model, p.network, p.change)), strategy(r) }
    end
  end
  out[#out + 1] = string.format("\nOne change at a time, %d-GPU domain (tokens/s against the same network's "
    .. "baseline)\n\n", sz.baseline_domain)
  out[#out + 1] = tablefmt.render({ "model", "network", "change", "MFU", "tokens/s", "vs base", "best strategy" }, rows,
    { "l", "l", "l", "r", "r", "r", "l" })
  out[#out + 1] = "\nThe study's findings, as fathom sees them here:\n"
  for _, f in ipairs(study.findings(res)) do
    out[#out + 1] = string.format("  %-10s %s: %s\n", f.holds and "agrees" or "DISAGREES", f.claim, f.detail)
  end
  return table.concat(out)
end

-- svgs(study, res) -> {name = SVG text}: MFU per model x network over the domains (heatmap),
-- FullFlat's gain over two-tier against the domain per model (line plot).
function M.svgs(study, res)
  local sz = study.sizes[res.size]
  local ys = {}
  for _, m in ipairs(study.models) do
    for _, net in ipairs({ "two_tier", "full_flat" }) do
      ys[#ys + 1] = m.label .. (net == "full_flat" and ", FullFlat" or ", two-tier")
    end
  end
  local function cell(x, y)
    for _, m in ipairs(study.models) do
      for _, net in ipairs({ "two_tier", "full_flat" }) do
        if y == m.label .. (net == "full_flat" and ", FullFlat" or ", two-tier") then
          local r = study.find(res, { kind = "grid", model = m.key, network = net, domain = x })
          return r and r.fits and 100 * r.mfu or nil
        end
      end
    end
  end
  local series = {}
  for _, m in ipairs(study.models) do
    local pts = {}
    for _, d in ipairs(sz.domains) do
      local a = study.advantage(res, m.key, d)
      if a then pts[#pts + 1] = { d, a } end
    end
    series[#series + 1] = { name = m.label, points = pts }
  end
  return {
    ["fullflat_mfu.svg"] = svg.heatmap({ title = "MFU (%) of the best strategy", x_label = "scale-up domain (GPUs)",
      y_label = "model, network", xs = sz.domains, ys = ys, value = cell, format = "%.1f" }),
    ["fullflat_gain.svg"] = svg.lines({ title = "FullFlat tokens/s over two-tier", x_label = "scale-up domain (GPUs)",
      y_label = "FullFlat / two-tier", series = series, log_x = true }),
  }
end

return M
