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

/// The values each dimension may take (lists of n_* entries).
typedef struct fth_search_space {
  int tp[FTH_SEARCH_MAX_VALUES], n_tp;
  int cp[FTH_SEARCH_MAX_VALUES], n_cp;
  int pp[FTH_SEARCH_MAX_VALUES], n_pp;
  int pp_in[FTH_SEARCH_MAX_VALUES], n_pp_in;   ///< stages inside the pod (divides pp)
  int tp_moe[FTH_SEARCH_MAX_VALUES], n_tp_moe; ///< MoE only
  int ep[FTH_SEARCH_MAX_VALUES], n_ep;         ///< MoE only
  int vs[FTH_SEARCH_MAX_VALUES], n_vs;         ///< virtual stages (1 = not interleaved)
  int mb[FTH_SEARCH_MAX_VALUES], n_mb;         ///< micro-batch sizes
  int recompute_mask;                          ///< bit (1 << fth_recompute)
  int dp_mask;                                 ///< bit (1 << fth_dp_variant)
  int schedule_mask; ///< bit (1 << fth_pp_schedule); interleaved rows also need vs > 1
  int sp_mask;       ///< bit 0: SP off, bit 1: SP on (SP only tried with TP > 1)
} fth_search_space;

typedef enum fth_search_objective {
  FTH_OBJ_STEP_TIME = 0, ///< minimise step time (= max MFU, tokens/s, min time to train)
  FTH_OBJ_HEADROOM = 1   ///< maximise free accelerator memory
} fth_search_objective;

/// One evaluated strategy, compactly.
typedef struct fth_search_hit {
  int tp, cp, pp, pp_in, dp, tp_moe, ep, ep_su, vs, mb;
  int schedule, recompute, dp_variant, sp;
  double step_time_s, mfu, tokens_per_s, total_time_s;
  double peak_bytes, capacity_bytes, bubble_fraction;
  double exposed_s[FTH_COMM_KIND_COUNT];
  double objective; ///< smaller is better
  int fits;
  int overflow_tier; ///< fth_tier, FTH_TIER_COUNT when it fits
  long long index;   ///< position in the enumeration (ties break by it: deterministic)
} fth_search_hit;

typedef struct fth_search_stats {
  long long considered; ///< every combination of the space
  long long not_tiling; ///< sizes that do not divide the pod / cluster / batch / layers
  long long invalid;    ///< refused by the step model (e.g. heads, experts, interleaving)
  long long no_fit;     ///< checked memory, did not fit
  long long no_fit_by_tier[FTH_TIER_COUNT];
  long long evaluated;               ///< timed
  fth_search_hit smallest_shortfall; ///< the non-fitting strategy closest to fitting
  double shortfall_bytes;            ///< its peak - capacity (HUGE_VAL if none)
} fth_search_stats;

typedef struct fth_search_def {
  fth_node_def node;
  fth_link_def scale_up, scale_out;
  fth_topo_type scale_up_type, scale_out_type;
  int pod_size, num_pods;
  fth_model_def model;
  fth_train_def work; ///< batch, sequence, precisions, overlaps; parallel fields are searched
  fth_search_space space;
  fth_search_objective objective;
  int worker, workers; ///< evaluate combinations with index % workers == worker
} fth_search_def;

/// Run the search. `top` receives up to `top_cap` best hits, best first
/// (ties by enumeration index); `*n_top` their count. Allocation-free.
fth_status fth_search_run(const fth_search_def *def, fth_search_hit *top, int top_cap, int *n_top,
                          fth_search_stats *stats, fth_error *err);

/// Evaluate one strategy exactly as the search does (for checks and explanations).
fth_status fth_search_eval_one(const fth_search_def *def, const fth_search_hit *strategy,
                               fth_search_hit *out, fth_train_result *result, fth_error *err);

#endif
