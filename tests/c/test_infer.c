/* Inference, derived by hand on a toy GPU (100 TFLOP/s bf16, efficiency 1,
 * HBM 1 TB/s) with the toy dense model (h 1024, 4 layers, 16 heads of 64,
 * plain MLP f 4096, V 32000) on one GPU. */
#include "fth_infer.h"
#include "test_fixtures.h"
#include "test_macros.h"

#include <string.h>

static fth_node_def node(double hbm_bw) {
  fth_node_def n = fth_node_def_default();
  n.compute.flops_per_s[FTH_PREC_BF16] = 100e12;
  n.compute.efficiency = 1.0;
  n.tier[FTH_TIER_XPU].bw_per_stack_bytes_per_s = hbm_bw;
  n.tier[FTH_TIER_XPU].size_per_stack_bytes = 80e9;
  n.tier[FTH_TIER_XPU].num_stacks = 1;
  n.tier[FTH_TIER_XPU].efficiency = 1.0;
  n.has_tier[FTH_TIER_XPU] = 1;
  n.tier[FTH_TIER_HOST].bw_per_stack_bytes_per_s = 50e9;
  n.tier[FTH_TIER_HOST].size_per_stack_bytes = 512e9;
  n.tier[FTH_TIER_HOST].num_stacks = 1;
  n.tier[FTH_TIER_HOST].efficiency = 1.0;
  n.has_tier[FTH_TIER_HOST] = 1;
  return n;
}

static int decode_memory_bound(void) {
  fth_node_def n = node(1e12);
  fth_topology_def t = tfx_one_gpu();
  fth_model_def m = tfx_infer_model();
  fth_infer_def d = fth_infer_def_default();
  d.global_batch = 1;
  d.micro_batch = 1;
  d.context_len = 1023;
  d.gen_tokens = 1; /* the one step sees 1024 cached tokens */
  fth_infer_plan p;
  fth_error err;
  FTH_ENSURE(fth_infer_compile(&p, &n, &t, &m, &d, FTH_PASS_DECODE, &err) == FTH_OK);
  fth_infer_result r;
  fth_infer_evaluate(&p, &r);
  /* Bytes read and written by one decode step (batch 1, 2-byte everything):
   *  per layer: QKV (1024 + 1024 x 3072 + 3072) x 2 = 6,299,648; output
   *  (1024 + 1024^2 + 1024) x 2 = 2,101,248; up and down (1024 + 4096 +
   *  1024 x 4096) x 2 = 8,398,848 each; KV read 1024 tokens x 2048 x 2 =
   *  4,194,304; KV write 4,096; norms/residuals 2 x 5,120 x 2 = 20,480; GeLU
   *  4,096 x 4 = 16,384: 29,433,856 per layer, 117,735,424 for 4.
   *  LM head (1024 + 1024 x 32000 + 32000) x 2 = 65,602,048; embedding 4,096.
   *  Total 183,341,568 B at 1 TB/s; every kernel is memory-bound (the LM head's
   *  65.5 MFLOP take 0.66 us, its bytes 65.6 us). */
  FTH_ENSURE_NEAR(183341568.0 / 1e12, r.tpot_s, 1e-12);
  FTH_ENSURE_NEAR(r.tpot_s, r.time_s, 1e-12);
  /* KV cache per request: 1024 tokens x 2048 elements x 4 layers x 2 B. */
  FTH_ENSURE_NEAR(16777216.0, r.kv_bytes_per_request_per_gpu, 1e-12);
  /* Of that time, the KV cache's share: 4 x (4,194,304 read + 4,096 written)
   * = 16,793,600 B; the weights' (no activations, no attention output):
   * 4 x (6,291,456 + 2,097,152 + 2 x 8,388,608) + the head's 65,536,000 =
   * 166,199,296 B. */
  FTH_ENSURE_NEAR(16793600.0 / 1e12, r.kv_read_s, 1e-12);
  FTH_ENSURE_NEAR(166199296.0 / 1e12, r.weights_read_s, 1e-12);
  /* One engine iteration (what a serving simulator calls) of the same batch
   * at the same context is the decode step. */
  fth_phase it;
  FTH_ENSURE_NEAR(r.tpot_s, fth_infer_iteration(&p, 1, 1, 1024, &it, NULL), 1e-12);

  /* Properties: a longer context costs more per token; a bigger batch raises
   * throughput; the KV cache in host memory (50 GB/s) slows decode. */
  d.context_len = 8191;
  FTH_ENSURE(fth_infer_compile(&p, &n, &t, &m, &d, FTH_PASS_DECODE, &err) == FTH_OK);
  fth_infer_result longer;
  fth_infer_evaluate(&p, &longer);
  FTH_ENSURE(longer.tpot_s > r.tpot_s);
  double prev = 0;
  for (double b = 1; b <= 64; b *= 2) {
    d.global_batch = d.micro_batch = b;
    FTH_ENSURE(fth_infer_compile(&p, &n, &t, &m, &d, FTH_PASS_DECODE, &err) == FTH_OK);
    fth_infer_result rb;
    fth_infer_evaluate(&p, &rb);
    FTH_ENSURE(rb.tokens_per_s > prev);
    prev = rb.tokens_per_s;
  }
  d.traffic_tier[FTH_MEM_KV_CACHE] = FTH_TIER_HOST;
  FTH_ENSURE(fth_infer_compile(&p, &n, &t, &m, &d, FTH_PASS_DECODE, &err) == FTH_OK);
  fth_infer_result slow;
  fth_infer_evaluate(&p, &slow);
  d.traffic_tier[FTH_MEM_KV_CACHE] = FTH_TIER_XPU;
  FTH_ENSURE(fth_infer_compile(&p, &n, &t, &m, &d, FTH_PASS_DECODE, &err) == FTH_OK);
  fth_infer_result fast;
  fth_infer_evaluate(&p, &fast);
  FTH_ENSURE(slow.tpot_s > fast.tpot_s);
  /* The largest batch: (80 GB - weights - transient) / 8192 x 2048 x 4 x 2 B per request. */
  FTH_ENSURE(fast.max_global_batch > 64 && fast.max_global_batch < 80e9 / (8192.0 * 2048 * 4 * 2));
  return 0;
}

static int prefill_compute_bound(void) {
  fth_node_def n = node(1e18); /* memory effectively free: every kernel compute-bound */
  fth_topology_def t = tfx_one_gpu();
  fth_model_def m = tfx_infer_model();
  fth_infer_def d = fth_infer_def_default();
  d.global_batch = 8;
  d.micro_batch = 8;
  d.prompt_len = 1024;
  fth_infer_plan p;
  fth_error err;
  FTH_ENSURE(fth_infer_compile(&p, &n, &t, &m, &d, FTH_PASS_PREFILL, &err) == FTH_OK);
  fth_infer_result r;
  fth_infer_evaluate(&p, &r);
  /* Matrix FLOPs, T = 8192 tokens: linears per layer 2 T (3h^2 + h^2 + 2 h f) =
   * 206,158,430,208; causal attention 2 x 1024 x 512.5 x 128 x 16 heads x 8
   * requests = 17,196,646,400; x 4 layers = 893,420,306,432; LM head for the
   * next token of each request 2 x 8 x 1024 x 32000 = 524,288,000: total
   * 893,944,594,432 at 100 TFLOP/s = 8.93944594432 ms. Vector FLOPs: norms
   * and residuals 8192 x 1024 x 5 elements x 5 x 2, GeLU 8192 x 4096 x 8:
   * 687,865,856 per layer, 2,751,463,424 at 12.5 TFLOP/s = 0.22011707392 ms. */
  FTH_ENSURE_NEAR(8.93944594432e-3 + 2.2011707392e-4, r.ttft_s, 1e-6);
  FTH_ENSURE_NEAR(r.ttft_s, r.time_s, 1e-12);
  FTH_ENSURE_NEAR(8.0 * 1024.0 / r.time_s, r.tokens_per_s, 1e-12);
  /* The same prefill as one engine iteration, and as four chunks of 256 new
   * tokens against 0, 256, 512, 768 cached (chunked prefill): chunk i's
   * queries see on average 256 (i + 1) - 127.5 keys, summing to 256 x 2050 =
   * 524,800 = 1024 x 512.5, the whole prompt's; the linears and element-wise
   * work scale with tokens. So the chunks' attention and MLP FLOPs add up to
   * the prompt's exactly (only the LM head, once per iteration, repeats). */
  fth_phase whole, chunk;
  FTH_ENSURE_NEAR(r.stage_s, fth_infer_iteration(&p, 8, 1024, 0, &whole, NULL), 1e-12);
  double attn = 0, mlp = 0;
  for (int i = 0; i < 4; i++) {
    fth_infer_iteration(&p, 8, 256, 256.0 * i, &chunk, NULL);
    attn += chunk.flops[FTH_FLOP_ATTENTION];
    mlp += chunk.flops[FTH_FLOP_MLP];
  }
  FTH_ENSURE_NEAR(whole.flops[FTH_FLOP_ATTENTION], attn, 1e-12);
  FTH_ENSURE_NEAR(whole.flops[FTH_FLOP_MLP], mlp, 1e-12);
  return 0;
}

static int refusals(void) {
  fth_node_def n = node(1e12);
  fth_topology_def t = tfx_one_gpu();
  fth_model_def m = tfx_infer_model();
  fth_infer_def d = fth_infer_def_default();
  fth_infer_plan p;
  fth_error err;
  d.gen_tokens = 0;
  FTH_ENSURE(fth_infer_compile(&p, &n, &t, &m, &d, FTH_PASS_DECODE, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "workload.num_generated_tokens") == 0);
  d = fth_infer_def_default();
  d.kv_bytes = 3;
  FTH_ENSURE(fth_infer_compile(&p, &n, &t, &m, &d, FTH_PASS_DECODE, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "workload.kv_cache_float_size_bytes") == 0);
  d = fth_infer_def_default();
  d.traffic_tier[FTH_MEM_KV_CACHE] = FTH_TIER_REMOTE; /* the toy node has none */
  FTH_ENSURE(fth_infer_compile(&p, &n, &t, &m, &d, FTH_PASS_DECODE, &err) == FTH_EINVAL);
  FTH_ENSURE(strstr(err.msg, "kv_cache is mapped to remote_memory") != NULL);
  return 0;
}

/* Grouped-query attention read per query head (decode_kv_reread): the toy model
 * with 4 KV heads for its 16 query heads (g = 4), one request at context 1024.
 * A layer's KV read is 1024 tokens x (2 x 4 x 64) elements x 2 B = 1,048,576 B
 * once per KV head (share 0). Share 0.5 loads each KV head 1 + 0.5 x (4 - 1)
 * = 2.5 times: 1.5 x 1,048,576 = 1,572,864 B more per layer, 6,291,456 B for
 * the 4 layers, 6.291456 us at 1 TB/s (the kernel stays memory-bound: 2 x 16 x
 * 1024 x 128 = 4.2 MFLOP take 42 ns at 100 TFLOP/s). MHA (g = 1) reads once at
 * any share. */
static int decode_gqa_reread(void) {
  fth_node_def n = node(1e12);
  fth_topology_def t = tfx_one_gpu();
  fth_model_def m = tfx_infer_model();
  m.num_kv_heads = 4;
  fth_infer_def d = fth_infer_def_default();
  d.context_len = 1023;
  d.gen_tokens = 1;
  fth_infer_plan p;
  fth_error err;
  fth_infer_result grouped, reread;
  FTH_ENSURE(fth_infer_compile(&p, &n, &t, &m, &d, FTH_PASS_DECODE, &err) == FTH_OK);
  fth_infer_evaluate(&p, &grouped);
  d.kv_reread = 0.5;
  FTH_ENSURE(fth_infer_compile(&p, &n, &t, &m, &d, FTH_PASS_DECODE, &err) == FTH_OK);
  fth_infer_evaluate(&p, &reread);
  FTH_ENSURE_NEAR(6291456.0 / 1e12, reread.tpot_s - grouped.tpot_s, 1e-9);
  FTH_ENSURE_NEAR(6291456.0 / 1e12, reread.kv_read_s - grouped.kv_read_s, 1e-9);
  /* the serving simulator's iteration prices the same step */
  fth_phase it;
  FTH_ENSURE_NEAR(reread.tpot_s, fth_infer_iteration(&p, 1, 1, 1024, &it, NULL), 1e-12);
  fth_infer_batch b;
  memset(&b, 0, sizeof b);
  b.decode_requests = 1;
  b.decode_context_sum = 1024;
  FTH_ENSURE_NEAR(reread.tpot_s, fth_infer_iteration_mixed(&p, &b, &it, NULL), 1e-12);
  /* MHA: nothing to re-read */
  fth_model_def mha = tfx_infer_model();
  fth_infer_result a, b1;
  d.kv_reread = 0.0;
  FTH_ENSURE(fth_infer_compile(&p, &n, &t, &mha, &d, FTH_PASS_DECODE, &err) == FTH_OK);
  fth_infer_evaluate(&p, &a);
  d.kv_reread = 1.0;
  FTH_ENSURE(fth_infer_compile(&p, &n, &t, &mha, &d, FTH_PASS_DECODE, &err) == FTH_OK);
  fth_infer_evaluate(&p, &b1);
  FTH_ENSURE_NEAR(a.tpot_s, b1.tpot_s, 1e-15);
  /* a share outside [0, 1] is refused */
  d.kv_reread = 1.5;
  FTH_ENSURE(fth_infer_compile(&p, &n, &t, &m, &d, FTH_PASS_DECODE, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "workload.decode_kv_reread") == 0);
  return 0;
}

/* A block-scaled checkpoint served as it is (fth_infer_def.recipe): NVFP4 on a toy node
 * with an FP4 rate of 400 TFLOP/s (FP8 200). Each linear's weight element is 0.5 B of
 * E2M1 + 1/16 B of its E4M3 block scale = 0.5625 B; its input and output move at the
 * GEMM's 0.5 B; attention, norms, the KV cache, the embedding and the LM head stay at 2 B
 * (ModelOpt's checkpoints exclude lm_head). */
static int nvfp4_checkpoint(void) {
  fth_node_def n = node(1e12);
  n.compute.flops_per_s[FTH_PREC_FP8] = 200e12;
  n.compute.flops_per_s[FTH_PREC_FP4] = 400e12;
  fth_topology_def t = tfx_one_gpu();
  fth_model_def m = tfx_infer_model();
  fth_infer_def d = fth_infer_def_default();
  d.context_len = 1023;
  d.gen_tokens = 1;
  d.recipe = FTH_RECIPE_NVFP4;
  fth_infer_plan p;
  fth_error err;
  FTH_ENSURE(fth_infer_compile(&p, &n, &t, &m, &d, FTH_PASS_DECODE, &err) == FTH_OK);
  fth_infer_result r;
  fth_infer_evaluate(&p, &r);
  /* One decode step at batch 1 (decode_memory_bound's, the linears re-priced):
   *  QKV (1,024 + 3,072) x 0.5 + 3,145,728 x 0.5625 = 1,771,520; output 1,024 +
   *  589,824 = 590,848; up and down 2,560 + 2,359,296 = 2,361,856 each: 7,086,080.
   *  KV read 4,194,304 + write 4,096, norms 20,480, GeLU 16,384: 4,235,264.
   *  Per layer 11,321,344, 45,285,376 for 4. LM head at 2 B, as in
   *  decode_memory_bound: 65,602,048; embedding 4,096. Total 110,891,520 B at
   *  1 TB/s. Each linear's input is quantised by a compute-only cast, 2 vector
   *  FLOPs an element: 4 x (3 x 1,024 + 4,096) x 2 = 57,344 FLOPs at 12.5 TFLOP/s,
   *  4.58752 ns. */
  FTH_ENSURE_NEAR(110891520.0 / 1e12 + 4.58752e-9, r.tpot_s, 1e-12);
  /* weights: 4 x 12,582,912 x 0.5625 + the head's 65,536,000 = 93,847,552 B */
  FTH_ENSURE_NEAR(93847552.0 / 1e12, r.weights_read_s, 1e-12);
  /* the KV cache is untouched: 1,024 tokens x 2,048 x 4 layers x 2 B */
  FTH_ENSURE_NEAR(16777216.0, r.kv_bytes_per_request_per_gpu, 1e-12);
  /* the weights held: every parameter at 0.5625 B (0.28125 of BF16's) but the embedding's
   * and the LM head's 2 x 32,768,000, kept at 2 B: 1.4375 x 65,536,000 = 94,208,000 B more */
  fth_infer_def bf = d;
  bf.recipe = FTH_RECIPE_NONE;
  fth_infer_plan pb;
  FTH_ENSURE(fth_infer_compile(&pb, &n, &t, &m, &bf, FTH_PASS_DECODE, &err) == FTH_OK);
  fth_infer_result rb;
  fth_infer_evaluate(&pb, &rb);
  FTH_ENSURE_NEAR(0.28125 * rb.mem.bytes[FTH_MEM_WEIGHTS] + 94208000.0, r.mem.bytes[FTH_MEM_WEIGHTS], 1e-12);

  /* Prefill, compute-bound (prefill_compute_bound's): the linears' 824,633,720,832
   * FLOPs at the FP4 rate, 2.06158430208 ms; attention's 68,786,585,600 and the LM
   * head's 524,288,000 at BF16, 0.693108736 ms; vector work 0.22011707392 ms and the
   * inputs' casts, 8,192 x 7,168 x 2 x 4 = 469,762,048 FLOPs, 0.03758096384 ms (the
   * memory-only kernels add ~0.2 ns at 1 EB/s). */
  fth_node_def fast = n;
  fast.tier[FTH_TIER_XPU].bw_per_stack_bytes_per_s = 1e18;
  d.global_batch = d.micro_batch = 8;
  d.prompt_len = 1024;
  FTH_ENSURE(fth_infer_compile(&p, &fast, &t, &m, &d, FTH_PASS_PREFILL, &err) == FTH_OK);
  fth_infer_evaluate(&p, &r);
  FTH_ENSURE_NEAR(2.06158430208e-3 + 0.693108736e-3 + 2.2011707392e-4 + 3.758096384e-5, r.ttft_s, 1e-7);
  /* a GPU without FP4 tensor cores runs them at its FP8 rate: 4.12316860416 ms */
  fast.compute.flops_per_s[FTH_PREC_FP4] = 0;
  FTH_ENSURE(fth_infer_compile(&p, &fast, &t, &m, &d, FTH_PASS_PREFILL, &err) == FTH_OK);
  fth_infer_evaluate(&p, &r);
  FTH_ENSURE_NEAR(4.12316860416e-3 + 0.693108736e-3 + 2.2011707392e-4 + 3.758096384e-5, r.ttft_s, 1e-7);

  /* refusals: a GEMM width the recipe contradicts, a recipe out of range */
  d.gemm_bytes = 1;
  FTH_ENSURE(fth_infer_compile(&p, &n, &t, &m, &d, FTH_PASS_PREFILL, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "workload.gemm_float_size_bytes") == 0);
  d.gemm_bytes = 0;
  d.recipe = FTH_RECIPE_COUNT;
  FTH_ENSURE(fth_infer_compile(&p, &n, &t, &m, &d, FTH_PASS_PREFILL, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "workload.precision_recipe") == 0);
  return 0;
}

int infer_test(void) {
  FTH_RUN(decode_memory_bound());
  FTH_RUN(decode_gqa_reread());
  FTH_RUN(prefill_compute_bound());
  FTH_RUN(refusals());
  FTH_RUN(nvfp4_checkpoint());
  return 0;
}
