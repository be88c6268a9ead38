/* fth_numtext.c: fathom.format.util.number's text of a double without printf.
 *
 * x = m * 2^e exactly (m the 53-bit significand with its hidden bit, e the
 * exponent of its last bit). For a precision P (15, 16, 17) and x's decimal
 * exponent k (10^k <= |x| < 10^(k+1)), %.Pg writes the integer q nearest to
 * y = x * 10^s, s = P - 1 - k (ties to even: glibc's printf rounds the exact
 * binary value), then places the point. As 10^s = 5^s * 2^s, y = m * 5^s * 2^t
 * with t = s + e, a ratio of integers m*A / D with
 *     A = 5^max(s,0) * 2^max(t,0),   D = 5^max(-s,0) * 2^max(-t,0)
 * (for |x| below 10^16, D is a power of two: a shift), so q = round(m*A / D)
 * is exact in 128-bit arithmetic whenever m*A and D fit. The text reads back
 * as x (strtod rounds to nearest, ties to even) when q's distance to y is below
 * half the gap to x's neighbour on that side. One unit of x's last bit, 2^e, is
 * 5^s * 2^t = A/D in y's units, so with diff = |q*D - m*A| the test is
 * 2*diff < A (equal: x wins the tie when m is even), and 4*diff <= A below x
 * when x is a power of two (the gap below is half as wide, and m = 2^52 is
 * even). The smallest P whose q passes is the rule's; 17 always reads back
 * (the rule writes it anyway). Outside the 128-bit range (|x| below about
 * 1e-15 or above about 1e46) and for subnormals the slow rule writes it: the
 * text is the same by construction, only slower. */
#include "fth_numtext.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__extension__ typedef unsigned __int128 u128;

/* 5^i for i = 0..27 (5^27 < 2^63), and the bit length of 5^i for i = 0..55 */
static const uint64_t POW5[28] = {1ULL,
                                  5ULL,
                                  25ULL,
                                  125ULL,
                                  625ULL,
                                  3125ULL,
                                  15625ULL,
                                  78125ULL,
                                  390625ULL,
                                  1953125ULL,
                                  9765625ULL,
                                  48828125ULL,
                                  244140625ULL,
                                  1220703125ULL,
                                  6103515625ULL,
                                  30517578125ULL,
                                  152587890625ULL,
                                  762939453125ULL,
                                  3814697265625ULL,
                                  19073486328125ULL,
                                  95367431640625ULL,
                                  476837158203125ULL,
                                  2384185791015625ULL,
                                  11920928955078125ULL,
                                  59604644775390625ULL,
                                  298023223876953125ULL,
                                  1490116119384765625ULL,
                                  7450580596923828125ULL};
static const unsigned char BITS5[56] = {
    1,  3,  5,  7,  10, 12,  14,  17,  19,  21,  24,  26,  28,  31,  33,  35,  38,  40, 42,
    45, 47, 49, 52, 54, 56,  59,  61,  63,  66,  68,  70,  72,  75,  77,  79,  82,  84, 86,
    89, 91, 93, 96, 98, 100, 103, 105, 107, 110, 112, 114, 117, 119, 121, 124, 126, 128};

static u128 pow5(int i) {
  return i <= 27 ? (u128)POW5[i] : (u128)POW5[i - 27] * POW5[27];
}

/* 10^i for i = 0..19 */
static const uint64_t POW10[20] = {1ULL,
                                   10ULL,
                                   100ULL,
                                   1000ULL,
                                   10000ULL,
                                   100000ULL,
                                   1000000ULL,
                                   10000000ULL,
                                   100000000ULL,
                                   1000000000ULL,
                                   10000000000ULL,
                                   100000000000ULL,
                                   1000000000000ULL,
                                   10000000000000ULL,
                                   100000000000000ULL,
                                   1000000000000000ULL,
                                   10000000000000000ULL,
                                   100000000000000000ULL,
                                   1000000000000000000ULL,
                                   10000000000000000000ULL};

int fth_numtext_slow(char *buf, double x) {
  if (!isfinite(x)) {
    buf[0] = '\0';
    return 0;
  }
  int n = 0;
  for (int prec = 15; prec <= 17; prec++) {
    n = snprintf(buf, FTH_NUMTEXT_CAP, "%.*g", prec, x);
    if (strtod(buf, NULL) == x) return n;
  }
  return n;
}

/* y = x * 10^s at s = 16 - k as y = N / D (see the top): q = floor(y), r = N - q*D, and
 * A. Returns 0, 1 when k is too small (q >= 10^17), 2 when too large (q < 10^16), -1
 * outside the range (D below 2^118 leaves room for 4 * 100 * D). */
typedef struct scaled {
  uint64_t q;
  u128 r, D, A;
} scaled;

static int scale(uint64_t m, int e, int k, scaled *out) {
  /* y = m * 10^s * 2^e = m * 5^s * 2^t with t = s + e: the powers of two cancel */
  int s = 16 - k, t = s + e;
  if (s > 55 || -s > 55) return -1;
  int a_bits = (s > 0 ? BITS5[s] : 0) + (t > 0 ? t : 0);
  int d_bits = (s < 0 ? BITS5[-s] : 0) + (t < 0 ? -t : 0);
  if (a_bits > 73 || d_bits > 118) return -1;
  u128 A = (s > 0 ? pow5(s) : 1) << (t > 0 ? t : 0);
  u128 N = (u128)m * A, q;
  if (s >= 0) { /* D = 2^-t: a shift */
    int sh = t < 0 ? -t : 0;
    out->D = (u128)1 << sh;
    q = N >> sh;
    out->r = N & (out->D - 1);
  } else {
    out->D = pow5(-s) << (t < 0 ? -t : 0);
    q = N / out->D;
    out->r = N % out->D;
  }
  if (q >= POW10[17]) return 1;
  if (q < POW10[16]) return 2;
  out->q = (uint64_t)q;
  out->A = A;
  return 0;
}

/* %.Pg's digits of y/f, f = 10^(17-P) (floor(y/f) = floor(q/f)), rounded to nearest,
 * ties to even; *k moves up on a carry to 10^P. Returns whether they read back as x. */
static inline int round_at(const scaled *y, uint64_t m, int lower_half, int P, uint64_t *q,
                           int *k) {
  /* f is a constant at each call (the loop below is unrolled): no division instruction */
  uint64_t f = P == 15 ? 100 : P == 16 ? 10 : 1;
  uint64_t qf = y->q / f, rem = y->q % f;
  u128 below = (u128)rem * y->D + y->r; /* y - qf*f, times D */
  u128 whole = (u128)f * y->D;
  u128 diff;
  int above = 2 * below > whole || (2 * below == whole && (qf & 1));
  if (above) {
    qf++;
    diff = whole - below;
  } else {
    diff = below;
  }
  if (qf == POW10[P]) {
    qf = POW10[P - 1];
    ++*k;
  }
  *q = qf;
  /* diff and A are both in units of 1/D of y's last (17th) digit */
  if (above || !lower_half) return 2 * diff < y->A || (2 * diff == y->A && (m & 1) == 0);
  return 4 * diff <= y->A;
}

/* "00".."99" */
static const char PAIRS[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* the n (0..9) decimal digits of v < 10^n ending at end[-1], two at a time */
static void put_u32(char *end, uint32_t v, int n) {
  for (; n >= 2; n -= 2) {
    uint32_t two = v % 100;
    v /= 100;
    end -= 2;
    memcpy(end, PAIRS + 2 * two, 2);
  }
  if (n) end[-1] = (char)('0' + v);
}

/* the 8 decimal digits of v < 10^8 into d[0..8): four pairs from two halves, each
 * computed from v directly (no chain of divisions) */
static inline void put_8(char *d, uint32_t v) {
  uint32_t hi = v / 10000, lo = v % 10000;
  memcpy(d, PAIRS + 2 * (hi / 100), 2);
  memcpy(d + 2, PAIRS + 2 * (hi % 100), 2);
  memcpy(d + 4, PAIRS + 2 * (lo / 100), 2);
  memcpy(d + 6, PAIRS + 2 * (lo % 100), 2);
}

/* the n (1..20) decimal digits of v < 10^n into d[0..n) */
static void put_u64(char *d, uint64_t v, int n) {
  while (n > 8) {
    put_8(d + n - 8, (uint32_t)(v % 100000000));
    v /= 100000000;
    n -= 8;
  }
  if (n == 8)
    put_8(d, (uint32_t)v);
  else
    put_u32(d + n, (uint32_t)v, n);
}

int fth_numtext_int(char *buf, long long v) {
  char *p = buf;
  unsigned long long u = (unsigned long long)v;
  if (v < 0) {
    *p++ = '-';
    u = 0ULL - u;
  }
  int n = 1;
  while (n < 20 && u >= POW10[n]) n++;
  put_u64(p, u, n);
  p[n] = '\0';
  return (int)(p + n - buf);
}

/* %.Pg's layout of digits q (P of them) at exponent k */
static int layout(char *buf, int neg, uint64_t q, int P, int k) {
  char d[20];
  put_u64(d, q, P);
  int nd = P;
  while (nd > 1 && d[nd - 1] == '0') nd--;
  char *p = buf;
  if (neg) *p++ = '-';
  if (k < -4 || k >= P) {
    *p++ = d[0];
    if (nd > 1) {
      *p++ = '.';
      memcpy(p, d + 1, (size_t)(nd - 1));
      p += nd - 1;
    }
    *p++ = 'e';
    int ex = k;
    *p++ = ex < 0 ? '-' : '+';
    if (ex < 0) ex = -ex;
    if (ex >= 100) *p++ = (char)('0' + ex / 100);
    *p++ = (char)('0' + ex / 10 % 10);
    *p++ = (char)('0' + ex % 10);
  } else if (k >= 0) {
    for (int i = 0; i <= k; i++) *p++ = i < nd ? d[i] : '0';
    if (nd > k + 1) {
      *p++ = '.';
      memcpy(p, d + k + 1, (size_t)(nd - k - 1));
      p += nd - k - 1;
    }
  } else {
    *p++ = '0';
    *p++ = '.';
    for (int i = 0; i < -k - 1; i++) *p++ = '0';
    memcpy(p, d, (size_t)nd);
    p += nd;
  }
  *p = '\0';
  return (int)(p - buf);
}

/* 10^i as doubles (the nearest) for i = P10_LO..P10_HI, about scale's range */
#define P10_LO (-17)
#define P10_HI 47
static const double P10[P10_HI - P10_LO + 1] = {
    1e-17, 1e-16, 1e-15, 1e-14, 1e-13, 1e-12, 1e-11, 1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5,
    1e-4,  1e-3,  1e-2,  1e-1,  1e0,   1e1,   1e2,   1e3,   1e4,  1e5,  1e6,  1e7,  1e8,
    1e9,   1e10,  1e11,  1e12,  1e13,  1e14,  1e15,  1e16,  1e17, 1e18, 1e19, 1e20, 1e21,
    1e22,  1e23,  1e24,  1e25,  1e26,  1e27,  1e28,  1e29,  1e30, 1e31, 1e32, 1e33, 1e34,
    1e35,  1e36,  1e37,  1e38,  1e39,  1e40,  1e41,  1e42,  1e43, 1e44, 1e45, 1e46, 1e47};

int fth_numtext(char *buf, double x) {
  uint64_t bits;
  memcpy(&bits, &x, sizeof bits);
  int neg = (int)(bits >> 63);
  int be = (int)((bits >> 52) & 0x7ff);
  uint64_t frac = bits & ((1ULL << 52) - 1);
  if (be == 0x7ff) {
    buf[0] = '\0';
    return 0;
  }
  if (be == 0) {
    if (frac == 0) {
      char *p = buf;
      if (neg) *p++ = '-';
      *p++ = '0';
      *p = '\0';
      return (int)(p - buf);
    }
    return fth_numtext_slow(buf, x); /* subnormal */
  }
  uint64_t m = frac | (1ULL << 52);
  int e = be - 1075;
  int lower_half = frac == 0 && be > 1;
  /* 2^b <= |x| < 2^(b+1), so k is floor(b*log10(2)) or one more */
  int b = be - 1023;
  /* floor(b * log10(2)) as floor(b * 78913 / 2^18): exact for |b| < 1100 (78913 / 2^18
   * = 0.3010292, below log10(2) by 7e-7); an estimate one off is corrected below */
  int k = b >= 0 ? (b * 78913) >> 18 : -((-b * 78913 + (1 << 18) - 1) >> 18);
  /* one more when |x| >= 10^(k+1) (a double compare; near a power of ten the table's
   * rounding may judge it wrong, and scale's range check below corrects that) */
  if (k + 1 >= P10_LO && k + 1 <= P10_HI && fabs(x) >= P10[k + 1 - P10_LO]) k++;
  scaled y;
  int st = scale(m, e, k, &y);
  if (st == 1)
    st = scale(m, e, ++k, &y);
  else if (st == 2)
    st = scale(m, e, --k, &y);
  if (st != 0) return fth_numtext_slow(buf, x);
  uint64_t q;
  int kp = k;
  if (round_at(&y, m, lower_half, 15, &q, &kp)) return layout(buf, neg, q, 15, kp);
  kp = k;
  if (round_at(&y, m, lower_half, 16, &q, &kp)) return layout(buf, neg, q, 16, kp);
  kp = k;
  round_at(&y, m, lower_half, 17, &q, &kp); /* 17 digits always read back */
  return layout(buf, neg, q, 17, kp);
}

/* fathom.units' scaled quantities: the first prefix at or below |x|, else the last one */
typedef struct unit_step {
  double at;
  const char *prefix;
} unit_step;

static const unit_step SI_STEPS[] = {{1e18, "E"}, {1e15, "P"}, {1e12, "T"}, {1e9, "G"},
                                     {1e6, "M"},  {1e3, "k"},  {1, ""}};
static const unit_step BIN_STEPS[] = {{1125899906842624.0, "Pi"}, {1099511627776.0, "Ti"}, {1073741824.0, "Gi"},
                                      {1048576.0, "Mi"},          {1024.0, "Ki"},          {1, ""}};

static int unit_scaled(char *buf, double x, const unit_step *steps, int n, const char *unit) {
  if (isnan(x)) return snprintf(buf, FTH_UNIT_TEXT_CAP, "nan");
  if (isinf(x) && x > 0) return snprintf(buf, FTH_UNIT_TEXT_CAP, "inf");
  double ax = fabs(x);
  int i = 0;
  while (i < n - 1 && !(ax >= steps[i].at)) i++;
  return snprintf(buf, FTH_UNIT_TEXT_CAP, "%.4g %s%s", x / steps[i].at, steps[i].prefix, unit);
}

int fth_unit_text(char *buf, fth_unit u, double x) {
  const int nsi = (int)(sizeof SI_STEPS / sizeof SI_STEPS[0]);
  switch (u) {
  case FTH_UNIT_TIME: {
    if (isnan(x)) return snprintf(buf, FTH_UNIT_TEXT_CAP, "nan");
    if (isinf(x) && x > 0) return snprintf(buf, FTH_UNIT_TEXT_CAP, "inf");
    double a = fabs(x);
    if (a >= 86400.0 * 2) return snprintf(buf, FTH_UNIT_TEXT_CAP, "%.4g days", x / 86400);
    if (a >= 3600) return snprintf(buf, FTH_UNIT_TEXT_CAP, "%.4g h", x / 3600);
    if (a >= 60) return snprintf(buf, FTH_UNIT_TEXT_CAP, "%.4g min", x / 60);
    if (a >= 1 || a == 0) return snprintf(buf, FTH_UNIT_TEXT_CAP, "%.4g s", x);
    if (a >= 1e-3) return snprintf(buf, FTH_UNIT_TEXT_CAP, "%.4g ms", x * 1e3);
    if (a >= 1e-6) return snprintf(buf, FTH_UNIT_TEXT_CAP, "%.4g us", x * 1e6);
    return snprintf(buf, FTH_UNIT_TEXT_CAP, "%.4g ns", x * 1e9);
  }
  case FTH_UNIT_BYTES:
    if (isnan(x)) return snprintf(buf, FTH_UNIT_TEXT_CAP, "nan");
    return unit_scaled(buf, x, BIN_STEPS, (int)(sizeof BIN_STEPS / sizeof BIN_STEPS[0]), "B");
  case FTH_UNIT_FLOPS: return unit_scaled(buf, x, SI_STEPS, nsi, "FLOP");
  case FTH_UNIT_FLOPS_RATE: return unit_scaled(buf, x, SI_STEPS, nsi, "FLOP/s");
  case FTH_UNIT_BANDWIDTH: return unit_scaled(buf, x, SI_STEPS, nsi, "B/s");
  case FTH_UNIT_SI: return unit_scaled(buf, x, SI_STEPS, nsi, "");
  case FTH_UNIT_PERCENT: return snprintf(buf, FTH_UNIT_TEXT_CAP, "%.2f%%", 100 * x);
  case FTH_UNIT_KINDS: break;
  }
  buf[0] = '\0';
  return 0;
}
