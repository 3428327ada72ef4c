/* The selections the attention cases draw (tuner/ops/attn_inputs.c):
 * random rows hold the query's own block, block 0 and distinct other
 * visible blocks; holes add -1 and blocks past the own one; repeats list
 * some blocks twice; and a selection name outside the four is refused
 * with all four named. */
#include <string.h>

#include "ops/attn_inputs.h"
#include "testutil.h"

enum { TOPK = 16, MAX_BLOCKS = 64, ROWS = 200, POS = 40 * 128 + 5 /* 41 visible blocks */ };

/* Entries of `row` listing block j. */
static int count_of(const int32_t *row, int32_t j) {
  int n = 0;
  for (int k = 0; k < TOPK; k++) n += row[k] == j;
  return n;
}

static void test_random_rows_hold_distinct_visible_blocks(void **state) {
  (void)state;
  uint64_t rng = 7;
  int32_t row[TOPK];
  for (int r = 0; r < ROWS; r++) {
    st_attn_make_selection(row, TOPK, POS, MAX_BLOCKS, "random", &rng);
    assert_int_equal(count_of(row, 40), 1); /* the own block */
    assert_int_equal(count_of(row, 0), 1);
    for (int k = 0; k < TOPK; k++) {
      assert_true(row[k] >= 0 && row[k] <= 40);
      assert_int_equal(count_of(row, row[k]), 1);
    }
  }
  st_attn_make_selection(row, TOPK, 3 * 128, MAX_BLOCKS, "random", &rng); /* 4 visible: all, then -1 */
  for (int32_t j = 0; j < 4; j++) assert_int_equal(count_of(row, j), 1);
  assert_int_equal(count_of(row, -1), TOPK - 4);
}

static void test_holes_and_repeats_rows(void **state) {
  (void)state;
  uint64_t rng = 11;
  int32_t row[TOPK];
  int holes = 0, past = 0, repeated = 0;
  for (int r = 0; r < ROWS; r++) {
    st_attn_make_selection(row, TOPK, POS, MAX_BLOCKS, "holes", &rng);
    for (int k = 0; k < TOPK; k++) {
      assert_true(row[k] >= -1 && row[k] <= MAX_BLOCKS);
      holes += row[k] == -1;
      past += row[k] > 40;
    }
    st_attn_make_selection(row, TOPK, POS, MAX_BLOCKS, "repeats", &rng);
    int twice = 0;
    for (int k = 0; k < TOPK; k++) {
      assert_true(row[k] >= 0 && row[k] <= 40);
      twice |= count_of(row, row[k]) > 1;
    }
    repeated += twice;
  }
  assert_true(holes > 0 && past > 0);
  assert_true(repeated > ROWS / 4); /* about an eighth of 16 entries a row is a copy */
}

static void test_an_unknown_selection_is_refused(void **state) {
  (void)state;
  st_err err = {{0}};
  st_params shape = {0};
  const char *kv[][2] = {{"D", "128"},      {"Hkv", "2"},         {"dtype", "bf16"},
                         {"scale", "none"}, {"layout", "pages2"}, {"sel", "top"}};
  for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
    assert_int_equal(st_params_set(&shape, kv[i][0], kv[i][1], &err), ST_OK);
  st_attn_kv_case kvc;
  const char *sel = NULL;
  assert_int_equal(st_attn_kv_read_shape(&shape, &kvc, &sel, &err), ST_ERR_INVALID_ARG);
  assert_string_equal(err.msg, "shape sel='top' is not random, holes, local or repeats");
  assert_int_equal(st_params_set(&shape, "sel", "repeats", &err), ST_OK);
  assert_int_equal(st_attn_kv_read_shape(&shape, &kvc, &sel, &err), ST_OK);
  assert_string_equal(sel, "repeats");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_rows_hold_distinct_visible_blocks),
      cmocka_unit_test(test_holes_and_repeats_rows),
      cmocka_unit_test(test_an_unknown_selection_is_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
