/* report.c - `sparsetune show` and `sparsetune regress` (see report.h).
 *
 * Every report first gathers its rows from the database, then writes them
 * either through the text-table helper or the JSON helpers below; those two
 * are the only places that format output. */
#include "report.h"
#include "report_format.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "perf_stats.h"
#include "run_args.h"
#include "run_change.h"

/* ---- JSON output ---------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at p (2..4), or 0 if it is not one. */
static int utf8_len(const unsigned char *p) {
  static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
  int n;
  uint32_t cp;
  if ((p[0] & 0xe0) == 0xc0)
    n = 2, cp = p[0] & 0x1f;
  else if ((p[0] & 0xf0) == 0xe0)
    n = 3, cp = p[0] & 0x0f;
  else if ((p[0] & 0xf8) == 0xf0)
    n = 4, cp = p[0] & 0x07;
  else
    return 0;
  for (int i = 1; i < n; i++) {
    if ((p[i] & 0xc0) != 0x80) return 0; /* also stops at the NUL */
    cp = cp << 6 | (p[i] & 0x3f);
  }
  if (cp < min_cp[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

/* A JSON string: quotes, backslashes and control bytes escaped, bytes that
 * are not valid UTF-8 (compiler logs may hold any) replaced by U+FFFD. */
void st_json_str(FILE *out, const char *s) {
  fputc('"', out);
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
    unsigned char c = *p;
    int n;
    if (c == '"' || c == '\\')
      fprintf(out, "\\%c", c), p++;
    else if (c == '\n')
      fputs("\\n", out), p++;
    else if (c == '\t')
      fputs("\\t", out), p++;
    else if (c == '\r')
      fputs("\\r", out), p++;
    else if (c < 0x20 || c == 0x7f)
      fprintf(out, "\\u%04x", c), p++;
    else if (c < 0x80)
      fputc(c, out), p++;
    else if ((n = utf8_len(p)) > 0)
      fwrite(p, 1, (size_t)n, out), p += n;
    else
      fputs("\\ufffd", out), p++;
  }
  fputc('"', out);
}

void rpt_json_num(FILE *out, double x) {
  if (isfinite(x))
    fprintf(out, "%.10g", x);
  else
    fputs("null", out);
}

/* "key": for the members of an object; `first` says whether to skip the comma. */
void rpt_json_key(FILE *out, const char *key, int first) {
  if (!first) fputc(',', out);
  st_json_str(out, key);
  fputc(':', out);
}

void rpt_json_kv_str(FILE *out, const char *key, const char *val) {
  rpt_json_key(out, key, 0);
  st_json_str(out, val);
}

void rpt_json_kv_num(FILE *out, const char *key, double val) {
  rpt_json_key(out, key, 0);
  rpt_json_num(out, val);
}

void rpt_json_kv_int(FILE *out, const char *key, long long val) {
  rpt_json_key(out, key, 0);
  fprintf(out, "%lld", val);
}

/* The members of a run object after "id" (shared by every report). */
void rpt_json_run_members(FILE *out, const st_run_row *r) {
  rpt_json_key(out, "id", 1);
  fprintf(out, "%lld", (long long)r->id);
  rpt_json_kv_str(out, "kind", r->kind);
  rpt_json_kv_str(out, "op", r->op);
  rpt_json_kv_str(out, "suite", r->suite);
  rpt_json_kv_int(out, "device_id", (long long)r->device_id);
  rpt_json_kv_str(out, "device", r->device_name);
  rpt_json_kv_str(out, "arch", r->arch);
  rpt_json_kv_str(out, "status", r->status);
  rpt_json_kv_str(out, "started", r->started);
  rpt_json_kv_str(out, "finished", r->finished);
  rpt_json_kv_str(out, "args", r->args);
  rpt_json_kv_str(out, "tool_version", r->tool_version);
  /* runs.env is a JSON object (the schema checks it), written through as
   * is; one that filled the row's buffer may be cut, and is left out. */
  if (r->env[0] && strlen(r->env) < sizeof r->env - 1) {
    rpt_json_key(out, "env", 0);
    fputs(r->env, out);
  }
}

/* ---- text tables ------------------------------------------------------------ */

/* Appends a row: exactly ncols `const char *` cells, copied. Control
 * characters become spaces so that a row stays one line. */
st_status rpt_table_row(rpt_table *t, st_err *err, ...) {
  if (t->nrows == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 32;
    char **cells = realloc(t->cells, cap * (size_t)t->ncols * sizeof *cells);
    if (!cells) return st_fail(err, ST_ERR_NOMEM, "report: out of memory for %zu table rows", cap);
    t->cells = cells;
    t->cap = cap;
  }
  char **row = t->cells + t->nrows * (size_t)t->ncols;
  va_list ap;
  va_start(ap, err);
  int c = 0;
  for (; c < t->ncols; c++) {
    const char *v = va_arg(ap, const char *); // NOLINT(clang-analyzer-valist.Uninitialized): va_start above
    row[c] = strdup(v ? v : "");
    if (!row[c]) break;
    for (char *p = row[c]; *p; p++)
      if ((unsigned char)*p < 0x20) *p = ' ';
  }
  va_end(ap);
  if (c < t->ncols) {
    while (c-- > 0) free(row[c]);
    return st_fail(err, ST_ERR_NOMEM, "report: out of memory for a table cell");
  }
  t->nrows++;
  return ST_OK;
}

/* Number cells: "-" stands for a value that is not there (not > 0 for
 * times, not finite for ratios). */
const char *rpt_fmt_us(char *buf, size_t cap, double us) {
  if (isfinite(us) && us > 0)
    snprintf(buf, cap, "%.2f", us);
  else
    snprintf(buf, cap, "-");
  return buf;
}

const char *rpt_fmt_pct(char *buf, size_t cap, const char *fmt, double fraction) {
  if (isfinite(fraction))
    snprintf(buf, cap, fmt, 100.0 * fraction);
  else
    snprintf(buf, cap, "-");
  return buf;
}

const char *rpt_fmt_int(char *buf, size_t cap, long long x) {
  snprintf(buf, cap, "%lld", x);
  return buf;
}

void rpt_table_free(rpt_table *t) {
  for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++) free(t->cells[i]);
  free(t->cells);
  t->cells = NULL;
  t->nrows = t->cap = 0;
}

/* One line: columns two spaces apart, padded to `width`; spaces are only
 * written before further text, so no line ends in blanks. */
static void rpt_table_line(const rpt_table *t, FILE *out, const char *const *cells, const size_t *width) {
  size_t pending = 0;
  for (int c = 0; c < t->ncols; c++) {
    size_t len = strlen(cells[c]);
    size_t pad = width[c] > len ? width[c] - len : 0;
    if (t->align[c] == 'r') pending += pad;
    if (len) {
      fprintf(out, "%*s%s", (int)pending, "", cells[c]);
      pending = 0;
    }
    if (t->align[c] != 'r') pending += pad;
    pending += 2;
  }
  fputc('\n', out);
}

st_status rpt_table_print(const rpt_table *t, FILE *out, st_err *err) {
  size_t *width = calloc((size_t)t->ncols, sizeof *width);
  if (!width) return st_fail(err, ST_ERR_NOMEM, "report: out of memory");
  for (int c = 0; c < t->ncols; c++) {
    width[c] = strlen(t->heads[c]);
    for (size_t r = 0; r < t->nrows; r++) {
      size_t n = strlen(t->cells[r * (size_t)t->ncols + (size_t)c]);
      if (n > width[c]) width[c] = n;
    }
  }
  rpt_table_line(t, out, t->heads, width);
  for (size_t r = 0; r < t->nrows; r++)
    rpt_table_line(t, out, (const char *const *)t->cells + r * (size_t)t->ncols, width);
  free(width);
  return ST_OK;
}

st_status rpt_finish_output(FILE *out, st_err *err) {
  if (fflush(out) != 0 || ferror(out))
    return st_fail(err, ST_ERR_INVALID_ARG, "report: writing the output failed: %s", strerror(errno));
  return ST_OK;
}

st_status rpt_check_common(const st_db *db, const FILE *out, st_report_format format, st_err *err) {
  if (!db || !out) return st_fail(err, ST_ERR_INVALID_ARG, "report: db or out is NULL");
  if (format != ST_REPORT_TEXT && format != ST_REPORT_JSON)
    return st_fail(err, ST_ERR_INVALID_ARG, "report: format=%d is neither text nor JSON", (int)format);
  return ST_OK;
}

/* Device and arch of a run as one cell: "NVIDIA H100 80GB HBM3 (sm_90a)". */
static void run_device(const st_run_row *r, char *buf, size_t cap) {
  snprintf(buf, cap, "%s (%s)", r->device_name, r->arch);
}

/* ---- show: runs ----------------------------------------------------------------- */

typedef struct run_entry {
  st_run_row run;
  st_run_counts counts;
} run_entry;

typedef struct run_list {
  st_db *db;
  run_entry *v;
  size_t n, cap;
  st_status st;
  st_err *err;
} run_list;

static int collect_run(void *ctx, const st_run_row *r) {
  run_list *l = ctx;
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 16;
    run_entry *v = realloc(l->v, cap * sizeof *v);
    if (!v) {
      l->st = st_fail(l->err, ST_ERR_NOMEM, "report: out of memory for %zu runs", cap);
      return 1;
    }
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n].run = *r;
  l->st = st_db_run_counts(l->db, r->id, &l->v[l->n].counts, l->err);
  if (l->st != ST_OK) return 1;
  l->n++;
  return 0;
}

static void runs_json(FILE *out, const run_list *l) {
  fputs("{\"runs\":[", out);
  for (size_t i = 0; i < l->n; i++) {
    const run_entry *e = &l->v[i];
    fputs(i ? ",{" : "{", out);
    rpt_json_run_members(out, &e->run);
    rpt_json_kv_int(out, "ok", (long long)e->counts.ok);
    rpt_json_kv_int(out, "wrong", (long long)e->counts.wrong);
    rpt_json_kv_int(out, "failed", (long long)e->counts.failed);
    rpt_json_kv_int(out, "pruned", (long long)e->counts.pruned);
    fputc('}', out);
  }
  fputs("]}\n", out);
}

static st_status runs_text(FILE *out, const run_list *l, st_err *err) {
  if (l->n == 0) {
    fputs("no runs in the database\n", out);
    return ST_OK;
  }
  static const char *const heads[] = {"id",      "kind",     "op", "suite",  "device", "status",
                                      "started", "finished", "ok", "failed", "pruned"};
  rpt_table t = {11, heads, "rlllllllrrr", NULL, 0, 0};
  st_status st = ST_OK;
  for (size_t i = 0; i < l->n && st == ST_OK; i++) {
    const run_entry *e = &l->v[i];
    char id[24], device[160], ok[24], failed[24], pruned[24];
    run_device(&e->run, device, sizeof device);
    st = rpt_table_row(&t, err, rpt_fmt_int(id, sizeof id, (long long)e->run.id), e->run.kind, e->run.op, e->run.suite,
                       device, e->run.status, e->run.started, e->run.finished[0] ? e->run.finished : "-",
                       rpt_fmt_int(ok, sizeof ok, (long long)e->counts.ok),
                       rpt_fmt_int(failed, sizeof failed, (long long)e->counts.wrong + e->counts.failed),
                       rpt_fmt_int(pruned, sizeof pruned, (long long)e->counts.pruned));
  }
  if (st == ST_OK) st = rpt_table_print(&t, out, err);
  rpt_table_free(&t);
  return st;
}

st_status st_report_runs(st_db *db, FILE *out, st_report_format format, int limit, st_err *err) {
  st_status st = rpt_check_common(db, out, format, err);
  if (st != ST_OK) return st;
  run_list l = {db, NULL, 0, 0, ST_OK, err};
  st = st_db_each_run(db, limit, collect_run, &l, err);
  if (st == ST_OK) st = l.st;
  if (st == ST_OK) {
    if (format == ST_REPORT_JSON)
      runs_json(out, &l);
    else
      st = runs_text(out, &l, err);
  }
  free(l.v);
  return st == ST_OK ? rpt_finish_output(out, err) : st;
}

/* ---- show: one run's measurements ---------------------------------------------- */

typedef struct meas_entry {
  st_measurement m;
  char name[160];
  char op[32];
} meas_entry;

typedef struct meas_list {
  meas_entry *v;
  size_t n, cap;
  st_status st;
  st_err *err;
} meas_list;

static int collect_measurement(void *ctx, const st_measurement *m, const char *name, const char *op) {
  meas_list *l = ctx;
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 64;
    meas_entry *v = realloc(l->v, cap * sizeof *v);
    if (!v) {
      l->st = st_fail(l->err, ST_ERR_NOMEM, "report: out of memory for %zu measurements", cap);
      return 1;
    }
    l->v = v;
    l->cap = cap;
  }
  meas_entry *e = &l->v[l->n++];
  e->m = *m;
  snprintf(e->name, sizeof e->name, "%s", name);
  snprintf(e->op, sizeof e->op, "%s", op);
  return 0;
}

static st_status load_run(st_db *db, int64_t run_id, const char *role, st_run_row *run, meas_list *l, st_err *err) {
  int found = 0;
  st_status st = st_db_get_run(db, run_id, run, &found, err);
  if (st != ST_OK) return st;
  if (!found) return st_fail(err, ST_ERR_INVALID_ARG, "%s run %lld is not in the database", role, (long long)run_id);
  l->err = err;
  st = st_db_each_measurement(db, run_id, collect_measurement, l, err);
  return st == ST_OK ? l->st : st;
}

static void run_json_measurements(FILE *out, const st_run_row *run, const meas_list *l) {
  fputs("{\"run\":{", out);
  rpt_json_run_members(out, run);
  fputs("},\"measurements\":[", out);
  for (size_t i = 0; i < l->n; i++) {
    const meas_entry *e = &l->v[i];
    fputs(i ? ",{" : "{", out);
    rpt_json_key(out, "variant_id", 1);
    st_json_str(out, e->m.variant_id);
    rpt_json_kv_str(out, "variant", e->name);
    rpt_json_kv_str(out, "op", e->op);
    rpt_json_kv_str(out, "shape", e->m.shape_key);
    rpt_json_kv_str(out, "status", e->m.status);
    rpt_json_kv_num(out, "median_us", e->m.median_us);
    rpt_json_kv_num(out, "min_us", e->m.min_us);
    rpt_json_kv_num(out, "max_us", e->m.max_us);
    rpt_json_kv_num(out, "spread", e->m.spread);
    rpt_json_kv_int(out, "reps", e->m.reps);
    rpt_json_kv_int(out, "iters", e->m.iters);
    rpt_json_kv_num(out, "max_err", e->m.max_err);
    rpt_json_kv_str(out, "error", e->m.error);
    fputc('}', out);
  }
  fputs("]}\n", out);
}

static st_status run_text_measurements(FILE *out, const st_run_row *run, const meas_list *l, st_err *err) {
  char device[160];
  run_device(run, device, sizeof device);
  fprintf(out, "run %lld: %s %s, suite %s, on %s, %s, started %s, finished %s\n", (long long)run->id, run->kind,
          run->op, run->suite[0] ? run->suite : "-", device, run->status, run->started,
          run->finished[0] ? run->finished : "-");
  if (l->n == 0) {
    fputs("no measurements\n", out);
    return ST_OK;
  }
  static const char *const heads[] = {"variant", "shape", "status", "median us", "spread %", "error"};
  rpt_table t = {6, heads, "lllrrl", NULL, 0, 0};
  st_status st = ST_OK;
  for (size_t i = 0; i < l->n && st == ST_OK; i++) {
    const meas_entry *e = &l->v[i];
    char med[32], spread[32];
    rpt_fmt_us(med, sizeof med, e->m.median_us);
    rpt_fmt_pct(spread, sizeof spread, "%.1f", e->m.median_us > 0 ? e->m.spread : NAN);
    st = rpt_table_row(&t, err, e->name, e->m.shape_key, e->m.status, med, spread, e->m.error);
  }
  if (st == ST_OK) st = rpt_table_print(&t, out, err);
  rpt_table_free(&t);
  return st;
}

st_status st_report_run(st_db *db, FILE *out, st_report_format format, int64_t run_id, st_err *err) {
  st_status st = rpt_check_common(db, out, format, err);
  if (st != ST_OK) return st;
  st_run_row run;
  meas_list l = {NULL, 0, 0, ST_OK, err};
  st = load_run(db, run_id, "the", &run, &l, err);
  if (st == ST_OK) {
    if (format == ST_REPORT_JSON)
      run_json_measurements(out, &run, &l);
    else
      st = run_text_measurements(out, &run, &l, err);
  }
  free(l.v);
  return st == ST_OK ? rpt_finish_output(out, err) : st;
}

/* ---- show: winners ----------------------------------------------------------------- */

typedef struct winner_list {
  st_winner_row *v;
  size_t n, cap;
  st_status st;
  st_err *err;
} winner_list;

static int collect_winner(void *ctx, const st_winner_row *w) {
  winner_list *l = ctx;
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 16;
    st_winner_row *v = realloc(l->v, cap * sizeof *v);
    if (!v) {
      l->st = st_fail(l->err, ST_ERR_NOMEM, "report: out of memory for %zu winners", cap);
      return 1;
    }
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = *w;
  return 0;
}

/* Default time / winner time, or NAN when the default's time is unknown. */
static double speedup(const st_winner_row *w) {
  return w->default_us > 0 && w->median_us > 0 ? w->default_us / w->median_us : NAN;
}

st_status st_report_winners(st_db *db, FILE *out, st_report_format format, const char *device_name, const char *arch,
                            st_err *err) {
  st_status st = rpt_check_common(db, out, format, err);
  if (st != ST_OK) return st;
  if (!device_name || !*device_name) return st_fail(err, ST_ERR_INVALID_ARG, "report: device name is empty");
  winner_list l = {NULL, 0, 0, ST_OK, err};
  st = st_db_each_winner(db, device_name, arch, collect_winner, &l, err);
  if (st == ST_OK) st = l.st;
  if (st == ST_OK && format == ST_REPORT_JSON) {
    fputs("{", out);
    rpt_json_key(out, "device", 1);
    st_json_str(out, device_name);
    rpt_json_key(out, "arch", 0);
    if (arch)
      st_json_str(out, arch);
    else
      fputs("null", out);
    fputs(",\"winners\":[", out);
    for (size_t i = 0; i < l.n; i++) {
      const st_winner_row *w = &l.v[i];
      fputs(i ? ",{" : "{", out);
      rpt_json_key(out, "op", 1);
      st_json_str(out, w->op);
      rpt_json_kv_str(out, "dispatch_key", w->dispatch_key);
      rpt_json_kv_str(out, "variant_id", w->variant_id);
      rpt_json_kv_str(out, "variant", w->variant_name);
      rpt_json_kv_num(out, "us", w->median_us);
      rpt_json_kv_num(out, "regret", w->regret);
      rpt_json_kv_str(out, "default_variant_id", w->default_variant_id);
      rpt_json_key(out, "default_us", 0);
      rpt_json_num(out, w->default_us > 0 ? w->default_us : NAN);
      rpt_json_kv_num(out, "speedup", speedup(w));
      rpt_json_kv_int(out, "run_id", (long long)w->run_id);
      fputc('}', out);
    }
    fputs("]}\n", out);
  } else if (st == ST_OK) {
    fprintf(out, "winners for %s (%s)\n", device_name, arch ? arch : "any arch");
    if (l.n == 0) fputs("no winners recorded for this device\n", out);
    static const char *const heads[] = {"op", "dispatch key", "variant", "us", "default us", "speed-up"};
    rpt_table t = {6, heads, "lllrrr", NULL, 0, 0};
    for (size_t i = 0; i < l.n && st == ST_OK; i++) {
      const st_winner_row *w = &l.v[i];
      char us[32], def[32], up[32];
      double x = speedup(w);
      if (isfinite(x))
        snprintf(up, sizeof up, "%.2fx", x);
      else
        snprintf(up, sizeof up, "-");
      st = rpt_table_row(&t, err, w->op, w->dispatch_key, w->variant_name, rpt_fmt_us(us, sizeof us, w->median_us),
                         rpt_fmt_us(def, sizeof def, w->default_us), up);
    }
    if (st == ST_OK && l.n) st = rpt_table_print(&t, out, err);
    rpt_table_free(&t);
  }
  free(l.v);
  return st == ST_OK ? rpt_finish_output(out, err) : st;
}

/* ---- regress ------------------------------------------------------------------------ */

typedef enum verdict { V_UNCHANGED, V_REGRESSION, V_IMPROVEMENT } verdict;
static const char *const VERDICT[] = {"unchanged", "regression", "improvement"};

typedef struct pair {
  const meas_entry *base, *head;
  double change; /* head / base - 1 */
  double noise;  /* spread_base + spread_head */
  double p;      /* the rank test's p (ranked), NaN otherwise */
  int ranked;    /* 1: judged by the rank test on the repetitions */
  verdict v;
} pair;

/* A (variant, shape) ok in one run only; `other` is its entry in the other
 * run, NULL when absent. */
typedef struct lone {
  const meas_entry *m, *other;
} lone;

/* A shape's winners: the fastest verified variant of each run on it
 * (what tune would dispatch for that shape alone), judged as a pair. */
typedef struct comparison {
  pair *pairs;
  lone *only_base, *only_head;
  size_t npairs, nbase, nhead;
  pair *winners; /* shapes ok in both runs, worst change first */
  size_t nwinners;
} comparison;

static int is_ok(const meas_entry *e) {
  return !strcmp(e->m.status, "ok") && isfinite(e->m.median_us) && e->m.median_us > 0;
}

static int cmp_key(const meas_entry *a, const meas_entry *b) {
  int c = strcmp(a->m.variant_id, b->m.variant_id);
  return c ? c : strcmp(a->m.shape_key, b->m.shape_key);
}

static int cmp_entry(const void *a, const void *b) { return cmp_key(a, b); }

/* Worst change first; ties by name and shape so the order is stable. */
static int cmp_pair(const void *a, const void *b) {
  const pair *x = a, *y = b;
  if (x->change != y->change) return x->change < y->change ? 1 : -1;
  int c = strcmp(x->base->name, y->base->name);
  return c ? c : strcmp(x->base->m.shape_key, y->base->m.shape_key);
}

/* A measurement's repetitions from its samples column ("[1.5,2.25]", as
 * the tuner writes it): at most `cap` values, each finite and > 0; -1 when
 * the text is not such a list. */
static int parse_samples(const char *text, double *out, int cap) {
  const char *s = text;
  while (*s == ' ') s++;
  if (*s++ != '[') return -1;
  int n = 0;
  while (*s == ' ') s++;
  if (*s == ']') return s[1] == '\0' ? 0 : -1;
  for (;;) {
    char *end = NULL;
    errno = 0;
    const double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v) || v <= 0 || n == cap) return -1;
    out[n++] = v;
    s = end;
    while (*s == ' ') s++;
    if (*s == ']') return s[1] == '\0' ? n : -1;
    if (*s++ != ',') return -1;
  }
}

/* With this many repetitions a side the rank test can reject at
 * ST_VERDICT_ALPHA (5 a side: exact p 2 / C(10, 5) = 0.008, the least
 * there is); with fewer it never could, so the spreads judge. */
#define REGRESS_MIN_REPS 5
#define REGRESS_MAX_REPS 128

/* The rank test on the two measurements' repetitions where both have
 * enough (tuner/perf_stats.h: slower only when p <= alpha and the median
 * shift is at least the threshold); 0 where not. */
static int rank_verdict(const meas_entry *be, const meas_entry *he, double threshold, pair *p) {
  double b[REGRESS_MAX_REPS], h[REGRESS_MAX_REPS];
  const int nb = parse_samples(be->m.samples, b, REGRESS_MAX_REPS);
  const int nh = parse_samples(he->m.samples, h, REGRESS_MAX_REPS);
  if (nb < REGRESS_MIN_REPS || nh < REGRESS_MIN_REPS) return 0;
  st_regression_result r;
  if (st_regression_verdict(b, (size_t)nb, h, (size_t)nh, threshold, ST_VERDICT_ALPHA, &r, NULL) != ST_OK) return 0;
  p->ranked = 1;
  p->p = r.test.p;
  p->v = r.verdict == ST_SLOWER ? V_REGRESSION : r.verdict == ST_FASTER ? V_IMPROVEMENT : V_UNCHANGED;
  return 1;
}

static verdict judge(double change, double noise, double threshold) {
  double limit = fmax(threshold, noise);
  if (change > limit) return V_REGRESSION;
  if (change < -limit) return V_IMPROVEMENT;
  return V_UNCHANGED;
}

/* A run without measurements has no array at all (v == NULL), and qsort
 * must not be given NULL even for zero elements. */
static void sort_entries(meas_list *l) {
  if (l->n < 2) return;
  qsort(l->v, l->n, sizeof *l->v, cmp_entry);
}

/* By shape, fastest first (ties by variant id: a stable choice). */
static int cmp_shape_time(const void *a, const void *b) {
  const meas_entry *x = *(const meas_entry *const *)a, *y = *(const meas_entry *const *)b;
  int c = strcmp(x->m.shape_key, y->m.shape_key);
  if (c) return c;
  if (x->m.median_us != y->m.median_us) return x->m.median_us < y->m.median_us ? -1 : 1;
  return strcmp(x->m.variant_id, y->m.variant_id);
}

/* The fastest verified entry of each shape of l, by shape, into *out (n). */
static st_status shape_winners(const meas_list *l, const meas_entry ***out, size_t *n, st_err *err) {
  const meas_entry **v = calloc(l->n + 1, sizeof *v); // NOLINT(bugprone-sizeof-expression): pointers
  if (!v) return st_fail(err, ST_ERR_NOMEM, "regress: out of memory for %zu measurements", l->n);
  size_t k = 0;
  for (size_t i = 0; l->v && i < l->n; i++) /* a run without measurements has no array */
    if (is_ok(&l->v[i])) v[k++] = &l->v[i];
  if (k > 1) qsort(v, k, sizeof *v, cmp_shape_time); // NOLINT(bugprone-sizeof-expression): pointers
  size_t w = 0;
  for (size_t i = 0; i < k; i++)
    if (w == 0 || strcmp(v[w - 1]->m.shape_key, v[i]->m.shape_key) != 0) v[w++] = v[i];
  *out = v;
  *n = w;
  return ST_OK;
}

/* Each shape verified in both runs: its winners judged by the rule of a
 * pair (the rank test on their repetitions, else the spreads): a
 * regression is what a dispatch that follows the tune sees get slower,
 * the same winner or a new one. */
static st_status compare_winners(const meas_list *b, const meas_list *h, double threshold, comparison *c,
                                 st_err *err) {
  const meas_entry **bw = NULL, **hw = NULL;
  size_t nb = 0, nh = 0;
  st_status st = shape_winners(b, &bw, &nb, err);
  if (st == ST_OK) st = shape_winners(h, &hw, &nh, err);
  if (st == ST_OK && !(c->winners = calloc(nb + 1, sizeof *c->winners)))
    st = st_fail(err, ST_ERR_NOMEM, "regress: out of memory for %zu shapes", nb);
  for (size_t i = 0, j = 0; st == ST_OK && i < nb && j < nh;) {
    const int k = strcmp(bw[i]->m.shape_key, hw[j]->m.shape_key);
    if (k < 0) {
      i++;
    } else if (k > 0) {
      j++;
    } else {
      pair *p = &c->winners[c->nwinners++];
      p->base = bw[i++];
      p->head = hw[j++];
      p->change = p->head->m.median_us / p->base->m.median_us - 1.0;
      p->noise = p->base->m.spread + p->head->m.spread;
      p->p = NAN;
      if (!rank_verdict(p->base, p->head, threshold, p)) p->v = judge(p->change, p->noise, threshold);
    }
  }
  if (st == ST_OK && c->nwinners > 1) qsort(c->winners, c->nwinners, sizeof *c->winners, cmp_pair);
  free(bw);
  free(hw);
  return st;
}

/* Merges the two runs' measurements (sorted by variant id, shape). */
static st_status compare_runs(meas_list *b, meas_list *h, double threshold, comparison *c, st_err *err) {
  sort_entries(b);
  sort_entries(h);
  c->pairs = calloc(b->n + 1, sizeof *c->pairs);
  c->only_base = calloc(b->n + 1, sizeof *c->only_base);
  c->only_head = calloc(h->n + 1, sizeof *c->only_head);
  if (!c->pairs || !c->only_base || !c->only_head)
    return st_fail(err, ST_ERR_NOMEM, "regress: out of memory for %zu measurements", b->n + h->n);
  size_t i = 0, j = 0;
  while (i < b->n || j < h->n) {
    int k = i == b->n ? 1 : j == h->n ? -1 : cmp_key(&b->v[i], &h->v[j]);
    const meas_entry *be = k <= 0 ? &b->v[i++] : NULL;
    const meas_entry *he = k >= 0 ? &h->v[j++] : NULL;
    int bok = be && is_ok(be), hok = he && is_ok(he);
    if (bok && hok) {
      pair *p = &c->pairs[c->npairs++];
      p->base = be;
      p->head = he;
      p->change = he->m.median_us / be->m.median_us - 1.0;
      p->noise = be->m.spread + he->m.spread;
      p->p = NAN;
      if (!rank_verdict(be, he, threshold, p)) p->v = judge(p->change, p->noise, threshold);
    } else if (bok) {
      c->only_base[c->nbase++] = (lone){be, he};
    } else if (hok) {
      c->only_head[c->nhead++] = (lone){he, be};
    }
  }
  qsort(c->pairs, c->npairs, sizeof *c->pairs, cmp_pair);
  return compare_winners(b, h, threshold, c, err);
}

static void comparison_free(comparison *c) {
  free(c->winners);
  free(c->pairs);
  free(c->only_base);
  free(c->only_head);
}

#define MAX_WARNINGS 4
typedef struct warnings {
  char text[MAX_WARNINGS][400];
  int n;
} warnings;

static void warn(warnings *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(warnings *w, const char *fmt, ...) {
  if (w->n == MAX_WARNINGS) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(w->text[w->n++], sizeof w->text[0], fmt, ap); // NOLINT(clang-analyzer-valist.Uninitialized): as above
  va_end(ap);
}

static void collect_warnings(const st_run_row *b, const st_run_row *h, warnings *w) {
  if (strcmp(b->op, h->op) != 0)
    warn(w, "the runs are of different ops: base run %lld is %s, head run %lld is %s", (long long)b->id, b->op,
         (long long)h->id, h->op);
  if (strcmp(b->device_name, h->device_name) != 0 || strcmp(b->arch, h->arch) != 0)
    warn(w, "the runs are on different devices: base run %lld on %s (%s), head run %lld on %s (%s)", (long long)b->id,
         b->device_name, b->arch, (long long)h->id, h->device_name, h->arch);
  if (strcmp(b->status, "done") != 0)
    warn(w, "base run %lld is %s, not done: its timings may be incomplete", (long long)b->id, b->status);
  if (strcmp(h->status, "done") != 0)
    warn(w, "head run %lld is %s, not done: its timings may be incomplete", (long long)h->id, h->status);
}

static void summarize(const comparison *c, st_regress_summary *s) {
  memset(s, 0, sizeof *s);
  s->compared = (int)c->npairs;
  s->only_base = (int)c->nbase;
  s->only_head = (int)c->nhead;
  for (size_t i = 0; i < c->npairs; i++) {
    if (c->pairs[i].v == V_REGRESSION)
      s->regressions++;
    else if (c->pairs[i].v == V_IMPROVEMENT)
      s->improvements++;
    else
      s->unchanged++;
  }
  s->winners_compared = (int)c->nwinners;
  for (size_t i = 0; i < c->nwinners; i++) s->winner_regressions += c->winners[i].v == V_REGRESSION;
}

static void json_lones(FILE *out, const char *key, const lone *v, size_t n, const char *other_key) {
  rpt_json_key(out, key, 0);
  fputc('[', out);
  for (size_t i = 0; i < n; i++) {
    fputs(i ? ",{" : "{", out);
    rpt_json_key(out, "variant_id", 1);
    st_json_str(out, v[i].m->m.variant_id);
    rpt_json_kv_str(out, "variant", v[i].m->name);
    rpt_json_kv_str(out, "shape", v[i].m->m.shape_key);
    rpt_json_kv_num(out, "us", v[i].m->m.median_us);
    rpt_json_kv_str(out, other_key, v[i].other ? v[i].other->m.status : "absent");
    fputc('}', out);
  }
  fputc(']', out);
}

/* What differs from the base run to the head run (run_change.h). */
typedef struct run_changes {
  int driver_base, driver_head;
  char text[1024];
} run_changes;

/* A pair's p as the text table shows it: "-" where no rank test judged. */
static void p_text(const pair *p, char *buf, size_t cap) {
  if (p->ranked)
    snprintf(buf, cap, "%.2g", p->p);
  else
    snprintf(buf, cap, "-");
}

/* A judged pair's change, noise, limit, test, p and verdict (JSON members). */
static void json_judgement(FILE *out, const pair *p, double threshold) {
  rpt_json_kv_num(out, "change", p->change);
  rpt_json_kv_num(out, "noise", p->noise);
  rpt_json_kv_num(out, "limit", fmax(threshold, p->noise));
  rpt_json_kv_str(out, "test", p->ranked ? "rank" : "spread");
  rpt_json_kv_num(out, "p", p->p);
  rpt_json_kv_str(out, "verdict", VERDICT[p->v]);
}

static void regress_json(FILE *out, const st_run_row *b, const st_run_row *h, double threshold, const warnings *w,
                         const run_changes *rc, const comparison *c, const st_regress_summary *s) {
  fputs("{\"base\":{", out);
  rpt_json_run_members(out, b);
  fputs("},\"head\":{", out);
  rpt_json_run_members(out, h);
  fputs("},\"changed\":{", out);
  st_run_change_json(out, b, rc->driver_base, h, rc->driver_head);
  rpt_json_kv_str(out, "summary", rc->text);
  fputc('}', out);
  rpt_json_kv_num(out, "threshold", threshold);
  fputs(",\"warnings\":[", out);
  for (int i = 0; i < w->n; i++) {
    if (i) fputc(',', out);
    st_json_str(out, w->text[i]);
  }
  fputs("],\"pairs\":[", out);
  for (size_t i = 0; i < c->npairs; i++) {
    const pair *p = &c->pairs[i];
    fputs(i ? ",{" : "{", out);
    rpt_json_key(out, "variant_id", 1);
    st_json_str(out, p->base->m.variant_id);
    rpt_json_kv_str(out, "variant", p->base->name);
    rpt_json_kv_str(out, "shape", p->base->m.shape_key);
    rpt_json_kv_num(out, "base_us", p->base->m.median_us);
    rpt_json_kv_num(out, "head_us", p->head->m.median_us);
    json_judgement(out, p, threshold);
    fputc('}', out);
  }
  fputc(']', out);
  fputs(",\"winners\":[", out);
  for (size_t i = 0; i < c->nwinners; i++) {
    const pair *p = &c->winners[i];
    fputs(i ? ",{" : "{", out);
    rpt_json_key(out, "shape", 1);
    st_json_str(out, p->base->m.shape_key);
    rpt_json_kv_str(out, "base_variant", p->base->name);
    rpt_json_kv_num(out, "base_us", p->base->m.median_us);
    rpt_json_kv_str(out, "head_variant", p->head->name);
    rpt_json_kv_num(out, "head_us", p->head->m.median_us);
    rpt_json_kv_int(out, "winner_changed", strcmp(p->base->m.variant_id, p->head->m.variant_id) != 0);
    json_judgement(out, p, threshold);
    fputc('}', out);
  }
  fputc(']', out);
  json_lones(out, "only_in_base", c->only_base, c->nbase, "head_status");
  json_lones(out, "only_in_head", c->only_head, c->nhead, "base_status");
  fputs(",\"summary\":{", out);
  rpt_json_key(out, "compared", 1);
  fprintf(out, "%d", s->compared);
  rpt_json_kv_int(out, "regressions", s->regressions);
  rpt_json_kv_int(out, "improvements", s->improvements);
  rpt_json_kv_int(out, "unchanged", s->unchanged);
  rpt_json_kv_int(out, "only_in_base", s->only_base);
  rpt_json_kv_int(out, "only_in_head", s->only_head);
  rpt_json_kv_int(out, "winners_compared", s->winners_compared);
  rpt_json_kv_int(out, "winner_regressions", s->winner_regressions);
  fputs("}}\n", out);
}

static st_status regress_text(FILE *out, const st_run_row *b, const st_run_row *h, double threshold, const warnings *w,
                              const run_changes *rc, const comparison *c, const st_regress_summary *s, st_err *err) {
  for (int i = 0; i < w->n; i++) fprintf(out, "warning: %s\n", w->text[i]);
  char bdev[160], hdev[160];
  run_device(b, bdev, sizeof bdev);
  run_device(h, hdev, sizeof hdev);
  fprintf(out, "base run %lld: %s %s on %s, started %s\n", (long long)b->id, b->kind, b->op, bdev, b->started);
  fprintf(out, "head run %lld: %s %s on %s, started %s\n", (long long)h->id, h->kind, h->op, hdev, h->started);
  fprintf(out, "changed from base to head: %s\n", rc->text[0] ? rc->text : "nothing the runs recorded");
  fprintf(out,
          "a change counts with %d+ repetitions a side when a rank test rejects (Mann-Whitney, p <= %g) and the "
          "median shift is at least the threshold %.1f %%; otherwise beyond max(threshold, spread base + spread "
          "head)\n",
          REGRESS_MIN_REPS, ST_VERDICT_ALPHA, 100.0 * threshold);
  st_status st = ST_OK;
  if (c->npairs) {
    static const char *const heads[] = {"variant", "shape",   "base us", "head us",
                                        "change %", "noise %", "p",       "verdict"};
    rpt_table t = {8, heads, "llrrrrrl", NULL, 0, 0};
    for (size_t i = 0; i < c->npairs && st == ST_OK; i++) {
      const pair *p = &c->pairs[i];
      char bus[32], hus[32], change[32], noise[32], pv[32];
      p_text(p, pv, sizeof pv);
      st = rpt_table_row(
          &t, err, p->base->name, p->base->m.shape_key, rpt_fmt_us(bus, sizeof bus, p->base->m.median_us),
          rpt_fmt_us(hus, sizeof hus, p->head->m.median_us), rpt_fmt_pct(change, sizeof change, "%+.1f", p->change),
          rpt_fmt_pct(noise, sizeof noise, "%.1f", p->noise), pv, VERDICT[p->v]);
    }
    if (st == ST_OK) st = rpt_table_print(&t, out, err);
    rpt_table_free(&t);
  }
  /* Pairs that were ok and now fail verification matter more than timings. */
  for (size_t i = 0; i < c->nbase && st == ST_OK; i++) {
    const lone *l = &c->only_base[i];
    if (l->other && (!strcmp(l->other->m.status, "wrong") || !strcmp(l->other->m.status, "failed")))
      fprintf(out, "note: %s on %s was ok in base and is %s in head: %s\n", l->m->name, l->m->m.shape_key,
              l->other->m.status, l->other->m.error);
  }
  if (s->winner_regressions && st == ST_OK) { /* the shapes whose winner got slower */
    static const char *const heads[] = {"shape", "base winner", "base us", "head winner", "head us", "change %", "p"};
    rpt_table t = {7, heads, "llrlrrr", NULL, 0, 0};
    for (size_t i = 0; i < c->nwinners && st == ST_OK; i++) {
      const pair *p = &c->winners[i];
      if (p->v != V_REGRESSION) continue;
      char bus[32], hus[32], change[32], pv[32];
      p_text(p, pv, sizeof pv);
      const int same = strcmp(p->base->m.variant_id, p->head->m.variant_id) == 0;
      st = rpt_table_row(&t, err, p->base->m.shape_key, p->base->name, rpt_fmt_us(bus, sizeof bus, p->base->m.median_us),
                         same ? "(the same)" : p->head->name, rpt_fmt_us(hus, sizeof hus, p->head->m.median_us),
                         rpt_fmt_pct(change, sizeof change, "%+.1f", p->change), pv);
    }
    if (st == ST_OK) {
      fputs("winners that got slower (the fastest verified variant of each run, per shape):\n", out);
      st = rpt_table_print(&t, out, err);
    }
    rpt_table_free(&t);
  }
  fprintf(out, "%d compared, %d regressions, %d improvements, %d unchanged, %d only in base, %d only in head\n",
          s->compared, s->regressions, s->improvements, s->unchanged, s->only_base, s->only_head);
  fprintf(out, "winners: %d shapes compared, %d slower\n", s->winners_compared, s->winner_regressions);
  return st;
}

st_status st_report_regress(st_db *db, FILE *out, const st_regress_opts *opts, st_regress_summary *summary,
                            st_err *err) {
  if (summary) memset(summary, 0, sizeof *summary);
  if (!opts) return st_fail(err, ST_ERR_INVALID_ARG, "regress: opts is NULL");
  st_status st = rpt_check_common(db, out, opts->format, err);
  if (st != ST_OK) return st;
  if (!(isfinite(opts->threshold) && opts->threshold >= 0))
    return st_fail(err, ST_ERR_INVALID_ARG, "regress: threshold=%g is not a number >= 0", opts->threshold);
  if (opts->base_run == opts->head_run)
    return st_fail(err, ST_ERR_INVALID_ARG, "regress: --base and --head are both run %lld; compare two different runs",
                   (long long)opts->base_run);
  st_run_row b, h;
  meas_list bl = {NULL, 0, 0, ST_OK, err}, hl = {NULL, 0, 0, ST_OK, err};
  comparison c = {0};
  st_regress_summary s;
  memset(&s, 0, sizeof s);
  st = load_run(db, opts->base_run, "regress: --base", &b, &bl, err);
  if (st == ST_OK) st = load_run(db, opts->head_run, "regress: --head", &h, &hl, err);
  if (st == ST_OK && st_cold_run(b.args) != st_cold_run(h.args))
    st = st_fail(err, ST_ERR_INVALID_ARG,
                 "regress: run %lld timed the paged caches %s in L2 and run %lld %s (--cold): "
                 "their times do not compare",
                 (long long)b.id, st_cold_run(b.args) ? "cold" : "warm", (long long)h.id,
                 st_cold_run(h.args) ? "cold" : "warm");
  if (st == ST_OK) st = compare_runs(&bl, &hl, opts->threshold, &c, err);
  run_changes rc = {0};
  if (st == ST_OK) st = st_run_driver(db, &b, &rc.driver_base, err);
  if (st == ST_OK) st = st_run_driver(db, &h, &rc.driver_head, err);
  if (st == ST_OK) {
    st_run_change(&b, rc.driver_base, &h, rc.driver_head, rc.text, sizeof rc.text);
    warnings w = {.n = 0};
    collect_warnings(&b, &h, &w);
    summarize(&c, &s);
    if (opts->format == ST_REPORT_JSON)
      regress_json(out, &b, &h, opts->threshold, &w, &rc, &c, &s);
    else
      st = regress_text(out, &b, &h, opts->threshold, &w, &rc, &c, &s, err);
  }
  comparison_free(&c);
  free(bl.v);
  free(hl.v);
  if (st != ST_OK) return st;
  if (summary) *summary = s;
  return rpt_finish_output(out, err);
}
