#include "reference/dsa_index_decode.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference/block_select.h"
#include "reference/dtype.h"

#define HEAD_DIM ST_REF_DSA_HEAD_DIM
/* Tokens of one request one work item scores: large enough that a thread
 * keeps its request's q in cache, small enough to share a short request. */
#define ITEM_TOKENS 256

int st_ref_dsa_index_decode_visible(const st_ref_dsa_index_decode *in, int row) {
  int seq = in->seq_lens[row / in->qlen];
  if (seq > in->max_context) seq = in->max_context; /* the kernels read no further */
  if (seq <= 0) return 0;
  const int p = seq - in->qlen + row % in->qlen;
  return p < 0 ? 0 : p + 1;
}

/* NaN stays NaN (a NaN logit ranks as -inf); negative dots contribute 0. */
static double relu(double x) { return x < 0 ? 0 : x; }

typedef struct work {
  const st_ref_dsa_index_decode *in;
  const double *qd, *wd; /* q and weights widened once: [rows][H][HEAD_DIM], [rows][H] */
  double *logits;
  atomic_long next; /* next (request, token chunk) item */
} work;

/* Token `tok` of request r dequantized into kd[0..HEAD_DIM). */
static void load_token(const st_ref_dsa_index_decode *in, int r, int tok, double *kd) {
  const int32_t page = in->block_table[(int64_t)r * in->bt_cols + tok / in->page_size];
  const int off = tok % in->page_size;
  const uint8_t *base = in->k_pool + (int64_t)page * in->page_stride;
  float scale;
  memcpy(&scale, base + (int64_t)in->page_size * HEAD_DIM + (int64_t)off * 4, sizeof scale);
  for (int d = 0; d < HEAD_DIM; d++)
    kd[d] = (double)st_fp8_e4m3_to_float(base[(int64_t)off * HEAD_DIM + d]) * (double)scale;
}

static void score_item(const work *w, int r, int tok0, double *kd) {
  const st_ref_dsa_index_decode *in = w->in;
  const int H = in->H, qlen = in->qlen;
  const int seen = st_ref_dsa_index_decode_visible(in, r * qlen + qlen - 1); /* the last token sees most */
  const int tok1 = tok0 + ITEM_TOKENS < seen ? tok0 + ITEM_TOKENS : seen;
  for (int tok = tok0; tok < tok1; tok++) {
    load_token(in, r, tok, kd);
    for (int t = 0; t < qlen; t++) {
      const int row = r * qlen + t;
      if (tok >= st_ref_dsa_index_decode_visible(in, row)) continue;
      double logit = 0;
      for (int h = 0; h < H; h++) {
        const double *qv = w->qd + ((int64_t)row * H + h) * HEAD_DIM;
        double dot = 0;
        for (int d = 0; d < HEAD_DIM; d++) dot += qv[d] * kd[d];
        logit += w->wd[(int64_t)row * H + h] * relu(dot);
      }
      w->logits[(int64_t)row * in->max_context + tok] = logit;
    }
  }
}

static void *score_worker(void *arg) {
  work *w = arg;
  const st_ref_dsa_index_decode *in = w->in;
  double kd[HEAD_DIM];
  const long chunks = (in->max_context + ITEM_TOKENS - 1) / ITEM_TOKENS;
  const long total = (long)in->R * chunks;
  for (;;) {
    const long item = atomic_fetch_add(&w->next, 1);
    if (item >= total) break;
    const int r = (int)(item / chunks), tok0 = (int)(item % chunks) * ITEM_TOKENS;
    if (tok0 < st_ref_dsa_index_decode_visible(in, r * in->qlen + in->qlen - 1)) score_item(w, r, tok0, kd);
  }
  return NULL;
}

int st_ref_dsa_index_decode_logits(const st_ref_dsa_index_decode *in, double *logits, int threads) {
  const size_t rows = (size_t)in->R * (size_t)in->qlen;
  for (size_t i = 0; i < rows * (size_t)in->max_context; i++) logits[i] = -INFINITY;
  double *qd = malloc(sizeof(double) * rows * (size_t)in->H * HEAD_DIM);
  double *wd = malloc(sizeof(double) * rows * (size_t)in->H);
  if (!qd || !wd) {
    free(qd);
    free(wd);
    return -1;
  }
  for (size_t i = 0; i < rows * (size_t)in->H * HEAD_DIM; i++) qd[i] = st_fp8_e4m3_to_float(in->q[i]);
  for (size_t i = 0; i < rows * (size_t)in->H; i++) wd[i] = in->weights[i];
  work w = {.in = in, .qd = qd, .wd = wd, .logits = logits};
  atomic_init(&w.next, 0);
  if (threads < 1) threads = 1;
  if (threads > 64) threads = 64;
  pthread_t tid[64];
  int started = 0;
  for (int i = 1; i < threads; i++) {
    if (pthread_create(&tid[started], NULL, score_worker, &w) != 0) break;
    started++;
  }
  score_worker(&w);
  for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
  free(qd);
  free(wd);
  return 0;
}

/* A row's tokens as the block selection's row (reference/block_select.h):
 * each "block" there is one token here, none forced. */
static st_ref_row_plan row_plan(const st_ref_dsa_index_decode *in, int row) {
  const int n = st_ref_dsa_index_decode_visible(in, row);
  return (st_ref_row_plan){.nb = n, .lo = 0, .hi = n, .want = in->topk < n ? in->topk : n};
}

void st_ref_dsa_index_decode_select(const st_ref_dsa_index_decode *in, const double *logits, int32_t *topk_idx) {
  const int rows = in->R * in->qlen;
  for (int row = 0; row < rows; row++) {
    const st_ref_row_plan p = row_plan(in, row);
    st_ref_block_select_row(&p, logits + (int64_t)row * in->max_context, in->topk, topk_idx + (int64_t)row * in->topk);
  }
}

int st_ref_dsa_index_decode_verify(const st_ref_dsa_index_decode *in, const double *logits, const int32_t *got,
                                   int64_t got_stride_row, double rel_tol, double *max_violation, char *msg,
                                   size_t msg_cap) {
  const int rows = in->R * in->qlen;
  int bad = 0;
  double worst = 0;
  unsigned char *chosen = calloc((size_t)in->max_context + 1, 1);
  if (!chosen) {
    snprintf(msg, msg_cap, "out of host memory");
    return 1;
  }
  for (int row = 0; row < rows; row++) {
    const st_ref_row_plan p = row_plan(in, row);
    char why[256];
    double excess = 0;
    const int failed = st_ref_block_verify_row(&p, logits + (int64_t)row * in->max_context, got + row * got_stride_row,
                                               in->topk, rel_tol, chosen, &excess, why, sizeof why);
    if (excess > worst) worst = excess;
    if (!failed) continue;
    /* The shared row check says "block" for what is one token here. */
    if (!bad)
      snprintf(msg, msg_cap, "row %d (request %d, query token %d, %d tokens visible; a block here is a token): %s", row,
               row / in->qlen, row % in->qlen, p.nb, why);
    bad++;
  }
  free(chosen);
  *max_violation = worst;
  return bad;
}
