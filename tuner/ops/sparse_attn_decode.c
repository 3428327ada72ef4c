/* tuner/ops/sparse_attn_decode.c - builds sparse_attn_decode cases and
 * checks variants on them. Inputs follow ../shared/anchors.md: a KV pool of
 * max(4096, min(B*ctx/128, 32768)) pages in the shape's layout, block tables
 * uniformly random over the pool, q uniform in [-1, 1) bf16, K and V uniform
 * (bf16 in [-1, 1), fp8 in [-4, 4)), sm_scale 1/sqrt(D). Selections are
 * built per (kv head, query row) as index_decode would return them:
 *   random  block 0, the query's own block and random other visible blocks
 *           (all visible blocks when fewer than topk), -1 after;
 *   holes   the same with about a quarter of the entries -1 or past the
 *           query's own block (both must be skipped);
 *   local   the last topk visible blocks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_harness.h"
#include "ops/case_inputs.h"
#include "ops/sparse_attn_decode.h"
#include "ops/tensor_check.h"
#include "random_fill.h"
#include "reference/sparse_attn_decode.h"

#define BLOCK_TOKENS 128
/* The relative L2 error design.md allows for attention outputs. */
#define ATTN_TOL 2e-2

typedef struct sad_case {
  const st_cu *cu;
  st_device_info dev;
  st_ref_sparse_attn_decode ref; /* host inputs; points at the h_* arrays */
  int want_lse;
  uint16_t *h_q;
  void *h_pool;
  float *h_scales; /* [2][pages][128][Hkv]: K then V, slot-major (TENSOR mode) */
  int32_t *h_idx, *h_bt, *h_seq;
  double *ref_o, *ref_lse;
  uint16_t *got_o;
  float *got_lse;
  CUdeviceptr d_q, d_pool, d_scales, d_idx, d_bt, d_seq, d_o, d_lse;
  st_sparse_attn_decode_args args;
} sad_case;

typedef struct sad_bound {
  sad_case *c;
  st_handle *rt; /* not NULL: launch through the runtime's dispatch */
  st_sparse_attn_decode_config cfg;
  st_sparse_attn_decode_plan plan;
  CUfunction main_fn, merge_fn;
  CUdeviceptr ws;
} sad_bound;

static void case_destroy(void *p) {
  sad_case *c = p;
  if (!c) return;
  CUdeviceptr bufs[] = {c->d_q, c->d_pool, c->d_scales, c->d_idx, c->d_bt, c->d_seq, c->d_o, c->d_lse};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) c->cu->cuMemFree(bufs[i]);
  void *host[] = {c->h_q,   c->h_pool, c->h_scales, c->h_idx, c->h_bt,
                  c->h_seq, c->ref_o,  c->ref_lse,  c->got_o, c->got_lse};
  for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) free(host[i]);
  free(c);
}

/* The shape's fields beyond the integers. */
typedef struct sad_shape {
  int B, D, Hq, Hkv, ctx, qlen, topk, lse;
  st_dtype dtype;
  st_kv_scale_mode scale;
  int interleaved; /* layout (pages, Hkv, 128, 2*D); else (pages, 2, 128, Hkv, D) */
  const char *lens, *sel;
} sad_shape;

static st_status read_shape(const st_params *shape, sad_shape *s, st_err *err) {
  st_status st;
  if ((st = st_case_shape_int(shape, "B", 1, 65535, &s->B, err)) ||
      (st = st_case_shape_int(shape, "D", 16, 512, &s->D, err)) ||
      (st = st_case_shape_int(shape, "Hq", 1, 65535, &s->Hq, err)) ||
      (st = st_case_shape_int(shape, "Hkv", 1, 65535, &s->Hkv, err)) ||
      (st = st_case_shape_int(shape, "ctx", 1, 1 << 24, &s->ctx, err)) ||
      (st = st_case_shape_int(shape, "qlen", 1, 4, &s->qlen, err)) ||
      (st = st_case_shape_int(shape, "topk", 1, 64, &s->topk, err)) ||
      (st = st_case_shape_int(shape, "lse", 0, 1, &s->lse, err)))
    return st;
  const char *dt = st_params_get(shape, "dtype"), *scale = st_params_get(shape, "scale");
  const char *layout = st_params_get(shape, "layout");
  s->lens = st_params_get(shape, "lens");
  s->sel = st_params_get(shape, "sel");
  if (!dt || (strcmp(dt, "bf16") && strcmp(dt, "fp8")))
    return st_fail(err, ST_ERR_INVALID_ARG, "shape dtype='%s' is not bf16 or fp8", dt ? dt : "(missing)");
  s->dtype = strcmp(dt, "bf16") == 0 ? ST_DTYPE_BF16 : ST_DTYPE_FP8_E4M3;
  if (!scale || (strcmp(scale, "none") && strcmp(scale, "scalar") && strcmp(scale, "tensor")))
    return st_fail(err, ST_ERR_INVALID_ARG, "shape scale='%s' is not none, scalar or tensor",
                   scale ? scale : "(missing)");
  s->scale = strcmp(scale, "none") == 0     ? ST_KV_SCALE_NONE
             : strcmp(scale, "scalar") == 0 ? ST_KV_SCALE_SCALAR
                                            : ST_KV_SCALE_TENSOR;
  if (!layout || (strcmp(layout, "pages2") && strcmp(layout, "interleaved")))
    return st_fail(err, ST_ERR_INVALID_ARG, "shape layout='%s' is not pages2 or interleaved",
                   layout ? layout : "(missing)");
  s->interleaved = strcmp(layout, "interleaved") == 0;
  if (!s->sel || (strcmp(s->sel, "random") && strcmp(s->sel, "holes") && strcmp(s->sel, "local")))
    return st_fail(err, ST_ERR_INVALID_ARG, "shape sel='%s' is not random, holes or local",
                   s->sel ? s->sel : "(missing)");
  if (s->Hq % s->Hkv) return st_fail(err, ST_ERR_INVALID_ARG, "shape Hq=%d is not a multiple of Hkv=%d", s->Hq, s->Hkv);
  return ST_OK;
}

/* One topk row for a query at position pos (see the file comment). */
static void make_selection(int32_t *row, int topk, int pos, int max_blocks, const char *sel, uint64_t *rng) {
  const int nb = pos >= 0 ? pos / BLOCK_TOKENS + 1 : 0;
  int n = 0;
  if (strcmp(sel, "local") == 0) {
    for (int j = nb - 1; j >= 0 && n < topk; j--) row[n++] = j;
  } else {
    if (nb > 0) row[n++] = nb - 1;
    if (nb > 1 && n < topk) row[n++] = 0;
    if (nb - 2 <= topk - n) { /* every visible block fits */
      for (int j = 1; j < nb - 1; j++) row[n++] = j;
    } else {
      while (n < topk) { /* distinct random blocks in 1..nb-2 */
        const int j = 1 + (int)st_rand_below(rng, (uint64_t)(nb - 2));
        int dup = 0;
        for (int i = 0; i < n && !dup; i++) dup = row[i] == j;
        if (!dup) row[n++] = j;
      }
    }
  }
  for (int i = n; i < topk; i++) row[i] = -1;
  if (strcmp(sel, "holes") == 0)
    for (int i = 0; i < topk; i++) {
      const uint64_t u = st_rand_below(rng, 8);
      if (u == 0)
        row[i] = -1;
      else if (u == 1)
        row[i] = nb + (int)st_rand_below(rng, (uint64_t)(max_blocks - nb + 1)); /* past its own */
    }
  /* Entry order is the caller's: shuffle so no kernel can lean on it. */
  for (int i = topk - 1; i > 0; i--) {
    const int k = (int)st_rand_below(rng, (uint64_t)i + 1);
    const int32_t t = row[i];
    row[i] = row[k];
    row[k] = t;
  }
}

/* The two cache views over the pool, for both the reference (element
 * strides) and the kernel (tensors). */
static void cache_views(const sad_shape *s, int64_t pages, int64_t *stride, int64_t *v_offset) {
  if (s->interleaved) {
    stride[0] = (int64_t)s->Hkv * BLOCK_TOKENS * 2 * s->D;
    stride[1] = (int64_t)BLOCK_TOKENS * 2 * s->D;
    stride[2] = 2 * (int64_t)s->D;
    *v_offset = s->D;
  } else {
    stride[0] = 2 * (int64_t)BLOCK_TOKENS * s->Hkv * s->D;
    stride[1] = s->D;
    stride[2] = (int64_t)s->Hkv * s->D;
    *v_offset = (int64_t)BLOCK_TOKENS * s->Hkv * s->D;
  }
  (void)pages;
}

static void set_cache_tensor(st_tensor *t, CUdeviceptr base, int64_t offset_elems, const sad_shape *s, int64_t pages,
                             const int64_t *stride) {
  memset(t, 0, sizeof *t);
  t->data = (void *)(uintptr_t)(base + (CUdeviceptr)(offset_elems * st_dtype_bytes(s->dtype)));
  t->dtype = s->dtype;
  t->ndim = 4;
  const int64_t shape[4] = {pages, s->Hkv, BLOCK_TOKENS, s->D};
  for (int i = 0; i < 4; i++) t->shape[i] = shape[i];
  for (int i = 0; i < 3; i++) t->stride[i] = stride[i];
  t->stride[3] = 1;
}

/* Scale views [pages, Hkv, 128] over slot-major arrays [pages][128][Hkv]. */
static void set_scale_tensor(st_tensor *t, CUdeviceptr base, const sad_shape *s, int64_t pages) {
  memset(t, 0, sizeof *t);
  t->data = (void *)(uintptr_t)base;
  t->dtype = ST_DTYPE_FP32;
  t->ndim = 3;
  t->shape[0] = pages;
  t->shape[1] = s->Hkv;
  t->shape[2] = BLOCK_TOKENS;
  t->stride[0] = (int64_t)BLOCK_TOKENS * s->Hkv;
  t->stride[1] = 1;
  t->stride[2] = s->Hkv;
}

static st_status alloc_host(sad_case *c, const sad_shape *s, int64_t pages, int max_blocks, st_err *err) {
  const size_t rows = (size_t)s->B * (size_t)s->qlen, eb = (size_t)st_dtype_bytes(s->dtype);
  const size_t pool = (size_t)pages * 2 * BLOCK_TOKENS * (size_t)s->Hkv * (size_t)s->D;
  c->h_q = malloc(rows * (size_t)s->Hq * (size_t)s->D * 2);
  c->h_pool = malloc(pool * eb);
  c->h_scales = s->scale == ST_KV_SCALE_TENSOR ? malloc(2 * (size_t)pages * BLOCK_TOKENS * (size_t)s->Hkv * 4) : NULL;
  c->h_idx = malloc((size_t)s->Hkv * rows * (size_t)s->topk * 4);
  c->h_bt = malloc((size_t)s->B * (size_t)max_blocks * 4);
  c->h_seq = malloc((size_t)s->B * 4);
  c->ref_o = malloc(rows * (size_t)s->Hq * (size_t)s->D * sizeof(double));
  c->ref_lse = malloc(rows * (size_t)s->Hq * sizeof(double));
  c->got_o = malloc(rows * (size_t)s->Hq * (size_t)s->D * 2);
  c->got_lse = malloc(rows * (size_t)s->Hq * 4);
  if (!c->h_q || !c->h_pool || (s->scale == ST_KV_SCALE_TENSOR && !c->h_scales) || !c->h_idx || !c->h_bt || !c->h_seq ||
      !c->ref_o || !c->ref_lse || !c->got_o || !c->got_lse)
    return st_fail(err, ST_ERR_NOMEM, "out of host memory for a case of %zu pool bytes", pool * eb);
  return ST_OK;
}

static st_status fill_host(sad_case *c, const sad_shape *s, int64_t pages, int max_blocks, uint64_t seed, int threads,
                           st_err *err) {
  const size_t rows = (size_t)s->B * (size_t)s->qlen;
  const size_t pool = (size_t)pages * 2 * BLOCK_TOKENS * (size_t)s->Hkv * (size_t)s->D;
  const float amp = s->dtype == ST_DTYPE_BF16 ? 1.0f : 4.0f;
  st_fill_uniform(c->h_q, ST_DTYPE_BF16, rows * (size_t)s->Hq * (size_t)s->D, -1.0f, 1.0f, seed ^ 0x71, threads);
  st_fill_uniform(c->h_pool, s->dtype, pool, -amp, amp, seed ^ 0x6b, threads);
  if (c->h_scales)
    st_fill_uniform(c->h_scales, ST_DTYPE_FP32, 2 * (size_t)pages * BLOCK_TOKENS * (size_t)s->Hkv, 0.25f, 2.0f,
                    seed ^ 0x73, threads);
  uint64_t rng = seed ^ 0x62;
  for (size_t i = 0; i < (size_t)s->B * (size_t)max_blocks; i++)
    c->h_bt[i] = (int32_t)st_rand_below(&rng, (uint64_t)pages);
  st_status st = st_case_seq_lens(c->h_seq, s->B, s->ctx, s->lens, &rng, err);
  if (st != ST_OK) return st;
  for (int g = 0; g < s->Hkv; g++)
    for (size_t row = 0; row < rows; row++) {
      const int r = (int)(row / (size_t)s->qlen), t = (int)(row % (size_t)s->qlen);
      const int pos = c->h_seq[r] - s->qlen + t;
      make_selection(c->h_idx + ((size_t)g * rows + row) * (size_t)s->topk, s->topk, pos, max_blocks, s->sel, &rng);
    }
  return ST_OK;
}

static void fill_reference(sad_case *c, const sad_shape *s, int64_t pages, int max_blocks, const int64_t *stride,
                           int64_t v_offset) {
  const size_t eb = (size_t)st_dtype_bytes(s->dtype);
  st_ref_sparse_attn_decode *ref = &c->ref;
  memset(ref, 0, sizeof *ref);
  ref->kv_dtype = s->dtype;
  ref->R = s->B;
  ref->qlen = s->qlen;
  ref->Hq = s->Hq;
  ref->Hkv = s->Hkv;
  ref->D = s->D;
  ref->topk = s->topk;
  ref->bt_cols = max_blocks;
  ref->pages = pages;
  ref->q = c->h_q;
  ref->k_cache = c->h_pool;
  ref->v_cache = (const char *)c->h_pool + (size_t)v_offset * eb;
  for (int i = 0; i < 3; i++) ref->k_stride[i] = ref->v_stride[i] = stride[i];
  ref->scale_mode = s->scale;
  ref->k_scale = s->scale == ST_KV_SCALE_SCALAR ? 0.75f : 1.0f;
  ref->v_scale = s->scale == ST_KV_SCALE_SCALAR ? 1.5f : 1.0f;
  if (c->h_scales) {
    const size_t per = (size_t)pages * BLOCK_TOKENS * (size_t)s->Hkv;
    ref->k_scales = c->h_scales;
    ref->v_scales = c->h_scales + per;
    const int64_t ss[3] = {(int64_t)BLOCK_TOKENS * s->Hkv, 1, s->Hkv};
    for (int i = 0; i < 3; i++) ref->ks_stride[i] = ref->vs_stride[i] = ss[i];
  }
  ref->topk_idx = c->h_idx;
  ref->block_table = c->h_bt;
  ref->seq_lens = c->h_seq;
  ref->sm_scale = 1.0 / sqrt((double)s->D);
}

static st_status upload_all(sad_case *c, const sad_shape *s, int64_t pages, int max_blocks, st_err *err) {
  const st_cu *cu = c->cu;
  const size_t rows = (size_t)s->B * (size_t)s->qlen, eb = (size_t)st_dtype_bytes(s->dtype);
  const size_t pool = (size_t)pages * 2 * BLOCK_TOKENS * (size_t)s->Hkv * (size_t)s->D;
  st_status st;
  if ((st = st_case_upload(cu, &c->d_q, c->h_q, rows * (size_t)s->Hq * (size_t)s->D * 2, err)) ||
      (st = st_case_upload(cu, &c->d_pool, c->h_pool, pool * eb, err)) ||
      (st = st_case_upload(cu, &c->d_idx, c->h_idx, (size_t)s->Hkv * rows * (size_t)s->topk * 4, err)) ||
      (st = st_case_upload(cu, &c->d_bt, c->h_bt, (size_t)s->B * (size_t)max_blocks * 4, err)) ||
      (st = st_case_upload(cu, &c->d_seq, c->h_seq, (size_t)s->B * 4, err)))
    return st;
  if (c->h_scales &&
      (st = st_case_upload(cu, &c->d_scales, c->h_scales, 2 * (size_t)pages * BLOCK_TOKENS * (size_t)s->Hkv * 4, err)))
    return st;
  ST_CU_TRY(cu, cu->cuMemAlloc(&c->d_o, rows * (size_t)s->Hq * (size_t)s->D * 2), err);
  if (s->lse) ST_CU_TRY(cu, cu->cuMemAlloc(&c->d_lse, rows * (size_t)s->Hq * 4), err);
  return ST_OK;
}

static void fill_args(sad_case *c, const sad_shape *s, int64_t pages, int max_blocks, const int64_t *stride,
                      int64_t v_offset) {
  st_sparse_attn_decode_args *a = &c->args;
  memset(a, 0, sizeof *a);
  const int64_t rows = (int64_t)s->B * s->qlen;
  st_tensor_contiguous(&a->q, (void *)(uintptr_t)c->d_q, ST_DTYPE_BF16, 3, (int64_t[]){rows, s->Hq, s->D});
  set_cache_tensor(&a->k_cache, c->d_pool, 0, s, pages, stride);
  set_cache_tensor(&a->v_cache, c->d_pool, v_offset, s, pages, stride);
  a->scale_mode = s->scale;
  a->k_scale = c->ref.k_scale;
  a->v_scale = c->ref.v_scale;
  if (c->d_scales) {
    set_scale_tensor(&a->k_scales, c->d_scales, s, pages);
    set_scale_tensor(&a->v_scales, c->d_scales + (CUdeviceptr)pages * BLOCK_TOKENS * (CUdeviceptr)s->Hkv * 4, s, pages);
  }
  st_tensor_contiguous(&a->topk_idx, (void *)(uintptr_t)c->d_idx, ST_DTYPE_INT32, 3,
                       (int64_t[]){s->Hkv, rows, s->topk});
  st_tensor_contiguous(&a->block_table, (void *)(uintptr_t)c->d_bt, ST_DTYPE_INT32, 2, (int64_t[]){s->B, max_blocks});
  st_tensor_contiguous(&a->seq_lens, (void *)(uintptr_t)c->d_seq, ST_DTYPE_INT32, 1, (int64_t[]){s->B});
  st_tensor_contiguous(&a->o, (void *)(uintptr_t)c->d_o, ST_DTYPE_BF16, 3, (int64_t[]){rows, s->Hq, s->D});
  if (c->d_lse) st_tensor_contiguous(&a->lse, (void *)(uintptr_t)c->d_lse, ST_DTYPE_FP32, 2, (int64_t[]){rows, s->Hq});
  a->sm_scale = (float)c->ref.sm_scale;
  a->qlen = s->qlen;
  a->max_context = s->ctx;
}

static st_status case_create(const st_cu *cu, const st_device_info *dev, const st_params *shape, uint64_t seed,
                             int threads, void **out, st_err *err) {
  sad_shape s;
  st_status st = read_shape(shape, &s, err);
  if (st != ST_OK) return st;
  sad_case *c = calloc(1, sizeof *c);
  if (!c) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  c->cu = cu;
  c->dev = *dev;
  c->want_lse = s.lse;
  const int max_blocks = (s.ctx + BLOCK_TOKENS - 1) / BLOCK_TOKENS;
  int64_t pages = (int64_t)s.B * max_blocks;
  if (pages > 32768) pages = 32768;
  if (pages < 4096) pages = 4096;
  int64_t stride[3], v_offset;
  cache_views(&s, pages, stride, &v_offset);
  if ((st = alloc_host(c, &s, pages, max_blocks, err)) ||
      (st = fill_host(c, &s, pages, max_blocks, seed, threads, err)))
    goto fail;
  fill_reference(c, &s, pages, max_blocks, stride, v_offset);
  if (st_ref_sparse_attn_decode_compute(&c->ref, c->ref_o, c->ref_lse, threads) != 0) {
    st = st_fail(err, ST_ERR_NOMEM, "the reference could not run (threads or memory)");
    goto fail;
  }
  if ((st = upload_all(c, &s, pages, max_blocks, err)) != ST_OK) goto fail;
  fill_args(c, &s, pages, max_blocks, stride, v_offset);
  if ((st = st_sparse_attn_decode_check_args(&c->args, err)) != ST_OK) goto fail;
  *out = c;
  return ST_OK;
fail:
  case_destroy(c);
  return st;
}

static void unbind(void *p) {
  sad_bound *b = p;
  if (!b) return;
  if (b->ws) b->c->cu->cuMemFree(b->ws);
  free(b);
}

static st_status alloc_workspace(sad_bound *b, st_err *err) {
  const st_cu *cu = b->c->cu;
  if (!b->plan.workspace_bytes) return ST_OK;
  ST_CU_TRY(cu, cu->cuMemAlloc(&b->ws, b->plan.workspace_bytes), err);
  ST_CU_TRY(cu, cu->cuMemsetD8Async(b->ws, 0, b->plan.workspace_bytes, NULL), err);
  return ST_OK;
}

static st_status bind(void *pc, const st_params *kernel, const st_params *launch, CUmodule mod, void **out,
                      st_err *err) {
  sad_case *c = pc;
  sad_bound *b = calloc(1, sizeof *b);
  if (!b) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  b->c = c;
  st_status s;
  if ((s = st_sparse_attn_decode_config_from_params(kernel, launch, &b->cfg, err)) ||
      (s = st_sparse_attn_decode_check_fit(&b->cfg, &c->args, err)) ||
      (s = st_sparse_attn_decode_plan_make(&b->cfg, &c->args, c->dev.sm_count, &b->plan, err)))
    goto fail;
  CUresult rc = c->cu->cuModuleGetFunction(&b->main_fn, mod, ST_SPARSE_ATTN_DECODE_MAIN_KERNEL);
  if (rc == CUDA_SUCCESS && b->plan.merge_block)
    rc = c->cu->cuModuleGetFunction(&b->merge_fn, mod, ST_SPARSE_ATTN_DECODE_MERGE_KERNEL);
  if (rc != CUDA_SUCCESS) {
    s = st_cu_fail(c->cu, rc, "binding sparse_attn_decode variant", err);
    goto fail;
  }
  if ((s = alloc_workspace(b, err)) != ST_OK) goto fail;
  *out = b;
  return ST_OK;
fail:
  unbind(b);
  return s;
}

static st_status bind_runtime(void *pc, void *rt, void **out, st_err *err) {
  sad_case *c = pc;
  sad_bound *b = calloc(1, sizeof *b);
  if (!b) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  b->c = c;
  b->rt = rt;
  size_t bytes = 0;
  st_status s = st_sparse_attn_decode_workspace_size(rt, &c->args, &bytes);
  if (s == ST_OK) s = st_sparse_attn_decode_prepare(rt, &c->args);
  if (s != ST_OK) {
    st_fail(err, s, "runtime: %s", st_last_error(rt));
    unbind(b);
    return s;
  }
  b->plan.workspace_bytes = bytes;
  if (bytes) {
    CUresult rc = c->cu->cuMemAlloc(&b->ws, bytes);
    if (rc == CUDA_SUCCESS) s = st_workspace_clear(rt, (void *)(uintptr_t)b->ws, bytes, NULL);
    if (rc != CUDA_SUCCESS || s != ST_OK) {
      if (rc != CUDA_SUCCESS)
        s = st_cu_fail(c->cu, rc, "cuMemAlloc", err);
      else
        st_fail(err, s, "runtime: %s", st_last_error(rt));
      unbind(b);
      return s;
    }
  }
  *out = b;
  return ST_OK;
}

static st_status launch(void *pb, CUstream stream, st_err *err) {
  sad_bound *b = pb;
  if (b->rt) {
    st_status s = st_sparse_attn_decode(b->rt, &b->c->args, (void *)(uintptr_t)b->ws, b->plan.workspace_bytes, stream);
    return s == ST_OK ? ST_OK : st_fail(err, s, "runtime: %s", st_last_error(b->rt));
  }
  return st_sparse_attn_decode_launch(b->c->cu, b->main_fn, b->merge_fn, &b->plan, (void *)(uintptr_t)b->ws,
                                      b->plan.workspace_bytes, stream, err);
}

static st_status verify(void *pb, CUstream stream, int *ok, double *max_err, char *msg, size_t cap, st_err *err) {
  sad_bound *b = pb;
  sad_case *c = b->c;
  const st_cu *cu = c->cu;
  const size_t n_lse = (size_t)c->ref.R * (size_t)c->ref.qlen * (size_t)c->ref.Hq, n_o = n_lse * (size_t)c->ref.D;
  *ok = 1;
  *max_err = 0;
  for (int run = 0; run < 2; run++) {
    /* Poison: NaN in o and lse, so an unwritten element fails the check. */
    ST_CU_TRY(cu, cu->cuMemsetD16Async(c->d_o, (unsigned short)(0x7fc0u + (unsigned)run), n_o, stream), err);
    if (c->d_lse) ST_CU_TRY(cu, cu->cuMemsetD32Async(c->d_lse, 0x7fc00000u + (unsigned)run, n_lse, stream), err);
    st_status s = launch(b, stream, err);
    if (s != ST_OK) return s;
    ST_CU_TRY(cu, cu->cuStreamSynchronize(stream), err);
    ST_CU_TRY(cu, cu->cuMemcpyDtoH(c->got_o, c->d_o, n_o * 2), err);
    if (c->d_lse) ST_CU_TRY(cu, cu->cuMemcpyDtoH(c->got_lse, c->d_lse, n_lse * 4), err);
    double e = 0;
    char why[400];
    const int bad = st_ref_sparse_attn_decode_verify(&c->ref, c->ref_o, c->d_lse ? c->ref_lse : NULL, c->got_o,
                                                     c->d_lse ? c->got_lse : NULL, ATTN_TOL, &e, why, sizeof why);
    if (e > *max_err) *max_err = e;
    if (bad) {
      *ok = 0;
      snprintf(msg, cap, "%s%d wrong (row, head) pair%s; first: %s",
               run ? "on the second launch (workspace not left clean?): " : "", bad, bad == 1 ? "" : "s", why);
      return ST_OK;
    }
  }
  return ST_OK;
}

/* The selected K and V blocks the op must read (whole blocks, as
 * ../shared/anchors.md counts them), q, o and lse. */
static double min_bytes(const void *pc) {
  const sad_case *c = pc;
  const st_ref_sparse_attn_decode *r = &c->ref;
  const double eb = st_dtype_bytes(r->kv_dtype), rows = (double)r->R * r->qlen;
  double blocks = 0;
  for (int g = 0; g < r->Hkv; g++)
    for (int row = 0; row < (int)rows; row++) {
      const int rq = row / r->qlen, pos = r->seq_lens[rq] - r->qlen + row % r->qlen;
      const int nb = pos >= 0 ? pos / BLOCK_TOKENS + 1 : 0;
      const int32_t *sel = r->topk_idx + ((size_t)g * (size_t)rows + (size_t)row) * (size_t)r->topk;
      for (int i = 0; i < r->topk; i++) blocks += sel[i] >= 0 && sel[i] < nb;
    }
  double bytes = blocks * BLOCK_TOKENS * r->D * 2 * eb;
  bytes += rows * r->Hq * r->D * 2 * 2; /* q and o */
  if (c->want_lse) bytes += rows * r->Hq * 4;
  return bytes;
}

const st_op_harness st_sparse_attn_decode_harness = {
    .op = ST_SPARSE_ATTN_DECODE_OP,
    .case_create = case_create,
    .case_destroy = case_destroy,
    .bind = bind,
    .bind_runtime = bind_runtime,
    .launch = launch,
    .verify = verify,
    .unbind = unbind,
    .min_bytes = min_bytes,
};
