/* dsa_index_logits's tests.
 *
 * `cpu`: the double-precision reference on cases small enough to check by
 * hand (the weighted sum of relu'd, scaled dots; relu drops negative dots
 * and the weights keep their sign; the scale multiplies the dot inside relu,
 * whatever its sign; -inf outside each query's clamped range, none for
 * ke <= ks; NaN values make NaN logits), the verifier (it fails a wrong
 * value, a finite value outside a range, a lost NaN, and allows fp32
 * rounding), and the launcher (bad arguments refused by name, variant
 * parameters checked, fit, plans from host-known values only, the dispatch
 * key). `gpu`: every generated variant against the reference over the
 * contract's edge cases: one query token, H 1, 16, 32 and 50, token counts
 * no tile divides (5 of them too), causal requests with and without
 * prefixes in one batch, edge ranges (reversed, empty, negative, past
 * s_kv), padded k and logits rows, NaN values. Skips where there is no
 * driver or GPU; with ST_TEST_COMPILE_ONLY it compiles the variants only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/dsa_index_logits.h"
#include "ops/tensor_check.h"
#include "reference/dsa_index_logits.h"
#include "reference/dtype.h"
#include "testutil.h"
#include "variant_matrix.h"

#define D ST_REF_DSA_LOGITS_HEAD_DIM

static uint64_t g_seed;

/* ---- reference fixtures --------------------------------------------------- */

typedef struct fixture {
  st_ref_dsa_index_logits in;
  uint8_t *q, *k;
  float *w, *scale;
  int32_t *ks, *ke;
  double *logits, *row_scale;
} fixture;

/* Random inputs (q and k in [-4, 4) as fp8, weights in [-1, 1), scales in
 * [0.5, 2)), k rows 16 bytes further apart than their 128 (NaN bytes
 * between them the reference must not read), every query seeing all rows. */
static fixture make(int s_q, int s_kv, int H) {
  fixture f;
  memset(&f, 0, sizeof f);
  const int64_t stride = D + 16;
  f.q = malloc((size_t)s_q * (size_t)H * D);
  f.k = malloc((size_t)(s_kv * stride));
  f.w = malloc(sizeof(float) * (size_t)s_q * (size_t)H);
  f.scale = malloc(sizeof(float) * (size_t)s_kv);
  f.ks = malloc(sizeof(int32_t) * (size_t)s_q);
  f.ke = malloc(sizeof(int32_t) * (size_t)s_q);
  f.logits = malloc(sizeof(double) * (size_t)s_q * (size_t)s_kv);
  f.row_scale = malloc(sizeof(double) * (size_t)s_q);
  uint64_t s = g_seed;
  for (int i = 0; i < s_q * H * D; i++) f.q[i] = st_float_to_fp8_e4m3((float)st_rand_uniform(&s, -4, 4));
  for (int i = 0; i < s_q * H; i++) f.w[i] = (float)st_rand_uniform(&s, -1, 1);
  for (int j = 0; j < s_kv; j++) {
    for (int d = 0; d < D; d++) f.k[j * stride + d] = st_float_to_fp8_e4m3((float)st_rand_uniform(&s, -4, 4));
    memset(f.k + j * stride + D, 0x7f, (size_t)(stride - D));
    f.scale[j] = (float)st_rand_uniform(&s, 0.5, 2);
  }
  for (int i = 0; i < s_q; i++) {
    f.ks[i] = 0;
    f.ke[i] = s_kv;
  }
  f.in = (st_ref_dsa_index_logits){.s_q = s_q,
                                   .s_kv = s_kv,
                                   .H = H,
                                   .k_stride = stride,
                                   .q = f.q,
                                   .weights = f.w,
                                   .k = f.k,
                                   .k_scale = f.scale,
                                   .ks = f.ks,
                                   .ke = f.ke};
  return f;
}

static void run(fixture *f) {
  assert_int_equal(st_ref_dsa_index_logits_compute(&f->in, f->logits, f->row_scale, 2), 0);
}

static void release(fixture *f) {
  free(f->q);
  free(f->k);
  free(f->w);
  free(f->scale);
  free(f->ks);
  free(f->ke);
  free(f->logits);
  free(f->row_scale);
}

static double at(const fixture *f, int i, int j) { return f->logits[(int64_t)i * f->in.s_kv + j]; }

/* Row j of k set to `value` everywhere, with scale `scale`. */
static void set_row(fixture *f, int j, float value, float scale) {
  memset(f->k + j * f->in.k_stride, st_float_to_fp8_e4m3(value), D);
  f->scale[j] = scale;
}

/* dot(q[i][h], k[j]) from the bytes, by hand. */
static double dot(const fixture *f, int i, int h, int j) {
  double s = 0;
  for (int d = 0; d < D; d++)
    s += (double)st_fp8_e4m3_to_float(f->q[((int64_t)i * f->in.H + h) * D + d]) *
         (double)st_fp8_e4m3_to_float(f->k[j * f->in.k_stride + d]);
  return s;
}

/* ---- reference ----------------------------------------------------------- */

static void test_logit_is_the_weighted_sum_of_relu_scaled_dots(void **state) {
  (void)state;
  fixture f = make(5, 40, 3);
  const int32_t ks[] = {0, 3, 10, 39, 0}, ke[] = {1, 20, 40, 40, 40};
  memcpy(f.ks, ks, sizeof ks);
  memcpy(f.ke, ke, sizeof ke);
  run(&f);
  for (int i = 0; i < 5; i++) {
    double biggest = 0;
    for (int j = 0; j < 40; j++) {
      if (j < ks[i] || j >= ke[i]) {
        assert_true(isinf(at(&f, i, j)) && at(&f, i, j) < 0);
        continue;
      }
      double want = 0;
      for (int h = 0; h < 3; h++) {
        const double x = dot(&f, i, h, j) * f.scale[j];
        want += f.w[i * 3 + h] * (x > 0 ? x : 0);
      }
      assert_true(fabs(at(&f, i, j) - want) <= 1e-12 * (1 + fabs(want)));
      biggest = fmax(biggest, fabs(want));
    }
    /* The row's scale bounds every |logit| of it. */
    assert_true(f.row_scale[i] >= biggest);
    assert_true(f.row_scale[i] > 0);
  }
  release(&f);
}

static void test_relu_drops_negative_dots_and_weights_keep_their_sign(void **state) {
  (void)state;
  fixture f = make(1, 8, 1);
  memset(f.q, st_float_to_fp8_e4m3(1.0f), D);
  for (int j = 0; j < 8; j++) set_row(&f, j, j % 2 ? -1.0f : 0.5f, 1.0f + (float)j / 8);
  f.w[0] = 2.0f;
  run(&f);
  /* Odd rows dot to -128 x scale: relu gives 0, not a negative logit. */
  assert_true(at(&f, 0, 1) == 0.0);
  assert_true(fabs(at(&f, 0, 2) - 2.0 * 64 * (1.0 + 2.0 / 8)) < 1e-9);
  f.w[0] = -2.0f;
  run(&f);
  assert_true(fabs(at(&f, 0, 2) + 2.0 * 64 * (1.0 + 2.0 / 8)) < 1e-9);
  assert_true(at(&f, 0, 3) == 0.0);
  release(&f);
}

/* As dsa_index_decode: relu(dot x scale), so a scale <= 0 is no error: a
 * negative scale turns a negative dot into a positive term, zero gives 0. */
static void test_scale_multiplies_the_dot_inside_relu_whatever_its_sign(void **state) {
  (void)state;
  fixture f = make(1, 4, 1);
  memset(f.q, st_float_to_fp8_e4m3(1.0f), D);
  f.w[0] = 1.0f;
  set_row(&f, 0, 1.0f, -0.5f);  /* dot 128: relu(-64) = 0      */
  set_row(&f, 1, -1.0f, -0.5f); /* dot -128: relu(64) = 64     */
  set_row(&f, 2, 1.0f, 0.0f);   /* relu(0) = 0                 */
  set_row(&f, 3, 2.0f, 0.25f);  /* dot 256: 64                 */
  run(&f);
  assert_true(at(&f, 0, 0) == 0.0);
  assert_true(at(&f, 0, 1) == 64.0);
  assert_true(at(&f, 0, 2) == 0.0);
  assert_true(at(&f, 0, 3) == 64.0);
  release(&f);
}

static void test_ranges_are_clamped_and_empty_where_ke_is_not_above_ks(void **state) {
  (void)state;
  fixture f = make(6, 30, 2);
  const int32_t ks[] = {-10, 25, 7, 7, 30, INT32_MIN}, ke[] = {5, 1000, 7, 3, 31, INT32_MAX};
  memcpy(f.ks, ks, sizeof ks);
  memcpy(f.ke, ke, sizeof ke);
  run(&f);
  const int lo[] = {0, 25, 7, 7, 30, 0}, hi[] = {5, 30, 7, 7, 30, 30};
  for (int i = 0; i < 6; i++) {
    int a, b;
    st_ref_dsa_index_logits_range(&f.in, i, &a, &b);
    assert_int_equal(a, lo[i]);
    assert_int_equal(b, hi[i]);
    for (int j = 0; j < 30; j++) {
      const int inside = j >= lo[i] && j < hi[i];
      assert_int_equal(isinf(at(&f, i, j)) && at(&f, i, j) < 0, !inside);
    }
    if (lo[i] == hi[i]) assert_true(f.row_scale[i] == 0.0);
  }
  release(&f);
}

static void test_nan_values_make_nan_logits(void **state) {
  (void)state;
  fixture f = make(3, 6, 2);
  f.k[4 * f.in.k_stride + 9] = 0x7f; /* an e4m3 NaN in row 4 */
  f.q[(2 * 2 + 1) * D + 100] = 0xff; /* and in query 2's head 1 */
  f.ks[1] = 0;
  f.ke[1] = 4; /* query 1 does not see row 4 */
  run(&f);
  assert_true(isnan(at(&f, 0, 4)));
  assert_false(isnan(at(&f, 0, 3)));
  assert_true(isinf(at(&f, 1, 4)));
  for (int j = 0; j < 6; j++) assert_true(isnan(at(&f, 2, j)));
  release(&f);
}

/* ---- verifier ------------------------------------------------------------ */

static void test_verifier_allows_rounding_and_fails_wrong_values(void **state) {
  (void)state;
  fixture f = make(4, 50, 8);
  f.ks[1] = 10;
  f.ke[1] = 20;
  f.ks[2] = 30;
  f.ke[2] = 30;                  /* empty */
  f.k[7 * f.in.k_stride] = 0x7f; /* row 7 NaN for the rows that see it */
  run(&f);
  const int64_t stride = 52;
  float *got = malloc(sizeof(float) * 4 * (size_t)stride);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 50; j++) got[i * stride + j] = (float)at(&f, i, j); /* fp32 rounding */
  char msg[512];
  double worst = 0;
  assert_int_equal(
      st_ref_dsa_index_logits_verify(&f.in, f.logits, f.row_scale, got, stride, 1e-6, &worst, msg, sizeof msg), 0);
  assert_true(worst < 1e-6);
  /* A value 1e-3 of the row's scale off fails, naming query and token. */
  const float kept = got[3 * stride + 11];
  got[3 * stride + 11] = (float)(at(&f, 3, 11) + 1e-3 * f.row_scale[3]);
  assert_int_equal(
      st_ref_dsa_index_logits_verify(&f.in, f.logits, f.row_scale, got, stride, 1e-4, &worst, msg, sizeof msg), 1);
  assert_non_null(strstr(msg, "query 3 token 11"));
  assert_true(worst > 9e-4);
  got[3 * stride + 11] = kept;
  /* A finite value where the row sees nothing must be -inf. */
  got[1 * stride + 25] = 0.0f;
  assert_int_equal(
      st_ref_dsa_index_logits_verify(&f.in, f.logits, f.row_scale, got, stride, 1e-4, &worst, msg, sizeof msg), 1);
  assert_non_null(strstr(msg, "must be -inf"));
  got[1 * stride + 25] = -INFINITY;
  /* A lost NaN, and a NaN where the reference has a number, fail. */
  got[0 * stride + 7] = 1.0f;
  got[0 * stride + 8] = NAN;
  assert_int_equal(
      st_ref_dsa_index_logits_verify(&f.in, f.logits, f.row_scale, got, stride, 1e-4, &worst, msg, sizeof msg), 2);
  assert_non_null(strstr(msg, "query 0 token 7"));
  free(got);
  release(&f);
}

/* ---- launcher ------------------------------------------------------------ */

#define FAKE(p) ((void *)(uintptr_t)(p))

/* s_q 4096 queries of H 64 against s_kv 65536 rows, logits rows padded. */
static st_dsa_index_logits_args valid_args(void) {
  st_dsa_index_logits_args a;
  st_dsa_index_logits_args_init(&a);
  st_tensor_contiguous(&a.q, FAKE(0x100000), ST_DTYPE_FP8_E4M3, 3, (int64_t[]){4096, 64, 128});
  st_tensor_contiguous(&a.k, FAKE(0x200000), ST_DTYPE_FP8_E4M3, 2, (int64_t[]){65536, 128});
  st_tensor_contiguous(&a.k_scale, FAKE(0x300000), ST_DTYPE_FP32, 1, (int64_t[]){65536});
  st_tensor_contiguous(&a.weights, FAKE(0x400000), ST_DTYPE_FP32, 2, (int64_t[]){4096, 64});
  st_tensor_contiguous(&a.ks, FAKE(0x500000), ST_DTYPE_INT32, 1, (int64_t[]){4096});
  st_tensor_contiguous(&a.ke, FAKE(0x600000), ST_DTYPE_INT32, 1, (int64_t[]){4096});
  st_tensor_contiguous(&a.logits, FAKE(0x700000), ST_DTYPE_FP32, 2, (int64_t[]){4096, 65536});
  a.logits.stride[0] = 65536 + 256;
  return a;
}

static void expect_refused(const st_dsa_index_logits_args *a, const char *fragment) {
  st_err err = {{0}};
  st_status s = st_dsa_index_logits_check_args(a, &err);
  if (s != ST_ERR_INVALID_ARG || !strstr(err.msg, fragment))
    fail_msg("expected refusal containing '%s', got status %d: '%s'", fragment, (int)s, err.msg);
}

static void test_valid_arguments_pass(void **state) {
  (void)state;
  st_dsa_index_logits_args a = valid_args();
  st_err err = {{0}};
  assert_int_equal(st_dsa_index_logits_check_args(&a, &err), ST_OK);
  a.k.stride[0] = 144; /* k rows further apart than their bytes */
  a.q.shape[1] = 1;    /* one head */
  a.weights.shape[1] = 1;
  assert_int_equal(st_dsa_index_logits_check_args(&a, &err), ST_OK);
  a = valid_args(); /* one query token: its row stride is free but for alignment */
  a.q.shape[0] = a.weights.shape[0] = a.ks.shape[0] = a.ke.shape[0] = a.logits.shape[0] = 1;
  a.logits.stride[0] = 4;
  assert_int_equal(st_dsa_index_logits_check_args(&a, &err), ST_OK);
}

/* clang-format off */
static void test_bad_arguments_are_refused_by_name(void **state) {
  (void)state;
  st_dsa_index_logits_args a;
  a = valid_args(); a.q.dtype = ST_DTYPE_BF16; expect_refused(&a, "q.dtype=1");
  a = valid_args(); a.q.ndim = 2; expect_refused(&a, "q.ndim=2");
  a = valid_args(); a.q.shape[2] = 64; expect_refused(&a, "q.shape[2]=64 must be the head dim 128");
  a = valid_args(); a.q.shape[1] = 65; expect_refused(&a, "q.shape[1]=65 heads exceed 64");
  a = valid_args(); a.q.shape[0] = (1 << 24) + 1; expect_refused(&a, "q.shape[0]=16777217 query tokens exceed 2^24");
  a = valid_args(); a.q.data = FAKE(0x100008); expect_refused(&a, "q.data=");
  a = valid_args(); a.q.stride[1] = 136; expect_refused(&a, "q.stride[1]=136 elements is not a multiple of 16");
  a = valid_args(); a.k.dtype = ST_DTYPE_FP32; expect_refused(&a, "k.dtype=");
  a = valid_args(); a.k.shape[1] = 64; expect_refused(&a, "k.shape[1]=64 must be the head dim 128");
  a = valid_args(); a.k.shape[0] = (1 << 24) + 4; a.k_scale.shape[0] = a.k.shape[0];
  expect_refused(&a, "k.shape[0]=16777220 tokens exceed 2^24");
  a = valid_args(); a.k.stride[0] = 136; expect_refused(&a, "k.stride[0]=136 elements is not a multiple of 16");
  a = valid_args(); a.k.data = FAKE(0x200004); expect_refused(&a, "k.data=");
  a = valid_args(); a.k_scale.shape[0] = 65535; expect_refused(&a, "k_scale.shape[0]=65535 must equal k's 65536 tokens");
  a = valid_args(); a.k_scale.dtype = ST_DTYPE_BF16; expect_refused(&a, "k_scale.dtype");
  a = valid_args(); a.k_scale.stride[0] = 2; expect_refused(&a, "k_scale.stride[0]=2: the innermost stride must be 1");
  a = valid_args(); a.weights.shape[1] = 32; expect_refused(&a, "weights.shape=[4096,32] must be [s_q=4096, H=64]");
  a = valid_args(); a.weights.data = NULL; expect_refused(&a, "weights.data is NULL");
  a = valid_args(); a.ks.shape[0] = 4095; expect_refused(&a, "ks.shape[0]=4095 must equal q's 4096 query tokens");
  a = valid_args(); a.ke.dtype = ST_DTYPE_FP32; expect_refused(&a, "ke.dtype=");
  a = valid_args(); a.ke.ndim = 2; expect_refused(&a, "ke.ndim=2");
  a = valid_args(); a.logits.shape[1] = 65535; expect_refused(&a, "logits.shape=[4096,65535] must be [s_q=4096, s_kv=65536]");
  a = valid_args(); a.logits.stride[0] = 65532; expect_refused(&a, "logits.stride[0]=65532 is less than s_kv=65536");
  a = valid_args(); a.logits.stride[0] = 65538; expect_refused(&a, "must be 16-byte aligned (the stride a multiple of 4)");
  a = valid_args(); a.logits.data = FAKE(0x700008); expect_refused(&a, "logits.data=");
  a = valid_args(); a.logits.dtype = ST_DTYPE_BF16; expect_refused(&a, "logits.dtype=");
  expect_refused(NULL, "args is NULL");
}
/* clang-format on */

typedef struct cfg_values {
  int max_heads, queries, head_tiles, tokens, threads, stages, splits;
} cfg_values;

static st_status parse(cfg_values v, st_dsa_index_logits_config *c, st_err *err) {
  st_params k = {0}, l = {0};
  st_params_set_int(&k, "max_heads", v.max_heads, err);
  st_params_set_int(&k, "queries", v.queries, err);
  st_params_set_int(&k, "head_tiles", v.head_tiles, err);
  st_params_set_int(&k, "tokens", v.tokens, err);
  st_params_set_int(&k, "threads", v.threads, err);
  st_params_set_int(&k, "stages", v.stages, err);
  st_params_set_int(&l, "splits", v.splits, err);
  return st_dsa_index_logits_config_from_params(&k, &l, c, err);
}

static void test_variant_parameters_must_divide_into_warps(void **state) {
  (void)state;
  st_dsa_index_logits_config c;
  st_err err = {{0}};
  assert_int_equal(parse((cfg_values){64, 4, 2, 128, 256, 3, 0}, &c, &err), ST_OK);
  assert_int_equal(parse((cfg_values){64, 1, 1, 64, 512, 2, 0}, &c, &err), ST_OK); /* 4 head x 4 token groups */
  assert_int_equal(parse((cfg_values){48, 1, 2, 64, 128, 2, 0}, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "max_heads=48 is not a multiple of head_tiles=2"));
  assert_int_equal(parse((cfg_values){64, 8, 1, 128, 256, 3, 0}, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "threads=256 does not divide into queries=8 x 4 head groups"));
  /* 16 warps of one head group: 16 token groups, but 64 tokens are 4 steps. */
  assert_int_equal(parse((cfg_values){16, 1, 1, 64, 512, 2, 0}, &c, &err), ST_ERR_INVALID_ARG);
  assert_int_equal(parse((cfg_values){64, 4, 2, 100, 256, 3, 0}, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "tokens=100 is not a multiple of 16"));
  assert_int_equal(parse((cfg_values){64, 4, 2, 128, 256, 5, 0}, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "stages"));
}

static void test_variant_fit_names_the_mismatch(void **state) {
  (void)state;
  st_dsa_index_logits_args a = valid_args();
  st_dsa_index_logits_config c;
  st_err err = {{0}};
  assert_int_equal(parse((cfg_values){64, 4, 2, 128, 256, 3, 0}, &c, &err), ST_OK);
  assert_int_equal(st_dsa_index_logits_check_fit(&c, &a, &err), ST_OK);
  assert_int_equal(parse((cfg_values){32, 8, 2, 128, 256, 3, 0}, &c, &err), ST_OK);
  assert_int_equal(st_dsa_index_logits_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "H <= 32 heads, call has 64"));
  st_dsa_index_logits_plan p;
  assert_int_equal(st_dsa_index_logits_plan_make(&c, &a, 132, &p, &err), ST_ERR_NO_VARIANT);
}

static void test_plans_depend_on_host_known_values_only(void **state) {
  (void)state;
  st_dsa_index_logits_args a = valid_args();
  st_dsa_index_logits_config c;
  st_err err = {{0}};
  st_dsa_index_logits_plan p;
  assert_int_equal(parse((cfg_values){64, 4, 2, 128, 256, 3, 0}, &c, &err), ST_OK);
  /* 1024 query tiles already exceed 4 CTAs on each of 132 SMs: one slice. */
  assert_int_equal(st_dsa_index_logits_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.grid[0], 1024);
  assert_int_equal(p.grid[1], 1);
  assert_int_equal(p.splits, 1);
  assert_int_equal(p.block, 256);
  assert_int_equal(p.params.tiles_per_split, 512);
  /* 3 stages of 128 rows of 132 bytes, partials of 4 queries x 2 head
   * groups x 128 tokens. */
  assert_int_equal(p.smem_bytes, 3 * 128 * 132 + 4 * 2 * 128 * 4);
  assert_int_equal(p.params.logit_stride, 65536 + 256);
  assert_int_equal(p.params.s_q, 4096);
  assert_int_equal(p.params.s_kv, 65536);
  assert_int_equal(p.params.num_heads, 64);
  /* One query token against 4134 rows: slices of a tile each, up to the
   * 33 tiles there are. */
  a.q.shape[0] = a.weights.shape[0] = a.ks.shape[0] = a.ke.shape[0] = a.logits.shape[0] = 1;
  a.k.shape[0] = a.k_scale.shape[0] = a.logits.shape[1] = 4134;
  assert_int_equal(st_dsa_index_logits_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.grid[0], 1);
  assert_int_equal(p.splits, 33);
  assert_int_equal(p.params.tiles_per_split, 1);
  /* 30 query tiles: ceil(528 / 30) = 18 slices of 2 tiles (33 / 18 rounded up). */
  a.q.shape[0] = a.weights.shape[0] = a.ks.shape[0] = a.ke.shape[0] = a.logits.shape[0] = 120;
  assert_int_equal(st_dsa_index_logits_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.grid[0], 30);
  assert_int_equal(p.splits, 18);
  assert_int_equal(p.params.tiles_per_split, 2);
  /* An explicit split count is kept (bounded by the tiles). */
  assert_int_equal(parse((cfg_values){64, 4, 2, 128, 256, 3, 7}, &c, &err), ST_OK);
  assert_int_equal(st_dsa_index_logits_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.grid[1], 7);
  assert_int_equal(p.params.tiles_per_split, 5);
  assert_int_equal(parse((cfg_values){64, 4, 2, 128, 256, 3, 64}, &c, &err), ST_OK);
  assert_int_equal(st_dsa_index_logits_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.grid[1], 33);
}

static void test_dispatch_key_is_canonical(void **state) {
  (void)state;
  st_dsa_index_logits_args a = valid_args();
  st_err err = {{0}};
  char key[256];
  st_params fields = {0};
  assert_int_equal(st_dsa_index_logits_dispatch_key(&a, key, sizeof key, &fields, &err), ST_OK);
  assert_string_equal(key, "dsa_index_logits:B=4096,H=64,kv=65536");
  assert_int_equal(fields.n, 3);
  assert_string_equal(st_params_get(&fields, "kv"), "65536");
  assert_int_equal(st_dsa_index_logits_dispatch_key(&a, key, 20, NULL, &err), ST_ERR_INVALID_ARG);
}

/* ---- gpu: every variant over the edge cases ------------------------------- */

typedef struct edge {
  const char *reqs;
  int H, pad, ranges, nan;
} edge;

static const edge edges[] = {
    {"1:4133", 64, 0, 0, 0},                      /* one query token, a long prefix   */
    {"300:1000", 1, 0, 0, 0},                     /* one head                         */
    {"777:1234;5:0", 50, 1, 0, 0},                /* H 50, padded rows, 2016 rows     */
    {"257:100", 16, 0, 1, 0},                     /* H 16, edge ranges                */
    {"129:333;3:0", 32, 1, 1, 0},                 /* H 32                             */
    {"3:2", 64, 0, 0, 0},                         /* 5 rows: under one 16-byte store  */
    {"200:0;1:0;130:70;64:0;1:999", 64, 0, 1, 0}, /* causal batch, edge ranges */
    {"1000:3000", 64, 1, 0, 0},                   /* many query tiles, long rows      */
    {"100:500", 64, 0, 0, 1},                     /* NaN values                       */
};

static void make_shape(const edge *e, st_shape *s) {
  st_test_varlen_shape(s, "dsa_index_logits", e->reqs);
  st_err err = {{0}};
  long rows = 0;
  for (const char *p = e->reqs; p && *p;) {
    long q = 0, prefix = 0;
    if (sscanf(p, "%ld:%ld", &q, &prefix) != 2) break;
    rows += q + prefix;
    p = strchr(p, ';');
    p = p ? p + 1 : NULL;
  }
  st_params_set_int(&s->params, "H", e->H, &err);
  st_params_set_int(&s->params, "kv", rows, &err);
  st_params_set_int(&s->params, "pad", e->pad, &err);
  st_params_set_int(&s->params, "ranges", e->ranges, &err);
  st_params_set_int(&s->params, "nan", e->nan, &err);
  snprintf(s->key, sizeof s->key, "edge:reqs=%s,H=%d,kv=%ld,pad=%d,ranges=%d,nan=%d", e->reqs, e->H, rows, e->pad,
           e->ranges, e->nan);
}

static void test_every_variant_matches_the_reference_on_edge_cases(void **state) {
  (void)state;
  const int nshapes = (int)(sizeof edges / sizeof edges[0]);
  st_shape shapes[sizeof edges / sizeof edges[0]];
  for (int i = 0; i < nshapes; i++) make_shape(&edges[i], &shapes[i]);
  st_test_every_variant("dsa_index_logits", shapes, nshapes, g_seed);
}

int main(int argc, char **argv) {
  const char *part = argc > 1 ? argv[1] : "";
  if (strcmp(part, "cpu") == 0) {
    g_seed = st_test_seed("dsa_index_logits_cpu");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logit_is_the_weighted_sum_of_relu_scaled_dots),
        cmocka_unit_test(test_relu_drops_negative_dots_and_weights_keep_their_sign),
        cmocka_unit_test(test_scale_multiplies_the_dot_inside_relu_whatever_its_sign),
        cmocka_unit_test(test_ranges_are_clamped_and_empty_where_ke_is_not_above_ks),
        cmocka_unit_test(test_nan_values_make_nan_logits),
        cmocka_unit_test(test_verifier_allows_rounding_and_fails_wrong_values),
        cmocka_unit_test(test_valid_arguments_pass),
        cmocka_unit_test(test_bad_arguments_are_refused_by_name),
        cmocka_unit_test(test_variant_parameters_must_divide_into_warps),
        cmocka_unit_test(test_variant_fit_names_the_mismatch),
        cmocka_unit_test(test_plans_depend_on_host_known_values_only),
        cmocka_unit_test(test_dispatch_key_is_canonical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
  }
  if (strcmp(part, "gpu") == 0) {
    const int rc = st_test_require_gpu(); /* 0 when only compiling */
    if (rc) return rc;
    g_seed = st_test_seed("dsa_index_logits_gpu");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_variant_matches_the_reference_on_edge_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
  }
  fprintf(stderr, "usage: %s cpu|gpu\n", argv[0]);
  return 2;
}
