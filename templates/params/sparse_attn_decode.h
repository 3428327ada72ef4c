/* params/sparse_attn_decode.h - the argument block of the sparse_attn_decode
 * kernels.
 *
 * Plain C shared by the host launcher (runtime/ops/sparse_attn_decode.c) and
 * the NVRTC-compiled kernels (templates/sparse_attn_decode.cu), which take it
 * by value. Strides are in elements; every innermost (head_dim) stride is 1.
 *
 * A work item is one (request r, query token t, kv head g): row = r*qlen + t
 * and the GROUP = Hq / Hkv q heads g*GROUP .. g*GROUP+GROUP-1. Its topk
 * selected blocks are cut into `splits` ranges of blocks_per_split entries;
 * one CTA attends over one range. With splits > 1 each CTA leaves a partial
 * state in the workspace (unnormalized o, running max m and sum l per q
 * head), merged by the last CTA of the item (single) or by a merge launch
 * (split). */
#ifndef ST_SPARSE_ATTN_DECODE_PARAMS_H
#define ST_SPARSE_ATTN_DECODE_PARAMS_H

#include "common/st_types.h"

typedef struct st_sparse_attn_decode_params {
  const void *q;              /* [R*qlen, Hq, D] bf16                             */
  const void *k_cache;        /* [pages, Hkv, 128, D] view, bf16 or fp8 e4m3      */
  const void *v_cache;        /* same shape and dtype                             */
  const float *k_scales;      /* [pages, Hkv, 128] view (scale_mode 2), else NULL */
  const float *v_scales;
  const int32_t *topk_idx;    /* [Hkv, R*qlen, topk]                              */
  const int32_t *block_table; /* [R, bt_stride...]                                */
  const int32_t *seq_lens;    /* [R]                                              */
  void *o;                    /* out [R*qlen, Hq, D] bf16                         */
  float *lse;                 /* out [R*qlen, Hq] or NULL                         */
  float *part_o;              /* workspace [items, splits, GROUP, D]: sum of p*v  */
  float *part_ml;             /* workspace [items, splits, GROUP, 2]: (m, l), m in
                                 log2 units of the scaled score                   */
  uint32_t *counters;         /* workspace [items]: CTAs done (single, splits > 1) */
  int64_t q_stride_row, q_stride_head;
  int64_t k_stride_page, k_stride_head, k_stride_token;
  int64_t v_stride_page, v_stride_head, v_stride_token;
  int64_t ks_stride_page, ks_stride_head, ks_stride_token;
  int64_t vs_stride_page, vs_stride_head, vs_stride_token;
  int64_t idx_stride_head, idx_stride_row;
  int64_t bt_stride;
  int64_t o_stride_row, o_stride_head;
  int64_t lse_stride_row, lse_stride_head;
  float score_scale_log2;     /* sm_scale * log2(e) (* k_scale in scalar mode)    */
  float v_scale;              /* scalar mode: v_scale, else 1                     */
  int32_t scale_mode;         /* 0 none, 1 scalar, 2 tensor (st_kv_scale_mode)    */
  int32_t num_requests;       /* R                                                */
  int32_t qlen;               /* 1..4                                             */
  int32_t num_kv_heads;       /* Hkv                                              */
  int32_t topk;               /* entries per topk_idx row                         */
  int32_t max_blocks;         /* ceil(max_context / 128)                          */
  int32_t splits;             /* CTAs per work item = gridDim.x                   */
  int32_t blocks_per_split;   /* ceil(topk / splits)                              */
  /* tma variants: k_cache and v_cache as tensor maps (runtime/ops/
   * tensor_map.c: 128-byte x 128-row boxes of one head of one page), set at
   * launch; zeros elsewhere. */
  st_tensor_map k_map, v_map;
  /* One K and one V scale read from device memory: a call's k_scales and
   * v_scales views with every stride 0 (one scale each, as vLLM keeps
   * them), run by variants of kernel parameter scale_ptr 1 as scale_mode 1
   * with score_scale_log2 and v_scale leaving them out; else NULL. */
  const float *k_scale_ptr;
  const float *v_scale_ptr;
} st_sparse_attn_decode_params;

#endif
