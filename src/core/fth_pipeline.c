#include "fth_pipeline.h"

#include <string.h>

static const char *const schedule_names[FTH_PP_COUNT] = {"GPIPE", "1F1B", "INTERLEAVED"};

const char *fth_pp_schedule_name(fth_pp_schedule s) {
  return (s >= 0 && s < FTH_PP_COUNT) ? schedule_names[s] : NULL;
}

fth_pp_schedule fth_pp_schedule_parse(const char *name) {
  for (int i = 0; i < FTH_PP_COUNT; i++)
    if (strcmp(name, schedule_names[i]) == 0) return (fth_pp_schedule)i;
  return FTH_PP_COUNT;
}

double fth_pp_bubble_s(fth_pp_schedule s, int stages, double micro, int virt, double fwd_s,
                       double bwd_s) {
  (void)micro;
  if (stages <= 1) return 0.0;
  double per = fwd_s + bwd_s;
  /* Narayanan et al. 2021 Eq. 1: bubble = (p - 1)(t_f + t_b), the same for
   * GPipe and 1F1B; interleaving divides it by v (Sec. 2.2.2). */
  double v = (s == FTH_PP_INTERLEAVED && virt > 1) ? (double)virt : 1.0;
  return (double)(stages - 1) * per / v;
}

double fth_pp_inflight(fth_pp_schedule s, int stages, double micro, int virt) {
  if (s == FTH_PP_GPIPE) return micro;
  double p = (double)stages;
  double inflight = fth_min(micro, p);
  if (s == FTH_PP_INTERLEAVED && virt > 1) {
    /* Korthikanti et al. 2022 Sec. 4.2.3: interleaving keeps (1 + (p-1)/(p v))
     * times more activations on the first stage. */
    inflight *= 1.0 + (p - 1.0) / (p * (double)virt);
  }
  return inflight;
}
