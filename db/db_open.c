/* db_open.c - opening a database: deciding, without writing anything,
 * whether a file may be used (header, identity, schema, integrity), and the
 * read-only open the runtime makes. The read-write open (db_write.c) runs
 * the same inspection first.
 *
 * Opening never writes a file that is not ours: the file is first inspected
 * through a read-only connection (header magic, application_id, schema
 * objects, user_version, quick_check); only a file that passed is reopened
 * read-write, and only then are WAL and other pragmas set. Read-only handles
 * keep the inspection connection, so they never open the file for writing. */
#include "db_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "path.h"
#include "schema_check.h"

static const char SQLITE_MAGIC[16] = "SQLite format 3";

static int db_path_exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

/* Checks the first bytes without SQLite: the magic string and an
 * application_id that is not ours are decided here, so that such a file is
 * never opened by SQLite at all. (user_version and a zero application_id are
 * left to SQLite: a WAL may hold newer values than the main file's header.) */
static st_status db_inspect_header(const char *path, long long size, int *wal_mode, st_err *err) {
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

st_status db_classify_read_error(sqlite3 *conn, const char *path, st_err *err) {
  int rc = sqlite3_extended_errcode(conn) & 0xff;
  if (rc == SQLITE_NOTADB)
    return st_fail(err, ST_ERR_DB, "'%s' is not an SQLite database or its header is damaged (%s); refusing to use it",
                   path, sqlite3_errmsg(conn));
  if (rc == SQLITE_CORRUPT)
    return st_fail(err, ST_ERR_DB, "database '%s' is corrupt (%s); refusing to use it", path, sqlite3_errmsg(conn));
  return db_conn_fail(conn, path, err, "reading the header");
}

/* application_id, user_version and the number of schema objects, read in
 * one statement so they come from one snapshot (a migration committing in
 * between would otherwise show tables without the application_id). */
int db_read_identity(sqlite3 *conn, int64_t *app, int64_t *ver, int64_t *objects) {
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
static st_status db_check_identity(const char *path, int64_t app, int64_t ver, int64_t objects, st_err *err) {
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
static st_status db_inspect_conn(sqlite3 *conn, const char *path, st_db_mode mode, file_kind *kind, int *version,
                                 st_err *err) {
  int64_t app = 0, ver = 0, objects = 0;
  if (db_read_identity(conn, &app, &ver, &objects) != SQLITE_OK) return db_classify_read_error(conn, path, err);
  st_status st = db_check_identity(path, app, ver, objects, err);
  if (st != ST_OK) return st;

  sqlite3_stmt *s = NULL;
  int rc = sqlite3_prepare_v2(conn, "PRAGMA quick_check(1)", -1, &s, NULL);
  if (rc == SQLITE_OK) rc = sqlite3_step(s);
  if (rc != SQLITE_ROW) {
    st = db_classify_read_error(conn, path, err);
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
  /* A read-only handle never migrates. It reads one version back as it is
   * (a runtime upgraded beside a database exported by the version before
   * keeps working; the readers supply what that version lacks: runs.env,
   * db_read.c), and refuses anything older. */
  if (ver < ST_DB_SCHEMA_VERSION - 1 && mode == ST_DB_READONLY)
    return st_fail(err, ST_ERR_DB,
                   "database '%s' has schema version %lld, older than this build's %d reads; run a "
                   "`sparsetune` command that writes to it (generate, compile or tune) once to migrate it",
                   path, (long long)ver, ST_DB_SCHEMA_VERSION);
  if ((st = st_db_check_schema(conn, path, (int)ver, err)) != ST_OK) return st;
  *kind = FILE_OURS;
  *version = (int)ver;
  return ST_OK;
}

static int db_has_wal_file(const char *path) {
  char wal[4096 + 8];
  snprintf(wal, sizeof wal, "%s-wal", path);
  return db_path_exists(wal);
}

/* Whether this process may create files in the folder holding `path`. */
static int db_folder_writable(const char *path) {
  char dir[4096 + 8];
  return st_path_folder(path, dir, sizeof dir) == 0 && access(dir, W_OK) == 0;
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
st_status db_open_reader(const char *path, int immutable, sqlite3 **out, st_err *err) {
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
    st_status st = *out ? db_conn_fail(*out, path, err, "opening read-only")
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
st_status db_probe_file(const char *path, st_db_mode mode, file_kind *kind, int *wal_mode, st_err *err) {
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
  return db_inspect_header(path, (long long)sb.st_size, wal_mode, err);
}

/* The identity alone, through a connection that creates nothing beside the
 * file, so that a file of another application is refused untouched. */
st_status db_check_identity_untouched(const char *path, int wal_mode, st_err *err) {
  sqlite3 *conn = NULL;
  int64_t app = 0, ver = 0, objects = 0;
  st_status st = db_open_reader(path, wal_mode && !db_has_wal_file(path), &conn, err);
  if (st != ST_OK) return st;
  if (db_read_identity(conn, &app, &ver, &objects) != SQLITE_OK)
    st = db_classify_read_error(conn, path, err);
  else
    st = db_check_identity(path, app, ver, objects, err);
  sqlite3_close_v2(conn);
  return st;
}

/* The whole inspection of a file that passed the identity check, through
 * the reading connection db->conn (kept by read-only handles). A read-write
 * open holds the writer lock here. */
st_status db_inspect(st_db *db, file_kind *kind, st_err *err) {
  int wal_mode = 0;
  st_status st = db_probe_file(db->path, db->mode, kind, &wal_mode, err);
  if (st != ST_OK || *kind == FILE_NEW) return st;
  /* Inspected untouched where that is safe for the length of a check; a
   * read-only handle then keeps a connection that notices writers, unless
   * no writer can start (open_reader). */
  const int untouched = wal_mode && !db_has_wal_file(db->path);
  db->immutable = untouched && (db->mode == ST_DB_READWRITE || !db_folder_writable(db->path));
  st = db_open_reader(db->path, untouched, &db->conn, err);
  if (st == ST_OK) st = db_inspect_conn(db->conn, db->path, db->mode, kind, &db->version, err);
  if (st == ST_OK && untouched && !db->immutable) {
    sqlite3_close_v2(db->conn);
    db->conn = NULL;
    st = db_open_reader(db->path, 0, &db->conn, err);
  }
  return st;
}

/* Why a read-only open of a WAL-mode file failed, where SQLite's own words
 * ("unable to open database file") would not say: a log left behind by a
 * writer that did not finish needs a -shm, which cannot be made here. */
st_status db_explain_left_wal(const char *path, st_status st, st_err *err) {
  if (st != ST_ERR_DB || !db_has_wal_file(path) || db_folder_writable(path)) return st;
  return st_fail(err, ST_ERR_DB,
                 "database '%s' has a write-ahead log ('%s-wal') that a writer left behind, and its folder cannot be "
                 "written, so it cannot be read safely; run a sparsetune command that writes to it once where it "
                 "can be written (that folds the log in), then deploy it",
                 path, path);
}

st_status db_alloc(const char *fn, const char *path, st_db_mode mode, st_db **out, st_err *err) {
  if (!out) return st_fail(err, ST_ERR_INVALID_ARG, "%s: out is NULL", fn);
  *out = NULL;
  if (!path || !*path) return st_fail(err, ST_ERR_INVALID_ARG, "%s: path is NULL or empty", fn);
  if (strlen(path) > 4096) return st_fail(err, ST_ERR_INVALID_ARG, "%s: path is longer than 4096 bytes", fn);
  size_t len = strlen(path);
  st_db *db = calloc(1, sizeof *db + len + 1);
  if (!db) return st_fail(err, ST_ERR_NOMEM, "%s: out of memory", fn);
  memcpy(db->path, path, len + 1);
  db->mode = mode;
  db->lock = ST_WRITER_LOCK_NONE;
  *out = db;
  return ST_OK;
}

st_status st_db_open_readonly(const char *path, st_db **out, st_err *err) {
  if (!out) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_open_readonly: out is NULL");
  *out = NULL;
  st_db *db = NULL;
  st_status st = db_alloc("st_db_open_readonly", path, ST_DB_READONLY, &db, err);
  if (st != ST_OK) return st;
  /* Whose file it is comes first, through a connection that creates
   * nothing beside it. */
  file_kind kind = FILE_NEW;
  int wal_mode = 0;
  st = db_probe_file(db->path, ST_DB_READONLY, &kind, &wal_mode, err);
  if (st == ST_OK) st = db_check_identity_untouched(db->path, wal_mode, err);
  if (st == ST_OK) st = db_inspect(db, &kind, err);
  if (st == ST_OK)
    st = db_exec_sql(db->conn, db->path, "PRAGMA query_only = ON", "making the connection read-only", err);
  if (st != ST_OK) {
    if (wal_mode) st = db_explain_left_wal(db->path, st, err);
    st_db_close(db);
    return st;
  }
  *out = db;
  return ST_OK;
}
