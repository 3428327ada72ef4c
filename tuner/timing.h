/* timing.h - GPU time of one op call, measured as an engine runs it.
 *
 * The call is captured once into a CUDA graph; the graph is replayed
 * `warmup` times, then `reps` repetitions of `iters` back-to-back replays are
 * timed with CUDA events. A repetition's figure is its elapsed time / iters;
 * the result is the median of the repetitions, with min, max and spread
 * (max - min) / median kept. Host launch cost is outside the numbers.
 *
 * Something else on the machine (a host thread descheduled while the GPU
 * drains its queue, another process's work) can slow several repetitions
 * of one measurement by 10-30%: the median moves with them. With
 * `retry_spread` set, a measurement whose spread exceeds it is taken again,
 * all repetitions, up to ST_TIMING_ATTEMPTS times in all, and the quietest
 * attempt (least spread) is kept: the same method, on a set of
 * repetitions nothing disturbed.
 *
 * With `flush_bytes` set, a scratch buffer that large (twice L2) is
 * written before the warm-up, so that a measurement starts from the same
 * cache state whatever was timed before it. Without it the tune's order
 * leaked into its numbers: register-load index_decode variants timed after
 * bulk-copy variants on the same pool inherited the pool's blocks in L2
 * and kept them (B = 1 128K 12.6 us), while alone, as bench and an engine
 * run them, they reach a steady state with less of it there (15.4 us), so
 * the tune picked them over variants that run at 13.0 in every process
 * (docs/kernels/index_decode.md, 2026-11-27).
 *
 * Cold-cache timing (`--cold`, tuner/cold.h): the op's harness readies
 * several input sets that read different pages of its paged pools; a
 * graph is captured for each, and the replays go through them in turn, so
 * that a replay finds in L2 none of what the replays before it read. */
#ifndef ST_TIMING_H
#define ST_TIMING_H

#include "cuda_driver.h"
#include "error.h"

#include <stdint.h>

#define ST_TIMING_MAX_REPS 32

typedef st_status (*st_launch_fn)(void *ctx, CUstream stream, st_err *err);
/* Points the launches of ctx at input set i (0: the case's own). */
typedef st_status (*st_rotate_fn)(void *ctx, int i, st_err *err);

#define ST_TIMING_MAX_ROTATIONS 128
#define ST_TIMING_ATTEMPTS 3
/* tune and bench: flush_bytes = this x the device's L2 size. */
#define ST_TIMING_FLUSH_L2 2
/* bench (and its decode steps) and tune: the spread above which a
 * measurement is taken again. Undisturbed decode rows measure 0.1-1%. */
#define ST_BENCH_RETRY_SPREAD 0.03
#define ST_TUNE_RETRY_SPREAD 0.05

typedef struct st_timing_opts {
  int warmup;           /* replays before timing                               */
  double warmup_ms;     /* > 0: keep replaying (in batches of `warmup`) until
                           this much GPU time has passed: an idle GPU clocks
                           down and needs ~0.1 s of load to clock back up     */
  int reps;             /* timed repetitions, 1..ST_TIMING_MAX_REPS             */
  int iters;            /* replays per repetition; 0 = enough for target_rep_ms */
  double target_rep_ms; /* with iters 0: aim for this long a repetition          */
  int max_iters;        /* with iters 0: at most this many replays              */
  double prune_us;      /* > 0: after a short probe slower than this, stop      */
  int rotations;        /* > 1: input sets 0..rotations-1 through `rotate`, a
                           graph each, replayed in turn; set 0 again at the end */
  st_rotate_fn rotate;
  double retry_spread; /* > 0: a spread above this is timed again (see above)  */
  int64_t flush_bytes; /* > 0: this many bytes written before the warm-up, so
                          nothing timed before is left in L2 (see above)     */
} st_timing_opts;

typedef struct st_timing {
  double median_us, min_us, max_us, spread;
  int reps, iters;
  int attempts; /* sets of repetitions taken (1 unless retried)   */
  int pruned;   /* 1: only the probe ran (reps 1), it was too slow */
  double samples_us[ST_TIMING_MAX_REPS];
} st_timing;

st_status st_time_graph(const st_cu *cu, CUstream stream, st_launch_fn fn, void *ctx, const st_timing_opts *o,
                        st_timing *t, st_err *err);

/* fn's launches captured into a CUDA graph as st_time_graph captures them,
 * replayed once and waited for (verification of what the timing runs). */
st_status st_replay_once(const st_cu *cu, CUstream stream, st_launch_fn fn, void *ctx, st_err *err);

/* After attempt t (summarized): keeps in *kept the quieter of *kept and *t
 * (kept->attempts == 0: nothing kept yet), counts the attempt in
 * kept->attempts, and returns 1 where another attempt is due: the kept
 * spread is above retry_spread (> 0) and fewer than ST_TIMING_ATTEMPTS ran. */
int st_timing_keep_quietest(st_timing *kept, const st_timing *t, double retry_spread);

/* Writes the samples as a JSON array ("[1.25,1.27]") into buf. */
void st_timing_samples_json(const st_timing *t, char *buf, size_t cap);

#endif
