/* fth_zero.c: ZeRO sharding and data-parallel traffic (fth_zero.h). */
#include "fth_zero.h"

#include <string.h>

static const char *const dp_names[FTH_DP_COUNT] = {"DDP", "ZERO1", "ZERO2", "ZERO3"};

const char *fth_dp_variant_name(fth_dp_variant v) {
  return (v >= 0 && v < FTH_DP_COUNT) ? dp_names[v] : NULL;
}

/* PyTorch's FSDP (FULL_SHARD) is ZeRO-3. */
static const fth_name_alias dp_aliases[] = {{"FSDP", FTH_DP_ZERO3}, {NULL, 0}};

const fth_name_alias *fth_dp_variant_aliases(void) {
  return dp_aliases;
}

fth_dp_variant fth_dp_variant_parse(const char *name) {
  for (int i = 0; i < FTH_DP_COUNT; i++)
    if (strcmp(name, dp_names[i]) == 0) return (fth_dp_variant)i;
  for (const fth_name_alias *a = dp_aliases; a->alias != NULL; a++)
    if (strcmp(name, a->alias) == 0) return (fth_dp_variant)a->value;
  return FTH_DP_COUNT;
}

fth_zero_shards fth_zero_shards_of(fth_dp_variant v, double dp) {
  /* ZeRO stage k shards the first k of optimizer, gradients, weights. */
  fth_zero_shards s;
  s.optimizer = v >= FTH_DP_ZERO1 ? dp : 1.0;
  s.gradients = v >= FTH_DP_ZERO2 ? dp : 1.0;
  s.weights = v >= FTH_DP_ZERO3 ? dp : 1.0;
  return s;
}

static double coll_time(const fth_group *g, fth_coll_op op, double bytes,
                        const fth_coll_params *coll, fth_coll_algo *algo) {
  if (algo) *algo = FTH_ALGO_AUTO;
  if (g->n == 0 || bytes <= 0) return 0.0;
  fth_coll_result c = fth_collective(op, FTH_ALGO_AUTO, bytes, g->lv, g->n, coll);
  if (algo) *algo = c.algo;
  return c.time_s;
}

fth_zero_traffic fth_zero_step_traffic(fth_dp_variant v, const fth_group *g, double params,
                                       double trained, double grad_bytes, double weight_bytes,
                                       double microbatches, const fth_coll_params *coll) {
  fth_zero_traffic t;
  /* ZeRO-1/2 re-gather only the weights the optimizer changed; ZeRO-3 gathers them all. */
  double gb = trained * grad_bytes, wb = trained * weight_bytes, all = params * weight_bytes;
  t.bytes_per_call = gb;
  t.gather_s = 0.0;
  if (v == FTH_DP_DDP) {
    t.op = FTH_COLL_ALL_REDUCE;
    t.calls = 1;
    t.bytes_per_step = gb;
    t.time_s = coll_time(g, FTH_COLL_ALL_REDUCE, gb, coll, &t.algo);
  } else if (v != FTH_DP_ZERO3) {
    t.op = FTH_COLL_REDUCE_SCATTER;
    t.calls = 1;
    t.bytes_per_step = gb + wb;
    t.gather_s = coll_time(g, FTH_COLL_ALL_GATHER, wb, coll, NULL);
    t.time_s = coll_time(g, FTH_COLL_REDUCE_SCATTER, gb, coll, &t.algo) + t.gather_s;
  } else {
    t.op = FTH_COLL_ALL_GATHER;
    t.calls = microbatches;
    t.bytes_per_step = microbatches * (2.0 * all + gb);
    t.time_s = microbatches * (2.0 * coll_time(g, FTH_COLL_ALL_GATHER, all, coll, &t.algo) +
                               coll_time(g, FTH_COLL_REDUCE_SCATTER, gb, coll, NULL));
  }
  return t;
}
