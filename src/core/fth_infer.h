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
  double expert_imbalance;
  int flash_attention;
  double comp_comm_eff, comp_mem_eff, comm_mem_eff;
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

#endif
