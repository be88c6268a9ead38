/* fth_train.c: the training step model (see fth_train.h for the overlap rule).
 *
 * Structure of one step on the slowest pipeline stage (Narayanan et al. 2021):
 *   step = m (t_fwd + t_bwd) + bubble + exposed PP + exposed DP + optimizer
 * where m is micro-batches per DP rank, and t_fwd / t_bwd are one
 * micro-batch through the stage's blocks (plus the LM head on the last stage),
 * each block's kernels overlapped with its TP / EP / CP collectives. */
#include "fth_train.h"

#include <math.h>
#include <string.h>

static const char *const dp_names[FTH_DP_COUNT] = {"DDP", "ZERO1", "ZERO2", "ZERO3"};

const char *fth_dp_variant_name(fth_dp_variant v) {
  return (v >= 0 && v < FTH_DP_COUNT) ? dp_names[v] : NULL;
}

fth_dp_variant fth_dp_variant_parse(const char *name) {
  for (int i = 0; i < FTH_DP_COUNT; i++)
    if (strcmp(name, dp_names[i]) == 0) return (fth_dp_variant)i;
  if (strcmp(name, "FSDP") == 0) return FTH_DP_ZERO3;
  return FTH_DP_COUNT;
}

static const char *const mem_names[FTH_MEM_COMPONENT_COUNT] = {
    "weights",           "gradient_buffers",       "optimizer_states",
    "saved_activations", "transient_forward_peak", "transient_backward_peak",
    "kv_cache"};

const char *fth_mem_component_name(fth_mem_component c) {
  return (c >= 0 && c < FTH_MEM_COMPONENT_COUNT) ? mem_names[c] : NULL;
}

fth_mem_component fth_mem_component_parse(const char *name) {
  for (int i = 0; i < FTH_MEM_COMPONENT_COUNT; i++)
    if (strcmp(name, mem_names[i]) == 0) return (fth_mem_component)i;
  if (strcmp(name, "activations") == 0) return FTH_MEM_ACTIVATIONS;
  if (strcmp(name, "gradients") == 0) return FTH_MEM_GRADIENTS;
  return FTH_MEM_COMPONENT_COUNT;
}

static const char *const comm_names[FTH_COMM_KIND_COUNT] = {"tp", "tp_moe", "ep",    "cp",
                                                            "pp", "dp",     "dp_moe"};

const char *fth_comm_kind_name(fth_comm_kind k) {
  return (k >= 0 && k < FTH_COMM_KIND_COUNT) ? comm_names[k] : NULL;
}

fth_train_def fth_train_def_default(void) {
  fth_train_def d;
  memset(&d, 0, sizeof d);
  d.global_batch = 1;
  d.micro_batch = 1;
  d.seq_len = 2048;
  d.act_bytes = 2;
  d.master_bytes = 4;
  d.grad_bytes = 0;
  d.dp = FTH_DP_DDP;
  d.pp = FTH_PP_1F1B;
  d.virtual_stages = 1;
  d.recompute = FTH_RECOMPUTE_NONE;
  d.sequence_parallel = 0;
  d.flash_attention = 1;
  d.expert_imbalance = 1.0;
  d.comp_comm_eff = 0.0;
  d.comp_mem_eff = 1.0;
  d.comm_mem_eff = 0.0;
  for (int i = 0; i < FTH_MEM_COMPONENT_COUNT; i++) {
    d.traffic_tier[i] = FTH_TIER_XPU;
    d.footprint_tier[i] = FTH_TIER_XPU;
  }
  d.coll = fth_coll_params_default();
  return d;
}

static int is_int(double x) {
  return isfinite(x) && x == floor(x);
}

static fth_status check_work(const fth_train_def *w, fth_error *err) {
  if (!(fth_positive(w->global_batch) && is_int(w->global_batch)))
    return fth_fail(err, FTH_EINVAL, "global_batch_size", "expected a positive integer, got %g",
                    w->global_batch);
  if (!(fth_positive(w->micro_batch) && is_int(w->micro_batch)))
    return fth_fail(err, FTH_EINVAL, "micro_batch_size", "expected a positive integer, got %g",
                    w->micro_batch);
  if (!(fth_positive(w->seq_len) && is_int(w->seq_len)))
    return fth_fail(err, FTH_EINVAL, "seq_length", "expected a positive integer, got %g",
                    w->seq_len);
  if (!(isfinite(w->total_train_tokens) && w->total_train_tokens >= 0))
    return fth_fail(err, FTH_EINVAL, "total_train_tokens", "expected >= 0, got %g",
                    w->total_train_tokens);
  if (!(w->act_bytes == 1 || w->act_bytes == 2 || w->act_bytes == 4))
    return fth_fail(err, FTH_EINVAL, "float_size_bytes", "expected 1, 2 or 4, got %g",
                    w->act_bytes);
  if (!(w->master_bytes == 2 || w->master_bytes == 4))
    return fth_fail(err, FTH_EINVAL, "full_precision_param_float_size", "expected 2 or 4, got %g",
                    w->master_bytes);
  if (!(w->grad_bytes == 0 || w->grad_bytes == 2 || w->grad_bytes == 4))
    return fth_fail(err, FTH_EINVAL, "gradient_float_size", "expected 2 or 4, got %g",
                    w->grad_bytes);
  if (w->dp < 0 || w->dp >= FTH_DP_COUNT)
    return fth_fail(err, FTH_EINVAL, "dp_spec.variant", "unknown variant");
  if (w->pp < 0 || w->pp >= FTH_PP_COUNT)
    return fth_fail(err, FTH_EINVAL, "pp_spec.variant", "unknown variant");
  if (w->virtual_stages < 1)
    return fth_fail(err, FTH_EINVAL, "pp_spec.virtual_stages", "expected >= 1, got %d",
                    w->virtual_stages);
  if (w->virtual_stages > 1 && w->pp != FTH_PP_INTERLEAVED)
    return fth_fail(err, FTH_EINVAL, "pp_spec.virtual_stages",
                    "virtual stages need pp_spec.variant INTERLEAVED, got %s",
                    fth_pp_schedule_name(w->pp));
  if (w->recompute < FTH_RECOMPUTE_NONE || w->recompute > FTH_RECOMPUTE_FULL)
    return fth_fail(err, FTH_EINVAL, "recompute", "unknown mode");
  if (!(isfinite(w->expert_imbalance) && w->expert_imbalance >= 1.0))
    return fth_fail(err, FTH_EINVAL, "moe_spec_v2.expert_imbalance", "expected >= 1, got %g",
                    w->expert_imbalance);
  const double effs[3] = {w->comp_comm_eff, w->comp_mem_eff, w->comm_mem_eff};
  const char *names[3] = {"comp_comm_efficiency", "comp_mem_efficiency", "comm_mem_efficiency"};
  for (int i = 0; i < 3; i++)
    if (!(effs[i] >= 0.0 && effs[i] <= 1.0))
      return fth_fail(err, FTH_EINVAL, names[i], "expected a value in [0, 1], got %g", effs[i]);
  if (!(w->ep_a2a_override_s >= 0))
    return fth_fail(err, FTH_EINVAL, "ep_all_to_all_sec", "expected seconds >= 0, got %g",
                    w->ep_a2a_override_s);
  if (!(w->coll.per_peer_overhead_s >= 0 && w->coll.launch_s >= 0 && w->kernel_launch_s >= 0))
    return fth_fail(err, FTH_EINVAL, "overheads", "expected >= 0");
  return FTH_OK;
}

static int levels_size(const fth_group_level *lv, int n) {
  int g = 1;
  for (int i = 0; i < n; i++) g *= lv[i].group_size;
  return g;
}

fth_status fth_train_compile(fth_train_plan *p, const fth_node_def *node,
                             const fth_topology_def *topo, const fth_model_def *model,
                             const fth_train_def *work, fth_error *err) {
  fth_error_clear(err);
  memset(p, 0, sizeof *p);
  if (fth_node_check(node, err) != FTH_OK) return fth_error_prefix(err, "hardware");
  if (fth_topology_check(topo, err) != FTH_OK) return fth_error_prefix(err, "topology");
  if (fth_model_check(model, err) != FTH_OK) return fth_error_prefix(err, "model");
  if (check_work(work, err) != FTH_OK) return fth_error_prefix(err, "workload");
  p->node = *node;
  p->topo = *topo;
  p->model = *model;
  const fth_model_def *m = &p->model;

  p->num_gpus = fth_topology_num_gpus(topo);
  p->nl_tp = fth_topology_group(topo, FTH_TAG_TP_ATTN, 1, p->lv_tp, &p->dim_tp);
  p->nl_tp_moe = fth_topology_group(topo, FTH_TAG_TP_MOE, 1, p->lv_tp_moe, &p->dim_tp_moe);
  p->nl_cp = fth_topology_group(topo, FTH_TAG_CP, 1, p->lv_cp, &p->dim_cp);
  p->nl_pp = fth_topology_group(topo, FTH_TAG_PP, 1, p->lv_pp, &p->dim_pp);
  p->nl_dp = fth_topology_group(topo, FTH_TAG_DP_ATTN, 1, p->lv_dp, &p->dim_dp);
  p->nl_dp_moe = fth_topology_group(topo, FTH_TAG_DP_MOE, 1, p->lv_dp_moe, &p->dim_dp_moe);
  { /* EP spans its scale-up and scale-out parts, scale-up first */
    fth_group_level su[FTH_MAX_PHYS_DIMS], so[FTH_MAX_PHYS_DIMS];
    int dsu, dso;
    int nsu = fth_topology_group(topo, FTH_TAG_EP_SU, 1, su, &dsu);
    int nso = fth_topology_group(topo, FTH_TAG_EP_SO, 1, so, &dso);
    p->ep_su = levels_size(su, nsu);
    p->ep_so = levels_size(so, nso);
    p->nl_ep = 0;
    for (int i = 0; i < nsu && p->nl_ep < FTH_MAX_PHYS_DIMS; i++) p->lv_ep[p->nl_ep++] = su[i];
    for (int i = 0; i < nso && p->nl_ep < FTH_MAX_PHYS_DIMS; i++) p->lv_ep[p->nl_ep++] = so[i];
    p->dim_ep = nsu > 0 ? dsu : dso;
  }
  p->tp = levels_size(p->lv_tp, p->nl_tp);
  p->tp_moe = levels_size(p->lv_tp_moe, p->nl_tp_moe);
  p->cp = levels_size(p->lv_cp, p->nl_cp);
  p->pp = levels_size(p->lv_pp, p->nl_pp);
  p->dp = levels_size(p->lv_dp, p->nl_dp);
  p->dp_moe = levels_size(p->lv_dp_moe, p->nl_dp_moe);
  p->ep = p->ep_su * p->ep_so;

  int moe = m->num_experts > 1;
  double attn_gpus = (double)p->tp * p->cp * p->dp * p->pp;
  if (attn_gpus != p->num_gpus)
    return fth_fail(err, FTH_EINVAL, "topology.logical",
                    "TP_Attn x CP x DP_Attn x PP = %d x %d x %d x %d = %.0f but the physical "
                    "topology has %.0f GPUs (make the logical sizes multiply to the GPU count)",
                    p->tp, p->cp, p->dp, p->pp, attn_gpus, p->num_gpus);
  if (moe) {
    double moe_gpus = (double)p->tp_moe * p->ep * p->dp_moe * p->pp;
    if (moe_gpus != p->num_gpus)
      return fth_fail(err, FTH_EINVAL, "topology.logical",
                      "TP_MoE x EP x DP_MoE x PP = %d x %d x %d x %d = %.0f but the physical "
                      "topology has %.0f GPUs",
                      p->tp_moe, p->ep, p->dp_moe, p->pp, moe_gpus, p->num_gpus);
    if (m->num_experts % p->ep != 0)
      return fth_fail(err, FTH_EINVAL, "topology.logical",
                      "EP = %d does not divide num_regular_experts = %d", p->ep, m->num_experts);
  } else if (p->ep > 1) {
    return fth_fail(err, FTH_EINVAL, "topology.logical",
                    "EP = %d but the model is dense (num_regular_experts <= 1)", p->ep);
  }
  if (m->num_heads % p->tp != 0)
    return fth_fail(err, FTH_EINVAL, "topology.logical",
                    "TP_Attn = %d does not divide num_heads = %d (pick a divisor of the heads)",
                    p->tp, m->num_heads);
  p->layers_per_stage = (int)fth_ceil_div((double)m->n_layers, (double)p->pp);
  int n_moe = fth_model_num_moe_layers(m);
  p->moe_layers_per_stage = (int)fth_ceil_div((double)n_moe, (double)p->pp);
  if (p->moe_layers_per_stage > p->layers_per_stage) p->moe_layers_per_stage = p->layers_per_stage;
  p->dense_layers_per_stage = p->layers_per_stage - p->moe_layers_per_stage;
  p->local_experts = moe ? (double)m->num_experts / p->ep : 0.0;
  p->dense_shape = fth_model_layer_shape(m, 0);
  p->moe_shape = moe ? fth_model_layer_shape(m, 1) : p->dense_shape;
  p->params = fth_model_params(m);
  return fth_train_rework(p, work, err);
}

fth_status fth_train_rework(fth_train_plan *p, const fth_train_def *work, fth_error *err) {
  fth_error_clear(err);
  if (check_work(work, err) != FTH_OK) return fth_error_prefix(err, "workload");
  p->work = *work;
  if (p->work.grad_bytes == 0) p->work.grad_bytes = p->work.master_bytes;
  const fth_model_def *m = &p->model;
  const fth_train_def *w = &p->work;
  if (m->n_layers < p->pp * w->virtual_stages)
    return fth_fail(err, FTH_EINVAL, "topology.logical",
                    "PP x virtual stages = %d x %d exceeds n_layers = %d", p->pp, w->virtual_stages,
                    m->n_layers);
  if (w->virtual_stages > 1 && m->n_layers % (p->pp * w->virtual_stages) != 0)
    return fth_fail(err, FTH_EINVAL, "workload.pp_spec.virtual_stages",
                    "n_layers %d is not a multiple of PP x virtual stages = %d x %d", m->n_layers,
                    p->pp, w->virtual_stages);
  if (fmod(w->seq_len, (double)p->cp) != 0)
    return fth_fail(err, FTH_EINVAL, "workload.seq_length",
                    "seq_length %.0f is not a multiple of CP = %d", w->seq_len, p->cp);
  double per_step = w->micro_batch * p->dp;
  if (fmod(w->global_batch, per_step) != 0)
    return fth_fail(err, FTH_EINVAL, "workload.global_batch_size",
                    "global_batch_size %.0f is not a multiple of micro_batch_size x DP = %.0f x "
                    "%d = %.0f",
                    w->global_batch, w->micro_batch, p->dp, per_step);
  p->microbatches = w->global_batch / per_step;
  if (w->pp == FTH_PP_INTERLEAVED && w->virtual_stages > 1 &&
      fmod(p->microbatches, (double)p->pp) != 0)
    return fth_fail(err, FTH_EINVAL, "workload.global_batch_size",
                    "the interleaved schedule needs micro-batches (%.0f) to be a multiple of "
                    "PP = %d",
                    p->microbatches, p->pp);

  p->prec = fth_precision_from_bytes(w->act_bytes);
  return FTH_OK;
}

/* ---- evaluation -------------------------------------------------------------------------- */

/* The step model's context: the plan plus how its kernels run. */
typedef fth_phase phase;
typedef struct ctx {
  const fth_train_plan *p;
  fth_phase_ctx k;
  fth_coll_algo algo[FTH_COMM_KIND_COUNT]; /* what the layer collectives used, for the report */
} ctx;

static void add_kernel(const ctx *c, phase *ph, fth_flop_part part, fth_kernel_cost k,
                       double weight_bytes) {
  fth_phase_add_kernel(&c->k, ph, part, k, weight_bytes);
}

#define phase_scale fth_phase_scale
#define phase_add   fth_phase_add

static double coll_time(const fth_train_plan *p, fth_coll_op op, double bytes,
                        const fth_group_level *lv, int n, fth_coll_algo *algo) {
  if (n == 0 || bytes <= 0) {
    if (algo) *algo = FTH_ALGO_AUTO;
    return 0.0;
  }
  fth_coll_result r = fth_collective(op, FTH_ALGO_AUTO, bytes, lv, n, &p->work.coll);
  if (algo) *algo = r.algo;
  return r.time_s;
}

/* Bytes of one TP collective of the layer: the [tokens, h] activation. */
static double tp_message_bytes(const fth_train_plan *p, double tokens) {
  return tokens * p->model.d_model * p->work.act_bytes;
}

/* Forward of one block for one micro-batch (tokens = b s / cp on this GPU),
 * and separately its backward. `moe` selects the MoE block. */
static void block_costs(ctx *c, int moe, phase *fwd, phase *bwd) {
  const fth_train_plan *p = c->p;
  const fth_model_def *m = &p->model;
  const fth_train_def *w = &p->work;
  const fth_layer_shape *sh = moe ? &p->moe_shape : &p->dense_shape;
  const double ab = w->act_bytes;
  const double tp = p->tp, tp_moe = p->tp_moe;
  const double tokens = w->micro_batch * w->seq_len / p->cp;
  const double h = m->d_model;
  memset(fwd, 0, sizeof *fwd);
  memset(bwd, 0, sizeof *bwd);

  /* Linears; routed experts: b s k / (TP_Attn CP) (token, expert) pairs per
   * GPU, times the imbalance (the mean load is the same on every GPU). */
  fth_phase_linears(&c->k, sh, tokens, tp, tp_moe,
                    tokens * m->top_k * w->expert_imbalance / tp * tp_moe, p->local_experts, ab, ab,
                    fwd, bwd);

  /* Attention core on heads / TP, queries s / CP against the causal context. */
  {
    double heads = sh->heads / tp;
    double kvh = fth_max(1.0, sh->kv_heads / tp);
    /* Fused (flash) kernels skip the masked half of a causal block; unfused
     * attention computes the full score matrix and masks it. */
    /* Unfused attention runs as two batched GEMMs at the matrix rate. */
    fth_kernel_env env = c->k.env;
    if (!w->flash_attention) env.attention_flops_per_s = env.matrix_flops_per_s;
    fth_kernel_cost k = fth_kernel_attention(&env, w->micro_batch, heads, kvh, w->seq_len,
                                             w->seq_len, sh->d_qk, sh->d_v, w->flash_attention, ab);
    k.flops /= p->cp;
    k.bytes /= p->cp;
    k.compute_s /= p->cp;
    k.memory_s /= p->cp;
    k.time_s /= p->cp;
    add_kernel(c, fwd, FTH_FLOP_ATTENTION, k, 0.0);
    if (!w->flash_attention) {
      /* Unfused attention materialises the b a s^2 score matrix: QK^T writes
       * it, a fused scale-mask-softmax reads and writes it, dropout reads it
       * and writes it and a 1-byte mask, P V reads it: 6 w + 1 bytes per
       * score (Korthikanti et al. 2022 Sec. 4.1 counts the same tensors);
       * backward moves about twice as much. */
      double scores = w->micro_batch * heads * w->seq_len * w->seq_len / p->cp;
      fth_kernel_cost ks = fth_kernel_elementwise(&c->k.env, scores, 8.0, 6.0 * ab + 1.0);
      add_kernel(c, fwd, FTH_FLOP_ATTENTION, ks, 0.0);
      fth_kernel_cost ksb = fth_kernel_elementwise(&c->k.env, scores, 12.0, 2.0 * (6.0 * ab + 1.0));
      add_kernel(c, bwd, FTH_FLOP_ATTENTION, ksb, 0.0);
    }
    /* Backward: dQ, dK, dV = 2x forward GEMM work; flash attention also
     * recomputes the scores (Dao 2023: 2.5x forward). */
    double f = w->flash_attention ? 2.5 : 2.0;
    fth_kernel_cost kb = k;
    kb.flops *= f;
    kb.compute_s *= f;
    kb.bytes *= 2.0;
    kb.memory_s *= 2.0;
    add_kernel(c, bwd, FTH_FLOP_ATTENTION, kb, 0.0);
  }

  /* Element-wise work: two norms (read + write h), two residual adds (2 reads
   * + 1 write of h), the MLP activation (gated: read 2 f, write f; plain: read
   * f, write f). Without sequence parallelism the h-sized work is repeated on
   * every TP rank; backward moves about twice the bytes. */
  {
    double htok = w->sequence_parallel ? tokens / tp : tokens;
    double norm_res = htok * h * (2.0 * 2.0 + 2.0 * 3.0);
    fth_kernel_cost ka = fth_kernel_elementwise(&c->k.env, norm_res / 2.0, 5.0, ab);
    add_kernel(c, fwd, FTH_FLOP_ATTENTION, ka, 0.0);
    add_kernel(c, fwd, FTH_FLOP_MLP, ka, 0.0);
    fth_kernel_cost kab = fth_kernel_elementwise(&c->k.env, norm_res / 2.0, 8.0, 2.0 * ab);
    add_kernel(c, bwd, FTH_FLOP_ATTENTION, kab, 0.0);
    add_kernel(c, bwd, FTH_FLOP_MLP, kab, 0.0);
    double ff = 0.0;
    double gate = m->gated_mlp ? 3.0 : 2.0;
    if (!moe) {
      ff = tokens * (m->ffn_hidden > 0 ? m->ffn_hidden : m->mlp_ratio * h) / tp;
    } else {
      double effn = m->expert_ffn_hidden > 0 ? m->expert_ffn_hidden : m->ffn_hidden;
      ff = tokens * m->top_k * w->expert_imbalance * effn / tp +
           tokens * m->num_shared_experts * effn / tp;
    }
    fth_kernel_cost kf = fth_kernel_elementwise(&c->k.env, ff, 8.0, gate * ab);
    add_kernel(c, fwd, FTH_FLOP_MLP, kf, 0.0);
    fth_kernel_cost kfb = fth_kernel_elementwise(&c->k.env, ff, 13.0, 2.0 * gate * ab);
    add_kernel(c, bwd, FTH_FLOP_MLP, kfb, 0.0);
  }

  /* Tensor-parallel collectives (Korthikanti et al. 2022 Sec. 4.2.2): two
   * all-reduces per block in forward and two in backward; with sequence
   * parallelism each becomes a reduce-scatter + all-gather of the same data.
   * In an MoE block the MLP's pair moves to TP_MoE over the routed tokens. */
  {
    double bytes = tp_message_bytes(p, tokens);
    double one;
    if (w->sequence_parallel)
      one =
          coll_time(p, FTH_COLL_REDUCE_SCATTER, bytes, p->lv_tp, p->nl_tp, &c->algo[FTH_COMM_TP]) +
          coll_time(p, FTH_COLL_ALL_GATHER, bytes, p->lv_tp, p->nl_tp, NULL);
    else
      one = coll_time(p, FTH_COLL_ALL_REDUCE, bytes, p->lv_tp, p->nl_tp, &c->algo[FTH_COMM_TP]);
    int tp_calls = moe ? 1 : 2;
    fwd->comm_s[FTH_COMM_TP] += tp_calls * one;
    bwd->comm_s[FTH_COMM_TP] += tp_calls * one;
    if (moe) {
      /* Shared experts and the routed experts' TP_MoE: gather the tokens
       * before the experts, reduce-scatter after (Megatron-Core MoE). */
      double pairs = tokens * m->top_k * w->expert_imbalance / tp;
      double eb = pairs * h * w->act_bytes;
      double t_moe = coll_time(p, FTH_COLL_ALL_GATHER, eb, p->lv_tp_moe, p->nl_tp_moe,
                               &c->algo[FTH_COMM_TP_MOE]) +
                     coll_time(p, FTH_COLL_REDUCE_SCATTER, eb, p->lv_tp_moe, p->nl_tp_moe, NULL);
      fwd->comm_s[FTH_COMM_TP_MOE] += t_moe;
      bwd->comm_s[FTH_COMM_TP_MOE] += t_moe;
      if (m->num_shared_experts > 0) {
        fwd->comm_s[FTH_COMM_TP] += one;
        bwd->comm_s[FTH_COMM_TP] += one;
      }
      /* Expert parallel dispatch + combine: each GPU sends its b s k / (TP CP)
       * token copies (hidden h each); the busiest receiver sets the pace. */
      double a2a = tokens / tp * m->top_k * h * w->act_bytes * w->expert_imbalance;
      /* A packet-level simulation of the routed exchange may stand in for the
       * alpha-beta cost (workload.ep_all_to_all_sec, from fathom.route). */
      double t_a2a = w->ep_a2a_override_s > 0 ? w->ep_a2a_override_s
                                              : coll_time(p, FTH_COLL_ALL_TO_ALL, a2a, p->lv_ep,
                                                          p->nl_ep, &c->algo[FTH_COMM_EP]);
      fwd->comm_s[FTH_COMM_EP] += 2.0 * t_a2a;
      bwd->comm_s[FTH_COMM_EP] += 2.0 * t_a2a;
    }
  }

  /* Context parallelism (ring attention, Liu et al. 2023): K and V of the
   * other CP ranks' chunks pass by every rank in forward; backward sends them
   * again with their gradients. */
  if (p->cp > 1) {
    double kv = tokens * sh->kv_cache_per_token / tp * w->act_bytes * p->cp;
    double t = coll_time(p, FTH_COLL_ALL_GATHER, kv, p->lv_cp, p->nl_cp, &c->algo[FTH_COMM_CP]);
    fwd->comm_s[FTH_COMM_CP] += t;
    bwd->comm_s[FTH_COMM_CP] += 2.0 * t;
  }
}

/* LM head and loss for one micro-batch on the last stage. */
static void head_costs(const ctx *c, phase *fwd, phase *bwd) {
  const fth_train_plan *p = c->p;
  const fth_train_def *w = &p->work;
  const double tokens = w->micro_batch * w->seq_len / p->cp;
  const double h = p->model.d_model, v = (double)p->model.vocab_size / p->tp;
  memset(fwd, 0, sizeof *fwd);
  memset(bwd, 0, sizeof *bwd);
  fth_kernel_cost k = fth_kernel_gemm(&c->k.env, tokens, v, h, 1, w->act_bytes);
  add_kernel(c, fwd, FTH_FLOP_UNEMBEDDING, k, h * v * w->act_bytes);
  fth_kernel_cost kd = fth_kernel_gemm(&c->k.env, tokens, h, v, 1, w->act_bytes);
  add_kernel(c, bwd, FTH_FLOP_UNEMBEDDING, kd, h * v * w->act_bytes);
  fth_kernel_cost kw = fth_kernel_gemm(&c->k.env, h, v, tokens, 1, w->act_bytes);
  add_kernel(c, bwd, FTH_FLOP_UNEMBEDDING, kw, 0.0);
  /* Softmax cross-entropy over the vocabulary shard, in fp32. */
  fth_kernel_cost ks = fth_kernel_elementwise(&c->k.env, tokens * v, 5.0, 4.0 + w->act_bytes);
  add_kernel(c, fwd, FTH_FLOP_UNEMBEDDING, ks, 0.0);
  add_kernel(c, bwd, FTH_FLOP_UNEMBEDDING, ks, 0.0);
  /* Embedding lookup: gather rows and write [tokens, h] (memory only). */
  fth_kernel_cost ke = fth_kernel_elementwise(&c->k.env, tokens * h, 0.0, 2.0 * w->act_bytes);
  add_kernel(c, fwd, FTH_FLOP_EMBEDDING, ke, 0.0);
  add_kernel(c, bwd, FTH_FLOP_EMBEDDING, ke, 0.0);
}

/* Kernels and layer collectives overlapped: what the phase costs on the critical path. */
static double phase_time(const fth_train_plan *p, const phase *ph, double *exposed) {
  return fth_phase_time(ph, p->work.comp_comm_eff, exposed);
}

void fth_train_stage_params(const fth_train_plan *p, double *dense, double *expert) {
  const fth_layer_shape *ds = &p->dense_shape, *ms = &p->moe_shape;
  double tp = p->tp, tp_moe = p->tp_moe;
  double d = p->dense_layers_per_stage * (ds->params_attn + ds->params_mlp + ds->params_norm) / tp;
  d += p->moe_layers_per_stage *
       (ms->params_attn + ms->params_norm + ms->params_router + ms->params_shared) / tp;
  /* The embedding sits on the first stage, the LM head on the last; the
   * busiest stage holds one of them (both when PP = 1). */
  double emb = p->params.embedding / tp, head = p->params.lm_head / tp;
  d += p->pp == 1 ? emb + head : fth_max(emb, head > 0 ? head : emb);
  *dense = d;
  *expert = p->moe_layers_per_stage * p->local_experts * ms->params_per_expert / tp_moe;
}

void fth_train_footprint(const fth_train_plan *p, fth_memory_footprint *out) {
  const fth_train_def *w = &p->work;
  const fth_model_def *m = &p->model;
  memset(out, 0, sizeof *out);
  double dense, expert;
  fth_train_stage_params(p, &dense, &expert);
  double dp = p->dp, dp_moe = p->dp_moe > 0 ? p->dp_moe : 1;
  /* Mixed-precision Adam (Rajbhandari et al. 2020 Sec. 3.1): weights at the
   * compute width, gradients at grad width, fp32 master copy (when weights
   * are narrower) and two fp32 moments; ZeRO stage k shards the first k of
   * optimizer, gradients, weights over DP. */
  double wb = w->act_bytes, gb = w->grad_bytes, mb = w->master_bytes;
  double opt_per = 2.0 * mb + (wb < mb ? mb : 0.0);
  double shard_w = w->dp >= FTH_DP_ZERO3, shard_g = w->dp >= FTH_DP_ZERO2,
         shard_o = w->dp >= FTH_DP_ZERO1;
  out->bytes[FTH_MEM_WEIGHTS] =
      dense * wb / (shard_w ? dp : 1) + expert * wb / (shard_w ? dp_moe : 1);
  out->bytes[FTH_MEM_GRADIENTS] =
      dense * gb / (shard_g ? dp : 1) + expert * gb / (shard_g ? dp_moe : 1);
  out->bytes[FTH_MEM_OPTIMIZER] =
      dense * opt_per / (shard_o ? dp : 1) + expert * opt_per / (shard_o ? dp_moe : 1);

  /* Saved activations (Korthikanti et al. 2022): per-token bytes per block,
   * times tokens of a micro-batch, blocks on the stage and micro-batches in
   * flight on the first stage. */
  double tokens = w->micro_batch * w->seq_len / p->cp;
  double routed = m->num_experts > 1 ? m->top_k * w->expert_imbalance * p->tp_moe / p->tp : 0.0;
  double a_dense = fth_model_activation_bytes_per_token(m, 0, w->recompute, p->tp, p->tp_moe,
                                                        w->sequence_parallel, w->seq_len / p->cp,
                                                        w->act_bytes, w->flash_attention, 0.0);
  double a_moe = m->num_experts > 1
                     ? fth_model_activation_bytes_per_token(
                           m, 1, w->recompute, p->tp, p->tp_moe, w->sequence_parallel,
                           w->seq_len / p->cp, w->act_bytes, w->flash_attention, routed)
                     : a_dense;
  double per_mb = tokens * (p->dense_layers_per_stage * a_dense + p->moe_layers_per_stage * a_moe);
  double inflight = fth_pp_inflight(w->pp, p->pp, p->microbatches, w->virtual_stages);
  out->bytes[FTH_MEM_ACTIVATIONS] = per_mb * inflight;

  /* Transients: forward, the largest live intermediate (fp32 logits of the
   * vocabulary shard on the last stage, or the MLP's inner activation);
   * backward, one block's full activations when it is recomputed plus the
   * same largest gradient. */
  double ffn = m->num_experts > 1
                   ? (m->expert_ffn_hidden > 0 ? m->expert_ffn_hidden : m->ffn_hidden) * m->top_k
                   : (m->ffn_hidden > 0 ? m->ffn_hidden : m->mlp_ratio * m->d_model);
  double logits = tokens * (double)m->vocab_size / p->tp * 4.0;
  double mlp_inner = tokens * ffn / p->tp * w->act_bytes * (m->gated_mlp ? 3.0 : 2.0);
  out->bytes[FTH_MEM_TRANSIENT_FWD] = fth_max(logits, mlp_inner);
  double block_full = 0;
  if (w->recompute != FTH_RECOMPUTE_NONE) {
    block_full = tokens * fth_model_activation_bytes_per_token(
                              m, m->num_experts > 1, FTH_RECOMPUTE_NONE, p->tp, p->tp_moe,
                              w->sequence_parallel, w->seq_len / p->cp, w->act_bytes,
                              w->flash_attention, routed);
  }
  out->bytes[FTH_MEM_TRANSIENT_BWD] = block_full + out->bytes[FTH_MEM_TRANSIENT_FWD];

  for (int t = 0; t < FTH_TIER_COUNT; t++) {
    out->tier_capacity[t] = p->node.has_tier[t] ? fth_memory_capacity_bytes(&p->node.tier[t]) : 0;
  }
  /* The transient peaks do not coexist: count the larger of the two. */
  for (int c = 0; c < FTH_MEM_COMPONENT_COUNT; c++) {
    if (c == FTH_MEM_TRANSIENT_FWD) continue;
    double b = out->bytes[c];
    if (c == FTH_MEM_TRANSIENT_BWD) b = fth_max(b, out->bytes[FTH_MEM_TRANSIENT_FWD]);
    out->tier_bytes[w->footprint_tier[c]] += b;
    out->peak_bytes += b;
  }
  out->fits = 1;
  out->overflow_tier = FTH_TIER_COUNT;
  for (int t = 0; t < FTH_TIER_COUNT; t++) {
    out->tier_fits[t] = out->tier_bytes[t] <= out->tier_capacity[t];
    if (!out->tier_fits[t] && out->fits) {
      out->fits = 0;
      out->overflow_tier = (fth_tier)t;
    }
  }
}

static void set_comm(fth_comm_item *it, fth_coll_op op, fth_coll_algo algo,
                     const fth_group_level *lv, int n, int dim, double bytes, double calls) {
  it->op = op;
  it->algo = algo;
  it->group_size = levels_size(lv, n);
  it->num_levels = n;
  it->phys_dim = dim;
  it->bytes_per_call = bytes;
  it->calls_per_step = calls;
  it->bytes_per_step = bytes * calls;
}

void fth_train_evaluate(const fth_train_plan *p, fth_train_result *r) {
  const fth_train_def *w = &p->work;
  const fth_model_def *m = &p->model;
  memset(r, 0, sizeof *r);
  ctx c;
  c.p = p;
  for (int k = 0; k < FTH_COMM_KIND_COUNT; k++) c.algo[k] = FTH_ALGO_AUTO;
  c.k.env = fth_kernel_env_make(&p->node, p->prec, w->traffic_tier[FTH_MEM_ACTIVATIONS]);
  {
    fth_tier wt = w->traffic_tier[FTH_MEM_WEIGHTS];
    c.k.weight_bw = p->node.has_tier[wt] ? fth_memory_bw_bytes_per_s(&p->node.tier[wt]) : 0.0;
  }
  c.k.env.model = w->kernel_model;
  c.k.comp_mem_eff = w->comp_mem_eff;
  c.k.launch_s = w->kernel_launch_s;

  /* One micro-batch through the slowest stage. */
  phase dfwd, dbwd, mfwd, mbwd, hfwd, hbwd, fwd, bwd;
  block_costs(&c, 0, &dfwd, &dbwd);
  memset(&mfwd, 0, sizeof mfwd);
  memset(&mbwd, 0, sizeof mbwd);
  if (p->moe_layers_per_stage > 0) block_costs(&c, 1, &mfwd, &mbwd);
  head_costs(&c, &hfwd, &hbwd);
  memset(&fwd, 0, sizeof fwd);
  memset(&bwd, 0, sizeof bwd);
  phase_scale(&dfwd, p->dense_layers_per_stage);
  phase_scale(&dbwd, p->dense_layers_per_stage);
  phase_scale(&mfwd, p->moe_layers_per_stage);
  phase_scale(&mbwd, p->moe_layers_per_stage);
  phase_add(&fwd, &dfwd);
  phase_add(&fwd, &mfwd);
  phase_add(&bwd, &dbwd);
  phase_add(&bwd, &mbwd);
  phase block_fwd = fwd; /* blocks only: what recomputation re-runs */
  phase_add(&fwd, &hfwd);
  phase_add(&bwd, &hbwd);

  /* Recomputation re-runs forward work inside backward: the whole block
   * (full) or the attention core (selective; free with flash attention,
   * whose backward recomputes scores anyway). */
  phase rec;
  memset(&rec, 0, sizeof rec);
  if (w->recompute == FTH_RECOMPUTE_FULL) {
    rec = block_fwd;
  } else if (w->recompute == FTH_RECOMPUTE_SELECTIVE && !w->flash_attention) {
    double heads = p->dense_shape.heads / p->tp;
    double kvh = fth_max(1.0, p->dense_shape.kv_heads / p->tp);
    fth_kernel_env env = c.k.env;
    env.attention_flops_per_s = env.matrix_flops_per_s; /* unfused: batched GEMMs */
    fth_kernel_cost k =
        fth_kernel_attention(&env, w->micro_batch, heads, kvh, w->seq_len, w->seq_len,
                             p->dense_shape.d_qk, p->dense_shape.d_v, 0, w->act_bytes);
    double s = (double)p->layers_per_stage / p->cp;
    k.flops *= s;
    k.bytes *= s;
    k.compute_s *= s;
    k.memory_s *= s;
    add_kernel(&c, &rec, FTH_FLOP_ATTENTION, k, 0.0);
    /* and the score matrix's softmax and dropout passes (as in block_costs) */
    double scores = p->layers_per_stage * w->micro_batch * heads * w->seq_len * w->seq_len / p->cp;
    add_kernel(&c, &rec, FTH_FLOP_ATTENTION,
               fth_kernel_elementwise(&c.k.env, scores, 8.0, 6.0 * w->act_bytes + 1.0), 0.0);
  }

  double exp_f[FTH_COMM_KIND_COUNT], exp_b[FTH_COMM_KIND_COUNT], exp_r[FTH_COMM_KIND_COUNT];
  double t_f = phase_time(p, &fwd, exp_f);
  double t_rec = phase_time(p, &rec, exp_r);
  double t_b = phase_time(p, &bwd, exp_b) + t_rec;
  r->fwd_s = t_f;
  r->bwd_s = t_b;
  r->recompute_s = p->microbatches * t_rec;
  for (int i = 0; i < FTH_FLOP_PART_COUNT; i++) {
    r->fwd_flops[i] = fwd.flops[i];
    r->bwd_flops[i] = bwd.flops[i];
    r->fwd_compute_s[i] = fwd.compute_s[i];
    r->bwd_compute_s[i] = bwd.compute_s[i];
    r->fwd_bytes[i] = fwd.bytes[i];
    r->bwd_bytes[i] = bwd.bytes[i];
    r->fwd_memory_s[i] = fwd.memory_s[i];
    r->bwd_memory_s[i] = bwd.memory_s[i];
  }
  r->fwd_kernel_s = fwd.kernel_s;
  r->bwd_kernel_s = bwd.kernel_s + rec.kernel_s;
  double mbs = p->microbatches;
  r->microbatches = mbs;

  /* Layer collectives over the step. */
  {
    const double tokens = w->micro_batch * w->seq_len / p->cp;
    double tpb = tp_message_bytes(p, tokens);
    double tp_calls_layer = 2.0 * p->dense_layers_per_stage +
                            (1.0 + (m->num_shared_experts > 0)) * p->moe_layers_per_stage;
    double rec_factor = w->recompute == FTH_RECOMPUTE_FULL ? 3.0 : 2.0; /* fwd, bwd, re-fwd */
    set_comm(&r->comm[FTH_COMM_TP],
             w->sequence_parallel ? FTH_COLL_REDUCE_SCATTER : FTH_COLL_ALL_REDUCE,
             c.algo[FTH_COMM_TP], p->lv_tp, p->nl_tp, p->dim_tp, tpb,
             mbs * tp_calls_layer * rec_factor * (w->sequence_parallel ? 2.0 : 1.0));
    if (p->moe_layers_per_stage > 0) {
      double pairs = tokens * m->top_k * w->expert_imbalance / p->tp;
      double a2a = pairs * m->d_model * w->act_bytes;
      set_comm(&r->comm[FTH_COMM_EP], FTH_COLL_ALL_TO_ALL, c.algo[FTH_COMM_EP], p->lv_ep, p->nl_ep,
               p->dim_ep, a2a, mbs * p->moe_layers_per_stage * 2.0 * rec_factor);
      set_comm(&r->comm[FTH_COMM_TP_MOE], FTH_COLL_ALL_GATHER, c.algo[FTH_COMM_TP_MOE],
               p->lv_tp_moe, p->nl_tp_moe, p->dim_tp_moe, a2a,
               mbs * p->moe_layers_per_stage * 2.0 * rec_factor);
    }
    if (p->cp > 1) {
      double kv = tokens * p->dense_shape.kv_cache_per_token / p->tp * w->act_bytes * p->cp;
      set_comm(&r->comm[FTH_COMM_CP], FTH_COLL_ALL_GATHER, c.algo[FTH_COMM_CP], p->lv_cp, p->nl_cp,
               p->dim_cp, kv, mbs * p->layers_per_stage * (rec_factor + 1.0));
    }
    for (int k = 0; k < FTH_COMM_KIND_COUNT; k++) {
      double raw = mbs * (fwd.comm_s[k] + bwd.comm_s[k] + rec.comm_s[k]);
      double ex = mbs * (exp_f[k] + exp_b[k] + exp_r[k]);
      ex = fth_max(0.0, fth_min(ex, raw)); /* rounding: 0 <= exposed <= raw */
      r->comm[k].raw_s = raw;
      r->comm[k].exposed_s = ex;
      r->comm[k].hidden_s = raw - ex;
    }
  }

  /* Pipeline: send/recv of the [b, s/CP, h] activation (scattered over TP
   * with sequence parallelism) at every stage boundary, forward and backward,
   * v times per micro-batch when interleaved. */
  r->busy_s = mbs * (t_f + t_b);
  if (p->pp > 1) {
    double v = w->pp == FTH_PP_INTERLEAVED ? (double)w->virtual_stages : 1.0;
    double bytes = w->micro_batch * w->seq_len / p->cp * m->d_model * w->act_bytes /
                   (w->sequence_parallel ? p->tp : 1);
    fth_coll_algo a;
    double t1 = coll_time(p, FTH_COLL_SEND_RECV, bytes, p->lv_pp, p->nl_pp, &a);
    double calls = 2.0 * mbs * v;
    set_comm(&r->comm[FTH_COMM_PP], FTH_COLL_SEND_RECV, a, p->lv_pp, p->nl_pp, p->dim_pp, bytes,
             calls);
    double raw = calls * t1;
    double hidden = w->comp_comm_eff * fth_min(raw, r->busy_s);
    r->comm[FTH_COMM_PP].raw_s = raw;
    r->comm[FTH_COMM_PP].hidden_s = hidden;
    r->comm[FTH_COMM_PP].exposed_s = raw - hidden;
  }
  r->bubble_s = fth_pp_bubble_s(w->pp, p->pp, mbs, w->virtual_stages, t_f, t_b);

  /* Data parallel: gradients of the stage's parameters, dense over DP_Attn,
   * experts over DP_MoE. DDP all-reduces once per step; ZeRO-1/2 reduce-
   * scatter gradients and all-gather updated weights (same volume, Rajbhandari
   * et al. 2020 Sec. 7); ZeRO-3 gathers weights for every micro-batch's
   * forward and backward and reduce-scatters its gradients. The gradient
   * reduction hides under the last micro-batch's backward (bucketed, as in
   * Megatron and PyTorch DDP), ZeRO-3 traffic under the whole step. */
  {
    double dense, expert;
    fth_train_stage_params(p, &dense, &expert);
    double t_dp = 0, t_dpm = 0;
    fth_coll_algo a = FTH_ALGO_AUTO, am = FTH_ALGO_AUTO;
    double calls = 1, gbytes = dense * w->grad_bytes, gbytes_m = expert * w->grad_bytes;
    fth_coll_op op = FTH_COLL_ALL_REDUCE;
    if (w->dp == FTH_DP_DDP) {
      t_dp = coll_time(p, FTH_COLL_ALL_REDUCE, gbytes, p->lv_dp, p->nl_dp, &a);
      t_dpm = coll_time(p, FTH_COLL_ALL_REDUCE, gbytes_m, p->lv_dp_moe, p->nl_dp_moe, &am);
    } else if (w->dp == FTH_DP_ZERO1 || w->dp == FTH_DP_ZERO2) {
      op = FTH_COLL_REDUCE_SCATTER;
      t_dp = coll_time(p, FTH_COLL_REDUCE_SCATTER, gbytes, p->lv_dp, p->nl_dp, &a) +
             coll_time(p, FTH_COLL_ALL_GATHER, dense * w->act_bytes, p->lv_dp, p->nl_dp, NULL);
      t_dpm = coll_time(p, FTH_COLL_REDUCE_SCATTER, gbytes_m, p->lv_dp_moe, p->nl_dp_moe, &am) +
              coll_time(p, FTH_COLL_ALL_GATHER, expert * w->act_bytes, p->lv_dp_moe, p->nl_dp_moe,
                        NULL);
    } else {
      op = FTH_COLL_ALL_GATHER;
      calls = mbs;
      t_dp = mbs * (2.0 * coll_time(p, FTH_COLL_ALL_GATHER, dense * w->act_bytes, p->lv_dp,
                                    p->nl_dp, &a) +
                    coll_time(p, FTH_COLL_REDUCE_SCATTER, gbytes, p->lv_dp, p->nl_dp, NULL));
      t_dpm =
          mbs * (2.0 * coll_time(p, FTH_COLL_ALL_GATHER, expert * w->act_bytes, p->lv_dp_moe,
                                 p->nl_dp_moe, &am) +
                 coll_time(p, FTH_COLL_REDUCE_SCATTER, gbytes_m, p->lv_dp_moe, p->nl_dp_moe, NULL));
    }
    set_comm(&r->comm[FTH_COMM_DP], op, a, p->lv_dp, p->nl_dp, p->dim_dp, gbytes, calls);
    set_comm(&r->comm[FTH_COMM_DP_MOE], op, am, p->lv_dp_moe, p->nl_dp_moe, p->dim_dp_moe, gbytes_m,
             calls);
    /* Window: compute-bound kernel time hides comp_comm_eff of it, memory-
     * bound kernel time comm_mem_eff of it (both contend for HBM). */
    double window;
    if (w->dp == FTH_DP_ZERO3)
      window = mbs * (w->comp_comm_eff * (fwd.compute_bound_s + bwd.compute_bound_s) +
                      w->comm_mem_eff * (fwd.memory_bound_s + bwd.memory_bound_s));
    else
      window = w->comp_comm_eff * bwd.compute_bound_s + w->comm_mem_eff * bwd.memory_bound_s;
    double raw = t_dp + t_dpm;
    double hidden = fth_min(raw, window);
    double exposed = raw - hidden;
    r->comm[FTH_COMM_DP].raw_s = t_dp;
    r->comm[FTH_COMM_DP_MOE].raw_s = t_dpm;
    r->comm[FTH_COMM_DP].exposed_s = raw > 0 ? exposed * t_dp / raw : 0;
    r->comm[FTH_COMM_DP_MOE].exposed_s = raw > 0 ? exposed * t_dpm / raw : 0;
    r->comm[FTH_COMM_DP].hidden_s = t_dp - r->comm[FTH_COMM_DP].exposed_s;
    r->comm[FTH_COMM_DP_MOE].hidden_s = t_dpm - r->comm[FTH_COMM_DP_MOE].exposed_s;

    /* Adam step, memory-bound: read master, two moments and the gradient,
     * write master, moments and the compute-width weights, per parameter
     * this GPU updates (ZeRO >= 1 updates 1/DP of them). */
    double upd = dense / (w->dp >= FTH_DP_ZERO1 ? p->dp : 1) +
                 expert / (w->dp >= FTH_DP_ZERO1 ? (p->dp_moe > 0 ? p->dp_moe : 1) : 1);
    double per = 6.0 * w->master_bytes + w->grad_bytes + w->act_bytes;
    fth_tier ot = w->traffic_tier[FTH_MEM_OPTIMIZER];
    double bw = p->node.has_tier[ot] ? fth_memory_bw_bytes_per_s(&p->node.tier[ot]) : 0;
    r->optimizer_s = bw > 0 ? upd * per / bw : HUGE_VAL;
    r->params_per_gpu = dense + expert;
  }

  /* Totals. */
  r->exposed_comm_s = 0;
  for (int k = 0; k < FTH_COMM_KIND_COUNT; k++) r->exposed_comm_s += r->comm[k].exposed_s;
  /* Offloaded activations (saved_activations mapped off the accelerator): each
   * micro-batch's saved tensors go out during forward and come back during
   * backward at that tier's bandwidth, hidden under compute as far as
   * comp_comm_efficiency allows (Calculon's offload model: max(0, transfer -
   * window)). */
  fth_train_footprint(p, &r->mem);
  {
    fth_tier at = w->footprint_tier[FTH_MEM_ACTIVATIONS];
    if (at != FTH_TIER_XPU && p->node.has_tier[at]) {
      double inflight = fth_pp_inflight(w->pp, p->pp, mbs, w->virtual_stages);
      double per_mb = inflight > 0 ? r->mem.bytes[FTH_MEM_ACTIVATIONS] / inflight : 0.0;
      double raw = 2.0 * mbs * per_mb / fth_memory_bw_bytes_per_s(&p->node.tier[at]);
      double window = w->comp_comm_eff * r->busy_s;
      r->offload_raw_s = raw;
      r->offload_exposed_s = fth_max(0.0, raw - window);
    }
  }
  r->step_time_s = r->busy_s + r->bubble_s + r->comm[FTH_COMM_PP].exposed_s +
                   r->comm[FTH_COMM_DP].exposed_s + r->comm[FTH_COMM_DP_MOE].exposed_s +
                   r->optimizer_s + r->offload_exposed_s;
  double compute = 0;
  for (int i = 0; i < FTH_FLOP_PART_COUNT; i++)
    compute += fwd.compute_s[i] + bwd.compute_s[i] + rec.compute_s[i];
  r->compute_s = mbs * compute;
  r->memory_exposed_s = mbs * (fwd.kernel_s + bwd.kernel_s + rec.kernel_s) - r->compute_s;
  if (r->memory_exposed_s < 0) r->memory_exposed_s = 0;
  r->bubble_fraction = r->step_time_s > 0 ? r->bubble_s / r->step_time_s : 0;

  r->tokens_per_step = w->global_batch * w->seq_len;
  r->steps = w->total_train_tokens > 0 ? ceil(w->total_train_tokens / r->tokens_per_step) : 1;
  r->total_time_s = r->steps * r->step_time_s;
  r->tokens_per_s = r->tokens_per_step / r->step_time_s;
  /* Model FLOPs: forward + data and weight gradients of every block and the
   * LM head for every token (the useful work; Chowdhery et al. 2022 App. B
   * MFU); hardware FLOPs add the recomputed forward. */
  double fwd_tok = fth_model_fwd_flops_per_token(m, w->seq_len);
  double per_tok = 3.0 * fwd_tok;
  r->model_flops_per_step = per_tok * r->tokens_per_step;
  double rec_tok = 0;
  if (w->recompute == FTH_RECOMPUTE_FULL) rec_tok = fwd_tok - fth_model_lm_head_flops_per_token(m);
  r->hardware_flops_per_step = (per_tok + rec_tok) * r->tokens_per_step;
  double peak = p->node.compute.flops_per_s[p->prec];
  if (!(peak > 0))
    peak = fth_compute_flops_per_s(&p->node.compute, p->prec) / p->node.compute.efficiency;
  double denom = r->step_time_s * p->num_gpus * peak;
  r->mfu = denom > 0 ? r->model_flops_per_step / denom : 0;
  r->hfu = denom > 0 ? r->hardware_flops_per_step / denom : 0;
  r->achieved_flops_per_gpu = r->model_flops_per_step / (r->step_time_s * p->num_gpus);
}
