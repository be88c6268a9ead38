/* fth_infer.h: inference on a cluster, per accelerator: prefill (the prompt's
 * forward pass; time to first token) and decode (one token per request per
 * step, reading the weights and a KV cache that grows with the context; time
 * per output token), with TP/EP/PP communication, memory per tier and the
 * largest batch that fits. Compiled once, evaluated without allocation; the
 * parallel layout comes from the same topology as training (fth_train.h). */
#ifndef FTH_INFER_H
#define FTH_INFER_H

#include "fth_block.h"
#include "fth_footprint.h"
#include "fth_layout.h"
#include "fth_train.h"

typedef enum fth_pass { FTH_PASS_PREFILL = 0, FTH_PASS_DECODE = 1 } fth_pass;

typedef struct fth_infer_def {
  double global_batch; ///< requests in flight, whole system
  double micro_batch;  ///< requests per micro-batch per DP rank
  double prompt_len;   ///< prefill: `seq_length` prompt tokens per request
  double context_len;  ///< decode: `prefill_seq_len` tokens already cached
  double gen_tokens;   ///< decode: `num_generated_tokens`
  double act_bytes;    ///< `float_size_bytes` of activations
  double weight_bytes; ///< width of stored weights (fp8 = 1); 0 = act_bytes
  double kv_bytes;     ///< width of the KV cache; 0 = act_bytes
  /// Width of the linears' GEMM operands (weights and inputs) where it differs from the
  /// activations': an FP8 serving engine (DeepGEMM, TensorRT-LLM FP8 GEMMs) runs its
  /// linears at FP8 while attention, norms, the router and the activations stay BF16
  /// (act_bytes 2). The weights are stored at this width (weight_bytes is then unused);
  /// each GEMM's input is quantised by a compute-only cast (2 vector FLOPs an element,
  /// vLLM's per-token quantisation kernel; its traffic is taken as fused into the kernel
  /// before it). 0 = the activations' width for everything.
  double gemm_bytes;
  /// A block-scaled weight format for the linears (fth_recipe.h; FTH_RECIPE_NONE = none):
  /// an NVFP4 or MXFP8 checkpoint served as it is (TensorRT-LLM and vLLM on Blackwell: the
  /// ModelOpt NVFP4 checkpoints, W4A4). The linears' GEMMs run at the recipe's precision
  /// (gemm_bytes follows it: 0.5 for NVFP4, whose FP4 rate a node without one runs at the
  /// next wider precision's), and each stored weight element takes the recipe's width plus
  /// its block scales (fth_recipe_element_bytes: NVFP4 0.5 + 1/16 B), in memory and in
  /// every read of the weights. Each GEMM's input is quantised as under gemm_bytes;
  /// attention, norms, the router and the activations stay at act_bytes.
  fth_recipe recipe;
  double expert_imbalance;
  int flash_attention;
  double comp_comm_eff, comp_mem_eff, comm_mem_eff;
  /// 0 (default): an iteration's TP, TP_MoE and EP collectives run between the kernels
  /// that produce and consume them (a layer's next GEMM needs the all-reduce, the experts
  /// the dispatch), none hidden, as vLLM, TensorRT-LLM and SGLang run a step by default.
  /// 1: two-batch overlap (SGLang --enable-two-batch-overlap, DeepSeek's serving): the batch
  /// runs as two halves whose collectives hide under the other half's kernels, up to
  /// comp_comm_eff of the shorter of the two.
  int batch_overlap;
  /// Decode attention's KV reads under grouped-query attention (g = query heads per KV
  /// head on a GPU): each step reads a KV head 1 + kv_reread (g - 1) times. 0 (default):
  /// a grouped kernel loads each KV head once for its g query heads (FlashDecoding,
  /// FlashInfer, vLLM's and TensorRT-LLM's XQA kernels). 1: one thread block per query
  /// head, each loading its KV head from memory (TensorRT-LLM's masked MHA before XQA);
  /// between them, the share of those repeated loads that miss the L2 cache. MLA's latent
  /// cache is shared by all heads and read once either way.
  double kv_reread;
  fth_tier traffic_tier[FTH_MEM_COMPONENT_COUNT]; ///< kv_cache may live in remote_memory
  fth_tier footprint_tier[FTH_MEM_COMPONENT_COUNT];
  fth_coll_params coll;
  double kernel_launch_s;
  fth_kernel_model kernel_model; ///< tiled (default) or roofline
  fth_mem_reserve reserve;       ///< runtime context and allocator slack per GPU
} fth_infer_def;

fth_infer_def fth_infer_def_default(void);

typedef struct fth_infer_plan {
  fth_node_def node;
  fth_topology_def topo;
  fth_model_def model;
  fth_infer_def inf;
  fth_layout layout;   ///< degrees, groups, stage split, shapes, parameters per stage
  double microbatches; ///< per DP rank
  fth_pass pass;
} fth_infer_plan;

/// Validate and derive. Errors are prefixed like fth_train_compile's.
fth_status fth_infer_compile(fth_infer_plan *plan, const fth_node_def *node,
                             const fth_topology_def *topo, const fth_model_def *model,
                             const fth_infer_def *def, fth_pass pass, fth_error *err);

/// The work of one micro-batch's iteration as an execution trace lays it out
/// (fth_trace.h), from the functions fth_infer_evaluate times it with: one
/// dense [0] / MoE [1] block's forward (prefill: the prompt; decode: one
/// token per request at the mean context), the head (and the embedding when
/// PP = 1), the pipeline hand-off. Backward and recompute phases stay empty.
void fth_infer_trace_work(const fth_infer_plan *plan, fth_train_work *out);

typedef struct fth_infer_result {
  double time_s; ///< prefill: until the last micro-batch's first token; decode: all steps
  double ttft_s; ///< prefill: time to first token of the batch
  double tpot_s; ///< decode: time per output token at the mean context
  double tpot_first_s, tpot_last_s; ///< decode: at the first and the last step's context
  double stage_s;                   ///< one micro-batch through the slowest stage (mean context)
  double tokens_per_s; ///< whole system: prompt tokens (prefill) or generated tokens (decode)
  double tokens_per_s_per_gpu;
  fth_phase pass;                   ///< one micro-batch through the slowest stage
  double weights_read_s; ///< memory time of reading the weights, per stage pass
  double kv_read_s;      ///< memory time of reading and appending the KV cache, per stage pass
  double comm_exposed_s[FTH_COMM_KIND_COUNT]; ///< per micro-batch stage pass
  double pp_s;                                ///< exposed pipeline hand-offs, whole time
  double kv_cache_bytes_per_gpu;
  double kv_bytes_per_request_per_gpu;
  fth_memory_footprint mem;
  double max_global_batch; ///< the largest batch (multiple of micro-batch x DP) that fits
} fth_infer_result;

/// Evaluate a compiled plan. Pure, allocation-free.
void fth_infer_evaluate(const fth_infer_plan *plan, fth_infer_result *out);

/// One engine iteration of the slowest stage for a micro-batch of `requests`
/// requests, each with `new_tokens` new tokens (a prefill chunk, or 1 when
/// decoding) against `context` tokens already cached: kernels, KV reads from
/// the cache's tier, weight reads and TP/EP/CP collectives, with the layer
/// collectives' exposed share in `exposed` (may be NULL). Returns the stage
/// time in seconds. Uses the compiled plan as is (no recompilation): what a
/// serving simulator calls for every iteration.
double fth_infer_iteration(const fth_infer_plan *plan, double requests, double new_tokens,
                           double context, fth_phase *out, double *exposed);

/// A prefill chunk in a serving iteration: `new_tokens` prompt tokens of one
/// request computed against `context` tokens already in its KV cache.
typedef struct fth_infer_chunk {
  double new_tokens;
  double context;
} fth_infer_chunk;

/// One engine iteration's batch on one replica (per DP rank): decoding
/// requests (one new token each) and prefill chunks, each with its own context.
typedef struct fth_infer_batch {
  double decode_requests;    ///< requests generating one token
  double decode_context_sum; ///< sum over them of the tokens each attends to (cached + new)
  const fth_infer_chunk *chunks; ///< caller-owned, `num_chunks` entries (may be NULL when 0)
  int num_chunks;
  /// Attention data parallelism: the mean tokens per rank over the engine's DP ranks
  /// this iteration. Each rank runs attention and its other linears over its own
  /// batch, but the routed experts (EP over the ranks) serve every rank's tokens, so
  /// their load per GPU follows the engine's mean. 0: this batch's own tokens (one
  /// rank, or ranks with equal batches).
  double engine_tokens;
  /// Speculative decoding with the model's MTP module: each decode verifies this many
  /// draft tokens beside its own (1 + spec_tokens query tokens through every layer,
  /// attending to its context, and scored by the LM head), after the module drafted
  /// them: spec_tokens passes, one after another, of one block of the last stage's
  /// kind and the LM head over the decodes (fth_infer_draft_s). 0: none.
  double spec_tokens;
  /// 1: the drafts come from a separate draft model that the caller costs
  /// (fth_serve_draft_cost); this pass only verifies them, no MTP drafting charged.
  int spec_external;
} fth_infer_batch;

/// The time in seconds of one engine iteration of the slowest stage for a
/// mixed batch (Sarathi-Serve: prefill chunks piggy-backed on decodes): the
/// linears, element-wise work, KV appends and TP/EP collectives run once over
/// all the batch's tokens; the attention core runs per context (decodes read
/// their KV cache from its tier; each chunk attends to its context plus
/// itself; chunks of equal size and context share one kernel); the LM head
/// scores one token per request; with `engine_tokens` set, the routed experts
/// carry that mean load instead of the batch's. `out` receives the stage's phase, `exposed`
/// (may be NULL) each collective kind's exposed share. A batch of equal
/// decodes (context c each) costs what fth_infer_iteration(p, n, 1, c) does,
/// a batch of equal chunks what fth_infer_iteration(p, n, q, c) does. Pure,
/// allocation-free; an empty batch costs 0.
/// One MTP draft pass for `requests` decodes attending to `context` tokens each: one
/// block of the last stage's kind (MoE when it holds MoE blocks) and the LM head, as a
/// decode step of a one-layer model costs them; pipelines draft on the last stage.
double fth_infer_draft_s(const fth_infer_plan *plan, double requests, double context);

double fth_infer_iteration_mixed(const fth_infer_plan *plan, const fth_infer_batch *batch,
                                 fth_phase *out, double *exposed);

/// One pipeline hand-off (stage to stage) of `tokens` tokens' [tokens, h] activation, in
/// seconds, not overlapped; 0 without PP.
double fth_infer_pp_hop_s(const fth_infer_plan *plan, double tokens);

/// KV-cache tokens one DP rank of the plan can hold: the room its KV tier has
/// after the weights, the forward transient and the reserve, over the bytes
/// one token's keys and values take on one GPU (the pages a serving engine's
/// block manager hands out, vLLM's gpu_memory_utilization aside). 0 when
/// nothing is left.
double fth_infer_kv_capacity_tokens(const fth_infer_plan *plan);

/// The same with a separate draft model for speculative decoding on the same GPUs
/// (`draft` compiled on the plan's node and TP; NULL: none): the draft's weights per GPU
/// come off the room, and every token keeps its KV in both models, so the room is
/// divided by the sum of the two models' KV bytes per token.
double fth_infer_kv_capacity_tokens_draft(const fth_infer_plan *plan, const fth_infer_plan *draft);

#endif
