/* ops/attn_inputs.c - the K/V side of attention cases (attn_inputs.h). */
#include "ops/attn_inputs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/case_inputs.h"
#include "ops/tensor_check.h"
#include "random_fill.h"

static st_status one_of(const char *v, const char *field, const char *const *allowed, int n, int *index, st_err *err) {
  for (int i = 0; v && i < n; i++)
    if (strcmp(v, allowed[i]) == 0) {
      *index = i;
      return ST_OK;
    }
  char list[128] = "";
  for (int i = 0; i < n; i++) {
    const size_t used = strlen(list);
    snprintf(list + used, sizeof list - used, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ", allowed[i]);
  }
  return st_fail(err, ST_ERR_INVALID_ARG, "shape %s='%s' is not %s", field, v ? v : "(missing)", list);
}

st_status st_attn_kv_read_shape(const st_params *shape, st_attn_kv_case *kv, const char **sel, st_err *err) {
  memset(kv, 0, sizeof *kv);
  static const char *const dtypes[] = {"bf16", "fp8"}, *const scales[] = {"none", "scalar", "tensor", "one"},
                           *const layouts[] = {"pages2", "interleaved"},
                           *const sels[] = {"random", "holes", "local", "repeats"};
  int dt = 0, sc = 0, lay = 0, se = 0;
  st_status st;
  if ((st = st_case_shape_int(shape, "D", 16, 512, &kv->D, err)) ||
      (st = st_case_shape_int(shape, "Hkv", 1, 65535, &kv->Hkv, err)) ||
      (st = one_of(st_params_get(shape, "dtype"), "dtype", dtypes, 2, &dt, err)) ||
      (st = one_of(st_params_get(shape, "scale"), "scale", scales, 4, &sc, err)) ||
      (st = one_of(st_params_get(shape, "layout"), "layout", layouts, 2, &lay, err)) ||
      (st = one_of(st_params_get(shape, "sel"), "sel", sels, 4, &se, err)))
    return st;
  kv->dtype = dt == 0 ? ST_DTYPE_BF16 : ST_DTYPE_FP8_E4M3;
  kv->one_scale = sc == 3;
  kv->scale = kv->one_scale ? ST_KV_SCALE_TENSOR : (st_kv_scale_mode)sc;
  kv->interleaved = lay == 1;
  const int scalar = kv->scale == ST_KV_SCALE_SCALAR || kv->one_scale;
  kv->k_scale = scalar ? 0.75f : 1.0f;
  kv->v_scale = scalar ? 1.5f : 1.0f;
  *sel = sels[se];
  return ST_OK;
}

static size_t pool_elems(const st_attn_kv_case *kv) {
  return (size_t)kv->pages * 2 * ST_BLOCK_TOKENS * (size_t)kv->Hkv * (size_t)kv->D;
}

static size_t scale_elems(const st_attn_kv_case *kv) {
  return kv->one_scale ? 2 : 2 * (size_t)kv->pages * ST_BLOCK_TOKENS * (size_t)kv->Hkv;
}

double st_attn_sm_scale(const st_attn_kv_case *kv) { return 1.0 / sqrt((double)kv->D); }

int64_t st_attn_kv_page_bytes(const st_attn_kv_case *kv) {
  return 2 * ST_BLOCK_TOKENS * (int64_t)kv->Hkv * kv->D * st_dtype_bytes(kv->dtype);
}

void st_attn_kv_layout(st_attn_kv_case *kv, int64_t pages) {
  kv->pages = pages;
  if (kv->interleaved) {
    kv->stride[0] = (int64_t)kv->Hkv * ST_BLOCK_TOKENS * 2 * kv->D;
    kv->stride[1] = (int64_t)ST_BLOCK_TOKENS * 2 * kv->D;
    kv->stride[2] = 2 * (int64_t)kv->D;
    kv->v_offset = kv->D;
  } else {
    kv->stride[0] = 2 * (int64_t)ST_BLOCK_TOKENS * kv->Hkv * kv->D;
    kv->stride[1] = kv->D;
    kv->stride[2] = (int64_t)kv->Hkv * kv->D;
    kv->v_offset = (int64_t)ST_BLOCK_TOKENS * kv->Hkv * kv->D;
  }
}

st_status st_attn_kv_fill(st_attn_kv_case *kv, uint64_t seed, int threads, st_err *err) {
  const size_t bytes = pool_elems(kv) * (size_t)st_dtype_bytes(kv->dtype);
  kv->h_pool = malloc(bytes);
  if (kv->scale == ST_KV_SCALE_TENSOR) kv->h_scales = malloc(scale_elems(kv) * 4);
  if (!kv->h_pool || (kv->scale == ST_KV_SCALE_TENSOR && !kv->h_scales))
    return st_fail(err, ST_ERR_NOMEM, "out of host memory for a KV pool of %zu bytes", bytes);
  const float amp = kv->dtype == ST_DTYPE_BF16 ? 1.0f : 4.0f;
  st_fill_uniform(kv->h_pool, kv->dtype, pool_elems(kv), -amp, amp, seed ^ 0x6b, threads);
  if (kv->one_scale) {
    kv->h_scales[0] = kv->k_scale;
    kv->h_scales[1] = kv->v_scale;
  } else if (kv->h_scales) {
    st_fill_uniform(kv->h_scales, ST_DTYPE_FP32, scale_elems(kv), 0.25f, 2.0f, seed ^ 0x73, threads);
  }
  return ST_OK;
}

void st_attn_kv_poison_tail(st_attn_kv_case *kv, int64_t page, int from) {
  const int bytes = st_dtype_bytes(kv->dtype);
  for (int h = 0; h < kv->Hkv; h++)
    for (int slot = from; slot < ST_BLOCK_TOKENS; slot++)
      for (int which = 0; which < 2; which++) {
        const int64_t at = page * kv->stride[0] + h * kv->stride[1] + slot * kv->stride[2] + which * kv->v_offset;
        for (int d = 0; d < kv->D; d++) {
          if (bytes == 2)
            ((uint16_t *)kv->h_pool)[at + d] = 0x7fc0; /* bf16 NaN */
          else
            ((uint8_t *)kv->h_pool)[at + d] = 0x7f; /* e4m3 NaN */
        }
      }
}

st_status st_attn_kv_upload(const st_cu *cu, st_attn_kv_case *kv, st_err *err) {
  st_status st = st_case_upload(cu, &kv->d_pool, kv->h_pool, pool_elems(kv) * (size_t)st_dtype_bytes(kv->dtype), err);
  if (st == ST_OK && kv->h_scales) st = st_case_upload(cu, &kv->d_scales, kv->h_scales, scale_elems(kv) * 4, err);
  return st;
}

void st_attn_kv_free(const st_cu *cu, st_attn_kv_case *kv) {
  if (cu && kv->d_pool) cu->cuMemFree(kv->d_pool);
  if (cu && kv->d_scales) cu->cuMemFree(kv->d_scales);
  free(kv->h_pool);
  free(kv->h_scales);
  kv->h_pool = NULL;
  kv->h_scales = NULL;
}

static void cache_tensor(st_tensor *t, const st_attn_kv_case *kv) {
  memset(t, 0, sizeof *t);
  t->dtype = kv->dtype;
  t->ndim = 4;
  const int64_t shape[4] = {kv->pages, kv->Hkv, ST_BLOCK_TOKENS, kv->D};
  for (int i = 0; i < 4; i++) t->shape[i] = shape[i];
  for (int i = 0; i < 3; i++) t->stride[i] = kv->stride[i];
  t->stride[3] = 1;
}

/* [pages, Hkv, 128] over the slot-major arrays [pages][128][Hkv]. */
static void scale_tensor(st_tensor *t, const st_attn_kv_case *kv) {
  memset(t, 0, sizeof *t);
  t->dtype = ST_DTYPE_FP32;
  t->ndim = 3;
  t->shape[0] = kv->pages;
  t->shape[1] = kv->Hkv;
  t->shape[2] = ST_BLOCK_TOKENS;
  t->stride[0] = kv->one_scale ? 0 : (int64_t)ST_BLOCK_TOKENS * kv->Hkv;
  t->stride[1] = kv->one_scale ? 0 : 1;
  t->stride[2] = kv->one_scale ? 0 : kv->Hkv;
}

void st_attn_kv_tensors(const st_attn_kv_case *kv, st_tensor *k, st_tensor *v, st_tensor *ks, st_tensor *vs) {
  cache_tensor(k, kv);
  cache_tensor(v, kv);
  memset(ks, 0, sizeof *ks);
  memset(vs, 0, sizeof *vs);
  if (kv->scale != ST_KV_SCALE_TENSOR) return;
  scale_tensor(ks, kv);
  scale_tensor(vs, kv);
}

/* V starts v_offset elements into the pool; the V scales follow the K
 * scales (st_attn_kv_fill: K then V). */
void st_attn_kv_point(const st_attn_kv_case *kv, st_tensor *k, st_tensor *v, st_tensor *ks, st_tensor *vs) {
  k->data = (void *)(uintptr_t)kv->d_pool;
  v->data = (void *)(uintptr_t)(kv->d_pool + (CUdeviceptr)(kv->v_offset * st_dtype_bytes(kv->dtype)));
  if (!kv->d_scales) return;
  ks->data = (void *)(uintptr_t)kv->d_scales;
  vs->data = (void *)(uintptr_t)(kv->d_scales + (CUdeviceptr)(scale_elems(kv) / 2 * 4));
}

void st_attn_make_selection(int32_t *row, int topk, int pos, int max_blocks, const char *sel, uint64_t *rng) {
  const int nb = pos >= 0 ? pos / ST_BLOCK_TOKENS + 1 : 0;
  int n = 0;
  if (strcmp(sel, "local") == 0) {
    for (int j = nb - 1; j >= 0 && n < topk; j--) row[n++] = j;
  } else {
    if (nb > 0) row[n++] = nb - 1;
    if (nb > 1 && n < topk) row[n++] = 0;
    if (nb - 2 <= topk - n) { /* every visible block fits */
      for (int j = 1; j < nb - 1; j++) row[n++] = j;
    } else {
      while (n < topk) { /* distinct random blocks in 1..nb-2 */
        const int j = 1 + (int)st_rand_below(rng, (uint64_t)(nb - 2));
        int dup = 0;
        for (int i = 0; i < n && !dup; i++) dup = row[i] == j;
        if (!dup) row[n++] = j;
      }
    }
  }
  for (int i = n; i < topk; i++) row[i] = -1;
  if (strcmp(sel, "repeats") == 0) /* an entry in 8 a copy of another: a block listed twice counts twice */
    for (int i = 0; i < topk; i++)
      if (st_rand_below(rng, 8) == 0) row[i] = row[st_rand_below(rng, (uint64_t)topk)];
  if (strcmp(sel, "holes") == 0)
    for (int i = 0; i < topk; i++) {
      const uint64_t u = st_rand_below(rng, 8);
      if (u == 0)
        row[i] = -1;
      else if (u == 1)
        row[i] = nb + (int)st_rand_below(rng, (uint64_t)max_blocks - (uint64_t)nb + 1); /* past its own */
    }
  for (int i = topk - 1; i > 0; i--) {
    const int k = (int)st_rand_below(rng, (uint64_t)i + 1);
    const int32_t t = row[i];
    row[i] = row[k];
    row[k] = t;
  }
}

int st_attn_selected_blocks(const int32_t *row, int topk, int pos) {
  const int nb = pos >= 0 ? pos / ST_BLOCK_TOKENS + 1 : 0;
  int n = 0;
  for (int i = 0; i < topk; i++) n += row[i] >= 0 && row[i] < nb;
  return n;
}
