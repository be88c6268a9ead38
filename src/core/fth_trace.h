/* fth_trace.h: execution traces of one training step, per rank, in the
 * Chakra format ASTRA-sim replays (fth_chakra.h), generated from the very
 * phases the step model times (fth_train_trace_work), streaming, in bounded
 * memory: a rank's nodes are written as they are made.
 *
 * Ranks and groups. A rank is its physical coordinates, innermost dimension
 * fastest (rank = sum c_d prod_{e<d} size_e). On each physical dimension a
 * view (attention: TP_Attn, CP, DP_Attn, PP; expert: TP_MoE, EP_SU, EP_SO,
 * DP_MoE, PP; fth_topology.h) splits the coordinate into its logical
 * dimensions in the order the logical topology lists them, innermost first,
 * PP outermost (so both views agree on the stage); a dimension where a view
 * maps nothing of its own is that view's implicit DP. A communication group
 * is the ranks that differ only in its kind's logical dimensions (DP: DP_Attn
 * with CP, the gradients' group); its id is 1 + kind x ranks + its lowest
 * rank, written as the pg_name of each collective and listed in the
 * comm-group file ASTRA-sim reads (--comm-group-configuration).
 *
 * One step (Narayanan et al. 2021): the schedule's order of forward and
 * backward passes on the rank's stage (GPipe: all forwards then all
 * backwards; 1F1B: p - s - 1 warm-up forwards, then one forward one backward;
 * ZB-H1 is written in 1F1B order, its weight-gradient passes inside the
 * backward). Each pass: the activation (gradient) received from the previous
 * (next) stage, every block's kernels as compute nodes with the layer
 * collectives between them, the hand-off sent on. The last micro-batch's
 * backward issues the data-parallel gradient buckets (one per block, the
 * record's bytes split evenly, chained in issue order); then the optimizer
 * and, under ZeRO-1/2, the all-gather of the updated weights. ZeRO-3 gathers
 * the weights before every pass and reduce-scatters after every backward. */
#ifndef FTH_TRACE_H
#define FTH_TRACE_H

#include "fth_chakra.h"
#include "fth_infer.h"
#include "fth_train.h"

#define FTH_TRACE_MAX_FACTORS (FTH_MAX_PHYS_DIMS * (FTH_MAX_LOGICAL_DIMS + 2))

/// One logical factor of the rank's coordinates: digit = (rank / stride) % size.
typedef struct fth_trace_factor {
  fth_logical_tag tag;
  int size;
  double stride;
} fth_trace_factor;

/// A compiled trace: the step's phases and the rank geometry. Holds a pointer
/// to its plan (training or inference), which must outlive it.
typedef struct fth_trace {
  const fth_train_plan *plan;        ///< training (NULL for inference)
  const fth_infer_plan *infer;       ///< inference: one prefill or decode iteration (else NULL)
  const fth_layout *layout;
  fth_train_work work;
  fth_train_result res;              ///< training's step (DP record, optimizer)
  int ranks, pp, microbatches;
  int passes;                        ///< per micro-batch: 2 (forward, backward) or 1 (inference)
  int group_size[FTH_COMM_KIND_COUNT]; ///< the layout's
  fth_trace_factor factor[2][FTH_TRACE_MAX_FACTORS]; ///< per view (0 attention, 1 expert)
  int n_factor[2];
} fth_trace;

/// What one rank's file holds (sums over its nodes, as written).
typedef struct fth_trace_stats {
  double nodes, bytes;
  double comp_nodes, coll_nodes, send_nodes, recv_nodes;
  double compute_us;       ///< sum of the compute nodes' duration_micros
  double flops;            ///< sum of num_ops
  double coll_bytes[FTH_COMM_KIND_COUNT]; ///< sum of comm_size per kind (PP: sends)
  double recv_bytes;       ///< PP: sum of the receives' comm_size
} fth_trace_stats;

/// Where the encoded bytes go; returns 0 on success (else the write stops and
/// fth_trace_write_rank fails with path "output"; the sink knows why).
typedef int (*fth_trace_sink)(void *ctx, const uint8_t *data, size_t n);

/// Compile the trace of `plan`'s step. FTH_ENOTSUP for what the trace
/// does not lay out (interleaved and DualPipe schedules, micro-batches not
/// whole), FTH_EINVAL if the groups it derives disagree with the layout's.
fth_status fth_trace_compile(fth_trace *t, const fth_train_plan *plan, fth_error *err);

/// Compile the trace of one iteration of an inference plan: every micro-batch's
/// forward through the pipeline (prefill: the prompt; decode: one token per
/// request at the mean context); no backward, data parallelism or optimizer.
fth_status fth_trace_compile_infer(fth_trace *t, const fth_infer_plan *plan, fth_error *err);

/// The pipeline stage of `rank` (0-based).
int fth_trace_stage(const fth_trace *t, int rank);

/// Members of the group of `kind` holding `rank`, ascending, into `members`
/// (up to `cap`); returns the group size (1 when the kind does not
/// communicate) and its id in *id (0 when size 1).
int fth_trace_group(const fth_trace *t, fth_comm_kind kind, int rank, int *members, int cap,
                    long *id);

/// The rank at stage `stage` with every other coordinate of `rank`.
int fth_trace_stage_peer(const fth_trace *t, int rank, int stage);

/// Pass k (0 <= k < passes x microbatches) of `stage` in the schedule's order
/// (inference: the forwards in micro-batch order):
/// *fwd 1 for a forward, 0 for a backward; *mb its micro-batch.
void fth_trace_pass(const fth_trace *t, int stage, int k, int *fwd, int *mb);

/// One micro-batch's passes on a stage, as the step model times them
/// (fth_phase_time_blocking: kernels with the layer collectives overlapped as
/// the workload allows); the backward includes its recomputation.
typedef struct fth_trace_stage_time {
  double pass_s[2];                            ///< [0] forward, [1] backward, on the critical path
  double kernel_s[2];                          ///< their kernels alone
  double comm_raw_s[2][FTH_COMM_KIND_COUNT];   ///< their layer collectives, raw
  double comm_exposed_s[2][FTH_COMM_KIND_COUNT]; ///< of which exposed
} fth_trace_stage_time;

void fth_trace_stage_time_of(const fth_trace *t, int stage, fth_trace_stage_time *out);

/// Stream the Chakra trace of `rank` (GlobalMetadata, then its nodes) to
/// `sink` through `buf` (scratch of `cap` bytes, at least 4 KiB); fills
/// `stats` (may be NULL). FTH_EINVAL (path "rank") for a rank outside the job;
/// FTH_ERANGE (path "output") when the sink fails.
fth_status fth_trace_write_rank(const fth_trace *t, int rank, uint8_t *buf, size_t cap,
                                fth_trace_sink sink, void *ctx, fth_trace_stats *stats,
                                fth_error *err);

#endif
