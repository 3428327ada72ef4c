/* ops/sparse_attn_decode.c - validation, fit, launch math and launch of
 * sparse_attn_decode. Shared by the tuner and the runtime: what was timed is
 * what runs. */
#include "ops/sparse_attn_decode.h"
#include "ops/op.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/attn_args.h"
#include "ops/launch.h"
#include "ops/tensor_check.h"
#include "ops/tensor_map.h"
#include "ops/workspace.h"

/* Dynamic shared memory one CTA may opt in to on sm_90 (227 KiB less the
 * kernel's static part). */
#define ST_SPARSE_ATTN_DECODE_MAX_SMEM (220 * 1024)
#define ST_DEFAULT_SMEM_WITHOUT_OPT_IN (48 * 1024)
/* The cluster rule of templates/sparse_attn_decode.cu (its static_assert):
 * an SM's shared memory, the driver's reserve per CTA, the largest portable
 * cluster (single kernels of at most 2 stages), the cluster of 4 (single
 * pv_dims kernels) and the non-portable 16 Hopper allows. */
#define ST_SM_SMEM_BYTES (228 * 1024)
#define ST_CTA_SMEM_RESERVE 1024
#define ST_PORTABLE_CLUSTER 8
#define ST_PORTABLE_CLUSTER_MAX_STAGES 2
#define ST_PV_DIMS_CLUSTER 4
#define ST_LARGE_CLUSTER 16
#define ST_LARGE_CLUSTER_MAX_THREADS 128

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
  GET(kernel, "cluster", 1, ST_LARGE_CLUSTER, cluster)
  GET(launch, "splits", 0, ST_SPARSE_ATTN_DECODE_MAX_TOPK, splits)
  /* Variants recorded before k_regs existed have none: 0. */
  if (st_params_get(kernel, "k_regs")) {
    GET(kernel, "k_regs", 0, 2, k_regs)
  }
  /* Nor tma, before it: 0. */
  if (st_params_get(kernel, "tma")) {
    GET(kernel, "tma", 0, 1, tma)
  }
  /* Nor pv_dims, before it: 0. */
  if (st_params_get(kernel, "pv_dims")) {
    GET(kernel, "pv_dims", 0, 1, pv_dims)
  }
  /* Nor ring_extra, before it: 0. */
  if (st_params_get(kernel, "ring_extra")) {
    GET(kernel, "ring_extra", 0, 1, ring_extra)
  }
  /* Nor scale_ptr, before it: 0 (their kernels read no scale pointer). */
  if (st_params_get(kernel, "scale_ptr")) {
    GET(kernel, "scale_ptr", 0, 1, scale_ptr)
  }
#undef GET
  if (cfg->k_regs && cfg->dtype != ST_DTYPE_FP8_E4M3)
    return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter k_regs=%d needs dtype fp8 (it reads raw fp8 rows)",
                   cfg->k_regs);
  if (cfg->tma && (cfg->head_dim != 128 || (cfg->dtype == ST_DTYPE_FP8_E4M3 && cfg->k_regs != 2)))
    return st_fail(err, ST_ERR_INVALID_ARG,
                   "variant parameter tma=1 needs head_dim 128 and with fp8 k_regs 2 (it copies whole bf16 or raw fp8 "
                   "rows), has %s, k_regs %d, head_dim %d",
                   st_dtype_name(cfg->dtype), cfg->k_regs, cfg->head_dim);
  if (cfg->pv_dims && (!cfg->tma || cfg->group > 16 || cfg->stages > 2 || (cfg->warps_n != 4 && cfg->warps_n != 8)))
    return st_fail(err, ST_ERR_INVALID_ARG,
                   "variant parameter pv_dims=1 needs tma 1, group <= 16, 1 or 2 stages and 4 or 8 warps, has tma %d, "
                   "group %d, %d stages, %d warps",
                   cfg->tma, cfg->group, cfg->stages, cfg->warps_n);
  if (cfg->ring_extra && (!cfg->pv_dims || cfg->stages != 1))
    return st_fail(err, ST_ERR_INVALID_ARG,
                   "variant parameter ring_extra=1 needs pv_dims 1 and 1 stage, has pv_dims %d, %d stages",
                   cfg->pv_dims, cfg->stages);
  if (cfg->head_dim % 64)
    return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter head_dim=%d is not a multiple of 64", cfg->head_dim);
  if (cfg->warps_n != 2 && cfg->warps_n != 4 && cfg->warps_n != 8)
    return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter warps_n=%d is not 2, 4 or 8", cfg->warps_n);
  return st_sparse_attn_decode_check_cluster(cfg, err);
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

static int m_tiles(int group) { return (int)ceil_div(group, 16); }

/* The layout with `wide_tiles` bf16 tiles after the stages (2: K and V, and
 * the K tile's per-token scales after them); `ring`: tma's raw launches,
 * whose stages are its ring of 2 * stages raw halves (no scales). */
static unsigned smem_bytes(const st_sparse_attn_decode_config *cfg, int64_t wide_tiles, int ring) {
  const int64_t D = cfg->head_dim, fp8 = cfg->dtype == ST_DTYPE_FP8_E4M3;
  const int64_t warps = (int64_t)cfg->warps_n * m_tiles(cfg->group);
  const int64_t q_bytes = m_tiles(cfg->group) * 16 * D * 2;
  const int64_t tile = ST_BLOCK_TOKENS * D * 2;
  const int64_t stage = fp8 ? 2 * ST_BLOCK_TOKENS * D + 2 * ST_BLOCK_TOKENS * 4 : 2 * tile;
  /* pv_dims: after the ring (bf16: the stages' tiles) P twice and the
   * warps' row maxima */
  const int64_t pv_dims = cfg->pv_dims ? 2 * 16 * ST_BLOCK_TOKENS * 2 + warps * 16 * 4 : 0;
  /* tma's ring: 2 * stages halves, ring_extra one more (bf16: may be more
   * than the stages' tiles) */
  const int64_t ring_bytes = (2 * (int64_t)cfg->stages + cfg->ring_extra) * ST_BLOCK_TOKENS * D * (fp8 ? 1 : 2);
  const int64_t tiles = cfg->stages * stage + wide_tiles * tile + (wide_tiles == 2 ? ST_BLOCK_TOKENS * 4 : 0);
  const int64_t kv = (ring ? ring_bytes : cfg->tma && ring_bytes > tiles ? ring_bytes : tiles) + pv_dims;
  /* the warps' O tiles (pv_dims: their dimensions of one), m and l */
  const int64_t combine = ((cfg->pv_dims ? 1 : warps) * D + warps * 2) * 16 * 4;
  const int64_t block_list = ST_SPARSE_ATTN_DECODE_MAX_TOPK * 8;
  /* Cluster kernels: the push merge's receive area (every piece of O once,
   * every split's (m, l) of each q head). */
  const int64_t recv = cfg->cluster > 1 ? (int64_t)cfg->group * D * 4 + (int64_t)cfg->cluster * cfg->group * 8 : 0;
  /* tma: room to start the tiles on a 1024-byte boundary (the swizzle's) */
  const int64_t align = cfg->tma ? 1024 : 0;
  return (unsigned)(q_bytes + (kv > combine ? kv : combine) + block_list + recv + align);
}

unsigned st_sparse_attn_decode_smem_bytes(const st_sparse_attn_decode_config *cfg) {
  const int fp8 = cfg->dtype == ST_DTYPE_FP8_E4M3;
  return smem_bytes(cfg, fp8 ? (cfg->k_regs ? 1 : 2) : 0, 0); /* bf16 tiles widened into */
}

unsigned st_sparse_attn_decode_launch_smem_bytes(const st_sparse_attn_decode_config *cfg, st_kv_scale_mode scale_mode) {
  if (cfg->k_regs == 2 && scale_mode != ST_KV_SCALE_TENSOR) return smem_bytes(cfg, 0, cfg->tma); /* K and V read raw */
  return st_sparse_attn_decode_smem_bytes(cfg);
}

st_status st_sparse_attn_decode_check_cluster(const st_sparse_attn_decode_config *cfg, st_err *err) {
  if (cfg->cluster == 1) return ST_OK;
  const int64_t threads = 32 * (int64_t)cfg->warps_n * m_tiles(cfg->group);
  const int64_t smem = st_sparse_attn_decode_smem_bytes(cfg);
  const int single = cfg->algo == ST_SPARSE_ATTN_DECODE_SINGLE;
  if (cfg->cluster == ST_PORTABLE_CLUSTER && single && cfg->stages <= ST_PORTABLE_CLUSTER_MAX_STAGES) return ST_OK;
  if (cfg->cluster == ST_PV_DIMS_CLUSTER && single && cfg->pv_dims) return ST_OK;
  /* pv_dims: up to twice the threads, and the raw launch's shared memory
   * (it never runs the widening path) */
  const int64_t cta_smem = cfg->pv_dims ? smem_bytes(cfg, 0, 1) : smem;
  if (cfg->cluster == ST_LARGE_CLUSTER && single && threads <= (cfg->pv_dims ? 2 : 1) * ST_LARGE_CLUSTER_MAX_THREADS &&
      2 * (cta_smem + ST_CTA_SMEM_RESERVE) <= ST_SM_SMEM_BYTES)
    return ST_OK;
  return st_fail(err, ST_ERR_INVALID_ARG,
                 "variant parameter cluster=%d needs 1, 8 with algo single and <= %d stages (has %d), 4 with algo "
                 "single and pv_dims 1 (has %d), or 16 with algo single, <= %d threads (has %lld) and two CTAs per "
                 "SM (%lld bytes of shared memory each)",
                 cfg->cluster, ST_PORTABLE_CLUSTER_MAX_STAGES, cfg->stages, cfg->pv_dims,
                 (cfg->pv_dims ? 2 : 1) * ST_LARGE_CLUSTER_MAX_THREADS, (long long)threads, (long long)cta_smem);
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
  if ((s = st_attn_check_heads(ST_ATTN_KV_OF(a), Hq, D, ST_SPARSE_ATTN_DECODE_MAX_GROUP, err)) != ST_OK) return s;
  const int64_t Hkv = a->k_cache.shape[1];
  if ((s = check_index_tensors(a, rows / a->qlen, rows, Hkv, err)) != ST_OK) return s;
  if ((s = st_attn_check_outputs(&a->o, &a->lse, rows, Hq, D, "R*qlen", err)) != ST_OK) return s;
  if (a->pdl != 0 && a->pdl != 1) return st_fail(err, ST_ERR_INVALID_ARG, "pdl=%d must be 0 or 1", a->pdl);
  /* 16-byte vector loads of q rows. */
  return st_check_vector_rows(&a->q, "q", 16, err);
}

/* Per-token scale views of one scale each (every stride 0: how vLLM's
 * scalar scale tensors arrive), which variants of scale_ptr 1 run as the
 * scalar mode with the two scales read on the device. */
static int one_scale_each(const st_sparse_attn_decode_args *a) {
  if (a->scale_mode != ST_KV_SCALE_TENSOR) return 0;
  const st_tensor *t[2] = {&a->k_scales, &a->v_scales};
  for (int i = 0; i < 2; i++)
    for (int d = 0; d < t[i]->ndim; d++)
      if (t[i]->stride[d] != 0) return 0;
  return 1;
}

/* The scale mode the variant runs the call in. */
static st_kv_scale_mode run_mode(const st_sparse_attn_decode_config *cfg, const st_sparse_attn_decode_args *a) {
  return cfg->scale_ptr && one_scale_each(a) ? ST_KV_SCALE_SCALAR : a->scale_mode;
}

st_status st_sparse_attn_decode_check_fit(const st_sparse_attn_decode_config *cfg, const st_sparse_attn_decode_args *a,
                                          st_err *err) {
  const st_kv_scale_mode mode = run_mode(cfg, a);
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
  if (cfg->pv_dims && mode == ST_KV_SCALE_TENSOR)
    return st_fail(err, ST_ERR_NO_VARIANT, "pv_dims variant takes no per-token scales: another variant runs them");
  /* tma: views the copy engine cannot address (a zero or negative stride)
   * go to another variant, not to a failed launch. */
  if (cfg->tma && mode != ST_KV_SCALE_TENSOR) {
    st_err why = {{0}};
    if (st_tensor_map_pages_check(&a->k_cache, "k_cache", &why) != ST_OK ||
        st_tensor_map_pages_check(&a->v_cache, "v_cache", &why) != ST_OK)
      return st_fail(err, ST_ERR_NO_VARIANT, "tma variant: %s", why.msg);
  }
  return ST_OK;
}

/* The split count the launcher picks (splits 0) for `items` (request,
 * query token, KV head) items of `topk` blocks. One where the items keep
 * the multiprocessors busy already, each CTA then streaming all of an
 * item's blocks with no merge: from one item an SM with fp8 caches, from
 * 0.4 with bf16 (whose blocks are twice the bytes). Else the largest
 * power of two (it divides the cluster: the cheap merge) that leaves each
 * split at least 3.5 blocks (7 * s <= 2 * topk) and makes at most three
 * CTAs a multiprocessor, doubled while the grid has fewer than 24 CTAs (a
 * few items need many CTAs in flight to hide the latency) and the blocks
 * allow. Fitted on 40 random decode shapes and the anchors of an H200
 * (docs/kernels/sparse_attn_decode.md, "Built-in variants"). */
static int64_t auto_splits(int64_t items, int64_t topk, int sm_count, int fp8) {
  if (fp8 ? items >= sm_count : 5 * items >= 2 * (int64_t)sm_count) return 1;
  int64_t s = 1;
  while (7 * (2 * s) <= 2 * topk && items * (2 * s) <= 3 * (int64_t)sm_count) s *= 2;
  while (items * s < 24 && 2 * s <= topk) s *= 2;
  return s;
}

/* A cluster kernel's automatic split count: where the items leave SMs
 * idle (bf16: below 0.4 items an SM, as auto_splits, and up to 0.5 with
 * 2-4 query tokens a request, where 2-4 splits in a cluster beat one CTA
 * an item by 13-41% while one token's items at 0.41-0.55 went either way,
 * the anchor at 0.48 unsplit; fp8: up to 1.25, where two splits beat a
 * second wave of whole items), the largest power of two
 * up to the cluster size that splits topk exactly (ceil(topk / ceil(topk /
 * s)) == s: a count the launcher rounds down leaves a CTA of the cluster
 * idle, +40-50% measured), keeps the CTAs within three an SM, and gives each
 * split at least three blocks unless the CTAs are at most one an SM
 * (docs/kernels/sparse_attn_decode.md, "Cluster split count", "Held out on
 * 100 random steps"). */
static int64_t cluster_splits(int64_t items, int64_t topk, int qlen, int sm_count, int fp8, int cluster) {
  const int64_t sms = sm_count;
  if (fp8 ? 4 * items > 5 * sms : qlen > 1 ? 2 * items > sms : 5 * items >= 2 * sms) return 1;
  int64_t best = 1;
  for (int64_t s = 2; s <= cluster; s *= 2) {
    const int64_t per = ceil_div(topk, s);
    const int exact = ceil_div(topk, per) == s;
    const int fits = items * s <= 3 * (int64_t)sm_count;
    if (exact && fits && (per >= 3 || items * s <= sm_count)) best = s;
  }
  return best;
}

/* The variant's split count, or (0) cluster_splits's for a cluster
 * kernel and auto_splits's otherwise; at most topk (a split holds at least
 * one entry), at least 2 for the split algorithm. */
static int choose_splits(const st_sparse_attn_decode_config *cfg, int64_t items, int64_t topk, int qlen,
                         int sm_count) {
  int64_t s = cfg->splits;
  if (s <= 0)
    s = cfg->cluster > 1 ? cluster_splits(items, topk, qlen, sm_count, cfg->dtype == ST_DTYPE_FP8_E4M3, cfg->cluster)
                         : auto_splits(items, topk, sm_count, cfg->dtype == ST_DTYPE_FP8_E4M3);
  if (s > topk) s = topk;
  if (cfg->algo == ST_SPARSE_ATTN_DECODE_SPLIT && s < 2) s = 2;
  return (int)(s < 1 ? 1 : s);
}

static void fill_params(const st_sparse_attn_decode_args *a, st_sparse_attn_decode_params *p) {
  p->q = a->q.data;
  p->q_stride_row = a->q.stride[0];
  p->q_stride_head = a->q.stride[1];
  ST_ATTN_FILL_KV(p, a);
  p->topk_idx = a->topk_idx.data;
  p->idx_stride_head = a->topk_idx.stride[0];
  p->idx_stride_row = a->topk_idx.stride[1];
  p->block_table = a->block_table.data;
  p->bt_stride = a->block_table.stride[0];
  p->seq_lens = a->seq_lens.data;
  ST_ATTN_FILL_OUT(p, a);
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
  int splits = choose_splits(cfg, items, topk, a->qlen, sm_count > 0 ? sm_count : 1);
  const int64_t per_split = ceil_div(topk, splits);
  splits = (int)ceil_div(topk, per_split); /* no CTA with an empty range */

  st_sparse_attn_decode_params *p = &plan->params;
  fill_params(a, p);
  const st_kv_scale_mode mode = run_mode(cfg, a);
  if (mode != a->scale_mode) { /* one scale each, read on the device */
    p->scale_mode = (int32_t)mode;
    p->score_scale_log2 = st_attn_score_scale_log2(a->sm_scale, mode, 1.0f);
    p->v_scale = 1.0f;
    p->k_scale_ptr = a->k_scales.data;
    p->v_scale_ptr = a->v_scales.data;
    p->k_scales = p->v_scales = NULL;
  }
  p->splits = splits;
  p->blocks_per_split = (int32_t)per_split;

  /* R*qlen and Hkv <= 65535, splits <= 64, group <= 32, head_dim <= 256:
   * every size here stays under 2^53 bytes. */
  size_t off = 0; /* ops/workspace.h */
  if (splits > 1) {
    const size_t states = (size_t)items * (size_t)splits * (size_t)cfg->group;
    if (cfg->algo == ST_SPARSE_ATTN_DECODE_SINGLE) {
      plan->counters_bytes = (size_t)items * 4;
      plan->counters_offset = st_ws_take_counters(&off, plan->counters_bytes, &plan->zero_counters);
    }
    plan->part_o_offset = st_ws_take(&off, states * (size_t)cfg->head_dim * 4);
    plan->part_ml_offset = st_ws_take(&off, states * 2 * 4);
  }
  plan->workspace_bytes = off;
  plan->splits = splits;
  plan->pdl = a->pdl;
  /* x: (row, split) pairs, padded to whole clusters (rows <= 65535 and
   * splits <= 64 keep it far inside the grid's range). */
  plan->cluster = (unsigned)cfg->cluster;
  plan->grid[0] = (unsigned)(ceil_div(rows * splits, plan->cluster) * plan->cluster);
  plan->grid[1] = (unsigned)Hkv;
  plan->grid[2] = 1;
  plan->block = (unsigned)(32 * cfg->warps_n * m_tiles(cfg->group));
  plan->smem_bytes = st_sparse_attn_decode_launch_smem_bytes(cfg, mode);
  /* tma copies bf16 rows, and fp8 where K and V are read raw (per-token
   * scales: cp.async) */
  plan->kv_maps = cfg->tma && mode != ST_KV_SCALE_TENSOR;
  plan->k_cache = a->k_cache;
  plan->v_cache = a->v_cache;
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
    // cppcheck-suppress invalidPointerCast ; device addresses, aligned for floats by the plan
    params.part_o = (float *)(ws + plan->part_o_offset);
    // cppcheck-suppress invalidPointerCast
    params.part_ml = (float *)(ws + plan->part_ml_offset);
  }
  /* Past 48 KiB of shared memory a kernel must opt in (static part: at most
   * 16 + 4 * 32 + 8 * 8 + 4 bytes). */
  if (plan->smem_bytes > ST_DEFAULT_SMEM_WITHOUT_OPT_IN - 1024)
    ST_CU_TRY(cu,
              cu->cuFuncSetAttribute(main_fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)plan->smem_bytes),
              err);
  /* The kernel's cluster size is compile-time; past 8 it must be allowed. */
  if (plan->cluster > ST_PORTABLE_CLUSTER)
    ST_CU_TRY(cu, cu->cuFuncSetAttribute(main_fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1), err);
  /* L2 fetches of a head's row: 256 bytes would bring an fp8 row's
   * neighbour, another head's (runtime/ops/tensor_map.h). */
  const int promote = plan->k_cache.dtype == ST_DTYPE_FP8_E4M3 ? 128 : 256;
  st_status s;
  if (plan->kv_maps &&
      ((s = st_tensor_map_pages(cu, &plan->k_cache, "k_cache", promote, &params.k_map, err)) != ST_OK ||
       (s = st_tensor_map_pages(cu, &plan->v_cache, "v_cache", promote, &params.v_map, err)) != ST_OK))
    return s;
  if (plan->zero_counters)
    ST_CU_TRY(cu, cu->cuMemsetD32Async((CUdeviceptr)(uintptr_t)params.counters, 0, plan->counters_bytes / 4, stream),
              err);
  void *kargs[] = {&params};
  s = st_launch_kernel(cu, main_fn, plan->grid, plan->block, plan->smem_bytes, stream, kargs, plan->pdl, err);
  if (s != ST_OK || !plan->merge_block) return s;
  /* The merge waits for the partials (templates/common/pdl.cuh): launched
   * programmatically always, its CTAs placed during the main kernel's tail. */
  return st_launch_kernel(cu, merge_fn, plan->merge_grid, plan->merge_block, 0, stream, kargs, 1, err);
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

/* ---- the op's descriptor (ops/op.h) ------------------------------------ */

static st_status parse_config(const st_params *kernel, const st_params *launch, st_variant_config *c, int *rank,
                              st_err *why) {
  const st_status st = st_sparse_attn_decode_config_from_params(kernel, launch, &c->sparse_attn_decode, why);
  *rank = 0;
  return st;
}

static int needs_merge(const st_variant_config *cfg) {
  return cfg->sparse_attn_decode.algo == ST_SPARSE_ATTN_DECODE_SPLIT;
}

ST_OP_TYPED_ADAPTERS(sparse_attn_decode)

static void shape_only(const void *args, st_op_args *copy) {
  const st_sparse_attn_decode_args *a = args;
  st_sparse_attn_decode_args *c = &copy->sparse_attn_decode;
  *c = *a;
  st_tensor *t[] = {&c->q,        &c->k_cache,     &c->v_cache,  &c->k_scales, &c->v_scales,
                    &c->topk_idx, &c->block_table, &c->seq_lens, &c->o};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) t[i]->data = ST_STAND_IN(i);
  if (a->lse.data) c->lse.data = ST_STAND_IN(sizeof t / sizeof t[0]); /* NULL: not wanted, stays NULL */
}

static st_status plan(const st_variant_config *cfg, const void *args, int sm_count, st_op_plan *plan,
                      st_plan_info *info, st_err *err) {
  const st_sparse_attn_decode_args *a = args;
  st_status st = st_sparse_attn_decode_check_fit(&cfg->sparse_attn_decode, a, err);
  if (st != ST_OK) return st;
  st_sparse_attn_decode_plan *p = &plan->sparse_attn_decode;
  if ((st = st_sparse_attn_decode_plan_make(&cfg->sparse_attn_decode, a, sm_count, p, err)) != ST_OK) return st;
  *info = (st_plan_info){
      .workspace_bytes = p->workspace_bytes, .smem_bytes = p->smem_bytes, .merge_smem_bytes = 0, .side_stream = 0,
      .splits = p->splits};
  return ST_OK;
}

static st_status launch(const st_cu *cu, CUfunction main_fn, CUfunction merge_fn, const st_op_plan *plan,
                        void *workspace, size_t workspace_bytes, CUstream stream, st_side_stream *side, st_err *err) {
  (void)side;
  return st_sparse_attn_decode_launch(cu, main_fn, merge_fn, &plan->sparse_attn_decode, workspace, workspace_bytes,
                                      stream, err);
}

/* What besides the key decides the fit (st_sparse_attn_decode_check_fit):
 * the scale mode, whether the copy engine can address K and V, and scale
 * views of one scale each. */
static uint32_t memo_tag(const void *args) {
  const st_sparse_attn_decode_args *a = args;
  st_err why = {{0}};
  const int mapped = st_tensor_map_pages_check(&a->k_cache, "k_cache", &why) == ST_OK &&
                     st_tensor_map_pages_check(&a->v_cache, "v_cache", &why) == ST_OK;
  return (uint32_t)a->scale_mode | (uint32_t)mapped << 2 | (uint32_t)one_scale_each(a) << 3;
}

/* Items, (request, query token, KV head), per multiprocessor: the unit of
 * the defaults' load ranges (generator/ops/sparse_attn_decode.lua FAST). */
static double load(const void *args, int sm_count) {
  const st_sparse_attn_decode_args *a = args;
  return (double)a->q.shape[0] * (double)a->k_cache.shape[1] / (double)(sm_count > 0 ? sm_count : 1);
}

static int qlen(const void *args) { return ((const st_sparse_attn_decode_args *)args)->qlen; }

/* A cluster default (automatic split count) only where the launcher
 * splits the call: a cluster is placed whole on one GPC, which costs where
 * it merges nothing (fp8, 1 split: +18% against one CTA an item without a
 * cluster); a cluster of 16 only where the count fills at least half of
 * it, since it then holds 16 / splits items (+6-11% against the cluster-8
 * kernel at 2-4 splits); a cluster of 4 where a cluster of 16 would split
 * 2-4 ways, one item a cluster (fp8 at 4 splits: geomean 1.025 against
 * 1.035 of the best for the cluster of 8, at most +26% against +30%;
 * docs/kernels/sparse_attn_decode.md, "Held out on 100 random steps",
 * "Held out again"). The other defaults: wherever their ranges say. */
static int default_meant_for(const st_variant_config *c, const void *args, int sm_count) {
  const st_sparse_attn_decode_config *cfg = &c->sparse_attn_decode;
  if (cfg->cluster <= 1 || cfg->splits != 0) return 1;
  const st_sparse_attn_decode_args *a = args;
  /* The count a cluster of 16 would take; a smaller cluster's is the same
   * capped at its size (the counts are powers of two tried from 2 up), so
   * it is 2 or more exactly where this one is. */
  const int64_t widest = cluster_splits(a->q.shape[0] * a->k_cache.shape[1], a->topk_idx.shape[2], a->qlen, sm_count,
                                        cfg->dtype == ST_DTYPE_FP8_E4M3, 16);
  if (cfg->cluster == 16) return widest >= 8;
  if (cfg->cluster == 4) return widest >= 2 && widest <= 4;
  return widest >= 2;
}

const st_op_desc st_sparse_attn_decode_op = {.name = ST_SPARSE_ATTN_DECODE_OP,
                                             .main_kernel = ST_SPARSE_ATTN_DECODE_MAIN_KERNEL,
                                             .params_bytes = sizeof(st_sparse_attn_decode_params),
                                             .merge_kernel = ST_SPARSE_ATTN_DECODE_MERGE_KERNEL,
                                             .parse_config = parse_config,
                                             .needs_merge = needs_merge,
                                             .check_args = check_args,
                                             .shape_only = shape_only,
                                             .max_context = max_context,
                                             .load = load,
                                             .qlen = qlen,
                                             .default_meant_for = default_meant_for,
                                             .memo_tag = memo_tag,
                                             .dispatch_key = dispatch_key,
                                             .plan = plan,
                                             .launch = launch,
                                             .exact_keys_only = 1};
