/* report_format.h - the output helpers the reports share (report.c defines
 * them; report.c and report_history.c use them): JSON members and aligned
 * text tables. Internal to the tuner; not installed. */
#ifndef ST_REPORT_FORMAT_H
#define ST_REPORT_FORMAT_H

#include <stddef.h>
#include <stdio.h>

#include "report.h"

/* ---- JSON ---- */

/* A number; null when it is not finite. */
void rpt_json_num(FILE *out, double x);
/* "key": for the members of an object; `first` says whether to skip the comma. */
void rpt_json_key(FILE *out, const char *key, int first);
void rpt_json_kv_str(FILE *out, const char *key, const char *val);
void rpt_json_kv_num(FILE *out, const char *key, double val);
void rpt_json_kv_int(FILE *out, const char *key, long long val);
/* The members of a run object, "id" first (no braces). */
void rpt_json_run_members(FILE *out, const st_run_row *r);

/* ---- text tables ---- */

typedef struct rpt_table {
  int ncols;
  const char *const *heads;
  const char *align; /* per column: 'l' or 'r' */
  char **cells;      /* row-major, ncols per row, owned */
  size_t nrows, cap;
} rpt_table;

/* Appends a row: exactly ncols `const char *` cells, copied (NULL: ""). */
st_status rpt_table_row(rpt_table *t, st_err *err, ...);
/* The heads, then the rows, columns two spaces apart. */
st_status rpt_table_print(const rpt_table *t, FILE *out, st_err *err);
void rpt_table_free(rpt_table *t);

/* Cells: "-" for a time not > 0 or a fraction not finite. */
const char *rpt_fmt_us(char *buf, size_t cap, double us);
const char *rpt_fmt_pct(char *buf, size_t cap, const char *fmt, double fraction);
const char *rpt_fmt_int(char *buf, size_t cap, long long x);

/* ---- checks ---- */

/* fflush and ferror of `out`: ST_ERR_INVALID_ARG when writing failed. */
st_status rpt_finish_output(FILE *out, st_err *err);
/* db and out not NULL, format text or JSON. */
st_status rpt_check_common(const st_db *db, const FILE *out, st_report_format format, st_err *err);

#endif
