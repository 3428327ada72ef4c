#include "reference/mla_sparse_decode.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference/dtype.h"

#define MAX_THREADS 64
/* q heads per work item: a row's valid keys are dequantized once per item,
 * which costs 576 per key against 1088 per key and head for the math. */
#define HEAD_CHUNK 16
#define FP8_MAX 448.0

/* ---- the cache rows ------------------------------------------------------ */

void st_ref_mla_dequant_row(st_dtype kv_dtype, const void *row, double *k) {
  if (kv_dtype == ST_DTYPE_BF16) {
    const uint16_t *v = row;
    for (int d = 0; d < ST_MLA_DIM_QK; d++) k[d] = st_bf16_to_float(v[d]);
    return;
  }
  const uint8_t *b = row;
  float scale[ST_MLA_DIM_V / ST_MLA_FP8_GROUP];
  memcpy(scale, b + ST_MLA_DIM_V, sizeof scale); /* host and device are little-endian */
  for (int d = 0; d < ST_MLA_DIM_V; d++) k[d] = (double)st_fp8_e4m3_to_float(b[d]) * scale[d / ST_MLA_FP8_GROUP];
  const uint8_t *rope = b + ST_MLA_DIM_V + sizeof scale;
  for (int d = 0; d < ST_MLA_DIM_ROPE; d++) {
    uint16_t v;
    memcpy(&v, rope + 2 * d, sizeof v);
    k[ST_MLA_DIM_V + d] = st_bf16_to_float(v);
  }
}

void st_ref_mla_fp8_pack_row(const float *values, uint8_t *row) {
  float scale[ST_MLA_DIM_V / ST_MLA_FP8_GROUP];
  for (int g = 0; g < ST_MLA_DIM_V / ST_MLA_FP8_GROUP; g++) {
    float amax = 0;
    for (int i = 0; i < ST_MLA_FP8_GROUP; i++) amax = fmaxf(amax, fabsf(values[g * ST_MLA_FP8_GROUP + i]));
    scale[g] = amax > 0 ? amax / (float)FP8_MAX : 1.0f;
    for (int i = 0; i < ST_MLA_FP8_GROUP; i++) {
      const int d = g * ST_MLA_FP8_GROUP + i;
      row[d] = st_float_to_fp8_e4m3(values[d] / scale[g]);
    }
  }
  memcpy(row + ST_MLA_DIM_V, scale, sizeof scale);
  for (int d = 0; d < ST_MLA_DIM_ROPE; d++) {
    const uint16_t v = st_float_to_bf16(values[ST_MLA_DIM_V + d]);
    memcpy(row + ST_MLA_DIM_V + sizeof scale + 2 * d, &v, sizeof v);
  }
}

int st_ref_mla_row_entries(const st_ref_mla_sparse_decode *in, int row) {
  if (!in->topk_length) return in->topk;
  const int32_t n = in->topk_length[row / in->qlen];
  return n < 0 ? 0 : n > in->topk ? in->topk : (int)n;
}

int st_ref_mla_slot_valid(const st_ref_mla_sparse_decode *in, int32_t slot) {
  return slot >= 0 && (int64_t)slot < in->pages * in->page_size;
}

static const void *slot_row(const st_ref_mla_sparse_decode *in, int32_t slot) {
  const int64_t at =
      (int64_t)(slot / in->page_size) * in->kv_stride[0] + (int64_t)(slot % in->page_size) * in->kv_stride[1];
  const size_t elem = in->kv_dtype == ST_DTYPE_BF16 ? 2 : 1;
  return (const char *)in->kv + (size_t)at * elem;
}

static int shape_ok(const st_ref_mla_sparse_decode *in) {
  return in->B >= 1 && in->qlen >= 1 && in->Hq >= 1 && in->topk >= 1 && in->page_size >= 1 && in->pages >= 1 &&
         (in->kv_dtype == ST_DTYPE_BF16 || in->kv_dtype == ST_DTYPE_FP8_E4M3);
}

/* ---- compute ------------------------------------------------------------ */

typedef struct work {
  const st_ref_mla_sparse_decode *in;
  double *o, *lse, *max_logits; /* lse and max_logits may be NULL */
  atomic_long next; /* next (row, head chunk) item */
} work;

/* The row's valid keys, dequantized: k[j][576] (V is k[j][0..511]). */
static int gather_keys(const st_ref_mla_sparse_decode *in, int row, double *k) {
  const int32_t *idx = in->indices + (size_t)row * (size_t)in->topk;
  const int entries = st_ref_mla_row_entries(in, row);
  int n = 0;
  for (int e = 0; e < entries; e++)
    if (st_ref_mla_slot_valid(in, idx[e]))
      st_ref_mla_dequant_row(in->kv_dtype, slot_row(in, idx[e]), k + (size_t)n++ * ST_MLA_DIM_QK);
  return n;
}

/* The sink's factor exp(lse) / (exp(lse) + exp(sink)) = 1 / (1 + exp(sink -
 * lse)): 0 for a +inf sink, 1 for -inf. */
static double sink_factor(const st_ref_mla_sparse_decode *in, int h, double lse) {
  if (!in->sink) return 1.0;
  return 1.0 / (1.0 + exp((double)in->sink[h] - lse));
}

/* q head h of row `row` over its n keys; s: n scratch doubles. */
static void attend_head(const work *w, int row, int h, const double *k, int n, double *s) {
  const st_ref_mla_sparse_decode *in = w->in;
  const size_t at = (size_t)row * (size_t)in->Hq + (size_t)h;
  double *o = w->o + at * ST_MLA_DIM_V;
  memset(o, 0, sizeof(double) * ST_MLA_DIM_V);
  if (n == 0) {
    if (w->lse) w->lse[at] = -INFINITY;
    if (w->max_logits) w->max_logits[at] = -INFINITY;
    return;
  }
  double q[ST_MLA_DIM_QK];
  for (int d = 0; d < ST_MLA_DIM_QK; d++) q[d] = st_bf16_to_float(in->q[at * ST_MLA_DIM_QK + (size_t)d]);
  double m = -INFINITY;
  for (int j = 0; j < n; j++) {
    const double *kj = k + (size_t)j * ST_MLA_DIM_QK;
    double dot = 0;
    for (int d = 0; d < ST_MLA_DIM_QK; d++) dot += q[d] * kj[d];
    s[j] = in->sm_scale * dot;
    if (s[j] > m) m = s[j];
  }
  double l = 0;
  for (int j = 0; j < n; j++) {
    const double p = m == -INFINITY ? 0 : exp(s[j] - m); /* -inf: every score -inf (inf inputs) */
    l += p;
    if (p == 0) continue;
    const double *vj = k + (size_t)j * ST_MLA_DIM_QK;
    for (int d = 0; d < ST_MLA_DIM_V; d++) o[d] += p * vj[d];
  }
  const double lse = l > 0 ? m + log(l) : -INFINITY;
  const double f = l > 0 ? sink_factor(in, h, lse) / l : 0;
  for (int d = 0; d < ST_MLA_DIM_V; d++) o[d] *= f;
  if (w->lse) w->lse[at] = lse;
  if (w->max_logits) w->max_logits[at] = m;
}

static void *attend_worker(void *arg) {
  work *w = arg;
  const st_ref_mla_sparse_decode *in = w->in;
  double *k = malloc(sizeof(double) * (size_t)in->topk * ST_MLA_DIM_QK);
  double *s = malloc(sizeof(double) * (size_t)in->topk);
  if (!k || !s) {
    free(k);
    free(s);
    return (void *)1;
  }
  const long chunks = (in->Hq + HEAD_CHUNK - 1) / HEAD_CHUNK;
  const long total = (long)in->B * in->qlen * chunks;
  for (;;) {
    const long item = atomic_fetch_add(&w->next, 1);
    if (item >= total) break;
    const int row = (int)(item / chunks), h0 = (int)(item % chunks) * HEAD_CHUNK;
    const int n = gather_keys(in, row, k);
    for (int h = h0; h < h0 + HEAD_CHUNK && h < in->Hq; h++) attend_head(w, row, h, k, n, s);
  }
  free(k);
  free(s);
  return NULL;
}

int st_ref_mla_sparse_attend(const st_ref_mla_sparse_decode *in, double *o, double *lse, double *max_logits,
                             int threads) {
  if (!shape_ok(in)) return -1;
  work w = {.in = in, .o = o, .lse = lse, .max_logits = max_logits};
  atomic_init(&w.next, 0);
  if (threads < 1) threads = 1;
  if (threads > MAX_THREADS) threads = MAX_THREADS;
  pthread_t tid[MAX_THREADS];
  int started = 0, failed = 0;
  for (int i = 1; i < threads; i++) {
    if (pthread_create(&tid[started], NULL, attend_worker, &w) != 0) break;
    started++;
  }
  if (attend_worker(&w)) failed = 1;
  for (int i = 0; i < started; i++) {
    void *ret = NULL;
    pthread_join(tid[i], &ret);
    if (ret) failed = 1;
  }
  return failed ? -1 : 0;
}

int st_ref_mla_sparse_decode_compute(const st_ref_mla_sparse_decode *in, double *o, double *lse, int threads) {
  return st_ref_mla_sparse_attend(in, o, lse, NULL, threads);
}

/* ---- verification ------------------------------------------------------ */

static int row_has_keys(const st_ref_mla_sparse_decode *in, int row) {
  const int32_t *idx = in->indices + (size_t)row * (size_t)in->topk;
  const int entries = st_ref_mla_row_entries(in, row);
  for (int e = 0; e < entries; e++)
    if (st_ref_mla_slot_valid(in, idx[e])) return 1;
  return 0;
}

/* ||got - ref|| / ||ref||, or ||got|| where ref is all zeros; inf for a
 * NaN or inf in got. *worst gets the element furthest off. */
static double head_error(const double *ref, const uint16_t *got, int *worst) {
  double diff2 = 0, ref2 = 0, far = -1;
  *worst = 0;
  for (int d = 0; d < ST_MLA_DIM_V; d++) {
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

/* As sparse_attn's verifier: -inf exactly where there is no key; else an
 * absolute tolerance plus 8 float ulps of |ref| (the kernels' lse is a
 * float). NaN fails. */
int st_ref_mla_log_ok(double got, const double *ref, int has_keys, double tol) {
  if (!has_keys) return got == -INFINITY;
  if (!ref) return 1;
  if (*ref == -INFINITY) return got == -INFINITY;
  return fabs(got - *ref) <= tol + fabs(*ref) * 0x1p-20;
}

int st_ref_mla_sparse_decode_verify(const st_ref_mla_sparse_decode *in, const double *ref_o, const double *ref_lse,
                                    const uint16_t *got_o, const float *got_lse, double tol, double *max_err, char *msg,
                                    size_t msg_cap) {
  if (msg_cap) msg[0] = '\0';
  *max_err = 0;
  if (!shape_ok(in)) {
    if (msg_cap) snprintf(msg, msg_cap, "the shape has a count below 1 or a dtype that is not bf16 or fp8");
    return -1;
  }
  int bad = 0;
  for (int row = 0; row < in->B * in->qlen; row++) {
    const int has_keys = row_has_keys(in, row);
    for (int h = 0; h < in->Hq; h++) {
      const size_t at = (size_t)row * (size_t)in->Hq + (size_t)h;
      int d = 0;
      double err = head_error(ref_o + at * ST_MLA_DIM_V, got_o + at * ST_MLA_DIM_V, &d);
      if (!has_keys && err > 0) err = INFINITY; /* must be exactly zero */
      if (err > *max_err || isnan(err)) *max_err = isnan(err) ? INFINITY : err;
      const double *ref_l = ref_lse ? ref_lse + at : NULL;
      const int o_ok = err <= tol;
      const int l_ok = !got_lse || st_ref_mla_log_ok(got_lse[at], ref_l, has_keys, tol);
      if (o_ok && l_ok) continue;
      if (!bad && msg_cap && !o_ok)
        snprintf(msg, msg_cap,
                 "row %d head %d (request %d%s): relative error of o %.4g above %.3g; worst element d=%d: got "
                 "%.6g, ref %.6g",
                 row, h, row / in->qlen, has_keys ? "" : ", no valid entry", err, tol, d,
                 st_bf16_to_float(got_o[at * ST_MLA_DIM_V + (size_t)d]), ref_o[at * ST_MLA_DIM_V + (size_t)d]);
      else if (!bad && msg_cap)
        snprintf(msg, msg_cap, "row %d head %d (request %d%s): lse %.9g, ref %.9g (tolerance %.3g)", row, h,
                 row / in->qlen, has_keys ? "" : ", no valid entry", (double)got_lse[at],
                 ref_l ? *ref_l : (has_keys ? NAN : -INFINITY), tol);
      bad++;
    }
  }
  return bad;
}
