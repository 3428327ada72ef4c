/* ops/dsa_index_topk.c - validation, launch math and launch of
 * dsa_index_topk. Shared by the tuner and the runtime: what was timed is
 * what runs. */
#include "ops/dsa_index_topk.h"
#include "ops/op.h"

#include <stdio.h>
#include <string.h>

#include "ops/launch.h"
#include "ops/tensor_check.h"

/* The selection's dynamic shared memory at most: a range of up to 32K
 * logits' keys, held for every pass, or (filter) 16K candidates' keys and
 * positions of a longer range (templates/common/radix_topk_row.cuh). With
 * the kernel's static 16.5 KiB, one CTA a multiprocessor. */
#define STAGE_SMEM (128 * 1024)

st_status st_dsa_index_topk_config_from_params(const st_params *kernel, const st_params *launch,
                                               st_dsa_index_topk_config *cfg, st_err *err) {
  (void)launch; /* none: the generator's check_launch refuses any */
  memset(cfg, 0, sizeof *cfg);
  long long v;
  st_status s;
  if ((s = st_params_get_int(kernel, "threads", 64, 1024, &v, err)) != ST_OK) return s;
  cfg->threads = (int)v;
  if ((s = st_params_get_int(kernel, "filter", 0, 1, &v, err)) != ST_OK) return s;
  cfg->filter = (int)v;
  /* The digit scan splits the bins evenly over the threads. */
  if (cfg->threads & (cfg->threads - 1))
    return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter threads=%d is not a power of two", cfg->threads);
  return ST_OK;
}

/* ks and ke: [s_q] int32 each. */
static st_status check_ranges(const st_dsa_index_topk_args *a, int64_t s_q, st_err *err) {
  const st_tensor *t[] = {&a->ks, &a->ke};
  const char *name[] = {"ks", "ke"};
  for (int i = 0; i < 2; i++) {
    const st_status s = st_check_tensor(t[i], name[i], ST_DTYPE_INT32, 1, err);
    if (s != ST_OK) return s;
    if (t[i]->shape[0] != s_q)
      return st_fail(err, ST_ERR_INVALID_ARG, "%s.shape[0]=%lld must equal the logits' %lld rows", name[i],
                     (long long)t[i]->shape[0], (long long)s_q);
  }
  return ST_OK;
}

/* logits [s_q, s_kv] fp32, rows 16-byte aligned (dsa_index_logits'). */
static st_status check_logits(const st_dsa_index_topk_args *a, st_err *err) {
  const st_status s = st_check_tensor(&a->logits, "logits", ST_DTYPE_FP32, 2, err);
  if (s != ST_OK) return s;
  const int64_t s_q = a->logits.shape[0], s_kv = a->logits.shape[1];
  if (s_q > ST_DSA_INDEX_TOPK_MAX_TOKENS || s_kv > ST_DSA_INDEX_TOPK_MAX_TOKENS)
    return st_fail(err, ST_ERR_INVALID_ARG, "logits.shape=[%lld,%lld]: rows and positions are at most 2^24 each",
                   (long long)s_q, (long long)s_kv);
  if (s_q > 1 && a->logits.stride[0] < s_kv)
    return st_fail(err, ST_ERR_INVALID_ARG, "logits.stride[0]=%lld is less than s_kv=%lld",
                   (long long)a->logits.stride[0], (long long)s_kv);
  if ((uintptr_t)a->logits.data % 16 || a->logits.stride[0] % 4)
    return st_fail(err, ST_ERR_INVALID_ARG,
                   "logits.data=%p and logits.stride[0]=%lld must be 16-byte aligned (the stride a multiple of 4)",
                   a->logits.data, (long long)a->logits.stride[0]);
  return ST_OK;
}

st_status st_dsa_index_topk_check_args(const st_dsa_index_topk_args *a, st_err *err) {
  if (!a) return st_fail(err, ST_ERR_INVALID_ARG, "args is NULL");
  st_status s;
  if ((s = check_logits(a, err)) != ST_OK) return s;
  const int64_t s_q = a->logits.shape[0];
  if ((s = check_ranges(a, s_q, err)) != ST_OK) return s;
  if (a->topk < 1 || a->topk > ST_DSA_INDEX_TOPK_MAX_TOPK)
    return st_fail(err, ST_ERR_INVALID_ARG, "topk=%d is outside 1..%d", a->topk, ST_DSA_INDEX_TOPK_MAX_TOPK);
  if ((s = st_check_tensor(&a->topk_idx, "topk_idx", ST_DTYPE_INT32, 2, err)) != ST_OK) return s;
  if (a->topk_idx.shape[0] != s_q || a->topk_idx.shape[1] != a->topk)
    return st_fail(err, ST_ERR_INVALID_ARG, "topk_idx.shape=[%lld,%lld] must be [s_q=%lld, topk=%d]",
                   (long long)a->topk_idx.shape[0], (long long)a->topk_idx.shape[1], (long long)s_q, a->topk);
  /* Rows written by different CTAs must not overlap. */
  if (s_q > 1 && a->topk_idx.stride[0] < a->topk)
    return st_fail(err, ST_ERR_INVALID_ARG, "topk_idx.stride[0]=%lld is less than topk=%d",
                   (long long)a->topk_idx.stride[0], a->topk);
  return ST_OK;
}

st_status st_dsa_index_topk_plan_make(const st_dsa_index_topk_config *cfg, const st_dsa_index_topk_args *a,
                                      st_dsa_index_topk_plan *plan, st_err *err) {
  (void)err; /* every call check_args passes has a plan: nothing depends on ks or ke */
  memset(plan, 0, sizeof *plan);
  const int64_t s_q = a->logits.shape[0], s_kv = a->logits.shape[1];
  /* A range is at most s_kv long: stage whole rows when they fit. */
  const int64_t stage_cap = s_kv * 4 <= STAGE_SMEM ? s_kv : STAGE_SMEM / 4;
  /* Candidates only where a range can be longer than the staged ones. */
  const int64_t cand_cap = cfg->filter && stage_cap < s_kv ? STAGE_SMEM / 8 : 0;

  st_dsa_index_topk_params *p = &plan->params;
  p->logits = a->logits.data;
  p->ks = a->ks.data;
  p->ke = a->ke.data;
  p->topk_idx = a->topk_idx.data;
  p->logit_stride = a->logits.stride[0];
  p->out_stride = a->topk_idx.stride[0];
  p->s_q = (int32_t)s_q;
  p->s_kv = (int32_t)s_kv;
  p->topk = a->topk;
  p->stage_cap = (int32_t)stage_cap;
  p->cand_cap = (int32_t)cand_cap;

  /* s_q <= 2^24: the rows fit the grid's x dimension. */
  plan->grid[0] = (unsigned)s_q;
  plan->grid[1] = 1;
  plan->grid[2] = 1;
  plan->block = (unsigned)cfg->threads;
  /* The larger of the staged keys and the candidates (2 x cand_cap words). */
  const int64_t words = stage_cap > 2 * cand_cap ? stage_cap : 2 * cand_cap;
  plan->smem_bytes = (unsigned)(words * 4);
  return ST_OK;
}

st_status st_dsa_index_topk_launch(const st_cu *cu, CUfunction fn, const st_dsa_index_topk_plan *plan, CUstream stream,
                                   st_err *err) {
  if (!fn) return st_fail(err, ST_ERR_INVALID_ARG, "dsa_index_topk needs its kernel");
  /* Past 48 KiB of static + dynamic shared memory a kernel must opt in; the
   * kernel's static part is under 17 KiB (the selection's histogram). */
  if (plan->smem_bytes > 31 * 1024)
    ST_CU_TRY(cu, cu->cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)plan->smem_bytes),
              err);
  st_dsa_index_topk_params params = plan->params;
  void *kargs[] = {&params};
  return st_launch_kernel(cu, fn, plan->grid, plan->block, plan->smem_bytes, stream, kargs, 0, err);
}

st_status st_dsa_index_topk_dispatch_key(const st_dsa_index_topk_args *a, char *key, size_t cap, st_params *fields,
                                         st_err *err) {
  const long long s_q = a->logits.shape[0], s_kv = a->logits.shape[1];
  int n = snprintf(key, cap, "%s:B=%lld,kv=%lld,topk=%d", ST_DSA_INDEX_TOPK_OP, s_q, s_kv, a->topk);
  if (n < 0 || (size_t)n >= cap) return st_fail(err, ST_ERR_INVALID_ARG, "dispatch key buffer too small");
  if (!fields) return ST_OK;
  fields->n = 0;
  st_status s;
  if ((s = st_params_set_int(fields, "B", s_q, err)) || (s = st_params_set_int(fields, "kv", s_kv, err)) ||
      (s = st_params_set_int(fields, "topk", a->topk, err)))
    return s;
  return ST_OK;
}

/* ---- the op's descriptor (ops/op.h) ------------------------------------ */

static st_status parse_config(const st_params *kernel, const st_params *launch, st_variant_config *c, int *rank,
                              st_err *why) {
  const st_status st = st_dsa_index_topk_config_from_params(kernel, launch, &c->dsa_index_topk, why);
  /* Every variant fits every call: the filtering ones first (two reads of
   * a long range, not five). */
  *rank = c->dsa_index_topk.filter ? 0 : 1;
  return st;
}

static st_status check_args(const void *args, st_err *err) { return st_dsa_index_topk_check_args(args, err); }

/* The call's bound on what a row sees: its s_kv positions. */
static int max_context(const void *args) { return (int)((const st_dsa_index_topk_args *)args)->logits.shape[1]; }

static st_status dispatch_key(const void *args, char *key, size_t cap, st_params *fields, st_err *err) {
  return st_dsa_index_topk_dispatch_key(args, key, cap, fields, err);
}

static void shape_only(const void *args, st_op_args *copy) {
  const st_dsa_index_topk_args *a = args;
  st_dsa_index_topk_args *c = &copy->dsa_index_topk;
  *c = *a;
  st_tensor *t[] = {&c->logits, &c->ks, &c->ke, &c->topk_idx};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) t[i]->data = ST_STAND_IN(i);
}

static st_status plan(const st_variant_config *cfg, const void *args, int sm_count, st_op_plan *plan,
                      st_plan_info *info, st_err *err) {
  (void)sm_count;
  st_dsa_index_topk_plan *p = &plan->dsa_index_topk;
  const st_status st = st_dsa_index_topk_plan_make(&cfg->dsa_index_topk, args, p, err);
  if (st != ST_OK) return st;
  *info = (st_plan_info){.workspace_bytes = 0, .smem_bytes = p->smem_bytes, .merge_smem_bytes = 0, .side_stream = 0};
  return ST_OK;
}

static st_status launch(const st_cu *cu, CUfunction main_fn, CUfunction merge_fn, const st_op_plan *plan,
                        void *workspace, size_t workspace_bytes, CUstream stream, st_side_stream *side, st_err *err) {
  (void)merge_fn;
  (void)workspace;
  (void)workspace_bytes;
  (void)side;
  return st_dsa_index_topk_launch(cu, main_fn, &plan->dsa_index_topk, stream, err);
}

const st_op_desc st_dsa_index_topk_op = {.name = ST_DSA_INDEX_TOPK_OP,
                                         .main_kernel = ST_DSA_INDEX_TOPK_MAIN_KERNEL,
                                         .params_bytes = sizeof(st_dsa_index_topk_params),
                                         .merge_kernel = NULL,
                                         .parse_config = parse_config,
                                         .needs_merge = NULL,
                                         .check_args = check_args,
                                         .shape_only = shape_only,
                                         .max_context = max_context,
                                         .load = NULL,
                                         .dispatch_key = dispatch_key,
                                         .plan = plan,
                                         .launch = launch,
                                         .exact_keys_only = 1};
