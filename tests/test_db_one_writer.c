/* One writer per database: a second read-write open waits for the first
 * and is refused, naming it, when it does not let go; a lock left by a
 * killed writer does not block; a forked child works under its parent's
 * lock through a detached handle, and no connection crosses the fork. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "test_db_fixture.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void lock_path(const char *db, char *out, size_t cap) { snprintf(out, cap, "%s-lock", db); }

static void test_second_writer_is_refused_naming_the_first(void **state) {
  (void)state;
  char path[256];
  st_db *first = fx_open_temp(path, sizeof path);
  st_db *second = NULL;
  st_err err = {{0}};
  const double t0 = now_s();
  assert_int_equal(st_db_open(path, ST_DB_READWRITE, &second, &err), ST_ERR_DB);
  const double waited = now_s() - t0;
  assert_null(second);
  char pid[32];
  snprintf(pid, sizeof pid, "pid %d ", (int)getpid());
  if (!strstr(err.msg, pid) || !strstr(err.msg, "one writer per database"))
    fail_msg("the message names neither the holder (%s) nor the rule: %s", pid, err.msg);
  if (waited < 5.0) fail_msg("refused after %.1f s: a writer waits for the lock first", waited);
  /* Readers are not writers. */
  st_db *reader = NULL;
  assert_int_equal(st_db_open(path, ST_DB_READONLY, &reader, &err), ST_OK);
  st_db_close(reader);
  st_db_close(first);
  fx_remove(path);
}

static void test_second_writer_waits_for_the_first(void **state) {
  (void)state;
  char path[256];
  st_test_temp_path(path, sizeof path, ".db");
  int ready[2];
  assert_int_equal(pipe(ready), 0);
  const pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    st_db *db = NULL;
    st_err err = {{0}};
    if (st_db_open(path, ST_DB_READWRITE, &db, &err) != ST_OK) _exit(1);
    if (write(ready[1], "x", 1) != 1) _exit(2);
    usleep(300 * 1000);
    st_db_close(db);
    _exit(0);
  }
  char c;
  assert_int_equal(read(ready[0], &c, 1), 1);
  close(ready[0]);
  close(ready[1]);
  st_db *db = NULL;
  st_err err = {{0}};
  if (st_db_open(path, ST_DB_READWRITE, &db, &err) != ST_OK) fail_msg("the second writer: %s", err.msg);
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  char lock[300];
  lock_path(path, lock, sizeof lock);
  assert_true(fx_exists(lock));
  st_db_close(db);
  assert_false(fx_exists(lock)); /* removed by its last holder */
  fx_remove(path);
}

static void test_lock_of_a_killed_writer_does_not_block(void **state) {
  (void)state;
  char path[256];
  st_db *db = fx_open_temp(path, sizeof path);
  st_db_close(db);
  const pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    st_err err = {{0}};
    if (st_db_open(path, ST_DB_READWRITE, &db, &err) != ST_OK) _exit(1);
    raise(SIGKILL); /* dies holding the lock, its file left behind */
    _exit(2);
  }
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFSIGNALED(status));
  char lock[300];
  lock_path(path, lock, sizeof lock);
  assert_true(fx_exists(lock));
  st_err err = {{0}};
  const double t0 = now_s();
  assert_int_equal(st_db_open(path, ST_DB_READWRITE, &db, &err), ST_OK);
  assert_true(now_s() - t0 < 2.0);
  st_db_close(db);
  assert_false(fx_exists(lock));
  fx_remove(path);
}

static void test_child_writes_under_the_parents_lock(void **state) {
  (void)state;
  char path[256];
  st_db *db = fx_open_temp(path, sizeof path);
  const int64_t device = fx_device(db, "NVIDIA H200", "sm_90a", "uuid-parent");
  st_err err = {{0}};
  assert_int_equal(st_db_detach(db, &err), ST_OK);
  int found = -1;
  assert_int_equal(st_db_has_binary(db, "h", "sm_90a", NULL, &found, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "detached"));
  const pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    int ok = st_db_attach(db, &err) == ST_OK;
    int64_t run = 0;
    st_run_row r;
    memset(&r, 0, sizeof r);
    snprintf(r.kind, sizeof r.kind, "tune");
    snprintf(r.op, sizeof r.op, "index_decode");
    r.device_id = device;
    ok = ok && st_db_run_begin(db, &r, &run, &err) == ST_OK && run > 0;
    if (!ok) fprintf(stderr, "child: %s\n", err.msg);
    st_db_close(db); /* the copy: the lock stays with the parent */
    _exit(ok ? 0 : 1);
  }
  assert_int_equal(st_db_attach(db, &err), ST_OK);
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  st_run_row run;
  assert_int_equal(st_db_get_run(db, 1, &run, &found, &err), ST_OK);
  assert_int_equal(found, 1);
  char lock[300];
  lock_path(path, lock, sizeof lock);
  assert_true(fx_exists(lock)); /* still the parent's */
  st_db_close(db);
  assert_false(fx_exists(lock));
  fx_remove(path);
}

static void test_detach_refuses_an_open_transaction(void **state) {
  (void)state;
  char path[256];
  st_db *db = fx_open_temp(path, sizeof path);
  st_err err = {{0}};
  assert_int_equal(st_db_begin(db, &err), ST_OK);
  assert_int_equal(st_db_detach(db, &err), ST_ERR_INVALID_ARG);
  assert_int_equal(st_db_commit(db, &err), ST_OK);
  assert_int_equal(st_db_detach(db, &err), ST_OK);
  assert_int_equal(st_db_begin(db, &err), ST_ERR_INVALID_ARG);
  assert_int_equal(st_db_attach(db, &err), ST_OK);
  assert_int_equal(st_db_attach(db, &err), ST_OK); /* attached already: nothing to do */
  assert_int_equal(st_db_begin(db, &err), ST_OK);
  st_db_rollback(db);
  st_db_close(db);
  fx_remove(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_second_writer_is_refused_naming_the_first),
      cmocka_unit_test(test_second_writer_waits_for_the_first),
      cmocka_unit_test(test_lock_of_a_killed_writer_does_not_block),
      cmocka_unit_test(test_child_writes_under_the_parents_lock),
      cmocka_unit_test(test_detach_refuses_an_open_transaction),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
