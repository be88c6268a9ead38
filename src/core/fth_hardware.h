/* fth_hardware.h: compute, memory tiers and interconnects of one accelerator.
 *
 * Direction convention (used everywhere in fathom): every interconnect
 * bandwidth is bytes/s PER DIRECTION PER LINK (what one GPU can send while it
 * also receives the same amount). Vendors often quote bidirectional totals
 * (NVLink4 "900 GB/s" = 450 GB/s each way); configs convert and say so. */
#ifndef FTH_HARDWARE_H
#define FTH_HARDWARE_H

#include "fth_common.h"

/// Numeric precisions with their own peak rate.
typedef enum fth_precision {
  FTH_PREC_FP8 = 0,
  FTH_PREC_BF16 = 1, ///< also fp16
  FTH_PREC_FP32 = 2,
  FTH_PREC_FP4 = 3, ///< NVFP4 / MXFP4 tensor cores (Blackwell, MI355X)
  FTH_PREC_COUNT
} fth_precision;

/// Map a byte width (1, 2, 4) to a precision; other widths map to FP32.
fth_precision fth_precision_from_bytes(double bytes);
const char *fth_precision_name(fth_precision p); ///< "fp8", "bf16", "fp32", "fp4"
/// Bytes of one element at `p` (fp4: 0.5).
double fth_precision_bytes(fth_precision p);

/// One accelerator's arithmetic (ScaleScope `compute` component).
typedef struct fth_compute_def {
  double flops_per_s[FTH_PREC_COUNT]; ///< nominal dense peak, FLOP/s (fp8, bf16, fp32, fp4)
  double efficiency;                  ///< achievable fraction of nominal for large GEMMs, (0, 1]
  /// Per precision, where it differs from `efficiency` (0 = efficiency): narrow
  /// GEMMs reach a smaller fraction of their peak (H100, measured: BF16 0.72,
  /// FP8 0.67 of nominal at large M; validation/measurements/).
  double prec_efficiency[FTH_PREC_COUNT];
  /// Fixed cost per expert of a grouped (multi-expert) GEMM kernel, seconds:
  /// scheduling the tiles of many small problems (H100, torch._grouped_mm,
  /// measured: ~0.8 us per expert; validation/measurements/COMPARISON.md Sec. 2).
  double expert_gemm_s;
  /// Further fixed cost per expert of a grouped GEMM under an FP8/FP4 training recipe,
  /// seconds: the quantisation kernels (amax or block scales) and the GEMM call a
  /// training stack runs for each local expert on its own (Transformer Engine's grouped
  /// linear, multi-stream cuBLAS; on Blackwell fitted: validation/fit_megatron_bridge.lua).
  /// Not paid where one fused grouped kernel runs the experts (grouped_expert_kernel). 0 = none.
  double expert_recipe_s;
  /// Share of the dense FP8/FP4 GEMM rate a grouped expert GEMM at that precision
  /// reaches, in (0, 1] (0 = 1): per-group scales and problem setup the dense kernel
  /// does not pay (H100, measured: FP8 `_scaled_grouped_mm` 0.91 of dense FP8 against
  /// the model at >= 2,048 tokens per expert, where BF16 `_grouped_mm` keeps 0.97 of dense
  /// BF16; validation/measurements/COMPARISON.md Sec. 2b).
  double expert_lowp_fraction;
  double vector_flops_per_s;          ///< non-tensor-core rate for element-wise ops; 0 = bf16/8
  double attention_efficiency;     ///< fraction of nominal fused attention reaches; 0 = efficiency
  int compute_units;               ///< SMs (NVIDIA) / CUs (AMD); 0 = unknown (roofline only)
  double gemm_tile_m, gemm_tile_n; ///< output tile of the GEMM library (0 = 128 x 128)
  /// Fixed cost of one output tile (pipeline fill, epilogue), as the depth of K in bytes
  /// its main loop would stream in that time: a tile of depth k costs k + this / element
  /// bytes. H100, measured (validation/measurements/, cuBLAS and _scaled_mm, M, N >= 2048):
  /// ~225 BF16 and 325-475 FP8 elements, 3.5 main-loop steps of 128 bytes either way, so
  /// FP8 loses more at a given K. Tiled model only; 0 (the default) = none: the hardware
  /// library sets it where it was measured (Hopper) and on the parts running the same
  /// TMA-fed asynchronous-MMA pipelines (Blackwell).
  double gemm_k_overhead_bytes;
  double power_watts;              ///< board power the nominal rates are quoted at (0 = unknown)
  double power_limit_watts;        ///< a lower cap the GPU runs under (0 = none)
  /// Clock the part holds under a dense GEMM at its board power, as a fraction of the
  /// clock its nominal rates are quoted at (1 = the nominal clock holds). AMD publishes
  /// it with its Max-Achievable FLOPs: MI300X (750 W) 1,207 of 2,100 MHz in BF16, MI325X
  /// (1,000 W) 1,447 MHz, the same silicon (ROCm blog "Measuring Max-Achievable FLOPs,
  /// part 2", 2025). Scales every FLOP/s rate, with a power cap on top; 0 = 1.
  double dense_clock_fraction;
  /// 1: FP8 GEMMs take either operand layout (Blackwell's tensor cores), so one FP8 copy
  /// of a per-tensor-scaled weight serves forward and backward; 0: TN only (Hopper, Ada),
  /// a row- and a column-wise copy
  int fp8_any_layout;
} fth_compute_def;

fth_compute_def fth_compute_def_default(void);
/// Checks every field; on failure fills err (path relative to the compute def).
fth_status fth_compute_check(const fth_compute_def *def, fth_error *err);
/// Effective fused-attention FLOP/s at `prec` = nominal x attention_efficiency
/// (falling back to efficiency when unset). Attention kernels reach a lower
/// fraction of peak than large GEMMs (softmax and masking between the two
/// matmuls; Dao 2023 reports 50-73% on A100 for FlashAttention-2).
double fth_compute_attention_flops_per_s(const fth_compute_def *def, fth_precision prec);

/// Clock under a power cap, as a fraction of the clock at `power_watts`: dynamic
/// power goes as C V^2 f with the voltage following the frequency in the DVFS
/// range, so P ~ f^3 and f ~ (limit / power)^(1/3) (e.g. 500 W of 700 W: 0.894).
/// 1 without a cap below the rated power; times dense_clock_fraction. Scales every
/// FLOP/s rate above.
double fth_compute_clock_scale(const fth_compute_def *def);

/// Effective matrix FLOP/s at `prec` = nominal x efficiency (the precision's own
/// where set). A precision with a zero nominal falls back to the next wider one
/// (fp4 -> fp8 -> bf16 -> fp32), at that one's efficiency.
double fth_compute_flops_per_s(const fth_compute_def *def, fth_precision prec);
/// Nominal dense peak a kernel at `prec` runs against (after the fallback).
double fth_compute_nominal_flops_per_s(const fth_compute_def *def, fth_precision prec);

/// A memory tier built from stacks (ScaleScope `memory` component).
typedef struct fth_memory_def {
  double bw_per_stack_bytes_per_s; ///< nominal bandwidth of one stack, bytes/s
  double size_per_stack_bytes;     ///< capacity of one stack, bytes
  int num_stacks;                  ///< stacks per accelerator (> 0)
  double efficiency;               ///< achievable fraction of nominal bandwidth, (0, 1]
} fth_memory_def;

fth_memory_def fth_memory_def_default(void);
fth_status fth_memory_check(const fth_memory_def *def, fth_error *err);
/// Effective bandwidth = per-stack x stacks x efficiency, bytes/s.
double fth_memory_bw_bytes_per_s(const fth_memory_def *def);
/// Capacity = per-stack size x stacks, bytes.
double fth_memory_capacity_bytes(const fth_memory_def *def);

/// Memory tiers an accelerator may address (ScaleScope `device_memory_tiers`).
typedef enum fth_tier {
  FTH_TIER_XPU = 0,    ///< on-package HBM: `xpu_memory`
  FTH_TIER_HOST = 1,   ///< host DDR: `host_memory`
  FTH_TIER_REMOTE = 2, ///< pooled / disaggregated memory: `remote_memory`
  FTH_TIER_NVME = 3,   ///< `nvme`
  FTH_TIER_COUNT
} fth_tier;

/// One interconnect (ScaleScope `interconnect` component), as seen by one GPU.
typedef struct fth_link_def {
  double bw_bytes_per_s;    ///< nominal bytes/s per direction per link
  int num_links;            ///< links per GPU on this fabric (> 0)
  double efficiency;        ///< achievable fraction of nominal, (0, 1]
  double latency_s;         ///< one-hop latency incl. software, seconds (>= 0)
  int in_network_reduction; ///< 1 when the fabric reduces in the switch (NVLS, SHARP)
  double oversubscription;  ///< two_tier fabrics: leaf down- to up-link bandwidth, >= 1 (1: full bisection)
  int leaf_xpus;            ///< two_tier fabrics: GPUs under one leaf switch; 0 = unknown (all cross the spine)
  /// 1 when GPUs reach each other over PCIe through the host's switches (no NVLink or
  /// Infinity Fabric): no peer-mapped buffers at link speed, so no communication kernels
  /// that write into a peer's memory between GEMM tiles (fth_train's TP overlap)
  int pcie_peer;
} fth_link_def;

fth_link_def fth_link_def_default(void);
fth_status fth_link_check(const fth_link_def *def, fth_error *err);
/// Effective per-GPU bandwidth on this fabric = bw x links x efficiency, bytes/s per direction.
double fth_link_bw_bytes_per_s(const fth_link_def *def);

/// One accelerator: compute plus the tiers it has. Interconnects live with the
/// physical topology dimensions that use them (fth_topology.h).
typedef struct fth_node_def {
  fth_compute_def compute;
  fth_memory_def tier[FTH_TIER_COUNT];
  int has_tier[FTH_TIER_COUNT]; ///< 1 where the node declares the tier
  /// the host CPU's time per framework operator relative to an x86 server CPU (DGX
  /// H100's Xeon 8480C = 1; fth_host.h); (0, 10]
  double host_op_factor;
} fth_node_def;

fth_node_def fth_node_def_default(void);
/// Requires compute, and xpu_memory; checks every declared tier.
fth_status fth_node_check(const fth_node_def *def, fth_error *err);

/// Tier names as used in YAML ("xpu_memory", ...); NULL for an invalid tier.
const char *fth_tier_name(fth_tier tier);
/// Parse a tier name; returns FTH_TIER_COUNT when unknown.
fth_tier fth_tier_parse(const char *name);

#endif
