/* fth_offload.c: offloaded weights, activations and optimizer states
 * (fth_offload.h). */
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
  /* copied back before the backward reads them: the kernels read the accelerator */
  footprint_tier[FTH_MEM_ACTIVATIONS] = o->activations;
  footprint_tier[FTH_MEM_OPTIMIZER] = o->optimizer;
  traffic_tier[FTH_MEM_OPTIMIZER] = o->optimizer;
}

double fth_offload_buffer_bytes(const fth_tier footprint_tier[FTH_MEM_COMPONENT_COUNT],
                                double weight_bytes, double act_bytes_per_mb, double blocks) {
  double share = blocks > 2.0 ? 2.0 / blocks : 1.0; /* two blocks, at most the whole stage */
  double b = 0.0;
  if (footprint_tier[FTH_MEM_WEIGHTS] != FTH_TIER_XPU) b += share * weight_bytes;
  if (footprint_tier[FTH_MEM_ACTIVATIONS] != FTH_TIER_XPU) b += share * act_bytes_per_mb;
  return b;
}

void fth_offload_activations(fth_tier tier, double act_bytes_per_mb, double microbatches,
                             double tier_bw_bytes_per_s, double busy_s, double comp_comm_eff,
                             double *raw_s, double *exposed_s) {
  *raw_s = *exposed_s = 0.0;
  if (tier == FTH_TIER_XPU || !(act_bytes_per_mb > 0) || !(microbatches > 0)) return;
  double raw = tier_bw_bytes_per_s > 0 ? 2.0 * microbatches * act_bytes_per_mb / tier_bw_bytes_per_s
                                       : HUGE_VAL;
  *raw_s = raw;
  *exposed_s = fmax(0.0, raw - comp_comm_eff * busy_s);
}
