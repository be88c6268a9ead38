/* fth_host.h: the host side of a training step. An eager framework (PyTorch,
 * with Megatron-Core and Transformer Engine's Python modules) spends host time
 * on every operator it issues: Python, PyTorch's dispatcher and the launch.
 * When the GPU finishes kernels faster than the host issues them the pass is
 * host-bound ("CPU overhead": NVIDIA, "Optimizing DeepSeek-V3 Training
 * Performance on GB200 NVL72", Megatron-LM docs/discussions, 2025). Dropless
 * MoE makes it worse: the dispatcher reads the tokens per expert back to the
 * host once a layer, so the host cannot run ahead of the GPU across layers.
 * CUDA graphs replay the parts they capture without host work. */
#ifndef FTH_HOST_H
#define FTH_HOST_H

#include "fth_model.h"

/// Parts of a block a CUDA graph may capture (Megatron-Core's --cuda-graph-scope):
/// bits of fth_train_def.cuda_graph_scope. FULL: the whole iteration.
enum {
  FTH_GRAPH_ATTN = 1u,           ///< the attention sub-layer
  FTH_GRAPH_MLP = 2u,            ///< a dense block's MLP
  FTH_GRAPH_MOE_ROUTER = 4u,     ///< the router (and the shared experts)
  FTH_GRAPH_MOE_PREPROCESS = 8u, ///< the EP dispatcher's preprocessing
  FTH_GRAPH_MOE = 16u,           ///< the whole MoE sub-layer (token-drop MoE only)
  FTH_GRAPH_FULL_ITERATION = 32u,
  FTH_GRAPH_SCOPE_COUNT = 6
};

const char *fth_graph_scope_name(unsigned bit); ///< "attn", ..., "full_iteration"; NULL if not one bit
unsigned fth_graph_scope_parse(const char *name); ///< the bit; 0 if unknown

/// The largest host time per operator a workload may state: 1 ms (eager PyTorch
/// operators take microseconds to tens of microseconds).
#define FTH_HOST_OP_MAX_S 1e-3

/// Host operators one block's forward issues, by the part a graph would capture.
typedef struct fth_host_ops {
  double attn;       ///< attention (or Mamba2) sub-layer
  double mlp;        ///< dense MLP
  double router;     ///< router, top-k and its auxiliary loss; shared experts
  double preprocess; ///< dispatcher: token counts, splits, permutation, all-to-all calls
  double experts;    ///< routed experts: per-expert GEMM launches, casts, activation
  double cp_ring;    ///< context-parallel ring attention's per-step operators (forward; the
                     ///< backward issues about as many, not twice: part of the attention)
} fth_host_ops;

/// Operators of one block's forward on one GPU: `moe` block, `local_experts`
/// experts held, `cast_per_gemm` 1 when a precision recipe quantises each GEMM's
/// input (one more operator per GEMM, per expert in a grouped GEMM), `ring_steps`
/// the context-parallel ring's steps a pass summed over the block's attention
/// sub-layers (CP x their share of a block in a hybrid; 0: no ring).
fth_host_ops fth_host_block_ops(const fth_model_def *m, int moe, double local_experts,
                                int cast_per_gemm, double ring_steps);

/// Add the operators of LoRA adapters to a block's: `attn` adapted linears in the
/// attention sub-layer, `mlp` in the MLP or shared experts (each adapter's own dropout,
/// down- and up-projection, sequence-parallel gather or scatter, scaling and the sum
/// into the base output: NeMo's ParallelLinearAdapter.forward and LoRALinear.forward).
void fth_host_add_adapters(fth_host_ops *ops, double attn, double mlp);

/// Host seconds of one block's forward and backward passes: the operators not
/// captured by `graph_scope`, `op_s` each; the backward issues twice the forward's
/// (data- and weight-gradient GEMMs, each element-wise op's backward), but the CP
/// ring's as many as its forward; a graph of the attention captures the ring too.
void fth_host_block_s(const fth_host_ops *ops, unsigned graph_scope, double op_s, double *fwd_s,
                      double *bwd_s);

#endif
