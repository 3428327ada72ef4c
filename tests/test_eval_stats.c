/* test_eval_stats.c - the regret summary of `sparsetune eval`: median,
 * nearest-rank 95th percentile, maximum, histogram bins, NaNs left out,
 * the JSON form. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval_stats.h"
#include "testutil.h"

static void summary_of_a_known_list(void **state) {
  (void)state;
  double r[20];
  for (int i = 0; i < 20; i++) r[i] = 0.01 * (19 - i); /* 0.19 .. 0.00, unsorted */
  st_regret_summary s;
  st_regret_summarize(r, 20, &s);
  assert_int_equal(s.n, 20);
  assert_true(fabs(s.median - 0.095) < 1e-12); /* mean of the 10th and 11th */
  assert_true(fabs(s.p95 - 0.18) < 1e-12);     /* rank ceil(19) = 19 */
  assert_true(fabs(s.max - 0.19) < 1e-12);
  /* <= 1%: 0, 0.01; 1-3%: 0.02, 0.03; 3-10%: 0.04..0.10; 10-25%: the rest */
  const int want[ST_REGRET_BINS] = {2, 2, 7, 9, 0};
  for (int b = 0; b < ST_REGRET_BINS; b++) assert_int_equal(s.hist[b], want[b]);
}

static void odd_counts_nans_and_empty_lists(void **state) {
  (void)state;
  double r[] = {0.5, NAN, -0.02, 0.3, NAN};
  st_regret_summary s;
  st_regret_summarize(r, 5, &s);
  assert_int_equal(s.n, 3);
  assert_true(fabs(s.median - 0.3) < 1e-12);
  assert_true(fabs(s.p95 - 0.5) < 1e-12);
  assert_true(fabs(s.max - 0.5) < 1e-12);
  assert_int_equal(s.hist[0], 1); /* a negative regret: faster than the oracle (noise) */
  assert_int_equal(s.hist[4], 2);
  st_regret_summarize(NULL, 0, &s);
  assert_int_equal(s.n, 0);
  assert_true(isnan(s.median) && isnan(s.p95) && isnan(s.max));
  double only_nan[] = {NAN};
  st_regret_summarize(only_nan, 1, &s);
  assert_int_equal(s.n, 0);
}

static void printed_forms(void **state) {
  (void)state;
  double r[] = {0.0, 0.02, 0.3};
  st_regret_summary s;
  st_regret_summarize(r, 3, &s);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  st_regret_print(f, "regret", &s);
  st_regret_print_json(f, &s);
  st_regret_summarize(NULL, 0, &s);
  fputc('\n', f);
  st_regret_print_json(f, &s);
  fclose(f);
  printf("%s\n", buf);
  assert_non_null(strstr(buf, "regret, 3 shapes: median 2.0%, p95 30.0%, max 30.0%; <= 1%: 1, 1-3%: 1, 3-10%: 0, "
                              "10-25%: 0, > 25%: 1\n"));
  assert_non_null(strstr(buf, "{\"n\":3,\"median\":0.02,\"p95\":0.3,\"max\":0.3,\"histogram\":{\"<= 1%\":1,"));
  assert_non_null(strstr(buf, "{\"n\":0,\"median\":null,\"p95\":null,\"max\":null,"));
  free(buf);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(summary_of_a_known_list),
      cmocka_unit_test(odd_counts_nans_and_empty_lists),
      cmocka_unit_test(printed_forms),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
