/* ops/dsa_index_decode.c - validation, fit, launch math and launch of
 * dsa_index_decode. Shared by the tuner and the runtime: what was timed is
 * what runs. */
#include "ops/dsa_index_decode.h"
#include "ops/op.h"

#include <stdio.h>
#include <string.h>

#include "ops/launch.h"
#include "ops/tensor_check.h"
#include "ops/workspace.h"

/* Bytes of a page per token: 128 fp8 values and one fp32 scale. */
#define ST_DSA_TOKEN_BYTES (ST_DSA_INDEX_DECODE_HEAD_DIM + 4)
/* The main kernel's q fragments: per query token and 8 heads, 128 f16
 * values a head (templates/dsa_index_decode.cu, "q in shared memory"). */
#define ST_DSA_Q_BYTES_PER_8_HEADS (8 * ST_DSA_INDEX_DECODE_HEAD_DIM * 2)
/* The merge's dynamic shared memory at most: a row of up to 32K logits'
 * keys, held for every pass, or (merge_filter) 16K candidates' keys and
 * positions of a longer row. Longer rows of the other variants are read
 * from L2 in each pass. */
#define ST_DSA_STAGE_SMEM (128 * 1024)
/* Tokens one warp scores at a time (an mma row tile). */
#define ST_DSA_TILE 16
/* CTAs of the main kernel one multiprocessor holds at once, for the
 * one-wave split rule: its shared memory (q fragments) and registers allow
 * two of 256 threads or four of 128 on Hopper; not yet measured. */
#define ST_DSA_SM_THREADS 512
#define ST_DSA_MAX_SPLITS 1024

st_status st_dsa_index_decode_config_from_params(const st_params *kernel, const st_params *launch,
                                                 st_dsa_index_decode_config *cfg, st_err *err) {
  memset(cfg, 0, sizeof *cfg);
  long long v;
  st_status s;
#define GET(ps, key, lo, hi, field)                                                                                    \
  if ((s = st_params_get_int(ps, key, lo, hi, &v, err)) != ST_OK) return s;                                            \
  cfg->field = (int)v;
  GET(kernel, "max_heads", 8, ST_DSA_INDEX_DECODE_MAX_HEADS, max_heads)
  GET(kernel, "max_qlen", 1, ST_DSA_INDEX_DECODE_MAX_QLEN, max_qlen)
  GET(kernel, "threads", 64, 1024, threads)
  GET(kernel, "tiles_in_flight", 1, 4, tiles_in_flight)
  GET(kernel, "merge_threads", 64, 1024, merge_threads)
  GET(kernel, "merge_filter", 0, 1, merge_filter)
  GET(launch, "splits", 0, ST_DSA_MAX_SPLITS, splits)
#undef GET
  if (cfg->threads % 32 || cfg->merge_threads & (cfg->merge_threads - 1))
    return st_fail(err, ST_ERR_INVALID_ARG,
                   "variant parameters threads=%d and merge_threads=%d must be whole warps and a power of two",
                   cfg->threads, cfg->merge_threads);
  if (cfg->max_heads % 8)
    return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter max_heads=%d is not a multiple of 8 (mma columns)",
                   cfg->max_heads);
  return ST_OK;
}

/* The index-K cache as the contract gives it: a byte view of whole pages. */
static st_status check_cache(const st_dsa_index_decode_args *a, st_err *err) {
  st_status s = st_check_tensor(&a->k_cache, "k_cache", ST_DTYPE_FP8_E4M3, 2, err);
  if (s != ST_OK) return s;
  const int64_t page_bytes = (int64_t)a->page_size * ST_DSA_TOKEN_BYTES;
  if (a->k_cache.shape[1] != page_bytes)
    return st_fail(err, ST_ERR_INVALID_ARG,
                   "k_cache.shape[1]=%lld must be page_size x (128 values + 4 scale bytes) = %d x 132 = %lld bytes",
                   (long long)a->k_cache.shape[1], a->page_size, (long long)page_bytes);
  if (a->k_cache.shape[0] > 1 && a->k_cache.stride[0] < page_bytes)
    return st_fail(err, ST_ERR_INVALID_ARG, "k_cache.stride[0]=%lld bytes is less than a page's %lld bytes",
                   (long long)a->k_cache.stride[0], (long long)page_bytes);
  /* 16-byte loads of each token's 128 values: pages start 16-byte aligned. */
  if ((uintptr_t)a->k_cache.data % 16 || a->k_cache.stride[0] % 16)
    return st_fail(err, ST_ERR_INVALID_ARG, "k_cache.data=%p and k_cache.stride[0]=%lld must be multiples of 16 bytes",
                   a->k_cache.data, (long long)a->k_cache.stride[0]);
  return ST_OK;
}

st_status st_dsa_index_decode_check_args(const st_dsa_index_decode_args *a, st_err *err) {
  if (!a) return st_fail(err, ST_ERR_INVALID_ARG, "args is NULL");
  st_status s;
  if (a->qlen < 1 || a->qlen > ST_DSA_INDEX_DECODE_MAX_QLEN)
    return st_fail(err, ST_ERR_INVALID_ARG, "qlen=%d is outside 1..%d", a->qlen, ST_DSA_INDEX_DECODE_MAX_QLEN);
  if (a->topk < 1 || a->topk > ST_DSA_INDEX_DECODE_MAX_TOPK)
    return st_fail(err, ST_ERR_INVALID_ARG, "topk=%d is outside 1..%d", a->topk, ST_DSA_INDEX_DECODE_MAX_TOPK);
  if (a->page_size < 1 || a->page_size > ST_DSA_INDEX_DECODE_MAX_PAGE_SIZE)
    return st_fail(err, ST_ERR_INVALID_ARG, "page_size=%d is outside 1..%d", a->page_size,
                   ST_DSA_INDEX_DECODE_MAX_PAGE_SIZE);
  if ((s = st_check_tensor(&a->q, "q", ST_DTYPE_FP8_E4M3, 3, err)) != ST_OK) return s;
  const int64_t rows = a->q.shape[0], H = a->q.shape[1], D = a->q.shape[2];
  if (D != ST_DSA_INDEX_DECODE_HEAD_DIM)
    return st_fail(err, ST_ERR_INVALID_ARG, "q.shape[2]=%lld must be the head dim %d", (long long)D,
                   ST_DSA_INDEX_DECODE_HEAD_DIM);
  if (H > ST_DSA_INDEX_DECODE_MAX_HEADS)
    return st_fail(err, ST_ERR_INVALID_ARG, "q.shape[1]=%lld heads exceed %d", (long long)H,
                   ST_DSA_INDEX_DECODE_MAX_HEADS);
  if (rows % a->qlen)
    return st_fail(err, ST_ERR_INVALID_ARG, "q.shape[0]=%lld is not a multiple of qlen=%d", (long long)rows, a->qlen);
  const int64_t R = rows / a->qlen;
  if (R > 65535)
    return st_fail(err, ST_ERR_INVALID_ARG, "q.shape[0]=%lld is %lld requests of qlen=%d, more than 65535",
                   (long long)rows, (long long)R, a->qlen);
  if ((s = st_check_tensor(&a->weights, "weights", ST_DTYPE_FP32, 2, err)) != ST_OK) return s;
  if (a->weights.shape[0] != rows || a->weights.shape[1] != H)
    return st_fail(err, ST_ERR_INVALID_ARG, "weights.shape=[%lld,%lld] must be [R*qlen=%lld, H=%lld]",
                   (long long)a->weights.shape[0], (long long)a->weights.shape[1], (long long)rows, (long long)H);
  if ((s = check_cache(a, err)) != ST_OK) return s;
  if ((s = st_check_tensor(&a->block_table, "block_table", ST_DTYPE_INT32, 2, err)) != ST_OK) return s;
  if (a->block_table.shape[0] != R)
    return st_fail(err, ST_ERR_INVALID_ARG, "block_table.shape[0]=%lld must equal the %lld requests",
                   (long long)a->block_table.shape[0], (long long)R);
  if ((s = st_check_tensor(&a->seq_lens, "seq_lens", ST_DTYPE_INT32, 1, err)) != ST_OK) return s;
  if (a->seq_lens.shape[0] != R)
    return st_fail(err, ST_ERR_INVALID_ARG, "seq_lens.shape[0]=%lld must equal the %lld requests",
                   (long long)a->seq_lens.shape[0], (long long)R);
  if ((s = st_check_tensor(&a->topk_idx, "topk_idx", ST_DTYPE_INT32, 2, err)) != ST_OK) return s;
  if (a->topk_idx.shape[0] != rows || a->topk_idx.shape[1] != a->topk)
    return st_fail(err, ST_ERR_INVALID_ARG, "topk_idx.shape=[%lld,%lld] must be [R*qlen=%lld, topk=%d]",
                   (long long)a->topk_idx.shape[0], (long long)a->topk_idx.shape[1], (long long)rows, a->topk);
  int64_t cap = a->block_table.shape[1] * a->page_size;
  if (cap > ST_DSA_INDEX_DECODE_MAX_CONTEXT) cap = ST_DSA_INDEX_DECODE_MAX_CONTEXT;
  if (a->max_context < 1 || a->max_context > cap)
    return st_fail(err, ST_ERR_INVALID_ARG,
                   "max_context=%d is outside 1..%lld (block_table columns x page_size=%d, at most 2^24)",
                   a->max_context, (long long)cap, a->page_size);
  if (a->pdl != 0 && a->pdl != 1) return st_fail(err, ST_ERR_INVALID_ARG, "pdl=%d must be 0 or 1", a->pdl);
  /* 16-byte loads of q's head rows. */
  return st_check_vector_rows(&a->q, "q", 16, err);
}

st_status st_dsa_index_decode_check_fit(const st_dsa_index_decode_config *cfg, const st_dsa_index_decode_args *a,
                                        st_err *err) {
  const int64_t H = a->q.shape[1];
  if (H > cfg->max_heads)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant holds H <= %d heads, call has %lld", cfg->max_heads, (long long)H);
  if (a->qlen > cfg->max_qlen)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant handles qlen <= %d, call has %d", cfg->max_qlen, a->qlen);
  return ST_OK;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Split count: the variant's, or (0) one wave: as many CTAs a request as
 * fill the multiprocessors once (a second wave costs a whole CTA's time for
 * the few in it). Never more than a warp's tile for each warp of every
 * CTA (fewer tokens leave warps idle for nothing). */
static int choose_splits(const st_dsa_index_decode_config *cfg, int64_t R, int max_context, int sm_count) {
  int64_t s = cfg->splits;
  if (s == 0) {
    const int64_t per_sm = ST_DSA_SM_THREADS / cfg->threads > 0 ? ST_DSA_SM_THREADS / cfg->threads : 1;
    s = per_sm * sm_count / R;
    const int64_t most = ceil_div(max_context, (int64_t)ST_DSA_TILE * (cfg->threads / 32));
    if (s > most) s = most;
  }
  if (s > ST_DSA_MAX_SPLITS) s = ST_DSA_MAX_SPLITS;
  return (int)(s < 1 ? 1 : s);
}

st_status st_dsa_index_decode_plan_make(const st_dsa_index_decode_config *cfg, const st_dsa_index_decode_args *a,
                                        int sm_count, st_dsa_index_decode_plan *plan, st_err *err) {
  (void)err; /* every call check_args passes has a plan: the grid and shared memory never depend on the context */
  memset(plan, 0, sizeof *plan);
  const int64_t rows = a->q.shape[0], H = a->q.shape[1];
  const int64_t R = rows / a->qlen;
  const int splits = choose_splits(cfg, R, a->max_context, sm_count > 0 ? sm_count : 1);
  /* q fragments (f16) and weights of every query token, as the kernel lays
   * them out for its qlen. */
  const int64_t smem =
      (int64_t)a->qlen * (cfg->max_heads / 8) * ST_DSA_Q_BYTES_PER_8_HEADS + (int64_t)a->qlen * cfg->max_heads * 4;
  const int64_t logit_stride = (a->max_context + 3) / 4 * 4;
  const int64_t stage_cap = logit_stride * 4 <= ST_DSA_STAGE_SMEM ? logit_stride : ST_DSA_STAGE_SMEM / 4;
  /* Candidates only where a row can be longer than the staged ones. */
  const int64_t cand_cap = cfg->merge_filter && stage_cap < logit_stride ? ST_DSA_STAGE_SMEM / 8 : 0;

  st_dsa_index_decode_params *p = &plan->params;
  p->q = a->q.data;
  p->weights = a->weights.data;
  p->k_cache = a->k_cache.data;
  p->block_table = a->block_table.data;
  p->seq_lens = a->seq_lens.data;
  p->topk_idx = a->topk_idx.data;
  p->q_stride_row = a->q.stride[0];
  p->q_stride_head = a->q.stride[1];
  p->w_stride_row = a->weights.stride[0];
  p->page_stride = a->k_cache.stride[0];
  p->bt_stride = a->block_table.stride[0];
  p->out_stride_row = a->topk_idx.stride[0];
  p->logit_stride = logit_stride;
  p->num_requests = (int32_t)R;
  p->qlen = a->qlen;
  p->num_heads = (int32_t)H;
  p->topk = a->topk;
  p->page_size = a->page_size;
  p->max_context = a->max_context;
  p->splits = splits;
  p->stage_cap = (int32_t)stage_cap;
  p->cand_cap = (int32_t)cand_cap;

  /* R <= 65535, qlen <= 4, max_context <= 2^24: under 2^46 bytes. */
  size_t off = 0; /* ops/workspace.h: scratch only */
  plan->logits_offset = st_ws_take(&off, (size_t)rows * (size_t)logit_stride * 4);
  plan->workspace_bytes = off;
  plan->grid[0] = (unsigned)splits;
  plan->grid[1] = (unsigned)R;
  plan->grid[2] = 1;
  plan->block = (unsigned)cfg->threads;
  plan->smem_bytes = (unsigned)smem;
  plan->merge_grid[0] = (unsigned)rows;
  plan->merge_grid[1] = 1;
  plan->merge_grid[2] = 1;
  plan->merge_block = (unsigned)cfg->merge_threads;
  plan->merge_smem_bytes = (unsigned)(stage_cap * 4);
  plan->splits = splits;
  plan->pdl = a->pdl;
  return ST_OK;
}

static st_status launch_one(const st_cu *cu, CUfunction fn, const unsigned grid[3], unsigned block, unsigned smem,
                            st_dsa_index_decode_params *params, CUstream stream, int programmatic, st_err *err) {
  /* Past 48 KiB of static + dynamic shared memory a kernel must opt in; the
   * kernels' static part is under 17 KiB (the merge's histogram). */
  if (smem > 31 * 1024)
    ST_CU_TRY(cu, cu->cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem), err);
  void *kargs[] = {params};
  return st_launch_kernel(cu, fn, grid, block, smem, stream, kargs, programmatic, err);
}

st_status st_dsa_index_decode_launch(const st_cu *cu, CUfunction main_fn, CUfunction merge_fn,
                                     const st_dsa_index_decode_plan *plan, void *workspace, size_t workspace_bytes,
                                     CUstream stream, st_err *err) {
  if (!main_fn || !merge_fn) return st_fail(err, ST_ERR_INVALID_ARG, "dsa_index_decode needs its two kernels");
  if (!workspace || workspace_bytes < plan->workspace_bytes)
    return st_fail(err, ST_ERR_WORKSPACE, "workspace of %zu bytes at %p is smaller than the %zu bytes needed",
                   workspace ? workspace_bytes : 0, workspace, plan->workspace_bytes);
  st_dsa_index_decode_params params = plan->params;
  // cppcheck-suppress invalidPointerCast ; a device address, aligned for floats by the plan
  params.logits = (float *)((char *)workspace + plan->logits_offset);
  st_status s = launch_one(cu, main_fn, plan->grid, plan->block, plan->smem_bytes, &params, stream, plan->pdl, err);
  if (s != ST_OK) return s;
  /* The merge waits for the main kernel's logits (templates/common/pdl.cuh):
   * programmatic always, its CTAs placed during the main kernel's tail. */
  return launch_one(cu, merge_fn, plan->merge_grid, plan->merge_block, plan->merge_smem_bytes, &params, stream, 1, err);
}

st_status st_dsa_index_decode_dispatch_key(const st_dsa_index_decode_args *a, char *key, size_t cap, st_params *fields,
                                           st_err *err) {
  const long long R = a->q.shape[0] / (a->qlen > 0 ? a->qlen : 1);
  /* ctx: the best split differs between 8K and 128K contexts, and
   * max_context is what the host knows of them. */
  int n = snprintf(key, cap, "%s:B=%lld,H=%lld,ctx=%d,page=%d,qlen=%d,topk=%d", ST_DSA_INDEX_DECODE_OP, R,
                   (long long)a->q.shape[1], a->max_context, a->page_size, a->qlen, a->topk);
  if (n < 0 || (size_t)n >= cap) return st_fail(err, ST_ERR_INVALID_ARG, "dispatch key buffer too small");
  if (!fields) return ST_OK;
  fields->n = 0;
  st_status s;
  if ((s = st_params_set_int(fields, "B", R, err)) || (s = st_params_set_int(fields, "H", a->q.shape[1], err)) ||
      (s = st_params_set_int(fields, "ctx", a->max_context, err)) ||
      (s = st_params_set_int(fields, "page", a->page_size, err)) ||
      (s = st_params_set_int(fields, "qlen", a->qlen, err)) || (s = st_params_set_int(fields, "topk", a->topk, err)))
    return s;
  return ST_OK;
}

/* ---- the op's descriptor (ops/op.h) ------------------------------------ */

static st_status parse_config(const st_params *kernel, const st_params *launch, st_variant_config *c, int *rank,
                              st_err *why) {
  const st_status st = st_dsa_index_decode_config_from_params(kernel, launch, &c->dsa_index_decode, why);
  /* The fewest query tokens and heads that fit: the least q to stage. */
  *rank = c->dsa_index_decode.max_qlen * c->dsa_index_decode.max_heads;
  return st;
}

ST_OP_TYPED_ADAPTERS(dsa_index_decode)

static void shape_only(const void *args, st_op_args *copy) {
  const st_dsa_index_decode_args *a = args;
  st_dsa_index_decode_args *c = &copy->dsa_index_decode;
  *c = *a;
  st_tensor *t[] = {&c->q, &c->weights, &c->k_cache, &c->block_table, &c->seq_lens, &c->topk_idx};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) t[i]->data = ST_STAND_IN(i);
}

static st_status plan(const st_variant_config *cfg, const void *args, int sm_count, st_op_plan *plan,
                      st_plan_info *info, st_err *err) {
  const st_dsa_index_decode_args *a = args;
  st_status st = st_dsa_index_decode_check_fit(&cfg->dsa_index_decode, a, err);
  if (st != ST_OK) return st;
  st_dsa_index_decode_plan *p = &plan->dsa_index_decode;
  if ((st = st_dsa_index_decode_plan_make(&cfg->dsa_index_decode, a, sm_count, p, err)) != ST_OK) return st;
  *info = (st_plan_info){.workspace_bytes = p->workspace_bytes,
                         .smem_bytes = p->smem_bytes,
                         .merge_smem_bytes = p->merge_smem_bytes,
                         .side_stream = 0,
                         .splits = p->splits};
  return ST_OK;
}

static st_status launch(const st_cu *cu, CUfunction main_fn, CUfunction merge_fn, const st_op_plan *plan,
                        void *workspace, size_t workspace_bytes, CUstream stream, st_side_stream *side, st_err *err) {
  (void)side;
  return st_dsa_index_decode_launch(cu, main_fn, merge_fn, &plan->dsa_index_decode, workspace, workspace_bytes, stream,
                                    err);
}

const st_op_desc st_dsa_index_decode_op = {.name = ST_DSA_INDEX_DECODE_OP,
                                           .main_kernel = ST_DSA_INDEX_DECODE_MAIN_KERNEL,
                                           .params_bytes = sizeof(st_dsa_index_decode_params),
                                           .merge_kernel = ST_DSA_INDEX_DECODE_MERGE_KERNEL,
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
