/* reference/sparse_attn_decode.h - the double-precision reference of
 * sparse_attn_decode and its verifier.
 *
 * Host arrays. q [R*qlen][Hq][D] bf16 bits, dense. The K and V caches are
 * element views [pages][Hkv][128][D] in the storage dtype (bf16 bits or fp8
 * e4m3 bytes) with the strides below, in elements, the innermost one 1: the
 * two paged layouts of sparsetune.h are two choices of strides. topk_idx
 * [Hkv][R*qlen][topk], block_table [R][bt_cols] and seq_lens [R] are dense.
 *
 * Query token t of request r (row r*qlen + t) sits at p = seq_lens[r] - qlen
 * + t; q head h reads kv head g = h / (Hq / Hkv). Its keys are, for every
 * entry j of its topk row with 0 <= j < p / 128 + 1, the positions 128*j + i
 * <= p of page block_table[r][j] (a block listed twice counts twice; p < 0
 * leaves no key). score = sm_scale * dot(q, k), o = softmax(score) . v, lse =
 * ln(sum exp(score)); a row without keys gets o = 0, lse = -inf. Everything
 * is computed in double from the dequantized values: bf16 as is (scale_mode
 * is ignored, the contract requires NONE), fp8 times 1, k_scale / v_scale or
 * k_scales / v_scales[page][g][slot] by scale_mode. */
#ifndef ST_REFERENCE_SPARSE_ATTN_DECODE_H
#define ST_REFERENCE_SPARSE_ATTN_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "sparsetune.h"

typedef struct st_ref_sparse_attn_decode {
  st_dtype kv_dtype; /* ST_DTYPE_BF16 or ST_DTYPE_FP8_E4M3 */
  int R, qlen, Hq, Hkv, D, topk;
  int bt_cols; /* columns of block_table */
  int64_t pages;
  const uint16_t *q;                /* dense [R*qlen][Hq][D] bf16 bits */
  const void *k_cache, *v_cache;    /* element views [pages][Hkv][128][D] */
  int64_t k_stride[3], v_stride[3]; /* page, head, token (innermost stride 1) */
  st_kv_scale_mode scale_mode;
  float k_scale, v_scale;             /* SCALAR mode */
  const float *k_scales, *v_scales;   /* TENSOR mode views [pages][Hkv][128] */
  int64_t ks_stride[3], vs_stride[3]; /* page, head, slot */
  const int32_t *topk_idx;            /* dense [Hkv][R*qlen][topk] */
  const int32_t *block_table;         /* dense [R][bt_cols] */
  const int32_t *seq_lens;            /* [R] */
  double sm_scale;
} st_ref_sparse_attn_decode;

/* Computes o, dense [R*qlen][Hq][D], and lse, dense [R*qlen][Hq] (NULL = not
 * wanted), into the caller's arrays using up to `threads` threads (1..64),
 * as st_ref_sparse_attn_compute (reference/sparse_attn.h) does for a batch
 * of qlen tokens per request; threads that cannot start leave their share
 * to the others. Returns 0, or -1 if host memory ran out (the outputs are then
 * incomplete) or Hq is not a multiple of Hkv. */
int st_ref_sparse_attn_decode_compute(const st_ref_sparse_attn_decode *in, double *o, double *lse, int threads);

/* Compares a kernel's output with the reference. got_o: dense [R*qlen][Hq][D]
 * bf16 bits; got_lse: dense [R*qlen][Hq] float, or NULL to leave lse
 * unchecked (ref_lse NULL checks only that empty rows have -inf). Per (row, q
 * head): ||got - ref|| / ||ref|| <= tol (||got|| when ref is all zeros); a
 * row without keys must be all zeros with lse -inf exactly; a NaN or inf in
 * got_o always fails; |got_lse - ref_lse| <= tol (absolute, natural log).
 * Returns the number of failing (row, head) pairs, 0 = pass; the first
 * failure is described in msg (row, head, request, position, error, worst
 * element). *max_err gets the worst relative error of o seen (inf where a
 * row held a NaN or inf, or was nonzero where it must be zero). */
int st_ref_sparse_attn_decode_verify(const st_ref_sparse_attn_decode *in, const double *ref_o, const double *ref_lse,
                                     const uint16_t *got_o, const float *got_lse, double tol, double *max_err,
                                     char *msg, size_t msg_cap);

#endif
