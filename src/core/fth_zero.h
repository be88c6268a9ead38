/* fth_zero.h: data parallelism and the ZeRO stages (Rajbhandari et al. 2020):
 * which training state each stage shards over the DP group, the gradient and
 * parameter traffic per step, and how many parameters each GPU's optimizer
 * updates. The one home of those rules for the step model, its footprint and
 * the search. */
#ifndef FTH_ZERO_H
#define FTH_ZERO_H

#include "fth_collective.h"
#include "fth_layout.h"

typedef enum fth_dp_variant {
  FTH_DP_DDP = 0,   ///< replicated weights, gradients and optimizer; gradient all-reduce
  FTH_DP_ZERO1 = 1, ///< optimizer states sharded (Rajbhandari et al. 2020)
  FTH_DP_ZERO2 = 2, ///< + gradients sharded (reduce-scatter)
  FTH_DP_ZERO3 = 3, ///< + weights sharded, gathered per use (FSDP FULL_SHARD)
  FTH_DP_COUNT
} fth_dp_variant;

const char *fth_dp_variant_name(fth_dp_variant v);     ///< "DDP", "ZERO1", "ZERO2", "ZERO3"
fth_dp_variant fth_dp_variant_parse(const char *name); ///< also "FSDP"; FTH_DP_COUNT if unknown
const fth_name_alias *fth_dp_variant_aliases(void);    ///< the other spellings it accepts

/// The DP group size each state is divided by under `v` (1 where it is kept whole).
typedef struct fth_zero_shards {
  double weights, gradients, optimizer;
} fth_zero_shards;
fth_zero_shards fth_zero_shards_of(fth_dp_variant v, double dp);

/// One view's (dense over DP_Attn, experts over DP_MoE) traffic per step for
/// `params` parameters of which `trained` get gradients (all but frozen ones, LoRA):
/// DDP all-reduces the gradients once; ZeRO-1/2 reduce-scatter them and all-gather the
/// updated weights (the same volume, Rajbhandari et al. 2020 Sec. 7); ZeRO-3 gathers
/// all the weights for every micro-batch's forward and backward and reduce-scatters
/// its gradients.
typedef struct fth_zero_traffic {
  double time_s;         ///< per step
  double gather_s;       ///< of which ZeRO-1/2's all-gather of the updated weights, which
                         ///< can run under the next step's first forward
  fth_coll_op op;        ///< the main collective, for the report
  fth_coll_algo algo;    ///< its algorithm
  double bytes_per_call; ///< gradient bytes of one call of the main collective
  double calls;          ///< calls of the main collective per step
  double bytes_per_step; ///< bytes of every collective it times, per step
} fth_zero_traffic;
fth_zero_traffic fth_zero_step_traffic(fth_dp_variant v, const fth_group *g, double params,
                                       double trained, double grad_bytes, double weight_bytes,
                                       double microbatches, const fth_coll_params *coll);

#endif
