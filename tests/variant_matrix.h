/* variant_matrix.h - every generated variant of an op against the
 * reference over a list of shapes, on the GPU (variant_matrix.c). */
#ifndef ST_TEST_VARIANT_MATRIX_H
#define ST_TEST_VARIANT_MATRIX_H

#include <stdint.h>

#include "generator.h"

/* Fails the calling cmocka test on any wrong result, CUDA failure or a
 * matrix with nothing to check. Case inputs come from seed + shape index.
 * ST_TEST_STRIDE=N checks every Nth variant only (for compute-sanitizer),
 * ST_TEST_MATCH=TEXT those whose name holds TEXT, ST_TEST_SHAPE=TEXT the
 * shapes whose key holds TEXT, ST_TEST_VERBOSE=1 names each pair before it
 * runs (to place a sanitizer's report); ST_TEST_COMPILE_ONLY=ARCH
 * compiles them for ARCH and stops (testutil.h: no GPU needed), with
 * ST_TEST_STRIDE=N the variants of about one distinct source in N. */
void st_test_every_variant(const char *op, const st_shape *shapes, int nshapes, uint64_t seed);

/* Clears *s and starts a varlen prefill shape of `op`: its requests
 * "q_len:prefix;..." and B, their query tokens. The caller adds the op's
 * other fields and the key. */
void st_test_varlen_shape(st_shape *s, const char *op, const char *reqs);

#endif
