#include "reference/sparse_attn_decode.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "reference/dtype.h"

#define BLOCK_TOKENS 128
#define MAX_THREADS 64

/* Absolute position of a row's query token; < 0 (padding request, or a
 * request shorter than qlen) means it sees no key. */
static int row_position(const st_ref_sparse_attn_decode *in, int row) {
  return in->seq_lens[row / in->qlen] - in->qlen + row % in->qlen;
}

/* Keys a topk entry j contributes to a query at position p: 0 for -1, for
 * blocks past the query's own (or past block_table, which valid input never
 * lists), else the block's positions <= p. */
static int visible_tokens(const st_ref_sparse_attn_decode *in, int p, int32_t j) {
  if (j < 0 || p < 0 || j > p / BLOCK_TOKENS || j >= in->bt_cols) return 0;
  const int n = p - j * BLOCK_TOKENS + 1;
  return n < BLOCK_TOKENS ? n : BLOCK_TOKENS;
}

static const int32_t *topk_row(const st_ref_sparse_attn_decode *in, int row, int g) {
  return in->topk_idx + ((int64_t)g * in->R * in->qlen + row) * in->topk;
}

typedef struct work {
  const st_ref_sparse_attn_decode *in;
  double *o, *lse;
  double fp8[256];  /* e4m3 code -> value: decoding by ldexp per element is the slow part otherwise */
  atomic_long next; /* next (row, kv head) item */
} work;

/* One thread's buffers: a block's K and V rows in double, shared by the G q
 * heads of the item, and each head's running softmax state (max m, sum l of
 * exp(score - m), acc = sum of exp(score - m) * v). */
typedef struct scratch {
  double *q, *acc; /* [G][D] */
  double *k, *v;   /* [128][D] */
  double *m, *l;   /* [G] */
  double *s;       /* [128] scores of one head */
  double *mem;
} scratch;

static int scratch_init(scratch *sc, int G, int D) {
  const size_t gd = (size_t)G * (size_t)D, bd = (size_t)BLOCK_TOKENS * (size_t)D;
  sc->mem = malloc(sizeof(double) * (2 * gd + 2 * bd + 2 * (size_t)G + BLOCK_TOKENS));
  if (!sc->mem) return -1;
  sc->q = sc->mem;
  sc->acc = sc->q + gd;
  sc->k = sc->acc + gd;
  sc->v = sc->k + bd;
  sc->m = sc->v + bd;
  sc->l = sc->m + G;
  sc->s = sc->l + G;
  return 0;
}

/* Dequantizes the first n token rows of (page, kv head g) of one cache. */
static void load_rows(const work *w, const void *cache, const int64_t *stride, float scalar, const float *scales,
                      const int64_t *sstride, int64_t page, int g, int n, double *dst) {
  const st_ref_sparse_attn_decode *in = w->in;
  const int D = in->D;
  const int64_t base = page * stride[0] + g * stride[1];
  for (int i = 0; i < n; i++) {
    const int64_t at = base + i * stride[2];
    double *row = dst + (size_t)i * D;
    if (in->kv_dtype == ST_DTYPE_BF16) {
      for (int d = 0; d < D; d++) row[d] = st_bf16_to_float(((const uint16_t *)cache)[at + d]);
      continue;
    }
    double scale = 1.0;
    if (in->scale_mode == ST_KV_SCALE_SCALAR) scale = scalar;
    if (in->scale_mode == ST_KV_SCALE_TENSOR) scale = scales[page * sstride[0] + g * sstride[1] + i * sstride[2]];
    for (int d = 0; d < D; d++) row[d] = w->fp8[((const uint8_t *)cache)[at + d]] * scale;
  }
}

/* s[0..n) = dot(q, k_i). Four keys per pass: four independent add chains
 * instead of one (the bound on speed), each still summed in order of d, so
 * every score is the plain left-to-right dot product. */
static void dots(const double *q, const double *k, int n, int D, double *s) {
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    const double *k0 = k + (size_t)i * D, *k1 = k0 + D, *k2 = k1 + D, *k3 = k2 + D;
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int d = 0; d < D; d++) {
      s0 += q[d] * k0[d];
      s1 += q[d] * k1[d];
      s2 += q[d] * k2[d];
      s3 += q[d] * k3[d];
    }
    s[i] = s0;
    s[i + 1] = s1;
    s[i + 2] = s2;
    s[i + 3] = s3;
  }
  for (; i < n; i++) {
    const double *ki = k + (size_t)i * D;
    double s0 = 0;
    for (int d = 0; d < D; d++) s0 += q[d] * ki[d];
    s[i] = s0;
  }
}

/* Folds n keys of the loaded block into every head's softmax state. The
 * state is rescaled to the new running max, so no exp ever overflows. */
static void attend_block(const st_ref_sparse_attn_decode *in, scratch *sc, int n) {
  const int G = in->Hq / in->Hkv, D = in->D;
  for (int h = 0; h < G; h++) {
    double best = -INFINITY;
    dots(sc->q + (size_t)h * D, sc->k, n, D, sc->s);
    for (int i = 0; i < n; i++) {
      sc->s[i] *= in->sm_scale;
      if (sc->s[i] > best) best = sc->s[i];
    }
    const double m = sc->m[h] > best ? sc->m[h] : best;
    if (m == -INFINITY) continue; /* only -inf scores (inf inputs): no weight to add */
    double *acc = sc->acc + (size_t)h * D;
    if (m != sc->m[h]) {
      const double shrink = exp(sc->m[h] - m);
      sc->l[h] *= shrink;
      for (int d = 0; d < D; d++) acc[d] *= shrink;
      sc->m[h] = m;
    }
    for (int i = 0; i < n; i++) {
      const double p = exp(sc->s[i] - m);
      const double *vi = sc->v + (size_t)i * D;
      sc->l[h] += p;
      for (int d = 0; d < D; d++) acc[d] += p * vi[d];
    }
  }
}

/* One (row, kv head g) item: the G q heads g*G .. g*G+G-1 of that row. */
static void attend_item(const work *w, scratch *sc, long item) {
  const st_ref_sparse_attn_decode *in = w->in;
  const int G = in->Hq / in->Hkv, D = in->D;
  const int row = (int)(item / in->Hkv), g = (int)(item % in->Hkv);
  const int r = row / in->qlen, p = row_position(in, row);
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
  for (int e = 0; e < in->topk; e++) {
    const int n = visible_tokens(in, p, idx[e]);
    if (n == 0) continue;
    const int64_t page = in->block_table[(int64_t)r * in->bt_cols + idx[e]];
    load_rows(w, in->k_cache, in->k_stride, in->k_scale, in->k_scales, in->ks_stride, page, g, n, sc->k);
    load_rows(w, in->v_cache, in->v_stride, in->v_scale, in->v_scales, in->vs_stride, page, g, n, sc->v);
    attend_block(in, sc, n);
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
  const st_ref_sparse_attn_decode *in = w->in;
  scratch sc;
  if (scratch_init(&sc, in->Hq / in->Hkv, in->D) != 0) return (void *)1;
  const long total = (long)in->R * in->qlen * in->Hkv;
  for (;;) {
    const long item = atomic_fetch_add(&w->next, 1);
    if (item >= total) break;
    attend_item(w, &sc, item);
  }
  free(sc.mem);
  return NULL;
}

int st_ref_sparse_attn_decode_compute(const st_ref_sparse_attn_decode *in, double *o, double *lse, int threads) {
  if (in->Hkv < 1 || in->Hq % in->Hkv != 0 || in->D < 1 || in->qlen < 1) return -1;
  work *w = malloc(sizeof *w);
  if (!w) return -1;
  *w = (work){.in = in, .o = o, .lse = lse};
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
  free(w);
  return failed ? -1 : 0;
}

/* ---- verification ------------------------------------------------------ */

static int row_has_keys(const st_ref_sparse_attn_decode *in, int row, int g) {
  const int p = row_position(in, row);
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
 * absolute tolerance in natural-log units. NaN always fails. */
static int lse_ok(double got, const double *ref, int has_keys, double tol) {
  if (!has_keys) return got == -INFINITY;
  if (!ref) return 1;
  if (*ref == -INFINITY) return got == -INFINITY;
  return fabs(got - *ref) <= tol;
}

int st_ref_sparse_attn_decode_verify(const st_ref_sparse_attn_decode *in, const double *ref_o, const double *ref_lse,
                                     const uint16_t *got_o, const float *got_lse, double tol, double *max_err,
                                     char *msg, size_t msg_cap) {
  const int rows = in->R * in->qlen, G = in->Hq / in->Hkv, D = in->D;
  int bad = 0;
  double worst_err = 0;
  if (msg_cap) msg[0] = '\0';
  for (int row = 0; row < rows; row++)
    for (int h = 0; h < in->Hq; h++) {
      const size_t at = (size_t)row * in->Hq + h;
      const int has_keys = row_has_keys(in, row, h / G);
      const int r = row / in->qlen, p = row_position(in, row);
      int d = 0;
      double err = head_error(ref_o + at * D, got_o + at * D, D, &d);
      if (!has_keys && err > 0) err = INFINITY; /* must be exactly zero: no relative scale exists */
      if (err > worst_err || isnan(err)) worst_err = isnan(err) ? INFINITY : err;
      const double got_d = st_bf16_to_float(got_o[at * D + d]), ref_d = ref_o[at * D + d];
      const double *ref_l = ref_lse ? ref_lse + at : NULL;
      const int o_ok = err <= tol;
      const int l_ok = !got_lse || lse_ok(got_lse[at], ref_l, has_keys, tol);
      if (o_ok && l_ok) continue;
      if (!bad && !o_ok)
        snprintf(msg, msg_cap,
                 "row %d head %d (request %d, position %d%s): relative error of o %.4g above %.3g; worst element "
                 "d=%d: got %.6g, ref %.6g",
                 row, h, r, p, has_keys ? "" : ", no keys", err, tol, d, got_d, ref_d);
      else if (!bad)
        snprintf(msg, msg_cap, "row %d head %d (request %d, position %d%s): lse %.9g, ref %.9g (tolerance %.3g)", row,
                 h, r, p, has_keys ? "" : ", no keys", (double)got_lse[at],
                 ref_l ? *ref_l : (has_keys ? NAN : -INFINITY), tol);
      bad++;
    }
  *max_err = worst_err;
  return bad;
}
