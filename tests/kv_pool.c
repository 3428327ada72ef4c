#include "kv_pool.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference/dtype.h"
#include "testutil.h"

void st_kv_pool_make(st_kv_pool *p, st_dtype dtype, int layout, int64_t pages, int Hkv, int D, uint64_t *rng) {
  memset(p, 0, sizeof *p);
  p->dtype = dtype;
  p->pages = pages;
  p->Hkv = Hkv;
  p->D = D;
  const int fp8 = dtype == ST_DTYPE_FP8_E4M3;
  const size_t elems = (size_t)(pages * Hkv * 128 * D), slots = (size_t)(pages * Hkv * 128);
  p->kv = malloc(2 * elems * (fp8 ? 1 : 2));
  p->kd = malloc(sizeof(double) * elems);
  p->vd = malloc(sizeof(double) * elems);
  p->ks = malloc(sizeof(float) * slots);
  p->vs = malloc(sizeof(float) * slots);
  p->ksd = malloc(sizeof(double) * slots);
  p->vsd = malloc(sizeof(double) * slots);
  const int64_t split[3] = {2 * 128 * (int64_t)Hkv * D, D, (int64_t)Hkv * D};
  const int64_t fused[3] = {(int64_t)Hkv * 128 * 2 * D, 128 * 2 * (int64_t)D, 2 * (int64_t)D};
  const int64_t *st = layout == ST_KV_LAYOUT_SPLIT ? split : fused;
  const int64_t v_off = layout == ST_KV_LAYOUT_SPLIT ? 128 * (int64_t)Hkv * D : D;
  for (int64_t i = 0; i < (int64_t)elems; i++) {
    const int64_t d = i % D, tok = i / D % 128, g = i / D / 128 % Hkv, page = i / D / 128 / Hkv;
    const int64_t at = page * st[0] + g * st[1] + tok * st[2] + d;
    for (int which = 0; which < 2; which++) {
      const float x = (float)st_rand_uniform(rng, -2, 2);
      const int64_t e = at + (which ? v_off : 0);
      double *dst = which ? p->vd : p->kd;
      if (fp8) {
        ((uint8_t *)p->kv)[e] = st_float_to_fp8_e4m3(x);
        dst[i] = st_fp8_e4m3_to_float(((uint8_t *)p->kv)[e]);
      } else {
        ((uint16_t *)p->kv)[e] = st_float_to_bf16(x);
        dst[i] = st_bf16_to_float(((uint16_t *)p->kv)[e]);
      }
    }
  }
  p->k_cache = p->kv;
  p->v_cache = (const uint8_t *)p->kv + (size_t)v_off * (fp8 ? 1 : 2);
  memcpy(p->k_stride, st, sizeof p->k_stride);
  memcpy(p->v_stride, st, sizeof p->v_stride);
  const int64_t sst[3] = {128 * (int64_t)Hkv, 1, Hkv}; /* [pages][128][Hkv] seen as [pages][Hkv][128] */
  memcpy(p->s_stride, sst, sizeof sst);
  st_kv_pool_set_scales(p, 1, 1, rng);
}

void st_kv_pool_set_scales(st_kv_pool *p, float k, float v, uint64_t *rng) {
  for (int64_t i = 0; i < p->pages * p->Hkv * 128; i++) {
    const int64_t slot = i % 128, g = i / 128 % p->Hkv, page = i / 128 / p->Hkv;
    const int64_t at = page * p->s_stride[0] + g * p->s_stride[1] + slot * p->s_stride[2];
    p->ks[at] = k > 0 ? k : (float)st_rand_uniform(rng, 0.25, 4);
    p->vs[at] = v > 0 ? v : (float)st_rand_uniform(rng, 0.25, 4);
    p->ksd[i] = p->ks[at];
    p->vsd[i] = p->vs[at];
  }
}

void st_kv_pool_free(st_kv_pool *p) {
  free(p->kv);
  free(p->kd);
  free(p->vd);
  free(p->ks);
  free(p->vs);
  free(p->ksd);
  free(p->vsd);
  memset(p, 0, sizeof *p);
}

static double scale_of(const st_kv_pool *p, const st_kv_scaling *s, const double *tensor, float scalar,
                       const st_kv_key *k, int g) {
  if (p->dtype == ST_DTYPE_BF16 || s->mode == ST_KV_SCALE_NONE) return 1.0;
  if (s->mode == ST_KV_SCALE_SCALAR) return scalar;
  return tensor[(k->page * p->Hkv + g) * 128 + k->slot];
}

void st_kv_naive_softmax(const st_kv_pool *p, const st_kv_scaling *s, const uint16_t *q, int g, const st_kv_key *keys,
                         int n, double *o, double *lse) {
  const int D = p->D;
  double *sc = malloc(sizeof(double) * (size_t)(n + 1));
  double best = -INFINITY, sum = 0;
  for (int k = 0; k < n; k++) {
    const double *kv = p->kd + ((keys[k].page * p->Hkv + g) * 128 + keys[k].slot) * D;
    const double ks = scale_of(p, s, p->ksd, s->k_scale, &keys[k], g);
    double dot = 0;
    for (int d = 0; d < D; d++) dot += (double)st_bf16_to_float(q[d]) * (kv[d] * ks);
    sc[k] = s->sm_scale * dot;
    if (sc[k] > best) best = sc[k];
  }
  for (int d = 0; d < D; d++) o[d] = 0;
  for (int k = 0; k < n; k++) {
    const double *vv = p->vd + ((keys[k].page * p->Hkv + g) * 128 + keys[k].slot) * D;
    const double vs = scale_of(p, s, p->vsd, s->v_scale, &keys[k], g);
    const double w = exp(sc[k] - best);
    sum += w;
    for (int d = 0; d < D; d++) o[d] += w * (vv[d] * vs);
  }
  for (int d = 0; d < D && n > 0; d++) o[d] /= sum;
  *lse = n > 0 ? best + log(sum) : -INFINITY;
  free(sc);
}

void st_kv_expect_head(const st_kv_pool *p, const st_kv_scaling *s, const uint16_t *q, int g, const st_kv_key *keys,
                       int n, const double *got_o, double got_lse, int row, int h, double tol) {
  const int D = p->D;
  double *want = malloc(sizeof(double) * (size_t)D);
  double lse = 0, diff2 = 0, ref2 = 0;
  st_kv_naive_softmax(p, s, q, g, keys, n, want, &lse);
  for (int d = 0; d < D; d++) {
    diff2 += (got_o[d] - want[d]) * (got_o[d] - want[d]);
    ref2 += want[d] * want[d];
  }
  free(want);
  if (n == 0) {
    assert_true(diff2 == 0 && ref2 == 0);
    assert_true(isinf(got_lse) && got_lse < 0);
    return;
  }
  assert_true(ref2 > 0);
  if (!(sqrt(diff2 / ref2) <= tol)) fail_msg("row %d head %d: relative error %g", row, h, sqrt(diff2 / ref2));
  if (!(fabs(got_lse - lse) <= tol * (1 + fabs(lse))))
    fail_msg("row %d head %d: lse %.17g, want %.17g", row, h, got_lse, lse);
}
