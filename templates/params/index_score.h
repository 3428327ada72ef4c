/* params/index_score.h - the argument block of the index_score (prefill)
 * kernel. Plain C shared by runtime/ops/index_score.c and
 * templates/index_score.cu; strides in elements, innermost strides 1. */
#ifndef ST_INDEX_SCORE_PARAMS_H
#define ST_INDEX_SCORE_PARAMS_H

#include "common/st_types.h"

typedef struct st_index_score_params {
  const void *q;               /* [total_q, H, D] bf16 or fp8 e4m3                */
  const void *k_cache;         /* [pages, 128, D], same dtype                     */
  const int32_t *block_table;  /* [R, bt_stride...] page per 128-token block      */
  const int32_t *cu_seqlens_q; /* [R+1]                                           */
  const int32_t *seq_lens;     /* [R]                                             */
  float *score;                /* out [H, total_q, max_blocks]: j < nb written    */
  int64_t q_stride_row, q_stride_head;
  int64_t k_stride_page, k_stride_token;
  int64_t bt_stride;
  int64_t score_stride_head, score_stride_row;
  float scale;                 /* > 0, multiplies every score                     */
  int32_t num_requests;        /* R                                               */
  int32_t total_q;
  int32_t num_heads;           /* H <= the CTA's rows                             */
  int32_t head_shift;          /* log2(H rounded up to a power of two): a token's
                                  rows in the tile; rows of heads >= H are padding,
                                  scored on zeros and never stored                 */
  int32_t max_blocks;          /* ceil(max_context / 128) <= block_table columns  */
  int32_t chunk_blocks;        /* chunk schedule: blocks one CTA scores, gridDim.y =
                                  ceil(max_blocks / chunk_blocks)                   */
  int32_t balanced;            /* 1: gridDim.x CTAs split the batch's (tile, visible
                                  block) pairs evenly (common/score_tile.cuh)        */
  st_tensor_map k_map;         /* k_cache as [pages][128][D], boxes of 128 bytes x
                                  128 rows x 1 page, 128-byte swizzle: set at launch
                                  (runtime/ops/tensor_map.c)                         */
} st_index_score_params;

#endif
