/* lsearch.c: the strategy search, fathom.core.search.
 *   core.search(def) -> {hits = {...best first...}, stats = {...}}
 *   core.search_eval(def, strategy) -> hit, result
 *   core.monotonic_s() -> seconds on a monotonic clock (for benchmarks)
 * def = {node, scale_up, scale_out (links), scale_up_type, scale_out_type, pod_size,
 *        num_pods, model, workload, space = {tp = {...}, cp, pp, pp_in, tp_moe, ep, vs, mb,
 *        recompute, dp, schedule = lists of core.names.recompute / dp_variant / pp_schedule,
 *        sp = {false, true}, mb_max = N, offload = "off"|tier name, trim_first = {0, 1, ...},
 *        trim_last = {...} (layers off the even split's first / last stage)}, objective =
 * "step_time"|"headroom", top = N, batch_rounding = "exact"|"down", worker = i, workers = n, prune
 * = "on"|"off"|"audit" (off: exhaustive; audit: exhaustive, counting stats.bound_violations),
 * prune_above = the N-th best objective an earlier chunk of the search holds (0: none)} vs
 * and mb may be "auto" instead of a list: the values then follow from each placement (fth_search.h:
 * divisors of n_layers / PP, of the local batch). The space is the caller's policy; C places,
 * checks, times and keeps the best N. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fth_search.h"
#include "lcheck.h"
#include "lfathom.h"
#include "lnames.h"

#define MAX_TOP 4096

static void read_ints(lua_State *L, int t, const char *key, int *out, int *n, int can_auto) {
  char path[64];
  snprintf(path, sizeof path, "space.%s", key);
  *n = 0;
  int type = lua_getfield(L, t, key);
  if (can_auto && type == LUA_TSTRING) {
    if (strcmp(lua_tostring(L, -1), "auto") != 0)
      lbind_fail(L, FTH_EINVAL, path, "expected a list of integers or \"auto\"");
    lua_pop(L, 1);
    return; /* n = 0: the core's automatic list */
  }
  if (type != LUA_TTABLE) {
    lua_pop(L, 1);
    out[(*n)++] = 1; /* absent: the trivial value */
    return;
  }
  int len = (int)lua_rawlen(L, -1);
  if (len > FTH_SEARCH_MAX_VALUES)
    lbind_fail(L, FTH_EINVAL, path, "at most %d values", FTH_SEARCH_MAX_VALUES);
  for (int i = 1; i <= len; i++) {
    lua_rawgeti(L, -1, i);
    int isnum;
    lua_Integer v = lua_tointegerx(L, -1, &isnum);
    if (!isnum || v < 1 || v > (1 << 22)) { /* the XPU cap: no product of them overflows */
      snprintf(path, sizeof path, "space.%s[%d]", key, i);
      lbind_fail(L, FTH_EINVAL, path, "expected an integer in [1, %d]", 1 << 22);
    }
    out[(*n)++] = (int)v;
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  if (*n == 0) lbind_fail(L, FTH_EINVAL, path, "empty");
}

/* space[key]: a list of layer counts in [0, FTH_SEARCH_TRIM_MAX]; absent: n = 0 ({0}). */
static void read_trims(lua_State *L, int t, const char *key, int *out, int *n) {
  char path[64];
  *n = 0;
  if (lua_getfield(L, t, key) != LUA_TTABLE) {
    lua_pop(L, 1);
    return;
  }
  int len = (int)lua_rawlen(L, -1);
  snprintf(path, sizeof path, "space.%s", key);
  if (len > FTH_SEARCH_MAX_VALUES)
    lbind_fail(L, FTH_EINVAL, path, "at most %d values", FTH_SEARCH_MAX_VALUES);
  for (int i = 1; i <= len; i++) {
    lua_rawgeti(L, -1, i);
    int isnum;
    lua_Integer v = lua_tointegerx(L, -1, &isnum);
    if (!isnum || v < 0 || v > FTH_SEARCH_TRIM_MAX) {
      snprintf(path, sizeof path, "space.%s[%d]", key, i);
      lbind_fail(L, FTH_EINVAL, path, "expected layers in [0, %d]", FTH_SEARCH_TRIM_MAX);
    }
    out[(*n)++] = (int)v;
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

/* space[key] as a bit mask over enum `e` (e < 0: booleans, false -> bit 0, true -> bit 1). */
static int read_mask(lua_State *L, int t, const char *key, int e, int def) {
  if (lua_getfield(L, t, key) != LUA_TTABLE) {
    lua_pop(L, 1);
    return def;
  }
  int mask = 0, len = (int)lua_rawlen(L, -1);
  for (int i = 1; i <= len; i++) {
    lua_rawgeti(L, -1, i);
    if (e < 0) {
      mask |= 1 << (lua_toboolean(L, -1) ? 1 : 0);
    } else {
      char path[64];
      snprintf(path, sizeof path, "space.%s[%d]", key, i);
      mask |= 1 << lnames_check_value(L, -1, path, (lnames_enum)e);
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return mask;
}

static void read_def(lua_State *L, int idx, fth_search_def *d) {
  idx = lua_absindex(L, idx);
  luaL_checktype(L, idx, LUA_TTABLE);
  memset(d, 0, sizeof *d);
  lua_getfield(L, idx, "node");
  lcheck_node(L, -1, &d->node);
  lua_pop(L, 1);
  lua_getfield(L, idx, "scale_up");
  lcheck_link(L, -1, "scale_up", &d->scale_up);
  lua_pop(L, 1);
  if (lua_getfield(L, idx, "scale_out") == LUA_TTABLE)
    lcheck_link(L, -1, "scale_out", &d->scale_out);
  else
    d->scale_out = d->scale_up;
  lua_pop(L, 1);
  d->scale_up_type = (fth_topo_type)lnames_check(L, idx, "search", "scale_up_type",
                                                 LNAMES_TOPOLOGY_TYPE, FTH_TOPO_SWITCHED);
  d->scale_out_type = (fth_topo_type)lnames_check(L, idx, "search", "scale_out_type",
                                                  LNAMES_TOPOLOGY_TYPE, FTH_TOPO_TWO_TIER);
  d->pod_size = lcheck_int(L, idx, "search", "pod_size", 1);
  d->num_pods = lcheck_int(L, idx, "search", "num_pods", 1);
  d->num_xpus = lcheck_int(L, idx, "search", "num_xpus", 0);
  lua_getfield(L, idx, "model");
  lcheck_model(L, -1, &d->model);
  lua_pop(L, 1);
  lua_getfield(L, idx, "workload");
  lcheck_train(L, -1, &d->work);
  lua_pop(L, 1);
  if (lua_getfield(L, idx, "space") != LUA_TTABLE)
    lbind_fail(L, FTH_EINVAL, "search.space", "expected a table");
  int sp = lua_gettop(L);
  fth_search_space *s = &d->space;
  read_ints(L, sp, "tp", s->tp, &s->n_tp, 0);
  read_ints(L, sp, "cp", s->cp, &s->n_cp, 0);
  read_ints(L, sp, "pp", s->pp, &s->n_pp, 0);
  read_ints(L, sp, "pp_in", s->pp_in, &s->n_pp_in, 0);
  read_ints(L, sp, "tp_moe", s->tp_moe, &s->n_tp_moe, 0);
  read_ints(L, sp, "ep", s->ep, &s->n_ep, 0);
  read_ints(L, sp, "vs", s->vs, &s->n_vs, 1);
  read_ints(L, sp, "mb", s->mb, &s->n_mb, 1);
  s->mb_max = lcheck_int_range(L, sp, "space", "mb_max", FTH_SEARCH_MB_MAX, 1, FTH_SEARCH_MB_LIMIT);
  s->recompute_mask = read_mask(L, sp, "recompute", LNAMES_RECOMPUTE, 1 << FTH_RECOMPUTE_NONE);
  s->dp_mask = read_mask(L, sp, "dp", LNAMES_DP_VARIANT, 1 << FTH_DP_DDP);
  s->schedule_mask = read_mask(L, sp, "schedule", LNAMES_PP_SCHEDULE, 1 << FTH_PP_1F1B);
  s->sp_mask = read_mask(L, sp, "sp", -1, 1);
  read_trims(L, sp, "trim_first", s->trim_first, &s->n_trim_first);
  read_trims(L, sp, "trim_last", s->trim_last, &s->n_trim_last);
  /* offload: a tier name, or "off" (the workload's own tier maps) */
  const char *off = lcheck_string(L, sp, "space", "offload", "off");
  if (strcmp(off, "off") == 0) {
    s->offload_tier = FTH_TIER_XPU;
  } else {
    int t = lnames_parse(LNAMES_MEMORY_TIER, off);
    if (t <= FTH_TIER_XPU || t >= FTH_TIER_COUNT || !d->node.has_tier[t])
      lbind_fail(L, FTH_EINVAL, "space.offload",
                 "'%s' is not a memory tier of the node beyond the accelerator's (or off)", off);
    s->offload_tier = t;
  }
  lua_pop(L, 1);
  const char *obj = lcheck_string(L, idx, "search", "objective", "step_time");
  if (strcmp(obj, "step_time") == 0)
    d->objective = FTH_OBJ_STEP_TIME;
  else if (strcmp(obj, "headroom") == 0)
    d->objective = FTH_OBJ_HEADROOM;
  else
    lbind_fail(L, FTH_EINVAL, "search.objective", "unknown objective '%s'", obj);
  const char *rounding = lcheck_string(L, idx, "search", "batch_rounding", "exact");
  if (strcmp(rounding, "exact") == 0)
    d->batch_rounding = FTH_BATCH_EXACT;
  else if (strcmp(rounding, "down") == 0)
    d->batch_rounding = FTH_BATCH_DOWN;
  else
    lbind_fail(L, FTH_EINVAL, "search.batch_rounding", "expected exact or down, got '%s'",
               rounding);
  d->worker = lcheck_int(L, idx, "search", "worker", 0);
  d->workers = lcheck_int(L, idx, "search", "workers", 1);
  const char *prune = lcheck_string(L, idx, "search", "prune", "on");
  if (strcmp(prune, "on") == 0)
    d->prune = FTH_PRUNE_ON;
  else if (strcmp(prune, "off") == 0)
    d->prune = FTH_PRUNE_OFF;
  else if (strcmp(prune, "audit") == 0)
    d->prune = FTH_PRUNE_AUDIT;
  else
    lbind_fail(L, FTH_EINVAL, "search.prune", "expected on, off or audit, got '%s'", prune);
  d->prune_above = lcheck_number(L, idx, "search", "prune_above", 0.0);
  if (!(d->prune_above >= 0))
    lbind_fail(L, FTH_EINVAL, "search.prune_above",
               "expected an objective >= 0 (0: none), got %g", d->prune_above);
}

static void setnum(lua_State *L, const char *k, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, k);
}

static void setint(lua_State *L, const char *k, long long v) {
  lua_pushinteger(L, (lua_Integer)v);
  lua_setfield(L, -2, k);
}

static void push_hit(lua_State *L, const fth_search_hit *h) {
  lua_createtable(L, 0, 32);
  setint(L, "tp", h->tp);
  setint(L, "cp", h->cp);
  setint(L, "pp", h->pp);
  setint(L, "pp_in", h->pp_in);
  setint(L, "dp", h->dp);
  setint(L, "tp_moe", h->tp_moe);
  setint(L, "ep", h->ep);
  setint(L, "ep_su", h->ep_su);
  setint(L, "vs", h->vs);
  setint(L, "mb", h->mb);
  setint(L, "batch", (long long)h->batch);
  setint(L, "trim_first", h->trim_first);
  setint(L, "trim_last", h->trim_last);
  setint(L, "first_stage_layers", h->first_layers);
  setint(L, "last_stage_layers", h->last_layers);
  lua_pushstring(L, lnames_name(LNAMES_PP_SCHEDULE, h->schedule));
  lua_setfield(L, -2, "schedule");
  lua_pushstring(L, lnames_name(LNAMES_RECOMPUTE, h->recompute));
  lua_setfield(L, -2, "recompute");
  lua_pushstring(L, lnames_name(LNAMES_DP_VARIANT, h->dp_variant));
  lua_setfield(L, -2, "dp_variant");
  lua_pushboolean(L, h->sp);
  lua_setfield(L, -2, "sp");
  /* where weights, saved activations and optimizer states live */
  lua_pushstring(L, fth_tier_name((fth_tier)h->offload_weights));
  lua_setfield(L, -2, "offload_weights");
  lua_pushstring(L, fth_tier_name((fth_tier)h->offload_activations));
  lua_setfield(L, -2, "offload_activations");
  lua_pushstring(L, fth_tier_name((fth_tier)h->offload_optimizer));
  lua_setfield(L, -2, "offload_optimizer");
  setnum(L, "step_time_s", h->step_time_s);
  setnum(L, "mfu", h->mfu);
  setnum(L, "tokens_per_s", h->tokens_per_s);
  setnum(L, "total_time_s", h->total_time_s);
  setnum(L, "peak_bytes", h->peak_bytes);
  setnum(L, "capacity_bytes", h->capacity_bytes);
  setnum(L, "headroom_bytes", h->capacity_bytes - h->peak_bytes); /* reserve included */
  setnum(L, "bubble_fraction", h->bubble_fraction);
  setnum(L, "dp_interference_s", h->dp_interference_s);
  setnum(L, "objective", h->objective);
  lua_createtable(L, 0, FTH_COMM_KIND_COUNT);
  for (int k = 0; k < FTH_COMM_KIND_COUNT; k++)
    setnum(L, fth_comm_kind_name((fth_comm_kind)k), h->exposed_s[k]);
  lua_setfield(L, -2, "exposed_s");
  lua_pushboolean(L, h->fits);
  lua_setfield(L, -2, "fits");
  if (h->overflow_tier >= 0 && h->overflow_tier < FTH_TIER_COUNT) {
    lua_pushstring(L, fth_tier_name((fth_tier)h->overflow_tier));
    lua_setfield(L, -2, "overflow_tier");
  }
  setint(L, "index", h->index);
}

/* Scratch for the best N lives in a userdata so an error cannot leak it. */
static int core_search(lua_State *L) {
  fth_search_def *d = (fth_search_def *)lua_newuserdatauv(L, sizeof(fth_search_def), 0);
  read_def(L, 1, d);
  int top = lcheck_int(L, 1, "search", "top", 100);
  luaL_argcheck(L, top >= 1 && top <= MAX_TOP, 1, "top must be in 1..4096");
  fth_search_hit *hits =
      (fth_search_hit *)lua_newuserdatauv(L, sizeof(fth_search_hit) * (size_t)top, 0);
  fth_search_stats st;
  fth_error err;
  int n = 0;
  if (fth_search_run(d, hits, top, &n, &st, &err) != FTH_OK) return lbind_raise(L, "search", &err);
  lua_createtable(L, 0, 2);
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    push_hit(L, &hits[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "hits");
  lua_createtable(L, 0, 10);
  setint(L, "considered", st.considered);
  setint(L, "not_tiling", st.not_tiling);
  setint(L, "invalid", st.invalid);
  setint(L, "no_fit", st.no_fit);
  setint(L, "evaluated", st.evaluated);
  setint(L, "pruned", st.pruned);
  setint(L, "bound_evals", st.bound_evals);
  setint(L, "bound_violations", st.bound_violations);
  lua_createtable(L, 0, FTH_TIER_COUNT);
  for (int t = 0; t < FTH_TIER_COUNT; t++)
    if (st.no_fit_by_tier[t] > 0) setint(L, fth_tier_name((fth_tier)t), st.no_fit_by_tier[t]);
  lua_setfield(L, -2, "no_fit_by_tier");
  if (st.shortfall_bytes < HUGE_VAL) {
    setnum(L, "shortfall_bytes", st.shortfall_bytes);
    push_hit(L, &st.smallest_shortfall);
    lua_setfield(L, -2, "smallest_shortfall");
  }
  lua_setfield(L, -2, "stats");
  return 1;
}

/* (def, strategy) -> hit table, result table (as plan:evaluate() gives it) */
static int core_search_eval(lua_State *L) {
  fth_search_def *d = (fth_search_def *)lua_newuserdatauv(L, sizeof(fth_search_def), 0);
  read_def(L, 1, d);
  luaL_checktype(L, 2, LUA_TTABLE);
  fth_search_hit s;
  memset(&s, 0, sizeof s);
  s.tp = lcheck_int_range(L, 2, "strategy", "tp", 1, 1, 1 << 20);
  s.cp = lcheck_int_range(L, 2, "strategy", "cp", 1, 1, 1 << 20);
  s.pp = lcheck_int_range(L, 2, "strategy", "pp", 1, 1, 1 << 20);
  s.pp_in = lcheck_int_range(L, 2, "strategy", "pp_in", 1, 1, 1 << 20);
  s.tp_moe = lcheck_int_range(L, 2, "strategy", "tp_moe", 1, 1, 1 << 20);
  s.ep = lcheck_int_range(L, 2, "strategy", "ep", 1, 1, 1 << 20);
  s.ep_su = lcheck_int_range(L, 2, "strategy", "ep_su", s.ep, 1, 1 << 20);
  s.vs = lcheck_int_range(L, 2, "strategy", "vs", 1, 1, 1 << 20);
  s.mb = lcheck_int_range(L, 2, "strategy", "mb", 1, 1, 1 << 20);
  s.schedule = lnames_check(L, 2, "strategy", "schedule", LNAMES_PP_SCHEDULE, FTH_PP_1F1B);
  s.recompute = lnames_check(L, 2, "strategy", "recompute", LNAMES_RECOMPUTE, FTH_RECOMPUTE_NONE);
  s.dp_variant = lnames_check(L, 2, "strategy", "dp_variant", LNAMES_DP_VARIANT, FTH_DP_DDP);
  s.sp = lcheck_bool(L, 2, "strategy", "sp", 0);
  s.trim_first = lcheck_int_range(L, 2, "strategy", "trim_first", 0, 0, FTH_SEARCH_TRIM_MAX);
  s.trim_last = lcheck_int_range(L, 2, "strategy", "trim_last", 0, 0, FTH_SEARCH_TRIM_MAX);
  s.offload_weights = lnames_check(L, 2, "strategy", "offload_weights", LNAMES_MEMORY_TIER, 0);
  s.offload_activations =
      lnames_check(L, 2, "strategy", "offload_activations", LNAMES_MEMORY_TIER, 0);
  s.offload_optimizer = lnames_check(L, 2, "strategy", "offload_optimizer", LNAMES_MEMORY_TIER, 0);
  fth_search_hit out;
  fth_train_result r;
  fth_error err;
  if (fth_search_eval_one(d, &s, &out, &r, &err) != FTH_OK) return lbind_raise(L, NULL, &err);
  push_hit(L, &out);
  lfth_push_train_result(L, &r);
  return 2;
}

/* () -> seconds on a monotonic clock: benchmarks time searches in-process
 * (bench/search_bench.lua), not through a `date` subprocess. */
static int core_monotonic_s(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  lua_pushnumber(L, (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9);
  return 1;
}

static const luaL_Reg search_funcs[] = {{"search", core_search},
                                        {"search_eval", core_search_eval},
                                        {"monotonic_s", core_monotonic_s},
                                        {NULL, NULL}};

void lfth_open_search(lua_State *L) {
  lbind_setfuncs(L, search_funcs);
}
