/* The runtime end to end on a GPU: a database with compiled variants and a
 * recorded winner; st_open; the winner dispatched for its exact shape, the
 * built-in choice for other keys (another batch, a smaller topk: the op's
 * winners serve only their own keys); st_index_decode captured once in a CUDA
 * graph (global capture mode: any sync or allocation would break it) and
 * replayed with different seq_lens each time, every result checked against
 * the double-precision reference. Then a launch with pdl = 1 whose seq_lens
 * are the output of the launch before it, in one graph: programmatic
 * dependent launch must not let it read them early. Last, the winner's
 * binary swapped for one that names no argument block: passed over. Skips
 * where there is no driver or GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "cuda_driver.h"
#include "generator.h"
#include "gpu_db.h"
#include "nvrtc_loader.h"
#include "ops/tensor_check.h"
#include "random_fill.h"
#include "reference/index_decode.h"
#include "sparsetune.h"
#include "test_cuda.h"
#include "testutil.h"

enum { R = 4, QLEN = 2, H = 2, D = 128, TOPK = 8, CTX = 8192, MB = CTX / 128, PAGES = 4096 };

static uint64_t g_seed;
static char g_db[256];
static char g_winner_id[40];

static void fill_shape(st_shape *s, int B) {
  memset(s, 0, sizeof *s);
  st_err err = {{0}};
  snprintf(s->op, sizeof s->op, "index_decode");
  st_params_set(&s->params, "dtype", "bf16", &err);
  st_params_set_int(&s->params, "D", D, &err);
  st_params_set_int(&s->params, "H", H, &err);
  st_params_set_int(&s->params, "qlen", QLEN, &err);
  st_params_set_int(&s->params, "topk", TOPK, &err);
  st_params_set_int(&s->params, "init", 1, &err);
  st_params_set_int(&s->params, "local", 2, &err);
  st_params_set_int(&s->params, "B", B, &err);
  st_params_set_int(&s->params, "ctx", CTX, &err);
  st_params_set(&s->params, "lens", "full", &err);
}

/* A database holding the generated variants, compiled, and one winner (a
 * non-default "single" variant with 8 splits) for B = R. */
static int make_db(void **state) {
  (void)state;
  st_shape shape;
  fill_shape(&shape, R);
  char key[160];
  snprintf(key, sizeof key, "index_decode:B=%d,D=%d,H=%d,ctx=%d,dtype=bf16,qlen=%d,topk=%d", R, D, H, CTX, QLEN,
           TOPK);
  st_test_make_db("index_decode", &shape, key, "single", "8", g_db, sizeof g_db, g_winner_id);
  return 0;
}

static int remove_db(void **state) {
  (void)state;
  st_test_remove_db(g_db);
  return 0;
}

static void check(const st_ref_index_decode *in, const int32_t *got, const char *what) {
  double *scores = malloc(sizeof(double) * (size_t)(H * in->R * QLEN * MB));
  assert_int_equal(st_ref_index_decode_scores(in, scores, 4), 0);
  double viol = 0;
  char msg[400];
  const int bad = st_ref_index_decode_verify(in, scores, got, (int64_t)in->R * QLEN * in->topk, in->topk, 1e-4, &viol,
                                             msg, sizeof msg);
  if (bad) fail_msg("%s: %s", what, msg);
  free(scores);
}

/* The handle on the test's database, a stream, the inputs on the host and
 * the device, and the arguments of one launch over them. */
typedef struct fixture {
  const st_cu *cu;
  st_handle *h;
  CUdevice d;
  CUstream stream;
  uint16_t *q, *pool;
  int32_t bt[R * MB], seq[R];
  CUdeviceptr dq, dpool, dbt, dseq, dout;
  st_index_decode_args a;
} fixture;

enum { OUT_ELEMS = H * R * QLEN * TOPK };

static void fixture_open(fixture *s) {
  memset(s, 0, sizeof *s);
  st_err err = {{0}};
  assert_int_equal(st_cu_load(&s->cu, &err), ST_OK);
  const st_cu *cu = s->cu;
  if (st_open(g_db, 0, &s->h) != ST_OK) fail_msg("st_open: %s", st_last_error(NULL));
  s->stream = st_test_cuda_stream(cu, &s->d);

  const size_t q_elems = (size_t)R * QLEN * H * D, pool_elems = (size_t)PAGES * 128 * D;
  s->q = malloc(q_elems * 2);
  s->pool = malloc(pool_elems * 2);
  assert_true(s->q && s->pool);
  st_fill_uniform(s->q, ST_DTYPE_BF16, q_elems, -1, 1, g_seed, 4);
  st_fill_uniform(s->pool, ST_DTYPE_BF16, pool_elems, -1, 1, g_seed + 1, 4);
  uint64_t rng = g_seed + 2;
  for (int i = 0; i < R * MB; i++) s->bt[i] = (int32_t)st_rand_below(&rng, PAGES);
  assert_int_equal(cu->cuMemAlloc(&s->dq, q_elems * 2), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemAlloc(&s->dpool, pool_elems * 2), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemAlloc(&s->dbt, sizeof s->bt), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemAlloc(&s->dseq, sizeof s->seq), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemAlloc(&s->dout, OUT_ELEMS * 4), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyHtoD(s->dq, s->q, q_elems * 2), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyHtoD(s->dpool, s->pool, pool_elems * 2), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemcpyHtoD(s->dbt, s->bt, sizeof s->bt), CUDA_SUCCESS);

  st_index_decode_args *a = &s->a;
  st_index_decode_args_init(a);
  st_tensor_contiguous(&a->q, (void *)(uintptr_t)s->dq, ST_DTYPE_BF16, 3, (int64_t[]){R * QLEN, H, D});
  st_tensor_contiguous(&a->k_cache, (void *)(uintptr_t)s->dpool, ST_DTYPE_BF16, 3, (int64_t[]){PAGES, 128, D});
  st_tensor_contiguous(&a->block_table, (void *)(uintptr_t)s->dbt, ST_DTYPE_INT32, 2, (int64_t[]){R, MB});
  st_tensor_contiguous(&a->seq_lens, (void *)(uintptr_t)s->dseq, ST_DTYPE_INT32, 1, (int64_t[]){R});
  st_tensor_contiguous(&a->topk_idx, (void *)(uintptr_t)s->dout, ST_DTYPE_INT32, 3, (int64_t[]){H, R * QLEN, TOPK});
  a->qlen = QLEN;
  a->topk = TOPK;
  a->init_blocks = 1;
  a->local_blocks = 2;
  a->max_context = CTX;
}

static void fixture_close(fixture *s) {
  const st_cu *cu = s->cu;
  CUdeviceptr bufs[] = {s->dq, s->dpool, s->dbt, s->dseq, s->dout};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cu->cuMemFree(bufs[i]);
  cu->cuStreamDestroy(s->stream);
  cu->cuDevicePrimaryCtxRelease(s->d);
  st_close(s->h);
  free(s->q);
  free(s->pool);
}

/* The reference's view of the fixture's inputs, for `R` requests. */
static st_ref_index_decode reference_of(const fixture *s, const int32_t *seq_lens) {
  st_ref_index_decode in = {.dtype = ST_DTYPE_BF16,
                            .R = R,
                            .qlen = QLEN,
                            .H = H,
                            .D = D,
                            .topk = TOPK,
                            .init_blocks = 1,
                            .local_blocks = 2,
                            .max_blocks = MB,
                            .bt_cols = MB,
                            .pages = PAGES,
                            .q = s->q,
                            .k_pool = s->pool,
                            .block_table = s->bt,
                            .seq_lens = seq_lens};
  return in;
}

static void test_graph_replays_follow_new_seq_lens(void **state) {
  (void)state;
  fixture ss;
  fixture_open(&ss);
  const st_cu *cu = ss.cu;
  st_handle *h = ss.h;
  CUstream stream = ss.stream;
  CUdeviceptr dout = ss.dout, dseq = ss.dseq, ws = 0;
  int32_t *seq = ss.seq, out[OUT_ELEMS];
  st_index_decode_args a = ss.a;
  /* A batch of 3 and topk 6 have no winner of their own: the built-in
   * choice runs them, not batch 4's and topk 8's winner. Both share the
   * buffers. */
  st_index_decode_args b = a, c = a;
  b.q.shape[0] = 3 * QLEN;
  b.block_table.shape[0] = 3;
  b.seq_lens.shape[0] = 3;
  b.topk_idx.shape[1] = 3 * QLEN;
  b.topk_idx.stride[0] = 3 * QLEN * TOPK;
  c.topk = 6;
  c.topk_idx.shape[2] = 6;
  c.topk_idx.stride[1] = 6;
  c.topk_idx.stride[0] = R * QLEN * 6;
  size_t ws_c = 0;
  if (st_index_decode_workspace_size(h, &c, &ws_c) != ST_OK) fail_msg("%s", st_last_error(h));
  size_t ws_bytes = 0, ws_b = 0;
  if (st_index_decode_workspace_size(h, &a, &ws_bytes) != ST_OK) fail_msg("%s", st_last_error(h));
  assert_true(ws_bytes > 0); /* the winner splits 8 ways: block keys in the workspace */
  if (st_index_decode_workspace_size(h, &b, &ws_b) != ST_OK) fail_msg("%s", st_last_error(h));
  if (ws_b > ws_bytes) ws_bytes = ws_b;
  if (ws_c > ws_bytes) ws_bytes = ws_c;
  assert_int_equal(cu->cuMemAlloc(&ws, ws_bytes), CUDA_SUCCESS);
  assert_int_equal(st_workspace_clear(h, (void *)(uintptr_t)ws, ws_bytes, stream), ST_OK);
  assert_int_equal(st_index_decode_prepare(h, &a), ST_OK);

  /* Capture once; the seq_lens buffer is read by the kernels at replay time. */
  CUgraph graph;
  CUgraphExec exec;
  assert_int_equal(cu->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  st_status s = st_index_decode(h, &a, (void *)(uintptr_t)ws, ws_bytes, stream);
  assert_int_equal(cu->cuStreamEndCapture(stream, &graph), CUDA_SUCCESS);
  if (s != ST_OK) fail_msg("captured launch: %s", st_last_error(h));
  if (!strstr(st_last_variant(h), g_winner_id))
    fail_msg("dispatched '%s', expected the recorded winner %s", st_last_variant(h), g_winner_id);
  assert_int_equal(cu->cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);

  static const int32_t rounds[3][R] = {{300, 0, CTX, 129}, {CTX, 5000, 1, 0}, {4133, 4133, 128, 7000}};
  st_ref_index_decode in = reference_of(&ss, seq);
  for (int round = 0; round < 3; round++) {
    memcpy(seq, rounds[round], sizeof ss.seq);
    assert_int_equal(cu->cuMemcpyHtoD(dseq, seq, sizeof ss.seq), CUDA_SUCCESS);
    assert_int_equal(cu->cuMemsetD32Async(dout, 0x7fff0000u, sizeof out / 4, stream), CUDA_SUCCESS);
    for (int rep = 0; rep < 2; rep++) assert_int_equal(cu->cuGraphLaunch(exec, stream), CUDA_SUCCESS);
    assert_int_equal(cu->cuStreamSynchronize(stream), CUDA_SUCCESS);
    assert_int_equal(cu->cuMemcpyDtoH(out, dout, sizeof out), CUDA_SUCCESS);
    char what[64];
    snprintf(what, sizeof what, "graph replay %d", round);
    check(&in, out, what);
  }

  if (st_index_decode(h, &b, (void *)(uintptr_t)ws, ws_bytes, stream) != ST_OK)
    fail_msg("batch 3 dispatch: %s", st_last_error(h));
  assert_int_equal(cu->cuStreamSynchronize(stream), CUDA_SUCCESS);
  if (strstr(st_last_variant(h), g_winner_id))
    fail_msg("batch 3 dispatched batch 4's winner %s, expected the built-in choice", g_winner_id);
  int32_t out3[H * 3 * QLEN * TOPK];
  assert_int_equal(cu->cuMemcpyDtoH(out3, dout, sizeof out3), CUDA_SUCCESS);
  in.R = 3;
  check(&in, out3, "built-in choice at batch 3");

  if (st_index_decode(h, &c, (void *)(uintptr_t)ws, ws_bytes, stream) != ST_OK)
    fail_msg("topk 6 dispatch: %s", st_last_error(h));
  assert_int_equal(cu->cuStreamSynchronize(stream), CUDA_SUCCESS);
  if (strstr(st_last_variant(h), g_winner_id))
    fail_msg("topk 6 dispatched topk 8's winner %s, expected the built-in choice", g_winner_id);
  int32_t out6[H * R * QLEN * 6];
  assert_int_equal(cu->cuMemcpyDtoH(out6, dout, sizeof out6), CUDA_SUCCESS);
  in.R = R;
  in.topk = 6;
  check(&in, out6, "built-in choice at topk 6");

  cu->cuGraphExecDestroy(exec);
  cu->cuGraphDestroy(graph);
  cu->cuMemFree(ws);
  fixture_close(&ss);
}

/* Two launches in one graph, the second with pdl = 1 and as its seq_lens the
 * first R ids the first wrote (head 0, request 0's first token: its block
 * ids, small lengths of 0 to 63 tokens). Its CTAs may be placed as the
 * first launch's CTAs exit, before its last CTA (the one that selects) has,
 * so a read of seq_lens before griddepcontrol.wait would see the poison:
 * lengths past the context, many blocks selected where the reference has
 * one. The
 * two share one workspace, whose counters the second may touch only after
 * the first is done with them. */
static void test_pdl_launch_reads_what_the_launch_before_wrote(void **state) {
  (void)state;
  fixture ss;
  fixture_open(&ss);
  const st_cu *cu = ss.cu;
  CUdeviceptr dout2 = 0, ws = 0;
  assert_int_equal(cu->cuMemAlloc(&dout2, OUT_ELEMS * 4), CUDA_SUCCESS);
  st_index_decode_args a1 = ss.a, a2 = ss.a;
  a2.pdl = 1;
  a2.seq_lens.data = (void *)(uintptr_t)ss.dout;
  a2.topk_idx.data = (void *)(uintptr_t)dout2;
  size_t ws_bytes = 0;
  if (st_index_decode_workspace_size(ss.h, &a1, &ws_bytes) != ST_OK) fail_msg("%s", st_last_error(ss.h));
  assert_int_equal(cu->cuMemAlloc(&ws, ws_bytes), CUDA_SUCCESS);
  assert_int_equal(st_workspace_clear(ss.h, (void *)(uintptr_t)ws, ws_bytes, ss.stream), ST_OK);
  assert_int_equal(st_index_decode_prepare(ss.h, &a1), ST_OK);

  CUgraph graph;
  CUgraphExec exec;
  assert_int_equal(cu->cuStreamBeginCapture(ss.stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  st_status s = st_index_decode(ss.h, &a1, (void *)(uintptr_t)ws, ws_bytes, ss.stream);
  if (s == ST_OK) s = st_index_decode(ss.h, &a2, (void *)(uintptr_t)ws, ws_bytes, ss.stream);
  assert_int_equal(cu->cuStreamEndCapture(ss.stream, &graph), CUDA_SUCCESS);
  if (s != ST_OK) fail_msg("captured launches: %s", st_last_error(ss.h));
  assert_int_equal(cu->cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);

  /* Request 0 at the full context: its first token's 8 ids are distinct
   * blocks of 64, so no -1 reaches the second launch's lengths. */
  static const int32_t rounds[3][R] = {{CTX, 300, 0, 4133}, {CTX, CTX, 129, 1}, {CTX, 0, 7000, 128}};
  int32_t out[OUT_ELEMS], out2[OUT_ELEMS], seq2[R];
  for (int round = 0; round < 3; round++) {
    memcpy(ss.seq, rounds[round], sizeof ss.seq);
    assert_int_equal(cu->cuMemcpyHtoD(ss.dseq, ss.seq, sizeof ss.seq), CUDA_SUCCESS);
    assert_int_equal(cu->cuMemsetD32Async(ss.dout, 0x7fff0000u, OUT_ELEMS, ss.stream), CUDA_SUCCESS);
    assert_int_equal(cu->cuMemsetD32Async(dout2, 0x7fff0000u, OUT_ELEMS, ss.stream), CUDA_SUCCESS);
    assert_int_equal(cu->cuGraphLaunch(exec, ss.stream), CUDA_SUCCESS);
    assert_int_equal(cu->cuStreamSynchronize(ss.stream), CUDA_SUCCESS);
    assert_int_equal(cu->cuMemcpyDtoH(out, ss.dout, sizeof out), CUDA_SUCCESS);
    assert_int_equal(cu->cuMemcpyDtoH(out2, dout2, sizeof out2), CUDA_SUCCESS);
    char what[64];
    snprintf(what, sizeof what, "first launch, replay %d", round);
    const st_ref_index_decode in = reference_of(&ss, ss.seq);
    check(&in, out, what);
    memcpy(seq2, out, sizeof seq2);
    for (int r = 0; r < R; r++) assert_in_range(seq2[r], 0, MB - 1);
    snprintf(what, sizeof what, "pdl launch on its output, replay %d", round);
    const st_ref_index_decode in2 = reference_of(&ss, seq2);
    check(&in2, out2, what);
  }
  cu->cuGraphExecDestroy(exec);
  cu->cuGraphDestroy(graph);
  cu->cuMemFree(dout2);
  cu->cuMemFree(ws);
  fixture_close(&ss);
}

/* The winner's binary swapped for one compiled from its source without the
 * params gate (templates/common/params_gate.cuh), as a database tuned by a
 * version whose kernels took another argument block holds: the runtime must
 * pass it over for the built-in choice, not launch it, and give the right
 * answer. Changes the database, so it runs last. */
static void test_winner_without_the_params_gate_is_passed_over(void **state) {
  (void)state;
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open(g_db, &db), SQLITE_OK);
  sqlite3_stmt *q = NULL;
  assert_int_equal(sqlite3_prepare_v2(db,
                                      "SELECT s.hash, s.text FROM variants v JOIN sources s ON s.hash = v.source_hash "
                                      "WHERE v.id = ?1",
                                      -1, &q, NULL),
                   SQLITE_OK);
  sqlite3_bind_text(q, 1, g_winner_id, -1, SQLITE_STATIC);
  assert_int_equal(sqlite3_step(q), SQLITE_ROW);
  char hash[64];
  snprintf(hash, sizeof hash, "%s", (const char *)sqlite3_column_text(q, 0));
  char *text = strdup((const char *)sqlite3_column_text(q, 1));
  sqlite3_finalize(q);
  static const char gate[] = "ST_PARAMS_GATE(st_index_decode_params)";
  char *at = text ? strstr(text, gate) : NULL;
  if (!at) {
    free(text);
    fail_msg("the winner's source has no line %s", gate);
    return;
  }
  memset(at, ' ', sizeof gate - 1);

  st_err err = {{0}};
  const st_nvrtc *nvrtc = NULL;
  assert_int_equal(st_nvrtc_load(&nvrtc, &err), ST_OK);
  void *cubin = NULL;
  size_t size = 0;
  if (st_nvrtc_compile(nvrtc, text, "ungated", "sm_90a", &cubin, &size, &err) != ST_OK) fail_msg("%s", err.msg);
  assert_int_equal(sqlite3_prepare_v2(db, "UPDATE binaries SET cubin = ?1 WHERE source_hash = ?2", -1, &q, NULL),
                   SQLITE_OK);
  sqlite3_bind_blob(q, 1, cubin, (int)size, SQLITE_STATIC);
  sqlite3_bind_text(q, 2, hash, -1, SQLITE_STATIC);
  assert_int_equal(sqlite3_step(q), SQLITE_DONE);
  assert_int_equal(sqlite3_changes(db), 1);
  sqlite3_finalize(q);
  assert_int_equal(sqlite3_close(db), SQLITE_OK);
  free(cubin);
  free(text);

  fixture ss;
  fixture_open(&ss);
  const st_cu *cu = ss.cu;
  CUdeviceptr ws = 0;
  size_t ws_bytes = 0;
  if (st_index_decode_workspace_size(ss.h, &ss.a, &ws_bytes) != ST_OK) fail_msg("%s", st_last_error(ss.h));
  assert_int_equal(cu->cuMemAlloc(&ws, ws_bytes), CUDA_SUCCESS);
  assert_int_equal(st_workspace_clear(ss.h, (void *)(uintptr_t)ws, ws_bytes, ss.stream), ST_OK);
  static const int32_t lens[R] = {CTX, 4133, 1, 300};
  memcpy(ss.seq, lens, sizeof ss.seq);
  assert_int_equal(cu->cuMemcpyHtoD(ss.dseq, ss.seq, sizeof ss.seq), CUDA_SUCCESS);
  if (st_index_decode(ss.h, &ss.a, (void *)(uintptr_t)ws, ws_bytes, ss.stream) != ST_OK)
    fail_msg("dispatch past the ungated winner: %s", st_last_error(ss.h));
  assert_int_equal(cu->cuStreamSynchronize(ss.stream), CUDA_SUCCESS);
  printf("# dispatched %s\n", st_last_variant(ss.h));
  if (strstr(st_last_variant(ss.h), g_winner_id))
    fail_msg("launched the winner %s though its binary names no argument block", g_winner_id);
  int32_t out[OUT_ELEMS];
  assert_int_equal(cu->cuMemcpyDtoH(out, ss.dout, sizeof out), CUDA_SUCCESS);
  const st_ref_index_decode in = reference_of(&ss, ss.seq);
  check(&in, out, "the choice after the ungated winner");
  cu->cuMemFree(ws);
  fixture_close(&ss);
}

int main(void) {
  int rc = st_test_require_gpu();
  if (rc) return rc;
  g_seed = st_test_seed("runtime_gpu_e2e");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_graph_replays_follow_new_seq_lens),
      cmocka_unit_test(test_pdl_launch_reads_what_the_launch_before_wrote),
      cmocka_unit_test(test_winner_without_the_params_gate_is_passed_over), /* last: changes the database */
  };
  return cmocka_run_group_tests(tests, make_db, remove_db);
}
