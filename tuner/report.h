/* report.h - the reports behind `sparsetune show` and `sparsetune regress`.
 *
 * Every function reads an open database (a read-only handle is enough),
 * writes one report to `out`, either as an aligned text table for a person
 * or as a single JSON document for a program, and returns an st_status
 * with the reason in `err`. None of them prints anywhere else or exits.
 * Arguments are checked and the data read before the first byte is
 * written, so a failed call has written nothing (except when writing to
 * `out` itself fails). `db` and `out` stay the caller's.
 *
 * JSON numbers are plain numbers (times in microseconds, ratios as
 * fractions: 0.05 = 5 %); a value that is not finite is written as null.
 */
#ifndef ST_REPORT_H
#define ST_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "error.h"
#include "st_db.h"

/* Writes `s` as a JSON string: quotes, backslashes and control bytes
 * escaped, bytes that are not valid UTF-8 replaced by U+FFFD (NULL: ""). */
void st_json_str(FILE *out, const char *s);

typedef enum st_report_format {
  ST_REPORT_TEXT = 0, /* aligned table, for a terminal                 */
  ST_REPORT_JSON = 1  /* one JSON object (`--json`)                     */
} st_report_format;

/* `show`: the runs, newest first (limit <= 0: all), with their kind, op,
 * suite, device, status, start and finish times and how many measurements
 * are ok / wrong or failed / pruned. JSON: {"runs": [{...}, ...]}. */
st_status st_report_runs(st_db *db, FILE *out, st_report_format format, int limit, st_err *err);

/* `show run ID`: one run's measurements (variant name, shape key, status,
 * median us, spread %, error). JSON: {"run": {...}, "measurements": [...]}.
 * An unknown run id is ST_ERR_INVALID_ARG naming it. */
st_status st_report_run(st_db *db, FILE *out, st_report_format format, int64_t run_id, st_err *err);

/* `show winners DEVICE`: the winners the runtime would load for cards
 * named `device_name` (arch NULL: any arch): op, dispatch key, variant, its
 * us, the default variant's us and the speed-up over it.
 * JSON: {"device": ..., "arch": ..., "winners": [...]}. No winner is not an
 * error (an empty table). */
st_status st_report_winners(st_db *db, FILE *out, st_report_format format, const char *device_name,
                            const char *arch, st_err *err);

/* ---- regress ---------------------------------------------------------------
 *
 * Compares every (variant, shape) measured with status "ok" in both runs.
 * Where both measurements hold 5 or more repetitions (their samples), the
 * rank test of perf_stats.h judges with min_effect = threshold and alpha
 * ST_VERDICT_ALPHA ("test": "rank", with its p). Elsewhere, with change =
 * head / base - 1 and noise = spread_base + spread_head (spread = (max -
 * min) / median, as stored), a pair is
 *   a regression   when change >  max(threshold, noise),
 *   an improvement when change < -max(threshold, noise),
 *   unchanged      otherwise.
 * The table is sorted by change, worst first, and ends with the line
 *   "N compared, R regressions, I improvements, U unchanged, M only in base,
 *    K only in head"
 * where "only in base" counts pairs ok in base but not ok (or absent) in
 * head, and the reverse. Runs of different ops or device models may be
 * compared; the report then starts with a warning. */
#define ST_REGRESS_DEFAULT_THRESHOLD 0.05

typedef struct st_regress_opts {
  int64_t base_run;        /* the reference run                            */
  int64_t head_run;        /* the run under test; != base_run              */
  double threshold;        /* relative, >= 0 (0.05: 5 %)                   */
  st_report_format format;
} st_regress_opts;

typedef struct st_regress_summary {
  int compared, regressions, improvements, unchanged, only_base, only_head;
  int winners_compared, winner_regressions; /* shapes verified in both runs; their winners got slower */
} st_regress_summary;

/* Winners: per shape verified in both runs, the fastest verified variant
 * of each run (what tune dispatches for that shape alone), judged by the
 * same rule; a regression there is what an engine following the tune
 * sees, whether the winner stayed or changed. The text lists those, then
 *   "winners: N shapes compared, R slower"
 * JSON gives every shape's under "winners".
 *
 * Writes the comparison and fills `summary` (may be NULL); the CLI exits 1
 * when summary->regressions > 0 or summary->winner_regressions > 0. Unknown run ids, base == head and a bad
 * threshold are ST_ERR_INVALID_ARG with a message naming the value. */
st_status st_report_regress(st_db *db, FILE *out, const st_regress_opts *opts, st_regress_summary *summary,
                            st_err *err);

#endif
