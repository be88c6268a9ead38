/* fth_serve.h: request-level serving, a deterministic discrete-event
 * simulation of N replicas of an inference engine under a stream of requests
 * (Vidur, Agrawal et al. 2024, does the same at the operator level; this one
 * costs each engine iteration with fth_infer_iteration_mixed, or with any
 * cost function the caller gives).
 *
 * Requests arrive open loop (Poisson, gamma, fixed rate) or closed loop (N
 * users, each sending its next request when the last one finishes), with
 * prompt and output lengths drawn from fixed / uniform / normal / lognormal /
 * Zipf distributions. Each replica runs one of three batching policies over a
 * paged KV cache (Kwon et al. 2023, vLLM: blocks of `block_tokens`, a
 * watermark of free blocks kept at admission, preemption by recompute of the
 * latest admitted request when a decode finds no free block):
 *   continuous  iteration-level scheduling, prefill first (Orca, Yu et al.
 *               2022; vLLM's default): whole prompts run in iterations of
 *               their own, up to `max_batch_tokens` prompt tokens, while the
 *               running requests' decodes wait;
 *   chunked     decode first with chunked prefill (Sarathi-Serve, Agrawal et
 *               al. 2024): every iteration runs all decodes, then prompt
 *               chunks up to a token budget of `max_batch_tokens` in all;
 *   inflight    decode first, prompts whole (TensorRT-LLM's in-flight batching
 *               without chunked context): every iteration runs all decodes, then
 *               admits waiting prompts while each fits what is left of the token
 *               budget (the first prompt of an iteration even over it);
 *   static      a batch of up to `max_batch` requests is admitted when the
 *               replica is idle, prefilled in one iteration and decoded until
 *               its longest request is done; finished requests keep their slot
 *               (padding) and their KV pages, reserved whole at admission.
 * Requests go to replicas round-robin or to the one with the fewest
 * outstanding requests. Optional: a prefix cache (a hit share of every prompt
 * not recomputed), prefill/decode disaggregation (a prefill pool, the KV moved
 * over a link to the decode pool), stages before the engine (retrieval
 * servers, a KV fetch from a remote tier) and reasoning tokens, a replayed
 * trace instead of drawn requests (its rows may name clients, each with its own
 * metrics: fth_serve_client_result; several models on one cluster are pools of
 * their own, one simulation each), speculative decoding with the model's MTP
 * module or a separate draft model (fth_serve_draft_cost). Arrivals, prompt and output lengths draw
 * from three xoshiro256** streams of one seed: the same definition gives the
 * same result, bit for bit.
 *
 * Memory: the simulation runs in a workspace the caller allocates once
 * (fth_serve_workspace_bytes: O(requests + replicas x max_batch)); nothing is
 * allocated per event or per iteration. */
#ifndef FTH_SERVE_H
#define FTH_SERVE_H

#include <stddef.h>
#include <stdint.h>

#include "fth_common.h"
#include "fth_infer.h"

typedef enum fth_serve_arrival {
  FTH_ARRIVAL_POISSON = 0, ///< exponential gaps at `rate_per_s`
  FTH_ARRIVAL_GAMMA,       ///< gamma gaps, mean 1 / rate, coefficient of variation `burstiness`
  FTH_ARRIVAL_FIXED,       ///< one request every 1 / rate seconds
  FTH_ARRIVAL_CLOSED,      ///< `concurrency` users, each waiting `think_s` after a reply
  FTH_ARRIVAL_COUNT
} fth_serve_arrival;

const char *fth_serve_arrival_name(fth_serve_arrival a); ///< "poisson", "gamma", "fixed", "closed"
fth_serve_arrival fth_serve_arrival_parse(const char *name); ///< FTH_ARRIVAL_COUNT if unknown

typedef enum fth_serve_dist_kind {
  FTH_LEN_FIXED = 0, ///< `mean`
  FTH_LEN_UNIFORM,   ///< integers in [min, max]
  FTH_LEN_NORMAL,    ///< mean, sigma (standard deviation), clamped to [min, max]
  FTH_LEN_LOGNORMAL, ///< mean of the distribution, sigma of its log, clamped to [min, max]
  FTH_LEN_ZIPF,      ///< P(x) ~ x^-s on [min, max]
  FTH_LEN_COUNT
} fth_serve_dist_kind;

const char *fth_serve_dist_name(fth_serve_dist_kind k);     ///< "fixed", "uniform", ...
fth_serve_dist_kind fth_serve_dist_parse(const char *name); ///< FTH_LEN_COUNT if unknown

/// A token-length distribution; draws are rounded to integers >= 1.
typedef struct fth_serve_dist {
  fth_serve_dist_kind kind;
  double mean;  ///< fixed, normal, lognormal
  double sigma; ///< normal: standard deviation; lognormal: of the log
  double min;   ///< lower bound (uniform, zipf; clamp of normal, lognormal); >= 1
  double max;   ///< upper bound; 0 = none (uniform and zipf need one)
  double s;     ///< zipf exponent, > 0
} fth_serve_dist;

typedef enum fth_serve_policy {
  FTH_POLICY_CONTINUOUS = 0, ///< prefill first, whole prompts (Orca / vLLM)
  FTH_POLICY_CHUNKED,        ///< decode first, chunked prefill under a token budget (Sarathi)
  FTH_POLICY_STATIC,         ///< static batches run to completion
  FTH_POLICY_INFLIGHT,       ///< decode first, whole prompts in the token budget (TensorRT-LLM)
  FTH_POLICY_COUNT
} fth_serve_policy;

const char *fth_serve_policy_name(fth_serve_policy p); ///< "continuous", "chunked", "static", "inflight"
fth_serve_policy fth_serve_policy_parse(const char *name); ///< FTH_POLICY_COUNT if unknown

typedef enum fth_serve_routing {
  FTH_ROUTE_ROUND_ROBIN = 0,
  FTH_ROUTE_LEAST_OUTSTANDING, ///< fewest requests routed and not finished; ties to the lowest
                               ///< index
  FTH_ROUTE_COUNT
} fth_serve_routing;

const char *fth_serve_routing_name(fth_serve_routing r);     ///< "round_robin", "least_outstanding"
fth_serve_routing fth_serve_routing_parse(const char *name); ///< FTH_ROUTE_COUNT if unknown

/// The cost of one engine iteration of a replica, in seconds (> 0 and finite
/// for a non-empty batch).
typedef double (*fth_serve_cost_fn)(const void *ctx, const fth_infer_batch *batch);

/// One request of a replayed trace (Vidur's and the Azure LLM traces' columns).
typedef struct fth_serve_trace_row {
  double arrival_s; ///< >= 0, non-decreasing down the trace
  double input;     ///< prompt tokens, an integer in [1, 2^30]
  double output;    ///< output tokens, an integer in [1, 2^30]
  int32_t client;   ///< the client that sent it (several clients on one pool), >= 0
} fth_serve_trace_row;

/// Largest batch (requests per iteration) and replica count accepted.
#define FTH_SERVE_MAX_BATCH    65536
#define FTH_SERVE_MAX_SPEC 16 ///< draft tokens a step verifies at most
#define FTH_SERVE_MAX_REPLICAS 65536

typedef struct fth_serve_def {
  int64_t requests; ///< requests simulated, >= 1
  uint64_t seed;    ///< of every draw
  fth_serve_arrival arrival;
  double rate_per_s;     ///< open loop: mean arrival rate, whole deployment
  double burstiness;     ///< gamma: coefficient of variation of the gaps (1 = Poisson)
  int64_t concurrency;   ///< closed loop: users
  double think_s;        ///< closed loop: a user's pause between reply and next request
  fth_serve_dist input;  ///< prompt tokens
  fth_serve_dist output; ///< generated tokens (the first comes out of the prefill)
  fth_serve_policy policy;
  int max_batch;             ///< requests in flight per replica (vLLM max_num_seqs)
  double max_batch_tokens;   ///< tokens per iteration (vLLM max_num_batched_tokens)
  double block_tokens;       ///< tokens per KV page
  double kv_capacity_tokens; ///< KV tokens one replica holds (fth_infer_kv_capacity_tokens)
  double kv_window_tokens;   ///< sliding window of the windowed layers (0: none)
  double kv_windowed_share;  ///< share of the layers that keep only their window, [0, 1]
  double watermark;          ///< share of the pages kept free when admitting (vLLM 0.01)
  /// Preemption by swapping (vLLM's preemption_mode="swap"): > 0 moves a preempted
  /// request's KV pages to host memory over a link of this bandwidth (one replica's, all
  /// its GPUs) instead of dropping them, and back when it is readmitted; each copy
  /// (cached tokens x kv_transfer_bytes_per_token / bandwidth) lengthens the replica's
  /// next iteration, as vLLM's scheduler copies blocks before the model runs. 0:
  /// preemption by recompute.
  double swap_bw_bytes_per_s;
  int replicas;
  /// Attention data parallelism (SGLang --enable-dp-attention, TensorRT-LLM
  /// enable_attention_dp; DeepSeek-V3 serving, DeepSeek-AI 2024 Sec. 3.4): the replicas
  /// are the DP ranks of engines of this many ranks each. A rank keeps its own batch and
  /// KV cache, but the MoE layers' dispatch and combine join every rank of the engine in
  /// each layer, so the ranks iterate in lock step: an engine's iteration starts when
  /// all its ranks are free, every rank schedules its own batch (an idle rank runs an
  /// empty one and waits), and it lasts as long as the slowest rank's. 0 or 1:
  /// independent replicas. Must divide `replicas`; the prefill pool of a disaggregated
  /// deployment keeps independent replicas.
  int dp_attention;
  /// Speculative decoding (Leviathan et al. 2023; DeepSeek-V3's MTP as SGLang and
  /// TensorRT-LLM serve it): every decode step verifies `spec_tokens` draft tokens
  /// beside its own (1 + spec_tokens query tokens; the cost function charges them and
  /// the drafting, fth_infer_batch.spec_tokens), and each draft is accepted with
  /// probability `spec_acceptance` while the ones before it were: a step emits 1 + j
  /// tokens, j of the k drafts accepted with probability a^j (1 - a) (a^k for all k),
  /// seeded. 0 = off. At most FTH_SERVE_MAX_SPEC; not with static batching.
  int spec_tokens;
  double spec_acceptance; ///< [0, 1]
  fth_serve_routing routing;
  double gpus_per_replica; ///< for throughput per GPU
  double slo_ttft_s;       ///< 0 = no bound
  double slo_tpot_s;       ///< 0 = no bound
  double prefix_hit_ratio; ///< share of each prompt found in the prefix cache, [0, 1)
  /// Prefill/decode disaggregation (DistServe, Zhong et al. 2024; Splitwise): > 0 puts
  /// prompts on a pool of this many prefill replicas, whose first token is the request's;
  /// its KV cache then crosses the prefill replica's link (one transfer at a time:
  /// latency + bytes / bandwidth) to the `replicas` decode replicas, which decode.
  int prefill_replicas;
  fth_serve_cost_fn prefill_cost; ///< the prefill pool's iteration cost (NULL: `cost`)
  const void *prefill_cost_ctx;
  double prefill_kv_capacity_tokens;  ///< per prefill replica (0: kv_capacity_tokens)
  double prefill_gpus_per_replica;    ///< (0: gpus_per_replica)
  double kv_transfer_bytes_per_token; ///< KV of one token over every layer: what moves
  double kv_link_bw_bytes_per_s;      ///< a prefill replica's outgoing bandwidth
  double kv_link_latency_s;
  /// Replay: `requests` rows, caller-owned (NULL: draw lengths and arrivals). The rows'
  /// lengths replace the distributions; their arrival times the open-loop process (a
  /// closed loop keeps its users and takes only the lengths).
  const fth_serve_trace_row *trace;
  /* Stages before the engine (as HERMES, the Heterogeneous Multi-stage LLM inference
   * Execution Simulator, models them: RAG, KV retrieval), each a FIFO queue crossed in
   * arrival order; reasoning lengthens the output. */
  int retrieval_servers;          ///< > 0: a retrieval stage of this many servers (e.g. CPUs)
  double retrieval_s;             ///< one query's service time there (embedding + vector search)
  double retrieval_tokens;        ///< tokens the retrieved passages add to every prompt
  double kv_fetch_share;          ///< share of the prompt whose KV is fetched, not computed, [0, 1)
  double kv_fetch_bw_bytes_per_s; ///< the remote tier's bandwidth (one fetch at a time)
  double kv_fetch_latency_s;
  double thinking_tokens; ///< reasoning tokens generated before the answer (output += them)
} fth_serve_def;

/// Defaults: 1000 Poisson requests at 1/s, prompts 512 and outputs 128 tokens
/// (fixed), continuous batching, max batch 256, 8192 tokens per iteration,
/// 16-token pages, watermark 0.01, one replica, round-robin, seed 1; the KV
/// capacity must be set (0 refuses).
fth_serve_def fth_serve_def_default(void);

/// Validate; paths name the field ("rate_per_s", "input.sigma", "trace[3].input": rows
/// counted from 0).
fth_status fth_serve_check(const fth_serve_def *d, fth_error *err);

/// The cost function of a compiled inference plan (`ctx` is the
/// fth_infer_plan): fth_infer_iteration_mixed of the slowest stage; with PP
/// stages the iteration passes through all of them in turn (one batch in
/// flight: PP adds latency, not throughput), with the hand-off of the batch's
/// [tokens, h] activation between stages exposed.
double fth_serve_plan_cost(const void *plan, const fth_infer_batch *batch);

/// One request's life (times in seconds from the start; -1 until it happens).
typedef struct fth_serve_request {
  double arrival_s, admit_s, first_token_s, done_s;
  int32_t input, output; ///< tokens
  int32_t ctx;           ///< tokens whose keys and values are cached
  int32_t target;    ///< tokens to prefill before decoding (the prompt, or more after preemption)
  int32_t generated; ///< output tokens so far
  int32_t sched;     ///< tokens scheduled in the replica's current iteration
  int32_t blocks;    ///< KV pages held
  int32_t next;      ///< the next request in its replica's waiting queue (-1: none)
  int32_t replica;   ///< its (last) replica: decode pool 0 .. replicas - 1, prefill pool after
  int32_t preemptions;
  int32_t state;     ///< 0 not arrived, 1 waiting, 2 running, 3 done, 4 KV in transfer
  int32_t cached;    ///< prompt tokens found in the prefix cache
  double kv_ready_s; ///< disaggregated: when its KV reached the decode pool (-1: not yet)
  double ready_s;    ///< when it reaches the engine: after retrieval and KV fetch (else arrival)
  int32_t swapped;   ///< its KV is in host memory (preempted by swap), to copy back on admission
  int32_t client;    ///< its trace row's client (0 when drawn)
} fth_serve_request;

typedef struct fth_serve_stats {
  double mean, p50, p90, p95, p99, max; ///< percentiles interpolated between ranks
  int64_t count;
} fth_serve_stats;

typedef struct fth_serve_result {
  int64_t requests_completed;
  double duration_s; ///< first arrival to last reply
  double requests_per_s, input_tokens_per_s, output_tokens_per_s, output_tokens_per_s_per_gpu;
  fth_serve_stats ttft_s;        ///< arrival to first token
  fth_serve_stats tpot_s;        ///< (reply - first token) / (output - 1), requests with output > 1
  fth_serve_stats e2e_s;         ///< arrival to last token
  fth_serve_stats queue_s;       ///< reaching the engine (after any stages) to first scheduled
  double goodput_requests_per_s; ///< requests meeting both SLOs per second (DistServe)
  double slo_attainment;         ///< their share of the requests
  double kv_peak_fraction;       ///< most KV pages in use on any replica / pages per replica
  double kv_capacity_tokens;     ///< per replica, whole pages
  int64_t preemptions;
  int64_t iterations;         ///< engine iterations, all replicas
  double mean_batch_requests; ///< requests per iteration, mean over iterations
  double mean_batch_tokens;   ///< tokens per iteration
  double busy_fraction;       ///< replica time spent in iterations / (replicas x duration)
  double mean_in_system;      ///< time-average requests arrived and not done (Little's L)
} fth_serve_result;

/// Bytes of workspace fth_serve_run needs for `d` (0 if `d` is out of range).
size_t fth_serve_workspace_bytes(const fth_serve_def *d);

/// Simulate `d` with iterations costed by `cost(cost_ctx, batch)`. `ws` is
/// caller-owned, at least fth_serve_workspace_bytes(d) bytes, suitably aligned
/// (malloc's alignment); it holds the requests afterwards (fth_serve_requests).
/// Fails on an invalid `d`, a request that cannot fit a replica's KV cache
/// alone (path "kv_capacity_tokens"), or a cost that is not positive and finite.
fth_status fth_serve_run(const fth_serve_def *d, fth_serve_cost_fn cost, const void *cost_ctx,
                         void *ws, size_t ws_bytes, fth_serve_result *out, fth_error *err);

/// The requests of the last run in `ws` (d->requests of them), in arrival order.
const fth_serve_request *fth_serve_requests(const void *ws);

/// The metrics of one client's requests (those whose trace row named `client`) after
/// fth_serve_run with the same `d` and `ws`, goodput against the client's own SLOs (0 =
/// no bound): the request-level fields (counts, duration from the client's first
/// arrival to its last reply, throughput, latencies, goodput, preemptions); output
/// tokens per GPU over the whole deployment's GPUs (the client's share of it). The
/// engine-level fields (KV cache, iterations, batches, busy, in system) stay 0.
/// Sorts in `ws`'s scratch: call after the run, before anything else uses `ws`.
void fth_serve_client_result(const fth_serve_def *d, void *ws, int32_t client, double slo_ttft_s,
                             double slo_tpot_s, fth_serve_result *out);

/// Draw `d`'s open-loop request stream (arrivals and lengths, the draws fth_serve_run
/// makes for `d` without a trace) into `rows` (d->requests of them, client 0): one
/// client's traffic, to merge with others' into one trace. Fails on an invalid `d` or
/// a closed loop (whose arrivals depend on the replies).
fth_status fth_serve_draw(const fth_serve_def *d, fth_serve_trace_row *rows, fth_error *err);

/// Expected tokens one decode step emits with k drafts each accepted with probability
/// a while the ones before it were (Leviathan et al. 2023, "Fast Inference from
/// Transformers via Speculative Decoding", ICML, eq. 1): (1 - a^(k+1)) / (1 - a), k + 1
/// at a = 1. What the simulator's seeded acceptances average to.
double fth_serve_spec_tokens_per_step(int k, double a);

/// Speculative decoding with a separate draft model (Leviathan et al. 2023; vLLM and
/// TensorRT-LLM "draft-target"): a small model on the same GPUs drafts k tokens by k
/// decode steps of its own, then the target verifies them (k + 1 query tokens per
/// decode) in one pass. `ctx` of fth_serve_draft_cost.
typedef struct fth_serve_draft_engine {
  fth_serve_cost_fn target; ///< the target's iteration (the batch marked spec_external)
  const void *target_ctx;
  fth_serve_cost_fn draft;  ///< the draft model's iteration
  const void *draft_ctx;
} fth_serve_draft_engine;

/// One iteration with a draft model: the target's pass over the batch (prompt chunks,
/// decodes verifying spec_tokens drafts each), plus the draft's passes: the first over
/// the prompt chunks (its own KV of the prompt) and the decodes, then spec_tokens - 1
/// more over the decodes alone. Without decodes or drafts, the draft prefills the
/// chunks only.
double fth_serve_draft_cost(const void *engine, const fth_infer_batch *batch);

/// Percentile `p` in [0, 1] of `n` sorted values, linear between closest ranks
/// (numpy's default): v[(n-1)p] interpolated.
double fth_serve_percentile(const double *sorted, int64_t n, double p);

#endif
