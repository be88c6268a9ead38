#include "fth_pipeline.h"
#include "test_macros.h"

#include <string.h>

int pipeline_test(void) {
  /* Narayanan et al. 2021 Eq. 1: bubble = (p - 1)(t_f + t_b).
   * p = 8, t_f = 1 ms, t_b = 2 ms: 7 x 3 ms = 21 ms for GPipe and 1F1B. */
  FTH_ENSURE_NEAR(21e-3, fth_pp_bubble_s(FTH_PP_GPIPE, 8, 64, 1, 1e-3, 2e-3), 1e-12);
  FTH_ENSURE_NEAR(21e-3, fth_pp_bubble_s(FTH_PP_1F1B, 8, 64, 1, 1e-3, 2e-3), 1e-12);
  /* Interleaved with v = 3 divides it by v: 7 ms. */
  FTH_ENSURE_NEAR(7e-3, fth_pp_bubble_s(FTH_PP_INTERLEAVED, 8, 64, 3, 1e-3, 2e-3), 1e-12);
  /* One stage has no bubble. */
  FTH_ENSURE(fth_pp_bubble_s(FTH_PP_1F1B, 1, 64, 1, 1e-3, 2e-3) == 0.0);
  /* In flight: GPipe holds all m = 16; 1F1B min(m, p) = 8 for p = 8, m for m < p. */
  FTH_ENSURE_NEAR(16.0, fth_pp_inflight(FTH_PP_GPIPE, 8, 16, 1), 0);
  FTH_ENSURE_NEAR(8.0, fth_pp_inflight(FTH_PP_1F1B, 8, 16, 1), 0);
  FTH_ENSURE_NEAR(4.0, fth_pp_inflight(FTH_PP_1F1B, 8, 4, 1), 0);
  /* Interleaved p = 8, v = 2: 8 x (1 + 7 / 16) = 11.5 (Korthikanti et al. 2022 Sec. 4.2.3). */
  FTH_ENSURE_NEAR(11.5, fth_pp_inflight(FTH_PP_INTERLEAVED, 8, 16, 2), 1e-12);
  /* Names round-trip. */
  FTH_ENSURE(fth_pp_schedule_parse("1F1B") == FTH_PP_1F1B);
  FTH_ENSURE(strcmp(fth_pp_schedule_name(FTH_PP_INTERLEAVED), "INTERLEAVED") == 0);
  FTH_ENSURE(fth_pp_schedule_parse("ZB") == FTH_PP_COUNT);
  return 0;
}
