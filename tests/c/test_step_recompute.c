/* Recomputation (selective with and without flash attention, full) and the
 * tiled kernel model inside a training step, every expected number derived
 * by hand.
 *
 * Node: 1 PFLOP/s bf16 at efficiency 1 (attention at the same rate), vector
 * rate bf16 / 8 = 125 TFLOP/s, HBM 1 TB of 10 TB/s (recompute) or 100 TB/s
 * (tiled). Model: GPT-like, h 1024, plain (GeLU) MLP f 4096, untied, no
 * learned positions. Work: micro-batch 1, bf16 activations, fp32 master and
 * gradients, DDP, comp_comm 0, comp_mem 1 (a kernel takes the longer of its
 * compute and memory times), comm_mem 0. */
#include "fth_train.h"
#include "test_fixtures.h"
#include "test_macros.h"

#include <string.h>

static fth_node_def node(double hbm_bytes_per_s, int compute_units) {
  fth_node_def n = fth_node_def_default();
  n.compute.flops_per_s[FTH_PREC_BF16] = 1e15;
  n.compute.efficiency = 1.0;
  n.compute.compute_units = compute_units;
  n.tier[FTH_TIER_XPU].bw_per_stack_bytes_per_s = hbm_bytes_per_s;
  n.tier[FTH_TIER_XPU].size_per_stack_bytes = 1e12;
  n.tier[FTH_TIER_XPU].num_stacks = 1;
  n.tier[FTH_TIER_XPU].efficiency = 1.0;
  n.has_tier[FTH_TIER_XPU] = 1;
  return n;
}

/* `gpus` on one switched dimension at 100 GB/s, latency 0, all TP_Attn. */
static fth_topology_def tp_pod(int gpus) {
  fth_topology_def t = fth_topology_def_default();
  t.num_phys = 1;
  t.phys[0].type = FTH_TOPO_SWITCHED;
  t.phys[0].size = gpus;
  t.phys[0].link.bw_bytes_per_s = 100e9;
  t.phys[0].link.latency_s = 0.0;
  t.num_logical = 1;
  t.logical[0] = (fth_logical_dim_def){FTH_TAG_TP_ATTN, 0, gpus};
  return t;
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

static int run(const fth_node_def *n, const fth_topology_def *t, const fth_model_def *m,
               const fth_train_def *w, fth_train_result *r) {
  return tfx_train_run(n, t, m, w, r);
}

/* TP 2 on 2 GPUs; 2 layers, 16 heads of 64, V 32000; seq 1024, global batch
 * 2 (2 micro-batches of T = 1024 tokens), HBM 10 TB/s.
 *
 * One block forward on one GPU (TP 2):
 *   GEMMs 2 T (3h h + h h + h f + f h) / 2 = 12,884,901,888 FLOP, all
 *   compute-bound (QKV: 3.22 us of compute vs 8,388,608 B = 0.84 us):
 *   12.884901888 us;
 *   flash attention core, causal: 2 T (T + 1)/2 (64 + 64) x 8 heads =
 *   1,074,790,400 FLOP = 1.0747904 us (Q, K, V, O: 4,194,304 B = 0.42 us);
 *   element-wise, memory-bound (the step model's convention: norms and
 *   residuals T h 10 / 2 elements of 2 B in each of attention and MLP =
 *   20,971,520 B; GeLU T f / 2 elements read and written, 8,388,608 B):
 *   2.9360128 us;
 *   kernels 16.895705088 us; two TP all-reduces of [T, h] x 2 B = 2,097,152 B
 *   over 2 GPUs, 2 (1/2) M / 100 GB/s = 20.97152 us each: 58.838745088 us. */
static int recompute(void) {
  fth_node_def n = node(1e13, 0);
  fth_topology_def t = tp_pod(2);
  fth_model_def m = fth_model_def_default();
  m.d_model = 1024;
  m.n_layers = 2;
  m.num_heads = 16;
  m.ffn_hidden = 4096;
  m.vocab_size = 32000;
  m.max_seq_len = 1024;
  fth_train_def w = work(2, 1024);
  fth_train_result none, sel, full, none_nf, sel_nf;
  FTH_RUN(run(&n, &t, &m, &w, &none));
  w.recompute = FTH_RECOMPUTE_SELECTIVE;
  FTH_RUN(run(&n, &t, &m, &w, &sel));
  w.recompute = FTH_RECOMPUTE_FULL;
  FTH_RUN(run(&n, &t, &m, &w, &full));
  w.flash_attention = 0;
  w.recompute = FTH_RECOMPUTE_NONE;
  FTH_RUN(run(&n, &t, &m, &w, &none_nf));
  w.recompute = FTH_RECOMPUTE_SELECTIVE;
  FTH_RUN(run(&n, &t, &m, &w, &sel_nf));

  /* Full: each backward re-runs the stage's forward blocks, TP all-reduces
   * included: 2 micro-batches x 2 blocks x 58.838745088 us = 235.354980352 us. */
  FTH_ENSURE_NEAR(235.354980352e-6, full.recompute_s, 1e-9);
  FTH_ENSURE_NEAR(none.fwd_s, full.fwd_s, 1e-12);
  FTH_ENSURE_NEAR(none.bwd_s + 117.677490176e-6, full.bwd_s, 1e-9);
  FTH_ENSURE_NEAR(none.step_time_s + 235.354980352e-6, full.step_time_s, 1e-9);
  /* TP calls: 2 per block in forward, backward and the re-run forward:
   * 2 x 3 x 2 blocks x 2 micro-batches = 24. */
  FTH_ENSURE_NEAR(24.0, full.comm[FTH_COMM_TP].calls_per_step, 0);
  FTH_ENSURE_NEAR(24.0 * 20.97152e-6, full.comm[FTH_COMM_TP].raw_s, 1e-9);
  FTH_ENSURE_NEAR(16.0, none.comm[FTH_COMM_TP].calls_per_step, 0);
  /* Compute time added: the re-run forward's compute parts, GEMMs 12.884901888
   * + attention 1.0747904 + element-wise 0.4194304 (norms: 2 x 5,242,880
   * elements x 5 FLOP / 125 TFLOP/s) + 0.134217728 (GeLU: 2,097,152 x 8) =
   * 14.513340416 us per block, x 4 = 58.053361664 us. */
  FTH_ENSURE_NEAR(none.compute_s + 58.053361664e-6, full.compute_s, 1e-9);
  /* Model FLOPs per token, forward (seq 1024, causal mean context 512.5):
   * per layer 2 (4 h^2 + 2 h f) = 25,165,824 + 2 x 16 x 128 x 512.5 = 2,099,200,
   * x 2 layers = 54,530,048; LM head 2 h V = 65,536,000; 120,066,048 in all.
   * Model FLOPs per step: 3 x that x 2048 tokens = 737,685,798,912. Full
   * recomputation re-runs the blocks (not the head): hardware FLOPs
   * (3 x 120,066,048 + 54,530,048) x 2048 = 849,363,337,216. */
  FTH_ENSURE_NEAR(737685798912.0, full.model_flops_per_step, 1e-12);
  FTH_ENSURE_NEAR(849363337216.0, full.hardware_flops_per_step, 1e-12);
  FTH_ENSURE_NEAR(737685798912.0 / (full.step_time_s * 2 * 1e15), full.mfu, 1e-12);
  FTH_ENSURE_NEAR(849363337216.0 / 737685798912.0, full.hfu / full.mfu, 1e-12);
  /* Saved activations under full recomputation: the block input only, h x 2 B
   * per token (not split by TP without SP) x 1024 x 2 layers = 4,194,304 B. */
  FTH_ENSURE_NEAR(4194304.0, full.mem.bytes[FTH_MEM_ACTIVATIONS], 1e-12);

  /* Megatron's block method, 1 of the stage's 2 blocks: the re-run forward is one
   * block's, 2 micro-batches x 58.838745088 us = 117.677490176 us, its TP calls
   * 2 x 1 x 2 = 4 (20 in all); hardware FLOPs (3 x 120,066,048 + 54,530,048 / 2) x
   * 2048 = 793,524,568,064; saved: one block input (2,097,152 B) and one block's
   * activations as without recomputation (half of none's). */
  fth_train_result part;
  w.recompute = FTH_RECOMPUTE_FULL;
  w.flash_attention = 1;
  w.recompute_num_layers = 1;
  FTH_RUN(run(&n, &t, &m, &w, &part));
  FTH_ENSURE_NEAR(117.677490176e-6, part.recompute_s, 1e-9);
  FTH_ENSURE_NEAR(none.step_time_s + 117.677490176e-6, part.step_time_s, 1e-9);
  FTH_ENSURE_NEAR(20.0, part.comm[FTH_COMM_TP].calls_per_step, 0);
  FTH_ENSURE_NEAR(793524568064.0, part.hardware_flops_per_step, 1e-12);
  FTH_ENSURE_NEAR(2097152.0 + none.mem.bytes[FTH_MEM_ACTIVATIONS] / 2.0,
                  part.mem.bytes[FTH_MEM_ACTIVATIONS], 1e-12);
  /* More blocks than the stage has: all of them, as recompute full alone. */
  w.recompute_num_layers = 5;
  FTH_RUN(run(&n, &t, &m, &w, &part));
  FTH_ENSURE_NEAR(full.step_time_s, part.step_time_s, 1e-12);
  FTH_ENSURE_NEAR(full.mem.bytes[FTH_MEM_ACTIVATIONS], part.mem.bytes[FTH_MEM_ACTIVATIONS], 1e-12);
  /* A block count without full recomputation is refused with its key. */
  {
    fth_train_plan plan;
    fth_error err;
    w.recompute = FTH_RECOMPUTE_SELECTIVE;
    FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) == FTH_EINVAL);
    FTH_ENSURE(strcmp(err.path, "workload.recompute_num_layers") == 0);
    w.recompute = FTH_RECOMPUTE_NONE;
    w.recompute_num_layers = 0;
    w.flash_attention = 0;
  }

  /* Selective with flash attention: flash keeps no scores and its backward
   * recomputes them anyway (Dao 2023), so nothing changes. */
  FTH_ENSURE(sel.recompute_s == 0.0);
  FTH_ENSURE_NEAR(none.step_time_s, sel.step_time_s, 1e-12);
  FTH_ENSURE_NEAR(none.mem.bytes[FTH_MEM_ACTIVATIONS], sel.mem.bytes[FTH_MEM_ACTIVATIONS], 1e-12);
  FTH_ENSURE_NEAR(sel.mfu, sel.hfu, 1e-12);

  /* Selective without flash attention (Korthikanti et al. 2022 Sec. 5): each
   * backward re-runs the unfused attention core, the full 1024 x 1024 scores
   * of 8 local heads: 2 x 1024^2 x 128 x 8 = 2,147,483,648 FLOP per layer,
   * compute-bound (0.42 us of Q, K, V, O), 4.294967296 us for 2 layers; and
   * the softmax/dropout pass over 2 x 8 x 1024^2 = 16,777,216 scores, 6 x 2 +
   * 1 B each (fth_train.c's count) = 218,103,808 B = 21.8103808 us, memory-
   * bound (8 FLOP each: 1.07 us). 26.105348096 us per micro-batch, x 2. */
  FTH_ENSURE_NEAR(52.210696192e-6, sel_nf.recompute_s, 1e-9);
  FTH_ENSURE_NEAR(none_nf.step_time_s + 52.210696192e-6, sel_nf.step_time_s, 1e-9);
  /* It saves no scores: 10 h = 10,240 B replicated + 24 h / 2 = 12,288 B
   * sharded per token per layer, x 1024 tokens x 2 layers = 46,137,344 B. */
  FTH_ENSURE_NEAR(46137344.0, sel_nf.mem.bytes[FTH_MEM_ACTIVATIONS], 1e-12);
  /* HFU counts the re-run attention cores as the unfused kernels compute
   * them, the whole 1024 x 1024 score matrix: per token per layer, 16 heads
   * of 64, 2 x 1024 keys x (64 + 64) x 16 = 4,194,304 FLOP (the causal
   * count's 2,099,200 x 2048 / 1025); 2 layers x 2048 tokens:
   * 17,179,869,184 on top of the 737,685,798,912 model FLOPs. */
  FTH_ENSURE_NEAR(737685798912.0, sel_nf.model_flops_per_step, 1e-12);
  FTH_ENSURE_NEAR(737685798912.0 + 17179869184.0, sel_nf.hardware_flops_per_step, 1e-12);
  return 0;
}

/* The tiled kernel model (fth_kernel.h) against the roofline on one GPU with
 * 32 compute units, 128 x 128 GEMM tiles, 128-query attention blocks; HBM
 * 100 TB/s so that every GEMM and attention kernel is compute-bound under
 * both models (the least intense, the attention core, does 80 FLOP/B against
 * a ridge of 10). 1 layer, h 1024, 8 heads of 128, V 2048; seq 320 (2.5 tile
 * rows: 3 tiles, the last padded), one micro-batch. The element-wise kernels
 * are the same in both models, so the step differs by the GEMMs and the
 * attention core only.
 *
 * Charged FLOPs, tiled: tiles = ceil(m/128) ceil(n/128); with tiles >= 32,
 * ceil(tiles / 32) waves x 32 tile slots of 2 x 128 x 128 x k FLOP; with
 * fewer tiles, split-K: the tiles' padded FLOPs only. Forward (m = 320):
 *   QKV    n 3072 k 1024:  72 tiles -> 3 waves, 96 slots: 3,221,225,472 (useful 2,013,265,920)
 *   out    n 1024 k 1024:  24 tiles, split-K:            805,306,368 (671,088,640)
 *   up     n 4096 k 1024:  96 tiles -> 96 slots:       3,221,225,472 (2,684,354,560)
 *   down   n 1024 k 4096:  24 tiles, split-K:          3,221,225,472 (2,684,354,560)
 *   head   n 2048 k 1024:  48 tiles -> 2 waves, 64:    2,147,483,648 (1,342,177,280)
 *   attention: 8 heads x 3 query blocks = 24 blocks in 1 wave of 32 slots of
 *   a full block's 2 x 128 x 160.5 (mean causal keys) x 256 = 10,518,528 FLOP:
 *   336,592,896 (useful 2 x 320 x 160.5 x 256 x 8 = 210,370,560).
 *   Sum 12,953,059,328 against 9,605,611,520: +3,347,447,808 FLOP = +3.347447808 us.
 * Backward: data gradient (m 320, n = in, k = out) and weight gradient
 * (m = in, n = out, k 320) of each linear, attention 2.5 x its forward:
 *   QKV  d 24 tiles k 3072:  2,415,919,104   w 192 tiles (6 waves):   2,013,265,920
 *   out  d 24 k 1024:          805,306,368   w 64 (2 waves):            671,088,640
 *   up   d 24 k 4096:        3,221,225,472   w 256 (8 waves):         2,684,354,560
 *   down d 96 (3 waves) k 1024: 3,221,225,472 w 256:                  2,684,354,560
 *   head d 24 k 2048:        1,610,612,736   w 128 (4 waves):         1,342,177,280
 *   attention 2.5 x 336,592,896 = 841,482,240
 *   Sum 21,511,012,352 against 2 x 9,395,240,960 + 2.5 x 210,370,560 =
 *   19,316,408,320: +2,194,604,032 FLOP = +2.194604032 us. */
static int tiled(void) {
  fth_node_def n = node(1e14, 32);
  fth_topology_def t = tp_pod(1);
  fth_model_def m = fth_model_def_default();
  m.d_model = 1024;
  m.n_layers = 1;
  m.num_heads = 8;
  m.ffn_hidden = 4096;
  m.vocab_size = 2048;
  m.max_seq_len = 320;
  fth_train_def w = work(1, 320);
  fth_train_result roof, tile;
  w.kernel_model = FTH_KERNEL_ROOFLINE;
  FTH_RUN(run(&n, &t, &m, &w, &roof));
  w.kernel_model = FTH_KERNEL_TILED;
  FTH_RUN(run(&n, &t, &m, &w, &tile));

  FTH_ENSURE_NEAR(roof.fwd_kernel_s + 3.347447808e-6, tile.fwd_kernel_s, 1e-9);
  FTH_ENSURE_NEAR(roof.bwd_kernel_s + 2.194604032e-6, tile.bwd_kernel_s, 1e-9);
  FTH_ENSURE_NEAR(roof.compute_s + 5.54205184e-6, tile.compute_s, 1e-9);
  FTH_ENSURE_NEAR(roof.step_time_s + 5.54205184e-6, tile.step_time_s, 1e-9);
  /* Useful work is the same: the tiles' padding is time, not FLOPs. Forward
   * GEMMs and attention 9,605,611,520 + element-wise (norms and residuals
   * 320 x 1024 x 5 elements x 5 FLOP in each of attention and MLP =
   * 16,384,000; GeLU 320 x 4096 x 8 = 10,485,760; cross-entropy 320 x 2048
   * x 5 = 3,276,800) = 9,635,758,080. */
  double f_roof = 0, f_tile = 0;
  for (int i = 0; i < FTH_FLOP_PART_COUNT; i++) {
    f_roof += roof.fwd_flops[i];
    f_tile += tile.fwd_flops[i];
  }
  FTH_ENSURE_NEAR(9635758080.0, f_roof, 1e-12);
  FTH_ENSURE_NEAR(9635758080.0, f_tile, 1e-12);
  FTH_ENSURE_NEAR(roof.mfu * roof.step_time_s, tile.mfu * tile.step_time_s, 1e-12);
  return 0;
}

int step_recompute_test(void) {
  FTH_RUN(recompute());
  FTH_RUN(tiled());
  return 0;
}
