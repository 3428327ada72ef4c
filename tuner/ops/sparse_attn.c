/* tuner/ops/sparse_attn.c - builds sparse_attn (prefill) cases and checks
 * variants on them. A shape lists its requests as "q_len:prefix;..."
 * (seq_len = prefix + q_len); the KV pool holds max(4096, min(blocks of all
 * requests, 32768)) pages in the shape's layout, block tables are uniformly
 * random over it (request 0's last block shares block 0's page), q uniform in [-1, 1) bf16, sm_scale 1/sqrt(D); the K/V
 * side and the selections (random, holes, local: one row per query token and
 * kv head, as the indexer returns them) come from ops/attn_inputs.h. A
 * variant is verified twice: launched, then as a CUDA graph replay. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cold.h"
#include "op_harness.h"
#include "ops/attn_inputs.h"
#include "ops/case_inputs.h"
#include "ops/sparse_attn.h"
#include "ops/tensor_check.h"
#include "random_fill.h"
#include "reference/sparse_attn.h"
#include "timing.h"
#include "verify_twice.h"

/* The relative L2 error design.md allows for attention outputs. */
#define ATTN_TOL 2e-2

typedef struct sa_case {
  const st_cu *cu;
  st_device_info dev;
  st_attn_kv_case kv;
  st_ref_sparse_attn ref; /* host inputs; points at the h_* arrays */
  int R, total_q, Hq, topk, want_lse, max_context, max_blocks;
  uint16_t *h_q;
  int32_t *h_idx, *h_bt, *h_cu, *h_seq;
  double *ref_o, *ref_lse;
  uint16_t *got_o;
  float *got_lse;
  CUdeviceptr d_q, d_idx, d_bt, d_cu, d_seq, d_o, d_lse;
  st_sparse_attn_args args;
  st_cold_tables cold; /* --cold: the block tables of the other input sets */
  st_side_stream side; /* for variants with overlap; made at the first such bind */
} sa_case;

typedef struct sa_bound {
  sa_case *c;
  st_handle *rt; /* not NULL: launch through the runtime's dispatch */
  st_sparse_attn_config cfg;
  st_sparse_attn_plan plan;
  CUfunction main_fn, merge_fn; /* merge_fn: block-major variants only */
  CUdeviceptr ws;
} sa_bound;

static void case_destroy(void *p) {
  sa_case *c = p;
  if (!c) return;
  CUdeviceptr bufs[] = {c->d_q, c->d_idx, c->d_bt, c->d_cu, c->d_seq, c->d_o, c->d_lse};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) c->cu->cuMemFree(bufs[i]);
  st_attn_kv_free(c->cu, &c->kv);
  st_cold_free(c->cu, &c->cold);
  st_side_stream_destroy(c->cu, &c->side);
  void *host[] = {c->h_q, c->h_idx, c->h_bt, c->h_cu, c->h_seq, c->ref_o, c->ref_lse, c->got_o, c->got_lse};
  for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) free(host[i]);
  free(c);
}

static st_status parse_requests(sa_case *c, const char *reqs, st_err *err) {
  return st_case_requests(reqs, &c->h_cu, &c->h_seq, &c->R, &c->total_q, &c->max_context, err);
}

static st_status read_shape(sa_case *c, const st_params *shape, const char **sel, st_err *err) {
  int B = 0;
  st_status st;
  if ((st = st_attn_kv_read_shape(shape, &c->kv, sel, err)) ||
      (st = st_case_shape_int(shape, "B", 1, 1 << 24, &B, err)) ||
      (st = st_case_shape_int(shape, "Hq", 1, 65535, &c->Hq, err)) ||
      (st = st_case_shape_int(shape, "topk", 1, 64, &c->topk, err)) ||
      (st = st_case_shape_int(shape, "lse", 0, 1, &c->want_lse, err)) ||
      (st = parse_requests(c, st_params_get(shape, "reqs"), err)))
    return st;
  if (B != c->total_q)
    return st_fail(err, ST_ERR_INVALID_ARG, "shape B=%d is not the %d query tokens of its requests", B, c->total_q);
  if (c->Hq % c->kv.Hkv)
    return st_fail(err, ST_ERR_INVALID_ARG, "shape Hq=%d is not a multiple of Hkv=%d", c->Hq, c->kv.Hkv);
  return ST_OK;
}

/* Position of query token i (binary search of cu_seqlens_q). */
static int token_position(const sa_case *c, int i, int *request) {
  int lo = 0, hi = c->R;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (c->h_cu[mid] <= i)
      lo = mid;
    else
      hi = mid;
  }
  *request = lo;
  return c->h_seq[lo] - (c->h_cu[lo + 1] - c->h_cu[lo]) + (i - c->h_cu[lo]);
}

static st_status fill_host(sa_case *c, const char *sel, int max_blocks, uint64_t seed, int threads, st_err *err) {
  const size_t rows = (size_t)c->total_q, Hkv = (size_t)c->kv.Hkv, D = (size_t)c->kv.D;
  c->h_q = malloc(rows * (size_t)c->Hq * D * 2);
  c->h_idx = malloc(Hkv * rows * (size_t)c->topk * 4);
  c->h_bt = malloc((size_t)c->R * (size_t)max_blocks * 4);
  c->ref_o = malloc(rows * (size_t)c->Hq * D * sizeof(double));
  c->ref_lse = malloc(rows * (size_t)c->Hq * sizeof(double));
  c->got_o = malloc(rows * (size_t)c->Hq * D * 2);
  c->got_lse = malloc(rows * (size_t)c->Hq * 4);
  if (!c->h_q || !c->h_idx || !c->h_bt || !c->ref_o || !c->ref_lse || !c->got_o || !c->got_lse)
    return st_fail(err, ST_ERR_NOMEM, "out of host memory for a case of %zu query tokens", rows);
  st_fill_uniform(c->h_q, ST_DTYPE_BF16, rows * (size_t)c->Hq * D, -1.0f, 1.0f, seed ^ 0x71, threads);
  uint64_t rng = seed ^ 0x62;
  for (size_t i = 0; i < (size_t)c->R * (size_t)max_blocks; i++)
    c->h_bt[i] = (int32_t)st_rand_below(&rng, (uint64_t)c->kv.pages);
  /* Two blocks of request 0 on one page (random tables do it by chance; a
   * kernel that merges blocks by page mixes up their positions). */
  const int nb0 = (c->h_seq[0] + ST_BLOCK_TOKENS - 1) / ST_BLOCK_TOKENS;
  if (nb0 >= 2) c->h_bt[nb0 - 1] = c->h_bt[0];
  st_case_table_garbage(c->h_bt, c->R, max_blocks, c->h_seq, c->kv.pages);
  for (size_t g = 0; g < Hkv; g++)
    for (size_t i = 0; i < rows; i++) {
      int r;
      const int pos = token_position(c, (int)i, &r);
      st_attn_make_selection(c->h_idx + (g * rows + i) * (size_t)c->topk, c->topk, pos, max_blocks, sel, &rng);
    }
  return ST_OK;
}

static void fill_reference(sa_case *c, int max_blocks) {
  st_ref_sparse_attn *ref = &c->ref;
  memset(ref, 0, sizeof *ref);
  ST_ATTN_KV_REF(ref, &c->kv);
  ref->R = c->R;
  ref->total_q = c->total_q;
  ref->Hq = c->Hq;
  ref->topk = c->topk;
  ref->bt_cols = max_blocks;
  ref->q = c->h_q;
  ref->topk_idx = c->h_idx;
  ref->block_table = c->h_bt;
  ref->cu_seqlens_q = c->h_cu;
  ref->seq_lens = c->h_seq;
  ref->sm_scale = st_attn_sm_scale(&c->kv);
}

static st_status upload_all(sa_case *c, int max_blocks, st_err *err) {
  const st_cu *cu = c->cu;
  const size_t rows = (size_t)c->total_q, D = (size_t)c->kv.D;
  st_status st;
  if ((st = st_attn_kv_upload(cu, &c->kv, err)) ||
      (st = st_case_upload(cu, &c->d_q, c->h_q, rows * (size_t)c->Hq * D * 2, err)) ||
      (st = st_case_upload(cu, &c->d_idx, c->h_idx, (size_t)c->kv.Hkv * rows * (size_t)c->topk * 4, err)) ||
      (st = st_case_upload(cu, &c->d_bt, c->h_bt, (size_t)c->R * (size_t)max_blocks * 4, err)) ||
      (st = st_case_upload(cu, &c->d_cu, c->h_cu, (size_t)(c->R + 1) * 4, err)) ||
      (st = st_case_upload(cu, &c->d_seq, c->h_seq, (size_t)c->R * 4, err)))
    return st;
  ST_CU_TRY(cu, cu->cuMemAlloc(&c->d_o, rows * (size_t)c->Hq * D * 2), err);
  if (c->want_lse) ST_CU_TRY(cu, cu->cuMemAlloc(&c->d_lse, rows * (size_t)c->Hq * 4), err);
  return ST_OK;
}

/* c->args with every data pointer NULL. */
static void geometry_args(sa_case *c) {
  st_sparse_attn_args *a = &c->args;
  st_sparse_attn_args_init(a);
  const int64_t rows = c->total_q, Hkv = c->kv.Hkv, D = c->kv.D;
  st_tensor_contiguous(&a->q, NULL, ST_DTYPE_BF16, 3, (int64_t[]){rows, c->Hq, D});
  ST_ATTN_KV_ARGS(a, &c->kv);
  st_tensor_contiguous(&a->topk_idx, NULL, ST_DTYPE_INT32, 3, (int64_t[]){Hkv, rows, c->topk});
  st_tensor_contiguous(&a->block_table, NULL, ST_DTYPE_INT32, 2, (int64_t[]){c->R, c->max_blocks});
  st_tensor_contiguous(&a->cu_seqlens_q, NULL, ST_DTYPE_INT32, 1, (int64_t[]){c->R + 1});
  st_tensor_contiguous(&a->seq_lens, NULL, ST_DTYPE_INT32, 1, (int64_t[]){c->R});
  st_tensor_contiguous(&a->o, NULL, ST_DTYPE_BF16, 3, (int64_t[]){rows, c->Hq, D});
  if (c->want_lse) st_tensor_contiguous(&a->lse, NULL, ST_DTYPE_FP32, 2, (int64_t[]){rows, c->Hq});
  a->sm_scale = (float)st_attn_sm_scale(&c->kv);
  a->max_context = c->max_context;
}

/* What a shape makes of a call, for case_create and dispatch_args alike:
 * the shape's fields and requests (*sel: its selections), the pool's pages
 * and layout (grown where `cold`, for an L2 of l2_bytes) and c->args
 * (geometry_args). On failure c holds what was made: case_destroy frees it. */
static st_status read_geometry(sa_case *c, const st_params *shape, int cold, int64_t l2_bytes, const char **sel,
                               st_err *err) {
  const st_status st = read_shape(c, shape, sel, err);
  if (st != ST_OK) return st;
  c->max_blocks = (c->max_context + ST_BLOCK_TOKENS - 1) / ST_BLOCK_TOKENS;
  int64_t pages = 0;
  for (int r = 0; r < c->R; r++) pages += (c->h_seq[r] + ST_BLOCK_TOKENS - 1) / ST_BLOCK_TOKENS;
  if (pages > 32768) pages = 32768;
  if (pages < 4096) pages = 4096;
  st_attn_kv_layout(&c->kv, st_cold_pool_pages(cold, pages, st_attn_kv_page_bytes(&c->kv), l2_bytes));
  geometry_args(c);
  return ST_OK;
}

/* Points c->args at the uploaded buffers (lse: 0 when not wanted). */
static void point_args(sa_case *c) {
  st_sparse_attn_args *a = &c->args;
  a->q.data = (void *)(uintptr_t)c->d_q;
  ST_ATTN_KV_POINT(a, &c->kv);
  a->topk_idx.data = (void *)(uintptr_t)c->d_idx;
  a->block_table.data = (void *)(uintptr_t)c->d_bt;
  a->cu_seqlens_q.data = (void *)(uintptr_t)c->d_cu;
  a->seq_lens.data = (void *)(uintptr_t)c->d_seq;
  a->o.data = (void *)(uintptr_t)c->d_o;
  a->lse.data = (void *)(uintptr_t)c->d_lse;
}

static st_status case_create(const st_cu *cu, const st_device_info *dev, const st_params *shape,
                             const st_case_opts *o, void **out, st_err *err) {
  const uint64_t seed = o->seed;
  const int threads = o->threads;
  sa_case *c = calloc(1, sizeof *c);
  if (!c) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  c->cu = cu;
  c->dev = *dev;
  const char *sel = NULL;
  st_status st = read_geometry(c, shape, o->cold, dev->l2_bytes, &sel, err);
  if (st != ST_OK) goto fail;
  const int max_blocks = c->max_blocks;
  if ((st = st_attn_kv_fill(&c->kv, seed, threads, err)) || (st = fill_host(c, sel, max_blocks, seed, threads, err)))
    goto fail;
  fill_reference(c, max_blocks);
  if (st_ref_sparse_attn_compute(&c->ref, c->ref_o, c->ref_lse, threads) != 0) {
    st = st_fail(err, ST_ERR_NOMEM, "the reference could not run (threads or memory)");
    goto fail;
  }
  if ((st = upload_all(c, max_blocks, err)) != ST_OK) goto fail;
  point_args(c);
  c->cold = (st_cold_tables){
      .own = c->d_bt, .entries = (size_t)c->R * (size_t)max_blocks, .pages = c->kv.pages, .seed = seed};
  if ((st = st_sparse_attn_check_args(&c->args, err)) != ST_OK) goto fail;
  *out = c;
  return ST_OK;
fail:
  case_destroy(c);
  return st;
}

/* The pool has a warm case's pages: a cold case's larger pool changes no
 * field of the key and no check. */
static st_status dispatch_args(const st_params *shape, void *args, st_err *err) {
  sa_case *c = calloc(1, sizeof *c);
  if (!c) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  const char *sel = NULL;
  const st_status st = read_geometry(c, shape, 0, 0, &sel, err);
  if (st == ST_OK) {
    st_sparse_attn_args *a = args;
    *a = c->args;
    st_tensor *const t[] = {&a->q,           &a->k_cache,      &a->v_cache,  &a->k_scales, &a->v_scales, &a->topk_idx,
                            &a->block_table, &a->cu_seqlens_q, &a->seq_lens, &a->o,        &a->lse};
    st_case_stand_ins(t, sizeof t / sizeof t[0]);
  }
  case_destroy(c);
  return st;
}

static void unbind(void *p) {
  sa_bound *b = p;
  if (!b) return;
  if (b->ws) b->c->cu->cuMemFree(b->ws);
  free(b);
}

static st_status bind(void *pc, const st_params *kernel, const st_params *launch, CUmodule mod, void **out,
                      st_err *err) {
  sa_case *c = pc;
  sa_bound *b = st_case_zalloc_aligned(_Alignof(sa_bound), sizeof *b);
  if (!b) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  b->c = c;
  st_status s;
  if ((s = st_sparse_attn_config_from_params(kernel, launch, &b->cfg, err)) ||
      (s = st_sparse_attn_check_fit(&b->cfg, &c->args, err)) ||
      (s = st_sparse_attn_plan_make(&b->cfg, &c->args, c->dev.sm_count, &b->plan, err)))
    goto fail;
  if (b->plan.overlap && !c->side.stream && (s = st_side_stream_create(c->cu, &c->side, err)) != ST_OK) goto fail;
  CUresult rc = c->cu->cuModuleGetFunction(&b->main_fn, mod, ST_SPARSE_ATTN_MAIN_KERNEL);
  if (rc == CUDA_SUCCESS && b->cfg.algo == ST_SPARSE_ATTN_BLOCK)
    rc = c->cu->cuModuleGetFunction(&b->merge_fn, mod, ST_SPARSE_ATTN_MERGE_KERNEL);
  if (rc != CUDA_SUCCESS) {
    s = st_cu_fail(c->cu, rc, "binding sparse_attn variant", err);
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
  sa_case *c = pc;
  sa_bound *b = st_case_zalloc_aligned(_Alignof(sa_bound), sizeof *b);
  if (!b) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  b->c = c;
  b->rt = rt;
  size_t bytes = 0;
  st_status s = st_sparse_attn_workspace_size(rt, &c->args, &bytes);
  if (s == ST_OK) s = st_sparse_attn_prepare(rt, &c->args);
  if (s != ST_OK) {
    st_err_format(err, "runtime: %s", st_last_error(rt));
    unbind(b);
    return s;
  }
  if ((s = st_case_workspace(c->cu, rt, &b->ws, bytes, err)) != ST_OK) {
    unbind(b);
    return s;
  }
  b->plan.workspace_bytes = bytes;
  *out = b;
  return ST_OK;
}

static st_status launch(void *pb, CUstream stream, st_err *err) {
  sa_bound *b = pb;
  if (b->rt) {
    st_status s = st_sparse_attn(b->rt, &b->c->args, (void *)(uintptr_t)b->ws, b->plan.workspace_bytes, stream);
    return s == ST_OK ? ST_OK : st_fail(err, s, "runtime: %s", st_last_error(b->rt));
  }
  return st_sparse_attn_launch(b->c->cu, b->main_fn, b->merge_fn, &b->plan, (void *)(uintptr_t)b->ws,
                               b->plan.workspace_bytes, stream, &b->c->side, err);
}

static int check(void *pc, double *worst, char *why, size_t cap) {
  const sa_case *c = pc;
  return st_ref_sparse_attn_verify(&c->ref, c->ref_o, c->d_lse ? c->ref_lse : NULL, c->got_o,
                                   c->d_lse ? c->got_lse : NULL, ATTN_TOL, worst, why, cap);
}

/* The second launch, a CUDA graph replay, also checks that the overlapped
 * chunks' fork onto the side stream and join back hold in a graph. */
static st_status verify(void *pb, CUstream stream, int *ok, double *max_err, char *msg, size_t cap, st_err *err) {
  sa_case *c = ((sa_bound *)pb)->c;
  const size_t n_lse = (size_t)c->total_q * (size_t)c->Hq, n_o = n_lse * (size_t)c->kv.D;
  /* Poison: NaN in o and lse, so an unwritten element fails the check. */
  const st_verify_out out = {
      .buf = {{c->d_o, c->got_o, n_o, 2, 0x7fc0u}, {c->d_lse, c->got_lse, n_lse, 4, 0x7fc00000u}},
      .check = check,
      .ctx = c,
      .item = "(token, head) pair"};
  return st_verify_twice(c->cu, stream, launch, pb, &out, ok, max_err, msg, cap, err);
}

static st_status cold_sets(void *pc, int n, st_err *err) {
  sa_case *c = pc;
  return st_cold_make(c->cu, &c->cold, n, err);
}

/* Input set i: block table i; a variant's own plan is made again for it. */
static st_status rotate(void *pb, int i, st_err *err) {
  sa_bound *b = pb;
  sa_case *c = b->c;
  const st_status s = st_cold_point(&c->cold, &c->args.block_table, i, err);
  return s != ST_OK || b->rt ? s : st_sparse_attn_plan_make(&b->cfg, &c->args, c->dev.sm_count, &b->plan, err);
}

/* Prefill is compute-bound: the bytes are each distinct selected block of a
 * request (per kv head) once, q, o and lse; GB/s figures are for reference
 * only, the anchors compare FLOPs. */
static double min_bytes(const void *pc) {
  const sa_case *c = pc;
  const st_ref_sparse_attn *r = &c->ref;
  const double eb = st_dtype_bytes(r->kv_dtype);
  double blocks = 0;
  for (int g = 0; g < r->Hkv; g++)
    for (int i = 0; i < r->total_q; i++) {
      int req;
      const int pos = token_position(c, i, &req);
      /* A block counts once per request: when the query's own block first
       * appears (its first token) or, for earlier blocks, at the request's
       * first query token; a lower bound either way. */
      if (i == r->cu_seqlens_q[req])
        blocks += st_attn_selected_blocks(r->topk_idx + ((size_t)g * (size_t)r->total_q + (size_t)i) * (size_t)r->topk,
                                          r->topk, pos);
      else if (pos % ST_BLOCK_TOKENS == 0)
        blocks += 1;
    }
  double bytes = blocks * ST_BLOCK_TOKENS * r->D * 2 * eb;
  bytes += (double)r->total_q * r->Hq * r->D * 2 * 2; /* q and o */
  if (c->want_lse) bytes += (double)r->total_q * r->Hq * 4;
  return bytes;
}

/* 4 * D * G * 128 per (query token, kv head, selected visible block): whole
 * 128-token blocks, as docs/method.md counts them. */
static double flops(const void *pc) {
  const sa_case *c = pc;
  const st_ref_sparse_attn *r = &c->ref;
  double blocks = 0;
  for (int g = 0; g < r->Hkv; g++)
    for (int i = 0; i < r->total_q; i++) {
      int req;
      const int pos = token_position(c, i, &req);
      blocks += st_attn_selected_blocks(r->topk_idx + ((size_t)g * (size_t)r->total_q + (size_t)i) * (size_t)r->topk,
                                        r->topk, pos);
    }
  const int group = r->Hq / r->Hkv; /* q heads a kv head */
  return blocks * 4.0 * r->D * group * ST_BLOCK_TOKENS;
}

const st_op_harness st_sparse_attn_harness = {
    .op = ST_SPARSE_ATTN_OP,
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
    .min_bytes = min_bytes,
    .flops = flops,
    .bench_iters = 10,
};
