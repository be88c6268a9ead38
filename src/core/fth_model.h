/* fth_model.h: a decoder-only transformer (dense or MoE; MHA, GQA or MLA
 * attention; plain or gated MLP) described once, and the per-layer shapes,
 * parameter counts and activation sizes the step models are built from.
 * Everything here is per token or per layer and independent of parallelism,
 * except where a function takes the TP degree explicitly. */
#ifndef FTH_MODEL_H
#define FTH_MODEL_H

#include "fth_common.h"

/// Most multi-token-prediction modules a model may train (DeepSeek-V3: 1).
#define FTH_MAX_MTP_LAYERS 8

typedef struct fth_model_def {
  int d_model;       ///< hidden size h
  int n_layers;      ///< transformer blocks (dense + MoE)
  int num_heads;     ///< query heads a
  int num_kv_heads;  ///< K/V heads (GQA); 0 = num_heads
  int head_dim;      ///< per-head dim; 0 = d_model / num_heads
  double ffn_hidden; ///< dense FFN inner size; 0 = mlp_ratio x d_model
  double mlp_ratio;  ///< used when ffn_hidden == 0
  int gated_mlp;     ///< 1: SwiGLU (gate, up, down); 0: plain (up, down) with GeLU
  int squared_relu;  ///< plain MLP with relu(x)^2 (Nemotron-4, Nemotron-H), run unfused
  int vocab_size;
  int max_seq_len;
  int learned_pos_emb; ///< 1: GPT-style learned position table (max_seq_len x h)
  int tied_embeddings; ///< 1: LM head shares the embedding matrix
  /* MoE (num_experts <= 1 means dense) */
  int num_experts;          ///< routed experts per MoE layer
  int top_k;                ///< routed experts selected per token
  int num_shared_experts;   ///< always-active experts per MoE layer
  double expert_ffn_hidden; ///< inner size of one expert; 0 = ffn_hidden
  int first_dense_layers;   ///< leading layers that stay dense (DeepSeek-V3: 3)
  int moe_layer_interval;   ///< every k-th layer after the dense ones is MoE; 0 or 1 = all
  /* Node-limited (group-limited) routing (DeepSeek-V3 report Sec. 2.1.2; HF config keys):
   * the experts form n_group equal groups and a token picks its experts from at
   * most topk_group of them. 0 = unrestricted. */
  int n_group;    ///< expert groups (0 = none)
  int topk_group; ///< groups one token may route to (0 = unrestricted)
  /* Multi-token prediction (DeepSeek-V3 report Sec. 2.2; HF num_nextn_predict_layers):
   * each MTP module is one more block of the last layer's kind, a projection of
   * [h; h] to h and another pass of the shared LM head and loss. Training only;
   * Megatron-Core and DeepSeek put them on the last pipeline stage. */
  int mtp_layers; ///< MTP modules (0 = none, at most FTH_MAX_MTP_LAYERS)
  /* Sliding-window attention (Beltagy et al. 2020): windowed layers see the last
   * attention_window positions; every full_attention_interval-th layer attends in full
   * (gpt-oss 2: alternating; Gemma 3 6: five local, one global; 0: every layer windowed,
   * Mistral 7B). attention_window 0 = full attention everywhere. */
  double attention_window;
  int full_attention_interval;
  /* Attention sinks (gpt-oss): a learned per-head logit in every softmax's denominator
   * (a "learnable" softmax offset); what it costs is the attention kernel's, set by the
   * workload (fth_train_def.attention_sink_rate_share). */
  int attention_sinks;
  /* MLA (DeepSeek-V2/V3); kv_lora_rank == 0 means ordinary attention */
  int q_lora_rank; ///< 0 = queries not compressed
  int kv_lora_rank;
  int qk_nope_head_dim;
  int qk_rope_head_dim;
  int v_head_dim;
  /* Hybrid Mamba2-Transformer (Nemotron-H; Megatron-Core's hybrid_override_pattern, where
   * each character is one sub-layer with its own pre-norm and residual: M Mamba2 mixer,
   * * self-attention, - MLP, E MoE, as Nemotron 3). All 0 = a plain transformer. A
   * hybrid's n_layers is its block count, ceil((M + * + - + E) / 2): a block is two
   * sub-layers' worth (every block an MoE block when E > 0), the pattern's
   * mix averaged over the blocks (fth_model_shares), so the totals of FLOPs, weights,
   * activations and TP collectives are the pattern's. */
  int hybrid_mamba;     ///< M sub-layers
  int hybrid_attention; ///< * sub-layers
  int hybrid_mlp;       ///< - sub-layers
  int hybrid_moe;       ///< E sub-layers (MoE; not with - sub-layers)
  /* Mamba2 mixer (Dao & Gu 2024, "Transformers are SSMs", Sec. 7; Megatron-Core MambaMixer) */
  int mamba_state_dim;   ///< N (d_state)
  int mamba_head_dim;    ///< P
  int mamba_num_heads;   ///< H; 0 = 2 d_model / P (expand 2)
  int mamba_num_groups;  ///< G: heads sharing one B and C
  int mamba_conv_kernel; ///< width of the depthwise causal conv1d (4)
  int mamba_chunk;       ///< SSD chunk length Q (128: Megatron-Core's MambaMixer)
} fth_model_def;

/// Sub-layers of each kind per block: *mamba, *attn, *mlp (the FFN: MLP, or MoE with E
/// sub-layers; a transformer: 0, 1, 1).
void fth_model_shares(const fth_model_def *def, double *mamba, double *attn, double *mlp);
/// Mamba2 inner width d_inner = H P.
double fth_model_mamba_inner(const fth_model_def *def);

/// Forward FLOPs per token of one Mamba2 mixer's SSD scan and conv1d (its projections
/// aside), for `heads` heads and `groups` groups (a TP rank's share or the whole layer);
/// fth_model.c derives it from the SSD algorithm.
double fth_model_ssd_flops_per_token(const fth_model_def *def, double heads, double groups);

fth_model_def fth_model_def_default(void);
/// Validates the def (positive sizes, heads divisible by kv heads, top_k <=
/// num_experts, MLA dims complete when kv_lora_rank > 0). Paths are field names.
fth_status fth_model_check(const fth_model_def *def, fth_error *err);

/// How a linear layer's weight is split by tensor parallelism (Megatron, Shoeybi et al. 2019).
typedef enum fth_shard {
  FTH_SHARD_COLUMN = 0, ///< output features split over TP
  FTH_SHARD_ROW = 1,    ///< input features split over TP (followed by a reduction)
  FTH_SHARD_NONE = 2    ///< replicated on every TP rank (routers, MLA down-projections)
} fth_shard;

/// Which part of the layer a linear belongs to (for breakdowns and routing).
typedef enum fth_part {
  FTH_PART_ATTN = 0,   ///< attention projections
  FTH_PART_MLP = 1,    ///< dense MLP
  FTH_PART_ROUTER = 2, ///< MoE gate
  FTH_PART_EXPERT = 3, ///< one routed expert (applied to top_k tokens-worth per token)
  FTH_PART_SHARED = 4, ///< shared experts (every token)
  FTH_PART_COUNT
} fth_part;

/// One weight matrix: y[out] = W x[in] per token.
typedef struct fth_linear {
  double in, out;
  fth_shard shard;
  fth_part part;
  double share; ///< the block's share that runs it (a hybrid's mixer or attention; 1 otherwise)
} fth_linear;

#define FTH_MAX_LINEARS 12

/// The shape of one block. For MoE blocks the EXPERT linears describe ONE
/// expert; the caller multiplies by tokens routed to it.
/// Which linears carry LoRA adapters (PEFT's and NeMo's target_modules).
typedef enum fth_lora_targets {
  FTH_LORA_ALL_LINEAR = 0, ///< every linear but router and routed experts (PEFT "all-linear")
  FTH_LORA_ATTENTION = 1,  ///< the attention projections only (NeMo's "attention": QKV and output)
  FTH_LORA_MLP = 2,        ///< the dense and shared-expert MLPs only
  FTH_LORA_TARGETS_COUNT
} fth_lora_targets;

const char *fth_lora_targets_name(fth_lora_targets t);  ///< "all_linear", "attention", "mlp"
fth_lora_targets fth_lora_targets_parse(const char *name); ///< FTH_LORA_TARGETS_COUNT if unknown

/// Whether LoRA adapters under `targets` attach to linear `l` (Hu et al. 2021): never to
/// the MoE router or the routed experts (expert LoRA is not modelled).
int fth_linear_takes_lora(const fth_linear *l, fth_lora_targets targets);

typedef struct fth_layer_shape {
  int is_moe;
  int num_linears;
  fth_linear lin[FTH_MAX_LINEARS];
  /* attention core */
  double heads, kv_heads;    ///< query heads; K/V heads as seen by the score GEMMs (MLA: = heads)
  double d_qk, d_v;          ///< per-head dims of scores and values
  double kv_cache_per_token; ///< elements cached per token per layer (GQA: 2 kv hd; MLA: kv_lora +
                             ///< rope)
  /* parameters (elements) */
  double params_attn; ///< attention weights (norms are in params_norm)
  double params_mlp;  ///< dense MLP weights (0 for MoE blocks)
  double params_router;
  double params_per_expert;
  double params_shared; ///< all shared experts together
  double params_norm;   ///< norm weight vectors of the block (2 h, + q_lora + kv_lora for MLA)
  /* Hybrid blocks (fth_model_shares): the attention core and the MLP run attn_share and
   * mlp_share times a block (1 in a transformer), the Mamba2 mixer mamba_share times;
   * the linears above are already scaled (widths times the share). */
  double attn_share, mlp_share, mamba_share;
  double params_mamba; ///< the mixers' conv1d weight and bias, dt_bias, A_log and D
} fth_layer_shape;

/// LoRA adapter parameters of one block per GPU at rank `r`: A (in x r) and B (r x out)
/// per adapted linear, each sharded as its linear is (column-parallel: B split over TP;
/// row-parallel: A split), so r (in / tp_in + out / tp_out) per linear.
double fth_layer_lora_params(const fth_layer_shape *sh, double r, double tp,
                             fth_lora_targets targets);

/// Dense MLP width: ffn_hidden_size, else mlp_ratio x d_model (the one fallback).
double fth_model_ffn_hidden(const fth_model_def *def);
/// One expert's width: expert_ffn_hidden_size, else the dense MLP width.
double fth_model_expert_ffn_hidden(const fth_model_def *def);

/// Number of MoE blocks (0 for a dense model).
int fth_model_num_moe_layers(const fth_model_def *def);
/// MoE blocks among layers [first, last) (closed form, constant time).
int fth_model_num_moe_in(const fth_model_def *def, int first, int last);
/// 1 when the last layer is a MoE block: the kind an MTP module's block takes.
int fth_model_last_layer_moe(const fth_model_def *def);
/// Is block `layer` (0-based) an MoE block?
int fth_model_layer_is_moe(const fth_model_def *def, int layer);
/// Shape of a dense (moe = 0) or MoE (moe = 1) block.
fth_layer_shape fth_model_layer_shape(const fth_model_def *def, int moe);

/// Parameter counts in elements.
typedef struct fth_param_count {
  double total;       ///< everything
  double active;      ///< used by one token (top_k routed + shared experts)
  double embedding;   ///< token (+ position) embedding
  double lm_head;     ///< 0 when tied
  double final_norm;  ///< the norm before the LM head (on the last stage)
  double dense_layer; ///< one dense block
  double moe_layer;   ///< one MoE block, all experts
  double moe_layer_active;
  double experts_total; ///< routed expert weights over all MoE blocks
} fth_param_count;

fth_param_count fth_model_params(const fth_model_def *def);

/// Forward FLOPs of one block per token at sequence length `seq` (causal mean
/// context (seq+1)/2 per query), split by part; `attn_core` is the score and
/// value GEMMs. Backward = 2x forward for the GEMMs (data + weight gradient),
/// returned separately so callers never apply a blanket 3x.
typedef struct fth_layer_flops {
  double fwd_part[FTH_PART_COUNT]; ///< linears, FLOP per token (EXPERT: all top_k experts)
  double fwd_attn_core;            ///< QK^T and softmax(.)V, FLOP per token
  double fwd_ssm;                  ///< Mamba2 SSD scan and conv1d, FLOP per token (hybrids)
  double fwd_total;
  double bwd_data;   ///< activation-gradient GEMMs incl. attention core (2x its fwd)
  double bwd_weight; ///< weight-gradient GEMMs (linears only)
} fth_layer_flops;

/// The attention core's work with the model's sliding windows over that of full causal
/// attention, for q_len queries that are the last of kv_len positions, averaged over the
/// layers (1 without windows; the layers' mix as every stage had it).
double fth_model_window_share(const fth_model_def *d, double q_len, double kv_len);

/// Share of the layers that attend through a sliding window (0 without one).
double fth_model_windowed_share(const fth_model_def *d);

/// KV positions kept for `tokens` tokens when a `windowed_share` of the layers keep only
/// their last `window` ((1 - f) tokens + f min(tokens, window); window <= 0: all).
double fth_window_kept_tokens(double tokens, double window, double windowed_share);

/// The KV cache positions a request of `ctx` tokens keeps with the model's sliding windows,
/// over ctx, averaged over the layers: windowed layers keep their last attention_window
/// (vLLM's and SGLang's hybrid KV managers free the rest); 1 without windows.
double fth_model_window_kv_share(const fth_model_def *d, double ctx);

fth_layer_flops fth_model_layer_flops(const fth_model_def *def, int moe, double seq);

/// Embedding lookup is free of FLOPs; the LM head is a GEMM of 2 h V FLOP per token forward.
double fth_model_lm_head_flops_per_token(const fth_model_def *def);

/// Whole-model forward FLOPs per token (all blocks + LM head).
double fth_model_fwd_flops_per_token(const fth_model_def *def, double seq);

typedef enum fth_recompute {
  FTH_RECOMPUTE_NONE = 0,
  FTH_RECOMPUTE_SELECTIVE = 1, ///< attention core recomputed (Korthikanti et al. 2022 Sec. 5)
  FTH_RECOMPUTE_FULL = 2,      ///< only the block input kept
  FTH_RECOMPUTE_OP = 3,        ///< per-op selective (torchtitan "op" SAC): see fth_model_op_mms
  FTH_RECOMPUTE_COUNT
} fth_recompute;

/// Modules a selective recomputation also re-runs in backward (Megatron-Core's
/// recompute_modules, and DeepSeek-V3 Sec. 3.3.3): bits of
/// fth_train_def.recompute_modules, on top of recompute none or selective.
enum {
  FTH_RECOMPUTE_MOD_LAYERNORM = 1u,   ///< the two norms: their outputs are not kept
  FTH_RECOMPUTE_MOD_MLA_UP_PROJ = 2u, ///< MLA's up-projections: Q, K, V rebuilt from the latents
  FTH_RECOMPUTE_MOD_MOE_ACT = 4u,     ///< the experts' activation: its output is not kept
  FTH_RECOMPUTE_MOD_ALL = 7u
};
const char *fth_recompute_module_name(unsigned bit); ///< "layernorm", "mla_up_proj", "moe_act"
unsigned fth_recompute_module_parse(const char *name); ///< 0 when unknown

/// Activation elements per token per block the modules in `mods` leave unsaved:
/// `*act` at the activation width (MLA's Q, K, V, sharded over TP) and `*gemm`
/// at the width GEMM inputs are saved at (the norm outputs, replicated unless
/// SP; each routed copy's activation output, over TP_MoE).
void fth_model_recompute_module_elems(const fth_model_def *def, int moe, unsigned mods, int tp,
                                      int tp_moe, int sp, double routed_per_token, double *act,
                                      double *gemm);

const char *fth_recompute_name(fth_recompute r);     ///< "none", "selective", "full", "op"
fth_recompute fth_recompute_parse(const char *name); ///< FTH_RECOMPUTE_COUNT when unknown

/// Saved activations of one block, bytes per token, following Korthikanti et
/// al. 2022 (Sec. 4.1, 34sbh + 5as^2b for GPT with 2-byte activations and
/// 1-byte dropout masks), generalised to GQA, gated MLPs and MoE:
///   `replicated` parts are not split by TP unless sequence parallelism is on;
///   `sharded` parts are split by TP; `score_per_seq` x seq is the unfused
///   attention-score storage (0 with flash attention or selective recompute).
/// `expert_per_routed_token` is the storage for ONE (token, expert) pair in a
/// routed expert, split by TP_MoE; the caller scales by routed tokens.
typedef struct fth_layer_activations {
  double replicated;
  double sharded;
  double score_per_seq;
  double expert_per_routed_token;
} fth_layer_activations;

/// `elem_bytes`: activation width; `flash`: 1 when attention is fused (no s^2 storage).
fth_layer_activations fth_model_layer_activations(const fth_model_def *def, int moe,
                                                  double elem_bytes, int flash);

/// Bytes per token per block saved for backward under `rc`, on one GPU with TP
/// degree `tp` (and `tp_moe` for experts), sequence parallelism `sp`, for a
/// sequence of `seq` tokens; routed expert storage scaled by
/// `routed_per_token` (= top_k x imbalance x local-expert fraction, caller's job).
double fth_model_activation_bytes_per_token(const fth_model_def *def, int moe, fth_recompute rc,
                                            int tp, int tp_moe, int sp, double seq,
                                            double elem_bytes, int flash, double routed_per_token);

/// The GEMMs of one block as PyTorch's per-op selective checkpointing counts
/// them (torchtitan's activation_checkpoint.mode = "selective" with
/// selective_ac_option = "op"): one aten.mm per weight in forward order
/// (Llama: wq, wk, wv, wo, w1, w3, w2: the fused QKV and gate/up linears of
/// fth_layer_shape split back into separate GEMMs; MLA's linears as they are;
/// MoE: the router gate, then the routed experts' w1, w3, w2, then the shared
/// experts'). The policy keeps a per-block counter of mms, incremented before
/// the test, and recomputes every mm whose count is even: saved[i] is 1 for
/// the 1st, 3rd, 5th ... and 0 for the 2nd, 4th, 6th ... (Llama: wq, wv, w1,
/// w2 saved; wk, wo, w3 recomputed). Returns the count (<= FTH_MAX_OP_MMS).
/// Assumption for MoE blocks: the routed experts' grouped GEMMs count and are
/// saved like plain mms (torchtitan's list names aten.mm only; a grouped_mm
/// outside it would be recomputed and not counted).
///
/// With `keep` nonzero the policy is a named one instead: the mms whose names are in
/// `keep` (FTH_OP_KEEP_* bits) are saved, every other recomputed (MaxText's remat
/// policies, jax.checkpoint_policies.save_only_these_names over its decoder's
/// checkpoint names: query_proj, key_proj, value_proj, context, out_proj, mlpwi_0,
/// mlpwi_1, mlpwo). MLA's projections other than the output count as the query, key
/// and value group, saved when any of the three is; the router is never saved.
#define FTH_MAX_OP_MMS 16
int fth_model_op_mms(const fth_model_def *def, int moe, unsigned keep, fth_linear mm[FTH_MAX_OP_MMS],
                     int saved[FTH_MAX_OP_MMS]);

/// The names a named per-op policy keeps (`keep`, fth_train_def.op_keep).
enum {
  FTH_OP_KEEP_QUERY = 1u,
  FTH_OP_KEEP_KEY = 2u,
  FTH_OP_KEEP_VALUE = 4u,
  FTH_OP_KEEP_CONTEXT = 8u, ///< the attention core's output: without it backward re-runs its forward
  FTH_OP_KEEP_OUT = 16u,
  FTH_OP_KEEP_MLPWI_0 = 32u, ///< the gate projection (SwiGLU's w1, the experts' too)
  FTH_OP_KEEP_MLPWI_1 = 64u, ///< the up projection (w3; a plain MLP's input projection is both)
  FTH_OP_KEEP_MLPWO = 128u,  ///< the down projection (w2)
  FTH_OP_KEEP_NAMES = 8
};
const char *fth_op_keep_name(unsigned bit); ///< "query_proj" ... "mlpwo"
unsigned fth_op_keep_parse(const char *name); ///< 0 when unknown

/// Forward FLOPs per token of the mms that per-op selective checkpointing
/// recomputes in one block (routed experts: top_k tokens-worth per token), under
/// `keep` (0: torchtitan's alternation).
double fth_model_op_recompute_flops_per_token(const fth_model_def *def, int moe, unsigned keep);

/// Saved activation bytes per token of one block under per-op checkpointing with `keep`
/// (0: torchtitan's, as fth_model_activation_bytes_per_token's FTH_RECOMPUTE_OP).
double fth_model_op_activation_bytes_per_token(const fth_model_def *def, int moe, unsigned keep,
                                               int tp, int tp_moe, int sp, double w,
                                               double routed_per_token);

/// KV cache elements per token for the whole model (all blocks).
double fth_model_kv_cache_elems_per_token(const fth_model_def *def);

/// Of the saved activations per token of one block, the elements that are
/// GEMM inputs (the QKV, output-projection, MLP and expert GEMMs'; MLA's
/// up-projections'), placed as fth_model_activation_bytes_per_token places
/// them: a precision recipe keeps those at its GEMM width (Transformer
/// Engine saves the quantised input for the weight gradient).
double fth_model_gemm_input_elems_per_token(const fth_model_def *def, int moe, int tp, int tp_moe,
                                            int sp, double routed_per_token);

/// Of those GEMM inputs, the elements per token saved only for the weight gradient of
/// a frozen linear, which LoRA fine-tuning need not keep (`targets`: the linears whose
/// adapters read the input; routed experts are always frozen). Same sharding as above.
double fth_model_frozen_input_elems_per_token(const fth_model_def *def, int moe,
                                              fth_lora_targets targets, int tp, int tp_moe,
                                              int sp, double routed_per_token);

/// Elements per token of the Q, K and V the attention keeps for backward (heads / TP).
double fth_model_qkv_elems_per_token(const fth_model_def *def, int moe, int tp);

/// Elements per token of the MLP activation function's saved input (gated: the gate
/// and up outputs; plain: the GeLU input), dense or shared and routed experts, sharded
/// as fth_model_layer_activations keeps them.
double fth_model_act_fn_input_elems_per_token(const fth_model_def *def, int moe, int tp,
                                              int tp_moe, double routed_per_token);

#endif
