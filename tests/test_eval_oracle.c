/* An eval reuses its oracle database's tune only when that tune finished,
 * with the same args, on a card of the same model: the newest such run is
 * named; an interrupted or running tune, other args (another seed, the
 * other search), a bench, another card model, a missing file or one that
 * is not a database give 0, and the missing file is not created. */
#include "eval_oracle.h"
#include "run_args.h"
#include "test_db_fixture.h"

#define H200 "NVIDIA H200"

static char g_path[256];
static char g_args[256];

static int64_t run_of(st_db *db, const char *kind, const char *args, int64_t device, const char *status) {
  st_run_row r;
  memset(&r, 0, sizeof r);
  snprintf(r.kind, sizeof r.kind, "%s", kind);
  snprintf(r.op, sizeof r.op, "*");
  snprintf(r.suite, sizeof r.suite, "random-decode:7:12");
  snprintf(r.args, sizeof r.args, "%s", args);
  r.device_id = device;
  int64_t id = 0;
  st_err err = {{0}};
  if (st_db_run_begin(db, &r, &id, &err) != ST_OK) fail_msg("run_begin: %s", err.msg);
  if (status && st_db_run_finish(db, id, status, &err) != ST_OK) fail_msg("run_finish: %s", err.msg);
  return id;
}

static void test_only_a_finished_tune_of_the_same_args_and_card_is_reused(void **state) {
  (void)state;
  st_tune_run_args(g_args, sizeof g_args, "random-decode:7:12", NULL, 7, NULL, 0, 1);
  assert_string_equal(g_args, "suite=random-decode:7:12 op=* seed=7 search=model");
  char other_seed[256], full[256];
  st_tune_run_args(other_seed, sizeof other_seed, "random-decode:7:12", NULL, 8, NULL, 0, 1);
  st_tune_run_args(full, sizeof full, "random-decode:7:12", NULL, 7, NULL, 0, 0);
  st_db *db = fx_open_temp(g_path, sizeof g_path);
  const int64_t h200 = fx_device(db, H200, "sm_90a", "uuid-a");
  const int64_t h100 = fx_device(db, "NVIDIA H100 80GB HBM3", "sm_90a", "uuid-b");
  run_of(db, "tune", g_args, h200, "interrupted");
  run_of(db, "tune", g_args, h200, NULL); /* still running */
  run_of(db, "tune", other_seed, h200, "done");
  run_of(db, "tune", full, h200, "done");
  run_of(db, "bench", g_args, h200, "done");
  run_of(db, "tune", g_args, h100, "done");
  st_db_close(db);
  assert_int_equal(st_eval_finished_tune(g_path, g_args, H200), 0);
  db = NULL;
  st_err err = {{0}};
  assert_int_equal(st_db_open(g_path, ST_DB_READWRITE, &db, &err), ST_OK);
  const int64_t first = run_of(db, "tune", g_args, h200, "done");
  const int64_t newest = run_of(db, "tune", g_args, h200, "done");
  st_db_close(db);
  assert_true(newest > first);
  assert_int_equal(st_eval_finished_tune(g_path, g_args, H200), newest);
  assert_int_equal(st_eval_finished_tune(g_path, g_args, "NVIDIA H100 80GB HBM3") > 0, 1);
  assert_int_equal(st_eval_finished_tune(g_path, other_seed, "NVIDIA B200"), 0);
  fx_remove(g_path);
}

static void test_no_database_no_oracle_and_nothing_created(void **state) {
  (void)state;
  char path[256];
  st_test_temp_path(path, sizeof path, ".db");
  assert_int_equal(st_eval_finished_tune(path, "suite=x op=* seed=1", H200), 0);
  assert_false(fx_exists(path));
  fx_write_file(path, "not a database, only text\n", 26);
  assert_int_equal(st_eval_finished_tune(path, "suite=x op=* seed=1", H200), 0);
  size_t n = 0;
  unsigned char *back = fx_read_file(path, &n);
  assert_int_equal(n, 26);
  free(back);
  fx_remove(path);
  assert_int_equal(st_eval_finished_tune(NULL, "a", H200), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_only_a_finished_tune_of_the_same_args_and_card_is_reused),
      cmocka_unit_test(test_no_database_no_oracle_and_nothing_created),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
