/* Megatron-Core's first_last_layers_bf16: layers at the ends of the model run outside the
 * FP8 recipe. Derived by hand from test_recipe.c's block (tfx_block_model: h 1024, 16
 * heads, plain MLP 4096; one GPU at 100 TFLOP/s BF16, 200 FP8, 1 TB/s; seq 1024, one
 * sequence), where FP8 delayed scaling saves one block 386.54705664 us of GEMM time and
 * costs it 117.440512 us of casts (inputs, weights once a step, output gradients): a block
 * run in BF16 under the recipe costs 269.10654464 us more than its FP8 run, and with every
 * block in BF16 the step is the one without a recipe. The head, loss, norms and attention
 * run at the activation width either way. */
#include "fth_train.h"
#include "test_fixtures.h"
#include "test_macros.h"

#include <string.h>

static int run(fth_model_def m, fth_recipe r, int start, int end, fth_train_result *out) {
  fth_node_def n = tfx_fp8_node();
  fth_topology_def t = tfx_tp_only(1, 100e9);
  fth_train_def w = fth_train_def_default();
  w.global_batch = 1;
  w.micro_batch = 1;
  w.seq_len = 1024;
  w.recipe = r;
  w.bf16_layers_start = start;
  w.bf16_layers_end = end;
  fth_train_plan p;
  fth_error err;
  if (fth_train_compile(&p, &n, &t, &m, &w, &err) != FTH_OK) {
    fprintf(stderr, "compile: %s: %s\n", err.path, err.msg);
    return 1;
  }
  fth_train_evaluate(&p, out);
  return 0;
}

static int dense(void) {
  fth_model_def m = tfx_block_model();
  m.n_layers = 2;
  fth_train_result none, fp8, first, both;
  FTH_RUN(run(m, FTH_RECIPE_NONE, 0, 0, &none));
  FTH_RUN(run(m, FTH_RECIPE_FP8_DELAYED, 0, 0, &fp8));
  FTH_RUN(run(m, FTH_RECIPE_FP8_DELAYED, 1, 0, &first));
  FTH_RUN(run(m, FTH_RECIPE_FP8_DELAYED, 1, 1, &both));
  FTH_ENSURE_NEAR(none.step_time_s - 2.0 * 269.10654464e-6, fp8.step_time_s, 1e-9);
  FTH_ENSURE_NEAR(fp8.step_time_s + 269.10654464e-6, first.step_time_s, 1e-9);
  FTH_ENSURE_NEAR(none.step_time_s, both.step_time_s, 1e-9);
  FTH_ENSURE_NEAR(fp8.model_flops_per_step, both.model_flops_per_step, 1e-12);
  return 0;
}

/* A hybrid's layers are its sub-layers: "M-M-" is 4 sub-layers over 2 blocks, so one
 * BF16 sub-layer is half a block (of the pattern's mean mix) and two are one. */
static int hybrid(void) {
  fth_model_def m = tfx_block_model();
  m.n_layers = 2;
  m.hybrid_mamba = 2;
  m.hybrid_mlp = 2;
  m.mamba_num_groups = 2;
  fth_train_result fp8, one, two;
  FTH_RUN(run(m, FTH_RECIPE_FP8_DELAYED, 0, 0, &fp8));
  FTH_RUN(run(m, FTH_RECIPE_FP8_DELAYED, 1, 0, &one));
  FTH_RUN(run(m, FTH_RECIPE_FP8_DELAYED, 1, 1, &two));
  double d1 = one.step_time_s - fp8.step_time_s, d2 = two.step_time_s - fp8.step_time_s;
  FTH_ENSURE(d1 > 0);
  FTH_ENSURE_NEAR(2.0 * d1, d2, 1e-12);
  return 0;
}

/* BF16 layers are an exception to a recipe: none set, refused; negative, refused. */
static int check(void) {
  fth_train_def w = fth_train_def_default();
  fth_error err;
  FTH_ENSURE(w.bf16_layers_start == 0 && w.bf16_layers_end == 0);
  w.bf16_layers_end = 1;
  FTH_ENSURE(fth_train_def_check(&w, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "num_layers_at_end_in_bf16") == 0);
  w.recipe = FTH_RECIPE_FP8_CURRENT;
  FTH_ENSURE(fth_train_def_check(&w, &err) == FTH_OK);
  w.bf16_layers_start = -1;
  FTH_ENSURE(fth_train_def_check(&w, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "num_layers_at_start_in_bf16") == 0);
  return 0;
}

int bf16_layers_test(void) {
  FTH_RUN(dense());
  FTH_RUN(hybrid());
  FTH_RUN(check());
  return 0;
}
