-- fathom serve: request-level serving simulation of a deployment, and capacity search.
local args = require("fathom.args")
local errors = require("fathom.errors")
local names = require("fathom.names")
local output = require("fathom.output")
local serve = require("fathom.serve")
local tablefmt = require("fathom.format.table")
local units = require("fathom.units")
local util = require("fathom.format.util")

local M = {}

local ARRIVAL = names.key("serve_arrival")

local spec = {
  { name = "model", arg = "NAME|FILE",
    help = "a model of configs/models (e.g. llama3.1_70b) or a file" },
  { name = "hardware", arg = "NODE", help = "a node of the hardware library (e.g. H100_SXM)" },
  { name = "hardware-lib", arg = "FILE", help = "hardware library [default: configs/hardware/hardware_library.yaml]" },
  { name = "workload", arg = "FILE", help = "decode spec for precisions and efficiencies "
    .. "[default: inference_decode_specs/search_default.yaml]" },
  { name = "precision-recipe", arg = "NAME", choices = names.precision_recipe, help = "serve a block-scaled "
    .. "checkpoint: nvfp4 (FP4 GEMMs, weights at 0.5625 B) or mxfp8, as the workload's precision_recipe "
    .. "[default: the workload's]" },
  { name = "tp", arg = "N", integer = { 1, 4096 }, help = "tensor parallelism per replica [default: 1]" },
  { name = "pp", arg = "N", integer = { 1, 4096 }, help = "pipeline stages per replica [default: 1]" },
  { name = "ep", arg = "N", integer = { 1, 4096 },
    help = "expert parallelism (MoE) over the replica's GPUs [default: 1]" },
  { name = "pod-size", arg = "K", integer = { 1, 4096 }, help = "GPUs per scale-up pod [default: 8]" },
  { name = "replicas", arg = "N", integer = { 1, 65536 }, help = "engine replicas [default: 1]" },
  { name = "prefill-replicas", arg = "N", integer = { 1, 65536 }, help = "disaggregate: N prefill "
    .. "replicas (--replicas decode ones); each prompt's KV moves to a decode replica over --kv-link" },
  { name = "prefill-tp", arg = "N", integer = { 1, 4096 }, help = "TP of a prefill replica [default: --tp]" },
  { name = "prefill-pp", arg = "N", integer = { 1, 4096 }, help = "PP of a prefill replica [default: --pp]" },
  { name = "prefill-hardware", arg = "NODE", help = "node of the prefill replicas [default: --hardware]" },
  { name = "kv-link", arg = "NAME", help = "interconnect of the hardware library the KV crosses, one per "
    .. "prefill GPU [default: the node's scale-out]" },
  { name = "dp-attention", arg = "R", integer = { 1, 65536 }, help = "attention data parallelism: every R "
    .. "replicas are the DP ranks of one engine, each with its own batch and KV cache, iterating in lock step "
    .. "for the MoE layers (SGLang --enable-dp-attention); --replicas a multiple of R [default: 1]" },
  { name = "swap-bw", arg = "B", help = "preempt by swapping the KV cache to host memory at B bytes/s "
    .. "(e.g. 25GB/s; vLLM preemption_mode=swap) instead of recomputing the prompt" },
  { name = "spec-tokens", arg = "K", integer = { 0, 16 }, help = "speculative decoding with the model's MTP "
    .. "module: each decode step verifies K draft tokens, drafted by K passes of one layer and the LM head" },
  { name = "spec-acceptance", arg = "A", number = true, help = "--spec-tokens: probability each draft is "
    .. "accepted (while the ones before it were) [default: 0.85, DeepSeek-V3's MTP]" },
  { name = "draft-model", arg = "NAME|FILE", help = "speculative decoding with a separate draft model on "
    .. "the same GPUs (e.g. llama3.2_1b for llama3.1_70b): K decode steps of it draft, the model verifies "
    .. "them in one pass; needs --spec-tokens K and --spec-acceptance A" },
  { name = "routing", arg = "R", choices = names.serve_routing,
    help = "how requests pick a replica [default: " .. names.serve_routing[1] .. "]" },
  { name = "qps", arg = "RATE", number = true, help = "open loop: requests per second, whole deployment" },
  { name = "arrival", arg = "A", choices = names.serve_arrival, help = "arrival process [default: "
    .. names.serve_arrival[1] .. " with --qps, " .. ARRIVAL.closed .. " with --concurrency]" },
  { name = "burstiness", arg = "CV", number = true, help = "gamma arrivals: coefficient of variation of the gaps" },
  { name = "concurrency", arg = "N", integer = { 1, 100000000 }, help = "closed loop: users, each sending "
    .. "its next request when the last is answered" },
  { name = "think-time", arg = "S", number = true, help = "closed loop: a user's pause between requests (s)" },
  { name = "requests", arg = "N", integer = { 1, 100000000 },
    help = "requests simulated [default: 1000; with --replay, the trace's rows]" },
  { name = "replay", arg = "FILE", help = "replay a request trace (CSV with a header, or .jsonl): arrival time "
    .. "(s), input and output tokens per row; --qps stretches its arrivals to that mean rate" },
  { name = "input-tokens", arg = "LEN",
    help = "prompt tokens: N or KIND:k=v,... (" .. table.concat(names.serve_length, ", ")
      .. "), e.g. lognormal:mean=512,sigma=0.5 [default: 512]" },
  { name = "output-tokens", arg = "LEN", help = "generated tokens, as --input-tokens [default: 128]" },
  { name = "policy", arg = "P", choices = names.serve_policy,
    help = "batching policy [default: " .. names.serve_policy[1] .. "]" },
  { name = "max-batch", arg = "N", integer = { 1, 65536 }, help = "requests in flight per replica [default: 256]" },
  { name = "max-batch-tokens", arg = "N", integer = { 1, 1073741824 },
    help = "tokens per iteration (the chunked policy's budget) [default: 8192]" },
  { name = "block-size", arg = "T", integer = { 1, 65536 }, help = "tokens per KV-cache page [default: 16]" },
  { name = "watermark", arg = "F", number = true, help = "share of KV pages kept free at admission [default: 0.01]" },
  { name = "prefix-hit", arg = "F", number = true, help = "share of each prompt found in the prefix cache, "
    .. "[0, 1): only the rest is prefilled" },
  { name = "rag-servers", arg = "N", integer = { 1, 1000000 }, help = "a retrieval stage before the engine: "
    .. "N servers (FIFO), each query taking --rag-time" },
  { name = "rag-time", arg = "S", number = true, help = "one retrieval query's time (s) [default: 0.03]" },
  { name = "rag-tokens", arg = "N", integer = { 0, 1073741824 }, help = "tokens retrieval adds to each prompt" },
  { name = "kv-fetch-share", arg = "F", number = true, help = "share of each prompt whose KV is fetched from "
    .. "--kv-fetch-tier instead of computed, [0, 1)" },
  { name = "kv-fetch-tier", arg = "TIER", choices = names.memory_tier,
    help = "memory tier of the node the KV comes from [default: remote_memory]" },
  { name = "thinking-tokens", arg = "N", integer = { 0, 1073741824 }, help = "reasoning tokens before each answer" },
  { name = "slo-ttft", arg = "S", number = true, help = "time-to-first-token bound (s) for goodput" },
  { name = "slo-tpot", arg = "S", number = true, help = "time-per-output-token bound (s) for goodput" },
  { name = "price-per-gpu-hour", arg = "P", number = true, help = "for the cost per million output tokens" },
  { name = "pue", arg = "F", number = true, help = "data-centre PUE for the energy per token [default: 1]" },
  { name = "find-max-qps", flag = true, help = "search the highest --qps whose SLO attainment is >= --target" },
  { name = "target", arg = "F", number = true, default = 0.9, help = "SLO attainment --find-max-qps needs" },
  { name = "seed", arg = "N", integer = { 0, 9007199254740992 }, help = "random seed [default: 1]" },
  { name = "search-gpus", arg = "N", integer = { 1, 4096 }, help = "search the deployments of N GPUs: TP x "
    .. "replicas x policy (and prefill:decode splits with --disaggregated), capacity at the SLOs, Pareto front" },
  { name = "jobs", arg = "N", integer = { 1, args.max_workers() },
    help = "--search-gpus: processes that share the deployments (same output as one) [default: the core count; "
      .. "under mpirun: the ranks]" },
  { name = "disaggregated", flag = true, help = "--search-gpus: also every prefill:decode split of the replicas" },
  { name = "format", arg = "FMT", choices = { "table", "yaml", "json", "csv", "svg" }, default = "table",
    help = "output (svg: --search-gpus's Pareto front)" },
  { name = "output-file", arg = "FILE", help = "write the output here (whole or not at all)" },
  { name = "trace-file", arg = "FILE", help = "write a Perfetto/Chrome trace of the request lifetimes "
    .. "(queued, prefill, decode; one track per request, one process per replica)" },
  { name = "help", flag = true, help = "this help" },
}
M.spec = spec -- the option table (completion and the man page read it)

M.usage = "usage: fathom serve [SPEC.yaml] --model NAME|FILE --hardware NODE [--tp N --pp N --ep N] [--replicas N]\n" ..
  "                    (--qps RATE [--arrival A] | --concurrency N) [--requests N]\n" ..
  "                    [--input-tokens LEN] [--output-tokens LEN] [--policy P]\n" ..
  "                    [--slo-ttft S] [--slo-tpot S] [--find-max-qps] [--seed N]\n" ..
  "                    [--format table|yaml|json|csv] [--output-file FILE]\n\n" ..
  "Simulates a stream of requests through N replicas of an inference engine (TP x PP\n" ..
  "GPUs each), event by event: arrivals, batching (continuous: prefill first, whole\n" ..
  "prompts; chunked: decode first with prompt chunks under a token budget; static:\n" ..
  "batches run to completion), a paged KV cache sized by the memory model (preemption by\n" ..
  "recompute when it is full), each iteration costed by fathom's C core. Reports TTFT,\n" ..
  "TPOT, end-to-end and queueing latency (mean, p50, p90, p99), throughput, goodput under\n" ..
  "the SLOs, KV-cache peak and preemptions. The same seed gives the same output, byte for\n" ..
  "byte. --find-max-qps searches the highest rate meeting the SLOs for --target of the\n" ..
  "requests.\n\n" ..
  "SPEC.yaml gives the same settings as keys (model, hardware, tp, pp, ep, replicas, routing,\n" ..
  "arrival, rate_per_s, burstiness, concurrency, think_s, requests, seed, input, output,\n" ..
  "policy, max_batch, max_batch_tokens, block_tokens, watermark, prefix_hit_ratio, dp_attention,\n" ..
  "swap_bw_bytes_per_s, spec_tokens, spec_acceptance, draft_model,\n" ..
  "slo_ttft_s, slo_tpot_s, prefill: {replicas, tp, pp, ep, hardware, kv_link}, replay);\n" ..
  "flags given beside it override its values. A spec with `pools` (name: {model, tp, replicas,\n" ..
  "policy, draft_model, ...}) and `clients` (name: {model or pool, rate_per_s, input, output,\n" ..
  "slo_ttft_s, ...}) serves several models at once: metrics per client, per pool and in total.\n\n" ..
  "examples:\n" ..
  "  fathom serve --model llama3.1_70b --hardware H100_SXM --tp 4 --replicas 2 --qps 8 --policy chunked\n" ..
  "  fathom serve --model llama3.1_70b --hardware H100_SXM --tp 4 --slo-ttft 0.5 --slo-tpot 0.05 --find-max-qps\n" ..
  "  fathom serve configs/serve_specs/llama3.1_70b_disaggregated.yaml --format json\n" ..
  "  fathom serve --model llama3.1_70b --hardware H100_SXM --tp 4 --qps 1 --draft-model llama3.2_1b \\\n" ..
  "      --spec-tokens 4 --spec-acceptance 0.7\n" ..
  "  fathom serve configs/serve_specs/two_models.yaml\n\n" ..
  args.usage(spec) .. "\n"

-- Core field paths -> the flag that sets them, so a refusal names what the user typed.
local flag_of = { rate_per_s = "--qps", concurrency = "--concurrency", think_s = "--think-time",
  burstiness = "--burstiness", requests = "--requests", input = "--input-tokens", output = "--output-tokens",
  max_batch = "--max-batch", max_batch_tokens = "--max-batch-tokens", block_tokens = "--block-size",
  watermark = "--watermark", replicas = "--replicas", prefix_hit_ratio = "--prefix-hit",
  dp_attention = "--dp-attention", swap_bw_bytes_per_s = "--swap-bw", spec_tokens = "--spec-tokens",
  spec_acceptance = "--spec-acceptance",
  slo_ttft_s = "--slo-ttft", slo_tpot_s = "--slo-tpot", kv_fetch_share = "--kv-fetch-share",
  retrieval_s = "--rag-time", thinking_tokens = "--thinking-tokens",
  kv_capacity_tokens = "KV cache", seed = "--seed" }

local function flag_error(e)
  if not errors.is_core(e) then error(e, 0) end
  local path = tostring(e.path or "")
  local head = path:match("^serve%.(.*)$") or path
  local top, rest = head:match("^([%w_]+)(.*)$")
  local flag = top and flag_of[top]
  if flag then errors.raise("serve: %s%s: %s", flag, rest ~= "" and (" " .. rest:sub(2)) or "", e.msg) end
  errors.raise("serve: %s", tostring(e))
end

local spec_of -- the serving spec's run() table, when there is one (its positions)

local function protect(f, ...)
  local res = table.pack(pcall(f, ...))
  if not res[1] then
    local _, e = pcall(serve.at_spec, spec_of, res[2]) -- at the spec's key, or the error as it was
    if e ~= res[2] then error(e, 0) end
    flag_error(res[2])
  end
  return table.unpack(res, 2, res.n)
end

local function stats_row(label, s)
  return { label, units.time(s.mean), units.time(s.p50), units.time(s.p90), units.time(s.p99), units.time(s.max) }
end

local function text(r, ctx)
  local out = {}
  out[#out + 1] = string.format("%s on %s: %d replica%s x %d GPU%s (TP %d, PP %d%s), %s batching\n",
    ctx.model, ctx.hardware, ctx.replicas, ctx.replicas == 1 and "" or "s", ctx.gpus, ctx.gpus == 1 and "" or "s",
    ctx.tp, ctx.pp, (ctx.ep > 1 and (", EP " .. ctx.ep) or "")
      .. ((ctx.dp_attention or 1) > 1 and (", DP attention " .. ctx.dp_attention) or ""), ctx.policy)
  if ctx.draft_model then
    out[#out + 1] = string.format("speculative decoding: %s drafts %d tokens a step, each accepted with "
      .. "probability %.4g: %.4g tokens a step expected\n", ctx.draft_model, ctx.spec_tokens, ctx.spec_acceptance,
      require("fathom.core").serve_spec_tokens_per_step(ctx.spec_tokens, ctx.spec_acceptance))
  elseif (ctx.spec_tokens or 0) > 0 then
    out[#out + 1] = string.format("speculative decoding: %d draft tokens a step (MTP), each accepted with "
      .. "probability %.4g\n", ctx.spec_tokens, ctx.spec_acceptance)
  end
  if ctx.swap_bw then
    out[#out + 1] = string.format("preemption by swap to host memory at %s\n", units.bandwidth(ctx.swap_bw))
  end
  local p = ctx.prefill
  if p then
    out[#out + 1] = string.format("prefill on %d replica%s x %d GPU%s of %s (TP %d, PP %d), KV over %s\n",
      p.replicas, p.replicas == 1 and "" or "s", p.gpus, p.gpus == 1 and "" or "s", p.hardware, p.tp, p.pp, p.link)
  end
  out[#out + 1] = string.format("%d requests, %s, seed %d\n%s\n", r.requests_completed, ctx.load, ctx.seed,
    ctx.lengths)
  if ctx.stages ~= "" then out[#out + 1] = ctx.stages .. "\n" end
  out[#out + 1] = "\n"
  out[#out + 1] = tablefmt.render({ "latency", "mean", "p50", "p90", "p99", "max" }, {
    stats_row("TTFT", r.ttft_s), stats_row("TPOT", r.tpot_s), stats_row("E2E", r.e2e_s),
    stats_row("queue", r.queue_s) })
  local t = r.throughput
  out[#out + 1] = string.format("\nthroughput  %.4g requests/s, %.4g input and %.4g output tokens/s (%.4g per GPU)\n",
    t.requests_per_s, t.input_tokens_per_s, t.output_tokens_per_s, t.output_tokens_per_s_per_gpu)
  if ctx.slo ~= "" then
    out[#out + 1] = string.format("goodput     %.4g requests/s: %s of the requests within %s\n",
      r.goodput.requests_per_s, units.percent(r.goodput.slo_attainment), ctx.slo)
  end
  out[#out + 1] = string.format("KV cache    peak %s of %s tokens per replica, %d preemption%s\n",
    units.percent(r.kv_cache.peak_fraction), units.count(r.kv_cache.capacity_tokens):gsub("%s+$", ""),
    r.preemptions, r.preemptions == 1 and "" or "s")
  out[#out + 1] = string.format("engine      %d iterations, mean batch %.4g requests / %.4g tokens, busy %s\n",
    r.iterations, r.mean_batch.requests, r.mean_batch.tokens, units.percent(r.busy_fraction))
  local e = r.economics
  if e then
    local parts = {}
    if e.energy_j_per_output_token then
      parts[#parts + 1] = string.format("%.4g J per output token (at rated power)", e.energy_j_per_output_token)
    end
    if e.cost_per_million_output_tokens then
      parts[#parts + 1] = string.format("%.4g per million output tokens", e.cost_per_million_output_tokens)
    end
    out[#out + 1] = "economics   " .. table.concat(parts, ", ") .. "\n"
  end
  if ctx.max_qps then
    out[#out + 1] = string.format("\ncapacity    %.4g requests/s meet the SLOs for >= %s of the requests " ..
      "(%d simulations; the figures above are at that rate)\n", ctx.max_qps, units.percent(ctx.target), ctx.steps)
  end
  return table.concat(out)
end

local order = { "requests_completed", "duration_s", "throughput", "ttft_s", "tpot_s", "e2e_s", "queue_s", "goodput",
  "kv_cache", "preemptions", "iterations", "mean_batch", "busy_fraction", "mean_in_system", "economics", "max_qps" }

-- csv: one row, the nested fields flattened to dotted columns.
local function flat(r)
  local row = {}
  local function walk(prefix, v)
    if type(v) == "table" then
      for _, k in ipairs(util.keys(v)) do walk(prefix == "" and k or (prefix .. "." .. k), v[k]) end
    else
      row[prefix] = v
    end
  end
  walk("", r)
  return { row }
end

-- fathom serve --search-gpus N: the deployments ranked by capacity, and the Pareto front.
function M.search(a, opts)
  if not (a.slo_ttft_s or a.slo_tpot_s) then errors.raise("serve: --search-gpus needs --slo-ttft and/or --slo-tpot") end
  for _, k in ipairs({ "tp", "replicas", "policy", "prefill_replicas", "qps", "concurrency", "replay" }) do
    if opts[k] then errors.raise("serve: --search-gpus chooses --%s itself: drop it", k:gsub("_", "-")) end
  end
  a.requests = opts.requests or 300
  a.arrival, a.rate_per_s = nil, nil
  local res = protect(serve.search_deployments, a, opts.search_gpus, { jobs = opts.jobs,
    disaggregated = opts.disaggregated,
    target = opts.target })
  if #res.deployments == 0 then
    errors.raise("serve: no deployment of %d GPUs meets the SLOs for %s of the requests at any rate",
      opts.search_gpus, units.percent(opts.target))
  end
  local title = string.format("%s on %d %s", a.model, opts.search_gpus, a.hardware)
  if opts.format == "svg" then
    local svg = serve.pareto_svg(res, title .. ": Pareto front")
    if opts.output_file then output.write_file(opts.output_file, svg) else io.stdout:write(svg) end
    return 0
  end
  if opts.format ~= "table" then
    local v = { deployments = util.array(res.deployments), front = util.array(res.front),
      points = util.array(res.points) }
    output.write(opts.format == "csv" and res.deployments or v, opts.format, opts.output_file)
    return 0
  end
  local rows = {}
  for i, d in ipairs(res.deployments) do
    rows[i] = { i, d.tp, d.replicas, d.prefill_replicas > 0 and d.prefill_replicas or "-", d.policy,
      string.format("%.4g", d.capacity_per_s), string.format("%.4g", d.capacity_per_s_per_gpu),
      string.format("%.4g", d.output_tokens_per_s_per_gpu), units.time(d.ttft_p99_s), units.time(d.tpot_mean_s) }
  end
  local out = { string.format("%s, SLOs %s for %s of %d requests per simulation\n\n", title,
    table.concat({ a.slo_ttft_s and ("TTFT " .. units.time(a.slo_ttft_s)) or nil,
      a.slo_tpot_s and ("TPOT " .. units.time(a.slo_tpot_s)) or nil }, " and "),
    units.percent(opts.target), a.requests) }
  out[#out + 1] = tablefmt.render({ "#", "TP", "replicas", "prefill", "policy", "capacity/s", "per GPU",
    "tok/s/GPU", "p99 TTFT", "TPOT" }, rows)
  local front = {}
  for i, p in ipairs(res.front) do
    front[i] = { string.format("%.4g", p.tokens_per_s_per_user), string.format("%.4g", p.tokens_per_s_per_gpu),
      p.tp, p.replicas, p.prefill_replicas > 0 and p.prefill_replicas or "-", p.policy,
      string.format("%.4g", p.rate_per_s) }
  end
  out[#out + 1] = "\nPareto front (output tokens/s per user vs per GPU; --format svg draws it):\n"
  out[#out + 1] = tablefmt.render({ "tok/s/user", "tok/s/GPU", "TP", "replicas", "prefill", "policy", "rate/s" },
    front)
  local body = table.concat(out)
  if opts.output_file then output.write_file(opts.output_file, body) else io.stdout:write(body) end
  return 0
end

-- fathom serve SPEC.yaml with `clients`: several models on one cluster (fathom.serve_multi).
local function multi_text(r, a)
  local top = a.checked.top
  local pools, clients = {}, {}
  for _, p in ipairs(a.checked.pools) do
    local m = r.pools[p.name]
    pools[#pools + 1] = { p.name, m.model .. (m.draft_model and (" + draft " .. m.draft_model) or ""), m.hardware,
      m.gpus, string.format("%d x TP %d%s", m.replicas, m.tp, m.pp > 1 and (" PP " .. m.pp) or ""), m.policy,
      units.percent(m.kv_cache.peak_fraction), units.percent(m.busy_fraction), table.concat(m.clients, ", ") }
  end
  local models = {}
  for _, c in ipairs(a.checked.clients) do
    local m = r.clients[c.name]
    models[c.model] = true
    local slo = {}
    if c.slo_ttft_s then slo[#slo + 1] = "TTFT " .. units.time(c.slo_ttft_s) end
    if c.slo_tpot_s then slo[#slo + 1] = "TPOT " .. units.time(c.slo_tpot_s) end
    clients[#clients + 1] = { c.name, c.model, m.pool, m.requests_completed, units.time(m.ttft_s.p50),
      units.time(m.ttft_s.p99), units.time(m.tpot_s.mean), units.time(m.e2e_s.p99),
      string.format("%.4g", m.throughput.output_tokens_per_s), #slo > 0 and table.concat(slo, ", ") or "-",
      #slo > 0 and units.percent(m.goodput.slo_attainment) or "-" }
  end
  local t = r.totals
  clients[#clients + 1] = { "total", "", "", t.requests_completed, "", "", "", "",
    string.format("%.4g", t.throughput.output_tokens_per_s), "", units.percent(t.goodput.slo_attainment) }
  local nm = 0
  for _ in pairs(models) do nm = nm + 1 end
  local out = { string.format("%d client%s of %d model%s on %d GPUs in %d pool%s, seed %d\n\n", #a.checked.clients,
    #a.checked.clients == 1 and "" or "s", nm, nm == 1 and "" or "s", t.gpus, #a.checked.pools,
    #a.checked.pools == 1 and "" or "s", top.seed or 1) }
  out[#out + 1] = tablefmt.render({ "pool", "model", "hardware", "GPUs", "engine", "policy", "KV peak", "busy",
    "clients" }, pools)
  out[#out + 1] = "\n"
  out[#out + 1] = tablefmt.render({ "client", "model", "pool", "requests", "TTFT p50", "TTFT p99", "mean TPOT",
    "E2E p99", "out tok/s", "SLOs", "met" }, clients)
  out[#out + 1] = string.format("\ntotal       %.4g requests/s, %.4g output tokens/s (%.4g per GPU) over %s; "
    .. "goodput %.4g requests/s\n", t.throughput.requests_per_s, t.throughput.output_tokens_per_s,
    t.throughput.output_tokens_per_s_per_gpu, units.time(t.duration_s), t.goodput.requests_per_s)
  return table.concat(out)
end

local function multi(a, opts)
  for _, s in ipairs(spec) do
    local k = s.name:gsub("-", "_")
    if opts[k] ~= nil and k ~= "format" and k ~= "output_file" and k ~= "target" then
      errors.raise("serve: --%s: a spec with clients sets everything in the file (only --format and "
        .. "--output-file apply)", s.name)
    end
  end
  if opts.format == "svg" then errors.raise("serve: --format svg draws --search-gpus's Pareto front") end
  local r = serve.run(a)
  if opts.format == "table" then
    local body = multi_text(r, a)
    if opts.output_file then output.write_file(opts.output_file, body) else io.stdout:write(body) end
    return 0
  end
  if opts.format == "csv" then
    local rows = {}
    for _, c in ipairs(a.checked.clients) do
      local row = flat(r.clients[c.name])[1]
      row.client = c.name
      rows[#rows + 1] = row
    end
    local row = flat(r.totals)[1]
    row.client = "total"
    rows[#rows + 1] = row
    output.write(rows, "csv", opts.output_file)
    return 0
  end
  output.write(r, opts.format, opts.output_file)
  return 0
end

function M.main(argv)
  local opts, extra = args.parse(argv, spec, "serve")
  if opts.help then
    io.stdout:write(M.usage)
    return 0
  end
  if #extra > 1 then errors.raise("serve: unexpected argument '%s' (see 'fathom serve --help')", extra[2]) end
  -- The spec file's settings, then the flags given beside it.
  local a = extra[1] and serve.load_spec(extra[1]) or {}
  if a.clients then return multi(a, opts) end
  local from_flags = { model = "model", hardware = "hardware", hardware_lib = "hardware_lib", workload = "workload",
    precision_recipe = "precision_recipe",
    tp = "tp", pp = "pp", ep = "ep", pod_size = "pod_size", replicas = "replicas", routing = "routing",
    qps = "rate_per_s", arrival = "arrival", burstiness = "burstiness", concurrency = "concurrency",
    think_time = "think_s", requests = "requests", policy = "policy", max_batch = "max_batch",
    max_batch_tokens = "max_batch_tokens", block_size = "block_tokens", watermark = "watermark",
    prefix_hit = "prefix_hit_ratio", slo_ttft = "slo_ttft_s", slo_tpot = "slo_tpot_s", seed = "seed",
    prefill_replicas = "prefill_replicas", prefill_tp = "prefill_tp", prefill_pp = "prefill_pp",
    prefill_hardware = "prefill_hardware", kv_link = "kv_link", dp_attention = "dp_attention",
    spec_tokens = "spec_tokens", spec_acceptance = "spec_acceptance", draft_model = "draft_model" }
  for flag, key in pairs(from_flags) do
    if opts[flag] ~= nil then a[key] = opts[flag] end
  end
  if a.spec_acceptance and not a.spec_tokens then
    errors.raise("serve: --spec-acceptance needs --spec-tokens K")
  end
  if (a.spec_tokens or 0) > 0 and not a.spec_acceptance and not a.draft_model then
    a.spec_acceptance = serve.SPEC_ACCEPTANCE
  end
  if opts.swap_bw then
    local b = units.parse_bytes(tostring(opts.swap_bw):gsub("/s%s*$", ""))
    if not b or b <= 0 then
      errors.raise("serve: --swap-bw: expected a bandwidth > 0 such as 25GB/s or 2.5e10, got '%s'", opts.swap_bw)
    end
    a.swap_bw_bytes_per_s = b
  end
  if opts.input_tokens then a.input = serve.parse_length(opts.input_tokens, "serve: --input-tokens") end
  if opts.rag_servers or opts.rag_time or opts.rag_tokens then
    if not opts.rag_servers then errors.raise("serve: --rag-time and --rag-tokens need --rag-servers N") end
    if opts.rag_time and opts.rag_time < 0 then errors.raise("serve: --rag-time must be >= 0 s") end
    a.retrieval = { servers = opts.rag_servers, s = opts.rag_time or 0.03, tokens = opts.rag_tokens or 0 }
  end
  if opts.kv_fetch_share or opts.kv_fetch_tier then
    if not opts.kv_fetch_share then errors.raise("serve: --kv-fetch-tier needs --kv-fetch-share F") end
    a.kv_fetch = { share = opts.kv_fetch_share, tier = opts.kv_fetch_tier }
  end
  if opts.thinking_tokens then a.thinking_tokens = opts.thinking_tokens end
  if opts.output_tokens then a.output = serve.parse_length(opts.output_tokens, "serve: --output-tokens") end
  if opts.concurrency and not opts.arrival and a.arrival ~= ARRIVAL.closed then a.arrival = ARRIVAL.closed end
  if opts.qps and not opts.arrival and a.arrival == ARRIVAL.closed then a.arrival = nil end
  for _, k in ipairs({ "model", "hardware" }) do
    if not a[k] then errors.raise("serve: missing required option '--%s' (or a spec file)", k) end
  end
  a.input = a.input or serve.parse_length("512", "input")
  a.output = a.output or serve.parse_length("128", "output")
  local arrival = a.arrival or (a.concurrency and ARRIVAL.closed or names.serve_arrival[1])
  a.arrival = arrival
  if arrival == ARRIVAL.closed then
    if not a.concurrency then errors.raise("serve: --arrival %s needs --concurrency N", arrival) end
    if opts.qps then errors.raise("serve: --qps and --concurrency exclude each other (open or closed loop)") end
    if opts.find_max_qps then errors.raise("serve: --find-max-qps searches an open-loop rate: drop --concurrency") end
  elseif not a.rate_per_s and not opts.find_max_qps and not opts.search_gpus and not (opts.replay or a.trace) then
    errors.raise("serve: give --qps RATE (open loop), --concurrency N (closed loop) or --replay FILE")
  elseif opts.concurrency then
    errors.raise("serve: --concurrency is for the closed loop; with --qps use --arrival poisson|gamma|fixed")
  end
  if opts.qps and opts.qps <= 0 then errors.raise("serve: --qps must be > 0 requests/s, got %s", opts.qps) end
  for _, k in ipairs({ "slo_ttft", "slo_tpot" }) do
    if opts[k] and opts[k] <= 0 then
      errors.raise("serve: --%s must be > 0 seconds, got %s", k:gsub("_", "-"), tostring(opts[k]))
    end
  end
  if not (opts.target > 0 and opts.target <= 1) then
    errors.raise("serve: --target must be a share in (0, 1], got %s", tostring(opts.target))
  end
  if not a.prefill_replicas then
    for _, k in ipairs({ "prefill_tp", "prefill_pp", "prefill_hardware", "kv_link" }) do
      if a[k] then errors.raise("serve: --%s needs --prefill-replicas N", k:gsub("_", "-")) end
    end
  elseif a.policy == names.key("serve_policy").static then
    errors.raise("serve: --policy static runs prefill and decode together: it cannot be disaggregated")
  end
  if opts.replay then a.trace = serve.load_trace(opts.replay) end
  if a.trace then
    local tr = a.trace
    local n = math.min(a.requests or #tr.input, #tr.input)
    for _, k in ipairs({ "arrival_s", "input", "output" }) do
      for i = #tr[k], n + 1, -1 do tr[k][i] = nil end
    end
    a.requests = n
  end
  local spec_doc = a.doc
  if opts.search_gpus then return M.search(a, opts) end
  if opts.format == "svg" then errors.raise("serve: --format svg draws --search-gpus's Pareto front") end
  spec_of = spec_doc and a or nil
  local show = { hardware = a.hardware, replicas = a.replicas or 1, tp = a.tp or 1, pp = a.pp or 1, ep = a.ep or 1,
    policy = a.policy or names.serve_policy[1], seed = a.seed or 1, prefill_replicas = a.prefill_replicas,
    prefill_hardware = a.prefill_hardware or a.hardware, prefill_tp = a.prefill_tp or a.tp or 1,
    prefill_pp = a.prefill_pp or a.pp or 1, slo_ttft = a.slo_ttft_s, slo_tpot = a.slo_tpot_s,
    replay = opts.replay or (a.trace and extra[1]), concurrency = a.concurrency, dp_attention = a.dp_attention,
    swap_bw = a.swap_bw_bytes_per_s, spec_tokens = a.spec_tokens, spec_acceptance = a.spec_acceptance,
    draft_model = a.draft_model }
  local def, plan, pplan, info, pinfo, dplan = protect(serve.build, a)
  a.plan, a.prefill_plan, a.draft_plan = plan, pplan, dplan
  a.kv_link_bw_bytes_per_s, a.kv_link_latency_s = def.kv_link_bw_bytes_per_s, def.kv_link_latency_s
  -- what build() derived from the engine, kept so later runs need no engine facts
  a.kv_fetch_share, a.kv_fetch_bw_bytes_per_s = def.kv_fetch_share, def.kv_fetch_bw_bytes_per_s
  a.kv_fetch_latency_s, a.kv_fetch = def.kv_fetch_latency_s, nil
  for _, k in ipairs({ "model", "hardware", "hardware_lib", "workload", "tp", "pp", "ep", "pod_size", "prefill_tp",
    "prefill_pp", "prefill_hardware", "kv_link", "draft_model" }) do
    a[k] = nil
  end
  a.doc = spec_doc
  -- An SLO no request can meet even alone is an input error, not a zero goodput.
  if show.slo_ttft or show.slo_tpot then
    local key, msg = protect(serve.slo_refusal, serve.definition(a), plan, pplan, dplan, show.slo_ttft,
      show.slo_tpot)
    if key then
      if spec_doc and spec_doc[key] then errors.at(spec_doc, key, key, "%s", msg) end
      errors.raise("serve: %s %s", key == "slo_ttft_s" and "--slo-ttft" or "--slo-tpot", msg)
    end
  end
  local r, max_qps, steps
  if opts.find_max_qps then
    max_qps, r, steps = protect(serve.find_max_qps, a, opts.target)
    r.max_qps = max_qps
  else
    a.per_request = opts.trace_file ~= nil
    local q
    r, q = protect(serve.run, a)
    if q then
      output.write_file(opts.trace_file, require("fathom.format.json").encode(serve.trace_events(q)) .. "\n")
    end
  end
  if opts.price_per_gpu_hour and opts.price_per_gpu_hour < 0 then
    errors.raise("serve: --price-per-gpu-hour must be >= 0, got %s", opts.price_per_gpu_hour)
  end
  if opts.pue and opts.pue < 1 then errors.raise("serve: --pue must be >= 1, got %s", opts.pue) end
  local all_gpus = show.replicas * info.gpus + (show.prefill_replicas or 0) * (pinfo and pinfo.gpus or info.gpus)
  local power = info.system.node.device_compute.power_watts
  r.economics = serve.economics(r, all_gpus, power, opts.price_per_gpu_hour, opts.pue)
  if next(r.economics) == nil then r.economics = nil end
  util.ordered(r, order)
  local fmt = opts.format
  local slo = {}
  if show.slo_ttft then slo[#slo + 1] = "TTFT " .. units.time(show.slo_ttft) end
  if show.slo_tpot then slo[#slo + 1] = "TPOT " .. units.time(show.slo_tpot) end
  if fmt == "table" then
    local stages = {}
    if def.retrieval_servers and def.retrieval_servers > 0 then
      stages[#stages + 1] = string.format("retrieval on %d servers (%s a query, +%d prompt tokens)",
        def.retrieval_servers, units.time(def.retrieval_s), def.retrieval_tokens or 0)
    end
    if def.kv_fetch_share and def.kv_fetch_share > 0 then
      stages[#stages + 1] = string.format("%s of each prompt's KV fetched at %s/s",
        units.percent(def.kv_fetch_share), units.bandwidth(def.kv_fetch_bw_bytes_per_s):gsub("B/s$", "B"))
    end
    if def.thinking_tokens and def.thinking_tokens > 0 then
      stages[#stages + 1] = string.format("%d thinking tokens per request", def.thinking_tokens)
    end
    local rate = max_qps or a.rate_per_s
    local load = arrival == ARRIVAL.closed and string.format("%d users (closed loop)", show.concurrency)
      or show.replay and string.format("replay of %s%s", show.replay, rate and string.format(" at %.4g/s", rate) or "")
      or string.format("%s arrivals at %.4g/s", arrival, rate)
    local body = text(r, { model = info.model, hardware = show.hardware, replicas = show.replicas, gpus = info.gpus,
      prefill = show.prefill_replicas and {
        replicas = show.prefill_replicas, gpus = pinfo.gpus, hardware = show.prefill_hardware,
        tp = show.prefill_tp, pp = show.prefill_pp,
        link = string.format("%s/s, %s", units.bandwidth(def.kv_link_bw_bytes_per_s):gsub("B/s$", "B"),
          units.time(def.kv_link_latency_s)) },
      tp = show.tp, pp = show.pp, ep = show.ep, policy = show.policy, load = load, seed = show.seed,
      dp_attention = show.dp_attention, swap_bw = show.swap_bw, spec_tokens = show.spec_tokens,
      spec_acceptance = show.spec_acceptance, draft_model = show.draft_model,
      lengths = a.trace and "prompt and output lengths from the trace" or string.format(
        "prompts %s tokens, outputs %s tokens", serve.describe_length(a.input), serve.describe_length(a.output)),
      stages = table.concat(stages, "\n"), slo = table.concat(slo, " and "), max_qps = max_qps, target = opts.target,
      steps = steps and #steps })
    if opts.output_file then output.write_file(opts.output_file, body) else io.stdout:write(body) end
  else
    output.write(fmt == "csv" and flat(r) or r, fmt, opts.output_file)
  end
  return 0
end

return M
