/* TP and EP communication of MoE inference, prefill and decode, derived by hand.
 *
 * The system and model of test_moe_step.c (test_fixtures.h: tfx_moe_pods, tfx_moe_model):
 * 16 GPUs, 4 per switched pod at 100 GB/s, 4 pods at 10 GB/s, latency 0; TP_Attn 4 in the
 * pod, DP_Attn 4 across pods; TP_MoE 2 and EP_SU 2 in the pod (50 GB/s each), EP_SO 2 and
 * DP_MoE 2 across (5 GB/s each). h 1024, 1 MoE layer, 16 heads, SwiGLU, 8
 * experts of 512, top-2, one shared expert, V 32000. bf16, comp_comm 0: every
 * collective is exposed. */
#include "fth_infer.h"
#include "test_fixtures.h"
#include "test_macros.h"

static int evaluate(const fth_infer_def *d, fth_pass pass, fth_infer_result *r) {
  fth_node_def n = tfx_pflops_node();
  fth_topology_def t = tfx_moe_pods();
  fth_model_def m = tfx_moe_model(4096);
  fth_infer_plan p;
  fth_error err;
  if (fth_infer_compile(&p, &n, &t, &m, d, pass, &err) != FTH_OK) {
    fprintf(stderr, "compile: %s: %s\n", err.path, err.msg);
    return 1;
  }
  fth_infer_evaluate(&p, r);
  return 0;
}

/* Prefill: 4 requests (one per DP rank) of 1024 prompt tokens. */
static int prefill(void) {
  fth_infer_def d = fth_infer_def_default();
  d.global_batch = 4;
  d.micro_batch = 1;
  d.prompt_len = 1024;
  d.comp_comm_eff = 0.0;
  fth_infer_result r;
  FTH_RUN(evaluate(&d, FTH_PASS_PREFILL, &r));
  /* TP: the [1024, h] bf16 activation (2,097,152 B) all-reduced over 4 GPUs
   * at 100 GB/s, 2 (3/4) M / B = 31.45728 us, after attention and after the
   * shared expert: 62.91456 us per pass through the one block. */
  FTH_ENSURE_NEAR(62.91456e-6, r.pass.comm_s[FTH_COMM_TP], 1e-9);
  FTH_ENSURE_NEAR(62.91456e-6, r.comm_exposed_s[FTH_COMM_TP], 1e-9);
  /* EP: each TP rank dispatches a quarter of the 1024 tokens x top-2 = 512
   * pairs x h x 2 B = 1,048,576 B. Prefill dispatches with DeepEP's normal
   * kernels, once per pod a token reaches: top-2 of 8 experts, 4 per pod, a
   * pod missed with probability C(4,2)/C(8,2) = 6/28, 11/7 pods of 2 copies,
   * so 11/14 of the bytes (823,881.14 B) cross; half of that goes to the other
   * pod over the 5 GB/s scale-out share, 411,940.57 B = 82.388114 us (the
   * one-shot exchange reaches this bound, see test_moe_step.c), above the
   * scale-up part's 10.49 us; dispatch + combine 164.776229 us. */
  FTH_ENSURE_NEAR(2.0 * 1048576.0 * 11.0 / 14.0 / 2.0 / 5e9, r.pass.comm_s[FTH_COMM_EP], 1e-9);
  FTH_ENSURE_NEAR(164.776229e-6, r.comm_exposed_s[FTH_COMM_EP], 1e-6);
  /* TP_MoE: the group's 2 x 512 received pairs x 2 KiB = 2,097,152 B gathered
   * (all-gather output) and reduce-scattered, (1/2) M / 50 GB/s = 20.97152 us
   * each: 41.94304 us. */
  FTH_ENSURE_NEAR(41.94304e-6, r.pass.comm_s[FTH_COMM_TP_MOE], 1e-9);
  /* No CP, no PP: nothing else moves in the block. */
  FTH_ENSURE(r.pass.comm_s[FTH_COMM_CP] == 0.0);
  FTH_ENSURE(r.pp_s == 0.0);
  return 0;
}

/* Decode: 64 requests, micro-batches of 16 per DP rank (64 / (16 x 4) = 1
 * micro-batch), 1023 tokens cached, one generated token each. */
static int decode(void) {
  fth_infer_def d = fth_infer_def_default();
  d.global_batch = 64;
  d.micro_batch = 16;
  d.context_len = 1023;
  d.gen_tokens = 1;
  d.comp_comm_eff = 0.0;
  fth_infer_result r;
  FTH_RUN(evaluate(&d, FTH_PASS_DECODE, &r));
  /* TP: 16 new tokens x h x 2 B = 32,768 B, 2 (3/4) M / 100 GB/s = 0.49152 us,
   * twice per block: 0.98304 us. */
  FTH_ENSURE_NEAR(0.98304e-6, r.pass.comm_s[FTH_COMM_TP], 1e-9);
  FTH_ENSURE_NEAR(0.98304e-6, r.comm_exposed_s[FTH_COMM_TP], 1e-9);
  /* EP: 16 x top-2 / TP 4 = 8 pairs x 2,048 B = 16,384 B per rank; 8,192 B
   * cross the 5 GB/s scale-out share: 1.6384 us, twice: 3.2768 us. */
  FTH_ENSURE_NEAR(3.2768e-6, r.pass.comm_s[FTH_COMM_EP], 1e-9);
  FTH_ENSURE_NEAR(3.2768e-6, r.comm_exposed_s[FTH_COMM_EP], 1e-9);
  /* TP_MoE: 2 x 8 pairs x 2 KiB = 32,768 B, (1/2) M / 50 GB/s = 0.32768 us
   * for the gather and the same for the reduce-scatter. */
  FTH_ENSURE_NEAR(0.65536e-6, r.pass.comm_s[FTH_COMM_TP_MOE], 1e-9);
  /* One decode step with one micro-batch and no pipeline: the token time is
   * one stage pass. */
  FTH_ENSURE_NEAR(r.stage_s, r.tpot_s, 1e-12);
  return 0;
}

/* The decode step of decode() with comp_comm_efficiency 1: by default the
 * collectives still block (a layer's next GEMM waits for its all-reduce, the
 * experts for the dispatch), so the step is the kernels plus all of TP 0.98304,
 * EP 3.2768 and TP_MoE 0.65536 us = 4.9152 us; with two-batch overlap they hide
 * under the kernels, kernels + comm - 1 x min(kernels, comm). */
static int decode_overlap(void) {
  fth_infer_def d = fth_infer_def_default();
  d.global_batch = 64;
  d.micro_batch = 16;
  d.context_len = 1023;
  d.gen_tokens = 1;
  d.comp_comm_eff = 1.0;
  fth_infer_result r;
  FTH_RUN(evaluate(&d, FTH_PASS_DECODE, &r));
  const double comm = 4.9152e-6, k = r.pass.kernel_s;
  FTH_ENSURE(k > 0.0);
  FTH_ENSURE_NEAR(k + comm, r.stage_s, 1e-12);
  FTH_ENSURE_NEAR(3.2768e-6, r.comm_exposed_s[FTH_COMM_EP], 1e-12);
  d.batch_overlap = 1;
  FTH_RUN(evaluate(&d, FTH_PASS_DECODE, &r));
  FTH_ENSURE_NEAR(k + comm - (k < comm ? k : comm), r.stage_s, 1e-12);
  FTH_ENSURE(r.stage_s < k + comm);
  return 0;
}

int infer_comm_test(void) {
  FTH_RUN(prefill());
  FTH_RUN(decode());
  FTH_RUN(decode_overlap());
  return 0;
}
