/* fth_sweep.c: sweep points reworked and evaluated in C, and the values a
 * record's columns read (see fth_sweep.h). The record's derived numbers
 * (sums over parts, ratios, free bytes) are computed here in the order
 * lua/fathom/report.lua computes them, so the doubles are bit-identical. */
#include "fth_sweep.h"

#include "fth_numtext.h"

#include <stdint.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


long long fth_sweep_count(const fth_sweep_def *def) {
  double n = 1;
  for (int a = 0; a < def->n_axes; a++) {
    if (def->axis_len[a] < 1) return -1;
    n *= (double)def->axis_len[a];
    if (n > 9007199254740992.0) return -1;
  }
  return (long long)n;
}

fth_status fth_sweep_check(const fth_sweep_def *def, fth_error *err) {
  if (def->n_axes < 0 || def->n_axes > FTH_SWEEP_MAX_AXES)
    return fth_fail(err, FTH_EINVAL, "axes", "%d axes (at most %d)", def->n_axes, FTH_SWEEP_MAX_AXES);
  if (def->n_keys < 0 || def->n_keys > FTH_SWEEP_MAX_KEYS)
    return fth_fail(err, FTH_EINVAL, "keys", "%d keys (at most %d)", def->n_keys, FTH_SWEEP_MAX_KEYS);
  if (fth_sweep_count(def) < 0) return fth_fail(err, FTH_EINVAL, "axes", "an axis is empty or the sweep too large");
  for (int k = 0; k < def->n_keys; k++) {
    const fth_sweep_key *key = &def->key[k];
    if ((int)key->field < 0 || key->field >= FTH_SWEEP_FIELD_COUNT)
      return fth_fail(err, FTH_EINVAL, "keys", "key %d: unknown field %d", k + 1, (int)key->field);
    if (key->axis < 0 || key->axis >= def->n_axes || key->values == NULL)
      return fth_fail(err, FTH_EINVAL, "keys", "key %d: no axis %d", k + 1, key->axis + 1);
    if (key->field == FTH_SWEEP_LOGICAL_SIZE && (key->index < 0 || key->index >= def->topo.num_logical))
      return fth_fail(err, FTH_EINVAL, "keys", "key %d: no logical dimension %d", k + 1, key->index + 1);
  }
  return FTH_OK;
}

void fth_sweep_point_eval(const fth_sweep_def *def, long long i, fth_sweep_point *out) {
  /* odometer, last axis fastest (fathom.sweep.iterate's order) */
  long long rest = i;
  for (int a = def->n_axes - 1; a >= 0; a--) {
    out->idx[a] = rest % def->axis_len[a];
    rest /= def->axis_len[a];
  }
  fth_topology_def topo = def->topo;
  fth_train_def work = def->work;
  for (int k = 0; k < def->n_keys; k++) {
    const fth_sweep_key *key = &def->key[k];
    double v = key->values[out->idx[key->axis]];
    switch (key->field) {
    case FTH_SWEEP_GLOBAL_BATCH: work.global_batch = v; break;
    case FTH_SWEEP_MICRO_BATCH: work.micro_batch = v; break;
    case FTH_SWEEP_SEQ_LEN: work.seq_len = v; break;
    case FTH_SWEEP_LOGICAL_SIZE: topo.logical[key->index].size = (int)v; break;
    case FTH_SWEEP_FIELD_COUNT: break;
    }
  }
  fth_error_clear(&out->err);
  out->valid = 0;
  /* the Lua loader's one cross-field rule (spec.train) before the core's */
  if (work.micro_batch > work.global_batch) {
    fth_fail(&out->err, FTH_EINVAL, "micro_batch_size", "micro_batch_size %lld exceeds global_batch_size %lld",
             (long long)work.micro_batch, (long long)work.global_batch);
    return;
  }
  int topo_keys = 0;
  for (int k = 0; k < def->n_keys; k++) topo_keys |= def->key[k].field == FTH_SWEEP_LOGICAL_SIZE;
  if (!topo_keys && out->compiled_for == def) {
    if (fth_train_rework(&out->plan, &work, &out->err) != FTH_OK) return;
  } else {
    out->compiled_for = NULL;
    fth_status st = fth_train_compile(&out->plan, &def->node, &topo, &def->model, &work, &out->err);
    /* the layout is usable when only the workload was refused (fth_train_compile) */
    if (!topo_keys && out->plan.layout.num_gpus > 0) out->compiled_for = def;
    if (st != FTH_OK) return;
  }
  fth_train_evaluate(&out->plan, &out->result);
  if (def->goodput) {
    fth_goodput_def gp = def->gp;
    if (def->gp_checkpoint_from_footprint)
      gp.checkpoint_bytes = out->result.mem.bytes[FTH_MEM_WEIGHTS] + out->result.mem.bytes[FTH_MEM_OPTIMIZER];
    if (fth_goodput_check(&gp, &out->err) != FTH_OK) return;
    out->gp = fth_goodput(&gp, out->plan.layout.num_gpus, out->result.total_time_s);
  }
  out->valid = 1;
}

unsigned long long fth_sweep_mask(const fth_sweep_point *p) {
  unsigned long long m = 1ULL << FTH_SG_ALWAYS;
  if (!p->valid) return m | (1ULL << FTH_SG_ERROR);
  m |= 1ULL << FTH_SG_VALID;
  const fth_train_result *r = &p->result;
  if (!r->mem.fits) m |= 1ULL << FTH_SG_OVERFLOW;
  for (int k = 0; k < FTH_COMM_KIND_COUNT; k++)
    if (r->comm[k].bytes_per_step > 0) m |= 1ULL << (FTH_SG_COMM + k);
  /* lcheck_push_footprint's rule for a tier's entry */
  for (int t = 0; t < FTH_TIER_COUNT; t++)
    if (r->mem.tier_capacity[t] > 0 || r->mem.tier_bytes[t] > 0) m |= 1ULL << (FTH_SG_TIER + t);
  return m;
}

static double part_field(const fth_train_result *r, int pass, int part, int field) {
  switch (field) {
  case 0: return pass ? r->bwd_flops[part] : r->fwd_flops[part];
  case 1: return pass ? r->bwd_compute_s[part] : r->fwd_compute_s[part];
  case 2: return pass ? r->bwd_bytes[part] : r->fwd_bytes[part];
  default: return pass ? r->bwd_memory_s[part] : r->fwd_memory_s[part];
  }
}

static double comm_field(const fth_comm_item *c, int field) {
  switch (field) {
  case FTH_SC_GROUP_SIZE: return c->group_size;
  case FTH_SC_LEVELS: return c->num_levels;
  case FTH_SC_BYTES_PER_CALL: return c->bytes_per_call;
  case FTH_SC_CALLS: return c->calls_per_step;
  case FTH_SC_BYTES_PER_STEP: return c->bytes_per_step;
  case FTH_SC_RAW_S: return c->raw_s;
  case FTH_SC_HIDDEN_S: return c->hidden_s;
  case FTH_SC_EXPOSED_S: return c->exposed_s;
  default: return NAN;
  }
}

static double degree(const fth_train_plan *p, int which) {
  const fth_layout *l = &p->layout;
  switch (which) {
  case FTH_SD_TP: return l->tp;
  case FTH_SD_TP_MOE: return l->tp_moe;
  case FTH_SD_CP: return l->cp;
  case FTH_SD_DP: return l->dp;
  case FTH_SD_DP_MOE: return l->dp_moe;
  case FTH_SD_EP: return l->ep;
  case FTH_SD_EP_SU: return l->ep_su;
  case FTH_SD_EP_SO: return l->ep_so;
  case FTH_SD_PP: return l->pp;
  case FTH_SD_LAYERS_PER_STAGE: return l->layers_per_stage;
  case FTH_SD_GPUS: return l->num_gpus;
  case FTH_SD_MICROBATCHES: return p->microbatches;
  case FTH_SD_LOCAL_EXPERTS: return l->local_experts;
  case FTH_SD_PARAMS_TOTAL: return l->params.total;
  case FTH_SD_PARAMS_ACTIVE: return l->params.active;
  default: return NAN;
  }
}

/* report.training_record's ratios, term by term in its order */
static double ratio(const fth_train_result *r, int which) {
  double compute_total = r->compute_s > 0 ? r->compute_s : 1;
  switch (which) {
  case 0: {
    double raw = 0;
    for (int k = 0; k < FTH_COMM_KIND_COUNT; k++) raw = raw + r->comm[k].raw_s;
    return raw / compute_total;
  }
  case 1: return r->exposed_comm_s / r->step_time_s;
  case 2: {
    double mem_t = 0;
    for (int p = 0; p < FTH_FLOP_PART_COUNT; p++) mem_t = mem_t + r->fwd_memory_s[p] + r->bwd_memory_s[p];
    return mem_t * r->microbatches / compute_total;
  }
  default: return r->compute_s / r->step_time_s;
  }
}

double fth_sweep_number(const fth_sweep_point *p, const fth_sweep_column *col) {
  const fth_train_result *r = &p->result;
  int b = col->b, c = col->c;
  switch ((fth_sweep_value)col->a) {
  case FTH_SV_STEP_TIME: return r->step_time_s;
  case FTH_SV_TOTAL_TIME: return r->total_time_s;
  case FTH_SV_STEPS: return r->steps;
  case FTH_SV_TOKENS_PER_STEP: return r->tokens_per_step;
  case FTH_SV_TOKENS_PER_S: return r->tokens_per_s;
  case FTH_SV_MFU: return r->mfu;
  case FTH_SV_HFU: return r->hfu;
  case FTH_SV_ACHIEVED_FLOPS: return r->achieved_flops_per_gpu;
  case FTH_SV_COMPUTE_S: return r->compute_s;
  case FTH_SV_MEMORY_EXPOSED_S: return r->memory_exposed_s;
  case FTH_SV_RECOMPUTE_S: return r->recompute_s;
  case FTH_SV_BUBBLE_S: return r->bubble_s;
  case FTH_SV_OPTIMIZER_S: return r->optimizer_s;
  case FTH_SV_OFFLOAD_EXPOSED_S: return r->offload_exposed_s;
  case FTH_SV_DP_INTERFERENCE_S: return r->dp_interference_s;
  case FTH_SV_BUBBLE_FRACTION: return r->bubble_fraction;
  case FTH_SV_COMM:
    if (b < 0 || b >= FTH_COMM_KIND_COUNT) return NAN;
    return comm_field(&r->comm[b], c);
  case FTH_SV_PART:
    if (b < 0 || b > 1 || c < 0 || c >= 4 * FTH_FLOP_PART_COUNT) return NAN;
    return part_field(r, b, c / 4, c % 4);
  case FTH_SV_PASS_SUM: {
    if (b < 0 || b > 1 || c < 0 || c > 3) return NAN;
    double s = 0;
    for (int part = 0; part < FTH_FLOP_PART_COUNT; part++) s = s + part_field(r, b, part, c);
    return s;
  }
  case FTH_SV_RATIO: return ratio(r, b);
  case FTH_SV_COMPONENT:
    if (b < 0 || b >= FTH_MEM_COMPONENT_COUNT) return NAN;
    return r->mem.bytes[b];
  case FTH_SV_TIER:
    if (b < 0 || b >= FTH_TIER_COUNT) return NAN;
    switch (c) {
    case 0: return r->mem.tier_bytes[b];
    case 1: return r->mem.tier_capacity[b];
    case 2: return r->mem.tier_capacity[b] - r->mem.tier_bytes[b];
    default: return r->mem.tier_fits[b] ? 1 : 0;
    }
  case FTH_SV_PEAK_BYTES: return r->mem.peak_bytes;
  case FTH_SV_HEADROOM_BYTES: return r->mem.tier_capacity[FTH_TIER_XPU] - r->mem.tier_bytes[FTH_TIER_XPU];
  case FTH_SV_FITS: return r->mem.fits ? 1 : 0;
  case FTH_SV_DEGREE: return degree(&p->plan, b);
  case FTH_SV_WORK:
    switch (b) {
    case 0: return p->plan.work.global_batch;
    case 1: return p->plan.work.micro_batch;
    default: return p->plan.work.seq_len;
    }
  case FTH_SV_GOODPUT:
    switch (b) {
    case 0: return p->gp.expected_time_s;
    case 1: return p->gp.goodput;
    case 2: return p->gp.failures;
    case 3: return p->gp.system_mtbf_s;
    case 4: return p->gp.interval_s;
    case 5: return p->gp.checkpoint_write_s;
    case 6: return p->gp.energy_j / 3.6e6; /* report.training_record's kWh */
    default: return p->gp.cost;
    }
  case FTH_SV_OVERFLOW_TIER:
  case FTH_SV_COUNT: break;
  }
  return NAN;
}

const char *fth_sweep_name(const fth_sweep_point *p, const fth_sweep_column *col, const char *const *fabric,
                           int n_fabric) {
  const fth_train_result *r = &p->result;
  if (col->a == FTH_SV_OVERFLOW_TIER) return r->mem.fits ? "" : fth_tier_name(r->mem.overflow_tier);
  if (col->a != FTH_SV_COMM || col->b < 0 || col->b >= FTH_COMM_KIND_COUNT) return "";
  const fth_comm_item *c = &r->comm[col->b];
  switch (col->c) {
  case FTH_SC_OP: return fth_coll_op_name(c->op);
  case FTH_SC_ALGORITHM: return fth_coll_algo_name(c->algo);
  case FTH_SC_FABRIC:
    if (fabric && c->phys_dim >= 0 && c->phys_dim < n_fabric && fabric[c->phys_dim]) return fabric[c->phys_dim];
    return "";
  default: return "";
  }
}

int fth_sweep_finite(const fth_sweep_point *p, const fth_sweep_column *cols, int n_cols) {
  for (int i = 0; i < n_cols; i++)
    if (cols[i].src == FTH_SWEEP_SRC_RESULT && !isfinite(fth_sweep_number(p, &cols[i]))) return 0;
  return 1;
}

int fth_sweep_format_number(char *buf, size_t cap, double x, int as_integer) {
  if (cap < 32) return 0;
  if (isnan(x)) return snprintf(buf, cap, "nan");
  if (isinf(x)) return snprintf(buf, cap, x > 0 ? "inf" : "-inf");
  if (x == 0) {
    if (signbit(x)) *buf++ = '-';
    buf[0] = '0';
    buf[1] = '\0';
    return signbit(x) ? 2 : 1;
  }
  if (as_integer && x == floor(x) && fabs(x) < 9223372036854775808.0) return fth_numtext_int(buf, (long long)x);
  /* integral and below 10^15: %.15g writes its digits */
  if (x == floor(x) && fabs(x) < 1e15) return fth_numtext_int(buf, (long long)x);
  /* fathom.format.util.number's rule: the first of %.15g, %.16g, %.17g that reads back */
  return fth_numtext(buf, x);
}
