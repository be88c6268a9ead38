/* fth_phase.c: accumulating kernels and collectives of a pass (fth_phase.h). */
#include "fth_phase.h"

#include <string.h>

static const char *const part_names[FTH_FLOP_PART_COUNT] = {"attention", "mlp", "embedding",
                                                            "unembedding"};

const char *fth_flop_part_name(fth_flop_part p) {
  return (p >= 0 && p < FTH_FLOP_PART_COUNT) ? part_names[p] : NULL;
}

static const char *const class_names[FTH_KERNEL_CLASS_COUNT] = {"gemm", "attention", "other"};

const char *fth_kernel_class_name(fth_kernel_class c) {
  return (c >= 0 && c < FTH_KERNEL_CLASS_COUNT) ? class_names[c] : NULL;
}

double fth_overlap(double a, double b, double e) {
  return a + b - e * fth_min(a, b);
}

void fth_phase_add_kernel(const fth_phase_ctx *c, fth_phase *ph, fth_flop_part part,
                          fth_kernel_cost k, double weight_bytes) {
  fth_phase_add_kernel_class(c, ph, part, FTH_KERNEL_OTHER, k, weight_bytes);
}

void fth_phase_add_kernel_class(const fth_phase_ctx *c, fth_phase *ph, fth_flop_part part,
                                fth_kernel_class cls, fth_kernel_cost k, double weight_bytes) {
  /* Weight operands are read from their own tier (offloaded weights stream
   * from host memory): their bytes move at that tier's bandwidth. */
  double mem_s = k.memory_s;
  if (weight_bytes > 0 && c->weight_bw > 0 && c->env.mem_bw_bytes_per_s > 0)
    mem_s += weight_bytes / c->weight_bw - weight_bytes / c->env.mem_bw_bytes_per_s;
  double t = fth_overlap(k.compute_s, mem_s, c->comp_mem_eff) + c->launch_s;
  if (weight_bytes > 0) {
    double wbw = c->weight_bw > 0 ? c->weight_bw : c->env.mem_bw_bytes_per_s;
    ph->weight_memory_s += wbw > 0 ? weight_bytes / wbw : 0.0;
  }
  ph->flops[part] += k.flops;
  ph->bytes[part] += k.bytes;
  ph->compute_s[part] += k.compute_s;
  ph->memory_s[part] += mem_s;
  ph->kernel_s += t;
  ph->class_s[cls] += t;
  if (k.compute_s >= mem_s)
    ph->compute_bound_s += t;
  else
    ph->memory_bound_s += t;
}

void fth_phase_add_comm(fth_phase *ph, fth_comm_kind kind, fth_coll_op op, fth_coll_algo algo,
                        double bytes, double time_s, double calls) {
  if (calls <= 0) return;
  if (ph->comm_calls[kind] == 0) {
    ph->comm_op[kind] = op;
    ph->comm_algo[kind] = algo;
  }
  ph->comm_s[kind] += calls * time_s;
  ph->comm_calls[kind] += calls;
  ph->comm_bytes[kind] += calls * bytes;
}

void fth_phase_add_paced_comm(fth_phase *ph, fth_comm_kind kind, fth_coll_op op,
                              fth_coll_algo algo, double bytes, double time_s, double calls,
                              double exposed_s) {
  if (calls <= 0) return;
  fth_phase_add_comm(ph, kind, op, algo, bytes, time_s, calls);
  ph->comm_exposed_s[kind] += exposed_s;
  ph->paced |= 1u << kind;
}

void fth_phase_scale(fth_phase *ph, double s) {
  for (int i = 0; i < FTH_FLOP_PART_COUNT; i++) {
    ph->flops[i] *= s;
    ph->bytes[i] *= s;
    ph->compute_s[i] *= s;
    ph->memory_s[i] *= s;
  }
  ph->kernel_s *= s;
  for (int i = 0; i < FTH_KERNEL_CLASS_COUNT; i++) ph->class_s[i] *= s;
  ph->compute_bound_s *= s;
  ph->memory_bound_s *= s;
  ph->wgrad_s *= s;
  ph->weight_memory_s *= s;
  ph->kv_memory_s *= s;
  ph->host_s *= s;
  for (int i = 0; i < FTH_COMM_KIND_COUNT; i++) {
    ph->comm_s[i] *= s;
    ph->comm_serial_s[i] *= s;
    ph->comm_calls[i] *= s;
    ph->comm_bytes[i] *= s;
    ph->comm_exposed_s[i] *= s;
  }
}

void fth_phase_add(fth_phase *a, const fth_phase *b) {
  for (int i = 0; i < FTH_FLOP_PART_COUNT; i++) {
    a->flops[i] += b->flops[i];
    a->bytes[i] += b->bytes[i];
    a->compute_s[i] += b->compute_s[i];
    a->memory_s[i] += b->memory_s[i];
  }
  a->kernel_s += b->kernel_s;
  for (int i = 0; i < FTH_KERNEL_CLASS_COUNT; i++) a->class_s[i] += b->class_s[i];
  a->compute_bound_s += b->compute_bound_s;
  a->memory_bound_s += b->memory_bound_s;
  a->wgrad_s += b->wgrad_s;
  a->weight_memory_s += b->weight_memory_s;
  a->kv_memory_s += b->kv_memory_s;
  a->host_s += b->host_s;
  for (int i = 0; i < FTH_COMM_KIND_COUNT; i++) {
    if (a->comm_calls[i] == 0 && b->comm_calls[i] > 0) {
      a->comm_op[i] = b->comm_op[i];
      a->comm_algo[i] = b->comm_algo[i];
    }
    a->comm_s[i] += b->comm_s[i];
    a->comm_serial_s[i] += b->comm_serial_s[i];
    a->comm_calls[i] += b->comm_calls[i];
    a->comm_bytes[i] += b->comm_bytes[i];
    a->comm_exposed_s[i] += b->comm_exposed_s[i];
  }
  a->paced |= b->paced;
}

double fth_phase_time(const fth_phase *ph, double comp_comm_eff, double *exposed) {
  return fth_phase_time_blocking(ph, comp_comm_eff, 0u, exposed);
}

double fth_phase_time_blocking(const fth_phase *ph, double comp_comm_eff, unsigned blocking,
                               double *exposed) {
  /* a paced kind brings only what its own pipeline leaves exposed; a serial share runs
   * with nothing to hide under (comm_serial_s) */
  double part[FTH_COMM_KIND_COUNT], serial[FTH_COMM_KIND_COUNT];
  double comm = 0, block = 0;
  for (int i = 0; i < FTH_COMM_KIND_COUNT; i++) {
    part[i] = (ph->paced & (1u << i)) ? ph->comm_exposed_s[i] : ph->comm_s[i];
    serial[i] = fth_min(ph->comm_serial_s[i], part[i]);
    if (blocking & (1u << i)) {
      block += part[i];
    } else {
      block += serial[i];
      comm += part[i] - serial[i];
    }
  }
  double t = fth_overlap(ph->kernel_s, comm, comp_comm_eff);
  double exp_total = t - ph->kernel_s;
  for (int i = 0; i < FTH_COMM_KIND_COUNT; i++) {
    double hideable = part[i] - serial[i];
    exposed[i] = (blocking & (1u << i))
                     ? part[i]
                     : serial[i] + (comm > 0 ? exp_total * hideable / comm : 0.0);
  }
  return fth_max(t + block, ph->host_s);
}

/* Quantise `elems` elements before a GEMM (a recipe's cast: fth_recipe.h). */
static void cast(const fth_phase_ctx *c, fth_phase *ph, fth_flop_part part, double elems) {
  if (elems <= 0) return;
  fth_phase_add_kernel(c, ph, part, fth_kernel_elementwise(&c->env, elems, 2.0, c->cast_bytes),
                       0.0);
}

/* LoRA adapters (Hu et al. 2021; as PEFT runs them): y = W x + s B (A x) at the
 * activation width. Forward: A x (tokens x r from x) and B (A x), then the scaled
 * sum into y (read y and the update, write y: 3 elements moved per output element).
 * Backward: dB = (A x)^T dy and d(Ax) = dy B^T, dA = x^T d(Ax) and dx += d(Ax) A^T
 * (the same 3-element sum into dx). The base weight gets no gradient. */
/* One adapter GEMM at the activation width, `wbytes` of its traffic from the weights. */
static void lora_gemm(const fth_phase_ctx *c, fth_phase *ph, fth_flop_part part, double m, double n,
                      double k, double ab, double wbytes) {
  fth_phase_add_kernel_class(c, ph, part, FTH_KERNEL_GEMM, fth_kernel_gemm(&c->env, m, n, k, 1, ab),
                             wbytes);
}

static void lora(const fth_phase_ctx *c, const fth_layer_shape *sh, double tokens, double tp,
                 double ab, fth_phase *fwd, fth_phase *bwd) {
  const double r = c->lora_rank;
  for (int i = 0; i < sh->num_linears; i++) {
    const fth_linear *l = &sh->lin[i];
    if (!fth_linear_takes_lora(l, c->lora_targets)) continue;
    double in = l->shard == FTH_SHARD_ROW ? l->in / tp : l->in;
    double out = l->shard == FTH_SHARD_COLUMN ? l->out / tp : l->out;
    fth_flop_part part = l->part == FTH_PART_ATTN ? FTH_FLOP_ATTENTION : FTH_FLOP_MLP;
    lora_gemm(c, fwd, part, tokens, r, in, ab, in * r * ab);   /* A x */
    lora_gemm(c, fwd, part, tokens, out, r, ab, r * out * ab); /* B (A x) */
    fth_phase_add_kernel(c, fwd, part, fth_kernel_elementwise(&c->env, tokens * out, 2.0, 3.0 * ab),
                         0.0);
    if (bwd == NULL) continue;
    double before = bwd->kernel_s;
    lora_gemm(c, bwd, part, r, out, tokens, ab, 0.0); /* dB */
    lora_gemm(c, bwd, part, in, r, tokens, ab, 0.0);  /* dA */
    bwd->wgrad_s += bwd->kernel_s - before;
    lora_gemm(c, bwd, part, tokens, r, out, ab, r * out * ab); /* d(A x) */
    lora_gemm(c, bwd, part, tokens, in, r, ab, in * r * ab);   /* dx */
    fth_phase_add_kernel(c, bwd, part, fth_kernel_elementwise(&c->env, tokens * in, 1.0, 3.0 * ab),
                         0.0);
  }
}

void fth_phase_linears(const fth_phase_ctx *c, const fth_layer_shape *sh, double tokens, double tp,
                       double tp_moe, double routed_pairs, double local_experts, double ab,
                       double wb, fth_phase *fwd, fth_phase *bwd) {
  const int recipe = c->gemm_bytes > 0;
  for (int i = 0; i < sh->num_linears; i++) {
    const fth_linear *l = &sh->lin[i];
    double in = l->in, out = l->out, mtok = tokens, batch = 1;
    fth_flop_part part = l->part == FTH_PART_ATTN ? FTH_FLOP_ATTENTION : FTH_FLOP_MLP;
    double shard_tp = (l->part == FTH_PART_EXPERT) ? tp_moe : tp;
    if (l->shard == FTH_SHARD_COLUMN) out /= shard_tp;
    if (l->shard == FTH_SHARD_ROW) in /= shard_tp;
    if (l->part == FTH_PART_EXPERT) {
      batch = local_experts > 0 ? local_experts : 1;
      mtok = routed_pairs / batch;
    }
    /* The router stays at the activation precision under every recipe. */
    int q = recipe && l->part != FTH_PART_ROUTER;
    const fth_kernel_env *genv = q ? &c->gemm_env : &c->env;
    /* A grouped expert GEMM runs at its own share of the rate (FP8/FP4). */
    fth_kernel_env xenv;
    if (l->part == FTH_PART_EXPERT && genv->expert_rate_fraction > 0 &&
        genv->expert_rate_fraction < 1.0) {
      xenv = *genv;
      xenv.matrix_flops_per_s *= xenv.expert_rate_fraction;
      genv = &xenv;
    }
    double gb = q ? c->gemm_bytes : ab;
    double wgt = q ? (c->gemm_weight_bytes > 0 ? c->gemm_weight_bytes : c->gemm_bytes) : wb;
    /* Weights stored at `wgt` bytes: their traffic is in * out * batch * wgt. */
    fth_kernel_cost k = fth_kernel_gemm(genv, mtok, out, in, batch, gb);
    double wbytes = in * out * batch;
    k.bytes += wbytes * (wgt - gb);
    k.memory_s = c->env.mem_bw_bytes_per_s > 0 ? k.bytes / c->env.mem_bw_bytes_per_s : k.memory_s;
    if (q) {
      cast(c, fwd, part, mtok * in * batch);             /* X */
      cast(c, fwd, part, wbytes * c->weight_cast_share); /* W, once per step */
    }
    fth_phase_add_kernel_class(c, fwd, part, FTH_KERNEL_GEMM, k, wbytes * wgt);
    /* A grouped GEMM over `batch` local experts pays a fixed cost per expert, and
     * under a recipe the expert's own quantisation and GEMM call where the experts
     * are not one grouped kernel; it hides nothing and is hidden by nothing. */
    double per_expert =
        l->part == FTH_PART_EXPERT ? batch * (genv->expert_gemm_s + (q ? c->expert_recipe_s : 0.0))
                                   : 0.0;
    fwd->kernel_s += per_expert;
    fwd->class_s[FTH_KERNEL_GEMM] += per_expert;
    if (bwd == NULL) continue;
    bwd->kernel_s += 2.0 * per_expert; /* dgrad and wgrad */
    bwd->class_s[FTH_KERNEL_GEMM] += 2.0 * per_expert;
    if (q) cast(c, bwd, part, mtok * out * batch); /* dY */
    /* a frozen weight held in one layout: its transpose for the data gradient, made per pass */
    if (q && c->weight_transpose_bytes > 0)
      fth_phase_add_kernel(c, bwd, part,
                           fth_kernel_elementwise(&c->env, wbytes, 0.0, c->weight_transpose_bytes),
                           0.0);
    fth_kernel_cost kd = fth_kernel_gemm(genv, mtok, in, out, batch, gb);
    fth_phase_add_kernel_class(c, bwd, part, FTH_KERNEL_GEMM, kd, wbytes * gb);
    if (c->lora_rank > 0) continue; /* frozen: no weight gradient (adapters below) */
    fth_kernel_cost kw = fth_kernel_gemm(genv, in, out, mtok, batch, gb);
    double before = bwd->kernel_s;
    fth_phase_add_kernel_class(c, bwd, part, FTH_KERNEL_GEMM, kw, 0.0);
    bwd->wgrad_s += bwd->kernel_s - before;
  }
  if (c->lora_rank > 0) lora(c, sh, tokens, tp, ab, fwd, bwd);
}
