/* st_verify_twice (tuner/verify_twice.h) without a GPU: a fake driver table
 * whose "device" pointers are host memory and whose graphs record the
 * launches captured into them, so the helper's poisoning, its second launch
 * as a graph replay and its verdicts are checked on any machine. */
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "verify_twice.h"

#define N 6

/* The fake driver's state: whether the stream is capturing, the launch
 * captured (one node), how many graphs were launched, and the first value
 * each memset wrote in the latest poisoning. */
static struct {
  int capturing;
  st_launch_fn captured;
  void *captured_ctx;
  int graph_launches;
  uint32_t poisoned[2];
  int memsets;
} g_drv;

static CUresult fake_memset_d16(CUdeviceptr d, unsigned short v, size_t n, CUstream s) {
  (void)s;
  uint16_t *p = (uint16_t *)(uintptr_t)d;
  for (size_t i = 0; i < n; i++) p[i] = v;
  g_drv.poisoned[g_drv.memsets++ % 2] = v;
  return CUDA_SUCCESS;
}

static CUresult fake_memset_d32(CUdeviceptr d, unsigned int v, size_t n, CUstream s) {
  (void)s;
  uint32_t *p = (uint32_t *)(uintptr_t)d;
  for (size_t i = 0; i < n; i++) p[i] = v;
  g_drv.poisoned[g_drv.memsets++ % 2] = v;
  return CUDA_SUCCESS;
}

static CUresult fake_copy(void *dst, CUdeviceptr src, size_t bytes) {
  memcpy(dst, (const void *)(uintptr_t)src, bytes);
  return CUDA_SUCCESS;
}

static CUresult fake_sync(CUstream s) {
  (void)s;
  return CUDA_SUCCESS;
}

static CUresult fake_begin_capture(CUstream s, CUstreamCaptureMode mode) {
  (void)s;
  (void)mode;
  g_drv.capturing = 1;
  g_drv.captured = NULL;
  return CUDA_SUCCESS;
}

static CUresult fake_end_capture(CUstream s, CUgraph *graph) {
  (void)s;
  g_drv.capturing = 0;
  *graph = (CUgraph)(uintptr_t)1;
  return CUDA_SUCCESS;
}

static CUresult fake_instantiate(CUgraphExec *exec, CUgraph graph, unsigned long long flags) {
  (void)graph;
  (void)flags;
  *exec = (CUgraphExec)(uintptr_t)1;
  return CUDA_SUCCESS;
}

static CUresult fake_graph_launch(CUgraphExec exec, CUstream s) {
  (void)exec;
  g_drv.graph_launches++;
  if (g_drv.captured) g_drv.captured(g_drv.captured_ctx, s, NULL);
  return CUDA_SUCCESS;
}

static CUresult fake_exec_destroy(CUgraphExec exec) {
  (void)exec;
  return CUDA_SUCCESS;
}

static CUresult fake_graph_destroy(CUgraph graph) {
  (void)graph;
  return CUDA_SUCCESS;
}

static st_cu fake_driver(void) {
  st_cu cu;
  memset(&cu, 0, sizeof cu);
  cu.cuMemsetD16Async = fake_memset_d16;
  cu.cuMemsetD32Async = fake_memset_d32;
  cu.cuMemcpyDtoH = fake_copy;
  cu.cuStreamSynchronize = fake_sync;
  cu.cuStreamBeginCapture = fake_begin_capture;
  cu.cuStreamEndCapture = fake_end_capture;
  cu.cuGraphInstantiateWithFlags = fake_instantiate;
  cu.cuGraphLaunch = fake_graph_launch;
  cu.cuGraphExecDestroy = fake_exec_destroy;
  cu.cuGraphDestroy = fake_graph_destroy;
  return cu;
}

/* A variant with two outputs, o (16-bit) and lse (32-bit): it writes
 * `want` into them, except that `wrong_items` of o are left as they were,
 * and under capture it records itself unless `lost_in_graph`. */
typedef struct variant {
  uint16_t dev_o[N], host_o[N];
  uint32_t dev_lse[N], host_lse[N];
  int wrong_items, lost_in_graph, launches;
} variant;

static st_status variant_launch(void *ctx, CUstream s, st_err *err) {
  (void)s;
  (void)err;
  variant *v = ctx;
  if (g_drv.capturing) {
    if (!v->lost_in_graph) {
      g_drv.captured = variant_launch;
      g_drv.captured_ctx = v;
    }
    return ST_OK;
  }
  v->launches++;
  for (int i = v->wrong_items; i < N; i++) v->dev_o[i] = (uint16_t)(100 + i);
  for (int i = 0; i < N; i++) v->dev_lse[i] = 200u + (uint32_t)i;
  return ST_OK;
}

/* The reference: o[i] = 100 + i, lse[i] = 200 + i. */
static int variant_check(void *ctx, double *worst, char *why, size_t cap) {
  const variant *v = ctx;
  int bad = 0;
  *worst = 0;
  for (int i = 0; i < N; i++) {
    const int wrong = v->host_o[i] != 100 + i || v->host_lse[i] != 200u + (uint32_t)i;
    if (wrong && !bad++) snprintf(why, cap, "item %d: o %u", i, (unsigned)v->host_o[i]);
    if (wrong) *worst = 1;
  }
  return bad;
}

static st_verify_out outputs(variant *v) {
  const st_verify_out out = {.buf = {{(CUdeviceptr)(uintptr_t)v->dev_o, v->host_o, N, 2, 0x7fc0u},
                                     {(CUdeviceptr)(uintptr_t)v->dev_lse, v->host_lse, N, 4, 0x7fc00000u}},
                             .check = variant_check,
                             .ctx = v,
                             .item = "row"};
  return out;
}

/* What st_verify_twice said of a variant. */
typedef struct verdict {
  st_status status;
  int ok;
  double max_err;
  char msg[256];
} verdict;

/* st_verify_twice of `v` on the fake driver; with_lse 0: lse is no device
 * output (the check then sees what its host copy already holds). */
static verdict verify(variant *v, int with_lse) {
  const st_cu cu = fake_driver();
  st_verify_out out = outputs(v);
  if (!with_lse) out.buf[1].d = 0;
  st_err err = {{0}};
  verdict r = {.ok = -1, .max_err = -1};
  memset(&g_drv, 0, sizeof g_drv);
  r.status = st_verify_twice(&cu, NULL, variant_launch, v, &out, &r.ok, &r.max_err, r.msg, sizeof r.msg, &err);
  return r;
}

static void test_a_right_variant_passes_a_launch_and_a_graph_replay(void **state) {
  (void)state;
  variant v = {0};
  const verdict r = verify(&v, 1);
  assert_int_equal(r.status, ST_OK);
  assert_int_equal(r.ok, 1);
  assert_true(r.max_err == 0);
  assert_int_equal(v.launches, 2);              /* the plain launch and the replayed node */
  assert_int_equal(g_drv.graph_launches, 1);    /* the second launch went through a graph */
  assert_int_equal(g_drv.poisoned[0], 0x7fc1u); /* the second poisoning differs from the first */
  assert_int_equal(g_drv.poisoned[1], 0x7fc00001u);
}

static void test_unwritten_items_fail_on_the_first_launch(void **state) {
  (void)state;
  variant v = {.wrong_items = 3};
  const verdict r = verify(&v, 1);
  assert_int_equal(r.status, ST_OK);
  assert_int_equal(r.ok, 0);
  assert_true(r.max_err == 1);
  assert_int_equal(v.launches, 1);                                    /* no replay once the first launch is wrong */
  assert_string_equal(r.msg, "3 wrong rows; first: item 0: o 32704"); /* 0x7fc0: the poison, unwritten */
}

static void test_a_variant_right_launched_but_not_replayed_fails(void **state) {
  (void)state;
  variant v = {.lost_in_graph = 1};
  const verdict r = verify(&v, 1);
  assert_int_equal(r.status, ST_OK);
  assert_int_equal(r.ok, 0);
  assert_int_equal(g_drv.graph_launches, 1);
  assert_non_null(strstr(r.msg, "on the second launch (a CUDA graph replay"));
  assert_non_null(strstr(r.msg, "6 wrong rows; first: item 0: o 32705")); /* the second poison, 0x7fc1 */
}

static void test_an_absent_output_is_neither_poisoned_nor_read(void **state) {
  (void)state;
  variant v = {0};
  for (int i = 0; i < N; i++) v.host_lse[i] = 200u + (uint32_t)i;
  const verdict r = verify(&v, 0);
  assert_int_equal(r.status, ST_OK);
  assert_int_equal(r.ok, 1);
  assert_int_equal(g_drv.memsets, 2); /* o only, once a launch */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_right_variant_passes_a_launch_and_a_graph_replay),
      cmocka_unit_test(test_unwritten_items_fail_on_the_first_launch),
      cmocka_unit_test(test_a_variant_right_launched_but_not_replayed_fails),
      cmocka_unit_test(test_an_absent_output_is_neither_poisoned_nor_read),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
