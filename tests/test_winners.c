/* Winners per dispatch key: least worst-case regret over the key's shapes,
 * only variants timed on every shape, ties to the faster worst case, and the
 * default variant's figures alongside. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "winners.h"

static void test_least_worst_case_regret_wins(void **state) {
  (void)state;
  /* Key K has shapes s1, s2. a: 10/40 (regret 2.0 on s2), b: 12/22
   * (regret 1.2 on s1, 1.1 on s2), c: fastest on s1 but missing s2. */
  const st_win_input in[] = {
      {"K", "s1", "a", 0, 10}, {"K", "s2", "a", 0, 40}, {"K", "s1", "b", 0, 12}, {"K", "s2", "b", 0, 22},
      {"K", "s1", "c", 0, 9},  {"K", "s2", "c", 0, 0},  {"K", "s1", "d", 1, 30}, {"K", "s2", "d", 1, 50},
      {"L", "s3", "a", 0, 5},  {"L", "s3", "e", 0, 5},  {"L", "s3", "d", 1, 7},
  };
  st_win_result *w = NULL;
  int n = 0;
  assert_int_equal(st_pick_winners(in, (int)(sizeof in / sizeof in[0]), &w, &n), 0);
  assert_int_equal(n, 2);
  assert_string_equal(w[0].dispatch_key, "K");
  assert_string_equal(w[0].variant_id, "b");
  assert_int_equal(w[0].nshapes, 2);
  assert_float_equal(w[0].regret, 12.0 / 9.0, 1e-12); /* c's 9 is the best on s1 */
  assert_float_equal(w[0].worst_us, 22, 0);
  assert_string_equal(w[0].default_id, "d");
  assert_float_equal(w[0].default_worst_us, 50, 0);
  /* L: a tie in regret (1.0); equal worst case keeps the first seen in id order. */
  assert_string_equal(w[1].dispatch_key, "L");
  assert_float_equal(w[1].regret, 1.0, 0);
  assert_string_equal(w[1].variant_id, "a");
  free(w);
}

static void test_key_without_any_complete_variant_has_no_winner(void **state) {
  (void)state;
  const st_win_input in[] = {{"K", "s1", "a", 0, 10}, {"K", "s2", "b", 0, 20}};
  st_win_result *w = NULL;
  int n = -1;
  assert_int_equal(st_pick_winners(in, 2, &w, &n), 0);
  assert_int_equal(n, 0);
  free(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_least_worst_case_regret_wins),
      cmocka_unit_test(test_key_without_any_complete_variant_has_no_winner),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
