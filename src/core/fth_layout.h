/* fth_layout.h: where a model sits on a cluster. From the node, the topology
 * and the model: the parallel degrees, the communication group of every kind
 * (its levels on the physical dimensions), the pipeline's stage split, the
 * layer shapes and the parameters one GPU of the busiest stage holds. Every
 * "0 = use X" default of the model (FFN widths) is resolved here, once, and
 * every step model (training, prefill, decode, serving) reads it from here. */
#ifndef FTH_LAYOUT_H
#define FTH_LAYOUT_H

#include "fth_common.h"
#include "fth_hardware.h"
#include "fth_model.h"
#include "fth_topology.h"

/// Kinds of communication, each with its own group and reported on its own.
typedef enum fth_comm_kind {
  FTH_COMM_TP = 0, ///< attention + dense-MLP tensor parallel collectives
  FTH_COMM_TP_MOE, ///< expert tensor parallel collectives
  FTH_COMM_EP,     ///< MoE dispatch + combine all-to-all
  FTH_COMM_CP,     ///< context parallel K/V exchange
  FTH_COMM_PP,     ///< pipeline send/recv
  FTH_COMM_DP,     ///< dense-parameter gradient reduction (and ZeRO parameter gathers)
  FTH_COMM_DP_MOE, ///< expert-parameter gradient reduction
  FTH_COMM_KIND_COUNT
} fth_comm_kind;

const char *fth_comm_kind_name(fth_comm_kind k); ///< "tp", "tp_moe", "ep", "cp", "pp", "dp", "dp_moe"

/// How context-parallel ranks share the attention (Megatron-Core / Transformer Engine
/// cp_comm_type; fth_block.c costs both).
typedef enum fth_cp_comm {
  FTH_CP_P2P = 0, ///< ring attention: K/V passed rank to rank, CP steps (the default)
  FTH_CP_A2A,     ///< all-to-all of Q, K, V and O: each rank attends the whole sequence
                  ///< with heads / CP heads (DeepSpeed-Ulysses, Jacobs et al. 2023)
  FTH_CP_COMM_COUNT
} fth_cp_comm;

const char *fth_cp_comm_name(fth_cp_comm c); ///< "p2p", "a2a"
fth_cp_comm fth_cp_comm_parse(const char *name); ///< FTH_CP_COMM_COUNT if unknown

/// One communication group: its levels on the physical dimensions.
typedef struct fth_group {
  fth_group_level lv[FTH_MAX_PHYS_DIMS];
  int n;    ///< levels (0 = no communication)
  int dim;  ///< innermost physical dimension (-1 if none)
  int size; ///< GPUs in the group (product of the levels)
} fth_group;

typedef struct fth_layout {
  double num_gpus;
  int tp, tp_moe, dp, dp_moe, ep, ep_su, ep_so, pp, cp;
  fth_group group[FTH_COMM_KIND_COUNT]; ///< DP's spans DP_Attn x CP (the gradients' group)
  int layers_per_stage;       ///< ceil(n_layers / pp): the fullest stage
  int moe_layers_per_stage;   ///< MoE blocks of the heaviest stage but the last
  int dense_layers_per_stage; ///< its dense blocks
  int last_stage_layers;      ///< the last stage's (it also carries the LM head)
  int last_stage_moe;         ///< of which MoE blocks
  int first_stage_layers;     ///< the first stage's (with the embedding)
  int first_stage_moe;        ///< of which MoE blocks
  int split_first, split_last; ///< layers asked of the first / last stage (0: the even rule)
  int mid_stage_layers, mid_stage_moe; ///< the heaviest stage between them (0 when PP <= 2)
  double local_experts; ///< routed experts per GPU per MoE layer (E / EP)
  double ffn_hidden;    ///< dense MLP width (ffn_hidden_size, else mlp_ratio x d_model; x mlp_share)
  double expert_ffn;    ///< one expert's width (expert_ffn_hidden_size, else ffn_hidden)
  fth_layer_shape dense_shape, moe_shape;
  fth_param_count params;
  double stage_dense_params;  ///< dense parameters one GPU of the busiest stage holds (TP-sharded)
  double stage_expert_params; ///< expert parameters it holds (E / EP experts sharded by TP_MoE)
  double stage_vocab_params;  ///< of stage_dense_params, the embedding's and the LM head's
  /// Placed topologies only (fth_topology_def.placed; zero otherwise): each kind's groups as
  /// they fall on the pods (fth_topology_place; EP over EP_SU x EP_SO, DP over DP_Attn x CP),
  /// and each tag's own, which decide who shares a dimension (EP_SU's is EP's, EP_SO's
  /// empty: EP is one group however it is listed).
  int placed;
  fth_rank_place kind_place[FTH_COMM_KIND_COUNT];
  fth_rank_place tag_place[FTH_TAG_COUNT];
} fth_layout;

/// Derive the layout, checking that the logical sizes tile the GPUs and
/// divide the heads and experts. Paths are prefixed "topology.logical".
fth_status fth_layout_make(fth_layout *lay, const fth_topology_def *topo,
                           const fth_model_def *model, fth_error *err);

/// Layers of pipeline stage `s` (0-based, < lay->pp) and how many of them are
/// MoE blocks, by the layout's split (fth_layout_make's even rule: the short
/// stages are the last, the first, then the others from the back; or the
/// counts fth_layout_split set).
void fth_layout_stage_layers(const fth_layout *lay, const fth_model_def *model, int s, int *layers,
                             int *moe);

/// Layers of pipeline stage `s` (O(1); fth_layout_stage_layers also counts its MoE blocks).
int fth_layout_stage_size(const fth_layout *lay, const fth_model_def *model, int s);

/// Re-split the layers with `first` layers on the first stage and `last` on
/// the last (Megatron-Core's num_layers_in_first_pipeline_stage and
/// ..._last_pipeline_stage; 0: that end follows the even rule), the others
/// sharing the rest as evenly as they can (the short ones from the back).
/// With two stages one count decides the other. Every stage keeps at least one
/// layer. Re-derives the stage fields and the busiest stage's parameters;
/// FTH_ETILE (path `path`) when the counts do not fit the layers.
fth_status fth_layout_split(fth_layout *lay, const fth_model_def *model, int first, int last,
                            const char *path, fth_error *err);

/// Re-derives every group's bandwidth with the links shared by traffic
/// (fth_topology_group_by_traffic), from each communication kind's bytes per
/// step; degrees and sizes are unchanged.
void fth_layout_regroup(fth_layout *lay, const fth_topology_def *topo,
                        const double kind_bytes[FTH_COMM_KIND_COUNT]);

/// Micro-batches per DP rank for `global_batch` sequences in micro-batches of
/// `micro_batch` (FTH_ETILE unless they tile), with `seq_len` checked
/// against CP and, when `seq_len` is 0, not at all.
fth_status fth_layout_batch(const fth_layout *lay, double global_batch, double micro_batch,
                            double seq_len, double *microbatches, fth_error *err);

/// KV elements per token per block one GPU holds: GQA splits the K/V heads
/// over TP (replicated when there are fewer heads than ranks); MLA's latent
/// is replicated on every TP rank.
double fth_layout_kv_elems_per_gpu(const fth_layout *lay, const fth_model_def *m,
                                   const fth_layer_shape *sh);

#endif
