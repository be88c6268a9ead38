/* lcollective.c: collectives and model facts, fathom.core.
 *   core.collective(op, algo, bytes, levels [, params]) -> {time_s, transfer_s, latency_s,
 *                                                          wire_bytes, algorithm}
 *   core.model_info(model) -> {params_total, params_active, params_embedding, params_lm_head,
 *                              moe_layers, kv_cache_elems_per_token, fwd_flops_per_token(seq)}
 * levels: {{group_size, dim_size, type, bw_bytes_per_s, latency_s, in_network_reduction}, ...}
 * innermost first; params: {per_peer_overhead_sec, launch_sec}. */
#include "fth_collective.h"
#include "fth_goodput.h"
#include "fth_model.h"
#include "lcheck.h"
#include "lfathom.h"
#include "lnames.h"

/* (op, algo, bytes, levels [, params]) -> result table */
static int core_collective(lua_State *L) {
  fth_coll_op op = (fth_coll_op)lnames_check_value(L, 1, "collective: op", LNAMES_COLL_OP);
  fth_coll_algo algo = lua_isnoneornil(L, 2) ? FTH_ALGO_AUTO
                                             : (fth_coll_algo)lnames_check_value(
                                                   L, 2, "collective: algorithm", LNAMES_COLL_ALGO);
  double bytes = luaL_checknumber(L, 3);
  luaL_argcheck(L, bytes >= 0, 3, "bytes must be >= 0");
  fth_group_level lv[FTH_MAX_PHYS_DIMS];
  int n = lcheck_levels(L, 4, lv);
  fth_coll_params params = fth_coll_params_default();
  if (lua_istable(L, 5)) lcheck_coll_params(L, 5, &params);
  fth_coll_result r = fth_collective(op, algo, bytes, lv, n, &params);
  lua_createtable(L, 0, 5);
  lua_pushnumber(L, r.time_s);
  lua_setfield(L, -2, "time_s");
  lua_pushnumber(L, r.transfer_s);
  lua_setfield(L, -2, "transfer_s");
  lua_pushnumber(L, r.latency_s);
  lua_setfield(L, -2, "latency_s");
  lua_pushnumber(L, r.wire_bytes);
  lua_setfield(L, -2, "wire_bytes");
  lua_pushstring(L, fth_coll_algo_name(r.algo));
  lua_setfield(L, -2, "algorithm");
  return 1;
}

/* (model [, seq]) -> info table; raises "<field>: reason" on a bad model */
static int core_model_info(lua_State *L) {
  fth_model_def m;
  lcheck_model(L, 1, &m);
  double seq = luaL_optnumber(L, 2, (double)m.max_seq_len);
  fth_error err;
  if (fth_model_check(&m, &err) != FTH_OK) return lbind_raise(L, "model", &err);
  fth_param_count c = fth_model_params(&m);
  lua_createtable(L, 0, 8);
  lua_pushnumber(L, c.total);
  lua_setfield(L, -2, "params_total");
  lua_pushnumber(L, c.active);
  lua_setfield(L, -2, "params_active");
  lua_pushnumber(L, c.embedding);
  lua_setfield(L, -2, "params_embedding");
  lua_pushnumber(L, c.lm_head);
  lua_setfield(L, -2, "params_lm_head");
  lua_pushinteger(L, fth_model_num_moe_layers(&m));
  lua_setfield(L, -2, "moe_layers");
  lua_pushnumber(L, fth_model_kv_cache_elems_per_token(&m));
  lua_setfield(L, -2, "kv_cache_elems_per_token");
  lua_pushnumber(L, fth_model_fwd_flops_per_token(&m, seq));
  lua_setfield(L, -2, "fwd_flops_per_token");
  return 1;
}

/* (def, gpus, useful_s) -> {system_mtbf_s, checkpoint_write_s, interval_s, expected_time_s,
 * goodput, failures, energy_j, cost}; def in SI: gpu_mtbf_s, checkpoint_bytes, checkpoint_bw,
 * restart_s, interval_s, gpu_power_w, pue, price_per_gpu_hour. */
static int core_goodput(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  fth_goodput_def d = fth_goodput_def_default();
  d.gpu_mtbf_s = lcheck_number(L, 1, "reliability", "gpu_mtbf_s", d.gpu_mtbf_s);
  d.checkpoint_bytes = lcheck_number(L, 1, "reliability", "checkpoint_bytes", 0);
  d.checkpoint_bw = lcheck_number(L, 1, "reliability", "checkpoint_bw", 0);
  d.restart_s = lcheck_number(L, 1, "reliability", "restart_s", 0);
  d.interval_s = lcheck_number(L, 1, "reliability", "interval_s", 0);
  d.gpu_power_w = lcheck_number(L, 1, "reliability", "gpu_power_w", 0);
  d.pue = lcheck_number(L, 1, "reliability", "pue", 1);
  d.price_per_gpu_hour = lcheck_number(L, 1, "reliability", "price_per_gpu_hour", 0);
  double gpus = luaL_checknumber(L, 2), useful = luaL_checknumber(L, 3);
  luaL_argcheck(L, gpus >= 1, 2, "gpus must be >= 1");
  luaL_argcheck(L, useful >= 0, 3, "useful time must be >= 0");
  fth_error err;
  if (fth_goodput_check(&d, &err) != FTH_OK) return lbind_raise(L, NULL, &err);
  fth_goodput_result r = fth_goodput(&d, gpus, useful);
  lua_createtable(L, 0, 8);
  const char *names[8] = {"system_mtbf_s", "checkpoint_write_s", "interval_s", "expected_time_s",
                          "goodput",       "failures",           "energy_j",   "cost"};
  double vals[8] = {r.system_mtbf_s, r.checkpoint_write_s, r.interval_s, r.expected_time_s,
                    r.goodput,       r.failures,           r.energy_j,   r.cost};
  for (int i = 0; i < 8; i++) {
    lua_pushnumber(L, vals[i]);
    lua_setfield(L, -2, names[i]);
  }
  return 1;
}

static const luaL_Reg collective_funcs[] = {{"goodput", core_goodput},
                                            {"collective", core_collective},
                                            {"model_info", core_model_info},
                                            {NULL, NULL}};

void lfth_open_collective(lua_State *L) {
  lbind_setfuncs(L, collective_funcs);
}
