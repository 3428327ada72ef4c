#include "cli.h"

#include "compile.h"
#include "fork_child.h"
#include "st_db_export.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

volatile sig_atomic_t st_cli_stop = 0;

static void on_signal(int sig) {
  if (st_cli_stop) _exit(128 + sig);
  st_cli_stop = 1;
}

void st_cli_catch_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

void st_cli_error(const st_cli *cli, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "sparsetune %s: ", cli && cli->cmd ? cli->cmd : "");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static int parse_ll(const st_cli *cli, const char *name, const char *text, long long lo, long long hi,
                    long long *out) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno || end == text || *end || v < lo || v > hi) {
    st_cli_error(cli, "--%s=%s is not a whole number in %lld..%lld", name, text, lo, hi);
    return -2;
  }
  *out = v;
  return 0;
}

/* show's words after the options: the report, then the run id of `run` or
 * the device name of `winners`. Whatever follows is left to the caller's
 * check for unexpected arguments. */
static int parse_report(int argc, char **argv, st_cli *cli) {
  cli->what = argv[optind++];
  if (optind == argc) return 0;
  if (!strcmp(cli->what, "winners")) {
    cli->device_name = argv[optind++];
    return 0;
  }
  if (strcmp(cli->what, "run")) return 0;
  if (parse_ll(cli, "run", argv[optind], 1, (long long)(~0ULL >> 1), &cli->run)) return -2;
  optind++;
  return 0;
}

int st_cli_parse(int argc, char **argv, unsigned allowed, const char *usage, st_cli *cli) {
  memset(cli, 0, sizeof *cli);
  cli->cmd = argv[0];
  cli->db_path = ST_DEFAULT_DB;
  cli->eval_decode = 100;
  cli->eval_prefill = 30;
  cli->suite = ST_DEFAULT_SUITE;
  cli->threshold = 0.05;
  cli->min_runs = 0; /* the command's default */
  cli->seed = 20261122;
  cli->sms = 132;
  static const struct option opts[] = {
      {"db", required_argument, 0, 'd'},     {"suite", required_argument, 0, 's'},
      {"op", required_argument, 0, 'o'},     {"arch", required_argument, 0, 'a'},
      {"device", required_argument, 0, 'g'}, {"jobs", required_argument, 0, 'j'},
      {"json", no_argument, 0, 'J'},         {"new", no_argument, 0, 'n'},
      {"seed", required_argument, 0, 'S'},   {"base", required_argument, 0, 'b'},
      {"head", required_argument, 0, 'H'},   {"threshold", required_argument, 0, 't'},
      {"print", no_argument, 0, 'p'},        {"help", no_argument, 0, 'h'},
      {"harness", no_argument, 0, 'A'},      {"match", required_argument, 0, 'm'},
      {"cold", no_argument, 0, 'C'},         {"builtin", no_argument, 0, 'B'},
      {"decode", required_argument, 0, 'D'}, {"prefill", required_argument, 0, 'P'},
      {"oracle-db", required_argument, 0, 'R'}, {"out", required_argument, 0, 'O'},
      {"force", no_argument, 0, 'F'},        {"leave-one-out", no_argument, 0, 'L'},
      {"search", required_argument, 0, 'M'}, {"min-runs", required_argument, 0, 'N'},
      {"html", required_argument, 0, 'W'},   {"sms", required_argument, 0, 'Q'},
      {0, 0, 0, 0}};
  static const struct {
    int c;
    unsigned flag;
  } need[] = {{'d', ST_OPT_DB},      {'s', ST_OPT_SUITE},   {'o', ST_OPT_OP},      {'a', ST_OPT_ARCH},
              {'g', ST_OPT_DEVICE},  {'j', ST_OPT_JOBS},    {'J', ST_OPT_JSON},    {'n', ST_OPT_FRESH},
              {'S', ST_OPT_SEED},    {'b', ST_OPT_REGRESS}, {'H', ST_OPT_REGRESS},
              {'t', ST_OPT_REGRESS | ST_OPT_HISTORY},
              {'p', ST_OPT_PRINT},   {'A', ST_OPT_HARNESS}, {'m', ST_OPT_MATCH},
              {'C', ST_OPT_COLD},    {'B', ST_OPT_BUILTIN}, {'D', ST_OPT_EVAL},     {'P', ST_OPT_EVAL},
              {'R', ST_OPT_EVAL},    {'O', ST_OPT_OUT},     {'F', ST_OPT_FORCE},   {'L', ST_OPT_EVAL},
              {'M', ST_OPT_SEARCH},  {'N', ST_OPT_HISTORY}, {'W', ST_OPT_HTML},    {'Q', ST_OPT_SMS}};
  optind = 1;
  opterr = 0;
  int c, li = -1;
  long long v;
  while ((c = getopt_long(argc, argv, ":h", opts, &li)) != -1) {
    if (c == 'h') {
      fputs(usage, stdout);
      return -1;
    }
    if (c == '?' || c == ':') {
      st_cli_error(cli, c == ':' ? "option %s needs a value (see --help)" : "unknown option %s (see --help)",
                   argv[optind - 1]);
      return -2;
    }
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
      if (need[i].c != c) continue;
      if (!(allowed & need[i].flag)) { /* every option but -h is long: li names it */
        st_cli_error(cli, "option --%s does not apply to this command (see --help)", opts[li].name);
        return -2;
      }
      cli->given |= need[i].flag;
    }
    switch (c) {
    case 'd': cli->db_path = optarg; break;
    case 's': cli->suite = optarg; break;
    case 'o': cli->op = optarg; break;
    case 'a': cli->arch = optarg; break;
    case 'J': cli->json = 1; break;
    case 'n': cli->fresh = 1; break;
    case 'p': cli->print_source = 1; break;
    case 'A': cli->harness = 1; break;
    case 'C': cli->cold = 1; break;
    case 'B': cli->builtin = 1; break;
    case 'F': cli->force = 1; break;
    case 'L': cli->leave_one_out = 1; break;
    case 'D':
      if (parse_ll(cli, "decode", optarg, 0, 1000, &v)) return -2;
      cli->eval_decode = (int)v;
      cli->eval_counts_given = 1;
      break;
    case 'P':
      if (parse_ll(cli, "prefill", optarg, 0, 1000, &v)) return -2;
      cli->eval_prefill = (int)v;
      cli->eval_counts_given = 1;
      break;
    case 'R':
      if (!*optarg) {
        st_cli_error(cli, "--oracle-db needs a file name");
        return -2;
      }
      cli->oracle_db = optarg;
      break;
    case 'O':
      if (!*optarg) {
        st_cli_error(cli, "--out needs a file name");
        return -2;
      }
      cli->out_path = optarg;
      break;
    case 'M':
      if (strcmp(optarg, "full") && strcmp(optarg, "model")) {
        st_cli_error(cli, "--search=%s is not full or model", optarg);
        return -2;
      }
      cli->search_model = strcmp(optarg, "model") == 0;
      break;
    case 'm':
      if (!*optarg || strlen(optarg) > 100 || strpbrk(optarg, " \t\n")) {
        st_cli_error(cli, "--match needs 1 to 100 characters of a variant name, without spaces");
        return -2;
      }
      cli->match = optarg;
      break;
    case 'g':
      if (allowed & ST_OPT_DEVICE_NAME) {
        if (!*optarg) {
          st_cli_error(cli, "--device needs a device model's name, as `sparsetune show runs` lists it");
          return -2;
        }
        cli->device_name = optarg;
        break;
      }
      if (parse_ll(cli, "device", optarg, 0, 63, &v)) return -2;
      cli->device = (int)v;
      break;
    case 'j':
      if (parse_ll(cli, "jobs", optarg, 1, 256, &v)) return -2;
      cli->jobs = (int)v;
      break;
    case 'Q':
      if (parse_ll(cli, "sms", optarg, 1, 4096, &v)) return -2;
      cli->sms = (int)v;
      break;
    case 'S':
      if (parse_ll(cli, "seed", optarg, 0, (long long)(~0ULL >> 1), &v)) return -2;
      cli->seed = (unsigned long long)v;
      break;
    case 'b':
      if (parse_ll(cli, "base", optarg, 1, (long long)(~0ULL >> 1), &cli->base)) return -2;
      break;
    case 'H':
      if (parse_ll(cli, "head", optarg, 1, (long long)(~0ULL >> 1), &cli->head)) return -2;
      break;
    case 'W':
      if (!optarg[0]) {
        st_cli_error(cli, "--html needs a file name");
        return -2;
      }
      cli->html_path = optarg;
      break;
    case 'N':
      if (parse_ll(cli, "min-runs", optarg, 1, 1000000, &v)) return -2;
      cli->min_runs = (int)v;
      break;
    case 't': {
      char *end = NULL;
      cli->threshold = strtod(optarg, &end);
      if (end == optarg || *end || !(cli->threshold >= 0 && cli->threshold < 10)) {
        st_cli_error(cli, "--threshold=%s is not a fraction in 0..10 (0.05 = 5%%)", optarg);
        return -2;
      }
      break;
    }
    }
  }
  if (optind < argc && (allowed & ST_OPT_RUN) && parse_report(argc, argv, cli)) return -2;
  if (optind < argc && (allowed & ST_OPT_SOURCES)) {
    cli->sources = (const char *const *)argv + optind;
    cli->nsources = argc - optind;
    optind = argc;
  }
  if (optind < argc) {
    st_cli_error(cli, "unexpected argument '%s' (see --help)", argv[optind]);
    return -2;
  }
  if (!*cli->db_path) {
    st_cli_error(cli, "--db needs a file name");
    return -2;
  }
  return 0;
}

int st_cli_check_arch(const st_cli *cli, const char *arch) {
  st_err err = {{0}};
  const st_status s = st_compile_check_arch(arch, &err);
  if (s == ST_OK) return ST_EXIT_OK;
  st_cli_error(cli, "%s", err.msg);
  return s == ST_ERR_INVALID_ARG ? ST_EXIT_USAGE : ST_EXIT_FAIL;
}

int st_cli_open_read(const st_cli *cli, st_db **db, int fail) {
  st_err err = {{0}};
  if (st_db_open(cli->db_path, ST_DB_READONLY, db, &err) == ST_OK) return ST_EXIT_OK;
  st_cli_error(cli, "%s", err.msg);
  return fail;
}

int st_cli_open(const st_cli *cli, st_gen **gen, st_db **db) {
  st_err err = {{0}};
  /* The generator's messages say that they are the generator's. */
  if (gen && st_gen_open(NULL, NULL, gen, &err) != ST_OK) {
    st_cli_error(cli, "%s", err.msg);
    return ST_EXIT_FAIL;
  }
  if (db && st_db_open(cli->db_path, ST_DB_READWRITE, db, &err) != ST_OK) {
    st_cli_error(cli, "%s", err.msg);
    if (gen) {
      st_gen_close(*gen);
      *gen = NULL;
    }
    return ST_EXIT_FAIL;
  }
  return ST_EXIT_OK;
}

int st_cli_is_exported(const st_cli *cli) {
  st_db *db = NULL;
  st_err err = {{0}};
  if (st_db_open(cli->db_path, ST_DB_READONLY, &db, &err) != ST_OK) return 0;
  st_db_export_mark *m = malloc(sizeof *m); /* a path inside: large */
  const int exported = m && st_db_get_export_mark(db, m, &err) == ST_OK && m->exported;
  free(m);
  st_db_close(db);
  return exported;
}

int st_cli_refuse_exported(const st_cli *cli) {
  st_db *db = NULL;
  st_err err = {{0}};
  if (st_db_open(cli->db_path, ST_DB_READONLY, &db, &err) != ST_OK) return ST_EXIT_OK;
  const st_status s = st_db_refuse_exported(db, &err);
  st_db_close(db);
  if (s == ST_OK) return ST_EXIT_OK;
  st_cli_error(cli, "%s", err.msg);
  return ST_EXIT_FAIL;
}

void st_cli_suite_free(st_cli_suite *s) {
  free(s->shapes);
  st_gen_free_variants(s->variants, s->nvariants);
  memset(s, 0, sizeof *s);
}

/* Appends the variants of `op` for the suite's shapes of that op. */
static st_status add_op_variants(st_gen *gen, const char *op, st_cli_suite *s, st_err *err) {
  st_shape *mine = malloc(sizeof *mine * (size_t)s->nshapes);
  if (!mine) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  int n = 0;
  for (int i = 0; i < s->nshapes; i++)
    if (strcmp(s->shapes[i].op, op) == 0) mine[n++] = s->shapes[i];
  st_gen_variant *v = NULL;
  int nv = 0;
  st_status st = st_gen_variants(gen, op, mine, n, &v, &nv, err);
  free(mine);
  if (st != ST_OK) return st;
  st_gen_variant *all = realloc(s->variants, sizeof *all * (size_t)(s->nvariants + nv));
  if (!all) {
    st_gen_free_variants(v, nv);
    return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  }
  memcpy(all + s->nvariants, v, sizeof *v * (size_t)nv);
  free(v); /* the sources moved into `all` */
  s->variants = all;
  s->nvariants += nv;
  return ST_OK;
}

static st_status store_suite(st_db *db, const st_cli_suite *s, st_err *err) {
  st_status st = st_db_begin(db, err);
  if (st != ST_OK) return st;
  for (int i = 0; i < s->nvariants && st == ST_OK; i++) {
    const st_gen_variant *v = &s->variants[i];
    st = st_db_put_source(db, v->row.source_hash, v->row.op, &v->row.kernel, v->source, err);
    if (st == ST_OK) st = st_db_put_variant(db, &v->row, err);
  }
  for (int i = 0; i < s->nshapes && st == ST_OK; i++)
    st = st_db_put_shape(db, s->shapes[i].key, s->shapes[i].op, &s->shapes[i].params, s->shapes[i].dispatch_key, err);
  if (st != ST_OK) {
    st_db_rollback(db);
    return st;
  }
  return st_db_commit(db, err);
}

int st_cli_load_suite(const st_cli *cli, st_gen *gen, st_db *db, st_cli_suite *out) {
  st_err err = {{0}};
  memset(out, 0, sizeof *out);
  if (st_gen_suite(gen, cli->suite, cli->op, &out->shapes, &out->nshapes, &err) != ST_OK) {
    st_cli_error(cli, "%s", err.msg);
    return ST_EXIT_USAGE;
  }
  if (out->nshapes == 0) {
    st_cli_error(cli, "suite '%s' has no shapes%s%s", cli->suite, cli->op ? " for op " : "", cli->op ? cli->op : "");
    st_cli_suite_free(out);
    return ST_EXIT_USAGE;
  }
  /* Each op of the suite once, in order of first appearance. */
  for (int i = 0; i < out->nshapes; i++) {
    int seen = 0;
    for (int j = 0; j < i; j++) seen |= strcmp(out->shapes[j].op, out->shapes[i].op) == 0;
    if (!seen && add_op_variants(gen, out->shapes[i].op, out, &err) != ST_OK) {
      st_cli_error(cli, "%s", err.msg);
      st_cli_suite_free(out);
      return ST_EXIT_FAIL;
    }
  }
  if (db && store_suite(db, out, &err) != ST_OK) {
    st_cli_error(cli, "%s", err.msg);
    st_cli_suite_free(out);
    return ST_EXIT_FAIL;
  }
  return ST_EXIT_OK;
}

void st_cli_format_duration(double seconds, char *buf, size_t cap) {
  if (seconds < 0) seconds = 0;
  const long s = (long)(seconds + 0.5);
  if (s >= 3600) snprintf(buf, cap, "%ldh%02ldm", s / 3600, s / 60 % 60);
  else if (s >= 60) snprintf(buf, cap, "%ldm%02lds", s / 60, s % 60);
  else snprintf(buf, cap, "%lds", s);
}

typedef struct compile_progress_ctx {
  int tty;
  double last;
} compile_progress_ctx;

static void compile_progress(void *ctx, int done, int total, int cached, int failed, double eta, const char *last) {
  compile_progress_ctx *c = ctx;
  char eta_text[32] = "?";
  if (eta >= 0) st_cli_format_duration(eta, eta_text, sizeof eta_text);
  /* Without a terminal, a line per tenth of the work. */
  if (!c->tty && last && done < total && (double)done < c->last + 0.1 * total) return;
  c->last = done;
  fprintf(stderr, "%scompile: %d/%d sources (%d cached, %d failed) ETA %s%s", c->tty ? "\r\033[K" : "", done, total,
          cached, failed, eta_text, c->tty ? "" : "\n");
  if (c->tty && done == total) fputc('\n', stderr);
  fflush(stderr);
}

/* The compile itself, in the child, on its own connection under the
 * parent's writer lock. */
static int compile_in_child(const st_cli *cli, st_db *db, const st_cli_suite *s, const char *arch) {
  st_err err = {{0}};
  if (st_db_attach(db, &err) != ST_OK) {
    st_cli_error(cli, "%s", err.msg);
    return ST_EXIT_FAIL;
  }
  compile_progress_ctx pc = {.tty = isatty(2), .last = 0};
  st_compile_stats stats;
  memset(&stats, 0, sizeof stats);
  st_status st =
      st_compile_all(db, s->variants, s->nvariants, arch, cli->jobs, compile_progress, &pc, &st_cli_stop, &stats, &err);
  st_db_close(db); /* this process's copy; the lock stays with the parent */
  if (st != ST_OK) {
    st_cli_error(cli, "compile: %s", err.msg);
    return ST_EXIT_FAIL;
  }
  char took[32];
  st_cli_format_duration(stats.seconds, took, sizeof took);
  printf("compiled for %s: %d distinct sources, %d cached, %d compiled now, %d from the disk cache (%d failed) "
         "in %s%s\n",
         arch, stats.total, stats.cached, stats.compiled - stats.from_disk, stats.from_disk, stats.failed, took,
         stats.interrupted ? " (interrupted)" : "");
  if (stats.interrupted) return ST_EXIT_INTERRUPTED;
  return stats.failed ? ST_EXIT_FAIL : ST_EXIT_OK;
}

static void on_stop_request(int sig) {
  (void)sig;
  st_cli_stop = 1;
}

/* The child stops when its parent says so (SIGUSR1), however the parent was
 * asked: Ctrl-C reaches the whole process group and `kill -TERM` the
 * parent alone, and either way the child hears it once. A parent that dies
 * takes the child with it (fork_child.h). */
static void stop_on_parents_word(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_IGN;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sa.sa_handler = on_stop_request;
  sigaction(SIGUSR1, &sa, NULL);
}

static void sleep_ms(int ms) {
  struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL); /* a signal ends it early, as it should */
}

/* Waits for the compile child, passing a stop on to it. */
static int wait_for_compile(const st_cli *cli, pid_t pid) {
  int status = 0, told = 0;
  for (;;) {
    if (st_cli_stop && !told) told = kill(pid, SIGUSR1) == 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) {
      st_cli_error(cli, "waiting for the compiler process: %s", strerror(errno));
      return ST_EXIT_FAIL;
    }
    sleep_ms(50);
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  st_cli_error(cli, "the compiler process died (signal %d)", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return ST_EXIT_FAIL;
}

/* NVRTC loads and initializes the CUDA driver when one is installed, and a
 * process that initialized CUDA cannot fork workers that use it. So the
 * compile runs in a child process of its own; the tuner stays CUDA-free. */
int st_cli_compile(const st_cli *cli, st_db *db, const st_cli_suite *s, const char *arch) {
  st_err err = {{0}};
  if (st_compile_check_arch(arch, &err) != ST_OK) {
    st_cli_error(cli, "%s", err.msg);
    return ST_EXIT_USAGE;
  }
  pid_t pid = -1;
  if (st_fork_child(db, &pid, &err) != ST_OK) {
    st_cli_error(cli, "starting the compiler process: %s", err.msg);
    return ST_EXIT_FAIL;
  }
  if (pid == 0) {
    stop_on_parents_word();
    const int rc = compile_in_child(cli, db, s, arch);
    fflush(NULL);
    _exit(rc);
  }
  return wait_for_compile(cli, pid);
}
