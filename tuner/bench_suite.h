/* bench_suite.h - a suite's shapes timed through the runtime's dispatch, as
 * `sparsetune bench` times them (cmd_bench.c), for commands that compare
 * such times (`sparsetune eval`). */
#ifndef ST_BENCH_SUITE_H
#define ST_BENCH_SUITE_H

#include "generator.h"

typedef struct st_bench_time {
  char status[16];   /* "ok", "wrong" or "failed" */
  double us;         /* the median, when ok */
  char variant[200]; /* "id name" of what ran */
  char error[400];
} st_bench_time;

/* Times every shape of `shapes` on `device` through a handle on `db_path`
 * (NULL: no database, the built-in variants), inputs from `seed`, results
 * checked against the reference. out[i] is shape i's; a shape that fails
 * says why there and the others go on. ST_OK unless nothing could be timed
 * (no GPU, the database refused: the message says why). */
st_status st_bench_time_shapes(const st_shape *shapes, int n, const char *db_path, int device, unsigned long long seed,
                               st_bench_time *out, st_err *err);

#endif
