/* fth_footprint.h: memory per accelerator. A step model fills the bytes of
 * each component; this file maps them to the tiers the workload names,
 * compares each tier with its capacity, finds the first tier that overflows
 * and the largest batch that fits. The one copy of those rules for training,
 * inference and whatever step model comes next. */
#ifndef FTH_FOOTPRINT_H
#define FTH_FOOTPRINT_H

#include "fth_common.h"
#include "fth_hardware.h"

/// Memory components that can be mapped to tiers.
typedef enum fth_mem_component {
  FTH_MEM_WEIGHTS = 0,
  FTH_MEM_GRADIENTS,     ///< `gradient_buffers`
  FTH_MEM_OPTIMIZER,     ///< `optimizer_states`
  FTH_MEM_ACTIVATIONS,   ///< `saved_activations`
  FTH_MEM_TRANSIENT_FWD, ///< `transient_forward_peak`
  FTH_MEM_TRANSIENT_BWD, ///< `transient_backward_peak`
  FTH_MEM_KV_CACHE,      ///< inference only
  FTH_MEM_COMPONENT_COUNT
} fth_mem_component;

const char *fth_mem_component_name(fth_mem_component c);     ///< YAML names
fth_mem_component fth_mem_component_parse(const char *name); ///< also "activations", "gradients"
const fth_name_alias *fth_mem_component_aliases(void);       ///< the other spellings it accepts

typedef struct fth_memory_footprint {
  double bytes[FTH_MEM_COMPONENT_COUNT]; ///< per GPU
  double tier_bytes[FTH_TIER_COUNT];     ///< sum of the components mapped to each tier
  double tier_capacity[FTH_TIER_COUNT];  ///< 0 where the node lacks the tier
  int tier_fits[FTH_TIER_COUNT];
  double peak_bytes;      ///< total over components (the chip's peak)
  int fits;               ///< every tier within capacity
  fth_tier overflow_tier; ///< first tier over capacity; FTH_TIER_COUNT if none
} fth_memory_footprint;

/// Place `fp->bytes` (filled by the caller) on the tiers `tier_of` names and
/// judge them against `node`'s capacities. The forward and backward transient
/// peaks do not coexist: the larger of the two counts.
void fth_footprint_place(fth_memory_footprint *fp, const fth_node_def *node,
                         const fth_tier tier_of[FTH_MEM_COMPONENT_COUNT]);

/// Units of `per_unit_bytes` of component `c` that fit in the room its tier
/// has once everything else on that tier is placed (HUGE_VAL when a unit
/// takes no room).
double fth_footprint_room_units(const fth_memory_footprint *fp,
                                const fth_tier tier_of[FTH_MEM_COMPONENT_COUNT],
                                fth_mem_component c, double per_unit_bytes);

#endif
