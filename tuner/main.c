/* main.c - `sparsetune`: the command line of the tuner. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "generator.h"

static const char usage[] =
    "usage: sparsetune <command> [options]   (sparsetune <command> --help for its options)\n"
    "\n"
    "sparsetune generates sparse-attention kernel variants, compiles them with\n"
    "NVRTC, verifies each against a double-precision reference, times them on\n"
    "the GPU and records every timing and the winner per shape in SQLite.\n"
    "\n"
    "commands:\n"
    "  generate   render the variants of a suite into the database\n"
    "  compile    compile them for the GPU (or --arch) without timing\n"
    "  tune       generate, compile, verify, time, and pick winners\n"
    "  bench      measure the runtime's choices on a suite (e.g. anchors)\n"
    "  show       list runs, one run's measurements, or the winners\n"
    "  regress    compare two runs; exit 1 on a regression beyond the noise\n"
    "  version    print the version and where generator/ and templates/ come from\n"
    "\n"
    "generator/ and templates/ are read from $SPARSETUNE_HOME if set, else from\n"
    "../share/sparsetune beside the binary if it is installed there, else from the\n"
    "source tree the binary was built from.\n"
    "\n"
    "environment:\n"
    "  SPARSETUNE_HOME  read generator/ and templates/ from this folder (a copy to\n"
    "                   experiment on, or another installed tree)\n";

/* `sparsetune version`: the version, then where the generator and templates
 * come from and why, so that an install can be checked. */
static int print_version(void) {
  printf("sparsetune %s\n", ST_VERSION);
  static const char *const subs[] = {"generator", "templates"};
  for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
    char dir[PATH_MAX];
    const char *why = "";
    st_err err = {{0}};
    if (st_gen_locate(NULL, subs[i], dir, sizeof dir, &why, &err) == ST_OK)
      printf("%s: %s (%s)\n", subs[i], dir, why);
    else
      printf("%s: %s\n", subs[i], err.msg);
  }
  return ST_EXIT_OK;
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    fputs(usage, argc < 2 ? stderr : stdout);
    return argc < 2 ? ST_EXIT_USAGE : ST_EXIT_OK;
  }
  static const struct {
    const char *name;
    int (*fn)(int, char **);
  } cmds[] = {{"generate", st_cmd_generate}, {"compile", st_cmd_compile}, {"tune", st_cmd_tune},
              {"bench", st_cmd_bench},       {"show", st_cmd_show},       {"regress", st_cmd_regress}};
  if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) return print_version();
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
    if (!strcmp(argv[1], cmds[i].name)) return cmds[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "sparsetune: unknown command '%s'\n\n%s", argv[1], usage);
  return ST_EXIT_USAGE;
}
