/* fth_rng.h: the one random-number generator of the core, xoshiro256** (Blackman & Vigna
 * 2018) seeded by splitmix64: reproducible on every platform, so the same seed gives the
 * same routing (fth_route.c) and the same request stream (fth_serve.c) everywhere.
 * Header-only (static inline): each user keeps its own state, nothing global. */
#ifndef FTH_RNG_H
#define FTH_RNG_H

#include <stdint.h>

typedef struct fth_rng {
  uint64_t s[4];
} fth_rng;

static inline uint64_t fth_rng_splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static inline void fth_rng_seed(fth_rng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = fth_rng_splitmix64(&seed);
}

static inline uint64_t fth_rng_rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

static inline uint64_t fth_rng_next(fth_rng *r) {
  uint64_t *s = r->s;
  uint64_t result = fth_rng_rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = fth_rng_rotl(s[3], 45);
  return result;
}

/// Uniform in [0, 1): the top 53 bits.
static inline double fth_rng_unit(fth_rng *r) {
  return (double)(fth_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

#endif
