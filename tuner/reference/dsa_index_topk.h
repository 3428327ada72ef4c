/* reference/dsa_index_topk.h - the reference of dsa_index_topk
 * (DeepSeek-V3.2's indexer top-k for prefill: each query row's topk
 * largest logits in its [ks, ke) range).
 *
 * Host arrays, as the op takes them (runtime/include/sparsetune.h):
 * logits [s_q][logit_stride] fp32 (the first s_kv of each row), ks and ke
 * [s_q] int32. Row i's range is ks[i] <= j < ke[i], both clamped to
 * 0..s_kv (ke <= ks: empty). The selection is dsa_index_decode's, one
 * range at a time (reference/block_select.h, a "block" there being one
 * position here, none forced): NaN as -inf, -0 equal to +0 (compared as
 * doubles), ties to the lower position. */
#ifndef ST_REFERENCE_DSA_INDEX_TOPK_H
#define ST_REFERENCE_DSA_INDEX_TOPK_H

#include <stddef.h>
#include <stdint.h>

typedef struct st_ref_dsa_index_topk {
  int s_q, s_kv, topk;
  int64_t logit_stride; /* elements, >= s_kv */
  const float *logits;
  const int32_t *ks, *ke;
} st_ref_dsa_index_topk;

/* Row i's range [*lo, *hi), clamped (an empty range has *lo == *hi). */
void st_ref_dsa_index_topk_range(const st_ref_dsa_index_topk *in, int i, int *lo, int *hi);

/* The reference selection into topk_idx [s_q][topk]: each row's range by
 * logit descending (NaN as -inf), ties to the lower position, then -1. A
 * row of n <= topk positions is ks..ke-1 in order. Returns 0, or -1 when
 * out of memory. */
int st_ref_dsa_index_topk_select(const st_ref_dsa_index_topk *in, int32_t *topk_idx);

/* Checks a kernel's topk_idx (row i at got + i * got_stride_row) by the
 * contract's rule: min(topk, n) positions, each inside the row's range,
 * none twice, -1 in the other slots, and no left-out position whose logit
 * exceeds a chosen one's (the logits are the op's input, so the check is
 * exact: a kernel may differ from the reference only among positions whose
 * logit equals the k-th). A row of n <= topk must be ks..ke-1 in order.
 * Returns 0 if every row passes, else the number of failing rows with the
 * first failure in msg (-1 rows and a message when out of memory). */
int st_ref_dsa_index_topk_verify(const st_ref_dsa_index_topk *in, const int32_t *got, int64_t got_stride_row, char *msg,
                                 size_t msg_cap);

#endif
