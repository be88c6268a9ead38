-- The FullFlat co-design study (Tithi et al. 2025, "Scaling Intelligence: Designing Data
-- Centers for Next-Gen Language Models", arXiv 2506.15006; abstract in shared/seeds):
-- peak FLOPS, HBM bandwidth and capacity, the scale-up domain, a two-tier scale-out network
-- against FullFlat (one optical tier giving every GPU its scale-up bandwidth to every
-- other), compute/communication overlap and in-network collectives, for a dense and an MoE
-- model. Every point is answered by the best strategy of a full `fathom search` on that
-- system (fathom.search.run), so each design is judged at its own best parallelism.
--
-- This module builds the points and computes them over local processes or MPI ranks
-- (fathom.parallel.map); compare.lua prints the tables, draws the SVGs and states the
-- findings. Nothing is tuned per point: the systems differ only by the axes below.
local parallel = require("fathom.parallel")
local search = require("fathom.search")

local M = {}

-- Models: a dense GPT-3 175B-class and a trillion-parameter MoE (Hot Interconnects 2025's
-- config 4: 256 experts, top-6, about 1T parameters), each at a cluster size and batch of the
-- study's scale.
M.models = {
  { key = "dense", label = "GPT-3 175B (dense)", model = "gpt3_175b", gpus = 4096, batch = 2048, seq = 2048 },
  { key = "moe", label = "1T MoE (256 experts)", gpus = 8192, batch = 4096, seq = 4096,
    model = "model_zoo/hot_interconnects_2025/gpt_moe_config_4__256_experts.yaml" },
}

-- The GPU: a B200 (2.25 PFLOP/s BF16, 8 TB/s and 180 GB of HBM3e, NVLink 5 at 900 GB/s per
-- direction with NVLS). Scale-out for two-tier: 800 Gb/s per GPU (ConnectX-8 XDR, SHARP),
-- a leaf/spine fabric at full bisection (oversubscription 1:1, two switch hops).
M.node = "B200"
M.two_tier_link = "ib_xdr"

M.networks = {
  two_tier = "two-tier (NVLink domain + 800 Gb/s leaf/spine)",
  full_flat = "FullFlat (scale-up bandwidth to every GPU, one tier)",
}

-- Sizes: the default answers in seconds (the MoE space narrowed to 1F1B / interleaved and
-- ZeRO-1); --full is the study (every schedule and ZeRO stage, more domains and factors).
M.sizes = {
  default = {
    domains = { 8, 64 }, baseline_domain = 8,
    factors = { flops = { 2 }, hbm_bw = { 2 }, hbm_cap = { 2 } },
    moe_fix = { schedule = { "1F1B", "INTERLEAVED" }, dp = { "ZERO1" }, recompute = { "none", "selective" } },
    dense_fix = nil,
  },
  full = {
    domains = { 8, 16, 32, 64, 128, 256 }, baseline_domain = 8,
    factors = { flops = { 2, 4 }, hbm_bw = { 2, 4 }, hbm_cap = { 2 } },
    moe_fix = nil, dense_fix = nil,
  },
}

-- Overlap "on": the search's default workload (half of the layer collectives hidden under
-- compute, DP hidden under backward; configs/train_specs/search_default.yaml); "off": none.
M.overlap_off = { comp_comm_efficiency = 0.0, comm_mem_efficiency = 0.0 }

local function copy(t)
  if type(t) ~= "table" then return t end
  local out = {}
  for k, v in pairs(t) do out[k] = copy(v) end
  return out
end

-- points(size) -> the study's points: the grid model x network x domain at baseline
-- hardware, then one-at-a-time changes (sensitivities) of each model and network at the
-- baseline domain: x FLOPS, x HBM bandwidth, x HBM capacity, overlap off, in-network
-- collectives off.
function M.points(size)
  local sz = M.sizes[size or "default"]
  local pts = {}
  local function add(p)
    p.flops = p.flops or 1
    p.hbm_bw = p.hbm_bw or 1
    p.hbm_cap = p.hbm_cap or 1
    if p.overlap == nil then p.overlap = true end
    if p.inc == nil then p.inc = true end
    pts[#pts + 1] = p
  end
  for _, m in ipairs(M.models) do
    for _, net in ipairs({ "two_tier", "full_flat" }) do
      for _, dom in ipairs(sz.domains) do add({ kind = "grid", model = m.key, network = net, domain = dom }) end
    end
  end
  for _, m in ipairs(M.models) do
    for _, net in ipairs({ "two_tier", "full_flat" }) do
      local d = sz.baseline_domain
      for _, k in ipairs({ "flops", "hbm_bw", "hbm_cap" }) do
        for _, x in ipairs(sz.factors[k]) do
          add({ kind = "sensitivity", model = m.key, network = net, domain = d, [k] = x, change = k .. " x" .. x })
        end
      end
      add({ kind = "sensitivity", model = m.key, network = net, domain = d, overlap = false, change = "overlap off" })
      add({ kind = "sensitivity", model = m.key, network = net, domain = d, inc = false,
        change = "in-network collectives off" })
    end
  end
  return pts
end

local function model_of(key)
  for _, m in ipairs(M.models) do
    if m.key == key then return m end
  end
end
M.model_of = model_of

-- def(point, size) -> the search definition of one point.
function M.def(p, size)
  local m = model_of(p.model)
  local sz = M.sizes[size or "default"]
  local def = search.prepare({ model = m.model, node = M.node, gpus = m.gpus, pod_size = p.domain,
    global_batch = m.batch, seq = m.seq, workload = "train_specs/search_default.yaml", top = 1,
    fix = p.model == "moe" and sz.moe_fix or sz.dense_fix })
  local node = def.node
  local c = node.device_compute
  c.bf16_nominal = c.bf16_nominal * p.flops
  c.fp8_nominal = c.fp8_nominal and c.fp8_nominal * p.flops
  local hbm = node.device_memory_tiers.xpu_memory
  hbm.bandwidth_per_stack_nominal = hbm.bandwidth_per_stack_nominal * p.hbm_bw
  hbm.size_per_stack = hbm.size_per_stack * p.hbm_cap
  local lib = require("fathom.spec").hardware_library(require("fathom.analysis").resolve(
    "hardware/hardware_library.yaml"))
  def.scale_up = copy(def.scale_up)
  if p.network == "full_flat" then
    -- one tier: every GPU reaches every other at its scale-up bandwidth, one switch hop
    def.scale_out = copy(def.scale_up)
    def.scale_out_type = "full_flat"
  else
    def.scale_out = copy(lib.interconnect[M.two_tier_link])
    def.scale_out_type = "two_tier"
  end
  def.scale_up.in_network_reduction = p.inc and def.scale_up.in_network_reduction or false
  def.scale_out.in_network_reduction = p.inc and def.scale_out.in_network_reduction or false
  if not p.overlap then
    for k, v in pairs(M.overlap_off) do def.workload[k] = v end
  end
  return def
end

-- evaluate(point, size) -> {fits, mfu, tokens_per_s, step_s, strategy fields} of its best strategy.
function M.evaluate(p, size)
  local res = search.run(M.def(p, size), 1, false)
  local h = res.hits[1]
  if not h then return { fits = false, considered = res.stats.considered } end
  return { fits = true, mfu = h.mfu, tokens_per_s = h.tokens_per_s, step_s = h.step_time_s, tp = h.tp, pp = h.pp,
    dp = h.dp, ep = h.ep, ep_su = h.ep_su, vs = h.vs, mb = h.mb, schedule = h.schedule, dp_variant = h.dp_variant,
    recompute = h.recompute, considered = res.stats.considered, exposed_s = h.exposed_s }
end

-- run{size =, jobs =} -> {points, results, size}: every point, over local processes or MPI ranks.
function M.run(opts)
  opts = opts or {}
  local size = opts.size or "default"
  local pts = M.points(size)
  -- balanced by the size of each point's strategy space (the MoE's, with larger domains, is larger)
  local results = parallel.map(pts, function(p) return M.evaluate(p, size) end, { jobs = opts.jobs,
    weight = function(p) return search.work(M.def(p, size)) end })
  return { points = pts, results = results, size = size }
end

-- find(res, query) -> the result of the point matching every field of `query`.
function M.find(res, q)
  for i, p in ipairs(res.points) do
    local ok = true
    for k, v in pairs(q) do
      if p[k] ~= v then ok = false end
    end
    if ok then return res.results[i], p end
  end
end

-- advantage(res, model, domain) -> FullFlat tokens/s over two-tier tokens/s at baseline hardware.
function M.advantage(res, model, domain)
  local a = M.find(res, { kind = "grid", model = model, network = "full_flat", domain = domain })
  local b = M.find(res, { kind = "grid", model = model, network = "two_tier", domain = domain })
  if not (a and b and a.fits and b.fits) then return nil end
  return a.tokens_per_s / b.tokens_per_s
end

-- gain(res, model, network, change) -> tokens/s with the change over the baseline of that network.
function M.gain(res, model, network, change, size)
  local sz = M.sizes[size or res.size or "default"]
  local base = M.find(res, { kind = "grid", model = model, network = network, domain = sz.baseline_domain })
  local s = M.find(res, { kind = "sensitivity", model = model, network = network, change = change })
  if not (base and s and base.fits and s.fits) then return nil end
  return s.tokens_per_s / base.tokens_per_s
end

-- findings(res) -> list of {claim, holds (boolean), detail}: the study's qualitative findings
-- as fathom sees them on these points.
function M.findings(res)
  local sz = M.sizes[res.size or "default"]
  local lo, hi = sz.domains[1], sz.domains[#sz.domains]
  local out = {}
  local function add(claim, holds, detail) out[#out + 1] = { claim = claim, holds = holds and true or false,
    detail = detail } end
  local dl, dh = M.advantage(res, "dense", lo), M.advantage(res, "dense", hi)
  local ml, mh = M.advantage(res, "moe", lo), M.advantage(res, "moe", hi)
  local function x(v) return v and string.format("%.2fx", v) or "n/a" end
  add("FullFlat is at least as fast as two-tier at every point of the grid",
    dl and dh and ml and mh and dl >= 1 and dh >= 1 and ml >= 1 and mh >= 1,
    string.format("dense %s / %s, MoE %s / %s (%d / %d-GPU domains)", x(dl), x(dh), x(ml), x(mh), lo, hi))
  add("FullFlat's advantage grows with model size (1T MoE over 175B dense)",
    ml and dl and ml > dl, string.format("%d-GPU domain: MoE %s vs dense %s", lo, x(ml), x(dl)))
  add("FullFlat's advantage grows as the scale-up domain shrinks",
    dl and dh and ml and mh and dl >= dh and ml >= mh,
    string.format("dense %s at %d vs %s at %d; MoE %s vs %s", x(dl), lo, x(dh), hi, x(ml), x(mh)))
  local ov_t = M.gain(res, "moe", "two_tier", "overlap off")
  local ov_f = M.gain(res, "moe", "full_flat", "overlap off")
  add("overlapping compute and communication pays, most on two-tier",
    ov_t and ov_f and ov_t < 1 and ov_t <= ov_f,
    string.format("MoE, overlap off: two-tier %s, FullFlat %s of the overlapped rate", x(ov_t), x(ov_f)))
  local inc_t = M.gain(res, "dense", "two_tier", "in-network collectives off")
  local inc_f = M.gain(res, "dense", "full_flat", "in-network collectives off")
  add("hardware-accelerated (in-network) collectives pay (2% or more)",
    inc_t and inc_f and (inc_t <= 0.98 or inc_f <= 0.98),
    string.format("dense, in-network collectives off: two-tier %s, FullFlat %s", x(inc_t), x(inc_f)))
  local f = sz.factors.flops[1]
  local fl_t = M.gain(res, "moe", "two_tier", "flops x" .. f)
  local fl_f = M.gain(res, "moe", "full_flat", "flops x" .. f)
  add(string.format("more FLOPS (x%d) pay more on FullFlat than on two-tier (communication-bound)", f),
    fl_t and fl_f and fl_f > fl_t, string.format("MoE: two-tier %s, FullFlat %s", x(fl_t), x(fl_f)))
  local c = sz.factors.hbm_cap[1]
  local cap_d = M.gain(res, "dense", "two_tier", "hbm_cap x" .. c)
  local cap_m = M.gain(res, "moe", "two_tier", "hbm_cap x" .. c)
  add(string.format("larger HBM capacity (x%d) pays (more strategies fit)", c),
    cap_d and cap_m and (cap_d > 1.001 or cap_m > 1.001),
    string.format("two-tier: dense %s, MoE %s", x(cap_d), x(cap_m)))
  return out
end

return M
