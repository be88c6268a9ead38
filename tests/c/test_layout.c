/* Layout and footprint, derived by hand.
 *
 * Cluster: 2 pods x 8 GPUs (dim 0: 8 GPUs switched, dim 1: 2 pods).
 * Dense view: TP 4 and PP 2 in the pod, DP 2 across pods: 4 x 2 x 2 = 16.
 * Expert view: TP_MoE 1, EP 4 in the pod (EP_SU) and 2 across (EP_SO),
 * PP 2 -> 1 x 8 x 1 x 2 = 16 (DP_MoE 1).
 * Model: 6 layers, first 2 dense, every layer after MoE -> 4 MoE layers;
 * 16 experts of width 512 (expert_ffn_hidden) over EP 8 -> 2 local experts;
 * dense MLP width from mlp_ratio 4 x d_model 256 = 1024 (ffn_hidden unset). */
#include "fth_footprint.h"
#include "fth_layout.h"
#include "test_macros.h"

#include <math.h>
#include <string.h>

static fth_topology_def cluster(void) {
  fth_topology_def t = fth_topology_def_default();
  t.num_phys = 2;
  t.phys[0].type = FTH_TOPO_SWITCHED;
  t.phys[0].size = 8;
  t.phys[0].link.bw_bytes_per_s = 100e9;
  t.phys[1].type = FTH_TOPO_SWITCHED;
  t.phys[1].size = 2;
  t.phys[1].link.bw_bytes_per_s = 10e9;
  int n = 0;
  t.logical[n++] = (fth_logical_dim_def){FTH_TAG_TP_ATTN, 0, 4};
  t.logical[n++] = (fth_logical_dim_def){FTH_TAG_PP, 0, 2};
  t.logical[n++] = (fth_logical_dim_def){FTH_TAG_DP_ATTN, 1, 2};
  t.logical[n++] = (fth_logical_dim_def){FTH_TAG_TP_MOE, 0, 1};
  t.logical[n++] = (fth_logical_dim_def){FTH_TAG_EP_SU, 0, 4};
  t.logical[n++] = (fth_logical_dim_def){FTH_TAG_EP_SO, 1, 2};
  t.num_logical = n;
  return t;
}

static fth_model_def moe_model(void) {
  fth_model_def m = fth_model_def_default();
  m.d_model = 256;
  m.n_layers = 6;
  m.num_heads = 8;
  m.vocab_size = 1000;
  m.max_seq_len = 512;
  m.num_experts = 16;
  m.top_k = 2;
  m.expert_ffn_hidden = 512;
  m.first_dense_layers = 2;
  return m;
}

static int layout_moe(void) {
  fth_topology_def t = cluster();
  fth_model_def m = moe_model();
  fth_layout l;
  fth_error err;
  FTH_ENSURE(fth_layout_make(&l, &t, &m, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(4, l.tp);
  FTH_ENSURE_EQ_INT(2, l.pp);
  FTH_ENSURE_EQ_INT(2, l.dp);
  FTH_ENSURE_EQ_INT(8, l.ep);
  FTH_ENSURE_EQ_INT(4, l.ep_su);
  FTH_ENSURE_EQ_INT(2, l.ep_so);
  FTH_ENSURE_EQ_INT(1, l.dp_moe);
  FTH_ENSURE_NEAR(16.0, l.num_gpus, 0);
  /* EP spans both dimensions, scale-up first: two levels, innermost dim 0. */
  FTH_ENSURE_EQ_INT(2, l.group[FTH_COMM_EP].n);
  FTH_ENSURE_EQ_INT(0, l.group[FTH_COMM_EP].dim);
  FTH_ENSURE_EQ_INT(8, l.group[FTH_COMM_EP].size);
  /* Stage split: 6 layers over PP 2, 3 each; the 2 dense layers lead, so the
   * first stage is 2 dense + 1 MoE and the last 3 MoE. */
  FTH_ENSURE_EQ_INT(3, l.layers_per_stage);
  FTH_ENSURE_EQ_INT(1, l.moe_layers_per_stage);
  FTH_ENSURE_EQ_INT(2, l.dense_layers_per_stage);
  FTH_ENSURE_EQ_INT(3, l.last_stage_layers);
  FTH_ENSURE_EQ_INT(3, l.last_stage_moe);
  FTH_ENSURE_NEAR(2.0, l.local_experts, 0);
  /* FFN defaults resolved once: dense 4 x 256 = 1024; experts 512 as given. */
  FTH_ENSURE_NEAR(1024.0, l.ffn_hidden, 0);
  FTH_ENSURE_NEAR(512.0, l.expert_ffn, 0);
  /* Without expert_ffn_hidden_size the experts take the dense width: the
   * single fallback every step model reads (the drifted copies fell back to
   * ffn_hidden_size, 0 when unset). */
  m.expert_ffn_hidden = 0;
  FTH_ENSURE(fth_layout_make(&l, &t, &m, &err) == FTH_OK);
  FTH_ENSURE_NEAR(1024.0, l.expert_ffn, 0);
  /* Expert parameters of the busiest stage, the last: 3 MoE layers x 2 local
   * experts x one expert's (plain MLP, h 256, f 1024 since expert_ffn_hidden
   * is now unset): 2 x 256 x 1024 = 524,288 weights, over TP_MoE 1. */
  FTH_ENSURE_NEAR(524288.0, l.moe_shape.params_per_expert, 1e-12);
  FTH_ENSURE_NEAR(3.0 * 2.0 * 524288.0, l.stage_expert_params, 1e-12);
  return 0;
}

/* Where the MoE blocks really are. 8 layers, 2 dense, PP 2: stage 0 is
 * 2 dense + 2 MoE, stage 1 (last) 4 MoE. 10 layers, 4 dense, PP 4: 3 per
 * stage with 2 short, the last and the first: 2 | 3 | 3 | 2 layers, i.e.
 * {0,1 dense} {2,3 dense, 4} {5,6,7} {8,9}: the heaviest but the last is
 * stage 2 with 3 MoE blocks, the last has 2. */
static int moe_stages(void) {
  fth_topology_def t = cluster(); /* PP 2 */
  fth_model_def m = moe_model();
  fth_layout l;
  fth_error err;
  m.n_layers = 8;
  FTH_ENSURE(fth_layout_make(&l, &t, &m, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(2, l.dense_layers_per_stage);
  FTH_ENSURE_EQ_INT(2, l.moe_layers_per_stage);
  FTH_ENSURE_EQ_INT(4, l.last_stage_layers);
  FTH_ENSURE_EQ_INT(4, l.last_stage_moe);
  t.logical[0].size = 2; /* TP 2 x PP 4 in the pod; experts: EP_SU 2 x PP 4 */
  t.logical[1].size = 4;
  t.logical[4].size = 2;
  m.n_layers = 10;
  m.first_dense_layers = 4;
  FTH_ENSURE(fth_layout_make(&l, &t, &m, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(4, l.pp);
  FTH_ENSURE_EQ_INT(0, l.dense_layers_per_stage);
  FTH_ENSURE_EQ_INT(3, l.moe_layers_per_stage);
  FTH_ENSURE_EQ_INT(2, l.last_stage_layers);
  FTH_ENSURE_EQ_INT(2, l.last_stage_moe);
  return 0;
}

static int layout_refusals(void) {
  fth_topology_def t = cluster();
  fth_model_def m = moe_model();
  fth_layout l;
  fth_error err;
  m.num_experts = 12; /* EP 8 does not divide 12 experts */
  FTH_ENSURE(fth_layout_make(&l, &t, &m, &err) == FTH_EINVAL);
  FTH_ENSURE(strstr(err.msg, "does not divide num_regular_experts = 12") != NULL);
  m = moe_model();
  m.n_layers = 1; /* PP 2 over 1 layer: sizes that do not tile */
  m.first_dense_layers = 0;
  FTH_ENSURE(fth_layout_make(&l, &t, &m, &err) == FTH_ETILE);
  FTH_ENSURE(strcmp(err.path, "topology.logical") == 0);
  FTH_ENSURE(l.num_gpus == 0); /* not usable */
  /* Batch: 8 sequences in micro-batches of 3 over DP 2 do not tile;
   * 8 in micro-batches of 2 -> 8 / (2 x 2) = 2 per DP rank. */
  m = moe_model();
  FTH_ENSURE(fth_layout_make(&l, &t, &m, &err) == FTH_OK);
  double mb = 0;
  FTH_ENSURE(fth_layout_batch(&l, 8, 3, 512, &mb, &err) == FTH_ETILE);
  FTH_ENSURE(strcmp(err.path, "workload.global_batch_size") == 0);
  FTH_ENSURE(fth_layout_batch(&l, 8, 2, 512, &mb, &err) == FTH_OK);
  FTH_ENSURE_NEAR(2.0, mb, 0);
  return 0;
}

/* The closed-form MoE layer count against counting layer by layer. */
static int moe_layer_count(void) {
  fth_model_def m = moe_model();
  for (int n = 1; n <= 40; n++)
    for (int fd = 0; fd <= n; fd++)
      for (int k = 0; k <= 5; k++) {
        m.n_layers = n;
        m.first_dense_layers = fd;
        m.moe_layer_interval = k;
        int count = 0;
        for (int i = 0; i < n; i++) count += fth_model_layer_is_moe(&m, i);
        FTH_ENSURE_EQ_INT(count, fth_model_num_moe_layers(&m));
      }
  /* The windowed count against counting layer by layer. */
  m.n_layers = 23;
  m.first_dense_layers = 3;
  m.moe_layer_interval = 2;
  for (int a = 0; a <= 23; a++)
    for (int b = a; b <= 23; b++) {
      int count = 0;
      for (int i = a; i < b; i++) count += fth_model_layer_is_moe(&m, i);
      FTH_ENSURE_EQ_INT(count, fth_model_num_moe_in(&m, a, b));
    }
  /* DeepSeek-V3: 61 layers, 3 dense, every later layer MoE -> 58. */
  m.n_layers = 61;
  m.first_dense_layers = 3;
  m.moe_layer_interval = 1;
  FTH_ENSURE_EQ_INT(58, fth_model_num_moe_layers(&m));
  return 0;
}

/* KV elements per token per block on one GPU: 8 heads of 256 / 8 = 32 with
 * GQA 2 KV heads -> K and V: 2 x 2 x 32 = 128 elements per token. TP 4 over 2
 * KV heads replicates them: each GPU holds max(1, 2 / 4) = 1 head -> 128 / 2 = 64. */
static int kv_per_gpu(void) {
  fth_topology_def t = cluster();
  fth_model_def m = moe_model();
  m.num_kv_heads = 2;
  fth_layout l;
  fth_error err;
  FTH_ENSURE(fth_layout_make(&l, &t, &m, &err) == FTH_OK);
  FTH_ENSURE_NEAR(128.0, l.dense_shape.kv_cache_per_token, 1e-12);
  FTH_ENSURE_NEAR(64.0, fth_layout_kv_elems_per_gpu(&l, &m, &l.dense_shape), 1e-12);
  return 0;
}

/* Components to tiers: weights 10, gradients 20, optimizer 30 and
 * activations 40 GB on the XPU; transients 5 (fwd) and 7 (bwd) GB count as
 * max = 7; KV cache 50 GB on a 64 GB remote tier. XPU: 107 GB of 80 -> the
 * XPU overflows first; remote 50 of 64 fits. The KV tier has 64 - 0 room
 * for units of 8 GB: floor(64 / 8) = 8. */
static int footprint(void) {
  fth_node_def n = fth_node_def_default();
  n.has_tier[FTH_TIER_XPU] = 1;
  n.tier[FTH_TIER_XPU].size_per_stack_bytes = 80e9;
  n.tier[FTH_TIER_XPU].num_stacks = 1;
  n.has_tier[FTH_TIER_REMOTE] = 1;
  n.tier[FTH_TIER_REMOTE].size_per_stack_bytes = 64e9;
  n.tier[FTH_TIER_REMOTE].num_stacks = 1;
  fth_tier tier_of[FTH_MEM_COMPONENT_COUNT];
  for (int c = 0; c < FTH_MEM_COMPONENT_COUNT; c++) tier_of[c] = FTH_TIER_XPU;
  tier_of[FTH_MEM_KV_CACHE] = FTH_TIER_REMOTE;
  fth_memory_footprint fp;
  memset(&fp, 0, sizeof fp);
  const double gb[FTH_MEM_COMPONENT_COUNT] = {10, 20, 30, 40, 5, 7, 50};
  for (int c = 0; c < FTH_MEM_COMPONENT_COUNT; c++) fp.bytes[c] = gb[c] * 1e9;
  fth_footprint_place(&fp, &n, tier_of);
  FTH_ENSURE_NEAR(107e9, fp.tier_bytes[FTH_TIER_XPU], 1e-12);
  FTH_ENSURE_NEAR(50e9, fp.tier_bytes[FTH_TIER_REMOTE], 1e-12);
  FTH_ENSURE_NEAR(157e9, fp.peak_bytes, 1e-12);
  FTH_ENSURE(!fp.fits && fp.overflow_tier == FTH_TIER_XPU);
  FTH_ENSURE(!fp.tier_fits[FTH_TIER_XPU] && fp.tier_fits[FTH_TIER_REMOTE]);
  FTH_ENSURE_NEAR(8.0, fth_footprint_room_units(&fp, tier_of, FTH_MEM_KV_CACHE, 8e9), 0);
  FTH_ENSURE(isinf(fth_footprint_room_units(&fp, tier_of, FTH_MEM_KV_CACHE, 0)));
  /* Names round-trip, with the documented aliases. */
  for (int c = 0; c < FTH_MEM_COMPONENT_COUNT; c++)
    FTH_ENSURE(fth_mem_component_parse(fth_mem_component_name((fth_mem_component)c)) ==
               (fth_mem_component)c);
  FTH_ENSURE(fth_mem_component_parse("activations") == FTH_MEM_ACTIVATIONS);
  return 0;
}

/* ScaleScope's expert_high_bandwidth_group_size_xpus names the EP group with
 * scale-up bandwidth: EP_SU = 4 here, so 4 is accepted and 8 refused. */
static int hb_group(void) {
  fth_topology_def t = cluster();
  fth_model_def m = moe_model();
  fth_layout l;
  fth_error err;
  t.expert_hb_group_xpus = 4;
  FTH_ENSURE(fth_layout_make(&l, &t, &m, &err) == FTH_OK);
  t.expert_hb_group_xpus = 8;
  FTH_ENSURE(fth_layout_make(&l, &t, &m, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "topology.expert_high_bandwidth_group_size_xpus") == 0);
  return 0;
}

/* Splits asked of the ends (fth_layout_split). 10 layers on PP 4 (the moe_stages
 * placement; MoE from layer 4): even 2 | 3 | 3 | 2 (short: the last, the first).
 * First 1, last 1: the middle two share 8, 4 each. First 4, last 0: the other
 * three share 6, 2 each. Last 4 only: 6 over three, 2 each: 2 | 2 | 2 | 4,
 * MoE blocks {4..9}: stage 2 holds layers 4, 5 (2 MoE), the last 6..9 (4 MoE). */
static int split_ends(void) {
  fth_topology_def t = cluster();
  fth_model_def m = moe_model();
  fth_layout l;
  fth_error err;
  t.logical[0].size = 2;
  t.logical[1].size = 4;
  t.logical[4].size = 2;
  m.n_layers = 10;
  m.first_dense_layers = 4;
  FTH_ENSURE(fth_layout_make(&l, &t, &m, &err) == FTH_OK);
  const int want[4][4] = {{0, 0, 2, 3}, {1, 1, 1, 4}, {4, 0, 4, 2}, {0, 4, 2, 2}};
  const int sizes[4][4] = {{2, 3, 3, 2}, {1, 4, 4, 1}, {4, 2, 2, 2}, {2, 2, 2, 4}};
  for (int c = 0; c < 4; c++) {
    FTH_ENSURE(fth_layout_split(&l, &m, want[c][0], want[c][1], "w", &err) == FTH_OK);
    int total = 0;
    for (int s = 0; s < 4; s++) {
      FTH_ENSURE_EQ_INT(sizes[c][s], fth_layout_stage_size(&l, &m, s));
      total += fth_layout_stage_size(&l, &m, s);
    }
    FTH_ENSURE_EQ_INT(10, total);
  }
  /* last 4: the heaviest but the last is stage 2 (2 MoE), the last holds 4 MoE */
  FTH_ENSURE_EQ_INT(2, l.moe_layers_per_stage);
  FTH_ENSURE_EQ_INT(4, l.last_stage_moe);
  FTH_ENSURE_EQ_INT(4, l.layers_per_stage);
  /* refusals: a stage left empty, counts beyond the layers, no pipeline */
  FTH_ENSURE(fth_layout_split(&l, &m, 5, 4, "w", &err) == FTH_ETILE);
  FTH_ENSURE(fth_layout_split(&l, &m, 11, 0, "w", &err) == FTH_ETILE);
  FTH_ENSURE(fth_layout_split(&l, &m, -1, 0, "w", &err) == FTH_EINVAL);
  t.logical[1].size = 1; /* PP 1 */
  t.logical[0].size = 8;
  t.logical[4].size = 8;
  FTH_ENSURE(fth_layout_make(&l, &t, &m, &err) == FTH_OK);
  FTH_ENSURE(fth_layout_split(&l, &m, 3, 0, "w", &err) == FTH_ETILE);
  return 0;
}

int layout_test(void) {
  FTH_RUN(split_ends());
  return layout_moe() || moe_stages() || layout_refusals() || moe_layer_count() || kv_per_gpu() || footprint() ||
         hb_group();
}
