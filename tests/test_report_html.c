/* `sparsetune report --html`: over 16 runs of a suite with 2% noise, the
 * page marks the planted +12% step of one shape's winner (a slow change
 * point and a winner regression, listed first with a link), keeps quiet on
 * a flat shape, shows a winner change that made a shape faster as a new
 * winner and no regression, draws the peer's time where the shape records
 * one, escapes every text from the database; a suite with no step has no
 * regression. Headless Chromium (Debian's `chromium`) loads the page with
 * no console message, its DOM has one chart per shape, and its screenshot
 * is a PNG of the window's size (kept beside the page, path printed). Bad
 * input is refused with exit 2, no file written, the database unchanged.
 * The browser part skips, saying so, where chromium is not installed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmd_in_process.h"
#include "commands.h"
#include "report_capture.h"
#include "report_html.h"
#include "test_db_fixture.h"

static uint64_t g_seed;

enum { NRUNS = 16, STEP_RUN = 10, CHANGE_RUN = 6, NSHAPES = 3 };
#define STEP 0.12
#define NOISE 0.02
#define STEPPED "index_decode:B=1,T=4096"
#define FLAT "index_decode:B=8,T=1024,tag=<b>&\"x\""
#define FLAT_ESCAPED "index_decode:B=8,T=1024,tag=&lt;b&gt;&amp;&quot;x&quot;"
#define CHANGED "index_decode:B=32,T=8192"
#define PEER_US 95.5

typedef struct fixture {
  char path[256];
} fixture;

static double noisy(uint64_t *rng, double us) { return us * (1 + st_rand_uniform(rng, -NOISE, NOISE)); }

static void put_shape(st_db *db, const char *key, const char *peer) {
  st_params p;
  memset(&p, 0, sizeof p);
  st_err err = {{0}};
  assert_int_equal(st_params_set_int(&p, "B", 1, &err), ST_OK);
  if (peer) {
    assert_int_equal(st_params_set(&p, "peer_us", peer, &err), ST_OK);
    assert_int_equal(st_params_set(&p, "peer_device", "NVIDIA H100 80GB HBM3", &err), ST_OK);
  }
  if (st_db_put_shape(db, key, "index_decode", &p, key, &err) != ST_OK) fail_msg("put_shape: %s", err.msg);
}

/* Suite "main": the stepped shape's winner (v_fast, 100 us) 12% slower from
 * run STEP_RUN on, a slower variant beside it all along (130 us); the flat
 * shape at 40 us; the changed shape won by v_a at 50 us until run
 * CHANGE_RUN, then by v_b at 45. Suite "calm": the flat shape alone. */
static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  assert_non_null(f);
  uint64_t rng = g_seed;
  st_db *db = fx_open_temp(f->path, sizeof f->path);
  const int64_t card = fx_device(db, "NVIDIA H100 80GB HBM3", "sm_90a", "uuid-a");
  char fast[40], slow[40], va[40], vb[40], lone[40];
  fx_variant(db, "index_decode", "v_fast", 0, fast);
  fx_variant(db, "index_decode", "v_slow", 1, slow);
  fx_variant(db, "index_decode", "v_a", 0, va);
  fx_variant(db, "index_decode", "v_b", 0, vb);
  fx_variant(db, "index_decode", "v_<lone>", 0, lone);
  put_shape(db, STEPPED, "95.5");
  put_shape(db, FLAT, NULL);
  for (int i = 0; i < NRUNS; i++) {
    const int64_t run = fx_suite_run(db, "tune", "index_decode", "main", card, "done");
    fx_measure(db, run, fast, STEPPED, "ok", noisy(&rng, 100.0 * (i >= STEP_RUN ? 1 + STEP : 1)), 0.01, NULL);
    fx_measure(db, run, slow, STEPPED, "ok", noisy(&rng, 130.0), 0.01, NULL);
    fx_measure(db, run, lone, FLAT, "ok", noisy(&rng, 40.0), 0.01, NULL);
    fx_measure(db, run, va, CHANGED, "ok", noisy(&rng, 50.0), 0.01, NULL);
    if (i >= CHANGE_RUN) fx_measure(db, run, vb, CHANGED, "ok", noisy(&rng, 45.0), 0.01, NULL);
    fx_measure(db, run, slow, CHANGED, "wrong", 1.0, 0.01, "max_err 3.1"); /* never a winner */
  }
  for (int i = 0; i < NRUNS; i++) {
    const int64_t run = fx_suite_run(db, "bench", "index_decode", "calm", card, "done");
    fx_measure(db, run, lone, FLAT, "ok", noisy(&rng, 40.0), 0.01, NULL);
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

/* The page of `suite` in memory (free it); the summary in *s. */
static char *page_of(const fixture *f, const char *suite, st_html_summary *s) {
  st_db *db = NULL;
  st_err err = {{0}};
  assert_int_equal(st_db_open(f->path, ST_DB_READONLY, &db, &err), ST_OK);
  const st_history_opts o = {.suite = suite, .min_runs = ST_HTML_DEFAULT_MIN_RUNS, .threshold = 0.05};
  capture c;
  capture_open(&c);
  const st_status st = st_report_html(db, c.f, &o, "test.db", s, &err);
  capture_close(&c);
  st_db_close(db);
  if (st != ST_OK) fail_msg("st_report_html: %s", err.msg);
  return c.buf;
}

static int count(const char *text, const char *part) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, part)); p += strlen(part)) n++;
  return n;
}

static void test_marks_the_planted_step_and_only_it(void **state) {
  fixture *f = *state;
  st_html_summary s;
  char *html = page_of(f, "main", &s);
  assert_int_equal(s.histories, 1);
  assert_int_equal(s.runs, NRUNS);
  assert_int_equal(s.shapes, NSHAPES);
  assert_int_equal(s.winner_regressions, 1);
  assert_true(s.slowdowns >= 1);
  assert_int_equal(count(html, "<svg class=\"timing\""), NSHAPES);
  assert_int_equal(count(html, "class=\"regression\""), 1);
  assert_true(count(html, "class=\"change-point slower\"") >= 1);
  /* The one flagged shape is listed, linked to its section. */
  const char *list = strstr(html, "<ul class=\"flagged\">");
  assert_non_null(list);
  const char *end = strstr(list, "</ul>");
  assert_int_equal(count(list, "<li>") - count(end, "<li>"), 1);
  assert_non_null(strstr(list, STEPPED));
  /* The step's run in the stepped shape's winners table: +12% +- noise. */
  char run[64];
  snprintf(run, sizeof run, "<tr class=\"slower\"><td class=\"num\">%d</td><td>v_fast</td>", STEP_RUN + 1);
  if (!strstr(html, run)) fail_msg("no winner regression row '%s'", run);
  /* The changed shape: a new winner, faster, not a regression. */
  assert_non_null(strstr(html, "<td>v_b</td>"));
  assert_true(count(html, ", new winner") >= 1);
  /* The peer's line on the stepped shape only. */
  assert_int_equal(count(html, "class=\"peer\""), 1);
  assert_non_null(strstr(html, "peer: 95.5 us on NVIDIA H100 80GB HBM3"));
  /* Everything from the database escaped. */
  assert_non_null(strstr(html, FLAT_ESCAPED));
  assert_null(strstr(html, "<b>&"));
  assert_non_null(strstr(html, "v_&lt;lone&gt;"));
  assert_null(strstr(html, "v_<lone>"));
  /* Self-contained: no script, nothing fetched. */
  assert_null(strstr(html, "<script"));
  assert_null(strstr(html, "src="));
  assert_null(strstr(html, "href=\"http"));
  free(html);
}

static void test_a_calm_suite_has_no_regression(void **state) {
  fixture *f = *state;
  st_html_summary s;
  char *html = page_of(f, "calm", &s);
  assert_int_equal(s.shapes, 1);
  assert_int_equal(s.slowdowns, 0);
  assert_int_equal(s.winner_regressions, 0);
  assert_non_null(strstr(html, "<p class=\"none\">"));
  assert_int_equal(count(html, "class=\"regression\""), 0);
  free(html);
}

/* Runs `sparsetune report --db <fixture> args...` in this process (at
 * most 10 args). */
static int cli(const fixture *f, const char *const *args) {
  const char *argv[13] = {"--db", f->path};
  for (int i = 0; i < 10 && args[i]; i++) argv[2 + i] = args[i];
  return st_test_cmd(st_cmd_report, "report", argv);
}

static void test_refuses_bad_input_and_changes_nothing(void **state) {
  fixture *f = *state;
  size_t n0 = 0;
  unsigned char *before = fx_read_file(f->path, &n0);
  char out[256];
  st_test_temp_path(out, sizeof out, ".html");
  assert_int_equal(cli(f, (const char *[]){"--suite", "main", NULL}), 2); /* no --html */
  assert_int_equal(cli(f, (const char *[]){"--html", out, NULL}), 2);     /* no --suite */
  assert_int_equal(cli(f, (const char *[]){"--html", out, "--suite", "nosuch", NULL}), 2);
  assert_int_equal(cli(f, (const char *[]){"--html", out, "--suite", "main", "--min-runs", "0", NULL}), 2);
  assert_false(fx_exists(out));
  char missing[300];
  snprintf(missing, sizeof missing, "%s.none", f->path);
  assert_int_equal(
      st_test_cmd(st_cmd_report, "report", (const char *[]){"--db", missing, "--html", out, "--suite", "main", NULL}),
      2);
  assert_false(fx_exists(out));
  assert_false(fx_exists(missing));
  assert_int_equal(cli(f, (const char *[]){"--html", out, "--suite", "main", NULL}), 0);
  assert_true(fx_exists(out));
  fx_expect_unchanged(f->path, before, n0);
  unlink(out);
}

/* Runs `chromium <flags> file://page`, stdout to out_path, stderr to
 * err_path; its exit status. */
static int chromium(const char *flags, const char *page, const char *out_path, const char *err_path) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "timeout 120 chromium --headless --no-sandbox --disable-gpu --no-first-run --enable-logging=stderr "
           "--log-level=0 %s 'file://%s' > '%s' 2> '%s'",
           flags, page, out_path, err_path);
  const int rc = system(cmd);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static uint32_t be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void test_chromium_renders_it_without_console_errors(void **state) {
  fixture *f = *state;
  if (system("command -v chromium > /dev/null 2>&1") != 0) {
    printf("# skipped: no chromium here (Debian: apt-get install chromium) to render the page\n");
    skip();
  }
  char page[256], dom[300], log[300], png[300], flags[400];
  st_test_temp_path(page, sizeof page, ".html");
  snprintf(dom, sizeof dom, "%s.dom", page);
  snprintf(log, sizeof log, "%s.log", page);
  snprintf(png, sizeof png, "%s.png", page);
  assert_int_equal(cli(f, (const char *[]){"--html", page, "--suite", "main", NULL}), 0);

  assert_int_equal(chromium("--dump-dom", page, dom, log), 0);
  size_t n = 0;
  unsigned char *text = fx_read_file(log, &n);
  char *logs = calloc(n + 1, 1);
  memcpy(logs, text, n);
  if (strstr(logs, ":CONSOLE")) fail_msg("the page logged to the console:\n%s", strstr(logs, ":CONSOLE"));
  free(text);
  free(logs);
  text = fx_read_file(dom, &n);
  char *d = calloc(n + 1, 1);
  memcpy(d, text, n);
  assert_int_equal(count(d, "<svg class=\"timing\""), NSHAPES);
  assert_int_equal(count(d, "<polygon class=\"regression\""), 1);
  assert_true(count(d, "<polyline class=\"winner\"") == NSHAPES);
  assert_non_null(strstr(d, "<table class=\"winners\">"));
  free(text);
  free(d);

  snprintf(flags, sizeof flags, "--hide-scrollbars --window-size=1200,2400 --screenshot='%s'", png);
  assert_int_equal(chromium(flags, page, dom, log), 0);
  text = fx_read_file(png, &n);
  static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  assert_true(n > 24);
  assert_memory_equal(text, sig, 8);
  assert_memory_equal(text + 12, "IHDR", 4);
  assert_int_equal(be32(text + 16), 1200);
  assert_int_equal(be32(text + 20), 2400);
  /* Three charts and tables: far more than a blank page's few kilobytes. */
  if (n < 40000) fail_msg("the screenshot is %zu bytes: a page that barely drew", n);
  printf("# screenshot %s (%zu bytes)\n", png, n);
  free(text);
  unlink(page);
  unlink(dom);
  unlink(log);
}

int main(void) {
  g_seed = st_test_seed("report_html");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_marks_the_planted_step_and_only_it),
      cmocka_unit_test(test_a_calm_suite_has_no_regression),
      cmocka_unit_test(test_refuses_bad_input_and_changes_nothing),
      cmocka_unit_test(test_chromium_renders_it_without_console_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
