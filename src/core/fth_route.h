/* fth_route.h: MoE routing drawn from a distribution, and a round-based
 * packet-level simulation of the all-to-all it causes on a full mesh.
 *
 * Router: N tokens, each picks top_k distinct experts of E from a seeded,
 * reproducible distribution (uniform; "hot": a hot_ratio fraction of the
 * experts receive hot_weight of the routings; Zipf with exponent s; a
 * user histogram). Experts are placed on G GPUs (contiguous, round-robin,
 * or contiguous with the hot experts replicated); tokens start evenly on the
 * GPUs. Output: per-expert and per-GPU loads, the G x G byte matrix (payload
 * plus routing metadata), and imbalance statistics.
 *
 * Simulator (extends the seed "MoE Routing Simulation and Performance Model"):
 * every round each directed pair of nodes moves up to `links` packets (one per
 * link), each node sends and receives at most its NIC cap per round, and a
 * node visits destinations round-robin, at most `rr_max_packets` to one
 * destination before moving on. A round costs base_delay + packet_prep_delay +
 * packet_size / link_bw (prep overlapped with sending: base + max of the two);
 * an initial CPU delay is paid once. Two levels: nodes in clusters of
 * `cluster_size`; pairs in different clusters get inter_bw / link_bw of a
 * packet per link per round. Even load gives the closed form exactly:
 *   rounds = ceil(ceil(bytes_per_pair / packet_size) / links)
 *   time = initial_cpu_delay + rounds x round_time. */
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
  FTH_PLACE_REPLICATED_HOT, ///< contiguous; each hot expert also on `hot_replicas` GPUs
  FTH_PLACE_COUNT
} fth_placement;

const char *fth_route_dist_name(fth_route_dist d);
fth_route_dist fth_route_dist_parse(const char *name);
const char *fth_placement_name(fth_placement p);
fth_placement fth_placement_parse(const char *name);

#define FTH_ROUTE_MAX_EXPERTS 4096
#define FTH_ROUTE_MAX_GPUS    1024
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
  int hot_replicas; ///< GPUs holding each hot expert (replicated placement)
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
} fth_route_stats;

/// Route. Caller-owned outputs: expert_load[experts], gpu_load[gpus], and
/// bytes[gpus * gpus] (row = source, column = destination), all zeroed here.
/// Scratch: none beyond the caller's arrays and the stack. Deterministic in seed.
fth_status fth_route_run(const fth_route_def *def, double *expert_load, double *gpu_load,
                         double *bytes, fth_route_stats *stats, fth_error *err);

typedef struct fth_mesh_def {
  int nodes;
  int links;                  ///< links per pair of nodes (per direction)
  double link_bw;             ///< bytes/s per link
  double packet_size;         ///< bytes
  double packet_prep_s;       ///< per round
  double base_delay_s;        ///< per round
  double initial_cpu_s;       ///< once
  double nic_bytes_per_round; ///< NIC send and receive cap per node per round (0 = none)
  int rr_max_packets;         ///< packets to one destination before the next (0 = links)
  int overlap_prep;           ///< 1: preparing the next packet overlaps sending this one
  int cluster_size;           ///< nodes per cluster (0 = one cluster)
  double inter_bw;            ///< bytes/s per link between clusters (0 = link_bw)
} fth_mesh_def;

fth_mesh_def fth_mesh_def_default(void);
fth_status fth_mesh_check(const fth_mesh_def *def, fth_error *err);

/// Time of one round and of the even-load closed form for `bytes_per_pair`.
double fth_mesh_round_s(const fth_mesh_def *def);
double fth_mesh_closed_form_s(const fth_mesh_def *def, double bytes_per_pair, double *rounds);

typedef struct fth_mesh_trace_row {
  long long round;
  int src, dst;
  int packets;
  double bytes;
  double link_use; ///< packets / links of the pair this round
} fth_mesh_trace_row;

/// Called once per (round, src, dst) that moved packets; may be NULL.
typedef void (*fth_mesh_trace_fn)(void *ud, const fth_mesh_trace_row *row);

typedef struct fth_mesh_result {
  long long rounds;
  double time_s;
  double packets;
  double bytes;
} fth_mesh_result;

/// Simulate the all-to-all of `bytes[nodes * nodes]` (diagonal ignored).
/// Scratch: `remaining` of nodes * nodes doubles and `credit` of nodes * nodes
/// doubles (caller-owned). Allocation-free.
fth_status fth_mesh_simulate(const fth_mesh_def *def, const double *bytes, double *remaining,
                             double *credit, fth_mesh_trace_fn trace, void *ud,
                             fth_mesh_result *out, fth_error *err);

#endif
