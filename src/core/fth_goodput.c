/* fth_goodput.c: failures, checkpoints, energy and cost of a run (fth_goodput.h). */
#include "fth_goodput.h"

#include <math.h>
#include <string.h>

fth_goodput_def fth_goodput_def_default(void) {
  fth_goodput_def d;
  memset(&d, 0, sizeof d);
  d.gpu_mtbf_s = HUGE_VAL;
  d.pue = 1.0;
  return d;
}

fth_status fth_goodput_check(const fth_goodput_def *d, fth_error *err) {
  if (!(d->gpu_mtbf_s > 0))
    return fth_fail(err, FTH_EINVAL, "gpu_mtbf_hours", "expected > 0, got %g", d->gpu_mtbf_s);
  if (!(d->checkpoint_bytes >= 0 && isfinite(d->checkpoint_bytes)))
    return fth_fail(err, FTH_EINVAL, "checkpoint_bytes", "expected >= 0");
  if (d->checkpoint_bytes > 0 && !fth_positive(d->checkpoint_bw))
    return fth_fail(err, FTH_EINVAL, "checkpoint_bandwidth", "expected bytes/s > 0, got %g",
                    d->checkpoint_bw);
  if (!(d->restart_s >= 0 && isfinite(d->restart_s)))
    return fth_fail(err, FTH_EINVAL, "restart_minutes", "expected >= 0");
  if (!(d->interval_s >= 0 && isfinite(d->interval_s)))
    return fth_fail(err, FTH_EINVAL, "checkpoint_interval_minutes", "expected >= 0");
  if (!(d->gpu_power_w >= 0 && isfinite(d->gpu_power_w)))
    return fth_fail(err, FTH_EINVAL, "gpu_power_watts", "expected >= 0");
  if (!(d->pue == 0 || (d->pue >= 1 && isfinite(d->pue))))
    return fth_fail(err, FTH_EINVAL, "pue", "expected >= 1, got %g", d->pue);
  if (!(d->price_per_gpu_hour >= 0 && isfinite(d->price_per_gpu_hour)))
    return fth_fail(err, FTH_EINVAL, "usd_per_gpu_hour", "expected >= 0");
  return FTH_OK;
}

fth_goodput_result fth_goodput(const fth_goodput_def *d, double gpus, double useful_s) {
  fth_goodput_result r;
  memset(&r, 0, sizeof r);
  r.system_mtbf_s = d->gpu_mtbf_s / gpus;
  r.checkpoint_write_s = d->checkpoint_bytes > 0 ? d->checkpoint_bytes / d->checkpoint_bw : 0.0;
  double M = r.system_mtbf_s, delta = r.checkpoint_write_s;
  if (!isfinite(M)) { /* no failures: no checkpoints needed */
    r.interval_s = d->interval_s;
    r.expected_time_s = useful_s * (d->interval_s > 0 ? 1.0 + delta / d->interval_s : 1.0);
  } else {
    /* Young 1974: tau = sqrt(2 delta M); without a checkpoint cost every
     * failure would lose the whole run, so an optimum needs delta > 0. */
    r.interval_s = d->interval_s > 0 ? d->interval_s : sqrt(2.0 * delta * M);
    double tau = r.interval_s;
    double denom = 1.0 - (d->restart_s + 0.5 * tau) / M;
    r.expected_time_s = (tau > 0 && denom > 0) ? useful_s * (1.0 + delta / tau) / denom : HUGE_VAL;
    r.failures = r.expected_time_s / M;
  }
  r.goodput =
      isfinite(r.expected_time_s) && r.expected_time_s > 0 ? useful_s / r.expected_time_s : 0.0;
  double pue = d->pue > 0 ? d->pue : 1.0;
  r.energy_j = gpus * d->gpu_power_w * r.expected_time_s * pue;
  r.cost = gpus * r.expected_time_s / 3600.0 * d->price_per_gpu_hour;
  return r;
}
