/* The double-precision reference of index_decode and its verifier: forced
 * blocks, selection by score with ties to the lower index, NaN as -inf,
 * topk above the visible blocks, padding rows, qlen > 1 positions, and the
 * verifier catching planted mistakes while allowing swaps within rounding. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference/dtype.h"
#include "reference/index_decode.h"
#include "testutil.h"

static uint64_t g_seed;

typedef struct fixture {
  st_ref_index_decode in;
  uint16_t *q, *k;
  int32_t *bt, *seq;
  double *scores;
  int32_t *out;
} fixture;

/* bf16 inputs with R requests of the given lengths; pages = identity map
 * shifted so the block table is not trivial. */
static fixture make(int R, int qlen, int H, int D, int topk, int init, int local, const int *lens, int max_ctx) {
  fixture f;
  memset(&f, 0, sizeof f);
  const int mb = (max_ctx + 127) / 128;
  const int pages = R * mb + 3;
  f.q = malloc(sizeof(uint16_t) * (size_t)(R * qlen * H * D));
  f.k = malloc(sizeof(uint16_t) * (size_t)pages * 128 * (size_t)D);
  f.bt = malloc(sizeof(int32_t) * (size_t)(R * mb));
  f.seq = malloc(sizeof(int32_t) * (size_t)R);
  f.scores = malloc(sizeof(double) * (size_t)(H * R * qlen * mb));
  f.out = malloc(sizeof(int32_t) * (size_t)(H * R * qlen * topk));
  uint64_t s = g_seed;
  for (int i = 0; i < R * qlen * H * D; i++) f.q[i] = st_float_to_bf16((float)st_rand_uniform(&s, -1, 1));
  for (int i = 0; i < pages * 128 * D; i++) f.k[i] = st_float_to_bf16((float)st_rand_uniform(&s, -1, 1));
  for (int r = 0; r < R; r++) {
    f.seq[r] = lens[r];
    for (int j = 0; j < mb; j++) f.bt[r * mb + j] = (r * mb + j + 3) % pages;
  }
  f.in = (st_ref_index_decode){.dtype = ST_DTYPE_BF16, .R = R, .qlen = qlen, .H = H, .D = D, .topk = topk,
                               .init_blocks = init, .local_blocks = local, .max_blocks = mb, .bt_cols = mb,
                               .pages = pages, .q = f.q, .k_pool = f.k, .block_table = f.bt, .seq_lens = f.seq};
  assert_int_equal(st_ref_index_decode_scores(&f.in, f.scores, 2), 0);
  st_ref_index_decode_select(&f.in, f.scores, f.out);
  return f;
}

static void release(fixture *f) {
  free(f->q);
  free(f->k);
  free(f->bt);
  free(f->seq);
  free(f->scores);
  free(f->out);
}

static double dot_bf16(const fixture *f, int row, int h, int page, int tok) {
  const int D = f->in.D;
  double s = 0;
  for (int d = 0; d < D; d++)
    s += (double)st_bf16_to_float(f->q[(row * f->in.H + h) * D + d]) *
         (double)st_bf16_to_float(f->k[((int64_t)page * 128 + tok) * D + d]);
  return s;
}

static void test_scores_are_the_max_dot_over_visible_positions(void **state) {
  (void)state;
  const int lens[] = {300};
  fixture f = make(1, 1, 1, 64, 4, 0, 0, lens, 300);
  /* Block 2 holds positions 256..299 only. */
  for (int j = 0; j < 3; j++) {
    double best = -INFINITY;
    const int last = j == 2 ? 299 - 256 : 127;
    for (int t = 0; t <= last; t++) {
      double d = dot_bf16(&f, 0, 0, f.bt[j], t);
      if (d > best) best = d;
    }
    assert_true(fabs(f.scores[j] - best) <= 1e-12 * (1 + fabs(best)));
  }
  release(&f);
}

static int contains(const int32_t *row, int n, int v) {
  for (int i = 0; i < n; i++)
    if (row[i] == v) return 1;
  return 0;
}

static void test_selection_keeps_forced_then_best(void **state) {
  (void)state;
  const int lens[] = {20 * 128 + 5};
  fixture f = make(1, 1, 1, 64, 8, 2, 3, lens, lens[0]);
  const int nb = 21;
  for (int j = 0; j < 2; j++) assert_true(contains(f.out, 8, j));
  for (int j = nb - 3; j < nb; j++) assert_true(contains(f.out, 8, j));
  /* The other three are the best-scoring of blocks 2..17. */
  double third = INFINITY;
  for (int i = 0; i < 8; i++)
    if (f.out[i] >= 2 && f.out[i] < nb - 3 && f.scores[f.out[i]] < third) third = f.scores[f.out[i]];
  for (int j = 2; j < nb - 3; j++)
    if (!contains(f.out, 8, j)) assert_true(f.scores[j] <= third);
  release(&f);
}

static void test_topk_above_visible_blocks_pads_with_minus_one(void **state) {
  (void)state;
  const int lens[] = {129, 0, 1};
  fixture f = make(3, 1, 2, 64, 16, 1, 2, lens, 4 * 128);
  for (int h = 0; h < 2; h++) {
    const int32_t *r0 = f.out + (h * 3 + 0) * 16, *r1 = f.out + (h * 3 + 1) * 16, *r2 = f.out + (h * 3 + 2) * 16;
    assert_true(contains(r0, 16, 0) && contains(r0, 16, 1));
    for (int i = 2; i < 16; i++) assert_int_equal(r0[i], -1);
    for (int i = 0; i < 16; i++) assert_int_equal(r1[i], -1); /* padding row */
    assert_int_equal(r2[0], 0);
    for (int i = 1; i < 16; i++) assert_int_equal(r2[i], -1);
  }
  release(&f);
}

static void test_qlen_tokens_see_their_own_positions(void **state) {
  (void)state;
  /* seq 257, qlen 2: token 0 at 255 sees 2 blocks, token 1 at 256 sees 3. */
  const int lens[] = {257};
  fixture f = make(1, 2, 1, 64, 4, 0, 1, lens, 257);
  const int32_t *t0 = f.out, *t1 = f.out + 4;
  assert_true(contains(t0, 4, 0) && contains(t0, 4, 1) && !contains(t0, 4, 2));
  assert_true(contains(t1, 4, 0) && contains(t1, 4, 1) && contains(t1, 4, 2));
  assert_true(isinf(f.scores[2]) && f.scores[2] < 0); /* token 0 cannot see block 2 */
  release(&f);
}

static void test_ties_go_to_the_lower_block_and_nan_counts_as_minus_infinity(void **state) {
  (void)state;
  const int lens[] = {6 * 128};
  fixture f = make(1, 1, 1, 64, 3, 0, 1, lens, lens[0]);
  double *s = f.scores;
  s[0] = 1.0;
  s[1] = NAN;
  s[2] = 2.0;
  s[3] = 2.0;
  s[4] = -INFINITY;
  st_ref_index_decode_select(&f.in, f.scores, f.out);
  /* forced 5, then 2 (tie with 3, lower index), then ... 3 */
  assert_true(contains(f.out, 3, 5) && contains(f.out, 3, 2) && contains(f.out, 3, 3));
  f.in.topk = 4;
  int32_t out4[4];
  st_ref_index_decode_select(&f.in, f.scores, out4);
  assert_true(contains(out4, 4, 0)); /* 1.0 beats NaN (-inf) */
  assert_false(contains(out4, 4, 1));
  release(&f);
}

static void test_verifier_accepts_the_reference_and_rejects_planted_mistakes(void **state) {
  (void)state;
  const int lens[] = {40 * 128 + 17, 0, 3000};
  fixture f = make(3, 1, 2, 64, 8, 1, 2, lens, lens[0]);
  char msg[400];
  double viol = 0;
  const int64_t sh = 3 * 8, sr = 8;
  assert_int_equal(st_ref_index_decode_verify(&f.in, f.scores, f.out, sh, sr, 1e-6, &viol, msg, sizeof msg), 0);
  int32_t *bad = malloc(sizeof(int32_t) * 2 * 3 * 8);
  /* A duplicate id. */
  memcpy(bad, f.out, sizeof(int32_t) * 48);
  bad[1] = bad[0];
  assert_true(st_ref_index_decode_verify(&f.in, f.scores, bad, sh, sr, 1e-6, &viol, msg, sizeof msg) > 0);
  assert_non_null(strstr(msg, "twice"));
  /* A forced block replaced by another block. */
  memcpy(bad, f.out, sizeof(int32_t) * 48);
  int other = 1;
  while (contains(f.out, 8, other)) other++;
  for (int i = 0; i < 8; i++)
    if (bad[i] == 0) bad[i] = other;
  assert_true(st_ref_index_decode_verify(&f.in, f.scores, bad, sh, sr, 1e-6, &viol, msg, sizeof msg) > 0);
  assert_non_null(strstr(msg, "forced block 0 missing"));
  /* The worst non-forced block instead of a chosen one. */
  memcpy(bad, f.out, sizeof(int32_t) * 48);
  /* Row 0 sees 41 blocks: 0 and 39, 40 are forced, 1..38 are chosen by score. */
  const int free_lo = 1, free_hi = 39;
  int worst = -1;
  for (int j = free_lo; j < free_hi; j++)
    if (!contains(f.out, 8, j) && (worst < 0 || f.scores[j] < f.scores[worst])) worst = j;
  for (int i = 0; i < 8; i++)
    if (bad[i] >= free_lo && bad[i] < free_hi) {
      bad[i] = worst;
      break;
    }
  assert_true(st_ref_index_decode_verify(&f.in, f.scores, bad, sh, sr, 1e-6, &viol, msg, sizeof msg) > 0);
  assert_true(viol > 0);
  /* Padding row must be all -1. */
  memcpy(bad, f.out, sizeof(int32_t) * 48);
  bad[8] = 0;
  assert_true(st_ref_index_decode_verify(&f.in, f.scores, bad, sh, sr, 1e-6, &viol, msg, sizeof msg) > 0);
  /* A swap within the tolerance passes: make a left-out block tie the last chosen one. */
  memcpy(bad, f.out, sizeof(int32_t) * 48);
  int weakest = -1, slot = -1;
  for (int i = 0; i < 8; i++)
    if (bad[i] >= free_lo && bad[i] < free_hi && (weakest < 0 || f.scores[bad[i]] < f.scores[weakest])) {
      weakest = bad[i];
      slot = i;
    }
  f.scores[worst] = f.scores[weakest] + 1e-9;
  bad[slot] = worst;
  assert_int_equal(st_ref_index_decode_verify(&f.in, f.scores, bad, sh, sr, 1e-6, &viol, msg, sizeof msg), 0);
  free(bad);
  release(&f);
}

static void test_fp8_e4m3_codes_round_trip(void **state) {
  (void)state;
  for (int c = 0; c < 256; c++) {
    const float v = st_fp8_e4m3_to_float((uint8_t)c);
    if (isnan(v)) {
      assert_true((c & 0x7f) == 0x7f);
      continue;
    }
    const uint8_t back = st_float_to_fp8_e4m3(v);
    if (v == 0.0f) assert_true((back & 0x7f) == 0);
    else assert_int_equal(back, c);
  }
  assert_float_equal(st_fp8_e4m3_to_float(0x7e), 448.0f, 0);
  assert_int_equal(st_float_to_fp8_e4m3(1e6f), 0x7e);     /* saturates */
  assert_int_equal(st_float_to_fp8_e4m3(1.0625f), 0x38); /* halfway 1 and 1.125: even */
  assert_int_equal(st_float_to_fp8_e4m3(1.1875f), 0x3a); /* halfway 1.125 and 1.25: even */
}

static void test_bf16_rounds_to_nearest_even(void **state) {
  (void)state;
  assert_int_equal(st_float_to_bf16(1.0f), 0x3f80);
  assert_int_equal(st_float_to_bf16(1.00390625f), 0x3f80); /* exactly halfway: even */
  assert_int_equal(st_float_to_bf16(1.01171875f), 0x3f82); /* halfway, odd below: up */
  assert_float_equal(st_bf16_to_float(0xc000), -2.0f, 0);
  assert_true(isnan(st_bf16_to_float(st_float_to_bf16(NAN))));
}

int main(void) {
  g_seed = st_test_seed("reference_index_decode");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_scores_are_the_max_dot_over_visible_positions),
      cmocka_unit_test(test_selection_keeps_forced_then_best),
      cmocka_unit_test(test_topk_above_visible_blocks_pads_with_minus_one),
      cmocka_unit_test(test_qlen_tokens_see_their_own_positions),
      cmocka_unit_test(test_ties_go_to_the_lower_block_and_nan_counts_as_minus_infinity),
      cmocka_unit_test(test_verifier_accepts_the_reference_and_rejects_planted_mistakes),
      cmocka_unit_test(test_fp8_e4m3_codes_round_trip),
      cmocka_unit_test(test_bf16_rounds_to_nearest_even),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
