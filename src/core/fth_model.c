/* fth_model.c: shapes, parameters, FLOPs and activation sizes of a decoder-only
 * transformer (dense or MoE; MHA, GQA or MLA; plain or gated MLP). */
#include "fth_model.h"

#include "fth_kernel.h"

#include <math.h>
#include <string.h>

/* Bytes of an fp32 scalar (router probabilities, flash-attention statistics). */
#define FP32_BYTES 4.0
/* Bytes of one dropout-mask element (Korthikanti et al. 2022 Sec. 4.1). */
#define MASK_BYTES 1.0

fth_model_def fth_model_def_default(void) {
  fth_model_def d;
  memset(&d, 0, sizeof d);
  d.mlp_ratio = 4.0;
  d.max_seq_len = 2048;
  d.moe_layer_interval = 1;
  /* Megatron-Core's Mamba defaults: TransformerConfig mamba_state_dim 128, mamba_head_dim 64,
   * mamba_num_groups 8; MambaMixer (megatron/core/ssm/mamba_mixer.py) d_conv 4 and chunk_size
   * 128, which NeMo's and Megatron-Bridge's Mamba layer specs do not override (mamba_ssm's own
   * Mamba2 module uses 256; HF configs carry their chunk_size). */
  d.mamba_state_dim = 128;
  d.mamba_head_dim = 64;
  d.mamba_num_groups = 8;
  d.mamba_conv_kernel = 4;
  d.mamba_chunk = 128;
  return d;
}

static int is_hybrid(const fth_model_def *d) {
  return d->hybrid_mamba > 0 || d->hybrid_attention > 0 || d->hybrid_mlp > 0 || d->hybrid_moe > 0;
}

void fth_model_shares(const fth_model_def *d, double *mamba, double *attn, double *mlp) {
  if (!is_hybrid(d) || d->n_layers < 1) {
    *mamba = 0.0;
    *attn = *mlp = 1.0;
    return;
  }
  double n = d->n_layers;
  *mamba = d->hybrid_mamba / n;
  *attn = d->hybrid_attention / n;
  *mlp = (d->hybrid_mlp + d->hybrid_moe) / n;
}

double fth_model_mamba_inner(const fth_model_def *d) {
  double p = d->mamba_head_dim > 0 ? d->mamba_head_dim : 64.0;
  double heads = d->mamba_num_heads > 0 ? d->mamba_num_heads : floor(2.0 * d->d_model / p);
  return heads * p;
}

static double mamba_heads(const fth_model_def *d) {
  return fth_model_mamba_inner(d) / (d->mamba_head_dim > 0 ? d->mamba_head_dim : 64.0);
}

/* The SSD ("state space dual") chunked algorithm of Dao & Gu 2024 (Sec. 6, Listing 1;
 * mamba_ssm's mamba_chunk_scan_combined): the sequence is cut into chunks of Q tokens;
 * per head of P channels with an N-wide state and per group of heads sharing B and C:
 *   1. intra-chunk (diagonal blocks, the quadratic "attention" form):
 *        C B^T per group, Q x Q x N per chunk: 2 Q N FLOP per token (computed whole);
 *        (C B^T o L) X per head, Q x Q x P per chunk, the causal mask skipping the upper
 *        half: 2 P (Q + 1) / 2 per token (the mean of attention's causal count);
 *   2. chunk states B^T X per head, N x Q x P per chunk: 2 N P per token;
 *   3. inter-chunk state passing, one N x P multiply-add per chunk: 2 N P / Q per token;
 *   4. state output C h per head, Q x N x P per chunk: 2 N P per token.
 * Plus the depthwise causal conv1d over x, B and C (H P + 2 G N channels, K taps, 2 FLOP
 * each). The element-wise rest (dt softplus and cumsum, D skip, gating) is costed as
 * element-wise work by fth_block. */
double fth_model_ssd_flops_per_token(const fth_model_def *d, double heads, double groups) {
  double q = d->mamba_chunk, n = d->mamba_state_dim, p = d->mamba_head_dim;
  double intra = groups * 2.0 * q * n + heads * 2.0 * p * (q + 1.0) / 2.0;
  double states = heads * (2.0 * n * p + 2.0 * n * p / q + 2.0 * n * p);
  double conv = 2.0 * d->mamba_conv_kernel * (heads * p + 2.0 * groups * n);
  return intra + states + conv;
}

static double kv_heads(const fth_model_def *d) {
  return d->num_kv_heads > 0 ? (double)d->num_kv_heads : (double)d->num_heads;
}

static double head_dim(const fth_model_def *d) {
  return d->head_dim > 0 ? (double)d->head_dim : (double)d->d_model / d->num_heads;
}

double fth_model_ffn_hidden(const fth_model_def *d) {
  return d->ffn_hidden > 0 ? d->ffn_hidden : d->mlp_ratio * d->d_model;
}

double fth_model_expert_ffn_hidden(const fth_model_def *d) {
  return d->expert_ffn_hidden > 0 ? d->expert_ffn_hidden : fth_model_ffn_hidden(d);
}

static int is_moe_model(const fth_model_def *d) {
  return d->num_experts > 1;
}

static int is_mla(const fth_model_def *d) {
  return d->kv_lora_rank > 0;
}

/* Gated-MLP (SwiGLU) models -- Llama, Mixtral, DeepSeek -- train without
 * dropout; plain-MLP GPT models keep Korthikanti's attention and MLP dropout. */
static int has_dropout(const fth_model_def *d) {
  return !d->gated_mlp;
}

static fth_status need_positive_int(fth_error *err, const char *path, int v) {
  if (v < 1) return fth_fail(err, FTH_EINVAL, path, "expected >= 1, got %d", v);
  return FTH_OK;
}

static fth_status need_nonneg_int(fth_error *err, const char *path, int v) {
  if (v < 0) return fth_fail(err, FTH_EINVAL, path, "expected >= 0, got %d", v);
  return FTH_OK;
}

fth_status fth_model_check(const fth_model_def *d, fth_error *err) {
  fth_status st;
  if ((st = need_positive_int(err, "d_model", d->d_model)) != FTH_OK) return st;
  if ((st = need_positive_int(err, "n_layers", d->n_layers)) != FTH_OK) return st;
  if ((st = need_positive_int(err, "num_heads", d->num_heads)) != FTH_OK) return st;
  if (d->num_kv_heads < 0 || (d->num_kv_heads > 0 && d->num_heads % d->num_kv_heads != 0))
    return fth_fail(err, FTH_EINVAL, "num_kv_heads",
                    "expected a divisor of num_heads (%d) or 0, got %d", d->num_heads,
                    d->num_kv_heads);
  if ((st = need_nonneg_int(err, "head_dim", d->head_dim)) != FTH_OK) return st;
  if (d->head_dim == 0 && !is_mla(d) && d->d_model % d->num_heads != 0)
    return fth_fail(err, FTH_EINVAL, "head_dim",
                    "expected a head_dim when d_model (%d) is not a multiple of num_heads (%d), "
                    "got 0",
                    d->d_model, d->num_heads);
  if (!(d->ffn_hidden >= 0 && isfinite(d->ffn_hidden)))
    return fth_fail(err, FTH_EINVAL, "ffn_hidden_size", "expected >= 0, got %g", d->ffn_hidden);
  if (d->ffn_hidden == 0 && !fth_positive(d->mlp_ratio))
    return fth_fail(err, FTH_EINVAL, "mlp_ratio", "expected > 0, got %g", d->mlp_ratio);
  if ((st = need_positive_int(err, "vocab_size", d->vocab_size)) != FTH_OK) return st;
  if ((st = need_positive_int(err, "max_sequence_length", d->max_seq_len)) != FTH_OK) return st;
  if ((st = need_nonneg_int(err, "num_regular_experts", d->num_experts)) != FTH_OK) return st;
  if ((st = need_nonneg_int(err, "num_selected_experts", d->top_k)) != FTH_OK) return st;
  if (is_moe_model(d) && d->top_k < 1)
    return fth_fail(err, FTH_EINVAL, "num_selected_experts",
                    "expected >= 1 with %d regular experts, got %d", d->num_experts, d->top_k);
  if (d->top_k > d->num_experts)
    return fth_fail(err, FTH_EINVAL, "num_selected_experts",
                    "expected <= num_regular_experts (%d), got %d", d->num_experts, d->top_k);
  if ((st = need_nonneg_int(err, "num_shared_experts", d->num_shared_experts)) != FTH_OK) return st;
  if (!(d->expert_ffn_hidden >= 0 && isfinite(d->expert_ffn_hidden)))
    return fth_fail(err, FTH_EINVAL, "expert_ffn_hidden_size", "expected >= 0, got %g",
                    d->expert_ffn_hidden);
  if (d->first_dense_layers < 0 || d->first_dense_layers > d->n_layers)
    return fth_fail(err, FTH_EINVAL, "first_dense_layers", "expected 0 to n_layers (%d), got %d",
                    d->n_layers, d->first_dense_layers);
  if ((st = need_nonneg_int(err, "moe_layer_interval", d->moe_layer_interval)) != FTH_OK) return st;
  if (!(d->attention_window >= 0 && d->attention_window <= 1e9))
    return fth_fail(err, FTH_EINVAL, "attention_window", "expected tokens in [0, 1e9], got %g",
                    d->attention_window);
  if ((st = need_nonneg_int(err, "full_attention_interval", d->full_attention_interval)) != FTH_OK)
    return st;
  if ((st = need_nonneg_int(err, "n_group", d->n_group)) != FTH_OK) return st;
  if ((st = need_nonneg_int(err, "topk_group", d->topk_group)) != FTH_OK) return st;
  if (d->mtp_layers < 0 || d->mtp_layers > FTH_MAX_MTP_LAYERS)
    return fth_fail(err, FTH_EINVAL, "num_nextn_predict_layers", "expected 0 to %d, got %d",
                    FTH_MAX_MTP_LAYERS, d->mtp_layers);
  if (d->n_group > 0 && (d->num_experts < 1 || d->num_experts % d->n_group != 0))
    return fth_fail(err, FTH_EINVAL, "n_group",
                    "expected a divisor of num_regular_experts (%d), got %d", d->num_experts,
                    d->n_group);
  if (d->topk_group > 0 && (d->n_group == 0 || d->topk_group > d->n_group))
    return fth_fail(err, FTH_EINVAL, "topk_group",
                    "expected 1 to n_group (%d) groups per token, got %d (give n_group too)",
                    d->n_group, d->topk_group);
  if ((st = need_nonneg_int(err, "hybrid_mamba_layers", d->hybrid_mamba)) != FTH_OK) return st;
  if ((st = need_nonneg_int(err, "hybrid_attention_layers", d->hybrid_attention)) != FTH_OK)
    return st;
  if ((st = need_nonneg_int(err, "hybrid_mlp_layers", d->hybrid_mlp)) != FTH_OK) return st;
  if ((st = need_nonneg_int(err, "hybrid_moe_layers", d->hybrid_moe)) != FTH_OK) return st;
  if (is_hybrid(d)) {
    int sub = d->hybrid_mamba + d->hybrid_attention + d->hybrid_mlp + d->hybrid_moe;
    if (d->n_layers != (sub + 1) / 2)
      return fth_fail(err, FTH_EINVAL, "n_layers",
                      "expected %d blocks for a hybrid of %d sub-layers (two a block), got %d",
                      (sub + 1) / 2, sub, d->n_layers);
    if ((d->hybrid_moe > 0) != is_moe_model(d))
      return fth_fail(err, FTH_EINVAL, "num_regular_experts",
                      "expected experts (> 1) exactly when the hybrid has MoE sub-layers (%d), "
                      "got %d",
                      d->hybrid_moe, d->num_experts);
    if (d->hybrid_moe > 0 && d->hybrid_mlp > 0)
      return fth_fail(err, FTH_EINVAL, "hybrid_mlp_layers",
                      "dense MLP and MoE sub-layers in one hybrid are not modelled, got %d and %d",
                      d->hybrid_mlp, d->hybrid_moe);
    if (d->hybrid_moe > 0 && (d->first_dense_layers > 0 || d->moe_layer_interval > 1))
      return fth_fail(err, FTH_EINVAL, "first_dense_layers",
                      "a hybrid places its MoE sub-layers by its pattern: expected no "
                      "first_dense_layers or moe_layer_interval");
  }
  if (d->hybrid_mamba > 0) {
    if ((st = need_positive_int(err, "mamba_state_dim", d->mamba_state_dim)) != FTH_OK) return st;
    if ((st = need_positive_int(err, "mamba_head_dim", d->mamba_head_dim)) != FTH_OK) return st;
    if ((st = need_nonneg_int(err, "mamba_num_heads", d->mamba_num_heads)) != FTH_OK) return st;
    if ((st = need_positive_int(err, "mamba_num_groups", d->mamba_num_groups)) != FTH_OK) return st;
    if ((st = need_positive_int(err, "mamba_conv_kernel", d->mamba_conv_kernel)) != FTH_OK)
      return st;
    if ((st = need_positive_int(err, "mamba_chunk_size", d->mamba_chunk)) != FTH_OK) return st;
    double heads = mamba_heads(d);
    if (heads < 1 || fmod(heads, d->mamba_num_groups) != 0)
      return fth_fail(err, FTH_EINVAL, "mamba_num_groups",
                      "expected a divisor of the %g Mamba heads, got %d", heads,
                      d->mamba_num_groups);
  }
  if ((st = need_nonneg_int(err, "q_lora_rank", d->q_lora_rank)) != FTH_OK) return st;
  if ((st = need_nonneg_int(err, "kv_lora_rank", d->kv_lora_rank)) != FTH_OK) return st;
  if (is_mla(d)) {
    /* MLA (DeepSeek-V2 Sec. 2.1) needs every per-head dimension. */
    if ((st = need_positive_int(err, "qk_nope_head_dim", d->qk_nope_head_dim)) != FTH_OK) return st;
    if ((st = need_positive_int(err, "qk_rope_head_dim", d->qk_rope_head_dim)) != FTH_OK) return st;
    if ((st = need_positive_int(err, "v_head_dim", d->v_head_dim)) != FTH_OK) return st;
  }
  return FTH_OK;
}

int fth_model_layer_is_moe(const fth_model_def *d, int layer) {
  if (!is_moe_model(d) || layer < d->first_dense_layers || layer >= d->n_layers) return 0;
  int k = d->moe_layer_interval > 1 ? d->moe_layer_interval : 1;
  return (layer - d->first_dense_layers) % k == 0;
}

int fth_model_num_moe_layers(const fth_model_def *d) {
  /* Closed form of counting fth_model_layer_is_moe over the layers: every
   * k-th of the n - first_dense layers after the dense ones, the first
   * included (constant time: layer counts can be large). */
  if (!is_moe_model(d) || d->first_dense_layers >= d->n_layers) return 0;
  int k = d->moe_layer_interval > 1 ? d->moe_layer_interval : 1;
  int rest = d->n_layers - (d->first_dense_layers > 0 ? d->first_dense_layers : 0);
  return (rest + k - 1) / k;
}

int fth_model_last_layer_moe(const fth_model_def *d) {
  return fth_model_num_moe_in(d, d->n_layers - 1, d->n_layers) > 0;
}

int fth_model_num_moe_in(const fth_model_def *d, int first, int last) {
  /* Layers i in [first, last) with i >= fd and (i - fd) % k == 0. */
  if (!is_moe_model(d)) return 0;
  int fd = d->first_dense_layers > 0 ? d->first_dense_layers : 0;
  int k = d->moe_layer_interval > 1 ? d->moe_layer_interval : 1;
  if (last > d->n_layers) last = d->n_layers;
  if (first < fd) first = fd;
  if (last <= first) return 0;
  int lo = (first - fd + k - 1) / k, hi = (last - 1 - fd) / k; /* ceil, floor */
  return hi >= lo ? hi - lo + 1 : 0;
}

/* Append a linear, scaled to `share` of its sub-layers per block (fth_model_shares): the
 * width it adds (a row-parallel linear's input, any other's output) times the share, so
 * its weights and FLOPs are share x one sub-layer's; a share of 0 adds nothing. */
static void push_share(fth_layer_shape *s, double in, double out, fth_shard shard, fth_part part,
                       double share) {
  if (!(share > 0)) return;
  FTH_ASSERT(s->num_linears < FTH_MAX_LINEARS);
  fth_linear *l = &s->lin[s->num_linears++];
  l->in = in;
  l->out = out;
  l->shard = shard;
  l->part = part;
  l->share = share;
  if (shard == FTH_SHARD_ROW)
    l->in *= share;
  else
    l->out *= share;
}

fth_layer_shape fth_model_layer_shape(const fth_model_def *d, int moe) {
  fth_layer_shape s;
  memset(&s, 0, sizeof s);
  double h = d->d_model, a = d->num_heads;
  s.is_moe = moe && is_moe_model(d);
  fth_model_shares(d, &s.mamba_share, &s.attn_share, &s.mlp_share);
  const double sa = s.attn_share, sd = s.mlp_share, sm = s.mamba_share;
  /* one pre-norm weight vector per sub-layer (a transformer: pre-attention and pre-MLP) */
  s.params_norm = (sm + sa + sd) * h;
  if (is_mla(d)) {
    /* Multi-head latent attention (DeepSeek-AI 2024, DeepSeek-V2 Sec. 2.1):
     * queries optionally through a low-rank q_lora latent, keys and values
     * through a shared kv_lora latent plus one decoupled RoPE key shared by
     * all heads; the down-projections are replicated over TP. */
    double nope = d->qk_nope_head_dim, rope = d->qk_rope_head_dim, v = d->v_head_dim;
    double q = d->q_lora_rank, kv = d->kv_lora_rank;
    if (q > 0) {
      push_share(&s, h, q, FTH_SHARD_NONE, FTH_PART_ATTN, sa);                   /* W^DQ */
      push_share(&s, q, a * (nope + rope), FTH_SHARD_COLUMN, FTH_PART_ATTN, sa); /* W^UQ, W^QR */
      s.params_norm += sa * q;                                         /* q latent norm */
    } else {
      push_share(&s, h, a * (nope + rope), FTH_SHARD_COLUMN, FTH_PART_ATTN, sa);
    }
    push_share(&s, h, kv + rope, FTH_SHARD_NONE, FTH_PART_ATTN, sa);         /* W^DKV, W^KR */
    push_share(&s, kv, a * (nope + v), FTH_SHARD_COLUMN, FTH_PART_ATTN, sa); /* W^UK, W^UV */
    push_share(&s, a * v, h, FTH_SHARD_ROW, FTH_PART_ATTN, sa);              /* W^O */
    s.params_norm += sa * kv;                                      /* kv latent norm */
    s.heads = a;
    s.kv_heads = a;
    s.d_qk = nope + rope;
    s.d_v = v;
    /* Only the latent c^KV and the RoPE key k^R are cached (DeepSeek-V2 eq. 9-10). */
    s.kv_cache_per_token = sa * (kv + rope);
  } else {
    double hd = head_dim(d), kvh = kv_heads(d);
    /* Fused QKV (column parallel), output projection (row parallel): Shoeybi
     * et al. 2019 Sec. 3; GQA shares kvh K/V heads among the a query heads. */
    push_share(&s, h, (a + 2.0 * kvh) * hd, FTH_SHARD_COLUMN, FTH_PART_ATTN, sa);
    push_share(&s, a * hd, h, FTH_SHARD_ROW, FTH_PART_ATTN, sa);
    s.heads = a;
    s.kv_heads = kvh;
    s.d_qk = hd;
    s.d_v = hd;
    s.kv_cache_per_token = sa * 2.0 * kvh * hd; /* K and V */
  }
  if (sm > 0) {
    /* Mamba2 mixer (Megatron-Core MambaMixer): in_proj, column-parallel, to z and x
     * (d_inner each), B and C (G N each) and dt (one per head); out_proj, row-parallel,
     * from the gated RMSNorm's d_inner output. TP splits heads and groups alike. */
    double di = fth_model_mamba_inner(d), heads = mamba_heads(d);
    double gn = (double)d->mamba_num_groups * d->mamba_state_dim;
    push_share(&s, h, 2.0 * di + 2.0 * gn + heads, FTH_SHARD_COLUMN, FTH_PART_ATTN, sm);
    push_share(&s, di, h, FTH_SHARD_ROW, FTH_PART_ATTN, sm);
    /* conv1d over x, B, C: K taps and a bias per channel; dt_bias, A_log and D per head */
    s.params_mamba = sm * ((di + 2.0 * gn) * (d->mamba_conv_kernel + 1.0) + 3.0 * heads);
    s.params_norm += sm * di; /* the gated RMSNorm's weight */
  }
  double gate = d->gated_mlp ? 2.0 : 1.0; /* SwiGLU: gate and up fused in one GEMM */
  if (!s.is_moe) {
    double f = fth_model_ffn_hidden(d);
    push_share(&s, h, gate * f, FTH_SHARD_COLUMN, FTH_PART_MLP, sd);
    push_share(&s, f, h, FTH_SHARD_ROW, FTH_PART_MLP, sd);
  } else {
    double f = fth_model_expert_ffn_hidden(d);
    push_share(&s, h, (double)d->num_experts, FTH_SHARD_NONE, FTH_PART_ROUTER, sd);
    push_share(&s, h, gate * f, FTH_SHARD_COLUMN, FTH_PART_EXPERT, sd);
    push_share(&s, f, h, FTH_SHARD_ROW, FTH_PART_EXPERT, sd);
    if (d->num_shared_experts > 0) {
      /* The shared experts run as one MLP of inner size num_shared x f. */
      double fs = f * d->num_shared_experts;
      push_share(&s, h, gate * fs, FTH_SHARD_COLUMN, FTH_PART_SHARED, sd);
      push_share(&s, fs, h, FTH_SHARD_ROW, FTH_PART_SHARED, sd);
    }
  }
  for (int i = 0; i < s.num_linears; i++) {
    double p = s.lin[i].in * s.lin[i].out; /* bias-free weights */
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
  c.dense_layer = ds.params_attn + ds.params_mlp + ds.params_norm + ds.params_mamba;
  int n_moe = fth_model_num_moe_layers(d);
  double dense_total = (double)(d->n_layers - n_moe) * c.dense_layer;
  double moe_total = 0.0, moe_active = 0.0;
  if (n_moe > 0) {
    fth_layer_shape ms = fth_model_layer_shape(d, 1);
    double base =
        ms.params_attn + ms.params_norm + ms.params_router + ms.params_shared + ms.params_mamba;
    c.moe_layer = base + d->num_experts * ms.params_per_expert;
    /* A token uses its top_k routed experts; the other E - top_k sit idle. */
    c.moe_layer_active = base + d->top_k * ms.params_per_expert;
    c.experts_total = (double)n_moe * d->num_experts * ms.params_per_expert;
    moe_total = n_moe * c.moe_layer;
    moe_active = n_moe * c.moe_layer_active;
  }
  c.final_norm = h;
  c.total = c.embedding + c.lm_head + c.final_norm + dense_total + moe_total;
  c.active = c.embedding + c.lm_head + c.final_norm + dense_total + moe_active;
  return c;
}

double fth_model_windowed_share(const fth_model_def *d) {
  if (!(d->attention_window > 0)) return 0.0;
  double k = d->full_attention_interval;
  return k >= 1 ? (k - 1.0) / k : 1.0; /* every k-th layer full, the rest windowed */
}

double fth_window_kept_tokens(double tokens, double window, double windowed_share) {
  if (!(window > 0) || window >= tokens) return tokens;
  return (1.0 - windowed_share) * tokens + windowed_share * window;
}

double fth_model_window_share(const fth_model_def *d, double q_len, double kv_len) {
  if (!(d->attention_window > 0) || d->attention_window >= kv_len) return 1.0;
  double windowed = fth_model_windowed_share(d);
  double full = fth_kernel_causal_keys(q_len, kv_len, 0.0);
  double win = fth_kernel_causal_keys(q_len, kv_len, d->attention_window);
  return full > 0 ? 1.0 - windowed + windowed * win / full : 1.0;
}

double fth_model_window_kv_share(const fth_model_def *d, double ctx) {
  if (!(ctx > 0)) return 1.0;
  return fth_window_kept_tokens(ctx, d->attention_window, fth_model_windowed_share(d)) / ctx;
}

fth_layer_flops fth_model_layer_flops(const fth_model_def *d, int moe, double seq) {
  fth_layer_flops f;
  memset(&f, 0, sizeof f);
  fth_layer_shape s = fth_model_layer_shape(d, moe);
  double lin = 0.0;
  for (int i = 0; i < s.num_linears; i++) {
    /* A GEMM costs one multiply-add (2 FLOP) per weight per token (Kaplan et
     * al. 2020 Sec. 2.1); each token passes through top_k routed experts. */
    double x = 2.0 * s.lin[i].in * s.lin[i].out;
    if (s.lin[i].part == FTH_PART_EXPERT) x *= d->top_k;
    f.fwd_part[s.lin[i].part] += x;
    lin += x;
  }
  /* Causal self-attention: query i sees i keys, (seq + 1) / 2 on average;
   * Q K^T costs 2 d_qk and P V 2 d_v FLOP per (query, key, head). */
  double ctx = (seq + 1.0) / 2.0 * fth_model_window_share(d, seq, seq);
  f.fwd_attn_core = s.attn_share * 2.0 * s.heads * (s.d_qk + s.d_v) * ctx;
  f.fwd_ssm = s.mamba_share > 0 ? s.mamba_share * fth_model_ssd_flops_per_token(
                                                     d, mamba_heads(d), d->mamba_num_groups)
                                : 0.0;
  f.fwd_total = lin + f.fwd_attn_core + f.fwd_ssm;
  /* Backward (Narayanan et al. 2021 Sec. 5.1: backward = 2x forward): a
   * linear y = W x needs dx = W^T dy (data) and dW = dy x^T (weight), each as
   * costly as the forward GEMM; the attention core has no weights but two
   * data GEMMs per forward GEMM (dQ and dK from dS; dP and dV from dO). So
   * fwd + bwd_data + bwd_weight = 3 fwd_total. */
  /* The SSD's backward, like the attention core's, runs two gradient products per forward
   * product and has no weights (its conv1d taps aside, negligible). */
  f.bwd_data = lin + 2.0 * f.fwd_attn_core + 2.0 * f.fwd_ssm;
  f.bwd_weight = lin;
  return f;
}

double fth_model_lm_head_flops_per_token(const fth_model_def *d) {
  /* One h x V GEMM per token, 2 FLOP per weight. */
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
  /* Korthikanti et al. 2022 Sec. 4.1, per token (their s b divided out), with
   * w-byte activations and 1-byte dropout masks. For GPT (w = 2, plain MLP
   * f = 4h, a = kv heads, hd = h / a) each term below gives the paper's value
   * in brackets; TP placement follows their Sec. 4.2.2 (TP alone splits
   * everything except 10 sbh) and 4.2.3 (SP splits the rest).
   *
   * Attention block [11 h + 5 a s]:
   *   replicated  QKV GEMM input (norm output)        w h           [2h]
   *               attention dropout mask              1 h           [h]
   *   sharded     Q and K                             w (a + kv) dqk [4h]
   *               V                                   w kv dv       [2h]
   *               output projection input             w a dv        [2h]
   *   scores      softmax output                      w a s         [2as]
   *               softmax dropout mask                1 a s         [as]
   *               dropout output (input of P V)       w a s         [2as]
   *   Without dropout the P V input is the softmax output itself: w a s.
   *   Flash attention (Dao et al. 2022 Sec. 3.1) keeps no scores, only the
   *   output (the projection input above) and an fp32 log-sum-exp per query
   *   and head: 4 a, sharded.
   *   MLA also keeps, replicated (its down-projections are not TP-split), the
   *   input of each latent norm and of each up-projection: 2 w (q_lora +
   *   kv_lora); RoPE needs no saved input and the rotated keys are inside K.
   * MLP block [19 h]:
   *   replicated  first GEMM input (norm output)      w h           [2h]
   *               MLP dropout mask                    1 h           [h]
   *   sharded     plain: GeLU input, 2nd GEMM input   2 w f         [8h + 8h]
   *               gated: gate out, up out, product    3 w f
   * Norms [4 h]: each of the two keeps its input, 2 w h, replicated.
   * Sum for GPT: replicated 10 h, sharded 24 h, scores 5 a s.
   *
   * MoE block: attention as above; the MLP becomes
   *   replicated  router/dispatch input w h, dropout mask h when plain, and
   *               the fp32 router probabilities 4 E
   *   sharded     shared experts: a dense MLP of inner size num_shared x fe
   *   per (token, expert) pair: the dispatched input copy w h plus the
   *               expert's intermediates (2 or 3) w fe, split by TP_MoE.
   *
   * Hybrid blocks (fth_model_shares): the attention terms times attn_share, the MLP's
   * times mlp_share, one norm input w h per sub-layer, and per Mamba2 mixer (mamba_ssm's
   * mamba_split_conv1d_scan_combined at its default checkpoint_lvl 1, which recomputes
   * the scan output in backward; Megatron-Core MambaMixer, whose training path gates inside
   * the scan (z passed to it) and norms after it, apart):
   *   replicated  in_proj input (norm output)             w h
   *   sharded     in_proj output z, x, B, C, dt          w (2 d_inner + 2 G N + H)
   *               the scan's ungated output out_x        w d_inner
   *               the norm's input (the gated output)    w d_inner
   *               out_proj input (the norm's output)     w d_inner
   *               the norm's fp32 1/rms per group        4 G */
  fth_layer_activations a;
  memset(&a, 0, sizeof a);
  fth_layer_shape s = fth_model_layer_shape(d, moe);
  double h = d->d_model;
  double mask = has_dropout(d) ? MASK_BYTES : 0.0;
  double keep = d->gated_mlp ? 3.0 : 2.0;

  /* Attention block. */
  const double sa = s.attn_share, sd = s.mlp_share, sm = s.mamba_share;
  a.replicated = sa * (w * h + mask * h);
  a.sharded =
      sa * (w * (s.heads + s.kv_heads) * s.d_qk + w * s.kv_heads * s.d_v + w * s.heads * s.d_v);
  if (is_mla(d)) a.replicated += sa * 2.0 * w * ((double)d->q_lora_rank + d->kv_lora_rank);
  if (flash) {
    a.sharded += sa * FP32_BYTES * s.heads;
    a.score_per_seq = 0.0;
  } else {
    a.score_per_seq = sa * (has_dropout(d) ? w + MASK_BYTES + w : w) * s.heads;
  }

  /* The norm inputs, one per sub-layer (a transformer: two). */
  a.replicated += (sm + sa + sd) * w * h;

  /* Mamba2 mixers. */
  if (sm > 0) {
    double di = fth_model_mamba_inner(d), g = d->mamba_num_groups;
    a.replicated += sm * w * h;
    a.sharded += sm * (w * (5.0 * di + 2.0 * g * d->mamba_state_dim + mamba_heads(d)) +
                       FP32_BYTES * g);
  }

  /* MLP or MoE block. */
  a.replicated += sd * (w * h + mask * h);
  if (!s.is_moe) {
    a.sharded += sd * keep * w * fth_model_ffn_hidden(d);
  } else {
    double fe = fth_model_expert_ffn_hidden(d);
    a.replicated += sd * FP32_BYTES * d->num_experts;
    a.sharded += sd * keep * w * fe * d->num_shared_experts;
    a.expert_per_routed_token = sd * (w * h + keep * w * fe);
  }
  return a;
}

#define QKV_KEEP (FTH_OP_KEEP_QUERY | FTH_OP_KEEP_KEY | FTH_OP_KEEP_VALUE)

int fth_model_op_mms(const fth_model_def *d, int moe, unsigned keep, fth_linear mm[FTH_MAX_OP_MMS],
                     int saved[FTH_MAX_OP_MMS]) {
  fth_layer_shape s = fth_model_layer_shape(d, moe);
  int n = 0;
  unsigned name[FTH_MAX_OP_MMS]; /* the FTH_OP_KEEP_* bits that keep each mm (0: none) */
  for (int i = 0; i < s.num_linears; i++) {
    FTH_ASSERT(n + 3 <= FTH_MAX_OP_MMS);
    fth_linear l = s.lin[i];
    int first_mlp =
        l.part != FTH_PART_ATTN && l.part != FTH_PART_ROUTER && l.shard == FTH_SHARD_COLUMN;
    if (l.part == FTH_PART_ATTN && i == 0 && !is_mla(d)) {
      /* torchtitan's and MaxText's Llama attention run wq, wk, wv as three GEMMs. */
      double hd = s.d_qk;
      const double outs[3] = {s.heads * hd, s.kv_heads * hd, s.kv_heads * hd};
      const unsigned names[3] = {FTH_OP_KEEP_QUERY, FTH_OP_KEEP_KEY, FTH_OP_KEEP_VALUE};
      for (int k = 0; k < 3; k++) {
        name[n] = names[k];
        mm[n] = l;
        mm[n++].out = outs[k];
      }
    } else if (first_mlp && d->gated_mlp) {
      /* SwiGLU: w1 (gate) and w3 (up), in that order. */
      l.out /= 2.0;
      name[n] = FTH_OP_KEEP_MLPWI_0;
      mm[n++] = l;
      name[n] = FTH_OP_KEEP_MLPWI_1;
      mm[n++] = l;
    } else {
      if (l.part == FTH_PART_ROUTER) name[n] = 0u;
      else if (l.part == FTH_PART_ATTN) name[n] = l.shard == FTH_SHARD_ROW ? FTH_OP_KEEP_OUT : QKV_KEEP;
      else if (first_mlp) name[n] = FTH_OP_KEEP_MLPWI_0 | FTH_OP_KEEP_MLPWI_1;
      else name[n] = FTH_OP_KEEP_MLPWO;
      mm[n++] = l;
    }
  }
  /* PyTorch selective checkpointing policy of torchtitan (activation_checkpoint.py,
   * "mm_count % 2"): the count is raised before the test, so the 1st mm is
   * saved and the 2nd recomputed. A named policy keeps what it names. */
  for (int i = 0; i < n; i++) saved[i] = keep ? (name[i] & keep) != 0u : (i + 1) % 2 == 1;
  return n;
}

static const char *const op_keep_names[FTH_OP_KEEP_NAMES] = {
    "query_proj", "key_proj", "value_proj", "context", "out_proj", "mlpwi_0", "mlpwi_1", "mlpwo"};

const char *fth_op_keep_name(unsigned bit) {
  return fth_bit_name(op_keep_names, FTH_OP_KEEP_NAMES, bit);
}

unsigned fth_op_keep_parse(const char *name) {
  return fth_bit_parse(op_keep_names, FTH_OP_KEEP_NAMES, name);
}

double fth_model_op_recompute_flops_per_token(const fth_model_def *d, int moe, unsigned keep) {
  fth_linear mm[FTH_MAX_OP_MMS];
  int saved[FTH_MAX_OP_MMS];
  int n = fth_model_op_mms(d, moe, keep, mm, saved);
  double flops = 0.0;
  for (int i = 0; i < n; i++) {
    if (saved[i]) continue;
    /* 2 FLOP per weight per token (Kaplan et al. 2020 Sec. 2.1), top_k per routed token. */
    double x = 2.0 * mm[i].in * mm[i].out;
    if (mm[i].part == FTH_PART_EXPERT) x *= d->top_k;
    flops += x;
  }
  return flops;
}

/* Per-op selective checkpointing (fth_model_op_mms): the checkpoint keeps
 * the block input, the outputs of the saved mms and of scaled-dot-product
 * attention (its output and fp32 log-sum-exp per query and head: torchtitan
 * always runs an SDPA kernel, all of whose variants are in its save list; a named
 * policy only when it names the context);
 * everything else (norms, RoPE, SiLU x mul, residual adds, router softmax
 * and top-k, dropout) is recomputed. Placement per GPU: a column-parallel
 * output is split by TP (TP_MoE for experts); a row-parallel one is the
 * full-width partial sum before its reduction; replicated ones (router, MLA
 * down-projections) and the block input split by SP only. Under SP the
 * reduce-scatters after the attention and the MLP (the shared experts in MoE
 * blocks) are saved too (torchtitan's list names reduce_scatter_tensor).
 * Routed experts: per routed copy, scaled by `routed`. */
static double op_saved_bytes(const fth_model_def *d, int moe, unsigned keep, double t, double tm,
                             double rep_div, double w, double routed) {
  fth_linear mm[FTH_MAX_OP_MMS];
  int saved[FTH_MAX_OP_MMS];
  int n = fth_model_op_mms(d, moe, keep, mm, saved);
  fth_layer_shape s = fth_model_layer_shape(d, moe);
  double h = d->d_model;
  double elems = h / rep_div;
  for (int i = 0; i < n; i++) {
    if (!saved[i]) continue;
    double e = mm[i].out;
    if (mm[i].shard == FTH_SHARD_COLUMN) e /= mm[i].part == FTH_PART_EXPERT ? tm : t;
    if (mm[i].shard == FTH_SHARD_NONE) e /= rep_div;
    if (mm[i].part == FTH_PART_EXPERT) e *= routed;
    elems += e;
  }
  const int context = !keep || (keep & FTH_OP_KEEP_CONTEXT);
  if (context) elems += s.heads * s.d_v / t;
  if (rep_div > 1.0) elems += (s.is_moe ? 1.0 + (d->num_shared_experts > 0) : 2.0) * h / t;
  return w * elems + (context ? FP32_BYTES * s.heads / t : 0.0);
}

double fth_model_op_activation_bytes_per_token(const fth_model_def *d, int moe, unsigned keep,
                                               int tp, int tp_moe, int sp, double w,
                                               double routed_per_token) {
  double t = tp > 0 ? tp : 1, tm = tp_moe > 0 ? tp_moe : 1;
  return op_saved_bytes(d, moe, keep, t, tm, sp ? t : 1.0, w, routed_per_token);
}

double fth_model_activation_bytes_per_token(const fth_model_def *d, int moe, fth_recompute rc,
                                            int tp, int tp_moe, int sp, double seq, double w,
                                            int flash, double routed_per_token) {
  double t = tp > 0 ? tp : 1, tm = tp_moe > 0 ? tp_moe : 1;
  /* Korthikanti et al. 2022 Sec. 4.2.3: sequence parallelism splits the
   * replicated part (norms, dropout, GEMM inputs) over the TP group too. */
  double rep_div = sp ? t : 1.0;
  /* Full recomputation (Sec. 5): only the block input survives. */
  if (rc == FTH_RECOMPUTE_FULL) return w * d->d_model / rep_div;
  if (rc == FTH_RECOMPUTE_OP) return op_saved_bytes(d, moe, 0u, t, tm, rep_div, w, routed_per_token);
  fth_layer_activations a = fth_model_layer_activations(d, moe, w, flash);
  double bytes =
      a.replicated / rep_div + a.sharded / t + a.expert_per_routed_token * routed_per_token / tm;
  /* Selective recomputation (Sec. 5) redoes the attention core, dropping the scores. */
  if (rc == FTH_RECOMPUTE_NONE) bytes += a.score_per_seq * seq / t;
  return bytes;
}

double fth_model_gemm_input_elems_per_token(const fth_model_def *d, int moe, int tp, int tp_moe,
                                            int sp, double routed_per_token) {
  double t = tp > 0 ? tp : 1, tm = tp_moe > 0 ? tp_moe : 1, rep_div = sp ? t : 1.0;
  fth_layer_shape s = fth_model_layer_shape(d, moe);
  double h = d->d_model;
  /* Replicated: the QKV and first MLP GEMMs' inputs (norm outputs), MLA's
   * latent up-projection inputs. Sharded: the output projection's input and
   * the second MLP GEMM's (shared experts' for MoE). Per routed copy: the
   * dispatched input and the expert's second GEMM input. */
  double rep = (s.attn_share + s.mlp_share + s.mamba_share) * h;
  if (is_mla(d)) rep += s.attn_share * ((double)d->q_lora_rank + d->kv_lora_rank);
  double shard = s.attn_share * s.heads * s.d_v + s.mamba_share * fth_model_mamba_inner(d);
  double routed = 0.0;
  if (!s.is_moe) {
    shard += s.mlp_share * fth_model_ffn_hidden(d);
  } else {
    double fe = fth_model_expert_ffn_hidden(d);
    shard += s.mlp_share * fe * d->num_shared_experts;
    routed = s.mlp_share * (h + fe);
  }
  return rep / rep_div + shard / t + routed * routed_per_token / tm;
}

double fth_model_frozen_input_elems_per_token(const fth_model_def *d, int moe,
                                              fth_lora_targets targets, int tp, int tp_moe,
                                              int sp, double routed_per_token) {
  double t = tp > 0 ? tp : 1, tm = tp_moe > 0 ? tp_moe : 1, rep_div = sp ? t : 1.0;
  fth_layer_shape s = fth_model_layer_shape(d, moe);
  double h = d->d_model, rep = 0.0, shard = 0.0, routed = 0.0;
  /* A frozen linear's backward computes dx = dy W, which needs no x; x was kept for
   * dW = dy^T x only (Hu et al. 2021 Sec. 4: no gradients for the frozen weights). An
   * adapter on the linear reads x again (dA = x^T ...), so a target keeps it. The
   * output projection's input stays: flash attention's backward reads that output. */
  if (targets == FTH_LORA_MLP) {
    rep += h; /* QKV input (the first norm's output) */
    if (is_mla(d)) rep += (double)d->q_lora_rank + d->kv_lora_rank; /* up-projection inputs */
  }
  if (targets == FTH_LORA_ATTENTION) {
    rep += h; /* first MLP GEMM's (or router's and shared experts') input */
    shard += s.is_moe ? fth_model_expert_ffn_hidden(d) * d->num_shared_experts
                      : fth_model_ffn_hidden(d); /* second GEMM's input */
  }
  if (s.is_moe) routed = h + fth_model_expert_ffn_hidden(d); /* experts are frozen */
  return rep / rep_div + shard / t + routed * routed_per_token / tm;
}

double fth_model_qkv_elems_per_token(const fth_model_def *d, int moe, int tp) {
  fth_layer_shape s = fth_model_layer_shape(d, moe);
  /* fth_model_layer_activations' sharded Q and K, and V */
  return s.attn_share * ((s.heads + s.kv_heads) * s.d_qk + s.kv_heads * s.d_v) / (tp > 0 ? tp : 1);
}

double fth_model_act_fn_input_elems_per_token(const fth_model_def *d, int moe, int tp,
                                              int tp_moe, double routed_per_token) {
  double t = tp > 0 ? tp : 1, tm = tp_moe > 0 ? tp_moe : 1;
  fth_layer_shape s = fth_model_layer_shape(d, moe);
  /* Of the keep = 3 (gated) or 2 (plain) inner activations of fth_model_layer_activations,
   * all but the product / output, which is the second GEMM's input. */
  double in = d->gated_mlp ? 2.0 : 1.0;
  if (!s.is_moe) return s.mlp_share * in * fth_model_ffn_hidden(d) / t;
  double fe = fth_model_expert_ffn_hidden(d) * s.mlp_share;
  return in * fe * d->num_shared_experts / t + in * fe * routed_per_token / tm;
}

double fth_model_kv_cache_elems_per_token(const fth_model_def *d) {
  int n_moe = fth_model_num_moe_layers(d);
  double dense = fth_model_layer_shape(d, 0).kv_cache_per_token;
  double moe = n_moe > 0 ? fth_model_layer_shape(d, 1).kv_cache_per_token : 0.0;
  return (double)(d->n_layers - n_moe) * dense + (double)n_moe * moe;
}

void fth_model_recompute_module_elems(const fth_model_def *d, int moe, unsigned mods, int tp,
                                      int tp_moe, int sp, double routed_per_token, double *act,
                                      double *gemm) {
  double t = tp > 0 ? tp : 1, tm = tp_moe > 0 ? tp_moe : 1, rep_div = sp ? t : 1.0;
  fth_layer_shape s = fth_model_layer_shape(d, moe);
  *act = *gemm = 0.0;
  /* The QKV and first MLP (or router and dispatch) GEMMs' input: the two
   * norm outputs (fth_model_layer_activations). */
  if (mods & FTH_RECOMPUTE_MOD_LAYERNORM)
    *gemm += (s.attn_share + s.mlp_share + s.mamba_share) * d->d_model / rep_div;
  /* Q and K (heads + kv heads of d_qk) and V (kv heads of d_v) that the
   * attention keeps; the latents stay (counted replicated there). */
  if ((mods & FTH_RECOMPUTE_MOD_MLA_UP_PROJ) && is_mla(d))
    *act += ((s.heads + s.kv_heads) * s.d_qk + s.kv_heads * s.d_v) / t;
  /* A routed copy keeps its gate and up outputs and their product (gated) or
   * the activation's input and output; the product/output is recomputed. */
  if ((mods & FTH_RECOMPUTE_MOD_MOE_ACT) && s.is_moe)
    *gemm += s.mlp_share * fth_model_expert_ffn_hidden(d) * routed_per_token / tm;
}

static const char *const module_names[3] = {"layernorm", "mla_up_proj", "moe_act"};

const char *fth_recompute_module_name(unsigned bit) {
  return fth_bit_name(module_names, 3, bit);
}

unsigned fth_recompute_module_parse(const char *name) {
  return fth_bit_parse(module_names, 3, name);
}

static const char *const recompute_names[FTH_RECOMPUTE_COUNT] = {"none", "selective", "full", "op"};

const char *fth_recompute_name(fth_recompute r) {
  return (r >= 0 && r < FTH_RECOMPUTE_COUNT) ? recompute_names[r] : NULL;
}

fth_recompute fth_recompute_parse(const char *name) {
  for (int i = 0; i < FTH_RECOMPUTE_COUNT; i++)
    if (strcmp(name, recompute_names[i]) == 0) return (fth_recompute)i;
  return FTH_RECOMPUTE_COUNT;
}

static const char *const lora_target_names[FTH_LORA_TARGETS_COUNT] = {"all_linear", "attention",
                                                                      "mlp"};

const char *fth_lora_targets_name(fth_lora_targets t) {
  return (t >= 0 && t < FTH_LORA_TARGETS_COUNT) ? lora_target_names[t] : NULL;
}

fth_lora_targets fth_lora_targets_parse(const char *name) {
  for (int i = 0; i < FTH_LORA_TARGETS_COUNT; i++)
    if (strcmp(name, lora_target_names[i]) == 0) return (fth_lora_targets)i;
  return FTH_LORA_TARGETS_COUNT;
}

int fth_linear_takes_lora(const fth_linear *l, fth_lora_targets targets) {
  if (l->part == FTH_PART_ROUTER || l->part == FTH_PART_EXPERT) return 0;
  if (targets == FTH_LORA_ATTENTION) return l->part == FTH_PART_ATTN;
  if (targets == FTH_LORA_MLP) return l->part != FTH_PART_ATTN;
  return 1;
}

double fth_layer_lora_params(const fth_layer_shape *sh, double r, double tp,
                             fth_lora_targets targets) {
  double n = 0.0;
  for (int i = 0; i < sh->num_linears; i++) {
    const fth_linear *l = &sh->lin[i];
    if (!fth_linear_takes_lora(l, targets)) continue;
    double in = l->shard == FTH_SHARD_ROW ? l->in / tp : l->in;
    double out = l->shard == FTH_SHARD_COLUMN ? l->out / tp : l->out;
    n += r * (in + out);
  }
  return n;
}
