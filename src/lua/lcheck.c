/* lcheck.c: table readers shared by the binding files. */
#include "lcheck.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ldefaults.h"
#include "lfathom.h"
#include "lnames.h"

/* "<what>.<key>" into buf: the field path of an error value (lbind_fail). */
static const char *join(char *buf, size_t size, const char *what, const char *key) {
  snprintf(buf, size, "%s.%s", what, key);
  return buf;
}
#define PATH(what, key) join(path, sizeof path, what, key)

static int field(lua_State *L, int t, const char *key) {
  return lua_getfield(L, t, key);
}

/* A number for a message: integral values without ".0", others as %.14g. */
static const char *numstr(lua_State *L, double v) {
  if (v == floor(v) && fabs(v) < 9007199254740992.0)
    return lua_pushfstring(L, "%I", (LUAI_UACINT)(lua_Integer)v);
  return lua_pushfstring(L, "%f", (lua_Number)v);
}

/* lua_pushfstring knows %f (LUAI_NUMFFORMAT, "%.14g"), not %g: every number in a
 * message goes through %f as a lua_Number. */
double lcheck_number(lua_State *L, int t, const char *what, const char *key, double def) {
  char path[128];
  t = lua_absindex(L, t);
  int ty = field(L, t, key);
  double v = def;
  if (ty == LUA_TNUMBER) {
    v = lua_tonumber(L, -1);
    if (!isfinite(v))
      lbind_fail(L, FTH_EINVAL, PATH(what, key), "expected a finite number, got %s", numstr(L, v));
    if (fabs(v) > LCHECK_MAX_MAGNITUDE || (v != 0 && fabs(v) < LCHECK_MIN_MAGNITUDE))
      lbind_fail(L, FTH_EINVAL, PATH(what, key), "expected 0 or a magnitude in [%g, %g], got %s",
                 (lua_Number)LCHECK_MIN_MAGNITUDE, (lua_Number)LCHECK_MAX_MAGNITUDE, numstr(L, v));
  } else if (ty != LUA_TNIL) {
    lbind_fail(L, FTH_EINVAL, PATH(what, key), "expected a number, got %s", luaL_typename(L, -1));
  }
  lua_pop(L, 1);
  return v;
}

double lcheck_number_or_inf(lua_State *L, int t, const char *what, const char *key, double def) {
  t = lua_absindex(L, t);
  int ty = field(L, t, key);
  int inf = ty == LUA_TNUMBER && lua_tonumber(L, -1) == HUGE_VAL;
  lua_pop(L, 1);
  return inf ? HUGE_VAL : lcheck_number(L, t, what, key, def);
}

int lcheck_int_range(lua_State *L, int t, const char *what, const char *key, int def, int lo,
                     int hi) {
  char path[128];
  t = lua_absindex(L, t);
  int ty = field(L, t, key);
  double v = def;
  if (ty == LUA_TNUMBER) {
    v = lua_tonumber(L, -1);
    if (!(v == floor(v)))
      lbind_fail(L, FTH_EINVAL, PATH(what, key), "expected an integer, got %s", numstr(L, v));
  } else if (ty != LUA_TNIL) {
    lbind_fail(L, FTH_EINVAL, PATH(what, key), "expected an integer, got %s", luaL_typename(L, -1));
  }
  lua_pop(L, 1);
  if (ty == LUA_TNUMBER && (v < lo || v > hi))
    lbind_fail(L, FTH_EINVAL, PATH(what, key), "expected an integer in [%d, %d], got %s", lo, hi,
               numstr(L, v));
  return (int)v;
}

int lcheck_int(lua_State *L, int t, const char *what, const char *key, int def) {
  return lcheck_int_range(L, t, what, key, def, INT_MIN, INT_MAX);
}

int lcheck_bool(lua_State *L, int t, const char *what, const char *key, int def) {
  t = lua_absindex(L, t);
  int ty = field(L, t, key);
  int v = def;
  if (ty == LUA_TBOOLEAN)
    v = lua_toboolean(L, -1);
  else if (ty == LUA_TNUMBER)
    v = lua_tonumber(L, -1) != 0;
  else if (ty != LUA_TNIL) {
    char path[128];
    lbind_fail(L, FTH_EINVAL, PATH(what, key), "expected a boolean, got %s", luaL_typename(L, -1));
  }
  lua_pop(L, 1);
  return v;
}

const char *lcheck_string(lua_State *L, int t, const char *what, const char *key, const char *def) {
  t = lua_absindex(L, t);
  int ty = field(L, t, key);
  const char *v = def;
  if (ty == LUA_TSTRING)
    v = lua_tostring(L, -1); /* anchored in the table, which outlives the call */
  else if (ty != LUA_TNIL) {
    char path[128];
    lbind_fail(L, FTH_EINVAL, PATH(what, key), "expected a string, got %s", luaL_typename(L, -1));
  }
  lua_pop(L, 1);
  return v;
}

static int subtable(lua_State *L, int t, const char *what, const char *key) {
  int ty = lua_getfield(L, t, key);
  if (ty == LUA_TNIL) {
    lua_pop(L, 1);
    return 0;
  }
  if (ty != LUA_TTABLE) {
    char path[128];
    lbind_fail(L, FTH_EINVAL, PATH(what, key), "expected a table, got %s", luaL_typename(L, -1));
  }
  return 1;
}

static void read_memory(lua_State *L, int t, const char *what, fth_memory_def *m) {
  *m = fth_memory_def_default();
  m->bw_per_stack_bytes_per_s =
      lcheck_number(L, t, what, "bandwidth_per_stack_nominal", m->bw_per_stack_bytes_per_s);
  m->size_per_stack_bytes = lcheck_number(L, t, what, "size_per_stack", m->size_per_stack_bytes);
  m->num_stacks = lcheck_int_range(L, t, what, "num_stack", m->num_stacks, 1, 1 << 20);
  m->efficiency = lcheck_number(L, t, what, "efficiency", m->efficiency);
}

void lcheck_node(lua_State *L, int idx, fth_node_def *out) {
  idx = lua_absindex(L, idx);
  luaL_checktype(L, idx, LUA_TTABLE);
  *out = fth_node_def_default();
  out->host_op_factor = lcheck_number(L, idx, "hardware", "host_op_time_factor", 1.0);
  if (subtable(L, idx, "hardware", "device_compute")) {
    int c = lua_gettop(L);
    fth_compute_def *cd = &out->compute;
    const char *dc = "hardware.device_compute";
    cd->flops_per_s[FTH_PREC_FP8] = lcheck_number(L, c, dc, "fp8_nominal", 0);
    cd->flops_per_s[FTH_PREC_BF16] = lcheck_number(L, c, dc, "bf16_nominal", 0);
    cd->flops_per_s[FTH_PREC_FP32] = lcheck_number(L, c, dc, "fp32_nominal", 0);
    cd->flops_per_s[FTH_PREC_FP4] = lcheck_number(L, c, dc, "fp4_nominal", 0);
    cd->prec_efficiency[FTH_PREC_FP8] = lcheck_number(L, c, dc, "fp8_efficiency", 0);
    cd->prec_efficiency[FTH_PREC_FP4] = lcheck_number(L, c, dc, "fp4_efficiency", 0);
    cd->efficiency = lcheck_number(L, c, dc, "efficiency", cd->efficiency);
    cd->vector_flops_per_s = lcheck_number(L, c, dc, "vector_nominal", 0);
    cd->attention_efficiency = lcheck_number(L, c, dc, "attention_efficiency", 0);
    cd->compute_units = lcheck_int_range(L, c, dc, "compute_units", 0, 0, 1 << 20);
    cd->gemm_tile_m = lcheck_number(L, c, dc, "gemm_tile_m", 0);
    cd->gemm_tile_n = lcheck_number(L, c, dc, "gemm_tile_n", 0);
    cd->gemm_k_overhead_bytes =
        lcheck_number(L, c, dc, "gemm_k_overhead_bytes", cd->gemm_k_overhead_bytes);
    cd->expert_gemm_s = lcheck_number(L, c, dc, "expert_gemm_overhead_sec", 0);
    cd->expert_recipe_s = lcheck_number(L, c, dc, "expert_recipe_overhead_sec", 0);
    cd->expert_lowp_fraction = lcheck_number(L, c, dc, "expert_gemm_fp8_fraction", 0);
    cd->power_watts = lcheck_number(L, c, dc, "power_watts", 0);
    cd->power_limit_watts = lcheck_number(L, c, dc, "power_limit_watts", 0);
    cd->dense_clock_fraction = lcheck_number(L, c, dc, "dense_clock_fraction", 1.0);
    cd->fp8_any_layout = lcheck_bool(L, c, dc, "fp8_any_layout", 0);
    lua_pop(L, 1);
  }
  if (subtable(L, idx, "hardware", "device_memory_tiers")) {
    int tiers = lua_gettop(L);
    for (int i = 0; i < FTH_TIER_COUNT; i++) {
      const char *name = fth_tier_name((fth_tier)i);
      if (subtable(L, tiers, "device_memory_tiers", name)) {
        int t = lua_gettop(L);
        const char *wt = lua_pushfstring(L, "hardware.device_memory_tiers.%s", name);
        read_memory(L, t, wt, &out->tier[i]);
        out->has_tier[i] = 1;
        lua_pop(L, 2);
      }
    }
    lua_pop(L, 1);
  }
}

void lcheck_link(lua_State *L, int idx, const char *what, fth_link_def *out) {
  idx = lua_absindex(L, idx);
  *out = fth_link_def_default();
  out->bw_bytes_per_s = lcheck_number(L, idx, what, "bandwidth_nominal", out->bw_bytes_per_s);
  out->num_links = lcheck_int_range(L, idx, what, "num_links", out->num_links, 1, 1 << 20);
  out->efficiency = lcheck_number(L, idx, what, "efficiency", out->efficiency);
  out->latency_s = lcheck_number(L, idx, what, "latency_sec", out->latency_s);
  out->in_network_reduction = lcheck_bool(L, idx, what, "in_network_reduction", 0);
  out->oversubscription = lcheck_number(L, idx, what, "oversubscription", out->oversubscription);
  out->leaf_xpus = lcheck_int_range(L, idx, what, "leaf_size_xpus", 0, 0, LCHECK_MAX_XPUS);
  out->pcie_peer = strcmp(lcheck_string(L, idx, what, "type", "generic"), "pcie") == 0;
}

void lcheck_topology(lua_State *L, int idx, fth_topology_def *out) {
  idx = lua_absindex(L, idx);
  luaL_checktype(L, idx, LUA_TTABLE);
  *out = fth_topology_def_default();
  out->expert_hb_group_xpus =
      lcheck_int(L, idx, "topology", "expert_high_bandwidth_group_size_xpus", 0);
  out->dp_bandwidth_apart =
      lcheck_bool(L, idx, "topology", "dp_bandwidth_apart", out->dp_bandwidth_apart);
  out->share_by_traffic =
      lcheck_bool(L, idx, "topology", "bandwidth_by_traffic", out->share_by_traffic);
  out->placed = lcheck_bool(L, idx, "topology", "placed", 0);
  out->num_xpus = lcheck_int_range(L, idx, "topology", "num_xpus", 0, 0, LCHECK_MAX_XPUS);
  if (subtable(L, idx, "topology", "dimensions")) {
    int dims = lua_gettop(L);
    int n = (int)lua_rawlen(L, dims);
    if (n > FTH_MAX_PHYS_DIMS)
      lbind_fail(L, FTH_EINVAL, "topology.dimensions",
                 "expected at most %d physical dimensions, got %d; drop dimensions of size 1",
                 FTH_MAX_PHYS_DIMS, n);
    out->num_phys = n;
    double xpus = 1;
    for (int i = 0; i < n; i++) {
      lua_rawgeti(L, dims, i + 1);
      int d = lua_gettop(L);
      fth_phys_dim_def *pd = &out->phys[i];
      const char *wd = lua_pushfstring(L, "topology.dimensions[%d]", i + 1);
      pd->type = (fth_topo_type)lnames_check(L, d, wd, "topology_type", LNAMES_TOPOLOGY_TYPE,
                                             FTH_TOPO_SWITCHED);
      pd->size = lcheck_int_range(L, d, wd, "size", 0, 0, LCHECK_MAX_XPUS);
      xpus *= pd->size > 0 ? pd->size : 1;
      if (xpus > LCHECK_MAX_XPUS) {
        char path[128];
        lbind_fail(L, FTH_EINVAL, PATH(wd, "size"), "the topology has more than %d XPUs",
                   LCHECK_MAX_XPUS);
      }
      if (subtable(L, d, wd, "interconnect")) {
        int li = lua_gettop(L);
        lcheck_link(L, li, lua_pushfstring(L, "%s.interconnect", wd), &pd->link);
        lua_pop(L, 2);
      }
      lua_pop(L, 2);
    }
    lua_pop(L, 1);
  }
  if (subtable(L, idx, "topology", "logical")) {
    int dims = lua_gettop(L);
    int n = (int)lua_rawlen(L, dims);
    if (n > FTH_MAX_LOGICAL_DIMS)
      lbind_fail(L, FTH_EINVAL, "logical.dimensions",
                 "expected at most %d logical dimensions, got %d; drop logical dimensions of size 1",
                 FTH_MAX_LOGICAL_DIMS, n);
    out->num_logical = n;
    double per_tag[FTH_TAG_COUNT];
    for (int k = 0; k < FTH_TAG_COUNT; k++) per_tag[k] = 1;
    for (int i = 0; i < n; i++) {
      lua_rawgeti(L, dims, i + 1);
      int d = lua_gettop(L);
      fth_logical_dim_def *ld = &out->logical[i];
      const char *wd = lua_pushfstring(L, "topology.logical.dimensions[%d]", i + 1);
      ld->tag = (fth_logical_tag)lnames_check(L, d, wd, "logical_tag", LNAMES_LOGICAL_TAG,
                                              FTH_TAG_COUNT);
      if (ld->tag == FTH_TAG_COUNT) {
        char path[128];
        lbind_fail(L, FTH_EINVAL, PATH(wd, "logical_tag"), "expected a logical tag");
      }
      ld->phys_dim = lcheck_int_range(L, d, wd, "phys_dim", 1, 1, FTH_MAX_PHYS_DIMS) - 1;
      ld->size = lcheck_int_range(L, d, wd, "size", 0, 0, LCHECK_MAX_XPUS);
      per_tag[ld->tag] *= ld->size > 0 ? ld->size : 1;
      if (per_tag[ld->tag] > LCHECK_MAX_XPUS) {
        char path[128];
        lbind_fail(L, FTH_EINVAL, PATH(wd, "size"), "%s over more than %d XPUs",
                   fth_logical_tag_name(ld->tag), LCHECK_MAX_XPUS);
      }
      lua_pop(L, 2);
    }
    lua_pop(L, 1);
  }
}

void lcheck_model(lua_State *L, int idx, fth_model_def *out) {
  idx = lua_absindex(L, idx);
  luaL_checktype(L, idx, LUA_TTABLE);
  const char *w = "model";
  *out = fth_model_def_default();
  out->d_model = lcheck_int_range(L, idx, w, "d_model", out->d_model, 1, LCHECK_MAX_WIDTH);
  out->n_layers = lcheck_int_range(L, idx, w, "n_layers", out->n_layers, 1, LCHECK_MAX_LAYERS);
  out->num_heads = lcheck_int_range(L, idx, w, "num_heads", out->num_heads, 1, LCHECK_MAX_HEADS);
  out->num_kv_heads =
      lcheck_int_range(L, idx, w, "num_kv_heads", out->num_kv_heads, 0, LCHECK_MAX_HEADS);
  out->head_dim = lcheck_int_range(L, idx, w, "head_dim", out->head_dim, 0, LCHECK_MAX_HEADS);
  out->ffn_hidden = lcheck_number(L, idx, w, "ffn_hidden_size", out->ffn_hidden);
  out->mlp_ratio = lcheck_number(L, idx, w, "mlp_ratio", out->mlp_ratio);
  out->gated_mlp = lcheck_bool(L, idx, w, "gated_mlp", out->gated_mlp);
  out->squared_relu = lcheck_bool(L, idx, w, "squared_relu", out->squared_relu);
  out->vocab_size = lcheck_int_range(L, idx, w, "vocab_size", out->vocab_size, 1, LCHECK_MAX_TOKENS);
  out->max_seq_len =
      lcheck_int_range(L, idx, w, "max_sequence_length", out->max_seq_len, 1, LCHECK_MAX_TOKENS);
  out->learned_pos_emb = lcheck_bool(L, idx, w, "learned_pos_emb", out->learned_pos_emb);
  out->tied_embeddings = lcheck_bool(L, idx, w, "tied_embeddings", out->tied_embeddings);
  out->num_experts =
      lcheck_int_range(L, idx, w, "num_regular_experts", out->num_experts, 0, LCHECK_MAX_HEADS);
  out->top_k = lcheck_int_range(L, idx, w, "num_selected_experts", out->top_k, 0, LCHECK_MAX_HEADS);
  out->num_shared_experts =
      lcheck_int_range(L, idx, w, "num_shared_experts", out->num_shared_experts, 0, LCHECK_MAX_HEADS);
  out->expert_ffn_hidden =
      lcheck_number(L, idx, w, "expert_ffn_hidden_size", out->expert_ffn_hidden);
  out->first_dense_layers =
      lcheck_int_range(L, idx, w, "first_dense_layers", out->first_dense_layers, 0, LCHECK_MAX_LAYERS);
  out->moe_layer_interval =
      lcheck_int_range(L, idx, w, "moe_layer_interval", out->moe_layer_interval, 0, LCHECK_MAX_LAYERS);
  out->attention_window = lcheck_number(L, idx, w, "attention_window", out->attention_window);
  out->attention_sinks = lcheck_bool(L, idx, w, "attention_sinks", out->attention_sinks);
  out->full_attention_interval = lcheck_int_range(L, idx, w, "full_attention_interval",
                                                  out->full_attention_interval, 0, LCHECK_MAX_LAYERS);
  out->n_group = lcheck_int_range(L, idx, w, "n_group", out->n_group, 0, LCHECK_MAX_HEADS);
  out->topk_group = lcheck_int_range(L, idx, w, "topk_group", out->topk_group, 0, LCHECK_MAX_HEADS);
  out->mtp_layers =
      lcheck_int_range(L, idx, w, "num_nextn_predict_layers", out->mtp_layers, 0, FTH_MAX_MTP_LAYERS);
  out->q_lora_rank = lcheck_int_range(L, idx, w, "q_lora_rank", out->q_lora_rank, 0, LCHECK_MAX_WIDTH);
  out->kv_lora_rank =
      lcheck_int_range(L, idx, w, "kv_lora_rank", out->kv_lora_rank, 0, LCHECK_MAX_WIDTH);
  out->qk_nope_head_dim =
      lcheck_int_range(L, idx, w, "qk_nope_head_dim", out->qk_nope_head_dim, 0, LCHECK_MAX_HEADS);
  out->qk_rope_head_dim =
      lcheck_int_range(L, idx, w, "qk_rope_head_dim", out->qk_rope_head_dim, 0, LCHECK_MAX_HEADS);
  out->v_head_dim = lcheck_int_range(L, idx, w, "v_head_dim", out->v_head_dim, 0, LCHECK_MAX_HEADS);
  /* Hybrid Mamba2-Transformer: n_layers counts the sub-layers (HF num_hidden_layers, the
   * pattern's length); the core's blocks are two sub-layers each (fth_model_def). */
  out->hybrid_mamba = lcheck_int_range(L, idx, w, "mamba_layers", 0, 0, LCHECK_MAX_LAYERS);
  out->hybrid_attention = lcheck_int_range(L, idx, w, "attention_layers", 0, 0, LCHECK_MAX_LAYERS);
  out->hybrid_mlp = lcheck_int_range(L, idx, w, "mlp_layers", 0, 0, LCHECK_MAX_LAYERS);
  out->hybrid_moe = lcheck_int_range(L, idx, w, "moe_layers", 0, 0, LCHECK_MAX_LAYERS);
  int sub = out->hybrid_mamba + out->hybrid_attention + out->hybrid_mlp + out->hybrid_moe;
  if (sub > 0) {
    char path[128];
    if (out->n_layers != sub)
      lbind_fail(L, FTH_EINVAL, PATH(w, "n_layers"),
                 "expected the hybrid's %d sub-layers (mamba + attention + mlp + moe), got %d", sub,
                 out->n_layers);
    out->n_layers = (sub + 1) / 2;
  }
  out->mamba_state_dim =
      lcheck_int_range(L, idx, w, "mamba_state_dim", out->mamba_state_dim, 1, LCHECK_MAX_HEADS);
  out->mamba_head_dim =
      lcheck_int_range(L, idx, w, "mamba_head_dim", out->mamba_head_dim, 1, LCHECK_MAX_HEADS);
  out->mamba_num_heads =
      lcheck_int_range(L, idx, w, "mamba_num_heads", out->mamba_num_heads, 0, LCHECK_MAX_HEADS);
  out->mamba_num_groups =
      lcheck_int_range(L, idx, w, "mamba_num_groups", out->mamba_num_groups, 1, LCHECK_MAX_HEADS);
  out->mamba_conv_kernel =
      lcheck_int_range(L, idx, w, "mamba_conv_kernel", out->mamba_conv_kernel, 1, 1024);
  out->mamba_chunk =
      lcheck_int_range(L, idx, w, "mamba_chunk_size", out->mamba_chunk, 1, LCHECK_MAX_TOKENS);
}

void lcheck_coll_params(lua_State *L, int idx, fth_coll_params *out) {
  idx = lua_absindex(L, idx);
  *out = fth_coll_params_default();
  out->per_peer_overhead_s =
      lcheck_number(L, idx, "collective", "per_peer_overhead_sec", out->per_peer_overhead_s);
  out->launch_s = lcheck_number(L, idx, "collective", "launch_sec", out->launch_s);
  out->engine_allreduce_s = lcheck_number(L, idx, "collective", "engine_allreduce_latency_sec",
                                          out->engine_allreduce_s);
  out->engine_allreduce_max_bytes = lcheck_number(L, idx, "collective", "engine_allreduce_max_bytes",
                                                  out->engine_allreduce_max_bytes);
}

void lcheck_tier_map(lua_State *L, int t, const char *key, fth_tier *map) {
  if (!subtable(L, t, "workload", key)) return;
  int m = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, m)) {
    char path[96];
    snprintf(path, sizeof path, "workload.%s", key);
    fth_mem_component c =
        (fth_mem_component)lnames_check_value(L, -2, path, LNAMES_MEM_COMPONENT);
    snprintf(path, sizeof path, "workload.%s.%s", key, lnames_name(LNAMES_MEM_COMPONENT, (int)c));
    map[c] = (fth_tier)lnames_check_value(L, -1, path, LNAMES_MEMORY_TIER);
    if (c == FTH_MEM_ACTIVATIONS && strcmp(key, "memory_device_map_traffic") == 0) {
      map[FTH_MEM_TRANSIENT_FWD] = map[c];
      map[FTH_MEM_TRANSIENT_BWD] = map[c];
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

void lcheck_reserve(lua_State *L, int t, fth_mem_reserve *out) {
  const char *w = "workload";
  out->context_bytes = lcheck_number(L, t, w, "memory_reserve_bytes", out->context_bytes);
  out->fragmentation =
      lcheck_number(L, t, w, "memory_fragmentation_fraction", out->fragmentation);
  if (!(isfinite(out->context_bytes) && out->context_bytes >= 0))
    lbind_fail(L, FTH_EINVAL, "workload.memory_reserve_bytes", "expected bytes >= 0, got %g",
               out->context_bytes);
  if (!(out->fragmentation >= 0 && out->fragmentation < 1))
    lbind_fail(L, FTH_EINVAL, "workload.memory_fragmentation_fraction",
               "expected a value in [0, 1), got %g", out->fragmentation);
}

fth_kernel_model lcheck_kernel_model(lua_State *L, int idx, fth_kernel_model def) {
  return (fth_kernel_model)lnames_check(L, idx, "workload", "kernel_model", LNAMES_KERNEL_MODEL,
                                        (int)def);
}


/* t[key], a list of names of a bit enum (index i names bit 1 << i), as the OR of its bits;
 * 0 when absent. A name outside the enum raises, naming "<what>.<key>[i]". */
static unsigned name_bits(lua_State *L, int t, const char *what, const char *key, lnames_enum e) {
  unsigned bits = 0u;
  if (lua_getfield(L, t, key) == LUA_TTABLE) {
    int n = (int)lua_rawlen(L, -1);
    for (int i = 1; i <= n; i++) {
      lua_rawgeti(L, -1, i);
      char path[96];
      snprintf(path, sizeof path, "%s.%s[%d]", what, key, i);
      bits |= 1u << lnames_check_value(L, -1, path, e);
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
  return bits;
}

void lcheck_train(lua_State *L, int idx, fth_train_def *out) {
  idx = lua_absindex(L, idx);
  luaL_checktype(L, idx, LUA_TTABLE);
  const char *w = "workload";
  *out = ldefaults_train();
  out->global_batch = lcheck_number(L, idx, w, "global_batch_size", out->global_batch);
  out->micro_batch = lcheck_number(L, idx, w, "micro_batch_size", out->micro_batch);
  out->seq_len = lcheck_number(L, idx, w, "seq_length", out->seq_len);
  out->total_train_tokens =
      lcheck_number(L, idx, w, "total_train_tokens", out->total_train_tokens);
  out->act_bytes = lcheck_number(L, idx, w, "float_size_bytes", out->act_bytes);
  out->master_bytes =
      lcheck_number(L, idx, w, "full_precision_param_float_size", out->master_bytes);
  out->grad_bytes = lcheck_number(L, idx, w, "gradient_float_size", out->grad_bytes);
  out->dp = (fth_dp_variant)lnames_check(L, idx, w, "dp_variant", LNAMES_DP_VARIANT, out->dp);
  out->pp = (fth_pp_schedule)lnames_check(L, idx, w, "pp_variant", LNAMES_PP_SCHEDULE, out->pp);
  out->zero3_microbatches_per_gather =
      lcheck_int_range(L, idx, "workload.dp_spec", "zero3_microbatches_per_gather",
                       out->zero3_microbatches_per_gather, 1, LCHECK_MAX_MICROBATCHES_PER_GATHER);
  out->virtual_stages = lcheck_int_range(L, idx, "workload.pp_spec", "virtual_stages",
                                         out->virtual_stages, 1, LCHECK_MAX_VIRTUAL_STAGES);
  out->pp_first_layers =
      lcheck_int_range(L, idx, "workload.pp_spec", "num_layers_in_first_pipeline_stage",
                       out->pp_first_layers, 0, LCHECK_MAX_LAYERS);
  out->pp_last_layers =
      lcheck_int_range(L, idx, "workload.pp_spec", "num_layers_in_last_pipeline_stage",
                       out->pp_last_layers, 0, LCHECK_MAX_LAYERS);
  out->pp_microbatches_per_run =
      lcheck_int_range(L, idx, "workload.pp_spec", "microbatches_per_run",
                       out->pp_microbatches_per_run, 0, LCHECK_MAX_MICROBATCHES_PER_GATHER);
  out->recompute =
      (fth_recompute)lnames_check(L, idx, w, "recompute", LNAMES_RECOMPUTE, out->recompute);
  out->recompute_modules |= name_bits(L, idx, w, "recompute_modules", LNAMES_RECOMPUTE_MODULE);
  out->op_keep |= name_bits(L, idx, w, "recompute_saved", LNAMES_OP_KEEP);
  out->sequence_parallel = lcheck_bool(L, idx, w, "sequence_parallel", out->sequence_parallel);
  out->tp_comm_overlap = lcheck_bool(L, idx, w, "tp_comm_overlap", out->tp_comm_overlap);
  out->tp_overlap_backward_rs =
      lcheck_bool(L, idx, w, "tp_overlap_backward_rs", out->tp_overlap_backward_rs);
  out->tp_gather_quantized =
      lcheck_bool(L, idx, w, "tp_gather_quantized", out->tp_gather_quantized);
  out->fp8_param_gather = lcheck_bool(L, idx, w, "fp8_param_gather", out->fp8_param_gather);
  out->ep_comm_overlap = lcheck_bool(L, idx, w, "ep_comm_overlap", out->ep_comm_overlap);
  out->ep_overlap_pairs = lcheck_bool(L, idx, w, "ep_overlap_pairs", out->ep_overlap_pairs);
  out->ep_dispatch_per_node =
      lcheck_bool(L, idx, w, "ep_dispatch_per_node", out->ep_dispatch_per_node);
  out->grouped_expert_kernel =
      lcheck_bool(L, idx, w, "grouped_expert_kernel", out->grouped_expert_kernel);
  out->flash_attention = lcheck_bool(L, idx, w, "flash_attention", out->flash_attention);
  out->cp_comm = (fth_cp_comm)lnames_check(L, idx, w, "cp_comm", LNAMES_CP_COMM, out->cp_comm);
  out->eager_elementwise = lcheck_bool(L, idx, w, "eager_elementwise", out->eager_elementwise);
  out->expert_imbalance = lcheck_number(L, idx, w, "expert_imbalance", out->expert_imbalance);
  out->comp_comm_eff = lcheck_number(L, idx, w, "comp_comm_efficiency", out->comp_comm_eff);
  out->comp_mem_eff = lcheck_number(L, idx, w, "comp_mem_efficiency", out->comp_mem_eff);
  out->comm_mem_eff = lcheck_number(L, idx, w, "comm_mem_efficiency", out->comm_mem_eff);
  out->kernel_launch_s = lcheck_number(L, idx, w, "kernel_launch_sec", out->kernel_launch_s);
  out->host_op_s = lcheck_number(L, idx, w, "host_op_sec", out->host_op_s);
  out->cuda_graph_scope |= name_bits(L, idx, w, "cuda_graph_scope", LNAMES_GRAPH_SCOPE);
  out->lora_rank = lcheck_number(L, idx, w, "lora_rank", out->lora_rank);
  out->lora_targets =
      (fth_lora_targets)lnames_check(L, idx, w, "lora_targets", LNAMES_LORA_TARGETS, out->lora_targets);
  out->attention_fp8 = lcheck_bool(L, idx, w, "attention_fp8", out->attention_fp8);
  out->activation_input_fp8 =
      lcheck_bool(L, idx, w, "activation_input_fp8", out->activation_input_fp8);
  out->bf16_layers_start = lcheck_int_range(L, idx, w, "num_layers_at_start_in_bf16",
                                            out->bf16_layers_start, 0, LCHECK_MAX_LAYERS);
  out->bf16_layers_end = lcheck_int_range(L, idx, w, "num_layers_at_end_in_bf16",
                                          out->bf16_layers_end, 0, LCHECK_MAX_LAYERS);
  out->recompute_num_layers = lcheck_int_range(L, idx, w, "recompute_num_layers",
                                               out->recompute_num_layers, 0, LCHECK_MAX_LAYERS);
  out->activation_offload_layers = lcheck_int_range(
      L, idx, w, "activation_offload_layers", out->activation_offload_layers, 0, LCHECK_MAX_LAYERS);
  out->kernel_model = lcheck_kernel_model(L, idx, out->kernel_model);
  out->recipe =
      (fth_recipe)lnames_check(L, idx, w, "precision_recipe", LNAMES_PRECISION_RECIPE, out->recipe);
  out->cast_kernels = (fth_cast_kernels)lnames_check(L, idx, w, "cast_kernels", LNAMES_CAST_KERNELS,
                                                     out->cast_kernels);
  out->ep_dispatch_override_s =
      lcheck_number(L, idx, w, "ep_dispatch_sec", out->ep_dispatch_override_s);
  out->ep_combine_override_s = lcheck_number(L, idx, w, "ep_combine_sec", out->ep_combine_override_s);
  out->moe_redundant_experts =
      lcheck_number(L, idx, w, "moe_redundant_experts", out->moe_redundant_experts);
  out->moe_dispatch_bytes =
      lcheck_number(L, idx, w, "moe_dispatch_float_size_bytes", out->moe_dispatch_bytes);
  out->moe_comm_compute_share =
      lcheck_number(L, idx, w, "moe_comm_compute_fraction", out->moe_comm_compute_share);
  out->ep_comm_units = lcheck_number(L, idx, w, "ep_comm_compute_units", out->ep_comm_units);
  out->attention_sink_rate_share =
      lcheck_number(L, idx, w, "attention_sink_rate_share", out->attention_sink_rate_share);
  out->dp_comm_compute_share =
      lcheck_number(L, idx, w, "dp_comm_compute_fraction", out->dp_comm_compute_share);
  out->ep_a2a_scale_out_eff =
      lcheck_number(L, idx, w, "ep_a2a_scale_out_efficiency", out->ep_a2a_scale_out_eff);
  lcheck_tier_map(L, idx, "memory_device_map_traffic", out->traffic_tier);
  lcheck_tier_map(L, idx, "memory_device_map_footprint", out->footprint_tier);
  lcheck_reserve(L, idx, &out->reserve);
  if (subtable(L, idx, w, "collective")) {
    lcheck_coll_params(L, -1, &out->coll);
    lua_pop(L, 1);
  }
}

int lcheck_levels(lua_State *L, int idx, fth_group_level *out) {
  idx = lua_absindex(L, idx);
  luaL_checktype(L, idx, LUA_TTABLE);
  int n = (int)lua_rawlen(L, idx);
  if (n > FTH_MAX_PHYS_DIMS) lbind_fail(L, FTH_EINVAL, "levels", "at most %d", FTH_MAX_PHYS_DIMS);
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, idx, i + 1);
    int t = lua_gettop(L);
    luaL_checktype(L, t, LUA_TTABLE);
    fth_group_level *g = &out[i];
    g->group_size = lcheck_int(L, t, "level", "group_size", 1);
    g->dim_size = lcheck_int(L, t, "level", "dim_size", g->group_size);
    g->type =
        (fth_topo_type)lnames_check(L, t, "level", "type", LNAMES_TOPOLOGY_TYPE, FTH_TOPO_SWITCHED);
    g->bw_bytes_per_s = lcheck_number(L, t, "level", "bw_bytes_per_s", 0);
    g->latency_s = lcheck_number(L, t, "level", "latency_s", 0);
    g->in_network_reduction = lcheck_bool(L, t, "level", "in_network_reduction", 0);
    g->span = 0.0;
    if (g->group_size < 1 || g->dim_size < g->group_size || !(g->bw_bytes_per_s > 0) ||
        !(g->latency_s >= 0))
    {
      char path[32];
      snprintf(path, sizeof path, "levels[%d]", i + 1);
      lbind_fail(L, FTH_EINVAL, path,
                 "need group_size >= 1, dim_size >= group_size, bw > 0, latency >= 0");
    }
    lua_pop(L, 1);
  }
  return n;
}

static void setnum(lua_State *L, const char *k, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, k);
}

void lcheck_push_footprint(lua_State *L, const fth_memory_footprint *m) {
  lua_createtable(L, 0, 5);
  lua_createtable(L, 0, FTH_MEM_COMPONENT_COUNT);
  for (int c = 0; c < FTH_MEM_COMPONENT_COUNT; c++)
    setnum(L, fth_mem_component_name((fth_mem_component)c), m->bytes[c]);
  lua_setfield(L, -2, "components");
  lua_createtable(L, 0, FTH_TIER_COUNT);
  for (int t = 0; t < FTH_TIER_COUNT; t++) {
    if (m->tier_capacity[t] <= 0 && m->tier_bytes[t] <= 0) continue;
    lua_createtable(L, 0, 3);
    setnum(L, "bytes", m->tier_bytes[t]);
    setnum(L, "capacity_bytes", m->tier_capacity[t]);
    lua_pushboolean(L, m->tier_fits[t]);
    lua_setfield(L, -2, "fits");
    lua_setfield(L, -2, fth_tier_name((fth_tier)t));
  }
  lua_setfield(L, -2, "tiers");
  setnum(L, "peak_bytes", m->peak_bytes);
  lua_pushboolean(L, m->fits);
  lua_setfield(L, -2, "fits");
  if (!m->fits) {
    lua_pushstring(L, fth_tier_name(m->overflow_tier));
    lua_setfield(L, -2, "overflow_tier");
  }
}
