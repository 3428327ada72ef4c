/* A file that is not a sparsetune database is refused with ST_ERR_DB and a
 * message naming the path and the reason, in both modes, and not one byte
 * of it changes (nor is a -wal, -shm or lock file left next to it). So is
 * a database of ours whose schema was changed by hand. An empty file or a new
 * path becomes ours in read-write mode only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_db_fixture.h"

static uint64_t g_seed;

static const char *const SIDE_FILES[] = {"-wal", "-shm", "-journal", "-lock"};
enum { NSIDE = sizeof SIDE_FILES / sizeof SIDE_FILES[0] };

static void side_files(const char *path, int exists[NSIDE]) {
  for (int i = 0; i < NSIDE; i++) {
    char side[4200];
    snprintf(side, sizeof side, "%s%s", path, SIDE_FILES[i]);
    exists[i] = fx_exists(side);
  }
}

/* Opens `path` in both modes and checks each is refused for `reason`, with
 * the file byte-for-byte unchanged and no side file (-wal, -shm, -journal,
 * the writer lock) created or removed. */
static void assert_refused(const char *path, const char *reason) {
  size_t n0 = 0, n1 = 0;
  unsigned char *before = fx_read_file(path, &n0);
  int had[NSIDE], has[NSIDE];
  side_files(path, had);
  st_db_mode modes[2] = {ST_DB_READONLY, ST_DB_READWRITE};
  for (int i = 0; i < 2; i++) {
    st_db *db = (st_db *)0x1;
    st_err err = {{0}};
    st_status st = st_db_open(path, modes[i], &db, &err);
    printf("# %s open of %s: %s\n", i ? "read-write" : "read-only", reason, err.msg);
    assert_int_equal(st, ST_ERR_DB);
    assert_null(db);
    assert_non_null(strstr(err.msg, path));
    if (!strstr(err.msg, reason)) fail_msg("message '%s' lacks '%s'", err.msg, reason);
    unsigned char *after = fx_read_file(path, &n1);
    assert_int_equal(n1, n0);
    assert_memory_equal(after, before, n0);
    free(after);
    side_files(path, has);
    for (int k = 0; k < NSIDE; k++)
      if (has[k] != had[k]) fail_msg("%s%s was %s", path, SIDE_FILES[k], has[k] ? "created" : "removed");
  }
  free(before);
}

static void test_text_file_is_refused(void **state) {
  (void)state;
  char path[256];
  st_test_temp_path(path, sizeof path, ".db");
  const char *text = "model: minimax-m3\ncontext: 1048576\nthis is a config file, not a database.\n"
                     "padding padding padding padding padding padding padding padding padding\n";
  fx_write_file(path, text, strlen(text));
  assert_refused(path, "not an SQLite database");
  fx_remove(path);
}

static void test_random_bytes_are_refused(void **state) {
  (void)state;
  uint64_t rng = g_seed;
  char path[256];
  st_test_temp_path(path, sizeof path, ".db");
  for (int size = 1; size <= 65536; size *= 8) {
    unsigned char *b = malloc((size_t)size);
    assert_non_null(b);
    for (int i = 0; i < size; i++) b[i] = (unsigned char)st_rand_next(&rng);
    fx_write_file(path, b, (size_t)size);
    free(b);
    assert_refused(path, "not an SQLite database");
  }
  fx_remove(path);
}

/* Keeps the 16-byte magic, then garbage: SQLite itself must say NOTADB. */
static void test_damaged_header_is_refused(void **state) {
  (void)state;
  uint64_t rng = g_seed ^ 0x5151;
  char path[256];
  st_test_temp_path(path, sizeof path, ".db");
  unsigned char b[8192];
  for (size_t i = 0; i < sizeof b; i++) b[i] = (unsigned char)st_rand_next(&rng);
  memcpy(b, "SQLite format 3", 16);
  b[68] = b[69] = b[70] = b[71] = 0; /* application_id 0: left to SQLite */
  fx_write_file(path, b, sizeof b);
  assert_refused(path, "not an SQLite database or its header is damaged");
  /* Read version 2 with another write version: SQLite still opens the WAL
   * (a header with b[19] = 2 and b[18] = 50 once left a -wal and a -shm
   * behind). */
  b[18] = 50;
  b[19] = 2;
  fx_write_file(path, b, sizeof b);
  assert_refused(path, "not an SQLite database or its header is damaged");
  fx_remove(path);
}

/* An SQLite file made with the plain API: application_id, WAL, one table. */
static void make_foreign(const char *path, int app_id, int wal) {
  sqlite3 *c = NULL;
  assert_int_equal(sqlite3_open(path, &c), SQLITE_OK);
  char sql[256];
  snprintf(sql, sizeof sql,
           "PRAGMA journal_mode=%s; PRAGMA application_id=%d; CREATE TABLE notes(x TEXT);"
           "INSERT INTO notes VALUES ('someone else''s data');",
           wal ? "WAL" : "DELETE", app_id);
  assert_int_equal(sqlite3_exec(c, sql, NULL, NULL, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_close(c), SQLITE_OK);
}

static void test_other_applications_databases_are_refused(void **state) {
  (void)state;
  char path[256];
  st_test_temp_path(path, sizeof path, ".db");
  make_foreign(path, 0x12345678, 0);
  assert_refused(path, "belongs to another application");
  fx_remove(path);

  make_foreign(path, 0, 0);
  assert_refused(path, "SQLite database of another application");
  fx_remove(path);

  /* WAL mode: inspection must not leave a -wal or -shm behind. */
  make_foreign(path, 0, 1);
  assert_refused(path, "SQLite database of another application");
  fx_remove(path);
}

/* A populated database of ours, closed (so the WAL is checkpointed). */
static void make_ours(const char *path, int sources) {
  st_db *db = NULL;
  st_err err = {{0}};
  assert_int_equal(st_db_open(path, ST_DB_READWRITE, &db, &err), ST_OK);
  char text[3000];
  memset(text, 'x', sizeof text - 1);
  text[sizeof text - 1] = '\0';
  st_params kernel = {0};
  assert_int_equal(st_db_begin(db, &err), ST_OK);
  for (int i = 0; i < sources; i++) {
    char hash[40];
    snprintf(hash, sizeof hash, "hash%04d", i);
    text[0] = (char)('a' + i % 26);
    assert_int_equal(st_db_put_source(db, hash, "index_decode", &kernel, text, &err), ST_OK);
  }
  assert_int_equal(st_db_commit(db, &err), ST_OK);
  st_db_close(db);
}

/* Runs `sql` on the file with the plain API. */
static void raw_exec(const char *path, const char *sql) {
  sqlite3 *c = NULL;
  assert_int_equal(sqlite3_open(path, &c), SQLITE_OK);
  if (sqlite3_exec(c, sql, NULL, NULL, NULL) != SQLITE_OK) fail_msg("%s: %s", sql, sqlite3_errmsg(c));
  assert_int_equal(sqlite3_close(c), SQLITE_OK);
}

static void test_newer_schema_is_refused(void **state) {
  (void)state;
  char path[256];
  st_test_temp_path(path, sizeof path, ".db");
  make_ours(path, 3);
  sqlite3 *c = NULL;
  assert_int_equal(sqlite3_open(path, &c), SQLITE_OK);
  char sql[64];
  snprintf(sql, sizeof sql, "PRAGMA user_version = %d", ST_DB_SCHEMA_VERSION + 1);
  assert_int_equal(sqlite3_exec(c, sql, NULL, NULL, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_close(c), SQLITE_OK);
  assert_refused(path, "newer than this build");
  fx_remove(path);
}

static void test_truncated_database_is_refused(void **state) {
  (void)state;
  char path[256];
  st_test_temp_path(path, sizeof path, ".db");
  make_ours(path, 200);
  size_t n = 0;
  unsigned char *b = fx_read_file(path, &n);
  assert_true(n > 100000);
  fx_write_file(path, b, n / 2);
  free(b);
  assert_refused(path, "corrupt");
  fx_remove(path);
  /* The same in WAL mode, as an older build left its files. */
  make_ours(path, 200);
  raw_exec(path, "PRAGMA journal_mode = WAL");
  b = fx_read_file(path, &n);
  fx_write_file(path, b, n / 2);
  free(b);
  assert_refused(path, "corrupt");
  fx_remove(path);
}

static void test_overwritten_pages_are_refused(void **state) {
  (void)state;
  uint64_t rng = g_seed ^ 0xc0de;
  char path[256];
  st_test_temp_path(path, sizeof path, ".db");
  make_ours(path, 200);
  size_t n = 0;
  unsigned char *b = fx_read_file(path, &n);
  /* Garbage over pages 2..9: the schema page survives, b-tree pages do not. */
  for (size_t i = 4096; i < 10 * 4096 && i < n; i++) b[i] = (unsigned char)st_rand_next(&rng);
  fx_write_file(path, b, n);
  free(b);
  assert_refused(path, "corrupt");
  fx_remove(path);
}

static void test_schema_changed_by_hand_is_refused(void **state) {
  (void)state;
  static const struct {
    const char *sql, *reason;
  } cases[] = {
      {"DROP TABLE winners", "lacks the table 'winners'"},
      {"DROP INDEX devices_model", "lacks the index 'devices_model'"},
      {"ALTER TABLE runs ADD COLUMN note TEXT", "its table 'runs' is not the one of schema version"},
      {"CREATE TRIGGER keep_none AFTER INSERT ON winners BEGIN DELETE FROM winners; END",
       "trigger 'keep_none' that sparsetune did not create"},
  };
  char path[256];
  st_test_temp_path(path, sizeof path, ".db");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    make_ours(path, 3);
    raw_exec(path, cases[i].sql);
    assert_refused(path, cases[i].reason);
    fx_remove(path);
  }
  /* Objects of one's own beside ours are fine. */
  make_ours(path, 3);
  raw_exec(path, "CREATE TABLE my_notes (x TEXT); CREATE VIEW my_view AS SELECT hash FROM sources;");
  st_db *db = NULL;
  st_err err = {{0}};
  assert_int_equal(st_db_open(path, ST_DB_READONLY, &db, &err), ST_OK);
  st_db_close(db);
  assert_int_equal(st_db_open(path, ST_DB_READWRITE, &db, &err), ST_OK);
  st_db_close(db);
  fx_remove(path);
}

static void test_missing_and_odd_paths(void **state) {
  (void)state;
  char path[256];
  st_test_temp_path(path, sizeof path, ".db");
  st_db *db = NULL;
  st_err err = {{0}};
  assert_int_equal(st_db_open(path, ST_DB_READONLY, &db, &err), ST_ERR_DB);
  assert_non_null(strstr(err.msg, path));
  assert_false(fx_exists(path)); /* read-only never creates */

  assert_int_equal(mkdir(path, 0700), 0);
  assert_int_equal(st_db_open(path, ST_DB_READWRITE, &db, &err), ST_ERR_DB);
  assert_non_null(strstr(err.msg, "not a regular file"));
  assert_int_equal(rmdir(path), 0);

  assert_int_equal(st_db_open(NULL, ST_DB_READWRITE, &db, &err), ST_ERR_INVALID_ARG);
  assert_int_equal(st_db_open("", ST_DB_READWRITE, &db, &err), ST_ERR_INVALID_ARG);
  assert_int_equal(st_db_open(path, (st_db_mode)7, &db, &err), ST_ERR_INVALID_ARG);
}

static void test_empty_file_becomes_ours_only_read_write(void **state) {
  (void)state;
  char path[256];
  st_test_temp_path(path, sizeof path, ".db");
  fx_write_file(path, "", 0);
  st_db *db = NULL;
  st_err err = {{0}};
  assert_int_equal(st_db_open(path, ST_DB_READONLY, &db, &err), ST_ERR_DB);
  assert_non_null(strstr(err.msg, "empty"));
  size_t n = 1;
  free(fx_read_file(path, &n));
  assert_int_equal(n, 0);

  assert_int_equal(st_db_open(path, ST_DB_READWRITE, &db, &err), ST_OK);
  assert_int_equal(st_db_schema_version(db), ST_DB_SCHEMA_VERSION);
  st_db_close(db);
  assert_int_equal(st_db_open(path, ST_DB_READONLY, &db, &err), ST_OK);
  assert_int_equal(st_db_schema_version(db), ST_DB_SCHEMA_VERSION);
  st_db_close(db);
  fx_remove(path);
}

/* An SQLite file with no tables and application_id 0 is empty too. */
static void test_empty_sqlite_file_becomes_ours(void **state) {
  (void)state;
  char path[256];
  st_test_temp_path(path, sizeof path, ".db");
  sqlite3 *c = NULL;
  assert_int_equal(sqlite3_open(path, &c), SQLITE_OK);
  assert_int_equal(sqlite3_exec(c, "PRAGMA page_size = 8192; VACUUM;", NULL, NULL, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_close(c), SQLITE_OK);
  st_db *db = NULL;
  st_err err = {{0}};
  assert_int_equal(st_db_open(path, ST_DB_READONLY, &db, &err), ST_ERR_DB);
  assert_int_equal(st_db_open(path, ST_DB_READWRITE, &db, &err), ST_OK);
  assert_int_equal(st_db_schema_version(db), ST_DB_SCHEMA_VERSION);
  st_db_close(db);
  fx_remove(path);
}

/* Characters that mean something in an SQLite URI ('?', '#', '%') or need
 * escaping in one (' ') are plain file name characters here. */
static void test_paths_with_uri_characters(void **state) {
  (void)state;
  char path[256];
  st_test_temp_path(path, sizeof path, " a?b#c%41.db");
  make_foreign(path, 0, 1);
  assert_refused(path, "SQLite database of another application");
  fx_remove(path);

  st_db *db = NULL;
  st_err err = {{0}};
  assert_int_equal(st_db_open(path, ST_DB_READWRITE, &db, &err), ST_OK);
  st_db_close(db);
  assert_int_equal(st_db_open(path, ST_DB_READONLY, &db, &err), ST_OK);
  assert_int_equal(st_db_schema_version(db), ST_DB_SCHEMA_VERSION);
  st_db_close(db);
  fx_remove(path);
}

int main(void) {
  g_seed = st_test_seed("test_db_refuses_foreign_files");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_text_file_is_refused),
      cmocka_unit_test(test_random_bytes_are_refused),
      cmocka_unit_test(test_damaged_header_is_refused),
      cmocka_unit_test(test_other_applications_databases_are_refused),
      cmocka_unit_test(test_newer_schema_is_refused),
      cmocka_unit_test(test_truncated_database_is_refused),
      cmocka_unit_test(test_overwritten_pages_are_refused),
      cmocka_unit_test(test_schema_changed_by_hand_is_refused),
      cmocka_unit_test(test_missing_and_odd_paths),
      cmocka_unit_test(test_empty_file_becomes_ours_only_read_write),
      cmocka_unit_test(test_empty_sqlite_file_becomes_ours),
      cmocka_unit_test(test_paths_with_uri_characters),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
