/* db_internal.h - what the files of the database module share, and
 * nothing its users see: the handle, the statements it keeps, and the
 * helpers around SQLite.
 *
 * The module is two libraries: the reader (db_handle.c, db_open.c,
 * db_read.c, schema_check.c, cubin_blob.c: everything a read-only handle
 * needs, linked into libsparsetune) and the writer (db_write.c, writer_lock.c, the
 * migrations, and the export: db_export.c, export_mark.c; the tuner only). The reader knows of writing only through
 * the two hooks a read-write handle carries. */
#ifndef ST_DB_INTERNAL_H
#define ST_DB_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "st_db_write.h"
#include "writer_lock.h"

#define ST_DB_BUSY_TIMEOUT_MS 10000
/* Room for any st_params as canonical JSON: every byte escaped as \u00XX. */
#define ST_DB_PARAMS_JSON_MAX (2 + ST_PARAMS_MAX * (6 * ST_PARAM_KEY_MAX + 6 * ST_PARAM_VAL_MAX + 8))
#define SQL_NOW "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"

/* The statements a handle keeps prepared (point queries and writes); each
 * file holds the text of its own. */
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
  Q_SHAPE_PEER,
  Q_PUT_WINNER,
  Q_COUNT
} query_id;

/* What inspection found a path to be. */
typedef enum file_kind { FILE_NEW, FILE_EMPTY, FILE_OURS } file_kind;

struct st_db {
  sqlite3 *conn;       /* NULL while detached                              */
  st_db_mode mode;
  int immutable;       /* read with immutable=1 (db_open_reader says when) */
  st_writer_lock lock; /* held by read-write handles                       */
  /* A read-write handle's close and reconnect (db_write.c); NULL for a
   * read-only one. */
  void (*close_writer)(st_db *db);
  st_status (*reconnect_writer)(st_db *db, st_err *err);
  int version;
  int in_tx;
  sqlite3_stmt *stmt[Q_COUNT];
  char json[2][ST_DB_PARAMS_JSON_MAX]; /* scratch for st_params_to_json */
  char path[];
};

/* ---- helpers (db_handle.c) ---- */

/* An SQLite failure on `conn`, naming the file and what was being done. Call
 * it before anything else touches `conn` (a rollback would reset the text). */
st_status db_conn_fail(sqlite3 *conn, const char *path, st_err *err, const char *what);
st_status db_fail(const st_db *db, st_err *err, const char *what);
/* A NUL-terminated string of at most cap-1 bytes (`cap` = the struct field). */
st_status db_check_str(const char *s, size_t cap, const char *name, int allow_empty, st_err *err);
st_status db_check_writable(const st_db *db, const char *fn, st_err *err);
/* Between st_db_detach and st_db_attach the handle has no connection. */
st_status db_check_attached(const st_db *db, st_err *err);
/* Statement q of the handle, prepared from `sql` on first use. */
st_status db_get_stmt(st_db *db, query_id q, const char *sql, sqlite3_stmt **out, st_err *err);
st_status db_prepare_fresh(st_db *db, const char *sql, sqlite3_stmt **out, st_err *err);
/* Returns a kept statement to its initial state. */
void db_stmt_done(sqlite3_stmt *s);
/* Binds parameters 1..n by type letters: 't' text, 'n' text or NULL when
 * NULL/empty, 'i' int, 'l' int64_t, 'd' double, 'b' blob (pointer, size_t;
 * NULL when empty). Values are bound SQLITE_STATIC: they must outlive the
 * step. Returns the first failing SQLite code. */
int db_vbind(sqlite3_stmt *s, const char *types, va_list ap);
int db_bind(sqlite3_stmt *s, const char *types, ...);
/* Statement q (text `sql`) with its parameters bound (db_vbind's letters);
 * on failure nothing stays bound and the message names `what`. */
st_status db_vquery(st_db *db, query_id q, const char *sql, const char *what, sqlite3_stmt **out, st_err *err,
                    const char *types, va_list ap);
void db_col_text(sqlite3_stmt *s, int col, char *dst, size_t cap);
/* Steps a write to completion (the first column of a RETURNING row to
 * *returned when not NULL). */
st_status db_step_write(st_db *db, sqlite3_stmt *s, const char *what, int64_t *returned, st_err *err);
/* Steps a point query: *found = 1 with the statement on the row (read it,
 * then db_stmt_done), or *found = 0 with it reset. */
st_status db_step_row(st_db *db, sqlite3_stmt *s, const char *what, int *found, st_err *err);
st_status db_exec_sql(sqlite3 *conn, const char *path, const char *sql, const char *what, st_err *err);
/* A query whose first row's first column is an integer. */
int db_query_int(sqlite3 *conn, const char *sql, int64_t *out);
/* Canonical JSON of `ps` into scratch buffer `slot` of the handle. */
st_status db_params_json(st_db *db, const st_params *ps, int slot, const char *name, const char **out, st_err *err);
/* A stored JSON object back into `out`. */
st_status db_params_parse(st_db *db, const char *json, const char *what, st_params *out, st_err *err);
/* Ends the transaction and the kept statements; the connection stays. */
void db_finalize(st_db *db);
/* Ends the connection, if any; the handle stays. */
void db_disconnect(st_db *db);

/* ---- opening (db_open.c) ---- */

/* A handle for `path` with no connection; `fn` names the caller in
 * messages. */
st_status db_alloc(const char *fn, const char *path, st_db_mode mode, st_db **out, st_err *err);
/* The file before SQLite opens it: FILE_NEW (absent or empty, read-write
 * only) or FILE_OURS until inspection says more; *wal_mode from its header. */
st_status db_probe_file(const char *path, st_db_mode mode, file_kind *kind, int *wal_mode, st_err *err);
/* The identity alone, through a connection that creates nothing beside the
 * file. */
st_status db_check_identity_untouched(const char *path, int wal_mode, st_err *err);
/* The whole inspection, leaving the reading connection in db->conn. */
st_status db_inspect(st_db *db, file_kind *kind, st_err *err);
/* A read-only connection (immutable=1 when asked: see db_open.c). */
st_status db_open_reader(const char *path, int immutable, sqlite3 **out, st_err *err);
int db_read_identity(sqlite3 *conn, int64_t *app, int64_t *ver, int64_t *objects);
st_status db_classify_read_error(sqlite3 *conn, const char *path, st_err *err);
/* Why a read-only open of a WAL-mode file failed, where a log was left. */
st_status db_explain_left_wal(const char *path, st_status st, st_err *err);

/* ---- runs (db_read.c) ---- */
st_status db_check_run_keys(const st_run_row *r, st_err *err);
int db_is_run_status(const char *s);

#endif
