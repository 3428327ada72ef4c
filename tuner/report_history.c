/* report_history.c - `sparsetune history` (see report_history.h).
 *
 * Reads the suite's runs, splits them into histories (device model, cache
 * mode), gathers every ok measurement of each history, sorts them into
 * series by (variant, shape, run), cuts each long enough series with
 * st_change_points, and writes the change points through the shared
 * output helpers (report_format.h). */
#include "report_history.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "perf_stats.h"
#include "report_format.h"
#include "run_args.h"
#include "run_change.h"

/* ---- runs and histories ------------------------------------------------------ */

typedef struct hist_run {
  st_run_row row;
  int driver;  /* the driver the run saw: env's, else devices.driver_version
                * of its card (that card's latest), 0 if unknown */
  int cold;    /* st_cold_run(args) */
  int history; /* index into histories */
} hist_run;

typedef struct history {
  char device[128], arch[16];
  int cold;
  size_t nruns;
} history;

/* One ok measurement: a point of a series. */
typedef struct point {
  char variant_id[40];
  char shape[256];
  int history; /* the run's */
  size_t run;  /* index into the run array (run order) */
  double median_us;
} point;

typedef struct change {
  size_t index; /* into the series: the first value after the change */
  int64_t run_id, before_run_id;
  double shift; /* median after / median before - 1 */
  double before_us, after_us;
  double p, q;
  char changed[600]; /* "" when nothing recorded differs */
} change;

typedef struct series {
  int history;
  char variant_id[40];
  char variant[160];
  char shape[256];
  size_t n;
  size_t *runs;    /* indices into the run array */
  double *medians; /* us */
  change *cps;
  size_t ncps;
} series;

typedef struct gather {
  st_db *db;
  const st_history_opts *opts;
  hist_run *runs;
  size_t nruns, cap;
  point *pts;
  size_t npts, ptcap;
  size_t cur_run;
  st_status st;
  st_err *err;
} gather;

typedef struct result {
  hist_run *runs;
  size_t nruns;
  history *hist;
  size_t nhist;
  series *ser;
  size_t nser;
  st_history_summary sum;
} result;

static int is_kind(const char *kind) { return !strcmp(kind, "tune") || !strcmp(kind, "bench"); }

static int collect_suite_run(void *ctx, const st_run_row *r) {
  gather *g = ctx;
  if (strcmp(r->suite, g->opts->suite) != 0 || !is_kind(r->kind)) return 0;
  if (g->opts->op && strcmp(r->op, g->opts->op) != 0) return 0;
  if (g->nruns == g->cap) {
    size_t cap = g->cap ? 2 * g->cap : 32;
    hist_run *v = realloc(g->runs, cap * sizeof *v);
    if (!v) {
      g->st = st_fail(g->err, ST_ERR_NOMEM, "history: out of memory for %zu runs", cap);
      return 1;
    }
    g->runs = v;
    g->cap = cap;
  }
  hist_run *h = &g->runs[g->nruns];
  memset(h, 0, sizeof *h);
  h->row = *r;
  h->cold = st_cold_run(r->args);
  g->st = st_run_driver(g->db, r, &h->driver, g->err);
  if (g->st != ST_OK) return 1;
  g->nruns++;
  return 0;
}

static int cmp_run_id(const void *a, const void *b) {
  const hist_run *x = a, *y = b;
  return (x->row.id > y->row.id) - (x->row.id < y->row.id);
}

/* Assigns each run its history, in order of first appearance. */
static st_status split_histories(result *r, st_err *err) {
  r->hist = calloc(r->nruns, sizeof *r->hist);
  if (!r->hist) return st_fail(err, ST_ERR_NOMEM, "history: out of memory for %zu runs", r->nruns);
  for (size_t i = 0; i < r->nruns; i++) {
    hist_run *h = &r->runs[i];
    size_t k = 0;
    while (k < r->nhist && (strcmp(r->hist[k].device, h->row.device_name) || strcmp(r->hist[k].arch, h->row.arch) ||
                            r->hist[k].cold != h->cold))
      k++;
    if (k == r->nhist) {
      history *n = &r->hist[r->nhist++];
      snprintf(n->device, sizeof n->device, "%s", h->row.device_name);
      snprintf(n->arch, sizeof n->arch, "%s", h->row.arch);
      n->cold = h->cold;
    }
    r->hist[k].nruns++;
    h->history = (int)k;
  }
  return ST_OK;
}

static int is_ok_measurement(const st_measurement *m) {
  return !strcmp(m->status, "ok") && isfinite(m->median_us) && m->median_us > 0;
}

static int collect_point(void *ctx, const st_measurement *m, const char *name, const char *op) {
  (void)name;
  (void)op;
  gather *g = ctx;
  if (!is_ok_measurement(m)) return 0;
  if (g->npts == g->ptcap) {
    size_t cap = g->ptcap ? 2 * g->ptcap : 256;
    point *v = realloc(g->pts, cap * sizeof *v);
    if (!v) {
      g->st = st_fail(g->err, ST_ERR_NOMEM, "history: out of memory for %zu measurements", cap);
      return 1;
    }
    g->pts = v;
    g->ptcap = cap;
  }
  point *p = &g->pts[g->npts++];
  snprintf(p->variant_id, sizeof p->variant_id, "%s", m->variant_id);
  snprintf(p->shape, sizeof p->shape, "%s", m->shape_key);
  p->run = g->cur_run;
  p->history = g->runs[g->cur_run].history;
  p->median_us = m->median_us;
  return 0;
}

/* Points sort by history, variant, shape, then run: a series is a run of
 * equal keys. */
static int cmp_point(const void *a, const void *b) {
  const point *x = a, *y = b;
  if (x->history != y->history) return x->history < y->history ? -1 : 1;
  int c = strcmp(x->variant_id, y->variant_id);
  if (c) return c;
  c = strcmp(x->shape, y->shape);
  if (c) return c;
  return (x->run > y->run) - (x->run < y->run);
}

static int same_series(const point *a, const point *b) {
  return a->history == b->history && !strcmp(a->variant_id, b->variant_id) && !strcmp(a->shape, b->shape);
}

/* ---- change points ------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median of v[0..n), n >= 1, using `scratch` (n doubles). */
static double median_of(const double *v, size_t n, double *scratch) {
  memcpy(scratch, v, n * sizeof *v);
  qsort(scratch, n, sizeof *scratch, cmp_double);
  return n % 2 ? scratch[n / 2] : 0.5 * (scratch[n / 2 - 1] + scratch[n / 2]);
}

static st_status cut_series(series *s, const hist_run *runs, st_err *err) {
  st_cp_opts co = st_cp_opts_default();
  st_change_point *cp = calloc(s->n, sizeof *cp);
  double *scratch = calloc(s->n, sizeof *scratch);
  size_t count = 0;
  st_status st = ST_OK;
  if (!cp || !scratch) {
    st = st_fail(err, ST_ERR_NOMEM, "history: out of memory for a series of %zu runs", s->n);
    goto cleanup;
  }
  st = st_change_points(s->medians, s->n, &co, cp, s->n, &count, err);
  if (st != ST_OK) goto cleanup;
  if (count > s->n) count = s->n;
  if (count) {
    s->cps = calloc(count, sizeof *s->cps);
    if (!s->cps) {
      st = st_fail(err, ST_ERR_NOMEM, "history: out of memory for %zu change points", count);
      goto cleanup;
    }
  }
  for (size_t k = 0; k < count; k++) {
    const size_t i = cp[k].index;
    const size_t lo = k ? cp[k - 1].index : 0, hi = k + 1 < count ? cp[k + 1].index : s->n;
    change *c = &s->cps[s->ncps++];
    c->index = i;
    c->before_us = median_of(s->medians + lo, i - lo, scratch);
    c->after_us = median_of(s->medians + i, hi - i, scratch);
    c->shift = c->after_us / c->before_us - 1.0;
    c->p = cp[k].p;
    c->q = cp[k].q;
    const hist_run *a = &runs[s->runs[i - 1]], *b = &runs[s->runs[i]];
    c->before_run_id = a->row.id;
    c->run_id = b->row.id;
    st_run_change(&a->row, a->driver, &b->row, b->driver, c->changed, sizeof c->changed);
  }
cleanup:
  free(cp);
  free(scratch);
  return st;
}

/* The variant's name, from its row ("" when the row is gone). */
static void variant_name(st_db *db, const char *id, char *name, size_t cap) {
  st_variant_row v;
  name[0] = '\0';
  if (st_db_get_variant(db, id, &v, NULL) == ST_OK) snprintf(name, cap, "%s", v.name);
}

/* Builds the series of the sorted points, each cut when long enough. */
static st_status build_series(st_db *db, const point *pts, size_t npts, result *r, const st_history_opts *opts,
                              st_err *err) {
  size_t nkeys = 0;
  for (size_t i = 0; i < npts; i++)
    if (i == 0 || !same_series(&pts[i - 1], &pts[i])) nkeys++;
  r->ser = calloc(nkeys + 1, sizeof *r->ser);
  if (!r->ser) return st_fail(err, ST_ERR_NOMEM, "history: out of memory for %zu series", nkeys);
  for (size_t i = 0; i < npts;) {
    size_t j = i + 1;
    while (j < npts && same_series(&pts[i], &pts[j])) j++;
    const size_t n = j - i;
    if (n < (size_t)opts->min_runs) {
      r->sum.short_series++;
      i = j;
      continue;
    }
    series *s = &r->ser[r->nser++];
    s->history = pts[i].history;
    snprintf(s->variant_id, sizeof s->variant_id, "%s", pts[i].variant_id);
    snprintf(s->shape, sizeof s->shape, "%s", pts[i].shape);
    variant_name(db, s->variant_id, s->variant, sizeof s->variant);
    s->n = n;
    s->runs = calloc(n, sizeof *s->runs);
    s->medians = calloc(n, sizeof *s->medians);
    if (!s->runs || !s->medians) return st_fail(err, ST_ERR_NOMEM, "history: out of memory for a series");
    for (size_t k = 0; k < n; k++) {
      s->runs[k] = pts[i + k].run;
      s->medians[k] = pts[i + k].median_us;
    }
    st_status st = cut_series(s, r->runs, err);
    if (st != ST_OK) return st;
    i = j;
  }
  return ST_OK;
}

static void result_free(result *r) {
  for (size_t i = 0; i < r->nser; i++) {
    free(r->ser[i].runs);
    free(r->ser[i].medians);
    free(r->ser[i].cps);
  }
  free(r->ser);
  free(r->hist);
  free(r->runs);
}

static void summarize(result *r, double threshold) {
  r->sum.histories = (int)r->nhist;
  r->sum.runs = (int)r->nruns;
  r->sum.series = (int)r->nser;
  for (size_t i = 0; i < r->nser; i++)
    for (size_t k = 0; k < r->ser[i].ncps; k++) {
      const double shift = r->ser[i].cps[k].shift;
      r->sum.change_points++;
      if (shift > threshold) r->sum.slowdowns++;
      if (shift < -threshold) r->sum.speedups++;
    }
}

/* Reads the runs and their measurements, and cuts the series. */
static st_status analyse(st_db *db, const st_history_opts *opts, result *r, st_err *err) {
  gather g = {.db = db, .opts = opts, .st = ST_OK, .err = err};
  st_status st = st_db_each_run(db, 0, collect_suite_run, &g, err);
  if (st == ST_OK) st = g.st;
  r->runs = g.runs;
  r->nruns = g.nruns;
  if (st != ST_OK) return st;
  if (r->nruns == 0) {
    if (opts->op)
      return st_fail(err, ST_ERR_INVALID_ARG,
                     "history: no tune or bench run of suite '%s' with op '%s' in the database (see sparsetune show "
                     "runs)",
                     opts->suite, opts->op);
    return st_fail(err, ST_ERR_INVALID_ARG,
                   "history: no tune or bench run of suite '%s' in the database (see sparsetune show runs)",
                   opts->suite);
  }
  qsort(r->runs, r->nruns, sizeof *r->runs, cmp_run_id);
  st = split_histories(r, err);
  for (size_t i = 0; i < r->nruns && st == ST_OK; i++) {
    g.cur_run = i;
    st = st_db_each_measurement(db, r->runs[i].row.id, collect_point, &g, err);
    if (st == ST_OK) st = g.st;
  }
  if (st == ST_OK) {
    if (g.npts > 1) qsort(g.pts, g.npts, sizeof *g.pts, cmp_point);
    st = build_series(db, g.pts, g.npts, r, opts, err);
  }
  free(g.pts);
  if (st == ST_OK) summarize(r, opts->threshold);
  return st;
}

/* ---- output ------------------------------------------------------------------------ */

static const char *cache_name(int cold) { return cold ? "cold" : "warm"; }

static void json_change(FILE *out, const series *s, const change *c, const hist_run *runs, double threshold) {
  const hist_run *after = &runs[s->runs[c->index]], *before = &runs[s->runs[c->index - 1]];
  rpt_json_key(out, "index", 1);
  fprintf(out, "%zu", c->index);
  rpt_json_kv_int(out, "run_id", (long long)c->run_id);
  rpt_json_kv_str(out, "started", after->row.started);
  rpt_json_kv_int(out, "before_run_id", (long long)c->before_run_id);
  rpt_json_kv_num(out, "median_before_us", c->before_us);
  rpt_json_kv_num(out, "median_after_us", c->after_us);
  rpt_json_kv_num(out, "shift", c->shift);
  rpt_json_kv_num(out, "p", c->p);
  rpt_json_kv_num(out, "q", c->q);
  rpt_json_kv_str(out, "verdict", c->shift > threshold ? "slower" : c->shift < -threshold ? "faster" : "small");
  fputs(",\"changed\":{", out);
  st_run_change_json(out, &before->row, before->driver, &after->row, after->driver);
  rpt_json_kv_str(out, "summary", c->changed);
  fputc('}', out);
}

static void json_series(FILE *out, const series *s, const hist_run *runs, double threshold) {
  rpt_json_key(out, "variant_id", 1);
  st_json_str(out, s->variant_id);
  rpt_json_kv_str(out, "variant", s->variant);
  rpt_json_kv_str(out, "shape", s->shape);
  fputs(",\"runs\":[", out);
  for (size_t k = 0; k < s->n; k++) fprintf(out, k ? ",%lld" : "%lld", (long long)runs[s->runs[k]].row.id);
  fputs("],\"medians_us\":[", out);
  for (size_t k = 0; k < s->n; k++) {
    if (k) fputc(',', out);
    rpt_json_num(out, s->medians[k]);
  }
  fputs("],\"change_points\":[", out);
  for (size_t k = 0; k < s->ncps; k++) {
    fputs(k ? ",{" : "{", out);
    json_change(out, s, &s->cps[k], runs, threshold);
    fputc('}', out);
  }
  fputc(']', out);
}

static void history_json(FILE *out, const st_history_opts *o, const result *r) {
  fputs("{\"suite\":", out);
  st_json_str(out, o->suite);
  rpt_json_key(out, "op", 0);
  if (o->op)
    st_json_str(out, o->op);
  else
    fputs("null", out);
  rpt_json_kv_int(out, "min_runs", o->min_runs);
  rpt_json_kv_num(out, "threshold", o->threshold);
  fputs(",\"histories\":[", out);
  for (size_t h = 0; h < r->nhist; h++) {
    fputs(h ? ",{" : "{", out);
    rpt_json_key(out, "device", 1);
    st_json_str(out, r->hist[h].device);
    rpt_json_kv_str(out, "arch", r->hist[h].arch);
    rpt_json_kv_str(out, "cache", cache_name(r->hist[h].cold));
    fputs(",\"runs\":[", out);
    int first = 1;
    for (size_t i = 0; i < r->nruns; i++) {
      if (r->runs[i].history != (int)h) continue;
      fputs(first ? "{" : ",{", out);
      first = 0;
      rpt_json_run_members(out, &r->runs[i].row);
      rpt_json_kv_int(out, "driver_version", r->runs[i].driver);
      fputc('}', out);
    }
    fputs("],\"series\":[", out);
    first = 1;
    for (size_t i = 0; i < r->nser; i++) {
      if (r->ser[i].history != (int)h) continue;
      fputs(first ? "{" : ",{", out);
      first = 0;
      json_series(out, &r->ser[i], r->runs, o->threshold);
      fputc('}', out);
    }
    fputs("]}", out);
  }
  fputs("],\"summary\":{", out);
  rpt_json_key(out, "histories", 1);
  fprintf(out, "%d", r->sum.histories);
  rpt_json_kv_int(out, "runs", r->sum.runs);
  rpt_json_kv_int(out, "series", r->sum.series);
  rpt_json_kv_int(out, "short_series", r->sum.short_series);
  rpt_json_kv_int(out, "change_points", r->sum.change_points);
  rpt_json_kv_int(out, "slowdowns", r->sum.slowdowns);
  rpt_json_kv_int(out, "speedups", r->sum.speedups);
  fputs("}}\n", out);
}

typedef struct cp_ref {
  const series *s;
  const change *c;
} cp_ref;

/* Largest |shift| first; ties by variant, shape, run so the order is stable. */
static int cmp_cp_ref(const void *a, const void *b) {
  const cp_ref *x = a, *y = b;
  const double ax = fabs(x->c->shift), ay = fabs(y->c->shift);
  if (ax != ay) return ax < ay ? 1 : -1;
  int c = strcmp(x->s->variant, y->s->variant);
  if (c) return c;
  c = strcmp(x->s->shape, y->s->shape);
  if (c) return c;
  return (x->c->run_id > y->c->run_id) - (x->c->run_id < y->c->run_id);
}

static st_status history_text_one(FILE *out, const result *r, size_t h, cp_ref *refs, st_err *err) {
  size_t nseries = 0, n = 0;
  int64_t first = 0, last = 0;
  for (size_t i = 0; i < r->nruns; i++) {
    if (r->runs[i].history != (int)h) continue;
    if (!first) first = r->runs[i].row.id;
    last = r->runs[i].row.id;
  }
  for (size_t i = 0; i < r->nser; i++) {
    if (r->ser[i].history != (int)h) continue;
    nseries++;
    for (size_t k = 0; k < r->ser[i].ncps; k++) refs[n++] = (cp_ref){&r->ser[i], &r->ser[i].cps[k]};
  }
  fprintf(out, "%s (%s), %s: %zu runs (%lld..%lld), %zu series, %zu change points\n", r->hist[h].device,
          r->hist[h].arch, cache_name(r->hist[h].cold), r->hist[h].nruns, (long long)first, (long long)last, nseries,
          n);
  if (n == 0) return ST_OK;
  qsort(refs, n, sizeof *refs, cmp_cp_ref);
  static const char *const heads[] = {"variant", "shape", "run", "date", "shift %", "p", "what changed"};
  rpt_table t = {7, heads, "llrlrrl", NULL, 0, 0};
  st_status st = ST_OK;
  for (size_t i = 0; i < n && st == ST_OK; i++) {
    const series *s = refs[i].s;
    const change *c = refs[i].c;
    char run[24], date[17], shift[32], p[32];
    snprintf(date, sizeof date, "%.16s", r->runs[s->runs[c->index]].row.started);
    snprintf(p, sizeof p, "%.2g", c->p);
    st = rpt_table_row(&t, err, s->variant[0] ? s->variant : s->variant_id, s->shape,
                       rpt_fmt_int(run, sizeof run, (long long)c->run_id), date,
                       rpt_fmt_pct(shift, sizeof shift, "%+.1f", c->shift), p,
                       c->changed[0] ? c->changed : "nothing recorded");
  }
  if (st == ST_OK) st = rpt_table_print(&t, out, err);
  rpt_table_free(&t);
  return st;
}

static st_status history_text(FILE *out, const st_history_opts *o, const result *r, st_err *err) {
  fprintf(out,
          "history of suite %s, op %s: %d runs, %d histories; series with %d+ ok runs, cut by E-Divisive; a "
          "slowdown is a shift beyond %.1f %%\n",
          o->suite, o->op ? o->op : "any", r->sum.runs, r->sum.histories, o->min_runs, 100.0 * o->threshold);
  cp_ref *refs = calloc((size_t)r->sum.change_points + 1, sizeof *refs);
  if (!refs) return st_fail(err, ST_ERR_NOMEM, "history: out of memory for %d change points", r->sum.change_points);
  st_status st = ST_OK;
  for (size_t h = 0; h < r->nhist && st == ST_OK; h++) st = history_text_one(out, r, h, refs, err);
  free(refs);
  if (st == ST_OK)
    fprintf(out, "%d series, %d left out with fewer than %d ok runs, %d change points, %d slowdowns, %d speedups\n",
            r->sum.series, r->sum.short_series, o->min_runs, r->sum.change_points, r->sum.slowdowns, r->sum.speedups);
  return st;
}

st_status st_report_history(st_db *db, FILE *out, const st_history_opts *opts, st_history_summary *summary,
                            st_err *err) {
  if (summary) memset(summary, 0, sizeof *summary);
  if (!opts) return st_fail(err, ST_ERR_INVALID_ARG, "history: opts is NULL");
  st_status st = rpt_check_common(db, out, opts->format, err);
  if (st != ST_OK) return st;
  if (!opts->suite || !opts->suite[0]) return st_fail(err, ST_ERR_INVALID_ARG, "history: --suite NAME is required");
  if (opts->op && !opts->op[0]) return st_fail(err, ST_ERR_INVALID_ARG, "history: --op is empty");
  if (opts->min_runs < 1)
    return st_fail(err, ST_ERR_INVALID_ARG, "history: min_runs=%d is not a count >= 1", opts->min_runs);
  if (!(isfinite(opts->threshold) && opts->threshold >= 0))
    return st_fail(err, ST_ERR_INVALID_ARG, "history: threshold=%g is not a number >= 0", opts->threshold);
  result r;
  memset(&r, 0, sizeof r);
  st = analyse(db, opts, &r, err);
  if (st == ST_OK) {
    if (opts->format == ST_REPORT_JSON)
      history_json(out, opts, &r);
    else
      st = history_text(out, opts, &r, err);
  }
  if (st == ST_OK && summary) *summary = r.sum;
  result_free(&r);
  return st == ST_OK ? rpt_finish_output(out, err) : st;
}
