#include "reference/dsa_index_logits.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "reference/dtype.h"

#define HEAD_DIM ST_REF_DSA_LOGITS_HEAD_DIM
/* Query rows one work item scores. */
#define ITEM_ROWS 4

void st_ref_dsa_index_logits_range(const st_ref_dsa_index_logits *in, int i, int *lo, int *hi) {
  int a = in->ks[i], b = in->ke[i];
  a = a < 0 ? 0 : a > in->s_kv ? in->s_kv : a;
  b = b < 0 ? 0 : b > in->s_kv ? in->s_kv : b;
  *lo = a;
  *hi = b < a ? a : b;
}

/* NaN stays NaN; negative values give 0. */
static double relu(double x) { return x < 0 ? 0 : x; }

typedef struct work {
  const st_ref_dsa_index_logits *in;
  const float *kf; /* k widened once: [s_kv][HEAD_DIM], exact */
  double *logits, *row_scale;
  atomic_long next; /* next item of ITEM_ROWS query rows */
  atomic_int failed;
} work;

/* dot(q, k) and sum |q k| over HEAD_DIM. The products of fp8 values are
 * exact in double and so is every partial sum (they span under 2^44 of
 * the products' granularity), so the eight running sums, which let the
 * compiler vectorize, give the exact dot product. */
static void dot_abs(const float *q, const float *k, double *dot, double *mag) {
  double s[8] = {0}, a[8] = {0};
  for (int d = 0; d < HEAD_DIM; d += 8)
    for (int u = 0; u < 8; u++) {
      const double p = (double)q[d + u] * (double)k[d + u];
      s[u] += p;
      a[u] += fabs(p);
    }
  *dot = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  *mag = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

static void score_row(const work *w, int i, float *qf) {
  const st_ref_dsa_index_logits *in = w->in;
  const int H = in->H;
  double *row = w->logits + (int64_t)i * in->s_kv;
  for (int j = 0; j < in->s_kv; j++) row[j] = -INFINITY;
  int lo, hi;
  st_ref_dsa_index_logits_range(in, i, &lo, &hi);
  for (int e = 0; e < H * HEAD_DIM; e++) qf[e] = st_fp8_e4m3_to_float(in->q[(int64_t)i * H * HEAD_DIM + e]);
  const float *wt = in->weights + (int64_t)i * H;
  double scale = 0;
  for (int j = lo; j < hi; j++) {
    const double ks = in->k_scale[j];
    double logit = 0, mag = 0;
    for (int h = 0; h < H; h++) {
      double dot, abs_sum;
      dot_abs(qf + h * HEAD_DIM, w->kf + (int64_t)j * HEAD_DIM, &dot, &abs_sum);
      logit += (double)wt[h] * relu(dot * ks);
      mag += fabs((double)wt[h]) * abs_sum * fabs(ks);
    }
    row[j] = logit;
    if (mag > scale) scale = mag; /* a NaN magnitude is left out */
  }
  if (w->row_scale) w->row_scale[i] = scale;
}

static void *score_worker(void *arg) {
  work *w = arg;
  const st_ref_dsa_index_logits *in = w->in;
  float *qf = calloc((size_t)in->H * HEAD_DIM, sizeof(float)); /* each row's q, widened */
  if (!qf) {
    atomic_store(&w->failed, 1);
    return NULL;
  }
  for (;;) {
    const long item = atomic_fetch_add(&w->next, 1);
    const long first = item * ITEM_ROWS;
    if (first >= in->s_q) break;
    for (long i = first; i < first + ITEM_ROWS && i < in->s_q; i++) score_row(w, (int)i, qf);
  }
  free(qf);
  return NULL;
}

int st_ref_dsa_index_logits_compute(const st_ref_dsa_index_logits *in, double *logits, double *row_scale, int threads) {
  float *kf = malloc(sizeof(float) * (size_t)in->s_kv * HEAD_DIM);
  if (!kf) return -1;
  for (int64_t j = 0; j < in->s_kv; j++)
    for (int d = 0; d < HEAD_DIM; d++) kf[j * HEAD_DIM + d] = st_fp8_e4m3_to_float(in->k[j * in->k_stride + d]);
  work w = {.in = in, .kf = kf, .logits = logits, .row_scale = row_scale};
  atomic_init(&w.next, 0);
  atomic_init(&w.failed, 0);
  if (threads < 1) threads = 1;
  if (threads > 64) threads = 64;
  pthread_t tid[64];
  int started = 0;
  for (int t = 1; t < threads; t++) {
    if (pthread_create(&tid[started], NULL, score_worker, &w) != 0) break;
    started++;
  }
  score_worker(&w);
  for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
  free(kf);
  return atomic_load(&w.failed) ? -1 : 0;
}

/* Whether `got` passes against reference value `want` inside a row of
 * scale `scale`; *err gets its error relative to the scale. */
static int element_ok(double want, float got, double scale, double rel_tol, double *err) {
  *err = 0;
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return (double)got == want;
  const double diff = fabs((double)got - want);
  *err = scale > 0 ? diff / scale : diff;
  return *err <= rel_tol; /* false for a NaN got */
}

int st_ref_dsa_index_logits_verify(const st_ref_dsa_index_logits *in, const double *logits, const double *row_scale,
                                   const float *got, int64_t got_stride_row, double rel_tol, double *max_err, char *msg,
                                   size_t msg_cap) {
  int bad = 0;
  double worst = 0;
  if (msg_cap) msg[0] = '\0';
  for (int i = 0; i < in->s_q; i++) {
    int lo, hi;
    st_ref_dsa_index_logits_range(in, i, &lo, &hi);
    const float *g = got + (int64_t)i * got_stride_row;
    const double *want = logits + (int64_t)i * in->s_kv;
    for (int j = 0; j < in->s_kv; j++) {
      double err = 0;
      const int inside = j >= lo && j < hi;
      const int ok = inside ? element_ok(want[j], g[j], row_scale[i], rel_tol, &err) : (double)g[j] == -INFINITY;
      if (err > worst) worst = err;
      if (ok) continue;
      if (!bad)
        snprintf(msg, msg_cap, "query %d token %d (it sees [%d, %d)): got %.9g, reference %.9g (row scale %.6g, %s)", i,
                 j, lo, hi, (double)g[j], want[j], row_scale[i],
                 inside ? "over the tolerance" : "outside the range: must be -inf");
      bad++;
    }
  }
  *max_err = worst;
  return bad;
}
