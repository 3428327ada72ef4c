/* ops/attn_args.c - argument checks the attention ops share (attn_args.h). */
#include "ops/attn_args.h"

#include <math.h>
#include <stdint.h>

#include "ops/tensor_check.h"

/* A view [pages, Hkv, 128, D] of a cache, checked against k_cache. */
static st_status check_cache(const st_tensor *t, const char *name, const st_tensor *k, int64_t D, st_err *err) {
  st_status s = st_check_tensor(t, name, k->dtype, 4, err);
  if (s != ST_OK) return s;
  const int64_t Hkv = k->shape[1];
  if (t->shape[0] != k->shape[0] || t->shape[1] != Hkv || t->shape[2] != ST_BLOCK_TOKENS || t->shape[3] != D)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s.shape=[%lld,%lld,%lld,%lld] must be [pages=%lld, Hkv=%lld, %d, D=%lld]",
                   name, (long long)t->shape[0], (long long)t->shape[1], (long long)t->shape[2], (long long)t->shape[3],
                   (long long)k->shape[0], (long long)Hkv, ST_BLOCK_TOKENS, (long long)D);
  /* 16-byte asynchronous copies of every row. */
  return st_check_vector_rows(t, name, 16, err);
}

st_status st_attn_check_caches(const st_attn_kv *kv, int64_t D, st_err *err) {
  const st_tensor *k = kv->k_cache;
  if (k->dtype != ST_DTYPE_BF16 && k->dtype != ST_DTYPE_FP8_E4M3)
    return st_fail(err, ST_ERR_INVALID_ARG, "k_cache.dtype=%d is not bf16 (%d) or fp8_e4m3 (%d)", (int)k->dtype,
                   ST_DTYPE_BF16, ST_DTYPE_FP8_E4M3);
  st_status s = check_cache(k, "k_cache", k, D, err);
  return s != ST_OK ? s : check_cache(kv->v_cache, "v_cache", k, D, err);
}

/* A per-(page, kv head, slot) fp32 scale view [pages, Hkv, 128]: any
 * non-negative strides (engines keep slot-major and head-major layouts). */
static st_status check_scales(const st_tensor *t, const char *name, const st_tensor *cache, st_err *err) {
  if (t->dtype != ST_DTYPE_FP32 || t->ndim != 3)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s must be a 3-d fp32 tensor (dtype=%d, ndim=%d)", name, (int)t->dtype,
                   t->ndim);
  if (t->shape[0] != cache->shape[0] || t->shape[1] != cache->shape[1] || t->shape[2] != ST_BLOCK_TOKENS)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s.shape=[%lld,%lld,%lld] must be [pages=%lld, Hkv=%lld, %d]", name,
                   (long long)t->shape[0], (long long)t->shape[1], (long long)t->shape[2], (long long)cache->shape[0],
                   (long long)cache->shape[1], ST_BLOCK_TOKENS);
  /* Any strides (the innermost too), but within int64 as every view's. */
  const st_status s = st_check_extent(t, name, 3, err);
  if (s != ST_OK) return s;
  if (!t->data) return st_fail(err, ST_ERR_INVALID_ARG, "%s.data is NULL (scale_mode is TENSOR)", name);
  if ((uintptr_t)t->data % 4)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s.data=%p is not 4-byte aligned", name, t->data);
  return ST_OK;
}

st_status st_attn_check_scales(const st_attn_kv *a, st_err *err) {
  switch (a->scale_mode) {
  case ST_KV_SCALE_NONE: return ST_OK;
  case ST_KV_SCALE_SCALAR:
  case ST_KV_SCALE_TENSOR: break;
  default:
    return st_fail(err, ST_ERR_INVALID_ARG, "scale_mode=%d is not NONE (0), SCALAR (1) or TENSOR (2)",
                   (int)a->scale_mode);
  }
  if (a->k_cache->dtype != ST_DTYPE_FP8_E4M3)
    return st_fail(err, ST_ERR_INVALID_ARG, "scale_mode=%d applies to fp8 caches only; a bf16 cache needs NONE (0)",
                   (int)a->scale_mode);
  if (a->scale_mode == ST_KV_SCALE_SCALAR) {
    if (!(isfinite(a->k_scale) && a->k_scale > 0) || !(isfinite(a->v_scale) && a->v_scale > 0))
      return st_fail(err, ST_ERR_INVALID_ARG, "k_scale=%g and v_scale=%g must be positive and finite",
                     (double)a->k_scale, (double)a->v_scale);
    return ST_OK;
  }
  st_status s = check_scales(a->k_scales, "k_scales", a->k_cache, err);
  return s != ST_OK ? s : check_scales(a->v_scales, "v_scales", a->k_cache, err);
}

st_status st_attn_check_heads(const st_attn_kv *kv, int64_t Hq, int64_t D, int max_group, st_err *err) {
  if (D != 64 && D != 128 && D != 256)
    return st_fail(err, ST_ERR_UNSUPPORTED, "head_dim=%lld (q.shape[2]) is not 64, 128 or 256", (long long)D);
  st_status s = st_attn_check_caches(kv, D, err);
  if (s != ST_OK) return s;
  const int64_t Hkv = kv->k_cache->shape[1];
  if (Hq % Hkv)
    return st_fail(err, ST_ERR_INVALID_ARG, "Hq=%lld q heads are not a multiple of Hkv=%lld kv heads", (long long)Hq,
                   (long long)Hkv);
  if (Hq / Hkv > max_group)
    return st_fail(err, ST_ERR_UNSUPPORTED, "Hq/Hkv=%lld q heads per kv head exceed %d", (long long)(Hq / Hkv),
                   max_group);
  if (Hkv > 65535) return st_fail(err, ST_ERR_INVALID_ARG, "Hkv=%lld kv heads exceed 65535", (long long)Hkv);
  return st_attn_check_scales(kv, err);
}

st_status st_attn_check_outputs(const st_tensor *o, const st_tensor *lse, int64_t rows, int64_t Hq, int64_t D,
                                const char *rows_name, st_err *err) {
  st_status s;
  if ((s = st_check_tensor(o, "o", ST_DTYPE_BF16, 3, err)) != ST_OK) return s;
  if (o->shape[0] != rows || o->shape[1] != Hq || o->shape[2] != D)
    return st_fail(err, ST_ERR_INVALID_ARG, "o.shape=[%lld,%lld,%lld] must be q's [%lld,%lld,%lld]",
                   (long long)o->shape[0], (long long)o->shape[1], (long long)o->shape[2], (long long)rows,
                   (long long)Hq, (long long)D);
  if (!lse->data) return ST_OK; /* not wanted */
  if ((s = st_check_tensor(lse, "lse", ST_DTYPE_FP32, 2, err)) != ST_OK) return s;
  if (lse->shape[0] != rows || lse->shape[1] != Hq)
    return st_fail(err, ST_ERR_INVALID_ARG, "lse.shape=[%lld,%lld] must be [%s=%lld, Hq=%lld]",
                   (long long)lse->shape[0], (long long)lse->shape[1], rows_name, (long long)rows, (long long)Hq);
  return ST_OK;
}

float st_attn_score_scale_log2(float sm_scale, st_kv_scale_mode mode, float k_scale) {
  return (float)((double)sm_scale * 1.4426950408889634 * (mode == ST_KV_SCALE_SCALAR ? (double)k_scale : 1.0));
}
