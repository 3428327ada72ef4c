/* cmd_show.c - `sparsetune show`: runs, one run, or the winners. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "report.h"

static const char usage[] =
    "usage: sparsetune show [runs | run ID | winners [DEVICE]] [--db FILE] [--json]\n"
    "\n"
    "  runs          every run, newest first, with counts of ok/wrong/failed/pruned (default)\n"
    "  run ID        the measurements of run ID\n"
    "  winners       the winners per dispatch key for every device model in the\n"
    "                database (the runtime loads those of its own card)\n"
    "  --db FILE     database (default ./sparsetune.db), opened read-only\n"
    "  --json        one JSON document instead of a table\n";

typedef struct device_names {
  char names[16][128];
  int n;
} device_names;

static int collect_device(void *ctx, const st_run_row *r) {
  device_names *d = ctx;
  for (int i = 0; i < d->n; i++)
    if (!strcmp(d->names[i], r->device_name)) return 0;
  if (d->n < 16 && r->device_name[0]) snprintf(d->names[d->n++], sizeof d->names[0], "%s", r->device_name);
  return 0;
}

int st_cmd_show(int argc, char **argv) {
  st_cli cli;
  int rc = st_cli_parse(argc, argv, ST_OPT_DB | ST_OPT_JSON | ST_OPT_RUN, usage, &cli);
  if (rc) return rc == -1 ? ST_EXIT_OK : ST_EXIT_USAGE;
  const char *what = cli.what ? cli.what : "runs";
  const st_report_format fmt = cli.json ? ST_REPORT_JSON : ST_REPORT_TEXT;
  if (strcmp(what, "runs") && strcmp(what, "run") && strcmp(what, "winners")) {
    st_cli_error(&cli, "unknown report '%s': runs, run ID or winners (see --help)", what);
    return ST_EXIT_USAGE;
  }
  if (!strcmp(what, "run") && cli.run <= 0) {
    st_cli_error(&cli, "show run needs a run id: sparsetune show run 3");
    return ST_EXIT_USAGE;
  }
  st_db *db = NULL;
  st_err err = {{0}};
  if (st_db_open(cli.db_path, ST_DB_READONLY, &db, &err) != ST_OK) {
    st_cli_error(&cli, "%s", err.msg);
    return ST_EXIT_FAIL;
  }
  st_status s = ST_OK;
  if (!strcmp(what, "runs")) s = st_report_runs(db, stdout, fmt, 0, &err);
  else if (!strcmp(what, "run")) s = st_report_run(db, stdout, fmt, cli.run, &err);
  else {
    device_names d = {.n = 0};
    s = st_db_each_run(db, 0, collect_device, &d, &err);
    for (int i = 0; i < d.n && s == ST_OK; i++) s = st_report_winners(db, stdout, fmt, d.names[i], NULL, &err);
  }
  st_db_close(db);
  if (s != ST_OK) {
    st_cli_error(&cli, "%s", err.msg);
    return s == ST_ERR_INVALID_ARG ? ST_EXIT_USAGE : ST_EXIT_FAIL;
  }
  return ST_EXIT_OK;
}
