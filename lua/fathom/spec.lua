-- fathom.spec: the input files (ScaleScope's field names plus fathom's
-- extensions), checked field by field and turned into the normalised tables
-- the C core compiles. Every check reports file:line:col: key.path.
local check = require("fathom.check")
local config = require("fathom.config")
local core = require("fathom.core")
local errors = require("fathom.errors")
local names = require("fathom.names")

local M = {}

local TOPO = names.key("topology_type")
local TAG = names.key("logical_tag")
local MEM = names.key("memory_component")
local DP = names.key("dp_variant")
local DIST = names.key("route_distribution")
local PLACE = names.key("route_placement")

-- Defaults of the fields the core reads come from the core (fathom.core.defaults), so a
-- workload from YAML and the same workload as a Lua table get the same values.
local TRAIN = core.defaults.train
local INFER = core.defaults.infer
for _, k in ipairs({ "kernel_model", "flash_attention", "float_size_bytes", "expert_imbalance",
  "kernel_launch_sec", "memory_reserve_bytes", "memory_fragmentation_fraction" }) do
  assert(TRAIN[k] == INFER[k], "fathom.core.defaults: training and inference differ on " .. k)
end

local fraction = { type = "number", above = 0, max = 1, hint = "a fraction in (0, 1]" }
local unit = { type = "number", min = 0, max = 1, hint = "a fraction in [0, 1]" }

-- Schemas -----------------------------------------------------------------------------------

M.compute_schema = {
  fp8_nominal = { type = "number", min = 0, default = 0, hint = "dense FLOP/s" },
  bf16_nominal = { type = "number", min = 0, default = 0, hint = "dense FLOP/s" },
  fp32_nominal = { type = "number", min = 0, default = 0, hint = "dense FLOP/s" },
  fp4_nominal = { type = "number", min = 0, default = 0, hint = "dense FLOP/s (NVFP4/MXFP4); 0 = fp8's" },
  expert_gemm_overhead_sec = { type = "number", min = 0, max = 1e-3, default = 0,
    hint = "fixed cost per expert of a grouped expert GEMM (H100 measured: 0.8e-6)" },
  expert_recipe_overhead_sec = { type = "number", min = 0, max = 1e-3, default = 0,
    hint = "further cost per expert of a grouped GEMM under an FP8/FP4 training recipe (Blackwell fitted: 3.2e-5)" },
  fp8_efficiency = { type = "number", above = 0, max = 1,
    hint = "fraction of fp8_nominal large GEMMs reach; default: efficiency" },
  fp4_efficiency = { type = "number", above = 0, max = 1,
    hint = "fraction of fp4_nominal large GEMMs reach; default: efficiency" },
  vector_nominal = { type = "number", min = 0, default = 0, hint = "non-tensor FLOP/s" },
  efficiency = fraction,
  attention_efficiency = { type = "number", above = 0, max = 1,
    hint = "fraction of nominal fused attention reaches; default: efficiency" },
  compute_units = { type = "integer", min = 0, hint = "SMs / CUs, for kernel_model: tiled" },
  power_watts = { type = "number", min = 0,
    hint = "board power the nominal rates are quoted at (its TDP; energy estimates, power_limit_watts)" },
  power_limit_watts = { type = "number", min = 0, default = 0,
    hint = "a power cap below power_watts the GPU runs under: clocks scale as (cap / power)^(1/3); 0 = none" },
  dense_clock_fraction = { type = "number", above = 0, max = 1, default = 1,
    hint = "clock held under a dense GEMM at board power, of the nominal rates' clock (MI300X: 1207/2100 MHz)" },
  fp8_any_layout = { type = "boolean", default = false,
    hint = "FP8 GEMMs take either operand layout (Blackwell): one FP8 copy of a per-tensor-scaled weight" },
  gemm_tile_m = { type = "number", min = 0, default = 0 },
  gemm_tile_n = { type = "number", min = 0, default = 0 },
  expert_gemm_fp8_fraction = { type = "number", min = 0, max = 1,
    hint = "share of the dense FP8/FP4 GEMM rate a grouped expert GEMM reaches (H100 measured 0.91); 0 = 1" },
  gemm_k_overhead_bytes = { type = "number", min = 0, max = 65536,
    hint = "a GEMM tile's fixed cost as bytes of K streamed (kernel_model: tiled; H100 measured 448); 0 = none" },
  description = { type = "string" },
  source = { type = "any" },
}

M.memory_schema = {
  bandwidth_per_stack_nominal = { type = "number", above = 0, required = true, hint = "bytes/s" },
  size_per_stack = { type = "number", above = 0, required = true, hint = "bytes" },
  num_stack = { type = "integer", min = 1, required = true },
  efficiency = { type = "number", above = 0, max = 1, default = 1, hint = "a fraction in (0, 1]" },
  description = { type = "string" },
  source = { type = "any" },
}

M.interconnect_schema = {
  type = { type = "string", default = "generic" },
  bandwidth_nominal = { type = "number", above = 0, required = true,
    hint = "bytes/s per direction per link" },
  num_links = { type = "integer", min = 1, default = 1 },
  efficiency = { type = "number", above = 0, max = 1, default = 1, hint = "a fraction in (0, 1]" },
  latency_sec = { type = "number", min = 0, default = 0 },
  in_network_reduction = { type = "boolean", default = false },
  topology = { type = "string", default = TOPO.switched, choices = names.topology_type,
    hint = "how a scale-up fabric joins a node's GPUs: switched (NVSwitch), mesh (a link to every peer)" },
  oversubscription = { type = "number", min = 1, default = 1,
    hint = "two_tier fabrics: leaf down-link to up-link bandwidth ratio, 1 = full bisection" },
  leaf_size_xpus = { type = "integer", min = 0, default = 0,
    hint = "two_tier fabrics: GPUs under one leaf switch (0: unknown, every peer across the spine)" },
  description = { type = "string" },
  source = { type = "any" },
}

M.node_schema = {
  device_compute = { type = "string", required = true },
  device_memory_tiers = { type = "table", required = true },
  device_interconnects = { type = "table", default = {} },
  host_op_time_factor = { type = "number", above = 0, max = 10, default = 1,
    hint = "the host CPU's time per framework operator over an x86 server CPU's (Grace: 2.75)" },
  description = { type = "string" },
  source = { type = "any" },
}

M.tiers = names.memory_tier

M.model_schema = {
  name = { type = "string" },
  d_model = { type = "integer", min = 1, required = true },
  n_layers = { type = "integer", min = 1, required = true },
  num_heads = { type = "integer", min = 1, required = true },
  num_kv_heads = { type = "integer", min = 1 },
  head_dim = { type = "integer", min = 1 },
  mlp_ratio = { type = "number", above = 0 },
  ffn_hidden_size = { type = "number", above = 0 },
  gated_mlp = { type = "boolean", default = false },
  squared_relu = { type = "boolean", default = false,
    hint = "plain MLP with relu(x)^2 (Nemotron-4, Nemotron-H; HF hidden_act relu2), run as relu then square" },
  max_sequence_length = { type = "integer", min = 1, default = 2048 },
  vocab_size = { type = "integer", min = 1, required = true },
  tied_embeddings = { type = "boolean", default = false },
  learned_pos_emb = { type = "boolean", default = false },
  num_regular_experts = { type = "integer", min = 0, default = 0 },
  num_selected_experts = { type = "integer", min = 0, default = 0 },
  num_shared_experts = { type = "integer", min = 0, default = 0 },
  expert_ffn_hidden_size = { type = "number", min = 0, default = 0 },
  first_dense_layers = { type = "integer", min = 0, default = 0 },
  moe_layer_interval = { type = "integer", min = 1, default = 1 },
  attention_window = { type = "integer", min = 0, default = 0,
    hint = "sliding-window attention: tokens a windowed layer sees (HF sliding_window); 0 = full attention" },
  full_attention_interval = { type = "integer", min = 0, default = 0,
    hint = "with attention_window: every k-th layer attends in full (gpt-oss 2, Gemma 3 6); 0 = all windowed" },
  attention_sinks = { type = "boolean", default = false,
    hint = "a learned per-head softmax offset (gpt-oss's attention sinks); its cost is the workload's "
      .. "attention_sink_rate_share" },
  n_group = { type = "integer", min = 0, default = 0, hint = "expert groups (HF n_group); 0 = none" },
  topk_group = { type = "integer", min = 0, default = 0,
    hint = "groups (nodes) one token may route to (HF topk_group); 0 = unrestricted" },
  num_nextn_predict_layers = { type = "integer", min = 0, max = core.defaults.limits.num_nextn_predict_layers,
    default = 0,
    hint = "multi-token prediction modules trained on the last stage (DeepSeek-V3: 1); 0 = none" },
  q_lora_rank = { type = "integer", min = 0, default = 0 },
  kv_lora_rank = { type = "integer", min = 0, default = 0 },
  qk_nope_head_dim = { type = "integer", min = 0, default = 0 },
  qk_rope_head_dim = { type = "integer", min = 0, default = 0 },
  v_head_dim = { type = "integer", min = 0, default = 0 },
  -- hybrid Mamba2-Transformer (Nemotron-H): the pattern or the three counts of sub-layers
  hybrid_override_pattern = { type = "string",
    hint = "one character a sub-layer (Megatron-Core): M Mamba2, * attention, - MLP, E MoE; n_layers = its length" },
  mamba_layers = { type = "integer", min = 0, default = 0, hint = "hybrid: Mamba2 sub-layers (M)" },
  attention_layers = { type = "integer", min = 0, default = 0, hint = "hybrid: attention sub-layers (*)" },
  mlp_layers = { type = "integer", min = 0, default = 0, hint = "hybrid: MLP sub-layers (-)" },
  moe_layers = { type = "integer", min = 0, default = 0, hint = "hybrid: MoE sub-layers (E)" },
  mamba_state_dim = { type = "integer", min = 1, max = 65536, default = core.defaults.model.mamba_state_dim,
    hint = "Mamba2 state size N (HF ssm_state_size)" },
  mamba_head_dim = { type = "integer", min = 1, max = 65536, default = core.defaults.model.mamba_head_dim,
    hint = "Mamba2 head dim P" },
  mamba_num_heads = { type = "integer", min = 0, max = 65536, default = 0,
    hint = "Mamba2 heads H; 0 = 2 d_model / mamba_head_dim" },
  mamba_num_groups = { type = "integer", min = 1, max = 65536, default = core.defaults.model.mamba_num_groups,
    hint = "Mamba2 B/C groups G (HF n_groups)" },
  mamba_conv_kernel = { type = "integer", min = 1, max = 1024, default = core.defaults.model.mamba_conv_kernel,
    hint = "Mamba2 conv1d width (HF conv_kernel)" },
  mamba_chunk_size = { type = "integer", min = 1, max = 1048576, default = core.defaults.model.mamba_chunk_size,
    hint = "SSD chunk length (HF chunk_size; Megatron-Core's MambaMixer: 128)" },
  published_params = { type = "number" },
  published_active_params = { type = "number" },
  published_params_tolerance = { type = "number", min = 0, hint = "absolute, for rounded published figures" },
  published_active_params_tolerance = { type = "number", min = 0,
    hint = "absolute, for a rounded published active count" },
  description = { type = "string" },
  source = { type = "any" },
  notes = { type = "any" },
}

M.topology_types = names.topology_type
M.logical_tags = names.logical_tag

M.physical_schema = {
  name = { type = "string" },
  node_definition_ref = { type = "string", required = true },
  dimensions = { type = "list", required = true },
  expert_high_bandwidth_group_size_xpus = { type = "integer", min = 0 },
  dp_bandwidth_apart = { type = "boolean", default = core.defaults.topology.dp_bandwidth_apart,
    hint = "DP reductions (once per step) take their share without reducing the layer and PP collectives'" },
  bandwidth_by_traffic = { type = "boolean", default = core.defaults.topology.bandwidth_by_traffic,
    hint = "logical dimensions on one physical dimension share it by bytes per step (processor sharing), not evenly" },
  num_xpus = { type = "integer", min = 1,
    hint = "GPUs the job runs on, filled pod by pod (a logical topology with placement: rank_order)" },
  description = { type = "string" },
  notes = { type = "any" },
}

M.physical_dim_schema = {
  name = { type = "string", required = true },
  interconnect_name = { type = "string", required = true },
  topology_type = { type = "string", choices = M.topology_types, default = TOPO.switched },
  size = { type = "integer", min = 1, required = true },
  description = { type = "string" },
}

M.placements = { "dimensions", "rank_order" }

M.logical_schema = {
  name = { type = "string" },
  placement = { type = "string", choices = M.placements, default = "dimensions",
    hint = "rank_order: the dimensions number the ranks in listed order, innermost first, "
      .. "and the ranks fill the pods in order" },
  dimensions = { type = "list", required = true },
  description = { type = "string" },
  notes = { type = "any" },
}

M.logical_dim_schema = {
  logical_tag = { type = "string", required = true, choices = M.logical_tags },
  maps_to_physical_dimension_name = { type = "string" },
  size = { type = "any", required = true, hint = "a positive integer, or auto for DP tags" },
}

local tier_choices = { type = "string", choices = M.tiers }

-- Traffic maps also take the short aliases (activations, gradients); footprints do not.
M.traffic_components = names.with_aliases("memory_component")
M.footprint_components = names.memory_component

local function tier_map_schema(components)
  local s = {}
  for _, c in ipairs(components) do s[c] = tier_choices end
  return s
end

-- Fields every workload (training, prefill, decode) shares.
local workload_common = {
  float_size_bytes = { type = "integer", choices = { 1, 2, 4 }, default = TRAIN.float_size_bytes },
  memory_device_map_traffic = { type = "table", default = {} },
  memory_device_map_footprint = { type = "table", default = {} },
  comp_comm_efficiency = unit,
  comp_mem_efficiency = unit,
  comm_mem_efficiency = unit,
  tp_spec = { type = "table" },
  dp_spec = { type = "table" },
  pp_spec = { type = "table" },
  moe_spec_v2 = { type = "table" },
  flash_attention = { type = "boolean", default = TRAIN.flash_attention },
  kernel_launch_sec = { type = "number", min = 0, default = TRAIN.kernel_launch_sec },
  memory_reserve_bytes = { type = "number", min = 0, default = TRAIN.memory_reserve_bytes,
    hint = "bytes per GPU the CUDA/ROCm context and library workspaces hold (footprint `runtime_context`)" },
  memory_fragmentation_fraction = { type = "number", min = 0, below = 1,
    default = TRAIN.memory_fragmentation_fraction,
    hint = "share of the saved activations and transients the caching allocator loses (`allocator_fragmentation`)" },
  kernel_model = { type = "string", choices = names.kernel_model, default = TRAIN.kernel_model,
    hint = "tiled: GEMM tiles and attention blocks in waves over the compute units" },
  collective = { type = "table" },
  framework = { type = "string", hint = "a framework name (fathom.frameworks) whose conventions fill unset keys" },
  description = { type = "string" },
  notes = { type = "any" },
}

local function with_common(fields)
  for k, v in pairs(workload_common) do
    if fields[k] == nil then fields[k] = v end
  end
  return fields
end

M.reliability_schema = {
  gpu_mtbf_hours = { type = "number", above = 0, required = true,
    hint = "mean time between failures of one GPU with its share of the node" },
  checkpoint_bandwidth = { type = "number", above = 0, default = 2e9, hint = "bytes/s each GPU writes" },
  restart_minutes = { type = "number", min = 0, default = 10 },
  checkpoint_interval_minutes = { type = "number", min = 0, default = 0, hint = "0 = Young's optimum" },
}

M.cost_schema = {
  pue = { type = "number", min = 1, default = 1.2 },
  usd_per_gpu_hour = { type = "number", min = 0, default = 0 },
}

M.train_schema = with_common({
  reliability = { type = "table", hint = "failures and checkpoints: goodput" },
  cost = { type = "table", hint = "energy and money" },
  global_batch_size = { type = "integer", min = 1, required = true },
  micro_batch_size = { type = "integer", min = 1, required = true },
  seq_length = { type = "integer", min = 1, required = true },
  total_train_tokens = { type = "number", min = 0, default = 0 },
  full_precision_param_float_size = { type = "integer", choices = { 2, 4 },
    default = TRAIN.full_precision_param_float_size },
  gradient_float_size = { type = "integer", choices = { 2, 4 } },
  optimizer = { type = "string", default = "adam", hint = "adam or adamw (the same cost)" },
  recompute = { type = "string", choices = names.recompute, default = TRAIN.recompute },
  recompute_modules = { type = "list", default = {},
    hint = "modules re-run in backward on top of recompute none/selective (Megatron-Core recompute_modules): "
      .. table.concat(names.recompute_module, ", ") },
  -- recompute op with a named policy: the projections (and the attention context) it saves,
  -- every other recomputed (MaxText's remat policies); empty: torchtitan's alternation
  recompute_saved = { type = "list", default = {},
    hint = "what recompute op saves (MaxText's names): " .. table.concat(names.op_keep, ", ") },
  sequence_parallel = { type = "boolean", default = TRAIN.sequence_parallel },
  ep_dispatch_per_node = { type = "boolean", default = TRAIN.ep_dispatch_per_node,
    hint = "true: a token crosses scale-out once per node it reaches (DeepEP); false: once per expert copy" },
  grouped_expert_kernel = { type = "boolean", default = TRAIN.grouped_expert_kernel,
    hint = "true: the experts run as one grouped kernel a pass (Transformer Engine's fused grouped MLP, "
      .. "PyTorch's _scaled_grouped_mm), without an FP8/FP4 recipe's cost per expert (expert_recipe_overhead_sec)" },
  ep_comm_overlap = { type = "boolean", default = TRAIN.ep_comm_overlap,
    hint = "false: EP dispatch/combine run between router and experts, none hidden (no A2A overlap)" },
  ep_overlap_pairs = { type = "boolean", default = TRAIN.ep_overlap_pairs,
    hint = "true: the EP overlap pairs a forward and a backward of two micro-batches (Megatron-Core's 1F1B "
      .. "A2A overlap): the schedule's warm-up and cool-down passes wait for their own all-to-all" },
  tp_comm_overlap = { type = "boolean", default = TRAIN.tp_comm_overlap,
    hint = "false: TP collectives run between the GEMMs, none hidden (vanilla TP; async TP overlaps them)" },
  tp_overlap_backward_rs = { type = "boolean", default = TRAIN.tp_overlap_backward_rs,
    hint = "false: the backward's input-gradient reduce-scatters run between the GEMMs (PyTorch's "
      .. "micro-pipelined async TP); true: they hide under the weight-gradient GEMMs (Transformer Engine)" },
  tp_gather_quantized = { type = "boolean", default = TRAIN.tp_gather_quantized,
    hint = "true: under a precision recipe the sequence-parallel all-gathers in front of the linears move "
      .. "the quantised tensor (Transformer Engine, torchao tensorwise); false: the activation width" },
  fp8_param_gather = { type = "boolean", default = TRAIN.fp8_param_gather,
    hint = "true: under an FP8 recipe the distributed optimizer / FSDP all-gathers the FP8 weight copies "
      .. "(1 byte each; Megatron fp8_param_gather, torchao float8 all-gather)" },
  eager_elementwise = { type = "boolean", default = TRAIN.eager_elementwise,
    hint = "eager PyTorch element-wise ops, one kernel each (torchtitan without torch.compile)" },
  host_op_sec = { type = "number", min = 0, max = 1e-3, default = TRAIN.host_op_sec,
    hint = "host seconds per operator an eager framework issues (Python, dispatch, launch); a pass "
      .. "takes at least its operators' host time; 0: the host keeps ahead (not modelled)" },
  cuda_graph_scope = { type = "list", default = {},
    hint = "parts replayed from CUDA graphs, no host time (Megatron-Core --cuda-graph-scope): "
      .. table.concat(names.cuda_graph_scope, ", ") },
  dp_comm_compute_fraction = { type = "number", min = 0, max = 0.99, default = TRAIN.dp_comm_compute_fraction,
    hint = "compute a hidden data-parallel collective displaces, per second of it (its NCCL channels' SMs "
      .. "and HBM traffic); 0: hiding is free" },
  ep_a2a_scale_out_efficiency = { type = "number", above = 0, max = 1,
    default = TRAIN.ep_a2a_scale_out_efficiency,
    hint = "share of the scale-out network's collective rate the EP all-to-all reaches as NCCL's "
      .. "all-to-all(v) (ep_dispatch_per_node false; incast, no NIC aggregation); 1: as a ring collective" },
  moe_comm_compute_fraction = { type = "number", min = 0, max = 0.99,
    hint = "share of the compute units the MoE dispatch/combine kernels hold (DeepSeek-V3: 20 / 132)" },
  attention_sink_rate_share = { type = "number", min = 0, max = 1,
    hint = "attention with sinks (the model's attention_sinks) at this share of the fused attention rate, its "
      .. "sliding windows computed whole (Transformer Engine's cuDNN path: 0.1); 0 = as without sinks" },
  ep_comm_compute_units = { type = "number", min = 0, max = 4096,
    hint = "compute units (SMs) the EP dispatch/combine kernels hold while they run (DeepEP 20, HybridEP in "
      .. "Megatron-Bridge's recipes 32): what they hide under runs on the rest of the node's units" },
  moe_dispatch_float_size_bytes = { type = "integer", choices = { 1, 2, 4 },
    hint = "width of the MoE dispatch's routed copies (1: FP8 with 1x128 scales); default float_size_bytes; "
      .. "the combine stays at float_size_bytes" },
  precision_recipe = { type = "string", choices = names.precision_recipe, default = TRAIN.precision_recipe,
    hint = "the linear layers' GEMMs at FP8/FP4 with their casts; the rest at float_size_bytes" },
  lora_rank = { type = "integer", min = 0, max = 65536, default = TRAIN.lora_rank,
    hint = "LoRA fine-tuning: adapters of this rank on the lora_targets linears, base frozen; "
      .. "0 = full training" },
  lora_targets = { type = "string", choices = names.lora_targets, default = TRAIN.lora_targets,
    hint = "the linears that carry LoRA adapters: all_linear (PEFT; never router or routed experts), "
      .. "attention (QKV and output projections: NeMo's 'attention'), mlp" },
  cp_comm = { type = "string", choices = names.cp_comm, default = TRAIN.cp_comm,
    hint = "how context-parallel ranks share the attention: p2p (ring: K/V passed rank to rank, CP steps) "
      .. "or a2a (all-to-all of Q, K, V and O, heads / CP each; Megatron-Core cp_comm_type)" },
  attention_fp8 = { type = "boolean", default = TRAIN.attention_fp8,
    hint = "under an FP8 precision_recipe: fused attention at the FP8 rate, Q, K, V saved at one byte" },
  num_layers_at_start_in_bf16 = { type = "integer", min = 0, max = 1000000,
    default = TRAIN.num_layers_at_start_in_bf16,
    hint = "under a precision_recipe: the first layers (sub-layers of a hybrid) run in BF16, no casts "
      .. "(Megatron-Core first_last_layers_bf16; NeMo's Nemotron-H: 1)" },
  num_layers_at_end_in_bf16 = { type = "integer", min = 0, max = 1000000,
    default = TRAIN.num_layers_at_end_in_bf16,
    hint = "under a precision_recipe: the last layers run in BF16 (Megatron-Core first_last_layers_bf16)" },
  activation_input_fp8 = { type = "boolean", default = TRAIN.activation_input_fp8,
    hint = "save the MLP activation function's input in FP8 (Transformer Engine's activation ops)" },
  activation_offload_layers = { type = "integer", min = 0, max = 1000000,
    default = TRAIN.activation_offload_layers,
    hint = "blocks per pipeline stage whose saved activations go to host memory and back (Megatron-Core "
      .. "cpu_offloading_num_layers); the node needs a host_memory tier" },
  recompute_num_layers = { type = "integer", min = 0, max = 1000000, default = TRAIN.recompute_num_layers,
    hint = "with recompute full: blocks re-run per stage (per model chunk when interleaved), Megatron's "
      .. "block method; 0 = every block" },
  cast_kernels = { type = "string", choices = names.cast_kernels, default = TRAIN.cast_kernels,
    hint = "how the recipe's casts are written: fused (Transformer Engine), compiled (torch.compile), eager" },
})

M.tp_spec_schema = { variant = { type = "string", default = "SHARD_WEIGHTS_1D" } }

-- What fathom models of two ScaleScope fields that name an algorithm: one each. Any
-- other value is refused with the reason, never accepted and ignored.
--   optimizer: the core's optimizer step and states are mixed-precision Adam's (two
--   moments and a master copy at full_precision_param_float_size; fth_train.c). AdamW
--   differs only in where weight decay is applied: the same memory and the same step.
--   tp_spec.variant: TP is Megatron's 1-D sharding of the weights (column- then
--   row-parallel linears, one all-reduce or RS/AG pair per block half).
M.modelled = {
  optimizer = { values = { adam = true, adamw = true },
    why = "fathom models mixed-precision Adam's states and step; adamw costs the same, other optimizers are " ..
      "not modelled" },
  tp_variant = { values = { SHARD_WEIGHTS_1D = true },
    why = "fathom models Megatron's 1-D weight sharding only: column- then row-parallel linears" },
}

-- modelled(t, key, path, what): refuse t[key] unless fathom models it (M.modelled[what]).
local function modelled(t, key, path, what)
  local m = M.modelled[what]
  local v = t[key]
  if v ~= nil and not m.values[v] then
    local list = {}
    for name in pairs(m.values) do list[#list + 1] = name end
    table.sort(list)
    errors.at(t, key, path, "expected %s, got '%s' (%s)%s", table.concat(list, " or "), tostring(v), m.why,
      errors.suggest(tostring(v), list))
  end
end
M.dp_spec_schema = { variant = { type = "string", choices = names.with_aliases("dp_variant"),
  default = TRAIN.dp_variant },
  -- ZeRO-3: micro-batches sharing one weight gather and gradient reduce-scatter (FSDP2 under a
  -- PyTorch pipeline schedule keeps the weights gathered over one schedule run)
  zero3_microbatches_per_gather = { type = "integer", min = 1, default = TRAIN.zero3_microbatches_per_gather,
    hint = "micro-batches of one schedule run under FSDP2 + PP; 1: every micro-batch gathers" } }
M.pp_spec_schema = {
  variant = { type = "string", choices = names.pp_schedule, default = TRAIN.pp_variant },
  virtual_stages = { type = "integer", min = 1, default = TRAIN.virtual_stages },
  -- Megatron-Core's names: layers of the first / last stage, the others share the rest
  -- (0: the even split; README "Uneven pipeline splits")
  num_layers_in_first_pipeline_stage = { type = "integer", min = 0,
    default = TRAIN.num_layers_in_first_pipeline_stage, hint = "layers, 0 for the even split" },
  num_layers_in_last_pipeline_stage = { type = "integer", min = 0,
    default = TRAIN.num_layers_in_last_pipeline_stage, hint = "layers, 0 for the even split" },
  -- micro-batches per run of the schedule, each run filling and draining the pipeline (PyTorch's
  -- pipelining steps it once per gradient-accumulation step); 0: the step's in one run
  microbatches_per_run = { type = "integer", min = 0, default = TRAIN.microbatches_per_run,
    hint = "micro-batches, 0 for one run a step" },
}
M.moe_spec_schema = {
  num_colocated_experts = { type = "integer", min = 1 },
  shared_expert_copies = { refuse = "fathom keeps each shared expert on every GPU of the TP group, "
    .. "as Megatron-Core does; remove the key or set it to null" },
  expert_imbalance = { type = "number", min = 1, default = TRAIN.expert_imbalance, hint = "busiest / mean load, >= 1" },
  routing = { type = "table", hint = "draw the imbalance from a routing distribution (see fathom route)" },
}

M.routing_schema = {
  distribution = { type = "string", choices = names.route_distribution, default = DIST.uniform },
  hot_ratio = { type = "number", above = 0, max = 1, default = 0.25, hint = "a fraction in (0, 1]" },
  hot_weight = { type = "number", min = 0, max = 1, default = 0.5, hint = "a fraction in [0, 1]" },
  zipf_s = { type = "number", min = 0, default = 1.0 },
  histogram = { type = "list" },
  placement = { type = "string", choices = names.route_placement, default = PLACE.contiguous },
  hot_replicas = { type = "integer", min = 1, default = 2 },
  redundant_experts = { type = "integer", min = 0, default = 0, hint = "extra expert copies (eplb), a multiple of EP" },
  seed = { type = "integer", min = 0, default = 1 },
  tokens = { type = "integer", min = 1, default = 65536 },
  packet_simulation = { type = "boolean", default = false,
    hint = "time each EP all-to-all with the packet-level simulator" },
  packet_size = { type = "number", above = 0, default = 4096 },
}
M.collective_schema = {
  per_peer_overhead_sec = { type = "number", min = 0, default = 0 },
  launch_sec = { type = "number", min = 0, default = 0 },
  -- an engine's own one-kernel all-reduce inside a node (vLLM's custom all-reduce): its
  -- latency replaces NCCL/RCCL's per-step latencies where that is faster; 0 = none
  engine_allreduce_latency_sec = { type = "number", min = 0, max = 1, default = 0 },
  engine_allreduce_max_bytes = { type = "number", min = 0, default = 0, hint = "the largest message; 0 = any" },
}

-- Loaders -----------------------------------------------------------------------------------

-- Each loader takes a path or an already-loaded table (a sweep's modified copy).
local function doc_of(src, what)
  if type(src) == "table" then return src end
  return config.load_mapping(src, what)
end

-- hardware_library(src) -> lib {compute = {}, memory = {}, interconnect = {}, nodes = {}, doc = doc}
function M.hardware_library(src)
  -- a path may name an overlay of another library (fathom.calibration.load_library)
  local doc = type(src) == "table" and src or require("fathom.calibration").load_library(src)
  check.fields(doc, "", {
    components = { type = "table", required = true },
    nodes = { type = "table", required = true },
    description = { type = "string" },
    notes = { type = "any" },
    calibrated = { type = "table" }, -- which kernel library an overlay's efficiencies are for
  })
  local comps = doc.components
  check.fields(comps, "components", {
    compute = { type = "table", default = {} },
    memory = { type = "table", default = {} },
    interconnect = { type = "table", default = {} },
  })
  local lib = { compute = {}, memory = {}, interconnect = {}, nodes = {}, doc = doc }
  for _, kind in ipairs({ "compute", "memory", "interconnect" }) do
    local schema = M[kind .. "_schema"]
    for name, def in pairs(comps[kind] or {}) do
      local path = "components." .. kind .. "." .. name
      lib[kind][name] = check.fields(def, path, schema)
      if kind == "compute" then
        local c = lib[kind][name]
        if c.efficiency == nil then
          errors.at(def, nil, path .. ".efficiency", "missing required key")
        end
        if c.bf16_nominal <= 0 and c.fp32_nominal <= 0 then
          errors.at(def, "bf16_nominal", path .. ".bf16_nominal",
            "expected bf16_nominal or fp32_nominal > 0 (the peak FLOP/s)")
        end
      end
    end
  end
  for name, def in pairs(doc.nodes) do
    local path = "nodes." .. name
    local n = check.fields(def, path, M.node_schema)
    check.ref(def, "device_compute", path .. ".device_compute", lib.compute, "compute component")
    for tier in pairs(def.device_memory_tiers) do
      local tpath = path .. ".device_memory_tiers." .. tostring(tier)
      check.value(def.device_memory_tiers, tier, tpath, { type = "string", choices = nil })
      local ok = false
      for _, t in ipairs(M.tiers) do if t == tier then ok = true end end
      if not ok then
        errors.at(def.device_memory_tiers, tier, tpath, "unknown memory tier%s",
          errors.suggest(tostring(tier), M.tiers))
      end
      check.ref(def.device_memory_tiers, tier, tpath, lib.memory, "memory component")
    end
    if def.device_memory_tiers.xpu_memory == nil then
      errors.at(def, "device_memory_tiers", path .. ".device_memory_tiers",
        "missing xpu_memory (the accelerator's own memory)")
    end
    for lname in pairs(def.device_interconnects or {}) do
      check.ref(def.device_interconnects, lname, path .. ".device_interconnects." .. lname,
        lib.interconnect, "interconnect component")
    end
    n.name = name
    n.source_table = def
    lib.nodes[name] = n
  end
  return lib
end

-- node_table(lib, name) -> the normalised node the C core reads.
function M.node_table(lib, name)
  local n = lib.nodes[name]
  local t = { device_compute = lib.compute[n.device_compute], device_memory_tiers = {},
    host_op_time_factor = n.host_op_time_factor }
  for tier, ref in pairs(n.device_memory_tiers) do t.device_memory_tiers[tier] = lib.memory[ref] end
  return t
end

-- The sub-layer kinds of a hybrid_override_pattern (Megatron-Core's symbols).
M.hybrid_symbols = { M = "mamba_layers", ["*"] = "attention_layers", ["-"] = "mlp_layers", E = "moe_layers" }

-- hybrid(doc, m): a hybrid model's sub-layer counts from its pattern (or as given), checked
-- against n_layers (the sub-layers, HF num_hidden_layers) and the Mamba2 dimensions.
function M.hybrid(doc, m)
  local function need(cond, key, fmt, ...)
    if not cond then errors.at(doc, key, key, fmt, ...) end
  end
  local pat = m.hybrid_override_pattern
  if pat then
    need(m.mamba_layers + m.attention_layers + m.mlp_layers + m.moe_layers == 0, "hybrid_override_pattern",
      "give the pattern or mamba_layers/attention_layers/mlp_layers/moe_layers, not both")
    for i = 1, #pat do
      local c = pat:sub(i, i)
      local key = M.hybrid_symbols[c]
      need(key ~= nil, "hybrid_override_pattern",
        "unknown sub-layer '%s' at position %d (expected M Mamba2, * attention, - MLP, E MoE)", c, i)
      m[key] = m[key] + 1
    end
  end
  local sub = m.mamba_layers + m.attention_layers + m.mlp_layers + m.moe_layers
  if sub == 0 then return end
  need(sub == m.n_layers, "n_layers",
    "a hybrid's n_layers counts its sub-layers: expected %d (the pattern's), got %d", sub, m.n_layers)
  need((m.moe_layers > 0) == (m.num_regular_experts > 1), "num_regular_experts",
    "a hybrid has experts (num_regular_experts > 1) exactly when it has MoE sub-layers (E: %d)", m.moe_layers)
  need(m.moe_layers == 0 or m.mlp_layers == 0, "hybrid_override_pattern",
    "dense MLP (-) and MoE (E) sub-layers in one hybrid are not modelled")
  if m.mamba_layers > 0 then
    local heads = m.mamba_num_heads > 0 and m.mamba_num_heads or (2 * m.d_model) // m.mamba_head_dim
    need(heads >= 1 and heads % m.mamba_num_groups == 0, "mamba_num_groups",
      "mamba_num_groups %d does not divide the %d Mamba2 heads", m.mamba_num_groups, heads)
  end
end

-- model(src) -> normalised model table.
function M.model(src)
  local doc = doc_of(src, "model spec")
  local hf = require("fathom.hf")
  if hf.is_hf(doc) then doc = hf.convert(doc) end -- a Hugging Face config.json
  local m = check.fields(doc, "", M.model_schema)
  local function need(cond, key, fmt, ...)
    if not cond then errors.at(doc, key, key, fmt, ...) end
  end
  if m.num_kv_heads then
    need(m.num_heads % m.num_kv_heads == 0, "num_kv_heads",
      "num_heads %d is not a multiple of num_kv_heads %d", m.num_heads, m.num_kv_heads)
  end
  need(m.mlp_ratio == nil or m.ffn_hidden_size == nil, "ffn_hidden_size",
    "give mlp_ratio or ffn_hidden_size, not both")
  if m.num_regular_experts > 1 then
    need(m.num_selected_experts >= 1, "num_selected_experts",
      "an MoE model needs num_selected_experts >= 1, got %d", m.num_selected_experts)
    need(m.num_selected_experts <= m.num_regular_experts, "num_selected_experts",
      "num_selected_experts %d exceeds num_regular_experts %d", m.num_selected_experts,
      m.num_regular_experts)
  end
  need(m.first_dense_layers <= m.n_layers, "first_dense_layers",
    "first_dense_layers %d exceeds n_layers %d", m.first_dense_layers, m.n_layers)
  if m.kv_lora_rank > 0 then
    for _, k in ipairs({ "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim" }) do
      need(m[k] > 0, k, "MLA (kv_lora_rank > 0) needs %s > 0", k)
    end
  end
  M.hybrid(doc, m)
  if m.mlp_ratio == nil and m.ffn_hidden_size == nil then m.mlp_ratio = 4 end
  m.source_table = doc
  return m
end

-- physical(src, lib) -> {name, node_name, dimensions = {...normalised...}, by_name = {}}
function M.physical(src, lib)
  local doc = doc_of(src, "physical topology")
  local p = check.fields(doc, "", M.physical_schema)
  local node = check.ref(doc, "node_definition_ref", "node_definition_ref", lib.nodes, "node")
  local out = { name = p.name, node_name = doc.node_definition_ref, dimensions = {}, by_name = {},
    expert_high_bandwidth_group_size_xpus = p.expert_high_bandwidth_group_size_xpus,
    dp_bandwidth_apart = p.dp_bandwidth_apart, bandwidth_by_traffic = p.bandwidth_by_traffic,
    num_xpus = p.num_xpus, source_table = doc }
  if #doc.dimensions == 0 then errors.at(doc, "dimensions", "dimensions", "expected at least one dimension") end
  local capacity = 1
  for i, d in ipairs(doc.dimensions) do
    local path = string.format("dimensions[%d]", i)
    local dim = check.fields(d, path, M.physical_dim_schema)
    local link_name = check.ref(d, "interconnect_name", path .. ".interconnect_name",
      node.device_interconnects, "interconnect of node '" .. out.node_name .. "'")
    if out.by_name[dim.name] then
      errors.at(d, "name", path .. ".name", "duplicate dimension name '%s'", dim.name)
    end
    local link = lib.interconnect[link_name]
    out.dimensions[i] = { name = dim.name, topology_type = dim.topology_type, size = dim.size,
      interconnect = link, interconnect_ref = link_name, source_table = d }
    out.by_name[dim.name] = i
    capacity = capacity * dim.size
  end
  if p.num_xpus and p.num_xpus > capacity then
    errors.at(doc, "num_xpus", "num_xpus", "%d GPUs, but the dimensions hold %d (size the last dimension up)",
      p.num_xpus, capacity)
  end
  out.capacity = capacity
  return out
end

-- logical(src, phys) -> list of {logical_tag, phys_dim, size}
function M.logical(src, phys)
  local doc = doc_of(src, "logical topology")
  local top = check.fields(doc, "", M.logical_schema)
  local placed = top.placement == "rank_order"
  local out = { name = doc.name, dimensions = {}, source_table = doc, placed = placed }
  if phys.num_xpus and not placed and phys.num_xpus ~= phys.capacity then
    errors.at(doc, "placement", "placement",
      "the physical topology runs %d of its %d GPUs (num_xpus), which only a rank-order placement "
      .. "places (set placement: rank_order, or drop num_xpus)", phys.num_xpus, phys.capacity)
  end
  for i, d in ipairs(doc.dimensions) do
    local path = string.format("dimensions[%d]", i)
    local l = check.fields(d, path, M.logical_dim_schema)
    local idx = 1
    if placed then
      if d.maps_to_physical_dimension_name ~= nil then
        errors.at(d, "maps_to_physical_dimension_name", path .. ".maps_to_physical_dimension_name",
          "placement: rank_order places each dimension by its rank stride (listed order), not on a "
          .. "named physical dimension (drop the key)")
      end
    else
      if d.maps_to_physical_dimension_name == nil then
        errors.at(d, "maps_to_physical_dimension_name", path .. ".maps_to_physical_dimension_name",
          "required (or set placement: rank_order on the logical topology)")
      end
      idx = check.ref(d, "maps_to_physical_dimension_name",
        path .. ".maps_to_physical_dimension_name", phys.by_name, "physical dimension")
    end
    local size = l.size
    if size == "auto" then
      if l.logical_tag ~= TAG.DP_Attn and l.logical_tag ~= TAG.DP_MoE then
        errors.at(d, "size", path .. ".size", "only DP_Attn and DP_MoE may be sized auto")
      end
    else
      size = check.value(d, "size", path .. ".size", { type = "integer", min = 1 })
    end
    out.dimensions[i] = { logical_tag = l.logical_tag, phys_dim = idx, size = size, source_table = d }
  end
  -- "auto" DP fills what the other tags of its view leave of the physical dimension.
  local attn_view = { TP_Attn = true, CP = true, DP_Attn = true, PP = true }
  local moe_view = { TP_MoE = true, EP_SU = true, EP_SO = true, DP_MoE = true, PP = true }
  for _, l in ipairs(out.dimensions) do
    if l.size == "auto" then
      local view = l.logical_tag == TAG.DP_Attn and attn_view or moe_view
      local prod = 1
      for _, o in ipairs(out.dimensions) do
        if o ~= l and (placed or o.phys_dim == l.phys_dim) and view[o.logical_tag] and o.size ~= "auto" then
          prod = prod * o.size
        end
      end
      local dsize = placed and (phys.num_xpus or phys.capacity) or phys.dimensions[l.phys_dim].size
      local where = placed and "the job" or ("'" .. phys.dimensions[l.phys_dim].name .. "'")
      if dsize % prod ~= 0 then
        errors.at(l.source_table, "size", "dimensions.size",
          "auto: the other tags on %s multiply to %d, which does not divide its %d GPUs",
          where, prod, dsize)
      end
      l.size = dsize // prod
    end
  end
  return out
end

-- topology_table(phys, logical) -> the normalised topology the C core reads.
function M.topology_table(phys, logical)
  local t = { dimensions = {}, logical = {},
    expert_high_bandwidth_group_size_xpus = phys.expert_high_bandwidth_group_size_xpus,
    dp_bandwidth_apart = phys.dp_bandwidth_apart, bandwidth_by_traffic = phys.bandwidth_by_traffic,
    placed = logical.placed or nil, num_xpus = logical.placed and phys.num_xpus or nil }
  for i, d in ipairs(phys.dimensions) do
    t.dimensions[i] = { topology_type = d.topology_type, size = d.size, interconnect = d.interconnect }
  end
  for i, l in ipairs(logical.dimensions) do
    t.logical[i] = { logical_tag = l.logical_tag, phys_dim = l.phys_dim, size = l.size }
  end
  return t
end

local function tier_map(doc, key, components)
  local m = doc[key]
  if m == nil then return {} end
  return check.fields(m, key, tier_map_schema(components))
end

-- train(src) -> normalised training workload.
function M.train(src)
  local doc = doc_of(src, "training workload spec")
  if type(doc.framework) == "string" then require("fathom.frameworks").apply(doc, "training") end
  local w = check.fields(doc, "", M.train_schema)
  local tp = check.fields(doc.tp_spec or {}, "tp_spec", M.tp_spec_schema)
  modelled(doc, "optimizer", "optimizer", "optimizer")
  modelled(doc.tp_spec or {}, "variant", "tp_spec.variant", "tp_variant")
  local dp = check.fields(doc.dp_spec or {}, "dp_spec", M.dp_spec_schema)
  local pp = check.fields(doc.pp_spec or {}, "pp_spec", M.pp_spec_schema)
  local moe = check.fields(doc.moe_spec_v2 or {}, "moe_spec_v2", M.moe_spec_schema)
  if moe.routing then moe.routing = check.fields(moe.routing, "moe_spec_v2.routing", M.routing_schema) end
  local coll = check.fields(doc.collective or {}, "collective", M.collective_schema)
  local reliability = doc.reliability and check.fields(doc.reliability, "reliability", M.reliability_schema)
  local cost = doc.cost and check.fields(doc.cost, "cost", M.cost_schema)
  if w.micro_batch_size > w.global_batch_size then
    errors.at(doc, "micro_batch_size", "micro_batch_size",
      "micro_batch_size %d exceeds global_batch_size %d", w.micro_batch_size, w.global_batch_size)
  end
  -- every entry of the list w[key] one of the enum's names
  local function names_in(key, enum)
    local known = {}
    for _, n in ipairs(names[enum]) do known[n] = true end
    for i, n in ipairs(w[key]) do
      if not known[n] then
        errors.at(w[key], i, string.format("%s[%d]", key, i), "expected one of %s, got %s",
          table.concat(names[enum], ", "), tostring(n))
      end
    end
  end
  names_in("recompute_modules", "recompute_module")
  names_in("cuda_graph_scope", "cuda_graph_scope")
  names_in("recompute_saved", "op_keep")
  local RC = names.key("recompute")
  if #w.recompute_modules > 0 and not (w.recompute == RC.none or w.recompute == RC.selective) then
    errors.at(doc, "recompute_modules", "recompute_modules",
      "modules are re-run on top of recompute none or selective, not %s", w.recompute)
  end
  if #w.recompute_saved > 0 and w.recompute ~= RC.op then
    errors.at(doc, "recompute_saved", "recompute_saved",
      "names what per-op recomputation saves: needs recompute op, not %s", w.recompute)
  end
  local out = {
    reliability = reliability,
    cost = cost,
    global_batch_size = w.global_batch_size,
    micro_batch_size = w.micro_batch_size,
    seq_length = w.seq_length,
    total_train_tokens = w.total_train_tokens,
    float_size_bytes = w.float_size_bytes,
    full_precision_param_float_size = w.full_precision_param_float_size,
    gradient_float_size = w.gradient_float_size,
    optimizer = w.optimizer,
    comp_comm_efficiency = w.comp_comm_efficiency,
    comp_mem_efficiency = w.comp_mem_efficiency,
    comm_mem_efficiency = w.comm_mem_efficiency,
    tp_variant = tp.variant,
    dp_variant = names.canonical("dp_variant", dp.variant),
    zero3_microbatches_per_gather = dp.zero3_microbatches_per_gather,
    pp_variant = pp.variant,
    virtual_stages = pp.virtual_stages,
    num_layers_in_first_pipeline_stage = pp.num_layers_in_first_pipeline_stage,
    num_layers_in_last_pipeline_stage = pp.num_layers_in_last_pipeline_stage,
    microbatches_per_run = pp.microbatches_per_run,
    expert_imbalance = moe.expert_imbalance,
    routing = moe.routing,
    num_colocated_experts = moe.num_colocated_experts,
    ep_dispatch_sec = 0,
    ep_combine_sec = 0,
    -- EPLB's redundant experts are held like experts (memory; fth_train.c dp_views)
    moe_redundant_experts = moe.routing and moe.routing.placement == PLACE.eplb and moe.routing.redundant_experts
      or 0,
    moe_dispatch_float_size_bytes = w.moe_dispatch_float_size_bytes,
    moe_comm_compute_fraction = w.moe_comm_compute_fraction,
    ep_comm_compute_units = w.ep_comm_compute_units,
    attention_sink_rate_share = w.attention_sink_rate_share,
    dp_comm_compute_fraction = w.dp_comm_compute_fraction,
    ep_a2a_scale_out_efficiency = w.ep_a2a_scale_out_efficiency,
    recompute = w.recompute,
    recompute_modules = w.recompute_modules,
    recompute_saved = w.recompute_saved,
    sequence_parallel = w.sequence_parallel,
    tp_comm_overlap = w.tp_comm_overlap,
    tp_overlap_backward_rs = w.tp_overlap_backward_rs,
    tp_gather_quantized = w.tp_gather_quantized,
    fp8_param_gather = w.fp8_param_gather,
    ep_comm_overlap = w.ep_comm_overlap,
    ep_overlap_pairs = w.ep_overlap_pairs,
    ep_dispatch_per_node = w.ep_dispatch_per_node,
    grouped_expert_kernel = w.grouped_expert_kernel,
    eager_elementwise = w.eager_elementwise,
    host_op_sec = w.host_op_sec,
    cuda_graph_scope = w.cuda_graph_scope,
    flash_attention = w.flash_attention,
    cp_comm = w.cp_comm,
    kernel_launch_sec = w.kernel_launch_sec,
    memory_reserve_bytes = w.memory_reserve_bytes,
    memory_fragmentation_fraction = w.memory_fragmentation_fraction,
    kernel_model = w.kernel_model,
    precision_recipe = w.precision_recipe,
    cast_kernels = w.cast_kernels,
    lora_rank = w.lora_rank,
    lora_targets = w.lora_targets,
    activation_input_fp8 = w.activation_input_fp8,
    attention_fp8 = w.attention_fp8,
    num_layers_at_start_in_bf16 = w.num_layers_at_start_in_bf16,
    num_layers_at_end_in_bf16 = w.num_layers_at_end_in_bf16,
    recompute_num_layers = w.recompute_num_layers,
    activation_offload_layers = w.activation_offload_layers,
    collective = coll,
    memory_device_map_traffic = tier_map(doc, "memory_device_map_traffic", M.traffic_components),
    memory_device_map_footprint = tier_map(doc, "memory_device_map_footprint", M.footprint_components),
    source_table = doc,
  }
  out.memory_device_map_traffic = M.canonical_traffic(out.memory_device_map_traffic, { [MEM.kv_cache] = true })
  return out
end

-- canonical_traffic(map, drop) -> the traffic map under the core's component names
-- (`activations` -> saved_activations, `gradients` -> gradient_buffers; the explicit
-- short name wins); transients follow the activations, `drop` names are ignored.
function M.canonical_traffic(map, drop)
  local alias = names.aliases.memory_component
  local out = {}
  for k, v in pairs(map) do
    if not (drop and drop[k]) and k ~= MEM.transient_forward_peak and k ~= MEM.transient_backward_peak then
      local name = alias[k] or k
      if alias[k] or out[name] == nil then out[name] = v end
    end
  end
  return out
end

M.infer_schema = with_common({
  global_batch_size = { type = "integer", min = 1, required = true, hint = "requests in flight" },
  micro_batch_size = { type = "integer", min = 1, required = true },
  seq_length = { type = "integer", min = 1, hint = "prefill: prompt tokens per request" },
  prefill_seq_len = { type = "integer", min = 0, hint = "decode: tokens already in the KV cache" },
  num_generated_tokens = { type = "integer", min = 1, hint = "decode: tokens to generate" },
  weight_float_size_bytes = { type = "integer", choices = { 1, 2, 4 }, hint = "default: float_size_bytes" },
  kv_cache_float_size_bytes = { type = "integer", choices = { 1, 2, 4 }, hint = "default: float_size_bytes" },
  gemm_float_size_bytes = { type = "integer", choices = { 1, 2, 4 },
    hint = "the linears' GEMMs (and their weights) at this width, attention at float_size_bytes; default: one width" },
  precision_recipe = { type = "string", choices = names.precision_recipe,
    hint = "a block-scaled checkpoint served as it is (nvfp4: FP4 GEMMs, weights at 0.5 B + an FP8 scale per 16; "
      .. "mxfp8): the linears at the recipe's precision, attention at float_size_bytes; default: none" },
  two_batch_overlap = { type = "boolean", default = INFER.two_batch_overlap,
    hint = "true: the engine runs each iteration as two half-batches whose TP/EP collectives hide under the other's "
      .. "kernels (SGLang --enable-two-batch-overlap); false: the collectives block" },
  decode_kv_reread = { type = "number", min = 0, max = 1, default = INFER.decode_kv_reread,
    hint = "decode under grouped-query attention: each step loads a KV head 1 + this x (query heads per KV "
      .. "head - 1) times; 0 = a grouped kernel (FlashDecoding, FlashInfer, XQA), 1 = one load per query head "
      .. "(TensorRT-LLM's masked MHA before XQA)" },
})

M.infer_traffic = { MEM.weights, MEM.activations, MEM.kv_cache }
M.infer_footprint = { MEM.weights, MEM.kv_cache, MEM.transient_forward_peak }

-- infer_weight_bytes(w) -> bytes a stored weight of the linears takes under a normalised
-- inference workload: a block-scaled recipe's width plus its scales (core.recipe_element_bytes,
-- fth_recipe_element_bytes), else the GEMM width, else the weights', else the activations'
-- (the order fth_infer_compile resolves them in).
function M.infer_weight_bytes(w)
  return w.precision_recipe and require("fathom.core").recipe_element_bytes[w.precision_recipe]
    or w.gemm_float_size_bytes or w.weight_float_size_bytes or w.float_size_bytes or 2
end

-- infer(src, pass) -> normalised prefill ("prefill") or decode ("decode") workload.
function M.infer(src, pass)
  local doc = doc_of(src, pass .. " workload spec")
  if type(doc.framework) == "string" then require("fathom.frameworks").apply(doc, pass) end
  local w = check.fields(doc, "", M.infer_schema)
  check.fields(doc.tp_spec or {}, "tp_spec", M.tp_spec_schema)
  modelled(doc.tp_spec or {}, "variant", "tp_spec.variant", "tp_variant")
  check.fields(doc.dp_spec or {}, "dp_spec", { variant = { type = "string", choices = { DP.DDP }, default = DP.DDP } })
  check.fields(doc.pp_spec or {}, "pp_spec", M.pp_spec_schema)
  local moe = check.fields(doc.moe_spec_v2 or {}, "moe_spec_v2", M.moe_spec_schema)
  if moe.routing then moe.routing = check.fields(moe.routing, "moe_spec_v2.routing", M.routing_schema) end
  local coll = check.fields(doc.collective or {}, "collective", M.collective_schema)
  local function need(key, why)
    if w[key] == nil then
      local where = errors.where(doc)
      errors.raise("%s%s: missing required key (%s)", where and (where .. ": ") or "", key, why)
    end
  end
  if pass == "prefill" then
    need("seq_length", "prompt tokens per request")
  else
    need("prefill_seq_len", "tokens already in the KV cache")
    need("num_generated_tokens", "tokens to generate")
  end
  if w.micro_batch_size > w.global_batch_size then
    errors.at(doc, "micro_batch_size", "micro_batch_size",
      "micro_batch_size %d exceeds global_batch_size %d", w.micro_batch_size, w.global_batch_size)
  end
  local renamed = M.canonical_traffic(tier_map(doc, "memory_device_map_traffic", M.traffic_components))
  return {
    global_batch_size = w.global_batch_size, micro_batch_size = w.micro_batch_size,
    seq_length = w.seq_length, prefill_seq_len = w.prefill_seq_len,
    num_generated_tokens = w.num_generated_tokens, float_size_bytes = w.float_size_bytes,
    weight_float_size_bytes = w.weight_float_size_bytes, kv_cache_float_size_bytes = w.kv_cache_float_size_bytes,
    gemm_float_size_bytes = w.gemm_float_size_bytes, two_batch_overlap = w.two_batch_overlap,
    precision_recipe = w.precision_recipe, decode_kv_reread = w.decode_kv_reread,
    comp_comm_efficiency = w.comp_comm_efficiency, comp_mem_efficiency = w.comp_mem_efficiency,
    comm_mem_efficiency = w.comm_mem_efficiency, expert_imbalance = moe.expert_imbalance, routing = moe.routing,
    flash_attention = w.flash_attention, kernel_launch_sec = w.kernel_launch_sec, collective = coll,
    kernel_model = w.kernel_model, memory_reserve_bytes = w.memory_reserve_bytes,
    memory_fragmentation_fraction = w.memory_fragmentation_fraction,
    memory_device_map_traffic = renamed,
    memory_device_map_footprint = tier_map(doc, "memory_device_map_footprint", M.footprint_components),
    pass = pass, source_table = doc,
  }
end

-- The defaults ScaleScope applies to overlap efficiencies when a spec omits them.
M.default_efficiency = { comp_comm_efficiency = 0.0, comp_mem_efficiency = 1.0, comm_mem_efficiency = 0.0 }

return M
