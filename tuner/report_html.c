/* report_html.c - `sparsetune report --html` (see report_html.h).
 *
 * The analysis is st_hist_analyse's; here each history's ok measurements
 * are grouped by shape and run to find each run's winner, the series to
 * draw are picked among the cut ones, and the page is written: CSS in one
 * <style>, each chart an inline <svg> whose points carry <title> tooltips,
 * every text from the database escaped. */
#include "report_html.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report_format.h"
#include "run_change.h"

/* ---- the page's geometry and colours ----------------------------------------- */

enum { CHART_W = 760, CHART_H = 240, M_LEFT = 70, M_RIGHT = 16, M_TOP = 14, M_BOTTOM = 34, MAX_X_LABELS = 20 };

static const char *const LINE_COLOURS[ST_HTML_MAX_LINES] = {"#ff7f0e", "#2ca02c", "#9467bd", "#8c564b"};
#define WINNER_COLOUR "#1f77b4"
#define MIN_SPAN 0.25 /* the y axis spans at least this fraction of its top value */

static const char STYLE[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}"
    "h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ccc}h3{font-size:14px;"
    "font-family:monospace;word-break:break-all}"
    "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:2px 8px;text-align:left;"
    "font-size:12px}th{background:#f4f4f4}td.num{text-align:right}td.id{font-family:monospace;color:#666}"
    ".meta{color:#555}.slower{color:#d62728;font-weight:bold}.faster{color:#2ca02c}"
    "ul.legend{list-style:none;padding:0;margin:2px 0;font-size:12px}ul.legend li{display:inline-block;"
    "margin-right:16px}ul.legend span{display:inline-block;width:18px;height:3px;vertical-align:middle;"
    "margin-right:4px}svg.timing{background:#fff;border:1px solid #eee}"
    "svg text{font:11px system-ui,sans-serif;fill:#444}";

/* ---- escaping --------------------------------------------------------------------- */

/* At most n bytes of s, escaped. */
static void put_escaped_n(FILE *out, const char *s, size_t n) {
  for (; s && *s && n; s++, n--) {
    switch (*s) {
    case '&': fputs("&amp;", out); break;
    case '<': fputs("&lt;", out); break;
    case '>': fputs("&gt;", out); break;
    case '"': fputs("&quot;", out); break;
    case '\'': fputs("&#39;", out); break;
    default: fputc(*s, out);
    }
  }
}

static void put_escaped(FILE *out, const char *s) { put_escaped_n(out, s, (size_t)-1); }

/* A variant id as the runtime's messages shorten it. */
#define ID_CHARS 12

/* ---- each shape's runs and winners ----------------------------------------------- */

/* A run's winner of one shape: the fastest ok measurement. */
typedef struct win {
  const st_hist_point *pt; /* NULL: the shape was not measured ok in the run */
  int slower;              /* time above the previous winner's by the threshold */
  int changed;             /* another variant than the previous winner      */
} win;

typedef struct shape_view {
  const char *shape;
  win *wins; /* per position of the history's runs */
  const st_hist_series *lines[ST_HTML_MAX_LINES];
  int nlines;
  double peer_us;
  char peer_device[128];
  int flagged; /* regressions on it: slow change points + slower winners */
} shape_view;

typedef struct hist_view {
  size_t *runs; /* indices into data->runs, in run order */
  size_t nruns;
  int *pos; /* data->runs index -> position here, -1: another history */
  shape_view *shapes;
  size_t nshapes;
} hist_view;

typedef struct page {
  st_db *db;
  const st_history_opts *opts;
  const st_hist_data *d;
  hist_view *views;
  st_html_summary sum;
} page;

static int cmp_str_ptr(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The distinct shapes measured ok in history h, sorted. */
static st_status shapes_of(const st_hist_data *d, int h, const char ***out, size_t *n, st_err *err) {
  const char **v = calloc(d->npts + 1, sizeof *v);
  if (!v) return st_fail(err, ST_ERR_NOMEM, "report: out of memory for %zu measurements", d->npts);
  size_t k = 0;
  for (size_t i = 0; i < d->npts; i++)
    if (d->pts[i].history == h) v[k++] = d->pts[i].shape;
  if (k > 1) qsort(v, k, sizeof *v, cmp_str_ptr);
  size_t u = 0;
  for (size_t i = 0; i < k; i++)
    if (u == 0 || strcmp(v[u - 1], v[i])) v[u++] = v[i];
  *out = v;
  *n = u;
  return ST_OK;
}

/* How many runs variant `id` wins in `wins`. */
static int wins_of(const win *wins, size_t n, const char *id) {
  int c = 0;
  for (size_t i = 0; i < n; i++) c += wins[i].pt && !strcmp(wins[i].pt->variant_id, id);
  return c;
}

/* The cut series of the shape's winners (most runs won first), at most
 * ST_HTML_MAX_LINES. */
static void pick_lines(const st_hist_data *d, int h, shape_view *sv, size_t nruns) {
  for (size_t i = 0; i < d->nser; i++) {
    const st_hist_series *s = &d->ser[i];
    if (s->history != h || strcmp(s->shape, sv->shape)) continue;
    const int won = wins_of(sv->wins, nruns, s->variant_id);
    if (!won) continue;
    int at = sv->nlines;
    while (at > 0 && wins_of(sv->wins, nruns, sv->lines[at - 1]->variant_id) < won) at--;
    if (at >= ST_HTML_MAX_LINES) continue;
    const int last = sv->nlines < ST_HTML_MAX_LINES ? sv->nlines : ST_HTML_MAX_LINES - 1;
    for (int j = last; j > at; j--) sv->lines[j] = sv->lines[j - 1];
    sv->lines[at] = s;
    if (sv->nlines < ST_HTML_MAX_LINES) sv->nlines++;
  }
}

static void mark_winners(shape_view *sv, size_t n, double threshold) {
  const win *prev = NULL;
  for (size_t i = 0; i < n; i++) {
    win *w = &sv->wins[i];
    if (!w->pt) continue;
    if (prev) {
      w->changed = strcmp(w->pt->variant_id, prev->pt->variant_id) != 0;
      w->slower = w->pt->median_us / prev->pt->median_us - 1.0 > threshold;
      sv->flagged += w->slower;
    }
    prev = w;
  }
}

static st_status build_shape(page *p, int h, hist_view *hv, shape_view *sv, st_err *err) {
  const st_hist_data *d = p->d;
  sv->wins = calloc(hv->nruns + 1, sizeof *sv->wins);
  if (!sv->wins) return st_fail(err, ST_ERR_NOMEM, "report: out of memory for %zu runs", hv->nruns);
  for (size_t i = 0; i < d->npts; i++) {
    const st_hist_point *pt = &d->pts[i];
    if (pt->history != h || strcmp(pt->shape, sv->shape)) continue;
    win *w = &sv->wins[hv->pos[pt->run]];
    if (!w->pt || pt->median_us < w->pt->median_us) w->pt = pt;
  }
  mark_winners(sv, hv->nruns, p->opts->threshold);
  pick_lines(d, h, sv, hv->nruns);
  for (int l = 0; l < sv->nlines; l++)
    for (size_t k = 0; k < sv->lines[l]->ncps; k++) {
      p->sum.change_points++;
      if (sv->lines[l]->cps[k].shift > p->opts->threshold) {
        p->sum.slowdowns++;
        sv->flagged++;
      }
    }
  for (size_t i = 0; i < hv->nruns; i++) p->sum.winner_regressions += sv->wins[i].slower;
  int found = 0;
  return st_db_shape_peer(p->db, sv->shape, &sv->peer_us, sv->peer_device, sizeof sv->peer_device, &found, err);
}

static st_status build_history(page *p, int h, st_err *err) {
  const st_hist_data *d = p->d;
  hist_view *hv = &p->views[h];
  hv->runs = calloc(d->nruns + 1, sizeof *hv->runs);
  hv->pos = calloc(d->nruns + 1, sizeof *hv->pos);
  if (!hv->runs || !hv->pos) return st_fail(err, ST_ERR_NOMEM, "report: out of memory for %zu runs", d->nruns);
  for (size_t i = 0; i < d->nruns; i++) {
    hv->pos[i] = -1;
    if (d->runs[i].history != h) continue;
    hv->pos[i] = (int)hv->nruns;
    hv->runs[hv->nruns++] = i;
  }
  const char **names = NULL;
  size_t n = 0;
  st_status st = shapes_of(d, h, &names, &n, err);
  if (st != ST_OK) return st;
  hv->shapes = calloc(n + 1, sizeof *hv->shapes);
  if (!hv->shapes) st = st_fail(err, ST_ERR_NOMEM, "report: out of memory for %zu shapes", n);
  for (size_t k = 0; k < n && st == ST_OK; k++) {
    hv->shapes[hv->nshapes].shape = names[k];
    st = build_shape(p, h, hv, &hv->shapes[hv->nshapes++], err);
  }
  p->sum.shapes += (int)hv->nshapes;
  free(names);
  return st;
}

static void page_free(page *p) {
  if (!p->views) return;
  for (size_t h = 0; h < p->d->nhist; h++) {
    hist_view *hv = &p->views[h];
    for (size_t k = 0; k < hv->nshapes; k++) free(hv->shapes[k].wins);
    free(hv->shapes);
    free(hv->runs);
    free(hv->pos);
  }
  free(p->views);
}

/* ---- the chart -------------------------------------------------------------------- */

typedef struct scale {
  double lo, hi; /* us at the bottom and top */
  size_t n;      /* positions on the x axis  */
} scale;

static double x_at(const scale *s, double pos) {
  const double w = CHART_W - M_LEFT - M_RIGHT;
  return M_LEFT + (s->n > 1 ? pos * w / (double)(s->n - 1) : w / 2);
}

static double y_at(const scale *s, double us) {
  return M_TOP + (s->hi - us) / (s->hi - s->lo) * (CHART_H - M_TOP - M_BOTTOM);
}

static void widen(double *lo, double *hi, double v) {
  if (!(v > 0) || !isfinite(v)) return;
  if (v < *lo) *lo = v;
  if (v > *hi) *hi = v;
}

static scale scale_of(const shape_view *sv, size_t n) {
  double lo = INFINITY, hi = 0;
  for (size_t i = 0; i < n; i++)
    if (sv->wins[i].pt) widen(&lo, &hi, sv->wins[i].pt->median_us);
  for (int l = 0; l < sv->nlines; l++)
    for (size_t k = 0; k < sv->lines[l]->n; k++) widen(&lo, &hi, sv->lines[l]->medians[k]);
  widen(&lo, &hi, sv->peer_us);
  if (!(hi > 0)) lo = hi = 1;
  /* At least MIN_SPAN of the top value tall, so that run-to-run noise of
   * a few percent looks as small as it is. */
  const double span = hi - lo < MIN_SPAN * hi ? MIN_SPAN * hi : hi - lo, mid = (hi + lo) / 2;
  if (hi - lo < span) {
    lo = mid - span / 2;
    hi = mid + span / 2;
  }
  const double pad = 0.08 * (hi - lo);
  return (scale){lo - pad > 0 ? lo - pad : 0, hi + pad, n};
}

static void chart_axes(FILE *out, const page *p, const hist_view *hv, const scale *s) {
  fprintf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#999\"/>", M_LEFT, CHART_H - M_BOTTOM,
          CHART_W - M_RIGHT, CHART_H - M_BOTTOM);
  fprintf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#999\"/>", M_LEFT, M_TOP, M_LEFT,
          CHART_H - M_BOTTOM);
  for (int t = 0; t <= 4; t++) {
    const double us = s->lo + (s->hi - s->lo) * t / 4.0, y = y_at(s, us);
    fprintf(out, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#f0f0f0\"/>", M_LEFT + 1, y,
            CHART_W - M_RIGHT, y);
    fprintf(out, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.4g us</text>", M_LEFT - 4, y + 4, us);
  }
  const size_t every = (hv->nruns + MAX_X_LABELS - 1) / MAX_X_LABELS;
  for (size_t i = 0; i < hv->nruns; i += every ? every : 1)
    fprintf(out, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%lld</text>", x_at(s, (double)i),
            CHART_H - M_BOTTOM + 14, (long long)p->d->runs[hv->runs[i]].row.id);
  fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">run</text>", (M_LEFT + CHART_W - M_RIGHT) / 2,
          CHART_H - 4);
}

static void chart_peer(FILE *out, const shape_view *sv, const scale *s) {
  if (!(sv->peer_us > 0)) return;
  const double y = y_at(s, sv->peer_us);
  fprintf(out,
          "<line class=\"peer\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#7f7f7f\" "
          "stroke-dasharray=\"6 4\"><title>peer: %.4g us",
          M_LEFT, y, CHART_W - M_RIGHT, y, sv->peer_us);
  if (sv->peer_device[0]) {
    fputs(" on ", out);
    put_escaped(out, sv->peer_device);
  }
  fprintf(out, "</title></line><text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">peer</text>", CHART_W - M_RIGHT - 2,
          y - 3);
}

/* A drawn series: its line, its points and its change points. */
static void chart_series(FILE *out, const page *p, const hist_view *hv, const st_hist_series *se, const char *colour,
                         const scale *s) {
  fprintf(out, "<polyline class=\"series\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", colour);
  for (size_t k = 0; k < se->n; k++)
    fprintf(out, "%s%.1f,%.1f", k ? " " : "", x_at(s, hv->pos[se->runs[k]]), y_at(s, se->medians[k]));
  fputs("\"/>", out);
  for (size_t k = 0; k < se->ncps; k++) {
    const st_hist_change *c = &se->cps[k];
    const double x = (x_at(s, hv->pos[se->runs[c->index - 1]]) + x_at(s, hv->pos[se->runs[c->index]])) / 2;
    const char *kind = c->shift > p->opts->threshold ? "slower" : c->shift < -p->opts->threshold ? "faster" : "small";
    const char *stroke = !strcmp(kind, "slower") ? "#d62728" : !strcmp(kind, "faster") ? "#2ca02c" : "#bbbbbb";
    fprintf(out,
            "<line class=\"change-point %s\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\" "
            "stroke-width=\"2\" stroke-dasharray=\"3 3\"><title>change point at run %lld: %+.1f%% (%.4g -> %.4g us, "
            "p %.2g) of ",
            kind, x, M_TOP, x, CHART_H - M_BOTTOM, stroke, (long long)c->run_id, 100 * c->shift, c->before_us,
            c->after_us, c->p);
    put_escaped(out, se->variant);
    fputs("; changed: ", out);
    put_escaped(out, c->changed[0] ? c->changed : "nothing recorded");
    fputs("</title></line>", out);
  }
}

static void chart_winner(FILE *out, const page *p, const hist_view *hv, const shape_view *sv, const scale *s) {
  fprintf(out, "<polyline class=\"winner\" fill=\"none\" stroke=\"%s\" stroke-width=\"3\" points=\"", WINNER_COLOUR);
  int first = 1;
  for (size_t i = 0; i < hv->nruns; i++) {
    if (!sv->wins[i].pt) continue;
    fprintf(out, "%s%.1f,%.1f", first ? "" : " ", x_at(s, (double)i), y_at(s, sv->wins[i].pt->median_us));
    first = 0;
  }
  fputs("\"/>", out);
  for (size_t i = 0; i < hv->nruns; i++) {
    const win *w = &sv->wins[i];
    if (!w->pt) continue;
    const double x = x_at(s, (double)i), y = y_at(s, w->pt->median_us);
    if (w->slower)
      fprintf(out, "<polygon class=\"regression\" points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"#d62728\">", x, y - 9,
              x - 6, y + 3, x + 6, y + 3);
    else
      fprintf(out, "<circle class=\"point\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\">", x, y, WINNER_COLOUR);
    char name[160] = "";
    st_variant_row v;
    if (st_db_get_variant(p->db, w->pt->variant_id, &v, NULL) == ST_OK) snprintf(name, sizeof name, "%s", v.name);
    fprintf(out, "<title>run %lld: %.4g us, ", (long long)p->d->runs[hv->runs[i]].row.id, w->pt->median_us);
    put_escaped(out, name[0] ? name : w->pt->variant_id);
    fputs(w->slower ? " (slower than the run before beyond the threshold)" : "", out);
    fputs(w->slower ? "</title></polygon>" : "</title></circle>", out);
  }
}

static void write_chart(FILE *out, const page *p, const hist_view *hv, const shape_view *sv) {
  const scale s = scale_of(sv, hv->nruns);
  fprintf(out,
          "<svg class=\"timing\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d "
          "%d\" role=\"img\">",
          CHART_W, CHART_H, CHART_W, CHART_H);
  chart_axes(out, p, hv, &s);
  chart_peer(out, sv, &s);
  for (int l = 0; l < sv->nlines; l++) chart_series(out, p, hv, sv->lines[l], LINE_COLOURS[l], &s);
  chart_winner(out, p, hv, sv, &s);
  fputs("</svg>\n<ul class=\"legend\"><li><span style=\"background:" WINNER_COLOUR "\"></span>winner (fastest "
        "verified variant of each run)</li>",
        out);
  for (int l = 0; l < sv->nlines; l++) {
    fprintf(out, "<li><span style=\"background:%s\"></span>", LINE_COLOURS[l]);
    put_escaped(out, sv->lines[l]->variant[0] ? sv->lines[l]->variant : sv->lines[l]->variant_id);
    /* Two variants of one name are one config rendered from other
     * templates (ids hash the source): their ids tell them apart. */
    int twin = 0;
    for (int m = 0; m < sv->nlines; m++) twin |= m != l && !strcmp(sv->lines[m]->variant, sv->lines[l]->variant);
    if (twin) {
      fputs(" (id ", out);
      put_escaped_n(out, sv->lines[l]->variant_id, ID_CHARS);
      fputc(')', out);
    }
    fputs("</li>", out);
  }
  if (sv->peer_us > 0) fputs("<li><span style=\"background:#7f7f7f\"></span>peer</li>", out);
  fputs("</ul>\n", out);
}

/* ---- tables ------------------------------------------------------------------------- */

static void write_runs(FILE *out, const page *p, const hist_view *hv) {
  fputs("<table class=\"runs\"><tr><th>run</th><th>started</th><th>kind</th><th>status</th><th>tool</th>"
        "<th>driver</th><th>changed from the run before</th></tr>\n",
        out);
  for (size_t i = 0; i < hv->nruns; i++) {
    const st_hist_run *r = &p->d->runs[hv->runs[i]];
    fprintf(out, "<tr><td class=\"num\">%lld</td><td>", (long long)r->row.id);
    put_escaped(out, r->row.started);
    fputs("</td><td>", out);
    put_escaped(out, r->row.kind);
    fputs("</td><td>", out);
    put_escaped(out, r->row.status);
    fputs("</td><td>", out);
    put_escaped(out, r->row.tool_version);
    fprintf(out, "</td><td class=\"num\">%d</td><td>", r->driver);
    if (i > 0) {
      const st_hist_run *b = &p->d->runs[hv->runs[i - 1]];
      char changed[600];
      st_run_change(&b->row, b->driver, &r->row, r->driver, changed, sizeof changed);
      put_escaped(out, changed[0] ? changed : "nothing recorded");
    }
    fputs("</td></tr>\n", out);
  }
  fputs("</table>\n", out);
}

static void write_winners(FILE *out, const page *p, const hist_view *hv, const shape_view *sv) {
  fputs("<table class=\"winners\"><tr><th>run</th><th>winner</th><th>id</th><th>us</th><th>from the run "
        "before</th></tr>\n",
        out);
  const win *prev = NULL;
  size_t last = 0, left_out = 0;
  for (size_t i = 0; i < hv->nruns; i++)
    if (sv->wins[i].pt) last = i;
  for (size_t i = 0; i < hv->nruns; i++) {
    const win *w = &sv->wins[i];
    if (!w->pt) continue;
    const int shown = !prev || i == last || w->changed || w->slower;
    if (!shown) {
      left_out++;
      prev = w;
      continue;
    }
    char name[160] = "";
    st_variant_row v;
    if (st_db_get_variant(p->db, w->pt->variant_id, &v, NULL) == ST_OK) snprintf(name, sizeof name, "%s", v.name);
    fprintf(out, "<tr%s><td class=\"num\">%lld</td><td>", w->slower ? " class=\"slower\"" : "",
            (long long)p->d->runs[hv->runs[i]].row.id);
    put_escaped(out, name[0] ? name : w->pt->variant_id);
    fputs("</td><td class=\"id\">", out);
    put_escaped_n(out, w->pt->variant_id, ID_CHARS);
    fprintf(out, "</td><td class=\"num\">%.4g</td><td>", w->pt->median_us);
    if (prev)
      fprintf(out, "%+.1f%%%s%s", 100 * (w->pt->median_us / prev->pt->median_us - 1), w->changed ? ", new winner" : "",
              w->slower ? ", slower beyond the threshold" : "");
    fputs("</td></tr>\n", out);
    prev = w;
  }
  fputs("</table>\n", out);
  if (left_out)
    fprintf(out, "<p class=\"meta\">%zu run%s with the same winner and time left out.</p>\n", left_out,
            left_out == 1 ? "" : "s");
}

/* ---- the page ----------------------------------------------------------------------- */

static const char *cache_name(int cold) { return cold ? "cold L2" : "warm"; }

static void write_flagged(FILE *out, const page *p) {
  fputs("<section class=\"summary\"><h2>Regressions</h2>\n", out);
  if (p->sum.slowdowns + p->sum.winner_regressions == 0) {
    fputs("<p class=\"none\">None: no drawn series shifted, and no winner got slower, beyond the threshold.</p>"
          "</section>\n",
          out);
    return;
  }
  fputs("<ul class=\"flagged\">\n", out);
  for (size_t h = 0; h < p->d->nhist; h++)
    for (size_t k = 0; k < p->views[h].nshapes; k++) {
      const shape_view *sv = &p->views[h].shapes[k];
      if (!sv->flagged) continue;
      fprintf(out, "<li><a href=\"#h%zu-s%zu\">", h, k);
      put_escaped(out, sv->shape);
      fprintf(out, "</a> (");
      put_escaped(out, p->d->hist[h].device);
      fprintf(out, ", %s): %d</li>\n", cache_name(p->d->hist[h].cold), sv->flagged);
    }
  fputs("</ul></section>\n", out);
}

static void write_page(FILE *out, const page *p, const char *db_name) {
  const st_history_opts *o = p->opts;
  fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>sparsetune: suite ", out);
  put_escaped(out, o->suite);
  fprintf(out, "</title><style>%s</style></head><body>\n<h1>Timing history of suite <code>", STYLE);
  put_escaped(out, o->suite);
  fputs("</code></h1>\n<p class=\"meta\">Database ", out);
  put_escaped(out, db_name);
  fputs(", op ", out);
  put_escaped(out, o->op ? o->op : "any");
  fprintf(out,
          ": %d runs in %d histories (device model and cache mode), %d shapes. Change points of series with %d+ ok "
          "runs (E-Divisive); a regression is a shift, or a winner's step from the run before, beyond %.1f%%.</p>\n",
          p->sum.runs, p->sum.histories, p->sum.shapes, o->min_runs, 100.0 * o->threshold);
  write_flagged(out, p);
  for (size_t h = 0; h < p->d->nhist; h++) {
    const hist_view *hv = &p->views[h];
    fprintf(out, "<section class=\"history\" id=\"h%zu\"><h2>", h);
    put_escaped(out, p->d->hist[h].device);
    fputs(" (", out);
    put_escaped(out, p->d->hist[h].arch);
    fprintf(out, "), %s: %zu runs</h2>\n", cache_name(p->d->hist[h].cold), hv->nruns);
    write_runs(out, p, hv);
    for (size_t k = 0; k < hv->nshapes; k++) {
      fprintf(out, "<section class=\"shape\" id=\"h%zu-s%zu\"><h3>", h, k);
      put_escaped(out, hv->shapes[k].shape);
      fputs("</h3>\n", out);
      write_chart(out, p, hv, &hv->shapes[k]);
      write_winners(out, p, hv, &hv->shapes[k]);
      fputs("</section>\n", out);
    }
    fputs("</section>\n", out);
  }
  fputs("</body></html>\n", out);
}

st_status st_report_html(st_db *db, FILE *out, const st_history_opts *opts, const char *db_name,
                         st_html_summary *summary, st_err *err) {
  if (summary) memset(summary, 0, sizeof *summary);
  st_status st = st_hist_check_opts(opts, "report", err);
  if (st == ST_OK) st = rpt_check_common(db, out, ST_REPORT_TEXT, err);
  if (st != ST_OK) return st;
  st_hist_data d;
  st = st_hist_analyse(db, opts, &d, err);
  page p = {.db = db, .opts = opts, .d = &d};
  if (st == ST_OK && !(p.views = calloc(d.nhist + 1, sizeof *p.views)))
    st = st_fail(err, ST_ERR_NOMEM, "report: out of memory for %zu histories", d.nhist);
  for (size_t h = 0; h < d.nhist && st == ST_OK; h++) st = build_history(&p, (int)h, err);
  if (st == ST_OK) {
    p.sum.histories = (int)d.nhist;
    p.sum.runs = (int)d.nruns;
    write_page(out, &p, db_name ? db_name : "");
    if (summary) *summary = p.sum;
    st = rpt_finish_output(out, err);
  }
  page_free(&p);
  st_hist_free(&d);
  return st;
}
