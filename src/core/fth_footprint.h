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
  FTH_MEM_GRADIENTS,       ///< `gradient_buffers`
  FTH_MEM_OPTIMIZER,       ///< `optimizer_states`
  FTH_MEM_ACTIVATIONS,     ///< `saved_activations`
  FTH_MEM_TRANSIENT_FWD,   ///< `transient_forward_peak`
  FTH_MEM_TRANSIENT_BWD,   ///< `transient_backward_peak`
  FTH_MEM_KV_CACHE,        ///< inference only
  FTH_MEM_RUNTIME_CONTEXT, ///< `runtime_context`: the reserve's fixed part (fth_mem_reserve)
  FTH_MEM_FRAGMENTATION,   ///< `allocator_fragmentation`: the reserve's proportional part
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

/// The per-GPU memory a step model does not derive from the workload but a
/// real run loses all the same (issue 17): the runtime's own allocations and
/// the caching allocator's slack. Both count on the accelerator's tier.
typedef struct fth_mem_reserve {
  /// `memory_reserve_bytes`: bytes per GPU the CUDA/ROCm context and the
  /// libraries' workspaces hold (cuBLAS/cuDNN workspaces, NCCL buffers).
  double context_bytes;
  /// `memory_fragmentation_fraction`: share of the dynamic footprint (saved
  /// activations and the transient peak placed on the accelerator) the
  /// caching allocator holds but cannot hand out, in [0, 1).
  double fragmentation;
} fth_mem_reserve;

/// Defaults: context_bytes = FTH_RUNTIME_CONTEXT_BYTES, fragmentation =
/// FTH_ALLOCATOR_FRAGMENTATION (sources in fth_footprint.c).
fth_mem_reserve fth_mem_reserve_default(void);

/// Range checks (context_bytes finite and >= 0, fragmentation in [0, 1)) and
/// that the reserve's components are stored on the accelerator; paths are the
/// workload's keys.
fth_status fth_mem_reserve_check(const fth_mem_reserve *r,
                                 const fth_tier tier_of[FTH_MEM_COMPONENT_COUNT], fth_error *err);

/// Fill the reserve's components of `fp` from `r` and the dynamic components
/// already in `fp->bytes` that `tier_of` places on the accelerator. Call before
/// fth_footprint_place.
void fth_footprint_reserve(fth_memory_footprint *fp, const fth_mem_reserve *r,
                           const fth_tier tier_of[FTH_MEM_COMPONENT_COUNT]);

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
