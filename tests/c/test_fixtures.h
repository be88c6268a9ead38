/* test_fixtures.h: inputs several hand-derived tests share, built one way.
 * Header-only (static inline): each test file takes what it needs. */
#ifndef TEST_FIXTURES_H
#define TEST_FIXTURES_H

#include "fth_topology.h"
#include "fth_workload.h"

/* One switched dimension of `size` GPUs at `bw` bytes/s and no latency, all
 * of it TP_Attn. */
static inline fth_topology_def tfx_tp_only(int size, double bw) {
  fth_topology_def t = fth_topology_def_default();
  t.num_phys = 1;
  t.phys[0].type = FTH_TOPO_SWITCHED;
  t.phys[0].size = size;
  t.phys[0].link.bw_bytes_per_s = bw;
  t.phys[0].link.latency_s = 0.0;
  t.num_logical = 1;
  t.logical[0] = (fth_logical_dim_def){FTH_TAG_TP_ATTN, 0, size};
  return t;
}

/* A training step of `global_batch` sequences of `seq` tokens, micro-batch 1,
 * with nothing overlapped but kernels' compute and memory (the roofline max):
 * every term adds up as the hand derivations write it. */
static inline fth_train_def tfx_serial_work(double global_batch, double seq) {
  fth_train_def w = fth_train_def_default();
  w.global_batch = global_batch;
  w.micro_batch = 1;
  w.seq_len = seq;
  w.comp_comm_eff = 0.0;
  w.comp_mem_eff = 1.0;
  w.comm_mem_eff = 0.0;
  return w;
}

#endif
