/* eval_leave_out.c - each shape of a tuned suite with its own key's
 * winners left out of the database (eval_leave_out.h). */
#include "eval_leave_out.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "st_db.h"
#include "st_db_export.h"

static int same_key(const st_shape *a, const st_shape *b) {
  return strcmp(a->op, b->op) == 0 && strcmp(a->dispatch_key, b->dispatch_key) == 0;
}

/* An empty file of our own for the export (st_db_export takes an absent or
 * empty path). */
static st_status temp_path(char *path, size_t cap, st_err *err) {
  const char *dir = getenv("TMPDIR");
  if (!dir || !*dir) dir = "/tmp";
  if ((size_t)snprintf(path, cap, "%s/sparsetune-leave-out-XXXXXX", dir) >= cap)
    return st_fail(err, ST_ERR_INVALID_ARG, "TMPDIR=%s is too long", dir);
  const int fd = mkstemp(path);
  if (fd < 0) return st_fail(err, ST_ERR_DB, "cannot create a temporary file in %s", dir);
  close(fd);
  return ST_OK;
}

/* The shapes of key `first` (it and the later ones of the same key) timed
 * with a database less that key's winners. */
static st_status time_key(st_db *src, const char *db_path, const st_shape *shapes, int n, int first, int device,
                          unsigned long long seed, st_bench_time *out, st_err *err) {
  st_shape *part = malloc((size_t)n * sizeof *part);
  int *at = malloc((size_t)n * sizeof *at);
  st_bench_time *times = calloc((size_t)n, sizeof *times);
  char path[4200] = "";
  st_status st = part && at && times ? ST_OK : st_fail(err, ST_ERR_NOMEM, "out of host memory");
  int m = 0;
  for (int i = first; st == ST_OK && i < n; i++)
    if (same_key(&shapes[i], &shapes[first])) {
      part[m] = shapes[i];
      at[m++] = i;
    }
  if (st == ST_OK) st = temp_path(path, sizeof path, err);
  if (st == ST_OK) {
    const st_db_export_filter f = {.leave_out_op = shapes[first].op, .leave_out_key = shapes[first].dispatch_key};
    st_db_export_counts counts;
    st = st_db_export(src, path, &f, db_path, &st_cli_stop, &counts, err);
  }
  if (st == ST_OK) st = st_bench_time_shapes(part, m, path, device, seed, times, err);
  for (int k = 0; st == ST_OK && k < m; k++) out[at[k]] = times[k];
  if (path[0]) unlink(path);
  free(part);
  free(at);
  free(times);
  return st;
}

st_status st_eval_leave_one_out(const st_shape *shapes, int n, const char *db_path, int device, unsigned long long seed,
                                st_bench_time *out, st_err *err) {
  st_db *src = NULL;
  st_status st = st_db_open_readonly(db_path, &src, err);
  for (int i = 0; st == ST_OK && i < n; i++) {
    int seen = 0;
    for (int j = 0; j < i && !seen; j++) seen = same_key(&shapes[j], &shapes[i]);
    if (seen) continue;
    if (st_cli_stop) st = st_fail(err, ST_ERR_INVALID_ARG, "interrupted");
    if (st == ST_OK) st = time_key(src, db_path, shapes, n, i, device, seed, out, err);
  }
  st_db_close(src);
  return st;
}
