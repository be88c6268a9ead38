/* fth_search.c: the cross product of a strategy space, placed, checked for
 * tiling, memory first, timed when it fits, best N kept (fth_search.h). */
#include "fth_search.h"

#include <math.h>
#include <string.h>

static fth_topology_def place(const fth_search_def *d, int tp, int cp, int pp, int pp_in,
                              int tp_moe, int ep_su, int ep_so, int moe) {
  fth_topology_def t = fth_topology_def_default();
  t.num_phys = d->num_pods > 1 ? 2 : 1;
  t.phys[0].type = d->scale_up_type;
  t.phys[0].size = d->pod_size;
  t.phys[0].link = d->scale_up;
  if (t.num_phys == 2) {
    t.phys[1].type = d->scale_out_type;
    t.phys[1].size = d->num_pods;
    t.phys[1].link = d->scale_out;
  }
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
  h->dp = p->layout.dp;
  h->batch = p->work.global_batch;
  h->step_time_s = r->step_time_s;
  h->mfu = r->mfu;
  h->tokens_per_s = r->tokens_per_s;
  h->total_time_s = r->total_time_s;
  h->peak_bytes = r->mem.tier_bytes[FTH_TIER_XPU];
  h->capacity_bytes = r->mem.tier_capacity[FTH_TIER_XPU];
  h->bubble_fraction = r->bubble_fraction;
  for (int k = 0; k < FTH_COMM_KIND_COUNT; k++) h->exposed_s[k] = r->comm[k].exposed_s;
  h->fits = r->mem.fits;
  h->overflow_tier = r->mem.overflow_tier;
  /* A rounded-down batch runs a shorter step: rank by the time of the requested
   * batch at the strategy's rate (= by tokens/s). Exact batches: the step time. */
  h->objective = d->objective == FTH_OBJ_HEADROOM ? h->peak_bytes - h->capacity_bytes
                 : h->batch == d->work.global_batch
                     ? h->step_time_s
                     : h->step_time_s * (d->work.global_batch / h->batch);
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
  if (pp == 1) return sc == FTH_PP_1F1B && vs == 1;
  if (!in(s->schedule_mask, sc)) return 0;
  return fth_schedule_get((fth_pp_schedule)sc)->interleaved ? vs > 1 : vs == 1;
}

#define N_SCHED FTH_PP_COUNT
#define N_RC    FTH_RECOMPUTE_COUNT
#define N_SP    2
#define N_INNER (N_SCHED * N_RC * FTH_DP_COUNT * N_SP)
/* Divisors of an int: at most 1,600 (1,102,701,600 has the most below 2^31). */
#define MAX_DIVISORS 1600

/* What a run derives once from the def: the divisors of the layer count (the
 * automatic virtual stages are among them; a v's enumeration position is its
 * position there) and the enumeration positions per placement. */
typedef struct enum_ctx {
  int layer_div[MAX_DIVISORS], n_layer_div;
  int vs_slots, mb_slots, mb_max;
  long long slots; /* per placement */
} enum_ctx;

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

/* The vs at enumeration position vi for PP, 0 when that position is not a
 * value of the space there (automatic list: v > 1 must divide n_layers / PP). */
static int vs_at(const enum_ctx *c, const fth_search_space *s, int n_layers, int pp, int vi) {
  if (s->n_vs > 0) return s->vs[vi];
  int v = c->layer_div[vi];
  return v == 1 || n_layers % ((long long)pp * v) == 0 ? v : 0;
}

/* Interleaved chunks hold whole, equal layer counts: v > 1 needs n_layers % (PP x v) == 0. */
static int vs_splits(int n_layers, int pp, int vs) {
  return vs == 1 || n_layers % ((long long)pp * vs) == 0;
}

/* The global batch a strategy runs: the request (exact), or the largest batch
 * <= the request that is a multiple of DP x mb x what the schedule needs of
 * the micro-batch count (2 for rows fed from both ends, PP when interleaved;
 * fth_train_rework). 0 when none. */
static double batch_for(const fth_search_def *d, int dp, int pp, int vs, int mb, int sc) {
  double want = d->work.global_batch;
  if (d->batch_rounding != FTH_BATCH_DOWN) return want;
  double m = fth_schedule_get((fth_pp_schedule)sc)->even_stages ? 2 : 1;
  if (fth_pp_chunks((fth_pp_schedule)sc, vs) > 1) m = pp % 2 == 0 ? pp : m * pp; /* lcm(m, PP) */
  double unit = (double)dp * mb * m;
  return floor(want / unit) * unit;
}

/* Strategies of the space for one placement when it is refused as a whole:
 * one per (vs, schedule, recompute, DP variant, SP), times the listed
 * micro-batches (an automatic list has no values without a DP: once). */
static long long count_variants(const enum_ctx *c, const fth_search_space *s, int n_layers, int tp,
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

/* Does (tp, cp, pp, pp_in, tp_moe, ep) tile the pods? Products are taken in
 * long long so that huge values cannot overflow. EP takes as much of the pod
 * as divides it (ep_su), the rest across pods (ep_so). */
static int placement_tiles(const fth_search_def *d, int moe, int tp, int cp, int pp, int pp_in,
                           int tp_moe, int ep, int *ep_su, int *ep_so) {
  *ep_su = 1;
  *ep_so = 1;
  long long pod = d->pod_size, pods = d->num_pods;
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

/* Count a whole placement's variants as refused (by worker 0 only, so that
 * sharded runs add up). */
static void refuse_all(const fth_search_def *d, fth_search_stats *st, long long variants,
                       int tiling) {
  if (d->worker != 0) return;
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

/* Every (vs, mb, schedule, recompute, DP variant, SP) of one placement whose
 * slot this worker owns: reworked on the compiled layout, memory first,
 * timed when it fits. `proto` carries the placement's fields; `slot` is the
 * placement's first enumeration position (positions: vs, mb, then the inner
 * product, so that indices do not depend on DP). */
static void run_variants(const fth_search_def *d, const enum_ctx *c, fth_train_plan *plan,
                         const fth_search_hit *proto, long long slot, fth_search_hit *top,
                         int top_cap, int *n_top, fth_search_stats *st) {
  const fth_search_space *s = &d->space;
  const int n_layers = d->model.n_layers, tp = proto->tp, pp = proto->pp;
  const int workers = d->workers > 0 ? d->workers : 1;
  const int dp = plan->layout.dp;
  const int down = d->batch_rounding == FTH_BATCH_DOWN;
  /* The automatic micro-batches: divisors of the local batch (exact), every
   * size up to it (down: each strategy rounds its own batch); none when the
   * request is smaller than DP or (exact) not a multiple of it. */
  double local = d->work.global_batch / dp;
  int mb_hi = 0;
  if (s->n_mb == 0) {
    if (down || local == floor(local)) mb_hi = (int)fmin(floor(local), (double)c->mb_max);
    if (mb_hi == 0) {
      /* counted as one refused strategy per (vs, schedule, recompute, DP variant, SP) */
      long long n = count_variants(c, s, n_layers, tp, pp);
      if (d->worker == 0) {
        st->considered += n;
        st->not_tiling += n;
      }
      return;
    }
  }
  fth_train_result r;
  for (int vi = 0; vi < c->vs_slots; vi++) {
    const int vs = vs_at(c, s, n_layers, pp, vi);
    if (vs == 0) continue;
    const int splits = vs_splits(n_layers, pp, vs);
    const int n_mi = s->n_mb > 0 ? s->n_mb : mb_hi;
    for (int mi = 0; mi < n_mi; mi++) {
      const int mb = s->n_mb > 0 ? s->mb[mi] : mi + 1;
      if (s->n_mb == 0 && !down && fmod(local, mb) != 0) continue;
      long long my = slot + ((long long)vi * c->mb_slots + mi) * N_INNER;
      for (int sc = 0; sc < N_SCHED; sc++)
        for (int rc = 0; rc < N_RC; rc++)
          for (int dv = 0; dv < FTH_DP_COUNT; dv++)
            for (int sp = 0; sp < N_SP; sp++, my++) {
              if (!in_space(s, tp, pp, vs, sc, rc, dv, sp)) continue;
              if (my % workers != d->worker) continue;
              st->considered++;
              fth_train_def w = d->work;
              w.global_batch = batch_for(d, dp, pp, vs, mb, sc);
              if (!splits || w.global_batch <= 0) {
                st->not_tiling++;
                continue;
              }
              w.pp = (fth_pp_schedule)sc;
              w.virtual_stages = vs;
              w.micro_batch = mb;
              w.recompute = (fth_recompute)rc;
              w.dp = (fth_dp_variant)dv;
              w.sequence_parallel = sp;
              fth_error e3;
              fth_status rs = fth_train_rework(plan, &w, &e3);
              if (rs != FTH_OK) {
                if (rs == FTH_ETILE)
                  st->not_tiling++;
                else
                  st->invalid++;
                continue;
              }
              fth_search_hit h = *proto;
              h.dp = dp;
              h.batch = w.global_batch;
              h.vs = vs;
              h.mb = mb;
              h.schedule = sc;
              h.recompute = rc;
              h.dp_variant = dv;
              h.sp = sp;
              h.index = my;
              h.overflow_tier = FTH_TIER_COUNT;
              /* Memory before time: the footprint costs a fraction of an evaluation. */
              fth_memory_footprint fp;
              fth_train_footprint(plan, &fp);
              if (!fp.fits) {
                note_shortfall(st, &fp, &h);
                continue;
              }
              fth_train_evaluate(plan, &r);
              st->evaluated++;
              fill_hit(&h, plan, &r, d);
              keep(top, top_cap, n_top, &h);
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
  c->n_layer_div = divisors(d->model.n_layers, c->layer_div, MAX_DIVISORS);
  c->mb_max = s->mb_max > 0 ? s->mb_max : FTH_SEARCH_MB_MAX;
  c->vs_slots = s->n_vs > 0 ? s->n_vs : c->n_layer_div;
  c->mb_slots = s->n_mb > 0 ? s->n_mb : c->mb_max;
  c->slots = (long long)c->vs_slots * c->mb_slots * N_INNER;
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
  if (placements * (double)ctx.slots >= (double)FTH_SEARCH_MAX_SLOTS)
    return fth_fail(err, FTH_EINVAL, "space",
                    "%.3g enumeration positions: at most 2^40 (fix some dimensions)",
                    placements * (double)ctx.slots);
  long long index = 0;
  fth_train_plan plan;
  for (int a = 0; a < s->n_tp; a++)
    for (int b = 0; b < s->n_cp; b++)
      for (int c = 0; c < s->n_pp; c++)
        for (int e = 0; e < s->n_pp_in; e++)
          for (int f = 0; f < n_tpm; f++)
            for (int g = 0; g < n_ep; g++, index += ctx.slots) {
              fth_search_hit proto;
              memset(&proto, 0, sizeof proto);
              proto.tp = s->tp[a];
              proto.cp = s->cp[b];
              proto.pp = s->pp[c];
              proto.pp_in = s->pp_in[e];
              proto.tp_moe = moe ? s->tp_moe[f] : 1;
              proto.ep = moe ? s->ep[g] : 1;
              int ep_so;
              if (!placement_tiles(d, moe, proto.tp, proto.cp, proto.pp, proto.pp_in,
                                   proto.tp_moe, proto.ep, &proto.ep_su, &ep_so)) {
                refuse_all(d, st, count_variants(&ctx, s, m->n_layers, proto.tp, proto.pp), 1);
                continue;
              }
              fth_topology_def t = place(d, proto.tp, proto.cp, proto.pp, proto.pp_in,
                                         proto.tp_moe, proto.ep_su, ep_so, moe);
              fth_train_def w = d->work;
              w.pp = FTH_PP_1F1B;
              w.virtual_stages = 1;
              w.micro_batch = 1;
              fth_error e2;
              memset(&plan, 0, sizeof plan);
              /* A refusal of the workload alone (batch divisibility at micro-batch 1)
               * leaves a usable layout: each variant is reworked and judged. */
              if (fth_train_compile(&plan, &d->node, &t, m, &w, &e2) != FTH_OK &&
                  plan.layout.num_gpus == 0) {
                refuse_all(d, st, count_variants(&ctx, s, m->n_layers, proto.tp, proto.pp),
                           e2.status == FTH_ETILE);
                continue;
              }
              run_variants(d, &ctx, &plan, &proto, index, top, top_cap, n_top, st);
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
  if (!vs_splits(d->model.n_layers, s->pp, s->vs))
    return fth_fail(err, FTH_ETILE, "strategy.vs",
                    "%d virtual stages do not split %d layers over PP = %d into whole chunks",
                    s->vs, d->model.n_layers, s->pp);
  fth_topology_def t = place(d, s->tp, s->cp, s->pp, s->pp_in, s->tp_moe, ep_su, ep_so, moe);
  fth_train_def w = d->work;
  w.pp = (fth_pp_schedule)s->schedule;
  w.virtual_stages = s->vs;
  w.micro_batch = s->mb;
  w.recompute = (fth_recompute)s->recompute;
  w.dp = (fth_dp_variant)s->dp_variant;
  w.sequence_parallel = s->sp;
  fth_train_plan plan;
  fth_status st = fth_train_compile(&plan, &d->node, &t, &d->model, &w, err);
  if (st != FTH_OK && (d->batch_rounding != FTH_BATCH_DOWN || plan.layout.num_gpus == 0))
    return st;
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
