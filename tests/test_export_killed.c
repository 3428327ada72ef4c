/* `sparsetune export` stopped on the way. Killed (SIGKILL) at random
 * moments, over an existing export or where there is none, it leaves at
 * --out the old export or the whole new one, never a half file, and the
 * next export runs as if nothing happened; stopped (SIGTERM) it removes its
 * staged file and exits 130; a staged file a killed run left behind, even
 * under the name the next run would take, is passed over. The moments are
 * drawn from the printed seed over the time one export takes. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "export_fixture.h"
#include "st_db_export.h"
#include "staged_file.h"
#include "test_db_fixture.h"

static uint64_t g_seed;

/* Big enough cubins that an export takes long enough to be hit inside. */
enum { CUBIN_BYTES = 2 << 20, KILLS = 12, STOPS = 6 };

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Not a wait for something: the moment of a kill. */
static void pause_s(double s) {
  struct timespec t = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

/* A whole export: the reader takes it, it is marked, every row is there. */
static void assert_whole_export(const ef_fixture *f) {
  st_db *db = NULL;
  st_err err = {{0}};
  if (st_db_open_readonly(f->out, &db, &err) != ST_OK) fail_msg("the file at --out: %s", err.msg);
  st_db_export_mark m;
  assert_int_equal(st_db_get_export_mark(db, &m, &err), ST_OK);
  assert_true(m.exported);
  assert_int_equal(m.winners, EF_WINNERS);
  st_db_close(db);
  char *check = ef_sql_text(f->out, "PRAGMA integrity_check");
  assert_string_equal(check, "ok");
  free(check);
  assert_int_equal(ef_sql_int(f->out, "SELECT count(*) FROM winners"), EF_WINNERS);
  assert_int_equal(ef_sql_int(f->out, "SELECT count(*) FROM binaries"), EF_BINARIES);
  static const char *const sides[] = {"-wal", "-shm", "-journal", "-lock"};
  for (size_t i = 0; i < sizeof sides / sizeof sides[0]; i++) {
    char p[400];
    snprintf(p, sizeof p, "%s%s", f->out, sides[i]);
    assert_false(ef_exists(p));
  }
}

/* Whether the folder holds a staged file of process `pid`. */
static int has_staged_of(const ef_fixture *f, pid_t pid) {
  char name[64];
  snprintf(name, sizeof name, ".export-%ld-", (long)pid);
  char *strays = ef_strays(f);
  const int found = strstr(strays, name) != NULL;
  free(strays);
  return found;
}

static void test_killed_export_leaves_the_old_file_or_the_new_one(void **state) {
  (void)state;
  uint64_t rng = g_seed;
  ef_fixture f;
  ef_build(&f, CUBIN_BYTES, g_seed);
  const uint64_t src_hash = ef_hash_file(f.src);
  const char *const fresh[] = {"export", "--db", f.src, "--out", f.out, NULL};
  const char *const again[] = {"export", "--db", f.src, "--out", f.out, "--force", NULL};
  const double t0 = now_s();
  assert_int_equal(ef_run(NULL, fresh), 0);
  const double took = now_s() - t0;
  printf("# one export: %.3f s\n", took);
  int killed = 0;
  for (int i = 0; i < KILLS; i++) {
    /* Every other kill hits an export where there is no file yet. */
    const int over_old = i % 2 == 0;
    if (!over_old) assert_int_equal(unlink(f.out), 0);
    const pid_t pid = ef_start(over_old ? again : fresh);
    pause_s(st_rand_uniform(&rng, 0, 1.2 * took));
    assert_int_equal(kill(pid, SIGKILL), 0);
    const int rc = ef_wait(pid);
    killed += rc == 128 + SIGKILL;
    if (over_old || ef_exists(f.out)) assert_whole_export(&f);
    /* Where the run was killed before its file was whole, there is none. */
    if (!ef_exists(f.out)) assert_int_equal(ef_run(NULL, fresh), 0);
    assert_whole_export(&f);
  }
  printf("# %d of %d runs were killed before they ended\n", killed, KILLS);
  /* Whatever the kills left beside it, the next export runs. */
  assert_int_equal(ef_run(NULL, again), 0);
  assert_whole_export(&f);
  assert_int_equal(ef_hash_file(f.src), src_hash);
  ef_destroy(&f);
}

static void test_stopped_export_removes_its_staged_file(void **state) {
  (void)state;
  uint64_t rng = g_seed ^ 0x5eed;
  ef_fixture f;
  ef_build(&f, CUBIN_BYTES, g_seed);
  const char *const args[] = {"export", "--db", f.src, "--out", f.out, "--force", NULL};
  const double t0 = now_s();
  assert_int_equal(ef_run(NULL, args), 0);
  const double took = now_s() - t0;
  int stopped = 0;
  for (int i = 0; i < STOPS; i++) {
    const pid_t pid = ef_start(args);
    pause_s(st_rand_uniform(&rng, 0, 1.2 * took));
    assert_int_equal(kill(pid, SIGTERM), 0);
    const int rc = ef_wait(pid);
    /* Done before the signal, stopped by it, or ended by it before the
     * command caught signals (when it had created nothing yet). */
    if (rc != 0 && rc != 130 && rc != 128 + SIGTERM) fail_msg("exit %d after SIGTERM", rc);
    stopped += rc == 130;
    assert_false(has_staged_of(&f, pid));
    assert_whole_export(&f);
  }
  printf("# %d of %d runs were stopped by SIGTERM on the way (exit 130)\n", stopped, STOPS);
  ef_destroy(&f);
}

static void test_stale_staged_files_are_passed_over(void **state) {
  (void)state;
  ef_fixture f;
  ef_build(&f, 4096, g_seed);
  /* What a killed run leaves: a staged file with its side files. */
  static const char *const leftovers[] = {".export-1-0", ".export-1-0-wal", ".export-1-0-lock"};
  for (size_t i = 0; i < sizeof leftovers / sizeof leftovers[0]; i++) {
    char p[400];
    snprintf(p, sizeof p, "%s%s", f.out, leftovers[i]);
    fx_write_file(p, "half an export", 14);
  }
  assert_int_equal(EF_RUN(NULL, "export", "--db", f.src, "--out", f.out), 0);
  assert_whole_export(&f);
  /* The name this process would take first is taken: the next one is used,
   * and the one found is left as it was. */
  char mine[400];
  snprintf(mine, sizeof mine, "%s.export-%ld-0", f.out, (long)getpid());
  fx_write_file(mine, "half an export", 14);
  st_staged_file s;
  st_err err = {{0}};
  assert_int_equal(st_staged_create(&s, f.out, "export", &err), ST_OK);
  assert_string_not_equal(s.path, mine);
  assert_true(ef_exists(s.path));
  st_staged_discard(&s);
  size_t n = 0;
  unsigned char *b = fx_read_file(mine, &n);
  assert_int_equal(n, 14);
  free(b);
  ef_destroy(&f);
}

int main(void) {
  g_seed = st_test_seed("test_export_killed");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_killed_export_leaves_the_old_file_or_the_new_one),
      cmocka_unit_test(test_stopped_export_removes_its_staged_file),
      cmocka_unit_test(test_stale_staged_files_are_passed_over),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
