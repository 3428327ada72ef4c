/* cmd_report.c - `sparsetune report --html FILE`: a suite's timing history
 * as one self-contained page (report_html.h). */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "commands.h"
#include "report_html.h"
#include "staged_file.h"

static const char usage[] =
    "usage: sparsetune report --html FILE --suite NAME [--op OP] [--min-runs N] [--threshold F] [--db FILE]\n"
    "\n"
    "Writes the timing history of a suite's tune and bench runs as one HTML\n"
    "page with everything inline (CSS and SVG charts: no script, no network),\n"
    "one history per device model and cache mode as `history` splits them.\n"
    "For each: its runs and what changed from one to the next (card, driver,\n"
    "tool version, templates, args), and for each shape a chart of its winner\n"
    "over the runs (the fastest verified variant of each run) beside the\n"
    "variants that won it, their change points (E-Divisive, as `history`),\n"
    "the peer's time where the suite recorded one, and a table of the winners\n"
    "over time. Regressions are marked and listed first: a change point that\n"
    "slows a series beyond the threshold, and a winner whose time rose beyond\n"
    "it from the run before. The page is written beside FILE and moved into\n"
    "place when complete (an existing FILE is replaced). Exits 0 when it is\n"
    "written, whatever it shows (`history` and `regress` give the verdict\n"
    "by exit code), 1 when it cannot be written, 2 on bad input or a\n"
    "database it cannot read.\n"
    "\n"
    "  --html FILE     the page to write (required)\n"
    "  --suite NAME    the suite whose runs to show (required)\n"
    "  --op OP         only the runs of this op (default: every op of the suite)\n"
    "  --min-runs N    fewest ok runs a variant's series needs to be drawn and\n"
    "                  cut, default 2\n"
    "  --threshold F   a regression is a shift beyond F, default 0.05 (5%)\n"
    "  --db FILE       database (default ./sparsetune.db), opened read-only\n";

int st_cmd_report(int argc, char **argv) {
  st_cli cli;
  int rc = st_cli_parse(argc, argv, ST_OPT_DB | ST_OPT_SUITE | ST_OPT_OP | ST_OPT_HISTORY | ST_OPT_HTML, usage, &cli);
  if (rc) return rc == -1 ? ST_EXIT_OK : ST_EXIT_USAGE;
  if (!cli.html_path) {
    st_cli_error(&cli, "--html FILE is required: the page to write");
    return ST_EXIT_USAGE;
  }
  if (!(cli.given & ST_OPT_SUITE)) {
    st_cli_error(&cli, "--suite NAME is required (see sparsetune show runs)");
    return ST_EXIT_USAGE;
  }
  st_db *db = NULL;
  if ((rc = st_cli_open_read(&cli, &db, ST_EXIT_USAGE)) != ST_EXIT_OK) return rc;
  st_err err = {{0}};
  const st_history_opts o = {.suite = cli.suite,
                             .op = cli.op,
                             .min_runs = cli.min_runs ? cli.min_runs : ST_HTML_DEFAULT_MIN_RUNS,
                             .threshold = cli.threshold,
                             .format = ST_REPORT_TEXT};
  st_staged_file *f = malloc(sizeof *f);
  FILE *out = NULL;
  st_html_summary sum;
  rc = ST_EXIT_FAIL;
  if (!f) {
    st_cli_error(&cli, "out of memory");
    goto done;
  }
  if (st_staged_create(f, cli.html_path, "report", &err) != ST_OK) {
    free(f);
    f = NULL;
    st_cli_error(&cli, "%s", err.msg);
    goto done;
  }
  if (!(out = fopen(f->path, "w"))) {
    st_cli_error(&cli, "cannot write %s", f->path);
    goto done;
  }
  st_status s = st_report_html(db, out, &o, cli.db_path, &sum, &err);
  const int closed = fclose(out);
  if (s != ST_OK) {
    st_cli_error(&cli, "%s", err.msg);
    rc = s == ST_ERR_INVALID_ARG ? ST_EXIT_USAGE : ST_EXIT_FAIL;
    goto done;
  }
  if (closed != 0) {
    st_cli_error(&cli, "writing %s failed", f->path);
    goto done;
  }
  if (st_staged_commit(f, 1, &err) != ST_OK) {
    st_cli_error(&cli, "%s", err.msg);
    goto done;
  }
  printf("wrote %s: %d runs, %d histories, %d shapes, %d change points (%d slowdowns), %d winner regressions\n",
         cli.html_path, sum.runs, sum.histories, sum.shapes, sum.change_points, sum.slowdowns, sum.winner_regressions);
  rc = ST_EXIT_OK;
done:
  if (f && rc != ST_EXIT_OK) st_staged_discard(f);
  free(f);
  st_db_close(db);
  return rc;
}
