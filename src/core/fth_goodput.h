/* fth_goodput.h: a run's wall time with failures and checkpoints, and its
 * energy and cost.
 *
 * Checkpoint interval: Young 1974, tau = sqrt(2 delta M) for checkpoint write
 * time delta and system MTBF M (= one GPU's MTBF / GPUs). Expected wall time T
 * for useful work U: each interval pays delta; each failure loses half an
 * interval on average plus the restart R, and failures arrive every M:
 *   T = U (1 + delta / tau) + (T / M)(R + tau / 2)
 *   T = U (1 + delta / tau) / (1 - (R + tau / 2) / M)   (Daly 2006, first order)
 * Goodput = U / T; when (R + tau / 2) >= M the run never finishes (goodput 0).
 * Energy = GPUs x power x T x PUE; cost = GPUs x T x price per GPU-second. */
#ifndef FTH_GOODPUT_H
#define FTH_GOODPUT_H

#include "fth_common.h"

typedef struct fth_goodput_def {
  double gpu_mtbf_s; ///< mean time between failures of one GPU and its share of the node (> 0)
  double checkpoint_bytes;   ///< bytes each GPU writes per checkpoint (>= 0)
  double checkpoint_bw;      ///< bytes/s each GPU writes at (> 0 when checkpoint_bytes > 0)
  double restart_s;          ///< detect, restart and reload after a failure (>= 0)
  double interval_s;         ///< checkpoint interval; 0 = Young's optimum
  double gpu_power_w;        ///< average power per GPU incl. its share of the node (0 = no energy)
  double pue;                ///< data-centre power usage effectiveness (>= 1; 0 = 1)
  double price_per_gpu_hour; ///< currency per GPU-hour (0 = no cost)
} fth_goodput_def;

fth_goodput_def fth_goodput_def_default(void);
fth_status fth_goodput_check(const fth_goodput_def *def, fth_error *err);

typedef struct fth_goodput_result {
  double system_mtbf_s;
  double checkpoint_write_s; ///< delta
  double interval_s;         ///< tau used
  double expected_time_s;    ///< T (HUGE_VAL when the run cannot finish)
  double goodput;            ///< U / T
  double failures;           ///< expected failures over the run, T / M
  double energy_j;
  double cost;
} fth_goodput_result;

/// Wall time, goodput, energy and cost of `useful_s` of failure-free work on `gpus` GPUs.
fth_goodput_result fth_goodput(const fth_goodput_def *def, double gpus, double useful_s);

#endif
