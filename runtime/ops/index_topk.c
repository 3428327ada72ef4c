/* ops/index_topk.c - validation, fit, launch math and launch of index_topk. */
#include "ops/index_topk.h"
#include "ops/op.h"

#include <stdio.h>
#include <string.h>

#include "ops/tensor_check.h"

/* Dynamic shared memory one CTA may opt in to on sm_90 (the static part,
 * the selection's histograms, is at most 8 columns x 1 KiB). */
#define ST_INDEX_TOPK_MAX_SMEM (210 * 1024)
#define ST_DEFAULT_SMEM_WITHOUT_OPT_IN (48 * 1024)

st_status st_index_topk_config_from_params(const st_params *kernel, const st_params *launch, st_index_topk_config *cfg,
                                           st_err *err) {
  (void)launch;
  memset(cfg, 0, sizeof *cfg);
  const char *algo = st_params_get(kernel, "algo");
  if (!algo || (strcmp(algo, "cta") && strcmp(algo, "warp")))
    return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter algo='%s' is not cta or warp",
                   algo ? algo : "(missing)");
  cfg->algo = strcmp(algo, "cta") == 0 ? ST_INDEX_TOPK_CTA : ST_INDEX_TOPK_WARP;
  long long v;
  st_status s;
#define GET(key, lo, hi, field)                                                                                        \
  if ((s = st_params_get_int(kernel, key, lo, hi, &v, err)) != ST_OK) return s;                                        \
  cfg->field = (int)v;
  GET("keys", 0, ST_INDEX_TOPK_MAX_KEYS, keys)
  GET("rows", 1, 8, rows)
  GET("threads", 64, 1024, threads)
  GET("topk", 1, ST_INDEX_TOPK_MAX_TOPK, topk_cap)
#undef GET
  if (cfg->threads % 32)
    return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter threads=%d is not a multiple of 32", cfg->threads);
  if (cfg->algo == ST_INDEX_TOPK_CTA) {
    if (cfg->keys != 0)
      return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter keys=%d must be 0 with algo cta", cfg->keys);
    return ST_OK;
  }
  if (cfg->keys < 1 || (cfg->keys & (cfg->keys - 1)))
    return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter keys=%d is not a power of two in 1..%d with algo warp",
                   cfg->keys, ST_INDEX_TOPK_MAX_KEYS);
  if (cfg->rows * 32 != cfg->threads)
    return st_fail(err, ST_ERR_INVALID_ARG,
                   "variant parameter rows=%d is not threads/32 = %d with algo warp (a row per warp)", cfg->rows,
                   cfg->threads / 32);
  return ST_OK;
}

st_status st_index_topk_check_args(const st_index_topk_args *a, st_err *err) {
  if (!a) return st_fail(err, ST_ERR_INVALID_ARG, "args is NULL");
  st_status s;
  if ((s = st_check_selection(a->topk, ST_INDEX_TOPK_MAX_TOPK, a->init_blocks, a->local_blocks, err)) != ST_OK)
    return s;
  if ((s = st_check_tensor(&a->score, "score", ST_DTYPE_FP32, 3, err)) != ST_OK) return s;
  const int64_t H = a->score.shape[0], total_q = a->score.shape[1], cols = a->score.shape[2];
  if (H > 65535) return st_fail(err, ST_ERR_INVALID_ARG, "score.shape[0]=%lld heads exceed 65535", (long long)H);
  if ((s = st_check_tensor(&a->cu_seqlens_q, "cu_seqlens_q", ST_DTYPE_INT32, 1, err)) != ST_OK) return s;
  if ((s = st_check_tensor(&a->seq_lens, "seq_lens", ST_DTYPE_INT32, 1, err)) != ST_OK) return s;
  if (a->cu_seqlens_q.shape[0] != a->seq_lens.shape[0] + 1)
    return st_fail(err, ST_ERR_INVALID_ARG, "cu_seqlens_q.shape[0]=%lld must be seq_lens.shape[0]=%lld + 1",
                   (long long)a->cu_seqlens_q.shape[0], (long long)a->seq_lens.shape[0]);
  if ((s = st_check_tensor(&a->topk_idx, "topk_idx", ST_DTYPE_INT32, 3, err)) != ST_OK) return s;
  if (a->topk_idx.shape[0] != H || a->topk_idx.shape[1] != total_q || a->topk_idx.shape[2] != a->topk)
    return st_fail(err, ST_ERR_INVALID_ARG, "topk_idx.shape=[%lld,%lld,%lld] must be [H=%lld, total_q=%lld, topk=%d]",
                   (long long)a->topk_idx.shape[0], (long long)a->topk_idx.shape[1], (long long)a->topk_idx.shape[2],
                   (long long)H, (long long)total_q, a->topk);
  if (a->max_context < 1 || a->max_context > cols * ST_BLOCK_TOKENS)
    return st_fail(err, ST_ERR_INVALID_ARG, "max_context=%d is outside 1..%lld (score columns x %d)", a->max_context,
                   (long long)(cols * ST_BLOCK_TOKENS), ST_BLOCK_TOKENS);
  return ST_OK;
}

static int64_t max_blocks_of(const st_index_topk_args *a) { return st_blocks_of(a->max_context); }

st_status st_index_topk_check_fit(const st_index_topk_config *cfg, const st_index_topk_args *a, st_err *err) {
  if (a->topk > cfg->topk_cap)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant holds topk <= %d, call asks %d", cfg->topk_cap, a->topk);
  if (cfg->algo == ST_INDEX_TOPK_WARP) {
    if (max_blocks_of(a) > 32 * (int64_t)cfg->keys)
      return st_fail(err, ST_ERR_NO_VARIANT,
                     "warp variant holds rows of <= %d blocks (32 lanes x keys=%d), call has max_blocks=%lld "
                     "(max_context=%d)",
                     32 * cfg->keys, cfg->keys, (long long)max_blocks_of(a), a->max_context);
    return ST_OK;
  }
  const int64_t smem = (int64_t)cfg->rows * max_blocks_of(a) * 4;
  if (smem > ST_INDEX_TOPK_MAX_SMEM)
    return st_fail(err, ST_ERR_NO_VARIANT,
                   "variant stages %d rows of %lld scores: %lld bytes of shared memory (limit %d)", cfg->rows,
                   (long long)max_blocks_of(a), (long long)smem, ST_INDEX_TOPK_MAX_SMEM);
  return ST_OK;
}

st_status st_index_topk_plan_make(const st_index_topk_config *cfg, const st_index_topk_args *a,
                                  st_index_topk_plan *plan, st_err *err) {
  memset(plan, 0, sizeof *plan);
  st_status s = st_index_topk_check_fit(cfg, a, err);
  if (s != ST_OK) return s;
  const int64_t total_q = a->score.shape[1];
  st_index_topk_params *p = &plan->params;
  p->score = a->score.data;
  p->cu_seqlens_q = a->cu_seqlens_q.data;
  p->seq_lens = a->seq_lens.data;
  p->topk_idx = a->topk_idx.data;
  p->score_stride_head = a->score.stride[0];
  p->score_stride_row = a->score.stride[1];
  p->out_stride_head = a->topk_idx.stride[0];
  p->out_stride_row = a->topk_idx.stride[1];
  p->num_requests = (int32_t)a->seq_lens.shape[0];
  p->total_q = (int32_t)total_q;
  p->topk = a->topk;
  p->init_blocks = a->init_blocks;
  p->local_blocks = a->local_blocks;
  p->max_blocks = (int32_t)max_blocks_of(a);
  /* cta: rows rows per CTA; warp: a row per warp (config: rows = threads / 32). */
  const int64_t rows = cfg->algo == ST_INDEX_TOPK_WARP ? cfg->threads / 32 : cfg->rows;
  plan->grid[0] = (unsigned)((total_q + rows - 1) / rows);
  plan->grid[1] = (unsigned)a->score.shape[0];
  plan->grid[2] = 1;
  plan->block = (unsigned)cfg->threads;
  /* The fit check held this under ST_INDEX_TOPK_MAX_SMEM, in 64 bits. */
  plan->smem_bytes = cfg->algo == ST_INDEX_TOPK_WARP ? 0u : (unsigned)((int64_t)cfg->rows * max_blocks_of(a) * 4);
  return ST_OK;
}

st_status st_index_topk_launch(const st_cu *cu, CUfunction main_fn, const st_index_topk_plan *plan, CUstream stream,
                               st_err *err) {
  if (!main_fn) return st_fail(err, ST_ERR_INVALID_ARG, "index_topk kernel is NULL");
  /* Past 48 KiB of shared memory (static part: up to 8 KiB) a kernel must opt in. */
  if (plan->smem_bytes > ST_DEFAULT_SMEM_WITHOUT_OPT_IN - 9 * 1024)
    ST_CU_TRY(cu,
              cu->cuFuncSetAttribute(main_fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)plan->smem_bytes),
              err);
  st_index_topk_params params = plan->params;
  void *kargs[] = {&params};
  ST_CU_TRY(cu,
            cu->cuLaunchKernel(main_fn, plan->grid[0], plan->grid[1], plan->grid[2], plan->block, 1, 1,
                               plan->smem_bytes, stream, kargs, NULL),
            err);
  return ST_OK;
}

st_status st_index_topk_dispatch_key(const st_index_topk_args *a, char *key, size_t cap, st_params *fields,
                                     st_err *err) {
  const long long B = a->score.shape[1], H = a->score.shape[0];
  int n = snprintf(key, cap, "%s:B=%lld,H=%lld,topk=%d", ST_INDEX_TOPK_OP, B, H, a->topk);
  if (n < 0 || (size_t)n >= cap) return st_fail(err, ST_ERR_INVALID_ARG, "dispatch key buffer too small");
  if (!fields) return ST_OK;
  fields->n = 0;
  st_status s;
  if ((s = st_params_set_int(fields, "B", B, err)) || (s = st_params_set_int(fields, "H", H, err)) ||
      (s = st_params_set_int(fields, "topk", a->topk, err)))
    return s;
  return ST_OK;
}

/* ---- the op's descriptor (ops/op.h) ------------------------------------ */

static st_status parse_config(const st_params *kernel, const st_params *launch, st_variant_config *c, int *rank,
                              st_err *why) {
  const st_status st = st_index_topk_config_from_params(kernel, launch, &c->index_topk, why);
  *rank = c->index_topk.topk_cap;
  return st;
}

ST_OP_TYPED_ADAPTERS(index_topk)

static void shape_only(const void *args, st_op_args *copy) {
  const st_index_topk_args *a = args;
  st_index_topk_args *c = &copy->index_topk;
  *c = *a;
  st_tensor *t[] = {&c->score, &c->cu_seqlens_q, &c->seq_lens, &c->topk_idx};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) t[i]->data = ST_STAND_IN(i);
}

static st_status plan(const st_variant_config *cfg, const void *args, int sm_count, st_op_plan *plan,
                      st_plan_info *info, st_err *err) {
  const st_index_topk_args *a = args;
  (void)sm_count;
  st_index_topk_plan *p = &plan->index_topk;
  const st_status st = st_index_topk_plan_make(&cfg->index_topk, a, p, err); /* checks the fit first */
  if (st != ST_OK) return st;
  *info = (st_plan_info){
      .workspace_bytes = p->workspace_bytes, .smem_bytes = p->smem_bytes, .merge_smem_bytes = 0, .side_stream = 0};
  return ST_OK;
}

static st_status launch(const st_cu *cu, CUfunction main_fn, CUfunction merge_fn, const st_op_plan *plan,
                        void *workspace, size_t workspace_bytes, CUstream stream, st_side_stream *side, st_err *err) {
  (void)side;
  (void)merge_fn;
  (void)workspace;
  (void)workspace_bytes;
  return st_index_topk_launch(cu, main_fn, &plan->index_topk, stream, err);
}

const st_op_desc st_index_topk_op = {.name = ST_INDEX_TOPK_OP,
                                     .main_kernel = ST_INDEX_TOPK_MAIN_KERNEL,
                                     .params_bytes = sizeof(st_index_topk_params),
                                     .merge_kernel = NULL,
                                     .parse_config = parse_config,
                                     .needs_merge = NULL,
                                     .check_args = check_args,
                                     .shape_only = shape_only,
                                     .max_context = max_context,
                                     .dispatch_key = dispatch_key,
                                     .plan = plan,
                                     .launch = launch};
