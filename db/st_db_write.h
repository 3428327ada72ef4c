/* st_db_write.h - writing a database: the tuner's side of the database
 * module (st_db.h has the rest, and the rules every open follows). The
 * runtime library does not link these functions.
 *
 * A read-write open is the only one that creates or migrates a file, takes
 * the writer lock and switches the file to WAL while it writes. */
#ifndef ST_DB_WRITE_H
#define ST_DB_WRITE_H

#include "st_db.h"

/* Opens `path` in `mode`. ST_DB_READONLY is st_db_open_readonly.
 * ST_DB_READWRITE creates a new file or migrates an older one, and holds
 * the database's writer lock until st_db_close (waiting up to 10 s for
 * another writer to let go, then failing with its pid and command). It
 * refuses, untouched, a database that st_db_export wrote (st_db_export.h):
 * an export holds too little to tune into. */
st_status st_db_open(const char *path, st_db_mode mode, st_db **out, st_err *err);

/* Inserts or updates the row of this card (by uuid); returns its id. */
st_status st_db_put_device(st_db *db, const st_device_info *dev, int64_t *device_id, st_err *err);

/* INSERT OR IGNORE of the source text under its hash. */
st_status st_db_put_source(st_db *db, const char *source_hash, const char *op, const st_params *kernel,
                           const char *text, st_err *err);

/* INSERT OR IGNORE of the variant (ids are content hashes: same id, same row). */
st_status st_db_put_variant(st_db *db, const st_variant_row *v, st_err *err);

/* Idempotent: a (source_hash, arch, compiler) already stored keeps its row. */
st_status st_db_put_binary(st_db *db, const st_binary_row *b, st_err *err);

/* key: canonical text of all shape parameters; dispatch_key: the subset the
 * runtime can know on the host (winners are per dispatch key). */
st_status st_db_put_shape(st_db *db, const char *key, const char *op, const st_params *shape,
                          const char *dispatch_key, st_err *err);

st_status st_db_run_begin(st_db *db, const st_run_row *run, int64_t *run_id, st_err *err);

st_status st_db_run_finish(st_db *db, int64_t run_id, const char *status, st_err *err);

/* INSERT OR REPLACE keyed by (run, variant, shape). */
st_status st_db_put_measurement(st_db *db, const st_measurement *m, st_err *err);

st_status st_db_put_winner(st_db *db, const st_winner_row *w, st_err *err);

#endif
