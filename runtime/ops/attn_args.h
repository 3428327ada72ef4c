/* ops/attn_args.h - the argument checks and parameter filling the attention
 * ops (sparse_attn, sparse_attn_decode) share: the paged K/V cache views,
 * their fp8 scales, and the o / lse outputs. Their public argument structs
 * and kernel argument blocks name these fields alike, which the macros rely
 * on. */
#ifndef ST_OPS_ATTN_ARGS_H
#define ST_OPS_ATTN_ARGS_H

#include <stdint.h>

#include "error.h"
#include "sparsetune.h"

/* The K/V part of an attention op's arguments. */
typedef struct st_attn_kv {
  const st_tensor *k_cache, *v_cache;
  st_kv_scale_mode scale_mode;
  float k_scale, v_scale;
  const st_tensor *k_scales, *v_scales;
} st_attn_kv;

/* The K/V part of args `a` (a pointer to st_sparse_attn_args or
 * st_sparse_attn_decode_args). */
#define ST_ATTN_KV_OF(a)                                                                                               \
  (&(const st_attn_kv){&(a)->k_cache, &(a)->v_cache, (a)->scale_mode, (a)->k_scale, (a)->v_scale, &(a)->k_scales,      \
                       &(a)->v_scales})

/* k_cache: a bf16 or fp8 e4m3 view [pages, Hkv, 128, D] whose rows are
 * 16-byte aligned (asynchronous 16-byte copies); v_cache: the same shape and
 * dtype, its own strides. */
st_status st_attn_check_caches(const st_attn_kv *kv, int64_t D, st_err *err);

/* The scale mode and what it needs: NONE; SCALAR with positive finite
 * scales; TENSOR with fp32 views [pages, Hkv, 128] of any non-negative
 * strides. Scales apply to fp8 caches only. */
st_status st_attn_check_scales(const st_attn_kv *kv, st_err *err);

/* After q: head_dim D is 64, 128 or 256, the caches and scales as above,
 * and the grouping: Hq a multiple of Hkv (k_cache.shape[1]), at most
 * max_group q heads per kv head, Hkv <= 65535 (a grid dimension). */
st_status st_attn_check_heads(const st_attn_kv *kv, int64_t Hq, int64_t D, int max_group, st_err *err);

/* o: bf16 [rows, Hq, D]; lse: absent (data NULL) or fp32 [rows, Hq].
 * `rows_name` names the row count in messages ("total_q", "R*qlen"). */
st_status st_attn_check_outputs(const st_tensor *o, const st_tensor *lse, int64_t rows, int64_t Hq, int64_t D,
                                const char *rows_name, st_err *err);

/* sm_scale * log2(e), times the K scale in scalar mode: the kernels' score
 * scale in base 2. */
float st_attn_score_scale_log2(float sm_scale, st_kv_scale_mode mode, float k_scale);

/* Fills kernel argument block `p` from args `a`: cache views and scales. */
#define ST_ATTN_FILL_KV(p, a)                                                                                          \
  do {                                                                                                                 \
    (p)->k_cache = (a)->k_cache.data;                                                                                  \
    (p)->v_cache = (a)->v_cache.data;                                                                                  \
    (p)->k_stride_page = (a)->k_cache.stride[0];                                                                       \
    (p)->k_stride_head = (a)->k_cache.stride[1];                                                                       \
    (p)->k_stride_token = (a)->k_cache.stride[2];                                                                      \
    (p)->v_stride_page = (a)->v_cache.stride[0];                                                                       \
    (p)->v_stride_head = (a)->v_cache.stride[1];                                                                       \
    (p)->v_stride_token = (a)->v_cache.stride[2];                                                                      \
    if ((a)->scale_mode == ST_KV_SCALE_TENSOR) {                                                                       \
      (p)->k_scales = (a)->k_scales.data;                                                                              \
      (p)->v_scales = (a)->v_scales.data;                                                                              \
      (p)->ks_stride_page = (a)->k_scales.stride[0];                                                                   \
      (p)->ks_stride_head = (a)->k_scales.stride[1];                                                                   \
      (p)->ks_stride_token = (a)->k_scales.stride[2];                                                                  \
      (p)->vs_stride_page = (a)->v_scales.stride[0];                                                                   \
      (p)->vs_stride_head = (a)->v_scales.stride[1];                                                                   \
      (p)->vs_stride_token = (a)->v_scales.stride[2];                                                                  \
    }                                                                                                                  \
    (p)->scale_mode = (int32_t)(a)->scale_mode;                                                                        \
    (p)->score_scale_log2 = st_attn_score_scale_log2((a)->sm_scale, (a)->scale_mode, (a)->k_scale);                    \
    (p)->v_scale = (a)->scale_mode == ST_KV_SCALE_SCALAR ? (a)->v_scale : 1.0f;                                        \
  } while (0)

/* Fills the outputs' pointers and strides. */
#define ST_ATTN_FILL_OUT(p, a)                                                                                         \
  do {                                                                                                                 \
    (p)->o = (a)->o.data;                                                                                              \
    (p)->o_stride_row = (a)->o.stride[0];                                                                              \
    (p)->o_stride_head = (a)->o.stride[1];                                                                             \
    (p)->lse = (a)->lse.data;                                                                                          \
    if ((a)->lse.data) {                                                                                               \
      (p)->lse_stride_row = (a)->lse.stride[0];                                                                        \
      (p)->lse_stride_head = (a)->lse.stride[1];                                                                       \
    }                                                                                                                  \
  } while (0)

#endif
