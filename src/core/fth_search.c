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
                     fth_search_objective obj) {
  h->dp = p->layout.dp;
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
  h->objective = obj == FTH_OBJ_HEADROOM ? h->peak_bytes - h->capacity_bytes : h->step_time_s;
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

/* Strategies of the space per placement, and enumeration slots per placement. */
static long long count_variants(const fth_search_space *s, int tp, int pp) {
  long long n = 0;
  for (int vi = 0; vi < s->n_vs; vi++)
    for (int sc = 0; sc < N_SCHED; sc++)
      for (int rc = 0; rc < N_RC; rc++)
        for (int dv = 0; dv < FTH_DP_COUNT; dv++)
          for (int sp = 0; sp < N_SP; sp++) n += in_space(s, tp, pp, s->vs[vi], sc, rc, dv, sp);
  return n * s->n_mb;
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
 * timed when it fits. `proto` carries the placement's fields. */
static void run_variants(const fth_search_def *d, fth_train_plan *plan, const fth_search_hit *proto,
                         long long slot, fth_search_hit *top, int top_cap, int *n_top,
                         fth_search_stats *st) {
  const fth_search_space *s = &d->space;
  int workers = d->workers > 0 ? d->workers : 1;
  fth_train_result r;
  for (int vi = 0; vi < s->n_vs; vi++)
    for (int mi = 0; mi < s->n_mb; mi++)
      for (int sc = 0; sc < N_SCHED; sc++)
        for (int rc = 0; rc < N_RC; rc++)
          for (int dv = 0; dv < FTH_DP_COUNT; dv++)
            for (int sp = 0; sp < N_SP; sp++) {
              long long my = slot++;
              int vs = s->vs[vi];
              if (!in_space(s, proto->tp, proto->pp, vs, sc, rc, dv, sp)) continue;
              if (my % workers != d->worker) continue;
              st->considered++;
              fth_train_def w = d->work;
              w.pp = (fth_pp_schedule)sc;
              w.virtual_stages = vs;
              w.micro_batch = s->mb[mi];
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
              h.dp = plan->layout.dp;
              h.vs = vs;
              h.mb = s->mb[mi];
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
              fill_hit(&h, plan, &r, d->objective);
              keep(top, top_cap, n_top, &h);
            }
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
  const long long slots = (long long)s->n_vs * s->n_mb * N_SCHED * N_RC * FTH_DP_COUNT * N_SP;
  long long index = 0;
  fth_train_plan plan;
  int n_tpm = moe ? s->n_tp_moe : 1, n_ep = moe ? s->n_ep : 1;
  for (int a = 0; a < s->n_tp; a++)
    for (int b = 0; b < s->n_cp; b++)
      for (int c = 0; c < s->n_pp; c++)
        for (int e = 0; e < s->n_pp_in; e++)
          for (int f = 0; f < n_tpm; f++)
            for (int g = 0; g < n_ep; g++, index += slots) {
              fth_search_hit proto;
              memset(&proto, 0, sizeof proto);
              proto.tp = s->tp[a];
              proto.cp = s->cp[b];
              proto.pp = s->pp[c];
              proto.pp_in = s->pp_in[e];
              proto.tp_moe = moe ? s->tp_moe[f] : 1;
              proto.ep = moe ? s->ep[g] : 1;
              long long variants = count_variants(s, proto.tp, proto.pp);
              int ep_so;
              if (!placement_tiles(d, moe, proto.tp, proto.cp, proto.pp, proto.pp_in,
                                   proto.tp_moe, proto.ep, &proto.ep_su, &ep_so)) {
                refuse_all(d, st, variants, 1);
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
                refuse_all(d, st, variants, e2.status == FTH_ETILE);
                continue;
              }
              run_variants(d, &plan, &proto, index, top, top_cap, n_top, st);
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
  fth_topology_def t = place(d, s->tp, s->cp, s->pp, s->pp_in, s->tp_moe, ep_su, ep_so, moe);
  fth_train_def w = d->work;
  w.pp = (fth_pp_schedule)s->schedule;
  w.virtual_stages = s->vs;
  w.micro_batch = s->mb;
  w.recompute = (fth_recompute)s->recompute;
  w.dp = (fth_dp_variant)s->dp_variant;
  w.sequence_parallel = s->sp;
  fth_train_plan plan;
  if (fth_train_compile(&plan, &d->node, &t, &d->model, &w, err) != FTH_OK) return err->status;
  fth_train_evaluate(&plan, result);
  *out = *s;
  fill_hit(out, &plan, result, d->objective);
  return FTH_OK;
}
