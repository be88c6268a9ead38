/* fth_infer.c: prefill and decode (fth_infer.h).
 *
 * Prefill is a forward pass of b requests x s prompt tokens per micro-batch;
 * the pipeline fills once: time = (m + p - 1) stage passes (GPipe forward).
 * Decode generates one token per request per step: every step reads all the
 * stage's weights (amortised over the micro-batch's requests) and each
 * request's KV cache (growing with the context), so it is memory-bound until
 * the batch is large; a request's next token waits for its micro-batch to
 * come round the pipeline: max(m, p) stage passes (Pope et al. 2022). */
#include "fth_infer.h"

#include <math.h>
#include <string.h>

fth_infer_def fth_infer_def_default(void) {
  fth_infer_def d;
  memset(&d, 0, sizeof d);
  d.global_batch = 1;
  d.micro_batch = 1;
  d.prompt_len = 1024;
  d.context_len = 1024;
  d.gen_tokens = 128;
  d.act_bytes = 2;
  d.expert_imbalance = 1.0;
  d.flash_attention = 1;
  d.comp_mem_eff = 1.0;
  for (int i = 0; i < FTH_MEM_COMPONENT_COUNT; i++) {
    d.traffic_tier[i] = FTH_TIER_XPU;
    d.footprint_tier[i] = FTH_TIER_XPU;
  }
  d.coll = fth_coll_params_default();
  return d;
}

static int width_ok(double b) {
  return b == 1 || b == 2 || b == 4;
}

static fth_status check_def(const fth_infer_def *d, fth_pass pass, fth_error *err) {
  if (pass == FTH_PASS_PREFILL &&
      !(fth_positive(d->prompt_len) && d->prompt_len == floor(d->prompt_len)))
    return fth_fail(err, FTH_EINVAL, "seq_length", "expected a positive integer, got %g",
                    d->prompt_len);
  if (pass == FTH_PASS_DECODE) {
    if (!(d->context_len >= 0 && d->context_len == floor(d->context_len)))
      return fth_fail(err, FTH_EINVAL, "prefill_seq_len", "expected an integer >= 0, got %g",
                      d->context_len);
    if (!(fth_positive(d->gen_tokens) && d->gen_tokens == floor(d->gen_tokens)))
      return fth_fail(err, FTH_EINVAL, "num_generated_tokens",
                      "expected a positive integer, got %g", d->gen_tokens);
  }
  if (!width_ok(d->act_bytes))
    return fth_fail(err, FTH_EINVAL, "float_size_bytes", "expected 1, 2 or 4, got %g",
                    d->act_bytes);
  if (d->weight_bytes != 0 && !width_ok(d->weight_bytes))
    return fth_fail(err, FTH_EINVAL, "weight_float_size_bytes", "expected 1, 2 or 4, got %g",
                    d->weight_bytes);
  if (d->kv_bytes != 0 && !width_ok(d->kv_bytes))
    return fth_fail(err, FTH_EINVAL, "kv_cache_float_size_bytes", "expected 1, 2 or 4, got %g",
                    d->kv_bytes);
  return FTH_OK;
}

fth_status fth_infer_compile(fth_infer_plan *p, const fth_node_def *node,
                             const fth_topology_def *topo, const fth_model_def *model,
                             const fth_infer_def *d, fth_pass pass, fth_error *err) {
  fth_error_clear(err);
  memset(p, 0, sizeof *p);
  if (check_def(d, pass, err) != FTH_OK) return fth_error_prefix(err, "workload");
  /* The layout, groups and batch checks are training's: a forward-only workload. */
  fth_train_def t = fth_train_def_default();
  t.global_batch = d->global_batch;
  t.micro_batch = d->micro_batch;
  t.seq_len = pass == FTH_PASS_PREFILL ? d->prompt_len : 1;
  t.act_bytes = d->act_bytes;
  t.expert_imbalance = d->expert_imbalance;
  t.flash_attention = d->flash_attention;
  t.comp_comm_eff = d->comp_comm_eff;
  t.comp_mem_eff = d->comp_mem_eff;
  t.comm_mem_eff = d->comm_mem_eff;
  t.coll = d->coll;
  t.kernel_launch_s = d->kernel_launch_s;
  t.kernel_model = d->kernel_model;
  for (int i = 0; i < FTH_MEM_COMPONENT_COUNT; i++) {
    t.traffic_tier[i] = d->traffic_tier[i];
    t.footprint_tier[i] = d->footprint_tier[i];
  }
  if (fth_train_compile(&p->base, node, topo, model, &t, err) != FTH_OK) return err->status;
  if (pass == FTH_PASS_DECODE && p->base.cp > 1)
    return fth_fail(err, FTH_EINVAL, "topology.logical",
                    "decode with CP = %d: context parallelism applies to prefill only", p->base.cp);
  for (int c = 0; c < FTH_MEM_COMPONENT_COUNT; c++) {
    fth_tier tt = d->traffic_tier[c], ft = d->footprint_tier[c];
    if ((c == FTH_MEM_KV_CACHE || c == FTH_MEM_WEIGHTS) &&
        (!node->has_tier[tt] || !node->has_tier[ft]))
      return fth_fail(err, FTH_EINVAL,
                      !node->has_tier[tt] ? "workload.memory_device_map_traffic"
                                          : "workload.memory_device_map_footprint",
                      "%s is mapped to %s, which the node does not have",
                      fth_mem_component_name((fth_mem_component)c),
                      fth_tier_name(!node->has_tier[tt] ? tt : ft));
  }
  p->inf = *d;
  if (p->inf.weight_bytes == 0) p->inf.weight_bytes = d->act_bytes;
  if (p->inf.kv_bytes == 0) p->inf.kv_bytes = d->act_bytes;
  p->pass = pass;
  return FTH_OK;
}

static double coll(const fth_infer_plan *p, fth_coll_op op, double bytes, const fth_group_level *lv,
                   int n) {
  if (n == 0 || bytes <= 0) return 0.0;
  return fth_collective(op, FTH_ALGO_AUTO, bytes, lv, n, &p->inf.coll).time_s;
}

static double tier_bw(const fth_node_def *n, fth_tier t) {
  return n->has_tier[t] ? fth_memory_bw_bytes_per_s(&n->tier[t]) : 0.0;
}

/* KV cache elements per token per block on one GPU: GQA splits the K/V heads
 * over TP (replicated when there are fewer heads than ranks); MLA's latent is
 * replicated on every TP rank. */
static double kv_elems_per_gpu(const fth_infer_plan *p, const fth_layer_shape *sh) {
  if (p->base.model.kv_lora_rank > 0) return sh->kv_cache_per_token;
  return sh->kv_cache_per_token * fth_max(1.0, sh->kv_heads / p->base.tp) / sh->kv_heads;
}

/* One block's forward for a micro-batch: `q` new tokens per request against
 * `ctx` keys (prefill: q = ctx = s / CP, causal; decode: q = 1). */
static void block_pass(const fth_infer_plan *p, const fth_phase_ctx *c, double kv_bw, int moe,
                       double q, double ctx, fth_phase *ph) {
  const fth_train_plan *b = &p->base;
  const fth_model_def *m = &b->model;
  const fth_infer_def *d = &p->inf;
  const fth_layer_shape *sh = moe ? &b->moe_shape : &b->dense_shape;
  const double tp = b->tp, ab = d->act_bytes, h = m->d_model;
  const double reqs = d->micro_batch;
  const double tokens = reqs * q;
  memset(ph, 0, sizeof *ph);
  double pairs = tokens * m->top_k * d->expert_imbalance / tp * b->tp_moe;
  fth_phase_linears(c, sh, tokens, tp, b->tp_moe, pairs, b->local_experts, ab, d->weight_bytes, ph,
                    NULL);

  /* Attention core. Decode reads every request's cached keys and values from
   * the KV tier: b x ctx x (KV elements per token) x width bytes. */
  double heads = sh->heads / tp, kvh = fth_max(1.0, sh->kv_heads / tp);
  double kv_tok = kv_elems_per_gpu(p, sh);
  if (p->pass == FTH_PASS_PREFILL) {
    fth_kernel_cost k = fth_kernel_attention(&c->env, reqs, heads, kvh, q, ctx, sh->d_qk, sh->d_v,
                                             d->flash_attention, ab);
    fth_phase_add_kernel(c, ph, FTH_FLOP_ATTENTION, k, 0.0);
  } else {
    fth_kernel_cost k;
    k.flops = 2.0 * reqs * heads * ctx * (sh->d_qk + sh->d_v);
    k.bytes = reqs * ctx * kv_tok * d->kv_bytes;
    double rate =
        c->env.attention_flops_per_s > 0 ? c->env.attention_flops_per_s : c->env.matrix_flops_per_s;
    k.compute_s = rate > 0 ? k.flops / rate : HUGE_VAL;
    k.memory_s = kv_bw > 0 ? k.bytes / kv_bw : HUGE_VAL;
    k.time_s = fth_max(k.compute_s, k.memory_s);
    fth_phase_add_kernel(c, ph, FTH_FLOP_ATTENTION, k, 0.0);
  }
  /* Appending the new tokens' keys and values to the cache. */
  {
    fth_kernel_cost k;
    memset(&k, 0, sizeof k);
    k.bytes = tokens * kv_tok * d->kv_bytes;
    k.memory_s = kv_bw > 0 ? k.bytes / kv_bw : HUGE_VAL;
    k.time_s = k.memory_s;
    fth_phase_add_kernel(c, ph, FTH_FLOP_ATTENTION, k, 0.0);
  }
  /* Element-wise: norms and residual adds on [tokens, h]; the MLP activation. */
  {
    fth_kernel_cost ka = fth_kernel_elementwise(&c->env, tokens * h * 5.0, 5.0, ab);
    fth_phase_add_kernel(c, ph, FTH_FLOP_ATTENTION, ka, 0.0);
    fth_phase_add_kernel(c, ph, FTH_FLOP_MLP, ka, 0.0);
    double effn = m->expert_ffn_hidden > 0 ? m->expert_ffn_hidden : m->ffn_hidden;
    double ffn = m->ffn_hidden > 0 ? m->ffn_hidden : m->mlp_ratio * h;
    double ff = moe ? tokens * (m->top_k * d->expert_imbalance + m->num_shared_experts) * effn / tp
                    : tokens * ffn / tp;
    fth_kernel_cost kf = fth_kernel_elementwise(&c->env, ff, 8.0, (m->gated_mlp ? 3.0 : 2.0) * ab);
    fth_phase_add_kernel(c, ph, FTH_FLOP_MLP, kf, 0.0);
  }
  /* Communication: two TP all-reduces of [tokens, h] per block (one in an MoE
   * block, plus one for shared experts); dispatch + combine all-to-all of the
   * routed tokens; CP's K/V exchange in prefill. */
  double msg = tokens * h * ab;
  double ar = coll(p, FTH_COLL_ALL_REDUCE, msg, b->lv_tp, b->nl_tp);
  ph->comm_s[FTH_COMM_TP] += (moe ? 1.0 + (m->num_shared_experts > 0) : 2.0) * ar;
  if (moe) {
    double a2a = tokens / tp * m->top_k * h * ab * d->expert_imbalance;
    ph->comm_s[FTH_COMM_EP] += 2.0 * coll(p, FTH_COLL_ALL_TO_ALL, a2a, b->lv_ep, b->nl_ep);
    ph->comm_s[FTH_COMM_TP_MOE] +=
        coll(p, FTH_COLL_ALL_GATHER, a2a, b->lv_tp_moe, b->nl_tp_moe) +
        coll(p, FTH_COLL_REDUCE_SCATTER, a2a, b->lv_tp_moe, b->nl_tp_moe);
  }
  if (p->pass == FTH_PASS_PREFILL && b->cp > 1)
    ph->comm_s[FTH_COMM_CP] +=
        coll(p, FTH_COLL_ALL_GATHER, tokens * kv_tok * d->kv_bytes * b->cp, b->lv_cp, b->nl_cp);
}

/* The slowest stage's pass for one micro-batch at context `ctx`. */
static double stage_pass(const fth_infer_plan *p, const fth_phase_ctx *c, double kv_bw, double q,
                         double ctx, fth_phase *out, double *exposed) {
  const fth_train_plan *b = &p->base;
  const fth_infer_def *d = &p->inf;
  fth_phase dense, moe;
  memset(out, 0, sizeof *out);
  if (b->dense_layers_per_stage > 0) {
    block_pass(p, c, kv_bw, 0, q, ctx, &dense);
    fth_phase_scale(&dense, b->dense_layers_per_stage);
    fth_phase_add(out, &dense);
  }
  if (b->moe_layers_per_stage > 0) {
    block_pass(p, c, kv_bw, 1, q, ctx, &moe);
    fth_phase_scale(&moe, b->moe_layers_per_stage);
    fth_phase_add(out, &moe);
  }
  /* The LM head scores only the next token of each request; the embedding
   * lookup writes the new tokens' rows. */
  double h = b->model.d_model, v = (double)b->model.vocab_size / b->tp;
  fth_kernel_cost k = fth_kernel_gemm(&c->env, d->micro_batch, v, h, 1, d->act_bytes);
  k.bytes += h * v * (d->weight_bytes - d->act_bytes);
  fth_phase_add_kernel(c, out, FTH_FLOP_UNEMBEDDING, k, h * v * d->weight_bytes);
  fth_kernel_cost ke =
      fth_kernel_elementwise(&c->env, d->micro_batch * q * h, 0.0, 2.0 * d->act_bytes);
  fth_phase_add_kernel(c, out, FTH_FLOP_EMBEDDING, ke, 0.0);
  return fth_phase_time(out, d->comp_comm_eff, exposed);
}

static void footprint(const fth_infer_plan *p, double kv_per_request, fth_infer_result *r) {
  const fth_train_plan *b = &p->base;
  const fth_infer_def *d = &p->inf;
  fth_memory_footprint *m = &r->mem;
  memset(m, 0, sizeof *m);
  double dense, expert;
  fth_train_stage_params(b, &dense, &expert);
  m->bytes[FTH_MEM_WEIGHTS] = (dense + expert) * d->weight_bytes;
  double resident = d->global_batch / b->dp; /* requests each DP rank holds */
  m->bytes[FTH_MEM_KV_CACHE] = resident * kv_per_request;
  double q = p->pass == FTH_PASS_PREFILL ? d->prompt_len / b->cp : 1.0;
  const fth_model_def *md = &b->model;
  double ffn =
      md->num_experts > 1
          ? (md->expert_ffn_hidden > 0 ? md->expert_ffn_hidden : md->ffn_hidden) * md->top_k
          : (md->ffn_hidden > 0 ? md->ffn_hidden : md->mlp_ratio * md->d_model);
  double tokens = d->micro_batch * q;
  m->bytes[FTH_MEM_TRANSIENT_FWD] =
      fth_max(tokens * ffn / b->tp * d->act_bytes * (md->gated_mlp ? 3.0 : 2.0),
              d->micro_batch * (double)md->vocab_size / b->tp * 4.0);
  for (int t = 0; t < FTH_TIER_COUNT; t++)
    m->tier_capacity[t] = b->node.has_tier[t] ? fth_memory_capacity_bytes(&b->node.tier[t]) : 0;
  for (int c = 0; c < FTH_MEM_COMPONENT_COUNT; c++) {
    m->tier_bytes[d->footprint_tier[c]] += m->bytes[c];
    m->peak_bytes += m->bytes[c];
  }
  m->fits = 1;
  m->overflow_tier = FTH_TIER_COUNT;
  for (int t = 0; t < FTH_TIER_COUNT; t++) {
    m->tier_fits[t] = m->tier_bytes[t] <= m->tier_capacity[t];
    if (!m->tier_fits[t] && m->fits) {
      m->fits = 0;
      m->overflow_tier = (fth_tier)t;
    }
  }
  /* The largest batch: what the KV tier has left after everything else there,
   * in whole requests per DP rank, rounded to whole micro-batches. */
  fth_tier kt = d->footprint_tier[FTH_MEM_KV_CACHE];
  double room = m->tier_capacity[kt] - (m->tier_bytes[kt] - m->bytes[FTH_MEM_KV_CACHE]);
  double per_rank = kv_per_request > 0 ? floor(room / kv_per_request) : HUGE_VAL;
  double mb = d->micro_batch;
  r->max_global_batch = per_rank >= mb ? floor(per_rank / mb) * mb * b->dp : 0.0;
  r->kv_cache_bytes_per_gpu = m->bytes[FTH_MEM_KV_CACHE];
  r->kv_bytes_per_request_per_gpu = kv_per_request;
}

void fth_infer_evaluate(const fth_infer_plan *p, fth_infer_result *r) {
  const fth_train_plan *b = &p->base;
  const fth_infer_def *d = &p->inf;
  memset(r, 0, sizeof *r);
  fth_phase_ctx c;
  c.env = fth_kernel_env_make(&b->node, fth_precision_from_bytes(d->act_bytes),
                              d->traffic_tier[FTH_MEM_ACTIVATIONS]);
  c.env.model = d->kernel_model;
  c.weight_bw = tier_bw(&b->node, d->traffic_tier[FTH_MEM_WEIGHTS]);
  c.comp_mem_eff = d->comp_mem_eff;
  c.launch_s = d->kernel_launch_s;
  double kv_bw = tier_bw(&b->node, d->traffic_tier[FTH_MEM_KV_CACHE]);
  double m = b->microbatches, pp = b->pp;
  /* Pipeline hand-off of the micro-batch's [tokens, h] activations. */
  double q_hop = p->pass == FTH_PASS_PREFILL ? d->prompt_len / b->cp : 1.0;
  double hop_raw = b->nl_pp > 0 ? coll(p, FTH_COLL_SEND_RECV,
                                       d->micro_batch * q_hop * b->model.d_model * d->act_bytes,
                                       b->lv_pp, b->nl_pp)
                                : 0.0;
  double kv_tok_layers = kv_elems_per_gpu(p, &b->dense_shape) * b->dense_layers_per_stage +
                         kv_elems_per_gpu(p, &b->moe_shape) * b->moe_layers_per_stage;
  if (p->pass == FTH_PASS_PREFILL) {
    double s = d->prompt_len / b->cp;
    double t = stage_pass(p, &c, kv_bw, s, d->prompt_len, &r->pass, r->comm_exposed_s);
    double hop = hop_raw - d->comp_comm_eff * fth_min(hop_raw, t);
    r->stage_s = t;
    r->ttft_s = pp * t + (pp - 1) * hop;
    r->time_s = (m + pp - 1) * t + (pp - 1) * hop;
    r->pp_s = (pp - 1) * hop;
    r->tokens_per_s = d->global_batch * d->prompt_len / r->time_s;
    footprint(p, s * kv_tok_layers * d->kv_bytes, r);
  } else {
    /* Decode costs are linear in the context, so the mean context gives the
     * mean step; first and last steps are reported too. */
    double c0 = d->context_len + 1.0, c1 = d->context_len + d->gen_tokens;
    double cycle = fth_max(m, pp);
    fth_phase tmp;
    double ex[FTH_COMM_KIND_COUNT];
    double t0 = stage_pass(p, &c, kv_bw, 1.0, c0, &tmp, ex);
    double t1 = stage_pass(p, &c, kv_bw, 1.0, c1, &tmp, ex);
    double t = stage_pass(p, &c, kv_bw, 1.0, 0.5 * (c0 + c1), &r->pass, r->comm_exposed_s);
    double hop = hop_raw - d->comp_comm_eff * fth_min(hop_raw, t);
    /* The stage passes of the cycle, and the pipeline's hand-offs between them. */
    r->stage_s = t;
    r->tpot_s = cycle * t + (pp - 1) * hop;
    r->tpot_first_s = cycle * t0 + (pp - 1) * hop;
    r->tpot_last_s = cycle * t1 + (pp - 1) * hop;
    r->time_s = d->gen_tokens * r->tpot_s;
    r->pp_s = d->gen_tokens * (pp - 1) * hop;
    r->tokens_per_s = d->global_batch / r->tpot_s;
    r->kv_read_s = r->pass.memory_s[FTH_FLOP_ATTENTION];
    r->weights_read_s = r->pass.memory_s[FTH_FLOP_MLP] + r->pass.memory_s[FTH_FLOP_UNEMBEDDING];
    footprint(p, c1 * kv_tok_layers * d->kv_bytes, r);
  }
  r->tokens_per_s_per_gpu = r->tokens_per_s / b->num_gpus;
}
