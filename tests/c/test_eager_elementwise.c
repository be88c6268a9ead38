/* Eager PyTorch element-wise kernels (eager_elementwise, torchtitan without
 * torch.compile) against the fused counts, in a training step; every
 * expected number derived by hand.
 *
 * One GPU: 1 PFLOP/s bf16 at efficiency 1, vector rate bf16 / 8 = 125
 * TFLOP/s, HBM 10 TB/s. Model: h 1024, 16 query heads of 64, 4 KV heads,
 * SwiGLU f 3072, 2 layers, V 32000. Work: seq 1024, one micro-batch of 1
 * (T = 1024 tokens), bf16 (w = 2), comp_mem 1 (a kernel takes the longer of
 * its compute and memory times), nothing else overlapped. Every element-wise
 * kernel below is memory-bound in both modes (the most intense, the backward
 * norm/residual pass, does 8 FLOP per 4 B: 0.34 us of compute against 2.1 us
 * of memory fused), so the modes differ by bytes / 10 TB/s. */
#include "fth_train.h"
#include "test_fixtures.h"
#include "test_macros.h"

static int eval(int eager, fth_recompute rc, fth_train_result *r) {
  fth_node_def n = tfx_pflops_node();
  fth_topology_def t = tfx_tp_only(1, 100e9);
  fth_model_def m = tfx_gqa_model(3072, 1);
  fth_train_def w = tfx_serial_work(1, 1024);
  w.eager_elementwise = eager;
  w.recompute = rc;
  return tfx_train_run(&n, &t, &m, &w, r);
}

/* Per block, forward, eager minus fused:
 *   norm + residual, each half: T h 5 = 5,242,880 elements; fused 2 B each,
 *   eager 2 + (2 x 2 + 28) / 5 = 8.4 B (the norm's 4 w + 28 against 2 w,
 *   spread over the half's 5 moves): +33,554,432 B = 3.3554432 us, x 2
 *   halves = 6.7108864 us;
 *   RoPE (eager only) on T (16 + 4) 64 = 1,310,720 elements of Q and K at
 *   2 x 2 + 16 = 20 B: 26,214,400 B = 2.62144 us;
 *   SwiGLU on T f = 3,145,728 elements: 5 w = 10 B against 3 w = 6 B:
 *   +12,582,912 B = 1.2582912 us;
 *   10.5906176 us, x 2 blocks = 21.1812352 us.
 * Backward moves twice the forward's bytes: norm halves 2 x 5,242,880 x
 *   (16.8 - 4) = 134,217,728 B = 13.4217728 us; RoPE 52,428,800 B = 5.24288
 *   us; SwiGLU 25,165,824 B = 2.5165824 us: 21.1812352 us per block, twice
 *   the forward's, x 2 = 42.3624704 us. The step: 63.5437056 us more. */
static int step(void) {
  fth_train_result fused, eager;
  FTH_RUN(eval(0, FTH_RECOMPUTE_NONE, &fused));
  FTH_RUN(eval(1, FTH_RECOMPUTE_NONE, &eager));
  FTH_ENSURE_NEAR(fused.fwd_s + 21.1812352e-6, eager.fwd_s, 1e-9);
  FTH_ENSURE_NEAR(fused.bwd_s + 42.3624704e-6, eager.bwd_s, 1e-9);
  FTH_ENSURE_NEAR(fused.step_time_s + 63.5437056e-6, eager.step_time_s, 1e-9);
  /* Model FLOPs do not change; the saved activations neither. */
  FTH_ENSURE_NEAR(fused.model_flops_per_step, eager.model_flops_per_step, 1e-12);
  FTH_ENSURE_NEAR(fused.mem.bytes[FTH_MEM_ACTIVATIONS], eager.mem.bytes[FTH_MEM_ACTIVATIONS],
                  1e-12);
  /* Per-op recomputation re-runs the forward's element-wise kernels: the
   * eager re-run costs the forward's 21.1812352 us more. */
  FTH_RUN(eval(0, FTH_RECOMPUTE_OP, &fused));
  FTH_RUN(eval(1, FTH_RECOMPUTE_OP, &eager));
  FTH_ENSURE_NEAR(fused.recompute_s + 21.1812352e-6, eager.recompute_s, 1e-9);
  return 0;
}

/* The flag is 0 or 1. */
static int check(void) {
  fth_train_def w = fth_train_def_default();
  fth_error err;
  FTH_ENSURE(w.eager_elementwise == 0);
  w.eager_elementwise = 2;
  FTH_ENSURE(fth_train_def_check(&w, &err) == FTH_EINVAL);
  return 0;
}

int eager_elementwise_test(void) {
  FTH_RUN(step());
  FTH_RUN(check());
  return 0;
}
