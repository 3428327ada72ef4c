/* eval_leave_out.h - `sparsetune eval --leave-one-out`: each shape of a
 * tuned suite timed as if its own dispatch key had never been tuned. */
#ifndef ST_EVAL_LEAVE_OUT_H
#define ST_EVAL_LEAVE_OUT_H

#include "bench_suite.h"

/* Times every shape of `shapes` (tuned into `db_path`) through a runtime
 * database holding every winner of `db_path` but those of the shape's own
 * (op, dispatch key): an export of the rest into a temporary file in
 * $TMPDIR (default /tmp), made once per key and removed after. Inputs from
 * `seed`, results checked, as st_bench_time_shapes. out[i] is shape i's.
 * ST_OK unless nothing could be timed; an interrupt (st_cli_stop) stops it
 * with "interrupted". */
st_status st_eval_leave_one_out(const st_shape *shapes, int n, const char *db_path, int device, unsigned long long seed,
                                st_bench_time *out, st_err *err);

#endif
