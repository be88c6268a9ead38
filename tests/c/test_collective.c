/* test_collective.c: the alpha-beta collective model, by hand. Unless a case
 * says otherwise: M = 1e9 bytes, g = 8, B = 1e11 bytes/s, a = 1 us, so
 * M / B = 10 ms and (g-1)/g = 7/8. */
#include "fth_collective.h"
#include "test_macros.h"

#include <math.h>
#include <string.h>

static const double M = 1e9, B = 1e11, A = 1e-6;

static fth_group_level level(int g, int n, fth_topo_type type, double bw, double lat) {
  fth_group_level l;
  memset(&l, 0, sizeof l); /* span 0: a whole level (fth_topology_place sets it) */
  l.group_size = g;
  l.dim_size = n;
  l.type = type;
  l.bw_bytes_per_s = bw;
  l.latency_s = lat;
  l.in_network_reduction = 0;
  return l;
}

static double t1(fth_coll_op op, fth_coll_algo algo, double m, const fth_group_level *l,
                 const fth_coll_params *p) {
  return fth_collective(op, algo, m, l, 1, p).time_s;
}

/* An engine's own all-reduce kernel (vLLM's custom all-reduce) on a full mesh of 8 at
 * B = 1e11 bytes/s a GPU (B / 7 a link), RCCL-like a = 12 us a step, a decode message of
 * m = 16 KB. Library, direct (the fastest): two exchanges of m / 8 to each of 7 peers over
 * its own link of B / 7, 2 x 7/8 x m / B = 0.28672 us, + 2 a = 24.28672 us (the ring pays
 * 14 a). The engine's kernel: the same transfer + its 6 us = 6.28672 us. */
static int engine_allreduce(void) {
  const double m = 16384.0, a = 12e-6, xfer = 2.0 * 7.0 / 8.0 * m / B;
  fth_group_level mesh = level(8, 8, FTH_TOPO_MESH, B, a);
  fth_coll_params p = fth_coll_params_default();
  fth_coll_result lib = fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_AUTO, m, &mesh, 1, &p);
  FTH_ENSURE(lib.algo == FTH_ALGO_DIRECT);
  FTH_ENSURE_NEAR(xfer + 2.0 * a, lib.time_s, 1e-15);
  p.engine_allreduce_s = 6e-6;
  fth_coll_result eng = fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_AUTO, m, &mesh, 1, &p);
  FTH_ENSURE(eng.algo == FTH_ALGO_DIRECT);
  FTH_ENSURE_NEAR(6.28672e-6, eng.time_s, 1e-15);
  FTH_ENSURE_NEAR(xfer, eng.transfer_s, 1e-15);
  FTH_ENSURE_NEAR(6e-6, eng.latency_s, 1e-15);
  /* above its size limit the message goes to the library */
  p.engine_allreduce_max_bytes = 8192.0;
  FTH_ENSURE_NEAR(lib.time_s, t1(FTH_COLL_ALL_REDUCE, FTH_ALGO_AUTO, m, &mesh, &p), 1e-15);
  p.engine_allreduce_max_bytes = m;
  FTH_ENSURE_NEAR(6.28672e-6, t1(FTH_COLL_ALL_REDUCE, FTH_ALGO_AUTO, m, &mesh, &p), 1e-15);
  /* slower than the library: not taken; a named algorithm and other ops keep theirs */
  p.engine_allreduce_s = 30e-6;
  FTH_ENSURE_NEAR(lib.time_s, t1(FTH_COLL_ALL_REDUCE, FTH_ALGO_AUTO, m, &mesh, &p), 1e-15);
  p.engine_allreduce_s = 6e-6;
  FTH_ENSURE_NEAR(t1(FTH_COLL_ALL_REDUCE, FTH_ALGO_RING, m, &mesh, NULL),
                  t1(FTH_COLL_ALL_REDUCE, FTH_ALGO_RING, m, &mesh, &p), 1e-15);
  FTH_ENSURE_NEAR(t1(FTH_COLL_ALL_GATHER, FTH_ALGO_AUTO, m, &mesh, NULL),
                  t1(FTH_COLL_ALL_GATHER, FTH_ALGO_AUTO, m, &mesh, &p), 1e-15);
  /* across two levels (beyond one node) the engine's kernel does not apply */
  fth_group_level two[2] = {level(8, 8, FTH_TOPO_MESH, B, a), level(2, 2, FTH_TOPO_SWITCHED, B / 8, a)};
  fth_coll_params none = fth_coll_params_default();
  FTH_ENSURE_NEAR(fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_AUTO, m, two, 2, &none).time_s,
                  fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_AUTO, m, two, 2, &p).time_s, 1e-15);
  return 0;
}

/* Ring all-reduce over one level: 2(g-1)/g M/B + 2(g-1) a (Thakur et al. 2005). */
static int ring_exact(void) {
  for (int g = 2; g <= 64; g++) {
    fth_group_level l = level(g, g, FTH_TOPO_SWITCHED, B, A);
    fth_coll_result r = fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_RING, M, &l, 1, NULL);
    double expect = 2.0 * (g - 1) / g * M / B + 2.0 * (g - 1) * A;
    FTH_ENSURE_NEAR(expect, r.time_s, 1e-12);
    FTH_ENSURE_NEAR(2.0 * (g - 1) / g * M / B, r.transfer_s, 1e-12);
    FTH_ENSURE_NEAR(2.0 * (g - 1) * A, r.latency_s, 1e-12);
    FTH_ENSURE(r.algo == FTH_ALGO_RING);
  }
  /* g = 8: 2 x 7/8 x 10 ms = 17.5 ms, + 14 x 1 us = 17.514 ms; a rank sends 2 x 7/8 GB. */
  fth_group_level l8 = level(8, 8, FTH_TOPO_SWITCHED, B, A);
  fth_coll_result r = fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_RING, M, &l8, 1, NULL);
  FTH_ENSURE_NEAR(17.514e-3, r.time_s, 1e-12);
  FTH_ENSURE_NEAR(1.75e9, r.wire_bytes, 1e-12);
  return 0;
}

/* Every algorithm on one switched level of 8, per-peer overhead 2 us. */
static int algorithms_by_hand(void) {
  fth_group_level l = level(8, 8, FTH_TOPO_SWITCHED, B, A);
  fth_coll_params p = fth_coll_params_default();
  p.per_peer_overhead_s = 2e-6;
  /* Ring. RS, AG: 7/8 x 10 ms + 7 a = 8.757 ms. Broadcast (pipelined chain):
   * 10 ms + 7 a = 10.007 ms. All-to-all (7 pairwise rounds): 8.75 ms + 7 x
   * (1 + 2) us = 8.771 ms. */
  FTH_ENSURE_NEAR(8.757e-3, t1(FTH_COLL_REDUCE_SCATTER, FTH_ALGO_RING, M, &l, &p), 1e-12);
  FTH_ENSURE_NEAR(8.757e-3, t1(FTH_COLL_ALL_GATHER, FTH_ALGO_RING, M, &l, &p), 1e-12);
  FTH_ENSURE_NEAR(10.007e-3, t1(FTH_COLL_BROADCAST, FTH_ALGO_RING, M, &l, &p), 1e-12);
  FTH_ENSURE_NEAR(8.771e-3, t1(FTH_COLL_ALL_TO_ALL, FTH_ALGO_RING, M, &l, &p), 1e-12);
  /* Tree, log2 8 = 3 steps. AR: 17.5 ms + 6 a = 17.506 ms; RS, AG: 8.75 ms + 3 a
   * = 8.753 ms; double binary tree broadcast: 10 ms + 3 a = 10.003 ms; Bruck
   * all-to-all: 3 rounds of M/2 = 15 ms + 3 x (1 + 2) us = 15.009 ms. */
  FTH_ENSURE_NEAR(17.506e-3, t1(FTH_COLL_ALL_REDUCE, FTH_ALGO_TREE, M, &l, &p), 1e-12);
  FTH_ENSURE_NEAR(8.753e-3, t1(FTH_COLL_REDUCE_SCATTER, FTH_ALGO_TREE, M, &l, &p), 1e-12);
  FTH_ENSURE_NEAR(8.753e-3, t1(FTH_COLL_ALL_GATHER, FTH_ALGO_TREE, M, &l, &p), 1e-12);
  FTH_ENSURE_NEAR(10.003e-3, t1(FTH_COLL_BROADCAST, FTH_ALGO_TREE, M, &l, &p), 1e-12);
  FTH_ENSURE_NEAR(15.009e-3, t1(FTH_COLL_ALL_TO_ALL, FTH_ALGO_TREE, M, &l, &p), 1e-12);
  /* Direct. RS, AG, all-to-all: 7/8 x 10 ms + a + 7 x 2 us = 8.765 ms. AR =
   * one-shot RS + one-shot AG: 2 x 8.765 = 17.53 ms. Broadcast: the root sends
   * M to 7 peers, 70 ms + a + 14 us = 70.015 ms, 7 GB on the wire. */
  FTH_ENSURE_NEAR(8.765e-3, t1(FTH_COLL_REDUCE_SCATTER, FTH_ALGO_DIRECT, M, &l, &p), 1e-12);
  FTH_ENSURE_NEAR(8.765e-3, t1(FTH_COLL_ALL_GATHER, FTH_ALGO_DIRECT, M, &l, &p), 1e-12);
  FTH_ENSURE_NEAR(8.765e-3, t1(FTH_COLL_ALL_TO_ALL, FTH_ALGO_DIRECT, M, &l, &p), 1e-12);
  FTH_ENSURE_NEAR(17.53e-3, t1(FTH_COLL_ALL_REDUCE, FTH_ALGO_DIRECT, M, &l, &p), 1e-12);
  fth_coll_result r = fth_collective(FTH_COLL_BROADCAST, FTH_ALGO_DIRECT, M, &l, 1, &p);
  FTH_ENSURE_NEAR(70.015e-3, r.time_s, 1e-12);
  FTH_ENSURE_NEAR(7e9, r.wire_bytes, 1e-12);
  /* Send/recv: 10 ms + a = 10.001 ms, whatever the algorithm; a launch cost
   * of 5 us adds once: 10.006 ms. */
  FTH_ENSURE_NEAR(10.001e-3, t1(FTH_COLL_SEND_RECV, FTH_ALGO_RING, M, &l, &p), 1e-12);
  FTH_ENSURE_NEAR(10.001e-3, t1(FTH_COLL_SEND_RECV, FTH_ALGO_DIRECT, M, &l, &p), 1e-12);
  p.launch_s = 5e-6;
  r = fth_collective(FTH_COLL_SEND_RECV, FTH_ALGO_AUTO, M, &l, 1, &p);
  FTH_ENSURE_NEAR(10.006e-3, r.time_s, 1e-12);
  FTH_ENSURE_NEAR(6e-6, r.latency_s, 1e-12);
  FTH_ENSURE_NEAR(10e-3, r.transfer_s, 1e-12);
  FTH_ENSURE_NEAR(17.511e-3, t1(FTH_COLL_ALL_REDUCE, FTH_ALGO_TREE, M, &l, &p), 1e-12);
  /* PXN is for all-to-all over two levels or more only. */
  FTH_ENSURE(isinf(t1(FTH_COLL_ALL_TO_ALL, FTH_ALGO_PXN, M, &l, &p)));
  FTH_ENSURE(isinf(t1(FTH_COLL_ALL_REDUCE, FTH_ALGO_PXN, M, &l, &p)));
  return 0;
}

/* In-network reduction only where the level offers it. */
static int in_network(void) {
  fth_group_level l = level(8, 8, FTH_TOPO_SWITCHED, B, A);
  FTH_ENSURE(isinf(t1(FTH_COLL_ALL_REDUCE, FTH_ALGO_IN_NETWORK, M, &l, NULL)));
  FTH_ENSURE(fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_AUTO, M, &l, 1, NULL).algo !=
             FTH_ALGO_IN_NETWORK);
  l.in_network_reduction = 1;
  /* AR: M / B + 2 a = 10.002 ms; RS, AG: 7/8 x 10 ms + a = 8.751 ms; broadcast
   * (one multicast): 10.001 ms; no all-to-all or send/recv in the switch. */
  FTH_ENSURE_NEAR(10.002e-3, t1(FTH_COLL_ALL_REDUCE, FTH_ALGO_IN_NETWORK, M, &l, NULL), 1e-12);
  FTH_ENSURE_NEAR(8.751e-3, t1(FTH_COLL_REDUCE_SCATTER, FTH_ALGO_IN_NETWORK, M, &l, NULL), 1e-12);
  FTH_ENSURE_NEAR(8.751e-3, t1(FTH_COLL_ALL_GATHER, FTH_ALGO_IN_NETWORK, M, &l, NULL), 1e-12);
  FTH_ENSURE_NEAR(10.001e-3, t1(FTH_COLL_BROADCAST, FTH_ALGO_IN_NETWORK, M, &l, NULL), 1e-12);
  FTH_ENSURE(isinf(t1(FTH_COLL_ALL_TO_ALL, FTH_ALGO_IN_NETWORK, M, &l, NULL)));
  FTH_ENSURE(isinf(t1(FTH_COLL_SEND_RECV, FTH_ALGO_IN_NETWORK, M, &l, NULL)));
  /* AUTO takes it: 10.002 ms against 17.502 ms for the best of the others. */
  fth_coll_result r = fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_AUTO, M, &l, 1, NULL);
  FTH_ENSURE(r.algo == FTH_ALGO_IN_NETWORK);
  FTH_ENSURE_NEAR(10.002e-3, r.time_s, 1e-12);
  /* Two levels (8 at 400 GB/s, 1 us; 4 at 50 GB/s, 5 us), both reducing in
   * the switch: RS in the node 7/8 x 2.5 ms + 1 us = 2.1885 ms, in-network AR
   * of M / 8 across 1.25e8 / 5e10 = 2.5 ms + 10 us, AG as RS: 6.887 ms. */
  fth_group_level lv[2];
  lv[0] = level(8, 8, FTH_TOPO_SWITCHED, 4e11, 1e-6);
  lv[1] = level(4, 4, FTH_TOPO_SWITCHED, 5e10, 5e-6);
  lv[0].in_network_reduction = lv[1].in_network_reduction = 1;
  FTH_ENSURE_NEAR(6.887e-3,
                  fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_IN_NETWORK, M, lv, 2, NULL).time_s,
                  1e-12);
  /* Without it on the outer level the multi-level algorithm does not apply. */
  lv[1].in_network_reduction = 0;
  FTH_ENSURE(
      isinf(fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_IN_NETWORK, M, lv, 2, NULL).time_s));
  return 0;
}

/* Dimension shape changes the cost of the same traffic (no latency here). */
static int topology_effects(void) {
  fth_group_level sw = level(8, 8, FTH_TOPO_SWITCHED, B, 0);
  fth_group_level mesh = level(8, 8, FTH_TOPO_MESH, B, 0);
  fth_group_level ring = level(8, 8, FTH_TOPO_RING, B, 0);
  fth_group_level ring5 = level(5, 5, FTH_TOPO_TORUS, B, 0);
  fth_group_level mesh4 = level(4, 8, FTH_TOPO_MESH, B, 0);
  fth_group_level mesh2 = level(2, 8, FTH_TOPO_MESH, B, 0);
  /* All-to-all. Switched: 7/8 M / B = 8.75 ms. Full mesh of 8, all 7 peers in
   * the group: 7 of 7 links, the same 8.75 ms. Ring of 8, shortest paths:
   * M/8 to peers 1, 2, 3, 4, 3, 2, 1 hops = 16 x 1.25e8 = 2e9 byte-hops per
   * rank, 1.6e10 in all over 16 directed links of 5e10: 20 ms (= 8.75 ms /
   * (4 x 7 / 64)). Ring of 5: 1, 2, 2, 1 hops x 2e8 = 1.2e9 per rank, 6e9 over
   * 10 links of 5e10 = 12 ms (= 4/5 M / (4 B / 6)). Mesh, group of 4 of 8:
   * 3 of 7 links: 0.75e9 / (3e11 / 7) = 17.5 ms. */
  FTH_ENSURE_NEAR(8.75e-3, t1(FTH_COLL_ALL_TO_ALL, FTH_ALGO_DIRECT, M, &sw, NULL), 1e-12);
  FTH_ENSURE_NEAR(8.75e-3, t1(FTH_COLL_ALL_TO_ALL, FTH_ALGO_DIRECT, M, &mesh, NULL), 1e-12);
  FTH_ENSURE_NEAR(20e-3, t1(FTH_COLL_ALL_TO_ALL, FTH_ALGO_DIRECT, M, &ring, NULL), 1e-12);
  FTH_ENSURE_NEAR(12e-3, t1(FTH_COLL_ALL_TO_ALL, FTH_ALGO_DIRECT, M, &ring5, NULL), 1e-12);
  FTH_ENSURE_NEAR(17.5e-3, t1(FTH_COLL_ALL_TO_ALL, FTH_ALGO_DIRECT, M, &mesh4, NULL), 1e-12);
  /* Ring all-reduce. Ring dimension: bidirectional over both links, full B,
   * 17.5 ms. Full mesh of 8: K_8 holds 3 edge-disjoint Hamiltonian cycles, 6
   * of 7 links: 17.5 ms x 7/6 = 20.41667 ms. Group of 4 on a mesh of 8: one
   * cycle, 2 of 7 links: 2 x 3/4 x 1e9 / (2e11 / 7) = 52.5 ms. Pair on a mesh
   * of 8: the one link, 2 x 1/2 x 1e9 / (1e11 / 7) = 70 ms. */
  FTH_ENSURE_NEAR(17.5e-3, t1(FTH_COLL_ALL_REDUCE, FTH_ALGO_RING, M, &ring, NULL), 1e-12);
  FTH_ENSURE_NEAR(17.5e-3 * 7.0 / 6.0, t1(FTH_COLL_ALL_REDUCE, FTH_ALGO_RING, M, &mesh, NULL),
                  1e-12);
  FTH_ENSURE_NEAR(52.5e-3, t1(FTH_COLL_ALL_REDUCE, FTH_ALGO_RING, M, &mesh4, NULL), 1e-12);
  FTH_ENSURE_NEAR(70e-3, t1(FTH_COLL_ALL_REDUCE, FTH_ALGO_RING, M, &mesh2, NULL), 1e-12);
  /* Recursive halving RS on a ring of 8: distance 4 with M/2 (4 x 5e8 x 8
   * ranks = 1.6e10 byte-hops / 8e11 = 20 ms), distance 2 with M/4 (5 ms),
   * distance 1 with M/8 (1.25 ms): 26.25 ms = 8.75 ms / (3 / 9). On a full
   * mesh each step uses one link of B / 7: 8.75 x 7 = 61.25 ms. */
  FTH_ENSURE_NEAR(26.25e-3, t1(FTH_COLL_REDUCE_SCATTER, FTH_ALGO_TREE, M, &ring, NULL), 1e-12);
  FTH_ENSURE_NEAR(61.25e-3, t1(FTH_COLL_REDUCE_SCATTER, FTH_ALGO_TREE, M, &mesh, NULL), 1e-12);
  /* Send/recv: switched 10 ms; full mesh one link, 70 ms; ring of 8, the
   * links toward one neighbour, 20 ms; ring of 2, both links, 10 ms. */
  fth_group_level ring2 = level(2, 2, FTH_TOPO_RING, B, 0);
  FTH_ENSURE_NEAR(10e-3, t1(FTH_COLL_SEND_RECV, FTH_ALGO_AUTO, M, &sw, NULL), 1e-12);
  FTH_ENSURE_NEAR(70e-3, t1(FTH_COLL_SEND_RECV, FTH_ALGO_AUTO, M, &mesh, NULL), 1e-12);
  FTH_ENSURE_NEAR(20e-3, t1(FTH_COLL_SEND_RECV, FTH_ALGO_AUTO, M, &ring, NULL), 1e-12);
  FTH_ENSURE_NEAR(10e-3, t1(FTH_COLL_SEND_RECV, FTH_ALGO_AUTO, M, &ring2, NULL), 1e-12);
  /* AUTO all-to-all: the mesh and the switch tie at 8.75 ms, the ring pays 20 ms. */
  FTH_ENSURE(t1(FTH_COLL_ALL_TO_ALL, FTH_ALGO_AUTO, M, &ring, NULL) >
             2.0 * t1(FTH_COLL_ALL_TO_ALL, FTH_ALGO_AUTO, M, &mesh, NULL));
  /* Two-tier fabric: every step crosses leaf and spine, 2 a: ring AR of 8 is
   * 17.5 ms + 14 x 2 us = 17.528 ms. */
  fth_group_level tt = level(8, 8, FTH_TOPO_TWO_TIER, B, A);
  FTH_ENSURE_NEAR(17.528e-3, t1(FTH_COLL_ALL_REDUCE, FTH_ALGO_RING, M, &tt, NULL), 1e-12);
  return 0;
}

/* AUTO is the cheapest applicable algorithm and names it. */
static int auto_is_min(void) {
  fth_group_level l = level(8, 8, FTH_TOPO_SWITCHED, B, A);
  fth_coll_params p = fth_coll_params_default();
  /* AR of 1 GB, no per-peer cost: direct 2 x (8.75 ms + 1 us) = 17.502 ms
   * beats tree 17.506 and ring 17.514. */
  fth_coll_result r = fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_AUTO, M, &l, 1, &p);
  FTH_ENSURE(r.algo == FTH_ALGO_DIRECT);
  FTH_ENSURE_NEAR(17.502e-3, r.time_s, 1e-12);
  /* With 2 us per peer the direct AR costs 17.53 ms: tree wins at 17.506. */
  p.per_peer_overhead_s = 2e-6;
  r = fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_AUTO, M, &l, 1, &p);
  FTH_ENSURE(r.algo == FTH_ALGO_TREE);
  FTH_ENSURE_NEAR(17.506e-3, r.time_s, 1e-12);
  /* Over many shapes, sizes and ops AUTO equals the minimum of the others. */
  const fth_topo_type types[4] = {FTH_TOPO_SWITCHED, FTH_TOPO_MESH, FTH_TOPO_RING,
                                  FTH_TOPO_TWO_TIER};
  int checked = 0;
  for (int ti = 0; ti < 4; ti++)
    for (int g = 2; g <= 16; g += 3)
      for (double m = 1e2; m <= 1e10; m *= 100.0)
        for (int op = 0; op < FTH_COLL_OP_COUNT; op++) {
          fth_group_level lv[2];
          lv[0] = level(g, 16, types[ti], 4e11, 1e-6);
          lv[1] = level(4, 64, FTH_TOPO_TWO_TIER, 5e10, 3e-6);
          lv[0].in_network_reduction = g % 2;
          for (int nl = 1; nl <= 2; nl++) {
            double best = HUGE_VAL;
            for (int a = FTH_ALGO_RING; a < FTH_ALGO_COUNT; a++)
              best = fth_min(
                  best, fth_collective((fth_coll_op)op, (fth_coll_algo)a, m, lv, nl, &p).time_s);
            r = fth_collective((fth_coll_op)op, FTH_ALGO_AUTO, m, lv, nl, &p);
            FTH_ENSURE_NEAR(best, r.time_s, 1e-12);
            FTH_ENSURE_NEAR(r.time_s, fth_collective((fth_coll_op)op, r.algo, m, lv, nl, &p).time_s,
                            1e-12);
            checked++;
          }
        }
  FTH_ENSURE(checked > 500);
  return 0;
}

/* Two levels by hand: 8 GPUs at 400 GB/s, 1 us inside; 4 at 50 GB/s, 5 us
 * across (both switched); M = 1 GB; G = 32. */
static int two_levels_by_hand(void) {
  fth_group_level lv[2];
  lv[0] = level(8, 8, FTH_TOPO_SWITCHED, 4e11, 1e-6);
  lv[1] = level(4, 4, FTH_TOPO_SWITCHED, 5e10, 5e-6);
  /* Flat ring: 2 x 31/32 x 1e9 / 5e10 = 38.75 ms + 62 x 5 us = 39.06 ms. */
  FTH_ENSURE_NEAR(39.06e-3,
                  fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_RING, M, lv, 2, NULL).time_s, 1e-12);
  /* Hierarchical, each level's best (direct: one latency). RS inside 7/8 x
   * 2.5 ms + 1 us = 2.1885 ms; AR across of M/8 = 1.25e8: 2 x 3/4 x 1.25e8 /
   * 5e10 = 3.75 ms + 2 x 5 us; AG inside as RS: 8.137 ms. The busiest level is
   * the inner one, RS + AG = 2 x 7/8 GB. */
  fth_coll_result r = fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_HIERARCHICAL, M, lv, 2, NULL);
  FTH_ENSURE_NEAR(8.137e-3, r.time_s, 1e-12);
  FTH_ENSURE_NEAR(1.75e9, r.wire_bytes, 1e-12);
  /* Tree, halving inside first: RS 2.1875 ms + 3 x 1 us, then RS of M/8
   * across 3/4 x 1.25e8 / 5e10 = 1.875 ms + 2 x 5 us: 4.0755 ms; AR twice that. */
  FTH_ENSURE_NEAR(4.0755e-3,
                  fth_collective(FTH_COLL_REDUCE_SCATTER, FTH_ALGO_TREE, M, lv, 2, NULL).time_s,
                  1e-12);
  FTH_ENSURE_NEAR(8.151e-3,
                  fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_TREE, M, lv, 2, NULL).time_s, 1e-12);
  /* All-to-all, M/32 = 3.125e7 per peer. Direct: 7 local peers, 2.1875e8 /
   * 4e11 = 0.547 ms; 24 remote peers, 7.5e8 / 5e10 = 15 ms; at once: 15 ms +
   * 5 us. PXN: scale-up 7/8 GB / 4e11 = 2.1875 ms, scale-out 3 rail peers x
   * 2.5e8 = 7.5e8 / 5e10 = 15 ms, pipelined: 15 ms + 1 + 5 us. Hierarchical:
   * 2.1875 ms + 1 us, then 3/4 GB / 5e10 = 15 ms + 5 us: 17.1935 ms. */
  r = fth_collective(FTH_COLL_ALL_TO_ALL, FTH_ALGO_DIRECT, M, lv, 2, NULL);
  FTH_ENSURE_NEAR(15.005e-3, r.time_s, 1e-12);
  FTH_ENSURE_NEAR(7.5e8, r.wire_bytes, 1e-12);
  FTH_ENSURE_NEAR(15.006e-3,
                  fth_collective(FTH_COLL_ALL_TO_ALL, FTH_ALGO_PXN, M, lv, 2, NULL).time_s, 1e-12);
  FTH_ENSURE_NEAR(17.1935e-3,
                  fth_collective(FTH_COLL_ALL_TO_ALL, FTH_ALGO_HIERARCHICAL, M, lv, 2, NULL).time_s,
                  1e-12);
  /* With 1 us per peer: direct pays 31 peers (15.036 ms), PXN 7 + 3 (15.016
   * ms): aggregation wins and AUTO says so. */
  fth_coll_params p = fth_coll_params_default();
  p.per_peer_overhead_s = 1e-6;
  FTH_ENSURE_NEAR(15.036e-3,
                  fth_collective(FTH_COLL_ALL_TO_ALL, FTH_ALGO_DIRECT, M, lv, 2, &p).time_s, 1e-12);
  r = fth_collective(FTH_COLL_ALL_TO_ALL, FTH_ALGO_AUTO, M, lv, 2, &p);
  FTH_ENSURE(r.algo == FTH_ALGO_PXN);
  FTH_ENSURE_NEAR(15.016e-3, r.time_s, 1e-12);
  /* Send/recv across the group: the slowest hop, 1e9 / 5e10 = 20 ms + 5 us. */
  FTH_ENSURE_NEAR(20.005e-3,
                  fth_collective(FTH_COLL_SEND_RECV, FTH_ALGO_AUTO, M, lv, 2, NULL).time_s, 1e-12);
  return 0;
}

/* A 4 x 4 torus (two ring levels, 1e11 each) routes dimension by dimension:
 * each dimension carries the blocks whose coordinate there differs, 12 of 15
 * peers x M/16 = 0.75 GB, over a ring of 4 at 4 x 3/16 B = 0.75 B: 10 ms on
 * each at once. Under an NVLink-like switch of 4 at 4e11, the blocks for
 * other torus positions still cross the switch first: 12 x M/16 / 4e11 =
 * 1.875 ms inside, 10 ms on the torus. */
static int torus_exchange(void) {
  fth_group_level lv[2];
  lv[0] = level(4, 4, FTH_TOPO_TORUS, B, 0);
  lv[1] = level(4, 4, FTH_TOPO_TORUS, B, 0);
  fth_coll_result r = fth_collective(FTH_COLL_ALL_TO_ALL, FTH_ALGO_DIRECT, M, lv, 2, NULL);
  FTH_ENSURE_NEAR(10e-3, r.time_s, 1e-12);
  FTH_ENSURE_NEAR(0.75e9, r.wire_bytes, 1e-12);
  lv[0] = level(4, 4, FTH_TOPO_SWITCHED, 4e11, 0);
  r = fth_collective(FTH_COLL_ALL_TO_ALL, FTH_ALGO_DIRECT, M, lv, 2, NULL);
  FTH_ENSURE_NEAR(10e-3, r.time_s, 1e-12);
  lv[1].bw_bytes_per_s = 1e13; /* a fast torus leaves the switch as the bottleneck */
  r = fth_collective(FTH_COLL_ALL_TO_ALL, FTH_ALGO_DIRECT, M, lv, 2, NULL);
  FTH_ENSURE_NEAR(1.875e-3, r.time_s, 1e-12);
  return 0;
}

/* Hierarchical is never slower than one flat ring (nor than the flat tree)
 * on two levels, for all-reduce, reduce-scatter and all-gather. */
static int hierarchical_property(void) {
  const double sizes[5] = {1e2, 1e5, 1e7, 1e9, 1e11};
  const fth_coll_op ops[3] = {FTH_COLL_ALL_REDUCE, FTH_COLL_REDUCE_SCATTER, FTH_COLL_ALL_GATHER};
  const fth_topo_type inner[3] = {FTH_TOPO_SWITCHED, FTH_TOPO_MESH, FTH_TOPO_RING};
  const fth_topo_type outer[3] = {FTH_TOPO_TWO_TIER, FTH_TOPO_SWITCHED, FTH_TOPO_TORUS};
  fth_coll_params p = fth_coll_params_default();
  int checked = 0;
  for (int g0 = 2; g0 <= 16; g0++)
    for (int g1 = 2; g1 <= 64; g1++)
      for (int v = 0; v < 6; v++) {
        int fast_inner = v % 2, shape = v / 2;
        fth_group_level lv[2];
        lv[0] = level(g0, 16, inner[shape], fast_inner ? 4.5e11 : 5e10, shape ? 2e-6 : 5e-7);
        lv[1] = level(g1, 64, outer[shape], fast_inner ? 5e10 : 4e11, shape ? 1e-6 : 1e-5);
        p.per_peer_overhead_s = (g0 + g1) % 3 ? 0.0 : 1e-6;
        for (int s = 0; s < 5; s++)
          for (int o = 0; o < 3; o++) {
            double h = fth_collective(ops[o], FTH_ALGO_HIERARCHICAL, sizes[s], lv, 2, &p).time_s;
            double r = fth_collective(ops[o], FTH_ALGO_RING, sizes[s], lv, 2, &p).time_s;
            double t = fth_collective(ops[o], FTH_ALGO_TREE, sizes[s], lv, 2, &p).time_s;
            FTH_ENSURE(isfinite(h));
            FTH_ENSURE(h <= r * (1.0 + 1e-12));
            FTH_ENSURE(h <= t * (1.0 + 1e-12));
            checked++;
          }
      }
  FTH_ENSURE(checked == 15 * 63 * 6 * 5 * 3);
  return 0;
}

/* Groups of one, levels of one, and requests that do not apply. */
static int edges(void) {
  fth_group_level one = level(1, 8, FTH_TOPO_SWITCHED, B, A);
  fth_coll_result r = fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_AUTO, M, &one, 1, NULL);
  FTH_ENSURE(r.time_s == 0.0 && r.wire_bytes == 0.0 && r.algo == FTH_ALGO_RING);
  r = fth_collective(FTH_COLL_ALL_TO_ALL, FTH_ALGO_TREE, M, &one, 1, NULL);
  FTH_ENSURE(r.time_s == 0.0 && r.algo == FTH_ALGO_TREE);
  FTH_ENSURE(fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_AUTO, M, NULL, 0, NULL).time_s == 0.0);
  /* A level of one GPU in the list carries nothing: the slow outer level
   * below does not slow the 8-GPU ring (still 17.514 ms). */
  fth_group_level lv[2];
  lv[0] = level(8, 8, FTH_TOPO_SWITCHED, B, A);
  lv[1] = level(1, 4, FTH_TOPO_TWO_TIER, 1e9, 1e-3);
  FTH_ENSURE_NEAR(17.514e-3,
                  fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_RING, M, lv, 2, NULL).time_s, 1e-12);
  /* Out-of-range op or algorithm: not applicable. */
  FTH_ENSURE(isinf(fth_collective(FTH_COLL_OP_COUNT, FTH_ALGO_AUTO, M, lv, 1, NULL).time_s));
  FTH_ENSURE(isinf(fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_COUNT, M, lv, 1, NULL).time_s));
  /* Zero bytes still pays the steps: 14 a. */
  FTH_ENSURE_NEAR(14e-6, fth_collective(FTH_COLL_ALL_REDUCE, FTH_ALGO_RING, 0, lv, 1, NULL).time_s,
                  1e-12);
  return 0;
}

static int names(void) {
  for (int i = 0; i < FTH_COLL_OP_COUNT; i++)
    FTH_ENSURE(fth_coll_op_parse(fth_coll_op_name((fth_coll_op)i)) == (fth_coll_op)i);
  for (int i = 0; i < FTH_ALGO_COUNT; i++)
    FTH_ENSURE(fth_coll_algo_parse(fth_coll_algo_name((fth_coll_algo)i)) == (fth_coll_algo)i);
  FTH_ENSURE(fth_coll_op_parse("all_to_all") == FTH_COLL_ALL_TO_ALL);
  FTH_ENSURE(fth_coll_algo_parse("pxn") == FTH_ALGO_PXN);
  FTH_ENSURE(fth_coll_algo_parse("nope") == FTH_ALGO_COUNT);
  FTH_ENSURE(fth_coll_op_parse("nope") == FTH_COLL_OP_COUNT);
  FTH_ENSURE(fth_coll_op_name(FTH_COLL_OP_COUNT) == NULL);
  return 0;
}

int collective_test(void) {
  FTH_RUN(engine_allreduce());
  FTH_RUN(ring_exact());
  FTH_RUN(algorithms_by_hand());
  FTH_RUN(in_network());
  FTH_RUN(topology_effects());
  FTH_RUN(auto_is_min());
  FTH_RUN(two_levels_by_hand());
  FTH_RUN(torus_exchange());
  FTH_RUN(hierarchical_property());
  FTH_RUN(edges());
  FTH_RUN(names());
  return 0;
}
