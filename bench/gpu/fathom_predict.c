/* fathom_predict.c: fathom's kernel-model time for single kernels, for comparison
 * with the GPU measurements in validation/measurements/ (bench/gpu/compare_fathom.py
 * builds and drives it; it links the core library only).
 *
 *   fathom_predict BF16 FP8 FP32 EFF ATTN_EFF UNITS TILE_M TILE_N STACK_BW STACKS MEM_EFF
 *                  [FP8_EFF K_OVERHEAD_BYTES EXPERT_GEMM_S]
 *
 * The node figures come from the command line (compare_fathom.py reads them from
 * configs/hardware/hardware_library.yaml). Queries on stdin, one per line:
 *   gemm MODEL PREC m n k batch elem_bytes   (batch > 1: a grouped expert GEMM, which
 *                                            pays EXPERT_GEMM_S per expert as fth_phase.c does)
 *   attn MODEL PREC batch heads kv_heads q_len kv_len d_qk d_v causal elem_bytes
 *   elem MODEL PREC elems flops_per_elem bytes_per_elem
 * MODEL: roofline | tiled; PREC: fp8 | bf16 | fp32. Prints per query:
 *   time_s compute_s memory_s flops bytes */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fth_hardware.h"
#include "fth_kernel.h"

static fth_precision prec_of(const char *s) {
  if (!strcmp(s, "fp8")) return FTH_PREC_FP8;
  if (!strcmp(s, "bf16")) return FTH_PREC_BF16;
  return FTH_PREC_FP32;
}

int main(int argc, char **argv) {
  if (argc != 12 && argc != 15) {
    fprintf(stderr, "usage: %s BF16 FP8 FP32 EFF ATTN_EFF UNITS TILE_M TILE_N STACK_BW STACKS MEM_EFF "
                    "[FP8_EFF K_OVERHEAD_BYTES EXPERT_GEMM_S]\n",
            argv[0]);
    return 2;
  }
  fth_node_def node = fth_node_def_default();
  node.compute.flops_per_s[FTH_PREC_BF16] = atof(argv[1]);
  node.compute.flops_per_s[FTH_PREC_FP8] = atof(argv[2]);
  node.compute.flops_per_s[FTH_PREC_FP32] = atof(argv[3]);
  node.compute.efficiency = atof(argv[4]);
  node.compute.attention_efficiency = atof(argv[5]);
  node.compute.compute_units = atoi(argv[6]);
  node.compute.gemm_tile_m = atof(argv[7]);
  node.compute.gemm_tile_n = atof(argv[8]);
  if (argc == 15) {
    node.compute.prec_efficiency[FTH_PREC_FP8] = atof(argv[12]);
    node.compute.gemm_k_overhead_bytes = atof(argv[13]);
    node.compute.expert_gemm_s = atof(argv[14]);
  }
  node.tier[FTH_TIER_XPU] = fth_memory_def_default();
  node.tier[FTH_TIER_XPU].bw_per_stack_bytes_per_s = atof(argv[9]);
  node.tier[FTH_TIER_XPU].num_stacks = atoi(argv[10]);
  node.tier[FTH_TIER_XPU].efficiency = atof(argv[11]);
  node.tier[FTH_TIER_XPU].size_per_stack_bytes = 17179869184.0;
  node.has_tier[FTH_TIER_XPU] = 1;

  char kind[16], model[16], prec[16];
  while (scanf("%15s %15s %15s", kind, model, prec) == 3) {
    fth_kernel_env env = fth_kernel_env_make(&node, prec_of(prec), FTH_TIER_XPU);
    env.model = strcmp(model, "tiled") ? FTH_KERNEL_ROOFLINE : FTH_KERNEL_TILED;
    fth_kernel_cost c;
    if (!strcmp(kind, "gemm")) {
      double m, n, k, batch, eb;
      if (scanf("%lf %lf %lf %lf %lf", &m, &n, &k, &batch, &eb) != 5) return 1;
      c = fth_kernel_gemm(&env, m, n, k, batch, eb);
      if (batch > 1) c.time_s += batch * env.expert_gemm_s;
    } else if (!strcmp(kind, "attn")) {
      double b, h, hkv, q, kv, dqk, dv, eb;
      int causal;
      if (scanf("%lf %lf %lf %lf %lf %lf %lf %d %lf", &b, &h, &hkv, &q, &kv, &dqk, &dv, &causal,
                &eb) != 9)
        return 1;
      c = fth_kernel_attention(&env, b, h, hkv, q, kv, dqk, dv, causal, eb);
    } else if (!strcmp(kind, "elem")) {
      double n, fpe, bpe;
      if (scanf("%lf %lf %lf", &n, &fpe, &bpe) != 3) return 1;
      c = fth_kernel_elementwise(&env, n, fpe, bpe);
    } else {
      fprintf(stderr, "unknown query '%s'\n", kind);
      return 1;
    }
    printf("%.9g %.9g %.9g %.9g %.9g\n", c.time_s, c.compute_s, c.memory_s, c.flops, c.bytes);
  }
  return 0;
}
