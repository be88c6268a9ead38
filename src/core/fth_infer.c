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
  d.kernel_model = FTH_KERNEL_TILED; /* falls back to the roofline without compute_units */
  d.reserve = fth_mem_reserve_default();
  return d;
}

static int width_ok(double b) {
  return b == 1 || b == 2 || b == 4;
}

static int pos_int(double x) {
  return fth_positive(x) && x == floor(x);
}

static fth_status check_def(const fth_infer_def *d, fth_pass pass, fth_error *err) {
  if (!pos_int(d->global_batch))
    return fth_fail(err, FTH_EINVAL, "global_batch_size", "expected a positive integer, got %g",
                    d->global_batch);
  if (!pos_int(d->micro_batch))
    return fth_fail(err, FTH_EINVAL, "micro_batch_size", "expected a positive integer, got %g",
                    d->micro_batch);
  if (pass == FTH_PASS_PREFILL && !pos_int(d->prompt_len))
    return fth_fail(err, FTH_EINVAL, "seq_length", "expected a positive integer, got %g",
                    d->prompt_len);
  if (pass == FTH_PASS_DECODE) {
    if (!(d->context_len >= 0 && d->context_len == floor(d->context_len)))
      return fth_fail(err, FTH_EINVAL, "prefill_seq_len", "expected an integer >= 0, got %g",
                      d->context_len);
    if (!pos_int(d->gen_tokens))
      return fth_fail(err, FTH_EINVAL, "num_generated_tokens",
                      "expected a positive integer, got %g", d->gen_tokens);
  }
  if (d->weight_bytes != 0 && !width_ok(d->weight_bytes))
    return fth_fail(err, FTH_EINVAL, "weight_float_size_bytes", "expected 1, 2 or 4, got %g",
                    d->weight_bytes);
  if (d->kv_bytes != 0 && !width_ok(d->kv_bytes))
    return fth_fail(err, FTH_EINVAL, "kv_cache_float_size_bytes", "expected 1, 2 or 4, got %g",
                    d->kv_bytes);
  if (d->gemm_bytes != 0 && !width_ok(d->gemm_bytes))
    return fth_fail(err, FTH_EINVAL, "gemm_float_size_bytes", "expected 1, 2 or 4, got %g",
                    d->gemm_bytes);
  if (!(d->recipe >= FTH_RECIPE_NONE && d->recipe < FTH_RECIPE_COUNT))
    return fth_fail(err, FTH_EINVAL, "precision_recipe", "unknown recipe %d", (int)d->recipe);
  if (d->recipe != FTH_RECIPE_NONE && d->gemm_bytes != 0 &&
      d->gemm_bytes != fth_precision_bytes(fth_recipe_get(d->recipe)->gemm))
    return fth_fail(err, FTH_EINVAL, "gemm_float_size_bytes",
                    "%g does not match precision_recipe %s (%g bytes); set one of the two",
                    d->gemm_bytes, fth_recipe_name(d->recipe),
                    fth_precision_bytes(fth_recipe_get(d->recipe)->gemm));
  if (!(d->kv_reread >= 0 && d->kv_reread <= 1))
    return fth_fail(err, FTH_EINVAL, "decode_kv_reread", "expected a share in [0, 1], got %g",
                    d->kv_reread);
  const double effs[3] = {d->comp_comm_eff, d->comp_mem_eff, d->comm_mem_eff};
  if (fth_exec_check(d->act_bytes, d->expert_imbalance, effs, &d->coll, d->kernel_launch_s, err) !=
      FTH_OK)
    return err->status;
  return fth_mem_reserve_check(&d->reserve, d->footprint_tier, err);
}

fth_status fth_infer_compile(fth_infer_plan *p, const fth_node_def *node,
                             const fth_topology_def *topo, const fth_model_def *model,
                             const fth_infer_def *d, fth_pass pass, fth_error *err) {
  fth_error_clear(err);
  memset(p, 0, sizeof *p);
  if (check_def(d, pass, err) != FTH_OK) return fth_error_prefix(err, "workload");
  if (fth_node_check(node, err) != FTH_OK) return fth_error_prefix(err, "hardware");
  if (fth_topology_check(topo, err) != FTH_OK) return fth_error_prefix(err, "topology");
  if (fth_model_check(model, err) != FTH_OK) return fth_error_prefix(err, "model");
  p->node = *node;
  p->topo = *topo;
  p->model = *model;
  fth_layout *l = &p->layout;
  if (fth_layout_make(l, topo, model, err) != FTH_OK) return err->status;
  if (pass == FTH_PASS_DECODE && l->cp > 1)
    return fth_fail(err, FTH_EINVAL, "topology.logical",
                    "decode with CP = %d: context parallelism applies to prefill only", l->cp);
  double seq = pass == FTH_PASS_PREFILL ? d->prompt_len : 0.0;
  if (fth_layout_batch(l, d->global_batch, d->micro_batch, seq, &p->microbatches, err) != FTH_OK)
    return err->status;
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
  if (p->inf.gemm_bytes == d->act_bytes) p->inf.gemm_bytes = 0; /* one width: no split */
  if (p->inf.gemm_bytes > 0) p->inf.weight_bytes = p->inf.gemm_bytes;
  if (d->recipe != FTH_RECIPE_NONE) { /* a block-scaled checkpoint: its width and its scales */
    p->inf.gemm_bytes = fth_precision_bytes(fth_recipe_get(d->recipe)->gemm);
    p->inf.weight_bytes = fth_recipe_element_bytes(d->recipe);
  }
  if (p->inf.kv_bytes == 0) p->inf.kv_bytes = d->act_bytes;
  p->pass = pass;
  return FTH_OK;
}

/* An iteration's time from its phase: the layer collectives (and what CP's ring
 * leaves exposed) block unless the engine overlaps two half-batches
 * (fth_infer_def.batch_overlap). */
static double iteration_time(const fth_infer_plan *p, const fth_phase *ph, double *exposed) {
  unsigned blocking = p->inf.batch_overlap ? 0u
                                           : (1u << FTH_COMM_TP) | (1u << FTH_COMM_TP_MOE) |
                                                 (1u << FTH_COMM_EP) | (1u << FTH_COMM_CP);
  return fth_phase_time_blocking(ph, p->inf.comp_comm_eff, blocking, exposed);
}

static double tier_bw(const fth_node_def *n, fth_tier t) {
  return n->has_tier[t] ? fth_memory_bw_bytes_per_s(&n->tier[t]) : 0.0;
}

/* Bytes a stored weight of the embedding and the LM head takes: the activations' width where
 * the linears run at their own (gemm_bytes, a recipe: quantised checkpoints keep both in 16
 * bits, as ModelOpt's exclude lm_head and vLLM's FP8 leaves it), else the weights'. */
static double vocab_bytes(const fth_infer_def *d) {
  return d->gemm_bytes > 0 ? d->act_bytes : d->weight_bytes;
}

/* Bytes of the weights one GPU of the busiest stage holds. */
static double weight_bytes_held(const fth_layout *l, const fth_infer_def *d) {
  return (l->stage_dense_params + l->stage_expert_params) * d->weight_bytes +
         l->stage_vocab_params * (vocab_bytes(d) - d->weight_bytes);
}

static void block_env(const fth_infer_plan *p, fth_block_mode mode, fth_block_env *e) {
  const fth_infer_def *d = &p->inf;
  memset(e, 0, sizeof *e);
  e->k.env = fth_kernel_env_make(&p->node, fth_precision_from_bytes(d->act_bytes),
                                 d->traffic_tier[FTH_MEM_ACTIVATIONS]);
  e->k.env.model = d->kernel_model;
  e->k.weight_bw = tier_bw(&p->node, d->traffic_tier[FTH_MEM_WEIGHTS]);
  e->k.comp_mem_eff = d->comp_mem_eff;
  e->k.launch_s = d->kernel_launch_s;
  if (d->gemm_bytes > 0) { /* the linears at their own width (fth_phase_linears' recipe path) */
    fth_precision gp = d->recipe != FTH_RECIPE_NONE ? fth_recipe_get(d->recipe)->gemm
                                                    : fth_precision_from_bytes(d->gemm_bytes);
    e->k.gemm_env = fth_kernel_env_make(&p->node, gp, d->traffic_tier[FTH_MEM_ACTIVATIONS]);
    e->k.gemm_env.model = d->kernel_model;
    e->k.gemm_bytes = d->gemm_bytes;
    if (d->recipe != FTH_RECIPE_NONE) e->k.gemm_weight_bytes = d->weight_bytes;
  }
  e->lay = &p->layout;
  e->model = &p->model;
  e->coll = &d->coll;
  e->mode = mode;
  e->act_bytes = d->act_bytes;
  e->weight_bytes = d->weight_bytes;
  e->vocab_weight_bytes = vocab_bytes(d);
  e->kv_bytes = d->kv_bytes;
  e->kv_bw = tier_bw(&p->node, d->traffic_tier[FTH_MEM_KV_CACHE]);
  e->kv_reread = d->kv_reread;
  e->expert_imbalance = d->expert_imbalance;
  e->flash_attention = d->flash_attention;
  e->tp_overlap_backward_rs = 1; /* no backward */
  /* Serving engines dispatch with DeepEP: its normal kernels (prefill) send a token
   * across scale-out once per node and forward it there; its low-latency kernels
   * (decode) write each (token, expert) copy straight to the expert's GPU over
   * RDMA, no forwarding (DeepEP README: "low-latency kernels with pure RDMA"). */
  e->ep_per_node = mode != FTH_BLOCK_DECODE;
}

double fth_infer_iteration(const fth_infer_plan *p, double requests, double new_tokens,
                           double context, fth_phase *out, double *exposed) {
  const fth_layout *l = &p->layout;
  fth_block_env e;
  int decode = new_tokens == 1.0 && context > 0;
  block_env(p, decode ? FTH_BLOCK_DECODE : FTH_BLOCK_PREFILL, &e);
  double q = decode ? 1.0 : new_tokens / l->cp, ctx = decode ? context : context + new_tokens;
  fth_phase blk[2];
  memset(blk, 0, sizeof blk);
  int mid[2], last[2];
  fth_block_stage_blocks(l, mid, last);
  for (int moe = 0; moe < 2; moe++)
    if (mid[moe] > 0 || last[moe] > 0) fth_block_pass(&e, moe, requests, q, ctx, &blk[moe], NULL);
  double ex[FTH_COMM_KIND_COUNT], *x = exposed ? exposed : ex;
  fth_block_stage(&e, blk, NULL, last, 1, requests, q, out, NULL);
  double t = iteration_time(p, out, x);
  if (l->pp > 1 && (mid[0] != last[0] || mid[1] != last[1])) {
    /* the slower of the last stage (with the head) and the heaviest other */
    fth_phase m;
    double xm[FTH_COMM_KIND_COUNT];
    fth_block_stage(&e, blk, NULL, mid, 0, requests, q, &m, NULL);
    double tm = iteration_time(p, &m, xm);
    if (tm > t) {
      *out = m;
      t = tm;
      for (int k = 0; k < FTH_COMM_KIND_COUNT; k++) x[k] = xm[k];
    }
  }
  return t;
}

/* The stage (blocks[] dense and MoE) for a mixed batch: every block's
 * kernels but attention over the batch's tokens, then each attention group. */
static double mixed_stage(const fth_infer_plan *p, const fth_infer_batch *b, const int blocks[2],
                          int head, fth_phase *out, double *x) {
  fth_block_env e, ed, ep;
  block_env(p, FTH_BLOCK_PREFILL, &e);
  e.skip_attention = 1;
  block_env(p, FTH_BLOCK_DECODE, &ed);
  block_env(p, FTH_BLOCK_PREFILL, &ep);
  /* a decode verifying k drafts runs 1 + k query tokens, each scored by the head */
  const double vq = 1.0 + (b->spec_tokens > 0 ? b->spec_tokens : 0.0);
  double tokens = b->decode_requests * vq, rows = b->decode_requests * vq + b->num_chunks;
  for (int i = 0; i < b->num_chunks; i++) tokens += b->chunks[i].new_tokens;
  /* DP attention: the routed (token, expert) copies on each GPU follow the
   * engine's mean tokens per rank, not this rank's (the imbalance factor scales
   * exactly those copies: compute, activation and dispatch traffic). */
  if (b->engine_tokens > 0 && tokens > 0) e.expert_imbalance *= b->engine_tokens / tokens;
  fth_phase blk[2];
  memset(blk, 0, sizeof blk);
  for (int moe = 0; moe < 2; moe++) {
    if (blocks[moe] == 0) continue;
    fth_block_pass(&e, moe, 1.0, tokens, tokens, &blk[moe], NULL);
    if (b->decode_requests > 0) /* linear in the context: the mean stands for each */
      fth_block_attention(&ed, moe, b->decode_requests, vq,
                          b->decode_context_sum / b->decode_requests + (vq - 1.0), &blk[moe]);
    for (int i = 0; i < b->num_chunks;) {
      const fth_infer_chunk *c = &b->chunks[i];
      int n = 1;
      while (i + n < b->num_chunks && b->chunks[i + n].new_tokens == c->new_tokens &&
             b->chunks[i + n].context == c->context)
        n++;
      fth_block_attention(&ep, moe, n, c->new_tokens, c->context + c->new_tokens, &blk[moe]);
      i += n;
    }
  }
  fth_block_stage(&e, blk, NULL, blocks, head, rows, tokens / rows, out, NULL);
  return iteration_time(p, out, x);
}

double fth_infer_draft_s(const fth_infer_plan *p, double requests, double context) {
  if (requests <= 0) return 0.0;
  fth_block_env e;
  block_env(p, FTH_BLOCK_DECODE, &e);
  int mid[2], last[2], one[2] = {0, 0};
  fth_block_stage_blocks(&p->layout, mid, last);
  int moe = last[1] > 0;
  one[moe] = 1;
  fth_phase blk[2], ph;
  memset(blk, 0, sizeof blk);
  fth_block_pass(&e, moe, requests, 1.0, context, &blk[moe], NULL);
  fth_block_stage(&e, blk, NULL, one, 1, requests, 1.0, &ph, NULL);
  double x[FTH_COMM_KIND_COUNT];
  return iteration_time(p, &ph, x);
}

double fth_infer_iteration_mixed(const fth_infer_plan *p, const fth_infer_batch *b, fth_phase *out,
                                 double *exposed) {
  double ex[FTH_COMM_KIND_COUNT], *x = exposed ? exposed : ex;
  memset(out, 0, sizeof *out);
  for (int k = 0; k < FTH_COMM_KIND_COUNT; k++) x[k] = 0.0;
  if (b->decode_requests <= 0 && b->num_chunks <= 0) return 0.0;
  const fth_layout *l = &p->layout;
  int mid[2], last[2];
  fth_block_stage_blocks(l, mid, last);
  double t = mixed_stage(p, b, last, 1, out, x);
  if (l->pp > 1 && (mid[0] != last[0] || mid[1] != last[1])) {
    /* the slower of the last stage (with the head) and the heaviest other */
    fth_phase m;
    double xm[FTH_COMM_KIND_COUNT];
    double tm = mixed_stage(p, b, mid, 0, &m, xm);
    if (tm > t) {
      *out = m;
      t = tm;
      for (int k = 0; k < FTH_COMM_KIND_COUNT; k++) x[k] = xm[k];
    }
  }
  if (b->spec_tokens > 0 && b->decode_requests > 0 && !b->spec_external) /* MTP drafts */
    t += b->spec_tokens * fth_infer_draft_s(p, b->decode_requests,
                                            b->decode_context_sum / b->decode_requests);
  return t;
}

/* KV elements per token of the stage's blocks on one GPU. */
static double kv_elems_per_token(const fth_infer_plan *p) {
  const fth_layout *l = &p->layout;
  int mid[2], last[2];
  fth_block_stage_blocks(l, mid, last);
  double d = fth_layout_kv_elems_per_gpu(l, &p->model, &l->dense_shape);
  double e = fth_layout_kv_elems_per_gpu(l, &p->model, &l->moe_shape);
  return fth_max(d * mid[0] + e * mid[1], d * last[0] + e * last[1]);
}

/* Weights, the KV cache of the requests each DP rank holds and the forward
 * transient; the largest batch is what the KV tier has left after
 * everything else there, in whole micro-batches per DP rank. */
static void footprint(const fth_infer_plan *p, double kv_per_request, fth_infer_result *r) {
  const fth_layout *l = &p->layout;
  const fth_infer_def *d = &p->inf;
  const fth_model_def *md = &p->model;
  fth_memory_footprint *m = &r->mem;
  memset(m, 0, sizeof *m);
  m->bytes[FTH_MEM_WEIGHTS] = weight_bytes_held(l, d);
  m->bytes[FTH_MEM_KV_CACHE] = d->global_batch / l->dp * kv_per_request;
  double q = p->pass == FTH_PASS_PREFILL ? d->prompt_len / l->cp : 1.0;
  m->bytes[FTH_MEM_TRANSIENT_FWD] =
      fth_block_transient_bytes(l, md, d->act_bytes, d->micro_batch * q, d->micro_batch);
  fth_footprint_reserve(m, &d->reserve, d->footprint_tier);
  fth_footprint_place(m, &p->node, d->footprint_tier);
  double per_rank =
      fth_footprint_room_units(m, d->footprint_tier, FTH_MEM_KV_CACHE, kv_per_request);
  double mb = d->micro_batch;
  r->max_global_batch = per_rank >= mb ? floor(per_rank / mb) * mb * l->dp : 0.0;
  r->kv_cache_bytes_per_gpu = m->bytes[FTH_MEM_KV_CACHE];
  r->kv_bytes_per_request_per_gpu = kv_per_request;
}

double fth_infer_pp_hop_s(const fth_infer_plan *p, double tokens) {
  const fth_group *g = &p->layout.group[FTH_COMM_PP];
  if (g->n == 0) return 0.0;
  fth_block_env e;
  block_env(p, FTH_BLOCK_PREFILL, &e);
  double bytes = fth_block_pp_message_bytes(&e, tokens);
  return fth_collective(FTH_COLL_SEND_RECV, FTH_ALGO_AUTO, bytes, g->lv, g->n, &p->inf.coll).time_s;
}

double fth_infer_kv_capacity_tokens(const fth_infer_plan *p) {
  return fth_infer_kv_capacity_tokens_draft(p, NULL);
}

double fth_infer_kv_capacity_tokens_draft(const fth_infer_plan *p, const fth_infer_plan *draft) {
  fth_infer_result r;
  double per_token = kv_elems_per_token(p) * p->inf.kv_bytes / p->layout.cp;
  if (draft) per_token += kv_elems_per_token(draft) * draft->inf.kv_bytes / draft->layout.cp;
  footprint(p, per_token, &r);
  if (draft) { /* the draft's weights sit beside the target's, in the same tier */
    const fth_layout *l = &draft->layout;
    double w = weight_bytes_held(l, &draft->inf);
    r.mem.bytes[FTH_MEM_WEIGHTS] += w;
    r.mem.tier_bytes[p->inf.footprint_tier[FTH_MEM_WEIGHTS]] += w;
  }
  double room =
      fth_footprint_room_units(&r.mem, p->inf.footprint_tier, FTH_MEM_KV_CACHE, per_token);
  return room > 0 ? room : 0.0;
}

void fth_infer_evaluate(const fth_infer_plan *p, fth_infer_result *r) {
  const fth_layout *l = &p->layout;
  const fth_infer_def *d = &p->inf;
  memset(r, 0, sizeof *r);
  double m = p->microbatches, pp = l->pp;
  /* Pipeline hand-off of the micro-batch's [tokens, h] activations. */
  double q_hop = p->pass == FTH_PASS_PREFILL ? d->prompt_len / l->cp : 1.0;
  double hop_raw = fth_infer_pp_hop_s(p, d->micro_batch * q_hop);
  double kv_tok_layers = kv_elems_per_token(p);
  if (p->pass == FTH_PASS_PREFILL) {
    double t =
        fth_infer_iteration(p, d->micro_batch, d->prompt_len, 0.0, &r->pass, r->comm_exposed_s);
    double hop = hop_raw - d->comp_comm_eff * fth_min(hop_raw, t);
    r->stage_s = t;
    r->ttft_s = pp * t + (pp - 1) * hop;
    r->time_s = (m + pp - 1) * t + (pp - 1) * hop;
    r->pp_s = (pp - 1) * hop;
    r->tokens_per_s = d->global_batch * d->prompt_len / r->time_s;
    footprint(p, d->prompt_len / l->cp * kv_tok_layers * d->kv_bytes *
                     fth_model_window_kv_share(&p->model, d->prompt_len), r);
  } else {
    /* Decode costs are linear in the context, so the mean context gives the
     * mean step; first and last steps are reported too. */
    double c0 = d->context_len + 1.0, c1 = d->context_len + d->gen_tokens;
    double cycle = fth_max(m, pp);
    fth_phase tmp;
    double t0 = fth_infer_iteration(p, d->micro_batch, 1.0, c0, &tmp, NULL);
    double t1 = fth_infer_iteration(p, d->micro_batch, 1.0, c1, &tmp, NULL);
    double t =
        fth_infer_iteration(p, d->micro_batch, 1.0, 0.5 * (c0 + c1), &r->pass, r->comm_exposed_s);
    double hop = hop_raw - d->comp_comm_eff * fth_min(hop_raw, t);
    /* The stage passes of the cycle, and the pipeline's hand-offs between them. */
    r->stage_s = t;
    r->tpot_s = cycle * t + (pp - 1) * hop;
    r->tpot_first_s = cycle * t0 + (pp - 1) * hop;
    r->tpot_last_s = cycle * t1 + (pp - 1) * hop;
    r->time_s = d->gen_tokens * r->tpot_s;
    r->pp_s = d->gen_tokens * (pp - 1) * hop;
    r->tokens_per_s = d->global_batch / r->tpot_s;
    footprint(p, c1 * kv_tok_layers * d->kv_bytes * fth_model_window_kv_share(&p->model, c1), r);
  }
  r->kv_read_s = r->pass.kv_memory_s;
  r->weights_read_s = r->pass.weight_memory_s;
  r->tokens_per_s_per_gpu = r->tokens_per_s / l->num_gpus;
}

void fth_infer_trace_work(const fth_infer_plan *p, fth_train_work *out) {
  const fth_layout *l = &p->layout;
  const fth_infer_def *d = &p->inf;
  memset(out, 0, sizeof *out);
  const int decode = p->pass == FTH_PASS_DECODE;
  fth_block_env e;
  block_env(p, decode ? FTH_BLOCK_DECODE : FTH_BLOCK_PREFILL, &e);
  /* As fth_infer_iteration: decode at the mean context of the generated tokens. */
  double q = decode ? 1.0 : d->prompt_len / l->cp;
  double ctx = decode ? d->context_len + 0.5 * (1.0 + d->gen_tokens) : d->prompt_len;
  for (int moe = 0; moe < 2; moe++) {
    if (moe && p->model.num_experts <= 1) break;
    fth_block_pass(&e, moe, d->micro_batch, q, ctx, &out->fwd[moe], NULL);
  }
  fth_block_head(&e, d->micro_batch, q, l->pp == 1, &out->head_fwd, NULL);
  if (l->pp > 1) {
    fth_block_env pe;
    block_env(p, FTH_BLOCK_PREFILL, &pe); /* the hand-off's width, as fth_infer_evaluate */
    out->pp_bytes = fth_block_pp_message_bytes(&pe, d->micro_batch * q);
    const fth_group *g = &l->group[FTH_COMM_PP];
    out->pp_hop_s =
        g->n > 0 ? fth_collective(FTH_COLL_SEND_RECV, FTH_ALGO_AUTO, out->pp_bytes, g->lv, g->n,
                                  &d->coll)
                       .time_s
                 : 0.0;
  }
  out->overlap_eff = d->comp_comm_eff;
  out->blocking = 0u;
}
