/* fth_search_run against brute force: the same strategy space enumerated
 * here, each strategy placed on the fabric as fth_search.h documents it,
 * compiled and evaluated with the training step model directly, non-fitting
 * ones dropped, the rest sorted by step time. The search's best N must be the
 * brute force's best N (equal step times in order; ties, e.g. ZeRO-1 against
 * ZeRO-2, may come in either order), and its counters must match.
 *
 * System: pods of 4 GPUs (switched, 100 GB/s, 1 us), 2 pods (switched,
 * 10 GB/s, 5 us); node 1 PFLOP/s bf16, HBM 2 TB/s. A dense and a MoE model,
 * small enough for the whole space to run in well under a second. */
#include "fth_search.h"
#include "test_macros.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TOP_N     12
#define MAX_BRUTE 16384

typedef struct brute_hit {
  fth_search_hit s; /* strategy fields only */
  double step_time_s;
} brute_hit;

typedef struct brute_stats {
  long long considered, fits, no_fit, refused;
} brute_stats;

static fth_search_def problem(int moe, double capacity_bytes) {
  fth_search_def d;
  memset(&d, 0, sizeof d);
  d.node = fth_node_def_default();
  d.node.compute.flops_per_s[FTH_PREC_BF16] = 1e15;
  d.node.compute.efficiency = 1.0;
  d.node.tier[FTH_TIER_XPU].bw_per_stack_bytes_per_s = 2e12;
  d.node.tier[FTH_TIER_XPU].size_per_stack_bytes = capacity_bytes;
  d.node.tier[FTH_TIER_XPU].num_stacks = 1;
  d.node.tier[FTH_TIER_XPU].efficiency = 1.0;
  d.node.has_tier[FTH_TIER_XPU] = 1;
  d.scale_up = fth_link_def_default();
  d.scale_up.bw_bytes_per_s = 100e9;
  d.scale_up.latency_s = 1e-6;
  d.scale_out = fth_link_def_default();
  d.scale_out.bw_bytes_per_s = 10e9;
  d.scale_out.latency_s = 5e-6;
  d.scale_up_type = FTH_TOPO_SWITCHED;
  d.scale_out_type = FTH_TOPO_SWITCHED;
  d.pod_size = 4;
  d.num_pods = 2;
  d.model = fth_model_def_default();
  d.model.d_model = 512;
  d.model.n_layers = 4;
  d.model.num_heads = 8;
  d.model.ffn_hidden = 2048;
  d.model.vocab_size = 8000;
  d.model.max_seq_len = 512;
  if (moe) {
    d.model.gated_mlp = 1;
    d.model.num_experts = 8;
    d.model.top_k = 2;
    d.model.expert_ffn_hidden = 1024;
  }
  d.work = fth_train_def_default();
  d.work.global_batch = 16;
  d.work.reserve.context_bytes = 0; /* a toy node of a few hundred MB: no 1 GiB context */
  d.work.seq_len = 512;
  d.work.comp_comm_eff = 0.5;
  fth_search_space *s = &d.space;
  int tp[] = {1, 2, 4}, cp[] = {1, 2}, pp[] = {1, 2, 4}, pp_in[] = {1, 2}, vs[] = {1, 2},
      mb[] = {1, 2}, tp_moe[] = {1, 2}, ep[] = {1, 2, 4, 8};
  memcpy(s->tp, tp, sizeof tp);
  s->n_tp = 3;
  memcpy(s->cp, cp, sizeof cp);
  s->n_cp = 2;
  memcpy(s->pp, pp, sizeof pp);
  s->n_pp = 3;
  memcpy(s->pp_in, pp_in, sizeof pp_in);
  s->n_pp_in = 2;
  memcpy(s->vs, vs, sizeof vs);
  s->n_vs = 2;
  memcpy(s->mb, mb, sizeof mb);
  s->n_mb = 2;
  memcpy(s->tp_moe, tp_moe, sizeof tp_moe);
  s->n_tp_moe = 2;
  memcpy(s->ep, ep, sizeof ep);
  s->n_ep = 4;
  s->recompute_mask = (1 << FTH_RECOMPUTE_COUNT) - 1;
  s->dp_mask = 15;
  s->schedule_mask = (1 << FTH_PP_COUNT) - 1; /* every row of the schedule table */
  s->sp_mask = 3;
  d.objective = FTH_OBJ_STEP_TIME;
  d.workers = 1;
  return d;
}

/* The search's two physical tiers (a pod's scale-up, the pods' scale-out), no logical ones. */
static void two_tiers(const fth_search_def *d, fth_topology_def *t) {
  *t = fth_topology_def_default();
  t->num_phys = 2;
  t->phys[0].type = d->scale_up_type;
  t->phys[0].size = d->pod_size;
  t->phys[0].link = d->scale_up;
  t->phys[1].type = d->scale_out_type;
  t->phys[1].size = d->num_pods;
  t->phys[1].link = d->scale_out;
}

/* Placement as fth_search.h states it: TP, CP and pp_in stages in the pod,
 * the other pp / pp_in stages across pods, DP filling the rest of each; in
 * the expert view TP_MoE and the largest part of EP that divides what is left
 * of the pod inside it, the rest of EP across pods. Only sizes > 1 are written. */
static int place(const fth_search_def *d, int tp, int cp, int pp, int pp_in, int tp_moe, int ep,
                 fth_topology_def *t, int *ep_su_out) {
  int moe = d->model.num_experts > 1;
  int pod = d->pod_size, pods = d->num_pods;
  if (d->num_xpus > 0 && d->num_xpus != pod * pods) {
    /* Fewer GPUs than the pods hold: rank order, TP, CP, DP_Attn / TP_MoE, EP, DP_MoE
     * innermost first, PP outermost, no stages kept in a pod (fth_search.h). */
    int n = d->num_xpus;
    if (pp_in != 1 || n % pp != 0 || (n / pp) % (tp * cp) != 0) return 0;
    if (moe && (n / pp) % (tp_moe * ep) != 0) return 0;
    *ep_su_out = moe ? ep : 1;
    two_tiers(d, t);
    t->placed = 1;
    t->num_xpus = n;
    fth_logical_dim_def want[] = {
        {FTH_TAG_TP_ATTN, 0, tp},
        {FTH_TAG_CP, 0, cp},
        {FTH_TAG_DP_ATTN, 0, n / (pp * tp * cp)},
        {FTH_TAG_TP_MOE, 0, moe ? tp_moe : 1},
        {FTH_TAG_EP_SU, 0, moe ? ep : 1},
        {FTH_TAG_DP_MOE, 0, moe ? n / (pp * tp_moe * ep) : 1},
        {FTH_TAG_PP, 0, pp},
    };
    int k = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
      if (want[i].size > 1) t->logical[k++] = want[i];
    t->num_logical = k;
    return 1;
  }
  if (pp % pp_in != 0 || pod % (tp * cp * pp_in) != 0 || pods % (pp / pp_in) != 0) return 0;
  int pp_out = pp / pp_in, dp_in = pod / (tp * cp * pp_in), dp_out = pods / pp_out;
  int ep_su = 1, ep_so = 1;
  if (moe) {
    if (pod % (pp_in * tp_moe) != 0) return 0;
    int room = pod / (pp_in * tp_moe);
    for (int x = ep; x >= 1; x--)
      if (ep % x == 0 && room % x == 0) {
        ep_su = x;
        break;
      }
    ep_so = ep / ep_su;
    if (pods % (pp_out * ep_so) != 0) return 0;
  }
  *ep_su_out = ep_su;
  two_tiers(d, t);
  int n = 0;
  fth_logical_dim_def want[] = {
      {FTH_TAG_TP_ATTN, 0, tp},
      {FTH_TAG_CP, 0, cp},
      {FTH_TAG_PP, 0, pp_in},
      {FTH_TAG_DP_ATTN, 0, dp_in},
      {FTH_TAG_TP_MOE, 0, moe ? tp_moe : 1},
      {FTH_TAG_EP_SU, 0, ep_su},
      {FTH_TAG_DP_MOE, 0, moe ? pod / (pp_in * tp_moe * ep_su) : 1},
      {FTH_TAG_PP, 1, pp_out},
      {FTH_TAG_DP_ATTN, 1, dp_out},
      {FTH_TAG_EP_SO, 1, ep_so},
      {FTH_TAG_DP_MOE, 1, moe ? pods / (pp_out * ep_so) : 1},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (want[i].size > 1) t->logical[n++] = want[i];
  t->num_logical = n;
  return 1;
}

/* Every strategy of the space, evaluated directly. */
static int brute_force(const fth_search_def *d, brute_hit *out, int *n_out, brute_stats *st) {
  const fth_search_space *s = &d->space;
  int moe = d->model.num_experts > 1;
  memset(st, 0, sizeof *st);
  *n_out = 0;
  for (int a = 0; a < s->n_tp; a++)
    for (int b = 0; b < s->n_cp; b++)
      for (int c = 0; c < s->n_pp; c++)
        for (int e = 0; e < s->n_pp_in; e++)
          for (int f = 0; f < (moe ? s->n_tp_moe : 1); f++)
            for (int g = 0; g < (moe ? s->n_ep : 1); g++)
              for (int vi = 0; vi < s->n_vs; vi++)
                for (int mi = 0; mi < s->n_mb; mi++)
                  for (int sc = 0; sc < FTH_PP_COUNT; sc++)
                    for (int rc = 0; rc < FTH_RECOMPUTE_COUNT; rc++)
                      for (int dv = 0; dv < FTH_DP_COUNT; dv++)
                        for (int sp = 0; sp < 2; sp++) {
                          int tp = s->tp[a], cp = s->cp[b], pp = s->pp[c], pp_in = s->pp_in[e];
                          int tp_moe = moe ? s->tp_moe[f] : 1, ep = moe ? s->ep[g] : 1;
                          int vs = s->vs[vi];
                          /* The space (fth_search.h): masks; SP only with TP > 1; no
                           * pipeline, one schedule; a schedule row in the mask, with
                           * vs > 1 iff the row interleaves. */
                          if (!((s->recompute_mask >> rc) & 1) || !((s->dp_mask >> dv) & 1) ||
                              !((s->sp_mask >> sp) & 1) || (sp && tp == 1))
                            continue;
                          int interleaved = fth_schedule_get((fth_pp_schedule)sc)->interleaved;
                          if (pp == 1) {
                            if (sc != FTH_PP_1F1B || vs != 1) continue;
                          } else if (!((s->schedule_mask >> sc) & 1) ||
                                     (interleaved ? vs == 1 : vs != 1)) {
                            continue;
                          }
                          st->considered++;
                          fth_topology_def t;
                          int ep_su = 1;
                          if (!place(d, tp, cp, pp, pp_in, tp_moe, ep, &t, &ep_su)) {
                            st->refused++;
                            continue;
                          }
                          fth_train_def w = d->work;
                          w.pp = (fth_pp_schedule)sc;
                          w.virtual_stages = vs;
                          w.micro_batch = s->mb[mi];
                          w.recompute = (fth_recompute)rc;
                          w.dp = (fth_dp_variant)dv;
                          w.sequence_parallel = sp;
                          fth_train_plan plan;
                          fth_error err;
                          if (fth_train_compile(&plan, &d->node, &t, &d->model, &w, &err) !=
                              FTH_OK) {
                            st->refused++;
                            continue;
                          }
                          fth_train_result r;
                          fth_train_evaluate(&plan, &r);
                          if (!r.mem.fits) {
                            st->no_fit++;
                            continue;
                          }
                          st->fits++;
                          if (*n_out == MAX_BRUTE) return 1;
                          brute_hit *h = &out[(*n_out)++];
                          memset(h, 0, sizeof *h);
                          h->s.tp = tp;
                          h->s.cp = cp;
                          h->s.pp = pp;
                          h->s.pp_in = pp_in;
                          h->s.tp_moe = tp_moe;
                          h->s.ep = ep;
                          h->s.ep_su = ep_su;
                          h->s.vs = vs;
                          h->s.mb = s->mb[mi];
                          h->s.schedule = sc;
                          h->s.recompute = rc;
                          h->s.dp_variant = dv;
                          h->s.sp = sp;
                          h->step_time_s = r.step_time_s;
                        }
  return 0;
}

static int same_strategy(const fth_search_hit *a, const fth_search_hit *b) {
  return a->tp == b->tp && a->cp == b->cp && a->pp == b->pp && a->pp_in == b->pp_in &&
         a->tp_moe == b->tp_moe && a->ep == b->ep && a->ep_su == b->ep_su && a->vs == b->vs &&
         a->mb == b->mb && a->schedule == b->schedule && a->recompute == b->recompute &&
         a->dp_variant == b->dp_variant && a->sp == b->sp;
}

static int by_time(const void *x, const void *y) {
  double a = ((const brute_hit *)x)->step_time_s, b = ((const brute_hit *)y)->step_time_s;
  return (a > b) - (a < b);
}

static brute_hit all[MAX_BRUTE];

/* The search with bounds against itself without, for several N: the same
 * hits (strategy, position, objective to the bit), and the audit finds no
 * timed strategy below its bound. Returns the pruned count through *pruned. */
static fth_search_hit ex_hits[200], pr_hits[200];

static int same_hits(const fth_search_def *d0, int cap, long long *pruned) {
  fth_search_def d = *d0;
  fth_search_stats st_ex, st_pr, st_au;
  fth_error err;
  int n_ex = 0, n_pr = 0, n_au = 0;
  d.prune = FTH_PRUNE_OFF;
  FTH_ENSURE(fth_search_run(&d, ex_hits, cap, &n_ex, &st_ex, &err) == FTH_OK);
  d.prune = FTH_PRUNE_ON;
  FTH_ENSURE(fth_search_run(&d, pr_hits, cap, &n_pr, &st_pr, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(n_ex, n_pr);
  FTH_ENSURE_EQ_INT(st_ex.considered, st_pr.considered);
  for (int i = 0; i < n_ex; i++) {
    FTH_ENSURE_EQ_INT(ex_hits[i].index, pr_hits[i].index);
    FTH_ENSURE(ex_hits[i].objective == pr_hits[i].objective);
    FTH_ENSURE(same_strategy(&ex_hits[i], &pr_hits[i]));
  }
  /* every strategy is accounted for: timed, refused, not fitting or pruned */
  FTH_ENSURE_EQ_INT(st_pr.considered, st_pr.evaluated + st_pr.not_tiling + st_pr.invalid +
                                          st_pr.no_fit + st_pr.pruned);
  d.prune = FTH_PRUNE_AUDIT;
  FTH_ENSURE(fth_search_run(&d, pr_hits, cap, &n_au, &st_au, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(0, st_au.bound_violations);
  FTH_ENSURE_EQ_INT(0, st_au.pruned);
  FTH_ENSURE_EQ_INT(st_ex.evaluated, st_au.evaluated);
  FTH_ENSURE(st_au.bound_evals > 0);
  *pruned = st_pr.pruned;
  /* an earlier part of the search holding N at the N-th best objective
   * (prune_above, as search.run passes it between TP degrees): the same N,
   * timing no more; just below it the N-th is still found (ties at the
   * threshold are not skipped) */
  if (n_ex == cap && d0->objective == FTH_OBJ_STEP_TIME) {
    fth_search_stats st_ab;
    int n_ab = 0;
    d.prune = FTH_PRUNE_ON;
    d.prune_above = ex_hits[cap - 1].objective;
    FTH_ENSURE(fth_search_run(&d, pr_hits, cap, &n_ab, &st_ab, &err) == FTH_OK);
    FTH_ENSURE_EQ_INT(n_ex, n_ab);
    for (int i = 0; i < n_ex; i++) {
      FTH_ENSURE_EQ_INT(ex_hits[i].index, pr_hits[i].index);
      FTH_ENSURE(ex_hits[i].objective == pr_hits[i].objective);
    }
    FTH_ENSURE(st_ab.evaluated <= st_pr.evaluated);
    FTH_ENSURE_EQ_INT(st_ab.considered, st_ab.evaluated + st_ab.not_tiling + st_ab.invalid +
                                            st_ab.no_fit + st_ab.pruned);
  }
  return 0;
}

static int pruned_is_exhaustive(const fth_search_def *d0) {
  static const int caps[] = {1, 3, TOP_N, 200};
  long long pruned = 0, p;
  for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
    FTH_RUN(same_hits(d0, caps[i], &p));
    pruned += p;
  }
  fth_search_def d = *d0; /* rounded batches rank by time per sequence */
  d.work.global_batch = 15;
  d.batch_rounding = FTH_BATCH_DOWN;
  FTH_RUN(same_hits(&d, 5, &p));
  pruned += p;
  d = *d0; /* the automatic lists of virtual stages and micro-batches */
  d.space.n_vs = 0;
  d.space.n_mb = 0;
  FTH_RUN(same_hits(&d, 4, &p));
  pruned += p;
  /* an FP8 recipe, whose weight casts are shared by the micro-batches: group
   * references bound only variants of their batch, no per-sequence bound;
   * rounded down, batches differ between schedules */
  d = *d0;
  d.node.compute.flops_per_s[FTH_PREC_FP8] = 2e15;
  d.work.recipe = FTH_RECIPE_FP8_DELAYED;
  FTH_RUN(same_hits(&d, 3, &p));
  d.work.global_batch = 15;
  d.batch_rounding = FTH_BATCH_DOWN;
  FTH_RUN(same_hits(&d, 3, &p));
  /* uneven splits: 10 layers (PP 4 runs 2, 3, 3, 2 evenly, PP 2 5 and 5), 0 or
   * 1 layer off either end; a later split is bounded by the references of an
   * earlier one whose blocks it holds (split_refs), which the audit checks too */
  d = *d0;
  d.model.n_layers = 10;
  d.space.n_trim_first = d.space.n_trim_last = 2;
  d.space.trim_first[0] = d.space.trim_last[0] = 0;
  d.space.trim_first[1] = d.space.trim_last[1] = 1;
  FTH_RUN(same_hits(&d, 3, &p));
  pruned += p;
  d.space.n_vs = 0;
  d.space.n_mb = 0;
  FTH_RUN(same_hits(&d, 1, &p));
  pruned += p;
  FTH_ENSURE(pruned > 0); /* the bounds did skip something */
  return 0;
}

static int against_brute_force(int moe, double capacity_bytes) {
  fth_search_def d = problem(moe, capacity_bytes);
  int n_all = 0;
  brute_stats bs;
  FTH_ENSURE(brute_force(&d, all, &n_all, &bs) == 0);
  qsort(all, (size_t)n_all, sizeof all[0], by_time);
  /* The case is meaningful: more fitting strategies than kept, some refused
   * for memory, some for tiling or the step model. */
  FTH_ENSURE(n_all > TOP_N);
  FTH_ENSURE(bs.no_fit > 0);
  FTH_ENSURE(bs.refused > 0);

  fth_search_hit top[TOP_N];
  int n_top = 0;
  fth_search_stats st;
  fth_error err;
  d.prune = FTH_PRUNE_OFF; /* the counters below are the exhaustive search's */
  FTH_ENSURE(fth_search_run(&d, top, TOP_N, &n_top, &st, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(0, st.pruned);
  FTH_ENSURE_EQ_INT(TOP_N, n_top);
  FTH_ENSURE_EQ_INT(bs.considered, st.considered);
  FTH_ENSURE_EQ_INT(bs.fits, st.evaluated);
  FTH_ENSURE_EQ_INT(bs.no_fit, st.no_fit);
  FTH_ENSURE_EQ_INT(bs.refused, st.not_tiling + st.invalid);

  for (int i = 0; i < n_top; i++) {
    /* The i-th best step time is the brute force's i-th. */
    FTH_ENSURE_NEAR(all[i].step_time_s, top[i].step_time_s, 1e-12);
    FTH_ENSURE_NEAR(top[i].step_time_s, top[i].objective, 0);
    FTH_ENSURE(top[i].fits);
    /* The hit is a strategy the brute force found, with that step time. */
    int found = 0;
    for (int j = 0; j < n_all && !found; j++)
      if (same_strategy(&top[i], &all[j].s)) {
        FTH_ENSURE_NEAR(all[j].step_time_s, top[i].step_time_s, 1e-12);
        found = 1;
      }
    FTH_ENSURE(found);
    /* No strategy appears twice. */
    for (int j = 0; j < i; j++) FTH_ENSURE(!same_strategy(&top[i], &top[j]));
  }
  /* Every strategy strictly faster than the N-th hit is among the hits. */
  for (int j = 0; j < n_all && all[j].step_time_s < top[n_top - 1].step_time_s; j++) {
    int found = 0;
    for (int i = 0; i < n_top; i++) found |= same_strategy(&top[i], &all[j].s);
    FTH_ENSURE(found);
  }
  /* Two workers splitting the enumeration find the same best N between them
   * and count the same strategies. */
  fth_search_hit split[2 * TOP_N];
  int n_split = 0;
  long long considered = 0, evaluated = 0;
  for (int wk = 0; wk < 2; wk++) {
    fth_search_def dw = d;
    dw.workers = 2;
    dw.worker = wk;
    int n_w = 0;
    FTH_ENSURE(fth_search_run(&dw, split + n_split, TOP_N, &n_w, &st, &err) == FTH_OK);
    n_split += n_w;
    considered += st.considered;
    evaluated += st.evaluated;
  }
  FTH_ENSURE_EQ_INT(bs.considered, considered);
  FTH_ENSURE_EQ_INT(bs.fits, evaluated);
  for (int i = 0; i < n_top; i++) {
    int best = i; /* selection sort of the merged hits by step time */
    for (int j = i + 1; j < n_split; j++)
      if (split[j].step_time_s < split[best].step_time_s) best = j;
    fth_search_hit tmp = split[i];
    split[i] = split[best];
    split[best] = tmp;
    FTH_ENSURE_NEAR(top[i].step_time_s, split[i].step_time_s, 1e-12);
  }
  /* Pruned (the default) keeps the very same best N, in the same order. */
  FTH_RUN(pruned_is_exhaustive(&d));
  /* Evaluating the best hit alone gives the same step time. */
  fth_search_hit one;
  fth_train_result r;
  FTH_ENSURE(fth_search_eval_one(&d, &top[0], &one, &r, &err) == FTH_OK);
  FTH_ENSURE_NEAR(top[0].step_time_s, r.step_time_s, 1e-12);
  return 0;
}

/* Automatic virtual stages and micro-batches (n_vs = n_mb = 0), and batch
 * rounding down: values a fixed list would miss are found, every batch is the
 * largest that tiles, and a cap past the limit is refused. */
static fth_search_hit many[4096];

static int automatic_lists(void) {
  fth_search_def d = problem(0, 1e12);
  d.model.n_layers = 12;
  d.space.n_vs = 0;
  d.space.n_mb = 0;
  d.space.recompute_mask = 1 << FTH_RECOMPUTE_NONE;
  d.space.dp_mask = 1 << FTH_DP_DDP;
  d.space.sp_mask = 1;
  d.work.global_batch = 24; /* DP 8: local batch 3, micro-batches 1 and 3 */
  fth_search_stats st;
  fth_error err;
  int n = 0;
  FTH_ENSURE(fth_search_run(&d, many, 4096, &n, &st, &err) == FTH_OK);
  FTH_ENSURE(n > 0 && n < 4096);
  int mb3 = 0, vs3 = 0, vs6 = 0, vs7 = 0;
  for (int i = 0; i < n; i++) {
    const fth_search_hit *h = &many[i];
    FTH_ENSURE(fmod(24.0, (double)h->dp * h->mb) == 0);
    FTH_ENSURE_NEAR(24.0, h->batch, 0);
    /* whole chunks of the 12 layers, or of 12 + 2 with the embedding and the loss in
     * chunks of their own (PP 2 x 7: the first and last GPU 6 layers in 7 chunks) */
    FTH_ENSURE(h->vs == 1 || 12 % (h->pp * h->vs) == 0 || (h->pp > 1 && 14 % (h->pp * h->vs) == 0));
    mb3 |= h->mb == 3 && h->dp == 8;
    vs3 |= h->vs == 3;
    vs6 |= h->vs == 6;
    vs7 |= h->vs == 7 && h->pp == 2;
  }
  FTH_ENSURE(mb3 && vs3 && vs6 && vs7);
  /* Down: 23 sequences; each batch a multiple of DP x mb (x 2 for DualPipe, x PP
   * interleaved), the largest such <= 23. */
  d.work.global_batch = 23;
  d.batch_rounding = FTH_BATCH_DOWN;
  FTH_ENSURE(fth_search_run(&d, many, 4096, &n, &st, &err) == FTH_OK);
  FTH_ENSURE(n > 0);
  int smaller = 0;
  for (int i = 0; i < n; i++) {
    const fth_search_hit *h = &many[i];
    double unit = (double)h->dp * h->mb;
    if (h->schedule == FTH_PP_DUALPIPE) unit *= 2;
    if (h->vs > 1) unit *= h->pp; /* the interleaved row is fed from one end */
    FTH_ENSURE(h->batch <= 23 && fmod(h->batch, unit) == 0 && h->batch + unit > 23);
    FTH_ENSURE_NEAR(h->step_time_s * 23 / h->batch, h->objective, 1e-12);
    smaller |= h->batch < 23;
  }
  FTH_ENSURE(smaller);
  d.space.mb_max = FTH_SEARCH_MB_LIMIT + 1;
  FTH_ENSURE(fth_search_run(&d, many, 4096, &n, &st, &err) == FTH_EINVAL);
  return 0;
}

/* fth_search_time_bound by hand: 8 micro-batches of t_f = 1 s, t_b = 2 s on
 * PP = 4. busy = 8 x 3 = 24 s; GPipe and 1F1B add (p - 1)(t_f + t_b) = 9 s,
 * interleaved over v = 2 chunks half of it (4.5 s); ZB-H1 and DualPipe, whose
 * weight-gradient passes can fill the bubble, nothing; no pipeline, nothing. */
static int time_bound_by_hand(void) {
  FTH_ENSURE_NEAR(33.0, fth_search_time_bound(FTH_PP_1F1B, 4, 1, 8, 1.0, 2.0), 1e-15);
  FTH_ENSURE_NEAR(33.0, fth_search_time_bound(FTH_PP_GPIPE, 4, 1, 8, 1.0, 2.0), 1e-15);
  FTH_ENSURE_NEAR(28.5, fth_search_time_bound(FTH_PP_INTERLEAVED, 4, 2, 8, 1.0, 2.0), 1e-15);
  FTH_ENSURE_NEAR(24.0, fth_search_time_bound(FTH_PP_ZB_H1, 4, 1, 8, 1.0, 2.0), 1e-15);
  FTH_ENSURE_NEAR(24.0, fth_search_time_bound(FTH_PP_DUALPIPE, 4, 1, 8, 1.0, 2.0), 1e-15);
  FTH_ENSURE_NEAR(24.0, fth_search_time_bound(FTH_PP_1F1B, 1, 1, 8, 1.0, 2.0), 1e-15);
  return 0;
}

/* fth_search_rate_bound by hand: bf16 1 PFLOP/s and fp8 2 PFLOP/s nominal at
 * efficiency 0.5, fused attention at 0.8: matrix rates 0.5 and 1 PFLOP/s,
 * attention 0.8 and 1.6 PFLOP/s, vector 1/8 of bf16's 0.5 = 0.0625. A bf16
 * workload's kernels run at most at bf16 attention's 0.8 PFLOP/s (not fp8's,
 * which only a recipe uses); an fp8 one at fp8 attention's 1.6. */
static int rate_bound_by_hand(void) {
  fth_node_def n = fth_node_def_default();
  for (int p = 0; p < FTH_PREC_COUNT; p++) n.compute.flops_per_s[p] = 0;
  n.compute.flops_per_s[FTH_PREC_BF16] = 1e15;
  n.compute.flops_per_s[FTH_PREC_FP8] = 2e15;
  n.compute.efficiency = 0.5;
  n.compute.attention_efficiency = 0.8;
  n.compute.vector_flops_per_s = 0;
  FTH_ENSURE_NEAR(0.8e15, fth_search_rate_bound(&n, FTH_PREC_BF16), 1e-15);
  FTH_ENSURE_NEAR(1.6e15, fth_search_rate_bound(&n, FTH_PREC_FP8), 1e-15);
  n.compute.attention_efficiency = 0.25; /* attention 0.25 / 0.5 PFLOP/s: the GEMMs' 0.5 / 1 */
  FTH_ENSURE_NEAR(0.5e15, fth_search_rate_bound(&n, FTH_PREC_BF16), 1e-15);
  FTH_ENSURE_NEAR(1e15, fth_search_rate_bound(&n, FTH_PREC_FP8), 1e-15);
  /* a declared vector rate above both (4 PFLOP/s at efficiency 0.5): 2 PFLOP/s */
  n.compute.vector_flops_per_s = 4e15;
  FTH_ENSURE_NEAR(2e15, fth_search_rate_bound(&n, FTH_PREC_BF16), 1e-15);
  return 0;
}

/* fth_search_memory_bound by hand on the dense toy on one pod: TP 2, DP 2 of
 * the 4 GPUs. With bf16 weights (2 bytes), fp32 gradients (4) and Adam
 * (master copy and two moments, 12 bytes), ZeRO-3 shards all 18 bytes of each
 * of the stage's P parameters over DP: 18 P / 2, plus a 1 GB context. The
 * bound does not depend on the variant the plan was compiled with; placing
 * the optimizer states on host memory removes their 12 P / 2. */
static int memory_bound_by_hand(void) {
  fth_search_def d = problem(0, 1e12);
  fth_topology_def t = fth_topology_def_default();
  t.num_phys = 1;
  t.phys[0].type = FTH_TOPO_SWITCHED;
  t.phys[0].size = 4;
  t.phys[0].link = d.scale_up;
  t.num_logical = 2;
  t.logical[0] = (fth_logical_dim_def){FTH_TAG_TP_ATTN, 0, 2};
  t.logical[1] = (fth_logical_dim_def){FTH_TAG_DP_ATTN, 0, 2};
  fth_train_def w = d.work;
  w.reserve.context_bytes = 1e9;
  w.dp = FTH_DP_DDP;
  w.recompute = FTH_RECOMPUTE_FULL;
  fth_train_plan plan;
  fth_error err;
  FTH_ENSURE(fth_train_compile(&plan, &d.node, &t, &d.model, &w, &err) == FTH_OK);
  double p = plan.layout.stage_dense_params;
  FTH_ENSURE(p > 0 && plan.layout.stage_expert_params == 0);
  FTH_ENSURE_NEAR(18.0 * p / 2 + 1e9, fth_search_memory_bound(&plan, &w), 1e-12);
  w.footprint_tier[FTH_MEM_OPTIMIZER] = FTH_TIER_HOST;
  FTH_ENSURE_NEAR(6.0 * p / 2 + 1e9, fth_search_memory_bound(&plan, &w), 1e-12);
  return 0;
}

/* Memory pruning: on a node too small for any placement's weights, every
 * strategy is pruned or refused, nothing is timed, and the closest to fitting
 * is still reported (the search re-runs exhaustively when nothing fits). */
static int nothing_fits(void) {
  fth_search_def d = problem(0, 1e6);
  fth_search_hit top[4];
  int n = 0;
  fth_search_stats st, ex;
  fth_error err;
  FTH_ENSURE(fth_search_run(&d, top, 4, &n, &st, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(0, n);
  FTH_ENSURE(st.shortfall_bytes < HUGE_VAL);
  d.prune = FTH_PRUNE_OFF;
  FTH_ENSURE(fth_search_run(&d, top, 4, &n, &ex, &err) == FTH_OK);
  FTH_ENSURE(ex.no_fit > 0);
  FTH_ENSURE(st.shortfall_bytes == ex.shortfall_bytes);
  FTH_ENSURE_EQ_INT(ex.smallest_shortfall.index, st.smallest_shortfall.index);
  FTH_ENSURE_EQ_INT(ex.no_fit, st.no_fit);
  return 0;
}

/* Offload as a search knob: on a node whose HBM holds no strategy of the
 * dense toy, a host tier (50 GB/s, 64 GB) makes some fit, each with the
 * fastest placement of weights, activations and optimizer states that fits;
 * the pruned search (minimal placements only) keeps the exhaustive best N;
 * evaluating a hit alone gives its step time. */
static int offload_search(void) {
  fth_search_def d = problem(0, 0.03e9);
  d.node.tier[FTH_TIER_HOST].bw_per_stack_bytes_per_s = 50e9;
  d.node.tier[FTH_TIER_HOST].size_per_stack_bytes = 64e9;
  d.node.tier[FTH_TIER_HOST].num_stacks = 1;
  d.node.tier[FTH_TIER_HOST].efficiency = 1.0;
  d.node.has_tier[FTH_TIER_HOST] = 1;
  fth_search_hit top[TOP_N];
  int n = 0;
  fth_search_stats st;
  fth_error err;
  FTH_ENSURE(fth_search_run(&d, top, TOP_N, &n, &st, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(0, n); /* nothing fits in 30 MB of HBM */
  d.space.offload_tier = FTH_TIER_HOST;
  FTH_ENSURE(fth_search_run(&d, top, TOP_N, &n, &st, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(TOP_N, n);
  for (int i = 0; i < n; i++) {
    const fth_search_hit *h = &top[i];
    int moved = (h->offload_weights == FTH_TIER_HOST) + (h->offload_activations == FTH_TIER_HOST) +
                (h->offload_optimizer == FTH_TIER_HOST);
    FTH_ENSURE(moved > 0);
    fth_search_hit one;
    fth_train_result r;
    FTH_ENSURE(fth_search_eval_one(&d, h, &one, &r, &err) == FTH_OK);
    FTH_ENSURE(r.mem.fits);
    FTH_ENSURE_NEAR(h->step_time_s, r.step_time_s, 1e-12);
  }
  long long p;
  FTH_RUN(same_hits(&d, TOP_N, &p));
  FTH_RUN(same_hits(&d, 1, &p));
  /* a tier the search does not offload to is refused by eval_one */
  fth_search_hit bad = top[0], one;
  fth_train_result r;
  bad.offload_weights = FTH_TIER_NVME;
  FTH_ENSURE(fth_search_eval_one(&d, &bad, &one, &r, &err) == FTH_EINVAL);
  return 0;
}

/* 6 GPUs on 2 pods of 4 (the second half used): the search places each strategy in rank
 * order and times it as the brute force does from the same order written here; e.g. EP 2 x
 * DP_MoE 3 puts the EP group {4, 5} in pod 1 and {2, 3} in pod 0, TP 2 never straddles,
 * and a DP group of 3 at stride 2 ({0, 2, 4}) spans both pods. */
static int placed_against_brute_force(void) {
  fth_search_def d = problem(1, 0.4e9);
  d.num_xpus = 6;
  d.work.global_batch = 24;
  int pp[] = {1, 2, 3};
  memcpy(d.space.pp, pp, sizeof pp);
  d.space.n_pp = 3;
  int n_all = 0;
  brute_stats bs;
  FTH_ENSURE(brute_force(&d, all, &n_all, &bs) == 0);
  qsort(all, (size_t)n_all, sizeof all[0], by_time);
  FTH_ENSURE(n_all > TOP_N);
  FTH_ENSURE(bs.refused > 0);
  fth_search_hit top[TOP_N];
  int n_top = 0;
  fth_search_stats st;
  fth_error err;
  d.prune = FTH_PRUNE_OFF;
  FTH_ENSURE(fth_search_run(&d, top, TOP_N, &n_top, &st, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(TOP_N, n_top);
  FTH_ENSURE_EQ_INT(bs.considered, st.considered);
  FTH_ENSURE_EQ_INT(bs.fits, st.evaluated);
  for (int i = 0; i < n_top; i++) FTH_ENSURE_NEAR(all[i].step_time_s, top[i].step_time_s, 1e-12);
  FTH_RUN(pruned_is_exhaustive(&d));
  return 0;
}

int search_test(void) {
  FTH_RUN(placed_against_brute_force());
  FTH_RUN(offload_search());
  FTH_RUN(time_bound_by_hand());
  FTH_RUN(rate_bound_by_hand());
  FTH_RUN(memory_bound_by_hand());
  FTH_RUN(nothing_fits());
  FTH_RUN(against_brute_force(0, 0.25e9));
  FTH_RUN(against_brute_force(1, 0.4e9));
  FTH_RUN(automatic_lists());
  return 0;
}
