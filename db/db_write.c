/* db_write.c - what writes a database, for the tuner only: the read-write
 * open (one writer per database, WAL while writing, migrations), leaving the
 * file self-contained at close, and every insert and update. The runtime
 * library does not link this file. */
#include "db_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cubin_blob.h"
#include "st_db_export.h"
#include "st_db_migrations.h"

#define VARIANT_COLUMNS "id, op, name, source_hash, kernel_params, launch_params, is_default"

/* Statements kept prepared for the life of the handle. */

static const char *const SQL[Q_COUNT] = {
    [Q_PUT_DEVICE] =
        "INSERT INTO devices (uuid, name, arch, cc_major, cc_minor, sm_count, mem_bytes, l2_bytes, "
        "driver_version, first_seen, last_seen) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, " SQL_NOW ", " SQL_NOW
        ") ON CONFLICT (uuid) DO UPDATE SET name = excluded.name, arch = excluded.arch, "
        "cc_major = excluded.cc_major, cc_minor = excluded.cc_minor, sm_count = excluded.sm_count, "
        "mem_bytes = excluded.mem_bytes, l2_bytes = excluded.l2_bytes, driver_version = excluded.driver_version, "
        "last_seen = excluded.last_seen RETURNING id",
    [Q_PUT_SOURCE] = "INSERT OR IGNORE INTO sources (hash, op, kernel_params, text, created) "
                     "VALUES (?1, ?2, ?3, ?4, " SQL_NOW ")",
    [Q_PUT_VARIANT] = "INSERT OR IGNORE INTO variants (" VARIANT_COLUMNS ", created) "
                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, " SQL_NOW ")",
    /* One source, target and compiler make one cubin: the first stored
     * stays, and storing it again changes nothing. */
    [Q_PUT_BINARY] = "INSERT INTO binaries (source_hash, arch, compiler, ok, cubin, registers, "
                     "spill_bytes, shared_bytes, local_bytes, compile_ms, log, created) "
                     "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, " SQL_NOW ") "
                     "ON CONFLICT (source_hash, arch, compiler) DO NOTHING",
    [Q_PUT_SHAPE] = "INSERT INTO shapes (op, key, params, dispatch_key) VALUES (?1, ?2, ?3, ?4) "
                    "ON CONFLICT (op, key) DO UPDATE SET params = excluded.params, "
                    "dispatch_key = excluded.dispatch_key",
    [Q_RUN_BEGIN] = "INSERT INTO runs (kind, op, suite, device_id, status, started, args, tool_version, env) "
                    "VALUES (?1, ?2, ?3, ?4, coalesce(nullif(?5, ''), 'running'), "
                    "coalesce(nullif(?6, ''), " SQL_NOW "), ?7, ?8, coalesce(nullif(?9, ''), '{}'))",
    [Q_RUN_FINISH] = "UPDATE runs SET status = ?2, "
                     "finished = CASE WHEN ?2 = 'running' THEN '' ELSE " SQL_NOW " END WHERE id = ?1",
    [Q_PUT_MEASUREMENT] = "INSERT OR REPLACE INTO measurements (run_id, variant_id, shape_key, status, error, "
                          "median_us, min_us, max_us, spread, reps, iters, max_err, samples, recorded) "
                          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, "
                          "coalesce(nullif(?13, ''), '[]'), " SQL_NOW ")",
    [Q_PUT_WINNER] = "INSERT OR REPLACE INTO winners (device_id, op, dispatch_key, dispatch_params, variant_id, "
                     "run_id, median_us, regret, default_variant_id, default_us, updated) "
                     "VALUES (?1, ?2, ?3, ?4, ?5, nullif(?6, 0), ?7, ?8, nullif(?9, ''), ?10, " SQL_NOW ")",

};

static st_status get_stmt(st_db *db, query_id q, sqlite3_stmt **out, st_err *err) {
  return db_get_stmt(db, q, SQL[q], out, err);
}

/* ---- opening read-write ------------------------------------------------------ */

/* Inside the migration's transaction: its row, then the header fields that
 * make the file ours at this version. */
static st_status record_migration(st_db *db, const st_db_migration *m, const char *what, st_err *err) {
  sqlite3_stmt *s = NULL;
  st_status st = db_prepare_fresh(
      db, "INSERT INTO schema_migrations (version, name, applied) VALUES (?1, ?2, " SQL_NOW ")", &s, err);
  if (st != ST_OK) return st;
  if (db_bind(s, "it", m->version, m->name) != SQLITE_OK || sqlite3_step(s) != SQLITE_DONE) st = db_fail(db, err, what);
  sqlite3_finalize(s);
  if (st != ST_OK) return st;
  char sql[128];
  snprintf(sql, sizeof sql, "PRAGMA user_version = %d; PRAGMA application_id = %d;", m->version,
           (int)ST_DB_APPLICATION_ID);
  return db_exec_sql(db->conn, db->path, sql, what, err);
}

static st_status migrate_one(st_db *db, const st_db_migration *m, st_err *err) {
  st_status st = db_exec_sql(db->conn, db->path, "BEGIN IMMEDIATE", "starting a migration", err);
  if (st != ST_OK) return st;
  char what[96];
  snprintf(what, sizeof what, "migration %03d_%s", m->version, m->name);
  int64_t app = 0, ver = 0, objects = 0;
  /* Re-read inside the write lock: another process may have migrated it, and
   * the file must still be ours (or still empty) before the first write. */
  if (db_read_identity(db->conn, &app, &ver, &objects) != SQLITE_OK) {
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
    st = db_exec_sql(db->conn, db->path, m->sql, what, err);
    int64_t fk_problems = 0;
    if (st == ST_OK &&
        db_query_int(db->conn, "SELECT count(*) FROM pragma_foreign_key_check", &fk_problems) != SQLITE_OK)
      st = db_fail(db, err, what);
    if (st == ST_OK && fk_problems)
      st = st_fail(err, ST_ERR_DB, "database '%s': %s leaves %lld rows with broken foreign keys", db->path, what,
                   (long long)fk_problems);
    if (st == ST_OK) st = record_migration(db, m, what, err);
    if (st == ST_OK) db->version = m->version;
  }
  if (st == ST_OK) st = db_exec_sql(db->conn, db->path, "COMMIT", what, err);
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
  st_status st = db_exec_sql(db->conn, db->path, "PRAGMA foreign_keys = OFF", "preparing migrations", err);
  for (int i = db->version; st == ST_OK && i < st_db_migration_count; i++) {
    if (db->version < st_db_migrations[i].version) st = migrate_one(db, &st_db_migrations[i], err);
  }
  st_err ignored;
  st_status fk = db_exec_sql(db->conn, db->path, "PRAGMA foreign_keys = ON", "enabling foreign keys",
                             st == ST_OK ? err : &ignored);
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
  if (db_query_int(db->conn, "PRAGMA application_id", &app) != SQLITE_OK)
    return db_classify_read_error(db->conn, db->path, err);
  if (app != 0 && (uint32_t)app != ST_DB_APPLICATION_ID)
    return st_fail(err, ST_ERR_DB, "'%s' belongs to another application (application_id 0x%08x); refusing to use it",
                   db->path, (unsigned)app);

  st_status st = set_wal(db, err);
  if (st != ST_OK) return st;
  st = db_exec_sql(db->conn, db->path, "PRAGMA synchronous = NORMAL", "setting synchronous", err);
  if (st == ST_OK) st = migrate(db, err);
  if (st == ST_OK) st = db_exec_sql(db->conn, db->path, "PRAGMA foreign_keys = ON", "enabling foreign keys", err);
  return st;
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

/* The writer's end: the file back in rollback-journal mode where this is
 * the process that took the lock, the connection closed, then the lock. */
static void close_writer(st_db *db) {
  if (db->conn && db->lock.owner == getpid()) {
    db_finalize(db);
    leave_wal(db);
  }
  db_disconnect(db);
  st_writer_lock_release(db->path, &db->lock);
}

/* st_db_attach of a read-write handle. */
static st_status reconnect_writer(st_db *db, st_err *err) { return open_readwrite(db, FILE_OURS, err); }

st_status st_db_open(const char *path, st_db_mode mode, st_db **out, st_err *err) {
  if (mode == ST_DB_READONLY) return st_db_open_readonly(path, out, err);
  if (!out) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_open: out is NULL");
  *out = NULL;
  if (mode != ST_DB_READWRITE) {
    return st_fail(err, ST_ERR_INVALID_ARG, "st_db_open: mode=%d is neither ST_DB_READONLY nor ST_DB_READWRITE",
                   (int)mode);
  }
  st_db *db = NULL;
  st_status st = db_alloc("st_db_open", path, mode, &db, err);
  if (st != ST_OK) return st;
  db->close_writer = close_writer;
  db->reconnect_writer = reconnect_writer;

  /* Whose file it is comes first, so that a file of another application
   * gets no lock file, -wal or -shm beside it. */
  file_kind kind = FILE_NEW;
  int wal_mode = 0;
  st = db_probe_file(db->path, mode, &kind, &wal_mode, err);
  if (st == ST_OK && kind != FILE_NEW) st = db_check_identity_untouched(db->path, wal_mode, err);
  if (st == ST_OK) st = st_writer_lock_take(db->path, ST_DB_BUSY_TIMEOUT_MS, &db->lock, err);
  if (st == ST_OK) st = db_inspect(db, &kind, err);
  /* An export holds what the runtime reads and no more: rows written into
   * it would be tuned on top of missing sources and measurements. */
  if (st == ST_OK && kind == FILE_OURS) st = st_db_refuse_exported(db, err);
  if (st == ST_OK) {
    db_disconnect(db); /* the inspection's; the writer opens its own */
    st = open_readwrite(db, kind, err);
  }
  if (st != ST_OK) {
    st_db_close(db);
    return st;
  }
  *out = db;
  return ST_OK;
}

/* ---- devices -------------------------------------------------------------------- */

st_status st_db_put_device(st_db *db, const st_device_info *dev, int64_t *device_id, st_err *err) {
  if (!db || !dev || !device_id) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_put_device: NULL argument");
  st_status st = db_check_writable(db, "st_db_put_device", err);
  if (st == ST_OK) st = db_check_str(dev->uuid, sizeof dev->uuid, "device uuid", 0, err);
  if (st == ST_OK) st = db_check_str(dev->name, sizeof dev->name, "device name", 0, err);
  if (st == ST_OK) st = db_check_str(dev->arch, sizeof dev->arch, "device arch", 0, err);
  sqlite3_stmt *s = NULL;
  if (st == ST_OK) st = get_stmt(db, Q_PUT_DEVICE, &s, err);
  if (st != ST_OK) return st;
  if (db_bind(s, "tttiiilli", dev->uuid, dev->name, dev->arch, dev->cc_major, dev->cc_minor, dev->sm_count,
              dev->mem_bytes, dev->l2_bytes, dev->driver_version) != SQLITE_OK) {
    st = db_fail(db, err, "st_db_put_device");
    db_stmt_done(s);
    return st;
  }
  *device_id = 0;
  return db_step_write(db, s, "st_db_put_device", device_id, err);
}

st_status st_db_put_source(st_db *db, const char *source_hash, const char *op, const st_params *kernel,
                           const char *text, st_err *err) {
  if (!db) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_put_source: db is NULL");
  st_status st = db_check_writable(db, "st_db_put_source", err);
  if (st == ST_OK) st = db_check_str(source_hash, 40, "source_hash", 0, err);
  if (st == ST_OK) st = db_check_str(op, 32, "op", 0, err);
  if (st == ST_OK && !text) st = st_fail(err, ST_ERR_INVALID_ARG, "st_db_put_source: text is NULL");
  const char *kjson = NULL;
  if (st == ST_OK) st = db_params_json(db, kernel, 0, "kernel parameters", &kjson, err);
  sqlite3_stmt *s = NULL;
  if (st == ST_OK) st = get_stmt(db, Q_PUT_SOURCE, &s, err);
  if (st != ST_OK) return st;
  if (db_bind(s, "tttt", source_hash, op, kjson, text) != SQLITE_OK) {
    st = db_fail(db, err, "st_db_put_source");
    db_stmt_done(s);
    return st;
  }
  return db_step_write(db, s, "st_db_put_source", NULL, err);
}

st_status st_db_put_variant(st_db *db, const st_variant_row *v, st_err *err) {
  if (!db || !v) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_put_variant: NULL argument");
  st_status st = db_check_writable(db, "st_db_put_variant", err);
  if (st == ST_OK) st = db_check_str(v->id, sizeof v->id, "variant id", 0, err);
  if (st == ST_OK) st = db_check_str(v->op, sizeof v->op, "variant op", 0, err);
  if (st == ST_OK) st = db_check_str(v->name, sizeof v->name, "variant name", 0, err);
  if (st == ST_OK) st = db_check_str(v->source_hash, sizeof v->source_hash, "variant source_hash", 0, err);
  const char *kjson = NULL, *ljson = NULL;
  if (st == ST_OK) st = db_params_json(db, &v->kernel, 0, "kernel parameters", &kjson, err);
  if (st == ST_OK) st = db_params_json(db, &v->launch, 1, "launch parameters", &ljson, err);
  sqlite3_stmt *s = NULL;
  if (st == ST_OK) st = get_stmt(db, Q_PUT_VARIANT, &s, err);
  if (st != ST_OK) return st;
  char what[128];
  snprintf(what, sizeof what, "st_db_put_variant(id=%s, source_hash=%s)", v->id, v->source_hash);
  if (db_bind(s, "tttttti", v->id, v->op, v->name, v->source_hash, kjson, ljson, v->is_default ? 1 : 0) != SQLITE_OK) {
    st = db_fail(db, err, what);
    db_stmt_done(s);
    return st;
  }
  return db_step_write(db, s, what, NULL, err);
}

st_status st_db_put_binary(st_db *db, const st_binary_row *b, st_err *err) {
  if (!db || !b) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_put_binary: NULL argument");
  st_status st = db_check_writable(db, "st_db_put_binary", err);
  if (st == ST_OK) st = db_check_str(b->source_hash, sizeof b->source_hash, "binary source_hash", 0, err);
  if (st == ST_OK) st = db_check_str(b->arch, sizeof b->arch, "binary arch", 0, err);
  if (st == ST_OK) st = db_check_str(b->compiler, sizeof b->compiler, "binary compiler", 0, err);
  if (st == ST_OK && b->cubin_size && !b->cubin)
    st = st_fail(err, ST_ERR_INVALID_ARG, "binary cubin is NULL with cubin_size=%zu", b->cubin_size);
  /* Stored as given: bytes that begin as a compressed cubin would be read
   * back inflated, not as written (a compiled cubin begins 0x7f 'E' 'L' 'F'). */
  if (st == ST_OK && db_cubin_is_packed(b->cubin, b->cubin_size))
    st = st_fail(err, ST_ERR_INVALID_ARG,
                 "binary cubin of source_hash=%s begins with 'STZ', the mark of a compressed cubin: it would not "
                 "read back as written",
                 b->source_hash);
  sqlite3_stmt *s = NULL;
  if (st == ST_OK) st = get_stmt(db, Q_PUT_BINARY, &s, err);
  if (st != ST_OK) return st;
  char what[128];
  snprintf(what, sizeof what, "st_db_put_binary(source_hash=%s, arch=%s)", b->source_hash, b->arch);
  if (db_bind(s, "tttibiiiidt", b->source_hash, b->arch, b->compiler, b->ok ? 1 : 0, (const void *)b->cubin,
              b->cubin_size, b->registers, b->spill_bytes, b->shared_bytes, b->local_bytes, b->compile_ms,
              b->log ? b->log : "") != SQLITE_OK) {
    st = db_fail(db, err, what);
    db_stmt_done(s);
    return st;
  }
  return db_step_write(db, s, what, NULL, err);
}

st_status st_db_put_shape(st_db *db, const char *key, const char *op, const st_params *shape, const char *dispatch_key,
                          st_err *err) {
  if (!db) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_put_shape: db is NULL");
  st_status st = db_check_writable(db, "st_db_put_shape", err);
  if (st == ST_OK) st = db_check_str(key, 256, "shape key", 0, err);
  if (st == ST_OK) st = db_check_str(op, 32, "shape op", 0, err);
  if (st == ST_OK) st = db_check_str(dispatch_key, 256, "shape dispatch_key", 0, err);
  const char *json = NULL;
  if (st == ST_OK) st = db_params_json(db, shape, 0, "shape parameters", &json, err);
  sqlite3_stmt *s = NULL;
  if (st == ST_OK) st = get_stmt(db, Q_PUT_SHAPE, &s, err);
  if (st != ST_OK) return st;
  if (db_bind(s, "tttt", op, key, json, dispatch_key) != SQLITE_OK) {
    st = db_fail(db, err, "st_db_put_shape");
    db_stmt_done(s);
    return st;
  }
  return db_step_write(db, s, "st_db_put_shape", NULL, err);
}

st_status st_db_run_begin(st_db *db, const st_run_row *run, int64_t *run_id, st_err *err) {
  if (!db || !run || !run_id) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_run_begin: NULL argument");
  *run_id = 0;
  st_status st = db_check_writable(db, "st_db_run_begin", err);
  if (st == ST_OK) st = db_check_run_keys(run, err);
  if (st == ST_OK) st = db_check_str(run->status, sizeof run->status, "run status", 1, err);
  if (st == ST_OK && run->status[0] && !db_is_run_status(run->status))
    st = st_fail(err, ST_ERR_INVALID_ARG, "run status='%s' is not running, done, interrupted or failed", run->status);
  if (st == ST_OK) st = db_check_str(run->started, sizeof run->started, "run started", 1, err);
  if (st == ST_OK) st = db_check_str(run->tool_version, sizeof run->tool_version, "run tool_version", 1, err);
  if (st == ST_OK) st = db_check_str(run->env, sizeof run->env, "run env", 1, err);
  sqlite3_stmt *s = NULL;
  if (st == ST_OK) st = get_stmt(db, Q_RUN_BEGIN, &s, err);
  if (st != ST_OK) return st;
  char what[96];
  snprintf(what, sizeof what, "st_db_run_begin(device_id=%lld)", (long long)run->device_id);
  if (db_bind(s, "tttlttttt", run->kind, run->op, run->suite, run->device_id, run->status, run->started, run->args,
              run->tool_version, run->env) != SQLITE_OK) {
    st = db_fail(db, err, what);
    db_stmt_done(s);
    return st;
  }
  st = db_step_write(db, s, what, NULL, err);
  if (st == ST_OK) *run_id = sqlite3_last_insert_rowid(db->conn);
  return st;
}

st_status st_db_run_finish(st_db *db, int64_t run_id, const char *status, st_err *err) {
  if (!db || !status) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_run_finish: NULL argument");
  st_status st = db_check_writable(db, "st_db_run_finish", err);
  if (st == ST_OK && !db_is_run_status(status))
    st = st_fail(err, ST_ERR_INVALID_ARG, "run status='%s' is not running, done, interrupted or failed", status);
  sqlite3_stmt *s = NULL;
  if (st == ST_OK) st = get_stmt(db, Q_RUN_FINISH, &s, err);
  if (st != ST_OK) return st;
  if (db_bind(s, "lt", run_id, status) != SQLITE_OK) {
    st = db_fail(db, err, "st_db_run_finish");
    db_stmt_done(s);
    return st;
  }
  st = db_step_write(db, s, "st_db_run_finish", NULL, err);
  if (st == ST_OK && sqlite3_changes(db->conn) == 0)
    st = st_fail(err, ST_ERR_INVALID_ARG, "run_id=%lld is not in database '%s'", (long long)run_id, db->path);
  return st;
}

static int is_measurement_status(const char *s) {
  return !strcmp(s, "ok") || !strcmp(s, "wrong") || !strcmp(s, "failed") || !strcmp(s, "pruned");
}

static st_status check_measurement(const st_measurement *m, st_err *err) {
  st_status st = db_check_str(m->variant_id, sizeof m->variant_id, "measurement variant_id", 0, err);
  if (st == ST_OK) st = db_check_str(m->shape_key, sizeof m->shape_key, "measurement shape_key", 0, err);
  if (st == ST_OK) st = db_check_str(m->status, sizeof m->status, "measurement status", 0, err);
  if (st == ST_OK && !is_measurement_status(m->status))
    st = st_fail(err, ST_ERR_INVALID_ARG, "measurement status='%s' is not ok, wrong, failed or pruned", m->status);
  if (st == ST_OK) st = db_check_str(m->error, sizeof m->error, "measurement error", 1, err);
  if (st == ST_OK) st = db_check_str(m->samples, sizeof m->samples, "measurement samples", 1, err);
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
  st_status st = db_check_writable(db, "st_db_put_measurement", err);
  if (st == ST_OK) st = check_measurement(m, err);
  sqlite3_stmt *s = NULL;
  if (st == ST_OK) st = get_stmt(db, Q_PUT_MEASUREMENT, &s, err);
  if (st != ST_OK) return st;
  char what[128];
  snprintf(what, sizeof what, "st_db_put_measurement(run_id=%lld, variant_id=%s)", (long long)m->run_id, m->variant_id);
  if (db_bind(s, "lttttddddiidt", m->run_id, m->variant_id, m->shape_key, m->status, m->error, m->median_us, m->min_us,
              m->max_us, m->spread, m->reps, m->iters, m->max_err, m->samples) != SQLITE_OK) {
    st = db_fail(db, err, what);
    db_stmt_done(s);
    return st;
  }
  return db_step_write(db, s, what, NULL, err);
}

st_status st_db_put_winner(st_db *db, const st_winner_row *w, st_err *err) {
  if (!db || !w) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_put_winner: NULL argument");
  st_status st = db_check_writable(db, "st_db_put_winner", err);
  if (st == ST_OK) st = db_check_str(w->op, sizeof w->op, "winner op", 0, err);
  if (st == ST_OK) st = db_check_str(w->dispatch_key, sizeof w->dispatch_key, "winner dispatch_key", 0, err);
  if (st == ST_OK) st = db_check_str(w->variant_id, sizeof w->variant_id, "winner variant_id", 0, err);
  if (st == ST_OK)
    st = db_check_str(w->default_variant_id, sizeof w->default_variant_id, "winner default_variant_id", 1, err);
  if (st == ST_OK && !(isfinite(w->median_us) && w->median_us > 0))
    st = st_fail(err, ST_ERR_INVALID_ARG, "winner median_us=%g is not a positive number", w->median_us);
  const char *json = NULL;
  if (st == ST_OK) st = db_params_json(db, &w->dispatch, 0, "winner dispatch parameters", &json, err);
  sqlite3_stmt *s = NULL;
  if (st == ST_OK) st = get_stmt(db, Q_PUT_WINNER, &s, err);
  if (st != ST_OK) return st;
  char what[160];
  snprintf(what, sizeof what, "st_db_put_winner(device_id=%lld, variant_id=%s, run_id=%lld)", (long long)w->device_id,
           w->variant_id, (long long)w->run_id);
  if (db_bind(s, "lttttlddnd", w->device_id, w->op, w->dispatch_key, json, w->variant_id, w->run_id, w->median_us,
              w->regret, w->default_variant_id, w->default_us) != SQLITE_OK) {
    st = db_fail(db, err, what);
    db_stmt_done(s);
    return st;
  }
  return db_step_write(db, s, what, NULL, err);
}
