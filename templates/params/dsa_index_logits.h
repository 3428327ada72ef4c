/* params/dsa_index_logits.h - the argument block of the dsa_index_logits
 * kernel.
 *
 * Plain C shared by the host launcher (runtime/ops/dsa_index_logits.c) and
 * the NVRTC-compiled kernel (templates/dsa_index_logits.cu), which takes it
 * by value: host and device read the same layout by construction. Strides
 * are in elements; q and k are bytes (fp8 e4m3), so their strides are bytes
 * too. */
#ifndef ST_DSA_INDEX_LOGITS_PARAMS_H
#define ST_DSA_INDEX_LOGITS_PARAMS_H

#include "common/st_types.h"

typedef struct st_dsa_index_logits_params {
  const uint8_t *q;     /* [s_q, H, 128] fp8 e4m3                              */
  const uint8_t *k;     /* [s_kv] rows of 128 fp8 e4m3 values, k_stride apart  */
  const float *k_scale; /* [s_kv]                                              */
  const float *weights; /* [s_q, H]                                            */
  const int32_t *ks;    /* [s_q] first visible token (clamped to 0..s_kv)      */
  const int32_t *ke;    /* [s_q] one past the last                             */
  float *logits;        /* [s_q, logit_stride]: the first s_kv of each row     */
  int64_t q_stride_row; /* bytes, multiples of 16                              */
  int64_t q_stride_head;
  int64_t k_stride; /* bytes from one k row to the next, a multiple of 16  */
  int64_t w_stride_row;
  int64_t logit_stride; /* elements, a multiple of 4                           */
  int32_t s_q;
  int32_t s_kv;
  int32_t num_heads;       /* H, <= the variant's MAX_HEADS                     */
  int32_t tiles_per_split; /* token tiles of one CTA's slice (gridDim.y slices) */
} st_dsa_index_logits_params;

#endif
