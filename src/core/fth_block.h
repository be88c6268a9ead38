/* fth_block.h: one transformer block on one GPU, for a micro-batch of
 * requests: its kernels (linears, attention core, element-wise work) and its
 * layer collectives (TP, TP_MoE, EP, CP), forward and backward for training,
 * forward for prefill, one new token against a cached context for decode.
 * The only home of the TP/EP/CP message sizes and of the element-wise counts,
 * so every step model costs a block the same way. The LM head and embedding
 * of a micro-batch are here too. */
#ifndef FTH_BLOCK_H
#define FTH_BLOCK_H

#include "fth_collective.h"
#include "fth_layout.h"
#include "fth_phase.h"

typedef enum fth_block_mode {
  FTH_BLOCK_TRAIN = 0, ///< forward and backward, no KV cache
  FTH_BLOCK_PREFILL,   ///< forward, keys and values written to the cache
  FTH_BLOCK_DECODE,    ///< forward of q new tokens against ctx cached ones, read from the KV tier
} fth_block_mode;

/// How a block runs: kernels, layout, widths and the collective parameters.
/// FP8 dispatch sends one fp32 scale per 128 elements of each token (DeepEP): bytes per element.
#define FTH_DISPATCH_SCALE_BYTES (4.0 / 128.0)

typedef struct fth_block_env {
  fth_phase_ctx k;
  const fth_layout *lay;
  const fth_model_def *model;
  const fth_coll_params *coll;
  fth_block_mode mode;
  double act_bytes;        ///< activations and compute operands
  double weight_bytes;     ///< stored weights
  /// the LM head's stored weights where they differ (0 = weight_bytes): a serving engine's
  /// quantised checkpoint keeps its embedding and LM head at the activations' width
  double vocab_weight_bytes;
  double kv_bytes;         ///< KV cache; in training the CP exchanges' Q/K/V width
  double kv_bw;            ///< bandwidth of the KV cache's tier (decode)
  double kv_reread;        ///< decode: share of a GQA group's extra KV loads (fth_infer_def)
  double expert_imbalance; ///< busiest EP rank's routed load / mean (>= 1)
  int flash_attention;
  int tp_overlap_backward_rs; ///< the backward's TP input-gradient reductions hide under the
                              ///< weight-gradient GEMMs (fth_train_def.tp_overlap_backward_rs)
  double tp_gather_bytes; ///< width of the SP all-gathers feeding the linears (0 = act_bytes):
                          ///< a recipe's quantised width where it casts before gathering
  unsigned op_keep;       ///< per-op recomputation's named policy (fth_model_op_mms; 0: torchtitan's)
  double sink_rate_share; ///< attention with sinks at this share of the fused rate, windows whole (0 = none)
  fth_cp_comm cp_comm;  ///< ring (p2p) or all-to-all context parallelism (fth_block.c)
  int sequence_parallel;
  int eager_elementwise; ///< 1: eager PyTorch element-wise ops (fp32 norm/RoPE chains, lone SiLU)
  double ep_dispatch_override_s; ///< time of one EP dispatch, if simulated (0 = model)
  double ep_combine_override_s;  ///< time of one EP combine, if simulated (0 = dispatch's, by bytes)
  double dispatch_bytes;    ///< width of routed copies in dispatch (0 = act_bytes); combine: act_bytes
  double comm_compute_share; ///< share of the compute units the EP kernels hold in MoE blocks (0 = none)
  int ep_per_node;          ///< the dispatcher sends a token once per node it reaches (DeepEP)
  double a2a_scale_out_eff; ///< else (NCCL's all-to-all): share of the scale-out rate it reaches (0 = 1)
  int skip_attention; ///< 1: fth_block_pass leaves out the attention core (fth_block_attention)
} fth_block_env;

/// The local experts (of `local`) that `pairs` routed (token, expert) pairs reach on
/// average when they land uniformly: local (1 - (1 - 1/local)^pairs). Serving passes
/// read and run only these experts' weights.
double fth_block_touched_experts(double local, double pairs);

/// One block for `requests` sequences, `q` new tokens each on this GPU (s / CP
/// in training and prefill), attending to `ctx` tokens (the sequence, or the
/// cached context). `moe` picks the MoE block. `bwd` may be NULL (inference).
void fth_block_pass(const fth_block_env *e, int moe, double requests, double q, double ctx,
                    fth_phase *fwd, fth_phase *bwd);

/// The attention core alone of one block for `requests` sequences of `q` new
/// tokens against `ctx` (as fth_block_pass costs it), added to `fwd` (not
/// cleared): for a batch whose requests attend to different contexts (a
/// serving iteration mixing prefill chunks and decodes), whose other kernels
/// fth_block_pass costs once for all its tokens with `skip_attention` set.
void fth_block_attention(const fth_block_env *e, int moe, double requests, double q, double ctx,
                         fth_phase *fwd);

/// The LM head (and loss, in training) of the last stage for the micro-batch,
/// and the embedding lookup when `embedding` (the stage holds the embedding
/// too: one stage, PP = 1); inference scores only each request's next token.
void fth_block_head(const fth_block_env *e, double requests, double q, int embedding,
                    fth_phase *fwd, fth_phase *bwd);

/// The layer collectives of one block alone (no kernels): what fth_block_pass
/// adds for TP, TP_MoE, EP and CP, for callers that need only the bytes.
void fth_block_comm(const fth_block_env *e, int moe, double requests, double q, fth_phase *fwd,
                    fth_phase *bwd);

/// What the recompute modules `mods` (FTH_RECOMPUTE_MOD_*) re-run in one
/// block's backward: the two norms (one read and one write of [tokens, h]
/// each), MLA's query and key/value up-projection GEMMs (at the recipe's
/// GEMM precision), the experts' activation over every routed copy.
void fth_block_recompute_modules(const fth_block_env *e, int moe, unsigned mods, double requests,
                                 double q, fth_phase *rec);

/// One multi-token-prediction module's own work for the micro-batch (DeepSeek-AI
/// 2024 Sec. 2.2), its block aside: the embedding lookup of the shifted tokens,
/// the projection of [h; h] to h (TP-sharded) and another pass of the shared LM
/// head and loss. Training only.
void fth_block_mtp(const fth_block_env *e, double requests, double q, fth_phase *fwd,
                   fth_phase *bwd);

/// One micro-batch through a stage of blocks[0] dense and blocks[1] MoE blocks
/// (their single-block phases in blk_f / blk_b; blk_b and bwd may be NULL),
/// with the LM head when `head` (and the embedding when the pipeline has one
/// stage).
void fth_block_stage(const fth_block_env *e, const fth_phase blk_f[2], const fth_phase *blk_b,
                     const int blocks[2], int head, double requests, double q, fth_phase *fwd,
                     fth_phase *bwd);

/// The stage compositions a step model compares: [0] the heaviest stage but
/// the last (no head), [1] the last stage (with the LM head).
void fth_block_stage_blocks(const fth_layout *l, int mid[2], int last[2]);

/// Bytes of one pipeline hand-off: the [tokens, h] activation at a stage
/// boundary, scattered over TP under sequence parallelism.
double fth_block_pp_message_bytes(const fth_block_env *e, double tokens);

/// The largest live forward intermediate of a stage: the MLP's inner
/// activation for `tokens` tokens (gated: 3 f, plain: 2 f; top-k experts'
/// worth in an MoE model) or the fp32 logits of the vocabulary shard for
/// `logit_rows` rows (every token in training, the next token in inference).
double fth_block_transient_bytes(const fth_layout *l, const fth_model_def *m, double act_bytes,
                                 double tokens, double logit_rows);

/// Selective recomputation of an unfused attention core (Korthikanti et al.
/// 2022 Sec. 5): the score GEMMs and the softmax/dropout passes of `layers`
/// blocks, added to `rec`. Flash attention recomputes nothing extra.
void fth_block_recompute_attention(const fth_block_env *e, double requests, double seq,
                                   double layers, fth_phase *rec);

/// Per-op selective recomputation (torchtitan's "op" SAC, fth_model_op_mms)
/// of one block for `requests` sequences of `q` tokens on this GPU: the
/// forward GEMMs of the recomputed mms, every element-wise kernel of the
/// forward and the TP collectives that are not saved, into `rec` (cleared
/// first). The attention core is saved (torchtitan's SDPA), unless a named policy
/// (e->op_keep) leaves out the context: then its forward over `ctx` keys re-runs too.
void fth_block_recompute_op(const fth_block_env *e, int moe, double requests, double q, double ctx,
                            fth_phase *rec);

#endif
