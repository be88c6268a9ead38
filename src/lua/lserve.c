/* lserve.c: request-level serving simulation, fathom.core.
 *   core.serve_run(def [, plan [, prefill_plan [, draft_plan]]]) -> result table [, requests table]
 *   core.serve_draw(def) -> trace columns {arrival_s =, input =, output =}
 * `plan` is a fathom.InferPlan (core.infer_compile): every engine iteration is
 * costed by fth_serve_plan_cost, and the KV capacity and GPUs per replica
 * default to the plan's. Without a plan, `def.cost = {base_s =, per_token_s =}`
 * costs an iteration of T tokens base_s + per_token_s T (the scheduler alone).
 * With `def.per_request = true` a second table holds each request's times and
 * lengths as columns (arrival_s, first_token_s, done_s, input, output, replica,
 * preemptions, client: arrays in arrival order), for traces.
 * Several clients on one pool: `def.trace.client` names each row's client (1-based)
 * and `def.clients = {{slo_ttft_s =, slo_tpot_s =}, ...}` their SLOs; the result's
 * `clients` holds each client's metrics (fth_serve_client_result).
 * `draft_plan` (a separate draft model's plan on the same GPUs) costs every iteration
 * by fth_serve_draft_cost and takes its weights and KV out of the KV capacity.
 * The workspace (fth_serve_workspace_bytes) is one userdata per call: the
 * simulation's only allocation, owned by the GC. */
#include <math.h>
#include <string.h>

#include "fth_serve.h"
#include "lcheck.h"
#include "lfathom.h"
#include "lnames.h"

#define INFER_PLAN "fathom.InferPlan" /* linfer.c's metatable */

typedef struct affine_cost {
  double base_s, per_token_s;
} affine_cost;

static double affine(const void *ctx, const fth_infer_batch *b) {
  const affine_cost *c = (const affine_cost *)ctx;
  double tokens = b->decode_requests * (1.0 + b->spec_tokens); /* drafts verified too */
  for (int i = 0; i < b->num_chunks; i++) tokens += b->chunks[i].new_tokens;
  return c->base_s + c->per_token_s * tokens;
}

static void read_dist(lua_State *L, int t, const char *key, fth_serve_dist *d) {
  t = lua_absindex(L, t);
  if (lua_getfield(L, t, key) != LUA_TTABLE) {
    if (!lua_isnil(L, -1))
      lbind_fail(L, FTH_EINVAL, key, "expected a table {kind =, mean =, ...}, got %s",
                 luaL_typename(L, -1));
    lua_pop(L, 1);
    return;
  }
  int i = lua_gettop(L);
  d->kind = (fth_serve_dist_kind)lnames_check(L, i, key, "kind", LNAMES_SERVE_LENGTH, d->kind);
  d->mean = lcheck_number(L, i, key, "mean", d->mean);
  d->sigma = lcheck_number(L, i, key, "sigma", d->sigma);
  d->min = lcheck_number(L, i, key, "min", d->min);
  d->max = lcheck_number(L, i, key, "max", d->max);
  d->s = lcheck_number(L, i, key, "s", d->s);
  lua_pop(L, 1);
}

static double read_count(lua_State *L, int t, const char *key, double def, double hi) {
  double v = lcheck_number(L, t, "serve", key, def);
  if (!(v >= 1 && v <= hi && v == floor(v)))
    lbind_fail(L, FTH_EINVAL, key, "expected an integer in [1, %.0f], got %.14g", hi, v);
  return v;
}

static void read_serve(lua_State *L, int idx, const fth_infer_plan *plan,
                       const fth_infer_plan *prefill, const fth_infer_plan *draft,
                       fth_serve_def *d) {
  const char *w = "serve";
  *d = fth_serve_def_default();
  if (plan) {
    d->kv_capacity_tokens = fth_infer_kv_capacity_tokens_draft(plan, draft);
    d->kv_window_tokens = plan->model.attention_window;
    d->kv_windowed_share = fth_model_windowed_share(&plan->model);
    d->gpus_per_replica = plan->layout.num_gpus;
    d->kv_transfer_bytes_per_token =
        fth_model_kv_cache_elems_per_token(&plan->model) * plan->inf.kv_bytes;
  }
  if (prefill) {
    d->prefill_kv_capacity_tokens = fth_infer_kv_capacity_tokens(prefill);
    d->prefill_gpus_per_replica = prefill->layout.num_gpus;
  }
  d->requests = (int64_t)read_count(L, idx, "requests", (double)d->requests, 1e8);
  double seed = lcheck_number(L, idx, w, "seed", (double)d->seed);
  if (!(seed >= 0 && seed <= 9007199254740992.0 && seed == floor(seed)))
    lbind_fail(L, FTH_EINVAL, "seed", "expected an integer in [0, 2^53], got %.14g", seed);
  d->seed = (uint64_t)seed;
  d->arrival =
      (fth_serve_arrival)lnames_check(L, idx, w, "arrival", LNAMES_SERVE_ARRIVAL, d->arrival);
  d->rate_per_s = lcheck_number(L, idx, w, "rate_per_s", d->rate_per_s);
  d->burstiness = lcheck_number(L, idx, w, "burstiness", d->burstiness);
  d->concurrency = (int64_t)read_count(L, idx, "concurrency", (double)d->concurrency, 1e8);
  d->think_s = lcheck_number(L, idx, w, "think_s", d->think_s);
  read_dist(L, idx, "input", &d->input);
  read_dist(L, idx, "output", &d->output);
  d->policy = (fth_serve_policy)lnames_check(L, idx, w, "policy", LNAMES_SERVE_POLICY, d->policy);
  d->max_batch = (int)read_count(L, idx, "max_batch", d->max_batch, FTH_SERVE_MAX_BATCH);
  d->max_batch_tokens = lcheck_number(L, idx, w, "max_batch_tokens", d->max_batch_tokens);
  d->block_tokens = lcheck_number(L, idx, w, "block_tokens", d->block_tokens);
  d->kv_capacity_tokens = lcheck_number(L, idx, w, "kv_capacity_tokens", d->kv_capacity_tokens);
  d->watermark = lcheck_number(L, idx, w, "watermark", d->watermark);
  d->swap_bw_bytes_per_s = lcheck_number(L, idx, w, "swap_bw_bytes_per_s", d->swap_bw_bytes_per_s);
  d->replicas = (int)read_count(L, idx, "replicas", d->replicas, FTH_SERVE_MAX_REPLICAS);
  d->dp_attention = (int)read_count(L, idx, "dp_attention", 1, FTH_SERVE_MAX_REPLICAS);
  d->spec_tokens = (int)lcheck_number(L, idx, w, "spec_tokens", d->spec_tokens);
  d->spec_acceptance = lcheck_number(L, idx, w, "spec_acceptance", d->spec_acceptance);
  /* a replica is then one DP rank: the plan's GPUs over its attention DP ranks */
  if (plan && d->dp_attention > 1 && plan->layout.dp > 1)
    d->gpus_per_replica = plan->layout.num_gpus / plan->layout.dp;
  d->routing =
      (fth_serve_routing)lnames_check(L, idx, w, "routing", LNAMES_SERVE_ROUTING, d->routing);
  d->gpus_per_replica = lcheck_number(L, idx, w, "gpus_per_replica", d->gpus_per_replica);
  d->slo_ttft_s = lcheck_number(L, idx, w, "slo_ttft_s", d->slo_ttft_s);
  d->slo_tpot_s = lcheck_number(L, idx, w, "slo_tpot_s", d->slo_tpot_s);
  d->prefix_hit_ratio = lcheck_number(L, idx, w, "prefix_hit_ratio", d->prefix_hit_ratio);
  double pr = lcheck_number(L, idx, w, "prefill_replicas", 0);
  if (!(pr >= 0 && pr <= FTH_SERVE_MAX_REPLICAS && pr == floor(pr)))
    lbind_fail(L, FTH_EINVAL, "prefill_replicas", "expected an integer in [0, %d], got %.14g",
               FTH_SERVE_MAX_REPLICAS, pr);
  d->prefill_replicas = (int)pr;
  d->prefill_kv_capacity_tokens =
      lcheck_number(L, idx, w, "prefill_kv_capacity_tokens", d->prefill_kv_capacity_tokens);
  d->prefill_gpus_per_replica =
      lcheck_number(L, idx, w, "prefill_gpus_per_replica", d->prefill_gpus_per_replica);
  d->kv_transfer_bytes_per_token =
      lcheck_number(L, idx, w, "kv_transfer_bytes_per_token", d->kv_transfer_bytes_per_token);
  d->kv_link_bw_bytes_per_s =
      lcheck_number(L, idx, w, "kv_link_bw_bytes_per_s", d->kv_link_bw_bytes_per_s);
  d->kv_link_latency_s = lcheck_number(L, idx, w, "kv_link_latency_s", d->kv_link_latency_s);
  double rs = lcheck_number(L, idx, w, "retrieval_servers", 0);
  if (!(rs >= 0 && rs <= 1000000 && rs == floor(rs)))
    lbind_fail(L, FTH_EINVAL, "retrieval_servers", "expected an integer in [0, 1e6], got %.14g",
               rs);
  d->retrieval_servers = (int)rs;
  d->retrieval_s = lcheck_number(L, idx, w, "retrieval_s", d->retrieval_s);
  d->retrieval_tokens = lcheck_number(L, idx, w, "retrieval_tokens", d->retrieval_tokens);
  d->kv_fetch_share = lcheck_number(L, idx, w, "kv_fetch_share", d->kv_fetch_share);
  d->kv_fetch_bw_bytes_per_s =
      lcheck_number(L, idx, w, "kv_fetch_bw_bytes_per_s", d->kv_fetch_bw_bytes_per_s);
  d->kv_fetch_latency_s = lcheck_number(L, idx, w, "kv_fetch_latency_s", d->kv_fetch_latency_s);
  d->thinking_tokens = lcheck_number(L, idx, w, "thinking_tokens", d->thinking_tokens);
}

static void setnum(lua_State *L, const char *k, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, k);
}

static void setint(lua_State *L, const char *k, int64_t v) {
  lua_pushinteger(L, (lua_Integer)v);
  lua_setfield(L, -2, k);
}

static void push_stats(lua_State *L, const char *k, const fth_serve_stats *s) {
  lua_createtable(L, 0, 7);
  setnum(L, "mean", s->mean);
  setnum(L, "p50", s->p50);
  setnum(L, "p90", s->p90);
  setnum(L, "p95", s->p95);
  setnum(L, "p99", s->p99);
  setnum(L, "max", s->max);
  setint(L, "count", s->count);
  lua_setfield(L, -2, k);
}

static void push_result(lua_State *L, const fth_serve_result *r) {
  lua_createtable(L, 0, 16);
  setint(L, "requests_completed", r->requests_completed);
  setnum(L, "duration_s", r->duration_s);
  lua_createtable(L, 0, 4);
  setnum(L, "requests_per_s", r->requests_per_s);
  setnum(L, "input_tokens_per_s", r->input_tokens_per_s);
  setnum(L, "output_tokens_per_s", r->output_tokens_per_s);
  setnum(L, "output_tokens_per_s_per_gpu", r->output_tokens_per_s_per_gpu);
  lua_setfield(L, -2, "throughput");
  push_stats(L, "ttft_s", &r->ttft_s);
  push_stats(L, "tpot_s", &r->tpot_s);
  push_stats(L, "e2e_s", &r->e2e_s);
  push_stats(L, "queue_s", &r->queue_s);
  lua_createtable(L, 0, 2);
  setnum(L, "requests_per_s", r->goodput_requests_per_s);
  setnum(L, "slo_attainment", r->slo_attainment);
  lua_setfield(L, -2, "goodput");
  lua_createtable(L, 0, 2);
  setnum(L, "peak_fraction", r->kv_peak_fraction);
  setnum(L, "capacity_tokens", r->kv_capacity_tokens);
  lua_setfield(L, -2, "kv_cache");
  setint(L, "preemptions", r->preemptions);
  setint(L, "iterations", r->iterations);
  lua_createtable(L, 0, 2);
  setnum(L, "requests", r->mean_batch_requests);
  setnum(L, "tokens", r->mean_batch_tokens);
  lua_setfield(L, -2, "mean_batch");
  setnum(L, "busy_fraction", r->busy_fraction);
  setnum(L, "mean_in_system", r->mean_in_system);
}

/* Columns of the per-request table: one array per field. */
static void push_requests(lua_State *L, const fth_serve_request *q, int64_t n) {
  static const char *const num_cols[] = {"arrival_s", "admit_s", "first_token_s", "done_s",
                                         "ready_s"};
  static const char *const int_cols[] = {"input", "output", "replica", "preemptions", "client"};
  lua_createtable(L, 0, 10);
  for (int c = 0; c < 5; c++) {
    lua_createtable(L, (int)n, 0);
    for (int64_t i = 0; i < n; i++) {
      const double v[5] = {q[i].arrival_s, q[i].admit_s, q[i].first_token_s, q[i].done_s,
                           q[i].ready_s};
      lua_pushnumber(L, v[c]);
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, num_cols[c]);
  }
  for (int c = 0; c < 5; c++) {
    lua_createtable(L, (int)n, 0);
    for (int64_t i = 0; i < n; i++) {
      const int32_t v[5] = {q[i].input, q[i].output, q[i].replica, q[i].preemptions,
                            q[i].client + 1};
      lua_pushinteger(L, v[c]);
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, int_cols[c]);
  }
}

/* def.trace = {arrival_s = {...}, input = {...}, output = {...}}: the rows, in a
 * userdata left on the stack (the caller's allocation of the input); NULL when absent.
 * Its length sets def->requests. */
static const fth_serve_trace_row *read_trace(lua_State *L, int idx, fth_serve_def *d) {
  if (lua_getfield(L, idx, "trace") != LUA_TTABLE) {
    if (!lua_isnil(L, -1))
      lbind_fail(L, FTH_EINVAL, "trace", "expected a table of columns, got %s",
                 luaL_typename(L, -1));
    lua_pop(L, 1);
    return NULL;
  }
  int t = lua_gettop(L);
  static const char *const cols[3] = {"arrival_s", "input", "output"};
  lua_Integer n = -1;
  for (int c = 0; c < 3; c++) {
    if (lua_getfield(L, t, cols[c]) != LUA_TTABLE)
      lbind_fail(L, FTH_EINVAL, "trace", "expected a column '%s' (an array)", cols[c]);
    lua_Integer m = (lua_Integer)lua_rawlen(L, -1);
    if (n >= 0 && m != n)
      lbind_fail(L, FTH_EINVAL, "trace", "columns of %lld and %lld rows", (long long)n,
                 (long long)m);
    n = m;
    lua_pop(L, 1);
  }
  if (n < 1 || n > 100000000)
    lbind_fail(L, FTH_EINVAL, "trace", "expected 1 to 1e8 rows, got %lld", (long long)n);
  fth_serve_trace_row *rows = (fth_serve_trace_row *)lua_newuserdatauv(
      L, sizeof(fth_serve_trace_row) * (size_t)n, 0); /* trace rows */
  lua_replace(L, t);                                  /* rows */
  int r = lua_gettop(L);
  lua_getfield(L, idx, "trace"); /* rows trace */
  for (int c = 0; c < 3; c++) {
    lua_getfield(L, -1, cols[c]); /* rows trace col */
    for (lua_Integer i = 0; i < n; i++) {
      lua_rawgeti(L, -1, i + 1);
      int ok;
      double v = lua_tonumberx(L, -1, &ok);
      if (!ok)
        lbind_fail(L, FTH_EINVAL, "trace", "row %lld: %s is not a number", (long long)i, cols[c]);
      double *dst = c == 0 ? &rows[i].arrival_s : c == 1 ? &rows[i].input : &rows[i].output;
      *dst = v;
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  lua_settop(L, r); /* rows */
  lua_getfield(L, idx, "trace");
  if (lua_getfield(L, -1, "client") == LUA_TTABLE) { /* rows trace client */
    if ((lua_Integer)lua_rawlen(L, -1) != n)
      lbind_fail(L, FTH_EINVAL, "trace", "a client column of %lld rows, not %lld",
                 (long long)lua_rawlen(L, -1), (long long)n);
    for (lua_Integer i = 0; i < n; i++) {
      lua_rawgeti(L, -1, i + 1);
      int ok;
      lua_Integer v = lua_tointegerx(L, -1, &ok);
      if (!ok || v < 1 || v > 1000000)
        lbind_fail(L, FTH_EINVAL, "trace", "row %lld: client is not an index in [1, 1e6]",
                   (long long)i);
      rows[i].client = (int32_t)(v - 1);
      lua_pop(L, 1);
    }
  } else {
    for (lua_Integer i = 0; i < n; i++) rows[i].client = 0;
  }
  lua_settop(L, r); /* rows */
  d->requests = (int64_t)n;
  d->trace = rows;
  return rows;
}

/* (def [, plan [, prefill_plan [, draft_plan]]]) -> result table [, requests table] */
static int core_serve_run(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  const fth_infer_plan *plan = NULL, *prefill = NULL, *draft = NULL;
  if (!lua_isnoneornil(L, 2)) plan = (const fth_infer_plan *)luaL_checkudata(L, 2, INFER_PLAN);
  if (!lua_isnoneornil(L, 3)) prefill = (const fth_infer_plan *)luaL_checkudata(L, 3, INFER_PLAN);
  if (!lua_isnoneornil(L, 4)) draft = (const fth_infer_plan *)luaL_checkudata(L, 4, INFER_PLAN);
  if (draft && !plan) luaL_argerror(L, 4, "a draft plan needs the target's plan");
  lua_settop(L, 4);
  fth_serve_def d;
  read_serve(L, 1, plan, prefill, draft, &d);
  if (prefill) {
    d.prefill_cost = fth_serve_plan_cost;
    d.prefill_cost_ctx = prefill;
  }
  read_trace(L, 1, &d); /* [rows] */
  affine_cost ac = {0, 0};
  if (lua_getfield(L, 1, "cost") == LUA_TTABLE) {
    ac.base_s = lcheck_number(L, -1, "cost", "base_s", 0);
    ac.per_token_s = lcheck_number(L, -1, "cost", "per_token_s", 0);
  } else if (plan == NULL) {
    lbind_fail(L, FTH_EINVAL, "cost",
               "expected an inference plan or cost = {base_s =, per_token_s =}");
  }
  lua_pop(L, 1);
  int per_request = lcheck_bool(L, 1, "serve", "per_request", 0);
  fth_error err;
  if (fth_serve_check(&d, &err) != FTH_OK) return lbind_raise(L, NULL, &err);
  size_t bytes = fth_serve_workspace_bytes(&d);
  void *ws = lua_newuserdatauv(L, bytes, 0); /* ws */
  fth_serve_result r;
  fth_serve_draft_engine de = {fth_serve_plan_cost, plan, fth_serve_plan_cost, draft};
  fth_status st = draft  ? fth_serve_run(&d, fth_serve_draft_cost, &de, ws, bytes, &r, &err)
                  : plan ? fth_serve_run(&d, fth_serve_plan_cost, plan, ws, bytes, &r, &err)
                         : fth_serve_run(&d, affine, &ac, ws, bytes, &r, &err);
  if (st != FTH_OK) return lbind_raise(L, NULL, &err);
  push_result(L, &r); /* ws result */
  if (lua_getfield(L, 1, "clients") == LUA_TTABLE) { /* ws result clients */
    int ct = lua_gettop(L);
    lua_Integer nc = (lua_Integer)lua_rawlen(L, ct);
    lua_createtable(L, (int)nc, 0); /* ws result clients out */
    for (lua_Integer c = 1; c <= nc; c++) {
      lua_rawgeti(L, ct, c);
      if (!lua_istable(L, -1)) lbind_fail(L, FTH_EINVAL, "clients", "entry %lld is not a table", (long long)c);
      double ttft = lcheck_number(L, -1, "clients", "slo_ttft_s", 0);
      double tpot = lcheck_number(L, -1, "clients", "slo_tpot_s", 0);
      lua_pop(L, 1);
      fth_serve_result cr;
      fth_serve_client_result(&d, ws, (int32_t)(c - 1), ttft, tpot, &cr);
      push_result(L, &cr);
      lua_rawseti(L, -2, c);
    }
    lua_setfield(L, -3, "clients"); /* ws result clients */
  }
  lua_pop(L, 1); /* ws result */
  if (!per_request) return 1;
  push_requests(L, fth_serve_requests(ws), d.requests); /* ws result requests */
  return 2;
}

/* (def) -> {arrival_s =, input =, output =}: the open-loop stream `def` draws
 * (fth_serve_draw), one client's traffic to merge with others' into a trace. */
static int core_serve_draw(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  fth_serve_def d;
  read_serve(L, 1, NULL, NULL, NULL, &d);
  d.kv_capacity_tokens = d.block_tokens; /* not simulated: any valid capacity */
  fth_serve_trace_row *rows = (fth_serve_trace_row *)lua_newuserdatauv(
      L, sizeof(fth_serve_trace_row) * (size_t)d.requests, 0);
  fth_error err;
  if (fth_serve_draw(&d, rows, &err) != FTH_OK) return lbind_raise(L, NULL, &err);
  static const char *const cols[3] = {"arrival_s", "input", "output"};
  lua_createtable(L, 0, 3);
  for (int c = 0; c < 3; c++) {
    lua_createtable(L, (int)d.requests, 0);
    for (int64_t i = 0; i < d.requests; i++) {
      if (c == 0)
        lua_pushnumber(L, rows[i].arrival_s);
      else
        lua_pushinteger(L, (lua_Integer)(c == 1 ? rows[i].input : rows[i].output));
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, cols[c]);
  }
  return 1;
}

/* (k, a) -> expected tokens a decode step emits (fth_serve_spec_tokens_per_step) */
static int core_serve_spec_tokens_per_step(lua_State *L) {
  lua_pushnumber(L, fth_serve_spec_tokens_per_step((int)luaL_checkinteger(L, 1), luaL_checknumber(L, 2)));
  return 1;
}

static const luaL_Reg serve_funcs[] = {{"serve_run", core_serve_run},
                                       {"serve_draw", core_serve_draw},
                                       {"serve_spec_tokens_per_step", core_serve_spec_tokens_per_step},
                                       {NULL, NULL}};

void lfth_open_serve(lua_State *L) {
  lbind_setfuncs(L, serve_funcs);
}
