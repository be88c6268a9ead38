/* fth_collective.c: alpha-beta costs of collectives (Hockney 1994) with the
 * algorithms of Thakur, Rabenseifner & Gropp 2005 (ring, recursive halving /
 * doubling, Bruck), one-shot direct exchange, hierarchical (per level),
 * PXN all-to-all (NCCL 2.12) and in-network reduction (NVLS, SHARP).
 *
 * Per level: g GPUs of a dimension of n, per-GPU bandwidth B (per direction),
 * hop latency a. The shape of the dimension sets the bandwidth an algorithm
 * can use: see ring_bw and direct_bw. */
#include "fth_collective.h"

#include <math.h>
#include <string.h>

static const char *const op_names[FTH_COLL_OP_COUNT] = {
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv"};
static const char *const algo_names[FTH_ALGO_COUNT] = {
    "auto", "ring", "tree", "direct", "hierarchical", "pxn", "in_network"};

const char *fth_coll_op_name(fth_coll_op op) {
  return (op >= 0 && op < FTH_COLL_OP_COUNT) ? op_names[op] : NULL;
}

fth_coll_op fth_coll_op_parse(const char *name) {
  for (int i = 0; i < FTH_COLL_OP_COUNT; i++)
    if (strcmp(name, op_names[i]) == 0) return (fth_coll_op)i;
  return FTH_COLL_OP_COUNT;
}

const char *fth_coll_algo_name(fth_coll_algo a) {
  return (a >= 0 && a < FTH_ALGO_COUNT) ? algo_names[a] : NULL;
}

fth_coll_algo fth_coll_algo_parse(const char *name) {
  for (int i = 0; i < FTH_ALGO_COUNT; i++)
    if (strcmp(name, algo_names[i]) == 0) return (fth_coll_algo)i;
  return FTH_ALGO_COUNT;
}

fth_coll_params fth_coll_params_default(void) {
  fth_coll_params p;
  p.per_peer_overhead_s = 0.0;
  p.launch_s = 0.0;
  return p;
}

typedef struct cost {
  double bw_s, lat_s, wire;
} cost;

static cost mk(double bw_s, double lat_s, double wire) {
  cost c = {bw_s, lat_s, wire};
  return c;
}

static cost add(cost a, cost b) {
  return mk(a.bw_s + b.bw_s, a.lat_s + b.lat_s, fth_max(a.wire, b.wire));
}
static double total(cost c) {
  return c.bw_s + c.lat_s;
}
static const cost INF_COST = {HUGE_VAL, 0.0, 0.0};

/* Bandwidth a ring algorithm gets: full B on switched fabrics and on rings
 * (bidirectional rings over both neighbour links); on a full mesh of n a ring
 * uses 2 of its n - 1 links, each carrying B / (n - 1). */
static double ring_bw(const fth_group_level *l) {
  if (l->type == FTH_TOPO_MESH && l->dim_size > 2)
    return l->bw_bytes_per_s * fth_min(1.0, 2.0 / (double)(l->dim_size - 1));
  return l->bw_bytes_per_s;
}

/* Bandwidth for traffic to every peer at once (all-to-all, one-shot):
 * switched fabrics give full B; a full mesh gives the g - 1 links to group
 * peers, B (g - 1) / (n - 1); a ring is bisection-bound: g M / 4 bytes cross
 * each direction of a cut of 2 links of B / 2, so (g - 1) M / g bytes take
 * g M / (4 B): B_eff = B 4 (g - 1) / g^2, capped at B. */
static double direct_bw(const fth_group_level *l) {
  double g = (double)l->group_size, n = (double)l->dim_size;
  switch (l->type) {
  case FTH_TOPO_MESH:
    return n > 1 ? l->bw_bytes_per_s * (g - 1.0) / (n - 1.0) : l->bw_bytes_per_s;
  case FTH_TOPO_RING:
  case FTH_TOPO_TORUS:
    return l->bw_bytes_per_s * fth_min(1.0, 4.0 * (g - 1.0) / (g * g));
  default:
    return l->bw_bytes_per_s;
  }
}

/* Per-step latency: a leaf/spine fabric crosses two switch levels. */
static double hop_lat(const fth_group_level *l) {
  return l->type == FTH_TOPO_TWO_TIER ? 2.0 * l->latency_s : l->latency_s;
}

static double log2ceil(double g) {
  return g > 1 ? ceil(log2(g)) : 0.0;
}

/* A flattened view of several levels: G GPUs, the slowest bandwidths, the largest latency. */
typedef struct flat {
  double g, ring_bw, direct_bw, lat;
  int inr;
} flat;

static flat flatten(const fth_group_level *lv, int n) {
  flat f = {1.0, HUGE_VAL, HUGE_VAL, 0.0, 1};
  for (int i = 0; i < n; i++) {
    f.g *= (double)lv[i].group_size;
    f.ring_bw = fth_min(f.ring_bw, ring_bw(&lv[i]));
    f.direct_bw = fth_min(f.direct_bw, direct_bw(&lv[i]));
    f.lat = fth_max(f.lat, hop_lat(&lv[i]));
    f.inr = f.inr && lv[i].in_network_reduction;
  }
  return f;
}

static cost ring_cost(fth_coll_op op, double m, flat f) {
  double g = f.g, k = (g - 1.0) / g;
  switch (op) {
  case FTH_COLL_ALL_REDUCE: /* RS + AG around the ring */
    return mk(2.0 * k * m / f.ring_bw, 2.0 * (g - 1.0) * f.lat, 2.0 * k * m);
  case FTH_COLL_ALL_GATHER:
  case FTH_COLL_REDUCE_SCATTER:
    return mk(k * m / f.ring_bw, (g - 1.0) * f.lat, k * m);
  case FTH_COLL_BROADCAST: /* pipelined chain */
    return mk(m / f.ring_bw, (g - 1.0) * f.lat, m);
  case FTH_COLL_ALL_TO_ALL: /* g - 1 pairwise rounds of m / g */
    return mk(k * m / f.direct_bw, (g - 1.0) * f.lat, k * m);
  case FTH_COLL_SEND_RECV:
    return mk(m / f.direct_bw, f.lat, m);
  default:
    return INF_COST;
  }
}

static cost tree_cost(fth_coll_op op, double m, flat f) {
  double g = f.g, k = (g - 1.0) / g, steps = log2ceil(g);
  switch (op) {
  case FTH_COLL_ALL_REDUCE: /* Rabenseifner: recursive halving RS + doubling AG */
    return mk(2.0 * k * m / f.direct_bw, 2.0 * steps * f.lat, 2.0 * k * m);
  case FTH_COLL_ALL_GATHER:
  case FTH_COLL_REDUCE_SCATTER:
    return mk(k * m / f.direct_bw, steps * f.lat, k * m);
  case FTH_COLL_BROADCAST: /* scatter + recursive-doubling all-gather (van de Geijn) */
    return mk(2.0 * k * m / f.direct_bw, 2.0 * steps * f.lat, 2.0 * k * m);
  case FTH_COLL_ALL_TO_ALL: /* Bruck: log2 g rounds of m / 2 */
    return mk(steps * m / 2.0 / f.direct_bw, steps * f.lat, steps * m / 2.0);
  case FTH_COLL_SEND_RECV:
    return mk(m / f.direct_bw, f.lat, m);
  default:
    return INF_COST;
  }
}

static cost direct_cost(fth_coll_op op, double m, flat f, double peer_s) {
  double g = f.g, k = (g - 1.0) / g, peers = (g - 1.0) * peer_s;
  switch (op) {
  case FTH_COLL_ALL_REDUCE: /* one-shot RS then one-shot AG */
    return mk(2.0 * k * m / f.direct_bw, 2.0 * f.lat + 2.0 * peers, 2.0 * k * m);
  case FTH_COLL_ALL_GATHER:
  case FTH_COLL_REDUCE_SCATTER:
  case FTH_COLL_ALL_TO_ALL:
    return mk(k * m / f.direct_bw, f.lat + peers, k * m);
  case FTH_COLL_BROADCAST: /* the root sends the whole buffer to each peer */
    return mk((g - 1.0) * m / f.direct_bw, f.lat + peers, (g - 1.0) * m);
  case FTH_COLL_SEND_RECV:
    return mk(m / f.direct_bw, f.lat, m);
  default:
    return INF_COST;
  }
}

static cost in_network_cost(fth_coll_op op, double m, flat f) {
  if (!f.inr) return INF_COST;
  double k = (f.g - 1.0) / f.g;
  switch (op) {
  case FTH_COLL_ALL_REDUCE: /* each rank sends m once and receives the reduced m once */
    return mk(m / f.ring_bw, 2.0 * f.lat, m);
  case FTH_COLL_REDUCE_SCATTER:
  case FTH_COLL_ALL_GATHER: /* switch reduces / multicasts */
    return mk(k * m / f.ring_bw, f.lat, k * m);
  case FTH_COLL_BROADCAST:
    return mk(m / f.ring_bw, f.lat, m);
  default:
    return INF_COST;
  }
}

static cost best_single(fth_coll_op op, double m, const fth_group_level *l, double peer_s) {
  flat f = flatten(l, 1);
  cost c = ring_cost(op, m, f), t;
  t = tree_cost(op, m, f);
  if (total(t) < total(c)) c = t;
  t = direct_cost(op, m, f, peer_s);
  if (total(t) < total(c)) c = t;
  t = in_network_cost(op, m, f);
  if (total(t) < total(c)) c = t;
  return c;
}

/* Per level, innermost first (Thakur et al. 2005 Sec. 4; NCCL's tree/ring
 * across nodes): RS inside, the reduced 1/g0 across, AG inside. */
static cost hierarchical_cost(fth_coll_op op, double m, const fth_group_level *lv, int n,
                              double peer_s) {
  if (n == 1) return best_single(op, m, lv, peer_s);
  double g0 = (double)lv[0].group_size;
  switch (op) {
  case FTH_COLL_ALL_REDUCE:
    return add(add(best_single(FTH_COLL_REDUCE_SCATTER, m, lv, peer_s),
                   hierarchical_cost(op, m / g0, lv + 1, n - 1, peer_s)),
               best_single(FTH_COLL_ALL_GATHER, m, lv, peer_s));
  case FTH_COLL_REDUCE_SCATTER:
    return add(best_single(op, m, lv, peer_s),
               hierarchical_cost(op, m / g0, lv + 1, n - 1, peer_s));
  case FTH_COLL_ALL_GATHER:
    return add(hierarchical_cost(op, m / g0, lv + 1, n - 1, peer_s),
               best_single(op, m, lv, peer_s));
  case FTH_COLL_BROADCAST:
    return add(hierarchical_cost(op, m, lv + 1, n - 1, peer_s), best_single(op, m, lv, peer_s));
  case FTH_COLL_ALL_TO_ALL: {
    /* Two-stage: exchange by local index inside the level, then among the
     * ranks of equal local index across the rest; each stage moves all but
     * the part that stays, with g0 - 1 then G/g0 - 1 peers instead of G - 1. */
    return add(best_single(op, m, lv, peer_s), hierarchical_cost(op, m, lv + 1, n - 1, peer_s));
  }
  case FTH_COLL_SEND_RECV: /* a hop between groups crosses the outermost level */
    return best_single(op, m, lv + n - 1, peer_s);
  default:
    return INF_COST;
  }
}

/* PXN (NCCL 2.12): data for a peer in another node first moves over the
 * scale-up level to the local GPU on the destination's rail, which sends it
 * in one scale-out transfer; the two stages pipeline, and scale-out peers
 * are the other nodes only. */
static cost pxn_cost(fth_coll_op op, double m, const fth_group_level *lv, int n, double peer_s) {
  if (op != FTH_COLL_ALL_TO_ALL || n < 2) return INF_COST;
  double g0 = (double)lv[0].group_size;
  flat out = flatten(lv + 1, n - 1);
  double G = g0 * out.g;
  double up_bytes = m * (g0 - 1.0) / g0;
  double out_bytes = m * (G - g0) / G;
  double up_s = up_bytes / direct_bw(&lv[0]);
  double out_s = out_bytes / out.direct_bw;
  double lat = hop_lat(&lv[0]) + out.lat + (g0 - 1.0 + out.g - 1.0) * peer_s;
  return mk(fth_max(up_s, out_s), lat, fth_max(up_bytes, out_bytes));
}

static cost algo_cost(fth_coll_op op, fth_coll_algo a, double m, const fth_group_level *lv, int n,
                      double peer_s) {
  switch (a) {
  case FTH_ALGO_RING:
    return ring_cost(op, m, flatten(lv, n));
  case FTH_ALGO_TREE:
    return tree_cost(op, m, flatten(lv, n));
  case FTH_ALGO_DIRECT:
    return direct_cost(op, m, flatten(lv, n), peer_s);
  case FTH_ALGO_HIERARCHICAL:
    return hierarchical_cost(op, m, lv, n, peer_s);
  case FTH_ALGO_PXN:
    return pxn_cost(op, m, lv, n, peer_s);
  case FTH_ALGO_IN_NETWORK:
    return in_network_cost(op, m, flatten(lv, n));
  default:
    return INF_COST;
  }
}

fth_coll_result fth_collective(fth_coll_op op, fth_coll_algo algo, double bytes,
                               const fth_group_level *levels, int num_levels,
                               const fth_coll_params *params) {
  fth_coll_result r;
  memset(&r, 0, sizeof r);
  fth_coll_params p = params ? *params : fth_coll_params_default();
  double G = 1.0;
  for (int i = 0; i < num_levels; i++) G *= (double)levels[i].group_size;
  if (G <= 1.0 || num_levels <= 0 || op < 0 || op >= FTH_COLL_OP_COUNT) {
    r.algo = algo == FTH_ALGO_AUTO ? FTH_ALGO_RING : algo;
    return r;
  }
  fth_coll_algo chosen = algo;
  cost c;
  if (algo == FTH_ALGO_AUTO) {
    c = INF_COST;
    chosen = FTH_ALGO_RING;
    for (int a = FTH_ALGO_RING; a < FTH_ALGO_COUNT; a++) {
      /* On one level the hierarchical algorithm is the best single-level one: skip it
       * so the report names that one. */
      if (a == FTH_ALGO_HIERARCHICAL && num_levels < 2) continue;
      cost t = algo_cost(op, (fth_coll_algo)a, bytes, levels, num_levels, p.per_peer_overhead_s);
      if (total(t) < total(c)) {
        c = t;
        chosen = (fth_coll_algo)a;
      }
    }
  } else {
    c = algo_cost(op, algo, bytes, levels, num_levels, p.per_peer_overhead_s);
  }
  r.algo = chosen;
  r.bandwidth_s = c.bw_s;
  r.latency_s = c.lat_s + p.launch_s;
  r.wire_bytes = c.wire;
  r.time_s = isfinite(c.bw_s) ? c.bw_s + r.latency_s : HUGE_VAL;
  return r;
}
