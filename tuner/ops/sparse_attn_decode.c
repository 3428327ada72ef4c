/* tuner/ops/sparse_attn_decode.c - builds sparse_attn_decode cases and
 * checks variants on them. Inputs follow docs/method.md: a KV pool of
 * max(4096, min(B*ctx/128, 32768)) pages in the shape's layout, block tables
 * uniformly random over the pool, q uniform in [-1, 1) bf16 (optional shape
 * field q_log2: [-2^q_log2, 2^q_log2)), sm_scale
 * 1/sqrt(D); the K/V side and the selections (random, holes, local) as
 * ops/attn_inputs.h builds them for every attention op. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cold.h"
#include "op_harness.h"
#include "ops/attn_inputs.h"
#include "ops/case_inputs.h"
#include "ops/sparse_attn_decode.h"
#include "ops/tensor_check.h"
#include "random_fill.h"
#include "reference/sparse_attn_decode.h"
#include "verify_twice.h"

/* The relative L2 error design.md allows for attention outputs. */
#define ATTN_TOL 2e-2

typedef struct sad_case {
  const st_cu *cu;
  st_device_info dev;
  st_attn_kv_case kv;
  st_ref_sparse_attn_decode ref; /* host inputs; points at the h_* arrays */
  int B, qlen, Hq, topk, ctx, want_lse, q_log2, max_blocks;
  uint16_t *h_q;
  int32_t *h_idx, *h_bt, *h_seq;
  double *ref_o, *ref_lse;
  uint16_t *got_o;
  float *got_lse;
  CUdeviceptr d_q, d_idx, d_bt, d_seq, d_o, d_lse;
  st_cold_tables cold; /* --cold: the block tables of the other input sets */
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
  CUdeviceptr bufs[] = {c->d_q, c->d_idx, c->d_bt, c->d_seq, c->d_o, c->d_lse};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) c->cu->cuMemFree(bufs[i]);
  st_attn_kv_free(c->cu, &c->kv);
  st_cold_free(c->cu, &c->cold);
  void *host[] = {c->h_q, c->h_idx, c->h_bt, c->h_seq, c->ref_o, c->ref_lse, c->got_o, c->got_lse};
  for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) free(host[i]);
  free(c);
}

static st_status read_shape(sad_case *c, const st_params *shape, const char **sel, st_err *err) {
  st_status st;
  if ((st = st_attn_kv_read_shape(shape, &c->kv, sel, err)) ||
      (st = st_case_shape_int(shape, "B", 1, 65535, &c->B, err)) ||
      (st = st_case_shape_int(shape, "Hq", 1, 65535, &c->Hq, err)) ||
      (st = st_case_shape_int(shape, "ctx", 1, 1 << 24, &c->ctx, err)) ||
      (st = st_case_shape_int(shape, "qlen", 1, 4, &c->qlen, err)) ||
      (st = st_case_shape_int(shape, "topk", 1, 64, &c->topk, err)) ||
      (st = st_case_shape_int(shape, "lse", 0, 1, &c->want_lse, err)) ||
      (st_params_get(shape, "q_log2") && (st = st_case_shape_int(shape, "q_log2", -40, 40, &c->q_log2, err))))
    return st;
  if (c->Hq % c->kv.Hkv)
    return st_fail(err, ST_ERR_INVALID_ARG, "shape Hq=%d is not a multiple of Hkv=%d", c->Hq, c->kv.Hkv);
  return ST_OK;
}

/* q, block tables, lengths and selections on the host. */
static st_status fill_host(sad_case *c, const char *lens, const char *sel, int max_blocks, uint64_t seed, int threads,
                           st_err *err) {
  const size_t rows = (size_t)c->B * (size_t)c->qlen, Hkv = (size_t)c->kv.Hkv, D = (size_t)c->kv.D;
  c->h_q = malloc(rows * (size_t)c->Hq * D * 2);
  c->h_idx = malloc(Hkv * rows * (size_t)c->topk * 4);
  c->h_bt = malloc((size_t)c->B * (size_t)max_blocks * 4);
  c->h_seq = malloc((size_t)c->B * 4);
  c->ref_o = malloc(rows * (size_t)c->Hq * D * sizeof(double));
  c->ref_lse = malloc(rows * (size_t)c->Hq * sizeof(double));
  c->got_o = malloc(rows * (size_t)c->Hq * D * 2);
  c->got_lse = malloc(rows * (size_t)c->Hq * 4);
  if (!c->h_q || !c->h_idx || !c->h_bt || !c->h_seq || !c->ref_o || !c->ref_lse || !c->got_o || !c->got_lse)
    return st_fail(err, ST_ERR_NOMEM, "out of host memory for a case of %zu query rows", rows);
  const float q_amp = ldexpf(1.0f, c->q_log2);
  st_fill_uniform(c->h_q, ST_DTYPE_BF16, rows * (size_t)c->Hq * D, -q_amp, q_amp, seed ^ 0x71, threads);
  /* Each request's partial last block gets a page of its own (the top B
   * pages, where the pool has room) with NaN past the request's length:
   * copies of whole pages must not let those slots into the products. The
   * other visible entries draw from the pages below; entries past the
   * request's length are garbage (st_case_table_garbage). */
  const int64_t tails = (int64_t)c->B <= c->kv.pages / 4 ? c->B : 0;
  uint64_t rng = seed ^ 0x62;
  for (size_t i = 0; i < (size_t)c->B * (size_t)max_blocks; i++)
    c->h_bt[i] = (int32_t)st_rand_below(&rng, (uint64_t)(c->kv.pages - tails));
  st_status st = st_case_seq_lens(c->h_seq, c->B, c->ctx, lens, &rng, err);
  if (st != ST_OK) return st;
  st_case_table_garbage(c->h_bt, c->B, max_blocks, c->h_seq, c->kv.pages);
  for (int64_t r = 0; r < tails; r++) {
    const int len = c->h_seq[r], blk = (len - 1) / ST_BLOCK_TOKENS;
    if (len <= 0 || len % ST_BLOCK_TOKENS == 0 || blk >= max_blocks) continue;
    const int64_t page = c->kv.pages - 1 - r;
    c->h_bt[r * max_blocks + blk] = (int32_t)page;
    st_attn_kv_poison_tail(&c->kv, page, len % ST_BLOCK_TOKENS);
  }
  for (size_t g = 0; g < Hkv; g++)
    for (size_t row = 0; row < rows; row++) {
      const int r = (int)(row / (size_t)c->qlen), t = (int)(row % (size_t)c->qlen);
      st_attn_make_selection(c->h_idx + (g * rows + row) * (size_t)c->topk, c->topk, c->h_seq[r] - c->qlen + t,
                             max_blocks, sel, &rng);
    }
  return ST_OK;
}

static void fill_reference(sad_case *c, int max_blocks) {
  st_ref_sparse_attn_decode *ref = &c->ref;
  memset(ref, 0, sizeof *ref);
  ST_ATTN_KV_REF(ref, &c->kv);
  ref->R = c->B;
  ref->qlen = c->qlen;
  ref->Hq = c->Hq;
  ref->topk = c->topk;
  ref->bt_cols = max_blocks;
  ref->q = c->h_q;
  ref->topk_idx = c->h_idx;
  ref->block_table = c->h_bt;
  ref->seq_lens = c->h_seq;
  ref->sm_scale = st_attn_sm_scale(&c->kv);
}

static st_status upload_all(sad_case *c, int max_blocks, st_err *err) {
  const st_cu *cu = c->cu;
  const size_t rows = (size_t)c->B * (size_t)c->qlen, D = (size_t)c->kv.D;
  st_status st;
  if ((st = st_attn_kv_upload(cu, &c->kv, err)) ||
      (st = st_case_upload(cu, &c->d_q, c->h_q, rows * (size_t)c->Hq * D * 2, err)) ||
      (st = st_case_upload(cu, &c->d_idx, c->h_idx, (size_t)c->kv.Hkv * rows * (size_t)c->topk * 4, err)) ||
      (st = st_case_upload(cu, &c->d_bt, c->h_bt, (size_t)c->B * (size_t)max_blocks * 4, err)) ||
      (st = st_case_upload(cu, &c->d_seq, c->h_seq, (size_t)c->B * 4, err)))
    return st;
  ST_CU_TRY(cu, cu->cuMemAlloc(&c->d_o, rows * (size_t)c->Hq * D * 2), err);
  if (c->want_lse) ST_CU_TRY(cu, cu->cuMemAlloc(&c->d_lse, rows * (size_t)c->Hq * 4), err);
  return ST_OK;
}

/* c->args with every data pointer NULL. */
static void geometry_args(sad_case *c) {
  st_sparse_attn_decode_args *a = &c->args;
  st_sparse_attn_decode_args_init(a);
  const int64_t rows = (int64_t)c->B * c->qlen, Hkv = c->kv.Hkv, D = c->kv.D;
  st_tensor_contiguous(&a->q, NULL, ST_DTYPE_BF16, 3, (int64_t[]){rows, c->Hq, D});
  ST_ATTN_KV_ARGS(a, &c->kv);
  st_tensor_contiguous(&a->topk_idx, NULL, ST_DTYPE_INT32, 3, (int64_t[]){Hkv, rows, c->topk});
  st_tensor_contiguous(&a->block_table, NULL, ST_DTYPE_INT32, 2, (int64_t[]){c->B, c->max_blocks});
  st_tensor_contiguous(&a->seq_lens, NULL, ST_DTYPE_INT32, 1, (int64_t[]){c->B});
  st_tensor_contiguous(&a->o, NULL, ST_DTYPE_BF16, 3, (int64_t[]){rows, c->Hq, D});
  if (c->want_lse) st_tensor_contiguous(&a->lse, NULL, ST_DTYPE_FP32, 2, (int64_t[]){rows, c->Hq});
  a->sm_scale = (float)st_attn_sm_scale(&c->kv);
  a->qlen = c->qlen;
  a->max_context = c->ctx;
}

/* What a shape makes of a call, for case_create and dispatch_args alike:
 * the shape's fields (*sel: its selections), the pool's pages and layout
 * (grown where `cold`, for an L2 of l2_bytes) and c->args (geometry_args). */
static st_status read_geometry(sad_case *c, const st_params *shape, int cold, int64_t l2_bytes, const char **sel,
                               st_err *err) {
  const st_status st = read_shape(c, shape, sel, err);
  if (st != ST_OK) return st;
  c->max_blocks = (c->ctx + ST_BLOCK_TOKENS - 1) / ST_BLOCK_TOKENS;
  int64_t pages = (int64_t)c->B * c->max_blocks;
  if (pages > 32768) pages = 32768;
  if (pages < 4096) pages = 4096;
  st_attn_kv_layout(&c->kv, st_cold_pool_pages(cold, pages, st_attn_kv_page_bytes(&c->kv), l2_bytes));
  geometry_args(c);
  return ST_OK;
}

/* Points c->args at the uploaded buffers (lse: 0 when not wanted). */
static void point_args(sad_case *c) {
  st_sparse_attn_decode_args *a = &c->args;
  a->q.data = (void *)(uintptr_t)c->d_q;
  ST_ATTN_KV_POINT(a, &c->kv);
  a->topk_idx.data = (void *)(uintptr_t)c->d_idx;
  a->block_table.data = (void *)(uintptr_t)c->d_bt;
  a->seq_lens.data = (void *)(uintptr_t)c->d_seq;
  a->o.data = (void *)(uintptr_t)c->d_o;
  a->lse.data = (void *)(uintptr_t)c->d_lse;
}

static st_status case_create(const st_cu *cu, const st_device_info *dev, const st_params *shape,
                             const st_case_opts *o, void **out, st_err *err) {
  const uint64_t seed = o->seed;
  const int threads = o->threads;
  sad_case *c = calloc(1, sizeof *c);
  if (!c) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  c->cu = cu;
  c->dev = *dev;
  const char *sel = NULL;
  st_status st = read_geometry(c, shape, o->cold, dev->l2_bytes, &sel, err);
  if (st != ST_OK) goto fail;
  const int max_blocks = c->max_blocks;
  if ((st = st_attn_kv_fill(&c->kv, seed, threads, err)) ||
      (st = fill_host(c, st_params_get(shape, "lens"), sel, max_blocks, seed, threads, err)))
    goto fail;
  fill_reference(c, max_blocks);
  if (st_ref_sparse_attn_decode_compute(&c->ref, c->ref_o, c->ref_lse, threads) != 0) {
    st = st_fail(err, ST_ERR_NOMEM, "the reference could not run (threads or memory)");
    goto fail;
  }
  if ((st = upload_all(c, max_blocks, err)) != ST_OK) goto fail;
  point_args(c);
  c->cold = (st_cold_tables){
      .own = c->d_bt, .entries = (size_t)c->B * (size_t)max_blocks, .pages = c->kv.pages, .seed = seed};
  if ((st = st_sparse_attn_decode_check_args(&c->args, err)) != ST_OK) goto fail;
  *out = c;
  return ST_OK;
fail:
  case_destroy(c);
  return st;
}

/* The pool has a warm case's pages: a cold case's larger pool changes no
 * field of the key and no check. */
static st_status dispatch_args(const st_params *shape, void *args, st_err *err) {
  sad_case *c = calloc(1, sizeof *c);
  if (!c) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  const char *sel = NULL;
  const st_status st = read_geometry(c, shape, 0, 0, &sel, err);
  if (st == ST_OK) {
    st_sparse_attn_decode_args *a = args;
    *a = c->args;
    st_tensor *const t[] = {&a->q,        &a->k_cache,     &a->v_cache,  &a->k_scales, &a->v_scales,
                            &a->topk_idx, &a->block_table, &a->seq_lens, &a->o,        &a->lse};
    st_case_stand_ins(t, sizeof t / sizeof t[0]);
  }
  case_destroy(c);
  return st;
}

static void unbind(void *p) {
  sad_bound *b = p;
  if (!b) return;
  if (b->ws) b->c->cu->cuMemFree(b->ws);
  free(b);
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
  if ((s = st_case_workspace(c->cu, NULL, &b->ws, b->plan.workspace_bytes, err)) != ST_OK) goto fail;
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
  sad_bound *b = pb;
  if (b->rt) {
    st_status s = st_sparse_attn_decode(b->rt, &b->c->args, (void *)(uintptr_t)b->ws, b->plan.workspace_bytes, stream);
    return s == ST_OK ? ST_OK : st_fail(err, s, "runtime: %s", st_last_error(b->rt));
  }
  return st_sparse_attn_decode_launch(b->c->cu, b->main_fn, b->merge_fn, &b->plan, (void *)(uintptr_t)b->ws,
                                      b->plan.workspace_bytes, stream, err);
}

static int check(void *pc, double *worst, char *why, size_t cap) {
  const sad_case *c = pc;
  return st_ref_sparse_attn_decode_verify(&c->ref, c->ref_o, c->d_lse ? c->ref_lse : NULL, c->got_o,
                                          c->d_lse ? c->got_lse : NULL, ATTN_TOL, worst, why, cap);
}

static st_status verify(void *pb, CUstream stream, int *ok, double *max_err, char *msg, size_t cap, st_err *err) {
  sad_case *c = ((sad_bound *)pb)->c;
  const size_t n_lse = (size_t)c->ref.R * (size_t)c->ref.qlen * (size_t)c->ref.Hq, n_o = n_lse * (size_t)c->ref.D;
  /* Poison: NaN in o and lse, so an unwritten element fails the check. */
  const st_verify_out out = {
      .buf = {{c->d_o, c->got_o, n_o, 2, 0x7fc0u}, {c->d_lse, c->got_lse, n_lse, 4, 0x7fc00000u}},
      .check = check,
      .ctx = c,
      .item = "(row, head) pair"};
  return st_verify_twice(c->cu, stream, launch, pb, &out, ok, max_err, msg, cap, err);
}

static st_status cold_sets(void *pc, int n, st_err *err) {
  sad_case *c = pc;
  return st_cold_make(c->cu, &c->cold, n, err);
}

/* Input set i: block table i; a variant's own plan is made again for it. */
static st_status rotate(void *pb, int i, st_err *err) {
  sad_bound *b = pb;
  sad_case *c = b->c;
  const st_status s = st_cold_point(&c->cold, &c->args.block_table, i, err);
  return s != ST_OK || b->rt ? s : st_sparse_attn_decode_plan_make(&b->cfg, &c->args, c->dev.sm_count, &b->plan, err);
}

/* The selected K and V blocks the op must read (whole blocks, as
 * docs/method.md counts them), q, o and lse. */
static void set_pdl(void *pc, int on) { ((sad_case *)pc)->args.pdl = on; }

static double min_bytes(const void *pc) {
  const sad_case *c = pc;
  const st_ref_sparse_attn_decode *r = &c->ref;
  const double eb = st_dtype_bytes(r->kv_dtype), rows = (double)r->R * r->qlen;
  double blocks = 0;
  for (int g = 0; g < r->Hkv; g++)
    for (int row = 0; row < (int)rows; row++) {
      const int pos = r->seq_lens[row / r->qlen] - r->qlen + row % r->qlen;
      blocks += st_attn_selected_blocks(r->topk_idx + ((size_t)g * (size_t)rows + (size_t)row) * (size_t)r->topk,
                                        r->topk, pos);
    }
  double bytes = blocks * ST_BLOCK_TOKENS * r->D * 2 * eb;
  bytes += rows * r->Hq * r->D * 2 * 2; /* q and o */
  if (c->want_lse) bytes += rows * r->Hq * 4;
  return bytes;
}

const st_op_harness st_sparse_attn_decode_harness = {
    .op = ST_SPARSE_ATTN_DECODE_OP,
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
    .flops = NULL,
    .bench_iters = 40,
};
