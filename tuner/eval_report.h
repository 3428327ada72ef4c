/* eval_report.h - what `sparsetune eval` prints: per shape the oracle's
 * time, the database's choice's and the built-in variant's, with their
 * regrets; the choices more than 5% off the oracle with the variants that
 * ran; the regret summaries per kind (decode, prefill, all) and per op;
 * as a table or as one JSON document. */
#ifndef ST_EVAL_REPORT_H
#define ST_EVAL_REPORT_H

#include <stdio.h>

#include "bench_suite.h"
#include "cli.h"
#include "generator.h"

/* One judged shape. */
typedef struct st_eval_row {
  const st_shape *shape;
  const char *kind; /* "decode" or "prefill" */
  st_bench_time oracle, ours, builtin;
  double regret_ours, regret_builtin; /* NaN when a time is missing */
} st_eval_row;

/* t's time over the oracle's, less 1; NaN when either did not run. */
double st_eval_regret(const st_bench_time *t, const st_bench_time *oracle);

/* The table, the misses and the summaries (cli: leave_one_out names the
 * columns). */
void st_eval_print_table(FILE *f, const st_cli *cli, const st_eval_row *rows, int n);

/* One JSON document: the run's arguments (cli), the oracle database, every
 * row and the summaries ("summary": decode, prefill, all, by_op). */
void st_eval_print_json(FILE *f, const st_cli *cli, const char *oracle, const st_eval_row *rows, int n);

#endif
