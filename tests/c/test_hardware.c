#include "fth_hardware.h"
#include "fth_kernel.h"
#include "fth_topology.h"
#include "test_macros.h"

#include <math.h>
#include <string.h>

/* H100 SXM-like figures: 989.4 TFLOP/s bf16 dense, 1979 fp8, 67 fp32;
 * HBM3 5 stacks x 670 GB/s, 16 GiB each; NVLink4 18 x 25 GB/s per direction. */
static fth_node_def h100(void) {
  fth_node_def n = fth_node_def_default();
  n.compute.flops_per_s[FTH_PREC_FP8] = 1979e12;
  n.compute.flops_per_s[FTH_PREC_BF16] = 989.4e12;
  n.compute.flops_per_s[FTH_PREC_FP32] = 67e12;
  n.compute.efficiency = 0.7;
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
  /* 989.4e12 x 0.7 = 692.58e12; fp8 1979e12 x 0.7 = 1385.3e12. */
  FTH_ENSURE_NEAR(692.58e12, fth_compute_flops_per_s(&n.compute, FTH_PREC_BF16), 1e-12);
  FTH_ENSURE_NEAR(1385.3e12, fth_compute_flops_per_s(&n.compute, FTH_PREC_FP8), 1e-12);
  /* No fp8 on an A100: falls back to bf16. */
  n.compute.flops_per_s[FTH_PREC_FP8] = 0;
  FTH_ENSURE_NEAR(692.58e12, fth_compute_flops_per_s(&n.compute, FTH_PREC_FP8), 1e-12);
  /* 5 x 670e9 x 0.8 = 2.68e12 B/s; 5 x 16 GiB = 80 GiB. */
  FTH_ENSURE_NEAR(2.68e12, fth_memory_bw_bytes_per_s(&n.tier[FTH_TIER_XPU]), 1e-12);
  FTH_ENSURE_NEAR(80.0 * FTH_GIB, fth_memory_capacity_bytes(&n.tier[FTH_TIER_XPU]), 1e-12);
  /* NVLink4: 18 x 25e9 x 0.9 = 405e9 B/s per direction. */
  fth_link_def l = fth_link_def_default();
  l.bw_bytes_per_s = 25e9;
  l.num_links = 18;
  l.efficiency = 0.9;
  FTH_ENSURE(fth_link_check(&l, &err) == FTH_OK);
  FTH_ENSURE_NEAR(405e9, fth_link_bw_bytes_per_s(&l), 1e-12);
  FTH_ENSURE(fth_precision_from_bytes(1) == FTH_PREC_FP8 &&
             fth_precision_from_bytes(4) == FTH_PREC_FP32);
  FTH_ENSURE(fth_tier_parse("remote_memory") == FTH_TIER_REMOTE &&
             fth_tier_parse("x") == FTH_TIER_COUNT);
  return 0;
}

static int refusals(void) {
  fth_error err;
  fth_node_def n = h100();
  n.compute.efficiency = 1.5;
  FTH_ENSURE(fth_node_check(&n, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "device_compute.efficiency") == 0);
  n = h100();
  n.compute.efficiency = NAN;
  FTH_ENSURE(fth_node_check(&n, &err) == FTH_EINVAL);
  n = h100();
  n.tier[FTH_TIER_XPU].num_stacks = 0;
  FTH_ENSURE(fth_node_check(&n, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "device_memory_tiers.xpu_memory.num_stack") == 0);
  n = h100();
  n.has_tier[FTH_TIER_XPU] = 0;
  FTH_ENSURE(fth_node_check(&n, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "device_memory_tiers.xpu_memory") == 0);
  fth_link_def l = fth_link_def_default();
  l.bw_bytes_per_s = 0;
  FTH_ENSURE(fth_link_check(&l, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "bandwidth_nominal") == 0);
  l.bw_bytes_per_s = 1e9;
  l.latency_s = -1;
  FTH_ENSURE(fth_link_check(&l, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "latency_sec") == 0);
  return 0;
}

/* 16 nodes x 8 GPUs: NVLink switched inside, IB two-tier across. */
static fth_topology_def two_level(void) {
  fth_topology_def t = fth_topology_def_default();
  t.num_phys = 2;
  t.phys[0].type = FTH_TOPO_SWITCHED;
  t.phys[0].size = 8;
  t.phys[0].link.bw_bytes_per_s = 25e9;
  t.phys[0].link.num_links = 18;
  t.phys[1].type = FTH_TOPO_TWO_TIER;
  t.phys[1].size = 16;
  t.phys[1].link.bw_bytes_per_s = 50e9;
  t.num_logical = 6;
  t.logical[0] = (fth_logical_dim_def){FTH_TAG_TP_ATTN, 0, 8};
  t.logical[1] = (fth_logical_dim_def){FTH_TAG_TP_MOE, 0, 4};
  t.logical[2] = (fth_logical_dim_def){FTH_TAG_EP_SU, 0, 2};
  t.logical[3] = (fth_logical_dim_def){FTH_TAG_DP_ATTN, 1, 16};
  t.logical[4] = (fth_logical_dim_def){FTH_TAG_EP_SO, 1, 4};
  t.logical[5] = (fth_logical_dim_def){FTH_TAG_DP_MOE, 1, 4};
  return t;
}

static int topology(void) {
  fth_topology_def t = two_level();
  fth_error err;
  FTH_ENSURE(fth_topology_check(&t, &err) == FTH_OK);
  FTH_ENSURE_NEAR(128.0, fth_topology_num_gpus(&t), 0);
  FTH_ENSURE_EQ_INT(8, fth_topology_degree(&t, FTH_TAG_TP_ATTN));
  FTH_ENSURE_EQ_INT(1, fth_topology_degree(&t, FTH_TAG_PP));
  fth_group_level lv[FTH_MAX_PHYS_DIMS];
  /* TP_MoE and EP_SU share NVLink: with sharing each gets 450e9 / 2. */
  FTH_ENSURE_EQ_INT(1, fth_topology_group(&t, FTH_TAG_TP_MOE, 1, lv));
  FTH_ENSURE_EQ_INT(4, lv[0].group_size);
  FTH_ENSURE_EQ_INT(8, lv[0].dim_size);
  FTH_ENSURE_NEAR(225e9, lv[0].bw_bytes_per_s, 1e-12);
  FTH_ENSURE_EQ_INT(1, fth_topology_group(&t, FTH_TAG_TP_MOE, 0, lv));
  FTH_ENSURE_NEAR(450e9, lv[0].bw_bytes_per_s, 1e-12);
  /* TP_Attn is alone in its view on NVLink: full bandwidth. */
  fth_topology_group(&t, FTH_TAG_TP_ATTN, 1, lv);
  FTH_ENSURE_NEAR(450e9, lv[0].bw_bytes_per_s, 1e-12);
  /* A tag split across dimensions: EP over 2 (NVLink) x 4 (IB). */
  t.logical[2].size = 2;
  t.num_logical = 6;
  t.logical[1].size = 4;
  FTH_ENSURE_EQ_INT(1, fth_topology_group(&t, FTH_TAG_EP_SO, 1, lv));
  FTH_ENSURE(lv[0].type == FTH_TOPO_TWO_TIER);
  /* Tiling failures name both products. */
  t = two_level();
  t.logical[3].size = 8; /* DP_Attn 8 on 16 nodes */
  FTH_ENSURE(fth_topology_check(&t, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "logical.dimensions[4]") == 0);
  FTH_ENSURE(strstr(err.msg, "has 16 GPUs but DP_Attn mapped to it = 8 = 8") != NULL);
  t = two_level();
  t.logical[1].size = 2; /* TP_MoE 2 x EP_SU 2 = 4 on an 8-GPU dimension */
  FTH_ENSURE(fth_topology_check(&t, &err) == FTH_EINVAL);
  FTH_ENSURE(strstr(err.msg, "TP_MoE x EP_SU mapped to it = 2 x 2 = 4") != NULL);
  t = two_level();
  t.phys[1].size = 0;
  FTH_ENSURE(fth_topology_check(&t, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "dimensions[2].size") == 0);
  FTH_ENSURE(fth_topo_type_parse("torus") == FTH_TOPO_TORUS);
  FTH_ENSURE(fth_logical_tag_parse("EP_SO") == FTH_TAG_EP_SO);
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
   * tiles: one full wave, the roofline's time exactly. 1536 x 1536 = 144 tiles:
   * two waves, the second 12/132 full, so 2 x 132 tiles' worth of time:
   * 264 x 2 x 128^2 x 4096 FLOP at 692.58 TFLOP/s, 1.8333x the useful work's time. */
  fth_kernel_env t = fth_kernel_env_make(&n, FTH_PREC_BF16, FTH_TIER_XPU);
  t.model = FTH_KERNEL_TILED;
  t.compute_units = 132;
  k = fth_kernel_gemm(&t, 1536, 1408, 4096, 1, 2);
  FTH_ENSURE_NEAR(2.0 * 1536 * 1408 * 4096 / 692.58e12, k.compute_s, 1e-12);
  k = fth_kernel_gemm(&t, 1536, 1536, 4096, 1, 2);
  FTH_ENSURE_NEAR(264.0 * 2 * 128 * 128 * 4096 / 692.58e12, k.compute_s, 1e-12);
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
  FTH_RUN(refusals());
  FTH_RUN(topology());
  FTH_RUN(kernels());
  return 0;
}
