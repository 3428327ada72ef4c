/* cmd_compile.c - `sparsetune compile`: every variant of a suite to cubins. */
#include <stdio.h>

#include "cli.h"
#include "commands.h"
#include "worker.h"

static const char usage[] =
    "usage: sparsetune compile [--suite NAME] [--op OP] [--db FILE] [--arch SM] [--device N] [--jobs N]\n"
    "\n"
    "Generates the suite's variants and compiles every distinct source with\n"
    "NVRTC, in parallel, storing cubins with registers, spills, shared memory\n"
    "and compile time, keyed by source hash, arch and compiler version, so\n"
    "nothing compiles twice. The target is the GPU's architecture, else\n"
    "--arch (default sm_90a). Nothing runs on a GPU.\n"
    "\n"
    "  --suite NAME   shape suite (default m3-decode)\n"
    "  --op OP        only this op of the suite (OP,OP,...: only these ops)\n"
    "  --db FILE      database (default ./sparsetune.db)\n"
    "  --arch SM      target, e.g. sm_90a (default: the GPU's, else sm_90a)\n"
    "  --device N     the GPU whose architecture to target, without --arch (default 0)\n"
    "  --jobs N       compile threads (default: all CPUs)\n";

int st_cmd_compile(int argc, char **argv) {
  st_cli cli;
  int rc = st_cli_parse(argc, argv, ST_OPT_DB | ST_OPT_SUITE | ST_OPT_OP | ST_OPT_ARCH | ST_OPT_DEVICE | ST_OPT_JOBS,
                        usage, &cli);
  if (rc) return rc == -1 ? ST_EXIT_OK : ST_EXIT_USAGE;
  if (cli.arch && (cli.given & ST_OPT_DEVICE)) {
    st_cli_error(&cli,
                 "--device picks the GPU whose architecture to target and --arch names the target: give one of them");
    return ST_EXIT_USAGE;
  }
  st_cli_catch_signals();
  const char *arch = cli.arch;
  st_device_info dev;
  st_err err = {{0}};
  if (!arch) {
    if (st_probe_device(cli.device, &dev, &err) == ST_OK) arch = dev.arch;
    else {
      printf("no GPU here (%s); compiling for %s\n", err.msg, ST_DEFAULT_ARCH);
      arch = ST_DEFAULT_ARCH;
    }
  }
  if ((rc = st_cli_check_arch(&cli, arch)) != ST_EXIT_OK) return rc;
  st_gen *gen = NULL;
  st_db *db = NULL;
  if ((rc = st_cli_open(&cli, &gen, &db)) != ST_EXIT_OK) return rc;
  st_cli_suite s;
  if ((rc = st_cli_load_suite(&cli, gen, db, &s)) == ST_EXIT_OK) {
    printf("suite %s: %d shapes, %d variants\n", cli.suite, s.nshapes, s.nvariants);
    rc = st_cli_compile(&cli, db, &s, arch);
    st_cli_suite_free(&s);
  }
  st_db_close(db);
  st_gen_close(gen);
  return rc;
}
