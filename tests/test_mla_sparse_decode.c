/* mla_sparse_decode's tests.
 *
 * `cpu`: the double-precision reference on hand-checkable cases (one token
 * gives its value, a repeated slot counts twice, -1 and out-of-range slots
 * are skipped, topk_length cuts rows, the attention sink's three regimes,
 * the 656-byte fp8 row's dequantization), against a naive softmax on random
 * data of both cache dtypes, and its verifier failing planted mistakes (the
 * prefill reference, a view onto this one, is tested in
 * test_mla_sparse_prefill); the launcher refusing bad arguments by name, fitting variants, planning grids,
 * shared memory and workspace from host-known values only, and its dispatch
 * key.
 *
 * `gpu`: every generated variant against the reference over the contract's
 * edge cases (-1, out-of-range and repeated slots, tokens at page borders,
 * topk_length 0 and below topk, fewer valid entries than topk, a row with
 * none, qlen up to 4, Hq 16 to 128, both cache dtypes, sinks of +-inf and
 * finite, lse), each run twice (the second as a graph replay). Skips where
 * there is no driver or GPU; with ST_TEST_COMPILE_ONLY it compiles them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/mla_sparse_decode.h"
#include "ops/tensor_check.h"
#include "reference/dtype.h"
#include "reference/mla_sparse_decode.h"
#include "testutil.h"
#include "variant_matrix.h"

#define FAKE(p) ((void *)(uintptr_t)(p))

static uint64_t g_seed;

/* ---- reference: a small case built by hand ------------------------------ */

enum { PAGE = 16, PAGES = 4, SLOTS = PAGE * PAGES };

typedef struct small {
  st_ref_mla_sparse_decode in;
  uint16_t q[2][ST_MLA_DIM_QK]; /* [rows * Hq]: one row, two heads, or two rows */
  uint16_t kv[SLOTS][ST_MLA_DIM_QK];
  int32_t idx[16]; /* dense [rows][topk] */
  double o[2][ST_MLA_DIM_V], lse[2];
} small;

/* One bf16 request of `rows` rows x `heads` heads (rows * heads <= 2), topk
 * entries, random q and cache in [-1, 1). */
static void small_init(small *s, int rows, int heads, int topk, uint64_t *rng) {
  memset(s, 0, sizeof *s);
  for (int r = 0; r < 2; r++)
    for (int d = 0; d < ST_MLA_DIM_QK; d++) s->q[r][d] = st_float_to_bf16((float)st_rand_uniform(rng, -1, 1));
  for (int t = 0; t < SLOTS; t++)
    for (int d = 0; d < ST_MLA_DIM_QK; d++) s->kv[t][d] = st_float_to_bf16((float)st_rand_uniform(rng, -1, 1));
  for (int i = 0; i < 16; i++) s->idx[i] = -1;
  s->in = (st_ref_mla_sparse_decode){.kv_dtype = ST_DTYPE_BF16,
                                     .B = 1,
                                     .qlen = rows,
                                     .Hq = heads,
                                     .topk = topk,
                                     .page_size = PAGE,
                                     .pages = PAGES,
                                     .q = &s->q[0][0],
                                     .kv = &s->kv[0][0],
                                     .kv_stride = {PAGE * ST_MLA_DIM_QK, ST_MLA_DIM_QK},
                                     .indices = s->idx,
                                     .sm_scale = 0.0721};
}

static void small_run(small *s) {
  assert_int_equal(st_ref_mla_sparse_decode_compute(&s->in, &s->o[0][0], s->lse, 2), 0);
}

/* sm_scale * q(row/head i) . k(slot), in double. */
static double score(const small *s, int i, int slot) {
  double dot = 0;
  for (int d = 0; d < ST_MLA_DIM_QK; d++)
    dot += (double)st_bf16_to_float(s->q[i][d]) * st_bf16_to_float(s->kv[slot][d]);
  return s->in.sm_scale * dot;
}

static void expect_value_of(const small *s, int i, int slot, double factor) {
  for (int d = 0; d < ST_MLA_DIM_V; d++) expect_near(s->o[i][d], factor * st_bf16_to_float(s->kv[slot][d]), 1e-12);
}

static void test_reference_one_token_gives_its_value(void **state) {
  (void)state;
  uint64_t rng = g_seed;
  small s;
  small_init(&s, 1, 2, 4, &rng);
  s.idx[2] = 37;
  small_run(&s);
  for (int h = 0; h < 2; h++) {
    expect_value_of(&s, h, 37, 1.0);
    expect_near(s.lse[h], score(&s, h, 37), 1e-12);
  }
}

static void test_reference_repeated_slot_counts_twice(void **state) {
  (void)state;
  uint64_t rng = g_seed + 1;
  small s;
  small_init(&s, 1, 1, 4, &rng);
  s.idx[0] = 5;
  s.idx[1] = 5; /* equal tokens: o = v, lse = s + ln 2 */
  small_run(&s);
  expect_value_of(&s, 0, 5, 1.0);
  expect_near(s.lse[0], score(&s, 0, 5) + log(2.0), 1e-12);
  s.idx[2] = 60; /* now 5 twice and 60 once */
  small_run(&s);
  const double a = 2 * exp(score(&s, 0, 5)), b = exp(score(&s, 0, 60));
  for (int d = 0; d < ST_MLA_DIM_V; d++)
    expect_near(s.o[0][d], (a * st_bf16_to_float(s.kv[5][d]) + b * st_bf16_to_float(s.kv[60][d])) / (a + b), 1e-12);
  expect_near(s.lse[0], log(a + b), 1e-12);
}

static void test_reference_skips_none_and_out_of_range_slots(void **state) {
  (void)state;
  uint64_t rng = g_seed + 2;
  small s;
  small_init(&s, 1, 1, 8, &rng);
  const int32_t row[8] = {-1, SLOTS, -5, 63, INT32_MAX, INT32_MIN, SLOTS + 1, -1};
  memcpy(s.idx, row, sizeof row);
  small_run(&s);
  expect_value_of(&s, 0, 63, 1.0); /* the pool's last slot is the one valid entry */
  s.idx[3] = -1;                   /* none left: zeros and -inf */
  small_run(&s);
  expect_value_of(&s, 0, 0, 0.0);
  assert_true(s.lse[0] == -INFINITY);
}

static void test_reference_topk_length_cuts_each_request(void **state) {
  (void)state;
  uint64_t rng = g_seed + 3;
  small s;
  small_init(&s, 2, 1, 4, &rng); /* one request, two rows: the length holds for both */
  const int32_t rows[2][4] = {{9, 17, 33, 40}, {1, 2, 3, 4}};
  memcpy(s.idx, rows, sizeof rows);
  int32_t len = 1;
  s.in.topk_length = &len;
  small_run(&s);
  expect_value_of(&s, 0, 9, 1.0);
  expect_value_of(&s, 1, 1, 1.0);
  len = 0;
  small_run(&s);
  for (int r = 0; r < 2; r++) {
    expect_value_of(&s, r, 0, 0.0);
    assert_true(s.lse[r] == -INFINITY);
  }
  len = 99; /* clamped to topk: every entry */
  small_run(&s);
  double all[2][ST_MLA_DIM_V];
  memcpy(all, s.o, sizeof all);
  s.in.topk_length = NULL;
  small_run(&s);
  assert_memory_equal(all, s.o, sizeof all);
  len = -3; /* clamped to 0 */
  s.in.topk_length = &len;
  small_run(&s);
  assert_true(s.lse[0] == -INFINITY && s.lse[1] == -INFINITY);
}

static void test_reference_sink_scales_o_and_leaves_lse(void **state) {
  (void)state;
  uint64_t rng = g_seed + 4;
  small s;
  small_init(&s, 1, 2, 2, &rng);
  s.idx[0] = 12;
  s.idx[1] = 50;
  small_run(&s);
  double plain[2][ST_MLA_DIM_V], plain_lse[2];
  memcpy(plain, s.o, sizeof plain);
  memcpy(plain_lse, s.lse, sizeof plain_lse);
  float sink[2] = {INFINITY, -INFINITY};
  s.in.sink = sink;
  small_run(&s);
  for (int d = 0; d < ST_MLA_DIM_V; d++) {
    assert_true(s.o[0][d] == 0.0);
    assert_true(s.o[1][d] == plain[1][d]);
  }
  assert_true(s.lse[0] == plain_lse[0] && s.lse[1] == plain_lse[1]);
  sink[0] = 0.75f;
  sink[1] = -1.5f;
  small_run(&s);
  for (int h = 0; h < 2; h++) {
    const double f = exp(plain_lse[h]) / (exp(plain_lse[h]) + exp((double)sink[h]));
    for (int d = 0; d < ST_MLA_DIM_V; d++) expect_near(s.o[h][d], f * plain[h][d], 1e-12);
    assert_true(s.lse[h] == plain_lse[h]);
  }
}

static void test_reference_dequantizes_the_656_byte_row(void **state) {
  (void)state;
  uint8_t row[ST_MLA_FP8_ROW];
  memset(row, 0, sizeof row);
  /* e4m3: 0x38 = 1.0, 0x40 = 2.0, 0xb8 = -1.0, 0x01 = 2^-9 (subnormal), 0x7e = 448 */
  row[0] = 0x38;
  row[127] = 0x40;
  row[128] = 0xb8;
  row[300] = 0x01;
  row[511] = 0x7e;
  const float scales[4] = {0.5f, 2.0f, 4.0f, 0.125f};
  memcpy(row + 512, scales, sizeof scales);
  const uint16_t rope[2] = {0x3f80, 0xc000}; /* 1.0, -2.0 */
  memcpy(row + 528, &rope[0], 2);
  memcpy(row + 528 + 2 * 63, &rope[1], 2);
  double k[ST_MLA_DIM_QK];
  st_ref_mla_dequant_row(ST_DTYPE_FP8_E4M3, row, k);
  assert_true(k[0] == 0.5 && k[127] == 1.0 && k[128] == -2.0 && k[300] == 4.0 * 0x1p-9 && k[511] == 448 * 0.125);
  assert_true(k[1] == 0.0 && k[512] == 1.0 && k[575] == -2.0 && k[513] == 0.0);
  /* An engine's quantizer: each group's largest value becomes 448 x its
   * scale, every value within e4m3's half-ulp (2^-4 relative), RoPE as bf16. */
  uint64_t rng = g_seed + 5;
  float v[ST_MLA_DIM_QK];
  for (int d = 0; d < ST_MLA_DIM_QK; d++) v[d] = (float)st_rand_uniform(&rng, -3, 3);
  v[7] = 0; /* zeros stay zeros */
  st_ref_mla_fp8_pack_row(v, row);
  st_ref_mla_dequant_row(ST_DTYPE_FP8_E4M3, row, k);
  for (int d = 0; d < ST_MLA_DIM_V; d++) {
    float scale;
    memcpy(&scale, row + 512 + 4 * (d / 128), 4);
    assert_true(fabs(k[d] - v[d]) <= fabs(v[d]) * 0x1p-4 + scale * 0x1p-10);
  }
  assert_true(k[7] == 0.0);
  for (int d = ST_MLA_DIM_V; d < ST_MLA_DIM_QK; d++) assert_true(k[d] == st_bf16_to_float(st_float_to_bf16(v[d])));
}

/* ---- reference: random data against a naive softmax --------------------- */

typedef struct big {
  st_ref_mla_sparse_decode in;
  uint16_t *q;
  void *kv;
  int32_t *idx, *tlen;
  float *sink;
  double *o, *lse;
} big;

static void big_free(big *b) {
  free(b->q);
  free(b->kv);
  free(b->idx);
  free(b->tlen);
  free(b->sink);
  free(b->o);
  free(b->lse);
}

/* B=3 requests x qlen 2, Hq 32, topk 40 over 8 pages of 16 tokens (a page
 * stride of 20 rows, not 16), entries random with -1, out-of-range and
 * repeated slots, random lengths, finite and infinite sinks. */
static void big_init(big *b, st_dtype dt, uint64_t seed) {
  memset(b, 0, sizeof *b);
  enum { B = 3, QLEN = 2, HQ = 32, TOPK = 40, NPAGES = 8, STRIDE_ROWS = 20 };
  const int rows = B * QLEN;
  const size_t row_elems = dt == ST_DTYPE_BF16 ? ST_MLA_DIM_QK : ST_MLA_FP8_ROW;
  const size_t elem = dt == ST_DTYPE_BF16 ? 2 : 1;
  b->q = malloc((size_t)rows * HQ * ST_MLA_DIM_QK * 2);
  b->kv = calloc((size_t)NPAGES * STRIDE_ROWS * row_elems, elem);
  b->idx = malloc((size_t)rows * TOPK * 4);
  b->tlen = malloc(B * 4);
  b->sink = malloc(HQ * 4);
  b->o = malloc((size_t)rows * HQ * ST_MLA_DIM_V * sizeof(double));
  b->lse = malloc((size_t)rows * HQ * sizeof(double));
  assert_true(b->q && b->kv && b->idx && b->tlen && b->sink && b->o && b->lse);
  uint64_t rng = seed;
  for (size_t i = 0; i < (size_t)rows * HQ * ST_MLA_DIM_QK; i++)
    b->q[i] = st_float_to_bf16((float)st_rand_uniform(&rng, -2, 2));
  for (int p = 0; p < NPAGES; p++)
    for (int t = 0; t < PAGE; t++) {
      float v[ST_MLA_DIM_QK];
      for (int d = 0; d < ST_MLA_DIM_QK; d++) v[d] = (float)st_rand_uniform(&rng, -1, 1);
      const size_t at = ((size_t)p * STRIDE_ROWS + (size_t)t) * row_elems;
      if (dt == ST_DTYPE_BF16)
        for (int d = 0; d < ST_MLA_DIM_QK; d++) ((uint16_t *)b->kv)[at + (size_t)d] = st_float_to_bf16(v[d]);
      else
        st_ref_mla_fp8_pack_row(v, (uint8_t *)b->kv + at);
    }
  for (int i = 0; i < rows * TOPK; i++) {
    const int64_t r = st_rand_int(&rng, 0, 9);
    b->idx[i] = r == 0               ? -1
                : r == 1             ? NPAGES * PAGE + (int32_t)st_rand_int(&rng, 0, 5)
                : r == 2 && i % TOPK ? b->idx[i - 1]
                                     : (int32_t)st_rand_int(&rng, 0, NPAGES * PAGE - 1);
  }
  for (int r = 0; r < B; r++) b->tlen[r] = (int32_t)st_rand_int(&rng, 0, TOPK);
  b->tlen[1] = TOPK;
  for (int h = 0; h < HQ; h++) b->sink[h] = (float)st_rand_uniform(&rng, -3, 3);
  b->sink[0] = INFINITY;
  b->sink[1] = -INFINITY;
  b->in = (st_ref_mla_sparse_decode){.kv_dtype = dt,
                                     .B = B,
                                     .qlen = QLEN,
                                     .Hq = HQ,
                                     .topk = TOPK,
                                     .page_size = PAGE,
                                     .pages = NPAGES,
                                     .q = b->q,
                                     .kv = b->kv,
                                     .kv_stride = {(int64_t)(STRIDE_ROWS * row_elems), (int64_t)row_elems},
                                     .indices = b->idx,
                                     .topk_length = b->tlen,
                                     .sink = b->sink,
                                     .sm_scale = 0.0721};
}

/* The naive softmax of one (row, head): explicit key list, two passes. */
static void naive_head(const big *b, int row, int h, double *o, double *lse) {
  const st_ref_mla_sparse_decode *in = &b->in;
  const size_t elem = in->kv_dtype == ST_DTYPE_BF16 ? 2 : 1;
  double s[64], k[64][ST_MLA_DIM_QK];
  int n = 0;
  const int len = st_ref_mla_row_entries(in, row);
  for (int e = 0; e < len; e++) {
    const int32_t slot = in->indices[row * in->topk + e];
    if (slot < 0 || slot >= in->pages * in->page_size) continue;
    const size_t at = (size_t)((slot / in->page_size) * in->kv_stride[0] + (slot % in->page_size) * in->kv_stride[1]);
    st_ref_mla_dequant_row(in->kv_dtype, (const char *)in->kv + at * elem, k[n]);
    double dot = 0;
    for (int d = 0; d < ST_MLA_DIM_QK; d++)
      dot += (double)st_bf16_to_float(in->q[((size_t)row * in->Hq + h) * ST_MLA_DIM_QK + d]) * k[n][d];
    s[n++] = in->sm_scale * dot;
  }
  double z = 0;
  for (int j = 0; j < n; j++) z += exp(s[j]);
  *lse = n ? log(z) : -INFINITY;
  const double f = n ? 1.0 / (1.0 + exp((double)in->sink[h] - *lse)) : 0;
  for (int d = 0; d < ST_MLA_DIM_V; d++) {
    double acc = 0;
    for (int j = 0; j < n; j++) acc += exp(s[j]) * k[j][d];
    o[d] = n ? acc / z * f : 0;
  }
}

static void test_reference_matches_a_naive_softmax_on_random_data(void **state) {
  (void)state;
  const st_dtype dts[2] = {ST_DTYPE_BF16, ST_DTYPE_FP8_E4M3};
  for (int i = 0; i < 2; i++) {
    big b;
    big_init(&b, dts[i], g_seed + 10 + (uint64_t)i);
    assert_int_equal(st_ref_mla_sparse_decode_compute(&b.in, b.o, b.lse, 3), 0);
    int empty = 0;
    for (int row = 0; row < b.in.B * b.in.qlen; row++)
      for (int h = 0; h < b.in.Hq; h++) {
        double o[ST_MLA_DIM_V], lse;
        naive_head(&b, row, h, o, &lse);
        const size_t at = (size_t)row * (size_t)b.in.Hq + (size_t)h;
        if (lse == -INFINITY) {
          assert_true(b.lse[at] == -INFINITY);
          empty++;
        } else {
          expect_near(b.lse[at], lse, 1e-9);
        }
        for (int d = 0; d < ST_MLA_DIM_V; d++) expect_near(b.o[at * ST_MLA_DIM_V + d], o[d], 1e-9);
      }
    printf("# %s: %d empty (row, head) pairs of %d\n", i ? "fp8" : "bf16", empty, b.in.B * b.in.qlen * b.in.Hq);
    big_free(&b);
  }
}

/* ---- the verifier ------------------------------------------------------- */

static void test_verifier_passes_the_reference_and_fails_planted_mistakes(void **state) {
  (void)state;
  big b;
  big_init(&b, ST_DTYPE_FP8_E4M3, g_seed + 20);
  b.tlen[0] = 0; /* request 0's rows have no valid entry */
  assert_int_equal(st_ref_mla_sparse_decode_compute(&b.in, b.o, b.lse, 2), 0);
  const size_t n = (size_t)b.in.B * (size_t)b.in.qlen * (size_t)b.in.Hq;
  uint16_t *got = malloc(n * ST_MLA_DIM_V * 2);
  float *got_lse = malloc(n * 4);
  assert_true(got && got_lse);
  for (size_t i = 0; i < n * ST_MLA_DIM_V; i++) got[i] = st_float_to_bf16((float)b.o[i]);
  for (size_t i = 0; i < n; i++) got_lse[i] = (float)b.lse[i];
  char msg[512];
  double err = 0;
  assert_int_equal(st_ref_mla_sparse_decode_verify(&b.in, b.o, b.lse, got, got_lse, 2e-2, &err, msg, sizeof msg), 0);
  assert_true(err < 1e-2);
  /* o of row 2, head 5, 10% too large */
  const size_t at = ((size_t)2 * (size_t)b.in.Hq + 5) * ST_MLA_DIM_V;
  uint16_t keep[ST_MLA_DIM_V];
  memcpy(keep, got + at, sizeof keep);
  for (int d = 0; d < ST_MLA_DIM_V; d++) got[at + d] = st_float_to_bf16(1.1f * st_bf16_to_float(got[at + d]));
  assert_int_equal(st_ref_mla_sparse_decode_verify(&b.in, b.o, b.lse, got, got_lse, 2e-2, &err, msg, sizeof msg), 1);
  assert_non_null(strstr(msg, "row 2 head 5"));
  memcpy(got + at, keep, sizeof keep);
  /* a NaN */
  got[at + 17] = 0x7fc0;
  assert_int_equal(st_ref_mla_sparse_decode_verify(&b.in, b.o, b.lse, got, got_lse, 2e-2, &err, msg, sizeof msg), 1);
  assert_true(isinf(err));
  memcpy(got + at, keep, sizeof keep);
  /* a row with no valid entry that is not all zeros */
  got[3] = st_float_to_bf16(1e-6f);
  assert_int_equal(st_ref_mla_sparse_decode_verify(&b.in, b.o, b.lse, got, got_lse, 2e-2, &err, msg, sizeof msg), 1);
  assert_non_null(strstr(msg, "no valid entry"));
  got[3] = 0;
  /* lse off by 0.05 (on the last pair with a valid entry: the random
   * topk_length may leave the last request none), and an empty row's lse
   * not -inf */
  size_t last = n - 1;
  while (last > 0 && !isfinite(b.lse[last])) last--;
  assert_true(isfinite(b.lse[last]));
  got_lse[last] += 0.05f;
  assert_int_equal(st_ref_mla_sparse_decode_verify(&b.in, b.o, b.lse, got, got_lse, 2e-2, &err, msg, sizeof msg), 1);
  assert_non_null(strstr(msg, "lse"));
  got_lse[last] = (float)b.lse[last];
  got_lse[0] = 0;
  assert_int_equal(st_ref_mla_sparse_decode_verify(&b.in, b.o, b.lse, got, got_lse, 2e-2, &err, msg, sizeof msg), 1);
  free(got);
  free(got_lse);
  big_free(&b);
}

/* ---- the launcher ------------------------------------------------------- */

enum { LB = 32, LQLEN = 2, LHQ = 128, LTOPK = 2048, LPAGES = 4096, LPAGE = 64 };

static st_mla_sparse_decode_args valid_args(st_dtype dt) {
  st_mla_sparse_decode_args a;
  st_mla_sparse_decode_args_init(&a);
  st_tensor_contiguous(&a.q, FAKE(0x10000), ST_DTYPE_BF16, 3, (int64_t[]){LB * LQLEN, LHQ, 576});
  st_tensor_contiguous(&a.kv_cache, FAKE(0x100000000ull), dt, 3,
                       (int64_t[]){LPAGES, LPAGE, dt == ST_DTYPE_BF16 ? 576 : 656});
  st_tensor_contiguous(&a.indices, FAKE(0x50000), ST_DTYPE_INT32, 2, (int64_t[]){LB * LQLEN, LTOPK});
  st_tensor_contiguous(&a.o, FAKE(0x60000), ST_DTYPE_BF16, 3, (int64_t[]){LB * LQLEN, LHQ, 512});
  a.sm_scale = 0.0721f;
  a.qlen = LQLEN;
  return a;
}

static void expect_refused(const st_mla_sparse_decode_args *a, st_status want, const char *fragment) {
  st_err err = {{0}};
  const st_status s = st_mla_sparse_decode_check_args(a, &err);
  if (s != want || !strstr(err.msg, fragment))
    fail_msg("expected status %d with '%s', got status %d: '%s'", (int)want, fragment, (int)s, err.msg);
}

static void test_valid_arguments_pass_with_every_option(void **state) {
  (void)state;
  st_err err = {{0}};
  st_mla_sparse_decode_args a = valid_args(ST_DTYPE_FP8_E4M3);
  assert_int_equal(st_mla_sparse_decode_check_args(&a, &err), ST_OK);
  st_tensor_contiguous(&a.topk_length, FAKE(0x70000), ST_DTYPE_INT32, 1, (int64_t[]){LB});
  st_tensor_contiguous(&a.attn_sink, FAKE(0x71000), ST_DTYPE_FP32, 1, (int64_t[]){LHQ});
  st_tensor_contiguous(&a.lse, FAKE(0x72000), ST_DTYPE_FP32, 2, (int64_t[]){LB * LQLEN, LHQ});
  assert_int_equal(st_mla_sparse_decode_check_args(&a, &err), ST_OK);
  a = valid_args(ST_DTYPE_BF16);
  a.kv_cache.stride[0] = 80 * 576; /* pages further apart than their tokens */
  assert_int_equal(st_mla_sparse_decode_check_args(&a, &err), ST_OK);
  a.kv_cache.shape[1] = 16;
  a.q.shape[1] = a.o.shape[1] = 16;
  assert_int_equal(st_mla_sparse_decode_check_args(&a, &err), ST_OK);
}

static void test_bad_arguments_are_refused_by_name(void **state) {
  (void)state;
  const st_status I = ST_ERR_INVALID_ARG, U = ST_ERR_UNSUPPORTED;
  st_mla_sparse_decode_args a;
  a = valid_args(ST_DTYPE_BF16);
  a.qlen = 5;
  expect_refused(&a, I, "qlen=5 is outside 1..4");
  a = valid_args(ST_DTYPE_BF16);
  a.sm_scale = 0;
  expect_refused(&a, I, "sm_scale=0 must be positive");
  a = valid_args(ST_DTYPE_BF16);
  a.q.shape[2] = 512;
  expect_refused(&a, I, "q.shape[2]=512 must be 576");
  a = valid_args(ST_DTYPE_BF16);
  a.q.shape[1] = a.o.shape[1] = 24;
  expect_refused(&a, U, "Hq=24");
  a = valid_args(ST_DTYPE_BF16);
  a.q.shape[0] = 63;
  expect_refused(&a, I, "not a multiple of qlen=2");
  a = valid_args(ST_DTYPE_BF16);
  a.kv_cache.dtype = ST_DTYPE_FP32;
  expect_refused(&a, I, "kv_cache.dtype=4");
  a = valid_args(ST_DTYPE_FP8_E4M3);
  a.kv_cache.shape[2] = 576;
  expect_refused(&a, I, "kv_cache.shape[2]=576 must be 656");
  a = valid_args(ST_DTYPE_BF16);
  a.kv_cache.shape[1] = 40;
  expect_refused(&a, I, "page_size=40");
  a = valid_args(ST_DTYPE_BF16);
  a.kv_cache.shape[1] = 2048;
  expect_refused(&a, I, "page_size=2048");
  a = valid_args(ST_DTYPE_BF16);
  a.kv_cache.stride[1] = 580; /* rows 1160 bytes apart: not 16-byte aligned */
  expect_refused(&a, I, "kv_cache.stride[1]=580");
  a = valid_args(ST_DTYPE_FP8_E4M3);
  a.kv_cache.shape[0] = 40000000;
  expect_refused(&a, I, "more slots than int32");
  a = valid_args(ST_DTYPE_BF16);
  a.indices.shape[1] = 4096;
  expect_refused(&a, I, "topk=4096 (indices.shape[1]) is outside 1..2048");
  a = valid_args(ST_DTYPE_BF16);
  a.indices.shape[0] = 32;
  expect_refused(&a, I, "indices.shape[0]=32 must equal B*qlen=64");
  a = valid_args(ST_DTYPE_BF16);
  st_tensor_contiguous(&a.topk_length, FAKE(0x70000), ST_DTYPE_INT32, 1, (int64_t[]){LB * LQLEN});
  expect_refused(&a, I, "topk_length.shape[0]=64 must equal B=32");
  a = valid_args(ST_DTYPE_BF16);
  st_tensor_contiguous(&a.attn_sink, FAKE(0x71000), ST_DTYPE_BF16, 1, (int64_t[]){LHQ});
  expect_refused(&a, I, "attn_sink.dtype=1");
  a = valid_args(ST_DTYPE_BF16);
  a.o.shape[2] = 576;
  expect_refused(&a, I, "o.shape=[64,128,576] must be [B*qlen=64, Hq=128, 512]");
  a = valid_args(ST_DTYPE_BF16);
  st_tensor_contiguous(&a.lse, FAKE(0x72000), ST_DTYPE_FP32, 2, (int64_t[]){LB, LHQ});
  expect_refused(&a, I, "lse.shape=[32,128]");
  a = valid_args(ST_DTYPE_BF16);
  a.q.data = FAKE(0x10008);
  expect_refused(&a, I, "q.data=0x10008 is not 16-byte aligned");
  a = valid_args(ST_DTYPE_BF16);
  a.pdl = 3;
  expect_refused(&a, I, "pdl=3 must be 0 or 1");
}

static st_mla_sparse_decode_config config(st_dtype dt, int heads, int tile, int threads, int splits) {
  return (st_mla_sparse_decode_config){
      .dtype = dt, .heads_per_cta = heads, .tile_tokens = tile, .threads = threads, .splits = splits};
}

static void test_variants_fit_and_parameters_are_checked(void **state) {
  (void)state;
  st_err err = {{0}};
  st_mla_sparse_decode_args a = valid_args(ST_DTYPE_FP8_E4M3);
  st_mla_sparse_decode_config c = config(ST_DTYPE_BF16, 64, 32, 512, 0);
  assert_int_equal(st_mla_sparse_decode_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "bf16 cache, call has fp8"));
  c.dtype = ST_DTYPE_FP8_E4M3;
  assert_int_equal(st_mla_sparse_decode_check_fit(&c, &a, &err), ST_OK);
  a.q.shape[1] = a.o.shape[1] = 32;
  assert_int_equal(st_mla_sparse_decode_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "64 heads a CTA do not divide Hq=32"));
  c.tile_tokens = 64; /* 64 heads x 64 tokens: past the shared memory */
  a.q.shape[1] = a.o.shape[1] = 128;
  assert_int_equal(st_mla_sparse_decode_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "shared memory"));

  st_params k = {0}, l = {0};
  st_params_set(&k, "dtype", "fp8", &err);
  st_params_set_int(&k, "heads_per_cta", 64, &err);
  st_params_set_int(&k, "tile_tokens", 32, &err);
  st_params_set_int(&k, "threads", 256, &err);
  st_params_set_int(&l, "splits", 0, &err);
  assert_int_equal(st_mla_sparse_decode_config_from_params(&k, &l, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "accumulators"));
  st_params_set_int(&k, "threads", 512, &err);
  assert_int_equal(st_mla_sparse_decode_config_from_params(&k, &l, &c, &err), ST_OK);
  assert_int_equal(c.heads_per_cta, 64);
  st_params_set_int(&k, "heads_per_cta", 48, &err);
  assert_int_equal(st_mla_sparse_decode_config_from_params(&k, &l, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "heads_per_cta=48"));
  /* mma 1: 4 warps an m tile of 16 heads, tiles of whole 32 tokens */
  st_params_set_int(&k, "heads_per_cta", 32, &err);
  st_params_set_int(&k, "mma", 1, &err);
  assert_int_equal(st_mla_sparse_decode_config_from_params(&k, &l, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "mma=1 needs threads = 8 x heads_per_cta (has 512 for 32 heads)"));
  st_params_set_int(&k, "threads", 256, &err);
  assert_int_equal(st_mla_sparse_decode_config_from_params(&k, &l, &c, &err), ST_OK);
  assert_int_equal(c.mma, 1);
  st_params_set_int(&k, "tile_tokens", 16, &err);
  assert_int_equal(st_mla_sparse_decode_config_from_params(&k, &l, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "tile_tokens a multiple of 32 (has 16)"));
  /* pipe: the tensor-core family only */
  st_params_set_int(&k, "tile_tokens", 64, &err);
  st_params_set_int(&k, "pipe", 1, &err);
  assert_int_equal(st_mla_sparse_decode_config_from_params(&k, &l, &c, &err), ST_OK);
  assert_int_equal(c.pipe, 1);
  st_params_set_int(&k, "mma", 0, &err);
  assert_int_equal(st_mla_sparse_decode_config_from_params(&k, &l, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "pipe=1 needs mma=1"));
}

static void test_plans_size_grid_shared_memory_and_workspace(void **state) {
  (void)state;
  st_err err = {{0}};
  st_mla_sparse_decode_args a = valid_args(ST_DTYPE_FP8_E4M3);
  a.q.shape[0] = a.o.shape[0] = a.indices.shape[0] = 1; /* B = 1, qlen 1 */
  a.qlen = 1;
  st_mla_sparse_decode_config c = config(ST_DTYPE_FP8_E4M3, 64, 32, 512, 0);
  st_mla_sparse_decode_plan p;
  assert_int_equal(st_mla_sparse_decode_plan_make(&c, &a, 132, &p, &err), ST_OK);
  /* 2 head tiles: 66 splits would fill the SMs, 32 leave 2 tiles each */
  assert_int_equal(p.splits, 32);
  assert_int_equal(p.params.entries_per_split, 64);
  assert_int_equal(p.grid[0], 32);
  assert_int_equal(p.grid[1], 2);
  assert_int_equal(p.block, 512);
  assert_int_equal(p.smem_bytes, 64 * 584 * 2 + 32 * 577 * 4 + 64 * 32 * 4 + 64 * 12 + 32 * 4);
  assert_int_equal(p.merge_grid[0], 1);
  assert_int_equal(p.merge_grid[1], 128);
  assert_int_equal(p.merge_block, 128);
  assert_true(p.workspace_bytes >= (size_t)32 * 128 * (512 + 2) * 4);
  assert_true(p.part_ml_offset >= (size_t)32 * 128 * 512 * 4 && p.part_ml_offset % 256 == 0);
  /* Tiles of 64 tokens: two a split (16 splits), one a split with wgmma
   * (32), whose tune picked one at B 1 */
  st_mla_sparse_decode_config m = config(ST_DTYPE_FP8_E4M3, 64, 64, 512, 0);
  m.mma = 1;
  assert_int_equal(st_mla_sparse_decode_plan_make(&m, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.splits, 16);
  st_mla_sparse_decode_config w = config(ST_DTYPE_FP8_E4M3, 64, 64, 256, 0);
  w.mma = 2;
  w.pipe = 1;
  assert_int_equal(st_mla_sparse_decode_plan_make(&w, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.splits, 32);
  /* mma 1: the cache tile in bf16 rows of 584, the weights in bf16 rows of tile + 8 */
  assert_int_equal(st_mla_sparse_decode_smem_bytes(&m),
                   64 * 584 * 2 + 64 * 584 * 2 + 64 * 64 * 4 + 64 * 72 * 2 + 64 * 12 + 64 * 4);
  /* pipe: plus the raw fp8 rows of a tile and a second list of slots */
  m.pipe = 1;
  assert_int_equal(st_mla_sparse_decode_smem_bytes(&m),
                   64 * 584 * 2 + 64 * 584 * 2 + 64 * 656 + 64 * 64 * 4 + 64 * 72 * 2 + 64 * 12 + 2 * 64 * 4);
  /* 64 rows x 2 tiles: 128 CTAs, as many as one more split would not fit: none */
  a = valid_args(ST_DTYPE_FP8_E4M3);
  assert_int_equal(st_mla_sparse_decode_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.splits, 1);
  assert_int_equal(p.workspace_bytes, 0);
  assert_int_equal(p.merge_block, 0);
  assert_int_equal(p.grid[0], LB * LQLEN);
  /* Explicit splits: at most topk, and none empty (100 entries in 3 splits of 34) */
  a.indices.shape[1] = 100;
  c.splits = 3;
  assert_int_equal(st_mla_sparse_decode_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.splits, 3);
  assert_int_equal(p.params.entries_per_split, 34);
  c.splits = 128;
  a.indices.shape[1] = 5;
  assert_int_equal(st_mla_sparse_decode_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.splits, 5);
  /* Optional inputs reach the argument block; device data is never read. */
  st_tensor_contiguous(&a.topk_length, FAKE(0x70000), ST_DTYPE_INT32, 1, (int64_t[]){LB});
  st_tensor_contiguous(&a.attn_sink, FAKE(0x71000), ST_DTYPE_FP32, 1, (int64_t[]){LHQ});
  assert_int_equal(st_mla_sparse_decode_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_ptr_equal(p.params.topk_length, FAKE(0x70000));
  assert_ptr_equal(p.params.sink, FAKE(0x71000));
  assert_int_equal(p.params.num_slots, (int64_t)LPAGES * LPAGE);
  assert_int_equal(p.params.page_size, LPAGE);
  assert_int_equal(p.params.kv_stride_token, 656);
}

static void test_dispatch_key_is_canonical(void **state) {
  (void)state;
  st_err err = {{0}};
  st_mla_sparse_decode_args a = valid_args(ST_DTYPE_FP8_E4M3);
  char key[256];
  st_params fields = {0};
  assert_int_equal(st_mla_sparse_decode_dispatch_key(&a, key, sizeof key, &fields, &err), ST_OK);
  assert_string_equal(key, "mla_sparse_decode:B=32,Hq=128,dtype=fp8,qlen=2,topk=2048");
  assert_string_equal(st_params_get(&fields, "dtype"), "fp8");
  assert_string_equal(st_params_get(&fields, "B"), "32");
}

/* ---- gpu: every variant over the edge cases ------------------------------ */

typedef struct edge {
  const char *dtype, *tlen, *sel;
  int B, Hq, qlen, topk, ctx, sink, lse;
} edge;

static const edge edges[] = {
    /* the anchor's heads and entries, with every edge of the indices */
    {"fp8", "random", "edge", 3, 128, 1, 2048, 4096, 1, 1},
    {"bf16", "none", "edge", 4, 64, 2, 512, 1000, 0, 1},
    /* topk not a multiple of any tile; qlen 4 */
    {"fp8", "random", "random", 5, 16, 4, 100, 300, 0, 0},
    {"bf16", "none", "random", 1, 128, 1, 1024, 2000, 1, 1},
    /* fewer tokens than entries: repeats; fewer valid entries than topk */
    {"fp8", "none", "edge", 2, 32, 3, 7, 5, 1, 1},
    {"fp8", "none", "random", 8, 64, 1, 2048, 32768, 0, 0},
};

static void make_shape(const edge *e, st_shape *s) {
  memset(s, 0, sizeof *s);
  st_err err = {{0}};
  snprintf(s->op, sizeof s->op, "mla_sparse_decode");
  st_params_set(&s->params, "dtype", e->dtype, &err);
  st_params_set(&s->params, "tlen", e->tlen, &err);
  st_params_set(&s->params, "sel", e->sel, &err);
  st_params_set_int(&s->params, "B", e->B, &err);
  st_params_set_int(&s->params, "Hq", e->Hq, &err);
  st_params_set_int(&s->params, "qlen", e->qlen, &err);
  st_params_set_int(&s->params, "topk", e->topk, &err);
  st_params_set_int(&s->params, "ctx", e->ctx, &err);
  st_params_set_int(&s->params, "sink", e->sink, &err);
  st_params_set_int(&s->params, "lse", e->lse, &err);
  snprintf(s->key, sizeof s->key, "edge:%s,tlen=%s,sel=%s,B=%d,Hq=%d,qlen=%d,topk=%d,ctx=%d,sink=%d,lse=%d", e->dtype,
           e->tlen, e->sel, e->B, e->Hq, e->qlen, e->topk, e->ctx, e->sink, e->lse);
}

static void test_every_variant_matches_the_reference_on_edge_cases(void **state) {
  (void)state;
  const int n = (int)(sizeof edges / sizeof edges[0]);
  st_shape shapes[sizeof edges / sizeof edges[0]];
  for (int i = 0; i < n; i++) make_shape(&edges[i], &shapes[i]);
  st_test_every_variant("mla_sparse_decode", shapes, n, g_seed);
}

int main(int argc, char **argv) {
  const char *part = argc > 1 ? argv[1] : "";
  if (strcmp(part, "cpu") == 0) {
    g_seed = st_test_seed("mla_sparse_decode_cpu");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_one_token_gives_its_value),
        cmocka_unit_test(test_reference_repeated_slot_counts_twice),
        cmocka_unit_test(test_reference_skips_none_and_out_of_range_slots),
        cmocka_unit_test(test_reference_topk_length_cuts_each_request),
        cmocka_unit_test(test_reference_sink_scales_o_and_leaves_lse),
        cmocka_unit_test(test_reference_dequantizes_the_656_byte_row),
        cmocka_unit_test(test_reference_matches_a_naive_softmax_on_random_data),
        cmocka_unit_test(test_verifier_passes_the_reference_and_fails_planted_mistakes),
        cmocka_unit_test(test_valid_arguments_pass_with_every_option),
        cmocka_unit_test(test_bad_arguments_are_refused_by_name),
        cmocka_unit_test(test_variants_fit_and_parameters_are_checked),
        cmocka_unit_test(test_plans_size_grid_shared_memory_and_workspace),
        cmocka_unit_test(test_dispatch_key_is_canonical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
  }
  if (strcmp(part, "gpu") == 0) {
    const int rc = st_test_require_gpu();
    if (rc) return rc;
    g_seed = st_test_seed("mla_sparse_decode_gpu");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_variant_matches_the_reference_on_edge_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
  }
  fprintf(stderr, "usage: %s cpu|gpu\n", argv[0]);
  return 2;
}
