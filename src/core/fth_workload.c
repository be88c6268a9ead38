/* fth_workload.c: the training workload's defaults and checks (fth_workload.h). */
#include "fth_workload.h"

#include "fth_host.h"

#include <math.h>
#include <string.h>

fth_train_def fth_train_def_default(void) {
  fth_train_def d;
  memset(&d, 0, sizeof d);
  d.global_batch = 1;
  d.micro_batch = 1;
  d.seq_len = 2048;
  d.act_bytes = 2;
  d.master_bytes = 4;
  d.grad_bytes = 0;
  d.dp = FTH_DP_DDP;
  d.pp = FTH_PP_1F1B;
  d.virtual_stages = 1;
  d.recompute = FTH_RECOMPUTE_NONE;
  d.sequence_parallel = 0;
  d.tp_comm_overlap = 1;
  d.tp_overlap_backward_rs = 1;
  d.tp_gather_quantized = 1;
  d.ep_comm_overlap = 1;
  d.ep_overlap_pairs = 0;
  d.ep_dispatch_per_node = 0;
  d.grouped_expert_kernel = 0;
  d.zero3_microbatches_per_gather = 1;
  d.flash_attention = 1;
  d.expert_imbalance = 1.0;
  d.comp_comm_eff = 0.0;
  d.dp_comm_compute_share = FTH_DP_COMM_COMPUTE_SHARE;
  d.ep_a2a_scale_out_eff = FTH_EP_A2A_SCALE_OUT_EFF;
  d.comp_mem_eff = 1.0;
  d.comm_mem_eff = 0.0;
  for (int i = 0; i < FTH_MEM_COMPONENT_COUNT; i++) {
    d.traffic_tier[i] = FTH_TIER_XPU;
    d.footprint_tier[i] = FTH_TIER_XPU;
  }
  d.coll = fth_coll_params_default();
  d.kernel_model = FTH_KERNEL_TILED; /* falls back to the roofline without compute_units */
  d.reserve = fth_mem_reserve_default();
  return d;
}

static int is_int(double x) {
  return isfinite(x) && x == floor(x);
}

fth_status fth_exec_check(double act_bytes, double expert_imbalance, const double effs[3],
                          const fth_coll_params *coll, double kernel_launch_s, fth_error *err) {
  if (!(act_bytes == 1 || act_bytes == 2 || act_bytes == 4))
    return fth_fail(err, FTH_EINVAL, "float_size_bytes", "expected 1, 2 or 4, got %g", act_bytes);
  if (!(isfinite(expert_imbalance) && expert_imbalance >= 1.0))
    return fth_fail(err, FTH_EINVAL, "moe_spec_v2.expert_imbalance", "expected >= 1, got %g",
                    expert_imbalance);
  const char *names[3] = {"comp_comm_efficiency", "comp_mem_efficiency", "comm_mem_efficiency"};
  for (int i = 0; i < 3; i++)
    if (!(effs[i] >= 0.0 && effs[i] <= 1.0))
      return fth_fail(err, FTH_EINVAL, names[i], "expected a value in [0, 1], got %g", effs[i]);
  if (!(coll->per_peer_overhead_s >= 0 && coll->launch_s >= 0 && kernel_launch_s >= 0))
    return fth_fail(err, FTH_EINVAL, "overheads", "expected >= 0");
  if (!(coll->engine_allreduce_s >= 0 && isfinite(coll->engine_allreduce_s)))
    return fth_fail(err, FTH_EINVAL, "collective.engine_allreduce_latency_sec",
                    "expected a finite value >= 0, got %g", coll->engine_allreduce_s);
  if (!(coll->engine_allreduce_max_bytes >= 0 && isfinite(coll->engine_allreduce_max_bytes)))
    return fth_fail(err, FTH_EINVAL, "collective.engine_allreduce_max_bytes",
                    "expected a finite value >= 0 (0 = any size), got %g",
                    coll->engine_allreduce_max_bytes);
  return FTH_OK;
}

fth_status fth_train_def_check(const fth_train_def *w, fth_error *err) {
  if (!(fth_positive(w->global_batch) && is_int(w->global_batch)))
    return fth_fail(err, FTH_EINVAL, "global_batch_size", "expected a positive integer, got %g",
                    w->global_batch);
  if (!(fth_positive(w->micro_batch) && is_int(w->micro_batch)))
    return fth_fail(err, FTH_EINVAL, "micro_batch_size", "expected a positive integer, got %g",
                    w->micro_batch);
  if (!(fth_positive(w->seq_len) && is_int(w->seq_len)))
    return fth_fail(err, FTH_EINVAL, "seq_length", "expected a positive integer, got %g",
                    w->seq_len);
  if (!(isfinite(w->total_train_tokens) && w->total_train_tokens >= 0))
    return fth_fail(err, FTH_EINVAL, "total_train_tokens", "expected >= 0, got %g",
                    w->total_train_tokens);
  const double effs[3] = {w->comp_comm_eff, w->comp_mem_eff, w->comm_mem_eff};
  if (fth_exec_check(w->act_bytes, w->expert_imbalance, effs, &w->coll, w->kernel_launch_s, err) !=
      FTH_OK)
    return err->status;
  if (!(w->master_bytes == 2 || w->master_bytes == 4))
    return fth_fail(err, FTH_EINVAL, "full_precision_param_float_size", "expected 2 or 4, got %g",
                    w->master_bytes);
  if (!(w->grad_bytes == 0 || w->grad_bytes == 2 || w->grad_bytes == 4))
    return fth_fail(err, FTH_EINVAL, "gradient_float_size", "expected 2 or 4, got %g",
                    w->grad_bytes);
  if (w->dp < 0 || w->dp >= FTH_DP_COUNT)
    return fth_fail(err, FTH_EINVAL, "dp_spec.variant", "unknown variant");
  if (w->pp < 0 || w->pp >= FTH_PP_COUNT)
    return fth_fail(err, FTH_EINVAL, "pp_spec.variant", "unknown variant");
  if (w->cp_comm < 0 || w->cp_comm >= FTH_CP_COMM_COUNT)
    return fth_fail(err, FTH_EINVAL, "cp_comm", "unknown context-parallel exchange");
  if (w->zero3_microbatches_per_gather < 1)
    return fth_fail(err, FTH_EINVAL, "dp_spec.zero3_microbatches_per_gather",
                    "expected >= 1, got %d", w->zero3_microbatches_per_gather);
  if (w->op_keep && w->recompute != FTH_RECOMPUTE_OP)
    return fth_fail(err, FTH_EINVAL, "recompute_saved",
                    "names what per-op recomputation keeps: needs recompute op, got %s",
                    fth_recompute_name(w->recompute));
  if (w->virtual_stages < 1)
    return fth_fail(err, FTH_EINVAL, "pp_spec.virtual_stages", "expected >= 1, got %d",
                    w->virtual_stages);
  if (w->pp_microbatches_per_run < 0)
    return fth_fail(err, FTH_EINVAL, "pp_spec.microbatches_per_run", "expected >= 0, got %d",
                    w->pp_microbatches_per_run);
  if (w->pp_first_layers < 0)
    return fth_fail(err, FTH_EINVAL, "pp_spec.num_layers_in_first_pipeline_stage",
                    "expected >= 0 (0: the even split), got %d", w->pp_first_layers);
  if (w->pp_last_layers < 0)
    return fth_fail(err, FTH_EINVAL, "pp_spec.num_layers_in_last_pipeline_stage",
                    "expected >= 0 (0: the even split), got %d", w->pp_last_layers);
  if (w->virtual_stages > 1 && !fth_schedule_get(w->pp)->interleaved)
    return fth_fail(err, FTH_EINVAL, "pp_spec.virtual_stages",
                    "virtual stages need an interleaved pp_spec.variant (%s), got %s",
                    fth_pp_schedule_name(FTH_PP_INTERLEAVED), fth_pp_schedule_name(w->pp));
  if (!(w->host_op_s >= 0 && w->host_op_s <= FTH_HOST_OP_MAX_S))
    return fth_fail(err, FTH_EINVAL, "host_op_sec",
                    "expected seconds per host operator in [0, %g], got %g", FTH_HOST_OP_MAX_S,
                    w->host_op_s);
  if (w->cuda_graph_scope >> FTH_GRAPH_SCOPE_COUNT)
    return fth_fail(err, FTH_EINVAL, "cuda_graph_scope", "unknown scope bits 0x%x",
                    w->cuda_graph_scope);
  if (w->eager_elementwise != 0 && w->eager_elementwise != 1)
    return fth_fail(err, FTH_EINVAL, "eager_elementwise", "expected 0 or 1, got %d",
                    w->eager_elementwise);
  if (w->recompute < FTH_RECOMPUTE_NONE || w->recompute >= FTH_RECOMPUTE_COUNT)
    return fth_fail(err, FTH_EINVAL, "recompute", "unknown mode");
  if (w->recompute_modules & ~(unsigned)FTH_RECOMPUTE_MOD_ALL)
    return fth_fail(err, FTH_EINVAL, "recompute_modules", "unknown module bits 0x%x",
                    w->recompute_modules);
  if (w->recompute_modules &&
      !(w->recompute == FTH_RECOMPUTE_NONE || w->recompute == FTH_RECOMPUTE_SELECTIVE))
    return fth_fail(err, FTH_EINVAL, "recompute_modules",
                    "modules are re-run on top of recompute none or selective, not %s",
                    fth_recompute_name(w->recompute));
  if (w->activation_offload_layers < 0)
    return fth_fail(err, FTH_EINVAL, "activation_offload_layers",
                    "expected blocks per stage >= 0 (0: none), got %d", w->activation_offload_layers);
  if (w->recompute_num_layers < 0)
    return fth_fail(err, FTH_EINVAL, "recompute_num_layers",
                    "expected blocks per stage >= 0 (0: every block), got %d",
                    w->recompute_num_layers);
  if (w->recompute_num_layers > 0 && w->recompute != FTH_RECOMPUTE_FULL)
    return fth_fail(err, FTH_EINVAL, "recompute_num_layers",
                    "a block count applies to recompute full (Megatron's block method), not %s",
                    fth_recompute_name(w->recompute));
  if (w->lora_targets < FTH_LORA_ALL_LINEAR || w->lora_targets >= FTH_LORA_TARGETS_COUNT)
    return fth_fail(err, FTH_EINVAL, "lora_targets", "unknown targets");
  if (w->attention_fp8 != 0 && w->attention_fp8 != 1)
    return fth_fail(err, FTH_EINVAL, "attention_fp8", "expected 0 or 1, got %d", w->attention_fp8);
  if (w->attention_fp8 && w->recipe == FTH_RECIPE_NONE)
    return fth_fail(err, FTH_EINVAL, "attention_fp8",
                    "FP8 attention runs under an FP8 precision_recipe (none set)");
  if (w->bf16_layers_start < 0 || w->bf16_layers_end < 0)
    return fth_fail(err, FTH_EINVAL,
                    w->bf16_layers_start < 0 ? "num_layers_at_start_in_bf16" : "num_layers_at_end_in_bf16",
                    "expected layers >= 0, got %d",
                    w->bf16_layers_start < 0 ? w->bf16_layers_start : w->bf16_layers_end);
  if ((w->bf16_layers_start > 0 || w->bf16_layers_end > 0) && w->recipe == FTH_RECIPE_NONE)
    return fth_fail(err, FTH_EINVAL,
                    w->bf16_layers_start > 0 ? "num_layers_at_start_in_bf16" : "num_layers_at_end_in_bf16",
                    "BF16 layers are the exception to a precision_recipe (none set)");
  if (w->tp_gather_quantized != 0 && w->tp_gather_quantized != 1)
    return fth_fail(err, FTH_EINVAL, "tp_gather_quantized", "expected 0 or 1, got %d",
                    w->tp_gather_quantized);
  if (w->activation_input_fp8 != 0 && w->activation_input_fp8 != 1)
    return fth_fail(err, FTH_EINVAL, "activation_input_fp8", "expected 0 or 1, got %d",
                    w->activation_input_fp8);
  if (w->recipe < FTH_RECIPE_NONE || w->recipe >= FTH_RECIPE_COUNT)
    return fth_fail(err, FTH_EINVAL, "precision_recipe", "unknown recipe");
  if (!(w->lora_rank >= 0 && w->lora_rank <= 65536 && w->lora_rank == floor(w->lora_rank)))
    return fth_fail(err, FTH_EINVAL, "lora_rank", "expected a whole rank in [0, 65536], got %g",
                    w->lora_rank);
  if (w->cast_kernels < FTH_CAST_FUSED || w->cast_kernels >= FTH_CAST_KERNELS_COUNT)
    return fth_fail(err, FTH_EINVAL, "cast_kernels", "unknown cast kernels");
  if (w->recipe != FTH_RECIPE_NONE && w->act_bytes < 2)
    return fth_fail(err, FTH_EINVAL, "precision_recipe",
                    "%s casts wider activations for its GEMMs, but float_size_bytes is %g "
                    "(set float_size_bytes 2: activations in BF16)",
                    fth_recipe_name(w->recipe), w->act_bytes);
  if (!(w->dp_comm_compute_share >= 0 && w->dp_comm_compute_share < 1))
    return fth_fail(err, FTH_EINVAL, "dp_comm_compute_fraction", "expected a value in [0, 1), got %g",
                    w->dp_comm_compute_share);
  if (!(w->ep_a2a_scale_out_eff > 0 && w->ep_a2a_scale_out_eff <= 1))
    return fth_fail(err, FTH_EINVAL, "ep_a2a_scale_out_efficiency", "expected a value in (0, 1], got %g",
                    w->ep_a2a_scale_out_eff);
  if (!(w->attention_sink_rate_share >= 0 && w->attention_sink_rate_share <= 1))
    return fth_fail(err, FTH_EINVAL, "attention_sink_rate_share", "expected a share in [0, 1], got %g",
                    w->attention_sink_rate_share);
  if (!(w->ep_comm_units >= 0 && w->ep_comm_units <= 4096))
    return fth_fail(err, FTH_EINVAL, "ep_comm_compute_units", "expected a count in [0, 4096], got %g",
                    w->ep_comm_units);
  if (!(w->moe_comm_compute_share >= 0 && w->moe_comm_compute_share < 1))
    return fth_fail(err, FTH_EINVAL, "moe_comm_compute_fraction", "expected a value in [0, 1), got %g",
                    w->moe_comm_compute_share);
  if (!(w->moe_dispatch_bytes == 0 || w->moe_dispatch_bytes == 1 || w->moe_dispatch_bytes == 2 ||
        w->moe_dispatch_bytes == 4))
    return fth_fail(err, FTH_EINVAL, "moe_dispatch_float_size_bytes", "expected 1, 2 or 4, got %g",
                    w->moe_dispatch_bytes);
  if (!(w->ep_dispatch_override_s >= 0 && w->ep_dispatch_override_s < HUGE_VAL))
    return fth_fail(err, FTH_EINVAL, "ep_dispatch_sec", "expected seconds >= 0, got %g",
                    w->ep_dispatch_override_s);
  if (!(w->ep_combine_override_s >= 0 && w->ep_combine_override_s < HUGE_VAL))
    return fth_fail(err, FTH_EINVAL, "ep_combine_sec", "expected seconds >= 0, got %g",
                    w->ep_combine_override_s);
  if (!(w->moe_redundant_experts >= 0 && w->moe_redundant_experts <= 65536 &&
        w->moe_redundant_experts == floor(w->moe_redundant_experts)))
    return fth_fail(err, FTH_EINVAL, "moe_redundant_experts",
                    "expected a whole number of expert slots in [0, 65536], got %g",
                    w->moe_redundant_experts);
  return fth_mem_reserve_check(&w->reserve, w->footprint_tier, err);
}
