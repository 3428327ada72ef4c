/* db_read.c - what reads a database: sources, variants, binaries, runs,
 * measurements and winners. All a read-only handle (the runtime) needs is
 * here; writes are in db_write.c, which the runtime does not link. */
#include "db_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubin_blob.h"

#define VARIANT_COLUMNS "id, op, name, source_hash, kernel_params, launch_params, is_default"
/* ENV: r.env, or '{}' in a schema-1 database (before runs.env), which a
 * read-only handle reads as it is (db_open.c). */
#define RUN_SELECT_ENV(ENV)                                                                                            \
  "SELECT r.id, r.kind, r.op, r.suite, r.device_id, coalesce(d.name, ''), coalesce(d.arch, ''), r.status, "            \
  "r.started, r.finished, r.args, r.tool_version, " ENV " FROM runs r LEFT JOIN devices d ON d.id = r.device_id "
#define RUN_SELECT RUN_SELECT_ENV("r.env")
#define RUN_SELECT_V1 RUN_SELECT_ENV("'{}'")

/* Statements kept prepared for the life of the handle (point queries).
 * Iterations (st_db_each_*) prepare their own, so a callback may call any
 * function here. */

static const char *const SQL[Q_COUNT] = {
    [Q_GET_SOURCE] = "SELECT text FROM sources WHERE hash = ?1",
    [Q_GET_VARIANT] = "SELECT " VARIANT_COLUMNS " FROM variants WHERE id = ?1",
    [Q_HAS_BINARY] = "SELECT 1 FROM binaries WHERE source_hash = ?1 AND arch = ?2 "
                     "AND (?3 IS NULL OR compiler = ?3) LIMIT 1",
    [Q_GET_BINARY] = "SELECT source_hash, arch, compiler, ok, cubin, registers, spill_bytes, shared_bytes, "
                     "local_bytes, compile_ms, log FROM binaries WHERE source_hash = ?1 AND arch = ?2 "
                     "AND (?3 IS NULL OR compiler = ?3) ORDER BY rowid DESC LIMIT 1",
    [Q_RUN_RESUMABLE] = "SELECT id FROM runs WHERE kind = ?1 AND op = ?2 AND suite = ?3 AND device_id = ?4 "
                        "AND args = ?5 AND status IN ('running', 'interrupted') ORDER BY id DESC LIMIT 1",
    [Q_GET_RUN] = RUN_SELECT "WHERE r.id = ?1",
    [Q_RUN_COUNTS] = "SELECT coalesce(sum(status = 'ok'), 0), coalesce(sum(status = 'wrong'), 0), "
                     "coalesce(sum(status = 'failed'), 0), coalesce(sum(status = 'pruned'), 0) "
                     "FROM measurements WHERE run_id = ?1",
    [Q_HAS_MEASUREMENT] = "SELECT 1 FROM measurements WHERE run_id = ?1 AND variant_id = ?2 AND shape_key = ?3",
    /* The suites store the peer's time as text ("7.1"); a value that is
     * no positive number is no peer time. */
    [Q_SHAPE_PEER] = "SELECT CAST(json_extract(params, '$.peer_us') AS REAL), "
                     "coalesce(json_extract(params, '$.peer_device'), '') FROM shapes WHERE key = ?1 "
                     "AND CAST(json_extract(params, '$.peer_us') AS REAL) > 0 LIMIT 1",
};

static const char SQL_EACH_DEFAULT[] = "SELECT " VARIANT_COLUMNS " FROM variants WHERE is_default = 1 "
                                       "AND (?1 IS NULL OR op = ?1) ORDER BY op, name, id";

static const char SQL_EACH_RUN[] = RUN_SELECT "ORDER BY r.id DESC LIMIT ?1";
static const char SQL_EACH_RUN_V1[] = RUN_SELECT_V1 "ORDER BY r.id DESC LIMIT ?1";
static const char SQL_GET_RUN_V1[] = RUN_SELECT_V1 "WHERE r.id = ?1";

/* The text of query q for this handle's schema version. */
static const char *sql_of(const st_db *db, query_id q) {
  return q == Q_GET_RUN && db->version < 2 ? SQL_GET_RUN_V1 : SQL[q];
}

static const char SQL_EACH_MEASUREMENT[] =
    "SELECT m.run_id, m.variant_id, m.shape_key, m.status, m.error, m.median_us, m.min_us, m.max_us, m.spread, "
    "m.reps, m.iters, m.max_err, m.samples, v.name, v.op FROM measurements m "
    "JOIN variants v ON v.id = m.variant_id WHERE m.run_id = ?1 ORDER BY v.op, v.name, m.shape_key, m.variant_id";

/* Newest row (highest rowid: INSERT OR REPLACE gives the replacing row a new
 * one) per (op, dispatch key) over the cards of the model. */
static const char SQL_EACH_WINNER[] =
    "SELECT device_id, op, dispatch_key, dispatch_params, variant_id, name, run_id, median_us, regret, "
    "default_variant_id, default_us FROM (SELECT w.device_id, w.op, w.dispatch_key, w.dispatch_params, "
    "w.variant_id, v.name, coalesce(w.run_id, 0) AS run_id, w.median_us, w.regret, "
    "coalesce(w.default_variant_id, '') AS default_variant_id, w.default_us, "
    "row_number() OVER (PARTITION BY w.op, w.dispatch_key ORDER BY w.rowid DESC) AS rn "
    "FROM winners w JOIN devices d ON d.id = w.device_id JOIN variants v ON v.id = w.variant_id "
    "WHERE d.name = ?1 AND (?2 IS NULL OR d.arch = ?2)) WHERE rn = 1 ORDER BY op, dispatch_key";

static st_status get_stmt(st_db *db, query_id q, sqlite3_stmt **out, st_err *err) {
  return db_get_stmt(db, q, sql_of(db, q), out, err);
}

static st_status query(st_db *db, query_id q, const char *what, sqlite3_stmt **out, st_err *err, const char *types,
                       ...) {
  va_list ap;
  va_start(ap, types);
  const st_status st = db_vquery(db, q, sql_of(db, q), what, out, err, types, ap);
  va_end(ap);
  return st;
}

st_status st_db_get_source(st_db *db, const char *source_hash, char **text, st_err *err) {
  if (!db || !source_hash || !text) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_get_source: NULL argument");
  *text = NULL;
  sqlite3_stmt *s = NULL;
  st_status st = get_stmt(db, Q_GET_SOURCE, &s, err);
  if (st != ST_OK) return st;
  int found = 0;
  if (db_bind(s, "t", source_hash) != SQLITE_OK) {
    st = db_fail(db, err, "st_db_get_source");
    db_stmt_done(s);
    return st;
  }
  st = db_step_row(db, s, "st_db_get_source", &found, err);
  if (st != ST_OK) return st;
  if (!found) return st_fail(err, ST_ERR_NO_VARIANT, "source_hash=%s is not in database '%s'", source_hash, db->path);
  const unsigned char *t = sqlite3_column_text(s, 0);
  size_t n = (size_t)sqlite3_column_bytes(s, 0);
  *text = malloc(n + 1);
  if (!*text) {
    db_stmt_done(s);
    return st_fail(err, ST_ERR_NOMEM, "st_db_get_source: out of memory for %zu bytes", n + 1);
  }
  if (n) memcpy(*text, t, n);
  (*text)[n] = '\0';
  db_stmt_done(s);
  return ST_OK;
}

/* Fills `out` from a row of VARIANT_COLUMNS. */
static st_status read_variant(st_db *db, sqlite3_stmt *s, st_variant_row *out, st_err *err) {
  memset(out, 0, sizeof *out);
  db_col_text(s, 0, out->id, sizeof out->id);
  db_col_text(s, 1, out->op, sizeof out->op);
  db_col_text(s, 2, out->name, sizeof out->name);
  db_col_text(s, 3, out->source_hash, sizeof out->source_hash);
  out->is_default = sqlite3_column_int(s, 6);
  char what[80];
  snprintf(what, sizeof what, "parameters of variant %s", out->id);
  st_status st = db_params_parse(db, (const char *)sqlite3_column_text(s, 4), what, &out->kernel, err);
  if (st == ST_OK) st = db_params_parse(db, (const char *)sqlite3_column_text(s, 5), what, &out->launch, err);
  return st;
}

st_status st_db_get_variant(st_db *db, const char *variant_id, st_variant_row *out, st_err *err) {
  if (!db || !variant_id || !out) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_get_variant: NULL argument");
  memset(out, 0, sizeof *out);
  sqlite3_stmt *s = NULL;
  st_status st = get_stmt(db, Q_GET_VARIANT, &s, err);
  if (st != ST_OK) return st;
  int found = 0;
  if (db_bind(s, "t", variant_id) != SQLITE_OK) {
    st = db_fail(db, err, "st_db_get_variant");
    db_stmt_done(s);
    return st;
  }
  st = db_step_row(db, s, "st_db_get_variant", &found, err);
  if (st != ST_OK) return st;
  if (!found) return st_fail(err, ST_ERR_NO_VARIANT, "variant_id=%s is not in database '%s'", variant_id, db->path);
  st = read_variant(db, s, out, err);
  db_stmt_done(s);
  return st;
}

st_status st_db_each_default(st_db *db, const char *op, int (*cb)(void *ctx, const st_variant_row *v), void *ctx,
                             st_err *err) {
  if (!db || !cb) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_each_default: NULL argument");
  sqlite3_stmt *s = NULL;
  st_status st = db_prepare_fresh(db, SQL_EACH_DEFAULT, &s, err);
  if (st != ST_OK) return st;
  if (db_bind(s, "n", op) != SQLITE_OK) st = db_fail(db, err, "st_db_each_default");
  int rc = SQLITE_DONE;
  while (st == ST_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    st_variant_row v;
    st = read_variant(db, s, &v, err);
    if (st == ST_OK && cb(ctx, &v) != 0) break;
  }
  if (st == ST_OK && rc != SQLITE_ROW && rc != SQLITE_DONE) st = db_fail(db, err, "st_db_each_default");
  sqlite3_finalize(s);
  return st;
}

st_status st_db_has_binary(st_db *db, const char *source_hash, const char *arch, const char *compiler, int *found,
                           st_err *err) {
  if (!db || !source_hash || !arch || !found)
    return st_fail(err, ST_ERR_INVALID_ARG, "st_db_has_binary: NULL argument");
  *found = 0;
  sqlite3_stmt *s = NULL;
  st_status st = query(db, Q_HAS_BINARY, "st_db_has_binary", &s, err, "ttn", source_hash, arch, compiler);
  if (st != ST_OK) return st;
  st = db_step_row(db, s, "st_db_has_binary", found, err);
  if (st == ST_OK && *found) db_stmt_done(s);
  return st;
}

/* The cubin comes back as compiled whatever form it is stored in
 * (cubin_blob.h): an export's compressed one is inflated here. */
static st_status read_binary(const st_db *db, sqlite3_stmt *s, st_binary_row *out, st_err *err) {
  db_col_text(s, 0, out->source_hash, sizeof out->source_hash);
  db_col_text(s, 1, out->arch, sizeof out->arch);
  db_col_text(s, 2, out->compiler, sizeof out->compiler);
  out->ok = sqlite3_column_int(s, 3);
  out->registers = sqlite3_column_int(s, 5);
  out->spill_bytes = sqlite3_column_int(s, 6);
  out->shared_bytes = sqlite3_column_int(s, 7);
  out->local_bytes = sqlite3_column_int(s, 8);
  out->compile_ms = sqlite3_column_double(s, 9);
  const void *blob = sqlite3_column_blob(s, 4);
  const size_t n = (size_t)sqlite3_column_bytes(s, 4);
  if (blob && n) {
    char what[ST_ERR_MSG_MAX];
    snprintf(what, sizeof what, "the %s binary of source %s in '%s'", out->arch, out->source_hash, db->path);
    const st_status st = db_cubin_unpack(blob, n, &out->cubin, &out->cubin_size, what, err);
    if (st != ST_OK) return st;
  }
  const unsigned char *log = sqlite3_column_text(s, 10);
  size_t ln = (size_t)sqlite3_column_bytes(s, 10);
  out->log = malloc(ln + 1);
  if (!out->log) return st_fail(err, ST_ERR_NOMEM, "st_db_get_binary: out of memory for %zu bytes", ln + 1);
  if (ln && log) memcpy(out->log, log, ln);
  out->log[ln] = '\0';
  return ST_OK;
}

st_status st_db_get_binary(st_db *db, const char *source_hash, const char *arch, const char *compiler,
                           st_binary_row *out, int *found, st_err *err) {
  if (!db || !source_hash || !arch || !out || !found)
    return st_fail(err, ST_ERR_INVALID_ARG, "st_db_get_binary: NULL argument");
  memset(out, 0, sizeof *out);
  *found = 0;
  sqlite3_stmt *s = NULL;
  st_status st = query(db, Q_GET_BINARY, "st_db_get_binary", &s, err, "ttn", source_hash, arch, compiler);
  if (st != ST_OK) return st;
  int row = 0;
  st = db_step_row(db, s, "st_db_get_binary", &row, err);
  if (st != ST_OK || !row) return st;
  st = read_binary(db, s, out, err);
  db_stmt_done(s);
  if (st != ST_OK) {
    st_db_binary_free(out);
    return st;
  }
  *found = 1;
  return ST_OK;
}

void st_db_binary_free(st_binary_row *b) {
  if (!b) return;
  free(b->cubin);
  free(b->log);
  b->cubin = NULL;
  b->cubin_size = 0;
  b->log = NULL;
}

static void read_run(sqlite3_stmt *s, st_run_row *out) {
  memset(out, 0, sizeof *out);
  out->id = sqlite3_column_int64(s, 0);
  db_col_text(s, 1, out->kind, sizeof out->kind);
  db_col_text(s, 2, out->op, sizeof out->op);
  db_col_text(s, 3, out->suite, sizeof out->suite);
  out->device_id = sqlite3_column_int64(s, 4);
  db_col_text(s, 5, out->device_name, sizeof out->device_name);
  db_col_text(s, 6, out->arch, sizeof out->arch);
  db_col_text(s, 7, out->status, sizeof out->status);
  db_col_text(s, 8, out->started, sizeof out->started);
  db_col_text(s, 9, out->finished, sizeof out->finished);
  db_col_text(s, 10, out->args, sizeof out->args);
  db_col_text(s, 11, out->tool_version, sizeof out->tool_version);
  db_col_text(s, 12, out->env, sizeof out->env);
}

st_status st_db_get_run(st_db *db, int64_t run_id, st_run_row *out, int *found, st_err *err) {
  if (!db || !out || !found) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_get_run: NULL argument");
  memset(out, 0, sizeof *out);
  *found = 0;
  sqlite3_stmt *s = NULL;
  st_status st = query(db, Q_GET_RUN, "st_db_get_run", &s, err, "l", run_id);
  if (st != ST_OK) return st;
  st = db_step_row(db, s, "st_db_get_run", found, err);
  if (st == ST_OK && *found) {
    read_run(s, out);
    db_stmt_done(s);
  }
  return st;
}

st_status st_db_each_run(st_db *db, int limit, int (*cb)(void *ctx, const st_run_row *r), void *ctx, st_err *err) {
  if (!db || !cb) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_each_run: NULL argument");
  sqlite3_stmt *s = NULL;
  st_status st = db_prepare_fresh(db, db->version < 2 ? SQL_EACH_RUN_V1 : SQL_EACH_RUN, &s, err);
  if (st != ST_OK) return st;
  if (db_bind(s, "i", limit > 0 ? limit : -1) != SQLITE_OK) st = db_fail(db, err, "st_db_each_run");
  int rc = SQLITE_DONE;
  while (st == ST_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    st_run_row r;
    read_run(s, &r);
    if (cb(ctx, &r) != 0) break;
  }
  if (st == ST_OK && rc != SQLITE_ROW && rc != SQLITE_DONE) st = db_fail(db, err, "st_db_each_run");
  sqlite3_finalize(s);
  return st;
}

static const char SQL_DEVICE_DRIVER[] = "SELECT driver_version FROM devices WHERE id = ?1";

st_status st_db_device_driver(st_db *db, int64_t device_id, int *driver_version, int *found, st_err *err) {
  if (!db || !driver_version || !found) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_device_driver: NULL argument");
  *driver_version = 0;
  *found = 0;
  sqlite3_stmt *s = NULL;
  st_status st = db_prepare_fresh(db, SQL_DEVICE_DRIVER, &s, err);
  if (st != ST_OK) return st;
  if (db_bind(s, "l", device_id) != SQLITE_OK) st = db_fail(db, err, "st_db_device_driver");
  int rc = st == ST_OK ? sqlite3_step(s) : SQLITE_DONE;
  if (st == ST_OK && rc == SQLITE_ROW) {
    *driver_version = sqlite3_column_int(s, 0);
    *found = 1;
  } else if (st == ST_OK && rc != SQLITE_DONE) {
    st = db_fail(db, err, "st_db_device_driver");
  }
  sqlite3_finalize(s);
  return st;
}

st_status st_db_run_counts(st_db *db, int64_t run_id, st_run_counts *out, st_err *err) {
  if (!db || !out) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_run_counts: NULL argument");
  memset(out, 0, sizeof *out);
  sqlite3_stmt *s = NULL;
  st_status st = query(db, Q_RUN_COUNTS, "st_db_run_counts", &s, err, "l", run_id);
  if (st != ST_OK) return st;
  int found = 0;
  st = db_step_row(db, s, "st_db_run_counts", &found, err);
  if (st == ST_OK && found) {
    out->ok = sqlite3_column_int64(s, 0);
    out->wrong = sqlite3_column_int64(s, 1);
    out->failed = sqlite3_column_int64(s, 2);
    out->pruned = sqlite3_column_int64(s, 3);
    db_stmt_done(s);
  }
  return st;
}

st_status st_db_run_find_resumable(st_db *db, const st_run_row *like, int64_t *run_id, st_err *err) {
  if (!db || !like || !run_id) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_run_find_resumable: NULL argument");
  *run_id = 0;
  st_status st = db_check_run_keys(like, err);
  sqlite3_stmt *s = NULL;
  if (st == ST_OK) st = get_stmt(db, Q_RUN_RESUMABLE, &s, err);
  if (st != ST_OK) return st;
  if (db_bind(s, "tttlt", like->kind, like->op, like->suite, like->device_id, like->args) != SQLITE_OK) {
    st = db_fail(db, err, "st_db_run_find_resumable");
    db_stmt_done(s);
    return st;
  }
  int found = 0;
  st = db_step_row(db, s, "st_db_run_find_resumable", &found, err);
  if (st == ST_OK && found) {
    *run_id = sqlite3_column_int64(s, 0);
    db_stmt_done(s);
  }
  return st;
}

st_status st_db_has_measurement(st_db *db, int64_t run_id, const char *variant_id, const char *shape_key, int *found,
                                st_err *err) {
  if (!db || !variant_id || !shape_key || !found)
    return st_fail(err, ST_ERR_INVALID_ARG, "st_db_has_measurement: NULL argument");
  *found = 0;
  sqlite3_stmt *s = NULL;
  st_status st = query(db, Q_HAS_MEASUREMENT, "st_db_has_measurement", &s, err, "ltt", run_id, variant_id, shape_key);
  if (st != ST_OK) return st;
  st = db_step_row(db, s, "st_db_has_measurement", found, err);
  if (st == ST_OK && *found) db_stmt_done(s);
  return st;
}

st_status st_db_shape_peer(st_db *db, const char *shape_key, double *peer_us, char *device, size_t cap, int *found,
                           st_err *err) {
  if (!db || !shape_key || !peer_us || !device || cap == 0 || !found)
    return st_fail(err, ST_ERR_INVALID_ARG, "st_db_shape_peer: NULL argument");
  *found = 0;
  *peer_us = 0;
  device[0] = '\0';
  sqlite3_stmt *s = NULL;
  st_status st = query(db, Q_SHAPE_PEER, "st_db_shape_peer", &s, err, "t", shape_key);
  if (st != ST_OK) return st;
  st = db_step_row(db, s, "st_db_shape_peer", found, err);
  if (st == ST_OK && *found) {
    *peer_us = sqlite3_column_double(s, 0);
    db_col_text(s, 1, device, cap);
    db_stmt_done(s);
  }
  return st;
}

st_status st_db_each_measurement(st_db *db, int64_t run_id,
                                 int (*cb)(void *ctx, const st_measurement *m, const char *variant_name,
                                           const char *op),
                                 void *ctx, st_err *err) {
  if (!db || !cb) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_each_measurement: NULL argument");
  sqlite3_stmt *s = NULL;
  st_status st = db_prepare_fresh(db, SQL_EACH_MEASUREMENT, &s, err);
  if (st != ST_OK) return st;
  if (db_bind(s, "l", run_id) != SQLITE_OK) st = db_fail(db, err, "st_db_each_measurement");
  int rc = SQLITE_DONE;
  while (st == ST_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    st_measurement m;
    memset(&m, 0, sizeof m);
    m.run_id = sqlite3_column_int64(s, 0);
    db_col_text(s, 1, m.variant_id, sizeof m.variant_id);
    db_col_text(s, 2, m.shape_key, sizeof m.shape_key);
    db_col_text(s, 3, m.status, sizeof m.status);
    db_col_text(s, 4, m.error, sizeof m.error);
    m.median_us = sqlite3_column_double(s, 5);
    m.min_us = sqlite3_column_double(s, 6);
    m.max_us = sqlite3_column_double(s, 7);
    m.spread = sqlite3_column_double(s, 8);
    m.reps = sqlite3_column_int(s, 9);
    m.iters = sqlite3_column_int(s, 10);
    m.max_err = sqlite3_column_double(s, 11);
    db_col_text(s, 12, m.samples, sizeof m.samples);
    char name[160], op[32];
    db_col_text(s, 13, name, sizeof name);
    db_col_text(s, 14, op, sizeof op);
    if (cb(ctx, &m, name, op) != 0) break;
  }
  if (st == ST_OK && rc != SQLITE_ROW && rc != SQLITE_DONE) st = db_fail(db, err, "st_db_each_measurement");
  sqlite3_finalize(s);
  return st;
}

st_status st_db_each_winner(st_db *db, const char *device_name, const char *arch,
                            int (*cb)(void *ctx, const st_winner_row *w), void *ctx, st_err *err) {
  if (!db || !device_name || !cb) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_each_winner: NULL argument");
  sqlite3_stmt *s = NULL;
  st_status st = db_prepare_fresh(db, SQL_EACH_WINNER, &s, err);
  if (st != ST_OK) return st;
  if (db_bind(s, "tn", device_name, arch) != SQLITE_OK) st = db_fail(db, err, "st_db_each_winner");
  int rc = SQLITE_DONE;
  while (st == ST_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    st_winner_row w;
    memset(&w, 0, sizeof w);
    w.device_id = sqlite3_column_int64(s, 0);
    db_col_text(s, 1, w.op, sizeof w.op);
    db_col_text(s, 2, w.dispatch_key, sizeof w.dispatch_key);
    db_col_text(s, 4, w.variant_id, sizeof w.variant_id);
    db_col_text(s, 5, w.variant_name, sizeof w.variant_name);
    w.run_id = sqlite3_column_int64(s, 6);
    w.median_us = sqlite3_column_double(s, 7);
    w.regret = sqlite3_column_double(s, 8);
    db_col_text(s, 9, w.default_variant_id, sizeof w.default_variant_id);
    w.default_us = sqlite3_column_double(s, 10);
    char what[400];
    snprintf(what, sizeof what, "dispatch parameters of winner %s/%s", w.op, w.dispatch_key);
    st = db_params_parse(db, (const char *)sqlite3_column_text(s, 3), what, &w.dispatch, err);
    if (st == ST_OK && cb(ctx, &w) != 0) break;
  }
  if (st == ST_OK && rc != SQLITE_ROW && rc != SQLITE_DONE) st = db_fail(db, err, "st_db_each_winner");
  sqlite3_finalize(s);
  return st;
}

st_status db_check_run_keys(const st_run_row *r, st_err *err) {
  st_status st = db_check_str(r->kind, sizeof r->kind, "run kind", 0, err);
  if (st == ST_OK && strcmp(r->kind, "tune") != 0 && strcmp(r->kind, "bench") != 0)
    st = st_fail(err, ST_ERR_INVALID_ARG, "run kind='%s' is neither 'tune' nor 'bench'", r->kind);
  if (st == ST_OK) st = db_check_str(r->op, sizeof r->op, "run op", 0, err);
  if (st == ST_OK) st = db_check_str(r->suite, sizeof r->suite, "run suite", 1, err);
  if (st == ST_OK) st = db_check_str(r->args, sizeof r->args, "run args", 1, err);
  return st;
}

int db_is_run_status(const char *s) {
  return !strcmp(s, "running") || !strcmp(s, "done") || !strcmp(s, "interrupted") || !strcmp(s, "failed");
}
