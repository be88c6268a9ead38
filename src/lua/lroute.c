/* lroute.c: MoE routing and the packet-level all-to-all, fathom.core.
 *   core.route(def) -> result table, matrix   (matrix: fathom.ByteMatrix userdata)
 *   core.mesh_simulate(mesh, matrix [, trace_path, "csv"|"jsonl"]) -> result table
 *   core.mesh_closed_form(mesh, bytes_per_pair) -> seconds, rounds
 *   core.mesh_busiest(mesh, matrix) -> seconds, rounds    (the closed form's bound, any load)
 *   core.mesh_seed_closed_form(mesh, load_per_node) -> seconds, rounds   (the seed's formula)
 *   core.byte_matrix(rows) -> matrix    (rows: n lists of n bytes, row = source)
 *   matrix:get(src, dst) -> bytes (1-based); matrix:size() -> n
 * The trace is written by the binding to `trace_path` (the caller writes to a
 * temporary path and renames it, so a failed run leaves nothing behind). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fth_route.h"
#include "lcheck.h"
#include "lfathom.h"
#include "lnames.h"

#define BYTE_MATRIX "fathom.ByteMatrix"
/* Routed tokens: the routing loop is O(tokens x top_k); fathom.route bounds the
 * product (README, "Limits"), this bounds the count itself. */
#define LROUTE_MAX_TOKENS (1LL << 32)

typedef struct byte_matrix {
  int n;
  double data[]; /* n * n, row = source */
} byte_matrix;

static byte_matrix *new_matrix(lua_State *L, int n) {
  byte_matrix *m = (byte_matrix *)lua_newuserdatauv(
      L, sizeof(byte_matrix) + sizeof(double) * (size_t)n * (size_t)n, 0);
  m->n = n;
  luaL_setmetatable(L, BYTE_MATRIX);
  return m;
}

static void read_route(lua_State *L, int idx, fth_route_def *d, double *hist) {
  const char *w = "route";
  *d = fth_route_def_default();
  double tokens = lcheck_number(L, idx, w, "tokens", (double)d->tokens);
  if (!(tokens >= 1 && tokens <= LROUTE_MAX_TOKENS && tokens == floor(tokens)))
    lbind_fail(L, FTH_EINVAL, "route.tokens", "expected an integer in [1, %lld], got %.14g",
               (long long)LROUTE_MAX_TOKENS, tokens);
  d->tokens = (long long)tokens;
  /* Ranges first: the histogram below is copied into FTH_ROUTE_MAX_EXPERTS slots. */
  d->experts = lcheck_int_range(L, idx, w, "experts", d->experts, 1, FTH_ROUTE_MAX_EXPERTS);
  d->top_k = lcheck_int_range(L, idx, w, "top_k", d->top_k, 1, d->experts);
  d->gpus = lcheck_int_range(L, idx, w, "gpus", d->gpus, 1, FTH_ROUTE_MAX_GPUS);
  d->dist = (fth_route_dist)lnames_check(L, idx, w, "distribution", LNAMES_ROUTE_DISTRIBUTION,
                                         d->dist);
  d->hot_ratio = lcheck_number(L, idx, w, "hot_ratio", d->hot_ratio);
  d->hot_weight = lcheck_number(L, idx, w, "hot_weight", d->hot_weight);
  d->zipf_s = lcheck_number(L, idx, w, "zipf_s", d->zipf_s);
  d->placement = (fth_placement)lnames_check(L, idx, w, "placement", LNAMES_ROUTE_PLACEMENT,
                                             d->placement);
  d->hot_replicas = lcheck_int(L, idx, w, "hot_replicas", d->hot_replicas);
  d->redundant_experts = lcheck_int(L, idx, w, "redundant_experts", d->redundant_experts);
  double seed = lcheck_number(L, idx, w, "seed", 1);
  if (!(seed >= 0 && seed <= 9007199254740992.0 && seed == floor(seed)))
    lbind_fail(L, FTH_EINVAL, "route.seed", "expected an integer in [0, 2^53], got %.14g", seed);
  d->seed = (uint64_t)seed;
  d->hidden = lcheck_number(L, idx, w, "hidden", d->hidden);
  d->act_bytes = lcheck_number(L, idx, w, "act_bytes", d->act_bytes);
  d->weight_bytes = lcheck_number(L, idx, w, "weight_bytes", d->weight_bytes);
  d->expert_id_bytes = lcheck_number(L, idx, w, "expert_id_bytes", d->expert_id_bytes);
  d->id_bytes = lcheck_number(L, idx, w, "id_bytes", d->id_bytes);
  if (lua_getfield(L, idx, "histogram") == LUA_TTABLE) {
    int n = (int)lua_rawlen(L, -1);
    if (n != d->experts)
      lbind_fail(L, FTH_EINVAL, "route.histogram", "expected %d weights (one per expert), got %d",
                 d->experts, n);
    for (int i = 0; i < n && i < FTH_ROUTE_MAX_EXPERTS; i++) {
      lua_rawgeti(L, -1, i + 1);
      hist[i] = lua_tonumber(L, -1);
      lua_pop(L, 1);
    }
    d->histogram = hist;
  }
  lua_pop(L, 1);
}

static void setnum(lua_State *L, const char *k, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, k);
}

static void push_list(lua_State *L, const double *v, int n) {
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushnumber(L, v[i]);
    lua_rawseti(L, -2, i + 1);
  }
}

/* (def) -> result, matrix */
static int core_route(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  double *hist = (double *)lua_newuserdatauv(L, sizeof(double) * FTH_ROUTE_MAX_EXPERTS, 0);
  fth_route_def d;
  read_route(L, 1, &d, hist);
  if (d.gpus < 1 || d.gpus > FTH_ROUTE_MAX_GPUS || d.experts < 1 ||
      d.experts > FTH_ROUTE_MAX_EXPERTS) {
    fth_error err;
    if (fth_route_check(&d, &err) != FTH_OK) return lbind_raise(L, NULL, &err);
  }
  double *loads = (double *)lua_newuserdatauv(L, sizeof(double) * (size_t)(d.experts + d.gpus), 0);
  byte_matrix *m = new_matrix(L, d.gpus); /* hist loads matrix */
  fth_route_stats st;
  fth_error err;
  if (fth_route_run(&d, loads, loads + d.experts, m->data, &st, &err) != FTH_OK)
    return lbind_raise(L, NULL, &err);
  lua_createtable(L, 0, 12); /* hist loads matrix result */
  push_list(L, loads, d.experts);
  lua_setfield(L, -2, "expert_load");
  push_list(L, loads + d.experts, d.gpus);
  lua_setfield(L, -2, "gpu_load");
  setnum(L, "pairs", st.pairs);
  setnum(L, "max_expert_load", st.max_expert_load);
  setnum(L, "mean_expert_load", st.mean_expert_load);
  setnum(L, "max_gpu_load", st.max_gpu_load);
  setnum(L, "mean_gpu_load", st.mean_gpu_load);
  setnum(L, "expert_imbalance", st.expert_imbalance);
  setnum(L, "gpu_imbalance", st.gpu_imbalance);
  setnum(L, "bytes_per_pair", st.bytes_per_pair);
  setnum(L, "total_bytes", st.total_bytes);
  setnum(L, "offnode_bytes", st.offnode_bytes);
  setnum(L, "replicas", st.replicas);
  lua_insert(L, -2); /* hist loads result matrix */
  return 2;
}

static void read_mesh(lua_State *L, int idx, fth_mesh_def *m) {
  const char *w = "mesh";
  *m = fth_mesh_def_default();
  m->nodes = lcheck_int(L, idx, w, "nodes", m->nodes);
  m->links = lcheck_int(L, idx, w, "links", m->links);
  m->link_bw = lcheck_number(L, idx, w, "link_bw", m->link_bw);
  m->packet_size = lcheck_number(L, idx, w, "packet_size", m->packet_size);
  m->packet_prep_s = lcheck_number(L, idx, w, "packet_prep_delay", 0);
  m->base_delay_s = lcheck_number(L, idx, w, "base_delay", 0);
  m->initial_cpu_s = lcheck_number(L, idx, w, "initial_cpu_delay", 0);
  m->nic_bytes_per_round = lcheck_number(L, idx, w, "nic_rate", 0);
  m->rr_max_packets = lcheck_int(L, idx, w, "round_robin_max_packets", 0);
  m->overlap_prep = lcheck_bool(L, idx, w, "overlap_prep", 0);
  m->cluster_size = lcheck_int(L, idx, w, "cluster_size", m->cluster_size);
  m->inter_bw = lcheck_number(L, idx, w, "inter_bw", m->inter_bw);
  m->port_bw = lcheck_number(L, idx, w, "port_bw", m->port_bw);
  m->inter_port_bw = lcheck_number(L, idx, w, "inter_port_bw", m->inter_port_bw);
  m->sched = (fth_mesh_sched)lnames_check(L, idx, w, "scheduler", LNAMES_ROUTE_SCHEDULER, m->sched);
  m->seed_window_s = lcheck_number(L, idx, w, "seed_window", m->seed_window_s);
}

typedef struct trace_ctx {
  FILE *f;
  int jsonl;
} trace_ctx;

static void write_row(void *ud, const fth_mesh_trace_row *r) {
  trace_ctx *t = (trace_ctx *)ud;
  if (t->jsonl)
    fprintf(t->f,
            "{\"round\":%lld,\"rounds\":%lld,\"src\":%d,\"dst\":%d,\"packets\":%.17g,"
            "\"bytes\":%.17g,\"link_use\":%.17g}\n",
            r->round, r->rounds, r->src, r->dst, r->packets, r->bytes, r->link_use);
  else
    fprintf(t->f, "%lld,%lld,%d,%d,%.17g,%.17g,%.17g\n", r->round, r->rounds, r->src, r->dst,
            r->packets, r->bytes, r->link_use);
}

/* A trace file that is closed even when the simulation raises. */
#define TRACE_FILE "fathom.TraceFile"

static int trace_close(lua_State *L) {
  FILE **f = (FILE **)luaL_checkudata(L, 1, TRACE_FILE);
  if (*f) {
    fclose(*f);
    *f = NULL;
  }
  return 0;
}

/* (mesh, matrix [, trace_path, format]) -> result */
static int core_mesh_simulate(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  byte_matrix *m = (byte_matrix *)luaL_checkudata(L, 2, BYTE_MATRIX);
  fth_mesh_def mesh;
  read_mesh(L, 1, &mesh);
  mesh.nodes = m->n;
  const char *path = luaL_optstring(L, 3, NULL);
  static const char *const formats[] = {"csv", "jsonl", NULL};
  int jsonl = luaL_checkoption(L, 4, "csv", formats);
  double *scratch =
      (double *)lua_newuserdatauv(L, sizeof(double) * 2 * (size_t)m->n * (size_t)m->n, 0);
  FILE **fh = (FILE **)lua_newuserdatauv(L, sizeof(FILE *), 0);
  *fh = NULL;
  luaL_setmetatable(L, TRACE_FILE);
  trace_ctx t = {NULL, jsonl};
  if (path) {
    *fh = fopen(path, "w");
    if (*fh == NULL) return lbind_fail(L, FTH_EINVAL, "", "cannot write trace '%s'", path);
    t.f = *fh;
    if (!jsonl) fputs("round,rounds,src,dst,packets,bytes,link_use\n", t.f);
  }
  fth_mesh_result r;
  fth_error err;
  fth_status s = fth_mesh_simulate(&mesh, m->data, scratch, scratch + (size_t)m->n * (size_t)m->n,
                                   path ? write_row : NULL, &t, &r, &err);
  if (*fh) {
    int bad = ferror(*fh);
    fclose(*fh);
    *fh = NULL;
    if (bad) return lbind_fail(L, FTH_EINVAL, "", "write error on trace '%s'", path);
  }
  if (s != FTH_OK) return lbind_raise(L, NULL, &err);
  lua_createtable(L, 0, 6);
  lua_pushinteger(L, (lua_Integer)r.rounds);
  lua_setfield(L, -2, "rounds");
  lua_pushinteger(L, (lua_Integer)r.events);
  lua_setfield(L, -2, "events");
  setnum(L, "time_s", r.time_s);
  setnum(L, "packets", r.packets);
  setnum(L, "bytes", r.bytes);
  setnum(L, "round_s", fth_mesh_round_s(&mesh));
  return 1;
}

/* (mesh, bytes_per_pair) -> seconds, rounds */
/* The mesh at `idx`, checked (nodes: the matrix's when > 0); raises on a bad one. */
static void checked_mesh(lua_State *L, int idx, int nodes, fth_mesh_def *mesh) {
  luaL_checktype(L, idx, LUA_TTABLE);
  read_mesh(L, idx, mesh);
  if (nodes > 0) mesh->nodes = nodes;
  fth_error err;
  if (fth_mesh_check(mesh, &err) != FTH_OK) lbind_raise(L, NULL, &err);
}

/* seconds, rounds: what every closed form returns */
static int push_time_rounds(lua_State *L, double s, double rounds) {
  lua_pushnumber(L, s);
  lua_pushnumber(L, rounds);
  return 2;
}

static int core_mesh_closed_form(lua_State *L) {
  fth_mesh_def mesh;
  checked_mesh(L, 1, 0, &mesh);
  double rounds;
  double t = fth_mesh_closed_form_s(&mesh, luaL_checknumber(L, 2), &rounds);
  return push_time_rounds(L, t, rounds);
}

/* ({{bytes, ...}, ...}) -> matrix: n rows of n bytes (row = source) */
static int core_byte_matrix(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer n = luaL_len(L, 1);
  luaL_argcheck(L, n >= 1 && n <= FTH_ROUTE_MAX_GPUS, 1, "expected 1..1024 rows");
  byte_matrix *m = new_matrix(L, (int)n);
  for (lua_Integer s = 1; s <= n; s++) {
    if (lua_rawgeti(L, 1, s) != LUA_TTABLE || luaL_len(L, -1) != n)
      return lbind_fail(L, FTH_EINVAL, "matrix", "row %d: expected %d numbers", (int)s, (int)n);
    for (lua_Integer d = 1; d <= n; d++) {
      lua_rawgeti(L, -1, d);
      int ok;
      double v = lua_tonumberx(L, -1, &ok);
      if (!ok || !(v >= 0 && isfinite(v)))
        return lbind_fail(L, FTH_EINVAL, "matrix", "row %d, column %d: expected bytes >= 0",
                          (int)s, (int)d);
      m->data[(size_t)(s - 1) * (size_t)n + (size_t)(d - 1)] = v;
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  return 1;
}

/* (mesh, matrix) -> seconds, rounds */
static int core_mesh_busiest(lua_State *L) {
  byte_matrix *m = (byte_matrix *)luaL_checkudata(L, 2, BYTE_MATRIX);
  fth_mesh_def mesh;
  checked_mesh(L, 1, m->n, &mesh);
  double rounds;
  double t = fth_mesh_busiest_s(&mesh, m->data, &rounds);
  return push_time_rounds(L, t, rounds);
}

/* (mesh, load_per_node) -> seconds, rounds */
static int core_mesh_seed_closed_form(lua_State *L) {
  fth_mesh_def mesh;
  checked_mesh(L, 1, 0, &mesh);
  double rounds;
  double t = fth_mesh_seed_closed_form_s(&mesh, luaL_checknumber(L, 2), &rounds);
  return push_time_rounds(L, t, rounds);
}

/* (matrix, src, dst) -> bytes */
static int matrix_get(lua_State *L) {
  byte_matrix *m = (byte_matrix *)luaL_checkudata(L, 1, BYTE_MATRIX);
  lua_Integer s = luaL_checkinteger(L, 2), d = luaL_checkinteger(L, 3);
  luaL_argcheck(L, s >= 1 && s <= m->n, 2, "source out of range");
  luaL_argcheck(L, d >= 1 && d <= m->n, 3, "destination out of range");
  lua_pushnumber(L, m->data[(size_t)(s - 1) * (size_t)m->n + (size_t)(d - 1)]);
  return 1;
}

/* (matrix) -> n */
static int matrix_size(lua_State *L) {
  byte_matrix *m = (byte_matrix *)luaL_checkudata(L, 1, BYTE_MATRIX);
  lua_pushinteger(L, m->n);
  return 1;
}

static int matrix_tostring(lua_State *L) {
  byte_matrix *m = (byte_matrix *)luaL_checkudata(L, 1, BYTE_MATRIX);
  lua_pushfstring(L, "fathom.ByteMatrix (%d x %d)", m->n, m->n);
  return 1;
}

static const luaL_Reg matrix_methods[] = {{"get", matrix_get}, {"size", matrix_size}, {NULL, NULL}};

static const luaL_Reg matrix_meta[] = {{"__tostring", matrix_tostring}, {NULL, NULL}};

static const luaL_Reg trace_meta[] = {
    {"__gc", trace_close}, {"__close", trace_close}, {NULL, NULL}};

static const luaL_Reg route_funcs[] = {{"route", core_route},
                                       {"mesh_simulate", core_mesh_simulate},
                                       {"mesh_closed_form", core_mesh_closed_form},
                                       {"mesh_busiest", core_mesh_busiest},
                                       {"byte_matrix", core_byte_matrix},
                                       {"mesh_seed_closed_form", core_mesh_seed_closed_form},
                                       {NULL, NULL}};

/* fathom.core.mesh_defaults: the mesh fields' defaults (fth_mesh_def_default), under
 * the names the mesh table takes, so the Lua schema and --help show the core's. */
static void push_mesh_defaults(lua_State *L) {
  fth_mesh_def m = fth_mesh_def_default();
  lua_createtable(L, 0, 16);
  lua_pushinteger(L, m.links);
  lua_setfield(L, -2, "links");
  setnum(L, "link_bw", m.link_bw);
  setnum(L, "packet_size", m.packet_size);
  setnum(L, "packet_prep_delay", m.packet_prep_s);
  setnum(L, "base_delay", m.base_delay_s);
  setnum(L, "initial_cpu_delay", m.initial_cpu_s);
  setnum(L, "nic_rate", m.nic_bytes_per_round);
  lua_pushinteger(L, m.rr_max_packets);
  lua_setfield(L, -2, "round_robin_max_packets");
  lua_pushboolean(L, m.overlap_prep);
  lua_setfield(L, -2, "overlap_prep");
  lua_pushinteger(L, m.cluster_size);
  lua_setfield(L, -2, "cluster_size");
  setnum(L, "inter_bw", m.inter_bw);
  setnum(L, "port_bw", m.port_bw);
  setnum(L, "inter_port_bw", m.inter_port_bw);
  lua_pushstring(L, fth_mesh_sched_name(m.sched));
  lua_setfield(L, -2, "scheduler");
  setnum(L, "seed_window", m.seed_window_s);
}

void lfth_open_route(lua_State *L) {
  lbind_newclass(L, BYTE_MATRIX, matrix_meta, matrix_methods);
  luaL_newmetatable(L, TRACE_FILE);
  luaL_setfuncs(L, trace_meta, 0);
  lua_pop(L, 1);
  lbind_setfuncs(L, route_funcs);
  push_mesh_defaults(L);
  lua_setfield(L, -2, "mesh_defaults");
}
