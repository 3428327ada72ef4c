/* ops/index_score.c - validation, fit, launch math and launch of index_score.
 * Shared by the tuner and the runtime: what was timed is what runs. */
#include "ops/index_score.h"
#include "ops/op.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/tensor_check.h"
#include "ops/tensor_map.h"

#define ST_DEFAULT_SMEM_WITHOUT_OPT_IN (48 * 1024)
/* Fewer blocks per CTA than this and the q tile, loaded by every CTA,
 * costs more than a quarter of the K traffic. */
#define ST_INDEX_SCORE_MIN_AUTO_CHUNK 8

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

st_status st_index_score_config_from_params(const st_params *kernel, const st_params *launch,
                                            st_index_score_config *cfg, st_err *err) {
  memset(cfg, 0, sizeof *cfg);
  const char *dtype = st_params_get(kernel, "dtype");
  if (!dtype || (strcmp(dtype, "bf16") && strcmp(dtype, "fp8")))
    return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter dtype='%s' is not bf16 or fp8",
                   dtype ? dtype : "(missing)");
  cfg->dtype = strcmp(dtype, "bf16") == 0 ? ST_DTYPE_BF16 : ST_DTYPE_FP8_E4M3;
  long long v;
  st_status s;
#define GET(ps, key, lo, hi, field)                                                                                    \
  if ((s = st_params_get_int(ps, key, lo, hi, &v, err)) != ST_OK) return s;                                            \
  cfg->field = (int)v;
  GET(kernel, "head_dim", 64, 256, head_dim)
  GET(kernel, "rows", 64, 256, rows)
  GET(kernel, "warpgroups", 1, 2, warpgroups)
  GET(kernel, "stages", 2, 4, stages)
  GET(launch, "chunk_blocks", 0, 65536, chunk_blocks)
#undef GET
  cfg->balanced = cfg->chunk_blocks == 0;
  const int row_bytes = cfg->head_dim * st_dtype_bytes(cfg->dtype);
  if (row_bytes % 128)
    return st_fail(err, ST_ERR_INVALID_ARG, "variant rows of head_dim=%d %s are %d bytes, not whole 128-byte panels",
                   cfg->head_dim, dtype, row_bytes);
  const int slices = cfg->rows / 64 / cfg->warpgroups;
  if (cfg->rows % (64 * cfg->warpgroups) || slices < 1 || slices > 2)
    return st_fail(err, ST_ERR_INVALID_ARG, "variant rows=%d is not one or two 64-row slices per warpgroup (%d)",
                   cfg->rows, cfg->warpgroups);
  if (st_index_score_smem_bytes(cfg) > ST_INDEX_SCORE_MAX_SMEM)
    return st_fail(err, ST_ERR_INVALID_ARG, "variant needs %u bytes of shared memory, more than %d",
                   st_index_score_smem_bytes(cfg), ST_INDEX_SCORE_MAX_SMEM);
  return ST_OK;
}

unsigned st_index_score_smem_bytes(const st_index_score_config *cfg) {
  const unsigned row_bytes = (unsigned)(cfg->head_dim * st_dtype_bytes(cfg->dtype));
  return (unsigned)cfg->rows * row_bytes + (unsigned)cfg->stages * ST_BLOCK_TOKENS * row_bytes + 1024u;
}

st_status st_index_score_check_args(const st_index_score_args *a, st_err *err) {
  if (!a) return st_fail(err, ST_ERR_INVALID_ARG, "args is NULL");
  st_status s;
  if (a->q.dtype != ST_DTYPE_BF16 && a->q.dtype != ST_DTYPE_FP8_E4M3)
    return st_fail(err, ST_ERR_INVALID_ARG, "q.dtype=%d is not bf16 (%d) or fp8_e4m3 (%d)", (int)a->q.dtype,
                   ST_DTYPE_BF16, ST_DTYPE_FP8_E4M3);
  if ((s = st_check_tensor(&a->q, "q", a->q.dtype, 3, err)) != ST_OK) return s;
  const int64_t total_q = a->q.shape[0], H = a->q.shape[1], D = a->q.shape[2];
  if (H > 65535) return st_fail(err, ST_ERR_INVALID_ARG, "q.shape[1]=%lld heads exceed 65535", (long long)H);
  if (total_q > INT32_MAX)
    return st_fail(err, ST_ERR_INVALID_ARG, "q.shape[0]=%lld query tokens exceed %d", (long long)total_q, INT32_MAX);
  if ((s = st_check_tensor(&a->k_cache, "k_cache", a->q.dtype, 3, err)) != ST_OK) return s;
  if (a->k_cache.shape[1] != ST_BLOCK_TOKENS || a->k_cache.shape[2] != D)
    return st_fail(err, ST_ERR_INVALID_ARG, "k_cache.shape=[%lld,%lld,%lld] must be [pages,%d,%lld]",
                   (long long)a->k_cache.shape[0], (long long)a->k_cache.shape[1], (long long)a->k_cache.shape[2],
                   ST_BLOCK_TOKENS, (long long)D);
  if ((s = st_check_tensor(&a->seq_lens, "seq_lens", ST_DTYPE_INT32, 1, err)) != ST_OK) return s;
  const int64_t R = a->seq_lens.shape[0];
  if (R > 65535) return st_fail(err, ST_ERR_INVALID_ARG, "seq_lens.shape[0]=%lld requests exceed 65535", (long long)R);
  if ((s = st_check_tensor(&a->cu_seqlens_q, "cu_seqlens_q", ST_DTYPE_INT32, 1, err)) != ST_OK) return s;
  if (a->cu_seqlens_q.shape[0] != R + 1)
    return st_fail(err, ST_ERR_INVALID_ARG, "cu_seqlens_q.shape[0]=%lld must be seq_lens.shape[0]=%lld + 1",
                   (long long)a->cu_seqlens_q.shape[0], (long long)R);
  if ((s = st_check_tensor(&a->block_table, "block_table", ST_DTYPE_INT32, 2, err)) != ST_OK) return s;
  if (a->block_table.shape[0] != R)
    return st_fail(err, ST_ERR_INVALID_ARG, "block_table.shape[0]=%lld must equal the %lld requests",
                   (long long)a->block_table.shape[0], (long long)R);
  if ((s = st_check_tensor(&a->score, "score", ST_DTYPE_FP32, 3, err)) != ST_OK) return s;
  if (a->score.shape[0] != H || a->score.shape[1] != total_q)
    return st_fail(err, ST_ERR_INVALID_ARG, "score.shape=[%lld,%lld,%lld] must be [H=%lld, total_q=%lld, blocks]",
                   (long long)a->score.shape[0], (long long)a->score.shape[1], (long long)a->score.shape[2],
                   (long long)H, (long long)total_q);
  if (!(a->scale > 0.0f) || isinf(a->scale))
    return st_fail(err, ST_ERR_INVALID_ARG, "scale=%g must be positive and finite", (double)a->scale);
  const int64_t cap = a->block_table.shape[1] < a->score.shape[2] ? a->block_table.shape[1] : a->score.shape[2];
  if (a->max_context < 1 || a->max_context > cap * ST_BLOCK_TOKENS)
    return st_fail(err, ST_ERR_INVALID_ARG,
                   "max_context=%d is outside 1..%lld (block_table and score columns x %d: %lld and %lld)",
                   a->max_context, (long long)(cap * ST_BLOCK_TOKENS), ST_BLOCK_TOKENS,
                   (long long)a->block_table.shape[1], (long long)a->score.shape[2]);
  /* 16-byte asynchronous copies of q and K rows. */
  if ((s = st_check_vector_rows(&a->q, "q", 16, err)) != ST_OK) return s;
  if ((s = st_check_vector_rows(&a->k_cache, "k_cache", 16, err)) != ST_OK) return s;
  return ST_OK;
}

st_status st_index_score_check_fit(const st_index_score_config *cfg, const st_index_score_args *a, st_err *err) {
  const int64_t H = a->q.shape[1], D = a->q.shape[2];
  if (cfg->dtype != a->q.dtype)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant is for dtype %s, call is %s", st_dtype_name(cfg->dtype),
                   st_dtype_name(a->q.dtype));
  if (cfg->head_dim != D)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant is for head_dim %d, call has %lld", cfg->head_dim, (long long)D);
  /* A token's heads take 2^ceil(log2 H) rows of the CTA (H = 3: a padding
   * row a token, 4/3 of the work, instead of no variant at all). */
  if (H > cfg->rows)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant takes all heads of a token in one CTA of %d rows: H=%lld > %d",
                   cfg->rows, (long long)H, cfg->rows);
  return ST_OK;
}

/* log2 of n rounded up to a power of two. */
static int ceil_log2(int64_t n) {
  int s = 0;
  while ((1ll << s) < n) s++;
  return s;
}

st_status st_index_score_plan_make(const st_index_score_config *cfg, const st_index_score_args *a, int sm_count,
                                   st_index_score_plan *plan, st_err *err) {
  memset(plan, 0, sizeof *plan);
  st_status s = st_index_score_check_fit(cfg, a, err);
  if (s != ST_OK) return s;
  const int64_t total_q = a->q.shape[0], H = a->q.shape[1], R = a->seq_lens.shape[0];
  const int64_t max_blocks = ceil_div(a->max_context, ST_BLOCK_TOKENS);
  const int64_t tokens = cfg->rows >> ceil_log2(H);
  /* Tiles never straddle requests: each request adds at most one partial. */
  /* total_q < 2^31, R <= 65535, max_blocks < 2^24: products of tiles and
   * blocks stay under 2^56. */
  const int64_t tiles = ceil_div(total_q, tokens) + R;
  const int64_t sms = sm_count > 0 ? sm_count : 1;
  int64_t chunk = cfg->chunk_blocks, grid_x = tiles, chunks = 1;
  if (cfg->balanced) {
    /* One CTA per SM (a CTA of two warpgroups takes most of an SM's shared
     * memory or registers), never more than there are pairs. */
    grid_x = tiles * max_blocks < sms ? tiles * max_blocks : sms;
    chunk = 0;
  } else {
    if (chunk == 0) {
      /* About four CTAs per multiprocessor over the whole grid (one resides
       * at a time): enough to even out causal tiles of unequal length. */
      chunk = ceil_div(max_blocks * ceil_div(total_q, tokens), 4 * sms);
      if (chunk < ST_INDEX_SCORE_MIN_AUTO_CHUNK) chunk = ST_INDEX_SCORE_MIN_AUTO_CHUNK;
    }
    if (chunk > max_blocks) chunk = max_blocks;
    chunks = ceil_div(max_blocks, chunk);
  }
  if (grid_x > INT32_MAX || chunks > 65535)
    return st_fail(err, ST_ERR_UNSUPPORTED, "index_score grid of %lld x %lld CTAs is too large", (long long)grid_x,
                   (long long)chunks);
  st_index_score_params *p = &plan->params;
  p->q = a->q.data;
  p->k_cache = a->k_cache.data;
  p->block_table = a->block_table.data;
  p->cu_seqlens_q = a->cu_seqlens_q.data;
  p->seq_lens = a->seq_lens.data;
  p->score = a->score.data;
  p->q_stride_row = a->q.stride[0];
  p->q_stride_head = a->q.stride[1];
  p->k_stride_page = a->k_cache.stride[0];
  p->k_stride_token = a->k_cache.stride[1];
  p->bt_stride = a->block_table.stride[0];
  p->score_stride_head = a->score.stride[0];
  p->score_stride_row = a->score.stride[1];
  p->scale = a->scale;
  p->num_requests = (int32_t)R;
  p->total_q = (int32_t)total_q;
  p->num_heads = (int32_t)H;
  p->head_shift = ceil_log2(H);
  p->max_blocks = (int32_t)max_blocks;
  p->chunk_blocks = (int32_t)chunk;
  p->balanced = cfg->balanced;
  plan->k_cache = a->k_cache;
  plan->grid[0] = (unsigned)grid_x;
  plan->grid[1] = (unsigned)chunks;
  plan->grid[2] = 1;
  plan->block = (unsigned)(128 * cfg->warpgroups + 32); /* and the copying warp */
  plan->smem_bytes = st_index_score_smem_bytes(cfg);
  return ST_OK;
}

st_status st_index_score_launch(const st_cu *cu, CUfunction main_fn, const st_index_score_plan *plan, CUstream stream,
                                st_err *err) {
  if (!main_fn) return st_fail(err, ST_ERR_INVALID_ARG, "index_score kernel is NULL");
  /* Past 48 KiB of dynamic shared memory a kernel must opt in. */
  if (plan->smem_bytes > ST_DEFAULT_SMEM_WITHOUT_OPT_IN - 1024)
    ST_CU_TRY(cu,
              cu->cuFuncSetAttribute(main_fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)plan->smem_bytes),
              err);
  st_index_score_params params = plan->params;
  st_status s = st_tensor_map_pages(cu, &plan->k_cache, "k_cache", 256, &params.k_map, err);
  if (s != ST_OK) return s;
  void *kargs[] = {&params};
  ST_CU_TRY(cu,
            cu->cuLaunchKernel(main_fn, plan->grid[0], plan->grid[1], plan->grid[2], plan->block, 1, 1,
                               plan->smem_bytes, stream, kargs, NULL),
            err);
  return ST_OK;
}

st_status st_index_score_dispatch_key(const st_index_score_args *a, char *key, size_t cap, st_params *fields,
                                      st_err *err) {
  const long long B = a->q.shape[0], H = a->q.shape[1], D = a->q.shape[2];
  const char *dtype = st_dtype_name(a->q.dtype);
  int n = snprintf(key, cap, "%s:B=%lld,D=%lld,H=%lld,dtype=%s", ST_INDEX_SCORE_OP, B, D, H, dtype);
  if (n < 0 || (size_t)n >= cap) return st_fail(err, ST_ERR_INVALID_ARG, "dispatch key buffer too small");
  if (!fields) return ST_OK;
  fields->n = 0;
  st_status s;
  if ((s = st_params_set_int(fields, "B", B, err)) || (s = st_params_set_int(fields, "D", D, err)) ||
      (s = st_params_set_int(fields, "H", H, err)) || (s = st_params_set(fields, "dtype", dtype, err)))
    return s;
  return ST_OK;
}

/* ---- the op's descriptor (ops/op.h) ------------------------------------ */

static st_status parse_config(const st_params *kernel, const st_params *launch, st_variant_config *c, int *rank,
                              st_err *why) {
  const st_status st = st_index_score_config_from_params(kernel, launch, &c->index_score, why);
  *rank = 0;
  return st;
}

ST_OP_TYPED_ADAPTERS(index_score)

static void shape_only(const void *args, st_op_args *copy) {
  const st_index_score_args *a = args;
  st_index_score_args *c = &copy->index_score;
  *c = *a;
  st_tensor *t[] = {&c->q, &c->k_cache, &c->block_table, &c->cu_seqlens_q, &c->seq_lens, &c->score};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) t[i]->data = ST_STAND_IN(i);
}

static st_status plan(const st_variant_config *cfg, const void *args, int sm_count, st_op_plan *plan,
                      st_plan_info *info, st_err *err) {
  const st_index_score_args *a = args;
  st_index_score_plan *p = &plan->index_score;
  const st_status st = st_index_score_plan_make(&cfg->index_score, a, sm_count, p, err); /* checks the fit first */
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
  return st_index_score_launch(cu, main_fn, &plan->index_score, stream, err);
}

const st_op_desc st_index_score_op = {.name = ST_INDEX_SCORE_OP,
                                      .main_kernel = ST_INDEX_SCORE_MAIN_KERNEL,
                                      .params_bytes = sizeof(st_index_score_params),
                                      .merge_kernel = NULL,
                                      .parse_config = parse_config,
                                      .needs_merge = NULL,
                                      .check_args = check_args,
                                      .shape_only = shape_only,
                                      .max_context = max_context,
                                      .dispatch_key = dispatch_key,
                                      .plan = plan,
                                      .launch = launch};
