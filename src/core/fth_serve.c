/* fth_serve.c: request-level serving simulation (fth_serve.h). */
#include "fth_serve.h"
#include "fth_model.h"
#include "fth_rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const arrival_names[FTH_ARRIVAL_COUNT] = {"poisson", "gamma", "fixed", "closed"};
static const char *const dist_names[FTH_LEN_COUNT] = {"fixed", "uniform", "normal", "lognormal",
                                                      "zipf"};
static const char *const policy_names[FTH_POLICY_COUNT] = {"continuous", "chunked", "static",
                                                            "inflight"};
static const char *const routing_names[FTH_ROUTE_COUNT] = {"round_robin", "least_outstanding"};

static int parse_name(const char *name, const char *const *names, int n) {
  for (int i = 0; name && i < n; i++)
    if (strcmp(name, names[i]) == 0) return i;
  return n;
}

const char *fth_serve_arrival_name(fth_serve_arrival a) {
  return (a >= 0 && a < FTH_ARRIVAL_COUNT) ? arrival_names[a] : NULL;
}
fth_serve_arrival fth_serve_arrival_parse(const char *name) {
  return (fth_serve_arrival)parse_name(name, arrival_names, FTH_ARRIVAL_COUNT);
}
const char *fth_serve_dist_name(fth_serve_dist_kind k) {
  return (k >= 0 && k < FTH_LEN_COUNT) ? dist_names[k] : NULL;
}
fth_serve_dist_kind fth_serve_dist_parse(const char *name) {
  return (fth_serve_dist_kind)parse_name(name, dist_names, FTH_LEN_COUNT);
}
const char *fth_serve_policy_name(fth_serve_policy p) {
  return (p >= 0 && p < FTH_POLICY_COUNT) ? policy_names[p] : NULL;
}
fth_serve_policy fth_serve_policy_parse(const char *name) {
  return (fth_serve_policy)parse_name(name, policy_names, FTH_POLICY_COUNT);
}
const char *fth_serve_routing_name(fth_serve_routing r) {
  return (r >= 0 && r < FTH_ROUTE_COUNT) ? routing_names[r] : NULL;
}
fth_serve_routing fth_serve_routing_parse(const char *name) {
  return (fth_serve_routing)parse_name(name, routing_names, FTH_ROUTE_COUNT);
}

static fth_serve_dist fixed_len(double n) {
  fth_serve_dist d;
  memset(&d, 0, sizeof d);
  d.kind = FTH_LEN_FIXED;
  d.mean = n;
  d.min = 1;
  return d;
}

fth_serve_def fth_serve_def_default(void) {
  fth_serve_def d;
  memset(&d, 0, sizeof d);
  d.requests = 1000;
  d.seed = 1;
  d.arrival = FTH_ARRIVAL_POISSON;
  d.rate_per_s = 1.0;
  d.burstiness = 1.0;
  d.concurrency = 1;
  d.input = fixed_len(512);
  d.output = fixed_len(128);
  d.policy = FTH_POLICY_CONTINUOUS;
  d.max_batch = 256;
  d.max_batch_tokens = 8192;
  d.block_tokens = 16;
  d.watermark = 0.01;
  d.replicas = 1;
  d.routing = FTH_ROUTE_ROUND_ROBIN;
  d.gpus_per_replica = 1;
  return d;
}

/* Token counts live in int32 fields. */
#define MAX_TOKENS 1073741824.0

static fth_status check_dist(const fth_serve_dist *d, const char *what, fth_error *err) {
  char path[64];
#define FAIL(field, ...)                                                                           \
  (snprintf(path, sizeof path, "%s.%s", what, field), fth_fail(err, FTH_EINVAL, path, __VA_ARGS__))
  if (d->kind < 0 || d->kind >= FTH_LEN_COUNT)
    return FAIL("kind", "unknown distribution %d", d->kind);
  if (!(d->min >= 1 && d->min <= MAX_TOKENS))
    return FAIL("min", "expected a number in [1, 2^30], got %g", d->min);
  if (!(d->max == 0 || (d->max >= d->min && d->max <= MAX_TOKENS)))
    return FAIL("max", "expected 0 (none) or a number in [min = %g, 2^30], got %g", d->min, d->max);
  switch (d->kind) {
  case FTH_LEN_FIXED:
  case FTH_LEN_NORMAL:
  case FTH_LEN_LOGNORMAL:
    if (!(d->mean >= 1 && d->mean <= MAX_TOKENS))
      return FAIL("mean", "expected a number of tokens in [1, 2^30], got %g", d->mean);
    if (d->kind == FTH_LEN_NORMAL && !(d->sigma >= 0 && d->sigma <= MAX_TOKENS))
      return FAIL("sigma", "expected a standard deviation in [0, 2^30] tokens, got %g", d->sigma);
    if (d->kind == FTH_LEN_LOGNORMAL && !(d->sigma >= 0 && d->sigma <= 10))
      return FAIL("sigma", "expected the log's standard deviation in [0, 10], got %g", d->sigma);
    break;
  case FTH_LEN_UNIFORM:
  case FTH_LEN_ZIPF:
    if (d->max == 0) return FAIL("max", "%s lengths need an upper bound", dist_names[d->kind]);
    if (d->kind == FTH_LEN_ZIPF && !(d->s > 0 && d->s <= 10))
      return FAIL("s", "expected an exponent in (0, 10], got %g", d->s);
    break;
  default:
    break;
  }
#undef FAIL
  return FTH_OK;
}

static fth_status check_trace(const fth_serve_def *d, fth_error *err) {
  char path[64];
  double last = 0;
  for (int64_t i = 0; d->trace != NULL && i < d->requests; i++) {
    const fth_serve_trace_row *t = &d->trace[i];
    const double len[2] = {t->input, t->output};
    static const char *const field[2] = {"input", "output"};
    if (!(t->arrival_s >= last && isfinite(t->arrival_s))) {
      snprintf(path, sizeof path, "trace[%lld].arrival_s", (long long)i);
      return fth_fail(err, FTH_EINVAL, path,
                      "expected a time >= %g s (the rows in arrival order), got %g", last,
                      t->arrival_s);
    }
    last = t->arrival_s;
    if (t->client < 0) {
      snprintf(path, sizeof path, "trace[%lld].client", (long long)i);
      return fth_fail(err, FTH_EINVAL, path, "expected a client index >= 0, got %d", t->client);
    }
    for (int k = 0; k < 2; k++) {
      if (!(len[k] >= 1 && len[k] <= MAX_TOKENS && len[k] == floor(len[k]))) {
        snprintf(path, sizeof path, "trace[%lld].%s", (long long)i, field[k]);
        return fth_fail(err, FTH_EINVAL, path, "expected tokens, an integer in [1, 2^30], got %g",
                        len[k]);
      }
    }
  }
  return FTH_OK;
}

fth_status fth_serve_check(const fth_serve_def *d, fth_error *err) {
  fth_error_clear(err);
  if (d->requests < 1 || d->requests > 100000000)
    return fth_fail(err, FTH_EINVAL, "requests", "expected an integer in [1, 1e8], got %lld",
                    (long long)d->requests);
  if (d->arrival < 0 || d->arrival >= FTH_ARRIVAL_COUNT)
    return fth_fail(err, FTH_EINVAL, "arrival", "unknown arrival process %d", d->arrival);
  if (d->arrival == FTH_ARRIVAL_CLOSED) {
    if (d->concurrency < 1 || d->concurrency > 100000000)
      return fth_fail(err, FTH_EINVAL, "concurrency", "expected an integer in [1, 1e8], got %lld",
                      (long long)d->concurrency);
    if (!(d->think_s >= 0 && isfinite(d->think_s)))
      return fth_fail(err, FTH_EINVAL, "think_s", "expected seconds >= 0, got %g", d->think_s);
  } else if (!fth_positive(d->rate_per_s)) {
    return fth_fail(err, FTH_EINVAL, "rate_per_s", "expected a rate > 0 requests/s, got %g",
                    d->rate_per_s);
  }
  if (d->arrival == FTH_ARRIVAL_GAMMA && !(d->burstiness >= 0.01 && d->burstiness <= 100))
    return fth_fail(err, FTH_EINVAL, "burstiness",
                    "expected a coefficient of variation in [0.01, 100], got %g", d->burstiness);
  if (check_dist(&d->input, "input", err) != FTH_OK) return err->status;
  if (check_dist(&d->output, "output", err) != FTH_OK) return err->status;
  if (d->policy < 0 || d->policy >= FTH_POLICY_COUNT)
    return fth_fail(err, FTH_EINVAL, "policy", "unknown batching policy %d", d->policy);
  if (d->max_batch < 1 || d->max_batch > FTH_SERVE_MAX_BATCH)
    return fth_fail(err, FTH_EINVAL, "max_batch", "expected an integer in [1, %d], got %d",
                    FTH_SERVE_MAX_BATCH, d->max_batch);
  if (!(d->max_batch_tokens >= 1 && d->max_batch_tokens <= MAX_TOKENS))
    return fth_fail(err, FTH_EINVAL, "max_batch_tokens", "expected tokens in [1, 2^30], got %g",
                    d->max_batch_tokens);
  if (!(d->block_tokens >= 1 && d->block_tokens <= 65536 &&
        d->block_tokens == floor(d->block_tokens)))
    return fth_fail(err, FTH_EINVAL, "block_tokens", "expected an integer in [1, 65536], got %g",
                    d->block_tokens);
  if (!(d->kv_window_tokens >= 0 && isfinite(d->kv_window_tokens)))
    return fth_fail(err, FTH_EINVAL, "kv_window_tokens", "expected tokens >= 0, got %g",
                    d->kv_window_tokens);
  if (!(d->kv_windowed_share >= 0 && d->kv_windowed_share <= 1))
    return fth_fail(err, FTH_EINVAL, "kv_windowed_share", "expected a share in [0, 1], got %g",
                    d->kv_windowed_share);
  if (!(d->kv_capacity_tokens >= d->block_tokens && isfinite(d->kv_capacity_tokens)))
    return fth_fail(err, FTH_EINVAL, "kv_capacity_tokens",
                    "expected at least one page (%g tokens), got %g: the weights leave no room "
                    "for a KV cache",
                    d->block_tokens, d->kv_capacity_tokens);
  if (!(d->swap_bw_bytes_per_s >= 0 && isfinite(d->swap_bw_bytes_per_s)))
    return fth_fail(err, FTH_EINVAL, "swap_bw_bytes_per_s", "expected bytes/s >= 0, got %g",
                    d->swap_bw_bytes_per_s);
  if (d->swap_bw_bytes_per_s > 0 && !(d->kv_transfer_bytes_per_token > 0 &&
                                      isfinite(d->kv_transfer_bytes_per_token)))
    return fth_fail(err, FTH_EINVAL, "kv_transfer_bytes_per_token",
                    "swapping to host needs the KV bytes per token, got %g",
                    d->kv_transfer_bytes_per_token);
  if (!(d->watermark >= 0 && d->watermark < 1))
    return fth_fail(err, FTH_EINVAL, "watermark", "expected a share in [0, 1), got %g",
                    d->watermark);
  if (d->replicas < 1 || d->replicas > FTH_SERVE_MAX_REPLICAS)
    return fth_fail(err, FTH_EINVAL, "replicas", "expected an integer in [1, %d], got %d",
                    FTH_SERVE_MAX_REPLICAS, d->replicas);
  if (d->dp_attention < 0 || (d->dp_attention > 1 && d->replicas % d->dp_attention != 0))
    return fth_fail(err, FTH_EINVAL, "dp_attention",
                    "expected ranks per engine that divide the %d replicas, got %d", d->replicas,
                    d->dp_attention);
  if (d->spec_tokens < 0 || d->spec_tokens > FTH_SERVE_MAX_SPEC)
    return fth_fail(err, FTH_EINVAL, "spec_tokens", "expected draft tokens in [0, %d], got %d",
                    FTH_SERVE_MAX_SPEC, d->spec_tokens);
  if (!(d->spec_acceptance >= 0 && d->spec_acceptance <= 1))
    return fth_fail(err, FTH_EINVAL, "spec_acceptance", "expected a probability in [0, 1], got %g",
                    d->spec_acceptance);
  if (d->spec_tokens > 0 && d->policy == FTH_POLICY_STATIC)
    return fth_fail(err, FTH_ENOTSUP, "policy",
                    "speculative decoding with static batching is not modelled: use continuous, "
                    "chunked or inflight");
  if (d->dp_attention > 1 && d->policy == FTH_POLICY_STATIC)
    return fth_fail(err, FTH_ENOTSUP, "policy",
                    "static batching with attention DP is not modelled: use continuous or chunked");
  if (d->routing < 0 || d->routing >= FTH_ROUTE_COUNT)
    return fth_fail(err, FTH_EINVAL, "routing", "unknown routing %d", d->routing);
  if (!fth_positive(d->gpus_per_replica))
    return fth_fail(err, FTH_EINVAL, "gpus_per_replica", "expected a number > 0, got %g",
                    d->gpus_per_replica);
  if (!(d->slo_ttft_s >= 0 && isfinite(d->slo_ttft_s)))
    return fth_fail(err, FTH_EINVAL, "slo_ttft_s", "expected seconds >= 0, got %g", d->slo_ttft_s);
  if (!(d->slo_tpot_s >= 0 && isfinite(d->slo_tpot_s)))
    return fth_fail(err, FTH_EINVAL, "slo_tpot_s", "expected seconds >= 0, got %g", d->slo_tpot_s);
  if (d->retrieval_servers < 0 || d->retrieval_servers > 1000000)
    return fth_fail(err, FTH_EINVAL, "retrieval_servers", "expected an integer in [0, 1e6], got %d",
                    d->retrieval_servers);
  if (d->retrieval_servers > 0 && !(d->retrieval_s >= 0 && isfinite(d->retrieval_s)))
    return fth_fail(err, FTH_EINVAL, "retrieval_s", "expected seconds >= 0, got %g",
                    d->retrieval_s);
  if (!(d->retrieval_tokens >= 0 && d->retrieval_tokens <= MAX_TOKENS &&
        d->retrieval_tokens == floor(d->retrieval_tokens)))
    return fth_fail(err, FTH_EINVAL, "retrieval_tokens", "expected an integer in [0, 2^30], got %g",
                    d->retrieval_tokens);
  if (!(d->thinking_tokens >= 0 && d->thinking_tokens <= MAX_TOKENS &&
        d->thinking_tokens == floor(d->thinking_tokens)))
    return fth_fail(err, FTH_EINVAL, "thinking_tokens", "expected an integer in [0, 2^30], got %g",
                    d->thinking_tokens);
  if (!(d->kv_fetch_share >= 0 && d->kv_fetch_share < 1))
    return fth_fail(err, FTH_EINVAL, "kv_fetch_share", "expected a share in [0, 1), got %g",
                    d->kv_fetch_share);
  if (d->kv_fetch_share > 0) {
    if (!fth_positive(d->kv_fetch_bw_bytes_per_s))
      return fth_fail(err, FTH_EINVAL, "kv_fetch_bw_bytes_per_s", "expected bytes/s > 0, got %g",
                      d->kv_fetch_bw_bytes_per_s);
    if (!(d->kv_fetch_latency_s >= 0 && isfinite(d->kv_fetch_latency_s)))
      return fth_fail(err, FTH_EINVAL, "kv_fetch_latency_s", "expected seconds >= 0, got %g",
                      d->kv_fetch_latency_s);
    if (!(d->kv_transfer_bytes_per_token > 0 && isfinite(d->kv_transfer_bytes_per_token)))
      return fth_fail(err, FTH_EINVAL, "kv_transfer_bytes_per_token",
                      "a KV fetch needs the KV bytes per token, got %g",
                      d->kv_transfer_bytes_per_token);
  }
  if (!(d->prefix_hit_ratio >= 0 && d->prefix_hit_ratio < 1))
    return fth_fail(err, FTH_EINVAL, "prefix_hit_ratio", "expected a share in [0, 1), got %g",
                    d->prefix_hit_ratio);
  if (d->prefill_replicas < 0 || d->prefill_replicas > FTH_SERVE_MAX_REPLICAS)
    return fth_fail(err, FTH_EINVAL, "prefill_replicas", "expected an integer in [0, %d], got %d",
                    FTH_SERVE_MAX_REPLICAS, d->prefill_replicas);
  if (d->prefill_replicas > 0) {
    if (d->policy == FTH_POLICY_STATIC)
      return fth_fail(err, FTH_ENOTSUP, "policy",
                      "static batching runs prefill and decode together: not disaggregated");
    if (d->prefill_kv_capacity_tokens != 0 && !(d->prefill_kv_capacity_tokens >= d->block_tokens &&
                                                isfinite(d->prefill_kv_capacity_tokens)))
      return fth_fail(err, FTH_EINVAL, "prefill_kv_capacity_tokens",
                      "expected at least one page (%g tokens), got %g", d->block_tokens,
                      d->prefill_kv_capacity_tokens);
    if (!(d->prefill_gpus_per_replica >= 0 && isfinite(d->prefill_gpus_per_replica)))
      return fth_fail(err, FTH_EINVAL, "prefill_gpus_per_replica", "expected a number >= 0, got %g",
                      d->prefill_gpus_per_replica);
    if (!(d->kv_transfer_bytes_per_token >= 0 && isfinite(d->kv_transfer_bytes_per_token)))
      return fth_fail(err, FTH_EINVAL, "kv_transfer_bytes_per_token", "expected bytes >= 0, got %g",
                      d->kv_transfer_bytes_per_token);
    if (!fth_positive(d->kv_link_bw_bytes_per_s))
      return fth_fail(err, FTH_EINVAL, "kv_link_bw_bytes_per_s", "expected bytes/s > 0, got %g",
                      d->kv_link_bw_bytes_per_s);
    if (!(d->kv_link_latency_s >= 0 && isfinite(d->kv_link_latency_s)))
      return fth_fail(err, FTH_EINVAL, "kv_link_latency_s", "expected seconds >= 0, got %g",
                      d->kv_link_latency_s);
  }
  return check_trace(d, err);
}

/* ---- random numbers (the core's generator, fth_rng.h) ------------------------------------- */

/* Uniform in (0, 1]: safe under log. */
static double rng_open(fth_rng *r) {
  return 1.0 - fth_rng_unit(r);
}

/* Standard normal, Box-Muller (one of the pair; the other is dropped so each
 * draw consumes exactly two numbers). */
static double rng_normal(fth_rng *r) {
  double u = rng_open(r), v = fth_rng_unit(r);
  return sqrt(-2.0 * log(u)) * cos(2.0 * 3.14159265358979323846 * v);
}

/* Gamma(k, 1), Marsaglia & Tsang 2000; k < 1 through Gamma(k + 1) U^(1/k). */
static double rng_gamma(fth_rng *r, double k) {
  double boost = 1.0;
  if (k < 1.0) {
    boost = pow(rng_open(r), 1.0 / k);
    k += 1.0;
  }
  double d = k - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
  for (;;) {
    double z = rng_normal(r), v = 1.0 + c * z;
    if (v <= 0) continue;
    v = v * v * v;
    if (log(rng_open(r)) < 0.5 * z * z + d - d * v + d * log(v)) return d * v * boost;
  }
}

static double clamp_len(const fth_serve_dist *d, double x) {
  x = floor(x + 0.5);
  if (x < d->min) x = d->min;
  if (d->max > 0 && x > d->max) x = d->max;
  if (x > MAX_TOKENS) x = MAX_TOKENS;
  return x;
}

static int32_t draw_len(const fth_serve_dist *d, fth_rng *r) {
  double x = d->mean;
  switch (d->kind) {
  case FTH_LEN_FIXED:
    break;
  case FTH_LEN_UNIFORM:
    x = d->min + floor(fth_rng_unit(r) * (d->max - d->min + 1.0));
    break;
  case FTH_LEN_NORMAL:
    x = d->mean + d->sigma * rng_normal(r);
    break;
  case FTH_LEN_LOGNORMAL:
    /* The distribution's mean is `mean`: mu = ln(mean) - sigma^2 / 2. */
    x = exp(log(d->mean) - 0.5 * d->sigma * d->sigma + d->sigma * rng_normal(r));
    break;
  case FTH_LEN_ZIPF: {
    /* Inverse CDF of the continuous power law x^-s on [min, max + 1),
     * floored: a discrete Zipf to within the floor (Clauset et al. 2009,
     * Sec. D, the usual approximation). */
    double a = d->min, b = d->max + 1.0, u = fth_rng_unit(r);
    if (fabs(d->s - 1.0) < 1e-12) {
      x = a * pow(b / a, u);
    } else {
      double e = 1.0 - d->s, pa = pow(a, e);
      x = pow(pa + u * (pow(b, e) - pa), 1.0 / e);
    }
    x = floor(x);
    if (x > d->max) x = d->max;
    return (int32_t)x;
  }
  default:
    break;
  }
  return (int32_t)clamp_len(d, x);
}

/* ---- the simulation ------------------------------------------------------------------------ */

enum { ST_NEW = 0, ST_WAITING = 1, ST_RUNNING = 2, ST_DONE = 3, ST_TRANSFER = 4 };

typedef struct replica {
  double busy_until;
  int32_t busy;
  int32_t head, tail; /* waiting queue, linked through fth_serve_request.next */
  int32_t nrun;
  int32_t free_blocks, peak_used;
  int32_t total_blocks, wm_blocks;
  int32_t prefill;              /* 1: a prefill replica of a disaggregated deployment */
  int32_t xfer_head, xfer_tail; /* KV transfers on its link, in order of arrival */
  double link_free_s;
  double swap_s; /* host copies (swap out and in) its next iteration waits for */
  int64_t outstanding;
  int32_t *run; /* running requests in admission order, max_batch of them */
  fth_serve_cost_fn cost;
  const void *cost_ctx;
} replica;

typedef struct sim {
  const fth_serve_def *d;
  fth_serve_request *req;
  replica *rep;
  fth_infer_chunk *chunks;
  int32_t nrep; /* decode (or aggregated) replicas, then prefill replicas */
  double *ring; /* retrieval servers' free times, in the order they serve */
  double fetch_free_s;
  double now;
  int64_t completed, issued, next_arrival, rr, rr_prefill;
  int64_t in_system;
  double area, busy_s, batch_requests, batch_tokens;
  int64_t preemptions, iterations;
  fth_infer_batch batch;
  fth_rng spec; /* speculative decoding's acceptances */
} sim;

static size_t align8(size_t n) {
  return (n + 7u) & ~(size_t)7u;
}

/* Workspace: requests | replicas | running lists | chunk scratch | values to sort. */
size_t fth_serve_workspace_bytes(const fth_serve_def *d) {
  if (d->requests < 1 || d->requests > 100000000 || d->replicas < 1 ||
      d->replicas > FTH_SERVE_MAX_REPLICAS || d->max_batch < 1 ||
      d->max_batch > FTH_SERVE_MAX_BATCH)
    return 0;
  if (d->prefill_replicas < 0 || d->prefill_replicas > FTH_SERVE_MAX_REPLICAS) return 0;
  size_t n = (size_t)d->requests, r = (size_t)d->replicas + (size_t)d->prefill_replicas;
  size_t b = (size_t)d->max_batch;
  return align8(n * sizeof(fth_serve_request)) + align8(r * sizeof(replica)) +
         align8(r * b * sizeof(int32_t)) + align8(b * sizeof(fth_infer_chunk)) +
         align8(n * sizeof(double));
}

const fth_serve_request *fth_serve_requests(const void *ws) {
  return (const fth_serve_request *)ws;
}

/* Pages for `tokens` tokens of one request: windowed layers keep only their window
 * (fth_window_kept_tokens; vLLM's hybrid KV manager), counted in full-layer tokens. */
static int32_t blocks_for(const sim *s, double tokens) {
  double kept = fth_window_kept_tokens(tokens, s->d->kv_window_tokens, s->d->kv_windowed_share);
  return (int32_t)ceil(kept / s->d->block_tokens);
}

static void push_back(sim *s, replica *r, int32_t i) {
  s->req[i].next = -1;
  if (r->tail >= 0)
    s->req[r->tail].next = i;
  else
    r->head = i;
  r->tail = i;
}

static void push_front(sim *s, replica *r, int32_t i) {
  s->req[i].next = r->head;
  r->head = i;
  if (r->tail < 0) r->tail = i;
}

static int32_t pop_front(sim *s, replica *r) {
  int32_t i = r->head;
  r->head = s->req[i].next;
  if (r->head < 0) r->tail = -1;
  s->req[i].next = -1;
  return i;
}

/* Make `q` hold the pages for `tokens`; 0 when there are not enough free. */
static int grow(sim *s, replica *r, fth_serve_request *q, double tokens) {
  int32_t need = blocks_for(s, tokens) - q->blocks;
  if (need <= 0) return 1;
  if (need > r->free_blocks) return 0;
  r->free_blocks -= need;
  q->blocks += need;
  int32_t used = r->total_blocks - r->free_blocks;
  if (used > r->peak_used) r->peak_used = used;
  return 1;
}

static void release(replica *r, fth_serve_request *q) {
  r->free_blocks += q->blocks;
  q->blocks = 0;
}

/* Seconds to copy `tokens` tokens' KV between the replica and host memory. */
static double swap_time(const sim *s, double tokens) {
  return tokens * s->d->kv_transfer_bytes_per_token / s->d->swap_bw_bytes_per_s;
}

/* Preemption by recompute (vLLM): the request gives back its pages and goes
 * to the front of the queue; its prompt and the tokens it generated are
 * prefilled again, which yields its next token. By swap: its pages are copied
 * to host memory first and it keeps its context. */
static void preempt_last(sim *s, replica *r) {
  int32_t i = r->run[--r->nrun];
  fth_serve_request *q = &s->req[i];
  release(r, q);
  if (s->d->swap_bw_bytes_per_s > 0 && q->ctx > 0) {
    r->swap_s += swap_time(s, q->ctx);
    q->swapped = 1;
  } else {
    q->ctx = q->cached; /* the shared prompt prefix stays in the prefix cache */
    q->target = q->input + q->generated;
  }
  q->sched = 0;
  q->state = ST_WAITING;
  q->preemptions++;
  s->preemptions++;
  push_front(s, r, i);
}

/* Pages for `q` (the k-th running request) to hold `tokens`, preempting the
 * latest admitted requests until they fit; 0 when `q` itself was preempted. */
static int make_room(sim *s, replica *r, int32_t k, double tokens) {
  fth_serve_request *q = &s->req[r->run[k]];
  while (!grow(s, r, q, tokens)) {
    int last = r->nrun - 1 == k;
    preempt_last(s, r);
    if (last) return 0;
  }
  return 1;
}

static void add_chunk(sim *s, fth_serve_request *q, int32_t tokens) {
  q->sched = tokens;
  fth_infer_chunk *c = &s->chunks[s->batch.num_chunks++];
  c->new_tokens = tokens;
  c->context = q->ctx;
}

static void add_decode(sim *s, fth_serve_request *q, int scheduled) {
  q->sched = scheduled;
  s->batch.decode_requests += 1.0;
  s->batch.decode_context_sum += q->ctx + 1.0; /* the cached tokens and the new one */
}

/* Admission control: the pages a new request needs, leaving the watermark
 * free unless the replica runs nothing (it always fits alone). */
static int admissible(const sim *s, const replica *r, int32_t need) {
  if (need > r->free_blocks) return 0;
  (void)s;
  return r->nrun == 0 || r->free_blocks - need >= r->wm_blocks;
}

static void admit(sim *s, replica *r, int32_t i) {
  fth_serve_request *q = &s->req[i];
  if (q->swapped) { /* its KV comes back from host memory before it runs */
    r->swap_s += swap_time(s, q->ctx);
    q->swapped = 0;
  }
  q->state = ST_RUNNING;
  if (q->admit_s < 0) q->admit_s = s->now;
  r->run[r->nrun++] = i;
}

static void schedule_decodes(sim *s, replica *r) {
  for (int32_t k = 0; k < r->nrun; k++) {
    fth_serve_request *q = &s->req[r->run[k]];
    if (q->ctx < q->target) continue; /* a prompt still being prefilled */
    /* the step writes the KV of its token and of the drafts it verifies */
    if (!make_room(s, r, k, q->ctx + 1.0 + s->d->spec_tokens)) break;
    add_decode(s, q, 1);
  }
}

/* Requests whose KV came from a prefill replica: admitted straight to decoding. */
static void admit_ready(sim *s, replica *r) {
  while (r->head >= 0 && r->nrun < s->d->max_batch) {
    fth_serve_request *q = &s->req[r->head];
    if (q->ctx < q->target || q->ctx == 0) return;
    if (!admissible(s, r, blocks_for(s, q->ctx + 1.0))) return;
    admit(s, r, pop_front(s, r));
    grow(s, r, q, q->ctx + 1.0);
  }
}

static void schedule_continuous(sim *s, replica *r) {
  double tokens = 0;
  admit_ready(s, r);
  while (r->head >= 0 && r->nrun < s->d->max_batch) {
    fth_serve_request *q = &s->req[r->head];
    if (q->ctx >= q->target) break; /* decode-ready (swapped back): admit_ready's */
    int32_t c = q->target - q->ctx; /* the prompt less its cached prefix */
    if (s->batch.num_chunks > 0 && tokens + c > s->d->max_batch_tokens) break;
    if (!admissible(s, r, blocks_for(s, q->target))) break;
    admit(s, r, pop_front(s, r));
    grow(s, r, q, q->target);
    add_chunk(s, q, c);
    tokens += c;
  }
  if (s->batch.num_chunks > 0) return; /* prefill first: the decodes wait */
  schedule_decodes(s, r);
}

static void schedule_chunked(sim *s, replica *r) {
  admit_ready(s, r);
  schedule_decodes(s, r);
  double budget = s->d->max_batch_tokens - s->batch.decode_requests;
  for (int32_t k = 0; k < r->nrun && budget >= 1; k++) {
    fth_serve_request *q = &s->req[r->run[k]];
    if (q->ctx >= q->target || q->sched > 0) continue;
    int32_t c = (int32_t)fth_min(q->target - q->ctx, floor(budget));
    if (!make_room(s, r, k, (double)q->ctx + c)) break;
    add_chunk(s, q, c);
    budget -= c;
  }
  while (r->head >= 0 && r->nrun < s->d->max_batch && budget >= 1) {
    fth_serve_request *q = &s->req[r->head];
    if (q->ctx >= q->target) break; /* decode-ready (swapped back): admit_ready's */
    int32_t c = (int32_t)fth_min(q->target - q->ctx, floor(budget));
    if (!admissible(s, r, blocks_for(s, (double)q->ctx + c))) break;
    admit(s, r, pop_front(s, r));
    grow(s, r, q, (double)q->ctx + c);
    add_chunk(s, q, c);
    budget -= c;
  }
}

/* Whole prompts piggy-backed on the decodes while they fit the token budget;
 * the iteration's first prompt is admitted even over the budget, so that a
 * long prompt is not starved by a full batch of decodes. */
static void schedule_inflight(sim *s, replica *r) {
  admit_ready(s, r);
  schedule_decodes(s, r);
  double budget = s->d->max_batch_tokens - s->batch.decode_requests;
  while (r->head >= 0 && r->nrun < s->d->max_batch) {
    fth_serve_request *q = &s->req[r->head];
    if (q->ctx >= q->target) break; /* decode-ready (swapped back): admit_ready's */
    int32_t c = q->target - q->ctx;
    if (c > budget && s->batch.num_chunks > 0) break;
    if (!admissible(s, r, blocks_for(s, q->target))) break;
    admit(s, r, pop_front(s, r));
    grow(s, r, q, q->target);
    add_chunk(s, q, c);
    budget -= c;
  }
}

static void schedule_static(sim *s, replica *r) {
  if (r->nrun == 0) {
    /* A new batch: every request reserves pages for its whole length. */
    while (r->head >= 0 && r->nrun < s->d->max_batch) {
      fth_serve_request *q = &s->req[r->head];
      double whole = (double)q->input + q->output;
      if (blocks_for(s, whole) > r->free_blocks) break;
      admit(s, r, pop_front(s, r));
      grow(s, r, q, whole);
      add_chunk(s, q, q->target - q->ctx);
    }
    return;
  }
  for (int32_t k = 0; k < r->nrun; k++) {
    fth_serve_request *q = &s->req[r->run[k]];
    add_decode(s, q, q->state == ST_DONE ? 0 : 1); /* finished requests pad the batch */
  }
}

/* Schedule replica r's next batch and cost it: *dt = 0 when it has nothing to run. */
static fth_status plan_iteration(sim *s, replica *r, double *dt, fth_error *err) {
  s->batch.decode_requests = 0;
  s->batch.decode_context_sum = 0;
  s->batch.num_chunks = 0;
  switch (s->d->policy) {
  case FTH_POLICY_CHUNKED:
    schedule_chunked(s, r);
    break;
  case FTH_POLICY_STATIC:
    schedule_static(s, r);
    break;
  case FTH_POLICY_INFLIGHT:
    schedule_inflight(s, r);
    break;
  default:
    schedule_continuous(s, r);
    break;
  }
  *dt = 0;
  if (s->batch.decode_requests == 0 && s->batch.num_chunks == 0) return FTH_OK; /* idle */
  *dt = r->cost(r->cost_ctx, &s->batch);
  if (!(*dt > 0 && isfinite(*dt)))
    return fth_fail(err, FTH_ERANGE, "cost",
                    "an iteration of %g decodes and %d prompt chunks "
                    "costs %g s: expected a positive finite time",
                    s->batch.decode_requests, s->batch.num_chunks, *dt);
  *dt += r->swap_s;
  r->swap_s = 0;
  double tokens = s->batch.decode_requests;
  for (int i = 0; i < s->batch.num_chunks; i++) tokens += s->chunks[i].new_tokens;
  s->iterations++;
  s->batch_requests += s->batch.decode_requests + s->batch.num_chunks;
  s->batch_tokens += tokens;
  return FTH_OK;
}

static fth_status start_iteration(sim *s, replica *r, fth_error *err) {
  double dt;
  if (plan_iteration(s, r, &dt, err) != FTH_OK) return err->status;
  if (dt == 0) return FTH_OK;
  r->busy = 1;
  r->busy_until = s->now + dt;
  s->busy_s += dt;
  return FTH_OK;
}

/* Replica r's scheduled batch, rebuilt from its running requests' `sched`
 * (prompt chunks, then decodes) into s->batch; returns its tokens. */
static double scheduled_batch(sim *s, const replica *r) {
  s->batch.decode_requests = 0;
  s->batch.decode_context_sum = 0;
  s->batch.num_chunks = 0;
  double tokens = 0;
  for (int32_t k = 0; k < r->nrun; k++) {
    fth_serve_request *q = &s->req[r->run[k]];
    if (q->sched == 0) continue;
    int32_t c = q->sched;
    if (q->ctx < q->target)
      add_chunk(s, q, c);
    else
      add_decode(s, q, c);
    tokens += c;
  }
  return tokens;
}

/* The DP ranks [lo, lo + n) of an attention-data-parallel engine, all free:
 * each schedules its own batch; each is costed with the routed experts at the
 * engine's mean tokens per rank (fth_infer_batch.engine_tokens); the engine's
 * iteration is the slowest rank's, and every rank (an idle one too) is held
 * for it (fth_serve_def.dp_attention). */
static fth_status start_engine(sim *s, int32_t lo, int32_t n, fth_error *err) {
  double sum = 0, worst = 0;
  for (int32_t k = lo; k < lo + n; k++) {
    s->batch.num_chunks = 0;
    s->batch.decode_requests = 0;
    if (s->d->policy == FTH_POLICY_CHUNKED)
      schedule_chunked(s, &s->rep[k]);
    else if (s->d->policy == FTH_POLICY_INFLIGHT)
      schedule_inflight(s, &s->rep[k]);
    else
      schedule_continuous(s, &s->rep[k]);
    sum += scheduled_batch(s, &s->rep[k]);
  }
  for (int32_t k = lo; k < lo + n && sum > 0; k++) {
    double tokens = scheduled_batch(s, &s->rep[k]);
    if (tokens == 0) continue;
    s->batch.engine_tokens = sum / n;
    double dt = s->rep[k].cost(s->rep[k].cost_ctx, &s->batch);
    s->batch.engine_tokens = 0;
    if (!(dt > 0 && isfinite(dt)))
      return fth_fail(err, FTH_ERANGE, "cost",
                      "an iteration of %g decodes and %d prompt chunks "
                      "costs %g s: expected a positive finite time",
                      s->batch.decode_requests, s->batch.num_chunks, dt);
    dt += s->rep[k].swap_s;
    s->rep[k].swap_s = 0;
    s->iterations++;
    s->batch_requests += s->batch.decode_requests + s->batch.num_chunks;
    s->batch_tokens += tokens;
    worst = fth_max(worst, dt);
  }
  if (worst == 0) return FTH_OK; /* nothing anywhere: the engine idles */
  for (int32_t k = lo; k < lo + n; k++) {
    s->rep[k].busy = 1;
    s->rep[k].busy_until = s->now + worst;
  }
  s->busy_s += worst * n;
  return FTH_OK;
}

/* Queue request i on a replica of [lo, lo + n): round-robin by `rr`, or the
 * least outstanding. */
static void route_to(sim *s, int32_t i, int32_t lo, int32_t n, int64_t *rr) {
  int32_t best = lo;
  if (s->d->routing == FTH_ROUTE_LEAST_OUTSTANDING) {
    for (int32_t k = lo + 1; k < lo + n; k++)
      if (s->rep[k].outstanding < s->rep[best].outstanding) best = k;
  } else {
    best = lo + (int32_t)((*rr)++ % n);
  }
  fth_serve_request *q = &s->req[i];
  q->replica = best;
  q->state = ST_WAITING;
  s->rep[best].outstanding++;
  push_back(s, &s->rep[best], i);
}

/* An arrival: to the prefill pool when there is one. */
static void route(sim *s, int32_t i) {
  const fth_serve_def *d = s->d;
  s->in_system++;
  if (d->prefill_replicas > 0)
    route_to(s, i, d->replicas, d->prefill_replicas, &s->rr_prefill);
  else
    route_to(s, i, 0, d->replicas, &s->rr);
}

/* A prefill replica hands request q over: its pages are freed and its KV
 * queues on the replica's link (transfers one after another, each taking
 * latency + bytes / bandwidth). */
static void hand_over(sim *s, replica *r, int32_t i) {
  const fth_serve_def *d = s->d;
  fth_serve_request *q = &s->req[i];
  release(r, q);
  r->outstanding--;
  q->state = ST_TRANSFER;
  double start = fth_max(s->now, r->link_free_s);
  r->link_free_s = start + q->ctx * d->kv_transfer_bytes_per_token / d->kv_link_bw_bytes_per_s;
  q->kv_ready_s = r->link_free_s + d->kv_link_latency_s;
  q->next = -1;
  if (r->xfer_tail >= 0)
    s->req[r->xfer_tail].next = i;
  else
    r->xfer_head = i;
  r->xfer_tail = i;
}

/* KV transfers done by now reach the decode pool. */
static void deliver(sim *s) {
  for (int32_t k = 0; k < s->nrep; k++) {
    replica *r = &s->rep[k];
    while (r->xfer_head >= 0 && s->req[r->xfer_head].kv_ready_s <= s->now) {
      int32_t i = r->xfer_head;
      r->xfer_head = s->req[i].next;
      if (r->xfer_head < 0) r->xfer_tail = -1;
      route_to(s, i, 0, s->d->replicas, &s->rr);
    }
  }
}

/* The stages before the engine, crossed in arrival order (call in that order).
 * Retrieval: M identical servers, FIFO, fixed service time, so the server a
 * request gets is the one the request M places before it got (round robin):
 * done = max(arrival, done of request i - M) + service. KV fetch: one link,
 * FIFO: done = max(ready, link free) + latency + bytes / bandwidth. */
static void pre_stages(sim *s, int64_t i) {
  const fth_serve_def *d = s->d;
  fth_serve_request *q = &s->req[i];
  double t = q->arrival_s;
  if (d->retrieval_servers > 0) {
    double *slot = &s->ring[i % d->retrieval_servers];
    t = fth_max(t, *slot) + d->retrieval_s;
    *slot = t;
  }
  if (d->kv_fetch_share > 0 && q->cached > 0) {
    double start = fth_max(t, s->fetch_free_s);
    s->fetch_free_s =
        start + q->cached * d->kv_transfer_bytes_per_token / d->kv_fetch_bw_bytes_per_s;
    t = s->fetch_free_s + d->kv_fetch_latency_s;
  }
  q->ready_s = t;
}

static void issue_closed(sim *s) {
  if (s->issued >= s->d->requests) return;
  s->req[s->issued].arrival_s = s->now + s->d->think_s;
  pre_stages(s, s->issued++);
}

static void produce(sim *s, replica *r, fth_serve_request *q) {
  q->generated++;
  if (q->first_token_s < 0) q->first_token_s = s->now;
  if (q->generated < q->output) return;
  q->done_s = s->now;
  q->state = ST_DONE;
  s->completed++;
  s->in_system--;
  r->outstanding--;
  if (s->d->arrival == FTH_ARRIVAL_CLOSED) issue_closed(s);
}

/* Tokens a decode step emits: its own and the drafts accepted before the
 * first rejection (fth_serve_def.spec_tokens), at most what is left to say. */
static int32_t step_tokens(sim *s, const fth_serve_request *q) {
  int32_t n = 1;
  for (int j = 0; j < s->d->spec_tokens && fth_rng_unit(&s->spec) < s->d->spec_acceptance; j++)
    n++;
  int32_t left = q->output - q->generated;
  return n < left ? n : left;
}

static void finish_iteration(sim *s, replica *r) {
  r->busy = 0;
  for (int32_t k = 0; k < r->nrun; k++) {
    fth_serve_request *q = &s->req[r->run[k]];
    if (q->sched == 0) continue;
    if (q->ctx < q->target) {
      q->ctx += q->sched;
      if (q->ctx >= q->target) produce(s, r, q);
    } else if (s->d->spec_tokens > 0) {
      int32_t n = step_tokens(s, q);
      q->ctx += n;
      for (int32_t j = 0; j < n; j++) produce(s, r, q);
    } else {
      q->ctx += 1;
      produce(s, r, q);
    }
    q->sched = 0;
  }
  if (s->d->policy == FTH_POLICY_STATIC) {
    for (int32_t k = 0; k < r->nrun; k++)
      if (s->req[r->run[k]].state != ST_DONE) return;
    for (int32_t k = 0; k < r->nrun; k++) release(r, &s->req[r->run[k]]);
    r->nrun = 0;
    return;
  }
  int32_t m = 0;
  for (int32_t k = 0; k < r->nrun; k++) {
    fth_serve_request *q = &s->req[r->run[k]];
    if (q->state == ST_DONE)
      release(r, q);
    else if (r->prefill && q->ctx >= q->target)
      hand_over(s, r, r->run[k]); /* its first token is out: decode elsewhere */
    else
      r->run[m++] = r->run[k];
  }
  r->nrun = m;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double fth_serve_percentile(const double *v, int64_t n, double p) {
  if (n <= 0) return 0.0;
  double pos = p * (double)(n - 1);
  int64_t i = (int64_t)floor(pos);
  if (i >= n - 1) return v[n - 1];
  double f = pos - (double)i;
  return v[i] + f * (v[i + 1] - v[i]);
}

static void stats(double *v, int64_t n, fth_serve_stats *st) {
  memset(st, 0, sizeof *st);
  st->count = n;
  if (n == 0) return;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  double sum = 0;
  for (int64_t i = 0; i < n; i++) sum += v[i];
  st->mean = sum / (double)n;
  st->p50 = fth_serve_percentile(v, n, 0.50);
  st->p90 = fth_serve_percentile(v, n, 0.90);
  st->p95 = fth_serve_percentile(v, n, 0.95);
  st->p99 = fth_serve_percentile(v, n, 0.99);
  st->max = v[n - 1];
}

enum { M_TTFT, M_TPOT, M_E2E, M_QUEUE };

/* Request i's metric into v (client < 0: every request's, else that client's). */
static int64_t metric(const fth_serve_def *d, const fth_serve_request *req, int32_t client,
                      int which, double *v) {
  int64_t n = 0;
  for (int64_t i = 0; i < d->requests; i++) {
    const fth_serve_request *q = &req[i];
    if (client >= 0 && q->client != client) continue;
    switch (which) {
    case M_TTFT:
      v[n++] = q->first_token_s - q->arrival_s;
      break;
    case M_TPOT:
      if (q->output > 1) v[n++] = (q->done_s - q->first_token_s) / (q->output - 1);
      break;
    case M_E2E:
      v[n++] = q->done_s - q->arrival_s;
      break;
    default:
      v[n++] = q->admit_s - q->ready_s; /* the engine's queue, stages before it aside */
      break;
    }
  }
  return n;
}

/* The request-level metrics of `client`'s requests (< 0: all) against SLOs
 * (0 = no bound); sorts in v. */
static void summarise_requests(const fth_serve_def *d, const fth_serve_request *req, double *v,
                               int32_t client, double slo_ttft_s, double slo_tpot_s,
                               fth_serve_result *o) {
  double first = HUGE_VAL, last = 0, in_tok = 0, out_tok = 0;
  int64_t good = 0, n = 0, done = 0, preempt = 0;
  for (int64_t i = 0; i < d->requests; i++) {
    const fth_serve_request *q = &req[i];
    if (client >= 0 && q->client != client) continue;
    n++;
    done += q->state == ST_DONE;
    preempt += q->preemptions;
    first = fth_min(first, q->arrival_s);
    last = fth_max(last, q->done_s);
    in_tok += q->input;
    out_tok += q->output;
    double tpot = q->output > 1 ? (q->done_s - q->first_token_s) / (q->output - 1) : 0.0;
    int ok = (slo_ttft_s <= 0 || q->first_token_s - q->arrival_s <= slo_ttft_s) &&
             (slo_tpot_s <= 0 || tpot <= slo_tpot_s);
    good += ok;
  }
  if (n == 0) return;
  double dur = last - first;
  o->requests_completed = done;
  o->duration_s = dur;
  o->preemptions = preempt;
  if (dur > 0) {
    o->requests_per_s = (double)done / dur;
    o->input_tokens_per_s = in_tok / dur;
    o->output_tokens_per_s = out_tok / dur;
    double pg = d->prefill_gpus_per_replica > 0 ? d->prefill_gpus_per_replica : d->gpus_per_replica;
    o->output_tokens_per_s_per_gpu =
        o->output_tokens_per_s / (d->replicas * d->gpus_per_replica + d->prefill_replicas * pg);
    o->goodput_requests_per_s = (double)good / dur;
  }
  o->slo_attainment = (double)good / (double)n;
  stats(v, metric(d, req, client, M_TTFT, v), &o->ttft_s);
  stats(v, metric(d, req, client, M_TPOT, v), &o->tpot_s);
  stats(v, metric(d, req, client, M_E2E, v), &o->e2e_s);
  stats(v, metric(d, req, client, M_QUEUE, v), &o->queue_s);
}

static void summarise(sim *s, double *v, fth_serve_result *o) {
  const fth_serve_def *d = s->d;
  summarise_requests(d, s->req, v, -1, d->slo_ttft_s, d->slo_tpot_s, o);
  if (o->duration_s > 0) {
    o->busy_fraction = s->busy_s / (s->nrep * o->duration_s);
    o->mean_in_system = s->area / o->duration_s;
  }
  /* The decode (or only) pool's cache: where requests live longest. */
  for (int32_t k = 0; k < d->replicas; k++)
    o->kv_peak_fraction =
        fth_max(o->kv_peak_fraction, (double)s->rep[k].peak_used / s->rep[k].total_blocks);
  o->kv_capacity_tokens = s->rep[0].total_blocks * d->block_tokens;
  o->preemptions = s->preemptions;
  o->iterations = s->iterations;
  if (s->iterations > 0) {
    o->mean_batch_requests = s->batch_requests / (double)s->iterations;
    o->mean_batch_tokens = s->batch_tokens / (double)s->iterations;
  }
}

/* The streams of one seed: arrivals, prompt and output lengths. */
typedef struct draws {
  fth_rng ra, ri, ro;
  double t, k; /* the last arrival; gamma's shape */
} draws;

static void draws_seed(draws *w, const fth_serve_def *d) {
  fth_rng_seed(&w->ra, d->seed);
  fth_rng_seed(&w->ri, d->seed ^ 0x5851F42D4C957F2Dull);
  fth_rng_seed(&w->ro, d->seed ^ 0x14057B7EF767814Full);
  w->t = 0;
  w->k = 1.0 / (d->burstiness * d->burstiness);
}

/* Request i's arrival (open loop: the first at 0, then the gaps; closed: the
 * first `concurrency` at 0, the others when a reply frees a user). */
static double draw_arrival(draws *w, const fth_serve_def *d, int64_t i) {
  switch (d->arrival) {
  case FTH_ARRIVAL_CLOSED:
    return i < d->concurrency ? 0.0 : HUGE_VAL;
  case FTH_ARRIVAL_FIXED:
    return (double)i / d->rate_per_s;
  case FTH_ARRIVAL_GAMMA:
    if (i > 0) w->t += rng_gamma(&w->ra, w->k) / (w->k * d->rate_per_s);
    return w->t;
  default:
    if (i > 0) w->t += -log(rng_open(&w->ra)) / d->rate_per_s;
    return w->t;
  }
}

fth_status fth_serve_draw(const fth_serve_def *d, fth_serve_trace_row *rows, fth_error *err) {
  if (fth_serve_check(d, err) != FTH_OK) return err->status;
  if (d->arrival == FTH_ARRIVAL_CLOSED)
    return fth_fail(err, FTH_ENOTSUP, "arrival",
                    "a closed loop's arrivals depend on the replies: draw an open-loop stream");
  draws w;
  draws_seed(&w, d);
  for (int64_t i = 0; i < d->requests; i++) {
    const fth_serve_trace_row *row = d->trace ? &d->trace[i] : NULL;
    rows[i].input = row ? row->input : draw_len(&d->input, &w.ri);
    rows[i].output = row ? row->output : draw_len(&d->output, &w.ro);
    rows[i].arrival_s = row ? row->arrival_s : draw_arrival(&w, d, i);
    rows[i].client = 0;
  }
  return FTH_OK;
}

/* Arrival times and lengths, each from its own stream so that changing one
 * distribution leaves the others' draws as they were. */
static fth_status draw_requests(sim *s, fth_error *err) {
  const fth_serve_def *d = s->d;
  draws w;
  draws_seed(&w, d);
  for (int64_t i = 0; i < d->requests; i++) {
    fth_serve_request *q = &s->req[i];
    memset(q, 0, sizeof *q);
    q->admit_s = q->first_token_s = q->done_s = q->kv_ready_s = -1;
    q->next = -1;
    const fth_serve_trace_row *row = d->trace ? &d->trace[i] : NULL;
    q->input = row ? (int32_t)row->input : draw_len(&d->input, &w.ri);
    q->output = row ? (int32_t)row->output : draw_len(&d->output, &w.ro);
    q->client = row ? row->client : 0;
    q->input = (int32_t)fmin(MAX_TOKENS, q->input + d->retrieval_tokens);
    q->output = (int32_t)fmin(MAX_TOKENS, q->output + d->thinking_tokens);
    q->target = q->input;
    /* Prefix caching (vLLM automatic prefix caching, SGLang RadixAttention): the
     * hit share of the prompt is found cached, and only the rest is computed. */
    /* KV fetched from a remote tier stands in for the computed prefix the same way. */
    double hit = fth_max(d->prefix_hit_ratio, d->kv_fetch_share);
    q->cached = (int32_t)fmin(floor(hit * q->input), q->input - 1.0);
    q->ctx = q->cached;
    const replica *dec = &s->rep[0], *pre = &s->rep[s->nrep - 1];
    if (blocks_for(s, (double)q->input + q->output) > dec->total_blocks)
      return fth_fail(err, FTH_EINVAL, "kv_capacity_tokens",
                      "request %lld needs %d prompt + %d output tokens of KV cache, a replica "
                      "holds %g: bound the lengths or add memory",
                      (long long)i, q->input, q->output, dec->total_blocks * d->block_tokens);
    if (d->prefill_replicas > 0 && blocks_for(s, q->input) > pre->total_blocks)
      return fth_fail(err, FTH_EINVAL, "prefill_kv_capacity_tokens",
                      "request %lld's %d prompt tokens do not fit a prefill replica's KV cache "
                      "(%g tokens)",
                      (long long)i, q->input, pre->total_blocks * d->block_tokens);
    if (row && d->arrival != FTH_ARRIVAL_CLOSED) {
      q->arrival_s = row->arrival_s;
      continue;
    }
    q->arrival_s = draw_arrival(&w, d, i);
  }
  s->issued = d->arrival == FTH_ARRIVAL_CLOSED
                  ? (d->concurrency < d->requests ? d->concurrency : d->requests)
                  : d->requests;
  for (int64_t i = 0; i < s->issued; i++) pre_stages(s, i);
  return FTH_OK;
}

fth_status fth_serve_run(const fth_serve_def *d, fth_serve_cost_fn cost, const void *cost_ctx,
                         void *ws, size_t ws_bytes, fth_serve_result *out, fth_error *err) {
  memset(out, 0, sizeof *out);
  if (fth_serve_check(d, err) != FTH_OK) return err->status;
  if (cost == NULL) return fth_fail(err, FTH_EINVAL, "cost", "expected a cost function");
  size_t need = fth_serve_workspace_bytes(d);
  if (ws == NULL || ws_bytes < need)
    return fth_fail(err, FTH_EINVAL, "workspace", "expected %zu bytes, got %zu", need, ws_bytes);
  sim s;
  memset(&s, 0, sizeof s);
  s.d = d;
  size_t n = (size_t)d->requests, nr = (size_t)d->replicas + (size_t)d->prefill_replicas;
  size_t b = (size_t)d->max_batch;
  s.nrep = (int32_t)nr;
  char *p = (char *)ws;
  s.req = (fth_serve_request *)p;
  p += align8(n * sizeof(fth_serve_request));
  s.rep = (replica *)p;
  p += align8(nr * sizeof(replica));
  int32_t *runs = (int32_t *)p;
  p += align8(nr * b * sizeof(int32_t));
  s.chunks = (fth_infer_chunk *)p;
  p += align8(b * sizeof(fth_infer_chunk));
  double *values = (double *)p;
  /* The retrieval ring lives in `values` until the summary needs it: request i
   * uses slot i mod M, below min(M, requests). */
  memset(values, 0, n * sizeof(double));
  s.ring = values;
  s.batch.chunks = s.chunks;
  s.batch.spec_tokens = d->spec_tokens;
  fth_rng_seed(&s.spec, d->seed ^ 0x2545F4914F6CDD1Dull);
  for (size_t k = 0; k < nr; k++) {
    replica *r = &s.rep[k];
    memset(r, 0, sizeof *r);
    r->prefill = k >= (size_t)d->replicas;
    double cap = r->prefill && d->prefill_kv_capacity_tokens > 0 ? d->prefill_kv_capacity_tokens
                                                                 : d->kv_capacity_tokens;
    double blocks = floor(cap / d->block_tokens);
    r->total_blocks = blocks > 2147483647.0 ? 2147483647 : (int32_t)blocks;
    r->wm_blocks = (int32_t)ceil(d->watermark * r->total_blocks);
    r->free_blocks = r->total_blocks;
    r->head = r->tail = r->xfer_head = r->xfer_tail = -1;
    r->run = runs + k * b;
    r->cost = r->prefill && d->prefill_cost ? d->prefill_cost : cost;
    r->cost_ctx = r->prefill && d->prefill_cost ? d->prefill_cost_ctx : cost_ctx;
  }
  if (draw_requests(&s, err) != FTH_OK) return err->status;
  while (s.completed < d->requests) {
    double ta = s.next_arrival < s.issued ? s.req[s.next_arrival].ready_s : HUGE_VAL;
    double t = ta;
    for (size_t k = 0; k < nr; k++) {
      const replica *r = &s.rep[k];
      if (r->busy && r->busy_until < t) t = r->busy_until;
      if (r->xfer_head >= 0 && s.req[r->xfer_head].kv_ready_s < t)
        t = s.req[r->xfer_head].kv_ready_s;
    }
    if (t == HUGE_VAL) /* cannot happen: every request fits a replica alone */
      return fth_fail(err, FTH_ERANGE, "requests", "the simulation stalled with %lld of %lld done",
                      (long long)s.completed, (long long)d->requests);
    s.area += (double)s.in_system * (t - s.now);
    s.now = t;
    for (size_t k = 0; k < nr; k++)
      if (s.rep[k].busy && s.rep[k].busy_until == t) finish_iteration(&s, &s.rep[k]);
    deliver(&s);
    while (s.next_arrival < s.issued && s.req[s.next_arrival].ready_s <= s.now)
      route(&s, (int32_t)s.next_arrival++);
    int32_t g = d->dp_attention > 1 ? d->dp_attention : 1, k = 0;
    for (; g > 1 && k < d->replicas; k += g) {
      int free = 1;
      for (int32_t j = k; j < k + g; j++) free &= !s.rep[j].busy;
      if (free && start_engine(&s, k, g, err) != FTH_OK) return err->status;
    }
    for (; k < (int32_t)nr; k++)
      if (!s.rep[k].busy && start_iteration(&s, &s.rep[k], err) != FTH_OK) return err->status;
  }
  summarise(&s, values, out);
  return FTH_OK;
}

double fth_serve_plan_cost(const void *ctx, const fth_infer_batch *b) {
  const fth_infer_plan *p = (const fth_infer_plan *)ctx;
  fth_phase ph;
  double stage = fth_infer_iteration_mixed(p, b, &ph, NULL);
  const fth_layout *l = &p->layout;
  if (l->pp <= 1) return stage;
  double tokens = b->decode_requests;
  for (int i = 0; i < b->num_chunks; i++) tokens += b->chunks[i].new_tokens;
  return l->pp * stage + (l->pp - 1) * fth_infer_pp_hop_s(p, tokens);
}

/* The scratch of values to sort: the workspace's last region (fth_serve_workspace_bytes). */
void fth_serve_client_result(const fth_serve_def *d, void *ws, int32_t client, double slo_ttft_s,
                             double slo_tpot_s, fth_serve_result *out) {
  memset(out, 0, sizeof *out);
  size_t n = (size_t)d->requests, nr = (size_t)d->replicas + (size_t)d->prefill_replicas;
  size_t b = (size_t)d->max_batch;
  char *p = (char *)ws;
  p += align8(n * sizeof(fth_serve_request)) + align8(nr * sizeof(replica)) +
       align8(nr * b * sizeof(int32_t)) + align8(b * sizeof(fth_infer_chunk));
  summarise_requests(d, (const fth_serve_request *)ws, (double *)p, client, slo_ttft_s,
                     slo_tpot_s, out);
}

double fth_serve_spec_tokens_per_step(int k, double a) {
  if (k <= 0) return 1.0;
  if (a >= 1.0) return k + 1.0;
  return (1.0 - pow(a, k + 1.0)) / (1.0 - a);
}

double fth_serve_draft_cost(const void *ctx, const fth_infer_batch *b) {
  const fth_serve_draft_engine *e = (const fth_serve_draft_engine *)ctx;
  fth_infer_batch t = *b;
  t.spec_external = 1;
  double s = e->target(e->target_ctx, &t);
  fth_infer_batch d = *b; /* the draft's first pass: the chunks and the decodes */
  d.spec_tokens = 0;
  d.spec_external = 0;
  if (b->spec_tokens <= 0) d.decode_requests = d.decode_context_sum = 0;
  if (d.decode_requests > 0 || d.num_chunks > 0) s += e->draft(e->draft_ctx, &d);
  if (b->spec_tokens > 1 && b->decode_requests > 0) { /* then the decodes' other drafts */
    d.num_chunks = 0;
    s += (b->spec_tokens - 1) * e->draft(e->draft_ctx, &d);
  }
  return s;
}
