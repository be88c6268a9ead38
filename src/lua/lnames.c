/* lnames.c: fathom.core.names, every enum's spelling exported from the core.
 *   core.names.<enum> = {"NAME", ...}      canonical names in enum order
 *   core.names.aliases.<enum> = {ALIAS = "NAME"}  other spellings the core's parser accepts
 *   core.names.parse(enum, name) -> canonical name, or nil when the core refuses it
 * Lua builds every `choices` list from these tables, so a name is written once: in
 * the core's name table (src/core). */
#include "lnames.h"

#include <stdio.h>
#include <string.h>

#include "fth_collective.h"
#include "fth_hardware.h"
#include "fth_host.h"
#include "fth_kernel.h"
#include "fth_model.h"
#include "fth_phase.h"
#include "fth_recipe.h"
#include "fth_route.h"
#include "fth_serve.h"
#include "fth_schedule.h"
#include "fth_topology.h"
#include "fth_train.h"
#include "lfathom.h"

/* Adapters from the core's typed functions to int-indexed ones. */
#define NAME_OF(fn, type)                                                                          \
  static const char *fn##_i(int i) {                                                               \
    return fn((type)i);                                                                            \
  }
#define PARSE_OF(fn)                                                                               \
  static int fn##_i(const char *s) {                                                               \
    return (int)fn(s);                                                                             \
  }
NAME_OF(fth_recompute_name, fth_recompute)
PARSE_OF(fth_recompute_parse)
NAME_OF(fth_kernel_model_name, fth_kernel_model)
PARSE_OF(fth_kernel_model_parse)
NAME_OF(fth_flop_part_name, fth_flop_part)
NAME_OF(fth_dp_variant_name, fth_dp_variant)
PARSE_OF(fth_dp_variant_parse)
NAME_OF(fth_pp_schedule_name, fth_pp_schedule)
PARSE_OF(fth_pp_schedule_parse)
NAME_OF(fth_coll_op_name, fth_coll_op)
PARSE_OF(fth_coll_op_parse)
NAME_OF(fth_coll_algo_name, fth_coll_algo)
PARSE_OF(fth_coll_algo_parse)
NAME_OF(fth_topo_type_name, fth_topo_type)
PARSE_OF(fth_topo_type_parse)
NAME_OF(fth_logical_tag_name, fth_logical_tag)
PARSE_OF(fth_logical_tag_parse)
NAME_OF(fth_tier_name, fth_tier)
PARSE_OF(fth_tier_parse)
NAME_OF(fth_mem_component_name, fth_mem_component)
PARSE_OF(fth_mem_component_parse)
NAME_OF(fth_comm_kind_name, fth_comm_kind)
NAME_OF(fth_cp_comm_name, fth_cp_comm)
PARSE_OF(fth_cp_comm_parse)
NAME_OF(fth_route_dist_name, fth_route_dist)
PARSE_OF(fth_route_dist_parse)
NAME_OF(fth_mesh_sched_name, fth_mesh_sched)
PARSE_OF(fth_mesh_sched_parse)
NAME_OF(fth_placement_name, fth_placement)
PARSE_OF(fth_placement_parse)
NAME_OF(fth_recipe_name, fth_recipe)
PARSE_OF(fth_recipe_parse)
NAME_OF(fth_cast_kernels_name, fth_cast_kernels)
PARSE_OF(fth_cast_kernels_parse)
NAME_OF(fth_lora_targets_name, fth_lora_targets)
PARSE_OF(fth_lora_targets_parse)
NAME_OF(fth_serve_arrival_name, fth_serve_arrival)
PARSE_OF(fth_serve_arrival_parse)
NAME_OF(fth_serve_dist_name, fth_serve_dist_kind)
PARSE_OF(fth_serve_dist_parse)
NAME_OF(fth_serve_policy_name, fth_serve_policy)
PARSE_OF(fth_serve_policy_parse)
NAME_OF(fth_serve_routing_name, fth_serve_routing)
PARSE_OF(fth_serve_routing_parse)
/* Recompute modules are bits: index i is bit 1 << i; unknown parses to 3. */
static const char *recompute_module_name_i(int i) {
  return fth_recompute_module_name(1u << i);
}
static int recompute_module_parse_i(const char *s) {
  unsigned b = fth_recompute_module_parse(s);
  int i = 0;
  while (b > 1u) b >>= 1, i++;
  return b ? i : 3;
}

/* A named per-op policy's saved names are bits too (fth_model.h): index i is bit 1 << i. */
static const char *op_keep_name_i(int i) { return fth_op_keep_name(1u << i); }
static int op_keep_parse_i(const char *s) {
  unsigned b = fth_op_keep_parse(s);
  int i = 0;
  while (b > 1u) b >>= 1, i++;
  return b ? i : FTH_OP_KEEP_NAMES;
}

/* CUDA graph scopes are bits too (fth_host.h): index i is bit 1 << i. */
static const char *graph_scope_name_i(int i) {
  return fth_graph_scope_name(1u << i);
}
static int graph_scope_parse_i(const char *s) {
  unsigned b = fth_graph_scope_parse(s);
  int i = 0;
  while (b > 1u) b >>= 1, i++;
  return b ? i : FTH_GRAPH_SCOPE_COUNT;
}

/* One enum: its names, its parser and the core's table of other spellings
 * its parser accepts (exported so Lua's choices can offer them; names_spec.lua
 * checks the core parses each one to its target). */
typedef struct enum_desc {
  const char *key; /* core.names.<key> */
  int count;
  const char *(*name)(int);
  int (*parse)(const char *);             /* NULL: match the names */
  const fth_name_alias *(*aliases)(void); /* NULL: none; the core's table */
} enum_desc;

static const enum_desc enums[LNAMES_COUNT] = {
    [LNAMES_DP_VARIANT] = {"dp_variant", FTH_DP_COUNT, fth_dp_variant_name_i,
                           fth_dp_variant_parse_i, fth_dp_variant_aliases},
    [LNAMES_PP_SCHEDULE] = {"pp_schedule", FTH_PP_COUNT, fth_pp_schedule_name_i,
                            fth_pp_schedule_parse_i, NULL},
    [LNAMES_RECOMPUTE] = {"recompute", FTH_RECOMPUTE_COUNT, fth_recompute_name_i,
                          fth_recompute_parse_i, NULL},
    [LNAMES_KERNEL_MODEL] = {"kernel_model", FTH_KERNEL_MODEL_COUNT, fth_kernel_model_name_i,
                             fth_kernel_model_parse_i, NULL},
    [LNAMES_COLL_OP] = {"collective_op", FTH_COLL_OP_COUNT, fth_coll_op_name_i, fth_coll_op_parse_i,
                        NULL},
    [LNAMES_COLL_ALGO] = {"collective_algorithm", FTH_ALGO_COUNT, fth_coll_algo_name_i,
                          fth_coll_algo_parse_i, NULL},
    [LNAMES_TOPOLOGY_TYPE] = {"topology_type", FTH_TOPO_COUNT, fth_topo_type_name_i,
                              fth_topo_type_parse_i, NULL},
    [LNAMES_LOGICAL_TAG] = {"logical_tag", FTH_TAG_COUNT, fth_logical_tag_name_i,
                            fth_logical_tag_parse_i, NULL},
    [LNAMES_MEMORY_TIER] = {"memory_tier", FTH_TIER_COUNT, fth_tier_name_i, fth_tier_parse_i, NULL},
    [LNAMES_MEM_COMPONENT] = {"memory_component", FTH_MEM_COMPONENT_COUNT, fth_mem_component_name_i,
                              fth_mem_component_parse_i, fth_mem_component_aliases},
    [LNAMES_COMM_KIND] = {"comm_kind", FTH_COMM_KIND_COUNT, fth_comm_kind_name_i, NULL, NULL},
    [LNAMES_FLOP_PART] = {"flop_part", FTH_FLOP_PART_COUNT, fth_flop_part_name_i, NULL, NULL},
    [LNAMES_ROUTE_DISTRIBUTION] = {"route_distribution", FTH_DIST_COUNT, fth_route_dist_name_i,
                                   fth_route_dist_parse_i, NULL},
    [LNAMES_ROUTE_PLACEMENT] = {"route_placement", FTH_PLACE_COUNT, fth_placement_name_i,
                                fth_placement_parse_i, NULL},
    [LNAMES_ROUTE_SCHEDULER] = {"route_scheduler", FTH_SCHED_COUNT, fth_mesh_sched_name_i,
                                fth_mesh_sched_parse_i, NULL},
    [LNAMES_PRECISION_RECIPE] = {"precision_recipe", FTH_RECIPE_COUNT, fth_recipe_name_i,
                                 fth_recipe_parse_i, NULL},
    [LNAMES_CAST_KERNELS] = {"cast_kernels", FTH_CAST_KERNELS_COUNT, fth_cast_kernels_name_i,
                             fth_cast_kernels_parse_i, NULL},
    [LNAMES_LORA_TARGETS] = {"lora_targets", FTH_LORA_TARGETS_COUNT, fth_lora_targets_name_i,
                             fth_lora_targets_parse_i, NULL},
    [LNAMES_RECOMPUTE_MODULE] = {"recompute_module", 3, recompute_module_name_i,
                                 recompute_module_parse_i, NULL},
    [LNAMES_OP_KEEP] = {"op_keep", FTH_OP_KEEP_NAMES, op_keep_name_i, op_keep_parse_i, NULL},
    [LNAMES_GRAPH_SCOPE] = {"cuda_graph_scope", FTH_GRAPH_SCOPE_COUNT, graph_scope_name_i,
                            graph_scope_parse_i, NULL},
    [LNAMES_SERVE_ARRIVAL] = {"serve_arrival", FTH_ARRIVAL_COUNT, fth_serve_arrival_name_i,
                              fth_serve_arrival_parse_i, NULL},
    [LNAMES_SERVE_LENGTH] = {"serve_length", FTH_LEN_COUNT, fth_serve_dist_name_i,
                             fth_serve_dist_parse_i, NULL},
    [LNAMES_SERVE_POLICY] = {"serve_policy", FTH_POLICY_COUNT, fth_serve_policy_name_i,
                             fth_serve_policy_parse_i, NULL},
    [LNAMES_SERVE_ROUTING] = {"serve_routing", FTH_ROUTE_COUNT, fth_serve_routing_name_i,
                              fth_serve_routing_parse_i, NULL},
    [LNAMES_CP_COMM] = {"cp_comm", FTH_CP_COMM_COUNT, fth_cp_comm_name_i, fth_cp_comm_parse_i,
                        NULL},
};

int lnames_count(lnames_enum e) {
  return enums[e].count;
}

const char *lnames_name(lnames_enum e, int v) {
  return enums[e].name(v);
}

int lnames_parse(lnames_enum e, const char *name) {
  const enum_desc *d = &enums[e];
  if (name == NULL) return -1;
  if (d->parse != NULL) {
    int v = d->parse(name);
    return (v >= 0 && v < d->count) ? v : -1;
  }
  for (int i = 0; i < d->count; i++)
    if (strcmp(name, d->name(i)) == 0) return i;
  return -1;
}

int lnames_check_value(lua_State *L, int idx, const char *path, lnames_enum e) {
  idx = lua_absindex(L, idx);
  const char *s = lua_type(L, idx) == LUA_TSTRING ? lua_tostring(L, idx) : NULL;
  int v = lnames_parse(e, s);
  if (v >= 0) return v;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 0; i < enums[e].count; i++) {
    if (i > 0) luaL_addstring(&b, ", ");
    luaL_addstring(&b, enums[e].name(i));
  }
  luaL_pushresult(&b); /* ... choices */
  if (s != NULL)
    return lbind_fail(L, FTH_EINVAL, path, "expected one of %s, got '%s'", lua_tostring(L, -1), s);
  return lbind_fail(L, FTH_EINVAL, path, "expected one of %s, got %s", lua_tostring(L, -1),
                    luaL_typename(L, idx));
}

int lnames_check(lua_State *L, int t, const char *what, const char *key, lnames_enum e, int def) {
  t = lua_absindex(L, t);
  if (lua_getfield(L, t, key) == LUA_TNIL) {
    lua_pop(L, 1);
    return def;
  }
  char path[128];
  if (what != NULL && what[0] != '\0')
    snprintf(path, sizeof path, "%s.%s", what, key);
  else
    snprintf(path, sizeof path, "%s", key);
  int v = lnames_check_value(L, -1, path, e);
  lua_pop(L, 1);
  return v;
}

/* (enum, name) -> canonical name, or nil when the core does not know it */
static int names_parse(lua_State *L) {
  const char *key = luaL_checkstring(L, 1);
  const char *name = luaL_checkstring(L, 2);
  for (int e = 0; e < LNAMES_COUNT; e++) {
    if (strcmp(key, enums[e].key) != 0) continue;
    int v = lnames_parse((lnames_enum)e, name);
    if (v < 0) return 0;
    lua_pushstring(L, enums[e].name(v));
    return 1;
  }
  return luaL_argerror(L, 1, lua_pushfstring(L, "unknown enum '%s'", key));
}

void lfth_open_names(lua_State *L) {
  lua_createtable(L, 0, LNAMES_COUNT + 2); /* core names */
  lua_createtable(L, 0, 2);                /* core names aliases */
  for (int e = 0; e < LNAMES_COUNT; e++) {
    const enum_desc *d = &enums[e];
    lua_createtable(L, d->count, 0); /* core names aliases list */
    for (int i = 0; i < d->count; i++) {
      lua_pushstring(L, d->name(i));
      lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -3, d->key); /* core names aliases */
    lua_newtable(L);             /* core names aliases map */
    for (const fth_name_alias *a = d->aliases ? d->aliases() : NULL; a != NULL && a->alias != NULL;
         a++) {
      lua_pushstring(L, d->name(a->value));
      lua_setfield(L, -2, a->alias);
    }
    lua_setfield(L, -2, d->key); /* core names aliases */
  }
  lua_setfield(L, -2, "aliases"); /* core names */
  lua_pushcfunction(L, names_parse);
  lua_setfield(L, -2, "parse");
  lua_setfield(L, -2, "names"); /* core */
}
