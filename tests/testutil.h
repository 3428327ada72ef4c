/* testutil.h - helpers shared by the ctest suites (cmocka based).
 *
 * Random inputs come from a seeded generator whose seed every test prints, so
 * a failure can be replayed with ST_TEST_SEED=<seed>. */
#ifndef ST_TESTUTIL_H
#define ST_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sparsetune.h"

/* Exit code ctest treats as "skipped" (SKIP_RETURN_CODE). */
#define ST_TEST_SKIP 77

/* The seed for this process: $ST_TEST_SEED if set, else time-based; printed. */
uint64_t st_test_seed(const char *test_name);

/* splitmix64 step: a small, good, reproducible generator. */
uint64_t st_rand_next(uint64_t *state);
/* Uniform in [lo, hi). */
double st_rand_uniform(uint64_t *state, double lo, double hi);
/* Uniform integer in [lo, hi]. */
int64_t st_rand_int(uint64_t *state, int64_t lo, int64_t hi);

/* For GPU suites: returns 0 if a driver and device are present, else prints
 * "SKIPPED: <reason>" and returns ST_TEST_SKIP for main() to return. */
int st_test_require_gpu(void);

/* ST_TEST_COMPILE_ONLY=ARCH (e.g. sm_90a): the variant tests
 * (variant_matrix.h) compile every variant of their edge shapes for ARCH
 * with NVRTC and stop there, asserting that none failed; no driver or GPU
 * is needed. NULL when unset. */
const char *st_test_compile_only(void);

/* A fresh temporary file path under $TMPDIR (file not created); the caller
 * unlinks it. */
void st_test_temp_path(char *buf, size_t cap, const char *suffix);

/* A dense row-major view of `data` (strides in elements, innermost 1). */
st_tensor st_test_tensor(st_dtype dt, int ndim, const int64_t *shape, void *data);

/* Fails the cmocka test unless |got - want| <= eps, in double (cmocka's
 * own comparisons take floats only), naming the caller's line. */
#define expect_near(got, want, eps) st_test_expect_near((got), (want), (eps), __FILE__, __LINE__)
void st_test_expect_near(double got, double want, double eps, const char *file, int line);

#endif
