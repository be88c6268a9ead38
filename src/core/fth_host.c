/* fth_host.c: host operators of a block and their time (fth_host.h). */
#include "fth_host.h"

#include <string.h>

/* Operators a block's forward issues in Megatron-Core with Transformer Engine,
 * counted from their forward code (PyTorch-level calls, each costing the host
 * about the same):
 *   attention: norm, QKV projection, split/reshape (3), RoPE on Q and K (2),
 *   core attention, output projection, bias-dropout-add, and the module
 *   bookkeeping around them (about 6): 16; MLA adds its down- and up-projections
 *   and the latent norms (6 more);
 *   dense MLP: norm, fc1, activation, fc2, bias-dropout-add and a reshape: 6;
 *   router: 31 with Transformer Engine's router fusion (72 unfused; NVIDIA 2025,
 *   Sec. 2.1.4) -- the score GEMM, top-k, the routing map, the auxiliary loss;
 *   preprocess: the tokens per expert, their device-to-host copy, the split
 *   sizes, permute and un-permute and the two all-to-all calls: 10;
 *   routed experts: the grouped GEMMs (fc1, fc2) are one cuBLAS launch per local
 *   expert (Transformer Engine's multi-stream grouped GEMM), each input cast per
 *   expert under a recipe, plus the activation, the probability scaling, and the
 *   split and concatenation of the expert inputs: 4. */
#define ATTN_OPS       16.0
#define MLA_EXTRA_OPS  6.0
#define MLP_OPS        6.0
#define ROUTER_OPS     31.0
#define PREPROCESS_OPS 10.0
#define EXPERT_FIXED_OPS 4.0
#define EXPERT_GEMMS   2.0
/* Context-parallel ring attention (Transformer Engine's AttnFuncWithCPAndKVP2P, the p2p
 * exchange): each step of a pass waits on the previous transfer, allocates and posts the
 * next send/receive, views and slices Q and the K/V halves, runs the attention kernel on
 * its own stream and corrects the running softmax statistics and output, with events
 * between the streams: about 25 operators a step forward, about as many backward (dQ and
 * dK/dV accumulated, the gradient transfer posted), counted from its forward and backward
 * loops (TE 2.3, attention/dot_product_attention/context_parallel.py). */
#define CP_RING_STEP_OPS 25.0
/* A LoRA adapter (NeMo's ParallelLinearAdapter.forward, wrapped by LoRALinear.forward):
 * dropout, linear_in, linear_out, the sequence-parallel gather (QKV, fc1) or scatter
 * (output projection, fc2), the alpha / rank scaling and the sum into the base linear's
 * output: 6 operators (its activation is the identity). */
#define LORA_ADAPTER_OPS 6.0
/* Backward: each GEMM's data and weight gradients, each element-wise op's
 * backward: about twice the forward's operators. */
#define BWD_OPS_RATIO 2.0

static const char *const scope_names[FTH_GRAPH_SCOPE_COUNT] = {
    "attn", "mlp", "moe_router", "moe_preprocess", "moe", "full_iteration"};

const char *fth_graph_scope_name(unsigned bit) {
  return fth_bit_name(scope_names, FTH_GRAPH_SCOPE_COUNT, bit);
}

unsigned fth_graph_scope_parse(const char *name) {
  return fth_bit_parse(scope_names, FTH_GRAPH_SCOPE_COUNT, name);
}

fth_host_ops fth_host_block_ops(const fth_model_def *m, int moe, double local_experts,
                                int cast_per_gemm, double ring_steps) {
  fth_host_ops o;
  memset(&o, 0, sizeof o);
  double cast = cast_per_gemm ? 1.0 : 0.0;
  o.attn = ATTN_OPS + 2.0 * cast + (m->kv_lora_rank > 0 ? MLA_EXTRA_OPS : 0.0);
  o.cp_ring = ring_steps > 0 ? CP_RING_STEP_OPS * ring_steps : 0.0;
  double dense = MLP_OPS + 2.0 * cast;
  if (!moe) {
    o.mlp = dense;
    return o;
  }
  o.router = ROUTER_OPS + (m->num_shared_experts > 0 ? dense : 0.0);
  o.preprocess = PREPROCESS_OPS;
  o.experts = EXPERT_FIXED_OPS + EXPERT_GEMMS * (1.0 + cast) * local_experts;
  return o;
}

void fth_host_add_adapters(fth_host_ops *o, double attn, double mlp) {
  o->attn += LORA_ADAPTER_OPS * attn;
  /* a MoE block's adapted shared experts run with its router (fth_host_block_ops) */
  if (o->mlp > 0 || o->router <= 0) o->mlp += LORA_ADAPTER_OPS * mlp;
  else o->router += LORA_ADAPTER_OPS * mlp;
}

void fth_host_block_s(const fth_host_ops *o, unsigned scope, double op_s, double *fwd_s,
                      double *bwd_s) {
  double n = 0, ring = 0;
  if (!(scope & FTH_GRAPH_FULL_ITERATION)) {
    if (!(scope & FTH_GRAPH_ATTN)) {
      n += o->attn;
      ring = o->cp_ring;
    }
    if (!(scope & FTH_GRAPH_MLP)) n += o->mlp;
    if (!(scope & (FTH_GRAPH_MOE_ROUTER | FTH_GRAPH_MOE))) n += o->router;
    if (!(scope & (FTH_GRAPH_MOE_PREPROCESS | FTH_GRAPH_MOE))) n += o->preprocess;
    if (!(scope & FTH_GRAPH_MOE)) n += o->experts;
  }
  *fwd_s = (n + ring) * op_s;
  *bwd_s = (BWD_OPS_RATIO * n + ring) * op_s;
}
