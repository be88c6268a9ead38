/* fth_kernel.h: time of one kernel (GEMM, attention, element-wise) on one
 * accelerator. Callers go through fth_kernel_gemm / fth_kernel_attention only,
 * so a tile-level GEMM or flash-attention model can replace the roofline
 * behind this interface without touching them. */
#ifndef FTH_KERNEL_H
#define FTH_KERNEL_H

#include "fth_common.h"
#include "fth_hardware.h"

typedef enum fth_kernel_model {
  FTH_KERNEL_ROOFLINE = 0, ///< max(FLOPs / FLOP/s, bytes / bandwidth) (Williams et al. 2009)
  FTH_KERNEL_TILED = 1,    ///< output tiles scheduled in waves over the compute units
  FTH_KERNEL_MODEL_COUNT
} fth_kernel_model;

const char *fth_kernel_model_name(fth_kernel_model m);     ///< "roofline", "tiled"
fth_kernel_model fth_kernel_model_parse(const char *name); ///< FTH_KERNEL_MODEL_COUNT if unknown

/// What a kernel runs on: matrix rate at a precision, vector rate, memory bandwidth.
typedef struct fth_kernel_env {
  double matrix_flops_per_s;    ///< effective tensor-core FLOP/s at the kernel's precision
  double attention_flops_per_s; ///< effective FLOP/s of fused attention (0 = matrix rate)
  double vector_flops_per_s;    ///< effective element-wise FLOP/s
  double mem_bw_bytes_per_s;    ///< effective bandwidth of the tier the operands live in
  fth_kernel_model model;
  int compute_units;       ///< SMs / CUs (tiled model; 0 = roofline)
  double tile_m, tile_n;   ///< GEMM output tile (tiled model)
  double k_overhead_bytes; ///< a GEMM tile's fixed cost as bytes of K (tiled model)
  double attn_block_q;     ///< flash-attention query block (tiled model)
  double expert_gemm_s;    ///< fixed cost per expert of a grouped GEMM
  /// a grouped expert GEMM's share of matrix_flops_per_s (FP8/FP4: the node's
  /// expert_lowp_fraction; 1 at wider precisions)
  double expert_rate_fraction;
} fth_kernel_env;

/// Build an env from a node at a precision (tier for operand traffic).
fth_kernel_env fth_kernel_env_make(const fth_node_def *node, fth_precision prec, fth_tier tier);

typedef struct fth_kernel_cost {
  double flops;     ///< arithmetic work, FLOP
  double bytes;     ///< memory traffic, bytes
  double compute_s; ///< flops / rate
  double memory_s;  ///< bytes / bandwidth
  double time_s;    ///< roofline: max(compute_s, memory_s)
} fth_kernel_cost;

/// C[m,n] = A[m,k] B[k,n], `batch` independent instances; operands of
/// `elem_bytes` each. FLOPs = 2 m n k batch; bytes = (m k + k n + m n) elem_bytes batch.
/// Tiled model: the ceil(m / tile_m) ceil(n / tile_n) batch output tiles run in
/// waves of `compute_units`, each unit at 1 / compute_units of the rate, so a
/// partial last wave and padded edge tiles cost as much as full ones (wave
/// quantisation, as in NVIDIA's GEMM performance guide); `flops` stays the useful work.
/// A tile of depth k costs as much as one of depth k + k_overhead_bytes / elem_bytes (its
/// pipeline fill and epilogue), so short-K GEMMs (fine-grained experts' down projection,
/// K = 768 in Qwen3-30B-A3B) reach a smaller fraction of the peak than long-K ones.
fth_kernel_cost fth_kernel_gemm(const fth_kernel_env *env, double m, double n, double k,
                                double batch, double elem_bytes);

/// Fused (flash) attention forward for `batch` sequences x `heads` query heads:
/// q_len queries against kv_len keys, head dims d_qk and d_v; `causal` masks
/// the scores, the queries being the last q_len of the kv_len positions (mean
/// keys per query kv - (q - 1) / 2: about half when q_len == kv_len, all of them
/// for one decode query). KV heads `kv_heads` set the K/V bytes.
/// FLOPs = 2 q keys (d_qk + d_v) heads batch; bytes = Q, K, V, O once.
/// Tiled model: batch x heads x ceil(q / attn_block_q) query blocks run in waves
/// over the compute units (FlashAttention's parallelisation, Dao 2023).
fth_kernel_cost fth_kernel_attention(const fth_kernel_env *env, double batch, double heads,
                                     double kv_heads, double q_len, double kv_len, double d_qk,
                                     double d_v, int causal, double elem_bytes);

/// Mean keys each of `q_len` queries sees when they are the last q_len of `kv_len`
/// positions under a causal mask: kv - (q - 1) / 2 (q > kv: the square case, (kv + 1) / 2);
/// `window` > 0 limits each query to its last `window` positions (sliding-window attention,
/// Beltagy et al. 2020; Mistral, Gemma 2/3, gpt-oss), which flash kernels skip block-wise.
double fth_kernel_causal_keys(double q_len, double kv_len, double window);

/// Element-wise op over `elems` elements: `flops_per_elem` on the vector unit,
/// `bytes_per_elem` moved.
fth_kernel_cost fth_kernel_elementwise(const fth_kernel_env *env, double elems,
                                       double flops_per_elem, double bytes_per_elem);

#endif
