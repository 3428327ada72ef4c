#include "reference/index_decode.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference/dtype.h"

#define BLOCK_TOKENS 128

static double load_elem(st_dtype dt, const void *base, int64_t i) {
  if (dt == ST_DTYPE_BF16) return st_bf16_to_float(((const uint16_t *)base)[i]);
  return st_fp8_e4m3_to_float(((const uint8_t *)base)[i]);
}

st_ref_row_plan st_ref_index_decode_row_plan(const st_ref_index_decode *in, int seq_len, int t) {
  st_ref_row_plan p = {0, 0, 0, 0};
  const int pos = seq_len - in->qlen + t;
  if (seq_len <= 0 || pos < 0) return p;
  p.nb = pos / BLOCK_TOKENS + 1;
  if (p.nb > in->max_blocks) p.nb = in->max_blocks;
  p.lo = in->init_blocks < p.nb ? in->init_blocks : p.nb;
  p.hi = p.nb - in->local_blocks > p.lo ? p.nb - in->local_blocks : p.lo;
  p.want = in->topk < p.nb ? in->topk : p.nb;
  return p;
}

typedef struct work {
  const st_ref_index_decode *in;
  double *scores;
  atomic_long next; /* next (request, block) item */
} work;

/* One (request, block) item: every head and token's score of that block. */
static void score_item(const st_ref_index_decode *in, double *scores, int r, int j, double *qd, double *kd) {
  const int D = in->D, H = in->H, qlen = in->qlen, rows = in->R * qlen;
  const int seq = in->seq_lens[r];
  const int page = in->block_table[(int64_t)r * in->bt_cols + j];
  for (int t = 0; t < qlen; t++)
    for (int h = 0; h < H; h++)
      for (int d = 0; d < D; d++)
        qd[(t * H + h) * D + d] = load_elem(in->dtype, in->q, ((int64_t)(r * qlen + t) * H + h) * D + d);
  double best[4 * 64];
  for (int i = 0; i < qlen * H; i++) best[i] = -INFINITY;
  for (int tok = 0; tok < BLOCK_TOKENS; tok++) {
    const int pos = j * BLOCK_TOKENS + tok;
    if (pos > seq - 1) break;
    for (int d = 0; d < D; d++) kd[d] = load_elem(in->dtype, in->k_pool, ((int64_t)page * BLOCK_TOKENS + tok) * D + d);
    for (int t = 0; t < qlen; t++) {
      if (pos > seq - qlen + t) continue;
      for (int h = 0; h < H; h++) {
        const double *qv = qd + (t * H + h) * D;
        double s = 0;
        for (int d = 0; d < D; d++) s += qv[d] * kd[d];
        if (s > best[t * H + h]) best[t * H + h] = s; /* NaN never wins: -inf */
      }
    }
  }
  for (int t = 0; t < qlen; t++)
    for (int h = 0; h < H; h++)
      scores[((int64_t)h * rows + r * qlen + t) * in->max_blocks + j] = best[t * H + h];
}

static void *score_worker(void *arg) {
  work *w = arg;
  const st_ref_index_decode *in = w->in;
  double *qd = malloc(sizeof(double) * (size_t)(in->qlen * in->H * in->D));
  double *kd = malloc(sizeof(double) * (size_t)in->D);
  if (!qd || !kd) {
    free(qd);
    free(kd);
    return (void *)1;
  }
  const long total = (long)in->R * in->max_blocks;
  for (;;) {
    const long item = atomic_fetch_add(&w->next, 1);
    if (item >= total) break;
    const int r = (int)(item / in->max_blocks), j = (int)(item % in->max_blocks);
    const int seq = in->seq_lens[r];
    if (seq <= 0 || j > (seq - 1) / BLOCK_TOKENS) continue;
    score_item(in, w->scores, r, j, qd, kd);
  }
  free(qd);
  free(kd);
  return NULL;
}

int st_ref_index_decode_scores(const st_ref_index_decode *in, double *scores, int threads) {
  if (in->H * in->qlen > 4 * 64) return -1;
  const size_t n = (size_t)in->H * (size_t)in->R * (size_t)in->qlen * (size_t)in->max_blocks;
  for (size_t i = 0; i < n; i++) scores[i] = -INFINITY;
  work w = {.in = in, .scores = scores};
  atomic_init(&w.next, 0);
  if (threads < 1) threads = 1;
  if (threads > 64) threads = 64;
  pthread_t tid[64];
  int started = 0, failed = 0;
  for (int i = 1; i < threads; i++) {
    if (pthread_create(&tid[started], NULL, score_worker, &w) != 0) break;
    started++;
  }
  if (score_worker(&w)) failed = 1;
  for (int i = 0; i < started; i++) {
    void *ret = NULL;
    pthread_join(tid[i], &ret);
    if (ret) failed = 1;
  }
  return failed ? -1 : 0;
}

/* Is block a ranked before block b: higher score first, ties lower index. */
static int ranks_before(double sa, int a, double sb, int b) {
  if (isnan(sa)) sa = -INFINITY;
  if (isnan(sb)) sb = -INFINITY;
  return sa > sb || (sa == sb && a < b);
}

void st_ref_index_decode_select(const st_ref_index_decode *in, const double *scores, int32_t *topk_idx) {
  const int rows = in->R * in->qlen;
  for (int h = 0; h < in->H; h++)
    for (int row = 0; row < rows; row++) {
      const int r = row / in->qlen, t = row % in->qlen;
      const st_ref_row_plan p = st_ref_index_decode_row_plan(in, in->seq_lens[r], t);
      const double *s = scores + ((int64_t)h * rows + row) * in->max_blocks;
      int32_t *out = topk_idx + ((int64_t)h * rows + row) * in->topk;
      int n = 0;
      for (int j = 0; j < p.lo; j++) out[n++] = j;
      for (int j = p.hi; j < p.nb; j++) out[n++] = j;
      /* Selection by repeated best-of-the-rest: topk <= 64, fine for a reference. */
      while (n < p.want) {
        int best = -1;
        for (int j = p.lo; j < p.hi; j++) {
          int taken = 0;
          for (int i = 0; i < n; i++) taken |= out[i] == j;
          if (!taken && (best < 0 || ranks_before(s[j], j, s[best], best))) best = j;
        }
        out[n++] = best;
      }
      for (; n < in->topk; n++) out[n] = -1;
    }
}

int st_ref_index_decode_verify(const st_ref_index_decode *in, const double *scores, const int32_t *got,
                               int64_t got_stride_head, int64_t got_stride_row, double rel_tol,
                               double *max_violation, char *msg, size_t msg_cap) {
  const int rows = in->R * in->qlen;
  int bad = 0;
  double worst = 0;
  unsigned char *chosen = calloc((size_t)in->max_blocks + 1, 1);
  if (!chosen) {
    snprintf(msg, msg_cap, "out of host memory");
    return 1;
  }
#define FAIL(...)                                                                              \
  {                                                                                            \
    if (!bad) snprintf(msg, msg_cap, __VA_ARGS__);                                             \
    bad++;                                                                                     \
    continue;                                                                                  \
  }
  for (int h = 0; h < in->H; h++)
    for (int row = 0; row < rows; row++) {
      const int r = row / in->qlen, t = row % in->qlen;
      const st_ref_row_plan p = st_ref_index_decode_row_plan(in, in->seq_lens[r], t);
      const double *s = scores + ((int64_t)h * rows + row) * in->max_blocks;
      const int32_t *g = got + h * got_stride_head + row * got_stride_row;
      memset(chosen, 0, (size_t)in->max_blocks + 1);
      int count = 0, invalid = -2, dup = -2;
      for (int i = 0; i < in->topk; i++) {
        if (g[i] == -1) continue;
        if (g[i] < 0 || g[i] >= p.nb) {
          invalid = g[i];
          break;
        }
        if (chosen[g[i]]) dup = g[i];
        chosen[g[i]] = 1;
        count++;
      }
      if (invalid != -2) FAIL("head %d row %d: id %d is not a visible block (0..%d)", h, row, invalid, p.nb - 1)
      if (dup != -2) FAIL("head %d row %d: block %d selected twice", h, row, dup)
      if (count != p.want) FAIL("head %d row %d: %d ids, expected min(topk=%d, nb=%d)=%d", h, row, count, in->topk, p.nb, p.want)
      int missing = -1;
      for (int j = 0; j < p.nb; j++)
        if ((j < p.lo || j >= p.hi) && !chosen[j]) missing = j;
      if (missing >= 0) FAIL("head %d row %d: forced block %d missing", h, row, missing)
      /* No left-out block may beat a chosen one beyond rounding. */
      double scale = 0, min_in = INFINITY, max_out = -INFINITY;
      for (int j = 0; j < p.nb; j++) {
        const double v = isnan(s[j]) ? -INFINITY : s[j];
        if (isfinite(v) && fabs(v) > scale) scale = fabs(v);
        if (j < p.lo || j >= p.hi) continue;
        if (chosen[j] && v < min_in) min_in = v;
        if (!chosen[j] && v > max_out) max_out = v;
      }
      if (min_in == INFINITY || max_out == -INFINITY) continue; /* nothing chosen or nothing left out */
      const double tol = rel_tol * (scale > 0 ? scale : 1.0);
      const double excess = (max_out - min_in - tol) / (scale > 0 ? scale : 1.0);
      if (excess > worst) worst = excess;
      if (max_out > min_in + tol)
        FAIL("head %d row %d: a left-out block scores %.9g, above a chosen one at %.9g (tolerance %.3g)", h, row,
             max_out, min_in, tol)
    }
#undef FAIL
  free(chosen);
  *max_violation = worst;
  return bad;
}
