/* worker.h - verifying and timing variants where a faulting kernel cannot
 * take the tuner down.
 *
 * An illegal address poisons the whole CUDA context, and a kernel can hang.
 * So the tuner process itself never touches the GPU: it forks a worker per
 * shape, which loads the driver, builds the case (inputs and reference) and
 * runs the jobs in order, sending one result per job through a pipe. If the
 * worker dies or stops answering, the job it was on is reported failed with
 * the reason, and a fresh worker goes on with the next job. A worker dies
 * with the tuner, and never holds a database connection. */
#ifndef ST_WORKER_H
#define ST_WORKER_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "device_info.h"
#include "error.h"
#include "op_harness.h"
#include "st_db.h"
#include "timing.h"

typedef struct st_job {
  const st_variant_row *variant;
  const void *cubin; /* the variant's binary for this device */
  size_t cubin_size;
} st_job;

typedef struct st_job_outcome {
  char status[16];   /* "ok", "wrong", "failed", "pruned"           */
  char error[512];
  double max_err;
  st_timing timing;  /* for "ok" and "pruned"                         */
} st_job_outcome;

typedef struct st_worker_opts {
  int device;            /* CUDA ordinal                                  */
  uint64_t seed;         /* inputs of the shape                           */
  int ref_threads;       /* CPU threads for inputs and the reference      */
  st_timing_opts timing;
  int cold;              /* cold-cache timing (cold.h)                    */
  double prune_factor;   /* > 0: stop timing a variant whose probe is this
                            many times slower than the best so far        */
  double best_us;        /* best median known before the first job (0: none) */
  int job_timeout_s;     /* one job's verify + time                       */
  int setup_timeout_s;   /* building the case                             */
  st_db *db;             /* the caller's database, detached across each
                            fork (fork_child.h); NULL: none is open        */
} st_worker_opts;

typedef void (*st_outcome_fn)(void *ctx, int index, const st_job_outcome *out);

/* Runs jobs[0..n) on `shape`; on_result is called in this process, in job
 * order, once per job. Returns early (ST_OK) when *stop becomes non-zero.
 * Fails only when no worker can build the case (no driver, no device, bad
 * shape): then no job has a result and `err` says why. */
st_status st_run_jobs(const st_op_harness *h, const st_params *shape, const st_job *jobs, int n,
                      const st_worker_opts *o, st_outcome_fn on_result, void *ctx, volatile sig_atomic_t *stop,
                      st_err *err);

/* Device information read in a short-lived child, so this process never
 * initializes CUDA (which must not happen before fork). Call it before any
 * database is open: the probe's child has no handle to detach. */
st_status st_probe_device(int ordinal, st_device_info *info, st_err *err);

#endif
