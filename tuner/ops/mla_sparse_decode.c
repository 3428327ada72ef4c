/* tuner/ops/mla_sparse_decode.c - builds mla_sparse_decode cases and checks
 * variants on them. Inputs as an engine builds them: a cache pool of pages
 * of 64 tokens, clamp(B * ctx / 64, 4096, 8192) pages (172 to 604 MB: several
 * times an H200's L2), each request's ctx tokens on pages drawn at random
 * from the whole pool, each query row's topk entries distinct random tokens
 * of its request (slots page * 64 + offset); q uniform in [-1, 1) bf16;
 * sm_scale 1/sqrt(192) as DeepSeek-V3.2 uses. A bf16 cache is uniform in
 * [-1, 1); an fp8 cache row is what an engine's quantizer writes: 512
 * latent values uniform in [-448, 448) rounded to e4m3, each 128 with an
 * fp32 scale in [0.5, 1.5) / 448, then 64 bf16 RoPE values in [-1, 1).
 * Shape fields (generator/ops/mla_sparse_decode.lua): tlen random gives
 * request b a topk_length uniform in 0..topk (the first 0, the last topk);
 * sink 1 an attn_sink uniform in [-2, 2) with head 0 +inf and head 1
 * -inf; sel edge mixes into the rows -1, out-of-range slots, repeats and
 * tokens at page borders, and gives the first row no valid entry. Cold
 * timing (cold.h): the pool grown to 16 x L2 and input sets that differ in
 * their indices alone, slots uniform over the whole pool. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cold.h"
#include "op_harness.h"
#include "ops/case_inputs.h"
#include "ops/mla_sparse_decode.h"
#include "ops/tensor_check.h"
#include "random_fill.h"
#include "reference/mla_sparse_decode.h"
#include "verify_twice.h"

/* The relative L2 error design.md allows for attention outputs. */
#define ATTN_TOL 2e-2
#define PAGE_SIZE 64
#define MIN_PAGES 4096
#define MAX_PAGES 8192
#define FP8_LATENT_MAX 448.0f

typedef struct msd_case {
  const st_cu *cu;
  st_device_info dev;
  st_ref_mla_sparse_decode ref; /* host inputs; points at the h_* arrays */
  int B, qlen, Hq, topk, ctx, want_lse, want_sink, edge;
  int random_tlen;
  st_dtype dtype;
  int64_t pages;
  size_t row_bytes;
  uint16_t *h_q;
  void *h_kv;
  int32_t *h_idx, *h_tlen;
  float *h_sink;
  double *ref_o, *ref_lse;
  uint16_t *got_o;
  float *got_lse;
  CUdeviceptr d_q, d_kv, d_idx, d_tlen, d_sink, d_o, d_lse;
  st_cold_tables cold; /* --cold: the indices of the other input sets */
  st_mla_sparse_decode_args args;
} msd_case;

typedef struct msd_bound {
  msd_case *c;
  st_handle *rt; /* not NULL: launch through the runtime's dispatch */
  st_mla_sparse_decode_config cfg;
  st_mla_sparse_decode_plan plan;
  CUfunction main_fn, merge_fn;
  CUdeviceptr ws;
} msd_bound;

static void case_destroy(void *p) {
  msd_case *c = p;
  if (!c) return;
  CUdeviceptr bufs[] = {c->d_q, c->d_kv, c->d_idx, c->d_tlen, c->d_sink, c->d_o, c->d_lse};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) c->cu->cuMemFree(bufs[i]);
  st_cold_free(c->cu, &c->cold);
  void *host[] = {c->h_q, c->h_kv, c->h_idx, c->h_tlen, c->h_sink, c->ref_o, c->ref_lse, c->got_o, c->got_lse};
  for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) free(host[i]);
  free(c);
}

static st_status read_shape(msd_case *c, const st_params *shape, st_err *err) {
  st_status st;
  if ((st = st_case_shape_int(shape, "B", 1, 65535, &c->B, err)) ||
      (st = st_case_shape_int(shape, "Hq", 16, ST_MLA_SPARSE_DECODE_MAX_HEADS, &c->Hq, err)) ||
      (st = st_case_shape_int(shape, "ctx", 1, 1 << 24, &c->ctx, err)) ||
      (st = st_case_shape_int(shape, "qlen", 1, ST_MLA_SPARSE_DECODE_MAX_QLEN, &c->qlen, err)) ||
      (st = st_case_shape_int(shape, "topk", 1, ST_MLA_SPARSE_DECODE_MAX_TOPK, &c->topk, err)) ||
      (st = st_case_shape_int(shape, "lse", 0, 1, &c->want_lse, err)) ||
      (st = st_case_shape_int(shape, "sink", 0, 1, &c->want_sink, err)))
    return st;
  const char *dtype = st_params_get(shape, "dtype"), *tlen = st_params_get(shape, "tlen");
  const char *sel = st_params_get(shape, "sel");
  if (!dtype || (strcmp(dtype, "bf16") && strcmp(dtype, "fp8")))
    return st_fail(err, ST_ERR_INVALID_ARG, "shape field dtype=%s is not bf16 or fp8", dtype ? dtype : "(missing)");
  if (!tlen || (strcmp(tlen, "none") && strcmp(tlen, "random")))
    return st_fail(err, ST_ERR_INVALID_ARG, "shape field tlen=%s is not none or random", tlen ? tlen : "(missing)");
  if (!sel || (strcmp(sel, "random") && strcmp(sel, "edge")))
    return st_fail(err, ST_ERR_INVALID_ARG, "shape field sel=%s is not random or edge", sel ? sel : "(missing)");
  c->dtype = strcmp(dtype, "bf16") == 0 ? ST_DTYPE_BF16 : ST_DTYPE_FP8_E4M3;
  c->random_tlen = strcmp(tlen, "random") == 0;
  c->edge = strcmp(sel, "edge") == 0;
  return ST_OK;
}

/* c->args with every data pointer NULL. */
static void geometry_args(msd_case *c) {
  st_mla_sparse_decode_args *a = &c->args;
  st_mla_sparse_decode_args_init(a);
  const int64_t rows = (int64_t)c->B * c->qlen;
  st_tensor_contiguous(&a->q, NULL, ST_DTYPE_BF16, 3, (int64_t[]){rows, c->Hq, ST_MLA_SPARSE_DECODE_DIM_QK});
  const int64_t row = c->dtype == ST_DTYPE_BF16 ? ST_MLA_SPARSE_DECODE_DIM_QK : ST_MLA_SPARSE_DECODE_FP8_ROW;
  st_tensor_contiguous(&a->kv_cache, NULL, c->dtype, 3, (int64_t[]){c->pages, PAGE_SIZE, row});
  st_tensor_contiguous(&a->indices, NULL, ST_DTYPE_INT32, 2, (int64_t[]){rows, c->topk});
  if (c->random_tlen) st_tensor_contiguous(&a->topk_length, NULL, ST_DTYPE_INT32, 1, (int64_t[]){c->B});
  if (c->want_sink) st_tensor_contiguous(&a->attn_sink, NULL, ST_DTYPE_FP32, 1, (int64_t[]){c->Hq});
  st_tensor_contiguous(&a->o, NULL, ST_DTYPE_BF16, 3, (int64_t[]){rows, c->Hq, ST_MLA_SPARSE_DECODE_DIM_V});
  if (c->want_lse) st_tensor_contiguous(&a->lse, NULL, ST_DTYPE_FP32, 2, (int64_t[]){rows, c->Hq});
  a->sm_scale = (float)(1.0 / sqrt(192.0));
  a->qlen = c->qlen;
}

/* What a shape makes of a call, for case_create and dispatch_args alike:
 * the shape's fields, the pool's pages (grown where `cold`, for an L2 of
 * l2_bytes) and c->args (geometry_args). */
static st_status read_geometry(msd_case *c, const st_params *shape, int cold, int64_t l2_bytes, st_err *err) {
  const st_status st = read_shape(c, shape, err);
  if (st != ST_OK) return st;
  int64_t pages = ((int64_t)c->B * c->ctx + PAGE_SIZE - 1) / PAGE_SIZE;
  if (pages > MAX_PAGES) pages = MAX_PAGES;
  if (pages < MIN_PAGES) pages = MIN_PAGES;
  c->row_bytes = c->dtype == ST_DTYPE_BF16 ? ST_MLA_SPARSE_DECODE_DIM_QK * 2 : ST_MLA_SPARSE_DECODE_FP8_ROW;
  c->pages = st_cold_pool_pages(cold, pages, (int64_t)c->row_bytes * PAGE_SIZE, l2_bytes);
  geometry_args(c);
  return ST_OK;
}

/* The pool's rows: bf16 uniform, or the fp8 rows of an engine's quantizer. */
static st_status fill_pool(msd_case *c, uint64_t seed, int threads, st_err *err) {
  const size_t tokens = (size_t)c->pages * PAGE_SIZE;
  c->h_kv = malloc(tokens * c->row_bytes);
  if (!c->h_kv) return st_fail(err, ST_ERR_NOMEM, "out of host memory for a pool of %zu tokens", tokens);
  if (c->dtype == ST_DTYPE_BF16) {
    st_fill_uniform(c->h_kv, ST_DTYPE_BF16, tokens * ST_MLA_SPARSE_DECODE_DIM_QK, -1.f, 1.f, seed ^ 0x6b, threads);
    return ST_OK;
  }
  uint8_t *latent = malloc(tokens * ST_MLA_SPARSE_DECODE_DIM_V);
  uint16_t *rope = malloc(tokens * ST_MLA_DIM_ROPE * 2);
  if (!latent || !rope) {
    free(latent);
    free(rope);
    return st_fail(err, ST_ERR_NOMEM, "out of host memory for a pool of %zu tokens", tokens);
  }
  st_fill_uniform(latent, ST_DTYPE_FP8_E4M3, tokens * ST_MLA_SPARSE_DECODE_DIM_V, -FP8_LATENT_MAX, FP8_LATENT_MAX,
                  seed ^ 0x6c, threads);
  st_fill_uniform(rope, ST_DTYPE_BF16, tokens * ST_MLA_DIM_ROPE, -1.f, 1.f, seed ^ 0x6d, threads);
  uint64_t rng = seed ^ 0x6e;
  uint8_t *rows = c->h_kv;
  for (size_t t = 0; t < tokens; t++) {
    uint8_t *row = rows + t * ST_MLA_FP8_ROW;
    memcpy(row, latent + t * ST_MLA_SPARSE_DECODE_DIM_V, ST_MLA_SPARSE_DECODE_DIM_V);
    for (int g = 0; g < ST_MLA_DIM_V / ST_MLA_FP8_GROUP; g++) {
      const float scale = (0.5f + (float)st_rand_below(&rng, 1u << 20) / (float)(1u << 20)) / FP8_LATENT_MAX;
      memcpy(row + ST_MLA_DIM_V + 4 * g, &scale, 4);
    }
    memcpy(row + ST_MLA_DIM_V + 16, rope + t * ST_MLA_DIM_ROPE, ST_MLA_DIM_ROPE * 2);
  }
  free(latent);
  free(rope);
  return ST_OK;
}

/* Request b's pages: ceil(ctx / 64) drawn from the whole pool. Its row's
 * entries: distinct random tokens of the request (repeats where topk >
 * ctx), as slots; sel edge then plants the contract's edge cases. */
static void fill_indices(msd_case *c, const int64_t *pages, uint64_t *rng, uint8_t *seen) {
  const int rows = c->B * c->qlen;
  const int64_t slots = c->pages * PAGE_SIZE;
  for (int row = 0; row < rows; row++) {
    const int64_t *req_pages = pages + (size_t)(row / c->qlen) * (size_t)((c->ctx + PAGE_SIZE - 1) / PAGE_SIZE);
    int32_t *idx = c->h_idx + (size_t)row * (size_t)c->topk;
    memset(seen, 0, (size_t)c->ctx);
    for (int e = 0; e < c->topk; e++) {
      int pos = (int)st_rand_below(rng, (uint64_t)c->ctx);
      for (int tries = 0; seen[pos] && c->topk <= c->ctx && tries < 64; tries++)
        pos = (int)st_rand_below(rng, (uint64_t)c->ctx);
      seen[pos] = 1;
      idx[e] = (int32_t)(req_pages[pos / PAGE_SIZE] * PAGE_SIZE + pos % PAGE_SIZE);
    }
    if (!c->edge) continue;
    for (int e = 0; e < c->topk; e++) {
      const uint64_t r = st_rand_below(rng, 16);
      if (r == 0)
        idx[e] = -1;
      else if (r == 1)
        idx[e] = e % 2 ? (int32_t)slots : (e % 3 ? INT32_MAX : -7); /* out of range: none */
      else if (r == 2 && e > 0)
        idx[e] = idx[st_rand_below(rng, (uint64_t)e)]; /* a repeat */
      else if (r == 3)
        idx[e] = (int32_t)(idx[e] / PAGE_SIZE * PAGE_SIZE); /* a page's first token */
      else if (r == 4)
        idx[e] = (int32_t)(idx[e] / PAGE_SIZE * PAGE_SIZE + PAGE_SIZE - 1); /* its last */
    }
    if (row == 0)
      for (int e = 0; e < c->topk; e++) idx[e] = e % 2 ? -1 : (int32_t)slots + e; /* no valid entry */
  }
}

/* q, indices, lengths and sinks on the host. */
static st_status fill_host(msd_case *c, uint64_t seed, int threads, st_err *err) {
  const size_t rows = (size_t)c->B * (size_t)c->qlen, Hq = (size_t)c->Hq;
  const size_t per_req = (size_t)((c->ctx + PAGE_SIZE - 1) / PAGE_SIZE);
  c->h_q = malloc(rows * Hq * ST_MLA_DIM_QK * 2);
  c->h_idx = malloc(rows * (size_t)c->topk * 4);
  c->h_tlen = malloc((size_t)c->B * 4);
  c->h_sink = malloc(Hq * 4);
  c->ref_o = malloc(rows * Hq * ST_MLA_DIM_V * sizeof(double));
  c->ref_lse = malloc(rows * Hq * sizeof(double));
  c->got_o = malloc(rows * Hq * ST_MLA_DIM_V * 2);
  c->got_lse = malloc(rows * Hq * 4);
  int64_t *pages = malloc((size_t)c->B * per_req * sizeof *pages);
  uint8_t *seen = malloc((size_t)c->ctx);
  if (!c->h_q || !c->h_idx || !c->h_tlen || !c->h_sink || !c->ref_o || !c->ref_lse || !c->got_o || !c->got_lse ||
      !pages || !seen) {
    free(pages);
    free(seen);
    return st_fail(err, ST_ERR_NOMEM, "out of host memory for a case of %zu query rows", rows);
  }
  st_fill_uniform(c->h_q, ST_DTYPE_BF16, rows * Hq * ST_MLA_DIM_QK, -1.f, 1.f, seed ^ 0x71, threads);
  uint64_t rng = seed ^ 0x62;
  for (size_t i = 0; i < (size_t)c->B * per_req; i++) pages[i] = (int64_t)st_rand_below(&rng, (uint64_t)c->pages);
  fill_indices(c, pages, &rng, seen);
  free(pages);
  free(seen);
  for (int b = 0; b < c->B; b++) c->h_tlen[b] = (int32_t)st_rand_below(&rng, (uint64_t)c->topk + 1);
  c->h_tlen[0] = 0;
  if (c->B > 1) c->h_tlen[c->B - 1] = c->topk;
  for (size_t h = 0; h < Hq; h++) c->h_sink[h] = (float)st_rand_below(&rng, 1u << 20) / (float)(1u << 18) - 2.f;
  c->h_sink[0] = INFINITY;
  c->h_sink[1] = -INFINITY;
  return ST_OK;
}

static void fill_reference(msd_case *c) {
  st_ref_mla_sparse_decode *r = &c->ref;
  memset(r, 0, sizeof *r);
  r->kv_dtype = c->dtype;
  r->B = c->B;
  r->qlen = c->qlen;
  r->Hq = c->Hq;
  r->topk = c->topk;
  r->page_size = PAGE_SIZE;
  r->pages = c->pages;
  r->q = c->h_q;
  r->kv = c->h_kv;
  r->kv_stride[0] = c->args.kv_cache.stride[0];
  r->kv_stride[1] = c->args.kv_cache.stride[1];
  r->indices = c->h_idx;
  r->topk_length = c->random_tlen ? c->h_tlen : NULL;
  r->sink = c->want_sink ? c->h_sink : NULL;
  r->sm_scale = c->args.sm_scale;
}

static st_status upload_all(msd_case *c, st_err *err) {
  const st_cu *cu = c->cu;
  const size_t rows = (size_t)c->B * (size_t)c->qlen, Hq = (size_t)c->Hq;
  st_status st;
  if ((st = st_case_upload(cu, &c->d_kv, c->h_kv, (size_t)c->pages * PAGE_SIZE * c->row_bytes, err)) ||
      (st = st_case_upload(cu, &c->d_q, c->h_q, rows * Hq * ST_MLA_DIM_QK * 2, err)) ||
      (st = st_case_upload(cu, &c->d_idx, c->h_idx, rows * (size_t)c->topk * 4, err)) ||
      (c->random_tlen && (st = st_case_upload(cu, &c->d_tlen, c->h_tlen, (size_t)c->B * 4, err))) ||
      (c->want_sink && (st = st_case_upload(cu, &c->d_sink, c->h_sink, Hq * 4, err))))
    return st;
  ST_CU_TRY(cu, cu->cuMemAlloc(&c->d_o, rows * Hq * ST_MLA_DIM_V * 2), err);
  if (c->want_lse) ST_CU_TRY(cu, cu->cuMemAlloc(&c->d_lse, rows * Hq * 4), err);
  return ST_OK;
}

/* Points c->args at the uploaded buffers (optional ones: 0 when not wanted). */
static void point_args(msd_case *c) {
  st_mla_sparse_decode_args *a = &c->args;
  a->q.data = (void *)(uintptr_t)c->d_q;
  a->kv_cache.data = (void *)(uintptr_t)c->d_kv;
  a->indices.data = (void *)(uintptr_t)c->d_idx;
  a->topk_length.data = (void *)(uintptr_t)c->d_tlen;
  a->attn_sink.data = (void *)(uintptr_t)c->d_sink;
  a->o.data = (void *)(uintptr_t)c->d_o;
  a->lse.data = (void *)(uintptr_t)c->d_lse;
}

static st_status case_create(const st_cu *cu, const st_device_info *dev, const st_params *shape, const st_case_opts *o,
                             void **out, st_err *err) {
  msd_case *c = calloc(1, sizeof *c);
  if (!c) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  c->cu = cu;
  c->dev = *dev;
  st_status st = read_geometry(c, shape, o->cold, dev->l2_bytes, err);
  if (st != ST_OK || (st = fill_pool(c, o->seed, o->threads, err)) != ST_OK ||
      (st = fill_host(c, o->seed, o->threads, err)) != ST_OK)
    goto fail;
  fill_reference(c);
  if (st_ref_mla_sparse_decode_compute(&c->ref, c->ref_o, c->ref_lse, o->threads) != 0) {
    st = st_fail(err, ST_ERR_NOMEM, "the reference could not run (threads or memory)");
    goto fail;
  }
  if ((st = upload_all(c, err)) != ST_OK) goto fail;
  point_args(c);
  c->cold = (st_cold_tables){.own = c->d_idx,
                             .entries = (size_t)c->B * (size_t)c->qlen * (size_t)c->topk,
                             .pages = c->pages * PAGE_SIZE, /* the slots' range */
                             .seed = o->seed};
  if ((st = st_mla_sparse_decode_check_args(&c->args, err)) != ST_OK) goto fail;
  *out = c;
  return ST_OK;
fail:
  case_destroy(c);
  return st;
}

static st_status dispatch_args(const st_params *shape, void *args, st_err *err) {
  msd_case *c = calloc(1, sizeof *c);
  if (!c) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  const st_status st = read_geometry(c, shape, 0, 0, err);
  if (st == ST_OK) {
    st_mla_sparse_decode_args *a = args;
    *a = c->args;
    st_tensor *const t[] = {&a->q, &a->kv_cache, &a->indices, &a->topk_length, &a->attn_sink, &a->o, &a->lse};
    st_case_stand_ins(t, sizeof t / sizeof t[0]);
  }
  case_destroy(c);
  return st;
}

static void unbind(void *p) {
  msd_bound *b = p;
  if (!b) return;
  if (b->ws) b->c->cu->cuMemFree(b->ws);
  free(b);
}

static st_status bind(void *pc, const st_params *kernel, const st_params *launch, CUmodule mod, void **out,
                      st_err *err) {
  msd_case *c = pc;
  msd_bound *b = calloc(1, sizeof *b);
  if (!b) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  b->c = c;
  st_status s;
  if ((s = st_mla_sparse_decode_config_from_params(kernel, launch, &b->cfg, err)) ||
      (s = st_mla_sparse_decode_check_fit(&b->cfg, &c->args, err)) ||
      (s = st_mla_sparse_decode_plan_make(&b->cfg, &c->args, c->dev.sm_count, &b->plan, err)))
    goto fail;
  CUresult rc = c->cu->cuModuleGetFunction(&b->main_fn, mod, ST_MLA_SPARSE_DECODE_MAIN_KERNEL);
  if (rc == CUDA_SUCCESS && b->plan.merge_block)
    rc = c->cu->cuModuleGetFunction(&b->merge_fn, mod, ST_MLA_SPARSE_DECODE_MERGE_KERNEL);
  if (rc != CUDA_SUCCESS) {
    s = st_cu_fail(c->cu, rc, "binding mla_sparse_decode variant", err);
    goto fail;
  }
  if ((s = st_case_workspace(c->cu, NULL, &b->ws, b->plan.workspace_bytes, err)) != ST_OK) goto fail;
  *out = b;
  return ST_OK;
fail:
  unbind(b);
  return s;
}

static st_status bind_runtime(void *pc, void *rt, void **out, st_err *err) {
  msd_case *c = pc;
  msd_bound *b = calloc(1, sizeof *b);
  if (!b) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  b->c = c;
  b->rt = rt;
  size_t bytes = 0;
  st_status s = st_mla_sparse_decode_workspace_size(rt, &c->args, &bytes);
  if (s == ST_OK) s = st_mla_sparse_decode_prepare(rt, &c->args);
  if (s != ST_OK) {
    st_err_format(err, "runtime: %s", st_last_error(rt));
    unbind(b);
    return s;
  }
  b->plan.workspace_bytes = bytes;
  if ((s = st_case_workspace(c->cu, rt, &b->ws, bytes, err)) != ST_OK) {
    unbind(b);
    return s;
  }
  *out = b;
  return ST_OK;
}

static st_status launch(void *pb, CUstream stream, st_err *err) {
  msd_bound *b = pb;
  if (b->rt) {
    st_status s = st_mla_sparse_decode(b->rt, &b->c->args, (void *)(uintptr_t)b->ws, b->plan.workspace_bytes, stream);
    return s == ST_OK ? ST_OK : st_fail(err, s, "runtime: %s", st_last_error(b->rt));
  }
  return st_mla_sparse_decode_launch(b->c->cu, b->main_fn, b->merge_fn, &b->plan, (void *)(uintptr_t)b->ws,
                                     b->plan.workspace_bytes, stream, err);
}

static int check(void *pc, double *worst, char *why, size_t cap) {
  const msd_case *c = pc;
  return st_ref_mla_sparse_decode_verify(&c->ref, c->ref_o, c->d_lse ? c->ref_lse : NULL, c->got_o,
                                         c->d_lse ? c->got_lse : NULL, ATTN_TOL, worst, why, cap);
}

static st_status verify(void *pb, CUstream stream, int *ok, double *max_err, char *msg, size_t cap, st_err *err) {
  msd_case *c = ((msd_bound *)pb)->c;
  const size_t n_lse = (size_t)c->B * (size_t)c->qlen * (size_t)c->Hq, n_o = n_lse * ST_MLA_DIM_V;
  /* Poison: NaN in o and lse, so an unwritten element fails the check. */
  const st_verify_out out = {
      .buf = {{c->d_o, c->got_o, n_o, 2, 0x7fc0u}, {c->d_lse, c->got_lse, n_lse, 4, 0x7fc00000u}},
      .check = check,
      .ctx = c,
      .item = "(row, head) pair"};
  return st_verify_twice(c->cu, stream, launch, pb, &out, ok, max_err, msg, cap, err);
}

static st_status cold_sets(void *pc, int n, st_err *err) {
  msd_case *c = pc;
  return st_cold_make(c->cu, &c->cold, n, err);
}

/* Input set i: indices i; a variant's own plan is made again for it. */
static st_status rotate(void *pb, int i, st_err *err) {
  msd_bound *b = pb;
  msd_case *c = b->c;
  const st_status s = st_cold_point(&c->cold, &c->args.indices, i, err);
  return s != ST_OK || b->rt ? s : st_mla_sparse_decode_plan_make(&b->cfg, &c->args, c->dev.sm_count, &b->plan, err);
}

static void set_pdl(void *pc, int on) { ((msd_case *)pc)->args.pdl = on; }

/* The valid entries of every row (topk_length applied). */
static double valid_entries(const msd_case *c) {
  double n = 0;
  for (int row = 0; row < c->B * c->qlen; row++) {
    const int32_t *idx = c->h_idx + (size_t)row * (size_t)c->topk;
    const int entries = st_ref_mla_row_entries(&c->ref, row);
    for (int e = 0; e < entries; e++) n += st_ref_mla_slot_valid(&c->ref, idx[e]);
  }
  return n;
}

/* Each valid entry's cache row once, the indices, q, o and lse. */
static double min_bytes(const void *pc) {
  const msd_case *c = pc;
  const double rows = (double)c->B * c->qlen;
  double bytes = valid_entries(c) * (double)c->row_bytes + rows * c->topk * 4;
  bytes += rows * c->Hq * (ST_MLA_DIM_QK + ST_MLA_DIM_V) * 2;
  if (c->want_lse) bytes += rows * c->Hq * 4;
  return bytes;
}

/* 2 x Hq x (576 + 512) per valid entry: q.k and p.v, as FlashMLA counts
 * them; at 128 heads that is ~420 FLOPs per fp8 cache byte, so the op is
 * compute-bound where enough heads share each row. */
static double flops(const void *pc) {
  const msd_case *c = pc;
  return 2.0 * c->Hq * (ST_MLA_DIM_QK + ST_MLA_DIM_V) * valid_entries(c);
}

const st_op_harness st_mla_sparse_decode_harness = {
    .op = ST_MLA_SPARSE_DECODE_OP,
    .case_create = case_create,
    .case_destroy = case_destroy,
    .dispatch_args = dispatch_args,
    .bind = bind,
    .bind_runtime = bind_runtime,
    .launch = launch,
    .verify = verify,
    .unbind = unbind,
    .cold_sets = cold_sets,
    .rotate = rotate,
    .set_pdl = set_pdl,
    .min_bytes = min_bytes,
    .flops = flops,
    .bench_iters = 40,
};
