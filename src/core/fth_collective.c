/* fth_collective.c: alpha-beta costs of collectives (Hockney 1994: t = a + m / B
 * per message) with the algorithms of Thakur, Rabenseifner & Gropp 2005
 * (ring, recursive halving / doubling, Bruck, pairwise exchange), one-shot
 * direct exchange, hierarchical composition over levels, PXN all-to-all
 * (NCCL 2.12) and in-network reduction (NVLS, SHARP).
 *
 * Notation per level: g GPUs of the group on a dimension of n, per-GPU
 * bandwidth B (bytes/s per direction, all links), hop latency a; k = (g-1)/g;
 * G = the product of g over the levels. Levels of one GPU are ignored.
 *
 * What each algorithm family can use of a dimension depends on its shape
 * (ring_bw, tree_bw, a2a_bw, p2p_bw below); a leaf/spine fabric pays two hop
 * latencies per step (hop_lat). The per-peer overhead is charged once per
 * distinct peer in every all-to-all and every direct (one-shot) exchange. */
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
  for (int i = 0; name && i < FTH_COLL_OP_COUNT; i++)
    if (strcmp(name, op_names[i]) == 0) return (fth_coll_op)i;
  return FTH_COLL_OP_COUNT;
}

const char *fth_coll_algo_name(fth_coll_algo a) {
  return (a >= 0 && a < FTH_ALGO_COUNT) ? algo_names[a] : NULL;
}

fth_coll_algo fth_coll_algo_parse(const char *name) {
  for (int i = 0; name && i < FTH_ALGO_COUNT; i++)
    if (strcmp(name, algo_names[i]) == 0) return (fth_coll_algo)i;
  return FTH_ALGO_COUNT;
}

fth_coll_params fth_coll_params_default(void) {
  fth_coll_params p;
  p.per_peer_overhead_s = 0.0;
  p.launch_s = 0.0;
  p.engine_allreduce_s = 0.0;
  p.engine_allreduce_max_bytes = 0.0;
  return p;
}

/* A partial cost: bandwidth part, latency part (per-peer overhead included)
 * and the bytes one rank sends on its busiest level. */
typedef struct cost {
  double bw_s, lat_s, wire;
} cost;

static cost mk(double bw_s, double lat_s, double wire) {
  cost c;
  c.bw_s = bw_s;
  c.lat_s = lat_s;
  c.wire = wire;
  return c;
}

static const cost INF_COST = {HUGE_VAL, 0.0, 0.0};

static double total(cost c) {
  return c.bw_s + c.lat_s;
}

/* Two phases one after the other. `same_level`: both phases send on the same
 * level, so their bytes add there; otherwise the busier level counts. */
static cost seq(cost a, cost b, int same_level) {
  return mk(a.bw_s + b.bw_s, a.lat_s + b.lat_s,
            same_level ? a.wire + b.wire : fth_max(a.wire, b.wire));
}

static cost cheaper(cost a, cost b) {
  return total(b) < total(a) ? b : a;
}

static double ceil_log2(double g) {
  return g > 1.0 ? ceil(log2(g)) : 0.0;
}

/* ---- what a dimension offers each algorithm family -------------------------------------- */

/* A placed group that straddles blocks unevenly has a real-valued level (span): its worst
 * member's n_0 peers in its pod, the group's other members across (fth_topology_place). */
static double gsize(const fth_group_level *l) {
  return l->span > 0.0 ? l->span : (double)l->group_size;
}

/* GPUs on the dimension; never fewer than the group. */
static double dsize(const fth_group_level *l) {
  return fth_max((double)l->dim_size, (double)l->group_size);
}

/* Per-step latency: a leaf/spine fabric crosses two switch levels (leaf and
 * spine) between leaves, so every step pays two hops. */
static double hop_lat(const fth_group_level *l) {
  return l->type == FTH_TOPO_TWO_TIER ? 2.0 * l->latency_s : l->latency_s;
}

/* Ring algorithms. Switched fabrics give the full B. On a ring or torus
 * dimension the group runs a bidirectional ring over both neighbour links, so
 * also B (a group smaller than the dimension is modelled as its own closed
 * ring; the topology already splits B between logical dimensions sharing it).
 * On a full mesh of n each of the n - 1 links carries B / (n - 1). The group's
 * complete graph K_g splits into floor((g-1)/2) edge-disjoint Hamiltonian
 * cycles (Walecki's construction, Lucas 1892), and NCCL/RCCL run one ring per
 * channel, each bidirectional over 2 links, so rings use 2 floor((g-1)/2) of
 * the links (g = 2: the single link): B_ring = B r / (n - 1), capped at B. */
static double ring_bw(const fth_group_level *l) {
  double g = gsize(l), n = dsize(l), b = l->bw_bytes_per_s;
  if (l->type != FTH_TOPO_MESH || n <= 1.0) return b;
  double links = g <= 2.0 ? 1.0 : 2.0 * floor((g - 1.0) / 2.0);
  return b * fth_min(1.0, links / (n - 1.0));
}

/* Recursive halving / doubling and trees: one partner per step.
 * Ring or torus (g a power of two): the step at partner distance d = g / 2^j
 * moves m / 2^j bytes d hops; g senders over 2g directed links of B / 2 take
 * d m / (2^j B); summed over j = 1..log2 g: m (g^2 - 1) / (3 g B). Against the
 * (g-1)/g m of the formula this is B_tree = 3 B / (g + 1) (g <= 3: every
 * partner is a neighbour, B). Full mesh: the partner is one link, B / (n - 1). */
static double tree_bw(const fth_group_level *l) {
  double g = gsize(l), n = dsize(l), b = l->bw_bytes_per_s;
  switch (l->type) {
  case FTH_TOPO_RING:
  case FTH_TOPO_TORUS:
    return g <= 3.0 ? b : b * fth_min(1.0, 3.0 / (g + 1.0));
  case FTH_TOPO_MESH:
    return n > 1.0 ? b / (n - 1.0) : b;
  default:
    return b;
  }
}

/* Traffic to every peer at once (all-to-all, one-shot exchanges).
 * Switched: B. Full mesh: the g - 1 links to group peers, B (g - 1) / (n - 1).
 * Ring or torus, shortest-path routing, m / g to each peer: a rank's bytes
 * travel sum_d min(d, g - d) hops = m g / 4 (g even) or m (g^2 - 1) / (4 g)
 * (g odd) in all; the g ranks load 2 g directed links of B / 2 evenly, so the
 * exchange takes m g / (4 B) resp. m (g^2 - 1) / (4 g B). Against (g-1)/g m:
 * B_a2a = 4 B (g - 1) / g^2 (even) or 4 B / (g + 1) (odd); B for g <= 3. This is
 * the bisection bound made exact (the mean path is about g / 4 hops). */
static double a2a_bw(const fth_group_level *l) {
  double g = gsize(l), n = dsize(l), b = l->bw_bytes_per_s;
  switch (l->type) {
  case FTH_TOPO_MESH:
    return n > 1.0 ? b * (g - 1.0) / (n - 1.0) : b;
  case FTH_TOPO_RING:
  case FTH_TOPO_TORUS: {
    int even = fmod(g, 2.0) == 0.0;
    return b * fth_min(1.0, even ? 4.0 * (g - 1.0) / (g * g) : 4.0 / (g + 1.0));
  }
  default:
    return b;
  }
}

/* One message to one peer (pipeline stages are neighbours). Switched: B. Full
 * mesh: one link, B / (n - 1) (as RCCL's send/recv over xGMI). Ring or torus:
 * the links toward one of the two neighbours, B / 2 (n = 2: both go there). */
static double p2p_bw(const fth_group_level *l) {
  double n = dsize(l), b = l->bw_bytes_per_s;
  switch (l->type) {
  case FTH_TOPO_MESH:
    return n > 1.0 ? b / (n - 1.0) : b;
  case FTH_TOPO_RING:
  case FTH_TOPO_TORUS:
    return n > 2.0 ? b / 2.0 : b;
  default:
    return b;
  }
}

/* A dimension whose links join only GPUs that differ in this coordinate (a
 * ring, torus or mesh); a switched fabric also reaches every GPU below it. */
static int direct_links(const fth_group_level *l) {
  return l->type == FTH_TOPO_RING || l->type == FTH_TOPO_TORUS || l->type == FTH_TOPO_MESH;
}

/* ---- algorithms ------------------------------------------------------------------------- */

/* Flat ring over all levels (Thakur et al. 2005 Sec. 4.1; Patarasuk & Yuan
 * 2009): G - 1 steps per phase, each limited by the slowest level's ring
 * bandwidth and the largest hop latency. All-to-all as G - 1 rounds of
 * pairwise exchange (m / G to one peer per round); every round has some pairs
 * on the slowest level. */
static cost ring_cost(fth_coll_op op, double m, const fth_group_level *lv, int n, double peer_s) {
  double G = 1.0, b = HUGE_VAL, ba = HUGE_VAL, a = 0.0;
  for (int i = 0; i < n; i++) {
    G *= gsize(&lv[i]);
    b = fth_min(b, ring_bw(&lv[i]));
    ba = fth_min(ba, a2a_bw(&lv[i]));
    a = fth_max(a, hop_lat(&lv[i]));
  }
  double k = (G - 1.0) / G;
  switch (op) {
  case FTH_COLL_ALL_REDUCE: /* reduce-scatter then all-gather around the ring */
    return mk(2.0 * k * m / b, 2.0 * (G - 1.0) * a, 2.0 * k * m);
  case FTH_COLL_ALL_GATHER:
  case FTH_COLL_REDUCE_SCATTER:
    return mk(k * m / b, (G - 1.0) * a, k * m);
  case FTH_COLL_BROADCAST: /* pipelined chain: the last chunk leaves the root, G - 1 hops on */
    return mk(m / b, (G - 1.0) * a, m);
  case FTH_COLL_ALL_TO_ALL:
    return mk(k * m / ba, (G - 1.0) * (a + peer_s), k * m);
  default:
    return INF_COST;
  }
}

/* Recursive halving / doubling on one level (Thakur et al. 2005 Sec. 4;
 * Rabenseifner's all-reduce = halving RS + doubling AG), the double binary
 * tree broadcast (Sanders, Speck & Traeff 2009: each rank is an inner node of
 * one tree, so it sends m in all) and Bruck's all-to-all (ceil(log2 g) rounds
 * of m / 2, Bruck et al. 1997). */
static cost tree_level(fth_coll_op op, double m, const fth_group_level *l, double peer_s) {
  double g = gsize(l), k = (g - 1.0) / g, s = ceil_log2(g), b = tree_bw(l), a = hop_lat(l);
  switch (op) {
  case FTH_COLL_ALL_REDUCE:
    return mk(2.0 * k * m / b, 2.0 * s * a, 2.0 * k * m);
  case FTH_COLL_ALL_GATHER:
  case FTH_COLL_REDUCE_SCATTER:
    return mk(k * m / b, s * a, k * m);
  case FTH_COLL_BROADCAST:
    return mk(m / b, s * a, m);
  case FTH_COLL_ALL_TO_ALL:
    return mk(s * (m / 2.0) / b, s * (a + peer_s), s * m / 2.0);
  default:
    return INF_COST;
  }
}

/* Tree algorithms over several levels. Recursive halving with the partner
 * distances taken innermost first leaves m / g0 per rank after the level-0
 * steps, so the slow outer steps move the already-reduced data: RS =
 * sum_i RS_i(m / P_i) with P_i = g_0 ... g_(i-1); AG mirrors it; AR = RS + AG.
 * The pipelined tree broadcast runs at the slowest level's rate with the depth
 * of every level; Bruck's rounds fall on the level their distance crosses. */
static cost tree_cost(fth_coll_op op, double m, const fth_group_level *lv, int n, double peer_s) {
  if (n == 1) return tree_level(op, m, lv, peer_s);
  cost c = mk(0.0, 0.0, 0.0);
  double p = 1.0;
  switch (op) {
  case FTH_COLL_ALL_REDUCE:
    return seq(tree_cost(FTH_COLL_REDUCE_SCATTER, m, lv, n, peer_s),
               tree_cost(FTH_COLL_ALL_GATHER, m, lv, n, peer_s), 1);
  case FTH_COLL_ALL_GATHER:
  case FTH_COLL_REDUCE_SCATTER:
    for (int i = 0; i < n; i++) {
      c = seq(c, tree_level(op, m / p, &lv[i], peer_s), 0);
      p *= gsize(&lv[i]);
    }
    return c;
  case FTH_COLL_ALL_TO_ALL:
    for (int i = 0; i < n; i++) c = seq(c, tree_level(op, m, &lv[i], peer_s), 0);
    return c;
  case FTH_COLL_BROADCAST: {
    double b = HUGE_VAL, lat = 0.0;
    for (int i = 0; i < n; i++) {
      b = fth_min(b, tree_bw(&lv[i]));
      lat += ceil_log2(gsize(&lv[i])) * hop_lat(&lv[i]);
    }
    return mk(m / b, lat, m);
  }
  default:
    return INF_COST;
  }
}

/* One-shot exchange: every rank sends q bytes to each of the G - 1 others at
 * once. A destination uses level i's links when its coordinate i differs and
 * no switched level above i differs (that switch would reach it in one hop):
 * (g_i - 1) P_i Q_i destinations, P_i = prod_{j<i} g_j, Q_i = prod of g_j over
 * the ring/torus/mesh levels j > i (dimension-order routing there). The levels
 * work at once, so the slowest sets the time. One step of latency, one
 * overhead per peer. With one level: (g - 1) q / B_a2a. */
static cost exchange(double q, const fth_group_level *lv, int n, double peer_s) {
  double G = 1.0, bw_s = 0.0, wire = 0.0, a = 0.0, p = 1.0;
  for (int i = 0; i < n; i++) G *= gsize(&lv[i]);
  for (int i = 0; i < n; i++) {
    double qi = 1.0;
    for (int j = i + 1; j < n; j++)
      if (direct_links(&lv[j])) qi *= gsize(&lv[j]);
    double bytes = q * (gsize(&lv[i]) - 1.0) * p * qi;
    bw_s = fth_max(bw_s, bytes / a2a_bw(&lv[i]));
    wire = fth_max(wire, bytes);
    a = fth_max(a, hop_lat(&lv[i]));
    p *= gsize(&lv[i]);
  }
  return mk(bw_s, a + (G - 1.0) * peer_s, wire);
}

/* Direct (one-shot) algorithms: RS sends each peer its m / G block, AG
 * each peer this rank's m / G block, all-to-all each peer its m / G; AR is a
 * one-shot RS then a one-shot AG (two steps, two rounds of per-peer
 * overhead); broadcast has the root send all m to every peer. */
static cost direct_cost(fth_coll_op op, double m, const fth_group_level *lv, int n, double peer_s) {
  double G = 1.0;
  for (int i = 0; i < n; i++) G *= gsize(&lv[i]);
  switch (op) {
  case FTH_COLL_ALL_REDUCE: {
    cost half = exchange(m / G, lv, n, peer_s);
    return seq(half, half, 1);
  }
  case FTH_COLL_ALL_GATHER:
  case FTH_COLL_REDUCE_SCATTER:
  case FTH_COLL_ALL_TO_ALL:
    return exchange(m / G, lv, n, peer_s);
  case FTH_COLL_BROADCAST:
    return exchange(m, lv, n, peer_s);
  default:
    return INF_COST;
  }
}

/* Switch-side reduction on one level (NVLS, SHARP): for an all-reduce each
 * rank sends its m once and receives the reduced m once, the two directions
 * overlapping (m / B, one step up and one down); RS sends (g-1)/g m into the
 * switch, AG receives it from the switch's multicast; broadcast is one
 * multicast. Not for all-to-all. */
static cost in_network_level(fth_coll_op op, double m, const fth_group_level *l) {
  if (!l->in_network_reduction) return INF_COST;
  double g = gsize(l), k = (g - 1.0) / g, b = l->bw_bytes_per_s, a = hop_lat(l);
  switch (op) {
  case FTH_COLL_ALL_REDUCE:
    return mk(m / b, 2.0 * a, m);
  case FTH_COLL_ALL_GATHER:
  case FTH_COLL_REDUCE_SCATTER:
    return mk(k * m / b, a, k * m);
  case FTH_COLL_BROADCAST:
    return mk(m / b, a, m);
  default:
    return INF_COST;
  }
}

/* The fastest single-level algorithm for one level's part of a hierarchical
 * collective (ring, tree, direct or in-network, whichever is cheapest). */
static cost best_level(fth_coll_op op, double m, const fth_group_level *l, double peer_s) {
  cost c = ring_cost(op, m, l, 1, peer_s);
  c = cheaper(c, tree_level(op, m, l, peer_s));
  c = cheaper(c, direct_cost(op, m, l, 1, peer_s));
  return cheaper(c, in_network_level(op, m, l));
}

/* Per level, innermost first (Thakur et al. 2005 Sec. 4 on clusters of SMPs;
 * NCCL's intra-node RS -> inter-node AR -> intra-node AG). AR = RS over
 * level 0 of m, the recursive AR of the reduced m / g0 over the outer levels,
 * AG over level 0 of m; RS and AG are the two halves. Broadcast: across the
 * outer levels first, then inside. All-to-all in two stages: inside level 0
 * every rank first sends each local peer the blocks for all destinations with
 * that peer's local index (an all-to-all of m over g0), then the ranks of
 * equal local index exchange across the outer levels (an all-to-all of m over
 * G / g0); g0 - 1 + G/g0 - 1 peers instead of G - 1. `in_network`: every level
 * reduces in the switch (the multi-level IN_NETWORK algorithm, as NCCL's
 * NVLS + SHARP); otherwise each level takes its best algorithm. */
static cost hier_cost(fth_coll_op op, double m, const fth_group_level *lv, int n, double peer_s,
                      int in_network) {
  if (n == 1) return in_network ? in_network_level(op, m, lv) : best_level(op, m, lv, peer_s);
  double g0 = gsize(&lv[0]);
  cost inner, outer;
  switch (op) {
  case FTH_COLL_ALL_REDUCE:
    inner = hier_cost(FTH_COLL_REDUCE_SCATTER, m, lv, 1, peer_s, in_network);
    inner = seq(inner, hier_cost(FTH_COLL_ALL_GATHER, m, lv, 1, peer_s, in_network), 1);
    outer = hier_cost(op, m / g0, lv + 1, n - 1, peer_s, in_network);
    return seq(inner, outer, 0);
  case FTH_COLL_REDUCE_SCATTER:
  case FTH_COLL_ALL_GATHER:
    inner = hier_cost(op, m, lv, 1, peer_s, in_network);
    outer = hier_cost(op, m / g0, lv + 1, n - 1, peer_s, in_network);
    return seq(inner, outer, 0);
  case FTH_COLL_BROADCAST:
  case FTH_COLL_ALL_TO_ALL:
    inner = hier_cost(op, m, lv, 1, peer_s, in_network);
    outer = hier_cost(op, m, lv + 1, n - 1, peer_s, in_network);
    return seq(inner, outer, 0);
  default:
    return INF_COST;
  }
}

/* PXN all-to-all (NCCL 2.12; DeepEP's NVLink-then-RDMA forwarding). A rank's
 * blocks for the G / g0 - 1 peers of its own local index elsewhere go out on
 * its own NIC; every other block first crosses level 0 to the local GPU with
 * the destination's local index, which forwards it in one scale-out transfer.
 * Scale-up bytes: g0 - 1 local peers x (G / g0 blocks of m / G) = m (g0-1)/g0.
 * Scale-out bytes per rank: g0 local sources x (G / g0 - 1) peers x m / G =
 * m (G - g0) / G, an exchange of m g0 / G per peer over the outer levels. The
 * two stages pipeline, so the slower one sets the time; the latencies add.
 * Aggregation is the gain: G / g0 - 1 scale-out peers instead of G - g0 (plus
 * the g0 - 1 scale-up peers every all-to-all pays). */
static cost pxn_cost(fth_coll_op op, double m, const fth_group_level *lv, int n, double peer_s) {
  if (op != FTH_COLL_ALL_TO_ALL || n < 2) return INF_COST;
  double g0 = gsize(&lv[0]), G = g0;
  for (int i = 1; i < n; i++) G *= gsize(&lv[i]);
  double up_bytes = m * (g0 - 1.0) / g0;
  double up_s = up_bytes / a2a_bw(&lv[0]);
  cost out = exchange(m * g0 / G, lv + 1, n - 1, peer_s);
  return mk(fth_max(up_s, out.bw_s), hop_lat(&lv[0]) + (g0 - 1.0) * peer_s + out.lat_s,
            fth_max(up_bytes, out.wire));
}

/* Point to point between group members: a hop may cross any level, and the
 * slowest hop paces a pipeline of them. */
static cost p2p_cost(double m, const fth_group_level *lv, int n) {
  cost c = mk(0.0, 0.0, m);
  for (int i = 0; i < n; i++) {
    cost t = mk(m / p2p_bw(&lv[i]), hop_lat(&lv[i]), m);
    if (total(t) > total(c)) c = t;
  }
  return c;
}

static cost algo_cost(fth_coll_op op, fth_coll_algo a, double m, const fth_group_level *lv, int n,
                      double peer_s) {
  if (op == FTH_COLL_SEND_RECV) {
    if (a == FTH_ALGO_PXN || a == FTH_ALGO_IN_NETWORK) return INF_COST;
    return p2p_cost(m, lv, n);
  }
  switch (a) {
  case FTH_ALGO_RING:
    return ring_cost(op, m, lv, n, peer_s);
  case FTH_ALGO_TREE:
    return tree_cost(op, m, lv, n, peer_s);
  case FTH_ALGO_DIRECT:
    return direct_cost(op, m, lv, n, peer_s);
  case FTH_ALGO_HIERARCHICAL:
    return hier_cost(op, m, lv, n, peer_s, 0);
  case FTH_ALGO_PXN:
    return pxn_cost(op, m, lv, n, peer_s);
  case FTH_ALGO_IN_NETWORK:
    return hier_cost(op, m, lv, n, peer_s, 1);
  default:
    return INF_COST;
  }
}

fth_coll_result fth_collective(fth_coll_op op, fth_coll_algo algo, double bytes,
                               const fth_group_level *levels, int num_levels,
                               const fth_coll_params *params) {
  fth_coll_result r;
  memset(&r, 0, sizeof r);
  r.algo = algo == FTH_ALGO_AUTO ? FTH_ALGO_RING : algo;
  fth_coll_params p = params ? *params : fth_coll_params_default();

  /* Levels of one GPU carry nothing: drop them (innermost-first order kept). */
  fth_group_level lv[FTH_MAX_PHYS_DIMS];
  int n = 0;
  for (int i = 0; i < num_levels; i++) {
    if (levels[i].group_size <= 1) continue;
    if (n == FTH_MAX_PHYS_DIMS) {
      n = -1;
      break;
    }
    lv[n++] = levels[i];
  }
  if (n == 0) return r; /* a group of one GPU: nothing moves */
  if (n < 0 || op < 0 || op >= FTH_COLL_OP_COUNT || algo < 0 || algo >= FTH_ALGO_COUNT) {
    r.time_s = r.transfer_s = HUGE_VAL;
    return r;
  }

  cost c;
  if (algo == FTH_ALGO_AUTO) {
    c = INF_COST;
    for (int a = FTH_ALGO_RING; a < FTH_ALGO_COUNT; a++) {
      /* On one level the hierarchical algorithm is the best single-level one:
       * skip it so the report names that one. Ties keep the earlier entry. */
      if (a == FTH_ALGO_HIERARCHICAL && n < 2) continue;
      cost t = algo_cost(op, (fth_coll_algo)a, bytes, lv, n, p.per_peer_overhead_s);
      if (total(t) < total(c)) {
        c = t;
        r.algo = (fth_coll_algo)a;
      }
    }
    /* An engine's own all-reduce kernel inside one scale-up level (vLLM's custom
     * all-reduce: the peers' buffers mapped into every GPU, a one- or two-shot
     * exchange in one launch): the direct exchange's transfer with one fixed
     * latency, for messages up to its limit (larger ones go to NCCL/RCCL), where
     * that is faster. */
    if (op == FTH_COLL_ALL_REDUCE && n == 1 && p.engine_allreduce_s > 0.0 &&
        (p.engine_allreduce_max_bytes <= 0.0 || bytes <= p.engine_allreduce_max_bytes)) {
      cost d = algo_cost(op, FTH_ALGO_DIRECT, bytes, lv, n, 0.0);
      cost e = mk(d.bw_s, p.engine_allreduce_s, d.wire);
      if (d.bw_s < HUGE_VAL && total(e) < total(c)) {
        c = e;
        r.algo = FTH_ALGO_DIRECT;
      }
    }
  } else {
    c = algo_cost(op, algo, bytes, lv, n, p.per_peer_overhead_s);
  }
  if (!(total(c) < HUGE_VAL)) {
    r.time_s = r.transfer_s = HUGE_VAL;
    return r;
  }
  r.transfer_s = c.bw_s;
  r.latency_s = c.lat_s + p.launch_s; /* one launch per collective */
  r.wire_bytes = c.wire;
  r.time_s = r.transfer_s + r.latency_s;
  return r;
}
