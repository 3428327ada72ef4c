/* sparse_attn_decode through the runtime on a GPU: a database with compiled
 * variants and a recorded winner; st_open; st_sparse_attn_decode captured
 * once in a CUDA graph (global capture mode: any sync or allocation would
 * break it) and replayed with different seq_lens each time, o and lse
 * checked against the double-precision reference; then the built-in choice
 * (not the winner: the op's winners serve only their own keys) for a batch
 * and for a topk without one. Then two launches with pdl = 1 in one graph, the second reading
 * the first's output as its q: programmatic dependent launch must not let
 * it read early. Skips where there is no driver or GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_driver.h"
#include "generator.h"
#include "gpu_db.h"
#include "ops/tensor_check.h"
#include "random_fill.h"
#include "reference/sparse_attn_decode.h"
#include "sparsetune.h"
#include "test_cuda.h"
#include "testutil.h"

enum { R = 4, QLEN = 2, HQ = 32, HKV = 2, D = 128, TOPK = 8, CTX = 8192, MB = CTX / 128, PAGES = 512 };
enum { ROWS = R * QLEN, POOL = PAGES * 2 * 128 * HKV * D };

static uint64_t g_seed;
static char g_db[256];
static char g_winner_id[40];

static void fill_shape(st_shape *s) {
  memset(s, 0, sizeof *s);
  st_err err = {{0}};
  snprintf(s->op, sizeof s->op, "sparse_attn_decode");
  st_params_set(&s->params, "dtype", "bf16", &err);
  st_params_set(&s->params, "scale", "none", &err);
  st_params_set(&s->params, "layout", "pages2", &err);
  st_params_set(&s->params, "lens", "full", &err);
  st_params_set(&s->params, "sel", "random", &err);
  st_params_set_int(&s->params, "D", D, &err);
  st_params_set_int(&s->params, "Hq", HQ, &err);
  st_params_set_int(&s->params, "Hkv", HKV, &err);
  st_params_set_int(&s->params, "qlen", QLEN, &err);
  st_params_set_int(&s->params, "topk", TOPK, &err);
  st_params_set_int(&s->params, "lse", 1, &err);
  st_params_set_int(&s->params, "B", R, &err);
  st_params_set_int(&s->params, "ctx", CTX, &err);
}

static int make_db(void **state) {
  (void)state;
  st_shape shape;
  fill_shape(&shape);
  char key[160];
  snprintf(key, sizeof key, "sparse_attn_decode:B=%d,D=%d,Hkv=%d,Hq=%d,dtype=bf16,qlen=%d,topk=%d", R, D, HKV, HQ, QLEN,
           TOPK);
  st_test_make_db("sparse_attn_decode", &shape, key, "single", "4", g_db, sizeof g_db, g_winner_id);
  return 0;
}

static int remove_db(void **state) {
  (void)state;
  st_test_remove_db(g_db);
  return 0;
}

/* Host inputs and device buffers of the test. */
typedef struct io {
  const st_cu *cu;
  uint16_t *q, *pool, *o;
  float *lse;
  int32_t bt[R * MB], seq[R], idx[HKV * ROWS * TOPK];
  CUdeviceptr dq, dpool, dbt, dseq, didx, dout, dlse;
} io;

/* Distinct random blocks per row, about one entry in six -1. */
static void make_inputs(io *t) {
  t->q = malloc((size_t)ROWS * HQ * D * 2);
  t->pool = malloc((size_t)POOL * 2);
  t->o = malloc((size_t)ROWS * HQ * D * 2);
  t->lse = malloc((size_t)ROWS * HQ * 4);
  assert_true(t->q && t->pool && t->o && t->lse);
  st_fill_uniform(t->q, ST_DTYPE_BF16, (size_t)ROWS * HQ * D, -1, 1, g_seed, 4);
  st_fill_uniform(t->pool, ST_DTYPE_BF16, (size_t)POOL, -1, 1, g_seed + 1, 4);
  uint64_t rng = g_seed + 2;
  for (int i = 0; i < R * MB; i++) t->bt[i] = (int32_t)st_rand_below(&rng, PAGES);
  for (int row = 0; row < HKV * ROWS; row++)
    for (int e = 0; e < TOPK; e++) {
      int32_t j;
      int dup;
      do {
        j = (int32_t)st_rand_below(&rng, MB);
        dup = 0;
        for (int k = 0; k < e; k++) dup |= t->idx[row * TOPK + k] == j;
      } while (dup);
      t->idx[row * TOPK + e] = st_rand_below(&rng, 6) == 0 ? -1 : j;
    }
}

static CUdeviceptr upload(const st_cu *cu, const void *h, size_t bytes) {
  CUdeviceptr d = 0;
  assert_int_equal(cu->cuMemAlloc(&d, bytes), CUDA_SUCCESS);
  if (h) assert_int_equal(cu->cuMemcpyHtoD(d, h, bytes), CUDA_SUCCESS);
  return d;
}

static st_sparse_attn_decode_args make_args(const io *t) {
  st_sparse_attn_decode_args a;
  st_sparse_attn_decode_args_init(&a);
  st_tensor_contiguous(&a.q, (void *)(uintptr_t)t->dq, ST_DTYPE_BF16, 3, (int64_t[]){ROWS, HQ, D});
  /* (pages, 2, 128, Hkv, D): K then V of a page. */
  st_tensor_contiguous(&a.k_cache, (void *)(uintptr_t)t->dpool, ST_DTYPE_BF16, 4, (int64_t[]){PAGES, HKV, 128, D});
  const int64_t stride[4] = {2 * 128 * HKV * D, D, HKV * D, 1};
  memcpy(a.k_cache.stride, stride, sizeof stride);
  a.v_cache = a.k_cache;
  a.v_cache.data = (void *)(uintptr_t)(t->dpool + (CUdeviceptr)128 * HKV * D * 2);
  st_tensor_contiguous(&a.topk_idx, (void *)(uintptr_t)t->didx, ST_DTYPE_INT32, 3, (int64_t[]){HKV, ROWS, TOPK});
  st_tensor_contiguous(&a.block_table, (void *)(uintptr_t)t->dbt, ST_DTYPE_INT32, 2, (int64_t[]){R, MB});
  st_tensor_contiguous(&a.seq_lens, (void *)(uintptr_t)t->dseq, ST_DTYPE_INT32, 1, (int64_t[]){R});
  st_tensor_contiguous(&a.o, (void *)(uintptr_t)t->dout, ST_DTYPE_BF16, 3, (int64_t[]){ROWS, HQ, D});
  st_tensor_contiguous(&a.lse, (void *)(uintptr_t)t->dlse, ST_DTYPE_FP32, 2, (int64_t[]){ROWS, HQ});
  a.sm_scale = 1.0f / sqrtf((float)D);
  a.qlen = QLEN;
  a.max_context = CTX;
  return a;
}

/* The reference of R requests (the first `reqs`) with topk entries per row
 * taken from the first `topk` of each stored row, for q rows `q` (host),
 * against the o and lse on the device at dout and dlse. */
static void check_against(const io *t, const uint16_t *q, CUdeviceptr dout, CUdeviceptr dlse, int reqs, int topk,
                          const char *what) {
  const int rows = reqs * QLEN;
  int32_t *idx = malloc(sizeof(int32_t) * (size_t)(HKV * rows * topk));
  for (int g = 0; g < HKV; g++)
    for (int row = 0; row < rows; row++)
      for (int e = 0; e < topk; e++) idx[(g * rows + row) * topk + e] = t->idx[(g * ROWS + row) * TOPK + e];
  st_ref_sparse_attn_decode in = {.kv_dtype = ST_DTYPE_BF16,
                                  .R = reqs,
                                  .qlen = QLEN,
                                  .Hq = HQ,
                                  .Hkv = HKV,
                                  .D = D,
                                  .topk = topk,
                                  .bt_cols = MB,
                                  .pages = PAGES,
                                  .q = q,
                                  .k_cache = t->pool,
                                  .v_cache = t->pool + 128 * HKV * D,
                                  .k_stride = {2 * 128 * HKV * D, D, HKV * D},
                                  .v_stride = {2 * 128 * HKV * D, D, HKV * D},
                                  .scale_mode = ST_KV_SCALE_NONE,
                                  .topk_idx = idx,
                                  .block_table = t->bt,
                                  .seq_lens = t->seq,
                                  .sm_scale = 1.0 / sqrt((double)D)};
  double *ref_o = malloc(sizeof(double) * (size_t)rows * HQ * D), *ref_lse = malloc(sizeof(double) * (size_t)rows * HQ);
  assert_int_equal(st_ref_sparse_attn_decode_compute(&in, ref_o, ref_lse, 4), 0);
  assert_int_equal(t->cu->cuMemcpyDtoH(t->o, dout, (size_t)rows * HQ * D * 2), CUDA_SUCCESS);
  assert_int_equal(t->cu->cuMemcpyDtoH(t->lse, dlse, (size_t)rows * HQ * 4), CUDA_SUCCESS);
  double max_err = 0;
  char msg[400];
  const int bad = st_ref_sparse_attn_decode_verify(&in, ref_o, ref_lse, t->o, t->lse, 2e-2, &max_err, msg, sizeof msg);
  if (bad) fail_msg("%s: %d wrong; first: %s", what, bad, msg);
  printf("# %s: max relative error %.2e\n", what, max_err);
  free(idx);
  free(ref_o);
  free(ref_lse);
}

static void check(const io *t, int reqs, int topk, const char *what) {
  check_against(t, t->q, t->dout, t->dlse, reqs, topk, what);
}

/* Poisons o and lse (NaN) so an unwritten element fails the check. */
static void poison(const io *t, CUstream stream) {
  assert_int_equal(t->cu->cuMemsetD16Async(t->dout, 0x7fc0, (size_t)ROWS * HQ * D, stream), CUDA_SUCCESS);
  assert_int_equal(t->cu->cuMemsetD32Async(t->dlse, 0x7fc00000u, (size_t)ROWS * HQ, stream), CUDA_SUCCESS);
}

/* The handle on the test's database, a stream, and the inputs on the device. */
typedef struct fixture {
  io t;
  st_handle *h;
  CUdevice d;
  CUstream stream;
} fixture;

static void fixture_open(fixture *s) {
  memset(s, 0, sizeof *s);
  io *t = &s->t;
  st_err err = {{0}};
  assert_int_equal(st_cu_load(&t->cu, &err), ST_OK);
  const st_cu *cu = t->cu;
  if (st_open(g_db, 0, &s->h) != ST_OK) fail_msg("st_open: %s", st_last_error(NULL));
  s->stream = st_test_cuda_stream(cu, &s->d);
  make_inputs(t);
  t->dq = upload(cu, t->q, (size_t)ROWS * HQ * D * 2);
  t->dpool = upload(cu, t->pool, (size_t)POOL * 2);
  t->dbt = upload(cu, t->bt, sizeof t->bt);
  t->dseq = upload(cu, NULL, sizeof t->seq);
  t->didx = upload(cu, t->idx, sizeof t->idx);
  t->dout = upload(cu, NULL, (size_t)ROWS * HQ * D * 2);
  t->dlse = upload(cu, NULL, (size_t)ROWS * HQ * 4);
}

static void fixture_close(fixture *s) {
  io *t = &s->t;
  const st_cu *cu = t->cu;
  CUdeviceptr bufs[] = {t->dq, t->dpool, t->dbt, t->dseq, t->didx, t->dout, t->dlse};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cu->cuMemFree(bufs[i]);
  cu->cuStreamDestroy(s->stream);
  cu->cuDevicePrimaryCtxRelease(s->d);
  st_close(s->h);
  free(t->q);
  free(t->pool);
  free(t->o);
  free(t->lse);
}

/* A cleared workspace of at least the bytes each of `args` needs. */
static CUdeviceptr workspace_for(const fixture *s, const st_sparse_attn_decode_args *args, int n, size_t *bytes) {
  *bytes = 0;
  for (int i = 0; i < n; i++) {
    size_t b = 0;
    if (st_sparse_attn_decode_workspace_size(s->h, &args[i], &b) != ST_OK)
      fail_msg("workspace size: %s", st_last_error(s->h));
    if (b > *bytes) *bytes = b;
  }
  CUdeviceptr dws = upload(s->t.cu, NULL, *bytes);
  assert_int_equal(st_workspace_clear(s->h, (void *)(uintptr_t)dws, *bytes, s->stream), ST_OK);
  return dws;
}

static void test_graph_replays_follow_new_seq_lens(void **state) {
  (void)state;
  fixture ss;
  fixture_open(&ss);
  io t = ss.t;
  const st_cu *cu = t.cu;
  st_handle *h = ss.h;
  CUstream stream = ss.stream;

  st_sparse_attn_decode_args a = make_args(&t);
  /* Batch 3 and topk 6 (the first 6 entries of each row) have no winner of
   * their own: the built-in choice runs them, not batch 4's and topk 8's
   * winner. */
  st_sparse_attn_decode_args b = a, c = a;
  b.q.shape[0] = b.o.shape[0] = b.lse.shape[0] = 3 * QLEN;
  b.block_table.shape[0] = b.seq_lens.shape[0] = 3;
  b.topk_idx.shape[1] = 3 * QLEN; /* rows of 3 requests, same strides */
  c.topk_idx.shape[2] = 6;
  size_t ws = 0;
  const st_sparse_attn_decode_args all[3] = {a, b, c};
  CUdeviceptr dws = workspace_for(&ss, all, 3, &ws);
  assert_true(ws > 0); /* the winner splits 4 ways: partial states */
  if (st_sparse_attn_decode_prepare(h, &a) != ST_OK) fail_msg("prepare: %s", st_last_error(h));

  CUgraph graph;
  CUgraphExec exec;
  assert_int_equal(cu->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  st_status s = st_sparse_attn_decode(h, &a, (void *)(uintptr_t)dws, ws, stream);
  assert_int_equal(cu->cuStreamEndCapture(stream, &graph), CUDA_SUCCESS);
  if (s != ST_OK) fail_msg("captured launch: %s", st_last_error(h));
  if (!strstr(st_last_variant(h), g_winner_id))
    fail_msg("dispatched '%s', expected the recorded winner %s", st_last_variant(h), g_winner_id);
  assert_int_equal(cu->cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);

  static const int32_t rounds[3][R] = {{300, 0, CTX, 129}, {CTX, 5000, 1, 0}, {4133, 4133, 128, 7000}};
  for (int round = 0; round < 3; round++) {
    memcpy(t.seq, rounds[round], sizeof t.seq);
    assert_int_equal(cu->cuMemcpyHtoD(t.dseq, t.seq, sizeof t.seq), CUDA_SUCCESS);
    poison(&t, stream);
    for (int rep = 0; rep < 2; rep++) assert_int_equal(cu->cuGraphLaunch(exec, stream), CUDA_SUCCESS);
    assert_int_equal(cu->cuStreamSynchronize(stream), CUDA_SUCCESS);
    char what[64];
    snprintf(what, sizeof what, "graph replay %d", round);
    check(&t, R, TOPK, what);
  }

  poison(&t, stream);
  if (st_sparse_attn_decode(h, &b, (void *)(uintptr_t)dws, ws, stream) != ST_OK)
    fail_msg("batch 3 dispatch: %s", st_last_error(h));
  assert_int_equal(cu->cuStreamSynchronize(stream), CUDA_SUCCESS);
  if (strstr(st_last_variant(h), g_winner_id))
    fail_msg("batch 3 dispatched batch 4's winner %s, expected the built-in choice", g_winner_id);
  check(&t, 3, TOPK, "built-in choice at batch 3");

  poison(&t, stream);
  if (st_sparse_attn_decode(h, &c, (void *)(uintptr_t)dws, ws, stream) != ST_OK)
    fail_msg("topk 6 dispatch: %s", st_last_error(h));
  assert_int_equal(cu->cuStreamSynchronize(stream), CUDA_SUCCESS);
  if (strstr(st_last_variant(h), g_winner_id))
    fail_msg("topk 6 dispatched topk 8's winner %s, expected the built-in choice", g_winner_id);
  check(&t, R, 6, "built-in choice at topk 6");

  cu->cuGraphExecDestroy(exec);
  cu->cuGraphDestroy(graph);
  cu->cuMemFree(dws);
  fixture_close(&ss);
}

/* Two launches with pdl = 1 captured in one graph: the second's q is the
 * first's o (both [R*qlen, Hq, D] bf16), and they share one workspace. Its
 * CTAs may be placed as the first launch's CTAs exit, before the last one
 * has, so a read of q, or of the workspace's counters, before
 * griddepcontrol.wait would see the NaN poison or the first launch's
 * half-written state. */
static void test_pdl_launch_reads_what_the_launch_before_wrote(void **state) {
  (void)state;
  fixture ss;
  fixture_open(&ss);
  io *t = &ss.t;
  const st_cu *cu = t->cu;
  const size_t o_bytes = (size_t)ROWS * HQ * D * 2, lse_bytes = (size_t)ROWS * HQ * 4;
  CUdeviceptr dout2 = upload(cu, NULL, o_bytes), dlse2 = upload(cu, NULL, lse_bytes);
  uint16_t *q2 = malloc(o_bytes);
  assert_non_null(q2);
  st_sparse_attn_decode_args a1 = make_args(t), a2 = a1;
  a1.pdl = 1;
  a2.pdl = 1;
  a2.q.data = (void *)(uintptr_t)t->dout;
  a2.o.data = (void *)(uintptr_t)dout2;
  a2.lse.data = (void *)(uintptr_t)dlse2;
  size_t ws = 0;
  const st_sparse_attn_decode_args both[2] = {a1, a2};
  CUdeviceptr dws = workspace_for(&ss, both, 2, &ws);
  if (st_sparse_attn_decode_prepare(ss.h, &a1) != ST_OK) fail_msg("prepare: %s", st_last_error(ss.h));

  CUgraph graph;
  CUgraphExec exec;
  assert_int_equal(cu->cuStreamBeginCapture(ss.stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  st_status s = st_sparse_attn_decode(ss.h, &a1, (void *)(uintptr_t)dws, ws, ss.stream);
  if (s == ST_OK) s = st_sparse_attn_decode(ss.h, &a2, (void *)(uintptr_t)dws, ws, ss.stream);
  assert_int_equal(cu->cuStreamEndCapture(ss.stream, &graph), CUDA_SUCCESS);
  if (s != ST_OK) fail_msg("captured launches: %s", st_last_error(ss.h));
  assert_int_equal(cu->cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);

  static const int32_t rounds[3][R] = {{CTX, 0, 300, 4133}, {129, CTX, 7000, 1}, {5000, 128, 0, CTX}};
  for (int round = 0; round < 3; round++) {
    memcpy(t->seq, rounds[round], sizeof t->seq);
    assert_int_equal(cu->cuMemcpyHtoD(t->dseq, t->seq, sizeof t->seq), CUDA_SUCCESS);
    poison(t, ss.stream);
    assert_int_equal(cu->cuMemsetD16Async(dout2, 0x7fc0, o_bytes / 2, ss.stream), CUDA_SUCCESS);
    assert_int_equal(cu->cuMemsetD32Async(dlse2, 0x7fc00000u, lse_bytes / 4, ss.stream), CUDA_SUCCESS);
    assert_int_equal(cu->cuGraphLaunch(exec, ss.stream), CUDA_SUCCESS);
    assert_int_equal(cu->cuStreamSynchronize(ss.stream), CUDA_SUCCESS);
    char what[64];
    snprintf(what, sizeof what, "first launch, replay %d", round);
    check(t, R, TOPK, what);
    memcpy(q2, t->o, o_bytes); /* check() left the first launch's o here */
    snprintf(what, sizeof what, "pdl launch on its output, replay %d", round);
    check_against(t, q2, dout2, dlse2, R, TOPK, what);
  }
  cu->cuGraphExecDestroy(exec);
  cu->cuGraphDestroy(graph);
  CUdeviceptr bufs[] = {dout2, dlse2, dws};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cu->cuMemFree(bufs[i]);
  free(q2);
  fixture_close(&ss);
}

int main(void) {
  int rc = st_test_require_gpu();
  if (rc) return rc;
  g_seed = st_test_seed("runtime_gpu_sparse_attn_decode");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_graph_replays_follow_new_seq_lens),
      cmocka_unit_test(test_pdl_launch_reads_what_the_launch_before_wrote),
  };
  return cmocka_run_group_tests(tests, make_db, remove_db);
}
