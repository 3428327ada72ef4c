/* params/dsa_index_decode.h - the argument block of the dsa_index_decode
 * kernels.
 *
 * Plain C shared by the host launcher (runtime/ops/dsa_index_decode.c) and
 * the NVRTC-compiled kernels (templates/dsa_index_decode.cu), which take it
 * by value: host and device read the same layout by construction. Strides
 * are in elements; q and the index-K cache are bytes (fp8 e4m3), so their
 * strides are bytes too. */
#ifndef ST_DSA_INDEX_DECODE_PARAMS_H
#define ST_DSA_INDEX_DECODE_PARAMS_H

#include "common/st_types.h"

typedef struct st_dsa_index_decode_params {
  const uint8_t *q;           /* [R*qlen, H, 128] fp8 e4m3                        */
  const float *weights;       /* [R*qlen, H] fp32                                 */
  const uint8_t *k_cache;     /* pages of page_stride bytes: page_size x 128 fp8
                                 e4m3 values (token-major), then page_size fp32
                                 scales                                           */
  const int32_t *block_table; /* [R, bt_stride...] physical page of each logical one */
  const int32_t *seq_lens;    /* [R]                                              */
  int32_t *topk_idx;          /* [R*qlen, topk]                                   */
  float *logits;              /* workspace: [R*qlen, logit_stride]; a row's first
                                 visible-token entries are written by the main
                                 kernel and read by the merge of the same launch */
  int64_t q_stride_row, q_stride_head;
  int64_t w_stride_row;
  int64_t page_stride; /* bytes from one page to the next              */
  int64_t bt_stride;
  int64_t out_stride_row;
  int64_t logit_stride; /* >= max_context, a multiple of 4                */
  int32_t num_requests; /* R                                              */
  int32_t qlen;         /* query tokens per request, <= MAX_QLEN          */
  int32_t num_heads;    /* H, <= MAX_HEADS                                */
  int32_t topk;         /* 1..2048                                        */
  int32_t page_size;    /* tokens per page                                */
  int32_t max_context;  /* host-known bound: longer seq_lens are clamped  */
  int32_t splits;       /* CTAs per request = gridDim.x of the main kernel */
  int32_t stage_cap;    /* a row of at most this many logits is held in the
                           merge's shared memory for every pass            */
  int32_t cand_cap;     /* longer rows: candidates (key and position) the
                           filtering merge holds (0: none, every pass reads
                           the row from L2)                                */
} st_dsa_index_decode_params;

#endif
