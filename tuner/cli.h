/* cli.h - what the `sparsetune` commands share: options, the database and
 * generator they open, the suite's shapes and variants, and messages.
 *
 * Exit codes: 0 success; 1 failure (or, for regress, a regression; for
 * history, a slowdown); 2 bad
 * usage or input; 130 interrupted (the work done so far is kept). */
#ifndef ST_CLI_H
#define ST_CLI_H

#include <signal.h>
#include <stdio.h>

#include "device_info.h"
#include "generator.h"
#include "st_db_write.h"

#define ST_EXIT_OK 0
#define ST_EXIT_FAIL 1
#define ST_EXIT_USAGE 2
#define ST_EXIT_INTERRUPTED 130

#define ST_DEFAULT_DB "sparsetune.db"
#define ST_DEFAULT_SUITE "m3-decode"
#define ST_DEFAULT_ARCH "sm_90a"

/* Options; each command accepts the subset named in its usage text. */
typedef struct st_cli {
  const char *cmd;
  const char *db_path;
  const char *suite;
  const char *op;         /* NULL: every op of the suite */
  const char *arch;       /* NULL: the GPU's, else ST_DEFAULT_ARCH */
  int device;
  int jobs;               /* compile threads; 0 = online CPUs */
  int json;
  int fresh;              /* tune: start a new run instead of resuming */
  unsigned long long seed;
  long long base, head;   /* regress */
  double threshold;       /* regress, history */
  int min_runs;           /* history, report: fewest ok runs a series needs; 0: the command's default */
  const char *what;       /* show: runs | run | winners */
  long long run;          /* show run N */
  /* show winners DEVICE, export --device NAME: the device model's name;
   * NULL: every model */
  const char *device_name;
  int print_source;       /* generate: print the rendered sources */
  int harness;            /* bench: also time the variant through the op harness */
  const char *match;      /* tune: only variants whose name contains this; NULL: all */
  int cold;               /* tune, bench: cold-cache timing (cold.h) */
  int search_model;       /* tune: leave out variants the run found slow near a shape (search_model.h) */
  int builtin;            /* bench: the runtime with no database (built-in variants) */
  int eval_decode, eval_prefill; /* eval: random decode steps and prefill batches */
  int eval_counts_given;          /* eval: --decode or --prefill was on the command line */
  int leave_one_out;              /* eval: the suite's own shapes, each without its key's winners */
  const char *oracle_db;  /* eval: where the held-out shapes are tuned; NULL: beside --db */
  const char *out_path;   /* export: the file to write; NULL when not given */
  int force;              /* export: replace an existing --out */
  const char *html_path;  /* report: the page to write */
  int sms;                /* builtin: multiprocessors of the device to choose for */
  const char *const *sources; /* merge: the databases after the options */
  int nsources;
  unsigned given;         /* the ST_OPT_* flags of the options on the command line */
} st_cli;

/* Option flags a command accepts. */
enum {
  ST_OPT_DB = 1 << 0,
  ST_OPT_SUITE = 1 << 1,
  ST_OPT_OP = 1 << 2,
  ST_OPT_ARCH = 1 << 3,
  ST_OPT_DEVICE = 1 << 4,
  ST_OPT_JOBS = 1 << 5,
  ST_OPT_JSON = 1 << 6,
  ST_OPT_FRESH = 1 << 7,
  ST_OPT_SEED = 1 << 8,
  ST_OPT_REGRESS = 1 << 9,
  ST_OPT_PRINT = 1 << 10,
  ST_OPT_RUN = 1 << 11,
  ST_OPT_HARNESS = 1 << 12,
  ST_OPT_MATCH = 1 << 13,
  ST_OPT_COLD = 1 << 14,
  ST_OPT_BUILTIN = 1 << 15,
  ST_OPT_OUT = 1 << 16,
  ST_OPT_FORCE = 1 << 17,
  /* With ST_OPT_DEVICE: --device takes a device model's name (into
   * device_name), not a GPU ordinal. */
  ST_OPT_DEVICE_NAME = 1 << 18,
  ST_OPT_EVAL = 1 << 19,
  ST_OPT_SEARCH = 1 << 20,
  ST_OPT_HISTORY = 1 << 21, /* --min-runs, and --threshold */
  ST_OPT_HTML = 1 << 22,    /* --html FILE */
  ST_OPT_SOURCES = 1 << 23, /* trailing arguments: database files (merge) */
  ST_OPT_SMS = 1 << 24      /* --sms N: a device's multiprocessors (builtin) */
};

/* Parses argv (argv[0] = the command name) into `cli` with defaults set.
 * Returns -1 after printing `usage` for --help (exit 0), -2 after a message
 * for bad usage (exit 2), else 0. */
int st_cli_parse(int argc, char **argv, unsigned allowed, const char *usage, st_cli *cli);

/* Prints "sparsetune <cmd>: <message>" to stderr. */
void st_cli_error(const st_cli *cli, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Set by SIGINT/SIGTERM once st_cli_catch_signals ran; a second signal
 * exits at once. */
extern volatile sig_atomic_t st_cli_stop;
void st_cli_catch_signals(void);

/* The shapes of the suite (for cli->op, or all ops) and the variants of every
 * op among them, written to the database (sources, variants, shapes) in one
 * transaction. Frees with st_cli_suite_free. */
typedef struct st_cli_suite {
  st_shape *shapes;
  int nshapes;
  st_gen_variant *variants;
  int nvariants;
} st_cli_suite;

int st_cli_load_suite(const st_cli *cli, st_gen *gen, st_db *db, st_cli_suite *out);
void st_cli_suite_free(st_cli_suite *s);

/* Compiles every variant of the suite for `arch` (cached ones skipped), with
 * a progress line, in a child process that writes through `db` (detached
 * meanwhile, under this process's writer lock) and stops when this process
 * is asked to (SIGINT, SIGTERM) or dies. Returns an exit code. */
int st_cli_compile(const st_cli *cli, st_db *db, const st_cli_suite *s, const char *arch);

/* Checks that NVRTC compiles for `arch` (st_compile_check_arch), printing
 * why not. Commands call it before they open the database, so that a bad
 * target writes nothing. Returns an exit code: 2 for a target that is not
 * one, 1 when NVRTC cannot say. */
int st_cli_check_arch(const st_cli *cli, const char *arch);

/* Opens the generator and the database (read-write), printing errors. */
int st_cli_open(const st_cli *cli, st_gen **gen, st_db **db);

/* Opens cli->db_path read-only into *db (the reporting commands): ST_EXIT_OK,
 * or `fail`, the command's exit code for a database it cannot read, after
 * saying why. */
int st_cli_open_read(const st_cli *cli, st_db **db, int fail);

/* 1 when cli->db_path opens and is an exported runtime database
 * (`sparsetune export`), else 0. */
int st_cli_is_exported(const st_cli *cli);

/* ST_EXIT_OK unless cli->db_path is an exported runtime database, which a
 * command that records into it refuses before any work (printing why);
 * a file that cannot be opened is left to the command's own open. */
int st_cli_refuse_exported(const st_cli *cli);

/* Seconds as "1m05s" / "42s". */
void st_cli_format_duration(double seconds, char *buf, size_t cap);

#endif
