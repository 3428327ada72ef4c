#include "reference/sparse_attn.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference/dtype.h"

#define BLOCK_TOKENS 128
#define MAX_THREADS 64
/* Query rows per work item: one request's consecutive rows, which mostly
 * select the same blocks, run on one thread and share its converted blocks. */
#define SPAN_ROWS 32
#define KEY_LANES 16            /* keys scored per pass over d: independent add chains */
#define DIM_LANES 16            /* elements of o accumulated per pass over the keys */
#define CACHE_BYTES (16u << 20) /* per-thread bound on converted K/V blocks */
#define MAX_CACHE_BLOCKS 64     /* and on their count (topk's range is 1..64) */
/* Padding, in doubles, of the rows of a converted block: with rows of 1 KiB
 * (128 keys, or D = 128) the strided walks over them would fall on 4 of the
 * 64 sets of L1 and thrash it. */
#define ROW_PAD 8
#define KT_LD (BLOCK_TOKENS + ROW_PAD) /* kt: doubles from one d to the next */
/* Heads per verify that may get fp32_slack: a correct kernel needs it for a
 * few at most; a wrong one fails everywhere and must not cost D x keys for
 * each of its heads. */
#define SLACK_HEADS 256

/* ---- the shape: rows, requests, positions ------------------------------ */

static int bad_shape(char *msg, size_t cap, const char *fmt, ...) {
  if (cap) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
  }
  return 0;
}

/* 1 if the shape can be computed, else 0 with the reason in msg. */
static int shape_ok(const st_ref_sparse_attn *in, char *msg, size_t cap) {
  if (in->Hkv < 1) return bad_shape(msg, cap, "Hkv=%d is below 1", in->Hkv);
  if (in->Hq < 1 || in->Hq % in->Hkv != 0)
    return bad_shape(msg, cap, "Hq=%d is not a positive multiple of Hkv=%d", in->Hq, in->Hkv);
  if (in->D < 1) return bad_shape(msg, cap, "D=%d is below 1", in->D);
  if (in->topk < 0) return bad_shape(msg, cap, "topk=%d is negative", in->topk);
  if (in->R < 0 || in->total_q < 0) return bad_shape(msg, cap, "R=%d or total_q=%d is negative", in->R, in->total_q);
  const int32_t *cu = in->cu_seqlens_q;
  if (!cu) {
    if (in->R > 0 ? in->total_q % in->R == 0 : in->total_q == 0) return 1;
    return bad_shape(msg, cap, "total_q=%d is not a multiple of R=%d (cu_seqlens_q NULL)", in->total_q, in->R);
  }
  if (cu[0] != 0) return bad_shape(msg, cap, "cu_seqlens_q[0]=%d is not 0", (int)cu[0]);
  for (int r = 0; r < in->R; r++)
    if (cu[r + 1] < cu[r])
      return bad_shape(msg, cap, "cu_seqlens_q[%d]=%d is below cu_seqlens_q[%d]=%d", r + 1, (int)cu[r + 1], r,
                       (int)cu[r]);
  if (cu[in->R] != in->total_q)
    return bad_shape(msg, cap, "cu_seqlens_q[%d]=%d is not total_q=%d", in->R, (int)cu[in->R], in->total_q);
  return 1;
}

/* First query row of request r (r = R gives total_q). */
static int first_row(const st_ref_sparse_attn *in, int r) {
  return in->cu_seqlens_q ? in->cu_seqlens_q[r] : r * (in->total_q / in->R);
}

/* Absolute position of row `row` of request r; < 0 (a request with fewer
 * tokens than query rows) means it sees no key. */
static int position(const st_ref_sparse_attn *in, int r, int row) {
  const int first = first_row(in, r), q_len = first_row(in, r + 1) - first;
  return in->seq_lens[r] - q_len + (row - first);
}

/* Keys a topk entry j contributes to a query at position p: 0 for -1, for
 * blocks past the query's own (or past block_table, which valid input never
 * lists), else the block's positions <= p. */
static int visible_tokens(const st_ref_sparse_attn *in, int p, int32_t j) {
  if (j < 0 || p < 0 || j > p / BLOCK_TOKENS || j >= in->bt_cols) return 0;
  const int n = p - j * BLOCK_TOKENS + 1;
  return n < BLOCK_TOKENS ? n : BLOCK_TOKENS;
}

static const int32_t *topk_row(const st_ref_sparse_attn *in, int row, int g) {
  return in->topk_idx + ((int64_t)g * in->total_q + row) * in->topk;
}

/* ---- compute ------------------------------------------------------------ */

/* A work item's rows: row0 .. row0+rows-1, all of request r. */
typedef struct span {
  int r, row0, rows;
} span;

typedef struct work {
  const st_ref_sparse_attn *in;
  double *o, *lse;
  span *spans;
  long nspans;
  int cache_blocks;
  double fp8[256];  /* e4m3 code -> value: decoding by ldexp per element is the slow part otherwise */
  atomic_long next; /* next (span, kv head) item */
} work;

/* One (page, kv head) block of both caches converted to double: rows
 * 0..rows-1, converted on demand (a query's own block grows by one row per
 * following query). K is stored transposed so that the scores of
 * consecutive keys are independent, vectorizable sums over d. */
typedef struct cblock {
  int64_t page;
  int g, rows;
  long stamp; /* the last query row (thread clock) that used it; -1 = empty */
  double *kt; /* [D][KT_LD], keys 0..127 of each d */
  double *v;  /* [128][D + ROW_PAD] */
} cblock;

/* One thread's buffers: the converted blocks, and each q head's running
 * softmax state (max m, sum l of exp(score - m), acc = sum of exp(score -
 * m) * v) for the G q heads of the current (row, kv head). */
typedef struct scratch {
  double *q, *acc; /* [G][D] */
  double *m, *l;   /* [G] */
  double *s;       /* [G][128] scores, then weights */
  cblock blocks[MAX_CACHE_BLOCKS];
  int nblocks;
  long clock;  /* query rows started */
  double *mem; /* the one allocation all the doubles live in */
} scratch;

static int scratch_init(scratch *sc, int G, int D, int nblocks) {
  const size_t gd = (size_t)G * (size_t)D, kd = (size_t)D * KT_LD, vd = (size_t)BLOCK_TOKENS * (size_t)(D + ROW_PAD);
  if (nblocks < 1 || nblocks > MAX_CACHE_BLOCKS) return -1; /* cache_blocks gives 1..MAX_CACHE_BLOCKS */
  sc->mem = malloc(sizeof(double) * (2 * gd + 2 * (size_t)G + (size_t)G * BLOCK_TOKENS + (kd + vd) * (size_t)nblocks));
  if (!sc->mem) return -1;
  sc->q = sc->mem;
  sc->acc = sc->q + gd;
  sc->m = sc->acc + gd;
  sc->l = sc->m + G;
  sc->s = sc->l + G;
  double *at = sc->s + (size_t)G * BLOCK_TOKENS;
  for (int b = 0; b < nblocks; b++, at += kd + vd)
    sc->blocks[b] = (cblock){.page = -1, .g = -1, .rows = 0, .stamp = -1, .kt = at, .v = at + kd};
  sc->nblocks = nblocks;
  sc->clock = 0;
  return 0;
}

static double bf16_value(uint16_t v) {
  const uint32_t u = (uint32_t)v << 16; /* st_bf16_to_float, inlined for the hot loop */
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* The fp8 scale of token slot t of (page, kv head g) in one cache, by the
 * scale mode: 1, the scalar, or the per-token array. */
static double fp8_scale(const st_ref_sparse_attn *in, float scalar, const float *scales, const int64_t *sstride,
                        int64_t page, int g, int t) {
  if (in->scale_mode == ST_KV_SCALE_SCALAR) return scalar;
  if (in->scale_mode == ST_KV_SCALE_TENSOR) return scales[page * sstride[0] + g * sstride[1] + t * sstride[2]];
  return 1.0;
}

/* Dequantizes token rows from..to-1 of (page, kv head g) of one cache into
 * dst, element (i, d) at dst[i * si + d * sd]. */
static void convert_rows(const work *w, const void *cache, const int64_t *stride, float scalar, const float *scales,
                         const int64_t *sstride, int64_t page, int g, int from, int to, double *dst, size_t si,
                         size_t sd) {
  const st_ref_sparse_attn *in = w->in;
  const int D = in->D;
  const int64_t base = page * stride[0] + g * stride[1];
  for (int i = from; i < to; i++) {
    const int64_t at = base + i * stride[2];
    double *row = dst + (size_t)i * si;
    if (in->kv_dtype == ST_DTYPE_BF16) {
      for (int d = 0; d < D; d++) row[d * sd] = bf16_value(((const uint16_t *)cache)[at + d]);
      continue;
    }
    const double scale = fp8_scale(in, scalar, scales, sstride, page, g, i);
    for (int d = 0; d < D; d++) row[d * sd] = w->fp8[((const uint8_t *)cache)[at + d]] * scale;
  }
}

static cblock *find_block(scratch *sc, int64_t page, int g) {
  for (int b = 0; b < sc->nblocks; b++)
    if (sc->blocks[b].page == page && sc->blocks[b].g == g) return &sc->blocks[b];
  return NULL;
}

/* Marks the cached blocks the row about to start will use, so that loading
 * its other blocks evicts none of them (when they all fit). */
static void pin_row_blocks(const st_ref_sparse_attn *in, scratch *sc, int r, int p, const int32_t *idx, int g) {
  for (int e = 0; e < in->topk; e++) {
    if (visible_tokens(in, p, idx[e]) == 0) continue;
    cblock *b = find_block(sc, in->block_table[(int64_t)r * in->bt_cols + idx[e]], g);
    if (b) b->stamp = sc->clock;
  }
}

/* The first n rows of (page, g), converted: from the thread's cache, else
 * into the least recently used block (empty ones first, pinned ones last). */
static const cblock *block_rows(const work *w, scratch *sc, int64_t page, int g, int n) {
  const st_ref_sparse_attn *in = w->in;
  cblock *b = find_block(sc, page, g);
  if (!b) {
    b = &sc->blocks[0];
    for (int i = 1; i < sc->nblocks; i++)
      if (sc->blocks[i].stamp < b->stamp) b = &sc->blocks[i];
    b->page = page;
    b->g = g;
    b->rows = 0;
  }
  b->stamp = sc->clock;
  if (b->rows < n) {
    convert_rows(w, in->k_cache, in->k_stride, in->k_scale, in->k_scales, in->ks_stride, page, g, b->rows, n, b->kt, 1,
                 KT_LD);
    convert_rows(w, in->v_cache, in->v_stride, in->v_scale, in->v_scales, in->vs_stride, page, g, b->rows, n, b->v,
                 (size_t)in->D + ROW_PAD, 1);
    b->rows = n;
  }
  return b;
}

/* s[h][i] = dot(q_h, k_i) for the G heads and the first n keys, each the
 * plain left-to-right sum over d. KEY_LANES keys at a time, whose sums are
 * independent chains in vector registers (the keys are contiguous in kt),
 * for every head before the next keys: their K columns stay in L1. */
static void scores(const double *q, int G, const double *kt, int n, int D, double *s) {
  int i = 0;
  for (; i + KEY_LANES <= n; i += KEY_LANES)
    for (int h = 0; h < G; h++) {
      const double *qh = q + (size_t)h * D;
      double acc[KEY_LANES] = {0};
      for (int d = 0; d < D; d++) {
        const double qd = qh[d], *k = kt + (size_t)d * KT_LD + i;
#pragma GCC unroll 16
        for (int j = 0; j < KEY_LANES; j++) acc[j] += qd * k[j];
      }
      memcpy(s + (size_t)h * BLOCK_TOKENS + i, acc, sizeof acc);
    }
  for (; i < n; i++)
    for (int h = 0; h < G; h++) {
      const double *qh = q + (size_t)h * D;
      double acc = 0;
      for (int d = 0; d < D; d++) acc += qh[d] * kt[(size_t)d * KT_LD + i];
      s[(size_t)h * BLOCK_TOKENS + i] = acc;
    }
}

/* acc_h[d] += p_h[i] * v_i[d] for i = 0..n-1 in that order, for the heads
 * with a finite or +inf max m_h (-inf: no key scored above -inf yet, there
 * is no weight to add); DIM_LANES elements of acc_h held in registers across the keys, for
 * every head before the next elements: their V columns stay in L1. */
static void weigh_values(const double *p, const double *m, int G, const double *v, int n, int D, double *acc) {
  int d0 = 0;
  for (; d0 + DIM_LANES <= D; d0 += DIM_LANES)
    for (int h = 0; h < G; h++) {
      if (m[h] == -INFINITY) continue;
      const double *ph = p + (size_t)h * BLOCK_TOKENS;
      double a[DIM_LANES];
      memcpy(a, acc + (size_t)h * D + d0, sizeof a);
      for (int i = 0; i < n; i++) {
        const double pi = ph[i], *vi = v + (size_t)i * (D + ROW_PAD) + d0;
#pragma GCC unroll 16
        for (int j = 0; j < DIM_LANES; j++) a[j] += pi * vi[j];
      }
      memcpy(acc + (size_t)h * D + d0, a, sizeof a);
    }
  for (; d0 < D; d0++)
    for (int h = 0; h < G; h++) {
      if (m[h] == -INFINITY) continue;
      const double *ph = p + (size_t)h * BLOCK_TOKENS;
      double a = acc[(size_t)h * D + d0];
      for (int i = 0; i < n; i++) a += ph[i] * v[(size_t)i * (D + ROW_PAD) + d0];
      acc[(size_t)h * D + d0] = a;
    }
}

/* Folds the first n keys of block b into every head's softmax state. The
 * state is rescaled to the new running max, so no exp ever overflows. */
static void attend_block(const st_ref_sparse_attn *in, scratch *sc, const cblock *b, int n) {
  const int G = in->Hq / in->Hkv, D = in->D;
  scores(sc->q, G, b->kt, n, D, sc->s);
  for (int h = 0; h < G; h++) {
    double best = -INFINITY, *s = sc->s + (size_t)h * BLOCK_TOKENS;
    for (int i = 0; i < n; i++) {
      s[i] *= in->sm_scale;
      if (s[i] > best) best = s[i];
    }
    const double m = sc->m[h] > best ? sc->m[h] : best;
    if (m == -INFINITY) continue; /* only -inf scores (inf inputs): no weight to add */
    if (m != sc->m[h]) {
      const double shrink = exp(sc->m[h] - m);
      double *acc = sc->acc + (size_t)h * D;
      sc->l[h] *= shrink;
      for (int d = 0; d < D; d++) acc[d] *= shrink;
      sc->m[h] = m;
    }
    for (int i = 0; i < n; i++) {
      s[i] = exp(s[i] - m);
      sc->l[h] += s[i];
    }
  }
  weigh_values(sc->s, sc->m, G, b->v, n, D, sc->acc);
}

/* Query row `row` (of request r) for kv head g: its G q heads g*G ..
 * g*G+G-1. */
static void attend_row(const work *w, scratch *sc, int r, int row, int g) {
  const st_ref_sparse_attn *in = w->in;
  const int G = in->Hq / in->Hkv, D = in->D, p = position(in, r, row);
  const size_t first = ((size_t)row * in->Hq + (size_t)g * G) * D; /* q and o offset of head g*G */
  for (size_t i = 0; i < (size_t)G * D; i++) {
    sc->q[i] = st_bf16_to_float(in->q[first + i]);
    sc->acc[i] = 0;
  }
  for (int h = 0; h < G; h++) {
    sc->m[h] = -INFINITY;
    sc->l[h] = 0;
  }
  const int32_t *idx = topk_row(in, row, g);
  sc->clock++;
  pin_row_blocks(in, sc, r, p, idx, g);
  for (int e = 0; e < in->topk; e++) {
    const int n = visible_tokens(in, p, idx[e]);
    if (n == 0) continue;
    const int64_t page = in->block_table[(int64_t)r * in->bt_cols + idx[e]];
    attend_block(in, sc, block_rows(w, sc, page, g, n), n);
  }
  for (int h = 0; h < G; h++) {
    const int has_keys = sc->l[h] > 0;
    double *oh = w->o + first + (size_t)h * D;
    for (int d = 0; d < D; d++) oh[d] = has_keys ? sc->acc[(size_t)h * D + d] / sc->l[h] : 0.0;
    if (w->lse) w->lse[(size_t)row * in->Hq + (size_t)g * G + h] = has_keys ? sc->m[h] + log(sc->l[h]) : -INFINITY;
  }
}

static void *attend_worker(void *arg) {
  work *w = arg;
  const st_ref_sparse_attn *in = w->in;
  scratch sc;
  if (scratch_init(&sc, in->Hq / in->Hkv, in->D, w->cache_blocks) != 0) return (void *)1;
  const long total = w->nspans * in->Hkv;
  for (;;) {
    const long item = atomic_fetch_add(&w->next, 1);
    if (item >= total) break;
    const span *sp = &w->spans[item / in->Hkv];
    for (int row = sp->row0; row < sp->row0 + sp->rows; row++) attend_row(w, &sc, sp->r, row, (int)(item % in->Hkv));
  }
  free(sc.mem);
  return NULL;
}

/* Cuts every request's rows into spans of up to SPAN_ROWS; NULL if out of
 * memory. */
static span *make_spans(const st_ref_sparse_attn *in, long *count) {
  long n = 0;
  for (int r = 0; r < in->R; r++) n += (first_row(in, r + 1) - first_row(in, r) + SPAN_ROWS - 1) / SPAN_ROWS;
  span *s = malloc(sizeof *s * (size_t)(n > 0 ? n : 1));
  if (!s) return NULL;
  *count = 0;
  for (int r = 0; r < in->R; r++)
    for (int row = first_row(in, r); row < first_row(in, r + 1); row += SPAN_ROWS) {
      const int left = first_row(in, r + 1) - row;
      s[(*count)++] = (span){r, row, left < SPAN_ROWS ? left : SPAN_ROWS};
    }
  return s;
}

/* Converted blocks each thread keeps: a row's distinct blocks (<= topk)
 * where they fit in CACHE_BYTES and MAX_CACHE_BLOCKS, so a following row
 * selecting the same ones converts nothing but its own block's new row; one
 * where no span has a following row (qlen 1 decode), as a bigger cache
 * would only be colder. */
static int cache_blocks(const st_ref_sparse_attn *in, const span *spans, long nspans) {
  int longest = 0;
  for (long i = 0; i < nspans; i++)
    if (spans[i].rows > longest) longest = spans[i].rows;
  const size_t block_bytes = sizeof(double) * ((size_t)in->D * KT_LD + BLOCK_TOKENS * (size_t)(in->D + ROW_PAD));
  size_t n = CACHE_BYTES / block_bytes;
  if (n > (size_t)in->topk) n = (size_t)in->topk;
  if (n > MAX_CACHE_BLOCKS) n = MAX_CACHE_BLOCKS;
  return n > 0 && longest > 1 ? (int)n : 1;
}

int st_ref_sparse_attn_compute(const st_ref_sparse_attn *in, double *o, double *lse, int threads) {
  if (!shape_ok(in, NULL, 0)) return -1;
  work *w = malloc(sizeof *w);
  if (!w) return -1;
  *w = (work){.in = in, .o = o, .lse = lse};
  w->spans = make_spans(in, &w->nspans);
  if (!w->spans) {
    free(w);
    return -1;
  }
  w->cache_blocks = cache_blocks(in, w->spans, w->nspans);
  for (int c = 0; c < 256; c++) w->fp8[c] = st_fp8_e4m3_to_float((uint8_t)c);
  atomic_init(&w->next, 0);
  if (threads < 1) threads = 1;
  if (threads > MAX_THREADS) threads = MAX_THREADS;
  pthread_t tid[MAX_THREADS];
  int started = 0, failed = 0;
  for (int i = 1; i < threads; i++) {
    if (pthread_create(&tid[started], NULL, attend_worker, w) != 0) break;
    started++;
  }
  if (attend_worker(w)) failed = 1;
  for (int i = 0; i < started; i++) {
    void *ret = NULL;
    pthread_join(tid[i], &ret);
    if (ret) failed = 1;
  }
  free(w->spans);
  free(w);
  return failed ? -1 : 0;
}

/* ---- verification ------------------------------------------------------ */

static int row_has_keys(const st_ref_sparse_attn *in, int row, int p, int g) {
  const int32_t *idx = topk_row(in, row, g);
  for (int e = 0; e < in->topk; e++)
    if (visible_tokens(in, p, idx[e]) > 0) return 1;
  return 0;
}

/* Error of one head's output: ||got - ref|| / ||ref||, absolute (||got||)
 * where ref is all zeros; inf for a NaN or inf in got. *worst gets the
 * element furthest off. */
static double head_error(const double *ref, const uint16_t *got, int D, int *worst) {
  double diff2 = 0, ref2 = 0, far = -1;
  *worst = 0;
  for (int d = 0; d < D; d++) {
    const double g = st_bf16_to_float(got[d]);
    if (!isfinite(g)) {
      *worst = d;
      return INFINITY;
    }
    const double diff = g - ref[d];
    diff2 += diff * diff;
    ref2 += ref[d] * ref[d];
    if (fabs(diff) > far) {
      far = fabs(diff);
      *worst = d;
    }
  }
  return ref2 > 0 ? sqrt(diff2 / ref2) : sqrt(diff2);
}

/* lse: -inf must match exactly (and empty rows must give it); otherwise an
 * absolute tolerance in natural-log units, plus 8 float ulps of |ref|: the
 * kernels' lse is a float (its ulp passes 0.02 beyond |lse| = 2^18, which
 * scores reach with large q). NaN always fails. */
static int lse_ok(double got, const double *ref, int has_keys, double tol) {
  if (!has_keys) return got == -INFINITY;
  if (!ref) return 1;
  if (*ref == -INFINITY) return got == -INFINITY;
  return fabs(got - *ref) <= tol + fabs(*ref) * 0x1p-20;
}

/* What verify compares, and what it found so far. */
typedef struct check {
  const st_ref_sparse_attn *in;
  const double *ref_o, *ref_lse;
  const uint16_t *got_o;
  const float *got_lse;
  double tol, worst_err;
  int bad;
  int slack_left; /* heads that may still get fp32_slack (it costs D x keys each) */
  char *msg;
  size_t msg_cap;
} check;

/* Element d of token slot t of (page, kv head g) in one cache, dequantized
 * as convert_rows does. */
static double cache_value(const st_ref_sparse_attn *in, const void *cache, const int64_t *stride, float scalar,
                          const float *scales, const int64_t *sstride, int64_t page, int g, int t, int d) {
  const int64_t at = page * stride[0] + g * stride[1] + t * stride[2] + d;
  if (in->kv_dtype == ST_DTYPE_BF16) return bf16_value(((const uint16_t *)cache)[at]);
  return st_fp8_e4m3_to_float(((const uint8_t *)cache)[at]) * fp8_scale(in, scalar, scales, sstride, page, g, t);
}

/* How far the kernels' fp32 arithmetic may move one head's results: the
 * slack verify allows a head that fails the plain tolerance. A kernel sums
 * a score's D products in fp32 (tensor cores align and truncate: taken as
 * one ulp, 2^-23, of sum_d |q_d k_d| per product), so a score may move by
 *   eps = sm_scale * D * 2^-23 * max over keys of sum_d |q_d k_d|,
 * the lse (a smooth maximum of the scores) by eps, and each softmax weight
 * p_j by a factor within e^(+-2 eps); since the weights' changes sum to 0,
 * o = sum_j p_j v_j moves by at most
 *   (e^(2 eps) - 1) * sum_j p_j ||v_j - o||.
 * With q in [-1, 1) eps is ~1e-5 and the slack nothing; with q near 2^17
 * (the edge cases past f16's range) eps is ~10, and the slack is large only
 * where keys other than the best hold weight e^-(2 eps) or more: a head no
 * fp32 kernel decides, which the plain tolerance would fail at random. */
static void fp32_slack(const st_ref_sparse_attn *in, int r, int row, int p, int h, const double *ref_o, double *eps,
                       double *o_slack) {
  const int D = in->D, g = h / (in->Hq / in->Hkv);
  const uint16_t *q = in->q + ((size_t)row * in->Hq + h) * D;
  const int32_t *idx = topk_row(in, row, g);
  *eps = *o_slack = 0;
  double s_max = -INFINITY, a_max = 0;
  for (int pass = 0; pass < 2; pass++) { /* 0: the largest score and sum |q k|; 1: the weights */
    double z = 0, moved = 0;
    for (int e = 0; e < in->topk; e++) {
      const int n = visible_tokens(in, p, idx[e]);
      const int64_t page = n ? in->block_table[(int64_t)r * in->bt_cols + idx[e]] : 0;
      for (int t = 0; t < n; t++) {
        double s = 0, a = 0;
        for (int d = 0; d < D; d++) {
          const double x = bf16_value(q[d]) * cache_value(in, in->k_cache, in->k_stride, in->k_scale, in->k_scales,
                                                          in->ks_stride, page, g, t, d);
          s += x;
          a += fabs(x);
        }
        s *= in->sm_scale;
        if (pass == 0) {
          s_max = fmax(s_max, s);
          a_max = fmax(a_max, a);
          continue;
        }
        const double w = exp(s - s_max);
        double dist2 = 0;
        for (int d = 0; d < D; d++) {
          const double diff = cache_value(in, in->v_cache, in->v_stride, in->v_scale, in->v_scales, in->vs_stride,
                                          page, g, t, d) -
                              ref_o[d];
          dist2 += diff * diff;
        }
        z += w;
        moved += w * sqrt(dist2);
      }
    }
    if (pass == 1 && z > 0) {
      *eps = in->sm_scale * D * 0x1p-23 * a_max;
      *o_slack = expm1(2 * *eps) * moved / z;
    }
  }
}

/* One (row, q head h) of request r at position p; describes the first
 * failure in c->msg. */
static void check_head(check *c, int r, int row, int p, int h) {
  const st_ref_sparse_attn *in = c->in;
  const int D = in->D;
  const size_t at = (size_t)row * in->Hq + h;
  const int has_keys = row_has_keys(in, row, p, h / (in->Hq / in->Hkv));
  int d = 0;
  double err = head_error(c->ref_o + at * D, c->got_o + at * D, D, &d);
  if (!has_keys && err > 0) err = INFINITY; /* must be exactly zero: no relative scale exists */
  if (err > c->worst_err || isnan(err)) c->worst_err = isnan(err) ? INFINITY : err;
  const double *ref_l = c->ref_lse ? c->ref_lse + at : NULL;
  // cppcheck-suppress duplicateAssignExpression ; both start at the check's tolerance, then widen apart
  double o_tol = c->tol, l_tol = c->tol;
  int o_ok = err <= o_tol;
  int l_ok = !c->got_lse || lse_ok(c->got_lse[at], ref_l, has_keys, l_tol);
  if ((!o_ok || !l_ok) && has_keys && isfinite(err) && c->slack_left > 0) { /* only here: D x keys */
    c->slack_left--;
    double eps = 0, o_slack = 0, ref2 = 0;
    fp32_slack(in, r, row, p, h, c->ref_o + at * D, &eps, &o_slack);
    for (int e = 0; e < D; e++) ref2 += c->ref_o[at * D + e] * c->ref_o[at * D + e];
    o_tol += ref2 > 0 ? o_slack / sqrt(ref2) : o_slack; /* head_error's scale */
    l_tol += eps;
    o_ok = err <= o_tol;
    l_ok = !c->got_lse || lse_ok(c->got_lse[at], ref_l, has_keys, l_tol);
  }
  if (o_ok && l_ok) return;
  if (!c->bad && !o_ok)
    snprintf(c->msg, c->msg_cap,
             "row %d head %d (request %d, position %d%s): relative error of o %.4g above %.3g; worst element "
             "d=%d: got %.6g, ref %.6g",
             row, h, r, p, has_keys ? "" : ", no keys", err, o_tol, d, st_bf16_to_float(c->got_o[at * D + d]),
             c->ref_o[at * D + d]);
  else if (!c->bad)
    snprintf(c->msg, c->msg_cap, "row %d head %d (request %d, position %d%s): lse %.9g, ref %.9g (tolerance %.3g)", row,
             h, r, p, has_keys ? "" : ", no keys", (double)c->got_lse[at],
             ref_l ? *ref_l : (has_keys ? NAN : -INFINITY), l_tol);
  c->bad++;
}

int st_ref_sparse_attn_verify(const st_ref_sparse_attn *in, const double *ref_o, const double *ref_lse,
                              const uint16_t *got_o, const float *got_lse, double tol, double *max_err, char *msg,
                              size_t msg_cap) {
  if (msg_cap) msg[0] = '\0';
  *max_err = 0;
  if (!shape_ok(in, msg, msg_cap)) return -1;
  check c = {in, ref_o, ref_lse, got_o, got_lse, tol, 0, 0, SLACK_HEADS, msg, msg_cap};
  for (int r = 0; r < in->R; r++)
    for (int row = first_row(in, r); row < first_row(in, r + 1); row++) {
      const int p = position(in, r, row);
      for (int h = 0; h < in->Hq; h++) check_head(&c, r, row, p, h);
    }
  *max_err = c.worst_err;
  return c.bad;
}
