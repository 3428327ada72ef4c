/* reference/index_prefill.h - the double-precision reference of the prefill
 * indexer: index_score, index_topk and their composition (index_prefill).
 *
 * A varlen batch of R requests. Request r has q_len[r] = cu[r+1] - cu[r]
 * query tokens, its last ones: token i (cu[r] <= i < cu[r+1]) sits at
 * p_i = seq_lens[r] - q_len[r] + (i - cu[r]) and sees blocks 0..nb(p_i)-1,
 * nb(p) = p / 128 + 1 (none when p < 0; a request with seq_len 0 and q_len 0
 * is padding). Host arrays, dense: q [total_q][H][D] and the index-K pool
 * [pages][128][D] in the storage dtype (bf16 or fp8 e4m3 bytes, dequantized
 * by a plain cast), block_table [R][bt_cols] (int32 page ids), seq_lens [R],
 * cu_seqlens_q [R+1]. Scores and topk ids are [H][total_q][...], row (h, i)
 * at h * total_q + i. The caller owns every array; nothing is kept. */
#ifndef ST_REFERENCE_INDEX_PREFILL_H
#define ST_REFERENCE_INDEX_PREFILL_H

#include <stddef.h>
#include <stdint.h>

#include "sparsetune.h"

typedef struct st_ref_index_prefill {
  st_dtype dtype; /* ST_DTYPE_BF16 or ST_DTYPE_FP8_E4M3, for q and k_pool */
  int R, H, D;
  int max_blocks; /* score row length: at least nb of every query token */
  int bt_cols;
  int64_t pages;
  const int32_t *cu_seqlens_q; /* [R+1], cu[0] = 0, non-decreasing */
  const int32_t *seq_lens;     /* [R] */
  const void *q, *k_pool;
  const int32_t *block_table;
  double scale;                        /* > 0: multiplies every score */
  int topk, init_blocks, local_blocks; /* 1..64, init + local <= topk (index_topk only) */
} st_ref_index_prefill;

/* The number of query tokens, cu_seqlens_q[R]. */
int st_ref_index_prefill_total_q(const st_ref_index_prefill *in);

/* The absolute position p_i of query token i; *request (if not NULL) gets its
 * request (with empty requests, the one whose range holds i). For i outside
 * 0..total_q-1 returns -1 with *request = -1. */
int st_ref_index_prefill_position(const st_ref_index_prefill *in, int i, int *request);

/* index_score: score[h][i][j] = scale * max over positions pos <= p_i of
 * block j of dot(q[i][h], k[pos]) for j < nb(p_i), -inf for the rest of the
 * row up to max_blocks (entries a kernel may leave unwritten). Dot products
 * are summed in double, in order of d, from the dequantized values; a NaN dot
 * product never wins the max, so a block whose visible dot products are all
 * NaN scores -inf. `score` is [H][total_q][max_blocks], written in full.
 *
 * Cost: H * D * 128 * sum_i nb(p_i) multiply-adds (every visible block is
 * done over all 128 positions, masked in the query's own block), on
 * `threads` pthreads (1..64) taking work items of (request, 32 query tokens),
 * biggest first. An item converts each block's K rows to double once for all
 * its tokens and heads; the inner loop keeps 2 x 8 dot products in registers
 * (3.5 to 5 GMAC/s per core at -O2, SSE2). Measured: one request of 16384
 * query tokens after a 57344-token prefix, H=2, D=128 (2.75e11 multiply-adds)
 * takes 6.2 s on 16 threads of a 16-core Xeon; then index_topk 0.3 s,
 * st_ref_index_topk_verify 0.05 s. Debug or sanitizer builds: several times
 * slower.
 *
 * Returns 0, or -1 without a full result if an input is inconsistent
 * (dtype, R < 0, H or D < 1, scale not > 0, cu_seqlens_q not starting at 0
 * or decreasing, a token seeing more blocks than max_blocks or bt_cols, a
 * page id outside 0..pages-1) or memory runs out. */
int st_ref_index_score(const st_ref_index_prefill *in, double *score, int threads);

/* index_topk: per (h, i) the reference selection from score [H][total_q]
 * [max_blocks] (double; a kernel's fp32 scores can be widened into one) into
 * topk_idx [H][total_q][topk]: the init_blocks first and local_blocks last
 * visible blocks in increasing order (forced; the query's own block is the
 * last), then the others by score descending, ties to the lower index, NaN as
 * -inf; min(topk, nb(p_i)) ids, then -1. Entries j >= nb(p_i) are not read. */
void st_ref_index_topk(const st_ref_index_prefill *in, const double *score, int32_t *topk_idx);

/* Checks a kernel's fp32 scores (row (h, i) at got + h * got_stride_head +
 * i * got_stride_row, in elements) against the reference `ref` for j <
 * nb(p_i) only. A finite ref passes if |got - ref| <= atol + rtol * |ref|
 * (a NaN got fails); a ref beyond the fp32 range wants the same-signed
 * infinity; a ref of -inf (the reference's NaN-as-minus-infinity, or -inf
 * inputs) accepts got -inf or NaN, since NaN scores count as -inf; +inf wants
 * +inf. Returns the number of failing entries (0: all pass) with the first
 * in msg; *max_err gets the worst |got - ref| / (atol + rtol * |ref|) over
 * finite refs (+inf when a non-finite mismatch failed). */
int st_ref_index_score_verify(const st_ref_index_prefill *in, const double *ref, const float *got,
                              int64_t got_stride_head, int64_t got_stride_row, double atol, double rtol,
                              double *max_err, char *msg, size_t cap);

/* Checks a kernel's topk_idx (row (h, i) at got + h * got_stride_head +
 * i * got_stride_row) against the reference scores by the rule of
 * st_ref_index_decode_verify, per (h, i): every id -1 or visible, no
 * duplicates, min(topk, nb(p_i)) ids, the forced blocks present, and no
 * left-out block scoring above a chosen one by more than rel_tol * the row's
 * largest finite |score|. Returns the number of failing rows with the first
 * in msg; *max_violation gets the worst excess over the tolerance relative to
 * the row's scale (0 when none). */
int st_ref_index_topk_verify(const st_ref_index_prefill *in, const double *score, const int32_t *got,
                             int64_t got_stride_head, int64_t got_stride_row, double rel_tol, double *max_violation,
                             char *msg, size_t cap);

#endif
