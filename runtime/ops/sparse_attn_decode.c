/* ops/sparse_attn_decode.c - validation, fit, launch math and launch of
 * sparse_attn_decode. Shared by the tuner and the runtime: what was timed is
 * what runs. */
#include "ops/sparse_attn_decode.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/tensor_check.h"

#define ST_BLOCK_TOKENS 128
#define ST_WS_ALIGN 256
/* Dynamic shared memory one CTA may opt in to on sm_90 (227 KiB less the
 * kernel's static part). */
#define ST_SPARSE_ATTN_DECODE_MAX_SMEM (220 * 1024)
#define ST_DEFAULT_SMEM_WITHOUT_OPT_IN (48 * 1024)

st_status st_sparse_attn_decode_config_from_params(const st_params *kernel, const st_params *launch,
                                                   st_sparse_attn_decode_config *cfg, st_err *err) {
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
  cfg->algo = strcmp(algo, "single") == 0 ? ST_SPARSE_ATTN_DECODE_SINGLE : ST_SPARSE_ATTN_DECODE_SPLIT;
  long long v;
  st_status s;
#define GET(ps, key, lo, hi, field)                                                                                    \
  if ((s = st_params_get_int(ps, key, lo, hi, &v, err)) != ST_OK) return s;                                            \
  cfg->field = (int)v;
  GET(kernel, "head_dim", 64, 256, head_dim)
  GET(kernel, "group", 1, ST_SPARSE_ATTN_DECODE_MAX_GROUP, group)
  GET(kernel, "warps_n", 2, 8, warps_n)
  GET(kernel, "stages", 1, 4, stages)
  GET(launch, "splits", 0, ST_SPARSE_ATTN_DECODE_MAX_TOPK, splits)
#undef GET
  if (cfg->head_dim % 64)
    return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter head_dim=%d is not a multiple of 64", cfg->head_dim);
  if (cfg->warps_n != 2 && cfg->warps_n != 4 && cfg->warps_n != 8)
    return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter warps_n=%d is not 2, 4 or 8", cfg->warps_n);
  return ST_OK;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

static size_t align_up(size_t x) { return (x + ST_WS_ALIGN - 1) / ST_WS_ALIGN * ST_WS_ALIGN; }

static int m_tiles(int group) { return (int)ceil_div(group, 16); }

unsigned st_sparse_attn_decode_smem_bytes(const st_sparse_attn_decode_config *cfg) {
  const int64_t D = cfg->head_dim, fp8 = cfg->dtype == ST_DTYPE_FP8_E4M3;
  const int64_t warps = (int64_t)cfg->warps_n * m_tiles(cfg->group);
  const int64_t q_bytes = m_tiles(cfg->group) * 16 * D * 2;
  const int64_t tile = ST_BLOCK_TOKENS * D * 2;
  const int64_t stage = fp8 ? 2 * ST_BLOCK_TOKENS * D + 2 * ST_BLOCK_TOKENS * 4 : 2 * tile;
  const int64_t kv = cfg->stages * stage + (fp8 ? 2 * tile : 0);
  const int64_t combine = warps * 16 * (D + 2) * 4;
  const int64_t block_list = ST_SPARSE_ATTN_DECODE_MAX_TOPK * 8;
  return (unsigned)(q_bytes + (kv > combine ? kv : combine) + block_list);
}

/* A view [pages, Hkv, 128, D] of the cache, checked like k_cache. */
static st_status check_cache(const st_tensor *t, const char *name, const st_sparse_attn_decode_args *a, st_err *err) {
  st_status s = st_check_tensor(t, name, a->k_cache.dtype, 4, err);
  if (s != ST_OK) return s;
  const int64_t Hkv = a->k_cache.shape[1], D = a->q.shape[2];
  if (t->shape[0] != a->k_cache.shape[0] || t->shape[1] != Hkv || t->shape[2] != ST_BLOCK_TOKENS || t->shape[3] != D)
    return st_fail(err, ST_ERR_INVALID_ARG,
                   "%s.shape=[%lld,%lld,%lld,%lld] must be [pages=%lld, "
                   "Hkv=%lld, %d, D=%lld]",
                   name, (long long)t->shape[0], (long long)t->shape[1], (long long)t->shape[2], (long long)t->shape[3],
                   (long long)a->k_cache.shape[0], (long long)Hkv, ST_BLOCK_TOKENS, (long long)D);
  /* 16-byte asynchronous copies of every row. */
  return st_check_vector_rows(t, name, 16, err);
}

/* A per-(page, kv head, slot) fp32 scale view [pages, Hkv, 128]: any
 * non-negative strides (engines keep slot-major and head-major layouts). */
static st_status check_scales(const st_tensor *t, const char *name, const st_tensor *cache, st_err *err) {
  if (t->dtype != ST_DTYPE_FP32 || t->ndim != 3)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s must be a 3-d fp32 tensor (dtype=%d, ndim=%d)", name, (int)t->dtype,
                   t->ndim);
  if (t->shape[0] != cache->shape[0] || t->shape[1] != cache->shape[1] || t->shape[2] != ST_BLOCK_TOKENS)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s.shape=[%lld,%lld,%lld] must be [pages=%lld, Hkv=%lld, %d]", name,
                   (long long)t->shape[0], (long long)t->shape[1], (long long)t->shape[2], (long long)cache->shape[0],
                   (long long)cache->shape[1], ST_BLOCK_TOKENS);
  for (int i = 0; i < 3; i++)
    if (t->stride[i] < 0)
      return st_fail(err, ST_ERR_INVALID_ARG, "%s.stride[%d]=%lld is negative", name, i, (long long)t->stride[i]);
  if (!t->data) return st_fail(err, ST_ERR_INVALID_ARG, "%s.data is NULL (scale_mode is TENSOR)", name);
  if ((uintptr_t)t->data % 4)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s.data=%p is not 4-byte aligned", name, t->data);
  return ST_OK;
}

static st_status check_scale_mode(const st_sparse_attn_decode_args *a, st_err *err) {
  switch (a->scale_mode) {
  case ST_KV_SCALE_NONE: return ST_OK;
  case ST_KV_SCALE_SCALAR:
  case ST_KV_SCALE_TENSOR: break;
  default:
    return st_fail(err, ST_ERR_INVALID_ARG, "scale_mode=%d is not NONE (0), SCALAR (1) or TENSOR (2)",
                   (int)a->scale_mode);
  }
  if (a->k_cache.dtype != ST_DTYPE_FP8_E4M3)
    return st_fail(err, ST_ERR_INVALID_ARG, "scale_mode=%d applies to fp8 caches only; a bf16 cache needs NONE (0)",
                   (int)a->scale_mode);
  if (a->scale_mode == ST_KV_SCALE_SCALAR) {
    if (!(isfinite(a->k_scale) && a->k_scale > 0) || !(isfinite(a->v_scale) && a->v_scale > 0))
      return st_fail(err, ST_ERR_INVALID_ARG, "k_scale=%g and v_scale=%g must be positive and finite",
                     (double)a->k_scale, (double)a->v_scale);
    return ST_OK;
  }
  st_status s = check_scales(&a->k_scales, "k_scales", &a->k_cache, err);
  return s != ST_OK ? s : check_scales(&a->v_scales, "v_scales", &a->k_cache, err);
}

static st_status check_index_tensors(const st_sparse_attn_decode_args *a, int64_t R, int64_t rows, int64_t Hkv,
                                     st_err *err) {
  st_status s;
  if ((s = st_check_tensor(&a->topk_idx, "topk_idx", ST_DTYPE_INT32, 3, err)) != ST_OK) return s;
  const int64_t topk = a->topk_idx.shape[2];
  if (a->topk_idx.shape[0] != Hkv || a->topk_idx.shape[1] != rows)
    return st_fail(err, ST_ERR_INVALID_ARG, "topk_idx.shape=[%lld,%lld,%lld] must be [Hkv=%lld, R*qlen=%lld, topk]",
                   (long long)a->topk_idx.shape[0], (long long)a->topk_idx.shape[1], (long long)topk, (long long)Hkv,
                   (long long)rows);
  if (topk > ST_SPARSE_ATTN_DECODE_MAX_TOPK)
    return st_fail(err, ST_ERR_INVALID_ARG, "topk=%lld (topk_idx.shape[2]) is outside 1..%d", (long long)topk,
                   ST_SPARSE_ATTN_DECODE_MAX_TOPK);
  if ((s = st_check_tensor(&a->block_table, "block_table", ST_DTYPE_INT32, 2, err)) != ST_OK) return s;
  if (a->block_table.shape[0] != R)
    return st_fail(err, ST_ERR_INVALID_ARG, "block_table.shape[0]=%lld must equal the %lld requests",
                   (long long)a->block_table.shape[0], (long long)R);
  if ((s = st_check_tensor(&a->seq_lens, "seq_lens", ST_DTYPE_INT32, 1, err)) != ST_OK) return s;
  if (a->seq_lens.shape[0] != R)
    return st_fail(err, ST_ERR_INVALID_ARG, "seq_lens.shape[0]=%lld must equal the %lld requests",
                   (long long)a->seq_lens.shape[0], (long long)R);
  const int64_t cap = a->block_table.shape[1] * ST_BLOCK_TOKENS;
  if (a->max_context < 1 || a->max_context > cap)
    return st_fail(err, ST_ERR_INVALID_ARG, "max_context=%d is outside 1..%lld (block_table columns x %d)",
                   a->max_context, (long long)cap, ST_BLOCK_TOKENS);
  return ST_OK;
}

static st_status check_outputs(const st_sparse_attn_decode_args *a, int64_t rows, int64_t Hq, int64_t D, st_err *err) {
  st_status s;
  if ((s = st_check_tensor(&a->o, "o", ST_DTYPE_BF16, 3, err)) != ST_OK) return s;
  if (a->o.shape[0] != rows || a->o.shape[1] != Hq || a->o.shape[2] != D)
    return st_fail(err, ST_ERR_INVALID_ARG, "o.shape=[%lld,%lld,%lld] must be q's [%lld,%lld,%lld]",
                   (long long)a->o.shape[0], (long long)a->o.shape[1], (long long)a->o.shape[2], (long long)rows,
                   (long long)Hq, (long long)D);
  if ((uintptr_t)a->o.data % 2) return st_fail(err, ST_ERR_INVALID_ARG, "o.data=%p is not 2-byte aligned", a->o.data);
  if (!a->lse.data) return ST_OK; /* not wanted */
  if ((s = st_check_tensor(&a->lse, "lse", ST_DTYPE_FP32, 2, err)) != ST_OK) return s;
  if (a->lse.shape[0] != rows || a->lse.shape[1] != Hq)
    return st_fail(err, ST_ERR_INVALID_ARG, "lse.shape=[%lld,%lld] must be [R*qlen=%lld, Hq=%lld]",
                   (long long)a->lse.shape[0], (long long)a->lse.shape[1], (long long)rows, (long long)Hq);
  if ((uintptr_t)a->lse.data % 4)
    return st_fail(err, ST_ERR_INVALID_ARG, "lse.data=%p is not 4-byte aligned", a->lse.data);
  return ST_OK;
}

st_status st_sparse_attn_decode_check_args(const st_sparse_attn_decode_args *a, st_err *err) {
  if (!a) return st_fail(err, ST_ERR_INVALID_ARG, "args is NULL");
  st_status s;
  if (a->qlen < 1 || a->qlen > ST_SPARSE_ATTN_DECODE_MAX_QLEN)
    return st_fail(err, ST_ERR_INVALID_ARG, "qlen=%d is outside 1..%d", a->qlen, ST_SPARSE_ATTN_DECODE_MAX_QLEN);
  if (!(isfinite(a->sm_scale) && a->sm_scale > 0))
    return st_fail(err, ST_ERR_INVALID_ARG, "sm_scale=%g must be positive and finite", (double)a->sm_scale);
  if ((s = st_check_tensor(&a->q, "q", ST_DTYPE_BF16, 3, err)) != ST_OK) return s;
  const int64_t rows = a->q.shape[0], Hq = a->q.shape[1], D = a->q.shape[2];
  if (rows % a->qlen)
    return st_fail(err, ST_ERR_INVALID_ARG, "q.shape[0]=%lld is not a multiple of qlen=%d", (long long)rows, a->qlen);
  /* Grid y holds the query rows (at most 65535). */
  if (rows > 65535)
    return st_fail(err, ST_ERR_INVALID_ARG, "R*qlen=%lld query rows exceed the limit of 65535", (long long)rows);
  if (D != 64 && D != 128 && D != 256)
    return st_fail(err, ST_ERR_UNSUPPORTED, "head_dim=%lld (q.shape[2]) is not 64, 128 or 256", (long long)D);
  if (a->k_cache.dtype != ST_DTYPE_BF16 && a->k_cache.dtype != ST_DTYPE_FP8_E4M3)
    return st_fail(err, ST_ERR_INVALID_ARG, "k_cache.dtype=%d is not bf16 (%d) or fp8_e4m3 (%d)", (int)a->k_cache.dtype,
                   ST_DTYPE_BF16, ST_DTYPE_FP8_E4M3);
  if ((s = check_cache(&a->k_cache, "k_cache", a, err)) != ST_OK) return s;
  if ((s = check_cache(&a->v_cache, "v_cache", a, err)) != ST_OK) return s;
  const int64_t Hkv = a->k_cache.shape[1];
  if (Hq % Hkv)
    return st_fail(err, ST_ERR_INVALID_ARG, "Hq=%lld q heads are not a multiple of Hkv=%lld kv heads", (long long)Hq,
                   (long long)Hkv);
  if (Hq / Hkv > ST_SPARSE_ATTN_DECODE_MAX_GROUP)
    return st_fail(err, ST_ERR_UNSUPPORTED, "Hq/Hkv=%lld q heads per kv head exceed %d", (long long)(Hq / Hkv),
                   ST_SPARSE_ATTN_DECODE_MAX_GROUP);
  if (Hkv > 65535) return st_fail(err, ST_ERR_INVALID_ARG, "Hkv=%lld kv heads exceed 65535", (long long)Hkv);
  if ((s = check_scale_mode(a, err)) != ST_OK) return s;
  if ((s = check_index_tensors(a, rows / a->qlen, rows, Hkv, err)) != ST_OK) return s;
  if ((s = check_outputs(a, rows, Hq, D, err)) != ST_OK) return s;
  /* 16-byte vector loads of q rows. */
  return st_check_vector_rows(&a->q, "q", 16, err);
}

st_status st_sparse_attn_decode_check_fit(const st_sparse_attn_decode_config *cfg, const st_sparse_attn_decode_args *a,
                                          st_err *err) {
  const int64_t D = a->q.shape[2], G = a->q.shape[1] / a->k_cache.shape[1];
  if (cfg->dtype != a->k_cache.dtype)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant is for a %s cache, call has %s", st_dtype_name(cfg->dtype),
                   st_dtype_name(a->k_cache.dtype));
  if (cfg->head_dim != D)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant is for head_dim %d, call has %lld", cfg->head_dim, (long long)D);
  if (cfg->group != G)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant is for %d q heads per kv head, call has %lld", cfg->group,
                   (long long)G);
  if (st_sparse_attn_decode_smem_bytes(cfg) > ST_SPARSE_ATTN_DECODE_MAX_SMEM)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant needs %u bytes of shared memory (limit %d)",
                   st_sparse_attn_decode_smem_bytes(cfg), ST_SPARSE_ATTN_DECODE_MAX_SMEM);
  return ST_OK;
}

/* The variant's split count, or (0) enough CTAs for two per multiprocessor;
 * at most topk (a split holds at least one entry), at least 2 for the split
 * algorithm. */
static int choose_splits(const st_sparse_attn_decode_config *cfg, int64_t items, int64_t topk, int sm_count) {
  int64_t s = cfg->splits > 0 ? cfg->splits : ceil_div(2 * (int64_t)sm_count, items);
  if (s > topk) s = topk;
  if (cfg->algo == ST_SPARSE_ATTN_DECODE_SPLIT && s < 2) s = 2;
  return (int)(s < 1 ? 1 : s);
}

static void fill_params(const st_sparse_attn_decode_args *a, st_sparse_attn_decode_params *p) {
  p->q = a->q.data;
  p->k_cache = a->k_cache.data;
  p->v_cache = a->v_cache.data;
  p->topk_idx = a->topk_idx.data;
  p->block_table = a->block_table.data;
  p->seq_lens = a->seq_lens.data;
  p->o = a->o.data;
  p->lse = a->lse.data;
  p->q_stride_row = a->q.stride[0];
  p->q_stride_head = a->q.stride[1];
  p->k_stride_page = a->k_cache.stride[0];
  p->k_stride_head = a->k_cache.stride[1];
  p->k_stride_token = a->k_cache.stride[2];
  p->v_stride_page = a->v_cache.stride[0];
  p->v_stride_head = a->v_cache.stride[1];
  p->v_stride_token = a->v_cache.stride[2];
  if (a->scale_mode == ST_KV_SCALE_TENSOR) {
    p->k_scales = a->k_scales.data;
    p->v_scales = a->v_scales.data;
    p->ks_stride_page = a->k_scales.stride[0];
    p->ks_stride_head = a->k_scales.stride[1];
    p->ks_stride_token = a->k_scales.stride[2];
    p->vs_stride_page = a->v_scales.stride[0];
    p->vs_stride_head = a->v_scales.stride[1];
    p->vs_stride_token = a->v_scales.stride[2];
  }
  p->idx_stride_head = a->topk_idx.stride[0];
  p->idx_stride_row = a->topk_idx.stride[1];
  p->bt_stride = a->block_table.stride[0];
  p->o_stride_row = a->o.stride[0];
  p->o_stride_head = a->o.stride[1];
  if (a->lse.data) {
    p->lse_stride_row = a->lse.stride[0];
    p->lse_stride_head = a->lse.stride[1];
  }
  const int scalar = a->scale_mode == ST_KV_SCALE_SCALAR;
  p->score_scale_log2 = (float)((double)a->sm_scale * 1.4426950408889634 * (scalar ? (double)a->k_scale : 1.0));
  p->v_scale = scalar ? a->v_scale : 1.0f;
  p->scale_mode = (int32_t)a->scale_mode;
  p->num_requests = (int32_t)(a->q.shape[0] / a->qlen);
  p->qlen = a->qlen;
  p->num_kv_heads = (int32_t)a->k_cache.shape[1];
  p->topk = (int32_t)a->topk_idx.shape[2];
  p->max_blocks = (int32_t)ceil_div(a->max_context, ST_BLOCK_TOKENS);
}

st_status st_sparse_attn_decode_plan_make(const st_sparse_attn_decode_config *cfg, const st_sparse_attn_decode_args *a,
                                          int sm_count, st_sparse_attn_decode_plan *plan, st_err *err) {
  memset(plan, 0, sizeof *plan);
  const int64_t rows = a->q.shape[0], Hkv = a->k_cache.shape[1], topk = a->topk_idx.shape[2];
  const int64_t items = rows * Hkv;
  const unsigned smem = st_sparse_attn_decode_smem_bytes(cfg);
  if (smem > ST_SPARSE_ATTN_DECODE_MAX_SMEM)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant needs %u bytes of shared memory (limit %d)", smem,
                   ST_SPARSE_ATTN_DECODE_MAX_SMEM);
  int splits = choose_splits(cfg, items, topk, sm_count > 0 ? sm_count : 1);
  const int64_t per_split = ceil_div(topk, splits);
  splits = (int)ceil_div(topk, per_split); /* no CTA with an empty range */

  st_sparse_attn_decode_params *p = &plan->params;
  fill_params(a, p);
  p->splits = splits;
  p->blocks_per_split = (int32_t)per_split;

  size_t off = 0;
  if (splits > 1) {
    const size_t states = (size_t)items * (size_t)splits * (size_t)cfg->group;
    if (cfg->algo == ST_SPARSE_ATTN_DECODE_SINGLE) {
      plan->counters_offset = off;
      off = align_up(off + (size_t)items * 4);
    }
    plan->part_o_offset = off;
    off = align_up(off + states * (size_t)cfg->head_dim * 4);
    plan->part_ml_offset = off;
    off = align_up(off + states * 2 * 4);
  }
  plan->workspace_bytes = off;
  plan->splits = splits;
  plan->grid[0] = (unsigned)splits;
  plan->grid[1] = (unsigned)rows;
  plan->grid[2] = (unsigned)Hkv;
  plan->block = (unsigned)(32 * cfg->warps_n * m_tiles(cfg->group));
  plan->smem_bytes = smem;
  if (cfg->algo == ST_SPARSE_ATTN_DECODE_SPLIT && splits > 1) {
    plan->merge_grid[0] = (unsigned)rows;
    plan->merge_grid[1] = (unsigned)Hkv;
    plan->merge_grid[2] = 1;
    plan->merge_block = plan->block;
  }
  return ST_OK;
}

st_status st_sparse_attn_decode_launch(const st_cu *cu, CUfunction main_fn, CUfunction merge_fn,
                                       const st_sparse_attn_decode_plan *plan, void *workspace, size_t workspace_bytes,
                                       CUstream stream, st_err *err) {
  if (!main_fn) return st_fail(err, ST_ERR_INVALID_ARG, "sparse_attn_decode main kernel is NULL");
  if (plan->merge_block && !merge_fn)
    return st_fail(err, ST_ERR_INVALID_ARG, "sparse_attn_decode split variant needs its merge kernel");
  if (plan->workspace_bytes > 0 && (!workspace || workspace_bytes < plan->workspace_bytes))
    return st_fail(err, ST_ERR_WORKSPACE, "workspace of %zu bytes at %p is smaller than the %zu bytes needed",
                   workspace ? workspace_bytes : 0, workspace, plan->workspace_bytes);
  st_sparse_attn_decode_params params = plan->params;
  char *ws = workspace;
  if (plan->workspace_bytes > 0) {
    params.counters = (uint32_t *)(ws + plan->counters_offset);
    params.part_o = (float *)(ws + plan->part_o_offset);
    params.part_ml = (float *)(ws + plan->part_ml_offset);
  }
  /* Past 48 KiB of shared memory a kernel must opt in (static part: 8 bytes).
   */
  if (plan->smem_bytes > ST_DEFAULT_SMEM_WITHOUT_OPT_IN - 1024)
    ST_CU_TRY(cu,
              cu->cuFuncSetAttribute(main_fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)plan->smem_bytes),
              err);
  void *kargs[] = {&params};
  ST_CU_TRY(cu,
            cu->cuLaunchKernel(main_fn, plan->grid[0], plan->grid[1], plan->grid[2], plan->block, 1, 1,
                               plan->smem_bytes, stream, kargs, NULL),
            err);
  if (!plan->merge_block) return ST_OK;
  ST_CU_TRY(cu,
            cu->cuLaunchKernel(merge_fn, plan->merge_grid[0], plan->merge_grid[1], plan->merge_grid[2],
                               plan->merge_block, 1, 1, 0, stream, kargs, NULL),
            err);
  return ST_OK;
}

st_status st_sparse_attn_decode_dispatch_key(const st_sparse_attn_decode_args *a, char *key, size_t cap,
                                             st_params *fields, st_err *err) {
  const long long R = a->q.shape[0] / (a->qlen > 0 ? a->qlen : 1);
  const long long D = a->q.shape[2], Hq = a->q.shape[1], Hkv = a->k_cache.shape[1], topk = a->topk_idx.shape[2];
  const char *dt = st_dtype_name(a->k_cache.dtype);
  int n = snprintf(key, cap, "%s:B=%lld,D=%lld,Hkv=%lld,Hq=%lld,dtype=%s,qlen=%d,topk=%lld", ST_SPARSE_ATTN_DECODE_OP,
                   R, D, Hkv, Hq, dt, a->qlen, topk);
  if (n < 0 || (size_t)n >= cap) return st_fail(err, ST_ERR_INVALID_ARG, "dispatch key buffer too small");
  if (!fields) return ST_OK;
  fields->n = 0;
  st_status s;
  if ((s = st_params_set_int(fields, "B", R, err)) || (s = st_params_set_int(fields, "D", D, err)) ||
      (s = st_params_set_int(fields, "Hkv", Hkv, err)) || (s = st_params_set_int(fields, "Hq", Hq, err)) ||
      (s = st_params_set(fields, "dtype", dt, err)) || (s = st_params_set_int(fields, "qlen", a->qlen, err)) ||
      (s = st_params_set_int(fields, "topk", topk, err)))
    return s;
  return ST_OK;
}
