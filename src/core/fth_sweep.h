/* fth_sweep.h: a sweep of training points at C speed. The base inputs are
 * compiled once into the core's definitions; per point only the swept fields
 * are reworked (fth_sweep_point), the point is compiled and evaluated with
 * nothing allocated, and the values its record writes are read from the
 * result by a column program (fth_sweep_column) that the caller builds once
 * (lua/fathom/sweep_batch.lua: which record field each output column holds).
 *
 * Points are numbered as fathom.sweep.iterate numbers them: an odometer over
 * the axes, the last axis turning fastest; the keys of one axis (a `zip:`)
 * advance together. */
#ifndef FTH_SWEEP_H
#define FTH_SWEEP_H

#include <stddef.h>

#include "fth_goodput.h"
#include "fth_train.h"

#define FTH_SWEEP_MAX_AXES 16
#define FTH_SWEEP_MAX_KEYS 32
#define FTH_SWEEP_MAX_GROUPS 64 ///< presence groups of a column program (bits of a mask)

/// What one sweep key sets in the definitions.
typedef enum fth_sweep_field {
  FTH_SWEEP_GLOBAL_BATCH = 0, ///< work.global_batch (`global_batch_size`)
  FTH_SWEEP_MICRO_BATCH,      ///< work.micro_batch (`micro_batch_size`)
  FTH_SWEEP_SEQ_LEN,          ///< work.seq_len (`seq_length`)
  FTH_SWEEP_LOGICAL_SIZE,     ///< topo.logical[index].size (a logical dimension's `size`)
  FTH_SWEEP_FIELD_COUNT
} fth_sweep_field;

typedef struct fth_sweep_key {
  fth_sweep_field field;
  int index;            ///< FTH_SWEEP_LOGICAL_SIZE: the logical dimension (0-based)
  int axis;             ///< the axis whose position picks the value
  const double *values; ///< one per position of the axis (the caller's storage)
} fth_sweep_key;

typedef struct fth_sweep_def {
  fth_node_def node;
  fth_topology_def topo;
  fth_model_def model;
  fth_train_def work;
  int n_axes;
  long long axis_len[FTH_SWEEP_MAX_AXES];
  int n_keys;
  fth_sweep_key key[FTH_SWEEP_MAX_KEYS];
  /// 1: every point's run with failures, energy and cost (fth_goodput of its
  /// total time on its GPUs), as report.training_record adds them
  int goodput;
  fth_goodput_def gp;
  /// 1: gp.checkpoint_bytes is each point's weights + optimizer states
  int gp_checkpoint_from_footprint;
} fth_sweep_def;

/// One evaluated point. `valid` 0: the core (or the one cross-field rule the
/// Lua loader adds, micro_batch <= global_batch) refused it; `err` says why.
typedef struct fth_sweep_point {
  long long idx[FTH_SWEEP_MAX_AXES]; ///< position on each axis
  fth_train_plan plan;
  fth_train_result result;
  fth_goodput_result gp; ///< when def->goodput
  int valid;
  fth_error err;
  /// the def whose node, topology and model `plan` holds compiled (its layout
  /// usable): the next point of that def reworks the plan instead of compiling
  /// it, when no key sets the topology. NULL (a zeroed point): compile.
  const struct fth_sweep_def *compiled_for;
} fth_sweep_point;

/// Points in the sweep (the product of the axis lengths; 1 without axes);
/// -1 when a length is < 1 or the product exceeds 2^53.
long long fth_sweep_count(const fth_sweep_def *def);

/// Check the keys (fields, axes, logical indices). FTH_EINVAL with a path.
fth_status fth_sweep_check(const fth_sweep_def *def, fth_error *err);

/// Evaluate point `i` (0-based) into `out` (zeroed before its first point).
/// Allocation-free; a sweep whose keys only set the workload compiles once and
/// reworks the plan per point (fth_train_rework: the same plan as compiling).
void fth_sweep_point_eval(const fth_sweep_def *def, long long i, fth_sweep_point *out);

/* Column program: what each output column of a record holds. */

/// Where a column's value comes from.
typedef enum fth_sweep_src {
  FTH_SWEEP_SRC_TEXT = 0, ///< constant text (pre-rendered by the caller), `a` indexes it
  FTH_SWEEP_SRC_LABEL,    ///< the value of sweep key `a` at this point (pre-rendered per position)
  FTH_SWEEP_SRC_RESULT,   ///< a number of the result (fth_sweep_value `a`, arguments b, c)
  FTH_SWEEP_SRC_BOOL,     ///< a truth of the result (fth_sweep_value `a`, arguments b, c)
  FTH_SWEEP_SRC_NAME,     ///< a name of the result (fth_sweep_value `a`, arguments b, c)
  FTH_SWEEP_SRC_ERROR,    ///< the error text of an invalid point
  FTH_SWEEP_SRC_COUNT
} fth_sweep_src;

/// The values a column may read (arguments in brackets).
typedef enum fth_sweep_value {
  FTH_SV_STEP_TIME = 0, FTH_SV_TOTAL_TIME, FTH_SV_STEPS, FTH_SV_TOKENS_PER_STEP, FTH_SV_TOKENS_PER_S,
  FTH_SV_MFU, FTH_SV_HFU, FTH_SV_ACHIEVED_FLOPS, FTH_SV_COMPUTE_S, FTH_SV_MEMORY_EXPOSED_S,
  FTH_SV_RECOMPUTE_S, FTH_SV_BUBBLE_S, FTH_SV_OPTIMIZER_S, FTH_SV_OFFLOAD_EXPOSED_S,
  FTH_SV_DP_INTERFERENCE_S, FTH_SV_BUBBLE_FRACTION,
  FTH_SV_COMM,       ///< [kind, fth_sweep_comm_field]
  FTH_SV_PART,       ///< [pass (0 fwd, 1 bwd), part * 4 + (0 flops, 1 compute_s, 2 bytes, 3 memory_s)]
  FTH_SV_PASS_SUM,   ///< [pass, (0 flops, 1 compute_s, 2 bytes, 3 memory_s)]: sum over the parts
  FTH_SV_RATIO,      ///< [0 comm_to_compute, 1 exposed_comm_to_step, 2 memory_to_compute, 3 compute_fraction]
  FTH_SV_COMPONENT,  ///< [component]: bytes
  FTH_SV_TIER,       ///< [tier, (0 used, 1 capacity, 2 free, 3 fits)]
  FTH_SV_PEAK_BYTES, FTH_SV_HEADROOM_BYTES, FTH_SV_FITS, FTH_SV_OVERFLOW_TIER,
  FTH_SV_DEGREE,     ///< [fth_sweep_degree]
  FTH_SV_WORK,       ///< [0 global_batch, 1 micro_batch, 2 seq_len]
  /// [0 expected_time_s, 1 goodput, 2 failures, 3 system_mtbf_s, 4 interval_s,
  ///  5 checkpoint_write_s, 6 energy in kWh, 7 cost]
  FTH_SV_GOODPUT,
  FTH_SV_COUNT
} fth_sweep_value;

typedef enum fth_sweep_comm_field {
  FTH_SC_OP = 0, FTH_SC_ALGORITHM, FTH_SC_GROUP_SIZE, FTH_SC_FABRIC, FTH_SC_LEVELS, FTH_SC_BYTES_PER_CALL,
  FTH_SC_CALLS, FTH_SC_BYTES_PER_STEP, FTH_SC_RAW_S, FTH_SC_HIDDEN_S, FTH_SC_EXPOSED_S, FTH_SC_COUNT
} fth_sweep_comm_field;

typedef enum fth_sweep_degree {
  FTH_SD_TP = 0, FTH_SD_TP_MOE, FTH_SD_CP, FTH_SD_DP, FTH_SD_DP_MOE, FTH_SD_EP, FTH_SD_EP_SU, FTH_SD_EP_SO,
  FTH_SD_PP, FTH_SD_LAYERS_PER_STAGE, FTH_SD_GPUS, FTH_SD_MICROBATCHES, FTH_SD_LOCAL_EXPERTS,
  FTH_SD_PARAMS_TOTAL, FTH_SD_PARAMS_ACTIVE, FTH_SD_COUNT
} fth_sweep_degree;

/// Presence groups: a column is written only where its group is present (a
/// record without the key leaves the cell empty, as fathom.format.csv does).
typedef enum fth_sweep_group {
  FTH_SG_ALWAYS = 0, ///< every record (the sweep point's label)
  FTH_SG_VALID,      ///< valid records
  FTH_SG_ERROR,      ///< invalid records (`error`, `valid`)
  FTH_SG_OVERFLOW,   ///< valid records that do not fit (`overflow_tier`)
  FTH_SG_COMM,       ///< + kind: valid records that send bytes of that kind
  FTH_SG_TIER = FTH_SG_COMM + FTH_COMM_KIND_COUNT, ///< + tier: valid records whose node has the tier
  FTH_SG_COUNT = FTH_SG_TIER + FTH_TIER_COUNT
} fth_sweep_group;

typedef struct fth_sweep_column {
  fth_sweep_src src;
  int group; ///< fth_sweep_group
  int a, b, c;
  int as_integer; ///< integral values print as integers (Lua integers), not in %g
} fth_sweep_column;

/// The presence mask (bit 1 << fth_sweep_group) of a point's record.
unsigned long long fth_sweep_mask(const fth_sweep_point *p);

/// A column's number (SRC_RESULT) or truth (SRC_BOOL, 0/1) at a valid point.
double fth_sweep_number(const fth_sweep_point *p, const fth_sweep_column *col);

/// A column's name (SRC_NAME) at a valid point; `fabric` names the physical
/// dimensions (FTH_SC_FABRIC), NULL entries or a short list give "".
const char *fth_sweep_name(const fth_sweep_point *p, const fth_sweep_column *col, const char *const *fabric,
                           int n_fabric);

/// Whether a number at a valid point is finite (the Lua path refuses a result
/// that is not: the point is then invalid).
int fth_sweep_finite(const fth_sweep_point *p, const fth_sweep_column *cols, int n_cols);

/// Shortest decimal text that reads back as exactly x (%.15g, %.16g, else
/// %.17g), or as an integer when `as_integer` and x is integral and below
/// 2^63: fathom.format.util.number's rule. "nan", "inf", "-inf" otherwise.
/// Returns the length written (buf holds at least 32 bytes).
int fth_sweep_format_number(char *buf, size_t cap, double x, int as_integer);

#endif
