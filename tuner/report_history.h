/* report_history.h - `sparsetune history`: where, in the runs of a suite,
 * did the time of a (variant, shape) change, and what else changed there?
 *
 * Same manners as report.h: reads an open database (a read-only handle is
 * enough), checks its arguments and reads everything before the first byte
 * of output, writes one text report or one JSON document to `out`, and
 * returns an st_status with the reason in `err`.
 *
 * The runs of the suite (kind tune or bench; of one op when `op` is set;
 * whatever their status: an interrupted run keeps its ok measurements)
 * are split into histories, one per device model (name and arch) and cache
 * mode: a cold run (`--cold`, run_args.h) times something else than a warm
 * one, so, as `regress` refuses to compare them, their times are never put
 * in one series. Within a history, in run order, each (variant, shape)
 * measured "ok" in at least `min_runs` runs gives a series of medians; the
 * change points are st_change_points' (perf_stats.h, default options). For
 * each change point:
 *   - run:    the first run of the series after the change,
 *   - shift:  median of the segment after / median of the segment before
 *             - 1, the segments bounded by the neighbouring change points
 *             (> 0: slower),
 *   - p:      the permutation p-value of the change,
 *   - changed: what differs between the last run before and the first run
 *             after: the card (device row), its driver version (devices
 *             table: a card's row holds the driver it was last seen with,
 *             so a driver update on one card is not visible in its history,
 *             only a change of card), the tool version and the args.
 * A change point is a slowdown when shift > threshold. */
#ifndef ST_REPORT_HISTORY_H
#define ST_REPORT_HISTORY_H

#include <stdint.h>
#include <stdio.h>

#include "history_data.h"
#include "report.h"

/* Writes the history report and fills `summary` (may be NULL). Text: per
 * history a line naming it, then its change points in a table sorted by
 * |shift|, largest first (variant, shape, run, date, shift %, p, what
 * changed). JSON: {"suite", "op", "min_runs", "threshold", "histories":
 * [{"device", "arch", "cache", "runs": [...], "series": [{"variant_id",
 * "variant", "shape", "runs": [ids], "medians_us": [...], "change_points":
 * [{...}]}]}], "summary": {...}}. A NULL or empty suite, min_runs < 1, a
 * bad threshold, and a suite with no run (of that op) are
 * ST_ERR_INVALID_ARG with a message naming the value. The CLI exits 1 when
 * summary->slowdowns > 0. */
st_status st_report_history(st_db *db, FILE *out, const st_history_opts *opts, st_history_summary *summary,
                            st_err *err);

#endif
