/* ops/index_decode.c - validation, fit, launch math and launch of index_decode.
 * Shared by the tuner and the runtime: what was timed is what runs. */
#include "ops/index_decode.h"
#include "ops/op.h"

#include <stdio.h>
#include <string.h>

#include "ops/launch.h"
#include "ops/tensor_check.h"
#include "ops/workspace.h"

/* Dynamic shared memory one CTA may ask for. Far under the 227 KiB limit so
 * several CTAs share a multiprocessor. */
#define ST_INDEX_DECODE_MAX_SMEM (96 * 1024)
/* Shared memory the merge stages block keys in: 8192 blocks (1M tokens) of
 * one column, or the 1024 blocks of 128K tokens for 8 columns at once. A
 * larger buffer would cost every scoring CTA of the launch occupancy. */
#define ST_INDEX_DECODE_SELECT_SMEM (32 * 1024)
/* Copy stages of the bulk variants beyond that: four 32 KiB blocks. */
#define ST_INDEX_DECODE_STAGE_SMEM (128 * 1024)

st_status st_index_decode_config_from_params(const st_params *kernel, const st_params *launch,
                                             st_index_decode_config *cfg, st_err *err) {
  memset(cfg, 0, sizeof *cfg);
  const char *dtype = st_params_get(kernel, "dtype");
  const char *algo = st_params_get(kernel, "algo");
  if (!dtype || (strcmp(dtype, "bf16") && strcmp(dtype, "fp8")))
    return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter dtype='%s' is not bf16 or fp8",
                   dtype ? dtype : "(missing)");
  if (!algo || (strcmp(algo, "single") && strcmp(algo, "split")))
    return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter algo='%s' is not single or split",
                   algo ? algo : "(missing)");
  cfg->dtype = strcmp(dtype, "bf16") == 0 ? ST_DTYPE_BF16 : ST_DTYPE_FP8_E4M3;
  cfg->algo = strcmp(algo, "single") == 0 ? ST_INDEX_DECODE_SINGLE : ST_INDEX_DECODE_SPLIT;
  long long v;
  st_status s;
#define GET(ps, key, lo, hi, field)                                                                                    \
  if ((s = st_params_get_int(ps, key, lo, hi, &v, err)) != ST_OK) return s;                                            \
  cfg->field = (int)v;
  GET(kernel, "head_dim", 16, 512, head_dim)
  GET(kernel, "topk", 1, ST_INDEX_DECODE_MAX_TOPK, topk_cap)
  GET(kernel, "heads_per_cta", 1, 16, heads_per_cta)
  GET(kernel, "max_qlen", 1, ST_INDEX_DECODE_MAX_QLEN, max_qlen)
  GET(kernel, "threads", 64, 1024, threads)
  GET(kernel, "units_in_flight", 1, 8, units_in_flight)
  /* Variants recorded before bulk copies existed have no bulk_stages. */
  if (st_params_get(kernel, "bulk_stages")) {
    GET(kernel, "bulk_stages", 0, 8, bulk_stages)
  }
  GET(launch, "splits", 0, 4096, splits)
#undef GET
  if (cfg->threads % 32)
    return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter threads=%d is not a multiple of 32", cfg->threads);
  if (cfg->heads_per_cta * cfg->max_qlen > 16)
    return st_fail(err, ST_ERR_INVALID_ARG, "variant has heads_per_cta*max_qlen=%d columns, more than 16",
                   cfg->heads_per_cta * cfg->max_qlen);
  return ST_OK;
}

st_status st_index_decode_check_args(const st_index_decode_args *a, st_err *err) {
  if (!a) return st_fail(err, ST_ERR_INVALID_ARG, "args is NULL");
  st_status s;
  if (a->qlen < 1 || a->qlen > ST_INDEX_DECODE_MAX_QLEN)
    return st_fail(err, ST_ERR_INVALID_ARG, "qlen=%d is outside 1..%d", a->qlen, ST_INDEX_DECODE_MAX_QLEN);
  if ((s = st_check_selection(a->topk, ST_INDEX_DECODE_MAX_TOPK, a->init_blocks, a->local_blocks, err)) != ST_OK)
    return s;
  if (a->q.dtype != ST_DTYPE_BF16 && a->q.dtype != ST_DTYPE_FP8_E4M3)
    return st_fail(err, ST_ERR_INVALID_ARG, "q.dtype=%d is not bf16 (%d) or fp8_e4m3 (%d)", (int)a->q.dtype,
                   ST_DTYPE_BF16, ST_DTYPE_FP8_E4M3);
  if ((s = st_check_tensor(&a->q, "q", a->q.dtype, 3, err)) != ST_OK) return s;
  const int64_t rows = a->q.shape[0], H = a->q.shape[1], D = a->q.shape[2];
  if (rows % a->qlen)
    return st_fail(err, ST_ERR_INVALID_ARG, "q.shape[0]=%lld is not a multiple of qlen=%d", (long long)rows, a->qlen);
  const int64_t R = rows / a->qlen;
  if (R > 65535)
    return st_fail(err, ST_ERR_INVALID_ARG, "q.shape[0]=%lld is %lld requests of qlen=%d, more than 65535",
                   (long long)rows, (long long)R, a->qlen);
  if (H > 65535) return st_fail(err, ST_ERR_INVALID_ARG, "q.shape[1]=%lld heads exceed 65535", (long long)H);
  if ((s = st_check_tensor(&a->k_cache, "k_cache", a->q.dtype, 3, err)) != ST_OK) return s;
  if (a->k_cache.shape[1] != ST_BLOCK_TOKENS || a->k_cache.shape[2] != D)
    return st_fail(err, ST_ERR_INVALID_ARG, "k_cache.shape=[%lld,%lld,%lld] must be [pages,%d,%lld]",
                   (long long)a->k_cache.shape[0], (long long)a->k_cache.shape[1], (long long)a->k_cache.shape[2],
                   ST_BLOCK_TOKENS, (long long)D);
  if ((s = st_check_tensor(&a->block_table, "block_table", ST_DTYPE_INT32, 2, err)) != ST_OK) return s;
  if (a->block_table.shape[0] != R)
    return st_fail(err, ST_ERR_INVALID_ARG, "block_table.shape[0]=%lld must equal the %lld requests",
                   (long long)a->block_table.shape[0], (long long)R);
  if ((s = st_check_tensor(&a->seq_lens, "seq_lens", ST_DTYPE_INT32, 1, err)) != ST_OK) return s;
  if (a->seq_lens.shape[0] != R)
    return st_fail(err, ST_ERR_INVALID_ARG, "seq_lens.shape[0]=%lld must equal the %lld requests",
                   (long long)a->seq_lens.shape[0], (long long)R);
  if ((s = st_check_tensor(&a->topk_idx, "topk_idx", ST_DTYPE_INT32, 3, err)) != ST_OK) return s;
  if (a->topk_idx.shape[0] != H || a->topk_idx.shape[1] != rows || a->topk_idx.shape[2] != a->topk)
    return st_fail(err, ST_ERR_INVALID_ARG,
                   "topk_idx.shape=[%lld,%lld,%lld] must be [H=%lld, "
                   "R*qlen=%lld, topk=%d]",
                   (long long)a->topk_idx.shape[0], (long long)a->topk_idx.shape[1], (long long)a->topk_idx.shape[2],
                   (long long)H, (long long)rows, a->topk);
  const int64_t cap = a->block_table.shape[1] * ST_BLOCK_TOKENS;
  if (a->max_context < 1 || a->max_context > cap)
    return st_fail(err, ST_ERR_INVALID_ARG, "max_context=%d is outside 1..%lld (block_table columns x %d)",
                   a->max_context, (long long)cap, ST_BLOCK_TOKENS);
  if (a->pdl != 0 && a->pdl != 1) return st_fail(err, ST_ERR_INVALID_ARG, "pdl=%d must be 0 or 1", a->pdl);
  /* 16-byte vector loads of q and K rows. */
  if ((s = st_check_vector_rows(&a->q, "q", 16, err)) != ST_OK) return s;
  if ((s = st_check_vector_rows(&a->k_cache, "k_cache", 16, err)) != ST_OK) return s;
  return ST_OK;
}

st_status st_index_decode_check_fit(const st_index_decode_config *cfg, const st_index_decode_args *a, st_err *err) {
  const int64_t H = a->q.shape[1], D = a->q.shape[2];
  if (cfg->dtype != a->q.dtype)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant is for dtype %s, call is %s", st_dtype_name(cfg->dtype),
                   st_dtype_name(a->q.dtype));
  if (cfg->head_dim != D)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant is for head_dim %d, call has %lld", cfg->head_dim, (long long)D);
  if (a->topk > cfg->topk_cap)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant holds topk <= %d, call asks %d", cfg->topk_cap, a->topk);
  if (H % cfg->heads_per_cta)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant scores %d heads per CTA, which does not divide H=%lld",
                   cfg->heads_per_cta, (long long)H);
  if (a->qlen > cfg->max_qlen)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant handles qlen <= %d, call has %d", cfg->max_qlen, a->qlen);
  /* The bulk variants' row-by-row copy of a strided page has not run on a
   * GPU yet (the tests' caches are dense): such calls take a register
   * variant until it has. */
  if (cfg->bulk_stages > 0 && a->k_cache.stride[1] != D)
    return st_fail(err, ST_ERR_NO_VARIANT, "bulk variant needs dense pages (k_cache.stride[1]=%lld, head_dim %lld)",
                   (long long)a->k_cache.stride[1], (long long)D);
  return ST_OK;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Split count: the variant's, or (0) one wave: the largest power of two
 * whose CTAs all fit on the multiprocessors at once, at three CTAs an SM
 * for bf16 keys, four for fp8 and six for fp8 with one head a CTA (the
 * bulk kernels' shared memory and registers; the six measured, not
 * derived). Fewer CTAs leave SMs idle; a second wave costs a whole CTA's
 * time for the few in it (docs/kernels/index_decode.md, "Split count for
 * one wave", "Six fp8 CTAs an SM with one head").
 * Never more than the blocks, and at least enough that one CTA's scores fit
 * in shared memory. */
static int choose_splits(const st_index_decode_config *cfg, int64_t R, int64_t groups, int64_t max_blocks,
                         int sm_count) {
  const int64_t cols = (int64_t)cfg->heads_per_cta * cfg->max_qlen;
  int64_t s = cfg->splits;
  if (s == 0) {
    const int fp8 = cfg->dtype == ST_DTYPE_FP8_E4M3;
    const int64_t slots = (fp8 ? (cfg->heads_per_cta == 1 ? 6 : 4) : 3) * (int64_t)sm_count;
    for (s = 1; 2 * s * R * groups <= slots;) s *= 2;
  }
  if (s > max_blocks) s = max_blocks;
  /* Per block of a slice: a score key per column and the block's page. */
  const int64_t min_s = ceil_div(max_blocks * (cols + 1) * 4, ST_INDEX_DECODE_MAX_SMEM);
  if (s < min_s) s = min_s;
  return (int)(s < 1 ? 1 : s);
}

st_status st_index_decode_plan_make(const st_index_decode_config *cfg, const st_index_decode_args *a, int sm_count,
                                    st_index_decode_plan *plan, st_err *err) {
  memset(plan, 0, sizeof *plan);
  const int64_t rows = a->q.shape[0], H = a->q.shape[1], D = a->q.shape[2];
  const int64_t R = rows / a->qlen, groups = H / cfg->heads_per_cta;
  const int64_t max_blocks = ceil_div(a->max_context, ST_BLOCK_TOKENS);
  const int splits = choose_splits(cfg, R, groups, max_blocks, sm_count > 0 ? sm_count : 1);
  const int64_t chunk_cap = ceil_div(max_blocks, splits);
  const int64_t cols = (int64_t)cfg->heads_per_cta * cfg->max_qlen;
  /* More than one request: the CTAs share the blocks by the actual lengths
   * (templates/index_decode.cu, "Balanced"), since a batch's lengths are
   * device data; a slice never exceeds chunk_cap (W <= ceil(max_blocks /
   * splits)), and any request may take more than one, so there is always a
   * merge. */
  const int balanced = R > 1;
  const int direct = cfg->algo == ST_INDEX_DECODE_SINGLE && splits == 1 && !balanced;
  /* The kernel numbers a head group's CTAs (and their slices) in an int. */
  if (R * (splits + balanced) > INT32_MAX)
    return st_fail(err, ST_ERR_UNSUPPORTED, "%lld requests x %d splits exceed the kernel's CTA numbering", (long long)R,
                   splits);
  /* The merge stages sel_cols columns of max_blocks keys at a time. */
  const int64_t row_bytes = max_blocks * 4;
  int64_t sel_cols = ST_INDEX_DECODE_SELECT_SMEM / row_bytes;
  if (sel_cols > cols) sel_cols = cols;
  if (sel_cols < 1) sel_cols = 1;
  const int64_t merge_bytes = direct ? 0 : sel_cols * row_bytes;
  /* Score keys and pages of a slice, then (bulk variants) the copy stages,
   * 128-byte aligned, as the template's st_stage_offset computes. The
   * merge reuses the same memory once scoring is done. */
  const int64_t keys_bytes = (cols + 1) * chunk_cap * 4;
  int64_t smem = keys_bytes;
  if (cfg->bulk_stages > 0)
    smem = (keys_bytes + 127) / 128 * 128 + (int64_t)cfg->bulk_stages * ST_BLOCK_TOKENS * D * st_dtype_bytes(cfg->dtype);
  if (cfg->algo == ST_INDEX_DECODE_SINGLE && merge_bytes > smem) smem = merge_bytes;
  if (keys_bytes > ST_INDEX_DECODE_MAX_SMEM || merge_bytes > ST_INDEX_DECODE_MAX_SMEM)
    return st_fail(err, ST_ERR_UNSUPPORTED,
                   "max_context=%d needs %lld bytes of shared memory with %d "
                   "splits (limit %d)",
                   a->max_context, (long long)(keys_bytes > merge_bytes ? keys_bytes : merge_bytes), splits,
                   ST_INDEX_DECODE_MAX_SMEM);
  if (smem > ST_INDEX_DECODE_MAX_SMEM + ST_INDEX_DECODE_STAGE_SMEM)
    return st_fail(err, ST_ERR_UNSUPPORTED, "bulk_stages=%d need %lld bytes of shared memory (limit %d)",
                   cfg->bulk_stages, (long long)smem, ST_INDEX_DECODE_MAX_SMEM + ST_INDEX_DECODE_STAGE_SMEM);

  st_index_decode_params *p = &plan->params;
  p->q = a->q.data;
  p->k_cache = a->k_cache.data;
  p->block_table = a->block_table.data;
  p->seq_lens = a->seq_lens.data;
  p->topk_idx = a->topk_idx.data;
  p->q_stride_row = a->q.stride[0];
  p->q_stride_head = a->q.stride[1];
  p->k_stride_page = a->k_cache.stride[0];
  p->k_stride_token = a->k_cache.stride[1];
  p->bt_stride = a->block_table.stride[0];
  p->out_stride_head = a->topk_idx.stride[0];
  p->out_stride_row = a->topk_idx.stride[1];
  p->num_requests = (int32_t)R;
  p->qlen = a->qlen;
  p->num_heads = (int32_t)H;
  p->topk = a->topk;
  p->init_blocks = a->init_blocks;
  p->local_blocks = a->local_blocks;
  p->max_blocks = (int32_t)max_blocks;
  p->splits = splits;
  p->chunk_cap = (int32_t)chunk_cap;
  p->sel_cols = (int32_t)sel_cols;
  p->balanced = balanced;

  /* R and H <= 65535, qlen <= 4, max_blocks < 2^24 (max_context is an
   * int): every size here stays under 2^60 bytes. */
  size_t off = 0; /* ops/workspace.h */
  if (cfg->algo == ST_INDEX_DECODE_SINGLE && !direct) {
    plan->counters_bytes = (size_t)(R * groups) * 4;
    plan->counters_offset = st_ws_take_counters(&off, plan->counters_bytes, &plan->zero_counters);
  }
  if (!direct)
    plan->block_keys_offset = st_ws_take(&off, (size_t)R * (size_t)H * (size_t)a->qlen * (size_t)max_blocks * 4);
  plan->workspace_bytes = off;
  plan->grid[0] = (unsigned)(splits + balanced);
  plan->grid[1] = (unsigned)R;
  plan->grid[2] = (unsigned)groups;
  plan->block = (unsigned)cfg->threads;
  plan->smem_bytes = (unsigned)smem;
  plan->splits = splits;
  plan->pdl = a->pdl;
  if (cfg->algo == ST_INDEX_DECODE_SPLIT) {
    plan->merge_grid[0] = (unsigned)R;
    plan->merge_grid[1] = (unsigned)groups;
    plan->merge_grid[2] = 1;
    plan->merge_block = (unsigned)cfg->threads;
    plan->merge_smem_bytes = (unsigned)merge_bytes;
  }
  return ST_OK;
}

static st_status launch_one(const st_cu *cu, CUfunction fn, const unsigned grid[3], unsigned block, unsigned smem,
                            st_index_decode_params *params, CUstream stream, int programmatic, st_err *err) {
  /* Past 48 KiB of static + dynamic shared memory a kernel must opt in; the
   * kernels' static part (the selection's histograms) is under 17 KiB. */
  if (smem > 31 * 1024)
    ST_CU_TRY(cu, cu->cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem), err);
  void *kargs[] = {params};
  return st_launch_kernel(cu, fn, grid, block, smem, stream, kargs, programmatic, err);
}

st_status st_index_decode_launch(const st_cu *cu, CUfunction main_fn, CUfunction merge_fn,
                                 const st_index_decode_plan *plan, void *workspace, size_t workspace_bytes,
                                 CUstream stream, st_err *err) {
  if (!main_fn) return st_fail(err, ST_ERR_INVALID_ARG, "index_decode main kernel is NULL");
  if (plan->merge_block && !merge_fn)
    return st_fail(err, ST_ERR_INVALID_ARG, "index_decode split variant needs its merge kernel");
  if (plan->workspace_bytes > 0 && (!workspace || workspace_bytes < plan->workspace_bytes))
    return st_fail(err, ST_ERR_WORKSPACE, "workspace of %zu bytes at %p is smaller than the %zu bytes needed",
                   workspace ? workspace_bytes : 0, workspace, plan->workspace_bytes);
  st_index_decode_params params = plan->params;
  char *ws = workspace;
  if (plan->workspace_bytes > 0) {
    params.counters = (uint32_t *)(ws + plan->counters_offset);
    params.block_keys = (uint32_t *)(ws + plan->block_keys_offset);
  }
  if (plan->zero_counters)
    ST_CU_TRY(cu,
              cu->cuMemsetD32Async((CUdeviceptr)(uintptr_t)params.counters, 0, plan->counters_bytes / 4, stream),
              err);
  st_status s = launch_one(cu, main_fn, plan->grid, plan->block, plan->smem_bytes, &params, stream, plan->pdl, err);
  if (s != ST_OK || !plan->merge_block) return s;
  /* The merge waits for the main kernel's keys (templates/common/pdl.cuh):
   * programmatic always, its CTAs placed during the main kernel's tail. */
  return launch_one(cu, merge_fn, plan->merge_grid, plan->merge_block, plan->merge_smem_bytes, &params, stream, 1,
                    err);
}

st_status st_index_decode_dispatch_key(const st_index_decode_args *a, char *key, size_t cap, st_params *fields,
                                       st_err *err) {
  const long long R = a->q.shape[0] / (a->qlen > 0 ? a->qlen : 1);
  const char *dt = st_dtype_name(a->q.dtype);
  /* ctx: the best split and load differ between 8K and 128K contexts,
   * and max_context is what the host knows of them. */
  int n = snprintf(key, cap, "%s:B=%lld,D=%lld,H=%lld,ctx=%d,dtype=%s,qlen=%d,topk=%d", ST_INDEX_DECODE_OP, R,
                   (long long)a->q.shape[2], (long long)a->q.shape[1], a->max_context, dt, a->qlen, a->topk);
  if (n < 0 || (size_t)n >= cap) return st_fail(err, ST_ERR_INVALID_ARG, "dispatch key buffer too small");
  if (!fields) return ST_OK;
  fields->n = 0;
  st_status s;
  if ((s = st_params_set_int(fields, "B", R, err)) || (s = st_params_set_int(fields, "D", a->q.shape[2], err)) ||
      (s = st_params_set_int(fields, "H", a->q.shape[1], err)) ||
      (s = st_params_set_int(fields, "ctx", a->max_context, err)) || (s = st_params_set(fields, "dtype", dt, err)) ||
      (s = st_params_set_int(fields, "qlen", a->qlen, err)) || (s = st_params_set_int(fields, "topk", a->topk, err)))
    return s;
  return ST_OK;
}

/* ---- the op's descriptor (ops/op.h) ------------------------------------ */

static st_status parse_config(const st_params *kernel, const st_params *launch, st_variant_config *c, int *rank,
                              st_err *why) {
  const st_status st = st_index_decode_config_from_params(kernel, launch, &c->index_decode, why);
  *rank = c->index_decode.topk_cap; /* the smallest capacity that fits is the fastest */
  return st;
}

static int needs_merge(const st_variant_config *cfg) { return cfg->index_decode.algo == ST_INDEX_DECODE_SPLIT; }

ST_OP_TYPED_ADAPTERS(index_decode)

static void shape_only(const void *args, st_op_args *copy) {
  const st_index_decode_args *a = args;
  st_index_decode_args *c = &copy->index_decode;
  *c = *a;
  st_tensor *t[] = {&c->q, &c->k_cache, &c->block_table, &c->seq_lens, &c->topk_idx};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) t[i]->data = ST_STAND_IN(i);
}

static st_status plan(const st_variant_config *cfg, const void *args, int sm_count, st_op_plan *plan,
                      st_plan_info *info, st_err *err) {
  const st_index_decode_args *a = args;
  st_status st = st_index_decode_check_fit(&cfg->index_decode, a, err);
  if (st != ST_OK) return st;
  st_index_decode_plan *p = &plan->index_decode;
  if ((st = st_index_decode_plan_make(&cfg->index_decode, a, sm_count, p, err)) != ST_OK) return st;
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
  return st_index_decode_launch(cu, main_fn, merge_fn, &plan->index_decode, workspace, workspace_bytes, stream, err);
}

/* Blocks of (request, index head) per multiprocessor, R x H x
 * ceil(max_context / 128) / SMs: the unit of the defaults' load ranges
 * (generator/ops/index_decode.lua), where a CTA of h heads takes h of them. */
static double load(const void *args, int sm_count) {
  const st_index_decode_args *a = args;
  const int64_t requests = a->q.shape[0] / a->qlen; /* q's rows are R x qlen: whole */
  const double blocks = (double)ceil_div(a->max_context, ST_BLOCK_TOKENS);
  return (double)requests * (double)a->q.shape[1] * blocks / (double)(sm_count > 0 ? sm_count : 1);
}

/* What besides the key decides the fit: dense pages (the bulk variants). */
static uint32_t memo_tag(const void *args) {
  const st_index_decode_args *a = args;
  return a->k_cache.stride[1] == a->q.shape[2];
}

const st_op_desc st_index_decode_op = {.name = ST_INDEX_DECODE_OP,
                                       .main_kernel = ST_INDEX_DECODE_MAIN_KERNEL,
                                       .params_bytes = sizeof(st_index_decode_params),
                                       .merge_kernel = ST_INDEX_DECODE_MERGE_KERNEL,
                                       .parse_config = parse_config,
                                       .needs_merge = needs_merge,
                                       .check_args = check_args,
                                       .shape_only = shape_only,
                                       .max_context = max_context,
                                       .load = load,
                                       .memo_tag = memo_tag,
                                       .dispatch_key = dispatch_key,
                                       .plan = plan,
                                       .launch = launch,
                                       .exact_keys_only = 1};
