/* fth_phase.h: the work of one pass (forward, backward, a decode step) through
 * some blocks on one GPU: kernels accumulated with their compute and memory
 * times, and the layer collectives they wait on. Shared by the training and
 * inference step models so both cost a block the same way. */
#ifndef FTH_PHASE_H
#define FTH_PHASE_H

#include "fth_collective.h"
#include "fth_kernel.h"
#include "fth_layout.h"
#include "fth_model.h"

/// Parts of the computation reported separately.
typedef enum fth_flop_part {
  FTH_FLOP_ATTENTION = 0, ///< projections + attention core
  FTH_FLOP_MLP,           ///< dense MLP, or routed + shared experts + router
  FTH_FLOP_EMBEDDING,     ///< lookup (no FLOPs; memory only)
  FTH_FLOP_UNEMBEDDING,   ///< LM head + loss
  FTH_FLOP_PART_COUNT
} fth_flop_part;

const char *fth_flop_part_name(fth_flop_part p); ///< "attention", "mlp", "embedding", "unembedding"

/// Kinds of kernel, as a profiler's kernel names split a pass's time (the
/// measured layers' GEMM / attention / other split, validation/measurements).
typedef enum fth_kernel_class {
  FTH_KERNEL_GEMM = 0,  ///< dense and grouped GEMMs: linears, LM head, MLA re-projections
  FTH_KERNEL_ATTENTION, ///< the attention core (fused, or unfused score GEMMs and softmax)
  FTH_KERNEL_OTHER,     ///< element-wise: norms, RoPE, activation, adds, casts, router, loss
  FTH_KERNEL_CLASS_COUNT
} fth_kernel_class;

const char *fth_kernel_class_name(fth_kernel_class c); ///< "gemm", "attention", "other"

typedef struct fth_phase {
  double flops[FTH_FLOP_PART_COUNT];
  double bytes[FTH_FLOP_PART_COUNT];
  double compute_s[FTH_FLOP_PART_COUNT];
  double memory_s[FTH_FLOP_PART_COUNT];
  double kernel_s;                        ///< kernels with compute/memory overlap applied
  double class_s[FTH_KERNEL_CLASS_COUNT]; ///< kernel_s by kind of kernel (sums to kernel_s)
  double compute_bound_s;                 ///< time of kernels limited by compute
  double memory_bound_s;                  ///< time of kernels limited by memory
  double wgrad_s;         ///< of kernel_s, weight-gradient GEMMs (what ZB schedules move)
  double weight_memory_s; ///< of the memory time, reading weights from their tier
  double kv_memory_s;     ///< of the memory time, reading and writing the KV cache
  double comm_s[FTH_COMM_KIND_COUNT];           ///< layer collectives, raw
  double comm_serial_s[FTH_COMM_KIND_COUNT];    ///< of comm_s, what nothing hides (run between)
  double comm_calls[FTH_COMM_KIND_COUNT];       ///< how many collectives of each kind
  double comm_bytes[FTH_COMM_KIND_COUNT];       ///< their bytes, summed over the calls
  fth_coll_op comm_op[FTH_COMM_KIND_COUNT];     ///< the kind's main collective
  fth_coll_algo comm_algo[FTH_COMM_KIND_COUNT]; ///< the algorithm the cost model chose for it
  double host_s; ///< host time issuing the pass's operators (fth_host.h); the pass takes at least this
  /// Of comm_s, what a kind pipelined step by step with its own kernels leaves exposed
  /// (context parallelism's ring: each step waits for the K/V its transfer brings); the
  /// kinds so timed are the bits of `paced` (1 << kind): only this part of theirs meets
  /// the other kernels (fth_phase_time_blocking), the rest is hidden by construction.
  double comm_exposed_s[FTH_COMM_KIND_COUNT];
  unsigned paced;
} fth_phase;

/// What kernels run on and how their compute and memory overlap.
typedef struct fth_phase_ctx {
  fth_kernel_env env;  ///< rates; bandwidth of the activations' tier
  double weight_bw;    ///< bandwidth of the weights' tier (0 = the activations')
  double comp_mem_eff; ///< overlap of a kernel's compute and memory time
  double launch_s;     ///< fixed cost per kernel
  /* A precision recipe (fth_recipe.h) for the linear layers; gemm_bytes 0 = none. */
  fth_kernel_env gemm_env;  ///< rates of the linears' GEMMs at the recipe's precision
  double gemm_bytes;        ///< their operand width
  /// bytes per stored weight element on the recipe path, block scales included (serving a
  /// block-scaled checkpoint: fth_infer_def.recipe); 0 = gemm_bytes
  double gemm_weight_bytes;
  double cast_bytes;        ///< bytes moved per element quantised before a GEMM
  double weight_cast_share; ///< share of the once-per-step weight casts charged per pass
  /// Bytes moved per weight element by re-laying a frozen quantised weight for each
  /// backward pass (a frozen LoRA base held in one layout: fth_recipe_frozen_copies); 0 = none
  double weight_transpose_bytes;
  double lora_rank;              ///< LoRA: base weights frozen (no weight gradients), adapters of
                                 ///< this rank on fth_linear_takes_lora linears; 0 = off
  fth_lora_targets lora_targets; ///< the linears that carry them
  double host_op_s;         ///< host time per operator issued eagerly (fth_host.h); 0 = not modelled
  unsigned graph_scope;     ///< FTH_GRAPH_* parts captured by CUDA graphs (no host time)
  /// Further fixed cost per expert of a grouped GEMM under the recipe (the node's
  /// expert_recipe_s unless a fused grouped kernel runs the experts; 0 without a recipe)
  double expert_recipe_s;
} fth_phase_ctx;

/// overlap(a, b, e) = a + b - e min(a, b): e = 1 perfect overlap (max), e = 0 none (sum).
double fth_overlap(double a, double b, double e);

/// Add kernel `k` to `ph` under `part`; `weight_bytes` of its traffic come from the
/// weights' tier. Its time counts as an element-wise kernel (FTH_KERNEL_OTHER).
void fth_phase_add_kernel(const fth_phase_ctx *c, fth_phase *ph, fth_flop_part part,
                          fth_kernel_cost k, double weight_bytes);
/// The same for a kernel of class `cls` (GEMMs and the attention core say so).
void fth_phase_add_kernel_class(const fth_phase_ctx *c, fth_phase *ph, fth_flop_part part,
                                fth_kernel_class cls, fth_kernel_cost k, double weight_bytes);
/// Add one collective of `kind` taking `time_s` for `bytes`; the first call of
/// a kind names its op and algorithm in the report.
void fth_phase_add_comm(fth_phase *ph, fth_comm_kind kind, fth_coll_op op, fth_coll_algo algo,
                        double bytes, double time_s, double calls);
/// The same for `calls` transfers of a kind pipelined with its own kernels, which leave
/// `exposed_s` of their time exposed in all (the kind becomes paced: fth_phase.comm_exposed_s).
void fth_phase_add_paced_comm(fth_phase *ph, fth_comm_kind kind, fth_coll_op op,
                              fth_coll_algo algo, double bytes, double time_s, double calls,
                              double exposed_s);
void fth_phase_scale(fth_phase *ph, double s);
void fth_phase_add(fth_phase *a, const fth_phase *b);

/// Time on the critical path: kernels overlapped with the layer collectives at
/// `comp_comm_eff`, and never less than the host time issuing them (a host-bound
/// pass: the GPU waits on the host); `exposed[k]` receives each kind's exposed share. A
/// paced kind takes part with its exposed part only (comm_exposed_s).
double fth_phase_time(const fth_phase *ph, double comp_comm_eff, double *exposed);

/// The same with the kinds in `blocking` (bit 1 << kind) run on their own,
/// not overlapped at all: synchronous collectives between the kernels (tensor
/// parallelism without communication overlap), added whole to the time.
double fth_phase_time_blocking(const fth_phase *ph, double comp_comm_eff, unsigned blocking,
                               double *exposed);

/// The linears of one block for `tokens` tokens on one GPU (Megatron sharding,
/// under the ctx's precision recipe: GEMMs at its rate, inputs cast first;
/// Shoeybi et al. 2019: column-parallel splits outputs, row-parallel inputs, by
/// `tp`; experts by `tp_moe`); routed experts see `routed_pairs` (token, expert)
/// pairs spread over `local_experts`. `bwd` (may be NULL) receives the data- and
/// weight-gradient GEMMs. `weight_bytes` is the width of stored weights.
void fth_phase_linears(const fth_phase_ctx *c, const fth_layer_shape *sh, double tokens, double tp,
                       double tp_moe, double routed_pairs, double local_experts, double act_bytes,
                       double weight_bytes, fth_phase *fwd, fth_phase *bwd);

#endif
