/* test_footprint.c: the per-GPU reserve (fth_mem_reserve): the runtime
 * context and the allocator's fragmentation as footprint components, their
 * tier, their part in `fits`, and their checks. Every expected value is a
 * hand calculation in the comment above it. */
#include <math.h>
#include <string.h>

#include "fth_footprint.h"
#include "test_macros.h"

static fth_node_def node_80gb(void) {
  fth_node_def n = fth_node_def_default();
  n.has_tier[FTH_TIER_XPU] = 1;
  n.tier[FTH_TIER_XPU].size_per_stack_bytes = 80e9;
  n.tier[FTH_TIER_XPU].num_stacks = 1;
  n.has_tier[FTH_TIER_HOST] = 1;
  n.tier[FTH_TIER_HOST].size_per_stack_bytes = 512e9;
  n.tier[FTH_TIER_HOST].num_stacks = 1;
  return n;
}

/* Weights 10, gradients 20, optimizer 30, saved activations 12, transient
 * peaks 3 (forward) and 5 (backward), all GB, on HBM. */
static void fill(fth_memory_footprint *fp) {
  memset(fp, 0, sizeof *fp);
  const double gb[] = {10, 20, 30, 12, 3, 5, 0};
  for (int c = 0; c < 7; c++) fp->bytes[c] = gb[c] * 1e9;
}

int footprint_test(void) {
  fth_node_def n = node_80gb();
  fth_tier tier_of[FTH_MEM_COMPONENT_COUNT];
  for (int c = 0; c < FTH_MEM_COMPONENT_COUNT; c++) tier_of[c] = FTH_TIER_XPU;
  fth_error err;

  /* Defaults: 1 GiB of context, 5% fragmentation. */
  fth_mem_reserve r = fth_mem_reserve_default();
  FTH_ENSURE_NEAR(1073741824.0, r.context_bytes, 0);
  FTH_ENSURE_NEAR(0.05, r.fragmentation, 0);
  FTH_ENSURE(fth_mem_reserve_check(&r, tier_of, &err) == FTH_OK);

  /* Dynamic = activations 12 + max(3, 5) = 17 GB; fragmentation 0.05 x 17 =
   * 0.85 GB; HBM = 10 + 20 + 30 + 12 + 5 + 0.85 + 1.073741824 = 78.923741824
   * GB, within 80 GB. */
  fth_memory_footprint fp;
  fill(&fp);
  fth_footprint_reserve(&fp, &r, tier_of);
  FTH_ENSURE_NEAR(1073741824.0, fp.bytes[FTH_MEM_RUNTIME_CONTEXT], 1e-12);
  FTH_ENSURE_NEAR(0.85e9, fp.bytes[FTH_MEM_FRAGMENTATION], 1e-12);
  fth_footprint_place(&fp, &n, tier_of);
  FTH_ENSURE_NEAR(78.923741824e9, fp.tier_bytes[FTH_TIER_XPU], 1e-12);
  FTH_ENSURE_NEAR(78.923741824e9, fp.peak_bytes, 1e-12);
  FTH_ENSURE(fp.fits);

  /* A 2.5 GB reserve: 77.85 + 2.5 = 80.35 GB, over the 80 GB the plan would
   * fit in without it. */
  r.context_bytes = 2.5e9;
  fill(&fp);
  fth_footprint_reserve(&fp, &r, tier_of);
  fth_footprint_place(&fp, &n, tier_of);
  FTH_ENSURE_NEAR(80.35e9, fp.tier_bytes[FTH_TIER_XPU], 1e-12);
  FTH_ENSURE(!fp.fits && fp.overflow_tier == FTH_TIER_XPU);

  /* No reserve: the footprint of before, 77 GB. */
  r.context_bytes = 0;
  r.fragmentation = 0;
  fill(&fp);
  fth_footprint_reserve(&fp, &r, tier_of);
  fth_footprint_place(&fp, &n, tier_of);
  FTH_ENSURE_NEAR(77e9, fp.tier_bytes[FTH_TIER_XPU], 1e-12);

  /* Activations offloaded to host: only the transient peak (5 GB) fragments
   * HBM, 0.05 x 5 = 0.25 GB; HBM = 10 + 20 + 30 + 5 + 0.25 + 1 GiB. */
  r = fth_mem_reserve_default();
  tier_of[FTH_MEM_ACTIVATIONS] = FTH_TIER_HOST;
  fill(&fp);
  fth_footprint_reserve(&fp, &r, tier_of);
  FTH_ENSURE_NEAR(0.25e9, fp.bytes[FTH_MEM_FRAGMENTATION], 1e-12);
  fth_footprint_place(&fp, &n, tier_of);
  FTH_ENSURE_NEAR(65.25e9 + 1073741824.0, fp.tier_bytes[FTH_TIER_XPU], 1e-12);
  FTH_ENSURE_NEAR(12e9, fp.tier_bytes[FTH_TIER_HOST], 1e-12);
  tier_of[FTH_MEM_ACTIVATIONS] = FTH_TIER_XPU;

  /* The largest serving batch sees the reserve: weights 10 GB and a 4 GB
   * transient on an 80 GB HBM with 1 GiB of context and 0.05 x 4 = 0.2 GB of
   * fragmentation leave 80 - 10 - 4 - 0.2 - 1.073741824 = 64.726258176 GB
   * for KV: 8 requests of 8 GB (as without the reserve), 64 of 1 GB (66
   * without it: 80 - 10 - 4). */
  memset(&fp, 0, sizeof fp);
  fp.bytes[FTH_MEM_WEIGHTS] = 10e9;
  fp.bytes[FTH_MEM_TRANSIENT_FWD] = 4e9;
  fth_footprint_reserve(&fp, &r, tier_of);
  fth_footprint_place(&fp, &n, tier_of);
  FTH_ENSURE_NEAR(8.0, fth_footprint_room_units(&fp, tier_of, FTH_MEM_KV_CACHE, 8e9), 0);
  FTH_ENSURE_NEAR(64.0, fth_footprint_room_units(&fp, tier_of, FTH_MEM_KV_CACHE, 1e9), 0);

  /* Checks: bytes >= 0, fraction in [0, 1), the reserve on the accelerator. */
  r.context_bytes = -1;
  FTH_ENSURE(fth_mem_reserve_check(&r, tier_of, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "memory_reserve_bytes") == 0);
  r = fth_mem_reserve_default();
  r.fragmentation = 1.0;
  FTH_ENSURE(fth_mem_reserve_check(&r, tier_of, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "memory_fragmentation_fraction") == 0);
  r.fragmentation = NAN;
  FTH_ENSURE(fth_mem_reserve_check(&r, tier_of, &err) == FTH_EINVAL);
  r = fth_mem_reserve_default();
  tier_of[FTH_MEM_RUNTIME_CONTEXT] = FTH_TIER_HOST;
  FTH_ENSURE(fth_mem_reserve_check(&r, tier_of, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "memory_device_map_footprint") == 0);

  /* Names. */
  FTH_ENSURE(strcmp(fth_mem_component_name(FTH_MEM_RUNTIME_CONTEXT), "runtime_context") == 0);
  FTH_ENSURE(fth_mem_component_parse("allocator_fragmentation") == FTH_MEM_FRAGMENTATION);
  return 0;
}
