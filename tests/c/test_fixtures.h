/* test_fixtures.h: inputs several hand-derived tests share, built one way.
 * Header-only (static inline): each test file takes what it needs. */
#ifndef TEST_FIXTURES_H
#define TEST_FIXTURES_H

#include "fth_hardware.h"
#include "fth_model.h"
#include "fth_topology.h"
#include "fth_train.h"
#include "fth_workload.h"

#include <stdio.h>

/* One GPU at `flops` BF16 (efficiency 1; vector rate the default eighth) with `bytes` of
 * memory at `bw` bytes/s (efficiency 1). */
static inline fth_node_def tfx_node_with(double flops, double bw, double bytes) {
  fth_node_def n = fth_node_def_default();
  n.compute.flops_per_s[FTH_PREC_BF16] = flops;
  n.compute.efficiency = 1.0;
  n.tier[FTH_TIER_XPU].bw_per_stack_bytes_per_s = bw;
  n.tier[FTH_TIER_XPU].size_per_stack_bytes = bytes;
  n.tier[FTH_TIER_XPU].num_stacks = 1;
  n.tier[FTH_TIER_XPU].efficiency = 1.0;
  n.has_tier[FTH_TIER_XPU] = 1;
  return n;
}

/* One GPU at 100 TFLOP/s BF16 with 80 GB of memory at 1 TB/s. */
static inline fth_node_def tfx_node(void) {
  return tfx_node_with(100e12, 1e12, 80e9);
}

/* One GPU at 1 PFLOP/s BF16 (vector 125 TFLOP/s) with 1 TB of memory at 10 TB/s: the
 * step tests' (recompute, op SAC, parallel, MoE, squared ReLU). */
static inline fth_node_def tfx_pflops_node(void) {
  return tfx_node_with(1e15, 1e13, 1e12);
}

/* tfx_node with an FP8 rate twice the BF16 one (200 TFLOP/s): the recipe tests'. */
static inline fth_node_def tfx_fp8_node(void) {
  fth_node_def n = tfx_node();
  n.compute.flops_per_s[FTH_PREC_FP8] = 200e12;
  return n;
}

/* One block: h 1024, 16 heads, plain MLP 4096, vocab 1024, sequences up to 1024 (the
 * recipe, kernel-class and LoRA tests derive their numbers from it). */
static inline fth_model_def tfx_block_model(void) {
  fth_model_def m = fth_model_def_default();
  m.d_model = 1024;
  m.n_layers = 1;
  m.num_heads = 16;
  m.vocab_size = 1024;
  m.max_seq_len = 1024;
  return m;
}

/* Four blocks of h 1024, 16 heads, vocab 32000, up to 4096 tokens (inference tests). */
static inline fth_model_def tfx_infer_model(void) {
  fth_model_def m = fth_model_def_default();
  m.d_model = 1024;
  m.n_layers = 4;
  m.num_heads = 16;
  m.vocab_size = 32000;
  m.max_seq_len = 4096;
  return m;
}

/* One GPU, its one dimension at 100 GB/s (no logical dimensions: all of it DP 1). */
static inline fth_topology_def tfx_one_gpu(void) {
  fth_topology_def t = fth_topology_def_default();
  t.num_phys = 1;
  t.phys[0].size = 1;
  t.phys[0].link.bw_bytes_per_s = 1e11;
  return t;
}

/* One switched dimension of `size` GPUs at `bw` bytes/s and no latency, all
 * of it TP_Attn. */
static inline fth_topology_def tfx_tp_only(int size, double bw) {
  fth_topology_def t = fth_topology_def_default();
  t.num_phys = 1;
  t.phys[0].type = FTH_TOPO_SWITCHED;
  t.phys[0].size = size;
  t.phys[0].link.bw_bytes_per_s = bw;
  t.phys[0].link.latency_s = 0.0;
  t.num_logical = 1;
  t.logical[0] = (fth_logical_dim_def){FTH_TAG_TP_ATTN, 0, size};
  return t;
}

/* The MoE system of test_moe_step.c and test_infer_comm.c: 16 GPUs, 4 per switched pod
 * at 100 GB/s, 4 pods at 10 GB/s, latency 0; TP_Attn 4 in the pod, DP_Attn 4 across;
 * TP_MoE 2 and EP_SU 2 in the pod, EP_SO 2 and DP_MoE 2 across, each pair splitting its
 * fabric evenly (share_by_traffic off: the hand derivations' 50 and 5 GB/s). */
static inline fth_topology_def tfx_moe_pods(void) {
  fth_topology_def t = fth_topology_def_default();
  t.share_by_traffic = 0;
  t.num_phys = 2;
  for (int i = 0; i < 2; i++) {
    t.phys[i].type = FTH_TOPO_SWITCHED;
    t.phys[i].size = 4;
    t.phys[i].link.latency_s = 0.0;
  }
  t.phys[0].link.bw_bytes_per_s = 100e9;
  t.phys[1].link.bw_bytes_per_s = 10e9;
  t.num_logical = 6;
  t.logical[0] = (fth_logical_dim_def){FTH_TAG_TP_ATTN, 0, 4};
  t.logical[1] = (fth_logical_dim_def){FTH_TAG_DP_ATTN, 1, 4};
  t.logical[2] = (fth_logical_dim_def){FTH_TAG_TP_MOE, 0, 2};
  t.logical[3] = (fth_logical_dim_def){FTH_TAG_EP_SU, 0, 2};
  t.logical[4] = (fth_logical_dim_def){FTH_TAG_EP_SO, 1, 2};
  t.logical[5] = (fth_logical_dim_def){FTH_TAG_DP_MOE, 1, 2};
  return t;
}

/* Their model: h 1024, 1 MoE layer, 16 heads, SwiGLU, 8 experts of 512 (written out: no
 * fallback involved), top-2, one shared expert, V 32000, up to `max_seq` tokens. */
static inline fth_model_def tfx_moe_model(int max_seq) {
  fth_model_def m = fth_model_def_default();
  m.d_model = 1024;
  m.n_layers = 1;
  m.num_heads = 16;
  m.gated_mlp = 1;
  m.ffn_hidden = 512;
  m.vocab_size = 32000;
  m.max_seq_len = max_seq;
  m.num_experts = 8;
  m.top_k = 2;
  m.num_shared_experts = 1;
  m.expert_ffn_hidden = 512;
  return m;
}

/* The small GQA model of the element-wise tests (test_eager_elementwise.c,
 * test_squared_relu.c): h 1024, 16 query heads of 64, 4 KV heads, 2 layers, V 32000, up to
 * 1,024 tokens; an MLP of `ffn`, gated (SwiGLU) or not. */
static inline fth_model_def tfx_gqa_model(int ffn, int gated) {
  fth_model_def m = fth_model_def_default();
  m.d_model = 1024;
  m.n_layers = 2;
  m.num_heads = 16;
  m.num_kv_heads = 4;
  m.ffn_hidden = ffn;
  m.gated_mlp = gated;
  m.vocab_size = 32000;
  m.max_seq_len = 1024;
  return m;
}

/* Compile and evaluate one training step into `r`; 1 (after saying why) if refused. */
static inline int tfx_train_run(const fth_node_def *n, const fth_topology_def *t,
                                const fth_model_def *m, const fth_train_def *w,
                                fth_train_result *r) {
  fth_train_plan plan;
  fth_error err;
  if (fth_train_compile(&plan, n, t, m, w, &err) != FTH_OK) {
    fprintf(stderr, "compile: %s: %s\n", err.path, err.msg);
    return 1;
  }
  fth_train_evaluate(&plan, r);
  return 0;
}

/* A training step of `global_batch` sequences of `seq` tokens, micro-batch 1,
 * with nothing overlapped but kernels' compute and memory (the roofline max):
 * every term adds up as the hand derivations write it. */
static inline fth_train_def tfx_serial_work(double global_batch, double seq) {
  fth_train_def w = fth_train_def_default();
  w.global_batch = global_batch;
  w.micro_batch = 1;
  w.seq_len = seq;
  w.comp_comm_eff = 0.0;
  w.comp_mem_eff = 1.0;
  w.comm_mem_eff = 0.0;
  return w;
}

#endif
