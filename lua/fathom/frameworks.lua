-- fathom.frameworks: what a training or serving framework does by default, as data.
-- A case file's `training.framework` (or a workload spec's `framework`) names one;
-- its row supplies every setting the source leaves unsaid. Rows are matched in order
-- against the lower-cased name (`pattern`, and `also` where a row sets it; never
-- `exclude`); `min_version` rows need a version >= it (YY.MM for NeMo containers, a year
-- for the rest).
--
-- Fields:
--   flash_attention        fused (FlashAttention-class) attention kernels, yes/no
--   kernels                kernel-library generation, the calibration key with the GPU
--                          generation (fathom.calibration): "2021" Megatron-LM's own
--                          kernels; "2023" FlashAttention 2 / Triton, cuBLAS BF16; "2024"
--                          Transformer Engine 1.x, cuDNN fused attention (FA2-class on
--                          Hopper), FP8 delayed scaling; "2025" TE 2.x, cuDNN/FA3-class
--                          attention, FP8 current/MX scaling, Blackwell kernels;
--                          "torch2024"/"torch2025" PyTorch-native stacks (eager or
--                          torch.compile'd ATen/cuBLAS GEMMs, SDPA attention, torchao
--                          Float8) without Transformer Engine's fused kernels; "trt2023"/
--                          "trt2025" TensorRT-LLM's own GEMM/FMHA kernels (serving); "vllm2024"
--                          vLLM 2024's (V0; ROCm: hipBLASLt FP8, Triton attention, pre-AITER)
--   dp_variant             how data parallelism shards state when the case does not say:
--                          DDP, ZERO1 (Megatron's distributed optimizer), ZERO3 (FSDP)
--   comp_comm_efficiency   fraction of TP/DP/PP/EP communication hidden under compute
--   comp_mem_efficiency, comm_mem_efficiency   the other overlaps (fathom's workload spec)
--   recompute              activation recomputation when the source does not state it
--   sequence_parallel      sequence parallelism on with TP > 1 unless stated
--   expert_tp_is_tp        expert tensor parallelism defaults to TP (Megatron-Core)
--   fp8_recipe             the FP8 scaling recipe (the core's precision_recipe) a plain
--                          "FP8" means in this framework
--   pp_schedule            the pipeline schedule a case with PP > 1 runs when it names none
--                          (the core's pp_spec variant; a case's parallelism.pp_schedule or a
--                          framework string naming DualPipe wins)
--   fp8_dispatch           under an FP8 recipe the EP dispatch sends FP8 with 1x128 scales and
--                          the combine BF16 (the core's moe_dispatch_float_size_bytes 1):
--                          DeepSeek-AI 2024 Sec. 3.3.2, DeepEP's low-precision dispatch
--   pp_micro_batch         pipeline micro-batch size when the source gives only the batch
--   grad_bytes             width of the gradient buffer and of its data-parallel reduction:
--                          4 = FP32 main gradients (Megatron-LM's own loop forces them with
--                          BF16, FSDP's reduce_dtype fp32), 2 = BF16 (the NeMo 2 / Megatron-
--                          Bridge performance recipes set grad_reduce_in_fp32 = False; NeMo
--                          Launcher's grad_sync_dtype bf16). With the distributed optimizer
--                          the buffer is whole on every rank, so this is 2-4 bytes/parameter.
--   kernel_launch_sec      per-kernel launch and gap
--   engine_allreduce       a serving engine's own one-kernel all-reduce inside a node (the
--                          core's collective.engine_allreduce_latency_sec and _max_bytes): its
--                          fixed latency in place of NCCL/RCCL's per-step latencies, for
--                          messages up to its limit, where that is faster
--   eager_elementwise      eager PyTorch: every element-wise op its own kernel (fp32 norm and
--                          RoPE chains, unfused SwiGLU); a name that says "compile"
--                          (torch.compile fuses those chains) turns it off
--   cast_kernels           how an FP8/FP4 recipe's casts are written (the core's cast_kernels):
--                          fused (Transformer Engine's cast-transpose kernels), compiled
--                          (torch.compile: amax, cast and transpose as separate Triton kernels),
--                          eager; torchtitan's rows are eager unless the name says "compile"
--   ep_comm_overlap        EP dispatch/combine all-to-alls overlapped with compute (DualPipe,
--                          Megatron-Core's 1F1B A2A overlap, two-batch overlap); false: the
--                          alltoall/DeepEP dispatcher as Megatron-Core, NeMo, AutoModel and
--                          torchtitan run it by default, between the router and the experts,
--                          none hidden. A name or recompute string that says "A2A overlap",
--                          "EP overlap", "overlap_moe_expert_parallel_comm" or "batch
--                          overlap" turns it on
--   ep_overlap_pairs       that overlap pairs a forward and a backward pass of two micro-batches
--                          (Megatron-Core's 1F1B A2A overlap, DualPipe), so the schedule's
--                          warm-up and cool-down passes, run alone, expose their all-to-all;
--                          set by the strings that name such an overlap (M.ep_overlap_pairs)
--   ep_dispatch_per_node   the EP dispatcher sends a token across scale-out once per node it
--                          reaches and forwards it inside (DeepEP's normal kernels,
--                          Megatron's flex/HybridEP): the k copies of a token cross as the
--                          nodes they reach, fewer still under node-limited routing; false
--                          (default): NCCL's all-to-all(v), Megatron-Core's alltoall
--                          dispatcher, one copy per (token, expert). A name or kernels
--                          string saying DeepEP, flex or HybridEP turns it on
--   grouped_expert_kernel  the local experts' GEMMs, with their quantisation, run as one
--                          grouped kernel a pass (Transformer Engine's CuTe DSL fused grouped
--                          MLP, PyTorch's _scaled_grouped_mm under torchao, JAX's ragged
--                          dot), so an FP8/FP4 recipe pays no cost per expert (the hardware
--                          library's expert_recipe_overhead_sec); false (default): TE's
--                          grouped linear, each local expert's operands quantised and its GEMM
--                          run on their own (multi-stream cuBLAS). A kernels string saying
--                          "fused grouped MLP", "cutedsl" or "grouped_mm" turns it on
--                          (Megatron-Bridge's recipes from 26.06 on, per recipe)
--   tp_gather_recipes      the precision recipes under which the framework's sequence-parallel
--                          all-gathers in front of the linears move the quantised tensor (the
--                          core's tp_gather_quantized): nil, every recipe (Transformer Engine
--                          quantises the norm's output and the output gradient before
--                          gather_along_first_dim: FP8 from 1.5, current scaling, MXFP8,
--                          blockwise and NVFP4 in 2.x); torchtitan only Float8 tensorwise (torchao's
--                          Float8ColwiseParallel / Float8RowwiseParallel / PrepareFloat8-
--                          ModuleInput, which torchtitan uses only for tensorwise scaling)
--   fp8_param_recipes      the FP8 recipes (the core's precision_recipe names) whose weights the
--                          framework holds as FP8 parameters gathered in FP8 (Megatron-Core's
--                          fp8_param_gather: no BF16 compute copy) unless the case says
--                          otherwise: Megatron-Bridge's bf16_with_fp8_delayed_scaling_mixed,
--                          bf16_with_fp8_current_scaling_mixed and bf16_with_mxfp8_mixed set
--                          fp8_param_gather = True (training/mixed_precision.py, v0.1.0 to
--                          v0.4.2, which its performance scripts' fp8 / fp8_cs / fp8_mx map to);
--                          its NVFP4 recipe gathers FP4 instead
--   tp_comm_overlap        TP collectives overlapped with the GEMMs (Megatron-Core/NeMo
--                          userbuffers, torchtitan's async TP); false: vanilla TP, each
--                          all-gather / reduce-scatter between its GEMMs, none hidden. A name
--                          that says "async TP" / "AsyncTP" turns it on
--   tp_overlap_backward_rs with tp_comm_overlap, the backward's input-gradient reductions
--                          hide under the weight-gradient GEMMs (Transformer Engine's bulk
--                          overlap); false for torchtitan: PyTorch's micro-pipelined async TP
--                          fuses all-gather + matmul and matmul + reduce-scatter, and a
--                          backward reduce-scatter follows a sum of matmuls (Q, K, V; gate,
--                          up), which it does not fuse (pytorch/pytorch#149946)
--   fsdp_gather_per_run    ZeRO-3 (FSDP2) under a pipeline schedule gathers each stage's
--                          weights once per schedule run and reduce-scatters its gradients
--                          on the run's last micro-batch (PyTorch's torch.distributed.
--                          pipelining: unshard before the run, gradient sync on the last
--                          backward), not once per micro-batch; a run is the case's
--                          local_batch (per DP rank) of micro-batches, else the whole step's.
--                          Each run also fills and drains the pipeline (the schedule is
--                          stepped once per gradient-accumulation step): a bubble a run
--                          (pp_spec.microbatches_per_run, cases.microbatches_per_run)
--   serving_policy         a serving engine's batching policy (fth_serve's names) when a
--                          benchmark runs through the simulator: "inflight" TensorRT-LLM
--                          (decodes with whole prompts, context chunking off by default),
--                          "chunked" vLLM V1 and SGLang (chunked prefill on by default)
--   offline_batch          an offline throughput benchmark's cap on running requests where the
--                          case states none: nil, the engine's default (vLLM max_num_seqs 256);
--                          "kv_fit", as many as the KV cache holds at ISL + OSL, at most 4,096
--                          over PP, with a token budget of that x (1 + ISL / OSL), 2,048 to
--                          32,768 (trtllm-bench's engine settings, tensorrt_llm/bench/build/
--                          tuning.py; TensorRT-LLM's default GUARANTEED_NO_EVICT admission
--                          runs no more than fit at their full length either)
--   eplb_slots             a serving engine that places experts by EPLB (equal expert slots per
--                          EP rank): a case whose EP does not divide the experts runs with the
--                          redundant experts that fill the slots
--   decode_kv_reread       the decode attention kernel's extra KV loads under grouped-query
--                          attention (the core's decode_kv_reread): 0 = one load of each KV
--                          head for its group of query heads (FlashDecoding/FlashInfer, vLLM,
--                          SGLang, TensorRT-LLM's XQA from v0.7/0.8); TensorRT-LLM 2023's masked
--                          MHA ran one thread block per query head, each loading its KV head
--   megatron_split         a pipeline whose chunks do not divide the layers is cut as Megatron-Core
--                          cuts it (M.megatron_split): the case reader's split when a case
--                          states none
--   hybridep_sms           SMs the framework's recipes give a HybridEP dispatcher (M.ep_comm_units)
--   attention_sink_rate_share  attention with sinks (gpt-oss) at this share of the fused
--                          attention rate, its windows computed whole (0: as without sinks)
--   fused_mla_blackwell_from   the first release (YY.MM) whose Transformer Engine trains MLA's
--                          attention heads (query/key 192 wide, value 128) fused on Blackwell:
--                          before TE 2.5 (cuDNN 9.11), fused_attn.cpp took sm100+ training heads
--                          only up to 128 wide and flash-attn no unequal query and value widths,
--                          so MLA ran TE's unfused attention (score GEMMs and a softmax over the
--                          whole matrix). NeMo 25.07 ships TE 2.5: NeMo v2.3.0's (25.04) B200/
--                          GB200 DeepSeek-V3 recipes recompute core_attn, v2.4.0's (25.07) no
--                          longer do. Read by lookup into `blackwell_mla_fused`; a name without
--                          a version is taken as current (fused). M.fused_attention applies it
--   trains_published_mtp   the framework's pretraining recipes train the multi-token-prediction
--                          layers a published config has (cases.routing_configs' `mtp`) where a
--                          case names none: NeMo from 25.04 (recipes/deepseek_v3.pretrain_recipe's
--                          use_mtp=True, which its performance script keeps) and Megatron-Bridge
--                          (its DeepSeek-V3 recipes set mtp_num_layers 1, the layouts' "m")
--   host_op_sec            host seconds per operator the framework issues eagerly (Python,
--                          PyTorch's dispatcher, the launch; fth_host.h counts the operators of
--                          a block): a pass takes at least its operators' host time. 0: the
--                          host keeps ahead (not modelled). CUDA graphs remove the host time of
--                          the parts they capture: a case's `training.kernels` (or a CUDA-graph
--                          statement in its notes) names the scope, as Megatron-Core's
--                          --cuda-graph-scope does (M.cuda_graph_scope)
local names = require("fathom.names")

local M = {}
local R = names.key("precision_recipe")

local base = {
  flash_attention = true, kernels = "2025", dp_variant = "DDP", comp_comm_efficiency = 0.8,
  comp_mem_efficiency = 1.0, comm_mem_efficiency = 0.5, recompute = "none", sequence_parallel = false,
  expert_tp_is_tp = false, fp8_recipe = R.fp8_current, pp_schedule = "1F1B", kernel_launch_sec = 5e-6,
  grad_bytes = 4,
  eager_elementwise = false, tp_comm_overlap = true, tp_overlap_backward_rs = true, ep_comm_overlap = true,
  ep_dispatch_per_node = false,
  cast_kernels = "fused", fsdp_gather_per_run = false, decode_kv_reread = 0, host_op_sec = 0,
  megatron_split = false, attention_sink_rate_share = 0, grouped_expert_kernel = false,
  blackwell_mla_fused = true, trains_published_mtp = false,
}

-- Transformer Engine 2.5 (cuDNN 9.11) trains MLA's 192/128-wide heads fused on Blackwell; the
-- NeMo container that ships it (fused_mla_blackwell_from).
local NEMO_TE25 = 25.07

-- Megatron-Core with Transformer Engine, eager (NeMo, Megatron-Bridge): host seconds per
-- operator fth_host.c counts, on an x86 server CPU (the node's host_op_time_factor scales it for
-- Grace). The counts are module-level calls (a TE module, a router, a dispatcher step), each
-- with its autograd and launch work: a Transformer Engine Linear forward took ~36 us of host
-- time on DGX H100's Xeon in 2025 (99.66 us on GB200 over that issue's 2.75 torch-level ratio;
-- TransformerEngine issue #2053), a bare PyTorch operator ~5 us. Fitted: 35 us. The default
-- validation set does not bind it (no case is host-bound below ~40 us); the Megatron-Bridge
-- performance-summary rows do, where eager dropless MoE layers with few tokens per expert
-- (Qwen3-30B-A3B at micro-batch 1, Qwen3-235B at EP 8) run host-bound. Fitted jointly with
-- Grace's factor and Blackwell's cost per expert under an FP8/FP4 recipe over
-- validation/megatron_bridge_cases.yaml (validation/fit_megatron_bridge.lua: 8-50 us x Grace
-- 1.0-2.75 x 0-48 us): the leave-one-release-out folds pick 35 us or 30 us (README: Validation).
local TE_HOST_OP_SEC = 35e-6

-- Transformer Engine's attention with sinks (gpt-oss's learnable softmax offset, cuDNN's
-- FusedAttention since TE 2.8): its share of the fused attention rate, with the sliding
-- windows' masked blocks computed too. Fitted: 0.1 (7.5% of the BF16 peak at Hopper's and
-- Blackwell's 0.75) on the held-out Megatron-Bridge gpt-oss-120b rows (H100, B200, B300,
-- GB200, GB300; grid 0.06-0.14): every leave-one-GPU-out and leave-one-release-out fold picks
-- it but GB300's (0.09) (README: Validation). They ran 1.3-1.9x slower than fathom's
-- attention-without-sinks cost, and Megatron-Bridge reports MXFP8 gaining them only ~5% over
-- BF16 (issue 3389) where FP8 attention then gained 1.8x: the attention, not the GEMMs, sets
-- their pace.
local TE_SINK_ATTENTION_SHARE = 0.1

-- The NeMo / Megatron on ROCm row (below) under each name it is matched by.
local function rocm(match)
  local row = { name = "NeMo / Megatron on ROCm", kernels = "2025", dp_variant = "ZERO1",
    comp_comm_efficiency = 0.9, sequence_parallel = true, expert_tp_is_tp = true, fp8_recipe = R.fp8_delayed,
    grad_bytes = 2, ep_comm_overlap = false, ep_dispatch_per_node = false, host_op_sec = TE_HOST_OP_SEC,
    megatron_split = true }
  for k, v in pairs(match) do row[k] = v end
  return row
end

M.rows = {
  -- Narayanan et al. 2021 (SC21) and Korthikanti et al. 2022: no fused attention, torch/
  -- local DDP, full recomputation in every SC21 Table 1 run, non-interleaved or interleaved
  -- 1F1B. No communication hides under compute: the TP all-reduces are synchronous on the
  -- compute stream (mpu/mappings.py), the pipeline send/recv blocks (p2p_communication.py,
  -- batch_isend_irecv then wait), local DDP all-reduces the gradients after the backward
  -- (overlapped grad reduction came with Megatron-Core in 2023). The 2022 code's async TP
  -- all-reduce under the column-parallel weight-gradient GEMM (backward only) is not credited.
  { name = "Megatron-LM (2021)", pattern = "megatron%-lm", max_version = 2022,
    flash_attention = false, kernels = "2021", recompute = "full", dp_variant = "DDP",
    comp_comm_efficiency = 0.0 },
  -- Megatron-Core, NeMo, Megatron-Bridge (2023-): Transformer Engine with cuDNN fused
  -- attention, the distributed optimizer (ZeRO-1) with overlapped grad reduce-scatter and
  -- param all-gather, TP communication overlap (userbuffers) in the performance recipes,
  -- sequence parallelism with TP, expert TP = TP unless set (MCore >= 0.10), FP8 delayed
  -- scaling by default (current scaling and MXFP8 selectable from NeMo 25.04 / TE 2.x).
  -- NeMo / Megatron-LM on ROCm (AMD's MLPerf implementations, MangoBoost LLMBoost, AMD Primus):
  -- ROCm forks of Megatron-LM and Transformer Engine, hipBLASLt GEMMs, CK / AITER fused
  -- attention, the distributed optimizer, FP8 delayed scaling (TE's hybrid E4M3/E5M2). ROCm
  -- has no counterpart of NVIDIA's TE 1.x -> 2.x / cuDNN FA2 -> FA3 step that separates the
  -- NeMo 2024 and 2025 rows, and every such run here is a 2025 ROCm (6.4, 7.0): one kernel
  -- library, the CDNA generation's reference ("2025"), whatever container date the name holds.
  rocm({ pattern = "nemo", also = "rocm", exclude = "automodel" }),
  rocm({ pattern = "megatron", also = "rocm" }),
  rocm({ pattern = "primus" }),
  { name = "NeMo / Megatron-Core (2025)", pattern = "nemo", min_version = 25.0, exclude = "automodel",
    kernels = "2025", dp_variant = "ZERO1", comp_comm_efficiency = 0.9, sequence_parallel = true,
    expert_tp_is_tp = true, fp8_recipe = R.fp8_delayed, grad_bytes = 2, ep_comm_overlap = false,
    ep_dispatch_per_node = false, host_op_sec = TE_HOST_OP_SEC, megatron_split = true,
    attention_sink_rate_share = TE_SINK_ATTENTION_SHARE, fused_mla_blackwell_from = NEMO_TE25,
    trains_published_mtp = true },
  { name = "NeMo / Megatron-Core (2024)", pattern = "nemo", exclude = "automodel",
    kernels = "2024", dp_variant = "ZERO1", comp_comm_efficiency = 0.9, sequence_parallel = true,
    expert_tp_is_tp = true, fp8_recipe = R.fp8_delayed, grad_bytes = 2, ep_comm_overlap = false,
    ep_dispatch_per_node = false, host_op_sec = TE_HOST_OP_SEC, megatron_split = true,
    attention_sink_rate_share = TE_SINK_ATTENTION_SHARE, fused_mla_blackwell_from = NEMO_TE25 },
  { name = "Megatron-Bridge", pattern = "megatron%-bridge",
    kernels = "2025", dp_variant = "ZERO1", comp_comm_efficiency = 0.9, sequence_parallel = true,
    expert_tp_is_tp = true, fp8_recipe = R.fp8_current, grad_bytes = 2, ep_comm_overlap = false,
    ep_dispatch_per_node = false, host_op_sec = TE_HOST_OP_SEC, megatron_split = true,
    attention_sink_rate_share = TE_SINK_ATTENTION_SHARE,
    fp8_param_recipes = { R.fp8_delayed, R.fp8_current, R.mxfp8 }, hybridep_sms = 32, trains_published_mtp = true },
  { name = "Megatron-Core (2025)", pattern = "megatron", min_version = 2025,
    kernels = "2025", dp_variant = "ZERO1", comp_comm_efficiency = 0.9, sequence_parallel = true,
    expert_tp_is_tp = true, fp8_recipe = R.fp8_current, ep_comm_overlap = false,
    ep_dispatch_per_node = false, host_op_sec = TE_HOST_OP_SEC, megatron_split = true,
    attention_sink_rate_share = TE_SINK_ATTENTION_SHARE },
  { name = "Megatron-Core", pattern = "megatron",
    kernels = "2024", dp_variant = "ZERO1", comp_comm_efficiency = 0.9, sequence_parallel = true,
    expert_tp_is_tp = true, fp8_recipe = R.fp8_delayed, ep_comm_overlap = false,
    ep_dispatch_per_node = false, host_op_sec = TE_HOST_OP_SEC, megatron_split = true,
    attention_sink_rate_share = TE_SINK_ATTENTION_SHARE },
  -- HAI-LLM, DeepSeek-AI's own framework (DeepSeek-V3 report, arXiv 2412.19437, Sec. 3.2-3.3):
  -- DualPipe, whose forward-backward pairs hide the all-to-alls (Sec. 3.2.1); dispatch and
  -- combine kernels that cross InfiniBand once per node and forward over NVLink (Sec. 3.2.2,
  -- DeepEP), FP8 dispatch with BF16 combine (Sec. 3.3.2); ZeRO-1 without TP; FP8 with 1x128 /
  -- 128x128 block scaling (Sec. 3.3); RMSNorm and MLA up-projections recomputed (Sec. 3.2.3:
  -- Megatron-Core's selective with those modules where the case names them); the published
  -- multi-token-prediction module trained with the model (Sec. 2.2).
  { name = "HAI-LLM (DeepSeek-AI)", pattern = "hai%-llm", kernels = "2025", dp_variant = "ZERO1",
    comp_comm_efficiency = 0.9, ep_comm_overlap = true, ep_overlap_pairs = true, ep_dispatch_per_node = true,
    pp_schedule = "DUALPIPE", fp8_recipe = R.fp8_blockwise, fp8_dispatch = true, recompute = "selective",
    trains_published_mtp = true },
  -- NeMo AutoModel (2025): PyTorch FSDP2 (ZeRO-3) with TE layers and DeepEP.
  -- Its MoE recipes (examples/llm_benchmark) dispatch with DeepEP or HybridEP (per node).
  { name = "NeMo AutoModel", pattern = "automodel", kernels = "2025", dp_variant = "ZERO3", ep_comm_overlap = false,
    ep_dispatch_per_node = true, fsdp_gather_per_run = true },
  -- torchtitan: FSDP2 (ZeRO-3) when dp_shard > 1, selective (op) activation checkpointing
  -- by default (train_configs/*.toml: per-op SAC, the core's "op"), SDPA flash attention,
  -- Float8 tensorwise; eager unless compiled (compile.enable is off by default).
  { name = "torchtitan (2025)", pattern = "torchtitan", min_version = 2025, kernels = "torch2025",
    dp_variant = "ZERO3", recompute = "op", pp_micro_batch = 1, eager_elementwise = true,
    cast_kernels = "eager", tp_comm_overlap = false, tp_overlap_backward_rs = false, ep_comm_overlap = false,
    ep_dispatch_per_node = false, fsdp_gather_per_run = true, grouped_expert_kernel = true,
    tp_gather_recipes = { R.fp8_current } },
  { name = "torchtitan (2024)", pattern = "torchtitan", kernels = "torch2024", dp_variant = "ZERO3",
    recompute = "op", pp_micro_batch = 1, eager_elementwise = true, cast_kernels = "eager",
    tp_comm_overlap = false, tp_overlap_backward_rs = false,
    ep_comm_overlap = false,
    ep_dispatch_per_node = false, fsdp_gather_per_run = true, grouped_expert_kernel = true,
    tp_gather_recipes = { R.fp8_current } },
  -- MaxText (JAX): FSDP over ICI/DCN, cudnn_flash_te attention, remat policies.
  { name = "MaxText", pattern = "maxtext", kernels = "2024", dp_variant = "ZERO3", recompute = "selective",
    ep_comm_overlap = false, grouped_expert_kernel = true },
  -- DeepSpeed (2021-2022 ZeRO papers): the stage from zero_stage, no fused attention then.
  { name = "DeepSpeed", pattern = "deepspeed", kernels = "2021", flash_attention = false, dp_variant = "ZERO1",
    ep_comm_overlap = false },
  -- MosaicML Composer + LLM Foundry (2023): FSDP FULL_SHARD, FlashAttention 2 / Triton.
  { name = "LLM Foundry", pattern = "foundry", kernels = "2023", dp_variant = "ZERO3" },
  { name = "Composer", pattern = "composer", kernels = "2023", dp_variant = "ZERO3" },
  -- Serving engines: fused attention (FlashAttention/FlashInfer/TRT kernels), CUDA graphs.
  -- TensorRT-LLM v0.5/v0.6 decode: masked MHA, one thread block per query head, so a GQA
  -- group's KV head is loaded once per query head (XQA, which loads it once per group, came
  -- in v0.7/v0.8: "2.4x more Llama-70B throughput", TensorRT-LLM blogs/XQA-kernel.md).
  -- decode_kv_reread 0.75: a quarter of the repeated loads hit L2 -- fitted, one value for
  -- the kernel library, on trtllm_v061's six long-output GQA cases (Llama-2-70B, Falcon-180B
  -- on H100 and A100; the measured extra step time is 0.72-0.78 x (g - 1) x the KV read).
  { name = "TensorRT-LLM (2023)", pattern = "tensorrt", max_version = 2023, exclude = "pytorch", kernels = "trt2023",
    serving_policy = "inflight", decode_kv_reread = 0.75 },
  { name = "TensorRT-LLM", pattern = "tensorrt", kernels = "trt2025", serving_policy = "inflight",
    offline_batch = "kv_fit" },
  -- vLLM 2024 (V0 engine; on ROCm hipBLASLt FP8 GEMMs and Triton attention before AITER)
  { name = "vLLM (2024)", pattern = "vllm", max_version = 2024, dated = true, kernels = "vllm2024",
    serving_policy = "chunked" },
  -- vLLM from 2025 reduces its TP activations with its own custom all-reduce (peers' buffers
  -- mapped into each GPU, one launch) on ROCm as on CUDA: 6.3 us for 24 KB and 6.7 us for 48 KB
  -- on 8 MI355X (vLLM pull request 39080's table of the current kernel; ~6.0 us at zero bytes),
  -- against ~25 us for RCCL's (two 12 us steps on the Infinity Fabric, infinity_fabric_mi300).
  -- NVLink's NCCL steps (2 us) are faster already. It takes messages up to 8 MiB
  -- (CustomAllreduce's max_size); larger ones, a prefill chunk's or a large decode batch's, go
  -- to NCCL/RCCL. vLLM 2024's ROCm runs (oci_mi300x_vllm) fit RCCL's latency, so its row has none
  { name = "vLLM", pattern = "vllm", kernels = "2025", serving_policy = "chunked",
    engine_allreduce = { engine_allreduce_latency_sec = 6.0e-6, engine_allreduce_max_bytes = 8 * 2 ^ 20 } },
  -- SGLang's large-EP deployments place experts by EPLB, with redundant experts filling equal
  -- slots per EP rank (--ep-num-redundant-experts)
  { name = "SGLang", pattern = "sglang", kernels = "2025", serving_policy = "chunked", eplb_slots = true },
}

-- version(s) -> yy.mm, year: "NeMo 24.09" -> 24.09, 2024; "(2024-12-26)" -> nil, 2024;
-- "MLPerf Training v5.0" -> nil, 2025; "core_r0.13" -> nil, 2025; "TensorRT-LLM v0.6.1" -> nil, 2023;
-- "vLLM 0.6.3" -> nil, 2024.
function M.version(s)
  -- a Linux release in a container tag ("rocm6.4_ubuntu22.04") is not a NeMo YY.MM container
  s = tostring(s or ""):gsub("[Uu][Bb][Uu][Nn][Tt][Uu][%s_%-]*%d+%.%d+", "")
  -- MLPerf Training rounds: v3.x 2023, v4.x 2024, v5.x 2025 (the software of that round)
  local round = s:lower():match("mlperf[^%d]-v?(%d)%.%d")
  if round then return nil, 2020 + tonumber(round) end
  -- Megatron-Core releases: core_r0.10 (Dec 2024) and later are 2025's stack
  local core = s:lower():match("core_r0%.(%d+)") or s:lower():match("megatron%-core v?0%.(%d+)")
  if core then
    local y = tonumber(core) >= 10 and 2025 or 2024
    return nil, y
  end
  local year = s:match("%f[%d](20%d%d)%f[^%d]")
  local yymm = s:match("%f[%d](2%d)%.(%d%d)")
  if yymm then
    local yy, mm = s:match("%f[%d](2%d)%.(%d%d)")
    return tonumber(yy) + tonumber(mm) / 100, 2000 + tonumber(yy)
  end
  if year then return nil, tonumber(year) end
  local tv = s:lower():match("tensorrt%-llm v?0%.(%d+)")
  if tv then return nil, 2023 end
  -- vLLM 0.4-0.6 are 2024's releases, 0.7 (January 2025) and later 2025's
  local vv = s:lower():match("vllm v?0%.(%d+)")
  if vv then return nil, tonumber(vv) <= 6 and 2024 or 2025 end
  return nil, nil
end

-- ep_overlap_pairs(s) -> whether a string names an EP overlap made of a forward and a
-- backward of two micro-batches (Megatron-Core's 1F1B A2A overlap, DualPipe).
function M.ep_overlap_pairs(s)
  s = tostring(s or ""):lower()
  return (s:find("a2a[%s%-_]*overlap") or s:find("ep[%s%-_]*overlap") or s:find("overlap_moe_expert")
    or s:find("dualpipe")) ~= nil
end

-- ep_overlap(s) -> whether a framework or recompute string names EP communication overlap:
-- one made of such pairs, or a serving engine's two-batch overlap (which pairs two forwards).
function M.ep_overlap(s)
  return M.ep_overlap_pairs(s) or tostring(s or ""):lower():find("batch[%s%-_]*overlap") ~= nil
end

-- grouped_expert_kernel(s) -> whether a string names one grouped kernel for the experts:
-- Transformer Engine's fused grouped MLP (the CuTe DSL kernel Megatron-Bridge's recipes turn
-- on with NVTE_CUTEDSL_FUSED_GROUPED_MLP from the 26.06 release on) or PyTorch's grouped_mm.
function M.grouped_expert_kernel(s)
  s = tostring(s or ""):lower()
  return (s:find("fused[%s%-_]*grouped[%s%-_]*mlp") or s:find("cutedsl") or s:find("grouped_mm")) ~= nil
end

-- ep_per_node(s) -> whether a string names a per-node-forwarding EP dispatcher.
function M.ep_per_node(s)
  s = tostring(s or ""):lower()
  return (s:find("deepep") or s:find("hybridep") or s:find("flex[%s%-_]*dispatch")) ~= nil
end

-- ep_comm_units(s, fw) -> the SMs the EP dispatch and combine kernels a kernels string names
-- hold while they run (the core's ep_comm_units): an "(N SMs)" the string states, else
-- HybridEP's under the framework's recipes (fw.hybridep_sms: Megatron-Bridge's performance
-- recipes set moe_hybridep_num_sms = 32, scripts/performance/utils/overrides.py), else DeepEP's
-- default, 20 (its Buffer's num_sms; DeepSeek-AI 2024 Sec. 3.2.2 dedicates 20 of an H800's
-- 132), also where the framework itself dispatches with DeepEP (fw.ep_dispatch_per_node); nil
-- when neither names one.
local DEEPEP_SMS = 20
function M.ep_comm_units(s, fw)
  s = tostring(s or ""):lower()
  local hybrid, deep = s:find("hybridep") ~= nil, s:find("deepep") ~= nil
  if not (hybrid or deep) then return fw and fw.ep_dispatch_per_node and DEEPEP_SMS or nil end
  local n = tonumber(s:match("(%d+)%s*sms%f[%A]"))
  if n and n >= 1 and n <= 4096 then return n end
  if hybrid and fw and fw.hybridep_sms then return fw.hybridep_sms end
  return DEEPEP_SMS
end

-- cuda_graph_scope(s) -> the CUDA-graph scope a kernels or notes string states (fth_host.h's
-- names), {} when it says none, nil when it says nothing: "CUDA graphs full_iteration",
-- "full-iteration CUDA graph", FULL_CUDA_GRAPH=1 -> full_iteration; "scope ['attn',
-- 'moe_router', 'moe_preprocess']" -> those; per-layer graphs (LAYER_CUDA_GRAPH=1, "CUDA graphs:
-- partial", or a plain "yes": NeMo's enable_cuda_graph, MCORE_CUDA_GRAPH) -> attn and mlp (a
-- dropless MoE layer cannot be captured);
-- "CUDA graphs: no", CUDA_GRAPH=0 -> {}.
function M.cuda_graph_scope(s)
  s = tostring(s or ""):lower()
  if not s:find("cuda[%s%-_]*graph") then return nil end
  if s:find("full[%s%-_]*iter") or s:find("full_cuda_graph%s*=%s*1") or s:find("full_cuda_graph%s*=%s*true") then
    return { "full_iteration" }
  end
  local list = s:match("scope%s*(%b[])")
  if list then
    local out = {}
    for _, n in ipairs(names.cuda_graph_scope) do
      if list:find("'" .. n .. "'", 1, true) or list:find('"' .. n .. '"', 1, true) then out[#out + 1] = n end
    end
    return out
  end
  if s:find("layer_cuda_graph%s*=%s*1") or s:find("per%-layer") or s:find("cuda graphs:%s*partial")
    or s:find("cuda graphs:%s*yes") then
    return { "attn", "mlp" }
  end
  if s:find("cuda graphs:%s*no") or s:find("cuda_graph%s*=%s*0") or s:find("cuda_graph%s*=%s*false") then
    return {}
  end
  return nil
end

-- megatron_split(layers, pp, vpp) -> the layers of the first and of the last GPU of a
-- Megatron-Core pipeline whose PP x vpp chunks do not divide the layers, where the core's even
-- split does not already cut it so, or nil. Megatron-Core cuts whole chunks; a run that does
-- not divide used one of its ways out. Where L + 2 (L + 1) divides it counted the embedding
-- and the loss (the loss) as layers (account_for_embedding/loss_in_pipeline_split, as
-- Megatron-Bridge's Llama 3.1 405B and Qwen3-235B recipes set them): the first and last GPU
-- one layer short, which is the core's even split (fth_layout.c): nil. Else a pipeline
-- layout; Megatron-Bridge's DeepSeek-V3 and Kimi K2 layouts (recipes/deepseek,
-- "Et*4|(tttt|)*14tmL") give every chunk ceil(L / chunks) layers and the last the rest, with
-- the MTP layers and the loss: that one.
function M.megatron_split(layers, pp, vpp)
  local v = vpp or 1
  local chunks = pp * v
  if pp < 2 or layers % chunks == 0 or (layers + 2) % chunks == 0 or (layers + 1) % chunks == 0 then
    return nil
  end
  local per = (layers + chunks - 1) // chunks
  local rest = layers - (chunks - 1) * per
  if rest < 1 then return nil end
  return v * per, (v - 1) * per + rest
end

-- lookup(name) -> a row with every field set (base values where the row is silent).
function M.lookup(name)
  local s = tostring(name or ""):lower()
  local v, year = M.version(name)
  local row
  for _, r in ipairs(M.rows) do
    if s:find(r.pattern) and not (r.exclude and s:find(r.exclude)) and not (r.also and not s:find(r.also)) then
      local ok = true
      if r.min_version then
        local have
        if r.min_version > 1000 then have = year or (v and 2000 + math.floor(v))
        else have = v or (year and year - 2000) end
        ok = have ~= nil and have >= r.min_version
      end
      if r.max_version then ok = ok and (year == nil or year <= r.max_version) end
      -- a versioned Megatron-LM 2021 row needs an explicit year
      if r.max_version and r.pattern == "megatron%-lm" and year == nil and not s:find("ptd%-p") then ok = false end
      -- a row for an old release (`dated`) needs a year or version that says so
      if r.dated and year == nil then ok = false end
      if ok then row = r break end
    end
  end
  local out = {}
  for k, val in pairs(base) do out[k] = val end
  for k, val in pairs(row or {}) do out[k] = val end
  out.name = row and row.name or "default"
  out.pattern, out.min_version, out.max_version, out.exclude, out.also = nil, nil, nil, nil, nil
  local te25 = row and row.fused_mla_blackwell_from
  out.blackwell_mla_fused = not (te25 and v and v < te25)
  out.fused_mla_blackwell_from = nil
  if s:find("compile") then
    out.eager_elementwise = false
    if out.cast_kernels == "eager" then out.cast_kernels = "compiled" end
  end
  if s:find("async[%s%-_]?tp") then out.tp_comm_overlap = true end
  if M.ep_overlap(s) then out.ep_comm_overlap = true end
  if M.ep_overlap_pairs(s) then out.ep_overlap_pairs = true end
  if M.ep_per_node(s) then out.ep_dispatch_per_node = true end
  if M.grouped_expert_kernel(s) then out.grouped_expert_kernel = true end
  return out
end

-- fused_attention(row, generation, model) -> whether a training run's attention core is fused
-- (FlashAttention-class), and a note when the release's kernels leave it unfused: the row's
-- flash_attention, except MLA on Blackwell (a generation named "blackwell...") in a release
-- before fused_mla_blackwell_from, whose query/key and value widths differ and pass 128.
local BLACKWELL_FUSED_HEAD_MAX = 128
function M.fused_attention(row, generation, model)
  if not row.flash_attention then return false end
  if row.blackwell_mla_fused or not tostring(generation or ""):find("^blackwell") then return true end
  local dv = model.v_head_dim or 0
  local dqk = (model.qk_nope_head_dim or 0) + (model.qk_rope_head_dim or 0)
  if dv == 0 or dqk == dv or (dqk <= BLACKWELL_FUSED_HEAD_MAX and dv <= BLACKWELL_FUSED_HEAD_MAX) then
    return true
  end
  return false, string.format("attention unfused: %s's Transformer Engine (before 2.5) trains no fused "
    .. "attention on Blackwell for MLA's %d/%d-wide heads", row.name, dqk, dv)
end

-- workload_defaults(name, pass) -> the workload-spec fields a framework implies.
function M.workload_defaults(name, pass)
  local f = M.lookup(name)
  local w = {
    flash_attention = f.flash_attention, comp_comm_efficiency = f.comp_comm_efficiency,
    comp_mem_efficiency = f.comp_mem_efficiency, comm_mem_efficiency = f.comm_mem_efficiency,
    kernel_launch_sec = f.kernel_launch_sec,
  }
  if pass == "prefill" or pass == "decode" then w.decode_kv_reread = f.decode_kv_reread end
  if pass == nil or pass == "training" then
    w.recompute = f.recompute
    w.gradient_float_size = f.grad_bytes
    w.eager_elementwise = f.eager_elementwise
    w.host_op_sec = f.host_op_sec
    w.attention_sink_rate_share = f.attention_sink_rate_share
    w.cast_kernels = f.cast_kernels
    w.tp_comm_overlap = f.tp_comm_overlap
    w.tp_overlap_backward_rs = f.tp_overlap_backward_rs
    w.ep_comm_overlap = f.ep_comm_overlap
    w.ep_overlap_pairs = f.ep_overlap_pairs
    w.ep_dispatch_per_node = f.ep_dispatch_per_node
    w.grouped_expert_kernel = f.grouped_expert_kernel
    w.dp_spec = { variant = f.dp_variant }
    if f.pp_schedule ~= base.pp_schedule then w.pp_spec = { variant = f.pp_schedule } end
  end
  return w
end

-- lists(row, field, recipe) -> whether the recipe list `field` of a framework row names `recipe`
local function lists(row, field, recipe)
  for _, r in ipairs(row and row[field] or {}) do
    if r == recipe then return true end
  end
  return false
end

-- holds_fp8_params(row, recipe) -> whether a framework row (lookup's) holds the weights as
-- FP8 parameters under the precision recipe `recipe` (its fp8_param_recipes)
function M.holds_fp8_params(row, recipe)
  return lists(row, "fp8_param_recipes", recipe)
end

-- gathers_quantized(row, recipe) -> whether a framework row (lookup's) all-gathers the
-- quantised tensor in front of its linears under `recipe` (its tp_gather_recipes), or nil
-- where the row leaves it to the core's default (every recipe)
function M.gathers_quantized(row, recipe)
  if not (row and row.tp_gather_recipes) then return nil end
  return lists(row, "tp_gather_recipes", recipe)
end

-- apply(doc, pass) -> doc with every key the framework implies and the spec leaves unset
-- filled in (in place: the keys the user wrote keep their file positions).
function M.apply(doc, pass)
  for k, v in pairs(M.workload_defaults(doc.framework, pass)) do
    if doc[k] == nil then doc[k] = v end
  end
  -- FP8 parameters where the framework holds them under the spec's precision_recipe
  if (pass == nil or pass == "training") and doc.fp8_param_gather == nil
    and M.holds_fp8_params(M.lookup(doc.framework), doc.precision_recipe) then
    doc.fp8_param_gather = true
  end
  -- FP8 dispatch under an FP8 recipe (its elements a byte plus a scale's share; FP4's are
  -- under one) where the framework sends it so
  local width = require("fathom.core").recipe_element_bytes[doc.precision_recipe or "none"]
  if (pass == nil or pass == "training") and doc.moe_dispatch_float_size_bytes == nil
    and M.lookup(doc.framework).fp8_dispatch and width and width >= 1 then
    doc.moe_dispatch_float_size_bytes = 1
  end
  -- a serving engine's own all-reduce, inside the spec's collective table (keys it leaves unset)
  local ar = M.lookup(doc.framework).engine_allreduce
  if (pass == "prefill" or pass == "decode") and ar and (doc.collective == nil or type(doc.collective) == "table") then
    local c = {}
    for k, v in pairs(doc.collective or {}) do c[k] = v end
    for k, v in pairs(ar) do
      if c[k] == nil then c[k] = v end
    end
    -- the user's keys keep their file positions in error messages
    if type(doc.collective) == "table" then require("fathom.errors").copy_origin(doc.collective, c) end
    doc.collective = c
  end
  if (pass == nil or pass == "training") and doc.tp_gather_quantized == nil then
    doc.tp_gather_quantized = M.gathers_quantized(M.lookup(doc.framework), doc.precision_recipe)
  end
  return doc
end

return M
