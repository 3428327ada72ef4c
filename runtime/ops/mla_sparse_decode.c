/* ops/mla_sparse_decode.c - validation, fit, launch math and launch of
 * mla_sparse_decode. Shared by the tuner and the runtime: what was timed is
 * what runs. */
#include "ops/mla_sparse_decode.h"
#include "ops/op.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/launch.h"
#include "ops/tensor_check.h"
#include "ops/workspace.h"

/* Dynamic shared memory one CTA may opt in to on sm_90 (227 KiB less the
 * kernel's static part). */
#define ST_MLA_SPARSE_DECODE_MAX_SMEM (220 * 1024)
#define ST_DEFAULT_SMEM_WITHOUT_OPT_IN (48 * 1024)
/* templates/mla_sparse_decode.cu's shared-memory rows: q rows of 576 bf16
 * padded to 584 (rows of neighbouring heads start 4 banks apart); cache
 * rows of 576 floats padded to 577 (mma 0: neighbouring tokens one bank
 * apart) or of bf16 padded as q's (mma 1); mma 1's weights in bf16 rows of
 * tile_tokens + 8. */
#define ST_MLA_Q_LD 584
#define ST_MLA_KV_LD 577
#define ST_MLA_P_PAD 8
/* mma 1: 4 warps of 32 an m tile of 16 heads; each scores a quarter of a
 * tile's tokens in n tiles of 8. */
#define ST_MLA_MMA_THREADS_PER_HEAD 8
#define ST_MLA_MMA_TILE_ALIGN 32
/* Threads that cover o's 512 dims of one head, 4 each; fp32 accumulators
 * a thread may hold (heads_per_cta * 512 / threads). */
#define ST_MLA_DIM_THREADS 128
#define ST_MLA_MAX_ACC 64
/* The automatic split count leaves each split at least this many tiles. */
#define ST_MLA_MIN_TILES_PER_SPLIT 2

st_status st_mla_sparse_decode_config_from_params(const st_params *kernel, const st_params *launch,
                                                  st_mla_sparse_decode_config *cfg, st_err *err) {
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
  GET(kernel, "heads_per_cta", 16, 64, heads_per_cta)
  GET(kernel, "tile_tokens", 16, 64, tile_tokens)
  GET(kernel, "threads", 128, 512, threads)
  GET(launch, "splits", 0, ST_MLA_SPARSE_DECODE_MAX_SPLITS, splits)
  /* Variants recorded before the tensor-core family have no mma: 0. */
  if (st_params_get(kernel, "mma")) {
    GET(kernel, "mma", 0, 2, mma)
  }
  /* Nor pipe, before it: 0. */
  if (st_params_get(kernel, "pipe")) {
    GET(kernel, "pipe", 0, 1, pipe)
  }
#undef GET
  if (cfg->heads_per_cta != 16 && cfg->heads_per_cta != 32 && cfg->heads_per_cta != 64)
    return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter heads_per_cta=%d is not 16, 32 or 64",
                   cfg->heads_per_cta);
  if (cfg->tile_tokens % 16)
    return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter tile_tokens=%d is not a multiple of 16",
                   cfg->tile_tokens);
  if (cfg->threads % ST_MLA_DIM_THREADS)
    return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter threads=%d is not a multiple of %d", cfg->threads,
                   ST_MLA_DIM_THREADS);
  if (cfg->pipe && !cfg->mma)
    return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter pipe=1 needs mma=1 (has mma=%d)", cfg->mma);
  if (cfg->mma == 2) {
    if (cfg->heads_per_cta != 64 || cfg->tile_tokens != 64 || cfg->threads != 256 || !cfg->pipe)
      return st_fail(err, ST_ERR_INVALID_ARG,
                     "variant parameter mma=2 (wgmma) needs heads_per_cta=64, tile_tokens=64, threads=256 and pipe=1 "
                     "(has %d, %d, %d, %d)",
                     cfg->heads_per_cta, cfg->tile_tokens, cfg->threads, cfg->pipe);
    return ST_OK;
  }
  if (cfg->mma) {
    if (cfg->threads != ST_MLA_MMA_THREADS_PER_HEAD * cfg->heads_per_cta || cfg->tile_tokens % ST_MLA_MMA_TILE_ALIGN)
      return st_fail(err, ST_ERR_INVALID_ARG,
                     "variant parameter mma=1 needs threads = %d x heads_per_cta (has %d for %d heads) and "
                     "tile_tokens a multiple of %d (has %d)",
                     ST_MLA_MMA_THREADS_PER_HEAD, cfg->threads, cfg->heads_per_cta, ST_MLA_MMA_TILE_ALIGN,
                     cfg->tile_tokens);
    return ST_OK;
  }
  const int head_groups = cfg->threads / ST_MLA_DIM_THREADS;
  if (cfg->heads_per_cta % head_groups ||
      cfg->heads_per_cta * ST_MLA_SPARSE_DECODE_DIM_V / cfg->threads > ST_MLA_MAX_ACC)
    return st_fail(err, ST_ERR_INVALID_ARG,
                   "variant parameters heads_per_cta=%d, threads=%d: each thread must hold o of whole heads in at "
                   "most %d accumulators",
                   cfg->heads_per_cta, cfg->threads, ST_MLA_MAX_ACC);
  return ST_OK;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

unsigned st_mla_sparse_decode_smem_bytes(const st_mla_sparse_decode_config *cfg) {
  const int64_t H = cfg->heads_per_cta, T = cfg->tile_tokens;
  /* q tile (bf16), the cache tile (dequantized: fp32, or bf16 with mma), the
   * tile's scores (then weights), with mma the weights in bf16, each head's
   * m, l and rescale factor, the tile's slots */
  const int64_t kv = cfg->mma ? T * ST_MLA_Q_LD * 2 : T * ST_MLA_KV_LD * 4;
  const int64_t p = cfg->mma ? H * (T + ST_MLA_P_PAD) * 2 : 0;
  /* pipe: the raw rows of the tile in flight and a second list of slots */
  const int64_t raw_row =
      cfg->dtype == ST_DTYPE_FP8_E4M3 ? ST_MLA_SPARSE_DECODE_FP8_ROW : ST_MLA_SPARSE_DECODE_DIM_QK * 2;
  const int64_t raw = cfg->pipe ? T * raw_row : 0, slot_lists = cfg->pipe ? 2 : 1;
  /* mma 2: q and the cache tile as wgmma operands (rows of 576 bf16,
   * unpadded: the swizzle spreads them over the banks), the raw rows, the
   * slots */
  if (cfg->mma == 2)
    return (unsigned)(H * ST_MLA_SPARSE_DECODE_DIM_QK * 2 + T * ST_MLA_SPARSE_DECODE_DIM_QK * 2 + raw + slot_lists * T * 4);
  return (unsigned)(H * ST_MLA_Q_LD * 2 + kv + raw + H * T * 4 + p + H * 3 * 4 + slot_lists * T * 4);
}

static st_status check_cache(const st_mla_sparse_decode_args *a, st_err *err) {
  const st_tensor *kv = &a->kv_cache;
  st_status s;
  if (kv->dtype != ST_DTYPE_BF16 && kv->dtype != ST_DTYPE_FP8_E4M3)
    return st_fail(err, ST_ERR_INVALID_ARG, "kv_cache.dtype=%d is not bf16 (%d) or fp8 e4m3 (%d)", (int)kv->dtype,
                   (int)ST_DTYPE_BF16, (int)ST_DTYPE_FP8_E4M3);
  if ((s = st_check_tensor(kv, "kv_cache", kv->dtype, 3, err)) != ST_OK) return s;
  const int64_t row = kv->dtype == ST_DTYPE_BF16 ? ST_MLA_SPARSE_DECODE_DIM_QK : ST_MLA_SPARSE_DECODE_FP8_ROW;
  if (kv->shape[2] != row)
    return st_fail(err, ST_ERR_INVALID_ARG,
                   "kv_cache.shape[2]=%lld must be %lld for a %s cache (bf16: 576 values; fp8: the 656-byte token row)",
                   (long long)kv->shape[2], (long long)row, st_dtype_name(kv->dtype));
  const int64_t page = kv->shape[1];
  if (page < ST_MLA_SPARSE_DECODE_MIN_PAGE || page > ST_MLA_SPARSE_DECODE_MAX_PAGE ||
      page % ST_MLA_SPARSE_DECODE_MIN_PAGE)
    return st_fail(err, ST_ERR_INVALID_ARG, "page_size=%lld (kv_cache.shape[1]) is not a multiple of %d in %d..%d",
                   (long long)page, ST_MLA_SPARSE_DECODE_MIN_PAGE, ST_MLA_SPARSE_DECODE_MIN_PAGE,
                   ST_MLA_SPARSE_DECODE_MAX_PAGE);
  /* Slots are int32: every token of the pool must have one. */
  if (kv->shape[0] > INT32_MAX / page)
    return st_fail(err, ST_ERR_INVALID_ARG,
                   "kv_cache.shape[0]=%lld pages of page_size=%lld tokens: more slots than int32 can name",
                   (long long)kv->shape[0], (long long)page);
  /* 16-byte vector loads of cache rows. */
  return st_check_vector_rows(kv, "kv_cache", 16, err);
}

/* An optional 1-D tensor: absent (data NULL) or `dtype` [n]. */
static st_status check_optional(const st_tensor *t, const char *name, st_dtype dtype, int64_t n, const char *n_name,
                                st_err *err) {
  if (!t->data) return ST_OK;
  const st_status s = st_check_tensor(t, name, dtype, 1, err);
  if (s != ST_OK) return s;
  if (t->shape[0] != n)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s.shape[0]=%lld must equal %s=%lld", name, (long long)t->shape[0], n_name,
                   (long long)n);
  return ST_OK;
}

static st_status check_outputs(const st_mla_sparse_decode_args *a, int64_t rows, int64_t Hq, st_err *err) {
  st_status s;
  if ((s = st_check_tensor(&a->o, "o", ST_DTYPE_BF16, 3, err)) != ST_OK) return s;
  if (a->o.shape[0] != rows || a->o.shape[1] != Hq || a->o.shape[2] != ST_MLA_SPARSE_DECODE_DIM_V)
    return st_fail(err, ST_ERR_INVALID_ARG, "o.shape=[%lld,%lld,%lld] must be [B*qlen=%lld, Hq=%lld, %d]",
                   (long long)a->o.shape[0], (long long)a->o.shape[1], (long long)a->o.shape[2], (long long)rows,
                   (long long)Hq, ST_MLA_SPARSE_DECODE_DIM_V);
  if (!a->lse.data) return ST_OK; /* not wanted */
  if ((s = st_check_tensor(&a->lse, "lse", ST_DTYPE_FP32, 2, err)) != ST_OK) return s;
  if (a->lse.shape[0] != rows || a->lse.shape[1] != Hq)
    return st_fail(err, ST_ERR_INVALID_ARG, "lse.shape=[%lld,%lld] must be [B*qlen=%lld, Hq=%lld]",
                   (long long)a->lse.shape[0], (long long)a->lse.shape[1], (long long)rows, (long long)Hq);
  return ST_OK;
}

st_status st_mla_sparse_decode_check_args(const st_mla_sparse_decode_args *a, st_err *err) {
  if (!a) return st_fail(err, ST_ERR_INVALID_ARG, "args is NULL");
  st_status s;
  if (a->qlen < 1 || a->qlen > ST_MLA_SPARSE_DECODE_MAX_QLEN)
    return st_fail(err, ST_ERR_INVALID_ARG, "qlen=%d is outside 1..%d", a->qlen, ST_MLA_SPARSE_DECODE_MAX_QLEN);
  if (!(isfinite(a->sm_scale) && a->sm_scale > 0))
    return st_fail(err, ST_ERR_INVALID_ARG, "sm_scale=%g must be positive and finite", (double)a->sm_scale);
  if ((s = st_check_tensor(&a->q, "q", ST_DTYPE_BF16, 3, err)) != ST_OK) return s;
  const int64_t rows = a->q.shape[0], Hq = a->q.shape[1];
  if (a->q.shape[2] != ST_MLA_SPARSE_DECODE_DIM_QK)
    return st_fail(err, ST_ERR_INVALID_ARG, "q.shape[2]=%lld must be %d (512 latent + 64 RoPE dims)",
                   (long long)a->q.shape[2], ST_MLA_SPARSE_DECODE_DIM_QK);
  if (rows % a->qlen)
    return st_fail(err, ST_ERR_INVALID_ARG, "q.shape[0]=%lld is not a multiple of qlen=%d", (long long)rows, a->qlen);
  if (rows > 65535)
    return st_fail(err, ST_ERR_INVALID_ARG, "B*qlen=%lld query rows exceed the limit of 65535", (long long)rows);
  if (Hq % ST_MLA_SPARSE_DECODE_HEAD_ALIGN || Hq > ST_MLA_SPARSE_DECODE_MAX_HEADS)
    return st_fail(err, ST_ERR_UNSUPPORTED, "Hq=%lld (q.shape[1]) is not a multiple of %d in %d..%d", (long long)Hq,
                   ST_MLA_SPARSE_DECODE_HEAD_ALIGN, ST_MLA_SPARSE_DECODE_HEAD_ALIGN, ST_MLA_SPARSE_DECODE_MAX_HEADS);
  if ((s = check_cache(a, err)) != ST_OK) return s;
  if ((s = st_check_tensor(&a->indices, "indices", ST_DTYPE_INT32, 2, err)) != ST_OK) return s;
  const int64_t topk = a->indices.shape[1];
  if (a->indices.shape[0] != rows)
    return st_fail(err, ST_ERR_INVALID_ARG, "indices.shape[0]=%lld must equal B*qlen=%lld",
                   (long long)a->indices.shape[0], (long long)rows);
  if (topk > ST_MLA_SPARSE_DECODE_MAX_TOPK)
    return st_fail(err, ST_ERR_INVALID_ARG, "topk=%lld (indices.shape[1]) is outside 1..%d", (long long)topk,
                   ST_MLA_SPARSE_DECODE_MAX_TOPK);
  if ((s = check_optional(&a->topk_length, "topk_length", ST_DTYPE_INT32, rows / a->qlen, "B", err)) != ST_OK ||
      (s = check_optional(&a->attn_sink, "attn_sink", ST_DTYPE_FP32, Hq, "Hq", err)) != ST_OK)
    return s;
  if ((s = check_outputs(a, rows, Hq, err)) != ST_OK) return s;
  if (a->pdl != 0 && a->pdl != 1) return st_fail(err, ST_ERR_INVALID_ARG, "pdl=%d must be 0 or 1", a->pdl);
  /* 16-byte vector loads of q rows. */
  return st_check_vector_rows(&a->q, "q", 16, err);
}

st_status st_mla_sparse_decode_check_fit(const st_mla_sparse_decode_config *cfg, const st_mla_sparse_decode_args *a,
                                         st_err *err) {
  const int64_t Hq = a->q.shape[1];
  if (cfg->dtype != a->kv_cache.dtype)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant is for a %s cache, call has %s", st_dtype_name(cfg->dtype),
                   st_dtype_name(a->kv_cache.dtype));
  if (Hq % cfg->heads_per_cta)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant's %d heads a CTA do not divide Hq=%lld", cfg->heads_per_cta,
                   (long long)Hq);
  if (st_mla_sparse_decode_smem_bytes(cfg) > ST_MLA_SPARSE_DECODE_MAX_SMEM)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant needs %u bytes of shared memory (limit %d)",
                   st_mla_sparse_decode_smem_bytes(cfg), ST_MLA_SPARSE_DECODE_MAX_SMEM);
  return ST_OK;
}

/* The split count the launcher picks (splits 0): one wave. Where the
 * (row, head tile) CTAs fill the multiprocessors already, no split;
 * otherwise as many splits as one CTA a multiprocessor allows, each left
 * at least ST_MLA_MIN_TILES_PER_SPLIT tiles of entries (a first rule, to
 * be fitted on the device: docs/kernels/mla_sparse_decode.md), one for the
 * wgmma family (mma 2), whose tune picked one tile a split at B 1 (32
 * splits of topk 2048, 26.0 us on an H200). */
static int auto_splits(int64_t ctas, int64_t topk, int tile_tokens, int min_tiles, int sm_count) {
  if (ctas >= sm_count) return 1;
  int64_t s = sm_count / ctas;
  const int64_t most = topk / ((int64_t)min_tiles * tile_tokens);
  if (s > most) s = most;
  if (s > ST_MLA_SPARSE_DECODE_MAX_SPLITS) s = ST_MLA_SPARSE_DECODE_MAX_SPLITS;
  return (int)(s < 1 ? 1 : s);
}

st_status st_mla_sparse_decode_plan_make(const st_mla_sparse_decode_config *cfg, const st_mla_sparse_decode_args *a,
                                         int sm_count, st_mla_sparse_decode_plan *plan, st_err *err) {
  memset(plan, 0, sizeof *plan);
  const int64_t rows = a->q.shape[0], Hq = a->q.shape[1], topk = a->indices.shape[1];
  const unsigned smem = st_mla_sparse_decode_smem_bytes(cfg);
  if (smem > ST_MLA_SPARSE_DECODE_MAX_SMEM)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant needs %u bytes of shared memory (limit %d)", smem,
                   ST_MLA_SPARSE_DECODE_MAX_SMEM);
  const int64_t tiles = Hq / cfg->heads_per_cta;
  int64_t splits =
      cfg->splits > 0 ? cfg->splits
                      : auto_splits(rows * tiles, topk, cfg->tile_tokens, cfg->mma == 2 ? 1 : ST_MLA_MIN_TILES_PER_SPLIT,
                                    sm_count > 0 ? sm_count : 1);
  if (splits > topk) splits = topk;
  const int64_t per_split = ceil_div(topk, splits);
  splits = ceil_div(topk, per_split); /* no CTA with an empty range of entries */

  st_mla_sparse_decode_params *p = &plan->params;
  p->q = a->q.data;
  p->q_stride_row = a->q.stride[0];
  p->q_stride_head = a->q.stride[1];
  p->kv = a->kv_cache.data;
  p->kv_stride_page = a->kv_cache.stride[0];
  p->kv_stride_token = a->kv_cache.stride[1];
  p->indices = a->indices.data;
  p->idx_stride_row = a->indices.stride[0];
  p->topk_length = a->topk_length.data;
  p->topk_length_stride = a->topk_length.data ? a->topk_length.stride[0] : 0;
  p->sink = a->attn_sink.data;
  p->sink_stride = a->attn_sink.data ? a->attn_sink.stride[0] : 0;
  p->o = a->o.data;
  p->o_stride_row = a->o.stride[0];
  p->o_stride_head = a->o.stride[1];
  p->lse = a->lse.data;
  if (a->lse.data) {
    p->lse_stride_row = a->lse.stride[0];
    p->lse_stride_head = a->lse.stride[1];
  }
  p->num_slots = a->kv_cache.shape[0] * a->kv_cache.shape[1];
  p->score_scale_log2 = (float)((double)a->sm_scale * 1.4426950408889634);
  p->page_size = (int32_t)a->kv_cache.shape[1];
  p->rows = (int32_t)rows;
  p->qlen = a->qlen;
  p->num_heads = (int32_t)Hq;
  p->topk = (int32_t)topk;
  p->splits = (int32_t)splits;
  p->entries_per_split = (int32_t)per_split;

  /* rows <= 65535, splits <= 128, Hq <= 128: at most 2^39 floats. */
  size_t off = 0; /* ops/workspace.h: scratch only */
  if (splits > 1) {
    const size_t states = (size_t)rows * (size_t)splits * (size_t)Hq;
    plan->part_o_offset = st_ws_take(&off, states * ST_MLA_SPARSE_DECODE_DIM_V * 4);
    plan->part_ml_offset = st_ws_take(&off, states * 2 * 4);
    plan->merge_grid[0] = (unsigned)rows;
    plan->merge_grid[1] = (unsigned)Hq;
    plan->merge_grid[2] = 1;
    plan->merge_block = ST_MLA_DIM_THREADS;
  }
  plan->workspace_bytes = off;
  plan->splits = (int)splits;
  plan->pdl = a->pdl;
  plan->grid[0] = (unsigned)(rows * splits);
  plan->grid[1] = (unsigned)tiles;
  plan->grid[2] = 1;
  plan->block = (unsigned)cfg->threads;
  plan->smem_bytes = smem;
  return ST_OK;
}

st_status st_mla_sparse_decode_launch(const st_cu *cu, CUfunction main_fn, CUfunction merge_fn,
                                      const st_mla_sparse_decode_plan *plan, void *workspace, size_t workspace_bytes,
                                      CUstream stream, st_err *err) {
  if (!main_fn) return st_fail(err, ST_ERR_INVALID_ARG, "mla_sparse_decode main kernel is NULL");
  if (plan->merge_block && !merge_fn)
    return st_fail(err, ST_ERR_INVALID_ARG, "mla_sparse_decode split plan needs its merge kernel");
  if (plan->workspace_bytes > 0 && (!workspace || workspace_bytes < plan->workspace_bytes))
    return st_fail(err, ST_ERR_WORKSPACE, "workspace of %zu bytes at %p is smaller than the %zu bytes needed",
                   workspace ? workspace_bytes : 0, workspace, plan->workspace_bytes);
  st_mla_sparse_decode_params params = plan->params;
  char *ws = workspace;
  if (plan->workspace_bytes > 0) {
    // cppcheck-suppress invalidPointerCast ; device addresses, aligned for floats by the plan
    params.part_o = (float *)(ws + plan->part_o_offset);
    // cppcheck-suppress invalidPointerCast
    params.part_ml = (float *)(ws + plan->part_ml_offset);
  }
  /* Past 48 KiB of shared memory a kernel must opt in (static part: a few
   * bytes). */
  if (plan->smem_bytes > ST_DEFAULT_SMEM_WITHOUT_OPT_IN - 1024)
    ST_CU_TRY(cu,
              cu->cuFuncSetAttribute(main_fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)plan->smem_bytes),
              err);
  void *kargs[] = {&params};
  st_status s = st_launch_kernel(cu, main_fn, plan->grid, plan->block, plan->smem_bytes, stream, kargs, plan->pdl, err);
  if (s != ST_OK || !plan->merge_block) return s;
  /* The merge waits for the partials (templates/common/pdl.cuh). */
  return st_launch_kernel(cu, merge_fn, plan->merge_grid, plan->merge_block, 0, stream, kargs, 1, err);
}

st_status st_mla_sparse_decode_dispatch_key(const st_mla_sparse_decode_args *a, char *key, size_t cap,
                                            st_params *fields, st_err *err) {
  const long long B = a->q.shape[0] / (a->qlen > 0 ? a->qlen : 1);
  const long long Hq = a->q.shape[1], topk = a->indices.shape[1];
  const char *dt = st_dtype_name(a->kv_cache.dtype);
  int n = snprintf(key, cap, "%s:B=%lld,Hq=%lld,dtype=%s,qlen=%d,topk=%lld", ST_MLA_SPARSE_DECODE_OP, B, Hq, dt,
                   a->qlen, topk);
  if (n < 0 || (size_t)n >= cap) return st_fail(err, ST_ERR_INVALID_ARG, "dispatch key buffer too small");
  if (!fields) return ST_OK;
  fields->n = 0;
  st_status s;
  if ((s = st_params_set_int(fields, "B", B, err)) || (s = st_params_set_int(fields, "Hq", Hq, err)) ||
      (s = st_params_set(fields, "dtype", dt, err)) || (s = st_params_set_int(fields, "qlen", a->qlen, err)) ||
      (s = st_params_set_int(fields, "topk", topk, err)))
    return s;
  return ST_OK;
}

/* ---- the op's descriptor (ops/op.h) ------------------------------------ */

static st_status parse_config(const st_params *kernel, const st_params *launch, st_variant_config *c, int *rank,
                              st_err *why) {
  const st_status st = st_mla_sparse_decode_config_from_params(kernel, launch, &c->mla_sparse_decode, why);
  *rank = 0;
  return st;
}

static st_status check_args(const void *args, st_err *err) { return st_mla_sparse_decode_check_args(args, err); }

/* The op reads physical slots, not a context: no bound to memoize by. */
static int max_context(const void *args) {
  (void)args;
  return 0;
}

static st_status dispatch_key(const void *args, char *key, size_t cap, st_params *fields, st_err *err) {
  return st_mla_sparse_decode_dispatch_key(args, key, cap, fields, err);
}

static void shape_only(const void *args, st_op_args *copy) {
  const st_mla_sparse_decode_args *a = args;
  st_mla_sparse_decode_args *c = &copy->mla_sparse_decode;
  *c = *a;
  st_tensor *t[] = {&c->q, &c->kv_cache, &c->indices, &c->o};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) t[i]->data = ST_STAND_IN(i);
  /* NULL: not wanted, stays NULL */
  st_tensor *opt[] = {&c->topk_length, &c->attn_sink, &c->lse};
  for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++)
    if (opt[i]->data) opt[i]->data = ST_STAND_IN(sizeof t / sizeof t[0] + i);
}

static st_status plan(const st_variant_config *cfg, const void *args, int sm_count, st_op_plan *plan,
                      st_plan_info *info, st_err *err) {
  const st_mla_sparse_decode_args *a = args;
  st_status st = st_mla_sparse_decode_check_fit(&cfg->mla_sparse_decode, a, err);
  if (st != ST_OK) return st;
  st_mla_sparse_decode_plan *p = &plan->mla_sparse_decode;
  if ((st = st_mla_sparse_decode_plan_make(&cfg->mla_sparse_decode, a, sm_count, p, err)) != ST_OK) return st;
  *info = (st_plan_info){
      .workspace_bytes = p->workspace_bytes, .smem_bytes = p->smem_bytes, .merge_smem_bytes = 0, .side_stream = 0,
      .splits = p->splits};
  return ST_OK;
}

static st_status launch(const st_cu *cu, CUfunction main_fn, CUfunction merge_fn, const st_op_plan *plan,
                        void *workspace, size_t workspace_bytes, CUstream stream, st_side_stream *side, st_err *err) {
  (void)side;
  return st_mla_sparse_decode_launch(cu, main_fn, merge_fn, &plan->mla_sparse_decode, workspace, workspace_bytes,
                                     stream, err);
}

const st_op_desc st_mla_sparse_decode_op = {.name = ST_MLA_SPARSE_DECODE_OP,
                                            .main_kernel = ST_MLA_SPARSE_DECODE_MAIN_KERNEL,
                                            .params_bytes = sizeof(st_mla_sparse_decode_params),
                                            .merge_kernel = ST_MLA_SPARSE_DECODE_MERGE_KERNEL,
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
