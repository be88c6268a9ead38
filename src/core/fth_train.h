/* fth_train.h: one training step of a transformer on a cluster, per
 * accelerator: compute, memory traffic, every communication with what of it
 * is hidden and what is exposed, the pipeline bubble, the optimizer, the
 * memory footprint per tier, and run totals (time to train, MFU, HFU).
 *
 * Compile once (fth_train_compile: checks and derived constants, no
 * allocation), evaluate many (fth_train_evaluate: pure, no allocation).
 *
 * Overlap efficiencies (ScaleScope's three knobs), applied explicitly through
 * one rule, overlap(a, b, e) = a + b - e min(a, b): e = 1 is perfect overlap
 * (max), e = 0 none (sum).
 *   comp_mem_efficiency   inside each kernel: its compute and memory times
 *   comp_comm_efficiency  a layer's TP/EP/CP collectives against its kernels;
 *                         DP/ZeRO traffic against the backward (or forward) it
 *                         runs under; PP sends against the stage's work
 *   comm_mem_efficiency   how much of a memory-bound kernel's time can still
 *                         hide background (DP) communication */
#ifndef FTH_TRAIN_H
#define FTH_TRAIN_H

#include "fth_block.h"
#include "fth_collective.h"
#include "fth_common.h"
#include "fth_footprint.h"
#include "fth_hardware.h"
#include "fth_kernel.h"
#include "fth_layout.h"
#include "fth_model.h"
#include "fth_phase.h"
#include "fth_recipe.h"
#include "fth_schedule.h"
#include "fth_topology.h"
#include "fth_workload.h"
#include "fth_zero.h"



/// One kind of communication over a step, on one GPU.
typedef struct fth_comm_item {
  fth_coll_op op;        ///< main collective of this kind
  fth_coll_algo algo;    ///< algorithm the cost model chose
  int group_size;        ///< GPUs in the group (1 = no communication)
  int phys_dim;          ///< physical dimension of the innermost level (-1 if none)
  int num_levels;        ///< physical dimensions the group spans
  double bytes_per_call; ///< per the byte convention of fth_collective.h
  double calls_per_step;
  double bytes_per_step; ///< every collective of the kind (ZeRO: also the weight gathers)
  double raw_s;          ///< time per step if nothing overlapped
  double hidden_s;       ///< of raw_s, hidden under compute / memory
  double exposed_s;      ///< of raw_s, on the critical path
} fth_comm_item;

/// What a plan's per-token activations were last taken for (the workload's and layout's
/// inputs they read; the model is the compile's) and their values: a rework with the same
/// inputs keeps them (a search reworks one placement for every micro-batch, schedule and
/// offload).
typedef struct fth_act_memo {
  int valid; ///< 0: nothing taken since the compile
  int tp, tp_moe, cp, sp, flash, attention_fp8, activation_input_fp8;
  int recipe, lora_targets;
  unsigned modules;
  unsigned op_keep;
  double seq_len, act_bytes, expert_imbalance, lora_rank;
  int have[FTH_RECOMPUTE_COUNT]; ///< saved[rc] taken for these inputs
  double saved[FTH_RECOMPUTE_COUNT][2];
  double full; ///< a whole block's activations per token (act_full_per_token)
} fth_act_memo;

/// A compiled training scenario: the inputs, validated, and what is fixed by them.
typedef struct fth_train_plan {
  fth_node_def node;
  fth_topology_def topo;
  fth_model_def model;
  fth_train_def work;
  fth_layout layout;   ///< degrees, groups, stage split, shapes, parameters per stage
  double microbatches; ///< per DP rank per step
  fth_precision prec;  ///< of the compute kernels
  double fwd_flops_per_token;     ///< model forward FLOPs per token at seq_len (MFU's numerator)
  double lm_head_flops_per_token; ///< of which the LM head
  double attn_core_flops_per_token; ///< of which the blocks' attention cores (QK^T, PV)
  double op_recompute_flops_per_token; ///< GEMM FLOPs per-op recomputation re-runs, all blocks
  double per_token_seq_len; ///< the seq_len the four above were taken at (0: not yet): a
                            ///< rework at the same length keeps them (the model is the compile's)
  unsigned per_token_op_keep; ///< and the per-op policy the recomputed FLOPs were taken under
  double module_recompute_flops_per_token; ///< MLA up-projections re-run by recompute modules
  fth_act_memo act_memo; ///< the per-token activations' inputs and values (fth_train.c)
  double act_bytes_per_token[2];  ///< saved activations per token of a dense / MoE block
  double act_kept_per_token[2];   ///< the same for a block recompute_num_layers leaves stored
  double act_full_per_token;      ///< a whole block's, live while it is recomputed
  double stage_lora_params;       ///< LoRA adapter parameters one GPU of the busiest stage holds
  double lora_flops_per_token;    ///< forward FLOPs of every adapter per token (model FLOPs)
} fth_train_plan;

/// Validate everything and derive the plan. Failure paths are prefixed by the
/// input they belong to: "hardware.", "topology.", "model.", "workload.".
/// When only the workload is refused, plan->layout is usable (num_gpus > 0)
/// and fth_train_rework can try another workload on it.
fth_status fth_train_compile(fth_train_plan *plan, const fth_node_def *node,
                             const fth_topology_def *topo, const fth_model_def *model,
                             const fth_train_def *work, fth_error *err);

/// Swap the workload of a compiled plan (same hardware, topology and model):
/// what a search does for every batch / recompute / schedule variant without
/// recompiling. Same checks as compile for the workload's part; sizes that do
/// not tile (layers, batch, sequence) fail with FTH_ETILE.
fth_status fth_train_rework(fth_train_plan *plan, const fth_train_def *work, fth_error *err);

/// Re-derive the links' shares by traffic for the plan's workload: the last
/// step of fth_train_rework (nothing when the topology does not share links
/// by traffic). Only the groups' bandwidths change (not their sizes), so a
/// search may rework with plan->topo.share_by_traffic = 0, check the memory
/// footprint, and regroup (sharing restored) only what it times.
void fth_train_regroup(fth_train_plan *plan);

/// Exposed seconds of a data-parallel collective of `total` seconds split over the
/// `v` model chunks a GPU holds, each hidden under the passes after it: Megatron-Core
/// buckets each chunk's parameters apart, so a chunk's gradients reduce once its last
/// backward is done (its weights gather before its first forward), and under an
/// interleaved schedule the chunks are ready `spacing` chunk-passes apart (PP: the
/// micro-batches run through a chunk in groups of PP; Narayanan et al. 2021, Sec. 2.2).
/// `window`: the seconds of one micro-batch's pass that can hide traffic. v = 1:
/// max(0, total - window), the last micro-batch's backward (or first forward) alone.
double fth_train_dp_exposed_s(double total, double window, double v, double spacing);

typedef struct fth_train_result {
  /* time per step, per GPU, on the critical path */
  double step_time_s;
  double fwd_s, bwd_s;     ///< per micro-batch on the slowest stage, incl. exposed layer comm
  double compute_s;        ///< kernels' compute-bound time over the step (all micro-batches)
  double memory_exposed_s; ///< kernels' memory time not hidden under compute
  double recompute_s;      ///< forward re-run inside backward
  double host_wait_s;      ///< GPU idle waiting on the host issuing operators (fth_host.h)
  double bubble_s;
  double optimizer_s;
  double exposed_comm_s;    ///< sum of comm[].exposed_s
  double offload_raw_s;     ///< activations and gradients to and from an offload tier, per step
  double offload_exposed_s; ///< of which on the critical path
  double dp_interference_s; ///< compute the hidden data-parallel collectives displace
  double busy_s;            ///< microbatches x (fwd + bwd)
  fth_comm_item comm[FTH_COMM_KIND_COUNT];
  /* work per micro-batch per GPU on the slowest stage */
  double fwd_flops[FTH_FLOP_PART_COUNT], bwd_flops[FTH_FLOP_PART_COUNT];
  double fwd_compute_s[FTH_FLOP_PART_COUNT], bwd_compute_s[FTH_FLOP_PART_COUNT];
  double fwd_bytes[FTH_FLOP_PART_COUNT], bwd_bytes[FTH_FLOP_PART_COUNT];
  double fwd_memory_s[FTH_FLOP_PART_COUNT], bwd_memory_s[FTH_FLOP_PART_COUNT];
  double fwd_kernel_s, bwd_kernel_s; ///< kernels only (compute/memory overlapped), per micro-batch
  /// the same by kind of kernel (fth_kernel_class); bwd includes the recomputation
  double fwd_class_s[FTH_KERNEL_CLASS_COUNT], bwd_class_s[FTH_KERNEL_CLASS_COUNT];
  /* memory */
  fth_memory_footprint mem;
  double params_per_gpu; ///< parameters held (before ZeRO-3 sharding)
  /* run totals */
  double microbatches, bubble_fraction;
  /// share of the slowest stage's passes run in forward-backward pairs that hide their
  /// layer collectives (DualPipe; an EP overlap made of pairs): 0 when none are
  double paired_share;
  double tokens_per_step, steps, total_time_s, tokens_per_s;
  double model_flops_per_step;    ///< 6 N_active-style useful FLOPs, whole system (fwd + bwd)
  double hardware_flops_per_step; ///< incl. recomputation
  double mfu, hfu; ///< vs. nominal peak at the GEMMs' precision (a recipe's, else the activations')
  double achieved_flops_per_gpu;  ///< model FLOP/s per GPU
} fth_train_result;

/// Parameters (elements) one GPU of the busiest stage holds, split into the
/// dense part (sharded by TP; embedding or LM head included) and the experts
/// (E / EP local experts sharded by TP_MoE), before any ZeRO-3 sharding.
void fth_train_stage_params(const fth_train_plan *plan, double *dense, double *expert);

/// The work of one micro-batch as an execution trace lays it out (fth_trace):
/// each block kind's passes and the pipeline hand-off, from the functions the
/// step model times them with, so a trace and the step model cannot disagree.
typedef struct fth_train_work {
  fth_phase fwd[2], bwd[2], rec[2]; ///< one dense [0] / MoE [1] block: forward, backward, re-run
  fth_phase head_fwd, head_bwd;     ///< the last stage's LM head and loss (embedding when PP = 1)
                                    ///< and its MTP modules' own passes
  double pp_bytes;                  ///< one hand-off's message per TP rank (0 when PP = 1)
  double pp_gather_bytes;           ///< the all-gather over TP after receipt (0: none)
  double pp_hop_s;                  ///< one hand-off's time (send/recv and any TP gather)
  double overlap_eff;               ///< layer collectives vs kernels in a pass run alone
  unsigned blocking;                ///< kinds a pass run alone does not overlap (bit 1 << kind)
  double paired_eff;                ///< the same in a forward-backward pair (DualPipe's F&B,
                                    ///< Megatron-Core's 1F1B A2A overlap)
  unsigned paired_blocking;         ///< kinds a paired pass does not overlap
  double paired_share;              ///< share of the passes run in pairs (fth_pp_paired_share,
                                    ///< fth_pp_steady_share)
  double ep_hide_cost;              ///< seconds of computation a second of hidden EP takes when
                                    ///< its kernels hold SMs: f / (1 - f) (0 = comp_comm_eff's)
} fth_train_work;

/// One pass's time under the work's overlap rule: the paired share of it at
/// paired_eff with `paired_blocking` exposed, the rest at overlap_eff with
/// `blocking` exposed (fth_phase_time_blocking); `exposed` receives each kind's
/// exposed seconds.
double fth_train_work_pass_s(const fth_train_work *work, const fth_phase *ph, double *exposed);

/// Fill `out` for the plan. Pure and allocation-free.
void fth_train_trace_work(const fth_train_plan *plan, fth_train_work *out);

/// Blocks of pipeline stage `s` ([0] dense, [1] MoE), the last stage's MTP
/// modules counted as blocks of the last layer's kind (as the step model does).
void fth_train_stage_blocks(const fth_train_plan *plan, int s, int blocks[2]);

/// Evaluate a compiled plan. Pure and allocation-free.
void fth_train_evaluate(const fth_train_plan *plan, fth_train_result *out);

/// The passes of fth_train_evaluate alone: fwd_s, bwd_s, recompute_s, the
/// per-micro-batch FLOPs, bytes and kernel times, comm[] of the layer
/// collectives (TP, EP, CP), microbatches and busy_s, every field as
/// fth_train_evaluate sets it; the rest 0 (no pipeline, DP, optimizer,
/// memory nor offload). What the search's bounds read, at a fraction of an
/// evaluation. Pure and allocation-free.
void fth_train_passes(const fth_train_plan *plan, fth_train_result *out);

/// Memory footprint only (cheap: what a search checks before timing).
void fth_train_footprint(const fth_train_plan *plan, fth_memory_footprint *out);

#endif
