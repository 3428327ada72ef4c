/* cmd_history.c - `sparsetune history`: where in a suite's runs did a time change? */
#include <stdio.h>

#include "cli.h"
#include "commands.h"
#include "report_history.h"

static const char usage[] =
    "usage: sparsetune history --suite NAME [--op OP] [--min-runs N] [--threshold F] [--db FILE] [--json]\n"
    "\n"
    "Follows every (variant, shape) through the tune and bench runs of a suite,\n"
    "in run order, one history per device model and cache mode (cold runs are\n"
    "never mixed with warm ones). Each (variant, shape) measured ok in at least\n"
    "N runs gives a series of medians, cut where its level changes (E-Divisive,\n"
    "a permutation test at p <= 0.002). For each change: the run where it starts,\n"
    "the shift of the median after against the median before, its p-value, and\n"
    "what else differs between the run before and the run after (card, driver\n"
    "version, tool version, run args). Prints a table sorted by |shift| (or\n"
    "JSON with every series) and exits 1 if a change slows a series by more\n"
    "than the threshold, 0 if none, 2 on bad input or an unreadable database.\n"
    "\n"
    "  --suite NAME    the suite whose runs to follow (required)\n"
    "  --op OP         only the runs of this op (default: every op of the suite)\n"
    "  --min-runs N    fewest ok runs a series needs, default 8\n"
    "  --threshold F   a slowdown is a shift beyond F, default 0.05 (5%)\n"
    "  --db FILE       database (default ./sparsetune.db), opened read-only\n"
    "  --json          one JSON document instead of a table\n";

int st_cmd_history(int argc, char **argv) {
  st_cli cli;
  int rc = st_cli_parse(argc, argv, ST_OPT_DB | ST_OPT_JSON | ST_OPT_SUITE | ST_OPT_OP | ST_OPT_HISTORY, usage, &cli);
  if (rc) return rc == -1 ? ST_EXIT_OK : ST_EXIT_USAGE;
  if (!(cli.given & ST_OPT_SUITE)) {
    st_cli_error(&cli, "--suite NAME is required (see sparsetune show runs)");
    return ST_EXIT_USAGE;
  }
  st_db *db = NULL;
  /* Exit 1 means a slowdown: a database that cannot be read is bad input. */
  if ((rc = st_cli_open_read(&cli, &db, ST_EXIT_USAGE)) != ST_EXIT_OK) return rc;
  st_err err = {{0}};
  st_history_opts o = {.suite = cli.suite,
                       .op = cli.op,
                       .min_runs = cli.min_runs ? cli.min_runs : ST_HISTORY_DEFAULT_MIN_RUNS,
                       .threshold = cli.threshold,
                       .format = cli.json ? ST_REPORT_JSON : ST_REPORT_TEXT};
  st_history_summary sum;
  st_status s = st_report_history(db, stdout, &o, &sum, &err);
  st_db_close(db);
  if (s != ST_OK) {
    st_cli_error(&cli, "%s", err.msg);
    return ST_EXIT_USAGE;
  }
  return sum.slowdowns > 0 ? ST_EXIT_FAIL : ST_EXIT_OK;
}
