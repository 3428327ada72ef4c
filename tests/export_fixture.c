/* export_fixture.c - the tuned database the export suites export, and
 * `sparsetune` run as a process (export_fixture.h). */
#include "export_fixture.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <xxhash.h>

#include "test_db_fixture.h"

extern char **environ;

/* ---- the source database ------------------------------------------------- */

/* A variant "id_<name>" over source "src_<name>", whose text is ~100 KB as
 * rendered kernels are. */
static void put_variant(st_db *db, const char *op, const char *name, int is_default, uint64_t *rng) {
  enum { SOURCE_BYTES = 100 * 1024 };
  char *text = malloc(SOURCE_BYTES + 1);
  assert_non_null(text);
  size_t n = 0;
  while (n + 64 < SOURCE_BYTES)
    n += (size_t)snprintf(text + n, SOURCE_BYTES - n, "  acc += q[%llu] * k[%llu]; // %s\n",
                          (unsigned long long)(st_rand_next(rng) % 4096),
                          (unsigned long long)(st_rand_next(rng) % 4096), name);
  st_variant_row v;
  memset(&v, 0, sizeof v);
  snprintf(v.id, sizeof v.id, "id_%s", name);
  snprintf(v.op, sizeof v.op, "%s", op);
  snprintf(v.name, sizeof v.name, "%s.t128", name);
  snprintf(v.source_hash, sizeof v.source_hash, "src_%s", name);
  v.is_default = is_default;
  st_err err = {{0}};
  assert_int_equal(st_params_set_int(&v.kernel, "threads", 128, &err), ST_OK);
  assert_int_equal(st_params_set(&v.kernel, "family", name, &err), ST_OK);
  assert_int_equal(st_params_set_int(&v.launch, "splits", 4, &err), ST_OK);
  if (st_db_put_source(db, v.source_hash, op, &v.kernel, text, &err) != ST_OK || st_db_put_variant(db, &v, &err))
    fail_msg("variant %s: %s", name, err.msg);
  free(text);
}

/* A compile of source "src_<name>": a random cubin when ok, a log when not. */
static void put_binary(st_db *db, const char *name, const char *arch, const char *compiler, int ok, size_t bytes,
                       uint64_t *rng) {
  st_binary_row b;
  memset(&b, 0, sizeof b);
  snprintf(b.source_hash, sizeof b.source_hash, "src_%s", name);
  snprintf(b.arch, sizeof b.arch, "%s", arch);
  snprintf(b.compiler, sizeof b.compiler, "%s", compiler);
  b.ok = ok;
  unsigned char *cubin = NULL;
  if (ok) {
    cubin = malloc(bytes);
    assert_non_null(cubin);
    for (size_t i = 0; i < bytes; i++) cubin[i] = (unsigned char)st_rand_next(rng);
    b.cubin = cubin;
    b.cubin_size = bytes;
  }
  b.registers = 96;
  b.spill_bytes = ok ? 0 : 512;
  b.shared_bytes = 49152;
  b.local_bytes = 16;
  b.compile_ms = 812.5;
  char log[] = "ptxas error   : Entry function uses too much shared data";
  b.log = ok ? NULL : log;
  st_err err = {{0}};
  if (st_db_put_binary(db, &b, &err) != ST_OK) fail_msg("binary %s/%s: %s", name, arch, err.msg);
  free(cubin);
}

static void put_winner(st_db *db, int64_t device, const char *op, int batch, const char *variant, int64_t run,
                       const char *default_variant) {
  st_winner_row w;
  memset(&w, 0, sizeof w);
  w.device_id = device;
  snprintf(w.op, sizeof w.op, "%s", op);
  snprintf(w.dispatch_key, sizeof w.dispatch_key, "B=%d,dtype=bf16", batch);
  st_err err = {{0}};
  assert_int_equal(st_params_set_int(&w.dispatch, "B", batch, &err), ST_OK);
  assert_int_equal(st_params_set(&w.dispatch, "dtype", "bf16", &err), ST_OK);
  snprintf(w.variant_id, sizeof w.variant_id, "id_%s", variant);
  w.run_id = run;
  w.median_us = 10.0 + batch;
  w.regret = 1.25;
  if (default_variant) {
    snprintf(w.default_variant_id, sizeof w.default_variant_id, "id_%s", default_variant);
    w.default_us = 14.0 + batch;
  }
  if (st_db_put_winner(db, &w, &err) != ST_OK) fail_msg("winner %s/%s: %s", op, w.dispatch_key, err.msg);
}

static const char *const VARIANTS[][3] = {
    /* name, op, is_default */
    {"dec_a", "index_decode", "0"},   {"dec_b", "index_decode", "0"},        {"dec_old", "index_decode", "0"},
    {"dec_def", "index_decode", "1"}, {"attn_a", "sparse_attn_decode", "0"}, {"attn_def", "sparse_attn_decode", "1"},
    {"topk_a", "index_topk", "0"},    {"topk_def", "index_topk", "1"},       {"unused", "index_decode", "0"},
};

static void put_binaries(st_db *db, size_t bytes, uint64_t *rng) {
  /* dec_b's sm_90a has an older compiler's row first: the newest is read. */
  put_binary(db, "dec_b", "sm_90a", "12.8", 1, bytes, rng);
  for (size_t i = 0; i < sizeof VARIANTS / sizeof VARIANTS[0]; i++) {
    put_binary(db, VARIANTS[i][0], "sm_90a", "13.0", 1, bytes, rng);
    /* topk_a wins on the A100, whose only compile of it failed. */
    put_binary(db, VARIANTS[i][0], "sm_80", "13.0", strcmp(VARIANTS[i][0], "topk_a") != 0, bytes, rng);
  }
  put_binary(db, "unused", "sm_100a", "13.0", 0, bytes, rng);
}

static void put_measurements(st_db *db, int64_t run, const char *shape) {
  for (size_t i = 0; i < sizeof VARIANTS / sizeof VARIANTS[0]; i++) {
    char id[40];
    snprintf(id, sizeof id, "id_%s", VARIANTS[i][0]);
    fx_measure(db, run, id, shape, i % 4 == 3 ? "wrong" : "ok", 10.0 + (double)i, 0.01, i % 4 == 3 ? "max_err" : NULL);
  }
}

void ef_build(ef_fixture *f, size_t cubin_bytes, uint64_t seed) {
  memset(f, 0, sizeof *f);
  const char *tmp = getenv("TMPDIR");
  snprintf(f->dir, sizeof f->dir, "%s/st_export_XXXXXX", tmp && *tmp ? tmp : "/tmp");
  assert_non_null(mkdtemp(f->dir));
  snprintf(f->src, sizeof f->src, "%s/src.db", f->dir);
  snprintf(f->out, sizeof f->out, "%s/out.db", f->dir);
  uint64_t rng = seed;
  st_db *db = NULL;
  st_err err = {{0}};
  if (st_db_open(f->src, ST_DB_READWRITE, &db, &err) != ST_OK) fail_msg("%s", err.msg);
  const int64_t h200a = fx_device(db, EF_H200, "sm_90a", "GPU-aaaa");
  const int64_t h200b = fx_device(db, EF_H200, "sm_90a", "GPU-bbbb");
  const int64_t a100 = fx_device(db, EF_A100, "sm_80", "GPU-cccc");
  const int64_t r1 = fx_run(db, "tune", "index_decode", h200a, "done");
  const int64_t r2 = fx_run(db, "tune", "index_decode", h200b, "done");
  const int64_t r3 = fx_run(db, "tune", "index_topk", a100, "interrupted");
  f->run_bench = fx_run(db, "bench", "*", h200a, "done");
  for (size_t i = 0; i < sizeof VARIANTS / sizeof VARIANTS[0]; i++)
    put_variant(db, VARIANTS[i][1], VARIANTS[i][0], VARIANTS[i][2][0] == '1', &rng);
  put_binaries(db, cubin_bytes, &rng);
  put_measurements(db, r1, "B=1,ctx=4096");
  put_measurements(db, r2, "B=1,ctx=4096");
  put_measurements(db, r3, "B=4,ctx=8192");
  put_measurements(db, f->run_bench, "B=8,ctx=4096");
  /* In this order: the H200 B=1 row of card a is superseded by card b's. */
  put_winner(db, h200a, "index_decode", 1, "dec_old", r1, "dec_def");
  put_winner(db, h200a, "index_decode", 8, "dec_b", r1, "dec_def");
  put_winner(db, h200a, "sparse_attn_decode", 1, "attn_a", r1, "attn_def");
  put_winner(db, h200b, "index_decode", 1, "dec_a", r2, "dec_def");
  put_winner(db, a100, "index_decode", 1, "dec_a", r3, NULL);
  put_winner(db, a100, "index_topk", 4, "topk_a", r3, NULL);
  put_winner(db, a100, "sparse_attn_decode", 2, "attn_a", 0, "attn_def");
  st_db_close(db);
}

void ef_destroy(ef_fixture *f) {
  DIR *d = opendir(f->dir);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char p[600];
    snprintf(p, sizeof p, "%s/%s", f->dir, e->d_name);
    if (unlink(p) != 0) rmdir(p); /* the tests' folders are empty */
  }
  closedir(d);
  rmdir(f->dir);
}

/* ---- running the command ------------------------------------------------- */

static pid_t spawn_cli(const char *const *args, const char *log) {
  const char *argv[32];
  int n = 0;
  argv[n++] = ST_CLI_PATH;
  for (int i = 0; args[i] && n < 31; i++) argv[n++] = args[i];
  argv[n] = NULL;
  posix_spawn_file_actions_t fa;
  assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
  assert_int_equal(posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644), 0);
  assert_int_equal(posix_spawn_file_actions_adddup2(&fa, 1, 2), 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, ST_CLI_PATH, &fa, NULL, (char *const *)argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) fail_msg("cannot start %s: %s", ST_CLI_PATH, strerror(rc));
  return pid;
}

int ef_wait(pid_t pid) {
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

pid_t ef_start(const char *const *args) { return spawn_cli(args, "/dev/null"); }

int ef_run(char **out, const char *const *args) {
  char log[256];
  st_test_temp_path(log, sizeof log, ".log");
  const int rc = ef_wait(spawn_cli(args, log));
  size_t n = 0;
  unsigned char *text = fx_read_file(log, &n);
  text[n] = '\0';
  unlink(log);
  if (out)
    *out = (char *)text;
  else
    free(text);
  return rc;
}

/* ---- files --------------------------------------------------------------- */

uint64_t ef_hash_file(const char *path) {
  size_t n = 0;
  unsigned char *b = fx_read_file(path, &n);
  const uint64_t h = XXH3_64bits(b, n);
  free(b);
  return h;
}

int ef_exists(const char *path) { return access(path, F_OK) == 0; }

static int ends_with(const char *s, const char *tail) {
  const size_t n = strlen(s), t = strlen(tail);
  return n >= t && !strcmp(s + n - t, tail);
}

char *ef_strays(const ef_fixture *f) {
  char *list = calloc(1, 4096);
  assert_non_null(list);
  DIR *d = opendir(f->dir);
  assert_non_null(d);
  size_t n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    const char *s = e->d_name;
    if (strstr(s, ".export-") || ends_with(s, "-wal") || ends_with(s, "-shm") || ends_with(s, "-journal") ||
        ends_with(s, "-lock"))
      if (n < 4000) n += (size_t)snprintf(list + n, 4096 - n, "%s ", s);
  }
  closedir(d);
  return list;
}

long long ef_sql_int(const char *path, const char *sql) {
  char *t = ef_sql_text(path, sql);
  const long long v = strtoll(t, NULL, 10);
  free(t);
  return v;
}

char *ef_sql_text(const char *path, const char *sql) {
  sqlite3 *c = NULL;
  sqlite3_stmt *s = NULL;
  assert_int_equal(sqlite3_open_v2(path, &c, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  if (sqlite3_prepare_v2(c, sql, -1, &s, NULL) != SQLITE_OK) fail_msg("%s: %s", sql, sqlite3_errmsg(c));
  if (sqlite3_step(s) != SQLITE_ROW) fail_msg("%s: no row (%s)", sql, sqlite3_errmsg(c));
  const unsigned char *t = sqlite3_column_text(s, 0);
  char *out = strdup(t ? (const char *)t : "");
  assert_non_null(out);
  sqlite3_finalize(s);
  assert_int_equal(sqlite3_close(c), SQLITE_OK);
  return out;
}
