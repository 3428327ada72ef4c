#include "eval_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const double st_regret_bin_edges[ST_REGRET_BINS - 1] = {0.01, 0.03, 0.10, 0.25};

static int cmp_double(const void *pa, const void *pb) {
  const double a = *(const double *)pa, b = *(const double *)pb;
  return (a > b) - (a < b);
}

void st_regret_summarize(const double *regret, int n, st_regret_summary *out) {
  memset(out, 0, sizeof *out);
  out->median = out->p95 = out->max = NAN;
  double *v = n > 0 ? malloc((size_t)n * sizeof *v) : NULL;
  if (!v) return;
  int m = 0;
  for (int i = 0; i < n; i++)
    if (!isnan(regret[i])) v[m++] = regret[i];
  out->n = m;
  if (m > 0) {
    qsort(v, (size_t)m, sizeof *v, cmp_double);
    out->median = m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
    int rank = (int)ceil(0.95 * m); /* nearest rank, 1-based */
    out->p95 = v[(rank < 1 ? 1 : rank) - 1];
    out->max = v[m - 1];
    for (int i = 0; i < m; i++) {
      int b = 0;
      while (b < ST_REGRET_BINS - 1 && v[i] > st_regret_bin_edges[b]) b++;
      out->hist[b]++;
    }
  }
  free(v);
}

const char *st_regret_bin_label(int bin) {
  static const char *const labels[ST_REGRET_BINS] = {"<= 1%", "1-3%", "3-10%", "10-25%", "> 25%"};
  return bin >= 0 && bin < ST_REGRET_BINS ? labels[bin] : "?";
}

void st_regret_print(FILE *f, const char *what, const st_regret_summary *s) {
  if (s->n == 0) {
    fprintf(f, "%s: no shape\n", what);
    return;
  }
  fprintf(f, "%s, %d shapes: median %.1f%%, p95 %.1f%%, max %.1f%%;", what, s->n, 100 * s->median, 100 * s->p95,
          100 * s->max);
  for (int b = 0; b < ST_REGRET_BINS; b++)
    fprintf(f, " %s: %d%s", st_regret_bin_label(b), s->hist[b], b + 1 < ST_REGRET_BINS ? "," : "\n");
}

static void json_number(FILE *f, double x) {
  if (isnan(x))
    fputs("null", f);
  else
    fprintf(f, "%.6g", x);
}

void st_regret_print_json(FILE *f, const st_regret_summary *s) {
  fprintf(f, "{\"n\":%d,\"median\":", s->n);
  json_number(f, s->median);
  fputs(",\"p95\":", f);
  json_number(f, s->p95);
  fputs(",\"max\":", f);
  json_number(f, s->max);
  fputs(",\"histogram\":{", f);
  for (int b = 0; b < ST_REGRET_BINS; b++) fprintf(f, "%s\"%s\":%d", b ? "," : "", st_regret_bin_label(b), s->hist[b]);
  fputs("}}", f);
}
