/* fth_ryu.h: shortest round-trip decimal digits of a double (Ryu, vendored;
 * see fth_ryu.c). */
#ifndef FTH_RYU_H
#define FTH_RYU_H

#include <stdint.h>

/// x (finite, nonzero) = digits x 10^exp10 read back exactly, with the fewest
/// digits and, among those, the closest to x (ties to even). The sign is not
/// included. Returns 0 for 0, infinities and NaN (digits untouched).
int fth_ryu_shortest(double x, uint64_t *digits, int *exp10);

#endif
