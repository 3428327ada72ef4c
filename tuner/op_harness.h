/* op_harness.h - what the tuner needs of an op to verify and time variants.
 *
 * One harness per op (tuner/ops/<op>.c). A "case" is one shape's inputs,
 * built as an engine would (random data, paged pools larger than L2,
 * scattered block tables) plus the double-precision reference of it. A
 * "bound" variant is a case with one compiled variant planned on it (its
 * functions, launch plan and workspace), ready to launch. */
#ifndef ST_OP_HARNESS_H
#define ST_OP_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_driver.h"
#include "device_info.h"
#include "error.h"
#include "ops/op_list.h"
#include "params.h"

/* How a case is built, beyond its shape. */
typedef struct st_case_opts {
  uint64_t seed; /* of the inputs                                      */
  int threads;   /* CPU threads for the inputs and the reference        */
  int cold;      /* paged pools grown for cold-cache timing (cold.h)    */
} st_case_opts;

typedef struct st_op_harness {
  const char *op;
  /* Inputs on the device for `shape`, and their reference. *out is freed by
   * case_destroy. */
  st_status (*case_create)(const st_cu *cu, const st_device_info *dev, const st_params *shape, const st_case_opts *o,
                           void **out, st_err *err);
  void (*case_destroy)(void *c);
  /* The arguments the runtime is called with for `shape`, without a
   * device: `args` (an st_<op>_args, e.g. the op's member of st_op_args)
   * gets every tensor with the shape, strides and dtype case_create gives
   * it (one function of the harness makes the geometry of both; paged
   * pools have a warm case's pages), every data pointer a stand-in
   * (ST_STAND_IN, ops/op.h), NULL where the shape does not want the tensor
   * (lse=0). They pass the op's check_args, so what the runtime would run
   * for a shape (its dispatch key, its plan) is known without a GPU. */
  st_status (*dispatch_args)(const st_params *shape, void *args, st_err *err);
  /* Checks the variant fits, plans it, takes its kernels from `mod` and a
   * cleared workspace. ST_ERR_NO_VARIANT: does not fit this shape. */
  st_status (*bind)(void *c, const st_params *kernel, const st_params *launch, CUmodule mod, void **bound, st_err *err);
  /* Binds the runtime library's dispatch instead of one variant (bench):
   * launches go through the public st_<op> entry point of `rt`, a
   * `st_handle *`, with a workspace of the size it reports. */
  st_status (*bind_runtime)(void *c, void *rt, void **bound, st_err *err);
  st_status (*launch)(void *bound, CUstream stream, st_err *err);
  /* Poisons the outputs, launches twice (the second time as a CUDA graph
   * replay, which also checks that the workspace was left ready for one),
   * synchronizes and compares each result with the reference
   * (st_verify_twice, verify_twice.h). *ok = 0 with `msg` when wrong;
   * *max_err is the op's error measure. A non-OK status means CUDA failed
   * (a fault). */
  st_status (*verify)(void *bound, CUstream stream, int *ok, double *max_err, char *msg, size_t cap, st_err *err);
  void (*unbind)(void *bound);
  /* Cold-cache timing (tuner/cold.h), for a case built cold: readies `n`
   * input sets, set 0 the case's own, the others with other block tables
   * over its pools. NULL where the op reads no paged pool. */
  st_status (*cold_sets)(void *c, int n, st_err *err);
  /* Points a bound variant's launches at input set i (0 <= i < n). */
  st_status (*rotate)(void *bound, int i, st_err *err);
  /* The decode ops: launches through bind_runtime from now on pass pdl = on
   * (programmatic dependent launch, sparsetune.h). NULL for other ops. */
  void (*set_pdl)(void *c, int on);
  /* Bytes the op must move at least (each input read once, outputs written
   * once), for GB/s figures. */
  double (*min_bytes)(const void *c);
  /* FLOPs as docs/method.md counts them, for TFLOP/s figures; NULL
   * for the bandwidth-bound decode ops. */
  double (*flops)(const void *c);
  /* CUDA-graph replays per timed repetition in `sparsetune bench`, as the
   * anchors measured the peer: 40 for decode ops, 10 for prefill ops. */
  int bench_iters;
} st_op_harness;

/* The harness of `op`, or NULL. */
const st_op_harness *st_harness_find(const char *op);

/* st_<op>_harness, defined in ops/<op>.c for each op of the runtime's list. */
#define ST_HARNESS_DECL(name, NAME) extern const st_op_harness st_##name##_harness;
ST_OP_LIST(ST_HARNESS_DECL)
#undef ST_HARNESS_DECL

#endif
