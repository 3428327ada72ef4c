/* cmd_regress.c - `sparsetune regress`: slower beyond threshold and noise? */
#include <stdio.h>

#include "cli.h"
#include "commands.h"
#include "report.h"

static const char usage[] =
    "usage: sparsetune regress --base RUN --head RUN [--threshold F] [--db FILE] [--json]\n"
    "\n"
    "Compares the times of every (variant, shape) measured ok in both runs.\n"
    "Where both hold 5 or more repetitions (tune keeps 5), a rank test\n"
    "judges: a regression when head's repetitions are slower than base's\n"
    "(Mann-Whitney, p <= 0.01) AND the median shift is at least the\n"
    "threshold. Elsewhere (a bench keeps no repetitions) the medians: slower\n"
    "by more than the threshold AND by more than the measured noise (the two\n"
    "runs' spreads added). Prints a table (or JSON) and exits 1 if any\n"
    "regression was found, 0 if none, 2 on bad input.\n"
    "\n"
    "  --base RUN      the reference run id (see `sparsetune show runs`)\n"
    "  --head RUN      the run under test\n"
    "  --threshold F   relative threshold, default 0.05 (5%)\n"
    "  --db FILE       database (default ./sparsetune.db), opened read-only\n"
    "  --json          one JSON document instead of a table\n";

int st_cmd_regress(int argc, char **argv) {
  st_cli cli;
  int rc = st_cli_parse(argc, argv, ST_OPT_DB | ST_OPT_JSON | ST_OPT_REGRESS, usage, &cli);
  if (rc) return rc == -1 ? ST_EXIT_OK : ST_EXIT_USAGE;
  if (cli.base <= 0 || cli.head <= 0) {
    st_cli_error(&cli, "--base RUN and --head RUN are both required (see sparsetune show runs)");
    return ST_EXIT_USAGE;
  }
  st_db *db = NULL;
  if ((rc = st_cli_open_read(&cli, &db, ST_EXIT_FAIL)) != ST_EXIT_OK) return rc;
  st_err err = {{0}};
  st_regress_opts o = {.base_run = cli.base, .head_run = cli.head, .threshold = cli.threshold,
                       .format = cli.json ? ST_REPORT_JSON : ST_REPORT_TEXT};
  st_regress_summary sum;
  st_status s = st_report_regress(db, stdout, &o, &sum, &err);
  st_db_close(db);
  if (s != ST_OK) {
    st_cli_error(&cli, "%s", err.msg);
    return s == ST_ERR_INVALID_ARG ? ST_EXIT_USAGE : ST_EXIT_FAIL;
  }
  return sum.regressions > 0 || sum.winner_regressions > 0 ? ST_EXIT_FAIL : ST_EXIT_OK;
}
