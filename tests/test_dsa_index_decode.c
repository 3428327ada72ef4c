/* dsa_index_decode's tests.
 *
 * `cpu`: the double-precision reference on cases small enough to check by
 * hand (relu drops negative dots, the weights' sign, the scales read from
 * the end of each page, the causal limit of each query token, -1 padding
 * when fewer tokens than topk are visible, padding requests, ties to the
 * lower position, NaN as -inf), the verifier (it fails a wrong set and
 * allows swaps among ties), and the launcher (bad arguments refused by
 * name, fit, plans from host-known values only, the dispatch key).
 * `gpu`: every generated variant against the reference over the contract's
 * edge cases: lengths around page borders and topk, padding rows, topk
 * above the visible tokens, qlen 1 to 4, H not a multiple of 8, an
 * unaligned page size, all tokens tied, ties in runs of a page, NaN
 * values, a batch of 40 mixed lengths. Each variant runs twice per shape
 * (the second run checks that the workspace needs nothing between
 * launches). Skips where there is no driver or GPU; with
 * ST_TEST_COMPILE_ONLY it compiles the variants only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/dsa_index_decode.h"
#include "ops/tensor_check.h"
#include "reference/dsa_index_decode.h"
#include "reference/dtype.h"
#include "testutil.h"
#include "variant_matrix.h"

#define D ST_REF_DSA_HEAD_DIM

static uint64_t g_seed;

/* ---- reference fixtures --------------------------------------------------- */

typedef struct fixture {
  st_ref_dsa_index_decode in;
  uint8_t *q, *pool;
  float *w;
  int32_t *bt, *seq;
  double *logits;
  int32_t *out;
} fixture;

/* Random inputs (never zero: q and values in [-4, 4) as fp8, weights in
 * [-1, 1), scales in [0.5, 2)) for R requests of the given lengths; pages a
 * little longer than their bytes (the stride is not the page size), the
 * block table in reverse so that logical and physical pages differ, and
 * entries past a request's pages set to garbage the reference must not
 * follow. */
static fixture make(int R, int qlen, int H, int page, int topk, int max_ctx, const int *lens) {
  fixture f;
  memset(&f, 0, sizeof f);
  const int mp = (max_ctx + page - 1) / page;
  const int64_t pages = (int64_t)R * mp + 3, stride = ((int64_t)page * (D + 4) + 15) / 16 * 16 + 16;
  const int rows = R * qlen;
  f.q = malloc((size_t)rows * (size_t)H * D);
  f.w = malloc(sizeof(float) * (size_t)rows * (size_t)H);
  f.pool = malloc((size_t)(pages * stride));
  f.bt = malloc(sizeof(int32_t) * (size_t)R * (size_t)mp);
  f.seq = malloc(sizeof(int32_t) * (size_t)R);
  f.logits = malloc(sizeof(double) * (size_t)rows * (size_t)max_ctx);
  f.out = malloc(sizeof(int32_t) * (size_t)rows * (size_t)topk);
  uint64_t s = g_seed;
  for (int i = 0; i < rows * H * D; i++) f.q[i] = st_float_to_fp8_e4m3((float)st_rand_uniform(&s, -4, 4));
  for (int i = 0; i < rows * H; i++) f.w[i] = (float)st_rand_uniform(&s, -1, 1);
  for (int64_t pg = 0; pg < pages; pg++) {
    uint8_t *base = f.pool + pg * stride;
    for (int i = 0; i < page * D; i++) base[i] = st_float_to_fp8_e4m3((float)st_rand_uniform(&s, -4, 4));
    for (int k = 0; k < page; k++) {
      const float scale = (float)st_rand_uniform(&s, 0.5, 2);
      memcpy(base + page * D + k * 4, &scale, 4);
    }
    memset(base + page * (D + 4), 0xff, (size_t)(stride - page * (D + 4))); /* padding: NaN bytes */
  }
  for (int r = 0; r < R; r++) {
    f.seq[r] = lens[r];
    for (int j = 0; j < mp; j++)
      f.bt[r * mp + j] = j * page < lens[r] ? (int32_t)(pages - 1 - (r * mp + j)) : (j % 2 ? -1 : INT32_MAX);
  }
  f.in = (st_ref_dsa_index_decode){.R = R,
                                   .qlen = qlen,
                                   .H = H,
                                   .topk = topk,
                                   .page_size = page,
                                   .max_context = max_ctx,
                                   .bt_cols = mp,
                                   .pages = pages,
                                   .page_stride = stride,
                                   .q = f.q,
                                   .weights = f.w,
                                   .k_pool = f.pool,
                                   .block_table = f.bt,
                                   .seq_lens = f.seq};
  return f;
}

static void run(fixture *f) {
  assert_int_equal(st_ref_dsa_index_decode_logits(&f->in, f->logits, 2), 0);
  st_ref_dsa_index_decode_select(&f->in, f->logits, f->out);
}

static void release(fixture *f) {
  free(f->q);
  free(f->w);
  free(f->pool);
  free(f->bt);
  free(f->seq);
  free(f->logits);
  free(f->out);
}

/* Byte address of token `tok` of request r's values and scale, found by
 * hand from the layout the contract gives (values first, then scales). */
static const uint8_t *token_values(const fixture *f, int r, int tok) {
  const int page = f->in.page_size;
  return f->pool + (int64_t)f->bt[r * f->in.bt_cols + tok / page] * f->in.page_stride + (tok % page) * D;
}

static float token_scale(const fixture *f, int r, int tok) {
  const int page = f->in.page_size;
  float s;
  memcpy(&s, f->pool + (int64_t)f->bt[r * f->in.bt_cols + tok / page] * f->in.page_stride + page * D + (tok % page) * 4,
         4);
  return s;
}

static double dot(const fixture *f, int row, int h, int r, int tok) {
  const uint8_t *k = token_values(f, r, tok);
  double s = 0;
  for (int d = 0; d < D; d++)
    s += (double)st_fp8_e4m3_to_float(f->q[(row * f->in.H + h) * D + d]) * (double)st_fp8_e4m3_to_float(k[d]);
  return s * token_scale(f, r, tok);
}

static void set_token(fixture *f, int r, int tok, float value, float scale) {
  uint8_t *k = (uint8_t *)token_values(f, r, tok);
  memset(k, st_float_to_fp8_e4m3(value), D);
  uint8_t *sp = f->pool + (int64_t)f->bt[r * f->in.bt_cols + tok / f->in.page_size] * f->in.page_stride +
                f->in.page_size * D + (tok % f->in.page_size) * 4;
  memcpy(sp, &scale, 4);
}

/* Sorted copy of a row's ids, -1s first. */
static void sorted_row(const int32_t *row, int n, int32_t *out) {
  memcpy(out, row, sizeof(int32_t) * (size_t)n);
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && out[j - 1] > out[j]; j--) {
      const int32_t t = out[j];
      out[j] = out[j - 1];
      out[j - 1] = t;
    }
}

/* ---- reference ----------------------------------------------------------- */

static void test_logit_is_the_weighted_sum_of_relu_dots_with_page_scales(void **state) {
  (void)state;
  const int lens[] = {70, 0, 131};
  fixture f = make(3, 2, 3, 16, 8, 140, lens);
  run(&f);
  for (int r = 0; r < 3; r++)
    for (int t = 0; t < 2; t++) {
      const int row = r * 2 + t, visible = st_ref_dsa_index_decode_visible(&f.in, row);
      assert_int_equal(visible, lens[r] > 0 ? lens[r] - 1 + t : 0);
      for (int tok = 0; tok < visible; tok++) {
        double want = 0;
        for (int h = 0; h < 3; h++) {
          const double x = dot(&f, row, h, r, tok);
          want += f.w[row * 3 + h] * (x > 0 ? x : 0);
        }
        assert_true(fabs(f.logits[row * 140 + tok] - want) <= 1e-12 * (1 + fabs(want)));
      }
      for (int tok = visible; tok < 140; tok++) assert_true(isinf(f.logits[row * 140 + tok]));
    }
  release(&f);
}

static void test_relu_drops_negative_dots_and_weights_keep_their_sign(void **state) {
  (void)state;
  const int lens[] = {40};
  fixture f = make(1, 1, 1, 64, 1, 64, lens);
  memset(f.q, st_float_to_fp8_e4m3(1.0f), D);
  for (int tok = 0; tok < 40; tok++) set_token(&f, 0, tok, tok % 2 ? -1.0f : 0.5f, 1.0f + (float)tok / 64);
  f.w[0] = 2.0f;
  run(&f);
  /* Odd tokens dot to -128 * scale: relu gives 0, not a negative logit. */
  assert_true(f.logits[1] == 0.0);
  assert_true(fabs(f.logits[2] - 2.0 * 64 * (1.0 + 2.0 / 64)) < 1e-9);
  assert_int_equal(f.out[0], 38); /* the largest scale among the even tokens */
  /* A negative weight: the best logit is 0 (every odd token's, and -0 ties
   * with it), and the lowest such position wins the tie. */
  f.w[0] = -2.0f;
  run(&f);
  assert_true(f.logits[2] < 0);
  assert_int_equal(f.out[0], 1);
  release(&f);
}

static void test_scales_are_read_after_the_page_values(void **state) {
  (void)state;
  const int lens[] = {20};
  fixture f = make(1, 1, 1, 8, 1, 20, lens);
  memset(f.q, st_float_to_fp8_e4m3(1.0f), D);
  for (int tok = 0; tok < 20; tok++) set_token(&f, 0, tok, 1.0f, 1.0f);
  f.w[0] = 1.0f;
  /* Same values everywhere; token 13 (page 1, slot 5) has the largest scale. */
  set_token(&f, 0, 13, 1.0f, 3.0f);
  run(&f);
  assert_int_equal(f.out[0], 13);
  assert_true(fabs(f.logits[13] - 3.0 * 128) < 1e-9);
  assert_true(fabs(f.logits[12] - 128) < 1e-9);
  release(&f);
}

static void test_each_query_token_sees_up_to_its_own_position(void **state) {
  (void)state;
  const int lens[] = {100};
  fixture f = make(1, 3, 2, 64, 1, 128, lens);
  memset(f.q, st_float_to_fp8_e4m3(1.0f), (size_t)3 * 2 * D);
  for (int i = 0; i < 6; i++) f.w[i] = 1.0f;
  for (int tok = 0; tok < 100; tok++) set_token(&f, 0, tok, 1.0f, 1.0f);
  set_token(&f, 0, 99, 2.0f, 1.0f); /* the last token, seen by query token 2 only */
  set_token(&f, 0, 98, 1.5f, 1.0f); /* seen by query tokens 1 and 2 */
  run(&f);
  assert_int_equal(st_ref_dsa_index_decode_visible(&f.in, 0), 98);
  assert_int_equal(f.out[0], 0); /* all it sees tie: the lowest position */
  assert_int_equal(f.out[1], 98);
  assert_int_equal(f.out[2], 99);
  release(&f);
}

static void test_fewer_visible_tokens_than_topk_pad_with_minus_one(void **state) {
  (void)state;
  const int lens[] = {5, 0, 1};
  fixture f = make(3, 2, 4, 64, 8, 64, lens);
  run(&f);
  int32_t s[8];
  /* Request 0: rows see 4 and 5 tokens: all of them, then -1. */
  sorted_row(f.out + 0 * 8, 8, s);
  const int32_t row0[] = {-1, -1, -1, -1, 0, 1, 2, 3};
  assert_memory_equal(s, row0, sizeof row0);
  sorted_row(f.out + 1 * 8, 8, s);
  const int32_t row1[] = {-1, -1, -1, 0, 1, 2, 3, 4};
  assert_memory_equal(s, row1, sizeof row1);
  /* Request 1 is padding (its table row is garbage, never read); request
   * 2 has one token: its first query token would sit at -1 and sees none. */
  for (int row = 2; row < 5; row++)
    for (int i = 0; i < 8; i++) assert_int_equal(f.out[row * 8 + i], -1);
  assert_int_equal(f.out[5 * 8], 0);
  for (int i = 1; i < 8; i++) assert_int_equal(f.out[5 * 8 + i], -1);
  release(&f);
}

static void test_ties_go_to_the_lower_position(void **state) {
  (void)state;
  const int lens[] = {300};
  fixture f = make(1, 1, 2, 64, 16, 300, lens);
  for (int tok = 0; tok < 300; tok++) set_token(&f, 0, tok, 1.0f, 1.0f);
  set_token(&f, 0, 250, 2.0f, 1.0f);
  memset(f.q, st_float_to_fp8_e4m3(0.5f), (size_t)2 * D);
  f.w[0] = 0.5f;
  f.w[1] = 0.25f;
  run(&f);
  int32_t s[16];
  sorted_row(f.out, 16, s);
  for (int i = 0; i < 15; i++) assert_int_equal(s[i], i);
  assert_int_equal(s[15], 250);
  release(&f);
}

static void test_nan_logits_rank_as_minus_infinity(void **state) {
  (void)state;
  const int lens[] = {10};
  fixture f = make(1, 1, 1, 64, 9, 64, lens);
  memset(f.q, st_float_to_fp8_e4m3(1.0f), D);
  f.w[0] = -1.0f; /* every real logit is <= 0 */
  uint8_t *k = (uint8_t *)token_values(&f, 0, 4);
  k[7] = 0x7f; /* an e4m3 NaN */
  run(&f);
  assert_true(isnan(f.logits[4]));
  int32_t s[10];
  sorted_row(f.out, 9, s);
  const int32_t want[] = {0, 1, 2, 3, 5, 6, 7, 8, 9};
  assert_memory_equal(s, want, sizeof want);
  /* Enough room for every visible token: the NaN one is taken too. */
  f.in.topk = 10;
  free(f.out);
  f.out = malloc(sizeof(int32_t) * 10);
  run(&f);
  sorted_row(f.out, 10, s);
  assert_int_equal(s[4], 4);
  release(&f);
}

static void test_lengths_past_max_context_are_clamped(void **state) {
  (void)state;
  const int lens[] = {50};
  fixture f = make(1, 1, 1, 16, 64, 48, lens); /* seq 50 > max_context 48 */
  run(&f);
  assert_int_equal(st_ref_dsa_index_decode_visible(&f.in, 0), 48);
  int32_t s[64];
  sorted_row(f.out, 64, s);
  for (int i = 0; i < 16; i++) assert_int_equal(s[i], -1);
  for (int i = 16; i < 64; i++) assert_int_equal(s[i], i - 16);
  release(&f);
}

/* ---- verifier ------------------------------------------------------------ */

static void test_verifier_fails_a_wrong_set_and_allows_tied_swaps(void **state) {
  (void)state;
  const int lens[] = {500, 0, 77};
  fixture f = make(3, 2, 8, 64, 32, 512, lens);
  run(&f);
  char msg[512];
  double worst = 0;
  assert_int_equal(st_ref_dsa_index_decode_verify(&f.in, f.logits, f.out, 32, 1e-6, &worst, msg, sizeof msg), 0);
  /* The reference's own order reversed: order within a row is free. */
  for (int i = 0; i < 16; i++) {
    const int32_t t = f.out[i];
    f.out[i] = f.out[31 - i];
    f.out[31 - i] = t;
  }
  assert_int_equal(st_ref_dsa_index_decode_verify(&f.in, f.logits, f.out, 32, 1e-6, &worst, msg, sizeof msg), 0);
  /* A chosen token swapped for the row's worst: fails, naming the row. */
  int low = 0;
  for (int tok = 1; tok < 499; tok++)
    if (f.logits[tok] < f.logits[low]) low = tok;
  int32_t *victim = f.out;
  for (int i = 0; i < 32; i++)
    if (f.logits[f.out[i]] > f.logits[*victim]) victim = &f.out[i];
  const int32_t kept = *victim;
  *victim = low;
  assert_true(st_ref_dsa_index_decode_verify(&f.in, f.logits, f.out, 32, 1e-6, &worst, msg, sizeof msg) > 0);
  assert_non_null(strstr(msg, "row 0"));
  assert_true(worst > 0);
  /* A duplicate, an invisible position, a missing id, a padding row with
   * an id: each fails. */
  *victim = f.out[victim == f.out ? 1 : 0];
  assert_true(st_ref_dsa_index_decode_verify(&f.in, f.logits, f.out, 32, 1e-6, &worst, msg, sizeof msg) > 0);
  assert_non_null(strstr(msg, "twice"));
  *victim = 499; /* row 0 sees 0..498 */
  assert_true(st_ref_dsa_index_decode_verify(&f.in, f.logits, f.out, 32, 1e-6, &worst, msg, sizeof msg) > 0);
  *victim = -1;
  assert_true(st_ref_dsa_index_decode_verify(&f.in, f.logits, f.out, 32, 1e-6, &worst, msg, sizeof msg) > 0);
  *victim = kept;
  f.out[2 * 32 + 5] = 0;
  assert_true(st_ref_dsa_index_decode_verify(&f.in, f.logits, f.out, 32, 1e-6, &worst, msg, sizeof msg) > 0);
  assert_non_null(strstr(msg, "row 2"));
  f.out[2 * 32 + 5] = -1;
  assert_int_equal(st_ref_dsa_index_decode_verify(&f.in, f.logits, f.out, 32, 1e-6, &worst, msg, sizeof msg), 0);
  /* Within the tolerance a left-out token may replace the k-th one. */
  double kth = INFINITY;
  int at = 0;
  for (int i = 0; i < 32; i++)
    if (f.logits[f.out[i]] < kth) {
      kth = f.logits[f.out[i]];
      at = i;
    }
  int next = -1;
  for (int tok = 0; tok < 499; tok++) {
    int chosen = 0;
    for (int i = 0; i < 32; i++) chosen |= f.out[i] == tok;
    if (!chosen && (next < 0 || f.logits[tok] > f.logits[next])) next = tok;
  }
  f.out[at] = next;
  double scale = 0;
  for (int tok = 0; tok < 499; tok++) scale = fmax(scale, fabs(f.logits[tok]));
  const double gap = (kth - f.logits[next]) / scale; /* relative, as the tolerance is */
  assert_true(gap > 0);
  assert_true(st_ref_dsa_index_decode_verify(&f.in, f.logits, f.out, 32, gap / 2, &worst, msg, sizeof msg) > 0);
  assert_int_equal(st_ref_dsa_index_decode_verify(&f.in, f.logits, f.out, 32, gap * 2, &worst, msg, sizeof msg), 0);
  release(&f);
}

/* ---- launcher ------------------------------------------------------------ */

#define FAKE(p) ((void *)(uintptr_t)(p))

/* R=8 requests of qlen 2, H=64, topk 2048, 64-token pages, 128K context. */
static st_dsa_index_decode_args valid_args(void) {
  st_dsa_index_decode_args a;
  st_dsa_index_decode_args_init(&a);
  st_tensor_contiguous(&a.q, FAKE(0x100000), ST_DTYPE_FP8_E4M3, 3, (int64_t[]){16, 64, 128});
  st_tensor_contiguous(&a.weights, FAKE(0x200000), ST_DTYPE_FP32, 2, (int64_t[]){16, 64});
  st_tensor_contiguous(&a.k_cache, FAKE(0x300000), ST_DTYPE_FP8_E4M3, 2, (int64_t[]){20000, 64 * 132});
  st_tensor_contiguous(&a.block_table, FAKE(0x400000), ST_DTYPE_INT32, 2, (int64_t[]){8, 2048});
  st_tensor_contiguous(&a.seq_lens, FAKE(0x500000), ST_DTYPE_INT32, 1, (int64_t[]){8});
  st_tensor_contiguous(&a.topk_idx, FAKE(0x600000), ST_DTYPE_INT32, 2, (int64_t[]){16, 2048});
  a.qlen = 2;
  a.topk = 2048;
  a.page_size = 64;
  a.max_context = 131072;
  return a;
}

static void expect_refused(const st_dsa_index_decode_args *a, const char *fragment) {
  st_err err = {{0}};
  st_status s = st_dsa_index_decode_check_args(a, &err);
  if (s != ST_ERR_INVALID_ARG || !strstr(err.msg, fragment))
    fail_msg("expected refusal containing '%s', got status %d: '%s'", fragment, (int)s, err.msg);
}

static void test_valid_arguments_pass(void **state) {
  (void)state;
  st_dsa_index_decode_args a = valid_args();
  st_err err = {{0}};
  assert_int_equal(st_dsa_index_decode_check_args(&a, &err), ST_OK);
  a.k_cache.stride[0] = 64 * 132 + 16; /* pages further apart than their bytes */
  assert_int_equal(st_dsa_index_decode_check_args(&a, &err), ST_OK);
}

/* clang-format off */
static void test_bad_arguments_are_refused_by_name(void **state) {
  (void)state;
  st_dsa_index_decode_args a;
  a = valid_args(); a.topk = 2049; expect_refused(&a, "topk=2049 is outside 1..2048");
  a = valid_args(); a.topk = 0; expect_refused(&a, "topk=0");
  a = valid_args(); a.qlen = 5; expect_refused(&a, "qlen=5 is outside 1..4");
  a = valid_args(); a.page_size = 0; expect_refused(&a, "page_size=0 is outside 1..1024");
  a = valid_args(); a.q.dtype = ST_DTYPE_BF16; expect_refused(&a, "q.dtype=1");
  a = valid_args(); a.q.shape[2] = 64; expect_refused(&a, "q.shape[2]=64 must be the head dim 128");
  a = valid_args(); a.q.shape[1] = 65; expect_refused(&a, "q.shape[1]=65 heads exceed 64");
  a = valid_args(); a.q.shape[0] = 15; expect_refused(&a, "not a multiple of qlen=2");
  a = valid_args(); a.q.data = FAKE(0x100008); expect_refused(&a, "not 16-byte aligned");
  a = valid_args(); a.q.stride[1] = 136; expect_refused(&a, "q.stride[1]=136 elements is not a multiple of 16");
  a = valid_args(); a.weights.shape[1] = 32; expect_refused(&a, "weights.shape=[16,32] must be [R*qlen=16, H=64]");
  a = valid_args(); a.weights.dtype = ST_DTYPE_BF16; expect_refused(&a, "weights.dtype");
  a = valid_args(); a.k_cache.shape[1] = 64 * 128; expect_refused(&a, "k_cache.shape[1]=8192 must be page_size x");
  a = valid_args(); a.k_cache.stride[0] = 64 * 132 - 16; expect_refused(&a, "k_cache.stride[0]=8432 bytes is less");
  a = valid_args(); a.k_cache.stride[0] = 64 * 132 + 4; expect_refused(&a, "multiples of 16 bytes");
  a = valid_args(); a.k_cache.data = FAKE(0x300004); expect_refused(&a, "k_cache.data=");
  a = valid_args(); a.k_cache.ndim = 3; expect_refused(&a, "k_cache.ndim=3");
  a = valid_args(); a.block_table.shape[0] = 7; expect_refused(&a, "block_table.shape[0]=7");
  a = valid_args(); a.seq_lens.shape[0] = 9; expect_refused(&a, "seq_lens.shape[0]=9");
  a = valid_args(); a.topk_idx.shape[1] = 512; expect_refused(&a, "topk_idx.shape=[16,512] must be");
  a = valid_args(); a.max_context = 2048 * 64 + 1; expect_refused(&a, "max_context=131073 is outside 1..131072");
  a = valid_args(); a.max_context = 0; expect_refused(&a, "max_context=0");
  a = valid_args(); a.pdl = 2; expect_refused(&a, "pdl=2 must be 0 or 1");
  expect_refused(NULL, "args is NULL");
}
/* clang-format on */

static st_dsa_index_decode_config config(int max_heads, int max_qlen, int threads, int splits) {
  st_params k = {0}, l = {0};
  st_err err = {{0}};
  st_params_set_int(&k, "max_heads", max_heads, &err);
  st_params_set_int(&k, "max_qlen", max_qlen, &err);
  st_params_set_int(&k, "threads", threads, &err);
  st_params_set_int(&k, "tiles_in_flight", 2, &err);
  st_params_set_int(&k, "merge_threads", 512, &err);
  st_params_set_int(&k, "merge_filter", 1, &err);
  st_params_set_int(&l, "splits", splits, &err);
  st_dsa_index_decode_config c;
  assert_int_equal(st_dsa_index_decode_config_from_params(&k, &l, &c, &err), ST_OK);
  return c;
}

static void test_variant_fit_names_the_mismatch(void **state) {
  (void)state;
  st_dsa_index_decode_args a = valid_args();
  st_err err = {{0}};
  st_dsa_index_decode_config c = config(64, 2, 256, 0);
  assert_int_equal(st_dsa_index_decode_check_fit(&c, &a, &err), ST_OK);
  c = config(64, 1, 256, 0);
  assert_int_equal(st_dsa_index_decode_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "qlen <= 1, call has 2"));
  c = config(32, 4, 256, 0);
  assert_int_equal(st_dsa_index_decode_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "H <= 32 heads, call has 64"));
  st_params k = {0}, l = {0};
  st_params_set_int(&k, "max_heads", 20, &err);
  st_params_set_int(&k, "max_qlen", 1, &err);
  st_params_set_int(&k, "threads", 256, &err);
  st_params_set_int(&k, "tiles_in_flight", 1, &err);
  st_params_set_int(&k, "merge_threads", 512, &err);
  st_params_set_int(&k, "merge_filter", 0, &err);
  st_params_set_int(&l, "splits", 0, &err);
  assert_int_equal(st_dsa_index_decode_config_from_params(&k, &l, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "max_heads=20 is not a multiple of 8"));
}

static void test_plans_depend_on_host_known_values_only(void **state) {
  (void)state;
  st_dsa_index_decode_args a = valid_args();
  st_err err = {{0}};
  st_dsa_index_decode_plan p;
  /* One wave of 2 CTAs of 256 threads on each of 132 SMs: 33 CTAs a
   * request for 8 requests. */
  st_dsa_index_decode_config c = config(64, 2, 256, 0);
  assert_int_equal(st_dsa_index_decode_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.splits, 33);
  assert_int_equal(p.grid[0], 33);
  assert_int_equal(p.grid[1], 8);
  assert_int_equal(p.block, 256);
  assert_int_equal(p.smem_bytes, 2 * 8 * 2048 + 2 * 64 * 4);
  assert_int_equal(p.merge_grid[0], 16);
  assert_int_equal(p.merge_block, 512);
  /* 128K logits a row do not fit: rows up to 32K are staged, longer
   * ones leave 16K candidates of key and position. */
  assert_int_equal(p.merge_smem_bytes, 128 * 1024);
  assert_int_equal(p.params.stage_cap, 32768);
  assert_int_equal(p.params.cand_cap, 16384);
  assert_true(p.workspace_bytes >= (size_t)16 * 131072 * 4);
  assert_int_equal(p.params.logit_stride, 131072);
  /* A short context: logits staged in the merge, splits no more than a
   * tile for each warp, the logit rows 16-byte aligned. */
  a.max_context = 1001;
  assert_int_equal(st_dsa_index_decode_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.params.logit_stride, 1004);
  assert_int_equal(p.merge_smem_bytes, 1004 * 4);
  assert_int_equal(p.params.cand_cap, 0);
  assert_int_equal(p.splits, 8); /* 1001 tokens / (8 warps x 16) */
  /* An explicit split count is kept. */
  c = config(64, 2, 128, 7);
  assert_int_equal(st_dsa_index_decode_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.grid[0], 7);
  assert_int_equal(p.block, 128);
}

static void test_dispatch_key_is_canonical(void **state) {
  (void)state;
  st_dsa_index_decode_args a = valid_args();
  st_err err = {{0}};
  char key[256];
  st_params fields = {0};
  assert_int_equal(st_dsa_index_decode_dispatch_key(&a, key, sizeof key, &fields, &err), ST_OK);
  assert_string_equal(key, "dsa_index_decode:B=8,H=64,ctx=131072,page=64,qlen=2,topk=2048");
  assert_int_equal(fields.n, 6);
  assert_string_equal(st_params_get(&fields, "page"), "64");
}

/* ---- gpu: every variant over the edge cases ------------------------------- */

typedef struct edge {
  int H, qlen, topk, page, ctx;
  const char *lens; /* the lengths, or "mixed" for B random ones */
  int ties;
  int B;   /* "mixed" only */
  int nan; /* NaN values in the pool */
} edge;

static const edge edges[] = {
    /* around the page size (64) and topk (2048), padding, the full 128K */
    {64, 1, 2048, 64, 131072, "1;63;64;65;2047;2048;2049;0;131072;100000", 0, 0},
    {64, 2, 512, 64, 9000, "1;2;511;512;513;514;0;9000;4133", 0, 0},
    {64, 4, 1024, 64, 20000, "20000;1025;0;3;17000", 0, 0},
    /* H not a multiple of 8, an unaligned page size, qlen 3 */
    {50, 3, 300, 7, 5000, "5000;301;302;0;1234", 0, 0},
    {1, 1, 1, 64, 3000, "3000;1;2", 0, 0},
    {32, 2, 100, 16, 4133, "4133;128;129;0", 0, 0},
    /* every logit of a row ties; logits tie in runs of a page (long rows,
     * topk not a multiple of 64: the filtering merge's ties taken in
     * position order) */
    {64, 2, 512, 64, 5000, "5000;600;0", 1, 0},
    {64, 1, 2000, 64, 70000, "70000;40000;3000", 2, 0},
    /* a batch of mixed lengths (every eighth a padding row) */
    {64, 1, 2048, 64, 40000, "mixed", 0, 40, 0},
    /* NaN logits rank as -inf */
    {64, 2, 256, 64, 3000, "3000;257;0", 0, 0, 1},
};

static void make_shape(const edge *e, st_shape *s) {
  memset(s, 0, sizeof *s);
  st_err err = {{0}};
  int B = e->B;
  if (strcmp(e->lens, "mixed") != 0) {
    B = 1;
    for (const char *p = e->lens; *p; p++) B += *p == ';';
  }
  snprintf(s->op, sizeof s->op, "dsa_index_decode");
  st_params_set_int(&s->params, "B", B, &err);
  st_params_set_int(&s->params, "H", e->H, &err);
  st_params_set_int(&s->params, "qlen", e->qlen, &err);
  st_params_set_int(&s->params, "topk", e->topk, &err);
  st_params_set_int(&s->params, "page", e->page, &err);
  st_params_set_int(&s->params, "ctx", e->ctx, &err);
  st_params_set(&s->params, "lens", e->lens, &err);
  st_params_set_int(&s->params, "ties", e->ties, &err);
  st_params_set_int(&s->params, "nan", e->nan, &err);
  snprintf(s->key, sizeof s->key, "edge:B=%d,H=%d,qlen=%d,topk=%d,page=%d,ctx=%d,lens=%s,ties=%d,nan=%d", B, e->H,
           e->qlen, e->topk, e->page, e->ctx, e->lens, e->ties, e->nan);
}

static void test_every_variant_matches_the_reference_on_edge_cases(void **state) {
  (void)state;
  const int nshapes = (int)(sizeof edges / sizeof edges[0]);
  st_shape shapes[sizeof edges / sizeof edges[0]];
  for (int i = 0; i < nshapes; i++) make_shape(&edges[i], &shapes[i]);
  st_test_every_variant("dsa_index_decode", shapes, nshapes, g_seed);
}

int main(int argc, char **argv) {
  const char *part = argc > 1 ? argv[1] : "";
  if (strcmp(part, "cpu") == 0) {
    g_seed = st_test_seed("dsa_index_decode_cpu");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logit_is_the_weighted_sum_of_relu_dots_with_page_scales),
        cmocka_unit_test(test_relu_drops_negative_dots_and_weights_keep_their_sign),
        cmocka_unit_test(test_scales_are_read_after_the_page_values),
        cmocka_unit_test(test_each_query_token_sees_up_to_its_own_position),
        cmocka_unit_test(test_fewer_visible_tokens_than_topk_pad_with_minus_one),
        cmocka_unit_test(test_ties_go_to_the_lower_position),
        cmocka_unit_test(test_nan_logits_rank_as_minus_infinity),
        cmocka_unit_test(test_lengths_past_max_context_are_clamped),
        cmocka_unit_test(test_verifier_fails_a_wrong_set_and_allows_tied_swaps),
        cmocka_unit_test(test_valid_arguments_pass),
        cmocka_unit_test(test_bad_arguments_are_refused_by_name),
        cmocka_unit_test(test_variant_fit_names_the_mismatch),
        cmocka_unit_test(test_plans_depend_on_host_known_values_only),
        cmocka_unit_test(test_dispatch_key_is_canonical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
  }
  if (strcmp(part, "gpu") == 0) {
    const int rc = st_test_require_gpu(); /* 0 when only compiling */
    if (rc) return rc;
    g_seed = st_test_seed("dsa_index_decode_gpu");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_variant_matches_the_reference_on_edge_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
  }
  fprintf(stderr, "usage: %s cpu|gpu\n", argv[0]);
  return 2;
}
