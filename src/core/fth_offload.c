/* fth_offload.c: offloaded weights (and their gradients), activations and
 * optimizer states (fth_offload.h). */
#include "fth_offload.h"

#include <math.h>

fth_offload fth_offload_none(void) {
  fth_offload o = {FTH_TIER_XPU, FTH_TIER_XPU, FTH_TIER_XPU};
  return o;
}

void fth_offload_apply(const fth_offload *o, fth_tier footprint_tier[FTH_MEM_COMPONENT_COUNT],
                       fth_tier traffic_tier[FTH_MEM_COMPONENT_COUNT]) {
  footprint_tier[FTH_MEM_WEIGHTS] = o->weights;
  traffic_tier[FTH_MEM_WEIGHTS] = o->weights;
  footprint_tier[FTH_MEM_GRADIENTS] = o->weights;
  /* copied back before the backward reads them: the kernels read the accelerator */
  footprint_tier[FTH_MEM_ACTIVATIONS] = o->activations;
  footprint_tier[FTH_MEM_OPTIMIZER] = o->optimizer;
  traffic_tier[FTH_MEM_OPTIMIZER] = o->optimizer;
}

double fth_offload_buffer_bytes(const fth_tier footprint_tier[FTH_MEM_COMPONENT_COUNT],
                                double weight_bytes, double grad_bytes, double act_bytes_per_mb,
                                double blocks) {
  double share = blocks > 2.0 ? 2.0 / blocks : 1.0; /* two blocks, at most the whole stage */
  double b = 0.0;
  if (footprint_tier[FTH_MEM_WEIGHTS] != FTH_TIER_XPU) b += share * weight_bytes;
  if (footprint_tier[FTH_MEM_GRADIENTS] != FTH_TIER_XPU) b += share * grad_bytes;
  if (footprint_tier[FTH_MEM_ACTIVATIONS] != FTH_TIER_XPU) b += share * act_bytes_per_mb;
  return b;
}

/* Seconds to move `bytes` at `bw` (0 when nothing moves). */
static double move_s(double bytes, double bw) {
  if (!(bytes > 0)) return 0.0;
  return bw > 0 ? bytes / bw : HUGE_VAL;
}

void fth_offload_transfers(fth_tier act_tier, double act_bytes_per_mb, double act_bw,
                           fth_tier grad_tier, double grad_bytes, double grad_bw,
                           double microbatches, double busy_s, double comp_comm_eff, double *raw_s,
                           double *exposed_s) {
  double raw = 0.0;
  if (act_tier != FTH_TIER_XPU && microbatches > 0)
    raw += move_s(2.0 * microbatches * act_bytes_per_mb, act_bw);
  if (grad_tier != FTH_TIER_XPU && microbatches > 0)
    raw += move_s((2.0 * microbatches - 1.0) * grad_bytes, grad_bw);
  *raw_s = raw;
  *exposed_s = fmax(0.0, raw - comp_comm_eff * busy_s);
}
