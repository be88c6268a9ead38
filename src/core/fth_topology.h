/* fth_topology.h: physical dimensions (fabrics of a given shape and size) and
 * the logical parallelism dimensions mapped onto them.
 *
 * Two views tile the same GPUs (ScaleScope's convention): the attention view
 * TP_Attn x CP x DP_Attn x PP and the expert view TP_MoE x EP_SU x EP_SO x
 * DP_MoE x PP. On each physical dimension, the product of the sizes of one
 * view's logical dimensions mapped there must equal the physical size (a view
 * that maps nothing to a dimension of size > 1 is padded by DP on that view). */
#ifndef FTH_TOPOLOGY_H
#define FTH_TOPOLOGY_H

#include "fth_common.h"
#include "fth_hardware.h"

#define FTH_MAX_PHYS_DIMS    8
#define FTH_MAX_LOGICAL_DIMS 16

/// Shape of one physical dimension.
typedef enum fth_topo_type {
  FTH_TOPO_SWITCHED = 0,  ///< every GPU reaches every other through a switch at full link rate
  FTH_TOPO_RING = 1,      ///< each GPU linked to two neighbours; links split between them
  FTH_TOPO_MESH = 2,      ///< full mesh: a direct link to each of the size-1 peers
  FTH_TOPO_TORUS = 3,     ///< one ring dimension of a torus (a k-D torus is k dimensions)
  FTH_TOPO_FULL_FLAT = 4, ///< one switch tier, uniform bandwidth between any two GPUs (no oversubscription)
  FTH_TOPO_TWO_TIER = 5,  ///< leaf/spine: two switch hops between leaves, spine oversubscribed by a ratio
  FTH_TOPO_COUNT
} fth_topo_type;

/// YAML names: "switched", "ring", "mesh", "torus", "full_flat", "two_tier".
const char *fth_topo_type_name(fth_topo_type t);
fth_topo_type fth_topo_type_parse(const char *name); ///< FTH_TOPO_COUNT when unknown

typedef struct fth_phys_dim_def {
  fth_topo_type type;
  int size;          ///< GPUs along this dimension (> 0)
  fth_link_def link; ///< the interconnect this dimension uses, per GPU
} fth_phys_dim_def;

/// Logical parallelism tags (ScaleScope `logical_tag`).
typedef enum fth_logical_tag {
  FTH_TAG_TP_ATTN = 0,
  FTH_TAG_TP_MOE,
  FTH_TAG_DP_ATTN,
  FTH_TAG_DP_MOE,
  FTH_TAG_EP_SU,
  FTH_TAG_EP_SO,
  FTH_TAG_PP,
  FTH_TAG_CP,
  FTH_TAG_COUNT
} fth_logical_tag;

const char *fth_logical_tag_name(fth_logical_tag t);     ///< "TP_Attn", "EP_SU", ...
fth_logical_tag fth_logical_tag_parse(const char *name); ///< FTH_TAG_COUNT when unknown

typedef struct fth_logical_dim_def {
  fth_logical_tag tag;
  int phys_dim; ///< index into fth_topology_def.phys
  int size;     ///< degree (> 0)
} fth_logical_dim_def;

typedef struct fth_topology_def {
  int num_phys;
  fth_phys_dim_def phys[FTH_MAX_PHYS_DIMS]; ///< innermost (fastest) first by convention
  int num_logical;
  fth_logical_dim_def logical[FTH_MAX_LOGICAL_DIMS];
  int expert_hb_group_xpus; ///< optional EP high-bandwidth group size; 0 = unset
  int dp_bandwidth_apart;   ///< 1: DP reductions do not reduce the other tags' shares (below)
  int share_by_traffic;     ///< 1: shares follow each tag's bytes per step (processor sharing)
  /// 1: rank-order placement (fth_topology_place): the logical dimensions, in their listed
  /// order innermost first, number the ranks, and the ranks fill the physical dimensions
  /// block by block (rank r sits in pod floor(r / phys[0].size)); `phys_dim` is unused and
  /// the degrees need not divide a pod. 0: each logical dimension lives on its `phys_dim`,
  /// whose size the view's degrees there tile.
  int placed;
  /// Placed only: GPUs the job runs on (<= the product of the physical sizes; the last
  /// blocks may be partly used). 0: the product.
  double num_xpus;
} fth_topology_def;

fth_topology_def fth_topology_def_default(void);

/// Validates sizes, indices and tiling. Paths name `dimensions[i].field` of the
/// physical topology or `logical.dimensions[i].field`; a tiling failure names
/// the physical dimension and both products ("physical dimension 'x' has 8
/// GPUs but TP_Attn x DP_Attn = 4 x 4 = 16").
fth_status fth_topology_check(const fth_topology_def *def, fth_error *err);

/// Share of its link bandwidth a GPU of a `group_size` group gets on a two-tier (leaf/spine)
/// fabric with `leaf_xpus` GPUs per leaf and leaf up-links `oversubscription` times thinner
/// than its down-links. The group is placed leaf by leaf (as schedulers place jobs), so
/// min(g, L) of its g members share a leaf and a fraction f = (g - min(g, L)) / (g - 1) of
/// each GPU's traffic (uniform over its peers) crosses the spine; the leaf's up-links carry
/// L B / r, so moving m bytes takes max(m / B, f m r / B): share = 1 / max(1, f r).
/// `leaf_xpus` 0 (unknown) puts every peer across the spine (f = 1); a group of 1, or
/// oversubscription 1, gets all of it. Ring algorithms send less across the spine than a
/// uniform exchange; they are charged the same (an upper bound on their time).
double fth_topology_spine_share(int group_size, int leaf_xpus, double oversubscription);

/// Rank-order placement of one communication group kind (fth_topology_def.placed): the
/// groups of the logical dimensions whose tags are in `tag_mask` (bit 1 << tag; one view:
/// the expert view if any expert-only tag is in it, else the attention view, PP in both).
/// A dimension's stride is the product of the sizes listed before it in its view; a group
/// is every rank reached from a base rank by varying the masked dimensions' coordinates.
/// For every group and every physical dimension d but the last, the group's members fall
/// in runs of consecutive blocks of B_d = size_0 x ... x size_d ranks (rank r in block
/// floor(r / B_d)); n_d is the group's smallest run (its worst-placed member's peers in its
/// own block, itself included). The slowest group has the smallest n_0 (then n_1, ...):
/// all its ranks wait for that member. `level[d]` = n_d / n_(d-1) (n_(-1) = 1, n_last = the
/// group size), so the levels multiply to the group size and a straddling group reads as
/// its worst member sees it: n_0 peers at the pod's bandwidth, the rest across. Never
/// allocates; O(num_xpus x masked dimensions).
typedef struct fth_rank_place {
  double level[FTH_MAX_PHYS_DIMS]; ///< the slowest group's members per level (above)
  int size;                        ///< GPUs in a group (product of the masked degrees)
  int blocks;                      ///< blocks of dimension 0 (pods) the slowest group spans
  double groups;                   ///< groups in all (num_xpus / size)
  double straddling;               ///< groups spanning more than one block of dimension 0
  /// share of a uniform exchange's pair traffic (every member to every other, summed over
  /// every group) that crosses a dimension-0 boundary: sum over groups and runs c of
  /// c (g - c), over groups x g (g - 1)
  double cross_fraction;
  /// 1 where some group moves bytes over dimension d: two members in one block of d (d = 0),
  /// or in one block of d but different blocks of d - 1; the users of d when links are shared
  int uses[FTH_MAX_PHYS_DIMS];
} fth_rank_place;

void fth_topology_place(const fth_topology_def *def, unsigned tag_mask, fth_rank_place *out);

/// Rank stride of logical dimension `i` in a placed topology's view (`expert_view` 0: the
/// attention view; PP is in both): the product of the sizes of that view's dimensions listed
/// before it. The one owner of the rank order that fth_topology_place and the traces use.
double fth_topology_rank_stride(const fth_topology_def *def, int i, int expert_view);

/// Total GPUs = product of physical sizes (placed: num_xpus when set).
double fth_topology_num_gpus(const fth_topology_def *def);

/// Degree of a logical tag = product of the sizes of every logical dimension with that tag
/// (a tag may be split over several physical dimensions); 1 when absent.
int fth_topology_degree(const fth_topology_def *def, fth_logical_tag tag);

/// One level of a communication group: the slice of a physical dimension a
/// logical tag occupies, with the bandwidth it gets there.
typedef struct fth_group_level {
  int group_size; ///< GPUs of the group on this dimension
  int dim_size;   ///< GPUs on the physical dimension (>= group_size)
  fth_topo_type type;
  double bw_bytes_per_s; ///< effective per-GPU bandwidth for this group, after sharing
  double latency_s;
  int in_network_reduction;
  int pcie_peer; ///< the fabric is PCIe peer-to-peer (fth_link_def.pcie_peer)
  /// GPUs of the group on this level as a real number, where a placed group falls unevenly
  /// over the blocks (fth_rank_place.level; group_size is then its ceiling); 0: group_size
  double span;
} fth_group_level;

/// Describe the communication group of `tag` as up to FTH_MAX_PHYS_DIMS levels,
/// innermost first (levels of size 1 omitted). A physical dimension on which a
/// view maps nothing but PP is that view's implicit DP (its size over PP's).
/// Bandwidth sharing: when k logical dimensions of the same view with size > 1
/// share one physical dimension, each gets 1/k of its bandwidth when `shared`
/// is set (they may run at once), all of it otherwise. PP shares with the
/// attention view. With `dp_bandwidth_apart` the data-parallel tags (DP_Attn,
/// DP_MoE), whose gradient reductions run once per step in a window at its end,
/// still take their 1/k but are not counted in the other tags' k: the layer and
/// pipeline collectives, which run all step long, split the dimension among
/// themselves. `levels` holds FTH_MAX_PHYS_DIMS entries; `inner_dim`
/// (may be NULL) receives the innermost physical dimension used, -1 if none.
/// Returns the number of levels written (0 when the tag is absent or every
/// size is 1).
///
/// `fth_topology_group_by_traffic` shares by traffic instead: with each tag's bytes
/// per step b (`tag_bytes`, indexed by fth_logical_tag), a work-conserving, max-min
/// fair link (processor sharing, Kleinrock 1967) finishes tag i's bytes after
/// sum_j min(b_j, b_i) / B, so i gets the share b_i / sum_j min(b_j, b_i): 1/k when
/// all move the same bytes (the even rule), nearly all of the link for a tag that
/// moves far more than the others (DeepSeek-V3's all-to-all beside its pipeline
/// sends), and 1/k' for a small one among k' larger. A tag moving nothing, or
/// NULL `tag_bytes`, falls back to the even rule.
int fth_topology_group_by_traffic(const fth_topology_def *def, fth_logical_tag tag,
                                  const double *tag_bytes, fth_group_level *levels,
                                  int *inner_dim);

/// The group of `tag` joined by the dimensions of `also` (DP with CP: the
/// data-parallel-with-CP group), each dimension keeping its own tag, and so its
/// own bytes, in the sharing; `tag_bytes` NULL shares evenly.
int fth_topology_group_with(const fth_topology_def *def, fth_logical_tag tag, fth_logical_tag also,
                            const double *tag_bytes, fth_group_level *levels, int *inner_dim);

/// The group of a placed topology: levels from `self` (fth_topology_place of the group's
/// tags), one per physical dimension whose level exceeds 1, with `span` set to it. Sharing
/// as above, the users of dimension d being the view's tags whose own placement
/// (`tag_place`, indexed by fth_logical_tag) uses d. `tag` names the group's
/// view and its bytes in `tag_bytes` (NULL: the even rule; `shared` 0: no sharing).
int fth_topology_group_placed(const fth_topology_def *def, fth_logical_tag tag,
                              const fth_rank_place *self, const fth_rank_place *tag_place,
                              int shared, const double *tag_bytes, fth_group_level *levels,
                              int *inner_dim);

int fth_topology_group(const fth_topology_def *def, fth_logical_tag tag, int shared,
                       fth_group_level *levels, int *inner_dim);

#endif
