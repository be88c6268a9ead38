/* fth_schedule.c: the schedule table (fth_schedule.h). */
#include "fth_schedule.h"

#include <string.h>

/* name, interleaved, holds_all, inflight_extra, even_stages, stage_a, stage_b,
 * bubble_f, bubble_b, bubble_w, sends_per_micro, weight_copies, comm_hidden, source */
static const fth_schedule rows[FTH_PP_COUNT] = {
    /* Huang et al. 2019; Narayanan et al. 2021 Eq. 1: bubble (p - 1)(t_f + t_b),
     * every micro-batch's activations held until its backward. */
    [FTH_PP_GPIPE] = {"GPIPE", 0, 1, 0.0, 0, 1.0, -1.0, 1.0, 1.0, 0.0, 2.0, 1.0, 0.0,
                      "Huang et al. 2019"},
    /* Narayanan et al. 2021 Sec. 2.2.1: the same bubble, at most p in flight. */
    [FTH_PP_1F1B] = {"1F1B", 0, 0, 0.0, 0, 1.0, -1.0, 1.0, 1.0, 0.0, 2.0, 1.0, 0.0,
                     "Narayanan et al. 2021 Sec. 2.2.1"},
    /* Narayanan et al. 2021 Sec. 2.2.2: v chunks per GPU divide the bubble by
     * v and multiply the sends by v. */
    [FTH_PP_INTERLEAVED] = {"INTERLEAVED", 1, 0, 0.0, 0, 1.0, -1.0, 1.0, 1.0, 0.0, 2.0, 1.0, 0.0,
                            "Narayanan et al. 2021 Sec. 2.2.2"},
    /* Qi et al. 2023 ("Zero Bubble Pipeline Parallelism", Sec. 3.1, Fig. 3):
     * with backward split into B (input gradients) and W (weight gradients),
     * ZB-H1 schedules the W passes into the cool-down, leaving a bubble of
     * (p - 1)(T_F + T_B - T_W). Here t_b = T_B + T_W, so the bubble is
     * (p - 1)(t_f + t_b - 2 t_w). Its peak activation memory equals 1F1B's
     * (at most p micro-batches in flight), and it sends what 1F1B sends. */
    [FTH_PP_ZB_H1] = {"ZB_H1", 0, 0, 0.0, 0, 1.0, -1.0, 1.0, 1.0, -2.0, 2.0, 1.0, 0.0,
                      "Qi et al. 2023 Sec. 3.1"},
    /* DeepSeek-AI 2024 (DeepSeek-V3 technical report, Sec. 3.2.1, Table 2):
     * micro-batches fed from both ends of the pipeline, a forward chunk of one
     * overlapped with a backward chunk of the other so that all-to-all and PP
     * communication hide under computation. Bubble (p/2 - 1)(F&B + B - 3W)
     * with B the whole backward and F&B ~ t_f + t_b: (p/2 - 1)(t_f + 2 t_b -
     * 3 t_w); two copies of the parameters; p + 1 micro-batches of
     * activations; an even number of stages. */
    [FTH_PP_DUALPIPE] = {"DUALPIPE", 0, 0, 1.0, 1, 0.5, -1.0, 1.0, 2.0, -3.0, 2.0, 2.0, 1.0,
                         "DeepSeek-AI 2024 Sec. 3.2.1, Table 2"},
};

const fth_schedule *fth_schedule_get(fth_pp_schedule s) {
  return (s >= 0 && s < FTH_PP_COUNT) ? &rows[s] : NULL;
}

const char *fth_pp_schedule_name(fth_pp_schedule s) {
  const fth_schedule *r = fth_schedule_get(s);
  return r ? r->name : NULL;
}

fth_pp_schedule fth_pp_schedule_parse(const char *name) {
  for (int i = 0; i < FTH_PP_COUNT; i++)
    if (strcmp(name, rows[i].name) == 0) return (fth_pp_schedule)i;
  return FTH_PP_COUNT;
}

double fth_pp_chunks(fth_pp_schedule s, int virt) {
  const fth_schedule *r = fth_schedule_get(s);
  return (r && r->interleaved && virt > 1) ? (double)virt : 1.0;
}

double fth_pp_bubble_s(fth_pp_schedule s, int stages, int virt, double fwd_s, double bwd_s,
                       double wgrad_s) {
  const fth_schedule *r = fth_schedule_get(s);
  if (stages <= 1 || r == NULL) return 0.0;
  double per = r->bubble_f * fwd_s + r->bubble_b * bwd_s + r->bubble_w * wgrad_s;
  if (per < 0) per = 0; /* weight gradients can fill the bubble, not more */
  double boundaries = fth_max(0.0, r->stage_a * stages + r->stage_b);
  return boundaries * per / fth_pp_chunks(s, virt);
}

double fth_pp_inflight(fth_pp_schedule s, int stages, double micro, int virt) {
  const fth_schedule *r = fth_schedule_get(s);
  if (r == NULL) return 0.0;
  if (r->holds_all) return micro;
  double p = (double)stages;
  double inflight = fth_min(micro, p) + r->inflight_extra;
  double v = fth_pp_chunks(s, virt);
  /* Korthikanti et al. 2022 Sec. 4.2.3: interleaving keeps (1 + (p-1)/(p v))
   * times more activations on the first stage. */
  if (v > 1) inflight *= 1.0 + (p - 1.0) / (p * v);
  return inflight;
}

double fth_pp_inflight_stage(fth_pp_schedule s, int stages, int stage, double micro, int virt) {
  const fth_schedule *r = fth_schedule_get(s);
  if (r == NULL) return 0.0;
  if (r->holds_all || fth_pp_chunks(s, virt) > 1 || r->even_stages || r->inflight_extra > 0)
    return fth_pp_inflight(s, stages, micro, virt);
  return fth_min(micro, (double)(stages - stage));
}
