-- fathom.report: one evaluated point as a record in ScaleScope's output schema
-- (configuration, model_configuration, expert_placement, time,
-- compute_per_batch_per_xpu, memory_traffic_per_batch_per_xpu,
-- communication_per_batch_per_xpu, ratios, memory_footprint,
-- memory_traffic_details_per_batch), human-readable or raw.
local names = require("fathom.names")
local units = require("fathom.units")
local util = require("fathom.format.util")

local M = {}

local ordered = util.ordered
local MEM = names.key("memory_component")
local TIER = names.key("memory_tier")

local part_names = names.flop_part
-- Record keys of the parts, named for what the model has: the MLP of a dense model is
-- `mlp`; a model with routed experts keeps ScaleScope's `moe_ffn` (its users read that
-- key in MoE studies). The core's part is `mlp` either way.
local labels = { dense = {}, moe = {} }
for _, p in ipairs(part_names) do labels.dense[p], labels.moe[p] = p, p end
labels.moe.mlp = "moe_ffn"

-- part_labels(model) -> flop part -> record key.
local function part_labels_of(m)
  return (m.num_regular_experts or 0) > 1 and labels.moe or labels.dense
end
M.part_labels_of = part_labels_of
local comm_order = names.comm_kind
local comm_labels = { tp = "tp_communication", tp_moe = "tp_moe_communication",
  ep = "moe_all_to_all", cp = "cp_communication", pp = "pp_communication",
  dp = "dp_communication", dp_moe = "dp_moe_communication" }

local function pass_table(pass, key_time, key_amount, part_labels)
  local out, total_t, total_a = {}, 0, 0
  for _, p in ipairs(part_names) do
    local e = pass[p]
    out[part_labels[p]] = ordered({ [key_amount] = e[key_amount == "flops" and "flops" or "bytes"],
      time_seconds = e[key_time] }, { key_amount, "time_seconds" })
    total_t = total_t + e[key_time]
    total_a = total_a + e[key_amount == "flops" and "flops" or "bytes"]
  end
  out.time_seconds = total_t
  out[key_amount] = total_a
  local order = { "time_seconds", key_amount }
  for _, p in ipairs(part_names) do order[#order + 1] = part_labels[p] end
  return ordered(out, order)
end

local function int(x) return math.tointeger(x) or x end

-- memory_tiers(fp) -> {tier = {used_bytes, capacity_bytes, free_bytes, fits}} of a core
-- footprint (free_bytes = capacity - used, negative when the tier overflows).
function M.memory_tiers(fp)
  local tiers = {}
  for tier, t in pairs(fp.tiers) do
    tiers[tier] = ordered({ used_bytes = t.bytes, capacity_bytes = t.capacity_bytes,
      free_bytes = t.capacity_bytes - t.bytes, fits = t.fits }, { "used_bytes", "capacity_bytes", "free_bytes" })
  end
  return tiers
end

-- headroom_bytes(fp) -> the accelerator's capacity less its footprint, the reserve
-- (runtime_context, allocator_fragmentation) included; negative when it does not fit.
function M.headroom_bytes(fp)
  local t = fp.tiers[TIER.xpu_memory]
  return t and (t.capacity_bytes - t.bytes) or nil
end

-- step_breakdown(r) -> where a training step's time goes (a core result's compute,
-- exposed memory, recomputation, bubble, optimizer, offload and each kind of exposed
-- communication, in seconds): the record's time.step_breakdown, estimate's table.
function M.step_breakdown(r)
  local breakdown = ordered({
    compute_seconds = r.compute_s,
    memory_exposed_seconds = r.memory_exposed_s,
    recompute_seconds = r.recompute_s,
    bubble_seconds = r.bubble_s,
    optimizer_seconds = r.optimizer_s,
    exposed_offload_seconds = r.offload_exposed_s,
    dp_interference_seconds = r.dp_interference_s,
  }, { "compute_seconds", "memory_exposed_seconds", "recompute_seconds", "bubble_seconds",
    "optimizer_seconds", "exposed_offload_seconds", "dp_interference_seconds" })
  for _, k in ipairs(comm_order) do
    breakdown["exposed_" .. k .. "_seconds"] = r.comm[k].exposed_s
  end
  -- the GPU waiting on the host, where the workload models it (host_op_sec > 0)
  if (r.host_wait_s or 0) > 0 then breakdown.host_wait_seconds = r.host_wait_s end
  return breakdown
end

-- prefill_times(time, r): a prefill record's own times (the pass mode's `times`).
function M.prefill_times(time, r)
  time.time_to_first_token_seconds = r.ttft_s
end

-- decode_times(time, r): a decode record's own times (the pass mode's `times`).
function M.decode_times(time, r)
  time.time_per_output_token_seconds = r.tpot_s
  time.time_per_output_token_first_seconds = r.tpot_first_s
  time.time_per_output_token_last_seconds = r.tpot_last_s
  time.weights_read_seconds = r.weights_read_s
  time.kv_cache_read_seconds = r.kv_read_s
end

-- inference_record(sc, r) -> the record of a prefill or decode point.
function M.inference_record(sc, r)
  local d = sc:compile():degrees()
  local m, w = sc.model, sc.workload
  local rec = {}
  rec.configuration = ordered({
    node = sc.physical.node_name, physical_topology = sc.physical.name, logical_topology = sc.logical.name,
    pass_mode = sc.pass_mode, num_xpus = int(d.gpus), tp_attn = int(d.tp), tp_moe = int(d.tp_moe),
    cp = int(d.cp), dp_attn = int(d.dp), ep = int(d.ep), pp = int(d.pp),
    layers_per_stage = int(d.layers_per_stage), global_batch_size = w.global_batch_size,
    micro_batch_size = w.micro_batch_size, microbatches = int(d.microbatches),
    seq_len = w.seq_length, prefill_seq_len = w.prefill_seq_len, num_generated_tokens = w.num_generated_tokens,
    float_size_bytes = w.float_size_bytes,
    weight_float_size_bytes = require("fathom.spec").infer_weight_bytes(w),
    kv_cache_float_size_bytes = w.kv_cache_float_size_bytes or w.float_size_bytes,
    precision_recipe = w.precision_recipe ~= nil and require("fathom.core").recipe_element_bytes[w.precision_recipe]
      and w.precision_recipe or nil,
  }, { "node", "physical_topology", "logical_topology", "pass_mode", "num_xpus", "tp_attn", "tp_moe", "cp",
    "dp_attn", "ep", "pp", "layers_per_stage", "global_batch_size", "micro_batch_size", "microbatches" })
  rec.model_configuration = ordered({
    name = m.name, d_model = m.d_model, n_layers = m.n_layers, num_heads = m.num_heads,
    num_kv_heads = m.num_kv_heads or m.num_heads, vocab_size = m.vocab_size,
    num_regular_experts = m.num_regular_experts, num_selected_experts = m.num_selected_experts,
    total_params = d.params_total, active_params = d.params_active,
  }, { "name", "d_model", "n_layers", "num_heads", "num_kv_heads", "vocab_size" })
  local time = {
    total_time = r.time_s, total_time_seconds = r.time_s,
    tokens_per_second = r.tokens_per_s, tokens_per_second_per_xpu = r.tokens_per_s_per_gpu,
    stage_pass_seconds = r.stage_s, exposed_pp_seconds = r.pp_s,
  }
  sc.pass.times(time, r)
  rec.time = ordered(time, { "total_time", "total_time_seconds", "time_to_first_token_seconds",
    "time_per_output_token_seconds", "tokens_per_second", "tokens_per_second_per_xpu" })
  local sp = r.stage_pass
  local part_labels = part_labels_of(m)
  local comp, mem = {}, {}
  for _, p in ipairs(part_names) do
    comp[part_labels[p]] = ordered({ flops = sp[p].flops, time_seconds = sp[p].compute_s }, { "flops" })
    mem[part_labels[p]] = ordered({ bytes = sp[p].bytes, time_seconds = sp[p].memory_s }, { "bytes" })
  end
  rec.compute_per_batch_per_xpu = ordered({ note = "one micro-batch through the busiest stage", forward = comp },
    { "note" })
  rec.memory_traffic_per_batch_per_xpu = ordered({ note = "one micro-batch through the busiest stage",
    forward = mem }, { "note" })
  local comm = {}
  for _, k in ipairs(comm_order) do
    local c = r.comm[k]
    if c.raw_s > 0 then
      comm[comm_labels[k]] = ordered({ raw_time_seconds = c.raw_s, exposed_time_seconds = c.exposed_s },
        { "raw_time_seconds" })
    end
  end
  rec.communication_per_batch_per_xpu = comm
  local comps = r.memory.components
  rec.memory_footprint = ordered({
    weights_bytes = comps.weights,
    kv_cache_bytes = comps.kv_cache,
    kv_cache_bytes_per_request = r.kv_bytes_per_request_per_gpu,
    transient_forward_peak_bytes = comps.transient_forward_peak,
    runtime_context_bytes = comps.runtime_context,
    allocator_fragmentation_bytes = comps.allocator_fragmentation,
    tiers = M.memory_tiers(r.memory),
    total_peak_memory_per_chip_bytes = r.memory.peak_bytes,
    headroom_bytes = M.headroom_bytes(r.memory),
    fits = r.memory.fits, overflow_tier = r.memory.overflow_tier,
    max_global_batch_size = int(r.max_global_batch),
  }, { "weights_bytes", "kv_cache_bytes", "kv_cache_bytes_per_request", "transient_forward_peak_bytes",
    "runtime_context_bytes", "allocator_fragmentation_bytes", "tiers",
    "total_peak_memory_per_chip_bytes", "headroom_bytes", "fits", "overflow_tier", "max_global_batch_size" })
  return ordered(rec, { "configuration", "model_configuration", "time", "compute_per_batch_per_xpu",
    "memory_traffic_per_batch_per_xpu", "communication_per_batch_per_xpu", "memory_footprint" })
end

-- record(sc, r) -> ScaleScope-style record with raw SI numbers (the scenario's pass mode
-- decides which: fathom.passes).
function M.record(sc, r)
  return sc.pass.record(sc, r)
end

-- goodput_def(sc) -> core.goodput's def for a training scenario's run (failures with a
-- reliability section, energy with a power figure, money with a price), or nil when the
-- workload asks for none; checkpoint_from_footprint: checkpoint_bytes is each point's
-- weights + optimizer states (set by the caller).
function M.goodput_def(sc)
  local w = sc.workload
  local comp = sc.lib.compute[sc.lib.nodes[sc.physical.node_name].device_compute]
  if not (w.reliability or w.cost or (comp.power_watts or 0) > 0) then return nil end
  local rel, cost = w.reliability or {}, w.cost or {}
  return {
    gpu_mtbf_s = rel.gpu_mtbf_hours and rel.gpu_mtbf_hours * 3600 or math.huge,
    checkpoint_bytes = 0, checkpoint_from_footprint = rel.gpu_mtbf_hours ~= nil,
    checkpoint_bw = rel.checkpoint_bandwidth, restart_s = (rel.restart_minutes or 0) * 60,
    interval_s = (rel.checkpoint_interval_minutes or 0) * 60, gpu_power_w = (comp.power_limit_watts or 0) > 0
      and math.min(comp.power_limit_watts, comp.power_watts or math.huge) or comp.power_watts or 0,
    pue = cost.pue or 1, price_per_gpu_hour = cost.usd_per_gpu_hour or 0,
  }
end

-- training_record(sc, r) -> the record of a training point.
function M.training_record(sc, r)
  local d = sc:compile():degrees()
  local m, w = sc.model, sc.workload
  local rec = {}
  rec.configuration = ordered({
    node = sc.physical.node_name,
    physical_topology = sc.physical.name,
    logical_topology = sc.logical.name,
    num_xpus = math.tointeger(d.gpus) or d.gpus,
    tp_attn = d.tp, tp_moe = d.tp_moe, cp = d.cp, dp_attn = d.dp,
    dp_moe = (m.num_regular_experts or 0) > 1 and d.dp_moe or nil,
    ep = d.ep, ep_su = d.ep_su, ep_so = d.ep_so, pp = d.pp,
    layers_per_stage = d.layers_per_stage,
    global_batch_size = w.global_batch_size, micro_batch_size = w.micro_batch_size,
    microbatches_per_step = math.tointeger(d.microbatches) or d.microbatches, seq_len = w.seq_length,
    float_size_bytes = w.float_size_bytes,
    dp_variant = w.dp_variant, pp_variant = w.pp_variant, virtual_stages = w.virtual_stages,
    recompute = w.recompute, sequence_parallel = w.sequence_parallel,
    flash_attention = w.flash_attention,
  }, { "node", "physical_topology", "logical_topology", "num_xpus", "tp_attn", "tp_moe", "cp",
    "dp_attn", "dp_moe", "ep", "ep_su", "ep_so", "pp", "layers_per_stage", "global_batch_size",
    "micro_batch_size", "microbatches_per_step", "seq_len" })
  rec.model_configuration = ordered({
    name = m.name, d_model = m.d_model, n_layers = m.n_layers, num_heads = m.num_heads,
    num_kv_heads = m.num_kv_heads or m.num_heads, vocab_size = m.vocab_size,
    mlp_ratio = m.mlp_ratio, ffn_hidden_size = m.ffn_hidden_size, gated_mlp = m.gated_mlp,
    num_regular_experts = m.num_regular_experts, num_selected_experts = m.num_selected_experts,
    num_shared_experts = m.num_shared_experts,
    total_params = d.params_total, active_params = d.params_active,
  }, { "name", "d_model", "n_layers", "num_heads", "num_kv_heads", "vocab_size" })
  local experts = m.num_regular_experts or 0
  rec.expert_placement = ordered({
    num_regular_experts = experts,
    experts_per_xpu = d.local_experts,
    ep_size = d.ep,
    complete_expert_sets = experts > 1 and d.dp_moe or 0,
    expert_imbalance = w.expert_imbalance,
    routing = sc.routing_result,
  }, { "num_regular_experts", "experts_per_xpu", "ep_size", "complete_expert_sets" })
  local breakdown = M.step_breakdown(r)
  -- Failures, checkpoints, energy and cost (fth_goodput) when the workload asks.
  local run
  local def = M.goodput_def(sc)
  if def then
    local rel, cost = w.reliability or {}, w.cost or {}
    local mem = r.memory.components
    if def.checkpoint_from_footprint then def.checkpoint_bytes = mem.weights + mem.optimizer_states end
    local g = require("fathom.core").goodput(def, d.gpus, r.total_time_s)
    -- Only what was modelled: failures with a reliability section, energy with a power
    -- figure, money with a price; never goodput 100%, cost 0 or an infinite MTBF as facts.
    local failures = rel.gpu_mtbf_hours ~= nil
    run = ordered({
      expected_time = failures and g.expected_time_s or nil,
      expected_time_seconds = failures and g.expected_time_s or nil, goodput = failures and g.goodput or nil,
      expected_failures = failures and g.failures or nil, system_mtbf_seconds = failures and g.system_mtbf_s or nil,
      checkpoint_interval_seconds = failures and g.interval_s or nil,
      checkpoint_write_seconds = failures and g.checkpoint_write_s or nil,
      energy_kwh = g.energy_j > 0 and g.energy_j / 3.6e6 or nil,
      cost_usd = (cost.usd_per_gpu_hour or 0) > 0 and g.cost or nil,
    }, { "expected_time", "expected_time_seconds", "goodput", "expected_failures", "system_mtbf_seconds",
      "checkpoint_interval_seconds", "checkpoint_write_seconds", "energy_kwh", "cost_usd" })
  end
  rec.time = ordered({
    run_with_failures = run,
    total_time = r.total_time_s,
    total_time_seconds = r.total_time_s,
    step_time_seconds = r.step_time_s,
    steps = math.tointeger(r.steps) or r.steps,
    tokens_per_step = math.tointeger(r.tokens_per_step) or r.tokens_per_step,
    tokens_per_second = r.tokens_per_s,
    mfu = r.mfu, hfu = r.hfu,
    model_flops_per_second_per_xpu = r.achieved_flops_per_gpu,
    step_breakdown = breakdown,
  }, { "total_time", "total_time_seconds", "step_time_seconds", "steps", "tokens_per_step",
    "tokens_per_second", "mfu", "hfu", "model_flops_per_second_per_xpu", "step_breakdown" })
  local pm = r.per_microbatch
  rec.compute_per_batch_per_xpu = ordered({
    note = "per micro-batch on the busiest pipeline stage; compute-bound time only",
    forward = pass_table(pm.forward, "compute_s", "flops", part_labels_of(m)),
    backward = pass_table(pm.backward, "compute_s", "flops", part_labels_of(m)),
  }, { "note", "forward", "backward" })
  rec.memory_traffic_per_batch_per_xpu = ordered({
    note = "per micro-batch on the busiest pipeline stage; bytes / tier bandwidth",
    forward = pass_table(pm.forward, "memory_s", "bytes", part_labels_of(m)),
    backward = pass_table(pm.backward, "memory_s", "bytes", part_labels_of(m)),
  }, { "note", "forward", "backward" })
  local comm = { note = "per step per XPU: bytes, collective, algorithm, fabric; raw time split "
    .. "into hidden (overlapped) and exposed (on the critical path)" }
  local order = { "note" }
  for _, k in ipairs(comm_order) do
    local c = r.comm[k]
    if c.bytes_per_step > 0 then
      local dim = sc.physical.dimensions[c.phys_dim]
      comm[comm_labels[k]] = ordered({
        collective = c.op, algorithm = c.algorithm, group_size = c.group_size,
        fabric = dim and dim.name or nil, fabric_levels = c.num_levels,
        bytes_per_call = c.bytes_per_call, calls_per_step = c.calls_per_step,
        bytes_per_step = c.bytes_per_step, raw_time_seconds = c.raw_s,
        hidden_time_seconds = c.hidden_s, exposed_time_seconds = c.exposed_s,
      }, { "collective", "algorithm", "group_size", "fabric", "fabric_levels", "bytes_per_call",
        "calls_per_step", "bytes_per_step", "raw_time_seconds", "hidden_time_seconds",
        "exposed_time_seconds" })
      order[#order + 1] = comm_labels[k]
    end
  end
  rec.communication_per_batch_per_xpu = ordered(comm, order)
  local compute_total = r.compute_s > 0 and r.compute_s or 1
  local raw_comm = 0
  for _, k in ipairs(comm_order) do raw_comm = raw_comm + r.comm[k].raw_s end
  local mem_t = 0
  for _, p in ipairs(part_names) do
    mem_t = mem_t + pm.forward[p].memory_s + pm.backward[p].memory_s
  end
  rec.ratios = ordered({
    comm_to_compute = raw_comm / compute_total,
    exposed_comm_to_step = r.exposed_comm_s / r.step_time_s,
    memory_to_compute = mem_t * r.microbatches / compute_total,
    bubble_fraction = r.bubble_fraction,
    compute_fraction = r.compute_s / r.step_time_s,
  }, { "comm_to_compute", "exposed_comm_to_step", "memory_to_compute", "bubble_fraction" })
  local fp = r.memory
  local tiers = M.memory_tiers(fp)
  local map = sc.workload.memory_device_map_footprint
  local comps = {}
  for k, v in pairs(fp.components) do
    if k ~= MEM.kv_cache then
      comps[k .. "_bytes"] = v
      comps[k .. "_tier"] = map[k] or TIER.xpu_memory
    end
  end
  rec.memory_footprint = ordered({
    components = comps,
    tiers = tiers,
    total_peak_memory_per_chip_bytes = fp.peak_bytes,
    headroom_bytes = M.headroom_bytes(fp),
    fits = fp.fits,
    overflow_tier = fp.overflow_tier,
  }, { "components", "tiers", "total_peak_memory_per_chip_bytes", "headroom_bytes", "fits", "overflow_tier" })
  rec.memory_traffic_details_per_batch = ordered({
    attention_forward_bytes = pm.forward.attention.bytes,
    attention_backward_bytes = pm.backward.attention.bytes,
    ffn_forward_bytes = pm.forward.mlp.bytes,
    ffn_backward_bytes = pm.backward.mlp.bytes,
    unembedding_forward_bytes = pm.forward.unembedding.bytes,
    unembedding_backward_bytes = pm.backward.unembedding.bytes,
  }, { "attention_forward_bytes", "attention_backward_bytes", "ffn_forward_bytes" })
  return ordered(rec, { "configuration", "model_configuration", "expert_placement", "time",
    "compute_per_batch_per_xpu", "memory_traffic_per_batch_per_xpu",
    "communication_per_batch_per_xpu", "ratios", "memory_footprint",
    "memory_traffic_details_per_batch" })
end

-- Keys that stay numbers even in human-readable output (ScaleScope keeps
-- total_time_seconds numeric next to the readable total_time).
local keep_numeric = { total_time_seconds = true, float_size_bytes = true, expected_time_seconds = true }

-- unit_of(key, times) -> the fathom.units function ("time", "bytes", "flops", "flops_rate",
-- "percent") a number under `key` is written with in readable output, or nil (it stays a
-- number); `times`: the key's table holds times (holds_times of its own key).
function M.unit_of(key, times)
  if times then return "time" end
  if type(key) ~= "string" or keep_numeric[key] then return nil end
  if key == "total_time" or key == "expected_time" or key:match("_seconds$") then return "time" end
  -- the core's and the search's own names: `step_time_s` is a time, `tokens_per_s` a rate
  if key:match("_s$") and not key:match("_per_s$") then return "time" end
  if key:match("bytes") then return "bytes" end
  if key:match("flops$") then return "flops" end
  if key:match("flops_per_second") then return "flops_rate" end
  if key == "mfu" or key == "hfu" or key == "goodput" or key:match("fraction$") then return "percent" end
  return nil
end

-- holds_times(key) -> true when a table under `key` holds times (a search hit's `exposed_s`,
-- per kind of communication).
function M.holds_times(key)
  return type(key) == "string" and key:match("_s$") ~= nil and not key:match("_per_s$")
end

-- humanize(rec) -> a copy with times, bytes and FLOPs as readable strings (unit_of).
function M.humanize(rec, times)
  if type(rec) ~= "table" then return rec end
  local out = {}
  for k, v in pairs(rec) do
    if type(v) == "table" then
      out[k] = M.humanize(v, M.holds_times(k))
    else
      local unit = type(v) == "number" and M.unit_of(k, times)
      out[k] = unit and units[unit](v) or v
    end
  end
  local mt = getmetatable(rec)
  if mt then setmetatable(out, { __order = mt.__order, __array = mt.__array }) end
  return out
end

return M
