/* fth_route.c: seeded MoE router and round-based full-mesh all-to-all
 * simulator (fth_route.h). */
#include "fth_route.h"
#include "fth_rng.h"

#include <math.h>
#include <string.h>

static const char *const dist_names[FTH_DIST_COUNT] = {"uniform", "hot", "zipf", "histogram"};
static const char *const place_names[FTH_PLACE_COUNT] = {"contiguous", "round_robin",
                                                         "replicated_hot", "eplb"};
static const char *const sched_names[FTH_SCHED_COUNT] = {"fair", "round_robin"};

const char *fth_route_dist_name(fth_route_dist d) {
  return (d >= 0 && d < FTH_DIST_COUNT) ? dist_names[d] : NULL;
}

fth_route_dist fth_route_dist_parse(const char *name) {
  for (int i = 0; i < FTH_DIST_COUNT; i++)
    if (strcmp(name, dist_names[i]) == 0) return (fth_route_dist)i;
  return FTH_DIST_COUNT;
}

const char *fth_placement_name(fth_placement p) {
  return (p >= 0 && p < FTH_PLACE_COUNT) ? place_names[p] : NULL;
}

fth_placement fth_placement_parse(const char *name) {
  for (int i = 0; i < FTH_PLACE_COUNT; i++)
    if (strcmp(name, place_names[i]) == 0) return (fth_placement)i;
  return FTH_PLACE_COUNT;
}

const char *fth_mesh_sched_name(fth_mesh_sched s) {
  return (s >= 0 && s < FTH_SCHED_COUNT) ? sched_names[s] : NULL;
}

fth_mesh_sched fth_mesh_sched_parse(const char *name) {
  for (int i = 0; i < FTH_SCHED_COUNT; i++)
    if (strcmp(name, sched_names[i]) == 0) return (fth_mesh_sched)i;
  return FTH_SCHED_COUNT;
}

fth_route_def fth_route_def_default(void) {
  fth_route_def d;
  memset(&d, 0, sizeof d);
  d.tokens = 4096;
  d.experts = 8;
  d.top_k = 2;
  d.gpus = 8;
  d.dist = FTH_DIST_UNIFORM;
  d.hot_ratio = 0.25;
  d.hot_weight = 0.5;
  d.zipf_s = 1.0;
  d.placement = FTH_PLACE_CONTIGUOUS;
  d.hot_replicas = 2;
  d.seed = 1;
  d.hidden = 4096;
  d.act_bytes = 2;
  d.weight_bytes = 4;
  d.expert_id_bytes = 2;
  d.id_bytes = 4;
  return d;
}

fth_status fth_route_check(const fth_route_def *d, fth_error *err) {
  if (d->tokens < 1)
    return fth_fail(err, FTH_EINVAL, "tokens", "expected >= 1, got %lld", d->tokens);
  if (d->experts < 1 || d->experts > FTH_ROUTE_MAX_EXPERTS)
    return fth_fail(err, FTH_EINVAL, "experts", "expected 1..%d, got %d", FTH_ROUTE_MAX_EXPERTS,
                    d->experts);
  if (d->top_k < 1 || d->top_k > d->experts)
    return fth_fail(err, FTH_EINVAL, "top_k", "expected 1..experts (%d), got %d", d->experts,
                    d->top_k);
  if (d->gpus < 1 || d->gpus > FTH_ROUTE_MAX_GPUS)
    return fth_fail(err, FTH_EINVAL, "gpus", "expected 1..%d, got %d", FTH_ROUTE_MAX_GPUS, d->gpus);
  if (d->experts % d->gpus != 0 && d->gpus % d->experts != 0)
    return fth_fail(err, FTH_EINVAL, "gpus", "%d experts do not spread evenly over %d GPUs",
                    d->experts, d->gpus);
  if (d->dist < 0 || d->dist >= FTH_DIST_COUNT)
    return fth_fail(err, FTH_EINVAL, "distribution", "unknown distribution");
  if (d->dist == FTH_DIST_HOT) {
    if (!(d->hot_ratio > 0 && d->hot_ratio <= 1))
      return fth_fail(err, FTH_EINVAL, "hot_ratio", "expected a value in (0, 1], got %g",
                      d->hot_ratio);
    if (!(d->hot_weight >= 0 && d->hot_weight <= 1))
      return fth_fail(err, FTH_EINVAL, "hot_weight", "expected a value in [0, 1], got %g",
                      d->hot_weight);
  }
  if (d->dist == FTH_DIST_ZIPF && !(d->zipf_s >= 0 && isfinite(d->zipf_s)))
    return fth_fail(err, FTH_EINVAL, "zipf_s", "expected >= 0, got %g", d->zipf_s);
  if (d->dist == FTH_DIST_HISTOGRAM) {
    if (d->histogram == NULL) return fth_fail(err, FTH_EINVAL, "histogram", "missing");
    double sum = 0;
    int nonzero = 0;
    for (int e = 0; e < d->experts; e++) {
      if (!(d->histogram[e] >= 0 && isfinite(d->histogram[e])))
        return fth_fail(err, FTH_EINVAL, "histogram", "entry %d: expected a weight >= 0", e + 1);
      sum += d->histogram[e];
      nonzero += d->histogram[e] > 0;
    }
    if (!(sum > 0) || nonzero < d->top_k)
      return fth_fail(err, FTH_EINVAL, "histogram",
                      "needs at least top_k = %d experts with a positive weight", d->top_k);
  }
  if (d->placement < 0 || d->placement >= FTH_PLACE_COUNT)
    return fth_fail(err, FTH_EINVAL, "placement", "unknown placement");
  if (d->placement == FTH_PLACE_REPLICATED_HOT &&
      (d->hot_replicas < 1 || d->hot_replicas > d->gpus))
    return fth_fail(err, FTH_EINVAL, "hot_replicas", "expected 1..gpus (%d), got %d", d->gpus,
                    d->hot_replicas);
  if (d->placement == FTH_PLACE_EPLB) {
    if (d->experts % d->gpus != 0)
      return fth_fail(err, FTH_EINVAL, "placement",
                      "eplb needs whole experts per GPU: %d experts over %d GPUs", d->experts,
                      d->gpus);
    if (d->redundant_experts < 0 || d->redundant_experts % d->gpus != 0 ||
        d->redundant_experts > (FTH_ROUTE_MAX_SLOTS - d->experts))
      return fth_fail(err, FTH_EINVAL, "redundant_experts",
                      "expected a multiple of the %d GPUs in 0..%d (the same slots on every "
                      "GPU), got %d",
                      d->gpus, FTH_ROUTE_MAX_SLOTS - d->experts, d->redundant_experts);
  }
  const double sizes[5] = {d->hidden, d->act_bytes, d->weight_bytes, d->expert_id_bytes,
                           d->id_bytes};
  const char *names[5] = {"hidden", "act_bytes", "weight_bytes", "expert_id_bytes", "id_bytes"};
  for (int i = 0; i < 5; i++)
    if (!(sizes[i] >= 0 && isfinite(sizes[i])))
      return fth_fail(err, FTH_EINVAL, names[i], "expected >= 0, got %g", sizes[i]);
  return FTH_OK;
}

/* An index in [0, n) from the core's generator (fth_rng.h). */
static int rng_below(fth_rng *r, int n) {
  return (int)(fth_rng_unit(r) * n);
}

/* Walker's alias method (Vose 1991): O(1) draws from E weights. */
typedef struct alias_table {
  double prob[FTH_ROUTE_MAX_EXPERTS];
  int alias[FTH_ROUTE_MAX_EXPERTS];
  int n;
} alias_table;

static void alias_build(alias_table *t, const double *w, int n) {
  int small[FTH_ROUTE_MAX_EXPERTS], large[FTH_ROUTE_MAX_EXPERTS];
  double scaled[FTH_ROUTE_MAX_EXPERTS];
  double sum = 0;
  for (int i = 0; i < n; i++) sum += w[i];
  int ns = 0, nl = 0;
  for (int i = 0; i < n; i++) {
    scaled[i] = w[i] * n / sum;
    if (scaled[i] < 1.0)
      small[ns++] = i;
    else
      large[nl++] = i;
  }
  while (ns > 0 && nl > 0) {
    int s = small[--ns], l = large[--nl];
    t->prob[s] = scaled[s];
    t->alias[s] = l;
    scaled[l] = scaled[l] + scaled[s] - 1.0;
    if (scaled[l] < 1.0)
      small[ns++] = l;
    else
      large[nl++] = l;
  }
  while (nl > 0) {
    int l = large[--nl];
    t->prob[l] = 1.0;
    t->alias[l] = l;
  }
  while (ns > 0) {
    int s = small[--ns];
    t->prob[s] = 1.0;
    t->alias[s] = s;
  }
  t->n = n;
}

static int alias_draw(const alias_table *t, fth_rng *r) {
  int i = rng_below(r, t->n);
  return fth_rng_unit(r) < t->prob[i] ? i : t->alias[i];
}

typedef struct route_scratch {
  alias_table table;
  double weight[FTH_ROUTE_MAX_EXPERTS];
  int perm[FTH_ROUTE_MAX_EXPERTS];
  int replicas[FTH_ROUTE_MAX_EXPERTS];   ///< copies of each expert
  int first[FTH_ROUTE_MAX_EXPERTS];      ///< its first slot in slot_gpu
  long long served[FTH_ROUTE_MAX_EXPERTS]; ///< routings it has had (spreads them over copies)
  int slot_gpu[FTH_ROUTE_MAX_SLOTS];     ///< GPU of each copy, an expert's copies together
  double gpu_w[FTH_ROUTE_MAX_GPUS];      ///< expected load per GPU (placement)
  int gpu_slots[FTH_ROUTE_MAX_GPUS];     ///< copies placed on it (EPLB)
  int order[FTH_ROUTE_MAX_SLOTS];        ///< scratch for sorting copies (EPLB)
} route_scratch;

/* The GPU an expert lives on without replication: E / G consecutive experts
 * per GPU, or round robin (E < G: expert e on GPU e G / E). */
static int home_gpu(const fth_route_def *d, int e) {
  const int E = d->experts, G = d->gpus;
  if (d->placement == FTH_PLACE_ROUND_ROBIN) return e % G;
  return E >= G ? e / (E / G) : e * (G / E);
}

static int holds(const route_scratch *sc, int e, int g, int copies) {
  for (int j = 0; j < copies; j++)
    if (sc->slot_gpu[sc->first[e] + j] == g) return 1;
  return 0;
}

/* The expected busiest GPU's load (weights summing to 1, a copy's share w / r). */
static double expected_max(const route_scratch *sc, int G) {
  double m = 0;
  for (int g = 0; g < G; g++) m = fth_max(m, sc->gpu_w[g]);
  return m;
}

/* One copy per expert on its home GPU. */
static void place_home(const fth_route_def *d, route_scratch *sc, const double *w) {
  memset(sc->gpu_w, 0, sizeof sc->gpu_w);
  for (int e = 0; e < d->experts; e++) {
    sc->replicas[e] = 1;
    sc->first[e] = e;
    sc->slot_gpu[e] = home_gpu(d, e);
    sc->gpu_w[sc->slot_gpu[e]] += w[e];
  }
}

/* Hot experts replicated: every expert heavier than the mean (1 / E: none
 * under uniform routing) gets `hot_replicas` copies, its routings split
 * evenly over them; the home copy stays, each extra copy goes to the GPU
 * with the least expected load that does not hold one yet, heaviest expert
 * first. Kept only if the expected busiest GPU gets no heavier than without
 * copies, so replicating never makes a placement worse in expectation. */
static int place_hot(const fth_route_def *d, route_scratch *sc, const double *w) {
  const int E = d->experts, G = d->gpus, r = d->hot_replicas;
  place_home(d, sc, w);
  double before = expected_max(sc, G);
  if (r < 2) return 0;
  int slot = E, extra = 0;
  for (int i = 0; i < E; i++) {
    int e = sc->perm[i]; /* heaviest first */
    if (!(w[e] * E > 1.0 + 1e-9) || slot + r - 1 > FTH_ROUTE_MAX_SLOTS) continue;
    int home = sc->slot_gpu[e];
    sc->first[e] = slot;
    sc->slot_gpu[slot] = home;
    sc->gpu_w[home] -= w[e] * (1.0 - 1.0 / r);
    for (int c = 1; c < r; c++) {
      int best = -1;
      for (int g = 0; g < G; g++)
        if (!holds(sc, e, g, c) && (best < 0 || sc->gpu_w[g] < sc->gpu_w[best])) best = g;
      sc->slot_gpu[slot + c] = best;
      sc->gpu_w[best] += w[e] / r;
    }
    sc->replicas[e] = r;
    slot += r;
    extra += r - 1;
  }
  if (expected_max(sc, G) > before * (1.0 + 1e-12)) {
    place_home(d, sc, w);
    return 0;
  }
  return extra;
}

/* EPLB (DeepSeek's expert-parallel load balancer, github.com/deepseek-ai/EPLB,
 * its global policy): give the `redundant_experts` extra copies one at a time
 * to the expert with the largest load per copy, then pack all E + R copies,
 * heaviest first, each onto the GPU with the least load that has a free slot
 * ((E + R) / G slots per GPU; a GPU already holding the expert only when no
 * other has room). Loads are the distribution's expected ones (EPLB uses
 * loads measured over past batches, which estimate the same). */
static int place_eplb(const fth_route_def *d, route_scratch *sc, const double *w) {
  const int E = d->experts, G = d->gpus, R = d->redundant_experts;
  for (int e = 0; e < E; e++) sc->replicas[e] = 1;
  for (int i = 0; i < R; i++) {
    int best = 0;
    for (int e = 1; e < E; e++)
      if (w[e] / sc->replicas[e] > w[best] / sc->replicas[best]) best = e;
    sc->replicas[best]++;
  }
  int n = 0;
  for (int e = 0; e < E; e++) {
    sc->first[e] = n;
    for (int c = 0; c < sc->replicas[e]; c++) {
      sc->order[n] = e;
      sc->slot_gpu[n++] = -1;
    }
  }
  /* Insertion sort of the copies by load per copy, heaviest first (stable: ties by expert id). */
  for (int i = 1; i < n; i++) {
    int x = sc->order[i], j = i - 1;
    double lx = w[x] / sc->replicas[x];
    while (j >= 0 && w[sc->order[j]] / sc->replicas[sc->order[j]] < lx) {
      sc->order[j + 1] = sc->order[j];
      j--;
    }
    sc->order[j + 1] = x;
  }
  const int per_gpu = n / G;
  memset(sc->gpu_w, 0, sizeof sc->gpu_w);
  memset(sc->gpu_slots, 0, sizeof sc->gpu_slots);
  for (int i = 0; i < n; i++) {
    int e = sc->order[i], placed = 0;
    while (sc->slot_gpu[sc->first[e] + placed] >= 0) placed++;
    int best = -1, best_dup = -1;
    for (int g = 0; g < G; g++) {
      if (sc->gpu_slots[g] >= per_gpu) continue;
      if (holds(sc, e, g, placed)) {
        if (best_dup < 0 || sc->gpu_w[g] < sc->gpu_w[best_dup]) best_dup = g;
      } else if (best < 0 || sc->gpu_w[g] < sc->gpu_w[best]) {
        best = g;
      }
    }
    if (best < 0) best = best_dup;
    sc->slot_gpu[sc->first[e] + placed] = best;
    sc->gpu_slots[best]++;
    sc->gpu_w[best] += w[e] / sc->replicas[e];
  }
  return R;
}

fth_status fth_route_run(const fth_route_def *d, double *expert_load, double *gpu_load,
                         double *bytes, fth_route_stats *st, fth_error *err) {
  fth_error_clear(err);
  if (fth_route_check(d, err) != FTH_OK) return err->status;
  static const route_scratch zero; /* read-only template; each call has its own scratch */
  route_scratch sc = zero;
  const int E = d->experts, G = d->gpus, K = d->top_k;
  fth_rng r;
  fth_rng_seed(&r, d->seed);
  /* The hot experts (and the Zipf ranks) are the lowest expert ids, as in the
   * seed simulator: with contiguous placement they share the first GPUs, the
   * worst case a placement (round-robin, replicated_hot, eplb) is there to fix. */
  for (int e = 0; e < E; e++) sc.perm[e] = e;
  switch (d->dist) {
  case FTH_DIST_UNIFORM:
    for (int e = 0; e < E; e++) sc.weight[e] = 1.0;
    break;
  case FTH_DIST_HOT: {
    /* hot_ratio of the experts share hot_weight of the routings equally;
     * the rest share the remainder (the seed's HOT_RATIO / HOT_WEIGHT). */
    int n_hot = (int)floor(d->hot_ratio * E + 0.5);
    if (n_hot < 1) n_hot = 1;
    int n_cold = E - n_hot;
    for (int i = 0; i < E; i++) {
      int e = sc.perm[i];
      if (i < n_hot)
        sc.weight[e] = n_cold > 0 ? d->hot_weight / n_hot : 1.0 / E;
      else
        sc.weight[e] = (1.0 - d->hot_weight) / n_cold;
    }
    break;
  }
  case FTH_DIST_ZIPF:
    for (int i = 0; i < E; i++) sc.weight[sc.perm[i]] = 1.0 / pow((double)(i + 1), d->zipf_s);
    break;
  default:
    for (int e = 0; e < E; e++) sc.weight[e] = d->histogram[e];
    break;
  }
  alias_build(&sc.table, sc.weight, E);
  /* Placement from the normalised weights; perm sorted heaviest first
   * (insertion sort, stable) for replicated_hot. */
  double wn[FTH_ROUTE_MAX_EXPERTS];
  {
    double sum = 0;
    for (int e = 0; e < E; e++) sum += sc.weight[e];
    for (int e = 0; e < E; e++) wn[e] = sc.weight[e] / sum;
    for (int i = 1; i < E; i++) {
      int x = sc.perm[i], j = i - 1;
      while (j >= 0 && wn[sc.perm[j]] < wn[x]) {
        sc.perm[j + 1] = sc.perm[j];
        j--;
      }
      sc.perm[j + 1] = x;
    }
  }
  int extra = 0;
  if (d->placement == FTH_PLACE_REPLICATED_HOT)
    extra = place_hot(d, &sc, wn);
  else if (d->placement == FTH_PLACE_EPLB)
    extra = place_eplb(d, &sc, wn);
  else
    place_home(d, &sc, wn);
  memset(expert_load, 0, sizeof(double) * (size_t)E);
  memset(gpu_load, 0, sizeof(double) * (size_t)G);
  memset(bytes, 0, sizeof(double) * (size_t)G * (size_t)G);
  const double per_pair =
      d->hidden * d->act_bytes + d->weight_bytes + d->expert_id_bytes + 2.0 * d->id_bytes;
  int chosen[FTH_ROUTE_MAX_EXPERTS];
  for (long long t = 0; t < d->tokens; t++) {
    int src = (int)((t * (long long)G) / d->tokens);
    for (int k = 0; k < K; k++) {
      int e = -1;
      /* Top-k without replacement: redraw duplicates; past a bound, take the
       * heaviest unchosen expert (only reached by degenerate weights). */
      for (int tries = 0; tries < 64 * K && e < 0; tries++) {
        int c = alias_draw(&sc.table, &r);
        int dup = 0;
        for (int j = 0; j < k; j++) dup |= chosen[j] == c;
        if (!dup && sc.weight[c] > 0) e = c;
      }
      if (e < 0) {
        double best = -1;
        for (int c = 0; c < E; c++) {
          int dup = 0;
          for (int j = 0; j < k; j++) dup |= chosen[j] == c;
          if (!dup && sc.weight[c] > best) {
            best = sc.weight[c];
            e = c;
          }
        }
      }
      chosen[k] = e;
      expert_load[e] += 1.0;
      /* the expert's routings go to its copies in turn: an even split */
      int dst = sc.slot_gpu[sc.first[e] + (int)(sc.served[e]++ % sc.replicas[e])];
      gpu_load[dst] += 1.0;
      bytes[(size_t)src * (size_t)G + (size_t)dst] += per_pair;
    }
  }
  memset(st, 0, sizeof *st);
  st->pairs = (double)d->tokens * K;
  st->bytes_per_pair = per_pair;
  st->replicas = extra;
  for (int e = 0; e < E; e++) st->max_expert_load = fth_max(st->max_expert_load, expert_load[e]);
  for (int g = 0; g < G; g++) st->max_gpu_load = fth_max(st->max_gpu_load, gpu_load[g]);
  st->mean_expert_load = st->pairs / E;
  st->mean_gpu_load = st->pairs / G;
  st->expert_imbalance = st->max_expert_load / st->mean_expert_load;
  st->gpu_imbalance = st->max_gpu_load / st->mean_gpu_load;
  for (int s = 0; s < G; s++)
    for (int t2 = 0; t2 < G; t2++) {
      double b = bytes[(size_t)s * (size_t)G + (size_t)t2];
      st->total_bytes += b;
      if (s != t2) st->offnode_bytes += b;
    }
  return FTH_OK;
}

/* Defaults: one NVLink-class domain (H100 NVLink 4: 18 links x 25 GB/s = 450
 * GB/s per direction per GPU through NVSwitch, so one flow may use all of it)
 * and a 400 Gb/s NIC per GPU (ConnectX-7) between domains of 8 GPUs. */
fth_mesh_def fth_mesh_def_default(void) {
  fth_mesh_def m;
  memset(&m, 0, sizeof m);
  m.nodes = 8;
  m.links = 1;
  m.link_bw = 450e9;
  m.packet_size = 4096;
  m.cluster_size = 8;
  m.inter_bw = 50e9;
  m.port_bw = 450e9;
  m.inter_port_bw = 50e9;
  m.sched = FTH_SCHED_FAIR;
  m.seed_window_s = 1e-3;
  return m;
}

/* Nodes per cluster: all of them when cluster_size is 0 or covers the mesh. */
static int cluster_of(const fth_mesh_def *m) {
  return (m->cluster_size > 0 && m->cluster_size < m->nodes) ? m->cluster_size : m->nodes;
}

/* Packets a pair's links move per round, inside a cluster or between two. */
static double pair_rate(const fth_mesh_def *m, int cross) {
  return cross ? (m->inter_bw > 0 ? m->inter_bw : m->link_bw) / m->link_bw * m->links
               : (double)m->links;
}

/* Packets a node's port moves per round in one direction (HUGE_VAL: no port). */
static double port_rate(const fth_mesh_def *m, int cross) {
  double bw = cross ? m->inter_port_bw : m->port_bw;
  return bw > 0 ? bw / m->link_bw : HUGE_VAL;
}

static double nic_rate(const fth_mesh_def *m) {
  return m->nic_bytes_per_round > 0 ? m->nic_bytes_per_round / m->packet_size : HUGE_VAL;
}

fth_status fth_mesh_check(const fth_mesh_def *m, fth_error *err) {
  if (m->nodes < 1 || m->nodes > FTH_ROUTE_MAX_GPUS)
    return fth_fail(err, FTH_EINVAL, "nodes", "expected 1..%d, got %d", FTH_ROUTE_MAX_GPUS,
                    m->nodes);
  if (m->links < 1) return fth_fail(err, FTH_EINVAL, "links", "expected >= 1, got %d", m->links);
  if (!fth_positive(m->link_bw))
    return fth_fail(err, FTH_EINVAL, "link_bw", "expected bytes/s > 0, got %g", m->link_bw);
  if (!fth_positive(m->packet_size))
    return fth_fail(err, FTH_EINVAL, "packet_size", "expected bytes > 0, got %g", m->packet_size);
  const double t[3] = {m->packet_prep_s, m->base_delay_s, m->initial_cpu_s};
  const char *n[3] = {"packet_prep_delay", "base_delay", "initial_cpu_delay"};
  for (int i = 0; i < 3; i++)
    if (!(t[i] >= 0 && isfinite(t[i])))
      return fth_fail(err, FTH_EINVAL, n[i], "expected seconds >= 0");
  if (!(m->nic_bytes_per_round >= 0))
    return fth_fail(err, FTH_EINVAL, "nic_rate", "expected bytes per round >= 0");
  if (m->sched != FTH_SCHED_FAIR && m->sched != FTH_SCHED_ROUND_ROBIN)
    return fth_fail(err, FTH_EINVAL, "scheduler", "unknown scheduler");
  if (m->sched == FTH_SCHED_ROUND_ROBIN && m->nic_bytes_per_round > 0 && m->nic_bytes_per_round < m->packet_size)
    return fth_fail(err, FTH_EINVAL, "nic_rate",
                    "%g bytes per round cannot carry one %g-byte packet", m->nic_bytes_per_round,
                    m->packet_size);
  if (m->rr_max_packets < 0)
    return fth_fail(err, FTH_EINVAL, "round_robin_max_packets", "expected >= 1");
  if (m->cluster_size < 0 ||
      (m->cluster_size > 0 && m->cluster_size < m->nodes && m->nodes % m->cluster_size != 0))
    return fth_fail(err, FTH_EINVAL, "cluster_size", "expected a divisor of the %d nodes, got %d",
                    m->nodes, m->cluster_size);
  if (!(m->inter_bw >= 0 && isfinite(m->inter_bw)))
    return fth_fail(err, FTH_EINVAL, "inter_bw", "expected bytes/s >= 0");
  const double ports[2] = {m->port_bw, m->inter_port_bw};
  const char *pn[2] = {"port_bw", "inter_port_bw"};
  for (int i = 0; i < 2; i++) {
    if (!(ports[i] >= 0 && isfinite(ports[i])))
      return fth_fail(err, FTH_EINVAL, pn[i], "expected bytes/s >= 0, got %g", ports[i]);
  }
  if (!(m->seed_window_s > 0 && isfinite(m->seed_window_s)))
    return fth_fail(err, FTH_EINVAL, "seed_window", "expected seconds > 0, got %g",
                    m->seed_window_s);
  return FTH_OK;
}

double fth_mesh_round_s(const fth_mesh_def *m) {
  double send = m->packet_size / m->link_bw;
  double body = m->overlap_prep ? fth_max(m->packet_prep_s, send) : m->packet_prep_s + send;
  return m->base_delay_s + body;
}

/* Packets of a flow of `bytes`: whole packets under round robin (the seed's);
 * the fair scheduler's fluid shares let a flow's last packet be short, as on
 * the wire, so a pair's bytes do not round up to a packet each. */
static double packets_of(const fth_mesh_def *m, double bytes) {
  double p = bytes / m->packet_size;
  return m->sched == FTH_SCHED_ROUND_ROBIN ? ceil(p) : p;
}

/* Rounds a resource needs for `packets` at `rate` packets per round; whole
 * rounds, a hair of float noise forgiven. */
static double rounds_for(double packets, double rate) {
  if (packets <= 0) return 0;
  if (rate == HUGE_VAL) return 1;
  return ceil(packets / rate * (1.0 - 1e-12));
}

double fth_mesh_closed_form_s(const fth_mesh_def *m, double bytes_per_pair, double *rounds) {
  const int n = m->nodes, c = cluster_of(m);
  double p = packets_of(m, bytes_per_pair);
  double r = 0;
  if (n > 1 && p > 0) {
    r = rounds_for(p, pair_rate(m, 0));
    r = fth_max(r, rounds_for((c - 1) * p, port_rate(m, 0)));
    if (n > c) {
      r = fth_max(r, rounds_for(p, pair_rate(m, 1)));
      r = fth_max(r, rounds_for((n - c) * p, port_rate(m, 1)));
    }
    r = fth_max(r, rounds_for((n - 1) * p, nic_rate(m)));
  }
  if (rounds) *rounds = r;
  return m->initial_cpu_s + r * fth_mesh_round_s(m);
}

double fth_mesh_busiest_s(const fth_mesh_def *m, const double *bytes, double *rounds) {
  const int n = m->nodes, c = cluster_of(m);
  double r = 0;
  for (int a = 0; a < n; a++) {
    /* node a: out and in at each level, and through its NIC */
    double lvl[2][2] = {{0, 0}, {0, 0}}, nic[2] = {0, 0};
    for (int b = 0; b < n; b++) {
      if (a == b) continue;
      int cross = a / c != b / c;
      double out = packets_of(m, bytes[(size_t)a * (size_t)n + (size_t)b]);
      double in = packets_of(m, bytes[(size_t)b * (size_t)n + (size_t)a]);
      r = fth_max(r, rounds_for(out, pair_rate(m, cross)));
      lvl[cross][0] += out;
      lvl[cross][1] += in;
      nic[0] += out;
      nic[1] += in;
    }
    for (int k = 0; k < 2; k++) {
      r = fth_max(r, rounds_for(lvl[0][k], port_rate(m, 0)));
      r = fth_max(r, rounds_for(lvl[1][k], port_rate(m, 1)));
      r = fth_max(r, rounds_for(nic[k], nic_rate(m)));
    }
  }
  if (rounds) *rounds = r;
  return m->initial_cpu_s + r * fth_mesh_round_s(m);
}

double fth_mesh_seed_closed_form_s(const fth_mesh_def *m, double load_per_node, double *rounds) {
  const double n = m->nodes, w = m->link_bw * m->seed_window_s;
  double round_s =
      m->base_delay_s + floor(w / m->packet_size) * (m->packet_prep_s + m->packet_size / m->link_bw);
  double r = n > 1 ? load_per_node * n / (m->links * n * (n - 1.0) / 2.0 * w) : 0.0;
  if (rounds) *rounds = r;
  return m->initial_cpu_s + round_s * r;
}

/* ---- fair scheduler ---------------------------------------------------------------------- */

/* Resources of node a: 6 a + k, k = out / in inside the cluster (0, 1),
 * between clusters (2, 3), through the NIC (4, 5). */
enum { RES_PER_NODE = 6 };

typedef struct fair_state {
  double cap[RES_PER_NODE * FTH_ROUTE_MAX_GPUS];  ///< packets per round
  double used[RES_PER_NODE * FTH_ROUTE_MAX_GPUS]; ///< by flows already fixed this round
  int open[RES_PER_NODE * FTH_ROUTE_MAX_GPUS];    ///< flows on it not fixed yet
  int cluster[FTH_ROUTE_MAX_GPUS];                ///< each node's cluster
} fair_state;

static void flow_res(int s, int d, int cross, int res[4]) {
  res[0] = RES_PER_NODE * s + (cross ? 2 : 0);
  res[1] = RES_PER_NODE * d + (cross ? 3 : 1);
  res[2] = RES_PER_NODE * s + 4;
  res[3] = RES_PER_NODE * d + 5;
}

/* Does resource r (node a, kind k) carry the flow src -> dst? */
static int res_has(int k, int a, int src, int dst, const int *cl) {
  switch (k) {
  case 0:
    return src == a && cl[dst] == cl[a];
  case 1:
    return dst == a && cl[src] == cl[a];
  case 2:
    return src == a && cl[dst] != cl[a];
  case 3:
    return dst == a && cl[src] != cl[a];
  case 4:
    return src == a;
  default:
    return dst == a;
  }
}

/* Fix flow i at `x` packets a round and book it on its four resources. */
static void fix_flow(fair_state *f, double *share, size_t i, int s, int d, const int *cl, double x) {
  int res[4];
  flow_res(s, d, cl[s] != cl[d], res);
  share[i] = x;
  for (int k = 0; k < 4; k++) {
    f->open[res[k]]--;
    f->used[res[k]] += x;
  }
}

/* Max-min fair shares of one round by progressive filling: every unfixed
 * flow rises at the same level until a resource it uses is full or it has
 * all it asks for (its remaining packets, at most its pair's link rate);
 * those are fixed and the rest rise on. share[i] < 0 marks "not active"
 * (-1) or "not fixed yet" (-2). Each pass fixes the flows of the resource
 * that fills first (found among the 6 n resources, its flows among n
 * candidates), or, when a flow's own ask comes first, the flows that ask no
 * more (a sweep over all flows, rare: only flows about to finish): a pass
 * costs O(n), not O(n^2). */
static void fair_shares(const fth_mesh_def *m, fair_state *f, const double *rem, double *share) {
  const int n = m->nodes, c = cluster_of(m), R = RES_PER_NODE * n;
  int *cl = f->cluster;
  for (int a = 0; a < n; a++) cl[a] = a / c;
  const double rate[2] = {pair_rate(m, 0), pair_rate(m, 1)};
  for (int i = 0; i < R; i++) {
    f->used[i] = 0;
    f->open[i] = 0;
  }
  int unfixed = 0;
  double want = HUGE_VAL; /* the least an unfixed flow asks for (may be stale: only low) */
  for (int s = 0; s < n; s++)
    for (int d = 0; d < n; d++) {
      size_t i = (size_t)s * (size_t)n + (size_t)d;
      share[i] = -1.0;
      if (s == d || rem[i] <= 0) continue;
      int res[4];
      flow_res(s, d, cl[s] != cl[d], res);
      for (int k = 0; k < 4; k++) f->open[res[k]]++;
      share[i] = -2.0;
      want = fth_min(want, fth_min(rem[i], rate[cl[s] != cl[d]]));
      unfixed++;
    }
  double level = 0;
  while (unfixed > 0) {
    int best = -1;
    double fill = HUGE_VAL;
    for (int r = 0; r < R; r++)
      if (f->open[r] > 0) {
        double x = (f->cap[r] - f->used[r]) / f->open[r];
        if (x < fill) {
          fill = x;
          best = r;
        }
      }
    if (best >= 0 && fill <= want) {
      /* resource `best` fills at `fill`: its unfixed flows get that */
      level = fth_max(level, fill);
      const int a = best / RES_PER_NODE, k = best % RES_PER_NODE;
      for (int o = 0; o < n; o++) {
        int s = (k % 2 == 0) ? a : o, d = (k % 2 == 0) ? o : a;
        size_t i = (size_t)s * (size_t)n + (size_t)d;
        if (share[i] != -2.0 || !res_has(k, a, s, d, cl)) continue;
        fix_flow(f, share, i, s, d, cl, level);
        unfixed--;
      }
      continue;
    }
    /* a flow's ask comes first: fix every flow asking no more, find the next ask */
    level = fth_max(level, want);
    const double tol = 1e-12 * fth_max(1.0, level);
    double next = HUGE_VAL;
    for (int s = 0; s < n; s++)
      for (int d = 0; d < n; d++) {
        size_t i = (size_t)s * (size_t)n + (size_t)d;
        if (share[i] != -2.0) continue;
        double ask = fth_min(rem[i], rate[cl[s] != cl[d]]);
        if (ask <= level + tol) {
          fix_flow(f, share, i, s, d, cl, ask);
          unfixed--;
        } else {
          next = fth_min(next, ask);
        }
      }
    want = next;
  }
}

static fth_status simulate_fair(const fth_mesh_def *m, double *rem, double *share,
                                fth_mesh_trace_fn trace, void *ud, fth_mesh_result *out,
                                fth_error *err) {
  const int n = m->nodes;
  static const fair_state zero;
  fair_state f = zero;
  for (int a = 0; a < n; a++) {
    double *cap = f.cap + RES_PER_NODE * a;
    cap[0] = cap[1] = port_rate(m, 0);
    cap[2] = cap[3] = port_rate(m, 1);
    cap[4] = cap[5] = nic_rate(m);
  }
  long long round = 0;
  for (;;) {
    fair_shares(m, &f, rem, share);
    /* rounds until the first flow is down to its last (partial) round */
    double k = HUGE_VAL;
    int active = 0;
    for (size_t i = 0; i < (size_t)n * (size_t)n; i++) {
      if (share[i] < 0) continue;
      active = 1;
      if (!(share[i] > 0))
        return fth_fail(err, FTH_EINVAL, "simulation",
                        "no packet can move (check the port, NIC and link settings)");
      k = fth_min(k, fth_max(1.0, floor(rem[i] / share[i] * (1.0 + 1e-12))));
    }
    if (!active) break;
    if ((double)round + k > 9e18)
      return fth_fail(err, FTH_ERANGE, "simulation", "more rounds than can be counted");
    const double eps = 1e-9;
    for (int s = 0; s < n; s++)
      for (int d = 0; d < n; d++) {
        size_t i = (size_t)s * (size_t)n + (size_t)d;
        if (share[i] < 0) continue;
        double moved = fth_min(rem[i], k * share[i]);
        rem[i] -= moved;
        if (rem[i] < eps) rem[i] = 0;
        if (trace) {
          fth_mesh_trace_row row = {round, (long long)k, s, d, share[i],
                                    moved * m->packet_size, share[i] / m->links};
          trace(ud, &row);
        }
      }
    round += (long long)k;
    out->events++;
  }
  out->rounds = round;
  return FTH_OK;
}

/* ---- round robin (the seed's scheduler) --------------------------------------------------- */

static fth_status simulate_rr(const fth_mesh_def *m, double *rem, double *credit, double left,
                              fth_mesh_trace_fn trace, void *ud, fth_mesh_result *out,
                              fth_error *err) {
  const int n = m->nodes, c = cluster_of(m);
  const int rr = m->rr_max_packets > 0 ? m->rr_max_packets : m->links;
  const double nic = m->nic_bytes_per_round > 0 ? floor(nic_rate(m)) : HUGE_VAL;
  const double inter = pair_rate(m, 1);
  /* Ports in whole packets: each round a port earns its rate in credit and
   * moves floor(credit); an idle port banks at most a packet (or a round's
   * worth) beyond this round's, so it cannot burst later. */
  const double prate[2] = {port_rate(m, 0), port_rate(m, 1)};
  double pcredit[4][FTH_ROUTE_MAX_GPUS]; /* out, in inside; out, in between clusters */
  for (int k = 0; k < 4; k++)
    for (int a = 0; a < n; a++) pcredit[k][a] = 0;
  /* Refuse what would take too long to simulate: the busiest pair's packets
   * at its links' rate (a fraction of a packet per round between clusters). */
  {
    double worst = 0;
    for (int s = 0; s < n; s++)
      for (int d = 0; d < n; d++) {
        int cross = s / c != d / c;
        worst = fth_max(worst, rem[(size_t)s * (size_t)n + (size_t)d] / pair_rate(m, cross));
      }
    if (worst > FTH_MESH_MAX_ROUNDS)
      return fth_fail(err, FTH_ERANGE, "simulation",
                      "needs about %.3g rounds (more than %.0f): raise the packet size or the "
                      "bandwidth",
                      worst, FTH_MESH_MAX_ROUNDS);
  }
  int ptr[FTH_ROUTE_MAX_GPUS];
  double recv_left[FTH_ROUTE_MAX_GPUS], recv_port[2][FTH_ROUTE_MAX_GPUS];
  for (int s = 0; s < n; s++) ptr[s] = (s + 1) % n;
  long long round = 0;
  while (left > 0) {
    for (int k = 0; k < 4; k++)
      for (int a = 0; a < n; a++) {
        double r = prate[k / 2];
        pcredit[k][a] = r == HUGE_VAL ? HUGE_VAL : fth_min(pcredit[k][a] + r, fth_max(r, 1.0) + r);
      }
    for (int d = 0; d < n; d++) {
      recv_left[d] = nic;
      recv_port[0][d] = floor(pcredit[1][d]);
      recv_port[1][d] = floor(pcredit[3][d]);
    }
    double moved = 0;
    for (int s = 0; s < n; s++) {
      double send_left = nic, send_port[2] = {floor(pcredit[0][s]), floor(pcredit[2][s])};
      int start = ptr[s];
      for (int step = 0; step < n && send_left > 0; step++) {
        int d = (start + step) % n;
        if (d == s) continue;
        size_t i = (size_t)s * (size_t)n + (size_t)d;
        if (rem[i] <= 0) continue;
        /* links of this pair this round: all of them inside a cluster, a
         * fraction (accumulated as credit) between clusters */
        double cap = m->links;
        int cross = s / c != d / c;
        if (cross) {
          credit[i] += inter;
          cap = floor(credit[i]);
        }
        double k = fth_min(fth_min(rem[i], cap), fth_min((double)rr, fth_min(send_left, recv_left[d])));
        k = fth_min(k, fth_min(send_port[cross], recv_port[cross][d]));
        if (k <= 0) continue;
        if (cross) credit[i] -= k;
        rem[i] -= k;
        send_left -= k;
        recv_left[d] -= k;
        send_port[cross] -= k;
        recv_port[cross][d] -= k;
        pcredit[cross * 2][s] -= k;
        pcredit[cross * 2 + 1][d] -= k;
        moved += k;
        ptr[s] = (d + 1) % n; /* the next round starts after the last destination served */
        if (trace) {
          fth_mesh_trace_row row = {round, 1, s, d, k, k * m->packet_size, k / m->links};
          trace(ud, &row);
        }
      }
    }
    left -= moved;
    round++;
    if (moved == 0 && left > 0) {
      int fractional = (c < n && (inter < 1.0 || prate[1] < 1.0)) || prate[0] < 1.0;
      if (!fractional)
        return fth_fail(err, FTH_EINVAL, "simulation",
                        "no packet can move (check NIC and link settings)");
    }
    if ((double)round > 4.0 * FTH_MESH_MAX_ROUNDS)
      return fth_fail(err, FTH_ERANGE, "simulation", "too many rounds (NIC caps too tight?)");
  }
  out->rounds = round;
  out->events = round;
  return FTH_OK;
}

fth_status fth_mesh_simulate(const fth_mesh_def *m, const double *bytes, double *rem,
                             double *credit, fth_mesh_trace_fn trace, void *ud,
                             fth_mesh_result *out, fth_error *err) {
  fth_error_clear(err);
  memset(out, 0, sizeof *out);
  if (fth_mesh_check(m, err) != FTH_OK) return err->status;
  const int n = m->nodes;
  double left = 0;
  for (int s = 0; s < n; s++)
    for (int d = 0; d < n; d++) {
      size_t i = (size_t)s * (size_t)n + (size_t)d;
      if (!(bytes[i] >= 0 && isfinite(bytes[i])))
        return fth_fail(err, FTH_EINVAL, "bytes", "entry (%d, %d): expected bytes >= 0", s, d);
      rem[i] = s == d ? 0.0 : packets_of(m, bytes[i]);
      credit[i] = 0.0;
      left += rem[i];
      out->packets += rem[i];
      if (s != d) out->bytes += bytes[i];
    }
  fth_status st = m->sched == FTH_SCHED_FAIR
                      ? simulate_fair(m, rem, credit, trace, ud, out, err)
                      : simulate_rr(m, rem, credit, left, trace, ud, out, err);
  if (st != FTH_OK) return st;
  out->time_s = (out->rounds > 0 ? m->initial_cpu_s : 0.0) + (double)out->rounds * fth_mesh_round_s(m);
  return FTH_OK;
}
