/* fth_footprint.c: components -> tiers -> fits (fth_footprint.h). */
#include "fth_footprint.h"

#include <math.h>
#include <string.h>

static const char *const mem_names[FTH_MEM_COMPONENT_COUNT] = {
    "weights",           "gradient_buffers",       "optimizer_states",
    "saved_activations", "transient_forward_peak", "transient_backward_peak",
    "kv_cache"};

const char *fth_mem_component_name(fth_mem_component c) {
  return (c >= 0 && c < FTH_MEM_COMPONENT_COUNT) ? mem_names[c] : NULL;
}

/* ScaleScope's shorter spellings. */
static const fth_name_alias mem_aliases[] = {
    {"activations", FTH_MEM_ACTIVATIONS}, {"gradients", FTH_MEM_GRADIENTS}, {NULL, 0}};

const fth_name_alias *fth_mem_component_aliases(void) {
  return mem_aliases;
}

fth_mem_component fth_mem_component_parse(const char *name) {
  for (int i = 0; i < FTH_MEM_COMPONENT_COUNT; i++)
    if (strcmp(name, mem_names[i]) == 0) return (fth_mem_component)i;
  for (const fth_name_alias *a = mem_aliases; a->alias != NULL; a++)
    if (strcmp(name, a->alias) == 0) return (fth_mem_component)a->value;
  return FTH_MEM_COMPONENT_COUNT;
}

void fth_footprint_place(fth_memory_footprint *fp, const fth_node_def *node,
                         const fth_tier tier_of[FTH_MEM_COMPONENT_COUNT]) {
  for (int t = 0; t < FTH_TIER_COUNT; t++) {
    fp->tier_capacity[t] = node->has_tier[t] ? fth_memory_capacity_bytes(&node->tier[t]) : 0;
    fp->tier_bytes[t] = 0;
  }
  fp->peak_bytes = 0;
  for (int c = 0; c < FTH_MEM_COMPONENT_COUNT; c++) {
    if (c == FTH_MEM_TRANSIENT_FWD) continue;
    double b = fp->bytes[c];
    if (c == FTH_MEM_TRANSIENT_BWD) b = fth_max(b, fp->bytes[FTH_MEM_TRANSIENT_FWD]);
    fp->tier_bytes[tier_of[c]] += b;
    fp->peak_bytes += b;
  }
  fp->fits = 1;
  fp->overflow_tier = FTH_TIER_COUNT;
  for (int t = 0; t < FTH_TIER_COUNT; t++) {
    fp->tier_fits[t] = fp->tier_bytes[t] <= fp->tier_capacity[t];
    if (!fp->tier_fits[t] && fp->fits) {
      fp->fits = 0;
      fp->overflow_tier = (fth_tier)t;
    }
  }
}

double fth_footprint_room_units(const fth_memory_footprint *fp,
                                const fth_tier tier_of[FTH_MEM_COMPONENT_COUNT],
                                fth_mem_component c, double per_unit_bytes) {
  fth_tier t = tier_of[c];
  double room = fp->tier_capacity[t] - (fp->tier_bytes[t] - fp->bytes[c]);
  return per_unit_bytes > 0 ? floor(room / per_unit_bytes) : HUGE_VAL;
}
