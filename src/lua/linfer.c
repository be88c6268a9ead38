/* linfer.c: compiled inference scenarios, `fathom.InferPlan`.
 *   core.infer_compile(node, topology, model, workload, "prefill"|"decode") -> plan
 *   plan:evaluate() -> result table (SI units)
 * The workload table is the normalised prefill/decode spec of lua/fathom/spec.lua. */
#include <string.h>

#include "fth_infer.h"
#include "lcheck.h"
#include "ldefaults.h"
#include "lfathom.h"
#include "lnames.h"

#define INFER_PLAN "fathom.InferPlan"

static void read_infer(lua_State *L, int idx, fth_infer_def *d) {
  idx = lua_absindex(L, idx);
  luaL_checktype(L, idx, LUA_TTABLE);
  const char *w = "workload";
  *d = ldefaults_infer();
  d->global_batch = lcheck_number(L, idx, w, "global_batch_size", d->global_batch);
  d->micro_batch = lcheck_number(L, idx, w, "micro_batch_size", d->micro_batch);
  d->prompt_len = lcheck_number(L, idx, w, "seq_length", d->prompt_len);
  d->context_len = lcheck_number(L, idx, w, "prefill_seq_len", d->context_len);
  d->gen_tokens = lcheck_number(L, idx, w, "num_generated_tokens", d->gen_tokens);
  d->act_bytes = lcheck_number(L, idx, w, "float_size_bytes", d->act_bytes);
  d->weight_bytes = lcheck_number(L, idx, w, "weight_float_size_bytes", d->weight_bytes);
  d->kv_bytes = lcheck_number(L, idx, w, "kv_cache_float_size_bytes", d->kv_bytes);
  d->gemm_bytes = lcheck_number(L, idx, w, "gemm_float_size_bytes", d->gemm_bytes);
  d->recipe = (fth_recipe)lnames_check(L, idx, w, "precision_recipe", LNAMES_PRECISION_RECIPE,
                                       (int)d->recipe);
  d->expert_imbalance = lcheck_number(L, idx, w, "expert_imbalance", d->expert_imbalance);
  d->flash_attention = lcheck_bool(L, idx, w, "flash_attention", d->flash_attention);
  d->comp_comm_eff = lcheck_number(L, idx, w, "comp_comm_efficiency", d->comp_comm_eff);
  d->comp_mem_eff = lcheck_number(L, idx, w, "comp_mem_efficiency", d->comp_mem_eff);
  d->comm_mem_eff = lcheck_number(L, idx, w, "comm_mem_efficiency", d->comm_mem_eff);
  d->batch_overlap = lcheck_bool(L, idx, w, "two_batch_overlap", d->batch_overlap);
  d->kernel_launch_s = lcheck_number(L, idx, w, "kernel_launch_sec", d->kernel_launch_s);
  d->kv_reread = lcheck_number(L, idx, w, "decode_kv_reread", d->kv_reread);
  d->kernel_model = lcheck_kernel_model(L, idx, d->kernel_model);
  lcheck_tier_map(L, idx, "memory_device_map_traffic", d->traffic_tier);
  lcheck_tier_map(L, idx, "memory_device_map_footprint", d->footprint_tier);
  lcheck_reserve(L, idx, &d->reserve);
  if (lua_getfield(L, idx, "collective") == LUA_TTABLE) lcheck_coll_params(L, -1, &d->coll);
  lua_pop(L, 1);
}

/* (node, topology, model, workload, pass) -> plan */
static int core_infer_compile(lua_State *L) {
  fth_node_def node;
  fth_topology_def topo;
  fth_model_def model;
  fth_infer_def def;
  lcheck_node(L, 1, &node);
  lcheck_topology(L, 2, &topo);
  lcheck_model(L, 3, &model);
  read_infer(L, 4, &def);
  static const char *const passes[] = {"prefill", "decode", NULL};
  fth_pass pass = (fth_pass)luaL_checkoption(L, 5, NULL, passes);
  fth_infer_plan *p = (fth_infer_plan *)lua_newuserdatauv(L, sizeof(fth_infer_plan), 0);
  luaL_setmetatable(L, INFER_PLAN);
  fth_error err;
  if (fth_infer_compile(p, &node, &topo, &model, &def, pass, &err) != FTH_OK)
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


/* (plan) -> result table */
static int plan_evaluate(lua_State *L) {
  const fth_infer_plan *p = (const fth_infer_plan *)luaL_checkudata(L, 1, INFER_PLAN);
  fth_infer_result r;
  fth_infer_evaluate(p, &r);
  lua_createtable(L, 0, 24);
  lua_pushstring(L, p->pass == FTH_PASS_PREFILL ? "prefill" : "decode");
  lua_setfield(L, -2, "pass");
  setnum(L, "time_s", r.time_s);
  setnum(L, "ttft_s", r.ttft_s);
  setnum(L, "tpot_s", r.tpot_s);
  setnum(L, "tpot_first_s", r.tpot_first_s);
  setnum(L, "tpot_last_s", r.tpot_last_s);
  setnum(L, "stage_s", r.stage_s);
  setnum(L, "tokens_per_s", r.tokens_per_s);
  setnum(L, "tokens_per_s_per_gpu", r.tokens_per_s_per_gpu);
  setnum(L, "weights_read_s", r.weights_read_s);
  setnum(L, "kv_read_s", r.kv_read_s);
  setnum(L, "pp_s", r.pp_s);
  setnum(L, "kv_cache_bytes_per_gpu", r.kv_cache_bytes_per_gpu);
  setnum(L, "kv_bytes_per_request_per_gpu", r.kv_bytes_per_request_per_gpu);
  setnum(L, "max_global_batch", r.max_global_batch);
  setnum(L, "microbatches", p->microbatches);
  setnum(L, "gpus", p->layout.num_gpus);
  lua_createtable(L, 0, FTH_FLOP_PART_COUNT);
  for (int i = 0; i < FTH_FLOP_PART_COUNT; i++) {
    lua_createtable(L, 0, 4);
    setnum(L, "flops", r.pass.flops[i]);
    setnum(L, "compute_s", r.pass.compute_s[i]);
    setnum(L, "bytes", r.pass.bytes[i]);
    setnum(L, "memory_s", r.pass.memory_s[i]);
    lua_setfield(L, -2, lnames_name(LNAMES_FLOP_PART, i));
  }
  setnum(L, "kernel_s", r.pass.kernel_s);
  lua_setfield(L, -2, "stage_pass");
  lua_createtable(L, 0, FTH_COMM_KIND_COUNT);
  for (int k = 0; k < FTH_COMM_KIND_COUNT; k++) {
    lua_createtable(L, 0, 2);
    setnum(L, "raw_s", r.pass.comm_s[k]);
    setnum(L, "exposed_s", r.comm_exposed_s[k]);
    lua_setfield(L, -2, fth_comm_kind_name((fth_comm_kind)k));
  }
  lua_setfield(L, -2, "comm");
  lcheck_push_footprint(L, &r.mem);
  lua_setfield(L, -2, "memory");
  return 1;
}

static int plan_tostring(lua_State *L) {
  const fth_infer_plan *p = (const fth_infer_plan *)luaL_checkudata(L, 1, INFER_PLAN);
  lua_pushfstring(L, "fathom.InferPlan (%s, %d GPUs, TP %d PP %d)",
                  p->pass == FTH_PASS_PREFILL ? "prefill" : "decode", (int)p->layout.num_gpus,
                  p->layout.tp, p->layout.pp);
  return 1;
}

/* (plan) -> degrees table, as TrainPlan:degrees(): counts are integers (local_experts,
 * E / EP, may be a fraction and stays a number) */
static int plan_degrees(lua_State *L) {
  const fth_infer_plan *p = (const fth_infer_plan *)luaL_checkudata(L, 1, INFER_PLAN);
  const fth_layout *b = &p->layout;
  lua_createtable(L, 0, 16);
  setint(L, "tp", b->tp);
  setint(L, "tp_moe", b->tp_moe);
  setint(L, "dp", b->dp);
  setint(L, "dp_moe", b->dp_moe);
  setint(L, "ep", b->ep);
  setint(L, "ep_su", b->ep_su);
  setint(L, "ep_so", b->ep_so);
  setint(L, "pp", b->pp);
  setint(L, "cp", b->cp);
  lbind_setcount(L, "gpus", b->num_gpus);
  lbind_setcount(L, "microbatches", p->microbatches);
  setint(L, "layers_per_stage", b->layers_per_stage);
  setint(L, "moe_layers_per_stage", b->moe_layers_per_stage);
  setnum(L, "local_experts", b->local_experts);
  setnum(L, "params_total", b->params.total);
  setnum(L, "params_active", b->params.active);
  return 1;
}

/* (plan) -> the KV-cache tokens one DP rank holds (fth_infer_kv_capacity_tokens: the room
 * the KV tier keeps after the weights, the transient and the reserve; 0 when none) */
static int plan_kv_capacity_tokens(lua_State *L) {
  const fth_infer_plan *p = (const fth_infer_plan *)luaL_checkudata(L, 1, INFER_PLAN);
  lua_pushnumber(L, fth_infer_kv_capacity_tokens(p));
  return 1;
}

static const luaL_Reg plan_methods[] = {{"evaluate", plan_evaluate},
                                        {"degrees", plan_degrees},
                                        {"kv_capacity_tokens", plan_kv_capacity_tokens},
                                        {NULL, NULL}};

static const luaL_Reg plan_meta[] = {{"__tostring", plan_tostring}, {NULL, NULL}};

static const luaL_Reg infer_funcs[] = {{"infer_compile", core_infer_compile}, {NULL, NULL}};

void lfth_open_infer(lua_State *L) {
  lbind_newclass(L, INFER_PLAN, plan_meta, plan_methods);
  lbind_setfuncs(L, infer_funcs);
}
