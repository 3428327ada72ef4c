/* reference/mla_sparse_decode.h - the double-precision reference of
 * mla_sparse_decode (DeepSeek-V3.2 token-sparse MLA attention, decode) and
 * its verifier.
 *
 * MLA with one latent KV head: a cache row holds K, 576 values (512 latent
 * "NoPE" dims, then 64 RoPE dims), and V is its first 512 values. Host
 * arrays: q [B*qlen][Hq][576] bf16 bits, dense (row b*qlen + t). The cache
 * is a view [pages][page_size][row] with the page and token strides below,
 * in elements of the storage:
 *   bf16: a row is 576 bf16 values (K all 576, V the first 512);
 *   fp8:  a row is 656 bytes: 512 e4m3 latent values, 4 fp32 scales
 *         (scale i multiplies values 128*i .. 128*i+127), 64 bf16 RoPE
 *         values; K = [latent * scale, rope], V = latent * scale.
 * indices [B*qlen][topk] int32, dense: physical token slots page *
 * page_size + offset; a slot < 0 or >= pages * page_size is none (skipped),
 * a slot listed twice counts twice. topk_length [B] (NULL: topk for all):
 * only the first clamp(topk_length[b], 0, topk) entries of request b's rows
 * count. sink [Hq] fp32 (NULL: none).
 *
 * Per (row, q head h): s_j = sm_scale * dot(q, k_j) over the row's valid
 * entries j, lse = ln(sum_j exp(s_j)), o = (sum_j exp(s_j) v_j / sum_j
 * exp(s_j)) * exp(lse) / (exp(lse) + exp(sink[h])) (the sink only scales
 * o; lse stays the log of the keys' sum; +inf sink gives o = 0, -inf
 * changes nothing). A row with no valid entry: o = 0, lse = -inf. All in
 * double from the dequantized values. */
#ifndef ST_REFERENCE_MLA_SPARSE_DECODE_H
#define ST_REFERENCE_MLA_SPARSE_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "sparsetune.h"

#define ST_MLA_DIM_QK 576    /* K and q: 512 latent + 64 RoPE             */
#define ST_MLA_DIM_V 512     /* V and o: the latent part                   */
#define ST_MLA_DIM_ROPE 64   /* the RoPE part, never quantized             */
#define ST_MLA_FP8_ROW 656   /* bytes of an fp8 token row                  */
#define ST_MLA_FP8_GROUP 128 /* latent values per fp32 scale (4 a row)    */

typedef struct st_ref_mla_sparse_decode {
  st_dtype kv_dtype; /* ST_DTYPE_BF16 or ST_DTYPE_FP8_E4M3 (the 656-byte rows) */
  int B, qlen, Hq, topk, page_size;
  int64_t pages;
  const uint16_t *q;          /* dense [B*qlen][Hq][576] bf16 bits                  */
  const void *kv;             /* [pages][page_size][576 bf16 | 656 bytes]            */
  int64_t kv_stride[2];       /* page, token, in elements (bf16: 2 bytes, fp8: 1)    */
  const int32_t *indices;     /* dense [B*qlen][topk]                                */
  const int32_t *topk_length; /* [B] or NULL                                         */
  const float *sink;          /* [Hq] or NULL                                        */
  double sm_scale;
} st_ref_mla_sparse_decode;

/* Dequantizes one cache row (576 bf16 values, or the 656 bytes of an fp8
 * row) into k[576], exactly as the op contract says. */
void st_ref_mla_dequant_row(st_dtype kv_dtype, const void *row, double *k);

/* Quantizes 576 values into the 656-byte fp8 row an engine writes: each
 * 128 latent values get the scale max|x| / 448 (1 where they are all 0) and
 * are stored as e4m3(x / scale); the 64 RoPE values are stored as bf16. */
void st_ref_mla_fp8_pack_row(const float *values, uint8_t *row);

/* The entries of row `row` that count (topk_length applied), 0..topk. */
int st_ref_mla_row_entries(const st_ref_mla_sparse_decode *in, int row);

/* Whether slot `slot` names a token of the pool (else it is none). */
int st_ref_mla_slot_valid(const st_ref_mla_sparse_decode *in, int32_t slot);

/* Computes o, dense [B*qlen][Hq][512], and lse, dense [B*qlen][Hq] (NULL =
 * not wanted), into the caller's arrays using up to `threads` threads
 * (1..64); threads that cannot start leave their share to the others.
 * Returns 0, or -1 if host memory ran out (the outputs are then incomplete)
 * or the shape is not one the reference computes (a count below 1). */
int st_ref_mla_sparse_decode_compute(const st_ref_mla_sparse_decode *in, double *o, double *lse, int threads);

/* The attention itself, shared by the decode and prefill references: as
 * st_ref_mla_sparse_decode_compute, and also max_logits, dense [B*qlen][Hq]
 * (NULL = not wanted): the largest sm_scale * dot(q, k_j) over the row's
 * valid entries, -inf where there is none. */
int st_ref_mla_sparse_attend(const st_ref_mla_sparse_decode *in, double *o, double *lse, double *max_logits,
                             int threads);

/* Whether a kernel's float log-domain value (lse, max_logits) matches the
 * reference `ref` (NULL: only the no-entry case is checked): exactly -inf
 * where the row has no valid entry or ref is -inf; else |got - ref| <= tol
 * plus 8 float ulps of |ref|. NaN fails. */
int st_ref_mla_log_ok(double got, const double *ref, int has_keys, double tol);

/* Compares a kernel's output with the reference. got_o: dense
 * [B*qlen][Hq][512] bf16 bits; got_lse: dense [B*qlen][Hq] float, or NULL
 * to leave lse unchecked (ref_lse NULL checks only that rows without a
 * valid entry have -inf). Per (row, q head): ||got - ref|| / ||ref|| <= tol
 * (||got|| where ref is all zeros, as with an infinite sink); a row without
 * a valid entry must be all zeros with lse exactly -inf; a NaN or inf in
 * got_o always fails; |got_lse - ref_lse| <= tol (absolute, natural log;
 * plus 8 float ulps of |ref|). Returns the number of failing (row, head)
 * pairs, 0 = pass, -1 for a shape it cannot check; the first failure is
 * described in msg. *max_err gets the worst relative error of o seen (inf
 * for a NaN or inf, or a nonzero row that must be zero). */
int st_ref_mla_sparse_decode_verify(const st_ref_mla_sparse_decode *in, const double *ref_o, const double *ref_lse,
                                    const uint16_t *got_o, const float *got_lse, double tol, double *max_err, char *msg,
                                    size_t msg_cap);

#endif
