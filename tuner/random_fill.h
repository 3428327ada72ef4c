/* random_fill.h - reproducible random inputs for verification and timing. */
#ifndef ST_RANDOM_FILL_H
#define ST_RANDOM_FILL_H

#include <stddef.h>
#include <stdint.h>

#include "sparsetune.h"

/* splitmix64: one step of a small, good generator. */
uint64_t st_splitmix64(uint64_t *state);
/* Uniform integer in [0, n). */
uint64_t st_rand_below(uint64_t *state, uint64_t n);

/* Fills n elements of dtype (bf16, fp8 e4m3 or fp32) with values uniform in
 * [lo, hi), rounded to the dtype; the same seed gives the same bytes for any
 * thread count. Returns 0, or -1 for an unsupported dtype. */
int st_fill_uniform(void *dst, st_dtype dtype, size_t n, float lo, float hi, uint64_t seed, int threads);

#endif
