/* Every generated index_decode variant against the double-precision
 * reference over the edge cases of the op contract: sequence lengths 1, 127,
 * 128, 129, 4133 and 131072, padding rows, qlen 1 to 4, topk above the
 * visible blocks, init/local blocks that overlap on short requests, bf16 and
 * fp8, head_dim 64 and 128, 1, 2 and 4 heads. Each variant runs twice per
 * shape (the second run checks that the workspace was left ready for a
 * replay). Skips where there is no driver or GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compile.h"
#include "generator.h"
#include "op_harness.h"
#include "st_db.h"
#include "timing.h"
#include "testutil.h"

typedef struct edge {
  const char *dtype;
  int D, H, qlen, topk, init, local, ctx;
  const char *lens;
} edge;

static const edge edges[] = {
    {"bf16", 128, 2, 1, 16, 1, 2, 131072, "1;127;128;129;4133;0;131072"},
    {"fp8", 128, 2, 1, 16, 1, 2, 131072, "1;127;128;129;4133;0;131072"},
    {"bf16", 128, 4, 2, 8, 2, 2, 9000, "1;2;129;300;0;9000;4133"},
    {"fp8", 64, 2, 3, 4, 2, 2, 1024, "3;130;256;257;0;1024"},
    {"bf16", 64, 1, 4, 32, 1, 4, 9000, "3;128;4133;9000;0;1"},
    {"fp8", 128, 4, 4, 16, 4, 12, 20000, "20000;129;0;1;17000"},
    {"bf16", 128, 2, 1, 64, 8, 8, 40000, "1;8000;40000"},
    {"bf16", 128, 1, 1, 5, 0, 1, 4133, "4133;128;129"},
};

static void make_shape(const edge *e, st_shape *s) {
  memset(s, 0, sizeof *s);
  st_err err = {{0}};
  int B = 1;
  for (const char *p = e->lens; *p; p++) B += *p == ';';
  snprintf(s->op, sizeof s->op, "index_decode");
  st_params_set(&s->params, "dtype", e->dtype, &err);
  st_params_set_int(&s->params, "D", e->D, &err);
  st_params_set_int(&s->params, "H", e->H, &err);
  st_params_set_int(&s->params, "qlen", e->qlen, &err);
  st_params_set_int(&s->params, "topk", e->topk, &err);
  st_params_set_int(&s->params, "init", e->init, &err);
  st_params_set_int(&s->params, "local", e->local, &err);
  st_params_set_int(&s->params, "B", B, &err);
  st_params_set_int(&s->params, "ctx", e->ctx, &err);
  st_params_set(&s->params, "lens", e->lens, &err);
  snprintf(s->key, sizeof s->key, "edge:%s,D=%d,H=%d,qlen=%d,topk=%d,lens=%s", e->dtype, e->D, e->H, e->qlen, e->topk,
           e->lens);
}

static uint64_t g_seed;

static void test_every_variant_matches_the_reference_on_edge_cases(void **state) {
  (void)state;
  const int nshapes = (int)(sizeof edges / sizeof edges[0]);
  st_shape shapes[sizeof edges / sizeof edges[0]];
  for (int i = 0; i < nshapes; i++) make_shape(&edges[i], &shapes[i]);
  st_err err = {{0}};
  st_gen *gen = NULL;
  assert_int_equal(st_gen_open(NULL, NULL, &gen, &err), ST_OK);
  st_gen_variant *v = NULL;
  int nv = 0;
  if (st_gen_variants(gen, "index_decode", shapes, nshapes, &v, &nv, &err) != ST_OK) fail_msg("%s", err.msg);

  const st_cu *cu = NULL;
  st_device_info dev;
  assert_int_equal(st_cu_load(&cu, &err), ST_OK);
  assert_int_equal(st_cu_device_info(cu, 0, &dev, &err), ST_OK);

  char path[256];
  st_test_temp_path(path, sizeof path, ".db");
  st_db *db = NULL;
  assert_int_equal(st_db_open(path, ST_DB_READWRITE, &db, &err), ST_OK);
  assert_int_equal(st_db_begin(db, &err), ST_OK);
  for (int i = 0; i < nv; i++) {
    assert_int_equal(st_db_put_source(db, v[i].row.source_hash, "index_decode", &v[i].row.kernel, v[i].source, &err), ST_OK);
    assert_int_equal(st_db_put_variant(db, &v[i].row, &err), ST_OK);
  }
  assert_int_equal(st_db_commit(db, &err), ST_OK);
  st_compile_stats stats;
  if (st_compile_all(db, v, nv, dev.arch, 0, NULL, NULL, NULL, &stats, &err) != ST_OK) fail_msg("%s", err.msg);
  printf("# %d variants, %d distinct sources compiled for %s in %.1f s (%d failed)\n", nv, stats.total, dev.arch,
         stats.seconds, stats.failed);
  assert_int_equal(stats.failed, 0);

  CUdevice d;
  CUcontext ctx;
  CUstream stream;
  assert_int_equal(cu->cuDeviceGet(&d, 0), CUDA_SUCCESS);
  assert_int_equal(cu->cuDevicePrimaryCtxRetain(&ctx, d), CUDA_SUCCESS);
  assert_int_equal(cu->cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  assert_int_equal(cu->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  const st_op_harness *h = st_harness_find("index_decode");
  /* ST_TEST_STRIDE=N checks every Nth variant only (for compute-sanitizer,
   * which runs kernels many times slower). */
  const char *stride_env = getenv("ST_TEST_STRIDE");
  const int stride = stride_env && atoi(stride_env) > 0 ? atoi(stride_env) : 1;
  CUmodule *mods = calloc((size_t)nv, sizeof *mods);
  int pairs = 0, failures = 0;
  for (int s = 0; s < nshapes; s++) {
    void *kase = NULL;
    if (h->case_create(cu, &dev, &shapes[s].params, g_seed + (uint64_t)s, (int)sysconf(_SC_NPROCESSORS_ONLN), &kase,
                       &err) != ST_OK)
      fail_msg("shape %s: %s", shapes[s].key, err.msg);
    for (int i = s % stride; i < nv; i += stride) {
      int applies = 0;
      assert_int_equal(st_gen_applies(gen, &v[i].row, &shapes[s], &applies, &err), ST_OK);
      if (!applies) continue;
      if (!mods[i]) {
        for (int j = 0; j < i && !mods[i]; j++)
          if (mods[j] && !strcmp(v[j].row.source_hash, v[i].row.source_hash)) mods[i] = mods[j];
        if (!mods[i]) {
          st_binary_row bin;
          int found = 0;
          assert_int_equal(st_db_get_binary(db, v[i].row.source_hash, dev.arch, NULL, &bin, &found, &err), ST_OK);
          assert_true(found && bin.ok);
          assert_int_equal(cu->cuModuleLoadData(&mods[i], bin.cubin), CUDA_SUCCESS);
          st_db_binary_free(&bin);
        }
      }
      void *bound = NULL;
      st_status st = h->bind(kase, &v[i].row.kernel, &v[i].row.launch, mods[i], &bound, &err);
      if (st == ST_ERR_UNSUPPORTED) continue; /* a plan this max_context cannot hold (shared memory) */
      if (st != ST_OK) fail_msg("bind %s on %s: %s", v[i].row.name, shapes[s].key, err.msg);
      int ok = 0;
      double max_err = 0;
      char msg[512] = "";
      st = h->verify(bound, stream, &ok, &max_err, msg, sizeof msg, &err);
      if (st != ST_OK) fail_msg("%s on %s: CUDA failed: %s", v[i].row.name, shapes[s].key, err.msg);
      if (ok && v[i].row.is_default) { /* the tuner's timing path, captured in a graph */
        const st_timing_opts to = {.warmup = 2, .reps = 3, .iters = 4};
        st_timing t;
        if (st_time_graph(cu, stream, h->launch, bound, &to, &t, &err) != ST_OK)
          fail_msg("timing %s on %s: %s", v[i].row.name, shapes[s].key, err.msg);
        assert_true(t.median_us > 0 && t.reps == 3);
      }
      h->unbind(bound);
      pairs++;
      if (!ok) {
        if (failures < 20) printf("WRONG %s on %s: %s\n", v[i].row.name, shapes[s].key, msg);
        failures++;
      }
    }
    h->case_destroy(kase);
  }
  printf("# verified %d (variant, shape) pairs over %d edge shapes: %d wrong\n", pairs, nshapes, failures);
  assert_int_equal(failures, 0);
  assert_true(pairs > 0);
  free(mods);
  cu->cuStreamDestroy(stream);
  cu->cuDevicePrimaryCtxRelease(d);
  st_db_close(db);
  unlink(path);
  char side[300];
  snprintf(side, sizeof side, "%s-wal", path);
  unlink(side);
  snprintf(side, sizeof side, "%s-shm", path);
  unlink(side);
  st_gen_free_variants(v, nv);
  st_gen_close(gen);
}

int main(void) {
  int rc = st_test_require_gpu();
  if (rc) return rc;
  g_seed = st_test_seed("index_decode_gpu");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_variant_matches_the_reference_on_edge_cases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
