/* test_compile.c - NVRTC compiles (tuner/compile.c): cubins and the ptxas
 * report, compile errors kept as results, architecture checks, and the
 * parallel compile into a database that never compiles a source twice. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compile.h"
#include "st_db_write.h"
#include "testutil.h"

#define ARCH "sm_90a"

/* Shared memory, a loop, and one fp8 (e4m3) mma.sync, which needs sm_89+.
 * %d makes each rendering a distinct source. */
static const char *valid_fmt =
    "struct st_args { const float *in; float *out; int n; };\n"
    "constexpr int kThreads = 128;\n"
    "extern \"C\" __global__ void __launch_bounds__(kThreads) st_kernel(st_args a) {\n"
    "  __shared__ float tile[kThreads * 2];\n"
    "  tile[threadIdx.x] = a.in[threadIdx.x] * %d.0f;\n"
    "  __syncthreads();\n"
    "  float acc = 0.f;\n"
    "  for (int i = 0; i < a.n; i++) acc += tile[(threadIdx.x + i) %% kThreads];\n"
    "  unsigned x0 = __float_as_uint(acc), x1 = x0 ^ 1u, x2 = x0 ^ 2u, x3 = x0 ^ 3u;\n"
    "  float c0 = 0.f, c1 = 0.f, c2 = 0.f, c3 = 0.f;\n"
    "  asm volatile(\"mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%%0,%%1,%%2,%%3}, \"\n"
    "               \"{%%4,%%5,%%6,%%7}, {%%8,%%9}, {%%0,%%1,%%2,%%3};\"\n"
    "               : \"+f\"(c0), \"+f\"(c1), \"+f\"(c2), \"+f\"(c3)\n"
    "               : \"r\"(x0), \"r\"(x1), \"r\"(x2), \"r\"(x3), \"r\"(x0), \"r\"(x1));\n"
    "  a.out[blockIdx.x * kThreads + threadIdx.x] = acc + c0 + c1 + c2 + c3;\n"
    "}\n";

static const char *invalid_source =
    "extern \"C\" __global__ void st_kernel(float *out) {\n"
    "  out[threadIdx.x] = st_undeclared_thing;\n"
    "}\n";

/* Sixteen live float4 under a 24-register cap: ptxas must spill. */
static const char *spill_source =
    "extern \"C\" __global__ void __maxnreg__(24) st_kernel(const float4 *in, float4 *out) {\n"
    "  float4 v[16];\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < 16; i++) v[i] = in[threadIdx.x + i * 128];\n"
    "  float4 s = v[0];\n"
    "#pragma unroll\n"
    "  for (int j = 0; j < 16; j++) {\n"
    "    s.x += v[j].y * v[15 - j].x; s.y += v[j].z; s.z += v[j].w * s.x; s.w += v[j].x;\n"
    "  }\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < 16; i++)\n"
    "    out[threadIdx.x + i * 128] = make_float4(v[i].x + s.x, v[i].y * s.y, v[i].z - s.z, v[i].w + s.w);\n"
    "}\n";

/* 320000 bytes of static shared memory: the front end accepts it, ptxas not. */
static const char *too_much_smem_source =
    "extern \"C\" __global__ void st_kernel(float *out) {\n"
    "  __shared__ float big[80000];\n"
    "  big[threadIdx.x] = out[0];\n"
    "  __syncthreads();\n"
    "  out[0] = big[threadIdx.x ^ 1];\n"
    "}\n";

static char *render_valid(int k) {
  const int len = snprintf(NULL, 0, valid_fmt, k);
  char *s = malloc((size_t)len + 1);
  assert_non_null(s);
  snprintf(s, (size_t)len + 1, valid_fmt, k);
  return s;
}

static void compile_one_valid_kernel_yields_cubin_and_resource_report(void **state) {
  (void)state;
  char *src = render_valid(1);
  st_compiled c;
  st_err err = {{0}};
  assert_int_equal(st_compile_one(src, "valid.cu", ARCH, &c, &err), ST_OK);
  printf("# valid kernel: %.1f ms, %d registers, %d smem bytes, %zu cubin bytes\n", c.bin.compile_ms, c.bin.registers,
         c.bin.shared_bytes, c.bin.cubin_size);
  assert_int_equal(c.bin.ok, 1);
  assert_non_null(c.bin.cubin);
  assert_true(c.bin.cubin_size > 4);
  assert_memory_equal(c.bin.cubin, "\177ELF", 4);
  assert_true(c.bin.registers > 0);
  assert_true(c.bin.shared_bytes >= 128 * 2 * 4);
  assert_int_equal(c.bin.spill_bytes, 0);
  assert_true(c.bin.compile_ms > 0);
  assert_string_equal(c.bin.arch, ARCH);
  assert_int_equal(strncmp(c.bin.compiler, "NVRTC ", 6), 0);
  assert_non_null(c.bin.log);
  assert_non_null(strstr(c.bin.log, "st_kernel")); /* ptxas -v names the entry function */
  st_compiled_free(&c);
  assert_null(c.bin.cubin);
  free(src);
}

static void compile_one_reports_spills_and_stack_frame(void **state) {
  (void)state;
  st_compiled c;
  st_err err = {{0}};
  assert_int_equal(st_compile_one(spill_source, "spill.cu", ARCH, &c, &err), ST_OK);
  assert_int_equal(c.bin.ok, 1);
  assert_in_range(c.bin.registers, 1, 24);
  assert_true(c.bin.spill_bytes > 0);
  assert_true(c.bin.local_bytes > 0);
  st_compiled_free(&c);
}

static void compile_one_ptxas_error_keeps_its_message(void **state) {
  (void)state;
  st_compiled c;
  st_err err = {{0}};
  assert_int_equal(st_compile_one(too_much_smem_source, "big.cu", ARCH, &c, &err), ST_OK);
  assert_int_equal(c.bin.ok, 0);
  assert_null(c.bin.cubin);
  assert_non_null(strstr(c.bin.log, "too much shared data"));
  assert_int_equal(c.bin.shared_bytes, 320000); /* the report is kept too */
  st_compiled_free(&c);
}

static void compile_one_invalid_source_is_a_result_with_its_log(void **state) {
  (void)state;
  st_compiled c;
  st_err err = {{0}};
  assert_int_equal(st_compile_one(invalid_source, "broken.cu", ARCH, &c, &err), ST_OK);
  assert_int_equal(c.bin.ok, 0);
  assert_null(c.bin.cubin);
  assert_int_equal(c.bin.cubin_size, 0);
  assert_non_null(c.bin.log);
  assert_non_null(strstr(c.bin.log, "error"));
  assert_non_null(strstr(c.bin.log, "st_undeclared_thing"));
  assert_non_null(strstr(c.bin.log, "broken.cu"));
  st_compiled_free(&c);
}

static void compile_one_refuses_bad_arch_with_a_message(void **state) {
  (void)state;
  const char *bad[] = {"sm90", "compute_90", "sm_9", "sm_", "", "sm_90b", "sm_9000", "SM_90", "sm_90a "};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    st_compiled c;
    st_err err = {{0}};
    assert_int_equal(st_compile_one(spill_source, "k.cu", bad[i], &c, &err), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "arch="));
    assert_null(c.bin.cubin);
    assert_null(c.bin.log);
  }
  st_err err = {{0}};
  /* Well formed, but not a target of this NVRTC. */
  assert_int_equal(st_compile_check_arch("sm_35", &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "not supported"));
  assert_int_equal(st_compile_check_arch(NULL, &err), ST_ERR_INVALID_ARG);
  assert_int_equal(st_compile_check_arch("sm_89", &err), ST_OK);
  assert_int_equal(st_compile_check_arch("sm_90a", &err), ST_OK);
  /* sm_80 exists, an arch-specific sm_80a or a family sm_90f does not. */
  assert_int_equal(st_compile_check_arch("sm_80a", &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "sm_80a"));
  assert_int_equal(st_compile_check_arch("sm_90f", &err), ST_ERR_INVALID_ARG);
}

static void compile_one_refuses_null_arguments(void **state) {
  (void)state;
  st_compiled c;
  st_err err = {{0}};
  assert_int_equal(st_compile_one(NULL, "k.cu", ARCH, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "source"));
  assert_int_equal(st_compile_one(spill_source, NULL, ARCH, &c, &err), ST_ERR_INVALID_ARG);
  assert_int_equal(st_compile_one(spill_source, "k.cu", ARCH, NULL, &err), ST_ERR_INVALID_ARG);
}

/* ---- st_compile_all over a temporary database ---- */

#define NSRC 4 /* three valid sources and one that does not compile */

typedef struct fixture {
  char path[256];
  char cache[256]; /* this test's disk cache (the sources' hashes are made up) */
  st_db *db;
  char *text[NSRC];
  st_gen_variant v[NSRC + 2];
  int nv;
} fixture;

typedef struct progress_log {
  int calls, last_done, last_total;
  int stop_after; /* > 0: set *stop once this many are done */
  volatile sig_atomic_t *stop;
} progress_log;

static void on_progress(void *ctx, int done, int total, int cached, int failed, double eta, const char *name) {
  progress_log *p = ctx;
  (void)eta;
  assert_true(done >= cached && done <= total && failed <= done);
  assert_true(p->calls == 0 || done >= p->last_done);
  assert_true(p->calls == 0 || name != NULL);
  p->calls++;
  p->last_done = done;
  p->last_total = total;
  if (p->stop_after > 0 && done >= p->stop_after) *p->stop = 1;
}

static void add_variant(fixture *f, int src, const char *name, int source_in_db_only) {
  st_gen_variant *g = &f->v[f->nv++];
  memset(g, 0, sizeof *g);
  snprintf(g->row.id, sizeof g->row.id, "%032x", f->nv);
  snprintf(g->row.op, sizeof g->row.op, "test_op");
  snprintf(g->row.name, sizeof g->row.name, "%s", name);
  snprintf(g->row.source_hash, sizeof g->row.source_hash, "%032x", 0xabc00 + src);
  g->source = source_in_db_only ? NULL : f->text[src];
}

/* The fixture's sources stored in `db`. */
static void put_sources(fixture *f, st_db *db) {
  st_err err = {{0}};
  for (int i = 0; i < NSRC; i++) {
    char hash[40];
    snprintf(hash, sizeof hash, "%032x", 0xabc00 + i);
    st_params kernel = {0};
    assert_int_equal(st_params_set_int(&kernel, "k", i, &err), ST_OK);
    if (st_db_put_source(db, hash, "test_op", &kernel, f->text[i], &err) != ST_OK)
      fail_msg("st_db_put_source: %s", err.msg);
  }
}

static int setup_db(void **state) {
  fixture *f = calloc(1, sizeof *f);
  assert_non_null(f);
  st_test_temp_path(f->path, sizeof f->path, ".db");
  st_test_temp_path(f->cache, sizeof f->cache, ".cache");
  setenv("SPARSETUNE_CACHE_DIR", f->cache, 1);
  st_err err = {{0}};
  if (st_db_open(f->path, ST_DB_READWRITE, &f->db, &err) != ST_OK) fail_msg("st_db_open: %s", err.msg);
  for (int i = 0; i < NSRC; i++) f->text[i] = i < NSRC - 1 ? render_valid(10 + i) : strdup(invalid_source);
  put_sources(f, f->db);
  add_variant(f, 0, "valid_a", 0);
  add_variant(f, 1, "valid_b", 1);        /* text read back from the database */
  add_variant(f, 0, "valid_a_split2", 0); /* same source, another launch config */
  add_variant(f, 2, "valid_c", 0);
  add_variant(f, 3, "broken", 0);
  *state = f;
  return 0;
}

static int teardown_db(void **state) {
  fixture *f = *state;
  st_db_close(f->db);
  for (int i = 0; i < NSRC; i++) free(f->text[i]);
  unlink(f->path);
  char rm[300];
  snprintf(rm, sizeof rm, "rm -rf '%s'", f->cache);
  if (system(rm) != 0) fprintf(stderr, "# could not remove %s\n", f->cache);
  unsetenv("SPARSETUNE_CACHE_DIR");
  char side[300];
  snprintf(side, sizeof side, "%s-wal", f->path);
  unlink(side);
  snprintf(side, sizeof side, "%s-shm", f->path);
  unlink(side);
  free(f);
  return 0;
}

static void expect_binary(fixture *f, int src, int ok) {
  char hash[40], compiler[32];
  snprintf(hash, sizeof hash, "%032x", 0xabc00 + src);
  st_err err = {{0}};
  assert_int_equal(st_compile_compiler(compiler, &err), ST_OK);
  st_binary_row b;
  int found = 0;
  assert_int_equal(st_db_get_binary(f->db, hash, ARCH, compiler, &b, &found, &err), ST_OK);
  assert_int_equal(found, 1);
  assert_int_equal(b.ok, ok);
  assert_non_null(b.log);
  if (ok) {
    assert_true(b.cubin_size > 4);
    assert_memory_equal(b.cubin, "\177ELF", 4);
    assert_true(b.registers > 0);
  } else {
    assert_non_null(strstr(b.log, "st_undeclared_thing"));
    assert_non_null(strstr(b.log, "broken.cu"));
  }
  st_db_binary_free(&b);
}

static void compile_all_compiles_each_distinct_source_once(void **state) {
  fixture *f = *state;
  st_compile_stats st;
  st_err err = {{0}};
  progress_log p = {0};
  if (st_compile_all(f->db, f->v, f->nv, ARCH, 2, on_progress, &p, NULL, &st, &err) != ST_OK)
    fail_msg("st_compile_all: %s", err.msg);
  printf("# first call: %d sources compiled in %.2f s on 2 threads\n", st.compiled, st.seconds);
  assert_int_equal(st.total, NSRC);
  assert_int_equal(st.cached, 0);
  assert_int_equal(st.compiled, NSRC);
  assert_int_equal(st.failed, 1);
  assert_int_equal(st.interrupted, 0);
  assert_true(p.calls >= 2);
  assert_int_equal(p.last_done, NSRC);
  assert_int_equal(p.last_total, NSRC);
  for (int i = 0; i < NSRC; i++) expect_binary(f, i, i < NSRC - 1);

  memset(&p, 0, sizeof p);
  assert_int_equal(st_compile_all(f->db, f->v, f->nv, ARCH, 0, on_progress, &p, NULL, &st, &err), ST_OK);
  assert_int_equal(st.total, NSRC);
  assert_int_equal(st.cached, NSRC);
  assert_int_equal(st.compiled, 0);
  assert_int_equal(st.failed, 0);
  assert_int_equal(p.calls, 1);
  assert_int_equal(p.last_done, NSRC);
}

/* Compiles the fixture's variants into a new database with its sources
 * and checks its rows against the first database's (byte for byte when
 * `same_bytes`: every row from the disk cache; a compile's log carries its
 * own timing); returns the stats. */
static st_compile_stats compile_into_new_db(fixture *f, int same_bytes) {
  char path[256];
  st_test_temp_path(path, sizeof path, ".db");
  st_db *db = NULL;
  st_err err = {{0}};
  if (st_db_open(path, ST_DB_READWRITE, &db, &err) != ST_OK) fail_msg("st_db_open: %s", err.msg);
  put_sources(f, db);
  st_compile_stats st;
  if (st_compile_all(db, f->v, f->nv, ARCH, 2, NULL, NULL, NULL, &st, &err) != ST_OK)
    fail_msg("st_compile_all: %s", err.msg);
  {
    char compiler[32], hash[40];
    assert_int_equal(st_compile_compiler(compiler, &err), ST_OK);
    for (int i = 0; i < NSRC; i++) {
      snprintf(hash, sizeof hash, "%032x", 0xabc00 + i);
      st_binary_row a, b;
      int found_a = 0, found_b = 0;
      assert_int_equal(st_db_get_binary(f->db, hash, ARCH, compiler, &a, &found_a, &err), ST_OK);
      assert_int_equal(st_db_get_binary(db, hash, ARCH, compiler, &b, &found_b, &err), ST_OK);
      assert_true(found_a && found_b);
      assert_int_equal(a.ok, b.ok);
      assert_int_equal(a.registers, b.registers);
      assert_int_equal(a.cubin_size > 0, b.cubin_size > 0);
      if (same_bytes) {
        assert_int_equal(a.cubin_size, b.cubin_size);
        if (a.cubin_size) assert_memory_equal(a.cubin, b.cubin, a.cubin_size);
        assert_string_equal(a.log, b.log);
      }
      st_db_binary_free(&a);
      st_db_binary_free(&b);
    }
  }
  st_db_close(db);
  unlink(path);
  return st;
}

/* A second database takes the results from the disk cache (compile_cache.h):
 * the same rows, good and failed; a damaged file is compiled again; with
 * the cache off everything is. */
static void compile_all_takes_another_database_s_results_from_the_disk_cache(void **state) {
  fixture *f = *state;
  st_compile_stats st;
  st_err err = {{0}};
  assert_int_equal(st_compile_all(f->db, f->v, f->nv, ARCH, 2, NULL, NULL, NULL, &st, &err), ST_OK);
  assert_int_equal(st.compiled, NSRC);
  assert_int_equal(st.from_disk, 0);

  st = compile_into_new_db(f, 1);
  assert_int_equal(st.compiled, NSRC);
  assert_int_equal(st.from_disk, NSRC);
  assert_int_equal(st.failed, 1);

  /* One file damaged: its source is compiled again, and kept again. */
  char cmd[600];
  snprintf(cmd, sizeof cmd,
           "f=$(ls '%s'/*.row | head -n 1) && printf 'x' | dd of=\"$f\" bs=1 seek=100 conv=notrunc 2>/dev/null",
           f->cache);
  assert_int_equal(system(cmd), 0);
  st = compile_into_new_db(f, 0);
  assert_int_equal(st.from_disk, NSRC - 1);
  st = compile_into_new_db(f, 0);
  assert_int_equal(st.from_disk, NSRC);

  setenv("SPARSETUNE_CACHE_DIR", "off", 1);
  st = compile_into_new_db(f, 0);
  assert_int_equal(st.from_disk, 0);
  assert_int_equal(st.compiled, NSRC);
}

static void compile_all_stops_when_asked_and_resumes(void **state) {
  fixture *f = *state;
  volatile sig_atomic_t stop = 1;
  st_compile_stats st;
  st_err err = {{0}};
  assert_int_equal(st_compile_all(f->db, f->v, f->nv, ARCH, 2, NULL, NULL, &stop, &st, &err), ST_OK);
  assert_int_equal(st.compiled, 0);
  assert_int_equal(st.interrupted, 1);

  /* One thread, stopped once the first result is in: the worker may have
   * taken the next source already, which still finishes and is stored. */
  stop = 0;
  progress_log p = {.stop_after = 1, .stop = &stop};
  assert_int_equal(st_compile_all(f->db, f->v, f->nv, ARCH, 1, on_progress, &p, &stop, &st, &err), ST_OK);
  assert_in_range(st.compiled, 1, 2);
  assert_int_equal(st.interrupted, 1);
  const int first = st.compiled;

  stop = 0;
  assert_int_equal(st_compile_all(f->db, f->v, f->nv, ARCH, 3, NULL, NULL, &stop, &st, &err), ST_OK);
  assert_int_equal(st.cached, first);
  assert_int_equal(st.compiled, NSRC - first);
  assert_int_equal(st.interrupted, 0);
  for (int i = 0; i < NSRC; i++) expect_binary(f, i, i < NSRC - 1);
}

static void compile_all_refuses_bad_input(void **state) {
  fixture *f = *state;
  st_compile_stats st;
  st_err err = {{0}};
  assert_int_equal(st_compile_all(f->db, f->v, f->nv, "sm90", 1, NULL, NULL, NULL, &st, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "arch="));
  assert_int_equal(st_compile_all(NULL, f->v, f->nv, ARCH, 1, NULL, NULL, NULL, &st, &err), ST_ERR_INVALID_ARG);
  assert_int_equal(st_compile_all(f->db, NULL, 2, ARCH, 1, NULL, NULL, NULL, &st, &err), ST_ERR_INVALID_ARG);
  f->v[0].row.source_hash[0] = '\0';
  assert_int_equal(st_compile_all(f->db, f->v, f->nv, ARCH, 1, NULL, NULL, NULL, &st, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "source_hash"));
  /* Nothing to do is not an error. */
  assert_int_equal(st_compile_all(f->db, f->v, 0, ARCH, 1, NULL, NULL, NULL, &st, &err), ST_OK);
  assert_int_equal(st.total, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(compile_one_valid_kernel_yields_cubin_and_resource_report),
      cmocka_unit_test(compile_one_reports_spills_and_stack_frame),
      cmocka_unit_test(compile_one_ptxas_error_keeps_its_message),
      cmocka_unit_test(compile_one_invalid_source_is_a_result_with_its_log),
      cmocka_unit_test(compile_one_refuses_bad_arch_with_a_message),
      cmocka_unit_test(compile_one_refuses_null_arguments),
      cmocka_unit_test_setup_teardown(compile_all_compiles_each_distinct_source_once, setup_db, teardown_db),
      cmocka_unit_test_setup_teardown(compile_all_takes_another_database_s_results_from_the_disk_cache, setup_db,
                                      teardown_db),
      cmocka_unit_test_setup_teardown(compile_all_stops_when_asked_and_resumes, setup_db, teardown_db),
      cmocka_unit_test_setup_teardown(compile_all_refuses_bad_input, setup_db, teardown_db),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
