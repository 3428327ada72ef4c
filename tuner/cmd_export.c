/* cmd_export.c - `sparsetune export`: a compact runtime database, what the
 * runtime reads of a tuned one (db/st_db_export.h says which rows), for an
 * engine to ship. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "commands.h"
#include "ops/op_list.h"
#include "st_db_export.h"
#include "staged_file.h"

static const char usage[] = "usage: sparsetune export --db SRC --out DST [--device NAME] [--op OP] [--force]\n"
                            "\n"
                            "Writes DST, a database with what the runtime reads of SRC and nothing\n"
                            "else, for an engine to ship: the winners (of every device model, or of\n"
                            "--device's), the variants they name (parameters, no source text) and the\n"
                            "binaries the runtime loads for them on those devices. Measurements,\n"
                            "kernel sources, shapes and failed compiles stay in SRC, and so do the\n"
                            "default variants' binaries (the runtime compiles its built-in variants\n"
                            "at first use). st_open reads DST as it reads SRC.\n"
                            "\n"
                            "SRC is opened read-only and never changed. DST is written beside its\n"
                            "name and moved into place when complete; an existing DST is kept unless\n"
                            "--force. DST is marked as an export: generate, compile and tune\n"
                            "refuse it (tune into SRC and export again); bench times it and records\n"
                            "nothing; show and regress read it.\n"
                            "\n"
                            "  --db SRC        the tuned database (required), opened read-only\n"
                            "  --out DST       the file to write (required; not SRC)\n"
                            "  --device NAME   only the winners of the device model named exactly\n"
                            "                  NAME, as `sparsetune show runs` lists it (for example\n"
                            "                  \"NVIDIA H200\")\n"
                            "  --op OP         only this op's winners (OP,OP,...: only these ops)\n"
                            "  --force         replace DST if it exists\n";

#define ST_OP_NAME(name, NAME) #name,
static const char *const op_names[] = {ST_OP_LIST(ST_OP_NAME)};
#undef ST_OP_NAME

static int is_op(const char *name, size_t len) {
  for (size_t i = 0; i < sizeof op_names / sizeof op_names[0]; i++)
    if (strlen(op_names[i]) == len && !strncmp(op_names[i], name, len)) return 1;
  return 0;
}

/* Every name of --op is an op of the runtime: a misspelt one would export
 * nothing of it, silently. */
static int check_ops(const st_cli *cli) {
  for (const char *p = cli->op;;) {
    const char *comma = strchr(p, ',');
    const size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (!is_op(p, len)) {
      char known[512] = "";
      size_t n = 0;
      for (size_t i = 0; i < sizeof op_names / sizeof op_names[0] && n < sizeof known; i++)
        n += (size_t)snprintf(known + n, sizeof known - n, "%s%s", i ? ", " : "", op_names[i]);
      st_cli_error(cli, "unknown op '%.*s' (known: %s)", (int)len, p, known);
      return ST_EXIT_USAGE;
    }
    if (!comma) return ST_EXIT_OK;
    p = comma + 1;
  }
}

static int check_args(const st_cli *cli) {
  if (!(cli->given & ST_OPT_DB)) {
    st_cli_error(cli, "--db SRC is required: the tuned database to export (see --help)");
    return ST_EXIT_USAGE;
  }
  if (!cli->out_path) {
    st_cli_error(cli, "--out DST is required: the file to write (see --help)");
    return ST_EXIT_USAGE;
  }
  return cli->op ? check_ops(cli) : ST_EXIT_OK;
}

/* SRC is a file; DST is not SRC under any name, and is absent, or a file
 * that --force may replace. */
static int check_paths(const st_cli *cli, struct stat *src) {
  if (stat(cli->db_path, src) != 0) {
    st_cli_error(cli, "database '%s' cannot be read: %s", cli->db_path, strerror(errno));
    return ST_EXIT_USAGE;
  }
  struct stat dst;
  if (stat(cli->out_path, &dst) != 0) return ST_EXIT_OK;
  if (dst.st_dev == src->st_dev && dst.st_ino == src->st_ino) {
    st_cli_error(cli, "--out '%s' is the file --db names: the export is a new file beside it", cli->out_path);
    return ST_EXIT_USAGE;
  }
  if (!S_ISREG(dst.st_mode)) {
    st_cli_error(cli, "--out '%s' exists and is not a file", cli->out_path);
    return ST_EXIT_USAGE;
  }
  if (!cli->force) {
    st_cli_error(cli, "'%s' exists; it is kept (--force replaces it)", cli->out_path);
    return ST_EXIT_USAGE;
  }
  return ST_EXIT_OK;
}

static void format_size(long long bytes, char *buf, size_t cap) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)bytes;
  size_t u = 0;
  for (; v >= 1024 && u + 1 < sizeof units / sizeof units[0]; u++) v /= 1024;
  snprintf(buf, cap, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

/* The cubins' sizes are said twice: as compiled (what the runtime loads)
 * and as the export stores them (compressed). */
static void print_summary(const st_cli *cli, const st_db_export_counts *c, const struct stat *src) {
  struct stat dst;
  const long long dst_bytes = stat(cli->out_path, &dst) == 0 ? (long long)dst.st_size : -1;
  char dst_size[32], src_size[32], cubin_size[32], stored_size[32];
  format_size(dst_bytes, dst_size, sizeof dst_size);
  format_size((long long)src->st_size, src_size, sizeof src_size);
  format_size((long long)c->cubin_bytes, cubin_size, sizeof cubin_size);
  format_size((long long)c->stored_cubin_bytes, stored_size, sizeof stored_size);
  printf("exported %lld winners, %lld variants, %lld binaries (cubins of %s, stored compressed in %s) to %s: %lld "
         "bytes (%s), from %s of %lld bytes (%s)\n",
         (long long)c->winners, (long long)c->variants, (long long)c->binaries, cubin_size, stored_size, cli->out_path,
         dst_bytes, dst_size, cli->db_path, (long long)src->st_size, src_size);
}

/* The export into a staged file beside DST, moved into place when whole. */
static int export_staged(const st_cli *cli, st_db *src, const char *source_name, st_db_export_counts *counts) {
  st_err err = {{0}};
  st_staged_file *f = malloc(sizeof *f);
  if (!f) {
    st_cli_error(cli, "out of host memory");
    return ST_EXIT_FAIL;
  }
  const st_db_export_filter filter = {.device_name = cli->device_name, .ops = cli->op};
  int rc = ST_EXIT_FAIL;
  if (st_staged_create(f, cli->out_path, "export", &err) != ST_OK) goto fail;
  if (st_db_export(src, f->path, &filter, source_name, &st_cli_stop, counts, &err) != ST_OK) {
    if (st_cli_stop) rc = ST_EXIT_INTERRUPTED;
    goto fail;
  }
  if (counts->winners == 0) {
    rc = cli->device_name || cli->op ? ST_EXIT_USAGE : ST_EXIT_FAIL;
    st_err_format(&err, "'%s' has no winners%s%s%s%s to export (`sparsetune show winners --db %s` lists them)",
                  cli->db_path, cli->device_name ? " of device " : "", cli->device_name ? cli->device_name : "",
                  cli->op ? " for op " : "", cli->op ? cli->op : "", cli->db_path);
    goto fail;
  }
  if (st_staged_commit(f, cli->force, &err) != ST_OK) goto fail;
  free(f);
  return ST_EXIT_OK;
fail:
  st_cli_error(cli, "%s", err.msg);
  st_staged_discard(f);
  free(f);
  return rc;
}

int st_cmd_export(int argc, char **argv) {
  st_cli cli;
  int rc = st_cli_parse(
      argc, argv, ST_OPT_DB | ST_OPT_OUT | ST_OPT_DEVICE | ST_OPT_DEVICE_NAME | ST_OPT_OP | ST_OPT_FORCE, usage, &cli);
  if (rc) return rc == -1 ? ST_EXIT_OK : ST_EXIT_USAGE;
  struct stat src_stat;
  if ((rc = check_args(&cli)) != ST_EXIT_OK || (rc = check_paths(&cli, &src_stat)) != ST_EXIT_OK) return rc;
  st_db *src = NULL;
  st_err err = {{0}};
  if (st_db_open_readonly(cli.db_path, &src, &err) != ST_OK) {
    st_cli_error(&cli, "%s", err.msg);
    return ST_EXIT_FAIL;
  }
  /* Where it came from, as a path that still names it from elsewhere. */
  char source_name[PATH_MAX];
  if (!realpath(cli.db_path, source_name)) snprintf(source_name, sizeof source_name, "%s", cli.db_path);
  st_cli_catch_signals(); /* a stop ends the export and removes its staged file */
  st_db_export_counts counts;
  rc = export_staged(&cli, src, source_name, &counts);
  st_db_close(src);
  if (rc == ST_EXIT_OK) print_summary(&cli, &counts, &src_stat);
  return rc;
}
