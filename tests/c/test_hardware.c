#include "fth_hardware.h"
#include "fth_kernel.h"
#include "test_macros.h"

#include <math.h>
#include <string.h>

/* H100 SXM-like figures: 989.4 TFLOP/s bf16 dense, 1979 fp8, 67 fp32;
 * HBM3 5 stacks x 670 GB/s (3.35 TB/s in all), 16 GiB each, 80% achievable. */
static fth_node_def h100(void) {
  fth_node_def n = fth_node_def_default();
  n.compute.flops_per_s[FTH_PREC_FP8] = 1979e12;
  n.compute.flops_per_s[FTH_PREC_BF16] = 989.4e12;
  n.compute.flops_per_s[FTH_PREC_FP32] = 67e12;
  n.compute.efficiency = 0.7;
  n.compute.gemm_k_overhead_bytes = 448; /* the hardware library's, measured */
  n.tier[FTH_TIER_XPU].bw_per_stack_bytes_per_s = 670e9;
  n.tier[FTH_TIER_XPU].size_per_stack_bytes = 16.0 * FTH_GIB;
  n.tier[FTH_TIER_XPU].num_stacks = 5;
  n.tier[FTH_TIER_XPU].efficiency = 0.8;
  n.has_tier[FTH_TIER_XPU] = 1;
  return n;
}

static int rates(void) {
  fth_node_def n = h100();
  fth_error err;
  FTH_ENSURE(fth_node_check(&n, &err) == FTH_OK);
  /* 989.4e12 x 0.7 = 692.58e12; fp8 1979e12 x 0.7 = 1385.3e12; fp32 67e12 x 0.7 = 46.9e12. */
  FTH_ENSURE_NEAR(692.58e12, fth_compute_flops_per_s(&n.compute, FTH_PREC_BF16), 1e-12);
  FTH_ENSURE_NEAR(1385.3e12, fth_compute_flops_per_s(&n.compute, FTH_PREC_FP8), 1e-12);
  FTH_ENSURE_NEAR(46.9e12, fth_compute_flops_per_s(&n.compute, FTH_PREC_FP32), 1e-12);
  /* Fused attention: unset attention_efficiency uses 0.7 (692.58e12); set to 0.5 it is
   * 989.4e12 x 0.5 = 494.7e12 at bf16 and 1979e12 x 0.5 = 989.5e12 at fp8. */
  FTH_ENSURE_NEAR(692.58e12, fth_compute_attention_flops_per_s(&n.compute, FTH_PREC_BF16), 1e-12);
  n.compute.attention_efficiency = 0.5;
  FTH_ENSURE(fth_node_check(&n, &err) == FTH_OK);
  FTH_ENSURE_NEAR(494.7e12, fth_compute_attention_flops_per_s(&n.compute, FTH_PREC_BF16), 1e-12);
  FTH_ENSURE_NEAR(989.5e12, fth_compute_attention_flops_per_s(&n.compute, FTH_PREC_FP8), 1e-12);
  /* No fp8 on an A100: fp8 falls back to bf16, 692.58e12. */
  n.compute.flops_per_s[FTH_PREC_FP8] = 0;
  FTH_ENSURE_NEAR(692.58e12, fth_compute_flops_per_s(&n.compute, FTH_PREC_FP8), 1e-12);
  /* fp32-only device: fp8 and bf16 both fall back to fp32, 67e12 x 0.7 = 46.9e12. */
  n.compute.flops_per_s[FTH_PREC_BF16] = 0;
  FTH_ENSURE(fth_node_check(&n, &err) == FTH_OK);
  FTH_ENSURE_NEAR(46.9e12, fth_compute_flops_per_s(&n.compute, FTH_PREC_BF16), 1e-12);
  FTH_ENSURE_NEAR(46.9e12, fth_compute_flops_per_s(&n.compute, FTH_PREC_FP8), 1e-12);
  /* No fallback towards narrower types: fp32 nominal 0 gives 0 even with bf16 set. */
  n = h100();
  n.compute.flops_per_s[FTH_PREC_FP32] = 0;
  FTH_ENSURE(fth_node_check(&n, &err) == FTH_OK);
  FTH_ENSURE_NEAR(0.0, fth_compute_flops_per_s(&n.compute, FTH_PREC_FP32), 0);
  /* A 500 W cap on a part rated 700 W: clocks x (500 / 700)^(1/3) = 0.893904...
   * (P ~ f^3): bf16 692.58e12 x 0.8939036 = 619.09e12, attention likewise; no
   * cap, or a cap at or above the rating, leaves the rates alone. */
  n = h100();
  n.compute.power_watts = 700;
  FTH_ENSURE_NEAR(1.0, fth_compute_clock_scale(&n.compute), 0);
  n.compute.power_limit_watts = 500;
  FTH_ENSURE(fth_node_check(&n, &err) == FTH_OK);
  FTH_ENSURE_NEAR(0.8939035350965, fth_compute_clock_scale(&n.compute), 1e-12);
  FTH_ENSURE_NEAR(692.58e12 * 0.8939035350965, fth_compute_flops_per_s(&n.compute, FTH_PREC_BF16),
                  1e-12);
  FTH_ENSURE_NEAR(692.58e12 * 0.8939035350965,
                  fth_compute_attention_flops_per_s(&n.compute, FTH_PREC_BF16), 1e-12);
  n.compute.power_limit_watts = 800;
  FTH_ENSURE_NEAR(1.0, fth_compute_clock_scale(&n.compute), 0);
  /* A part that holds 1,207 of its 2,100 MHz under a dense GEMM (MI300X, AMD's MAF):
   * every rate x 1207 / 2100 = 0.5747619; with the 500 W cap of 700 W on top,
   * 0.5747619 x 0.8939035 = 0.5137820. */
  n.compute.dense_clock_fraction = 1207.0 / 2100.0;
  FTH_ENSURE(fth_node_check(&n, &err) == FTH_OK);
  FTH_ENSURE_NEAR(0.5747619047619, fth_compute_clock_scale(&n.compute), 1e-12);
  FTH_ENSURE_NEAR(692.58e12 * 0.5747619047619, fth_compute_flops_per_s(&n.compute, FTH_PREC_BF16),
                  1e-12);
  n.compute.power_limit_watts = 500;
  FTH_ENSURE_NEAR(0.5747619047619 * 0.8939035350965, fth_compute_clock_scale(&n.compute), 1e-12);
  n = h100();
  /* H100 HBM3 3.35e12 B/s over 5 stacks = 670e9 each: 5 x 670e9 x 0.8 = 2.68e12 B/s;
   * 5 x 16 GiB = 80 GiB = 85,899,345,920 bytes. */
  FTH_ENSURE_NEAR(2.68e12, fth_memory_bw_bytes_per_s(&n.tier[FTH_TIER_XPU]), 1e-12);
  FTH_ENSURE_NEAR(85899345920.0, fth_memory_capacity_bytes(&n.tier[FTH_TIER_XPU]), 1e-12);
  /* NVLink4: 900 GB/s bidirectional = 18 links x 25e9 per direction; x 0.9 = 405e9 B/s. */
  fth_link_def l = fth_link_def_default();
  l.bw_bytes_per_s = 25e9;
  l.num_links = 18;
  l.efficiency = 0.9;
  FTH_ENSURE(fth_link_check(&l, &err) == FTH_OK);
  FTH_ENSURE_NEAR(405e9, fth_link_bw_bytes_per_s(&l), 1e-12);
  return 0;
}

static int names(void) {
  FTH_ENSURE(fth_precision_from_bytes(1) == FTH_PREC_FP8);
  FTH_ENSURE(fth_precision_from_bytes(2) == FTH_PREC_BF16);
  FTH_ENSURE(fth_precision_from_bytes(4) == FTH_PREC_FP32);
  FTH_ENSURE(fth_precision_from_bytes(8) == FTH_PREC_FP32);
  FTH_ENSURE(strcmp(fth_tier_name(FTH_TIER_XPU), "xpu_memory") == 0);
  FTH_ENSURE(strcmp(fth_tier_name(FTH_TIER_HOST), "host_memory") == 0);
  FTH_ENSURE(strcmp(fth_tier_name(FTH_TIER_REMOTE), "remote_memory") == 0);
  FTH_ENSURE(strcmp(fth_tier_name(FTH_TIER_NVME), "nvme") == 0);
  FTH_ENSURE(fth_tier_name(FTH_TIER_COUNT) == NULL);
  for (int t = 0; t < FTH_TIER_COUNT; t++)
    FTH_ENSURE_EQ_INT(t, fth_tier_parse(fth_tier_name((fth_tier)t)));
  FTH_ENSURE(fth_tier_parse("hbm") == FTH_TIER_COUNT);
  FTH_ENSURE(fth_tier_parse(NULL) == FTH_TIER_COUNT);
  return 0;
}

/* Expect FTH_EINVAL from the node check, with exactly `path` and a message. */
static int node_refused(const fth_node_def *n, const char *path) {
  fth_error err;
  fth_error_clear(&err);
  FTH_ENSURE(fth_node_check(n, &err) == FTH_EINVAL);
  FTH_ENSURE_EQ_INT(FTH_EINVAL, err.status);
  if (strcmp(err.path, path) != 0) {
    fprintf(stderr, "path: expected '%s', got '%s' (%s)\n", path, err.path, err.msg);
    return 1;
  }
  FTH_ENSURE(err.msg[0] != '\0');
  return 0;
}

/* Expect FTH_EINVAL from the link check, with exactly `path`. */
static int link_refused(const fth_link_def *l, const char *path) {
  fth_error err;
  FTH_ENSURE(fth_link_check(l, &err) == FTH_EINVAL);
  if (strcmp(err.path, path) != 0) {
    fprintf(stderr, "path: expected '%s', got '%s' (%s)\n", path, err.path, err.msg);
    return 1;
  }
  return 0;
}

static int defaults(void) {
  fth_error err;
  /* Defaults carry no rates, so every check refuses them at the first rate. */
  fth_compute_def c = fth_compute_def_default();
  FTH_ENSURE_NEAR(1.0, c.efficiency, 0);
  FTH_ENSURE(fth_compute_check(&c, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "bf16_nominal") == 0);
  fth_memory_def m = fth_memory_def_default();
  FTH_ENSURE_NEAR(1.0, m.efficiency, 0);
  FTH_ENSURE(fth_memory_check(&m, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "bandwidth_per_stack_nominal") == 0);
  fth_link_def l = fth_link_def_default();
  FTH_ENSURE_NEAR(1.0, l.efficiency, 0);
  FTH_ENSURE(fth_link_check(&l, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "bandwidth_nominal") == 0);
  fth_node_def n = fth_node_def_default();
  FTH_RUN(node_refused(&n, "device_compute.bf16_nominal"));
  /* Boundaries accepted: efficiency exactly 1, latency exactly 0. */
  n = h100();
  n.compute.efficiency = 1.0;
  n.tier[FTH_TIER_XPU].efficiency = 1.0;
  FTH_ENSURE(fth_node_check(&n, &err) == FTH_OK);
  l.bw_bytes_per_s = 1e9;
  l.latency_s = 0.0;
  FTH_ENSURE(fth_link_check(&l, &err) == FTH_OK);
  return 0;
}

static int refusals(void) {
  fth_error err;
  fth_node_def n = h100();
  n.compute.efficiency = 1.5; /* above 1 */
  FTH_RUN(node_refused(&n, "device_compute.efficiency"));
  FTH_ENSURE(fth_node_check(&n, &err) == FTH_EINVAL && strstr(err.msg, "1.5") != NULL);
  n.compute.efficiency = -0.1; /* negative */
  FTH_RUN(node_refused(&n, "device_compute.efficiency"));
  n.compute.efficiency = 0.0; /* the interval is open at 0 */
  FTH_RUN(node_refused(&n, "device_compute.efficiency"));
  n.compute.efficiency = NAN;
  FTH_RUN(node_refused(&n, "device_compute.efficiency"));
  n = h100();
  n.compute.flops_per_s[FTH_PREC_BF16] = NAN;
  FTH_RUN(node_refused(&n, "device_compute.bf16_nominal"));
  n = h100();
  n.compute.flops_per_s[FTH_PREC_FP8] = INFINITY;
  FTH_RUN(node_refused(&n, "device_compute.fp8_nominal"));
  n = h100();
  n.compute.flops_per_s[FTH_PREC_FP32] = -1.0;
  FTH_RUN(node_refused(&n, "device_compute.fp32_nominal"));
  n = h100();
  n.compute.attention_efficiency = 1.5;
  FTH_RUN(node_refused(&n, "device_compute.attention_efficiency"));
  n = h100();
  n.compute.gemm_tile_n = -128;
  FTH_RUN(node_refused(&n, "device_compute.gemm_tile_n"));
  n = h100();
  n.compute.gemm_k_overhead_bytes = -1;
  FTH_RUN(node_refused(&n, "device_compute.gemm_k_overhead_bytes"));
  n.compute.gemm_k_overhead_bytes = NAN;
  FTH_RUN(node_refused(&n, "device_compute.gemm_k_overhead_bytes"));
  n = h100();
  n.compute.compute_units = -1;
  FTH_RUN(node_refused(&n, "device_compute.compute_units"));
  n = h100();
  n.compute.vector_flops_per_s = NAN;
  FTH_RUN(node_refused(&n, "device_compute.vector_nominal"));
  n = h100();
  n.compute.power_limit_watts = -500;
  FTH_RUN(node_refused(&n, "device_compute.power_limit_watts"));
  n = h100();
  n.compute.dense_clock_fraction = 1.2;
  FTH_RUN(node_refused(&n, "device_compute.dense_clock_fraction"));
  /* Memory tiers: paths carry the tier's YAML name. */
  n = h100();
  n.tier[FTH_TIER_XPU].size_per_stack_bytes = 0; /* zero size */
  FTH_RUN(node_refused(&n, "device_memory_tiers.xpu_memory.size_per_stack"));
  n = h100();
  n.tier[FTH_TIER_XPU].num_stacks = 0;
  FTH_RUN(node_refused(&n, "device_memory_tiers.xpu_memory.num_stack"));
  n = h100();
  n.tier[FTH_TIER_XPU].bw_per_stack_bytes_per_s = NAN;
  FTH_RUN(node_refused(&n, "device_memory_tiers.xpu_memory.bandwidth_per_stack_nominal"));
  n = h100();
  n.has_tier[FTH_TIER_HOST] = 1;
  n.tier[FTH_TIER_HOST].bw_per_stack_bytes_per_s = 64e9;
  n.tier[FTH_TIER_HOST].size_per_stack_bytes = 512.0 * FTH_GIB;
  n.tier[FTH_TIER_HOST].efficiency = -0.5; /* negative efficiency on a second tier */
  FTH_RUN(node_refused(&n, "device_memory_tiers.host_memory.efficiency"));
  n.tier[FTH_TIER_HOST].efficiency = 0.5;
  FTH_ENSURE(fth_node_check(&n, &err) == FTH_OK);
  n.has_tier[FTH_TIER_HOST] = 0; /* undeclared tiers are not checked */
  n.tier[FTH_TIER_HOST].efficiency = -0.5;
  FTH_ENSURE(fth_node_check(&n, &err) == FTH_OK);
  n = h100();
  n.has_tier[FTH_TIER_XPU] = 0; /* a node without xpu_memory */
  FTH_RUN(node_refused(&n, "device_memory_tiers.xpu_memory"));
  /* Links. */
  fth_link_def l = fth_link_def_default();
  l.bw_bytes_per_s = 0;
  FTH_RUN(link_refused(&l, "bandwidth_nominal"));
  l.bw_bytes_per_s = 1e9;
  l.num_links = 0;
  FTH_RUN(link_refused(&l, "num_links"));
  l.num_links = 1;
  l.efficiency = 1.01;
  FTH_RUN(link_refused(&l, "efficiency"));
  l.efficiency = 1.0;
  l.latency_s = -1;
  FTH_RUN(link_refused(&l, "latency_sec"));
  l.latency_s = NAN;
  FTH_RUN(link_refused(&l, "latency_sec"));
  return 0;
}

/* Roofline kernels on the H100-like node at bf16: 692.58 TFLOP/s, 2.68 TB/s,
 * vector rate 989.4e12 x 0.7 / 8 = 86.5725 TFLOP/s. */
static int kernels(void) {
  fth_node_def n = h100();
  fth_kernel_env e = fth_kernel_env_make(&n, FTH_PREC_BF16, FTH_TIER_XPU);
  const fth_kernel_env e0 = e;
  FTH_ENSURE_NEAR(86.5725e12, e.vector_flops_per_s, 1e-12);
  /* 8192^3 GEMM: 2 x 8192^3 = 1.0995e12 FLOP -> 1.5876 ms; bytes 3 x 8192^2
   * x 2 = 402.65 MB -> 150 us: compute-bound. */
  fth_kernel_cost k = fth_kernel_gemm(&e, 8192, 8192, 8192, 1, 2);
  FTH_ENSURE_NEAR(2.0 * 8192.0 * 8192.0 * 8192.0, k.flops, 1e-12);
  FTH_ENSURE_NEAR(k.flops / 692.58e12, k.time_s, 1e-12);
  FTH_ENSURE(k.compute_s > k.memory_s);
  /* GEMV-like m = 1: 2 x 8192^2 FLOP, bytes (8192 + 8192^2 + 8192) x 2:
   * memory-bound at 2.68 TB/s. */
  k = fth_kernel_gemm(&e, 1, 8192, 8192, 1, 2);
  FTH_ENSURE_NEAR((8192.0 + 8192.0 * 8192.0 + 8192.0) * 2.0 / 2.68e12, k.time_s, 1e-12);
  FTH_ENSURE(k.memory_s > k.compute_s);
  /* Causal attention, 1 sequence, 1 head, q = kv = 3, d = 2: mean keys 2,
   * FLOPs 2 x 3 x 2 x (2 + 2) = 48. Non-causal 2 x 3 x 3 x 4 = 72. */
  FTH_ENSURE_NEAR(48.0, fth_kernel_attention(&e, 1, 1, 1, 3, 3, 2, 2, 1, 2).flops, 0);
  FTH_ENSURE_NEAR(72.0, fth_kernel_attention(&e, 1, 1, 1, 3, 3, 2, 2, 0, 2).flops, 0);
  /* Element-wise: 1e9 elements, 4 B each, 1 FLOP: 4e9 / 2.68e12. */
  FTH_ENSURE_NEAR(4e9 / 2.68e12, fth_kernel_elementwise(&e, 1e9, 1, 4).time_s, 1e-12);
  /* Tiled model, 132 units, 128 x 128 tiles. 1536 x 1408 output = 12 x 11 = 132
   * tiles: one full wave, the roofline's time (with the tiles' fixed cost). 1536 x 1536 =
   * 144 tiles: two waves, the second 12/132 full, so 2 x 132 tiles' worth of time:
   * 264 x 2 x 128^2 x 4096 FLOP at 692.58 TFLOP/s, 1.8333x the useful work's time. */
  fth_kernel_env t = fth_kernel_env_make(&n, FTH_PREC_BF16, FTH_TIER_XPU);
  t.model = FTH_KERNEL_TILED;
  t.compute_units = 132;
  /* Each tile also pays its fill and epilogue, 448 bytes of K on H100: 224 BF16
   * elements, so a tile of K 4096 costs as one of 4320. */
  k = fth_kernel_gemm(&t, 1536, 1408, 4096, 1, 2);
  FTH_ENSURE_NEAR(2.0 * 1536 * 1408 * 4320 / 692.58e12, k.compute_s, 1e-12);
  k = fth_kernel_gemm(&t, 1536, 1536, 4096, 1, 2);
  FTH_ENSURE_NEAR(264.0 * 2 * 128 * 128 * 4320 / 692.58e12, k.compute_s, 1e-12);
  FTH_ENSURE_NEAR(2.0 * 1536 * 1536 * 4096, k.flops, 0); /* FLOPs stay the useful work */
  /* Flash attention, 16 heads x 1024 queries = 128 blocks of 128: one wave of
   * 132 units, 4 of them idle: 132/128 of the roofline time. */
  fth_kernel_cost a = fth_kernel_attention(&t, 1, 16, 16, 1024, 1024, 128, 128, 1, 2);
  fth_kernel_cost ar = fth_kernel_attention(&e0, 1, 16, 16, 1024, 1024, 128, 128, 1, 2);
  FTH_ENSURE_NEAR(ar.compute_s * 132.0 / 128.0, a.compute_s, 1e-12);
  /* A tier the node lacks cannot be read. */
  e = fth_kernel_env_make(&n, FTH_PREC_BF16, FTH_TIER_NVME);
  FTH_ENSURE(isinf(fth_kernel_gemm(&e, 1, 1, 1, 1, 2).time_s));
  return 0;
}

int hardware_test(void) {
  FTH_RUN(rates());
  FTH_RUN(names());
  FTH_RUN(defaults());
  FTH_RUN(refusals());
  FTH_RUN(kernels());
  return 0;
}
