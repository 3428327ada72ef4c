/* variant_matrix.c - the GPU check every op's variants go through: generate
 * the variants of the given shapes, compile them all, and run each
 * applicable (variant, shape) pair through the op's harness against the
 * double-precision reference, twice (the second run checks that the
 * workspace was left ready for a replay); defaults also through the tuner's
 * graph timing path. */
#include "variant_matrix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cold.h"
#include "compile.h"
#include "generator.h"
#include "op_harness.h"
#include "st_db_write.h"
#include "test_cuda.h"
#include "testutil.h"
#include "timing.h"

/* The test's database and its files removed, the variants freed. */
static void finish(st_db *db, const char *path, st_gen *gen, st_gen_variant *v, int nv) {
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

/* The variants whose source hash, read as a number, is a multiple of
 * `stride`: about one distinct source in `stride`, picked by hash, not by
 * position, so that the sample cannot alias with the order in which the
 * generator walks its space. Copies (sources shared, not owned) into a new
 * array. (A file-scope static_assert(HEAD_DIM == 128) in
 * sparse_attn_block.cu failed 4 of the 40 sources this samples.) */
static st_gen_variant *sample_sources(const st_gen_variant *v, int nv, int stride, int *n_out) {
  st_gen_variant *sub = malloc((size_t)(nv > 0 ? nv : 1) * sizeof *sub);
  assert_non_null(sub);
  int n = 0;
  for (int i = 0; i < nv; i++) {
    char head[9] = {0}; /* its first 32 bits (the hash has 32 hex digits) */
    memcpy(head, v[i].row.source_hash, 8);
    if (strtoul(head, NULL, 16) % (unsigned long)stride == 0) sub[n++] = v[i];
  }
  *n_out = n;
  return sub;
}

void st_test_every_variant(const char *op, const st_shape *shapes, int nshapes, uint64_t seed) {
  st_err err = {{0}};
  st_gen *gen = NULL;
  assert_int_equal(st_gen_open(NULL, NULL, &gen, &err), ST_OK);
  st_gen_variant *v = NULL;
  int nv = 0;
  if (st_gen_variants(gen, op, shapes, nshapes, &v, &nv, &err) != ST_OK) fail_msg("%s", err.msg);

  /* ST_TEST_STRIDE=N checks every Nth variant only (for compute-sanitizer,
   * which runs kernels many times slower); compiling only, the variants of
   * about one distinct source in N (sample_sources). */
  const char *stride_env = getenv("ST_TEST_STRIDE");
  const int stride = stride_env && atoi(stride_env) > 0 ? atoi(stride_env) : 1;
  const st_cu *cu = NULL;
  st_device_info dev;
  const char *compile_only = st_test_compile_only();
  st_gen_variant *all = v;
  const int nall = nv;
  if (compile_only) {
    snprintf(dev.arch, sizeof dev.arch, "%s", compile_only);
    if (stride > 1) v = sample_sources(all, nall, stride, &nv);
  } else {
    assert_int_equal(st_cu_load(&cu, &err), ST_OK);
    assert_int_equal(st_cu_device_info(cu, 0, &dev, &err), ST_OK);
  }

  char path[256];
  st_test_temp_path(path, sizeof path, ".db");
  st_db *db = NULL;
  assert_int_equal(st_db_open(path, ST_DB_READWRITE, &db, &err), ST_OK);
  assert_int_equal(st_db_begin(db, &err), ST_OK);
  for (int i = 0; i < nv; i++) {
    assert_int_equal(st_db_put_source(db, v[i].row.source_hash, op, &v[i].row.kernel, v[i].source, &err), ST_OK);
    assert_int_equal(st_db_put_variant(db, &v[i].row, &err), ST_OK);
  }
  assert_int_equal(st_db_commit(db, &err), ST_OK);
  st_compile_stats stats;
  if (st_compile_all(db, v, nv, dev.arch, 0, NULL, NULL, NULL, &stats, &err) != ST_OK) fail_msg("%s", err.msg);
  printf("# %d variants, %d distinct sources compiled for %s in %.1f s (%d failed)\n", nv, stats.total, dev.arch,
         stats.seconds, stats.failed);
  assert_int_equal(stats.failed, 0);
  if (compile_only) {
    if (v != all) free(v);
    finish(db, path, gen, all, nall);
    return;
  }

  CUdevice d;
  CUstream stream = st_test_cuda_stream(cu, &d);
  const st_op_harness *h = st_harness_find(op);
  assert_non_null(h);
  /* ST_TEST_MATCH=TEXT checks only variants whose name contains TEXT (to
   * point a sanitizer at one family, e.g. ".c16" for the cluster kernels). */
  const char *match = getenv("ST_TEST_MATCH");
  const int verbose = getenv("ST_TEST_VERBOSE") != NULL;
  const char *shape_match = getenv("ST_TEST_SHAPE"); /* shapes whose key holds it */
  CUmodule *mods = calloc((size_t)nv, sizeof *mods); // NOLINT(bugprone-sizeof-expression): handles
  int pairs = 0, failures = 0, shapes_run = 0;
  for (int s = 0; s < nshapes; s++) {
    if (shape_match && !strstr(shapes[s].key, shape_match)) continue;
    shapes_run++;
    void *kase = NULL;
    const st_case_opts co = {.seed = seed + (uint64_t)s, .threads = (int)sysconf(_SC_NPROCESSORS_ONLN)};
    if (h->case_create(cu, &dev, &shapes[s].params, &co, &kase, &err) != ST_OK)
      fail_msg("shape %s: %s", shapes[s].key, err.msg);
    st_timing_opts cold = {.warmup = 2, .reps = 3, .iters = 4}; /* its input sets: at the first default variant */
    int cold_ready = 0;
    for (int i = s % stride; i < nv; i += stride) {
      if (match && !strstr(v[i].row.name, match)) continue;
      int applies = 0;
      if (st_gen_applies(gen, &v[i].row, &shapes[s], &applies, &err) != ST_OK)
        fail_msg("%s on shape %s: %s", v[i].row.name, shapes[s].key, err.msg);
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
      if (verbose) {
        printf("# pair %s on %s\n", v[i].row.name, shapes[s].key);
        fflush(stdout); /* ahead of what a sanitizer reports for it */
      }
      st = h->verify(bound, stream, &ok, &max_err, msg, sizeof msg, &err);
      if (st != ST_OK) fail_msg("%s on %s: CUDA failed: %s", v[i].row.name, shapes[s].key, err.msg);
      if (ok && v[i].row.is_default) { /* the tuner's timing path, captured in a graph */
        const st_timing_opts to = {
            .warmup = 2, .reps = 3, .iters = 4, .flush_bytes = ST_TIMING_FLUSH_L2 * dev.l2_bytes};
        st_timing t;
        if (st_time_graph(cu, stream, h->launch, bound, &to, &t, &err) != ST_OK)
          fail_msg("timing %s on %s: %s", v[i].row.name, shapes[s].key, err.msg);
        assert_true(t.median_us > 0 && t.reps == 3);
        /* Cold-cache timing (tuner/cold.h) cycles through input sets of
         * other block tables; after it the launch must be on the case's own
         * inputs again, so the variant verifies as before. */
        if (!cold_ready && st_cold_prepare(h, kase, &dev, &cold, &err) != ST_OK)
          fail_msg("cold input sets on %s: %s", shapes[s].key, err.msg);
        cold_ready = 1;
        if (st_time_graph(cu, stream, h->launch, bound, &cold, &t, &err) != ST_OK)
          fail_msg("cold timing %s on %s: %s", v[i].row.name, shapes[s].key, err.msg);
        assert_true(t.median_us > 0 && t.reps == 3);
        assert_true(!h->cold_sets || cold.rotations >= 2);
        st = h->verify(bound, stream, &ok, &max_err, msg, sizeof msg, &err);
        if (st != ST_OK) fail_msg("%s on %s after cold timing: CUDA failed: %s", v[i].row.name, shapes[s].key, err.msg);
        if (!ok) snprintf(msg + strlen(msg), sizeof msg - strlen(msg), " (after cold timing)");
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
  printf("# verified %d (variant, shape) pairs over %d edge shapes: %d wrong\n", pairs, shapes_run, failures);
  assert_int_equal(failures, 0);
  assert_true(pairs > 0);
  free(mods);
  cu->cuStreamDestroy(stream);
  cu->cuDevicePrimaryCtxRelease(d);
  finish(db, path, gen, v, nv);
}

void st_test_varlen_shape(st_shape *s, const char *op, const char *reqs) {
  memset(s, 0, sizeof *s);
  st_err err = {{0}};
  int B = 0; /* the query tokens: q_len of each item, times its *count */
  for (const char *p = reqs; p && *p;) {
    int q = 0, count = 1;
    if (sscanf(p, "%d", &q) != 1) break;
    const char *end = strchr(p, ';'), *star = strchr(p, '*');
    if (star && (!end || star < end) && sscanf(star + 1, "%d", &count) != 1) break;
    B += q * count;
    p = end ? end + 1 : NULL;
  }
  snprintf(s->op, sizeof s->op, "%s", op);
  assert_int_equal(st_params_set(&s->params, "reqs", reqs, &err), ST_OK);
  assert_int_equal(st_params_set_int(&s->params, "B", B, &err), ST_OK);
}
