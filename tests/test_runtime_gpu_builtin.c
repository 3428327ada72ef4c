/* test_runtime_gpu_builtin.c - libsparsetune with no database: every op of
 * the smoke suite runs its built-in variant, compiled at first use, and its
 * result matches the double-precision reference; a second handle loads the
 * binaries from the disk cache (no new file); a launch that would need a
 * compile inside a graph capture is refused, names the prepare call, and
 * leaves the capture usable; prepare then compiles. Skips where there is no
 * driver or GPU. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_case.h"
#include "generator.h"
#include "handle.h"
#include "test_cuda.h"
#include "testutil.h"

static char g_cache[256];

static int count_files(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += strstr(e->d_name, ".cubin") != NULL;
  closedir(d);
  return n;
}

/* Every smoke shape through a handle with no database; returns the cache
 * files afterwards. */
static int run_smoke(const st_cu *cu, const st_device_info *dev, CUstream stream, uint64_t seed) {
  st_handle *h = NULL;
  if (st_open(NULL, 0, &h) != ST_OK) fail_msg("st_open(NULL): %s", st_last_error(NULL));
  st_gen *gen = NULL;
  st_shape *shapes = NULL;
  int n = 0;
  st_err err = {{0}};
  assert_int_equal(st_gen_open(NULL, NULL, &gen, &err), ST_OK);
  assert_int_equal(st_gen_suite(gen, "smoke", NULL, &shapes, &n, &err), ST_OK);
  assert_true(n >= ST_OP_COUNT);
  const st_case_opts o = {.seed = seed, .threads = 4};
  for (int i = 0; i < n; i++) {
    const st_op_harness *oh = st_harness_find(shapes[i].op);
    assert_non_null(oh);
    st_bench_case bc = {0};
    int ok = 0;
    char why[512] = "";
    if (st_bench_case_make(oh, cu, dev, &shapes[i].params, &o, h, stream, &bc, &ok, why, sizeof why, &err) != ST_OK)
      fail_msg("%s: %s", shapes[i].key, err.msg);
    if (!ok) fail_msg("%s with built-in %s: %s", shapes[i].key, st_last_variant(h), why);
    printf("# %-70.70s %s\n", shapes[i].key, st_last_variant(h));
    st_bench_case_free(&bc);
  }
  free(shapes);
  st_gen_close(gen);
  st_close(h);
  return count_files(g_cache);
}

static void every_op_runs_without_a_database(void **state) {
  (void)state;
  const st_cu *cu = NULL;
  st_err err = {{0}};
  assert_int_equal(st_cu_load(&cu, &err), ST_OK);
  st_device_info dev;
  assert_int_equal(st_cu_device_info(cu, 0, &dev, &err), ST_OK);
  CUdevice d;
  CUstream stream = st_test_cuda_stream(cu, &d);
  const uint64_t seed = st_test_seed("test_runtime_gpu_builtin");
  const int first = run_smoke(cu, &dev, stream, seed);
  printf("# %d binaries compiled into the disk cache\n", first);
  assert_true(first > 0);
  const int second = run_smoke(cu, &dev, stream, seed); /* from the disk cache */
  assert_int_equal(second, first);
  cu->cuStreamDestroy(stream);
  cu->cuDevicePrimaryCtxRelease(d);
}

static void no_compile_inside_a_capture(void **state) {
  (void)state;
  setenv("SPARSETUNE_CACHE_DIR", "off", 1); /* nothing compiled yet, whatever ran before */
  st_handle *h = NULL;
  if (st_open(NULL, 0, &h) != ST_OK) fail_msg("st_open(NULL): %s", st_last_error(NULL));
  const st_cu *cu = h->cu;
  assert_int_equal(cu->cuCtxSetCurrent(h->ctx), CUDA_SUCCESS);
  CUstream stream;
  assert_int_equal(cu->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUdeviceptr mem;
  assert_int_equal(cu->cuMemAlloc(&mem, 64 << 20), CUDA_SUCCESS);
  char *base = (char *)(uintptr_t)mem;
  const int R = 2, H = 2, D = 64, MB = 8;
  st_index_decode_args a;
  st_index_decode_args_init(&a);
  a.q = st_test_tensor(ST_DTYPE_BF16, 3, (int64_t[]){R, H, D}, base);
  a.k_cache = st_test_tensor(ST_DTYPE_BF16, 3, (int64_t[]){16, 128, D}, base + (1 << 20));
  a.block_table = st_test_tensor(ST_DTYPE_INT32, 2, (int64_t[]){R, MB}, base + (2 << 20));
  a.seq_lens = st_test_tensor(ST_DTYPE_INT32, 1, (int64_t[]){R}, base + (3 << 20));
  a.topk_idx = st_test_tensor(ST_DTYPE_INT32, 3, (int64_t[]){H, R, 8}, base + (4 << 20));
  a.qlen = 1;
  a.topk = 8;
  a.init_blocks = 1;
  a.local_blocks = 1;
  a.max_context = MB * 128;
  void *ws = base + (8 << 20);
  assert_int_equal(cu->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  const st_status st = st_index_decode(h, &a, ws, 32 << 20, stream);
  CUgraph graph = NULL;
  assert_int_equal(cu->cuStreamEndCapture(stream, &graph), CUDA_SUCCESS); /* the capture was not broken */
  if (graph) cu->cuGraphDestroy(graph);
  printf("# inside a capture: %s\n", st_last_error(h));
  assert_int_equal(st, ST_ERR_NO_VARIANT);
  assert_non_null(strstr(st_last_error(h), "st_index_decode_prepare"));
  if (st_index_decode_prepare(h, &a) != ST_OK) fail_msg("prepare: %s", st_last_error(h));
  size_t bytes = 0;
  assert_int_equal(st_index_decode_workspace_size(h, &a, &bytes), ST_OK);
  assert_true(bytes <= (32u << 20));
  /* Compiled now: the same call captures. */
  assert_int_equal(cu->cuMemsetD8Async(mem, 0, 64 << 20, stream), CUDA_SUCCESS);
  assert_int_equal(cu->cuStreamSynchronize(stream), CUDA_SUCCESS);
  assert_int_equal(cu->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  const st_status again = st_index_decode(h, &a, ws, 32 << 20, stream);
  assert_int_equal(cu->cuStreamEndCapture(stream, &graph), CUDA_SUCCESS);
  if (again != ST_OK) fail_msg("after prepare, inside a capture: %s", st_last_error(h));
  assert_non_null(graph);
  cu->cuGraphDestroy(graph);
  cu->cuMemFree(mem);
  cu->cuStreamDestroy(stream);
  st_close(h);
}

int main(void) {
  int skip = st_test_require_gpu();
  if (skip) return skip;
  snprintf(g_cache, sizeof g_cache, "/tmp/st_builtin_cache_XXXXXX");
  if (!mkdtemp(g_cache)) return 1;
  setenv("SPARSETUNE_CACHE_DIR", g_cache, 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_op_runs_without_a_database),
      cmocka_unit_test(no_compile_inside_a_capture),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_cache);
  if (system(cmd) != 0) rc = rc ? rc : 1;
  return rc;
}
