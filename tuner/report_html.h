/* report_html.h - `sparsetune report --html`: the timing history of a
 * suite as one self-contained HTML page (inline CSS and SVG, no script, no
 * network), for a person to read and a CI job to keep as an artifact.
 *
 * Built on the same analysis as `history` (history_data.h: runs split by
 * device model and cache mode, series of medians per (variant, shape),
 * change points). For each history the page has its runs (what changed
 * from the run before, as `history` names it) and, per shape:
 *   - a chart of the shape's winner over the runs (the fastest verified
 *     variant of each run, as `regress` judges winners), with the series of
 *     the variants that won it at some run (at most ST_HTML_MAX_LINES) and
 *     their change points, and the peer's time where the suite recorded one;
 *   - a table of the winners over time: each run where the winner changed
 *     or its time moved beyond the threshold, and the first and last runs.
 * Marked as regressions: a change point of a drawn series shifting beyond
 * the threshold (slower), and a winner whose time rose beyond the
 * threshold from the run before. The page opens with a list of both, each
 * linking to its chart.
 *
 * Same manners as the other reports: reads an open database (read-only is
 * enough), checks its arguments and reads everything before the first
 * byte of output. */
#ifndef ST_REPORT_HTML_H
#define ST_REPORT_HTML_H

#include <stdio.h>

#include "history_data.h"

#define ST_HTML_MAX_LINES 4        /* variant series drawn beside the winner's */
#define ST_HTML_DEFAULT_MIN_RUNS 2 /* a series of two runs already has a slope */

typedef struct st_html_summary {
  int histories, runs, shapes;
  int change_points;      /* of the drawn series                     */
  int slowdowns;          /* of those, shifts beyond the threshold   */
  int winner_regressions; /* winner steps beyond the threshold       */
} st_html_summary;

/* Writes the page for opts->suite (opts->op, min_runs and threshold as in
 * st_report_history; opts->format is not read) and fills `summary` (may be
 * NULL). `db_name` is shown as the source. A NULL or empty suite,
 * min_runs < 1, a bad threshold and a suite with no run are
 * ST_ERR_INVALID_ARG naming the value. */
st_status st_report_html(st_db *db, FILE *out, const st_history_opts *opts, const char *db_name,
                         st_html_summary *summary, st_err *err);

#endif
