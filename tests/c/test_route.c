#include "fth_route.h"
#include "test_macros.h"

#include <math.h>
#include <string.h>

static double expert_load[FTH_ROUTE_MAX_EXPERTS], gpu_load[FTH_ROUTE_MAX_GPUS];
static double bytes[64 * 64], rem[64 * 64], credit[64 * 64];

/* Under perfectly even routing the simulator equals the closed form exactly. */
static int even_load_matches_closed_form(void) {
  const int nodes_list[4] = {2, 4, 8, 16};
  const double pair_bytes[4] = {4096.0, 100000.0, 1048576.0, 3.3e6};
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 4; b++)
      for (int links = 1; links <= 3; links++) {
        fth_mesh_def m = fth_mesh_def_default();
        m.nodes = nodes_list[a];
        m.links = links;
        m.packet_prep_s = 1e-7;
        m.base_delay_s = 2e-7;
        m.initial_cpu_s = 5e-6;
        int n = m.nodes;
        for (int i = 0; i < n * n; i++) bytes[i] = (i / n == i % n) ? 0 : pair_bytes[b];
        fth_mesh_result r;
        fth_error err;
        FTH_ENSURE(fth_mesh_simulate(&m, bytes, rem, credit, NULL, NULL, &r, &err) == FTH_OK);
        double rounds;
        double closed = fth_mesh_closed_form_s(&m, pair_bytes[b], &rounds);
        FTH_ENSURE_NEAR(rounds, (double)r.rounds, 0);
        FTH_ENSURE_NEAR(closed, r.time_s, 1e-12);
      }
  /* By hand: 1 MiB per pair in 4 KiB packets = 256 packets; 2 links -> 128
   * rounds of 0.2 + 0.1 + 4096 / 50e9 us = 0.38192 us; + 5 us once:
   * 5e-6 + 128 x 3.8192e-7 = 5.388576e-5 s. */
  fth_mesh_def m = fth_mesh_def_default();
  m.links = 2;
  m.packet_prep_s = 1e-7;
  m.base_delay_s = 2e-7;
  m.initial_cpu_s = 5e-6;
  FTH_ENSURE_NEAR(5.388576e-5, fth_mesh_closed_form_s(&m, 1048576.0, NULL), 1e-12);
  /* Overlapping preparation with sending: rounds cost 0.2 + max(0.1, 0.08192) us. */
  m.overlap_prep = 1;
  FTH_ENSURE_NEAR(5e-6 + 128 * 3e-7, fth_mesh_closed_form_s(&m, 1048576.0, NULL), 1e-12);
  return 0;
}

/* NIC caps and slower inter-cluster links only ever add rounds. */
static int caps_and_clusters(void) {
  fth_mesh_def m = fth_mesh_def_default();
  m.nodes = 8;
  int n = 8;
  for (int i = 0; i < n * n; i++) bytes[i] = (i / n == i % n) ? 0 : 65536.0;
  fth_mesh_result free_r, nic_r, two_r;
  fth_error err;
  FTH_ENSURE(fth_mesh_simulate(&m, bytes, rem, credit, NULL, NULL, &free_r, &err) == FTH_OK);
  /* 16 packets per pair, 1 link: 16 rounds. A NIC of 3 packets per round:
   * 7 peers x 16 = 112 packets at 3 per round = 38 rounds (ceil 37.3). */
  FTH_ENSURE_EQ_INT(16, free_r.rounds);
  m.nic_bytes_per_round = 3 * 4096;
  FTH_ENSURE(fth_mesh_simulate(&m, bytes, rem, credit, NULL, NULL, &nic_r, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(38, nic_r.rounds);
  /* Two clusters of 4, inter-cluster links at a quarter of the rate: 16
   * packets at 1/4 packet per round = 64 rounds. */
  m.nic_bytes_per_round = 0;
  m.cluster_size = 4;
  m.inter_bw = m.link_bw / 4;
  FTH_ENSURE(fth_mesh_simulate(&m, bytes, rem, credit, NULL, NULL, &two_r, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(64, two_r.rounds);
  m.packet_size = 0;
  FTH_ENSURE(fth_mesh_simulate(&m, bytes, rem, credit, NULL, NULL, &two_r, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "packet_size") == 0);
  return 0;
}

static int router(void) {
  fth_route_def d = fth_route_def_default();
  d.tokens = 200000;
  d.experts = 64;
  d.top_k = 4;
  d.gpus = 8;
  d.dist = FTH_DIST_HOT;
  d.hot_ratio = 0.25;
  d.hot_weight = 0.25; /* hot weight = hot ratio: uniform in distribution */
  fth_route_stats st;
  fth_error err;
  FTH_ENSURE(fth_route_run(&d, expert_load, gpu_load, bytes, &st, &err) == FTH_OK);
  /* Chi-square against uniform over 64 experts: 800,000 picks, expected
   * 12,500 each (top-k without replacement keeps the marginals uniform). With
   * 63 degrees of freedom the 99.9th percentile is 103.4; seed 1 must pass. */
  double chi2 = 0;
  for (int e = 0; e < 64; e++) chi2 += pow(expert_load[e] - 12500.0, 2) / 12500.0;
  FTH_ENSURE(chi2 < 103.4);
  double sum = 0;
  for (int e = 0; e < 64; e++) sum += expert_load[e];
  FTH_ENSURE_NEAR(800000.0, sum, 0);
  /* Same seed, same bytes; another seed differs. */
  static double again[64];
  memcpy(again, expert_load, sizeof again);
  FTH_ENSURE(fth_route_run(&d, expert_load, gpu_load, bytes, &st, &err) == FTH_OK);
  FTH_ENSURE(memcmp(again, expert_load, sizeof again) == 0);
  d.seed = 2;
  FTH_ENSURE(fth_route_run(&d, expert_load, gpu_load, bytes, &st, &err) == FTH_OK);
  FTH_ENSURE(memcmp(again, expert_load, sizeof again) != 0);
  /* Hot experts (25% of experts get 80%): the busiest GPU carries more. */
  d.hot_weight = 0.8;
  FTH_ENSURE(fth_route_run(&d, expert_load, gpu_load, bytes, &st, &err) == FTH_OK);
  FTH_ENSURE(st.expert_imbalance > 2.5);
  FTH_ENSURE(st.gpu_imbalance > 1.2);
  /* Byte matrix: every pair carries 4096 x 2 + 4 + 2 + 2 x 4 = 8,206 bytes. */
  FTH_ENSURE_NEAR(8206.0, st.bytes_per_pair, 0);
  FTH_ENSURE_NEAR(800000.0 * 8206.0, st.total_bytes, 1e-12);
  /* Replicating hot experts spreads their load. */
  double before = st.gpu_imbalance;
  d.placement = FTH_PLACE_REPLICATED_HOT;
  d.hot_replicas = 4;
  FTH_ENSURE(fth_route_run(&d, expert_load, gpu_load, bytes, &st, &err) == FTH_OK);
  FTH_ENSURE(st.gpu_imbalance < before);
  /* Nonsense is refused. */
  d.top_k = 65;
  FTH_ENSURE(fth_route_run(&d, expert_load, gpu_load, bytes, &st, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "top_k") == 0);
  d.top_k = 4;
  d.hot_ratio = 1.5;
  FTH_ENSURE(fth_route_run(&d, expert_load, gpu_load, bytes, &st, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "hot_ratio") == 0);
  return 0;
}

int route_test(void) {
  FTH_RUN(even_load_matches_closed_form());
  FTH_RUN(caps_and_clusters());
  FTH_RUN(router());
  return 0;
}
