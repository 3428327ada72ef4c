/* test_runtime_gpu_open.c - st_open on a machine with a CUDA driver and GPU.
 *
 * Skips (exit 77, with the reason) where there is no driver or device. The
 * end-to-end launch test lives beside it; this suite checks that st_open
 * fails cleanly, releasing what it took, when the database is unusable or
 * the device ordinal does not exist, and that an unprivileged user opens a
 * database deployed in a root-owned folder it cannot write, leaving nothing
 * beside it. */
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sparsetune.h"
#include "st_db_write.h"
#include "testutil.h"

#define NOBODY 65534
#define AS_READER "--open-as-reader"

static void assert_contains(const char *text, const char *part) {
  if (!strstr(text, part)) fail_msg("expected \"%s\" in \"%s\"", part, text);
}

static void open_of_a_missing_database_is_a_db_error(void **state) {
  (void)state;
  char path[512];
  st_test_temp_path(path, sizeof path, "_missing/none.db");
  st_handle *h = NULL;
  assert_int_equal(st_open(path, 0, &h), ST_ERR_DB);
  assert_null(h);
  printf("# st_open(%s): %s\n", path, st_last_error(NULL));
  assert_true(st_last_error(NULL)[0] != '\0');
}

static void open_of_a_file_that_is_not_a_database_is_a_db_error(void **state) {
  (void)state;
  char path[512];
  st_test_temp_path(path, sizeof path, ".db");
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fputs("this is not an SQLite database, and it is long enough to have a header\n", f);
  fclose(f);
  st_handle *h = NULL;
  st_status st = st_open(path, 0, &h);
  remove(path);
  assert_int_equal(st, ST_ERR_DB);
  assert_null(h);
  printf("# st_open(not a db): %s\n", st_last_error(NULL));
}

static void open_of_a_missing_device_is_no_device(void **state) {
  (void)state;
  st_handle *h = NULL;
  assert_int_equal(st_open("unused.db", 4096, &h), ST_ERR_NO_DEVICE);
  assert_null(h);
  assert_contains(st_last_error(NULL), "4096");
}

/* Open and fail many times: a leak of the primary context or of the
 * database would show under the sanitizers and in the driver's refcount. */
static void failed_opens_release_what_they_took(void **state) {
  (void)state;
  for (int i = 0; i < 50; i++) {
    st_handle *h = NULL;
    assert_int_equal(st_open("/nonexistent/dir/sparsetune.db", 0, &h), ST_ERR_DB);
  }
}

static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  closedir(d);
  return n;
}

/* The reader's side, in a fresh process (a CUDA context does not survive
 * a fork): st_open, then nothing new in the folder. */
static int open_as_reader(const char *dir, const char *path) {
  const int before = count_entries(dir);
  st_handle *h = NULL;
  const st_status st = st_open(path, 0, &h);
  printf("# st_open as uid %d in a folder it cannot write: %s\n", (int)getuid(),
         st == ST_OK ? "ok" : st_last_error(NULL));
  st_close(h);
  const int after = count_entries(dir);
  if (after != before) printf("# %d entries in the folder before, %d after\n", before, after);
  return st == ST_OK && after == before ? 0 : 1;
}

static void open_of_a_database_in_a_folder_the_user_cannot_write(void **state) {
  (void)state;
  char dir[256], path[300];
  snprintf(dir, sizeof dir, "%s/st_test_deployed_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/tuned.db", dir);
  st_db *db = NULL;
  st_err err = {{0}};
  if (st_db_open(path, ST_DB_READWRITE, &db, &err) != ST_OK) fail_msg("%s", err.msg);
  st_db_close(db);
  assert_int_equal(chmod(path, 0644), 0);
  assert_int_equal(chmod(dir, 0555), 0);
  const pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    if (getuid() == 0 && (setgroups(0, NULL) != 0 || setgid(NOBODY) != 0 || setuid(NOBODY) != 0)) _exit(2);
    if (access(dir, W_OK) == 0) _exit(3);
    execl("/proc/self/exe", "test_runtime_gpu_open", AS_READER, dir, path, (char *)NULL);
    _exit(4);
  }
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_int_equal(chmod(dir, 0755), 0);
  unlink(path);
  assert_int_equal(rmdir(dir), 0);
  assert_true(WIFEXITED(status));
  if (WEXITSTATUS(status)) fail_msg("the unprivileged reader failed (exit %d)", WEXITSTATUS(status));
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], AS_READER)) return open_as_reader(argv[2], argv[3]);
  int skip = st_test_require_gpu();
  if (skip) return skip;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(open_of_a_missing_database_is_a_db_error),
      cmocka_unit_test(open_of_a_file_that_is_not_a_database_is_a_db_error),
      cmocka_unit_test(open_of_a_missing_device_is_no_device),
      cmocka_unit_test(failed_opens_release_what_they_took),
      cmocka_unit_test(open_of_a_database_in_a_folder_the_user_cannot_write),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
