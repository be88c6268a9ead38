/* Sequence parallelism, context parallelism, ZeRO-1/2 and the interleaved
 * pipeline schedule in a training step, every expected number derived by hand.
 *
 * Node: 1 PFLOP/s bf16 at efficiency 1; HBM 10 TB/s (1 TB); vector rate
 * bf16 / 8 = 125 TFLOP/s. Fabric: one switched dimension of 4 GPUs at
 * 100 GB/s per GPU, latency 0. Model: GPT-like, h 1024, 16 heads of 64, plain
 * (GeLU) MLP f 4096, V 32000, untied, no learned positions. Work: micro-batch
 * 1, bf16 activations, fp32 master and gradients, flash attention, comp_comm 0
 * (nothing hidden), comp_mem 1, comm_mem 0. Each case states the rest. */
#include "fth_train.h"
#include "test_fixtures.h"
#include "test_macros.h"

#include <string.h>

/* One switched pod of 4 GPUs; `a` and `b` are the logical dimensions on it. */
static fth_topology_def pod(fth_logical_tag a, int na, fth_logical_tag b, int nb) {
  fth_topology_def t = fth_topology_def_default();
  t.share_by_traffic = 0; /* the even split the hand derivations below assume */
  t.num_phys = 1;
  t.phys[0].type = FTH_TOPO_SWITCHED;
  t.phys[0].size = 4;
  t.phys[0].link.bw_bytes_per_s = 100e9;
  t.phys[0].link.latency_s = 0.0;
  t.num_logical = 0;
  t.logical[t.num_logical++] = (fth_logical_dim_def){a, 0, na};
  if (nb > 0) t.logical[t.num_logical++] = (fth_logical_dim_def){b, 0, nb};
  return t;
}

static fth_model_def gpt(int layers) {
  fth_model_def m = fth_model_def_default();
  m.d_model = 1024;
  m.n_layers = layers;
  m.num_heads = 16;
  m.ffn_hidden = 4096;
  m.vocab_size = 32000;
  m.max_seq_len = 2048;
  return m;
}

static fth_train_def work(double global_batch, double seq) {
  fth_train_def w = fth_train_def_default();
  w.global_batch = global_batch;
  w.micro_batch = 1;
  w.seq_len = seq;
  w.comp_comm_eff = 0.0;
  w.comp_mem_eff = 1.0;
  w.comm_mem_eff = 0.0;
  return w;
}

static int run(const fth_topology_def *t, const fth_model_def *m, const fth_train_def *w,
               fth_train_result *r) {
  fth_node_def n = tfx_pflops_node();
  return tfx_train_run(&n, t, m, w, r);
}

/* SP (Korthikanti et al. 2022 Sec. 4.2.2): TP 4, 2 layers, seq 1024, global
 * batch 2 (2 micro-batches), with and without sequence parallelism. */
static int sequence_parallel(void) {
  fth_topology_def t = pod(FTH_TAG_TP_ATTN, 4, FTH_TAG_TP_ATTN, 0);
  fth_model_def m = gpt(2);
  fth_train_def w = work(2, 1024);
  fth_train_result off, on;
  FTH_RUN(run(&t, &m, &w, &off));
  w.sequence_parallel = 1;
  FTH_RUN(run(&t, &m, &w, &on));

  /* Without SP: an all-reduce of the [1024, h] bf16 activation (2,097,152 B)
   * after attention and after the MLP, forward and backward: 2 x 2 x 2 layers
   * x 2 micro-batches = 16 calls of ring 2 (3/4) M / 100 GB/s = 31.45728 us. */
  const fth_comm_item *a = &off.comm[FTH_COMM_TP];
  FTH_ENSURE(a->op == FTH_COLL_ALL_REDUCE);
  FTH_ENSURE_NEAR(2097152.0, a->bytes_per_call, 1e-12);
  FTH_ENSURE_NEAR(16.0, a->calls_per_step, 0);
  FTH_ENSURE_NEAR(16.0 * 31.45728e-6, a->raw_s, 1e-9);
  /* With SP each all-reduce becomes a reduce-scatter (input 2,097,152 B) and
   * an all-gather (output 2,097,152 B): 32 calls of (3/4) M / B = 15.72864 us,
   * the same 503.31648 us in all (a ring all-reduce is exactly RS + AG). */
  const fth_comm_item *b = &on.comm[FTH_COMM_TP];
  FTH_ENSURE(b->op == FTH_COLL_REDUCE_SCATTER);
  FTH_ENSURE_NEAR(2097152.0, b->bytes_per_call, 1e-12);
  FTH_ENSURE_NEAR(32.0, b->calls_per_step, 0);
  FTH_ENSURE_NEAR(32.0 * 2097152.0, b->bytes_per_step, 1e-12);
  FTH_ENSURE_NEAR(32.0 * 15.72864e-6, b->raw_s, 1e-9);
  FTH_ENSURE_NEAR(503.31648e-6, b->raw_s, 1e-9);

  /* Attention-part forward FLOPs per micro-batch (T = 1024 tokens):
   *   QKV 2 T h 3h / 4 = 1,610,612,736; output 2 T (h / 4) h = 536,870,912;
   *   causal core 2 T (T + 1)/2 (64 + 64) (16 / 4 heads) = 537,395,200;
   *   norms and residuals (element-wise convention of the step model: T h
   *   10 / 2 elements at 5 FLOP) 26,214,400 on every TP rank without SP, a
   *   quarter (6,553,600) with SP, where each rank holds T / 4 tokens there.
   *   Two layers: 5,422,186,496 without SP, 5,382,864,896 with. */
  FTH_ENSURE_NEAR(5422186496.0, off.fwd_flops[FTH_FLOP_ATTENTION], 1e-12);
  FTH_ENSURE_NEAR(5382864896.0, on.fwd_flops[FTH_FLOP_ATTENTION], 1e-12);

  /* Saved activations, Korthikanti et al. 2022 per token per layer with
   * flash attention: 10 h = 10,240 B replicated over TP (norm inputs, GEMM
   * inputs, dropout masks), 24 h / 4 = 6,144 B sharded, the fp32 log-sum-exp
   * 4 x 16 / 4 = 16 B; SP also splits the replicated 10 h over TP (2,560 B).
   * 16,400 resp. 8,720 B x 1024 tokens x 2 layers x 1 micro-batch in flight
   * (no pipeline) = 33,587,200 resp. 17,858,560 B. */
  FTH_ENSURE_NEAR(33587200.0, off.mem.bytes[FTH_MEM_ACTIVATIONS], 1e-12);
  FTH_ENSURE_NEAR(17858560.0, on.mem.bytes[FTH_MEM_ACTIVATIONS], 1e-12);

  /* SP with a pipeline: TP 2 x PP 2 in the pod (each gets 50 GB/s), 2 layers
   * (one per stage). The hand-off is scattered over TP: [1024, h] x 2 B / 2 =
   * 1,048,576 B, one hop at 50 GB/s = 20.97152 us, forward and backward for
   * each of the 2 micro-batches: 4 sends. TP: RS and AG of 2,097,152 B over 2
   * GPUs, (1/2) M / 50 GB/s = 20.97152 us each, 2 pairs per block forward and
   * backward, 1 block, 2 micro-batches: 16 calls. */
  t = pod(FTH_TAG_TP_ATTN, 2, FTH_TAG_PP, 2);
  fth_train_result pp;
  FTH_RUN(run(&t, &m, &w, &pp));
  FTH_ENSURE_NEAR(1048576.0, pp.comm[FTH_COMM_PP].bytes_per_call, 1e-12);
  FTH_ENSURE_NEAR(4.0, pp.comm[FTH_COMM_PP].calls_per_step, 0);
  FTH_ENSURE_NEAR(4.0 * 20.97152e-6, pp.comm[FTH_COMM_PP].exposed_s, 1e-9);
  FTH_ENSURE_NEAR(2097152.0, pp.comm[FTH_COMM_TP].bytes_per_call, 1e-12);
  FTH_ENSURE_NEAR(16.0, pp.comm[FTH_COMM_TP].calls_per_step, 0);
  FTH_ENSURE_NEAR(16.0 * 20.97152e-6, pp.comm[FTH_COMM_TP].raw_s, 1e-9);

  /* The same without SP: Megatron's scatter/gather still sends 1/TP of the
   * replicated activation per rank (1,048,576 B, 20.97152 us) and all-gathers
   * the 2,097,152 B over TP after receipt, (1/2) x 2 MiB / 50 GB/s =
   * 20.97152 us more per hand-off. */
  w.sequence_parallel = 0;
  fth_train_result sg;
  FTH_RUN(run(&t, &m, &w, &sg));
  FTH_ENSURE_NEAR(1048576.0, sg.comm[FTH_COMM_PP].bytes_per_call, 1e-12);
  FTH_ENSURE_NEAR(4.0, sg.comm[FTH_COMM_PP].calls_per_step, 0);
  FTH_ENSURE_NEAR(4.0 * 2.0 * 20.97152e-6, sg.comm[FTH_COMM_PP].exposed_s, 1e-9);
  return 0;
}

/* CP (ring attention, Liu et al. 2023; Transformer Engine's p2p exchange): TP 2 x
 * CP 2 in the pod (each gets half of its 100 GB/s: 50 GB/s), 2 layers, seq 2048, one
 * micro-batch. Each GPU holds q = 2048 / CP 2 = 1024 tokens and 8 of the 16 heads. */
static int context_parallel(void) {
  fth_topology_def t = pod(FTH_TAG_TP_ATTN, 2, FTH_TAG_CP, 2);
  fth_model_def m = gpt(2);
  fth_train_def w = work(1, 2048);
  fth_train_result r;
  FTH_RUN(run(&t, &m, &w, &r));
  /* A ring step passes one rank's K and V on: 1024 tokens x 8 heads x (64 + 64) x 2 B
   * = 2,097,152 B, a send/recv at 50 GB/s: 41.94304 us. Forward CP - 1 = 1 transfer a
   * layer; backward K/V at step 0 and dK/dV back at step 1 (same bytes): 2. So
   * 3 x 2 layers = 6 transfers. */
  const fth_comm_item *cp = &r.comm[FTH_COMM_CP];
  FTH_ENSURE(cp->op == FTH_COLL_SEND_RECV);
  FTH_ENSURE_EQ_INT(2, cp->group_size);
  FTH_ENSURE_NEAR(2097152.0, cp->bytes_per_call, 1e-12);
  FTH_ENSURE_NEAR(6.0, cp->calls_per_step, 0);
  FTH_ENSURE_NEAR(6.0 * 41.94304e-6, cp->raw_s, 1e-9);
  /* Each transfer hides under one attention step (1 PFLOP/s, 10 TB/s, full overlap):
   * forward, the diagonal step 0 (causal 1024 x 1024: 2 x 1024 x 512.5 keys x 128 x 8
   * heads = 1,074,790,400 FLOP, 1.0747904 us; its Q, K, V, O, 4,194,304 B, take
   * 0.4194304 us) covers the transfer for step 1: 40.8682496 us exposed. Backward 2.5x
   * the FLOPs: step 0 2.686976 us under the K/V (39.256064 us exposed), step 1 (1024
   * queries x 512 keys, 1,073,741,824 FLOP x 2.5 = 2.68435456 us) under the dK/dV
   * (39.25868544 us). 119.38299904 us a layer, x 2. */
  FTH_ENSURE_NEAR(2.0 * 119.38299904e-6, cp->exposed_s, 1e-12);
  FTH_ENSURE_NEAR(cp->raw_s - cp->exposed_s, cp->hidden_s, 1e-12);
  /* Tokens per GPU: 2048 / CP 2 = 1024, so the TP all-reduce carries
   * [1024, h] x 2 B = 2,097,152 B. */
  FTH_ENSURE_NEAR(2097152.0, r.comm[FTH_COMM_TP].bytes_per_call, 1e-12);
  /* MLP forward per layer on 1024 tokens, TP 2: 2 T 2 h f / 2 = 8,589,934,592;
   * norms/residuals 1024 h x 25 = 26,214,400; GeLU 1024 x 2048 x 8 =
   * 16,777,216: 8,632,926,208, x 2 layers = 17,265,852,416.
   * Attention per layer: QKV 2 T h 3h / 2 = 3,221,225,472, output 1,073,741,824,
   * the two ring steps 1,074,790,400 + 1,073,741,824 = 2,148,532,224 (the causal
   * 2048 x 2048 over 8 heads, halved), element-wise 26,214,400, and the merges: the
   * output's, 2 FLOP per element of 1024 x 8 x 64 = 524,288 in each of the 2 steps
   * (2,097,152), the LSE's, 5 per token and head after the first step (40,960):
   * 6,471,852,032, x 2 layers = 12,943,704,064. */
  FTH_ENSURE_NEAR(17265852416.0, r.fwd_flops[FTH_FLOP_MLP], 1e-12);
  FTH_ENSURE_NEAR(12943704064.0, r.fwd_flops[FTH_FLOP_ATTENTION], 1e-12);

  /* GQA, 4 K/V heads: each TP rank holds 2 of them, so a step carries
   * 1024 x 2 x 128 x 2 B = 524,288 B: 10.48576 us. */
  m.num_kv_heads = 4;
  FTH_RUN(run(&t, &m, &w, &r));
  FTH_ENSURE_NEAR(524288.0, r.comm[FTH_COMM_CP].bytes_per_call, 1e-12);
  FTH_ENSURE_NEAR(6.0 * 10.48576e-6, r.comm[FTH_COMM_CP].raw_s, 1e-9);

  /* MQA, 1 K/V head: fewer than the TP ranks, so both ranks hold it whole:
   * 1024 x 128 x 2 B = 262,144 B, 5.24288 us. */
  m.num_kv_heads = 1;
  FTH_RUN(run(&t, &m, &w, &r));
  FTH_ENSURE_NEAR(262144.0, r.comm[FTH_COMM_CP].bytes_per_call, 1e-12);
  FTH_ENSURE_NEAR(6.0 * 5.24288e-6, r.comm[FTH_COMM_CP].raw_s, 1e-9);

  /* A link 1000x faster: a transfer (41.94304 ns) is shorter than any step, nothing
   * is exposed. */
  m.num_kv_heads = 16;
  t.phys[0].link.bw_bytes_per_s = 100e12;
  FTH_RUN(run(&t, &m, &w, &r));
  FTH_ENSURE_NEAR(0.0, r.comm[FTH_COMM_CP].exposed_s, 1e-15);
  FTH_ENSURE(r.comm[FTH_COMM_CP].raw_s > 0);
  return 0;
}

/* The host under CP: the same TP 2 x CP 2 pod, 1 ms a host operator, far above the
 * device's microseconds, so each pass takes its host time (fth_host.h). A dense block
 * issues 16 attention + 6 MLP operators forward and twice that backward; the p2p ring
 * adds 25 a step, 2 steps, to each pass: forward 2 layers x (22 + 50) = 144 ms,
 * backward 2 x (44 + 50) = 188 ms. The all-to-all exchange has no ring: 44 / 88 ms. */
static int context_parallel_host(void) {
  fth_topology_def t = pod(FTH_TAG_TP_ATTN, 2, FTH_TAG_CP, 2);
  fth_model_def m = gpt(2);
  fth_train_def w = work(1, 2048);
  w.host_op_s = 1e-3;
  fth_train_result r;
  FTH_RUN(run(&t, &m, &w, &r));
  FTH_ENSURE_NEAR(144e-3, r.fwd_s, 1e-12);
  FTH_ENSURE_NEAR(188e-3, r.bwd_s, 1e-12);
  w.cp_comm = FTH_CP_A2A;
  FTH_RUN(run(&t, &m, &w, &r));
  FTH_ENSURE_NEAR(44e-3, r.fwd_s, 1e-12);
  FTH_ENSURE_NEAR(88e-3, r.bwd_s, 1e-12);
  return 0;
}

/* CP with the all-to-all exchange (cp_comm a2a: DeepSpeed-Ulysses, TE's
 * AttnFuncWithCPAndQKVOA2A): the same TP 2 x CP 2 pod. */
static int context_parallel_a2a(void) {
  fth_topology_def t = pod(FTH_TAG_TP_ATTN, 2, FTH_TAG_CP, 2);
  fth_model_def m = gpt(2);
  fth_train_def w = work(1, 2048);
  w.cp_comm = FTH_CP_A2A;
  fth_train_result r;
  FTH_RUN(run(&t, &m, &w, &r));
  /* Q, K, V and O of a GPU: 1024 tokens x 8 heads x 64 x 2 B = 1,048,576 B each; an
   * all-to-all over 2 ranks sends half, 524,288 B at 50 GB/s: 10.48576 us. Forward
   * Q, K, V before the core and O after; backward dO, then dQ, dK, dV: 8 a layer,
   * 16 in all, on the core's path: all exposed. */
  const fth_comm_item *cp = &r.comm[FTH_COMM_CP];
  FTH_ENSURE(cp->op == FTH_COLL_ALL_TO_ALL);
  FTH_ENSURE_NEAR(1048576.0, cp->bytes_per_call, 1e-12);
  FTH_ENSURE_NEAR(16.0, cp->calls_per_step, 0);
  FTH_ENSURE_NEAR(16.0 * 10.48576e-6, cp->raw_s, 1e-9);
  FTH_ENSURE_NEAR(cp->raw_s, cp->exposed_s, 1e-12);
  /* The core: the whole causal 2048 x 2048 on 8 / 2 = 4 heads, 2 x 2048 x 1024.5 x
   * 128 x 4 = 2,148,532,224 FLOP, as the ring's two steps; nothing to merge (the
   * reorder copies move bytes, no FLOPs): 6,469,713,920 a layer, x 2. */
  FTH_ENSURE_NEAR(12939427840.0, r.fwd_flops[FTH_FLOP_ATTENTION], 1e-12);
  /* Bytes of the attention part, against the ring's (the projections and norms the
   * same): the ring's steps move Q, K, V, O of the diagonal (4,194,304 B) and of the
   * half step (3,145,728 B), its merges the output's 524,288 elements (2 + 3 moves of
   * 2 B: 5,242,880 B) and the LSE's 8,192 (12 B: 98,304 B): 12,681,216 B. The a2a core
   * moves 2048 x 4 x (64 + 128 + 64) x 2 B = 4,194,304 B and the reorders copy each of
   * the 4 exchanged tensors twice (524,288 elements x 4 moves x 2 B each: 16,777,216 B):
   * 20,971,520 B. 8,290,304 B more a layer, x 2. */
  fth_train_result ring;
  w.cp_comm = FTH_CP_P2P;
  FTH_RUN(run(&t, &m, &w, &ring));
  FTH_ENSURE_NEAR(16580608.0, r.fwd_bytes[FTH_FLOP_ATTENTION] - ring.fwd_bytes[FTH_FLOP_ATTENTION],
                  1e-6);
  w.cp_comm = FTH_CP_A2A;

  /* The exchange splits the heads: with one K/V head a TP rank holds half of one, which
   * CP 2 cannot split: the workload is refused, naming cp_comm. */
  m.num_kv_heads = 1;
  fth_node_def n = tfx_pflops_node();
  fth_train_plan plan;
  fth_error err;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) != FTH_OK);
  FTH_ENSURE(strcmp(err.path, "workload.cp_comm") == 0);
  return 0;
}

/* ZeRO-1 and ZeRO-2 (Rajbhandari et al. 2020) against DDP: DP 4 in the pod,
 * 2 layers, seq 1024, global batch 4 (one micro-batch per rank). */
static int zero_traffic(void) {
  fth_topology_def t = pod(FTH_TAG_DP_ATTN, 4, FTH_TAG_DP_ATTN, 0);
  fth_model_def m = gpt(2);
  fth_train_def w = work(4, 1024);
  fth_train_result ddp, z1, z2;
  FTH_RUN(run(&t, &m, &w, &ddp));
  w.dp = FTH_DP_ZERO1;
  FTH_RUN(run(&t, &m, &w, &z1));
  w.dp = FTH_DP_ZERO2;
  FTH_RUN(run(&t, &m, &w, &z2));

  /* Parameters per GPU (TP 1, PP 1): 2 layers x (4 h^2 + 2 h f + 2 h) =
   * 2 x 12,584,960 plus embedding and LM head 2 V h = 65,536,000 and the
   * final norm h = 1,024: P = 90,706,944. fp32 gradients: 4 P = 362,827,776 B. */
  FTH_ENSURE_NEAR(90706944.0, ddp.params_per_gpu, 1e-12);
  FTH_ENSURE_NEAR(362827776.0, ddp.comm[FTH_COMM_DP].bytes_per_call, 1e-12);
  /* DDP: ring all-reduce 2 (3/4) 4P / 100 GB/s = 5.44241664 ms. */
  FTH_ENSURE(ddp.comm[FTH_COMM_DP].op == FTH_COLL_ALL_REDUCE);
  FTH_ENSURE_NEAR(5.44241664e-3, ddp.comm[FTH_COMM_DP].raw_s, 1e-9);
  /* ZeRO-1 and -2: reduce-scatter of the 4P gradient bytes, (3/4) 4P / B =
   * 2.72120832 ms, then all-gather of the updated bf16 weights, (3/4) 2P / B =
   * 1.36060416 ms: 4.08181248 ms, all exposed (comp_comm 0). */
  for (int i = 0; i < 2; i++) {
    const fth_train_result *z = i == 0 ? &z1 : &z2;
    FTH_ENSURE(z->comm[FTH_COMM_DP].op == FTH_COLL_REDUCE_SCATTER);
    FTH_ENSURE_NEAR(362827776.0, z->comm[FTH_COMM_DP].bytes_per_call, 1e-12);
    FTH_ENSURE_NEAR(4.08181248e-3, z->comm[FTH_COMM_DP].raw_s, 1e-9);
    FTH_ENSURE_NEAR(4.08181248e-3, z->comm[FTH_COMM_DP].exposed_s, 1e-9);
    /* Adam over the 1/4 of the parameters this rank owns: read master, two
     * moments, gradient; write master, moments, bf16 weights: 6 x 4 + 4 + 2 =
     * 30 B per parameter, P / 4 x 30 B / 10 TB/s = 68.030208 us (DDP: all P,
     * 272.120832 us). */
    FTH_ENSURE_NEAR(68.030208e-6, z->optimizer_s, 1e-9);
    /* The forward and backward are those of DDP: the step differs by the DP
     * traffic and the optimizer only, (4.08181248 - 5.44241664) ms +
     * (68.030208 - 272.120832) us = -1.564694784 ms. */
    FTH_ENSURE_NEAR(ddp.step_time_s - 1.564694784e-3, z->step_time_s, 1e-9);
  }
  FTH_ENSURE_NEAR(272.120832e-6, ddp.optimizer_s, 1e-9);
  /* Memory: bf16 weights 2P = 181,413,888 B everywhere; fp32 gradients 4P =
   * 362,827,776 B, sharded by ZeRO-2 (P = 90,706,944 B); fp32 master + two
   * moments 12P = 1,088,483,328 B, sharded by ZeRO-1 and -2 (3P = 272,120,832 B). */
  FTH_ENSURE_NEAR(181413888.0, z1.mem.bytes[FTH_MEM_WEIGHTS], 1e-12);
  FTH_ENSURE_NEAR(181413888.0, z2.mem.bytes[FTH_MEM_WEIGHTS], 1e-12);
  FTH_ENSURE_NEAR(362827776.0, ddp.mem.bytes[FTH_MEM_GRADIENTS], 1e-12);
  FTH_ENSURE_NEAR(362827776.0, z1.mem.bytes[FTH_MEM_GRADIENTS], 1e-12);
  FTH_ENSURE_NEAR(90706944.0, z2.mem.bytes[FTH_MEM_GRADIENTS], 1e-12);
  FTH_ENSURE_NEAR(1088483328.0, ddp.mem.bytes[FTH_MEM_OPTIMIZER], 1e-12);
  FTH_ENSURE_NEAR(272120832.0, z1.mem.bytes[FTH_MEM_OPTIMIZER], 1e-12);
  FTH_ENSURE_NEAR(272120832.0, z2.mem.bytes[FTH_MEM_OPTIMIZER], 1e-12);
  return 0;
}

/* Interleaved 1F1B (Narayanan et al. 2021 Sec. 2.2): PP 4 in the pod, 8
 * layers, v = 2 chunks of 1 layer per GPU, seq 1024, 8 micro-batches. */
static int interleaved(void) {
  fth_topology_def t = pod(FTH_TAG_PP, 4, FTH_TAG_PP, 0);
  fth_model_def m = gpt(8);
  fth_train_def w = work(8, 1024);
  fth_train_result one, il;
  FTH_RUN(run(&t, &m, &w, &one));
  w.pp = FTH_PP_INTERLEAVED;
  w.virtual_stages = 2;
  FTH_RUN(run(&t, &m, &w, &il));

  /* Hand-offs: the [1024, h] bf16 activation, 2,097,152 B, one hop at
   * 100 GB/s = 20.97152 us; forward and backward per micro-batch and chunk:
   * 1F1B 2 x 8 = 16 sends, interleaved 2 x 8 x 2 = 32; nothing hidden. */
  const fth_comm_item *a = &one.comm[FTH_COMM_PP], *b = &il.comm[FTH_COMM_PP];
  FTH_ENSURE(b->op == FTH_COLL_SEND_RECV);
  FTH_ENSURE_NEAR(2097152.0, a->bytes_per_call, 1e-12);
  FTH_ENSURE_NEAR(2097152.0, b->bytes_per_call, 1e-12);
  FTH_ENSURE_NEAR(16.0, a->calls_per_step, 0);
  FTH_ENSURE_NEAR(32.0, b->calls_per_step, 0);
  FTH_ENSURE_NEAR(16.0 * 20.97152e-6, a->exposed_s, 1e-9);
  FTH_ENSURE_NEAR(32.0 * 20.97152e-6, b->exposed_s, 1e-9);

  /* The stage's work per micro-batch is the same under both schedules; the
   * bubble is (p - 1)(t_f + t_b) = 3 (t_f + t_b) for 1F1B and
   * (p - 1)(t_f + t_b) / v = 1.5 (t_f + t_b) interleaved (Narayanan et al.
   * 2021 Eq. 1 and Sec. 2.2.2). */
  FTH_ENSURE_NEAR(one.fwd_s, il.fwd_s, 1e-12);
  /* The slowest stage is the last: its 2 blocks and the LM head with the
   * loss, not the first stage's embedding lookup too: 150.158180352 us. */
  FTH_ENSURE_NEAR(150.158180352e-6, one.fwd_s, 1e-9);
  FTH_ENSURE_NEAR(one.bwd_s, il.bwd_s, 1e-12);
  double tftb = il.fwd_s + il.bwd_s;
  FTH_ENSURE_NEAR(3.0 * tftb, one.bubble_s, 1e-12);
  FTH_ENSURE_NEAR(1.5 * tftb, il.bubble_s, 1e-12);
  /* So the step changes by the bubble saved and the 16 extra sends. */
  FTH_ENSURE_NEAR(one.step_time_s - 1.5 * tftb + 16.0 * 20.97152e-6, il.step_time_s, 1e-9);
  return 0;
}

/* Data-parallel traffic under the passes (fth_train_dp_exposed_s) and the compute
 * the hidden part displaces (dp_comm_compute_fraction). */
static int dp_overlap(void) {
  /* The queue by hand. One chunk: total - window, never below 0. */
  FTH_ENSURE_NEAR(6.0, fth_train_dp_exposed_s(10.0, 4.0, 1.0, 1.0), 1e-15);
  FTH_ENSURE_NEAR(0.0, fth_train_dp_exposed_s(3.0, 4.0, 1.0, 1.0), 1e-15);
  FTH_ENSURE_NEAR(0.0, fth_train_dp_exposed_s(0.0, 4.0, 1.0, 1.0), 1e-15);
  /* Four chunks, window 8 (2 per chunk-pass), ready 2 chunk-passes apart: 12 s
   * of traffic keeps up (3 s a chunk in 4 s between them), so only the last
   * chunk's 3 s outlast its own 2 s pass: 1 s. 40 s does not: the queue ends
   * 40 - 3 x 2 x 2 = 28 s after the last-ready chunk's release (the start of
   * its final pass), less that pass's 2 s: 26 s. With no window at all every
   * second is exposed whatever the chunks. */
  FTH_ENSURE_NEAR(1.0, fth_train_dp_exposed_s(12.0, 8.0, 4.0, 2.0), 1e-15);
  FTH_ENSURE_NEAR(26.0, fth_train_dp_exposed_s(40.0, 8.0, 4.0, 2.0), 1e-15);
  FTH_ENSURE_NEAR(12.0, fth_train_dp_exposed_s(12.0, 0.0, 4.0, 2.0), 1e-15);

  /* ZeRO-1 over DP 4 (zero_traffic's step: reduce-scatter 2.72120832 ms, all-gather
   * 1.36060416 ms) with both windows whole (comp_comm = comm_mem = 1): the
   * reduce-scatter hides under the one backward, the gather under the forward. */
  fth_topology_def t = pod(FTH_TAG_DP_ATTN, 4, FTH_TAG_DP_ATTN, 0);
  fth_model_def m = gpt(2);
  fth_train_def w = work(4, 1024);
  w.dp = FTH_DP_ZERO1;
  w.comp_comm_eff = 1.0;
  w.comm_mem_eff = 1.0;
  fth_train_result free_, held;
  w.dp_comm_compute_share = 0.0;
  FTH_RUN(run(&t, &m, &w, &free_));
  w.dp_comm_compute_share = 0.3;
  FTH_RUN(run(&t, &m, &w, &held));
  const fth_comm_item *c = &held.comm[FTH_COMM_DP];
  double exposed = fth_max(0.0, 2.72120832e-3 - held.bwd_kernel_s) +
                   fth_max(0.0, 1.36060416e-3 - held.fwd_kernel_s);
  FTH_ENSURE_NEAR(4.08181248e-3, c->raw_s, 1e-9);
  FTH_ENSURE_NEAR(exposed, c->exposed_s, 1e-9);
  FTH_ENSURE(c->hidden_s > 0.0);
  /* The hidden part costs 0.3 of itself, and nothing else moves. */
  FTH_ENSURE_NEAR(0.0, free_.dp_interference_s, 0.0);
  FTH_ENSURE_NEAR(0.3 * c->hidden_s, held.dp_interference_s, 1e-12);
  FTH_ENSURE_NEAR(free_.step_time_s + 0.3 * c->hidden_s, held.step_time_s, 1e-12);

  /* Interleaved 1F1B, PP 4 x DP 2 (8 GPUs), 8 layers, 16 sequences (8 micro-batches
   * a pipeline): v = 2 chunks a GPU ready PP = 4 chunk-passes apart, so each
   * half of the traffic hides under more than its own pass. */
  t = pod(FTH_TAG_PP, 4, FTH_TAG_DP_ATTN, 2);
  t.phys[0].size = 8;
  m = gpt(8);
  w = work(16, 1024);
  w.dp = FTH_DP_ZERO1;
  w.comp_comm_eff = 1.0;
  w.comm_mem_eff = 1.0;
  fth_train_result one, il;
  FTH_RUN(run(&t, &m, &w, &one));
  w.pp = FTH_PP_INTERLEAVED;
  w.virtual_stages = 2;
  FTH_RUN(run(&t, &m, &w, &il));
  const fth_comm_item *a = &one.comm[FTH_COMM_DP], *b = &il.comm[FTH_COMM_DP];
  FTH_ENSURE_NEAR(a->raw_s, b->raw_s, 1e-12);
  double rs = b->raw_s * 2.0 / 3.0, ag = b->raw_s / 3.0; /* fp32 gradients, bf16 weights */
  FTH_ENSURE_NEAR(fth_train_dp_exposed_s(rs, one.bwd_kernel_s, 1.0, 1.0) +
                      fth_train_dp_exposed_s(ag, one.fwd_kernel_s, 1.0, 1.0),
                  a->exposed_s, 1e-9);
  FTH_ENSURE_NEAR(fth_train_dp_exposed_s(rs, il.bwd_kernel_s, 2.0, 4.0) +
                      fth_train_dp_exposed_s(ag, il.fwd_kernel_s, 2.0, 4.0),
                  b->exposed_s, 1e-9);
  FTH_ENSURE(b->exposed_s < a->exposed_s);

  /* A share of 1 would stop the compute: refused where it enters. */
  fth_node_def n = tfx_pflops_node();
  fth_train_plan plan;
  fth_error err;
  w.dp_comm_compute_share = 1.0;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_EINVAL);
  FTH_ENSURE(strstr(err.path, "dp_comm_compute_fraction") != NULL);
  return 0;
}

int step_parallel_test(void) {
  FTH_RUN(sequence_parallel());
  FTH_RUN(context_parallel());
  FTH_RUN(context_parallel_a2a());
  FTH_RUN(context_parallel_host());
  FTH_RUN(zero_traffic());
  FTH_RUN(interleaved());
  FTH_RUN(dp_overlap());
  return 0;
}
