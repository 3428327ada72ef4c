/* reference/dsa_index_decode.h - the double-precision reference of
 * dsa_index_decode (DeepSeek-V3.2's lightning indexer for decode: token
 * logits over the paged index-K cache, then the top-k tokens).
 *
 * Host arrays, as the op takes them (runtime/include/sparsetune.h):
 *  - q [R*qlen][H][128] fp8 e4m3 bytes, dense; weights [R*qlen][H] fp32;
 *  - the index-K pool: `pages` pages of page_stride bytes each, a page being
 *    page_size x 128 fp8 e4m3 values (token-major) followed by page_size fp32
 *    scales, one per token; token k of a page dequantizes to
 *    value[k][d] * scale[k];
 *  - block_table [R][bt_cols] int32 (logical page j of request r -> physical
 *    page), seq_lens [R] int32.
 * Query token t of request r (row r*qlen + t) sits at position
 * p = min(seq_len, max_context) - qlen + t and sees tokens 0..p;
 * logit(k) = sum over heads h of weights[row][h] * relu(dot(q[row][h], k)),
 * relu(x) = x < 0 ? 0 : x (a NaN dot product stays NaN), in double. NaN
 * logits rank as -inf. */
#ifndef ST_REFERENCE_DSA_INDEX_DECODE_H
#define ST_REFERENCE_DSA_INDEX_DECODE_H

#include <stddef.h>
#include <stdint.h>

/* The index head dimension of the op (DeepSeek-V3.2's). */
#define ST_REF_DSA_HEAD_DIM 128

typedef struct st_ref_dsa_index_decode {
  int R, qlen, H, topk, page_size;
  int max_context; /* host-known bound on seq_len; a logits row's length */
  int bt_cols;
  int64_t pages, page_stride; /* page_stride in bytes, >= page_size * 132 */
  const uint8_t *q;
  const float *weights;
  const uint8_t *k_pool;
  const int32_t *block_table, *seq_lens;
} st_ref_dsa_index_decode;

/* Tokens row `row` sees: p + 1, or 0 for a padding row (seq_len <= 0) or a
 * query token before the first position (seq_len < qlen). */
int st_ref_dsa_index_decode_visible(const st_ref_dsa_index_decode *in, int row);

/* Logits into `logits` [R*qlen][max_context] (-inf past each row's visible
 * tokens) using `threads` threads. Returns 0, or -1 when out of memory or
 * threads. */
int st_ref_dsa_index_decode_logits(const st_ref_dsa_index_decode *in, double *logits, int threads);

/* The reference selection into topk_idx [R*qlen][topk]: the visible tokens
 * by logit descending (NaN as -inf), ties to the lower position, then -1. */
void st_ref_dsa_index_decode_select(const st_ref_dsa_index_decode *in, const double *logits, int32_t *topk_idx);

/* Checks a kernel's topk_idx (row i at got + i * got_stride_row) by the
 * contract's rule: min(topk, visible) ids, each a visible position, none
 * twice, -1 in the other slots, and no left-out token whose logit exceeds a
 * chosen one's by more than rel_tol * the row's largest finite |logit| (so
 * a kernel may differ from the reference only among tokens within rounding
 * of the k-th logit). Returns 0 if every row passes, else the number of
 * failing rows with the first failure in msg. *max_violation gets the
 * worst excess over the tolerance relative to the row's scale. */
int st_ref_dsa_index_decode_verify(const st_ref_dsa_index_decode *in, const double *logits, const int32_t *got,
                                   int64_t got_stride_row, double rel_tol, double *max_violation, char *msg,
                                   size_t msg_cap);

#endif
