/* params/dsa_index_topk.h - the argument block of the dsa_index_topk
 * kernel.
 *
 * Plain C shared by the host launcher (runtime/ops/dsa_index_topk.c) and
 * the NVRTC-compiled kernel (templates/dsa_index_topk.cu), which takes it
 * by value: host and device read the same layout by construction. Strides
 * are in elements. */
#ifndef ST_DSA_INDEX_TOPK_PARAMS_H
#define ST_DSA_INDEX_TOPK_PARAMS_H

#include "common/st_types.h"

typedef struct st_dsa_index_topk_params {
  const float *logits;    /* [s_q, logit_stride]: the first s_kv of each row   */
  const int32_t *ks;      /* [s_q] first candidate position (clamped 0..s_kv)  */
  const int32_t *ke;      /* [s_q] one past the last                           */
  int32_t *topk_idx;      /* [s_q, out_stride]: the first topk of each row     */
  int64_t logit_stride;   /* elements, a multiple of 4                         */
  int64_t out_stride;     /* elements                                          */
  int32_t s_q;
  int32_t s_kv;
  int32_t topk;           /* 1..2048                                           */
  int32_t stage_cap;      /* a range of at most this many logits is held in
                             shared memory for every pass                      */
  int32_t cand_cap;       /* longer ranges: candidates (key and position) the
                             filtering selection holds (0: none, every pass
                             reads the row from L2)                            */
} st_dsa_index_topk_params;

#endif
