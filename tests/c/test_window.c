/* Sliding-window attention (fth_kernel_causal_keys, fth_model_window_share), by hand.
 *
 * Keys per query, the last q of kv positions, position p (0-based) seeing min(w, p + 1):
 *   q = kv = 4, no window: 1 + 2 + 3 + 4 = 10 over 4 = 2.5 ((kv + 1) / 2)
 *   q = 1, kv = 100 (one decode query): 100
 *   q = kv = 8, w = 3: 1 + 2 + 3 x 6 = 21 over 8 = 2.625
 *   q = 2, kv = 8, w = 3: 3 + 3 = 3
 *   q = 4 > kv = 2: the square case, 1.5
 * A model whose layers alternate windowed (w = 3) and full (interval 2) at q = kv = 8:
 *   0.5 + 0.5 x 2.625 / 4.5 = 0.791666...; every layer windowed (interval 0): 0.583333... */
#include "fth_kernel.h"
#include "fth_model.h"
#include "fth_train.h"
#include "test_fixtures.h"
#include "test_macros.h"

/* One layer of h wide with `heads` heads, `seq` tokens, a 128-token vocabulary. */
static fth_model_def one_layer(double h, int heads, double seq) {
  fth_model_def m = fth_model_def_default();
  m.d_model = h;
  m.n_layers = 1;
  m.num_heads = heads;
  m.vocab_size = 128;
  m.max_seq_len = seq;
  return m;
}

/* In the step: a 1-layer model, h 64, 4 heads of 16, seq 8 on one GPU, every layer
 * windowed at w = 3. The forward attention core: 2 x 4 heads x (16 + 16) x keys x 8
 * tokens = 9,216 FLOP at 4.5 keys, 5,376 at 2.625: 3,840 fewer in the attention part,
 * and 2.5 x that in the backward (flash: dQ, dK, dV and the recomputed scores). */
static int step(void) {
  fth_node_def n = tfx_node();
  fth_topology_def t = tfx_tp_only(1, 100e9);
  fth_model_def m = one_layer(64, 4, 8);
  fth_train_def w = tfx_serial_work(1, 8);
  fth_train_result full, win;
  FTH_RUN(tfx_train_run(&n, &t, &m, &w, &full));
  m.attention_window = 3;
  FTH_RUN(tfx_train_run(&n, &t, &m, &w, &win));
  FTH_ENSURE_NEAR(full.fwd_flops[FTH_FLOP_ATTENTION] - 3840.0, win.fwd_flops[FTH_FLOP_ATTENTION], 1e-9);
  FTH_ENSURE_NEAR(full.bwd_flops[FTH_FLOP_ATTENTION] - 2.5 * 3840.0,
                  win.bwd_flops[FTH_FLOP_ATTENTION], 1e-9);
  FTH_ENSURE(full.fwd_flops[FTH_FLOP_MLP] == win.fwd_flops[FTH_FLOP_MLP]);
  return 0;
}

/* Attention sinks as Transformer Engine's cuDNN path runs them (attention_sink_rate_share):
 * at a share s of the fused rate, the windowed layers computed whole. A 1-layer model, h
 * 1024, 16 heads of 64, seq 1024, every layer windowed at 128, on tfx_node (100 TFLOP/s,
 * 1 TB/s): the full causal core is compute-bound (2 x 16 heads x 128 x 512.5 keys x 1024
 * tokens = 2.15 GFLOP, 21.5 us, against 8.4 MB of Q, K, V, O, 8.4 us), so at s = 0.25 the
 * attention kernels take 4x the full causal ones' time, forward and backward, while the
 * FLOPs stay the window's; with s = 0, or without sinks, the window's time. */
static int sinks(void) {
  fth_node_def n = tfx_node();
  fth_topology_def t = tfx_tp_only(1, 100e9);
  fth_model_def m = one_layer(1024, 16, 1024);
  fth_train_def w = tfx_serial_work(1, 1024);
  fth_train_result full, win, sink, none;
  FTH_RUN(tfx_train_run(&n, &t, &m, &w, &full));
  m.attention_window = 128;
  FTH_RUN(tfx_train_run(&n, &t, &m, &w, &win));
  m.attention_sinks = 1;
  FTH_RUN(tfx_train_run(&n, &t, &m, &w, &none));
  w.attention_sink_rate_share = 0.25;
  FTH_RUN(tfx_train_run(&n, &t, &m, &w, &sink));
  const int a = FTH_KERNEL_ATTENTION;
  FTH_ENSURE(win.fwd_class_s[a] < 0.5 * full.fwd_class_s[a]); /* the window skips */
  FTH_ENSURE_NEAR(win.fwd_class_s[a], none.fwd_class_s[a], 1e-18);
  FTH_ENSURE_NEAR(4.0 * full.fwd_class_s[a], sink.fwd_class_s[a], 1e-12 * sink.fwd_class_s[a]);
  FTH_ENSURE_NEAR(4.0 * full.bwd_class_s[a], sink.bwd_class_s[a], 1e-12 * sink.bwd_class_s[a]);
  FTH_ENSURE_NEAR(win.fwd_flops[FTH_FLOP_ATTENTION], sink.fwd_flops[FTH_FLOP_ATTENTION], 1e-6);
  w.attention_sink_rate_share = 1.5;
  fth_train_plan p;
  fth_error err;
  FTH_ENSURE(fth_train_compile(&p, &n, &t, &m, &w, &err) == FTH_EINVAL);
  return 0;
}

int window_test(void) {
  FTH_ENSURE_NEAR(2.5, fth_kernel_causal_keys(4, 4, 0), 1e-15);
  FTH_ENSURE_NEAR(100.0, fth_kernel_causal_keys(1, 100, 0), 1e-15);
  FTH_ENSURE_NEAR(2.625, fth_kernel_causal_keys(8, 8, 3), 1e-15);
  FTH_ENSURE_NEAR(3.0, fth_kernel_causal_keys(2, 8, 3), 1e-15);
  FTH_ENSURE_NEAR(1.5, fth_kernel_causal_keys(4, 2, 0), 1e-15);
  FTH_ENSURE(fth_kernel_causal_keys(0, 8, 3) == 0.0);

  fth_model_def m = fth_model_def_default();
  m.d_model = 64;
  m.n_layers = 4;
  m.num_heads = 4;
  m.vocab_size = 128;
  FTH_ENSURE(fth_model_window_share(&m, 8, 8) == 1.0);
  m.attention_window = 3;
  m.full_attention_interval = 2;
  FTH_ENSURE_NEAR(0.5 + 0.5 * 2.625 / 4.5, fth_model_window_share(&m, 8, 8), 1e-15);
  m.full_attention_interval = 0;
  FTH_ENSURE_NEAR(2.625 / 4.5, fth_model_window_share(&m, 8, 8), 1e-15);
  /* The KV cache a request keeps: alternating layers (interval 2) at w = 3, 8 tokens:
   * 0.5 + 0.5 x 3 / 8 = 0.6875; every layer windowed: 3 / 8; shorter than the window: 1. */
  m.full_attention_interval = 2;
  FTH_ENSURE_NEAR(0.6875, fth_model_window_kv_share(&m, 8), 1e-15);
  m.full_attention_interval = 0;
  FTH_ENSURE_NEAR(0.375, fth_model_window_kv_share(&m, 8), 1e-15);
  FTH_ENSURE(fth_model_window_kv_share(&m, 2) == 1.0);
  /* a window as long as the sequence changes nothing */
  FTH_ENSURE(fth_model_window_share(&m, 3, 3) == 1.0);
  /* the model FLOPs of the attention core follow: 2 heads (d_qk + d_v) keys per token */
  fth_layer_flops full, win;
  m.attention_window = 0;
  full = fth_model_layer_flops(&m, 0, 8);
  m.attention_window = 3;
  win = fth_model_layer_flops(&m, 0, 8);
  FTH_ENSURE_NEAR(2.0 * 4 * (16 + 16) * 4.5, full.fwd_attn_core, 1e-12);
  FTH_ENSURE_NEAR(full.fwd_attn_core * 2.625 / 4.5, win.fwd_attn_core, 1e-12);
  /* checks */
  fth_error err;
  m.attention_window = -1;
  FTH_ENSURE(fth_model_check(&m, &err) == FTH_EINVAL);
  m.attention_window = 3;
  m.full_attention_interval = -2;
  FTH_ENSURE(fth_model_check(&m, &err) == FTH_EINVAL);
  FTH_RUN(sinks());
  return step();
}
