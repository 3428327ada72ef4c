/* run_args.h - marks in a run's args (runs.args) that change what its times
 * mean, so that runs are resumed and compared only like with like. */
#ifndef ST_RUN_ARGS_H
#define ST_RUN_ARGS_H

#include <string.h>

/* Appended last, after a space: the run timed the paged caches cold in L2
 * (`--cold`, tuner/cold.h). */
#define ST_COLD_RUN_ARG "cache=cold"

/* Whether a run's args end with the cold mark. */
static inline int st_cold_run(const char *args) {
  if (!args) return 0;
  const size_t n = strlen(args), m = strlen(" " ST_COLD_RUN_ARG);
  return n >= m && strcmp(args + n - m, " " ST_COLD_RUN_ARG) == 0;
}

#endif
