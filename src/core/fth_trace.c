/* fth_trace.c: Chakra execution traces of one training step (fth_trace.h). */
#include "fth_trace.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define NONE UINT64_MAX
/* Room one node needs in the output buffer (fth_chakra.c encodes into 1 KiB). */
#define NODE_ROOM 1100

/* The logical tags of each kind's group, and the view they belong to. */
static int kind_view(fth_comm_kind k) {
  return k == FTH_COMM_TP_MOE || k == FTH_COMM_EP || k == FTH_COMM_DP_MOE;
}

static int kind_has_tag(fth_comm_kind k, fth_logical_tag t) {
  switch (k) {
  case FTH_COMM_TP: return t == FTH_TAG_TP_ATTN;
  case FTH_COMM_TP_MOE: return t == FTH_TAG_TP_MOE;
  case FTH_COMM_EP: return t == FTH_TAG_EP_SU || t == FTH_TAG_EP_SO;
  case FTH_COMM_CP: return t == FTH_TAG_CP;
  case FTH_COMM_PP: return t == FTH_TAG_PP;
  case FTH_COMM_DP: return t == FTH_TAG_DP_ATTN || t == FTH_TAG_CP; /* the gradients' group */
  case FTH_COMM_DP_MOE: return t == FTH_TAG_DP_MOE;
  default: return 0;
  }
}

static int tag_in_view(fth_logical_tag t, int expert) {
  if (t == FTH_TAG_PP) return 1;
  if (expert)
    return t == FTH_TAG_TP_MOE || t == FTH_TAG_EP_SU || t == FTH_TAG_EP_SO || t == FTH_TAG_DP_MOE;
  return t == FTH_TAG_TP_ATTN || t == FTH_TAG_CP || t == FTH_TAG_DP_ATTN;
}

/* The factors of one view (fth_trace.h): per physical dimension, its own
 * logical dimensions in list order (or its implicit DP), then PP. */
static void view_factors(fth_trace *t, const fth_topology_def *topo, int v) {
  double stride = 1.0;
  int n = 0;
  if (topo->placed) { /* rank order: the listed order (fth_topology_rank_stride) */
    for (int i = 0; i < topo->num_logical; i++) {
      const fth_logical_dim_def *l = &topo->logical[i];
      if (!tag_in_view(l->tag, v) || l->size <= 1) continue;
      t->factor[v][n++] = (fth_trace_factor){l->tag, l->size, fth_topology_rank_stride(topo, i, v)};
    }
    t->n_factor[v] = n;
    return;
  }
  for (int d = 0; d < topo->num_phys; d++) {
    double inner = 1.0;
    int pp = 1, own = 0;
    for (int i = 0; i < topo->num_logical; i++) {
      const fth_logical_dim_def *l = &topo->logical[i];
      if (l->phys_dim != d || !tag_in_view(l->tag, v)) continue;
      if (l->tag == FTH_TAG_PP) {
        pp *= l->size;
        continue;
      }
      own = 1;
      if (l->size > 1) t->factor[v][n++] = (fth_trace_factor){l->tag, l->size, stride * inner};
      inner *= l->size;
    }
    if (!own && topo->phys[d].size / pp > 1) {
      int dp = topo->phys[d].size / pp;
      t->factor[v][n++] =
          (fth_trace_factor){v ? FTH_TAG_DP_MOE : FTH_TAG_DP_ATTN, dp, stride * inner};
      inner *= dp;
    }
    for (int i = 0; i < topo->num_logical; i++) {
      const fth_logical_dim_def *l = &topo->logical[i];
      if (l->phys_dim != d || l->tag != FTH_TAG_PP || l->size <= 1) continue;
      t->factor[v][n++] = (fth_trace_factor){FTH_TAG_PP, l->size, stride * inner};
      inner *= l->size;
    }
    stride *= topo->phys[d].size;
  }
  t->n_factor[v] = n;
}

static int digit(const fth_trace_factor *f, int rank) {
  return (int)fmod(floor(rank / f->stride), (double)f->size);
}

int fth_trace_group(const fth_trace *t, fth_comm_kind kind, int rank, int *members, int cap,
                    long *id) {
  int v = kind_view(kind);
  const fth_trace_factor *fs = t->factor[v];
  int idx[FTH_TRACE_MAX_FACTORS], n = 0;
  double base = rank;
  for (int i = 0; i < t->n_factor[v]; i++)
    if (kind_has_tag(kind, fs[i].tag)) {
      idx[n++] = i;
      base -= digit(&fs[i], rank) * fs[i].stride;
    }
  int size = 1;
  for (int j = 0; j < n; j++) size *= fs[idx[j]].size;
  *id = size > 1 ? 1L + (long)kind * t->ranks + (long)base : 0L;
  /* Mixed-radix count over the group's factors, innermost fastest: strides
   * grow with the factor index, so the members come out ascending. */
  int d[FTH_TRACE_MAX_FACTORS] = {0};
  for (int m = 0; m < size && m < cap; m++) {
    double r = base;
    for (int j = 0; j < n; j++) r += d[j] * fs[idx[j]].stride;
    members[m] = (int)r;
    for (int j = 0; j < n; j++) {
      if (++d[j] < fs[idx[j]].size) break;
      d[j] = 0;
    }
  }
  return size;
}

int fth_trace_stage(const fth_trace *t, int rank) {
  int s = 0, scale = 1;
  for (int i = 0; i < t->n_factor[0]; i++) {
    const fth_trace_factor *f = &t->factor[0][i];
    if (f->tag != FTH_TAG_PP) continue;
    s += digit(f, rank) * scale;
    scale *= f->size;
  }
  return s;
}

int fth_trace_stage_peer(const fth_trace *t, int rank, int stage) {
  double r = rank;
  for (int i = 0; i < t->n_factor[0]; i++) {
    const fth_trace_factor *f = &t->factor[0][i];
    if (f->tag != FTH_TAG_PP) continue;
    r += (stage % f->size - digit(f, rank)) * f->stride;
    stage /= f->size;
  }
  return (int)r;
}

/* The geometry both kinds of plan share. */
static fth_status geometry(fth_trace *t, const fth_topology_def *topo, fth_error *err) {
  const fth_layout *l = t->layout;
  t->ranks = (int)l->num_gpus;
  t->pp = l->pp;
  for (int v = 0; v < 2; v++) view_factors(t, topo, v);
  for (int k = 0; k < FTH_COMM_KIND_COUNT; k++) {
    long id;
    t->group_size[k] = l->group[k].size > 0 ? l->group[k].size : 1;
    int size = fth_trace_group(t, (fth_comm_kind)k, 0, NULL, 0, &id);
    if (size != t->group_size[k])
      return fth_fail(err, FTH_EINVAL, "topology.logical",
                      "the %s group of rank 0 has %d ranks but the layout's has %d",
                      fth_comm_kind_name((fth_comm_kind)k), size, t->group_size[k]);
  }
  return FTH_OK;
}

static fth_status whole_microbatches(double m, fth_error *err) {
  if (m != floor(m) || m > 1e6)
    return fth_fail(err, FTH_ENOTSUP, "workload.global_batch_size",
                    "a trace needs a whole number of micro-batches (at most 1e6), got %g", m);
  return FTH_OK;
}

fth_status fth_trace_compile_infer(fth_trace *t, const fth_infer_plan *p, fth_error *err) {
  fth_error_clear(err);
  memset(t, 0, sizeof *t);
  t->infer = p;
  t->layout = &p->layout;
  if (whole_microbatches(p->microbatches, err) != FTH_OK) return err->status;
  t->microbatches = t->run_microbatches = (int)p->microbatches;
  t->passes = 1;
  t->schedule = FTH_PP_1F1B;
  t->virt = t->chunks = 1;
  t->stage_passes = t->run_passes = t->microbatches;
  fth_infer_trace_work(p, &t->work);
  return geometry(t, &p->topo, err);
}

fth_status fth_trace_compile(fth_trace *t, const fth_train_plan *p, fth_error *err) {
  fth_error_clear(err);
  memset(t, 0, sizeof *t);
  t->plan = p;
  t->layout = &p->layout;
  t->passes = 2;
  if (whole_microbatches(p->microbatches, err) != FTH_OK) return err->status;
  t->microbatches = (int)p->microbatches;
  /* runs of the schedule (pp_spec.microbatches_per_run), whole ones */
  const int k_run = p->work.pp_microbatches_per_run;
  t->run_microbatches = k_run > 0 && k_run < t->microbatches ? k_run : t->microbatches;
  if (t->microbatches % t->run_microbatches != 0)
    return fth_fail(err, FTH_ENOTSUP, "workload.pp_spec.microbatches_per_run",
                    "a trace lays out whole runs of the schedule, but %d micro-batches do not "
                    "divide into runs of %d (choose a run length dividing them)",
                    t->microbatches, t->run_microbatches);
  t->schedule = p->work.pp;
  t->virt = p->work.virtual_stages;
  const int pp = p->layout.pp;
  t->chunks = fth_pp_order_chunks(t->schedule, pp, t->virt);
  char why[160];
  if (fth_pp_order_check(t->schedule, pp, t->run_microbatches, t->virt, why, sizeof why) != 0)
    return fth_fail(err, FTH_ENOTSUP, "workload.global_batch_size", "a trace cannot lay out %s: %s",
                    fth_pp_schedule_name(t->schedule), why);
  if (t->schedule == FTH_PP_INTERLEAVED && t->chunks > 1)
    for (int s = 0; s < pp; s++) {
      int layers, moe;
      fth_layout_stage_layers(&p->layout, &p->model, s, &layers, &moe);
      if (layers % t->chunks != 0)
        return fth_fail(err, FTH_ENOTSUP, "workload.pp_spec.virtual_stages",
                        "a trace splits each stage's layers evenly into its %d model chunks, but "
                        "stage %d has %d layers (choose virtual stages dividing the layers per stage)",
                        t->chunks, s, layers);
    }
  t->run_passes = fth_pp_order_passes(t->schedule, pp, t->run_microbatches, t->virt);
  t->stage_passes = (t->microbatches / t->run_microbatches) * t->run_passes;
  fth_train_trace_work(p, &t->work);
  fth_train_evaluate(p, &t->res);
  return geometry(t, &p->topo, err);
}

/* Blocks of stage s: training's (with its MTP modules) or the layout's split. */
static void stage_blocks(const fth_trace *t, int s, int blocks[2]) {
  if (t->plan) {
    fth_train_stage_blocks(t->plan, s, blocks);
    return;
  }
  int layers, moe;
  fth_layout_stage_layers(t->layout, &t->infer->model, s, &layers, &moe);
  blocks[0] = layers - moe;
  blocks[1] = moe;
}

void fth_trace_piece_of(const fth_trace *t, int stage, int chunk, fth_trace_piece *out) {
  memset(out, 0, sizeof *out);
  const int dual = t->chunks == 2 && t->schedule == FTH_PP_DUALPIPE;
  out->model_stage = dual && chunk == 1 ? t->pp - 1 - stage : stage;
  stage_blocks(t, out->model_stage, out->blocks);
  int nb = out->blocks[0] + out->blocks[1];
  int v = dual ? 1 : t->chunks, c = dual ? 0 : chunk;
  /* Interleaved: chunk c holds the c-th even share of the stage's blocks (its
   * MTP modules, on the last stage, go to the shares as they fall). */
  out->lo = (int)((long)c * nb / v);
  out->hi = (int)((long)(c + 1) * nb / v);
  out->head = out->model_stage == t->pp - 1 && c == v - 1;
}

int fth_trace_hop(const fth_trace *t, int stage, const fth_pp_pass *q, int out, int *peer_stage,
                  int *peer_chunk, int *tag) {
  int line;
  int pos = fth_pp_order_position(t->schedule, t->pp, t->virt, stage, q->chunk, &line);
  int peer = pos + ((q->fwd != 0) == (out != 0) ? 1 : -1);
  if (t->pp <= 1 ||
      fth_pp_order_at(t->schedule, t->pp, t->virt, line, peer, peer_stage, peer_chunk) != 0)
    return 0;
  int lower = pos < peer ? pos : peer;
  int per_line = t->schedule == FTH_PP_DUALPIPE ? 1 : t->chunks; /* chunks along one line */
  *tag = 2 * (q->mb * per_line + lower / t->pp) + !q->fwd;
  return 1;
}

/* ---- writing one rank ----------------------------------------------------------------------- */

typedef struct emitter {
  const fth_trace *t;
  fth_pb out;
  fth_trace_sink sink;
  void *ctx;
  int failed;
  uint64_t next_id;
  double exact_us;      /* compute time so far, exact */
  uint64_t written_us;  /* of which written: durations carry the rounding forward */
  fth_trace_stats st;
  int rank, stage;
  uint64_t input; /* what the next compute or collective also waits for (a received hand-off) */
  char pg[FTH_COMM_KIND_COUNT][24];
} emitter;

static void flush(emitter *e) {
  if (e->out.len > 0 && !e->failed && e->sink(e->ctx, e->out.buf, e->out.len) != 0) e->failed = 1;
  e->st.bytes += e->out.len;
  e->out.len = 0;
}

static uint64_t emit(emitter *e, fth_chakra_node *n) {
  n->id = e->next_id++;
  /* The pass's first node waits for its input, whatever node that is. */
  if (e->input != NONE && n->type != FTH_CHAKRA_COMM_SEND_NODE &&
      n->type != FTH_CHAKRA_COMM_RECV_NODE) {
    int dup = 0;
    for (int j = 0; j < n->n_deps; j++) dup |= n->data_deps[j] == e->input;
    if (!dup && n->n_deps < FTH_CHAKRA_MAX_DEPS) n->data_deps[n->n_deps++] = e->input;
    e->input = NONE;
  }
  if (e->out.cap - e->out.len < NODE_ROOM) flush(e);
  fth_chakra_node_write(&e->out, n);
  e->st.nodes++;
  return n->id;
}

static void deps(fth_chakra_node *n, uint64_t a, uint64_t b, uint64_t c) {
  uint64_t d[3] = {a, b, c};
  n->n_deps = 0;
  for (int i = 0; i < 3; i++) {
    int dup = 0;
    for (int j = 0; j < n->n_deps; j++) dup |= n->data_deps[j] == d[i];
    if (d[i] != NONE && !dup) n->data_deps[n->n_deps++] = d[i];
  }
}

static uint64_t to_bytes(double b) { return b > 0 ? (uint64_t)llround(b) : 0; }

/* A compute node of `dur_s`; durations are whole microseconds in Chakra, so
 * each takes the rounding of the running total: they sum to the exact time. */
static uint64_t comp(emitter *e, const char *name, double dur_s, double flops, double bytes,
                     uint64_t d1, uint64_t d2, uint64_t d3) {
  fth_chakra_node n;
  memset(&n, 0, sizeof n);
  n.name = name;
  n.type = FTH_CHAKRA_COMP_NODE;
  e->exact_us += dur_s * 1e6;
  uint64_t upto = (uint64_t)llround(e->exact_us);
  n.duration_micros = upto > e->written_us ? upto - e->written_us : 0;
  e->written_us += n.duration_micros;
  n.num_ops = to_bytes(flops);
  n.tensor_size = to_bytes(bytes);
  deps(&n, d1, d2, d3);
  e->st.comp_nodes++;
  e->st.compute_us += (double)n.duration_micros;
  e->st.flops += (double)n.num_ops;
  return emit(e, &n);
}

static fth_chakra_coll chakra_op(fth_coll_op op) {
  switch (op) {
  case FTH_COLL_ALL_GATHER: return FTH_CHAKRA_ALL_GATHER;
  case FTH_COLL_REDUCE_SCATTER: return FTH_CHAKRA_REDUCE_SCATTER;
  case FTH_COLL_ALL_TO_ALL: return FTH_CHAKRA_ALL_TO_ALL;
  default: return FTH_CHAKRA_ALL_REDUCE;
  }
}

/* A collective over the rank's group of `kind`; none when the group is one rank. */
static uint64_t coll(emitter *e, const char *name, fth_comm_kind kind, fth_coll_op op,
                     double bytes, uint64_t d1, uint64_t d2) {
  if (e->t->group_size[kind] <= 1 || bytes <= 0) return d1;
  fth_chakra_node n;
  memset(&n, 0, sizeof n);
  n.name = name;
  n.type = FTH_CHAKRA_COMM_COLL_NODE;
  n.comm_type = chakra_op(op);
  n.comm_size = to_bytes(bytes);
  n.pg_name = e->pg[kind];
  deps(&n, d1, d2, NONE);
  e->st.coll_nodes++;
  e->st.coll_bytes[kind] += (double)n.comm_size;
  return emit(e, &n);
}

static uint64_t p2p(emitter *e, const char *name, int send, int peer, int tag, double bytes,
                    uint64_t d1) {
  fth_chakra_node n;
  memset(&n, 0, sizeof n);
  n.name = name;
  n.type = send ? FTH_CHAKRA_COMM_SEND_NODE : FTH_CHAKRA_COMM_RECV_NODE;
  n.comm_src = send ? e->rank : peer;
  n.comm_dst = send ? peer : e->rank;
  n.comm_tag = tag;
  n.comm_size = to_bytes(bytes);
  deps(&n, d1, NONE, NONE);
  if (send) {
    e->st.send_nodes++;
    e->st.coll_bytes[FTH_COMM_PP] += (double)n.comm_size;
  } else {
    e->st.recv_nodes++;
    e->st.recv_bytes += (double)n.comm_size;
  }
  return emit(e, &n);
}

/* Calls of `kind` one pass makes, and the mean bytes of one (the total kept). */
static int calls_of(const fth_phase *ph, fth_comm_kind k, double *per_call) {
  double c = ph->comm_calls[k];
  if (c <= 0 || ph->comm_bytes[k] <= 0) return 0;
  int n = (int)llround(c);
  if (n < 1) n = 1;
  *per_call = ph->comm_bytes[k] / n;
  return n;
}

/* `n` collectives of `kind`, chained after `prev`; returns the last node. */
static uint64_t colls(emitter *e, const char *tag, fth_comm_kind k, fth_coll_op op, int n,
                      double bytes, uint64_t prev) {
  char name[64];
  for (int i = 0; i < n; i++) {
    snprintf(name, sizeof name, "%s.%s", tag, fth_comm_kind_name(k));
    prev = coll(e, name, k, op, bytes, prev, NONE);
  }
  return prev;
}

/* One block's pass, its kernels split into the attention part and the rest
 * (MLP or experts), with the layer collectives where Megatron-LM issues them:
 * CP's K/V exchange at the attention (before it forward, after it backward);
 * TP all-reduces after each part, or under sequence parallelism an all-gather
 * before and a reduce-scatter after; TP_MoE likewise around the experts; EP's
 * dispatch before them and its combine after. `dir` 0 forward, 1 backward. */
static uint64_t block_pass(emitter *e, const fth_phase *ph, int moe, int dir, const char *tag,
                           uint64_t prev) {
  double pc[FTH_COMM_KIND_COUNT] = {0};
  int nc[FTH_COMM_KIND_COUNT];
  for (int k = 0; k < FTH_COMM_KIND_COUNT; k++) nc[k] = calls_of(ph, (fth_comm_kind)k, &pc[k]);
  double w[FTH_FLOP_PART_COUNT], sum = 0;
  for (int i = 0; i < FTH_FLOP_PART_COUNT; i++) sum += w[i] = ph->compute_s[i] + ph->memory_s[i];
  double attn_share = sum > 0 ? w[FTH_FLOP_ATTENTION] / sum : 0.5;
  double flops_rest = 0, bytes_rest = 0;
  for (int i = 1; i < FTH_FLOP_PART_COUNT; i++) {
    flops_rest += ph->flops[i];
    bytes_rest += ph->bytes[i];
  }
  int split_tp = ph->comm_op[FTH_COMM_TP] != FTH_COLL_ALL_REDUCE;
  int tp_attn = moe ? nc[FTH_COMM_TP] : nc[FTH_COMM_TP] / 2;
  int tp_mlp = nc[FTH_COMM_TP] - tp_attn;
  char name[64];
  for (int part = 0; part < 2; part++) {
    int attn = dir == 0 ? part == 0 : part == 1;
    int tp = attn ? tp_attn : tp_mlp;
    int tp_before = split_tp ? tp / 2 : 0;
    if (attn && dir == 0)
      prev = colls(e, tag, FTH_COMM_CP, ph->comm_op[FTH_COMM_CP], nc[FTH_COMM_CP],
                   pc[FTH_COMM_CP], prev);
    prev = colls(e, tag, FTH_COMM_TP, FTH_COLL_ALL_GATHER, tp_before, pc[FTH_COMM_TP], prev);
    if (!attn) {
      int tm = nc[FTH_COMM_TP_MOE];
      prev = colls(e, tag, FTH_COMM_TP_MOE, tm > 1 ? FTH_COLL_ALL_GATHER : ph->comm_op[FTH_COMM_TP_MOE],
                   tm / 2 + (tm == 1), pc[FTH_COMM_TP_MOE], prev);
      prev = colls(e, tag, FTH_COMM_EP, FTH_COLL_ALL_TO_ALL, nc[FTH_COMM_EP] / 2, pc[FTH_COMM_EP],
                   prev);
    }
    snprintf(name, sizeof name, "%s.%s", tag, attn ? "attn" : (moe ? "moe" : "mlp"));
    double share = attn ? attn_share : 1.0 - attn_share;
    prev = comp(e, name, ph->kernel_s * share,
                attn ? ph->flops[FTH_FLOP_ATTENTION] : flops_rest,
                attn ? ph->bytes[FTH_FLOP_ATTENTION] : bytes_rest, prev, NONE, NONE);
    if (!attn) {
      int tm = nc[FTH_COMM_TP_MOE];
      prev = colls(e, tag, FTH_COMM_EP, FTH_COLL_ALL_TO_ALL, nc[FTH_COMM_EP] - nc[FTH_COMM_EP] / 2,
                   pc[FTH_COMM_EP], prev);
      prev = colls(e, tag, FTH_COMM_TP_MOE, FTH_COLL_REDUCE_SCATTER, tm - tm / 2 - (tm == 1),
                   pc[FTH_COMM_TP_MOE], prev);
    }
    prev = colls(e, tag, FTH_COMM_TP, split_tp ? FTH_COLL_REDUCE_SCATTER : FTH_COLL_ALL_REDUCE,
                 tp - tp_before, pc[FTH_COMM_TP], prev);
    if (attn && dir == 1)
      prev = colls(e, tag, FTH_COMM_CP, ph->comm_op[FTH_COMM_CP], nc[FTH_COMM_CP],
                   pc[FTH_COMM_CP], prev);
  }
  return prev;
}

/* A phase as one compute node followed by its collectives (the head, a
 * block's recomputation); nothing when it is empty. */
static uint64_t whole_pass(emitter *e, const fth_phase *ph, const char *tag, uint64_t prev) {
  double flops = 0, bytes = 0;
  for (int i = 0; i < FTH_FLOP_PART_COUNT; i++) {
    flops += ph->flops[i];
    bytes += ph->bytes[i];
  }
  if (ph->kernel_s > 0) prev = comp(e, tag, ph->kernel_s, flops, bytes, prev, NONE, NONE);
  for (int k = 0; k < FTH_COMM_KIND_COUNT; k++) {
    double per;
    int n = calls_of(ph, (fth_comm_kind)k, &per);
    prev = colls(e, tag, (fth_comm_kind)k, ph->comm_op[k], n, per, prev);
  }
  return prev;
}

/* Bucket i of n of `total` bytes, in whole bytes summing to the total. */
static double bucket(double total, int i, int n) {
  return floor((i + 1) * total / n) - floor(i * total / n);
}

/* The data-parallel traffic of the step, from the step model's record. */
typedef struct dp_plan {
  double grad[2];   /* gradient bytes reduced per step (DDP, ZeRO-1/2) or per pass (ZeRO-3) */
  double gather[2]; /* weight bytes gathered after the optimizer (ZeRO-1/2) or per pass (ZeRO-3) */
  fth_coll_op op[2];
} dp_plan;

static dp_plan dp_of(const fth_trace *t) {
  dp_plan d;
  memset(&d, 0, sizeof d);
  if (!t->plan) return d; /* inference: no gradients */
  const fth_comm_kind kinds[2] = {FTH_COMM_DP, FTH_COMM_DP_MOE};
  for (int i = 0; i < 2; i++) {
    const fth_comm_item *c = &t->res.comm[kinds[i]];
    if (c->group_size <= 1 || c->calls_per_step <= 0) continue;
    d.op[i] = c->op;
    d.grad[i] = c->bytes_per_call;
    if (t->plan->work.dp == FTH_DP_ZERO3) /* per pass: m (2 gathers + 1 reduce-scatter) */
      d.gather[i] = (c->bytes_per_step / c->calls_per_step - c->bytes_per_call) / 2.0;
    else
      d.gather[i] = c->bytes_per_step - c->bytes_per_call * c->calls_per_step;
  }
  return d;
}

/* ZeRO-3's per-pass weight gathers (before) or gradient reduce-scatters (after). */
static uint64_t zero3(emitter *e, const dp_plan *d, int gather, double scale, const char *tag,
                      uint64_t prev) {
  if (!e->t->plan || e->t->plan->work.dp != FTH_DP_ZERO3) return prev;
  const fth_comm_kind kinds[2] = {FTH_COMM_DP, FTH_COMM_DP_MOE};
  char name[64];
  for (int i = 0; i < 2; i++) {
    snprintf(name, sizeof name, "%s.zero3_%s", tag, gather ? "gather" : "reduce");
    prev = coll(e, name, kinds[i], gather ? FTH_COLL_ALL_GATHER : FTH_COLL_REDUCE_SCATTER,
                scale * (gather ? d->gather[i] : d->grad[i]), prev, NONE);
  }
  return prev;
}

/* What one rank's step shares across its passes. */
typedef struct step_ctx {
  int nb_all, moe_all, bucket_j, bucket_jm, dense_dp, expert_dp;
  double zscale; /* ZeRO-3 bytes per pass: the record's per micro-batch over the chunks passed */
  dp_plan dp;
  uint64_t chain, bucket_last[2];
} step_ctx;

/* The last micro-batch through `chunk`: the last run's (DualPipe: each end feeds half). */
static int last_mb(const fth_trace *t, int chunk) {
  const int m = t->run_microbatches, base = t->microbatches - m;
  if (t->schedule == FTH_PP_DUALPIPE && t->chunks == 2) return base + (chunk ? m - 1 : m / 2 - 1);
  return t->microbatches - 1;
}

/* One forward or backward pass of micro-batch q->mb through chunk q->chunk. */
static void pass(emitter *e, step_ctx *c, const fth_pp_pass *q) {
  const fth_train_work *wk = &e->t->work;
  fth_trace_piece piece, *pc = &piece;
  fth_trace_piece_of(e->t, e->stage, q->chunk, pc);
  const int fwd = q->fwd;
  char tag[32], name[64];
  if (e->t->chunks > 1)
    snprintf(tag, sizeof tag, "%s%d.c%d", fwd ? "F" : "B", q->mb, q->chunk);
  else
    snprintf(tag, sizeof tag, "%s%d", fwd ? "F" : "B", q->mb);
  /* Receive the activation (forward) or its gradient (backward): posted
   * without dependencies, so the receive can land before the pass starts;
   * the pass's first node waits for it. */
  int ps, pch, ptag;
  if (fth_trace_hop(e->t, e->stage, q, 0, &ps, &pch, &ptag)) {
    snprintf(name, sizeof name, "%s.recv", tag);
    uint64_t got = p2p(e, name, 0, fth_trace_stage_peer(e->t, e->rank, ps), ptag, wk->pp_bytes, NONE);
    if (wk->pp_gather_bytes > 0) {
      snprintf(name, sizeof name, "%s.pp_gather", tag);
      got = coll(e, name, FTH_COMM_TP, FTH_COLL_ALL_GATHER, wk->pp_gather_bytes, got, NONE);
    }
    e->input = got;
  }
  c->chain = zero3(e, &c->dp, 1, c->zscale, tag, c->chain);
  if (fwd) {
    for (int b = pc->lo; b < pc->hi; b++) {
      int moe = b >= pc->blocks[0];
      snprintf(name, sizeof name, "%s.b%d", tag, b);
      c->chain = block_pass(e, &wk->fwd[moe], moe, 0, name, c->chain);
    }
    if (pc->head) {
      snprintf(name, sizeof name, "%s.head", tag);
      c->chain = whole_pass(e, &wk->head_fwd, name, c->chain);
    }
  } else {
    if (pc->head) {
      snprintf(name, sizeof name, "%s.head", tag);
      c->chain = whole_pass(e, &wk->head_bwd, name, c->chain);
    }
    const int last = q->mb == last_mb(e->t, q->chunk);
    for (int b = pc->hi - 1; b >= pc->lo; b--) {
      int moe = b >= pc->blocks[0];
      snprintf(name, sizeof name, "%s.b%d.rec", tag, b);
      c->chain = whole_pass(e, &wk->rec[moe], name, c->chain);
      snprintf(name, sizeof name, "%s.b%d", tag, b);
      c->chain = block_pass(e, &wk->bwd[moe], moe, 1, name, c->chain);
      if (!last) continue;
      /* The chunk's last backward issues the gradient buckets as their blocks
       * finish (Li et al. 2020, PyTorch DDP), one after another on the DP stream. */
      if (c->dense_dp) {
        int j = c->bucket_j++;
        snprintf(name, sizeof name, "%s.dp_bucket%d", tag, j);
        c->bucket_last[0] = coll(e, name, FTH_COMM_DP, c->dp.op[0], bucket(c->dp.grad[0], j, c->nb_all),
                                 c->chain, c->bucket_last[0]);
      }
      if (c->expert_dp && moe) {
        int jm = c->bucket_jm++;
        snprintf(name, sizeof name, "%s.dp_moe_bucket%d", tag, jm);
        c->bucket_last[1] = coll(e, name, FTH_COMM_DP_MOE, c->dp.op[1],
                                 bucket(c->dp.grad[1], jm, c->moe_all), c->chain, c->bucket_last[1]);
      }
    }
    c->chain = zero3(e, &c->dp, 0, c->zscale, tag, c->chain);
  }
  if (fth_trace_hop(e->t, e->stage, q, 1, &ps, &pch, &ptag)) {
    snprintf(name, sizeof name, "%s.send", tag);
    p2p(e, name, 1, fth_trace_stage_peer(e->t, e->rank, ps), ptag, wk->pp_bytes, c->chain);
  }
}

void fth_trace_pass(const fth_trace *t, int stage, long k, fth_pp_pass *out) {
  if (!t->plan) { /* inference: forwards only, in order */
    out->fwd = 1;
    out->mb = (int)k;
    out->chunk = 0;
    return;
  }
  long run = t->run_passes > 0 ? k / t->run_passes : 0;
  fth_pp_order_pass(t->schedule, t->pp, t->run_microbatches, t->virt, stage, k - run * t->run_passes,
                    out);
  out->mb += (int)run * t->run_microbatches;
}

/* Add `n` blocks' phases of one kind (forward, backward, recomputation). */
static void add_blocks(const fth_train_work *wk, int moe, double n, fth_phase ph[3]) {
  if (n <= 0) return;
  const fth_phase *src[3] = {&wk->fwd[moe], &wk->bwd[moe], &wk->rec[moe]};
  for (int i = 0; i < 3; i++) {
    fth_phase x = *src[i];
    fth_phase_scale(&x, n);
    fth_phase_add(&ph[i], &x);
  }
}

void fth_trace_stage_time_of(const fth_trace *t, int stage, int chunk, fth_trace_stage_time *out) {
  const fth_train_work *wk = &t->work;
  memset(out, 0, sizeof *out);
  fth_phase ph[3]; /* forward, backward, recomputation */
  memset(ph, 0, sizeof ph);
  /* The chunks a micro-batch's share passes through, each with its weight:
   * all of them (interleaved), half each (DualPipe: two stages, half the
   * micro-batches through each), or just `chunk`. */
  const int dual = t->schedule == FTH_PP_DUALPIPE && t->chunks == 2;
  int c0 = chunk < 0 ? 0 : chunk, c1 = chunk < 0 ? t->chunks - 1 : chunk;
  double w = chunk < 0 && dual ? 0.5 : 1.0;
  for (int c = c0; c <= c1; c++) {
    fth_trace_piece pc;
    fth_trace_piece_of(t, stage, c, &pc);
    int dense = (pc.hi < pc.blocks[0] ? pc.hi : pc.blocks[0]) - pc.lo;
    if (dense < 0) dense = 0;
    add_blocks(wk, 0, w * dense, ph);
    add_blocks(wk, 1, w * (pc.hi - pc.lo - dense), ph);
    if (pc.head) {
      fth_phase hf = wk->head_fwd, hb = wk->head_bwd;
      fth_phase_scale(&hf, w);
      fth_phase_scale(&hb, w);
      fth_phase_add(&ph[0], &hf);
      fth_phase_add(&ph[1], &hb);
    }
  }
  for (int i = 0; i < 3; i++) {
    double ex[FTH_COMM_KIND_COUNT];
    int dir = i == 0 ? 0 : 1;
    out->pass_s[dir] += fth_train_work_pass_s(wk, &ph[i], ex);
    out->kernel_s[dir] += ph[i].kernel_s;
    for (int k = 0; k < FTH_COMM_KIND_COUNT; k++) {
      out->comm_raw_s[dir][k] += ph[i].comm_s[k];
      out->comm_exposed_s[dir][k] += ex[k];
    }
  }
}

fth_status fth_trace_write_rank(const fth_trace *t, int rank, uint8_t *buf, size_t cap,
                                fth_trace_sink sink, void *ctx, fth_trace_stats *stats,
                                fth_error *err) {
  fth_error_clear(err);
  if (rank < 0 || rank >= t->ranks)
    return fth_fail(err, FTH_EINVAL, "rank", "rank %d is outside the job (0 to %d)", rank,
                    t->ranks - 1);
  if (cap < 4096) return fth_fail(err, FTH_EINVAL, "buffer", "expected >= 4096 bytes, got %zu", cap);
  emitter e;
  memset(&e, 0, sizeof e);
  e.t = t;
  e.sink = sink;
  e.ctx = ctx;
  e.rank = rank;
  e.stage = fth_trace_stage(t, rank);
  e.input = NONE;
  fth_pb_init(&e.out, buf, cap);
  for (int k = 0; k < FTH_COMM_KIND_COUNT; k++) {
    long id;
    fth_trace_group(t, (fth_comm_kind)k, rank, NULL, 0, &id);
    snprintf(e.pg[k], sizeof e.pg[k], "%ld", id);
  }
  const fth_train_plan *p = t->plan; /* NULL for inference */
  const int s = e.stage, m = t->microbatches;
  char meta[5][32];
  snprintf(meta[0], sizeof meta[0], "%d", rank);
  snprintf(meta[1], sizeof meta[1], "%d", s);
  snprintf(meta[2], sizeof meta[2], "%d", t->ranks);
  snprintf(meta[3], sizeof meta[3], "%d", m);
  snprintf(meta[4], sizeof meta[4], "%d", t->chunks);
  const char *keys[6] = {"fathom.rank", "fathom.stage", "fathom.ranks", "fathom.microbatches",
                         "fathom.schedule", "fathom.chunks"};
  const char *what = p ? fth_pp_schedule_name(p->work.pp)
                       : (t->infer->pass == FTH_PASS_DECODE ? "decode iteration" : "prefill");
  const char *vals[6] = {meta[0], meta[1], meta[2], meta[3], what, meta[4]};
  fth_chakra_metadata(&e.out, keys, vals, 6);

  step_ctx c;
  memset(&c, 0, sizeof c);
  for (int ch = 0; ch < t->chunks; ch++) {
    fth_trace_piece piece, *pc = &piece;
    fth_trace_piece_of(t, s, ch, pc);
    int dense = (pc->hi < pc->blocks[0] ? pc->hi : pc->blocks[0]) - pc->lo;
    c.nb_all += pc->hi - pc->lo;
    c.moe_all += pc->hi - pc->lo - (dense > 0 ? dense : 0);
  }
  c.dp = dp_of(t);
  c.zscale = 2.0 * m / (double)(t->stage_passes > 0 ? t->stage_passes : 1);
  const int zero3_dp = p && p->work.dp == FTH_DP_ZERO3;
  c.dense_dp = c.dp.grad[0] > 0 && !zero3_dp && c.nb_all > 0;
  c.expert_dp = c.dp.grad[1] > 0 && !zero3_dp && c.moe_all > 0;
  c.chain = c.bucket_last[0] = c.bucket_last[1] = NONE;
  for (long k = 0; k < t->stage_passes && !e.failed; k++) {
    fth_pp_pass q;
    fth_trace_pass(t, s, k, &q);
    pass(&e, &c, &q);
  }
  if (!p) { /* inference: the iteration ends with its last forward */
    flush(&e);
    if (stats) *stats = e.st;
    if (e.failed) return fth_fail(err, FTH_ERANGE, "output", "the trace's output failed");
    return FTH_OK;
  }
  /* The optimizer after every gradient is reduced; ZeRO-1/2 then gather the
   * updated weights (fth_zero.h). */
  uint64_t opt =
      comp(&e, "optimizer", t->res.optimizer_s, 0, 0, c.chain, c.bucket_last[0], c.bucket_last[1]);
  if (p->work.dp == FTH_DP_ZERO1 || p->work.dp == FTH_DP_ZERO2) {
    uint64_t g = coll(&e, "optimizer.dp_gather", FTH_COMM_DP, FTH_COLL_ALL_GATHER, c.dp.gather[0],
                      opt, NONE);
    if (c.moe_all > 0)
      coll(&e, "optimizer.dp_moe_gather", FTH_COMM_DP_MOE, FTH_COLL_ALL_GATHER, c.dp.gather[1], g,
           NONE);
  }
  flush(&e);
  if (stats) *stats = e.st;
  if (e.failed) return fth_fail(err, FTH_ERANGE, "output", "the trace's output failed");
  return FTH_OK;
}
