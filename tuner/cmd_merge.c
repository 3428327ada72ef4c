/* cmd_merge.c - `sparsetune merge --db DST SRC...`: the databases of
 * several machines or shards combined into one (st_db_merge.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "st_db_merge.h"

#define MAX_SOURCES 64

static const char usage[] = "usage: sparsetune merge --db DST SRC [SRC ...]\n"
                            "\n"
                            "Merges the databases SRC (of other machines, or shards of one tune) into\n"
                            "DST, created when missing, so that history, regress, report and the\n"
                            "runtime read them as one. Nothing is lost and nothing is doubled: kernel\n"
                            "sources, variants, shapes and binaries are keyed by content; a card by\n"
                            "its uuid; a run by its card, kind, op, suite, start and args (a run DST\n"
                            "has already is not added again, and takes SRC's status when SRC finished\n"
                            "it later); measurements follow their run; of two winners for one card\n"
                            "and dispatch key the newer stays. Merging a database twice adds nothing\n"
                            "the second time. Every SRC is checked before DST is written (missing,\n"
                            "not a sparsetune database, an exported one, DST itself: exit 2, nothing\n"
                            "written), then merged in one transaction of its own: a failure or Ctrl-C\n"
                            "leaves DST with the sources merged before it (exit 1, or 130). SRC files\n"
                            "are only read.\n"
                            "\n"
                            "  --db DST   the database to merge into (default ./sparsetune.db)\n";

/* realpath of an existing file, or "" when it cannot be resolved. */
static void real_of(const char *path, char out[PATH_MAX]) {
  if (!realpath(path, out)) out[0] = '\0';
}

static void print_counts(const char *src, const st_db_merge_counts *c) {
  printf("merged %s: %lld runs added (%lld already there, %lld of them finished later), %lld measurements, %lld "
         "winners added or newer, %lld cards, %lld sources, %lld variants, %lld shapes, %lld binaries\n",
         src, (long long)c->runs, (long long)c->runs_known, (long long)c->runs_updated, (long long)c->measurements,
         (long long)c->winners, (long long)c->devices, (long long)c->sources, (long long)c->variants,
         (long long)c->shapes, (long long)c->binaries);
}

int st_cmd_merge(int argc, char **argv) {
  st_cli cli;
  int rc = st_cli_parse(argc, argv, ST_OPT_DB | ST_OPT_SOURCES, usage, &cli);
  if (rc) return rc == -1 ? ST_EXIT_OK : ST_EXIT_USAGE;
  if (cli.nsources == 0) {
    st_cli_error(&cli, "name the databases to merge into %s (see --help)", cli.db_path);
    return ST_EXIT_USAGE;
  }
  if (cli.nsources > MAX_SOURCES) {
    st_cli_error(&cli, "%d databases at once; merge at most %d a command", cli.nsources, MAX_SOURCES);
    return ST_EXIT_USAGE;
  }
  st_cli_catch_signals();
  st_db *src[MAX_SOURCES] = {0};
  st_db *dst = NULL;
  st_err err = {{0}};
  char dst_real[PATH_MAX], src_real[PATH_MAX];
  real_of(cli.db_path, dst_real);
  rc = ST_EXIT_USAGE;
  /* Every source checked before the destination is touched. */
  for (int i = 0; i < cli.nsources; i++) {
    real_of(cli.sources[i], src_real);
    if (dst_real[0] && src_real[0] && !strcmp(dst_real, src_real)) {
      st_cli_error(&cli, "%s is the database merged into (--db)", cli.sources[i]);
      goto done;
    }
    if (st_db_open_readonly(cli.sources[i], &src[i], &err) != ST_OK ||
        st_db_merge_check_source(src[i], &err) != ST_OK) {
      st_cli_error(&cli, "%s", err.msg);
      goto done;
    }
  }
  if (st_db_open(cli.db_path, ST_DB_READWRITE, &dst, &err) != ST_OK) {
    st_cli_error(&cli, "%s", err.msg);
    goto done;
  }
  rc = ST_EXIT_OK;
  for (int i = 0; i < cli.nsources && rc == ST_EXIT_OK; i++) {
    st_db_merge_counts c;
    const st_status s = st_db_merge(src[i], dst, &st_cli_stop, &c, &err);
    if (s == ST_OK) {
      print_counts(cli.sources[i], &c);
      continue;
    }
    st_cli_error(&cli, "%s (%s merged nothing; the databases before it stay merged)", err.msg, cli.sources[i]);
    rc = st_cli_stop ? ST_EXIT_INTERRUPTED : s == ST_ERR_INVALID_ARG ? ST_EXIT_USAGE : ST_EXIT_FAIL;
  }
done:
  for (int i = 0; i < cli.nsources; i++) st_db_close(src[i]);
  st_db_close(dst);
  return rc;
}
