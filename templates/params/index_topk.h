/* params/index_topk.h - the argument block of the index_topk (prefill)
 * kernel. Plain C shared by runtime/ops/index_topk.c and
 * templates/index_topk.cu; strides in elements. */
#ifndef ST_INDEX_TOPK_PARAMS_H
#define ST_INDEX_TOPK_PARAMS_H

#include "common/st_types.h"

typedef struct st_index_topk_params {
  const float *score;          /* [H, total_q, max_blocks]   */
  const int32_t *cu_seqlens_q; /* [R+1]                      */
  const int32_t *seq_lens;     /* [R]                        */
  int32_t *topk_idx;           /* out [H, total_q, topk]     */
  int64_t score_stride_head, score_stride_row;
  int64_t out_stride_head, out_stride_row;
  int32_t num_requests;        /* R                          */
  int32_t total_q;
  int32_t topk;                /* <= the kernel's TOPK_CAP   */
  int32_t init_blocks, local_blocks;
  int32_t max_blocks;          /* score columns read at most: ceil(max_context / 128) */
} st_index_topk_params;

#endif
