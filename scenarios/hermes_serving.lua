-- A HERMES-style serving study: one request stream plain, with RAG, with KV from CXL, reasoning.
-- Usage: fathom scenario run hermes_serving [FILE.svg]
-- After HERMES (a Heterogeneous Multi-stage LLM inference Execution Simulator): the same
-- request stream served (a) plain, (b) with RAG retrieval on CPU servers before the prompt,
-- (c) with most of the prompt's KV cache fetched from a CXL memory pool instead of computed,
-- (d) with a reasoning stage of thinking tokens; p99 TTFT and E2E at one load, and the
-- capacity at the SLOs, in one table and (given a file name) one SVG.
--
-- Llama 3.1 70B on one H100 replica of TP 4, chunked prefill; prompts lognormal (mean 1024),
-- answers lognormal (mean 256), Poisson arrivals at 3 requests/s; SLOs: TTFT 1 s, TPOT 50 ms,
-- for 90% of the requests.
--   (b) 16 retrieval servers, each embedding the query (5 ms) and scanning a flat index of
--       10M 768-d vectors at 0.5 TFLOP/s (30.7 ms); 1024 retrieved tokens join the prompt;
--   (c) 75% of each prompt's KV (a shared document prefix) read from the node's
--       remote_memory tier (cxl_pool: 32 GB/s x 0.7 per GPU) rather than prefilled;
--   (d) 512 thinking tokens before each answer (TTFT is the first thinking token).
local serve = require("fathom.serve")
local tablefmt = require("fathom.format.table")
local units = require("fathom.units")

local base = { model = "llama3.1_70b", hardware = "H100_SXM", tp = 4, requests = 500, rate_per_s = 3,
  input = "lognormal:mean=1024,sigma=0.5", output = "lognormal:mean=256,sigma=0.5", policy = "chunked",
  max_batch_tokens = 2048, slo_ttft_s = 1, slo_tpot_s = 0.05 }

local variants = {
  { name = "plain", extra = {} },
  { name = "RAG on CPU", extra = { retrieval = { servers = 16, embed_s = 0.005, corpus_vectors = 1e7, dim = 768,
    flops_per_s = 1e12, efficiency = 0.5, tokens = 1024 } } },
  { name = "KV from CXL", extra = { kv_fetch = { share = 0.75 } } },
  { name = "reasoning", extra = { thinking_tokens = 512 } },
}

local results = {}
for i, v in ipairs(variants) do
  local a = {}
  for k, x in pairs(base) do a[k] = x end
  for k, x in pairs(v.extra) do a[k] = x end
  local r = serve.run(a)
  local cap = serve.find_max_qps(a, 0.9)
  results[i] = { name = v.name, ttft_p99_s = r.ttft_s.p99, e2e_p99_s = r.e2e_s.p99, tpot_mean_s = r.tpot_s.mean,
    capacity_per_s = cap }
end

local rows = {}
for _, x in ipairs(results) do
  rows[#rows + 1] = { x.name, units.time(x.ttft_p99_s), units.time(x.tpot_mean_s), units.time(x.e2e_p99_s),
    string.format("%.2f", x.capacity_per_s) }
end
io.stdout:write("Llama 3.1 70B, one H100 replica (TP 4), chunked prefill, 3 requests/s (500 requests)\n\n")
io.stdout:write(tablefmt.render({ "pipeline", "p99 TTFT", "mean TPOT", "p99 E2E", "capacity (req/s at SLO)" }, rows))

-- One SVG: p99 TTFT and p99 E2E (left axis, seconds) and the capacity (right bars, req/s).
local function svg(res)
  local w, hgt, left, bottom, top = 720, 380, 70, 60, 50
  local plot_w, plot_h = w - left - 80, hgt - top - bottom
  local max_s, max_c = 0, 0
  for _, x in ipairs(res) do
    max_s = math.max(max_s, x.ttft_p99_s, x.e2e_p99_s)
    max_c = math.max(max_c, x.capacity_per_s)
  end
  local out = { string.format('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" ' ..
    'font-family="sans-serif" font-size="12">', w, hgt) }
  local function add(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
  add('<text x="%d" y="20" font-size="14" text-anchor="middle">%s</text>', w / 2,
    "HERMES-style pipelines: Llama 3.1 70B on one H100 TP-4 replica at 3 req/s")
  add('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>', left, top, left, top + plot_h)
  add('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>', left, top + plot_h, left + plot_w, top + plot_h)
  add('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>', left + plot_w, top, left + plot_w, top + plot_h)
  add('<text x="16" y="%d" transform="rotate(-90 16 %d)" text-anchor="middle">latency (s)</text>',
    top + plot_h / 2, top + plot_h / 2)
  add('<text x="%d" y="%d" transform="rotate(90 %d %d)" text-anchor="middle">capacity at SLO (requests/s)</text>',
    w - 20, top + plot_h / 2, w - 20, top + plot_h / 2)
  for k = 0, 4 do
    local y = top + plot_h - plot_h * k / 4
    add('<text x="%d" y="%.1f" text-anchor="end">%.3g</text>', left - 6, y + 4, max_s * k / 4)
    add('<text x="%d" y="%.1f">%.3g</text>', left + plot_w + 6, y + 4, max_c * k / 4)
  end
  local group = plot_w / #res
  local bar = group / 5
  local colors = require("fathom.format.plot").palette
  for i, x in ipairs(res) do
    local x0 = left + (i - 1) * group + bar
    local vals = { x.ttft_p99_s / max_s, x.e2e_p99_s / max_s, x.capacity_per_s / max_c }
    for j, f in ipairs(vals) do
      local bh = plot_h * f
      add('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>', x0 + (j - 1) * bar,
        top + plot_h - bh, bar * 0.9, bh, colors[j])
    end
    add('<text x="%.1f" y="%d" text-anchor="middle">%s</text>', left + (i - 0.5) * group, top + plot_h + 18, x.name)
  end
  add('<text x="%d" y="%d" text-anchor="middle">pipeline</text>', left + plot_w / 2, top + plot_h + 40)
  local labels = { "p99 TTFT (s)", "p99 E2E (s)", "capacity (req/s)" }
  for j, l in ipairs(labels) do
    add('<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>', left + (j - 1) * 150,
      top - 20, colors[j], left + (j - 1) * 150 + 14, top - 11, l)
  end
  out[#out + 1] = "</svg>\n"
  return table.concat(out, "\n")
end

local path = arg and arg[1]
if path then
  require("fathom.output").write_file(path, svg(results))
  io.stdout:write("\nwrote " .. path .. "\n")
end
return results
