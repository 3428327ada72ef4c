#include "reference/index_decode.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "reference/block_select.h"
#include "reference/dtype.h"

#define BLOCK_TOKENS 128

static double load_elem(st_dtype dt, const void *base, int64_t i) {
  if (dt == ST_DTYPE_BF16) return st_bf16_to_float(((const uint16_t *)base)[i]);
  return st_fp8_e4m3_to_float(((const uint8_t *)base)[i]);
}

st_ref_row_plan st_ref_index_decode_row_plan(const st_ref_index_decode *in, int seq_len, int t) {
  /* seq_len <= 0 gives pos < 0: a padding row sees nothing. */
  return st_ref_block_plan(seq_len - in->qlen + t, in->max_blocks, in->topk, in->init_blocks, in->local_blocks);
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
    for (int h = 0; h < H; h++) scores[((int64_t)h * rows + r * qlen + t) * in->max_blocks + j] = best[t * H + h];
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

void st_ref_index_decode_select(const st_ref_index_decode *in, const double *scores, int32_t *topk_idx) {
  const int rows = in->R * in->qlen;
  for (int h = 0; h < in->H; h++)
    for (int row = 0; row < rows; row++) {
      const st_ref_row_plan p = st_ref_index_decode_row_plan(in, in->seq_lens[row / in->qlen], row % in->qlen);
      const int64_t at = (int64_t)h * rows + row;
      st_ref_block_select_row(&p, scores + at * in->max_blocks, in->topk, topk_idx + at * in->topk);
    }
}

int st_ref_index_decode_verify(const st_ref_index_decode *in, const double *scores, const int32_t *got,
                               int64_t got_stride_head, int64_t got_stride_row, double rel_tol, double *max_violation,
                               char *msg, size_t msg_cap) {
  const int rows = in->R * in->qlen;
  int bad = 0;
  double worst = 0;
  unsigned char *chosen = calloc((size_t)in->max_blocks + 1, 1);
  if (!chosen) {
    snprintf(msg, msg_cap, "out of host memory");
    return 1;
  }
  for (int h = 0; h < in->H; h++)
    for (int row = 0; row < rows; row++) {
      const st_ref_row_plan p = st_ref_index_decode_row_plan(in, in->seq_lens[row / in->qlen], row % in->qlen);
      const double *s = scores + ((int64_t)h * rows + row) * in->max_blocks;
      const int32_t *g = got + h * got_stride_head + row * got_stride_row;
      char why[256];
      double excess = 0;
      const int failed = st_ref_block_verify_row(&p, s, g, in->topk, rel_tol, chosen, &excess, why, sizeof why);
      if (excess > worst) worst = excess;
      if (!failed) continue;
      if (!bad) snprintf(msg, msg_cap, "head %d row %d: %s", h, row, why);
      bad++;
    }
  free(chosen);
  *max_violation = worst;
  return bad;
}
