#include "fth_schedule.h"
#include "test_macros.h"

#include <string.h>

int schedule_test(void) {
  /* In flight per stage (Narayanan et al. 2021 Sec. 2.2.1): under 1F1B stage s
   * of p = 4 runs p - s warm-up forwards: 4, 3, 2, 1 with m = 8; with m = 2 at
   * most 2. GPipe holds all m = 8 on every stage; interleaved (v = 2) keeps the
   * first stage's min(m, p)(1 + (p - 1)/(p v)) = 4 x 1.375 = 5.5 on all. */
  for (int st = 0; st < 4; st++) {
    FTH_ENSURE_NEAR(4.0 - st, fth_pp_inflight_stage(FTH_PP_1F1B, 4, st, 8, 1), 0);
    FTH_ENSURE_NEAR(4.0 - st, fth_pp_inflight_stage(FTH_PP_ZB_H1, 4, st, 8, 1), 0);
    FTH_ENSURE_NEAR(st < 2 ? 2.0 : 4.0 - st, fth_pp_inflight_stage(FTH_PP_1F1B, 4, st, 2, 1), 0);
    FTH_ENSURE_NEAR(8.0, fth_pp_inflight_stage(FTH_PP_GPIPE, 4, st, 8, 1), 0);
    FTH_ENSURE_NEAR(5.5, fth_pp_inflight_stage(FTH_PP_INTERLEAVED, 4, st, 8, 2), 1e-12);
  }
  /* Narayanan et al. 2021 Eq. 1: bubble = (p - 1)(t_f + t_b).
   * p = 8, t_f = 1 ms, t_b = 2 ms (of which t_w = 0.8 ms weight gradients):
   * 7 x 3 ms = 21 ms for GPipe and 1F1B, which ignore the split. */
  FTH_ENSURE_NEAR(21e-3, fth_pp_bubble_s(FTH_PP_GPIPE, 8, 1, 1e-3, 2e-3, 0.8e-3), 1e-12);
  FTH_ENSURE_NEAR(21e-3, fth_pp_bubble_s(FTH_PP_1F1B, 8, 1, 1e-3, 2e-3, 0.8e-3), 1e-12);
  /* Interleaved with v = 3 divides it by v: 7 ms; with v = 1 it is 1F1B. */
  FTH_ENSURE_NEAR(7e-3, fth_pp_bubble_s(FTH_PP_INTERLEAVED, 8, 3, 1e-3, 2e-3, 0.8e-3), 1e-12);
  FTH_ENSURE_NEAR(21e-3, fth_pp_bubble_s(FTH_PP_INTERLEAVED, 8, 1, 1e-3, 2e-3, 0.8e-3), 1e-12);
  /* ZB-H1 (Qi et al. 2023 Sec. 3.1): (p - 1)(T_F + T_B - T_W) with T_B the
   * input-gradient part = 2 - 0.8 = 1.2 ms, T_W = 0.8 ms:
   * 7 x (1 + 1.2 - 0.8) = 7 x 1.4 = 9.8 ms. Virtual stages do not apply. */
  FTH_ENSURE_NEAR(9.8e-3, fth_pp_bubble_s(FTH_PP_ZB_H1, 8, 1, 1e-3, 2e-3, 0.8e-3), 1e-12);
  FTH_ENSURE_NEAR(9.8e-3, fth_pp_bubble_s(FTH_PP_ZB_H1, 8, 4, 1e-3, 2e-3, 0.8e-3), 1e-12);
  /* A backward that is all weight gradients cannot make the bubble negative:
   * T_F + T_B - T_W = 1 + 0 - 2 < 0 -> 0. */
  FTH_ENSURE(fth_pp_bubble_s(FTH_PP_ZB_H1, 8, 1, 1e-3, 2e-3, 2e-3) == 0.0);
  /* DualPipe (DeepSeek-AI 2024 Table 2): (p/2 - 1)(F&B + B - 3W) with F&B =
   * t_f + t_b: (8/2 - 1)(1 + 2 + 2 - 3 x 0.8) = 3 x 2.6 = 7.8 ms; two stages
   * have no boundary to fill: (2/2 - 1) = 0. */
  FTH_ENSURE_NEAR(7.8e-3, fth_pp_bubble_s(FTH_PP_DUALPIPE, 8, 1, 1e-3, 2e-3, 0.8e-3), 1e-12);
  FTH_ENSURE(fth_pp_bubble_s(FTH_PP_DUALPIPE, 2, 1, 1e-3, 2e-3, 0.8e-3) == 0.0);
  /* One stage has no bubble. */
  FTH_ENSURE(fth_pp_bubble_s(FTH_PP_1F1B, 1, 1, 1e-3, 2e-3, 0.0) == 0.0);
  /* In flight: GPipe holds all m = 16; 1F1B min(m, p) = 8 for p = 8, m for m < p. */
  FTH_ENSURE_NEAR(16.0, fth_pp_inflight(FTH_PP_GPIPE, 8, 16, 1), 0);
  FTH_ENSURE_NEAR(8.0, fth_pp_inflight(FTH_PP_1F1B, 8, 16, 1), 0);
  FTH_ENSURE_NEAR(4.0, fth_pp_inflight(FTH_PP_1F1B, 8, 4, 1), 0);
  /* DualPipe holds p + 1 (DeepSeek-AI 2024 Table 2): 9 for p = 8, m = 16. */
  FTH_ENSURE_NEAR(9.0, fth_pp_inflight(FTH_PP_DUALPIPE, 8, 16, 1), 0);
  FTH_ENSURE(fth_schedule_get(FTH_PP_DUALPIPE)->weight_copies == 2.0);
  FTH_ENSURE(fth_schedule_get(FTH_PP_DUALPIPE)->even_stages);
  /* ZB-H1 keeps 1F1B's peak: min(m, p) (Qi et al. 2023 Sec. 3.1). */
  FTH_ENSURE_NEAR(8.0, fth_pp_inflight(FTH_PP_ZB_H1, 8, 16, 1), 0);
  /* Interleaved p = 8, v = 2: 8 x (1 + 7 / 16) = 11.5 (Korthikanti et al. 2022 Sec. 4.2.3). */
  FTH_ENSURE_NEAR(11.5, fth_pp_inflight(FTH_PP_INTERLEAVED, 8, 16, 2), 1e-12);
  /* Chunks (sends and bubble divisor): v only for interleaved rows. */
  FTH_ENSURE(fth_pp_chunks(FTH_PP_INTERLEAVED, 4) == 4.0);
  FTH_ENSURE(fth_pp_chunks(FTH_PP_ZB_H1, 4) == 1.0);
  /* What the micro-batch count must be a multiple of, by hand: 1F1B and GPipe
   * any count (1); DualPipe, fed from both ends, an even one (2), and no count
   * over an odd PP or one stage (0); interleaved with v = 2 chunks over PP 4 a
   * multiple of PP (4), over PP 3 also 3, with v = 1 any count. */
  FTH_ENSURE(fth_pp_micro_multiple(FTH_PP_1F1B, 4, 1) == 1.0);
  FTH_ENSURE(fth_pp_micro_multiple(FTH_PP_GPIPE, 3, 1) == 1.0);
  FTH_ENSURE(fth_pp_micro_multiple(FTH_PP_DUALPIPE, 4, 1) == 2.0);
  FTH_ENSURE(fth_pp_micro_multiple(FTH_PP_DUALPIPE, 3, 1) == 0.0);
  FTH_ENSURE(fth_pp_micro_multiple(FTH_PP_DUALPIPE, 1, 1) == 0.0);
  FTH_ENSURE(fth_pp_micro_multiple(FTH_PP_INTERLEAVED, 4, 2) == 4.0);
  FTH_ENSURE(fth_pp_micro_multiple(FTH_PP_INTERLEAVED, 3, 2) == 3.0);
  FTH_ENSURE(fth_pp_micro_multiple(FTH_PP_INTERLEAVED, 4, 1) == 1.0);
  /* Every row has a name that parses back to it, and sends fwd + bwd. */
  for (int i = 0; i < FTH_PP_COUNT; i++) {
    const fth_schedule *r = fth_schedule_get((fth_pp_schedule)i);
    FTH_ENSURE(r != NULL && r->name != NULL && r->source != NULL);
    FTH_ENSURE(fth_pp_schedule_parse(r->name) == (fth_pp_schedule)i);
    FTH_ENSURE(r->sends_per_micro == 2.0 && r->weight_copies >= 1.0);
  }
  /* DualPipe's forward-backward pairs, from dualpipe.py's step() on rank hr from
   * its end of p with m micro-batches: the main step runs m/2 - p + hr + 1
   * iterations of two pairs, the fifth p/2 - hr - 1 of one, and a middle rank
   * (hr = p/2 - 1) runs the main step's first pair unpaired. p = 16, m = 120
   * (DeepSeek-V3): hr = 0 pairs 2 x 45 + 7 = 97 passes, hr = 7 pairs 2 x 52 - 1 =
   * 103; the fewest, 97 of 120. p = 4, m = 8: hr = 0 pairs 2 x 1 + 1 = 3, hr = 1
   * 2 x 2 - 1 = 3: 3 of 8. p = 2, m = 4: the one rank is a middle one, 2 x 1 - 1 =
   * 1 of 4. Other schedules pair none; DualPipe without a pipeline is all pairs. */
  FTH_ENSURE_NEAR(97.0 / 120.0, fth_pp_paired_share(FTH_PP_DUALPIPE, 16, 120), 1e-15);
  FTH_ENSURE_NEAR(3.0 / 8.0, fth_pp_paired_share(FTH_PP_DUALPIPE, 4, 8), 1e-15);
  FTH_ENSURE_NEAR(1.0 / 4.0, fth_pp_paired_share(FTH_PP_DUALPIPE, 2, 4), 1e-15);
  FTH_ENSURE(fth_pp_paired_share(FTH_PP_DUALPIPE, 1, 8) == 1.0);
  FTH_ENSURE(fth_pp_paired_share(FTH_PP_1F1B, 16, 120) == 0.0);
  FTH_ENSURE(fth_pp_paired_share(FTH_PP_INTERLEAVED, 4, 8) == 0.0);
  /* more micro-batches pair more: the unpaired count stays 3p/2 - 1 = 23 */
  FTH_ENSURE_NEAR(1.0 - 23.0 / 1200.0, fth_pp_paired_share(FTH_PP_DUALPIPE, 16, 1200), 1e-15);
  /* The 1F1B family's steady state on its first stage: 1F1B p = 4, m = 8 runs
   * 3 warm-up forwards and 3 cool-down backwards alone, 5 of 8 paired; ZB-H1 the
   * same; interleaved p = 4, v = 2, m = 8: 2 x 3 + 1 x 4 = 10 of its 16
   * chunk-forwards in the warm-up and one more under Megatron-Core's A2A
   * overlap, 5 of 16 paired; no pipeline, m = 16: the first
   * forward and the last backward alone, 15 of 16; GPipe pairs none; a warm-up
   * longer than the micro-batches leaves none. */
  FTH_ENSURE_NEAR(5.0 / 8.0, fth_pp_steady_share(FTH_PP_1F1B, 4, 8, 1), 1e-15);
  FTH_ENSURE_NEAR(5.0 / 8.0, fth_pp_steady_share(FTH_PP_ZB_H1, 4, 8, 1), 1e-15);
  FTH_ENSURE_NEAR(5.0 / 16.0, fth_pp_steady_share(FTH_PP_INTERLEAVED, 4, 8, 2), 1e-15);
  FTH_ENSURE_NEAR(15.0 / 16.0, fth_pp_steady_share(FTH_PP_1F1B, 1, 16, 1), 1e-15);
  FTH_ENSURE(fth_pp_steady_share(FTH_PP_GPIPE, 4, 8, 1) == 0.0);
  FTH_ENSURE(fth_pp_steady_share(FTH_PP_1F1B, 8, 4, 1) == 0.0);
  FTH_ENSURE_NEAR(97.0 / 120.0, fth_pp_steady_share(FTH_PP_DUALPIPE, 16, 120, 1), 1e-15);
  FTH_ENSURE(fth_schedule_get(FTH_PP_COUNT) == NULL);
  FTH_ENSURE(strcmp(fth_pp_schedule_name(FTH_PP_INTERLEAVED), "INTERLEAVED") == 0);
  FTH_ENSURE(fth_pp_schedule_parse("ZB") == FTH_PP_COUNT);
  return 0;
}
