/* fth_recipe.h: precision recipes as they are used in training, one table row
 * each: at which precision the linear layers' GEMMs run (forward, data and
 * weight gradients) and what the quantisation around them costs. Attention,
 * norms, the router, the LM head and the loss stay at the activation
 * precision (BF16) under every recipe, as Transformer Engine runs them unless
 * FP8 attention is asked for.
 *
 * Each GEMM input is cast before use: the activation X in forward, the output
 * gradient dY in backward, the weights once per step (cached across
 * micro-batches, Transformer Engine's is_first_microbatch). A cast reads the
 * tensor at its width (plus an amax pass where the scale is computed from the
 * current tensor) and writes its quantised copies with their scales: row- and
 * column-wise, because wgrad and dgrad need the transpose (Hopper FP8 GEMMs
 * take TN operands; MX and NVFP4 scale along the reduction dimension). */
#ifndef FTH_RECIPE_H
#define FTH_RECIPE_H

#include "fth_hardware.h"

typedef enum fth_recipe {
  FTH_RECIPE_NONE = 0,    ///< every kernel at the activation precision (no casts)
  FTH_RECIPE_FP8_DELAYED, ///< E4M3/E5M2, per-tensor scale from the amax history (TE default)
  FTH_RECIPE_FP8_CURRENT, ///< per-tensor scale from the tensor itself: an amax pass first
  FTH_RECIPE_MXFP8,       ///< OCP MX E4M3, an E8M0 scale per 32 elements (Blackwell)
  FTH_RECIPE_FP8_BLOCKWISE, ///< E4M3, an FP32 scale per 1x128 tile / 128x128 block (DeepSeek-V3)
  FTH_RECIPE_NVFP4,       ///< E2M1, an E4M3 scale per 16 elements and an FP32 one per tensor
  FTH_RECIPE_COUNT
} fth_recipe;

typedef struct fth_recipe_row {
  const char *name;     ///< spelling in inputs and outputs
  fth_precision gemm;   ///< the linear layers' GEMMs (operands at its width)
  double amax_passes;   ///< extra reads of a tensor to find its scale
  double scale_bytes;   ///< scale bytes per quantised element
  double copies;        ///< quantised copies written per cast (row- and column-wise)
  const char *source;   ///< where the format comes from
} fth_recipe_row;

const fth_recipe_row *fth_recipe_get(fth_recipe r); ///< NULL when out of range
const char *fth_recipe_name(fth_recipe r);
fth_recipe fth_recipe_parse(const char *name); ///< FTH_RECIPE_COUNT when unknown

/// Bytes moved per element cast from `in_bytes`-wide values (0 without a recipe).
double fth_recipe_cast_bytes(fth_recipe r, double in_bytes);

#endif
