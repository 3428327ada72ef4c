/* cmd_show.c - `sparsetune show`: runs, one run, or the winners. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "report.h"
#include "show_search.h"

static const char usage[] =
    "usage: sparsetune show [runs | run ID [--search model] | winners [DEVICE]] [--db FILE] [--json]\n"
    "\n"
    "  runs          every run, newest first, with counts of ok/wrong/failed/pruned (default)\n"
    "  run ID        the measurements of run ID\n"
    "  run ID --search model\n"
    "                what `tune --search model` would have left out of run ID (a\n"
    "                tune that ran every variant) and what it would have cost: per\n"
    "                op, the pairs left out and the best kept variant's time\n"
    "                against the best (docs/method.md)\n"
    "  winners       the winners per dispatch key for every device model in the\n"
    "                database (the runtime loads those of its own card)\n"
    "  winners DEVICE\n"
    "                only those of the device model named exactly DEVICE, as\n"
    "                `show runs` lists it (for example \"NVIDIA H200\")\n"
    "  --db FILE     database (default ./sparsetune.db), opened read-only\n"
    "  --json        one JSON document instead of a table\n";

/* The device models of the database's runs, each once, newest run first.
 * Every device with winners has runs: the winners come from them. */
typedef struct device_names {
  char (*names)[sizeof(((st_run_row *)0)->device_name)];
  int n, cap;
  int out_of_memory;
} device_names;

static int has_device(const device_names *d, const char *name) {
  for (int i = 0; i < d->n; i++)
    if (!strcmp(d->names[i], name)) return 1;
  return 0;
}

static int collect_device(void *ctx, const st_run_row *r) {
  device_names *d = ctx;
  if (!r->device_name[0] || has_device(d, r->device_name)) return 0;
  if (d->n == d->cap) {
    const int cap = d->cap ? 2 * d->cap : 16;
    void *names = realloc(d->names, sizeof d->names[0] * (size_t)cap);
    if (!names) {
      d->out_of_memory = 1;
      return 1;
    }
    d->names = names;
    d->cap = cap;
  }
  snprintf(d->names[d->n++], sizeof d->names[0], "%s", r->device_name);
  return 0;
}

/* An unknown device name: ST_ERR_INVALID_ARG with the names there are. */
static st_status no_such_device(const st_cli *cli, const device_names *d, st_err *err) {
  char list[ST_ERR_MSG_MAX] = "";
  size_t len = 0;
  for (int i = 0; i < d->n && len < sizeof list; i++)
    len += (size_t)snprintf(list + len, sizeof list - len, "%s'%s'", i ? ", " : "", d->names[i]);
  if (d->n == 0)
    return st_fail(err, ST_ERR_INVALID_ARG, "no device named '%s' in %s: it has no runs yet", cli->device_name,
                   cli->db_path);
  return st_fail(err, ST_ERR_INVALID_ARG, "no device named '%s' in %s; its devices: %s", cli->device_name, cli->db_path,
                 list);
}

/* `show winners [DEVICE]`: the winners of the model named exactly DEVICE,
 * as the runtime matches its card's name, or of every model. */
static st_status show_winners(const st_cli *cli, st_db *db, st_report_format fmt, st_err *err) {
  device_names d = {.names = NULL};
  st_status s = st_db_each_run(db, 0, collect_device, &d, err);
  if (s == ST_OK && d.out_of_memory) s = st_fail(err, ST_ERR_NOMEM, "out of host memory listing the devices");
  if (s != ST_OK) goto cleanup;
  if (cli->device_name) {
    s = has_device(&d, cli->device_name) ? st_report_winners(db, stdout, fmt, cli->device_name, NULL, err)
                                         : no_such_device(cli, &d, err);
    goto cleanup;
  }
  for (int i = 0; i < d.n && s == ST_OK; i++) s = st_report_winners(db, stdout, fmt, d.names[i], NULL, err);
cleanup:
  free(d.names);
  return s;
}

static st_status show_report(const st_cli *cli, st_db *db, const char *what, st_err *err) {
  const st_report_format fmt = cli->json ? ST_REPORT_JSON : ST_REPORT_TEXT;
  if (!strcmp(what, "runs")) return st_report_runs(db, stdout, fmt, 0, err);
  if (!strcmp(what, "run") && cli->search_model) return st_show_search_replay(cli, db, cli->run, err);
  if (!strcmp(what, "run")) return st_report_run(db, stdout, fmt, cli->run, err);
  return show_winners(cli, db, fmt, err);
}

int st_cmd_show(int argc, char **argv) {
  st_cli cli;
  int rc = st_cli_parse(argc, argv, ST_OPT_DB | ST_OPT_JSON | ST_OPT_RUN | ST_OPT_SEARCH, usage, &cli);
  if (rc) return rc == -1 ? ST_EXIT_OK : ST_EXIT_USAGE;
  const char *what = cli.what ? cli.what : "runs";
  if (strcmp(what, "runs") && strcmp(what, "run") && strcmp(what, "winners")) {
    st_cli_error(&cli, "unknown report '%s': runs, run ID or winners (see --help)", what);
    return ST_EXIT_USAGE;
  }
  if (!strcmp(what, "run") && cli.run <= 0) {
    st_cli_error(&cli, "show run needs a run id: sparsetune show run 3");
    return ST_EXIT_USAGE;
  }
  if ((cli.given & ST_OPT_SEARCH) && (strcmp(what, "run") || !cli.search_model)) {
    st_cli_error(&cli, "--search model goes with show run ID (the replay of a full tune)");
    return ST_EXIT_USAGE;
  }
  if (cli.device_name && !*cli.device_name) {
    st_cli_error(&cli, "show winners needs a device name (as `show runs` lists them), or none for every device");
    return ST_EXIT_USAGE;
  }
  st_db *db = NULL;
  if ((rc = st_cli_open_read(&cli, &db, ST_EXIT_FAIL)) != ST_EXIT_OK) return rc;
  st_err err = {{0}};
  const st_status s = show_report(&cli, db, what, &err);
  st_db_close(db);
  if (s != ST_OK) {
    st_cli_error(&cli, "%s", err.msg);
    return s == ST_ERR_INVALID_ARG ? ST_EXIT_USAGE : ST_EXIT_FAIL;
  }
  return ST_EXIT_OK;
}
