/* lnames.h: the spelling of every enum the binding reads or writes, in one place.
 * The names come from the core's fth_*_name / fth_*_parse functions; the binding
 * only indexes them. */
#ifndef LNAMES_H
#define LNAMES_H

#include <lauxlib.h>
#include <lua.h>

/// The enums named in `fathom.core.names` (one key each, see lnames.c).
typedef enum lnames_enum {
  LNAMES_DP_VARIANT = 0,
  LNAMES_PP_SCHEDULE,
  LNAMES_RECOMPUTE,
  LNAMES_KERNEL_MODEL,
  LNAMES_COLL_OP,
  LNAMES_COLL_ALGO,
  LNAMES_TOPOLOGY_TYPE,
  LNAMES_LOGICAL_TAG,
  LNAMES_MEMORY_TIER,
  LNAMES_MEM_COMPONENT,
  LNAMES_COMM_KIND,
  LNAMES_FLOP_PART,
  LNAMES_ROUTE_DISTRIBUTION,
  LNAMES_ROUTE_PLACEMENT,
  LNAMES_ROUTE_SCHEDULER,
  LNAMES_PRECISION_RECIPE,
  LNAMES_CAST_KERNELS,
  LNAMES_LORA_TARGETS,
  LNAMES_RECOMPUTE_MODULE, ///< index i names the module bit 1 << i
  LNAMES_OP_KEEP,          ///< index i names the per-op policy's saved name bit 1 << i
  LNAMES_GRAPH_SCOPE,      ///< index i names the CUDA graph scope bit 1 << i
  LNAMES_SERVE_ARRIVAL,
  LNAMES_SERVE_LENGTH,
  LNAMES_SERVE_POLICY,
  LNAMES_SERVE_ROUTING,
  LNAMES_CP_COMM,
  LNAMES_COUNT
} lnames_enum;

/// Number of values of enum `e`.
int lnames_count(lnames_enum e);
/// Canonical name of value `v` of enum `e` (static storage); NULL when out of range.
const char *lnames_name(lnames_enum e, int v);
/// Value of `name` in enum `e` (aliases accepted, as the core's parser does); -1 if unknown.
int lnames_parse(lnames_enum e, const char *name);
/// t[key] as a value of enum `e`; `def` when absent. Anything else raises
/// "<what>.<key>: expected one of A, B, C, got 'x'" (never silently a default).
int lnames_check(lua_State *L, int t, const char *what, const char *key, lnames_enum e, int def);
/// The value at stack index `idx` as a value of enum `e`; raises as lnames_check, naming `path`.
int lnames_check_value(lua_State *L, int idx, const char *path, lnames_enum e);

#endif
