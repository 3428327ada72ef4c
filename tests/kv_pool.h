/* kv_pool.h - what the attention reference tests (sparse_attn and
 * sparse_attn_decode) share: a random paged KV pool in either layout of
 * sparsetune.h, its values dequantized into a dense copy, per-slot scales
 * stored as a non-dense view, and the naive softmax over an explicit key
 * list that both references are checked against. */
#ifndef ST_TEST_KV_POOL_H
#define ST_TEST_KV_POOL_H

#include <stdint.h>

#include "sparsetune.h"

/* The two paged layouts of sparsetune.h. */
enum { ST_KV_LAYOUT_SPLIT /* (pages, 2, 128, Hkv, D) */, ST_KV_LAYOUT_FUSED /* (pages, Hkv, 128, 2*D) */ };

typedef struct st_kv_pool {
  st_dtype dtype; /* bf16 or fp8 e4m3 */
  int64_t pages;
  int Hkv, D;
  void *kv;          /* the pool in its layout, bf16 bits or fp8 bytes */
  double *kd, *vd;   /* the same values dequantized (unscaled), dense [pages][Hkv][128][D] */
  float *ks, *vs;    /* TENSOR scales stored [pages][128][Hkv], a non-dense view */
  double *ksd, *vsd; /* the same scales, dense [pages][Hkv][128] */
  /* The element views the references take ([pages][Hkv][128][D] strides)
   * and the scale views ([pages][Hkv][128] strides). */
  const void *k_cache, *v_cache;
  int64_t k_stride[3], v_stride[3], s_stride[3];
} st_kv_pool;

/* Random K and V in [-2, 2), drawn in one logical order so that both
 * layouts hold the same values; scales all 1. Free with st_kv_pool_free. */
void st_kv_pool_make(st_kv_pool *p, st_dtype dtype, int layout, int64_t pages, int Hkv, int D, uint64_t *rng);

/* TENSOR scales: every entry `k` / `v` when positive, else random in
 * [0.25, 4). */
void st_kv_pool_set_scales(st_kv_pool *p, float k, float v, uint64_t *rng);

void st_kv_pool_free(st_kv_pool *p);

typedef struct st_kv_key {
  int64_t page;
  int slot;
} st_kv_key;

/* How the references scale: the op's scale mode and scalars, sm_scale. */
typedef struct st_kv_scaling {
  st_kv_scale_mode mode;
  float k_scale, v_scale; /* SCALAR mode */
  double sm_scale;
} st_kv_scaling;

/* Softmax over `keys` of kv head g with one global max, for the D bf16
 * values of q: o (D values) and lse (-inf with no key). */
void st_kv_naive_softmax(const st_kv_pool *p, const st_kv_scaling *s, const uint16_t *q, int g, const st_kv_key *keys,
                         int n, double *o, double *lse);

/* A reference's o (D values) and lse of (row, h) against the naive
 * softmax: relative L2 error and lse within `tol`; with no key, o all 0
 * and lse -inf. Fails the test naming row and head. */
void st_kv_expect_head(const st_kv_pool *p, const st_kv_scaling *s, const uint16_t *q, int g, const st_kv_key *keys,
                       int n, const double *got_o, double got_lse, int row, int h, double tol);

#endif
