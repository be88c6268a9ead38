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

int lora_test(void) {
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
