/* fth_schedule.h: pipeline-parallel schedules as a table, one row each.
 *
 * A step on the slowest stage is m micro-batches of forward + backward plus
 * the bubble. Every schedule fathom knows is described by the same few
 * numbers (a new schedule is a new row in fth_schedule.c and its test):
 *   bubble   = (a p + b) (cf t_f + cb t_b + cw t_w) / v^interleaved
 *              t_f, t_b: one micro-batch's forward and whole backward on the
 *              stage; t_w: the weight-gradient part of t_b; a p + b stage
 *              boundaries (p - 1, or p / 2 - 1 for a bidirectional pipeline)
 *   in-flight micro-batches whose activations the first stage holds
 *   sends of the stage boundary's activation per micro-batch (x v chunks)
 *   weight copies each GPU keeps (DualPipe keeps two)
 *   what it overlaps: the share of the layer and pipeline collectives it
 *   hides under the other direction's computation at least. */
#ifndef FTH_SCHEDULE_H
#define FTH_SCHEDULE_H

#include "fth_common.h"

typedef enum fth_pp_schedule {
  FTH_PP_GPIPE = 0,       ///< all forwards, then all backwards (Huang et al. 2019)
  FTH_PP_1F1B = 1,        ///< one-forward-one-backward, PipeDream-flush (Narayanan et al. 2021)
  FTH_PP_INTERLEAVED = 2, ///< 1F1B with v virtual stages per GPU (Narayanan et al. 2021, Sec. 2.2)
  FTH_PP_ZB_H1 = 3,       ///< zero-bubble H1 (Qi et al. 2023): backward split, W passes fill the bubble
  FTH_PP_DUALPIPE = 4,    ///< DeepSeek-V3's bidirectional pipeline (DeepSeek-AI 2024, Sec. 3.2.1)
  FTH_PP_COUNT
} fth_pp_schedule;

/// One row of the schedule table.
typedef struct fth_schedule {
  const char *name;        ///< spelling in inputs and outputs
  int interleaved;         ///< runs v > 1 model chunks per GPU (needs virtual_stages > 1)
  int holds_all;           ///< the first stage holds every micro-batch (GPipe); else min(m, p)
  double inflight_extra;   ///< micro-batches held beyond min(m, p)
  int even_stages;         ///< feeds both ends: needs an even number of stages (>= 2) and of micro-batches
  double stage_a, stage_b; ///< stage boundaries in the bubble: a p + b
  double bubble_f;         ///< coefficient of t_f in the bubble, per stage boundary
  double bubble_b;         ///< coefficient of t_b (the whole backward)
  double bubble_w;         ///< coefficient of t_w (its weight-gradient part)
  double sends_per_micro;  ///< activation hand-offs per micro-batch per chunk (fwd + bwd)
  double weight_copies;    ///< model replicas each GPU stores
  double comm_hidden;      ///< share of layer and PP collectives hidden in the passes the
                           ///< schedule pairs (fth_pp_paired_share; 0: the workload's)
  const char *source;      ///< where the formulas come from
} fth_schedule;

/// The row of `s`; NULL when out of range.
const fth_schedule *fth_schedule_get(fth_pp_schedule s);

const char *fth_pp_schedule_name(fth_pp_schedule s); ///< the rows' names ("GPIPE" ... "DUALPIPE")
fth_pp_schedule fth_pp_schedule_parse(const char *name); ///< FTH_PP_COUNT when unknown

/// Bubble in seconds for `stages` stages, a stage taking fwd_s + bwd_s per
/// micro-batch (wgrad_s of bwd_s computing weight gradients), `virt`
/// virtual stages (used by interleaved rows only).
double fth_pp_bubble_s(fth_pp_schedule s, int stages, int virt, double fwd_s, double bwd_s,
                       double wgrad_s);

/// Micro-batches whose activations the busiest (first) stage holds at peak:
/// GPipe m; 1F1B and ZB-H1 min(m, p); interleaved min(m, p) x (1 + (p - 1) / (v p))
/// (Korthikanti et al. 2022, Sec. 4.2.3); DualPipe min(m, p) + 1.
double fth_pp_inflight(fth_pp_schedule s, int stages, double micro, int virt);

/// Micro-batches whose activations stage `stage` (0-based) holds at peak:
/// 1F1B and ZB-H1 min(m, p - stage) (stage s runs p - s warm-up forwards,
/// Narayanan et al. 2021 Sec. 2.2.1); every other row as its first stage
/// (GPipe holds all m everywhere; interleaved and DualPipe ranks hold chunks
/// of several stages: the first stage's count bounds them).
double fth_pp_inflight_stage(fth_pp_schedule s, int stages, int stage, double micro, int virt);

/// Chunks per GPU the schedule runs: v for interleaved rows, else 1.
double fth_pp_chunks(fth_pp_schedule s, int virt);

/// What the micro-batch count of a step must be a multiple of: 2 for rows fed
/// from both ends (even_stages), PP when more than one chunk is interleaved,
/// their least common multiple when both, else 1; 0 when no count tiles (a
/// row fed from both ends over fewer than 2 or an odd number of stages).
/// The one owner of these rules (fth_train_rework, the search's batches).
double fth_pp_micro_multiple(fth_pp_schedule s, int stages, int virt);

/* ---- the order of passes on each GPU (execution traces, fth_trace.h) ----------------------- */

/// One pass of a schedule on one GPU: the forward or the backward (its weight
/// gradients included) of micro-batch `mb` through model chunk `chunk`.
typedef struct fth_pp_pass {
  int fwd;   ///< 1 forward, 0 backward
  int mb;    ///< 0-based; DualPipe: 0 .. m/2 - 1 enter at the first GPU, m/2 .. m - 1 at the last
  int chunk; ///< interleaved: 0 .. v - 1; DualPipe: 0 (stage i), 1 (stage PP - 1 - i); else 0
} fth_pp_pass;

/// Model chunks each GPU runs passes of: v (interleaved, PP > 1), 2 (DualPipe), else 1.
int fth_pp_order_chunks(fth_pp_schedule s, int stages, int virt);

/// 0 when the schedule's order exists for these numbers, else -1 with why in
/// `why` (DualPipe's own assertion: an even m >= 2 PP; interleaved: m a multiple of PP).
int fth_pp_order_check(fth_pp_schedule s, int stages, int micro, int virt, char *why, size_t n);

/// Pass k (0 <= k < 2 m x chunks / (DualPipe: 2)) of GPU `stage` in the
/// schedule's order: GPipe all forwards then all backwards; 1F1B and ZB-H1
/// p - s - 1 warm-up forwards, then one forward one backward; interleaved
/// Megatron-LM's order (Narayanan et al. 2021 Sec. 2.2, forward_backward_
/// pipelining_with_interleaving); DualPipe the eight steps of DeepSeek's
/// reference implementation (github.com/deepseek-ai/DualPipe, dualpipe.py),
/// each forward-backward pair as its forward then its backward. O(1).
void fth_pp_order_pass(fth_pp_schedule s, int stages, int micro, int virt, int stage, long k,
                       fth_pp_pass *out);

/// Passes per GPU per step: 2 m x chunks (DualPipe: 2 m, half through each chunk).
long fth_pp_order_passes(fth_pp_schedule s, int stages, int micro, int virt);

/// Share of a GPU's chunk passes the schedule runs as overlapped forward-backward
/// pairs (DualPipe's F&B chunks), on the GPU with the fewest: 0 for schedules that
/// pair none, 1 for DualPipe without a pipeline (stages < 2).
double fth_pp_paired_share(fth_pp_schedule s, int stages, int micro);

/// Share of the first stage's passes a schedule runs in its steady state, each
/// forward beside a backward of another micro-batch (what an EP overlap made of
/// such pairs hides under): 1F1B and ZB-H1 (m - p + 1) / m, interleaved with v
/// chunks (m v - 2 (p - 1) - (v - 1) p - 1) / (m v) (Megatron-Core's A2A overlap
/// adds a warm-up micro-batch), (m - 1) / m without a pipeline, 0 for GPipe with
/// one, DualPipe's paired share (fth_pp_paired_share).
double fth_pp_steady_share(fth_pp_schedule s, int stages, int micro, int virt);

/// Where chunk `chunk` of GPU `stage` sits on its line of virtual stages: the
/// line (DualPipe: 0 fed from the first GPU, 1 from the last; else 0) and
/// the position on it (interleaved chunk c x PP + stage; DualPipe line 1: PP - 1 - stage).
int fth_pp_order_position(fth_pp_schedule s, int stages, int virt, int stage, int chunk, int *line);

/// The GPU and chunk at `position` of `line`; -1 (and nothing set) when the
/// line has no such position.
int fth_pp_order_at(fth_pp_schedule s, int stages, int virt, int line, int position, int *stage,
                    int *chunk);

#endif
