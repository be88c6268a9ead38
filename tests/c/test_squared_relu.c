/* Squared ReLU (Nemotron-4, Nemotron-H) run as Megatron-Core and HF run it, relu then
 * pow: two element-wise kernels forward and two backward, against the one fused activation
 * of a plain MLP; every expected number derived by hand.
 *
 * One GPU: 1 PFLOP/s bf16 at efficiency 1, vector rate bf16 / 8 = 125 TFLOP/s, HBM 10 TB/s.
 * Model: h 1024, 16 query heads of 64, 4 KV heads, plain MLP f 4096, 2 layers, V 32000.
 * Work: seq 1024, one micro-batch of 1 (T = 1024 tokens), bf16 (w = 2), comp_mem 1,
 * nothing else overlapped. The activation sees T f = 4,194,304 elements; each of its
 * kernels is memory-bound (at most 8 FLOP per 4 B: 0.27 us of compute against 1.68 us of
 * memory), so the two runs differ by bytes / 10 TB/s. */
#include "fth_train.h"
#include "test_fixtures.h"
#include "test_macros.h"

static int eval(int squared, fth_train_result *r) {
  fth_node_def n = tfx_pflops_node();
  fth_topology_def t = tfx_tp_only(1, 100e9);
  fth_model_def m = tfx_gqa_model(4096, 0);
  m.squared_relu = squared;
  fth_train_def w = tfx_serial_work(1, 1024);
  return tfx_train_run(&n, &t, &m, &w, r);
}

/* Per block, forward: fused, read and write f: 4,194,304 x 2 x 2 B = 16,777,216 B =
 *   1.6777216 us; squared, relu and pow each 2 moves: 33,554,432 B = 3.3554432 us:
 *   +1.6777216 us, x 2 blocks = 3.3554432 us.
 * Backward: fused 2 x 2 moves: 33,554,432 B = 3.3554432 us; squared, pow's and relu's
 *   backward each 3 moves: 2 x 4,194,304 x 3 x 2 B = 50,331,648 B = 5.0331648 us:
 *   +1.6777216 us, x 2 = 3.3554432 us. The step: 6.7108864 us more. */
static int step(void) {
  fth_train_result plain, sq;
  FTH_RUN(eval(0, &plain));
  FTH_RUN(eval(1, &sq));
  FTH_ENSURE_NEAR(plain.fwd_s + 3.3554432e-6, sq.fwd_s, 1e-9);
  FTH_ENSURE_NEAR(plain.bwd_s + 3.3554432e-6, sq.bwd_s, 1e-9);
  FTH_ENSURE_NEAR(plain.step_time_s + 6.7108864e-6, sq.step_time_s, 1e-9);
  /* Model FLOPs do not change; the saved activations neither (relu's output is the one
   * tensor both backward kernels read, as a fused activation keeps its input). */
  FTH_ENSURE_NEAR(plain.model_flops_per_step, sq.model_flops_per_step, 1e-12);
  FTH_ENSURE_NEAR(plain.mem.bytes[FTH_MEM_ACTIVATIONS], sq.mem.bytes[FTH_MEM_ACTIVATIONS], 1e-12);
  return 0;
}

int squared_relu_test(void) {
  FTH_RUN(step());
  return 0;
}
