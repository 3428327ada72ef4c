/* `sparsetune history`: over 30 runs of a suite with 2% noise, finds exactly
 * the planted +10% step (at the run where the card, its driver and the tool
 * version change, and names them) and no change in the flat shape, keeps
 * cold runs in a history of their own, exits 1 on a slowdown and 0 without
 * one, names a step where only runs.env changed (templates, driver) by
 * it, writes valid JSON with every series, and refuses an unknown suite,
 * --min-runs 0 and a database that is not sparsetune's with exit 2, never
 * changing the file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "report_history.h"
#include "run_args.h"
#include "run_env.h"
#include "cmd_in_process.h"
#include "report_capture.h"
#include "test_db_fixture.h"

static uint64_t g_seed;

enum { NRUNS = 30, STEP_RUN = 19 /* 0-based: the 20th run */, NCOLD = 10 };
#define STEP 0.10
#define NOISE 0.02
#define STEPPED_SHAPE "B=1,T=4096"
#define FLAT_SHAPE "B=8,T=1024"

typedef struct fixture {
  char path[256];
  int64_t run[NRUNS];
  char variant[40];
} fixture;

/* A card of the H100 model with its own uuid and driver version. */
static int64_t put_card(st_db *db, const char *uuid, int driver) {
  st_device_info dev;
  memset(&dev, 0, sizeof dev);
  snprintf(dev.name, sizeof dev.name, "NVIDIA H100 80GB HBM3");
  snprintf(dev.arch, sizeof dev.arch, "sm_90a");
  snprintf(dev.uuid, sizeof dev.uuid, "%s", uuid);
  dev.cc_major = 9;
  dev.sm_count = 132;
  dev.mem_bytes = 80LL << 30;
  dev.l2_bytes = 50LL << 20;
  dev.driver_version = driver;
  int64_t id = 0;
  st_err err = {{0}};
  if (st_db_put_device(db, &dev, &id, &err) != ST_OK) fail_msg("put_device: %s", err.msg);
  return id;
}

/* A finished run; env is its runs.env text (NULL: none recorded, '{}'). */
static int64_t put_run_env(st_db *db, const char *suite, int64_t device, const char *tool, int cold, const char *env) {
  st_run_row r;
  memset(&r, 0, sizeof r);
  snprintf(r.kind, sizeof r.kind, "tune");
  snprintf(r.op, sizeof r.op, "index_decode");
  snprintf(r.suite, sizeof r.suite, "%s", suite);
  snprintf(r.args, sizeof r.args, "suite=%s op=index_decode%s", suite, cold ? " " ST_COLD_RUN_ARG : "");
  snprintf(r.tool_version, sizeof r.tool_version, "%s", tool);
  r.device_id = device;
  snprintf(r.env, sizeof r.env, "%s", env ? env : "");
  int64_t id = 0;
  st_err err = {{0}};
  if (st_db_run_begin(db, &r, &id, &err) != ST_OK || st_db_run_finish(db, id, "done", &err) != ST_OK)
    fail_msg("run: %s", err.msg);
  return id;
}

static int64_t put_run(st_db *db, const char *suite, int64_t device, const char *tool, int cold) {
  return put_run_env(db, suite, device, tool, cold, NULL);
}

/* runs.env as run_env.c writes it, with the driver and template hash given. */
static void env_text(char *out, size_t cap, int driver, const char *templates_hash) {
  snprintf(out, cap,
           "{\"tool_version\":\"0.1.0\",\"driver\":%d,\"nvrtc\":\"13.0\",\"gpu_name\":\"NVIDIA H100 80GB HBM3\","
           "\"gpu_uuid\":\"uuid-a\",\"sm_count\":132,\"generator_hash\":\"0123456789abcdef0123456789abcdef\","
           "\"templates_hash\":\"%s\",\"suite\":\"tpl\",\"seed\":1}",
           driver, templates_hash);
}

#define TPL_BEFORE "aaaaaaaa111111111111111111111111"
#define TPL_AFTER "bbbbbbbb222222222222222222222222"

static double noisy(uint64_t *rng, double us) { return us * (1 + st_rand_uniform(rng, -NOISE, NOISE)); }

/* Suite "main": 30 warm runs, the stepped shape 10% slower from the 20th,
 * where the runs move to a second card (newer driver) and tool 0.2.0; after
 * each of the first 10, a cold run twice as slow (its own history). Suite
 * "flat": 30 runs of the same card with no step. The database is closed
 * again, so the commands under test open it alone. */
static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  assert_non_null(f);
  uint64_t rng = g_seed;
  st_db *db = fx_open_temp(f->path, sizeof f->path);
  const int64_t card_a = put_card(db, "uuid-a", 13000), card_b = put_card(db, "uuid-b", 13010);
  fx_variant(db, "index_decode", "v_tile64", 1, f->variant);
  for (int i = 0; i < NRUNS; i++) {
    const int after = i >= STEP_RUN;
    f->run[i] = put_run(db, "main", after ? card_b : card_a, after ? "0.2.0" : "0.1.0", 0);
    fx_measure(db, f->run[i], f->variant, STEPPED_SHAPE, "ok", noisy(&rng, 100.0 * (after ? 1 + STEP : 1)), 0.01, NULL);
    fx_measure(db, f->run[i], f->variant, FLAT_SHAPE, "ok", noisy(&rng, 40.0), 0.01, NULL);
    if (i < NCOLD) {
      const int64_t cold = put_run(db, "main", card_a, "0.1.0", 1);
      fx_measure(db, cold, f->variant, STEPPED_SHAPE, "ok", noisy(&rng, 200.0), 0.01, NULL);
      fx_measure(db, cold, f->variant, FLAT_SHAPE, "ok", noisy(&rng, 80.0), 0.01, NULL);
    }
  }
  /* Suite "tpl": one card, one tool version, one set of args; only runs.env
   * changes at the step: the templates and the driver. The devices table
   * knows card a's latest driver only (13000), so the older driver is in
   * env alone. */
  for (int i = 0; i < NRUNS; i++) {
    const int after = i >= STEP_RUN;
    char env[ST_RUN_ENV_CAP];
    env_text(env, sizeof env, after ? 13000 : 12080, after ? TPL_AFTER : TPL_BEFORE);
    const int64_t r = put_run_env(db, "tpl", card_a, "0.1.0", 0, env);
    fx_measure(db, r, f->variant, STEPPED_SHAPE, "ok", noisy(&rng, 100.0 * (after ? 1 + STEP : 1)), 0.01, NULL);
  }
  for (int i = 0; i < NRUNS; i++) {
    const int64_t r = put_run(db, "flat", card_a, "0.1.0", 0);
    fx_measure(db, r, f->variant, STEPPED_SHAPE, "ok", noisy(&rng, 100.0), 0.01, NULL);
    fx_measure(db, r, f->variant, FLAT_SHAPE, "ok", noisy(&rng, 40.0), 0.01, NULL);
  }
  st_db_close(db);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  fx_remove(f->path);
  free(f);
  return 0;
}

/* The report of `suite` (text or JSON) into a malloc'ed buffer. */
static char *report(const fixture *f, const char *suite, st_report_format format, st_history_summary *s) {
  st_db *db = NULL;
  st_err err = {{0}};
  if (st_db_open(f->path, ST_DB_READONLY, &db, &err) != ST_OK) fail_msg("open: %s", err.msg);
  st_history_opts o = {.suite = suite,
                       .op = NULL,
                       .min_runs = ST_HISTORY_DEFAULT_MIN_RUNS,
                       .threshold = ST_HISTORY_DEFAULT_THRESHOLD,
                       .format = format};
  capture c;
  capture_open(&c);
  const st_status st = st_report_history(db, c.f, &o, s, &err);
  capture_close(&c);
  st_db_close(db);
  if (st != ST_OK) fail_msg("history %s: %s", suite, err.msg);
  return c.buf;
}

static int run_cmd(const fixture *f, const char *a1, const char *a2, const char *a3, const char *a4) {
  return st_test_cmd(st_cmd_history, "history", (const char *[]){"--db", f->path, a1, a2, a3, a4, NULL});
}

static void test_finds_the_planted_step_and_names_what_changed(void **state) {
  fixture *f = *state;
  st_history_summary s;
  char *json = report(f, "main", ST_REPORT_JSON, &s);
  assert_int_equal(s.histories, 2); /* warm and cold */
  assert_int_equal(s.series, 4);
  assert_int_equal(s.change_points, 1);
  assert_int_equal(s.slowdowns, 1);
  assert_true(fx_json_valid(json));
  /* The warm history comes first (its first run is older). */
  char *cache = fx_json_get(json, "$.histories[0].cache");
  assert_string_equal(cache, "warm");
  free(cache);
  for (int k = 0; k < 2; k++) {
    char path[128];
    snprintf(path, sizeof path, "$.histories[0].series[%d].shape", k);
    char *shape = fx_json_get(json, path);
    snprintf(path, sizeof path, "$.histories[0].series[%d].change_points", k);
    char *n = fx_json_query("SELECT json_array_length(?1, ?2)", json, path);
    snprintf(path, sizeof path, "$.histories[0].series[%d].medians_us", k);
    char *len = fx_json_query("SELECT json_array_length(?1, ?2)", json, path);
    assert_int_equal(atoi(len), NRUNS);
    if (!strcmp(shape, FLAT_SHAPE)) {
      assert_int_equal(atoi(n), 0);
    } else {
      assert_string_equal(shape, STEPPED_SHAPE);
      assert_int_equal(atoi(n), 1);
      snprintf(path, sizeof path, "$.histories[0].series[%d].change_points[0].run_id", k);
      const long long run = fx_json_int(json, path);
      assert_true(llabs(run - (long long)f->run[STEP_RUN]) <= 1);
      snprintf(path, sizeof path, "$.histories[0].series[%d].change_points[0].shift", k);
      char *shift = fx_json_get(json, path);
      const double x = atof(shift);
      if (fabs(x - STEP) > 0.03) fail_msg("shift %g, planted %g (seed %llu)", x, STEP, (unsigned long long)g_seed);
      free(shift);
      snprintf(path, sizeof path, "$.histories[0].series[%d].change_points[0].changed.driver_version[1]", k);
      assert_int_equal(fx_json_int(json, path), 13010);
      snprintf(path, sizeof path, "$.histories[0].series[%d].change_points[0].changed.tool_version[1]", k);
      char *tool = fx_json_get(json, path);
      assert_string_equal(tool, "0.2.0");
      free(tool);
    }
    free(shape);
    free(n);
    free(len);
  }
  /* The cold history: its own 10 runs, its own series, no change. */
  char *nruns = fx_json_query("SELECT json_array_length(?1, '$.histories[1].runs')", json, NULL);
  assert_int_equal(atoi(nruns), NCOLD);
  free(nruns);
  free(json);

  char *text = report(f, "main", ST_REPORT_TEXT, &s);
  assert_non_null(strstr(text, STEPPED_SHAPE));
  assert_non_null(strstr(text, "driver 13000 -> 13010"));
  assert_non_null(strstr(text, "tool 0.1.0 -> 0.2.0"));
  assert_null(strstr(text, FLAT_SHAPE "  ")); /* no row for the flat shape */
  free(text);
}

/* A step where only runs.env changed is named by it: the template hash and
 * the driver the runs saw (which the devices table no longer knows). */
static void test_names_a_template_hash_change_from_run_env(void **state) {
  fixture *f = *state;
  st_history_summary s;
  char *text = report(f, "tpl", ST_REPORT_TEXT, &s);
  assert_int_equal(s.change_points, 1);
  if (!strstr(text, "templates aaaaaaaa -> bbbbbbbb")) fail_msg("no template change named in:\n%s", text);
  assert_non_null(strstr(text, "driver 12080 -> 13000"));
  assert_null(strstr(text, "tool "));
  assert_null(strstr(text, "nvrtc "));
  assert_null(strstr(text, "generator "));
  free(text);
  char *json = report(f, "tpl", ST_REPORT_JSON, &s);
  assert_true(fx_json_valid(json));
  char *v = fx_json_get(json, "$.histories[0].series[0].change_points[0].changed.templates_hash[0]");
  assert_string_equal(v, TPL_BEFORE);
  free(v);
  v = fx_json_get(json, "$.histories[0].series[0].change_points[0].changed.templates_hash[1]");
  assert_string_equal(v, TPL_AFTER);
  free(v);
  assert_int_equal(fx_json_int(json, "$.histories[0].series[0].change_points[0].changed.driver_version[0]"), 12080);
  free(json);
  /* Runs from before schema v2 (env '{}') name no env change. */
  text = report(f, "main", ST_REPORT_TEXT, &s);
  assert_null(strstr(text, "templates "));
  free(text);
}

static void test_exit_status_says_whether_a_series_slowed(void **state) {
  fixture *f = *state;
  assert_int_equal(run_cmd(f, "--suite", "main", NULL, NULL), 1);
  assert_int_equal(run_cmd(f, "--suite", "flat", NULL, NULL), 0);
  assert_int_equal(run_cmd(f, "--suite", "main", "--threshold", "0.5"), 0); /* +10% is not beyond 50% */
  assert_int_equal(run_cmd(f, "--suite", "main", "--json", NULL), 1);
  st_history_summary s;
  char *text = report(f, "flat", ST_REPORT_TEXT, &s);
  assert_int_equal(s.change_points, 0);
  assert_int_equal(s.series, 2);
  free(text);
}

static void test_bad_input_is_refused_and_the_file_is_unchanged(void **state) {
  fixture *f = *state;
  size_t n0;
  unsigned char *before = fx_read_file(f->path, &n0);
  assert_int_equal(run_cmd(f, "--suite", "no-such-suite", NULL, NULL), 2);
  assert_int_equal(run_cmd(f, "--suite", "main", "--min-runs", "0"), 2);
  assert_int_equal(run_cmd(f, "--suite", "main", "--op", "sparse_attn"), 2);
  assert_int_equal(run_cmd(f, NULL, NULL, NULL, NULL), 2); /* no --suite */
  assert_int_equal(run_cmd(f, "--suite", "main", "--base", "1"), 2);
  assert_int_equal(run_cmd(f, "--suite", "main", NULL, NULL), 1);
  fx_expect_unchanged(f->path, before, n0);

  /* The message names the suite. */
  st_db *db = NULL;
  st_err err = {{0}};
  assert_int_equal(st_db_open(f->path, ST_DB_READONLY, &db, &err), ST_OK);
  st_history_opts o = {.suite = "no-such-suite", .min_runs = 8, .threshold = 0.05, .format = ST_REPORT_TEXT};
  capture c;
  capture_open(&c);
  assert_int_equal(st_report_history(db, c.f, &o, NULL, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "no-such-suite"));
  o.suite = "main";
  o.min_runs = 0;
  assert_int_equal(st_report_history(db, c.f, &o, NULL, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "min_runs=0"));
  capture_close(&c);
  assert_int_equal(c.size, 0); /* nothing written on failure */
  free(c.buf);
  st_db_close(db);
}

static void test_a_database_not_sparsetunes_is_refused_unchanged(void **state) {
  fixture *f = *state;
  char path[256];
  st_test_temp_path(path, sizeof path, ".db");
  sqlite3 *conn = NULL;
  assert_int_equal(sqlite3_open(path, &conn), SQLITE_OK);
  assert_int_equal(sqlite3_exec(conn,
                                "CREATE TABLE runs (id INTEGER, suite TEXT); INSERT INTO runs VALUES (1, 'main');",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  sqlite3_close(conn);
  size_t n0;
  unsigned char *before = fx_read_file(path, &n0);
  fixture other = *f;
  snprintf(other.path, sizeof other.path, "%s", path);
  assert_int_equal(run_cmd(&other, "--suite", "main", NULL, NULL), 2);
  fx_expect_unchanged(path, before, n0);
  /* Not a database at all. */
  fx_write_file(path, "not a database\n", 15);
  assert_int_equal(run_cmd(&other, "--suite", "main", NULL, NULL), 2);
  size_t n1;
  unsigned char *after = fx_read_file(path, &n1);
  assert_int_equal(n1, 15);
  assert_memory_equal(after, "not a database\n", 15);
  free(after);
  fx_remove(path);
}

int main(void) {
  g_seed = st_test_seed("test_report_history");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_finds_the_planted_step_and_names_what_changed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_names_a_template_hash_change_from_run_env, setup, teardown),
      cmocka_unit_test_setup_teardown(test_exit_status_says_whether_a_series_slowed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_input_is_refused_and_the_file_is_unchanged, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_database_not_sparsetunes_is_refused_unchanged, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
