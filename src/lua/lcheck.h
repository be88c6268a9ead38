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

/// t[key] as a number; `def` when absent; raises "<what>.<key>: expected number, got T".
double lcheck_number(lua_State *L, int t, const char *what, const char *key, double def);
/// t[key] as an int (integral number); `def` when absent.
int lcheck_int(lua_State *L, int t, const char *what, const char *key, int def);
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

/// Push a memory footprint as {components, tiers = {name = {bytes, capacity_bytes,
/// fits}}, peak_bytes, fits, overflow_tier}.
void lcheck_push_footprint(lua_State *L, const fth_memory_footprint *m);

/// Push a fth_group_level list from a Lua array of level tables at `idx`;
/// returns the count (at most FTH_MAX_PHYS_DIMS).
int lcheck_levels(lua_State *L, int idx, fth_group_level *out);

#endif
