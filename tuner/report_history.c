/* report_history.c - `sparsetune history` (see report_history.h).
 *
 * The suite's histories and cut series come from st_hist_analyse
 * (history_data.h); this file writes their change points as text or JSON
 * through the shared output helpers (report_format.h). */
#include "report_history.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "perf_stats.h"
#include "report_format.h"
#include "run_args.h"
#include "run_change.h"

/* ---- output ------------------------------------------------------------------------ */

static const char *cache_name(int cold) { return cold ? "cold" : "warm"; }

static void json_change(FILE *out, const st_hist_series *s, const st_hist_change *c, const st_hist_run *runs,
                        double threshold) {
  const st_hist_run *after = &runs[s->runs[c->index]], *before = &runs[s->runs[c->index - 1]];
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

static void json_series(FILE *out, const st_hist_series *s, const st_hist_run *runs, double threshold) {
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

static void history_json(FILE *out, const st_history_opts *o, const st_hist_data *r) {
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
  const st_hist_series *s;
  const st_hist_change *c;
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

static st_status history_text_one(FILE *out, const st_hist_data *r, size_t h, cp_ref *refs, st_err *err) {
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
    const st_hist_series *s = refs[i].s;
    const st_hist_change *c = refs[i].c;
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

static st_status history_text(FILE *out, const st_history_opts *o, const st_hist_data *r, st_err *err) {
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
  st_status st = st_hist_check_opts(opts, "history", err);
  if (st == ST_OK) st = rpt_check_common(db, out, opts->format, err);
  if (st != ST_OK) return st;
  st_hist_data r;
  memset(&r, 0, sizeof r);
  st = st_hist_analyse(db, opts, &r, err);
  if (st == ST_OK) {
    if (opts->format == ST_REPORT_JSON)
      history_json(out, opts, &r);
    else
      st = history_text(out, opts, &r, err);
  }
  if (st == ST_OK && summary) *summary = r.sum;
  st_hist_free(&r);
  return st == ST_OK ? rpt_finish_output(out, err) : st;
}
