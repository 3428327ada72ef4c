/* common/mla_sparse_attend_params.h - the argument block of the
 * token-sparse MLA attention kernels (common/mla_sparse_attend.cuh), which
 * mla_sparse_decode and mla_sparse_prefill both launch.
 *
 * Plain C shared by the host launchers (runtime/ops/mla_sparse_decode.c,
 * runtime/ops/mla_sparse_prefill.c) and the NVRTC-compiled kernels, which
 * take it by value. Strides are in elements of their tensor (the fp8
 * cache's element is a byte); every innermost stride is 1.
 *
 * A query row is row = b*qlen + t. Its entries 0 .. n-1, n =
 * clamp(topk_length[b], 0, topk) (topk without topk_length), are cut into
 * `splits` ranges of entries_per_split; one CTA takes one range for a tile
 * of heads. With splits > 1 each CTA leaves a partial state in the
 * workspace (unnormalized o, running max m in log2 units of the scaled
 * score and sum l, per q head), combined by the merge kernel.
 *
 * A slot names a cache row: page * page_size + offset where the kernel is
 * paged (decode), the row itself where it is not (prefill: page_size 1,
 * kv_stride_page the row stride). */
#ifndef ST_MLA_SPARSE_ATTEND_PARAMS_H
#define ST_MLA_SPARSE_ATTEND_PARAMS_H

#include "common/st_types.h"

typedef struct st_mla_sparse_attend_params {
  const void *q;              /* [rows, Hq, 576] bf16                                  */
  const void *kv;             /* [pages, page_size, 576] bf16 or [.., 656] fp8 bytes   */
  const int32_t *indices;     /* [rows, topk] token slots, -1 = none                   */
  const int32_t *topk_length; /* [B] or NULL                                           */
  const float *sink;          /* [Hq] or NULL                                          */
  void *o;                    /* out [rows, Hq, 512] bf16                              */
  float *lse;                 /* out [rows, Hq] or NULL                                */
  float *part_o;              /* workspace [rows, splits, Hq, 512]: sum of p*v         */
  float *part_ml;             /* workspace [rows, splits, Hq, 2]: (m, l)               */
  int64_t q_stride_row, q_stride_head;
  int64_t kv_stride_page, kv_stride_token;
  int64_t idx_stride_row;
  int64_t topk_length_stride, sink_stride;
  int64_t o_stride_row, o_stride_head;
  int64_t lse_stride_row, lse_stride_head;
  int64_t num_slots;         /* pages * page_size: slots >= this are none             */
  float score_scale_log2;    /* sm_scale * log2(e)                                    */
  int32_t page_size;         /* tokens per page                                       */
  int32_t rows;              /* B * qlen                                              */
  int32_t qlen;              /* 1..4                                                  */
  int32_t num_heads;         /* Hq                                                    */
  int32_t topk;              /* entries per indices row                               */
  int32_t splits;            /* CTAs per (row, head tile)                             */
  int32_t entries_per_split; /* ceil(topk / splits)                                   */
  /* Last, so that decode's fields keep their offsets: prefill's output. */
  float *max_logits; /* out [rows, Hq] or NULL (decode: always NULL)             */
  int64_t max_logits_stride_row, max_logits_stride_head;
} st_mla_sparse_attend_params;

#endif
