/* test_macros.h: the C test harness. Each check prints file:line and the
 * values on failure and makes the enclosing test function return 1. */
#ifndef FTH_TEST_MACROS_H
#define FTH_TEST_MACROS_H

#include <math.h>
#include <stdio.h>

/* Prototypes of every test entry point (generated from tests/c/test_<name>.c). */
#define FTH_TEST(name) int name##_test(void);
#include "test_list.h"
#undef FTH_TEST

#define FTH_ENSURE(c)                                                                              \
  do {                                                                                             \
    if (!(c)) {                                                                                    \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);                        \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

/* Relative tolerance: |actual - expected| <= rel_tol * max(|expected|, tiny).
 * Expected first, as in luassert. */
#define FTH_ENSURE_NEAR(expected, actual, rel_tol)                                                 \
  do {                                                                                             \
    double e_ = (double)(expected), a_ = (double)(actual), t_ = (double)(rel_tol);                 \
    double s_ = fabs(e_) > 1e-300 ? fabs(e_) : 1e-300;                                             \
    if (!(fabs(a_ - e_) <= t_ * s_)) {                                                             \
      fprintf(stderr, "%s:%d: %s: expected %.17g, got %.17g (rel err %.3g > %.3g)\n", __FILE__,    \
              __LINE__, #actual, e_, a_, fabs(a_ - e_) / s_, t_);                                  \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

/* Exact equality of doubles (for formulas that must hold to the last bit
 * up to a few ulps; use FTH_ENSURE_NEAR(e, a, 1e-12) for "exactly" in practice). */
#define FTH_ENSURE_EQ_INT(expected, actual)                                                        \
  do {                                                                                             \
    long long e_ = (long long)(expected), a_ = (long long)(actual);                                \
    if (e_ != a_) {                                                                                \
      fprintf(stderr, "%s:%d: %s: expected %lld, got %lld\n", __FILE__, __LINE__, #actual, e_,     \
              a_);                                                                                 \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

/* Run a sub-check function returning int; propagate failure. */
#define FTH_RUN(f)                                                                                 \
  do {                                                                                             \
    if ((f) != 0) return 1;                                                                        \
  } while (0)

#endif
