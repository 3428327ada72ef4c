/* history_data.c - the runs of a suite as histories and series
 * (history_data.h). */
#include "history_data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "perf_stats.h"
#include "run_args.h"
#include "run_change.h"

typedef struct gather {
  st_db *db;
  const st_history_opts *opts;
  st_hist_run *runs;
  size_t nruns, cap;
  st_hist_point *pts;
  size_t npts, ptcap;
  size_t cur_run;
  st_status st;
  st_err *err;
} gather;

static int is_kind(const char *kind) { return !strcmp(kind, "tune") || !strcmp(kind, "bench"); }

static int collect_suite_run(void *ctx, const st_run_row *r) {
  gather *g = ctx;
  if (strcmp(r->suite, g->opts->suite) != 0 || !is_kind(r->kind)) return 0;
  if (g->opts->op && strcmp(r->op, g->opts->op) != 0) return 0;
  if (g->nruns == g->cap) {
    size_t cap = g->cap ? 2 * g->cap : 32;
    st_hist_run *v = realloc(g->runs, cap * sizeof *v);
    if (!v) {
      g->st = st_fail(g->err, ST_ERR_NOMEM, "history: out of memory for %zu runs", cap);
      return 1;
    }
    g->runs = v;
    g->cap = cap;
  }
  st_hist_run *h = &g->runs[g->nruns];
  memset(h, 0, sizeof *h);
  h->row = *r;
  h->cold = st_cold_run(r->args);
  g->st = st_run_driver(g->db, r, &h->driver, g->err);
  if (g->st != ST_OK) return 1;
  g->nruns++;
  return 0;
}

static int cmp_run_id(const void *a, const void *b) {
  const st_hist_run *x = a, *y = b;
  return (x->row.id > y->row.id) - (x->row.id < y->row.id);
}

/* Assigns each run its history, in order of first appearance. */
static st_status split_histories(st_hist_data *r, st_err *err) {
  r->hist = calloc(r->nruns, sizeof *r->hist);
  if (!r->hist) return st_fail(err, ST_ERR_NOMEM, "history: out of memory for %zu runs", r->nruns);
  for (size_t i = 0; i < r->nruns; i++) {
    st_hist_run *h = &r->runs[i];
    size_t k = 0;
    while (k < r->nhist && (strcmp(r->hist[k].device, h->row.device_name) || strcmp(r->hist[k].arch, h->row.arch) ||
                            r->hist[k].cold != h->cold))
      k++;
    if (k == r->nhist) {
      st_hist *n = &r->hist[r->nhist++];
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
    st_hist_point *v = realloc(g->pts, cap * sizeof *v);
    if (!v) {
      g->st = st_fail(g->err, ST_ERR_NOMEM, "history: out of memory for %zu measurements", cap);
      return 1;
    }
    g->pts = v;
    g->ptcap = cap;
  }
  st_hist_point *p = &g->pts[g->npts++];
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
  const st_hist_point *x = a, *y = b;
  if (x->history != y->history) return x->history < y->history ? -1 : 1;
  int c = strcmp(x->variant_id, y->variant_id);
  if (c) return c;
  c = strcmp(x->shape, y->shape);
  if (c) return c;
  return (x->run > y->run) - (x->run < y->run);
}

static int same_series(const st_hist_point *a, const st_hist_point *b) {
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

static st_status cut_series(st_hist_series *s, const st_hist_run *runs, st_err *err) {
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
    st_hist_change *c = &s->cps[s->ncps++];
    c->index = i;
    c->before_us = median_of(s->medians + lo, i - lo, scratch);
    c->after_us = median_of(s->medians + i, hi - i, scratch);
    c->shift = c->after_us / c->before_us - 1.0;
    c->p = cp[k].p;
    c->q = cp[k].q;
    const st_hist_run *a = &runs[s->runs[i - 1]], *b = &runs[s->runs[i]];
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
static st_status build_series(st_db *db, const st_hist_point *pts, size_t npts, st_hist_data *r,
                              const st_history_opts *opts, st_err *err) {
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
    st_hist_series *s = &r->ser[r->nser++];
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

void st_hist_free(st_hist_data *r) {
  for (size_t i = 0; i < r->nser; i++) {
    free(r->ser[i].runs);
    free(r->ser[i].medians);
    free(r->ser[i].cps);
  }
  free(r->ser);
  free(r->hist);
  free(r->runs);
  free(r->pts);
}

static void summarize(st_hist_data *r, double threshold) {
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
st_status st_hist_check_opts(const st_history_opts *o, const char *cmd, st_err *err) {
  if (!o) return st_fail(err, ST_ERR_INVALID_ARG, "%s: opts is NULL", cmd);
  if (!o->suite || !o->suite[0]) return st_fail(err, ST_ERR_INVALID_ARG, "%s: --suite NAME is required", cmd);
  if (o->op && !o->op[0]) return st_fail(err, ST_ERR_INVALID_ARG, "%s: --op is empty", cmd);
  if (o->min_runs < 1) return st_fail(err, ST_ERR_INVALID_ARG, "%s: min_runs=%d is not a count >= 1", cmd, o->min_runs);
  if (!(isfinite(o->threshold) && o->threshold >= 0))
    return st_fail(err, ST_ERR_INVALID_ARG, "%s: threshold=%g is not a number >= 0", cmd, o->threshold);
  return ST_OK;
}

st_status st_hist_analyse(st_db *db, const st_history_opts *opts, st_hist_data *r, st_err *err) {
  memset(r, 0, sizeof *r);
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
  r->pts = g.pts;
  r->npts = g.npts;
  if (st == ST_OK) summarize(r, opts->threshold);
  return st;
}
