/* reference/mla_sparse_prefill.h - the double-precision reference of
 * mla_sparse_prefill (DeepSeek-V3.2 token-sparse MLA attention, prefill, as
 * FlashMLA's sparse prefill is called) and its verifier.
 *
 * Host arrays, bf16 bits: q [s_q][h_q][576] and kv [s_kv][1][576] (V = the
 * first 512 values), each with its strides in elements (innermost stride
 * 1, so rows may be padded). indices [s_q][1][topk] int32, dense: token
 * rows of kv; an entry < 0 or >= s_kv is none (skipped), a repeated entry
 * counts each time. topk_length [s_q] (NULL: topk for all): only the first
 * clamp(topk_length[i], 0, topk) entries of row i count. sink [h_q] fp32
 * (NULL: none). No causal mask: the indices decide what a row sees.
 *
 * The math is mla_sparse_decode's (see reference/mla_sparse_decode.h) with
 * each query row its own request of one token over a pool of s_kv pages of
 * one token; this is a view onto it, plus max_logits: per (row, head) the
 * largest sm_scale * dot(q, k_j) over the valid entries, -inf for none.
 * The kernels' contract takes h_q a multiple of 16 up to 128; the reference
 * takes any h_q >= 1. */
#ifndef ST_REFERENCE_MLA_SPARSE_PREFILL_H
#define ST_REFERENCE_MLA_SPARSE_PREFILL_H

#include <stddef.h>
#include <stdint.h>

typedef struct st_ref_mla_sparse_prefill {
  int s_q, h_q, s_kv, topk;
  const uint16_t *q;          /* [s_q][h_q][576] bf16 bits, strided as below */
  int64_t q_stride[2];        /* row, head, in elements                      */
  const uint16_t *kv;         /* [s_kv][1][576] bf16 bits                     */
  int64_t kv_stride;          /* token row, in elements                       */
  const int32_t *indices;     /* dense [s_q][topk]                            */
  const int32_t *topk_length; /* [s_q] or NULL                                */
  const float *sink;          /* [h_q] or NULL                                */
  double sm_scale;
} st_ref_mla_sparse_prefill;

/* Computes o, dense [s_q][h_q][512], lse and max_logits, dense [s_q][h_q]
 * (either NULL = not wanted), into the caller's arrays using up to
 * `threads` threads (1..64). Returns 0, or -1 if host memory ran out (the
 * outputs are then incomplete) or a count is below 1. */
int st_ref_mla_sparse_prefill_compute(const st_ref_mla_sparse_prefill *in, double *o, double *lse, double *max_logits,
                                      int threads);

/* Compares a kernel's output with the reference, with the decode
 * verifier's tolerances. got_o: dense [s_q][h_q][512] bf16 bits; got_lse
 * and got_max_logits: dense [s_q][h_q] float, each NULL to leave it
 * unchecked (ref_max_logits is needed with got_max_logits; ref_lse NULL
 * checks only the rows without a valid entry). o and lse are checked as st_ref_mla_sparse_decode_verify
 * does; max_logits as lse (-inf exactly where ref is -inf, else within tol
 * plus 8 float ulps). Returns the failing (row, head) pairs of o and lse
 * plus those of max_logits, 0 = pass, -1 for a shape it cannot
 * check; the
 * first failure is described in msg. *max_err gets the worst relative error
 * of o seen. */
int st_ref_mla_sparse_prefill_verify(const st_ref_mla_sparse_prefill *in, const double *ref_o, const double *ref_lse,
                                     const double *ref_max_logits, const uint16_t *got_o, const float *got_lse,
                                     const float *got_max_logits, double tol, double *max_err, char *msg,
                                     size_t msg_cap);

#endif
