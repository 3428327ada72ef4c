/* reference/sparse_attn.h - the double-precision reference of sparse_attn
 * (prefill: varlen block-sparse GQA attention over a paged KV cache) and its
 * verifier. sparse_attn_decode's reference is a thin wrapper over this one:
 * a decode batch is R requests of qlen query tokens each.
 *
 * Host arrays. q [total_q][Hq][D] bf16 bits, dense. The K and V caches are
 * element views [pages][Hkv][128][D] in the storage dtype (bf16 bits or fp8
 * e4m3 bytes) with the strides below, in elements, the innermost one 1: the
 * two paged layouts of sparsetune.h are two choices of strides. topk_idx
 * [Hkv][total_q][topk], block_table [R][bt_cols], seq_lens [R] and
 * cu_seqlens_q [R+1] are dense.
 *
 * Request r owns the query rows cu_seqlens_q[r] <= i < cu_seqlens_q[r+1]
 * (q_len[r] = their count); row i sits at p = seq_lens[r] - q_len[r] + (i -
 * cu_seqlens_q[r]). cu_seqlens_q NULL means R requests of total_q / R rows
 * each (a uniform decode batch). Q head h reads kv head g = h / (Hq / Hkv).
 * Its keys are, for every entry j of its topk row with 0 <= j < p / 128 + 1,
 * the positions 128*j + i <= p of page block_table[r][j] (a block listed
 * twice counts twice; p < 0 leaves no key). score = sm_scale * dot(q, k), o =
 * softmax(score) . v, lse = ln(sum exp(score)); a row without keys gets o =
 * 0, lse = -inf. Everything is computed in double from the dequantized
 * values: bf16 as is (scale_mode is ignored, the contract requires NONE), fp8
 * times 1, k_scale / v_scale or k_scales / v_scales[page][g][slot] by
 * scale_mode. Every score is the plain left-to-right dot product over d and
 * every sum runs in key order (topk entry order, then slot), so the result
 * does not depend on the thread count.
 *
 * Cost: one multiply-add per (visible key, q head, d) for the scores and one
 * for o, plus one exp per (visible key, q head). One request of 16384 query
 * tokens after a 56K prefix, Hq 32, Hkv 2, D 128, topk 16 is 2.4e11
 * multiply-adds: measured 5.8 s with 16 threads on 16 Xeon cores, 24 s
 * with 2 threads on an AMD EPYC (5e9 per second and core,
 * -O2, baseline x86-64). Where the speed comes from: K is kept transposed
 * so that 16 keys' dot products run as independent vector sums (each still
 * summed left to right over d), o is accumulated 16 elements at a time
 * across the keys, rows of converted blocks are padded off the 1 KiB stride
 * that thrashes L1, and each thread keeps up to 16 MiB of converted blocks
 * for the following rows of its request (they mostly select the same
 * blocks). That is 4x the decode reference's previous single-block code,
 * with the same bits. */
#ifndef ST_REFERENCE_SPARSE_ATTN_H
#define ST_REFERENCE_SPARSE_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include "sparsetune.h"

typedef struct st_ref_sparse_attn {
  st_dtype kv_dtype; /* ST_DTYPE_BF16 or ST_DTYPE_FP8_E4M3 */
  int R, total_q, Hq, Hkv, D, topk;
  int bt_cols; /* columns of block_table */
  int64_t pages;
  const uint16_t *q;                /* dense [total_q][Hq][D] bf16 bits */
  const void *k_cache, *v_cache;    /* element views [pages][Hkv][128][D] */
  int64_t k_stride[3], v_stride[3]; /* page, head, token (innermost stride 1) */
  st_kv_scale_mode scale_mode;
  float k_scale, v_scale;             /* SCALAR mode */
  const float *k_scales, *v_scales;   /* TENSOR mode views [pages][Hkv][128] */
  int64_t ks_stride[3], vs_stride[3]; /* page, head, slot */
  const int32_t *topk_idx;            /* dense [Hkv][total_q][topk] */
  const int32_t *block_table;         /* dense [R][bt_cols] */
  const int32_t *cu_seqlens_q;        /* [R+1]: 0, non-decreasing, total_q; NULL = total_q / R rows each */
  const int32_t *seq_lens;            /* [R] */
  double sm_scale;
} st_ref_sparse_attn;

/* Computes o, dense [total_q][Hq][D], and lse, dense [total_q][Hq] (NULL =
 * not wanted), into the caller's arrays using up to `threads` threads
 * (1..64) over (run of up to 32 rows of one request, kv head) items; threads
 * that cannot start leave their share to the others. Returns 0, or -1 if
 * host memory ran out (the outputs are then incomplete) or the shape is
 * malformed: Hkv < 1, Hq not a multiple of Hkv, D < 1, topk < 0, or
 * cu_seqlens_q not 0, non-decreasing, total_q (with NULL: total_q not a
 * multiple of R, or R = 0 with total_q > 0). */
int st_ref_sparse_attn_compute(const st_ref_sparse_attn *in, double *o, double *lse, int threads);

/* Compares a kernel's output with the reference. got_o: dense
 * [total_q][Hq][D] bf16 bits; got_lse: dense [total_q][Hq] float, or NULL to
 * leave lse unchecked (ref_lse NULL checks only that empty rows have -inf).
 * Per (row, q head): ||got - ref|| / ||ref|| <= tol (||got|| when ref is all
 * zeros); a row without keys must be all zeros with lse -inf exactly; a NaN
 * or inf in got_o always fails; |got_lse - ref_lse| <= tol (absolute,
 * natural log), plus |ref_lse| * 2^-20 (the float's rounding). A head that
 * fails these gets a slack for the kernels' fp32 sums (up to 256 heads a
 * call): scores may move by eps = sm_scale * D * 2^-23 * max_key sum_d
 * |q_d k_d|, so lse by eps and o by (e^(2 eps) - 1) * sum_j p_j ||v_j - o||
 * (nothing with q near 1; with q near 2^17, a head whose best keys lie
 * within eps of each other, which no fp32 kernel decides). Returns the
 * number of failing (row, head) pairs, 0 = pass; the
 * first failure is described in msg (row, head, request, position,
 * error, worst element). *max_err gets the worst relative error of o seen
 * (inf where a row held a NaN or inf, or was nonzero where it must be zero).
 * A malformed shape (as for compute) returns -1 with the reason in msg. */
int st_ref_sparse_attn_verify(const st_ref_sparse_attn *in, const double *ref_o, const double *ref_lse,
                              const uint16_t *got_o, const float *got_lse, double tol, double *max_err, char *msg,
                              size_t msg_cap);

#endif
