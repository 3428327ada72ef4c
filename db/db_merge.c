/* db_merge.c - one database merged into another (st_db_merge.h).
 *
 * Rows move from the source's connection to the destination's value by
 * value (no ATTACH: the source is opened as any read-only handle). Rows
 * keyed by content go straight in with INSERT OR IGNORE. Cards and runs,
 * whose ids are each database's own, are first staged in temporary tables
 * of the destination's connection, matched there by their identity (uuid;
 * card, kind, op, suite, start and args), and mapped to destination ids;
 * measurements and winners then take their run and card through those
 * maps as they are inserted. Everything happens inside one write
 * transaction of the destination, foreign keys checked at its commit. */
#include "db_internal.h"

#include <stdio.h>
#include <string.h>

#include "st_db_export.h"
#include "st_db_merge.h"

typedef struct merge_ctx {
  st_db *src, *dst;
  volatile sig_atomic_t *stop;
  st_err *err;
} merge_ctx;

/* A copy from the source: every row of `pick` through `put` (its columns
 * bound to ?1...). */
typedef struct copy_step {
  const char *what;
  const char *pick;
  const char *put;
  const char *pick_v1; /* `pick` from a schema-1 source; NULL: the same */
} copy_step;

#define RUN_COLUMNS "kind, op, suite, device_id, status, started, finished, args, tool_version, env"
#define MEASUREMENT_COLUMNS                                                                                            \
  "variant_id, shape_key, status, error, median_us, min_us, max_us, spread, reps, iters, max_err, samples, "           \
  "recorded"
#define WINNER_COLUMNS                                                                                                 \
  "device_id, op, dispatch_key, dispatch_params, variant_id, run_id, median_us, regret, default_variant_id, "          \
  "default_us, updated"
#define DEVICE_COLUMNS                                                                                                 \
  "uuid, name, arch, cc_major, cc_minor, sm_count, mem_bytes, l2_bytes, driver_version, first_seen, last_seen"

static const char SQL_STAGE[] =
    "CREATE TEMP TABLE merge_devices (src_id INTEGER PRIMARY KEY, " DEVICE_COLUMNS ");"
    "CREATE TEMP TABLE merge_device_map (src_id INTEGER PRIMARY KEY, dst_id INTEGER NOT NULL);"
    "CREATE TEMP TABLE merge_runs (src_id INTEGER PRIMARY KEY, " RUN_COLUMNS ");"
    "CREATE TEMP TABLE merge_run_map (src_id INTEGER PRIMARY KEY, dst_id INTEGER)";
static const char SQL_UNSTAGE[] = "DROP TABLE IF EXISTS temp.merge_devices; DROP TABLE IF EXISTS temp.merge_device_map;"
                                  "DROP TABLE IF EXISTS temp.merge_runs; DROP TABLE IF EXISTS temp.merge_run_map";

static const copy_step STAGE_DEVICES = {"cards", "SELECT id, " DEVICE_COLUMNS " FROM devices",
                                        "INSERT INTO temp.merge_devices VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
                                        "?10, ?11, ?12)",
                                        NULL};

/* Cards the destination lacks go in; a known card takes a later sighting's
 * driver; then every source card's destination id. */
static const char SQL_DEVICES_ADD[] = "INSERT INTO main.devices (" DEVICE_COLUMNS ") SELECT " DEVICE_COLUMNS
                                      " FROM temp.merge_devices s WHERE NOT EXISTS (SELECT 1 FROM main.devices d "
                                      "WHERE d.uuid = s.uuid) ORDER BY src_id";
static const char SQL_DEVICES_SEEN[] =
    "UPDATE main.devices SET driver_version = s.driver_version, last_seen = s.last_seen FROM temp.merge_devices s "
    "WHERE s.uuid = devices.uuid AND s.last_seen > devices.last_seen";
static const char SQL_DEVICES_MAP[] = "INSERT INTO temp.merge_device_map SELECT s.src_id, d.id FROM "
                                      "temp.merge_devices s JOIN main.devices d ON d.uuid = s.uuid";

static const copy_step CONTENT[] = {
    {"sources", "SELECT hash, op, kernel_params, text, created FROM sources",
     "INSERT OR IGNORE INTO main.sources (hash, op, kernel_params, text, created) VALUES (?1, ?2, ?3, ?4, ?5)", NULL},
    {"variants", "SELECT id, op, name, source_hash, kernel_params, launch_params, is_default, created FROM variants",
     "INSERT OR IGNORE INTO main.variants (id, op, name, source_hash, kernel_params, launch_params, is_default, "
     "created) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
     NULL},
    {"shapes", "SELECT op, key, params, dispatch_key FROM shapes",
     "INSERT OR IGNORE INTO main.shapes (op, key, params, dispatch_key) VALUES (?1, ?2, ?3, ?4)", NULL},
    {"binaries",
     "SELECT source_hash, arch, compiler, ok, cubin, registers, spill_bytes, shared_bytes, local_bytes, compile_ms, "
     "log, created FROM binaries",
     "INSERT OR IGNORE INTO main.binaries (source_hash, arch, compiler, ok, cubin, registers, spill_bytes, "
     "shared_bytes, local_bytes, compile_ms, log, created) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
     NULL},
};

/* The runs, their cards already mapped; a schema-1 source has no env. */
static const copy_step STAGE_RUNS = {
    "runs",
    "SELECT r.id, r.kind, r.op, r.suite, r.device_id, r.status, r.started, r.finished, r.args, r.tool_version, "
    "r.env FROM runs r ORDER BY r.id",
    "INSERT INTO temp.merge_runs SELECT ?1, ?2, ?3, ?4, m.dst_id, ?6, ?7, ?8, ?9, ?10, ?11 FROM "
    "temp.merge_device_map m WHERE m.src_id = ?5",
    "SELECT r.id, r.kind, r.op, r.suite, r.device_id, r.status, r.started, r.finished, r.args, r.tool_version, '{}' "
    "FROM runs r ORDER BY r.id"};

/* A run's identity in the destination: the same card, kind, op, suite,
 * start and args (the smallest id, should two share it). */
#define SAME_RUN                                                                                                       \
  "(SELECT min(r.id) FROM main.runs r WHERE r.device_id = s.device_id AND r.kind = s.kind AND r.op = s.op AND "        \
  "r.suite = s.suite AND r.started = s.started AND r.args = s.args)"
static const char SQL_RUNS_MATCH[] =
    "INSERT INTO temp.merge_run_map SELECT s.src_id, " SAME_RUN " FROM temp.merge_runs s";
static const char SQL_RUNS_FURTHER[] =
    "UPDATE main.runs SET status = u.status, finished = u.finished FROM (SELECT m.dst_id, s.status, s.finished FROM "
    "temp.merge_runs s JOIN temp.merge_run_map m ON m.src_id = s.src_id WHERE m.dst_id IS NOT NULL) AS u "
    "WHERE u.dst_id = runs.id AND u.finished > runs.finished";
static const char SQL_RUNS_ADD[] = "INSERT INTO main.runs (" RUN_COLUMNS ") SELECT " RUN_COLUMNS
                                   " FROM temp.merge_runs s JOIN temp.merge_run_map m ON m.src_id = s.src_id WHERE "
                                   "m.dst_id IS NULL ORDER BY s.src_id";
static const char SQL_RUNS_MAP_NEW[] = "UPDATE temp.merge_run_map SET dst_id = (SELECT " SAME_RUN
                                       " FROM temp.merge_runs s WHERE s.src_id = merge_run_map.src_id) WHERE dst_id "
                                       "IS NULL";

static const copy_step MEASUREMENTS = {
    "measurements", "SELECT run_id, " MEASUREMENT_COLUMNS " FROM measurements",
    "INSERT OR IGNORE INTO main.measurements (run_id, " MEASUREMENT_COLUMNS ") SELECT m.dst_id, ?2, ?3, ?4, ?5, ?6, "
    "?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14 FROM temp.merge_run_map m WHERE m.src_id = ?1",
    NULL};

/* The newer row of a (card, op, dispatch key) stays. */
static const copy_step WINNERS = {
    "winners", "SELECT " WINNER_COLUMNS " FROM winners",
    "INSERT INTO main.winners (" WINNER_COLUMNS ") SELECT d.dst_id, ?2, ?3, ?4, ?5, (SELECT dst_id FROM "
    "temp.merge_run_map WHERE src_id = ?6), ?7, ?8, ?9, ?10, ?11 FROM temp.merge_device_map d WHERE d.src_id = ?1 "
    "ON CONFLICT (device_id, op, dispatch_key) DO UPDATE SET dispatch_params = excluded.dispatch_params, "
    "variant_id = excluded.variant_id, run_id = excluded.run_id, median_us = excluded.median_us, "
    "regret = excluded.regret, default_variant_id = excluded.default_variant_id, default_us = excluded.default_us, "
    "updated = excluded.updated WHERE excluded.updated > winners.updated",
    NULL};

static st_status interrupted(const merge_ctx *x) {
  return st_fail(x->err, ST_ERR_DB, "merge into '%s' interrupted", x->dst->path);
}

/* Runs a copy_step; `added` (may be NULL) counts the rows `put` changed. */
static st_status copy(merge_ctx *x, const copy_step *step, int64_t *added) {
  sqlite3_stmt *pick = NULL, *put = NULL;
  const char *pick_sql = step->pick_v1 && st_db_schema_version(x->src) < 2 ? step->pick_v1 : step->pick;
  st_status st = db_prepare_fresh(x->src, pick_sql, &pick, x->err);
  if (st == ST_OK) st = db_prepare_fresh(x->dst, step->put, &put, x->err);
  int rc = SQLITE_DONE;
  while (st == ST_OK && (rc = sqlite3_step(pick)) == SQLITE_ROW) {
    if (x->stop && *x->stop) {
      st = interrupted(x);
      break;
    }
    for (int i = 0; i < sqlite3_column_count(pick) && st == ST_OK; i++)
      if (sqlite3_bind_value(put, i + 1, sqlite3_column_value(pick, i)) != SQLITE_OK)
        st = db_fail(x->dst, x->err, step->what);
    if (st == ST_OK && sqlite3_step(put) != SQLITE_DONE) {
      char why[96];
      snprintf(why, sizeof why, "merging %s", step->what);
      st = db_fail(x->dst, x->err, why);
    }
    if (st == ST_OK && added) *added += sqlite3_changes(x->dst->conn);
    (void)sqlite3_reset(put);
    (void)sqlite3_clear_bindings(put);
  }
  if (st == ST_OK && rc != SQLITE_DONE) {
    char why[96];
    snprintf(why, sizeof why, "reading %s", step->what);
    st = db_fail(x->src, x->err, why);
  }
  sqlite3_finalize(pick);
  sqlite3_finalize(put);
  return st;
}

/* One statement on the destination; `changed` (may be NULL) gets the rows
 * it changed. */
static st_status exec(merge_ctx *x, const char *sql, const char *what, int64_t *changed) {
  const st_status st = db_exec_sql(x->dst->conn, x->dst->path, sql, what, x->err);
  if (st == ST_OK && changed) *changed = sqlite3_changes(x->dst->conn);
  return st;
}

static st_status merge_cards(merge_ctx *x, st_db_merge_counts *c) {
  st_status st = copy(x, &STAGE_DEVICES, NULL);
  if (st == ST_OK) st = exec(x, SQL_DEVICES_ADD, "adding cards", &c->devices);
  if (st == ST_OK) st = exec(x, SQL_DEVICES_SEEN, "updating cards seen later", NULL);
  if (st == ST_OK) st = exec(x, SQL_DEVICES_MAP, "mapping cards", NULL);
  return st;
}

static st_status merge_runs(merge_ctx *x, st_db_merge_counts *c) {
  st_status st = copy(x, &STAGE_RUNS, NULL);
  if (st == ST_OK) st = exec(x, SQL_RUNS_MATCH, "matching runs", NULL);
  if (st == ST_OK && db_query_int(x->dst->conn, "SELECT count(*) FROM temp.merge_run_map WHERE dst_id IS NOT NULL",
                                  &c->runs_known) != SQLITE_OK)
    st = db_fail(x->dst, x->err, "counting the runs known");
  if (st == ST_OK) st = exec(x, SQL_RUNS_FURTHER, "updating runs finished later", &c->runs_updated);
  if (st == ST_OK) st = exec(x, SQL_RUNS_ADD, "adding runs", &c->runs);
  if (st == ST_OK) st = exec(x, SQL_RUNS_MAP_NEW, "mapping the runs added", NULL);
  return st;
}

static st_status fill(merge_ctx *x, st_db_merge_counts *c) {
  st_status st = exec(x, "PRAGMA defer_foreign_keys = ON", "deferring foreign keys", NULL);
  if (st == ST_OK) st = exec(x, SQL_STAGE, "staging", NULL);
  if (st == ST_OK) st = merge_cards(x, c);
  int64_t *added[] = {&c->sources, &c->variants, &c->shapes, &c->binaries};
  for (size_t i = 0; st == ST_OK && i < sizeof CONTENT / sizeof CONTENT[0]; i++) st = copy(x, &CONTENT[i], added[i]);
  if (st == ST_OK) st = merge_runs(x, c);
  if (st == ST_OK) st = copy(x, &MEASUREMENTS, &c->measurements);
  if (st == ST_OK) st = copy(x, &WINNERS, &c->winners);
  if (st == ST_OK) st = exec(x, SQL_UNSTAGE, "dropping the staging tables", NULL);
  if (st == ST_OK && x->stop && *x->stop) st = interrupted(x);
  return st;
}

st_status st_db_merge_check_source(st_db *src, st_err *err) {
  if (!src) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_merge_check_source: NULL argument");
  st_db_export_mark mark;
  st_status st = st_db_get_export_mark(src, &mark, err);
  if (st != ST_OK) return st;
  if (mark.exported)
    return st_fail(err, ST_ERR_INVALID_ARG,
                   "'%s' is an exported runtime database (of '%s'): it holds winners without their measurements "
                   "and sources; merge the database it was exported from",
                   src->path, mark.from);
  return ST_OK;
}

st_status st_db_merge(st_db *src, st_db *dst, volatile sig_atomic_t *stop, st_db_merge_counts *counts, st_err *err) {
  if (!src || !dst || !counts) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_merge: NULL argument");
  memset(counts, 0, sizeof *counts);
  st_status st = db_check_attached(src, err);
  if (st == ST_OK) st = db_check_attached(dst, err);
  if (st == ST_OK) st = db_check_writable(dst, "st_db_merge", err);
  if (st != ST_OK) return st;
  if (src->in_tx || dst->in_tx) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_merge: a transaction is open");
  if ((st = st_db_merge_check_source(src, err)) != ST_OK) return st;
  merge_ctx x = {.src = src, .dst = dst, .stop = stop, .err = err};
  if ((st = st_db_begin(src, err)) != ST_OK) return st;
  st = st_db_begin(dst, err);
  if (st == ST_OK) {
    st = fill(&x, counts);
    if (st == ST_OK)
      st = st_db_commit(dst, err);
    else
      st_db_rollback(dst); /* the staging tables go with it */
  }
  st_db_rollback(src); /* a read transaction: nothing to keep */
  if (st != ST_OK) memset(counts, 0, sizeof *counts);
  return st;
}
