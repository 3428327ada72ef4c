/* params/index_prefill.h - the argument block of the fused index_prefill
 * kernels (scores and top-k in one call). Plain C shared by
 * runtime/ops/index_prefill.c and templates/index_prefill.cu; strides in
 * elements. */
#ifndef ST_INDEX_PREFILL_PARAMS_H
#define ST_INDEX_PREFILL_PARAMS_H

#include "params/index_score.h"

typedef struct st_index_prefill_params {
  st_index_score_params score; /* the scoring loop's arguments (score, scale unused) */
  uint64_t *partial;           /* fused: workspace [H, total_q, max_chunks, topk], each
                                  chunk's best non-forced blocks of a row,
                                  (key << 32) | block, key 0 = none                   */
  uint32_t *keys;              /* composed: workspace [H, total_q, max_blocks], the
                                  score key of each visible block                     */
  int32_t *topk_idx;           /* out [H, total_q, topk]                              */
  int64_t out_stride_head, out_stride_row;
  int32_t topk;                /* <= the kernel's TOPK_CAP                            */
  int32_t init_blocks, local_blocks;
  int32_t max_chunks;          /* ceil(max_blocks / chunk_blocks): the main grid's y  */
} st_index_prefill_params;

#endif
