/* ops/sparse_attn.c - validation, fit, launch math and launch of
 * sparse_attn (prefill). Shared by the tuner and the runtime. */
#include "ops/sparse_attn.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ops/attn_args.h"
#include "ops/tensor_check.h"

#define ST_BLOCK_TOKENS 128
/* Dynamic shared memory one CTA may opt in to on sm_90. */
#define ST_SPARSE_ATTN_MAX_SMEM (220 * 1024)
#define ST_DEFAULT_SMEM_WITHOUT_OPT_IN (48 * 1024)
/* Grid x holds the tiles of query tokens. */
#define ST_MAX_GRID_X 2147483647LL

static int is_pow2_in(int v, int lo, int hi) { return v >= lo && v <= hi && (v & (v - 1)) == 0; }

st_status st_sparse_attn_config_from_params(const st_params *kernel, const st_params *launch,
                                            st_sparse_attn_config *cfg, st_err *err) {
  (void)launch;
  memset(cfg, 0, sizeof *cfg);
  const char *dtype = st_params_get(kernel, "dtype");
  if (!dtype || (strcmp(dtype, "bf16") && strcmp(dtype, "fp8")))
    return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter dtype='%s' is not bf16 or fp8",
                   dtype ? dtype : "(missing)");
  cfg->dtype = strcmp(dtype, "bf16") == 0 ? ST_DTYPE_BF16 : ST_DTYPE_FP8_E4M3;
  long long v;
  st_status s;
#define GET(key, lo, hi, field)                                                                                        \
  if ((s = st_params_get_int(kernel, key, lo, hi, &v, err)) != ST_OK) return s;                                        \
  cfg->field = (int)v;
  GET("head_dim", 64, 256, head_dim)
  GET("group", 1, ST_SPARSE_ATTN_MAX_GROUP, group)
  GET("tokens", 1, 64, tokens)
  GET("topk", 1, ST_SPARSE_ATTN_MAX_TOPK, topk_cap)
  GET("stages", 1, 4, stages)
#undef GET
  if (cfg->head_dim % 64)
    return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter head_dim=%d is not a multiple of 64", cfg->head_dim);
  if (!is_pow2_in(cfg->tokens, 1, 64) || !is_pow2_in(cfg->topk_cap, 16, 64))
    return st_fail(err, ST_ERR_INVALID_ARG, "variant parameters tokens=%d and topk=%d must be powers of two",
                   cfg->tokens, cfg->topk_cap);
  if (cfg->tokens * cfg->group > 128)
    return st_fail(err, ST_ERR_INVALID_ARG, "variant has tokens*group=%d q rows, more than 128",
                   cfg->tokens * cfg->group);
  return ST_OK;
}

/* q rows padded to whole 16-row m-tiles. */
static int padded_rows(const st_sparse_attn_config *cfg) { return (cfg->tokens * cfg->group + 15) / 16 * 16; }

int st_sparse_attn_threads(const st_sparse_attn_config *cfg) {
  const int warps = padded_rows(cfg) / 16;
  return 32 * (warps < 4 ? 4 : warps);
}

unsigned st_sparse_attn_smem_bytes(const st_sparse_attn_config *cfg) {
  const int64_t D = cfg->head_dim, fp8 = cfg->dtype == ST_DTYPE_FP8_E4M3, T = cfg->tokens;
  const int64_t q = (int64_t)padded_rows(cfg) * D * 2;
  const int64_t tile = ST_BLOCK_TOKENS * D * 2;
  const int64_t stage = fp8 ? 2 * ST_BLOCK_TOKENS * D + 2 * ST_BLOCK_TOKENS * 4 : 2 * tile;
  const int64_t kv = cfg->stages * stage + (fp8 ? 2 * tile : 0);
  const int64_t entries = T * cfg->topk_cap, slots = 2 * entries;
  const int64_t lists = entries * 4 * 4 + slots * 4 * 3 + entries * T * 4 + T * 8;
  return (unsigned)(q + kv + lists);
}

st_status st_sparse_attn_check_args(const st_sparse_attn_args *a, st_err *err) {
  if (!a) return st_fail(err, ST_ERR_INVALID_ARG, "args is NULL");
  st_status s;
  if (!(isfinite(a->sm_scale) && a->sm_scale > 0))
    return st_fail(err, ST_ERR_INVALID_ARG, "sm_scale=%g must be positive and finite", (double)a->sm_scale);
  if ((s = st_check_tensor(&a->q, "q", ST_DTYPE_BF16, 3, err)) != ST_OK) return s;
  const int64_t total_q = a->q.shape[0], Hq = a->q.shape[1], D = a->q.shape[2];
  if ((s = st_attn_check_heads(ST_ATTN_KV_OF(a), Hq, D, ST_SPARSE_ATTN_MAX_GROUP, err)) != ST_OK) return s;
  const int64_t Hkv = a->k_cache.shape[1];
  if ((s = st_check_tensor(&a->topk_idx, "topk_idx", ST_DTYPE_INT32, 3, err)) != ST_OK) return s;
  const int64_t topk = a->topk_idx.shape[2];
  if (a->topk_idx.shape[0] != Hkv || a->topk_idx.shape[1] != total_q)
    return st_fail(err, ST_ERR_INVALID_ARG, "topk_idx.shape=[%lld,%lld,%lld] must be [Hkv=%lld, total_q=%lld, topk]",
                   (long long)a->topk_idx.shape[0], (long long)a->topk_idx.shape[1], (long long)topk, (long long)Hkv,
                   (long long)total_q);
  if (topk > ST_SPARSE_ATTN_MAX_TOPK)
    return st_fail(err, ST_ERR_INVALID_ARG, "topk=%lld (topk_idx.shape[2]) is outside 1..%d", (long long)topk,
                   ST_SPARSE_ATTN_MAX_TOPK);
  if ((s = st_check_tensor(&a->block_table, "block_table", ST_DTYPE_INT32, 2, err)) != ST_OK) return s;
  const int64_t R = a->block_table.shape[0];
  if ((s = st_check_tensor(&a->cu_seqlens_q, "cu_seqlens_q", ST_DTYPE_INT32, 1, err)) != ST_OK) return s;
  if (a->cu_seqlens_q.shape[0] != R + 1)
    return st_fail(err, ST_ERR_INVALID_ARG, "cu_seqlens_q.shape[0]=%lld must be the %lld requests + 1",
                   (long long)a->cu_seqlens_q.shape[0], (long long)R);
  if ((s = st_check_tensor(&a->seq_lens, "seq_lens", ST_DTYPE_INT32, 1, err)) != ST_OK) return s;
  if (a->seq_lens.shape[0] != R)
    return st_fail(err, ST_ERR_INVALID_ARG, "seq_lens.shape[0]=%lld must equal the %lld requests (block_table rows)",
                   (long long)a->seq_lens.shape[0], (long long)R);
  const int64_t cap = a->block_table.shape[1] * ST_BLOCK_TOKENS;
  if (a->max_context < 1 || a->max_context > cap)
    return st_fail(err, ST_ERR_INVALID_ARG, "max_context=%d is outside 1..%lld (block_table columns x %d)",
                   a->max_context, (long long)cap, ST_BLOCK_TOKENS);
  /* The kernel names a block by request * max_blocks + block in an int32. */
  if (R * ((a->max_context + ST_BLOCK_TOKENS - 1) / ST_BLOCK_TOKENS) > INT32_MAX)
    return st_fail(err, ST_ERR_UNSUPPORTED, "%lld requests x %d blocks of max_context=%d exceed 2^31 blocks",
                   (long long)R, (a->max_context + ST_BLOCK_TOKENS - 1) / ST_BLOCK_TOKENS, a->max_context);
  if ((s = st_attn_check_outputs(&a->o, &a->lse, total_q, Hq, D, "total_q", err)) != ST_OK) return s;
  /* 16-byte vector loads of q rows. */
  return st_check_vector_rows(&a->q, "q", 16, err);
}

st_status st_sparse_attn_check_fit(const st_sparse_attn_config *cfg, const st_sparse_attn_args *a, st_err *err) {
  const int64_t D = a->q.shape[2], G = a->q.shape[1] / a->k_cache.shape[1], topk = a->topk_idx.shape[2];
  if (cfg->dtype != a->k_cache.dtype)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant is for a %s cache, call has %s", st_dtype_name(cfg->dtype),
                   st_dtype_name(a->k_cache.dtype));
  if (cfg->head_dim != D)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant is for head_dim %d, call has %lld", cfg->head_dim, (long long)D);
  if (cfg->group != G)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant is for %d q heads per kv head, call has %lld", cfg->group,
                   (long long)G);
  if (topk > cfg->topk_cap)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant holds topk <= %d, call has %lld", cfg->topk_cap, (long long)topk);
  if (st_sparse_attn_smem_bytes(cfg) > ST_SPARSE_ATTN_MAX_SMEM)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant needs %u bytes of shared memory (limit %d)",
                   st_sparse_attn_smem_bytes(cfg), ST_SPARSE_ATTN_MAX_SMEM);
  return ST_OK;
}

static void fill_params(const st_sparse_attn_args *a, st_sparse_attn_params *p) {
  p->q = a->q.data;
  p->q_stride_row = a->q.stride[0];
  p->q_stride_head = a->q.stride[1];
  ST_ATTN_FILL_KV(p, a);
  p->topk_idx = a->topk_idx.data;
  p->idx_stride_head = a->topk_idx.stride[0];
  p->idx_stride_row = a->topk_idx.stride[1];
  p->block_table = a->block_table.data;
  p->bt_stride = a->block_table.stride[0];
  p->cu_seqlens_q = a->cu_seqlens_q.data;
  p->seq_lens = a->seq_lens.data;
  ST_ATTN_FILL_OUT(p, a);
  p->num_requests = (int32_t)a->block_table.shape[0];
  p->total_q = (int32_t)a->q.shape[0];
  p->num_kv_heads = (int32_t)a->k_cache.shape[1];
  p->topk = (int32_t)a->topk_idx.shape[2];
  p->max_blocks = (int32_t)((a->max_context + ST_BLOCK_TOKENS - 1) / ST_BLOCK_TOKENS);
}

st_status st_sparse_attn_plan_make(const st_sparse_attn_config *cfg, const st_sparse_attn_args *a,
                                   st_sparse_attn_plan *plan, st_err *err) {
  memset(plan, 0, sizeof *plan);
  const int64_t total_q = a->q.shape[0], tiles = (total_q + cfg->tokens - 1) / cfg->tokens;
  const unsigned smem = st_sparse_attn_smem_bytes(cfg);
  if (smem > ST_SPARSE_ATTN_MAX_SMEM)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant needs %u bytes of shared memory (limit %d)", smem,
                   ST_SPARSE_ATTN_MAX_SMEM);
  if (tiles > ST_MAX_GRID_X)
    return st_fail(err, ST_ERR_INVALID_ARG, "total_q=%lld needs more than %lld tiles", (long long)total_q,
                   ST_MAX_GRID_X);
  fill_params(a, &plan->params);
  plan->grid[0] = (unsigned)tiles;
  plan->grid[1] = (unsigned)a->k_cache.shape[1];
  plan->grid[2] = 1;
  plan->block = (unsigned)st_sparse_attn_threads(cfg);
  plan->smem_bytes = smem;
  return ST_OK;
}

st_status st_sparse_attn_launch(const st_cu *cu, CUfunction main_fn, const st_sparse_attn_plan *plan, CUstream stream,
                                st_err *err) {
  if (!main_fn) return st_fail(err, ST_ERR_INVALID_ARG, "sparse_attn kernel is NULL");
  /* Past 48 KiB of shared memory a kernel must opt in (static part: 4 bytes). */
  if (plan->smem_bytes > ST_DEFAULT_SMEM_WITHOUT_OPT_IN - 1024)
    ST_CU_TRY(cu,
              cu->cuFuncSetAttribute(main_fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)plan->smem_bytes),
              err);
  st_sparse_attn_params params = plan->params;
  void *kargs[] = {&params};
  ST_CU_TRY(cu,
            cu->cuLaunchKernel(main_fn, plan->grid[0], plan->grid[1], plan->grid[2], plan->block, 1, 1,
                               plan->smem_bytes, stream, kargs, NULL),
            err);
  return ST_OK;
}

st_status st_sparse_attn_dispatch_key(const st_sparse_attn_args *a, char *key, size_t cap, st_params *fields,
                                      st_err *err) {
  const long long B = a->q.shape[0], D = a->q.shape[2], Hq = a->q.shape[1], Hkv = a->k_cache.shape[1];
  const long long topk = a->topk_idx.shape[2];
  const char *dt = st_dtype_name(a->k_cache.dtype);
  int n = snprintf(key, cap, "%s:B=%lld,D=%lld,Hkv=%lld,Hq=%lld,dtype=%s,topk=%lld", ST_SPARSE_ATTN_OP, B, D, Hkv, Hq,
                   dt, topk);
  if (n < 0 || (size_t)n >= cap) return st_fail(err, ST_ERR_INVALID_ARG, "dispatch key buffer too small");
  if (!fields) return ST_OK;
  fields->n = 0;
  st_status s;
  if ((s = st_params_set_int(fields, "B", B, err)) || (s = st_params_set_int(fields, "D", D, err)) ||
      (s = st_params_set_int(fields, "Hkv", Hkv, err)) || (s = st_params_set_int(fields, "Hq", Hq, err)) ||
      (s = st_params_set(fields, "dtype", dt, err)) || (s = st_params_set_int(fields, "topk", topk, err)))
    return s;
  return ST_OK;
}
