#include "fth_goodput.h"
#include "test_macros.h"

#include <math.h>
#include <string.h>

int goodput_test(void) {
  /* 10,000 GPUs of 50,000 h MTBF: system MTBF 5 h = 18,000 s. Checkpoint of
   * 20 GB per GPU at 2 GB/s: delta = 10 s. Young: tau = sqrt(2 x 10 x 18,000)
   * = 600 s. Restart 300 s. T = U (1 + 10/600) / (1 - (300 + 300)/18,000)
   * = U x 1.0166667 / 0.9666667 = 1.0517241 U. */
  fth_goodput_def d = fth_goodput_def_default();
  d.gpu_mtbf_s = 50000.0 * 3600.0;
  d.checkpoint_bytes = 20e9;
  d.checkpoint_bw = 2e9;
  d.restart_s = 300;
  d.gpu_power_w = 1000;
  d.pue = 1.2;
  d.price_per_gpu_hour = 2.0;
  fth_error err;
  FTH_ENSURE(fth_goodput_check(&d, &err) == FTH_OK);
  double U = 30.0 * 86400.0;
  fth_goodput_result r = fth_goodput(&d, 10000, U);
  FTH_ENSURE_NEAR(18000.0, r.system_mtbf_s, 1e-12);
  FTH_ENSURE_NEAR(600.0, r.interval_s, 1e-12);
  FTH_ENSURE_NEAR(U * (1.0 + 10.0 / 600.0) / (1.0 - 600.0 / 18000.0), r.expected_time_s, 1e-12);
  FTH_ENSURE_NEAR(1.0 / 1.0517241379310345, r.goodput, 1e-12);
  FTH_ENSURE_NEAR(r.expected_time_s / 18000.0, r.failures, 1e-12);
  /* Energy 10,000 x 1 kW x T x 1.2; cost 10,000 x T / 3600 x $2. */
  FTH_ENSURE_NEAR(10000.0 * 1000.0 * r.expected_time_s * 1.2, r.energy_j, 1e-12);
  FTH_ENSURE_NEAR(10000.0 * r.expected_time_s / 3600.0 * 2.0, r.cost, 1e-12);
  /* Young's interval is the best one: 20% longer or shorter costs time. */
  d.interval_s = 720;
  FTH_ENSURE(fth_goodput(&d, 10000, U).expected_time_s > r.expected_time_s);
  d.interval_s = 480;
  FTH_ENSURE(fth_goodput(&d, 10000, U).expected_time_s > r.expected_time_s);
  /* Failures faster than restarts: the run never finishes. */
  d.interval_s = 0;
  d.restart_s = 20000;
  FTH_ENSURE(fth_goodput(&d, 10000, U).goodput == 0.0);
  /* No failures: the useful time itself. */
  fth_goodput_def none = fth_goodput_def_default();
  FTH_ENSURE_NEAR(U, fth_goodput(&none, 10000, U).expected_time_s, 1e-12);
  d.pue = 0.5;
  FTH_ENSURE(fth_goodput_check(&d, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "pue") == 0);
  return 0;
}
