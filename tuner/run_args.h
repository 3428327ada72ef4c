/* run_args.h - marks in a run's args (runs.args) that change what its times
 * mean, so that runs are resumed and compared only like with like. */
#ifndef ST_RUN_ARGS_H
#define ST_RUN_ARGS_H

#include <stdio.h>
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

/* The args a tune records in runs.args: what it was asked for (op NULL:
 * "*"), then the marks. A run is resumed, and an eval's oracle reused, only
 * by a command whose args are the same text. */
static inline void st_tune_run_args(char *buf, size_t cap, const char *suite, const char *op, unsigned long long seed,
                                    const char *match, int cold, int search_model) {
  snprintf(buf, cap, "suite=%s op=%s seed=%llu%s%s%s%s", suite, op ? op : "*", seed, match ? " match=" : "",
           match ? match : "", cold ? " " ST_COLD_RUN_ARG : "", search_model ? " search=model" : "");
}

#endif
