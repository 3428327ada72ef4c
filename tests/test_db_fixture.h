/* test_db_fixture.h - small builders shared by the db and report suites.
 *
 * Each helper asserts (cmocka) that its database call succeeded, so a test
 * reads as the data it sets up. Temporary databases are removed with their
 * -wal, -shm and -lock files by fx_remove. JSON checks go through an in-memory
 * SQLite connection (json_valid / json_extract). */
#ifndef ST_TEST_DB_FIXTURE_H
#define ST_TEST_DB_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "st_db_write.h"
#include "testutil.h"

static inline void fx_remove(const char *path) {
  char side[4200];
  unlink(path);
  snprintf(side, sizeof side, "%s-wal", path);
  unlink(side);
  snprintf(side, sizeof side, "%s-shm", path);
  unlink(side);
  snprintf(side, sizeof side, "%s-lock", path);
  unlink(side);
}

static inline int fx_exists(const char *path) { return access(path, F_OK) == 0; }

/* A fresh read-write database at a new temporary path. */
static inline st_db *fx_open_temp(char *path, size_t cap) {
  st_db *db = NULL;
  st_err err = {{0}};
  st_test_temp_path(path, cap, ".db");
  st_status st = st_db_open(path, ST_DB_READWRITE, &db, &err);
  if (st != ST_OK) fail_msg("st_db_open(%s): %s", path, err.msg);
  return db;
}

static inline int64_t fx_device(st_db *db, const char *name, const char *arch, const char *uuid) {
  st_device_info dev;
  memset(&dev, 0, sizeof dev);
  snprintf(dev.name, sizeof dev.name, "%s", name);
  snprintf(dev.arch, sizeof dev.arch, "%s", arch);
  snprintf(dev.uuid, sizeof dev.uuid, "%s", uuid);
  dev.cc_major = 9;
  dev.sm_count = 132;
  dev.mem_bytes = 80LL << 30;
  dev.l2_bytes = 50LL << 20;
  dev.driver_version = 13000;
  int64_t id = 0;
  st_err err = {{0}};
  if (st_db_put_device(db, &dev, &id, &err) != ST_OK) fail_msg("put_device: %s", err.msg);
  assert_true(id > 0);
  return id;
}

/* A source and a variant over it; the variant id is "id_<name>". */
static inline void fx_variant(st_db *db, const char *op, const char *name, int is_default, char id[40]) {
  st_variant_row v;
  memset(&v, 0, sizeof v);
  snprintf(v.id, sizeof v.id, "id_%.30s", name);
  snprintf(v.op, sizeof v.op, "%s", op);
  snprintf(v.name, sizeof v.name, "%s", name);
  snprintf(v.source_hash, sizeof v.source_hash, "src_%.30s", name);
  v.is_default = is_default;
  st_err err = {{0}};
  assert_int_equal(st_params_set_int(&v.kernel, "threads", 128, &err), ST_OK);
  assert_int_equal(st_params_set(&v.kernel, "dtype", "bf16", &err), ST_OK);
  assert_int_equal(st_params_set_int(&v.launch, "splits", 4, &err), ST_OK);
  if (st_db_put_source(db, v.source_hash, op, &v.kernel, "// kernel source\n", &err) != ST_OK ||
      st_db_put_variant(db, &v, &err) != ST_OK)
    fail_msg("fx_variant(%s): %s", name, err.msg);
  memcpy(id, v.id, sizeof v.id);
}

/* A run of `suite` (its args "suite=<suite> op=<op>"), finished with
 * `status` unless that is NULL. */
static inline int64_t fx_suite_run(st_db *db, const char *kind, const char *op, const char *suite, int64_t device_id,
                                   const char *status) {
  st_run_row r;
  memset(&r, 0, sizeof r);
  snprintf(r.kind, sizeof r.kind, "%s", kind);
  snprintf(r.op, sizeof r.op, "%s", op);
  snprintf(r.suite, sizeof r.suite, "%s", suite);
  snprintf(r.args, sizeof r.args, "suite=%s op=%s", suite, op);
  snprintf(r.tool_version, sizeof r.tool_version, "0.1.0");
  r.device_id = device_id;
  int64_t id = 0;
  st_err err = {{0}};
  if (st_db_run_begin(db, &r, &id, &err) != ST_OK) fail_msg("run_begin: %s", err.msg);
  if (status && st_db_run_finish(db, id, status, &err) != ST_OK) fail_msg("run_finish: %s", err.msg);
  return id;
}

static inline int64_t fx_run(st_db *db, const char *kind, const char *op, int64_t device_id, const char *status) {
  return fx_suite_run(db, kind, op, "quick", device_id, status);
}

static inline void fx_measure(st_db *db, int64_t run_id, const char *variant_id, const char *shape, const char *status,
                              double median_us, double spread, const char *error) {
  st_measurement m;
  memset(&m, 0, sizeof m);
  m.run_id = run_id;
  snprintf(m.variant_id, sizeof m.variant_id, "%s", variant_id);
  snprintf(m.shape_key, sizeof m.shape_key, "%s", shape);
  snprintf(m.status, sizeof m.status, "%s", status);
  snprintf(m.error, sizeof m.error, "%s", error ? error : "");
  m.median_us = median_us;
  m.min_us = median_us * (1 - spread / 2);
  m.max_us = median_us * (1 + spread / 2);
  m.spread = spread;
  m.reps = 5;
  m.iters = 20;
  snprintf(m.samples, sizeof m.samples, "[%g,%g]", m.min_us, m.max_us);
  st_err err = {{0}};
  if (st_db_put_measurement(db, &m, &err) != ST_OK) fail_msg("put_measurement: %s", err.msg);
}

/* ---- JSON checks through SQLite ---- */

/* Evaluates `sql` with ?1 = json (and ?2 = arg when not NULL); the first
 * column of the first row as malloc'ed text ("" for NULL). */
static inline char *fx_json_query(const char *sql, const char *json, const char *arg) {
  sqlite3 *conn = NULL;
  sqlite3_stmt *s = NULL;
  assert_int_equal(sqlite3_open(":memory:", &conn), SQLITE_OK);
  if (sqlite3_prepare_v2(conn, sql, -1, &s, NULL) != SQLITE_OK) fail_msg("%s: %s", sql, sqlite3_errmsg(conn));
  assert_int_equal(sqlite3_bind_text(s, 1, json, -1, SQLITE_STATIC), SQLITE_OK);
  if (arg) assert_int_equal(sqlite3_bind_text(s, 2, arg, -1, SQLITE_STATIC), SQLITE_OK);
  int rc = sqlite3_step(s);
  if (rc != SQLITE_ROW) fail_msg("%s: %s", sql, sqlite3_errmsg(conn));
  const unsigned char *t = sqlite3_column_text(s, 0);
  char *out = strdup(t ? (const char *)t : "");
  assert_non_null(out);
  sqlite3_finalize(s);
  sqlite3_close(conn);
  return out;
}

static inline int fx_json_valid(const char *json) {
  char *v = fx_json_query("SELECT json_valid(?1) AND json_type(?1) = 'object'", json, NULL);
  int ok = strcmp(v, "1") == 0;
  free(v);
  return ok;
}

/* json_extract(json, path) as text. */
static inline char *fx_json_get(const char *json, const char *path) {
  return fx_json_query("SELECT json_extract(?1, ?2)", json, path);
}

static inline long long fx_json_int(const char *json, const char *path) {
  char *v = fx_json_get(json, path);
  long long x = strtoll(v, NULL, 10);
  free(v);
  return x;
}

/* The whole file, malloc'ed; *size gets its length. */
static inline unsigned char *fx_read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  long n = ftell(f);
  assert_true(n >= 0);
  rewind(f);
  unsigned char *buf = malloc((size_t)n + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *size = (size_t)n;
  return buf;
}

/* Asserts that `path` still holds the n bytes of `before` (fx_read_file's
 * copy of it taken earlier), then frees `before`. */
static inline void fx_expect_unchanged(const char *path, unsigned char *before, size_t n) {
  size_t now = 0;
  unsigned char *after = fx_read_file(path, &now);
  assert_int_equal(now, n);
  assert_memory_equal(before, after, n);
  free(before);
  free(after);
}

static inline void fx_write_file(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, size, f), size);
  assert_int_equal(fclose(f), 0);
}

#endif
