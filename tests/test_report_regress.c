/* `sparsetune regress`: finds exactly the planted regressions and
 * improvements among random timings, lets noise (the stored spreads) mask a
 * change that exceeds the threshold, counts pairs present in one run only,
 * writes valid JSON, warns across ops and devices, and refuses bad run ids
 * without writing anything. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "report_capture.h"
#include "test_db_fixture.h"

static uint64_t g_seed;

enum { NVARIANTS = 6, NSHAPES = 5 };
typedef enum planted { P_REGRESSION, P_IMPROVEMENT, P_MASKED, P_SMALL, P_KINDS } planted;

typedef struct fixture {
  char path[256];
  st_db *db;
  int64_t device, base, head;
  char variant[NVARIANTS][40];
  st_regress_summary expect;
  char regressions[4096], improvements[4096]; /* "id|shape;..." sorted */
  char worst[300];                            /* "name  shape" of the largest regression */
} fixture;

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void join_sorted(char **keys, int n, char *out, size_t cap) {
  qsort(keys, (size_t)n, sizeof *keys, cmp_str);
  out[0] = '\0';
  for (int i = 0; i < n; i++) {
    if (i) strncat(out, ";", cap - strlen(out) - 1);
    strncat(out, keys[i], cap - strlen(out) - 1);
  }
}

/* Random base timings; head timings planted per pair; plus four pairs that
 * exist ok in one run only or in neither. */
static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  assert_non_null(f);
  uint64_t rng = g_seed;
  f->db = fx_open_temp(f->path, sizeof f->path);
  f->device = fx_device(f->db, "NVIDIA H100 80GB HBM3", "sm_90a", "uuid-regress");
  for (int v = 0; v < NVARIANTS; v++) {
    char name[32];
    snprintf(name, sizeof name, "variant_%d", v);
    fx_variant(f->db, "index_decode", name, v == 0, f->variant[v]);
  }
  f->base = fx_run(f->db, "tune", "index_decode", f->device, "done");
  f->head = fx_run(f->db, "tune", "index_decode", f->device, "done");

  char *reg[NVARIANTS * NSHAPES], *imp[NVARIANTS * NSHAPES];
  int nreg = 0, nimp = 0;
  double worst = 0;
  for (int v = 0; v < NVARIANTS; v++) {
    for (int s = 0; s < NSHAPES; s++) {
      int i = v * NSHAPES + s;
      planted kind = i < P_KINDS ? (planted)i : (planted)st_rand_int(&rng, 0, P_KINDS - 1);
      char shape[64];
      snprintf(shape, sizeof shape, "B=%d,ctx=%d", 1 << s, 4096 << v);
      double base = st_rand_uniform(&rng, 5, 500), r = 0, sb = 0, sh = 0;
      switch (kind) {
      case P_REGRESSION: r = st_rand_uniform(&rng, 0.15, 0.6); break;
      case P_IMPROVEMENT: r = -st_rand_uniform(&rng, 0.15, 0.45); break;
      case P_MASKED: r = st_rand_uniform(&rng, 0.06, 0.12); break; /* beyond 5 %, within noise */
      default: r = st_rand_uniform(&rng, -0.03, 0.03); break;
      }
      if (kind == P_MASKED) {
        sb = st_rand_uniform(&rng, 0.07, 0.1);
        sh = st_rand_uniform(&rng, 0.07, 0.1);
      } else {
        sb = st_rand_uniform(&rng, 0.001, 0.03);
        sh = st_rand_uniform(&rng, 0.001, 0.03);
      }
      fx_measure(f->db, f->base, f->variant[v], shape, "ok", base, sb, NULL);
      fx_measure(f->db, f->head, f->variant[v], shape, "ok", base * (1 + r), sh, NULL);
      f->expect.compared++;
      char key[128];
      snprintf(key, sizeof key, "%s|%s", f->variant[v], shape);
      if (kind == P_REGRESSION) {
        f->expect.regressions++;
        reg[nreg++] = strdup(key);
        if (r > worst) {
          worst = r;
          snprintf(f->worst, sizeof f->worst, "variant_%d  %s", v, shape);
        }
      } else if (kind == P_IMPROVEMENT) {
        f->expect.improvements++;
        imp[nimp++] = strdup(key);
      } else {
        f->expect.unchanged++;
      }
    }
  }
  join_sorted(reg, nreg, f->regressions, sizeof f->regressions);
  join_sorted(imp, nimp, f->improvements, sizeof f->improvements);
  for (int i = 0; i < nreg; i++) free(reg[i]);
  for (int i = 0; i < nimp; i++) free(imp[i]);

  fx_measure(f->db, f->base, f->variant[0], "only=wrong", "ok", 10, 0.01, NULL);
  fx_measure(f->db, f->head, f->variant[0], "only=wrong", "wrong", 0, 0, "max_err 0.3 > 0.02");
  fx_measure(f->db, f->base, f->variant[1], "only=absent", "ok", 10, 0.01, NULL);
  fx_measure(f->db, f->base, f->variant[2], "only=head", "failed", 0, 0, "illegal address");
  fx_measure(f->db, f->head, f->variant[2], "only=head", "ok", 10, 0.01, NULL);
  fx_measure(f->db, f->base, f->variant[3], "neither", "failed", 0, 0, "x");
  fx_measure(f->db, f->head, f->variant[3], "neither", "pruned", 0, 0, NULL);
  f->expect.only_base = 2;
  f->expect.only_head = 1;
  printf("# planted: %d compared, %d regressions, %d improvements, %d unchanged\n", f->expect.compared,
         f->expect.regressions, f->expect.improvements, f->expect.unchanged);
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

static void assert_summary(const st_regress_summary *got, const st_regress_summary *want) {
  assert_int_equal(got->compared, want->compared);
  assert_int_equal(got->regressions, want->regressions);
  assert_int_equal(got->improvements, want->improvements);
  assert_int_equal(got->unchanged, want->unchanged);
  assert_int_equal(got->only_base, want->only_base);
  assert_int_equal(got->only_head, want->only_head);
}

/* Runs regress of `o` on the fixture's database into `c` (opened and
 * closed here: read c->buf, then free it); its status. */
static st_status regress_to(const fixture *f, const st_regress_opts *o, capture *c, st_regress_summary *s,
                            st_err *err) {
  capture_open(c);
  const st_status st = st_report_regress(f->db, c->f, o, s, err);
  capture_close(c);
  return st;
}

static void test_text_report_finds_planted_regressions(void **state) {
  fixture *f = *state;
  st_regress_opts o = {f->base, f->head, ST_REGRESS_DEFAULT_THRESHOLD, ST_REPORT_TEXT};
  st_regress_summary s;
  st_err err = {{0}};
  capture c;
  st_status st = regress_to(f, &o, &c, &s, &err);
  if (st != ST_OK) fail_msg("%s", err.msg);
  printf("%s", c.buf);
  assert_summary(&s, &f->expect);
  char line[256];
  snprintf(line, sizeof line,
           "%d compared, %d regressions, %d improvements, %d unchanged, %d only in base, %d only in head\n", s.compared,
           s.regressions, s.improvements, s.unchanged, s.only_base, s.only_head);
  assert_non_null(strstr(c.buf, line));
  /* Worst first: the row after the header is the largest planted slowdown. */
  const char *head = strstr(c.buf, "variant ");
  assert_non_null(head);
  const char *row = strchr(head, '\n') + 1;
  const char *end = strchr(row, '\n');
  assert_non_null(end);
  char first[512];
  snprintf(first, sizeof first, "%.*s", (int)(end - row), row);
  char name[64], shape[64];
  assert_int_equal(sscanf(f->worst, "%63s %63s", name, shape), 2);
  assert_non_null(strstr(first, name));
  assert_non_null(strstr(first, shape));
  assert_non_null(strstr(first, "regression"));
  assert_non_null(strstr(c.buf, "note: variant_0 on only=wrong was ok in base and is wrong in head"));
  assert_null(strstr(c.buf, "warning:"));
  free(c.buf);
}

static char *pairs_with(const char *json, const char *verdict) {
  return fx_json_query("SELECT coalesce(group_concat(k, ';'), '') FROM (SELECT json_extract(value, '$.variant_id') "
                       "|| '|' || json_extract(value, '$.shape') AS k FROM json_each(?1, '$.pairs') "
                       "WHERE json_extract(value, '$.verdict') = ?2 ORDER BY k)",
                       json, verdict);
}

static void test_json_report_lists_exactly_the_planted_pairs(void **state) {
  fixture *f = *state;
  st_regress_opts o = {f->base, f->head, ST_REGRESS_DEFAULT_THRESHOLD, ST_REPORT_JSON};
  st_regress_summary s;
  st_err err = {{0}};
  capture c;
  assert_int_equal(regress_to(f, &o, &c, &s, &err), ST_OK);
  assert_true(fx_json_valid(c.buf));
  assert_summary(&s, &f->expect);
  char *reg = pairs_with(c.buf, "regression"), *imp = pairs_with(c.buf, "improvement");
  assert_string_equal(reg, f->regressions);
  assert_string_equal(imp, f->improvements);
  free(reg);
  free(imp);
  assert_int_equal(fx_json_int(c.buf, "$.summary.regressions"), f->expect.regressions);
  assert_int_equal(fx_json_int(c.buf, "$.summary.only_in_base"), 2);
  assert_int_equal(fx_json_int(c.buf, "$.base.id"), f->base);
  char *status = fx_json_get(c.buf, "$.only_in_head[0].base_status");
  assert_string_equal(status, "failed");
  free(status);
  char *n = fx_json_query("SELECT json_array_length(?1, '$.pairs')", c.buf, NULL);
  assert_int_equal(atoi(n), f->expect.compared);
  free(n);
  free(c.buf);
}

/* One pair 8 % slower: a regression at a 5 % threshold when the runs are
 * quiet, unchanged at 10 %, and unchanged at 5 % when the spreads add up
 * to more than 8 %. */
static void test_threshold_and_noise_rule(void **state) {
  fixture *f = *state;
  int64_t quiet_b = fx_run(f->db, "bench", "index_decode", f->device, "done");
  int64_t quiet_h = fx_run(f->db, "bench", "index_decode", f->device, "done");
  fx_measure(f->db, quiet_b, f->variant[0], "B=1", "ok", 100, 0.01, NULL);
  fx_measure(f->db, quiet_h, f->variant[0], "B=1", "ok", 108, 0.01, NULL);
  int64_t noisy_b = fx_run(f->db, "bench", "index_decode", f->device, "done");
  int64_t noisy_h = fx_run(f->db, "bench", "index_decode", f->device, "done");
  fx_measure(f->db, noisy_b, f->variant[0], "B=1", "ok", 100, 0.05, NULL);
  fx_measure(f->db, noisy_h, f->variant[0], "B=1", "ok", 108, 0.04, NULL);

  struct {
    int64_t b, h;
    double threshold;
    int regressions;
  } cases[] = {{quiet_b, quiet_h, 0.05, 1},
               {quiet_b, quiet_h, 0.10, 0},
               {noisy_b, noisy_h, 0.05, 0},
               {noisy_b, noisy_h, 0.0, 0},
               {quiet_h, quiet_b, 0.05, 0}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    st_regress_opts o = {cases[i].b, cases[i].h, cases[i].threshold, ST_REPORT_TEXT};
    st_regress_summary s;
    st_err err = {{0}};
    capture c;
    assert_int_equal(regress_to(f, &o, &c, &s, &err), ST_OK);
    assert_int_equal(s.compared, 1);
    assert_int_equal(s.regressions, cases[i].regressions);
    if (i == 4) assert_int_equal(s.improvements, 1); /* reversed: 7.4 % faster */
    free(c.buf);
  }
}

/* A measurement with its repetitions given (the tuner's samples column). */
static void measure_reps(st_db *db, int64_t run, const char *variant, const char *reps) {
  st_measurement m;
  memset(&m, 0, sizeof m);
  m.run_id = run;
  snprintf(m.variant_id, sizeof m.variant_id, "%s", variant);
  snprintf(m.shape_key, sizeof m.shape_key, "B=1");
  snprintf(m.status, sizeof m.status, "ok");
  double v[16] = {0};
  int n = 0;
  for (const char *s = reps + 1; n < 16 && *s && *s != ']'; n++) {
    char *end;
    v[n] = strtod(s, &end);
    s = *end == ',' ? end + 1 : end;
  }
  if (n == 0) fail_msg("measure_reps: no repetition in %s", reps);
  double lo = v[0], hi = v[0], sorted[16];
  memcpy(sorted, v, sizeof(double) * (size_t)n);
  for (int i = 0; i < n; i++) {
    lo = v[i] < lo ? v[i] : lo;
    hi = v[i] > hi ? v[i] : hi;
    for (int j = i; j > 0 && sorted[j] < sorted[j - 1]; j--) {
      const double t = sorted[j];
      sorted[j] = sorted[j - 1];
      sorted[j - 1] = t;
    }
  }
  m.median_us = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  m.min_us = lo;
  m.max_us = hi;
  m.spread = (hi - lo) / m.median_us;
  m.reps = n;
  m.iters = 20;
  snprintf(m.samples, sizeof m.samples, "%s", reps);
  st_err err = {{0}};
  if (st_db_put_measurement(db, &m, &err) != ST_OK) fail_msg("put_measurement: %s", err.msg);
}

/* With 5+ repetitions a side the rank test judges: a consistent 4 % slowdown
 * whose spreads (wider than 4 %) would have hidden it is a regression at a
 * 3 % threshold, and the same 4 % in the medians of two overlapping samples
 * is not; with fewer repetitions the spreads still judge (the fixture's
 * other pairs). The JSON names the test and its p. */
static void test_rank_test_judges_where_there_are_repetitions(void **state) {
  fixture *f = *state;
  const int64_t b = fx_run(f->db, "tune", "index_decode", f->device, "done");
  const int64_t h = fx_run(f->db, "tune", "index_decode", f->device, "done");
  /* Every head repetition slower than every base one, but a fast base and a
   * slow head outlier make each spread over 4 %. */
  measure_reps(f->db, b, f->variant[0], "[100,100.2,99.8,100.1,99.9,100,96]");
  measure_reps(f->db, h, f->variant[0], "[104,104.2,103.8,104.1,103.9,104,108]");
  measure_reps(f->db, b, f->variant[1], "[100,110,92,105,96,103,99]");
  measure_reps(f->db, h, f->variant[1], "[104,94,112,101,108,97,111]");
  st_regress_opts o = {b, h, 0.03, ST_REPORT_JSON};
  st_regress_summary s;
  st_err err = {{0}};
  capture c;
  assert_int_equal(regress_to(f, &o, &c, &s, &err), ST_OK);
  assert_int_equal(s.compared, 2);
  assert_int_equal(s.regressions, 1);
  assert_int_equal(s.unchanged, 1);
  assert_true(fx_json_valid(c.buf));
  char *test0 = fx_json_get(c.buf, "$.pairs[0].test"), *verdict0 = fx_json_get(c.buf, "$.pairs[0].verdict");
  char *p0 = fx_json_get(c.buf, "$.pairs[0].p"), *test1 = fx_json_get(c.buf, "$.pairs[1].test");
  assert_string_equal(test0, "rank");
  assert_string_equal(test1, "rank");
  assert_string_equal(verdict0, "regression");
  assert_true(strtod(p0, NULL) > 0 && strtod(p0, NULL) <= 0.01);
  free(test0);
  free(verdict0);
  free(p0);
  free(test1);
  free(c.buf);
  /* With 3 repetitions a side the spreads judge: 8 % + 8 % hide 4 %. */
  const int64_t b2 = fx_run(f->db, "tune", "index_decode", f->device, "done");
  const int64_t h2 = fx_run(f->db, "tune", "index_decode", f->device, "done");
  measure_reps(f->db, b2, f->variant[0], "[100,104,96]");
  measure_reps(f->db, h2, f->variant[0], "[104,108,100]");
  o = (st_regress_opts){b2, h2, 0.03, ST_REPORT_TEXT};
  assert_int_equal(regress_to(f, &o, &c, &s, &err), ST_OK);
  assert_int_equal(s.regressions, 0);
  assert_non_null(strstr(c.buf, "rank test"));
  free(c.buf);
}

static void test_bad_arguments_are_refused_without_output(void **state) {
  fixture *f = *state;
  struct {
    int64_t b, h;
    double threshold;
    const char *needle;
  } cases[] = {
      {999, f->head, 0.05, "--base run 999 is not in the database"},
      {f->base, 12345, 0.05, "--head run 12345 is not in the database"},
      {f->base, f->base, 0.05, "both run"},
      {f->base, f->head, -0.1, "threshold=-0.1"},
      {f->base, f->head, NAN, "threshold=nan"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    st_regress_opts o = {cases[i].b, cases[i].h, cases[i].threshold, ST_REPORT_TEXT};
    st_regress_summary s = {.regressions = 7};
    st_err err = {{0}};
    capture c;
    assert_int_equal(regress_to(f, &o, &c, &s, &err), ST_ERR_INVALID_ARG);
    printf("# refused: %s\n", err.msg);
    if (!strstr(err.msg, cases[i].needle)) fail_msg("'%s' lacks '%s'", err.msg, cases[i].needle);
    assert_int_equal(c.size, 0);
    assert_int_equal(s.regressions, 0);
    free(c.buf);
  }
  st_err err = {{0}};
  assert_int_equal(st_report_regress(f->db, stdout, NULL, NULL, &err), ST_ERR_INVALID_ARG);
}

/* A run made as fx_run makes one, with `args`. */
static int64_t run_with_args(st_db *db, int64_t device_id, const char *args) {
  st_run_row r;
  memset(&r, 0, sizeof r);
  snprintf(r.kind, sizeof r.kind, "bench");
  snprintf(r.op, sizeof r.op, "index_decode");
  snprintf(r.suite, sizeof r.suite, "quick");
  snprintf(r.args, sizeof r.args, "%s", args);
  snprintf(r.tool_version, sizeof r.tool_version, "0.1.0");
  r.device_id = device_id;
  int64_t id = 0;
  st_err err = {{0}};
  if (st_db_run_begin(db, &r, &id, &err) != ST_OK || st_db_run_finish(db, id, "done", &err) != ST_OK)
    fail_msg("run: %s", err.msg);
  return id;
}

/* Times with the paged caches cold in L2 (`--cold`) and warm do not
 * compare: refused with a message, nothing printed. Two cold runs compare. */
static void test_cold_and_warm_runs_are_not_compared(void **state) {
  fixture *f = *state;
  const int64_t cold1 = run_with_args(f->db, f->device, "suite=quick op=* seed=1 cache=cold");
  const int64_t cold2 = run_with_args(f->db, f->device, "suite=quick op=* seed=1 match=x cache=cold");
  /* The mark counts only at the end (a --match text has no spaces). */
  const int64_t warm = run_with_args(f->db, f->device, "suite=quick op=* seed=1 match=cache=cold");
  fx_measure(f->db, cold1, f->variant[0], "B=1", "ok", 10, 0.01, NULL);
  fx_measure(f->db, cold2, f->variant[0], "B=1", "ok", 20, 0.01, NULL);
  fx_measure(f->db, warm, f->variant[0], "B=1", "ok", 10, 0.01, NULL);
  const int64_t pairs[][2] = {{f->base, cold1}, {cold1, f->base}, {cold2, warm}, {cold1, cold2}};
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    const int same = i == 3; /* the two cold runs */
    st_regress_opts o = {pairs[i][0], pairs[i][1], 0.05, ST_REPORT_TEXT};
    st_regress_summary s;
    st_err err = {{0}};
    capture c;
    assert_int_equal(regress_to(f, &o, &c, &s, &err), same ? ST_OK : ST_ERR_INVALID_ARG);
    if (same) {
      assert_int_equal(s.compared, 1);
      assert_int_equal(s.regressions, 1);
    } else {
      printf("# refused: %s\n", err.msg);
      assert_non_null(strstr(err.msg, "do not compare"));
      assert_int_equal(c.size, 0);
    }
    free(c.buf);
  }
}

/* A run that measured nothing (stopped before its first shape) compares
 * as empty on either side: every ok pair of the other run is "only in" it,
 * in text and in JSON. */
static void test_a_run_without_measurements_compares_as_empty(void **state) {
  fixture *f = *state;
  const int64_t empty = fx_run(f->db, "tune", "index_decode", f->device, "done");
  const int64_t empty2 = fx_run(f->db, "tune", "index_decode", f->device, "done");
  const int ok_in_base = f->expect.compared + f->expect.only_base;
  const int ok_in_head = f->expect.compared + f->expect.only_head;
  const struct {
    int64_t b, h;
    int only_base, only_head;
  } cases[] = {{f->base, empty, ok_in_base, 0}, {empty, f->head, 0, ok_in_head}, {empty, empty2, 0, 0}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int json = 0; json < 2; json++) {
      st_regress_opts o = {cases[i].b, cases[i].h, 0.05, json ? ST_REPORT_JSON : ST_REPORT_TEXT};
      st_regress_summary s;
      st_err err = {{0}};
      capture c;
      const st_status st = regress_to(f, &o, &c, &s, &err);
      if (st != ST_OK) fail_msg("runs %lld, %lld: %s", (long long)cases[i].b, (long long)cases[i].h, err.msg);
      assert_int_equal(s.compared, 0);
      assert_int_equal(s.regressions, 0);
      assert_int_equal(s.only_base, cases[i].only_base);
      assert_int_equal(s.only_head, cases[i].only_head);
      if (json) assert_true(fx_json_valid(c.buf));
      free(c.buf);
    }
}

/* The report says what changed between the runs as they recorded it: the
 * driver, NVRTC and the template and generator hashes of runs.env, the
 * arguments; nothing where the runs agree or recorded nothing. */
static void test_the_report_says_what_changed_between_the_runs(void **state) {
  fixture *f = *state;
  const char *envs[2] = {
      "{\"driver\":12080,\"nvrtc\":\"12.8\",\"templates_hash\":\"aaaaaaaa11112222\",\"generator_hash\":\"cccc\"}",
      "{\"driver\":13000,\"nvrtc\":\"13.0\",\"templates_hash\":\"bbbbbbbb33334444\",\"generator_hash\":\"cccc\"}"};
  int64_t id[2];
  for (int i = 0; i < 2; i++) {
    st_run_row r;
    memset(&r, 0, sizeof r);
    snprintf(r.kind, sizeof r.kind, "bench");
    snprintf(r.op, sizeof r.op, "index_decode");
    snprintf(r.suite, sizeof r.suite, "quick");
    snprintf(r.args, sizeof r.args, "--seed %d", i + 1);
    snprintf(r.tool_version, sizeof r.tool_version, "0.2.0");
    snprintf(r.env, sizeof r.env, "%s", envs[i]);
    r.device_id = f->device;
    st_err err = {{0}};
    if (st_db_run_begin(f->db, &r, &id[i], &err) != ST_OK || st_db_run_finish(f->db, id[i], "done", &err) != ST_OK)
      fail_msg("run: %s", err.msg);
  }
  for (int json = 0; json < 2; json++) {
    st_regress_opts o = {id[0], id[1], 0.05, json ? ST_REPORT_JSON : ST_REPORT_TEXT};
    st_regress_summary s;
    st_err err = {{0}};
    capture c;
    const st_status st = regress_to(f, &o, &c, &s, &err);
    if (st != ST_OK) fail_msg("%s", err.msg);
    const char *want = "driver 12080 -> 13000; args '--seed 1' -> '--seed 2'; nvrtc 12.8 -> 13.0; "
                       "templates aaaaaaaa -> bbbbbbbb";
    if (!strstr(c.buf, want)) fail_msg("no '%s' in:\n%s", want, c.buf);
    assert_null(strstr(c.buf, "generator cccc")); /* the same in both */
    if (json) {
      assert_true(fx_json_valid(c.buf));
      assert_non_null(strstr(c.buf, "\"driver_version\":[12080,13000]"));
      assert_non_null(strstr(c.buf, "\"templates_hash\":[\"aaaaaaaa11112222\",\"bbbbbbbb33334444\"]"));
    } else {
      assert_non_null(strstr(c.buf, "changed from base to head: "));
    }
    free(c.buf);
  }
  /* The fixture's runs agree on all they recorded. */
  st_regress_opts o = {f->base, f->head, 0.05, ST_REPORT_TEXT};
  st_regress_summary s;
  st_err err = {{0}};
  capture c;
  assert_int_equal(regress_to(f, &o, &c, &s, &err), ST_OK);
  assert_non_null(strstr(c.buf, "changed from base to head: nothing the runs recorded\n"));
  free(c.buf);
}

/* Winners: per shape verified in both runs, the fastest variant of each.
 * Planted: one winner slower and kept, one replaced by a slower one (its
 * old winner now fails), one whose winner changed to a faster variant,
 * one unchanged within noise; the CLI's exit rule counts winner
 * regressions. */
static void test_winners_that_got_slower_are_named(void **state) {
  fixture *f = *state;
  const int64_t b = fx_run(f->db, "tune", "index_decode", f->device, "done");
  const int64_t h = fx_run(f->db, "tune", "index_decode", f->device, "done");
  const char *v0 = f->variant[0], *v1 = f->variant[1], *v2 = f->variant[2];
  /* kept, 20% slower */
  fx_measure(f->db, b, v0, "w=kept", "ok", 10.0, 0.01, NULL);
  fx_measure(f->db, b, v1, "w=kept", "ok", 14.0, 0.01, NULL);
  fx_measure(f->db, h, v0, "w=kept", "ok", 12.0, 0.01, NULL);
  fx_measure(f->db, h, v1, "w=kept", "ok", 14.0, 0.01, NULL);
  /* replaced: v0 now wrong, v1 takes over 10% slower */
  fx_measure(f->db, b, v0, "w=replaced", "ok", 20.0, 0.01, NULL);
  fx_measure(f->db, b, v1, "w=replaced", "ok", 25.0, 0.01, NULL);
  fx_measure(f->db, h, v0, "w=replaced", "wrong", 0, 0, "max_err 1");
  fx_measure(f->db, h, v1, "w=replaced", "ok", 22.0, 0.01, NULL);
  /* faster: v2 new in head and the fastest */
  fx_measure(f->db, b, v0, "w=faster", "ok", 30.0, 0.01, NULL);
  fx_measure(f->db, h, v0, "w=faster", "ok", 30.0, 0.01, NULL);
  fx_measure(f->db, h, v2, "w=faster", "ok", 24.0, 0.01, NULL);
  /* unchanged: +2% */
  fx_measure(f->db, b, v1, "w=same", "ok", 40.0, 0.01, NULL);
  fx_measure(f->db, h, v1, "w=same", "ok", 40.8, 0.01, NULL);
  /* only in base: not a winner comparison */
  fx_measure(f->db, b, v1, "w=gone", "ok", 5.0, 0.01, NULL);
  for (int json = 0; json < 2; json++) {
    st_regress_opts o = {b, h, 0.05, json ? ST_REPORT_JSON : ST_REPORT_TEXT};
    st_regress_summary s;
    st_err err = {{0}};
    capture c;
    const st_status st = regress_to(f, &o, &c, &s, &err);
    if (st != ST_OK) fail_msg("%s", err.msg);
    assert_int_equal(s.winners_compared, 4);
    assert_int_equal(s.winner_regressions, 2);
    assert_int_equal(s.regressions, 1); /* v0 on w=kept; w=replaced's v1 got faster */
    if (json) {
      assert_true(fx_json_valid(c.buf));
      assert_non_null(strstr(c.buf, "\"winners_compared\":4,\"winner_regressions\":2"));
    } else {
      printf("%s", c.buf);
      const char *table = strstr(c.buf, "winners that got slower");
      assert_non_null(table);
      const char *kept = strstr(table, "w=kept"), *replaced = strstr(table, "w=replaced");
      assert_non_null(kept);
      assert_non_null(replaced);
      assert_true(kept < replaced); /* worst first: +20% before +10% */
      assert_non_null(strstr(kept, "(the same)"));
      assert_null(strstr(table, "w=faster"));
      assert_null(strstr(table, "w=same"));
      assert_non_null(strstr(c.buf, "winners: 4 shapes compared, 2 slower\n"));
    }
    free(c.buf);
  }
}

static void test_runs_of_other_ops_and_devices_warn(void **state) {
  fixture *f = *state;
  int64_t h200 = fx_device(f->db, "NVIDIA H200", "sm_90a", "uuid-h200");
  int64_t other = fx_run(f->db, "tune", "sparse_attn", h200, NULL);
  char id[40];
  fx_variant(f->db, "sparse_attn", "attn", 1, id);
  fx_measure(f->db, other, id, "B=1", "ok", 10, 0.01, NULL);
  for (int json = 0; json < 2; json++) {
    st_regress_opts o = {f->base, other, 0.05, json ? ST_REPORT_JSON : ST_REPORT_TEXT};
    st_regress_summary s;
    st_err err = {{0}};
    capture c;
    assert_int_equal(regress_to(f, &o, &c, &s, &err), ST_OK);
    assert_int_equal(s.compared, 0);
    assert_int_equal(s.only_head, 1);
    assert_non_null(strstr(c.buf, "different ops"));
    assert_non_null(strstr(c.buf, "different devices"));
    assert_non_null(strstr(c.buf, "running, not done"));
    if (json) {
      assert_true(fx_json_valid(c.buf));
      char *n = fx_json_query("SELECT json_array_length(?1, '$.warnings')", c.buf, NULL);
      assert_int_equal(atoi(n), 3);
      free(n);
    }
    free(c.buf);
  }
}

int main(void) {
  g_seed = st_test_seed("test_report_regress");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_text_report_finds_planted_regressions, setup, teardown),
      cmocka_unit_test_setup_teardown(test_json_report_lists_exactly_the_planted_pairs, setup, teardown),
      cmocka_unit_test_setup_teardown(test_threshold_and_noise_rule, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rank_test_judges_where_there_are_repetitions, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_arguments_are_refused_without_output, setup, teardown),
      cmocka_unit_test_setup_teardown(test_the_report_says_what_changed_between_the_runs, setup, teardown),
      cmocka_unit_test_setup_teardown(test_winners_that_got_slower_are_named, setup, teardown),
      cmocka_unit_test_setup_teardown(test_runs_of_other_ops_and_devices_warn, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cold_and_warm_runs_are_not_compared, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_run_without_measurements_compares_as_empty, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
