/* A new database gets every embedded migration once, in one transaction
 * each: schema tables, application_id, user_version, one schema_migrations
 * row per file, WAL. Reopening changes nothing; processes opening a new
 * file at the same moment migrate it exactly once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "st_db_migrations.h"
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

static void raw_exec(sqlite3 *c, const char *sql) {
  char *msg = NULL;
  if (sqlite3_exec(c, sql, NULL, NULL, &msg) != SQLITE_OK) fail_msg("%s: %s", sql, msg ? msg : "?");
}

/* A file as the build of schema version `version` left it: its migrations
 * applied the way db_write.c applies them, with one device and two runs. */
static void make_database_at(const char *path, int version) {
  sqlite3 *c = NULL;
  assert_int_equal(sqlite3_open(path, &c), SQLITE_OK);
  for (int i = 0; i < version; i++) {
    raw_exec(c, "BEGIN IMMEDIATE");
    raw_exec(c, st_db_migrations[i].sql);
    char sql[256];
    snprintf(sql, sizeof sql,
             "INSERT INTO schema_migrations (version, name, applied) VALUES (%d, '%s', '2026-01-01T00:00:00.000Z');"
             "PRAGMA user_version = %d; PRAGMA application_id = %d;",
             st_db_migrations[i].version, st_db_migrations[i].name, st_db_migrations[i].version,
             (int)ST_DB_APPLICATION_ID);
    raw_exec(c, sql);
    raw_exec(c, "COMMIT");
  }
  raw_exec(c, "INSERT INTO devices (id, uuid, name, arch, cc_major, cc_minor, sm_count, mem_bytes, l2_bytes, "
              "driver_version, first_seen, last_seen) VALUES (1, 'GPU-old', 'NVIDIA H100', 'sm_90', 9, 0, 132, 1, "
              "1, 12040, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')");
  raw_exec(c, "INSERT INTO runs (kind, op, suite, device_id, status, started, finished, args, tool_version) VALUES "
              "('tune', 'index_decode', 'quick', 1, 'done', '2026-01-01T00:00:00.000Z', "
              "'2026-01-01T01:00:00.000Z', '--seed 7', '0.4.0'), "
              "('bench', 'index_decode', 'full', 1, 'interrupted', '2026-01-02T00:00:00.000Z', '', '', '0.4.1')");
  assert_int_equal(sqlite3_close(c), SQLITE_OK);
}

/* st_db_each_run callback: counts runs whose env is '{}'. */
static int count_empty_env(void *ctx, const st_run_row *r) {
  *(int *)ctx += strcmp(r->env, "{}") == 0;
  return 0;
}

/* A file of the previous schema version: a read-only open reads it as it
 * is (its runs with env '{}', the file untouched: a runtime upgraded beside
 * an older export keeps working); a read-write open migrates it, giving its
 * old runs env '{}' and leaving every other column as it was; a read-only
 * open then reads it. */
static void test_previous_version_gains_run_env_on_write_open(void **state) {
  (void)state;
  char path[256];
  st_test_temp_path(path, sizeof path, ".db");
  make_database_at(path, ST_DB_SCHEMA_VERSION - 1);
  char *before = raw_text(path, "SELECT group_concat(id || kind || op || suite || device_id || status || started || "
                                "finished || args || tool_version, '|') FROM runs");

  st_db *db = NULL;
  st_err err = {{0}};
  assert_int_equal(st_db_open(path, ST_DB_READONLY, &db, &err), ST_OK);
  assert_int_equal(st_db_schema_version(db), ST_DB_SCHEMA_VERSION - 1);
  st_run_row old;
  int old_found = 0;
  assert_int_equal(st_db_get_run(db, 2, &old, &old_found, &err), ST_OK);
  assert_true(old_found);
  assert_string_equal(old.env, "{}");
  assert_string_equal(old.tool_version, "0.4.1");
  int listed = 0;
  assert_int_equal(st_db_each_run(db, 10, count_empty_env, &listed, &err), ST_OK);
  assert_int_equal(listed, 2);
  st_db_close(db);
  assert_int_equal(raw_int(path, "PRAGMA user_version"), ST_DB_SCHEMA_VERSION - 1); /* not migrated */

  assert_int_equal(st_db_open(path, ST_DB_READWRITE, &db, &err), ST_OK);
  assert_int_equal(st_db_schema_version(db), ST_DB_SCHEMA_VERSION);
  st_db_close(db);
  assert_int_equal(raw_int(path, "PRAGMA user_version"), ST_DB_SCHEMA_VERSION);
  assert_int_equal(raw_int(path, "SELECT count(*) FROM schema_migrations"), ST_DB_SCHEMA_VERSION);
  assert_int_equal(raw_int(path, "SELECT count(*) FROM runs WHERE env = '{}'"), 2);
  char *after = raw_text(path, "SELECT group_concat(id || kind || op || suite || device_id || status || started || "
                               "finished || args || tool_version, '|') FROM runs");
  assert_string_equal(before, after);
  assert_int_equal(raw_int(path, "SELECT driver_version FROM devices WHERE id = 1"), 12040);

  assert_int_equal(st_db_open(path, ST_DB_READONLY, &db, &err), ST_OK);
  st_run_row r;
  int found = 0;
  assert_int_equal(st_db_get_run(db, 1, &r, &found, &err), ST_OK);
  assert_true(found);
  assert_string_equal(r.env, "{}");
  assert_string_equal(r.args, "--seed 7");
  st_db_close(db);
  free(before);
  free(after);
  fx_remove(path);
}

/* env must be a JSON object's text; an empty one is stored as '{}'. */
static void test_run_env_round_trips_and_must_be_json(void **state) {
  (void)state;
  char path[256];
  st_db *db = fx_open_temp(path, sizeof path);
  st_run_row run;
  memset(&run, 0, sizeof run);
  snprintf(run.kind, sizeof run.kind, "tune");
  snprintf(run.op, sizeof run.op, "index_decode");
  snprintf(run.suite, sizeof run.suite, "quick");
  run.device_id = fx_device(db, "NVIDIA H100", "sm_90", "GPU-1");
  snprintf(run.env, sizeof run.env, "{\"driver\":null,\"seed\":7}");
  int64_t id = 0, id2 = 0;
  st_err err = {{0}};
  assert_int_equal(st_db_run_begin(db, &run, &id, &err), ST_OK);
  run.env[0] = '\0';
  assert_int_equal(st_db_run_begin(db, &run, &id2, &err), ST_OK);
  snprintf(run.env, sizeof run.env, "{\"seed\":");
  int64_t bad = 0;
  assert_int_equal(st_db_run_begin(db, &run, &bad, &err), ST_ERR_DB);
  st_run_row r;
  int found = 0;
  assert_int_equal(st_db_get_run(db, id, &r, &found, &err), ST_OK);
  assert_string_equal(r.env, "{\"driver\":null,\"seed\":7}");
  assert_int_equal(st_db_get_run(db, id2, &r, &found, &err), ST_OK);
  assert_string_equal(r.env, "{}");
  st_db_close(db);
  fx_remove(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_new_database_gets_schema_v_latest),
      cmocka_unit_test(test_reopening_does_not_migrate_again),
      cmocka_unit_test(test_racing_openers_migrate_once),
      cmocka_unit_test(test_previous_version_gains_run_env_on_write_open),
      cmocka_unit_test(test_run_env_round_trips_and_must_be_json),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
