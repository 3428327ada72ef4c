/* schema_check.c - a file's schema against the one its version promises
 * (see schema_check.h). */
#include "schema_check.h"

#include <stdlib.h>
#include <string.h>

#include "st_db_migrations.h"

/* The definition without comments and with every run of white space made
 * one space, so that a migration file's layout does not matter. Quoted
 * text is kept as it is. Returns a malloc'ed string or NULL. */
static char *normalized(const char *sql) {
  char *out = malloc(strlen(sql) + 1);
  if (!out) return NULL;
  size_t n = 0;
  char quote = 0;
  for (const char *p = sql; *p; p++) {
    if (quote) {
      out[n++] = *p;
      if (*p == quote) quote = 0;
      continue;
    }
    if (*p == '\'' || *p == '"') quote = *p;
    if (p[0] == '-' && p[1] == '-') {
      while (p[1] && p[1] != '\n') p++;
      continue;
    }
    if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
      if (n && out[n - 1] != ' ') out[n++] = ' ';
      continue;
    }
    out[n++] = *p;
  }
  while (n && out[n - 1] == ' ') n--;
  out[n] = '\0';
  return out;
}

/* The reference: an in-memory database with migrations 1..version. */
static st_status build_reference(int version, sqlite3 **out, st_err *err) {
  *out = NULL;
  if (version < 1 || version > st_db_migration_count)
    return st_fail(err, ST_ERR_DB, "schema version %d has no embedded migrations (this build has 1..%d)", version,
                   st_db_migration_count);
  sqlite3 *ref = NULL;
  if (sqlite3_open_v2(":memory:", &ref, SQLITE_OPEN_READWRITE | SQLITE_OPEN_MEMORY, NULL) != SQLITE_OK) {
    sqlite3_close(ref);
    return st_fail(err, ST_ERR_NOMEM, "no memory for the reference schema");
  }
  for (int i = 0; i < version; i++) {
    char *msg = NULL;
    if (sqlite3_exec(ref, st_db_migrations[i].sql, NULL, NULL, &msg) != SQLITE_OK) {
      st_status st = st_fail(err, ST_ERR_DB, "build error: migration %03d_%s does not apply to an empty database: %s",
                             st_db_migrations[i].version, st_db_migrations[i].name, msg ? msg : "?");
      sqlite3_free(msg);
      sqlite3_close(ref);
      return st;
    }
  }
  *out = ref;
  return ST_OK;
}

/* The file's definition of (type, name), normalized, in *def (NULL when it
 * has no such object). */
static int file_definition(sqlite3 *conn, const char *type, const char *name, char **def) {
  *def = NULL;
  sqlite3_stmt *s = NULL;
  int rc = sqlite3_prepare_v2(conn, "SELECT sql FROM main.sqlite_schema WHERE type = ?1 AND name = ?2", -1, &s, NULL);
  if (rc == SQLITE_OK) rc = sqlite3_bind_text(s, 1, type, -1, SQLITE_STATIC);
  if (rc == SQLITE_OK) rc = sqlite3_bind_text(s, 2, name, -1, SQLITE_STATIC);
  if (rc == SQLITE_OK) rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) {
    const unsigned char *sql = sqlite3_column_text(s, 0);
    *def = normalized(sql ? (const char *)sql : "");
    rc = *def ? SQLITE_OK : SQLITE_NOMEM;
  } else if (rc == SQLITE_DONE) {
    rc = SQLITE_OK;
  }
  sqlite3_finalize(s);
  return rc;
}

static st_status read_failed(sqlite3 *conn, const char *path, st_err *err) {
  return st_fail(err, ST_ERR_DB, "database '%s': reading its schema: %s", path, sqlite3_errmsg(conn));
}

/* Every object of the reference is in the file, defined the same way. */
static st_status compare_objects(sqlite3 *ref, sqlite3 *conn, const char *path, int version, st_err *err) {
  sqlite3_stmt *s = NULL;
  if (sqlite3_prepare_v2(ref, "SELECT type, name, sql FROM sqlite_schema WHERE sql IS NOT NULL ORDER BY name", -1, &s,
                         NULL) != SQLITE_OK)
    return st_fail(err, ST_ERR_DB, "reading the reference schema: %s", sqlite3_errmsg(ref));
  st_status st = ST_OK;
  int rc;
  while (st == ST_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    const char *type = (const char *)sqlite3_column_text(s, 0);
    const char *name = (const char *)sqlite3_column_text(s, 1);
    char *want = normalized((const char *)sqlite3_column_text(s, 2));
    char *have = NULL;
    if (!want)
      st = st_fail(err, ST_ERR_NOMEM, "no memory to compare schemas");
    else if (file_definition(conn, type, name, &have) != SQLITE_OK)
      st = read_failed(conn, path, err);
    else if (!have)
      st = st_fail(err, ST_ERR_DB,
                   "database '%s' lacks the %s '%s' of schema version %d (dropped or renamed by hand?); "
                   "refusing to use it",
                   path, type, name, version);
    else if (strcmp(want, have) != 0)
      st = st_fail(err, ST_ERR_DB,
                   "database '%s': its %s '%s' is not the one of schema version %d (altered by hand?); "
                   "refusing to use it",
                   path, type, name, version);
    free(want);
    free(have);
  }
  if (st == ST_OK && rc != SQLITE_DONE)
    st = st_fail(err, ST_ERR_DB, "reading the reference schema: %s", sqlite3_errmsg(ref));
  sqlite3_finalize(s);
  return st;
}

/* A trigger runs on our writes: one the migrations did not create is
 * someone else's code. */
static st_status no_foreign_triggers(sqlite3 *ref, sqlite3 *conn, const char *path, st_err *err) {
  sqlite3_stmt *s = NULL;
  if (sqlite3_prepare_v2(conn, "SELECT name FROM main.sqlite_schema WHERE type = 'trigger' ORDER BY name", -1, &s,
                         NULL) != SQLITE_OK)
    return read_failed(conn, path, err);
  st_status st = ST_OK;
  int rc;
  while (st == ST_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    const char *name = (const char *)sqlite3_column_text(s, 0);
    char *ours = NULL;
    if (file_definition(ref, "trigger", name, &ours) != SQLITE_OK)
      st = st_fail(err, ST_ERR_DB, "reading the reference schema: %s", sqlite3_errmsg(ref));
    else if (!ours)
      st = st_fail(err, ST_ERR_DB,
                   "database '%s' has a trigger '%s' that sparsetune did not create; refusing to use it", path, name);
    free(ours);
  }
  if (st == ST_OK && rc != SQLITE_DONE) st = read_failed(conn, path, err);
  sqlite3_finalize(s);
  return st;
}

st_status st_db_check_schema(sqlite3 *conn, const char *path, int version, st_err *err) {
  sqlite3 *ref = NULL;
  st_status st = build_reference(version, &ref, err);
  if (st == ST_OK) st = compare_objects(ref, conn, path, version, err);
  if (st == ST_OK) st = no_foreign_triggers(ref, conn, path, err);
  sqlite3_close(ref);
  return st;
}
