/* cmd_generate.c - `sparsetune generate`: the suite's variants into the db. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

static const char usage[] =
    "usage: sparsetune generate [--suite NAME] [--op OP] [--db FILE] [--print]\n"
    "\n"
    "Runs the Lua generator: the suite's shapes and every variant of its ops\n"
    "worth timing on them (plus each op's default variants), rendered from\n"
    "the templates and content-hashed, written to the database.\n"
    "\n"
    "  --suite NAME   shape suite (default m3-decode)\n"
    "  --op OP        only this op of the suite (OP,OP,...: only these ops)\n"
    "  --db FILE      database (default ./sparsetune.db)\n"
    "  --print        also print every rendered source to stdout\n";

int st_cmd_generate(int argc, char **argv) {
  st_cli cli;
  int rc = st_cli_parse(argc, argv, ST_OPT_DB | ST_OPT_SUITE | ST_OPT_OP | ST_OPT_PRINT, usage, &cli);
  if (rc) return rc == -1 ? ST_EXIT_OK : ST_EXIT_USAGE;
  st_gen *gen = NULL;
  st_db *db = NULL;
  if ((rc = st_cli_open(&cli, &gen, &db)) != ST_EXIT_OK) return rc;
  st_cli_suite s;
  rc = st_cli_load_suite(&cli, gen, db, &s);
  if (rc == ST_EXIT_OK) {
    int sources = 0, defaults = 0;
    for (int i = 0; i < s.nvariants; i++) {
      int seen = 0;
      for (int j = 0; j < i && !seen; j++) seen = !strcmp(s.variants[j].row.source_hash, s.variants[i].row.source_hash);
      sources += !seen;
      defaults += s.variants[i].row.is_default;
      if (cli.print_source && !seen)
        printf("// ==== %s (source %s)\n%s\n", s.variants[i].row.name, s.variants[i].row.source_hash,
               s.variants[i].source);
    }
    printf("suite %s: %d shapes, %d variants (%d defaults) from %d distinct sources, stored in %s\n", cli.suite,
           s.nshapes, s.nvariants, defaults, sources, cli.db_path);
    st_cli_suite_free(&s);
  }
  st_db_close(db);
  st_gen_close(gen);
  return rc;
}
