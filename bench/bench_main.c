/* bench_main.c: evaluations per second of the compiled training model.
 * Prints one line per benchmark; not a test (timings vary by machine).
 *   fathom_bench [seconds-per-benchmark] */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fth_search.h"
#include "fth_train.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A DGX-A100-like node: A100 SXM 80 GB, NVLink3 8-way, HDR IB scale-out. */
static fth_node_def a100(void) {
  fth_node_def n = fth_node_def_default();
  n.compute.flops_per_s[FTH_PREC_BF16] = 312e12;
  n.compute.flops_per_s[FTH_PREC_FP32] = 19.5e12;
  n.compute.efficiency = 0.8;
  n.tier[FTH_TIER_XPU].bw_per_stack_bytes_per_s = 2.039e12 / 5;
  n.tier[FTH_TIER_XPU].size_per_stack_bytes = 16.0 * 1024 * 1024 * 1024;
  n.tier[FTH_TIER_XPU].num_stacks = 5;
  n.tier[FTH_TIER_XPU].efficiency = 0.85;
  n.has_tier[FTH_TIER_XPU] = 1;
  return n;
}

static fth_topology_def cluster(int gpus, int tp, int pp) {
  fth_topology_def t = fth_topology_def_default();
  t.num_phys = 2;
  t.phys[0].type = FTH_TOPO_SWITCHED;
  t.phys[0].size = 8;
  t.phys[0].link.bw_bytes_per_s = 25e9;
  t.phys[0].link.num_links = 12;
  t.phys[0].link.efficiency = 0.8;
  t.phys[0].link.latency_s = 1e-6;
  t.phys[1].type = FTH_TOPO_SWITCHED;
  t.phys[1].size = gpus / 8;
  t.phys[1].link.bw_bytes_per_s = 25e9;
  t.phys[1].link.num_links = 1;
  t.phys[1].link.efficiency = 0.9;
  t.phys[1].link.latency_s = 5e-6;
  t.num_logical = 3;
  t.logical[0] = (fth_logical_dim_def){FTH_TAG_TP_ATTN, 0, tp};
  t.logical[1] = (fth_logical_dim_def){FTH_TAG_DP_ATTN, 0, 8 / tp};
  t.logical[2] = (fth_logical_dim_def){FTH_TAG_PP, 1, pp};
  return t;
}

static fth_model_def gpt3(void) {
  fth_model_def m = fth_model_def_default();
  m.d_model = 12288;
  m.n_layers = 96;
  m.num_heads = 96;
  m.vocab_size = 51200;
  m.max_seq_len = 2048;
  m.learned_pos_emb = 1;
  return m;
}

int main(int argc, char **argv) {
  double budget = argc > 1 ? atof(argv[1]) : 1.0;
  fth_node_def node = a100();
  fth_topology_def topo = cluster(1024, 8, 8);
  fth_model_def model = gpt3();
  fth_train_def work = fth_train_def_default();
  work.global_batch = 1536;
  work.micro_batch = 1;
  work.seq_len = 2048;
  work.recompute = FTH_RECOMPUTE_FULL;
  work.comp_comm_eff = 0.5;
  fth_train_plan plan;
  fth_error err;
  if (fth_train_compile(&plan, &node, &topo, &model, &work, &err) != FTH_OK) {
    fprintf(stderr, "bench: %s: %s\n", err.path, err.msg);
    return 1;
  }
  fth_train_result r;
  double sink = 0;
  long n = 0;
  double t0 = now_s(), t1 = t0;
  while (t1 - t0 < budget) {
    for (int i = 0; i < 1000; i++) {
      fth_train_evaluate(&plan, &r);
      sink += r.step_time_s;
    }
    n += 1000;
    t1 = now_s();
  }
  printf("train_evaluate   GPT-3 175B, 1024 A100: %10.0f evaluations/s (%.2f us each)\n",
         (double)n / (t1 - t0), (t1 - t0) / (double)n * 1e6);
  /* compile + evaluate: what a search pays per strategy */
  n = 0;
  t0 = now_s();
  t1 = t0;
  static const int tps[4] = {1, 2, 4, 8};
  while (t1 - t0 < budget) {
    for (int i = 0; i < 1000; i++) {
      topo = cluster(1024, tps[i & 3], 8);
      if (fth_train_compile(&plan, &node, &topo, &model, &work, &err) == FTH_OK) {
        fth_train_evaluate(&plan, &r);
        sink += r.step_time_s;
      }
    }
    n += 1000;
    t1 = now_s();
  }
  printf("compile+evaluate GPT-3 175B, 1024 A100: %10.0f strategies/s (%.2f us each)\n",
         (double)n / (t1 - t0), (t1 - t0) / (double)n * 1e6);
  fth_memory_footprint fp;
  n = 0;
  t0 = now_s();
  t1 = t0;
  while (t1 - t0 < budget) {
    for (int i = 0; i < 1000; i++) {
      fth_train_footprint(&plan, &fp);
      sink += fp.peak_bytes;
    }
    n += 1000;
    t1 = now_s();
  }
  printf("train_footprint  GPT-3 175B, 1024 A100: %10.0f checks/s\n", (double)n / (t1 - t0));
  /* The strategy search in-process (no worker start-up): GPT-3 175B on 1,024
   * A100s over the space fathom.search builds (one core). */
  static fth_search_def sd;
  memset(&sd, 0, sizeof sd);
  sd.node = node;
  sd.scale_up = cluster(1024, 8, 8).phys[0].link;
  sd.scale_out = cluster(1024, 8, 8).phys[1].link;
  sd.scale_up_type = FTH_TOPO_SWITCHED;
  sd.scale_out_type = FTH_TOPO_TWO_TIER;
  sd.pod_size = 8;
  sd.num_pods = 128;
  sd.model = model;
  sd.work = work;
  fth_search_space *sp = &sd.space;
  static const int tp[4] = {1, 2, 4, 8}, ppv[12] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 96};
  static const int ppin[4] = {1, 2, 4, 8};
  memcpy(sp->tp, tp, sizeof tp);
  sp->n_tp = 4;
  sp->cp[0] = 1;
  sp->n_cp = 1;
  memcpy(sp->pp, ppv, sizeof ppv);
  sp->n_pp = 12;
  memcpy(sp->pp_in, ppin, sizeof ppin);
  sp->n_pp_in = 4;
  sp->tp_moe[0] = sp->ep[0] = 1;
  sp->n_tp_moe = sp->n_ep = 1;
  sp->n_vs = 0; /* automatic, as fathom.search asks: divisors of layers / PP */
  sp->n_mb = 0; /* and of the local batch, up to 64 */
  sp->recompute_mask = 7;
  sp->dp_mask = 15;
  sp->schedule_mask = 7; /* GPipe, 1F1B, interleaved: the space this benchmark has always timed */
  sp->sp_mask = 3;
  sd.workers = 1;
  static fth_search_hit top[16];
  fth_search_stats st;
  long long considered = 0, timed = 0;
  t0 = now_s();
  t1 = t0;
  while (t1 - t0 < budget) {
    int n_top;
    if (fth_search_run(&sd, top, 16, &n_top, &st, &err) != FTH_OK) return 1;
    considered += st.considered;
    timed += st.evaluated;
    t1 = now_s();
  }
  printf("search (1 core)  GPT-3 175B, 1024 A100: %10.0f strategies timed/s, %.0f considered/s\n",
         (double)timed / (t1 - t0), (double)considered / (t1 - t0));
  /* Both cores, as fathom search runs it: two worker processes, each its share. */
  int fds[2];
  if (pipe(fds) != 0) return 1;
  double start = now_s();
  for (int wkr = 0; wkr < 2; wkr++) {
    if (fork() == 0) {
      sd.worker = wkr;
      sd.workers = 2;
      long long mine = 0;
      double s0 = now_s();
      while (now_s() - s0 < budget) {
        int n_top;
        if (fth_search_run(&sd, top, 16, &n_top, &st, &err) != FTH_OK) _exit(1);
        mine += st.evaluated;
      }
      if (write(fds[1], &mine, sizeof mine) != (ssize_t)sizeof mine) _exit(1);
      _exit(0);
    }
  }
  long long total = 0;
  for (int wkr = 0; wkr < 2; wkr++) {
    long long got = 0;
    if (read(fds[0], &got, sizeof got) == (ssize_t)sizeof got) total += got;
    wait(NULL);
  }
  printf("search (2 cores) GPT-3 175B, 1024 A100: %10.0f strategies timed/s\n",
         (double)total / (now_s() - start));
  return sink > 0 ? 0 : 1;
}
