/* fth_hardware.c: effective rates and capacities of one accelerator. */
#include "fth_hardware.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

fth_precision fth_precision_from_bytes(double bytes) {
  if (bytes == 1.0) return FTH_PREC_FP8;
  if (bytes == 2.0) return FTH_PREC_BF16;
  return FTH_PREC_FP32;
}

fth_compute_def fth_compute_def_default(void) {
  fth_compute_def d;
  memset(&d, 0, sizeof d);
  d.efficiency = 1.0;
  return d;
}

static int fraction_ok(double x) {
  return isfinite(x) && x > 0.0 && x <= 1.0;
}
static int nonneg_ok(double x) {
  return isfinite(x) && x >= 0.0;
}

fth_status fth_compute_check(const fth_compute_def *d, fth_error *err) {
  static const char *const names[FTH_PREC_COUNT] = {"fp8_nominal", "bf16_nominal", "fp32_nominal"};
  for (int i = 0; i < FTH_PREC_COUNT; i++)
    if (!nonneg_ok(d->flops_per_s[i]))
      return fth_fail(err, FTH_EINVAL, names[i], "expected a FLOP/s rate >= 0, got %g",
                      d->flops_per_s[i]);
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
  if (!nonneg_ok(d->gemm_tile_m) || !nonneg_ok(d->gemm_tile_n))
    return fth_fail(err, FTH_EINVAL, "gemm_tile", "expected sizes >= 0");
  if (!nonneg_ok(d->vector_flops_per_s))
    return fth_fail(err, FTH_EINVAL, "vector_nominal", "expected >= 0, got %g",
                    d->vector_flops_per_s);
  return FTH_OK;
}

double fth_compute_flops_per_s(const fth_compute_def *d, fth_precision prec) {
  /* A precision without tensor-core support runs at the next wider one's rate. */
  for (int p = (int)prec; p < FTH_PREC_COUNT; p++)
    if (d->flops_per_s[p] > 0) return d->flops_per_s[p] * d->efficiency;
  return 0.0;
}

double fth_compute_attention_flops_per_s(const fth_compute_def *d, fth_precision prec) {
  double f = fth_compute_flops_per_s(d, prec);
  if (d->attention_efficiency > 0 && d->efficiency > 0)
    f *= d->attention_efficiency / d->efficiency;
  return f;
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
  return d->bw_per_stack_bytes_per_s * (double)d->num_stacks * d->efficiency;
}

double fth_memory_capacity_bytes(const fth_memory_def *d) {
  return d->size_per_stack_bytes * (double)d->num_stacks;
}

fth_link_def fth_link_def_default(void) {
  fth_link_def d;
  memset(&d, 0, sizeof d);
  d.num_links = 1;
  d.efficiency = 1.0;
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
  return FTH_OK;
}

double fth_link_bw_bytes_per_s(const fth_link_def *d) {
  return d->bw_bytes_per_s * (double)d->num_links * d->efficiency;
}

fth_node_def fth_node_def_default(void) {
  fth_node_def n;
  memset(&n, 0, sizeof n);
  n.compute = fth_compute_def_default();
  for (int t = 0; t < FTH_TIER_COUNT; t++) n.tier[t] = fth_memory_def_default();
  return n;
}

fth_status fth_node_check(const fth_node_def *n, fth_error *err) {
  if (fth_compute_check(&n->compute, err) != FTH_OK) return fth_error_prefix(err, "device_compute");
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
  for (int i = 0; i < FTH_TIER_COUNT; i++)
    if (strcmp(name, tier_names[i]) == 0) return (fth_tier)i;
  return FTH_TIER_COUNT;
}
