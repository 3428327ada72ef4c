/* history_data.h - the runs of a suite as histories and series: what
 * `history` prints and `report --html` draws (report_history.h says how
 * runs are split and series cut).
 *
 * st_hist_analyse reads every tune and bench run of the suite (of one op
 * when opts->op is set) with its ok measurements, splits the runs into
 * histories (device model and arch, cache mode), builds one series of
 * medians per (history, variant, shape) with min_runs or more ok runs and
 * cuts it with st_change_points (perf_stats.h). It only reads. */
#ifndef ST_HISTORY_DATA_H
#define ST_HISTORY_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "report.h"
#include "st_db.h"

#define ST_HISTORY_DEFAULT_MIN_RUNS 8
#define ST_HISTORY_DEFAULT_THRESHOLD 0.05

typedef struct st_history_opts {
  const char *suite; /* required, as runs.suite holds it                 */
  const char *op;    /* NULL: every op of the suite                      */
  int min_runs;      /* >= 1: fewest ok runs a series needs              */
  double threshold;  /* >= 0: a slowdown is a shift beyond it (0.05: 5%) */
  st_report_format format;
} st_history_opts;

typedef struct st_history_summary {
  int histories;    /* (device model, cache mode) groups                  */
  int runs;         /* runs of the suite read                             */
  int series;       /* series with min_runs or more ok runs               */
  int short_series; /* series with fewer, left out                        */
  int change_points;
  int slowdowns; /* change points with shift > threshold               */
  int speedups;  /* change points with shift < -threshold              */
} st_history_summary;

typedef struct st_hist_run {
  st_run_row row;
  int driver;  /* the driver the run saw: env's, else devices.driver_version
                * of its card (that card's latest), 0 if unknown */
  int cold;    /* st_cold_run(args) */
  int history; /* index into histories */
} st_hist_run;

typedef struct st_hist {
  char device[128], arch[16];
  int cold;
  size_t nruns;
} st_hist;

/* One ok measurement: a point of a series. */
typedef struct st_hist_point {
  char variant_id[40];
  char shape[256];
  int history; /* the run's */
  size_t run;  /* index into the run array (run order) */
  double median_us;
} st_hist_point;

typedef struct st_hist_change {
  size_t index; /* into the series: the first value after the change */
  int64_t run_id, before_run_id;
  double shift; /* median after / median before - 1 */
  double before_us, after_us;
  double p, q;
  char changed[600]; /* "" when nothing recorded differs */
} st_hist_change;

typedef struct st_hist_series {
  int history;
  char variant_id[40];
  char variant[160];
  char shape[256];
  size_t n;
  size_t *runs;    /* indices into the run array */
  double *medians; /* us */
  st_hist_change *cps;
  size_t ncps;
} st_hist_series;

typedef struct st_hist_data {
  st_hist_run *runs; /* the suite's runs, by id                        */
  size_t nruns;
  st_hist *hist;
  size_t nhist;
  st_hist_series *ser; /* those of min_runs or more ok runs, each cut    */
  size_t nser;
  st_hist_point *pts; /* every ok measurement, sorted by history,
                         variant, shape, run                           */
  size_t npts;
  st_history_summary sum;
} st_hist_data;

/* ST_OK when `o` asks for something st_hist_analyse can do: a suite, an op
 * that is NULL or not empty, min_runs >= 1, a threshold >= 0; else
 * ST_ERR_INVALID_ARG naming the value, the message starting with `cmd`
 * ("history"). */
st_status st_hist_check_opts(const st_history_opts *o, const char *cmd, st_err *err);

/* Fills *r (zeroed first; st_hist_free it whatever the result). A NULL
 * or empty suite is the caller's to refuse; a suite with no run (of the
 * op) is ST_ERR_INVALID_ARG naming it. */
st_status st_hist_analyse(st_db *db, const st_history_opts *opts, st_hist_data *r, st_err *err);

void st_hist_free(st_hist_data *r);

#endif
