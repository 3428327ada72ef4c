/* db_handle.c - the database handle's life (close, detach, attach,
 * transactions) and the helpers every file of the module uses around
 * SQLite: statements, binding, stepping, messages, parameter sets as JSON. */
#include "db_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const SQL_JSON_EACH = "SELECT key, value FROM json_each(?1)";

/* An SQLite failure on `conn`, naming the file and what was being done. Call
 * it before anything else touches `conn` (a rollback would reset the text). */
st_status db_conn_fail(sqlite3 *conn, const char *path, st_err *err, const char *what) {
  return st_fail(err, ST_ERR_DB, "database '%s': %s: %s (%s)", path, what, sqlite3_errmsg(conn),
                 sqlite3_errstr(sqlite3_extended_errcode(conn)));
}

st_status db_fail(const st_db *db, st_err *err, const char *what) {
  return db_conn_fail(db->conn, db->path, err, what);
}

/* A NUL-terminated string of at most cap-1 bytes (`cap` = the struct field). */
st_status db_check_str(const char *s, size_t cap, const char *name, int allow_empty, st_err *err) {
  if (!s) return st_fail(err, ST_ERR_INVALID_ARG, "%s is NULL", name);
  size_t n = strnlen(s, cap);
  if (n == cap) return st_fail(err, ST_ERR_INVALID_ARG, "%s is not NUL-terminated within %zu bytes", name, cap);
  if (n == 0 && !allow_empty) return st_fail(err, ST_ERR_INVALID_ARG, "%s is empty", name);
  return ST_OK;
}

st_status db_check_writable(const st_db *db, const char *fn, st_err *err) {
  if (db->mode != ST_DB_READWRITE)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s: database '%s' was opened read-only", fn, db->path);
  return ST_OK;
}

/* Between st_db_detach and st_db_attach the handle has no connection. */
st_status db_check_attached(const st_db *db, st_err *err) {
  if (!db->conn)
    return st_fail(err, ST_ERR_INVALID_ARG, "database '%s' is detached (st_db_detach): attach it first", db->path);
  return ST_OK;
}

st_status db_get_stmt(st_db *db, query_id q, const char *sql, sqlite3_stmt **out, st_err *err) {
  st_status st = db_check_attached(db, err);
  if (st != ST_OK) return st;
  if (!db->stmt[q]) {
    int rc = sqlite3_prepare_v3(db->conn, sql, -1, SQLITE_PREPARE_PERSISTENT, &db->stmt[q], NULL);
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

st_status db_prepare_fresh(st_db *db, const char *sql, sqlite3_stmt **out, st_err *err) {
  *out = NULL;
  if (db_check_attached(db, err) != ST_OK) return ST_ERR_INVALID_ARG;
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
void db_stmt_done(sqlite3_stmt *s) {
  (void)sqlite3_reset(s);
  (void)sqlite3_clear_bindings(s);
}

/* Binds parameters 1..n by type letters: 't' text, 'n' text or NULL when
 * NULL/empty, 'i' int, 'l' int64_t, 'd' double, 'b' blob (pointer, size_t;
 * NULL when empty). Values are bound SQLITE_STATIC: they must outlive the
 * step. Returns the first failing SQLite code. */
int db_vbind(sqlite3_stmt *s, const char *types, va_list ap) {
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

int db_bind(sqlite3_stmt *s, const char *types, ...) {
  va_list ap;
  va_start(ap, types);
  const int rc = db_vbind(s, types, ap);
  va_end(ap);
  return rc;
}

/* The prepared statement of query q with its parameters bound (vbind's type
 * letters); on failure nothing stays bound and the message names `what`. */
st_status db_vquery(st_db *db, query_id q, const char *sql, const char *what, sqlite3_stmt **out, st_err *err,
                    const char *types, va_list ap) {
  sqlite3_stmt *s = NULL;
  st_status st = db_get_stmt(db, q, sql, &s, err);
  if (st != ST_OK) return st;
  const int rc = db_vbind(s, types, ap);
  if (rc != SQLITE_OK) {
    st = db_fail(db, err, what);
    db_stmt_done(s);
    return st;
  }
  *out = s;
  return ST_OK;
}

void db_col_text(sqlite3_stmt *s, int col, char *dst, size_t cap) {
  const unsigned char *t = sqlite3_column_text(s, col);
  snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

/* Steps a write statement to completion (RETURNING rows are drained; the
 * first column of the first row goes to *returned when not NULL). */
st_status db_step_write(st_db *db, sqlite3_stmt *s, const char *what, int64_t *returned, st_err *err) {
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW)
    if (returned) *returned = sqlite3_column_int64(s, 0);
  st_status st = rc == SQLITE_DONE ? ST_OK : db_fail(db, err, what);
  db_stmt_done(s);
  return st;
}

/* Steps a point query: *found = 1 and the statement left on the row (caller
 * reads it, then stmt_done), or *found = 0 and the statement reset. */
st_status db_step_row(st_db *db, sqlite3_stmt *s, const char *what, int *found, st_err *err) {
  int rc = sqlite3_step(s);
  *found = rc == SQLITE_ROW;
  if (rc == SQLITE_ROW) return ST_OK;
  st_status st = rc == SQLITE_DONE ? ST_OK : db_fail(db, err, what);
  db_stmt_done(s);
  return st;
}

st_status db_exec_sql(sqlite3 *conn, const char *path, const char *sql, const char *what, st_err *err) {
  char *msg = NULL;
  int rc = sqlite3_exec(conn, sql, NULL, NULL, &msg);
  if (rc == SQLITE_OK) return ST_OK;
  st_status st = st_fail(err, ST_ERR_DB, "database '%s': %s: %s (%s)", path, what, msg ? msg : sqlite3_errmsg(conn),
                         sqlite3_errstr(rc));
  sqlite3_free(msg);
  return st;
}

/* Runs a query whose first row's first column is an integer. */
int db_query_int(sqlite3 *conn, const char *sql, int64_t *out) {
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
st_status db_params_json(st_db *db, const st_params *ps, int slot, const char *name, const char **out, st_err *err) {
  if (!ps) return st_fail(err, ST_ERR_INVALID_ARG, "%s is NULL", name);
  if (ps->n < 0 || ps->n > ST_PARAMS_MAX)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s has n=%d parameters, outside 0..%d", name, ps->n, ST_PARAMS_MAX);
  if (st_params_to_json(ps, db->json[slot], sizeof db->json[slot]) < 0)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s does not fit %d bytes of JSON", name, ST_DB_PARAMS_JSON_MAX);
  *out = db->json[slot];
  return ST_OK;
}

/* Parses a stored JSON object back into `out` (the reverse of params_json). */
st_status db_params_parse(st_db *db, const char *json, const char *what, st_params *out, st_err *err) {
  memset(out, 0, sizeof *out);
  sqlite3_stmt *s = NULL;
  st_status st = db_get_stmt(db, Q_JSON_EACH, SQL_JSON_EACH, &s, err);
  if (st == ST_OK && db_bind(s, "t", json ? json : "{}") != SQLITE_OK) {
    st = db_fail(db, err, what);
    db_stmt_done(s);
  }
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
  db_stmt_done(s);
  return st;
}

/* ---- the handle's life ---------------------------------------------------- */

/* Ends the handle's transaction and statements; the connection stays. */
void db_finalize(st_db *db) {
  if (!db->conn) return;
  if (db->in_tx) (void)sqlite3_exec(db->conn, "ROLLBACK", NULL, NULL, NULL);
  db->in_tx = 0;
  for (int i = 0; i < Q_COUNT; i++) {
    sqlite3_finalize(db->stmt[i]);
    db->stmt[i] = NULL;
  }
}

void db_disconnect(st_db *db) {
  if (!db->conn) return;
  db_finalize(db);
  /* Every statement is finalized, so close cannot be busy; close_v2 still
   * frees the connection when it somehow is. */
  if (sqlite3_close(db->conn) != SQLITE_OK) (void)sqlite3_close_v2(db->conn);
  db->conn = NULL;
}

void st_db_close(st_db *db) {
  if (!db) return;
  if (db->close_writer)
    db->close_writer(db);
  else
    db_disconnect(db);
  free(db);
}

st_status st_db_detach(st_db *db, st_err *err) {
  if (!db) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_detach: db is NULL");
  if (db->in_tx) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_detach: a transaction is open");
  db_disconnect(db);
  return ST_OK;
}

st_status st_db_attach(st_db *db, st_err *err) {
  if (!db) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_attach: db is NULL");
  if (db->conn) return ST_OK;
  st_status st = ST_OK;
  if (db->reconnect_writer)
    st = db->reconnect_writer(db, err);
  else
    st = db_open_reader(db->path, db->immutable, &db->conn, err);
  if (st == ST_OK && !db->reconnect_writer)
    st = db_exec_sql(db->conn, db->path, "PRAGMA query_only = ON", "making the connection read-only", err);
  if (st != ST_OK) db_disconnect(db);
  return st;
}

int st_db_schema_version(const st_db *db) { return db ? db->version : 0; }

/* ---- transactions ------------------------------------------------------------ */

st_status st_db_begin(st_db *db, st_err *err) {
  if (!db) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_begin: db is NULL");
  if (db->in_tx) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_begin: a transaction is already open (no nesting)");
  if (db_check_attached(db, err) != ST_OK) return ST_ERR_INVALID_ARG;
  /* Read-only handles get a read transaction: one snapshot for many reads. */
  const char *sql = db->mode == ST_DB_READWRITE ? "BEGIN IMMEDIATE" : "BEGIN";
  st_status st = db_exec_sql(db->conn, db->path, sql, "st_db_begin", err);
  if (st == ST_OK) db->in_tx = 1;
  return st;
}

st_status st_db_commit(st_db *db, st_err *err) {
  if (!db) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_commit: db is NULL");
  if (!db->in_tx) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_commit: no transaction is open");
  st_status st = db_exec_sql(db->conn, db->path, "COMMIT", "st_db_commit", err);
  if (st != ST_OK && !sqlite3_get_autocommit(db->conn)) (void)sqlite3_exec(db->conn, "ROLLBACK", NULL, NULL, NULL);
  db->in_tx = 0;
  return st;
}

void st_db_rollback(st_db *db) {
  if (!db || !db->in_tx) return;
  if (!sqlite3_get_autocommit(db->conn)) (void)sqlite3_exec(db->conn, "ROLLBACK", NULL, NULL, NULL);
  db->in_tx = 0;
}
