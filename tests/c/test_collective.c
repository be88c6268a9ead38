#include "fth_collective.h"
#include "test_macros.h"

#include <math.h>

static fth_group_level level(int g, int n, fth_topo_type type, double bw, double lat) {
  fth_group_level l;
  l.group_size = g;
  l.dim_size = n;
  l.type = type;
  l.bw_bytes_per_s = bw;
  l.latency_s = lat;
  l.in_network_reduction = 0;
  return l;
}

/* Ring all-reduce of M over n ranks at B and a: 2(n-1)/n M/B + 2(n-1) a, exactly. */
static int ring_exact(void) {
  const double M = 1e9, B = 1e11, a = 1e-6;
  for (int n = 2; n <= 64; n *= 2) {
    fth_group_level l = level(n, n, FTH_TOPO_SWITCHED, B, a);
    fth_coll_result r = fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_RING, M, &l, 1, NULL);
    double expect = 2.0 * (n - 1) / n * M / B + 2.0 * (n - 1) * a;
    FTH_ENSURE_NEAR(expect, r.time_s, 1e-12);
    FTH_ENSURE(r.algo == FTH_ALGO_RING);
  }
  /* n = 8: 2 x 7/8 x 1e9 / 1e11 = 17.5 ms; + 14 us = 17.514 ms. */
  fth_group_level l8 = level(8, 8, FTH_TOPO_SWITCHED, B, a);
  FTH_ENSURE_NEAR(
      17.514e-3, fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_RING, M, &l8, 1, NULL).time_s, 1e-12);
  return 0;
}

static int algorithms_by_hand(void) {
  const double M = 1e9, B = 1e11, a = 1e-6;
  fth_group_level l = level(8, 8, FTH_TOPO_SWITCHED, B, a);
  /* RS / AG ring: 7/8 x 10 ms + 7 us = 8.757 ms. */
  FTH_ENSURE_NEAR(8.757e-3,
                  fth_collective(FTH_COLL_REDUCE_SCATTER, FTH_ALGO_RING, M, &l, 1, NULL).time_s,
                  1e-12);
  FTH_ENSURE_NEAR(8.757e-3,
                  fth_collective(FTH_COLL_ALL_GATHER, FTH_ALGO_RING, M, &l, 1, NULL).time_s, 1e-12);
  /* Tree (Rabenseifner) all-reduce: 17.5 ms + 2 log2(8) a = 17.506 ms. */
  FTH_ENSURE_NEAR(17.506e-3,
                  fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_TREE, M, &l, 1, NULL).time_s, 1e-12);
  /* Direct all-to-all with 2 us per peer: 7/8 x 10 ms + 1 us + 7 x 2 us = 8.765 ms. */
  fth_coll_params p = fth_coll_params_default();
  p.per_peer_overhead_s = 2e-6;
  FTH_ENSURE_NEAR(8.765e-3,
                  fth_collective(FTH_COLL_ALL_TO_ALL, FTH_ALGO_DIRECT, M, &l, 1, &p).time_s, 1e-12);
  /* Send/recv: 10 ms + 1 us. Launch cost adds once: + 5 us. */
  p.launch_s = 5e-6;
  FTH_ENSURE_NEAR(10.006e-3, fth_collective(FTH_COLL_SEND_RECV, FTH_ALGO_AUTO, M, &l, 1, &p).time_s,
                  1e-12);
  /* In-network reduction only where offered: M / B + 2a = 10.002 ms. */
  FTH_ENSURE(
      isinf(fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_IN_NETWORK, M, &l, 1, NULL).time_s));
  l.in_network_reduction = 1;
  FTH_ENSURE_NEAR(10.002e-3,
                  fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_IN_NETWORK, M, &l, 1, NULL).time_s,
                  1e-12);
  /* AUTO picks it: faster than any ring or tree here. */
  fth_coll_result r = fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_AUTO, M, &l, 1, NULL);
  FTH_ENSURE(r.algo == FTH_ALGO_IN_NETWORK);
  /* PXN is for all-to-all only. */
  FTH_ENSURE(isinf(fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_PXN, M, &l, 1, NULL).time_s));
  /* A group of one costs nothing. */
  fth_group_level one = level(1, 8, FTH_TOPO_SWITCHED, B, a);
  FTH_ENSURE(fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_AUTO, M, &one, 1, NULL).time_s == 0.0);
  return 0;
}

/* Topology type changes the cost of the same all-to-all of M = 1 GB over 8 GPUs. */
static int topology_effects(void) {
  const double M = 1e9, B = 1e11;
  fth_group_level sw = level(8, 8, FTH_TOPO_SWITCHED, B, 0);
  fth_group_level mesh = level(8, 8, FTH_TOPO_MESH, B, 0);
  fth_group_level ring = level(8, 8, FTH_TOPO_RING, B, 0);
  /* Switched: 7/8 M / B = 8.75 ms. Full mesh of 8 with all 7 peers in the
   * group: B (7/7) -> the same. Ring of 8: bisection-bound B 4 x 7 / 64:
   * 8.75 ms / 0.4375 = 20 ms. */
  FTH_ENSURE_NEAR(
      8.75e-3, fth_collective(FTH_COLL_ALL_TO_ALL, FTH_ALGO_DIRECT, M, &sw, 1, NULL).time_s, 1e-12);
  FTH_ENSURE_NEAR(8.75e-3,
                  fth_collective(FTH_COLL_ALL_TO_ALL, FTH_ALGO_DIRECT, M, &mesh, 1, NULL).time_s,
                  1e-12);
  FTH_ENSURE_NEAR(
      20e-3, fth_collective(FTH_COLL_ALL_TO_ALL, FTH_ALGO_DIRECT, M, &ring, 1, NULL).time_s, 1e-12);
  /* A 4-GPU group on a mesh of 8 reaches its 3 peers over 3 of 7 links. A
   * ring all-reduce on the mesh uses 2 of 7 links: 2 x 3/4 M / (2B/7) = 52.5 ms. */
  fth_group_level mesh4 = level(4, 8, FTH_TOPO_MESH, B, 0);
  FTH_ENSURE_NEAR(0.75 * M / (B * 3.0 / 7.0),
                  fth_collective(FTH_COLL_ALL_TO_ALL, FTH_ALGO_DIRECT, M, &mesh4, 1, NULL).time_s,
                  1e-12);
  FTH_ENSURE_NEAR(52.5e-3,
                  fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_RING, M, &mesh4, 1, NULL).time_s,
                  1e-12);
  /* Two-tier fabric: each step crosses leaf and spine: 2a per step. */
  fth_group_level tt = level(8, 8, FTH_TOPO_TWO_TIER, B, 1e-6);
  FTH_ENSURE_NEAR(17.5e-3 + 28e-6,
                  fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_RING, M, &tt, 1, NULL).time_s,
                  1e-12);
  return 0;
}

/* Hierarchical all-reduce is never slower than one flat ring on two levels. */
static int hierarchical_property(void) {
  const double sizes[4] = {1e3, 1e6, 1e8, 1e10};
  int checked = 0;
  for (int g0 = 2; g0 <= 16; g0++) {
    for (int g1 = 2; g1 <= 64; g1 = g1 * 3 / 2 + 1) {
      for (int slow = 0; slow < 2; slow++) {
        fth_group_level lv[2];
        lv[0] = level(g0, g0, FTH_TOPO_SWITCHED, slow ? 5e10 : 4.5e11, 1e-6);
        lv[1] = level(g1, g1, FTH_TOPO_TWO_TIER, slow ? 4e11 : 5e10, 5e-6);
        for (int i = 0; i < 4; i++) {
          double h =
              fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_HIERARCHICAL, sizes[i], lv, 2, NULL)
                  .time_s;
          double r =
              fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_RING, sizes[i], lv, 2, NULL).time_s;
          FTH_ENSURE(h <= r * (1 + 1e-12));
          checked++;
        }
      }
    }
  }
  FTH_ENSURE(checked > 500);
  /* Two levels by hand: g0 = 8 at 400 GB/s, 1 us; g1 = 4 at 50 GB/s, 5 us
   * (switched); M = 1 GB; no per-peer overhead, so each level's best is the
   * one-shot direct algorithm (one latency). RS inside: 7/8 x 2.5 ms + 1 us
   * = 2.1885 ms; AR across of M/8 = 125 MB: 2 x 3/4 x 125e6 / 5e10 = 3.75 ms
   * + 2 x 5 us = 3.76 ms; AG inside as RS. Total 2 x 2.1885 + 3.76 = 8.137 ms. */
  fth_group_level lv[2];
  lv[0] = level(8, 8, FTH_TOPO_SWITCHED, 4e11, 1e-6);
  lv[1] = level(4, 4, FTH_TOPO_SWITCHED, 5e10, 5e-6);
  FTH_ENSURE_NEAR(
      8.137e-3, fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_HIERARCHICAL, 1e9, lv, 2, NULL).time_s,
      1e-12);
  /* PXN all-to-all: scale-up 7/8 x 1 GB at 400 GB/s = 2.1875 ms, scale-out
   * (32 - 8)/32 x 1 GB at 50 GB/s = 15 ms; the stages overlap: 15 ms + 1 + 5 us. */
  FTH_ENSURE_NEAR(
      15.006e-3, fth_collective(FTH_COLL_ALL_TO_ALL, FTH_ALGO_PXN, 1e9, lv, 2, NULL).time_s, 1e-12);
  return 0;
}

static int names(void) {
  FTH_ENSURE(fth_coll_op_parse("all_to_all") == FTH_COLL_ALL_TO_ALL);
  FTH_ENSURE(fth_coll_algo_parse("pxn") == FTH_ALGO_PXN);
  FTH_ENSURE(fth_coll_algo_parse("nope") == FTH_ALGO_COUNT);
  return 0;
}

int collective_test(void) {
  FTH_RUN(ring_exact());
  FTH_RUN(algorithms_by_hand());
  FTH_RUN(topology_effects());
  FTH_RUN(hierarchical_property());
  FTH_RUN(names());
  return 0;
}
