/* ltrace.c: execution traces of a training step, `fathom.Trace` (fth_trace.h).
 *   core.trace_compile(plan) -> trace           (a fathom.TrainPlan or InferPlan, kept alive by it)
 *   trace:info() -> {ranks, stages, microbatches, passes, training, pp_hop_s, schedule, chunks,
 *                    stage_passes,
 *                    group_size = {<kind> = n, ...}}
 *   trace:stage(rank) -> stage                  (ranks and stages are 0-based, as in the files)
 *   trace:group(kind, rank) -> id, {members}    (kind: a comm_kind name; id 0 when no group)
 *   trace:group_id(kind, rank) -> id            (cheap: no member list)
 *   trace:stage_peer(rank, stage) -> rank       (the rank of `stage` with rank's other coordinates)
 *   trace:pass(stage, k) -> forward, mb, chunk  (the k-th pass of the stage's schedule; 0-based)
 *   trace:hop(stage, forward, mb, chunk, out) -> stage, chunk, tag | nil
 *                                               (whom the pass receives from / sends to, out false / true)
 *   trace:stage_time(stage [, chunk]) -> {forward_s, backward_s, forward_kernel_s, backward_kernel_s,
 *                               comm = {<kind> = {forward_raw_s, forward_exposed_s, ...}}}
 *   trace:network() -> {{type, size, bandwidth_bytes_per_s, latency_s}, ...} (physical dimensions,
 *                      innermost first; bandwidth per GPU per direction, efficiency applied)
 *   trace:write_rank(rank, path) -> stats | nil, message   (Chakra ET of the rank to path)
 * Bad ranks and kinds raise; an I/O failure returns nil and a message. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fth_trace.h"
#include "lfathom.h"
#include "lnames.h"

#define TRACE "fathom.Trace"
#define TRAIN_PLAN "fathom.TrainPlan"
#define INFER_PLAN "fathom.InferPlan"
/* The encoder's output buffer: large writes, bounded memory. */
#define TRACE_BUF (1u << 20)

typedef struct ltrace {
  fth_trace t;
  uint8_t buf[TRACE_BUF];
} ltrace;

static ltrace *check_trace(lua_State *L, int idx) {
  return (ltrace *)luaL_checkudata(L, idx, TRACE);
}

/* (plan) -> trace, for a training plan (one step) or an inference plan (one
 * prefill or decode iteration); raises {kind, path, msg} for what it cannot lay out. */
static int core_trace_compile(lua_State *L) {
  const fth_train_plan *tp = (const fth_train_plan *)luaL_testudata(L, 1, TRAIN_PLAN);
  const fth_infer_plan *ip = (const fth_infer_plan *)luaL_testudata(L, 1, INFER_PLAN);
  luaL_argexpected(L, tp || ip, 1, TRAIN_PLAN " or " INFER_PLAN);
  ltrace *lt = (ltrace *)lua_newuserdatauv(L, sizeof(ltrace), 1);
  luaL_setmetatable(L, TRACE);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1); /* the plan lives as long as the trace */
  fth_error err;
  fth_status st = tp ? fth_trace_compile(&lt->t, tp, &err) : fth_trace_compile_infer(&lt->t, ip, &err);
  if (st != FTH_OK) return lbind_raise(L, NULL, &err);
  return 1;
}

static void setnum(lua_State *L, const char *k, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, k);
}

static int check_rank(lua_State *L, const ltrace *lt, int idx) {
  lua_Integer r = luaL_checkinteger(L, idx);
  luaL_argcheck(L, r >= 0 && r < lt->t.ranks, idx, "rank outside the job");
  return (int)r;
}

static int check_kind(lua_State *L, int idx) {
  int k = lnames_parse(LNAMES_COMM_KIND, luaL_checkstring(L, idx));
  luaL_argcheck(L, k >= 0, idx, "unknown communication kind");
  return k;
}

/* (trace) -> {ranks, stages, microbatches, group_size = {kind = n}} */
static int trace_info(lua_State *L) {
  const ltrace *lt = check_trace(L, 1);
  lua_createtable(L, 0, 4);
  lua_pushinteger(L, lt->t.ranks);
  lua_setfield(L, -2, "ranks");
  lua_pushinteger(L, lt->t.pp);
  lua_setfield(L, -2, "stages");
  lua_pushinteger(L, lt->t.microbatches);
  lua_setfield(L, -2, "microbatches");
  lua_pushinteger(L, lt->t.passes);
  lua_setfield(L, -2, "passes");
  lua_pushboolean(L, lt->t.plan != NULL);
  lua_setfield(L, -2, "training");
  setnum(L, "pp_hop_s", lt->t.work.pp_hop_s);
  lua_pushstring(L, fth_pp_schedule_name(lt->t.schedule));
  lua_setfield(L, -2, "schedule");
  lua_pushinteger(L, lt->t.chunks);
  lua_setfield(L, -2, "chunks");
  lua_pushinteger(L, lt->t.stage_passes);
  lua_setfield(L, -2, "stage_passes");
  lua_createtable(L, 0, FTH_COMM_KIND_COUNT);
  for (int k = 0; k < FTH_COMM_KIND_COUNT; k++) {
    lua_pushinteger(L, lt->t.group_size[k]);
    lua_setfield(L, -2, fth_comm_kind_name((fth_comm_kind)k));
  }
  lua_setfield(L, -2, "group_size");
  return 1;
}

/* (trace, rank) -> stage */
static int trace_stage(lua_State *L) {
  const ltrace *lt = check_trace(L, 1);
  lua_pushinteger(L, fth_trace_stage(&lt->t, check_rank(L, lt, 2)));
  return 1;
}

/* (trace, kind, rank) -> id, {members (0-based ranks)} */
static int trace_group(lua_State *L) {
  const ltrace *lt = check_trace(L, 1);
  int k = check_kind(L, 2);
  int rank = check_rank(L, lt, 3);
  long id;
  int size = fth_trace_group(&lt->t, (fth_comm_kind)k, rank, NULL, 0, &id);
  int *members = (int *)lua_newuserdatauv(L, sizeof(int) * (size_t)size, 0); /* GC-owned scratch */
  fth_trace_group(&lt->t, (fth_comm_kind)k, rank, members, size, &id);
  lua_pushinteger(L, id);
  lua_createtable(L, size, 0);
  for (int i = 0; i < size; i++) {
    lua_pushinteger(L, members[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 2;
}

/* (trace, kind, rank) -> id */
static int trace_group_id(lua_State *L) {
  const ltrace *lt = check_trace(L, 1);
  int k = check_kind(L, 2);
  long id;
  fth_trace_group(&lt->t, (fth_comm_kind)k, check_rank(L, lt, 3), NULL, 0, &id);
  lua_pushinteger(L, id);
  return 1;
}

/* (trace, rank, stage) -> rank */
static int trace_stage_peer(lua_State *L) {
  const ltrace *lt = check_trace(L, 1);
  int rank = check_rank(L, lt, 2);
  lua_Integer s = luaL_checkinteger(L, 3);
  luaL_argcheck(L, s >= 0 && s < lt->t.pp, 3, "stage outside the pipeline");
  lua_pushinteger(L, fth_trace_stage_peer(&lt->t, rank, (int)s));
  return 1;
}

static int check_stage(lua_State *L, const ltrace *lt, int idx) {
  lua_Integer s = luaL_checkinteger(L, idx);
  luaL_argcheck(L, s >= 0 && s < lt->t.pp, idx, "stage outside the pipeline");
  return (int)s;
}

/* (trace, stage, k) -> forward (boolean), micro-batch, chunk (0-based) */
static int trace_pass(lua_State *L) {
  const ltrace *lt = check_trace(L, 1);
  int s = check_stage(L, lt, 2);
  lua_Integer k = luaL_checkinteger(L, 3);
  luaL_argcheck(L, k >= 0 && k < (lua_Integer)lt->t.stage_passes, 3, "no such pass");
  fth_pp_pass q;
  fth_trace_pass(&lt->t, s, (long)k, &q);
  lua_pushboolean(L, q.fwd);
  lua_pushinteger(L, q.mb);
  lua_pushinteger(L, q.chunk);
  return 3;
}

/* (trace, stage, forward, mb, chunk, out) -> stage, chunk, tag | nil */
static int trace_hop(lua_State *L) {
  const ltrace *lt = check_trace(L, 1);
  int s = check_stage(L, lt, 2);
  fth_pp_pass q = {lua_toboolean(L, 3), (int)luaL_checkinteger(L, 4), (int)luaL_checkinteger(L, 5)};
  luaL_argcheck(L, q.mb >= 0 && q.mb < lt->t.microbatches, 4, "no such micro-batch");
  luaL_argcheck(L, q.chunk >= 0 && q.chunk < lt->t.chunks, 5, "no such chunk");
  int ps, pc, tag;
  if (!fth_trace_hop(&lt->t, s, &q, lua_toboolean(L, 6), &ps, &pc, &tag)) {
    luaL_pushfail(L);
    return 1;
  }
  lua_pushinteger(L, ps);
  lua_pushinteger(L, pc);
  lua_pushinteger(L, tag);
  return 3;
}

/* (trace, stage) -> stage time table */
static int trace_stage_time(lua_State *L) {
  const ltrace *lt = check_trace(L, 1);
  fth_trace_stage_time st;
  int s = check_stage(L, lt, 2);
  lua_Integer c = luaL_optinteger(L, 3, -1);
  luaL_argcheck(L, c >= -1 && c < lt->t.chunks, 3, "no such chunk");
  fth_trace_stage_time_of(&lt->t, s, (int)c, &st);
  lua_createtable(L, 0, 5);
  setnum(L, "forward_s", st.pass_s[0]);
  setnum(L, "backward_s", st.pass_s[1]);
  setnum(L, "forward_kernel_s", st.kernel_s[0]);
  setnum(L, "backward_kernel_s", st.kernel_s[1]);
  lua_createtable(L, 0, FTH_COMM_KIND_COUNT);
  for (int k = 0; k < FTH_COMM_KIND_COUNT; k++) {
    lua_createtable(L, 0, 4);
    setnum(L, "forward_raw_s", st.comm_raw_s[0][k]);
    setnum(L, "forward_exposed_s", st.comm_exposed_s[0][k]);
    setnum(L, "backward_raw_s", st.comm_raw_s[1][k]);
    setnum(L, "backward_exposed_s", st.comm_exposed_s[1][k]);
    lua_setfield(L, -2, fth_comm_kind_name((fth_comm_kind)k));
  }
  lua_setfield(L, -2, "comm");
  return 1;
}

/* (trace) -> the physical dimensions, as ASTRA-sim's network file wants them */
static int trace_network(lua_State *L) {
  const ltrace *lt = check_trace(L, 1);
  const fth_topology_def *topo = lt->t.plan ? &lt->t.plan->topo : &lt->t.infer->topo;
  lua_createtable(L, topo->num_phys, 0);
  for (int d = 0; d < topo->num_phys; d++) {
    const fth_phys_dim_def *pd = &topo->phys[d];
    lua_createtable(L, 0, 4);
    lua_pushstring(L, fth_topo_type_name(pd->type));
    lua_setfield(L, -2, "type");
    lua_pushinteger(L, pd->size);
    lua_setfield(L, -2, "size");
    setnum(L, "bandwidth_bytes_per_s", fth_link_bw_bytes_per_s(&pd->link));
    setnum(L, "latency_s", pd->link.latency_s);
    lua_rawseti(L, -2, d + 1);
  }
  return 1;
}

typedef struct file_sink {
  FILE *f;
  int err;
} file_sink;

static int write_sink(void *ctx, const uint8_t *data, size_t n) {
  file_sink *s = (file_sink *)ctx;
  if (fwrite(data, 1, n, s->f) != n) {
    s->err = errno ? errno : EIO;
    return 1;
  }
  return 0;
}

/* (trace, rank, path) -> stats | nil, message */
static int trace_write_rank(lua_State *L) {
  ltrace *lt = check_trace(L, 1);
  int rank = check_rank(L, lt, 2);
  const char *path = luaL_checkstring(L, 3);
  file_sink s = {fopen(path, "wb"), 0};
  if (!s.f) {
    luaL_pushfail(L);
    lua_pushfstring(L, "%s: %s", path, strerror(errno));
    return 2;
  }
  fth_trace_stats st;
  fth_error err;
  fth_status status = fth_trace_write_rank(&lt->t, rank, lt->buf, sizeof lt->buf, write_sink, &s,
                                           &st, &err);
  if (fclose(s.f) != 0 && !s.err) s.err = errno ? errno : EIO;
  if (status != FTH_OK || s.err) {
    if (status != FTH_OK && !s.err) return lbind_raise(L, NULL, &err);
    luaL_pushfail(L);
    lua_pushfstring(L, "%s: %s", path, strerror(s.err));
    return 2;
  }
  lua_createtable(L, 0, 12);
  setnum(L, "nodes", st.nodes);
  setnum(L, "bytes", st.bytes);
  setnum(L, "comp_nodes", st.comp_nodes);
  setnum(L, "coll_nodes", st.coll_nodes);
  setnum(L, "send_nodes", st.send_nodes);
  setnum(L, "recv_nodes", st.recv_nodes);
  setnum(L, "compute_s", st.compute_us * 1e-6);
  setnum(L, "flops", st.flops);
  setnum(L, "recv_bytes", st.recv_bytes);
  lua_createtable(L, 0, FTH_COMM_KIND_COUNT);
  for (int k = 0; k < FTH_COMM_KIND_COUNT; k++) {
    lua_pushnumber(L, st.coll_bytes[k]);
    lua_setfield(L, -2, fth_comm_kind_name((fth_comm_kind)k));
  }
  lua_setfield(L, -2, "comm_bytes");
  return 1;
}

static int trace_tostring(lua_State *L) {
  const ltrace *lt = check_trace(L, 1);
  lua_pushfstring(L, "fathom.Trace (%d ranks, PP %d, %d micro-batches)", lt->t.ranks, lt->t.pp,
                  lt->t.microbatches);
  return 1;
}

static const luaL_Reg trace_methods[] = {{"info", trace_info},
                                         {"stage", trace_stage},
                                         {"group", trace_group},
                                         {"group_id", trace_group_id},
                                         {"stage_peer", trace_stage_peer},
                                         {"pass", trace_pass},
                                         {"hop", trace_hop},
                                         {"stage_time", trace_stage_time},
                                         {"network", trace_network},
                                         {"write_rank", trace_write_rank},
                                         {NULL, NULL}};

static const luaL_Reg trace_meta[] = {{"__tostring", trace_tostring}, {NULL, NULL}};

static const luaL_Reg trace_funcs[] = {{"trace_compile", core_trace_compile}, {NULL, NULL}};

void lfth_open_trace(lua_State *L) {
  lbind_newclass(L, TRACE, trace_meta, trace_methods);
  lbind_setfuncs(L, trace_funcs);
}
