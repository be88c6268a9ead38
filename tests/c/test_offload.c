/* Offload (fth_offload): the tier maps, the accelerator-side buffers and the
 * activation transfers by hand, then a training step with weights,
 * activations and optimizer states on a 50 GB/s host tier against the same
 * step without.
 *
 * Step: 8 GPUs of TP 8 on one switched pod, 100 TFLOP/s bf16, HBM 1 TB/s
 * (80 GB); a 4-layer model (h 1024, 16 heads, f 4096, V 32000); global batch
 * 4, micro-batch 1, seq 1024, nothing overlapped (tfx_serial_work), no
 * runtime context so the XPU bytes are the step's alone. */
#include "fth_offload.h"
#include "fth_train.h"
#include "test_fixtures.h"
#include "test_macros.h"

#include <math.h>
#include <string.h>

static int apply_maps(void) {
  fth_train_def w = fth_train_def_default();
  fth_offload o = fth_offload_none();
  o.weights = FTH_TIER_HOST;
  o.activations = FTH_TIER_NVME;
  o.optimizer = FTH_TIER_REMOTE;
  fth_offload_apply(&o, w.footprint_tier, w.traffic_tier);
  /* weights stored and read in host memory, their gradients summed there */
  FTH_ENSURE_EQ_INT(FTH_TIER_HOST, w.footprint_tier[FTH_MEM_WEIGHTS]);
  FTH_ENSURE_EQ_INT(FTH_TIER_HOST, w.traffic_tier[FTH_MEM_WEIGHTS]);
  FTH_ENSURE_EQ_INT(FTH_TIER_HOST, w.footprint_tier[FTH_MEM_GRADIENTS]);
  /* activations stored on NVMe, read on the accelerator once copied back */
  FTH_ENSURE_EQ_INT(FTH_TIER_NVME, w.footprint_tier[FTH_MEM_ACTIVATIONS]);
  FTH_ENSURE_EQ_INT(FTH_TIER_XPU, w.traffic_tier[FTH_MEM_ACTIVATIONS]);
  /* optimizer states stored and read in pooled memory */
  FTH_ENSURE_EQ_INT(FTH_TIER_REMOTE, w.footprint_tier[FTH_MEM_OPTIMIZER]);
  FTH_ENSURE_EQ_INT(FTH_TIER_REMOTE, w.traffic_tier[FTH_MEM_OPTIMIZER]);
  /* the rest untouched */
  FTH_ENSURE_EQ_INT(FTH_TIER_XPU, w.footprint_tier[FTH_MEM_TRANSIENT_FWD]);
  FTH_ENSURE_EQ_INT(FTH_TIER_XPU, w.footprint_tier[FTH_MEM_KV_CACHE]);
  o = fth_offload_none();
  fth_offload_apply(&o, w.footprint_tier, w.traffic_tier);
  for (int c = 0; c < FTH_MEM_COMPONENT_COUNT; c++) {
    FTH_ENSURE_EQ_INT(FTH_TIER_XPU, w.footprint_tier[c]);
    FTH_ENSURE_EQ_INT(FTH_TIER_XPU, w.traffic_tier[c]);
  }
  return 0;
}

/* Two blocks of 40: 2/40 of 10 GB of weights = 0.5 GB, of 20 GB of gradients
 * 1 GB, of a 4 GB micro-batch's activations 0.2 GB; a stage of one block keeps
 * it all. */
static int buffers(void) {
  fth_tier t[FTH_MEM_COMPONENT_COUNT];
  for (int c = 0; c < FTH_MEM_COMPONENT_COUNT; c++) t[c] = FTH_TIER_XPU;
  FTH_ENSURE_NEAR(0.0, fth_offload_buffer_bytes(t, 10e9, 20e9, 4e9, 40), 0);
  t[FTH_MEM_WEIGHTS] = FTH_TIER_HOST;
  FTH_ENSURE_NEAR(0.5e9, fth_offload_buffer_bytes(t, 10e9, 20e9, 4e9, 40), 1e-15);
  t[FTH_MEM_GRADIENTS] = FTH_TIER_HOST;
  FTH_ENSURE_NEAR(1.5e9, fth_offload_buffer_bytes(t, 10e9, 20e9, 4e9, 40), 1e-15);
  t[FTH_MEM_ACTIVATIONS] = FTH_TIER_HOST;
  FTH_ENSURE_NEAR(1.7e9, fth_offload_buffer_bytes(t, 10e9, 20e9, 4e9, 40), 1e-15);
  FTH_ENSURE_NEAR(34e9, fth_offload_buffer_bytes(t, 10e9, 20e9, 4e9, 1), 1e-15);
  return 0;
}

/* 4 micro-batches of 1 GB of activations each, out and back at 25 GB/s:
 * 2 x 4 x 1e9 / 25e9 = 0.32 s; half of a 0.5 s busy time hides 0.25 s: 0.07 s
 * exposed; all of it hides the whole. 2 GB of gradients at 50 GB/s over the
 * same 4 micro-batches: written once, read and written back 3 times, 7 x 2e9 /
 * 50e9 = 0.28 s, with the activations 0.6 s, 0.35 s exposed. Nothing moves
 * from the accelerator; without bandwidth, never. */
static int transfers(void) {
  double raw, ex;
  const fth_tier X = FTH_TIER_XPU, H = FTH_TIER_HOST;
  fth_offload_transfers(H, 1e9, 25e9, X, 2e9, 50e9, 4, 0.5, 0.5, &raw, &ex);
  FTH_ENSURE_NEAR(0.32, raw, 1e-15);
  FTH_ENSURE_NEAR(0.07, ex, 1e-12);
  fth_offload_transfers(H, 1e9, 25e9, X, 2e9, 50e9, 4, 0.5, 1.0, &raw, &ex);
  FTH_ENSURE_NEAR(0.0, ex, 0);
  fth_offload_transfers(X, 1e9, 25e9, H, 2e9, 50e9, 4, 0.5, 0.5, &raw, &ex);
  FTH_ENSURE_NEAR(0.28, raw, 1e-15);
  FTH_ENSURE_NEAR(0.03, ex, 1e-12);
  fth_offload_transfers(H, 1e9, 25e9, H, 2e9, 50e9, 4, 0.5, 0.5, &raw, &ex);
  FTH_ENSURE_NEAR(0.6, raw, 1e-15);
  FTH_ENSURE_NEAR(0.35, ex, 1e-12);
  fth_offload_transfers(X, 1e9, 25e9, X, 2e9, 50e9, 4, 0.5, 0.5, &raw, &ex);
  FTH_ENSURE_NEAR(0.0, raw + ex, 0);
  fth_offload_transfers(H, 1e9, 0, X, 0, 0, 4, 0.5, 0.5, &raw, &ex);
  FTH_ENSURE(raw == HUGE_VAL && ex == HUGE_VAL);
  return 0;
}

static fth_node_def node_with_host(void) {
  fth_node_def n = fth_node_def_default();
  n.compute.flops_per_s[FTH_PREC_BF16] = 100e12;
  n.compute.efficiency = 1.0;
  n.tier[FTH_TIER_XPU].bw_per_stack_bytes_per_s = 1e12;
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

static int step_k(const fth_offload *o, int offload_layers, fth_train_result *r) {
  fth_node_def node = node_with_host();
  fth_topology_def topo = tfx_tp_only(8, 100e9);
  fth_model_def m = fth_model_def_default();
  m.d_model = 1024;
  m.n_layers = 4;
  m.num_heads = 16;
  m.vocab_size = 32000;
  m.max_seq_len = 1024;
  fth_train_def w = tfx_serial_work(4, 1024);
  w.reserve.context_bytes = 0;
  w.reserve.fragmentation = 0;
  fth_offload_apply(o, w.footprint_tier, w.traffic_tier);
  w.activation_offload_layers = offload_layers;
  fth_train_plan plan;
  fth_error err;
  FTH_ENSURE(fth_train_compile(&plan, &node, &topo, &m, &w, &err) == FTH_OK);
  fth_train_evaluate(&plan, r);
  return 0;
}

static int step(const fth_offload *o, fth_train_result *r) {
  return step_k(o, 0, r);
}

/* Against the step without offload (b):
 *  - weights on the host: their bytes W and their gradients' G leave HBM but
 *    two of the 4 blocks' stream through it (buffer (W + G) / 2 in the
 *    transient peak, the embedding and head counted with the blocks as the
 *    stage's weights are); HBM = b - (W + G) / 2; the host holds W + G; every
 *    kernel reads its weight operand at 50 GB/s, not 1 TB/s, so the passes are
 *    slower; the gradients of the 4 micro-batches are summed on the host,
 *    7 G / 50e9 s, none hidden.
 *  - optimizer states on the host: the Adam step reads and writes them at
 *    50 GB/s instead of 1 TB/s: 20 x the optimizer time; HBM loses them.
 *  - activations on the host: out and back per micro-batch, 2 x 4 x A / 50e9,
 *    none hidden (comp_comm_efficiency 0), on top of the step. */
static int train_step(void) {
  fth_offload none = fth_offload_none(), o;
  fth_train_result b, r;
  FTH_RUN(step(&none, &b));
  const double W = b.mem.bytes[FTH_MEM_WEIGHTS], O = b.mem.bytes[FTH_MEM_OPTIMIZER];
  const double G = b.mem.bytes[FTH_MEM_GRADIENTS];
  FTH_ENSURE(W > 0 && O > 0 && G > 0);
  FTH_ENSURE_NEAR(4.0, b.microbatches, 0);

  o = none;
  o.weights = FTH_TIER_HOST;
  FTH_RUN(step(&o, &r));
  FTH_ENSURE_NEAR(b.mem.tier_bytes[FTH_TIER_XPU] - (W + G) / 2, r.mem.tier_bytes[FTH_TIER_XPU],
                  1e-12);
  FTH_ENSURE_NEAR(W + G, r.mem.tier_bytes[FTH_TIER_HOST], 1e-12);
  FTH_ENSURE_NEAR(7.0 * G / 50e9, r.offload_raw_s, 1e-12);
  FTH_ENSURE_NEAR(r.offload_raw_s, r.offload_exposed_s, 1e-12);
  FTH_ENSURE(r.fwd_s > b.fwd_s && r.bwd_s > b.bwd_s);
  FTH_ENSURE_NEAR(b.optimizer_s, r.optimizer_s, 1e-12);

  o = none;
  o.optimizer = FTH_TIER_HOST;
  FTH_RUN(step(&o, &r));
  FTH_ENSURE_NEAR(20.0 * b.optimizer_s, r.optimizer_s, 1e-12);
  FTH_ENSURE_NEAR(b.mem.tier_bytes[FTH_TIER_XPU] - O, r.mem.tier_bytes[FTH_TIER_XPU], 1e-12);
  FTH_ENSURE_NEAR(b.step_time_s + 19.0 * b.optimizer_s, r.step_time_s, 1e-12);

  o = none;
  o.activations = FTH_TIER_HOST;
  FTH_RUN(step(&o, &r));
  /* no pipeline: one micro-batch in flight, the saved activations are one's */
  const double A = b.mem.bytes[FTH_MEM_ACTIVATIONS];
  FTH_ENSURE_NEAR(2.0 * 4 * A / 50e9, r.offload_raw_s, 1e-12);
  FTH_ENSURE_NEAR(r.offload_raw_s, r.offload_exposed_s, 1e-12);
  FTH_ENSURE_NEAR(b.step_time_s + r.offload_exposed_s, r.step_time_s, 1e-12);
  /* HBM keeps two of the 4 blocks' worth as the buffer */
  FTH_ENSURE_NEAR(b.mem.tier_bytes[FTH_TIER_XPU] - A + A / 2, r.mem.tier_bytes[FTH_TIER_XPU],
                  1e-12);
  return 0;
}

/* Megatron's per-block offloading (activation_offload_layers k of the stage's 4 blocks),
 * against the step without (b), A its saved activations (one micro-batch in flight):
 *  - k = 3: the accelerator keeps A / 4, host memory holds 3 A / 4; two of the offloaded
 *    blocks' activations pass through (2 x (3 A / 4) / 3 = A / 2 in the transient peak),
 *    so HBM = b - A + A / 4 + A / 2 = b - A / 4; each of the 4 micro-batches sends 3 A / 4
 *    out and back at 50 GB/s, none hidden: 2 x 4 x (3 A / 4) / 50e9 s on the step;
 *  - k above the stage's blocks offloads them all: HBM = b - A + A / 2, as the tier map's
 *    offload of every activation;
 *  - without a host tier it is refused. */
static int layer_offload(void) {
  fth_offload none = fth_offload_none();
  fth_train_result b, r;
  FTH_RUN(step(&none, &b));
  const double A = b.mem.bytes[FTH_MEM_ACTIVATIONS];
  FTH_ENSURE(A > 0);
  FTH_RUN(step_k(&none, 3, &r));
  FTH_ENSURE_NEAR(A / 4, r.mem.bytes[FTH_MEM_ACTIVATIONS], 1e-12);
  FTH_ENSURE_NEAR(3 * A / 4, r.mem.tier_bytes[FTH_TIER_HOST], 1e-12);
  FTH_ENSURE_NEAR(b.mem.tier_bytes[FTH_TIER_XPU] - A / 4, r.mem.tier_bytes[FTH_TIER_XPU], 1e-12);
  FTH_ENSURE_NEAR(2.0 * 4 * (3 * A / 4) / 50e9, r.offload_raw_s, 1e-12);
  FTH_ENSURE_NEAR(r.offload_raw_s, r.offload_exposed_s, 1e-12);
  FTH_ENSURE_NEAR(b.step_time_s + r.offload_exposed_s, r.step_time_s, 1e-12);
  FTH_RUN(step_k(&none, 9, &r));
  FTH_ENSURE_NEAR(0.0, r.mem.bytes[FTH_MEM_ACTIVATIONS], 0);
  FTH_ENSURE_NEAR(b.mem.tier_bytes[FTH_TIER_XPU] - A / 2, r.mem.tier_bytes[FTH_TIER_XPU], 1e-12);

  fth_node_def n = tfx_node();
  fth_topology_def t = tfx_one_gpu();
  fth_model_def m = tfx_block_model();
  fth_train_def w = tfx_serial_work(1, 1024);
  w.activation_offload_layers = 1;
  fth_train_plan plan;
  fth_error err;
  FTH_ENSURE(fth_train_compile(&plan, &n, &t, &m, &w, &err) != FTH_OK);
  FTH_ENSURE(strstr(err.path, "activation_offload_layers") != NULL);
  w.activation_offload_layers = -1;
  FTH_ENSURE(fth_train_def_check(&w, &err) != FTH_OK);
  return 0;
}

int offload_test(void) {
  FTH_RUN(layer_offload());
  FTH_RUN(apply_maps());
  FTH_RUN(buffers());
  FTH_RUN(transfers());
  FTH_RUN(train_step());
  return 0;
}
