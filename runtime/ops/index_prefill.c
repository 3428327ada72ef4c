/* ops/index_prefill.c - validation, fit, launch math and launch of
 * index_prefill (fused or composed). The scoring half is planned by
 * index_score's launcher on a view of the same inputs, so both ops run the
 * same loop with the same grid. */
#include "ops/index_prefill.h"
#include "ops/op.h"

#include <stdio.h>
#include <string.h>

#include "ops/tensor_check.h"
#include "ops/tensor_map.h"
#include "ops/workspace.h"


static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

st_status st_index_prefill_config_from_params(const st_params *kernel, const st_params *launch,
                                              st_index_prefill_config *cfg, st_err *err) {
  memset(cfg, 0, sizeof *cfg);
  st_status s = st_index_score_config_from_params(kernel, launch, &cfg->score, err);
  if (s != ST_OK) return s;
  cfg->score.balanced = 0; /* the fused lists are a chunk's: the chunk grid always */
  const char *algo = st_params_get(kernel, "algo");
  if (!algo || (strcmp(algo, "fused") && strcmp(algo, "composed")))
    return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter algo='%s' is not fused or composed",
                   algo ? algo : "(missing)");
  cfg->algo = strcmp(algo, "fused") == 0 ? ST_INDEX_PREFILL_FUSED : ST_INDEX_PREFILL_COMPOSED;
  long long v;
  if ((s = st_params_get_int(kernel, "topk", 1, ST_INDEX_PREFILL_MAX_TOPK, &v, err)) != ST_OK) return s;
  cfg->topk_cap = (int)v;
  if (cfg->algo == ST_INDEX_PREFILL_COMPOSED && cfg->topk_cap != ST_INDEX_PREFILL_MAX_TOPK)
    return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter topk=%d must be %d with algo composed (any topk)",
                   cfg->topk_cap, ST_INDEX_PREFILL_MAX_TOPK);
  if (st_index_prefill_smem_bytes(cfg) > ST_INDEX_SCORE_MAX_SMEM)
    return st_fail(err, ST_ERR_INVALID_ARG, "variant needs %u bytes of shared memory, more than %d",
                   st_index_prefill_smem_bytes(cfg), ST_INDEX_SCORE_MAX_SMEM);
  return ST_OK;
}

unsigned st_index_prefill_smem_bytes(const st_index_prefill_config *cfg) {
  /* Keys and block ids, topk_cap + 1 words per row (the template's LIST_STRIDE). */
  const unsigned lists =
      cfg->algo == ST_INDEX_PREFILL_FUSED ? (unsigned)(2 * cfg->score.rows * (cfg->topk_cap + 1) * 4) : 0;
  return lists + st_index_score_smem_bytes(&cfg->score);
}

/* index_score's arguments on the same inputs; the score view (never
 * written: the fused kernel keeps no scores) only carries the shape. */
static st_index_score_args score_view(const st_index_prefill_args *a) {
  st_index_score_args s;
  memset(&s, 0, sizeof s);
  s.q = a->q;
  s.k_cache = a->k_cache;
  s.block_table = a->block_table;
  s.cu_seqlens_q = a->cu_seqlens_q;
  s.seq_lens = a->seq_lens;
  const int64_t H = a->q.shape[1], total_q = a->q.shape[0];
  const int64_t cols = a->block_table.shape[1];
  st_tensor_contiguous(&s.score, a->topk_idx.data, ST_DTYPE_FP32, 3, (int64_t[]){H, total_q, cols});
  /* Zero outer strides: the view's extent is one row's, so no size the
   * caller never passed (H x total_q x columns floats) can fail the check. */
  s.score.stride[0] = s.score.stride[1] = 0;
  s.scale = 1.0f;
  s.max_context = a->max_context;
  return s;
}

st_status st_index_prefill_check_args(const st_index_prefill_args *a, st_err *err) {
  if (!a) return st_fail(err, ST_ERR_INVALID_ARG, "args is NULL");
  st_status s;
  if ((s = st_check_selection(a->topk, ST_INDEX_PREFILL_MAX_TOPK, a->init_blocks, a->local_blocks, err)) != ST_OK)
    return s;
  /* The shapes the score view is built from, before it is built. */
  if (a->q.dtype != ST_DTYPE_BF16 && a->q.dtype != ST_DTYPE_FP8_E4M3)
    return st_fail(err, ST_ERR_INVALID_ARG, "q.dtype=%d is not bf16 (%d) or fp8_e4m3 (%d)", (int)a->q.dtype,
                   ST_DTYPE_BF16, ST_DTYPE_FP8_E4M3);
  if ((s = st_check_tensor(&a->q, "q", a->q.dtype, 3, err)) != ST_OK) return s;
  if ((s = st_check_tensor(&a->block_table, "block_table", ST_DTYPE_INT32, 2, err)) != ST_OK) return s;
  if ((s = st_check_tensor(&a->topk_idx, "topk_idx", ST_DTYPE_INT32, 3, err)) != ST_OK) return s;
  const int64_t total_q = a->q.shape[0], H = a->q.shape[1];
  if (a->topk_idx.shape[0] != H || a->topk_idx.shape[1] != total_q || a->topk_idx.shape[2] != a->topk)
    return st_fail(err, ST_ERR_INVALID_ARG, "topk_idx.shape=[%lld,%lld,%lld] must be [H=%lld, total_q=%lld, topk=%d]",
                   (long long)a->topk_idx.shape[0], (long long)a->topk_idx.shape[1], (long long)a->topk_idx.shape[2],
                   (long long)H, (long long)total_q, a->topk);
  const st_index_score_args view = score_view(a);
  return st_index_score_check_args(&view, err);
}

/* H x total_q rows (< 2^47: both checked) of `per_row` entries of
 * `entry_bytes`, aligned, after the counter area. Up to 2^16 chunks of 512 bytes a row could pass
 * 64 bits (the merge's candidate limit keeps real plans far below): so
 * checked, not assumed. */
static st_status workspace_bytes(const st_index_prefill_args *a, int64_t per_row, int64_t entry_bytes, size_t *out,
                                 st_err *err) {
  const int64_t H = a->q.shape[1], total_q = a->q.shape[0];
  int64_t bytes;
  if (__builtin_mul_overflow(H * total_q, per_row, &bytes) || __builtin_mul_overflow(bytes, entry_bytes, &bytes) ||
      __builtin_add_overflow(bytes, (int64_t)(ST_WS_COUNTER_BYTES + ST_WS_ALIGN - 1), &bytes))
    return st_fail(err, ST_ERR_INVALID_ARG,
                   "q.shape[0]=%lld query tokens x H=%lld heads x %lld entries of %lld bytes: a workspace past 2^63 "
                   "bytes",
                   (long long)total_q, (long long)H, (long long)per_row, (long long)entry_bytes);
  *out = (size_t)bytes / ST_WS_ALIGN * ST_WS_ALIGN;
  return ST_OK;
}

st_status st_index_prefill_plan_make(const st_index_prefill_config *cfg, const st_index_prefill_args *a, int sm_count,
                                     st_index_prefill_plan *plan, st_err *err) {
  memset(plan, 0, sizeof *plan);
  const int fused = cfg->algo == ST_INDEX_PREFILL_FUSED;
  if (a->topk > cfg->topk_cap)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant keeps lists of %d blocks, call asks topk=%d", cfg->topk_cap,
                   a->topk);
  const int64_t max_blocks = ceil_div(a->max_context, ST_BLOCK_TOKENS);
  if (!fused && max_blocks > ST_INDEX_PREFILL_COMPOSED_MAX_BLOCKS)
    return st_fail(err, ST_ERR_NO_VARIANT, "composed variant selects from rows of <= %d blocks, call has %lld",
                   ST_INDEX_PREFILL_COMPOSED_MAX_BLOCKS, (long long)max_blocks);
  /* A fused merge warp holds chunks x topk candidates: at most MERGE_MAX /
   * topk chunks, so chunks no smaller than that allows. (The smallest chunk
   * of max_blocks * topk / MERGE_MAX blocks, rounded up, could still make
   * one chunk too many: 762 blocks, topk 28, 42-block chunks, 19 x 28 =
   * 532 candidates, and the merge trapped.) */
  st_index_score_config sc = cfg->score;
  const int64_t min_chunk = fused ? ceil_div(max_blocks, ST_INDEX_PREFILL_MERGE_MAX / a->topk) : 1;
  if (sc.chunk_blocks != 0 && sc.chunk_blocks < min_chunk && sc.chunk_blocks < max_blocks)
    return st_fail(err, ST_ERR_NO_VARIANT,
                   "variant scores %d blocks per CTA: %lld chunks x topk %d exceed the merge's %d candidates per row",
                   sc.chunk_blocks, (long long)ceil_div(max_blocks, sc.chunk_blocks), a->topk,
                   ST_INDEX_PREFILL_MERGE_MAX);
  const st_index_score_args view = score_view(a);
  st_index_score_plan sp;
  st_status s = st_index_score_plan_make(&sc, &view, sm_count, &sp, err);
  if (s != ST_OK) return s;
  if (sp.params.chunk_blocks < min_chunk) { /* the automatic chunk, raised */
    sc.chunk_blocks = (int)min_chunk;
    if ((s = st_index_score_plan_make(&sc, &view, sm_count, &sp, err)) != ST_OK) return s;
  }
  st_index_prefill_params *p = &plan->params;
  p->score = sp.params;
  p->score.score = NULL;
  p->topk_idx = a->topk_idx.data;
  p->out_stride_head = a->topk_idx.stride[0];
  p->out_stride_row = a->topk_idx.stride[1];
  p->topk = a->topk;
  p->init_blocks = a->init_blocks;
  p->local_blocks = a->local_blocks;
  p->max_chunks = (int32_t)sp.grid[1];
  memcpy(plan->grid, sp.grid, sizeof plan->grid);
  plan->k_cache = sp.k_cache;
  plan->block = sp.block;
  plan->smem_bytes = st_index_prefill_smem_bytes(cfg);
  const int64_t total_q = a->q.shape[0], H = a->q.shape[1];
  plan->merge_grid[0] = (unsigned)ceil_div(total_q, ST_INDEX_PREFILL_MERGE_THREADS / 32);
  plan->merge_grid[1] = (unsigned)H;
  plan->merge_grid[2] = 1;
  plan->merge_block = ST_INDEX_PREFILL_MERGE_THREADS;
  return workspace_bytes(a, fused ? p->max_chunks : max_blocks, fused ? 8 * (int64_t)a->topk : 4,
                         &plan->workspace_bytes, err);
}

st_status st_index_prefill_launch(const st_cu *cu, CUfunction main_fn, CUfunction merge_fn,
                                  const st_index_prefill_plan *plan, void *workspace, CUstream stream, st_err *err) {
  if (!main_fn || !merge_fn) return st_fail(err, ST_ERR_INVALID_ARG, "index_prefill kernels are NULL");
  if (!workspace) return st_fail(err, ST_ERR_WORKSPACE, "index_prefill needs a workspace");
  ST_CU_TRY(cu, cu->cuFuncSetAttribute(main_fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)plan->smem_bytes),
            err);
  st_index_prefill_params params = plan->params;
  char *scratch = (char *)workspace + ST_WS_COUNTER_BYTES; /* ops/workspace.h */
  // cppcheck-suppress invalidPointerCast ; a device address, aligned by the layout
  params.partial = (uint64_t *)scratch; /* the template reads the one its algorithm uses */
  // cppcheck-suppress invalidPointerCast
  params.keys = (uint32_t *)scratch;
  st_status s = st_tensor_map_pages(cu, &plan->k_cache, "k_cache", 256, &params.score.k_map, err);
  if (s != ST_OK) return s;
  void *kargs[] = {&params};
  ST_CU_TRY(cu,
            cu->cuLaunchKernel(main_fn, plan->grid[0], plan->grid[1], plan->grid[2], plan->block, 1, 1,
                               plan->smem_bytes, stream, kargs, NULL),
            err);
  ST_CU_TRY(cu,
            cu->cuLaunchKernel(merge_fn, plan->merge_grid[0], plan->merge_grid[1], plan->merge_grid[2],
                               plan->merge_block, 1, 1, 0, stream, kargs, NULL),
            err);
  return ST_OK;
}

st_status st_index_prefill_dispatch_key(const st_index_prefill_args *a, char *key, size_t cap, st_params *fields,
                                        st_err *err) {
  const long long B = a->q.shape[0], H = a->q.shape[1], D = a->q.shape[2];
  const char *dtype = st_dtype_name(a->q.dtype);
  int n = snprintf(key, cap, "%s:B=%lld,D=%lld,H=%lld,dtype=%s,topk=%d", ST_INDEX_PREFILL_OP, B, D, H, dtype, a->topk);
  if (n < 0 || (size_t)n >= cap) return st_fail(err, ST_ERR_INVALID_ARG, "dispatch key buffer too small");
  if (!fields) return ST_OK;
  fields->n = 0;
  st_status s;
  if ((s = st_params_set_int(fields, "B", B, err)) || (s = st_params_set_int(fields, "D", D, err)) ||
      (s = st_params_set_int(fields, "H", H, err)) || (s = st_params_set(fields, "dtype", dtype, err)) ||
      (s = st_params_set_int(fields, "topk", a->topk, err)))
    return s;
  return ST_OK;
}

/* ---- the op's descriptor (ops/op.h) ------------------------------------ */

static st_status parse_config(const st_params *kernel, const st_params *launch, st_variant_config *c, int *rank,
                              st_err *why) {
  const st_status st = st_index_prefill_config_from_params(kernel, launch, &c->index_prefill, why);
  /* Composed first where it fits (faster on the tuned shapes), then the
   * shortest fused lists that hold the call's topk. */
  *rank = c->index_prefill.algo == ST_INDEX_PREFILL_COMPOSED ? 0 : c->index_prefill.topk_cap;
  return st;
}

ST_OP_TYPED_ADAPTERS(index_prefill)

static void shape_only(const void *args, st_op_args *copy) {
  const st_index_prefill_args *a = args;
  st_index_prefill_args *c = &copy->index_prefill;
  *c = *a;
  st_tensor *t[] = {&c->q, &c->k_cache, &c->block_table, &c->cu_seqlens_q, &c->seq_lens, &c->topk_idx};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) t[i]->data = ST_STAND_IN(i);
}

static st_status plan(const st_variant_config *cfg, const void *args, int sm_count, st_op_plan *plan,
                      st_plan_info *info, st_err *err) {
  const st_index_prefill_args *a = args;
  st_index_prefill_plan *p = &plan->index_prefill;
  const st_status st = st_index_prefill_plan_make(&cfg->index_prefill, a, sm_count, p, err); /* checks the fit first */
  if (st != ST_OK) return st;
  *info = (st_plan_info){
      .workspace_bytes = p->workspace_bytes, .smem_bytes = p->smem_bytes, .merge_smem_bytes = 0, .side_stream = 0};
  return ST_OK;
}

static st_status launch(const st_cu *cu, CUfunction main_fn, CUfunction merge_fn, const st_op_plan *plan,
                        void *workspace, size_t workspace_bytes, CUstream stream, st_side_stream *side, st_err *err) {
  (void)side;
  (void)workspace_bytes;
  return st_index_prefill_launch(cu, main_fn, merge_fn, &plan->index_prefill, workspace, stream, err);
}

const st_op_desc st_index_prefill_op = {.name = ST_INDEX_PREFILL_OP,
                                        .main_kernel = ST_INDEX_PREFILL_MAIN_KERNEL,
                                        .params_bytes = sizeof(st_index_prefill_params),
                                        .merge_kernel = ST_INDEX_PREFILL_MERGE_KERNEL,
                                        .parse_config = parse_config,
                                        .needs_merge = NULL,
                                        .check_args = check_args,
                                        .shape_only = shape_only,
                                        .max_context = max_context,
                                        .dispatch_key = dispatch_key,
                                        .plan = plan,
                                        .launch = launch};
