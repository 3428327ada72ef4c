/* test_timing_retry.c - which set of repetitions a measurement keeps
 * (tuner/timing.h's st_timing_keep_quietest), without a GPU: a disturbed set
 * is timed again, the quietest is kept, and the attempts are bounded. */
#include "testutil.h"
#include "timing.h"

static st_timing set_of(double median, double spread) {
  st_timing t = {.median_us = median, .spread = spread, .reps = 5};
  return t;
}

static void test_quiet_first_set_is_kept_at_once(void **state) {
  (void)state;
  st_timing kept = {0}; /* nothing kept yet */
  const st_timing a = set_of(7.0, 0.004);
  assert_int_equal(st_timing_keep_quietest(&kept, &a, 0.03), 0);
  assert_int_equal(kept.attempts, 1);
  assert_true(kept.median_us == 7.0 && kept.spread == 0.004);
}

static void test_disturbed_set_is_timed_again_and_the_quietest_kept(void **state) {
  (void)state;
  st_timing kept = {0}; /* nothing kept yet */
  const st_timing a = set_of(16.1, 0.32), b = set_of(8.7, 0.005), c = set_of(9.9, 0.20);
  assert_int_equal(st_timing_keep_quietest(&kept, &a, 0.03), 1); /* 32% > 3%: again */
  assert_int_equal(kept.attempts, 1);
  assert_int_equal(st_timing_keep_quietest(&kept, &b, 0.03), 0); /* quiet: done */
  assert_int_equal(kept.attempts, 2);
  assert_true(kept.median_us == 8.7);
  /* a noisier set after a quiet one never replaces it */
  assert_int_equal(st_timing_keep_quietest(&kept, &c, 0.03), 0);
  assert_true(kept.median_us == 8.7 && kept.attempts == 3);
}

static void test_attempts_are_bounded(void **state) {
  (void)state;
  st_timing kept = {0}; /* nothing kept yet */
  const st_timing noisy[ST_TIMING_ATTEMPTS] = {set_of(12.0, 0.30), set_of(11.0, 0.10), set_of(13.0, 0.20)};
  for (int i = 0; i < ST_TIMING_ATTEMPTS; i++)
    assert_int_equal(st_timing_keep_quietest(&kept, &noisy[i], 0.03), i + 1 < ST_TIMING_ATTEMPTS);
  assert_int_equal(kept.attempts, ST_TIMING_ATTEMPTS);
  assert_true(kept.median_us == 11.0 && kept.spread == 0.10); /* the quietest of the three */
}

static void test_no_retry_without_a_threshold(void **state) {
  (void)state;
  st_timing kept = {0}; /* nothing kept yet */
  const st_timing a = set_of(16.1, 0.32);
  assert_int_equal(st_timing_keep_quietest(&kept, &a, 0), 0);
  assert_int_equal(kept.attempts, 1);
  assert_true(kept.median_us == 16.1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_quiet_first_set_is_kept_at_once),
      cmocka_unit_test(test_disturbed_set_is_timed_again_and_the_quietest_kept),
      cmocka_unit_test(test_attempts_are_bounded),
      cmocka_unit_test(test_no_retry_without_a_threshold),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
