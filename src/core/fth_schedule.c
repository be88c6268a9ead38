/* fth_schedule.c: the schedule table (fth_schedule.h). */
#include "fth_schedule.h"

#include <stdio.h>
#include <string.h>

/* name, interleaved, holds_all, inflight_extra, even_stages, stage_a, stage_b,
 * bubble_f, bubble_b, bubble_w, sends_per_micro, weight_copies, comm_hidden, source */
static const fth_schedule rows[FTH_PP_COUNT] = {
    /* Huang et al. 2019; Narayanan et al. 2021 Eq. 1: bubble (p - 1)(t_f + t_b),
     * every micro-batch's activations held until its backward. */
    [FTH_PP_GPIPE] = {"GPIPE", 0, 1, 0.0, 0, 1.0, -1.0, 1.0, 1.0, 0.0, 2.0, 1.0, 0.0,
                      "Huang et al. 2019"},
    /* Narayanan et al. 2021 Sec. 2.2.1: the same bubble, at most p in flight. */
    [FTH_PP_1F1B] = {"1F1B", 0, 0, 0.0, 0, 1.0, -1.0, 1.0, 1.0, 0.0, 2.0, 1.0, 0.0,
                     "Narayanan et al. 2021 Sec. 2.2.1"},
    /* Narayanan et al. 2021 Sec. 2.2.2: v chunks per GPU divide the bubble by
     * v and multiply the sends by v. */
    [FTH_PP_INTERLEAVED] = {"INTERLEAVED", 1, 0, 0.0, 0, 1.0, -1.0, 1.0, 1.0, 0.0, 2.0, 1.0, 0.0,
                            "Narayanan et al. 2021 Sec. 2.2.2"},
    /* Qi et al. 2023 ("Zero Bubble Pipeline Parallelism", Sec. 3.1, Fig. 3):
     * with backward split into B (input gradients) and W (weight gradients),
     * ZB-H1 schedules the W passes into the cool-down, leaving a bubble of
     * (p - 1)(T_F + T_B - T_W). Here t_b = T_B + T_W, so the bubble is
     * (p - 1)(t_f + t_b - 2 t_w). Its peak activation memory equals 1F1B's
     * (at most p micro-batches in flight), and it sends what 1F1B sends. */
    [FTH_PP_ZB_H1] = {"ZB_H1", 0, 0, 0.0, 0, 1.0, -1.0, 1.0, 1.0, -2.0, 2.0, 1.0, 0.0,
                      "Qi et al. 2023 Sec. 3.1"},
    /* DeepSeek-AI 2024 (DeepSeek-V3 technical report, Sec. 3.2.1, Table 2):
     * micro-batches fed from both ends of the pipeline, a forward chunk of one
     * overlapped with a backward chunk of the other so that all-to-all and PP
     * communication hide under computation. Bubble (p/2 - 1)(F&B + B - 3W)
     * with B the whole backward and F&B ~ t_f + t_b: (p/2 - 1)(t_f + 2 t_b -
     * 3 t_w); two copies of the parameters; p + 1 micro-batches of
     * activations; an even number of stages. */
    [FTH_PP_DUALPIPE] = {"DUALPIPE", 0, 0, 1.0, 1, 0.5, -1.0, 1.0, 2.0, -3.0, 2.0, 2.0, 1.0,
                         "DeepSeek-AI 2024 Sec. 3.2.1, Table 2"},
};

const fth_schedule *fth_schedule_get(fth_pp_schedule s) {
  return (s >= 0 && s < FTH_PP_COUNT) ? &rows[s] : NULL;
}

const char *fth_pp_schedule_name(fth_pp_schedule s) {
  const fth_schedule *r = fth_schedule_get(s);
  return r ? r->name : NULL;
}

fth_pp_schedule fth_pp_schedule_parse(const char *name) {
  for (int i = 0; i < FTH_PP_COUNT; i++)
    if (strcmp(name, rows[i].name) == 0) return (fth_pp_schedule)i;
  return FTH_PP_COUNT;
}

double fth_pp_chunks(fth_pp_schedule s, int virt) {
  const fth_schedule *r = fth_schedule_get(s);
  return (r && r->interleaved && virt > 1) ? (double)virt : 1.0;
}

double fth_pp_micro_multiple(fth_pp_schedule s, int stages, int virt) {
  const fth_schedule *r = fth_schedule_get(s);
  if (r == NULL) return 0.0;
  if (r->even_stages && (stages < 2 || stages % 2 != 0)) return 0.0;
  long long unit = r->even_stages ? 2 : 1;
  if (fth_pp_chunks(s, virt) > 1) unit = stages % unit == 0 ? stages : unit * stages; /* lcm */
  return (double)unit;
}

double fth_pp_bubble_s(fth_pp_schedule s, int stages, int virt, double fwd_s, double bwd_s,
                       double wgrad_s) {
  const fth_schedule *r = fth_schedule_get(s);
  if (stages <= 1 || r == NULL) return 0.0;
  double per = r->bubble_f * fwd_s + r->bubble_b * bwd_s + r->bubble_w * wgrad_s;
  if (per < 0) per = 0; /* weight gradients can fill the bubble, not more */
  double boundaries = fth_max(0.0, r->stage_a * stages + r->stage_b);
  return boundaries * per / fth_pp_chunks(s, virt);
}

double fth_pp_inflight(fth_pp_schedule s, int stages, double micro, int virt) {
  const fth_schedule *r = fth_schedule_get(s);
  if (r == NULL) return 0.0;
  if (r->holds_all) return micro;
  double p = (double)stages;
  double inflight = fth_min(micro, p) + r->inflight_extra;
  double v = fth_pp_chunks(s, virt);
  /* Korthikanti et al. 2022 Sec. 4.2.3: interleaving keeps (1 + (p-1)/(p v))
   * times more activations on the first stage. */
  if (v > 1) inflight *= 1.0 + (p - 1.0) / (p * v);
  return inflight;
}

/* ---- the order of passes on each GPU -------------------------------------------------------- */

int fth_pp_order_chunks(fth_pp_schedule s, int stages, int virt) {
  if (stages <= 1) return 1;
  if (s == FTH_PP_DUALPIPE) return 2;
  return (int)fth_pp_chunks(s, virt);
}

int fth_pp_order_check(fth_pp_schedule s, int stages, int micro, int virt, char *why, size_t n) {
  if (stages > 1 && s == FTH_PP_DUALPIPE && (stages % 2 != 0 || micro % 2 != 0 || micro < 2 * stages)) {
    /* dualpipe.py: num_ranks % 2 == 0, num_chunks % 2 == 0, num_chunks >= num_ranks * 2 */
    snprintf(why, n, "DualPipe's order needs an even PP and an even number of micro-batches of at "
             "least 2 x PP = %d, got PP = %d and %d (raise the global batch or lower the micro-batch)",
             2 * stages, stages, micro);
    return -1;
  }
  if (fth_pp_order_chunks(s, stages, virt) > 1 && s == FTH_PP_INTERLEAVED && micro % stages != 0) {
    snprintf(why, n, "the interleaved order needs micro-batches (%d) to be a multiple of PP = %d",
             micro, stages);
    return -1;
  }
  return 0;
}

long fth_pp_order_passes(fth_pp_schedule s, int stages, int micro, int virt) {
  int v = fth_pp_order_chunks(s, stages, virt);
  return s == FTH_PP_DUALPIPE && v == 2 ? 2L * micro : 2L * micro * v;
}

/* DualPipe on GPU r of p: the steps of dualpipe.py's step(), each a count
 * and a pattern of passes, phase 0 the micro-batches fed from this GPU's end
 * of the pipeline, phase 1 those from the other end (items: 0 F0, 1 F1, 2 B0,
 * 3 B1). Weight passes (W) are inside their backward here. */
static void dualpipe_counts(int p, int m, int hr, long cnt[7]) {
  const int h = p / 2;
  cnt[0] = 2L * (h - hr - 1);
  cnt[1] = hr + 1;
  cnt[2] = h - hr - 1;
  cnt[3] = (long)(m / 2) - p + hr + 1;
  cnt[4] = h - hr - 1;
  cnt[5] = hr + 1;
  cnt[6] = h - hr - 1;
}

static void dualpipe_pass(int p, int m, int r, long k, fth_pp_pass *out) {
  const int h = p / 2, hr = r < p - 1 - r ? r : p - 1 - r, half = m / 2;
  static const int pat[7][4] = {{0}, {0, 1}, {3, 1}, {0, 3, 1, 2}, {3, 1, 2}, {3, 2}, {2}};
  static const int len[7] = {1, 2, 2, 4, 3, 2, 1};
  long cnt[7];
  dualpipe_counts(p, m, hr, cnt);
  long seen[4] = {0, 0, 0, 0};
  int item = 2;
  for (int i = 0; i < 7; i++) {
    long n = cnt[i] * len[i];
    if (k >= n) {
      for (int j = 0; j < len[i]; j++) seen[pat[i][j]] += cnt[i];
      k -= n;
      continue;
    }
    long reps = k / len[i];
    int at = (int)(k % len[i]);
    for (int j = 0; j < len[i]; j++) seen[pat[i][j]] += reps + (j < at);
    item = pat[i][at];
    break;
  }
  int phase = item & 1;
  out->fwd = item < 2;
  /* dualpipe.py flips the phase on the second half: phase 0 is the module fed from its end */
  out->chunk = phase ^ (r >= h);
  out->mb = (int)seen[item] + (out->chunk ? half : 0);
}

/* DualPipe's overlapped forward-backward pairs on one GPU: two per iteration of
 * dualpipe.py's main step (F0B1, F1B0) and one per iteration of its fifth
 * (B1, F1B0); on a middle GPU the main step's first pair runs unpaired ("we don't
 * overlap these two chunks to further reduce bubble size"). Every other pass --
 * the warm-up forwards, the zero-bubble cool-down backwards -- runs alone. A GPU
 * runs m forward passes, so the pairs over m are its paired share; the first and
 * last GPUs (hr = 0) have the fewest when p > 4: m - 3p/2 + 1 of m. */
double fth_pp_paired_share(fth_pp_schedule s, int stages, int micro) {
  if (s != FTH_PP_DUALPIPE) return 0.0;
  if (stages < 2 || micro <= 0) return 1.0;
  const int p = stages, h = p / 2;
  double least = (double)micro;
  const int ends[2] = {0, h - 1};
  for (int i = 0; i < 2; i++) {
    long cnt[7];
    dualpipe_counts(p, micro, ends[i], cnt);
    double pairs = 2.0 * cnt[3] + cnt[4] - (ends[i] == h - 1 && cnt[3] > 0 ? 1.0 : 0.0);
    if (pairs < least) least = pairs;
  }
  double share = least / micro;
  return share < 0.0 ? 0.0 : share > 1.0 ? 1.0 : share;
}

/* The 1F1B family's steady state on its first stage, whose warm-up is the
 * longest: p - 1 forwards before its first backward (Narayanan et al. 2021
 * Sec. 2.2.1), 2 (p - 1) + (v - 1) p chunk-forwards interleaved (Megatron-LM's
 * interleaved schedule) and one more under Megatron-Core's combined 1F1B A2A
 * overlap (which adds a warm-up micro-batch to pair from, and runs only with
 * virtual stages or without a pipeline), and as many backwards in the cool-down;
 * without a pipeline the first forward and the last backward run alone. GPipe
 * with a pipeline pairs none (every forward before any backward). */
double fth_pp_steady_share(fth_pp_schedule s, int stages, int micro, int virt) {
  if (s == FTH_PP_DUALPIPE) return fth_pp_paired_share(s, stages, micro);
  if (s == FTH_PP_GPIPE && stages > 1) return 0.0;
  if (micro <= 0) return 0.0;
  const double p = stages, v = stages > 1 ? fth_pp_chunks(s, virt) : 1.0, total = micro * v;
  double warm = stages <= 1 ? 1.0 : (v > 1 ? 2.0 * (p - 1) + (v - 1) * p + 1.0 : p - 1);
  if (warm > total) warm = total;
  return (total - warm) / total;
}

void fth_pp_order_pass(fth_pp_schedule s, int stages, int micro, int virt, int stage, long k,
                       fth_pp_pass *out) {
  const int p = stages, m = micro, v = fth_pp_order_chunks(s, stages, virt);
  out->chunk = 0;
  if (s == FTH_PP_DUALPIPE && v == 2) {
    dualpipe_pass(p, m, stage, k, out);
    return;
  }
  /* Warm-up forwards, then one forward one backward, then the remaining backwards. */
  long total = (long)m * v, warm;
  if (v > 1) /* Megatron-LM: 2 (p - s - 1) + (v - 1) p, all of them when m == p */
    warm = m == p ? total : 2L * (p - stage - 1) + (long)(v - 1) * p;
  else
    warm = s == FTH_PP_GPIPE ? m : p - stage - 1;
  if (warm > total) warm = total;
  long f, b = -1, j = k - warm, steady = total - warm;
  if (k < warm) {
    f = k;
  } else if (j < 2 * steady) {
    f = j % 2 == 0 ? warm + j / 2 : -1;
    b = j % 2 == 0 ? -1 : j / 2;
  } else {
    f = -1;
    b = j - steady;
  }
  out->fwd = f >= 0;
  long i = out->fwd ? f : b, group = (long)p * v;
  /* Megatron-LM's get_model_chunk_id: p micro-batches through chunk 0, then
   * the same p through chunk 1, ...; backwards from the last chunk. */
  out->mb = (int)((i / group) * p + i % p);
  int c = (int)((i % group) / p);
  out->chunk = out->fwd ? c : v - 1 - c;
}

int fth_pp_order_position(fth_pp_schedule s, int stages, int virt, int stage, int chunk, int *line) {
  if (s == FTH_PP_DUALPIPE && fth_pp_order_chunks(s, stages, virt) == 2) {
    *line = chunk;
    return chunk ? stages - 1 - stage : stage;
  }
  *line = 0;
  return chunk * stages + stage;
}

int fth_pp_order_at(fth_pp_schedule s, int stages, int virt, int line, int position, int *stage,
                    int *chunk) {
  int v = fth_pp_order_chunks(s, stages, virt);
  if (s == FTH_PP_DUALPIPE && v == 2) {
    if (position < 0 || position >= stages || line < 0 || line > 1) return -1;
    *chunk = line;
    *stage = line ? stages - 1 - position : position;
    return 0;
  }
  if (line != 0 || position < 0 || position >= stages * v) return -1;
  *stage = position % stages;
  *chunk = position / stages;
  return 0;
}

double fth_pp_inflight_stage(fth_pp_schedule s, int stages, int stage, double micro, int virt) {
  const fth_schedule *r = fth_schedule_get(s);
  if (r == NULL) return 0.0;
  if (r->holds_all || fth_pp_chunks(s, virt) > 1 || r->even_stages || r->inflight_extra > 0)
    return fth_pp_inflight(s, stages, micro, virt);
  return fth_min(micro, (double)(stages - stage));
}
