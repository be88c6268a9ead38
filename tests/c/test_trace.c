/* Chakra traces: the protobuf wire encoder against bytes derived by hand from
 * the encoding rules (protobuf.dev/programming-guides/encoding), and the trace
 * of a toy job: rank coordinates, groups and node counts derived by hand. */
#include "fth_chakra.h"
#include "fth_trace.h"
#include "test_macros.h"

#include <string.h>

static int bytes_are(const fth_pb *pb, const uint8_t *want, size_t n) {
  if (pb->overflow || pb->len != n) {
    fprintf(stderr, "got %zu bytes (overflow %d), expected %zu\n", pb->len, pb->overflow, n);
    return 0;
  }
  for (size_t i = 0; i < n; i++)
    if (pb->buf[i] != want[i]) {
      fprintf(stderr, "byte %zu: got 0x%02x, expected 0x%02x\n", i, pb->buf[i], want[i]);
      return 0;
    }
  return 1;
}

static int varints(void) {
  uint8_t b[32];
  fth_pb pb;
  /* 7 bits per byte, least significant group first, high bit = more follows:
   * 0 -> 00; 127 -> 7f; 128 = 1 x 128 + 0 -> 80 01; 300 = 2 x 128 + 44 ->
   * (44 | 0x80) 02 = ac 02 (the encoding guide's example). */
  const struct {
    uint64_t v;
    uint8_t bytes[10];
    size_t n;
  } cases[] = {{0, {0x00}, 1},
               {1, {0x01}, 1},
               {127, {0x7f}, 1},
               {128, {0x80, 0x01}, 2},
               {300, {0xac, 0x02}, 2},
               {16384, {0x80, 0x80, 0x01}, 3},
               /* 2^64 - 1: nine groups of 7 ones (63 bits), then the last bit */
               {UINT64_MAX, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 10}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fth_pb_init(&pb, b, sizeof b);
    fth_pb_varint(&pb, cases[i].v);
    FTH_ENSURE(bytes_are(&pb, cases[i].bytes, cases[i].n));
    FTH_ENSURE_EQ_INT(cases[i].n, fth_pb_varint_size(cases[i].v));
  }
  /* Keys: field 1 varint -> (1 << 3) | 0 = 0x08; field 10 length-delimited ->
   * (10 << 3) | 2 = 0x52; field 27 varint -> 216 = 0xd8 0x01. */
  fth_pb_init(&pb, b, sizeof b);
  fth_pb_key(&pb, 1, FTH_PB_VARINT);
  fth_pb_key(&pb, 10, FTH_PB_LEN);
  fth_pb_key(&pb, 27, FTH_PB_VARINT);
  const uint8_t keys[] = {0x08, 0x52, 0xd8, 0x01};
  FTH_ENSURE(bytes_are(&pb, keys, sizeof keys));
  /* proto3 leaves out a zero scalar; a packed list is key, byte length, values. */
  fth_pb_init(&pb, b, sizeof b);
  fth_pb_uint(&pb, 7, 0);
  FTH_ENSURE_EQ_INT(0, pb.len);
  const uint64_t deps[] = {3, 300};
  fth_pb_packed(&pb, 5, deps, 2);
  const uint8_t packed[] = {0x2a, 0x03, 0x03, 0xac, 0x02};
  FTH_ENSURE(bytes_are(&pb, packed, sizeof packed));
  /* A full buffer: the write is refused whole and flagged. */
  uint8_t small[2];
  fth_pb_init(&pb, small, sizeof small);
  fth_pb_varint(&pb, 16384);
  FTH_ENSURE(pb.overflow && pb.len == 0);
  return 0;
}

static int attributes(void) {
  uint8_t b[64];
  fth_pb pb;
  /* AttributeProto {name = "x" (field 1), int32_val = -1 (field 7)} as field
   * 10: int32 is sign-extended, so -1 is ten bytes ff x 9, 01. Inner: 0a 01
   * 'x' 38 + 10 bytes = 14 bytes; outer: 52 0e + inner. */
  fth_pb_init(&pb, b, sizeof b);
  fth_chakra_attr_int32(&pb, 10, "x", -1);
  const uint8_t neg[] = {0x52, 0x0e, 0x0a, 0x01, 'x',  0x38, 0xff, 0xff,
                         0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  FTH_ENSURE(bytes_are(&pb, neg, sizeof neg));
  /* A oneof value of 0 is still written (comm_type ALL_REDUCE = 0):
   * {name "t", int64_val (field 9) 0}: 0a 01 't' 48 00 -> 52 05 ... */
  fth_pb_init(&pb, b, sizeof b);
  fth_chakra_attr_int64(&pb, 10, "t", 0);
  const uint8_t zero[] = {0x52, 0x05, 0x0a, 0x01, 't', 0x48, 0x00};
  FTH_ENSURE(bytes_are(&pb, zero, sizeof zero));
  /* A string value: {name "p", string_val (field 29) "12"}: 0a 01 'p' ea 01 02 '1' '2'. */
  fth_pb_init(&pb, b, sizeof b);
  fth_chakra_attr_string(&pb, 10, "p", "12");
  const uint8_t str[] = {0x52, 0x08, 0x0a, 0x01, 'p', 0xea, 0x01, 0x02, '1', '2'};
  FTH_ENSURE(bytes_are(&pb, str, sizeof str));
  return 0;
}

static int node_message(void) {
  /* Node {id 1, name "a", type COMP_NODE (4), data_deps [0], duration 2,
   * attr is_cpu_op false, num_ops 3, tensor_size 5}, framed:
   *   08 01 | 12 01 'a' | 18 04 | 2a 01 00 | 38 02  2 + 3 + 2 + 3 + 2 (12 bytes)
   *   52 0e [0a 09 "is_cpu_op" d8 01 00]   bool_val is field 27   (16)
   *   52 0b [0a 07 "num_ops" 48 03]        int64_val field 9      (13)
   *   52 0f [0a 0b "tensor_size" 68 05]    uint64_val field 13    (17)
   * = 12 + 16 + 13 + 17 = 58 bytes: the frame starts with the varint 58 = 0x3a. */
  fth_chakra_node n;
  memset(&n, 0, sizeof n);
  n.id = 1;
  n.name = "a";
  n.type = FTH_CHAKRA_COMP_NODE;
  n.data_deps[0] = 0;
  n.n_deps = 1;
  n.duration_micros = 2;
  n.num_ops = 3;
  n.tensor_size = 5;
  uint8_t b[128];
  fth_pb pb;
  fth_pb_init(&pb, b, sizeof b);
  fth_chakra_node_write(&pb, &n);
  const uint8_t want[] = {
      0x3a, 0x08, 0x01, 0x12, 0x01, 'a',  0x18, 0x04, 0x2a, 0x01, 0x00, 0x38, 0x02, 0x52,
      0x0e, 0x0a, 0x09, 'i',  's',  '_',  'c',  'p',  'u',  '_',  'o',  'p',  0xd8, 0x01,
      0x00, 0x52, 0x0b, 0x0a, 0x07, 'n',  'u',  'm',  '_',  'o',  'p',  's',  0x48, 0x03,
      0x52, 0x0f, 0x0a, 0x0b, 't',  'e',  'n',  's',  'o',  'r',  '_',  's',  'i',  'z',
      'e',  0x68, 0x05};
  FTH_ENSURE(bytes_are(&pb, want, sizeof want));
  /* GlobalMetadata {version "0.0.4"}: 0a 05 "0.0.4" = 7 bytes, frame 07. */
  fth_pb_init(&pb, b, sizeof b);
  fth_chakra_metadata(&pb, NULL, NULL, 0);
  const uint8_t meta[] = {0x07, 0x0a, 0x05, '0', '.', '0', '.', '4'};
  FTH_ENSURE(bytes_are(&pb, meta, sizeof meta));
  return 0;
}

/* ---- a toy job -------------------------------------------------------------------------------- */

/* Dimension 0: 4 GPUs, PP 2 listed before TP_Attn 2 (PP still goes outermost);
 * dimension 1: 2 GPUs of DP_Attn. 8 ranks: rank = tp + 2 pp + 4 dp. */
static fth_topology_def toy_topo(void) {
  fth_topology_def t = fth_topology_def_default();
  t.num_phys = 2;
  for (int d = 0; d < 2; d++) {
    t.phys[d].type = FTH_TOPO_SWITCHED;
    t.phys[d].link.bw_bytes_per_s = 100e9;
    t.phys[d].link.latency_s = 1e-6;
  }
  t.phys[0].size = 4;
  t.phys[1].size = 2;
  t.num_logical = 3;
  t.logical[0] = (fth_logical_dim_def){FTH_TAG_PP, 0, 2};
  t.logical[1] = (fth_logical_dim_def){FTH_TAG_TP_ATTN, 0, 2};
  t.logical[2] = (fth_logical_dim_def){FTH_TAG_DP_ATTN, 1, 2};
  return t;
}

static int toy_plan_on(fth_train_plan *plan, fth_pp_schedule sched, int virt,
                       const fth_topology_def *given) {
  fth_node_def node = fth_node_def_default();
  node.compute.flops_per_s[FTH_PREC_BF16] = 100e12;
  node.compute.efficiency = 1.0;
  node.tier[FTH_TIER_XPU].bw_per_stack_bytes_per_s = 1e12;
  node.tier[FTH_TIER_XPU].size_per_stack_bytes = 80e9;
  node.tier[FTH_TIER_XPU].num_stacks = 1;
  node.tier[FTH_TIER_XPU].efficiency = 1.0;
  node.has_tier[FTH_TIER_XPU] = 1;
  fth_topology_def topo = given ? *given : toy_topo();
  fth_model_def m = fth_model_def_default();
  m.d_model = 1024;
  m.n_layers = 4;
  m.num_heads = 16;
  m.vocab_size = 32000;
  m.max_seq_len = 1024;
  fth_train_def w = fth_train_def_default();
  w.global_batch = 8; /* / DP 2 / micro-batch 1 = 4 micro-batches */
  w.micro_batch = 1;
  w.seq_len = 1024;
  w.pp = sched;
  w.virtual_stages = virt;
  w.dp = FTH_DP_DDP;
  w.recompute = FTH_RECOMPUTE_NONE;
  w.sequence_parallel = 0;
  fth_error err;
  FTH_ENSURE(fth_train_compile(plan, &node, &topo, &m, &w, &err) == FTH_OK);
  return 0;
}

static int toy_plan_of(fth_train_plan *plan, fth_pp_schedule sched, int virt) {
  return toy_plan_on(plan, sched, virt, NULL);
}

static int toy_plan(fth_train_plan *plan) { return toy_plan_of(plan, FTH_PP_1F1B, 1); }

/* The toy's 8 GPUs placed in rank order (fth_topology_def.placed) follow the listed order:
 * TP 2, PP 2, DP 2 gives the mapped toy's ranks (rank 5 = tp 1 + 2 x pp 0 + 4 x dp 1, stage
 * 0, TP {4, 5}); PP 2, TP 2, DP 2 puts PP innermost: rank 5 = pp 1 + 2 x tp 0 + 4 x dp 1,
 * stage 1, TP {5, 7}, its stage-0 peer 4, DP {1, 5}. */
static int placed_trace(void) {
  static fth_train_plan plan;
  static fth_trace t;
  fth_topology_def topo = toy_topo();
  topo.placed = 1;
  topo.logical[0] = (fth_logical_dim_def){FTH_TAG_TP_ATTN, 0, 2};
  topo.logical[1] = (fth_logical_dim_def){FTH_TAG_PP, 0, 2};
  topo.logical[2] = (fth_logical_dim_def){FTH_TAG_DP_ATTN, 0, 2};
  FTH_RUN(toy_plan_on(&plan, FTH_PP_1F1B, 1, &topo));
  fth_error err;
  FTH_ENSURE(fth_trace_compile(&t, &plan, &err) == FTH_OK);
  int mem[8];
  long id;
  FTH_ENSURE_EQ_INT(0, fth_trace_stage(&t, 5));
  FTH_ENSURE_EQ_INT(2, fth_trace_group(&t, FTH_COMM_TP, 5, mem, 8, &id));
  FTH_ENSURE(mem[0] == 4 && mem[1] == 5);
  topo.logical[0] = (fth_logical_dim_def){FTH_TAG_PP, 0, 2};
  topo.logical[1] = (fth_logical_dim_def){FTH_TAG_TP_ATTN, 0, 2};
  FTH_RUN(toy_plan_on(&plan, FTH_PP_1F1B, 1, &topo));
  FTH_ENSURE(fth_trace_compile(&t, &plan, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(1, fth_trace_stage(&t, 5));
  FTH_ENSURE_EQ_INT(4, fth_trace_stage_peer(&t, 5, 0));
  FTH_ENSURE_EQ_INT(2, fth_trace_group(&t, FTH_COMM_TP, 5, mem, 8, &id));
  FTH_ENSURE(mem[0] == 5 && mem[1] == 7);
  FTH_ENSURE_EQ_INT(2, fth_trace_group(&t, FTH_COMM_DP, 5, mem, 8, &id));
  FTH_ENSURE(mem[0] == 1 && mem[1] == 5);
  return 0;
}

typedef struct mem_sink {
  size_t bytes;
  int calls, fail;
  uint8_t head[16]; /* the first bytes written: the metadata's frame */
} mem_sink;

static int sink(void *ctx, const uint8_t *data, size_t n) {
  mem_sink *s = (mem_sink *)ctx;
  if (s->fail) return 1;
  if (s->bytes == 0) memcpy(s->head, data, n < 16 ? n : 16);
  s->bytes += n;
  s->calls++;
  return 0;
}

static int toy_trace(void) {
  static fth_train_plan plan; /* large: off the stack */
  static fth_trace t;
  FTH_RUN(toy_plan(&plan));
  fth_error err;
  FTH_ENSURE(fth_trace_compile(&t, &plan, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(8, t.ranks);
  FTH_ENSURE_EQ_INT(4, t.microbatches);
  /* rank 5 = tp 1 + 2 x pp 0 + 4 x dp 1: stage 0; rank 6 = 0 + 2 x 1 + 4 x 1: stage 1. */
  FTH_ENSURE_EQ_INT(0, fth_trace_stage(&t, 5));
  FTH_ENSURE_EQ_INT(1, fth_trace_stage(&t, 6));
  FTH_ENSURE_EQ_INT(7, fth_trace_stage_peer(&t, 5, 1));
  int mem[8];
  long id;
  /* TP of rank 5: {4, 5}, id 1 + 0 x 8 + 4 = 5; DP (kind 5): {1, 5}, id 1 + 5 x 8 + 1 = 42;
   * PP (kind 4): {5, 7}, id 1 + 4 x 8 + 5 = 38; EP: no group. */
  FTH_ENSURE_EQ_INT(2, fth_trace_group(&t, FTH_COMM_TP, 5, mem, 8, &id));
  FTH_ENSURE(mem[0] == 4 && mem[1] == 5 && id == 5);
  FTH_ENSURE_EQ_INT(2, fth_trace_group(&t, FTH_COMM_DP, 5, mem, 8, &id));
  FTH_ENSURE(mem[0] == 1 && mem[1] == 5 && id == 42);
  FTH_ENSURE_EQ_INT(2, fth_trace_group(&t, FTH_COMM_PP, 5, mem, 8, &id));
  FTH_ENSURE(mem[0] == 5 && mem[1] == 7 && id == 38);
  FTH_ENSURE_EQ_INT(1, fth_trace_group(&t, FTH_COMM_EP, 5, mem, 8, &id));
  FTH_ENSURE(id == 0);

  /* Stage 0 of 2, 2 dense blocks, 4 micro-batches, no recomputation, DDP:
   * a forward is 2 blocks x (attention, MLP, a TP all-reduce after each) = 8
   * nodes and a send = 9; a backward a receive, the TP all-gather of the
   * gradient each TP rank received 1/TP of (no sequence parallelism:
   * Megatron's scatter/gather) and 8 = 10; the last backward adds a DP bucket
   * per block (2); the optimizer 1: 4 x 9 + 4 x 10 + 2 + 1 = 79. */
  uint8_t buf[4096];
  mem_sink s;
  memset(&s, 0, sizeof s);
  fth_trace_stats st;
  FTH_ENSURE(fth_trace_write_rank(&t, 5, buf, sizeof buf, sink, &s, &st, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(79, st.nodes);
  FTH_ENSURE_EQ_INT(4 * 2 * 2 * 2 + 4 + 2, st.coll_nodes);
  FTH_ENSURE_EQ_INT(4 * 2 * 2 * 2 + 1, st.comp_nodes); /* micro-batches x passes x blocks x parts */
  FTH_ENSURE_EQ_INT(4, st.send_nodes);
  FTH_ENSURE_EQ_INT(4, st.recv_nodes);
  FTH_ENSURE_EQ_INT(s.bytes, st.bytes);
  FTH_ENSURE(s.calls > 1); /* ~5 KiB through 4 KiB of buffer: streamed in pieces */
  /* The file opens with GlobalMetadata: a frame length (a varint), then field 1 "0.0.4". */
  int at = 0;
  while (s.head[at] & 0x80) at++;
  FTH_ENSURE(s.head[at + 1] == 0x0a && s.head[at + 2] == 0x05 && s.head[at + 3] == '0');
  /* Compute sums to the step model's kernels: 4 micro-batches x 2 blocks x
   * (forward + backward) + the optimizer, to the microsecond. */
  double want_us = 1e6 * (4 * 2 * (t.work.fwd[0].kernel_s + t.work.bwd[0].kernel_s) +
                          t.res.optimizer_s);
  FTH_ENSURE(fabs(st.compute_us - want_us) <= 1.0);
  /* The DP buckets carry the record's gradient bytes; the sends, 4 forward
   * activations of [1 x 1024, 1024] bf16 scattered over TP 2 = 1 MiB each. */
  FTH_ENSURE_NEAR(t.res.comm[FTH_COMM_DP].bytes_per_call, st.coll_bytes[FTH_COMM_DP], 1e-9);
  FTH_ENSURE_NEAR(4.0 * 1024 * 1024 * 2 / 2, st.coll_bytes[FTH_COMM_PP], 1e-12);
  /* Its stage-1 peer receives exactly what it sends. */
  fth_trace_stats st1;
  memset(&s, 0, sizeof s);
  FTH_ENSURE(fth_trace_write_rank(&t, 7, buf, sizeof buf, sink, &s, &st1, &err) == FTH_OK);
  FTH_ENSURE_NEAR(st.coll_bytes[FTH_COMM_PP], st1.recv_bytes, 1e-12);
  FTH_ENSURE_NEAR(st1.coll_bytes[FTH_COMM_PP], st.recv_bytes, 1e-12);
  /* The last stage's passes, timed as the step model times its slowest stage
   * (the last here: it adds the LM head to the same two blocks). */
  fth_trace_stage_time st_last;
  fth_trace_stage_time_of(&t, 1, -1, &st_last);
  FTH_ENSURE_NEAR(t.res.fwd_s, st_last.pass_s[0], 1e-12);
  FTH_ENSURE_NEAR(t.res.bwd_s, st_last.pass_s[1], 1e-12);
  /* Refusals: a rank outside the job; a failing sink. */
  FTH_ENSURE(fth_trace_write_rank(&t, 8, buf, sizeof buf, sink, &s, NULL, &err) == FTH_EINVAL);
  s.fail = 1;
  FTH_ENSURE(fth_trace_write_rank(&t, 0, buf, sizeof buf, sink, &s, NULL, &err) == FTH_ERANGE);
  return 0;
}

/* The two stages' 8 passes are want0 and want1 ({forward?, micro-batch}), chunk 0. */
static int two_stage_order(const fth_trace *t, const int want0[8][2], const int want1[8][2]) {
  for (int k = 0; k < 8; k++) {
    fth_pp_pass q;
    fth_trace_pass(t, 0, k, &q);
    FTH_ENSURE(q.fwd == want0[k][0] && q.mb == want0[k][1] && q.chunk == 0);
    fth_trace_pass(t, 1, k, &q);
    FTH_ENSURE(q.fwd == want1[k][0] && q.mb == want1[k][1] && q.chunk == 0);
  }
  return 0;
}

/* 1F1B order, p = 2 and m = 4 (the toy): stage 0 warms up with p - 0 - 1 = 1
 * forward, then F1 B0 F2 B1 F3 B2, then B3; the last stage alternates from the
 * start: F0 B0 F1 B1 ... (Narayanan et al. 2021 Fig. 4). */
static int schedule_order(void) {
  static fth_train_plan plan;
  static fth_trace t;
  FTH_RUN(toy_plan(&plan));
  fth_error err;
  FTH_ENSURE(fth_trace_compile(&t, &plan, &err) == FTH_OK);
  const int want0[8][2] = {{1, 0}, {1, 1}, {0, 0}, {1, 2}, {0, 1}, {1, 3}, {0, 2}, {0, 3}};
  const int want1[8][2] = {{1, 0}, {0, 0}, {1, 1}, {0, 1}, {1, 2}, {0, 2}, {1, 3}, {0, 3}};
  FTH_ENSURE(t.stage_passes == 8 && t.chunks == 1);
  FTH_RUN(two_stage_order(&t, want0, want1));
  return 0;
}

/* Runs of the schedule (pp_spec.microbatches_per_run 2): the toy's 4 micro-batches as two
 * 1F1B runs of 2, one after the other. p = 2, m = 2: stage 0 warms up with 1 forward, F0 F1
 * B0 B1, the last stage F0 B0 F1 B1; the second run the same with micro-batches 2 and 3. A
 * run length not dividing the micro-batches (3) is refused with the key. */
static int schedule_runs(void) {
  static fth_train_plan plan;
  static fth_trace t;
  FTH_RUN(toy_plan(&plan));
  fth_train_def w = plan.work;
  w.pp_microbatches_per_run = 2;
  fth_error err;
  FTH_ENSURE(fth_train_rework(&plan, &w, &err) == FTH_OK);
  FTH_ENSURE(fth_trace_compile(&t, &plan, &err) == FTH_OK);
  const int want0[8][2] = {{1, 0}, {1, 1}, {0, 0}, {0, 1}, {1, 2}, {1, 3}, {0, 2}, {0, 3}};
  const int want1[8][2] = {{1, 0}, {0, 0}, {1, 1}, {0, 1}, {1, 2}, {0, 2}, {1, 3}, {0, 3}};
  FTH_ENSURE(t.stage_passes == 8 && t.run_passes == 4 && t.run_microbatches == 2);
  FTH_RUN(two_stage_order(&t, want0, want1));
  w.pp_microbatches_per_run = 3;
  FTH_ENSURE(fth_train_rework(&plan, &w, &err) == FTH_OK);
  FTH_ENSURE(fth_trace_compile(&t, &plan, &err) == FTH_ENOTSUP);
  FTH_ENSURE(strcmp(err.path, "workload.pp_spec.microbatches_per_run") == 0);
  return 0;
}

/* "F3.1" is the forward of micro-batch 3 through chunk 1; "B" a backward. */
static int order_is(fth_pp_schedule s, int p, int m, int v, int stage, const char *want) {
  char got[512];
  size_t n = 0;
  long total = fth_pp_order_passes(s, p, m, v);
  for (long k = 0; k < total && n + 16 < sizeof got; k++) {
    fth_pp_pass q;
    fth_pp_order_pass(s, p, m, v, stage, k, &q);
    n += (size_t)snprintf(got + n, sizeof got - n, "%s%c%d.%d", k ? " " : "", q.fwd ? 'F' : 'B', q.mb,
                          q.chunk);
  }
  if (strcmp(got, want) != 0) fprintf(stderr, "stage %d: got  %s\n         want %s\n", stage, got, want);
  return strcmp(got, want) == 0;
}

/* Interleaved 1F1B, p = 2, v = 2, m = 4 (Megatron-LM's
 * forward_backward_pipelining_with_interleaving): forward k runs chunk
 * (k mod pv) / p on micro-batch (k / pv) p + k mod p, backward k the chunks
 * from the last; stage s warms up with 2 (p - s - 1) + (v - 1) p forwards:
 * 4 on stage 0, 2 on stage 1. Forwards: 0.0 1.0 0.1 1.1 2.0 3.0 2.1 3.1;
 * backwards: 0.1 1.1 0.0 1.0 2.1 3.1 2.0 3.0. */
static int interleaved_order(void) {
  FTH_ENSURE(fth_pp_order_chunks(FTH_PP_INTERLEAVED, 2, 2) == 2);
  FTH_ENSURE(fth_pp_order_passes(FTH_PP_INTERLEAVED, 2, 4, 2) == 16);
  FTH_ENSURE(order_is(FTH_PP_INTERLEAVED, 2, 4, 2, 0,
                      "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 "
                      "B2.1 B3.1 B2.0 B3.0"));
  FTH_ENSURE(order_is(FTH_PP_INTERLEAVED, 2, 4, 2, 1,
                      "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 "
                      "F3.1 B3.1 B2.0 B3.0"));
  /* m == p: every forward first (Megatron-LM's all-warm-up case). */
  FTH_ENSURE(order_is(FTH_PP_INTERLEAVED, 2, 2, 2, 1, "F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0"));
  /* v = 1 is plain 1F1B; one stage has one chunk whatever v says. */
  FTH_ENSURE(order_is(FTH_PP_INTERLEAVED, 2, 2, 1, 0, "F0.0 F1.0 B0.0 B1.0"));
  FTH_ENSURE(fth_pp_order_chunks(FTH_PP_INTERLEAVED, 1, 4) == 1);
  /* Placement: stage 1's chunk 0 is virtual stage 1, chunk 1 is 1 x 2 + 1 = 3;
   * virtual stage 2 is stage 0's chunk 1 (the wrap from the last stage). */
  int line, st, ch;
  FTH_ENSURE(fth_pp_order_position(FTH_PP_INTERLEAVED, 2, 2, 1, 1, &line) == 3 && line == 0);
  FTH_ENSURE(fth_pp_order_at(FTH_PP_INTERLEAVED, 2, 2, 0, 2, &st, &ch) == 0 && st == 0 && ch == 1);
  FTH_ENSURE(fth_pp_order_at(FTH_PP_INTERLEAVED, 2, 2, 0, 4, &st, &ch) == -1);
  char why[160];
  FTH_ENSURE(fth_pp_order_check(FTH_PP_INTERLEAVED, 4, 6, 2, why, sizeof why) == -1);
  FTH_ENSURE(strstr(why, "multiple of PP = 4") != NULL);
  return 0;
}

/* DualPipe, p = 4, m = 8 (dualpipe.py's step(): half_num_chunks = 4,
 * num_half_ranks = 2). Rank 0 (half_rank 0): step 1 two F0, step 2 one F0 F1,
 * step 3 one B1 F1, step 4 (4 - 4 + 0 + 1 = 1) F0 B1 F1 B0, step 5 one
 * B1 F1 B0, step 6 one B1 B0, step 7 one B0. Phase 0 is chunk 0 (stage 0, fed
 * micro-batches 0-3), phase 1 chunk 1 (stage 3 of the other direction,
 * micro-batches 4-7). Rank 1 (half_rank 1): step 2 twice, step 4 twice,
 * step 6 twice. Rank 2 mirrors rank 1 with the phases flipped. */
static int dualpipe_order(void) {
  FTH_ENSURE(fth_pp_order_chunks(FTH_PP_DUALPIPE, 4, 1) == 2);
  FTH_ENSURE(fth_pp_order_passes(FTH_PP_DUALPIPE, 4, 8, 1) == 16);
  FTH_ENSURE(order_is(FTH_PP_DUALPIPE, 4, 8, 1, 0,
                      "F0.0 F1.0 F2.0 F4.1 B4.1 F5.1 F3.0 B5.1 F6.1 B0.0 B6.1 F7.1 "
                      "B1.0 B7.1 B2.0 B3.0"));
  FTH_ENSURE(order_is(FTH_PP_DUALPIPE, 4, 8, 1, 1,
                      "F0.0 F4.1 F1.0 F5.1 F2.0 B4.1 F6.1 B0.0 F3.0 B5.1 F7.1 B1.0 "
                      "B6.1 B2.0 B7.1 B3.0"));
  FTH_ENSURE(order_is(FTH_PP_DUALPIPE, 4, 8, 1, 2,
                      "F4.1 F0.0 F5.1 F1.0 F6.1 B0.0 F2.0 B4.1 F7.1 B1.0 F3.0 B5.1 "
                      "B2.0 B6.1 B3.0 B7.1"));
  /* Placement: rank 1 holds stage 1 (line 0) and stage 4 - 1 - 1 = 2 of line 1. */
  int line, st, ch;
  FTH_ENSURE(fth_pp_order_position(FTH_PP_DUALPIPE, 4, 1, 1, 1, &line) == 2 && line == 1);
  FTH_ENSURE(fth_pp_order_at(FTH_PP_DUALPIPE, 4, 1, 1, 0, &st, &ch) == 0 && st == 3 && ch == 1);
  char why[160];
  FTH_ENSURE(fth_pp_order_check(FTH_PP_DUALPIPE, 4, 6, 1, why, sizeof why) == -1);
  FTH_ENSURE(strstr(why, "at least 2 x PP = 8") != NULL);
  FTH_ENSURE(fth_pp_order_check(FTH_PP_DUALPIPE, 4, 8, 1, why, sizeof why) == 0);
  return 0;
}

/* The toy under interleaving (v = 2: a block per chunk) and DualPipe. */
static int chunked_trace(void) {
  static fth_train_plan plan, plan1;
  static fth_trace t, t1;
  static uint8_t buf[8192];
  fth_error err;
  FTH_RUN(toy_plan_of(&plan1, FTH_PP_1F1B, 1));
  FTH_ENSURE(fth_trace_compile(&t1, &plan1, &err) == FTH_OK);
  fth_trace_stats s0, s1, st;
  mem_sink ms;
  memset(&ms, 0, sizeof ms);
  FTH_ENSURE(fth_trace_write_rank(&t1, 0, buf, sizeof buf, sink, &ms, &s0, &err) == FTH_OK);
  FTH_ENSURE(fth_trace_write_rank(&t1, 2, buf, sizeof buf, sink, &ms, &s1, &err) == FTH_OK);

  /* Interleaved, stage 0 (rank 0), per micro-batch: F chunk 0 = a block's 4
   * nodes (attention, MLP, a TP all-reduce after each) + its send = 5; F chunk
   * 1 receives the wrap from stage 1's chunk 0 and all-gathers it over TP
   * (no sequence parallelism) = 2 + 4 + 1 = 7; B chunk 1 the same 7 (its
   * gradient goes back over the wrap); B chunk 0 = 2 + 4 = 6, no send: 25 x 4
   * micro-batches + a DP bucket per chunk's block (2) + the optimizer = 103.
   * Sends: 3 of the 4 passes, m (2v - 1) = 12. Its compute is stage 0's under
   * 1F1B: the same blocks, cut in two. */
  FTH_RUN(toy_plan_of(&plan, FTH_PP_INTERLEAVED, 2));
  FTH_ENSURE(fth_trace_compile(&t, &plan, &err) == FTH_OK);
  FTH_ENSURE(t.chunks == 2 && t.stage_passes == 16);
  FTH_ENSURE(fth_trace_write_rank(&t, 0, buf, sizeof buf, sink, &ms, &st, &err) == FTH_OK);
  FTH_ENSURE_NEAR(103.0, st.nodes, 0);
  FTH_ENSURE_NEAR(12.0, st.send_nodes, 0);
  FTH_ENSURE_NEAR(12.0, st.recv_nodes, 0);
  FTH_ENSURE(fabs(st.compute_us - s0.compute_us) <= 1.0);
  fth_trace_piece pc;
  fth_trace_piece_of(&t, 1, 1, &pc); /* stage 1's chunk 1: its second block and the head */
  FTH_ENSURE(pc.model_stage == 1 && pc.lo == 1 && pc.hi == 2 && pc.head);
  /* The wrap: stage 1's chunk 0 forward sends to stage 0's chunk 1 with tag
   * 2 (mb x 2 + 0): micro-batch 3 -> 12; the gradient of stage 0's chunk 1
   * goes back with 13. */
  fth_pp_pass q = {1, 3, 0};
  int ps, pch, tag;
  FTH_ENSURE(fth_trace_hop(&t, 1, &q, 1, &ps, &pch, &tag) && ps == 0 && pch == 1 && tag == 12);
  q = (fth_pp_pass){0, 3, 1};
  FTH_ENSURE(fth_trace_hop(&t, 0, &q, 1, &ps, &pch, &tag) && ps == 1 && pch == 0 && tag == 13);
  q = (fth_pp_pass){1, 3, 1}; /* the last virtual stage's forward sends nothing */
  FTH_ENSURE(!fth_trace_hop(&t, 1, &q, 1, &ps, &pch, &tag));

  /* DualPipe on 2 stages: each rank holds stage 0 and stage 1 and passes half
   * the 4 micro-batches through each: its compute is the mean of the two
   * 1F1B stages' (2 c0 + 2 c1 + the optimizer); it sends a hand-off per
   * micro-batch: 2 forward activations of its own, 2 gradients of the others'. */
  FTH_RUN(toy_plan_of(&plan, FTH_PP_DUALPIPE, 1));
  FTH_ENSURE(fth_trace_compile(&t, &plan, &err) == FTH_OK);
  FTH_ENSURE(t.chunks == 2 && t.stage_passes == 8);
  for (int r = 0; r < 8; r += 2) { /* ranks 0 and 4 of stage 0, 2 and 6 of stage 1 */
    FTH_ENSURE(fth_trace_write_rank(&t, r, buf, sizeof buf, sink, &ms, &st, &err) == FTH_OK);
    FTH_ENSURE(fabs(st.compute_us - (s0.compute_us + s1.compute_us) / 2) <= 1.0);
    FTH_ENSURE_NEAR(4.0, st.send_nodes, 0);
    FTH_ENSURE_NEAR(4.0, st.recv_nodes, 0);
  }
  fth_trace_piece_of(&t, 0, 1, &pc); /* rank 0's chunk 1 is stage 1, with the head */
  FTH_ENSURE(pc.model_stage == 1 && pc.lo == 0 && pc.hi == 2 && pc.head);
  return 0;
}

int trace_test(void) {
  FTH_RUN(schedule_order());
  FTH_RUN(schedule_runs());
  FTH_RUN(interleaved_order());
  FTH_RUN(dualpipe_order());
  FTH_RUN(chunked_trace());
  FTH_RUN(varints());
  FTH_RUN(attributes());
  FTH_RUN(node_message());
  FTH_RUN(toy_trace());
  FTH_RUN(placed_trace());
  return 0;
}
