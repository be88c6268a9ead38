/* Kernel time by kind of kernel (fth_phase.h fth_kernel_class): GEMM,
 * attention core, other (element-wise), derived by hand.
 *
 * 1. The accumulator: with full compute/memory overlap (e = 1) and no launch
 *    cost a kernel takes max(compute_s, memory_s); each class collects its
 *    kernels' time and the classes sum to kernel_s through scale and add.
 * 2. A training step (test_recipe.c's block: one GPU, h 1024, 16 heads, plain
 *    MLP 4096, seq 1024, vocab 1024, one sequence; BF16 100 TFLOP/s, FP8 200,
 *    1 TB/s). GEMM class in BF16, every GEMM compute-bound: the linears'
 *    F = 2 x 1024 x 12 x 1024^2 = 25,769,803,776 FLOP forward, twice that
 *    backward, and the LM head's 2 x 1024^3 = 2,147,483,648 forward, twice
 *    backward: 3 (F + 2,147,483,648) / 1e14 = 837.51862272 us. Under FP8
 *    delayed scaling the linears run at 200 TFLOP/s: 386.54705664 us less in
 *    the GEMM class, and the casts (117.440512 us, test_recipe.c) land in
 *    "other"; the attention core is unchanged. */
#include "fth_phase.h"
#include "fth_train.h"
#include "test_fixtures.h"
#include "test_macros.h"

#include <string.h>

static fth_kernel_cost cost(double compute_s, double memory_s) {
  fth_kernel_cost k = {0};
  k.compute_s = compute_s;
  k.memory_s = memory_s;
  k.time_s = compute_s > memory_s ? compute_s : memory_s;
  return k;
}

static int accumulator(void) {
  fth_phase_ctx c;
  memset(&c, 0, sizeof c);
  c.comp_mem_eff = 1.0;
  fth_phase ph;
  memset(&ph, 0, sizeof ph);
  fth_phase_add_kernel_class(&c, &ph, FTH_FLOP_MLP, FTH_KERNEL_GEMM, cost(3.0, 1.0), 0.0);
  fth_phase_add_kernel_class(&c, &ph, FTH_FLOP_ATTENTION, FTH_KERNEL_ATTENTION, cost(2.0, 0.5),
                             0.0);
  fth_phase_add_kernel(&c, &ph, FTH_FLOP_MLP, cost(0.0, 4.0), 0.0); /* element-wise: other */
  FTH_ENSURE_NEAR(3.0, ph.class_s[FTH_KERNEL_GEMM], 1e-15);
  FTH_ENSURE_NEAR(2.0, ph.class_s[FTH_KERNEL_ATTENTION], 1e-15);
  FTH_ENSURE_NEAR(4.0, ph.class_s[FTH_KERNEL_OTHER], 1e-15);
  FTH_ENSURE_NEAR(9.0, ph.kernel_s, 1e-15);
  /* a launch cost counts with its kernel's class */
  c.launch_s = 0.25;
  fth_phase_add_kernel_class(&c, &ph, FTH_FLOP_MLP, FTH_KERNEL_GEMM, cost(1.0, 0.0), 0.0);
  FTH_ENSURE_NEAR(4.25, ph.class_s[FTH_KERNEL_GEMM], 1e-15);
  fth_phase_scale(&ph, 2.0);
  fth_phase b = ph;
  fth_phase_add(&ph, &b);
  FTH_ENSURE_NEAR(17.0, ph.class_s[FTH_KERNEL_GEMM], 1e-15);
  FTH_ENSURE_NEAR(8.0, ph.class_s[FTH_KERNEL_ATTENTION], 1e-15);
  FTH_ENSURE_NEAR(16.0, ph.class_s[FTH_KERNEL_OTHER], 1e-15);
  FTH_ENSURE_NEAR(41.0, ph.kernel_s, 1e-15);
  FTH_ENSURE(strcmp(fth_kernel_class_name(FTH_KERNEL_ATTENTION), "attention") == 0);
  FTH_ENSURE(fth_kernel_class_name(FTH_KERNEL_CLASS_COUNT) == NULL);
  return 0;
}

static double total(const fth_train_result *r, fth_kernel_class c) {
  return r->fwd_class_s[c] + r->bwd_class_s[c];
}

static int step(void) {
  fth_node_def n = tfx_fp8_node();
  fth_topology_def t = tfx_tp_only(1, 100e9);
  fth_model_def m = tfx_block_model();
  fth_train_def w = fth_train_def_default();
  w.global_batch = 1;
  w.micro_batch = 1;
  w.seq_len = 1024;
  fth_train_plan p;
  fth_error err;
  fth_train_result bf16, fp8;
  FTH_ENSURE(fth_train_compile(&p, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&p, &bf16);
  w.recipe = FTH_RECIPE_FP8_DELAYED;
  FTH_ENSURE(fth_train_compile(&p, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&p, &fp8);
  FTH_ENSURE_NEAR(837.51862272e-6, total(&bf16, FTH_KERNEL_GEMM), 1e-9);
  FTH_ENSURE_NEAR(837.51862272e-6 - 386.54705664e-6, total(&fp8, FTH_KERNEL_GEMM), 1e-9);
  FTH_ENSURE_NEAR(total(&bf16, FTH_KERNEL_OTHER) + 117.440512e-6, total(&fp8, FTH_KERNEL_OTHER),
                  1e-9);
  FTH_ENSURE(total(&bf16, FTH_KERNEL_ATTENTION) > 0);
  FTH_ENSURE_NEAR(total(&bf16, FTH_KERNEL_ATTENTION), total(&fp8, FTH_KERNEL_ATTENTION), 1e-12);
  /* the classes partition each pass's kernel time */
  const fth_train_result *rs[2] = {&bf16, &fp8};
  for (int i = 0; i < 2; i++) {
    const fth_train_result *r = rs[i];
    double f = 0, b = 0;
    for (int c = 0; c < FTH_KERNEL_CLASS_COUNT; c++) {
      f += r->fwd_class_s[c];
      b += r->bwd_class_s[c];
    }
    FTH_ENSURE_NEAR(r->fwd_kernel_s, f, 1e-12);
    FTH_ENSURE_NEAR(r->bwd_kernel_s, b, 1e-12);
  }
  return 0;
}

/* An MoE block (8 experts, top-2, plain two-GEMM expert MLP): the fixed cost
 * per expert of a grouped GEMM (expert_gemm_s) is GEMM time. Raising it from
 * 0 to 1 us adds 8 experts x 2 GEMMs x 1 us = 16 us forward and twice that
 * backward (dgrad and wgrad): 48 us, all of it in the GEMM class. */
static int moe(void) {
  fth_node_def n = tfx_fp8_node();
  fth_topology_def t = tfx_tp_only(1, 100e9);
  fth_model_def m = fth_model_def_default();
  m.d_model = 1024;
  m.n_layers = 1;
  m.num_heads = 16;
  m.vocab_size = 1024;
  m.max_seq_len = 1024;
  m.num_experts = 8;
  m.top_k = 2;
  m.expert_ffn_hidden = 512;
  fth_train_def w = tfx_serial_work(1, 1024);
  fth_train_plan p;
  fth_error err;
  fth_train_result r0, r1;
  FTH_ENSURE(fth_train_compile(&p, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&p, &r0);
  n.compute.expert_gemm_s = 1e-6;
  FTH_ENSURE(fth_train_compile(&p, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&p, &r1);
  double dk = (r1.fwd_kernel_s + r1.bwd_kernel_s) - (r0.fwd_kernel_s + r0.bwd_kernel_s);
  FTH_ENSURE_NEAR(48e-6, dk, 1e-9);
  FTH_ENSURE_NEAR(dk, total(&r1, FTH_KERNEL_GEMM) - total(&r0, FTH_KERNEL_GEMM), 1e-9);
  FTH_ENSURE_NEAR(total(&r0, FTH_KERNEL_OTHER), total(&r1, FTH_KERNEL_OTHER), 1e-12);
  FTH_ENSURE_NEAR(total(&r0, FTH_KERNEL_ATTENTION), total(&r1, FTH_KERNEL_ATTENTION), 1e-12);
  double f = 0, b = 0;
  for (int c = 0; c < FTH_KERNEL_CLASS_COUNT; c++) {
    f += r1.fwd_class_s[c];
    b += r1.bwd_class_s[c];
  }
  FTH_ENSURE_NEAR(r1.fwd_kernel_s, f, 1e-12);
  FTH_ENSURE_NEAR(r1.bwd_kernel_s, b, 1e-12);
  return 0;
}

/* A paced kind (context parallelism's ring): of its raw time only the part its own
 * pipeline left exposed meets the other kernels. Kernels 10 s; TP 4 s raw; CP 6 s raw
 * of which 1.5 s exposed. Pooled at e = 0.5: overlap(10, 4 + 1.5) = 15.5 - 0.5 x 5.5
 * = 12.75 s, exposed 2.75 s split 4 : 1.5 (2 and 0.75). With CP blocking: overlap(10, 4)
 * = 12 s plus CP's 1.5 s whole = 13.5 s; TP exposed 2, CP 1.5. Scale and add carry the
 * exposed part and the pacing. */
static int paced(void) {
  fth_phase_ctx c;
  memset(&c, 0, sizeof c);
  c.comp_mem_eff = 1.0;
  fth_phase ph;
  memset(&ph, 0, sizeof ph);
  fth_phase_add_kernel(&c, &ph, FTH_FLOP_MLP, cost(10.0, 0.0), 0.0);
  fth_phase_add_comm(&ph, FTH_COMM_TP, FTH_COLL_ALL_REDUCE, FTH_ALGO_RING, 1.0, 4.0, 1.0);
  fth_phase_add_paced_comm(&ph, FTH_COMM_CP, FTH_COLL_SEND_RECV, FTH_ALGO_RING, 1.0, 3.0, 2.0,
                           1.5);
  FTH_ENSURE_NEAR(6.0, ph.comm_s[FTH_COMM_CP], 1e-15);
  double ex[FTH_COMM_KIND_COUNT];
  FTH_ENSURE_NEAR(12.75, fth_phase_time(&ph, 0.5, ex), 1e-12);
  FTH_ENSURE_NEAR(2.0, ex[FTH_COMM_TP], 1e-12);
  FTH_ENSURE_NEAR(0.75, ex[FTH_COMM_CP], 1e-12);
  FTH_ENSURE_NEAR(13.5, fth_phase_time_blocking(&ph, 0.5, 1u << FTH_COMM_CP, ex), 1e-12);
  FTH_ENSURE_NEAR(2.0, ex[FTH_COMM_TP], 1e-12);
  FTH_ENSURE_NEAR(1.5, ex[FTH_COMM_CP], 1e-12);
  fth_phase sum;
  memset(&sum, 0, sizeof sum);
  fth_phase_scale(&ph, 2.0);
  fth_phase_add(&sum, &ph);
  FTH_ENSURE(sum.paced == (1u << FTH_COMM_CP));
  FTH_ENSURE_NEAR(3.0, sum.comm_exposed_s[FTH_COMM_CP], 1e-15);
  FTH_ENSURE_NEAR(27.0, fth_phase_time_blocking(&sum, 0.5, 1u << FTH_COMM_CP, ex), 1e-12);
  return 0;
}

int kernel_class_test(void) {
  return accumulator() || paced() || step() || moe();
}
