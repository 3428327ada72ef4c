/* reference/index_decode.h - the double-precision reference of index_decode.
 *
 * Host arrays, dense: q [R*qlen][H][D] and the index-K pool [pages][128][D]
 * in the storage dtype (bf16 or fp8 e4m3 bytes), block_table [R][bt_cols],
 * seq_lens [R]. Scores are computed in double from the dequantized values;
 * NaN dot products count as -inf. */
#ifndef ST_REFERENCE_INDEX_DECODE_H
#define ST_REFERENCE_INDEX_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "reference/block_select.h"
#include "sparsetune.h"

typedef struct st_ref_index_decode {
  st_dtype dtype;
  int R, qlen, H, D, topk, init_blocks, local_blocks;
  int max_blocks; /* ceil(max_context / 128) */
  int bt_cols;
  int64_t pages;
  const void *q, *k_pool;
  const int32_t *block_table, *seq_lens;
} st_ref_index_decode;

/* Scores into `scores` [H][R*qlen][max_blocks] (-inf where a block is not
 * visible) using `threads` threads; then the reference selection into
 * `topk_idx` [H][R*qlen][topk] (forced blocks first in increasing order,
 * then by score descending, ties by lower index; -1 after). */
int st_ref_index_decode_scores(const st_ref_index_decode *in, double *scores, int threads);
void st_ref_index_decode_select(const st_ref_index_decode *in, const double *scores, int32_t *topk_idx);

/* Visible blocks and forced range of query token t of a request of seq_len
 * tokens: blocks [0, lo) and [hi, nb) are forced, want = min(topk, nb)
 * (st_ref_row_plan is in reference/block_select.h). */
st_ref_row_plan st_ref_index_decode_row_plan(const st_ref_index_decode *in, int seq_len, int t);

/* Checks a kernel's topk_idx against the reference scores by the contract's
 * rule: right count, ids visible and unique, forced ones present, -1 after,
 * and no left-out block scoring above a chosen one by more than rounding
 * (tolerance rel_tol * the row's largest |score|). Returns 0 if all rows
 * pass, else writes the first failure into msg and returns the number of
 * failing rows. *max_violation gets the worst excess over the tolerance
 * relative to the row scale (0 when none). */
int st_ref_index_decode_verify(const st_ref_index_decode *in, const double *scores, const int32_t *got,
                               int64_t got_stride_head, int64_t got_stride_row, double rel_tol, double *max_violation,
                               char *msg, size_t msg_cap);

#endif
