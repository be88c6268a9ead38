/* Per-op selective activation checkpointing (torchtitan's "op" SAC,
 * FTH_RECOMPUTE_OP): which GEMMs it saves, the bytes it keeps per token, the
 * GEMM FLOPs it re-runs, and its cost inside a training step; every expected
 * number derived by hand. */
#include <string.h>

#include "fth_train.h"
#include "test_fixtures.h"
#include "test_macros.h"

/* A small Llama-like block: h 1024, 16 query heads of 64 (a hd = 1024), 4 KV
 * heads (kv hd = 256), SwiGLU f 3072, bf16 activations, flash attention. */
static fth_model_def llama_like(void) {
  fth_model_def m = fth_model_def_default();
  m.d_model = 1024;
  m.n_layers = 2;
  m.num_heads = 16;
  m.num_kv_heads = 4;
  m.ffn_hidden = 3072;
  m.gated_mlp = 1;
  m.vocab_size = 32000;
  m.max_seq_len = 4096;
  return m;
}

/* The mms in forward order and the "mm_count % 2" rule: wq, wk, wv, wo, w1,
 * w3, w2 = counts 1..7; odd counts saved (wq, wv, w1, w2), even recomputed
 * (wk, wo, w3). */
static int order(void) {
  fth_model_def m = llama_like();
  fth_linear mm[FTH_MAX_OP_MMS];
  int saved[FTH_MAX_OP_MMS];
  FTH_ENSURE_EQ_INT(7, fth_model_op_mms(&m, 0, 0u, mm, saved));
  const double in[7] = {1024, 1024, 1024, 1024, 1024, 1024, 3072};
  const double out[7] = {1024, 256, 256, 1024, 3072, 3072, 1024};
  const int keep[7] = {1, 0, 1, 0, 1, 0, 1};
  for (int i = 0; i < 7; i++) {
    FTH_ENSURE_NEAR(in[i], mm[i].in, 0);
    FTH_ENSURE_NEAR(out[i], mm[i].out, 0);
    FTH_ENSURE_EQ_INT(keep[i], saved[i]);
  }
  /* MoE block (8 experts, top 2, one shared expert, gated): wq wk wv wo,
   * router gate (5, saved), routed w1 w3 w2 (6 recomputed, 7 saved, 8
   * recomputed), shared w1 w3 w2 (9 saved, 10 recomputed, 11 saved). */
  m.num_experts = 8;
  m.top_k = 2;
  m.num_shared_experts = 1;
  FTH_ENSURE_EQ_INT(11, fth_model_op_mms(&m, 1, 0u, mm, saved));
  FTH_ENSURE(mm[4].part == FTH_PART_ROUTER && saved[4] == 1);
  FTH_ENSURE(mm[5].part == FTH_PART_EXPERT && saved[5] == 0);
  FTH_ENSURE(mm[7].part == FTH_PART_EXPERT && saved[7] == 0);
  FTH_ENSURE(mm[8].part == FTH_PART_SHARED && saved[8] == 1);
  FTH_ENSURE(mm[10].part == FTH_PART_SHARED && saved[10] == 1);
  /* Recomputed GEMM FLOPs per token: wk 2 x 1024 x 256 = 524,288; wo 2 x
   * 1024^2 = 2,097,152; routed w1 and w2 2 x 1024 x 3072 each, top 2:
   * 4 x 6,291,456 = 25,165,824; shared w3 6,291,456: 34,078,720. */
  FTH_ENSURE_NEAR(34078720.0, fth_model_op_recompute_flops_per_token(&m, 1, 0u), 1e-12);
  return 0;
}

/* Saved bytes per token of one dense block (2-byte activations).
 *
 * No recomputation, flash attention (fth_model_layer_activations):
 *   replicated: QKV input 2h + two norm inputs 4h + MLP input 2h = 8 h = 8,192
 *   sharded: Q, K 2 (1024 + 256) = 2,560; V 2 x 256 = 512; projection input
 *   2 x 1024 = 2,048; log-sum-exp 4 x 16 = 64; SwiGLU 3 x 2 x 3072 = 18,432
 *   total 31,808 B.
 * Per-op, TP 1: block input h, wq out 1024, wv out 256, w1 out 3072, w2 out
 *   1024, SDPA out 1024 = 7,424 elements x 2 = 14,848, + lse 64 = 14,912 B
 *   (47% of no recomputation).
 * Per-op, TP 2 with SP: input h / 2 = 512; column outputs / 2: wq 512, wv
 *   128, w1 1536; w2's row-parallel partial sum, full width 1024; SDPA 512;
 *   the two saved reduce-scatter outputs 2 x 1024 / 2 = 1024: 5,248 x 2 =
 *   10,496, + lse 64 / 2 = 32: 10,528 B. */
static int saved_bytes(void) {
  fth_model_def m = llama_like();
  FTH_ENSURE_NEAR(
      31808.0,
      fth_model_activation_bytes_per_token(&m, 0, FTH_RECOMPUTE_NONE, 1, 1, 0, 4096, 2, 1, 0),
      1e-12);
  FTH_ENSURE_NEAR(
      14912.0,
      fth_model_activation_bytes_per_token(&m, 0, FTH_RECOMPUTE_OP, 1, 1, 0, 4096, 2, 1, 0), 1e-12);
  FTH_ENSURE_NEAR(
      10528.0,
      fth_model_activation_bytes_per_token(&m, 0, FTH_RECOMPUTE_OP, 2, 1, 1, 4096, 2, 1, 0), 1e-12);
  /* Recomputed GEMM FLOPs per token: wk 524,288 + wo 2,097,152 + w3 2 x
   * 1024 x 3072 = 6,291,456: 8,912,896 (of the forward's 24,117,248). */
  FTH_ENSURE_NEAR(8912896.0, fth_model_op_recompute_flops_per_token(&m, 0, 0u), 1e-12);
  return 0;
}

/* The step of tests/c/test_step_recompute.c's recompute(): 1 PFLOP/s bf16,
 * vector 125 TFLOP/s, HBM 10 TB/s; TP 2 over 100 GB/s, latency 0; GPT-like
 * h 1024, 16 heads of 64, plain MLP f 4096, 2 layers, V 32000; seq 1024,
 * 2 micro-batches of 1; comp_comm 0, comp_mem 1, comm_mem 0; flash attention.
 * The plain MLP's mms: wq wk wv wo w1 w2 = counts 1..6: wk, wo, w2 recomputed. */

static int step(void) {
  fth_node_def n = tfx_pflops_node();
  fth_topology_def t = tfx_tp_only(2, 100e9);
  fth_model_def m = fth_model_def_default();
  m.d_model = 1024;
  m.n_layers = 2;
  m.num_heads = 16;
  m.ffn_hidden = 4096;
  m.vocab_size = 32000;
  m.max_seq_len = 1024;
  fth_train_def w = tfx_serial_work(2, 1024);
  fth_train_result none, op;
  fth_train_plan plan;
  fth_error err;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &none);
  w.recompute = FTH_RECOMPUTE_OP;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &op);

  /* Re-run per block on one GPU (T = 1024 tokens):
   *   GEMMs, compute-bound: wk (n 512) 2 T 1024 x 512, wo (k 512) 2 T 512 x
   *   1024, w2 (k 2048) 2 T 2048 x 1024: 2 T 3,145,728 = 6,442,450,944 FLOP
   *   = 6.442450944 us (the largest, w2, moves 10,485,760 B = 1.05 us);
   *   the forward's element-wise kernels, 2.9360128 us (test_step_recompute);
   *   the two TP all-reduces of [T, h] (no SP: nothing saved), 20.97152 us
   *   each: 51.321503744 us; x 2 blocks x 2 micro-batches = 205.286014976 us. */
  FTH_ENSURE_NEAR(205.286014976e-6, op.recompute_s, 1e-9);
  FTH_ENSURE_NEAR(none.step_time_s + 205.286014976e-6, op.step_time_s, 1e-9);
  FTH_ENSURE_NEAR(none.fwd_s, op.fwd_s, 1e-12);
  /* TP calls: 2 per block forward, 2 backward, 2 re-run: 6 x 2 x 2 = 24. */
  FTH_ENSURE_NEAR(24.0, op.comm[FTH_COMM_TP].calls_per_step, 0);
  /* HFU: the recomputed mms per token per layer, 2 (1024 x 1024 + 1024 x
   * 1024 + 4096 x 1024) = 12,582,912, x 2 layers x 2048 tokens =
   * 51,539,607,552 on top of the 737,685,798,912 model FLOPs. */
  FTH_ENSURE_NEAR(737685798912.0, op.model_flops_per_step, 1e-12);
  FTH_ENSURE_NEAR(737685798912.0 + 51539607552.0, op.hardware_flops_per_step, 1e-12);
  FTH_ENSURE_NEAR((737685798912.0 + 51539607552.0) / 737685798912.0, op.hfu / op.mfu, 1e-12);
  /* Saved per token per layer: input 1024 (no SP), wq 512, wv 512, w1 2048,
   * SDPA 512 = 4,608 x 2 B + lse 4 x 8 = 9,248 B; x 1024 tokens x 2 layers
   * x 1 micro-batch in flight = 18,939,904 B. */
  FTH_ENSURE_NEAR(18939904.0, op.mem.bytes[FTH_MEM_ACTIVATIONS], 1e-12);
  FTH_ENSURE(op.mem.bytes[FTH_MEM_ACTIVATIONS] < 0.5 * none.mem.bytes[FTH_MEM_ACTIVATIONS]);

  /* A named policy keeping every projection and the context (MaxText's
   * minimal_with_context): no mm re-runs, only the element-wise kernels and the two
   * all-reduces, 2.9360128 + 2 x 20.97152 = 44.8790528 us a block, x 4 = 179.5162112 us;
   * no recomputed FLOPs. Saved per token per layer (TP 2): input 1024, wq wk wv 3 x 512,
   * wo's partial sum 1024, w1 2048, w2's 1024, SDPA 512 = 7,168 x 2 + lse 32 = 14,368 B,
   * x 2,048 = 29,425,664 B. Without the context the attention forward re-runs: the
   * forward's attention kernels once more a micro-batch, and 6,656 x 2 = 13,312 B, no
   * lse: 27,262,976 B. */
  fth_train_result all, noctx;
  const unsigned every = (1u << FTH_OP_KEEP_NAMES) - 1u;
  w.op_keep = every;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &all);
  FTH_ENSURE_NEAR(179.5162112e-6, all.recompute_s, 1e-9);
  FTH_ENSURE_NEAR(all.model_flops_per_step, all.hardware_flops_per_step, 1e-12);
  FTH_ENSURE_NEAR(29425664.0, all.mem.bytes[FTH_MEM_ACTIVATIONS], 1e-12);
  w.op_keep = every & ~FTH_OP_KEEP_CONTEXT;
  FTH_ENSURE(fth_train_rework(&plan, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &noctx);
  FTH_ENSURE(all.fwd_class_s[FTH_KERNEL_ATTENTION] > 0);
  FTH_ENSURE_NEAR(all.recompute_s + 2.0 * all.fwd_class_s[FTH_KERNEL_ATTENTION], noctx.recompute_s,
                  1e-9);
  FTH_ENSURE_NEAR(27262976.0, noctx.mem.bytes[FTH_MEM_ACTIVATIONS], 1e-12);
  /* A policy name needs recompute op. */
  w.recompute = FTH_RECOMPUTE_SELECTIVE;
  FTH_ENSURE(fth_train_rework(&plan, &w, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "workload.recompute_saved") == 0);
  return 0;
}

/* Named policies on the Llama-like block (MaxText's remat policies, TP 1):
 *   save_dot_except_mlpwi keeps wq, wk, wv, wo, w2: input 1024 + 1024 + 256 + 256 +
 *     1024 + 1024 = 4,608 x 2 = 9,216 B (no context, no lse); re-runs w1 and w3,
 *     2 x 2 x 1024 x 3072 = 12,582,912 FLOP a token.
 *   save_qkv_proj keeps wq, wk, wv: 1024 + 1536 = 2,560 x 2 = 5,120 B; re-runs wo
 *     2,097,152 + w1, w3, w2 3 x 6,291,456: 20,971,520.
 *   An MoE block never keeps the router: it re-runs under any named policy. */
static int named(void) {
  fth_model_def m = llama_like();
  const unsigned qkv = FTH_OP_KEEP_QUERY | FTH_OP_KEEP_KEY | FTH_OP_KEEP_VALUE;
  const unsigned except_wi = qkv | FTH_OP_KEEP_OUT | FTH_OP_KEEP_MLPWO;
  FTH_ENSURE_NEAR(9216.0, fth_model_op_activation_bytes_per_token(&m, 0, except_wi, 1, 1, 0, 2, 0), 1e-12);
  FTH_ENSURE_NEAR(12582912.0, fth_model_op_recompute_flops_per_token(&m, 0, except_wi), 1e-12);
  FTH_ENSURE_NEAR(5120.0, fth_model_op_activation_bytes_per_token(&m, 0, qkv, 1, 1, 0, 2, 0), 1e-12);
  FTH_ENSURE_NEAR(20971520.0, fth_model_op_recompute_flops_per_token(&m, 0, qkv), 1e-12);
  /* torchtitan's policy through the new entry point: the 14,912 B above */
  FTH_ENSURE_NEAR(14912.0, fth_model_op_activation_bytes_per_token(&m, 0, 0u, 1, 1, 0, 2, 0), 1e-12);
  m.num_experts = 8;
  m.top_k = 2;
  fth_linear mm[FTH_MAX_OP_MMS];
  int saved[FTH_MAX_OP_MMS];
  int k = fth_model_op_mms(&m, 1, (1u << FTH_OP_KEEP_NAMES) - 1u, mm, saved);
  for (int i = 0; i < k; i++) FTH_ENSURE(saved[i] == (mm[i].part != FTH_PART_ROUTER));
  FTH_ENSURE(strcmp(fth_op_keep_name(FTH_OP_KEEP_MLPWO), "mlpwo") == 0);
  FTH_ENSURE(fth_op_keep_parse("context") == FTH_OP_KEEP_CONTEXT && fth_op_keep_parse("mlp") == 0u);
  return 0;
}

int op_sac_test(void) {
  FTH_RUN(order());
  FTH_RUN(saved_bytes());
  FTH_RUN(step());
  FTH_RUN(named());
  return 0;
}
