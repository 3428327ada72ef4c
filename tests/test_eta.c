/* The tune's time left (tuner/eta.c): the running shape at its own rate,
 * other shapes at their op's. */
#include <stdio.h>
#include <string.h>

#include "eta.h"
#include "testutil.h"

static st_eta planned(const char *const *ops, const int *jobs, int n) {
  st_eta e;
  memset(&e, 0, sizeof e);
  for (int i = 0; i < n; i++) st_eta_plan(&e, ops[i], jobs[i]);
  st_eta_start(&e, 0.0);
  return e;
}

/* `count` pairs of a shape of `op`, `each` seconds apart, the first after
 * `setup`; returns the time of the last. */
static double run(st_eta *e, const char *op, int jobs, int count, double t, double setup, double each) {
  st_eta_shape(e, op, jobs);
  for (int i = 0; i < count; i++) st_eta_done(e, t += i == 0 ? setup + each : each);
  return t;
}

/* The main job's prefill tune: 900 cheap index pairs, then 2000 attention
 * pairs at 30 times their cost. One rate over all pairs done said a fifth
 * of the time left once the attention shapes began. */
static void test_each_op_goes_at_its_own_rate(void **state) {
  (void)state;
  const char *ops[] = {"index_score", "sparse_attn", "sparse_attn"};
  const int jobs[] = {900, 1000, 1000};
  st_eta e = planned(ops, jobs, 3);
  assert_true(st_eta_left(&e) < 0); /* nothing done: unknown */
  double t = run(&e, "index_score", 900, 900, 0.0, 0.0, 0.01);
  /* sparse_attn not started: the rate of all pairs so far */
  assert_float_equal(st_eta_left(&e), 2000 * 0.01, 1e-6);
  t = run(&e, "sparse_attn", 1000, 1000, t, 0.0, 0.3);
  assert_float_equal(st_eta_left(&e), 1000 * 0.3, 1e-6); /* the next shape: the op's rate */
  run(&e, "sparse_attn", 1000, 1000, t, 0.0, 0.3);
  assert_float_equal(st_eta_left(&e), 0.0, 1e-9);
}

/* A shape four times as costly as the op's first: once two of its pairs
 * are done, its rest goes at its own rate, the op's later shapes at the
 * op's; its first pair's setup counts for the op, not for the shape. */
static void test_the_running_shape_goes_at_its_own_rate(void **state) {
  (void)state;
  const char *ops[] = {"sparse_attn", "sparse_attn", "sparse_attn"};
  const int jobs[] = {10, 10, 10};
  st_eta e = planned(ops, jobs, 3);
  double t = run(&e, "sparse_attn", 10, 10, 0.0, 0.0, 1.0); /* 1 s a pair */
  t = run(&e, "sparse_attn", 10, 1, t, 6.0, 4.0);           /* 10 s: setup and a pair */
  /* one pair: the op's rate, (10 + 10) / 11 */
  assert_float_equal(st_eta_left(&e), 19 * 20.0 / 11, 1e-9);
  st_eta_done(&e, t += 4.0);
  st_eta_done(&e, t + 4.0);
  /* its 7 left at its 4 s a pair; the third shape's 10 at the op's (28 / 13) */
  assert_float_equal(st_eta_left(&e), 7 * 4.0 + 10 * 28.0 / 13, 1e-9);
}

/* Time between pairs goes to the next pair's op; plans of one op add up. */
static void test_setup_time_is_charged_to_the_next_pairs_op(void **state) {
  (void)state;
  const char *ops[] = {"index_topk", "index_decode", "index_decode"};
  const int jobs[] = {2, 1, 3};
  st_eta e = planned(ops, jobs, 3);
  double t = run(&e, "index_topk", 2, 2, 0.0, 0.0, 1.0);
  t = run(&e, "index_decode", 1, 1, t, 9.0, 1.0); /* 10 s: setup and pair */
  assert_float_equal(st_eta_left(&e), 3 * 10.0, 1e-9);
  st_eta_shape(&e, "index_decode", 3);
  st_eta_done(&e, t + 2.0); /* (10 + 2) / 2 a pair for the op; the shape has one pair */
  assert_float_equal(st_eta_left(&e), 2 * 6.0, 1e-9);
}

/* More ops than slots share the last one: still an estimate, no overflow. */
static void test_ops_past_the_table_share_its_last_slot(void **state) {
  (void)state;
  st_eta e;
  memset(&e, 0, sizeof e);
  char op[32];
  for (int i = 0; i < ST_ETA_MAX_OPS + 4; i++) {
    snprintf(op, sizeof op, "op%d", i);
    st_eta_plan(&e, op, 1);
  }
  assert_int_equal(e.n, ST_ETA_MAX_OPS);
  assert_int_equal(e.ops[ST_ETA_MAX_OPS - 1].total, 5);
  st_eta_start(&e, 0.0);
  st_eta_done(&e, 1.0); /* no shape begun: not counted */
  assert_true(st_eta_left(&e) < 0);
  st_eta_shape(&e, "op0", 1);
  st_eta_done(&e, 2.0);
  assert_float_equal(st_eta_left(&e), (ST_ETA_MAX_OPS + 3) * 2.0, 1e-9);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_each_op_goes_at_its_own_rate),
      cmocka_unit_test(test_the_running_shape_goes_at_its_own_rate),
      cmocka_unit_test(test_setup_time_is_charged_to_the_next_pairs_op),
      cmocka_unit_test(test_ops_past_the_table_share_its_last_slot),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
