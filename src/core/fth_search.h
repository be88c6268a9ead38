/* fth_search.h: evaluate a cross product of parallelism strategies for one
 * model on one system, memory first, keeping the best N. Which values each
 * dimension takes (and so which strategies exist) is the caller's policy
 * (lua/fathom/search.lua); this file only places them on the fabric, checks
 * that they tile and fit, times the ones that fit, and counts the rest.
 *
 * Placement (fixed, so results are reproducible): on a system of one
 * scale-up dimension (pod of P GPUs) and one scale-out dimension (N pods),
 * TP, CP and pp_in of the PP stages live in the pod, the remaining PP stages
 * across pods, data parallelism fills what is left of each; in the expert
 * view TP_MoE and as much of EP as fits live in the pod, the rest of EP
 * across pods. TP never crosses a pod. */
#ifndef FTH_SEARCH_H
#define FTH_SEARCH_H

#include "fth_train.h"

#define FTH_SEARCH_MAX_VALUES 32
#define FTH_SEARCH_MB_MAX     64   ///< default cap of the automatic micro-batch list
#define FTH_SEARCH_MB_LIMIT   4096 ///< largest cap a caller may set
/// Enumeration positions a search may span (indices stay below, so a caller can
/// offset chunks by this stride and indices survive a trip through a double).
#define FTH_SEARCH_MAX_SLOTS (1LL << 40)

/// How a strategy's global batch follows from the requested one.
typedef enum fth_batch_rounding {
  FTH_BATCH_EXACT = 0, ///< the requested batch must tile (DP x micro-batch, the schedule's needs)
  FTH_BATCH_DOWN = 1   ///< per strategy, the largest batch <= the requested one that tiles
} fth_batch_rounding;

/// The values each dimension may take (lists of n_* entries). vs and mb may
/// instead be automatic (n_vs = 0, n_mb = 0): their values then depend on the
/// placement, see below. Virtual stages v > 1, listed or automatic, must split
/// the layers into whole, equal chunks (n_layers % (PP x v) == 0); a listed v that
/// does not is counted as not tiling.
typedef struct fth_search_space {
  int tp[FTH_SEARCH_MAX_VALUES], n_tp;
  int cp[FTH_SEARCH_MAX_VALUES], n_cp;
  int pp[FTH_SEARCH_MAX_VALUES], n_pp;
  int pp_in[FTH_SEARCH_MAX_VALUES], n_pp_in;   ///< stages inside the pod (divides pp)
  int tp_moe[FTH_SEARCH_MAX_VALUES], n_tp_moe; ///< MoE only
  int ep[FTH_SEARCH_MAX_VALUES], n_ep;         ///< MoE only
  /// virtual stages (1 = not interleaved); n_vs = 0: 1 and every divisor v > 1 of
  /// n_layers / PP (interleaved rows only)
  int vs[FTH_SEARCH_MAX_VALUES], n_vs;
  /// micro-batch sizes (sequences per DP rank); n_mb = 0: every size up to mb_max
  /// that divides the local batch (global batch / DP); with FTH_BATCH_DOWN every
  /// size up to mb_max and the local batch, each with its own rounded batch
  int mb[FTH_SEARCH_MAX_VALUES], n_mb;
  int mb_max;         ///< cap of the automatic micro-batch list (<= 0: FTH_SEARCH_MB_MAX)
  int recompute_mask; ///< bit (1 << fth_recompute)
  int dp_mask;        ///< bit (1 << fth_dp_variant)
  int schedule_mask;  ///< bit (1 << fth_pp_schedule); interleaved rows also need vs > 1
  int sp_mask;        ///< bit 0: SP off, bit 1: SP on (SP only tried with TP > 1)
  /// Offload (fth_offload.h): FTH_TIER_XPU (0) leaves the workload's tier maps
  /// as they are; another tier the node has lets weights, saved activations and
  /// optimizer states each stay on the accelerator or move there. Offload is
  /// resolved per strategy, not enumerated, and only as far as memory needs:
  /// among the placements of the three parts that fit and move no superset of
  /// another that fits (none, if it fits), the fastest (ties: fewer parts,
  /// then weights before activations before optimizer). Moving more than
  /// needed can only slow a step down through the transfers, except for
  /// accounting artefacts (a slower pass widening a DP overlap window).
  int offload_tier;
  /// Uneven pipeline splits (fth_layout_split): layers taken off the even
  /// split's first stage (trim_first) and last stage (trim_last), each pair a
  /// strategy; the layers go to the middle stages (with two stages, to the
  /// other end: a pair trimming both ends does not exist there); (0, 0) is the
  /// even split, the only one without a pipeline and with v > 1 virtual stages.
  /// n_* = 0: {0} only. Values in [0, FTH_SEARCH_TRIM_MAX].
  int trim_first[FTH_SEARCH_MAX_VALUES], n_trim_first;
  int trim_last[FTH_SEARCH_MAX_VALUES], n_trim_last;
} fth_search_space;

#define FTH_SEARCH_TRIM_MAX 1024 ///< largest trim a space may list

/// Whether bounds may skip strategies (the best N are the same either way).
typedef enum fth_prune_mode {
  FTH_PRUNE_ON = 0,   ///< skip what a bound proves cannot enter the best N or cannot fit
  FTH_PRUNE_OFF = 1,  ///< exhaustive: check and time every strategy
  FTH_PRUNE_AUDIT = 2 ///< exhaustive, and count strategies a bound would have skipped wrongly
} fth_prune_mode;

typedef enum fth_search_objective {
  FTH_OBJ_STEP_TIME = 0, ///< minimise step time (= max MFU, tokens/s, min time to train)
  FTH_OBJ_HEADROOM = 1   ///< maximise free accelerator memory
} fth_search_objective;

/// One evaluated strategy, compactly.
typedef struct fth_search_hit {
  int tp, cp, pp, pp_in, dp, tp_moe, ep, ep_su, vs, mb;
  int schedule, recompute, dp_variant, sp;
  int trim_first, trim_last;   ///< the split's trims (fth_search_space)
  int first_layers, last_layers; ///< layers of the first and the last stage it runs
  /// where the weights, saved activations and optimizer states live (fth_tier;
  /// FTH_TIER_XPU: on the accelerator)
  int offload_weights, offload_activations, offload_optimizer;
  /// global batch the strategy runs (sequences; < the request only when rounded down)
  double batch;
  double step_time_s, mfu, tokens_per_s, total_time_s;
  double peak_bytes, capacity_bytes, bubble_fraction;
  double exposed_s[FTH_COMM_KIND_COUNT];
  double dp_interference_s; ///< compute the hidden data-parallel traffic displaces (fth_train.h)
  /// smaller is better: step time (scaled to the requested batch when rounded
  /// down, i.e. time per sequence x request: the ranking of tokens/s) or headroom
  double objective;
  int fits;
  int overflow_tier; ///< fth_tier, FTH_TIER_COUNT when it fits
  long long index;   ///< position in the enumeration (ties break by it: deterministic)
} fth_search_hit;

typedef struct fth_search_stats {
  long long considered; ///< every combination of the space
  /// sizes that do not divide the pod / cluster / batch / layers; a placement
  /// refused as a whole counts once per (vs, schedule, recompute, DP variant, SP)
  long long not_tiling;
  long long invalid; ///< refused by the step model (e.g. heads, experts, interleaving)
  long long no_fit;  ///< checked memory, did not fit
  long long no_fit_by_tier[FTH_TIER_COUNT];
  long long evaluated; ///< timed
  /// skipped by a bound (fth_search_def.prune): they cannot enter the best N
  /// (step time) or cannot fit (memory); not classified further
  long long pruned;
  long long bound_evals; ///< reference evaluations the time bound took (not strategies)
  /// FTH_PRUNE_AUDIT: timed strategies below a bound, or whose fastest offload
  /// is not among the minimal placements that fit (must be 0)
  long long bound_violations;
  fth_search_hit smallest_shortfall; ///< the non-fitting strategy closest to fitting
  double shortfall_bytes;            ///< its peak - capacity (HUGE_VAL if none)
} fth_search_stats;

typedef struct fth_search_def {
  fth_node_def node;
  fth_link_def scale_up, scale_out;
  fth_topo_type scale_up_type, scale_out_type;
  int pod_size, num_pods;
  /// GPUs the job runs on; 0: pod_size x num_pods. Fewer (the last pod partly used, as 32,768
  /// GPUs on pods of 144): each strategy is placed in rank order (fth_topology_def.placed),
  /// Megatron-Core's order: TP, CP, DP_Attn (attention view) / TP_MoE, EP, DP_MoE (expert
  /// view) innermost first, PP outermost; no stages are kept inside a pod (pp_in 1 only), EP
  /// is one group wherever it falls (ep_su = EP in the hit), and a group that straddles pods
  /// is costed as it falls.
  int num_xpus;
  fth_model_def model;
  fth_train_def work; ///< batch, sequence, precisions, overlaps; parallel fields are searched
  fth_search_space space;
  fth_search_objective objective;
  fth_batch_rounding batch_rounding; ///< work.global_batch is the request (exact) or the cap (down)
  /// evaluate the placements (TP, CP, PP, stages in the pod, TP_MoE, EP) whose
  /// number (index / positions per placement) % workers == worker
  int worker, workers;
  fth_prune_mode prune; ///< FTH_PRUNE_ON (0, the default), OFF (exhaustive) or AUDIT
  /// > 0: the N-th best objective an earlier part of the same search already
  /// holds (a caller running the space in chunks): the time bounds skip what
  /// is beyond it from the start, as if the best N were full; 0: none.
  double prune_above;
} fth_search_def;

/// The first / last stage layer counts (fth_layout_split's `first`, `last`;
/// 0: that end by the even rule) of the split that trims `trim_first` layers
/// off the even split's first stage and `trim_last` off its last, for
/// n_layers over pp stages; 0 when that split does not exist (a stage left
/// empty, both ends trimmed with two stages, any trim without a pipeline).
int fth_search_split(int n_layers, int pp, int trim_first, int trim_last, int *first, int *last);

/// Run the search. `top` receives up to `top_cap` best hits, best first
/// (ties by enumeration index); `*n_top` their count. Allocation-free.
/// FTH_EINVAL for a bad system or worker, an mb_max over FTH_SEARCH_MB_LIMIT, or
/// a space of FTH_SEARCH_MAX_SLOTS enumeration positions or more.
fth_status fth_search_run(const fth_search_def *def, fth_search_hit *top, int top_cap, int *n_top,
                          fth_search_stats *stats, fth_error *err);

/// Evaluate one strategy exactly as the search does (for checks and explanations);
/// with FTH_BATCH_DOWN its batch is rounded down as the search rounds it; with
/// an offload tier in the space, the strategy's offload fields place the parts.
fth_status fth_search_eval_one(const fth_search_def *def, const fth_search_hit *strategy,
                               fth_search_hit *out, fth_train_result *result, fth_error *err);

/* Exact pruning. Before a strategy is reworked, lower bounds decide whether
 * it can matter; none changes which strategies are the best N (README "Exact
 * pruning"; FTH_PRUNE_AUDIT checks them against every timed strategy):
 *  - memory, per placement: weights, gradients and optimizer states sharded as
 *    far as any DP variant shards them (ZeRO-3), one copy, on the accelerator
 *    only where the most offloaded placement leaves them, plus the runtime
 *    context (fth_search_memory_bound); a placement whose bound exceeds the
 *    accelerator's capacity has no strategy that fits.
 *  - step time per sequence, per (placement, SP, schedule class): one
 *    evaluation at micro-batch 1 with every link unshared and every latency
 *    and per-call overhead 0 gives the slowest stage's FLOPs and the bandwidth
 *    time of its layer collectives per sequence, both linear in the
 *    micro-batch; a pass takes at least their overlap at the node's fastest
 *    rate (fth_search_rate_bound).
 *  - step time, per group (placement, micro-batch, SP, recompute mode,
 *    schedule class): the stage passes of every schedule but DualPipe read
 *    neither the schedule, the virtual stages nor the DP variant, but for the
 *    links' traffic shares; one reference evaluation with every link at its
 *    whole bandwidth (and no offload, which only slows them) bounds the
 *    group's t_f and t_b; recompute none's bound every mode's.
 * The step is at least microbatches x (t_f + t_b) plus the bubble
 * (fth_search_time_bound); the other terms (exposed PP and DP communication,
 * optimizer, offload) are >= 0. A strategy whose bound, ranked as the search
 * ranks it, is worse than the N-th best kept so far is skipped. Time bounds
 * serve the step-time objective only (the headroom objective is exhaustive
 * but for memory), and only when offloading to a tier no faster than the
 * accelerator's. */

/// Least step time of a strategy whose slowest stage takes fwd_s + bwd_s per
/// micro-batch: microbatches x (fwd_s + bwd_s) plus the schedule row's bubble
/// at t_w = 0 (0 for rows whose weight-gradient passes can fill it).
double fth_search_time_bound(fth_pp_schedule sc, int pp, int vs, double microbatches, double fwd_s,
                             double bwd_s);

/// The fastest rate any kernel of a workload without a precision recipe runs
/// at on `node` (FLOP/s): its kernels compute at the activation precision
/// `prec` (fth_train's block environment), so the largest of the achievable
/// matrix and attention rates at `prec` and the vector rate. A pass of F
/// FLOPs takes at least F / this (the per-sequence bound, taken only without
/// a recipe).
double fth_search_rate_bound(const fth_node_def *node, fth_precision prec);

/// Least accelerator bytes any DP variant, schedule, micro-batch or recompute
/// mode of `plan`'s placement needs under workload `work`: ZeRO-3-sharded
/// weights, gradients and optimizer states (one copy, no recipe cache) and the
/// runtime context, each where `work` stores it (only those on the accelerator).
double fth_search_memory_bound(const fth_train_plan *plan, const fth_train_def *work);

#endif
