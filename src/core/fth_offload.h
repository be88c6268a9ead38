/* fth_offload.h: training state kept in a slower memory tier (host DRAM,
 * pooled memory, NVMe) instead of the accelerator's, and what that costs.
 * Three things can move, each to any tier the node has:
 *
 *   weights      stored there and read from there: every kernel's weight
 *                operand streams in at that tier's bandwidth, overlapped with
 *                the kernel's compute as comp_mem_efficiency allows (the
 *                per-block prefetch of ZeRO-Infinity, Rajbhandari et al. 2021
 *                Sec. 5, and Calculon, Isaev et al. 2023 Sec. 3: the next
 *                block's weights arrive while this one computes); their
 *                gradients are accumulated there too (ZeRO-Offload, Ren et al.
 *                2021 Sec. 4: gradients go to CPU memory): each micro-batch's
 *                leave during the backward, added to the sum (read and
 *                written back but for the first). The accelerator holds two
 *                blocks' weights and gradients in flight.
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
 * transient peak) and the activation and gradient transfers
 * (fth_offload_transfers). */
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

/// Write `o` into a workload's tier maps: weights and their gradients stored
/// in the weights' tier, weights read from there; saved activations stored in
/// theirs (read from the accelerator once copied back); optimizer states stored
/// and read in theirs. Other components are left as they are.
void fth_offload_apply(const fth_offload *o, fth_tier footprint_tier[FTH_MEM_COMPONENT_COUNT],
                       fth_tier traffic_tier[FTH_MEM_COMPONENT_COUNT]);

/// Accelerator bytes the streaming needs: two blocks' weights and gradients
/// when they are offloaded (the block computing and the one in transit) and
/// two blocks' saved activations of a micro-batch when those are (the one
/// leaving and the one arriving). `weight_bytes`, `grad_bytes`: the stage's on
/// one GPU; `act_bytes_per_mb`: its saved activations of one micro-batch;
/// `blocks`: blocks on the stage (>= 1). Calculon's rule (Isaev et al. 2023:
/// "tier 1 only needs ~2 blocks' worth of the offloaded item"), capped at the
/// whole.
double fth_offload_buffer_bytes(const fth_tier footprint_tier[FTH_MEM_COMPONENT_COUNT],
                                double weight_bytes, double grad_bytes, double act_bytes_per_mb,
                                double blocks);

/// What a step's offload moves over the tiers' links and what of it the step
/// waits for. Saved activations (`act_tier`): each of `microbatches`
/// micro-batches' `act_bytes_per_mb` goes out and comes back, 2 m A bytes.
/// Gradients (`grad_tier`): `grad_bytes` written once and, for every later
/// micro-batch, read and written back, (2 m - 1) G bytes. Each at its tier's
/// bandwidth (`act_bw`, `grad_bw`, bytes/s); the sum hides under `busy_s` of
/// compute as far as `comp_comm_eff` allows (exposed = max(0, raw - e busy):
/// Calculon's offload overhead, max(0, transfer - window)). A part on the
/// accelerator moves nothing; a tier without bandwidth never finishes
/// (HUGE_VAL).
void fth_offload_transfers(fth_tier act_tier, double act_bytes_per_mb, double act_bw,
                           fth_tier grad_tier, double grad_bytes, double grad_bw,
                           double microbatches, double busy_s, double comp_comm_eff, double *raw_s,
                           double *exposed_s);

#endif
