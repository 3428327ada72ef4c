/* A tuned database deployed where its reader cannot write (a folder owned
 * by someone else, read-only media): a read-only open works, reads what the
 * tuner wrote, and creates nothing beside the file. So does one in a folder
 * it could write. A write-ahead log a killed writer left there is refused
 * with a message that says what to do. Run as root, the reader drops to an
 * unprivileged user, for whom the folder is root's and not writable. */
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "test_db_fixture.h"

#define NOBODY 65534

typedef struct folder {
  char dir[256];
  char path[300];
  int64_t run;
} folder;

static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  closedir(d);
  return n;
}

/* A folder holding one tuned database, closed by its writer. */
static void make_folder(folder *f) {
  snprintf(f->dir, sizeof f->dir, "%s/st_test_ro_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  assert_non_null(mkdtemp(f->dir));
  snprintf(f->path, sizeof f->path, "%s/tuned.db", f->dir);
  st_db *db = NULL;
  st_err err = {{0}};
  assert_int_equal(st_db_open(f->path, ST_DB_READWRITE, &db, &err), ST_OK);
  const int64_t device = fx_device(db, "NVIDIA H200", "sm_90a", "uuid-ro");
  f->run = fx_run(db, "tune", "index_decode", device, "done");
  st_db_close(db);
  assert_int_equal(chmod(f->path, 0644), 0);
}

static void remove_folder(folder *f) {
  assert_int_equal(chmod(f->dir, 0755), 0);
  fx_remove(f->path);
  assert_int_equal(rmdir(f->dir), 0);
}

static void raw_exec(const char *path, const char *sql) {
  sqlite3 *c = NULL;
  assert_int_equal(sqlite3_open(path, &c), SQLITE_OK);
  if (sqlite3_exec(c, sql, NULL, NULL, NULL) != SQLITE_OK) fail_msg("%s: %s", sql, sqlite3_errmsg(c));
  assert_int_equal(sqlite3_close(c), SQLITE_OK);
}

/* What the reader checks, in a child that cannot write the folder:
 * 0 when the open went as `expect_ok` says (and, when it worked, the run
 * was read), 1 otherwise; the message goes to stderr. */
static int read_as_reader(const folder *f, int expect_ok, const char *reason) {
  const int before = count_entries(f->dir);
  st_db *db = NULL;
  st_err err = {{0}};
  const st_status st = st_db_open(f->path, ST_DB_READONLY, &db, &err);
  fprintf(stderr, "# read-only open as uid %d: %s\n", (int)getuid(), st == ST_OK ? "ok" : err.msg);
  int ok = expect_ok ? st == ST_OK : st == ST_ERR_DB && strstr(err.msg, reason);
  if (st == ST_OK) {
    st_run_row r;
    int found = 0;
    ok = ok && st_db_get_run(db, f->run, &r, &found, &err) == ST_OK && found && !strcmp(r.status, "done");
    st_db_close(db);
  }
  const int after = count_entries(f->dir);
  if (after != before) {
    fprintf(stderr, "# %d entries in the folder before, %d after\n", before, after);
    ok = 0;
  }
  return ok ? 0 : 1;
}

/* Locks the folder (0555; root's, when running as root) and reads in a
 * child that is not root. */
static void read_in_locked_folder(const folder *f, int expect_ok, const char *reason) {
  assert_int_equal(chmod(f->dir, 0555), 0);
  const pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    if (getuid() == 0 && (setgroups(0, NULL) != 0 || setgid(NOBODY) != 0 || setuid(NOBODY) != 0)) {
      fprintf(stderr, "# cannot drop to uid %d: %s\n", NOBODY, strerror(errno));
      _exit(2);
    }
    if (access(f->dir, W_OK) == 0) _exit(3); /* the folder must not be writable */
    _exit(read_as_reader(f, expect_ok, reason));
  }
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_int_equal(chmod(f->dir, 0755), 0);
  assert_true(WIFEXITED(status));
  if (WEXITSTATUS(status) != 0) fail_msg("the reader failed (exit %d)", WEXITSTATUS(status));
}

static void test_reads_a_tuned_database_in_an_unwritable_folder(void **state) {
  (void)state;
  folder f;
  make_folder(&f);
  read_in_locked_folder(&f, 1, NULL);
  remove_folder(&f);
}

static void test_reads_an_older_wal_mode_file_in_an_unwritable_folder(void **state) {
  (void)state;
  folder f;
  make_folder(&f);
  raw_exec(f.path, "PRAGMA journal_mode = WAL"); /* as older builds left them, no -wal */
  read_in_locked_folder(&f, 1, NULL);
  remove_folder(&f);
}

static void test_leaves_nothing_beside_a_file_in_a_writable_folder(void **state) {
  (void)state;
  folder f;
  make_folder(&f);
  assert_int_equal(read_as_reader(&f, 1, NULL), 0);
  remove_folder(&f);
}

/* A writer killed in the middle leaves its -wal (and -shm); without the
 * -shm and a folder to make one in, the log cannot be read safely. */
static void test_refuses_a_left_wal_it_cannot_read_and_says_why(void **state) {
  (void)state;
  folder f;
  make_folder(&f);
  const pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    sqlite3 *c = NULL;
    if (sqlite3_open(f.path, &c) != SQLITE_OK ||
        sqlite3_exec(c, "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; UPDATE runs SET status = 'done'",
                     NULL, NULL, NULL) != SQLITE_OK)
      _exit(1);
    _exit(0); /* killed, in effect: no close, the log stays */
  }
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  char side[320];
  snprintf(side, sizeof side, "%s-wal", f.path);
  assert_true(fx_exists(side));
  snprintf(side, sizeof side, "%s-shm", f.path);
  unlink(side);
  read_in_locked_folder(&f, 0, "write-ahead log");
  remove_folder(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reads_a_tuned_database_in_an_unwritable_folder),
      cmocka_unit_test(test_reads_an_older_wal_mode_file_in_an_unwritable_folder),
      cmocka_unit_test(test_leaves_nothing_beside_a_file_in_a_writable_folder),
      cmocka_unit_test(test_refuses_a_left_wal_it_cannot_read_and_says_why),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
