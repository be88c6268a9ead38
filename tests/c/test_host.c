/* The host side of a step (fth_host.h): operators a block issues, the parts CUDA
 * graphs capture, and a host-bound pass, by hand.
 *
 * Operator counts (fth_host.c's table): attention 16 (+ 6 for MLA), dense MLP 6,
 * router 31 (+ the shared experts' MLP), preprocess 10, routed experts 4 + 2 per
 * local expert; a recipe casts each GEMM's input: +2 for attention and the MLP,
 * +2 per local expert. Backward: twice the forward's. A context-parallel ring of c
 * steps adds 25 c operators to the forward and as many to the backward. A LoRA
 * adapter adds 6 to the sub-layer it adapts. */
#include "fth_host.h"
#include "fth_train.h"
#include "test_fixtures.h"
#include "test_macros.h"

static fth_model_def moe_model(void) {
  fth_model_def m = tfx_block_model();
  m.num_experts = 8;
  m.top_k = 2;
  m.num_shared_experts = 1;
  m.expert_ffn_hidden = 512;
  return m;
}

static int counts(void) {
  fth_model_def dense = tfx_block_model();
  fth_host_ops o = fth_host_block_ops(&dense, 0, 0, 0, 0);
  FTH_ENSURE_NEAR(16.0, o.attn, 0);
  FTH_ENSURE_NEAR(6.0, o.mlp, 0);
  FTH_ENSURE_NEAR(0.0, o.router + o.preprocess + o.experts, 0);
  o = fth_host_block_ops(&dense, 0, 0, 1, 0);
  FTH_ENSURE_NEAR(18.0, o.attn, 0);
  FTH_ENSURE_NEAR(8.0, o.mlp, 0);

  /* MoE, 4 local experts, with a recipe: attention 18; router 31 + the shared
   * expert's MLP 8 = 39; preprocess 10; experts 4 + 2 x 2 x 4 = 20; no dense MLP. */
  fth_model_def m = moe_model();
  o = fth_host_block_ops(&m, 1, 4, 1, 0);
  FTH_ENSURE_NEAR(18.0, o.attn, 0);
  FTH_ENSURE_NEAR(0.0, o.mlp, 0);
  FTH_ENSURE_NEAR(39.0, o.router, 0);
  FTH_ENSURE_NEAR(10.0, o.preprocess, 0);
  FTH_ENSURE_NEAR(20.0, o.experts, 0);
  /* without the recipe's casts: experts 4 + 2 x 4 = 12 */
  FTH_ENSURE_NEAR(12.0, fth_host_block_ops(&m, 1, 4, 0, 0).experts, 0);
  /* MLA adds its projections and latent norms to attention: 16 + 6 */
  m.kv_lora_rank = 512;
  FTH_ENSURE_NEAR(22.0, fth_host_block_ops(&m, 1, 4, 0, 0).attn, 0);
  /* a CP ring of 4 steps: 25 x 4 = 100 operators of its own; none without a ring; a
   * hybrid block holding a quarter of an attention sub-layer: 25 */
  o = fth_host_block_ops(&dense, 0, 0, 0, 4);
  FTH_ENSURE_NEAR(100.0, o.cp_ring, 0);
  FTH_ENSURE_NEAR(16.0, o.attn, 0);
  FTH_ENSURE_NEAR(0.0, fth_host_block_ops(&dense, 0, 0, 0, 0).cp_ring, 0);
  FTH_ENSURE_NEAR(25.0, fth_host_block_ops(&dense, 0, 0, 0, 4 * 0.25).cp_ring, 0);

  /* LoRA adapters, 6 operators each: two on the attention (QKV, output projection)
   * 16 + 12 = 28, two on the MLP (fc1, fc2) 6 + 12 = 18; a MoE block's adapted shared
   * experts with its router: 39 + 12 = 51 */
  o = fth_host_block_ops(&dense, 0, 0, 0, 0);
  fth_host_add_adapters(&o, 2.0, 2.0);
  FTH_ENSURE_NEAR(28.0, o.attn, 0);
  FTH_ENSURE_NEAR(18.0, o.mlp, 0);
  o = fth_host_block_ops(&m, 1, 4, 1, 0);
  fth_host_add_adapters(&o, 0.0, 2.0);
  FTH_ENSURE_NEAR(51.0, o.router, 0);
  FTH_ENSURE_NEAR(0.0, o.mlp, 0);
  return 0;
}

/* The ring's operators: forward 16 + 6 + 100 = 122; backward 2 x 22 + 100 = 144 (the
 * backward's loop issues about as many as the forward's, not twice); a graph of the
 * attention sub-layer captures them with it. */
static int ring_scopes(void) {
  fth_model_def dense = tfx_block_model();
  fth_host_ops o = fth_host_block_ops(&dense, 0, 0, 0, 4);
  double f, b;
  fth_host_block_s(&o, 0u, 1e-5, &f, &b);
  FTH_ENSURE_NEAR(122e-5, f, 1e-12);
  FTH_ENSURE_NEAR(144e-5, b, 1e-12);
  fth_host_block_s(&o, FTH_GRAPH_ATTN, 1e-5, &f, &b);
  FTH_ENSURE_NEAR(6e-5, f, 1e-12);
  FTH_ENSURE_NEAR(12e-5, b, 1e-12);
  return 0;
}

static int scopes(void) {
  fth_model_def m = moe_model();
  fth_host_ops o = fth_host_block_ops(&m, 1, 4, 1, 0); /* 18 + 39 + 10 + 20 = 87 */
  double f, b;
  fth_host_block_s(&o, 0u, 1e-5, &f, &b);
  FTH_ENSURE_NEAR(87e-5, f, 1e-12);
  FTH_ENSURE_NEAR(174e-5, b, 1e-12);
  /* DeepSeek-V3 on GB200's scope: attention, router and preprocess graphed; the routed
   * experts' 20 operators stay */
  fth_host_block_s(&o, FTH_GRAPH_ATTN | FTH_GRAPH_MOE_ROUTER | FTH_GRAPH_MOE_PREPROCESS, 1e-5, &f,
                   &b);
  FTH_ENSURE_NEAR(20e-5, f, 1e-12);
  /* the whole MoE sub-layer graphed: attention's 18 stay */
  fth_host_block_s(&o, FTH_GRAPH_MOE, 1e-5, &f, &b);
  FTH_ENSURE_NEAR(18e-5, f, 1e-12);
  fth_host_block_s(&o, FTH_GRAPH_FULL_ITERATION, 1e-5, &f, &b);
  FTH_ENSURE_NEAR(0.0, f + b, 0);
  /* names round-trip; unknown names parse to 0 */
  for (int i = 0; i < FTH_GRAPH_SCOPE_COUNT; i++)
    FTH_ENSURE(fth_graph_scope_parse(fth_graph_scope_name(1u << i)) == (1u << i));
  FTH_ENSURE(fth_graph_scope_parse("everything") == 0u);
  FTH_ENSURE(fth_graph_scope_name(3u) == NULL);
  return 0;
}

/* A host-bound step: tfx_block_model (1 dense block) on tfx_node, one GPU, global batch 2
 * of 1024 tokens (2 micro-batches). With 1 ms a host operator, the forward's 22 operators
 * take 22 ms and the backward's 44 ms, far above the device times (tens of microseconds:
 * the block is ~25 GFLOP forward at 100 TFLOP/s): each pass takes its host time, and the
 * GPU waits the difference, per micro-batch. */
static int host_bound_step(void) {
  fth_node_def n = tfx_node();
  fth_topology_def t = tfx_one_gpu();
  fth_model_def m = tfx_block_model();
  fth_train_def w = tfx_serial_work(2, 1024);
  fth_train_plan plan;
  fth_error err;
  fth_train_result dev, host, graphed;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &dev);
  FTH_ENSURE_NEAR(0.0, dev.host_wait_s, 0);

  w.host_op_s = 1e-3;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &host);
  FTH_ENSURE(dev.fwd_s < 22e-3 && dev.bwd_s < 44e-3);
  FTH_ENSURE_NEAR(22e-3, host.fwd_s, 1e-12);
  FTH_ENSURE_NEAR(44e-3, host.bwd_s, 1e-12);
  FTH_ENSURE_NEAR(2.0 * (66e-3 - dev.fwd_s - dev.bwd_s), host.host_wait_s, 1e-9);
  FTH_ENSURE_NEAR(dev.step_time_s + host.host_wait_s, host.step_time_s, 1e-9);
  /* the device's work is unchanged */
  FTH_ENSURE_NEAR(dev.compute_s, host.compute_s, 1e-12);

  /* replayed from a CUDA graph: no host time at all */
  w.cuda_graph_scope = FTH_GRAPH_FULL_ITERATION;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &graphed);
  FTH_ENSURE_NEAR(dev.step_time_s, graphed.step_time_s, 1e-12);
  FTH_ENSURE_NEAR(0.0, graphed.host_wait_s, 0);

  /* LoRA on the attention: its QKV and output projection each carry an adapter of 6
   * operators, so the forward issues 22 + 12 = 34 (34 ms) and the backward 68 (68 ms);
   * on every linear (+ fc1, fc2) 46 and 92. A graph of the attention sub-layer captures
   * its adapters with it: the MLP's 6 + 12 = 18 stay (18 ms, 36 ms). */
  fth_train_result lora;
  w.cuda_graph_scope = 0u;
  w.lora_rank = 8;
  w.lora_targets = FTH_LORA_ATTENTION;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &lora);
  FTH_ENSURE_NEAR(34e-3, lora.fwd_s, 1e-12);
  FTH_ENSURE_NEAR(68e-3, lora.bwd_s, 1e-12);
  w.lora_targets = FTH_LORA_ALL_LINEAR;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &lora);
  FTH_ENSURE_NEAR(46e-3, lora.fwd_s, 1e-12);
  FTH_ENSURE_NEAR(92e-3, lora.bwd_s, 1e-12);
  w.cuda_graph_scope = FTH_GRAPH_ATTN;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &lora);
  FTH_ENSURE_NEAR(18e-3, lora.fwd_s, 1e-12);
  FTH_ENSURE_NEAR(36e-3, lora.bwd_s, 1e-12);
  return 0;
}

/* A hybrid's adapters count by the share of its blocks that run each linear: pattern
 * 3 Mamba, 1 attention, 4 MLP sub-layers in 4 blocks runs the attention's QKV and output
 * projection in a quarter of them and the Mamba in_proj and out_proj in three quarters,
 * so LoRA on the attention-side linears adds 2 x 0.25 + 2 x 0.75 = 2 adapters a block,
 * 12 operators (12 ms a forward, 24 ms a backward at 1 ms an operator, host-bound). */
static int hybrid_adapters(void) {
  fth_node_def n = tfx_node();
  fth_topology_def t = tfx_one_gpu();
  fth_model_def m = tfx_block_model();
  m.hybrid_mamba = 3;
  m.hybrid_attention = 1;
  m.hybrid_mlp = 4;
  m.n_layers = 4;
  m.mamba_head_dim = 64;
  m.mamba_num_groups = 1;
  m.mamba_state_dim = 16;
  fth_train_def w = tfx_serial_work(2, 1024);
  w.host_op_s = 1e-3;
  fth_train_plan plan;
  fth_error err;
  fth_train_result base, lora;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &base);
  w.lora_rank = 8;
  w.lora_targets = FTH_LORA_ATTENTION;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &lora);
  FTH_ENSURE_NEAR(4 * 12e-3, lora.fwd_s - base.fwd_s, 1e-9);
  FTH_ENSURE_NEAR(4 * 24e-3, lora.bwd_s - base.bwd_s, 1e-9);
  return 0;
}

static int checks(void) {
  fth_train_def w = fth_train_def_default();
  fth_error err;
  w.host_op_s = 2e-3;
  FTH_ENSURE(fth_train_def_check(&w, &err) != FTH_OK);
  w.host_op_s = -1e-6;
  FTH_ENSURE(fth_train_def_check(&w, &err) != FTH_OK);
  w.host_op_s = 20e-6;
  w.cuda_graph_scope = 1u << FTH_GRAPH_SCOPE_COUNT;
  FTH_ENSURE(fth_train_def_check(&w, &err) != FTH_OK);
  w.cuda_graph_scope = FTH_GRAPH_ATTN;
  FTH_ENSURE(fth_train_def_check(&w, &err) == FTH_OK);
  return 0;
}

int host_test(void) {
  FTH_RUN(counts());
  FTH_RUN(scopes());
  FTH_RUN(ring_scopes());
  FTH_RUN(host_bound_step());
  FTH_RUN(hybrid_adapters());
  FTH_RUN(checks());
  return 0;
}
