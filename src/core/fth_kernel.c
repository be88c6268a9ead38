/* fth_kernel.c: roofline kernel times (Williams, Waterman & Patterson 2009):
 * a kernel takes the longer of its arithmetic at the achievable rate and its
 * memory traffic at the achievable bandwidth. The TILED model is reserved for
 * a tile/wave-quantisation GEMM and a flash-attention tile model behind the
 * same calls; until then it falls back to the roofline. */
#include "fth_kernel.h"

#include <math.h>
#include <string.h>

static const char *const model_names[FTH_KERNEL_MODEL_COUNT] = {"roofline", "tiled"};

const char *fth_kernel_model_name(fth_kernel_model m) {
  return (m >= 0 && m < FTH_KERNEL_MODEL_COUNT) ? model_names[m] : NULL;
}

fth_kernel_model fth_kernel_model_parse(const char *name) {
  for (int i = 0; i < FTH_KERNEL_MODEL_COUNT; i++)
    if (strcmp(name, model_names[i]) == 0) return (fth_kernel_model)i;
  return FTH_KERNEL_MODEL_COUNT;
}

fth_kernel_env fth_kernel_env_make(const fth_node_def *node, fth_precision prec, fth_tier tier) {
  fth_kernel_env e;
  e.matrix_flops_per_s = fth_compute_flops_per_s(&node->compute, prec);
  e.attention_flops_per_s = fth_compute_attention_flops_per_s(&node->compute, prec);
  /* Element-wise work runs on the vector units: a declared rate, else 1/8 of
   * the bf16 tensor rate (H100: 134 of 989 TFLOP/s). */
  double vec = node->compute.vector_flops_per_s;
  if (!(vec > 0))
    vec = fth_compute_flops_per_s(&node->compute, FTH_PREC_BF16) / 8.0;
  else /* a declared rate runs at the clock a power cap leaves too */
    vec *= node->compute.efficiency * fth_compute_clock_scale(&node->compute);
  e.vector_flops_per_s = vec;
  e.mem_bw_bytes_per_s = (tier >= 0 && tier < FTH_TIER_COUNT && node->has_tier[tier])
                             ? fth_memory_bw_bytes_per_s(&node->tier[tier])
                             : 0.0;
  e.model = FTH_KERNEL_ROOFLINE;
  e.compute_units = node->compute.compute_units;
  e.tile_m = node->compute.gemm_tile_m > 0 ? node->compute.gemm_tile_m : 128.0;
  e.tile_n = node->compute.gemm_tile_n > 0 ? node->compute.gemm_tile_n : 128.0;
  e.k_overhead_bytes = node->compute.gemm_k_overhead_bytes;
  e.attn_block_q = 128.0;
  e.expert_gemm_s = node->compute.expert_gemm_s;
  double lowp = node->compute.expert_lowp_fraction;
  e.expert_rate_fraction =
      ((prec == FTH_PREC_FP8 || prec == FTH_PREC_FP4) && lowp > 0 && lowp < 1) ? lowp : 1.0;
  return e;
}

static fth_kernel_cost roofline(double flops, double rate, double bytes, double bw) {
  fth_kernel_cost c;
  c.flops = flops;
  c.bytes = bytes;
  c.compute_s = flops > 0 ? (rate > 0 ? flops / rate : HUGE_VAL) : 0.0;
  c.memory_s = bytes > 0 ? (bw > 0 ? bytes / bw : HUGE_VAL) : 0.0;
  c.time_s = fth_max(c.compute_s, c.memory_s);
  return c;
}

/* Waves of `tiles` work items over the compute units, each item costing
 * `item_flops` at 1/units of `rate`: the time the tiled model charges. */
static double waves_s(const fth_kernel_env *env, double tiles, double item_flops, double rate) {
  double units = (double)env->compute_units;
  double waves = fth_ceil_div(tiles, units);
  return rate > 0 ? waves * item_flops * units / rate : HUGE_VAL;
}

static int tiled(const fth_kernel_env *env) {
  return env->model == FTH_KERNEL_TILED && env->compute_units > 0;
}

/* The library's tile edge for a dimension of `x`: the configured tile, or for
 * a smaller problem the power of two >= x (at least 16, the MMA granule). */
static double tile_edge(double tile, double x) {
  if (x >= tile) return tile;
  double e = 16.0;
  while (e < x) e *= 2.0;
  return fth_min(e, tile);
}

fth_kernel_cost fth_kernel_gemm(const fth_kernel_env *env, double m, double n, double k,
                                double batch, double elem_bytes) {
  /* 2 m n k multiply-adds; A, B read once and C written once (ideal tiling). */
  double flops = 2.0 * m * n * k * batch;
  double bytes = (m * k + k * n + m * n) * elem_bytes * batch;
  fth_kernel_cost c = roofline(flops, env->matrix_flops_per_s, bytes, env->mem_bw_bytes_per_s);
  if (tiled(env) && flops > 0) {
    double tm = tile_edge(env->tile_m, m), tn = tile_edge(env->tile_n, n);
    double tiles = fth_ceil_div(m, tm) * fth_ceil_div(n, tn) * batch;
    /* each tile's fill and epilogue: k_overhead_bytes more of K (fth_kernel.h) */
    double k_fixed = elem_bytes > 0 ? env->k_overhead_bytes / elem_bytes : 0.0;
    double tile_flops = 2.0 * tm * tn * (k + k_fixed);
    if (tiles >= env->compute_units) {
      c.compute_s = waves_s(env, tiles, tile_flops, env->matrix_flops_per_s);
    } else {
      /* Fewer tiles than units: libraries split K to fill the GPU (split-K), so
       * only the padding of the edge tiles is lost; every unit's K slice pays its
       * own fill and epilogue. */
      c.compute_s = 2.0 * tm * tn * (tiles * k + env->compute_units * k_fixed) /
                    env->matrix_flops_per_s;
    }
    c.time_s = fth_max(c.compute_s, c.memory_s);
  }
  return c;
}

/* S(n) = sum over j = 1..n of min(w, j): the keys the first n positions see. */
static double window_prefix(double n, double w) {
  if (w <= 0 || n <= w) return n * (n + 1.0) / 2.0;
  return w * (w + 1.0) / 2.0 + (n - w) * w;
}

double fth_kernel_causal_keys(double q_len, double kv_len, double window) {
  if (q_len <= 0 || kv_len <= 0) return 0.0;
  if (q_len > kv_len) q_len = kv_len; /* the square case */
  /* queries at positions kv - q .. kv - 1 (0-based) see min(w, p + 1) keys */
  return (window_prefix(kv_len, window) - window_prefix(kv_len - q_len, window)) / q_len;
}

fth_kernel_cost fth_kernel_attention(const fth_kernel_env *env, double batch, double heads,
                                     double kv_heads, double q_len, double kv_len, double d_qk,
                                     double d_v, int causal, double elem_bytes) {
  /* Scores Q K^T (2 q kv d_qk) and P V (2 q kv d_v) per head. Under a causal
   * mask the q queries are the last q positions of the kv: query t (0-based)
   * sees kv - q + t + 1 keys, kv - (q - 1) / 2 on average; for q = kv that is
   * (kv + 1) / 2, for one decode query all kv. (q > kv has no such alignment:
   * counted as the square case, (kv + 1) / 2.) */
  double keys = causal ? fth_kernel_causal_keys(q_len, kv_len, 0.0) : kv_len;
  double flops = 2.0 * q_len * keys * (d_qk + d_v) * heads * batch;
  /* Flash attention reads Q, K, V and writes O once (Dao et al. 2022). */
  double bytes = (batch * heads * q_len * d_qk + batch * kv_heads * kv_len * (d_qk + d_v) +
                  batch * heads * q_len * d_v) *
                 elem_bytes;
  double rate =
      env->attention_flops_per_s > 0 ? env->attention_flops_per_s : env->matrix_flops_per_s;
  fth_kernel_cost c = roofline(flops, rate, bytes, env->mem_bw_bytes_per_s);
  if (tiled(env) && flops > 0) {
    double blocks = batch * heads * fth_ceil_div(q_len, env->attn_block_q);
    double per_block =
        flops / (batch * heads * q_len) * env->attn_block_q; /* a full block's share */
    c.compute_s = waves_s(env, blocks, per_block, rate);
    c.time_s = fth_max(c.compute_s, c.memory_s);
  }
  return c;
}

fth_kernel_cost fth_kernel_elementwise(const fth_kernel_env *env, double elems,
                                       double flops_per_elem, double bytes_per_elem) {
  return roofline(elems * flops_per_elem, env->vector_flops_per_s, elems * bytes_per_elem,
                  env->mem_bw_bytes_per_s);
}
