/* fth_common.h: status codes, the error record and small numeric helpers
 * shared by every cost model. No Lua, no I/O, no globals. */
#ifndef FTH_COMMON_H
#define FTH_COMMON_H

#include <stddef.h>

/// Result of any core function that can fail on its inputs.
typedef enum fth_status {
  FTH_OK = 0,
  FTH_EINVAL = 1, ///< an input value is out of range or inconsistent
  FTH_ERANGE = 2, ///< a derived value overflowed or is not finite
  FTH_ENOTSUP = 3, ///< a valid request the model does not cover
  FTH_ETILE = 4    ///< sizes that do not divide each other (layers, batch, sequence, GPUs)
} fth_status;

#define FTH_ERROR_PATH_MAX 128
#define FTH_ERROR_MSG_MAX  256

/// Where and why an input was refused. `path` is a dotted field path relative
/// to the struct being checked (e.g. "memory.efficiency"); the binding maps it
/// back to a file position. Fixed-size so the core never allocates.
typedef struct fth_error {
  fth_status status;
  char path[FTH_ERROR_PATH_MAX];
  char msg[FTH_ERROR_MSG_MAX];
} fth_error;

/// Clear an error record (status FTH_OK, empty strings). `err` may be NULL.
void fth_error_clear(fth_error *err);

/// Fill `err` (may be NULL) with status, path and a printf-style message,
/// truncated to the buffers. Returns `status` so checks can `return fth_fail(...)`.
fth_status fth_fail(fth_error *err, fth_status status, const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/// Prefix `err->path` with `prefix` and a dot ("layers" + "size" -> "layers.size"),
/// so nested checks can report a full path. Returns err->status.
fth_status fth_error_prefix(fth_error *err, const char *prefix);

#ifdef NDEBUG
#define FTH_ASSERT(c) ((void)0)
#else
#include <assert.h>
#define FTH_ASSERT(c) assert(c)
#endif

/// Units, so literals in configs and tests read as what they are.
#define FTH_KIB 1024.0
#define FTH_MIB (1024.0 * 1024.0)
#define FTH_GIB (1024.0 * 1024.0 * 1024.0)
#define FTH_GB  1e9
#define FTH_TB  1e12

static inline double fth_max(double a, double b) {
  return a > b ? a : b;
}
static inline double fth_min(double a, double b) {
  return a < b ? a : b;
}
static inline double fth_ceil_div(double a, double b) {
  double q = a / b;
  double f = (double)(long long)q;
  return f < q ? f + 1.0 : f;
}

/// Another spelling a name parser accepts: `alias` for the value `value`.
/// Alias tables end with a NULL alias.
typedef struct fth_name_alias {
  const char *alias;
  int value;
} fth_name_alias;

/// True when x is finite and > 0.
int fth_positive(double x);

/// Bit-set enums (recompute modules, CUDA-graph scopes, a per-op policy's saved names): the
/// name of `bit` in a table of `n` names, where names[i] names 1 << i; NULL for anything but
/// one of those bits.
const char *fth_bit_name(const char *const *names, int n, unsigned bit);
/// The bit `name` spells in that table (1 << i), 0 when it spells none.
unsigned fth_bit_parse(const char *const *names, int n, const char *name);

#endif
