/* sparse_attn_decode's reference is sparse_attn's for R requests of qlen
 * query tokens each (cu_seqlens_q NULL: the uniform split). */
#include "reference/sparse_attn_decode.h"

#include <string.h>

#include "reference/sparse_attn.h"

static st_ref_sparse_attn as_prefill(const st_ref_sparse_attn_decode *in) {
  st_ref_sparse_attn p = {.kv_dtype = in->kv_dtype,
                          .R = in->R,
                          .total_q = in->R * in->qlen,
                          .Hq = in->Hq,
                          .Hkv = in->Hkv,
                          .D = in->D,
                          .topk = in->topk,
                          .bt_cols = in->bt_cols,
                          .pages = in->pages,
                          .q = in->q,
                          .k_cache = in->k_cache,
                          .v_cache = in->v_cache,
                          .scale_mode = in->scale_mode,
                          .k_scale = in->k_scale,
                          .v_scale = in->v_scale,
                          .k_scales = in->k_scales,
                          .v_scales = in->v_scales,
                          .topk_idx = in->topk_idx,
                          .block_table = in->block_table,
                          .cu_seqlens_q = NULL,
                          .seq_lens = in->seq_lens,
                          .sm_scale = in->sm_scale};
  memcpy(p.k_stride, in->k_stride, sizeof p.k_stride);
  memcpy(p.v_stride, in->v_stride, sizeof p.v_stride);
  memcpy(p.ks_stride, in->ks_stride, sizeof p.ks_stride);
  memcpy(p.vs_stride, in->vs_stride, sizeof p.vs_stride);
  return p;
}

int st_ref_sparse_attn_decode_compute(const st_ref_sparse_attn_decode *in, double *o, double *lse, int threads) {
  if (in->qlen < 1) return -1;
  const st_ref_sparse_attn p = as_prefill(in);
  return st_ref_sparse_attn_compute(&p, o, lse, threads);
}

int st_ref_sparse_attn_decode_verify(const st_ref_sparse_attn_decode *in, const double *ref_o, const double *ref_lse,
                                     const uint16_t *got_o, const float *got_lse, double tol, double *max_err,
                                     char *msg, size_t msg_cap) {
  const st_ref_sparse_attn p = as_prefill(in);
  return st_ref_sparse_attn_verify(&p, ref_o, ref_lse, got_o, got_lse, tol, max_err, msg, msg_cap);
}
