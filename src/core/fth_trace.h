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
 * backward passes on the rank (fth_pp_order_pass, the schedule table's one
 * owner of it: GPipe, 1F1B, ZB-H1 with its weight-gradient passes inside the
 * backward, interleaved with v model chunks per rank, DualPipe with stages i
 * and PP - 1 - i on rank i and half the micro-batches fed from each end).
 * Each pass: the activation (gradient) received from the previous (next)
 * virtual stage, the chunk's blocks' kernels as compute nodes with the layer
 * collectives between them, the hand-off sent on (interleaved: the last
 * stage's chunk k hands on to the first stage's chunk k + 1). Each chunk's
 * last backward issues the data-parallel gradient buckets of its blocks (one
 * per block, the record's bytes split evenly over the rank's blocks, chained
 * in issue order); then the optimizer and, under ZeRO-1/2, the all-gather of
 * the updated weights. ZeRO-3 gathers
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
  fth_pp_schedule schedule;          ///< training's (inference: 1F1B, forwards only)
  int virt;                          ///< the workload's virtual stages
  int chunks;                        ///< model chunks per rank (fth_pp_order_chunks)
  long stage_passes;                 ///< passes each rank runs (fth_pp_order_passes per run)
  /// micro-batches of one run of the schedule (pp_spec.microbatches_per_run; else all of
  /// the step's): the runs follow one another, each in the schedule's order
  int run_microbatches;
  long run_passes; ///< passes each rank runs a run
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
/// does not lay out (micro-batches not whole; virtual stages that do not
/// divide a stage's layers; a DualPipe with fewer than 2 PP micro-batches),
/// FTH_EINVAL if the groups it derives disagree with the layout's.
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

/// Pass k (0 <= k < stage_passes) of `stage` in the schedule's order
/// (fth_pp_order_pass; inference: the forwards in micro-batch order).
void fth_trace_pass(const fth_trace *t, int stage, long k, fth_pp_pass *out);

/// The neighbour a pass of (stage, chunk) receives from (`out` 0) or sends
/// to (`out` 1): its stage and chunk, and the hand-off's tag, the same on
/// both ends (2 (mb x v + the lower virtual stage's chunk) + 1 for a
/// gradient); 0 when there is none (the ends of the line).
int fth_trace_hop(const fth_trace *t, int stage, const fth_pp_pass *q, int out, int *peer_stage,
                  int *peer_chunk, int *tag);

/// What chunk `chunk` of `stage` computes: blocks [lo, hi) of model stage
/// `model_stage` (interleaved: an even share of the stage's; DualPipe chunk 1:
/// all of stage PP - 1 - stage), and the LM head when it is the last.
typedef struct fth_trace_piece {
  int model_stage, lo, hi, head;
  int blocks[2]; ///< the model stage's dense and routed blocks (dense first)
} fth_trace_piece;

void fth_trace_piece_of(const fth_trace *t, int stage, int chunk, fth_trace_piece *out);

/// One micro-batch's passes on a stage, as the step model times them
/// (fth_phase_time_blocking: kernels with the layer collectives overlapped as
/// the workload allows); the backward includes its recomputation.
typedef struct fth_trace_stage_time {
  double pass_s[2];                            ///< [0] forward, [1] backward, on the critical path
  double kernel_s[2];                          ///< their kernels alone
  double comm_raw_s[2][FTH_COMM_KIND_COUNT];   ///< their layer collectives, raw
  double comm_exposed_s[2][FTH_COMM_KIND_COUNT]; ///< of which exposed
} fth_trace_stage_time;

/// `chunk` -1: the stage's whole share of a micro-batch (DualPipe: the mean
/// of its two stages, as the step model times it); else one chunk's pass.
void fth_trace_stage_time_of(const fth_trace *t, int stage, int chunk, fth_trace_stage_time *out);

/// Stream the Chakra trace of `rank` (GlobalMetadata, then its nodes) to
/// `sink` through `buf` (scratch of `cap` bytes, at least 4 KiB); fills
/// `stats` (may be NULL). FTH_EINVAL (path "rank") for a rank outside the job;
/// FTH_ERANGE (path "output") when the sink fails.
fth_status fth_trace_write_rank(const fth_trace *t, int rank, uint8_t *buf, size_t cap,
                                fth_trace_sink sink, void *ctx, fth_trace_stats *stats,
                                fth_error *err);

#endif
