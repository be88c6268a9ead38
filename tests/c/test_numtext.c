/* fth_numtext: the fast writer against the rule, by hand and over many doubles.
 *
 * By hand (the rule: the first of %.15g, %.16g, %.17g that reads back):
 *   0 is "0", -0 is "-0"; 0.1 reads back at 15 digits: "0.1";
 *   1/3 = 0.333333333333333314829616256247... : 15 digits 0.333333333333333 read back
 *     as a different double (its gap near 1/3 is 2^-54 = 5.6e-17, and the 15-digit value
 *     is 3.1e-16 away), 16 digits 0.3333333333333333 is 1.5e-17 away: "0.3333333333333333";
 *   0.1 + 0.2 = 0.3000000000000000444: 15 and 16 digits give 0.3 (another double), so 17:
 *     "0.30000000000000004";
 *   1e21 (exponent 21 >= 15): "1e+21"; 1.5e-5 (exponent -5 < -4): "1.5e-05";
 *   12.5 (exact in binary): "12.5"; 2^53 + 2 = 9007199254740994 has 16 digits, exponent
 *     15 >= 15 at %.15g: 9.00719925474099e+15 is 4 away (gap 2), so %.16g, fixed:
 *     "9007199254740994";
 *   the largest double 1.7976931348623157e+308 needs 17 digits (the slow rule: beyond
 *     the 128-bit range); the smallest subnormal (4.94065645841246544e-324) reads back
 *     from any text nearer to it than to 0 or 2^-1073, so 15 digits: "4.94065645841247e-324";
 *   NaN and the infinities are refused: length 0, "".
 * Then the fast writer must equal fth_numtext_slow (snprintf and strtod) for: random bit
 * patterns (every exponent, the fallback included), log-uniform doubles over 1e-16..1e47
 * (the fast range and both its edges), decimals of 15, 16 and 17 random digits read by
 * strtod (the precision boundaries), every power of two and power of ten with both
 * neighbours (the half-width gap below a power of two, carries to 10^P), integers, and
 * the midpoints between adjacent doubles' 15-digit roundings (ties). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fth_numtext.h"
#include "fth_rng.h"
#include "test_macros.h"

static int text_is(double x, const char *want) {
  char buf[FTH_NUMTEXT_CAP];
  int n = fth_numtext(buf, x);
  return strcmp(buf, want) == 0 && n == (int)strlen(want);
}

static int mismatches;

static void same(double x) {
  char fast[FTH_NUMTEXT_CAP], slow[FTH_NUMTEXT_CAP];
  int nf = fth_numtext(fast, x), ns = fth_numtext_slow(slow, x);
  if (nf != ns || strcmp(fast, slow) != 0) {
    if (mismatches < 5) fprintf(stderr, "numtext: %a: fast %s, slow %s\n", x, fast, slow);
    mismatches++;
  }
}

static double from_bits(uint64_t b) {
  double x;
  memcpy(&x, &b, sizeof x);
  return x;
}

static double uniform(fth_rng *r) { return (double)(fth_rng_next(r) >> 11) * 0x1p-53; }

int numtext_test(void) {
  FTH_ENSURE(text_is(0.0, "0"));
  FTH_ENSURE(text_is(-0.0, "-0"));
  FTH_ENSURE(text_is(0.1, "0.1"));
  FTH_ENSURE(text_is(1.0 / 3.0, "0.3333333333333333"));
  FTH_ENSURE(text_is(0.1 + 0.2, "0.30000000000000004"));
  FTH_ENSURE(text_is(1e21, "1e+21"));
  FTH_ENSURE(text_is(1.5e-5, "1.5e-05"));
  FTH_ENSURE(text_is(-12.5, "-12.5"));
  FTH_ENSURE(text_is(9007199254740994.0, "9007199254740994"));
  FTH_ENSURE(text_is(DBL_MAX, "1.7976931348623157e+308"));
  FTH_ENSURE(text_is(from_bits(1), "4.94065645841247e-324"));
  FTH_ENSURE(text_is(NAN, "") && text_is(INFINITY, "") && text_is(-INFINITY, ""));

  fth_rng r;
  fth_rng_seed(&r, 16);
  mismatches = 0;
  for (int i = 0; i < 20000; i++) {
    double x = from_bits(fth_rng_next(&r));
    if (isfinite(x)) same(x);
  }
  for (int i = 0; i < 100000; i++) same((i & 1 ? -1 : 1) * pow(10.0, -16.0 + 63.0 * uniform(&r)));
  for (int i = 0; i < 60000; i++) {
    char text[48];
    unsigned long long lo = 100000000000000ULL; /* 10^14: 15 digits */
    for (int d = 15; d < 15 + i % 3; d++) lo *= 10;
    unsigned long long digits = lo + fth_rng_next(&r) % (9 * lo);
    snprintf(text, sizeof text, "%llue%d", digits, (int)(fth_rng_next(&r) % 80) - 40);
    double x = strtod(text, NULL);
    same(x);
    same(nextafter(x, 0));
    same(nextafter(x, INFINITY));
  }
  for (int ex = -1074; ex <= 1023; ex++) {
    double x = ldexp(1.0, ex);
    same(x);
    same(nextafter(x, 0));
    same(nextafter(x, INFINITY));
  }
  for (int ex = -323; ex <= 308; ex++) {
    char text[16];
    snprintf(text, sizeof text, "1e%d", ex);
    double x = strtod(text, NULL);
    same(x);
    same(nextafter(x, 0));
    same(nextafter(x, INFINITY));
  }
  for (int i = 0; i < 20000; i++) {
    same((double)(fth_rng_next(&r) >> (i % 64)));
    /* midway between two 15-digit decimals: a tie for %.15g when it is exact */
    double d = (double)(fth_rng_next(&r) % 1000000000000000ULL) + 0.5;
    same(d);
    same(d / 1024.0);
  }
  FTH_ENSURE(mismatches == 0);

  /* integers as %lld: each digit count, both ends, then random magnitudes */
  char buf[FTH_NUMTEXT_CAP], want[FTH_NUMTEXT_CAP];
  FTH_ENSURE(fth_numtext_int(buf, 0) == 1 && strcmp(buf, "0") == 0);
  FTH_ENSURE(fth_numtext_int(buf, -100) == 4 && strcmp(buf, "-100") == 0);
  FTH_ENSURE(fth_numtext_int(buf, 9223372036854775807LL) == 19 && strcmp(buf, "9223372036854775807") == 0);
  FTH_ENSURE(fth_numtext_int(buf, -9223372036854775807LL - 1) == 20 &&
             strcmp(buf, "-9223372036854775808") == 0);
  long long p10 = 1;
  for (int d = 1; d <= 18; d++, p10 *= 10)
    for (long long v = p10 - 1; v <= p10; v++) {
      snprintf(want, sizeof want, "%lld", -v);
      FTH_ENSURE(fth_numtext_int(buf, -v) == (int)strlen(want) && strcmp(buf, want) == 0);
    }
  for (int i = 0; i < 20000; i++) {
    long long v = (long long)(fth_rng_next(&r) >> (i % 64));
    if (i & 1) v = -v;
    snprintf(want, sizeof want, "%lld", v);
    FTH_ENSURE(fth_numtext_int(buf, v) == (int)strlen(want) && strcmp(buf, want) == 0);
  }
  return 0;
}
