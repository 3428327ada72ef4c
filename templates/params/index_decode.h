/* params/index_decode.h - the argument block of the index_decode kernels.
 *
 * Plain C shared by the host launcher (runtime/ops/index_decode.c) and the
 * NVRTC-compiled kernels (templates/index_decode.cu), which take it by value:
 * host and device read the same layout by construction. Strides are in
 * elements; every innermost (head_dim) stride is 1. */
#ifndef ST_INDEX_DECODE_PARAMS_H
#define ST_INDEX_DECODE_PARAMS_H

#include "common/st_types.h"

typedef struct st_index_decode_params {
  const void *q;              /* [R*qlen, H, D] bf16 or fp8 e4m3                */
  const void *k_cache;        /* [pages, 128, D], same dtype                    */
  const int32_t *block_table; /* [R, bt_stride...] page per 128-token block     */
  const int32_t *seq_lens;    /* [R]                                            */
  int32_t *topk_idx;          /* [H, R*qlen, topk]                              */
  uint32_t *counters;         /* workspace: [R * head_groups] CTAs done (single) */
  uint32_t *block_keys;       /* workspace: [R, H, qlen, max_blocks] score key of
                                 each visible non-forced block (0: none)        */
  int64_t q_stride_row, q_stride_head;
  int64_t k_stride_page, k_stride_token;
  int64_t bt_stride;
  int64_t out_stride_head, out_stride_row;
  int32_t num_requests;       /* R                                              */
  int32_t qlen;               /* query tokens per request, <= MAX_QLEN          */
  int32_t num_heads;          /* H                                              */
  int32_t topk;               /* <= TOPK_CAP                                    */
  int32_t init_blocks, local_blocks;
  int32_t max_blocks;         /* blocks any request may have: ceil(max_context/128),
                                 never more than block_table's columns          */
  int32_t splits;             /* CTAs per (request, head group) = gridDim.x;
                                 balanced: slices a request at the mean length,
                                 gridDim.x = splits + 1                         */
  int32_t chunk_cap;          /* blocks one CTA's score buffer holds:
                                 >= ceil(max_blocks / splits)                    */
  int32_t sel_cols;           /* columns the merge stages in shared memory at
                                 once (sel_cols * max_blocks keys)               */
  int32_t balanced;           /* 1: slices by the actual lengths (R > 1)        */
} st_index_decode_params;

#endif
