/* compile.h - kernel sources to cubins with NVRTC, in parallel, cached in the
 * database by (source hash, arch, compiler).
 *
 * Every variant's rendered source is self-contained CUDA C++; it is compiled
 * with -std=c++17 -default-device and IEEE math (no fast math: the
 * kernels choose their own intrinsics), with ptxas -v so that the resource
 * report (registers, spills, static shared memory, stack frame) is read from
 * the log and kept next to the cubin.
 *
 * A source that does not compile is a result, not an error: its row has
 * ok = 0 and the log says why, and it is stored like any other so it is not
 * compiled again. Only NVRTC API failures, bad arguments and database errors
 * are errors. */
#ifndef ST_COMPILE_H
#define ST_COMPILE_H

#include <signal.h>

#include "error.h"
#include "generator.h"
#include "st_db_write.h"

/* The result of one compile. bin.source_hash is left empty (st_compile_one
 * does not know it); bin.cubin and bin.log are malloc'ed and owned by the
 * struct: free with st_compiled_free. */
typedef struct st_compiled {
  st_binary_row bin;
} st_compiled;

/* Checks that `arch` names a cubin target of this NVRTC: "sm_" and the
 * compute capability, optionally followed by "a" (sm_90 and later) or "f"
 * (sm_100 and later): "sm_89", "sm_90a", "sm_100f". Fails with
 * ST_ERR_INVALID_ARG and a message saying what is accepted otherwise. */
st_status st_compile_check_arch(const char *arch, st_err *err);

/* "NVRTC <major>.<minor>" of the NVRTC this process loaded, the `compiler`
 * of every row it writes. */
st_status st_compile_compiler(char out[32], st_err *err);

/* Compiles `source` (NUL-terminated) for `arch`; `name` is the program name
 * the log's messages carry ("index_decode_k16.cu"). Fills *out (zeroed
 * first): ok, cubin (only when ok), log (always, possibly ""), compiler,
 * arch, compile_ms and the ptxas resource report. Thread-safe: separate
 * calls may run on separate threads. Errors: ST_ERR_INVALID_ARG for a bad
 * argument or arch, ST_ERR_NOMEM, ST_ERR_CUDA for an NVRTC API failure
 * (the message names the call); on error *out holds nothing to free. */
st_status st_compile_one(const char *source, const char *name, const char *arch, st_compiled *out, st_err *err);
void st_compiled_free(st_compiled *c);

/* Progress of st_compile_all, called on the calling thread: once after the
 * cache lookup (last_name NULL), then after each compile. done counts cached
 * and compiled sources out of total distinct ones; failed counts compiles
 * this call with ok = 0; eta_seconds < 0 while unknown. */
typedef void (*st_compile_progress_fn)(void *ctx, int done, int total, int cached, int failed, double eta_seconds,
                                       const char *last_name);

typedef struct st_compile_stats {
  int total;       /* distinct source hashes among the variants          */
  int cached;      /* already in the database for (hash, arch, compiler) */
  int compiled;    /* compiled and stored by this call (ok or not)       */
  int from_disk;   /* of those, taken from the disk cache (compile_cache.h) */
  int failed;      /* of those, ok = 0                                   */
  int interrupted; /* 1 when *stop ended the call before everything ran  */
  double seconds;  /* wall time of the call                              */
} st_compile_stats;

/* Compiles the distinct sources of v[0..n) (by row.source_hash; a variant
 * with source NULL has its text read from the database) for `arch` that the
 * database lacks, on `jobs` threads (<= 0: the online CPUs), and stores each
 * result with st_db_put_binary. Only the calling thread touches `db`; results
 * are written in small transactions as they arrive, so an interruption loses
 * at most the compiles in flight. When *stop (may be NULL) becomes non-zero
 * no new compile starts; those in flight finish and are stored, then the call
 * returns ST_OK with stats->interrupted = 1. The caller must not hold a
 * transaction (st_db_begin) on `db`, and the sources must be in it already
 * (st_db_put_source: binaries reference them). `progress` and `stats` may be
 * NULL. On error (bad argument, NVRTC API failure, database error) the
 * results stored before it stay stored and `err` says what failed. */
st_status st_compile_all(st_db *db, const st_gen_variant *v, int n, const char *arch, int jobs,
                         st_compile_progress_fn progress, void *ctx, volatile sig_atomic_t *stop,
                         st_compile_stats *stats, st_err *err);

#endif
