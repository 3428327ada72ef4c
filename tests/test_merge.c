/* `sparsetune merge`: two shards of one history (B a copy of A taken while
 * A's second run was interrupted, which B then finished, plus a run of
 * another card) merge into one database with every run once, the resumed
 * run finished, every measurement, and of two winners for one key the
 * newer; in either order the same rows; merging again adds nothing. The
 * sources are only read. Refused with exit 2 and nothing written: no
 * source, a missing one, one that is not a database, an exported one, the
 * destination itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_in_process.h"
#include "commands.h"
#include "st_db_export.h"
#include "test_db_fixture.h"

#define OP "index_decode"
#define KEY1 "index_decode:B=1"
#define KEY2 "index_decode:B=8"

typedef struct fixture {
  char a[256], b[256];
} fixture;

static void exec_sql(const char *path, const char *sql) {
  sqlite3 *c = NULL;
  assert_int_equal(sqlite3_open(path, &c), SQLITE_OK);
  char *msg = NULL;
  if (sqlite3_exec(c, sql, NULL, NULL, &msg) != SQLITE_OK) fail_msg("%s: %s", sql, msg);
  sqlite3_close(c);
}

static void winner(st_db *db, int64_t device, const char *key, const char *variant, int64_t run, double us) {
  st_winner_row w;
  memset(&w, 0, sizeof w);
  w.device_id = device;
  snprintf(w.op, sizeof w.op, OP);
  snprintf(w.dispatch_key, sizeof w.dispatch_key, "%s", key);
  snprintf(w.variant_id, sizeof w.variant_id, "%s", variant);
  w.run_id = run;
  w.median_us = us;
  w.regret = 1;
  st_err err = {{0}};
  if (st_db_put_winner(db, &w, &err) != ST_OK) fail_msg("winner: %s", err.msg);
}

static void copy_file(const char *from, const char *to) {
  size_t n = 0;
  unsigned char *bytes = fx_read_file(from, &n);
  fx_write_file(to, bytes, n);
  free(bytes);
}

/* A: card a, run 1 done (two measurements), run 2 interrupted after one,
 * winner of KEY1. B: A's file as it was then; run 2 resumed and finished,
 * card b with run 3, a newer winner of KEY1 and one of KEY2. */
static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  assert_non_null(f);
  st_db *db = fx_open_temp(f->a, sizeof f->a);
  const int64_t card_a = fx_device(db, "NVIDIA H100 80GB HBM3", "sm_90a", "uuid-a");
  char v1[40], v2[40];
  fx_variant(db, OP, "v1", 1, v1);
  fx_variant(db, OP, "v2", 0, v2);
  const int64_t r1 = fx_suite_run(db, "tune", OP, "main", card_a, "done");
  fx_measure(db, r1, v1, KEY1, "ok", 10.0, 0.01, NULL);
  fx_measure(db, r1, v2, KEY1, "ok", 12.0, 0.01, NULL);
  const int64_t r2 = fx_suite_run(db, "tune", OP, "main", card_a, "interrupted");
  fx_measure(db, r2, v1, KEY2, "ok", 20.0, 0.01, NULL);
  winner(db, card_a, KEY1, v1, r1, 10.0);
  st_db_close(db);
  exec_sql(f->a, "UPDATE winners SET updated = '2026-11-01T00:00:00.000Z';"
                 "UPDATE runs SET started = '2026-11-01T00:00:0' || id || '.000Z', "
                 "finished = '2026-11-01T00:01:0' || id || '.000Z'");

  st_test_temp_path(f->b, sizeof f->b, ".db");
  copy_file(f->a, f->b);
  st_err err = {{0}};
  assert_int_equal(st_db_open(f->b, ST_DB_READWRITE, &db, &err), ST_OK);
  fx_measure(db, r2, v2, KEY2, "ok", 21.0, 0.01, NULL);
  assert_int_equal(st_db_run_finish(db, r2, "done", &err), ST_OK);
  const int64_t card_b = fx_device(db, "NVIDIA H200", "sm_90a", "uuid-b");
  char v3[40];
  fx_variant(db, OP, "v3", 0, v3);
  const int64_t r3 = fx_suite_run(db, "bench", OP, "main", card_b, "done");
  fx_measure(db, r3, v3, KEY1, "ok", 7.0, 0.01, NULL);
  winner(db, card_a, KEY1, v2, r2, 9.5);
  winner(db, card_b, KEY2, v3, r3, 7.0);
  st_db_close(db);
  exec_sql(f->b, "UPDATE winners SET updated = '2026-11-02T00:00:00.000Z';"
                 "UPDATE runs SET finished = '2026-11-02T00:00:00.000Z' WHERE id = 2;"
                 "UPDATE runs SET started = '2026-11-02T00:00:03.000Z' WHERE id = 3");
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  fx_remove(f->a);
  fx_remove(f->b);
  free(f);
  return 0;
}

/* `sparsetune merge --db dst s1 s2` (s2, or both, may be NULL). */
static int merge(const char *dst, const char *s1, const char *s2) {
  return st_test_cmd(st_cmd_merge, "merge", (const char *[]){"--db", dst, s1, s1 ? s2 : NULL, NULL});
}

/* One text of every row that matters, ids replaced by identities: equal
 * texts, equal databases. */
static char *content(const char *path) {
  static const char sql[] =
      "SELECT group_concat(x, '\n') FROM (SELECT x FROM ("
      "SELECT 'run ' || d.uuid || ' ' || r.kind || ' ' || r.suite || ' ' || r.started || ' ' || r.status || ' ' || "
      "r.finished AS x FROM runs r JOIN devices d ON d.id = r.device_id "
      "UNION ALL SELECT 'measurement ' || r.started || ' ' || m.variant_id || ' ' || m.shape_key || ' ' || "
      "m.median_us FROM measurements m JOIN runs r ON r.id = m.run_id "
      "UNION ALL SELECT 'winner ' || d.uuid || ' ' || w.dispatch_key || ' ' || w.variant_id || ' ' || "
      "coalesce(r.started, '-') FROM winners w JOIN devices d ON d.id = w.device_id LEFT JOIN runs r ON "
      "r.id = w.run_id "
      "UNION ALL SELECT 'variant ' || id FROM variants UNION ALL SELECT 'card ' || uuid FROM devices) ORDER BY x)";
  sqlite3 *c = NULL;
  assert_int_equal(sqlite3_open_v2(path, &c, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  sqlite3_stmt *s = NULL;
  assert_int_equal(sqlite3_prepare_v2(c, sql, -1, &s, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(s), SQLITE_ROW);
  char *text = strdup((const char *)sqlite3_column_text(s, 0));
  sqlite3_finalize(s);
  sqlite3_close(c);
  return text;
}

static long long count(const char *path, const char *sql) {
  sqlite3 *c = NULL;
  assert_int_equal(sqlite3_open_v2(path, &c, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  int64_t n = -1;
  sqlite3_stmt *s = NULL;
  assert_int_equal(sqlite3_prepare_v2(c, sql, -1, &s, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(s), SQLITE_ROW);
  n = sqlite3_column_int64(s, 0);
  sqlite3_finalize(s);
  sqlite3_close(c);
  return (long long)n;
}

static void test_shards_merge_without_loss_or_double(void **state) {
  fixture *f = *state;
  size_t na = 0, nb = 0;
  unsigned char *a0 = fx_read_file(f->a, &na), *b0 = fx_read_file(f->b, &nb);
  char ab[256], ba[256];
  st_test_temp_path(ab, sizeof ab, ".db");
  st_test_temp_path(ba, sizeof ba, ".db");
  assert_int_equal(merge(ab, f->a, f->b), 0);
  assert_int_equal(merge(ba, f->b, f->a), 0);
  char *x = content(ab), *y = content(ba);
  printf("# merged:\n%s\n", x);
  assert_string_equal(x, y); /* the order of merging changes no row */
  assert_int_equal(count(ab, "SELECT count(*) FROM runs"), 3);
  assert_int_equal(count(ab, "SELECT count(*) FROM runs WHERE status = 'done'"), 3); /* the resumed run finished */
  assert_int_equal(count(ab, "SELECT count(*) FROM measurements"), 5);
  assert_int_equal(count(ab, "SELECT count(*) FROM devices"), 2);
  assert_int_equal(count(ab, "SELECT count(*) FROM winners"), 2);
  assert_int_equal(count(ab, "SELECT count(*) FROM winners w JOIN devices d ON d.id = w.device_id "
                             "WHERE d.uuid = 'uuid-a' AND w.variant_id = 'id_v2'"),
                   1); /* the newer winner of KEY1 */
  assert_int_equal(count(ab, "SELECT count(*) FROM winners w JOIN runs r ON r.id = w.run_id "
                             "JOIN devices d ON d.id = r.device_id WHERE d.uuid = 'uuid-b' AND r.kind = 'bench'"),
                   1); /* the card b winner points at its run, renumbered */
  /* Again: nothing new. */
  assert_int_equal(merge(ab, f->a, f->b), 0);
  char *z = content(ab);
  assert_string_equal(x, z);
  /* The sources were only read. */
  size_t na1 = 0, nb1 = 0;
  unsigned char *a1 = fx_read_file(f->a, &na1), *b1 = fx_read_file(f->b, &nb1);
  assert_int_equal(na, na1);
  assert_int_equal(nb, nb1);
  assert_memory_equal(a0, a1, na);
  assert_memory_equal(b0, b1, nb);
  free(a0);
  free(a1);
  free(b0);
  free(b1);
  free(x);
  free(y);
  free(z);
  fx_remove(ab);
  fx_remove(ba);
}

static void test_bad_sources_are_refused_and_nothing_written(void **state) {
  fixture *f = *state;
  char dst[256], missing[256], text[256], exported[256];
  st_test_temp_path(dst, sizeof dst, ".db");
  st_test_temp_path(missing, sizeof missing, ".db");
  st_test_temp_path(text, sizeof text, ".db");
  st_test_temp_path(exported, sizeof exported, ".db");
  fx_write_file(text, "a text file, no database\n", 25);
  assert_int_equal(merge(dst, NULL, NULL), 2);
  assert_int_equal(merge(dst, f->a, missing), 2);
  assert_false(fx_exists(missing));
  assert_int_equal(merge(dst, text, NULL), 2);
  assert_false(fx_exists(dst)); /* checked before the destination was made */
  st_db *src = NULL;
  st_err err = {{0}};
  assert_int_equal(st_db_open_readonly(f->b, &src, &err), ST_OK);
  st_db_export_filter filter = {0};
  st_db_export_counts counts;
  assert_int_equal(st_db_export(src, exported, &filter, f->b, NULL, &counts, &err), ST_OK);
  st_db_close(src);
  assert_int_equal(merge(dst, f->a, exported), 2);
  assert_false(fx_exists(dst)); /* the export refused before A was merged */
  size_t n0 = 0;
  unsigned char *before = fx_read_file(f->a, &n0);
  assert_int_equal(merge(f->a, f->a, NULL), 2); /* into itself */
  fx_expect_unchanged(f->a, before, n0);
  fx_remove(dst);
  fx_remove(text);
  fx_remove(exported);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shards_merge_without_loss_or_double),
      cmocka_unit_test(test_bad_sources_are_refused_and_nothing_written),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
