/* The double-precision reference of sparse_attn (prefill) and its verifier:
 * varlen rows at their own positions (padding requests, prefixes that are not
 * multiples of 128, a 64K prefix), causal masking inside each query's own
 * block, bit-for-bit agreement with the decode reference on uniform batches,
 * skipped topk entries, GQA group sizes and head dims, independence from the
 * thread count, malformed shapes, and the verifier catching planted mistakes.
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
#include "reference/sparse_attn.h"
#include "reference/sparse_attn_decode.h"
#include "testutil.h"

static uint64_t g_seed;

/* Pages in the pool at most: a 64K context's block table then reuses pages
 * (valid input: the reference reads whatever page an entry names). */
#define POOL_PAGES 64

typedef struct request {
  int q_len, seq_len;
} request;

typedef struct shape {
  int R;
  const request *reqs;
  int Hq, Hkv, D, topk;
  st_dtype dtype;
  int layout;
} shape;

typedef struct fixture {
  st_ref_sparse_attn in;
  uint16_t *q;
  st_kv_pool pool; /* K, V and their scales, with dense dequantized copies */
  int32_t *idx, *bt, *seq, *cu;
  int *req_of; /* [total_q] the request of each row */
  double *o, *lse;
} fixture;

typedef st_kv_key key;

static int position(const fixture *f, int row) {
  const int r = f->req_of[row];
  return f->seq[r] - (f->cu[r + 1] - f->cu[r]) + (row - f->cu[r]);
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

/* A block table scattered over the pool: a random permutation, then random
 * pages where the table holds more entries than the pool. */
static void fill_block_table(fixture *f, uint64_t *rng) {
  const int64_t pages = f->in.pages, n = (int64_t)f->in.R * f->in.bt_cols;
  int32_t *perm = malloc(sizeof(int32_t) * (size_t)pages);
  for (int64_t i = 0; i < pages; i++) perm[i] = (int32_t)i;
  for (int64_t i = pages - 1; i > 0; i--) {
    const int64_t j = st_rand_int(rng, 0, i);
    const int32_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  f->bt = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
  for (int64_t i = 0; i < n; i++) f->bt[i] = i < pages ? perm[i] : (int32_t)st_rand_int(rng, 0, pages - 1);
  free(perm);
}

/* Every row's first entry is the query's own block (as engines select it),
 * the others random in -1..own+1: skipped, duplicated and past-the-query
 * entries all occur. */
static void fill_topk(fixture *f, uint64_t *rng) {
  const int rows = f->in.total_q;
  for (int g = 0; g < f->in.Hkv; g++)
    for (int row = 0; row < rows; row++) {
      int32_t *e = f->idx + ((int64_t)g * rows + row) * f->in.topk;
      const int p = position(f, row), own = p >= 0 ? p / 128 : 0;
      for (int i = 0; i < f->in.topk; i++) e[i] = (int32_t)st_rand_int(rng, -1, own + 1);
      e[0] = own;
    }
}

/* Random bf16 q and cache, sm_scale 1/sqrt(D), scale mode NONE. */
static fixture make(shape s) {
  fixture f;
  memset(&f, 0, sizeof f);
  uint64_t rng = g_seed;
  int mb = 1, total_q = 0;
  for (int r = 0; r < s.R; r++) {
    if ((s.reqs[r].seq_len + 127) / 128 > mb) mb = (s.reqs[r].seq_len + 127) / 128;
    total_q += s.reqs[r].q_len;
  }
  const int bt_cols = mb + 1;
  int64_t pages = (int64_t)s.R * bt_cols + 3;
  if (pages > POOL_PAGES) pages = POOL_PAGES;
  f.in = (st_ref_sparse_attn){.kv_dtype = s.dtype,
                              .R = s.R,
                              .total_q = total_q,
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
  f.cu = malloc(sizeof(int32_t) * (size_t)(s.R + 1));
  f.seq = malloc(sizeof(int32_t) * (size_t)(s.R > 0 ? s.R : 1));
  f.req_of = malloc(sizeof(int) * (size_t)(total_q > 0 ? total_q : 1));
  f.cu[0] = 0;
  for (int r = 0; r < s.R; r++) {
    f.cu[r + 1] = f.cu[r] + s.reqs[r].q_len;
    f.seq[r] = s.reqs[r].seq_len;
    for (int row = f.cu[r]; row < f.cu[r + 1]; row++) f.req_of[row] = r;
  }
  const size_t nq = (size_t)total_q * s.Hq * s.D;
  f.q = malloc(sizeof(uint16_t) * (nq > 0 ? nq : 1));
  for (size_t i = 0; i < nq; i++) f.q[i] = st_float_to_bf16((float)st_rand_uniform(&rng, -1, 1));
  st_kv_pool_make(&f.pool, s.dtype, s.layout, pages, s.Hkv, s.D, &rng);
  wire_pool(&f);
  fill_block_table(&f, &rng);
  f.idx = malloc(sizeof(int32_t) * ((size_t)s.Hkv * total_q * s.topk + 1));
  fill_topk(&f, &rng);
  f.o = malloc(sizeof(double) * (nq > 0 ? nq : 1));
  f.lse = malloc(sizeof(double) * ((size_t)total_q * s.Hq + 1));
  f.in.q = f.q;
  f.in.topk_idx = f.idx;
  f.in.block_table = f.bt;
  f.in.cu_seqlens_q = f.cu;
  f.in.seq_lens = f.seq;
  return f;
}

/* TENSOR scales, random in [0.25, 4). */
static void set_tensor_scales(fixture *f, uint64_t *rng) {
  f->in.scale_mode = ST_KV_SCALE_TENSOR;
  st_kv_pool_set_scales(&f->pool, 0, 0, rng);
}

static void run(fixture *f, int threads) {
  assert_int_equal(st_ref_sparse_attn_compute(&f->in, f->o, f->lse, threads), 0);
}

static void release(fixture *f) {
  free(f->q);
  st_kv_pool_free(&f->pool);
  free(f->idx);
  free(f->bt);
  free(f->seq);
  free(f->cu);
  free(f->req_of);
  free(f->o);
  free(f->lse);
}

static int32_t *topk_row(fixture *f, int row, int g) {
  return f->idx + ((int64_t)g * f->in.total_q + row) * f->in.topk;
}

static void set_row(fixture *f, int row, int g, const int32_t *entries) {
  memcpy(topk_row(f, row, g), entries, sizeof(int32_t) * (size_t)f->in.topk);
}

static int64_t page_of(const fixture *f, int row, int j) { return f->bt[(int64_t)f->req_of[row] * f->in.bt_cols + j]; }

/* Appends slots 0..last of block j of the row's request. */
static int add_block(const fixture *f, int row, int j, int last, key *keys, int n) {
  for (int i = 0; i <= last; i++) keys[n++] = (key){page_of(f, row, j), i};
  return n;
}

/* The keys of (row, kv head g) in the contract's words: entries >= 0 of a
 * block 0..p/128, its positions <= p, in entry order. */
static int contract_keys(const fixture *f, int row, int g, key *keys) {
  const int p = position(f, row);
  const int32_t *e = f->idx + ((int64_t)g * f->in.total_q + row) * f->in.topk;
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

/* The reference's (row, h) against the naive softmax over `keys`:
 * relative L2 error and lse within `tol`. */
static void expect_head(const fixture *f, int row, int h, const key *keys, int n, double tol) {
  const st_kv_scaling s = scaling(f);
  st_kv_expect_head(&f->pool, &s, q_row(f, row, h), h / (f->in.Hq / f->in.Hkv), keys, n, out_row(f, row, h),
                    out_lse(f, row, h), row, h, tol);
}

/* Every (row, head) against the naive softmax over the contract's keys;
 * returns how many had keys. */
static int expect_all(const fixture *f, double tol) {
  key *keys = malloc(sizeof(key) * ((size_t)f->in.topk * 128 + 1));
  int keyed = 0;
  for (int row = 0; row < f->in.total_q; row++)
    for (int h = 0; h < f->in.Hq; h++) {
      const int n = contract_keys(f, row, h / (f->in.Hq / f->in.Hkv), keys);
      expect_head(f, row, h, keys, n, tol);
      keyed += n > 0;
    }
  free(keys);
  return keyed;
}

static void test_varlen_rows_sit_at_the_end_of_their_own_request(void **state) {
  (void)state;
  /* Rows 0..299: request 0 (positions 0..299); request 1 is padding (no
   * rows); rows 300..399: request 2 after a prefix of 4133 (positions
   * 4133..4232); row 400: request 3 after a 64K prefix (position 65536). */
  const request reqs[] = {{300, 300}, {0, 0}, {100, 4233}, {1, 65537}};
  fixture f = make((shape){4, reqs, 4, 2, 64, 6, ST_DTYPE_BF16, ST_KV_LAYOUT_SPLIT});
  assert_int_equal(f.in.total_q, 401);
  run(&f, 3);
  assert_int_equal(expect_all(&f, 1e-12), 401 * 4); /* every row keyed: the first entry is its own block */
  /* Positions read off single-block selections: block 32 of row 300 (p =
   * 4133) holds slots 0..37, block 33 of row 399 (p = 4232) slots 0..8. */
  const int32_t row300[6] = {32, -1, -1, -1, -1, -1}, row399[6] = {-1, 33, -1, -1, -1, -1};
  key keys[128];
  for (int g = 0; g < 2; g++) {
    set_row(&f, 300, g, row300);
    set_row(&f, 399, g, row399);
    set_row(&f, 0, g, (const int32_t[]){0, 0, -1, -1, -1, 1}); /* p = 0: slot 0 of block 0, twice */
    set_row(&f, 400, g, (const int32_t[]){-1, -1, -1, -1, -1, 512});
  }
  run(&f, 2);
  for (int h = 0; h < 4; h++) {
    expect_head(&f, 300, h, keys, add_block(&f, 300, 32, 37, keys, 0), 1e-12);
    expect_head(&f, 399, h, keys, add_block(&f, 399, 33, 8, keys, 0), 1e-12);
    /* One distinct key: o is its value exactly; with p = 65536 that is slot
     * 0 of block 512, and row 0 counts slot 0 of block 0 twice (lse + ln 2). */
    const int rows[2] = {400, 0};
    const int64_t pages[2] = {page_of(&f, 400, 512), page_of(&f, 0, 0)};
    for (int i = 0; i < 2; i++) {
      const double *v0 = f.pool.vd + (pages[i] * 2 + h / 2) * 128 * 64,
                   *k0 = f.pool.kd + (pages[i] * 2 + h / 2) * 128 * 64;
      double dot = 0;
      for (int d = 0; d < 64; d++) dot += (double)st_bf16_to_float(f.q[((size_t)rows[i] * 4 + h) * 64 + d]) * k0[d];
      for (int d = 0; d < 64; d++) assert_true(out_row(&f, rows[i], h)[d] == v0[d]);
      const double want = f.in.sm_scale * dot + (i == 1 ? log(2.0) : 0.0);
      assert_true(fabs(out_lse(&f, rows[i], h) - want) <= 1e-14 * (1 + fabs(want)));
    }
  }
  release(&f);
}

static void test_consecutive_tokens_see_one_more_key_of_their_own_block(void **state) {
  (void)state;
  /* Positions 130..193, all in block 1 (slots 2..65), after a request of 5
   * rows. With sm_scale 0 every key weighs 1, so lse = ln(keys) and o is
   * the mean of the visible values. */
  const request reqs[] = {{5, 900}, {64, 194}};
  fixture f = make((shape){2, reqs, 2, 1, 64, 3, ST_DTYPE_BF16, ST_KV_LAYOUT_FUSED});
  for (int row = 5; row < 69; row++) set_row(&f, row, 0, (const int32_t[]){1, -1, 0});
  f.in.sm_scale = 0;
  run(&f, 2);
  key keys[256];
  for (int t = 0; t < 64; t++) {
    const int row = 5 + t, n = 128 + 3 + t; /* block 0, then slots 0..t+2 of block 1 */
    for (int h = 0; h < 2; h++) {
      assert_true(fabs(out_lse(&f, row, h) - log((double)n)) <= 1e-14);
      int k = add_block(&f, row, 1, t + 2, keys, 0);
      k = add_block(&f, row, 0, 127, keys, k);
      assert_int_equal(k, n);
      expect_head(&f, row, h, keys, k, 1e-12);
    }
  }
  /* The same with real scores: each token against its own key list. */
  f.in.sm_scale = 0.125;
  run(&f, 3);
  for (int t = 0; t < 64; t++)
    for (int h = 0; h < 2; h++) {
      int k = add_block(&f, 5 + t, 1, t + 2, keys, 0);
      k = add_block(&f, 5 + t, 0, 127, keys, k);
      expect_head(&f, 5 + t, h, keys, k, 1e-12);
    }
  release(&f);
}

static void test_uniform_requests_match_the_decode_reference_bit_for_bit(void **state) {
  (void)state;
  const request reqs[] = {{3, 1000}, {3, 257}, {3, 64}, {3, 2}};
  const st_dtype dts[] = {ST_DTYPE_BF16, ST_DTYPE_FP8_E4M3};
  for (int layout = ST_KV_LAYOUT_SPLIT; layout <= ST_KV_LAYOUT_FUSED; layout++)
    for (int i = 0; i < 2; i++) {
      fixture f = make((shape){4, reqs, 8, 2, 64, 6, dts[i], layout});
      if (dts[i] == ST_DTYPE_FP8_E4M3) {
        uint64_t rng = g_seed ^ 3;
        set_tensor_scales(&f, &rng);
      }
      st_ref_sparse_attn_decode dec = {.kv_dtype = f.in.kv_dtype,
                                       .R = 4,
                                       .qlen = 3,
                                       .Hq = 8,
                                       .Hkv = 2,
                                       .D = 64,
                                       .topk = 6,
                                       .bt_cols = f.in.bt_cols,
                                       .pages = f.in.pages,
                                       .q = f.q,
                                       .k_cache = f.in.k_cache,
                                       .v_cache = f.in.v_cache,
                                       .scale_mode = f.in.scale_mode,
                                       .k_scale = 1,
                                       .v_scale = 1,
                                       .k_scales = f.pool.ks,
                                       .v_scales = f.pool.vs,
                                       .topk_idx = f.idx,
                                       .block_table = f.bt,
                                       .seq_lens = f.seq,
                                       .sm_scale = f.in.sm_scale};
      memcpy(dec.k_stride, f.in.k_stride, sizeof dec.k_stride);
      memcpy(dec.v_stride, f.in.v_stride, sizeof dec.v_stride);
      memcpy(dec.ks_stride, f.in.ks_stride, sizeof dec.ks_stride);
      memcpy(dec.vs_stride, f.in.vs_stride, sizeof dec.vs_stride);
      double *o = malloc(sizeof(double) * 12 * 8 * 64), *lse = malloc(sizeof(double) * 12 * 8);
      run(&f, 2);
      assert_int_equal(st_ref_sparse_attn_decode_compute(&dec, o, lse, 3), 0);
      assert_memory_equal(o, f.o, sizeof(double) * 12 * 8 * 64);
      assert_memory_equal(lse, f.lse, sizeof(double) * 12 * 8);
      /* Request 3 (seq 2 < qlen 3) has token 0 at p = -1: no keys; the rest do. */
      assert_int_equal(expect_all(&f, 1e-12), 11 * 8);
      free(o);
      free(lse);
      release(&f);
    }
}

static void test_minus_one_and_past_own_block_entries_are_skipped(void **state) {
  (void)state;
  /* Row 0: p = 299, blocks 0..2 visible (block 2 up to slot 43); 3 is past
   * the query, 7 past the block table too. Row 1 lists only such entries. */
  const request reqs[] = {{2, 301}};
  fixture f = make((shape){1, reqs, 2, 1, 64, 6, ST_DTYPE_BF16, ST_KV_LAYOUT_FUSED});
  set_row(&f, 0, 0, (const int32_t[]){-1, 2, 7, 3, 2, 0});
  set_row(&f, 1, 0, (const int32_t[]){-1, 3, 7, -1, 4, -1});
  run(&f, 1);
  key keys[3 * 128];
  int n = add_block(&f, 0, 2, 43, keys, 0);
  n = add_block(&f, 0, 0, 127, keys, n);
  n = add_block(&f, 0, 2, 43, keys, n); /* block 2 listed twice counts twice */
  for (int h = 0; h < 2; h++) {
    expect_head(&f, 0, h, keys, n, 1e-12);
    for (int d = 0; d < 64; d++) assert_true(out_row(&f, 1, h)[d] == 0.0);
    assert_true(isinf(out_lse(&f, 1, h)) && out_lse(&f, 1, h) < 0);
  }
  release(&f);
}

static void test_gqa_group_sizes_1_and_32(void **state) {
  (void)state;
  const request reqs[] = {{40, 1000}, {0, 0}, {7, 333}};
  const int cfg[][2] = {{4, 4}, {32, 1}}; /* Hq, Hkv */
  for (int c = 0; c < 2; c++) {
    fixture f = make((shape){3, reqs, cfg[c][0], cfg[c][1], 64, 8, ST_DTYPE_BF16, ST_KV_LAYOUT_SPLIT});
    run(&f, 3);
    assert_int_equal(expect_all(&f, 1e-12), 47 * cfg[c][0]);
    release(&f);
  }
}

static void test_head_dims_64_and_256(void **state) {
  (void)state;
  /* 72 is not a multiple of the reference's 16-wide passes over d. */
  const request reqs[] = {{20, 700}, {3, 130}};
  const int dims[] = {64, 256, 72};
  for (int i = 0; i < 3; i++) {
    fixture f = make((shape){2, reqs, 4, 2, dims[i], 5, ST_DTYPE_FP8_E4M3, ST_KV_LAYOUT_FUSED});
    uint64_t rng = g_seed ^ 5;
    set_tensor_scales(&f, &rng);
    run(&f, 2);
    assert_int_equal(expect_all(&f, 1e-12), 23 * 4);
    release(&f);
  }
}

static void test_results_do_not_depend_on_the_thread_count(void **state) {
  (void)state;
  /* Spans of 32 rows, blocks cached per thread: 1, 2 and 5 threads cut and
   * share the work differently. */
  const request reqs[] = {{150, 2000}, {1, 1}, {77, 600}};
  fixture f = make((shape){3, reqs, 8, 2, 64, 16, ST_DTYPE_BF16, ST_KV_LAYOUT_SPLIT});
  const size_t no = (size_t)228 * 8 * 64, nl = (size_t)228 * 8;
  double *o = malloc(sizeof(double) * no), *lse = malloc(sizeof(double) * nl);
  run(&f, 1);
  memcpy(o, f.o, sizeof(double) * no);
  memcpy(lse, f.lse, sizeof(double) * nl);
  for (int threads = 2; threads <= 5; threads += 3) {
    memset(f.o, 0xff, sizeof(double) * no);
    run(&f, threads);
    assert_memory_equal(o, f.o, sizeof(double) * no);
    assert_memory_equal(lse, f.lse, sizeof(double) * nl);
  }
  assert_int_equal(expect_all(&f, 1e-12), 228 * 8);
  /* o does not depend on whether lse is wanted. */
  assert_int_equal(st_ref_sparse_attn_compute(&f.in, f.o, NULL, 2), 0);
  assert_memory_equal(o, f.o, sizeof(double) * no);
  free(o);
  free(lse);
  release(&f);
}

static void test_rows_selecting_more_blocks_than_a_thread_caches(void **state) {
  (void)state;
  /* D 256 caps a thread's converted blocks at 30 (16 MiB): rows listing 40
   * distinct blocks (in an order that changes every row) evict blocks they
   * still need. */
  const request reqs[] = {{40, 6000}};
  fixture f = make((shape){1, reqs, 2, 1, 256, 40, ST_DTYPE_BF16, ST_KV_LAYOUT_SPLIT});
  for (int row = 0; row < 40; row++) {
    int32_t e[40];
    for (int i = 0; i < 40; i++) e[i] = (int32_t)((i * 7 + row) % 40 + 6); /* blocks 6..45; own is 46 */
    set_row(&f, row, 0, e);
  }
  const size_t no = (size_t)40 * 2 * 256;
  double *o = malloc(sizeof(double) * no);
  run(&f, 1);
  memcpy(o, f.o, sizeof(double) * no);
  run(&f, 3);
  assert_memory_equal(o, f.o, sizeof(double) * no);
  assert_int_equal(expect_all(&f, 1e-12), 40 * 2);
  free(o);
  release(&f);
}

static void test_malformed_shapes_are_refused_with_the_reason(void **state) {
  (void)state;
  const request reqs[] = {{3, 10}, {2, 300}};
  fixture f = make((shape){2, reqs, 4, 2, 64, 2, ST_DTYPE_BF16, ST_KV_LAYOUT_SPLIT});
  uint16_t got[5 * 4 * 64] = {0};
  char msg[200];
  double err = 0;
  struct {
    int32_t cu[3];
    const char *why;
  } bad[] = {{{1, 3, 5}, "cu_seqlens_q[0]=1 is not 0"},
             {{0, 4, 3}, "cu_seqlens_q[2]=3 is below cu_seqlens_q[1]=4"},
             {{0, 3, 4}, "cu_seqlens_q[2]=4 is not total_q=5"}};
  for (int i = 0; i < 3; i++) {
    memcpy(f.cu, bad[i].cu, sizeof bad[i].cu);
    assert_int_equal(st_ref_sparse_attn_compute(&f.in, f.o, f.lse, 2), -1);
    assert_int_equal(st_ref_sparse_attn_verify(&f.in, f.o, f.lse, got, NULL, 2e-2, &err, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, bad[i].why));
  }
  memcpy(f.cu, (const int32_t[]){0, 3, 5}, sizeof(int32_t) * 3);
  f.in.Hq = 5;
  assert_int_equal(st_ref_sparse_attn_compute(&f.in, f.o, f.lse, 2), -1);
  assert_int_equal(st_ref_sparse_attn_verify(&f.in, f.o, f.lse, got, NULL, 2e-2, &err, msg, sizeof msg), -1);
  assert_non_null(strstr(msg, "Hq=5 is not a positive multiple of Hkv=2"));
  f.in.Hq = 4;
  f.in.cu_seqlens_q = NULL; /* the uniform split needs total_q a multiple of R */
  assert_int_equal(st_ref_sparse_attn_compute(&f.in, f.o, f.lse, 2), -1);
  f.in.cu_seqlens_q = f.cu;
  run(&f, 2);
  release(&f);
}

/* Finds a (row, head) with keys (`keyed`) or without. */
static void find_head(const fixture *f, int keyed, int *row, int *h) {
  for (*row = f->in.total_q - 1; *row >= 0; (*row)--)
    for (*h = f->in.Hq - 1; *h >= 0; (*h)--)
      if (isfinite(out_lse(f, *row, *h)) == keyed) return;
  fail_msg("no such row");
}

static void test_verifier_accepts_bf16_rounding_and_names_planted_mistakes(void **state) {
  (void)state;
  /* Request 2 (seq 1 < q_len 3) has rows at p = -2, -1: no keys. */
  const request reqs[] = {{9, 900}, {0, 0}, {3, 1}, {4, 4133}};
  fixture f = make((shape){4, reqs, 8, 2, 64, 6, ST_DTYPE_BF16, ST_KV_LAYOUT_SPLIT});
  run(&f, 2);
  const size_t n = 16 * 8, nd = n * 64;
  uint16_t *got = malloc(sizeof(uint16_t) * nd);
  float *lse = malloc(sizeof(float) * n);
  for (size_t i = 0; i < nd; i++) got[i] = st_float_to_bf16((float)f.o[i]);
  for (size_t i = 0; i < n; i++) lse[i] = (float)f.lse[i];
  char msg[400], name[96];
  double err = -1;
#define VERIFY(tol) st_ref_sparse_attn_verify(&f.in, f.o, f.lse, got, lse, tol, &err, msg, sizeof msg)
  assert_int_equal(VERIFY(2e-2), 0);
  assert_true(err > 0 && err < 1.0 / 256); /* bf16 rounding only */
  /* The last row: request 3, position 4132. */
  int row = 15, h = 5;
  snprintf(name, sizeof name, "row %d head %d (request 3, position 4132)", row, h);
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
  assert_int_equal(st_ref_sparse_attn_verify(&f.in, f.o, f.lse, got, NULL, 2e-2, &err, msg, sizeof msg), 0);
  lse[(size_t)row * 8 + h] = (float)f.lse[(size_t)row * 8 + h];
  /* Nonzero output, or a finite lse, on a row without keys. */
  find_head(&f, 0, &row, &h);
  assert_int_equal(f.req_of[row], 2);
  snprintf(name, sizeof name, "row %d head %d (request 2, position %d, no keys)", row, h, position(&f, row));
  got[((size_t)row * 8 + h) * 64 + 3] = st_float_to_bf16(1e-3f);
  assert_int_equal(VERIFY(2e-2), 1);
  assert_non_null(strstr(msg, name));
  assert_true(isinf(err));
  got[((size_t)row * 8 + h) * 64 + 3] = 0;
  lse[(size_t)row * 8 + h] = -1e30f;
  assert_int_equal(VERIFY(2e-2), 1);
  assert_non_null(strstr(msg, name));
  lse[(size_t)row * 8 + h] = -INFINITY;
  assert_int_equal(VERIFY(2e-2), 0);
  /* Every planted mistake at once is counted, the first one named. */
  got[0] ^= 0x4000;
  got[at + 7] ^= 0x4000;
  assert_int_equal(VERIFY(2e-2), 2);
  assert_non_null(strstr(msg, "row 0 head 0 (request 0, position 891)"));
#undef VERIFY
  free(got);
  free(lse);
  release(&f);
}

/* Key `e` of (row, kv head 0): its page and slot, in entry order over the
 * row's visible keys; -1 past the last. */
static int visible_key(fixture *f, int row, int e, key *k) {
  const int p = position(f, row);
  for (int i = 0; i < f->in.topk; i++) {
    const int32_t j = topk_row(f, row, 0)[i];
    if (j < 0 || j > p / 128) continue;
    const int n = p - j * 128 + 1 < 128 ? p - j * 128 + 1 : 128;
    if (e < n) {
      *k = (key){f->bt[j], e};
      return 0;
    }
    e -= n;
  }
  return -1;
}

/* q . k times sm_scale, and sum_d |q_d k_d| (fp8 K, scale mode NONE). */
static double key_score(fixture *f, int row, int h, key k, double *sum_abs) {
  const uint8_t *kr = (const uint8_t *)f->in.k_cache + k.page * f->in.k_stride[0] + k.slot * f->in.k_stride[2];
  double s = 0, a = 0;
  for (int d = 0; d < f->in.D; d++) {
    const double x = st_bf16_to_float(f->q[((size_t)row * f->in.Hq + h) * f->in.D + d]) * st_fp8_e4m3_to_float(kr[d]);
    s += x;
    a += fabs(x);
  }
  if (sum_abs) *sum_abs = a;
  return s * f->in.sm_scale;
}

/* A head that fails the plain tolerance gets the slack of the kernels' fp32
 * scores, eps = sm_scale * D * 2^-23 * max sum_d |q_d k_d|: its lse may be
 * off by tol + eps (and |lse| * 2^-20), not more. With q in [-1, 1) eps is
 * ~1e-4. */
static void test_verifier_allows_lse_the_slack_of_fp32_scores(void **state) {
  (void)state;
  const request reqs[] = {{3, 700}};
  fixture f = make((shape){1, reqs, 4, 1, 128, 4, ST_DTYPE_FP8_E4M3, ST_KV_LAYOUT_SPLIT});
  run(&f, 2);
  const size_t n = 3 * 4, nd = n * 128;
  uint16_t *got = malloc(sizeof(uint16_t) * nd);
  float *lse = malloc(sizeof(float) * n);
  for (size_t i = 0; i < nd; i++) got[i] = st_float_to_bf16((float)f.o[i]);
  for (size_t i = 0; i < n; i++) lse[i] = (float)f.lse[i];
  const int row = 2, h = 1;
  double worst = 0, a = 0;
  key k;
  for (int e = 0; visible_key(&f, row, e, &k) == 0; e++) {
    key_score(&f, row, h, k, &a);
    if (a > worst) worst = a;
  }
  const double eps = f.in.sm_scale * 128 * 0x1p-23 * worst, ref = f.lse[row * 4 + h];
  assert_true(eps > 1e-5 && eps < 1e-3);
  char msg[400];
  double err;
#define VERIFY() st_ref_sparse_attn_verify(&f.in, f.o, f.lse, got, lse, 2e-2, &err, msg, sizeof msg)
  assert_int_equal(VERIFY(), 0);
  lse[row * 4 + h] = (float)(ref + 2e-2 + fabs(ref) * 0x1p-20 + 0.5 * eps);
  assert_int_equal(VERIFY(), 0);
  lse[row * 4 + h] = (float)(ref + 2e-2 + fabs(ref) * 0x1p-20 + 2 * eps);
  assert_int_equal(VERIFY(), 1);
  assert_non_null(strstr(msg, "lse"));
#undef VERIFY
  free(got);
  free(lse);
  release(&f);
}

/* Two keys with the same K and different V, with q near 2^17 (scores near
 * 1e6, and fp32 sums off by ~10): the reference weighs them equally, and a
 * kernel whose rounding favours one returns that one's V. The slack lets
 * that head pass. With q in [-1, 1) the same answer is plainly wrong and
 * fails. */
static void test_verifier_lets_pass_heads_no_fp32_kernel_decides(void **state) {
  (void)state;
  const request reqs[] = {{3, 700}};
  fixture f = make((shape){1, reqs, 4, 1, 128, 4, ST_DTYPE_FP8_E4M3, ST_KV_LAYOUT_SPLIT});
  const size_t n = 3 * 4, nd = n * 128;
  for (size_t i = 0; i < nd; i++) f.q[i] = st_float_to_bf16(st_bf16_to_float(f.q[i]) * 0x1p17f);
  const int row = 2, h = 1;
  key best = {-1, 0}, other = {-1, 0}, k;
  double s_best = -INFINITY;
  for (int e = 0; visible_key(&f, row, e, &k) == 0; e++) {
    const double s = key_score(&f, row, h, k, NULL);
    if (s > s_best) {
      s_best = s;
      best = k;
    }
  }
  for (int e = 0; visible_key(&f, row, e, &k) == 0 && other.page < 0; e++)
    if (k.page != best.page || k.slot != best.slot) other = k;
  assert_true(best.page >= 0 && other.page >= 0);
  /* other's K := best's: the two scores tie exactly */
  uint8_t *kc = (uint8_t *)(uintptr_t)f.in.k_cache;
  memcpy(kc + other.page * f.in.k_stride[0] + other.slot * f.in.k_stride[2],
         kc + best.page * f.in.k_stride[0] + best.slot * f.in.k_stride[2], 128);
  uint16_t *got = malloc(sizeof(uint16_t) * nd);
  char msg[400];
  double err;
  for (int big = 1; big >= 0; big--) {
    if (!big)
      for (size_t i = 0; i < nd; i++) f.q[i] = st_float_to_bf16(st_bf16_to_float(f.q[i]) * 0x1p-17f);
    run(&f, 2);
    for (size_t i = 0; i < nd; i++) got[i] = st_float_to_bf16((float)f.o[i]);
    const uint8_t *v = (const uint8_t *)f.in.v_cache + best.page * f.in.v_stride[0] + best.slot * f.in.v_stride[2];
    for (int d = 0; d < 128; d++) got[(row * 4 + h) * 128 + d] = st_float_to_bf16(st_fp8_e4m3_to_float(v[d]));
    assert_int_equal(st_ref_sparse_attn_verify(&f.in, f.o, NULL, got, NULL, 2e-2, &err, msg, sizeof msg), big ? 0 : 1);
    assert_true(err > 0.1); /* the head is far off the reference either way */
  }
  free(got);
  release(&f);
}

int main(void) {
  g_seed = st_test_seed("reference_sparse_attn");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_varlen_rows_sit_at_the_end_of_their_own_request),
      cmocka_unit_test(test_consecutive_tokens_see_one_more_key_of_their_own_block),
      cmocka_unit_test(test_uniform_requests_match_the_decode_reference_bit_for_bit),
      cmocka_unit_test(test_minus_one_and_past_own_block_entries_are_skipped),
      cmocka_unit_test(test_gqa_group_sizes_1_and_32),
      cmocka_unit_test(test_head_dims_64_and_256),
      cmocka_unit_test(test_results_do_not_depend_on_the_thread_count),
      cmocka_unit_test(test_rows_selecting_more_blocks_than_a_thread_caches),
      cmocka_unit_test(test_malformed_shapes_are_refused_with_the_reason),
      cmocka_unit_test(test_verifier_accepts_bf16_rounding_and_names_planted_mistakes),
      cmocka_unit_test(test_verifier_allows_lse_the_slack_of_fp32_scores),
      cmocka_unit_test(test_verifier_lets_pass_heads_no_fp32_kernel_decides),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
