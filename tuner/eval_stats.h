/* eval_stats.h - regret statistics for `sparsetune eval`.
 *
 * A shape's regret is how much slower a choice ran than the oracle (the
 * winner tuned on that very shape): time / oracle time - 1. The summary
 * gives the median, the 95th percentile (nearest rank) and the maximum,
 * and a histogram over fixed bins. */
#ifndef ST_EVAL_STATS_H
#define ST_EVAL_STATS_H

#include <stdio.h>

/* Upper edges of the histogram bins but the last: <= 1%, <= 3%, <= 10%,
 * <= 25%, more. */
#define ST_REGRET_BINS 5
extern const double st_regret_bin_edges[ST_REGRET_BINS - 1];

typedef struct st_regret_summary {
  int n;
  double median, p95, max;
  int hist[ST_REGRET_BINS];
} st_regret_summary;

/* Summarizes n regrets (n >= 0; NaNs are left out). */
void st_regret_summarize(const double *regret, int n, st_regret_summary *out);

/* "<= 1%", ..., "> 25%". */
const char *st_regret_bin_label(int bin);

/* One line: "n 100: median 1.2%, p95 8.0%, max 21.3%; <= 1%: 40, ...". */
void st_regret_print(FILE *f, const char *what, const st_regret_summary *s);

/* The summary as a JSON object (no newline). */
void st_regret_print_json(FILE *f, const st_regret_summary *s);

#endif
