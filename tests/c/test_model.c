#include "fth_model.h"
#include "test_macros.h"

#include <string.h>

/* ---- published models ------------------------------------------------------------------- */

static fth_model_def gpt3_175b(void) {
  /* Brown et al. 2020 Table 2.1: 96 layers, d 12288, 96 heads, ctx 2048;
   * GPT-2 vocabulary, learned positions, plain GeLU MLP 4h. Left untied (the
   * default): tied, the count is 174.6B, also within 1% of 175B. */
  fth_model_def m = fth_model_def_default();
  m.d_model = 12288;
  m.n_layers = 96;
  m.num_heads = 96;
  m.vocab_size = 50257;
  m.max_seq_len = 2048;
  m.learned_pos_emb = 1;
  return m;
}

static fth_model_def llama31_405b(void) {
  /* Meta Llama 3.1 405B config.json. */
  fth_model_def m = fth_model_def_default();
  m.d_model = 16384;
  m.n_layers = 126;
  m.num_heads = 128;
  m.num_kv_heads = 8;
  m.ffn_hidden = 53248;
  m.gated_mlp = 1;
  m.vocab_size = 128256;
  m.max_seq_len = 131072;
  return m;
}

static fth_model_def mixtral_8x7b(void) {
  /* Mistral AI, Mixtral 8x7B config.json: 46.7B total, 12.9B active. */
  fth_model_def m = fth_model_def_default();
  m.d_model = 4096;
  m.n_layers = 32;
  m.num_heads = 32;
  m.num_kv_heads = 8;
  m.expert_ffn_hidden = 14336;
  m.gated_mlp = 1;
  m.vocab_size = 32000;
  m.max_seq_len = 32768;
  m.num_experts = 8;
  m.top_k = 2;
  return m;
}

static fth_model_def deepseek_v3(void) {
  /* DeepSeek-AI 2024, DeepSeek-V3 config.json: 671B total, 37B active. The
   * published 671B is the main model only: it excludes the 14B
   * multi-token-prediction module (685B in the released checkpoint). */
  fth_model_def m = fth_model_def_default();
  m.d_model = 7168;
  m.n_layers = 61;
  m.num_heads = 128;
  m.ffn_hidden = 18432;
  m.gated_mlp = 1;
  m.vocab_size = 129280;
  m.max_seq_len = 163840;
  m.num_experts = 256;
  m.top_k = 8;
  m.num_shared_experts = 1;
  m.expert_ffn_hidden = 2048;
  m.first_dense_layers = 3;
  m.q_lora_rank = 1536;
  m.kv_lora_rank = 512;
  m.qk_nope_head_dim = 128;
  m.qk_rope_head_dim = 64;
  m.v_head_dim = 128;
  return m;
}

static int defaults(void) {
  fth_model_def m = fth_model_def_default();
  FTH_ENSURE_EQ_INT(0, m.num_kv_heads);
  FTH_ENSURE_EQ_INT(0, m.head_dim);
  FTH_ENSURE_NEAR(4.0, m.mlp_ratio, 0);
  FTH_ENSURE_NEAR(0.0, m.ffn_hidden, 0);
  FTH_ENSURE_EQ_INT(0, m.gated_mlp);
  FTH_ENSURE_EQ_INT(0, m.learned_pos_emb);
  FTH_ENSURE_EQ_INT(0, m.tied_embeddings);
  FTH_ENSURE_EQ_INT(0, m.num_experts);
  FTH_ENSURE_EQ_INT(0, m.top_k);
  FTH_ENSURE_EQ_INT(1, m.moe_layer_interval);
  FTH_ENSURE_EQ_INT(0, m.q_lora_rank);
  FTH_ENSURE_EQ_INT(0, m.kv_lora_rank);
  /* Sizes have no defaults: the default def alone is refused. */
  fth_error err;
  FTH_ENSURE(fth_model_check(&m, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "d_model") == 0);
  return 0;
}

static int published_dense(void) {
  fth_error err;
  fth_model_def m = gpt3_175b();
  FTH_ENSURE(fth_model_check(&m, &err) == FTH_OK);
  fth_param_count c = fth_model_params(&m);
  /* Per layer QKV 3h^2 + out h^2 + MLP 8h^2 + norms 2h = 1,811,963,904;
   * x 96 + token emb 50257 h + positions 2048 h + LM head 50257 h + final
   * norm h = 175,208,828,928. Published: 175B. */
  FTH_ENSURE_NEAR(175208828928.0, c.total, 1e-12);
  FTH_ENSURE_NEAR(175e9, c.total, 0.01);
  FTH_ENSURE_NEAR(c.total, c.active, 1e-12); /* dense: every weight is active */
  FTH_ENSURE_NEAR((50257.0 + 2048.0) * 12288.0, c.embedding, 1e-12);
  m.tied_embeddings = 1;
  /* Tied: minus one 50257 x 12288 table = 174,591,270,912. */
  FTH_ENSURE_NEAR(174591270912.0, fth_model_params(&m).total, 1e-12);
  FTH_ENSURE_NEAR(0.0, fth_model_params(&m).lm_head, 0);

  m = llama31_405b();
  FTH_ENSURE(fth_model_check(&m, &err) == FTH_OK);
  c = fth_model_params(&m);
  /* Attention h (128 + 16) 128 + 128 x 128 x h = 570,425,344; SwiGLU 3 h
   * 53248 = 2,617,245,696; norms 2h; x 126 + 2 x 128256 h + h =
   * 405,853,388,800. Published: 405B. */
  FTH_ENSURE_NEAR(405853388800.0, c.total, 1e-12);
  FTH_ENSURE_NEAR(405e9, c.total, 0.01);
  fth_layer_shape s = fth_model_layer_shape(&m, 0);
  FTH_ENSURE_NEAR(570425344.0, s.params_attn, 1e-12);
  FTH_ENSURE_NEAR(2617245696.0, s.params_mlp, 1e-12);
  /* Forward FLOPs at seq 1 (one key per query): 2 x every block weight plus
   * the LM head (Kaplan et al. 2020: 2N) plus the attention core
   * 2 x 128 x (128 + 128) x 1 = 65,536 per layer:
   * 2 x 126 x 3,187,671,040 + 2 x 128256 x 16384 + 126 x 65536 = 807,504,052,224. */
  FTH_ENSURE_NEAR(807504052224.0, fth_model_fwd_flops_per_token(&m, 1), 1e-12);
  return 0;
}

static int published_moe(void) {
  fth_error err;
  fth_model_def m = mixtral_8x7b();
  FTH_ENSURE(fth_model_check(&m, &err) == FTH_OK);
  fth_param_count c = fth_model_params(&m);
  /* Per layer: attention 41,943,040, norms 8192, router 4096 x 8 = 32,768,
   * one expert 3 x 4096 x 14336 = 176,160,768; all 8: 1,451,270,144 per
   * layer; x 32 + 2 x 32000 h + h = 46,702,792,704. Active: 2 experts,
   * 394,305,536 per layer, 12,879,925,248. Published: 46.7B and 12.9B. */
  FTH_ENSURE_NEAR(46702792704.0, c.total, 1e-12);
  FTH_ENSURE_NEAR(12879925248.0, c.active, 1e-12);
  FTH_ENSURE_NEAR(46.7e9, c.total, 0.01);
  FTH_ENSURE_NEAR(12.9e9, c.active, 0.01);
  FTH_ENSURE_NEAR(32.0 * 8.0 * 176160768.0, c.experts_total, 1e-12);
  FTH_ENSURE_EQ_INT(32, fth_model_num_moe_layers(&m));
  /* EXPERT FLOPs = top_k x one expert: 2 x 2 x 176,160,768 = 704,643,072. */
  FTH_ENSURE_NEAR(704643072.0, fth_model_layer_flops(&m, 1, 1).fwd_part[FTH_PART_EXPERT], 1e-12);

  m = deepseek_v3();
  FTH_ENSURE(fth_model_check(&m, &err) == FTH_OK);
  c = fth_model_params(&m);
  FTH_ENSURE_EQ_INT(58, fth_model_num_moe_layers(&m)); /* 61 - 3 dense */
  FTH_ENSURE(!fth_model_layer_is_moe(&m, 2));
  FTH_ENSURE(fth_model_layer_is_moe(&m, 3));
  FTH_ENSURE(fth_model_layer_is_moe(&m, 60));
  /* MLA: 7168 x 1536 + 1536 x 128 x 192 + 7168 x 576 + 512 x 128 x 256 +
   * 128 x 128 x 7168 = 187,105,280; norms 2 x 7168 + 1536 + 512 = 16,384;
   * router 7168 x 256 = 1,835,008; one expert 3 x 7168 x 2048 = 44,040,192
   * (the shared expert the same); dense MLP 3 x 7168 x 18432 = 396,361,728.
   * Dense block 583,483,392; MoE block without routed experts 232,996,864.
   * Total 3 x 583,483,392 + 58 x (232,996,864 + 256 x 44,040,192)
   *   + 2 x 129280 x 7168 + 7168 = 671,026,404,352. Published: 671B. */
  FTH_ENSURE_NEAR(187105280.0, fth_model_layer_shape(&m, 1).params_attn, 1e-12);
  FTH_ENSURE_NEAR(671026404352.0, c.total, 1e-12);
  FTH_ENSURE_NEAR(671e9, c.total, 0.01);
  /* Active: 8 routed experts instead of 256:
   * total - 58 x 248 x 44,040,192 = 37,552,282,624. The published "37B
   * activated" is 1.5% below that, so it is not within 1% under any split we
   * can reproduce (without the input embedding: 36.63B, 1.01% below 37B). We
   * assert the exact count, and the published figure to 2%. */
  FTH_ENSURE_NEAR(37552282624.0, c.active, 1e-12);
  FTH_ENSURE_NEAR(c.total - 58.0 * 248.0 * 44040192.0, c.active, 1e-12);
  FTH_ENSURE_NEAR(37e9, c.active, 0.02);
  return 0;
}

/* ---- tiny models counted by hand ------------------------------------------------------- */

/* h 4, 2 heads (hd 2), 1 layer, plain MLP f 16, V 10. */
static fth_model_def tiny_dense(void) {
  fth_model_def m = fth_model_def_default();
  m.d_model = 4;
  m.n_layers = 1;
  m.num_heads = 2;
  m.vocab_size = 10;
  m.max_seq_len = 3;
  return m;
}

static int tiny_dense_by_hand(void) {
  fth_model_def m = tiny_dense();
  fth_error err;
  FTH_ENSURE(fth_model_check(&m, &err) == FTH_OK);
  fth_layer_shape s = fth_model_layer_shape(&m, 0);
  FTH_ENSURE_EQ_INT(4, s.num_linears);
  /* Fused QKV 4 -> (2 + 2 x 2) x 2 = 12 columns; output 4 -> 4 rows. */
  FTH_ENSURE_NEAR(4.0, s.lin[0].in, 0);
  FTH_ENSURE_NEAR(12.0, s.lin[0].out, 0);
  FTH_ENSURE(s.lin[0].shard == FTH_SHARD_COLUMN && s.lin[0].part == FTH_PART_ATTN);
  FTH_ENSURE(s.lin[1].shard == FTH_SHARD_ROW && s.lin[1].part == FTH_PART_ATTN);
  FTH_ENSURE(s.lin[2].shard == FTH_SHARD_COLUMN && s.lin[2].part == FTH_PART_MLP);
  FTH_ENSURE(s.lin[3].shard == FTH_SHARD_ROW && s.lin[3].part == FTH_PART_MLP);
  FTH_ENSURE_NEAR(16.0, s.lin[2].out, 0); /* plain MLP: up 4 -> 16 */
  /* QKV 4 x 12 = 48, out 4 x 4 = 16, up 4 x 16 = 64, down 16 x 4 = 64, norms 8. */
  FTH_ENSURE_NEAR(64.0, s.params_attn, 0);
  FTH_ENSURE_NEAR(128.0, s.params_mlp, 0);
  FTH_ENSURE_NEAR(8.0, s.params_norm, 0);
  FTH_ENSURE_NEAR(2.0, s.kv_heads, 0);
  FTH_ENSURE_NEAR(2.0, s.d_qk, 0);
  /* total = embedding 40 + LM head 40 + final norm 4 + block 200 = 284. */
  FTH_ENSURE_NEAR(284.0, fth_model_params(&m).total, 0);
  /* FLOPs per token at seq 3: attention linears 2 x 64 = 128, MLP 2 x 128 =
   * 256; attention core: mean context (3 + 1) / 2 = 2 keys, 2 heads x
   * (2 + 2) x 2 FLOP x 2 keys = 32. Forward 416. Backward data: linears 384
   * once + core 32 twice = 448; weight: linears 384. Together 3 x 416. */
  fth_layer_flops f = fth_model_layer_flops(&m, 0, 3);
  FTH_ENSURE_NEAR(128.0, f.fwd_part[FTH_PART_ATTN], 0);
  FTH_ENSURE_NEAR(256.0, f.fwd_part[FTH_PART_MLP], 0);
  FTH_ENSURE_NEAR(0.0, f.fwd_part[FTH_PART_EXPERT], 0);
  FTH_ENSURE_NEAR(32.0, f.fwd_attn_core, 0);
  FTH_ENSURE_NEAR(416.0, f.fwd_total, 0);
  FTH_ENSURE_NEAR(448.0, f.bwd_data, 0);
  FTH_ENSURE_NEAR(384.0, f.bwd_weight, 0);
  FTH_ENSURE_NEAR(3.0 * f.fwd_total, f.fwd_total + f.bwd_data + f.bwd_weight, 1e-15);
  /* At seq 1 the core is 2 x 2 x 4 x 1 = 16. */
  FTH_ENSURE_NEAR(16.0, fth_model_layer_flops(&m, 0, 1).fwd_attn_core, 0);
  /* LM head 2 h V = 80; whole model 416 + 80 = 496 per token. */
  FTH_ENSURE_NEAR(80.0, fth_model_lm_head_flops_per_token(&m), 0);
  FTH_ENSURE_NEAR(496.0, fth_model_fwd_flops_per_token(&m, 3), 0);
  /* Learned positions add max_seq x h = 12 to the embedding; tied drops the head's 40. */
  m.learned_pos_emb = 1;
  FTH_ENSURE_NEAR(52.0, fth_model_params(&m).embedding, 0);
  m.learned_pos_emb = 0;
  m.tied_embeddings = 1;
  FTH_ENSURE_NEAR(244.0, fth_model_params(&m).total, 0);
  /* KV cache: 2 K/V x 2 heads x hd 2 = 8 per layer, 1 layer. */
  FTH_ENSURE_NEAR(8.0, fth_model_kv_cache_elems_per_token(&m), 0);
  return 0;
}

/* h 8, 4 query heads, 2 KV heads, hd 8 / 4 = 2, SwiGLU f 12, 2 layers, V 16, tied. */
static fth_model_def tiny_gqa(void) {
  fth_model_def m = fth_model_def_default();
  m.d_model = 8;
  m.n_layers = 2;
  m.num_heads = 4;
  m.num_kv_heads = 2;
  m.ffn_hidden = 12;
  m.gated_mlp = 1;
  m.vocab_size = 16;
  m.tied_embeddings = 1;
  return m;
}

static int tiny_gqa_by_hand(void) {
  fth_model_def m = tiny_gqa();
  fth_error err;
  FTH_ENSURE(fth_model_check(&m, &err) == FTH_OK);
  fth_layer_shape s = fth_model_layer_shape(&m, 0);
  /* QKV 8 -> (4 + 2 x 2) x 2 = 16: 128; out 8 -> 8: 64; attention 192.
   * SwiGLU gate+up 8 -> 24: 192, down 12 -> 8: 96; MLP 288. Norms 16. */
  FTH_ENSURE_NEAR(16.0, s.lin[0].out, 0);
  FTH_ENSURE_NEAR(24.0, s.lin[2].out, 0);
  FTH_ENSURE_NEAR(12.0, s.lin[3].in, 0);
  FTH_ENSURE_NEAR(192.0, s.params_attn, 0);
  FTH_ENSURE_NEAR(288.0, s.params_mlp, 0);
  /* Total: embedding 16 x 8 = 128, tied head 0, final norm 8, 2 x 496 = 1128. */
  FTH_ENSURE_NEAR(1128.0, fth_model_params(&m).total, 0);
  FTH_ENSURE_NEAR(496.0, fth_model_params(&m).dense_layer, 0);
  /* FLOPs at seq 5 (mean context 3): core 2 x 4 heads x (2 + 2) x 3 = 96;
   * attention linears 2 x 192 = 384, MLP 2 x 288 = 576; forward 1056;
   * bwd data 960 + 192 = 1152, weight 960. Model: 2 x 1056 + LM head
   * 2 x 8 x 16 = 256 -> 2368 (the head is counted even when tied). */
  fth_layer_flops f = fth_model_layer_flops(&m, 0, 5);
  FTH_ENSURE_NEAR(96.0, f.fwd_attn_core, 0);
  FTH_ENSURE_NEAR(384.0, f.fwd_part[FTH_PART_ATTN], 0);
  FTH_ENSURE_NEAR(576.0, f.fwd_part[FTH_PART_MLP], 0);
  FTH_ENSURE_NEAR(1056.0, f.fwd_total, 0);
  FTH_ENSURE_NEAR(1152.0, f.bwd_data, 0);
  FTH_ENSURE_NEAR(960.0, f.bwd_weight, 0);
  FTH_ENSURE_NEAR(2368.0, fth_model_fwd_flops_per_token(&m, 5), 0);
  /* KV cache: 2 x 2 KV heads x 2 = 8 per layer, 2 layers = 16. */
  FTH_ENSURE_NEAR(8.0, s.kv_cache_per_token, 0);
  FTH_ENSURE_NEAR(16.0, fth_model_kv_cache_elems_per_token(&m), 0);
  /* Explicit head_dim 3 (not h / a): QKV 8 -> (4 + 4) x 3 = 24, out 12 -> 8. */
  m.head_dim = 3;
  s = fth_model_layer_shape(&m, 0);
  FTH_ENSURE_NEAR(24.0, s.lin[0].out, 0);
  FTH_ENSURE_NEAR(12.0, s.lin[1].in, 0);
  FTH_ENSURE_NEAR(24.0, fth_model_kv_cache_elems_per_token(&m), 0); /* 2 x (2 x 2 x 3) */
  return 0;
}

/* h 4, 2 heads, 3 layers, SwiGLU; 4 experts top 2 of inner 6, 1 shared; first
 * layer dense (ffn 8), then MoE every 2nd layer: blocks 0 dense, 1 MoE, 2 dense. */
static fth_model_def tiny_moe(void) {
  fth_model_def m = fth_model_def_default();
  m.d_model = 4;
  m.n_layers = 3;
  m.num_heads = 2;
  m.ffn_hidden = 8;
  m.gated_mlp = 1;
  m.vocab_size = 10;
  m.num_experts = 4;
  m.top_k = 2;
  m.num_shared_experts = 1;
  m.expert_ffn_hidden = 6;
  m.first_dense_layers = 1;
  m.moe_layer_interval = 2;
  return m;
}

static int tiny_moe_by_hand(void) {
  fth_model_def m = tiny_moe();
  fth_error err;
  FTH_ENSURE(fth_model_check(&m, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(0, fth_model_layer_is_moe(&m, 0));
  FTH_ENSURE_EQ_INT(1, fth_model_layer_is_moe(&m, 1));
  FTH_ENSURE_EQ_INT(0, fth_model_layer_is_moe(&m, 2));
  FTH_ENSURE_EQ_INT(0, fth_model_layer_is_moe(&m, 3)); /* past the last block */
  FTH_ENSURE_EQ_INT(1, fth_model_num_moe_layers(&m));
  fth_layer_shape s = fth_model_layer_shape(&m, 1);
  FTH_ENSURE(s.is_moe);
  /* QKV, out, router, expert up, expert down, shared up, shared down. */
  FTH_ENSURE_EQ_INT(7, s.num_linears);
  FTH_ENSURE(s.lin[2].part == FTH_PART_ROUTER && s.lin[2].shard == FTH_SHARD_NONE);
  FTH_ENSURE_NEAR(4.0, s.lin[2].out, 0); /* one logit per expert */
  FTH_ENSURE(s.lin[3].part == FTH_PART_EXPERT && s.lin[3].shard == FTH_SHARD_COLUMN);
  FTH_ENSURE(s.lin[4].part == FTH_PART_EXPERT && s.lin[4].shard == FTH_SHARD_ROW);
  FTH_ENSURE(s.lin[5].part == FTH_PART_SHARED && s.lin[6].part == FTH_PART_SHARED);
  /* Router 4 x 4 = 16; one expert: up 4 -> 2 x 6 = 48, down 6 x 4 = 24, 72;
   * the shared expert likewise 72; no dense MLP in an MoE block. */
  FTH_ENSURE_NEAR(16.0, s.params_router, 0);
  FTH_ENSURE_NEAR(72.0, s.params_per_expert, 0);
  FTH_ENSURE_NEAR(72.0, s.params_shared, 0);
  FTH_ENSURE_NEAR(0.0, s.params_mlp, 0);
  fth_param_count c = fth_model_params(&m);
  /* Dense block: attention 64 + SwiGLU 4 -> 16 (64) and 8 -> 4 (32) + norms 8 = 168.
   * MoE block: 64 + 8 + 16 + 72 shared = 160, + 4 x 72 = 448 (active + 2 x 72 = 304).
   * Total: embedding 40 + head 40 + final 4 + 2 x 168 + 448 = 868; active
   * 868 - (4 - 2) x 72 x 1 MoE block = 724. */
  FTH_ENSURE_NEAR(168.0, c.dense_layer, 0);
  FTH_ENSURE_NEAR(448.0, c.moe_layer, 0);
  FTH_ENSURE_NEAR(304.0, c.moe_layer_active, 0);
  FTH_ENSURE_NEAR(288.0, c.experts_total, 0);
  FTH_ENSURE_NEAR(868.0, c.total, 0);
  FTH_ENSURE_NEAR(724.0, c.active, 0);
  /* FLOPs of the MoE block at seq 1: attention 2 x 64 = 128, router 2 x 16 =
   * 32, experts top 2 x 2 x 72 = 288, shared 2 x 72 = 144, core 2 x 2 x 4 x 1
   * = 16: forward 608; weight gradient = linears 592 (router included). */
  fth_layer_flops f = fth_model_layer_flops(&m, 1, 1);
  FTH_ENSURE_NEAR(128.0, f.fwd_part[FTH_PART_ATTN], 0);
  FTH_ENSURE_NEAR(32.0, f.fwd_part[FTH_PART_ROUTER], 0);
  FTH_ENSURE_NEAR(288.0, f.fwd_part[FTH_PART_EXPERT], 0);
  FTH_ENSURE_NEAR(144.0, f.fwd_part[FTH_PART_SHARED], 0);
  FTH_ENSURE_NEAR(0.0, f.fwd_part[FTH_PART_MLP], 0);
  FTH_ENSURE_NEAR(608.0, f.fwd_total, 0);
  FTH_ENSURE_NEAR(592.0, f.bwd_weight, 0);
  FTH_ENSURE_NEAR(592.0 + 32.0, f.bwd_data, 0);
  /* Model at seq 1: dense block 128 + 192 + 16 = 336; 2 x 336 + 608 + LM head 80 = 1360. */
  FTH_ENSURE_NEAR(1360.0, fth_model_fwd_flops_per_token(&m, 1), 0);
  /* One expert only: a dense model; the MoE shape request falls back to dense. */
  m.num_experts = 1;
  m.top_k = 1;
  FTH_ENSURE(fth_model_check(&m, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(0, fth_model_num_moe_layers(&m));
  FTH_ENSURE_EQ_INT(0, fth_model_layer_shape(&m, 1).is_moe);
  return 0;
}

/* MLA: h 8, 2 heads, q_lora 4, kv_lora 3, nope 2, rope 1, v 2; plain MLP 4h. */
static fth_model_def tiny_mla(void) {
  fth_model_def m = fth_model_def_default();
  m.d_model = 8;
  m.n_layers = 1;
  m.num_heads = 2;
  m.vocab_size = 10;
  m.q_lora_rank = 4;
  m.kv_lora_rank = 3;
  m.qk_nope_head_dim = 2;
  m.qk_rope_head_dim = 1;
  m.v_head_dim = 2;
  return m;
}

static int tiny_mla_by_hand(void) {
  fth_model_def m = tiny_mla();
  fth_error err;
  FTH_ENSURE(fth_model_check(&m, &err) == FTH_OK);
  fth_layer_shape s = fth_model_layer_shape(&m, 0);
  /* q_a 8 -> 4 (32, replicated), q_b 4 -> 2 x (2 + 1) = 6 (24, column),
   * kv_a 8 -> 3 + 1 = 4 (32, replicated), kv_b 3 -> 2 x (2 + 2) = 8 (24,
   * column), o 2 x 2 = 4 -> 8 (32, row): 144. Norms 2 x 8 + 4 + 3 = 23. */
  FTH_ENSURE_EQ_INT(7, s.num_linears);
  FTH_ENSURE(s.lin[0].shard == FTH_SHARD_NONE && s.lin[0].out == 4.0);
  FTH_ENSURE(s.lin[1].shard == FTH_SHARD_COLUMN && s.lin[1].out == 6.0);
  FTH_ENSURE(s.lin[2].shard == FTH_SHARD_NONE && s.lin[2].out == 4.0);
  FTH_ENSURE(s.lin[3].shard == FTH_SHARD_COLUMN && s.lin[3].in == 3.0 && s.lin[3].out == 8.0);
  FTH_ENSURE(s.lin[4].shard == FTH_SHARD_ROW && s.lin[4].in == 4.0 && s.lin[4].out == 8.0);
  FTH_ENSURE_NEAR(144.0, s.params_attn, 0);
  FTH_ENSURE_NEAR(23.0, s.params_norm, 0);
  FTH_ENSURE_NEAR(2.0, s.heads, 0);
  FTH_ENSURE_NEAR(2.0, s.kv_heads, 0); /* every head has its own K and V */
  FTH_ENSURE_NEAR(3.0, s.d_qk, 0);
  FTH_ENSURE_NEAR(2.0, s.d_v, 0);
  /* Cache: latent 3 + RoPE key 1 = 4 per layer. */
  FTH_ENSURE_NEAR(4.0, fth_model_kv_cache_elems_per_token(&m), 0);
  /* Core at seq 3 (context 2): 2 x 2 heads x (3 + 2) x 2 = 40. */
  FTH_ENSURE_NEAR(40.0, fth_model_layer_flops(&m, 0, 3).fwd_attn_core, 0);
  /* Without q_lora: q 8 -> 6 column (48); attention 48 + 32 + 24 + 32 = 136;
   * norms 16 + 3 = 19. */
  m.q_lora_rank = 0;
  s = fth_model_layer_shape(&m, 0);
  FTH_ENSURE_EQ_INT(6, s.num_linears);
  FTH_ENSURE(s.lin[0].shard == FTH_SHARD_COLUMN && s.lin[0].out == 6.0);
  FTH_ENSURE_NEAR(136.0, s.params_attn, 0);
  FTH_ENSURE_NEAR(19.0, s.params_norm, 0);
  return 0;
}

/* ---- KV cache of published models ------------------------------------------------------ */

static int kv_cache(void) {
  fth_model_def m = llama31_405b();
  /* GQA: 126 layers x 2 x 8 KV heads x 128 = 258,048 elements per token. */
  FTH_ENSURE_NEAR(258048.0, fth_model_kv_cache_elems_per_token(&m), 0);
  m = mixtral_8x7b();
  /* 32 x 2 x 8 x 128 = 65,536 (all blocks MoE; the attention is the same). */
  FTH_ENSURE_NEAR(65536.0, fth_model_kv_cache_elems_per_token(&m), 0);
  m = deepseek_v3();
  /* MLA: 61 layers x (512 + 64) = 35,136 elements per token. */
  FTH_ENSURE_NEAR(35136.0, fth_model_kv_cache_elems_per_token(&m), 0);
  m = gpt3_175b();
  /* MHA: 96 x 2 x 12288 = 2,359,296. */
  FTH_ENSURE_NEAR(2359296.0, fth_model_kv_cache_elems_per_token(&m), 0);
  return 0;
}

/* ---- saved activations ------------------------------------------------------------------ */

/* Korthikanti et al. 2022: GPT block, 2-byte activations, no flash:
 * 34 s b h + 5 a s^2 b without parallelism (Sec. 4.1, eq. 1); 10 sbh +
 * 24 sbh / t + 5 a s^2 b / t with TP t (Sec. 4.2.2, eq. 2); 34 sbh / t +
 * 5 a s^2 b / t with SP (eq. 4); selective recompute 34 sbh / t (eq. 6);
 * full recompute 2 sbh (Sec. 5). Per token: divide by s b. */
static int korthikanti(void) {
  fth_model_def m = gpt3_175b();
  const double h = 12288, a = 96, s = 2048, t = 8;
  fth_layer_activations la = fth_model_layer_activations(&m, 0, 2, 0);
  FTH_ENSURE_NEAR(10.0 * h, la.replicated, 1e-15);
  FTH_ENSURE_NEAR(24.0 * h, la.sharded, 1e-15);
  FTH_ENSURE_NEAR(5.0 * a, la.score_per_seq, 1e-15);
  FTH_ENSURE_NEAR(0.0, la.expert_per_routed_token, 0);
  double none =
      fth_model_activation_bytes_per_token(&m, 0, FTH_RECOMPUTE_NONE, 1, 1, 0, s, 2, 0, 0);
  FTH_ENSURE_NEAR(34.0 * h + 5.0 * a * s, none, 1e-12);
  double tp = fth_model_activation_bytes_per_token(&m, 0, FTH_RECOMPUTE_NONE, 8, 1, 0, s, 2, 0, 0);
  FTH_ENSURE_NEAR(10.0 * h + 24.0 * h / t + 5.0 * a * s / t, tp, 1e-12);
  double sp = fth_model_activation_bytes_per_token(&m, 0, FTH_RECOMPUTE_NONE, 8, 1, 1, s, 2, 0, 0);
  FTH_ENSURE_NEAR(34.0 * h / t + 5.0 * a * s / t, sp, 1e-12);
  double sel =
      fth_model_activation_bytes_per_token(&m, 0, FTH_RECOMPUTE_SELECTIVE, 8, 1, 1, s, 2, 0, 0);
  FTH_ENSURE_NEAR(34.0 * h / t, sel, 1e-12);
  double full =
      fth_model_activation_bytes_per_token(&m, 0, FTH_RECOMPUTE_FULL, 8, 1, 0, s, 2, 0, 0);
  FTH_ENSURE_NEAR(2.0 * h, full, 1e-12);
  full = fth_model_activation_bytes_per_token(&m, 0, FTH_RECOMPUTE_FULL, 8, 1, 1, s, 2, 0, 0);
  FTH_ENSURE_NEAR(2.0 * h / t, full, 1e-12);
  /* The same TP-only figure in numbers: (10 + 24 / 8) x 12288 + 5 x 96 x
   * 2048 / 8 = 159,744 + 122,880 = 282,624 bytes per token per layer. */
  FTH_ENSURE_NEAR(282624.0, tp, 1e-12);
  return 0;
}

static int activations_by_hand(void) {
  /* Tiny GPT block (h 4, a 2, plain f 16), w 2: replicated QKV input 8 +
   * attention mask 4 + norm inputs 16 + MLP input 8 + MLP mask 4 = 40 (10 h);
   * sharded Q, K 16 + V 8 + projection input 8 + GeLU in/out 64 = 96 (24 h);
   * scores (2 + 1 + 2) x 2 heads = 10 per key. No parallelism, seq 3:
   * 40 + 96 + 30 = 166 = 34 h + 5 a s. */
  fth_model_def m = tiny_dense();
  fth_layer_activations la = fth_model_layer_activations(&m, 0, 2, 0);
  FTH_ENSURE_NEAR(40.0, la.replicated, 0);
  FTH_ENSURE_NEAR(96.0, la.sharded, 0);
  FTH_ENSURE_NEAR(10.0, la.score_per_seq, 0);
  FTH_ENSURE_NEAR(
      166.0, fth_model_activation_bytes_per_token(&m, 0, FTH_RECOMPUTE_NONE, 1, 1, 0, 3, 2, 0, 0),
      0);
  /* fp32 activations (w 4), masks still 1 byte: replicated 4 x 4 x 4 + 2 x 4
   * = 72; sharded 2 x 96 = 192; scores (4 + 1 + 4) x 2 = 18. */
  la = fth_model_layer_activations(&m, 0, 4, 0);
  FTH_ENSURE_NEAR(72.0, la.replicated, 0);
  FTH_ENSURE_NEAR(192.0, la.sharded, 0);
  FTH_ENSURE_NEAR(18.0, la.score_per_seq, 0);

  /* Tiny GQA SwiGLU block (h 8, a 4, kv 2, hd 2, f 12), w 2, no dropout:
   * replicated QKV input 16 + norms 32 + MLP input 16 = 64; sharded Q, K
   * 2 x (4 + 2) x 2 = 24, V 2 x 2 x 2 = 8, projection input 2 x 4 x 2 = 16,
   * gate, up and product 3 x 2 x 12 = 72: 120; scores: softmax output only,
   * 2 x 4 = 8 per key. Flash: no scores, + fp32 LSE 4 x 4 heads = 16 sharded. */
  m = tiny_gqa();
  la = fth_model_layer_activations(&m, 0, 2, 0);
  FTH_ENSURE_NEAR(64.0, la.replicated, 0);
  FTH_ENSURE_NEAR(120.0, la.sharded, 0);
  FTH_ENSURE_NEAR(8.0, la.score_per_seq, 0);
  la = fth_model_layer_activations(&m, 0, 2, 1);
  FTH_ENSURE_NEAR(136.0, la.sharded, 0);
  FTH_ENSURE_NEAR(0.0, la.score_per_seq, 0);
  /* TP 2, seq 5: no SP 64 + 120 / 2 + 8 x 5 / 2 = 144; SP 32 + 60 + 20 = 112;
   * selective with SP 32 + 60 = 92; flash with SP 32 + 136 / 2 = 100; full
   * recompute h w = 16, with SP 8. */
  FTH_ENSURE_NEAR(
      144.0, fth_model_activation_bytes_per_token(&m, 0, FTH_RECOMPUTE_NONE, 2, 1, 0, 5, 2, 0, 0),
      0);
  FTH_ENSURE_NEAR(
      112.0, fth_model_activation_bytes_per_token(&m, 0, FTH_RECOMPUTE_NONE, 2, 1, 1, 5, 2, 0, 0),
      0);
  FTH_ENSURE_NEAR(
      92.0,
      fth_model_activation_bytes_per_token(&m, 0, FTH_RECOMPUTE_SELECTIVE, 2, 1, 1, 5, 2, 0, 0), 0);
  FTH_ENSURE_NEAR(
      100.0, fth_model_activation_bytes_per_token(&m, 0, FTH_RECOMPUTE_NONE, 2, 1, 1, 5, 2, 1, 0),
      0);
  FTH_ENSURE_NEAR(
      16.0, fth_model_activation_bytes_per_token(&m, 0, FTH_RECOMPUTE_FULL, 2, 1, 0, 5, 2, 0, 0),
      0);
  FTH_ENSURE_NEAR(
      8.0, fth_model_activation_bytes_per_token(&m, 0, FTH_RECOMPUTE_FULL, 2, 1, 1, 5, 2, 0, 0), 0);

  /* Tiny MoE block (h 4, a 2, hd 2, 4 experts of 6, 1 shared, SwiGLU), w 2:
   * replicated QKV input 8 + norms 16 + router input 8 + fp32 probabilities
   * 4 x 4 = 16 = 48; sharded Q, K 16 + V 8 + projection input 8 + shared
   * expert 3 x 2 x 6 = 36 = 68; per routed (token, expert): input 2 x 4 +
   * 3 x 2 x 6 = 44; scores 2 x 2 = 4 per key. TP 2, TP_MoE 1, no SP, seq 4,
   * 2 routed per token: 48 + 68 / 2 + 4 x 4 / 2 + 44 x 2 = 178. */
  m = tiny_moe();
  la = fth_model_layer_activations(&m, 1, 2, 0);
  FTH_ENSURE_NEAR(48.0, la.replicated, 0);
  FTH_ENSURE_NEAR(68.0, la.sharded, 0);
  FTH_ENSURE_NEAR(44.0, la.expert_per_routed_token, 0);
  FTH_ENSURE_NEAR(4.0, la.score_per_seq, 0);
  FTH_ENSURE_NEAR(
      178.0, fth_model_activation_bytes_per_token(&m, 1, FTH_RECOMPUTE_NONE, 2, 1, 0, 4, 2, 0, 2),
      0);
  /* TP_MoE 2 halves the routed part: 48 + 34 + 8 + 44 = 134. */
  FTH_ENSURE_NEAR(
      134.0, fth_model_activation_bytes_per_token(&m, 1, FTH_RECOMPUTE_NONE, 2, 2, 0, 4, 2, 0, 2),
      0);

  /* Tiny MLA block (h 8, a 2, q_lora 4, kv_lora 3, nope 2, rope 1, v 2,
   * plain f 32), w 2: replicated QKV input 16 + mask 8 + latent norm inputs
   * and up-projection inputs 2 x 2 x (4 + 3) = 28 + norms 32 + MLP input 16
   * + mask 8 = 108; sharded Q, K 2 x (2 + 2) x 3 = 24, V 2 x 2 x 2 = 8,
   * projection input 8, GeLU 2 x 2 x 32 = 128: 168; scores 5 x 2 = 10. */
  m = tiny_mla();
  la = fth_model_layer_activations(&m, 0, 2, 0);
  FTH_ENSURE_NEAR(108.0, la.replicated, 0);
  FTH_ENSURE_NEAR(168.0, la.sharded, 0);
  FTH_ENSURE_NEAR(10.0, la.score_per_seq, 0);
  return 0;
}

/* ---- refusals ----------------------------------------------------------------------------- */

/* The def must be refused with FTH_EINVAL at `path`, in "expected ..., got ..." style. */
static int refused(const fth_model_def *m, const char *path) {
  fth_error err;
  fth_error_clear(&err);
  FTH_ENSURE(fth_model_check(m, &err) == FTH_EINVAL);
  FTH_ENSURE(err.status == FTH_EINVAL);
  if (strcmp(err.path, path) != 0) {
    fprintf(stderr, "expected path %s, got %s (%s)\n", path, err.path, err.msg);
    return 1;
  }
  FTH_ENSURE(strncmp(err.msg, "expected ", 9) == 0);
  FTH_ENSURE(strstr(err.msg, ", got ") != NULL);
  return 0;
}

static int refusals_sizes(void) {
  fth_model_def m = gpt3_175b();
  m.d_model = 0;
  FTH_RUN(refused(&m, "d_model"));
  m = gpt3_175b();
  m.n_layers = 0;
  FTH_RUN(refused(&m, "n_layers"));
  m = gpt3_175b();
  m.num_heads = -1;
  FTH_RUN(refused(&m, "num_heads"));
  m = mixtral_8x7b();
  m.num_kv_heads = 5; /* 32 % 5 != 0 */
  FTH_RUN(refused(&m, "num_kv_heads"));
  m.num_kv_heads = -8;
  FTH_RUN(refused(&m, "num_kv_heads"));
  m = gpt3_175b();
  m.head_dim = -1;
  FTH_RUN(refused(&m, "head_dim"));
  m.d_model = 12290; /* not a multiple of 96 heads and no head_dim given */
  m.head_dim = 0;
  FTH_RUN(refused(&m, "head_dim"));
  m.head_dim = 128;
  FTH_ENSURE(fth_model_check(&m, NULL) == FTH_OK);
  m = gpt3_175b();
  m.ffn_hidden = -1;
  FTH_RUN(refused(&m, "ffn_hidden_size"));
  m.ffn_hidden = 0;
  m.mlp_ratio = 0;
  FTH_RUN(refused(&m, "mlp_ratio"));
  m.ffn_hidden = 1000; /* the ratio is unused then */
  FTH_ENSURE(fth_model_check(&m, NULL) == FTH_OK);
  m = gpt3_175b();
  m.vocab_size = 0;
  FTH_RUN(refused(&m, "vocab_size"));
  m = gpt3_175b();
  m.max_seq_len = 0;
  FTH_RUN(refused(&m, "max_sequence_length"));
  return 0;
}

static int refusals_moe_mla(void) {
  fth_error err;
  fth_model_def m = mixtral_8x7b();
  m.top_k = 9;
  FTH_RUN(refused(&m, "num_selected_experts"));
  FTH_ENSURE(fth_model_check(&m, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.msg, "expected <= num_regular_experts (8), got 9") == 0);
  m.top_k = 0; /* an MoE model must route somewhere */
  FTH_RUN(refused(&m, "num_selected_experts"));
  m = gpt3_175b();
  m.top_k = 2; /* dense model with selected experts but none to select */
  FTH_RUN(refused(&m, "num_selected_experts"));
  m = mixtral_8x7b();
  m.num_experts = -1;
  FTH_RUN(refused(&m, "num_regular_experts"));
  m = mixtral_8x7b();
  m.num_shared_experts = -1;
  FTH_RUN(refused(&m, "num_shared_experts"));
  m = mixtral_8x7b();
  m.expert_ffn_hidden = -1;
  FTH_RUN(refused(&m, "expert_ffn_hidden_size"));
  m = mixtral_8x7b();
  m.first_dense_layers = 33;
  FTH_RUN(refused(&m, "first_dense_layers"));
  m.first_dense_layers = 32; /* all dense: allowed, no MoE block left */
  FTH_ENSURE(fth_model_check(&m, NULL) == FTH_OK);
  FTH_ENSURE_EQ_INT(0, fth_model_num_moe_layers(&m));
  m = mixtral_8x7b();
  m.moe_layer_interval = -1;
  FTH_RUN(refused(&m, "moe_layer_interval"));
  m = deepseek_v3();
  m.q_lora_rank = -1;
  FTH_RUN(refused(&m, "q_lora_rank"));
  m = deepseek_v3();
  m.kv_lora_rank = -1;
  FTH_RUN(refused(&m, "kv_lora_rank"));
  m = deepseek_v3();
  m.qk_nope_head_dim = 0;
  FTH_RUN(refused(&m, "qk_nope_head_dim"));
  m = deepseek_v3();
  m.qk_rope_head_dim = 0;
  FTH_RUN(refused(&m, "qk_rope_head_dim"));
  m = deepseek_v3();
  m.v_head_dim = 0;
  FTH_RUN(refused(&m, "v_head_dim"));
  /* MLA takes no head size from d_model / heads: 7168 % 100 != 0 is fine. */
  m = deepseek_v3();
  m.num_heads = 100;
  FTH_ENSURE(fth_model_check(&m, NULL) == FTH_OK);
  return 0;
}

int model_test(void) {
  FTH_RUN(defaults());
  FTH_RUN(published_dense());
  FTH_RUN(published_moe());
  FTH_RUN(tiny_dense_by_hand());
  FTH_RUN(tiny_gqa_by_hand());
  FTH_RUN(tiny_moe_by_hand());
  FTH_RUN(tiny_mla_by_hand());
  FTH_RUN(kv_cache());
  FTH_RUN(korthikanti());
  FTH_RUN(activations_by_hand());
  FTH_RUN(refusals_sizes());
  FTH_RUN(refusals_moe_mla());
  return 0;
}
