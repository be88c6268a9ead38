/* fth_hardware.c: effective rates and capacities of one accelerator. */
#include "fth_hardware.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const prec_names[FTH_PREC_COUNT] = {"fp8", "bf16", "fp32", "fp4"};
static const double prec_bytes[FTH_PREC_COUNT] = {1.0, 2.0, 4.0, 0.5};
/* The next wider precision, what a missing tensor-core rate falls back to. */
static const fth_precision wider[FTH_PREC_COUNT] = {FTH_PREC_BF16, FTH_PREC_FP32, FTH_PREC_COUNT,
                                                    FTH_PREC_FP8};

const char *fth_precision_name(fth_precision p) {
  return (p >= 0 && p < FTH_PREC_COUNT) ? prec_names[p] : NULL;
}

double fth_precision_bytes(fth_precision p) {
  return (p >= 0 && p < FTH_PREC_COUNT) ? prec_bytes[p] : 4.0;
}

/* Element width -> precision: 1 byte fp8, 2 bytes bf16/fp16, anything else fp32. */
fth_precision fth_precision_from_bytes(double bytes) {
  if (bytes == 1.0) return FTH_PREC_FP8;
  if (bytes == 2.0) return FTH_PREC_BF16;
  return FTH_PREC_FP32;
}

/* Every rate 0, so a default fails fth_compute_check until a bf16 or fp32 peak
 * is set. vector_flops_per_s 0 means "bf16 / 8" (applied by fth_kernel): H100's
 * non-tensor bf16 rate is about 1/8 of its tensor rate (134 of 989 TFLOP/s). */
fth_compute_def fth_compute_def_default(void) {
  fth_compute_def d;
  memset(&d, 0, sizeof d);
  d.efficiency = 1.0;
  d.dense_clock_fraction = 1.0;
  return d;
}

/* A fraction of nominal: finite, in (0, 1]. */
static int fraction_ok(double x) {
  return isfinite(x) && x > 0.0 && x <= 1.0;
}
/* A finite value >= 0 (rejects NaN and infinities). */
static int nonneg_ok(double x) {
  return isfinite(x) && x >= 0.0;
}

fth_status fth_compute_check(const fth_compute_def *d, fth_error *err) {
  static const char *const names[FTH_PREC_COUNT] = {"fp8_nominal", "bf16_nominal", "fp32_nominal",
                                                     "fp4_nominal"};
  static const char *const effs[FTH_PREC_COUNT] = {"fp8_efficiency", "bf16_efficiency",
                                                    "fp32_efficiency", "fp4_efficiency"};
  if (!(nonneg_ok(d->expert_gemm_s) && d->expert_gemm_s < 1.0))
    return fth_fail(err, FTH_EINVAL, "expert_gemm_overhead_sec",
                    "expected seconds in [0, 1), got %g", d->expert_gemm_s);
  if (!(nonneg_ok(d->expert_recipe_s) && d->expert_recipe_s < 1.0))
    return fth_fail(err, FTH_EINVAL, "expert_recipe_overhead_sec",
                    "expected seconds in [0, 1), got %g", d->expert_recipe_s);
  for (int i = 0; i < FTH_PREC_COUNT; i++) {
    if (!nonneg_ok(d->flops_per_s[i]))
      return fth_fail(err, FTH_EINVAL, names[i], "expected a FLOP/s rate >= 0, got %g",
                      d->flops_per_s[i]);
    if (!(d->prec_efficiency[i] == 0 || fraction_ok(d->prec_efficiency[i])))
      return fth_fail(err, FTH_EINVAL, effs[i], "expected a fraction in (0, 1], got %g",
                      d->prec_efficiency[i]);
  }
  if (!(d->flops_per_s[FTH_PREC_BF16] > 0 || d->flops_per_s[FTH_PREC_FP32] > 0))
    return fth_fail(err, FTH_EINVAL, "bf16_nominal",
                    "expected bf16_nominal or fp32_nominal > 0 (the peak FLOP/s)");
  if (!fraction_ok(d->efficiency))
    return fth_fail(err, FTH_EINVAL, "efficiency", "expected a fraction in (0, 1], got %g",
                    d->efficiency);
  if (!(d->attention_efficiency == 0.0 || fraction_ok(d->attention_efficiency)))
    return fth_fail(err, FTH_EINVAL, "attention_efficiency",
                    "expected a fraction in (0, 1] (or 0 for efficiency), got %g",
                    d->attention_efficiency);
  if (d->compute_units < 0)
    return fth_fail(err, FTH_EINVAL, "compute_units", "expected >= 0, got %d", d->compute_units);
  if (!nonneg_ok(d->gemm_tile_m))
    return fth_fail(err, FTH_EINVAL, "gemm_tile_m", "expected a tile size >= 0 (0 = 128), got %g",
                    d->gemm_tile_m);
  if (!nonneg_ok(d->gemm_tile_n))
    return fth_fail(err, FTH_EINVAL, "gemm_tile_n", "expected a tile size >= 0 (0 = 128), got %g",
                    d->gemm_tile_n);
  if (!(d->expert_lowp_fraction == 0 || fraction_ok(d->expert_lowp_fraction)))
    return fth_fail(err, FTH_EINVAL, "expert_gemm_fp8_fraction",
                    "expected a fraction in (0, 1] (0 = 1), got %g", d->expert_lowp_fraction);
  /* 64 KiB of K: far past any pipeline's fill (448 measured), a typo's guard */
  if (!(nonneg_ok(d->gemm_k_overhead_bytes) && d->gemm_k_overhead_bytes <= 65536))
    return fth_fail(err, FTH_EINVAL, "gemm_k_overhead_bytes",
                    "expected bytes of K in [0, 65536] (0 = none), got %g",
                    d->gemm_k_overhead_bytes);
  if (!nonneg_ok(d->power_watts))
    return fth_fail(err, FTH_EINVAL, "power_watts", "expected >= 0, got %g", d->power_watts);
  if (!nonneg_ok(d->power_limit_watts))
    return fth_fail(err, FTH_EINVAL, "power_limit_watts", "expected >= 0 (0 = none), got %g",
                    d->power_limit_watts);
  if (d->dense_clock_fraction != 0.0 && !fraction_ok(d->dense_clock_fraction))
    return fth_fail(err, FTH_EINVAL, "dense_clock_fraction",
                    "expected a fraction of the nominal clock in (0, 1] (0 = 1), got %g",
                    d->dense_clock_fraction);
  if (d->fp8_any_layout != 0 && d->fp8_any_layout != 1)
    return fth_fail(err, FTH_EINVAL, "fp8_any_layout", "expected 0 or 1, got %d", d->fp8_any_layout);
  if (!nonneg_ok(d->vector_flops_per_s))
    return fth_fail(err, FTH_EINVAL, "vector_nominal", "expected >= 0, got %g",
                    d->vector_flops_per_s);
  return FTH_OK;
}

/* The precision a kernel at `prec` really runs at: without tensor-core
 * support (zero nominal) the next wider one, fp4 -> fp8 -> bf16 -> fp32. */
static fth_precision runs_at(const fth_compute_def *d, fth_precision prec) {
  fth_precision p = (prec >= 0 && prec < FTH_PREC_COUNT) ? prec : FTH_PREC_FP32;
  while (p != FTH_PREC_COUNT && !(d->flops_per_s[p] > 0)) p = wider[p];
  return p;
}

double fth_compute_nominal_flops_per_s(const fth_compute_def *d, fth_precision prec) {
  fth_precision p = runs_at(d, prec);
  return p == FTH_PREC_COUNT ? 0.0 : d->flops_per_s[p];
}

double fth_compute_flops_per_s(const fth_compute_def *d, fth_precision prec) {
  /* Achievable GEMM rate = nominal x efficiency (the ScaleScope compute
   * component), the precision's own efficiency where the library declares one. */
  fth_precision p = runs_at(d, prec);
  if (p == FTH_PREC_COUNT) return 0.0;
  double eff = d->prec_efficiency[p] > 0 ? d->prec_efficiency[p] : d->efficiency;
  return d->flops_per_s[p] * eff * fth_compute_clock_scale(d);
}

double fth_compute_clock_scale(const fth_compute_def *d) {
  double held = d->dense_clock_fraction > 0 ? d->dense_clock_fraction : 1.0;
  if (!(d->power_limit_watts > 0 && d->power_watts > 0 && d->power_limit_watts < d->power_watts))
    return held;
  return held * cbrt(d->power_limit_watts / d->power_watts);
}

double fth_compute_attention_flops_per_s(const fth_compute_def *d, fth_precision prec) {
  /* Fused attention = nominal x attention_efficiency; unset (0) uses the GEMM efficiency. */
  double eff = d->attention_efficiency > 0 ? d->attention_efficiency : d->efficiency;
  return fth_compute_nominal_flops_per_s(d, prec) * eff * fth_compute_clock_scale(d);
}

fth_memory_def fth_memory_def_default(void) {
  fth_memory_def d;
  memset(&d, 0, sizeof d);
  d.num_stacks = 1;
  d.efficiency = 1.0;
  return d;
}

fth_status fth_memory_check(const fth_memory_def *d, fth_error *err) {
  if (!fth_positive(d->bw_per_stack_bytes_per_s))
    return fth_fail(err, FTH_EINVAL, "bandwidth_per_stack_nominal", "expected bytes/s > 0, got %g",
                    d->bw_per_stack_bytes_per_s);
  if (!fth_positive(d->size_per_stack_bytes))
    return fth_fail(err, FTH_EINVAL, "size_per_stack", "expected bytes > 0, got %g",
                    d->size_per_stack_bytes);
  if (d->num_stacks < 1)
    return fth_fail(err, FTH_EINVAL, "num_stack", "expected an integer >= 1, got %d",
                    d->num_stacks);
  if (!fraction_ok(d->efficiency))
    return fth_fail(err, FTH_EINVAL, "efficiency", "expected a fraction in (0, 1], got %g",
                    d->efficiency);
  return FTH_OK;
}

double fth_memory_bw_bytes_per_s(const fth_memory_def *d) {
  /* Effective bandwidth = per-stack nominal x stacks x efficiency (ScaleScope memory component). */
  return d->bw_per_stack_bytes_per_s * (double)d->num_stacks * d->efficiency;
}

double fth_memory_capacity_bytes(const fth_memory_def *d) {
  /* Capacity = per-stack size x stacks. */
  return d->size_per_stack_bytes * (double)d->num_stacks;
}

fth_link_def fth_link_def_default(void) {
  fth_link_def d;
  memset(&d, 0, sizeof d);
  d.num_links = 1;
  d.efficiency = 1.0;
  d.oversubscription = 1.0;
  return d;
}

fth_status fth_link_check(const fth_link_def *d, fth_error *err) {
  if (!fth_positive(d->bw_bytes_per_s))
    return fth_fail(err, FTH_EINVAL, "bandwidth_nominal",
                    "expected bytes/s per direction > 0, got %g", d->bw_bytes_per_s);
  if (d->num_links < 1)
    return fth_fail(err, FTH_EINVAL, "num_links", "expected an integer >= 1, got %d", d->num_links);
  if (!fraction_ok(d->efficiency))
    return fth_fail(err, FTH_EINVAL, "efficiency", "expected a fraction in (0, 1], got %g",
                    d->efficiency);
  if (!nonneg_ok(d->latency_s))
    return fth_fail(err, FTH_EINVAL, "latency_sec", "expected seconds >= 0, got %g", d->latency_s);
  if (!(d->oversubscription >= 1.0 && isfinite(d->oversubscription)))
    return fth_fail(err, FTH_EINVAL, "oversubscription",
                    "expected a ratio >= 1 (1: full bisection), got %g", d->oversubscription);
  if (d->leaf_xpus < 0)
    return fth_fail(err, FTH_EINVAL, "leaf_size_xpus", "expected an integer >= 0, got %d",
                    d->leaf_xpus);
  return FTH_OK;
}

double fth_link_bw_bytes_per_s(const fth_link_def *d) {
  /* Per-GPU bandwidth per direction = per-link nominal x links x efficiency
   * (direction convention in fth_hardware.h). */
  return d->bw_bytes_per_s * (double)d->num_links * d->efficiency;
}

fth_node_def fth_node_def_default(void) {
  fth_node_def n;
  memset(&n, 0, sizeof n);
  n.compute = fth_compute_def_default();
  for (int t = 0; t < FTH_TIER_COUNT; t++) n.tier[t] = fth_memory_def_default();
  n.host_op_factor = 1.0;
  return n;
}

fth_status fth_node_check(const fth_node_def *n, fth_error *err) {
  if (fth_compute_check(&n->compute, err) != FTH_OK) return fth_error_prefix(err, "device_compute");
  if (!(n->host_op_factor > 0 && n->host_op_factor <= 10))
    return fth_fail(err, FTH_EINVAL, "host_op_time_factor",
                    "expected the host's time per operator over an x86 server's in (0, 10], got %g",
                    n->host_op_factor);
  if (!n->has_tier[FTH_TIER_XPU])
    return fth_fail(err, FTH_EINVAL, "device_memory_tiers.xpu_memory",
                    "missing (every node needs its accelerator memory)");
  for (int t = 0; t < FTH_TIER_COUNT; t++) {
    if (!n->has_tier[t]) continue;
    if (fth_memory_check(&n->tier[t], err) != FTH_OK) {
      char prefix[64];
      snprintf(prefix, sizeof prefix, "device_memory_tiers.%s", fth_tier_name((fth_tier)t));
      return fth_error_prefix(err, prefix);
    }
  }
  return FTH_OK;
}

static const char *const tier_names[FTH_TIER_COUNT] = {"xpu_memory", "host_memory", "remote_memory",
                                                       "nvme"};

const char *fth_tier_name(fth_tier t) {
  return (t >= 0 && t < FTH_TIER_COUNT) ? tier_names[t] : NULL;
}

fth_tier fth_tier_parse(const char *name) {
  if (name == NULL) return FTH_TIER_COUNT;
  for (int i = 0; i < FTH_TIER_COUNT; i++)
    if (strcmp(name, tier_names[i]) == 0) return (fth_tier)i;
  return FTH_TIER_COUNT;
}
