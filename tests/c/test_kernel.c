/* test_kernel.c: roofline (Williams et al. 2009) and tiled kernel times, by
 * hand. Most cases use a hand-built env: 1e15 FLOP/s matrix, 5e14 fused
 * attention, 1e14 vector, 2e12 bytes/s memory. */
#include "fth_kernel.h"
#include "test_macros.h"

#include <math.h>

static fth_kernel_env env(void) {
  fth_kernel_env e;
  e.matrix_flops_per_s = 1e15;
  e.attention_flops_per_s = 5e14;
  e.vector_flops_per_s = 1e14;
  e.mem_bw_bytes_per_s = 2e12;
  e.model = FTH_KERNEL_ROOFLINE;
  e.compute_units = 0;
  e.tile_m = e.tile_n = 128.0;
  e.k_overhead_bytes = 0.0;
  e.attn_block_q = 128.0;
  e.expert_gemm_s = 0.0;
  e.expert_rate_fraction = 1.0;
  return e;
}

static int gemm(void) {
  fth_kernel_env e = env();
  /* Compute-bound: 4096^3, batch 2, bf16. FLOPs 2 x 4096^3 x 2 =
   * 274,877,906,944 -> 274.878 us at 1e15; bytes 3 x 4096^2 x 2 B x 2 =
   * 201,326,592 -> 100.663 us at 2e12. Time = the compute part. */
  fth_kernel_cost k = fth_kernel_gemm(&e, 4096, 4096, 4096, 2, 2);
  FTH_ENSURE_NEAR(274877906944.0, k.flops, 1e-15);
  FTH_ENSURE_NEAR(201326592.0, k.bytes, 1e-15);
  FTH_ENSURE_NEAR(274.877906944e-6, k.compute_s, 1e-12);
  FTH_ENSURE_NEAR(100.663296e-6, k.memory_s, 1e-12);
  FTH_ENSURE_NEAR(274.877906944e-6, k.time_s, 1e-12);
  /* Memory-bound: 16 tokens x 8192 x 8192 weights. FLOPs 2 x 16 x 8192^2 =
   * 2,147,483,648 -> 2.147 us; bytes (16 x 8192 + 8192^2 + 16 x 8192) x 2 =
   * 134,742,016 -> 67.371008 us. */
  k = fth_kernel_gemm(&e, 16, 8192, 8192, 1, 2);
  FTH_ENSURE_NEAR(2147483648.0, k.flops, 1e-15);
  FTH_ENSURE_NEAR(134742016.0, k.bytes, 1e-15);
  FTH_ENSURE_NEAR(67.371008e-6, k.time_s, 1e-12);
  FTH_ENSURE(k.memory_s > k.compute_s);
  /* No instances, no work and no traffic: no time. */
  FTH_ENSURE(fth_kernel_gemm(&e, 4096, 4096, 4096, 0, 2).time_s == 0.0);
  return 0;
}

static int attention(void) {
  fth_kernel_env e = env();
  /* Causal, 2 sequences x 8 heads (2 KV heads, GQA), q = kv = 1024, d 128 / 128.
   * Mean keys per query (1024 + 1) / 2 = 512.5; FLOPs 2 x 1024 x 512.5 x 256
   * x 8 x 2 = 4,299,161,600 -> 8.5983232 us at the 5e14 attention rate. Bytes:
   * Q 2 x 8 x 1024 x 128 = 2,097,152, K + V 2 x 2 x 1024 x 256 = 1,048,576, O
   * as Q: 5,242,880 elements x 2 B = 10,485,760 -> 5.24288 us. */
  fth_kernel_cost k = fth_kernel_attention(&e, 2, 8, 2, 1024, 1024, 128, 128, 1, 2);
  FTH_ENSURE_NEAR(4299161600.0, k.flops, 1e-15);
  FTH_ENSURE_NEAR(10485760.0, k.bytes, 1e-15);
  FTH_ENSURE_NEAR(8.5983232e-6, k.time_s, 1e-12);
  /* Not causal: every query sees 1024 keys, 2 x 1024^2 x 256 x 16 = 8,589,934,592. */
  FTH_ENSURE_NEAR(8589934592.0, fth_kernel_attention(&e, 2, 8, 2, 1024, 1024, 128, 128, 0, 2).flops,
                  1e-15);
  /* Chunked prefill, the last 256 of 1024 positions: query t sees 768 + t + 1
   * keys, 896.5 on average: 2 x 256 x 896.5 x 256 x 16 = 1,880,096,768. */
  FTH_ENSURE_NEAR(1880096768.0, fth_kernel_attention(&e, 2, 8, 2, 256, 1024, 128, 128, 1, 2).flops,
                  1e-15);
  /* One decode query sees all 1024 keys, causal or not: 2 x 1024 x 256 x 16. */
  FTH_ENSURE_NEAR(8388608.0, fth_kernel_attention(&e, 2, 8, 2, 1, 1024, 128, 128, 1, 2).flops,
                  1e-15);
  /* MLA-like head dims (d_qk 192, d_v 128), 1 sequence, 1 head, q = kv = 3,
   * causal: mean keys 2, FLOPs 2 x 3 x 2 x 320 = 3840; bytes (3 x 192 + 3 x 320
   * + 3 x 128) x 2 = 3840. */
  k = fth_kernel_attention(&e, 1, 1, 1, 3, 3, 192, 128, 1, 2);
  FTH_ENSURE_NEAR(3840.0, k.flops, 1e-15);
  FTH_ENSURE_NEAR(3840.0, k.bytes, 1e-15);
  /* An unset attention rate falls back to the matrix rate: 4,299,161,600 / 1e15. */
  e.attention_flops_per_s = 0;
  FTH_ENSURE_NEAR(4.2991616e-6,
                  fth_kernel_attention(&e, 2, 8, 2, 1024, 1024, 128, 128, 1, 2).compute_s, 1e-12);
  return 0;
}

static int elementwise(void) {
  fth_kernel_env e = env();
  /* 1e9 elements, 10 FLOP and 2 B each: 1e10 / 1e14 = 100 us against 2e9 /
   * 2e12 = 1 ms: memory-bound. 1e8 elements of 1000 FLOP: 1 ms of vector work
   * against 0.1 ms of traffic. */
  FTH_ENSURE_NEAR(1e-3, fth_kernel_elementwise(&e, 1e9, 10, 2).time_s, 1e-12);
  fth_kernel_cost k = fth_kernel_elementwise(&e, 1e8, 1000, 2);
  FTH_ENSURE_NEAR(1e-3, k.time_s, 1e-12);
  FTH_ENSURE_NEAR(1e-4, k.memory_s, 1e-12);
  return 0;
}

/* Rates from a node: bf16 1e15 and fp8 2e15 nominal at 50%, 4 stacks of 1 TB/s at 50%. */
static int env_from_node(void) {
  fth_node_def n = fth_node_def_default();
  n.compute.flops_per_s[FTH_PREC_FP8] = 2e15;
  n.compute.flops_per_s[FTH_PREC_BF16] = 1e15;
  n.compute.flops_per_s[FTH_PREC_FP32] = 6e13;
  n.compute.efficiency = 0.5;
  n.tier[FTH_TIER_XPU].bw_per_stack_bytes_per_s = 1e12;
  n.tier[FTH_TIER_XPU].size_per_stack_bytes = 24.0 * FTH_GIB;
  n.tier[FTH_TIER_XPU].num_stacks = 4;
  n.tier[FTH_TIER_XPU].efficiency = 0.5;
  n.has_tier[FTH_TIER_XPU] = 1;
  fth_kernel_env e = fth_kernel_env_make(&n, FTH_PREC_FP8, FTH_TIER_XPU);
  /* fp8: 2e15 x 0.5 = 1e15 for GEMMs and (attention efficiency unset) attention;
   * vector unset: bf16 1e15 / 8 x 0.5 = 6.25e13; memory 4 x 1e12 x 0.5 = 2e12. */
  FTH_ENSURE_NEAR(1e15, e.matrix_flops_per_s, 1e-12);
  FTH_ENSURE_NEAR(1e15, e.attention_flops_per_s, 1e-12);
  FTH_ENSURE_NEAR(6.25e13, e.vector_flops_per_s, 1e-12);
  FTH_ENSURE_NEAR(2e12, e.mem_bw_bytes_per_s, 1e-12);
  FTH_ENSURE(e.model == FTH_KERNEL_ROOFLINE);
  FTH_ENSURE_NEAR(128.0, e.tile_m, 0);
  /* A declared vector rate is nominal too: 1e14 x 0.5. */
  n.compute.vector_flops_per_s = 1e14;
  FTH_ENSURE_NEAR(5e13, fth_kernel_env_make(&n, FTH_PREC_BF16, FTH_TIER_XPU).vector_flops_per_s,
                  1e-12);
  /* A tier the node lacks has no bandwidth: traffic there takes forever, a
   * kernel with no traffic does not care. */
  e = fth_kernel_env_make(&n, FTH_PREC_BF16, FTH_TIER_HOST);
  FTH_ENSURE(e.mem_bw_bytes_per_s == 0.0);
  FTH_ENSURE(isinf(fth_kernel_gemm(&e, 64, 64, 64, 1, 2).time_s));
  FTH_ENSURE_NEAR(1e6 / 5e13, fth_kernel_elementwise(&e, 1e6, 1, 0).time_s, 1e-12);
  return 0;
}

/* Tiled model: 4 compute units, 128 x 128 tiles, 128-query attention blocks. */
static int tiled(void) {
  fth_kernel_env e = env();
  e.model = FTH_KERNEL_TILED;
  e.compute_units = 4;
  /* 256 x 256 output = 4 tiles, one full wave: the roofline's 2 x 256^2 x 1024
   * = 134,217,728 FLOP / 1e15. 384 x 384 = 9 tiles, 3 waves of 4 tile-times:
   * 12 x 2 x 128^2 x 1024 = 402,653,184 FLOP-equivalents, 4/3 of the useful. */
  FTH_ENSURE_NEAR(134217728.0 / 1e15, fth_kernel_gemm(&e, 256, 256, 1024, 1, 2).compute_s, 1e-12);
  fth_kernel_cost k = fth_kernel_gemm(&e, 384, 384, 1024, 1, 2);
  FTH_ENSURE_NEAR(402653184.0 / 1e15, k.compute_s, 1e-12);
  FTH_ENSURE_NEAR(2.0 * 384 * 384 * 1024, k.flops, 1e-15); /* FLOPs stay the useful work */
  /* Fewer tiles than units (split-K fills the GPU): only edge padding costs.
   * m = 64 fits a 64-row tile exactly: 2 x 64 x 128 x 1024 / 1e15. m = 100
   * pads to 128 rows: 2 x 128 x 128 x 1024 = 33,554,432 / 1e15. */
  FTH_ENSURE_NEAR(2.0 * 64 * 128 * 1024 / 1e15, fth_kernel_gemm(&e, 64, 128, 1024, 1, 2).compute_s,
                  1e-12);
  FTH_ENSURE_NEAR(33554432.0 / 1e15, fth_kernel_gemm(&e, 100, 128, 1024, 1, 2).compute_s, 1e-12);
  /* Attention, 1 sequence, q = kv = 256, d 64 / 64, not causal, 5e14: 2 heads
   * = 4 query blocks, one wave, the roofline time 2 x 256^2 x 128 x 2 /
   * 5e14. 3 heads = 6 blocks, 2 waves of 4 block-times: 8 blocks of 8,388,608
   * FLOP = 67,108,864 / 5e14 (the useful 50,331,648 x 4/3). */
  FTH_ENSURE_NEAR(2.0 * 256 * 256 * 128 * 2 / 5e14,
                  fth_kernel_attention(&e, 1, 2, 2, 256, 256, 64, 64, 0, 2).compute_s, 1e-12);
  FTH_ENSURE_NEAR(67108864.0 / 5e14,
                  fth_kernel_attention(&e, 1, 3, 3, 256, 256, 64, 64, 0, 2).compute_s, 1e-12);
  /* Without compute units the tiled model is the roofline. */
  e.compute_units = 0;
  FTH_ENSURE_NEAR(2.0 * 384 * 384 * 1024 / 1e15,
                  fth_kernel_gemm(&e, 384, 384, 1024, 1, 2).compute_s, 1e-12);
  return 0;
}

/* A tile's fixed cost as K depth: 448 bytes of K, 224 BF16 (2 B) or 448 FP8 (1 B)
 * elements on top of each tile's k. 256 x 256 over 4 units, one wave of 128 x 128 tiles:
 * K = 768 in BF16 costs 2 x 128^2 x (768 + 224) per unit = 32,505,856 FLOP-equivalents
 * / (1e15 / 4) = 130.023424 ns; in FP8 (768 + 448): 2 x 128^2 x 1216 x 4 / 1e15.
 * The useful fraction is K / (K + 448 / bytes): 0.774 BF16, 0.632 FP8 at K = 768,
 * 0.9482 / 0.9014 at K = 4096 (H100, measured: BF16 0.61 / 0.73, FP8 tensorwise
 * 0.49 at K 1024 -> 0.67 at K 4096, of the peak; validation/measurements). */
static int tile_k_overhead(void) {
  fth_kernel_env e = env();
  e.model = FTH_KERNEL_TILED;
  e.compute_units = 4;
  e.k_overhead_bytes = 448.0;
  fth_kernel_cost k = fth_kernel_gemm(&e, 256, 256, 768, 1, 2);
  FTH_ENSURE_NEAR(4.0 * 2 * 128 * 128 * 992 / 1e15, k.compute_s, 1e-12);
  FTH_ENSURE_NEAR(2.0 * 256 * 256 * 768, k.flops, 0); /* the useful work */
  FTH_ENSURE_NEAR(4.0 * 2 * 128 * 128 * 1216 / 1e15,
                  fth_kernel_gemm(&e, 256, 256, 768, 1, 1).compute_s, 1e-12);
  /* the useful fraction rises with K: 4096 / (4096 + 224) */
  fth_kernel_cost l = fth_kernel_gemm(&e, 256, 256, 4096, 1, 2);
  FTH_ENSURE_NEAR(4096.0 / 4320.0, l.flops / 1e15 / l.compute_s, 1e-12);
  /* Split-K (fewer tiles than units): one 64 x 128 tile of K 1,024 split over the 4 units,
   * each K slice paying its own fill and epilogue: 2 x 64 x 128 x (1,024 + 4 x 224) / 1e15 */
  FTH_ENSURE_NEAR(2.0 * 64 * 128 * (1024 + 4 * 224) / 1e15,
                  fth_kernel_gemm(&e, 64, 128, 1024, 1, 2).compute_s, 1e-12);
  /* Against the H100 measurements (validation/measurements/h100_sxm/run2/gemm.csv, M and N
   * >= 2048, median fraction of the dense peak per K): cuBLAS BF16 0.609 at K 1,024 and
   * 0.758 at K 12,288, a ratio of 0.803; FP8 tensorwise with fast accumulation 0.516 and
   * 0.697, 0.740. The tiles' fixed cost alone gives (1024 / 1248) / (12288 / 12512) = 0.835
   * and (1024 / 1472) / (12288 / 12736) = 0.721: within 4% of both. */
  double bf16 = fth_kernel_gemm(&e, 256, 256, 12288, 1, 2).compute_s /
                fth_kernel_gemm(&e, 256, 256, 1024, 1, 2).compute_s * 1024.0 / 12288.0;
  double fp8 = fth_kernel_gemm(&e, 256, 256, 12288, 1, 1).compute_s /
               fth_kernel_gemm(&e, 256, 256, 1024, 1, 1).compute_s * 1024.0 / 12288.0;
  FTH_ENSURE(fabs(bf16 / (0.609 / 0.758) - 1) < 0.04);
  FTH_ENSURE(fabs(fp8 / (0.516 / 0.697) - 1) < 0.04);
  /* 0 = none; the roofline never pays it */
  e.k_overhead_bytes = 0.0;
  FTH_ENSURE_NEAR(4.0 * 2 * 128 * 128 * 768 / 1e15,
                  fth_kernel_gemm(&e, 256, 256, 768, 1, 2).compute_s, 1e-12);
  e.k_overhead_bytes = 448.0;
  e.model = FTH_KERNEL_ROOFLINE;
  FTH_ENSURE_NEAR(2.0 * 256 * 256 * 768 / 1e15, fth_kernel_gemm(&e, 256, 256, 768, 1, 2).compute_s,
                  1e-12);
  return 0;
}

int kernel_test(void) {
  FTH_RUN(gemm());
  FTH_RUN(attention());
  FTH_RUN(elementwise());
  FTH_RUN(env_from_node());
  FTH_RUN(tiled());
  FTH_RUN(tile_k_overhead());
  return 0;
}
