/* fth_pipeline.h: pipeline-parallel schedules: bubble time and how many
 * micro-batches of activations a stage holds at once. */
#ifndef FTH_PIPELINE_H
#define FTH_PIPELINE_H

#include "fth_common.h"

typedef enum fth_pp_schedule {
  FTH_PP_GPIPE = 0,       ///< all forwards, then all backwards (Huang et al. 2019)
  FTH_PP_1F1B = 1,        ///< one-forward-one-backward, PipeDream-flush (Narayanan et al. 2021)
  FTH_PP_INTERLEAVED = 2, ///< 1F1B with v virtual stages per GPU (Narayanan et al. 2021, Sec. 2.2)
  FTH_PP_COUNT
} fth_pp_schedule;

const char *fth_pp_schedule_name(fth_pp_schedule s);     ///< "GPIPE", "1F1B", "INTERLEAVED"
fth_pp_schedule fth_pp_schedule_parse(const char *name); ///< FTH_PP_COUNT when unknown

/// Pipeline bubble in seconds for `stages` stages, `micro` micro-batches, a
/// stage taking fwd_s + bwd_s per micro-batch, `virt` virtual stages
/// (interleaved only). Narayanan et al. 2021 Eq. 1 and Sec. 2.2.2:
/// (p - 1)(t_f + t_b) / v.
double fth_pp_bubble_s(fth_pp_schedule s, int stages, double micro, int virt, double fwd_s,
                       double bwd_s);

/// Micro-batches whose activations the busiest (first) stage holds at peak:
/// GPipe m; 1F1B min(m, p); interleaved min(m, p) x (1 + (p - 1) / (v p))
/// (Korthikanti et al. 2022, Sec. 4.2.3).
double fth_pp_inflight(fth_pp_schedule s, int stages, double micro, int virt);

#endif
