/* `sparsetune show`: the run list, one run's measurements and a device's
 * winners, as aligned text and as valid JSON (strings with quotes, control
 * characters and invalid UTF-8 included); unknown runs are refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "report_capture.h"
#include "test_db_fixture.h"

typedef struct fixture {
  char path[256];
  st_db *db;
  int64_t device, done, running;
  char fast[40], slow[40];
} fixture;

static const char NASTY_ERROR[] = "bad \"quote\" \\ back\nslash\x01 caf\xc3\xa9 \xff!";
/* What NASTY_ERROR reads back as from JSON: the invalid byte is U+FFFD. */
static const char NASTY_DECODED[] = "bad \"quote\" \\ back\nslash\x01 caf\xc3\xa9 \xef\xbf\xbd!";

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  assert_non_null(f);
  f->db = fx_open_temp(f->path, sizeof f->path);
  f->device = fx_device(f->db, "NVIDIA H100 80GB HBM3", "sm_90a", "uuid-show");
  fx_variant(f->db, "index_decode", "fast \"one\"", 0, f->fast);
  fx_variant(f->db, "index_decode", "slow", 1, f->slow);
  f->done = fx_run(f->db, "tune", "index_decode", f->device, "done");
  fx_measure(f->db, f->done, f->fast, "B=1", "ok", 12.5, 0.02, NULL);
  fx_measure(f->db, f->done, f->fast, "B=64", "ok", 40.25, 0.035, NULL);
  fx_measure(f->db, f->done, f->slow, "B=1", "wrong", 0, 0, NASTY_ERROR);
  fx_measure(f->db, f->done, f->slow, "B=64", "pruned", 0, 0, NULL);
  f->running = fx_run(f->db, "bench", "index_decode", f->device, NULL);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  st_db_close(f->db);
  fx_remove(f->path);
  free(f);
  return 0;
}

/* Every line from the one starting with `head_start` on has column `col`
 * (a header word) start at the same offset. */
static void assert_aligned(const char *text, const char *head_start, const char *col, int min_rows) {
  const char *head = strstr(text, head_start);
  assert_non_null(head);
  const char *c = strstr(head, col);
  assert_non_null(c);
  size_t at = (size_t)(c - head);
  int rows = 0;
  for (const char *line = strchr(head, '\n') + 1; *line; line = strchr(line, '\n') + 1) {
    const char *end = strchr(line, '\n');
    assert_non_null(end);
    if ((size_t)(end - line) <= at) break; /* a summary line after the table */
    assert_true(line[at - 1] == ' ');
    assert_true(line[at] != ' ' || col[0] == ' ');
    rows++;
  }
  assert_true(rows >= min_rows);
}

static void test_run_list_text_and_json(void **state) {
  fixture *f = *state;
  st_err err = {{0}};
  capture c;
  capture_open(&c);
  assert_int_equal(st_report_runs(f->db, c.f, ST_REPORT_TEXT, 0, &err), ST_OK);
  capture_close(&c);
  printf("%s", c.buf);
  assert_aligned(c.buf, "id", "status", 2);
  assert_aligned(c.buf, "id", "started", 2);
  assert_non_null(strstr(c.buf, "NVIDIA H100 80GB HBM3 (sm_90a)"));
  /* newest first */
  assert_true(strstr(c.buf, "bench") < strstr(c.buf, "tune"));
  free(c.buf);

  capture_open(&c);
  assert_int_equal(st_report_runs(f->db, c.f, ST_REPORT_JSON, 0, &err), ST_OK);
  capture_close(&c);
  assert_true(fx_json_valid(c.buf));
  assert_int_equal(fx_json_int(c.buf, "$.runs[0].id"), f->running);
  assert_int_equal(fx_json_int(c.buf, "$.runs[1].id"), f->done);
  assert_int_equal(fx_json_int(c.buf, "$.runs[1].ok"), 2);
  assert_int_equal(fx_json_int(c.buf, "$.runs[1].wrong"), 1);
  assert_int_equal(fx_json_int(c.buf, "$.runs[1].pruned"), 1);
  char *env = fx_json_query("SELECT json_type(?1, '$.runs[1].env')", c.buf, NULL);
  assert_string_equal(env, "object"); /* '{}': none was given */
  free(env);
  char *status = fx_json_get(c.buf, "$.runs[0].status");
  assert_string_equal(status, "running");
  free(status);
  free(c.buf);

  capture_open(&c);
  assert_int_equal(st_report_runs(f->db, c.f, ST_REPORT_JSON, 1, &err), ST_OK);
  capture_close(&c);
  char *n = fx_json_query("SELECT json_array_length(?1, '$.runs')", c.buf, NULL);
  assert_string_equal(n, "1");
  free(n);
  free(c.buf);
}

static void test_run_measurements_text_and_json(void **state) {
  fixture *f = *state;
  st_err err = {{0}};
  capture c;
  capture_open(&c);
  assert_int_equal(st_report_run(f->db, c.f, ST_REPORT_TEXT, f->done, &err), ST_OK);
  capture_close(&c);
  printf("%s", c.buf);
  assert_aligned(c.buf, "variant", "status", 4);
  assert_aligned(c.buf, "variant", "shape", 4);
  assert_non_null(strstr(c.buf, "12.50"));
  assert_non_null(strstr(c.buf, "3.5")); /* spread % */
  /* One line per measurement: the newline inside the error became a space. */
  int lines = 0;
  for (const char *p = c.buf; *p; p++) lines += *p == '\n';
  assert_int_equal(lines, 1 + 1 + 4);
  free(c.buf);

  capture_open(&c);
  assert_int_equal(st_report_run(f->db, c.f, ST_REPORT_JSON, f->done, &err), ST_OK);
  capture_close(&c);
  assert_true(fx_json_valid(c.buf));
  assert_int_equal(fx_json_int(c.buf, "$.run.id"), f->done);
  char *name = fx_json_get(c.buf, "$.measurements[0].variant");
  assert_string_equal(name, "fast \"one\"");
  free(name);
  char *error = fx_json_query("SELECT json_extract(value, '$.error') FROM json_each(?1, '$.measurements') "
                              "WHERE json_extract(value, '$.status') = 'wrong'",
                              c.buf, NULL);
  assert_string_equal(error, NASTY_DECODED);
  free(error);
  free(c.buf);
}

static void test_unknown_run_is_refused(void **state) {
  fixture *f = *state;
  st_err err = {{0}};
  capture c;
  capture_open(&c);
  assert_int_equal(st_report_run(f->db, c.f, ST_REPORT_TEXT, 4242, &err), ST_ERR_INVALID_ARG);
  capture_close(&c);
  assert_non_null(strstr(err.msg, "run 4242 is not in the database"));
  assert_int_equal(c.size, 0);
  free(c.buf);
  assert_int_equal(st_report_runs(f->db, NULL, ST_REPORT_TEXT, 0, &err), ST_ERR_INVALID_ARG);
  assert_int_equal(st_report_runs(f->db, stdout, (st_report_format)9, 0, &err), ST_ERR_INVALID_ARG);
}

static void test_winners_text_and_json(void **state) {
  fixture *f = *state;
  st_winner_row w;
  memset(&w, 0, sizeof w);
  w.device_id = f->device;
  snprintf(w.op, sizeof w.op, "index_decode");
  snprintf(w.dispatch_key, sizeof w.dispatch_key, "B=1,dtype=bf16");
  snprintf(w.variant_id, sizeof w.variant_id, "%s", f->fast);
  snprintf(w.default_variant_id, sizeof w.default_variant_id, "%s", f->slow);
  w.run_id = f->done;
  w.median_us = 12.5;
  w.regret = 1.0;
  w.default_us = 25.0;
  st_err err = {{0}};
  assert_int_equal(st_db_put_winner(f->db, &w, &err), ST_OK);
  snprintf(w.dispatch_key, sizeof w.dispatch_key, "B=64,dtype=bf16");
  w.median_us = 40.25;
  w.default_us = 0; /* unknown */
  w.default_variant_id[0] = '\0';
  assert_int_equal(st_db_put_winner(f->db, &w, &err), ST_OK);

  capture c;
  capture_open(&c);
  assert_int_equal(st_report_winners(f->db, c.f, ST_REPORT_TEXT, "NVIDIA H100 80GB HBM3", NULL, &err), ST_OK);
  capture_close(&c);
  printf("%s", c.buf);
  assert_aligned(c.buf, "op ", "variant", 2);
  assert_non_null(strstr(c.buf, "2.00x"));
  assert_non_null(strstr(c.buf, "25.00"));
  free(c.buf);

  capture_open(&c);
  assert_int_equal(st_report_winners(f->db, c.f, ST_REPORT_JSON, "NVIDIA H100 80GB HBM3", "sm_90a", &err), ST_OK);
  capture_close(&c);
  assert_true(fx_json_valid(c.buf));
  char *up = fx_json_get(c.buf, "$.winners[0].speedup");
  assert_string_equal(up, "2");
  free(up);
  char *none = fx_json_query("SELECT json_type(?1, '$.winners[1].speedup')", c.buf, NULL);
  assert_string_equal(none, "null");
  free(none);
  free(c.buf);

  capture_open(&c);
  assert_int_equal(st_report_winners(f->db, c.f, ST_REPORT_JSON, "NVIDIA B200", NULL, &err), ST_OK);
  capture_close(&c);
  assert_true(fx_json_valid(c.buf));
  char *n = fx_json_query("SELECT json_array_length(?1, '$.winners')", c.buf, NULL);
  assert_string_equal(n, "0");
  free(n);
  free(c.buf);
}

static void test_empty_database_says_so(void **state) {
  (void)state;
  char path[256];
  st_db *db = fx_open_temp(path, sizeof path);
  st_err err = {{0}};
  capture c;
  capture_open(&c);
  assert_int_equal(st_report_runs(db, c.f, ST_REPORT_TEXT, 0, &err), ST_OK);
  capture_close(&c);
  assert_string_equal(c.buf, "no runs in the database\n");
  free(c.buf);
  st_db_close(db);
  fx_remove(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_run_list_text_and_json, setup, teardown),
      cmocka_unit_test_setup_teardown(test_run_measurements_text_and_json, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unknown_run_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_winners_text_and_json, setup, teardown),
      cmocka_unit_test(test_empty_database_says_so),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
