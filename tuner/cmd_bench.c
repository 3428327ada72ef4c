/* cmd_bench.c - `sparsetune bench`: what an engine gets from the runtime.
 *
 * For each shape of the suite it builds the inputs the way the peer's
 * times were taken (same pools, random block tables, every request at the
 * full context; docs/method.md), launches the op through libsparsetune's dispatch
 * (the winners in the database), checks the result against the reference,
 * and times CUDA-graph replays: 5 repetitions of 40 replays after warm-up
 * from a flushed L2 (nothing of the rows before left in it), the median
 * kept (a set whose spread exceeds 3% is timed again, up to three sets,
 * the quietest kept: tuner/timing.h). In the same run it measures
 * device-to-device copy bandwidth (bytes read + written), and prints per
 * shape the time, the bandwidth of the bytes the op must move, its
 * fraction of the copy bandwidth, and the peer's time where the suite
 * records it. The run and its measurements are stored (kind "bench"), so
 * `regress` can compare bench runs too. With --harness it also times the
 * same variant launched through the op harness (as `tune` launches it) on
 * the same inputs in the same process, to tell a difference of launch path
 * from one of process and memory layout when the two commands disagree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cold.h"
#include "bench_case.h"
#include "bench_suite.h"
#include "commands.h"
#include "decode_step.h"
#include "op_harness.h"
#include "report.h"
#include "run_env.h"
#include "sparsetune.h"
#include "step_graph.h"
#include "timing.h"

static const char usage[] =
    "usage: sparsetune bench [--suite NAME] [--op OP] [--db FILE | --builtin] [--device N] [--seed N] [--harness]\n"
    "                        [--cold] [--json]\n"
    "\n"
    "Times the runtime's dispatch (the winners recorded in the database) on\n"
    "every shape of the suite, the way the peer's times in it were taken:\n"
    "CUDA-graph replays, median of 5 x 40 (prefill ops: 5 x 10), same inputs\n"
    "each replay, the warm-up started from a flushed L2; a set spread over\n"
    "more than 3% is timed again, up to three sets, and the quietest is kept\n"
    "(its line says so). Prints time, GB/s of the bytes the op must move,\n"
    "fraction of the copy bandwidth measured in the same run, TFLOP/s for\n"
    "prefill ops (FLOPs of whole 128-token blocks up to each query's own) and\n"
    "the peer's time where known, with the speed-up only where the peer was\n"
    "timed on this device (the anchors suite's peer times: an H100 80GB HBM3;\n"
    "elsewhere its time is marked *). Where the suite has both decode ops, it\n"
    "ends with one decode step: indexer and attention rows of the same dtype\n"
    "and batch added, against the peer's two; then (without --cold) each such\n"
    "step timed as one CUDA graph of both ops, plain and with programmatic\n"
    "dependent launch, as an engine's graph runs it. The method and columns\n"
    "in full: docs/method.md in the source tree.\n"
    "\n"
    "  --suite NAME   shape suite (default anchors)\n"
    "  --op OP        only this op of the suite (OP,OP,...: only these ops)\n"
    "  --db FILE      database with winners (default ./sparsetune.db); an\n"
    "                 export (`sparsetune export`) is timed, nothing recorded\n"
    "  --builtin      no database: what libsparsetune runs untuned, each op's\n"
    "                 built-in variants (compiled at first use, before timing);\n"
    "                 nothing is recorded\n"
    "  --device N     CUDA device ordinal (default 0)\n"
    "  --seed N       input seed\n"
    "  --harness      also time the dispatched variant launched as `tune` launches\n"
    "                 it (its module loaded from the database, no libsparsetune),\n"
    "                 on the same inputs: the \"harness us\" column\n"
    "  --cold         the paged caches cold in L2, as an engine sees them: pools\n"
    "                 of 16x the L2 size, each replay reading other pages of\n"
    "                 them through other block tables (index_topk reads no\n"
    "                 pool: its rows are as without --cold)\n"
    "  --json         JSON lines instead of the table\n";

#define COPY_BYTES ((size_t)1 << 30)

typedef struct bench_row {
  const st_shape *shape;
  char variant[200];
  char status[16];
  char error[400];
  double us, spread, gbs, frac, peer_us;
  /* The device the peer was timed on (the suite's peer_device); a speed-up
   * is computed only when that is this device. */
  const char *peer_device;
  int peer_here;
  /* sets of repetitions timed (tuner/timing.h: > 1 where one was disturbed) */
  int attempts;
  double tflops; /* 0: not counted (decode ops) */
  double harness_us; /* --harness: the same variant through the op harness; 0: not timed */
  char harness_error[200];
} bench_row;

/* Device-to-device copy bandwidth, GB/s counting bytes read plus written. */
static st_status copy_bandwidth(const st_cu *cu, CUstream s, double *gbs, st_err *err) {
  CUdeviceptr a = 0, b = 0;
  CUevent e0 = NULL, e1 = NULL;
  st_status st = ST_OK;
  CUresult rc = cu->cuMemAlloc(&a, COPY_BYTES);
  if (rc == CUDA_SUCCESS) rc = cu->cuMemAlloc(&b, COPY_BYTES);
  if (rc == CUDA_SUCCESS) rc = cu->cuMemsetD8Async(a, 0x5a, COPY_BYTES, s);
  if (rc == CUDA_SUCCESS) rc = cu->cuEventCreate(&e0, CU_EVENT_DEFAULT);
  if (rc == CUDA_SUCCESS) rc = cu->cuEventCreate(&e1, CU_EVENT_DEFAULT);
  const int reps = 10;
  float ms = 0;
  for (int i = 0; i < 3 && rc == CUDA_SUCCESS; i++) rc = cu->cuMemcpyDtoDAsync(b, a, COPY_BYTES, s);
  if (rc == CUDA_SUCCESS) rc = cu->cuEventRecord(e0, s);
  for (int i = 0; i < reps && rc == CUDA_SUCCESS; i++) rc = cu->cuMemcpyDtoDAsync(b, a, COPY_BYTES, s);
  if (rc == CUDA_SUCCESS) rc = cu->cuEventRecord(e1, s);
  if (rc == CUDA_SUCCESS) rc = cu->cuEventSynchronize(e1);
  if (rc == CUDA_SUCCESS) rc = cu->cuEventElapsedTime(&ms, e0, e1);
  if (rc != CUDA_SUCCESS)
    st = st_cu_fail(cu, rc, "measuring copy bandwidth", err);
  else
    *gbs = 2.0 * (double)COPY_BYTES * reps / (ms * 1e-3) / 1e9;
  if (e0) cu->cuEventDestroy(e0);
  if (e1) cu->cuEventDestroy(e1);
  if (a) cu->cuMemFree(a);
  if (b) cu->cuMemFree(b);
  return st;
}

/* --harness: times variant `variant_id` (the one the runtime dispatched) as
 * the tuner's worker does: its cubin from the database, bound and launched
 * by the op harness, verified, then timed like the runtime path. */
static st_status time_harness(const st_cu *cu, const st_device_info *dev, st_db *db, const st_op_harness *h,
                              void *kase, const char *variant_id, CUstream stream, const st_timing_opts *o,
                              double *us, st_err *err) {
  st_variant_row v;
  st_binary_row b;
  int found = 0;
  CUmodule mod = NULL;
  void *bound = NULL;
  st_status st = st_db_get_variant(db, variant_id, &v, err);
  if (st == ST_OK) st = st_db_get_binary(db, v.source_hash, dev->arch, NULL, &b, &found, err);
  if (st != ST_OK) return st;
  if (!found || !b.ok) {
    if (found) st_db_binary_free(&b);
    return st_fail(err, ST_ERR_NO_VARIANT, "no usable binary of variant %s for %s", variant_id, dev->arch);
  }
  CUresult rc = cu->cuModuleLoadData(&mod, b.cubin);
  st_db_binary_free(&b);
  if (rc != CUDA_SUCCESS) return st_cu_fail(cu, rc, "cuModuleLoadData", err);
  int ok = 0;
  double max_err = 0;
  char why[200] = "";
  st_timing t;
  st = h->bind(kase, &v.kernel, &v.launch, mod, &bound, err);
  if (st == ST_OK) st = h->verify(bound, stream, &ok, &max_err, why, sizeof why, err);
  if (st == ST_OK && !ok) st = st_fail(err, ST_ERR_NO_VARIANT, "the harness launch is wrong: %s", why);
  if (st == ST_OK) st = st_time_graph(cu, stream, h->launch, bound, o, &t, err);
  if (st == ST_OK) *us = t.median_us;
  if (bound) h->unbind(bound);
  cu->cuModuleUnload(mod);
  return st;
}

static void bench_shape(const st_cu *cu, const st_device_info *dev, st_handle *rt, st_db *db, CUstream stream,
                        const st_cli *cli, double copy_gbs, bench_row *row) {
  const st_op_harness *h = st_harness_find(row->shape->op);
  st_err err = {{0}};
  st_bench_case bc = {0};
  snprintf(row->status, sizeof row->status, "failed");
  if (!h) {
    snprintf(row->error, sizeof row->error, "no harness for op %s", row->shape->op);
    return;
  }
  const st_case_opts co = {.seed = cli->seed, .threads = (int)sysconf(_SC_NPROCESSORS_ONLN), .cold = cli->cold};
  int ok = 0;
  if (st_bench_case_make(h, cu, dev, &row->shape->params, &co, rt, stream, &bc, &ok, row->error, sizeof row->error,
                         &err) != ST_OK) {
    snprintf(row->error, sizeof row->error, "%s", err.msg);
    goto done;
  }
  void *kase = bc.kase, *bound = bc.bound;
  snprintf(row->variant, sizeof row->variant, "%s", st_last_variant(rt));
  if (!ok) {
    snprintf(row->status, sizeof row->status, "wrong");
    goto done;
  }
  /* 200 ms of replays first: the case's CPU reference leaves the GPU idle
   * long enough to clock down (it idles at 345 MHz), and 20 replays of a
   * 10 us kernel are 0.2 ms of load. */
  st_timing_opts o = {.warmup = 20,
                      .warmup_ms = 200.0,
                      .reps = 5,
                      .iters = h->bench_iters > 0 ? h->bench_iters : 40,
                      .retry_spread = ST_BENCH_RETRY_SPREAD,
                      .flush_bytes = ST_TIMING_FLUSH_L2 * dev->l2_bytes};
  st_timing t;
  if ((cli->cold && st_cold_prepare(h, kase, dev, &o, &err) != ST_OK) ||
      st_time_graph(cu, stream, h->launch, bound, &o, &t, &err) != ST_OK) {
    snprintf(row->error, sizeof row->error, "%s", err.msg);
    goto done;
  }
  snprintf(row->status, sizeof row->status, "ok");
  row->us = t.median_us;
  row->spread = t.spread;
  row->attempts = t.attempts;
  row->gbs = h->min_bytes(kase) / (t.median_us * 1e-6) / 1e9;
  row->frac = copy_gbs > 0 ? row->gbs / copy_gbs : 0;
  row->tflops = h->flops ? h->flops(kase) / (t.median_us * 1e-6) / 1e12 : 0;
  if (db) {
    char id[40] = "";
    st_err herr = {{0}};
    if (sscanf(row->variant, "%39s", id) != 1 ||
        time_harness(cu, dev, db, h, kase, id, stream, &o, &row->harness_us, &herr) != ST_OK)
      snprintf(row->harness_error, sizeof row->harness_error, "%s", herr.msg[0] ? herr.msg : "no variant id");
    for (char *c = row->harness_error; *c; c++)
      if (*c == '"' || *c == '\\') *c = '\''; /* printed inside a JSON string */
  }
done:
  st_bench_case_free(&bc);
}

st_status st_bench_time_shapes(const st_shape *shapes, int n, const char *db_path, int device,
                               unsigned long long seed, st_bench_time *out, st_err *err) {
  const st_cu *cu = NULL;
  st_device_info dev;
  st_status s = st_cu_load(&cu, err);
  if (s == ST_OK) s = st_cu_device_info(cu, device, &dev, err);
  if (s != ST_OK) return s;
  st_handle *rt = NULL;
  if (st_open(db_path, device, &rt) != ST_OK) return st_fail(err, ST_ERR_DB, "%s", st_last_error(NULL));
  CUdevice d = 0;
  CUcontext ctx = NULL;
  CUstream stream = NULL;
  if (cu->cuDeviceGet(&d, device) || cu->cuDevicePrimaryCtxRetain(&ctx, d) || cu->cuCtxSetCurrent(ctx) ||
      cu->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING)) {
    s = st_fail(err, ST_ERR_CUDA, "could not set up the CUDA context of device %d", device);
  } else {
    st_cli cli;
    memset(&cli, 0, sizeof cli);
    cli.cmd = "eval";
    cli.seed = seed;
    for (int i = 0; i < n; i++) {
      bench_row row;
      memset(&row, 0, sizeof row);
      row.shape = &shapes[i];
      bench_shape(cu, &dev, rt, NULL, stream, &cli, 0, &row);
      st_bench_time *t = &out[i];
      memset(t, 0, sizeof *t);
      snprintf(t->status, sizeof t->status, "%s", row.status);
      snprintf(t->variant, sizeof t->variant, "%s", row.variant);
      snprintf(t->error, sizeof t->error, "%s", row.error);
      t->us = row.us;
    }
  }
  if (stream) cu->cuStreamDestroy(stream);
  if (ctx) cu->cuDevicePrimaryCtxRelease(d);
  st_close(rt);
  return s;
}

/* The device of the first peer time in `shapes` not timed on `device`, or
 * NULL when every peer time (if any) was timed on it. */
static const char *peer_elsewhere(const st_shape *shapes, int n, const char *device) {
  for (int i = 0; i < n; i++) {
    const char *on = st_params_get(&shapes[i].params, "peer_device");
    if (st_params_get(&shapes[i].params, "peer_us") && (!on || strcmp(on, device))) return on ? on : "a device not named";
  }
  return NULL;
}

static void print_row(const st_cli *cli, const bench_row *r) {
  const char *colon = strchr(r->shape->key, ':');
  const char *shape = colon ? colon + 1 : r->shape->key;
  if (cli->json) {
    printf("{\"op\":\"%s\",\"shape\":\"%s\",\"status\":\"%s\",\"us\":%.3f,\"spread\":%.4f,\"gbs\":%.1f,"
           "\"copy_fraction\":%.4f,\"tflops\":%.1f,\"peer_us\":%.2f,\"peer_device\":\"%s\",\"speedup\":%.3f,"
           "\"variant\":\"%s\",\"attempts\":%d",
           r->shape->op, shape, r->status, r->us, r->spread, r->gbs, r->frac, r->tflops, r->peer_us,
           r->peer_device ? r->peer_device : "", r->us > 0 && r->peer_here ? r->peer_us / r->us : 0, r->variant,
           r->attempts);
    if (cli->harness) printf(",\"harness_us\":%.3f,\"harness_error\":\"%s\"", r->harness_us, r->harness_error);
    printf("}\n");
    return;
  }
  if (strcmp(r->status, "ok")) {
    printf("%-18s %-62s %s: %s\n", r->shape->op, shape, r->status, r->error);
    return;
  }
  char peer[16] = "-", speed[16] = "-", rate[16] = "-";
  if (r->tflops > 0) snprintf(rate, sizeof rate, "%.0f", r->tflops);
  if (r->peer_us > 0) snprintf(peer, sizeof peer, "%.1f%s", r->peer_us, r->peer_here ? "" : "*");
  if (r->peer_here) snprintf(speed, sizeof speed, "%.2fx", r->peer_us / r->us);
  printf("%-18s %-62s %8.2f %6.1f%% %8.0f %6.1f%% %7s %8s %8s  %s", r->shape->op, shape, r->us, 100 * r->spread,
         r->gbs, 100 * r->frac, rate, peer, speed, r->variant);
  if (r->attempts > 1) printf("  (quietest of %d timings)", r->attempts);
  if (cli->harness && r->harness_us > 0)
    printf("  harness %.2f us", r->harness_us);
  else if (cli->harness)
    printf("  harness: %s", r->harness_error);
  printf("\n");
}

/* Each decode step again in one CUDA graph, plain and with programmatic
 * dependent launch (tuner/step_graph.h): what an engine's graph runs. */
static void print_step_graphs(const st_cli *cli, const st_cu *cu, const st_device_info *dev, st_handle *rt,
                              CUstream stream, const st_step_row *rows, const st_step_pair *pairs, int np) {
  if (!cli->json)
    printf("one decode step in one CUDA graph (index_decode then sparse_attn_decode on one stream, each on its own\n"
           "inputs), plain and with programmatic dependent launch (pdl = 1 on both):\n");
  for (int k = 0; k < np; k++) {
    const st_step_pair *p = &pairs[k];
    const st_shape *index = rows[p->index_row].shape, *attn = rows[p->attn_row].shape;
    st_step_graph g;
    st_err err = {{0}};
    const st_status s = st_step_graph_time(cu, dev, rt, stream, index, attn, cli->seed,
                                           (int)sysconf(_SC_NPROCESSORS_ONLN), &g, &err);
    if (cli->json) {
      printf("{\"decode_step_graph\":{\"index\":");
      st_json_str(stdout, index->key);
      printf(",\"attention\":");
      st_json_str(stdout, attn->key);
      printf(",\"rows_us\":%.3f,\"plain_us\":%.3f,\"plain_spread\":%.4f,\"pdl_us\":%.3f,\"pdl_spread\":%.4f,"
             "\"error\":",
             p->us, g.plain_us, g.plain_spread, g.pdl_us, g.pdl_spread);
      st_json_str(stdout, s == ST_OK ? "" : err.msg);
      printf("}}\n");
      continue;
    }
    const char *dtype = st_params_get(&index->params, "dtype"), *B = st_params_get(&index->params, "B"),
               *ctx = st_params_get(&index->params, "ctx");
    printf("  %-4s B=%-4s ctx=%-7s ", dtype, B, ctx ? ctx : "-");
    if (s != ST_OK)
      printf("failed: %s\n", err.msg);
    else
      printf("plain %9.2f us  pdl %9.2f us (%+.1f%%)  rows added %9.2f us\n", g.plain_us, g.pdl_us,
             100.0 * (g.pdl_us / g.plain_us - 1.0), p->us);
    fflush(stdout);
  }
}

/* The anchors' decode-step target: indexer + attention rows of the same
 * dtype and batch added, ours against the peer's (tuner/decode_step.c);
 * then, warm, the same steps as one graph each. */
static void print_decode_step(const st_cli *cli, const st_cu *cu, const st_device_info *dev, st_handle *rt,
                              CUstream stream, const bench_row *rows, int n) {
  if (n <= 0) return;
  st_step_row *in = calloc((size_t)n, sizeof *in);
  st_step_pair *pairs = calloc((size_t)n, sizeof *pairs);
  if (!in || !pairs) goto done;
  for (int i = 0; i < n; i++) {
    in[i].shape = rows[i].shape;
    in[i].us = strcmp(rows[i].status, "ok") == 0 ? rows[i].us : 0;
    in[i].peer_us = rows[i].peer_here ? rows[i].peer_us : 0;
  }
  const int np = st_decode_steps(in, n, pairs, n); /* an indexer row pairs once: np <= n */
  st_decode_step_print(stdout, in, pairs, np, cli->json);
  /* Cold, the graphs would need both cases' input sets rotated together:
   * the step graphs are timed warm only. */
  if (np > 0 && !cli->cold) print_step_graphs(cli, cu, dev, rt, stream, in, pairs, np);
  if (np > 0 && cli->cold && !cli->json) printf("(the decode steps as one graph are timed without --cold only)\n");
done:
  free(in);
  free(pairs);
}

static void record_rows(const st_cli *cli, const st_gen *gen, const st_device_info *dev, const bench_row *rows, int n) {
  st_db *db = NULL;
  st_err err = {{0}};
  int64_t device_id = 0, run_id = 0;
  if (st_db_open(cli->db_path, ST_DB_READWRITE, &db, &err) != ST_OK) goto fail;
  st_run_row run;
  memset(&run, 0, sizeof run);
  snprintf(run.kind, sizeof run.kind, "bench");
  snprintf(run.op, sizeof run.op, "%s", cli->op ? cli->op : "*");
  snprintf(run.suite, sizeof run.suite, "%s", cli->suite);
  snprintf(run.arch, sizeof run.arch, "%s", dev->arch);
  snprintf(run.tool_version, sizeof run.tool_version, "%s", ST_VERSION);
  snprintf(run.args, sizeof run.args, "suite=%s op=%s seed=%llu%s", cli->suite, cli->op ? cli->op : "*", cli->seed,
           cli->cold ? " " ST_COLD_RUN_ARG : "");
  const st_run_env_in env = {dev, st_gen_generator_dir(gen), st_gen_templates_dir(gen), cli->suite, cli->seed};
  if (st_run_env_json(&env, run.env, sizeof run.env, &err) != ST_OK) goto fail;
  if (st_db_put_device(db, dev, &device_id, &err) != ST_OK) goto fail;
  run.device_id = device_id;
  if (st_db_run_begin(db, &run, &run_id, &err) != ST_OK) goto fail;
  for (int i = 0; i < n; i++) {
    st_measurement m;
    memset(&m, 0, sizeof m);
    m.run_id = run_id;
    /* st_last_variant gives "id name": the id is the first word. A row that
     * never launched has no variant to record it under (printed above). */
    if (sscanf(rows[i].variant, "%39s", m.variant_id) != 1) continue;
    snprintf(m.shape_key, sizeof m.shape_key, "%s", rows[i].shape->key);
    snprintf(m.status, sizeof m.status, "%s", rows[i].status);
    snprintf(m.error, sizeof m.error, "%s", rows[i].error);
    m.median_us = rows[i].us;
    m.spread = rows[i].spread;
    m.reps = 5;
    m.iters = 40;
    snprintf(m.samples, sizeof m.samples, "[]");
    if (st_db_put_measurement(db, &m, &err) != ST_OK) goto fail;
  }
  st_db_run_finish(db, run_id, "done", &err);
  st_db_close(db);
  if (!cli->json) printf("recorded as run %lld\n", (long long)run_id);
  return;
fail:
  st_cli_error(cli, "recording the bench run: %s", err.msg);
  st_db_close(db);
}

int st_cmd_bench(int argc, char **argv) {
  st_cli cli;
  int rc = st_cli_parse(
      argc, argv,
      ST_OPT_DB | ST_OPT_SUITE | ST_OPT_OP | ST_OPT_DEVICE | ST_OPT_SEED | ST_OPT_JSON | ST_OPT_HARNESS | ST_OPT_COLD |
          ST_OPT_BUILTIN,
      usage, &cli);
  if (rc) return rc == -1 ? ST_EXIT_OK : ST_EXIT_USAGE;
  /* Its own default suite; the parser saw whether one was given, however
   * abbreviated or spelled. */
  if (!(cli.given & ST_OPT_SUITE)) cli.suite = "anchors";
  st_err err = {{0}};
  st_gen *gen = NULL;
  st_shape *shapes = NULL;
  int nshapes = 0;
  bench_row *rows = NULL;
  st_handle *rt = NULL;
  st_db *db = NULL; /* --harness: the variants' binaries */
  const st_cu *cu = NULL;
  CUcontext ctx = NULL;
  CUstream stream = NULL;
  CUdevice d = 0;
  st_device_info dev;
  if (cli.builtin && (cli.given & (ST_OPT_DB | ST_OPT_HARNESS))) {
    st_cli_error(&cli, "--builtin opens no database: it takes neither --db nor --harness");
    return ST_EXIT_USAGE;
  }
  if (!cli.builtin && access(cli.db_path, R_OK) != 0) {
    st_cli_error(&cli, "database %s cannot be read: run `sparsetune tune` first (or pass --db)", cli.db_path);
    return ST_EXIT_USAGE;
  }
  /* The run is recorded into the database at the end; an export (what an
   * engine ships) takes no runs: it is timed and nothing is recorded. Its
   * modules are the winners' alone, so --harness needs the source database. */
  const int exported = !cli.builtin && st_cli_is_exported(&cli);
  if (exported && cli.harness) {
    st_cli_error(&cli, "--harness needs the tuned database, not an export (%s): pass the source database",
                 cli.db_path);
    return ST_EXIT_USAGE;
  }
  if (st_gen_open(NULL, NULL, &gen, &err) != ST_OK || st_gen_suite(gen, cli.suite, cli.op, &shapes, &nshapes, &err)) {
    st_cli_error(&cli, "%s", err.msg);
    rc = ST_EXIT_USAGE;
    goto done;
  }
  st_status s = st_cu_load(&cu, &err);
  if (s == ST_OK) s = st_cu_device_info(cu, cli.device, &dev, &err);
  if (s != ST_OK) {
    st_cli_error(&cli, "bench needs a GPU: %s", err.msg);
    rc = ST_EXIT_FAIL;
    goto done;
  }
  if (st_open(cli.builtin ? NULL : cli.db_path, cli.device, &rt) != ST_OK) {
    st_cli_error(&cli, "%s", st_last_error(NULL));
    rc = ST_EXIT_FAIL;
    goto done;
  }
  if (cli.harness && st_db_open(cli.db_path, ST_DB_READONLY, &db, &err) != ST_OK) {
    st_cli_error(&cli, "%s", err.msg);
    rc = ST_EXIT_FAIL;
    goto done;
  }
  if (cu->cuDeviceGet(&d, cli.device) || cu->cuDevicePrimaryCtxRetain(&ctx, d) || cu->cuCtxSetCurrent(ctx) ||
      cu->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING)) {
    st_cli_error(&cli, "could not set up the CUDA context of device %d", cli.device);
    rc = ST_EXIT_FAIL;
    goto done;
  }
  double copy_gbs = 0;
  if (copy_bandwidth(cu, stream, &copy_gbs, &err) != ST_OK) {
    st_cli_error(&cli, "%s", err.msg);
    rc = ST_EXIT_FAIL;
    goto done;
  }
  rows = calloc((size_t)nshapes, sizeof *rows);
  if (!rows) {
    rc = ST_EXIT_FAIL;
    goto done;
  }
  if (!cli.json) {
    printf("bench: suite %s on %s (%s, %d SMs); copy bandwidth %.0f GB/s (read + write)\n", cli.suite, dev.name,
           dev.arch, dev.sm_count, copy_gbs);
    printf("method: CUDA-graph replays, median of 5 x 40 (prefill ops: 5 x 10) after >= 200 ms of warm-up replays "
           "from a flushed L2 (a spread over %.0f%% timed again, up to %d times, the quietest kept), %s\n",
           100 * ST_BENCH_RETRY_SPREAD, ST_TIMING_ATTEMPTS,
           cli.cold ? "paged caches cold in L2 (pools of 16x L2, other pages each replay)" : "same inputs each replay");
    const char *elsewhere = peer_elsewhere(shapes, nshapes, dev.name);
    if (elsewhere)
      printf("peer us*: timed on %s, not on this device: no speed-up is given (compare the fractions of copy)\n",
             elsewhere);
    printf("%-18s %-62s %8s %7s %8s %7s %7s %8s %8s  %s\n", "op", "shape", "us", "spread", "GB/s", "of copy", "TFLOP/s",
           "peer us", "speed-up", "variant (id name)");
  } else {
    printf("{\"device\":\"%s\",\"arch\":\"%s\",\"copy_gbs\":%.1f,\"cold\":%s}\n", dev.name, dev.arch, copy_gbs,
           cli.cold ? "true" : "false");
  }
  int failures = 0;
  for (int i = 0; i < nshapes; i++) {
    rows[i].shape = &shapes[i];
    const char *peer = st_params_get(&shapes[i].params, "peer_us");
    rows[i].peer_us = peer ? atof(peer) : 0;
    rows[i].peer_device = st_params_get(&shapes[i].params, "peer_device");
    rows[i].peer_here = rows[i].peer_us > 0 && rows[i].peer_device && !strcmp(rows[i].peer_device, dev.name);
    bench_shape(cu, &dev, rt, db, stream, &cli, copy_gbs, &rows[i]);
    failures += strcmp(rows[i].status, "ok") != 0;
    print_row(&cli, &rows[i]);
    fflush(stdout);
  }
  print_decode_step(&cli, cu, &dev, rt, stream, rows, nshapes);
  if (!cli.builtin && !exported) record_rows(&cli, gen, &dev, rows, nshapes);
  if (exported && !cli.json) printf("%s is an export: nothing recorded\n", cli.db_path);
  rc = failures ? ST_EXIT_FAIL : ST_EXIT_OK;
done:
  if (stream) cu->cuStreamDestroy(stream);
  if (ctx) cu->cuDevicePrimaryCtxRelease(d);
  st_close(rt);
  st_db_close(db);
  free(rows);
  free(shapes);
  st_gen_close(gen);
  return rc;
}
