/* dsa_index_topk's tests.
 *
 * `cpu`: the reference on cases small enough to check by hand (ranges
 * clamped, empty where ke <= ks, a short range written in order; the
 * largest logits of the range whatever lies outside it; ties to the lower
 * position; NaN as -inf yet still a candidate; -0 equal to +0), the
 * verifier (it fails a position outside the range, a duplicate, a -1
 * before a position, a short range out of order, a left-out larger logit,
 * and allows an exchange among ties at the k-th), and the launcher (bad
 * arguments refused by name, variant parameters checked, plans from
 * host-known values only, the dispatch key). `gpu`: every generated
 * variant against the reference over the contract's edge cases: one query
 * token, ranges shorter than topk, topk 1 to 2048, edge ranges, padded
 * rows, ties and NaN, ranges longer than the staged 32K (the filtering and
 * the five-pass selections, and candidates past the filter's room). Skips
 * where there is no driver or GPU; with ST_TEST_COMPILE_ONLY it compiles
 * the variants only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/dsa_index_topk.h"
#include "ops/tensor_check.h"
#include "reference/dsa_index_topk.h"
#include "testutil.h"
#include "variant_matrix.h"

static uint64_t g_seed;

/* ---- reference ------------------------------------------------------------ */

#define MAX_KV 64
#define MAX_Q 4
#define MAX_TOPK 8

/* A small case: s_q rows of s_kv logits (stride s_kv + 4, NaN padding the
 * reference must not read), each row's range and its reference selection. */
typedef struct small {
  float logits[MAX_Q * (MAX_KV + 4)];
  int32_t ks[MAX_Q], ke[MAX_Q];
  int32_t out[MAX_Q * MAX_TOPK];
  st_ref_dsa_index_topk in;
} small;

static void small_init(small *c, int s_q, int s_kv, int topk) {
  memset(c, 0, sizeof *c);
  for (int i = 0; i < MAX_Q * (MAX_KV + 4); i++) c->logits[i] = NAN;
  uint64_t s = g_seed;
  for (int i = 0; i < s_q; i++) {
    for (int j = 0; j < s_kv; j++) c->logits[i * (s_kv + 4) + j] = (float)st_rand_uniform(&s, -4, 4);
    c->ks[i] = 0;
    c->ke[i] = s_kv;
  }
  c->in = (st_ref_dsa_index_topk){
      .s_q = s_q, .s_kv = s_kv, .topk = topk, .logit_stride = s_kv + 4, .logits = c->logits, .ks = c->ks, .ke = c->ke};
}

static float *row_of(small *c, int i) { return c->logits + i * c->in.logit_stride; }

static void select_small(small *c) { assert_int_equal(st_ref_dsa_index_topk_select(&c->in, c->out), 0); }

/* Row i of the selection holds exactly the positions `want` (any order),
 * then -1s. */
static void expect_set(const small *c, int i, const int32_t *want, int n) {
  const int32_t *g = c->out + i * c->in.topk;
  for (int k = 0; k < n; k++) {
    int found = 0;
    for (int j = 0; j < n; j++) found |= g[j] == want[k];
    if (!found) fail_msg("row %d: position %d not among the first %d slots", i, want[k], n);
  }
  for (int j = n; j < c->in.topk; j++) assert_int_equal(g[j], -1);
}

static void test_ranges_are_clamped_and_short_ones_written_in_order(void **state) {
  (void)state;
  small c;
  small_init(&c, 4, 10, 8);
  c.ks[0] = -5, c.ke[0] = 3;  /* 0..2 */
  c.ks[1] = 7, c.ke[1] = 100; /* 7..9 */
  c.ks[2] = 6, c.ke[2] = 6;   /* empty */
  c.ks[3] = 5, c.ke[3] = 2;   /* reversed: empty */
  select_small(&c);
  const int32_t r0[] = {0, 1, 2, -1, -1, -1, -1, -1}, r1[] = {7, 8, 9, -1, -1, -1, -1, -1};
  assert_memory_equal(c.out, r0, sizeof r0);
  assert_memory_equal(c.out + 8, r1, sizeof r1);
  for (int j = 0; j < 8; j++) assert_int_equal(c.out[16 + j], -1);
  for (int j = 0; j < 8; j++) assert_int_equal(c.out[24 + j], -1);
  char msg[256] = "";
  assert_int_equal(st_ref_dsa_index_topk_verify(&c.in, c.out, 8, msg, sizeof msg), 0);
}

static void test_picks_the_largest_of_the_range_whatever_lies_outside(void **state) {
  (void)state;
  small c;
  small_init(&c, 1, 12, 2);
  const float v[] = {100, 100, 1, 5, 3, 4, -2, 100, 100, 100, 100, 100};
  memcpy(row_of(&c, 0), v, sizeof v);
  c.ks[0] = 2, c.ke[0] = 7; /* 1, 5, 3, 4, -2 at 2..6 */
  select_small(&c);
  const int32_t want[] = {3, 5};
  expect_set(&c, 0, want, 2);
}

static void test_ties_go_to_the_lower_position(void **state) {
  (void)state;
  small c;
  small_init(&c, 1, 9, 3);
  const float v[] = {1, 2, 2, 0, 2, 2, 3, 2, -1};
  memcpy(row_of(&c, 0), v, sizeof v);
  c.ks[0] = 1;
  select_small(&c);
  const int32_t want[] = {6, 1, 2};
  expect_set(&c, 0, want, 3);
}

static void test_nan_ranks_as_minus_inf_and_is_still_a_candidate(void **state) {
  (void)state;
  small c;
  small_init(&c, 2, 5, 3);
  const float v0[] = {NAN, 1, -INFINITY, 2, NAN}, v1[] = {-INFINITY, NAN, -INFINITY, NAN, -5};
  memcpy(row_of(&c, 0), v0, sizeof v0);
  memcpy(row_of(&c, 1), v1, sizeof v1);
  select_small(&c);
  const int32_t want0[] = {3, 1, 0}; /* NaN at 0 ties -inf at 2: the lower */
  const int32_t want1[] = {4, 0, 1};
  expect_set(&c, 0, want0, 3);
  expect_set(&c, 1, want1, 3);
}

static void test_minus_zero_ties_plus_zero(void **state) {
  (void)state;
  small c;
  small_init(&c, 2, 3, 1);
  const float v0[] = {-1, -0.0f, 0.0f}, v1[] = {0.0f, -0.0f, -1};
  memcpy(row_of(&c, 0), v0, sizeof v0);
  memcpy(row_of(&c, 1), v1, sizeof v1);
  select_small(&c);
  assert_int_equal(c.out[0], 1);
  assert_int_equal(c.out[1], 0);
}

static void test_random_rows_match_a_sort(void **state) {
  (void)state;
  small c;
  small_init(&c, 4, 64, 8);
  c.ks[1] = 10, c.ke[1] = 50;
  c.ks[2] = 60;
  c.ke[3] = 8; /* exactly topk: in order */
  select_small(&c);
  for (int i = 0; i < 4; i++) {
    int lo, hi;
    st_ref_dsa_index_topk_range(&c.in, i, &lo, &hi);
    const float *r = row_of(&c, i);
    /* Each chosen logit is at least every left-out one of the range. */
    const int32_t *g = c.out + i * 8;
    for (int j = lo; j < hi; j++) {
      int in = 0;
      for (int k = 0; k < 8; k++) in |= g[k] == j;
      if (in) continue;
      for (int k = 0; k < 8; k++)
        if (g[k] >= 0 && r[g[k]] < r[j]) fail_msg("row %d: left out %d (%g) above chosen %d (%g)", i, j, r[j], g[k], r[g[k]]);
    }
  }
  char msg[256] = "";
  assert_int_equal(st_ref_dsa_index_topk_verify(&c.in, c.out, 8, msg, sizeof msg), 0);
}

static void expect_verify_fails(const small *c, const int32_t *got, const char *fragment) {
  char msg[512] = "";
  if (st_ref_dsa_index_topk_verify(&c->in, got, c->in.topk, msg, sizeof msg) == 0)
    fail_msg("the verifier passed what should fail with '%s'", fragment);
  if (!strstr(msg, fragment)) fail_msg("expected '%s' in '%s'", fragment, msg);
}

static void test_verifier_allows_ties_and_fails_wrong_selections(void **state) {
  (void)state;
  small c;
  small_init(&c, 1, 8, 3);
  const float v[] = {5, 1, 2, 2, 2, 0, 9, 9};
  memcpy(row_of(&c, 0), v, sizeof v);
  c.ke[0] = 6; /* 5 1 2 2 2 0: top 3 = 0, 2, 3 (the 2 at 4 ties the k-th) */
  select_small(&c);
  expect_set(&c, 0, (const int32_t[]){0, 2, 3}, 3);
  char msg[512] = "";
  assert_int_equal(st_ref_dsa_index_topk_verify(&c.in, (const int32_t[]){3, 0, 2}, 3, msg, sizeof msg), 0);
  assert_int_equal(st_ref_dsa_index_topk_verify(&c.in, (const int32_t[]){4, 0, 2}, 3, msg, sizeof msg), 0);
  expect_verify_fails(&c, (const int32_t[]){0, 2, 6}, "slot 2 holds 6, neither -1 nor a position of the range 0..5");
  expect_verify_fails(&c, (const int32_t[]){0, 2, 2}, "selected twice");
  expect_verify_fails(&c, (const int32_t[]){0, -1, 2}, "slot 1 holds -1: the first 3 slots hold positions");
  expect_verify_fails(&c, (const int32_t[]){0, 2, 1}, "above a chosen one");
  expect_verify_fails(&c, (const int32_t[]){0, 2, 0x7fff0000}, "neither -1 nor a position");
  /* A short range must be in order. */
  c.ks[0] = 5; /* 0 at 5: one position */
  expect_verify_fails(&c, (const int32_t[]){-1, 5, -1}, "slot 0 holds -1");
  small_init(&c, 1, 8, 3);
  c.ke[0] = 2;
  assert_int_equal(st_ref_dsa_index_topk_verify(&c.in, (const int32_t[]){0, 1, -1}, 3, msg, sizeof msg), 0);
  expect_verify_fails(&c, (const int32_t[]){1, 0, -1}, "written in order from 0");
}

/* ---- launcher ------------------------------------------------------------ */

#define FAKE(p) ((void *)(uintptr_t)(p))

/* s_q 4096 rows of 65536 logits (rows padded), top-2048. */
static st_dsa_index_topk_args valid_args(void) {
  st_dsa_index_topk_args a;
  st_dsa_index_topk_args_init(&a);
  st_tensor_contiguous(&a.logits, FAKE(0x100000), ST_DTYPE_FP32, 2, (int64_t[]){4096, 65536});
  a.logits.stride[0] = 65536 + 256;
  st_tensor_contiguous(&a.ks, FAKE(0x200000), ST_DTYPE_INT32, 1, (int64_t[]){4096});
  st_tensor_contiguous(&a.ke, FAKE(0x300000), ST_DTYPE_INT32, 1, (int64_t[]){4096});
  st_tensor_contiguous(&a.topk_idx, FAKE(0x400000), ST_DTYPE_INT32, 2, (int64_t[]){4096, 2048});
  a.topk = 2048;
  return a;
}

static void expect_refused(const st_dsa_index_topk_args *a, const char *fragment) {
  st_err err = {{0}};
  st_status s = st_dsa_index_topk_check_args(a, &err);
  if (s != ST_ERR_INVALID_ARG || !strstr(err.msg, fragment))
    fail_msg("expected refusal containing '%s', got status %d: '%s'", fragment, (int)s, err.msg);
}

static void test_valid_arguments_pass(void **state) {
  (void)state;
  st_dsa_index_topk_args a = valid_args();
  st_err err = {{0}};
  assert_int_equal(st_dsa_index_topk_check_args(&a, &err), ST_OK);
  a.topk_idx.stride[0] = 2051; /* output rows further apart than topk */
  assert_int_equal(st_dsa_index_topk_check_args(&a, &err), ST_OK);
  a = valid_args(); /* one row: its strides are free but for alignment */
  a.logits.shape[0] = a.ks.shape[0] = a.ke.shape[0] = a.topk_idx.shape[0] = 1;
  a.logits.stride[0] = 4;
  a.topk_idx.stride[0] = 1;
  assert_int_equal(st_dsa_index_topk_check_args(&a, &err), ST_OK);
  a = valid_args(); /* topk 1, and more than s_kv */
  a.topk = a.topk_idx.shape[1] = 1;
  assert_int_equal(st_dsa_index_topk_check_args(&a, &err), ST_OK);
  a = valid_args();
  a.logits.shape[1] = 100;
  assert_int_equal(st_dsa_index_topk_check_args(&a, &err), ST_OK);
}

/* clang-format off */
static void test_bad_arguments_are_refused_by_name(void **state) {
  (void)state;
  st_dsa_index_topk_args a;
  a = valid_args(); a.logits.dtype = ST_DTYPE_BF16; expect_refused(&a, "logits.dtype=");
  a = valid_args(); a.logits.ndim = 3; expect_refused(&a, "logits.ndim=3");
  a = valid_args(); a.logits.data = NULL; expect_refused(&a, "logits.data is NULL");
  a = valid_args(); a.logits.data = FAKE(0x100008); expect_refused(&a, "logits.data=");
  a = valid_args(); a.logits.stride[0] = 65532; expect_refused(&a, "logits.stride[0]=65532 is less than s_kv=65536");
  a = valid_args(); a.logits.stride[0] = 65538; expect_refused(&a, "must be 16-byte aligned (the stride a multiple of 4)");
  a = valid_args(); a.logits.stride[1] = 2; expect_refused(&a, "logits.stride[1]=2: the innermost stride must be 1");
  a = valid_args(); a.logits.shape[1] = (1 << 24) + 4; a.logits.stride[0] = (1 << 24) + 4;
  expect_refused(&a, "rows and positions are at most 2^24 each");
  a = valid_args(); a.logits.shape[0] = (1 << 24) + 1; a.ks.shape[0] = a.ke.shape[0] = a.topk_idx.shape[0] = (1 << 24) + 1;
  expect_refused(&a, "rows and positions are at most 2^24 each");
  a = valid_args(); a.ks.shape[0] = 4095; expect_refused(&a, "ks.shape[0]=4095 must equal the logits' 4096 rows");
  a = valid_args(); a.ke.dtype = ST_DTYPE_FP32; expect_refused(&a, "ke.dtype=");
  a = valid_args(); a.ke.ndim = 2; expect_refused(&a, "ke.ndim=2");
  a = valid_args(); a.ks.data = NULL; expect_refused(&a, "ks.data is NULL");
  a = valid_args(); a.topk = 0; expect_refused(&a, "topk=0 is outside 1..2048");
  a = valid_args(); a.topk = 2049; a.topk_idx.shape[1] = 2049; expect_refused(&a, "topk=2049 is outside 1..2048");
  a = valid_args(); a.topk_idx.shape[1] = 1024; expect_refused(&a, "topk_idx.shape=[4096,1024] must be [s_q=4096, topk=2048]");
  a = valid_args(); a.topk_idx.shape[0] = 1; expect_refused(&a, "topk_idx.shape=[1,2048] must be [s_q=4096, topk=2048]");
  a = valid_args(); a.topk_idx.dtype = ST_DTYPE_FP32; expect_refused(&a, "topk_idx.dtype=");
  a = valid_args(); a.topk_idx.stride[0] = 2047; expect_refused(&a, "topk_idx.stride[0]=2047 is less than topk=2048");
  a = valid_args(); a.topk_idx.data = FAKE(0x400002); expect_refused(&a, "topk_idx.data=");
  expect_refused(NULL, "args is NULL");
}
/* clang-format on */

static st_status parse(int threads, int filter, st_dsa_index_topk_config *c, st_err *err) {
  st_params k = {0}, l = {0};
  st_params_set_int(&k, "threads", threads, err);
  st_params_set_int(&k, "filter", filter, err);
  return st_dsa_index_topk_config_from_params(&k, &l, c, err);
}

static void test_variant_parameters_are_checked(void **state) {
  (void)state;
  st_dsa_index_topk_config c;
  st_err err = {{0}};
  assert_int_equal(parse(1024, 1, &c, &err), ST_OK);
  assert_int_equal(c.threads, 1024);
  assert_int_equal(c.filter, 1);
  assert_int_equal(parse(256, 0, &c, &err), ST_OK);
  assert_int_equal(parse(384, 0, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "threads=384 is not a power of two"));
  assert_int_equal(parse(2048, 0, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "threads"));
  assert_int_equal(parse(512, 2, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "filter"));
}

static void test_plans_depend_on_host_known_values_only(void **state) {
  (void)state;
  st_dsa_index_topk_args a = valid_args();
  st_dsa_index_topk_config c;
  st_err err = {{0}};
  st_dsa_index_topk_plan p;
  assert_int_equal(parse(1024, 1, &c, &err), ST_OK);
  /* 64K positions: past the staged 32K, the filter's 16K candidates. */
  assert_int_equal(st_dsa_index_topk_plan_make(&c, &a, &p, &err), ST_OK);
  assert_int_equal(p.grid[0], 4096);
  assert_int_equal(p.grid[1], 1);
  assert_int_equal(p.block, 1024);
  assert_int_equal(p.params.stage_cap, 32768);
  assert_int_equal(p.params.cand_cap, 16384);
  assert_int_equal(p.smem_bytes, 128 * 1024);
  assert_int_equal(p.params.logit_stride, 65536 + 256);
  assert_int_equal(p.params.out_stride, 2048);
  assert_int_equal(p.params.s_q, 4096);
  assert_int_equal(p.params.s_kv, 65536);
  assert_int_equal(p.params.topk, 2048);
  /* Without the filter: no candidates, every pass from L2 past 32K. */
  assert_int_equal(parse(512, 0, &c, &err), ST_OK);
  assert_int_equal(st_dsa_index_topk_plan_make(&c, &a, &p, &err), ST_OK);
  assert_int_equal(p.params.cand_cap, 0);
  assert_int_equal(p.smem_bytes, 128 * 1024);
  /* 4096 positions: every range staged whole, no candidates. */
  a.logits.shape[1] = 4096;
  assert_int_equal(parse(256, 1, &c, &err), ST_OK);
  assert_int_equal(st_dsa_index_topk_plan_make(&c, &a, &p, &err), ST_OK);
  assert_int_equal(p.params.stage_cap, 4096);
  assert_int_equal(p.params.cand_cap, 0);
  assert_int_equal(p.smem_bytes, 4096 * 4);
}

static void test_dispatch_key_is_canonical(void **state) {
  (void)state;
  st_dsa_index_topk_args a = valid_args();
  st_err err = {{0}};
  char key[256];
  st_params fields = {0};
  assert_int_equal(st_dsa_index_topk_dispatch_key(&a, key, sizeof key, &fields, &err), ST_OK);
  assert_string_equal(key, "dsa_index_topk:B=4096,kv=65536,topk=2048");
  assert_int_equal(fields.n, 3);
  assert_string_equal(st_params_get(&fields, "topk"), "2048");
  assert_int_equal(st_dsa_index_topk_dispatch_key(&a, key, 20, NULL, &err), ST_ERR_INVALID_ARG);
}

/* ---- gpu: every variant over the edge cases ------------------------------- */

typedef struct edge {
  const char *reqs;
  int topk, pad, ranges, ties, nan;
} edge;

static const edge edges[] = {
    {"1:4133", 2048, 0, 0, 0, 0},                      /* one query token, staged            */
    {"300:100", 2048, 0, 0, 0, 0},                     /* every range shorter than topk      */
    {"3:2", 1, 0, 0, 0, 0},                            /* topk 1, tiny                       */
    {"257:100", 64, 0, 1, 1, 0},                       /* edge ranges, ties                  */
    {"777:1234;5:0", 512, 1, 0, 1, 1},                 /* padded rows, ties, NaN             */
    {"200:0;1:0;130:70;64:0;1:999", 100, 0, 1, 0, 1},  /* causal batch, edge ranges, NaN     */
    {"1000:3000", 1024, 1, 0, 0, 0},                   /* many rows, staged                  */
    {"2:40000", 2048, 0, 0, 0, 0},                     /* past 32K: filtered or five passes  */
    {"4:40000", 1024, 1, 0, 1, 1},                     /* past 32K with ties and NaN         */
    {"1:100000", 2048, 0, 0, 1, 0},                    /* ties past the filter's candidates  */
};

static void make_shape(const edge *e, st_shape *s) {
  st_test_varlen_shape(s, "dsa_index_topk", e->reqs);
  st_err err = {{0}};
  long rows = 0;
  for (const char *p = e->reqs; p && *p;) {
    long q = 0, prefix = 0;
    if (sscanf(p, "%ld:%ld", &q, &prefix) != 2) break;
    rows += q + prefix;
    p = strchr(p, ';');
    p = p ? p + 1 : NULL;
  }
  st_params_set_int(&s->params, "kv", rows, &err);
  st_params_set_int(&s->params, "topk", e->topk, &err);
  st_params_set_int(&s->params, "pad", e->pad, &err);
  st_params_set_int(&s->params, "ranges", e->ranges, &err);
  st_params_set_int(&s->params, "ties", e->ties, &err);
  st_params_set_int(&s->params, "nan", e->nan, &err);
  snprintf(s->key, sizeof s->key, "edge:reqs=%s,kv=%ld,topk=%d,pad=%d,ranges=%d,ties=%d,nan=%d", e->reqs, rows,
           e->topk, e->pad, e->ranges, e->ties, e->nan);
}

static void test_every_variant_matches_the_reference_on_edge_cases(void **state) {
  (void)state;
  const int nshapes = (int)(sizeof edges / sizeof edges[0]);
  st_shape shapes[sizeof edges / sizeof edges[0]];
  for (int i = 0; i < nshapes; i++) make_shape(&edges[i], &shapes[i]);
  st_test_every_variant("dsa_index_topk", shapes, nshapes, g_seed);
}

int main(int argc, char **argv) {
  const char *part = argc > 1 ? argv[1] : "";
  if (strcmp(part, "cpu") == 0) {
    g_seed = st_test_seed("dsa_index_topk_cpu");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranges_are_clamped_and_short_ones_written_in_order),
        cmocka_unit_test(test_picks_the_largest_of_the_range_whatever_lies_outside),
        cmocka_unit_test(test_ties_go_to_the_lower_position),
        cmocka_unit_test(test_nan_ranks_as_minus_inf_and_is_still_a_candidate),
        cmocka_unit_test(test_minus_zero_ties_plus_zero),
        cmocka_unit_test(test_random_rows_match_a_sort),
        cmocka_unit_test(test_verifier_allows_ties_and_fails_wrong_selections),
        cmocka_unit_test(test_valid_arguments_pass),
        cmocka_unit_test(test_bad_arguments_are_refused_by_name),
        cmocka_unit_test(test_variant_parameters_are_checked),
        cmocka_unit_test(test_plans_depend_on_host_known_values_only),
        cmocka_unit_test(test_dispatch_key_is_canonical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
  }
  if (strcmp(part, "gpu") == 0) {
    const int rc = st_test_require_gpu(); /* 0 when only compiling */
    if (rc) return rc;
    g_seed = st_test_seed("dsa_index_topk_gpu");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_variant_matches_the_reference_on_edge_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
  }
  fprintf(stderr, "usage: %s cpu|gpu\n", argv[0]);
  return 2;
}
