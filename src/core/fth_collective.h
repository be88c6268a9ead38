/* fth_collective.h: time of a collective over a group that spans one or more
 * physical dimensions (alpha-beta model with per-step latency and per-peer
 * overhead; Hockney 1994; Thakur, Rabenseifner & Gropp 2005 for the
 * algorithms; NCCL's ring/tree/NVLS/PXN as the algorithm menu).
 *
 * Byte convention (what `bytes` means per op, per rank):
 *   ALL_REDUCE      size of the buffer being reduced (same on every rank)
 *   ALL_GATHER      size of the gathered OUTPUT (each rank contributes bytes/g)
 *   REDUCE_SCATTER  size of the INPUT (each rank keeps bytes/g)
 *   ALL_TO_ALL      total bytes one rank sends, its own share included
 *                   ((g-1)/g of it leaves the rank under even routing)
 *   BROADCAST       size of the buffer
 *   SEND_RECV       size of the message (one hop) */
#ifndef FTH_COLLECTIVE_H
#define FTH_COLLECTIVE_H

#include "fth_common.h"
#include "fth_topology.h"

typedef enum fth_coll_op {
  FTH_COLL_ALL_REDUCE = 0,
  FTH_COLL_ALL_GATHER,
  FTH_COLL_REDUCE_SCATTER,
  FTH_COLL_ALL_TO_ALL,
  FTH_COLL_BROADCAST,
  FTH_COLL_SEND_RECV,
  FTH_COLL_OP_COUNT
} fth_coll_op;

typedef enum fth_coll_algo {
  FTH_ALGO_AUTO = 0,     ///< fastest applicable algorithm
  FTH_ALGO_RING,         ///< one flat ring over every level (bandwidth = slowest level)
  FTH_ALGO_TREE,         ///< double binary tree / recursive halving-doubling
  FTH_ALGO_DIRECT,       ///< one-shot: every rank talks to every peer at once
  FTH_ALGO_HIERARCHICAL, ///< per level, innermost first (RS in, AR across, AG in)
  FTH_ALGO_PXN,        ///< all-to-all: aggregate via scale-up, one scale-out hop per pair of rails
  FTH_ALGO_IN_NETWORK, ///< switch-side reduction (NVLS/SHARP); only where the level offers it
  FTH_ALGO_COUNT
} fth_coll_algo;

const char *fth_coll_op_name(fth_coll_op op);        ///< "all_reduce", ...
fth_coll_op fth_coll_op_parse(const char *name);     ///< FTH_COLL_OP_COUNT when unknown
const char *fth_coll_algo_name(fth_coll_algo a);     ///< "auto", "ring", ...
fth_coll_algo fth_coll_algo_parse(const char *name); ///< FTH_ALGO_COUNT when unknown

/// Tunables shared by all collectives.
typedef struct fth_coll_params {
  double per_peer_overhead_s; ///< per distinct peer, in every all-to-all and direct exchange
  double launch_s;            ///< fixed kernel-launch cost per collective
  /// An engine's own one-kernel all-reduce inside one scale-up level (vLLM's custom
  /// all-reduce): its fixed latency, in place of the library's per-step latencies; 0 = none
  double engine_allreduce_s;
  double engine_allreduce_max_bytes; ///< the largest message it takes; 0 = any
} fth_coll_params;

fth_coll_params fth_coll_params_default(void); ///< all 0

typedef struct fth_coll_result {
  double time_s;      ///< total time of the collective
  double transfer_s;  ///< the bytes / bandwidth part, in seconds
  double latency_s;   ///< the per-step latency + overhead part
  double wire_bytes;  ///< bytes one rank sends over the busiest level
  fth_coll_algo algo; ///< algorithm used (resolved when AUTO)
} fth_coll_result;

/// Cost of `op` with `algo` on `bytes` over `levels[0..num_levels)` (innermost
/// first; a group of one GPU costs 0). Topology type changes the cost: a ring
/// dimension serves all-to-all at bisection rate, a mesh gives each peer
/// 1/(dim_size-1) of the bandwidth, a two-tier fabric adds a hop of latency.
/// Levels of one GPU are skipped. SEND_RECV is one hop at the slowest level's
/// rate under RING, TREE, DIRECT and HIERARCHICAL alike. An algorithm that does
/// not apply (IN_NETWORK unless every level offers it or on SEND_RECV and
/// ALL_TO_ALL, PXN on anything but an all-to-all over two levels or more), an
/// op or algo out of range, or more than FTH_MAX_PHYS_DIMS levels of size > 1
/// return time_s = HUGE_VAL. Never allocates.
fth_coll_result fth_collective(fth_coll_op op, fth_coll_algo algo, double bytes,
                               const fth_group_level *levels, int num_levels,
                               const fth_coll_params *params);

#endif
