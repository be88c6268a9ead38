/* Hybrid Mamba2-Transformer blocks (fth_model_shares, the Mamba2 mixer's shape, weights,
 * SSD FLOPs and saved activations; fth_block's scan kernels), by hand.
 *
 * A small mixer: h = 64, head dim P = 16, heads H = 2 h / P = 8 (d_inner = 128), groups
 * G = 2, state N = 32, conv K = 4, chunk Q = 64.
 *   in_proj  64 x (2 x 128 + 2 x 2 x 32 + 8) = 64 x 392 = 25,088 weights
 *   out_proj 128 x 64                                  =  8,192
 *   conv1d (128 + 2 x 2 x 32 = 256 channels) x (4 taps + bias) = 1,280; dt_bias, A_log, D
 *   3 x 8 = 24: params_mamba 1,304
 * Pattern "M-" (one Mamba2 and one MLP sub-layer: 1 block), plain MLP f = 256:
 *   MLP 64 x 256 + 256 x 64 = 32,768; norms: two pre-norms 2 x 64 and the gated norm's
 *   128 = 256. Block: 25,088 + 8,192 + 1,304 + 256 + 32,768 = 67,608; with the vocab-128
 *   embedding and untied head (2 x 8,192) and the final norm (64): 84,056.
 * SSD forward FLOPs per token (Dao & Gu 2024 Sec. 6; fth_model.c):
 *   intra-chunk  G 2 Q N + H P (Q + 1) = 2 x 2 x 64 x 32 + 8 x 16 x 65 = 8,192 + 8,320
 *   states       H (2 N P + 2 N P / Q + 2 N P) = 8 x (1,024 + 16 + 1,024) = 16,512
 *   conv1d       2 K (H P + 2 G N) = 2 x 4 x 256 = 2,048
 *   total 35,072. Linears 2 x (25,088 + 8,192 + 32,768) = 132,096 a token. */
#include "fth_model.h"
#include "fth_train.h"
#include "test_fixtures.h"
#include "test_macros.h"

/* A hybrid layer pattern of `mamba` Mamba2, `attention` attention and `mlp` MLP sub-layers:
 * n_layers counts pairs of sub-layers, rounded up. */
static void hybrid_pattern(fth_model_def *m, int mamba, int attention, int mlp) {
  m->hybrid_mamba = mamba;
  m->hybrid_attention = attention;
  m->hybrid_mlp = mlp;
  m->n_layers = (mamba + attention + mlp + 1) / 2;
}

static fth_model_def small(int mamba, int attention, int mlp) {
  fth_model_def m = fth_model_def_default();
  m.d_model = 64;
  m.num_heads = 4;
  m.vocab_size = 128;
  m.max_seq_len = 8;
  m.ffn_hidden = 256;
  hybrid_pattern(&m, mamba, attention, mlp);
  m.mamba_head_dim = 16;
  m.mamba_num_groups = 2;
  m.mamba_state_dim = 32;
  m.mamba_chunk = 64;
  return m;
}

/* Nemotron-H (NeMo ssm.py NemotronHConfig8B / 56B; HF nvidia/Nemotron-H-*-Base-8K): GQA
 * with 8 KV groups of 128, squared-ReLU (plain) MLP, untied 131,072 vocab, Mamba2 heads of
 * 64 in 8 groups, expand 2. */
static fth_model_def nemotron_h(int h, int heads, double ffn, int state, int m, int a, int d) {
  fth_model_def x = fth_model_def_default();
  x.d_model = h;
  x.num_heads = heads;
  x.num_kv_heads = 8;
  x.head_dim = 128;
  x.ffn_hidden = ffn;
  x.vocab_size = 131072;
  x.max_seq_len = 8192;
  hybrid_pattern(&x, m, a, d);
  x.mamba_state_dim = state;
  x.mamba_head_dim = 64;
  x.mamba_num_groups = 8;
  return x;
}

/* In a step: pattern "M-", 8 tokens on one GPU. Halving the chunk (Q 64 -> 32) changes
 * only the SSD's FLOPs: intra-chunk 2 x 2 x 32 x 32 + 8 x 16 x 33 = 8,320 (was 16,512),
 * states 8 x (1,024 + 32 + 1,024) = 16,640 (was 16,512): -8,064 a token, -64,512 for the
 * 8 tokens forward and three times that backward (the forward re-run under mamba_ssm's
 * checkpoint_lvl 1, then two gradient products per product), all in the mixer
 * ("attention") part. The model FLOPs (fth_model_layer_flops) count the gradients only. */
static int step(void) {
  fth_node_def n = tfx_node();
  fth_topology_def t = tfx_tp_only(1, 100e9);
  fth_model_def m = small(1, 0, 1);
  fth_train_def w = tfx_serial_work(1, 8);
  fth_train_plan p;
  fth_error err;
  fth_train_result a, b;
  FTH_ENSURE(fth_train_compile(&p, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&p, &a);
  m.mamba_chunk = 32;
  FTH_ENSURE(fth_train_compile(&p, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&p, &b);
  FTH_ENSURE_NEAR(a.fwd_flops[FTH_FLOP_ATTENTION] - 64512.0, b.fwd_flops[FTH_FLOP_ATTENTION], 1e-6);
  FTH_ENSURE_NEAR(a.bwd_flops[FTH_FLOP_ATTENTION] - 193536.0, b.bwd_flops[FTH_FLOP_ATTENTION],
                  1e-6);
  FTH_ENSURE(a.fwd_flops[FTH_FLOP_MLP] == b.fwd_flops[FTH_FLOP_MLP]);
  /* and the scan's bytes: per token the chunk states (H N P = 8 x 32 x 16 = 4,096 per chunk)
   * written in fp32 by chunk_state (4), read in fp32 and written at w = 2 by state_passing
   * (6), read by chunk_scan (2): 12 x 4,096 x (1/32 - 1/64) = +768; the fp32 C B^T blocks
   * (G Q = 2 x Q per token), written by bmm_chunk and read by chunk_scan: 2 x 4 x 2 x (32 -
   * 64) = -512. +256 a token, +2,048 B for the 8 tokens forward, three times that backward. */
  FTH_ENSURE_NEAR(a.fwd_bytes[FTH_FLOP_ATTENTION] + 2048.0, b.fwd_bytes[FTH_FLOP_ATTENTION], 1e-6);
  FTH_ENSURE_NEAR(a.bwd_bytes[FTH_FLOP_ATTENTION] + 6144.0, b.bwd_bytes[FTH_FLOP_ATTENTION], 1e-6);
  FTH_ENSURE(a.step_time_s > 0);
  return 0;
}

int mamba_test(void) {
  fth_error err;
  fth_model_def m = small(1, 0, 1);
  FTH_ENSURE(fth_model_check(&m, &err) == FTH_OK);
  double sm, sa, sd;
  fth_model_shares(&m, &sm, &sa, &sd);
  FTH_ENSURE(sm == 1.0 && sa == 0.0 && sd == 1.0);
  FTH_ENSURE_NEAR(128.0, fth_model_mamba_inner(&m), 0);
  fth_layer_shape s = fth_model_layer_shape(&m, 0);
  FTH_ENSURE(s.num_linears == 4); /* in_proj, out_proj, MLP up, MLP down */
  FTH_ENSURE_NEAR(25088.0 + 8192.0, s.params_attn, 0);
  FTH_ENSURE_NEAR(1304.0, s.params_mamba, 0);
  FTH_ENSURE_NEAR(256.0, s.params_norm, 0);
  FTH_ENSURE_NEAR(32768.0, s.params_mlp, 0);
  FTH_ENSURE_NEAR(84056.0, fth_model_params(&m).total, 0);
  FTH_ENSURE_NEAR(35072.0, fth_model_ssd_flops_per_token(&m, 8, 2), 1e-9);
  fth_layer_flops f = fth_model_layer_flops(&m, 0, 8);
  FTH_ENSURE_NEAR(35072.0, f.fwd_ssm, 1e-9);
  FTH_ENSURE(f.fwd_attn_core == 0.0);
  FTH_ENSURE_NEAR(132096.0 + 35072.0, f.fwd_total, 1e-9);
  FTH_ENSURE_NEAR(132096.0 + 2.0 * 35072.0, f.bwd_data, 1e-9);
  FTH_ENSURE_NEAR(132096.0, f.bwd_weight, 1e-9);
  /* Saved for backward at w = 2, flash: the two norm inputs 2 x 2 x 64, the in_proj and MLP
   * inputs 2 x 64 each (replicated: 512, + the plain MLP's dropout mask 64 = 576); sharded:
   * in_proj output 2 x 392, the scan's ungated output and the norm's input 2 x 2 x 128,
   * out_proj input 2 x 128, 4 x 2 fp32 1/rms, MLP 2 x 2 x 256:
   * 784 + 512 + 256 + 8 + 1,024 = 2,584. No KV cache. */
  fth_layer_activations act = fth_model_layer_activations(&m, 0, 2.0, 1);
  FTH_ENSURE_NEAR(576.0, act.replicated, 1e-12);
  FTH_ENSURE_NEAR(2584.0, act.sharded, 1e-12);
  FTH_ENSURE(s.kv_cache_per_token == 0.0);

  /* "M*--": one Mamba2, one attention (4 heads of 16: QKV 64 x 192, O 64 x 64 = 16,384)
   * and two MLP sub-layers in 2 blocks: shares 0.5, 0.5, 1. Layers: Mamba2 25,088 +
   * 8,192 + 1,304 + 64 + 128 = 34,776; attention 16,384 + 64; MLPs 2 x (32,768 + 64):
   * 116,888, + 16,448 = 133,336. K and V cached: half an attention layer a block. */
  m = small(1, 1, 2);
  FTH_ENSURE(m.n_layers == 2 && fth_model_check(&m, &err) == FTH_OK);
  FTH_ENSURE_NEAR(133336.0, fth_model_params(&m).total, 1e-9);
  FTH_ENSURE_NEAR(0.5 * 2.0 * 64.0, fth_model_layer_shape(&m, 0).kv_cache_per_token, 1e-12);
  FTH_ENSURE_NEAR(2.0 * 0.5 * 2.0 * 64.0, fth_model_kv_cache_elems_per_token(&m), 1e-12);

  /* Bad hybrids: a block count that is not the sub-layers' half; groups not dividing heads */
  m.n_layers = 3;
  FTH_ENSURE(fth_model_check(&m, &err) == FTH_EINVAL);
  m = small(1, 0, 1);
  m.mamba_num_groups = 3;
  FTH_ENSURE(fth_model_check(&m, &err) == FTH_EINVAL);

  /* Nemotron-H 8B (52 sub-layers: 24 M, 4 *, 24 -; h 4096, FFN 21504, state 128):
   *   embedding + head 2 x 131,072 x 4,096 = 1,073,741,824; final norm 4,096
   *   Mamba2: in_proj 4,096 x 18,560 = 76,021,760, out_proj 8,192 x 4,096 = 33,554,432,
   *     conv 10,240 x 5 = 51,200, 3 x 128 = 384, norms 4,096 + 8,192: 109,640,064 x 24
   *   attention: 4,096 x 6,144 + 4,096 x 4,096 + 4,096 = 41,947,136 x 4
   *   MLP: 2 x 4,096 x 21,504 + 4,096 = 176,164,864 x 24
   * = 1,073,745,920 + 2,631,361,536 + 167,788,544 + 4,227,956,736 = 8,100,852,736, the
   * published count of nvidia/Nemotron-H-8B-Base-8K. */
  fth_model_def n8 = nemotron_h(4096, 32, 21504, 128, 24, 4, 24);
  FTH_ENSURE(fth_model_check(&n8, &err) == FTH_OK);
  FTH_ENSURE_NEAR(8100852736.0, fth_model_params(&n8).total, 0.5);
  /* Nemotron-H 56B (118: 54 M, 10 *, 54 -; h 8192, FFN 32768, state 256, 256 heads):
   * published "56B"; by the same sums 56.3e9. */
  fth_model_def n56 = nemotron_h(8192, 64, 32768, 256, 54, 10, 54);
  FTH_ENSURE(fth_model_check(&n56, &err) == FTH_OK);
  FTH_ENSURE(n56.n_layers == 59);
  double p56 = fth_model_params(&n56).total;
  FTH_ENSURE(p56 > 55.5e9 && p56 < 57.0e9);
  /* "M*EE" (Nemotron 3's kinds): one Mamba2, one attention and two MoE sub-layers of 4
   * experts of width 32, top-2, in 2 blocks, every block an MoE block (shares 0.5, 0.5, 1).
   * An MoE sub-layer: router 64 x 4 = 256, experts 4 x (64 x 32 + 32 x 64) = 16,384, its
   * pre-norm 64: 16,704. Total 34,776 + 16,448 + 2 x 16,704 + 16,448 = 101,080; active:
   * two experts a token, 256 + 8,192 + 64 = 8,512 a sub-layer: 84,696. */
  m = small(1, 1, 0);
  m.hybrid_moe = 2;
  m.n_layers = 2;
  m.num_experts = 4;
  m.top_k = 2;
  m.expert_ffn_hidden = 32;
  FTH_ENSURE(fth_model_check(&m, &err) == FTH_OK);
  FTH_ENSURE(fth_model_num_moe_layers(&m) == 2);
  fth_param_count pc = fth_model_params(&m);
  FTH_ENSURE_NEAR(101080.0, pc.total, 1e-9);
  FTH_ENSURE_NEAR(84696.0, pc.active, 1e-9);
  m.hybrid_mlp = 1; /* dense and MoE FFN sub-layers together: refused */
  m.n_layers = 3;
  FTH_ENSURE(fth_model_check(&m, &err) == FTH_EINVAL);
  return step();
}
