/* fth_route.h: MoE routing drawn from a distribution, and a round-based
 * packet-level simulation of the all-to-all it causes on a full mesh.
 *
 * Router: N tokens, each picks top_k distinct experts of E from a seeded,
 * reproducible distribution (uniform; "hot": a hot_ratio fraction of the
 * experts receive hot_weight of the routings; Zipf with exponent s; a
 * user histogram). Experts are placed on G GPUs (contiguous, round-robin,
 * contiguous with the hot experts replicated, or EPLB: redundant replicas of
 * the heaviest experts packed for balance); tokens start evenly on the GPUs.
 * Output: per-expert and per-GPU loads, the G x G byte matrix (payload plus
 * routing metadata), and imbalance statistics.
 *
 * Simulator (extends the seed "MoE Routing Simulation and Performance Model",
 * github.com/forknay/moe_comms): time moves in rounds; a round costs
 * base_delay + packet_prep_delay + packet_size / link_bw (prep overlapped
 * with sending: base + max of the two) and an initial CPU delay is paid once.
 * A pair's links move up to `links` packets a round (between clusters of
 * `cluster_size` nodes, inter_bw / link_bw of that). Two schedulers share
 * what a node can send and receive:
 *  - round robin (the seed's): whole packets; a node visits destinations in
 *    turn, at most `rr_max_packets` to one before moving on, under per-round
 *    caps in whole packets (NIC, ports);
 *  - fair: every round the active flows get the max-min fair share of each
 *    node's ports (egress and ingress, inside and between clusters, and the
 *    NIC cap), in fractions of a packet (progressive filling, Bertsekas &
 *    Gallager, Data Networks, 1992, Sec. 6.5.2): a GPU's port bandwidth is
 *    shared by the flows that use it at once, as on an NVSwitch or a NIC.
 *    Rounds in which no flow finishes repeat the same shares, so they are
 *    taken together: the cost is per flow completion, not per round.
 * Even load gives the closed form exactly (fth_mesh_closed_form_s). */
#ifndef FTH_ROUTE_H
#define FTH_ROUTE_H

#include <stdint.h>

#include "fth_common.h"

typedef enum fth_route_dist {
  FTH_DIST_UNIFORM = 0,
  FTH_DIST_HOT,
  FTH_DIST_ZIPF,
  FTH_DIST_HISTOGRAM,
  FTH_DIST_COUNT
} fth_route_dist;

typedef enum fth_placement {
  FTH_PLACE_CONTIGUOUS = 0, ///< experts e*G/E .. on GPU g
  FTH_PLACE_ROUND_ROBIN,    ///< expert e on GPU e % G
  FTH_PLACE_REPLICATED_HOT, ///< contiguous; each hot expert on `hot_replicas` GPUs (load split)
  FTH_PLACE_EPLB,           ///< contiguous plus `redundant_experts` replicas, packed for balance
  FTH_PLACE_COUNT
} fth_placement;

const char *fth_route_dist_name(fth_route_dist d);
fth_route_dist fth_route_dist_parse(const char *name);
const char *fth_placement_name(fth_placement p);
fth_placement fth_placement_parse(const char *name);

typedef enum fth_mesh_sched {
  FTH_SCHED_FAIR = 0,    ///< max-min fair share of every port, per round
  FTH_SCHED_ROUND_ROBIN, ///< the seed's: whole packets, destinations in turn
  FTH_SCHED_COUNT
} fth_mesh_sched;

const char *fth_mesh_sched_name(fth_mesh_sched s);
fth_mesh_sched fth_mesh_sched_parse(const char *name);

#define FTH_ROUTE_MAX_EXPERTS 4096
#define FTH_ROUTE_MAX_GPUS    1024
#define FTH_ROUTE_MAX_SLOTS   (2 * FTH_ROUTE_MAX_EXPERTS) ///< experts plus their replicas
#define FTH_MESH_MAX_ROUNDS   1e7 ///< simulations longer than this are refused, not run

typedef struct fth_route_def {
  long long tokens;
  int experts;
  int top_k;
  int gpus;
  fth_route_dist dist;
  double hot_ratio;        ///< (0, 1]: fraction of experts that are hot
  double hot_weight;       ///< [0, 1]: fraction of routings they receive
  double zipf_s;           ///< >= 0
  const double *histogram; ///< `experts` non-negative weights (FTH_DIST_HISTOGRAM); not owned
  fth_placement placement;
  int hot_replicas;      ///< GPUs holding each hot expert (replicated placement)
  int redundant_experts; ///< extra expert slots in all (EPLB); a multiple of gpus
  uint64_t seed;
  /* bytes per routed (token, expert) pair */
  double hidden;          ///< d_model
  double act_bytes;       ///< payload precision
  double weight_bytes;    ///< routing weight precision
  double expert_id_bytes; ///< destination expert id precision
  double id_bytes;        ///< source GPU and position id precision (each)
} fth_route_def;

fth_route_def fth_route_def_default(void);
fth_status fth_route_check(const fth_route_def *def, fth_error *err);

typedef struct fth_route_stats {
  double pairs; ///< tokens x top_k
  double max_expert_load, mean_expert_load;
  double max_gpu_load, mean_gpu_load; ///< (token, expert) pairs received per GPU
  double expert_imbalance;            ///< max / mean per expert
  double gpu_imbalance;               ///< max / mean per GPU (what slows a step)
  double bytes_per_pair;
  double total_bytes, offnode_bytes;
  int replicas; ///< expert copies placed beyond one each (replicated_hot, EPLB)
} fth_route_stats;

/// Route. Caller-owned outputs: expert_load[experts], gpu_load[gpus], and
/// bytes[gpus * gpus] (row = source, column = destination), all zeroed here.
/// Scratch: none beyond the caller's arrays and the stack. Deterministic in seed.
fth_status fth_route_run(const fth_route_def *def, double *expert_load, double *gpu_load,
                         double *bytes, fth_route_stats *stats, fth_error *err);

typedef struct fth_mesh_def {
  int nodes;
  int links;                  ///< links per pair of nodes (per direction)
  double link_bw;             ///< bytes/s per link (the most one flow can reach)
  double packet_size;         ///< bytes
  double packet_prep_s;       ///< per round
  double base_delay_s;        ///< per round
  double initial_cpu_s;       ///< once
  double nic_bytes_per_round; ///< NIC send and receive cap per node per round (0 = none)
  int rr_max_packets;         ///< packets to one destination before the next (0 = links)
  int overlap_prep;           ///< 1: preparing the next packet overlaps sending this one
  int cluster_size;           ///< nodes per cluster (0, or >= nodes: one cluster)
  double inter_bw;            ///< bytes/s per link between clusters (0 = link_bw)
  double port_bw;       ///< bytes/s per direction per node to its own cluster, shared (0 = none)
  double inter_port_bw; ///< bytes/s per direction per node to other clusters, shared (0 = none)
  fth_mesh_sched sched;
  double seed_window_s; ///< the seed closed form's round: a link moves link_bw x this a round
} fth_mesh_def;

fth_mesh_def fth_mesh_def_default(void);
fth_status fth_mesh_check(const fth_mesh_def *def, fth_error *err);

/// Time of one round.
double fth_mesh_round_s(const fth_mesh_def *def);

/// fathom's closed form for an even load of `bytes_per_pair` between every
/// ordered pair: the rounds the busiest resource needs (a pair's links, a
/// node's ports at each level, its NIC cap), each in whole rounds:
///   rounds = max(ceil(p / links), ceil((c - 1) p / port), ceil((n - 1) p / nic), ...)
/// with p = bytes_per_pair / packet_size packets (rounded up to whole packets
/// under round robin; the fair scheduler lets a flow's last packet be short)
/// and port, nic in packets per round; time = initial_cpu_delay + rounds x
/// round. The fair scheduler reaches it exactly under even load; round robin
/// too when ports are not set.
double fth_mesh_closed_form_s(const fth_mesh_def *def, double bytes_per_pair, double *rounds);

/// The same bound for any byte matrix: each resource's packets over its rate
/// per round, the busiest one setting the pace (a lower bound on the
/// simulation; equal to the closed form under even load).
double fth_mesh_busiest_s(const fth_mesh_def *def, const double *bytes, double *rounds);

/// The seed's closed form, as its README writes it (moe_comms, Sec. 3.1):
///   Round_time = base_delay + floor(W / packet_size) x (packet_prep_delay + packet_size / link_bw)
///   Num_rounds = load_per_node x N / (links x N (N - 1) / 2 x W)
///   Total_time = initial_cpu_delay + Round_time x Num_rounds
/// with W = link_bw x seed_window_s, the bytes one link moves a round (the
/// seed states bandwidth in bytes per ms and fills a link up to that many
/// bytes a round: its window is 1 ms). Its assumptions: a round packs every
/// link full (W bytes), packets prepared one after another; a link carries one
/// direction a round (half duplex), so the N (N - 1) / 2 undirected pairs
/// carry all N x load_per_node bytes; Num_rounds is not rounded up. `rounds`
/// gets Num_rounds. load_per_node: the bytes one node sends to the others.
double fth_mesh_seed_closed_form_s(const fth_mesh_def *def, double load_per_node, double *rounds);

typedef struct fth_mesh_trace_row {
  long long round;  ///< the first round of the row
  long long rounds; ///< consecutive rounds it covers, each alike (1 under round robin)
  int src, dst;
  double packets;  ///< per round (a fraction under the fair scheduler)
  double bytes;    ///< moved over all its rounds
  double link_use; ///< packets / links of the pair per round
} fth_mesh_trace_row;

/// Called once per (rounds, src, dst) that moved packets; may be NULL.
typedef void (*fth_mesh_trace_fn)(void *ud, const fth_mesh_trace_row *row);

typedef struct fth_mesh_result {
  long long rounds;
  long long events;
  double time_s;
  double packets;
  double bytes;
} fth_mesh_result;

/// Simulate the all-to-all of `bytes[nodes * nodes]` (diagonal ignored).
/// Scratch: `remaining` of nodes * nodes doubles and `credit` of nodes * nodes
/// doubles (caller-owned). Allocation-free. `out->events`: share computations
/// (fair) or rounds (round robin), what the run cost.
fth_status fth_mesh_simulate(const fth_mesh_def *def, const double *bytes, double *remaining,
                             double *credit, fth_mesh_trace_fn trace, void *ud,
                             fth_mesh_result *out, fth_error *err);

#endif
