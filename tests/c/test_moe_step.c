/* A MoE training step with expert parallelism across scale-up and scale-out
 * and TP_MoE = 2, every expected number derived by hand.
 *
 * Node: 1 PFLOP/s bf16 at efficiency 1; HBM 10 TB/s (1 TB); vector rate
 * bf16 / 8 = 125 TFLOP/s. Fabric, latency 0 everywhere:
 *   dim 0 "pod": switched, 4 GPUs, 100 GB/s per GPU
 *   dim 1 "out": switched, 4 pods, 10 GB/s per GPU          (16 GPUs)
 * Attention view: TP_Attn 4 on dim 0, DP_Attn 4 on dim 1.
 * Expert view:    TP_MoE 2 and EP_SU 2 on dim 0; EP_SO 2 and DP_MoE 2 on dim 1,
 *                 so EP = 4 (2 in the pod x 2 pods).
 * Bandwidth sharing (fth_topology.h): two expert-view dimensions of size > 1 on
 * each physical dimension, so each gets half: TP_MoE and EP_SU 50 GB/s, EP_SO and
 * DP_MoE 5 GB/s. TP_Attn alone on dim 0 (100 GB/s), DP_Attn alone on dim 1 (10 GB/s).
 * Model: h 1024, 1 layer (MoE), 16 heads of 64, SwiGLU, 8 routed experts of
 * inner size 512, top-2, one shared expert of inner size 512, V 32000.
 * Work: seq 1024, micro-batch 1, global batch 8 -> 8 / (1 x DP 4) = 2
 * micro-batches; bf16 activations, fp32 master and gradients, DDP, no
 * recompute, flash attention, comp_comm 0 (nothing hidden), comp_mem 1; NCCL's
 * all-to-all at the full scale-out rate (ep_a2a_scale_out_eff 1; its default derating
 * is checked on its own below). */
#include "fth_train.h"
#include "test_fixtures.h"
#include "test_macros.h"

#include <string.h>

static fth_train_def work(void) {
  fth_train_def w = fth_train_def_default();
  w.global_batch = 8;
  w.micro_batch = 1;
  w.seq_len = 1024;
  w.comp_comm_eff = 0.0;
  w.comp_mem_eff = 1.0;
  w.comm_mem_eff = 0.0;
  w.ep_a2a_scale_out_eff = 1.0;
  return w;
}

static int moe_step(void) {
  fth_node_def n = tfx_pflops_node();
  fth_topology_def t = tfx_moe_pods();
  fth_model_def m = tfx_moe_model(1024);
  fth_train_def w = work();
  fth_train_plan plan;
  fth_error err;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_result r;
  fth_train_evaluate(&plan, &r);
  FTH_ENSURE_NEAR(2.0, r.microbatches, 0);

  /* Tokens on a GPU: b s / CP = 1024, the same on the 4 ranks of a TP_Attn
   * group; each rank dispatches a quarter of them: 1024 x top-2 / 4 = 512
   * (token, expert) pairs of h x 2 B = 2 KiB: 1,048,576 B per all-to-all
   * (fth_collective.h: ALL_TO_ALL bytes = all one rank sends, own share incl.).
   *
   * EP group of 4: 2 GPUs in the pod (50 GB/s), 2 pods (5 GB/s). Of the 4
   * equal blocks of 262,144 B, 2 go to the other pod: 524,288 B must cross
   * the 5 GB/s scale-out dimension, 104.8576 us, a lower bound for any
   * algorithm. The one-shot exchange (its scale-up part, 262,144 B at 50 GB/s
   * = 5.24 us, runs at the same time) and PXN (524,288 B at 50 GB/s, then
   * 524,288 B at 5 GB/s, pipelined) both reach it; the flat ring (3/4 of the
   * bytes at the slowest 5 GB/s: 157.29 us) and the two-stage hierarchical
   * exchange (10.49 + 104.86 us) do not. So 104.8576 us per all-to-all.
   * Calls: dispatch + combine, forward and backward, 1 MoE layer, 2
   * micro-batches = 8; nothing hidden (comp_comm 0). */
  const fth_comm_item *ep = &r.comm[FTH_COMM_EP];
  FTH_ENSURE(ep->op == FTH_COLL_ALL_TO_ALL);
  FTH_ENSURE_EQ_INT(4, ep->group_size);
  FTH_ENSURE_EQ_INT(2, ep->num_levels);
  FTH_ENSURE_NEAR(1048576.0, ep->bytes_per_call, 1e-12);
  FTH_ENSURE_NEAR(8.0, ep->calls_per_step, 0);
  FTH_ENSURE_NEAR(8.0 * 1048576.0, ep->bytes_per_step, 1e-12);
  FTH_ENSURE_NEAR(8.0 * 104.8576e-6, ep->raw_s, 1e-9);
  FTH_ENSURE_NEAR(ep->raw_s, ep->exposed_s, 1e-12);

  /* TP_Attn: the [1024, h] bf16 activation, 2,097,152 B, all-reduced over 4
   * GPUs at 100 GB/s: ring 2 (3/4) M / B = 31.45728 us. Per MoE block one
   * after attention and one after the shared expert (whose all-reduce also
   * sums the combined routed outputs), forward and backward, 2 micro-batches:
   * 8 calls. */
  const fth_comm_item *tp = &r.comm[FTH_COMM_TP];
  FTH_ENSURE(tp->op == FTH_COLL_ALL_REDUCE);
  FTH_ENSURE_EQ_INT(4, tp->group_size);
  FTH_ENSURE_NEAR(2097152.0, tp->bytes_per_call, 1e-12);
  FTH_ENSURE_NEAR(8.0, tp->calls_per_step, 0);
  FTH_ENSURE_NEAR(8.0 * 31.45728e-6, tp->raw_s, 1e-9);

  /* TP_MoE: all-gather of the received pairs before the experts and
   * reduce-scatter after (Megatron-Core), forward and backward, 2
   * micro-batches: 8 calls over the 2-GPU TP_MoE group. A GPU receives 512
   * pairs and its TP_MoE partner another 512 for the same experts, so the
   * gathered output (ALL_GATHER bytes) is 1024 x 2 KiB = 2,097,152 B,
   * (1/2) M / 50 GB/s = 20.97152 us for the all-gather and the same for the
   * reduce-scatter. */
  const fth_comm_item *tpm = &r.comm[FTH_COMM_TP_MOE];
  FTH_ENSURE(tpm->op == FTH_COLL_ALL_GATHER);
  FTH_ENSURE_EQ_INT(2, tpm->group_size);
  FTH_ENSURE_NEAR(8.0, tpm->calls_per_step, 0);
  FTH_ENSURE_NEAR(2097152.0, tpm->bytes_per_call, 1e-12);
  FTH_ENSURE_NEAR(8.0 * 20.97152e-6, tpm->raw_s, 1e-9);

  /* Local experts: 8 / EP 4 = 2 per GPU, each (h x 2f + f x h) = 1,572,864
   * weights split over TP_MoE 2: 1,572,864 expert weights per GPU, gradients
   * 4 B each = 6,291,456 B all-reduced over DP_MoE 2 at 5 GB/s once per step:
   * ring 2 (1/2) M / B = 1.2582912 ms, all exposed. */
  const fth_comm_item *dpm = &r.comm[FTH_COMM_DP_MOE];
  FTH_ENSURE(dpm->op == FTH_COLL_ALL_REDUCE);
  FTH_ENSURE_EQ_INT(2, dpm->group_size);
  FTH_ENSURE_NEAR(6291456.0, dpm->bytes_per_call, 1e-12);
  FTH_ENSURE_NEAR(1.0, dpm->calls_per_step, 0);
  FTH_ENSURE_NEAR(1.2582912e-3, dpm->raw_s, 1e-9);
  FTH_ENSURE_NEAR(dpm->raw_s, dpm->exposed_s, 1e-12);

  /* MLP-part FLOPs of one micro-batch, forward.
   *  Routed experts: 4 DP_Attn replicas x 1024 tokens x top-2 = 8192 pairs
   *  per micro-batch, over 8 experts x DP_MoE 2 copies = 512 pairs per expert
   *  copy. A GPU holds half (TP_MoE 2) of 2 expert copies (EP 4), so it runs
   *  1024 pairs through half-width experts: 1024 x 2 (h 2f + f h) / 2 =
   *  1024 x 1,572,864 = 1,610,612,736 FLOP.
   *  Router (replicated on every TP rank, all 1024 tokens): 2 x 1024 x h x 8 =
   *  16,777,216.
   *  Shared expert, TP 4: 2 x 1024 x 3 h f / 4 = 805,306,368.
   *  Element-wise (the step model's convention, fth_train.c: two norms and two
   *  residual adds, 5 FLOP per element over T h 10 / 2 elements in each of the
   *  attention and MLP parts): 1024 x 1024 x 5 x 5 = 26,214,400; SwiGLU
   *  activation 8 FLOP per inner element: routed 512 pairs x 512 + shared
   *  1024 x 512 / 4 = 393,216 elements -> 3,145,728.
   *  Routing (fth_block.c): softmax and top-k over each TP rank's share of
   *  the scores, 1024 / 4 x 8 experts = 2048 x 10 FLOP = 20,480; permuting
   *  the rank's 1024 x 2 / 4 = 512 routed copies of h and un-permuting them,
   *  1 FLOP per element each: 2 x 512 x 1024 = 1,048,576.
   *  Total 2,463,125,504. */
  FTH_ENSURE_NEAR(2463125504.0, r.fwd_flops[FTH_FLOP_MLP], 1e-12);
  /* Backward: data + weight gradient = 2 x the GEMMs (2 x 2,432,696,320),
   * element-wise 8 FLOP per norm/residual element (41,943,040) and 13 per
   * activation element (5,111,808), routing as forward (1,069,056):
   * 4,913,516,544. */
  FTH_ENSURE_NEAR(4913516544.0, r.bwd_flops[FTH_FLOP_MLP], 1e-12);

  /* ZeRO-1 over DP_MoE 2: reduce-scatter of the 6,291,456 gradient bytes,
   * (1/2) M / 5 GB/s = 629.1456 us, and all-gather of the updated bf16 expert
   * weights (3,145,728 B), 314.5728 us: 943.7184 us. The layer collectives do
   * not change. */
  w.dp = FTH_DP_ZERO1;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_result z;
  fth_train_evaluate(&plan, &z);
  FTH_ENSURE(z.comm[FTH_COMM_DP_MOE].op == FTH_COLL_REDUCE_SCATTER);
  FTH_ENSURE_NEAR(6291456.0, z.comm[FTH_COMM_DP_MOE].bytes_per_call, 1e-12);
  FTH_ENSURE_NEAR(943.7184e-6, z.comm[FTH_COMM_DP_MOE].raw_s, 1e-9);
  FTH_ENSURE_NEAR(r.comm[FTH_COMM_EP].raw_s, z.comm[FTH_COMM_EP].raw_s, 1e-12);
  FTH_ENSURE_NEAR(r.fwd_s, z.fwd_s, 1e-12);

  /* Without the shared expert and without SP the routed outputs, each TP
   * rank's 1/4 of the tokens, still have to be summed over TP: the same 8
   * all-reduces as with it. */
  m.num_shared_experts = 0;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_result ns;
  fth_train_evaluate(&plan, &ns);
  FTH_ENSURE_NEAR(8.0, ns.comm[FTH_COMM_TP].calls_per_step, 0);
  m.num_shared_experts = 1;

  /* A grouped expert GEMM's fixed cost per expert (1 us here): 2 local
   * experts x 2 expert GEMMs (up, down) = 4 us more per micro-batch forward,
   * twice that backward (data and weight gradients), nothing hidden. */
  /* Per-node dispatch (DeepEP's normal kernels): a token crosses the pod link
   * once per pod holding any of its experts, then is forwarded inside. The
   * default, NCCL's all-to-all, sends every copy: the whole 1,048,576 B above.
   * Without a routing limit, top-2 of 8 experts, 4 per pod over 2 pods: a pod
   * is missed with probability C(4, 2) / C(8, 2) = 6 / 28, so a token reaches
   * 2 (1 - 6/28) = 11/7 pods on average and the scale-out part carries
   * (11/7) / 2 = 11/14 of the bytes, 823,881.14 B: half leaves, 411,940.57 B
   * / 5 GB/s = 82.388114 us. The scale-up part delivers every copy: 1,048,576
   * B over the 2 GPUs of the pod at 50 GB/s, half leaves, 10.48576 us. They
   * pipeline, latencies 0: 82.388114 us per all-to-all, 8 calls. */
  FTH_ENSURE_NEAR(8.0 * 104.8576e-6, r.comm[FTH_COMM_EP].raw_s, 1e-9);
  w.ep_dispatch_per_node = 1;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_result nl;
  fth_train_evaluate(&plan, &nl);
  FTH_ENSURE_NEAR(8.0 * 1048576.0 * 11.0 / 14.0 / 2.0 / 5e9, nl.comm[FTH_COMM_EP].raw_s, 1e-9);
  FTH_ENSURE_NEAR(8.0 * 82.388114e-6, nl.comm[FTH_COMM_EP].raw_s, 1e-6);
  /* Node-limited routing (DeepSeek-V3 Sec. 2.1.2): 2 expert groups, a token
   * routed to at most 1 of them. Each token's 2 copies reach min(11/7, 1
   * group) = 1 pod: the scale-out part carries 1/2 of the 1,048,576 B, an
   * all-to-all of 524,288 B over the 2 pods at 5 GB/s: half leaves, 262,144 B
   * / 5 GB/s = 52.4288 us, above the scale-up part's 10.49 us. 8 calls. The
   * bytes reported stay the routed copies. */
  m.n_group = 2;
  m.topk_group = 1;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &nl);
  FTH_ENSURE_NEAR(1048576.0, nl.comm[FTH_COMM_EP].bytes_per_call, 1e-12);
  FTH_ENSURE_NEAR(8.0, nl.comm[FTH_COMM_EP].calls_per_step, 0);
  FTH_ENSURE_NEAR(8.0 * 52.4288e-6, nl.comm[FTH_COMM_EP].raw_s, 1e-9);
  /* M = 2 of 2 groups limits nothing: 11/7 pods as without the limit. One
   * group spanning both pods (n_group 1, M 1): M' = 1 x 2 pods / 1 group = 2
   * pods, the same. */
  m.topk_group = 2;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &nl);
  FTH_ENSURE_NEAR(8.0 * 82.388114e-6, nl.comm[FTH_COMM_EP].raw_s, 1e-6);
  m.n_group = 1;
  m.topk_group = 1;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &nl);
  FTH_ENSURE_NEAR(8.0 * 82.388114e-6, nl.comm[FTH_COMM_EP].raw_s, 1e-6);
  /* One copy per expert (NCCL) under the limit: every copy crosses again. */
  m.n_group = 2;
  m.topk_group = 1;
  w.ep_dispatch_per_node = 0;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &nl);
  FTH_ENSURE_NEAR(8.0 * 104.8576e-6, nl.comm[FTH_COMM_EP].raw_s, 1e-9);
  /* NCCL's all-to-all at half the scale-out rate: the pod link carries 2.5 GB/s for
   * it, so the 524,288 B that cross take 209.7152 us; the one-shot exchange's
   * scale-up part (262,144 B at 50 GB/s, 5.24 us) and PXN's (524,288 B at 50 GB/s,
   * 10.49 us) still run under it, the ring (3/4 MiB at 2.5 GB/s, 314.57 us) and
   * the two-stage exchange (5.24 + 209.72 us) are slower: 209.7152 us a call. The
   * shipped default, 0.75: 524,288 B at 3.75 GB/s = 139.810133 us. A per-node
   * dispatcher (DeepEP) is not derated: 82.388114 us as above. */
  w.ep_a2a_scale_out_eff = 0.5;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &nl);
  FTH_ENSURE_NEAR(8.0 * 209.7152e-6, nl.comm[FTH_COMM_EP].raw_s, 1e-9);
  w.ep_a2a_scale_out_eff = fth_train_def_default().ep_a2a_scale_out_eff;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &nl);
  FTH_ENSURE_NEAR(8.0 * 524288.0 / 3.75e9, nl.comm[FTH_COMM_EP].raw_s, 1e-12);
  m.n_group = 0;
  m.topk_group = 0;
  w.ep_dispatch_per_node = 1;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &nl);
  FTH_ENSURE_NEAR(8.0 * 82.388114e-6, nl.comm[FTH_COMM_EP].raw_s, 1e-6);
  /* Top-1 under the per-node dispatcher: a token reaches 2 (1 - C(4,1)/C(8,1)) = 1 pod,
   * as many as its copies, so nothing is saved and the exchange is costed whole, still as
   * DeepEP's (not derated): 1024 x 1 / 4 = 256 pairs of 2 KiB = 524,288 B a call, half of
   * it across the 5 GB/s pod link, 52.4288 us; as NCCL's at the default share, 262,144 B
   * at 3.75 GB/s, 69.905067 us. */
  m.top_k = 1;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &nl);
  FTH_ENSURE_NEAR(524288.0, nl.comm[FTH_COMM_EP].bytes_per_call, 1e-12);
  FTH_ENSURE_NEAR(8.0 * 262144.0 / 5e9, nl.comm[FTH_COMM_EP].raw_s, 1e-12);
  w.ep_dispatch_per_node = 0;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &nl);
  FTH_ENSURE_NEAR(8.0 * 262144.0 / 3.75e9, nl.comm[FTH_COMM_EP].raw_s, 1e-12);
  m.top_k = 2;
  w.ep_dispatch_per_node = 1;
  /* The share is checked where it enters: (0, 1]. */
  w.ep_a2a_scale_out_eff = 0.0;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_EINVAL);
  FTH_ENSURE(strstr(err.path, "ep_a2a_scale_out_efficiency") != NULL);
  w.ep_a2a_scale_out_eff = 1.5;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_EINVAL);
  w.ep_a2a_scale_out_eff = 1.0;
  w.ep_dispatch_per_node = 1;
  /* A token limited to 3 of 2 groups, or to groups the model lacks, is refused. */
  m.n_group = 2;
  m.topk_group = 3;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_EINVAL);
  m.n_group = 0;
  m.topk_group = 1;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_EINVAL);
  m.n_group = 3; /* does not divide 8 experts */
  m.topk_group = 0;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_EINVAL);
  m = tfx_moe_model(1024);
  w.ep_dispatch_per_node = 0;

  /* FP8 dispatch, BF16 combine (DeepSeek-V3 Sec. 3.3.2; DeepEP): the 512
   * routed copies of h = 1024 go out at 1 B plus one 4 B scale per 128
   * elements: 512 x 1024 x (1 + 4/128) = 540,672 B; the combine returns
   * 1,048,576 B. Without the node limit half of each crosses the 5 GB/s pod
   * link: 270,336 B -> 54.0672 us and 104.8576 us. One of each per pass,
   * forward and backward, 2 micro-batches: 4 x 158.9248 us = 635.6992 us over
   * 8 calls of (540,672 + 1,048,576) / 2 = 794,624 B on average.
   * TP_MoE gathers the dispatched copies (540,672 x 2 = 1,081,344 B: (1/2)
   * x 1,081,344 / 50 GB/s = 10.81344 us) and reduce-scatters the combined ones
   * (20.97152 us as before): 4 x 31.78496 us = 127.13984 us. */
  w.moe_dispatch_bytes = 1;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_result d8;
  fth_train_evaluate(&plan, &d8);
  FTH_ENSURE_NEAR(8.0, d8.comm[FTH_COMM_EP].calls_per_step, 0);
  FTH_ENSURE_NEAR(794624.0, d8.comm[FTH_COMM_EP].bytes_per_call, 1e-12);
  FTH_ENSURE_NEAR(635.6992e-6, d8.comm[FTH_COMM_EP].raw_s, 1e-9);
  FTH_ENSURE_NEAR(127.13984e-6, d8.comm[FTH_COMM_TP_MOE].raw_s, 1e-9);
  /* Dispatch at the activations' width is the default: nothing changes. */
  w.moe_dispatch_bytes = 2;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &d8);
  FTH_ENSURE_NEAR(r.comm[FTH_COMM_EP].raw_s, d8.comm[FTH_COMM_EP].raw_s, 1e-15);
  FTH_ENSURE_NEAR(z.step_time_s, d8.step_time_s, 1e-15); /* w.dp is ZeRO-1 here */
  w.moe_dispatch_bytes = 3;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_EINVAL);
  w.moe_dispatch_bytes = 0;

  /* Communication kernels holding half the compute units (DeepEP's SMs): the
   * MoE block's kernels run at half the rate. Forward MLP compute of one
   * micro-batch (FLOPs above): GEMMs 2,432,696,320 at 1 PFLOP/s = 2.43269632
   * us, element-wise 30,429,184 (norms 26,214,400, SwiGLU 3,145,728, routing
   * 20,480 + 1,048,576) at 125 TFLOP/s = 0.243433472 us: 2.676129792 us, twice
   * that held. Memory time is untouched (the roofline's bandwidth). */
  FTH_ENSURE_NEAR(2.676129792e-6, z.fwd_compute_s[FTH_FLOP_MLP], 1e-9);
  w.moe_comm_compute_share = 0.5;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &d8);
  FTH_ENSURE_NEAR(5.352259584e-6, d8.fwd_compute_s[FTH_FLOP_MLP], 1e-9);
  FTH_ENSURE_NEAR(z.fwd_memory_s[FTH_FLOP_MLP], d8.fwd_memory_s[FTH_FLOP_MLP], 1e-12);
  w.moe_comm_compute_share = 1.0;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_EINVAL);
  w.moe_comm_compute_share = 0;

  n.compute.expert_gemm_s = 1e-6;
  w.dp = FTH_DP_DDP;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_result g;
  fth_train_evaluate(&plan, &g);
  FTH_ENSURE_NEAR(r.fwd_s + 4e-6, g.fwd_s, 1e-9);
  FTH_ENSURE_NEAR(r.bwd_s + 8e-6, g.bwd_s, 1e-9);

  /* An FP8/FP4 recipe's further cost per expert (expert_recipe_s): the same 2 GEMMs x
   * 2 local experts, 1 us each -> +4 us forward, +8 us backward (dgrad and wgrad),
   * against the same recipe without it, whether the scales are per block (MXFP8) or per
   * tensor (FP8 current scaling: each expert's own amax). Without a recipe, or with the
   * experts run as one fused grouped kernel (grouped_expert_kernel), nothing more. */
  fth_train_result s0, s1;
  const fth_recipe kinds[4] = {FTH_RECIPE_MXFP8, FTH_RECIPE_FP8_CURRENT, FTH_RECIPE_NONE,
                               FTH_RECIPE_MXFP8};
  for (int i = 0; i < 4; i++) {
    w.recipe = kinds[i];
    w.grouped_expert_kernel = i == 3;
    n.compute.expert_recipe_s = 0;
    FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
    fth_train_evaluate(&plan, &s0);
    n.compute.expert_recipe_s = 1e-6;
    FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
    fth_train_evaluate(&plan, &s1);
    double more = i < 2 ? 1.0 : 0.0;
    FTH_ENSURE_NEAR(s0.fwd_s + more * 4e-6, s1.fwd_s, 1e-9);
    FTH_ENSURE_NEAR(s0.bwd_s + more * 8e-6, s1.bwd_s, 1e-9);
  }
  w.grouped_expert_kernel = 0;
  n.compute.expert_recipe_s = 1.0; /* at least a second per expert: refused */
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_EINVAL);
  return 0;
}

/* EP dispatch and combine without overlap (ep_comm_overlap 0, Megatron-Core's
 * alltoall dispatcher): with comp_comm_efficiency 1 they hide under the
 * kernels when overlapped; not overlapped, all of their raw time is exposed. */
static int ep_overlap(void) {
  fth_node_def n = tfx_pflops_node();
  fth_topology_def t = tfx_moe_pods();
  fth_model_def m = tfx_moe_model(1024);
  fth_train_def w = work();
  w.comp_comm_eff = 1.0;
  fth_train_plan plan;
  fth_error err;
  fth_train_result on, off;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &on);
  FTH_ENSURE(on.comm[FTH_COMM_EP].raw_s > 0 && on.comm[FTH_COMM_EP].hidden_s > 0);
  w.ep_comm_overlap = 0;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &off);
  FTH_ENSURE_NEAR(on.comm[FTH_COMM_EP].raw_s, off.comm[FTH_COMM_EP].raw_s, 1e-12);
  FTH_ENSURE_NEAR(off.comm[FTH_COMM_EP].raw_s, off.comm[FTH_COMM_EP].exposed_s, 1e-12);
  /* the other kinds may now hide under the kernels the all-to-all no longer
   * overlaps (and a communication-bound step does not move): the step grows
   * by at most what was hidden */
  FTH_ENSURE(off.step_time_s >= on.step_time_s);
  FTH_ENSURE(off.step_time_s <= on.step_time_s + on.comm[FTH_COMM_EP].hidden_s + 1e-15);
  /* An overlap made of pairs (Megatron-Core's 1F1B A2A overlap): without a pipeline
   * the first forward and the last backward of the 2 micro-batches run alone and
   * wait for their whole all-to-all, the other two hide what `on` hides: exposed
   * (raw + on's exposed) / 2. */
  w.ep_comm_overlap = 1;
  w.ep_overlap_pairs = 1;
  fth_train_result pairs;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &pairs);
  FTH_ENSURE_NEAR(0.5 * (on.comm[FTH_COMM_EP].raw_s + on.comm[FTH_COMM_EP].exposed_s),
                  pairs.comm[FTH_COMM_EP].exposed_s, 1e-15);
  FTH_ENSURE(on.comm[FTH_COMM_EP].exposed_s < 0.9 * on.comm[FTH_COMM_EP].raw_s);
  /* the step lies between the two (this one, communication-bound, does not move) */
  FTH_ENSURE(pairs.step_time_s >= on.step_time_s - 1e-15 && pairs.step_time_s <= off.step_time_s + 1e-15);
  return 0;
}

/* EP kernels holding compute units while they run (DeepEP, HybridEP): 20 of the node's
 * 100 SMs leave the computation they hide under 80, so it runs 20 / 80 = 0.25 s longer
 * per second of hidden EP. With comp_comm_efficiency 1 (the generic overlap free) the
 * exposed EP grows by 0.25 x what was hidden, and the step (PP 1: no bubble) by as
 * much; with 0.9 the generic 0.1 is replaced: 0.15 x the hidden. A blocking EP (no
 * overlap) hides nothing and pays nothing. */
/* One step of the EP test model (tfx_moe_pods, 100 SMs) with the EP kernels holding
 * `units` of them. */
static int units_step(fth_train_def w, double units, fth_train_result *r) {
  fth_node_def n = tfx_pflops_node();
  n.compute.compute_units = 100;
  fth_topology_def t = tfx_moe_pods();
  fth_model_def m = tfx_moe_model(1024);
  fth_train_plan plan;
  fth_error err;
  w.ep_comm_units = units;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, r);
  return 0;
}

static int ep_units(void) {
  fth_train_def w = work();
  fth_train_result r0, r1;
  const double effs[2] = {1.0, 0.9}, cost[2] = {0.25, 0.15};
  for (int i = 0; i < 2; i++) {
    w.comp_comm_eff = effs[i];
    FTH_RUN(units_step(w, 0, &r0));
    FTH_RUN(units_step(w, 20, &r1));
    double hidden = r0.comm[FTH_COMM_EP].hidden_s;
    FTH_ENSURE(hidden > 0);
    FTH_ENSURE_NEAR(r0.comm[FTH_COMM_EP].exposed_s + cost[i] * hidden, r1.comm[FTH_COMM_EP].exposed_s, 1e-15);
    FTH_ENSURE_NEAR(r0.step_time_s + cost[i] * hidden, r1.step_time_s, 1e-15);
  }
  /* 80 of 100 units: capped at half, a second of computation per hidden second, so the
   * exposed EP reaches the raw at most */
  w.comp_comm_eff = 1.0;
  FTH_RUN(units_step(w, 0, &r0));
  FTH_RUN(units_step(w, 80, &r1));
  FTH_ENSURE_NEAR(r0.step_time_s + r0.comm[FTH_COMM_EP].hidden_s, r1.step_time_s, 1e-15);
  FTH_ENSURE(r1.comm[FTH_COMM_EP].exposed_s <= r1.comm[FTH_COMM_EP].raw_s * (1 + 1e-12));
  w.ep_comm_overlap = 0;
  FTH_RUN(units_step(w, 0, &r0));
  FTH_RUN(units_step(w, 20, &r1));
  FTH_ENSURE_NEAR(r0.step_time_s, r1.step_time_s, 0);
  fth_node_def n = tfx_pflops_node();
  fth_topology_def t = tfx_moe_pods();
  fth_model_def m = tfx_moe_model(1024);
  fth_train_plan plan;
  fth_error err;
  w.ep_comm_units = -1;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_EINVAL);
  return 0;
}

/* Simulated all-to-all times (fathom.route's packet simulation): dispatch and
 * combine each keep their own. 10 us a dispatch and 30 us a combine, one of
 * each per pass, forward and backward, 2 micro-batches: 4 x 40 = 160 us of EP
 * a step. Without a combine time and with an FP8 dispatch (540,672 B against
 * the combine's 1,048,576 B, moe_step above) the combine takes the dispatch's
 * time per byte: 10 us x 1,048,576 / 540,672 = 19.393939... us, so 4 x
 * 29.393939... = 117.575757... us. Before, one time served both: 4 x 20 us. */
static int ep_override(void) {
  fth_node_def n = tfx_pflops_node();
  fth_topology_def t = tfx_moe_pods();
  fth_model_def m = tfx_moe_model(1024);
  fth_train_def w = work();
  fth_train_plan plan;
  fth_error err;
  fth_train_result r;
  w.ep_dispatch_override_s = 10e-6;
  w.ep_combine_override_s = 30e-6;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &r);
  FTH_ENSURE_NEAR(160e-6, r.comm[FTH_COMM_EP].raw_s, 1e-12);
  w.ep_combine_override_s = 0;
  w.moe_dispatch_bytes = 1;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, &r);
  FTH_ENSURE_NEAR(4.0 * (10e-6 + 10e-6 * 1048576.0 / 540672.0), r.comm[FTH_COMM_EP].raw_s, 1e-12);
  FTH_ENSURE_NEAR(117.5757575757e-6, r.comm[FTH_COMM_EP].raw_s, 1e-12);
  w.ep_combine_override_s = -1;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_EINVAL);
  return 0;
}

/* EPLB's redundant experts in the footprint: 8 experts over EP 4 put 2 on a
 * GPU, each 3 x h x f = 3 x 1024 x 512 = 1,572,864 parameters split over
 * TP_MoE 2: 1,572,864 expert parameters a GPU. 4 redundant slots (one per EP
 * rank) make it 12 / 8 = 1.5 times that: +786,432 parameters, each with a
 * BF16 weight (+1,572,864 B), an fp32 gradient (+3,145,728 B) and Adam's fp32
 * master and two moments (12 B: +9,437,184 B) under DDP (nothing sharded). */
static int eplb_memory(void) {
  fth_node_def n = tfx_pflops_node();
  fth_topology_def t = tfx_moe_pods();
  fth_model_def m = tfx_moe_model(1024);
  fth_train_def w = work();
  w.dp = FTH_DP_DDP;
  fth_train_plan plan;
  fth_error err;
  fth_memory_footprint base, eplb;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_footprint(&plan, &base);
  w.moe_redundant_experts = 4;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  fth_train_footprint(&plan, &eplb);
  FTH_ENSURE_NEAR(1572864.0, eplb.bytes[FTH_MEM_WEIGHTS] - base.bytes[FTH_MEM_WEIGHTS], 1e-9);
  FTH_ENSURE_NEAR(3145728.0, eplb.bytes[FTH_MEM_GRADIENTS] - base.bytes[FTH_MEM_GRADIENTS], 1e-9);
  FTH_ENSURE_NEAR(9437184.0, eplb.bytes[FTH_MEM_OPTIMIZER] - base.bytes[FTH_MEM_OPTIMIZER], 1e-9);
  /* EPLB fills every GPU alike: slots a multiple of EP, on a MoE model */
  w.moe_redundant_experts = 2;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_EINVAL);
  w.moe_redundant_experts = 1.5;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_EINVAL);
  return 0;
}

/* fth_train_regroup: the shares by traffic of a rework taken with sharing off
 * (what the search does before it knows a variant fits) and then regrouped
 * are the full rework's, to the bit. Scale-out carries DP, EP and DP_MoE: DDP
 * and ZeRO-3 move different DP bytes, so their shares of it differ, and a plan
 * left with DDP's groups times ZeRO-3 otherwise (the check that can fail). */
static int regroup_after_rework(void) {
  fth_node_def n = tfx_pflops_node();
  fth_topology_def t = tfx_moe_pods();
  t.share_by_traffic = 1;
  fth_model_def m = tfx_moe_model(1024);
  fth_train_def w = work(), w3 = work();
  w3.dp = FTH_DP_ZERO3;
  fth_train_plan ref, plan;
  fth_error err;
  FTH_ENSURE(fth_train_compile(&ref, &n, &t, &m, &w3, &err) == FTH_OK);
  fth_train_result want, got;
  fth_train_evaluate(&ref, &want);
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_OK);
  plan.topo.share_by_traffic = 0;
  FTH_ENSURE(fth_train_rework(&plan, &w3, &err) == FTH_OK);
  plan.topo.share_by_traffic = 1;
  fth_train_evaluate(&plan, &got); /* DDP's shares */
  FTH_ENSURE(got.step_time_s != want.step_time_s);
  FTH_ENSURE(got.mem.tier_bytes[FTH_TIER_XPU] == want.mem.tier_bytes[FTH_TIER_XPU]);
  fth_train_regroup(&plan);
  fth_train_evaluate(&plan, &got);
  FTH_ENSURE(got.step_time_s == want.step_time_s);
  for (int k = 0; k < FTH_COMM_KIND_COUNT; k++) FTH_ENSURE(got.comm[k].raw_s == want.comm[k].raw_s);
  return 0;
}

/* A grouped expert GEMM at FP8 runs at the node's expert_gemm_fp8_fraction of the
 * FP8 rate; at BF16 the fraction is not applied. moe_step's setup under a per-tensor
 * FP8 recipe, FP8 at 2 PFLOP/s: the routed experts' 1,610,612,736 forward FLOPs per
 * micro-batch take 0.805306368 us at the whole rate and 1.610612736 us at half of it,
 * so the forward's MLP compute grows by 0.805306368 us and the backward's (data and
 * weight gradients) by twice that; the router and the shared expert do not move. */
static int expert_lowp_rate(void) {
  fth_node_def n = tfx_pflops_node();
  n.compute.flops_per_s[FTH_PREC_FP8] = 2e15;
  fth_topology_def t = tfx_moe_pods();
  fth_model_def m = tfx_moe_model(1024);
  fth_train_def w = work();
  fth_train_result whole, half, bf16_whole, bf16_half;
  w.recipe = FTH_RECIPE_FP8_DELAYED;
  FTH_RUN(tfx_train_run(&n, &t, &m, &w, &whole));
  n.compute.expert_lowp_fraction = 0.5;
  FTH_RUN(tfx_train_run(&n, &t, &m, &w, &half));
  FTH_ENSURE_NEAR(whole.fwd_compute_s[FTH_FLOP_MLP] + 0.805306368e-6, half.fwd_compute_s[FTH_FLOP_MLP],
                  1e-15);
  FTH_ENSURE_NEAR(whole.bwd_compute_s[FTH_FLOP_MLP] + 2.0 * 0.805306368e-6,
                  half.bwd_compute_s[FTH_FLOP_MLP], 1e-15);
  FTH_ENSURE_NEAR(whole.fwd_compute_s[FTH_FLOP_ATTENTION], half.fwd_compute_s[FTH_FLOP_ATTENTION], 0);
  w.recipe = FTH_RECIPE_NONE;
  FTH_RUN(tfx_train_run(&n, &t, &m, &w, &bf16_half));
  n.compute.expert_lowp_fraction = 0.0;
  FTH_RUN(tfx_train_run(&n, &t, &m, &w, &bf16_whole));
  FTH_ENSURE_NEAR(bf16_whole.step_time_s, bf16_half.step_time_s, 0);
  /* Out of (0, 1]: refused where it enters. */
  n.compute.expert_lowp_fraction = 1.5;
  fth_train_plan plan;
  fth_error err;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_EINVAL);
  return 0;
}

int moe_step_test(void) {
  FTH_RUN(expert_lowp_rate());
  FTH_RUN(regroup_after_rework());
  FTH_RUN(moe_step());
  FTH_RUN(ep_override());
  FTH_RUN(eplb_memory());
  FTH_RUN(ep_overlap());
  FTH_RUN(ep_units());
  return 0;
}
