/* The double-precision reference of the prefill indexer (index_score,
 * index_topk) and its verifiers: varlen positions, scores against a hand
 * computation (masking inside the query's own block), scale, -inf beyond the
 * visible blocks, NaN as -inf, forced blocks and ties, topk above the visible
 * blocks, the composition against index_decode's reference on a decode-shaped
 * batch, and both verifiers accepting the reference and catching planted
 * mistakes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference/dtype.h"
#include "reference/index_decode.h"
#include "reference/index_prefill.h"
#include "testutil.h"

static uint64_t g_seed;

typedef struct batch {
  st_ref_index_prefill in;
  unsigned char *q, *k; /* bf16 or fp8 e4m3 codes */
  int32_t *cu, *seq, *bt;
  int total_q;
  double *score;
  int32_t *idx;
} batch;

static size_t elem_size(st_dtype dt) { return dt == ST_DTYPE_BF16 ? 2 : 1; }

static void put(st_dtype dt, unsigned char *base, int64_t i, float v) {
  if (dt == ST_DTYPE_BF16)
    ((uint16_t *)base)[i] = st_float_to_bf16(v);
  else
    base[i] = st_float_to_fp8_e4m3(v);
}

static double get(st_dtype dt, const unsigned char *base, int64_t i) {
  if (dt == ST_DTYPE_BF16) return st_bf16_to_float(((const uint16_t *)base)[i]);
  return st_fp8_e4m3_to_float(base[i]);
}

static void score_and_select(batch *b) {
  assert_int_equal(st_ref_index_score(&b->in, b->score, 2), 0);
  st_ref_index_topk(&b->in, b->score, b->idx);
}

/* Random q and k in (-1, 1); block table scattered over the pool (request r's
 * block j at page (pages - 1 - r * max_blocks - j)); max_blocks and bt_cols
 * just fit the longest request. */
static batch make(st_dtype dt, int R, const int *seq, const int *q_len, int H, int D, int topk, int init, int local) {
  batch b;
  memset(&b, 0, sizeof b);
  int mb = 1;
  b.cu = malloc(sizeof(int32_t) * (size_t)(R + 1));
  b.seq = malloc(sizeof(int32_t) * (size_t)R);
  b.cu[0] = 0;
  for (int r = 0; r < R; r++) {
    b.seq[r] = seq[r];
    b.cu[r + 1] = b.cu[r] + q_len[r];
    if (seq[r] > 0 && (seq[r] - 1) / 128 + 1 > mb) mb = (seq[r] - 1) / 128 + 1;
  }
  b.total_q = b.cu[R];
  const int pages = R * mb + 3;
  b.q = malloc(elem_size(dt) * (size_t)b.total_q * (size_t)(H * D) + 1);
  b.k = malloc(elem_size(dt) * (size_t)pages * 128 * (size_t)D);
  b.bt = malloc(sizeof(int32_t) * (size_t)(R * mb));
  b.score = malloc(sizeof(double) * (size_t)(H * b.total_q * mb) + 1);
  b.idx = malloc(sizeof(int32_t) * (size_t)(H * b.total_q * topk) + 1);
  uint64_t s = g_seed;
  for (int64_t i = 0; i < (int64_t)b.total_q * H * D; i++) put(dt, b.q, i, (float)st_rand_uniform(&s, -1, 1));
  for (int64_t i = 0; i < (int64_t)pages * 128 * D; i++) put(dt, b.k, i, (float)st_rand_uniform(&s, -1, 1));
  for (int i = 0; i < R * mb; i++) b.bt[i] = pages - 1 - i;
  b.in = (st_ref_index_prefill){.dtype = dt,
                                .R = R,
                                .H = H,
                                .D = D,
                                .max_blocks = mb,
                                .bt_cols = mb,
                                .pages = pages,
                                .cu_seqlens_q = b.cu,
                                .seq_lens = b.seq,
                                .q = b.q,
                                .k_pool = b.k,
                                .block_table = b.bt,
                                .scale = 1.0,
                                .topk = topk,
                                .init_blocks = init,
                                .local_blocks = local};
  score_and_select(&b);
  return b;
}

static void release(batch *b) {
  free(b->q);
  free(b->k);
  free(b->cu);
  free(b->seq);
  free(b->bt);
  free(b->score);
  free(b->idx);
}

static double *score_row(const batch *b, int h, int i) {
  return b->score + ((int64_t)h * b->total_q + i) * b->in.max_blocks;
}

static int32_t *idx_row(const batch *b, int h, int i) { return b->idx + ((int64_t)h * b->total_q + i) * b->in.topk; }

static int nb_of(int pos) { return pos < 0 ? 0 : pos / 128 + 1; }

static double dot(const batch *b, int i, int h, int page, int tok) {
  const int D = b->in.D;
  double s = 0;
  for (int d = 0; d < D; d++)
    s += get(b->in.dtype, b->q, ((int64_t)i * b->in.H + h) * D + d) *
         get(b->in.dtype, b->k, ((int64_t)page * 128 + tok) * D + d);
  return s;
}

/* score[h][i][j] the slow way, straight from the contract. */
static double hand_score(const batch *b, int h, int i, int j) {
  int r = -1;
  const int p = st_ref_index_prefill_position(&b->in, i, &r);
  if (j >= nb_of(p)) return -INFINITY;
  const int page = b->bt[r * b->in.bt_cols + j];
  double best = -INFINITY;
  for (int pos = j * 128; pos < (j + 1) * 128 && pos <= p; pos++) {
    const double d = dot(b, i, h, page, pos - j * 128);
    if (d > best) best = d;
  }
  return b->in.scale * best;
}

static int contains(const int32_t *row, int n, int v) {
  for (int i = 0; i < n; i++)
    if (row[i] == v) return 1;
  return 0;
}

static int count_ids(const int32_t *row, int n) {
  int c = 0;
  for (int i = 0; i < n; i++) c += row[i] != -1;
  return c;
}

static void test_positions_follow_cu_seqlens_and_seq_lens(void **state) {
  (void)state;
  /* A prefix not a multiple of 128, a padding request, a single token, a chunk. */
  const int seq[] = {4133, 0, 1, 300}, q_len[] = {100, 0, 1, 37};
  batch b = make(ST_DTYPE_BF16, 4, seq, q_len, 2, 16, 4, 1, 1);
  assert_int_equal(st_ref_index_prefill_total_q(&b.in), 138);
  int r = -9;
  assert_int_equal(st_ref_index_prefill_position(&b.in, 0, &r), 4033);
  assert_int_equal(r, 0);
  assert_int_equal(st_ref_index_prefill_position(&b.in, 99, &r), 4132);
  assert_int_equal(r, 0);
  assert_int_equal(st_ref_index_prefill_position(&b.in, 100, &r), 0); /* request 1 is padding */
  assert_int_equal(r, 2);
  assert_int_equal(st_ref_index_prefill_position(&b.in, 101, &r), 263);
  assert_int_equal(r, 3);
  assert_int_equal(st_ref_index_prefill_position(&b.in, 137, &r), 299);
  assert_int_equal(r, 3);
  assert_int_equal(st_ref_index_prefill_position(&b.in, 138, &r), -1);
  assert_int_equal(r, -1);
  assert_int_equal(st_ref_index_prefill_position(&b.in, -1, NULL), -1);
  /* Token 0 (4033) sees 32 blocks, token 99 (4132) 33, token 100 (0) one
   * block of one position. */
  assert_int_equal(b.in.max_blocks, 33);
  for (int h = 0; h < 2; h++) {
    assert_true(isfinite(score_row(&b, h, 0)[31]));
    assert_true(isinf(score_row(&b, h, 0)[32]) && score_row(&b, h, 0)[32] < 0);
    assert_true(isfinite(score_row(&b, h, 99)[32]));
    assert_true(score_row(&b, h, 100)[0] == dot(&b, 100, h, b.bt[2 * 33 + 0], 0));
    const int32_t one[4] = {0, -1, -1, -1};
    assert_memory_equal(idx_row(&b, h, 100), one, sizeof one);
    assert_true(contains(idx_row(&b, h, 0), 4, 31) && !contains(idx_row(&b, h, 0), 4, 32));
    assert_true(contains(idx_row(&b, h, 99), 4, 32));
  }
  release(&b);
}

static void test_scores_equal_a_hand_computation_with_masking_in_the_own_block(void **state) {
  (void)state;
  const int seq[] = {4133, 0, 300, 1}, q_len[] = {100, 0, 50, 1};
  batch b = make(ST_DTYPE_BF16, 4, seq, q_len, 2, 16, 8, 1, 1);
  /* Request 2 holds positions 250..299 (tokens 100..149). Key 253 (block 1,
   * slot 125) becomes 4 * q of token 100 (position 250), which must not see
   * it; token 103 (position 253) does. */
  const int D = 16, page = b.bt[2 * b.in.bt_cols + 1];
  for (int d = 0; d < D; d++)
    put(ST_DTYPE_BF16, b.k, ((int64_t)page * 128 + 125) * D + d,
        4.0f * (float)get(ST_DTYPE_BF16, b.q, ((int64_t)100 * 2 + 0) * D + d));
  score_and_select(&b);
  const double planted = dot(&b, 100, 0, page, 125);
  assert_true(score_row(&b, 0, 100)[1] < planted);
  assert_true(score_row(&b, 0, 103)[1] >= dot(&b, 103, 0, page, 125));
  for (int h = 0; h < 2; h++)
    for (int i = 0; i < b.total_q; i++)
      for (int j = 0; j < b.in.max_blocks; j++) {
        const double want = hand_score(&b, h, i, j), got = score_row(&b, h, i)[j];
        if (isinf(want))
          assert_true(got == want);
        else
          assert_true(fabs(got - want) <= 1e-12 * (1 + fabs(want)));
      }
  /* Any number of threads gives the same bits. */
  double *again = malloc(sizeof(double) * 2 * (size_t)b.total_q * (size_t)b.in.max_blocks);
  assert_int_equal(st_ref_index_score(&b.in, again, 1), 0);
  assert_memory_equal(again, b.score, sizeof(double) * 2 * (size_t)b.total_q * (size_t)b.in.max_blocks);
  assert_int_equal(st_ref_index_score(&b.in, again, 5), 0);
  assert_memory_equal(again, b.score, sizeof(double) * 2 * (size_t)b.total_q * (size_t)b.in.max_blocks);
  free(again);
  release(&b);
}

static void test_scale_multiplies_every_score(void **state) {
  (void)state;
  const int seq[] = {1000, 130}, q_len[] = {40, 3};
  batch b = make(ST_DTYPE_BF16, 2, seq, q_len, 2, 32, 4, 0, 1);
  const size_t n = 2 * (size_t)b.total_q * (size_t)b.in.max_blocks;
  double *scaled = malloc(sizeof(double) * n);
  b.in.scale = 0.3;
  assert_int_equal(st_ref_index_score(&b.in, scaled, 2), 0);
  int finite = 0;
  for (size_t e = 0; e < n; e++) {
    assert_true(scaled[e] == 0.3 * b.score[e]); /* -inf stays -inf */
    finite += isfinite(scaled[e]);
  }
  assert_int_equal(finite, 2 * (40 * 8 + 1 + 2 + 2)); /* positions 960..999 see 8 blocks, 127..129 see 1, 2, 2 */
  assert_true(finite < (int)n);
  free(scaled);
  release(&b);
}

static void test_blocks_beyond_the_visible_ones_are_minus_infinity(void **state) {
  (void)state;
  /* Request 2 has more query tokens than tokens: positions -2 and -1 see nothing. */
  const int seq[] = {777, 129, 2}, q_len[] = {33, 2, 4};
  batch b = make(ST_DTYPE_FP8_E4M3, 3, seq, q_len, 1, 32, 4, 1, 1);
  for (int i = 0; i < b.total_q; i++) {
    const int nb = nb_of(st_ref_index_prefill_position(&b.in, i, NULL));
    for (int j = 0; j < b.in.max_blocks; j++) {
      const double v = score_row(&b, 0, i)[j];
      if (j < nb)
        assert_true(isfinite(v));
      else
        assert_true(isinf(v) && v < 0);
    }
    assert_int_equal(count_ids(idx_row(&b, 0, i), 4), nb < 4 ? nb : 4);
  }
  assert_int_equal(st_ref_index_prefill_position(&b.in, 35, NULL), -2);
  assert_int_equal(idx_row(&b, 0, 35)[0], -1);
  assert_int_equal(idx_row(&b, 0, 37)[0], 0); /* position 0 */
  release(&b);
}

static void test_nan_dot_products_count_as_minus_infinity(void **state) {
  (void)state;
  const int seq[] = {700}, q_len[] = {3};
  batch b = make(ST_DTYPE_BF16, 1, seq, q_len, 2, 16, 4, 1, 1);
  const int D = 16;
  /* Token 1, head 0: every dot product NaN. */
  ((uint16_t *)b.q)[((int64_t)1 * 2 + 0) * D + 3] = 0x7fc0;
  /* Key 5 of block 0: one NaN dot per query vector in that block. */
  const int page0 = b.bt[0];
  ((uint16_t *)b.k)[((int64_t)page0 * 128 + 5) * D + 0] = 0x7fc0;
  score_and_select(&b);
  for (int j = 0; j < b.in.max_blocks; j++) assert_true(isinf(score_row(&b, 0, 1)[j]) && score_row(&b, 0, 1)[j] < 0);
  /* Its selection: forced 0 and 5, then ties at -inf go to the lowest blocks. */
  const int32_t want[4] = {0, 5, 1, 2};
  assert_memory_equal(idx_row(&b, 0, 1), want, sizeof want);
  /* Elsewhere block 0 is the max over its other 127 keys. */
  for (int h = 0; h < 2; h++)
    for (int i = 0; i < 3; i++) {
      if (h == 0 && i == 1) continue;
      double best = -INFINITY;
      for (int tok = 0; tok < 128; tok++)
        if (tok != 5 && dot(&b, i, h, page0, tok) > best) best = dot(&b, i, h, page0, tok);
      assert_true(isfinite(score_row(&b, h, i)[0]));
      assert_true(fabs(score_row(&b, h, i)[0] - best) <= 1e-12 * (1 + fabs(best)));
    }
  release(&b);
}

static void test_topk_keeps_forced_blocks_then_best_with_ties_to_the_lower_index(void **state) {
  (void)state;
  const int seq[] = {768}, q_len[] = {1}; /* position 767: blocks 0..5 */
  batch b = make(ST_DTYPE_BF16, 1, seq, q_len, 1, 16, 3, 0, 1);
  double *s = score_row(&b, 0, 0);
  const double planted[6] = {1.0, NAN, 2.0, 2.0, -INFINITY, -5.0};
  memcpy(s, planted, sizeof planted);
  int32_t out[5];
  st_ref_index_topk(&b.in, b.score, out);
  const int32_t want3[3] = {5, 2, 3}; /* forced own block, then the tie 2 before 3 */
  assert_memory_equal(out, want3, sizeof want3);
  b.in.topk = 4;
  st_ref_index_topk(&b.in, b.score, out);
  const int32_t want4[4] = {5, 2, 3, 0}; /* 1.0 beats NaN (-inf) and -inf */
  assert_memory_equal(out, want4, sizeof want4);
  b.in.topk = 5;
  b.in.init_blocks = 1;
  st_ref_index_topk(&b.in, b.score, out);
  const int32_t want5[5] = {0, 5, 2, 3, 1}; /* NaN ties -inf: lower index */
  assert_memory_equal(out, want5, sizeof want5);
  release(&b);
}

static void test_topk_above_the_visible_blocks_pads_with_minus_one_and_forced_ranges_overlap(void **state) {
  (void)state;
  const int seq[] = {1, 131, 301, 601}, q_len[] = {1, 1, 1, 1}; /* nb 1, 2, 3, 5 */
  batch b = make(ST_DTYPE_BF16, 4, seq, q_len, 2, 16, 8, 2, 2);
  const int32_t want[4][8] = {{0, -1, -1, -1, -1, -1, -1, -1},
                              {0, 1, -1, -1, -1, -1, -1, -1},
                              {0, 1, 2, -1, -1, -1, -1, -1}, /* init 0..1 and local 1..2 overlap */
                              {0, 1, 3, 4, 2, -1, -1, -1}};
  for (int h = 0; h < 2; h++)
    for (int i = 0; i < 4; i++) assert_memory_equal(idx_row(&b, h, i), want[i], sizeof want[i]);
  b.in.topk = 4; /* nb 5: only the forced ones fit */
  st_ref_index_topk(&b.in, b.score, b.idx);
  const int32_t four[4] = {0, 1, 3, 4};
  assert_memory_equal(idx_row(&b, 1, 3), four, sizeof four);
  release(&b);
}

static void composition_matches_decode(st_dtype dt) {
  enum { R = 5, QLEN = 3, H = 2, D = 32, TOPK = 8 };
  const int seq[R] = {3000, 5, 129, 0, 2}, q_len[R] = {QLEN, QLEN, QLEN, QLEN, QLEN};
  batch b = make(dt, R, seq, q_len, H, D, TOPK, 1, 2);
  st_ref_index_decode dec = {.dtype = dt,
                             .R = R,
                             .qlen = QLEN,
                             .H = H,
                             .D = D,
                             .topk = TOPK,
                             .init_blocks = 1,
                             .local_blocks = 2,
                             .max_blocks = b.in.max_blocks,
                             .bt_cols = b.in.bt_cols,
                             .pages = b.in.pages,
                             .q = b.q,
                             .k_pool = b.k,
                             .block_table = b.bt,
                             .seq_lens = b.seq};
  const size_t n = (size_t)H * R * QLEN * (size_t)b.in.max_blocks;
  double *scores = malloc(sizeof(double) * n);
  int32_t *ids = malloc(sizeof(int32_t) * (size_t)H * R * QLEN * TOPK);
  assert_int_equal(st_ref_index_decode_scores(&dec, scores, 3), 0);
  st_ref_index_decode_select(&dec, scores, ids);
  /* Same sums in the same order: the same bits, hence the same ids. */
  assert_memory_equal(scores, b.score, sizeof(double) * n);
  assert_memory_equal(ids, b.idx, sizeof(int32_t) * (size_t)H * R * QLEN * TOPK);
  int picked = 0;
  for (size_t e = 0; e < (size_t)H * R * QLEN * TOPK; e++) picked += ids[e] >= 0;
  /* seq 3000: 3 * 8; seq 5: 3 * 1; seq 129 (positions 126..128): 1 + 1 + 2; seq 2 (positions -1..1): 0 + 1 + 1 */
  assert_int_equal(picked, H * (3 * TOPK + 3 + 4 + 0 + 2));
  free(scores);
  free(ids);
  release(&b);
}

static void test_composition_equals_index_decode_on_a_decode_shaped_batch(void **state) {
  (void)state;
  composition_matches_decode(ST_DTYPE_BF16);
  composition_matches_decode(ST_DTYPE_FP8_E4M3);
}

/* The reference's scores as a kernel stores them: fp32, rows padded to
 * max_blocks + 5, entries a kernel may leave unwritten set to NaN. */
static float *as_kernel_scores(const batch *b, int64_t *sh, int64_t *sr) {
  *sr = b->in.max_blocks + 5;
  *sh = *sr * b->total_q;
  float *got = calloc((size_t)(*sh * b->in.H), sizeof(float));
  for (int h = 0; h < b->in.H; h++)
    for (int i = 0; i < b->total_q; i++) {
      const int nb = nb_of(st_ref_index_prefill_position(&b->in, i, NULL));
      for (int j = 0; j < *sr; j++) got[h * *sh + i * *sr + j] = j < nb ? (float)score_row(b, h, i)[j] : NAN;
    }
  return got;
}

static void test_score_verifier_accepts_fp32_rounding_and_catches_wrong_scores(void **state) {
  (void)state;
  const int seq[] = {40 * 128 + 17, 0, 3000}, q_len[] = {64, 0, 40};
  batch b = make(ST_DTYPE_BF16, 3, seq, q_len, 2, 32, 8, 1, 2);
  int64_t sh, sr;
  float *got = as_kernel_scores(&b, &sh, &sr);
  char msg[400] = "";
  double err = -1;
  assert_int_equal(st_ref_index_score_verify(&b.in, b.score, got, sh, sr, 1e-5, 1e-5, &err, msg, sizeof msg), 0);
  assert_true(err >= 0 && err < 0.1);
  /* A wrong score: 0.5 off in head 1, token 70, block 3. */
  float *cell = &got[1 * sh + 70 * sr + 3];
  const float keep = *cell;
  *cell = keep + 0.5f;
  assert_int_equal(st_ref_index_score_verify(&b.in, b.score, got, sh, sr, 1e-5, 1e-5, &err, msg, sizeof msg), 1);
  assert_non_null(strstr(msg, "head 1 token 70 (position 2966) block 3"));
  assert_true(err > 1);
  /* NaN where a finite score is due. */
  *cell = NAN;
  assert_int_equal(st_ref_index_score_verify(&b.in, b.score, got, sh, sr, 1e-5, 1e-5, &err, msg, sizeof msg), 1);
  assert_true(isinf(err));
  *cell = keep;
  /* A reference of -inf (NaN dot products) takes NaN or -inf, not a number. */
  score_row(&b, 0, 5)[2] = -INFINITY;
  got[0 * sh + 5 * sr + 2] = NAN;
  assert_int_equal(st_ref_index_score_verify(&b.in, b.score, got, sh, sr, 1e-5, 1e-5, &err, msg, sizeof msg), 0);
  got[0 * sh + 5 * sr + 2] = -INFINITY;
  assert_int_equal(st_ref_index_score_verify(&b.in, b.score, got, sh, sr, 1e-5, 1e-5, &err, msg, sizeof msg), 0);
  got[0 * sh + 5 * sr + 2] = 0.5f;
  assert_int_equal(st_ref_index_score_verify(&b.in, b.score, got, sh, sr, 1e-5, 1e-5, &err, msg, sizeof msg), 1);
  assert_non_null(strstr(msg, "head 0 token 5"));
  free(got);
  release(&b);
}

/* The worst-scoring left-out free block of a row, and the weakest chosen free one. */
static void free_extremes(const batch *b, int h, int i, int lo, int hi, int *worst_out, int *weakest_in) {
  const double *s = score_row(b, h, i);
  const int32_t *ids = idx_row(b, h, i);
  *worst_out = *weakest_in = -1;
  for (int j = lo; j < hi; j++) {
    if (contains(ids, b->in.topk, j)) {
      if (*weakest_in < 0 || s[j] < s[*weakest_in]) *weakest_in = j;
    } else if (*worst_out < 0 || s[j] < s[*worst_out]) {
      *worst_out = j;
    }
  }
}

static int slot_of(const int32_t *row, int n, int v) {
  for (int i = 0; i < n; i++)
    if (row[i] == v) return i;
  return -1;
}

static void test_topk_verifier_accepts_the_reference_and_catches_planted_mistakes(void **state) {
  (void)state;
  enum { TOPK = 8 };
  const int seq[] = {40 * 128 + 17, 0, 3000, 130}, q_len[] = {64, 0, 40, 2};
  batch b = make(ST_DTYPE_BF16, 4, seq, q_len, 2, 32, TOPK, 1, 2);
  /* Kernel layout: rows padded to topk + 3. */
  const int64_t sr = TOPK + 3, sh = sr * b.total_q, n = sh * 2;
  int32_t *good = malloc(sizeof(int32_t) * (size_t)n), *bad = malloc(sizeof(int32_t) * (size_t)n);
  for (int64_t e = 0; e < n; e++) good[e] = 7777; /* the padding is never read */
  for (int h = 0; h < 2; h++)
    for (int i = 0; i < b.total_q; i++) memcpy(good + h * sh + i * sr, idx_row(&b, h, i), sizeof(int32_t) * TOPK);
  char msg[400] = "";
  double viol = -1;
  assert_int_equal(st_ref_index_topk_verify(&b.in, b.score, good, sh, sr, 1e-6, &viol, msg, sizeof msg), 0);
  assert_true(viol == 0);
  /* Token 10 (request 0, position 5083): 40 blocks, 0 and 38, 39 forced. */
  const int h = 1, i = 10, lo = 1, hi = 38;
  int32_t *row = bad + h * sh + i * sr;
  int worst = -1, weakest = -1;
  free_extremes(&b, h, i, lo, hi, &worst, &weakest);
  /* A lower-scoring block swapped in for a chosen one. */
  memcpy(bad, good, sizeof(int32_t) * (size_t)n);
  row[slot_of(row, TOPK, weakest)] = worst;
  assert_int_equal(st_ref_index_topk_verify(&b.in, b.score, bad, sh, sr, 1e-6, &viol, msg, sizeof msg), 1);
  assert_non_null(strstr(msg, "head 1 token 10 (request 0, position 5083): a left-out block scores"));
  assert_true(viol > 0);
  /* A forced block (the own block 39) replaced by a free one. */
  memcpy(bad, good, sizeof(int32_t) * (size_t)n);
  row[slot_of(row, TOPK, 39)] = worst;
  assert_int_equal(st_ref_index_topk_verify(&b.in, b.score, bad, sh, sr, 1e-6, &viol, msg, sizeof msg), 1);
  assert_non_null(strstr(msg, "forced block 39 missing"));
  /* A duplicate. */
  memcpy(bad, good, sizeof(int32_t) * (size_t)n);
  row[1] = row[0];
  assert_int_equal(st_ref_index_topk_verify(&b.in, b.score, bad, sh, sr, 1e-6, &viol, msg, sizeof msg), 1);
  assert_non_null(strstr(msg, "selected twice"));
  /* A -1 too early: a chosen id dropped. */
  memcpy(bad, good, sizeof(int32_t) * (size_t)n);
  row[slot_of(row, TOPK, weakest)] = -1;
  assert_int_equal(st_ref_index_topk_verify(&b.in, b.score, bad, sh, sr, 1e-6, &viol, msg, sizeof msg), 1);
  assert_non_null(strstr(msg, "7 ids, expected min(topk=8, nb=40)=8"));
  /* Token 104 (request 3, position 128) sees 2 blocks: a third id is invisible. */
  memcpy(bad, good, sizeof(int32_t) * (size_t)n);
  bad[0 * sh + 104 * sr + 2] = 2;
  assert_int_equal(st_ref_index_topk_verify(&b.in, b.score, bad, sh, sr, 1e-6, &viol, msg, sizeof msg), 1);
  assert_non_null(strstr(msg, "id 2 is not a visible block (0..1)"));
  /* Every row wrong counts every row. */
  memcpy(bad, good, sizeof(int32_t) * (size_t)n);
  for (int hh = 0; hh < 2; hh++)
    for (int ii = 0; ii < b.total_q; ii++) bad[hh * sh + ii * sr] = -1;
  assert_int_equal(st_ref_index_topk_verify(&b.in, b.score, bad, sh, sr, 1e-6, &viol, msg, sizeof msg), 2 * b.total_q);
  /* A swap within rounding passes: the left-out block ties the weakest chosen one. */
  memcpy(bad, good, sizeof(int32_t) * (size_t)n);
  score_row(&b, h, i)[worst] = score_row(&b, h, i)[weakest] + 1e-9;
  row[slot_of(row, TOPK, weakest)] = worst;
  assert_int_equal(st_ref_index_topk_verify(&b.in, b.score, bad, sh, sr, 1e-6, &viol, msg, sizeof msg), 0);
  free(good);
  free(bad);
  release(&b);
}

static void test_score_refuses_inconsistent_batches(void **state) {
  (void)state;
  const int seq[] = {300, 200}, q_len[] = {10, 5};
  batch b = make(ST_DTYPE_BF16, 2, seq, q_len, 1, 16, 4, 1, 1);
  st_ref_index_prefill in = b.in;
  in.max_blocks = 2; /* position 299 sees 3 blocks */
  assert_int_equal(st_ref_index_score(&in, b.score, 2), -1);
  in = b.in;
  in.bt_cols = 2;
  assert_int_equal(st_ref_index_score(&in, b.score, 2), -1);
  in = b.in;
  in.scale = 0;
  assert_int_equal(st_ref_index_score(&in, b.score, 2), -1);
  in = b.in;
  in.dtype = ST_DTYPE_FP32;
  assert_int_equal(st_ref_index_score(&in, b.score, 2), -1);
  in = b.in;
  b.bt[1] = (int32_t)b.in.pages; /* a page outside the pool */
  assert_int_equal(st_ref_index_score(&in, b.score, 2), -1);
  b.bt[1] = 0;
  b.cu[1] = 16; /* cu decreasing: 0, 16, 15 */
  assert_int_equal(st_ref_index_score(&in, b.score, 2), -1);
  release(&b);
}

int main(void) {
  g_seed = st_test_seed("reference_index_prefill");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_positions_follow_cu_seqlens_and_seq_lens),
      cmocka_unit_test(test_scores_equal_a_hand_computation_with_masking_in_the_own_block),
      cmocka_unit_test(test_scale_multiplies_every_score),
      cmocka_unit_test(test_blocks_beyond_the_visible_ones_are_minus_infinity),
      cmocka_unit_test(test_nan_dot_products_count_as_minus_infinity),
      cmocka_unit_test(test_topk_keeps_forced_blocks_then_best_with_ties_to_the_lower_index),
      cmocka_unit_test(test_topk_above_the_visible_blocks_pads_with_minus_one_and_forced_ranges_overlap),
      cmocka_unit_test(test_composition_equals_index_decode_on_a_decode_shaped_batch),
      cmocka_unit_test(test_score_verifier_accepts_fp32_rounding_and_catches_wrong_scores),
      cmocka_unit_test(test_topk_verifier_accepts_the_reference_and_catches_planted_mistakes),
      cmocka_unit_test(test_score_refuses_inconsistent_batches),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
