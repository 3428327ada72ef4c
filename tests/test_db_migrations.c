/* A new database gets every embedded migration once, in one transaction
 * each: schema tables, application_id, user_version, one schema_migrations
 * row per file, WAL. Reopening changes nothing; processes opening a new
 * file at the same moment migrate it exactly once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_db_fixture.h"

static long long raw_int(const char *path, const char *sql) {
  sqlite3 *c = NULL;
  sqlite3_stmt *s = NULL;
  assert_int_equal(sqlite3_open_v2(path, &c, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  if (sqlite3_prepare_v2(c, sql, -1, &s, NULL) != SQLITE_OK) fail_msg("%s: %s", sql, sqlite3_errmsg(c));
  assert_int_equal(sqlite3_step(s), SQLITE_ROW);
  long long x = sqlite3_column_int64(s, 0);
  sqlite3_finalize(s);
  assert_int_equal(sqlite3_close(c), SQLITE_OK);
  return x;
}

static char *raw_text(const char *path, const char *sql) {
  sqlite3 *c = NULL;
  sqlite3_stmt *s = NULL;
  assert_int_equal(sqlite3_open_v2(path, &c, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(c, sql, -1, &s, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(s), SQLITE_ROW);
  char *t = strdup((const char *)sqlite3_column_text(s, 0));
  sqlite3_finalize(s);
  assert_int_equal(sqlite3_close(c), SQLITE_OK);
  return t;
}

static void test_new_database_gets_schema_v_latest(void **state) {
  (void)state;
  char path[256];
  st_db *db = fx_open_temp(path, sizeof path);
  assert_int_equal(st_db_schema_version(db), ST_DB_SCHEMA_VERSION);
  char *mode = raw_text(path, "PRAGMA journal_mode");
  assert_string_equal(mode, "wal"); /* while the writer is open */
  free(mode);
  st_db_close(db);
  assert_int_equal(raw_int(path, "PRAGMA application_id"), ST_DB_APPLICATION_ID);
  assert_int_equal(raw_int(path, "PRAGMA user_version"), ST_DB_SCHEMA_VERSION);
  assert_int_equal(raw_int(path, "SELECT count(*) FROM schema_migrations"), ST_DB_SCHEMA_VERSION);
  assert_int_equal(raw_int(path, "SELECT max(version) FROM schema_migrations"), ST_DB_SCHEMA_VERSION);
  mode = raw_text(path, "PRAGMA journal_mode");
  assert_string_equal(mode, "delete"); /* at rest: one self-contained file */
  free(mode);
  static const char *const tables[] = {"meta",   "devices", "sources",      "variants", "binaries",
                                       "shapes", "runs",    "measurements", "winners"};
  for (size_t i = 0; i < sizeof tables / sizeof *tables; i++) {
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = '%s'", tables[i]);
    if (raw_int(path, sql) != 1) fail_msg("table %s is missing", tables[i]);
  }
  assert_int_equal(raw_int(path, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
  fx_remove(path);
}

static void test_reopening_does_not_migrate_again(void **state) {
  (void)state;
  char path[256];
  st_db *db = fx_open_temp(path, sizeof path);
  st_db_close(db);
  char *created = raw_text(path, "SELECT value FROM meta WHERE key = 'created'");
  char *applied = raw_text(path, "SELECT applied FROM schema_migrations WHERE version = 1");
  st_err err = {{0}};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(st_db_open(path, i % 2 ? ST_DB_READONLY : ST_DB_READWRITE, &db, &err), ST_OK);
    st_db_close(db);
  }
  char *created2 = raw_text(path, "SELECT value FROM meta WHERE key = 'created'");
  char *applied2 = raw_text(path, "SELECT applied FROM schema_migrations WHERE version = 1");
  assert_string_equal(created, created2);
  assert_string_equal(applied, applied2);
  assert_int_equal(raw_int(path, "SELECT count(*) FROM schema_migrations"), ST_DB_SCHEMA_VERSION);
  free(created);
  free(created2);
  free(applied);
  free(applied2);
  fx_remove(path);
}

/* Several processes open one new path at once: each succeeds and the
 * schema is applied once (the version is re-read under the write lock). */
static void test_racing_openers_migrate_once(void **state) {
  (void)state;
  char path[256];
  st_test_temp_path(path, sizeof path, ".db");
  enum { PROCS = 4 };
  int go[2];
  assert_int_equal(pipe(go), 0);
  pid_t pid[PROCS];
  for (int i = 0; i < PROCS; i++) {
    pid[i] = fork();
    assert_true(pid[i] >= 0);
    if (pid[i] == 0) {
      char c;
      close(go[1]);
      if (read(go[0], &c, 1) != 0) _exit(3); /* wait for the start: EOF */
      st_db *db = NULL;
      st_err err = {{0}};
      st_status st = st_db_open(path, ST_DB_READWRITE, &db, &err);
      if (st != ST_OK) fprintf(stderr, "child %d: %s\n", i, err.msg);
      int ok = st == ST_OK && st_db_schema_version(db) == ST_DB_SCHEMA_VERSION;
      st_db_close(db);
      _exit(ok ? 0 : 1);
    }
  }
  close(go[0]);
  close(go[1]); /* every child's read returns now */
  for (int i = 0; i < PROCS; i++) {
    int status = 0;
    assert_int_equal(waitpid(pid[i], &status, 0), pid[i]);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
  assert_int_equal(raw_int(path, "SELECT count(*) FROM schema_migrations"), ST_DB_SCHEMA_VERSION);
  assert_int_equal(raw_int(path, "SELECT count(*) FROM meta WHERE key = 'created'"), 1);
  fx_remove(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_new_database_gets_schema_v_latest),
      cmocka_unit_test(test_reopening_does_not_migrate_again),
      cmocka_unit_test(test_racing_openers_migrate_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
