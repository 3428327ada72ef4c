/* verify_twice.h - the verify step of every op harness (op_harness.h): the
 * variant launched twice on poisoned outputs, each result compared with the
 * reference. The second launch is a CUDA graph replay (st_replay_once), as
 * the timing and engines run a variant, so one that breaks under capture or
 * leaves its workspace unready for a replay fails here, before it is timed.
 * The harness describes its outputs and its comparison; this runs the two
 * launches and writes the verdict. */
#ifndef ST_VERIFY_TWICE_H
#define ST_VERIFY_TWICE_H

#include <stddef.h>
#include <stdint.h>

#include "timing.h"

/* One device output: `n` elements of `elem_bytes` (2 or 4) at `d`, poisoned
 * before each launch with `poison` + run (a value no correct kernel writes:
 * NaN, or an id no row holds; different for the two launches, so that an
 * element only the first launch wrote fails the second), then copied to
 * `host` for the comparison. */
typedef struct st_verify_buf {
  CUdeviceptr d; /* 0: no such output */
  void *host;
  size_t n;
  int elem_bytes;
  uint32_t poison;
} st_verify_buf;

typedef struct st_verify_out {
  st_verify_buf buf[2];
  /* After the outputs are on the host: how many items are wrong (0: all
   * right), the op's error measure in *worst and the first wrong item in
   * `why`. */
  int (*check)(void *ctx, double *worst, char *why, size_t cap);
  void *ctx;
  const char *item; /* what `check` counts, singular: "row", "(token, head) pair" */
} st_verify_out;

/* op_harness.h's verify over `out`, launching `bound` with `launch`. */
st_status st_verify_twice(const st_cu *cu, CUstream stream, st_launch_fn launch, void *bound, const st_verify_out *out,
                          int *ok, double *max_err, char *msg, size_t cap, st_err *err);

#endif
