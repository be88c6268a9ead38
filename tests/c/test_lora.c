/* LoRA fine-tuning (Hu et al. 2021) in the training step, derived by hand.
 *
 * One GPU, one block: h 1024, 16 heads, plain MLP 4096, vocab 1024, seq 1024, one
 * sequence (the recipe test's model). Its linears: QKV 1024 -> 3072, O 1024 -> 1024,
 * fc1 1024 -> 4096, fc2 4096 -> 1024. Rank-16 adapters on all four:
 *   16 x ((1024 + 3072) + (1024 + 1024) + (1024 + 4096) + (4096 + 1024)) = 262,144
 * parameters, 2 x 262,144 = 524,288 forward FLOPs per token.
 * Model FLOPs: the frozen linears and LM head lose their weight gradients, forward
 * 2 x 12 h^2 = 25,165,824 and 2 h V = 2,097,152 per token; the adapters gain
 * 3 x 524,288 = 1,572,864: per step 1024 x (27,262,976 - 1,572,864) = 26,306,674,688
 * fewer than full training.
 * Memory: gradients 262,144 x 4 B = 1,048,576; optimizer 262,144 x (4 master + 2 x 4
 * moments) = 3,145,728; weights the base's plus 262,144 x 2 B. */
#include "fth_train.h"
#include "test_fixtures.h"
#include "test_macros.h"

#include <string.h>

/* What LoRA saves for backward and stores, the same block (GeLU MLP with dropout
 * masks, flash attention, 2-byte activations; Korthikanti et al. 2022 per token):
 *   replicated  QKV input 2h + mask h, two norm inputs 4h, MLP input 2h + mask h = 10 h
 *   sharded     Q, K 2 x 32 x 64 = 4096, V 2048, O 2048, log-sum-exp 4 x 16 = 64,
 *               GeLU input and output 2 x 2 x 4096 = 16,384
 * = 10,240 + 24,640 = 34,880 B per token. A frozen linear's backward (dx = dy W) reads no
 * input, so LoRA drops the inputs kept only for a frozen weight's gradient:
 *   attention targets: fc1's input (h) and fc2's (f = 4h): 2 x 5,120 = 10,240 B less;
 *   mlp targets: QKV's input (h): 2,048 B less; all-linear: every input feeds an adapter.
 * The GeLU's input at one byte (activation_input_fp8): f x 1 B = 4,096 B less. */
static int lora_memory(void) {
  fth_node_def n = tfx_node();
  fth_topology_def t = tfx_tp_only(1, 100e9);
  fth_model_def m = tfx_block_model();
  fth_train_def w = tfx_serial_work(1, 1024);
  fth_train_plan p;
  fth_error err;
  fth_train_result r;
  const double tokens = 1024.0;
  FTH_ENSURE(fth_train_compile(&p, &n, &t, &m, &w, &err) == FTH_OK);
  FTH_ENSURE_NEAR(34880.0, p.act_bytes_per_token[0], 1e-12);
  w.lora_rank = 16;
  const struct {
    fth_lora_targets targets;
    double per_token;
  } rows[] = {{FTH_LORA_ALL_LINEAR, 34880.0}, {FTH_LORA_ATTENTION, 24640.0}, {FTH_LORA_MLP, 32832.0}};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    w.lora_targets = rows[i].targets;
    FTH_ENSURE(fth_train_compile(&p, &n, &t, &m, &w, &err) == FTH_OK);
    fth_train_evaluate(&p, &r);
    FTH_ENSURE_NEAR(rows[i].per_token * tokens, r.mem.bytes[FTH_MEM_ACTIVATIONS], 1e-12);
  }
  /* Adapters on the attention only: 16 x ((1024 + 3072) + (1024 + 1024)) = 98,304. */
  w.lora_targets = FTH_LORA_ATTENTION;
  FTH_ENSURE(fth_train_compile(&p, &n, &t, &m, &w, &err) == FTH_OK);
  FTH_ENSURE(p.stage_lora_params == 98304.0);
  FTH_ENSURE(p.lora_flops_per_token == 2.0 * 98304.0);
  w.activation_input_fp8 = 1;
  FTH_ENSURE(fth_train_compile(&p, &n, &t, &m, &w, &err) == FTH_OK);
  FTH_ENSURE_NEAR(24640.0 - 4096.0, p.act_bytes_per_token[0], 1e-12);
  /* Under an FP8 recipe (two quantised copies, 1 B each, of every weight) full training
   * holds the 2-byte weights and the copies, 4 B per parameter; the frozen base is held
   * quantised alone, in one layout (its per-tensor scale lets the backward transpose it):
   * 1 B. */
  fth_train_result full;
  w = tfx_serial_work(1, 1024);
  w.recipe = FTH_RECIPE_FP8_DELAYED;
  FTH_ENSURE(fth_train_compile(&p, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&p, &full);
  FTH_ENSURE_NEAR(4.0 * full.params_per_gpu, full.mem.bytes[FTH_MEM_WEIGHTS], 1e-12);
  w.lora_rank = 16;
  FTH_ENSURE(fth_train_compile(&p, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&p, &r);
  FTH_ENSURE_NEAR(1.0 * r.params_per_gpu, r.mem.bytes[FTH_MEM_WEIGHTS], 1e-12);
  w.lora_targets = FTH_LORA_TARGETS_COUNT;
  FTH_ENSURE(fth_train_compile(&p, &n, &t, &m, &w, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "workload.lora_targets") == 0);
  return 0;
}

/* Under an FP8 recipe (tfx_fp8_node: 200 TFLOP/s FP8, 100 BF16, 1 TB/s). The weights
 * are cast once a step in full training, 12 h^2 = 12,582,912 elements at 4 B over 1 TB/s
 * = 50.331648 us of the forward (test_recipe.c); a frozen base held quantised is never
 * cast, so LoRA's forward is full training's less that, plus its adapters (90.963968 us,
 * lora_test). FP8 attention: the causal core, 2 x 1024 x 512.5 x (64 + 64) x 16 heads =
 * 2,149,580,800 FLOP, compute-bound at either rate (Q, K, V, O: 8.4 MB = 8.4 us), runs at
 * 200 TFLOP/s: 10.747904 us faster forward and 2.5 x that backward; it keeps Q, K and V
 * at one byte: (16 + 16) x 64 + 16 x 64 = 3,072 B per token less. The base is held in one
 * FP8 layout either way; where the GEMMs take only one layout, each backward transposes
 * the four weights for the data gradients, 12 h^2 = 12,582,912 elements read and written
 * at 1 B = 25.165824 MB at 1 TB/s = 25.165824 us, and holds one transposed weight at a
 * time, the largest (fc1, 1024 x 4096 = 4,194,304 B). Where they take either: neither. */
static int lora_fp8(void) {
  fth_node_def n = tfx_fp8_node();
  fth_topology_def t = tfx_tp_only(1, 100e9);
  fth_model_def m = tfx_block_model();
  fth_train_def w = tfx_serial_work(1, 1024);
  fth_train_plan p;
  fth_error err;
  fth_train_result full, lora, attn;
  w.recipe = FTH_RECIPE_FP8_DELAYED;
  FTH_ENSURE(fth_train_compile(&p, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&p, &full);
  w.lora_rank = 16;
  FTH_ENSURE(fth_train_compile(&p, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&p, &lora);
  FTH_ENSURE_NEAR(full.fwd_s - 50.331648e-6 + 90.963968e-6, lora.fwd_s, 1e-12);
  w.attention_fp8 = 1;
  FTH_ENSURE(fth_train_compile(&p, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&p, &attn);
  FTH_ENSURE_NEAR(lora.fwd_s - 10.747904e-6, attn.fwd_s, 1e-12);
  FTH_ENSURE_NEAR(lora.bwd_s - 2.5 * 10.747904e-6, attn.bwd_s, 1e-12);
  FTH_ENSURE_NEAR(lora.mem.bytes[FTH_MEM_ACTIVATIONS] - 3072.0 * 1024.0,
                  attn.mem.bytes[FTH_MEM_ACTIVATIONS], 1e-12);
  n.compute.fp8_any_layout = 1;
  FTH_ENSURE(fth_train_compile(&p, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&p, &lora);
  FTH_ENSURE_NEAR(attn.mem.bytes[FTH_MEM_WEIGHTS], lora.mem.bytes[FTH_MEM_WEIGHTS], 1e-12);
  FTH_ENSURE_NEAR(attn.mem.bytes[FTH_MEM_TRANSIENT_BWD] - 4194304.0,
                  lora.mem.bytes[FTH_MEM_TRANSIENT_BWD], 1e-12);
  FTH_ENSURE_NEAR(attn.bwd_s - 25.165824e-6, lora.bwd_s, 1e-12);
  FTH_ENSURE_NEAR(attn.fwd_s, lora.fwd_s, 1e-12);
  /* FP8 attention needs a recipe */
  w.recipe = FTH_RECIPE_NONE;
  FTH_ENSURE(fth_train_compile(&p, &n, &t, &m, &w, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "workload.attention_fp8") == 0);
  return 0;
}

/* TP 2 (100 GB/s, no latency), everything overlapped (comp_comm_efficiency 1). The block's
 * two TP collectives a pass move its [1024 tokens, h 1024] activation, 2,097,152 B: without
 * SP two all-reduces, a ring over 2 GPUs sending 2 (1/2) 2,097,152 B at 100 GB/s = 20.97152
 * us each; with SP a reduce-scatter and an all-gather per collective, half that each.
 * Full training hides all of them under the kernels. Under LoRA the backward's reductions of
 * the column-parallel linears' input gradients (QKV's and fc1's: the all-reduces without SP,
 * the reduce-scatters with) have no weight-gradient GEMM to hide under: 2 x 20.97152 =
 * 41.94304 us without SP, 2 x 10.48576 = 20.97152 us with, on top of the backward's
 * kernels; the forward still hides everything. */
static int lora_tp_backward(void) {
  fth_node_def n = tfx_node();
  fth_topology_def t = tfx_tp_only(2, 100e9);
  fth_model_def m = tfx_block_model();
  fth_train_def w = tfx_serial_work(1, 1024);
  w.comp_comm_eff = 1.0;
  fth_train_plan p;
  fth_error err;
  fth_train_result r;
  const double serial[2] = {41.94304e-6, 20.97152e-6};
  for (int sp = 0; sp < 2; sp++) {
    w.sequence_parallel = sp;
    w.lora_rank = 0;
    FTH_ENSURE(fth_train_compile(&p, &n, &t, &m, &w, &err) == FTH_OK);
    fth_train_evaluate(&p, &r);
    FTH_ENSURE_NEAR(r.bwd_kernel_s, r.bwd_s, 1e-12);
    FTH_ENSURE_NEAR(0.0, r.comm[FTH_COMM_TP].exposed_s, 0);
    w.lora_rank = 16;
    FTH_ENSURE(fth_train_compile(&p, &n, &t, &m, &w, &err) == FTH_OK);
    fth_train_evaluate(&p, &r);
    FTH_ENSURE_NEAR(r.fwd_kernel_s, r.fwd_s, 1e-12);
    FTH_ENSURE_NEAR(r.bwd_kernel_s + serial[sp], r.bwd_s, 1e-12);
    FTH_ENSURE_NEAR(serial[sp], r.comm[FTH_COMM_TP].exposed_s, 1e-12);
  }
  return 0;
}

int lora_test(void) {
  FTH_RUN(lora_memory());
  FTH_RUN(lora_fp8());
  FTH_RUN(lora_tp_backward());
  fth_node_def n = tfx_node();
  fth_topology_def t = tfx_tp_only(1, 100e9);
  fth_model_def m = tfx_block_model();
  fth_train_def w = tfx_serial_work(1, 1024);
  fth_train_plan p;
  fth_error err;
  fth_train_result full, lora;
  FTH_ENSURE(fth_train_compile(&p, &n, &t, &m, &w, &err) == FTH_OK);
  FTH_ENSURE(p.stage_lora_params == 0.0);
  fth_train_evaluate(&p, &full);
  w.lora_rank = 16;
  FTH_ENSURE(fth_train_compile(&p, &n, &t, &m, &w, &err) == FTH_OK);
  FTH_ENSURE(p.stage_lora_params == 262144.0);
  FTH_ENSURE(p.lora_flops_per_token == 524288.0);
  fth_train_evaluate(&p, &lora);
  FTH_ENSURE_NEAR(full.model_flops_per_step - 26306674688.0, lora.model_flops_per_step, 1e-12);
  FTH_ENSURE_NEAR(1048576.0, lora.mem.bytes[FTH_MEM_GRADIENTS], 1e-12);
  FTH_ENSURE_NEAR(3145728.0, lora.mem.bytes[FTH_MEM_OPTIMIZER], 1e-12);
  FTH_ENSURE_NEAR(full.mem.bytes[FTH_MEM_WEIGHTS] + 2.0 * 262144.0, lora.mem.bytes[FTH_MEM_WEIGHTS],
                  1e-12);
  FTH_ENSURE(lora.params_per_gpu == full.params_per_gpu + 262144.0);
  /* The optimizer updates the adapters only: 262,144 x (6 x 4 + 4 + 2) B = 7.86 MB at
   * 1 TB/s = 7.86 us. */
  FTH_ENSURE_NEAR(262144.0 * 30.0 / 1e12, lora.optimizer_s, 1e-12);
  /* Times (roofline, 100 TFLOP/s, 1 TB/s, element-wise at 100/8 TFLOP/s). The backward
   * loses the weight-gradient GEMMs of the four linears and the head, all compute-bound:
   * 2 x 1024 x (12 h^2 + h V) / 1e14 = 279.17287424 us. The adapters are memory-bound
   * at this size, bytes 2 x (m k + k n + m n) per GEMM, 6 per summed element:
   *   forward  A x (T x in), B (A x) (T x out), the sum over T x out:  90.963968 us
   *   backward dB, dA, d(Ax), dx and the sum over T x in:            112.72192 us */
  FTH_ENSURE_NEAR(full.fwd_s + 90.963968e-6, lora.fwd_s, 1e-12);
  FTH_ENSURE_NEAR(full.bwd_s - 279.17287424e-6 + 112.72192e-6, lora.bwd_s, 1e-12);
  /* A rank that is not a whole number is refused with its key. */
  w.lora_rank = 2.5;
  FTH_ENSURE(fth_train_compile(&p, &n, &t, &m, &w, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "workload.lora_rank") == 0);
  return 0;
}
