#include "reference/mla_sparse_prefill.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference/mla_sparse_decode.h"

/* The decode reference's view of a prefill: each query row is a request of
 * one token (so topk_length [s_q] is per request) and each kv row a page of
 * one token (so a slot is a kv row and the page stride is the row stride).
 * q must be dense there. */
static st_ref_mla_sparse_decode as_decode(const st_ref_mla_sparse_prefill *in, const uint16_t *dense_q) {
  return (st_ref_mla_sparse_decode){.kv_dtype = ST_DTYPE_BF16,
                                    .B = in->s_q,
                                    .qlen = 1,
                                    .Hq = in->h_q,
                                    .topk = in->topk,
                                    .page_size = 1,
                                    .pages = in->s_kv,
                                    .q = dense_q,
                                    .kv = in->kv,
                                    .kv_stride = {in->kv_stride, in->kv_stride},
                                    .indices = in->indices,
                                    .topk_length = in->topk_length,
                                    .sink = in->sink,
                                    .sm_scale = in->sm_scale};
}

static int shape_ok(const st_ref_mla_sparse_prefill *in) {
  return in->s_q >= 1 && in->h_q >= 1 && in->s_kv >= 1 && in->topk >= 1;
}

/* q packed dense, or q itself when it already is; NULL if memory ran out.
 * *owned is set when the caller must free the result. */
static const uint16_t *dense_q(const st_ref_mla_sparse_prefill *in, uint16_t **owned) {
  *owned = NULL;
  if (in->q_stride[1] == ST_MLA_DIM_QK && in->q_stride[0] == (int64_t)in->h_q * ST_MLA_DIM_QK) return in->q;
  uint16_t *q = malloc(sizeof *q * (size_t)in->s_q * (size_t)in->h_q * ST_MLA_DIM_QK);
  if (!q) return NULL;
  for (int r = 0; r < in->s_q; r++)
    for (int h = 0; h < in->h_q; h++)
      memcpy(q + ((size_t)r * (size_t)in->h_q + (size_t)h) * ST_MLA_DIM_QK,
             in->q + r * in->q_stride[0] + h * in->q_stride[1], sizeof *q * ST_MLA_DIM_QK);
  *owned = q;
  return q;
}

int st_ref_mla_sparse_prefill_compute(const st_ref_mla_sparse_prefill *in, double *o, double *lse, double *max_logits,
                                      int threads) {
  if (!shape_ok(in)) return -1;
  uint16_t *owned = NULL;
  const uint16_t *q = dense_q(in, &owned);
  if (!q) return -1;
  const st_ref_mla_sparse_decode view = as_decode(in, q);
  const int rc = st_ref_mla_sparse_attend(&view, o, lse, max_logits, threads);
  free(owned);
  return rc;
}

int st_ref_mla_sparse_prefill_verify(const st_ref_mla_sparse_prefill *in, const double *ref_o, const double *ref_lse,
                                     const double *ref_max_logits, const uint16_t *got_o, const float *got_lse,
                                     const float *got_max_logits, double tol, double *max_err, char *msg,
                                     size_t msg_cap) {
  if (msg_cap) msg[0] = '\0';
  *max_err = 0;
  if (!shape_ok(in)) {
    if (msg_cap) snprintf(msg, msg_cap, "the shape has a count below 1");
    return -1;
  }
  if (got_max_logits && !ref_max_logits) {
    if (msg_cap) snprintf(msg, msg_cap, "got_max_logits is given without ref_max_logits");
    return -1;
  }
  const st_ref_mla_sparse_decode view = as_decode(in, in->q); /* the verifier never reads q */
  int bad = st_ref_mla_sparse_decode_verify(&view, ref_o, ref_lse, got_o, got_lse, tol, max_err, msg, msg_cap);
  if (bad < 0 || !got_max_logits) return bad;
  const size_t pairs = (size_t)in->s_q * (size_t)in->h_q;
  for (size_t at = 0; at < pairs; at++) {
    /* ref -inf stands for "no valid entry", which the log check demands exactly */
    if (st_ref_mla_log_ok(got_max_logits[at], &ref_max_logits[at], 1, tol)) continue;
    if (!bad && msg_cap)
      snprintf(msg, msg_cap, "row %zu head %zu: max_logits %.9g, ref %.9g (tolerance %.3g)", at / (size_t)in->h_q,
               at % (size_t)in->h_q, (double)got_max_logits[at], ref_max_logits[at], tol);
    bad++;
  }
  return bad;
}
