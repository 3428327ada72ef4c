/* test_generator.c - the C bridge to the generator (tuner/generator.c) over
 * the real generator/ and templates/: suites and their keys, the variant
 * lists (defaults, applicability, ids), rendering and error reporting, for
 * index_decode and sparse_attn_decode. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "generator.h"
#include "ops/index_decode.h"
#include "ops/sparse_attn_decode.h"
#include "testutil.h"

#define GEN_DIR ST_SOURCE_DIR "/generator"
#define TEST_TEMPLATES ST_SOURCE_DIR "/tests/data/templates"

static st_gen *open_gen(const char *templates_dir) {
  st_gen *g = NULL;
  st_err err = {{0}};
  const st_status s = st_gen_open(GEN_DIR, templates_dir, &g, &err);
  if (s != ST_OK) print_error("st_gen_open: %s\n", err.msg);
  assert_int_equal(s, ST_OK);
  assert_non_null(g);
  return g;
}

/* The shapes of `suite` for `op` (NULL: every op). */
static int load_op_suite(st_gen *g, const char *suite, const char *op, st_shape **shapes) {
  st_err err = {{0}};
  int n = 0;
  const st_status s = st_gen_suite(g, suite, op, shapes, &n, &err);
  if (s != ST_OK) print_error("st_gen_suite(%s, %s): %s\n", suite, op ? op : "every op", err.msg);
  assert_int_equal(s, ST_OK);
  return n;
}

static int load_suite(st_gen *g, const char *suite, st_shape **shapes) {
  return load_op_suite(g, suite, "index_decode", shapes);
}

static int load_op_variants(st_gen *g, const char *op, const st_shape *shapes, int nshapes, st_gen_variant **v) {
  st_err err = {{0}};
  int n = 0;
  const st_status s = st_gen_variants(g, op, shapes, nshapes, v, &n, &err);
  if (s != ST_OK) print_error("st_gen_variants(%s): %s\n", op, err.msg);
  assert_int_equal(s, ST_OK);
  return n;
}

static int load_variants(st_gen *g, const st_shape *shapes, int nshapes, st_gen_variant **v) {
  return load_op_variants(g, "index_decode", shapes, nshapes, v);
}

static int applies(st_gen *g, const st_variant_row *v, const st_shape *s) {
  st_err err = {{0}};
  int a = -1;
  const st_status st = st_gen_applies(g, v, s, &a, &err);
  if (st != ST_OK) print_error("st_gen_applies(%s, %s): %s\n", v->name, s->key, err.msg);
  assert_int_equal(st, ST_OK);
  return a;
}

static void assert_contains(const char *text, const char *part) {
  if (!strstr(text, part)) {
    print_error("text of %zu bytes does not contain '%s':\n%.300s...\n", strlen(text), part, text);
    fail();
  }
}

/* ---- open --------------------------------------------------------------- */

static void test_open_lists_ops_and_suites(void **state) {
  (void)state;
  st_gen *g = open_gen(NULL);
  st_err err = {{0}};
  const char **names = NULL;
  int n = 0;
  assert_int_equal(st_gen_ops(g, &names, &n, &err), ST_OK);
  assert_int_equal(n, 11);
  assert_string_equal(names[0], "dsa_index_decode");
  assert_string_equal(names[1], "dsa_index_logits");
  assert_string_equal(names[2], "dsa_index_topk");
  assert_string_equal(names[3], "index_decode");
  assert_string_equal(names[4], "index_prefill");
  assert_string_equal(names[5], "index_score");
  assert_string_equal(names[6], "index_topk");
  assert_string_equal(names[7], "mla_sparse_decode");
  assert_string_equal(names[8], "mla_sparse_prefill");
  assert_string_equal(names[9], "sparse_attn");
  assert_string_equal(names[10], "sparse_attn_decode");
  assert_int_equal(st_gen_suites(g, &names, &n, &err), ST_OK);
  assert_int_equal(n, 8);
  assert_string_equal(names[0], "anchors");
  assert_string_equal(names[1], "dsv32-decode");
  assert_string_equal(names[2], "dsv32-prefill");
  assert_string_equal(names[3], "engine-decode");
  assert_string_equal(names[4], "engine-prefill");
  assert_string_equal(names[5], "m3-decode");
  assert_string_equal(names[6], "m3-prefill");
  assert_string_equal(names[7], "smoke");
  st_gen_close(g);
  st_gen_close(NULL);
}

static void test_open_reports_missing_directories(void **state) {
  (void)state;
  st_gen *g = (st_gen *)&g;
  st_err err = {{0}};
  assert_int_equal(st_gen_open("/nonexistent/generator", NULL, &g, &err), ST_ERR_INVALID_ARG);
  assert_null(g);
  assert_contains(err.msg, "generator directory '/nonexistent/generator' does not exist");
  assert_int_equal(st_gen_open(GEN_DIR, "/nonexistent/templates", &g, &err), ST_ERR_INVALID_ARG);
  assert_contains(err.msg, "templates directory '/nonexistent/templates' does not exist");
  assert_int_equal(st_gen_open(TEST_TEMPLATES, NULL, &g, &err), ST_ERR_INVALID_ARG);
  assert_contains(err.msg, "has no main.lua");
}

/* Each place the folders can come from says so: a binary in its build tree
 * (this test) has no installed tree beside it and reads the source tree's;
 * tests/test_install.sh checks the installed binary. */
static void test_locate_says_where_and_why(void **state) {
  (void)state;
  char dir[4096];
  const char *why = NULL;
  st_err err = {{0}};
  unsetenv("SPARSETUNE_HOME");
  assert_int_equal(st_gen_locate(NULL, "templates", dir, sizeof dir, &why, &err), ST_OK);
  assert_string_equal(dir, ST_SOURCE_DIR "/templates");
  assert_string_equal(why, "from the source tree");
  assert_int_equal(st_gen_locate(TEST_TEMPLATES, "templates", dir, sizeof dir, &why, &err), ST_OK);
  assert_string_equal(dir, TEST_TEMPLATES);
  assert_string_equal(why, "as given");
  setenv("SPARSETUNE_HOME", "/nonexistent/home", 1);
  const st_status s = st_gen_locate(NULL, "generator", dir, sizeof dir, &why, &err);
  unsetenv("SPARSETUNE_HOME");
  assert_int_equal(s, ST_ERR_INVALID_ARG);
  assert_string_equal(why, "from $SPARSETUNE_HOME");
  assert_contains(err.msg, "generator directory '/nonexistent/home/generator' does not exist (from $SPARSETUNE_HOME)");
}

/* A file of a generator directory made for a test. */
typedef struct gen_file {
  const char *name, *text;
} gen_file;

static void write_file(const char *dir, const gen_file *file) {
  char path[700];
  snprintf(path, sizeof path, "%s/%s", dir, file->name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(file->text, f);
  assert_int_equal(fclose(f), 0);
}

/* A generator directory of `n` files (an ops/ folder is there for op
 * modules): st_gen_open must fail with a message containing `part`, on one
 * line, and free everything (ASan builds). */
static void expect_open_failure_of(const gen_file *files, int n, const char *part) {
  char dir[512], sub[600];
  st_test_temp_path(dir, sizeof dir, "-gen");
  assert_int_equal(mkdir(dir, 0700), 0);
  snprintf(sub, sizeof sub, "%s/ops", dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  for (int i = 0; i < n; i++) write_file(dir, &files[i]);
  st_gen *g = NULL;
  st_err err = {{0}};
  const st_status s = st_gen_open(dir, TEST_TEMPLATES, &g, &err);
  for (int i = 0; i < n; i++) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, files[i].name);
    unlink(path);
  }
  rmdir(sub);
  rmdir(dir);
  assert_int_equal(s, ST_ERR_INVALID_ARG);
  assert_null(g);
  assert_contains(err.msg, part);
  assert_null(strchr(err.msg, '\n'));
}

/* A generator directory whose main.lua is `text`. */
static void expect_open_failure(const char *text, const char *part) {
  const gen_file main_lua = {"main.lua", text};
  expect_open_failure_of(&main_lua, 1, part);
}

static void test_open_reports_lua_errors(void **state) {
  (void)state;
  expect_open_failure("return {", "main.lua:1: unexpected symbol near <eof>");
  expect_open_failure("return { new = function() error('broken generator', 0) end }", "generator: broken generator");
  expect_open_failure("local x = nil\nreturn { new = function() return x.y end }",
                      "main.lua:2: attempt to index a nil value");
  expect_open_failure("return 42", "did not return a table");
}

/* A module that main.lua requires (the suites, an op) and that does not
 * parse or fails as it loads: Lua's reason with the file and line reaches
 * the message, which `require` puts on a line of its own. */
static void test_open_reports_lua_errors_of_required_modules(void **state) {
  (void)state;
  static const char main_lua[] = "local suites = require('suites')\n"
                                 "local op = require('ops.index_decode')\n"
                                 "return { new = function() return {} end }\n";
  const gen_file bad_suites[] = {{"main.lua", main_lua},
                                 {"suites.lua", "local M = {\n  smoke = {\n}\nreturn M\n"},
                                 {"ops/index_decode.lua", "return {}\n"}};
  expect_open_failure_of(bad_suites, 3, "suites.lua:4: '}' expected (to close '{' at line 1) near 'return'");
  const gen_file bad_op[] = {
      {"main.lua", main_lua},
      {"suites.lua", "return {}\n"},
      {"ops/index_decode.lua", "local M = {}\nfunction M.check_shape(s)\n  return s.B >\nend\n"}};
  expect_open_failure_of(bad_op, 3, "index_decode.lua:4: unexpected symbol near 'end'");
  const gen_file raising[] = {{"main.lua", main_lua},
                              {"suites.lua", "local x = nil\nreturn x.rows\n"},
                              {"ops/index_decode.lua", "return {}\n"}};
  expect_open_failure_of(raising, 3, "suites.lua:2: attempt to index a nil value (local 'x')");
}

/* Kernel parameters of index_decode that the stand-in template renders. */
static void stand_in_kernel(st_params *k) {
  st_err err = {{0}};
  assert_int_equal(st_params_set(k, "dtype", "fp8", &err), ST_OK);
  assert_int_equal(st_params_set(k, "algo", "split", &err), ST_OK);
  assert_int_equal(st_params_set_int(k, "head_dim", 64, &err), ST_OK);
  assert_int_equal(st_params_set_int(k, "topk", 8, &err), ST_OK);
  assert_int_equal(st_params_set_int(k, "heads_per_cta", 2, &err), ST_OK);
  assert_int_equal(st_params_set_int(k, "max_qlen", 3, &err), ST_OK);
  assert_int_equal(st_params_set_int(k, "threads", 128, &err), ST_OK);
  assert_int_equal(st_params_set_int(k, "units_in_flight", 4, &err), ST_OK);
  assert_int_equal(st_params_set_int(k, "bulk_stages", 0, &err), ST_OK);
}

/* A temporary directory with `generator` and `templates` links. */
static void make_home(char *home, size_t cap, const char *templates) {
  st_test_temp_path(home, cap, "-home");
  assert_int_equal(mkdir(home, 0700), 0);
  char link[1024];
  snprintf(link, sizeof link, "%s/generator", home);
  assert_int_equal(symlink(GEN_DIR, link), 0);
  snprintf(link, sizeof link, "%s/templates", home);
  assert_int_equal(symlink(templates, link), 0);
}

static void remove_home(const char *home) {
  char link[1024];
  snprintf(link, sizeof link, "%s/generator", home);
  unlink(link);
  snprintf(link, sizeof link, "%s/templates", home);
  unlink(link);
  rmdir(home);
}

static void test_open_finds_directories_under_sparsetune_home(void **state) {
  (void)state;
  char home[512];
  make_home(home, sizeof home, TEST_TEMPLATES);
  setenv("SPARSETUNE_HOME", home, 1);
  st_gen *g = NULL;
  st_err err = {{0}};
  const st_status s = st_gen_open(NULL, NULL, &g, &err);
  unsetenv("SPARSETUNE_HOME");
  if (s != ST_OK) {
    remove_home(home);
    print_error("%s\n", err.msg);
    fail();
  }
  /* The stand-in template of tests/data proves which templates were used. */
  st_params k = {0};
  stand_in_kernel(&k);
  char *src = NULL;
  const st_status rs = st_gen_render(g, "index_decode", &k, &src, &err);
  remove_home(home);
  if (rs != ST_OK) print_error("%s\n", err.msg);
  assert_int_equal(rs, ST_OK);
  assert_contains(src, "// A stand-in index_decode template");
  assert_contains(src, "// ---- begin common.h\n// common.h - shared by the stand-in template.\n");
  assert_contains(src, "// ---- begin prelude defaults/index_decode.cuh\n"
                       "#define ST_P_IS_FP8 1\n#define ST_P_HEAD_DIM 64\n#define ST_P_TOPK 8\n"
                       "#define ST_P_HEADS_PER_CTA 2\n#define ST_P_MAX_QLEN 3\n#define ST_P_THREADS 128\n"
                       "#define ST_P_UNITS_IN_FLIGHT 4\n#define ST_P_ALGO_SPLIT 1\n#define ST_P_BULK_STAGES 0\n"
                       "// ---- end prelude defaults/index_decode.cuh\n"
                       "constexpr int IS_FP8 = ST_P_IS_FP8;\n");
  free(src);
  st_gen_close(g);
}

/* ---- suites ------------------------------------------------------------- */

static const st_shape *find_shape(const st_shape *s, int n, const char *key) {
  for (int i = 0; i < n; i++)
    if (!strcmp(s[i].key, key)) return &s[i];
  return NULL;
}

static void test_suite_shape_and_dispatch_keys_are_canonical(void **state) {
  (void)state;
  st_gen *g = open_gen(NULL);
  st_shape *s = NULL;
  const int n = load_suite(g, "m3-decode", &s);
  assert_true(n >= 24 && n <= 36);
  assert_string_equal(s[0].op, "index_decode");
  assert_string_equal(s[0].key,
                      "index_decode:B=1,D=128,H=2,ctx=8192,dtype=bf16,init=1,lens=full,local=2,qlen=1,topk=16");
  const st_shape *b8 =
      find_shape(s, n, "index_decode:B=8,D=128,H=2,ctx=32768,dtype=bf16,init=1,lens=full,local=2,qlen=1,topk=16");
  assert_non_null(b8);
  assert_string_equal(b8->dispatch_key, "index_decode:B=8,D=128,H=2,ctx=32768,dtype=bf16,qlen=1,topk=16");
  assert_int_equal(b8->params.n, 12); /* the ten fields of the key, the peer's time and its device */
  assert_string_equal(st_params_get(&b8->params, "peer_us"), "22.4");
  assert_string_equal(st_params_get(&b8->params, "peer_device"), "NVIDIA H200");
  assert_string_equal(st_params_get(&b8->params, "lens"), "full");
  assert_string_equal(st_params_get(&b8->params, "local"), "2");
  int mixed = 0;
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < i; j++) assert_string_not_equal(s[i].key, s[j].key);
    mixed += !strcmp(st_params_get(&s[i].params, "lens"), "mixed");
  }
  assert_true(mixed >= 2);
  free(s);
  st_gen_close(g);
}

static void test_suite_anchors_are_the_anchor_rows(void **state) {
  (void)state;
  static const char *rows[] = {"bf16:1:8192",     "bf16:1:131072", "bf16:8:8192", "bf16:8:32768",  "bf16:32:32768",
                               "bf16:128:131072", "fp8:1:8192",    "fp8:8:32768", "fp8:128:131072"};
  st_gen *g = open_gen(NULL);
  st_shape *s = NULL;
  const int n = load_suite(g, "anchors", &s);
  assert_int_equal(n, 9);
  for (int i = 0; i < n; i++) {
    char want[256], dtype[8];
    int B, ctx;
    assert_int_equal(sscanf(rows[i], "%7[^:]:%d:%d", dtype, &B, &ctx), 3);
    snprintf(want, sizeof want, "index_decode:B=%d,D=128,H=2,ctx=%d,dtype=%s,init=1,lens=full,local=2,qlen=1,topk=16",
             B, ctx, dtype);
    assert_string_equal(s[i].key, want);
  }
  free(s);
  st_gen_close(g);
}

/* --op a,b: the suite's shapes of those ops, in suite order; every name in
 * the list must be an op. */
static void test_a_list_of_ops_selects_their_shapes(void **state) {
  (void)state;
  st_gen *g = open_gen(NULL);
  st_shape *a = NULL, *b = NULL, *both = NULL;
  const int na = load_op_suite(g, "anchors", "index_decode", &a);
  const int nb = load_op_suite(g, "anchors", "sparse_attn_decode", &b);
  const int n = load_op_suite(g, "anchors", "sparse_attn_decode,index_decode", &both);
  assert_true(na > 0 && nb > 0);
  assert_int_equal(n, na + nb);
  int ia = 0, ib = 0;
  for (int i = 0; i < n; i++) {
    if (!strcmp(both[i].op, "index_decode"))
      assert_string_equal(both[i].key, a[ia++].key);
    else
      assert_string_equal(both[i].key, b[ib++].key);
  }
  assert_int_equal(ia, na);
  assert_int_equal(ib, nb);
  st_err err = {{0}};
  st_shape *s = NULL;
  int ns = -1;
  assert_int_equal(st_gen_suite(g, "anchors", "index_decode,sparse_attn", &s, &ns, &err), ST_OK);
  free(s);
  assert_int_equal(st_gen_suite(g, "anchors", "index_decode,,sparse_attn", &s, &ns, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "unknown op ''"));
  assert_int_equal(st_gen_suite(g, "anchors", "index_decode,bogus", &s, &ns, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "unknown op 'bogus'"));
  free(a);
  free(b);
  free(both);
  st_gen_close(g);
}

static void test_unknown_names_give_clear_errors(void **state) {
  (void)state;
  st_gen *g = open_gen(NULL);
  st_err err = {{0}};
  st_shape *s = (st_shape *)&s;
  int n = -1;
  assert_int_equal(st_gen_suite(g, "m3-decodee", NULL, &s, &n, &err), ST_ERR_INVALID_ARG);
  assert_null(s);
  assert_int_equal(n, 0);
  assert_string_equal(err.msg,
                      "generator: unknown suite 'm3-decodee' (known: anchors, dsv32-decode, dsv32-prefill, "
                      "engine-decode, engine-prefill, m3-decode, m3-prefill, smoke; and shapes drawn from a seed: "
                      "random-decode:SEED:N, random-prefill:SEED:N)");
  assert_int_equal(st_gen_suite(g, "m3-decode", "index_decod", &s, &n, &err), ST_ERR_INVALID_ARG);
  assert_string_equal(err.msg,
                      "generator: unknown op 'index_decod' (known: dsa_index_decode, dsa_index_logits, dsa_index_topk, "
                      "index_decode, "
                      "index_prefill, index_score, index_topk, mla_sparse_decode, mla_sparse_prefill, sparse_attn, "
                      "sparse_attn_decode)");
  st_gen_variant *v = NULL;
  assert_int_equal(st_gen_variants(g, "sparse_mla", NULL, 0, &v, &n, &err), ST_ERR_INVALID_ARG);
  assert_string_equal(err.msg,
                      "generator: unknown op 'sparse_mla' (known: dsa_index_decode, dsa_index_logits, dsa_index_topk, "
                      "index_decode, "
                      "index_prefill, index_score, index_topk, mla_sparse_decode, mla_sparse_prefill, sparse_attn, "
                      "sparse_attn_decode)");
  assert_null(v);
  st_params k = {0};
  char *src = NULL;
  assert_int_equal(st_gen_render(g, "index_decode", &k, &src, &err), ST_ERR_INVALID_ARG);
  assert_string_equal(err.msg, "generator: index_decode kernel config: kernel parameter 'algo' is missing");
  assert_null(src);
  /* A shape with a field the op does not know. */
  st_shape bad;
  memset(&bad, 0, sizeof bad);
  assert_int_equal(load_suite(g, "smoke", &s) > 0, 1);
  bad = s[0];
  free(s);
  assert_int_equal(st_params_set(&bad.params, "colour", "red", &err), ST_OK);
  assert_int_equal(st_gen_variants(g, "index_decode", &bad, 1, &v, &n, &err), ST_ERR_INVALID_ARG);
  assert_string_equal(err.msg, "generator: shape 1 of op index_decode: 'colour' is not a shape field of index_decode");
  st_gen_close(g);
}

/* ---- variants ----------------------------------------------------------- */

/* Every index_decode shape of m3-decode is timed with tuned variants and
 * with its built-in ones: the bulk-copy split kernels (four, two or one
 * heads a CTA, as divide H; one query token a CTA or four) and the
 * single-CTA fallback, all of its dtype,
 * head_dim and topk bucket, with the launcher's split count. */
static void test_every_m3_shape_has_tuned_variants_and_its_defaults(void **state) {
  (void)state;
  st_gen *g = open_gen(NULL);
  st_shape *s = NULL;
  const int n = load_suite(g, "m3-decode", &s);
  st_gen_variant *v = NULL;
  const int nv = load_variants(g, s, n, &v);
  for (int i = 0; i < n; i++) {
    int tuned = 0, defaults = 0, fallback = 0;
    for (int j = 0; j < nv; j++) {
      if (!applies(g, &v[j].row, &s[i])) continue;
      if (!v[j].row.is_default) {
        tuned++;
        continue;
      }
      const st_variant_row *def = &v[j].row;
      defaults++;
      fallback += strcmp(st_params_get(&def->kernel, "algo"), "single") == 0;
      assert_string_equal(st_params_get(&def->kernel, "dtype"), st_params_get(&s[i].params, "dtype"));
      assert_string_equal(st_params_get(&def->kernel, "head_dim"), st_params_get(&s[i].params, "D"));
      assert_string_equal(st_params_get(&def->kernel, "topk"), "16");
      assert_string_equal(st_params_get(&def->launch, "splits"), "0");
    }
    /* bulk kernels: one per heads a CTA dividing H (4, 2, 1), for each
     * max_qlen holding qlen (1, 2 and 4); fp8 CTAs of 8 columns (four
     * heads of 2 tokens, two of 4) twice, on 128 and 256 threads */
    const int H = atoi(st_params_get(&s[i].params, "H")), qlen = atoi(st_params_get(&s[i].params, "qlen"));
    const int fp8 = strcmp(st_params_get(&s[i].params, "dtype"), "fp8") == 0;
    const int bulk = (1 + (H % 2 == 0) + (H % 4 == 0)) * (qlen == 1 ? 3 : qlen == 2 ? 2 : 1) +
                     fp8 * ((H % 4 == 0 && qlen <= 2) + (H % 2 == 0));
    if (tuned < 1 || defaults != bulk + 1 || fallback != 1)
      print_error("%s: %d tuned, %d defaults (%d fallback)\n", s[i].key, tuned, defaults, fallback);
    assert_true(tuned >= 1);
    assert_int_equal(defaults, bulk + 1);
    assert_int_equal(fallback, 1);
  }
  st_gen_free_variants(v, nv);
  free(s);
  st_gen_close(g);
}

static int count_defaults(const st_gen_variant *v, int n) {
  int d = 0;
  for (int i = 0; i < n; i++) d += v[i].row.is_default;
  return d;
}

static void test_variants_always_include_the_220_defaults(void **state) {
  (void)state;
  st_gen *g = open_gen(NULL);
  st_gen_variant *v = NULL;
  int n = load_variants(g, NULL, 0, &v);
  assert_int_equal(n, 220);
  assert_int_equal(count_defaults(v, n), 220);
  assert_string_equal(v[0].row.name, "index_decode.bf16.d64.k4.h4.q1.t256.u1.b2.split/auto");
  assert_string_equal(v[1].row.name, "index_decode.bf16.d64.k4.h4.q2.t256.u1.b2.split/auto");
  assert_string_equal(v[9].row.name, "index_decode.bf16.d64.k4.h1.q4.t256.u2.single/auto");
  assert_string_equal(v[10 * 10].row.name, "index_decode.fp8.d64.k4.h4.q1.t128.u1.b2.split/auto");
  /* fp8 CTAs of 8 columns: 256 threads first (up to a load of 32) */
  assert_string_equal(v[10 * 10 + 1].row.name, "index_decode.fp8.d64.k4.h4.q2.t256.u1.b2.split/auto");
  assert_string_equal(v[10 * 10 + 2].row.name, "index_decode.fp8.d64.k4.h4.q2.t128.u1.b2.split/auto");
  st_gen_free_variants(v, n);
  st_shape *s = NULL;
  const int ns = load_suite(g, "smoke", &s);
  n = load_variants(g, s, ns, &v);
  assert_true(n > 220);
  assert_int_equal(count_defaults(v, n), 220);
  st_gen_free_variants(v, n);
  free(s);
  st_gen_close(g);
}

static void test_variants_are_unique_and_read_by_the_launcher(void **state) {
  (void)state;
  st_gen *g = open_gen(NULL);
  st_shape *s = NULL;
  const int ns = load_suite(g, "m3-decode", &s);
  st_gen_variant *v = NULL;
  const int n = load_variants(g, s, ns, &v);
  for (int i = 0; i < n; i++) {
    const st_variant_row *r = &v[i].row;
    assert_string_equal(r->op, "index_decode");
    assert_int_equal(strlen(r->id), 32);
    assert_int_equal(strlen(r->source_hash), 32);
    char h[33];
    st_hash_hex(v[i].source, strlen(v[i].source), h);
    assert_string_equal(h, r->source_hash);
    for (int j = 0; j < i; j++) {
      assert_string_not_equal(r->id, v[j].row.id);
      assert_string_not_equal(r->name, v[j].row.name);
    }
    st_index_decode_config cfg;
    st_err err = {{0}};
    if (st_index_decode_config_from_params(&r->kernel, &r->launch, &cfg, &err) != ST_OK) {
      print_error("%s: %s\n", r->name, err.msg);
      fail();
    }
  }
  st_gen_free_variants(v, n);
  free(s);
  st_gen_close(g);
}

static void test_variant_ids_are_stable_across_runs(void **state) {
  (void)state;
  st_gen *a = open_gen(NULL), *b = open_gen(NULL);
  st_shape *s = NULL;
  const int ns = load_suite(a, "m3-decode", &s);
  st_gen_variant *va = NULL, *vb = NULL;
  const int na = load_variants(a, s, ns, &va);
  const int nb = load_variants(b, s, ns, &vb);
  assert_int_equal(na, nb);
  for (int i = 0; i < na; i++) {
    assert_string_equal(va[i].row.name, vb[i].row.name);
    assert_string_equal(va[i].row.id, vb[i].row.id);
    assert_string_equal(va[i].row.source_hash, vb[i].row.source_hash);
    assert_int_equal(va[i].row.is_default, vb[i].row.is_default);
  }
  st_gen_free_variants(va, na);
  st_gen_free_variants(vb, nb);
  free(s);
  st_gen_close(a);
  st_gen_close(b);
}

static void copy_file(const char *from, const char *to, const char *append) {
  FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
  assert_non_null(in);
  assert_non_null(out);
  char buf[4096];
  size_t k;
  while ((k = fread(buf, 1, sizeof buf, in)) > 0) assert_int_equal(fwrite(buf, 1, k, out), k);
  if (append) fputs(append, out);
  fclose(in);
  assert_int_equal(fclose(out), 0);
}

/* The stand-in's files, in a temporary copy a test may change. */
typedef struct stand_in_copy {
  char dir[512], defaults_dir[600];
  char tpl[640], hdr[640], defaults[640];
} stand_in_copy;

/* Copies the stand-in templates; `header_tail` and `defaults_tail` (may be
 * NULL) are appended to common.h and to the defaults file. */
static void copy_stand_in(stand_in_copy *c, const char *header_tail, const char *defaults_tail) {
  st_test_temp_path(c->dir, sizeof c->dir, "-templates");
  assert_int_equal(mkdir(c->dir, 0700), 0);
  snprintf(c->defaults_dir, sizeof c->defaults_dir, "%s/defaults", c->dir);
  assert_int_equal(mkdir(c->defaults_dir, 0700), 0);
  snprintf(c->tpl, sizeof c->tpl, "%s/index_decode.cu", c->dir);
  snprintf(c->hdr, sizeof c->hdr, "%s/common.h", c->dir);
  snprintf(c->defaults, sizeof c->defaults, "%s/index_decode.cuh", c->defaults_dir);
  copy_file(TEST_TEMPLATES "/index_decode.cu", c->tpl, NULL);
  copy_file(TEST_TEMPLATES "/common.h", c->hdr, header_tail);
  copy_file(TEST_TEMPLATES "/defaults/index_decode.cuh", c->defaults, defaults_tail);
}

static void remove_stand_in(const stand_in_copy *c) {
  unlink(c->tpl);
  unlink(c->hdr);
  unlink(c->defaults);
  rmdir(c->defaults_dir);
  rmdir(c->dir);
}

static void test_variant_ids_follow_included_template_text(void **state) {
  (void)state;
  stand_in_copy c;
  copy_stand_in(&c, NULL, NULL);
  st_gen *g = open_gen(c.dir);
  st_shape *s = NULL;
  const int ns = load_suite(g, "smoke", &s);
  st_gen_variant *before = NULL, *after = NULL;
  const int n0 = load_variants(g, s, ns, &before);
  copy_file(TEST_TEMPLATES "/common.h", c.hdr, "// a changed line\n"); /* same handle: nothing cached */
  const int n1 = load_variants(g, s, ns, &after);
  remove_stand_in(&c);

  assert_int_equal(n0, n1);
  for (int i = 0; i < n0; i++) {
    assert_string_equal(before[i].row.name, after[i].row.name);
    assert_string_not_equal(before[i].row.id, after[i].row.id);
    assert_string_not_equal(before[i].row.source_hash, after[i].row.source_hash);
    assert_contains(after[i].source, "// a changed line\n// ---- end common.h\n");
  }
  st_gen_free_variants(before, n0);
  st_gen_free_variants(after, n1);
  free(s);
  st_gen_close(g);
}

/* The prelude is part of the hashed source: a kernel parameter that changes
 * one value of it changes the source hash, and only that line. */
static void test_each_prelude_value_is_in_the_hashed_source(void **state) {
  (void)state;
  st_gen *g = open_gen(TEST_TEMPLATES);
  st_params k = {0};
  stand_in_kernel(&k);
  char *a = NULL, *b = NULL;
  st_err err = {{0}};
  assert_int_equal(st_gen_render(g, "index_decode", &k, &a, &err), ST_OK);
  assert_int_equal(st_params_set_int(&k, "threads", 256, &err), ST_OK);
  assert_int_equal(st_gen_render(g, "index_decode", &k, &b, &err), ST_OK);
  st_gen_close(g);
  char ha[33], hb[33];
  st_hash_hex(a, strlen(a), ha);
  st_hash_hex(b, strlen(b), hb);
  assert_string_not_equal(ha, hb);
  const char *at = strstr(a, "#define ST_P_THREADS 128\n"), *bt = strstr(b, "#define ST_P_THREADS 256\n");
  assert_non_null(at);
  assert_non_null(bt);
  const size_t line = strlen("#define ST_P_THREADS 128\n");
  assert_int_equal(at - a, bt - b);
  assert_string_equal(at + line, bt + line);
  assert_memory_equal(a, b, (size_t)(at - a));
  free(a);
  free(b);
}

/* A template error raised while rendering reaches the caller with the
 * template file and line, through the bridge as through the renderer. */
static void test_template_errors_name_the_file_and_line(void **state) {
  (void)state;
  stand_in_copy c;
  copy_stand_in(&c, NULL, "#define ST_P_NOT_A_PARAMETER 0\n");
  st_gen *g = open_gen(c.dir);
  st_params k = {0};
  stand_in_kernel(&k);
  char *src = NULL;
  st_err err = {{0}};
  const st_status s = st_gen_render(g, "index_decode", &k, &src, &err);
  remove_stand_in(&c);
  st_gen_close(g);
  assert_int_equal(s, ST_ERR_INVALID_ARG);
  assert_null(src);
  assert_string_equal(err.msg,
                      "generator: defaults/index_decode.cuh:12: template parameter 'not_a_parameter' has no value");
}

static void test_render_fills_the_real_template(void **state) {
  (void)state;
  st_gen *g = open_gen(NULL);
  st_shape *s = NULL;
  const int ns = load_suite(g, "smoke", &s);
  st_gen_variant *v = NULL;
  const int n = load_variants(g, s, ns, &v);
  for (int i = 0; i < n; i++) {
    if (!v[i].row.is_default || strcmp(st_params_get(&v[i].row.kernel, "head_dim"), "128")) continue;
    char *src = NULL;
    st_err err = {{0}};
    assert_int_equal(st_gen_render(g, "index_decode", &v[i].row.kernel, &src, &err), ST_OK);
    assert_string_equal(src, v[i].source);
    assert_contains(src, "\n#define ST_P_HEAD_DIM 128\n");
    char heads[40];
    snprintf(heads, sizeof heads, "\n#define ST_P_HEADS_PER_CTA %s\n",
             st_params_get(&v[i].row.kernel, "heads_per_cta"));
    assert_contains(src, heads);
    assert_contains(src, "// ---- begin common/st_types.h\n");
    /* self-contained: every quoted include was inlined */
    assert_null(strstr(src, "#include \""));
    free(src);
  }
  st_gen_free_variants(v, n);
  free(s);
  st_gen_close(g);
}

/* ---- sparse_attn_decode ------------------------------------------------- */

static void test_suite_sparse_attn_decode_shapes_cross_the_bridge(void **state) {
  (void)state;
  /* dtype:B:topk:peer_us of the anchor rows (generator/suites.lua). */
  static const char *rows[] = {"bf16:1:16:7.1",    "bf16:8:16:10.2", "bf16:32:16:25.8",
                               "bf16:128:16:73.7", "fp8:1:16:9.2",   "fp8:32:16:25.2",
                               "fp8:128:16:80.7",  "bf16:32:4:11.5", "bf16:32:32:41.8"};
  st_gen *g = open_gen(NULL);
  st_shape *s = NULL;
  const int n = load_op_suite(g, "anchors", "sparse_attn_decode", &s);
  assert_int_equal(n, 9);
  for (int i = 0; i < n; i++) {
    char want[256], dtype[8], peer[16];
    int B, topk;
    assert_int_equal(sscanf(rows[i], "%7[^:]:%d:%d:%15s", dtype, &B, &topk, peer), 4);
    snprintf(want, sizeof want,
             "sparse_attn_decode:B=%d,D=128,Hkv=2,Hq=32,ctx=32768,dtype=%s,layout=pages2,lens=full,lse=0,qlen=1,"
             "scale=%s,sel=random,topk=%d",
             B, dtype, strcmp(dtype, "fp8") ? "none" : "scalar", topk);
    assert_string_equal(s[i].op, "sparse_attn_decode");
    assert_string_equal(s[i].key, want);
    snprintf(want, sizeof want, "sparse_attn_decode:B=%d,D=128,Hkv=2,Hq=32,dtype=%s,qlen=1,topk=%d", B, dtype, topk);
    assert_string_equal(s[i].dispatch_key, want);
    assert_int_equal(s[i].params.n, 15); /* the 13 fields of the key, the peer's time and its device */
    assert_string_equal(st_params_get(&s[i].params, "peer_us"), peer);
  }
  free(s);
  /* Every op: the index_decode rows, these, then sparse_attn's, index_topk's
   * and index_score's. */
  assert_int_equal(load_op_suite(g, "anchors", NULL, &s), 27);
  assert_string_equal(s[8].op, "index_decode");
  assert_string_equal(s[9].op, "sparse_attn_decode");
  static const char *score_peers[] = {"34.3", "225.6", "662"}; /* as Lua prints numbers */
  for (int i = 0; i < 3; i++) {
    assert_string_equal(s[24 + i].op, "index_score");
    assert_string_equal(st_params_get(&s[24 + i].params, "peer_us"), score_peers[i]);
  }
  assert_string_equal(s[26].key, "index_score:B=8192,D=128,H=2,dtype=bf16,reqs=8192:57344");
  free(s);
  const int nm = load_op_suite(g, "m3-decode", "sparse_attn_decode", &s);
  assert_true(nm > 9 && nm <= 14);
  int lse = 0, tensor = 0, interleaved = 0;
  for (int i = 0; i < nm; i++) {
    for (int j = 0; j < i; j++) assert_string_not_equal(s[i].key, s[j].key);
    lse += !strcmp(st_params_get(&s[i].params, "lse"), "1");
    tensor += !strcmp(st_params_get(&s[i].params, "scale"), "tensor");
    interleaved += !strcmp(st_params_get(&s[i].params, "layout"), "interleaved");
  }
  assert_true(lse >= 1 && tensor >= 1 && interleaved >= 1);
  free(s);
  st_gen_close(g);
}

static void test_sparse_attn_decode_applies_over_text_parameters(void **state) {
  (void)state;
  st_gen *g = open_gen(NULL);
  st_shape *s = NULL;
  assert_int_equal(load_op_suite(g, "anchors", "sparse_attn_decode", &s), 9);
  st_variant_row v;
  memset(&v, 0, sizeof v);
  st_err err = {{0}};
  snprintf(v.op, sizeof v.op, "sparse_attn_decode");
  assert_int_equal(st_params_set(&v.kernel, "dtype", "bf16", &err), ST_OK);
  assert_int_equal(st_params_set(&v.kernel, "algo", "single", &err), ST_OK);
  assert_int_equal(st_params_set_int(&v.kernel, "head_dim", 128, &err), ST_OK);
  assert_int_equal(st_params_set_int(&v.kernel, "group", 16, &err), ST_OK);
  assert_int_equal(st_params_set_int(&v.kernel, "warps_n", 4, &err), ST_OK);
  assert_int_equal(st_params_set_int(&v.kernel, "stages", 1, &err), ST_OK);
  assert_int_equal(st_params_set_int(&v.kernel, "cluster", 1, &err), ST_OK);
  assert_int_equal(st_params_set_int(&v.kernel, "k_regs", 0, &err), ST_OK);
  assert_int_equal(st_params_set_int(&v.kernel, "tma", 0, &err), ST_OK);
  assert_int_equal(st_params_set_int(&v.kernel, "pv_dims", 0, &err), ST_OK);
  assert_int_equal(st_params_set_int(&v.kernel, "ring_extra", 0, &err), ST_OK);
  assert_int_equal(st_params_set_int(&v.kernel, "scale_ptr", 1, &err), ST_OK);
  assert_int_equal(st_params_set_int(&v.launch, "splits", 16, &err), ST_OK);
  assert_int_equal(applies(g, &v, &s[0]), 1); /* bf16, B=1: 2 x 16 CTAs */
  assert_int_equal(applies(g, &v, &s[4]), 0); /* an fp8 cache */
  assert_int_equal(applies(g, &v, &s[7]), 0); /* topk 4 < 16 splits */
  assert_int_equal(applies(g, &v, &s[3]), 0); /* B=128: 4096 CTAs */
  /* An index_decode shape never runs a sparse_attn_decode variant. */
  st_shape *other = NULL;
  assert_true(load_suite(g, "anchors", &other) > 0);
  assert_int_equal(applies(g, &v, &other[0]), 0);
  free(other);
  /* A config outside the space is refused with the reason. */
  assert_int_equal(st_params_set_int(&v.kernel, "head_dim", 256, &err), ST_OK);
  assert_int_equal(st_params_set_int(&v.kernel, "stages", 2, &err), ST_OK);
  int a = -1;
  assert_int_equal(st_gen_applies(g, &v, &s[0], &a, &err), ST_ERR_INVALID_ARG);
  assert_contains(err.msg, "sparse_attn_decode kernel config: shared memory of stages=2 (bf16, head_dim 256, 1 m "
                           "tiles) = 270848 bytes exceeds 225280");
  free(s);
  st_gen_close(g);
}

/* Rendered, hashed, unique, read by the launcher. */
static void test_sparse_attn_decode_variants_render_the_real_template(void **state) {
  (void)state;
  st_gen *g = open_gen(NULL);
  st_gen_variant *v = NULL;
  int n = load_op_variants(g, "sparse_attn_decode", NULL, 0, &v);
  /* a fallback per dtype x head_dim x group, and the fast families where
   * the kind allows them */
  assert_int_equal(n, 90);
  assert_int_equal(count_defaults(v, n), 90);
  /* head_dim 64 takes no bulk copies: the fallback alone; head_dim 128,
   * group 16: the cluster 16 and cluster 8 kernels, the one-split ones
   * (three stages, then P.V by dimensions, then without bulk copies one
   * and two stages by qlen), then the fallback */
  assert_string_equal(v[0].row.name, "sparse_attn_decode.bf16.d64.g1.w4.s1.single/auto");
  assert_string_equal(v[1].row.name, "sparse_attn_decode.bf16.d64.g2.w4.s1.single/auto");
  int at = 0;
  while (at < n && strcmp(v[at].row.name, "sparse_attn_decode.bf16.d128.g16.w4.s1.tma.pvd.single.c16/auto")) at++;
  assert_true(at + 6 < n);
  assert_string_equal(v[at + 1].row.name, "sparse_attn_decode.bf16.d128.g16.w4.s1.tma.single.c8/auto");
  assert_string_equal(v[at + 2].row.name, "sparse_attn_decode.bf16.d128.g16.w4.s3.tma.single/s1");
  assert_string_equal(v[at + 3].row.name, "sparse_attn_decode.bf16.d128.g16.w4.s1.tma.pvd.single/s1");
  assert_string_equal(v[at + 4].row.name, "sparse_attn_decode.bf16.d128.g16.w4.s1.single/s1");
  assert_string_equal(v[at + 5].row.name, "sparse_attn_decode.bf16.d128.g16.w4.s2.single/s1");
  assert_string_equal(v[at + 6].row.name, "sparse_attn_decode.bf16.d128.g16.w4.s1.single/auto");
  /* fp8: the clusters of 16, 4 and 8, one CTA an item, the fallback */
  at = 0;
  while (at < n && strcmp(v[at].row.name, "sparse_attn_decode.fp8.d128.g16.w4.s1.kvr.tma.pvd.ring3.single.c16/auto")) at++;
  assert_true(at + 4 < n);
  assert_string_equal(v[at + 1].row.name, "sparse_attn_decode.fp8.d128.g16.w4.s1.kvr.tma.pvd.ring3.single.c4/auto");
  assert_string_equal(v[at + 2].row.name, "sparse_attn_decode.fp8.d128.g16.w4.s1.kvr.tma.pvd.ring3.single.c8/auto");
  assert_string_equal(v[at + 3].row.name, "sparse_attn_decode.fp8.d128.g16.w4.s1.kvr.tma.pvd.single/s1");
  assert_string_equal(v[at + 4].row.name, "sparse_attn_decode.fp8.d128.g16.w4.s1.single/auto");
  st_gen_free_variants(v, n);
  st_shape *s = NULL;
  const int ns = load_op_suite(g, "m3-decode", "sparse_attn_decode", &s);
  n = load_op_variants(g, "sparse_attn_decode", s, ns, &v);
  assert_true(n > 90);
  assert_int_equal(count_defaults(v, n), 90);
  for (int i = 0; i < n; i++) {
    const st_variant_row *r = &v[i].row;
    assert_string_equal(r->op, "sparse_attn_decode");
    for (int j = 0; j < i; j++) {
      assert_string_not_equal(r->id, v[j].row.id);
      assert_string_not_equal(r->name, v[j].row.name);
    }
    char h[33], line[64];
    st_hash_hex(v[i].source, strlen(v[i].source), h);
    assert_string_equal(h, r->source_hash);
    const char *group = st_params_get(&r->kernel, "group");
    snprintf(line, sizeof line, "\n#define ST_P_GROUP %s\n", group);
    assert_contains(v[i].source, line);
    snprintf(line, sizeof line, "\n#define ST_P_M_TILES %d\n", strcmp(group, "32") ? 1 : 2);
    assert_contains(v[i].source, line);
    st_sparse_attn_decode_config cfg;
    st_err err = {{0}};
    if (st_sparse_attn_decode_config_from_params(&r->kernel, &r->launch, &cfg, &err) != ST_OK) {
      print_error("%s: %s\n", r->name, err.msg);
      fail();
    }
  }
  /* Every m3-decode shape: tuned variants and its kind's defaults, the
   * fallback (one stage, no cluster, the launcher's splits) among them. */
  for (int i = 0; i < ns; i++) {
    int tuned = 0, defaults = 0, fallback = 0;
    for (int j = 0; j < n; j++) {
      if (!applies(g, &v[j].row, &s[i])) continue;
      defaults += v[j].row.is_default;
      tuned += !v[j].row.is_default;
      fallback += v[j].row.is_default && strstr(v[j].row.name, ".w4.s1.single/auto") != NULL;
    }
    if (tuned < 1 || defaults < 1 || fallback != 1)
      print_error("%s: %d tuned, %d defaults, %d fallbacks\n", s[i].key, tuned, defaults, fallback);
    assert_true(tuned >= 1);
    assert_true(defaults >= 1);
    assert_int_equal(fallback, 1);
  }
  st_gen_free_variants(v, n);
  free(s);
  st_gen_close(g);
}

/* ---- sizes -------------------------------------------------------------- */

static int distinct_sources(const st_gen_variant *v, int n) {
  int d = 0;
  for (int i = 0; i < n; i++) {
    int seen = 0;
    for (int j = 0; j < i && !seen; j++) seen = !strcmp(v[i].row.source_hash, v[j].row.source_hash);
    d += !seen;
  }
  return d;
}

static void report_suite(st_gen *g, const char *suite, const char *op, int *nsources) {
  st_shape *s = NULL;
  const int ns = load_op_suite(g, suite, op, &s);
  st_gen_variant *v = NULL;
  const int n = load_op_variants(g, op, s, ns, &v);
  long jobs = 0;
  int most = 0;
  for (int i = 0; i < ns; i++) {
    int here = 0;
    for (int j = 0; j < n; j++) here += applies(g, &v[j].row, &s[i]);
    jobs += here;
    most = here > most ? here : most;
  }
  *nsources = distinct_sources(v, n);
  printf("suite %s, op %s: %d shapes, %d variants (%d defaults), %d distinct sources, %ld (variant, shape) timings, "
         "at most %d per shape\n",
         suite, op, ns, n, count_defaults(v, n), *nsources, jobs, most);
  st_gen_free_variants(v, n);
  free(s);
}

static void test_suite_sizes_stay_within_budget(void **state) {
  (void)state;
  st_gen *g = open_gen(NULL);
  int sources = 0;
  report_suite(g, "m3-decode", "index_decode", &sources);
  /* (220 of them are the built-in variants, compiled whatever the suite) */
  assert_true(sources < 520);
  report_suite(g, "m3-decode", "sparse_attn_decode", &sources);
  assert_true(sources < 400);
  report_suite(g, "anchors", "index_decode", &sources);
  report_suite(g, "anchors", "sparse_attn_decode", &sources);
  report_suite(g, "smoke", "index_decode", &sources);
  report_suite(g, "smoke", "sparse_attn_decode", &sources);
  st_gen_close(g);
}

static void test_hash_hex_is_xxh3_128_lowercase(void **state) {
  (void)state;
  char a[33], b[33];
  st_hash_hex("", 0, a);
  assert_string_equal(a, "99aa06d3014798d86001c324468d497f"); /* XXH3-128 of nothing, seed 0 */
  st_hash_hex("index_decode", 12, b);
  assert_int_equal(strlen(b), 32);
  assert_int_equal(strspn(b, "0123456789abcdef"), 32);
  assert_string_not_equal(a, b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_open_lists_ops_and_suites),
      cmocka_unit_test(test_open_reports_missing_directories),
      cmocka_unit_test(test_locate_says_where_and_why),
      cmocka_unit_test(test_open_reports_lua_errors),
      cmocka_unit_test(test_open_reports_lua_errors_of_required_modules),
      cmocka_unit_test(test_open_finds_directories_under_sparsetune_home),
      cmocka_unit_test(test_suite_shape_and_dispatch_keys_are_canonical),
      cmocka_unit_test(test_suite_anchors_are_the_anchor_rows),
      cmocka_unit_test(test_a_list_of_ops_selects_their_shapes),
      cmocka_unit_test(test_unknown_names_give_clear_errors),
      cmocka_unit_test(test_every_m3_shape_has_tuned_variants_and_its_defaults),
      cmocka_unit_test(test_variants_always_include_the_220_defaults),
      cmocka_unit_test(test_variants_are_unique_and_read_by_the_launcher),
      cmocka_unit_test(test_variant_ids_are_stable_across_runs),
      cmocka_unit_test(test_variant_ids_follow_included_template_text),
      cmocka_unit_test(test_each_prelude_value_is_in_the_hashed_source),
      cmocka_unit_test(test_template_errors_name_the_file_and_line),
      cmocka_unit_test(test_render_fills_the_real_template),
      cmocka_unit_test(test_suite_sparse_attn_decode_shapes_cross_the_bridge),
      cmocka_unit_test(test_sparse_attn_decode_applies_over_text_parameters),
      cmocka_unit_test(test_sparse_attn_decode_variants_render_the_real_template),
      cmocka_unit_test(test_suite_sizes_stay_within_budget),
      cmocka_unit_test(test_hash_hex_is_xxh3_128_lowercase),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
