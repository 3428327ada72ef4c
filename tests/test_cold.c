/* test_cold.c - cold-cache timing's arithmetic (tuner/cold.h) without a GPU:
 * how many input sets, how large the pools, what refuses. */
#include <math.h>
#include <stdint.h>

#include "cold.h"
#include "testutil.h"

#define MIB (1024.0 * 1024.0)
#define L2 (50LL * 1024 * 1024)

/* A cycle reads >= ST_COLD_CYCLE_L2 x L2, within 2 .. the timing's limit. */
static void test_rotations_cover_the_cycle(void **state) {
  (void)state;
  assert_int_equal(st_cold_rotations(1 * MIB, L2), ST_TIMING_MAX_ROTATIONS); /* fp8 B1 8K: capped */
  assert_int_equal(st_cold_rotations(2 * MIB, L2), 75);                      /* bf16 B1 8K: 150 MiB / 2 MiB */
  assert_int_equal(st_cold_rotations(64 * MIB, L2), 3);
  assert_int_equal(st_cold_rotations(4096 * MIB, L2), 2); /* far past L2: still two sets */
  assert_int_equal(st_cold_rotations(0, L2), ST_TIMING_MAX_ROTATIONS);
  for (int k = 0; k < 19; k++) { /* 0.5 MiB .. 7 GiB */
    const double mib = 0.5 * pow(1.7, k);
    const int n = st_cold_rotations(mib * MIB, L2);
    assert_true(n >= 2 && n <= ST_TIMING_MAX_ROTATIONS);
    if (n < ST_TIMING_MAX_ROTATIONS) assert_true(n * mib * MIB >= ST_COLD_CYCLE_L2 * (double)L2);
  }
}

static void test_pools_grow_only_when_cold(void **state) {
  (void)state;
  const int64_t page = 32 * 1024; /* an index-K page: 128 tokens x 128 x bf16 */
  assert_int_equal(st_cold_pool_pages(0, 4096, page, L2), 4096);
  assert_int_equal(st_cold_pool_pages(1, 4096, page, L2), ST_COLD_POOL_L2 * L2 / page);
  assert_int_equal(st_cold_pool_pages(1, 1 << 20, page, L2), 1 << 20); /* already larger */
  assert_int_equal(st_cold_pool_pages(1, 4097, 3, 10), 4097);
  assert_int_equal(st_cold_pool_pages(1, 1, 3, 10), (ST_COLD_POOL_L2 * 10 + 2) / 3); /* rounded up */
}

/* Bad requests are refused before any CUDA call (cu is never used). */
static void test_tables_refuse_bad_requests(void **state) {
  (void)state;
  st_cold_tables t = {.own = 0x1000, .entries = 8, .pages = 4096, .seed = 1};
  st_err err = {{0}};
  assert_int_equal(st_cold_make(NULL, &t, 1, &err), ST_ERR_INVALID_ARG);
  assert_int_equal(st_cold_make(NULL, &t, ST_TIMING_MAX_ROTATIONS + 1, &err), ST_ERR_INVALID_ARG);
  st_cold_tables none = {.own = 0x1000, .entries = 0, .pages = 4096};
  assert_int_equal(st_cold_make(NULL, &none, 4, &err), ST_ERR_INVALID_ARG);
  /* Before st_cold_make: set 0 is the case's own table, no other set exists. */
  assert_ptr_equal(st_cold_pick(&t, 0), (void *)(uintptr_t)0x1000);
  assert_null(st_cold_pick(&t, 1));
  assert_null(st_cold_pick(&t, -1));
  /* After (as st_cold_make leaves it): sets 1..n-1 one after another. */
  t.more = 0x100000;
  t.n = 3;
  assert_ptr_equal(st_cold_pick(&t, 1), (void *)(uintptr_t)0x100000);
  assert_ptr_equal(st_cold_pick(&t, 2), (void *)(uintptr_t)(0x100000 + 8 * 4));
  assert_null(st_cold_pick(&t, 3));
  /* A harness's rotate points the case's block table at a set, or fails. */
  st_tensor bt = {.data = (void *)(uintptr_t)0x1000};
  assert_int_equal(st_cold_point(&t, &bt, 2, &err), ST_OK);
  assert_ptr_equal(bt.data, (void *)(uintptr_t)(0x100000 + 8 * 4));
  assert_int_equal(st_cold_point(&t, &bt, 3, &err), ST_ERR_INVALID_ARG);
  assert_ptr_equal(bt.data, (void *)(uintptr_t)(0x100000 + 8 * 4)); /* untouched */
  assert_int_equal(st_cold_point(&t, &bt, 0, &err), ST_OK);
  assert_ptr_equal(bt.data, (void *)(uintptr_t)0x1000);
}

static void test_run_args_mark(void **state) {
  (void)state;
  assert_true(st_cold_run("suite=anchors op=* seed=1 " ST_COLD_RUN_ARG));
  assert_false(st_cold_run("suite=anchors op=* seed=1"));
  assert_false(st_cold_run("suite=anchors op=* seed=1 match=" ST_COLD_RUN_ARG));
  assert_false(st_cold_run(ST_COLD_RUN_ARG)); /* only after a space */
  assert_false(st_cold_run(NULL));
  assert_false(st_cold_run(""));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rotations_cover_the_cycle),
      cmocka_unit_test(test_pools_grow_only_when_cold),
      cmocka_unit_test(test_tables_refuse_bad_requests),
      cmocka_unit_test(test_run_args_mark),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
