/* bench_case.h - one shape's case launched through the runtime's dispatch,
 * as `bench` times it: built, bound to libsparsetune and verified once
 * (cmd_bench.c's rows, step_graph.c's decode steps). */
#ifndef ST_BENCH_CASE_H
#define ST_BENCH_CASE_H

#include <stddef.h>

#include "op_harness.h"

typedef struct st_bench_case {
  const st_op_harness *h;
  void *kase, *bound; /* NULL until made; st_bench_case_free releases both */
} st_bench_case;

/* Builds `shape` of op h as `o` says, binds `rt`'s dispatch (a st_handle *)
 * and verifies one launch on `stream`. ST_OK with *ok 0 and `why` filled
 * when the result is wrong. The case is left in `c` whatever the outcome:
 * release it with st_bench_case_free. */
st_status st_bench_case_make(const st_op_harness *h, const st_cu *cu, const st_device_info *dev, const st_params *shape,
                             const st_case_opts *o, void *rt, CUstream stream, st_bench_case *c, int *ok, char *why,
                             size_t cap, st_err *err);

void st_bench_case_free(st_bench_case *c);

#endif
