#include "reference/index_prefill.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "reference/block_select.h"
#include "reference/dtype.h"

#define BLOCK_TOKENS 128
#define TILE_TOKENS 32 /* query tokens per work item */
#define CHUNK 8        /* key positions whose dot products one pass keeps in registers */
#define MAX_THREADS 64

int st_ref_index_prefill_total_q(const st_ref_index_prefill *in) { return in->cu_seqlens_q[in->R]; }

int st_ref_index_prefill_position(const st_ref_index_prefill *in, int i, int *request) {
  if (request) *request = -1;
  if (i < 0 || i >= st_ref_index_prefill_total_q(in)) return -1;
  /* The last request starting at or before i; cu[R] > i ends its range. */
  int lo = 0, hi = in->R - 1;
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (in->cu_seqlens_q[mid] <= i)
      lo = mid;
    else
      hi = mid - 1;
  }
  if (request) *request = lo;
  const int q_len = in->cu_seqlens_q[lo + 1] - in->cu_seqlens_q[lo];
  return in->seq_lens[lo] - q_len + (i - in->cu_seqlens_q[lo]);
}

/* ---- index_score --------------------------------------------------------- */

/* Query tokens [i0, i1) of request r. */
typedef struct item {
  int r, i0, i1;
  int64_t cost; /* tokens * blocks of the last token: biggest first */
} item;

typedef struct score_work {
  const st_ref_index_prefill *in;
  double *score;
  const item *items;
  long n_items;
  double fp8[256]; /* e4m3 code -> value */
  atomic_long next;
} score_work;

/* A thread's buffers: the item's query vectors qd [tokens * H][D], one K block
 * transposed to kt [D][128] (position fastest, so a pass over d updates CHUNK
 * independent dot products), and per query vector the running max and the
 * number of positions of the block it sees. */
typedef struct scratch {
  double *qd, *kt, *best;
  int *lim;
} scratch;

static void to_double(const score_work *w, const void *base, int64_t off, int n, double *out, int64_t out_stride) {
  if (w->in->dtype == ST_DTYPE_BF16) {
    const uint16_t *v = (const uint16_t *)base + off;
    for (int d = 0; d < n; d++) out[d * out_stride] = st_bf16_to_float(v[d]);
    return;
  }
  const uint8_t *v = (const uint8_t *)base + off;
  for (int d = 0; d < n; d++) out[d * out_stride] = w->fp8[v[d]];
}

/* Block `page` into kt: positions [0, valid) converted, the rest zero (their
 * dot products are computed by whole CHUNKs but never seen). */
static void load_block(const score_work *w, int64_t page, int valid, double *kt) {
  const int D = w->in->D;
  for (int tok = 0; tok < valid; tok++)
    to_double(w, w->in->k_pool, (page * BLOCK_TOKENS + tok) * D, D, kt + tok, BLOCK_TOKENS);
  for (int d = 0; d < D; d++)
    for (int tok = valid; tok < BLOCK_TOKENS; tok++) kt[(int64_t)d * BLOCK_TOKENS + tok] = 0;
}

/* Dot products of two query vectors with the CHUNK keys kt[.][p0 ..]: the
 * sums run in order of d, as a plain loop would (2 * CHUNK accumulators keep
 * the FP units busy without reassociating anything). */
static void chunk_dots2(const double *q0, const double *q1, const double *kt, int D, double *a0, double *a1) {
  double s0[CHUNK] = {0}, s1[CHUNK] = {0};
  for (int d = 0; d < D; d++) {
    const double *k = kt + (int64_t)d * BLOCK_TOKENS;
    const double x0 = q0[d], x1 = q1[d];
#pragma GCC unroll 8 /* = CHUNK: the sums then live in registers, not on the stack (2x at -O2) */
    for (int p = 0; p < CHUNK; p++) {
      s0[p] += x0 * k[p];
      s1[p] += x1 * k[p];
    }
  }
  for (int p = 0; p < CHUNK; p++) {
    a0[p] = s0[p];
    a1[p] = s1[p];
  }
}

static void take_max(double *best, const double *a, int p0, int lim) {
  for (int p = 0; p < CHUNK && p0 + p < lim; p++)
    if (a[p] > *best) *best = a[p]; /* NaN never wins: -inf if all are */
}

/* Every visible block's score of every head of the item's tokens. */
static void score_item(const score_work *w, const item *it, scratch *sc) {
  const st_ref_index_prefill *in = w->in;
  const int H = in->H, D = in->D, total_q = st_ref_index_prefill_total_q(in);
  const int cu = in->cu_seqlens_q[it->r];
  const int base = in->seq_lens[it->r] - (in->cu_seqlens_q[it->r + 1] - cu); /* p_i = base + i - cu */
  const int p_first = base + it->i0 - cu, p_last = base + it->i1 - 1 - cu;
  const int nv = (it->i1 - it->i0) * H;
  if (p_last < 0) return; /* the rows stay -inf */
  to_double(w, in->q, (int64_t)it->i0 * H * D, nv * D, sc->qd, 1);
  for (int j = 0; j <= p_last / BLOCK_TOKENS; j++) {
    const int start = j * BLOCK_TOKENS, valid = p_last - start + 1 < BLOCK_TOKENS ? p_last - start + 1 : BLOCK_TOKENS;
    load_block(w, in->block_table[(int64_t)it->r * in->bt_cols + j], valid, sc->kt);
    const int v0 = (start > p_first ? start - p_first : 0) * H; /* first vector seeing block j */
    for (int v = v0; v < nv; v++) {
      const int seen = p_first + v / H - start + 1;
      sc->lim[v] = seen < BLOCK_TOKENS ? seen : BLOCK_TOKENS;
      sc->best[v] = -INFINITY;
    }
    for (int p0 = 0; p0 < valid; p0 += CHUNK)
      for (int v = v0; v < nv; v += 2) {
        const int v1 = v + 1 < nv ? v + 1 : v;
        double a0[CHUNK], a1[CHUNK];
        chunk_dots2(sc->qd + (int64_t)v * D, sc->qd + (int64_t)v1 * D, sc->kt + p0, D, a0, a1);
        take_max(&sc->best[v], a0, p0, sc->lim[v]);
        take_max(&sc->best[v1], a1, p0, sc->lim[v1]);
      }
    for (int v = v0; v < nv; v++) {
      const int64_t row = (int64_t)(v % H) * total_q + it->i0 + v / H;
      w->score[row * in->max_blocks + j] = in->scale * sc->best[v];
    }
  }
}

static void *score_worker(void *arg) {
  score_work *w = arg;
  const st_ref_index_prefill *in = w->in;
  const size_t nv = (size_t)TILE_TOKENS * (size_t)in->H;
  scratch sc = {.qd = malloc(sizeof(double) * nv * (size_t)in->D),
                .kt = malloc(sizeof(double) * (size_t)in->D * BLOCK_TOKENS),
                .best = malloc(sizeof(double) * nv),
                .lim = malloc(sizeof(int) * nv)};
  void *ret = (void *)1;
  if (!sc.qd || !sc.kt || !sc.best || !sc.lim) goto cleanup;
  for (;;) {
    const long k = atomic_fetch_add(&w->next, 1);
    if (k >= w->n_items) break;
    score_item(w, &w->items[k], &sc);
  }
  ret = NULL;
cleanup:
  free(sc.qd);
  free(sc.kt);
  free(sc.best);
  free(sc.lim);
  return ret;
}

/* 0 if the batch is consistent enough to score without reading out of bounds. */
static int check_batch(const st_ref_index_prefill *in) {
  if (in->dtype != ST_DTYPE_BF16 && in->dtype != ST_DTYPE_FP8_E4M3) return -1;
  if (in->R < 0 || in->H < 1 || in->D < 1 || in->max_blocks < 0 || !(in->scale > 0) || isinf(in->scale)) return -1;
  if (in->cu_seqlens_q[0] != 0) return -1;
  for (int r = 0; r < in->R; r++) {
    const int q_len = in->cu_seqlens_q[r + 1] - in->cu_seqlens_q[r], seq = in->seq_lens[r];
    if (q_len < 0) return -1;
    if (q_len == 0 || seq <= 0) continue;
    const int nb = (seq - 1) / BLOCK_TOKENS + 1; /* the last token's */
    if (nb > in->max_blocks || nb > in->bt_cols) return -1;
    for (int j = 0; j < nb; j++) {
      const int32_t page = in->block_table[(int64_t)r * in->bt_cols + j];
      if (page < 0 || page >= in->pages) return -1;
    }
  }
  return 0;
}

static int by_cost_descending(const void *a, const void *b) {
  const int64_t ca = ((const item *)a)->cost, cb = ((const item *)b)->cost;
  return (ca < cb) - (ca > cb);
}

/* The work items, biggest first so that the last ones to finish are short. */
static item *make_items(const st_ref_index_prefill *in, long *n) {
  const int total_q = st_ref_index_prefill_total_q(in);
  item *items = malloc(sizeof(item) * (size_t)(total_q / TILE_TOKENS + in->R + 1));
  if (!items) return NULL;
  *n = 0;
  for (int r = 0; r < in->R; r++) {
    const int cu0 = in->cu_seqlens_q[r], cu1 = in->cu_seqlens_q[r + 1];
    const int base = in->seq_lens[r] - (cu1 - cu0);
    for (int i0 = cu0; i0 < cu1; i0 += TILE_TOKENS) {
      const int i1 = i0 + TILE_TOKENS < cu1 ? i0 + TILE_TOKENS : cu1, p_last = base + i1 - 1 - cu0;
      if (p_last < 0) continue;
      items[(*n)++] = (item){r, i0, i1, (int64_t)(i1 - i0) * (p_last / BLOCK_TOKENS + 1)};
    }
  }
  qsort(items, (size_t)*n, sizeof(item), by_cost_descending);
  return items;
}

int st_ref_index_score(const st_ref_index_prefill *in, double *score, int threads) {
  if (check_batch(in) != 0) return -1;
  const size_t n = (size_t)in->H * (size_t)st_ref_index_prefill_total_q(in) * (size_t)in->max_blocks;
  for (size_t i = 0; i < n; i++) score[i] = -INFINITY;
  score_work *w = malloc(sizeof(score_work)); /* holds an atomic: not copied */
  item *items = w ? make_items(in, &w->n_items) : NULL;
  int failed = 1;
  if (!items) goto cleanup;
  w->in = in;
  w->score = score;
  w->items = items;
  for (int c = 0; c < 256; c++) w->fp8[c] = st_fp8_e4m3_to_float((uint8_t)c);
  atomic_init(&w->next, 0);
  if (threads < 1) threads = 1;
  if (threads > MAX_THREADS) threads = MAX_THREADS;
  pthread_t tid[MAX_THREADS];
  int started = 0;
  for (int i = 1; i < threads && i < w->n_items; i++) {
    if (pthread_create(&tid[started], NULL, score_worker, w) != 0) break;
    started++;
  }
  failed = score_worker(w) != NULL;
  for (int i = 0; i < started; i++) {
    void *ret = NULL;
    pthread_join(tid[i], &ret);
    if (ret) failed = 1;
  }
cleanup:
  free(items);
  free(w);
  return failed ? -1 : 0;
}

/* ---- index_topk ---------------------------------------------------------- */

static st_ref_row_plan plan_of(const st_ref_index_prefill *in, int pos) {
  return st_ref_block_plan(pos, in->max_blocks, in->topk, in->init_blocks, in->local_blocks);
}

void st_ref_index_topk(const st_ref_index_prefill *in, const double *score, int32_t *topk_idx) {
  const int total_q = st_ref_index_prefill_total_q(in);
  for (int r = 0; r < in->R; r++) {
    const int cu0 = in->cu_seqlens_q[r], cu1 = in->cu_seqlens_q[r + 1];
    for (int i = cu0; i < cu1; i++) {
      const st_ref_row_plan p = plan_of(in, in->seq_lens[r] - (cu1 - cu0) + (i - cu0));
      for (int h = 0; h < in->H; h++) {
        const int64_t row = (int64_t)h * total_q + i;
        st_ref_block_select_row(&p, score + row * in->max_blocks, in->topk, topk_idx + row * in->topk);
      }
    }
  }
}

/* ---- verifiers ------------------------------------------------------------- */

/* Does a kernel's fp32 score pass against the reference? *ratio gets
 * |got - ref| / tol for a finite ref, +inf for a failing non-finite one. */
static int score_passes(double ref, float got, double atol, double rtol, double *ratio) {
  *ratio = 0;
  if (isinf(ref) && ref < 0 && (isnan(got) || got == ref)) return 1; /* NaN counts as -inf */
  if (!isfinite(ref) || fabs(ref) > 3.4028234663852886e38) {
    /* +inf, or finite beyond fp32: the same-signed infinity. NaN ref: nothing matches. */
    if (!isnan(ref) && isinf(got) && (got > 0) == (ref > 0)) return 1;
    *ratio = INFINITY;
    return 0;
  }
  const double tol = atol + rtol * fabs(ref), err = fabs((double)got - ref);
  *ratio = isnan(got) ? INFINITY : err / tol;
  return err <= tol; /* false for NaN */
}

int st_ref_index_score_verify(const st_ref_index_prefill *in, const double *ref, const float *got,
                              int64_t got_stride_head, int64_t got_stride_row, double atol, double rtol,
                              double *max_err, char *msg, size_t cap) {
  const int total_q = st_ref_index_prefill_total_q(in);
  int bad = 0;
  double worst = 0;
  for (int i = 0; i < total_q; i++) {
    const int pos = st_ref_index_prefill_position(in, i, NULL);
    const int nb = plan_of(in, pos).nb;
    for (int h = 0; h < in->H; h++) {
      const double *s = ref + ((int64_t)h * total_q + i) * in->max_blocks;
      const float *g = got + h * got_stride_head + i * got_stride_row;
      for (int j = 0; j < nb; j++) {
        double ratio = 0;
        const int ok = score_passes(s[j], g[j], atol, rtol, &ratio);
        if (ratio > worst) worst = ratio;
        if (ok) continue;
        if (!bad)
          snprintf(msg, cap,
                   "head %d token %d (position %d) block %d: score %.9g, reference %.9g (atol %.3g, rtol %.3g)", h, i,
                   pos, j, (double)g[j], s[j], atol, rtol);
        bad++;
      }
    }
  }
  *max_err = worst;
  return bad;
}

int st_ref_index_topk_verify(const st_ref_index_prefill *in, const double *score, const int32_t *got,
                             int64_t got_stride_head, int64_t got_stride_row, double rel_tol, double *max_violation,
                             char *msg, size_t cap) {
  const int total_q = st_ref_index_prefill_total_q(in);
  unsigned char *chosen = malloc((size_t)in->max_blocks + 1);
  if (!chosen) {
    snprintf(msg, cap, "out of host memory");
    return 1;
  }
  int bad = 0;
  double worst = 0;
  for (int i = 0; i < total_q; i++) {
    int r = -1;
    const int pos = st_ref_index_prefill_position(in, i, &r);
    const st_ref_row_plan p = plan_of(in, pos);
    for (int h = 0; h < in->H; h++) {
      const double *s = score + ((int64_t)h * total_q + i) * in->max_blocks;
      const int32_t *g = got + h * got_stride_head + i * got_stride_row;
      char why[256];
      double excess = 0;
      const int failed = st_ref_block_verify_row(&p, s, g, in->topk, rel_tol, chosen, &excess, why, sizeof why);
      if (excess > worst) worst = excess;
      if (!failed) continue;
      if (!bad) snprintf(msg, cap, "head %d token %d (request %d, position %d): %s", h, i, r, pos, why);
      bad++;
    }
  }
  free(chosen);
  *max_violation = worst;
  return bad;
}
