/* test_mla_sparse_prefill - the mla_sparse_prefill launcher and, on a GPU,
 * every variant against the double-precision reference.
 *
 * cpu: the double-precision reference (a view onto mla_sparse_decode's) on
 * hand-checkable cases (one entry gives its value, two equal ones ln 2 more
 * lse, repeats count twice, none and out-of-range entries are skipped,
 * topk_length cuts rows, the sink's regimes leave lse and max_logits,
 * max_logits is the largest counted score, padded q and kv rows match
 * dense ones) and its verifier failing planted mistakes; argument checks
 * (each refusal's status and the argument it names), the variant config
 * (bf16 only), the plan as a decode batch of one-token requests over
 * one-token pages (grid, splits, workspace, shared memory, max_logits in
 * the argument block) and the dispatch key. gpu: every generated variant over the contract's edge
 * cases (tuner/ops/mla_sparse_prefill.c builds the inputs; with
 * ST_TEST_COMPILE_ONLY it only compiles them). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/mla_sparse_prefill.h"
#include "ops/tensor_check.h"
#include "reference/dtype.h"
#include "reference/mla_sparse_decode.h"
#include "reference/mla_sparse_prefill.h"
#include "testutil.h"
#include "variant_matrix.h"

#define FAKE(p) ((void *)(uintptr_t)(p))

static uint64_t g_seed;

/* ---- the prefill reference ---------------------------------------------- */

/* Each query row is its own request over s_kv token rows; q and kv may be
 * padded between heads and rows. Padding holds bf16 NaNs, so reading it
 * shows up in every output. */
enum { P_SQ = 3, P_HQ = 16, P_SKV = 24, P_TOPK = 8 };

typedef struct pre {
  st_ref_mla_sparse_prefill in;
  uint16_t *q, *kv;
  int32_t idx[P_SQ * P_TOPK], tlen[P_SQ];
  float sink[P_HQ];
  double *o, lse[P_SQ * P_HQ], ml[P_SQ * P_HQ];
} pre;

static void pre_free(pre *p) {
  free(p->q);
  free(p->kv);
  free(p->o);
}

/* Random q and kv in [-1, 1) from `seed` (the same values whatever the
 * padding), every entry none, no topk_length and no sink. */
static void pre_init(pre *p, uint64_t seed, int q_pad, int kv_pad) {
  memset(p, 0, sizeof *p);
  const int64_t qh = ST_MLA_DIM_QK + q_pad, qr = P_HQ * qh + q_pad, kr = ST_MLA_DIM_QK + kv_pad;
  p->q = malloc(sizeof *p->q * (size_t)(P_SQ * qr));
  p->kv = malloc(sizeof *p->kv * (size_t)(P_SKV * kr));
  p->o = malloc(sizeof *p->o * P_SQ * P_HQ * ST_MLA_DIM_V);
  assert_true(p->q && p->kv && p->o);
  for (int64_t i = 0; i < P_SQ * qr; i++) p->q[i] = 0x7fc0;
  for (int64_t i = 0; i < P_SKV * kr; i++) p->kv[i] = 0x7fc0;
  uint64_t rng = seed;
  for (int r = 0; r < P_SQ; r++)
    for (int h = 0; h < P_HQ; h++)
      for (int d = 0; d < ST_MLA_DIM_QK; d++)
        p->q[r * qr + h * qh + d] = st_float_to_bf16((float)st_rand_uniform(&rng, -1, 1));
  for (int t = 0; t < P_SKV; t++)
    for (int d = 0; d < ST_MLA_DIM_QK; d++) p->kv[t * kr + d] = st_float_to_bf16((float)st_rand_uniform(&rng, -1, 1));
  for (int i = 0; i < P_SQ * P_TOPK; i++) p->idx[i] = -1;
  p->in = (st_ref_mla_sparse_prefill){.s_q = P_SQ,
                                      .h_q = P_HQ,
                                      .s_kv = P_SKV,
                                      .topk = P_TOPK,
                                      .q = p->q,
                                      .q_stride = {qr, qh},
                                      .kv = p->kv,
                                      .kv_stride = kr,
                                      .indices = p->idx,
                                      .sm_scale = 0.0721};
}

static void pre_run(pre *p) { assert_int_equal(st_ref_mla_sparse_prefill_compute(&p->in, p->o, p->lse, p->ml, 2), 0); }

static double pre_q(const pre *p, int row, int h, int d) {
  return st_bf16_to_float(p->q[row * p->in.q_stride[0] + h * p->in.q_stride[1] + d]);
}

static double pre_v(const pre *p, int tok, int d) { return st_bf16_to_float(p->kv[tok * p->in.kv_stride + d]); }

static double pre_score(const pre *p, int row, int h, int tok) {
  double dot = 0;
  for (int d = 0; d < ST_MLA_DIM_QK; d++) dot += pre_q(p, row, h, d) * pre_v(p, tok, d);
  return p->in.sm_scale * dot;
}

static const double *pre_o(const pre *p, int row, int h) {
  return p->o + ((size_t)row * P_HQ + (size_t)h) * ST_MLA_DIM_V;
}

static void expect_pre_value(const pre *p, int row, int h, int tok, double factor) {
  const double *o = pre_o(p, row, h);
  for (int d = 0; d < ST_MLA_DIM_V; d++) expect_near(o[d], factor * pre_v(p, tok, d), 1e-12);
}

static void expect_pre_empty(const pre *p, int row) {
  for (int h = 0; h < P_HQ; h++) {
    const double *o = pre_o(p, row, h);
    for (int d = 0; d < ST_MLA_DIM_V; d++) assert_true(o[d] == 0.0);
    assert_true(p->lse[row * P_HQ + h] == -INFINITY && p->ml[row * P_HQ + h] == -INFINITY);
  }
}

static void test_prefill_one_entry_gives_its_value(void **state) {
  (void)state;
  pre p;
  pre_init(&p, g_seed + 30, 0, 0);
  p.idx[1 * P_TOPK + 5] = 17;
  pre_run(&p);
  for (int h = 0; h < P_HQ; h++) {
    expect_pre_value(&p, 1, h, 17, 1.0);
    expect_near(p.lse[P_HQ + h], pre_score(&p, 1, h, 17), 1e-12);
    expect_near(p.ml[P_HQ + h], pre_score(&p, 1, h, 17), 1e-12);
  }
  expect_pre_empty(&p, 0);
  expect_pre_empty(&p, 2);
  pre_free(&p);
}

static void test_prefill_two_equal_entries_give_the_value_and_ln_2(void **state) {
  (void)state;
  pre p;
  pre_init(&p, g_seed + 31, 0, 0);
  memcpy(p.kv + 9 * ST_MLA_DIM_QK, p.kv + 4 * ST_MLA_DIM_QK, sizeof *p.kv * ST_MLA_DIM_QK); /* rows 4 and 9 equal */
  p.idx[0] = 4;
  p.idx[3] = 9;
  pre_run(&p);
  for (int h = 0; h < P_HQ; h++) {
    expect_pre_value(&p, 0, h, 4, 1.0);
    expect_near(p.lse[h], pre_score(&p, 0, h, 4) + log(2.0), 1e-12);
    expect_near(p.ml[h], pre_score(&p, 0, h, 4), 1e-12);
  }
  pre_free(&p);
}

static void test_prefill_repeated_entry_counts_twice(void **state) {
  (void)state;
  pre p;
  pre_init(&p, g_seed + 32, 0, 0);
  const int32_t row[P_TOPK] = {5, -1, 5, 20, -1, -1, -1, -1}; /* 5 twice, 20 once */
  memcpy(p.idx + 2 * P_TOPK, row, sizeof row);
  pre_run(&p);
  for (int h = 0; h < P_HQ; h++) {
    const double a = 2 * exp(pre_score(&p, 2, h, 5)), b = exp(pre_score(&p, 2, h, 20));
    const double *o = pre_o(&p, 2, h);
    for (int d = 0; d < ST_MLA_DIM_V; d++)
      expect_near(o[d], (a * pre_v(&p, 5, d) + b * pre_v(&p, 20, d)) / (a + b), 1e-12);
    expect_near(p.lse[2 * P_HQ + h], log(a + b), 1e-12);
  }
  pre_free(&p);
}

static void test_prefill_skips_negative_and_out_of_range_entries(void **state) {
  (void)state;
  pre p;
  pre_init(&p, g_seed + 33, 0, 0);
  const int32_t row[P_TOPK] = {-1, P_SKV, INT32_MIN, P_SKV - 1, INT32_MAX, -7, P_SKV + 5, -1};
  memcpy(p.idx, row, sizeof row);
  pre_run(&p);
  for (int h = 0; h < P_HQ; h++) expect_pre_value(&p, 0, h, P_SKV - 1, 1.0); /* the last kv row is the one entry */
  p.idx[3] = -1;                                                             /* none left */
  pre_run(&p);
  expect_pre_empty(&p, 0);
  pre_free(&p);
}

static void test_prefill_topk_length_cuts_each_row(void **state) {
  (void)state;
  pre p;
  pre_init(&p, g_seed + 34, 0, 0);
  for (int i = 0; i < P_SQ * P_TOPK; i++) p.idx[i] = (i * 7) % P_SKV;
  const int32_t len[P_SQ] = {0, 1, 99}; /* 99: clamped to topk */
  memcpy(p.tlen, len, sizeof len);
  p.in.topk_length = p.tlen;
  pre_run(&p);
  expect_pre_empty(&p, 0);
  for (int h = 0; h < P_HQ; h++) expect_pre_value(&p, 1, h, p.idx[P_TOPK], 1.0);
  double *cut = malloc(sizeof *cut * P_HQ * ST_MLA_DIM_V);
  assert_non_null(cut);
  memcpy(cut, pre_o(&p, 2, 0), sizeof *cut * P_HQ * ST_MLA_DIM_V);
  p.in.topk_length = NULL;
  pre_run(&p);
  assert_memory_equal(cut, pre_o(&p, 2, 0), sizeof *cut * P_HQ * ST_MLA_DIM_V);
  free(cut);
  p.tlen[1] = -3; /* clamped to 0 */
  p.in.topk_length = p.tlen;
  pre_run(&p);
  expect_pre_empty(&p, 1);
  pre_free(&p);
}

static void test_prefill_sink_scales_o_and_leaves_lse_and_max_logits(void **state) {
  (void)state;
  pre p;
  pre_init(&p, g_seed + 35, 0, 0);
  for (int i = 0; i < P_SQ * P_TOPK; i++) p.idx[i] = (i * 5 + 3) % P_SKV;
  pre_run(&p);
  const size_t n = (size_t)P_SQ * P_HQ * ST_MLA_DIM_V;
  double *plain = malloc(sizeof *plain * n), plain_lse[P_SQ * P_HQ], plain_ml[P_SQ * P_HQ];
  assert_non_null(plain);
  memcpy(plain, p.o, sizeof *plain * n);
  memcpy(plain_lse, p.lse, sizeof plain_lse);
  memcpy(plain_ml, p.ml, sizeof plain_ml);
  uint64_t rng = g_seed + 36;
  for (int h = 0; h < P_HQ; h++) p.sink[h] = (float)st_rand_uniform(&rng, -3, 3);
  p.sink[0] = INFINITY;
  p.sink[1] = -INFINITY;
  p.in.sink = p.sink;
  pre_run(&p);
  for (int r = 0; r < P_SQ; r++)
    for (int h = 0; h < P_HQ; h++) {
      const size_t at = (size_t)r * P_HQ + (size_t)h;
      const double f = h == 0 ? 0.0 : h == 1 ? 1.0 : exp(plain_lse[at]) / (exp(plain_lse[at]) + exp((double)p.sink[h]));
      for (int d = 0; d < ST_MLA_DIM_V; d++) {
        const double want = f * plain[at * ST_MLA_DIM_V + d], got = p.o[at * ST_MLA_DIM_V + d];
        if (h < 2)
          assert_true(got == want); /* +inf: exact zeros; -inf: untouched */
        else
          expect_near(got, want, 1e-12);
      }
      assert_true(p.lse[at] == plain_lse[at] && p.ml[at] == plain_ml[at]);
    }
  free(plain);
  pre_free(&p);
}

static void test_prefill_max_logits_is_the_largest_counted_score(void **state) {
  (void)state;
  pre p;
  pre_init(&p, g_seed + 37, 0, 0);
  uint64_t rng = g_seed + 38;
  for (int i = 0; i < P_SQ * P_TOPK; i++) {
    const int64_t r = st_rand_int(&rng, 0, 5);
    p.idx[i] = r == 0 ? -1 : r == 1 ? P_SKV + 2 : (int32_t)st_rand_int(&rng, 0, P_SKV - 1);
  }
  p.idx[0] = 3; /* row 0 counts only entry 0 below */
  p.tlen[0] = 1;
  p.tlen[1] = P_TOPK - 2;
  p.tlen[2] = P_TOPK;
  p.in.topk_length = p.tlen;
  pre_run(&p);
  for (int r = 0; r < P_SQ; r++)
    for (int h = 0; h < P_HQ; h++) {
      double m = -INFINITY;
      for (int e = 0; e < p.tlen[r]; e++) {
        const int32_t t = p.idx[r * P_TOPK + e];
        if (t >= 0 && t < P_SKV) m = fmax(m, pre_score(&p, r, h, t));
      }
      if (m == -INFINITY)
        assert_true(p.ml[r * P_HQ + h] == -INFINITY);
      else
        expect_near(p.ml[r * P_HQ + h], m, 1e-12);
    }
  pre_free(&p);
}

static void test_prefill_strided_q_and_kv_match_dense(void **state) {
  (void)state;
  pre dense, padded;
  pre_init(&dense, g_seed + 39, 0, 0);
  pre_init(&padded, g_seed + 39, 24, 40);
  uint64_t rng = g_seed + 40;
  for (int i = 0; i < P_SQ * P_TOPK; i++) dense.idx[i] = (int32_t)st_rand_int(&rng, -2, P_SKV + 1);
  memcpy(padded.idx, dense.idx, sizeof dense.idx);
  pre_run(&dense);
  pre_run(&padded);
  assert_memory_equal(dense.o, padded.o, sizeof *dense.o * P_SQ * P_HQ * ST_MLA_DIM_V);
  assert_memory_equal(dense.lse, padded.lse, sizeof dense.lse);
  assert_memory_equal(dense.ml, padded.ml, sizeof dense.ml);
  pre_free(&dense);
  pre_free(&padded);
}

static void test_prefill_verifier_fails_planted_o_lse_and_max_logits(void **state) {
  (void)state;
  pre p;
  pre_init(&p, g_seed + 41, 8, 8);
  for (int i = P_TOPK; i < P_SQ * P_TOPK; i++) p.idx[i] = (i * 11) % P_SKV; /* row 0 has no entry */
  pre_run(&p);
  enum { N = P_SQ * P_HQ };
  uint16_t *got = malloc(sizeof *got * N * ST_MLA_DIM_V);
  float got_lse[N], got_ml[N];
  assert_non_null(got);
  for (size_t i = 0; i < (size_t)N * ST_MLA_DIM_V; i++) got[i] = st_float_to_bf16((float)p.o[i]);
  for (int i = 0; i < N; i++) {
    got_lse[i] = (float)p.lse[i];
    got_ml[i] = (float)p.ml[i];
  }
  char msg[512];
  double err = 0;
  const double tol = 2e-2;
#define VERIFY()                                                                                                       \
  st_ref_mla_sparse_prefill_verify(&p.in, p.o, p.lse, p.ml, got, got_lse, got_ml, tol, &err, msg, sizeof msg)
  assert_int_equal(VERIFY(), 0);
  const size_t at = ((size_t)2 * P_HQ + 7) * ST_MLA_DIM_V; /* o of row 2, head 7, 10% too large */
  const uint16_t keep = got[at + 3];
  for (int d = 0; d < ST_MLA_DIM_V; d++) got[at + d] = st_float_to_bf16(1.1f * st_bf16_to_float(got[at + d]));
  assert_int_equal(VERIFY(), 1);
  assert_non_null(strstr(msg, "row 2 head 7"));
  for (int d = 0; d < ST_MLA_DIM_V; d++) got[at + d] = st_float_to_bf16((float)p.o[at + d]);
  assert_true(got[at + 3] == keep);
  got_lse[P_HQ + 4] += 0.05f;
  assert_int_equal(VERIFY(), 1);
  assert_non_null(strstr(msg, "lse"));
  got_lse[P_HQ + 4] = (float)p.lse[P_HQ + 4];
  got_ml[2 * P_HQ + 9] -= 0.05f;
  assert_int_equal(VERIFY(), 1);
  assert_non_null(strstr(msg, "row 2 head 9: max_logits"));
  got_ml[2 * P_HQ + 9] = (float)p.ml[2 * P_HQ + 9];
  got_ml[1] = 0; /* row 0 has no entry: max_logits must be -inf */
  assert_int_equal(VERIFY(), 1);
  assert_non_null(strstr(msg, "row 0 head 1: max_logits"));
#undef VERIFY
  free(got);
  pre_free(&p);
}


/* ---- the launcher ------------------------------------------------------- */

enum { LSQ = 4096, LHQ = 128, LSKV = 32768, LTOPK = 2048 };

static st_mla_sparse_prefill_args valid_args(void) {
  st_mla_sparse_prefill_args a;
  st_mla_sparse_prefill_args_init(&a);
  st_tensor_contiguous(&a.q, FAKE(0x10000), ST_DTYPE_BF16, 3, (int64_t[]){LSQ, LHQ, 576});
  st_tensor_contiguous(&a.kv, FAKE(0x100000000ull), ST_DTYPE_BF16, 3, (int64_t[]){LSKV, 1, 576});
  st_tensor_contiguous(&a.indices, FAKE(0x50000), ST_DTYPE_INT32, 3, (int64_t[]){LSQ, 1, LTOPK});
  st_tensor_contiguous(&a.o, FAKE(0x60000), ST_DTYPE_BF16, 3, (int64_t[]){LSQ, LHQ, 512});
  a.sm_scale = 0.0721f;
  return a;
}

static void with_every_option(st_mla_sparse_prefill_args *a) {
  st_tensor_contiguous(&a->topk_length, FAKE(0x70000), ST_DTYPE_INT32, 1, (int64_t[]){a->q.shape[0]});
  st_tensor_contiguous(&a->attn_sink, FAKE(0x71000), ST_DTYPE_FP32, 1, (int64_t[]){a->q.shape[1]});
  st_tensor_contiguous(&a->lse, FAKE(0x72000), ST_DTYPE_FP32, 2, (int64_t[]){a->q.shape[0], a->q.shape[1]});
  st_tensor_contiguous(&a->max_logits, FAKE(0x73000), ST_DTYPE_FP32, 2, (int64_t[]){a->q.shape[0], a->q.shape[1]});
}

static void expect_refused(const st_mla_sparse_prefill_args *a, st_status want, const char *fragment) {
  st_err err = {{0}};
  const st_status s = st_mla_sparse_prefill_check_args(a, &err);
  if (s != want || !strstr(err.msg, fragment))
    fail_msg("expected status %d with '%s', got status %d: '%s'", (int)want, fragment, (int)s, err.msg);
}

static void test_valid_arguments_pass_with_every_option(void **state) {
  (void)state;
  st_err err = {{0}};
  st_mla_sparse_prefill_args a = valid_args();
  assert_int_equal(st_mla_sparse_prefill_check_args(&a, &err), ST_OK);
  with_every_option(&a);
  assert_int_equal(st_mla_sparse_prefill_check_args(&a, &err), ST_OK);
  a = valid_args();
  a.kv.stride[0] = 640; /* padded rows */
  a.q.stride[1] = 584;
  a.q.stride[0] = 584 * LHQ;
  a.indices.stride[0] = LTOPK + 4;
  assert_int_equal(st_mla_sparse_prefill_check_args(&a, &err), ST_OK);
  a = valid_args();
  a.q.shape[0] = a.o.shape[0] = a.indices.shape[0] = 1; /* one token, h_q 16, a kv of one row */
  a.q.shape[1] = a.o.shape[1] = 16;
  a.kv.shape[0] = 1;
  assert_int_equal(st_mla_sparse_prefill_check_args(&a, &err), ST_OK);
}

static void test_bad_arguments_are_refused_by_name(void **state) {
  (void)state;
  const st_status I = ST_ERR_INVALID_ARG, U = ST_ERR_UNSUPPORTED;
  expect_refused(NULL, I, "args is NULL");
  st_mla_sparse_prefill_args a;
  a = valid_args();
  a.sm_scale = 0;
  expect_refused(&a, I, "sm_scale=0 must be positive");
  a = valid_args();
  a.sm_scale = NAN;
  expect_refused(&a, I, "must be positive and finite");
  a = valid_args();
  a.q.data = NULL;
  expect_refused(&a, I, "q");
  a = valid_args();
  a.q.dtype = ST_DTYPE_FP32;
  expect_refused(&a, I, "q.dtype");
  a = valid_args();
  a.q.shape[2] = 512;
  expect_refused(&a, I, "q.shape[2]=512 must be 576");
  a = valid_args();
  a.q.shape[1] = a.o.shape[1] = 24;
  expect_refused(&a, U, "h_q=24 (q.shape[1]) is not a multiple of 16");
  a = valid_args();
  a.q.shape[1] = a.o.shape[1] = 256;
  expect_refused(&a, U, "h_q=256");
  a = valid_args();
  a.q.shape[0] = a.o.shape[0] = a.indices.shape[0] = (1 << 20) + 1;
  expect_refused(&a, I, "s_q=1048577 (q.shape[0]) is outside 1..1048576");
  a = valid_args();
  a.q.data = FAKE(0x10008);
  expect_refused(&a, I, "q.data=0x10008 is not 16-byte aligned");
  a = valid_args();
  a.kv.dtype = ST_DTYPE_FP8_E4M3;
  expect_refused(&a, I, "kv.dtype=");
  a = valid_args();
  a.kv.data = NULL;
  expect_refused(&a, I, "kv");
  a = valid_args();
  a.kv.shape[1] = 2;
  expect_refused(&a, I, "kv.shape=[32768,2,576] must be [s_kv, 1, 576]");
  a = valid_args();
  a.kv.shape[2] = 656;
  expect_refused(&a, I, "kv.shape=[32768,1,656]");
  a = valid_args();
  a.kv.stride[0] = 580; /* rows 1160 bytes apart: not 16-byte aligned */
  expect_refused(&a, I, "kv.stride[0]=580");
  a = valid_args();
  a.indices.dtype = ST_DTYPE_FP32;
  expect_refused(&a, I, "indices.dtype");
  a = valid_args();
  a.indices.ndim = 2;
  expect_refused(&a, I, "indices");
  a = valid_args();
  a.indices.shape[0] = 4095;
  expect_refused(&a, I, "indices.shape=[4095,1,2048] must be [s_q=4096, 1, topk]");
  a = valid_args();
  a.indices.shape[1] = 2;
  expect_refused(&a, I, "indices.shape=[4096,2,2048]");
  a = valid_args();
  a.indices.shape[2] = 4096;
  expect_refused(&a, I, "topk=4096 (indices.shape[2]) is outside 1..2048");
  a = valid_args();
  st_tensor_contiguous(&a.topk_length, FAKE(0x70000), ST_DTYPE_INT32, 1, (int64_t[]){LSQ - 1});
  expect_refused(&a, I, "topk_length.shape[0]=4095 must be 4096 (s_q)");
  a = valid_args();
  st_tensor_contiguous(&a.topk_length, FAKE(0x70000), ST_DTYPE_FP32, 1, (int64_t[]){LSQ});
  expect_refused(&a, I, "topk_length.dtype");
  a = valid_args();
  st_tensor_contiguous(&a.attn_sink, FAKE(0x71000), ST_DTYPE_BF16, 1, (int64_t[]){LHQ});
  expect_refused(&a, I, "attn_sink.dtype");
  a = valid_args();
  st_tensor_contiguous(&a.attn_sink, FAKE(0x71000), ST_DTYPE_FP32, 1, (int64_t[]){64});
  expect_refused(&a, I, "attn_sink.shape[0]=64 must be 128 (h_q)");
  a = valid_args();
  a.o.shape[2] = 576;
  expect_refused(&a, I, "o.shape=[4096,128,576] must be [s_q=4096, h_q=128, 512]");
  a = valid_args();
  a.o.dtype = ST_DTYPE_FP32;
  expect_refused(&a, I, "o.dtype");
  a = valid_args();
  a.o.data = NULL;
  expect_refused(&a, I, "o");
  a = valid_args();
  st_tensor_contiguous(&a.lse, FAKE(0x72000), ST_DTYPE_FP32, 2, (int64_t[]){LSQ, 64});
  expect_refused(&a, I, "lse.shape[1]=64 must be 128 ([s_q, h_q])");
  a = valid_args();
  st_tensor_contiguous(&a.max_logits, FAKE(0x73000), ST_DTYPE_FP32, 2, (int64_t[]){LHQ, LSQ});
  expect_refused(&a, I, "max_logits.shape[0]=128 must be 4096 ([s_q, h_q])");
  a = valid_args();
  st_tensor_contiguous(&a.max_logits, FAKE(0x73000), ST_DTYPE_BF16, 2, (int64_t[]){LSQ, LHQ});
  expect_refused(&a, I, "max_logits.dtype");
  a = valid_args();
  a.pdl = 3;
  expect_refused(&a, I, "pdl=3 must be 0 or 1");
}

static st_mla_sparse_prefill_config config(int heads, int tile, int threads, int mma, int splits) {
  return (st_mla_sparse_prefill_config){.dtype = ST_DTYPE_BF16,
                                        .heads_per_cta = heads,
                                        .tile_tokens = tile,
                                        .threads = threads,
                                        .mma = mma,
                                        .splits = splits};
}

static void test_variants_are_bf16_and_fit_by_heads_and_shared_memory(void **state) {
  (void)state;
  st_err err = {{0}};
  st_params k = {0}, l = {0};
  st_params_set(&k, "dtype", "fp8", &err);
  st_params_set_int(&k, "heads_per_cta", 64, &err);
  st_params_set_int(&k, "tile_tokens", 64, &err);
  st_params_set_int(&k, "threads", 512, &err);
  st_params_set_int(&k, "mma", 1, &err);
  st_params_set_int(&l, "splits", 0, &err);
  st_mla_sparse_prefill_config c;
  assert_int_equal(st_mla_sparse_prefill_config_from_params(&k, &l, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "dtype='fp8'"));
  st_params_set(&k, "dtype", "bf16", &err);
  assert_int_equal(st_mla_sparse_prefill_config_from_params(&k, &l, &c, &err), ST_OK);
  assert_int_equal(c.heads_per_cta, 64);
  assert_int_equal(c.mma, 1);
  st_mla_sparse_prefill_args a = valid_args();
  assert_int_equal(st_mla_sparse_prefill_check_fit(&c, &a, &err), ST_OK);
  a.q.shape[1] = a.o.shape[1] = 48; /* 64 heads a CTA do not divide 48 */
  assert_int_equal(st_mla_sparse_prefill_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "Hq=48"));
  a = valid_args();
  c.pipe = 1; /* bf16 with 64 heads and 64-token tiles staged twice: 244 KiB */
  assert_int_equal(st_mla_sparse_prefill_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "shared memory"));
}

static void test_plans_a_decode_batch_of_one_token_requests(void **state) {
  (void)state;
  st_err err = {{0}};
  st_mla_sparse_prefill_args a = valid_args();
  with_every_option(&a);
  a.kv.stride[0] = 640;
  a.indices.stride[0] = LTOPK + 4;
  a.max_logits.stride[0] = 2 * LHQ;
  st_mla_sparse_prefill_config c = config(64, 64, 512, 1, 0);
  st_mla_sparse_prefill_plan p;
  assert_int_equal(st_mla_sparse_prefill_plan_make(&c, &a, 132, &p, &err), ST_OK);
  /* 4096 tokens x 2 head tiles fill the SMs: one split, no workspace */
  assert_int_equal(p.splits, 1);
  assert_int_equal(p.workspace_bytes, 0);
  assert_int_equal(p.merge_block, 0);
  assert_int_equal(p.grid[0], LSQ);
  assert_int_equal(p.grid[1], 2);
  assert_int_equal(p.block, 512);
  assert_int_equal(p.smem_bytes, 64 * 584 * 2 + 64 * 584 * 2 + 64 * 64 * 4 + 64 * 72 * 2 + 64 * 12 + 64 * 4);
  /* the argument block: one-token requests over one-token pages */
  assert_int_equal(p.params.qlen, 1);
  assert_int_equal(p.params.rows, LSQ);
  assert_int_equal(p.params.page_size, 1);
  assert_int_equal(p.params.num_slots, LSKV);
  assert_int_equal(p.params.kv_stride_page, 640);
  assert_int_equal(p.params.idx_stride_row, LTOPK + 4);
  assert_int_equal(p.params.topk, LTOPK);
  assert_ptr_equal(p.params.topk_length, FAKE(0x70000));
  assert_ptr_equal(p.params.sink, FAKE(0x71000));
  assert_ptr_equal(p.params.lse, FAKE(0x72000));
  assert_ptr_equal(p.params.max_logits, FAKE(0x73000));
  assert_int_equal(p.params.max_logits_stride_row, 2 * LHQ);
  assert_int_equal(p.params.max_logits_stride_head, 1);
  /* One token: splits fill the SMs (2 head tiles, 2 tiles of entries each
   * at least: 16 splits of 128 entries), and the merge writes the outputs */
  a = valid_args();
  a.q.shape[0] = a.o.shape[0] = a.indices.shape[0] = 1;
  assert_int_equal(st_mla_sparse_prefill_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.splits, 16);
  assert_int_equal(p.params.entries_per_split, 128);
  assert_int_equal(p.merge_grid[0], 1);
  assert_int_equal(p.merge_grid[1], LHQ);
  assert_int_equal(p.merge_block, 128);
  assert_true(p.workspace_bytes >= (size_t)16 * LHQ * (512 + 2) * 4);
  assert_null(p.params.max_logits);
  /* Explicit splits: at most topk, none empty (100 entries in 3 of 34) */
  a.indices.shape[2] = 100;
  c.splits = 3;
  assert_int_equal(st_mla_sparse_prefill_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.splits, 3);
  assert_int_equal(p.params.entries_per_split, 34);
}

static void test_dispatch_key_is_canonical(void **state) {
  (void)state;
  st_err err = {{0}};
  st_mla_sparse_prefill_args a = valid_args();
  a.q.shape[1] = a.o.shape[1] = 64;
  char key[256];
  st_params fields = {0};
  assert_int_equal(st_mla_sparse_prefill_dispatch_key(&a, key, sizeof key, &fields, &err), ST_OK);
  assert_string_equal(key, "mla_sparse_prefill:Hq=64,s_q=4096,topk=2048");
  assert_string_equal(st_params_get(&fields, "Hq"), "64");
  assert_string_equal(st_params_get(&fields, "s_q"), "4096");
  assert_string_equal(st_params_get(&fields, "topk"), "2048");
  assert_int_equal(st_mla_sparse_prefill_dispatch_key(&a, key, 10, NULL, &err), ST_ERR_INVALID_ARG);
}

/* ---- gpu: every variant over the edge cases ------------------------------ */

typedef struct edge {
  const char *tlen, *sel;
  int s_q, Hq, s_kv, topk, sink, lse, ml;
} edge;

static const edge edges[] = {
    /* 128 heads, every edge of the indices (-1, >= s_kv, repeats, a token
     * with none), topk_length 0 and below topk, sinks +-inf and finite */
    {"random", "edge", 3, 128, 4096, 2048, 1, 1, 1},
    /* 64 heads, lse without max_logits; topk not a multiple of a tile */
    {"none", "edge", 5, 64, 1000, 300, 0, 1, 0},
    /* 16 heads, max_logits without lse; kv shorter than topk: repeats */
    {"none", "random", 4, 16, 5, 7, 1, 0, 1},
    /* many tokens (one split), neither optional output */
    {"random", "random", 300, 32, 2000, 100, 0, 0, 0},
    /* one token, top-1024: split and merged */
    {"none", "random", 1, 128, 32768, 1024, 1, 1, 1},
};

static void make_shape(const edge *e, st_shape *s) {
  memset(s, 0, sizeof *s);
  st_err err = {{0}};
  snprintf(s->op, sizeof s->op, "mla_sparse_prefill");
  st_params_set(&s->params, "tlen", e->tlen, &err);
  st_params_set(&s->params, "sel", e->sel, &err);
  st_params_set_int(&s->params, "s_q", e->s_q, &err);
  st_params_set_int(&s->params, "Hq", e->Hq, &err);
  st_params_set_int(&s->params, "s_kv", e->s_kv, &err);
  st_params_set_int(&s->params, "topk", e->topk, &err);
  st_params_set_int(&s->params, "sink", e->sink, &err);
  st_params_set_int(&s->params, "lse", e->lse, &err);
  st_params_set_int(&s->params, "ml", e->ml, &err);
  snprintf(s->key, sizeof s->key, "edge:tlen=%s,sel=%s,s_q=%d,Hq=%d,s_kv=%d,topk=%d,sink=%d,lse=%d,ml=%d", e->tlen,
           e->sel, e->s_q, e->Hq, e->s_kv, e->topk, e->sink, e->lse, e->ml);
}

static void test_every_variant_matches_the_reference_on_edge_cases(void **state) {
  (void)state;
  const int n = (int)(sizeof edges / sizeof edges[0]);
  st_shape shapes[sizeof edges / sizeof edges[0]];
  for (int i = 0; i < n; i++) make_shape(&edges[i], &shapes[i]);
  st_test_every_variant("mla_sparse_prefill", shapes, n, g_seed);
}

int main(int argc, char **argv) {
  const char *part = argc > 1 ? argv[1] : "";
  if (strcmp(part, "cpu") == 0) {
    g_seed = st_test_seed("mla_sparse_prefill_cpu");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefill_one_entry_gives_its_value),
        cmocka_unit_test(test_prefill_two_equal_entries_give_the_value_and_ln_2),
        cmocka_unit_test(test_prefill_repeated_entry_counts_twice),
        cmocka_unit_test(test_prefill_skips_negative_and_out_of_range_entries),
        cmocka_unit_test(test_prefill_topk_length_cuts_each_row),
        cmocka_unit_test(test_prefill_sink_scales_o_and_leaves_lse_and_max_logits),
        cmocka_unit_test(test_prefill_max_logits_is_the_largest_counted_score),
        cmocka_unit_test(test_prefill_strided_q_and_kv_match_dense),
        cmocka_unit_test(test_prefill_verifier_fails_planted_o_lse_and_max_logits),
        cmocka_unit_test(test_valid_arguments_pass_with_every_option),
        cmocka_unit_test(test_bad_arguments_are_refused_by_name),
        cmocka_unit_test(test_variants_are_bf16_and_fit_by_heads_and_shared_memory),
        cmocka_unit_test(test_plans_a_decode_batch_of_one_token_requests),
        cmocka_unit_test(test_dispatch_key_is_canonical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
  }
  if (strcmp(part, "gpu") == 0) {
    const int rc = st_test_require_gpu();
    if (rc) return rc;
    g_seed = st_test_seed("mla_sparse_prefill_gpu");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_variant_matches_the_reference_on_edge_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
  }
  fprintf(stderr, "usage: %s cpu|gpu\n", argv[0]);
  return 2;
}
