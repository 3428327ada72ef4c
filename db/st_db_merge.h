/* st_db_merge.h - one database's rows merged into another: the databases of
 * several machines, or of shards of one tune, combined into one that
 * `history`, `regress`, `report` and the runtime read as if one machine
 * had done it all.
 *
 * Every row of the source goes in, none twice:
 *   - sources, variants, shapes and binaries are keyed by content (hashes,
 *     keys): a row the destination has is kept as it is;
 *   - a card is its uuid: a new one is added; a known one takes the
 *     source's driver and last_seen when the source saw it later;
 *   - a run is (card, kind, op, suite, started, args): a new run is added
 *     under a new id (the ids of two databases overlap); a run the
 *     destination has already (merged before, or the same file copied) is
 *     the same run, and takes the source's status and end when the source
 *     finished it later (a resumed copy);
 *   - measurements follow their run, keyed (run, variant, shape): those
 *     the destination lacks are added;
 *   - a winner is (card, op, dispatch key): the newer (by its `updated`)
 *     of the two rows stays, pointing at its run in the destination.
 * So merging the same source twice adds nothing the second time, and the
 * order of merging several sources does not change what the destination
 * holds, ids aside.
 *
 * The source is read in one snapshot through a read-only handle (never
 * written); the destination is written in one transaction: a failure or a
 * stop leaves it as it was. An exported database (st_db_export.h) is
 * refused as a source: it holds winners without their measurements or
 * sources. */
#ifndef ST_DB_MERGE_H
#define ST_DB_MERGE_H

#include <signal.h>
#include <stdint.h>

#include "st_db_write.h"

typedef struct st_db_merge_counts {
  int64_t devices, sources, variants, shapes, binaries; /* rows added        */
  int64_t runs, runs_known;                             /* added, already in */
  int64_t runs_updated;                                 /* known runs that took the source's later end  */
  int64_t measurements;
  int64_t winners; /* added or replaced by a newer row                     */
} st_db_merge_counts;

/* ST_OK when `src` may be merged: ST_ERR_INVALID_ARG naming it for an
 * exported database. st_db_merge checks it too; a command merging several
 * checks them all first. */
st_status st_db_merge_check_source(st_db *src, st_err *err);

/* Merges `src` (a read-only handle, no transaction open) into `dst` (a
 * read-write handle, no transaction open). `stop` (may be NULL) is polled
 * between rows: set, the merge stops and rolls back (ST_ERR_DB, "merge
 * interrupted"). On failure dst holds what it held before and *counts is
 * zero. */
st_status st_db_merge(st_db *src, st_db *dst, volatile sig_atomic_t *stop, st_db_merge_counts *counts, st_err *err);

#endif
