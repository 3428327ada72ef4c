/* main.c - `sparsetune`: the command line of the tuner. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "generator.h"

static const char usage[] = "usage: sparsetune <command> [options]   (sparsetune <command> --help for its options)\n"
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
                            "  history    change points in a suite's runs; exit 1 on a slowdown\n"
                            "  report     a suite's timing history as one HTML page (--html FILE)\n"
                            "  merge      combine the databases of several machines or shards into one\n"
                            "  eval       judge the runtime's choices on random shapes no suite holds\n"
                            "  export     write a compact database of what the runtime reads, to ship\n"
                            "  builtin    the variant the library runs for each shape with no database (no GPU)\n"
                            "  version    print the version and where generator/ and templates/ come from\n"
                            "  help       this text; help COMMAND: the options of COMMAND\n"
                            "\n"
                            "generator/ and templates/ are read from $SPARSETUNE_HOME if set, else from\n"
                            "../share/sparsetune beside the binary if it is installed there, else from the\n"
                            "source tree the binary was built from.\n"
                            "\n"
                            "environment:\n"
                            "  SPARSETUNE_HOME  read generator/ and templates/ from this folder (a copy to\n"
                            "                   experiment on, or another installed tree)\n";

static const char version_usage[] = "usage: sparsetune version\n"
                                    "\n"
                                    "Prints the version of sparsetune, then where generator/ and templates/\n"
                                    "are read from and why ($SPARSETUNE_HOME, installed beside the binary, or\n"
                                    "the source tree it was built from).\n";

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

/* `version` takes no option but --help and no argument: the same parser as
 * the other commands refuses the rest with the same messages. */
static int cmd_version(int argc, char **argv) {
  st_cli cli;
  const int rc = st_cli_parse(argc, argv, 0, version_usage, &cli);
  if (rc) return rc == -1 ? ST_EXIT_OK : ST_EXIT_USAGE;
  return print_version();
}

typedef struct command {
  const char *name;
  int (*fn)(int, char **);
} command;

static const command commands[] = {
    {"generate", st_cmd_generate}, {"compile", st_cmd_compile}, {"tune", st_cmd_tune},
    {"bench", st_cmd_bench},       {"show", st_cmd_show},       {"regress", st_cmd_regress},
    {"history", st_cmd_history},   {"report", st_cmd_report},     {"merge", st_cmd_merge},   {"eval", st_cmd_eval},       {"export", st_cmd_export},
    {"builtin", st_cmd_builtin},
    {"version", cmd_version},      {"--version", cmd_version}};

static const command *find_command(const char *name) {
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(name, commands[i].name)) return &commands[i];
  return NULL;
}

static int is_help(const char *arg) { return !strcmp(arg, "--help") || !strcmp(arg, "-h") || !strcmp(arg, "help"); }

/* `sparsetune help [COMMAND]`: the overview, or the command's own --help. */
static int cmd_help(int argc, char **argv) {
  if (argc == 1) {
    fputs(usage, stdout);
    return ST_EXIT_OK;
  }
  if (argc > 2) {
    fprintf(stderr, "sparsetune help: unexpected argument '%s' (sparsetune help [COMMAND])\n", argv[2]);
    return ST_EXIT_USAGE;
  }
  if (is_help(argv[1])) return cmd_help(1, argv);
  const command *c = find_command(argv[1]);
  if (!c) {
    fprintf(stderr, "sparsetune help: unknown command '%s'\n\n%s", argv[1], usage);
    return ST_EXIT_USAGE;
  }
  char help[] = "--help";
  char *args[] = {argv[1], help, NULL};
  return c->fn(2, args);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage, stderr);
    return ST_EXIT_USAGE;
  }
  if (is_help(argv[1])) return cmd_help(argc - 1, argv + 1);
  const command *c = find_command(argv[1]);
  if (c) return c->fn(argc - 1, argv + 1);
  fprintf(stderr, "sparsetune: unknown command '%s'\n\n%s", argv[1], usage);
  return ST_EXIT_USAGE;
}
