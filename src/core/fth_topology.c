/* fth_topology.c: physical dimensions, logical mappings and their tiling. */
#include "fth_topology.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const topo_names[FTH_TOPO_COUNT] = {"switched", "ring",      "mesh",
                                                       "torus",    "full_flat", "two_tier"};

const char *fth_topo_type_name(fth_topo_type t) {
  return (t >= 0 && t < FTH_TOPO_COUNT) ? topo_names[t] : NULL;
}

fth_topo_type fth_topo_type_parse(const char *name) {
  if (name == NULL) return FTH_TOPO_COUNT;
  for (int i = 0; i < FTH_TOPO_COUNT; i++)
    if (strcmp(name, topo_names[i]) == 0) return (fth_topo_type)i;
  return FTH_TOPO_COUNT;
}

static const char *const tag_names[FTH_TAG_COUNT] = {"TP_Attn", "TP_MoE", "DP_Attn", "DP_MoE",
                                                     "EP_SU",   "EP_SO",  "PP",      "CP"};

const char *fth_logical_tag_name(fth_logical_tag t) {
  return (t >= 0 && t < FTH_TAG_COUNT) ? tag_names[t] : NULL;
}

fth_logical_tag fth_logical_tag_parse(const char *name) {
  if (name == NULL) return FTH_TAG_COUNT;
  for (int i = 0; i < FTH_TAG_COUNT; i++)
    if (strcmp(name, tag_names[i]) == 0) return (fth_logical_tag)i;
  return FTH_TAG_COUNT;
}

fth_topology_def fth_topology_def_default(void) {
  fth_topology_def t;
  memset(&t, 0, sizeof t);
  for (int i = 0; i < FTH_MAX_PHYS_DIMS; i++) t.phys[i].link = fth_link_def_default();
  t.share_by_traffic = 1; /* processor sharing (fth_topology_group_by_traffic) */
  return t;
}

/* View membership (fth_topology.h): PP belongs to both views. */
static int in_view(fth_logical_tag t, int expert_view) {
  if (t == FTH_TAG_PP) return 1;
  if (expert_view)
    return t == FTH_TAG_TP_MOE || t == FTH_TAG_EP_SU || t == FTH_TAG_EP_SO || t == FTH_TAG_DP_MOE;
  return t == FTH_TAG_TP_ATTN || t == FTH_TAG_CP || t == FTH_TAG_DP_ATTN;
}

/* Product of one view's sizes on dimension d, its factors as text (text and sizes NULL: none), the
 * index of the view's first logical dimension there (-1 if none) and whether
 * any of them is specific to the view (not PP, which both views share). */
static double view_product(const fth_topology_def *t, int d, int expert_view, char *text,
                           size_t text_size, char *sizes, size_t sizes_size, int *first,
                           int *specific) {
  double prod = 1.0;
  *first = -1;
  *specific = 0;
  if (text) text[0] = '\0';
  if (sizes) sizes[0] = '\0';
  for (int i = 0; i < t->num_logical; i++) {
    const fth_logical_dim_def *l = &t->logical[i];
    if (l->phys_dim != d || !in_view(l->tag, expert_view)) continue;
    if (*first < 0) *first = i;
    if (l->tag != FTH_TAG_PP) *specific = 1;
    prod *= (double)l->size;
    if (!text || !sizes) continue; /* the product only: the texts are for an error */
    size_t n = strlen(text), m = strlen(sizes);
    snprintf(text + n, text_size - n, "%s%s", n ? " x " : "", fth_logical_tag_name(l->tag));
    snprintf(sizes + m, sizes_size - m, "%s%d", m ? " x " : "", l->size);
  }
  return prod;
}

static double phys_product(const fth_topology_def *t) {
  double n = 1.0;
  for (int d = 0; d < t->num_phys; d++) n *= (double)t->phys[d].size;
  return n;
}

double fth_topology_rank_stride(const fth_topology_def *t, int i, int expert_view) {
  double s = 1.0;
  for (int j = 0; j < i; j++)
    if (in_view(t->logical[j].tag, expert_view)) s *= (double)t->logical[j].size;
  return s;
}

/* Rank-order placement (fth_topology_def.placed): both views number the job's ranks, PP
 * at the same stride in both (the two views' PP groups are one set of stages). */
static fth_status placed_check(const fth_topology_def *t, fth_error *err) {
  double n = fth_topology_num_gpus(t), cap = phys_product(t);
  if (!(n >= 1.0) || n != floor(n) || n > cap)
    return fth_fail(err, FTH_EINVAL, "num_xpus",
                    "expected a whole number of GPUs from 1 to the %.0f the physical dimensions "
                    "hold, got %.0f",
                    cap, n);
  if (n > (double)INT_MAX)
    return fth_fail(err, FTH_EINVAL, "num_xpus", "expected at most %d GPUs in all, got %.0f",
                    INT_MAX, n);
  for (int v = 0; v < 2; v++) {
    double prod = 1.0;
    int specific = 0; /* a view with nothing of its own (a dense model's expert view) */
    for (int i = 0; i < t->num_logical; i++)
      if (in_view(t->logical[i].tag, v)) {
        prod *= (double)t->logical[i].size;
        specific |= t->logical[i].tag != FTH_TAG_PP;
      }
    if (!specific && fmod(n, prod) == 0.0) continue;
    if (prod != n)
      return fth_fail(err, FTH_EINVAL, "logical.dimensions",
                      "the %s degrees multiply to %.0f but the job has %.0f GPUs (placed in rank "
                      "order, each view's sizes must multiply to the GPU count)",
                      v ? "expert-view" : "attention-view", prod, n);
  }
  int expert_own = 0; /* a dense model's expert view holds only PP: its stride is moot */
  for (int i = 0; i < t->num_logical; i++)
    expert_own |= t->logical[i].tag != FTH_TAG_PP && in_view(t->logical[i].tag, 1);
  for (int i = 0; i < t->num_logical && expert_own; i++) {
    if (t->logical[i].tag != FTH_TAG_PP) continue;
    double sa = fth_topology_rank_stride(t, i, 0), se = fth_topology_rank_stride(t, i, 1);
    if (sa != se) {
      char path[64];
      snprintf(path, sizeof path, "logical.dimensions[%d]", i + 1);
      return fth_fail(err, FTH_EINVAL, path,
                      "PP sits at rank stride %.0f in the attention view but %.0f in the expert "
                      "view (list the same product of each view's sizes before PP, or put PP "
                      "first or last)",
                      sa, se);
    }
  }
  if (t->expert_hb_group_xpus < 0)
    return fth_fail(err, FTH_EINVAL, "expert_high_bandwidth_group_size_xpus",
                    "expected >= 0, got %d", t->expert_hb_group_xpus);
  return FTH_OK;
}

fth_status fth_topology_check(const fth_topology_def *t, fth_error *err) {
  char path[64];
  if (t->num_phys < 1 || t->num_phys > FTH_MAX_PHYS_DIMS)
    return fth_fail(err, FTH_EINVAL, "dimensions", "expected 1 to %d physical dimensions, got %d",
                    FTH_MAX_PHYS_DIMS, t->num_phys);
  if (t->num_logical < 0 || t->num_logical > FTH_MAX_LOGICAL_DIMS)
    return fth_fail(err, FTH_EINVAL, "logical.dimensions", "expected at most %d, got %d",
                    FTH_MAX_LOGICAL_DIMS, t->num_logical);
  for (int d = 0; d < t->num_phys; d++) {
    const fth_phys_dim_def *p = &t->phys[d];
    if (p->size < 1) {
      snprintf(path, sizeof path, "dimensions[%d].size", d + 1);
      return fth_fail(err, FTH_EINVAL, path, "expected an integer >= 1, got %d", p->size);
    }
    if (p->type < 0 || p->type >= FTH_TOPO_COUNT) {
      snprintf(path, sizeof path, "dimensions[%d].topology_type", d + 1);
      return fth_fail(err, FTH_EINVAL, path, "unknown topology type");
    }
    if (fth_link_check(&p->link, err) != FTH_OK) {
      snprintf(path, sizeof path, "dimensions[%d].interconnect", d + 1);
      return fth_error_prefix(err, path);
    }
    /* One tier (full_flat, switched, ...) has no spine to oversubscribe. */
    if (p->type != FTH_TOPO_TWO_TIER && p->link.oversubscription != 1.0) {
      snprintf(path, sizeof path, "dimensions[%d].interconnect.oversubscription", d + 1);
      return fth_fail(err, FTH_EINVAL, path,
                      "a %s dimension has no spine to oversubscribe, got %g (use topology_type "
                      "two_tier, or 1)",
                      fth_topo_type_name(p->type), p->link.oversubscription);
    }
  }
  for (int i = 0; i < t->num_logical; i++) {
    const fth_logical_dim_def *l = &t->logical[i];
    if (l->tag < 0 || l->tag >= FTH_TAG_COUNT) {
      snprintf(path, sizeof path, "logical.dimensions[%d].logical_tag", i + 1);
      return fth_fail(err, FTH_EINVAL, path, "unknown logical tag");
    }
    if (l->phys_dim < 0 || l->phys_dim >= t->num_phys) {
      snprintf(path, sizeof path, "logical.dimensions[%d].maps_to_physical_dimension_name", i + 1);
      return fth_fail(err, FTH_EINVAL, path, "no physical dimension %d", l->phys_dim + 1);
    }
    if (l->size < 1) {
      snprintf(path, sizeof path, "logical.dimensions[%d].size", i + 1);
      return fth_fail(err, FTH_EINVAL, path, "expected an integer >= 1, got %d", l->size);
    }
    for (int j = 0; j < i && !t->placed; j++) { /* placed: a tag may recur at other strides */
      if (t->logical[j].tag == l->tag && t->logical[j].phys_dim == l->phys_dim) {
        snprintf(path, sizeof path, "logical.dimensions[%d].logical_tag", i + 1);
        return fth_fail(err, FTH_EINVAL, path,
                        "%s is mapped to physical dimension %d twice (entries %d and %d)",
                        fth_logical_tag_name(l->tag), l->phys_dim + 1, j + 1, i + 1);
      }
    }
  }
  if (t->placed) return placed_check(t, err);
  /* Tiling: on every physical dimension, each view's sizes multiply to its
   * size; a view with nothing of its own mapped there (at most the shared PP)
   * is data parallel over what is left, so its product need only divide it. */
  for (int d = 0; d < t->num_phys; d++) {
    for (int v = 0; v < 2; v++) {
      char tags[160], sizes[96];
      int first, specific;
      double prod = view_product(t, d, v, NULL, 0, NULL, 0, &first, &specific);
      if (first < 0) continue;
      if (!specific && fmod((double)t->phys[d].size, prod) == 0.0) continue;
      if (prod != (double)t->phys[d].size) {
        view_product(t, d, v, tags, sizeof tags, sizes, sizeof sizes, &first, &specific);
        snprintf(path, sizeof path, "logical.dimensions[%d]", first + 1);
        return fth_fail(err, FTH_EINVAL, path,
                        "physical dimension %d has %d GPUs but %s mapped to it = %s = %.0f (the %s "
                        "sizes on a dimension must multiply to its size)",
                        d + 1, t->phys[d].size, tags, sizes, prod,
                        v ? "expert-view" : "attention-view");
      }
    }
  }
  /* Degrees and group sizes are ints; every one divides the GPU count once the views tile. */
  if (fth_topology_num_gpus(t) > (double)INT_MAX)
    return fth_fail(err, FTH_EINVAL, "dimensions", "expected at most %d GPUs in all, got %.0f",
                    INT_MAX, fth_topology_num_gpus(t));
  if (t->expert_hb_group_xpus < 0)
    return fth_fail(err, FTH_EINVAL, "expert_high_bandwidth_group_size_xpus",
                    "expected >= 0, got %d", t->expert_hb_group_xpus);
  return FTH_OK;
}

/* Follows fth_topology.h: f = (g - min(g, L)) / (g - 1), share = 1 / max(1, f r). */
double fth_topology_spine_share(int group_size, int leaf_xpus, double oversubscription) {
  if (group_size <= 1 || !(oversubscription > 1.0)) return 1.0;
  double g = (double)group_size;
  double in_leaf = leaf_xpus > 0 ? fth_min(g, (double)leaf_xpus) : 1.0;
  double f = (g - in_leaf) / (g - 1.0);
  return 1.0 / fth_max(1.0, f * oversubscription);
}

double fth_topology_num_gpus(const fth_topology_def *t) {
  if (t->placed && t->num_xpus > 0) return t->num_xpus;
  return phys_product(t);
}

/* Follows fth_topology.h. The masked dimensions' coordinates are digits of a mixed radix
 * whose place values grow with the listed order (each stride is the product of every size
 * before it), so a group's members, enumerated innermost digit fastest, come in ascending
 * rank order and the members sharing a block are consecutive: runs. */
void fth_topology_place(const fth_topology_def *t, unsigned mask, fth_rank_place *out) {
  memset(out, 0, sizeof *out);
  int expert_view = 0;
  for (int i = 0; i < t->num_logical; i++) {
    fth_logical_tag tag = t->logical[i].tag;
    if ((mask >> tag & 1u) && tag != FTH_TAG_PP && in_view(tag, 1)) expert_view = 1;
  }
  long long stride[FTH_MAX_LOGICAL_DIMS], size[FTH_MAX_LOGICAL_DIMS];
  int k = 0;
  long long g = 1;
  for (int i = 0; i < t->num_logical; i++) {
    const fth_logical_dim_def *l = &t->logical[i];
    if (!in_view(l->tag, expert_view) || !(mask >> l->tag & 1u) || l->size <= 1) continue;
    stride[k] = (long long)fth_topology_rank_stride(t, i, expert_view);
    size[k++] = l->size;
    g *= l->size;
  }
  const long long n = (long long)fth_topology_num_gpus(t);
  const int nd = t->num_phys > 0 ? t->num_phys : 1;
  long long block[FTH_MAX_PHYS_DIMS];
  long long b = 1;
  for (int d = 0; d < nd; d++) {
    b *= t->num_phys > 0 ? t->phys[d].size : 1;
    block[d] = b;
  }
  out->size = (int)g;
  out->groups = g > 0 ? (double)(n / g) : 0.0;
  out->level[0] = (double)g;
  out->blocks = 1;
  if (g <= 1 || n < g) return;
  /* Levels below the last: n_d per group, the slowest group's kept. */
  long long best[FTH_MAX_PHYS_DIMS];
  for (int d = 0; d < nd; d++) best[d] = g;
  int best_blocks = 1;
  double cross = 0.0, straddling = 0.0;
  for (long long r0 = 0; r0 < n; r0++) {
    int base = 1;
    for (int j = 0; j < k && base; j++) base = (r0 / stride[j]) % size[j] == 0;
    if (!base) continue;
    long long digit[FTH_MAX_LOGICAL_DIMS] = {0};
    long long cur[FTH_MAX_PHYS_DIMS], run[FTH_MAX_PHYS_DIMS], least[FTH_MAX_PHYS_DIMS];
    int runs0 = 0;
    for (int d = 0; d < nd; d++) {
      cur[d] = -1;
      run[d] = 0;
      least[d] = g;
    }
    for (long long m = 0; m < g; m++) {
      long long r = r0;
      for (int j = 0; j < k; j++) r += digit[j] * stride[j];
      int below_changed = 1; /* the block of dimension d - 1 changed (d = 0: a new rank) */
      for (int d = 0; d < nd; d++) {
        int changed = d + 1 < nd && r / block[d] != cur[d];
        if (m > 0 && below_changed && !changed) out->uses[d] = 1;
        below_changed = changed;
      }
      for (int d = 0; d + 1 < nd; d++) {
        long long blk = r / block[d];
        if (blk != cur[d]) {
          if (run[d] > 0) {
            least[d] = run[d] < least[d] ? run[d] : least[d];
            if (d == 0) cross += (double)run[d] * (double)(g - run[d]);
          }
          if (d == 0) runs0++;
          cur[d] = blk;
          run[d] = 0;
        }
        run[d]++;
      }
      for (int j = 0; j < k && ++digit[j] == size[j]; j++) digit[j] = 0;
    }
    for (int d = 0; d + 1 < nd; d++) {
      least[d] = run[d] < least[d] ? run[d] : least[d];
      if (d == 0) cross += (double)run[d] * (double)(g - run[d]);
    }
    if (runs0 > 1) straddling += 1.0;
    int worse = 0;
    for (int d = 0; d + 1 < nd; d++) {
      if (least[d] == best[d]) continue;
      worse = least[d] < best[d];
      break;
    }
    if (worse) {
      for (int d = 0; d + 1 < nd; d++) best[d] = least[d];
      best_blocks = runs0;
    }
  }
  double prev = 1.0;
  for (int d = 0; d < nd; d++) {
    double nd_ = d + 1 < nd ? (double)best[d] : (double)g;
    out->level[d] = nd_ / prev;
    prev = nd_;
  }
  out->blocks = nd > 1 ? best_blocks : 1;
  out->straddling = nd > 1 ? straddling : 0.0;
  out->cross_fraction = nd > 1 ? cross / (out->groups * (double)g * (double)(g - 1)) : 0.0;
}

int fth_topology_degree(const fth_topology_def *t, fth_logical_tag tag) {
  int g = 1;
  for (int i = 0; i < t->num_logical; i++)
    if (t->logical[i].tag == tag) g *= t->logical[i].size;
  return g;
}

/* Sharing rule (fth_topology.h): on each physical dimension, the view's
 * logical dimensions with size > 1 split the links evenly, since they may
 * communicate at once (with dp_bandwidth_apart, the DP tags count only for
 * their own share). A dimension on which a view maps nothing of its own is
 * that view's implicit DP, filling what PP leaves of it. */
static int group_levels(const fth_topology_def *t, fth_logical_tag tag, fth_logical_tag also,
                        int shared, const double *tag_bytes, fth_group_level *levels,
                        int *inner_dim) {
  /* PP shares with the attention view, whose DP gradients overlap its sends. */
  int expert_view = in_view(tag, 1) && tag != FTH_TAG_PP;
  int is_dp = tag == FTH_TAG_DP_ATTN || tag == FTH_TAG_DP_MOE;
  fth_logical_tag view_dp = expert_view ? FTH_TAG_DP_MOE : FTH_TAG_DP_ATTN;
  double self = tag_bytes ? tag_bytes[tag] : 0.0;
  int n = 0;
  if (inner_dim) *inner_dim = -1;
  for (int d = 0; d < t->num_phys; d++) {
    const fth_phys_dim_def *pd = &t->phys[d];
    int size = 1, users = 0, specific = 0, pp = 1;
    double denom = 0.0; /* processor sharing: sum over users of min(b_j, b_self) */
    for (int i = 0; i < t->num_logical; i++) {
      const fth_logical_dim_def *l = &t->logical[i];
      if (l->phys_dim != d || !in_view(l->tag, expert_view)) continue;
      if (l->tag == FTH_TAG_PP)
        pp *= l->size;
      else
        specific = 1;
      int dp_tag = l->tag == FTH_TAG_DP_ATTN || l->tag == FTH_TAG_DP_MOE;
      if (l->size > 1 && !(t->dp_bandwidth_apart && dp_tag && !is_dp)) {
        users++;
        if (self > 0) denom += fth_min(tag_bytes[l->tag], self);
      }
      if (l->tag == tag || l->tag == also) size *= l->size;
    }
    if (is_dp && !specific) {
      size = pd->size / pp;
      if (size > 1) {
        users++;
        if (self > 0) denom += fth_min(tag_bytes[view_dp], self);
      }
    }
    if (size <= 1) continue;
    fth_group_level *g = &levels[n++];
    g->group_size = size;
    g->dim_size = pd->size;
    g->type = pd->type;
    double share = shared && users > 1 ? 1.0 / users : 1.0;
    if (shared && users > 1 && self > 0 && denom >= self) share = self / denom;
    g->bw_bytes_per_s = fth_link_bw_bytes_per_s(&pd->link) * share;
    if (pd->type == FTH_TOPO_TWO_TIER)
      g->bw_bytes_per_s *= fth_topology_spine_share(size, pd->link.leaf_xpus, pd->link.oversubscription);
    g->latency_s = pd->link.latency_s;
    g->in_network_reduction = pd->link.in_network_reduction;
    g->pcie_peer = pd->link.pcie_peer;
    g->span = 0.0;
    if (inner_dim && *inner_dim < 0) *inner_dim = d;
  }
  return n;
}

/* Tolerance for a level "above 1" (levels are ratios of whole numbers). */
#define PLACED_ONE (1.0 + 1e-9)

int fth_topology_group_placed(const fth_topology_def *t, fth_logical_tag tag,
                              const fth_rank_place *self, const fth_rank_place *tag_place,
                              int shared, const double *tag_bytes, fth_group_level *levels,
                              int *inner_dim) {
  int expert_view = in_view(tag, 1) && tag != FTH_TAG_PP;
  int is_dp = tag == FTH_TAG_DP_ATTN || tag == FTH_TAG_DP_MOE;
  double own = tag_bytes ? tag_bytes[tag] : 0.0;
  int n = 0;
  if (inner_dim) *inner_dim = -1;
  for (int d = 0; d < t->num_phys; d++) {
    double span = self->level[d];
    if (!(span > PLACED_ONE)) continue;
    const fth_phys_dim_def *pd = &t->phys[d];
    int users = 0;
    double denom = 0.0;
    for (int u = 0; u < FTH_TAG_COUNT; u++) {
      if (!in_view((fth_logical_tag)u, expert_view) || !tag_place[u].uses[d]) continue;
      int dp_tag = u == FTH_TAG_DP_ATTN || u == FTH_TAG_DP_MOE;
      if (t->dp_bandwidth_apart && dp_tag && !is_dp) continue;
      users++;
      if (own > 0) denom += fth_min(tag_bytes[u], own);
    }
    if (users < 1) users = 1; /* the group's own dimension (a joined group: DP with CP) */
    fth_group_level *g = &levels[n++];
    g->span = span;
    g->group_size = (int)ceil(span - 1e-9);
    g->dim_size = pd->size;
    g->type = pd->type;
    double share = shared && users > 1 ? 1.0 / users : 1.0;
    if (shared && users > 1 && own > 0 && denom >= own) share = own / denom;
    g->bw_bytes_per_s = fth_link_bw_bytes_per_s(&pd->link) * share;
    if (pd->type == FTH_TOPO_TWO_TIER)
      g->bw_bytes_per_s *= fth_topology_spine_share(g->group_size, pd->link.leaf_xpus,
                                                    pd->link.oversubscription);
    g->latency_s = pd->link.latency_s;
    g->in_network_reduction = pd->link.in_network_reduction;
    g->pcie_peer = pd->link.pcie_peer;
    if (inner_dim && *inner_dim < 0) *inner_dim = d;
  }
  return n;
}

int fth_topology_group(const fth_topology_def *t, fth_logical_tag tag, int shared,
                       fth_group_level *levels, int *inner_dim) {
  return group_levels(t, tag, FTH_TAG_COUNT, shared, NULL, levels, inner_dim);
}

int fth_topology_group_by_traffic(const fth_topology_def *t, fth_logical_tag tag,
                                  const double *tag_bytes, fth_group_level *levels,
                                  int *inner_dim) {
  return group_levels(t, tag, FTH_TAG_COUNT, 1, tag_bytes, levels, inner_dim);
}

int fth_topology_group_with(const fth_topology_def *t, fth_logical_tag tag, fth_logical_tag also,
                            const double *tag_bytes, fth_group_level *levels, int *inner_dim) {
  return group_levels(t, tag, also, 1, tag_bytes, levels, inner_dim);
}
