/* test_runtime_gpu_open.c - st_open on a machine with a CUDA driver and GPU.
 *
 * Skips (exit 77, with the reason) where there is no driver or device. The
 * end-to-end launch test lives beside it; this suite checks that st_open
 * fails cleanly, releasing what it took, when the database is unusable or
 * the device ordinal does not exist. */
#include <stdio.h>
#include <string.h>

#include "sparsetune.h"
#include "testutil.h"

static void assert_contains(const char *text, const char *part) {
  if (!strstr(text, part)) fail_msg("expected \"%s\" in \"%s\"", part, text);
}

static void open_of_a_missing_database_is_a_db_error(void **state) {
  (void)state;
  char path[512];
  st_test_temp_path(path, sizeof path, "_missing/none.db");
  st_handle *h = NULL;
  assert_int_equal(st_open(path, 0, &h), ST_ERR_DB);
  assert_null(h);
  printf("# st_open(%s): %s\n", path, st_last_error(NULL));
  assert_true(st_last_error(NULL)[0] != '\0');
}

static void open_of_a_file_that_is_not_a_database_is_a_db_error(void **state) {
  (void)state;
  char path[512];
  st_test_temp_path(path, sizeof path, ".db");
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fputs("this is not an SQLite database, and it is long enough to have a header\n", f);
  fclose(f);
  st_handle *h = NULL;
  st_status st = st_open(path, 0, &h);
  remove(path);
  assert_int_equal(st, ST_ERR_DB);
  assert_null(h);
  printf("# st_open(not a db): %s\n", st_last_error(NULL));
}

static void open_of_a_missing_device_is_no_device(void **state) {
  (void)state;
  st_handle *h = NULL;
  assert_int_equal(st_open("unused.db", 4096, &h), ST_ERR_NO_DEVICE);
  assert_null(h);
  assert_contains(st_last_error(NULL), "4096");
}

/* Open and fail many times: a leak of the primary context or of the
 * database would show under the sanitizers and in the driver's refcount. */
static void failed_opens_release_what_they_took(void **state) {
  (void)state;
  for (int i = 0; i < 50; i++) {
    st_handle *h = NULL;
    assert_int_equal(st_open("/nonexistent/dir/sparsetune.db", 0, &h), ST_ERR_DB);
  }
}

int main(void) {
  int skip = st_test_require_gpu();
  if (skip) return skip;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(open_of_a_missing_database_is_a_db_error),
      cmocka_unit_test(open_of_a_file_that_is_not_a_database_is_a_db_error),
      cmocka_unit_test(open_of_a_missing_device_is_no_device),
      cmocka_unit_test(failed_opens_release_what_they_took),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
