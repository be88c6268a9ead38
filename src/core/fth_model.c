/* fth_model.c: shapes, parameters, FLOPs and activation sizes of a decoder-only
 * transformer (dense or MoE; MHA, GQA or MLA; plain or gated MLP). */
#include "fth_model.h"

#include <math.h>
#include <string.h>

fth_model_def fth_model_def_default(void) {
  fth_model_def d;
  memset(&d, 0, sizeof d);
  d.mlp_ratio = 4.0;
  d.max_seq_len = 2048;
  d.moe_layer_interval = 1;
  return d;
}

static int kv_heads(const fth_model_def *d) {
  return d->num_kv_heads > 0 ? d->num_kv_heads : d->num_heads;
}

static double head_dim(const fth_model_def *d) {
  return d->head_dim > 0 ? (double)d->head_dim : (double)d->d_model / d->num_heads;
}

static double ffn(const fth_model_def *d) {
  return d->ffn_hidden > 0 ? d->ffn_hidden : d->mlp_ratio * d->d_model;
}

static double expert_ffn(const fth_model_def *d) {
  return d->expert_ffn_hidden > 0 ? d->expert_ffn_hidden : ffn(d);
}

static int is_moe_model(const fth_model_def *d) {
  return d->num_experts > 1;
}

fth_status fth_model_check(const fth_model_def *d, fth_error *err) {
  if (d->d_model < 1)
    return fth_fail(err, FTH_EINVAL, "d_model", "expected >= 1, got %d", d->d_model);
  if (d->n_layers < 1)
    return fth_fail(err, FTH_EINVAL, "n_layers", "expected >= 1, got %d", d->n_layers);
  if (d->num_heads < 1)
    return fth_fail(err, FTH_EINVAL, "num_heads", "expected >= 1, got %d", d->num_heads);
  if (d->num_kv_heads < 0 || (d->num_kv_heads > 0 && d->num_heads % d->num_kv_heads != 0))
    return fth_fail(err, FTH_EINVAL, "num_kv_heads", "expected a divisor of num_heads %d, got %d",
                    d->num_heads, d->num_kv_heads);
  if (d->head_dim < 0)
    return fth_fail(err, FTH_EINVAL, "head_dim", "expected >= 1, got %d", d->head_dim);
  if (d->head_dim == 0 && d->kv_lora_rank == 0 && d->d_model % d->num_heads != 0)
    return fth_fail(err, FTH_EINVAL, "head_dim",
                    "d_model %d is not a multiple of num_heads %d: give head_dim", d->d_model,
                    d->num_heads);
  if (!(d->ffn_hidden >= 0 && isfinite(d->ffn_hidden)))
    return fth_fail(err, FTH_EINVAL, "ffn_hidden_size", "expected > 0, got %g", d->ffn_hidden);
  if (d->ffn_hidden == 0 && !(d->mlp_ratio > 0 && isfinite(d->mlp_ratio)))
    return fth_fail(err, FTH_EINVAL, "mlp_ratio", "expected > 0, got %g", d->mlp_ratio);
  if (d->vocab_size < 1)
    return fth_fail(err, FTH_EINVAL, "vocab_size", "expected >= 1, got %d", d->vocab_size);
  if (d->max_seq_len < 1)
    return fth_fail(err, FTH_EINVAL, "max_sequence_length", "expected >= 1, got %d",
                    d->max_seq_len);
  if (d->num_experts < 0)
    return fth_fail(err, FTH_EINVAL, "num_regular_experts", "expected >= 0, got %d",
                    d->num_experts);
  if (is_moe_model(d)) {
    if (d->top_k < 1)
      return fth_fail(err, FTH_EINVAL, "num_selected_experts",
                      "an MoE model needs num_selected_experts >= 1, got %d", d->top_k);
    if (d->top_k > d->num_experts)
      return fth_fail(err, FTH_EINVAL, "num_selected_experts",
                      "expected <= num_regular_experts %d, got %d", d->num_experts, d->top_k);
  }
  if (d->num_shared_experts < 0)
    return fth_fail(err, FTH_EINVAL, "num_shared_experts", "expected >= 0, got %d",
                    d->num_shared_experts);
  if (!(d->expert_ffn_hidden >= 0 && isfinite(d->expert_ffn_hidden)))
    return fth_fail(err, FTH_EINVAL, "expert_ffn_hidden_size", "expected >= 0, got %g",
                    d->expert_ffn_hidden);
  if (d->first_dense_layers < 0 || d->first_dense_layers > d->n_layers)
    return fth_fail(err, FTH_EINVAL, "first_dense_layers", "expected 0..n_layers (%d), got %d",
                    d->n_layers, d->first_dense_layers);
  if (d->moe_layer_interval < 0)
    return fth_fail(err, FTH_EINVAL, "moe_layer_interval", "expected >= 1, got %d",
                    d->moe_layer_interval);
  if (d->q_lora_rank < 0 || d->kv_lora_rank < 0)
    return fth_fail(err, FTH_EINVAL, d->q_lora_rank < 0 ? "q_lora_rank" : "kv_lora_rank",
                    "expected >= 0");
  if (d->kv_lora_rank > 0) {
    if (d->qk_nope_head_dim < 1)
      return fth_fail(err, FTH_EINVAL, "qk_nope_head_dim", "MLA needs qk_nope_head_dim >= 1");
    if (d->qk_rope_head_dim < 1)
      return fth_fail(err, FTH_EINVAL, "qk_rope_head_dim", "MLA needs qk_rope_head_dim >= 1");
    if (d->v_head_dim < 1)
      return fth_fail(err, FTH_EINVAL, "v_head_dim", "MLA needs v_head_dim >= 1");
  }
  return FTH_OK;
}

int fth_model_layer_is_moe(const fth_model_def *d, int layer) {
  if (!is_moe_model(d) || layer < d->first_dense_layers || layer >= d->n_layers) return 0;
  int k = d->moe_layer_interval > 1 ? d->moe_layer_interval : 1;
  return (layer - d->first_dense_layers) % k == 0;
}

int fth_model_num_moe_layers(const fth_model_def *d) {
  int n = 0;
  for (int i = 0; i < d->n_layers; i++) n += fth_model_layer_is_moe(d, i);
  return n;
}

static void push(fth_layer_shape *s, double in, double out, fth_shard shard, fth_part part) {
  FTH_ASSERT(s->num_linears < FTH_MAX_LINEARS);
  fth_linear *l = &s->lin[s->num_linears++];
  l->in = in;
  l->out = out;
  l->shard = shard;
  l->part = part;
}

fth_layer_shape fth_model_layer_shape(const fth_model_def *d, int moe) {
  fth_layer_shape s;
  memset(&s, 0, sizeof s);
  double h = d->d_model, a = d->num_heads;
  s.is_moe = moe && is_moe_model(d);
  s.params_norm = 2.0 * h; /* pre-attention and pre-MLP norm weights */
  if (d->kv_lora_rank > 0) {
    /* Multi-head latent attention (DeepSeek-AI 2024, DeepSeek-V2 Sec. 2.1):
     * queries optionally through a low-rank q_lora, keys and values through
     * a shared kv_lora latent plus a decoupled RoPE key. */
    double nope = d->qk_nope_head_dim, rope = d->qk_rope_head_dim, v = d->v_head_dim;
    double q = d->q_lora_rank, kv = d->kv_lora_rank;
    if (q > 0) {
      push(&s, h, q, FTH_SHARD_NONE, FTH_PART_ATTN);
      push(&s, q, a * (nope + rope), FTH_SHARD_COLUMN, FTH_PART_ATTN);
      s.params_norm += q;
    } else {
      push(&s, h, a * (nope + rope), FTH_SHARD_COLUMN, FTH_PART_ATTN);
    }
    push(&s, h, kv + rope, FTH_SHARD_NONE, FTH_PART_ATTN);
    push(&s, kv, a * (nope + v), FTH_SHARD_COLUMN, FTH_PART_ATTN);
    push(&s, a * v, h, FTH_SHARD_ROW, FTH_PART_ATTN);
    s.params_norm += kv;
    s.heads = a;
    s.kv_heads = a;
    s.d_qk = nope + rope;
    s.d_v = v;
    s.kv_cache_per_token = kv + rope; /* the latent and the RoPE key are cached */
  } else {
    double hd = head_dim(d), kvh = kv_heads(d);
    /* Fused QKV (column parallel), output projection (row parallel). */
    push(&s, h, (a + 2.0 * kvh) * hd, FTH_SHARD_COLUMN, FTH_PART_ATTN);
    push(&s, a * hd, h, FTH_SHARD_ROW, FTH_PART_ATTN);
    s.heads = a;
    s.kv_heads = kvh;
    s.d_qk = hd;
    s.d_v = hd;
    s.kv_cache_per_token = 2.0 * kvh * hd;
  }
  double gate = d->gated_mlp ? 2.0 : 1.0; /* SwiGLU: gate and up fused */
  if (!s.is_moe) {
    double f = ffn(d);
    push(&s, h, gate * f, FTH_SHARD_COLUMN, FTH_PART_MLP);
    push(&s, f, h, FTH_SHARD_ROW, FTH_PART_MLP);
  } else {
    double f = expert_ffn(d);
    push(&s, h, (double)d->num_experts, FTH_SHARD_NONE, FTH_PART_ROUTER);
    push(&s, h, gate * f, FTH_SHARD_COLUMN, FTH_PART_EXPERT);
    push(&s, f, h, FTH_SHARD_ROW, FTH_PART_EXPERT);
    if (d->num_shared_experts > 0) {
      double fs = f * d->num_shared_experts;
      push(&s, h, gate * fs, FTH_SHARD_COLUMN, FTH_PART_SHARED);
      push(&s, fs, h, FTH_SHARD_ROW, FTH_PART_SHARED);
    }
  }
  for (int i = 0; i < s.num_linears; i++) {
    double p = s.lin[i].in * s.lin[i].out;
    switch (s.lin[i].part) {
    case FTH_PART_ATTN:
      s.params_attn += p;
      break;
    case FTH_PART_MLP:
      s.params_mlp += p;
      break;
    case FTH_PART_ROUTER:
      s.params_router += p;
      break;
    case FTH_PART_EXPERT:
      s.params_per_expert += p;
      break;
    case FTH_PART_SHARED:
      s.params_shared += p;
      break;
    default:
      break;
    }
  }
  return s;
}

fth_param_count fth_model_params(const fth_model_def *d) {
  fth_param_count c;
  memset(&c, 0, sizeof c);
  double h = d->d_model;
  c.embedding = (double)d->vocab_size * h + (d->learned_pos_emb ? (double)d->max_seq_len * h : 0.0);
  c.lm_head = d->tied_embeddings ? 0.0 : (double)d->vocab_size * h;
  fth_layer_shape ds = fth_model_layer_shape(d, 0);
  c.dense_layer = ds.params_attn + ds.params_mlp + ds.params_norm;
  int n_moe = fth_model_num_moe_layers(d);
  double dense_total = (double)(d->n_layers - n_moe) * c.dense_layer;
  double moe_total = 0.0, moe_active = 0.0;
  if (n_moe > 0) {
    fth_layer_shape ms = fth_model_layer_shape(d, 1);
    double base = ms.params_attn + ms.params_norm + ms.params_router + ms.params_shared;
    c.moe_layer = base + d->num_experts * ms.params_per_expert;
    c.moe_layer_active = base + d->top_k * ms.params_per_expert;
    c.experts_total = (double)n_moe * d->num_experts * ms.params_per_expert;
    moe_total = n_moe * c.moe_layer;
    moe_active = n_moe * c.moe_layer_active;
  }
  double final_norm = h;
  c.total = c.embedding + c.lm_head + final_norm + dense_total + moe_total;
  c.active = c.embedding + c.lm_head + final_norm + dense_total + moe_active;
  return c;
}

fth_layer_flops fth_model_layer_flops(const fth_model_def *d, int moe, double seq) {
  fth_layer_flops f;
  memset(&f, 0, sizeof f);
  fth_layer_shape s = fth_model_layer_shape(d, moe);
  double lin = 0.0;
  for (int i = 0; i < s.num_linears; i++) {
    double x = 2.0 * s.lin[i].in * s.lin[i].out; /* one multiply-add per weight */
    if (s.lin[i].part == FTH_PART_EXPERT) x *= d->top_k;
    f.fwd_part[s.lin[i].part] += x;
    lin += x;
  }
  /* Causal self-attention: query i sees i keys, (seq + 1) / 2 on average;
   * Q K^T costs 2 d_qk and P V 2 d_v FLOP per (query, key, head). */
  double ctx = (seq + 1.0) / 2.0;
  f.fwd_attn_core = 2.0 * s.heads * (s.d_qk + s.d_v) * ctx;
  f.fwd_total = lin + f.fwd_attn_core;
  f.bwd_data = 2.0 * lin + 2.0 * f.fwd_attn_core;
  f.bwd_weight = 2.0 * lin;
  return f;
}

double fth_model_lm_head_flops_per_token(const fth_model_def *d) {
  return 2.0 * (double)d->d_model * (double)d->vocab_size;
}

double fth_model_fwd_flops_per_token(const fth_model_def *d, double seq) {
  int n_moe = fth_model_num_moe_layers(d);
  double total = fth_model_lm_head_flops_per_token(d);
  total += (double)(d->n_layers - n_moe) * fth_model_layer_flops(d, 0, seq).fwd_total;
  if (n_moe > 0) total += (double)n_moe * fth_model_layer_flops(d, 1, seq).fwd_total;
  return total;
}

fth_layer_activations fth_model_layer_activations(const fth_model_def *d, int moe, double w,
                                                  int flash) {
  /* Korthikanti et al. 2022 Sec. 4.1, term by term, generalised: the paper's
   * GPT block (w = 2, dropout, plain MLP with f = 4h, MHA) stores
   *   replicated: two norm inputs 4sbh, the QKV input 2sbh, the MLP input
   *               2sbh, two dropout masks 2sbh                     = 10 sbh
   *   sharded:    Q and K 4sbh, V 2sbh, projection input 2sbh, GeLU input
   *               8sbh and output 8sbh                             = 24 sbh
   *   scores:     softmax output 2as^2b, its dropout mask as^2b and output
   *               2as^2b                                           = 5 as^2b
   * Gated (modern) models have no dropout: masks and the dropout copy go. */
  fth_layer_activations a;
  memset(&a, 0, sizeof a);
  fth_layer_shape s = fth_model_layer_shape(d, moe);
  double h = d->d_model;
  int dropout = !d->gated_mlp;
  a.replicated = 4.0 * w * h + (dropout ? 2.0 * h : 0.0);
  /* Q, K, V and the projection input at their real widths. */
  a.sharded = w * (s.heads * s.d_qk + s.kv_heads * s.d_qk + s.kv_heads * s.d_v + s.heads * s.d_v);
  if (d->kv_lora_rank > 0)
    a.replicated += w * ((double)d->kv_lora_rank + d->qk_rope_head_dim + d->q_lora_rank);
  double keep = d->gated_mlp ? 3.0 : 2.0; /* SwiGLU: gate, up, product; GeLU: input, output */
  if (!s.is_moe) {
    a.sharded += keep * w * ffn(d);
  } else {
    a.replicated += 4.0 * d->num_experts; /* fp32 router probabilities */
    a.sharded += keep * w * expert_ffn(d) * d->num_shared_experts;
    a.expert_per_routed_token = w * h + keep * w * expert_ffn(d);
  }
  a.score_per_seq = flash ? 0.0 : (w + (dropout ? 1.0 + w : 0.0)) * s.heads;
  return a;
}

double fth_model_activation_bytes_per_token(const fth_model_def *d, int moe, fth_recompute rc,
                                            int tp, int tp_moe, int sp, double seq, double w,
                                            int flash, double routed_per_token) {
  double t = tp > 0 ? tp : 1, tm = tp_moe > 0 ? tp_moe : 1;
  double rep_div = sp ? t : 1.0;
  if (rc == FTH_RECOMPUTE_FULL) return w * d->d_model / rep_div; /* the block input only */
  fth_layer_activations a = fth_model_layer_activations(d, moe, w, flash);
  double bytes =
      a.replicated / rep_div + a.sharded / t + a.expert_per_routed_token * routed_per_token / tm;
  if (rc == FTH_RECOMPUTE_NONE) bytes += a.score_per_seq * seq / t;
  if (flash) bytes += 4.0 * d->num_heads / t; /* fp32 log-sum-exp per query and head */
  return bytes;
}

double fth_model_kv_cache_elems_per_token(const fth_model_def *d) {
  fth_layer_shape s = fth_model_layer_shape(d, 0);
  return s.kv_cache_per_token * d->n_layers;
}
