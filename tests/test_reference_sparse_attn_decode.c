/* The double-precision reference of sparse_attn_decode and its verifier:
 * masking at the query position, skipped and duplicated topk entries, empty
 * rows, qlen > 1, both paged KV layouts, fp8 scale modes, GQA group sizes and
 * head dims, large scores, and the verifier catching planted mistakes.
 *
 * Expected values come from a naive softmax over an explicit key list, read
 * from the fixture's own dequantized copy of the cache (not through the
 * strided views the reference reads). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_pool.h"
#include "reference/dtype.h"
#include "reference/sparse_attn_decode.h"
#include "testutil.h"

static uint64_t g_seed;

typedef struct shape {
  int R, qlen, Hq, Hkv, D, topk;
  const int *lens;
  st_dtype dtype;
  int layout;
} shape;

typedef struct fixture {
  st_ref_sparse_attn_decode in;
  uint16_t *q;
  st_kv_pool pool; /* K, V and their scales, with dense dequantized copies */
  int32_t *idx, *bt, *seq;
  double *o, *lse;
} fixture;

typedef st_kv_key key;

static int max_blocks(const shape *s) {
  int mb = 1;
  for (int r = 0; r < s->R; r++)
    if ((s->lens[r] + 127) / 128 > mb) mb = (s->lens[r] + 127) / 128;
  return mb;
}

/* The references read the pool through these views. */
static void wire_pool(fixture *f) {
  f->in.k_cache = f->pool.k_cache;
  f->in.v_cache = f->pool.v_cache;
  memcpy(f->in.k_stride, f->pool.k_stride, sizeof f->in.k_stride);
  memcpy(f->in.v_stride, f->pool.v_stride, sizeof f->in.v_stride);
  f->in.k_scales = f->pool.ks;
  f->in.v_scales = f->pool.vs;
  memcpy(f->in.ks_stride, f->pool.s_stride, sizeof f->in.ks_stride);
  memcpy(f->in.vs_stride, f->pool.s_stride, sizeof f->in.vs_stride);
}

/* Every row's first entry is the query's own block (as engines select it),
 * the others random in -1..max_blocks: skipped, duplicated and past-the-query
 * entries all occur. */
static void fill_topk(fixture *f, uint64_t *rng, int mb) {
  const int rows = f->in.R * f->in.qlen;
  for (int g = 0; g < f->in.Hkv; g++)
    for (int row = 0; row < rows; row++) {
      int32_t *e = f->idx + ((int64_t)g * rows + row) * f->in.topk;
      const int p = f->seq[row / f->in.qlen] - f->in.qlen + row % f->in.qlen;
      for (int i = 0; i < f->in.topk; i++) e[i] = (int32_t)st_rand_int(rng, -1, mb);
      e[0] = p >= 0 ? p / 128 : 0;
    }
}

/* Random bf16 q and cache, a block table scattered over the pool (a random
 * permutation), sm_scale 1/sqrt(D), scale mode NONE. */
static fixture make(shape s) {
  fixture f;
  memset(&f, 0, sizeof f);
  uint64_t rng = g_seed;
  const int mb = max_blocks(&s), bt_cols = mb + 1, rows = s.R * s.qlen;
  const int64_t pages = (int64_t)s.R * bt_cols + 3;
  f.in = (st_ref_sparse_attn_decode){.kv_dtype = s.dtype,
                                     .R = s.R,
                                     .qlen = s.qlen,
                                     .Hq = s.Hq,
                                     .Hkv = s.Hkv,
                                     .D = s.D,
                                     .topk = s.topk,
                                     .bt_cols = bt_cols,
                                     .pages = pages,
                                     .scale_mode = ST_KV_SCALE_NONE,
                                     .k_scale = 1,
                                     .v_scale = 1,
                                     .sm_scale = 1.0 / sqrt((double)s.D)};
  f.q = malloc(sizeof(uint16_t) * (size_t)rows * s.Hq * s.D);
  for (size_t i = 0; i < (size_t)rows * s.Hq * s.D; i++) f.q[i] = st_float_to_bf16((float)st_rand_uniform(&rng, -1, 1));
  st_kv_pool_make(&f.pool, s.dtype, s.layout, pages, s.Hkv, s.D, &rng);
  wire_pool(&f);
  int32_t *perm = malloc(sizeof(int32_t) * (size_t)pages);
  for (int64_t i = 0; i < pages; i++) perm[i] = (int32_t)i;
  for (int64_t i = pages - 1; i > 0; i--) {
    const int64_t j = st_rand_int(&rng, 0, i);
    const int32_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  f.bt = malloc(sizeof(int32_t) * (size_t)s.R * bt_cols);
  memcpy(f.bt, perm, sizeof(int32_t) * (size_t)s.R * bt_cols);
  free(perm);
  f.seq = malloc(sizeof(int32_t) * (size_t)s.R);
  for (int r = 0; r < s.R; r++) f.seq[r] = s.lens[r];
  f.idx = malloc(sizeof(int32_t) * (size_t)s.Hkv * rows * s.topk);
  fill_topk(&f, &rng, mb);
  f.o = malloc(sizeof(double) * (size_t)rows * s.Hq * s.D);
  f.lse = malloc(sizeof(double) * (size_t)rows * s.Hq);
  f.in.q = f.q;
  f.in.topk_idx = f.idx;
  f.in.block_table = f.bt;
  f.in.seq_lens = f.seq;
  return f;
}

/* TENSOR scales: every entry `k` / `v` when positive, else random in [0.25, 4). */
static void set_tensor_scales(fixture *f, float k, float v, uint64_t *rng) {
  f->in.scale_mode = ST_KV_SCALE_TENSOR;
  st_kv_pool_set_scales(&f->pool, k, v, rng);
}

static void run(fixture *f, int threads) {
  assert_int_equal(st_ref_sparse_attn_decode_compute(&f->in, f->o, f->lse, threads), 0);
}

static void release(fixture *f) {
  free(f->q);
  st_kv_pool_free(&f->pool);
  free(f->idx);
  free(f->bt);
  free(f->seq);
  free(f->o);
  free(f->lse);
}

static int32_t *topk_row(fixture *f, int row, int g) {
  return f->idx + ((int64_t)g * f->in.R * f->in.qlen + row) * f->in.topk;
}

static void set_row(fixture *f, int row, int g, const int32_t *entries) {
  memcpy(topk_row(f, row, g), entries, sizeof(int32_t) * (size_t)f->in.topk);
}

static int position(const fixture *f, int row) { return f->seq[row / f->in.qlen] - f->in.qlen + row % f->in.qlen; }

static int64_t page_of(const fixture *f, int row, int j) {
  return f->bt[(int64_t)(row / f->in.qlen) * f->in.bt_cols + j];
}

/* Appends slots 0..last of block j of the row's request. */
static int add_block(const fixture *f, int row, int j, int last, key *keys, int n) {
  for (int i = 0; i <= last; i++) keys[n++] = (key){page_of(f, row, j), i};
  return n;
}

/* The keys of (row, kv head g) in the contract's words: entries >= 0 of a
 * block 0..p/128, its positions <= p, in entry order. */
static int contract_keys(const fixture *f, int row, int g, key *keys) {
  const int p = position(f, row);
  const int32_t *e = f->idx + ((int64_t)g * f->in.R * f->in.qlen + row) * f->in.topk;
  int n = 0;
  for (int i = 0; i < f->in.topk; i++) {
    if (e[i] < 0 || p < 0 || e[i] > p / 128) continue;
    n = add_block(f, row, e[i], p - 128 * e[i] < 127 ? p - 128 * e[i] : 127, keys, n);
  }
  return n;
}

static const double *out_row(const fixture *f, int row, int h) { return f->o + ((size_t)row * f->in.Hq + h) * f->in.D; }

static double out_lse(const fixture *f, int row, int h) { return f->lse[(size_t)row * f->in.Hq + h]; }

static st_kv_scaling scaling(const fixture *f) {
  return (st_kv_scaling){f->in.scale_mode, f->in.k_scale, f->in.v_scale, f->in.sm_scale};
}

static const uint16_t *q_row(const fixture *f, int row, int h) { return f->q + ((size_t)row * f->in.Hq + h) * f->in.D; }

/* Softmax over an explicit key list with one global max (kv_pool.h). */
static void naive(const fixture *f, int row, int h, const key *keys, int n, double *o, double *lse) {
  const st_kv_scaling s = scaling(f);
  st_kv_naive_softmax(&f->pool, &s, q_row(f, row, h), h / (f->in.Hq / f->in.Hkv), keys, n, o, lse);
}

/* The reference's (row, h) against the naive softmax over `keys`:
 * relative L2 error and lse within `tol`. */
static void expect_head(const fixture *f, int row, int h, const key *keys, int n, double tol) {
  const st_kv_scaling s = scaling(f);
  st_kv_expect_head(&f->pool, &s, q_row(f, row, h), h / (f->in.Hq / f->in.Hkv), keys, n, out_row(f, row, h),
                    out_lse(f, row, h), row, h, tol);
}

/* Every (row, head) against the naive softmax over the contract's keys;
 * returns how many rows had keys. */
static int expect_all(const fixture *f, double tol) {
  key *keys = malloc(sizeof(key) * (size_t)f->in.topk * 128);
  int keyed = 0;
  for (int row = 0; row < f->in.R * f->in.qlen; row++)
    for (int h = 0; h < f->in.Hq; h++) {
      const int n = contract_keys(f, row, h / (f->in.Hq / f->in.Hkv), keys);
      expect_head(f, row, h, keys, n, tol);
      keyed += n > 0;
    }
  free(keys);
  return keyed;
}

static void test_a_single_key_gives_its_value_and_score(void **state) {
  (void)state;
  const int lens[] = {1};
  fixture f = make((shape){1, 1, 2, 1, 64, 4, lens, ST_DTYPE_BF16, ST_KV_LAYOUT_SPLIT});
  set_row(&f, 0, 0, (const int32_t[]){-1, 0, -1, -1});
  run(&f, 1);
  const double *v0 = f.pool.vd + page_of(&f, 0, 0) * 128 * 64, *k0 = f.pool.kd + page_of(&f, 0, 0) * 128 * 64;
  for (int h = 0; h < 2; h++) {
    double dot = 0;
    for (int d = 0; d < 64; d++) dot += (double)st_bf16_to_float(f.q[h * 64 + d]) * k0[d];
    for (int d = 0; d < 64; d++) assert_true(out_row(&f, 0, h)[d] == v0[d]);
    assert_true(fabs(out_lse(&f, 0, h) - f.in.sm_scale * dot) <= 1e-15 * (1 + fabs(dot)));
  }
  release(&f);
}

static void test_keys_past_the_query_position_are_masked(void **state) {
  (void)state;
  /* p = 4132 ends 37 keys into block 32; p = 128 is slot 0 of block 1. */
  const int lens[] = {4133, 129};
  fixture f = make((shape){2, 1, 4, 2, 64, 3, lens, ST_DTYPE_BF16, ST_KV_LAYOUT_SPLIT});
  key keys[3 * 128];
  for (int g = 0; g < 2; g++) {
    set_row(&f, 0, g, (const int32_t[]){32, 0, 5});
    set_row(&f, 1, g, (const int32_t[]){1, 0, -1});
  }
  run(&f, 2);
  for (int h = 0; h < 4; h++) {
    int n = add_block(&f, 0, 32, 36, keys, 0);
    n = add_block(&f, 0, 0, 127, keys, n);
    n = add_block(&f, 0, 5, 127, keys, n);
    assert_int_equal(n, 37 + 256);
    expect_head(&f, 0, h, keys, n, 1e-12);
    n = add_block(&f, 1, 1, 0, keys, 0);
    n = add_block(&f, 1, 0, 127, keys, n);
    expect_head(&f, 1, h, keys, n, 1e-12);
  }
  release(&f);
}

static void test_skipped_entries_and_a_duplicated_block_counting_twice(void **state) {
  (void)state;
  /* p = 299: blocks 0..2 visible (block 2 up to slot 43); 3 is past the query,
   * 7 past the block table too. */
  const int lens[] = {300};
  fixture f = make((shape){1, 1, 2, 1, 64, 6, lens, ST_DTYPE_BF16, ST_KV_LAYOUT_FUSED});
  set_row(&f, 0, 0, (const int32_t[]){-1, 2, 7, 3, 2, 0});
  run(&f, 1);
  key keys[3 * 128];
  int n = add_block(&f, 0, 2, 43, keys, 0);
  n = add_block(&f, 0, 0, 127, keys, n);
  const int once = n;
  n = add_block(&f, 0, 2, 43, keys, n);
  for (int h = 0; h < 2; h++) expect_head(&f, 0, h, keys, n, 1e-12);
  /* The duplicate matters: listing block 2 once gives another answer. */
  double single[64], lse1;
  naive(&f, 0, 0, keys, once, single, &lse1);
  assert_true(fabs(lse1 - out_lse(&f, 0, 0)) > 1e-3);
  release(&f);
}

static void test_padding_and_unselected_rows_give_zero_and_minus_infinity(void **state) {
  (void)state;
  /* Request 0 is padding; request 2 (seq_len 1 < qlen 2) has token 0 at
   * p = -1 (empty) and token 1 at p = 0 (one key). */
  const int lens[] = {0, 500, 1};
  fixture f = make((shape){3, 2, 4, 2, 64, 4, lens, ST_DTYPE_BF16, ST_KV_LAYOUT_SPLIT});
  for (int g = 0; g < 2; g++) {
    set_row(&f, 0, g, (const int32_t[]){0, 1, 2, 3});
    set_row(&f, 1, g, (const int32_t[]){0, 1, 2, 3});
    set_row(&f, 4, g, (const int32_t[]){0, 0, -1, -1});
    set_row(&f, 5, g, (const int32_t[]){0, -1, -1, -1});
  }
  set_row(&f, 2, 0, (const int32_t[]){-1, -1, -1, -1});
  run(&f, 2);
  for (int h = 0; h < 4; h++) {
    const int empty[] = {0, 1, 4};
    for (int i = 0; i < 3; i++) {
      for (int d = 0; d < 64; d++) assert_true(out_row(&f, empty[i], h)[d] == 0.0);
      assert_true(isinf(out_lse(&f, empty[i], h)) && out_lse(&f, empty[i], h) < 0);
    }
    /* Row 2 is empty for kv head 0 only (q heads 0, 1). */
    if (h < 2) {
      for (int d = 0; d < 64; d++) assert_true(out_row(&f, 2, h)[d] == 0.0);
      assert_true(isinf(out_lse(&f, 2, h)));
    } else {
      assert_true(isfinite(out_lse(&f, 2, h)));
    }
    const double *v0 = f.pool.vd + (page_of(&f, 5, 0) * 2 + h / 2) * 128 * 64;
    for (int d = 0; d < 64; d++) assert_true(out_row(&f, 5, h)[d] == v0[d]);
  }
  release(&f);
}

static void test_each_query_token_uses_its_own_topk_row_and_position(void **state) {
  (void)state;
  const int lens[] = {130};
  for (int qlen = 2; qlen <= 4; qlen++) {
    fixture f = make((shape){1, qlen, 2, 1, 64, 2, lens, ST_DTYPE_BF16, ST_KV_LAYOUT_SPLIT});
    /* Even tokens list {1, 0}, odd ones {-1, 1}: block 1 exists from p = 128,
     * so with qlen 4 token 1 (p = 127) has no key at all. */
    for (int t = 0; t < qlen; t++) set_row(&f, t, 0, t % 2 ? (const int32_t[]){-1, 1} : (const int32_t[]){1, 0});
    run(&f, 2);
    int empty = 0;
    for (int t = 0; t < qlen; t++) {
      const int p = 130 - qlen + t;
      key keys[256];
      int n = 0;
      if (p >= 128) n = add_block(&f, t, 1, p - 128, keys, n);
      if (t % 2 == 0) n = add_block(&f, t, 0, p < 127 ? p : 127, keys, n);
      empty += n == 0;
      for (int h = 0; h < 2; h++) expect_head(&f, t, h, keys, n, 1e-12);
    }
    assert_int_equal(empty, qlen == 4);
    release(&f);
  }
}

static void test_both_kv_layouts_give_identical_results(void **state) {
  (void)state;
  const int lens[] = {1000, 257, 64};
  const st_dtype dts[] = {ST_DTYPE_BF16, ST_DTYPE_FP8_E4M3};
  for (int i = 0; i < 2; i++) {
    fixture a = make((shape){3, 2, 8, 2, 64, 6, lens, dts[i], ST_KV_LAYOUT_SPLIT});
    fixture b = make((shape){3, 2, 8, 2, 64, 6, lens, dts[i], ST_KV_LAYOUT_FUSED});
    if (dts[i] == ST_DTYPE_FP8_E4M3) {
      uint64_t rng = g_seed ^ 1, rng2 = g_seed ^ 1;
      set_tensor_scales(&a, 0, 0, &rng);
      set_tensor_scales(&b, 0, 0, &rng2);
    }
    run(&a, 2);
    run(&b, 3);
    assert_memory_equal(a.o, b.o, sizeof(double) * 6 * 8 * 64);
    assert_memory_equal(a.lse, b.lse, sizeof(double) * 6 * 8);
    assert_int_equal(expect_all(&a, 1e-12), 6 * 8); /* every row keyed: not trivially equal */
    release(&a);
    release(&b);
  }
}

static void expect_scaled(const fixture *a, const fixture *b, double factor, int lse_same) {
  const size_t n = (size_t)a->in.R * a->in.qlen * a->in.Hq;
  for (size_t i = 0; i < n * (size_t)a->in.D; i++)
    assert_true(fabs(b->o[i] - factor * a->o[i]) <= 1e-12 * (1 + fabs(b->o[i])));
  for (size_t i = 0; i < n; i++) {
    assert_true(isfinite(a->lse[i]));
    assert_true(lse_same ? b->lse[i] == a->lse[i] : fabs(b->lse[i] - a->lse[i]) <= 1e-12 * (1 + fabs(a->lse[i])));
  }
}

static void test_fp8_scalar_tensor_and_folded_scales_agree(void **state) {
  (void)state;
  const int lens[] = {700, 300};
  const shape s = {2, 1, 4, 2, 64, 4, lens, ST_DTYPE_FP8_E4M3, ST_KV_LAYOUT_SPLIT};
  const float ks = 0.37f, vs = 1.9f;
  uint64_t rng = g_seed;
  fixture none = make(s), folded = make(s), scalar = make(s), tensor = make(s);
  run(&none, 2);
  folded.in.sm_scale *= ks;
  run(&folded, 2);
  scalar.in.scale_mode = ST_KV_SCALE_SCALAR;
  scalar.in.k_scale = ks;
  run(&scalar, 2);
  set_tensor_scales(&tensor, ks, 1.0f, &rng);
  run(&tensor, 2);
  assert_memory_equal(scalar.o, tensor.o, sizeof(double) * 2 * 4 * 64);
  assert_memory_equal(scalar.lse, tensor.lse, sizeof(double) * 2 * 4);
  expect_scaled(&folded, &scalar, 1.0, 0);
  /* The V scale scales o and leaves lse alone. */
  scalar.in.k_scale = 1.0f;
  scalar.in.v_scale = vs;
  run(&scalar, 2);
  set_tensor_scales(&tensor, 1.0f, vs, &rng);
  run(&tensor, 2);
  assert_memory_equal(scalar.o, tensor.o, sizeof(double) * 2 * 4 * 64);
  expect_scaled(&none, &scalar, vs, 1);
  expect_scaled(&none, &tensor, vs, 1);
  release(&none);
  release(&folded);
  release(&scalar);
  release(&tensor);
}

static void test_tensor_scales_are_read_per_page_head_and_slot(void **state) {
  (void)state;
  const int lens[] = {600, 129};
  fixture f = make((shape){2, 2, 4, 2, 64, 5, lens, ST_DTYPE_FP8_E4M3, ST_KV_LAYOUT_FUSED});
  uint64_t rng = g_seed ^ 7;
  set_tensor_scales(&f, 0, 0, &rng);
  run(&f, 2);
  assert_true(expect_all(&f, 1e-12) > 0);
  release(&f);
}

static void test_gqa_group_sizes_and_head_dims(void **state) {
  (void)state;
  const int lens[] = {1000, 0, 333};
  const int cfg[][3] = {{4, 4, 64}, {32, 1, 128}, {32, 1, 64}, {4, 2, 256}, {8, 2, 256}}; /* Hq, Hkv, D */
  for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
    fixture f = make((shape){3, 2, cfg[c][0], cfg[c][1], cfg[c][2], 8, lens, ST_DTYPE_BF16, ST_KV_LAYOUT_SPLIT});
    run(&f, 3);
    assert_int_equal(expect_all(&f, 1e-12), 2 * 2 * cfg[c][0]); /* requests 0 and 2, two tokens each */
    release(&f);
  }
}

static void test_large_scores_do_not_overflow(void **state) {
  (void)state;
  const int lens[] = {900, 200};
  fixture f = make((shape){2, 1, 4, 2, 64, 6, lens, ST_DTYPE_BF16, ST_KV_LAYOUT_SPLIT});
  /* Scores in the thousands: exp would overflow unshifted. Every lse must
   * be finite (and match the hand computation, above); rows whose largest
   * score passes 709, where an unshifted exp is inf, must exist: a row with
   * only a few keys may have a negative largest dot product (seed
   * 140146578315715 made one with sm_scale 300), so count them. */
  f.in.sm_scale = 3000.0;
  run(&f, 2);
  assert_int_equal(expect_all(&f, 1e-9), 2 * 4);
  int overflowing = 0;
  for (int i = 0; i < 2 * 4; i++) {
    assert_true(isfinite(f.lse[i]));
    overflowing += f.lse[i] > 709;
  }
  assert_true(overflowing >= 1);
  release(&f);
}

/* Finds a (row, head) with keys (`keyed`) or without. */
static void find_head(const fixture *f, int keyed, int *row, int *h) {
  for (*row = f->in.R * f->in.qlen - 1; *row >= 0; (*row)--)
    for (*h = f->in.Hq - 1; *h >= 0; (*h)--)
      if (isfinite(out_lse(f, *row, *h)) == keyed) return;
  fail_msg("no such row");
}

static void test_verifier_accepts_bf16_rounding_and_names_planted_mistakes(void **state) {
  (void)state;
  const int lens[] = {900, 0, 300};
  fixture f = make((shape){3, 2, 8, 2, 64, 6, lens, ST_DTYPE_BF16, ST_KV_LAYOUT_SPLIT});
  run(&f, 2);
  const size_t n = 6 * 8, nd = n * 64;
  uint16_t *got = malloc(sizeof(uint16_t) * nd);
  float *lse = malloc(sizeof(float) * n);
  for (size_t i = 0; i < nd; i++) got[i] = st_float_to_bf16((float)f.o[i]);
  for (size_t i = 0; i < n; i++) lse[i] = (float)f.lse[i];
  char msg[400], name[64];
  double err = -1;
#define VERIFY(tol) st_ref_sparse_attn_decode_verify(&f.in, f.o, f.lse, got, lse, tol, &err, msg, sizeof msg)
  assert_int_equal(VERIFY(2e-2), 0);
  assert_true(err > 0 && err < 1.0 / 256); /* bf16 rounding only */
  int row = -1, h = -1; /* set by find_head, which fails the test otherwise */
  find_head(&f, 1, &row, &h);
  snprintf(name, sizeof name, "row %d head %d", row, h);
  const size_t at = ((size_t)row * 8 + h) * 64;
  /* One element off by 10% of the row norm. */
  double norm = 0;
  for (int d = 0; d < 64; d++) norm += f.o[at + d] * f.o[at + d];
  const uint16_t keep = got[at + 5];
  got[at + 5] = st_float_to_bf16((float)(f.o[at + 5] + 0.1 * sqrt(norm)));
  assert_int_equal(VERIFY(2e-2), 1);
  assert_non_null(strstr(msg, name));
  assert_non_null(strstr(msg, "d=5"));
  assert_true(err > 0.09 && err < 0.11);
  /* A NaN. */
  got[at + 5] = 0x7fc0;
  assert_int_equal(VERIFY(2e-2), 1);
  assert_non_null(strstr(msg, name));
  assert_true(isinf(err));
  got[at + 5] = keep;
  /* A wrong lse; and unchecked when not given. */
  lse[(size_t)row * 8 + h] += 0.1f;
  assert_int_equal(VERIFY(2e-2), 1);
  assert_non_null(strstr(msg, name));
  assert_non_null(strstr(msg, "lse"));
  assert_int_equal(st_ref_sparse_attn_decode_verify(&f.in, f.o, f.lse, got, NULL, 2e-2, &err, msg, sizeof msg), 0);
  lse[(size_t)row * 8 + h] = (float)f.lse[(size_t)row * 8 + h];
  /* Nonzero output, or a finite lse, on a row without keys. */
  find_head(&f, 0, &row, &h);
  snprintf(name, sizeof name, "row %d head %d", row, h);
  got[((size_t)row * 8 + h) * 64 + 3] = st_float_to_bf16(1e-3f);
  assert_int_equal(VERIFY(2e-2), 1);
  assert_non_null(strstr(msg, name));
  assert_non_null(strstr(msg, "no keys"));
  assert_true(isinf(err));
  got[((size_t)row * 8 + h) * 64 + 3] = 0;
  lse[(size_t)row * 8 + h] = -1e30f;
  assert_int_equal(VERIFY(2e-2), 1);
  assert_non_null(strstr(msg, name));
  lse[(size_t)row * 8 + h] = -INFINITY;
  assert_int_equal(VERIFY(2e-2), 0);
#undef VERIFY
  free(got);
  free(lse);
  release(&f);
}

int main(void) {
  g_seed = st_test_seed("reference_sparse_attn_decode");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_single_key_gives_its_value_and_score),
      cmocka_unit_test(test_keys_past_the_query_position_are_masked),
      cmocka_unit_test(test_skipped_entries_and_a_duplicated_block_counting_twice),
      cmocka_unit_test(test_padding_and_unselected_rows_give_zero_and_minus_infinity),
      cmocka_unit_test(test_each_query_token_uses_its_own_topk_row_and_position),
      cmocka_unit_test(test_both_kv_layouts_give_identical_results),
      cmocka_unit_test(test_fp8_scalar_tensor_and_folded_scales_agree),
      cmocka_unit_test(test_tensor_scales_are_read_per_page_head_and_slot),
      cmocka_unit_test(test_gqa_group_sizes_and_head_dims),
      cmocka_unit_test(test_large_scores_do_not_overflow),
      cmocka_unit_test(test_verifier_accepts_bf16_rounding_and_names_planted_mistakes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
