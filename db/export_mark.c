/* export_mark.c - reading the mark an export leaves in its meta table (see
 * st_db_export.h), and the refusal every read-write open makes of a marked
 * file. db_export.c writes the mark. */
#include "db_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "st_db_export.h"

static const char SQL_MARK[] = "SELECT key, value FROM meta WHERE key IN ('exported_from', 'exported_at', "
                               "'exported_filter', 'exported_winners', 'exported_variants', 'exported_binaries')";

static void take_value(st_db_export_mark *m, const char *key, sqlite3_stmt *s) {
  if (!strcmp(key, "exported_from")) {
    m->exported = 1;
    db_col_text(s, 1, m->from, sizeof m->from);
  } else if (!strcmp(key, "exported_at")) {
    db_col_text(s, 1, m->at, sizeof m->at);
  } else if (!strcmp(key, "exported_filter")) {
    db_col_text(s, 1, m->filter, sizeof m->filter);
  } else if (!strcmp(key, "exported_winners")) {
    m->winners = sqlite3_column_int64(s, 1);
  } else if (!strcmp(key, "exported_variants")) {
    m->variants = sqlite3_column_int64(s, 1);
  } else if (!strcmp(key, "exported_binaries")) {
    m->binaries = sqlite3_column_int64(s, 1);
  }
}

st_status st_db_get_export_mark(st_db *db, st_db_export_mark *out, st_err *err) {
  if (!db || !out) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_get_export_mark: NULL argument");
  memset(out, 0, sizeof *out);
  sqlite3_stmt *s = NULL;
  st_status st = db_prepare_fresh(db, SQL_MARK, &s, err);
  if (st != ST_OK) return st;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    char key[32];
    db_col_text(s, 0, key, sizeof key);
    take_value(out, key, s);
  }
  if (rc != SQLITE_DONE) st = db_fail(db, err, "reading the export mark");
  sqlite3_finalize(s);
  /* The counts and the rest belong to the mark: without "exported_from"
   * there is none. */
  if (st != ST_OK || !out->exported) memset(out, 0, sizeof *out);
  return st;
}

st_status st_db_refuse_exported(st_db *db, st_err *err) {
  if (!db) return st_fail(err, ST_ERR_INVALID_ARG, "st_db_refuse_exported: db is NULL");
  /* The mark is large (a path); one a call is enough. */
  st_db_export_mark *m = malloc(sizeof *m);
  if (!m) return st_fail(err, ST_ERR_NOMEM, "out of host memory reading the export mark");
  st_status st = st_db_get_export_mark(db, m, err);
  if (st == ST_OK && m->exported)
    st = st_fail(err, ST_ERR_DB,
                 "'%s' is an exported runtime database (from %s); tune into the source database and export again",
                 db->path, m->from);
  free(m);
  return st;
}
