#include "fth_route.h"
#include "test_macros.h"

#include <math.h>
#include <string.h>

static double expert_load[FTH_ROUTE_MAX_EXPERTS], gpu_load[FTH_ROUTE_MAX_GPUS];
static double bytes[64 * 64], rem[64 * 64], credit[64 * 64];

/* The seed's fabric: a 50 GB/s link per pair, no shared ports, one cluster,
 * round robin (what fathom's mesh defaulted to before ports). */
static fth_mesh_def seed_mesh(void) {
  fth_mesh_def m = fth_mesh_def_default();
  m.link_bw = 50e9;
  m.cluster_size = 0;
  m.inter_bw = 0;
  m.port_bw = 0;
  m.inter_port_bw = 0;
  m.sched = FTH_SCHED_ROUND_ROBIN;
  return m;
}

/* Under perfectly even routing the simulator equals the closed form exactly. */
static int even_load_matches_closed_form(void) {
  const int nodes_list[4] = {2, 4, 8, 16};
  const double pair_bytes[4] = {4096.0, 100000.0, 1048576.0, 3.3e6};
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 4; b++)
      for (int links = 1; links <= 3; links++) {
        fth_mesh_def m = seed_mesh();
        m.sched = (a + b + links) % 2 ? FTH_SCHED_FAIR : FTH_SCHED_ROUND_ROBIN;
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
  fth_mesh_def m = seed_mesh();
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
  fth_mesh_def m = seed_mesh();
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
  double cf_rounds; /* the closed form's NIC bound: ceil(7 x 16 / 3) = 38 */
  fth_mesh_closed_form_s(&m, 65536.0, &cf_rounds);
  FTH_ENSURE_NEAR(38.0, cf_rounds, 0);
  /* Two clusters of 4, inter-cluster links at a quarter of the rate: 16
   * packets at 1/4 packet per round = 64 rounds. */
  m.nic_bytes_per_round = 0;
  m.cluster_size = 4;
  m.inter_bw = m.link_bw / 4;
  FTH_ENSURE(fth_mesh_simulate(&m, bytes, rem, credit, NULL, NULL, &two_r, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(64, two_r.rounds);
  fth_mesh_closed_form_s(&m, 65536.0, &cf_rounds); /* the inter-cluster links' bound: 16 / (1/4) */
  FTH_ENSURE_NEAR(64.0, cf_rounds, 0);
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

/* The seed's closed form with the seed's own parameters (moe_comms params.py:
 * NUM_NODES 8, NUM_LINKS 1, BASE_DELAY 2 ms, PACKET_PREP_DELAY 1 ms,
 * INTRA_BW 100 B/ms, PACKET_SIZE 20 B, INITIAL_CPU_DELAY 0) and its README's
 * verification (Sec. 3.3): LOAD_PER_NODE 11,200 B gives 8 ms a round
 * (2 + floor(100 / 20) x (1 + 20 / 100)), 32 rounds (11,200 x 8 / (1 x 8 x 7 / 2
 * x 100)) and 256 ms in all. */
static int seed_closed_form(void) {
  fth_mesh_def m = seed_mesh();
  m.nodes = 8;
  m.links = 1;
  m.link_bw = 100.0 / 1e-3;
  m.packet_size = 20;
  m.packet_prep_s = 1e-3;
  m.base_delay_s = 2e-3;
  m.initial_cpu_s = 0;
  m.seed_window_s = 1e-3;
  double rounds;
  FTH_ENSURE_NEAR(0.256, fth_mesh_seed_closed_form_s(&m, 11200.0, &rounds), 1e-12);
  FTH_ENSURE_NEAR(32.0, rounds, 1e-12);
  /* one round is 8 ms: the load of a single round */
  FTH_ENSURE_NEAR(8e-3, fth_mesh_seed_closed_form_s(&m, 11200.0 / 32, NULL), 1e-12);
  /* the initial CPU delay is paid once; two links halve the rounds */
  m.initial_cpu_s = 1e-3;
  m.links = 2;
  FTH_ENSURE_NEAR(1e-3 + 16 * 8e-3, fth_mesh_seed_closed_form_s(&m, 11200.0, &rounds), 1e-12);
  FTH_ENSURE_NEAR(16.0, rounds, 1e-12);
  /* fathom's closed form for the same even load (1,600 B to each of 7 peers
   * = 80 packets a pair, one link, full duplex, one packet a round on a
   * pair's link): 80 rounds of 2 + 1 + 0.2 ms = 256 ms; the seed packs 5
   * packets a round but carries one direction per link (half duplex). */
  m.links = 1;
  m.initial_cpu_s = 0;
  double r2;
  FTH_ENSURE_NEAR(80 * 3.2e-3, fth_mesh_closed_form_s(&m, 1600.0, &r2), 1e-12);
  FTH_ENSURE_NEAR(80.0, r2, 0);
  return 0;
}

/* Shared ports under the fair scheduler. */
static int fair_ports(void) {
  fth_mesh_def m = fth_mesh_def_default(); /* 450 GB/s ports, 400 Gb/s NICs, 8 per cluster */
  fth_mesh_result r;
  fth_error err;
  double rounds;
  /* 8 GPUs, 1 MiB to each peer = 256 packets a pair; a port moves one packet
   * a round, shared by 7 flows: 7 x 256 = 1792 rounds of 4096 / 450e9 s,
   * 7 MiB / 450 GB/s = 16.31 us (a direct all-to-all's (n-1)/n m / B). */
  int n = 8;
  m.nodes = n;
  for (int i = 0; i < n * n; i++) bytes[i] = (i / n == i % n) ? 0 : FTH_MIB;
  FTH_ENSURE(fth_mesh_simulate(&m, bytes, rem, credit, NULL, NULL, &r, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(1792, r.rounds);
  FTH_ENSURE_NEAR(7 * FTH_MIB / 450e9, r.time_s, 1e-12);
  FTH_ENSURE_EQ_INT(1, r.events); /* one share computation: nothing finishes early */
  FTH_ENSURE_NEAR(r.time_s, fth_mesh_closed_form_s(&m, FTH_MIB, &rounds), 1e-12);
  FTH_ENSURE_NEAR(r.time_s, fth_mesh_busiest_s(&m, bytes, NULL), 1e-12);
  /* 16 GPUs in two clusters of 8: each sends 8 x 256 packets over its NIC at
   * 50 / 450 of a packet a round: 18,432 rounds, 8 MiB / 50 GB/s = 167.8 us. */
  n = 16;
  m.nodes = n;
  for (int i = 0; i < n * n; i++) bytes[i] = (i / n == i % n) ? 0 : FTH_MIB;
  FTH_ENSURE(fth_mesh_simulate(&m, bytes, rem, credit, NULL, NULL, &r, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(18432, r.rounds);
  FTH_ENSURE_NEAR(8 * FTH_MIB / 50e9, r.time_s, 1e-9);
  FTH_ENSURE_NEAR(r.time_s, fth_mesh_closed_form_s(&m, FTH_MIB, NULL), 1e-12);
  /* Skew, 4 GPUs, ports of one packet a round: 1, 2 and 3 each send 6
   * packets to 0, and 1 sends 6 to 2. Max-min: 0's ingress splits three
   * ways (1/3 each); 1's egress has 2/3 left for 1 -> 2, which ends after 9
   * rounds; the three into 0 have 3 packets left at 1/3: 9 more. 18 rounds,
   * two share computations; 0's ingress (18 packets) is the busiest port. */
  n = 4;
  m.nodes = n;
  m.cluster_size = 0;
  memset(bytes, 0, sizeof bytes);
  bytes[1 * n + 0] = bytes[2 * n + 0] = bytes[3 * n + 0] = bytes[1 * n + 2] = 6 * 4096.0;
  FTH_ENSURE(fth_mesh_simulate(&m, bytes, rem, credit, NULL, NULL, &r, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(18, r.rounds);
  FTH_ENSURE_EQ_INT(2, r.events);
  fth_mesh_busiest_s(&m, bytes, &rounds);
  FTH_ENSURE_NEAR(18.0, rounds, 0);
  /* Round robin on the same ports, whole packets: 1 serves 0 then 2 in turn
   * and 0 takes one packet a round; 0's 18 packets still take 18 rounds. */
  m.sched = FTH_SCHED_ROUND_ROBIN;
  FTH_ENSURE(fth_mesh_simulate(&m, bytes, rem, credit, NULL, NULL, &r, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(18, r.rounds);
  /* A port of 2/9 of a packet a round moves whole packets on banked credit:
   * 0 takes its 18 packets at 2/9 a round, the 18th in round 81. */
  m.port_bw = 100e9;
  FTH_ENSURE(fth_mesh_simulate(&m, bytes, rem, credit, NULL, NULL, &r, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(81, r.rounds);
  m.sched = FTH_SCHED_FAIR;
  FTH_ENSURE(fth_mesh_simulate(&m, bytes, rem, credit, NULL, NULL, &r, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(81, r.rounds);
  m.port_bw = -1;
  FTH_ENSURE(fth_mesh_simulate(&m, bytes, rem, credit, NULL, NULL, &r, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "port_bw") == 0);
  return 0;
}

/* Trace rows of the fair scheduler cover every packet once; the busiest
 * resource's bound never exceeds the simulation (it is a lower bound), on
 * skewed routings under both schedulers. */
typedef struct trace_sum {
  double bytes;
  long long rows;
  long long last_round;
} trace_sum;

static void add_row(void *ud, const fth_mesh_trace_row *row) {
  trace_sum *t = (trace_sum *)ud;
  t->bytes += row->bytes;
  t->rows++;
  if (row->round + row->rounds > t->last_round) t->last_round = row->round + row->rounds;
}

static int bounds_and_trace(void) {
  fth_route_def d = fth_route_def_default();
  d.tokens = 4096;
  d.experts = 32;
  d.top_k = 4;
  d.gpus = 16;
  d.hidden = 1024;
  d.dist = FTH_DIST_ZIPF;
  fth_route_stats st;
  fth_error err;
  for (int seed = 1; seed <= 4; seed++) {
    d.seed = (uint64_t)seed;
    d.zipf_s = 0.4 * seed;
    FTH_ENSURE(fth_route_run(&d, expert_load, gpu_load, bytes, &st, &err) == FTH_OK);
    for (int sched = 0; sched < 2; sched++) {
      fth_mesh_def m = fth_mesh_def_default(); /* clusters of 8: two of them */
      m.nodes = 16;
      m.sched = (fth_mesh_sched)sched;
      m.inter_bw = m.inter_port_bw = 450e9 / 4; /* a NIC of a quarter of the port */
      m.base_delay_s = 1e-7;
      trace_sum t = {0, 0, 0};
      fth_mesh_result r;
      FTH_ENSURE(fth_mesh_simulate(&m, bytes, rem, credit, add_row, &t, &r, &err) == FTH_OK);
      double lb;
      fth_mesh_busiest_s(&m, bytes, &lb);
      FTH_ENSURE((double)r.rounds >= lb);
      FTH_ENSURE_EQ_INT(r.rounds, t.last_round);
      /* every routed byte that leaves its GPU, once (whole packets under round robin) */
      if (m.sched == FTH_SCHED_FAIR)
        FTH_ENSURE_NEAR(st.offnode_bytes, t.bytes, 1e-9);
      else
        FTH_ENSURE(t.bytes >= st.offnode_bytes && t.bytes < st.offnode_bytes + 256 * 4096.0);
    }
  }
  return 0;
}

/* Placements: replication never hurts uniform routing; EPLB balances hot. */
static int placements(void) {
  static double base_load[FTH_ROUTE_MAX_GPUS];
  fth_route_def d = fth_route_def_default();
  d.tokens = 100000;
  d.experts = 64;
  d.top_k = 4;
  d.gpus = 8;
  fth_route_stats st, base;
  fth_error err;
  /* Uniform: no expert is heavier than the mean, so replicated_hot places
   * nothing extra and routes exactly as contiguous (same draws, same GPUs). */
  FTH_ENSURE(fth_route_run(&d, expert_load, gpu_load, bytes, &base, &err) == FTH_OK);
  memcpy(base_load, gpu_load, sizeof(double) * 8);
  d.placement = FTH_PLACE_REPLICATED_HOT;
  d.hot_replicas = 4;
  FTH_ENSURE(fth_route_run(&d, expert_load, gpu_load, bytes, &st, &err) == FTH_OK);
  FTH_ENSURE(memcmp(base_load, gpu_load, sizeof(double) * 8) == 0);
  FTH_ENSURE_NEAR(base.gpu_imbalance, st.gpu_imbalance, 0);
  FTH_ENSURE_EQ_INT(0, st.replicas);
  /* Hot: the 8 hot experts (12.5%, half the routings: 1/16 each; the 56
   * cold 1/112 each) all sit on GPU 0 under contiguous placement: expected
   * 0.5 of the load against a mean of 1/8, imbalance 4. */
  d.dist = FTH_DIST_HOT;
  d.hot_ratio = 0.125;
  d.hot_weight = 0.5;
  d.placement = FTH_PLACE_CONTIGUOUS;
  FTH_ENSURE(fth_route_run(&d, expert_load, gpu_load, bytes, &base, &err) == FTH_OK);
  FTH_ENSURE(base.gpu_imbalance > 3.8 && base.gpu_imbalance < 4.1);
  /* 8 copies of each: home plus one on each other GPU, each copy 1/128.
   * GPU 0 keeps 8/128; the others 8 cold (8/112) + 8/128 = 0.1339: 1.071. */
  d.placement = FTH_PLACE_REPLICATED_HOT;
  d.hot_replicas = 8;
  FTH_ENSURE(fth_route_run(&d, expert_load, gpu_load, bytes, &st, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(56, st.replicas);
  FTH_ENSURE(st.gpu_imbalance > 1.04 && st.gpu_imbalance < 1.10);
  /* EPLB, 8 redundant slots (9 per GPU): the 8 hot experts get a second
   * copy (1/32 each, above a cold expert's 1/112); packing heaviest first puts
   * two hot copies and seven cold experts on every GPU: 2/32 + 7/112 = 1/8
   * each, expected imbalance 1. */
  d.placement = FTH_PLACE_EPLB;
  d.redundant_experts = 8;
  FTH_ENSURE(fth_route_run(&d, expert_load, gpu_load, bytes, &st, &err) == FTH_OK);
  FTH_ENSURE_EQ_INT(8, st.replicas);
  FTH_ENSURE(st.gpu_imbalance < 1.03);
  /* no redundant slots: packing alone spreads the hot experts one per GPU */
  d.redundant_experts = 0;
  FTH_ENSURE(fth_route_run(&d, expert_load, gpu_load, bytes, &st, &err) == FTH_OK);
  FTH_ENSURE(st.gpu_imbalance < 1.03);
  d.redundant_experts = 4; /* not the same slots on every GPU */
  FTH_ENSURE(fth_route_run(&d, expert_load, gpu_load, bytes, &st, &err) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.path, "redundant_experts") == 0);
  return 0;
}

int route_test(void) {
  FTH_RUN(even_load_matches_closed_form());
  FTH_RUN(caps_and_clusters());
  FTH_RUN(router());
  FTH_RUN(seed_closed_form());
  FTH_RUN(fair_ports());
  FTH_RUN(placements());
  FTH_RUN(bounds_and_trace());
  return 0;
}
