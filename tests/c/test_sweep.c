/* fth_sweep: the number text and the point numbering, by hand.
 *
 * Text (fathom.format.util.number's rule: %.15g, %.16g, %.17g, the first that reads back):
 *   0.1 reads back at 15 digits: "0.1"; 0.1 + 0.2 = 0.30000000000000004 needs 17;
 *   1/3 needs 16: "0.3333333333333333"; 1e15 (a float) is "1e+15" at %.15g, but an
 *   integer (as_integer) prints its digits; 123456789012345 (15 digits) prints whole;
 *   1.5e-5 is below 1e-4: "1.5e-05"; -0.0 is "-0"; 2^-3 = 0.125 (a power of two: the
 *   slow rule) "0.125".
 * Numbering: axes of 3 and 2 positions, the last turning fastest: point 4 (0-based) is
 * (2, 0): 4 / 2 = 2 rest 0. */
#include <string.h>

#include "fth_sweep.h"
#include "test_fixtures.h"
#include "test_macros.h"

static int text_is(double x, int as_integer, const char *want) {
  char buf[64];
  int n = fth_sweep_format_number(buf, sizeof buf, x, as_integer);
  return strcmp(buf, want) == 0 && n == (int)strlen(want);
}

int sweep_test(void) {
  FTH_ENSURE(text_is(0.1, 0, "0.1"));
  FTH_ENSURE(text_is(0.1 + 0.2, 0, "0.30000000000000004"));
  FTH_ENSURE(text_is(1.0 / 3.0, 0, "0.3333333333333333"));
  FTH_ENSURE(text_is(1e15, 0, "1e+15"));
  FTH_ENSURE(text_is(1e15, 1, "1000000000000000"));
  FTH_ENSURE(text_is(123456789012345.0, 0, "123456789012345"));
  FTH_ENSURE(text_is(1.5e-5, 0, "1.5e-05"));
  FTH_ENSURE(text_is(-0.0, 0, "-0"));
  FTH_ENSURE(text_is(0.125, 0, "0.125"));
  FTH_ENSURE(text_is(-2.5e300, 0, "-2.5e+300"));
  FTH_ENSURE(text_is(12.5, 0, "12.5"));

  fth_sweep_def d;
  memset(&d, 0, sizeof d);
  d.node = tfx_node();
  d.topo = tfx_tp_only(1, 100e9);
  d.model = tfx_block_model();
  d.work = tfx_serial_work(1, 8);
  d.n_axes = 2;
  d.axis_len[0] = 3;
  d.axis_len[1] = 2;
  static const double mb[3] = {1, 2, 4}, gb[2] = {4, 2};
  d.n_keys = 2;
  d.key[0] = (fth_sweep_key){FTH_SWEEP_MICRO_BATCH, 0, 0, mb};
  d.key[1] = (fth_sweep_key){FTH_SWEEP_GLOBAL_BATCH, 0, 1, gb};
  fth_error err;
  FTH_ENSURE(fth_sweep_check(&d, &err) == FTH_OK);
  FTH_ENSURE(fth_sweep_count(&d) == 6);
  static fth_sweep_point p;
  fth_sweep_point_eval(&d, 4, &p);
  FTH_ENSURE(p.idx[0] == 2 && p.idx[1] == 0);
  /* micro-batch 4 of global batch 4: valid; point 5 is micro-batch 4 of 2: refused
   * (the loader's rule), with its message */
  FTH_ENSURE(p.valid);
  FTH_ENSURE(p.plan.work.micro_batch == 4 && p.plan.work.global_batch == 4);
  fth_sweep_point_eval(&d, 5, &p);
  FTH_ENSURE(!p.valid);
  FTH_ENSURE(strcmp(p.err.msg, "micro_batch_size 4 exceeds global_batch_size 2") == 0);
  FTH_ENSURE(fth_sweep_mask(&p) == ((1ULL << FTH_SG_ALWAYS) | (1ULL << FTH_SG_ERROR)));
  /* Reworking the plan (one point reused in order, the plan compiled once) gives the
   * same result, bit for bit, as compiling each point afresh, the invalid one included
   * and the points after it. */
  static fth_sweep_point fresh;
  memset(&p, 0, sizeof p);
  for (long long i = 0; i < 6; i++) {
    fth_sweep_point_eval(&d, i, &p);
    memset(&fresh, 0, sizeof fresh);
    fth_sweep_point_eval(&d, i, &fresh);
    FTH_ENSURE(p.compiled_for == &d);
    FTH_ENSURE(p.valid == fresh.valid && strcmp(p.err.msg, fresh.err.msg) == 0);
    FTH_ENSURE(!p.valid || memcmp(&p.result, &fresh.result, sizeof p.result) == 0);
    FTH_ENSURE(!p.valid || memcmp(&p.plan, &fresh.plan, sizeof p.plan) == 0);
  }
  /* a key on an axis that does not exist is refused */
  d.key[1].axis = 2;
  FTH_ENSURE(fth_sweep_check(&d, &err) == FTH_EINVAL);
  return 0;
}
