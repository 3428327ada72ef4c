/* st_db.h - the one module that talks to SQLite: opening and reading.
 *
 * The module is a reader, linked into libsparsetune, and a writer that
 * only the tuner links (st_db_write.h: the read-write open and every
 * insert and update).
 *
 * The database is the single source of truth between generator, compiler,
 * tuner and runtime. Schema and migrations live in db/migrations/NNN_*.sql
 * (embedded at build time); this module owns every SQL statement.
 *
 * Safety rules:
 *  - A file is "ours" when PRAGMA application_id is ST_DB_APPLICATION_ID.
 *    An empty file (or a new path, in read-write mode) becomes ours.
 *  - A file that is not SQLite, is corrupt, belongs to another application
 *    (application_id differs, or tables exist and it is 0), or has a schema
 *    newer than this build knows is refused with ST_ERR_DB and a message that
 *    says which, and is never written to.
 *  - Read-only opens (the runtime) never write, and refuse an older schema
 *    with a message telling to run `sparsetune` to migrate it.
 *  - A file whose schema objects are not those its schema version's
 *    migrations create (a table dropped or altered by hand, a trigger added)
 *    is refused too.
 *  - Read-write opens use WAL, a busy timeout, and migrate older schemas in one
 *    transaction. Every write function runs in its own transaction unless the
 *    caller holds one from st_db_begin.
 *  - One writer per database: a read-write handle holds the file's writer
 *    lock (writer_lock.h) from open to close; another read-write open waits
 *    up to the busy timeout (10 s) for it, then fails naming the holder. When
 *    the writer closes, the file goes back to rollback-journal mode, so that
 *    at rest it is one self-contained file.
 *  - Read-only opens create nothing beside such a file, and read it on
 *    read-only media or in a folder they cannot write. (A file left in WAL
 *    mode with no -wal, by an older build or while readers were open, is
 *    read with immutable=1 where its folder cannot be written.)
 *  - No connection may cross a fork(): SQLite's locks belong to the process,
 *    and a child that inherits a connection can corrupt the file. Detach the
 *    handle before forking and attach it again after (st_db_detach).
 *
 * Strings returned through row structs point into memory owned by the row and
 * are freed by the matching *_free function; callbacks get rows valid only
 * during the call. A callback returns 0 to go on and nonzero to stop early
 * (the st_db_each_* function then still returns ST_OK); it may call other
 * st_db functions on the same handle.
 *
 * Errors: ST_ERR_INVALID_ARG for a bad argument (a missing or overlong
 * string, a write on a read-only handle, an unknown run id), ST_ERR_DB for
 * anything SQLite reports (the message names the file and the call),
 * ST_ERR_NO_VARIANT when a requested variant or source is absent.
 * A handle is used by one thread at a time.
 */
#ifndef ST_DB_H
#define ST_DB_H

#include <stddef.h>
#include <stdint.h>

#include "device_info.h"
#include "error.h"
#include "params.h"

#define ST_DB_APPLICATION_ID 0x53705475 /* "SpTu" */
#define ST_DB_SCHEMA_VERSION 2

typedef struct st_db st_db;

typedef enum st_db_mode { ST_DB_READONLY = 0, ST_DB_READWRITE = 1 } st_db_mode;

/* Opens an existing database for reading only: what the runtime does.
 * Nothing is written to the file or created beside it. */
st_status st_db_open_readonly(const char *path, st_db **out, st_err *err);
void st_db_close(st_db *db);

/* Closes the handle's connection but keeps the handle, and a read-write
 * handle's writer lock: with no connection in the process, a fork() is
 * safe. st_db_attach opens a connection again, in the parent after the fork
 * or in a child on its copy of the handle (which then works under the
 * parent's lock; its st_db_close leaves the lock to the parent). Calls in
 * between fail with ST_ERR_INVALID_ARG; detaching inside a transaction is
 * refused. */
st_status st_db_detach(st_db *db, st_err *err);
st_status st_db_attach(st_db *db, st_err *err);
int st_db_schema_version(const st_db *db);

/* Explicit transaction around many writes (nesting not supported). */
st_status st_db_begin(st_db *db, st_err *err);
st_status st_db_commit(st_db *db, st_err *err);
void st_db_rollback(st_db *db);

/* ---- sources and variants (written by `generate`) ---- */
typedef struct st_variant_row {
  char id[40];          /* content hash of op, params and source (hex)      */
  char op[32];
  char name[160];       /* human-readable, unique per op                    */
  char source_hash[40]; /* hash of the rendered source (hex)                */
  st_params kernel;     /* compile-time parameters                          */
  st_params launch;     /* launch-time parameters                           */
  int is_default;       /* the op's fallback for shapes with no winner      */
} st_variant_row;

/* Source text of a hash; *text is malloc'ed, caller frees. */
st_status st_db_get_source(st_db *db, const char *source_hash, char **text, st_err *err);
st_status st_db_get_variant(st_db *db, const char *variant_id, st_variant_row *out, st_err *err);
/* Every variant of `op` with is_default = 1 (op NULL: all ops). */
st_status st_db_each_default(st_db *db, const char *op,
                             int (*cb)(void *ctx, const st_variant_row *v), void *ctx, st_err *err);

/* ---- binaries (written by `compile`) ---- */
typedef struct st_binary_row {
  char source_hash[40];
  char arch[16];
  char compiler[32];   /* NVRTC version, "13.0"                           */
  int ok;              /* 0: compile failed, log says why                  */
  void *cubin;         /* owned by the row when read back                  */
  size_t cubin_size;
  int registers;       /* per thread, of the kernel with the most          */
  int spill_bytes;     /* spill stores + loads reported by ptxas           */
  int shared_bytes;    /* static shared memory                             */
  int local_bytes;     /* stack frame                                      */
  double compile_ms;
  char *log;           /* compiler log, owned by the row when read back    */
} st_binary_row;

st_status st_db_has_binary(st_db *db, const char *source_hash, const char *arch, const char *compiler,
                           int *found, st_err *err);
/* The binary for (hash, arch); compiler NULL picks the newest row. *found = 0
 * when there is none. On success with *found, free with st_db_binary_free.
 * cubin holds the compiled bytes whatever form they are stored in (an
 * export's are compressed: db/cubin_blob.h); a stored cubin that does not
 * inflate to them gives ST_ERR_DB naming the arch and source hash. */
st_status st_db_get_binary(st_db *db, const char *source_hash, const char *arch, const char *compiler,
                           st_binary_row *out, int *found, st_err *err);
void st_db_binary_free(st_binary_row *b);

/* ---- runs ---- */
typedef struct st_run_row {
  int64_t id;
  char kind[16];        /* "tune" or "bench"                                */
  char op[32];
  char suite[64];
  int64_t device_id;
  char device_name[128];
  char arch[16];
  char status[16];      /* "running", "done", "interrupted", "failed"       */
  char started[32];     /* UTC, ISO 8601                                    */
  char finished[32];    /* "" while running                                 */
  char args[256];       /* what the run was asked, for resuming             */
  char tool_version[32];
  char env[2048];       /* JSON object the tuner wrote at the start (driver,
                         * NVRTC, card, source hashes...: docs/method.md);
                         * "{}" for runs recorded before schema v2; "" when
                         * writing means "{}"                               */
} st_run_row;

/* The newest run with the same kind, op, suite, device and args whose status is
 * "running" or "interrupted"; *run_id = 0 when there is none. */
st_status st_db_run_find_resumable(st_db *db, const st_run_row *like, int64_t *run_id, st_err *err);
st_status st_db_get_run(st_db *db, int64_t run_id, st_run_row *out, int *found, st_err *err);
/* Runs newest first; limit <= 0 means all. */
st_status st_db_each_run(st_db *db, int limit, int (*cb)(void *ctx, const st_run_row *r), void *ctx,
                         st_err *err);

/* The driver version (cuDriverGetVersion, 13000 = 13.0) of device row
 * `device_id`; *found = 0 when there is no such row. A card's row holds the
 * driver it was last seen with (st_db_put_device updates it in place), so
 * runs on one card all read the newest; runs on two cards of one model
 * read each card's. */
st_status st_db_device_driver(st_db *db, int64_t device_id, int *driver_version, int *found, st_err *err);

/* Measurements of a run by status (for reports); all 0 for an unknown run. */
typedef struct st_run_counts {
  int64_t ok, wrong, failed, pruned;
} st_run_counts;
st_status st_db_run_counts(st_db *db, int64_t run_id, st_run_counts *out, st_err *err);

/* ---- measurements ---- */
typedef struct st_measurement {
  int64_t run_id;
  char variant_id[40];
  char shape_key[256];
  char status[16];      /* "ok", "wrong", "failed", "pruned"                */
  char error[512];      /* why, when not ok                                 */
  double median_us, min_us, max_us;
  double spread;        /* (max - min) / median of the repetitions          */
  int reps, iters;      /* repetitions, launches per repetition             */
  double max_err;       /* verification error measure (op-specific)         */
  char samples[1024];   /* JSON array of per-repetition microseconds        */
} st_measurement;

st_status st_db_has_measurement(st_db *db, int64_t run_id, const char *variant_id, const char *shape_key,
                                int *found, st_err *err);
/* The peer's time of a shape, where its suite recorded one (shape params
 * peer_us and peer_device): *found 1, *peer_us > 0 and the device it was
 * timed on in device[cap] ("" when not named); else *found 0. */
st_status st_db_shape_peer(st_db *db, const char *shape_key, double *peer_us, char *device, size_t cap, int *found,
                           st_err *err);

/* Measurements of a run, joined with the variant name (passed as `name`). */
st_status st_db_each_measurement(st_db *db, int64_t run_id,
                                 int (*cb)(void *ctx, const st_measurement *m, const char *variant_name,
                                           const char *op),
                                 void *ctx, st_err *err);

/* ---- winners ---- */
typedef struct st_winner_row {
  int64_t device_id;
  char op[32];
  char dispatch_key[256];
  st_params dispatch;   /* the dispatch key's fields                        */
  char variant_id[40];
  char variant_name[160];
  int64_t run_id;
  double median_us;     /* worst case over the dispatch key's shapes       */
  double regret;        /* worst-case time / best time over those shapes    */
  char default_variant_id[40];
  double default_us;    /* the default variant, same measure; 0 if unknown  */
} st_winner_row;

/* Winners of every device whose name and arch match (the runtime's view:
 * a model of card, not one card); arch NULL matches any arch. Where several
 * cards of the model have a winner for one (op, dispatch key), the newest
 * written one is returned. Ordered by op, then dispatch key. */
st_status st_db_each_winner(st_db *db, const char *device_name, const char *arch,
                            int (*cb)(void *ctx, const st_winner_row *w), void *ctx, st_err *err);

#endif
