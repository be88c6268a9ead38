/* ZeRO stages (Rajbhandari et al. 2020): what each shards and what it moves,
 * composed from the collectives as fth_zero.h states. DP 4 on one switched
 * 100 GB/s dimension; 1e6 parameters, fp32 gradients (4 B), bf16 weights
 * (2 B): 4 MB of gradients, 2 MB of weights per step. */
#include "fth_zero.h"
#include "test_macros.h"

#include <string.h>

static fth_group dp4(void) {
  fth_group g;
  memset(&g, 0, sizeof g);
  g.n = 1;
  g.dim = 0;
  g.size = 4;
  g.lv[0].group_size = 4;
  g.lv[0].dim_size = 4;
  g.lv[0].type = FTH_TOPO_SWITCHED;
  g.lv[0].bw_bytes_per_s = 100e9;
  return g;
}

static double coll(fth_coll_op op, double bytes) {
  fth_group g = dp4();
  fth_coll_params p = fth_coll_params_default();
  return fth_collective(op, FTH_ALGO_AUTO, bytes, g.lv, g.n, &p).time_s;
}

int zero_test(void) {
  /* Sharding: stage k divides the first k of optimizer, gradients, weights by DP. */
  fth_zero_shards s = fth_zero_shards_of(FTH_DP_DDP, 4);
  FTH_ENSURE(s.optimizer == 1 && s.gradients == 1 && s.weights == 1);
  s = fth_zero_shards_of(FTH_DP_ZERO1, 4);
  FTH_ENSURE(s.optimizer == 4 && s.gradients == 1 && s.weights == 1);
  s = fth_zero_shards_of(FTH_DP_ZERO2, 4);
  FTH_ENSURE(s.optimizer == 4 && s.gradients == 4 && s.weights == 1);
  s = fth_zero_shards_of(FTH_DP_ZERO3, 4);
  FTH_ENSURE(s.optimizer == 4 && s.gradients == 4 && s.weights == 4);

  fth_group g = dp4();
  fth_coll_params p = fth_coll_params_default();
  /* DDP: one all-reduce of the 4 MB of gradients. A ring would take
   * 2 (3/4) 4 MB / 100 GB/s = 60 us; the fastest algorithm is no slower. */
  fth_zero_traffic t = fth_zero_step_traffic(FTH_DP_DDP, &g, 1e6, 1e6, 4, 2, 8, &p);
  FTH_ENSURE(t.op == FTH_COLL_ALL_REDUCE && t.calls == 1 && t.bytes_per_call == 4e6);
  FTH_ENSURE(t.bytes_per_step == 4e6);
  FTH_ENSURE_NEAR(coll(FTH_COLL_ALL_REDUCE, 4e6), t.time_s, 1e-12);
  FTH_ENSURE(t.time_s <= 60e-6 * (1 + 1e-12));
  /* ZeRO-1 and -2: reduce-scatter the gradients, all-gather the 2 MB of
   * updated weights: (3/4)(4 + 2) MB / 100 GB/s = 45 us on a ring. */
  for (int v = FTH_DP_ZERO1; v <= FTH_DP_ZERO2; v++) {
    t = fth_zero_step_traffic((fth_dp_variant)v, &g, 1e6, 1e6, 4, 2, 8, &p);
    FTH_ENSURE(t.op == FTH_COLL_REDUCE_SCATTER && t.calls == 1);
    FTH_ENSURE(t.bytes_per_step == 6e6); /* 4 MB of gradients + 2 MB of weights */
    FTH_ENSURE_NEAR(coll(FTH_COLL_REDUCE_SCATTER, 4e6) + coll(FTH_COLL_ALL_GATHER, 2e6), t.time_s,
                    1e-12);
    FTH_ENSURE(t.time_s <= 45e-6 * (1 + 1e-12));
    /* The gather of the updated weights is the part that can run under the
     * next step's first forward. */
    FTH_ENSURE_NEAR(coll(FTH_COLL_ALL_GATHER, 2e6), t.gather_s, 1e-12);
  }
  /* ZeRO-3 over 8 micro-batches: each gathers the weights for forward and for
   * backward and reduce-scatters its gradients: 8 (2 x 15 + 30) = 480 us on a ring. */
  t = fth_zero_step_traffic(FTH_DP_ZERO3, &g, 1e6, 1e6, 4, 2, 8, &p);
  FTH_ENSURE(t.op == FTH_COLL_ALL_GATHER && t.calls == 8 && t.gather_s == 0.0);
  FTH_ENSURE(t.bytes_per_step == 8 * (2 * 2e6 + 4e6)); /* 64 MB */
  FTH_ENSURE_NEAR(8 * (2 * coll(FTH_COLL_ALL_GATHER, 2e6) + coll(FTH_COLL_REDUCE_SCATTER, 4e6)),
                  t.time_s, 1e-12);
  FTH_ENSURE(t.time_s <= 480e-6 * (1 + 1e-12));
  /* A frozen base (LoRA) with 1e4 trained adapter parameters of 1e6: DDP reduces 40 kB
   * of gradients; ZeRO-1 re-gathers only the 20 kB it updated; ZeRO-3 still gathers all
   * 2 MB of weights per pass and reduce-scatters 40 kB: 8 (2 x 2 MB + 40 kB). */
  t = fth_zero_step_traffic(FTH_DP_DDP, &g, 1e6, 1e4, 4, 2, 8, &p);
  FTH_ENSURE(t.bytes_per_step == 4e4 && t.bytes_per_call == 4e4);
  t = fth_zero_step_traffic(FTH_DP_ZERO1, &g, 1e6, 1e4, 4, 2, 8, &p);
  FTH_ENSURE(t.bytes_per_step == 6e4);
  FTH_ENSURE_NEAR(coll(FTH_COLL_ALL_GATHER, 2e4), t.gather_s, 1e-12);
  t = fth_zero_step_traffic(FTH_DP_ZERO3, &g, 1e6, 1e4, 4, 2, 8, &p);
  FTH_ENSURE(t.bytes_per_step == 8 * (2 * 2e6 + 4e4));
  FTH_ENSURE_NEAR(8 * (2 * coll(FTH_COLL_ALL_GATHER, 2e6) + coll(FTH_COLL_REDUCE_SCATTER, 4e4)),
                  t.time_s, 1e-12);
  /* A group of one moves nothing. */
  g.n = 0;
  t = fth_zero_step_traffic(FTH_DP_ZERO3, &g, 1e6, 1e6, 4, 2, 8, &p);
  FTH_ENSURE(t.time_s == 0.0);
  /* Names, with FSDP as ZeRO-3's alias. */
  FTH_ENSURE(fth_dp_variant_parse("FSDP") == FTH_DP_ZERO3);
  for (int i = 0; i < FTH_DP_COUNT; i++)
    FTH_ENSURE(fth_dp_variant_parse(fth_dp_variant_name((fth_dp_variant)i)) == (fth_dp_variant)i);
  return 0;
}
