/* st_db.c - the one module that talks to SQLite (see st_db.h for the contract).
 *
 * Layout of this file: handle and helpers, opening (inspection, then
 * migration), transactions, then one section per table in schema order.
 *
 * Opening never writes a file that is not ours: the file is first inspected
 * through a read-only connection (header magic, application_id, schema
 * objects, user_version, quick_check); only a file that passed is reopened
 * read-write, and only then are WAL and other pragmas set. Read-only handles
 * keep the inspection connection, so they never open the file for writing.
 */
#include "st_db.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "schema_check.h"
#include "st_db_migrations.h"
#include "writer_lock.h"

#define ST_DB_BUSY_TIMEOUT_MS 10000
/* Room for any st_params as canonical JSON: every byte escaped as \u00XX. */
#define ST_DB_PARAMS_JSON_MAX (2 + ST_PARAMS_MAX * (6 * ST_PARAM_KEY_MAX + 6 * ST_PARAM_VAL_MAX + 8))
#define SQL_NOW "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"

/* Statements kept prepared for the life of the handle (point queries and
 * writes). Iterations (st_db_each_*) prepare their own, so a callback may
 * call any function here. */
typedef enum query_id {
  Q_JSON_EACH,
  Q_PUT_DEVICE,
  Q_PUT_SOURCE,
  Q_GET_SOURCE,
  Q_PUT_VARIANT,
  Q_GET_VARIANT,
  Q_HAS_BINARY,
  Q_PUT_BINARY,
  Q_GET_BINARY,
  Q_PUT_SHAPE,
  Q_RUN_BEGIN,
  Q_RUN_RESUMABLE,
  Q_RUN_FINISH,
  Q_GET_RUN,
  Q_RUN_COUNTS,
  Q_PUT_MEASUREMENT,
  Q_HAS_MEASUREMENT,
  Q_PUT_WINNER,
  Q_COUNT
} query_id;

#define VARIANT_COLUMNS "id, op, name, source_hash, kernel_params, launch_params, is_default"
#define RUN_SELECT                                                                                                     \
  "SELECT r.id, r.kind, r.op, r.suite, r.device_id, coalesce(d.name, ''), coalesce(d.arch, ''), r.status, "            \
  "r.started, r.finished, r.args, r.tool_version FROM runs r LEFT JOIN devices d ON d.id = r.device_id "

static const char *const QUERY[Q_COUNT] = {
    [Q_JSON_EACH] = "SELECT key, value FROM json_each(?1)",
    [Q_PUT_DEVICE] =
        "INSERT INTO devices (uuid, name, arch, cc_major, cc_minor, sm_count, mem_bytes, l2_bytes, "
        "driver_version, first_seen, last_seen) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, " SQL_NOW ", " SQL_NOW
        ") ON CONFLICT (uuid) DO UPDATE SET name = excluded.name, arch = excluded.arch, "
        "cc_major = excluded.cc_major, cc_minor = excluded.cc_minor, sm_count = excluded.sm_count, "
        "mem_bytes = excluded.mem_bytes, l2_bytes = excluded.l2_bytes, driver_version = excluded.driver_version, "
        "last_seen = excluded.last_seen RETURNING id",
    [Q_PUT_SOURCE] = "INSERT OR IGNORE INTO sources (hash, op, kernel_params, text, created) "
                     "VALUES (?1, ?2, ?3, ?4, " SQL_NOW ")",
    [Q_GET_SOURCE] = "SELECT text FROM sources WHERE hash = ?1",
    [Q_PUT_VARIANT] = "INSERT OR IGNORE INTO variants (" VARIANT_COLUMNS ", created) "
                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, " SQL_NOW ")",
    [Q_GET_VARIANT] = "SELECT " VARIANT_COLUMNS " FROM variants WHERE id = ?1",
    [Q_HAS_BINARY] = "SELECT 1 FROM binaries WHERE source_hash = ?1 AND arch = ?2 "
                     "AND (?3 IS NULL OR compiler = ?3) LIMIT 1",
    /* One source, target and compiler make one cubin: the first stored
     * stays, and storing it again changes nothing. */
    [Q_PUT_BINARY] = "INSERT INTO binaries (source_hash, arch, compiler, ok, cubin, registers, "
                     "spill_bytes, shared_bytes, local_bytes, compile_ms, log, created) "
                     "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, " SQL_NOW ") "
                     "ON CONFLICT (source_hash, arch, compiler) DO NOTHING",
    [Q_GET_BINARY] = "SELECT source_hash, arch, compiler, ok, cubin, registers, spill_bytes, shared_bytes, "
                     "local_bytes, compile_ms, log FROM binaries WHERE source_hash = ?1 AND arch = ?2 "
                     "AND (?3 IS NULL OR compiler = ?3) ORDER BY rowid DESC LIMIT 1",
    [Q_PUT_SHAPE] = "INSERT INTO shapes (op, key, params, dispatch_key) VALUES (?1, ?2, ?3, ?4) "
                    "ON CONFLICT (op, key) DO UPDATE SET params = excluded.params, "
                    "dispatch_key = excluded.dispatch_key",
    [Q_RUN_BEGIN] = "INSERT INTO runs (kind, op, suite, device_id, status, started, args, tool_version) "
                    "VALUES (?1, ?2, ?3, ?4, coalesce(nullif(?5, ''), 'running'), "
                    "coalesce(nullif(?6, ''), " SQL_NOW "), ?7, ?8)",
    [Q_RUN_RESUMABLE] = "SELECT id FROM runs WHERE kind = ?1 AND op = ?2 AND suite = ?3 AND device_id = ?4 "
                        "AND args = ?5 AND status IN ('running', 'interrupted') ORDER BY id DESC LIMIT 1",
    [Q_RUN_FINISH] = "UPDATE runs SET status = ?2, "
                     "finished = CASE WHEN ?2 = 'running' THEN '' ELSE " SQL_NOW " END WHERE id = ?1",
    [Q_GET_RUN] = RUN_SELECT "WHERE r.id = ?1",
    [Q_RUN_COUNTS] = "SELECT coalesce(sum(status = 'ok'), 0), coalesce(sum(status = 'wrong'), 0), "
                     "coalesce(sum(status = 'failed'), 0), coalesce(sum(status = 'pruned'), 0) "
                     "FROM measurements WHERE run_id = ?1",
    [Q_PUT_MEASUREMENT] = "INSERT OR REPLACE INTO measurements (run_id, variant_id, shape_key, status, error, "
                          "median_us, min_us, max_us, spread, reps, iters, max_err, samples, recorded) "
                          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, "
                          "coalesce(nullif(?13, ''), '[]'), " SQL_NOW ")",
    [Q_HAS_MEASUREMENT] = "SELECT 1 FROM measurements WHERE run_id = ?1 AND variant_id = ?2 AND shape_key = ?3",
    [Q_PUT_WINNER] = "INSERT OR REPLACE INTO winners (device_id, op, dispatch_key, dispatch_params, variant_id, "
                     "run_id, median_us, regret, default_variant_id, default_us, updated) "
                     "VALUES (?1, ?2, ?3, ?4, ?5, nullif(?6, 0), ?7, ?8, nullif(?9, ''), ?10, " SQL_NOW ")",
};

static const char SQL_EACH_DEFAULT[] = "SELECT " VARIANT_COLUMNS " FROM variants WHERE is_default = 1 "
                                       "AND (?1 IS NULL OR op = ?1) ORDER BY op, name, id";
static const char SQL_EACH_RUN[] = RUN_SELECT "ORDER BY r.id DESC LIMIT ?1";
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

struct st_db {
  sqlite3 *conn; /* NULL while detached                              */
  st_db_mode mode;
  int immutable;       /* read with immutable=1 (open_reader says when)    */
  st_writer_lock lock; /* held by read-write handles                       */
  int version;
  int in_tx;
  sqlite3_stmt *stmt[Q_COUNT];
  char json[2][ST_DB_PARAMS_JSON_MAX]; /* scratch for st_params_to_json */
  char path[];
};

/* ---- helpers -------------------------------------------------------------- */

/* An SQLite failure on `conn`, naming the file and what was being done. Call
 * it before anything else touches `conn` (a rollback would reset the text). */
static st_status conn_fail(sqlite3 *conn, const char *path, st_err *err, const char *what) {
  return st_fail(err, ST_ERR_DB, "database '%s': %s: %s (%s)", path, what, sqlite3_errmsg(conn),
                 sqlite3_errstr(sqlite3_extended_errcode(conn)));
}

static st_status db_fail(const st_db *db, st_err *err, const char *what) {
  return conn_fail(db->conn, db->path, err, what);
}

/* A NUL-terminated string of at most cap-1 bytes (`cap` = the struct field). */
static st_status check_str(const char *s, size_t cap, const char *name, int allow_empty, st_err *err) {
  if (!s) return st_fail(err, ST_ERR_INVALID_ARG, "%s is NULL", name);
  size_t n = strnlen(s, cap);
  if (n == cap) return st_fail(err, ST_ERR_INVALID_ARG, "%s is not NUL-terminated within %zu bytes", name, cap);
  if (n == 0 && !allow_empty) return st_fail(err, ST_ERR_INVALID_ARG, "%s is empty", name);
  return ST_OK;
}

static st_status check_writable(const st_db *db, const char *fn, st_err *err) {
  if (db->mode != ST_DB_READWRITE)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s: database '%s' was opened read-only", fn, db->path);
  return ST_OK;
}

/* Between st_db_detach and st_db_attach the handle has no connection. */
static st_status check_attached(const st_db *db, st_err *err) {
  if (!db->conn)
    return st_fail(err, ST_ERR_INVALID_ARG, "database '%s' is detached (st_db_detach): attach it first", db->path);
  return ST_OK;
}

static st_status get_stmt(st_db *db, query_id q, sqlite3_stmt **out, st_err *err) {
  st_status st = check_attached(db, err);
  if (st != ST_OK) return st;
  if (!db->stmt[q]) {
    int rc = sqlite3_prepare_v3(db->conn, QUERY[q], -1, SQLITE_PREPARE_PERSISTENT, &db->stmt[q], NULL);
    if (rc != SQLITE_OK) {
      st = db_fail(db, err, "preparing a statement");
      sqlite3_finalize(db->stmt[q]);
      db->stmt[q] = NULL;
      return st;
    }
  }
  *out = db->stmt[q];
  return ST_OK;
}

static st_status prepare_fresh(st_db *db, const char *sql, sqlite3_stmt **out, st_err *err) {
  *out = NULL;
  if (check_attached(db, err) != ST_OK) return ST_ERR_INVALID_ARG;
  if (sqlite3_prepare_v2(db->conn, sql, -1, out, NULL) != SQLITE_OK) {
    st_status st = db_fail(db, err, "preparing a statement");
    sqlite3_finalize(*out);
    *out = NULL;
    return st;
  }
  return ST_OK;
}

/* Returns a cached statement to its initial state. The result code of reset
 * repeats that of the last step, which the caller has already handled. */
static void stmt_done(sqlite3_stmt *s) {
  (void)sqlite3_reset(s);
  (void)sqlite3_clear_bindings(s);
}

/* Binds parameters 1..n by type letters: 't' text, 'n' text or NULL when
 * NULL/empty, 'i' int, 'l' int64_t, 'd' double, 'b' blob (pointer, size_t;
 * NULL when empty). Values are bound SQLITE_STATIC: they must outlive the
 * step. Returns the first failing SQLite code. */
static int vbind(sqlite3_stmt *s, const char *types, va_list ap) {
  int rc = SQLITE_OK;
  for (int i = 0; types[i] && rc == SQLITE_OK; i++) {
    int col = i + 1;
    switch (types[i]) {
    case 't': rc = sqlite3_bind_text(s, col, va_arg(ap, const char *), -1, SQLITE_STATIC); break;
    case 'n': {
      const char *t = va_arg(ap, const char *);
      rc = (t && *t) ? sqlite3_bind_text(s, col, t, -1, SQLITE_STATIC) : sqlite3_bind_null(s, col);
      break;
    }
    case 'i': rc = sqlite3_bind_int(s, col, va_arg(ap, int)); break;
    case 'l': rc = sqlite3_bind_int64(s, col, (sqlite3_int64)va_arg(ap, int64_t)); break;
    case 'd': rc = sqlite3_bind_double(s, col, va_arg(ap, double)); break;
    case 'b': {
      const void *p = va_arg(ap, const void *);
      size_t n = va_arg(ap, size_t);
      rc = (p && n) ? sqlite3_bind_blob64(s, col, p, n, SQLITE_STATIC) : sqlite3_bind_null(s, col);
      break;
    }
    default: rc = SQLITE_MISUSE; break;
    }
  }
  return rc;
}

static int bind(sqlite3_stmt *s, const char *types, ...) {
  va_list ap;
  va_start(ap, types);
  const int rc = vbind(s, types, ap);
  va_end(ap);
  return rc;
}

/* The prepared statement of query q with its parameters bound (vbind's type
 * letters); on failure nothing stays bound and the message names `what`. */
static st_status query(st_db *db, query_id q, const char *what, sqlite3_stmt **out, st_err *err, const char *types,
                       ...) {
  sqlite3_stmt *s = NULL;
  st_status st = get_stmt(db, q, &s, err);
  if (st != ST_OK) return st;
  va_list ap;
  va_start(ap, types);
  const int rc = vbind(s, types, ap);
  va_end(ap);
  if (rc != SQLITE_OK) {
    st = db_fail(db, err, what);
    stmt_done(s);
    return st;
  }
  *out = s;
  return ST_OK;
}

static void col_text(sqlite3_stmt *s, int col, char *dst, size_t cap) {
  const unsigned char *t = sqlite3_column_text(s, col);
  snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

/* Steps a write statement to completion (RETURNING rows are drained; the
 * first column of the first row goes to *returned when not NULL). */
static st_status step_write(st_db *db, sqlite3_stmt *s, const char *what, int64_t *returned, st_err *err) {
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW)
    if (returned) *returned = sqlite3_column_int64(s, 0);
  st_status st = rc == SQLITE_DONE ? ST_OK : db_fail(db, err, what);
  stmt_done(s);
  return st;
}

/* Steps a point query: *found = 1 and the statement left on the row (caller
 * reads it, then stmt_done), or *found = 0 and the statement reset. */
static st_status step_row(st_db *db, sqlite3_stmt *s, const char *what, int *found, st_err *err) {
  int rc = sqlite3_step(s);
  *found = rc == SQLITE_ROW;
  if (rc == SQLITE_ROW) return ST_OK;
  st_status st = rc == SQLITE_DONE ? ST_OK : db_fail(db, err, what);
  stmt_done(s);
  return st;
}

static st_status exec_sql(sqlite3 *conn, const char *path, const char *sql, const char *what, st_err *err) {
  char *msg = NULL;
  int rc = sqlite3_exec(conn, sql, NULL, NULL, &msg);
  if (rc == SQLITE_OK) return ST_OK;
  st_status st = st_fail(err, ST_ERR_DB, "database '%s': %s: %s (%s)", path, what, msg ? msg : sqlite3_errmsg(conn),
                         sqlite3_errstr(rc));
  sqlite3_free(msg);
  return st;
}

/* Runs a query whose first row's first column is an integer. */
static int query_int(sqlite3 *conn, const char *sql, int64_t *out) {
  sqlite3_stmt *s = NULL;
  int rc = sqlite3_prepare_v2(conn, sql, -1, &s, NULL);
  if (rc == SQLITE_OK) {
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
      *out = sqlite3_column_int64(s, 0);
      rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
      rc = SQLITE_ERROR;
    }
  }
  sqlite3_finalize(s);
  return rc;
}

/* Canonical JSON of `ps` into scratch buffer `slot` of the handle. */
static st_status params_json(st_db *db, const st_params *ps, int slot, const char *name, const char **out,
                             st_err *err) {
  if (!ps) return st_fail(err, ST_ERR_INVALID_ARG, "%s is NULL", name);
  if (ps->n < 0 || ps->n > ST_PARAMS_MAX)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s has n=%d parameters, outside 0..%d", name, ps->n, ST_PARAMS_MAX);
  if (st_params_to_json(ps, db->json[slot], sizeof db->json[slot]) < 0)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s does not fit %d bytes of JSON", name, ST_DB_PARAMS_JSON_MAX);
  *out = db->json[slot];
  return ST_OK;
}

/* Parses a stored JSON object back into `out` (the reverse of params_json). */
static st_status params_parse(st_db *db, const char *json, const char *what, st_params *out, st_err *err) {
  memset(out, 0, sizeof *out);
  sqlite3_stmt *s = NULL;
  st_status st = query(db, Q_JSON_EACH, what, &s, err, "t", json ? json : "{}");
  if (st != ST_OK) return st;
  int rc;
  while (st == ST_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    const unsigned char *k = sqlite3_column_text(s, 0);
    const unsigned char *v = sqlite3_column_text(s, 1);
    if (!k) {
      st = st_fail(err, ST_ERR_DB, "database '%s': %s: '%s' is not a JSON object", db->path, what, json);
      break;
    }
    st = st_params_set(out, (const char *)k, v ? (const char *)v : "", err);
  }
  if (st == ST_OK && rc != SQLITE_DONE) st = db_fail(db, err, what);
  stmt_done(s);
  return st;
}

/* ---- opening ---------------------------------------------------------------- */

/* What inspection found a path to be. */
typedef enum file_kind { FILE_NEW, FILE_EMPTY, FILE_OURS } file_kind;

static const char SQLITE_MAGIC[16] = "SQLite format 3";

static int path_exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

/* Checks the first bytes without SQLite: the magic string and an
 * application_id that is not ours are decided here, so that such a file is
 * never opened by SQLite at all. (user_version and a zero application_id are
 * left to SQLite: a WAL may hold newer values than the main file's header.) */
static st_status inspect_header(const char *path, long long size, int *wal_mode, st_err *err) {
  unsigned char h[100];
  FILE *f = fopen(path, "rb");
  if (!f) return st_fail(err, ST_ERR_DB, "database '%s' cannot be read: %s", path, strerror(errno));
  size_t got = fread(h, 1, sizeof h, f);
  fclose(f);
  if (got < sizeof h || memcmp(h, SQLITE_MAGIC, sizeof SQLITE_MAGIC) != 0)
    return st_fail(err, ST_ERR_DB,
                   "'%s' is not an SQLite database (%lld bytes without the SQLite header); "
                   "refusing to use it",
                   path, size);
  /* SQLite opens the WAL (creating -wal and -shm) whenever the read
   * version, byte 19, is 2, whatever the write version (byte 18) says. */
  *wal_mode = h[19] == 2;
  uint32_t app = (uint32_t)h[68] << 24 | (uint32_t)h[69] << 16 | (uint32_t)h[70] << 8 | h[71];
  if (app != 0 && app != ST_DB_APPLICATION_ID)
    return st_fail(err, ST_ERR_DB,
                   "'%s' belongs to another application (application_id 0x%08x, sparsetune "
                   "uses 0x%08x); refusing to use it",
                   path, app, (unsigned)ST_DB_APPLICATION_ID);
  return ST_OK;
}

static st_status classify_read_error(sqlite3 *conn, const char *path, st_err *err) {
  int rc = sqlite3_extended_errcode(conn) & 0xff;
  if (rc == SQLITE_NOTADB)
    return st_fail(err, ST_ERR_DB, "'%s' is not an SQLite database or its header is damaged (%s); refusing to use it",
                   path, sqlite3_errmsg(conn));
  if (rc == SQLITE_CORRUPT)
    return st_fail(err, ST_ERR_DB, "database '%s' is corrupt (%s); refusing to use it", path, sqlite3_errmsg(conn));
  return conn_fail(conn, path, err, "reading the header");
}

/* application_id, user_version and the number of schema objects, read in
 * one statement so they come from one snapshot (a migration committing in
 * between would otherwise show tables without the application_id). */
static int read_identity(sqlite3 *conn, int64_t *app, int64_t *ver, int64_t *objects) {
  sqlite3_stmt *s = NULL;
  int rc = sqlite3_prepare_v2(conn,
                              "SELECT (SELECT application_id FROM pragma_application_id), "
                              "(SELECT user_version FROM pragma_user_version), "
                              "(SELECT count(*) FROM sqlite_schema)",
                              -1, &s, NULL);
  if (rc == SQLITE_OK) rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) {
    *app = sqlite3_column_int64(s, 0);
    *ver = sqlite3_column_int64(s, 1);
    *objects = sqlite3_column_int64(s, 2);
    rc = SQLITE_OK;
  }
  sqlite3_finalize(s);
  return rc;
}

/* Ours or empty: our application_id, or 0 with no schema objects and no
 * user_version. Anything else belongs to another application; a schema
 * newer than this build's is refused here too. */
static st_status check_identity(const char *path, int64_t app, int64_t ver, int64_t objects, st_err *err) {
  if ((uint32_t)app != 0 && (uint32_t)app != ST_DB_APPLICATION_ID)
    return st_fail(err, ST_ERR_DB,
                   "'%s' belongs to another application (application_id 0x%08x, sparsetune "
                   "uses 0x%08x); refusing to use it",
                   path, (unsigned)app, (unsigned)ST_DB_APPLICATION_ID);
  if (app == 0 && (objects > 0 || ver != 0))
    return st_fail(err, ST_ERR_DB,
                   "'%s' is an SQLite database of another application (application_id 0 with "
                   "%lld schema objects and user_version %lld); refusing to use it",
                   path, (long long)objects, (long long)ver);
  if (ver > ST_DB_SCHEMA_VERSION)
    return st_fail(err, ST_ERR_DB,
                   "database '%s' has schema version %lld, newer than this build's %d; use a newer "
                   "sparsetune",
                   path, (long long)ver, ST_DB_SCHEMA_VERSION);
  return ST_OK;
}

/* The database checks of an SQLite file through connection `conn`. */
static st_status inspect_conn(sqlite3 *conn, const char *path, st_db_mode mode, file_kind *kind, int *version,
                              st_err *err) {
  int64_t app = 0, ver = 0, objects = 0;
  if (read_identity(conn, &app, &ver, &objects) != SQLITE_OK) return classify_read_error(conn, path, err);
  st_status st = check_identity(path, app, ver, objects, err);
  if (st != ST_OK) return st;

  sqlite3_stmt *s = NULL;
  int rc = sqlite3_prepare_v2(conn, "PRAGMA quick_check(1)", -1, &s, NULL);
  if (rc == SQLITE_OK) rc = sqlite3_step(s);
  if (rc != SQLITE_ROW) {
    st = classify_read_error(conn, path, err);
    sqlite3_finalize(s);
    return st;
  }
  const unsigned char *verdict = sqlite3_column_text(s, 0);
  if (!verdict || strcmp((const char *)verdict, "ok") != 0) {
    char why[160];
    snprintf(why, sizeof why, "%s", verdict ? (const char *)verdict : "no verdict");
    for (char *p = why; *p; p++)
      if (*p == '\n') *p = ' '; /* one line: "*** in database main *** Page 2: ..." */
    st = st_fail(err, ST_ERR_DB, "database '%s' is corrupt (quick_check: %s); refusing to use it", path, why);
    sqlite3_finalize(s);
    return st;
  }
  sqlite3_finalize(s);

  if (app == 0) {
    if (mode == ST_DB_READONLY)
      return st_fail(err, ST_ERR_DB,
                     "database '%s' is empty (no sparsetune schema yet); create it with a "
                     "`sparsetune` command first",
                     path);
    *kind = FILE_EMPTY;
    *version = 0;
    return ST_OK;
  }
  if (ver < 1)
    return st_fail(err, ST_ERR_DB,
                   "database '%s' has the sparsetune application_id but schema version %lld; "
                   "refusing to use it",
                   path, (long long)ver);
  if (ver < ST_DB_SCHEMA_VERSION && mode == ST_DB_READONLY)
    return st_fail(err, ST_ERR_DB,
                   "database '%s' has schema version %lld, older than this build's %d; run any "
                   "`sparsetune` command on it once to migrate it",
                   path, (long long)ver, ST_DB_SCHEMA_VERSION);
  if ((st = st_db_check_schema(conn, path, (int)ver, err)) != ST_OK) return st;
  *kind = FILE_OURS;
  *version = (int)ver;
  return ST_OK;
}

/* ---- which connection reads the file -------------------------------------------- */

static int has_wal_file(const char *path) {
  char wal[4096 + 8];
  snprintf(wal, sizeof wal, "%s-wal", path);
  return path_exists(wal);
}

/* Whether this process may create files in the folder holding `path`. */
static int folder_writable(const char *path) {
  char dir[4096 + 8];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash)
    snprintf(dir, sizeof dir, ".");
  else if (slash == dir)
    slash[1] = '\0';
  else
    *slash = '\0';
  return access(dir, W_OK) == 0;
}

/* A read-only connection to a WAL-mode file creates a -wal and a -shm next
 * to it when they are missing, and cannot read the file at all where they
 * cannot be created. immutable=1 (no locks, no side files) avoids both. It
 * is safe exactly when no -wal exists, so that the main file holds every
 * committed page, and no writer changes the main file while the connection
 * reads it: a writer appends to a new -wal and copies it back only at its
 * close or after many pages, so one short read (the identity) is safe
 * always, and a long-lived connection where a writer cannot start: while
 * this process holds the writer lock, or in a folder where no -wal can be
 * created. Files sparsetune writes are left in rollback-journal mode when
 * their writer closes, and need none of this. */
static st_status open_reader(const char *path, int immutable, sqlite3 **out, st_err *err) {
  char uri[3 * 4096 + 48];
  size_t n = (size_t)snprintf(uri, sizeof uri, "file:%s", path[0] == '/' ? "//" : "");
  for (const unsigned char *p = (const unsigned char *)path; *p && n + 4 < sizeof uri; p++) {
    int plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("/._~-", *p);
    n += (size_t)snprintf(uri + n, sizeof uri - n, plain ? "%c" : "%%%02X", *p);
  }
  snprintf(uri + n, sizeof uri - n, "?mode=ro%s", immutable ? "&immutable=1" : "");
  *out = NULL;
  int rc = sqlite3_open_v2(uri, out, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_EXRESCODE, NULL);
  if (rc != SQLITE_OK) {
    st_status st = *out ? conn_fail(*out, path, err, "opening read-only")
                        : st_fail(err, ST_ERR_NOMEM, "database '%s': out of memory opening it", path);
    sqlite3_close_v2(*out);
    *out = NULL;
    return st;
  }
  sqlite3_busy_timeout(*out, ST_DB_BUSY_TIMEOUT_MS);
  return ST_OK;
}

/* The file at `path` before SQLite opens it: absent or empty (FILE_NEW,
 * for a read-write open), else an SQLite file whose header does not name
 * another application (FILE_OURS until inspection says more). */
static st_status probe_file(const char *path, st_db_mode mode, file_kind *kind, int *wal_mode, st_err *err) {
  struct stat sb;
  *wal_mode = 0;
  if (stat(path, &sb) != 0) {
    if (errno == ENOENT && mode == ST_DB_READWRITE) {
      *kind = FILE_NEW;
      return ST_OK;
    }
    return st_fail(err, ST_ERR_DB, "database '%s' cannot be opened: %s", path, strerror(errno));
  }
  if (!S_ISREG(sb.st_mode)) return st_fail(err, ST_ERR_DB, "database '%s' is not a regular file", path);
  if (sb.st_size == 0) {
    if (mode == ST_DB_READONLY)
      return st_fail(err, ST_ERR_DB,
                     "database '%s' is empty (no sparsetune schema yet); create it with a "
                     "`sparsetune` command first",
                     path);
    *kind = FILE_NEW;
    return ST_OK;
  }
  *kind = FILE_OURS;
  return inspect_header(path, (long long)sb.st_size, wal_mode, err);
}

/* The identity alone, through a connection that creates nothing beside the
 * file, so that a file of another application is refused untouched. */
static st_status check_identity_untouched(const char *path, int wal_mode, st_err *err) {
  sqlite3 *conn = NULL;
  int64_t app = 0, ver = 0, objects = 0;
  st_status st = open_reader(path, wal_mode && !has_wal_file(path), &conn, err);
  if (st != ST_OK) return st;
  if (read_identity(conn, &app, &ver, &objects) != SQLITE_OK)
    st = classify_read_error(conn, path, err);
  else
    st = check_identity(path, app, ver, objects, err);
  sqlite3_close_v2(conn);
  return st;
}

/* The whole inspection of a file that passed the identity check, through
 * the reading connection db->conn (kept by read-only handles). A read-write
 * open holds the writer lock here. */
static st_status inspect(st_db *db, file_kind *kind, st_err *err) {
  int wal_mode = 0;
  st_status st = probe_file(db->path, db->mode, kind, &wal_mode, err);
  if (st != ST_OK || *kind == FILE_NEW) return st;
  /* Inspected untouched where that is safe for the length of a check; a
   * read-only handle then keeps a connection that notices writers, unless
   * no writer can start (open_reader). */
  const int untouched = wal_mode && !has_wal_file(db->path);
  db->immutable = untouched && (db->mode == ST_DB_READWRITE || !folder_writable(db->path));
  st = open_reader(db->path, untouched, &db->conn, err);
  if (st == ST_OK) st = inspect_conn(db->conn, db->path, db->mode, kind, &db->version, err);
  if (st == ST_OK && untouched && !db->immutable) {
    sqlite3_close_v2(db->conn);
    db->conn = NULL;
    st = open_reader(db->path, 0, &db->conn, err);
  }
  return st;
}

/* Why a read-only open of a WAL-mode file failed, where SQLite's own words
 * ("unable to open database file") would not say: a log left behind by a
 * writer that did not finish needs a -shm, which cannot be made here. */
static st_status explain_left_wal(const char *path, st_status st, st_err *err) {
  if (st != ST_ERR_DB || !has_wal_file(path) || folder_writable(path)) return st;
  return st_fail(err, ST_ERR_DB,
                 "database '%s' has a write-ahead log ('%s-wal') that a writer left behind, and its folder cannot be "
                 "written, so it cannot be read safely; run a sparsetune command that writes to it once where it "
                 "can be written (that folds the log in), then deploy it",
                 path, path);
}

/* Inside the migration's transaction: its row, then the header fields that
 * make the file ours at this version. */
static st_status record_migration(st_db *db, const st_db_migration *m, const char *what, st_err *err) {
  sqlite3_stmt *s = NULL;
  st_status st =
      prepare_fresh(db, "INSERT INTO schema_migrations (version, name, applied) VALUES (?1, ?2, " SQL_NOW ")", &s, err);
  if (st != ST_OK) return st;
  if (bind(s, "it", m->version, m->name) != SQLITE_OK || sqlite3_step(s) != SQLITE_DONE) st = db_fail(db, err, what);
  sqlite3_finalize(s);
  if (st != ST_OK) return st;
  char sql[128];
  snprintf(sql, sizeof sql, "PRAGMA user_version = %d; PRAGMA application_id = %d;", m->version,
           (int)ST_DB_APPLICATION_ID);
  return exec_sql(db->conn, db->path, sql, what, err);
}

static st_status migrate_one(st_db *db, const st_db_migration *m, st_err *err) {
  st_status st = exec_sql(db->conn, db->path, "BEGIN IMMEDIATE", "starting a migration", err);
  if (st != ST_OK) return st;
  char what[96];
  snprintf(what, sizeof what, "migration %03d_%s", m->version, m->name);
  int64_t app = 0, ver = 0, objects = 0;
  /* Re-read inside the write lock: another process may have migrated it, and
   * the file must still be ours (or still empty) before the first write. */
  if (read_identity(db->conn, &app, &ver, &objects) != SQLITE_OK) {
    st = db_fail(db, err, what);
  } else if ((app == 0 && (objects > 0 || ver != 0)) || (app != 0 && (uint32_t)app != ST_DB_APPLICATION_ID)) {
    st = st_fail(err, ST_ERR_DB,
                 "database '%s' changed while it was being opened and is no longer a sparsetune "
                 "database; refusing to use it",
                 db->path);
  } else if (ver > ST_DB_SCHEMA_VERSION) {
    st = st_fail(err, ST_ERR_DB,
                 "database '%s' was migrated to schema version %lld by a newer sparsetune while it "
                 "was being opened",
                 db->path, (long long)ver);
  } else if (ver >= m->version) {
    db->version = (int)ver; /* done by another process meanwhile */
  } else if (ver != m->version - 1) {
    st = st_fail(err, ST_ERR_DB, "database '%s' has schema version %lld, cannot apply %s", db->path, (long long)ver,
                 what);
  } else {
    st = exec_sql(db->conn, db->path, m->sql, what, err);
    int64_t fk_problems = 0;
    if (st == ST_OK && query_int(db->conn, "SELECT count(*) FROM pragma_foreign_key_check", &fk_problems) != SQLITE_OK)
      st = db_fail(db, err, what);
    if (st == ST_OK && fk_problems)
      st = st_fail(err, ST_ERR_DB, "database '%s': %s leaves %lld rows with broken foreign keys", db->path, what,
                   (long long)fk_problems);
    if (st == ST_OK) st = record_migration(db, m, what, err);
    if (st == ST_OK) db->version = m->version;
  }
  if (st == ST_OK) st = exec_sql(db->conn, db->path, "COMMIT", what, err);
  if (st != ST_OK && !sqlite3_get_autocommit(db->conn)) (void)sqlite3_exec(db->conn, "ROLLBACK", NULL, NULL, NULL);
  return st;
}

/* Applies every migration newer than the file's version, each in its own
 * transaction, with foreign keys off meanwhile (so a later migration may
 * rebuild a table; foreign_key_check runs before each commit instead). */
static st_status migrate(st_db *db, st_err *err) {
  for (int i = 0; i < st_db_migration_count; i++) {
    if (st_db_migrations[i].version != i + 1)
      return st_fail(err, ST_ERR_DB, "build error: embedded migration %d is numbered %d", i + 1,
                     st_db_migrations[i].version);
  }
  if (db->version >= st_db_migration_count) return ST_OK;
  st_status st = exec_sql(db->conn, db->path, "PRAGMA foreign_keys = OFF", "preparing migrations", err);
  for (int i = db->version; st == ST_OK && i < st_db_migration_count; i++) {
    if (db->version < st_db_migrations[i].version) st = migrate_one(db, &st_db_migrations[i], err);
  }
  st_err ignored;
  st_status fk =
      exec_sql(db->conn, db->path, "PRAGMA foreign_keys = ON", "enabling foreign keys", st == ST_OK ? err : &ignored);
  return st != ST_OK ? st : fk;
}

/* Switching a new file to WAL needs an exclusive lock; when another process
 * is doing the same, SQLite answers SQLITE_BUSY at once instead of calling
 * the busy handler (it would deadlock), so retry here, as long as the busy
 * timeout. A file already in WAL mode takes no lock. */
static st_status set_wal(st_db *db, st_err *err) {
  for (int waited_ms = 0;; waited_ms += 5) {
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db->conn, "PRAGMA journal_mode = WAL", -1, &s, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
      const unsigned char *jm = sqlite3_column_text(s, 0);
      int wal = jm && strcmp((const char *)jm, "wal") == 0;
      sqlite3_finalize(s);
      if (!wal) return st_fail(err, ST_ERR_DB, "database '%s' cannot use WAL journaling (file system?)", db->path);
      return ST_OK;
    }
    if ((rc & 0xff) != SQLITE_BUSY || waited_ms >= ST_DB_BUSY_TIMEOUT_MS) {
      st_status st = db_fail(db, err, "switching to WAL");
      sqlite3_finalize(s);
      return st;
    }
    sqlite3_finalize(s);
    sqlite3_sleep(5);
  }
}

static st_status open_readwrite(st_db *db, file_kind kind, st_err *err) {
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_EXRESCODE | (kind == FILE_NEW ? SQLITE_OPEN_CREATE : 0);
  int rc = sqlite3_open_v2(db->path, &db->conn, flags, NULL);
  if (rc != SQLITE_OK)
    return db->conn ? db_fail(db, err, "opening read-write")
                    : st_fail(err, ST_ERR_NOMEM, "database '%s': out of memory opening it", db->path);
  if (sqlite3_db_readonly(db->conn, "main") != 0)
    return st_fail(err, ST_ERR_DB, "database '%s' is not writable (permissions?); a read-write open needs it",
                   db->path);
  sqlite3_busy_timeout(db->conn, ST_DB_BUSY_TIMEOUT_MS);
  /* Last look before the first write (journal_mode writes the header). */
  int64_t app = 0;
  if (query_int(db->conn, "PRAGMA application_id", &app) != SQLITE_OK)
    return classify_read_error(db->conn, db->path, err);
  if (app != 0 && (uint32_t)app != ST_DB_APPLICATION_ID)
    return st_fail(err, ST_ERR_DB, "'%s' belongs to another application (application_id 0x%08x); refusing to use it",
                   db->path, (unsigned)app);

  st_status st = set_wal(db, err);
  if (st != ST_OK) return st;
  st = exec_sql(db->conn, db->path, "PRAGMA synchronous = NORMAL", "setting synchronous", err);
  if (st == ST_OK) st = migrate(db, err);
  if (st == ST_OK) st = exec_sql(db->conn, db->path, "PRAGMA foreign_keys = ON", "enabling foreign keys", err);
  return st;
}

st_status st_db_open(const char *path, st_db_mode mode, st_db **out, st_err *err) {
  if (!out) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_open: out is NULL");
  *out = NULL;
  if (!path || !*path) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_open: path is NULL or empty");
  if (mode != ST_DB_READONLY && mode != ST_DB_READWRITE)
    return st_fail(err, ST_ERR_INVALID_ARG, "st_db_open: mode=%d is neither ST_DB_READONLY nor ST_DB_READWRITE",
                   (int)mode);
  if (strlen(path) > 4096) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_open: path is longer than 4096 bytes");
  size_t len = strlen(path);
  st_db *db = calloc(1, sizeof *db + len + 1);
  if (!db) return st_fail(err, ST_ERR_NOMEM, "st_db_open: out of memory");
  memcpy(db->path, path, len + 1);
  db->mode = mode;
  db->lock = ST_WRITER_LOCK_NONE;

  /* Whose file it is comes first, so that a file of another application
   * gets no lock file, -wal or -shm beside it. */
  file_kind kind = FILE_NEW;
  int wal_mode = 0;
  st_status st = probe_file(db->path, mode, &kind, &wal_mode, err);
  if (st == ST_OK && kind != FILE_NEW) st = check_identity_untouched(db->path, wal_mode, err);
  if (st == ST_OK && mode == ST_DB_READWRITE) st = st_writer_lock_take(db->path, ST_DB_BUSY_TIMEOUT_MS, &db->lock, err);
  if (st == ST_OK) st = inspect(db, &kind, err);
  if (st == ST_OK && mode == ST_DB_READONLY) {
    st = exec_sql(db->conn, db->path, "PRAGMA query_only = ON", "making the connection read-only", err);
  } else if (st == ST_OK) {
    sqlite3_close_v2(db->conn); /* the inspection's; the writer opens its own */
    db->conn = NULL;
    st = open_readwrite(db, kind, err);
  }
  if (st != ST_OK) {
    if (mode == ST_DB_READONLY && wal_mode) st = explain_left_wal(db->path, st, err);
    st_db_close(db);
    return st;
  }
  *out = db;
  return ST_OK;
}

/* A writer that closes for good leaves the file in rollback-journal mode:
 * one self-contained file, which a read-only open anywhere (read-only
 * media, a folder it cannot write) reads without creating anything beside
 * it, and which can be copied alone. With other connections still open
 * the switch is refused at once and the file stays in WAL mode. */
static void leave_wal(st_db *db) {
  sqlite3_busy_timeout(db->conn, 0);
  (void)sqlite3_exec(db->conn, "PRAGMA journal_mode = DELETE", NULL, NULL, NULL);
}

/* Ends the connection, if any; the handle stays. */
static void disconnect(st_db *db, int for_good) {
  if (!db->conn) return;
  if (db->in_tx) (void)sqlite3_exec(db->conn, "ROLLBACK", NULL, NULL, NULL);
  db->in_tx = 0;
  for (int i = 0; i < Q_COUNT; i++) {
    sqlite3_finalize(db->stmt[i]);
    db->stmt[i] = NULL;
  }
  if (for_good && db->mode == ST_DB_READWRITE && db->lock.owner == getpid()) leave_wal(db);
  /* Every statement is finalized, so close cannot be busy; close_v2 still
   * frees the connection when it somehow is. */
  if (sqlite3_close(db->conn) != SQLITE_OK) (void)sqlite3_close_v2(db->conn);
  db->conn = NULL;
}

void st_db_close(st_db *db) {
  if (!db) return;
  disconnect(db, 1);
  st_writer_lock_release(db->path, &db->lock);
  free(db);
}

st_status st_db_detach(st_db *db, st_err *err) {
  if (!db) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_detach: db is NULL");
  if (db->in_tx) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_detach: a transaction is open");
  disconnect(db, 0);
  return ST_OK;
}

st_status st_db_attach(st_db *db, st_err *err) {
  if (!db) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_attach: db is NULL");
  if (db->conn) return ST_OK;
  st_status st = ST_OK;
  if (db->mode == ST_DB_READWRITE)
    st = open_readwrite(db, FILE_OURS, err);
  else
    st = open_reader(db->path, db->immutable, &db->conn, err);
  if (st == ST_OK && db->mode == ST_DB_READONLY)
    st = exec_sql(db->conn, db->path, "PRAGMA query_only = ON", "making the connection read-only", err);
  if (st != ST_OK) disconnect(db, 0);
  return st;
}

int st_db_schema_version(const st_db *db) { return db ? db->version : 0; }

/* ---- transactions ------------------------------------------------------------ */

st_status st_db_begin(st_db *db, st_err *err) {
  if (!db) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_begin: db is NULL");
  if (db->in_tx) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_begin: a transaction is already open (no nesting)");
  if (check_attached(db, err) != ST_OK) return ST_ERR_INVALID_ARG;
  /* Read-only handles get a read transaction: one snapshot for many reads. */
  const char *sql = db->mode == ST_DB_READWRITE ? "BEGIN IMMEDIATE" : "BEGIN";
  st_status st = exec_sql(db->conn, db->path, sql, "st_db_begin", err);
  if (st == ST_OK) db->in_tx = 1;
  return st;
}

st_status st_db_commit(st_db *db, st_err *err) {
  if (!db) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_commit: db is NULL");
  if (!db->in_tx) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_commit: no transaction is open");
  st_status st = exec_sql(db->conn, db->path, "COMMIT", "st_db_commit", err);
  if (st != ST_OK && !sqlite3_get_autocommit(db->conn)) (void)sqlite3_exec(db->conn, "ROLLBACK", NULL, NULL, NULL);
  db->in_tx = 0;
  return st;
}

void st_db_rollback(st_db *db) {
  if (!db || !db->in_tx) return;
  if (!sqlite3_get_autocommit(db->conn)) (void)sqlite3_exec(db->conn, "ROLLBACK", NULL, NULL, NULL);
  db->in_tx = 0;
}

/* ---- devices -------------------------------------------------------------------- */

st_status st_db_put_device(st_db *db, const st_device_info *dev, int64_t *device_id, st_err *err) {
  if (!db || !dev || !device_id) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_put_device: NULL argument");
  st_status st = check_writable(db, "st_db_put_device", err);
  if (st == ST_OK) st = check_str(dev->uuid, sizeof dev->uuid, "device uuid", 0, err);
  if (st == ST_OK) st = check_str(dev->name, sizeof dev->name, "device name", 0, err);
  if (st == ST_OK) st = check_str(dev->arch, sizeof dev->arch, "device arch", 0, err);
  sqlite3_stmt *s = NULL;
  if (st == ST_OK) st = get_stmt(db, Q_PUT_DEVICE, &s, err);
  if (st != ST_OK) return st;
  if (bind(s, "tttiiilli", dev->uuid, dev->name, dev->arch, dev->cc_major, dev->cc_minor, dev->sm_count, dev->mem_bytes,
           dev->l2_bytes, dev->driver_version) != SQLITE_OK) {
    st = db_fail(db, err, "st_db_put_device");
    stmt_done(s);
    return st;
  }
  *device_id = 0;
  return step_write(db, s, "st_db_put_device", device_id, err);
}

/* ---- sources and variants ---------------------------------------------------------- */

st_status st_db_put_source(st_db *db, const char *source_hash, const char *op, const st_params *kernel,
                           const char *text, st_err *err) {
  if (!db) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_put_source: db is NULL");
  st_status st = check_writable(db, "st_db_put_source", err);
  if (st == ST_OK) st = check_str(source_hash, 40, "source_hash", 0, err);
  if (st == ST_OK) st = check_str(op, 32, "op", 0, err);
  if (st == ST_OK && !text) st = st_fail(err, ST_ERR_INVALID_ARG, "st_db_put_source: text is NULL");
  const char *kjson = NULL;
  if (st == ST_OK) st = params_json(db, kernel, 0, "kernel parameters", &kjson, err);
  sqlite3_stmt *s = NULL;
  if (st == ST_OK) st = get_stmt(db, Q_PUT_SOURCE, &s, err);
  if (st != ST_OK) return st;
  if (bind(s, "tttt", source_hash, op, kjson, text) != SQLITE_OK) {
    st = db_fail(db, err, "st_db_put_source");
    stmt_done(s);
    return st;
  }
  return step_write(db, s, "st_db_put_source", NULL, err);
}

st_status st_db_put_variant(st_db *db, const st_variant_row *v, st_err *err) {
  if (!db || !v) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_put_variant: NULL argument");
  st_status st = check_writable(db, "st_db_put_variant", err);
  if (st == ST_OK) st = check_str(v->id, sizeof v->id, "variant id", 0, err);
  if (st == ST_OK) st = check_str(v->op, sizeof v->op, "variant op", 0, err);
  if (st == ST_OK) st = check_str(v->name, sizeof v->name, "variant name", 0, err);
  if (st == ST_OK) st = check_str(v->source_hash, sizeof v->source_hash, "variant source_hash", 0, err);
  const char *kjson = NULL, *ljson = NULL;
  if (st == ST_OK) st = params_json(db, &v->kernel, 0, "kernel parameters", &kjson, err);
  if (st == ST_OK) st = params_json(db, &v->launch, 1, "launch parameters", &ljson, err);
  sqlite3_stmt *s = NULL;
  if (st == ST_OK) st = get_stmt(db, Q_PUT_VARIANT, &s, err);
  if (st != ST_OK) return st;
  char what[128];
  snprintf(what, sizeof what, "st_db_put_variant(id=%s, source_hash=%s)", v->id, v->source_hash);
  if (bind(s, "tttttti", v->id, v->op, v->name, v->source_hash, kjson, ljson, v->is_default ? 1 : 0) != SQLITE_OK) {
    st = db_fail(db, err, what);
    stmt_done(s);
    return st;
  }
  return step_write(db, s, what, NULL, err);
}

st_status st_db_get_source(st_db *db, const char *source_hash, char **text, st_err *err) {
  if (!db || !source_hash || !text) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_get_source: NULL argument");
  *text = NULL;
  sqlite3_stmt *s = NULL;
  st_status st = get_stmt(db, Q_GET_SOURCE, &s, err);
  if (st != ST_OK) return st;
  int found = 0;
  if (bind(s, "t", source_hash) != SQLITE_OK) {
    st = db_fail(db, err, "st_db_get_source");
    stmt_done(s);
    return st;
  }
  st = step_row(db, s, "st_db_get_source", &found, err);
  if (st != ST_OK) return st;
  if (!found) return st_fail(err, ST_ERR_NO_VARIANT, "source_hash=%s is not in database '%s'", source_hash, db->path);
  const unsigned char *t = sqlite3_column_text(s, 0);
  size_t n = (size_t)sqlite3_column_bytes(s, 0);
  *text = malloc(n + 1);
  if (!*text) {
    stmt_done(s);
    return st_fail(err, ST_ERR_NOMEM, "st_db_get_source: out of memory for %zu bytes", n + 1);
  }
  if (n) memcpy(*text, t, n);
  (*text)[n] = '\0';
  stmt_done(s);
  return ST_OK;
}

/* Fills `out` from a row of VARIANT_COLUMNS. */
static st_status read_variant(st_db *db, sqlite3_stmt *s, st_variant_row *out, st_err *err) {
  memset(out, 0, sizeof *out);
  col_text(s, 0, out->id, sizeof out->id);
  col_text(s, 1, out->op, sizeof out->op);
  col_text(s, 2, out->name, sizeof out->name);
  col_text(s, 3, out->source_hash, sizeof out->source_hash);
  out->is_default = sqlite3_column_int(s, 6);
  char what[80];
  snprintf(what, sizeof what, "parameters of variant %s", out->id);
  st_status st = params_parse(db, (const char *)sqlite3_column_text(s, 4), what, &out->kernel, err);
  if (st == ST_OK) st = params_parse(db, (const char *)sqlite3_column_text(s, 5), what, &out->launch, err);
  return st;
}

st_status st_db_get_variant(st_db *db, const char *variant_id, st_variant_row *out, st_err *err) {
  if (!db || !variant_id || !out) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_get_variant: NULL argument");
  memset(out, 0, sizeof *out);
  sqlite3_stmt *s = NULL;
  st_status st = get_stmt(db, Q_GET_VARIANT, &s, err);
  if (st != ST_OK) return st;
  int found = 0;
  if (bind(s, "t", variant_id) != SQLITE_OK) {
    st = db_fail(db, err, "st_db_get_variant");
    stmt_done(s);
    return st;
  }
  st = step_row(db, s, "st_db_get_variant", &found, err);
  if (st != ST_OK) return st;
  if (!found) return st_fail(err, ST_ERR_NO_VARIANT, "variant_id=%s is not in database '%s'", variant_id, db->path);
  st = read_variant(db, s, out, err);
  stmt_done(s);
  return st;
}

st_status st_db_each_default(st_db *db, const char *op, int (*cb)(void *ctx, const st_variant_row *v), void *ctx,
                             st_err *err) {
  if (!db || !cb) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_each_default: NULL argument");
  sqlite3_stmt *s = NULL;
  st_status st = prepare_fresh(db, SQL_EACH_DEFAULT, &s, err);
  if (st != ST_OK) return st;
  if (bind(s, "n", op) != SQLITE_OK) st = db_fail(db, err, "st_db_each_default");
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

/* ---- binaries ------------------------------------------------------------------------- */

st_status st_db_has_binary(st_db *db, const char *source_hash, const char *arch, const char *compiler, int *found,
                           st_err *err) {
  if (!db || !source_hash || !arch || !found)
    return st_fail(err, ST_ERR_INVALID_ARG, "st_db_has_binary: NULL argument");
  *found = 0;
  sqlite3_stmt *s = NULL;
  st_status st = query(db, Q_HAS_BINARY, "st_db_has_binary", &s, err, "ttn", source_hash, arch, compiler);
  if (st != ST_OK) return st;
  st = step_row(db, s, "st_db_has_binary", found, err);
  if (st == ST_OK && *found) stmt_done(s);
  return st;
}

st_status st_db_put_binary(st_db *db, const st_binary_row *b, st_err *err) {
  if (!db || !b) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_put_binary: NULL argument");
  st_status st = check_writable(db, "st_db_put_binary", err);
  if (st == ST_OK) st = check_str(b->source_hash, sizeof b->source_hash, "binary source_hash", 0, err);
  if (st == ST_OK) st = check_str(b->arch, sizeof b->arch, "binary arch", 0, err);
  if (st == ST_OK) st = check_str(b->compiler, sizeof b->compiler, "binary compiler", 0, err);
  if (st == ST_OK && b->cubin_size && !b->cubin)
    st = st_fail(err, ST_ERR_INVALID_ARG, "binary cubin is NULL with cubin_size=%zu", b->cubin_size);
  sqlite3_stmt *s = NULL;
  if (st == ST_OK) st = get_stmt(db, Q_PUT_BINARY, &s, err);
  if (st != ST_OK) return st;
  char what[128];
  snprintf(what, sizeof what, "st_db_put_binary(source_hash=%s, arch=%s)", b->source_hash, b->arch);
  if (bind(s, "tttibiiiidt", b->source_hash, b->arch, b->compiler, b->ok ? 1 : 0, (const void *)b->cubin, b->cubin_size,
           b->registers, b->spill_bytes, b->shared_bytes, b->local_bytes, b->compile_ms,
           b->log ? b->log : "") != SQLITE_OK) {
    st = db_fail(db, err, what);
    stmt_done(s);
    return st;
  }
  return step_write(db, s, what, NULL, err);
}

static st_status read_binary(sqlite3_stmt *s, st_binary_row *out, st_err *err) {
  col_text(s, 0, out->source_hash, sizeof out->source_hash);
  col_text(s, 1, out->arch, sizeof out->arch);
  col_text(s, 2, out->compiler, sizeof out->compiler);
  out->ok = sqlite3_column_int(s, 3);
  out->registers = sqlite3_column_int(s, 5);
  out->spill_bytes = sqlite3_column_int(s, 6);
  out->shared_bytes = sqlite3_column_int(s, 7);
  out->local_bytes = sqlite3_column_int(s, 8);
  out->compile_ms = sqlite3_column_double(s, 9);
  const void *blob = sqlite3_column_blob(s, 4);
  size_t n = (size_t)sqlite3_column_bytes(s, 4);
  if (blob && n) {
    out->cubin = malloc(n);
    if (!out->cubin) return st_fail(err, ST_ERR_NOMEM, "st_db_get_binary: out of memory for %zu bytes", n);
    memcpy(out->cubin, blob, n);
    out->cubin_size = n;
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
  st = step_row(db, s, "st_db_get_binary", &row, err);
  if (st != ST_OK || !row) return st;
  st = read_binary(s, out, err);
  stmt_done(s);
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

/* ---- shapes ---------------------------------------------------------------------------- */

st_status st_db_put_shape(st_db *db, const char *key, const char *op, const st_params *shape, const char *dispatch_key,
                          st_err *err) {
  if (!db) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_put_shape: db is NULL");
  st_status st = check_writable(db, "st_db_put_shape", err);
  if (st == ST_OK) st = check_str(key, 256, "shape key", 0, err);
  if (st == ST_OK) st = check_str(op, 32, "shape op", 0, err);
  if (st == ST_OK) st = check_str(dispatch_key, 256, "shape dispatch_key", 0, err);
  const char *json = NULL;
  if (st == ST_OK) st = params_json(db, shape, 0, "shape parameters", &json, err);
  sqlite3_stmt *s = NULL;
  if (st == ST_OK) st = get_stmt(db, Q_PUT_SHAPE, &s, err);
  if (st != ST_OK) return st;
  if (bind(s, "tttt", op, key, json, dispatch_key) != SQLITE_OK) {
    st = db_fail(db, err, "st_db_put_shape");
    stmt_done(s);
    return st;
  }
  return step_write(db, s, "st_db_put_shape", NULL, err);
}

/* ---- runs --------------------------------------------------------------------------------- */

static int is_run_status(const char *s) {
  return !strcmp(s, "running") || !strcmp(s, "done") || !strcmp(s, "interrupted") || !strcmp(s, "failed");
}

static st_status check_run_keys(const st_run_row *r, st_err *err) {
  st_status st = check_str(r->kind, sizeof r->kind, "run kind", 0, err);
  if (st == ST_OK && strcmp(r->kind, "tune") != 0 && strcmp(r->kind, "bench") != 0)
    st = st_fail(err, ST_ERR_INVALID_ARG, "run kind='%s' is neither 'tune' nor 'bench'", r->kind);
  if (st == ST_OK) st = check_str(r->op, sizeof r->op, "run op", 0, err);
  if (st == ST_OK) st = check_str(r->suite, sizeof r->suite, "run suite", 1, err);
  if (st == ST_OK) st = check_str(r->args, sizeof r->args, "run args", 1, err);
  return st;
}

st_status st_db_run_begin(st_db *db, const st_run_row *run, int64_t *run_id, st_err *err) {
  if (!db || !run || !run_id) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_run_begin: NULL argument");
  *run_id = 0;
  st_status st = check_writable(db, "st_db_run_begin", err);
  if (st == ST_OK) st = check_run_keys(run, err);
  if (st == ST_OK) st = check_str(run->status, sizeof run->status, "run status", 1, err);
  if (st == ST_OK && run->status[0] && !is_run_status(run->status))
    st = st_fail(err, ST_ERR_INVALID_ARG, "run status='%s' is not running, done, interrupted or failed", run->status);
  if (st == ST_OK) st = check_str(run->started, sizeof run->started, "run started", 1, err);
  if (st == ST_OK) st = check_str(run->tool_version, sizeof run->tool_version, "run tool_version", 1, err);
  sqlite3_stmt *s = NULL;
  if (st == ST_OK) st = get_stmt(db, Q_RUN_BEGIN, &s, err);
  if (st != ST_OK) return st;
  char what[96];
  snprintf(what, sizeof what, "st_db_run_begin(device_id=%lld)", (long long)run->device_id);
  if (bind(s, "tttltttt", run->kind, run->op, run->suite, run->device_id, run->status, run->started, run->args,
           run->tool_version) != SQLITE_OK) {
    st = db_fail(db, err, what);
    stmt_done(s);
    return st;
  }
  st = step_write(db, s, what, NULL, err);
  if (st == ST_OK) *run_id = sqlite3_last_insert_rowid(db->conn);
  return st;
}

st_status st_db_run_find_resumable(st_db *db, const st_run_row *like, int64_t *run_id, st_err *err) {
  if (!db || !like || !run_id) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_run_find_resumable: NULL argument");
  *run_id = 0;
  st_status st = check_run_keys(like, err);
  sqlite3_stmt *s = NULL;
  if (st == ST_OK) st = get_stmt(db, Q_RUN_RESUMABLE, &s, err);
  if (st != ST_OK) return st;
  if (bind(s, "tttlt", like->kind, like->op, like->suite, like->device_id, like->args) != SQLITE_OK) {
    st = db_fail(db, err, "st_db_run_find_resumable");
    stmt_done(s);
    return st;
  }
  int found = 0;
  st = step_row(db, s, "st_db_run_find_resumable", &found, err);
  if (st == ST_OK && found) {
    *run_id = sqlite3_column_int64(s, 0);
    stmt_done(s);
  }
  return st;
}

st_status st_db_run_finish(st_db *db, int64_t run_id, const char *status, st_err *err) {
  if (!db || !status) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_run_finish: NULL argument");
  st_status st = check_writable(db, "st_db_run_finish", err);
  if (st == ST_OK && !is_run_status(status))
    st = st_fail(err, ST_ERR_INVALID_ARG, "run status='%s' is not running, done, interrupted or failed", status);
  sqlite3_stmt *s = NULL;
  if (st == ST_OK) st = get_stmt(db, Q_RUN_FINISH, &s, err);
  if (st != ST_OK) return st;
  if (bind(s, "lt", run_id, status) != SQLITE_OK) {
    st = db_fail(db, err, "st_db_run_finish");
    stmt_done(s);
    return st;
  }
  st = step_write(db, s, "st_db_run_finish", NULL, err);
  if (st == ST_OK && sqlite3_changes(db->conn) == 0)
    st = st_fail(err, ST_ERR_INVALID_ARG, "run_id=%lld is not in database '%s'", (long long)run_id, db->path);
  return st;
}

static void read_run(sqlite3_stmt *s, st_run_row *out) {
  memset(out, 0, sizeof *out);
  out->id = sqlite3_column_int64(s, 0);
  col_text(s, 1, out->kind, sizeof out->kind);
  col_text(s, 2, out->op, sizeof out->op);
  col_text(s, 3, out->suite, sizeof out->suite);
  out->device_id = sqlite3_column_int64(s, 4);
  col_text(s, 5, out->device_name, sizeof out->device_name);
  col_text(s, 6, out->arch, sizeof out->arch);
  col_text(s, 7, out->status, sizeof out->status);
  col_text(s, 8, out->started, sizeof out->started);
  col_text(s, 9, out->finished, sizeof out->finished);
  col_text(s, 10, out->args, sizeof out->args);
  col_text(s, 11, out->tool_version, sizeof out->tool_version);
}

st_status st_db_get_run(st_db *db, int64_t run_id, st_run_row *out, int *found, st_err *err) {
  if (!db || !out || !found) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_get_run: NULL argument");
  memset(out, 0, sizeof *out);
  *found = 0;
  sqlite3_stmt *s = NULL;
  st_status st = query(db, Q_GET_RUN, "st_db_get_run", &s, err, "l", run_id);
  if (st != ST_OK) return st;
  st = step_row(db, s, "st_db_get_run", found, err);
  if (st == ST_OK && *found) {
    read_run(s, out);
    stmt_done(s);
  }
  return st;
}

st_status st_db_each_run(st_db *db, int limit, int (*cb)(void *ctx, const st_run_row *r), void *ctx, st_err *err) {
  if (!db || !cb) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_each_run: NULL argument");
  sqlite3_stmt *s = NULL;
  st_status st = prepare_fresh(db, SQL_EACH_RUN, &s, err);
  if (st != ST_OK) return st;
  if (bind(s, "i", limit > 0 ? limit : -1) != SQLITE_OK) st = db_fail(db, err, "st_db_each_run");
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

st_status st_db_run_counts(st_db *db, int64_t run_id, st_run_counts *out, st_err *err) {
  if (!db || !out) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_run_counts: NULL argument");
  memset(out, 0, sizeof *out);
  sqlite3_stmt *s = NULL;
  st_status st = query(db, Q_RUN_COUNTS, "st_db_run_counts", &s, err, "l", run_id);
  if (st != ST_OK) return st;
  int found = 0;
  st = step_row(db, s, "st_db_run_counts", &found, err);
  if (st == ST_OK && found) {
    out->ok = sqlite3_column_int64(s, 0);
    out->wrong = sqlite3_column_int64(s, 1);
    out->failed = sqlite3_column_int64(s, 2);
    out->pruned = sqlite3_column_int64(s, 3);
    stmt_done(s);
  }
  return st;
}

/* ---- measurements ----------------------------------------------------------------------- */

static int is_measurement_status(const char *s) {
  return !strcmp(s, "ok") || !strcmp(s, "wrong") || !strcmp(s, "failed") || !strcmp(s, "pruned");
}

static st_status check_measurement(const st_measurement *m, st_err *err) {
  st_status st = check_str(m->variant_id, sizeof m->variant_id, "measurement variant_id", 0, err);
  if (st == ST_OK) st = check_str(m->shape_key, sizeof m->shape_key, "measurement shape_key", 0, err);
  if (st == ST_OK) st = check_str(m->status, sizeof m->status, "measurement status", 0, err);
  if (st == ST_OK && !is_measurement_status(m->status))
    st = st_fail(err, ST_ERR_INVALID_ARG, "measurement status='%s' is not ok, wrong, failed or pruned", m->status);
  if (st == ST_OK) st = check_str(m->error, sizeof m->error, "measurement error", 1, err);
  if (st == ST_OK) st = check_str(m->samples, sizeof m->samples, "measurement samples", 1, err);
  /* Regression reports divide by these: an "ok" timing must be a real one. */
  if (st == ST_OK && !strcmp(m->status, "ok") && !(isfinite(m->median_us) && m->median_us > 0))
    st = st_fail(err, ST_ERR_INVALID_ARG, "measurement median_us=%g of an 'ok' timing is not a positive number",
                 m->median_us);
  if (st == ST_OK && !strcmp(m->status, "ok") && !(isfinite(m->spread) && m->spread >= 0))
    st = st_fail(err, ST_ERR_INVALID_ARG, "measurement spread=%g of an 'ok' timing is not >= 0", m->spread);
  return st;
}

st_status st_db_put_measurement(st_db *db, const st_measurement *m, st_err *err) {
  if (!db || !m) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_put_measurement: NULL argument");
  st_status st = check_writable(db, "st_db_put_measurement", err);
  if (st == ST_OK) st = check_measurement(m, err);
  sqlite3_stmt *s = NULL;
  if (st == ST_OK) st = get_stmt(db, Q_PUT_MEASUREMENT, &s, err);
  if (st != ST_OK) return st;
  char what[128];
  snprintf(what, sizeof what, "st_db_put_measurement(run_id=%lld, variant_id=%s)", (long long)m->run_id, m->variant_id);
  if (bind(s, "lttttddddiidt", m->run_id, m->variant_id, m->shape_key, m->status, m->error, m->median_us, m->min_us,
           m->max_us, m->spread, m->reps, m->iters, m->max_err, m->samples) != SQLITE_OK) {
    st = db_fail(db, err, what);
    stmt_done(s);
    return st;
  }
  return step_write(db, s, what, NULL, err);
}

st_status st_db_has_measurement(st_db *db, int64_t run_id, const char *variant_id, const char *shape_key, int *found,
                                st_err *err) {
  if (!db || !variant_id || !shape_key || !found)
    return st_fail(err, ST_ERR_INVALID_ARG, "st_db_has_measurement: NULL argument");
  *found = 0;
  sqlite3_stmt *s = NULL;
  st_status st = query(db, Q_HAS_MEASUREMENT, "st_db_has_measurement", &s, err, "ltt", run_id, variant_id, shape_key);
  if (st != ST_OK) return st;
  st = step_row(db, s, "st_db_has_measurement", found, err);
  if (st == ST_OK && *found) stmt_done(s);
  return st;
}

st_status st_db_each_measurement(st_db *db, int64_t run_id,
                                 int (*cb)(void *ctx, const st_measurement *m, const char *variant_name,
                                           const char *op),
                                 void *ctx, st_err *err) {
  if (!db || !cb) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_each_measurement: NULL argument");
  sqlite3_stmt *s = NULL;
  st_status st = prepare_fresh(db, SQL_EACH_MEASUREMENT, &s, err);
  if (st != ST_OK) return st;
  if (bind(s, "l", run_id) != SQLITE_OK) st = db_fail(db, err, "st_db_each_measurement");
  int rc = SQLITE_DONE;
  while (st == ST_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    st_measurement m;
    memset(&m, 0, sizeof m);
    m.run_id = sqlite3_column_int64(s, 0);
    col_text(s, 1, m.variant_id, sizeof m.variant_id);
    col_text(s, 2, m.shape_key, sizeof m.shape_key);
    col_text(s, 3, m.status, sizeof m.status);
    col_text(s, 4, m.error, sizeof m.error);
    m.median_us = sqlite3_column_double(s, 5);
    m.min_us = sqlite3_column_double(s, 6);
    m.max_us = sqlite3_column_double(s, 7);
    m.spread = sqlite3_column_double(s, 8);
    m.reps = sqlite3_column_int(s, 9);
    m.iters = sqlite3_column_int(s, 10);
    m.max_err = sqlite3_column_double(s, 11);
    col_text(s, 12, m.samples, sizeof m.samples);
    char name[160], op[32];
    col_text(s, 13, name, sizeof name);
    col_text(s, 14, op, sizeof op);
    if (cb(ctx, &m, name, op) != 0) break;
  }
  if (st == ST_OK && rc != SQLITE_ROW && rc != SQLITE_DONE) st = db_fail(db, err, "st_db_each_measurement");
  sqlite3_finalize(s);
  return st;
}

/* ---- winners ---------------------------------------------------------------------------- */

st_status st_db_put_winner(st_db *db, const st_winner_row *w, st_err *err) {
  if (!db || !w) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_put_winner: NULL argument");
  st_status st = check_writable(db, "st_db_put_winner", err);
  if (st == ST_OK) st = check_str(w->op, sizeof w->op, "winner op", 0, err);
  if (st == ST_OK) st = check_str(w->dispatch_key, sizeof w->dispatch_key, "winner dispatch_key", 0, err);
  if (st == ST_OK) st = check_str(w->variant_id, sizeof w->variant_id, "winner variant_id", 0, err);
  if (st == ST_OK)
    st = check_str(w->default_variant_id, sizeof w->default_variant_id, "winner default_variant_id", 1, err);
  if (st == ST_OK && !(isfinite(w->median_us) && w->median_us > 0))
    st = st_fail(err, ST_ERR_INVALID_ARG, "winner median_us=%g is not a positive number", w->median_us);
  const char *json = NULL;
  if (st == ST_OK) st = params_json(db, &w->dispatch, 0, "winner dispatch parameters", &json, err);
  sqlite3_stmt *s = NULL;
  if (st == ST_OK) st = get_stmt(db, Q_PUT_WINNER, &s, err);
  if (st != ST_OK) return st;
  char what[160];
  snprintf(what, sizeof what, "st_db_put_winner(device_id=%lld, variant_id=%s, run_id=%lld)", (long long)w->device_id,
           w->variant_id, (long long)w->run_id);
  if (bind(s, "lttttlddnd", w->device_id, w->op, w->dispatch_key, json, w->variant_id, w->run_id, w->median_us,
           w->regret, w->default_variant_id, w->default_us) != SQLITE_OK) {
    st = db_fail(db, err, what);
    stmt_done(s);
    return st;
  }
  return step_write(db, s, what, NULL, err);
}

st_status st_db_each_winner(st_db *db, const char *device_name, const char *arch,
                            int (*cb)(void *ctx, const st_winner_row *w), void *ctx, st_err *err) {
  if (!db || !device_name || !cb) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_each_winner: NULL argument");
  sqlite3_stmt *s = NULL;
  st_status st = prepare_fresh(db, SQL_EACH_WINNER, &s, err);
  if (st != ST_OK) return st;
  if (bind(s, "tn", device_name, arch) != SQLITE_OK) st = db_fail(db, err, "st_db_each_winner");
  int rc = SQLITE_DONE;
  while (st == ST_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    st_winner_row w;
    memset(&w, 0, sizeof w);
    w.device_id = sqlite3_column_int64(s, 0);
    col_text(s, 1, w.op, sizeof w.op);
    col_text(s, 2, w.dispatch_key, sizeof w.dispatch_key);
    col_text(s, 4, w.variant_id, sizeof w.variant_id);
    col_text(s, 5, w.variant_name, sizeof w.variant_name);
    w.run_id = sqlite3_column_int64(s, 6);
    w.median_us = sqlite3_column_double(s, 7);
    w.regret = sqlite3_column_double(s, 8);
    col_text(s, 9, w.default_variant_id, sizeof w.default_variant_id);
    w.default_us = sqlite3_column_double(s, 10);
    char what[400];
    snprintf(what, sizeof what, "dispatch parameters of winner %s/%s", w.op, w.dispatch_key);
    st = params_parse(db, (const char *)sqlite3_column_text(s, 3), what, &w.dispatch, err);
    if (st == ST_OK && cb(ctx, &w) != 0) break;
  }
  if (st == ST_OK && rc != SQLITE_ROW && rc != SQLITE_DONE) st = db_fail(db, err, "st_db_each_winner");
  sqlite3_finalize(s);
  return st;
}
