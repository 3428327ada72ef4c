/* reference/dsa_index_logits.h - the double-precision reference of
 * dsa_index_logits (DeepSeek-V3.2's lightning indexer logits for prefill).
 *
 * Host arrays, as the op takes them (runtime/include/sparsetune.h):
 *  - q [s_q][H][128] fp8 e4m3 bytes, dense; weights [s_q][H] fp32, dense;
 *  - k: s_kv rows of 128 fp8 e4m3 bytes, k_stride bytes apart, and
 *    k_scale [s_kv] fp32;
 *  - ks, ke [s_q] int32: query i sees rows ks[i] <= j < ke[i], both clamped
 *    to 0..s_kv, none where ke <= ks.
 * logits[i][j] = sum over heads h of weights[i][h] * relu(dot(q[i][h], k[j])
 * * k_scale[j]) for the rows i sees, -inf for the others; relu(x) = x < 0 ?
 * 0 : x (a NaN stays NaN). The dot products of fp8 values are exact in
 * double (any order of summation gives the same value). */
#ifndef ST_REFERENCE_DSA_INDEX_LOGITS_H
#define ST_REFERENCE_DSA_INDEX_LOGITS_H

#include <stddef.h>
#include <stdint.h>

/* The index head dimension of the op (DeepSeek-V3.2's). */
#define ST_REF_DSA_LOGITS_HEAD_DIM 128

typedef struct st_ref_dsa_index_logits {
  int s_q, s_kv, H;
  int64_t k_stride; /* bytes from one k row to the next, >= 128 */
  const uint8_t *q;
  const float *weights;
  const uint8_t *k;
  const float *k_scale;
  const int32_t *ks, *ke;
} st_ref_dsa_index_logits;

/* The rows query i sees: [*lo, *hi), clamped to 0..s_kv, *lo == *hi when
 * none. */
void st_ref_dsa_index_logits_range(const st_ref_dsa_index_logits *in, int i, int *lo, int *hi);

/* Logits into `logits` [s_q][s_kv] (-inf outside each row's range), and
 * into row_scale [s_q] (NULL: not wanted) each row's scale for the
 * verifier: the largest over its visible rows of sum_h |weights[i][h]| x
 * sum_d |q[i][h][d] k[j][d]| x |k_scale[j]| (not below any |logit| of the
 * row; 0 for a row that sees nothing), using `threads` threads. Returns 0,
 * or -1 when out of memory. */
int st_ref_dsa_index_logits_compute(const st_ref_dsa_index_logits *in, double *logits, double *row_scale, int threads);

/* Checks a kernel's logits (row i at got + i * got_stride_row) against the
 * reference: every j < s_kv outside row i's range exactly -inf; inside it a
 * NaN where the reference has NaN, the same infinity where it has one, and
 * else within rel_tol x the row's scale (row_scale above: its largest
 * |logit| or, where larger, its largest sum of absolute terms, which bounds
 * fp32 rounding where heads of both signs cancel). Returns 0 if every
 * element passes, else the number of failing elements with the first in
 * msg; *max_err gets the largest error relative to its row's scale. */
int st_ref_dsa_index_logits_verify(const st_ref_dsa_index_logits *in, const double *logits, const double *row_scale,
                                   const float *got, int64_t got_stride_row, double rel_tol, double *max_err, char *msg,
                                   size_t msg_cap);

#endif
