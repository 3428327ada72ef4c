/* cmd_eval.c - `sparsetune eval`: how well the runtime does on shapes no
 * suite holds.
 *
 * It draws engine-like shapes from a seed (generator/random_shapes.lua:
 * the suites random-decode:SEED:N and random-prefill:SEED:N), tunes them
 * into an oracle database (`tune`, resumable), then times every shape
 * three ways through libsparsetune, each as `bench` times (CUDA-graph
 * replays, results checked): with the oracle database (the winner tuned on
 * that very shape), with the database under test, and with no database
 * (the built-in variants). A choice's regret on a shape is its time over
 * the oracle's, less 1; the summary gives the median, the 95th percentile,
 * the maximum and a histogram, per kind and in all.
 *
 * --leave-one-out judges the database on a suite it was tuned on instead:
 * the oracle is the database itself, and each shape is timed again with
 * its own dispatch key's winners left out (eval_leave_out.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_suite.h"
#include "cli.h"
#include "commands.h"
#include "eval_leave_out.h"
#include "eval_oracle.h"
#include "eval_report.h"
#include "run_args.h"
#include "worker.h"

static const char usage[] =
    "usage: sparsetune eval [--db FILE] [--decode N] [--prefill N] [--seed N] [--oracle-db FILE] [--device N]\n"
    "                       [--search full|model] [--json]\n"
    "       sparsetune eval --leave-one-out [--suite NAME] [--op OP] [--db FILE] [--seed N] [--device N]\n"
    "                       [--json]\n"
    "\n"
    "Judges the runtime's choices on engine-like shapes no suite holds: N\n"
    "decode steps (an index_decode and a sparse_attn_decode shape each: batch\n"
    "1-256, contexts 1K-256K, mixed lengths, topk 4-32, 1-4 heads, qlen 1-4,\n"
    "bf16 and fp8) and N prefill batches (an index_prefill and a sparse_attn\n"
    "shape each: 1-32K query tokens with prefixes), drawn from the seed (the\n"
    "suites random-decode:SEED:N and random-prefill:SEED:N). It tunes them into\n"
    "the oracle database (resumable: run the same command again; once that\n"
    "tune has finished, later evals of the seed reuse it), then times each\n"
    "shape through libsparsetune as `bench` does, with the oracle's\n"
    "winner, with the database's choice and with no database (the built-in\n"
    "variants), and prints each choice's regret against the oracle (time /\n"
    "oracle time - 1): median, 95th percentile, maximum and a histogram.\n"
    "\n"
    "With --leave-one-out the shapes are a suite's the database was tuned on,\n"
    "and the oracle is the database: each shape is timed with it, then with\n"
    "the database less its own dispatch key's winners (what the runtime would\n"
    "choose had the key never been tuned), then with no database.\n"
    "\n"
    "  --db FILE         the database under test (default ./sparsetune.db); it is\n"
    "                    only read\n"
    "  --decode N        random decode steps (default 100; 0: none)\n"
    "  --prefill N       random prefill batches (default 30; 0: none)\n"
    "  --seed N          the shapes' and the inputs' seed (default 20261122)\n"
    "  --oracle-db FILE  where the shapes are tuned (default FILE.eval-SEED.db\n"
    "                    beside --db)\n"
    "  --search MODE     how the oracle is tuned: full (default) times every\n"
    "                    applicable variant of every shape; model leaves out\n"
    "                    what `tune --search model` leaves out (fewer variants\n"
    "                    timed; the oracle is then the best of those it timed).\n"
    "                    An oracle database resumes only a tune of the same mode\n"
    "  --leave-one-out   judge the suite's own shapes, each without its key\n"
    "  --suite NAME      with --leave-one-out: the suite (default " ST_DEFAULT_SUITE ")\n"
    "  --op OP           with --leave-one-out: only this op (OP,OP,...: these)\n"
    "  --device N        CUDA device ordinal (default 0)\n"
    "  --json            one JSON object instead of the table\n";

/* Runs `tune` on `suite` into the oracle database, unless a tune of the
 * same args on this model of card finished there before: the oracle of a
 * seed is a fact of the shapes, so judging another database against it
 * (or timing again after a stop) reuses it. Tune's report goes to stderr
 * when stdout carries JSON. */
static int tune_oracle(const st_cli *cli, const char *suite, const char *oracle, const char *card) {
  char args[512];
  st_tune_run_args(args, sizeof args, suite, NULL, cli->seed, NULL, 0, cli->search_model);
  const int64_t done = st_eval_finished_tune(oracle, args, card);
  if (done) {
    fprintf(cli->json ? stderr : stdout,
            "eval: %s was tuned into %s by run %lld (finished); its winners are the oracle (remove the file, or "
            "pass another --oracle-db, to tune again)\n",
            suite, oracle, (long long)done);
    return ST_EXIT_OK;
  }
  char device[16], seed[32];
  snprintf(device, sizeof device, "%d", cli->device);
  snprintf(seed, sizeof seed, "%llu", cli->seed);
  char *argv[] = {"tune",
                  "--suite",
                  (char *)suite,
                  "--db",
                  (char *)oracle,
                  "--device",
                  device,
                  "--seed",
                  seed,
                  "--search",
                  cli->search_model ? "model" : "full",
                  NULL};
  fflush(stdout);
  int saved = -1;
  if (cli->json) {
    saved = dup(STDOUT_FILENO);
    if (saved >= 0) dup2(STDERR_FILENO, STDOUT_FILENO);
  }
  const int rc = st_cmd_tune((int)(sizeof argv / sizeof argv[0]) - 1, argv);
  fflush(stdout);
  if (saved >= 0) {
    dup2(saved, STDOUT_FILENO);
    close(saved);
  }
  return rc;
}

/* The shapes of the two random suites, decode first. */
static int draw(const st_cli *cli, char suites[2][64], st_shape **shapes, int *n, int *n_decode) {
  st_gen *gen = NULL;
  st_err err = {{0}};
  *shapes = NULL;
  *n = *n_decode = 0;
  if (st_gen_open(NULL, NULL, &gen, &err) != ST_OK) {
    st_cli_error(cli, "%s", err.msg);
    return ST_EXIT_FAIL;
  }
  int rc = ST_EXIT_OK;
  for (int k = 0; k < 2 && rc == ST_EXIT_OK; k++) {
    if (!suites[k][0]) continue;
    st_shape *part = NULL;
    int m = 0;
    if (st_gen_suite(gen, suites[k], NULL, &part, &m, &err) != ST_OK) {
      st_cli_error(cli, "%s", err.msg);
      rc = ST_EXIT_FAIL;
      break;
    }
    st_shape *grown = realloc(*shapes, (size_t)(*n + m) * sizeof *grown);
    if (!grown) {
      free(part);
      rc = ST_EXIT_FAIL;
      break;
    }
    memcpy(grown + *n, part, (size_t)m * sizeof *part);
    free(part);
    *shapes = grown;
    *n += m;
    if (k == 0) *n_decode = m;
  }
  st_gen_close(gen);
  return rc;
}

/* The options that go together; a message and ST_EXIT_USAGE if not. */
static int check_options(const st_cli *cli) {
  if (cli->leave_one_out && (cli->eval_counts_given || cli->oracle_db)) {
    st_cli_error(cli, "--leave-one-out judges a tuned suite's own shapes: --decode, --prefill and --oracle-db "
                      "do not apply to it");
    return ST_EXIT_USAGE;
  }
  if (cli->leave_one_out && (cli->given & ST_OPT_SEARCH)) {
    st_cli_error(cli, "--search chooses how the random shapes' oracle is tuned; with --leave-one-out the oracle "
                      "is the database itself");
    return ST_EXIT_USAGE;
  }
  if (!cli->leave_one_out && (cli->given & (ST_OPT_SUITE | ST_OPT_OP))) {
    st_cli_error(cli, "--suite and --op choose the shapes of --leave-one-out; the random shapes take --decode "
                      "and --prefill");
    return ST_EXIT_USAGE;
  }
  if (!cli->leave_one_out && cli->eval_decode == 0 && cli->eval_prefill == 0) {
    st_cli_error(cli, "--decode 0 and --prefill 0 leave no shape to judge");
    return ST_EXIT_USAGE;
  }
  if (access(cli->db_path, R_OK) != 0) {
    st_cli_error(cli, "database %s cannot be read: run `sparsetune tune` first (or pass --db)", cli->db_path);
    return ST_EXIT_USAGE;
  }
  return ST_EXIT_OK;
}

typedef struct key_search {
  const st_shape *shape;
  int found;
} key_search;

static int find_key(void *ctx, const st_winner_row *w) {
  key_search *k = ctx;
  k->found = strcmp(w->op, k->shape->op) == 0 && strcmp(w->dispatch_key, k->shape->dispatch_key) == 0;
  return k->found; /* nonzero stops the walk */
}

/* --leave-one-out: the suite's shapes, each of whose keys the database
 * holds a winner for on this device's model (else the oracle would be no
 * tuned choice). */
static int suite_shapes(const st_cli *cli, const st_device_info *dev, st_shape **shapes, int *n) {
  st_gen *gen = NULL;
  st_db *db = NULL;
  st_err err = {{0}};
  int rc = ST_EXIT_FAIL;
  *shapes = NULL;
  *n = 0;
  if (st_gen_open(NULL, NULL, &gen, &err) != ST_OK ||
      st_gen_suite(gen, cli->suite, cli->op, shapes, n, &err) != ST_OK ||
      st_db_open_readonly(cli->db_path, &db, &err) != ST_OK) {
    st_cli_error(cli, "%s", err.msg);
    goto done;
  }
  for (int i = 0; i < *n; i++) {
    key_search k = {.shape = &(*shapes)[i]};
    if (st_db_each_winner(db, dev->name, dev->arch, find_key, &k, &err) != ST_OK) {
      st_cli_error(cli, "%s", err.msg);
      goto done;
    }
    if (!k.found) {
      st_cli_error(cli, "%s holds no winner of %s for %s on a %s: tune the suite %s into it first", cli->db_path,
                   k.shape->op, k.shape->dispatch_key, dev->name, cli->suite);
      rc = ST_EXIT_USAGE;
      goto done;
    }
  }
  rc = *n > 0 ? ST_EXIT_OK : ST_EXIT_FAIL;
  if (*n == 0)
    st_cli_error(cli, "suite %s has no shapes%s%s", cli->suite, cli->op ? " of " : "", cli->op ? cli->op : "");
done:
  st_db_close(db);
  st_gen_close(gen);
  return rc;
}

/* The random shapes of --decode and --prefill, tuned into the oracle
 * database. */
static int random_shapes(const st_cli *cli, const char *oracle, const char *device, st_shape **shapes, int *n,
                         int *n_decode) {
  char suites[2][64] = {"", ""};
  if (cli->eval_decode > 0) snprintf(suites[0], sizeof suites[0], "random-decode:%llu:%d", cli->seed, cli->eval_decode);
  if (cli->eval_prefill > 0)
    snprintf(suites[1], sizeof suites[1], "random-prefill:%llu:%d", cli->seed, cli->eval_prefill);
  int rc = draw(cli, suites, shapes, n, n_decode);
  if (rc != ST_EXIT_OK) return rc;
  if (*n == 0) {
    st_cli_error(cli, "the suites drew no shape");
    return ST_EXIT_FAIL;
  }
  for (int k = 0; k < 2; k++) {
    if (!suites[k][0]) continue;
    if ((rc = tune_oracle(cli, suites[k], oracle, device)) != ST_EXIT_OK) {
      if (rc != ST_EXIT_INTERRUPTED) st_cli_error(cli, "tuning %s into %s failed (above)", suites[k], oracle);
      return rc;
    }
  }
  return ST_EXIT_OK;
}

/* Times the shapes three ways into rows: the oracle, the database under
 * test (--leave-one-out: less each shape's key), no database. */
static int time_rows(const st_cli *cli, const char *oracle, const st_shape *shapes, int n, st_eval_row *rows,
                     st_bench_time *times) {
  const char *const what[3] = {cli->search_model ? "the oracle, tuned with --search model" : "the oracle",
                               "the database", "no database (the built-in variants)"};
  const char *sources[3] = {oracle, cli->db_path, NULL};
  for (int k = 0; k < 3; k++) {
    st_err err = {{0}};
    if (!cli->json) {
      if (cli->leave_one_out && k == 1)
        printf("eval: timing %d shapes with %s less each shape's dispatch key\n", n, cli->db_path);
      else
        printf("eval: timing %d shapes with %s (%s)\n", n, sources[k] ? sources[k] : "no database", what[k]);
      fflush(stdout);
    }
    const st_status st = cli->leave_one_out && k == 1
                             ? st_eval_leave_one_out(shapes, n, cli->db_path, cli->device, cli->seed, times, &err)
                             : st_bench_time_shapes(shapes, n, sources[k], cli->device, cli->seed, times, &err);
    if (st != ST_OK) {
      st_cli_error(cli, "%s", err.msg);
      return strcmp(err.msg, "interrupted") == 0 ? ST_EXIT_INTERRUPTED : ST_EXIT_FAIL;
    }
    for (int i = 0; i < n; i++) *(k == 0 ? &rows[i].oracle : k == 1 ? &rows[i].ours : &rows[i].builtin) = times[i];
  }
  return ST_EXIT_OK;
}

int st_cmd_eval(int argc, char **argv) {
  st_cli cli;
  int rc = st_cli_parse(argc, argv,
                        ST_OPT_DB | ST_OPT_DEVICE | ST_OPT_SEED | ST_OPT_JSON | ST_OPT_EVAL | ST_OPT_SUITE | ST_OPT_OP |
                            ST_OPT_SEARCH,
                        usage, &cli);
  if (rc) return rc == -1 ? ST_EXIT_OK : ST_EXIT_USAGE;
  if ((rc = check_options(&cli)) != ST_EXIT_OK) return rc;
  char oracle[4200];
  if (cli.leave_one_out)
    snprintf(oracle, sizeof oracle, "%s", cli.db_path);
  else if (cli.oracle_db)
    snprintf(oracle, sizeof oracle, "%s", cli.oracle_db);
  else
    snprintf(oracle, sizeof oracle, "%s.eval-%llu.db", cli.db_path, cli.seed);
  char real_db[4096], real_oracle[4096];
  if (!cli.leave_one_out && realpath(cli.db_path, real_db) && realpath(oracle, real_oracle) &&
      strcmp(real_db, real_oracle) == 0) {
    st_cli_error(&cli, "--oracle-db is the database under test (%s): the oracle needs a file of its own", oracle);
    return ST_EXIT_USAGE;
  }
  /* In a forked child, as tune asks: this process must not initialize CUDA
   * before tune forks its workers. */
  st_device_info dev;
  {
    st_err err = {{0}};
    if (st_probe_device(cli.device, &dev, &err) != ST_OK) {
      st_cli_error(&cli, "eval times kernels and needs a GPU: %s", err.msg);
      return ST_EXIT_FAIL;
    }
  }
  st_shape *shapes = NULL;
  int n = 0, n_decode = 0;
  st_eval_row *rows = NULL;
  st_bench_time *times = NULL;
  rc = cli.leave_one_out ? suite_shapes(&cli, &dev, &shapes, &n)
                         : random_shapes(&cli, oracle, dev.name, &shapes, &n, &n_decode);
  if (rc != ST_EXIT_OK) goto done;
  rows = calloc((size_t)n, sizeof *rows);
  times = calloc((size_t)n, sizeof *times);
  if (!rows || !times) {
    st_cli_error(&cli, "out of host memory for %d shapes", n);
    rc = ST_EXIT_FAIL;
    goto done;
  }
  if ((rc = time_rows(&cli, oracle, shapes, n, rows, times)) != ST_EXIT_OK) goto done;
  for (int i = 0; i < n; i++) {
    rows[i].shape = &shapes[i];
    rows[i].kind = cli.leave_one_out ? (strstr(shapes[i].op, "decode") ? "decode" : "prefill")
                                     : (i < n_decode ? "decode" : "prefill");
    rows[i].regret_ours = st_eval_regret(&rows[i].ours, &rows[i].oracle);
    rows[i].regret_builtin = st_eval_regret(&rows[i].builtin, &rows[i].oracle);
  }
  if (cli.json)
    st_eval_print_json(stdout, &cli, oracle, rows, n);
  else
    st_eval_print_table(stdout, &cli, rows, n);
  rc = ST_EXIT_OK;
  for (int i = 0; i < n; i++)
    if (strcmp(rows[i].oracle.status, "ok") || strcmp(rows[i].ours.status, "ok") ||
        strcmp(rows[i].builtin.status, "ok"))
      rc = ST_EXIT_FAIL; /* a wrong or failed launch is a failure, whatever the regrets */
done:
  free(times);
  free(rows);
  free(shapes);
  return rc;
}
