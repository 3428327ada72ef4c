/* eval_oracle.c - a finished tune in an eval's oracle database
 * (eval_oracle.h). */
#include "eval_oracle.h"

#include <string.h>
#include <unistd.h>

#include "st_db.h"

typedef struct wanted {
  const char *args, *device;
  int64_t id;
} wanted;

/* Runs come newest first: the first match is the one. */
static int match_finished(void *ctx, const st_run_row *r) {
  wanted *w = ctx;
  if (strcmp(r->kind, "tune") || strcmp(r->status, "done") || strcmp(r->args, w->args) ||
      strcmp(r->device_name, w->device))
    return 0;
  w->id = r->id;
  return 1;
}

int64_t st_eval_finished_tune(const char *path, const char *args, const char *device) {
  if (!path || !args || !device || access(path, F_OK) != 0) return 0;
  st_db *db = NULL;
  st_err err = {{0}};
  if (st_db_open_readonly(path, &db, &err) != ST_OK) return 0;
  wanted w = {args, device, 0};
  (void)st_db_each_run(db, 0, match_finished, &w, &err); /* a read error: no oracle to reuse */
  st_db_close(db);
  return w.id;
}
