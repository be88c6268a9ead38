#include "fth_collective.h"
#include "fth_topology.h"
#include "test_macros.h"

#include <math.h>
#include <string.h>

/* Fabrics used below. NVLink4: 18 links x 25e9 B/s per direction, efficiency 1:
 * 18 x 25e9 = 450e9 B/s per GPU, 1 us, switch reduction (NVLS). InfiniBand:
 * 8 NICs x 50e9 B/s (400 Gb/s) per direction x 0.8 = 320e9 B/s per GPU, 5 us. */
static fth_phys_dim_def nvlink(int size) {
  fth_phys_dim_def d;
  d.type = FTH_TOPO_SWITCHED;
  d.size = size;
  d.link = fth_link_def_default();
  d.link.bw_bytes_per_s = 25e9;
  d.link.num_links = 18;
  d.link.latency_s = 1e-6;
  d.link.in_network_reduction = 1;
  return d;
}

static fth_phys_dim_def infiniband(int size) {
  fth_phys_dim_def d;
  d.type = FTH_TOPO_TWO_TIER;
  d.size = size;
  d.link = fth_link_def_default();
  d.link.bw_bytes_per_s = 50e9;
  d.link.num_links = 8;
  d.link.efficiency = 0.8;
  d.link.latency_s = 5e-6;
  return d;
}

/* Pods of `pod` GPUs on NVLink joined by InfiniBand (`pods` of them), no logical dimensions. */
static fth_topology_def nvlink_over_ib(int pod, int pods) {
  fth_topology_def t = fth_topology_def_default();
  t.num_phys = 2;
  t.phys[0] = nvlink(pod);
  t.phys[1] = infiniband(pods);
  return t;
}

/* 16 nodes x 8 GPUs. Attention view: TP_Attn 8 on NVLink, DP_Attn 16 on IB.
 * Expert view: TP_MoE 4 x EP_SU 2 = 8 on NVLink, EP_SO 4 x DP_MoE 4 = 16 on IB. */
static fth_topology_def two_level(void) {
  fth_topology_def t = nvlink_over_ib(8, 16);
  t.num_logical = 6;
  t.logical[0] = (fth_logical_dim_def){FTH_TAG_TP_ATTN, 0, 8};
  t.logical[1] = (fth_logical_dim_def){FTH_TAG_TP_MOE, 0, 4};
  t.logical[2] = (fth_logical_dim_def){FTH_TAG_EP_SU, 0, 2};
  t.logical[3] = (fth_logical_dim_def){FTH_TAG_DP_ATTN, 1, 16};
  t.logical[4] = (fth_logical_dim_def){FTH_TAG_EP_SO, 1, 4};
  t.logical[5] = (fth_logical_dim_def){FTH_TAG_DP_MOE, 1, 4};
  return t;
}

/* 32 nodes x 8 GPUs with a tag split over both dimensions and PP on IB.
 * Attention: TP_Attn 4 x DP_Attn 2 = 8 on NVLink; DP_Attn 8 x PP 4 = 32 on IB.
 * Expert: TP_MoE 2 x EP_SU 4 = 8 on NVLink; EP_SO 4 x DP_MoE 2 x PP 4 = 32 on IB. */
static fth_topology_def split(void) {
  fth_topology_def t = nvlink_over_ib(8, 32);
  t.num_logical = 8;
  t.logical[0] = (fth_logical_dim_def){FTH_TAG_TP_ATTN, 0, 4};
  t.logical[1] = (fth_logical_dim_def){FTH_TAG_DP_ATTN, 0, 2};
  t.logical[2] = (fth_logical_dim_def){FTH_TAG_TP_MOE, 0, 2};
  t.logical[3] = (fth_logical_dim_def){FTH_TAG_EP_SU, 0, 4};
  t.logical[4] = (fth_logical_dim_def){FTH_TAG_DP_ATTN, 1, 8};
  t.logical[5] = (fth_logical_dim_def){FTH_TAG_PP, 1, 4};
  t.logical[6] = (fth_logical_dim_def){FTH_TAG_EP_SO, 1, 4};
  t.logical[7] = (fth_logical_dim_def){FTH_TAG_DP_MOE, 1, 2};
  return t;
}

/* Expect FTH_EINVAL from the topology check with exactly `path`, and `text`
 * (if not NULL) inside the message. */
static int refused(const fth_topology_def *t, const char *path, const char *text) {
  fth_error err;
  fth_error_clear(&err);
  FTH_ENSURE(fth_topology_check(t, &err) == FTH_EINVAL);
  if (strcmp(err.path, path) != 0 || (text != NULL && strstr(err.msg, text) == NULL)) {
    fprintf(stderr, "expected '%s: ...%s...', got '%s: %s'\n", path, text ? text : "", err.path,
            err.msg);
    return 1;
  }
  return 0;
}

static int names(void) {
  static const char *const topo[FTH_TOPO_COUNT] = {"switched", "ring",      "mesh",
                                                   "torus",    "full_flat", "two_tier"};
  static const char *const tags[FTH_TAG_COUNT] = {"TP_Attn", "TP_MoE", "DP_Attn", "DP_MoE",
                                                  "EP_SU",   "EP_SO",  "PP",      "CP"};
  for (int i = 0; i < FTH_TOPO_COUNT; i++) {
    FTH_ENSURE(strcmp(topo[i], fth_topo_type_name((fth_topo_type)i)) == 0);
    FTH_ENSURE_EQ_INT(i, fth_topo_type_parse(topo[i]));
  }
  for (int i = 0; i < FTH_TAG_COUNT; i++) {
    FTH_ENSURE(strcmp(tags[i], fth_logical_tag_name((fth_logical_tag)i)) == 0);
    FTH_ENSURE_EQ_INT(i, fth_logical_tag_parse(tags[i]));
  }
  FTH_ENSURE(fth_topo_type_name(FTH_TOPO_COUNT) == NULL);
  FTH_ENSURE(fth_logical_tag_name(FTH_TAG_COUNT) == NULL);
  FTH_ENSURE(fth_topo_type_parse("dragonfly") == FTH_TOPO_COUNT);
  FTH_ENSURE(fth_logical_tag_parse("tp_attn") == FTH_TAG_COUNT); /* spellings are exact */
  FTH_ENSURE(fth_logical_tag_parse(NULL) == FTH_TAG_COUNT);
  return 0;
}

static int sizes(void) {
  fth_error err;
  fth_topology_def t = two_level();
  FTH_ENSURE(fth_topology_check(&t, &err) == FTH_OK);
  FTH_ENSURE_NEAR(128.0, fth_topology_num_gpus(&t), 0); /* 8 x 16 */
  FTH_ENSURE_EQ_INT(8, fth_topology_degree(&t, FTH_TAG_TP_ATTN));
  FTH_ENSURE_EQ_INT(4, fth_topology_degree(&t, FTH_TAG_TP_MOE));
  FTH_ENSURE_EQ_INT(2, fth_topology_degree(&t, FTH_TAG_EP_SU));
  FTH_ENSURE_EQ_INT(4, fth_topology_degree(&t, FTH_TAG_EP_SO));
  FTH_ENSURE_EQ_INT(16, fth_topology_degree(&t, FTH_TAG_DP_ATTN));
  FTH_ENSURE_EQ_INT(1, fth_topology_degree(&t, FTH_TAG_PP)); /* absent tags: 1 */
  FTH_ENSURE_EQ_INT(1, fth_topology_degree(&t, FTH_TAG_CP));
  t = split();
  FTH_ENSURE(fth_topology_check(&t, &err) == FTH_OK);
  FTH_ENSURE_NEAR(256.0, fth_topology_num_gpus(&t), 0);            /* 8 x 32 */
  FTH_ENSURE_EQ_INT(16, fth_topology_degree(&t, FTH_TAG_DP_ATTN)); /* 2 on NVLink x 8 on IB */
  FTH_ENSURE_EQ_INT(4, fth_topology_degree(&t, FTH_TAG_PP));
  /* Both views cover every GPU: 4 x 16 x 4 = 256 and 2 x 4 x 4 x 2 x 4 = 256. */
  FTH_ENSURE_EQ_INT(256, fth_topology_degree(&t, FTH_TAG_TP_ATTN) *
                             fth_topology_degree(&t, FTH_TAG_DP_ATTN) *
                             fth_topology_degree(&t, FTH_TAG_PP));
  FTH_ENSURE_EQ_INT(
      256, fth_topology_degree(&t, FTH_TAG_TP_MOE) * fth_topology_degree(&t, FTH_TAG_EP_SU) *
               fth_topology_degree(&t, FTH_TAG_EP_SO) * fth_topology_degree(&t, FTH_TAG_DP_MOE) *
               fth_topology_degree(&t, FTH_TAG_PP));
  return 0;
}

/* Check one level against hand values. */
static int level_is(const fth_group_level *g, int group, int dim, fth_topo_type type, double bw,
                    double latency_s, int inr) {
  FTH_ENSURE_EQ_INT(group, g->group_size);
  FTH_ENSURE_EQ_INT(dim, g->dim_size);
  FTH_ENSURE_EQ_INT(type, g->type);
  FTH_ENSURE_NEAR(bw, g->bw_bytes_per_s, 1e-12);
  FTH_ENSURE_NEAR(latency_s, g->latency_s, 1e-12);
  FTH_ENSURE_EQ_INT(inr, g->in_network_reduction);
  return 0;
}

static int groups_two_level(void) {
  fth_topology_def t = two_level();
  fth_group_level lv[FTH_MAX_PHYS_DIMS];
  /* TP_Attn is the only attention-view user of NVLink: all 450e9. */
  FTH_ENSURE_EQ_INT(1, fth_topology_group(&t, FTH_TAG_TP_ATTN, 1, lv, NULL));
  FTH_RUN(level_is(&lv[0], 8, 8, FTH_TOPO_SWITCHED, 450e9, 1e-6, 1));
  /* TP_MoE and EP_SU (both > 1) share NVLink in the expert view: 450e9 / 2 = 225e9
   * when shared, 450e9 when not. */
  FTH_ENSURE_EQ_INT(1, fth_topology_group(&t, FTH_TAG_TP_MOE, 1, lv, NULL));
  FTH_RUN(level_is(&lv[0], 4, 8, FTH_TOPO_SWITCHED, 225e9, 1e-6, 1));
  FTH_ENSURE_EQ_INT(1, fth_topology_group(&t, FTH_TAG_TP_MOE, 0, lv, NULL));
  FTH_RUN(level_is(&lv[0], 4, 8, FTH_TOPO_SWITCHED, 450e9, 1e-6, 1));
  FTH_ENSURE_EQ_INT(1, fth_topology_group(&t, FTH_TAG_EP_SU, 1, lv, NULL));
  FTH_RUN(level_is(&lv[0], 2, 8, FTH_TOPO_SWITCHED, 225e9, 1e-6, 1));
  /* DP_Attn alone on IB in its view: 8 x 50e9 x 0.8 = 320e9, 5 us, no switch reduction. */
  FTH_ENSURE_EQ_INT(1, fth_topology_group(&t, FTH_TAG_DP_ATTN, 1, lv, NULL));
  FTH_RUN(level_is(&lv[0], 16, 16, FTH_TOPO_TWO_TIER, 320e9, 5e-6, 0));
  /* EP_SO and DP_MoE share IB: 320e9 / 2 = 160e9. */
  FTH_ENSURE_EQ_INT(1, fth_topology_group(&t, FTH_TAG_EP_SO, 1, lv, NULL));
  FTH_RUN(level_is(&lv[0], 4, 16, FTH_TOPO_TWO_TIER, 160e9, 5e-6, 0));
  FTH_ENSURE_EQ_INT(1, fth_topology_group(&t, FTH_TAG_DP_MOE, 1, lv, NULL));
  FTH_RUN(level_is(&lv[0], 4, 16, FTH_TOPO_TWO_TIER, 160e9, 5e-6, 0));
  /* Absent tags have no levels, and no innermost dimension. */
  int inner = 7;
  FTH_ENSURE_EQ_INT(0, fth_topology_group(&t, FTH_TAG_PP, 1, lv, &inner));
  FTH_ENSURE_EQ_INT(-1, inner);
  FTH_ENSURE_EQ_INT(0, fth_topology_group(&t, FTH_TAG_CP, 1, lv, NULL));
  /* A size-1 dimension neither forms a level nor takes a share: EP_SU 1, TP_MoE 8
   * leaves TP_MoE alone on NVLink (450e9) and EP_SU with no level. */
  t.logical[1].size = 8;
  t.logical[2].size = 1;
  FTH_ENSURE_EQ_INT(1, fth_topology_group(&t, FTH_TAG_TP_MOE, 1, lv, NULL));
  FTH_RUN(level_is(&lv[0], 8, 8, FTH_TOPO_SWITCHED, 450e9, 1e-6, 1));
  FTH_ENSURE_EQ_INT(0, fth_topology_group(&t, FTH_TAG_EP_SU, 1, lv, NULL));
  /* Implicit DP: with the expert view's IB entries dropped, DP_MoE is all 16 IB
   * nodes (16 / PP 1) and the only expert-view user there: the whole 320e9. */
  t = two_level();
  t.num_logical = 4;
  FTH_ENSURE_EQ_INT(1, fth_topology_group(&t, FTH_TAG_DP_MOE, 1, lv, &inner));
  FTH_RUN(level_is(&lv[0], 16, 16, FTH_TOPO_TWO_TIER, 320e9, 5e-6, 0));
  FTH_ENSURE_EQ_INT(1, inner);
  /* Beside PP 4 on IB, implicit DP_MoE is 16 / 4 = 4 and shares IB with PP:
   * 320e9 / 2 = 160e9. */
  t.logical[t.num_logical++] = (fth_logical_dim_def){FTH_TAG_PP, 1, 4};
  t.logical[3].size = 4;
  FTH_ENSURE_EQ_INT(1, fth_topology_group(&t, FTH_TAG_DP_MOE, 1, lv, NULL));
  FTH_RUN(level_is(&lv[0], 4, 16, FTH_TOPO_TWO_TIER, 160e9, 5e-6, 0));
  return 0;
}

static int groups_split(void) {
  fth_topology_def t = split();
  fth_group_level lv[FTH_MAX_PHYS_DIMS];
  /* DP_Attn spans both dimensions, innermost first. NVLink: TP_Attn 4 and DP_Attn 2
   * share it, 450e9 / 2 = 225e9. IB: DP_Attn 8 and PP 4 share it, 320e9 / 2 = 160e9. */
  FTH_ENSURE_EQ_INT(2, fth_topology_group(&t, FTH_TAG_DP_ATTN, 1, lv, NULL));
  FTH_RUN(level_is(&lv[0], 2, 8, FTH_TOPO_SWITCHED, 225e9, 1e-6, 1));
  FTH_RUN(level_is(&lv[1], 8, 32, FTH_TOPO_TWO_TIER, 160e9, 5e-6, 0));
  /* Unshared: the whole fabric on each level. */
  FTH_ENSURE_EQ_INT(2, fth_topology_group(&t, FTH_TAG_DP_ATTN, 0, lv, NULL));
  FTH_RUN(level_is(&lv[0], 2, 8, FTH_TOPO_SWITCHED, 450e9, 1e-6, 1));
  FTH_RUN(level_is(&lv[1], 8, 32, FTH_TOPO_TWO_TIER, 320e9, 5e-6, 0));
  /* Expert view on IB has three users (EP_SO 4, DP_MoE 2, PP 4): 320e9 / 3 each. */
  FTH_ENSURE_EQ_INT(1, fth_topology_group(&t, FTH_TAG_EP_SO, 1, lv, NULL));
  FTH_RUN(level_is(&lv[0], 4, 32, FTH_TOPO_TWO_TIER, 320e9 / 3.0, 5e-6, 0));
  /* PP shares with the attention view (DP_Attn 8 and PP 4 on IB): 320e9 / 2; its
   * innermost physical dimension is IB, index 1. */
  int inner = 7;
  FTH_ENSURE_EQ_INT(1, fth_topology_group(&t, FTH_TAG_PP, 1, lv, &inner));
  FTH_RUN(level_is(&lv[0], 4, 32, FTH_TOPO_TWO_TIER, 160e9, 5e-6, 0));
  FTH_ENSURE_EQ_INT(1, inner);
  FTH_ENSURE_EQ_INT(1, fth_topology_group(&t, FTH_TAG_PP, 0, lv, NULL));
  FTH_RUN(level_is(&lv[0], 4, 32, FTH_TOPO_TWO_TIER, 320e9, 5e-6, 0));
  /* TP_Attn shares NVLink with DP_Attn 2 in its view: 225e9. */
  FTH_ENSURE_EQ_INT(1, fth_topology_group(&t, FTH_TAG_TP_ATTN, 1, lv, NULL));
  FTH_RUN(level_is(&lv[0], 4, 8, FTH_TOPO_SWITCHED, 225e9, 1e-6, 1));
  /* dp_bandwidth_apart: the DP tags no longer count in the others' k. EP_SO
   * shares IB with PP only (DP_MoE 2 left out): 320e9 / 2 = 160e9; PP has the
   * attention view's IB to itself (DP_Attn 8 left out): 320e9; TP_Attn has
   * NVLink to itself: 450e9. The DP tags keep their shares: DP_Attn 225e9 on
   * NVLink and 160e9 on IB as before, DP_MoE 320e9 / 3 (EP_SO, DP_MoE, PP). */
  t.dp_bandwidth_apart = 1;
  FTH_ENSURE_EQ_INT(1, fth_topology_group(&t, FTH_TAG_EP_SO, 1, lv, NULL));
  FTH_RUN(level_is(&lv[0], 4, 32, FTH_TOPO_TWO_TIER, 160e9, 5e-6, 0));
  FTH_ENSURE_EQ_INT(1, fth_topology_group(&t, FTH_TAG_PP, 1, lv, NULL));
  FTH_RUN(level_is(&lv[0], 4, 32, FTH_TOPO_TWO_TIER, 320e9, 5e-6, 0));
  FTH_ENSURE_EQ_INT(1, fth_topology_group(&t, FTH_TAG_TP_ATTN, 1, lv, NULL));
  FTH_RUN(level_is(&lv[0], 4, 8, FTH_TOPO_SWITCHED, 450e9, 1e-6, 1));
  FTH_ENSURE_EQ_INT(2, fth_topology_group(&t, FTH_TAG_DP_ATTN, 1, lv, NULL));
  FTH_RUN(level_is(&lv[0], 2, 8, FTH_TOPO_SWITCHED, 225e9, 1e-6, 1));
  FTH_RUN(level_is(&lv[1], 8, 32, FTH_TOPO_TWO_TIER, 160e9, 5e-6, 0));
  FTH_ENSURE_EQ_INT(1, fth_topology_group(&t, FTH_TAG_DP_MOE, 1, lv, NULL));
  FTH_RUN(level_is(&lv[0], 2, 32, FTH_TOPO_TWO_TIER, 320e9 / 3.0, 5e-6, 0));
  return 0;
}

/* Shares by traffic (processor sharing): tag i gets b_i / sum_j min(b_j, b_i)
 * of the link. The split() expert view on IB: EP_SO 4, DP_MoE 2, PP 4, moving
 * 700, 3.9 and 13 units a step. EP_SO: 700 / (700 + 3.9 + 13) = 700 / 716.9;
 * PP: 13 / (13 + 3.9 + 13) = 13 / 29.9; DP_MoE: 3.9 / (3 x 3.9) = 1/3. The
 * attention view on IB (DP_Attn 8 moving 50, PP 13): PP 13 / 26 = 1/2,
 * DP_Attn 50 / 63. Equal bytes give the even rule; a tag moving nothing, or no
 * bytes at all, the even rule too. */
static int groups_by_traffic(void) {
  fth_topology_def t = split();
  fth_group_level lv[FTH_MAX_PHYS_DIMS];
  double b[FTH_TAG_COUNT] = {0};
  b[FTH_TAG_EP_SO] = 700.0;
  b[FTH_TAG_DP_MOE] = 3.9;
  b[FTH_TAG_PP] = 13.0;
  b[FTH_TAG_DP_ATTN] = 50.0;
  b[FTH_TAG_TP_ATTN] = 50.0;
  FTH_ENSURE_EQ_INT(1, fth_topology_group_by_traffic(&t, FTH_TAG_EP_SO, b, lv, NULL));
  FTH_RUN(level_is(&lv[0], 4, 32, FTH_TOPO_TWO_TIER, 320e9 * 700.0 / 716.9, 5e-6, 0));
  FTH_ENSURE_EQ_INT(1, fth_topology_group_by_traffic(&t, FTH_TAG_DP_MOE, b, lv, NULL));
  FTH_RUN(level_is(&lv[0], 2, 32, FTH_TOPO_TWO_TIER, 320e9 / 3.0, 5e-6, 0));
  /* PP is in the attention view (PP shares with it): DP_Attn 50 and PP 13. */
  FTH_ENSURE_EQ_INT(1, fth_topology_group_by_traffic(&t, FTH_TAG_PP, b, lv, NULL));
  FTH_RUN(level_is(&lv[0], 4, 32, FTH_TOPO_TWO_TIER, 160e9, 5e-6, 0));
  /* DP_Attn: NVLink shared with TP_Attn moving the same (1/2), IB with PP: 50 / 63. */
  FTH_ENSURE_EQ_INT(2, fth_topology_group_by_traffic(&t, FTH_TAG_DP_ATTN, b, lv, NULL));
  FTH_RUN(level_is(&lv[0], 2, 8, FTH_TOPO_SWITCHED, 225e9, 1e-6, 1));
  FTH_RUN(level_is(&lv[1], 8, 32, FTH_TOPO_TWO_TIER, 320e9 * 50.0 / 63.0, 5e-6, 0));
  /* DP with CP (the data-parallel-with-CP group): CP 2 and DP_Attn 2 on NVLink
   * (beside TP_Attn 4), CP moving 1 and DP 50: the group spans both, 4 GPUs,
   * and shares NVLink with TP (50) and with CP by CP's own bytes: DP gets
   * 450e9 x 50 / (50 + 50 + min(1, 50)) = 450e9 x 50 / 101; evenly, a third. */
  fth_topology_def c = split();
  c.logical[2] = (fth_logical_dim_def){FTH_TAG_CP, 0, 2}; /* in place of TP_MoE */
  c.logical[3].size = 1;                                  /* no EP_SU */
  b[FTH_TAG_CP] = 1.0;
  FTH_ENSURE_EQ_INT(2, fth_topology_group_with(&c, FTH_TAG_DP_ATTN, FTH_TAG_CP, b, lv, NULL));
  FTH_ENSURE_EQ_INT(4, lv[0].group_size);
  FTH_RUN(level_is(&lv[0], 4, 8, FTH_TOPO_SWITCHED, 450e9 * 50.0 / 101.0, 1e-6, 1));
  FTH_ENSURE_EQ_INT(2, fth_topology_group_with(&c, FTH_TAG_DP_ATTN, FTH_TAG_CP, NULL, lv, NULL));
  FTH_RUN(level_is(&lv[0], 4, 8, FTH_TOPO_SWITCHED, 450e9 / 3.0, 1e-6, 1));
  /* Nothing moved: the even rule. */
  double zero[FTH_TAG_COUNT] = {0};
  FTH_ENSURE_EQ_INT(1, fth_topology_group_by_traffic(&t, FTH_TAG_EP_SO, zero, lv, NULL));
  FTH_RUN(level_is(&lv[0], 4, 32, FTH_TOPO_TWO_TIER, 320e9 / 3.0, 5e-6, 0));
  return 0;
}

static int tiling(void) {
  fth_error err;
  fth_topology_def t = two_level();
  /* DP_Attn 8 on 16 nodes: 8 != 16. Entry 4 is the attention view's first on IB. */
  t.logical[3].size = 8;
  FTH_RUN(refused(&t, "logical.dimensions[4]",
                  "physical dimension 2 has 16 GPUs but DP_Attn mapped to it = 8 = 8"));
  /* TP_MoE 2 x EP_SU 2 = 4 on the 8-GPU NVLink dimension; entry 2 (TP_MoE) is the
   * expert view's first there. */
  t = two_level();
  t.logical[1].size = 2;
  FTH_RUN(refused(&t, "logical.dimensions[2]",
                  "physical dimension 1 has 8 GPUs but TP_MoE x EP_SU mapped to it = 2 x 2 = 4"));
  /* Overfull: CP 2 beside TP_Attn 8 on NVLink makes 8 x 2 = 16 > 8. */
  t = two_level();
  t.logical[t.num_logical++] = (fth_logical_dim_def){FTH_TAG_CP, 0, 2};
  FTH_RUN(refused(&t, "logical.dimensions[1]",
                  "physical dimension 1 has 8 GPUs but TP_Attn x CP mapped to it = 8 x 2 = 16"));
  /* A view with nothing on a dimension is data parallel there: drop the expert
   * view's IB entries and the topology still tiles. */
  t = two_level();
  t.num_logical = 4;
  FTH_ENSURE(fth_topology_check(&t, &err) == FTH_OK);
  /* A view with only PP on a dimension is padded by DP when PP divides it: PP 4
   * alone on 8 GPUs (both views DP 2 beside it) tiles; PP 3 alone does not. */
  t = fth_topology_def_default();
  t.num_phys = 1;
  t.phys[0] = nvlink(8);
  t.num_logical = 1;
  t.logical[0] = (fth_logical_dim_def){FTH_TAG_PP, 0, 4};
  FTH_ENSURE(fth_topology_check(&t, &err) == FTH_OK);
  t.logical[0].size = 3;
  FTH_RUN(refused(&t, "logical.dimensions[1]",
                  "physical dimension 1 has 8 GPUs but PP mapped to it = 3 = 3"));
  /* Once a view has its own tag there, PP counts in its product: TP_Attn 2 x PP 4
   * = 8 tiles; the expert view (PP 4 only) is padded by DP 2. */
  t.logical[0].size = 4;
  t.logical[t.num_logical++] = (fth_logical_dim_def){FTH_TAG_TP_ATTN, 0, 2};
  FTH_ENSURE(fth_topology_check(&t, &err) == FTH_OK);
  t.logical[1].size = 4; /* 4 x 4 = 16 */
  FTH_RUN(refused(&t, "logical.dimensions[1]",
                  "physical dimension 1 has 8 GPUs but PP x TP_Attn mapped to it = 4 x 4 = 16"));
  return 0;
}

static int refusals(void) {
  fth_topology_def t = two_level();
  t.phys[1].size = 0;
  FTH_RUN(refused(&t, "dimensions[2].size", NULL));
  t = two_level();
  t.num_phys = 0;
  FTH_RUN(refused(&t, "dimensions", NULL));
  t = two_level();
  t.phys[0].type = FTH_TOPO_COUNT;
  FTH_RUN(refused(&t, "dimensions[1].topology_type", NULL));
  t = two_level();
  t.phys[0].link.efficiency = 0.0;
  FTH_RUN(refused(&t, "dimensions[1].interconnect.efficiency", NULL));
  t = two_level();
  t.phys[1].link.latency_s = NAN;
  FTH_RUN(refused(&t, "dimensions[2].interconnect.latency_sec", NULL));
  t = two_level();
  t.logical[4].size = 0;
  FTH_RUN(refused(&t, "logical.dimensions[5].size", NULL));
  t = two_level();
  t.logical[5].phys_dim = 2; /* only dimensions 1 and 2 exist */
  FTH_RUN(refused(&t, "logical.dimensions[6].maps_to_physical_dimension_name", NULL));
  t = two_level();
  t.logical[2].tag = FTH_TAG_COUNT;
  FTH_RUN(refused(&t, "logical.dimensions[3].logical_tag", NULL));
  /* A tag at most once per physical dimension: a second DP_Attn on IB. */
  t = two_level();
  t.logical[t.num_logical++] = (fth_logical_dim_def){FTH_TAG_DP_ATTN, 1, 1};
  FTH_RUN(refused(&t, "logical.dimensions[7].logical_tag",
                  "DP_Attn is mapped to physical dimension 2 twice (entries 4 and 7)"));
  t = two_level();
  t.expert_hb_group_xpus = -1;
  FTH_RUN(refused(&t, "expert_high_bandwidth_group_size_xpus", NULL));
  /* 2048^3 = 2^33 GPUs do not fit the int degrees. */
  t = fth_topology_def_default();
  t.num_phys = 3;
  for (int d = 0; d < 3; d++) t.phys[d] = nvlink(2048);
  FTH_RUN(refused(&t, "dimensions", "at most"));
  return 0;
}

/* Scale-out fabrics (issue 14 item 6): two_tier with a spine oversubscribed r:1, full_flat
 * one tier. Shares by hand from fth_topology.h, f = (g - min(g, L)) / (g - 1), 1/max(1, f r):
 *   g 64, L 16, r 4: f = 48/63, f r = 192/63 -> 63/192;   g 8, L 16: f = 0 -> 1;
 *   g 16, L 0 (unknown), r 2: f = 1 -> 1/2;   g 64, L 16, r 1.25: f r = 60/63 < 1 -> 1. */
static int scale_out_fabrics(void) {
  FTH_ENSURE_NEAR(63.0 / 192.0, fth_topology_spine_share(64, 16, 4.0), 1e-12);
  FTH_ENSURE_NEAR(1.0, fth_topology_spine_share(8, 16, 4.0), 1e-12);
  FTH_ENSURE_NEAR(0.5, fth_topology_spine_share(16, 0, 2.0), 1e-12);
  FTH_ENSURE_NEAR(1.0, fth_topology_spine_share(64, 16, 1.25), 1e-12);
  FTH_ENSURE_NEAR(1.0, fth_topology_spine_share(1, 0, 8.0), 1e-12);
  /* In a topology: 16 nodes x 8 GPUs, DP_Attn 16 on IB (320e9 B/s per GPU, above) with 4 GPUs
   * per leaf and 3:1 up-links: f = 12/15, f r = 2.4, 320e9 / 2.4 = 133.33e9 B/s; the same
   * group on one tier (full_flat) keeps 320e9 B/s and one hop of latency. */
  fth_group_level lv[FTH_MAX_PHYS_DIMS];
  fth_topology_def t = two_level();
  t.phys[1].link.oversubscription = 3.0;
  t.phys[1].link.leaf_xpus = 4;
  fth_error err;
  FTH_ENSURE(fth_topology_check(&t, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(1, fth_topology_group(&t, FTH_TAG_DP_ATTN, 1, lv, NULL));
  FTH_RUN(level_is(&lv[0], 16, 16, FTH_TOPO_TWO_TIER, 320e9 / 2.4, 5e-6, 0));
  t.phys[1].type = FTH_TOPO_FULL_FLAT;
  FTH_RUN(refused(&t, "dimensions[2].interconnect.oversubscription", "no spine"));
  t.phys[1].link.oversubscription = 1.0;
  FTH_ENSURE_EQ_INT(1, fth_topology_group(&t, FTH_TAG_DP_ATTN, 1, lv, NULL));
  FTH_RUN(level_is(&lv[0], 16, 16, FTH_TOPO_FULL_FLAT, 320e9, 5e-6, 0));
  /* Bad ratios and leaf sizes are the link's to refuse. */
  t = two_level();
  t.phys[1].link.oversubscription = 0.5;
  FTH_RUN(refused(&t, "dimensions[2].interconnect.oversubscription", ">= 1"));
  t = two_level();
  t.phys[1].link.leaf_xpus = -1;
  FTH_RUN(refused(&t, "dimensions[2].interconnect.leaf_size_xpus", NULL));
  return 0;
}

/* 32,768 GPUs placed in rank order on pods of 144 (NVLink above) joined by IB: 227 full
 * pods and 80 GPUs of a 228th (144 x 227 = 32,688). Attention view TP_Attn 8 x DP_Attn 4096,
 * expert view EP_SU 64 x DP_MoE 512, each listed innermost first. */
static fth_topology_def pods144(void) {
  fth_topology_def t = nvlink_over_ib(144, 228);
  t.placed = 1;
  t.num_xpus = 32768;
  t.num_logical = 4;
  t.logical[0] = (fth_logical_dim_def){FTH_TAG_TP_ATTN, 0, 8};
  t.logical[1] = (fth_logical_dim_def){FTH_TAG_DP_ATTN, 0, 4096};
  t.logical[2] = (fth_logical_dim_def){FTH_TAG_EP_SU, 0, 64};
  t.logical[3] = (fth_logical_dim_def){FTH_TAG_DP_MOE, 0, 512};
  return t;
}

/* Rank-order placement (fth_topology_place), counted by hand.
 * EP 64 at stride 1: groups [64 j, 64 j + 63], j < 512. The pod boundaries 144 p,
 * p = 1..227, are 144 apart (> 64), so each falls in one group, which straddles unless
 * 144 p is a multiple of 64 (9 p = 0 mod 4: p = 4, 8, ..., 224, 56 of them): 227 - 56 = 171
 * straddle. 144 p mod 64 = 16 (p mod 4) mod 64: runs 16 | 48 (p = 1, 3 mod 4, 57 each) or
 * 32 | 32 (p = 2 mod 4, 57). The slowest group's worst member sees 16 peers in its pod,
 * itself included, and the other 48 across: levels 16 and 64 / 16 = 4, over 2 pods.
 * Pair traffic across: 2 c (64 - c) per straddling group: 114 x 2 x 16 x 48 + 57 x 2 x 32 x
 * 32 = 291,840 of 512 x 64 x 63. TP 8 at stride 1: 144 = 18 x 8, no group straddles.
 * DP_MoE 512 at stride 64: a full pod holds 2 or 3 of a group (144 / 64 = 2.25), but the
 * 80-GPU last pod (32,688..32,767) holds only 32,704 of the group of r0 = 0 (32,640 is in
 * pod 226): that member has no peer in its pod, so level 1 and all 512 across. */
static int placed_groups(void) {
  fth_topology_def t = pods144();
  fth_error err;
  FTH_ENSURE(fth_topology_check(&t, &err) == FTH_OK);
  FTH_ENSURE_NEAR(32768.0, fth_topology_num_gpus(&t), 1e-12);
  fth_rank_place p;
  fth_topology_place(&t, 1u << FTH_TAG_EP_SU, &p);
  FTH_ENSURE_EQ_INT(64, p.size);
  FTH_ENSURE_NEAR(512.0, p.groups, 1e-12);
  FTH_ENSURE_NEAR(171.0, p.straddling, 1e-12);
  FTH_ENSURE_NEAR(16.0, p.level[0], 1e-12);
  FTH_ENSURE_NEAR(4.0, p.level[1], 1e-12);
  FTH_ENSURE_EQ_INT(2, p.blocks);
  FTH_ENSURE_NEAR((114.0 * 2 * 16 * 48 + 57.0 * 2 * 32 * 32) / (512.0 * 64 * 63), p.cross_fraction,
                  1e-12);
  fth_topology_place(&t, 1u << FTH_TAG_TP_ATTN, &p);
  FTH_ENSURE_NEAR(0.0, p.straddling, 1e-12);
  FTH_ENSURE_NEAR(8.0, p.level[0], 1e-12);
  FTH_ENSURE_NEAR(1.0, p.level[1], 1e-12);
  FTH_ENSURE_NEAR(0.0, p.cross_fraction, 1e-12);
  fth_topology_place(&t, 1u << FTH_TAG_DP_MOE, &p);
  FTH_ENSURE_NEAR(1.0, p.level[0], 1e-12);
  FTH_ENSURE_NEAR(512.0, p.level[1], 1e-12);
  /* ... yet its groups in the full pods move bytes inside them: it uses both dimensions. */
  FTH_ENSURE(p.uses[0] && p.uses[1]);
  fth_topology_place(&t, 1u << FTH_TAG_TP_ATTN, &p);
  FTH_ENSURE(p.uses[0] && !p.uses[1]);
  /* EP 72 x DP 2 inside each of 4 full pods of 144: no EP group straddles. */
  fth_topology_def c = pods144();
  c.num_xpus = 576;
  c.phys[1] = infiniband(4);
  c.logical[1].size = 72;
  c.logical[2].size = 72;
  c.logical[3].size = 8;
  FTH_ENSURE(fth_topology_check(&c, &err) == FTH_OK);
  fth_topology_place(&c, 1u << FTH_TAG_EP_SU, &p);
  FTH_ENSURE_NEAR(0.0, p.straddling, 1e-12);
  FTH_ENSURE_NEAR(72.0, p.level[0], 1e-12);
  FTH_ENSURE_NEAR(1.0, p.level[1], 1e-12);
  return 0;
}

/* The all-to-all of the slowest straddling EP group against a contained one (direct
 * exchange, unshared links). m bytes per rank, m / 64 to each peer. Straddling: 15 peers
 * in the pod at NVLink's 450e9 B/s, 48 across at IB's 320e9 B/s, both at once:
 * max(15 m / 64 / 450e9, 48 m / 64 / 320e9) = 48 m / (64 x 320e9). Contained (pods of
 * 128, EP 64 inside): 63 m / (64 x 450e9), 3.2x faster. Shared evenly, each dimension
 * carries the expert view's EP and DP_MoE (both have a level above 1 on each): 225e9 and
 * 160e9 B/s. */
static int placed_all_to_all(void) {
  fth_topology_def t = pods144();
  fth_rank_place self, tags[FTH_TAG_COUNT];
  for (int k = 0; k < FTH_TAG_COUNT; k++) fth_topology_place(&t, 1u << k, &tags[k]);
  fth_topology_place(&t, 1u << FTH_TAG_EP_SU, &self);
  fth_group_level lv[FTH_MAX_PHYS_DIMS];
  int n = fth_topology_group_placed(&t, FTH_TAG_EP_SU, &self, tags, 0, NULL, lv, NULL);
  FTH_ENSURE_EQ_INT(2, n);
  FTH_ENSURE_EQ_INT(16, lv[0].group_size);
  FTH_ENSURE_EQ_INT(4, lv[1].group_size);
  FTH_ENSURE_NEAR(450e9, lv[0].bw_bytes_per_s, 1e-12);
  FTH_ENSURE_NEAR(320e9, lv[1].bw_bytes_per_s, 1e-12);
  const double m = 64e6;
  fth_coll_result r = fth_collective(FTH_COLL_ALL_TO_ALL, FTH_ALGO_DIRECT, m, lv, n, NULL);
  FTH_ENSURE_NEAR(48.0 * m / (64.0 * 320e9), r.transfer_s, 1e-12);
  fth_topology_def c = t;
  c.num_xpus = 32768;
  c.phys[0] = nvlink(128);
  c.phys[1] = infiniband(256);
  fth_topology_place(&c, 1u << FTH_TAG_EP_SU, &self);
  for (int k = 0; k < FTH_TAG_COUNT; k++) fth_topology_place(&c, 1u << k, &tags[k]);
  n = fth_topology_group_placed(&c, FTH_TAG_EP_SU, &self, tags, 0, NULL, lv, NULL);
  FTH_ENSURE_EQ_INT(1, n);
  fth_coll_result in = fth_collective(FTH_COLL_ALL_TO_ALL, FTH_ALGO_DIRECT, m, lv, n, NULL);
  FTH_ENSURE_NEAR(63.0 * m / (64.0 * 450e9), in.transfer_s, 1e-12);
  FTH_ENSURE_NEAR(48.0 * 450e9 / (63.0 * 320e9), r.transfer_s / in.transfer_s, 1e-12);
  /* Shared evenly (fth_topology_group_placed, shared = 1). */
  fth_topology_place(&t, 1u << FTH_TAG_EP_SU, &self);
  for (int k = 0; k < FTH_TAG_COUNT; k++) fth_topology_place(&t, 1u << k, &tags[k]);
  n = fth_topology_group_placed(&t, FTH_TAG_EP_SU, &self, tags, 1, NULL, lv, NULL);
  FTH_ENSURE_NEAR(225e9, lv[0].bw_bytes_per_s, 1e-12);
  FTH_ENSURE_NEAR(160e9, lv[1].bw_bytes_per_s, 1e-12);
  return 0;
}

/* Placed refusals: a view not multiplying to the job, more GPUs than the pods hold, PP at
 * different strides in the two views. */
static int placed_refusals(void) {
  fth_topology_def t = pods144();
  t.logical[3].size = 256;
  FTH_RUN(refused(&t, "logical.dimensions", "expert-view degrees multiply to 16384"));
  t = pods144();
  t.num_xpus = 144.0 * 228 + 1;
  FTH_RUN(refused(&t, "num_xpus", "32832"));
  t = pods144();
  t.num_logical = 5;
  t.logical[0] = (fth_logical_dim_def){FTH_TAG_TP_ATTN, 0, 8};
  t.logical[1] = (fth_logical_dim_def){FTH_TAG_EP_SU, 0, 64};
  t.logical[2] = (fth_logical_dim_def){FTH_TAG_PP, 0, 8};
  t.logical[3] = (fth_logical_dim_def){FTH_TAG_DP_ATTN, 0, 512};
  t.logical[4] = (fth_logical_dim_def){FTH_TAG_DP_MOE, 0, 64};
  /* PP after TP 8 (attention, stride 8) and after EP 64 (expert, stride 64) */
  FTH_RUN(refused(&t, "logical.dimensions[3]", "stride 8 in the attention view but 64"));
  return 0;
}

int topology_test(void) {
  FTH_RUN(placed_groups());
  FTH_RUN(placed_all_to_all());
  FTH_RUN(placed_refusals());
  FTH_RUN(scale_out_fabrics());
  FTH_RUN(names());
  FTH_RUN(sizes());
  FTH_RUN(groups_two_level());
  FTH_RUN(groups_split());
  FTH_RUN(groups_by_traffic());
  FTH_RUN(tiling());
  FTH_RUN(refusals());
  return 0;
}
