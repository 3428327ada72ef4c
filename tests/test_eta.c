/* The tune's time left (tuner/eta.c): each op's pairs at that op's rate. */
#include <stdio.h>
#include <string.h>

#include "eta.h"
#include "testutil.h"

/* The main job's prefill shape: 900 cheap index pairs, then 2000 attention
 * pairs at 30 times their cost. A single rate over all pairs done says a
 * fifth of the true time left after the first 100 attention pairs. */
static void test_each_op_goes_at_its_own_rate(void **state) {
  (void)state;
  st_eta e;
  memset(&e, 0, sizeof e);
  st_eta_plan(&e, "index_score", 900);
  st_eta_plan(&e, "sparse_attn", 2000);
  st_eta_start(&e, 100.0);
  assert_true(st_eta_left(&e) < 0); /* nothing done: unknown */
  double t = 100.0;
  for (int i = 0; i < 900; i++) st_eta_done(&e, "index_score", t += 0.01);
  /* sparse_attn not started: the overall rate (0.01 s a pair) */
  assert_float_equal(st_eta_left(&e), 2000 * 0.01, 1e-6);
  for (int i = 0; i < 100; i++) st_eta_done(&e, "sparse_attn", t += 0.3);
  assert_float_equal(st_eta_left(&e), 1900 * 0.3, 1e-6);
  for (int i = 0; i < 1900; i++) st_eta_done(&e, "sparse_attn", t += 0.3);
  assert_float_equal(st_eta_left(&e), 0.0, 1e-9);
}

/* The time between pairs (a shape's inputs and reference) goes to the
 * next pair's op; a plan counted twice for one op adds up. */
static void test_setup_time_is_charged_to_the_next_pairs_op(void **state) {
  (void)state;
  st_eta e;
  memset(&e, 0, sizeof e);
  st_eta_plan(&e, "index_topk", 2);
  st_eta_plan(&e, "index_decode", 1);
  st_eta_plan(&e, "index_decode", 3);
  st_eta_start(&e, 0.0);
  st_eta_done(&e, "index_topk", 1.0);
  st_eta_done(&e, "index_topk", 2.0);
  st_eta_done(&e, "index_decode", 12.0); /* 10 s of setup and pair */
  assert_float_equal(st_eta_left(&e), 3 * 10.0, 1e-9);
  st_eta_done(&e, "index_decode", 14.0); /* (10 + 2) / 2 a pair */
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
  st_eta_done(&e, "op0", 1.0);
  assert_float_equal(st_eta_left(&e), (ST_ETA_MAX_OPS + 3) * 1.0, 1e-9);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_each_op_goes_at_its_own_rate),
      cmocka_unit_test(test_setup_time_is_charged_to_the_next_pairs_op),
      cmocka_unit_test(test_ops_past_the_table_share_its_last_slot),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
