/* fth_search.c: the cross product of a strategy space, placed, checked for
 * tiling, memory first, timed when it fits, best N kept (fth_search.h). */
#include "fth_search.h"

#include "fth_offload.h"

#include <limits.h>
#include <math.h>
#include <string.h>

/* Rank-order placement (fth_search_def.num_xpus below the pods' GPUs). */
static int placed(const fth_search_def *d) {
  return d->num_xpus > 0 && (long long)d->num_xpus != (long long)d->pod_size * d->num_pods;
}

/* The search's physical dimensions: its pods, and the scale-out fabric between them when
 * there is more than one. */
static void physical_dims(const fth_search_def *d, fth_topology_def *t) {
  t->num_phys = d->num_pods > 1 ? 2 : 1;
  t->phys[0].type = d->scale_up_type;
  t->phys[0].size = d->pod_size;
  t->phys[0].link = d->scale_up;
  if (t->num_phys == 2) {
    t->phys[1].type = d->scale_out_type;
    t->phys[1].size = d->num_pods;
    t->phys[1].link = d->scale_out;
  }
}

/* A strategy placed in rank order (Megatron-Core's: TP innermost, then CP, DP; the expert
 * dimensions over the same ranks; PP outermost), for GPU counts that are no whole number of
 * pods: the topology works out which groups straddle a pod. */
static fth_topology_def place_ranks(const fth_search_def *d, int tp, int cp, int pp, int tp_moe,
                                    int ep, int moe) {
  fth_topology_def t = fth_topology_def_default();
  t.placed = 1;
  t.num_xpus = d->num_xpus;
  physical_dims(d, &t);
  int n = 0, per_stage = d->num_xpus / pp;
#define ADD(tag, size) t.logical[n++] = (fth_logical_dim_def){(tag), 0, (size)}
  ADD(FTH_TAG_TP_ATTN, tp);
  if (cp > 1) ADD(FTH_TAG_CP, cp);
  ADD(FTH_TAG_DP_ATTN, per_stage / (tp * cp));
  if (moe) {
    ADD(FTH_TAG_TP_MOE, tp_moe);
    ADD(FTH_TAG_EP_SU, ep);
    ADD(FTH_TAG_DP_MOE, per_stage / (tp_moe * ep));
  }
  if (pp > 1) ADD(FTH_TAG_PP, pp);
#undef ADD
  t.num_logical = n;
  return t;
}

static fth_topology_def place(const fth_search_def *d, int tp, int cp, int pp, int pp_in,
                              int tp_moe, int ep_su, int ep_so, int moe) {
  fth_topology_def t = fth_topology_def_default();
  if (placed(d)) return place_ranks(d, tp, cp, pp, tp_moe, ep_su * ep_so, moe);
  physical_dims(d, &t);
  int n = 0;
  int pp_out = pp / pp_in;
  int dp_in = d->pod_size / (tp * cp * pp_in);
#define ADD(tag, dim, size) t.logical[n++] = (fth_logical_dim_def){(tag), (dim), (size)}
  ADD(FTH_TAG_TP_ATTN, 0, tp);
  if (cp > 1) ADD(FTH_TAG_CP, 0, cp);
  if (pp_in > 1) ADD(FTH_TAG_PP, 0, pp_in);
  ADD(FTH_TAG_DP_ATTN, 0, dp_in);
  if (moe) {
    ADD(FTH_TAG_TP_MOE, 0, tp_moe);
    ADD(FTH_TAG_EP_SU, 0, ep_su);
    ADD(FTH_TAG_DP_MOE, 0, d->pod_size / (pp_in * tp_moe * ep_su));
  }
  if (t.num_phys == 2) {
    if (pp_out > 1) ADD(FTH_TAG_PP, 1, pp_out);
    ADD(FTH_TAG_DP_ATTN, 1, d->num_pods / pp_out);
    if (moe) {
      if (ep_so > 1) ADD(FTH_TAG_EP_SO, 1, ep_so);
      ADD(FTH_TAG_DP_MOE, 1, d->num_pods / (pp_out * ep_so));
    }
  }
#undef ADD
  t.num_logical = n;
  return t;
}

/* Offload placements, in the order ties resolve: none, then one part, two,
 * all three (bit 0 weights, 1 activations, 2 optimizer states). */
static const int offload_order[8] = {0, 1, 2, 4, 3, 5, 6, 7};

static int offload_searched(const fth_search_def *d) {
  int t = d->space.offload_tier;
  return t > FTH_TIER_XPU && t < FTH_TIER_COUNT && d->node.has_tier[t];
}

/* Offloading to a tier no faster than the accelerator's only adds time. */
static int offload_dominated(const fth_search_def *d) {
  int t = d->space.offload_tier;
  return fth_memory_bw_bytes_per_s(&d->node.tier[t]) <=
         fth_memory_bw_bytes_per_s(&d->node.tier[FTH_TIER_XPU]);
}

/* The workload with the parts in `bits` moved to the space's offload tier
 * (when offload is searched; else the workload's own maps). */
static void offload_work(const fth_search_def *d, int bits, fth_train_def *w) {
  if (!offload_searched(d)) return;
  fth_tier t = (fth_tier)d->space.offload_tier;
  fth_offload o = fth_offload_none();
  if (bits & 1) o.weights = t;
  if (bits & 2) o.activations = t;
  if (bits & 4) o.optimizer = t;
  fth_offload_apply(&o, w->footprint_tier, w->traffic_tier);
}

/* Keep `top` sorted best first; insert h if it belongs. */
static void keep(fth_search_hit *top, int cap, int *n, const fth_search_hit *h) {
  if (cap <= 0) return;
  if (*n == cap) {
    const fth_search_hit *w = &top[cap - 1];
    if (h->objective > w->objective || (h->objective == w->objective && h->index > w->index))
      return;
    (*n)--;
  }
  int i = *n;
  while (i > 0 && (top[i - 1].objective > h->objective ||
                   (top[i - 1].objective == h->objective && top[i - 1].index > h->index))) {
    top[i] = top[i - 1];
    i--;
  }
  top[i] = *h;
  (*n)++;
}

static void fill_hit(fth_search_hit *h, const fth_train_plan *p, const fth_train_result *r,
                     const fth_search_def *d) {
  h->offload_weights = p->work.footprint_tier[FTH_MEM_WEIGHTS];
  h->offload_activations = p->work.footprint_tier[FTH_MEM_ACTIVATIONS];
  h->offload_optimizer = p->work.footprint_tier[FTH_MEM_OPTIMIZER];
  h->dp = p->layout.dp;
  h->first_layers = p->layout.first_stage_layers;
  h->last_layers = p->layout.last_stage_layers;
  h->batch = p->work.global_batch;
  h->step_time_s = r->step_time_s;
  h->mfu = r->mfu;
  h->tokens_per_s = r->tokens_per_s;
  h->total_time_s = r->total_time_s;
  h->peak_bytes = r->mem.tier_bytes[FTH_TIER_XPU];
  h->capacity_bytes = r->mem.tier_capacity[FTH_TIER_XPU];
  h->bubble_fraction = r->bubble_fraction;
  for (int k = 0; k < FTH_COMM_KIND_COUNT; k++) h->exposed_s[k] = r->comm[k].exposed_s;
  h->dp_interference_s = r->dp_interference_s;
  h->fits = r->mem.fits;
  h->overflow_tier = r->mem.overflow_tier;
  /* A rounded-down batch runs a shorter step: rank by the time of the requested
   * batch at the strategy's rate (= by tokens/s). Exact batches: the step time. */
  h->objective = d->objective == FTH_OBJ_HEADROOM ? h->peak_bytes - h->capacity_bytes
                 : h->batch == d->work.global_batch
                     ? h->step_time_s
                     : h->step_time_s * (d->work.global_batch / h->batch);
}

/* The offload fields of a strategy that moves the parts in `bits`. */
static void fill_offload(fth_search_hit *h, const fth_search_def *d, int bits) {
  fth_train_def w = d->work;
  offload_work(d, bits, &w);
  h->offload_weights = w.footprint_tier[FTH_MEM_WEIGHTS];
  h->offload_activations = w.footprint_tier[FTH_MEM_ACTIVATIONS];
  h->offload_optimizer = w.footprint_tier[FTH_MEM_OPTIMIZER];
}

static int in(int mask, int bit) {
  return (mask >> bit) & 1;
}

/* Is (vs, schedule, recompute, dp variant, sp) a strategy of the space for this
 * TP and PP? A schedule row that interleaves needs vs > 1, the others vs = 1;
 * without a pipeline only 1F1B (plain forward-backward) is tried. */
static int in_space(const fth_search_space *s, int tp, int pp, int vs, int sc, int rc, int dv,
                    int sp) {
  if (!in(s->recompute_mask, rc) || !in(s->dp_mask, dv) || !in(s->sp_mask, sp)) return 0;
  if (sp && tp == 1) return 0; /* sequence parallelism needs TP */
  /* Without a pipeline the plain schedules are one forward-backward loop: the
   * strategy takes 1F1B when the space has it, else GPIPE, else ZB_H1, so that
   * a pinned schedule (--fix schedule=GPIPE) is the one every hit reports. */
  if (pp == 1) {
    int plain = in(s->schedule_mask, FTH_PP_1F1B)    ? FTH_PP_1F1B
                : in(s->schedule_mask, FTH_PP_GPIPE) ? FTH_PP_GPIPE
                : in(s->schedule_mask, FTH_PP_ZB_H1) ? FTH_PP_ZB_H1
                                                     : -1;
    return sc == plain && vs == 1;
  }
  if (!in(s->schedule_mask, sc)) return 0;
  return fth_schedule_get((fth_pp_schedule)sc)->interleaved ? vs > 1 : vs == 1;
}

#define N_SCHED FTH_PP_COUNT
#define N_RC    FTH_RECOMPUTE_COUNT
#define N_SP    2
#define N_INNER (N_SCHED * N_RC * FTH_DP_COUNT * N_SP)
/* Divisors of an int: at most 1,600 (1,102,701,600 has the most below 2^31). */
#define MAX_DIVISORS 1600

/* What a run derives once from the def: the divisors of the layer count and of
 * the layer count + 2 (the automatic virtual stages are among them, vs_candidates;
 * a v's enumeration position is its position there) and the enumeration positions
 * per placement. */
typedef struct enum_ctx {
  int layer_div[MAX_DIVISORS], n_layer_div;
  int vs_slots, mb_slots, mb_max;
  int n_trim_first, n_trim_last; /* split slots: every (trim_first, trim_last) pair */
  long long slots;  /* per placement and split */
  long long stride; /* per placement: slots x splits */
  /* in_space by [TP > 1][PP > 1][vs > 1] (it reads them only so), and how many DP
   * variants each (schedule, recompute, SP) has there: the same for every placement */
  char ok[2][2][2][N_SCHED][N_RC][FTH_DP_COUNT][N_SP];
  int n_ok[2][2][2][N_SCHED][N_RC][N_SP];
} enum_ctx;

static int trim_first_at(const fth_search_space *s, int i) {
  return s->n_trim_first > 0 ? s->trim_first[i] : 0;
}

static int trim_last_at(const fth_search_space *s, int i) {
  return s->n_trim_last > 0 ? s->trim_last[i] : 0;
}

int fth_search_split(int n_layers, int pp, int trim_first, int trim_last, int *first, int *last) {
  *first = *last = 0;
  if (trim_first == 0 && trim_last == 0) return 1;
  if (pp < 2 || trim_first < 0 || trim_last < 0) return 0;
  /* the even split's ends (fth_layout.c: the last is short first, then the first) */
  int lps = (int)fth_ceil_div((double)n_layers, (double)pp), slack = pp * lps - n_layers;
  int first0 = lps - (slack >= 2 ? 1 : 0), last0 = lps - (slack >= 1 ? 1 : 0);
  if (pp == 2) {
    if (trim_first > 0 && trim_last > 0) return 0; /* the same split as a smaller pair */
    if (trim_first > 0) *first = first0 - trim_first;
    if (trim_last > 0) *last = last0 - trim_last;
    return trim_first > 0 ? *first >= 1 : *last >= 1;
  }
  *first = first0 - trim_first;
  *last = last0 - trim_last;
  return *first >= 1 && *last >= 1;
}

/* Splits of the space that exist for pp stages. */
static int valid_splits(const enum_ctx *c, const fth_search_space *s, int n_layers, int pp) {
  int n = 0, f, l;
  for (int i = 0; i < c->n_trim_first; i++)
    for (int j = 0; j < c->n_trim_last; j++)
      n += fth_search_split(n_layers, pp, trim_first_at(s, i), trim_last_at(s, j), &f, &l);
  return n;
}

static int divisors(int n, int *out, int cap) {
  int k = 0, hi = 0;
  int big[MAX_DIVISORS];
  for (int i = 1; (long long)i * i <= n && k < cap; i++) {
    if (n % i != 0) continue;
    out[k++] = i;
    if (i != n / i && hi < MAX_DIVISORS) big[hi++] = n / i;
  }
  while (hi > 0 && k < cap) out[k++] = big[--hi];
  return k;
}

/* Interleaved chunks the search enumerates: whole, equal layer counts (v > 1 divides
 * n_layers / PP), or Megatron-Core's account_for_embedding/loss_in_pipeline_split, where
 * the embedding and the loss each take a layer's place (v divides (n_layers + 2) / PP: the
 * even split's first and last GPU are one layer short, 126 layers in PP 16 x 8). */
static int vs_splits(int n_layers, int pp, int vs) {
  long long chunks = (long long)pp * vs;
  return vs == 1 || n_layers % chunks == 0 || (pp > 1 && (n_layers + 2LL) % chunks == 0);
}

/* The vs at enumeration position vi for PP, 0 when that position is not a
 * value of the space there (automatic list: vs_splits). */
static int vs_at(const enum_ctx *c, const fth_search_space *s, int n_layers, int pp, int vi) {
  if (s->n_vs > 0) return s->vs[vi];
  int v = c->layer_div[vi];
  return vs_splits(n_layers, pp, v) ? v : 0;
}

/* The automatic virtual-stage candidates: the divisors of n_layers and of n_layers + 2,
 * ascending, each once. */
static int vs_candidates(int n_layers, int *out, int cap) {
  int a[MAX_DIVISORS], b[MAX_DIVISORS];
  int na = divisors(n_layers, a, MAX_DIVISORS);
  int nb = n_layers <= INT_MAX - 2 ? divisors(n_layers + 2, b, MAX_DIVISORS) : 0;
  int i = 0, j = 0, k = 0;
  while ((i < na || j < nb) && k < cap) {
    int x = (j >= nb || (i < na && a[i] <= b[j])) ? a[i] : b[j];
    if (i < na && a[i] == x) i++;
    if (j < nb && b[j] == x) j++;
    out[k++] = x;
  }
  return k;
}

/* The global batch a strategy runs: the request when it tiles (exact), or
 * (down) the largest batch <= the request that does: a multiple of DP x mb x
 * what the schedule needs of the micro-batch count (fth_pp_micro_multiple,
 * the rule fth_train_rework applies). 0 when none: such a strategy is
 * counted as not tiling before any bound or rework. */
static double batch_of(const fth_search_def *d, double unit) {
  double want = d->work.global_batch;
  if (!(unit > 0)) return 0.0;
  double down = floor(want / unit) * unit; /* exact in doubles: sizes stay far below 2^53 */
  return d->batch_rounding == FTH_BATCH_DOWN ? down : down == want ? want : 0.0;
}

static double batch_for(const fth_search_def *d, int dp, int pp, int vs, int mb, int sc) {
  return batch_of(d, (double)dp * mb * fth_pp_micro_multiple((fth_pp_schedule)sc, pp, vs));
}

/* Strategies of the space for one placement when it is refused as a whole:
 * one per (vs, schedule, recompute, DP variant, SP), times the listed
 * micro-batches (an automatic list has no values without a DP: once). */
static long long count_split_variants(const enum_ctx *c, const fth_search_space *s, int n_layers, int tp,
                                int pp) {
  long long n = 0;
  for (int vi = 0; vi < c->vs_slots; vi++) {
    int vs = vs_at(c, s, n_layers, pp, vi);
    if (vs == 0) continue;
    for (int sc = 0; sc < N_SCHED; sc++)
      for (int rc = 0; rc < N_RC; rc++)
        for (int dv = 0; dv < FTH_DP_COUNT; dv++)
          for (int sp = 0; sp < N_SP; sp++) n += in_space(s, tp, pp, vs, sc, rc, dv, sp);
  }
  return n * (s->n_mb > 0 ? s->n_mb : 1);
}

/* ... over every split of the space that exists for PP. */
static long long count_variants(const enum_ctx *c, const fth_search_space *s, int n_layers, int tp,
                                int pp) {
  return count_split_variants(c, s, n_layers, tp, pp) * valid_splits(c, s, n_layers, pp);
}

/* count_variants of the PP at position ci, kept in cache[ci][TP > 1] (-1: not
 * yet counted): in_space reads TP only as 1 or more. */
static long long refused_count(long long cache[][2], const enum_ctx *c, const fth_search_space *s,
                               int n_layers, int tp, int ci) {
  long long *n = &cache[ci][tp > 1];
  if (*n < 0) *n = count_variants(c, s, n_layers, tp, s->pp[ci]);
  return *n;
}

/* Does (tp, cp, pp, pp_in, tp_moe, ep) tile the pods? Products are taken in
 * long long so that huge values cannot overflow. EP takes as much of the pod
 * as divides it (ep_su), the rest across pods (ep_so). */
static int placement_tiles(const fth_search_def *d, int moe, int tp, int cp, int pp, int pp_in,
                           int tp_moe, int ep, int *ep_su, int *ep_so) {
  *ep_su = 1;
  *ep_so = 1;
  long long pod = d->pod_size, pods = d->num_pods;
  if (placed(d)) { /* rank order: the degrees need only tile the job's GPUs */
    long long n = d->num_xpus;
    if (tp <= 0 || cp <= 0 || pp <= 0 || pp_in != 1 || n % pp != 0 || (n / pp) % ((long long)tp * cp))
      return 0;
    if (!moe) return 1;
    if (tp_moe <= 0 || ep <= 0 || (n / pp) % ((long long)tp_moe * ep) != 0) return 0;
    *ep_su = ep;
    return 1;
  }
  if (tp <= 0 || cp <= 0 || pp_in <= 0 || pp % pp_in != 0) return 0;
  long long in_pod = (long long)tp * cp * pp_in;
  if (in_pod > pod || pod % in_pod != 0 || pods % (pp / pp_in) != 0) return 0;
  if (!moe) return 1;
  long long expert_in_pod = (long long)pp_in * tp_moe;
  if (tp_moe <= 0 || ep <= 0 || expert_in_pod > pod || pod % expert_in_pod != 0) return 0;
  long long room = pod / expert_in_pod;
  for (int x = ep; x >= 1; x--) {
    if (ep % x == 0 && room % x == 0) {
      *ep_su = x;
      break;
    }
  }
  *ep_so = ep / *ep_su;
  long long across = (long long)(pp / pp_in) * *ep_so;
  return across <= pods && pods % across == 0;
}

/* Count a whole placement's variants as refused (by the worker that owns the
 * placement, so that sharded runs add up). */
static void refuse_all(fth_search_stats *st, long long variants, int tiling) {
  st->considered += variants;
  if (tiling)
    st->not_tiling += variants;
  else
    st->invalid += variants;
}

/* A strategy that does not fit: keep the one closest to fitting. */
static void note_shortfall(fth_search_stats *st, const fth_memory_footprint *fp,
                           fth_search_hit *h) {
  st->no_fit++;
  st->no_fit_by_tier[fp->overflow_tier]++;
  double over = fp->tier_bytes[fp->overflow_tier] - fp->tier_capacity[fp->overflow_tier];
  if (over < st->shortfall_bytes ||
      (over == st->shortfall_bytes && h->index < st->smallest_shortfall.index)) {
    st->shortfall_bytes = over;
    h->peak_bytes = fp->tier_bytes[FTH_TIER_XPU];
    h->capacity_bytes = fp->tier_capacity[FTH_TIER_XPU];
    h->overflow_tier = fp->overflow_tier;
    st->smallest_shortfall = *h;
  }
}

double fth_search_time_bound(fth_pp_schedule sc, int pp, int vs, double microbatches, double fwd_s,
                             double bwd_s) {
  double busy = microbatches * (fwd_s + bwd_s); /* fth_train_evaluate's busy_s, same operations */
  const fth_schedule *row = fth_schedule_get(sc);
  /* A row whose weight-gradient passes fill the bubble (bubble_w < 0) may
   * leave none: bound it by 0. Otherwise the bubble with t_w = 0 is the
   * least it can be (bubble_w >= 0). */
  if (row == NULL || row->bubble_w < 0) return busy;
  /* Only the sum t_f + t_b is bounded (a reference may pick another stage as
   * the slowest): charge it all at the smaller of the two coefficients. */
  double sum = fwd_s + bwd_s;
  return row->bubble_f <= row->bubble_b ? busy + fth_pp_bubble_s(sc, pp, vs, sum, 0.0, 0.0)
                                        : busy + fth_pp_bubble_s(sc, pp, vs, 0.0, sum, 0.0);
}

double fth_search_memory_bound(const fth_train_plan *plan, const fth_train_def *work) {
  /* Weights, gradients and optimizer states as ZeRO-3 shards them (every
   * other variant shards a subset: fth_zero), one copy, no activations, no
   * transient, no fragmentation: what any variant of this placement keeps on
   * the accelerator at least, plus the runtime context. */
  fth_train_plan p = *plan;
  p.work = *work;
  if (p.work.grad_bytes == 0) p.work.grad_bytes = p.work.master_bytes; /* as fth_train_rework */
  p.work.dp = FTH_DP_ZERO3;
  p.work.pp = FTH_PP_1F1B;
  p.work.recipe = FTH_RECIPE_NONE;
  /* the split `work` asks for (the plan may hold another's) */
  fth_error e;
  if ((p.layout.split_first != work->pp_first_layers ||
       p.layout.split_last != work->pp_last_layers) &&
      fth_layout_split(&p.layout, &p.model, work->pp_first_layers, work->pp_last_layers, "split",
                       &e) != FTH_OK)
    return 0.0; /* no such split: no bound */
  fth_memory_footprint fp;
  fth_train_footprint(&p, &fp);
  const fth_tier *tier = p.work.footprint_tier;
  double b = 0.0;
  const fth_mem_component fixed[3] = {FTH_MEM_WEIGHTS, FTH_MEM_GRADIENTS, FTH_MEM_OPTIMIZER};
  for (int i = 0; i < 3; i++)
    if (tier[fixed[i]] == FTH_TIER_XPU) b += fp.bytes[fixed[i]];
  if (tier[FTH_MEM_RUNTIME_CONTEXT] == FTH_TIER_XPU) b += p.work.reserve.context_bytes;
  return b;
}

/* A lower bound on the per-micro-batch times of a group of variants. Within
 * one placement, micro-batch and SP, the stage passes of every schedule but
 * DualPipe (which pairs stages and hides the layer collectives in its pairs)
 * read neither the schedule, the virtual stages nor the DP variant (fth_train.c:
 * stage_pass) -- an EP overlap made of micro-batch pairs (ep_overlap_pairs)
 * hides EP in a schedule's steady state only, so the reference hides it in every
 * pass, which no schedule's mix is faster than -- except through the links'
 * shares: shared by traffic, a layer collective's share of a link follows the
 * bytes every kind moves a step, which those knobs change. The reference therefore gives every group
 * the whole bandwidth of each link it uses (no collective is slower for more
 * bandwidth, no pass slower for faster collectives) and its t_f, t_b bound
 * the group's; recompute none's bound every mode's (recomputation only adds
 * its re-run to t_b). With a precision recipe only for the same micro-batch
 * count (its weight casts are shared by them). */
typedef struct group_ref {
  int ok;
  double fwd_s, bwd_s, batch;
} group_ref;

/* Every level of every group at its link's whole per-GPU bandwidth (the
 * search's fabric: dimension 0 the pod, 1 across pods; a level is matched by
 * its dimension's size and type, the faster link when both match). */
static void unshared(const fth_search_def *d, fth_layout *l, int no_latency) {
  const double up = fth_link_bw_bytes_per_s(&d->scale_up);
  const double out = fth_link_bw_bytes_per_s(&d->scale_out);
  for (int k = 0; k < FTH_COMM_KIND_COUNT; k++)
    for (int i = 0; i < l->group[k].n; i++) {
      fth_group_level *v = &l->group[k].lv[i];
      int is_up = v->dim_size == d->pod_size && v->type == d->scale_up_type;
      int is_out = d->num_pods > 1 && v->dim_size == d->num_pods && v->type == d->scale_out_type;
      double bw = is_up && is_out ? fth_max(up, out) : is_up ? up : is_out ? out : fth_max(up, out);
      v->bw_bytes_per_s = fth_max(v->bw_bytes_per_s, bw);
      if (no_latency) v->latency_s = 0.0;
    }
}

/* Rework the plan for a reference, every link then unshared (unshared()).
 * The links' shares by traffic are not re-derived: a share is at most the
 * whole link (fth_topology: the traffic share and the spine share are both
 * <= 1) and the levels, their sizes and latencies follow the placement
 * alone, so whatever shares the plan holds, every level ends at its link's
 * whole bandwidth, as after a regroup; the regroup is a third of a rework. */
static fth_status rework_unshared(const fth_search_def *d, fth_train_plan *plan,
                                  const fth_train_def *w, int no_latency, fth_group *saved) {
  const int share = plan->topo.share_by_traffic;
  plan->topo.share_by_traffic = 0;
  fth_error e;
  fth_status st = fth_train_rework(plan, w, &e);
  plan->topo.share_by_traffic = share;
  if (st != FTH_OK) return st;
  memcpy(saved, plan->layout.group, sizeof plan->layout.group);
  unshared(d, &plan->layout, no_latency);
  return FTH_OK;
}

/* Time a reference strategy of the group (schedule `sc`, vs 1, DDP) on the
 * plan, every link unshared; ok = 0 when it does not rework. Does not count
 * as a strategy; leaves the plan's groups as they were. */
static void reference(const fth_search_def *d, fth_train_plan *plan, int pp, int mb, int rc, int sp,
                      int sc, group_ref *g, fth_search_stats *st) {
  g->ok = 0;
  fth_train_def w = d->work;
  offload_work(d, 0, &w); /* offload only slows the passes (offload_dominated) */
  w.global_batch = batch_for(d, plan->layout.dp, pp, 1, mb, sc);
  if (w.global_batch <= 0) return;
  w.pp = (fth_pp_schedule)sc;
  w.virtual_stages = 1;
  w.micro_batch = mb;
  w.recompute = (fth_recompute)rc;
  w.dp = FTH_DP_DDP;
  w.sequence_parallel = sp;
  if (sc != FTH_PP_DUALPIPE) w.ep_overlap_pairs = 0; /* EP hidden in every pass: a bound */
  fth_group saved[FTH_COMM_KIND_COUNT];
  if (rework_unshared(d, plan, &w, 0, saved) != FTH_OK) return;
  fth_train_result r;
  fth_train_passes(plan, &r); /* the bounds read the passes only */
  memcpy(plan->layout.group, saved, sizeof saved);
  st->bound_evals++;
  g->ok = 1;
  g->fwd_s = r.fwd_s;
  g->bwd_s = r.bwd_s;
  g->batch = w.global_batch;
}

/* What one sequence of a micro-batch costs the slowest stage's passes at
 * least, whatever the micro-batch (any placement's group of one SP setting
 * and schedule class): its FLOPs and the bandwidth part of its layer
 * collectives (TP, EP, CP). Both are linear in the micro-batch: every kernel's
 * m, or its batch, is tokens, and every layer collective moves bytes in
 * proportion to them, at a time linear in the bytes once latencies and
 * per-call overheads are 0 (each algorithm's bandwidth term; the cheapest of
 * them is linear too). A pass is no faster than its kernels at the node's
 * fastest rate nor than its collectives (overlap(k, c, e) >= max(k, c)). Not
 * under a recipe (its weight casts are shared by the micro-batches) nor for
 * EP with a simulated all-to-all time (fixed per call). */
typedef struct seq_ref {
  int ok;
  double flops, comm_s; /* per sequence */
} seq_ref;

double fth_search_rate_bound(const fth_node_def *node, fth_precision prec) {
  /* as fth_train's block_env without a recipe: every kernel at `prec` */
  fth_kernel_env e = fth_kernel_env_make(node, prec, FTH_TIER_XPU);
  return fth_max(fth_max(e.matrix_flops_per_s, e.attention_flops_per_s), e.vector_flops_per_s);
}

static void reference_per_seq(const fth_search_def *d, fth_train_plan *plan, int pp, int sp, int sc,
                              seq_ref *f, fth_search_stats *st) {
  f->ok = 0;
  if (d->work.recipe != FTH_RECIPE_NONE) return;
  fth_train_def w = d->work;
  offload_work(d, 0, &w);
  w.global_batch = (double)plan->layout.dp * 2.0 * pp; /* tiles every schedule at mb 1 */
  w.pp = (fth_pp_schedule)sc;
  w.virtual_stages = 1;
  w.micro_batch = 1;
  w.recompute = FTH_RECOMPUTE_NONE;
  w.dp = FTH_DP_DDP;
  w.sequence_parallel = sp;
  w.coll.per_peer_overhead_s = 0.0;
  w.coll.launch_s = 0.0;
  fth_group saved[FTH_COMM_KIND_COUNT];
  if (rework_unshared(d, plan, &w, 1, saved) != FTH_OK) return;
  fth_train_result r;
  fth_train_passes(plan, &r); /* the bounds read the passes only */
  memcpy(plan->layout.group, saved, sizeof saved);
  st->bound_evals++;
  f->ok = r.microbatches > 0;
  f->flops = f->comm_s = 0.0;
  for (int i = 0; i < FTH_FLOP_PART_COUNT; i++) f->flops += r.fwd_flops[i] + r.bwd_flops[i];
  for (int k = 0; k <= FTH_COMM_CP; k++)
    if (!(k == FTH_COMM_EP && d->work.ep_dispatch_override_s > 0))
      f->comm_s += r.comm[k].raw_s / r.microbatches;
}

/* A variant's least objective (schedule sc, vs, its batch), ranked as the
 * search ranks it: the step-time bound of a group's passes, scaled to the
 * requested batch when rounded down; 0 when the reference is missing. */
static double ranked(const fth_search_def *d, int dp, int pp, int vs, int mb, int sc, double batch,
                     double fwd_s, double bwd_s) {
  double lb =
      fth_search_time_bound((fth_pp_schedule)sc, pp, vs, batch / ((double)dp * mb), fwd_s, bwd_s);
  return batch != d->work.global_batch ? lb * (d->work.global_batch / batch) : lb;
}

/* The per-sequence bound: a pass of mb sequences takes at least mb times its
 * FLOPs at the node's fastest rate (k) overlapped with its collectives'
 * bandwidth time (c) as well as any pass overlaps them, k + c - e min(k, c) with
 * e = max(comp_comm_efficiency, the schedule row's comm_hidden): a pass that runs
 * alone or in a pair (fth_train_work_pass_s) hides no more (summing a pass's
 * phases first and counting blocking collectives as overlapped only lowers it:
 * the rule is monotone and homogeneous). */
static double seq_bound(const fth_search_def *d, const seq_ref *f, double rate, int dp, int pp,
                        int vs, int mb, int sc, double batch) {
  if (!f->ok || !(rate > 0)) return 0.0;
  double e = fth_max(d->work.comp_comm_eff, fth_schedule_get((fth_pp_schedule)sc)->comm_hidden);
  double per_seq = fth_overlap(f->flops / rate, f->comm_s, e);
  return ranked(d, dp, pp, vs, mb, sc, batch, mb * per_seq, 0.0);
}

/* The reference bound of a group (per-micro-batch times of its passes). */
static double time_bound(const fth_search_def *d, const group_ref *g, int dp, int pp, int vs,
                         int mb, int sc, double batch) {
  if (!g->ok || (d->work.recipe != FTH_RECIPE_NONE && batch != g->batch)) return 0.0;
  return ranked(d, dp, pp, vs, mb, sc, batch, g->fwd_s, g->bwd_s);
}

/* A bound proves a variant cannot enter the best N: strictly worse than the
 * N-th kept, with a margin so that rounding never prunes. */
static int beyond(double lb, double worst) {
  return lb * (1.0 - 1e-9) > worst;
}

/* The bounds' references of one split, kept while the placement's other
 * splits run (the first SPLIT_CACHE splits, micro-batch positions below
 * MB_CACHE). A split whose slowest-stage candidates hold at least the blocks
 * of an earlier split's, kind by kind (the last stage and the heaviest middle
 * one; under DualPipe the first too), runs passes no shorter: a pass sums
 * its blocks' phases, the head's the same, and a phase's time grows with its
 * parts (overlap(k, c, e) grows in k and c), so t_f + t_b of the reference
 * without recomputation (which would add the other stage's re-run), and the
 * per-sequence FLOPs and collective time, bound the later split's as they
 * bound the earlier's. Such a bound costs nothing: the later split takes its
 * own references only where the earlier ones do not decide. The sum t_f +
 * t_b alone is carried over (charged at the bubble's smaller coefficient). */
#define LB_CACHE    64
#define SPLIT_CACHE 4
#define MB_CACHE    64
typedef struct split_refs {
  int first[2], mid[2], last[2]; /* dense, MoE blocks */
  seq_ref fl[N_SP][2];
  group_ref base[MB_CACHE][N_SP][2];
} split_refs;

/* Does split `b` hold at least split `a`'s blocks where the passes read them
 * (dual: DualPipe, which pairs the first stage with the last)? */
static int holds_more(const split_refs *a, const split_refs *b, int dual) {
  for (int k = 0; k < 2; k++)
    if (b->mid[k] < a->mid[k] || b->last[k] < a->last[k] || (dual && b->first[k] < a->first[k]))
      return 0;
  return 1;
}

/* Every (vs, mb, schedule, recompute, DP variant, SP) of one placement whose
 * slot this worker owns: reworked on the compiled layout, memory first,
 * timed when it fits. `proto` carries the placement's fields; `slot` is the
 * placement's first enumeration position (positions: vs, mb, then the inner
 * product, so that indices do not depend on DP). Enumerated micro-batch, SP,
 * recompute first so that a group's reference times bound its other variants
 * (pruning: fth_search.h); the order does not change the result, which is
 * ranked by (objective, position). */
static void run_variants(const fth_search_def *d, const enum_ctx *c, fth_train_plan *plan,
                         const fth_search_hit *proto, long long slot, split_refs *refs, int n_prev,
                         fth_search_hit *top, int top_cap, int *n_top, fth_search_stats *st) {
  const fth_search_space *s = &d->space;
  const int n_layers = d->model.n_layers, tp = proto->tp, pp = proto->pp;
  const int dp = plan->layout.dp;
  const int down = d->batch_rounding == FTH_BATCH_DOWN;
  const int searched = offload_searched(d);
  /* time bounds taken without offload hold where offloading cannot speed the
   * passes up (a tier no faster than the accelerator's) */
  const int dominated = !searched || offload_dominated(d);
  const int prune = d->prune == FTH_PRUNE_ON && d->objective == FTH_OBJ_STEP_TIME && dominated;
  const int audit = d->prune == FTH_PRUNE_AUDIT;
  const int n_off = searched ? 8 : 1;
  const int uneven = d->work.pp_first_layers > 0 || d->work.pp_last_layers > 0;
  const int share = plan->topo.share_by_traffic;
  const double above = d->prune_above > 0 ? d->prune_above : HUGE_VAL;
  /* The automatic micro-batches: divisors of the local batch (exact), every
   * size up to it (down: each strategy rounds its own batch); none when the
   * request is smaller than DP or (exact) not a multiple of it. */
  double local = d->work.global_batch / dp;
  int mb_hi = 0;
  if (s->n_mb == 0) {
    if (down || local == floor(local)) mb_hi = (int)fmin(floor(local), (double)c->mb_max);
    if (mb_hi == 0) {
      /* counted as one refused strategy per (vs, schedule, recompute, DP variant, SP) */
      long long n = count_split_variants(c, s, n_layers, tp, pp);
      st->considered += n;
      st->not_tiling += n;
      return;
    }
  }
  /* Memory: what every variant of the placement keeps at least. */
  int mem_out = 0;
  if (d->prune != FTH_PRUNE_OFF && plan->node.has_tier[FTH_TIER_XPU]) {
    double cap = fth_memory_capacity_bytes(&plan->node.tier[FTH_TIER_XPU]);
    fth_train_def most = d->work;
    offload_work(d, 7, &most); /* what the most offloaded placement keeps */
    mem_out = fth_search_memory_bound(plan, &most) > cap;
  }
  /* in_space for this TP and PP, by vs > 1 (enum_ctx) */
  const char(*ok)[N_SCHED][N_RC][FTH_DP_COUNT][N_SP] = c->ok[tp > 1][pp > 1];
  const int(*n_ok)[N_SCHED][N_RC][N_SP] = c->n_ok[tp > 1][pp > 1];
  /* The bounds that do not read the recompute mode (earlier splits', the
   * per-sequence one, the group reference without recomputation), as taken
   * for the first mode of a (micro-batch, SP, vs, schedule), kept for the
   * others (first LB_CACHE vs positions): the threshold only falls, so a value
   * that stopped early (already beyond it) stays beyond, and one that did not
   * holds every such bound. Stamped per (micro-batch, SP): nothing to reset. */
  double lb_keep[LB_CACHE][N_SCHED];
  int lb_stamp[LB_CACHE][N_SCHED];
  memset(lb_stamp, 0, sizeof lb_stamp);
  int stamp = 0;
  /* fth_pp_micro_multiple per (vs > 1, schedule): it reads vs only as 1 or more */
  double micro_mult[2][N_SCHED];
  for (int v = 0; v < 2; v++)
    for (int sc = 0; sc < N_SCHED; sc++)
      micro_mult[v][sc] = fth_pp_micro_multiple((fth_pp_schedule)sc, pp, v + 1);
  fth_train_result r;
  seq_ref fl[N_SP][2];
  memset(fl, 0, sizeof fl);
  int fl_tried[N_SP][2] = {{0, 0}, {0, 0}};
  /* this split's cache (none past SPLIT_CACHE) and the earlier splits it holds more than */
  split_refs *cur = n_prev < SPLIT_CACHE ? &refs[n_prev] : NULL;
  int below[2][SPLIT_CACHE], n_below[2] = {0, 0};
  for (int dual = 0; dual < 2; dual++)
    for (int i = 0; cur && i < n_prev; i++)
      if (holds_more(&refs[i], cur, dual)) below[dual][n_below[dual]++] = i;
  const double rate =
      fth_search_rate_bound(&plan->node, fth_precision_from_bytes(d->work.act_bytes));
  const int n_mi = s->n_mb > 0 ? s->n_mb : mb_hi;
  /* each virtual-stage position's vs (0: not one for this PP) and whether to try it: of its
   * own the search enumerates whole, equal chunks on the even split; a pinned vs (--fix vs=,
   * estimate's --vs) is tried whatever it cuts, and fth_train_rework judges the chunks (a
   * GPU's layers in unequal chunks, one left to the embedding or the loss at either end) */
  int vs_of[MAX_DIVISORS];
  char splits_of[MAX_DIVISORS];
  for (int vi = 0; vi < c->vs_slots; vi++) {
    const int v = vs_of[vi] = vs_at(c, s, n_layers, pp, vi);
    const int whole = v != 0 && vs_splits(n_layers, pp, v) && !(uneven && v > 1);
    splits_of[vi] = (char)(v != 0 && (whole || s->n_vs > 0));
  }
  for (int mi = 0; mi < n_mi; mi++) {
    const int mb = s->n_mb > 0 ? s->mb[mi] : mi + 1;
    /* (local is a whole number here: an exact batch with no whole local batch has no list) */
    if (s->n_mb == 0 && !down && (long long)local % mb != 0) continue;
    /* the batch each (vs > 1, schedule) runs at this micro-batch (batch_for) */
    double gb_of[2][N_SCHED];
    for (int v = 0; v < 2; v++)
      for (int sc = 0; sc < N_SCHED; sc++) gb_of[v][sc] = batch_of(d, (double)dp * mb * micro_mult[v][sc]);
    if (cur && mi < MB_CACHE) memset(cur->base[mi], 0, sizeof cur->base[mi]);
    for (int sp = 0; sp < N_SP; sp++) {
      stamp++;
      /* [0] every schedule but DualPipe, [1] DualPipe; base: recompute none,
       * whose passes bound every mode's (recomputation only adds its re-run) */
      group_ref base[2] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
      for (int rc = 0; rc < N_RC; rc++) {
        group_ref g[2] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
        for (int vi = 0; vi < c->vs_slots; vi++) {
          const int vs = vs_of[vi];
          if (vs == 0) continue;
          const int splits = splits_of[vi];
          const long long my0 = slot + ((long long)vi * c->mb_slots + mi) * N_INNER;
          for (int sc = 0; sc < N_SCHED; sc++) {
            /* the DP variants of (vs, sc, rc, sp) in the space: one batch, one bound */
            const int n_dv = n_ok[vs > 1][sc][rc][sp];
            if (n_dv == 0) continue;
            st->considered += n_dv;
            const double gb = splits ? gb_of[vs > 1][sc] : 0.0;
            if (gb <= 0) {
              st->not_tiling += n_dv;
              continue;
            }
            if (mem_out && !audit) {
              st->pruned += n_dv;
              continue;
            }
            const int dual = sc == FTH_PP_DUALPIPE;
            const int full = *n_top == top_cap && top_cap > 0;
            const double worst = fth_min(full ? top[top_cap - 1].objective : HUGE_VAL, above);
            double lb = 0.0;
            if ((prune && worst < HUGE_VAL) || audit) {
              /* cheapest first, each only when the previous did not decide:
               * earlier splits' references (free), then this split's own */
              const int cached = mi < MB_CACHE;
              const int kept = vi < LB_CACHE && lb_stamp[vi][sc] == stamp;
              if (kept) lb = lb_keep[vi][sc];
              /* (audit: every bound taken, none prunes) */
              for (int i = 0; !kept && i < n_below[dual] && (audit || !beyond(lb, worst)); i++) {
                const split_refs *o = &refs[below[dual][i]];
                lb = fth_max(lb, seq_bound(d, &o->fl[sp][dual], rate, dp, pp, vs, mb, sc, gb));
                const group_ref *b = &o->base[mi][sp][dual];
                if (cached && b->ok && !(d->work.recipe != FTH_RECIPE_NONE && gb != b->batch))
                  lb = fth_max(lb, ranked(d, dp, pp, vs, mb, sc, gb, b->fwd_s + b->bwd_s, 0.0));
              }
              if (!kept && (audit || !beyond(lb, worst))) {
                if (!fl_tried[sp][dual]) {
                  reference_per_seq(d, plan, pp, sp, sc, &fl[sp][dual], st);
                  fl_tried[sp][dual] = 1;
                  if (cur) cur->fl[sp][dual] = fl[sp][dual];
                }
                lb = fth_max(lb, seq_bound(d, &fl[sp][dual], rate, dp, pp, vs, mb, sc, gb));
                if (!beyond(lb, worst) || audit) {
                  if (!base[dual].ok) {
                    reference(d, plan, pp, mb, FTH_RECOMPUTE_NONE, sp, sc, &base[dual], st);
                    if (cur && cached) cur->base[mi][sp][dual] = base[dual];
                  }
                  lb = fth_max(lb, time_bound(d, &base[dual], dp, pp, vs, mb, sc, gb));
                }
              }
              if (!kept && vi < LB_CACHE) {
                lb_keep[vi][sc] = lb;
                lb_stamp[vi][sc] = stamp;
              }
              if (!audit && beyond(lb, worst)) {
                st->pruned += n_dv;
                continue;
              }
              if ((!beyond(lb, worst) || audit) && rc != FTH_RECOMPUTE_NONE) {
                if (!g[dual].ok) reference(d, plan, pp, mb, rc, sp, sc, &g[dual], st);
                lb = fth_max(lb, time_bound(d, &g[dual], dp, pp, vs, mb, sc, gb));
              }
              if (!audit && beyond(lb, worst)) {
                st->pruned += n_dv;
                continue;
              }
            }
            /* their enumeration positions */
            long long mine[FTH_DP_COUNT];
            for (int dv = 0; dv < FTH_DP_COUNT; dv++)
              mine[dv] = ok[vs > 1][sc][rc][dv][sp]
                             ? my0 + (((long long)sc * N_RC + rc) * FTH_DP_COUNT + dv) * N_SP + sp
                             : -1;
            fth_train_def w = d->work;
            w.global_batch = gb;
            w.pp = (fth_pp_schedule)sc;
            w.virtual_stages = vs;
            w.micro_batch = mb;
            w.recompute = (fth_recompute)rc;
            w.sequence_parallel = sp;
            for (int dv = 0; dv < FTH_DP_COUNT; dv++) {
              if (mine[dv] < 0) continue;
              w.dp = (fth_dp_variant)dv;
              fth_search_hit h = *proto;
              h.dp = dp;
              h.batch = w.global_batch;
              h.vs = vs;
              h.mb = mb;
              h.schedule = sc;
              h.recompute = rc;
              h.dp_variant = dv;
              h.sp = sp;
              h.index = mine[dv];
              h.overflow_tier = FTH_TIER_COUNT;
              /* Offload: the fastest of the minimal placements of the parts that
               * fit (fth_search.h). Memory before time: the footprint costs a
               * fraction of an evaluation. */
              fth_search_hit best = h;
              int found = 0, refused = 0, fit_bits = 0, closest = -1;
              double over_min = HUGE_VAL;
              fth_memory_footprint fp, fp_closest;
              for (int oi = 0; oi < n_off && !refused; oi++) {
                const int bits = offload_order[oi];
                int covered = 0; /* a fitting placement moves a subset of these */
                for (int j = 0; j < 8; j++) covered |= ((fit_bits >> j) & 1) && (bits & j) == j;
                if (covered) continue;
                fth_train_def wo = w;
                offload_work(d, bits, &wo);
                /* memory first: the links' shares by traffic (a third of a
                 * rework) only for what fits and is timed (fth_train_regroup) */
                fth_error e3;
                plan->topo.share_by_traffic = 0;
                fth_status rs = fth_train_rework(plan, &wo, &e3);
                plan->topo.share_by_traffic = share;
                if (rs != FTH_OK) {
                  /* refused for its shape, whatever the offload */
                  if (rs == FTH_ETILE)
                    st->not_tiling++;
                  else
                    st->invalid++;
                  refused = 1;
                  break;
                }
                fth_train_footprint(plan, &fp);
                if (!fp.fits) {
                  double over =
                      fp.tier_bytes[fp.overflow_tier] - fp.tier_capacity[fp.overflow_tier];
                  if (over < over_min) {
                    over_min = over;
                    fp_closest = fp;
                    closest = bits;
                  }
                  continue;
                }
                fth_train_regroup(plan);
                fth_train_evaluate(plan, &r);
                fth_search_hit cand = h;
                fill_hit(&cand, plan, &r, d);
                if (!found || cand.objective < best.objective) best = cand;
                found = 1;
                fit_bits |= 1 << bits;
              }
              if (refused) continue;
              if (!found) {
                if (closest >= 0) {
                  fill_offload(&h, d, closest);
                  note_shortfall(st, &fp_closest, &h);
                }
                continue;
              }
              st->evaluated++;
              /* audit: a bound above what it bounds would have pruned wrongly */
              if (audit && (mem_out || (d->objective == FTH_OBJ_STEP_TIME &&
                                        lb > best.objective * (1.0 + 1e-9))))
                st->bound_violations++;
              keep(top, top_cap, n_top, &best);
            }
          }
        }
      }
    }
  }
}

static fth_status context(const fth_search_def *d, enum_ctx *c, fth_error *err) {
  const fth_search_space *s = &d->space;
  if (d->model.n_layers < 1)
    return fth_fail(err, FTH_EINVAL, "model.n_layers", "expected >= 1, got %d", d->model.n_layers);
  if (s->mb_max > FTH_SEARCH_MB_LIMIT)
    return fth_fail(err, FTH_EINVAL, "space.mb_max", "expected at most %d, got %d",
                    FTH_SEARCH_MB_LIMIT, s->mb_max);
  if (s->n_vs < 0 || s->n_vs > FTH_SEARCH_MAX_VALUES || s->n_mb < 0 ||
      s->n_mb > FTH_SEARCH_MAX_VALUES)
    return fth_fail(err, FTH_EINVAL, "space", "vs and mb take 0 (automatic) to %d values",
                    FTH_SEARCH_MAX_VALUES);
  if (s->n_trim_first < 0 || s->n_trim_first > FTH_SEARCH_MAX_VALUES || s->n_trim_last < 0 ||
      s->n_trim_last > FTH_SEARCH_MAX_VALUES)
    return fth_fail(err, FTH_EINVAL, "space", "trims take 0 ({0}) to %d values",
                    FTH_SEARCH_MAX_VALUES);
  for (int i = 0; i < s->n_trim_first + s->n_trim_last; i++) {
    int v = i < s->n_trim_first ? s->trim_first[i] : s->trim_last[i - s->n_trim_first];
    if (v < 0 || v > FTH_SEARCH_TRIM_MAX)
      return fth_fail(err, FTH_EINVAL, i < s->n_trim_first ? "space.trim_first" : "space.trim_last",
                      "expected layers in [0, %d], got %d", FTH_SEARCH_TRIM_MAX, v);
  }
  c->n_trim_first = s->n_trim_first > 0 ? s->n_trim_first : 1;
  c->n_trim_last = s->n_trim_last > 0 ? s->n_trim_last : 1;
  c->n_layer_div = vs_candidates(d->model.n_layers, c->layer_div, MAX_DIVISORS);
  c->mb_max = s->mb_max > 0 ? s->mb_max : FTH_SEARCH_MB_MAX;
  c->vs_slots = s->n_vs > 0 ? s->n_vs : c->n_layer_div;
  c->mb_slots = s->n_mb > 0 ? s->n_mb : c->mb_max;
  c->slots = (long long)c->vs_slots * c->mb_slots * N_INNER;
  c->stride = c->slots * c->n_trim_first * c->n_trim_last;
  for (int t = 0; t < 2; t++)
    for (int p = 0; p < 2; p++)
      for (int v = 0; v < 2; v++)
        for (int sc = 0; sc < N_SCHED; sc++)
          for (int rc = 0; rc < N_RC; rc++)
            for (int sp = 0; sp < N_SP; sp++) {
              c->n_ok[t][p][v][sc][rc][sp] = 0;
              for (int dv = 0; dv < FTH_DP_COUNT; dv++) {
                int in_s = in_space(s, t + 1, p + 1, v + 1, sc, rc, dv, sp);
                c->ok[t][p][v][sc][rc][dv][sp] = (char)in_s;
                c->n_ok[t][p][v][sc][rc][sp] += in_s;
              }
            }
  return FTH_OK;
}

fth_status fth_search_run(const fth_search_def *d, fth_search_hit *top, int top_cap, int *n_top,
                          fth_search_stats *st, fth_error *err) {
  fth_error_clear(err);
  memset(st, 0, sizeof *st);
  st->shortfall_bytes = HUGE_VAL;
  *n_top = 0;
  const fth_search_space *s = &d->space;
  const fth_model_def *m = &d->model;
  int moe = m->num_experts > 1;
  int workers = d->workers > 0 ? d->workers : 1;
  if (d->pod_size < 1 || d->num_pods < 1)
    return fth_fail(err, FTH_EINVAL, "system", "pod size and pod count must be >= 1");
  if (d->worker < 0 || d->worker >= workers)
    return fth_fail(err, FTH_EINVAL, "worker", "worker %d of %d", d->worker, workers);
  enum_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  if (context(d, &ctx, err) != FTH_OK) return err->status;
  int n_tpm = moe ? s->n_tp_moe : 1, n_ep = moe ? s->n_ep : 1;
  const double placements = (double)s->n_tp * s->n_cp * s->n_pp * s->n_pp_in * n_tpm * n_ep;
  if (placements * (double)ctx.stride >= (double)FTH_SEARCH_MAX_SLOTS)
    return fth_fail(err, FTH_EINVAL, "space",
                    "%.3g enumeration positions: at most 2^40 (fix some dimensions)",
                    placements * (double)ctx.stride);
  long long index = 0;
  /* count_variants per (PP position, TP > 1): in_space reads TP only as 1 or more */
  long long refused_n[FTH_SEARCH_MAX_VALUES][2];
  for (int i = 0; i < FTH_SEARCH_MAX_VALUES; i++) refused_n[i][0] = refused_n[i][1] = -1;
  fth_train_plan plan;
  split_refs refs[SPLIT_CACHE];
  /* the def with each split's workload (a copy: the caller's stays as given) */
  fth_search_def split_copy = *d;
  fth_search_def *split_def = &split_copy;
  for (int a = 0; a < s->n_tp; a++)
    for (int b = 0; b < s->n_cp; b++)
      for (int c = 0; c < s->n_pp; c++)
        for (int e = 0; e < s->n_pp_in; e++)
          for (int f = 0; f < n_tpm; f++)
            for (int g = 0; g < n_ep; g++, index += ctx.stride) {
              /* Workers split by placement: its variants share one compiled plan
               * and the bounds' reference evaluations. */
              if ((index / ctx.stride) % workers != d->worker) continue;
              fth_search_hit proto;
              memset(&proto, 0, sizeof proto);
              proto.tp = s->tp[a];
              proto.cp = s->cp[b];
              proto.pp = s->pp[c];
              proto.pp_in = s->pp_in[e];
              proto.tp_moe = moe ? s->tp_moe[f] : 1;
              proto.ep = moe ? s->ep[g] : 1;
              int ep_so;
              if (!placement_tiles(d, moe, proto.tp, proto.cp, proto.pp, proto.pp_in, proto.tp_moe,
                                   proto.ep, &proto.ep_su, &ep_so)) {
                refuse_all(st, refused_count(refused_n, &ctx, s, m->n_layers, proto.tp, c), 1);
                continue;
              }
              fth_topology_def t = place(d, proto.tp, proto.cp, proto.pp, proto.pp_in, proto.tp_moe,
                                         proto.ep_su, ep_so, moe);
              fth_train_def w = d->work;
              w.pp = FTH_PP_1F1B;
              w.virtual_stages = 1;
              w.micro_batch = 1;
              w.pp_first_layers = w.pp_last_layers = 0; /* each split sets its own */
              fth_error e2;
              memset(&plan, 0, sizeof plan);
              /* A refusal of the workload alone (batch divisibility at micro-batch 1)
               * leaves a usable layout: each variant is reworked and judged. */
              if (fth_train_compile(&plan, &d->node, &t, m, &w, &e2) != FTH_OK &&
                  plan.layout.num_gpus == 0) {
                refuse_all(st, refused_count(refused_n, &ctx, s, m->n_layers, proto.tp, c),
                           e2.status == FTH_ETILE);
                continue;
              }
              /* Every split of the space: its own workload, so that the bounds'
               * reference evaluations are of that split (exact per split), and
               * the earlier splits' where they bound it (split_refs). */
              int n_prev = 0;
              for (int i = 0; i < ctx.n_trim_first; i++)
                for (int j = 0; j < ctx.n_trim_last; j++) {
                  int first, last;
                  proto.trim_first = trim_first_at(s, i);
                  proto.trim_last = trim_last_at(s, j);
                  if (!fth_search_split(m->n_layers, proto.pp, proto.trim_first, proto.trim_last,
                                        &first, &last))
                    continue; /* not a strategy: counted nowhere */
                  split_def->work.pp_first_layers = first;
                  split_def->work.pp_last_layers = last;
                  /* the split's blocks where the passes read them (as the rework
                   * would split the layout) */
                  int at = SPLIT_CACHE;
                  fth_error e3;
                  if (n_prev < SPLIT_CACHE &&
                      fth_layout_split(&plan.layout, m, first, last, "split", &e3) == FTH_OK) {
                    at = n_prev++;
                    split_refs *sr = &refs[at];
                    /* (its base rows are cleared as run_variants reaches them: every
                     * split of a placement visits the same micro-batches) */
                    memset(sr->fl, 0, sizeof sr->fl);
                    fth_block_stage_blocks(&plan.layout, sr->mid, sr->last);
                    sr->first[0] = plan.layout.first_stage_layers - plan.layout.first_stage_moe;
                    sr->first[1] = plan.layout.first_stage_moe;
                  }
                  run_variants(split_def, &ctx, &plan, &proto,
                               index + ((long long)i * ctx.n_trim_last + j) * ctx.slots, refs, at,
                               top, top_cap, n_top, st);
                }
            }
  /* Only the memory bound prunes while fewer than N are kept: when nothing
   * fits, run again without it, for the counts and the closest to fitting
   * (not when an earlier part of the search holds N: its time bounds may
   * have skipped all that fits here). */
  if (*n_top == 0 && st->pruned > 0 && d->prune == FTH_PRUNE_ON && !(d->prune_above > 0)) {
    fth_search_def ex = *d;
    ex.prune = FTH_PRUNE_OFF;
    return fth_search_run(&ex, top, top_cap, n_top, st, err);
  }
  return FTH_OK;
}

fth_status fth_search_eval_one(const fth_search_def *d, const fth_search_hit *s,
                               fth_search_hit *out, fth_train_result *result, fth_error *err) {
  int moe = d->model.num_experts > 1;
  int ep_su, ep_so;
  if (!placement_tiles(d, moe, s->tp, s->cp, s->pp, s->pp_in, s->tp_moe, s->ep, &ep_su, &ep_so) ||
      (moe && s->ep_su != ep_su))
    return fth_fail(err, FTH_ETILE, "strategy",
                    "TP %d, CP %d, PP %d (%d in the pod), TP_MoE %d, EP %d (%d in the pod) do not "
                    "tile %d pods of %d GPUs",
                    s->tp, s->cp, s->pp, s->pp_in, s->tp_moe, s->ep, s->ep_su, d->num_pods,
                    d->pod_size);
  /* (virtual stages the enumeration leaves out, chunks that do not divide the layers,
   * are the core's to judge: fth_train_rework) */
  int first, last;
  if (!fth_search_split(d->model.n_layers, s->pp, s->trim_first, s->trim_last, &first, &last))
    return fth_fail(err, FTH_ETILE, "strategy.trim",
                    "trimming %d layers off the first stage and %d off the last does not split %d "
                    "layers over PP = %d (a stage left empty, both ends of two stages, or no pipeline)",
                    s->trim_first, s->trim_last, d->model.n_layers, s->pp);
  fth_topology_def t = place(d, s->tp, s->cp, s->pp, s->pp_in, s->tp_moe, ep_su, ep_so, moe);
  fth_train_def w = d->work;
  w.pp_first_layers = first;
  w.pp_last_layers = last;
  w.pp = (fth_pp_schedule)s->schedule;
  w.virtual_stages = s->vs;
  w.micro_batch = s->mb;
  w.recompute = (fth_recompute)s->recompute;
  w.dp = (fth_dp_variant)s->dp_variant;
  w.sequence_parallel = s->sp;
  if (offload_searched(d)) {
    fth_offload o = {(fth_tier)s->offload_weights, (fth_tier)s->offload_activations,
                     (fth_tier)s->offload_optimizer};
    const int parts[3] = {o.weights, o.activations, o.optimizer};
    for (int i = 0; i < 3; i++)
      if (parts[i] != FTH_TIER_XPU && parts[i] != d->space.offload_tier)
        return fth_fail(
            err, FTH_EINVAL, "strategy.offload", "offload to %s: the search offloads to %s only",
            fth_tier_name((fth_tier)parts[i]), fth_tier_name((fth_tier)d->space.offload_tier));
    fth_offload_apply(&o, w.footprint_tier, w.traffic_tier);
  }
  fth_train_plan plan;
  fth_status st = fth_train_compile(&plan, &d->node, &t, &d->model, &w, err);
  if (st != FTH_OK && (d->batch_rounding != FTH_BATCH_DOWN || plan.layout.num_gpus == 0)) return st;
  if (d->batch_rounding == FTH_BATCH_DOWN) {
    w.global_batch = batch_for(d, plan.layout.dp, s->pp, s->vs, s->mb, s->schedule);
    if (w.global_batch <= 0)
      return fth_fail(err, FTH_ETILE, "workload.global_batch_size",
                      "no batch up to %.0f tiles DP %d x micro-batch %d for %s",
                      d->work.global_batch, plan.layout.dp, s->mb,
                      fth_pp_schedule_name((fth_pp_schedule)s->schedule));
    if (fth_train_rework(&plan, &w, err) != FTH_OK) return err->status;
  }
  fth_train_evaluate(&plan, result);
  *out = *s;
  fill_hit(out, &plan, result, d);
  return FTH_OK;
}
