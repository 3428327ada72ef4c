/* st_db_export.h - a compact runtime database: what the runtime reads of a
 * tuned database and nothing else (the tuner's side of the database module,
 * like st_db_write.h; the runtime library does not link it).
 *
 * An export has the schema of any database, written through the read-write
 * open and its migrations, so st_open reads it as it reads any. It holds:
 *  - the winners the runtime's query (st_db_each_winner) returns, for every
 *    device model or one, for every op or some: per (device model, arch,
 *    op, dispatch key) the newest row, the one a reader of the source gets;
 *  - the variants those winners name (their own and their default), with
 *    parameters, names, ids and source hashes, and source rows without
 *    text (sources.text is ''): the runtime never compiles a winner;
 *  - per (winner's source, its device's arch) the binary row the runtime
 *    loads (st_db_get_binary, newest compiler), when that compile succeeded,
 *    its cubin stored zlib-compressed (cubin_blob.h; st_db_get_binary
 *    gives back the compiled bytes);
 *  - the runs and devices those winners refer to.
 * No measurements, shapes, source text, failed compiles, other compilers'
 * binaries, nor the default variants' binaries (the runtime compiles its
 * built-in variants at first use).
 *
 * Its meta table marks it: "exported_from" (the source's path),
 * "exported_at", "exported_filter" and the counts. A read-write open
 * (st_db_open) refuses a marked file: tuning goes into the source, which is
 * exported again. */
#ifndef ST_DB_EXPORT_H
#define ST_DB_EXPORT_H

#include <signal.h>
#include <stdint.h>

#include "st_db.h"

/* Which winners to export. */
typedef struct st_db_export_filter {
  const char *device_name; /* the device model named exactly so; NULL: every model */
  const char *ops;         /* "op" or "op,op,..." (names not checked here); NULL: every op */
  /* The winners of this op and dispatch key left out (both set), as if
   * that key had never been tuned (`sparsetune eval --leave-one-out`);
   * NULL: none. */
  const char *leave_out_op, *leave_out_key;
} st_db_export_filter;

typedef struct st_db_export_counts {
  int64_t winners, variants, binaries; /* rows in the export */
  /* The exported cubins' bytes: as compiled (what st_db_get_binary gives
   * back), and as stored in the export (compressed). */
  int64_t cubin_bytes, stored_cubin_bytes;
} st_db_export_counts;

/* Writes the export of `src` (any open handle; it is only read, in one read
 * transaction, so one snapshot) into `dst_path`, which must be absent or
 * empty. `source_name` is recorded as "exported_from". The rows go in one
 * transaction; the file is closed, back in rollback-journal mode (one
 * self-contained file), before this returns, and checked to be. `stop`
 * (NULL: never) is polled between rows: set, the export fails
 * ("interrupted"). On failure `dst_path` is left for the caller to remove:
 * it is the caller's file, and a temporary one (cmd_export.c). */
st_status st_db_export(st_db *src, const char *dst_path, const st_db_export_filter *filter, const char *source_name,
                       volatile sig_atomic_t *stop, st_db_export_counts *counts, st_err *err);

/* What the export mark of a database says; exported = 0 for one that was
 * not exported (the rest is then empty). */
typedef struct st_db_export_mark {
  int exported;
  char from[4200];  /* the source database's path when it was exported   */
  char at[32];      /* UTC, ISO 8601                                     */
  char filter[320]; /* "device=NAME op=OP,OP without=OP:KEY", or "" for everything */
  int64_t winners, variants, binaries;
} st_db_export_mark;

st_status st_db_get_export_mark(st_db *db, st_db_export_mark *out, st_err *err);

/* ST_OK for a database that was not exported; else ST_ERR_DB and the
 * message a writing command gives ("'X' is an exported runtime database
 * (from Y); tune into the source database and export again"). */
st_status st_db_refuse_exported(st_db *db, st_err *err);

#endif
