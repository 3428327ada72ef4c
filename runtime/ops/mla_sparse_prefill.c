/* ops/mla_sparse_prefill.c - validation, fit, launch math and launch of
 * mla_sparse_prefill. Shared by the tuner and the runtime: what was timed is
 * what runs. The kernels and most of the launch math are
 * mla_sparse_decode's (ops/mla_sparse_prefill.h says how a prefill call is
 * seen as a decode batch). */
#include "ops/mla_sparse_prefill.h"
#include "ops/op.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/tensor_check.h"

#define DIM_QK ST_MLA_SPARSE_DECODE_DIM_QK
#define DIM_V ST_MLA_SPARSE_DECODE_DIM_V

st_status st_mla_sparse_prefill_config_from_params(const st_params *kernel, const st_params *launch,
                                                   st_mla_sparse_prefill_config *cfg, st_err *err) {
  const st_status s = st_mla_sparse_decode_config_from_params(kernel, launch, cfg, err);
  if (s != ST_OK) return s;
  if (cfg->dtype != ST_DTYPE_BF16)
    return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter dtype='%s': mla_sparse_prefill reads bf16 kv rows only",
                   st_dtype_name(cfg->dtype));
  return ST_OK;
}

/* The decode batch a prefill call is: a one-token request per query token
 * (qlen 1, topk_length per request), kv a cache of one-token pages (slot =
 * kv row), indices [s_q, 1, topk] seen as [s_q, topk]. */
static void as_decode(const st_mla_sparse_prefill_args *a, st_mla_sparse_decode_args *d) {
  st_mla_sparse_decode_args_init(d);
  d->q = a->q;
  d->kv_cache = a->kv;
  d->indices = a->indices;
  d->indices.ndim = 2;
  d->indices.shape[1] = a->indices.shape[2];
  d->indices.stride[1] = a->indices.stride[2];
  d->indices.shape[2] = d->indices.stride[2] = 0;
  d->topk_length = a->topk_length;
  d->attn_sink = a->attn_sink;
  d->o = a->o;
  d->lse = a->lse;
  d->sm_scale = a->sm_scale;
  d->qlen = 1;
  d->pdl = a->pdl;
}

/* An optional tensor: absent (data NULL) or `dtype` with `ndim` dims of the
 * given shape. */
static st_status check_optional(const st_tensor *t, const char *name, st_dtype dtype, int ndim, const int64_t *want,
                                const char *want_text, st_err *err) {
  if (!t->data) return ST_OK;
  const st_status s = st_check_tensor(t, name, dtype, ndim, err);
  if (s != ST_OK) return s;
  for (int i = 0; i < ndim; i++)
    if (t->shape[i] != want[i])
      return st_fail(err, ST_ERR_INVALID_ARG, "%s.shape[%d]=%lld must be %lld (%s)", name, i, (long long)t->shape[i],
                     (long long)want[i], want_text);
  return ST_OK;
}

static st_status check_q(const st_mla_sparse_prefill_args *a, st_err *err) {
  const st_status s = st_check_tensor(&a->q, "q", ST_DTYPE_BF16, 3, err);
  if (s != ST_OK) return s;
  const int64_t s_q = a->q.shape[0], h_q = a->q.shape[1];
  if (a->q.shape[2] != DIM_QK)
    return st_fail(err, ST_ERR_INVALID_ARG, "q.shape[2]=%lld must be %d (512 latent + 64 RoPE dims)",
                   (long long)a->q.shape[2], DIM_QK);
  if (s_q > ST_MLA_SPARSE_PREFILL_MAX_ROWS)
    return st_fail(err, ST_ERR_INVALID_ARG, "s_q=%lld (q.shape[0]) is outside 1..%d", (long long)s_q,
                   ST_MLA_SPARSE_PREFILL_MAX_ROWS);
  if (h_q % ST_MLA_SPARSE_DECODE_HEAD_ALIGN || h_q > ST_MLA_SPARSE_DECODE_MAX_HEADS)
    return st_fail(err, ST_ERR_UNSUPPORTED, "h_q=%lld (q.shape[1]) is not a multiple of %d in %d..%d", (long long)h_q,
                   ST_MLA_SPARSE_DECODE_HEAD_ALIGN, ST_MLA_SPARSE_DECODE_HEAD_ALIGN, ST_MLA_SPARSE_DECODE_MAX_HEADS);
  /* 16-byte vector loads of q rows. */
  return st_check_vector_rows(&a->q, "q", 16, err);
}

static st_status check_kv(const st_tensor *kv, st_err *err) {
  if (kv->dtype != ST_DTYPE_BF16)
    return st_fail(err, ST_ERR_INVALID_ARG, "kv.dtype=%d is not bf16 (%d): mla_sparse_prefill reads bf16 rows",
                   (int)kv->dtype, (int)ST_DTYPE_BF16);
  const st_status s = st_check_tensor(kv, "kv", ST_DTYPE_BF16, 3, err);
  if (s != ST_OK) return s;
  if (kv->shape[1] != 1 || kv->shape[2] != DIM_QK)
    return st_fail(err, ST_ERR_INVALID_ARG, "kv.shape=[%lld,%lld,%lld] must be [s_kv, 1, %d] (one latent head)",
                   (long long)kv->shape[0], (long long)kv->shape[1], (long long)kv->shape[2], DIM_QK);
  /* 16-byte vector loads of kv rows. */
  return st_check_vector_rows(kv, "kv", 16, err);
}

static st_status check_indices(const st_tensor *idx, int64_t s_q, st_err *err) {
  const st_status s = st_check_tensor(idx, "indices", ST_DTYPE_INT32, 3, err);
  if (s != ST_OK) return s;
  if (idx->shape[0] != s_q || idx->shape[1] != 1)
    return st_fail(err, ST_ERR_INVALID_ARG, "indices.shape=[%lld,%lld,%lld] must be [s_q=%lld, 1, topk]",
                   (long long)idx->shape[0], (long long)idx->shape[1], (long long)idx->shape[2], (long long)s_q);
  if (idx->shape[2] > ST_MLA_SPARSE_DECODE_MAX_TOPK)
    return st_fail(err, ST_ERR_INVALID_ARG, "topk=%lld (indices.shape[2]) is outside 1..%d", (long long)idx->shape[2],
                   ST_MLA_SPARSE_DECODE_MAX_TOPK);
  return ST_OK;
}

static st_status check_outputs(const st_mla_sparse_prefill_args *a, int64_t s_q, int64_t h_q, st_err *err) {
  st_status s;
  if ((s = st_check_tensor(&a->o, "o", ST_DTYPE_BF16, 3, err)) != ST_OK) return s;
  if (a->o.shape[0] != s_q || a->o.shape[1] != h_q || a->o.shape[2] != DIM_V)
    return st_fail(err, ST_ERR_INVALID_ARG, "o.shape=[%lld,%lld,%lld] must be [s_q=%lld, h_q=%lld, %d]",
                   (long long)a->o.shape[0], (long long)a->o.shape[1], (long long)a->o.shape[2], (long long)s_q,
                   (long long)h_q, DIM_V);
  const int64_t pairs[2] = {s_q, h_q};
  if ((s = check_optional(&a->lse, "lse", ST_DTYPE_FP32, 2, pairs, "[s_q, h_q]", err)) != ST_OK) return s;
  return check_optional(&a->max_logits, "max_logits", ST_DTYPE_FP32, 2, pairs, "[s_q, h_q]", err);
}

st_status st_mla_sparse_prefill_check_args(const st_mla_sparse_prefill_args *a, st_err *err) {
  if (!a) return st_fail(err, ST_ERR_INVALID_ARG, "args is NULL");
  st_status s;
  if (!(isfinite(a->sm_scale) && a->sm_scale > 0))
    return st_fail(err, ST_ERR_INVALID_ARG, "sm_scale=%g must be positive and finite", (double)a->sm_scale);
  if ((s = check_q(a, err)) != ST_OK || (s = check_kv(&a->kv, err)) != ST_OK) return s;
  const int64_t s_q = a->q.shape[0], h_q = a->q.shape[1];
  if ((s = check_indices(&a->indices, s_q, err)) != ST_OK) return s;
  const int64_t n_tlen[1] = {s_q}, n_sink[1] = {h_q};
  if ((s = check_optional(&a->topk_length, "topk_length", ST_DTYPE_INT32, 1, n_tlen, "s_q", err)) != ST_OK ||
      (s = check_optional(&a->attn_sink, "attn_sink", ST_DTYPE_FP32, 1, n_sink, "h_q", err)) != ST_OK)
    return s;
  if ((s = check_outputs(a, s_q, h_q, err)) != ST_OK) return s;
  if (a->pdl != 0 && a->pdl != 1) return st_fail(err, ST_ERR_INVALID_ARG, "pdl=%d must be 0 or 1", a->pdl);
  return ST_OK;
}

st_status st_mla_sparse_prefill_check_fit(const st_mla_sparse_prefill_config *cfg, const st_mla_sparse_prefill_args *a,
                                          st_err *err) {
  st_mla_sparse_decode_args d;
  as_decode(a, &d);
  return st_mla_sparse_decode_check_fit(cfg, &d, err);
}

st_status st_mla_sparse_prefill_plan_make(const st_mla_sparse_prefill_config *cfg, const st_mla_sparse_prefill_args *a,
                                          int sm_count, st_mla_sparse_prefill_plan *plan, st_err *err) {
  st_mla_sparse_decode_args d;
  as_decode(a, &d);
  const st_status s = st_mla_sparse_decode_plan_make(cfg, &d, sm_count, plan, err);
  if (s != ST_OK) return s;
  st_mla_sparse_prefill_params *p = &plan->params;
  p->max_logits = a->max_logits.data;
  if (a->max_logits.data) {
    p->max_logits_stride_row = a->max_logits.stride[0];
    p->max_logits_stride_head = a->max_logits.stride[1];
  }
  return ST_OK;
}

st_status st_mla_sparse_prefill_launch(const st_cu *cu, CUfunction main_fn, CUfunction merge_fn,
                                       const st_mla_sparse_prefill_plan *plan, void *workspace, size_t workspace_bytes,
                                       CUstream stream, st_err *err) {
  return st_mla_sparse_decode_launch(cu, main_fn, merge_fn, plan, workspace, workspace_bytes, stream, err);
}

st_status st_mla_sparse_prefill_dispatch_key(const st_mla_sparse_prefill_args *a, char *key, size_t cap,
                                             st_params *fields, st_err *err) {
  const long long s_q = a->q.shape[0], Hq = a->q.shape[1], topk = a->indices.shape[2];
  int n = snprintf(key, cap, "%s:Hq=%lld,s_q=%lld,topk=%lld", ST_MLA_SPARSE_PREFILL_OP, Hq, s_q, topk);
  if (n < 0 || (size_t)n >= cap) return st_fail(err, ST_ERR_INVALID_ARG, "dispatch key buffer too small");
  if (!fields) return ST_OK;
  fields->n = 0;
  st_status s;
  if ((s = st_params_set_int(fields, "Hq", Hq, err)) || (s = st_params_set_int(fields, "s_q", s_q, err)) ||
      (s = st_params_set_int(fields, "topk", topk, err)))
    return s;
  return ST_OK;
}

/* ---- the op's descriptor (ops/op.h) ------------------------------------ */

static st_status parse_config(const st_params *kernel, const st_params *launch, st_variant_config *c, int *rank,
                              st_err *why) {
  const st_status st = st_mla_sparse_prefill_config_from_params(kernel, launch, &c->mla_sparse_prefill, why);
  *rank = 0;
  return st;
}

static st_status check_args(const void *args, st_err *err) { return st_mla_sparse_prefill_check_args(args, err); }

/* The op reads kv rows by index, not a context: no bound to memoize by. */
static int max_context(const void *args) {
  (void)args;
  return 0;
}

static st_status dispatch_key(const void *args, char *key, size_t cap, st_params *fields, st_err *err) {
  return st_mla_sparse_prefill_dispatch_key(args, key, cap, fields, err);
}

static void shape_only(const void *args, st_op_args *copy) {
  const st_mla_sparse_prefill_args *a = args;
  st_mla_sparse_prefill_args *c = &copy->mla_sparse_prefill;
  *c = *a;
  st_tensor *t[] = {&c->q, &c->kv, &c->indices, &c->o};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) t[i]->data = ST_STAND_IN(i);
  /* NULL: not wanted, stays NULL */
  st_tensor *opt[] = {&c->topk_length, &c->attn_sink, &c->lse, &c->max_logits};
  for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++)
    if (opt[i]->data) opt[i]->data = ST_STAND_IN(sizeof t / sizeof t[0] + i);
}

static st_status plan(const st_variant_config *cfg, const void *args, int sm_count, st_op_plan *plan,
                      st_plan_info *info, st_err *err) {
  const st_mla_sparse_prefill_args *a = args;
  st_status st = st_mla_sparse_prefill_check_fit(&cfg->mla_sparse_prefill, a, err);
  if (st != ST_OK) return st;
  st_mla_sparse_prefill_plan *p = &plan->mla_sparse_prefill;
  if ((st = st_mla_sparse_prefill_plan_make(&cfg->mla_sparse_prefill, a, sm_count, p, err)) != ST_OK) return st;
  *info = (st_plan_info){
      .workspace_bytes = p->workspace_bytes, .smem_bytes = p->smem_bytes, .merge_smem_bytes = 0, .side_stream = 0};
  return ST_OK;
}

static st_status launch(const st_cu *cu, CUfunction main_fn, CUfunction merge_fn, const st_op_plan *plan,
                        void *workspace, size_t workspace_bytes, CUstream stream, st_side_stream *side, st_err *err) {
  (void)side;
  return st_mla_sparse_prefill_launch(cu, main_fn, merge_fn, &plan->mla_sparse_prefill, workspace, workspace_bytes,
                                      stream, err);
}

/* Prefill batches vary in s_q from call to call: a winner of a near key
 * serves before the built-in choice. */
const st_op_desc st_mla_sparse_prefill_op = {.name = ST_MLA_SPARSE_PREFILL_OP,
                                             .main_kernel = ST_MLA_SPARSE_PREFILL_MAIN_KERNEL,
                                             .params_bytes = sizeof(st_mla_sparse_prefill_params),
                                             .merge_kernel = ST_MLA_SPARSE_PREFILL_MERGE_KERNEL,
                                             .parse_config = parse_config,
                                             .needs_merge = NULL,
                                             .check_args = check_args,
                                             .shape_only = shape_only,
                                             .max_context = max_context,
                                             .load = NULL,
                                             .dispatch_key = dispatch_key,
                                             .plan = plan,
                                             .launch = launch,
                                             .exact_keys_only = 0};
