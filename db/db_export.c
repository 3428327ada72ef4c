/* db_export.c - the rows of a compact runtime database (st_db_export.h):
 * which rows of the source the runtime reads, copied into a new database,
 * and the mark that says it is an export.
 *
 * The source is read through its own handle (read-only, inside one read
 * transaction: one snapshot even while a tuner writes to it) and the
 * export is written through its own read-write handle; rows move between
 * the two connections value by value, so no ATTACH is needed and the
 * source is opened exactly as the runtime opens it. The winners go first;
 * every later step takes its keys from the rows already in the export, so
 * the export holds exactly what those winners need. Foreign keys are
 * deferred to the commit, which checks them all. Cubins go in compressed
 * (cubin_blob.h): they are nearly all of an export's bytes, and every
 * reader of a binary inflates them back. */
#include "db_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubin_blob.h"
#include "st_db_export.h"

/* Per (device model, arch, op, dispatch key) the newest row: whichever
 * device name and arch the runtime asks for (st_db_each_winner: newest per
 * (op, dispatch key) over the matching cards), the row it gets is among
 * these. The rowid is kept: it is the runtime's tie-break. ?1: a device
 * name or NULL; ?2: ",op,op," or NULL; ?3, ?4: the op and dispatch key
 * left out, or NULL. */
static const char SQL_PICK_WINNERS[] =
    "SELECT wid, device_id, op, dispatch_key, dispatch_params, variant_id, run_id, median_us, regret, "
    "default_variant_id, default_us, updated FROM (SELECT w.rowid AS wid, w.device_id, w.op, w.dispatch_key, "
    "w.dispatch_params, w.variant_id, w.run_id, w.median_us, w.regret, w.default_variant_id, w.default_us, "
    "w.updated, row_number() OVER (PARTITION BY d.name, d.arch, w.op, w.dispatch_key ORDER BY w.rowid DESC) AS rn "
    "FROM winners w JOIN devices d ON d.id = w.device_id JOIN variants v ON v.id = w.variant_id "
    "WHERE (?1 IS NULL OR d.name = ?1) AND (?2 IS NULL OR instr(?2, ',' || w.op || ',') > 0) "
    "AND NOT (?3 IS NOT NULL AND w.op = ?3 AND w.dispatch_key = ?4)) "
    "WHERE rn = 1 ORDER BY wid";
static const char SQL_PUT_WINNER[] =
    "INSERT INTO winners (rowid, device_id, op, dispatch_key, dispatch_params, variant_id, run_id, median_us, "
    "regret, default_variant_id, default_us, updated) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)";

/* One step after the winners: for each row of `keys` (on the export), the
 * rows `pick` (on the source, the key's columns bound to ?1...) returns go
 * into the export through `put` (their columns bound to ?1...). */
typedef struct copy_step {
  const char *what;
  const char *keys;
  const char *pick;
  const char *put;
  /* The column of `pick` (from 1) that is a cubin, bound compressed; its
   * first two columns then name the binary (source hash, arch). 0: none. */
  int cubin_col;
  /* `pick` from a schema-1 source (a read-only handle reads one version
   * back, db_open.c); NULL: the same. */
  const char *pick_v1;
} copy_step;

static const copy_step STEPS[] = {
    {"runs", "SELECT DISTINCT run_id FROM winners WHERE run_id IS NOT NULL",
     "SELECT id, kind, op, suite, device_id, status, started, finished, args, tool_version, env FROM runs "
     "WHERE id = ?1",
     "INSERT INTO runs (id, kind, op, suite, device_id, status, started, finished, args, tool_version, env) "
     "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
     0, "SELECT id, kind, op, suite, device_id, status, started, finished, args, tool_version, '{}' FROM runs "
        "WHERE id = ?1"},
    {"devices", "SELECT device_id FROM winners UNION SELECT device_id FROM runs",
     "SELECT id, uuid, name, arch, cc_major, cc_minor, sm_count, mem_bytes, l2_bytes, driver_version, first_seen, "
     "last_seen FROM devices WHERE id = ?1",
     "INSERT INTO devices (id, uuid, name, arch, cc_major, cc_minor, sm_count, mem_bytes, l2_bytes, driver_version, "
     "first_seen, last_seen) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"},
    /* A winner's default variant too: the winner row refers to it (and
     * `show winners` names it); its binaries stay out. */
    {"variants",
     "SELECT variant_id FROM winners UNION SELECT default_variant_id FROM winners "
     "WHERE default_variant_id IS NOT NULL",
     "SELECT id, op, name, source_hash, kernel_params, launch_params, is_default, created FROM variants WHERE id = ?1",
     "INSERT INTO variants (id, op, name, source_hash, kernel_params, launch_params, is_default, created) "
     "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"},
    /* The rows variants and binaries refer to, without the text. */
    {"sources", "SELECT DISTINCT source_hash FROM variants",
     "SELECT hash, op, kernel_params, created FROM sources WHERE hash = ?1",
     "INSERT INTO sources (hash, op, kernel_params, text, created) VALUES (?1, ?2, ?3, '', ?4)"},
    /* The row st_db_get_binary(hash, arch, NULL) returns, the newest, and
     * only when it is a usable cubin; the cubin compressed. */
    {"binaries",
     "SELECT DISTINCT v.source_hash, d.arch FROM winners w JOIN variants v ON v.id = w.variant_id "
     "JOIN devices d ON d.id = w.device_id",
     "SELECT source_hash, arch, compiler, ok, cubin, registers, spill_bytes, shared_bytes, local_bytes, compile_ms, "
     "log, created FROM (SELECT * FROM binaries WHERE source_hash = ?1 AND arch = ?2 ORDER BY rowid DESC LIMIT 1) "
     "WHERE ok = 1 AND length(cubin) > 0",
     "INSERT INTO binaries (source_hash, arch, compiler, ok, cubin, registers, spill_bytes, shared_bytes, "
     "local_bytes, compile_ms, log, created) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
     5},
};

static const char SQL_MARK[] =
    "INSERT INTO meta (key, value) VALUES ('exported_from', ?1), ('exported_at', " SQL_NOW "), "
    "('exported_filter', ?2), ('exported_winners', (SELECT count(*) FROM winners)), "
    "('exported_variants', (SELECT count(*) FROM variants)), ('exported_binaries', (SELECT count(*) FROM binaries))";

typedef struct export_ctx {
  st_db *src, *dst;
  volatile sig_atomic_t *stop;
  st_err *err;
  int64_t cubin_bytes, stored_bytes; /* the cubins copied: their own size, and compressed */
} export_ctx;

static st_status interrupted(const export_ctx *x) {
  return st_fail(x->err, ST_ERR_DB, "export into '%s' interrupted", x->dst->path);
}

/* Column `col` of the row of `pick`, a cubin, bound to the same column of
 * `put` compressed. A source's blob that is compressed already (an export
 * exported again) is inflated first: checked, and compressed as any. */
static st_status bind_cubin(export_ctx *x, sqlite3_stmt *pick, sqlite3_stmt *put, int col) {
  char hash[64], arch[32], what[ST_ERR_MSG_MAX];
  db_col_text(pick, 0, hash, sizeof hash);
  db_col_text(pick, 1, arch, sizeof arch);
  snprintf(what, sizeof what, "the %s binary of source %s in '%s'", arch, hash, x->src->path);
  const void *blob = sqlite3_column_blob(pick, col - 1);
  const size_t n = (size_t)sqlite3_column_bytes(pick, col - 1);
  const void *cubin = blob;
  size_t cubin_n = n, packed_n = 0;
  void *inflated = NULL, *packed = NULL;
  st_status st = ST_OK;
  if (db_cubin_is_packed(blob, n)) {
    st = db_cubin_unpack(blob, n, &inflated, &cubin_n, what, x->err);
    cubin = inflated;
  }
  if (st == ST_OK) st = db_cubin_pack(cubin, cubin_n, &packed, &packed_n, what, x->err);
  free(inflated);
  if (st != ST_OK) return st;
  /* SQLite owns `packed` from here, and frees it (on failure too). */
  if (sqlite3_bind_blob64(put, col, packed, packed_n, free) != SQLITE_OK)
    return db_fail(x->dst, x->err, "binding a compressed cubin");
  x->cubin_bytes += (int64_t)cubin_n;
  x->stored_bytes += (int64_t)packed_n;
  return ST_OK;
}

/* Every row of `pick` (bound, on the source) into the export by `put`;
 * column `cubin_col` (from 1; 0: none) compressed (bind_cubin). */
static st_status copy_rows(export_ctx *x, sqlite3_stmt *pick, sqlite3_stmt *put, const char *what, int cubin_col) {
  int rc;
  while ((rc = sqlite3_step(pick)) == SQLITE_ROW) {
    if (x->stop && *x->stop) return interrupted(x);
    const int n = sqlite3_column_count(pick);
    for (int i = 0; i < n && rc == SQLITE_ROW; i++)
      if (i + 1 != cubin_col && sqlite3_bind_value(put, i + 1, sqlite3_column_value(pick, i)) != SQLITE_OK)
        rc = SQLITE_ERROR;
    if (rc == SQLITE_ROW && cubin_col) {
      const st_status st = bind_cubin(x, pick, put, cubin_col);
      if (st != ST_OK) return st;
    }
    if (rc != SQLITE_ROW || sqlite3_step(put) != SQLITE_DONE) {
      char why[96];
      snprintf(why, sizeof why, "copying %s", what);
      return db_fail(x->dst, x->err, why);
    }
    (void)sqlite3_reset(put);
    (void)sqlite3_clear_bindings(put);
  }
  if (rc != SQLITE_DONE) {
    char why[96];
    snprintf(why, sizeof why, "reading %s", what);
    return db_fail(x->src, x->err, why);
  }
  return ST_OK;
}

static st_status copy_winners(export_ctx *x, const st_db_export_filter *f) {
  sqlite3_stmt *pick = NULL, *put = NULL;
  char *ops = NULL;
  st_status st = db_prepare_fresh(x->src, SQL_PICK_WINNERS, &pick, x->err);
  if (st == ST_OK) st = db_prepare_fresh(x->dst, SQL_PUT_WINNER, &put, x->err);
  /* ",a,b,": an op matches when ",op," is in it. */
  if (st == ST_OK && f->ops && !(ops = sqlite3_mprintf(",%s,", f->ops)))
    st = st_fail(x->err, ST_ERR_NOMEM, "out of host memory for the op filter");
  const int leave_out = f->leave_out_op && f->leave_out_key;
  if (st == ST_OK && db_bind(pick, "nnnn", f->device_name, ops, leave_out ? f->leave_out_op : NULL,
                             leave_out ? f->leave_out_key : NULL) != SQLITE_OK)
    st = db_fail(x->src, x->err, "binding the winners' filter");
  if (st == ST_OK) st = copy_rows(x, pick, put, "winners", 0);
  sqlite3_finalize(pick);
  sqlite3_finalize(put);
  sqlite3_free(ops);
  return st;
}

/* One copy_step: its keys read from the export, each key's rows copied. */
static st_status copy_keyed(export_ctx *x, const copy_step *step) {
  sqlite3_stmt *keys = NULL, *pick = NULL, *put = NULL;
  st_status st = db_prepare_fresh(x->dst, step->keys, &keys, x->err);
  const char *pick_sql = step->pick_v1 && st_db_schema_version(x->src) < 2 ? step->pick_v1 : step->pick;
  if (st == ST_OK) st = db_prepare_fresh(x->src, pick_sql, &pick, x->err);
  if (st == ST_OK) st = db_prepare_fresh(x->dst, step->put, &put, x->err);
  int rc = SQLITE_DONE;
  while (st == ST_OK && (rc = sqlite3_step(keys)) == SQLITE_ROW) {
    for (int i = 0; i < sqlite3_column_count(keys) && st == ST_OK; i++)
      if (sqlite3_bind_value(pick, i + 1, sqlite3_column_value(keys, i)) != SQLITE_OK)
        st = db_fail(x->src, x->err, step->what);
    if (st == ST_OK) st = copy_rows(x, pick, put, step->what, step->cubin_col);
    (void)sqlite3_reset(pick);
    (void)sqlite3_clear_bindings(pick);
  }
  if (st == ST_OK && rc != SQLITE_DONE) st = db_fail(x->dst, x->err, step->what);
  sqlite3_finalize(keys);
  sqlite3_finalize(pick);
  sqlite3_finalize(put);
  return st;
}

static st_status write_mark(export_ctx *x, const st_db_export_filter *f, const char *source_name) {
  char filter[320] = "";
  size_t n = 0;
  if (f->device_name) n += (size_t)snprintf(filter, sizeof filter, "device=%s", f->device_name);
  if (f->ops && n < sizeof filter)
    n += (size_t)snprintf(filter + n, sizeof filter - n, "%sop=%s", n ? " " : "", f->ops);
  if (f->leave_out_op && f->leave_out_key && n < sizeof filter)
    snprintf(filter + n, sizeof filter - n, "%swithout=%s:%s", n ? " " : "", f->leave_out_op, f->leave_out_key);
  sqlite3_stmt *s = NULL;
  st_status st = db_prepare_fresh(x->dst, SQL_MARK, &s, x->err);
  if (st != ST_OK) return st;
  if (db_bind(s, "tt", source_name, filter) != SQLITE_OK || sqlite3_step(s) != SQLITE_DONE)
    st = db_fail(x->dst, x->err, "marking the export");
  sqlite3_finalize(s);
  return st;
}

static st_status read_counts(st_db *dst, st_db_export_counts *c, st_err *err) {
  if (db_query_int(dst->conn, "SELECT count(*) FROM winners", &c->winners) != SQLITE_OK ||
      db_query_int(dst->conn, "SELECT count(*) FROM variants", &c->variants) != SQLITE_OK ||
      db_query_int(dst->conn, "SELECT count(*) FROM binaries", &c->binaries) != SQLITE_OK)
    return db_fail(dst, err, "counting the exported rows");
  return ST_OK;
}

/* Everything inside the two transactions: the source's snapshot and the
 * export's one write. */
static st_status fill(export_ctx *x, const st_db_export_filter *f, const char *source_name,
                      st_db_export_counts *counts) {
  /* Winners go in before the rows they refer to. */
  st_status st =
      db_exec_sql(x->dst->conn, x->dst->path, "PRAGMA defer_foreign_keys = ON", "deferring foreign keys", x->err);
  if (st == ST_OK) st = copy_winners(x, f);
  for (size_t i = 0; st == ST_OK && i < sizeof STEPS / sizeof STEPS[0]; i++) st = copy_keyed(x, &STEPS[i]);
  if (st == ST_OK) st = write_mark(x, f, source_name);
  if (st == ST_OK) st = read_counts(x->dst, counts, x->err);
  if (st == ST_OK) {
    counts->cubin_bytes = x->cubin_bytes;
    counts->stored_cubin_bytes = x->stored_bytes;
  }
  if (st == ST_OK && x->stop && *x->stop) st = interrupted(x);
  return st;
}

/* Bytes 18 and 19 of the header are 1 in rollback-journal mode, 2 in WAL
 * mode: the export must be one self-contained file. */
static st_status check_rollback_mode(const char *path, st_err *err) {
  unsigned char h[20];
  FILE *f = fopen(path, "rb");
  const size_t got = f ? fread(h, 1, sizeof h, f) : 0;
  if (f) fclose(f);
  if (got != sizeof h) return st_fail(err, ST_ERR_DB, "export '%s' cannot be read back", path);
  if (h[18] != 1 || h[19] != 1)
    return st_fail(err, ST_ERR_DB, "export '%s' was left in WAL mode (another connection had it open?)", path);
  return ST_OK;
}

st_status st_db_export(st_db *src, const char *dst_path, const st_db_export_filter *filter, const char *source_name,
                       volatile sig_atomic_t *stop, st_db_export_counts *counts, st_err *err) {
  if (!src || !dst_path || !filter || !source_name || !counts)
    return st_fail(err, ST_ERR_INVALID_ARG, "st_db_export: NULL argument");
  memset(counts, 0, sizeof *counts);
  st_status st = db_check_attached(src, err);
  if (st != ST_OK) return st;
  if (src->in_tx) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_export: the source has a transaction open");
  st_db *dst = NULL;
  if ((st = st_db_open(dst_path, ST_DB_READWRITE, &dst, err)) != ST_OK) return st;
  export_ctx x = {.src = src, .dst = dst, .stop = stop, .err = err};
  st = st_db_begin(src, err);
  if (st == ST_OK) {
    st = st_db_begin(dst, err);
    if (st == ST_OK) st = fill(&x, filter, source_name, counts);
    if (st == ST_OK)
      st = st_db_commit(dst, err);
    else
      st_db_rollback(dst);
    st_db_rollback(src); /* a read transaction: nothing to keep */
  }
  st_db_close(dst); /* back to rollback-journal mode */
  if (st == ST_OK) st = check_rollback_mode(dst_path, err);
  if (st != ST_OK) memset(counts, 0, sizeof *counts);
  return st;
}
