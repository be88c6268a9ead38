/* fth_offload.h: training state kept in a slower memory tier (host DRAM,
 * pooled memory, NVMe) instead of the accelerator's, and what that costs.
 * Three things can move, each to any tier the node has:
 *
 *   weights      stored there and read from there: every kernel's weight
 *                operand streams in at that tier's bandwidth, overlapped with
 *                the kernel's compute as comp_mem_efficiency allows (the
 *                per-block prefetch of ZeRO-Infinity, Rajbhandari et al. 2021
 *                Sec. 5, and Calculon, Isaev et al. 2023 Sec. 3: the next
 *                block's weights arrive while this one computes); the
 *                accelerator holds two blocks' weights in flight.
 *   activations  the saved activations go out during the forward and come
 *                back during the backward, hidden under the step's compute as
 *                comp_comm_efficiency allows; two blocks' worth in flight.
 *   optimizer    the optimizer states stay there; the optimizer step streams
 *                them through the accelerator at that tier's bandwidth.
 *
 * The choice is a workload's tier map (fth_train_def footprint_tier /
 * traffic_tier): fth_offload_apply writes it, so a compiled plan, the
 * footprint and the step read one source. The costs live here: the
 * accelerator-side buffers (fth_offload_buffer_bytes, counted in the
 * transient peak) and the activation transfers (fth_offload_activations). */
#ifndef FTH_OFFLOAD_H
#define FTH_OFFLOAD_H

#include "fth_footprint.h"
#include "fth_hardware.h"

/// Where each offloadable part of the training state lives.
typedef struct fth_offload {
  fth_tier weights;     ///< FTH_TIER_XPU: not offloaded
  fth_tier activations; ///< saved activations
  fth_tier optimizer;   ///< optimizer states (master weights and moments)
} fth_offload;

/// Nothing offloaded.
fth_offload fth_offload_none(void);

/// Write `o` into a workload's tier maps: weights stored and read in their
/// tier; saved activations stored in theirs (read from the accelerator once
/// copied back); optimizer states stored and read in theirs. Other components
/// are left as they are.
void fth_offload_apply(const fth_offload *o, fth_tier footprint_tier[FTH_MEM_COMPONENT_COUNT],
                       fth_tier traffic_tier[FTH_MEM_COMPONENT_COUNT]);

/// Accelerator bytes the streaming needs: two blocks' weights when weights
/// are offloaded (the block computing and the one arriving) and two blocks'
/// saved activations of a micro-batch when activations are (the one leaving
/// and the one arriving). `weight_bytes`: the stage's weights on one GPU;
/// `act_bytes_per_mb`: its saved activations of one micro-batch; `blocks`:
/// blocks on the stage (>= 1). Calculon's rule (Isaev et al. 2023: "tier 1
/// only needs ~2 blocks' worth of the offloaded item"), capped at the whole.
double fth_offload_buffer_bytes(const fth_tier footprint_tier[FTH_MEM_COMPONENT_COUNT],
                                double weight_bytes, double act_bytes_per_mb, double blocks);

/// Activation transfers of a step: each of `microbatches` micro-batches'
/// `act_bytes_per_mb` goes out and comes back over the tier's bandwidth
/// `tier_bw_bytes_per_s` (raw = 2 m A / bw), hidden under `busy_s` of compute
/// as far as `comp_comm_eff` allows (exposed = max(0, raw - e busy): Calculon's
/// offload overhead, max(0, transfer - window)). raw = exposed = 0 when the
/// tier is the accelerator's; HUGE_VAL when the tier has no bandwidth.
void fth_offload_activations(fth_tier tier, double act_bytes_per_mb, double microbatches,
                             double tier_bw_bytes_per_s, double busy_s, double comp_comm_eff,
                             double *raw_s, double *exposed_s);

#endif
