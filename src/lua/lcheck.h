/* lcheck.h: reading normalised Lua tables (built by lua/fathom/spec.lua) into
 * C def structs. Values arrive already type-checked against the YAML, so a
 * failure here names the field path and is a programming error. */
#ifndef LCHECK_H
#define LCHECK_H

#include <lauxlib.h>
#include <lua.h>

#include "fth_hardware.h"
#include "fth_model.h"
#include "fth_topology.h"
#include "fth_train.h"

/* Limits on what enters the core (README, "Limits"). Every number read from Lua is
 * finite, 0 or of a magnitude in [LCHECK_MIN_MAGNITUDE, LCHECK_MAX_MAGNITUDE], so a
 * product or quotient of a dozen of them stays finite and nonzero. Integer counts
 * have per-field caps chosen so that every product the core forms in an int
 * (PP x virtual stages, TP x CP x PP, the XPUs of a topology) stays below 2^31. */
#define LCHECK_MAX_MAGNITUDE 1e24
#define LCHECK_MIN_MAGNITUDE 1e-24
#define LCHECK_MAX_XPUS (1 << 22)          ///< XPUs in a topology, and any parallel degree
#define LCHECK_MAX_VIRTUAL_STAGES 256      ///< x LCHECK_MAX_XPUS stays below 2^31
#define LCHECK_MAX_MICROBATCHES_PER_GATHER 65536 ///< ZeRO-3 gather sharing, a schedule run (a batch's micro-batches)
#define LCHECK_MAX_LAYERS 65536
#define LCHECK_MAX_WIDTH (1 << 20)         ///< d_model, hidden sizes, LoRA ranks
#define LCHECK_MAX_HEADS 65536             ///< heads, head dims, experts, top-k
#define LCHECK_MAX_TOKENS (1 << 30)        ///< vocabulary, sequence length

/// t[key] as a finite number, 0 or of magnitude in [LCHECK_MIN_MAGNITUDE,
/// LCHECK_MAX_MAGNITUDE]; `def` when absent; raises "<what>.<key>: expected ..., got V".
double lcheck_number(lua_State *L, int t, const char *what, const char *key, double def);
/// lcheck_number that also takes +inf (for "never", e.g. a failure-free MTBF).
double lcheck_number_or_inf(lua_State *L, int t, const char *what, const char *key, double def);
/// t[key] as an int (integral number); `def` when absent.
int lcheck_int(lua_State *L, int t, const char *what, const char *key, int def);
/// t[key] as an int in [lo, hi] (never truncated); `def` (unchecked) when absent.
int lcheck_int_range(lua_State *L, int t, const char *what, const char *key, int def, int lo,
                     int hi);
/// t[key] as a boolean (or 0/1 number); `def` when absent.
int lcheck_bool(lua_State *L, int t, const char *what, const char *key, int def);
/// t[key] as a string; `def` when absent.
const char *lcheck_string(lua_State *L, int t, const char *what, const char *key, const char *def);

/// Table at `idx` -> def structs (defaults from the *_def_default functions).
void lcheck_node(lua_State *L, int idx, fth_node_def *out);
void lcheck_link(lua_State *L, int idx, const char *what, fth_link_def *out);
void lcheck_topology(lua_State *L, int idx, fth_topology_def *out);
void lcheck_model(lua_State *L, int idx, fth_model_def *out);
void lcheck_train(lua_State *L, int idx, fth_train_def *out);
/// workload.kernel_model (a name of core.names.kernel_model); `def` when absent.
fth_kernel_model lcheck_kernel_model(lua_State *L, int idx, fth_kernel_model def);
void lcheck_coll_params(lua_State *L, int idx, fth_coll_params *out);

/// t[key] as a map of memory component -> tier name into `map` (entries absent keep
/// their value); an unknown component or tier raises.
void lcheck_tier_map(lua_State *L, int t, const char *key, fth_tier *map);

/// Read workload keys `memory_reserve_bytes` (>= 0) and
/// `memory_fragmentation_fraction` (in [0, 1)) of table `t` over `out` (the
/// core's defaults); raises `workload.<key>: expected ...` out of range.
void lcheck_reserve(lua_State *L, int t, fth_mem_reserve *out);

/// Push a memory footprint as {components, tiers = {name = {bytes, capacity_bytes,
/// fits}}, peak_bytes, fits, overflow_tier}.
void lcheck_push_footprint(lua_State *L, const fth_memory_footprint *m);

/// Push a fth_group_level list from a Lua array of level tables at `idx`;
/// returns the count (at most FTH_MAX_PHYS_DIMS).
int lcheck_levels(lua_State *L, int idx, fth_group_level *out);

#endif
