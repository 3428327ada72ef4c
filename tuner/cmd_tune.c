/* cmd_tune.c - `sparsetune tune`: generate, compile, verify, time, record,
 * pick winners. Resumable: an interrupted run with the same arguments is
 * continued, skipping every (variant, shape) already measured. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cold.h"
#include "commands.h"
#include "eta.h"
#include "op_harness.h"
#include "run_args.h"
#include "run_env.h"
#include "search_model.h"
#include "winners.h"
#include "worker.h"

static const char usage[] =
    "usage: sparsetune tune [--suite NAME] [--op OP] [--db FILE] [--device N] [--arch SM]\n"
    "                       [--jobs N] [--seed N] [--new] [--match TEXT] [--cold]\n"
    "                       [--search full|model]\n"
    "\n"
    "Generates every variant of the suite's ops, compiles them for the GPU\n"
    "(cached by source hash), then for each shape of the suite verifies each\n"
    "applicable variant against the double-precision reference and times it\n"
    "(CUDA-graph replays, warm-up from a flushed L2, median of 5 repetitions,\n"
    "spread kept; a spread over 5% is timed again, up to three times, and the\n"
    "quietest kept; a variant slower than 1.5x the best so far stops after a\n"
    "short probe), records everything in the database, picks the winner per\n"
    "dispatch key (least worst-case regret over the key's shapes) and prints\n"
    "the winners against the default variant. Ctrl-C stops cleanly; the same\n"
    "command resumes the run. With no GPU it compiles everything and says so.\n"
    "Exits 1 when a shape has no correct variant (every one failed or was\n"
    "wrong: a broken template or machine), the run kept.\n"
    "The method in full: docs/method.md in the source tree.\n"
    "\n"
    "  --suite NAME   shape suite (default m3-decode)\n"
    "  --op OP        only this op of the suite (OP,OP,...: only these ops)\n"
    "  --db FILE      database (default ./sparsetune.db)\n"
    "  --device N     CUDA device ordinal (default 0)\n"
    "  --arch SM      compile target when there is no GPU (default sm_90a)\n"
    "  --jobs N       compile threads (default: all CPUs)\n"
    "  --seed N       input seed (default 20261122)\n"
    "  --new          start a new run even if an interrupted one matches\n"
    "  --match TEXT   only variants whose name contains TEXT (for example\n"
    "                 '.kr.' or '/s64'); the winners are then the best of those\n"
    "  --cold         time with the paged caches cold in L2, as an engine sees\n"
    "                 them (pools of 16x the L2 size, each replay reading other\n"
    "                 pages); the winners are then picked on those times. A\n"
    "                 cold run resumes only a cold run. Default: the same\n"
    "                 inputs each replay, as the suites' peer times were taken\n"
    "  --search MODE  full (default): every applicable variant of every shape;\n"
    "                 model: a variant is left out of a shape when its struct\n"
    "                 (its family less the kN and qN tokens) was at least 1.15x\n"
    "                 the best on the 2 nearest shapes before where it ran\n"
    "                 (within distance 8), or its family at least 1.5x on the\n"
    "                 2 nearest (any distance); the best among what applies to\n"
    "                 the shape, stopped, wrong or failed counting as slow.\n"
    "                 Defaults always run; only what runs is compiled, shape\n"
    "                 by shape. Full tunes replayed (H200): engine-decode left\n"
    "                 out 41% of its non-default pairs, ~27% of the time, the\n"
    "                 best kept within 0.07% on every shape. A model run\n"
    "                 resumes only a model run\n";

typedef struct binary_slot {
  char hash[40];
  st_binary_row bin;
  int found;
} binary_slot;

typedef struct tune_state {
  const st_cli *cli;
  st_db *db;
  st_cli_suite *suite;
  int64_t run_id;
  const st_shape *shape;
  const st_job *jobs;
  int shape_index, done_jobs, total_jobs, failed;
  st_eta eta; /* the time left (tuner/eta.h) */
  double best_us;
  char best_name[160];
  int tty;
  st_search_model *model; /* --search model; NULL: full */
  int skipped, skipped_here; /* variants the model left out: in all, on this shape */
} tune_state;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void progress(const tune_state *t) {
  char eta[32] = "?";
  const double left = st_eta_left(&t->eta);
  if (left >= 0) st_cli_format_duration(left, eta, sizeof eta);
  char left_out[48] = "";
  if (t->model) snprintf(left_out, sizeof left_out, ", %d left out here", t->skipped_here);
  fprintf(stderr, "%s[shape %d/%d] %d/%d variants timed%s, %d failed; best here %.2f us %s; ETA %s%s",
          t->tty ? "\r\033[K" : "", t->shape_index + 1, t->suite->nshapes, t->done_jobs, t->total_jobs, left_out,
          t->failed, t->best_us, t->best_name, eta, t->tty ? "" : "\n");
  fflush(stderr);
}

static void record(void *ctx, int index, const st_job_outcome *o) {
  tune_state *t = ctx;
  const st_variant_row *v = t->jobs[index].variant;
  st_measurement m;
  memset(&m, 0, sizeof m);
  m.run_id = t->run_id;
  snprintf(m.variant_id, sizeof m.variant_id, "%s", v->id);
  snprintf(m.shape_key, sizeof m.shape_key, "%s", t->shape->key);
  snprintf(m.status, sizeof m.status, "%s", o->status);
  snprintf(m.error, sizeof m.error, "%s", o->error);
  m.median_us = o->timing.median_us;
  m.min_us = o->timing.min_us;
  m.max_us = o->timing.max_us;
  m.spread = o->timing.spread;
  m.reps = o->timing.reps;
  m.iters = o->timing.iters;
  m.max_err = o->max_err;
  st_timing_samples_json(&o->timing, m.samples, sizeof m.samples);
  st_err err = {{0}};
  if (st_db_put_measurement(t->db, &m, &err) != ST_OK) st_cli_error(t->cli, "recording a measurement: %s", err.msg);
  if (t->model && st_search_model_add(t->model, t->shape, v->name, o->status, o->timing.median_us) != 0)
    st_cli_error(t->cli, "out of memory for the search model: the next shapes run every variant");
  t->done_jobs++;
  st_eta_done(&t->eta, now_s());
  if (strcmp(o->status, "ok") && strcmp(o->status, "pruned")) {
    t->failed++;
    fprintf(stderr, "%s  %s on %s: %s: %s\n", t->tty ? "\r\033[K" : "", v->name, t->shape->key, o->status,
            o->error);
  }
  if (!strcmp(o->status, "ok") && (t->best_us <= 0 || o->timing.median_us < t->best_us)) {
    t->best_us = o->timing.median_us;
    snprintf(t->best_name, sizeof t->best_name, "(%s)", v->name);
  }
  progress(t);
}

static const binary_slot *find_binary(const binary_slot *b, int n, const char *hash) {
  for (int i = 0; i < n; i++)
    if (!strcmp(b[i].hash, hash)) return b[i].found && b[i].bin.ok ? &b[i] : NULL;
  return NULL;
}

/* The cubins of every distinct source, read once. */
static int load_binaries(const st_cli *cli, st_db *db, const st_cli_suite *s, const char *arch, binary_slot **out,
                         int *nout) {
  binary_slot *b = calloc((size_t)s->nvariants + 1, sizeof *b);
  if (!b) return ST_EXIT_FAIL;
  int n = 0;
  for (int i = 0; i < s->nvariants; i++) {
    const char *h = s->variants[i].row.source_hash;
    int seen = 0;
    for (int j = 0; j < n && !seen; j++) seen = !strcmp(b[j].hash, h);
    if (seen) continue;
    st_err err = {{0}};
    snprintf(b[n].hash, sizeof b[n].hash, "%s", h);
    if (st_db_get_binary(db, h, arch, NULL, &b[n].bin, &b[n].found, &err) != ST_OK) {
      st_cli_error(cli, "%s", err.msg);
      for (int j = 0; j < n; j++)
        if (b[j].found) st_db_binary_free(&b[j].bin);
      free(b);
      return ST_EXIT_FAIL;
    }
    n++;
  }
  *out = b;
  *nout = n;
  return ST_EXIT_OK;
}

/* --search model compiles per shape, only what the shape will run: the
 * sources of `jobs` that the database has no binary of yet, then their
 * binaries into `bins` and the jobs. */
static int compile_jobs(const st_cli *cli, st_db *db, const st_cli_suite *s, const char *arch, binary_slot *bins,
                        int nbins, st_job *jobs, int njobs) {
  st_gen_variant *want = calloc((size_t)njobs + 1, sizeof *want);
  if (!want) return ST_EXIT_FAIL;
  int n = 0;
  for (int j = 0; j < njobs; j++) {
    const char *h = jobs[j].variant->source_hash;
    int listed = 0;
    for (int k = 0; k < n && !listed; k++) listed = !strcmp(want[k].row.source_hash, h);
    for (int b = 0; b < nbins && !listed; b++) listed = !strcmp(bins[b].hash, h) && bins[b].found;
    if (listed) continue;
    /* The generated variant, with its source text: a job's row is one of the suite's. */
    const size_t i = (size_t)(((const char *)jobs[j].variant - (const char *)s->variants) / sizeof *s->variants);
    want[n++] = s->variants[i];
  }
  int rc = ST_EXIT_OK;
  if (n > 0) {
    const st_cli_suite sub = {.variants = want, .nvariants = n};
    rc = st_cli_compile(cli, db, &sub, arch);
  }
  free(want); /* a shallow copy: the sources belong to the suite */
  for (int j = 0; j < njobs && rc == ST_EXIT_OK; j++)
    for (int b = 0; b < nbins; b++) {
      if (bins[b].found || strcmp(bins[b].hash, jobs[j].variant->source_hash)) continue;
      st_err err = {{0}};
      if (st_db_get_binary(db, bins[b].hash, arch, NULL, &bins[b].bin, &bins[b].found, &err) != ST_OK) {
        st_cli_error(cli, "%s", err.msg);
        rc = ST_EXIT_FAIL;
      }
      break;
    }
  for (int j = 0; j < njobs; j++) {
    const binary_slot *b = find_binary(bins, nbins, jobs[j].variant->source_hash);
    jobs[j].cubin = b ? b->bin.cubin : NULL;
    jobs[j].cubin_size = b ? b->bin.cubin_size : 0;
  }
  return rc;
}

/* Which of the suite's variants apply to `shape` (and match --match):
 * applies[i] for s->variants[i]. With a model, their names begin the shape
 * there: the competition the runs before are judged against. */
static int find_applicable(const st_cli *cli, st_gen *gen, const st_cli_suite *s, const st_shape *shape,
                           st_search_model *model, char *applies) {
  const char **names = calloc((size_t)s->nvariants + 1, sizeof *names);
  if (!names) return ST_EXIT_FAIL;
  int n = 0;
  for (int i = 0; i < s->nvariants; i++) {
    const st_variant_row *v = &s->variants[i].row;
    applies[i] = 0;
    if (strcmp(v->op, shape->op) || (cli->match && !strstr(v->name, cli->match))) continue;
    st_err err = {{0}};
    int a = 0;
    if (st_gen_applies(gen, v, shape, &a, &err) != ST_OK) {
      st_cli_error(cli, "%s", err.msg);
      free(names);
      return ST_EXIT_FAIL;
    }
    applies[i] = (char)(a != 0);
    if (a) names[n++] = v->name;
  }
  if (model && st_search_model_begin_shape(model, shape, names, n) != 0)
    st_cli_error(cli, "out of memory for the search model: shape %s runs every variant", shape->key);
  free(names);
  return ST_EXIT_OK;
}

/* Jobs of one shape: applicable variants with a binary, not yet measured in
 * this run and not left out by the search model (when there is one: never
 * a default); defaults first, so pruning has a baseline early. */
static int plan_jobs(const st_cli *cli, st_gen *gen, st_db *db, const st_cli_suite *s, const st_shape *shape,
                     int64_t run_id, const binary_slot *bins, int nbins, st_search_model *model, st_job *jobs,
                     int *njobs, int *skipped) {
  int n = 0;
  *skipped = 0;
  char *applies = calloc((size_t)s->nvariants + 1, 1);
  if (!applies || find_applicable(cli, gen, s, shape, model, applies) != ST_EXIT_OK) {
    free(applies);
    return ST_EXIT_FAIL;
  }
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < s->nvariants; i++) {
      const st_variant_row *v = &s->variants[i].row;
      if (!applies[i] || v->is_default != (pass == 0)) continue;
      st_err err = {{0}};
      int found = 0;
      if (st_db_has_measurement(db, run_id, v->id, shape->key, &found, &err) != ST_OK) {
        st_cli_error(cli, "%s", err.msg);
        free(applies);
        return ST_EXIT_FAIL;
      }
      if (found) continue;
      if (model && !v->is_default && st_search_model_skip(model, v->name, NULL, 0)) {
        (*skipped)++;
        continue;
      }
      const binary_slot *b = find_binary(bins, nbins, v->source_hash);
      jobs[n].variant = v;
      jobs[n].cubin = b ? b->bin.cubin : NULL;
      jobs[n].cubin_size = b ? b->bin.cubin_size : 0;
      n++;
    }
  free(applies);
  *njobs = n;
  return ST_EXIT_OK;
}

typedef struct collect_ctx {
  st_win_input *in;
  int n, cap;
  const st_cli_suite *suite;
} collect_ctx;

static const st_gen_variant *variant_by_id(const st_cli_suite *s, const char *id) {
  for (int i = 0; i < s->nvariants; i++)
    if (!strcmp(s->variants[i].row.id, id)) return &s->variants[i];
  return NULL;
}

static const st_shape *shape_by_key(const st_cli_suite *s, const char *key) {
  for (int i = 0; i < s->nshapes; i++)
    if (!strcmp(s->shapes[i].key, key)) return &s->shapes[i];
  return NULL;
}

static int collect(void *ctx, const st_measurement *m, const char *name, const char *op) {
  (void)name;
  (void)op;
  collect_ctx *c = ctx;
  const st_shape *sh = shape_by_key(c->suite, m->shape_key);
  const st_gen_variant *v = variant_by_id(c->suite, m->variant_id);
  if (!sh || !v) return 0; /* measured under another suite or template: not ours to judge */
  if (c->n == c->cap) {
    int cap = c->cap ? 2 * c->cap : 256;
    st_win_input *in = realloc(c->in, sizeof *in * (size_t)cap);
    if (!in) return 1;
    c->in = in;
    c->cap = cap;
  }
  const int usable = !strcmp(m->status, "ok") || !strcmp(m->status, "pruned");
  c->in[c->n++] = (st_win_input){sh->dispatch_key, sh->key, v->row.id, v->row.is_default, usable ? m->median_us : 0};
  return 0;
}

static double time_of(const collect_ctx *c, const char *shape_key, const char *vid) {
  for (int i = 0; i < c->n; i++)
    if (!strcmp(c->in[i].shape_key, shape_key) && !strcmp(c->in[i].variant_id, vid)) return c->in[i].us;
  return 0;
}

/* Whether the run measured any variant on the shape (--match may leave none). */
static int measured_on(const collect_ctx *c, const char *shape_key) {
  for (int i = 0; i < c->n; i++)
    if (!strcmp(c->in[i].shape_key, shape_key)) return 1;
  return 0;
}

/* Saves and prints the run's winners; *unserved counts the shapes that were
 * measured but have no correct variant. */
static int save_and_print_winners(const st_cli *cli, st_db *db, st_cli_suite *s, int64_t run_id, int64_t device_id,
                                  const st_device_info *dev, int *unserved) {
  *unserved = 0;
  collect_ctx c = {.suite = s};
  st_err err = {{0}};
  if (st_db_each_measurement(db, run_id, collect, &c, &err) != ST_OK) {
    st_cli_error(cli, "%s", err.msg);
    free(c.in);
    return ST_EXIT_FAIL;
  }
  st_win_result *w = NULL;
  int nw = 0;
  if (st_pick_winners(c.in, c.n, &w, &nw) != 0) {
    free(c.in);
    return ST_EXIT_FAIL;
  }
  int rc = ST_EXIT_OK;
  if (st_db_begin(db, &err) != ST_OK) rc = ST_EXIT_FAIL;
  for (int i = 0; i < nw && rc == ST_EXIT_OK; i++) {
    st_winner_row row;
    memset(&row, 0, sizeof row);
    row.device_id = device_id;
    const st_gen_variant *v = variant_by_id(s, w[i].variant_id);
    snprintf(row.op, sizeof row.op, "%s", v->row.op);
    snprintf(row.dispatch_key, sizeof row.dispatch_key, "%s", w[i].dispatch_key);
    snprintf(row.variant_id, sizeof row.variant_id, "%s", w[i].variant_id);
    snprintf(row.variant_name, sizeof row.variant_name, "%s", v->row.name);
    row.run_id = run_id;
    row.median_us = w[i].worst_us;
    row.regret = w[i].regret;
    snprintf(row.default_variant_id, sizeof row.default_variant_id, "%s", w[i].default_id);
    row.default_us = w[i].default_worst_us;
    if (st_params_parse_key(w[i].dispatch_key, &row.dispatch, &err) != ST_OK ||
        st_db_put_winner(db, &row, &err) != ST_OK)
      rc = ST_EXIT_FAIL;
  }
  if (rc == ST_EXIT_OK && st_db_commit(db, &err) != ST_OK) rc = ST_EXIT_FAIL;
  if (rc != ST_EXIT_OK) {
    st_db_rollback(db);
    st_cli_error(cli, "saving winners: %s", err.msg);
  }

  printf("\nWinners on %s (%s), run %lld: %d dispatch keys from %d shapes%s\n", dev->name, dev->arch,
         (long long)run_id, nw, s->nshapes, cli->cold ? "; times with the paged caches cold in L2" : "");
  printf("%-58s %-52s %9s %9s %8s\n", "shape", "winner (least worst-case regret)", "us", "default", "speed-up");
  for (int i = 0; i < s->nshapes; i++) {
    const st_shape *sh = &s->shapes[i];
    const st_win_result *win = NULL;
    for (int j = 0; j < nw && !win; j++)
      if (!strcmp(w[j].dispatch_key, sh->dispatch_key)) win = &w[j];
    const char *colon = strchr(sh->key, ':');
    if (!win) {
      *unserved += measured_on(&c, sh->key);
      printf("%-58s %-52s\n", colon ? colon + 1 : sh->key,
             measured_on(&c, sh->key) ? "(no correct variant)"
             : cli->match             ? "(none measured: no variant matches --match)"
                                      : "(none measured: no variant applies)");
      continue;
    }
    const st_gen_variant *v = variant_by_id(s, win->variant_id);
    const double us = time_of(&c, sh->key, win->variant_id);
    const double def = win->default_id[0] ? time_of(&c, sh->key, win->default_id) : 0;
    char speed[16] = "-";
    if (def > 0 && us > 0) snprintf(speed, sizeof speed, "%.2fx", def / us);
    printf("%-58s %-52s %9.2f %9.2f %8s\n", colon ? colon + 1 : sh->key, v->row.name, us, def, speed);
  }
  free(w);
  free(c.in);
  return rc;
}

static void run_args(const st_cli *cli, char *buf, size_t cap) {
  st_tune_run_args(buf, cap, cli->suite, cli->op, cli->seed, cli->match, cli->cold, cli->search_model);
}

typedef struct feed_ctx {
  st_search_model *model;
  const st_cli_suite *suite;
} feed_ctx;

/* A resumed run's measurements into the search model. */
static int feed_model(void *ctx, const st_measurement *m, const char *name, const char *op) {
  (void)op;
  const feed_ctx *f = ctx;
  const st_shape *sh = shape_by_key(f->suite, m->shape_key);
  if (!sh) return 0; /* another suite's shape */
  return st_search_model_add(f->model, sh, name, m->status, m->median_us) != 0;
}

static int tune_shapes(const st_cli *cli, st_gen *gen, st_db *db, st_cli_suite *s, int64_t run_id, const char *arch,
                       binary_slot *bins, int nbins) {
  tune_state t = {.cli = cli, .db = db, .suite = s, .run_id = run_id, .tty = isatty(2)};
  st_job *jobs = calloc((size_t)s->nvariants + 1, sizeof *jobs);
  if (!jobs) return ST_EXIT_FAIL;
  int rc = ST_EXIT_OK;
  if (cli->search_model) {
    const st_search_opts so = st_search_default_opts();
    st_err err = {{0}};
    feed_ctx f = {.model = t.model = st_search_model_new(&so), .suite = s};
    if (!t.model || st_db_each_measurement(db, run_id, feed_model, &f, &err) != ST_OK) {
      st_cli_error(cli, "search model: %s", t.model ? err.msg : "out of host memory");
      st_search_model_free(t.model);
      free(jobs);
      return ST_EXIT_FAIL;
    }
  }
  int skipped = 0;
  for (int i = 0; i < s->nshapes && rc == ST_EXIT_OK; i++) { /* count for the ETA */
    int n = 0;
    rc = plan_jobs(cli, gen, db, s, &s->shapes[i], run_id, bins, nbins, t.model, jobs, &n, &skipped);
    t.total_jobs += n;
    st_eta_plan(&t.eta, s->shapes[i].op, n);
  }
  st_eta_start(&t.eta, now_s());
  for (int i = 0; i < s->nshapes && rc == ST_EXIT_OK && !st_cli_stop; i++) {
    const st_shape *sh = &s->shapes[i];
    int n = 0;
    if ((rc = plan_jobs(cli, gen, db, s, sh, run_id, bins, nbins, t.model, jobs, &n, &skipped)) != ST_EXIT_OK)
      continue;
    t.skipped += skipped;
    t.skipped_here = skipped;
    if (n == 0) continue;
    if (t.model && (rc = compile_jobs(cli, db, s, arch, bins, nbins, jobs, n)) != ST_EXIT_OK) break;
    const st_op_harness *h = st_harness_find(sh->op);
    if (!h) {
      st_cli_error(cli, "no tuning harness for op %s", sh->op);
      rc = ST_EXIT_FAIL;
      break;
    }
    t.shape = sh;
    t.jobs = jobs;
    t.shape_index = i;
    st_eta_shape(&t.eta, sh->op, n);
    t.best_us = 0;
    t.best_name[0] = '\0';
    st_worker_opts o = {.device = cli->device,
                        .seed = cli->seed,
                        .ref_threads = (int)sysconf(_SC_NPROCESSORS_ONLN),
                        .timing = {.warmup = 10,
                                   .reps = 5,
                                   .iters = 0,
                                   .target_rep_ms = 1.0,
                                   .max_iters = 40,
                                   .retry_spread = ST_TUNE_RETRY_SPREAD},
                        .cold = cli->cold,
                        .prune_factor = 1.5,
                        .job_timeout_s = 60,
                        .setup_timeout_s = 900,
                        .db = db};
    st_err err = {{0}};
    progress(&t);
    if (st_run_jobs(h, &sh->params, jobs, n, &o, record, &t, &st_cli_stop, &err) != ST_OK) {
      /* The case could not be built: every job of the shape fails with why. */
      st_cli_error(cli, "shape %s: %s", sh->key, err.msg);
      for (int j = 0; j < n; j++) {
        st_job_outcome out;
        memset(&out, 0, sizeof out);
        snprintf(out.status, sizeof out.status, "failed");
        snprintf(out.error, sizeof out.error, "inputs could not be built: %s", err.msg);
        record(&t, j, &out);
      }
    }
    if (t.tty) fputc('\n', stderr);
  }
  if (t.model)
    printf("search model: %d (variant, shape) pairs left out, their struct or family slow on the nearest shapes "
           "where it ran\n",
           t.skipped);
  st_search_model_free(t.model);
  free(jobs);
  return rc;
}

int st_cmd_tune(int argc, char **argv) {
  st_cli cli;
  int rc = st_cli_parse(argc, argv,
                        ST_OPT_DB | ST_OPT_SUITE | ST_OPT_OP | ST_OPT_ARCH | ST_OPT_DEVICE | ST_OPT_JOBS | ST_OPT_SEED |
                            ST_OPT_FRESH | ST_OPT_MATCH | ST_OPT_COLD | ST_OPT_SEARCH,
                        usage, &cli);
  if (rc) return rc == -1 ? ST_EXIT_OK : ST_EXIT_USAGE;
  st_cli_catch_signals();
  /* The target is settled before the database is opened, so that a bad one
   * writes nothing. NVRTC, which may load the CUDA driver, is asked only
   * once the probe (a forked child) is done. */
  st_err err = {{0}};
  st_device_info dev;
  memset(&dev, 0, sizeof dev);
  const st_status probe = st_probe_device(cli.device, &dev, &err);
  const int have_gpu = probe == ST_OK;
  const char *arch = have_gpu ? dev.arch : cli.arch ? cli.arch : ST_DEFAULT_ARCH;
  if (cli.arch && (rc = st_cli_check_arch(&cli, cli.arch)) != ST_EXIT_OK) return rc;
  if (have_gpu && cli.arch && strcmp(cli.arch, dev.arch)) {
    st_cli_error(&cli, "--arch=%s differs from the GPU's %s: tuning runs binaries built for the GPU", cli.arch,
                 dev.arch);
    return ST_EXIT_USAGE;
  }
  if (!have_gpu && probe != ST_ERR_NO_DRIVER && probe != ST_ERR_NO_DEVICE) {
    st_cli_error(&cli, "%s", err.msg);
    return ST_EXIT_FAIL;
  }
  /* The GPU's own target too: this NVRTC may predate the card. */
  if (!cli.arch && (rc = st_cli_check_arch(&cli, arch)) != ST_EXIT_OK) return rc;

  st_gen *gen = NULL;
  st_db *db = NULL;
  st_cli_suite suite;
  memset(&suite, 0, sizeof suite);
  binary_slot *bins = NULL;
  int nbins = 0;
  if ((rc = st_cli_open(&cli, &gen, &db)) != ST_EXIT_OK) return rc;
  if ((rc = st_cli_load_suite(&cli, gen, db, &suite)) != ST_EXIT_OK) goto done;
  printf("suite %s: %d shapes, %d variants\n", cli.suite, suite.nshapes, suite.nvariants);
  /* --search model on a GPU compiles shape by shape what it runs. */
  if (cli.search_model && have_gpu)
    printf("compiling shape by shape: only the variants the search model runs\n");
  else if ((rc = st_cli_compile(&cli, db, &suite, arch)) != ST_EXIT_OK)
    goto done;
  if (st_cli_stop) {
    rc = ST_EXIT_INTERRUPTED;
    goto done;
  }
  if (!have_gpu) {
    printf("No GPU here (%s).\nEvery variant is generated and compiled for %s and stored in %s; timing needs a "
           "GPU, so nothing was timed.\n",
           err.msg, arch, cli.db_path);
    rc = ST_EXIT_OK;
    goto done;
  }

  int64_t device_id = 0, run_id = 0;
  st_run_row run;
  memset(&run, 0, sizeof run);
  snprintf(run.kind, sizeof run.kind, "tune");
  snprintf(run.op, sizeof run.op, "%s", cli.op ? cli.op : "*");
  snprintf(run.suite, sizeof run.suite, "%s", cli.suite);
  snprintf(run.arch, sizeof run.arch, "%s", arch);
  snprintf(run.tool_version, sizeof run.tool_version, "%s", ST_VERSION);
  run_args(&cli, run.args, sizeof run.args);
  const st_run_env_in env = {&dev, st_gen_generator_dir(gen), st_gen_templates_dir(gen), cli.suite, cli.seed};
  if (st_run_env_json(&env, run.env, sizeof run.env, &err) != ST_OK) goto db_error;
  if (st_db_put_device(db, &dev, &device_id, &err) != ST_OK) goto db_error;
  run.device_id = device_id;
  if (!cli.fresh && st_db_run_find_resumable(db, &run, &run_id, &err) != ST_OK) goto db_error;
  if (run_id) printf("resuming run %lld\n", (long long)run_id);
  else if (st_db_run_begin(db, &run, &run_id, &err) != ST_OK) goto db_error;
  printf("run %lld on %s (%s, %d SMs)\n", (long long)run_id, dev.name, dev.arch, dev.sm_count);
  if ((rc = load_binaries(&cli, db, &suite, arch, &bins, &nbins)) != ST_EXIT_OK) goto done;
  rc = tune_shapes(&cli, gen, db, &suite, run_id, arch, bins, nbins);
  if (st_cli_stop) {
    st_db_run_finish(db, run_id, "interrupted", &err);
    printf("\ninterrupted: run %lld keeps what was measured; the same command resumes it\n", (long long)run_id);
    rc = ST_EXIT_INTERRUPTED;
    goto done;
  }
  int unserved = 0;
  if (rc == ST_EXIT_OK) rc = save_and_print_winners(&cli, db, &suite, run_id, device_id, &dev, &unserved);
  st_db_run_finish(db, run_id, rc == ST_EXIT_OK ? "done" : "failed", &err);
  /* The run is whole, but a shape no variant ran correctly on means a
   * broken template or machine: a script must not take it for success. */
  if (rc == ST_EXIT_OK && unserved) {
    st_cli_error(&cli,
                 "%d of %d shapes have no correct variant: every variant measured on them failed or was wrong (the "
                 "reasons are above); run %lld is kept",
                 unserved, suite.nshapes, (long long)run_id);
    rc = ST_EXIT_FAIL;
  }
  goto done;
db_error:
  st_cli_error(&cli, "%s", err.msg);
  rc = ST_EXIT_FAIL;
done:
  for (int i = 0; i < nbins; i++)
    if (bins[i].found) st_db_binary_free(&bins[i].bin);
  free(bins);
  st_cli_suite_free(&suite);
  st_db_close(db);
  st_gen_close(gen);
  return rc;
}
