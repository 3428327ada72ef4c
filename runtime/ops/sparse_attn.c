/* ops/sparse_attn.c - validation, fit, launch math and launch of
 * sparse_attn (prefill). Shared by the tuner and the runtime. */
#include "ops/sparse_attn.h"
#include "ops/op.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ops/attn_args.h"
#include "ops/tensor_check.h"
#include "ops/tensor_map.h"
#include "ops/workspace.h"

/* Dynamic shared memory one CTA may opt in to on sm_90. */
#define ST_SPARSE_ATTN_MAX_SMEM (220 * 1024)
#define ST_DEFAULT_SMEM_WITHOUT_OPT_IN (48 * 1024)
/* Grid x holds the tiles of query tokens. */
#define ST_MAX_GRID_X 2147483647LL
/* The dense tiles' header words, padded to the next piece. */
#define DENSE_HEADER_BYTES ((ST_SPARSE_ATTN_DENSE_HEADER_WORDS * 4 + ST_WS_ALIGN - 1) / ST_WS_ALIGN * ST_WS_ALIGN)

static int is_pow2_in(int v, int lo, int hi) { return v >= lo && v <= hi && (v & (v - 1)) == 0; }

st_status st_sparse_attn_config_from_params(const st_params *kernel, const st_params *launch,
                                            st_sparse_attn_config *cfg, st_err *err) {
  memset(cfg, 0, sizeof *cfg);
  const char *algo = st_params_get(kernel, "algo"); /* absent: a tile variant recorded before block-major */
  if (algo && strcmp(algo, "tile") && strcmp(algo, "block"))
    return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter algo='%s' is not tile or block", algo);
  cfg->algo = algo && strcmp(algo, "block") == 0 ? ST_SPARSE_ATTN_BLOCK : ST_SPARSE_ATTN_TILE;
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
  cfg->ctas = cfg->mtiles = 1;
  if (st_params_get(kernel, "mtiles")) { /* absent: recorded before m-tiles were a parameter */
    if ((s = st_params_get_int(kernel, "mtiles", 1, 2, &v, err)) != ST_OK) return s;
    cfg->mtiles = (int)v;
    if (cfg->mtiles == 2 && cfg->head_dim > 128)
      return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter mtiles=2 needs head_dim <= 128, not %d",
                     cfg->head_dim);
  }
  if (cfg->algo == ST_SPARSE_ATTN_BLOCK) {
    const char *part = st_params_get(kernel, "part");
    if (!part || (strcmp(part, "bf16") && strcmp(part, "f32")))
      return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter part='%s' is not bf16 or f32",
                     part ? part : "(missing)");
    cfg->part_f32 = strcmp(part, "f32") == 0;
    const char *mma = st_params_get(kernel, "mma"); /* absent: recorded before wgmma variants */
    if (mma && strcmp(mma, "sync") && strcmp(mma, "wgmma"))
      return st_fail(err, ST_ERR_INVALID_ARG, "variant parameter mma='%s' is not sync or wgmma", mma);
    cfg->wgmma = mma && strcmp(mma, "wgmma") == 0;
    if (cfg->wgmma && (cfg->head_dim != 128 || (cfg->tokens * cfg->group) % (64 * cfg->mtiles)))
      return st_fail(err, ST_ERR_INVALID_ARG,
                     "variant parameter mma=wgmma needs head_dim 128 and tokens*group a multiple of 64 x mtiles, "
                     "not %d and %d (mtiles %d)",
                     cfg->head_dim, cfg->tokens * cfg->group, cfg->mtiles);
    if (cfg->wgmma && cfg->mtiles == 2 && cfg->stages != 1)
      return st_fail(err, ST_ERR_INVALID_ARG, "variant parameters mma=wgmma and mtiles=2 need one stage");
    if ((s = st_params_get_int(kernel, "ctas", 1, 2, &v, err)) != ST_OK) return s;
    cfg->ctas = (int)v;
    if (launch && st_params_get(launch, "chunk")) {
      if ((s = st_params_get_int(launch, "chunk", 0, ST_SPARSE_ATTN_MAX_CHUNK, &v, err)) != ST_OK) return s;
      if (v % 64) return st_fail(err, ST_ERR_INVALID_ARG, "launch parameter chunk=%lld is not a multiple of 64", v);
      cfg->chunk_q = (int)v;
    }
    if (launch && st_params_get(launch, "overlap")) { /* absent: recorded before overlapped chunks */
      if ((s = st_params_get_int(launch, "overlap", 0, 1, &v, err)) != ST_OK) return s;
      cfg->overlap = (int)v;
    }
    if (launch && st_params_get(launch, "first")) { /* absent: recorded before the parameter */
      if ((s = st_params_get_int(launch, "first", 0, ST_SPARSE_ATTN_MAX_CHUNK, &v, err)) != ST_OK) return s;
      if (v % 64) return st_fail(err, ST_ERR_INVALID_ARG, "launch parameter first=%lld is not a multiple of 64", v);
      cfg->first_q = (int)v;
    }
    if (launch && st_params_get(launch, "bulk")) { /* absent: recorded before the bulk merge */
      if ((s = st_params_get_int(launch, "bulk", 0, ST_SPARSE_ATTN_BULK_MAX_SLOTS, &v, err)) != ST_OK) return s;
      cfg->merge_slots = (int)v;
    }
    if (launch && st_params_get(launch, "dense")) { /* absent: recorded before the dense tiles */
      if ((s = st_params_get_int(launch, "dense", 0, 2, &v, err)) != ST_OK) return s;
      cfg->dense = (int)v;
      /* templates/sparse_attn_dense.cuh, DENSE_OK: the two-pass kernel's q and K/V maps, 128 rows a tile */
      if (cfg->dense &&
          !(cfg->wgmma && cfg->mtiles == 2 && cfg->head_dim == 128 && 128 % cfg->group == 0 && 128 / cfg->group <= 32))
        return st_fail(err, ST_ERR_INVALID_ARG,
                       "launch parameter dense=%d needs a two-pass wgmma variant (mma=wgmma, mtiles=2, head_dim 128, "
                       "group 4..32)",
                       cfg->dense);
    }
  } else if (launch && st_params_get(launch, "dense")) {
    return st_fail(err, ST_ERR_INVALID_ARG, "launch parameter dense is for block-major variants");
  }
  return ST_OK;
}

/* q rows a warp takes (mtiles 16-row m-tiles), and the tile's rows padded
 * to whole warps' worth (wgmma: whole warpgroups of 64 rows a pass, 16 a
 * warp). */
static int warp_rows(const st_sparse_attn_config *cfg) { return 16 * (cfg->mtiles > 1 ? cfg->mtiles : 1); }
static int padded_rows(const st_sparse_attn_config *cfg) {
  const int unit = cfg->wgmma ? 64 * cfg->mtiles : warp_rows(cfg);
  return (cfg->tokens * cfg->group + unit - 1) / unit * unit;
}

/* Two-pass wgmma kernels have a producer warp beside the math warps. */
int st_sparse_attn_threads(const st_sparse_attn_config *cfg) {
  const int warps = padded_rows(cfg) / warp_rows(cfg);
  return 32 * (warps < 4 ? 4 : warps) + (cfg->wgmma && cfg->mtiles == 2 ? 32 : 0);
}

unsigned st_sparse_attn_smem_bytes(const st_sparse_attn_config *cfg) {
  const int64_t D = cfg->head_dim, fp8 = cfg->dtype == ST_DTYPE_FP8_E4M3, T = cfg->tokens;
  const int64_t q = (int64_t)padded_rows(cfg) * D * 2;
  const int64_t tile = ST_BLOCK_TOKENS * D * 2;
  const int64_t stage = fp8 ? 2 * ST_BLOCK_TOKENS * D + 2 * ST_BLOCK_TOKENS * 4 : 2 * tile;
  const int64_t wide = fp8 ? 2 * tile : 0; /* fp8: the widened K and V tiles */
  if (cfg->algo == ST_SPARSE_ATTN_BLOCK) { /* per stage a q tile and a block (templates/sparse_attn_block.cu;
                                             wgmma: 1024 bytes of slack to align the panels; bf16 wgmma
                                             with one stage: two q tiles, the template's SPLIT, or with
                                             two passes one, its PASSES2) */
    /* PASSES2: one q tile; fp8 rows widened in place (RAW_IN_PLACE), and the block's K and V scales */
    if (cfg->wgmma && cfg->mtiles == 2) return (unsigned)(q + 2 * tile + (fp8 ? 2 * ST_BLOCK_TOKENS * 4 : 0) + 1024);
    const int64_t q_tiles = cfg->wgmma && !fp8 && cfg->stages == 1 ? 2 : cfg->stages;
    return (unsigned)(q_tiles * q + cfg->stages * stage + wide + (cfg->wgmma ? 1024 : 0));
  }
  const int64_t kv = cfg->stages * stage + wide + (fp8 ? ST_BLOCK_TOKENS * 4 : 0); /* and K's scales, kept */
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
  /* The kernel names a block by request * max_blocks + block in an int32
   * (R <= INT32_MAX and max_blocks < 2^24: the product fits int64). */
  if (R * st_blocks_of(a->max_context) > INT32_MAX)
    return st_fail(err, ST_ERR_UNSUPPORTED, "%lld requests x %lld blocks of max_context=%d exceed 2^31 blocks",
                   (long long)R, (long long)st_blocks_of(a->max_context), a->max_context);
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
  if (cfg->algo == ST_SPARSE_ATTN_TILE && topk > cfg->topk_cap)
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
  p->max_blocks = (int32_t)st_blocks_of(a->max_context);
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* A piece of a workspace half, from the half's start. */
static size_t take(size_t *off, size_t bytes) {
  const size_t at = *off;
  *off = st_ws_align(at + bytes);
  return at;
}

/* Work items of a chunk of nq tokens, at most: each key's entries in groups
 * of `tokens`, so entries / tokens + one part-filled item per key with
 * entries. */
static int64_t block_items(int64_t Hkv, int64_t nq, int64_t topk, int64_t tokens, int64_t max_keys) {
  const int64_t entries = Hkv * nq * topk;
  return entries / tokens + (entries < max_keys ? entries : max_keys);
}

/* Workspace of block-major chunks of chunk_q tokens; sets the offsets.
 * chunk_q x topk < 2^23 (plan_block's max_chunk), Hkv <= 65535, group
 * <= 32, head_dim <= 256, max_keys < 2^31: every piece under 2^55 bytes. */
static size_t block_workspace(const st_sparse_attn_config *cfg, int64_t Hkv, int64_t topk, int64_t max_keys,
                              int64_t chunk_q, st_sparse_attn_plan *plan) {
  const size_t entries = (size_t)(Hkv * chunk_q * topk), states = entries * (size_t)cfg->group;
  const size_t items = (size_t)block_items(Hkv, chunk_q, topk, cfg->tokens, max_keys);
  size_t off = 0;
  plan->off_header = take(&off, 8 * 4);
  plan->off_count = take(&off, (size_t)max_keys * 4);
  plan->off_offset = take(&off, (size_t)(max_keys + 1) * 4);
  plan->off_item = take(&off, (size_t)(max_keys + 1) * 4);
  plan->off_key = take(&off, entries * 4);
  plan->off_rank = take(&off, entries * 4);
  /* Item records: a 4-word head and a word per entry, 16-byte aligned
   * (templates/sparse_attn_block.cu, REC_INTS). */
  plan->off_item_rec = take(&off, items * (size_t)((4 + cfg->tokens + 3) / 4 * 4) * 4);
  plan->off_part_ml = take(&off, states * 2 * 4);
  plan->off_part_o = take(&off, states * (size_t)cfg->head_dim * (cfg->part_f32 ? 4 : 2));
  return off;
}

static st_status plan_block(const st_sparse_attn_config *cfg, const st_sparse_attn_args *a, int sm_count,
                            st_sparse_attn_plan *plan, st_err *err) {
  const int64_t total_q = a->q.shape[0], Hkv = a->k_cache.shape[1], topk = a->topk_idx.shape[2];
  const int64_t R = a->block_table.shape[0], max_blocks = plan->params.max_blocks;
  const int64_t max_keys = Hkv * R * max_blocks;
  /* Keys are int32 in the kernels, a kv head's entries of a chunk 23 bits
   * (the lists pack the visible tokens beside them). */
  if (max_keys >= INT32_MAX)
    return st_fail(err, ST_ERR_UNSUPPORTED,
                   "block-major sparse_attn: %lld keys (kv heads x requests x blocks) exceed int32",
                   (long long)max_keys);
  const int64_t max_chunk = ((1 << 23) - 1) / topk / 64 * 64;
  /* The most tokens a chunk may hold within the workspace budget, in steps
   * of 64; at least 64, at most the batch. */
  int64_t chunk = cfg->chunk_q > 0 && cfg->chunk_q < total_q ? cfg->chunk_q : total_q;
  if (chunk > max_chunk) chunk = max_chunk;
  if (cfg->chunk_q == 0 && block_workspace(cfg, Hkv, topk, max_keys, chunk, plan) > ST_SPARSE_ATTN_BLOCK_WS) {
    const size_t per_token =
        block_workspace(cfg, Hkv, topk, max_keys, 65, plan) - block_workspace(cfg, Hkv, topk, max_keys, 1, plan);
    chunk = (int64_t)(ST_SPARSE_ATTN_BLOCK_WS / (per_token / 64 + 1)) / 64 * 64;
    if (chunk < 64) chunk = 64;
    if (chunk > total_q) chunk = total_q;
    if (chunk > max_chunk) chunk = max_chunk;
  }
  /* As many chunks, of equal size (in steps of 64): no small last chunk,
   * whose four launches would cost nearly a full one's fixed time with few
   * items to spread over the SMs (8192 tokens: 5 x 1664, not 4 x 1984 +
   * 256). A chunk given at launch is the most tokens a chunk holds (3072:
   * 8192 tokens in 3 x 2752). */
  /* first: the first chunk's tokens, the rest in equal chunks as above; the
   * workspace holds the larger of the two. */
  int64_t first = cfg->first_q > 0 && cfg->first_q < total_q ? cfg->first_q : 0;
  if (first > max_chunk) first = max_chunk;
  const int64_t rest = total_q - first;
  if (chunk < rest) {
    const int64_t passes = (rest + chunk - 1) / chunk;
    const int64_t even = ((rest + passes - 1) / passes + 63) / 64 * 64;
    if (even < chunk) chunk = even;
  }
  if (first > chunk) chunk = first;
  plan->first_q = (int)first;
  plan->algo = ST_SPARSE_ATTN_BLOCK;
  plan->chunk_q = (int)chunk;
  plan->max_keys = (int)max_keys;
  plan->overlap = cfg->overlap;
  if (cfg->merge_slots > 0) { /* templates/sparse_attn_block.cu, step 3: the same sizes */
    const int pieces = cfg->group * cfg->head_dim / 8, parts = (pieces + 127) / 128;
    if (cfg->group % parts)
      return st_fail(err, ST_ERR_NO_VARIANT, "the bulk merge needs group (%d) a multiple of %d", cfg->group, parts);
    const unsigned slice = (unsigned)(cfg->group / parts * cfg->head_dim * (cfg->part_f32 ? 4 : 2));
    const unsigned pair_bytes = (unsigned)((topk * cfg->group * 8 + 16 + 15) / 16 * 16);
    /* The ring, the pair words (two), the units' indices, the pairs'
     * barriers and the heads' (m, 1 / l); each slot a slice and its two
     * barriers. As many slots as asked that fit in the shared memory a
     * kernel gets without opting in, at least 2. */
    const unsigned fixed = 2 * pair_bytes + 16 + 4 * 8 + 32 * 8;
    int slots = cfg->merge_slots;
    while (slots > 2 && fixed + (unsigned)slots * (slice + 16) > ST_DEFAULT_SMEM_WITHOUT_OPT_IN) slots--;
    plan->merge_slots = slots;
    plan->merge_smem = fixed + (unsigned)slots * (slice + 16);
    if (plan->merge_smem > ST_DEFAULT_SMEM_WITHOUT_OPT_IN)
      return st_fail(err, ST_ERR_NO_VARIANT, "the bulk merge needs %u bytes of shared memory (limit %d)",
                     plan->merge_smem, ST_DEFAULT_SMEM_WITHOUT_OPT_IN);
    plan->merge_grid_cap = (unsigned)sm_count * ST_SPARSE_ATTN_BULK_CTAS_PER_SM;
  }
  /* ops/workspace.h: the halves in the scratch, their counters (the
   * header and the keys' counts) zeroed by each chunk's launches. */
  plan->half_bytes = block_workspace(cfg, Hkv, topk, max_keys, chunk, plan);
  plan->workspace_bytes = ST_WS_COUNTER_BYTES + plan->half_bytes * (cfg->overlap ? 2 : 1);
  if (cfg->dense) { /* candidate tiles: topk x 128 / (128 / group) a kv head and request */
    plan->params.dense_tiles = (int32_t)(topk * cfg->group);
    plan->dense_cands = Hkv * R * plan->params.dense_tiles;
    if (plan->dense_cands >= (1 << 23)) /* ranks are 23 bits beside the block count */
      return st_fail(err, ST_ERR_NO_VARIANT, "dense: %lld candidate tiles exceed 2^23", (long long)plan->dense_cands);
    plan->dense = cfg->dense;
    /* 2: beside the last merge, whose CTAs take the SMs it leaves */
    plan->dense_grid = (unsigned)(cfg->dense == 2 && cfg->overlap ? sm_count - sm_count / 4 : sm_count);
    plan->dense_smem = ST_SPARSE_ATTN_DENSE_SMEM(cfg->dtype == ST_DTYPE_FP8_E4M3);
    plan->off_dense = plan->workspace_bytes - ST_WS_COUNTER_BYTES; /* the header, then a flag and a list slot a candidate */
    plan->workspace_bytes += DENSE_HEADER_BYTES + 2 * (size_t)plan->dense_cands * 4;
  }
  plan->tokens = cfg->tokens;
  const int64_t items = block_items(Hkv, chunk, topk, cfg->tokens, max_keys);
  if (items > ST_MAX_GRID_X)
    return st_fail(err, ST_ERR_INVALID_ARG, "a chunk of %lld tokens needs more than %lld CTAs", (long long)chunk,
                   ST_MAX_GRID_X);
  plan->persistent = sm_count * cfg->ctas;
  plan->kv_maps = cfg->wgmma && (cfg->dtype == ST_DTYPE_BF16 || cfg->mtiles == 2); /* fp8: RAW_IN_PLACE */
  plan->k_cache = a->k_cache;
  plan->v_cache = a->v_cache;
  plan->q_maps = cfg->wgmma && cfg->mtiles == 2;
  plan->part_maps = plan->q_maps && !cfg->part_f32;
  plan->q = a->q;
  plan->part_rows = Hkv * chunk * topk * cfg->group;
  plan->group = cfg->group;
  plan->head_dim = cfg->head_dim;
  plan->grid[0] = (unsigned)(items < plan->persistent ? items : plan->persistent);
  plan->grid[1] = plan->grid[2] = 1;
  plan->block = (unsigned)st_sparse_attn_threads(cfg);
  plan->smem_bytes = st_sparse_attn_smem_bytes(cfg);
  return ST_OK;
}

st_status st_sparse_attn_plan_make(const st_sparse_attn_config *cfg, const st_sparse_attn_args *a, int sm_count,
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
  if (cfg->algo == ST_SPARSE_ATTN_BLOCK) return plan_block(cfg, a, sm_count > 0 ? sm_count : 1, plan, err);
  plan->grid[0] = (unsigned)tiles;
  plan->grid[1] = (unsigned)a->k_cache.shape[1];
  plan->grid[2] = 1;
  plan->block = (unsigned)st_sparse_attn_threads(cfg);
  plan->smem_bytes = smem;
  return ST_OK;
}

static st_status launch_one(const st_cu *cu, CUfunction fn, unsigned gx, unsigned gy, unsigned block, unsigned smem,
                            st_sparse_attn_params *params, CUstream stream, st_err *err) {
  void *kargs[] = {params};
  ST_CU_TRY(cu, cu->cuLaunchKernel(fn, gx, gy, 1, block, 1, 1, smem, stream, kargs, NULL), err);
  return ST_OK;
}

/* The merge of the chunk `p` describes: a CTA per (token, kv head); with
 * bulk slots, persistent 64-thread CTAs that take (token, kv head, part)
 * work units from a counter. */
static st_status launch_merge(const st_cu *cu, CUfunction merge_fn, const st_sparse_attn_plan *plan,
                              st_sparse_attn_params *p, CUstream stream, st_err *err) {
  if (plan->merge_slots == 0) {
    p->step = 2;
    return launch_one(cu, merge_fn, (unsigned)p->nq, (unsigned)p->num_kv_heads, ST_SPARSE_ATTN_STEP_THREADS, 0, p,
                      stream, err);
  }
  const int64_t pieces = (int64_t)plan->group * plan->head_dim / 8;
  const int64_t units = (int64_t)p->nq * p->num_kv_heads * ((pieces + 127) / 128);
  p->step = 3;
  p->merge_slots = plan->merge_slots;
  return launch_one(cu, merge_fn, (unsigned)(units < plan->merge_grid_cap ? units : plan->merge_grid_cap), 1,
                    ST_SPARSE_ATTN_BULK_THREADS, plan->merge_smem, p, stream, err);
}

/* Overlap: the merge of the chunk `p` describes (in workspace half `half`)
 * on `stream` once what the side stream holds so far is done, then the
 * event that frees the half. */
static st_status merge_after(const st_cu *cu, CUfunction merge_fn, const st_sparse_attn_plan *plan,
                             st_sparse_attn_params *p, int half, CUstream stream, const st_side_stream *side,
                             st_err *err) {
  ST_CU_TRY(cu, cu->cuEventRecord(side->done, side->stream), err);
  ST_CU_TRY(cu, cu->cuStreamWaitEvent(stream, side->done, 0), err);
  st_status st = launch_merge(cu, merge_fn, plan, p, stream, err);
  if (st == ST_OK) ST_CU_TRY(cu, cu->cuEventRecord(side->freed[half], stream), err);
  return st;
}

/* Two-pass kernels: q as [total_q, Hq, D], boxes of a 128-byte panel of a
 * token's group of heads, which land in the q tile's swizzled panels. */
static st_status map_q(const st_cu *cu, const st_sparse_attn_plan *plan, st_tensor_map *map, st_err *err) {
  const st_tensor *q = &plan->q;
  const int64_t dims[3] = {q->shape[2], q->shape[1], q->shape[0]};
  const int64_t strides[2] = {q->stride[1] * 2, q->stride[0] * 2};
  const uint32_t box[3] = {64, (uint32_t)plan->group, 1};
  return st_tensor_map_swizzled(cu, "q", q->data, ST_DTYPE_BF16, 3, dims, strides, box, map, err);
}

/* ... and a workspace half's bf16 partial outputs as [entries x group, D]
 * rows, boxes of a panel of a warp's rows (at most 16, one token's). */
static st_status map_partials(const st_cu *cu, const st_sparse_attn_plan *plan, void *part_o, st_tensor_map *map,
                              st_err *err) {
  const int64_t dims[2] = {plan->head_dim, plan->part_rows}, strides[1] = {plan->head_dim * 2};
  const uint32_t box[2] = {64, (uint32_t)(plan->group < 16 ? plan->group : 16)};
  return st_tensor_map_swizzled(cu, "partial outputs", part_o, ST_DTYPE_BF16, 2, dims, strides, box, map, err);
}

/* The dense tiles (plan->dense), first steps 4 (find) and 5 (place), which
 * the chunks' count reads; p gets the pieces the count and merges read. */
static st_status launch_dense_lists(const st_cu *cu, CUfunction merge_fn, const st_sparse_attn_plan *plan, char *ws,
                                    st_sparse_attn_params *p, CUstream stream, st_err *err) {
  char *at = ws + plan->off_dense;
  ST_CU_TRY(cu, cu->cuMemsetD32Async((CUdeviceptr)(uintptr_t)at, 0, DENSE_HEADER_BYTES / 4, stream), err);
  p->ws_dense_header = (uint32_t *)at;
  p->ws_dense = (int32_t *)(at + DENSE_HEADER_BYTES);
  p->ws_dense_list = p->ws_dense + plan->dense_cands;
  const int64_t tokens = 128 / plan->group;
  st_status st;
  p->step = 4;
  if ((st = launch_one(cu, merge_fn, (unsigned)ceil_div(plan->dense_cands * tokens, ST_SPARSE_ATTN_STEP_THREADS), 1,
                       ST_SPARSE_ATTN_STEP_THREADS, 0, p, stream, err)) != ST_OK)
    return st;
  p->step = 5;
  return launch_one(cu, merge_fn, (unsigned)ceil_div(plan->dense_cands, ST_SPARSE_ATTN_STEP_THREADS), 1,
                    ST_SPARSE_ATTN_STEP_THREADS, 0, p, stream, err);
}

/* ... then the dense kernel over every dense tile of the call, from the
 * merge kernel's module. */
static st_status launch_dense_kernel(const st_cu *cu, CUfunction merge_fn, const st_sparse_attn_plan *plan,
                                     st_sparse_attn_params *p, CUstream stream, st_err *err) {
  CUmodule mod;
  CUfunction dense_fn;
  ST_CU_TRY(cu, cu->cuFuncGetModule(&mod, merge_fn), err);
  const char *name = p->scale_mode == 2 ? ST_SPARSE_ATTN_DENSE_TENSOR_KERNEL : ST_SPARSE_ATTN_DENSE_KERNEL;
  ST_CU_TRY(cu, cu->cuModuleGetFunction(&dense_fn, mod, name), err);
  int regs = 0;
  ST_CU_TRY(cu, cu->cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, dense_fn), err);
  if (regs != ST_SPARSE_ATTN_DENSE_REGS)
    return st_fail(err, ST_ERR_NO_VARIANT, "%s has %d registers a thread, not the %d its register split needs", name,
                   regs, ST_SPARSE_ATTN_DENSE_REGS);
  ST_CU_TRY(cu,
            cu->cuFuncSetAttribute(dense_fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)plan->dense_smem),
            err);
  return launch_one(cu, dense_fn, plan->dense_grid, 1, ST_SPARSE_ATTN_DENSE_THREADS, plan->dense_smem, p, stream, err);
}

/* Points the params' workspace pieces into the half that starts at `ws`. */
static void set_workspace(const st_sparse_attn_plan *plan, char *ws, st_sparse_attn_params *p) {
  p->ws_header = (uint32_t *)(ws + plan->off_header);
  p->ws_count = (int32_t *)(ws + plan->off_count);
  p->ws_offset = (int32_t *)(ws + plan->off_offset);
  p->ws_item = (int32_t *)(ws + plan->off_item);
  p->ws_key = (int32_t *)(ws + plan->off_key);
  p->ws_rank = (int32_t *)(ws + plan->off_rank);
  p->ws_item_rec = (int32_t *)(ws + plan->off_item_rec);
  // cppcheck-suppress invalidPointerCast ; a device address, aligned for floats by the plan
  p->ws_part_ml = (float *)(ws + plan->off_part_ml);
  p->ws_part_o = ws + plan->off_part_o;
}

/* Block-major: per chunk, count, scatter, blocks and merge (the template's
 * file comment). With overlap, chunk c's count, scatter and blocks run on
 * the side stream in workspace half c % 2, after the merge of chunk c - 2
 * (the half's previous user) has finished, and its merge on `stream` after
 * its blocks: that merge (HBM-bound reads of the partials) then runs beside
 * chunk c + 1's blocks (L2-bound), whose CTAs the side stream's priority
 * places first. `stream` waits for every chunk's blocks, so the side
 * stream's work is joined back by the last merge. */
static st_status launch_block(const st_cu *cu, CUfunction main_fn, CUfunction merge_fn, const st_sparse_attn_plan *plan,
                              char *ws, CUstream stream, const st_side_stream *side, st_err *err) {
  st_sparse_attn_params p = plan->params;
  const int64_t total_q = p.total_q, Hkv = p.num_kv_heads;
  st_status st = ST_OK;
  if (plan->kv_maps && ((st = st_tensor_map_pages(cu, &plan->k_cache, "k_cache", 256, &p.k_map, err)) != ST_OK ||
                        (st = st_tensor_map_pages(cu, &plan->v_cache, "v_cache", 256, &p.v_map, err)) != ST_OK))
    return st;
  st_tensor_map part_map[2];
  if (plan->q_maps && (st = map_q(cu, plan, &p.q_map, err)) != ST_OK) return st;
  for (int h = 0; plan->part_maps && h < 1 + plan->overlap; h++)
    if ((st = map_partials(cu, plan, ws + (size_t)h * plan->half_bytes + plan->off_part_o, &part_map[h], err)) != ST_OK)
      return st;
  if (plan->dense && ((st = launch_dense_lists(cu, merge_fn, plan, ws, &p, stream, err)) != ST_OK ||
                      (plan->dense == 1 && (st = launch_dense_kernel(cu, merge_fn, plan, &p, stream, err)) != ST_OK)))
    return st;
  const CUstream lists = plan->overlap ? side->stream : stream; /* count, scatter and blocks */
  if (plan->overlap) {
    ST_CU_TRY(cu, cu->cuEventRecord(side->fork, stream), err);
    ST_CU_TRY(cu, cu->cuStreamWaitEvent(side->stream, side->fork, 0), err);
  }
  st_sparse_attn_params prev = p; /* bulk with overlap: the chunk whose merge waits for the next chunk's lists */
  int prev_half = -1;
  int64_t c = 0;
  for (int64_t q0 = 0, nq = 0; q0 < total_q && st == ST_OK; q0 += nq, c++) {
    const int64_t want = c == 0 && plan->first_q > 0 ? plan->first_q : plan->chunk_q;
    nq = total_q - q0 < want ? total_q - q0 : want;
    const unsigned steps = (unsigned)ceil_div(Hkv * nq * p.topk, ST_SPARSE_ATTN_STEP_THREADS);
    const int half = plan->overlap ? (int)(c & 1) : 0;
    set_workspace(plan, ws + (size_t)half * plan->half_bytes, &p);
    if (plan->part_maps) p.part_map = part_map[half];
    if (plan->overlap && c >= 2) ST_CU_TRY(cu, cu->cuStreamWaitEvent(side->stream, side->freed[half], 0), err);
    p.q0 = (int32_t)q0;
    p.nq = (int32_t)nq;
    ST_CU_TRY(cu,
              cu->cuMemsetD32Async((CUdeviceptr)(uintptr_t)p.ws_header, 0,
                                   (plan->off_offset - plan->off_header) / 4, lists),
              err);
    p.step = 0;
    if ((st = launch_one(cu, merge_fn, steps, 1, ST_SPARSE_ATTN_STEP_THREADS, ST_SPARSE_ATTN_COUNT_SMEM, &p, lists,
                         err)) != ST_OK)
      break;
    p.step = 1;
    if ((st = launch_one(cu, merge_fn, steps, 1, ST_SPARSE_ATTN_STEP_THREADS, 0, &p, lists, err)) != ST_OK) break;
    if (prev_half >= 0) { /* the bulk merge of the chunk before, now that this chunk's lists are queued */
      st = merge_after(cu, merge_fn, plan, &prev, prev_half, stream, side, err);
      prev_half = -1;
      if (st != ST_OK) break;
    }
    const int64_t items = block_items(Hkv, nq, p.topk, plan->tokens, plan->max_keys);
    const unsigned ctas = (unsigned)(items < plan->persistent ? items : plan->persistent);
    st = launch_one(cu, main_fn, ctas, 1, plan->block, plan->smem_bytes, &p, lists, err);
    if (st != ST_OK) break;
    /* The merge: a CTA per (token, kv head). Fewer merge CTAs walking the
     * pairs, so that the next chunk's blocks CTAs fit beside them, were
     * tried for overlapped chunks and lost 40% (docs/kernels/sparse_attn.md,
     * v2.10 and v2.11); so were 64-thread merges launched after the next
     * chunk's lists (v2.24: they ran beside the blocks, at a third of
     * their speed). The bulk merge (v2.26) is launched so, after the next
     * chunk's count and scatter: the next blocks kernel is then queued
     * first, on the side stream of higher priority, and takes its two
     * CTAs an SM before the merge's persistent CTAs fill the room left. */
    if (plan->overlap && plan->merge_slots > 0) {
      prev = p;
      prev_half = half;
    } else if (plan->overlap) {
      st = merge_after(cu, merge_fn, plan, &p, half, stream, side, err);
    } else {
      st = launch_merge(cu, merge_fn, plan, &p, stream, err);
    }
  }
  if (st == ST_OK && prev_half >= 0) st = merge_after(cu, merge_fn, plan, &prev, prev_half, stream, side, err);
  /* dense 2: the dense kernel after the last blocks kernel, on the side
   * stream of higher priority (its CTAs placed first, on 3/4 of the SMs),
   * beside the last merge (HBM-bound, on the SMs left); then joined. */
  if (st == ST_OK && plan->dense == 2 && (st = launch_dense_kernel(cu, merge_fn, plan, &p, lists, err)) == ST_OK &&
      plan->overlap) {
    ST_CU_TRY(cu, cu->cuEventRecord(side->done, side->stream), err);
    ST_CU_TRY(cu, cu->cuStreamWaitEvent(stream, side->done, 0), err);
  }
  return st;
}

st_status st_sparse_attn_launch(const st_cu *cu, CUfunction main_fn, CUfunction merge_fn,
                                const st_sparse_attn_plan *plan, void *workspace, size_t workspace_bytes,
                                CUstream stream, const st_side_stream *side, st_err *err) {
  if (!main_fn) return st_fail(err, ST_ERR_INVALID_ARG, "sparse_attn kernel is NULL");
  if (plan->algo == ST_SPARSE_ATTN_BLOCK && !merge_fn)
    return st_fail(err, ST_ERR_INVALID_ARG, "block-major sparse_attn needs its merge kernel");
  if (plan->algo == ST_SPARSE_ATTN_BLOCK && plan->overlap && (!side || !side->stream))
    return st_fail(err, ST_ERR_INVALID_ARG, "block-major sparse_attn with overlap needs a side stream");
  if (plan->workspace_bytes > 0 && (!workspace || workspace_bytes < plan->workspace_bytes))
    return st_fail(err, ST_ERR_WORKSPACE, "workspace of %zu bytes at %p is smaller than the %zu bytes needed",
                   workspace ? workspace_bytes : 0, workspace, plan->workspace_bytes);
  /* Past 48 KiB of shared memory a kernel must opt in (static part: under 1 KiB). */
  if (plan->smem_bytes > ST_DEFAULT_SMEM_WITHOUT_OPT_IN - 1024)
    ST_CU_TRY(cu,
              cu->cuFuncSetAttribute(main_fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)plan->smem_bytes),
              err);
  /* An SM runs two kernels' CTAs side by side only under one split of its
   * L1 and shared memory. The blocks kernel needs the most shared memory;
   * the bulk merge, meant to run beside it, asks for the same split. */
  if (plan->algo == ST_SPARSE_ATTN_BLOCK && plan->overlap && plan->merge_slots > 0)
    ST_CU_TRY(cu,
              cu->cuFuncSetAttribute(merge_fn, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                                     CU_SHAREDMEM_CARVEOUT_MAX_SHARED),
              err);
  if (plan->algo == ST_SPARSE_ATTN_BLOCK)
    return launch_block(cu, main_fn, merge_fn, plan, (char *)workspace + ST_WS_COUNTER_BYTES, stream, side, err);
  st_sparse_attn_params params = plan->params;
  return launch_one(cu, main_fn, plan->grid[0], plan->grid[1], plan->block, plan->smem_bytes, &params, stream, err);
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

/* ---- the op's descriptor (ops/op.h) ------------------------------------ */

static st_status parse_config(const st_params *kernel, const st_params *launch, st_variant_config *c, int *rank,
                              st_err *why) {
  const st_status st = st_sparse_attn_config_from_params(kernel, launch, &c->sparse_attn, why);
  *rank = c->sparse_attn.topk_cap; /* the smallest lists that hold the call's topk */
  return st;
}

static int needs_merge(const st_variant_config *cfg) { return cfg->sparse_attn.algo == ST_SPARSE_ATTN_BLOCK; }

ST_OP_TYPED_ADAPTERS(sparse_attn)

static void shape_only(const void *args, st_op_args *copy) {
  const st_sparse_attn_args *a = args;
  st_sparse_attn_args *c = &copy->sparse_attn;
  *c = *a;
  st_tensor *t[] = {&c->q,        &c->k_cache,     &c->v_cache,  &c->k_scales, &c->v_scales,
                    &c->topk_idx, &c->block_table, &c->seq_lens, &c->o,        &c->cu_seqlens_q};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) t[i]->data = ST_STAND_IN(i);
  if (a->lse.data) c->lse.data = ST_STAND_IN(sizeof t / sizeof t[0]); /* NULL: not wanted, stays NULL */
}

static st_status plan(const st_variant_config *cfg, const void *args, int sm_count, st_op_plan *plan,
                      st_plan_info *info, st_err *err) {
  const st_sparse_attn_args *a = args;
  st_status st = st_sparse_attn_check_fit(&cfg->sparse_attn, a, err);
  if (st != ST_OK) return st;
  st_sparse_attn_plan *p = &plan->sparse_attn;
  if ((st = st_sparse_attn_plan_make(&cfg->sparse_attn, a, sm_count, p, err)) != ST_OK) return st;
  *info = (st_plan_info){.workspace_bytes = p->workspace_bytes,
                         .smem_bytes = p->smem_bytes,
                         .merge_smem_bytes = 0,
                         .side_stream = p->overlap};
  return ST_OK;
}

static st_status launch(const st_cu *cu, CUfunction main_fn, CUfunction merge_fn, const st_op_plan *plan,
                        void *workspace, size_t workspace_bytes, CUstream stream, st_side_stream *side, st_err *err) {
  return st_sparse_attn_launch(cu, main_fn, merge_fn, &plan->sparse_attn, workspace, workspace_bytes, stream, side,
                               err);
}

/* The unit of the defaults' load ranges (generator/ops/sparse_attn.lua):
 * (token, KV head, block) entries a multiprocessor, counting each token's
 * blocks as min(topk, max_context's blocks), the most it can attend. A
 * tile CTA walks the blocks its tokens chose one after another, up to every
 * block of the context, so past a few blocks of context it is the slower
 * kernel however small the call (1 token choosing 16 of 24 blocks: 44 us,
 * the block kernel 17; 148 tokens choosing 5 of 14: 65 us against 33): such
 * calls get ST_SPARSE_ATTN_LOAD_MANY. */
static double load(const void *args, int sm_count) {
  const st_sparse_attn_args *a = args;
  const int64_t topk = a->topk_idx.shape[2], blocks = st_blocks_of(a->max_context);
  if (blocks > ST_SPARSE_ATTN_TILE_MAX_BLOCKS) return ST_SPARSE_ATTN_LOAD_MANY;
  const int64_t per_token = topk < blocks ? topk : blocks;
  return (double)a->q.shape[0] * (double)a->k_cache.shape[1] * (double)per_token / (double)(sm_count > 0 ? sm_count : 1);
}

/* The dense default only where every token of the call selects every
 * block it sees, which the host knows from max_context alone: no request
 * reaches past topk blocks (generator/ops/sparse_attn.lua, defaults). Where
 * some tokens do, the dense tiles' search costs more than the few it finds
 * (H200, the best dense launch against the best other: +8% to +41% on 5
 * random batches whose requests have prefixes). */
static int default_meant_for(const st_variant_config *c, const void *args, int sm_count) {
  (void)sm_count;
  const st_sparse_attn_args *a = args;
  return !c->sparse_attn.dense || st_blocks_of(a->max_context) <= a->topk_idx.shape[2];
}

const st_op_desc st_sparse_attn_op = {.name = ST_SPARSE_ATTN_OP,
                                      .main_kernel = ST_SPARSE_ATTN_MAIN_KERNEL,
                                      .params_bytes = sizeof(st_sparse_attn_params),
                                      .merge_kernel = ST_SPARSE_ATTN_MERGE_KERNEL,
                                      .parse_config = parse_config,
                                      .needs_merge = needs_merge,
                                      .check_args = check_args,
                                      .shape_only = shape_only,
                                      .max_context = max_context,
                                      .load = load,
                                      .default_meant_for = default_meant_for,
                                      .dispatch_key = dispatch_key,
                                      .plan = plan,
                                      .launch = launch};
