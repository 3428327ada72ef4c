#include "timing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void summarize(st_timing *t) {
  double sorted[ST_TIMING_MAX_REPS];
  memcpy(sorted, t->samples_us, sizeof(double) * (size_t)t->reps);
  qsort(sorted, (size_t)t->reps, sizeof sorted[0], cmp_double);
  const int n = t->reps;
  t->median_us = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  t->min_us = sorted[0];
  t->max_us = sorted[n - 1];
  t->spread = t->median_us > 0 ? (t->max_us - t->min_us) / t->median_us : 0;
}

typedef struct graph_state {
  const st_cu *cu;
  int n, next; /* graphs captured; the one the next replay launches */
  CUgraph graph[ST_TIMING_MAX_ROTATIONS];
  CUgraphExec exec[ST_TIMING_MAX_ROTATIONS];
  CUevent ev[2];
} graph_state;

static void release(graph_state *g) {
  for (int i = 0; i < g->n; i++) {
    if (g->exec[i]) g->cu->cuGraphExecDestroy(g->exec[i]);
    if (g->graph[i]) g->cu->cuGraphDestroy(g->graph[i]);
  }
  for (int i = 0; i < 2; i++)
    if (g->ev[i]) g->cu->cuEventDestroy(g->ev[i]);
}

/* Milliseconds of `n` replays, each of the next graph in turn. */
static st_status replay(graph_state *g, CUstream s, int n, float *ms, st_err *err) {
  const st_cu *cu = g->cu;
  ST_CU_TRY(cu, cu->cuEventRecord(g->ev[0], s), err);
  for (int i = 0; i < n; i++) {
    ST_CU_TRY(cu, cu->cuGraphLaunch(g->exec[g->next], s), err);
    g->next = (g->next + 1) % g->n;
  }
  ST_CU_TRY(cu, cu->cuEventRecord(g->ev[1], s), err);
  ST_CU_TRY(cu, cu->cuEventSynchronize(g->ev[1]), err);
  ST_CU_TRY(cu, cu->cuEventElapsedTime(ms, g->ev[0], g->ev[1]), err);
  return ST_OK;
}

/* Writes `bytes` of a scratch buffer, evicting from L2 what was there. */
static st_status flush_l2(const st_cu *cu, CUstream s, int64_t bytes, st_err *err) {
  CUdeviceptr buf = 0;
  ST_CU_TRY(cu, cu->cuMemAlloc(&buf, (size_t)bytes), err);
  CUresult rc = cu->cuMemsetD32Async(buf, 0x5a5a5a5au, (size_t)bytes / 4, s);
  if (rc == CUDA_SUCCESS) rc = cu->cuStreamSynchronize(s);
  const CUresult freed = cu->cuMemFree(buf);
  if (rc != CUDA_SUCCESS) return st_cu_fail(cu, rc, "L2 flush", err);
  if (freed != CUDA_SUCCESS) return st_cu_fail(cu, freed, "cuMemFree (L2 flush)", err);
  return ST_OK;
}

/* fn's launches on `s`, captured into graph g->n and instantiated. */
static st_status capture(graph_state *g, CUstream s, st_launch_fn fn, void *ctx, st_err *err) {
  const st_cu *cu = g->cu;
  ST_CU_TRY(cu, cu->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), err);
  st_status st = fn(ctx, s, err);
  CUgraph graph = NULL;
  CUresult rc = cu->cuStreamEndCapture(s, &graph);
  const int i = g->n++;
  g->graph[i] = graph;
  if (st != ST_OK) return st;
  if (rc != CUDA_SUCCESS) return st_cu_fail(cu, rc, "cuStreamEndCapture", err);
  /* Kernel nodes keep their capture stream's priority (sparse_attn's side
   * stream is the greatest), but a graph honours them only when asked. */
  ST_CU_TRY(cu,
            cu->cuGraphInstantiateWithFlags(&g->exec[i], g->graph[i], CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY),
            err);
  return ST_OK;
}

/* A graph per input set (o->rotations > 1), then the launches back on set 0. */
static st_status capture_all(graph_state *g, CUstream s, st_launch_fn fn, void *ctx, const st_timing_opts *o,
                             st_err *err) {
  if (o->rotations <= 1) return capture(g, s, fn, ctx, err);
  if (!o->rotate || o->rotations > ST_TIMING_MAX_ROTATIONS)
    return st_fail(err, ST_ERR_INVALID_ARG, "cold timing needs 2..%d input sets and a way to switch them",
                   ST_TIMING_MAX_ROTATIONS);
  st_status st = ST_OK;
  for (int i = 0; i < o->rotations && st == ST_OK; i++)
    if ((st = o->rotate(ctx, i, err)) == ST_OK) st = capture(g, s, fn, ctx, err);
  const st_status back = o->rotate(ctx, 0, err);
  return st != ST_OK ? st : back;
}

static st_status run(graph_state *g, CUstream s, st_launch_fn fn, void *ctx, const st_timing_opts *o, st_timing *t,
                     st_err *err) {
  const st_cu *cu = g->cu;
  st_status st = capture_all(g, s, fn, ctx, o, err);
  if (st != ST_OK) return st;
  for (int i = 0; i < 2; i++) ST_CU_TRY(cu, cu->cuEventCreate(&g->ev[i], CU_EVENT_DEFAULT), err);
  if (o->flush_bytes > 0 && (st = flush_l2(cu, s, o->flush_bytes, err)) != ST_OK) return st;
  float ms = 0;
  if (o->warmup > 0 && (st = replay(g, s, o->warmup, &ms, err)) != ST_OK) return st;
  for (float warm = ms; o->warmup > 0 && warm < o->warmup_ms; warm += ms)
    if ((st = replay(g, s, o->warmup, &ms, err)) != ST_OK) return st;
  const int probe_n = o->iters > 0 && o->iters < 5 ? o->iters : 5;
  if ((st = replay(g, s, probe_n, &ms, err)) != ST_OK) return st;
  const double probe_us = 1000.0 * ms / probe_n;
  if (o->prune_us > 0 && probe_us > o->prune_us) {
    t->pruned = 1;
    t->reps = 1;
    t->attempts = 1;
    t->iters = probe_n;
    t->samples_us[0] = probe_us;
    summarize(t);
    return ST_OK;
  }
  int iters = o->iters;
  if (iters <= 0) {
    const double want = o->target_rep_ms > 0 ? o->target_rep_ms : 2.0;
    iters = (int)(want * 1000.0 / (probe_us > 0.01 ? probe_us : 0.01));
    if (iters < 5) iters = 5;
    if (o->max_iters > 0 && iters > o->max_iters) iters = o->max_iters;
  }
  st_timing a = {.iters = iters, .reps = o->reps < 1 ? 1 : o->reps > ST_TIMING_MAX_REPS ? ST_TIMING_MAX_REPS : o->reps};
  do {
    for (int r = 0; r < a.reps; r++) {
      if ((st = replay(g, s, iters, &ms, err)) != ST_OK) return st;
      a.samples_us[r] = 1000.0 * ms / iters;
    }
    summarize(&a);
  } while (st_timing_keep_quietest(t, &a, o->retry_spread));
  return ST_OK;
}

int st_timing_keep_quietest(st_timing *kept, const st_timing *t, double retry_spread) {
  const int attempts = kept->attempts + 1;
  if (kept->attempts == 0 || t->spread < kept->spread) *kept = *t;
  kept->attempts = attempts;
  return retry_spread > 0 && kept->spread > retry_spread && attempts < ST_TIMING_ATTEMPTS;
}

st_status st_time_graph(const st_cu *cu, CUstream stream, st_launch_fn fn, void *ctx, const st_timing_opts *o,
                        st_timing *t, st_err *err) {
  memset(t, 0, sizeof *t);
  graph_state g = {.cu = cu};
  st_status s = run(&g, stream, fn, ctx, o, t, err);
  release(&g);
  return s;
}

static st_status replay_once(graph_state *g, CUstream stream, st_launch_fn fn, void *ctx, st_err *err) {
  st_status s = capture(g, stream, fn, ctx, err);
  if (s != ST_OK) return s;
  ST_CU_TRY(g->cu, g->cu->cuGraphLaunch(g->exec[0], stream), err);
  ST_CU_TRY(g->cu, g->cu->cuStreamSynchronize(stream), err);
  return ST_OK;
}

st_status st_replay_once(const st_cu *cu, CUstream stream, st_launch_fn fn, void *ctx, st_err *err) {
  graph_state g = {.cu = cu};
  st_status s = replay_once(&g, stream, fn, ctx, err);
  release(&g);
  return s;
}

void st_timing_samples_json(const st_timing *t, char *buf, size_t cap) {
  size_t len = 0;
  if (cap < 3) {
    if (cap) buf[0] = '\0';
    return;
  }
  buf[len++] = '[';
  for (int i = 0; i < t->reps; i++) {
    int n = snprintf(buf + len, cap - len, "%s%.4f", i ? "," : "", t->samples_us[i]);
    if (n < 0 || (size_t)n >= cap - len - 1) break;
    len += (size_t)n;
  }
  buf[len++] = ']';
  buf[len] = '\0';
}
