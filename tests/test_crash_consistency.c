/* sparsetune killed with SIGKILL at random moments, of its own pid or of
 * its whole process group, loses nothing and corrupts nothing:
 *   - no process of the command outlives it (its compiler and workers die
 *     with it);
 *   - the database passes integrity_check, and every row in it is one an
 *     uninterrupted run writes (nothing half-written, nothing duplicated);
 *   - running the same command again resumes and ends with exactly the
 *     rows of an uninterrupted run.
 * Workloads (argv[1]): `generate` and `compile` (cpu, no GPU needed), and
 * `tune` (gpu: kills while variants are timed). Each kill is followed by
 * the checks and a resume; a resume may be killed in turn, at most
 * KILLS_PER_CHAIN times, and the last one runs to its end.
 * $ST_CRASH_KILLS sets the number of kills (default: 25 for generate and
 * compile, 20 for tune). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "testutil.h"

#define KILLS_PER_CHAIN 6

extern char **environ;

typedef struct workload {
  const char *name;
  const char *args[12];    /* after `sparsetune`; --db is appended          */
  const char *prepare[12]; /* run once; every run starts from its database
                              (a tune from compiled binaries); none: empty  */
  const char *marker;      /* kill only after stdout shows this (NULL: any time) */
  const char *tables[8];   /* "table: columns" compared with the reference  */
} workload;

/* The prefill indexer's three ops: 162 variants of 58 sources over three
 * shapes, a few seconds of timing. */
#define TUNED_OPS "index_topk,index_score,index_prefill"

/* Rows that are facts of the work, not of when it was done: no times. */
static const workload WORKLOADS[] = {
    {"generate",
     {"generate", "--suite", "smoke", NULL},
     {NULL},
     NULL,
     {"sources: hash, op, kernel_params, text",
      "variants: id, op, name, source_hash, kernel_params, launch_params, "
      "is_default",
      "shapes: op, key, params, dispatch_key", NULL}},
    {"compile",
     {"compile", "--suite", "smoke", "--op", "index_topk", "--arch", "sm_90a", "--jobs", "2", NULL},
     {NULL},
     "suite smoke:",
     {"sources: hash, op, kernel_params, text", "variants: id, op, name, source_hash",
      "binaries: source_hash, arch, compiler, ok, cubin, registers, spill_bytes, shared_bytes, local_bytes", NULL}},
    {"tune",
     {"tune", "--suite", "smoke", "--op", TUNED_OPS, NULL},
     {"compile", "--suite", "smoke", "--op", TUNED_OPS, NULL},
     "\nrun ",
     {"binaries: source_hash, arch, compiler, ok, cubin", "runs: id, kind, op, suite, args",
      /* Whether a variant was pruned or timed to the end depends on the
       * times of the others; that it was measured, and verified, does not. */
      "measurements: run_id, variant_id, shape_key, CASE WHEN status IN ('ok', 'pruned') THEN 'timed' ELSE status END",
      "winners: op, dispatch_key", NULL}},
};

static const char *g_cli;
static uint64_t g_rng;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void sleep_s(double s) {
  struct timespec t = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

static void remove_db(const char *path) {
  static const char *const sides[] = {"", "-wal", "-shm", "-journal", "-lock"};
  for (size_t i = 0; i < sizeof sides / sizeof *sides; i++) {
    char p[512];
    snprintf(p, sizeof p, "%s%s", path, sides[i]);
    unlink(p);
  }
}

static void copy_file(const char *from, const char *to) {
  FILE *in = fopen(from, "rb");
  if (!in) {
    fail_msg("reading %s: %s", from, strerror(errno));
    return;
  }
  FILE *out = fopen(to, "wb");
  if (!out) {
    fclose(in);
    fail_msg("writing %s: %s", to, strerror(errno));
    return;
  }
  char buf[1 << 16];
  for (size_t n; (n = fread(buf, 1, sizeof buf, in)) > 0;)
    if (fwrite(buf, 1, n, out) != n) fail_msg("writing %s: %s", to, strerror(errno));
  fclose(in);
  if (fclose(out) != 0) fail_msg("writing %s: %s", to, strerror(errno));
}

/* Starts `sparsetune <args> --db <db>` in a process group of its own, its
 * output in `log`. */
static pid_t start_args(const char *const *args, const char *db, const char *log) {
  const char *argv[20];
  int n = 0;
  argv[n++] = g_cli;
  for (int i = 0; args[i]; i++) argv[n++] = args[i];
  argv[n++] = "--db";
  argv[n++] = db;
  argv[n] = NULL;
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
  assert_int_equal(posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644), 0);
  assert_int_equal(posix_spawn_file_actions_adddup2(&fa, 1, 2), 0);
  assert_int_equal(posix_spawnattr_init(&at), 0);
  assert_int_equal(posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP), 0);
  assert_int_equal(posix_spawnattr_setpgroup(&at, 0), 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, g_cli, &fa, &at, (char *const *)argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  if (rc != 0) fail_msg("spawning %s: %s", g_cli, strerror(rc));
  return pid;
}

/* A run of the workload on `db`, which starts as the prepared database. */
static pid_t start(const workload *w, const char *db, const char *base, const char *log) {
  struct stat sb;
  if (base && stat(db, &sb) != 0) copy_file(base, db);
  return start_args(w->args, db, log);
}

static int file_has(const char *path, const char *text) {
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  static char buf[1 << 16];
  const size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  return strstr(buf, text) != NULL;
}

static void print_log(const char *log) {
  FILE *f = fopen(log, "rb");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) printf("#   %s", line);
  fclose(f);
}

/* Waits for the workload's marker in its log (none: at once); fails if
 * the command ends first. */
static void wait_for_marker(const workload *w, pid_t pid, const char *log) {
  const double t0 = now_s();
  if (!w->marker) return;
  while (!file_has(log, w->marker)) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      print_log(log);
      fail_msg("`sparsetune %s` ended (0x%x) before '%s'", w->name, status, w->marker);
    }
    if (now_s() - t0 > 600) fail_msg("no '%s' from `sparsetune %s` in 600 s", w->marker, w->name);
    sleep_s(0.005);
  }
}

static void expect_clean_exit(const workload *w, int status, const char *log) {
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    print_log(log);
    fail_msg("`sparsetune %s` did not finish cleanly (status 0x%x)", w->name, status);
  }
}

/* Runs the workload to its end; its exit code must be 0. Returns the
 * seconds from its marker (from its start when it has none) to its end:
 * the time in which a kill lands in the phase the workload is about. */
static double run_to_end(const workload *w, const char *db, const char *base, const char *log) {
  double t0 = now_s();
  const pid_t pid = start(w, db, base, log);
  wait_for_marker(w, pid, log);
  if (w->marker) t0 = now_s();
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  expect_clean_exit(w, status, log);
  return now_s() - t0;
}

/* Processes still running whose command line names `db` (a killed
 * command's compiler or workers would). Zombies have an empty one. */
static int processes_naming(const char *db) {
  DIR *d = opendir("/proc");
  if (!d) return 0;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[300], cmd[4096];
    snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
    FILE *f = fopen(path, "rb");
    if (!f) continue;
    const size_t len = fread(cmd, 1, sizeof cmd - 1, f);
    fclose(f);
    for (size_t i = 0; i < len; i++)
      if (!cmd[i]) cmd[i] = ' ';
    cmd[len] = '\0';
    n += strstr(cmd, db) != NULL;
  }
  closedir(d);
  return n;
}

/* A read-only connection that leaves a -wal in place for the resume. */
static sqlite3 *open_read_only(const char *db) {
  char uri[600];
  snprintf(uri, sizeof uri, "file:%s?mode=ro", db);
  sqlite3 *c = NULL;
  if (sqlite3_open_v2(uri, &c, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL) != SQLITE_OK)
    fail_msg("opening %s: %s", db, sqlite3_errmsg(c));
  sqlite3_busy_timeout(c, 10000);
  return c;
}

static long long query_count(sqlite3 *c, const char *sql) {
  sqlite3_stmt *s = NULL;
  if (sqlite3_prepare_v2(c, sql, -1, &s, NULL) != SQLITE_OK) fail_msg("%s: %s", sql, sqlite3_errmsg(c));
  if (sqlite3_step(s) != SQLITE_ROW) fail_msg("%s: %s", sql, sqlite3_errmsg(c));
  const long long n = sqlite3_column_int64(s, 0);
  sqlite3_finalize(s);
  return n;
}

static void check_integrity(sqlite3 *c, const char *db) {
  sqlite3_stmt *s = NULL;
  if (sqlite3_prepare_v2(c, "PRAGMA integrity_check", -1, &s, NULL) != SQLITE_OK || sqlite3_step(s) != SQLITE_ROW)
    fail_msg("integrity_check of %s: %s", db, sqlite3_errmsg(c));
  const char *verdict = (const char *)sqlite3_column_text(s, 0);
  if (!verdict || strcmp(verdict, "ok") != 0) fail_msg("integrity_check of %s: %s", db, verdict ? verdict : "?");
  sqlite3_finalize(s);
}

/* Prints the first rows of `sql` (for a failure's message). */
static void print_rows(sqlite3 *c, const char *sql) {
  sqlite3_stmt *s = NULL;
  if (sqlite3_prepare_v2(c, sql, -1, &s, NULL) != SQLITE_OK) return;
  for (int r = 0; r < 5 && sqlite3_step(s) == SQLITE_ROW; r++) {
    printf("#   ");
    for (int i = 0; i < sqlite3_column_count(s); i++)
      printf("%s%.200s", i ? " | " : "",
             sqlite3_column_type(s, i) == SQLITE_BLOB ? "<blob>" : (const char *)sqlite3_column_text(s, i));
    printf("\n");
  }
  sqlite3_finalize(s);
}

/* Rows of `spec`'s table in `a` that `b` lacks (printed when there are). */
static long long rows_missing(sqlite3 *c, const char *spec, const char *a, const char *b) {
  char table[64];
  const char *colon = strchr(spec, ':');
  snprintf(table, sizeof table, "%.*s", (int)(colon - spec), spec);
  char rows[1024], sql[1100];
  snprintf(rows, sizeof rows, "SELECT %s FROM %s.%s EXCEPT SELECT %s FROM %s.%s", colon + 1, a, table, colon + 1, b,
           table);
  snprintf(sql, sizeof sql, "SELECT count(*) FROM (%s)", rows);
  const long long n = query_count(c, sql);
  if (n) {
    printf("# in %s, not in %s (%s):\n", a, b, table);
    print_rows(c, rows);
  }
  return n;
}

/* Every row of the database is a row of the reference; with `complete`,
 * every row of the reference is in the database too. */
static void compare_rows(const workload *w, const char *db, const char *ref, int complete) {
  struct stat sb;
  if (!complete && stat(db, &sb) != 0) return; /* killed before the file was made */
  sqlite3 *c = open_read_only(db);
  check_integrity(c, db);
  char sql[600];
  snprintf(sql, sizeof sql, "ATTACH 'file:%s?mode=ro' AS ref", ref);
  if (sqlite3_exec(c, sql, NULL, NULL, NULL) != SQLITE_OK) fail_msg("%s: %s", sql, sqlite3_errmsg(c));
  const long long tables = query_count(c, "SELECT count(*) FROM main.sqlite_schema WHERE name = 'sources'");
  for (int i = 0; w->tables[i] && tables; i++) {
    const long long extra = rows_missing(c, w->tables[i], "main", "ref");
    const long long lacking = complete ? rows_missing(c, w->tables[i], "ref", "main") : 0;
    if (extra && !complete) (void)rows_missing(c, w->tables[i], "ref", "main"); /* what they differ from */
    if (extra || lacking)
      fail_msg("%s: %lld rows that an uninterrupted run does not write, %lld of its rows missing (%s)", db, extra,
               lacking, w->tables[i]);
  }
  if (complete && !tables) fail_msg("%s has no tables after a complete run", db);
  sqlite3_close(c);
}

/* Kills the running command at a random moment after its marker, within
 * `span` seconds: its pid alone or its whole group. Returns 1 if it was
 * killed, 0 if it had ended first (then it must have ended cleanly). */
static int kill_at_random(const workload *w, pid_t pid, const char *log, double span, int group) {
  wait_for_marker(w, pid, log);
  sleep_s(st_rand_uniform(&g_rng, 0.0, span));
  int status = 0;
  if (waitpid(pid, &status, WNOHANG) == pid) {
    expect_clean_exit(w, status, log);
    return 0;
  }
  assert_int_equal(kill(group ? -pid : pid, SIGKILL), 0);
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return 1;
}

/* A child that dies with its parent is gone within milliseconds; an orphan
 * would go on with its work (a compile, a timing) for longer than this. */
#define ORPHAN_GRACE_S 1.0

static void wait_for_no_orphans(const char *db) {
  const double t0 = now_s();
  while (processes_naming(db) > 0) {
    if (now_s() - t0 > ORPHAN_GRACE_S)
      fail_msg("a process of the killed command still runs %.1f s after it (%s)", ORPHAN_GRACE_S, db);
    sleep_s(0.02);
  }
}

/* A fresh, empty disk cache for the runs that follow (they inherit the
 * environment): each chain compiles for real, so there is a compile to kill,
 * and its cache files are written while kills land; a resume reads what a
 * killed run left there. */
static char g_cache[256];

static void fresh_cache(void) {
  if (!g_cache[0]) st_test_temp_path(g_cache, sizeof g_cache, ".cache");
  char rm[300];
  snprintf(rm, sizeof rm, "rm -rf '%s'", g_cache);
  assert_int_equal(system(rm), 0);
  assert_int_equal(setenv("SPARSETUNE_CACHE_DIR", g_cache, 1), 0);
}

static void run_workload(const workload *w, int kills) {
  char ref[256], db[256], log[256];
  st_test_temp_path(ref, sizeof ref, ".ref.db");
  st_test_temp_path(db, sizeof db, ".db");
  st_test_temp_path(log, sizeof log, ".log");
  char base_path[256];
  const char *base = NULL;
  if (w->prepare[0]) {
    st_test_temp_path(base_path, sizeof base_path, ".base.db");
    int status = 0;
    const pid_t pid = start_args(w->prepare, base_path, log);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    expect_clean_exit(w, status, log);
    base = base_path;
  }
  fresh_cache();
  const double span = run_to_end(w, ref, base, log);
  printf("# %s: uninterrupted, %.1f s %s\n", w->name, span, w->marker ? "from its marker to its end" : "in all");
  compare_rows(w, ref, ref, 1);
  int done = 0, chains = 0, of_group = 0;
  const double t0 = now_s();
  while (done < kills) {
    remove_db(db);
    fresh_cache();
    chains++;
    int finished = 0;
    for (int k = 0; k < KILLS_PER_CHAIN && done < kills && !finished; k++) {
      const int group = (int)st_rand_int(&g_rng, 0, 1);
      const pid_t pid = start(w, db, base, log);
      /* A resume has less left to do than a whole run: aim early. */
      if (!kill_at_random(w, pid, log, 0.8 * span, group)) {
        finished = 1;
        break;
      }
      done++;
      of_group += group;
      wait_for_no_orphans(db);
      compare_rows(w, db, ref, 0);
    }
    if (!finished) run_to_end(w, db, base, log);
    compare_rows(w, db, ref, 1);
  }
  printf("# %s: %d kills (%d of the process group, %d of the pid alone) in %d chains, %.0f s: every database "
         "intact, every resume complete\n",
         w->name, done, of_group, done - of_group, chains, now_s() - t0);
  remove_db(db);
  remove_db(ref);
  if (base) remove_db(base);
  unlink(log);
  fresh_cache(); /* removes the last chain's */
}

static const workload *g_workload;
static int g_kills;

static void test_killed_command_loses_and_corrupts_nothing(void **state) {
  (void)state;
  run_workload(g_workload, g_kills);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s generate|compile|tune\n", argv[0]);
    return 2;
  }
  for (size_t i = 0; i < sizeof WORKLOADS / sizeof *WORKLOADS; i++)
    if (!strcmp(argv[1], WORKLOADS[i].name)) g_workload = &WORKLOADS[i];
  if (!g_workload) {
    fprintf(stderr, "unknown workload '%s'\n", argv[1]);
    return 2;
  }
  const int gpu = !strcmp(argv[1], "tune");
  if (gpu) {
    const int skip = st_test_require_gpu();
    if (skip) return skip;
  }
  g_cli = ST_CLI_PATH;
  g_rng = st_test_seed("test_crash_consistency");
  const char *kills = getenv("ST_CRASH_KILLS");
  g_kills = kills ? atoi(kills) : gpu ? 20 : 25;
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_killed_command_loses_and_corrupts_nothing)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
