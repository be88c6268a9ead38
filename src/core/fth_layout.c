/* fth_layout.c: degrees, groups, stage split and shapes (fth_layout.h). */
#include "fth_layout.h"

#include <math.h>
#include <string.h>

static const char *const comm_names[FTH_COMM_KIND_COUNT] = {"tp", "tp_moe", "ep",    "cp",
                                                            "pp", "dp",     "dp_moe"};

const char *fth_comm_kind_name(fth_comm_kind k) {
  return (k >= 0 && k < FTH_COMM_KIND_COUNT) ? comm_names[k] : NULL;
}

static const char *const cp_comm_names[FTH_CP_COMM_COUNT] = {"p2p", "a2a"};

const char *fth_cp_comm_name(fth_cp_comm c) {
  return (c >= 0 && c < FTH_CP_COMM_COUNT) ? cp_comm_names[c] : NULL;
}

fth_cp_comm fth_cp_comm_parse(const char *name) {
  for (int i = 0; i < FTH_CP_COMM_COUNT; i++)
    if (strcmp(name, cp_comm_names[i]) == 0) return (fth_cp_comm)i;
  return FTH_CP_COMM_COUNT;
}

static int levels_size(const fth_group_level *lv, int n) {
  int g = 1;
  for (int i = 0; i < n; i++) g *= lv[i].group_size;
  return g;
}

static void group(const fth_topology_def *topo, fth_logical_tag tag, const double *tag_bytes,
                  fth_group *g) {
  g->n = tag_bytes ? fth_topology_group_by_traffic(topo, tag, tag_bytes, g->lv, &g->dim)
                   : fth_topology_group(topo, tag, 1, g->lv, &g->dim);
  g->size = levels_size(g->lv, g->n);
}

/* EP spans its scale-up and scale-out parts, scale-up first. */
static void ep_group(const fth_topology_def *topo, const double *tag_bytes, fth_layout *l) {
  fth_group su, so;
  group(topo, FTH_TAG_EP_SU, tag_bytes, &su);
  group(topo, FTH_TAG_EP_SO, tag_bytes, &so);
  fth_group *g = &l->group[FTH_COMM_EP];
  g->n = 0;
  for (int i = 0; i < su.n && g->n < FTH_MAX_PHYS_DIMS; i++) g->lv[g->n++] = su.lv[i];
  for (int i = 0; i < so.n && g->n < FTH_MAX_PHYS_DIMS; i++) g->lv[g->n++] = so.lv[i];
  g->dim = su.n > 0 ? su.dim : so.dim;
  g->size = levels_size(g->lv, g->n);
  l->ep_su = su.size;
  l->ep_so = so.size;
}

/* The stages' layers. PP not dividing them, the stages short of a layer
 * are the last (it carries the LM head and loss), then the first (the
 * embedding), then the others from the back, as Llama 3 balanced its
 * pipeline (Llama Team 2024 Sec. 3.3.2). Counts asked of the first and the
 * last stage (fth_layout_split, Megatron-Core's
 * num_layers_in_first_pipeline_stage / ..._last_pipeline_stage) take those
 * stages out, and the others share the rest by the same rule. MoE blocks are
 * counted where they really are (leading dense layers, every k-th layer MoE).
 * The heaviest stage but the last (the most MoE blocks, then the most layers)
 * and the last stage are kept: a step model takes the slower of the two. */
/* Shortness rank of stage s: the last 0, the first 1, a middle stage pp - s. */
static int short_rank(int pp, int s) {
  return s == pp - 1 ? 0 : (s == 0 ? 1 : pp - s);
}

/* Layers of stage s under the layout's split. */
static int stage_size(const fth_layout *l, int n_layers, int s) {
  const int pp = l->pp;
  const int fset = pp > 1 && l->split_first > 0, lset = pp > 1 && l->split_last > 0;
  if (fset && s == 0) return l->split_first;
  if (lset && s == pp - 1) return l->split_last;
  int free_stages = pp - fset - lset;
  int rest = n_layers - (fset ? l->split_first : 0) - (lset ? l->split_last : 0);
  int per = (int)fth_ceil_div((double)rest, (double)free_stages);
  int slack = per * free_stages - rest;
  /* free stages shorter in rank than s: the last, the first, then middle
   * stages behind s */
  int r = short_rank(pp, s), before = 0;
  if (pp > 1 && !lset && r > 0) before++;
  if (pp > 1 && !fset && r > 1) before++;
  if (s > 0 && s < pp - 1) before += pp - 2 - s;
  return per - (before < slack ? 1 : 0);
}

int fth_layout_stage_size(const fth_layout *l, const fth_model_def *m, int s) {
  return stage_size(l, m->n_layers, s);
}

void fth_layout_stage_layers(const fth_layout *l, const fth_model_def *m, int s, int *layers,
                             int *moe) {
  int first = 0;
  for (int i = 0; i < s; i++) first += stage_size(l, m->n_layers, i);
  *layers = stage_size(l, m->n_layers, s);
  *moe = fth_model_num_moe_in(m, first, first + *layers);
}

static void stages(fth_layout *l, const fth_model_def *m) {
  int pp = l->pp;
  int first = 0;
  l->layers_per_stage = 0;
  l->moe_layers_per_stage = -1;
  l->mid_stage_layers = l->mid_stage_moe = 0;
  int mid_seen = 0;
  for (int s = 0; s < pp; s++) {
    int n = stage_size(l, m->n_layers, s);
    int moe = fth_model_num_moe_in(m, first, first + n);
    if (n > l->layers_per_stage) l->layers_per_stage = n;
    if (s == 0) {
      l->first_stage_layers = n;
      l->first_stage_moe = moe;
    }
    if (s > 0 && s < pp - 1 &&
        (!mid_seen || moe > l->mid_stage_moe ||
         (moe == l->mid_stage_moe && n > l->mid_stage_layers))) {
      l->mid_stage_layers = n;
      l->mid_stage_moe = moe;
      mid_seen = 1;
    }
    if (s == pp - 1) {
      l->last_stage_layers = n;
      l->last_stage_moe = moe;
    } else if (moe > l->moe_layers_per_stage ||
               (moe == l->moe_layers_per_stage && n > l->moe_layers_per_stage + l->dense_layers_per_stage)) {
      l->moe_layers_per_stage = moe;
      l->dense_layers_per_stage = n - moe;
    }
    first += n;
  }
  if (pp == 1) {
    l->moe_layers_per_stage = l->last_stage_moe;
    l->dense_layers_per_stage = l->last_stage_layers - l->last_stage_moe;
  }
}

/* Parameters of the busiest stage on one GPU: the dense part sharded by TP
 * (with the embedding or the LM head), the experts by TP_MoE. */
static void stage_params(fth_layout *l, const fth_model_def *m) {
  const fth_layer_shape *ds = &l->dense_shape, *ms = &l->moe_shape;
  const double tp = l->tp;
  const double dense_block = (ds->params_attn + ds->params_mlp + ds->params_norm) / tp;
  const double moe_block = (ms->params_attn + ms->params_norm + ms->params_router +
                            ms->params_shared) / tp;
  const double experts = l->local_experts * ms->params_per_expert / l->tp_moe;
  /* The embedding sits on the first stage, the LM head on the last (both
   * when PP = 1). The final norm's weights are replicated over TP. */
  double emb = l->params.embedding / tp, head = l->params.lm_head / tp + l->params.final_norm;
  int last_dense = l->last_stage_layers - l->last_stage_moe;
  double d_last = last_dense * dense_block + l->last_stage_moe * moe_block + head;
  double e_last = l->last_stage_moe * experts;
  /* MTP modules on the last stage: a block of the last layer's kind each and
   * the [h; h] -> h projection (DeepSeek-AI 2024 Sec. 2.2). */
  if (m->mtp_layers > 0) {
    int moe_kind = fth_model_last_layer_moe(m);
    double h = m->d_model;
    d_last += m->mtp_layers * ((moe_kind ? moe_block : dense_block) + 2.0 * h * h / tp);
    if (moe_kind) e_last += m->mtp_layers * experts;
  }
  const double head_w = l->params.lm_head / tp;
  if (l->pp == 1) {
    l->stage_dense_params = d_last + emb;
    l->stage_expert_params = e_last;
    l->stage_vocab_params = emb + head_w;
    return;
  }
  /* The first stage with the embedding, the heaviest middle stage, the last
   * with the head: the one holding the most parameters. */
  int first_dense = l->first_stage_layers - l->first_stage_moe;
  double d_first = first_dense * dense_block + l->first_stage_moe * moe_block + emb;
  double e_first = l->first_stage_moe * experts;
  int mid_dense = l->mid_stage_layers - l->mid_stage_moe;
  double d_mid = mid_dense * dense_block + l->mid_stage_moe * moe_block;
  double e_mid = l->mid_stage_moe * experts;
  l->stage_dense_params = d_last;
  l->stage_expert_params = e_last;
  l->stage_vocab_params = head_w;
  if (d_first + e_first > l->stage_dense_params + l->stage_expert_params) {
    l->stage_dense_params = d_first;
    l->stage_expert_params = e_first;
    l->stage_vocab_params = emb;
  }
  if (d_mid + e_mid > l->stage_dense_params + l->stage_expert_params) {
    l->stage_dense_params = d_mid;
    l->stage_expert_params = e_mid;
    l->stage_vocab_params = 0.0;
  }
}

fth_status fth_layout_split(fth_layout *l, const fth_model_def *m, int first, int last,
                            const char *path, fth_error *err) {
  const int pp = l->pp, n = m->n_layers;
  if (first < 0 || last < 0)
    return fth_fail(err, FTH_EINVAL, path, "expected layer counts >= 0, got first %d, last %d",
                    first, last);
  if ((first > 0 || last > 0) && pp < 2)
    return fth_fail(err, FTH_ETILE, path,
                    "first / last stage layer counts need a pipeline (PP >= 2), got PP = %d", pp);
  int set = (first > 0) + (last > 0), rest = n - first - last, free_stages = pp - set;
  if (first + last > n || (free_stages == 0 && rest != 0) || (free_stages > 0 && rest < free_stages))
    return fth_fail(err, FTH_ETILE, path,
                    "%d layers on the first stage and %d on the last leave %d for the other %d "
                    "stages of PP = %d (each needs at least one; with two stages the counts add up "
                    "to n_layers = %d)",
                    first, last, rest, free_stages, pp, n);
  l->split_first = first;
  l->split_last = last;
  stages(l, m);
  stage_params(l, m);
  return FTH_OK;
}

static const fth_logical_tag kind_tags[FTH_COMM_KIND_COUNT] = {
    FTH_TAG_TP_ATTN, FTH_TAG_TP_MOE, FTH_TAG_EP_SU,  FTH_TAG_CP,
    FTH_TAG_PP,      FTH_TAG_DP_ATTN, FTH_TAG_DP_MOE};

#define TAG_BIT(t) (1u << (t))

/* The tags of each kind's group (EP spans EP_SU x EP_SO, DP the data-parallel-with-CP
 * group). */
static unsigned kind_mask(int k) {
  switch (k) {
  case FTH_COMM_EP: return TAG_BIT(FTH_TAG_EP_SU) | TAG_BIT(FTH_TAG_EP_SO);
  case FTH_COMM_DP: return TAG_BIT(FTH_TAG_DP_ATTN) | TAG_BIT(FTH_TAG_CP);
  default: return TAG_BIT(kind_tags[k]);
  }
}

/* Placed topologies: every kind's and tag's placement, once per layout (O(GPUs) each). */
static void place_all(fth_layout *l, const fth_topology_def *topo) {
  l->placed = 1;
  for (int k = 0; k < FTH_COMM_KIND_COUNT; k++)
    fth_topology_place(topo, kind_mask(k), &l->kind_place[k]);
  for (int t = 0; t < FTH_TAG_COUNT; t++) {
    if (t == FTH_TAG_EP_SU)
      l->tag_place[t] = l->kind_place[FTH_COMM_EP];
    else if (t == FTH_TAG_EP_SO)
      fth_topology_place(topo, 0u, &l->tag_place[t]); /* a group of one: no user */
    else
      fth_topology_place(topo, TAG_BIT(t), &l->tag_place[t]);
  }
}

static void build_placed(fth_layout *l, const fth_topology_def *topo, const double *tag_bytes) {
  for (int k = 0; k < FTH_COMM_KIND_COUNT; k++) {
    fth_group *g = &l->group[k];
    g->n = fth_topology_group_placed(topo, kind_tags[k], &l->kind_place[k], l->tag_place, 1,
                                     tag_bytes, g->lv, &g->dim);
    g->size = l->kind_place[k].size;
  }
  const fth_rank_place *ep = &l->kind_place[FTH_COMM_EP];
  /* The EP group's scale-up part: its worst member's peers in its pod; its scale-out part:
   * the pods the slowest group reaches. */
  l->ep_su = ep->size > 1 ? (int)floor(ep->level[0] + 1e-9) : 1;
  l->ep_so = ep->size > 1 ? ep->blocks : 1;
}

/* Every communication group; tag_bytes (NULL: the even rule) shares the links
 * by traffic (fth_topology_group_by_traffic). */
static void build_groups(fth_layout *l, const fth_topology_def *topo, const double *tag_bytes) {
  if (topo->placed) {
    build_placed(l, topo, tag_bytes);
    return;
  }
  for (int k = 0; k < FTH_COMM_KIND_COUNT; k++)
    if (k != FTH_COMM_EP) group(topo, kind_tags[k], tag_bytes, &l->group[k]);
  ep_group(topo, tag_bytes, l);
  /* The dense gradients are reduced over DP x CP: CP ranks hold the same
   * weights and each computes gradients for its share of the sequence
   * (Megatron-Core's data-parallel-with-CP group, over which its distributed
   * optimizer also shards). Group DP_Attn with CP relabelled as DP_Attn. */
  {
    int has_cp = 0;
    for (int i = 0; i < topo->num_logical; i++)
      has_cp |= topo->logical[i].tag == FTH_TAG_CP && topo->logical[i].size > 1;
    if (has_cp) {
      fth_group *g = &l->group[FTH_COMM_DP];
      g->n = fth_topology_group_with(topo, FTH_TAG_DP_ATTN, FTH_TAG_CP, tag_bytes, g->lv, &g->dim);
      g->size = levels_size(g->lv, g->n);
    }
  }
}

void fth_layout_regroup(fth_layout *l, const fth_topology_def *topo,
                        const double kind_bytes[FTH_COMM_KIND_COUNT]) {
  double tag_bytes[FTH_TAG_COUNT] = {0};
  for (int k = 0; k < FTH_COMM_KIND_COUNT; k++) tag_bytes[kind_tags[k]] = kind_bytes[k];
  tag_bytes[FTH_TAG_EP_SO] = kind_bytes[FTH_COMM_EP];
  build_groups(l, topo, tag_bytes);
}

fth_status fth_layout_make(fth_layout *l, const fth_topology_def *topo, const fth_model_def *m,
                           fth_error *err) {
  memset(l, 0, sizeof *l);
  if (topo->placed) place_all(l, topo);
  build_groups(l, topo, NULL);
  l->tp = l->group[FTH_COMM_TP].size;
  l->tp_moe = l->group[FTH_COMM_TP_MOE].size;
  l->cp = l->group[FTH_COMM_CP].size;
  l->pp = l->group[FTH_COMM_PP].size;
  l->dp = l->group[FTH_COMM_DP].size / l->cp;
  l->dp_moe = l->group[FTH_COMM_DP_MOE].size;
  l->ep = l->group[FTH_COMM_EP].size;
  double num_gpus = fth_topology_num_gpus(topo);

  int moe = m->num_experts > 1;
  double attn_gpus = (double)l->tp * l->cp * l->dp * l->pp;
  if (attn_gpus != num_gpus)
    return fth_fail(err, FTH_ETILE, "topology.logical",
                    "TP_Attn x CP x DP_Attn x PP = %d x %d x %d x %d = %.0f but the physical "
                    "topology has %.0f GPUs (make the logical sizes multiply to the GPU count)",
                    l->tp, l->cp, l->dp, l->pp, attn_gpus, num_gpus);
  if (moe) {
    double moe_gpus = (double)l->tp_moe * l->ep * l->dp_moe * l->pp;
    if (moe_gpus != num_gpus)
      return fth_fail(err, FTH_ETILE, "topology.logical",
                      "TP_MoE x EP x DP_MoE x PP = %d x %d x %d x %d = %.0f but the physical "
                      "topology has %.0f GPUs",
                      l->tp_moe, l->ep, l->dp_moe, l->pp, moe_gpus, num_gpus);
    if (m->num_experts % l->ep != 0)
      return fth_fail(err, FTH_EINVAL, "topology.logical",
                      "EP = %d does not divide num_regular_experts = %d", l->ep, m->num_experts);
    /* ScaleScope's expert_high_bandwidth_group_size_xpus names the EP group
     * that gets scale-up bandwidth: fathom takes that group from EP_SU, so
     * the two must agree. */
    if (topo->expert_hb_group_xpus > 0 && topo->expert_hb_group_xpus != l->ep_su)
      return fth_fail(err, FTH_EINVAL, "topology.expert_high_bandwidth_group_size_xpus",
                      "the EP group with scale-up bandwidth is %d GPUs but the logical "
                      "topology's EP_SU is %d (make EP_SU its size, or drop the key)",
                      topo->expert_hb_group_xpus, l->ep_su);
  } else if (l->ep > 1) {
    return fth_fail(err, FTH_EINVAL, "topology.logical",
                    "EP = %d but the model is dense (num_regular_experts <= 1)", l->ep);
  }
  if (m->num_heads % l->tp != 0)
    return fth_fail(err, FTH_EINVAL, "topology.logical",
                    "TP_Attn = %d does not divide num_heads = %d (pick a divisor of the heads)",
                    l->tp, m->num_heads);
  /* Megatron-Core's MambaMixer splits the Mamba heads and the B/C groups over TP. */
  if (m->hybrid_mamba > 0 && m->mamba_num_groups % l->tp != 0)
    return fth_fail(err, FTH_ETILE, "topology.logical",
                    "TP = %d does not divide mamba_num_groups = %d (pick a divisor of the groups)",
                    l->tp, m->mamba_num_groups);
  if (m->n_layers < l->pp)
    return fth_fail(err, FTH_ETILE, "topology.logical", "PP = %d exceeds n_layers = %d", l->pp,
                    m->n_layers);
  l->num_gpus = num_gpus;
  stages(l, m);
  l->local_experts = moe ? (double)m->num_experts / l->ep : 0.0;
  double sm, sa, sd;
  fth_model_shares(m, &sm, &sa, &sd);
  l->ffn_hidden = fth_model_ffn_hidden(m) * sd; /* a hybrid block's mean MLP width */
  l->expert_ffn = fth_model_expert_ffn_hidden(m) * sd; /* likewise with MoE sub-layers */
  l->dense_shape = fth_model_layer_shape(m, 0);
  l->moe_shape = moe ? fth_model_layer_shape(m, 1) : l->dense_shape;
  l->params = fth_model_params(m);
  stage_params(l, m);
  return FTH_OK;
}

fth_status fth_layout_batch(const fth_layout *l, double global_batch, double micro_batch,
                            double seq_len, double *microbatches, fth_error *err) {
  if (seq_len > 0 && fmod(seq_len, (double)l->cp) != 0)
    return fth_fail(err, FTH_ETILE, "workload.seq_length",
                    "seq_length %.0f is not a multiple of CP = %d", seq_len, l->cp);
  double per_step = micro_batch * l->dp;
  if (fmod(global_batch, per_step) != 0)
    return fth_fail(err, FTH_ETILE, "workload.global_batch_size",
                    "global_batch_size %.0f is not a multiple of micro_batch_size x DP = %.0f x "
                    "%d = %.0f",
                    global_batch, micro_batch, l->dp, per_step);
  *microbatches = global_batch / per_step;
  return FTH_OK;
}

double fth_layout_kv_elems_per_gpu(const fth_layout *l, const fth_model_def *m,
                                   const fth_layer_shape *sh) {
  if (m->kv_lora_rank > 0) return sh->kv_cache_per_token;
  return sh->kv_cache_per_token * fth_max(1.0, sh->kv_heads / l->tp) / sh->kv_heads;
}
