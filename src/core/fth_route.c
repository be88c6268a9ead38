/* fth_route.c: seeded MoE router and round-based full-mesh all-to-all
 * simulator (fth_route.h). */
#include "fth_route.h"

#include <math.h>
#include <string.h>

static const char *const dist_names[FTH_DIST_COUNT] = {"uniform", "hot", "zipf", "histogram"};
static const char *const place_names[FTH_PLACE_COUNT] = {"contiguous", "round_robin",
                                                         "replicated_hot"};

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
  const double sizes[5] = {d->hidden, d->act_bytes, d->weight_bytes, d->expert_id_bytes,
                           d->id_bytes};
  const char *names[5] = {"hidden", "act_bytes", "weight_bytes", "expert_id_bytes", "id_bytes"};
  for (int i = 0; i < 5; i++)
    if (!(sizes[i] >= 0 && isfinite(sizes[i])))
      return fth_fail(err, FTH_EINVAL, names[i], "expected >= 0, got %g", sizes[i]);
  return FTH_OK;
}

/* xoshiro256** (Blackman & Vigna 2018), seeded by splitmix64: reproducible
 * on every platform. */
typedef struct rng {
  uint64_t s[4];
} rng;

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void rng_seed(rng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(rng *r) {
  uint64_t *s = r->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

static double rng_unit(rng *r) {
  return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

static int rng_below(rng *r, int n) {
  return (int)(rng_unit(r) * n);
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

static int alias_draw(const alias_table *t, rng *r) {
  int i = rng_below(r, t->n);
  return rng_unit(r) < t->prob[i] ? i : t->alias[i];
}

typedef struct route_scratch {
  alias_table table;
  double weight[FTH_ROUTE_MAX_EXPERTS];
  int perm[FTH_ROUTE_MAX_EXPERTS];
  int owner[FTH_ROUTE_MAX_EXPERTS];
  int replicas[FTH_ROUTE_MAX_EXPERTS];
} route_scratch;

fth_status fth_route_run(const fth_route_def *d, double *expert_load, double *gpu_load,
                         double *bytes, fth_route_stats *st, fth_error *err) {
  fth_error_clear(err);
  if (fth_route_check(d, err) != FTH_OK) return err->status;
  static const route_scratch zero; /* read-only template; each call has its own scratch */
  route_scratch sc = zero;
  const int E = d->experts, G = d->gpus, K = d->top_k;
  rng r;
  rng_seed(&r, d->seed);
  /* The hot experts (and the Zipf ranks) are the lowest expert ids, as in the
   * seed simulator: with contiguous placement they share the first GPUs, the
   * worst case a placement (round-robin, replicated_hot) is there to fix. */
  for (int e = 0; e < E; e++) sc.perm[e] = e;
  int n_hot = 0;
  switch (d->dist) {
  case FTH_DIST_UNIFORM:
    for (int e = 0; e < E; e++) sc.weight[e] = 1.0;
    break;
  case FTH_DIST_HOT: {
    /* hot_ratio of the experts share hot_weight of the routings equally;
     * the rest share the remainder (the seed's HOT_RATIO / HOT_WEIGHT). */
    n_hot = (int)floor(d->hot_ratio * E + 0.5);
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
  /* Placement. */
  for (int e = 0; e < E; e++) {
    if (d->placement == FTH_PLACE_ROUND_ROBIN)
      sc.owner[e] = e % G;
    else
      sc.owner[e] = E >= G ? e / (E / G) : e * (G / E);
    sc.replicas[e] = 1;
  }
  if (d->placement == FTH_PLACE_REPLICATED_HOT) {
    int h = d->dist == FTH_DIST_HOT ? n_hot : (E + 7) / 8; /* else: the heaviest eighth */
    for (int i = 0; i < h && i < E; i++) sc.replicas[sc.perm[i]] = d->hot_replicas;
  }
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
      int dst = sc.owner[e];
      if (sc.replicas[e] > 1) dst = (dst + (int)(t % sc.replicas[e]) * (G / sc.replicas[e])) % G;
      gpu_load[dst] += 1.0;
      bytes[(size_t)src * (size_t)G + (size_t)dst] += per_pair;
    }
  }
  memset(st, 0, sizeof *st);
  st->pairs = (double)d->tokens * K;
  st->bytes_per_pair = per_pair;
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

fth_mesh_def fth_mesh_def_default(void) {
  fth_mesh_def m;
  memset(&m, 0, sizeof m);
  m.nodes = 8;
  m.links = 1;
  m.link_bw = 50e9;
  m.packet_size = 4096;
  return m;
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
  if (m->nic_bytes_per_round > 0 && m->nic_bytes_per_round < m->packet_size)
    return fth_fail(err, FTH_EINVAL, "nic_rate",
                    "%g bytes per round cannot carry one %g-byte packet", m->nic_bytes_per_round,
                    m->packet_size);
  if (m->rr_max_packets < 0)
    return fth_fail(err, FTH_EINVAL, "round_robin_max_packets", "expected >= 1");
  if (m->cluster_size < 0 || (m->cluster_size > 0 && m->nodes % m->cluster_size != 0))
    return fth_fail(err, FTH_EINVAL, "cluster_size", "expected a divisor of the %d nodes, got %d",
                    m->nodes, m->cluster_size);
  if (!(m->inter_bw >= 0)) return fth_fail(err, FTH_EINVAL, "inter_bw", "expected bytes/s >= 0");
  return FTH_OK;
}

double fth_mesh_round_s(const fth_mesh_def *m) {
  double send = m->packet_size / m->link_bw;
  double body = m->overlap_prep ? fth_max(m->packet_prep_s, send) : m->packet_prep_s + send;
  return m->base_delay_s + body;
}

double fth_mesh_closed_form_s(const fth_mesh_def *m, double bytes_per_pair, double *rounds) {
  double packets = ceil(bytes_per_pair / m->packet_size);
  double r = ceil(packets / m->links);
  if (rounds) *rounds = r;
  return m->initial_cpu_s + r * fth_mesh_round_s(m);
}

fth_status fth_mesh_simulate(const fth_mesh_def *m, const double *bytes, double *rem,
                             double *credit, fth_mesh_trace_fn trace, void *ud,
                             fth_mesh_result *out, fth_error *err) {
  fth_error_clear(err);
  memset(out, 0, sizeof *out);
  if (fth_mesh_check(m, err) != FTH_OK) return err->status;
  const int n = m->nodes;
  const int rr = m->rr_max_packets > 0 ? m->rr_max_packets : m->links;
  const double nic =
      m->nic_bytes_per_round > 0 ? floor(m->nic_bytes_per_round / m->packet_size) : HUGE_VAL;
  const double inter = (m->inter_bw > 0 ? m->inter_bw : m->link_bw) / m->link_bw * m->links;
  double left = 0;
  for (int s = 0; s < n; s++)
    for (int d = 0; d < n; d++) {
      size_t i = (size_t)s * (size_t)n + (size_t)d;
      rem[i] = s == d ? 0.0 : ceil(bytes[i] / m->packet_size);
      credit[i] = 0.0;
      left += rem[i];
      out->packets += rem[i];
      if (s != d) out->bytes += bytes[i];
    }
  /* Refuse what would take too long to simulate: the busiest pair's packets
   * at its links' rate (a fraction of a packet per round between clusters). */
  {
    double worst = 0;
    for (int s = 0; s < n; s++)
      for (int d = 0; d < n; d++) {
        int cross = m->cluster_size > 0 && s / m->cluster_size != d / m->cluster_size;
        double rate = cross ? inter : (double)m->links;
        worst = fth_max(worst, rem[(size_t)s * (size_t)n + (size_t)d] / rate);
      }
    if (worst > FTH_MESH_MAX_ROUNDS)
      return fth_fail(err, FTH_ERANGE, "simulation",
                      "needs about %.3g rounds (more than %.0f): raise the packet size or the "
                      "bandwidth",
                      worst, FTH_MESH_MAX_ROUNDS);
  }
  int ptr[FTH_ROUTE_MAX_GPUS];
  double recv_left[FTH_ROUTE_MAX_GPUS];
  for (int s = 0; s < n; s++) ptr[s] = (s + 1) % n;
  long long round = 0;
  while (left > 0) {
    for (int d = 0; d < n; d++) recv_left[d] = nic;
    double moved = 0;
    for (int s = 0; s < n; s++) {
      double send_left = nic;
      int start = ptr[s];
      for (int step = 0; step < n && send_left > 0; step++) {
        int d = (start + step) % n;
        if (d == s) continue;
        size_t i = (size_t)s * (size_t)n + (size_t)d;
        if (rem[i] <= 0) continue;
        /* links of this pair this round: all of them inside a cluster, a
         * fraction (accumulated as credit) between clusters */
        double cap = m->links;
        int cross = m->cluster_size > 0 && s / m->cluster_size != d / m->cluster_size;
        if (cross) {
          credit[i] += inter;
          cap = floor(credit[i]);
        }
        double k =
            fth_min(fth_min(rem[i], cap), fth_min((double)rr, fth_min(send_left, recv_left[d])));
        if (k <= 0) continue;
        if (cross) credit[i] -= k;
        rem[i] -= k;
        send_left -= k;
        recv_left[d] -= k;
        moved += k;
        ptr[s] = (d + 1) % n; /* the next round starts after the last destination served */
        if (trace) {
          fth_mesh_trace_row row = {round, s, d, (int)k, k * m->packet_size, k / m->links};
          trace(ud, &row);
        }
      }
    }
    left -= moved;
    round++;
    if (moved == 0 && left > 0) {
      int any_cross = m->cluster_size > 0 && inter < 1.0;
      if (!any_cross)
        return fth_fail(err, FTH_EINVAL, "simulation",
                        "no packet can move (check NIC and link settings)");
    }
    if ((double)round > 4.0 * FTH_MESH_MAX_ROUNDS)
      return fth_fail(err, FTH_ERANGE, "simulation", "too many rounds (NIC caps too tight?)");
  }
  out->rounds = round;
  out->time_s = (round > 0 ? m->initial_cpu_s : 0.0) + (double)round * fth_mesh_round_s(m);
  return FTH_OK;
}
