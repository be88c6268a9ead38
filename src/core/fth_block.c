/* fth_block.c: one block's kernels and layer collectives (fth_block.h). */
#include "fth_block.h"

#include "fth_host.h"

#include <math.h>
#include <string.h>

/* Element-wise counts per element (FLOPs, bytes in units of the activation
 * width): a norm reads and writes h, a residual add reads two h and writes
 * one; the forward pass of both norms and both adds of a block is 2 x 2 + 2 x
 * 3 = 10 h-sized moves at ~5 FLOPs each, split between the attention and MLP
 * halves; backward moves about twice as much at ~8 FLOPs (Korthikanti et al.
 * 2022 Sec. 4.1 counts the same tensors). */
#define NORM_RES_MOVES    10.0
#define NORM_RES_FLOPS    5.0
#define NORM_RES_FLOPS_BW 8.0
/* The MLP activation: gated reads 2 f and writes f, plain reads and writes f;
 * ~8 FLOPs forward (SiLU/GELU), ~13 backward. */
#define ACT_FLOPS    8.0
#define ACT_FLOPS_BW 13.0
/* Squared ReLU (Nemotron-4, Nemotron-H) runs unfused: Megatron-Core's MLP fuses only GeLU
 * and SwiGLU (bias_activation_fusion) and otherwise calls activation_func, NeMo's
 * torch.pow(F.relu(x), 2); HF's ReLUSquaredActivation is the same two ops. Forward: relu
 * (read x, write r) and pow (read r, write y), 2 moves each; backward: pow's (read dy and
 * r, write dr) and relu's threshold_backward (read dr and r, write dx), 3 each. Both keep
 * only r, the one tensor a fused activation keeps. */
#define SQRELU_MOVES_FWD 2.0
#define SQRELU_MOVES_BWD 3.0
#define SQRELU_FLOPS     1.0
/* Eager PyTorch (no fusion: torchtitan without torch.compile; PyTorch 2.x op
 * decompositions as torchtitan's Llama writes them), bytes per element:
 *   RMSNorm, x.float() * rsqrt(x.float().pow(2).mean(-1) + eps), type_as(x),
 *   times the weight: upcast (read w, write 4), pow (4 + 4), mean (4),
 *   scale (4 + 4), downcast (4 + w), weight (w + w): 4 w + 28, where the
 *   fused kernel moves 2 w (read x, write y);
 *   RoPE on Q and K via complex fp32: upcast (w + 4), complex multiply
 *   (4 + 4), downcast (4 + w): 2 w + 16 per element of Q and K, ~6 FLOPs
 *   (a fused RoPE is taken as folded into its neighbours: not counted);
 *   SwiGLU as silu(a) * b: silu (w + w), multiply (2 w + w): 5 w per inner
 *   element, where the fused kernel moves 3 w.
 * The residual adds are one kernel either way. Backward moves twice the
 * forward's bytes, as the fused counts above. */
#define EAGER_NORM_FP32_BYTES 28.0
#define EAGER_ROPE_FP32_BYTES 16.0
#define ROPE_FLOPS            6.0
/* Unfused attention's score matrix: QK^T writes it, scale-mask-softmax reads
 * and writes it, dropout reads it and writes it and a 1-byte mask, P V reads
 * it: 6 w + 1 bytes per score (Korthikanti et al. 2022 Sec. 4.1); ~8 FLOPs
 * forward, ~12 and twice the bytes backward. */
#define SCORE_FLOPS    8.0
#define SCORE_FLOPS_BW 12.0
/* Flash attention's backward recomputes the scores: 2.5x the forward FLOPs
 * (Dao 2023); unfused backward is 2x (dQ, dK, dV GEMMs). */
#define FLASH_BWD_FLOPS   2.5
#define UNFUSED_BWD_FLOPS 2.0
/* Softmax cross-entropy over the vocabulary shard in fp32: ~5 FLOPs and
 * 4 + w bytes per logit. */
#define LOSS_FLOPS 5.0
/* MoE routing around the experts (Megatron-Core's token dispatcher, DeepEP):
 * the router's softmax (or sigmoid) and top-k over the fp32 scores, ~10 FLOPs
 * and a 4-byte read and write per score; the permutation that gathers each
 * routed copy of a token into expert order before dispatch, and the
 * un-permutation that scatters the returned copies back and sums them with
 * their router weights: each reads and writes every copy once. Backward moves
 * the same again. */
#define ROUTER_FLOPS 10.0
#define ROUTER_BYTES 8.0

static void add(const fth_block_env *e, fth_phase *ph, fth_flop_part part, fth_kernel_cost k,
                double weight_bytes) {
  fth_phase_add_kernel(&e->k, ph, part, k, weight_bytes);
}

/* GEMMs and the attention core, named for the kernel-class split (fth_phase.h). */
static void add_gemm(const fth_block_env *e, fth_phase *ph, fth_flop_part part, fth_kernel_cost k,
                     double weight_bytes) {
  fth_phase_add_kernel_class(&e->k, ph, part, FTH_KERNEL_GEMM, k, weight_bytes);
}

static void add_attn(const fth_block_env *e, fth_phase *ph, fth_kernel_cost k) {
  fth_phase_add_kernel_class(&e->k, ph, FTH_FLOP_ATTENTION, FTH_KERNEL_ATTENTION, k, 0.0);
}

static void scale_cost(fth_kernel_cost *k, double s) {
  k->flops *= s;
  k->bytes *= s;
  k->compute_s *= s;
  k->memory_s *= s;
  k->time_s *= s;
}

/* One collective of `bytes` over the group of `kind`, timed once and added
 * `calls_f` times to the forward pass and `calls_b` times to the backward
 * (when there is one). */
static void comm(const fth_block_env *e, fth_phase *fwd, fth_phase *bwd, fth_comm_kind kind,
                 fth_coll_op op, double bytes, double calls_f, double calls_b) {
  const fth_group *g = &e->lay->group[kind];
  if (g->n == 0 || bytes <= 0) return;
  fth_coll_result r = fth_collective(op, FTH_ALGO_AUTO, bytes, g->lv, g->n, e->coll);
  fth_phase_add_comm(fwd, kind, op, r.algo, bytes, r.time_s, calls_f);
  if (bwd) fth_phase_add_comm(bwd, kind, op, r.algo, bytes, r.time_s, calls_b);
}

/* Per-node dispatch (DeepEP's normal kernels, Megatron's flex/HybridEP): the
 * dispatcher sends a token across the scale-out network once per node that
 * holds any of its experts and forwards it over the scale-up fabric to the
 * GPUs there. NCCL's all-to-all(v), Megatron-Core's alltoall dispatcher, sends
 * every (token, expert) copy on its own (ep_per_node 0: no saving).
 * Of the k routed copies, the scale-out part then carries one per node
 * reached. With the E routed experts spread evenly over the N = EP_SO nodes of
 * the EP group and the k experts of a token drawn without replacement, a node
 * is missed with probability C(E - E/N, k) / C(E, k), so a token reaches
 * N (1 - C(E - E/N, k) / C(E, k)) nodes on average (top-6 of 256 experts over
 * 2 nodes: 1.98, so 6 copies cross as 1.98). Node-limited routing
 * (DeepSeek-AI 2024, Sec. 2.1.2 and 3.2.2) caps it at M' = M (N / n_group)
 * when a group spans several nodes (N > n_group), else M = topk_group. The
 * scale-up part still delivers all k. Returns that share (< 1), or 0 when
 * nothing is saved or the EP group does not span both levels (the all-to-all
 * is then costed whole). */
static double node_limited_share(const fth_block_env *e) {
  const fth_model_def *m = e->model;
  const fth_layout *l = e->lay;
  if (!e->ep_per_node || l->ep_su <= 1 || l->ep_so <= 1 || m->top_k <= 0) return 0.0;
  double n = l->ep_so, E = m->num_experts, k = m->top_k;
  double miss = 1.0; /* C(E - E/N, k) / C(E, k) */
  for (int i = 0; i < m->top_k; i++) miss *= fth_max(0.0, (E - E / n - i) / (E - i));
  double reach = n * (1.0 - miss);
  if (m->topk_group > 0 && m->n_group > 0)
    reach = fth_min(reach, m->topk_group * fth_max(1.0, n / m->n_group));
  reach = fth_min(reach, fth_min(k, n));
  return reach < k ? reach / k : 0.0; /* every copy crosses: nothing saved */
}

/* One EP all-to-all of `bytes` (all one rank sends, own share included),
 * `calls` times in each pass. As NCCL's all-to-all(v) (not ep_per_node), its
 * scale-out levels run at a2a_scale_out_eff of their rate (incast, no NIC
 * aggregation: fth_workload.h FTH_EP_A2A_SCALE_OUT_EFF). Node-limited routing
 * splits it into its two levels: an all-to-all over the scale-up levels of the
 * whole `bytes` and one
 * over the scale-out levels of `share` of them, each costed on its own levels
 * (fth_collective); DeepEP forwards chunks as they arrive, so the two
 * pipeline: the slower transfer sets the time and both latencies add (as
 * fth_collective.c's PXN). */
static void ep_all_to_all(const fth_block_env *e, fth_phase *fwd, fth_phase *bwd, double bytes,
                          double calls) {
  const fth_group *g = &e->lay->group[FTH_COMM_EP];
  double share = node_limited_share(e);
  if (bytes <= 0 || g->n == 0) return;
  /* The scale-up levels come first and multiply to EP_SU (fth_layout.c). */
  int nsu = 0, su = 1;
  while (nsu < g->n && su < e->lay->ep_su) su *= g->lv[nsu++].group_size;
  if (share <= 0 || g->n < 2) {
    /* NCCL's all-to-all(v) reaches a2a_scale_out_eff of the scale-out levels' rate. */
    double eff = e->a2a_scale_out_eff > 0 && !e->ep_per_node ? e->a2a_scale_out_eff : 1.0;
    fth_group_level lv[FTH_MAX_PHYS_DIMS];
    for (int i = 0; i < g->n; i++) {
      lv[i] = g->lv[i];
      if (i >= nsu) lv[i].bw_bytes_per_s *= eff;
    }
    fth_coll_result r = fth_collective(FTH_COLL_ALL_TO_ALL, FTH_ALGO_AUTO, bytes, lv, g->n, e->coll);
    fth_phase_add_comm(fwd, FTH_COMM_EP, FTH_COLL_ALL_TO_ALL, r.algo, bytes, r.time_s, calls);
    if (bwd) fth_phase_add_comm(bwd, FTH_COMM_EP, FTH_COLL_ALL_TO_ALL, r.algo, bytes, r.time_s, calls);
    return;
  }
  fth_coll_result up = fth_collective(FTH_COLL_ALL_TO_ALL, FTH_ALGO_AUTO, bytes, g->lv, nsu, e->coll);
  fth_coll_result out = fth_collective(FTH_COLL_ALL_TO_ALL, FTH_ALGO_AUTO, bytes * share,
                                       g->lv + nsu, g->n - nsu, e->coll);
  /* One kernel: one launch between them. */
  double launch = e->coll ? e->coll->launch_s : 0.0;
  double t = fth_max(up.transfer_s, out.transfer_s) + up.latency_s + out.latency_s - launch;
  fth_phase_add_comm(fwd, FTH_COMM_EP, FTH_COLL_ALL_TO_ALL, out.algo, bytes, t, calls);
  if (bwd) fth_phase_add_comm(bwd, FTH_COMM_EP, FTH_COLL_ALL_TO_ALL, out.algo, bytes, t, calls);
}

/* Routed (token, expert) copies one GPU sends in dispatch: its tokens / TP
 * (the attention TP ranks share the tokens), top-k each, times the busiest
 * rank's excess. */
static double routed_copies(const fth_block_env *e, double tokens) {
  return tokens * e->model->top_k * e->expert_imbalance / e->lay->tp;
}

/* MoE sub-layers per MoE block: 1, or a hybrid's share (fth_model_shares). The experts'
 * linears are already that much narrower; the routing, its permutations and its
 * exchanges happen `share` times a block. */
static double moe_share(const fth_block_env *e) {
  return e->lay->moe_shape.mlp_share;
}

/* A kernel's time as fth_phase_add_kernel charges it. */
static double kernel_s(const fth_block_env *e, fth_kernel_cost k) {
  return fth_overlap(k.compute_s, k.memory_s, e->k.comp_mem_eff) + e->k.launch_s;
}

/* Elements of K and V per token a ring step passes on: the local KV heads', or for
 * MLA every local head's materialised K (d_qk) and V (d_v), not the cached latent. */
static double ring_kv_elems(const fth_block_env *e, const fth_layer_shape *sh) {
  const fth_layout *l = e->lay;
  const fth_model_def *m = e->model;
  return m->kv_lora_rank > 0 ? sh->heads / l->tp * (sh->d_qk + sh->d_v)
                             : fth_layout_kv_elems_per_gpu(l, m, sh);
}

/* Context parallelism's ring attention (Liu et al. 2023; Transformer Engine's
 * AttnFuncWithCPAndKVP2P, Megatron-Core's default cp_comm_type "p2p"; PyTorch's
 * _templated_ring_attention under torchtitan). Each rank holds q = ctx / CP tokens as
 * two chunks of ctx / (2 CP), chunks i and 2 CP - 1 - i (the load-balanced causal
 * split), and runs CP attention steps a pass: step 0 its own causal q x q, each other
 * step the K/V of another rank, received during the step before it: all q queries
 * against the first of that rank's two chunks, or the second half of the queries
 * against both; q^2 / 2 query-key pairs either way, as many as the diagonal's, so the
 * ranks stay balanced (rank-by-rank, step by step). */
static int ring_steps(const fth_block_env *e, double q, double ctx) {
  const int cp = e->lay->cp;
  return (cp > 1 && q * cp == ctx && e->mode != FTH_BLOCK_DECODE) ? cp : 1;
}

static double exposed_part(double transfer_s, double step_s) {
  return fth_max(0.0, transfer_s - step_s);
}

/* The ring's transfers, each a send to the next rank and a receive from the previous
 * (the group's slowest link sets a step's pace): forward, the K/V for step i + 1 moves
 * during step i, CP - 1 transfers; a step cannot start before its K/V is in, so of
 * each transfer max(0, transfer - step) is exposed. Backward, each step's transfer
 * runs under that step's backward kernel: K/V on at step 0, the dK/dV accumulated so
 * far back at step CP - 1, both at the steps between. K/V move at kv_bytes (one byte
 * under FP8 attention: TE passes the quantised K/V), dK/dV at the activation width.
 * step_f / step_b: the diagonal step's kernel time and another step's (HUGE_VAL where
 * only the bytes are wanted). */
static void ring_exchange(const fth_block_env *e, const fth_layer_shape *sh, double reqs, double q,
                          const double step_f[2], const double step_b[2], fth_phase *fwd,
                          fth_phase *bwd) {
  const fth_layout *l = e->lay;
  const fth_group *g = &l->group[FTH_COMM_CP];
  const double cp = l->cp;
  double elems = reqs * q * ring_kv_elems(e, sh);
  double xk = elems * e->kv_bytes, xd = elems * e->act_bytes;
  if (g->n == 0 || cp < 2 || elems <= 0) return;
  fth_coll_result rk = fth_collective(FTH_COLL_SEND_RECV, FTH_ALGO_AUTO, xk, g->lv, g->n, e->coll);
  double tk = rk.time_s;
  double ex = exposed_part(tk, step_f[0]) + (cp - 2.0) * exposed_part(tk, step_f[1]);
  fth_phase_add_paced_comm(fwd, FTH_COMM_CP, FTH_COLL_SEND_RECV, rk.algo, xk, tk, cp - 1.0, ex);
  if (!bwd) return;
  fth_coll_result rd = fth_collective(FTH_COLL_SEND_RECV, FTH_ALGO_AUTO, xd, g->lv, g->n, e->coll);
  fth_coll_result rb =
      fth_collective(FTH_COLL_SEND_RECV, FTH_ALGO_AUTO, xk + xd, g->lv, g->n, e->coll);
  double td = rd.time_s, tb = rb.time_s;
  fth_phase_add_paced_comm(bwd, FTH_COMM_CP, FTH_COLL_SEND_RECV, rk.algo, xk, tk, 1.0,
                           exposed_part(tk, step_b[0]));
  fth_phase_add_paced_comm(bwd, FTH_COMM_CP, FTH_COLL_SEND_RECV, rb.algo, xk + xd, tb, cp - 2.0,
                           (cp - 2.0) * exposed_part(tb, step_b[1]));
  fth_phase_add_paced_comm(bwd, FTH_COMM_CP, FTH_COLL_SEND_RECV, rd.algo, xd, td, 1.0,
                           exposed_part(td, step_b[1]));
}

/* Merging the steps: forward, each step's partial output is rescaled by its log-sum-exp
 * and added into the sum (Transformer Engine's flash_attn_fwd_out_correction; PyTorch's
 * _SDPAMerger), and the LSEs merged in fp32 (read both, write one: 12 bytes per token
 * and head); backward, each step's dQ is added into dQ and its dK/dV into the dK/dV
 * received. Element-wise and memory-bound: the first step copies (2 moves per
 * element), each later one reads its part and reads and writes the sum (3). */
#define RING_MERGE_FLOPS 2.0 /* scale and add, per element */
#define RING_LSE_FLOPS   5.0 /* max, min, exp, log1p, add, per token and head */
#define RING_LSE_BYTES   12.0

static void ring_merges(const fth_block_env *e, double elems, int cp, fth_phase *ph) {
  const double ab = e->act_bytes;
  add(e, ph, FTH_FLOP_ATTENTION, fth_kernel_elementwise(&e->k.env, elems, RING_MERGE_FLOPS, 2.0 * ab),
      0.0);
  for (int i = 1; i < cp; i++)
    add(e, ph, FTH_FLOP_ATTENTION,
        fth_kernel_elementwise(&e->k.env, elems, RING_MERGE_FLOPS, 3.0 * ab), 0.0);
}

/* The fused attention core of a CP rank as ring steps (above): kernels, transfers
 * and merges. `env`: the fused-attention rates; `win`: the sliding-window share. */
static void ring_attention(const fth_block_env *e, const fth_layer_shape *sh,
                           const fth_kernel_env *env, double reqs, double q, double win,
                           fth_phase *fwd, fth_phase *bwd) {
  const fth_layout *l = e->lay;
  const int cp = l->cp;
  const double heads = sh->heads / l->tp, kvh = fth_max(1.0, sh->kv_heads / l->tp);
  fth_kernel_cost k[2];
  k[0] = fth_kernel_attention(env, reqs, heads, kvh, q, q, sh->d_qk, sh->d_v, 1, e->act_bytes);
  k[1] = fth_kernel_attention(env, reqs, heads, kvh, q, q / 2.0, sh->d_qk, sh->d_v, 0,
                              e->act_bytes);
  double step_f[2], step_b[2];
  fth_kernel_cost kb[2];
  for (int i = 0; i < 2; i++) {
    k[i].flops *= win;
    k[i].compute_s *= win;
    k[i].time_s = fth_max(k[i].compute_s, k[i].memory_s);
    kb[i] = k[i];
    kb[i].flops *= FLASH_BWD_FLOPS;
    kb[i].compute_s *= FLASH_BWD_FLOPS;
    kb[i].bytes *= 2.0;
    kb[i].memory_s *= 2.0;
    kb[i].time_s = fth_max(kb[i].compute_s, kb[i].memory_s);
    step_f[i] = kernel_s(e, k[i]);
    step_b[i] = kernel_s(e, kb[i]);
  }
  for (int i = 0; i < cp; i++) {
    add_attn(e, fwd, k[i > 0]);
    if (bwd) add_attn(e, bwd, kb[i > 0]);
  }
  ring_exchange(e, sh, reqs, q, step_f, step_b, fwd, bwd);
  const double tokens = reqs * q;
  ring_merges(e, tokens * heads * sh->d_v, cp, fwd);
  if (cp > 1)
    add(e, fwd, FTH_FLOP_ATTENTION,
        fth_kernel_elementwise(&e->k.env, (cp - 1.0) * tokens * heads, RING_LSE_FLOPS,
                               RING_LSE_BYTES),
        0.0);
  if (bwd) {
    ring_merges(e, tokens * heads * sh->d_qk, cp, bwd);
    ring_merges(e, tokens * ring_kv_elems(e, sh), cp, bwd);
  }
}

/* All-to-all context parallelism (cp_comm a2a: DeepSpeed-Ulysses, Jacobs et al. 2023;
 * Transformer Engine's AttnFuncWithCPAndQKVOA2A, Megatron-Core cp_comm_type "a2a"):
 * before the core an all-to-all over the CP group trades each rank's q = ctx / CP tokens
 * of all its heads for all ctx tokens of heads / CP of them, one exchange each for Q, K
 * and V; after it another sends O back; backward the same for dO, then dQ, dK and dV.
 * Each moves (CP - 1) / CP of one rank's tensor (fth_collective's all-to-all); Q, K and
 * V at kv_bytes (one byte under FP8 attention: TE quantises them before the exchange),
 * the rest at the activation width. The exchanges sit between the projections and the
 * core, on its path: none is hidden. Around each, the tensor is copied to group it by
 * destination and, once received, back into sequence order (TE's movedim/index_select
 * reorders): 2 copies, 4 moves per element at the exchange's width. */
#define A2A_REORDER_MOVES 4.0

static void a2a_exchange(const fth_block_env *e, const fth_layer_shape *sh, double reqs, double q,
                         int copies, fth_phase *fwd, fth_phase *bwd) {
  const fth_layout *l = e->lay;
  const fth_group *g = &l->group[FTH_COMM_CP];
  const double tokens = reqs * q, heads = sh->heads / l->tp, kvh = fth_max(1.0, sh->kv_heads / l->tp);
  /* forward Q, K, V, then O; backward dO, then dQ, dK, dV: the same four sizes */
  const double elems[4] = {tokens * heads * sh->d_qk, tokens * kvh * sh->d_qk,
                           tokens * kvh * sh->d_v, tokens * heads * sh->d_v};
  for (int pass = 0; pass < 2; pass++) {
    fth_phase *ph = pass ? bwd : fwd;
    if (!ph) continue;
    for (int i = 0; i < 4; i++) {
      double width = (pass == 0 && i < 3) ? e->kv_bytes : e->act_bytes;
      double bytes = elems[i] * width;
      if (g->n > 0 && bytes > 0) {
        fth_coll_result r =
            fth_collective(FTH_COLL_ALL_TO_ALL, FTH_ALGO_AUTO, bytes, g->lv, g->n, e->coll);
        fth_phase_add_paced_comm(ph, FTH_COMM_CP, FTH_COLL_ALL_TO_ALL, r.algo, bytes, r.time_s,
                                 1.0, r.time_s);
      }
      if (copies)
        add(e, ph, FTH_FLOP_ATTENTION,
            fth_kernel_elementwise(&e->k.env, elems[i], 0.0, A2A_REORDER_MOVES * width), 0.0);
    }
  }
}

/* The core under a2a: one causal ctx x ctx kernel on heads / CP of the TP rank's heads
 * (as many query-key pairs as the ring's CP steps), nothing to merge. */
static void a2a_attention(const fth_block_env *e, const fth_layer_shape *sh,
                          const fth_kernel_env *env, double reqs, double q, double ctx, double win,
                          fth_phase *fwd, fth_phase *bwd) {
  const fth_layout *l = e->lay;
  const double heads = sh->heads / l->tp, kvh = fth_max(1.0, sh->kv_heads / l->tp);
  fth_kernel_cost k = fth_kernel_attention(env, reqs, heads / l->cp, fth_max(1.0, kvh / l->cp),
                                           ctx, ctx, sh->d_qk, sh->d_v, 1, e->act_bytes);
  k.flops *= win;
  k.compute_s *= win;
  k.time_s = fth_max(k.compute_s, k.memory_s);
  add_attn(e, fwd, k);
  if (bwd) {
    fth_kernel_cost kb = k;
    kb.flops *= FLASH_BWD_FLOPS;
    kb.compute_s *= FLASH_BWD_FLOPS;
    kb.bytes *= 2.0;
    kb.memory_s *= 2.0;
    kb.time_s = fth_max(kb.compute_s, kb.memory_s);
    add_attn(e, bwd, kb);
  }
  a2a_exchange(e, sh, reqs, q, 1, fwd, bwd);
}

/* Attention core: heads / TP query heads. A whole sequence (q = ctx / CP)
 * runs the causal ctx x ctx problem split evenly over CP (load-balanced ring
 * attention: q / ctx of it per rank); a chunk of q < ctx new tokens attends
 * as the last q of ctx positions; decode reads every cached key and value
 * from the KV tier. */
static void attention(const fth_block_env *e, const fth_layer_shape *sh, double reqs, double q,
                      double ctx, fth_phase *fwd, fth_phase *bwd) {
  const fth_layout *l = e->lay;
  double heads = sh->heads / l->tp, kvh = fth_max(1.0, sh->kv_heads / l->tp);
  if (e->mode == FTH_BLOCK_DECODE) {
    double kv_tok = fth_layout_kv_elems_per_gpu(l, e->model, sh);
    /* MLA decodes in latent space (the up-projections absorbed into the
     * query and output, DeepSeek-V2 Sec. 2.1.2; FlashMLA): scores against
     * the kv_lora + rope latent, values of width kv_lora. */
    const fth_model_def *m = e->model;
    double dqk = m->kv_lora_rank > 0 ? m->kv_lora_rank + m->qk_rope_head_dim : sh->d_qk;
    double dv = m->kv_lora_rank > 0 ? m->kv_lora_rank : sh->d_v;
    fth_kernel_cost k;
    double win = fth_model_window_share(m, q, ctx); /* windowed layers read their window */
    k.flops = 2.0 * reqs * q * heads * ctx * (dqk + dv) * win;
    /* A kernel without query-head grouping loads each KV head again for every
     * query head of its group (fth_infer_def.kv_reread); MLA's latent once. */
    double group = m->kv_lora_rank > 0 ? 1.0 : heads / kvh;
    double loads = 1.0 + e->kv_reread * fth_max(0.0, group - 1.0);
    k.bytes = reqs * ctx * kv_tok * e->kv_bytes * win * loads;
    double rate = e->k.env.attention_flops_per_s > 0 ? e->k.env.attention_flops_per_s
                                                     : e->k.env.matrix_flops_per_s;
    k.compute_s = rate > 0 ? k.flops / rate : HUGE_VAL;
    k.memory_s = e->kv_bw > 0 ? k.bytes / e->kv_bw : HUGE_VAL;
    k.time_s = fth_max(k.compute_s, k.memory_s);
    add_attn(e, fwd, k);
    fwd->kv_memory_s += k.memory_s;
    return;
  }
  /* Unfused attention runs as two batched GEMMs at the matrix rate and
   * computes the full score matrix (masking it); fused kernels skip the
   * masked half. */
  fth_kernel_env env = e->k.env;
  if (!e->flash_attention) env.attention_flops_per_s = env.matrix_flops_per_s;
  /* Attention sinks (gpt-oss) as the workload's kernel runs them: Transformer Engine's
   * cuDNN path for a learnable softmax offset reaches sink_rate_share of the fused rate
   * and computes the windowed layers' masked blocks too (the time of full causal layers;
   * the useful FLOPs stay the window's). */
  const int sinks = e->flash_attention && e->sink_rate_share > 0 && e->model->attention_sinks;
  if (sinks) env.attention_flops_per_s = (env.attention_flops_per_s > 0 ? env.attention_flops_per_s
                                                                          : env.matrix_flops_per_s) *
                                         e->sink_rate_share;
  if (ring_steps(e, q, ctx) > 1 && e->flash_attention) {
    double win = sinks ? 1.0 : fth_model_window_share(e->model, ctx, ctx);
    if (e->cp_comm == FTH_CP_A2A)
      a2a_attention(e, sh, &env, reqs, q, ctx, win, fwd, bwd);
    else
      ring_attention(e, sh, &env, reqs, q, win, fwd, bwd);
    return;
  }
  fth_kernel_cost k;
  if (q * l->cp == ctx) {
    k = fth_kernel_attention(&env, reqs, heads, kvh, ctx, ctx, sh->d_qk, sh->d_v,
                             e->flash_attention, e->act_bytes);
    scale_cost(&k, q / ctx);
  } else { /* a chunk: the last q positions of ctx */
    k = fth_kernel_attention(&env, reqs, heads, kvh, q, ctx, sh->d_qk, sh->d_v, e->flash_attention,
                             e->act_bytes);
  }
  /* Sliding windows: fused kernels skip the key blocks outside the window (the
   * unfused path computes the whole matrix and masks it). */
  if (e->flash_attention) {
    double win = q * l->cp == ctx ? fth_model_window_share(e->model, ctx, ctx)
                                  : fth_model_window_share(e->model, q, ctx);
    k.flops *= win;
    if (!sinks) k.compute_s *= win;
    k.time_s = fth_max(k.compute_s, k.memory_s);
  }
  add_attn(e, fwd, k);
  if (!e->flash_attention) {
    double scores = reqs * heads * q * ctx; /* full matrix: unfused kernels mask, not skip */
    double per = 6.0 * e->act_bytes + 1.0;
    add_attn(e, fwd, fth_kernel_elementwise(&e->k.env, scores, SCORE_FLOPS, per));
    if (bwd) add_attn(e, bwd, fth_kernel_elementwise(&e->k.env, scores, SCORE_FLOPS_BW, 2.0 * per));
  }
  fth_kernel_cost kb = k;
  if (bwd) {
    double f = e->flash_attention ? FLASH_BWD_FLOPS : UNFUSED_BWD_FLOPS;
    kb.flops *= f;
    kb.compute_s *= f;
    kb.bytes *= 2.0;
    kb.memory_s *= 2.0;
    add_attn(e, bwd, kb);
  }
  /* Unfused attention under CP (no ring kernels, either exchange): the ring's
   * transfers, each under a CP-th of the core's kernels. */
  const int cp = ring_steps(e, q, ctx);
  if (cp > 1) {
    double sf = kernel_s(e, k) / cp, sb = kernel_s(e, kb) / cp;
    const double step_f[2] = {sf, sf}, step_b[2] = {sb, sb};
    ring_exchange(e, sh, reqs, q, step_f, step_b, fwd, bwd);
  }
}

/* Mamba2 mixers (hybrid blocks: mamba_share of them per block), their projections aside
 * (fth_phase_linears): the depthwise causal conv1d, the SSD chunked scan and the gated
 * RMSNorm, on the TP rank's H / TP heads and G / TP groups (Megatron-Core MambaMixer).
 * The scan runs as mamba_ssm's five Triton kernels (mamba_chunk_scan_combined), each a
 * roofline of its own: the FLOPs of fth_model_ssd_flops_per_token split as the kernels
 * compute them, at the fused-attention rate (the intra-chunk part is a masked attention
 * of chunk length Q on tensor cores, written like FlashAttention 2), against the bytes
 * they move at the activations' bandwidth: x, B, C, dt in, y out at the activation
 * width, the fp32 C B^T blocks (Q per token per group) and the chunk states (N P per head
 * per chunk: written in fp32 by chunk_state, read by state_passing, which writes them at
 * the activation width for chunk_scan). Megatron-Core's training path (MambaMixer with
 * mamba_split_conv1d_scan_combined) gates inside chunk_scan, which reads z and writes the
 * gated y and the ungated out_x, and norms the gated y after it (read, write). Long chunks
 * of small states make it bandwidth-bound on every current GPU: that, not a fitted factor,
 * is its efficiency. Backward re-runs the conv1d
 * and the scan's forward (mamba_split_conv1d_scan_combined at its default checkpoint_lvl 1
 * keeps neither their outputs nor the chunk states: fth_model_layer_activations), then
 * does twice the forward's FLOPs and bytes (two gradient products per forward product, as
 * the attention core): 3x the forward; the gated norm's backward 2x. Decode (inference) updates each request's recurrent state instead:
 * read and write N P per head and the conv1d's K-token window, 4 N P FLOP per head. */
#define SSD_DT_FLOPS   4.0  /* softplus(dt + bias), dA and its cumulative sum per head */
#define GATED_NORM_FLOPS 10.0 /* y silu(z) (in chunk_scan), its mean square and scale, per element */
#define CONV_ACT_FLOPS 8.0  /* the conv1d's SiLU per channel */
#define FP32 4.0

static fth_kernel_cost ssd_kernel(const fth_block_env *e, double flops, double bytes) {
  fth_kernel_cost k;
  double rate = e->k.env.attention_flops_per_s > 0 ? e->k.env.attention_flops_per_s
                                                   : e->k.env.matrix_flops_per_s;
  k.flops = flops;
  k.bytes = bytes;
  k.compute_s = rate > 0 ? flops / rate : HUGE_VAL;
  k.memory_s = e->k.env.mem_bw_bytes_per_s > 0 ? bytes / e->k.env.mem_bw_bytes_per_s : HUGE_VAL;
  k.time_s = fth_max(k.compute_s, k.memory_s);
  return k;
}

#define SSD_BWD       3.0 /* forward re-run + 2x gradients (checkpoint_lvl 1) */
#define GATED_NORM_BWD 2.0

/* Kernel `k` of `share` mixers forward, and `bwd_x` times it backward. */
static void add_ssd(const fth_block_env *e, fth_phase *fwd, fth_phase *bwd, fth_kernel_cost k,
                    double share, double bwd_x) {
  scale_cost(&k, share);
  fth_phase_add_kernel_class(&e->k, fwd, FTH_FLOP_ATTENTION, FTH_KERNEL_ATTENTION, k, 0.0);
  if (bwd == NULL) return;
  scale_cost(&k, bwd_x);
  fth_phase_add_kernel_class(&e->k, bwd, FTH_FLOP_ATTENTION, FTH_KERNEL_ATTENTION, k, 0.0);
}

static void mamba(const fth_block_env *e, const fth_layer_shape *sh, double reqs, double q,
                  fth_phase *fwd, fth_phase *bwd) {
  const double share = sh->mamba_share;
  if (!(share > 0)) return;
  const fth_model_def *m = e->model;
  const double tp = e->lay->tp, w = e->act_bytes, t = reqs * q;
  const double p = m->mamba_head_dim, n = m->mamba_state_dim, Q = m->mamba_chunk;
  const double hl = fth_model_mamba_inner(m) / p / tp, gl = m->mamba_num_groups / tp;
  const double dil = hl * p, chans = dil + 2.0 * gl * n, state = hl * n * p;
  if (e->mode == FTH_BLOCK_DECODE) {
    fth_kernel_cost k = ssd_kernel(e, t * (4.0 * state + 2.0 * m->mamba_conv_kernel * chans),
                                   reqs * 2.0 * (state + m->mamba_conv_kernel * chans) *
                                           e->kv_bytes);
    add_ssd(e, fwd, NULL, k, share, 0.0);
    return;
  }
  /* conv1d over x, B and C: read and write each channel */
  add_ssd(e, fwd, bwd,
          fth_kernel_elementwise(&e->k.env, t * chans,
                                 2.0 * m->mamba_conv_kernel + CONV_ACT_FLOPS, 2.0 * w),
          share, SSD_BWD);
  /* chunk_cumsum: dt in, dt and dA cumsum out in fp32 */
  add_ssd(e, fwd, bwd, fth_kernel_elementwise(&e->k.env, t * hl, SSD_DT_FLOPS, w + 2.0 * FP32),
          share, SSD_BWD);
  /* chunk_state: B^T X per chunk */
  add_ssd(e, fwd, bwd,
          ssd_kernel(e, t * hl * 2.0 * n * p,
                     t * (dil * w + gl * n * w + 2.0 * FP32 * hl) + FP32 * state * t / Q),
          share, SSD_BWD);
  /* state_passing: one state update per chunk, fp32 in, the activation width out */
  add_ssd(e, fwd, bwd, ssd_kernel(e, t * hl * 2.0 * n * p / Q, (FP32 + w) * state * t / Q), share,
          SSD_BWD);
  /* bmm_chunk: C B^T per group and chunk */
  add_ssd(e, fwd, bwd, ssd_kernel(e, t * gl * 2.0 * Q * n, t * (2.0 * gl * n * w + FP32 * gl * Q)),
          share, SSD_BWD);
  /* chunk_scan: the masked (C B^T o L) X and C h per head; x and z in, y and out_x out */
  add_ssd(e, fwd, bwd,
          ssd_kernel(e, t * hl * (2.0 * n * p + p * (Q + 1.0)),
                     t * (gl * n * w + FP32 * gl * Q + 4.0 * dil * w + 2.0 * FP32 * hl) +
                         w * state * t / Q),
          share, SSD_BWD);
  /* the RMSNorm of the gated y: in, the out_proj input out */
  add_ssd(e, fwd, bwd, fth_kernel_elementwise(&e->k.env, t * dil, GATED_NORM_FLOPS, 2.0 * w),
          share, GATED_NORM_BWD);
}

/* Appending the new tokens' keys and values to the cache (inference). */
static void kv_append(const fth_block_env *e, const fth_layer_shape *sh, double tokens,
                      fth_phase *fwd) {
  fth_kernel_cost k;
  memset(&k, 0, sizeof k);
  k.bytes = tokens * fth_layout_kv_elems_per_gpu(e->lay, e->model, sh) * e->kv_bytes;
  k.memory_s = e->kv_bw > 0 ? k.bytes / e->kv_bw : HUGE_VAL;
  k.time_s = k.memory_s;
  add(e, fwd, FTH_FLOP_ATTENTION, k, 0.0);
  fwd->kv_memory_s += k.memory_s;
}

/* Norms, residual adds and the MLP activation. Without sequence parallelism
 * the h-sized work is repeated on every TP rank. */
static void elementwise(const fth_block_env *e, int moe, double tokens, fth_phase *fwd,
                        fth_phase *bwd) {
  const fth_layout *l = e->lay;
  const fth_model_def *m = e->model;
  const double ab = e->act_bytes;
  const int eager = e->eager_elementwise;
  double htok = e->sequence_parallel ? tokens / l->tp : tokens;
  double moves = NORM_RES_MOVES / 2.0; /* per h element: one norm (2) and one add (3) per half */
  double half = htok * m->d_model * moves;
  /* Eager: the norm moves 4 w + 28 bytes per element where the fused one moves 2 w. */
  double nr_bytes = eager ? ab + (2.0 * ab + EAGER_NORM_FP32_BYTES) / moves : ab;
  /* One norm and one residual add per sub-layer: the mixer's (attention or Mamba2) and
   * the MLP's shares of a block (a transformer: one each). */
  const fth_layer_shape *shp = moe ? &l->moe_shape : &l->dense_shape;
  double mixers = shp->attn_share + shp->mamba_share, mlps = shp->mlp_share;
  fth_kernel_cost ka = fth_kernel_elementwise(&e->k.env, half, NORM_RES_FLOPS, nr_bytes);
  fth_kernel_cost km = ka;
  scale_cost(&ka, mixers);
  scale_cost(&km, mlps);
  add(e, fwd, FTH_FLOP_ATTENTION, ka, 0.0);
  add(e, fwd, FTH_FLOP_MLP, km, 0.0);
  if (bwd) {
    fth_kernel_cost kab =
        fth_kernel_elementwise(&e->k.env, half, NORM_RES_FLOPS_BW, 2.0 * nr_bytes);
    fth_kernel_cost kmb = kab;
    scale_cost(&kab, mixers);
    scale_cost(&kmb, mlps);
    add(e, bwd, FTH_FLOP_ATTENTION, kab, 0.0);
    add(e, bwd, FTH_FLOP_MLP, kmb, 0.0);
  }
  if (eager) {
    /* RoPE on the local query and key heads (MLA: its decoupled rope dims). */
    const fth_layer_shape *sh = moe ? &l->moe_shape : &l->dense_shape;
    double heads = sh->heads / l->tp, kvh = fth_max(1.0, sh->kv_heads / l->tp);
    double per_tok =
        m->kv_lora_rank > 0 ? (heads + 1.0) * m->qk_rope_head_dim : (heads + kvh) * sh->d_qk;
    double rb = 2.0 * ab + EAGER_ROPE_FP32_BYTES;
    add(e, fwd, FTH_FLOP_ATTENTION,
        fth_kernel_elementwise(&e->k.env, tokens * per_tok, ROPE_FLOPS, rb), 0.0);
    if (bwd)
      add(e, bwd, FTH_FLOP_ATTENTION,
          fth_kernel_elementwise(&e->k.env, tokens * per_tok, ROPE_FLOPS, 2.0 * rb), 0.0);
  }
  if (moe) {
    /* each TP rank routes its share */
    double scores = moe_share(e) * tokens / l->tp * m->num_experts;
    fth_kernel_cost kr = fth_kernel_elementwise(&e->k.env, scores, ROUTER_FLOPS, ROUTER_BYTES);
    double perm = moe_share(e) * routed_copies(e, tokens) * m->d_model;
    fth_kernel_cost kp = fth_kernel_elementwise(&e->k.env, perm, 1.0, 2.0 * ab);
    add(e, fwd, FTH_FLOP_MLP, kr, 0.0);
    add(e, fwd, FTH_FLOP_MLP, kp, 0.0); /* permute */
    add(e, fwd, FTH_FLOP_MLP, kp, 0.0); /* un-permute and combine */
    if (bwd) {
      add(e, bwd, FTH_FLOP_MLP, kr, 0.0);
      add(e, bwd, FTH_FLOP_MLP, kp, 0.0);
      add(e, bwd, FTH_FLOP_MLP, kp, 0.0);
    }
  }
  double ff = moe ? tokens * (m->top_k * e->expert_imbalance + m->num_shared_experts) *
                        l->expert_ffn / l->tp
                  : tokens * l->ffn_hidden / l->tp;
  if (m->squared_relu && !m->gated_mlp) {
    fth_kernel_cost kf = fth_kernel_elementwise(&e->k.env, ff, SQRELU_FLOPS, SQRELU_MOVES_FWD * ab);
    add(e, fwd, FTH_FLOP_MLP, kf, 0.0); /* relu */
    add(e, fwd, FTH_FLOP_MLP, kf, 0.0); /* pow */
    if (bwd) {
      fth_kernel_cost kb =
          fth_kernel_elementwise(&e->k.env, ff, SQRELU_FLOPS, SQRELU_MOVES_BWD * ab);
      add(e, bwd, FTH_FLOP_MLP, kb, 0.0);
      add(e, bwd, FTH_FLOP_MLP, kb, 0.0);
    }
    return;
  }
  double gate = m->gated_mlp ? (eager ? 5.0 : 3.0) : 2.0;
  add(e, fwd, FTH_FLOP_MLP, fth_kernel_elementwise(&e->k.env, ff, ACT_FLOPS, gate * ab), 0.0);
  if (bwd)
    add(e, bwd, FTH_FLOP_MLP,
        fth_kernel_elementwise(&e->k.env, ff, ACT_FLOPS_BW, 2.0 * gate * ab), 0.0);
}

/* TP collectives of one block per pass: two, or in an MoE block the
 * attention's plus one that sums the shared expert's partial outputs with
 * the routed ones; without SP each TP rank dispatched 1/TP of the tokens, so
 * that sum is needed even without a shared expert. */
/* Layer collectives of one block, forward (and backward, the same again).
 * TP (Korthikanti et al. 2022 Sec. 4.2.2): two all-reduces of the [tokens, h]
 * activation per block, or with sequence parallelism a reduce-scatter and an
 * all-gather of the same data; an MoE block keeps one (attention) plus one for
 * shared experts. TP_MoE (Megatron-Core MoE): gather the group's routed copies
 * before the experts, reduce-scatter after. EP: dispatch + combine all-to-all of the
 * routed copies, h each; the busiest receiver sets the pace. CP's K/V transfers are
 * the attention core's own, step by step (ring_attention). */
static double tp_calls_per_block(const fth_block_env *e, int moe) {
  int combine = e->model->num_shared_experts > 0 || (!e->sequence_parallel && e->lay->tp > 1);
  /* one per sub-layer: a hybrid's Mamba2 mixer reduces its out_proj like attention */
  const fth_layer_shape *sh = moe ? &e->lay->moe_shape : &e->lay->dense_shape;
  double mixers = sh->attn_share + sh->mamba_share;
  return moe ? mixers + sh->mlp_share * combine : mixers + sh->mlp_share;
}

/* Of those, the all-gathers that feed a linear layer: each mixer's (the norm's output into
 * QKV or a Mamba in_proj forward, the output gradient into the out_proj's backward) and a
 * dense MLP's (fc1 forward, fc2 backward); an MoE block's other gather feeds the router and
 * the dispatcher. In the forward a LoRA adapter on a norm-fed linear reads the norm's
 * output too, which Transformer Engine then gathers and returns at the activation width
 * (NeMo's LoRA wrappers set return_layernorm_output_gathered under SP). */
static double tp_linear_gathers_per_block(const fth_block_env *e, int moe, int forward) {
  const fth_layer_shape *sh = moe ? &e->lay->moe_shape : &e->lay->dense_shape;
  double attn = sh->attn_share, mamba = sh->mamba_share, mlp = moe ? 0.0 : sh->mlp_share;
  if (forward && e->k.lora_rank > 0) {
    fth_lora_targets t = e->k.lora_targets;
    if (t == FTH_LORA_ALL_LINEAR || t == FTH_LORA_ATTENTION) attn = 0.0;
    if (t == FTH_LORA_ALL_LINEAR) mamba = 0.0;
    if (t == FTH_LORA_ALL_LINEAR || t == FTH_LORA_MLP) mlp = 0.0;
  }
  return attn + mamba + mlp;
}

/* One pass's SP all-gathers (`forward`, or the backward's): those feeding a linear at the
 * width the workload gathers them (a recipe's quantised width where it casts before the
 * gather: Transformer Engine's LayerNormLinear and grad_output_preprocess, torchao's
 * Float8ColwiseParallel / Float8RowwiseParallel), the rest at the activation width. */
static void tp_gathers(const fth_block_env *e, int moe, double tokens, int forward,
                       fth_phase *ph) {
  double elems = tokens * e->model->d_model;
  double calls = tp_calls_per_block(e, moe);
  double linear = fth_min(calls, tp_linear_gathers_per_block(e, moe, forward));
  double width = e->tp_gather_bytes > 0 ? e->tp_gather_bytes : e->act_bytes;
  if (width == e->act_bytes) linear = 0.0; /* one width: one collective to cost */
  if (linear > 0) comm(e, ph, NULL, FTH_COMM_TP, FTH_COLL_ALL_GATHER, elems * width, linear, 0.0);
  if (calls > linear)
    comm(e, ph, NULL, FTH_COMM_TP, FTH_COLL_ALL_GATHER, elems * e->act_bytes, calls - linear, 0.0);
}

static void collectives(const fth_block_env *e, int moe, double tokens, fth_phase *fwd,
                        fth_phase *bwd) {
  const fth_layout *l = e->lay;
  const fth_model_def *m = e->model;
  const double h = m->d_model;
  double msg = tokens * h * e->act_bytes;
  double tp_calls = tp_calls_per_block(e, moe);
  if (e->sequence_parallel) {
    comm(e, fwd, bwd, FTH_COMM_TP, FTH_COLL_REDUCE_SCATTER, msg, tp_calls, tp_calls);
    tp_gathers(e, moe, tokens, 1, fwd);
    if (bwd) tp_gathers(e, moe, tokens, 0, bwd);
  } else {
    comm(e, fwd, bwd, FTH_COMM_TP, FTH_COLL_ALL_REDUCE, msg, tp_calls, tp_calls);
  }
  /* The backward's reduction of each column-parallel linear's input gradient (the
   * reduce-scatter with SP, else the all-reduce: one per forward TP call) hides under
   * that linear's weight-gradient GEMM (Transformer Engine's bulk overlap, Megatron's
   * async TP all-reduce). A frozen LoRA base has no such GEMM: nothing hides it. Nor does
   * PyTorch's micro-pipelined async TP (torchtitan): it fuses all-gather + matmul and
   * matmul + reduce-scatter, but a backward reduction follows the sum of the linears'
   * input-gradient matmuls (Q, K and V; gate and up), a pattern it does not fuse
   * (pytorch/pytorch#149946): those run between the GEMMs. */
  const fth_group *tg = &l->group[FTH_COMM_TP];
  if (bwd && (e->k.lora_rank > 0 || !e->tp_overlap_backward_rs) && tg->n > 0 && msg > 0) {
    fth_coll_op op = e->sequence_parallel ? FTH_COLL_REDUCE_SCATTER : FTH_COLL_ALL_REDUCE;
    bwd->comm_serial_s[FTH_COMM_TP] +=
        tp_calls * fth_collective(op, FTH_ALGO_AUTO, msg, tg->lv, tg->n, e->coll).time_s;
  }
  if (moe) {
    /* Dispatch and combine at their own widths (DeepSeek-V3 Sec. 3.3.2,
     * DeepEP: FP8 dispatch, BF16 combine). The dispatch direction carries the
     * expert inputs forward and the gradients of the expert outputs backward
     * (DeepSeek quantises both), the combine direction the outputs forward and
     * the input gradients backward: one of each per pass. A dispatch narrower
     * than the activations is quantised with one fp32 scale per 128 elements
     * (DeepEP's per-token 1x128 scales): 1 + 4/128 bytes per element. */
    double routed = moe_share(e) * routed_copies(e, tokens) * h;
    double db = e->dispatch_bytes > 0 ? e->dispatch_bytes : e->act_bytes;
    if (db < e->act_bytes) db += FTH_DISPATCH_SCALE_BYTES;
    double dispatch = routed * db, combined = routed * e->act_bytes;
    /* Every TP_MoE rank runs its slice of the same experts over all the
     * copies its group received: the gather's output (the byte convention
     * of fth_collective.h) is TP_MoE times one rank's copies. The gather
     * moves dispatched copies, the reduce-scatter combined ones. */
    comm(e, fwd, bwd, FTH_COMM_TP_MOE, FTH_COLL_ALL_GATHER, dispatch * l->tp_moe, 1.0, 1.0);
    comm(e, fwd, bwd, FTH_COMM_TP_MOE, FTH_COLL_REDUCE_SCATTER, combined * l->tp_moe, 1.0, 1.0);
    /* A packet-level simulation of the routed exchange may stand in for the
     * alpha-beta cost (workload.ep_dispatch_sec and ep_combine_sec, from
     * fathom.route), each direction timed at its own bytes. Without a combine
     * time the dispatch's is scaled by the bytes (both bandwidth-bound over
     * the same ports: the combine is the dispatch's matrix transposed, which
     * on ports of equal bandwidth in and out takes the same time per byte). */
    if (e->ep_dispatch_override_s > 0 && l->group[FTH_COMM_EP].n > 0) {
      const double bytes[2] = {dispatch, combined};
      const double secs[2] = {e->ep_dispatch_override_s,
                              e->ep_combine_override_s > 0
                                  ? e->ep_combine_override_s
                                  : (dispatch > 0 ? e->ep_dispatch_override_s * combined / dispatch : 0)};
      for (int i = 0; i < 2; i++) {
        fth_phase_add_comm(fwd, FTH_COMM_EP, FTH_COLL_ALL_TO_ALL, FTH_ALGO_AUTO, bytes[i], secs[i],
                           1.0);
        if (bwd)
          fth_phase_add_comm(bwd, FTH_COMM_EP, FTH_COLL_ALL_TO_ALL, FTH_ALGO_AUTO, bytes[i],
                             secs[i], 1.0);
      }
    } else {
      ep_all_to_all(e, fwd, bwd, dispatch, 1.0);
      ep_all_to_all(e, fwd, bwd, combined, 1.0);
    }
  }
}

/* Compute units held by the communication kernels (DeepEP's dispatch and
 * combine run on SMs of their own: DeepSeek-V3 Sec. 3.2.2 gives 20 of the
 * H800's 132): the block's kernels run on the rest. Roofline: every compute
 * rate times 1 - f; tiled: round(units (1 - f)) units (at least one) at the
 * same rate per unit. Memory bandwidth is untouched. */
static void hold_units(fth_kernel_env *k, double f) {
  double keep = 1.0 - f;
  if (k->model == FTH_KERNEL_TILED && k->compute_units > 0) {
    int units = (int)fth_max(1.0, floor(k->compute_units * keep + 0.5));
    keep = (double)units / k->compute_units;
    k->compute_units = units;
  }
  k->matrix_flops_per_s *= keep;
  k->attention_flops_per_s *= keep;
  k->vector_flops_per_s *= keep;
}

/* The env an MoE block's kernels run in: compute units held by the EP
 * kernels when they hold some. */
static const fth_block_env *block_kernels(const fth_block_env *e, int moe, fth_block_env *held) {
  if (!(moe && e->comm_compute_share > 0 && e->lay->group[FTH_COMM_EP].n > 0)) return e;
  *held = *e;
  hold_units(&held->k.env, e->comm_compute_share);
  hold_units(&held->k.gemm_env, e->comm_compute_share);
  return held;
}

/* The local experts a serving iteration's routed pairs reach, whose weights it
 * reads: P pairs landing uniformly on L local experts leave each untouched with
 * probability (1 - 1/L)^P, so L (1 - (1 - 1/L)^P) of them run (one pair: one
 * expert; P >> L: all L). A decode at batch 1 reads top_k experts' weights a
 * layer, not all of them. Training steps carry far more pairs than experts. */
double fth_block_touched_experts(double local, double pairs) {
  if (local <= 1.0 || pairs <= 0.0) return local;
  return local * (1.0 - pow(1.0 - 1.0 / local, pairs));
}

void fth_block_pass(const fth_block_env *e, int moe, double requests, double q, double ctx,
                    fth_phase *fwd, fth_phase *bwd) {
  fth_block_env held;
  e = block_kernels(e, moe, &held);
  const fth_layout *l = e->lay;
  const fth_layer_shape *sh = moe ? &l->moe_shape : &l->dense_shape;
  const double tokens = requests * q;
  memset(fwd, 0, sizeof *fwd);
  if (bwd) memset(bwd, 0, sizeof *bwd);
  /* Linears; routed experts see tokens k imbalance / TP x TP_MoE (token,
   * expert) pairs per GPU (the mean load is the same on every GPU). */
  double pairs = routed_copies(e, tokens) * l->tp_moe;
  double experts = e->mode == FTH_BLOCK_TRAIN ? l->local_experts
                                              : fth_block_touched_experts(l->local_experts, pairs);
  fth_phase_linears(&e->k, sh, tokens, l->tp, l->tp_moe, pairs, experts, e->act_bytes,
                    e->weight_bytes, fwd, bwd);
  /* a hybrid block holds attn_share attention sub-layers: as many sequences' worth */
  if (!e->skip_attention && sh->attn_share > 0)
    attention(e, sh, requests * sh->attn_share, q, ctx, fwd, bwd);
  mamba(e, sh, requests, q, fwd, bwd);
  if (e->mode != FTH_BLOCK_TRAIN) kv_append(e, sh, tokens, fwd);
  elementwise(e, moe, tokens, fwd, bwd);
  collectives(e, moe, tokens, fwd, bwd);
  /* the host issuing the block's operators (fth_host.h); training only */
  if (e->k.host_op_s > 0 && bwd) {
    /* the ring's own operators where it runs (fused attention, the p2p exchange), once
     * per attention sub-layer the block holds (a hybrid block: its share of one) */
    const int ring = e->flash_attention && e->cp_comm != FTH_CP_A2A ? ring_steps(e, q, ctx) : 1;
    const double share = e->skip_attention ? 0.0 : sh->attn_share;
    fth_host_ops ops =
        fth_host_block_ops(e->model, moe, experts, e->k.gemm_bytes > 0, ring > 1 ? ring * share : 0.0);
    if (e->k.lora_rank > 0) {
      double adapted[2] = {0.0, 0.0}; /* attention, MLP / shared experts */
      for (int i = 0; i < sh->num_linears; i++)
        if (fth_linear_takes_lora(&sh->lin[i], e->k.lora_targets))
          adapted[sh->lin[i].part == FTH_PART_ATTN ? 0 : 1] += sh->lin[i].share;
      fth_host_add_adapters(&ops, adapted[0], adapted[1]);
    }
    fth_host_block_s(&ops, e->k.graph_scope, e->k.host_op_s, &fwd->host_s, &bwd->host_s);
  }
}

void fth_block_attention(const fth_block_env *e, int moe, double requests, double q, double ctx,
                         fth_phase *fwd) {
  fth_block_env held;
  e = block_kernels(e, moe, &held);
  const fth_layer_shape *sh = moe ? &e->lay->moe_shape : &e->lay->dense_shape;
  if (sh->attn_share > 0) attention(e, sh, requests * sh->attn_share, q, ctx, fwd, NULL);
}

void fth_block_recompute_modules(const fth_block_env *e, int moe, unsigned mods, double requests,
                                 double q, fth_phase *rec) {
  const fth_layout *l = e->lay;
  const fth_model_def *m = e->model;
  const double h = m->d_model, ab = e->act_bytes, tokens = requests * q;
  memset(rec, 0, sizeof *rec);
  if (mods & FTH_RECOMPUTE_MOD_LAYERNORM) {
    double elems = (e->sequence_parallel ? tokens / l->tp : tokens) * h;
    fth_kernel_cost k = fth_kernel_elementwise(&e->k.env, elems, NORM_RES_FLOPS, 2.0 * ab);
    add(e, rec, FTH_FLOP_ATTENTION, k, 0.0);
    add(e, rec, FTH_FLOP_MLP, k, 0.0);
  }
  if ((mods & FTH_RECOMPUTE_MOD_MLA_UP_PROJ) && m->kv_lora_rank > 0) {
    const fth_layer_shape *sh = moe ? &l->moe_shape : &l->dense_shape;
    const int q8 = e->k.gemm_bytes > 0;
    const fth_kernel_env *genv = q8 ? &e->k.gemm_env : &e->k.env;
    double gb = q8 ? e->k.gemm_bytes : ab, heads = sh->heads / l->tp;
    double qin = m->q_lora_rank > 0 ? m->q_lora_rank : h;
    double kv_out = heads * ((double)m->qk_nope_head_dim + sh->d_v);
    add_gemm(e, rec, FTH_FLOP_ATTENTION,
             fth_kernel_gemm(genv, tokens, heads * sh->d_qk, qin, 1, gb),
             qin * heads * sh->d_qk * gb);
    add_gemm(e, rec, FTH_FLOP_ATTENTION,
             fth_kernel_gemm(genv, tokens, kv_out, m->kv_lora_rank, 1, gb),
             m->kv_lora_rank * kv_out * gb);
  }
  if ((mods & FTH_RECOMPUTE_MOD_MOE_ACT) && moe) {
    double gate = m->gated_mlp ? 3.0 : 2.0;
    add(e, rec, FTH_FLOP_MLP,
        fth_kernel_elementwise(&e->k.env, routed_copies(e, tokens) * l->expert_ffn, ACT_FLOPS,
                               gate * ab),
        0.0);
  }
}

void fth_block_comm(const fth_block_env *e, int moe, double requests, double q, fth_phase *fwd,
                    fth_phase *bwd) {
  memset(fwd, 0, sizeof *fwd);
  if (bwd) memset(bwd, 0, sizeof *bwd);
  collectives(e, moe, requests * q, fwd, bwd);
  /* CP's ring transfers, timed with the attention core's steps (ring_attention) */
  const fth_layer_shape *sh = moe ? &e->lay->moe_shape : &e->lay->dense_shape;
  if (sh->attn_share > 0 && ring_steps(e, q, q * e->lay->cp) > 1) {
    const double none[2] = {HUGE_VAL, HUGE_VAL};
    if (e->cp_comm == FTH_CP_A2A && e->flash_attention)
      a2a_exchange(e, sh, requests * sh->attn_share, q, 0, fwd, bwd);
    else
      ring_exchange(e, sh, requests * sh->attn_share, q, none, none, fwd, bwd);
  }
}

void fth_block_head(const fth_block_env *e, double requests, double q, int embedding,
                    fth_phase *fwd, fth_phase *bwd) {
  const double h = e->model->d_model, v = (double)e->model->vocab_size / e->lay->tp;
  const double ab = e->act_bytes, tokens = requests * q;
  memset(fwd, 0, sizeof *fwd);
  if (bwd) memset(bwd, 0, sizeof *bwd);
  /* Embedding lookup: gather rows and write [tokens, h] (memory only). */
  fth_kernel_cost ke = fth_kernel_elementwise(&e->k.env, tokens * h, 0.0, 2.0 * ab);
  if (e->mode != FTH_BLOCK_TRAIN) {
    /* Inference scores only the next token of each request; the head's weights
     * are stored at their own width (vocab_weight_bytes). */
    const double wb = e->vocab_weight_bytes > 0 ? e->vocab_weight_bytes : e->weight_bytes;
    fth_kernel_cost k = fth_kernel_gemm(&e->k.env, requests, v, h, 1, ab);
    k.bytes += h * v * (wb - ab);
    if (e->k.env.mem_bw_bytes_per_s > 0) k.memory_s = k.bytes / e->k.env.mem_bw_bytes_per_s;
    add_gemm(e, fwd, FTH_FLOP_UNEMBEDDING, k, h * v * wb);
    if (embedding) add(e, fwd, FTH_FLOP_EMBEDDING, ke, 0.0);
    return;
  }
  add_gemm(e, fwd, FTH_FLOP_UNEMBEDDING, fth_kernel_gemm(&e->k.env, tokens, v, h, 1, ab),
           h * v * ab);
  fth_kernel_cost ks = fth_kernel_elementwise(&e->k.env, tokens * v, LOSS_FLOPS, 4.0 + ab);
  add(e, fwd, FTH_FLOP_UNEMBEDDING, ks, 0.0);
  if (embedding) add(e, fwd, FTH_FLOP_EMBEDDING, ke, 0.0);
  if (bwd == NULL) return;
  add_gemm(e, bwd, FTH_FLOP_UNEMBEDDING, fth_kernel_gemm(&e->k.env, tokens, h, v, 1, ab),
           h * v * ab);
  if (!(e->k.lora_rank > 0)) { /* LoRA freezes the head: no weight gradient */
    double before = bwd->kernel_s;
    add_gemm(e, bwd, FTH_FLOP_UNEMBEDDING, fth_kernel_gemm(&e->k.env, h, v, tokens, 1, ab), 0.0);
    bwd->wgrad_s += bwd->kernel_s - before;
  }
  add(e, bwd, FTH_FLOP_UNEMBEDDING, ks, 0.0);
  if (embedding) add(e, bwd, FTH_FLOP_EMBEDDING, ke, 0.0);
}

void fth_block_mtp(const fth_block_env *e, double requests, double q, fth_phase *fwd,
                   fth_phase *bwd) {
  const double h = e->model->d_model, tokens = requests * q, ab = e->act_bytes;
  const double out = h / e->lay->tp;
  fth_block_head(e, requests, q, 1, fwd, bwd);
  add_gemm(e, fwd, FTH_FLOP_UNEMBEDDING, fth_kernel_gemm(&e->k.env, tokens, out, 2.0 * h, 1, ab),
           2.0 * h * out * ab);
  if (bwd == NULL) return;
  add_gemm(e, bwd, FTH_FLOP_UNEMBEDDING, fth_kernel_gemm(&e->k.env, tokens, 2.0 * h, out, 1, ab),
           2.0 * h * out * ab);
  double before = bwd->kernel_s;
  add_gemm(e, bwd, FTH_FLOP_UNEMBEDDING, fth_kernel_gemm(&e->k.env, 2.0 * h, out, tokens, 1, ab),
           0.0);
  bwd->wgrad_s += bwd->kernel_s - before;
}

void fth_block_recompute_attention(const fth_block_env *e, double requests, double seq,
                                   double layers, fth_phase *rec) {
  if (e->flash_attention) return; /* its backward recomputes the scores anyway */
  const fth_layout *l = e->lay;
  const fth_layer_shape *sh = &l->dense_shape;
  double heads = sh->heads / l->tp, kvh = fth_max(1.0, sh->kv_heads / l->tp);
  fth_kernel_env env = e->k.env;
  env.attention_flops_per_s = env.matrix_flops_per_s; /* unfused: batched GEMMs */
  fth_kernel_cost k =
      fth_kernel_attention(&env, requests, heads, kvh, seq, seq, sh->d_qk, sh->d_v, 0, e->act_bytes);
  scale_cost(&k, layers / l->cp);
  add_attn(e, rec, k);
  double scores = layers * requests * heads * seq * seq / l->cp;
  add_attn(e, rec,
           fth_kernel_elementwise(&e->k.env, scores, SCORE_FLOPS, 6.0 * e->act_bytes + 1.0));
}

void fth_block_recompute_op(const fth_block_env *e, int moe, double requests, double q, double ctx,
                            fth_phase *rec) {
  fth_block_env held;
  e = block_kernels(e, moe, &held);
  const fth_layout *l = e->lay;
  const double tokens = requests * q;
  memset(rec, 0, sizeof *rec);
  /* The recomputed mms, each the forward's GEMM of the same shape. */
  fth_layer_shape r = moe ? l->moe_shape : l->dense_shape;
  fth_linear mm[FTH_MAX_OP_MMS];
  int saved[FTH_MAX_OP_MMS];
  int n = fth_model_op_mms(e->model, moe, e->op_keep, mm, saved);
  r.num_linears = 0;
  for (int i = 0; i < n; i++) {
    if (saved[i]) continue;
    FTH_ASSERT(r.num_linears < FTH_MAX_LINEARS);
    r.lin[r.num_linears++] = mm[i];
  }
  fth_phase_linears(&e->k, &r, tokens, l->tp, l->tp_moe, routed_copies(e, tokens) * l->tp_moe,
                    l->local_experts, e->act_bytes, e->weight_bytes, rec, NULL);
  /* A named policy that does not keep the context re-runs the attention core's forward
   * (MaxText: its cuDNN flash attention's output is not among the saved names). */
  const fth_layer_shape *sh = moe ? &l->moe_shape : &l->dense_shape;
  if (e->op_keep && !(e->op_keep & FTH_OP_KEEP_CONTEXT) && !e->skip_attention && sh->attn_share > 0)
    attention(e, sh, requests * sh->attn_share, q, ctx, rec, NULL);
  /* Every element-wise kernel of the forward (norms, residual adds, the MLP
   * activation; the router and the permutations of an MoE block). */
  elementwise(e, moe, tokens, rec, NULL);
  /* The forward's TP collectives but the saved reduce-scatters: under SP the
   * all-gathers before the column-parallel GEMMs, without SP the
   * all-reduces. The EP all-to-alls are saved (torchtitan's MoE list names
   * all_to_all_single); the TP_MoE gathers are not modelled again. */
  if (e->sequence_parallel) {
    tp_gathers(e, moe, tokens, 1, rec);
  } else {
    double msg = tokens * e->model->d_model * e->act_bytes;
    comm(e, rec, NULL, FTH_COMM_TP, FTH_COLL_ALL_REDUCE, msg, tp_calls_per_block(e, moe), 0.0);
  }
}

void fth_block_stage(const fth_block_env *e, const fth_phase blk_f[2], const fth_phase *blk_b,
                     const int blocks[2], int head, double requests, double q, fth_phase *fwd,
                     fth_phase *bwd) {
  memset(fwd, 0, sizeof *fwd);
  if (bwd) memset(bwd, 0, sizeof *bwd);
  for (int moe = 0; moe < 2; moe++) {
    if (blocks[moe] == 0) continue;
    fth_phase f = blk_f[moe];
    fth_phase_scale(&f, blocks[moe]);
    fth_phase_add(fwd, &f);
    if (bwd && blk_b) {
      fth_phase b = blk_b[moe];
      fth_phase_scale(&b, blocks[moe]);
      fth_phase_add(bwd, &b);
    }
  }
  if (!head) return;
  fth_phase hf, hb;
  fth_block_head(e, requests, q, e->lay->pp == 1, &hf, bwd ? &hb : NULL);
  fth_phase_add(fwd, &hf);
  if (bwd) fth_phase_add(bwd, &hb);
}

void fth_block_stage_blocks(const fth_layout *l, int mid[2], int last[2]) {
  mid[0] = l->dense_layers_per_stage;
  mid[1] = l->moe_layers_per_stage;
  last[0] = l->last_stage_layers - l->last_stage_moe;
  last[1] = l->last_stage_moe;
}

double fth_block_pp_message_bytes(const fth_block_env *e, double tokens) {
  return tokens * e->model->d_model * e->act_bytes / (e->sequence_parallel ? e->lay->tp : 1);
}

double fth_block_transient_bytes(const fth_layout *l, const fth_model_def *m, double act_bytes,
                                 double tokens, double logit_rows) {
  double ffn = m->num_experts > 1 ? l->expert_ffn * m->top_k : l->ffn_hidden;
  double mlp_inner = tokens * ffn / l->tp * act_bytes * (m->gated_mlp ? 3.0 : 2.0);
  double logits = logit_rows * (double)m->vocab_size / l->tp * 4.0;
  return fth_max(logits, mlp_inner);
}
