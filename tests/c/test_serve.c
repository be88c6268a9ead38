/* Serving: the mixed-batch iteration cost (fth_infer_iteration_mixed) on the
 * toy GPU and model of test_infer.c (100 TFLOP/s bf16, efficiency 1; h 1024,
 * 4 layers, 16 heads of 64, plain MLP f 4096, V 32000, one GPU), and the
 * discrete-event simulator (fth_serve) under costs simple enough to follow by
 * hand: an iteration of T tokens takes A + B T seconds. */
#include "fth_block.h"
#include "fth_serve.h"
#include "test_fixtures.h"
#include "test_macros.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static fth_node_def toy_node(double hbm_bw) {
  fth_node_def n = fth_node_def_default();
  n.compute.flops_per_s[FTH_PREC_BF16] = 100e12;
  n.compute.efficiency = 1.0;
  n.tier[FTH_TIER_XPU].bw_per_stack_bytes_per_s = hbm_bw;
  n.tier[FTH_TIER_XPU].size_per_stack_bytes = 80e9;
  n.tier[FTH_TIER_XPU].num_stacks = 1;
  n.tier[FTH_TIER_XPU].efficiency = 1.0;
  n.has_tier[FTH_TIER_XPU] = 1;
  return n;
}

/* The toy's decode plan on a GPU with `hbm_bw` of bandwidth; `layers` 0: the model's own. */
static int toy_plan_layers(fth_infer_plan *p, double hbm_bw, int layers) {
  fth_node_def n = toy_node(hbm_bw);
  fth_topology_def t = tfx_one_gpu();
  fth_model_def m = tfx_infer_model();
  if (layers > 0) m.n_layers = layers;
  fth_infer_def d = fth_infer_def_default();
  d.context_len = 1023;
  d.gen_tokens = 1;
  fth_error err;
  FTH_ENSURE(fth_infer_compile(p, &n, &t, &m, &d, FTH_PASS_DECODE, &err) == FTH_OK);
  return 0;
}

static int toy_plan(fth_infer_plan *p, double hbm_bw) {
  return toy_plan_layers(p, hbm_bw, 0);
}

static int mixed_iteration(void) {
  fth_infer_plan p;
  FTH_RUN(toy_plan(&p, 1e12));
  fth_phase a, b;
  /* Equal decodes are fth_infer_iteration's uniform batch; so are equal chunks. */
  fth_infer_batch dec = {4, 4 * 1024.0, NULL, 0, 0, 0, 0};
  FTH_ENSURE_NEAR(fth_infer_iteration(&p, 4, 1, 1024, &a, NULL),
                  fth_infer_iteration_mixed(&p, &dec, &b, NULL), 1e-12);
  /* One decode at 1024: 183,341,568 B at 1 TB/s (test_infer.c derives it). */
  dec.decode_requests = 1;
  dec.decode_context_sum = 1024;
  FTH_ENSURE_NEAR(183341568.0 / 1e12, fth_infer_iteration_mixed(&p, &dec, &b, NULL), 1e-12);
  fth_infer_chunk ch[2] = {{256, 512}, {256, 512}};
  fth_infer_batch chunks = {0, 0, ch, 2, 0, 0, 0};
  FTH_ENSURE_NEAR(fth_infer_iteration(&p, 2, 256, 512, &a, NULL),
                  fth_infer_iteration_mixed(&p, &chunks, &b, NULL), 1e-12);
  /* Decode cost is linear in the context: two decodes at 512 and 1536 cost
   * two at 1024. */
  fth_infer_batch two = {2, 512 + 1536.0, NULL, 0, 0, 0, 0};
  FTH_ENSURE_NEAR(fth_infer_iteration(&p, 2, 1, 1024, &a, NULL),
                  fth_infer_iteration_mixed(&p, &two, &b, NULL), 1e-12);
  fth_infer_batch empty = {0, 0, NULL, 0, 0, 0, 0};
  FTH_ENSURE(fth_infer_iteration_mixed(&p, &empty, &b, NULL) == 0.0);

  /* A mixed batch on a compute-bound GPU (memory effectively free): a 1024-
   * token prompt chunk at context 0 and one decode attending to 1024 tokens,
   * T = 1025 tokens. Matrix FLOPs per layer: linears 2 T (4 h^2 + 2 h f) =
   * 2 x 1025 x 12,582,912 = 25,794,969,600; the chunk's causal attention 2 x
   * 1024 x 512.5 x 128 x 16 = 2,149,580,800; the decode's 2 x 16 x 1024 x
   * 128 = 4,194,304: 27,948,744,704, x 4 layers = 111,794,978,816; the LM
   * head for 2 rows 2 x 2 x 1024 x 32000 = 131,072,000: 111,926,050,816 at
   * 100 TFLOP/s = 1.11926050816 ms. Vector: 1025 x (1024 x 5 x 5 x 2 + 4096
   * x 8) = 86,067,200 FLOPs per layer, 344,268,800 at 12.5 TFLOP/s =
   * 27.541504 us. */
  fth_infer_plan fast;
  FTH_RUN(toy_plan(&fast, 1e18));
  fth_infer_chunk prompt = {1024, 0};
  fth_infer_batch mix = {1, 1024, &prompt, 1, 0, 0, 0};
  FTH_ENSURE_NEAR(1.11926050816e-3 + 27.541504e-6, fth_infer_iteration_mixed(&fast, &mix, &b, NULL),
                  1e-6);
  return 0;
}

static int kv_capacity(void) {
  fth_infer_plan p;
  FTH_RUN(toy_plan(&p, 1e12));
  double cap = fth_infer_kv_capacity_tokens(&p);
  /* The decode plan's largest batch (1024 tokens per request, micro-batch 1)
   * comes from the same room: floor(tokens / 1024) requests. */
  fth_infer_result r;
  fth_infer_evaluate(&p, &r);
  FTH_ENSURE_EQ_INT(floor(cap / 1024.0), r.max_global_batch);
  /* One token's KV: 2 x 1024 elements x 4 layers x 2 B = 16,384 B; 80 GB
   * less weights and reserve leave a few million tokens. */
  FTH_ENSURE(cap > 4.0e6 && cap < 80e9 / 16384.0);
  return 0;
}

/* ---- the simulator under an affine cost --------------------------------------------------- */

typedef struct affine {
  double a_s, b_s; /* A + B tokens */
} affine;

static double affine_cost(const void *ctx, const fth_infer_batch *b) {
  const affine *c = (const affine *)ctx;
  double tokens = b->decode_requests * (1.0 + b->spec_tokens); /* drafts verified too */
  for (int i = 0; i < b->num_chunks; i++) tokens += b->chunks[i].new_tokens;
  return c->a_s + c->b_s * tokens;
}

static double const_cost(const void *ctx, const fth_infer_batch *b) {
  (void)b;
  return *(const double *)ctx;
}

static void *ws_for(const fth_serve_def *d) {
  return malloc(fth_serve_workspace_bytes(d));
}

static fth_serve_def base_def(void) {
  fth_serve_def d = fth_serve_def_default();
  d.kv_capacity_tokens = 1e6;
  d.watermark = 0;
  return d;
}

/* base_def with one request of `input` prompt and `output` output tokens (their means). */
static fth_serve_def one_request(double input, double output) {
  fth_serve_def d = base_def();
  d.requests = 1;
  d.input.mean = input;
  d.output.mean = output;
  return d;
}

/* base_def with `n` requests at once (a closed loop of n clients), each of `input` prompt and
 * `output` output tokens (their means). */
static fth_serve_def closed_batch(int n, double input, double output) {
  fth_serve_def d = one_request(input, output);
  d.requests = n;
  d.arrival = FTH_ARRIVAL_CLOSED;
  d.concurrency = n;
  return d;
}

static int run(const fth_serve_def *d, fth_serve_cost_fn f, const void *c, void *ws,
               fth_serve_result *r) {
  fth_error err;
  fth_status st = fth_serve_run(d, f, c, ws, fth_serve_workspace_bytes(d), r, &err);
  if (st != FTH_OK) fprintf(stderr, "fth_serve_run: %s: %s\n", err.path, err.msg);
  FTH_ENSURE(st == FTH_OK);
  return 0;
}

static int single_request(void) {
  /* One request of 100 prompt and 11 output tokens alone: the prefill
   * iteration (100 tokens: 10 ms + 10 ms) gives the first token, ten decode
   * iterations (10.1 ms each) the rest. */
  affine c = {0.010, 0.0001};
  fth_serve_def d = one_request(100, 11);
  void *ws = ws_for(&d);
  fth_serve_result r;
  FTH_RUN(run(&d, affine_cost, &c, ws, &r));
  FTH_ENSURE_EQ_INT(1, r.requests_completed);
  FTH_ENSURE_NEAR(0.020, r.ttft_s.mean, 1e-12);
  FTH_ENSURE_NEAR(0.0101, r.tpot_s.mean, 1e-12);
  FTH_ENSURE_NEAR(0.020 + 10 * 0.0101, r.e2e_s.p99, 1e-12);
  FTH_ENSURE(r.queue_s.max == 0.0);
  FTH_ENSURE_EQ_INT(11, r.iterations);
  free(ws);

  /* The same request costed by the toy plan: TTFT is the prefill iteration
   * of 100 tokens, TPOT the mean of the ten decode steps at 101..110 tokens. */
  fth_infer_plan p;
  FTH_RUN(toy_plan(&p, 1e12));
  d.kv_capacity_tokens = fth_infer_kv_capacity_tokens(&p);
  ws = ws_for(&d);
  FTH_RUN(run(&d, fth_serve_plan_cost, &p, ws, &r));
  fth_phase ph;
  double ttft = fth_infer_iteration(&p, 1, 100, 0, &ph, NULL), dec = 0;
  for (int c2 = 101; c2 <= 110; c2++) dec += fth_infer_iteration(&p, 1, 1, c2, &ph, NULL);
  FTH_ENSURE_NEAR(ttft, r.ttft_s.mean, 1e-12);
  FTH_ENSURE_NEAR(dec / 10, r.tpot_s.mean, 1e-12);
  FTH_ENSURE_NEAR(ttft + dec, r.e2e_s.mean, 1e-12);
  free(ws);
  return 0;
}

static int fixed_rate_no_queueing(void) {
  /* One request per second, each done in 0.121 s: nobody waits, every TTFT
   * is the lone prefill, throughput is the rate (99 gaps over 99.121 s). */
  affine c = {0.010, 0.0001};
  fth_serve_def d = base_def();
  d.requests = 100;
  d.arrival = FTH_ARRIVAL_FIXED;
  d.rate_per_s = 1.0;
  d.input.mean = 100;
  d.output.mean = 11;
  void *ws = ws_for(&d);
  fth_serve_result r;
  FTH_RUN(run(&d, affine_cost, &c, ws, &r));
  FTH_ENSURE(r.queue_s.max == 0.0);
  FTH_ENSURE_NEAR(0.020, r.ttft_s.p99, 1e-12);
  FTH_ENSURE_NEAR(0.020, r.ttft_s.max, 1e-12);
  FTH_ENSURE_NEAR(99.121, r.duration_s, 1e-12);
  FTH_ENSURE_NEAR(100 / 99.121, r.requests_per_s, 1e-12);
  FTH_ENSURE_NEAR(1100 / 99.121, r.output_tokens_per_s, 1e-12);
  FTH_ENSURE_NEAR(1.0, r.slo_attainment, 1e-12);
  free(ws);
  return 0;
}

static int md1_queue(void) {
  /* M/D/1: Poisson arrivals at rate 0.5/s, one request at a time (max batch
   * 1, one output token: the prefill is the whole service), service D = 1 s:
   * Pollaczek-Khinchine gives the mean wait rho D / (2 (1 - rho)) = 0.5 s
   * (Kleinrock 1975, Sec. 5.7), the mean time in system 1.5 s. 200,000
   * requests put the sample mean within about 1%. */
  double service = 1.0;
  fth_serve_def d = base_def();
  d.requests = 200000;
  d.rate_per_s = 0.5;
  d.max_batch = 1;
  d.output.mean = 1;
  d.seed = 7;
  void *ws = ws_for(&d);
  fth_serve_result r;
  FTH_RUN(run(&d, const_cost, &service, ws, &r));
  FTH_ENSURE_NEAR(0.5, r.queue_s.mean, 0.03);
  FTH_ENSURE_NEAR(1.5, r.e2e_s.mean, 0.01);
  FTH_ENSURE_NEAR(0.5, r.busy_fraction, 0.01);
  /* Little's law: the time-average in the system is the throughput times
   * the mean time in system (integrated event by event, not derived). */
  FTH_ENSURE_NEAR(r.requests_per_s * r.e2e_s.mean, r.mean_in_system, 0.01);
  /* Burstier arrivals (gamma gaps, CV 3) wait longer: Kingman's G/G/1
   * approximation scales the wait by (ca^2 + cs^2) / (1 + cs^2) = 9 over the
   * Poisson case's, about 4.5 s; it errs low for gaps this variable (the
   * simulation gives ~6.9 s), so the check is a band around it. */
  d.arrival = FTH_ARRIVAL_GAMMA;
  d.burstiness = 3.0;
  FTH_RUN(run(&d, const_cost, &service, ws, &r));
  FTH_ENSURE(r.queue_s.mean > 4.0 && r.queue_s.mean < 9.0);
  free(ws);
  return 0;
}

static int little_and_overload(void) {
  /* Little's law on a batching engine: chunked prefill, lognormal lengths. */
  affine c = {0.010, 0.0001};
  fth_serve_def d = base_def();
  d.requests = 5000;
  d.rate_per_s = 20;
  d.policy = FTH_POLICY_CHUNKED;
  d.max_batch_tokens = 512;
  d.input.kind = FTH_LEN_LOGNORMAL;
  d.input.mean = 300;
  d.input.sigma = 0.5;
  d.output.kind = FTH_LEN_UNIFORM;
  d.output.min = 10;
  d.output.max = 100;
  void *ws = ws_for(&d);
  fth_serve_result r;
  FTH_RUN(run(&d, affine_cost, &c, ws, &r));
  FTH_ENSURE_NEAR(r.requests_per_s * r.e2e_s.mean, r.mean_in_system, 0.01);
  FTH_ENSURE(r.mean_batch_tokens <= 512.0);
  /* Lengths: the lognormal's mean is 300 (sample mean of 5000 within 2%),
   * uniform outputs stay in [10, 100]. */
  const fth_serve_request *q = fth_serve_requests(ws);
  double in = 0;
  for (int i = 0; i < 5000; i++) {
    in += q[i].input;
    FTH_ENSURE(q[i].output >= 10 && q[i].output <= 100);
  }
  FTH_ENSURE_NEAR(300.0, in / 5000, 0.02);
  /* Past capacity the queue grows without bound: one request per 10 ms to a
   * replica that serves one at a time in 20 ms waits ever longer; twice the
   * requests, about twice the mean wait. */
  d.policy = FTH_POLICY_CONTINUOUS;
  d.max_batch = 1;
  d.arrival = FTH_ARRIVAL_FIXED;
  d.rate_per_s = 100;
  d.input.kind = FTH_LEN_FIXED;
  d.input.mean = 100;
  d.output = fth_serve_def_default().output;
  d.output.mean = 1;
  d.requests = 1000;
  FTH_RUN(run(&d, affine_cost, &c, ws, &r));
  double w1 = r.queue_s.mean;
  d.requests = 2000;
  FTH_RUN(run(&d, affine_cost, &c, ws, &r));
  /* request i waits i x (20 - 10) ms: means 10 ms x 999 / 2 and x 1999 / 2 */
  FTH_ENSURE_NEAR(4.995, w1, 1e-9);
  FTH_ENSURE_NEAR(9.995, r.queue_s.mean, 1e-9);
  free(ws);
  return 0;
}

static int preemption(void) {
  /* Four pages of 16 tokens; two requests of 16 prompt and 33 output tokens
   * at t = 0 (A = 10 ms, B = 0.1 ms). Prefill of both (32 tokens): 13.2 ms.
   * 16 decodes of both (10.2 ms each) bring each to 32 cached tokens in 2
   * pages each; the next decode of the first needs a third page: the second
   * (latest admitted, 17 tokens generated) is preempted. The first decodes
   * alone 16 times (10.1 ms) and is done at 13.2 + 163.2 + 161.6 = 338 ms.
   * The second then prefills its 16 + 17 = 33 tokens again (13.3 ms), which
   * gives its 18th token, and decodes 15 more: done at 338 + 13.3 + 151.5 =
   * 502.8 ms. */
  affine c = {0.010, 0.0001};
  fth_serve_def d = closed_batch(2, 16, 33);
  d.kv_capacity_tokens = 64;
  void *ws = ws_for(&d);
  fth_serve_result r;
  FTH_RUN(run(&d, affine_cost, &c, ws, &r));
  const fth_serve_request *q = fth_serve_requests(ws);
  FTH_ENSURE_EQ_INT(1, r.preemptions);
  FTH_ENSURE_EQ_INT(1, q[1].preemptions);
  FTH_ENSURE_NEAR(0.0132, q[1].first_token_s, 1e-12);
  FTH_ENSURE_NEAR(0.338, q[0].done_s, 1e-12);
  FTH_ENSURE_NEAR(0.5028, q[1].done_s, 1e-12);
  FTH_ENSURE_NEAR(1.0, r.kv_peak_fraction, 1e-12);
  /* The same two requests on a model whose every layer keeps a 16-token window: each
   * holds at most one page (fth_window_kept_tokens: min(49, 16) = 16 tokens), two pages
   * of the four in all, so nothing is preempted: both decode together, 32 more steps
   * after the prefill: 13.2 + 32 x 10.2 = 339.6 ms. */
  d.kv_window_tokens = 16;
  d.kv_windowed_share = 1.0;
  FTH_RUN(run(&d, affine_cost, &c, ws, &r));
  FTH_ENSURE_EQ_INT(0, r.preemptions);
  FTH_ENSURE_NEAR(0.3396, q[1].done_s, 1e-12);
  FTH_ENSURE_NEAR(0.5, r.kv_peak_fraction, 1e-12);
  d.kv_windowed_share = 1.5;
  fth_error werr;
  FTH_ENSURE(fth_serve_run(&d, affine_cost, &c, ws, fth_serve_workspace_bytes(&d), &r, &werr) ==
             FTH_EINVAL);
  FTH_ENSURE(strcmp(werr.path, "kv_windowed_share") == 0);
  d.kv_window_tokens = 0;
  d.kv_windowed_share = 0;
  /* A request that cannot fit a replica alone is refused. */
  d.output.mean = 100;
  fth_error err;
  FTH_ENSURE(fth_serve_run(&d, affine_cost, &c, ws, fth_serve_workspace_bytes(&d), &r, &err) ==
             FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "kv_capacity_tokens") == 0);
  free(ws);
  return 0;
}

static int chunked_and_static(void) {
  affine c = {0.010, 0.0001};
  fth_serve_def d = base_def();
  /* Chunked prefill: a 1000-token prompt under a 256-token budget runs as
   * chunks of 256, 256, 256 and 232: TTFT = 4 x 10 ms + 1000 x 0.1 ms. */
  d.requests = 1;
  d.policy = FTH_POLICY_CHUNKED;
  d.max_batch_tokens = 256;
  d.input.mean = 1000;
  d.output.mean = 2;
  void *ws = ws_for(&d);
  fth_serve_result r;
  FTH_RUN(run(&d, affine_cost, &c, ws, &r));
  FTH_ENSURE_NEAR(0.14, r.ttft_s.mean, 1e-12);
  FTH_ENSURE_EQ_INT(5, r.iterations);
  free(ws);
  /* Static batching, three requests at 0, 1 ms and 2 ms (10 prompt tokens;
   * 2 to 4 output tokens, the seed picked so the first draws 2 and the
   * second 4). */
  d = base_def();
  d.policy = FTH_POLICY_STATIC;
  d.requests = 3;
  d.arrival = FTH_ARRIVAL_FIXED;
  d.rate_per_s = 1000; /* at 0, 1 ms, 2 ms */
  d.input.mean = 10;
  d.output.kind = FTH_LEN_UNIFORM;
  d.output.min = 2;
  d.output.max = 4;
  ws = ws_for(&d);
  /* Fix the outputs by the seed: find one that draws 2, 4 for the first two. */
  const fth_serve_request *q = fth_serve_requests(ws);
  int found = 0;
  for (uint64_t seed = 1; seed < 200 && !found; seed++) {
    d.seed = seed;
    FTH_RUN(run(&d, affine_cost, &c, ws, &r));
    found = q[0].output == 2 && q[1].output == 4;
  }
  FTH_ENSURE(found);
  /* Request 0 alone arrives at 0 and is prefilled alone (10 tokens: 11 ms);
   * requests 1 (at 1 ms) and 2 (at 2 ms) wait for its batch to finish. */
  FTH_ENSURE_NEAR(0.011, q[0].first_token_s, 1e-12);
  FTH_ENSURE_NEAR(0.011 + 0.0101, q[0].done_s, 1e-12);
  FTH_ENSURE_NEAR(0.0211, q[1].admit_s, 1e-12);
  FTH_ENSURE_NEAR(0.0211, q[2].admit_s, 1e-12);
  /* 1 and 2 prefill together (20 tokens: 12 ms) and decode until 1's fourth
   * token: 3 x 10.2 ms, whatever 2's length. */
  FTH_ENSURE_NEAR(0.0211 + 0.012 + 3 * 0.0102, q[1].done_s, 1e-12);
  free(ws);
  return 0;
}

static int routing_and_determinism(void) {
  affine c = {0.010, 0.0001};
  fth_serve_def d = base_def();
  d.requests = 2000;
  d.rate_per_s = 50;
  d.replicas = 4;
  d.policy = FTH_POLICY_CHUNKED;
  d.input.kind = FTH_LEN_ZIPF;
  d.input.min = 16;
  d.input.max = 4096;
  d.input.s = 1.2;
  d.output.kind = FTH_LEN_NORMAL;
  d.output.mean = 64;
  d.output.sigma = 16;
  void *ws = ws_for(&d);
  fth_serve_result r1, r2;
  FTH_RUN(run(&d, affine_cost, &c, ws, &r1));
  const fth_serve_request *q = fth_serve_requests(ws);
  for (int i = 0; i < 8; i++) FTH_ENSURE_EQ_INT(i % 4, q[i].replica);
  for (int i = 0; i < 2000; i++) FTH_ENSURE(q[i].input >= 16 && q[i].input <= 4096);
  FTH_RUN(run(&d, affine_cost, &c, ws, &r2));
  FTH_ENSURE(memcmp(&r1, &r2, sizeof r1) == 0);
  d.seed = 2;
  FTH_RUN(run(&d, affine_cost, &c, ws, &r2));
  FTH_ENSURE(r1.e2e_s.mean != r2.e2e_s.mean);
  /* Least-outstanding routing balances no worse here than round-robin. */
  d.seed = 1;
  d.routing = FTH_ROUTE_LEAST_OUTSTANDING;
  FTH_RUN(run(&d, affine_cost, &c, ws, &r2));
  FTH_ENSURE(r2.e2e_s.p99 <= r1.e2e_s.p99 * 1.05);
  free(ws);
  return 0;
}

static int goodput_and_checks(void) {
  /* SLOs: a TTFT bound of 15 ms fails every request of single_request's
   * shape (TTFT 20 ms); 25 ms passes them all. */
  affine c = {0.010, 0.0001};
  fth_serve_def d = base_def();
  d.requests = 10;
  d.arrival = FTH_ARRIVAL_FIXED;
  d.input.mean = 100;
  d.output.mean = 11;
  d.slo_ttft_s = 0.015;
  void *ws = ws_for(&d);
  fth_serve_result r;
  FTH_RUN(run(&d, affine_cost, &c, ws, &r));
  FTH_ENSURE(r.slo_attainment == 0.0 && r.goodput_requests_per_s == 0.0);
  d.slo_ttft_s = 0.025;
  d.slo_tpot_s = 0.0102;
  FTH_RUN(run(&d, affine_cost, &c, ws, &r));
  FTH_ENSURE(r.slo_attainment == 1.0);
  FTH_ENSURE_NEAR(r.requests_per_s, r.goodput_requests_per_s, 1e-12);
  free(ws);
  /* Refusals name the field. */
  fth_error err;
  d = base_def();
  d.rate_per_s = -1;
  FTH_ENSURE(fth_serve_check(&d, &err) == FTH_EINVAL && strcmp(err.path, "rate_per_s") == 0);
  d = base_def();
  d.input.kind = FTH_LEN_UNIFORM;
  FTH_ENSURE(fth_serve_check(&d, &err) == FTH_EINVAL && strcmp(err.path, "input.max") == 0);
  d = base_def();
  d.kv_capacity_tokens = 0;
  FTH_ENSURE(fth_serve_check(&d, &err) == FTH_EINVAL &&
             strcmp(err.path, "kv_capacity_tokens") == 0);
  FTH_ENSURE(fth_serve_arrival_parse("gamma") == FTH_ARRIVAL_GAMMA);
  FTH_ENSURE(fth_serve_policy_parse("nope") == FTH_POLICY_COUNT);
  /* Percentiles interpolate between ranks: of 1..5, p90 = 4.6. */
  const double v[5] = {1, 2, 3, 4, 5};
  FTH_ENSURE_NEAR(4.6, fth_serve_percentile(v, 5, 0.9), 1e-12);
  FTH_ENSURE_NEAR(3.0, fth_serve_percentile(v, 5, 0.5), 1e-12);
  return 0;
}

static int trace_replay(void) {
  /* A replayed trace sets each request's arrival and lengths: the first
   * (100 + 11 tokens at 0.5 s) runs alone as single_request's (e2e 121 ms);
   * the second arrives at 2 s and has 50 prompt tokens and one output token:
   * done after its 15 ms prefill. */
  affine c = {0.010, 0.0001};
  const fth_serve_trace_row rows[2] = {{0.5, 100, 11, 0}, {2.0, 50, 1, 0}};
  fth_serve_def d = base_def();
  d.requests = 2;
  d.trace = rows;
  void *ws = ws_for(&d);
  fth_serve_result r;
  FTH_RUN(run(&d, affine_cost, &c, ws, &r));
  const fth_serve_request *q = fth_serve_requests(ws);
  FTH_ENSURE_NEAR(0.5 + 0.121, q[0].done_s, 1e-12);
  FTH_ENSURE_NEAR(2.015, q[1].done_s, 1e-12);
  FTH_ENSURE_NEAR(1.515, r.duration_s, 1e-12);
  free(ws);
  /* Rows out of order, or a length that is not a token count, are refused by row. */
  const fth_serve_trace_row bad[2] = {{1.0, 100, 11, 0}, {0.5, 50, 1, 0}};
  d.trace = bad;
  fth_error err;
  FTH_ENSURE(fth_serve_check(&d, &err) == FTH_EINVAL &&
             strcmp(err.path, "trace[1].arrival_s") == 0);
  const fth_serve_trace_row frac[1] = {{0, 10.5, 1, 0}};
  d.trace = frac;
  d.requests = 1;
  FTH_ENSURE(fth_serve_check(&d, &err) == FTH_EINVAL && strcmp(err.path, "trace[0].input") == 0);
  return 0;
}

static int disaggregated(void) {
  /* One prefill and one decode replica (A = 10 ms, B = 0.1 ms each), KV of
   * 1000 B per token over a 1 MB/s link with 5 ms latency. A request of 100
   * prompt and 11 output tokens: its first token after the 20 ms prefill,
   * its KV (100 kB) at the decode replica 100 + 5 ms later, then ten decodes
   * of 10.1 ms: done at 0.02 + 0.105 + 0.101 = 0.226 s. */
  affine c = {0.010, 0.0001};
  fth_serve_def d = one_request(100, 11);
  d.prefill_replicas = 1;
  d.kv_transfer_bytes_per_token = 1000;
  d.kv_link_bw_bytes_per_s = 1e6;
  d.kv_link_latency_s = 0.005;
  void *ws = ws_for(&d);
  fth_serve_result r;
  FTH_RUN(run(&d, affine_cost, &c, ws, &r));
  FTH_ENSURE_NEAR(0.020, r.ttft_s.mean, 1e-12);
  FTH_ENSURE_NEAR(0.226, r.e2e_s.mean, 1e-12);
  FTH_ENSURE_NEAR((0.226 - 0.020) / 10, r.tpot_s.mean, 1e-12);
  const fth_serve_request *q = fth_serve_requests(ws);
  FTH_ENSURE_NEAR(0.125, q[0].kv_ready_s, 1e-12);
  FTH_ENSURE_EQ_INT(0, q[0].replica); /* it ends on the decode replica */
  free(ws);
  /* Two at once: prefilled together (200 tokens: 30 ms), their transfers one
   * after the other on the link: ready at 0.03 + 0.1 + 0.005 = 0.135 s and
   * 0.03 + 0.2 + 0.005 = 0.235 s. The first decodes alone until 0.236 s; the
   * second, queued at 0.235 s, starts then: done at 0.337 s. */
  d.requests = 2;
  d.arrival = FTH_ARRIVAL_CLOSED;
  d.concurrency = 2;
  ws = ws_for(&d);
  FTH_RUN(run(&d, affine_cost, &c, ws, &r));
  q = fth_serve_requests(ws);
  FTH_ENSURE_NEAR(0.030, q[1].first_token_s, 1e-12);
  FTH_ENSURE_NEAR(0.235, q[1].kv_ready_s, 1e-12);
  FTH_ENSURE_NEAR(0.236, q[0].done_s, 1e-9);
  FTH_ENSURE_NEAR(0.337, q[1].done_s, 1e-9);
  /* Per GPU: two replicas of one GPU each share the output tokens. */
  FTH_ENSURE_NEAR(22 / 0.337 / 2, r.output_tokens_per_s_per_gpu, 1e-9);
  /* Static batching cannot be split into pools. */
  d.policy = FTH_POLICY_STATIC;
  fth_error err;
  FTH_ENSURE(fth_serve_check(&d, &err) == FTH_ENOTSUP && strcmp(err.path, "policy") == 0);
  free(ws);
  return 0;
}

static int prefix_cache(void) {
  /* Half of a 100-token prompt found in the prefix cache: the prefill
   * computes 50 tokens against 50 cached (10 ms + 5 ms), the KV holds all
   * 100 plus the decodes. */
  affine c = {0.010, 0.0001};
  fth_serve_def d = one_request(100, 11);
  d.prefix_hit_ratio = 0.5;
  void *ws = ws_for(&d);
  fth_serve_result r;
  FTH_RUN(run(&d, affine_cost, &c, ws, &r));
  FTH_ENSURE_NEAR(0.015, r.ttft_s.mean, 1e-12);
  FTH_ENSURE_NEAR(0.0101, r.tpot_s.mean, 1e-12);
  FTH_ENSURE_EQ_INT(50, fth_serve_requests(ws)[0].cached);
  /* The toy plan: the prefill of 50 new tokens at context 50. */
  fth_infer_plan p;
  FTH_RUN(toy_plan(&p, 1e12));
  d.kv_capacity_tokens = fth_infer_kv_capacity_tokens(&p);
  FTH_RUN(run(&d, fth_serve_plan_cost, &p, ws, &r));
  fth_phase ph;
  FTH_ENSURE_NEAR(fth_infer_iteration(&p, 1, 50, 50, &ph, NULL), r.ttft_s.mean, 1e-12);
  d.prefix_hit_ratio = 1.0;
  fth_error err;
  FTH_ENSURE(fth_serve_check(&d, &err) == FTH_EINVAL && strcmp(err.path, "prefix_hit_ratio") == 0);
  free(ws);
  return 0;
}

static int pre_stages(void) {
  affine c = {0.010, 0.0001};
  fth_serve_def d = closed_batch(4, 100, 1);
  /* Retrieval on 2 servers of 100 ms each, four requests at 0: two reach the
   * engine at 0.1 s, two at 0.2 s; the first two (100 + 64 retrieved prompt
   * tokens each, one output token) are prefilled together: 10 ms + 328 x 0.1
   * ms, TTFT 0.1428 s. */
  d.retrieval_servers = 2;
  d.retrieval_s = 0.1;
  d.retrieval_tokens = 64;
  void *ws = ws_for(&d);
  fth_serve_result r;
  FTH_RUN(run(&d, affine_cost, &c, ws, &r));
  const fth_serve_request *q = fth_serve_requests(ws);
  FTH_ENSURE_NEAR(0.1, q[1].ready_s, 1e-12);
  FTH_ENSURE_NEAR(0.2, q[2].ready_s, 1e-12);
  FTH_ENSURE_EQ_INT(164, q[0].input);
  FTH_ENSURE_NEAR(0.1428, q[0].first_token_s, 1e-12);
  /* Queueing counts from reaching the engine: the second pair, ready at 0.2 s
   * after the first pair's prefill ended, waits for nothing. */
  FTH_ENSURE(r.queue_s.max == 0.0);
  FTH_ENSURE_NEAR(0.2, q[3].admit_s, 1e-12);
  free(ws);
  /* KV fetch: half of a 100-token prompt (50 tokens x 1000 B) over 1 MB/s
   * with 10 ms latency: at the engine at 0.06 s, then the 50 uncomputed
   * tokens (15 ms): TTFT 0.075 s. Reasoning: 10 thinking tokens on top of
   * 11: 20 decodes of 10.1 ms after the first token. */
  d = one_request(100, 11);
  d.kv_fetch_share = 0.5;
  d.kv_transfer_bytes_per_token = 1000;
  d.kv_fetch_bw_bytes_per_s = 1e6;
  d.kv_fetch_latency_s = 0.01;
  d.thinking_tokens = 10;
  ws = ws_for(&d);
  FTH_RUN(run(&d, affine_cost, &c, ws, &r));
  FTH_ENSURE_NEAR(0.075, r.ttft_s.mean, 1e-12);
  FTH_ENSURE_NEAR(0.075 + 20 * 0.0101, r.e2e_s.mean, 1e-12);
  FTH_ENSURE_EQ_INT(21, fth_serve_requests(ws)[0].output);
  fth_error err;
  d.kv_fetch_bw_bytes_per_s = 0;
  FTH_ENSURE(fth_serve_check(&d, &err) == FTH_EINVAL &&
             strcmp(err.path, "kv_fetch_bw_bytes_per_s") == 0);
  free(ws);
  return 0;
}

/* ---- attention data parallelism and in-flight batching ------------------------------------ */

/* An MoE toy plan: tfx_infer_model with 4 experts, top-1, on the toy GPU, the
 * routed experts' load scaled by `imbalance`. */
static int moe_plan(fth_infer_plan *p, double hbm_bw, double imbalance) {
  fth_node_def n = toy_node(hbm_bw);
  fth_topology_def t = tfx_one_gpu();
  fth_model_def m = tfx_infer_model();
  m.num_experts = 4;
  m.top_k = 1;
  fth_infer_def d = fth_infer_def_default();
  d.context_len = 1023;
  d.gen_tokens = 1;
  d.expert_imbalance = imbalance;
  fth_error err;
  FTH_ENSURE(fth_infer_compile(p, &n, &t, &m, &d, FTH_PASS_DECODE, &err) == FTH_OK);
  return 0;
}

static int engine_tokens(void) {
  /* DP attention: a rank's 8 decodes in an engine whose ranks carry 16 tokens
   * each on average load the routed experts with 16 tokens' copies: exactly
   * the rank's batch on a plan whose routed load is 2x its own (the
   * imbalance factor scales those copies and nothing else). */
  fth_infer_plan one, two;
  FTH_RUN(moe_plan(&one, 1e12, 1.0));
  FTH_RUN(moe_plan(&two, 1e12, 2.0));
  fth_phase a, b;
  fth_infer_batch dec = {8, 8 * 1024.0, NULL, 0, 16, 0, 0};
  fth_infer_batch own = {8, 8 * 1024.0, NULL, 0, 0, 0, 0};
  double t = fth_infer_iteration_mixed(&one, &dec, &a, NULL);
  FTH_ENSURE_NEAR(fth_infer_iteration_mixed(&two, &own, &b, NULL), t, 1e-12);
  FTH_ENSURE(t > fth_infer_iteration_mixed(&one, &own, &b, NULL)); /* more copies cost more */
  /* The engine's mean equal to the rank's own tokens changes nothing. */
  dec.engine_tokens = 8;
  FTH_ENSURE_NEAR(fth_infer_iteration_mixed(&one, &own, &b, NULL),
                  fth_infer_iteration_mixed(&one, &dec, &a, NULL), 1e-12);
  /* A dense model has no routed experts: the engine's tokens do not matter. */
  fth_infer_plan dense;
  FTH_RUN(toy_plan(&dense, 1e12));
  dec.engine_tokens = 64;
  FTH_ENSURE_NEAR(fth_infer_iteration_mixed(&dense, &own, &b, NULL),
                  fth_infer_iteration_mixed(&dense, &dec, &a, NULL), 1e-12);
  return 0;
}

typedef struct logged {
  affine c;
  double *engine_tokens; /* the largest engine_tokens any iteration saw */
} logged;

static double logged_cost(const void *ctx, const fth_infer_batch *b) {
  const logged *l = (const logged *)ctx;
  if (b->engine_tokens > *l->engine_tokens) *l->engine_tokens = b->engine_tokens;
  return affine_cost(&l->c, b);
}

static int dp_attention_lockstep(void) {
  /* Two ranks, round robin, arrivals at 0 and 1 ms (100 prompt + 2 output
   * tokens each), cost 10 ms + 0.1 ms a token. Independent replicas: each
   * request alone, prefill 20 ms, one decode 10.1 ms: done at 30.1 and 31.1 ms.
   * In lock step (one engine of two DP ranks): rank 0 prefills request 0 over
   * [0, 20] ms while rank 1, idle, is held; request 1 waits until 20 ms. Then
   * rank 0 decodes (10.1 ms) and rank 1 prefills (20 ms): the engine
   * iteration is the slower, [20, 40]; request 0 is done at 40 ms, request 1
   * has its first token at 40 ms and its last after a lone decode at 50.1 ms.
   * The engine's mean tokens per rank: (100 + 0) / 2 = 50, then
   * (1 + 100) / 2 = 50.5, the largest. */
  double seen = 0;
  logged c = {{0.010, 0.0001}, &seen};
  fth_serve_def d = base_def();
  d.requests = 2;
  d.arrival = FTH_ARRIVAL_FIXED;
  d.rate_per_s = 1000;
  d.input.mean = 100;
  d.output.mean = 2;
  d.replicas = 2;
  void *ws = ws_for(&d);
  fth_serve_result r;
  FTH_RUN(run(&d, logged_cost, &c, ws, &r));
  const fth_serve_request *q = fth_serve_requests(ws);
  FTH_ENSURE_NEAR(0.0301, q[0].done_s, 1e-12);
  FTH_ENSURE_NEAR(0.0311, q[1].done_s, 1e-12);
  FTH_ENSURE(seen == 0); /* independent replicas pass no engine mean */
  d.dp_attention = 2;
  FTH_RUN(run(&d, logged_cost, &c, ws, &r));
  FTH_ENSURE_NEAR(0.020, q[0].first_token_s, 1e-12);
  FTH_ENSURE_NEAR(0.040, q[0].done_s, 1e-12);
  FTH_ENSURE_NEAR(0.040, q[1].first_token_s, 1e-12);
  FTH_ENSURE_NEAR(0.0501, q[1].done_s, 1e-12);
  FTH_ENSURE_NEAR(0.039, r.ttft_s.max, 1e-12);
  FTH_ENSURE_NEAR(50.5, seen, 1e-12);
  /* Ranks per engine must divide the replicas; static batching is refused. */
  fth_error err;
  d.dp_attention = 3;
  FTH_ENSURE(fth_serve_check(&d, &err) == FTH_EINVAL && strcmp(err.path, "dp_attention") == 0);
  d.dp_attention = 2;
  d.policy = FTH_POLICY_STATIC;
  FTH_ENSURE(fth_serve_check(&d, &err) == FTH_ENOTSUP && strcmp(err.path, "policy") == 0);
  free(ws);
  return 0;
}

static int inflight(void) {
  /* In-flight batching, budget 150 tokens, max batch 4: three requests of 100
   * prompt + 3 output tokens arrive together (closed loop, 3 users, no more
   * requests). Iteration 1: nothing decodes; request 0's 100 tokens fit, and
   * request 1's do not fit the 50 left: [0, 20] ms. Iteration 2: request 0
   * decodes (1), request 1 (100) fits the 149 left, request 2 does not (49
   * left): 101 tokens, 20.1 ms, [20, 40.1]. Iteration 3: two decodes and
   * request 2: 102 tokens, [40.1, 60.3]; request 0 is done (3 tokens: 20,
   * 40.1, 60.3). Then decodes only: 2 tokens, 10.2 ms, [60.3, 70.5] (request 1
   * done); 1 token [70.5, 80.6] (request 2 done). Chunked prefill under the
   * same budget would split request 1 into 50 + 50. */
  affine c = {0.010, 0.0001};
  fth_serve_def d = closed_batch(3, 100, 3);
  d.policy = FTH_POLICY_INFLIGHT;
  d.max_batch_tokens = 150;
  d.max_batch = 4;
  void *ws = ws_for(&d);
  fth_serve_result r;
  FTH_RUN(run(&d, affine_cost, &c, ws, &r));
  const fth_serve_request *q = fth_serve_requests(ws);
  FTH_ENSURE_NEAR(0.020, q[0].first_token_s, 1e-12);
  FTH_ENSURE_NEAR(0.0603, q[0].done_s, 1e-12);
  FTH_ENSURE_NEAR(0.0401, q[1].first_token_s, 1e-12);
  FTH_ENSURE_NEAR(0.0705, q[1].done_s, 1e-12);
  FTH_ENSURE_NEAR(0.0603, q[2].first_token_s, 1e-12);
  FTH_ENSURE_NEAR(0.0806, q[2].done_s, 1e-12);
  FTH_ENSURE_EQ_INT(5, r.iterations);
  /* A prompt over the whole budget still runs, as its iteration's first. */
  d.max_batch_tokens = 60;
  FTH_RUN(run(&d, affine_cost, &c, ws, &r));
  FTH_ENSURE_EQ_INT(3, r.requests_completed);
  free(ws);
  return 0;
}

static int swap_to_host(void) {
  /* test preemption()'s two requests, preempted by swap over a 1 MB/s link
   * at 1000 bytes a token. At 176.4 ms the second request (32 cached
   * tokens) is swapped out: 32 ms on the first's next decode (42.1 ms), which
   * then decodes alone: done at 176.4 + 42.1 + 15 x 10.1 = 370 ms. The second
   * keeps its context, is readmitted straight to decoding, and waits for its
   * 32 tokens to come back (32 ms): its 18th token at 370 + 42.1 = 412.1 ms,
   * 15 more decodes: done at 563.6 ms (recompute: 502.8 ms). At 1 GB/s each
   * copy takes 32 us: done at 338.032 and 338.032 + 10.132 + 151.5 = 499.664
   * ms, before recompute's (a 13.3 ms prefill against a 10.132 ms decode). */
  affine c = {0.010, 0.0001};
  fth_serve_def d = closed_batch(2, 16, 33);
  d.kv_capacity_tokens = 64;
  d.kv_transfer_bytes_per_token = 1000;
  d.swap_bw_bytes_per_s = 1e6;
  void *ws = ws_for(&d);
  fth_serve_result r;
  FTH_RUN(run(&d, affine_cost, &c, ws, &r));
  const fth_serve_request *q = fth_serve_requests(ws);
  FTH_ENSURE_EQ_INT(1, r.preemptions);
  FTH_ENSURE_NEAR(0.370, q[0].done_s, 1e-12);
  FTH_ENSURE_NEAR(0.5636, q[1].done_s, 1e-12);
  d.swap_bw_bytes_per_s = 1e9;
  FTH_RUN(run(&d, affine_cost, &c, ws, &r));
  FTH_ENSURE_NEAR(0.338032, q[0].done_s, 1e-12);
  FTH_ENSURE_NEAR(0.499664, q[1].done_s, 1e-12);
  fth_error err;
  d.kv_transfer_bytes_per_token = 0;
  FTH_ENSURE(fth_serve_check(&d, &err) == FTH_EINVAL &&
             strcmp(err.path, "kv_transfer_bytes_per_token") == 0);
  d.swap_bw_bytes_per_s = -1;
  FTH_ENSURE(fth_serve_check(&d, &err) == FTH_EINVAL &&
             strcmp(err.path, "swap_bw_bytes_per_s") == 0);
  free(ws);
  return 0;
}

/* Speculative decoding. One request of 100 prompt and 9 output tokens, 3
 * drafts a step, A + B T costs with every verified token counted: the prefill
 * gives the first token at 10 + 0.1 x 100 = 20 ms; a decode step verifies
 * 1 + 3 tokens, 10 + 0.1 x 4 = 10.4 ms. All drafts accepted: 4 tokens a step,
 * 1 -> 5 -> 9, done at 20 + 2 x 10.4 = 40.8 ms (3 iterations). None: one
 * token a step, 8 steps, 20 + 8 x 10.4 = 103.2 ms. Acceptance 1/2 over 1000
 * decoded tokens: a step emits 1 + j with P(j) = 2^-(j+1) for j < 3 and 2^-3
 * for 3, mean 1 + 1/2 + 1/4 + 1/8 = 1.875, so about 1000 / 1.875 = 533.3 steps. */
static int speculative(void) {
  affine c = {0.010, 0.0001};
  fth_serve_def d = one_request(100, 9);
  d.spec_tokens = 3;
  d.spec_acceptance = 1.0;
  void *ws = ws_for(&d);
  fth_serve_result r;
  FTH_RUN(run(&d, affine_cost, &c, ws, &r));
  FTH_ENSURE_NEAR(0.020, r.ttft_s.mean, 1e-12);
  FTH_ENSURE_NEAR(0.0408, r.e2e_s.max, 1e-12);
  FTH_ENSURE_EQ_INT(3, r.iterations);
  d.spec_acceptance = 0.0;
  FTH_RUN(run(&d, affine_cost, &c, ws, &r));
  FTH_ENSURE_NEAR(0.1032, r.e2e_s.max, 1e-12);
  FTH_ENSURE_EQ_INT(9, r.iterations);
  free(ws);
  d.output.mean = 1001;
  d.spec_acceptance = 0.5;
  ws = ws_for(&d);
  FTH_RUN(run(&d, affine_cost, &c, ws, &r));
  FTH_ENSURE(fabs((double)(r.iterations - 1) - 1000.0 / 1.875) < 0.05 * 1000.0 / 1.875);
  /* refused: static batching, too many drafts, an acceptance above 1 */
  fth_error err;
  d.policy = FTH_POLICY_STATIC;
  FTH_ENSURE(fth_serve_run(&d, affine_cost, &c, ws, fth_serve_workspace_bytes(&d), &r, &err) != FTH_OK);
  FTH_ENSURE(strcmp(err.path, "policy") == 0);
  d.policy = FTH_POLICY_CHUNKED;
  d.spec_tokens = FTH_SERVE_MAX_SPEC + 1;
  FTH_ENSURE(fth_serve_run(&d, affine_cost, &c, ws, fth_serve_workspace_bytes(&d), &r, &err) != FTH_OK);
  FTH_ENSURE(strcmp(err.path, "spec_tokens") == 0);
  d.spec_tokens = 3;
  d.spec_acceptance = 1.5;
  FTH_ENSURE(fth_serve_run(&d, affine_cost, &c, ws, fth_serve_workspace_bytes(&d), &r, &err) != FTH_OK);
  FTH_ENSURE(strcmp(err.path, "spec_acceptance") == 0);
  free(ws);

  /* The MTP draft is one block and the LM head: a decode step of the same
   * model cut to one layer. A batch verifying k drafts adds k drafts to the
   * cost of its verification, which grows with k (more query tokens). */
  fth_infer_plan p, p1;
  FTH_RUN(toy_plan(&p, 1e12));
  FTH_RUN(toy_plan_layers(&p1, 1e12, 1));
  fth_phase a;
  double draft = fth_infer_draft_s(&p, 4, 1024);
  FTH_ENSURE(draft > 0);
  FTH_ENSURE_NEAR(fth_infer_iteration(&p1, 4, 1, 1024, &a, NULL), draft, 1e-12);
  fth_infer_batch plain = {4, 4 * 1024.0, NULL, 0, 0, 0, 0};
  fth_infer_batch spec = {4, 4 * 1024.0, NULL, 0, 0, 3, 0};
  double t0 = fth_infer_iteration_mixed(&p, &plain, &a, NULL);
  double t3 = fth_infer_iteration_mixed(&p, &spec, &a, NULL);
  FTH_ENSURE(t3 - 3 * draft > t0);
  return 0;
}

/* Serving reads only the experts its routed pairs reach: P pairs uniform over
 * L local experts reach L (1 - (1 - 1/L)^P): 1 pair one expert, 2 pairs over 4
 * experts 4 (1 - 9/16) = 1.75, none or a single expert as they are. On the toy
 * MoE (4 experts, top-1, 4 layers, one GPU, 1 TB/s): a decode of 1 request reads
 * one expert's linears a layer, one of 64 requests 4 (1 - (3/4)^64) of them, so
 * the weights read differ by 4 layers x (4 (1 - (3/4)^64) - 1) experts x the
 * expert linears' in x out x 2 B (BF16). */
static int touched_experts(void) {
  FTH_ENSURE_NEAR(1.0, fth_block_touched_experts(4, 1), 1e-15);
  FTH_ENSURE_NEAR(1.75, fth_block_touched_experts(4, 2), 1e-15);
  FTH_ENSURE(fth_block_touched_experts(4, 0) == 4.0);
  FTH_ENSURE(fth_block_touched_experts(1, 7) == 1.0);
  fth_infer_plan p;
  FTH_RUN(moe_plan(&p, 1e12, 1.0));
  double per_expert = 0;
  const fth_layer_shape *sh = &p.layout.moe_shape;
  for (int i = 0; i < sh->num_linears; i++)
    if (sh->lin[i].part == FTH_PART_EXPERT) per_expert += sh->lin[i].in * sh->lin[i].out * 2.0;
  FTH_ENSURE(per_expert > 0);
  fth_phase a, b;
  fth_infer_iteration(&p, 1, 1, 1024, &a, NULL);
  fth_infer_iteration(&p, 64, 1, 1024, &b, NULL);
  double more = 4.0 * (4.0 * (1.0 - pow(0.75, 64)) - 1.0) * per_expert;
  FTH_ENSURE_NEAR(more, (b.weight_memory_s - a.weight_memory_s) * 1e12, 1e-6 * more);
  return 0;
}

/* Several clients on one pool: a trace whose rows name their client, one client's
 * metrics against its own SLOs. Client 0 sends 100 + 11 tokens at 0 s and 2 s,
 * client 1 50 + 1 tokens at 1 s and 3 s, each alone on the replica (A = 10 ms,
 * B = 0.1 ms): client 0's TTFT is its 20 ms prefill, its E2E 20 + 10 x 10.1 = 121
 * ms, TPOT 101 / 10 = 10.1 ms, its span 0 to 2.121 s; client 1's TTFT = E2E is its
 * 15 ms prefill, no TPOT, span 1 to 3.015 s. A 25 ms TTFT bound passes client 0, a
 * 14 ms one fails client 1. Then fth_serve_draw: a drawn stream replayed as a trace
 * gives the simulator's own draws, bit for bit. */
static int clients(void) {
  affine c = {0.010, 0.0001};
  const fth_serve_trace_row rows[4] = {
      {0.0, 100, 11, 0}, {1.0, 50, 1, 1}, {2.0, 100, 11, 0}, {3.0, 50, 1, 1}};
  fth_serve_def d = base_def();
  d.requests = 4;
  d.trace = rows;
  void *ws = ws_for(&d);
  fth_serve_result r, c0, c1;
  FTH_RUN(run(&d, affine_cost, &c, ws, &r));
  fth_serve_client_result(&d, ws, 0, 0.025, 0, &c0);
  fth_serve_client_result(&d, ws, 1, 0.014, 0, &c1);
  FTH_ENSURE_EQ_INT(2, c0.requests_completed);
  FTH_ENSURE_EQ_INT(2, c1.requests_completed);
  FTH_ENSURE_NEAR(0.020, c0.ttft_s.mean, 1e-12);
  FTH_ENSURE_NEAR(0.121, c0.e2e_s.p99, 1e-12);
  FTH_ENSURE_NEAR(0.0101, c0.tpot_s.mean, 1e-12);
  FTH_ENSURE_NEAR(2.121, c0.duration_s, 1e-12);
  FTH_ENSURE_NEAR(1.0, c0.slo_attainment, 1e-15);
  FTH_ENSURE_NEAR(2 / 2.121, c0.goodput_requests_per_s, 1e-12);
  FTH_ENSURE_NEAR(2 * 11 / 2.121, c0.output_tokens_per_s, 1e-9);
  FTH_ENSURE_NEAR(0.015, c1.ttft_s.mean, 1e-12);
  FTH_ENSURE_NEAR(0.015, c1.e2e_s.max, 1e-12);
  FTH_ENSURE_EQ_INT(0, c1.tpot_s.count);
  FTH_ENSURE_NEAR(2.015, c1.duration_s, 1e-12);
  FTH_ENSURE(c1.slo_attainment == 0.0 && c1.goodput_requests_per_s == 0.0);
  free(ws);
  const fth_serve_trace_row neg[1] = {{0, 10, 1, -1}};
  d.trace = neg;
  d.requests = 1;
  fth_error err;
  FTH_ENSURE(fth_serve_check(&d, &err) == FTH_EINVAL && strcmp(err.path, "trace[0].client") == 0);

  fth_serve_def g = base_def();
  g.requests = 300;
  g.rate_per_s = 20;
  g.arrival = FTH_ARRIVAL_GAMMA;
  g.burstiness = 2;
  g.input.kind = FTH_LEN_LOGNORMAL;
  g.input.sigma = 0.5;
  g.output.kind = FTH_LEN_UNIFORM;
  g.output.min = 2;
  g.output.max = 64;
  fth_serve_trace_row *drawn = malloc(300 * sizeof *drawn);
  FTH_ENSURE(fth_serve_draw(&g, drawn, &err) == FTH_OK);
  ws = ws_for(&g);
  fth_serve_result own, replay;
  FTH_RUN(run(&g, affine_cost, &c, ws, &own));
  g.trace = drawn;
  FTH_RUN(run(&g, affine_cost, &c, ws, &replay));
  FTH_ENSURE(memcmp(&own, &replay, sizeof own) == 0);
  g.trace = NULL;
  g.arrival = FTH_ARRIVAL_CLOSED;
  FTH_ENSURE(fth_serve_draw(&g, drawn, &err) == FTH_ENOTSUP && strcmp(err.path, "arrival") == 0);
  free(drawn);
  free(ws);
  return 0;
}

/* Speculative decoding with a separate draft model. Tokens a step (Leviathan et
 * al. 2023): (1 - a^(k+1)) / (1 - a): k = 3, a = 1/2: 1 + 1/2 + 1/4 + 1/8 = 1.875;
 * k = 4, a = 0.8: (1 - 0.32768) / 0.2 = 3.3616; all accepted k + 1; none 1.
 * Step time, target A + B T (T counting every verified token) at 10 ms + 0.1 ms,
 * draft a + b T at 1 ms + 0.01 ms; one request of 100 prompt and 9 output tokens,
 * k = 3, every draft accepted: the prefill iteration is the target's 10 + 10 = 20
 * ms and the draft's prefill of the prompt 1 + 1 = 2 ms: TTFT 22 ms. A decode step:
 * the target verifies 4 tokens, 10.4 ms, after 3 draft steps of one token, 3 x
 * 1.01 ms: 13.43 ms; 4 tokens a step, 1 -> 5 -> 9: E2E 22 + 2 x 13.43 = 48.86 ms
 * in 3 iterations. At a = 0.6, k = 4 the steps of a long output average
 * (1 - 0.6^5) / 0.4 = 2.3056 tokens. */
static int draft_model(void) {
  FTH_ENSURE_NEAR(1.875, fth_serve_spec_tokens_per_step(3, 0.5), 1e-15);
  FTH_ENSURE_NEAR(3.3616, fth_serve_spec_tokens_per_step(4, 0.8), 1e-12);
  FTH_ENSURE_NEAR(4.0, fth_serve_spec_tokens_per_step(3, 1.0), 1e-15);
  FTH_ENSURE_NEAR(1.0, fth_serve_spec_tokens_per_step(3, 0.0), 1e-15);
  affine tc = {0.010, 0.0001}, dc = {0.001, 0.00001};
  fth_serve_draft_engine e = {affine_cost, &tc, affine_cost, &dc};
  fth_serve_def d = one_request(100, 9);
  d.spec_tokens = 3;
  d.spec_acceptance = 1.0;
  void *ws = ws_for(&d);
  fth_serve_result r;
  FTH_RUN(run(&d, fth_serve_draft_cost, &e, ws, &r));
  FTH_ENSURE_NEAR(0.022, r.ttft_s.mean, 1e-12);
  FTH_ENSURE_NEAR(0.04886, r.e2e_s.max, 1e-12);
  FTH_ENSURE_EQ_INT(3, r.iterations);
  free(ws);
  d.output.mean = 20001;
  d.spec_tokens = 4;
  d.spec_acceptance = 0.6;
  ws = ws_for(&d);
  FTH_RUN(run(&d, fth_serve_draft_cost, &e, ws, &r));
  double per_step = 20000.0 / (double)(r.iterations - 1);
  FTH_ENSURE(fabs(per_step - 2.3056) < 0.02 * 2.3056);
  free(ws);

  /* On compiled plans: the target only verifies (its batch marked spec_external
   * drops the MTP drafting: the MTP cost less its k draft passes), and the draft is
   * the 1-layer toy's decode, k of them for a batch of decodes. */
  fth_infer_plan p, p1;
  FTH_RUN(toy_plan(&p, 1e12));
  FTH_RUN(toy_plan_layers(&p1, 1e12, 1));
  fth_phase a;
  fth_infer_batch mtp = {4, 4 * 1024.0, NULL, 0, 0, 3, 0};
  fth_infer_batch ver = {4, 4 * 1024.0, NULL, 0, 0, 3, 1};
  double verify = fth_infer_iteration_mixed(&p, &ver, &a, NULL);
  FTH_ENSURE_NEAR(fth_infer_iteration_mixed(&p, &mtp, &a, NULL) - 3 * fth_infer_draft_s(&p, 4, 1024),
                  verify, 1e-15);
  fth_serve_draft_engine pe = {fth_serve_plan_cost, &p, fth_serve_plan_cost, &p1};
  FTH_ENSURE_NEAR(verify + 3 * fth_infer_iteration(&p1, 4, 1, 1024, &a, NULL),
                  fth_serve_draft_cost(&pe, &mtp), 1e-15);

  /* Memory: every token keeps its KV in both models, 2 x 1024 x 4 layers x 2 B =
   * 16,384 B in the target and 2 x 1024 x 1 x 2 = 4,096 B in the draft, and the
   * draft's weights W (its one stage's parameters at 2 B) leave the room R: the
   * tokens are floor((R - W) / 20,480), R being floor'd to 16,384 B units alone. */
  double cap = fth_infer_kv_capacity_tokens(&p);
  double w = (p1.layout.stage_dense_params + p1.layout.stage_expert_params) * 2.0;
  double both = fth_infer_kv_capacity_tokens_draft(&p, &p1);
  FTH_ENSURE(w > 1e6);
  FTH_ENSURE(both >= floor((cap * 16384.0 - w) / 20480.0) &&
             both <= floor(((cap + 1) * 16384.0 - w) / 20480.0));
  FTH_ENSURE(fth_infer_kv_capacity_tokens_draft(&p, NULL) == cap);
  return 0;
}

int serve_test(void) {
  FTH_RUN(clients());
  FTH_RUN(draft_model());
  FTH_RUN(touched_experts());
  FTH_RUN(speculative());
  FTH_RUN(mixed_iteration());
  FTH_RUN(kv_capacity());
  FTH_RUN(single_request());
  FTH_RUN(fixed_rate_no_queueing());
  FTH_RUN(md1_queue());
  FTH_RUN(little_and_overload());
  FTH_RUN(preemption());
  FTH_RUN(chunked_and_static());
  FTH_RUN(routing_and_determinism());
  FTH_RUN(goodput_and_checks());
  FTH_RUN(trace_replay());
  FTH_RUN(disaggregated());
  FTH_RUN(prefix_cache());
  FTH_RUN(pre_stages());
  FTH_RUN(engine_tokens());
  FTH_RUN(dp_attention_lockstep());
  FTH_RUN(inflight());
  FTH_RUN(swap_to_host());
  return 0;
}
