/* ltrain.c: the compiled training scenario, `fathom.TrainPlan`.
 *   core.train_compile(node, topology, model, workload) -> plan
 *   plan:evaluate() -> result table (SI units, raw numbers)
 *   plan:footprint() -> memory table (cheap; what a search checks first)
 *   plan:degrees() -> {tp, tp_moe, dp, dp_moe, ep, ep_su, ep_so, pp, cp, gpus, microbatches}
 *   plan:group_levels(kind) -> the levels of a communication group ("ep", ...), innermost
 *       first, as core.collective takes them (bandwidth after sharing): what the step
 *       model's collectives run over, for a simulation of the same exchange (fathom.route)
 * Input tables are the normalised ones lua/fathom/spec.lua builds. */
#include <string.h>

#include "lcheck.h"
#include "lfathom.h"
#include "lnames.h"

#define TRAIN_PLAN "fathom.TrainPlan"

static fth_train_plan *check_plan(lua_State *L, int idx) {
  return (fth_train_plan *)luaL_checkudata(L, idx, TRAIN_PLAN);
}

/* (node, topology, model, workload) -> plan; raises "<input>.<path>: reason". */
static int core_train_compile(lua_State *L) {
  fth_node_def node;
  fth_topology_def topo;
  fth_model_def model;
  fth_train_def work;
  lcheck_node(L, 1, &node);
  lcheck_topology(L, 2, &topo);
  lcheck_model(L, 3, &model);
  lcheck_train(L, 4, &work);
  fth_train_plan *p = (fth_train_plan *)lua_newuserdatauv(L, sizeof(fth_train_plan), 0);
  luaL_setmetatable(L, TRAIN_PLAN);
  fth_error err;
  if (fth_train_compile(p, &node, &topo, &model, &work, &err) != FTH_OK)
    return lbind_raise(L, NULL, &err);
  return 1;
}

static void setnum(lua_State *L, const char *k, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, k);
}

static void setint(lua_State *L, const char *k, lua_Integer v) {
  lua_pushinteger(L, v);
  lua_setfield(L, -2, k);
}


static void push_pass(lua_State *L, const double *flops, const double *cs, const double *bytes,
                      const double *ms) {
  lua_createtable(L, 0, FTH_FLOP_PART_COUNT);
  for (int i = 0; i < FTH_FLOP_PART_COUNT; i++) {
    lua_createtable(L, 0, 4);
    setnum(L, "flops", flops[i]);
    setnum(L, "compute_s", cs[i]);
    setnum(L, "bytes", bytes[i]);
    setnum(L, "memory_s", ms[i]);
    lua_setfield(L, -2, lnames_name(LNAMES_FLOP_PART, i));
  }
}

/* Push a training result as a table (SI units, raw numbers): what plan:evaluate()
 * and core.search_eval return, one shape for both. */
void lfth_push_train_result(lua_State *L, const fth_train_result *r) {
  lua_createtable(L, 0, 40);
  setnum(L, "step_time_s", r->step_time_s);
  setnum(L, "fwd_s", r->fwd_s);
  setnum(L, "bwd_s", r->bwd_s);
  setnum(L, "compute_s", r->compute_s);
  setnum(L, "memory_exposed_s", r->memory_exposed_s);
  setnum(L, "recompute_s", r->recompute_s);
  setnum(L, "host_wait_s", r->host_wait_s);
  setnum(L, "bubble_s", r->bubble_s);
  setnum(L, "optimizer_s", r->optimizer_s);
  setnum(L, "exposed_comm_s", r->exposed_comm_s);
  setnum(L, "offload_raw_s", r->offload_raw_s);
  setnum(L, "offload_exposed_s", r->offload_exposed_s);
  setnum(L, "dp_interference_s", r->dp_interference_s);
  setnum(L, "busy_s", r->busy_s);
  setnum(L, "microbatches", r->microbatches);
  setnum(L, "bubble_fraction", r->bubble_fraction);
  setnum(L, "paired_share", r->paired_share);
  setnum(L, "tokens_per_step", r->tokens_per_step);
  setnum(L, "steps", r->steps);
  setnum(L, "total_time_s", r->total_time_s);
  setnum(L, "tokens_per_s", r->tokens_per_s);
  setnum(L, "model_flops_per_step", r->model_flops_per_step);
  setnum(L, "hardware_flops_per_step", r->hardware_flops_per_step);
  setnum(L, "mfu", r->mfu);
  setnum(L, "hfu", r->hfu);
  setnum(L, "achieved_flops_per_gpu", r->achieved_flops_per_gpu);
  setnum(L, "params_per_gpu", r->params_per_gpu);
  lua_createtable(L, 0, FTH_COMM_KIND_COUNT);
  for (int k = 0; k < FTH_COMM_KIND_COUNT; k++) {
    const fth_comm_item *c = &r->comm[k];
    lua_createtable(L, 0, 12);
    lua_pushstring(L, fth_coll_op_name(c->op));
    lua_setfield(L, -2, "op");
    lua_pushstring(L, fth_coll_algo_name(c->algo));
    lua_setfield(L, -2, "algorithm");
    setint(L, "group_size", c->group_size);
    setint(L, "phys_dim", c->phys_dim + 1);
    setint(L, "num_levels", c->num_levels);
    setnum(L, "bytes_per_call", c->bytes_per_call);
    setnum(L, "calls_per_step", c->calls_per_step);
    setnum(L, "bytes_per_step", c->bytes_per_step);
    setnum(L, "raw_s", c->raw_s);
    setnum(L, "hidden_s", c->hidden_s);
    setnum(L, "exposed_s", c->exposed_s);
    lua_setfield(L, -2, fth_comm_kind_name((fth_comm_kind)k));
  }
  lua_setfield(L, -2, "comm");
  lua_createtable(L, 0, 4);
  push_pass(L, r->fwd_flops, r->fwd_compute_s, r->fwd_bytes, r->fwd_memory_s);
  lua_setfield(L, -2, "forward");
  push_pass(L, r->bwd_flops, r->bwd_compute_s, r->bwd_bytes, r->bwd_memory_s);
  lua_setfield(L, -2, "backward");
  setnum(L, "forward_kernel_s", r->fwd_kernel_s);
  setnum(L, "backward_kernel_s", r->bwd_kernel_s);
  /* kernel time by kind of kernel (gemm, attention, other): a profiler's split */
  for (int pass = 0; pass < 2; pass++) {
    const double *cls = pass ? r->bwd_class_s : r->fwd_class_s;
    lua_createtable(L, 0, FTH_KERNEL_CLASS_COUNT);
    for (int i = 0; i < FTH_KERNEL_CLASS_COUNT; i++)
      setnum(L, fth_kernel_class_name((fth_kernel_class)i), cls[i]);
    lua_setfield(L, -2, pass ? "backward_classes" : "forward_classes");
  }
  lua_setfield(L, -2, "per_microbatch");
  lcheck_push_footprint(L, &r->mem);
  lua_setfield(L, -2, "memory");
}

/* (plan) -> result table */
static int plan_evaluate(lua_State *L) {
  const fth_train_plan *p = check_plan(L, 1);
  fth_train_result r;
  fth_train_evaluate(p, &r);
  lfth_push_train_result(L, &r);
  return 1;
}

/* (plan) -> memory table */
static int plan_footprint(lua_State *L) {
  const fth_train_plan *p = check_plan(L, 1);
  fth_memory_footprint m;
  fth_train_footprint(p, &m);
  lcheck_push_footprint(L, &m);
  return 1;
}

/* (plan) -> degrees table */
static int plan_degrees(lua_State *L) {
  const fth_train_plan *p = check_plan(L, 1);
  lua_createtable(L, 0, 16);
  setint(L, "tp", p->layout.tp);
  setint(L, "tp_moe", p->layout.tp_moe);
  setint(L, "dp", p->layout.dp);
  setint(L, "dp_moe", p->layout.dp_moe);
  setint(L, "ep", p->layout.ep);
  setint(L, "ep_su", p->layout.ep_su);
  setint(L, "ep_so", p->layout.ep_so);
  setint(L, "pp", p->layout.pp);
  setint(L, "cp", p->layout.cp);
  lbind_setcount(L, "gpus", p->layout.num_gpus);
  lbind_setcount(L, "microbatches", p->microbatches);
  setint(L, "layers_per_stage", p->layout.layers_per_stage);
  setint(L, "moe_layers_per_stage", p->layout.moe_layers_per_stage);
  setnum(L, "local_experts", p->layout.local_experts);
  setnum(L, "params_total", p->layout.params.total);
  setnum(L, "params_active", p->layout.params.active);
  return 1;
}

/* (plan, kind) -> {{group_size, dim_size, type, bw_bytes_per_s, latency_s}, ...} */
static int plan_group_levels(lua_State *L) {
  const fth_train_plan *p = check_plan(L, 1);
  const char *kind = luaL_checkstring(L, 2);
  int k = 0;
  while (k < FTH_COMM_KIND_COUNT && strcmp(kind, fth_comm_kind_name((fth_comm_kind)k)) != 0) k++;
  luaL_argcheck(L, k < FTH_COMM_KIND_COUNT, 2, "unknown communication kind");
  const fth_group *g = &p->layout.group[k];
  lua_createtable(L, g->n, 0);
  for (int i = 0; i < g->n; i++) {
    const fth_group_level *lv = &g->lv[i];
    lua_createtable(L, 0, 6);
    setint(L, "group_size", lv->group_size);
    setint(L, "dim_size", lv->dim_size);
    lua_pushstring(L, lnames_name(LNAMES_TOPOLOGY_TYPE, lv->type));
    lua_setfield(L, -2, "type");
    setnum(L, "bw_bytes_per_s", lv->bw_bytes_per_s);
    setnum(L, "latency_s", lv->latency_s);
    lua_pushboolean(L, lv->in_network_reduction);
    lua_setfield(L, -2, "in_network_reduction");
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* (plan, kind) -> nil (not a rank-order placement) or {size, groups, straddling,
 * cross_fraction, pods, levels = {...}}: fth_topology_place of the kind's group. */
static int plan_placement(lua_State *L) {
  const fth_train_plan *p = check_plan(L, 1);
  const char *kind = luaL_checkstring(L, 2);
  int k = 0;
  while (k < FTH_COMM_KIND_COUNT && strcmp(kind, fth_comm_kind_name((fth_comm_kind)k)) != 0) k++;
  luaL_argcheck(L, k < FTH_COMM_KIND_COUNT, 2, "unknown communication kind");
  if (!p->layout.placed) {
    lua_pushnil(L);
    return 1;
  }
  const fth_rank_place *pl = &p->layout.kind_place[k];
  lua_createtable(L, 0, 6);
  setint(L, "size", pl->size);
  setnum(L, "groups", pl->groups);
  setnum(L, "straddling", pl->straddling);
  setnum(L, "cross_fraction", pl->cross_fraction);
  setint(L, "pods", pl->blocks);
  lua_createtable(L, p->topo.num_phys, 0);
  for (int d = 0; d < p->topo.num_phys; d++) {
    lua_pushnumber(L, pl->level[d]);
    lua_rawseti(L, -2, d + 1);
  }
  lua_setfield(L, -2, "levels");
  return 1;
}

static int plan_tostring(lua_State *L) {
  const fth_train_plan *p = check_plan(L, 1);
  lua_pushfstring(L, "fathom.TrainPlan (%d GPUs, TP %d PP %d DP %d EP %d)", (int)p->layout.num_gpus, p->layout.tp,
                  p->layout.pp, p->layout.dp, p->layout.ep);
  return 1;
}

static const luaL_Reg plan_methods[] = {{"evaluate", plan_evaluate},
                                        {"footprint", plan_footprint},
                                        {"degrees", plan_degrees},
                                        {"group_levels", plan_group_levels},
                                        {"placement", plan_placement},
                                        {NULL, NULL}};

static const luaL_Reg plan_meta[] = {{"__tostring", plan_tostring}, {NULL, NULL}};

static const luaL_Reg train_funcs[] = {{"train_compile", core_train_compile}, {NULL, NULL}};

void lfth_open_train(lua_State *L) {
  lbind_newclass(L, TRAIN_PLAN, plan_meta, plan_methods);
  lbind_setfuncs(L, train_funcs);
}
