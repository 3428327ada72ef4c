/* tuner/ops/dsa_index_decode.c - builds dsa_index_decode cases and checks
 * variants on them. Inputs as an engine builds them (docs/method.md): an
 * index-K pool of the shape's pages, at least four L2s of them (and a
 * page for each logical page of the batch, up to 2^18 pages), block tables
 * uniformly random over the pool, fp8 values uniform in [-4, 4) with a
 * positive fp32 scale per token in [2^-3, 2^1), fp8 q in [-4, 4), and
 * weights in [-1, 1): both signs, as the folded-in scales give them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cold.h"
#include "op_harness.h"
#include "ops/case_inputs.h"
#include "ops/dsa_index_decode.h"
#include "ops/tensor_check.h"
#include "random_fill.h"
#include "reference/dsa_index_decode.h"
#include "verify_twice.h"

#define HEAD_DIM ST_DSA_INDEX_DECODE_HEAD_DIM
/* Pool pages: at least this many L2s, at most this many pages. */
#define POOL_L2S 4
#define POOL_MAX_PAGES (1 << 18)
#define POOL_MIN_PAGES 4096

typedef struct dsa_case {
  const st_cu *cu;
  st_device_info dev;
  st_ref_dsa_index_decode ref; /* host inputs; points at the h_* arrays */
  uint8_t *h_q, *h_pool;
  float *h_w;
  int32_t *h_bt, *h_seq;
  double *logits; /* reference logits [R*qlen][max_context] */
  int32_t *h_out; /* copy of the kernel's output */
  CUdeviceptr d_q, d_w, d_pool, d_bt, d_seq, d_out;
  st_cold_tables cold; /* --cold: the block tables of the other input sets */
  st_dsa_index_decode_args args;
} dsa_case;

typedef struct dsa_bound {
  dsa_case *c;
  st_handle *rt; /* not NULL: launch through the runtime's dispatch */
  st_dsa_index_decode_config cfg;
  st_dsa_index_decode_plan plan;
  CUfunction main_fn, merge_fn;
  CUdeviceptr ws;
} dsa_bound;

static void case_destroy(void *p) {
  dsa_case *c = p;
  if (!c) return;
  const st_cu *cu = c->cu;
  CUdeviceptr bufs[] = {c->d_q, c->d_w, c->d_pool, c->d_bt, c->d_seq, c->d_out};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) cu->cuMemFree(bufs[i]);
  st_cold_free(cu, &c->cold);
  free(c->h_q);
  free(c->h_w);
  free(c->h_pool);
  free(c->h_bt);
  free(c->h_seq);
  free(c->logits);
  free(c->h_out);
  free(c);
}

/* What a shape makes of a call, for case_create and dispatch_args alike:
 * its sizes, the pool's pages (for an L2 of l2_bytes, grown where `cold`)
 * and the arguments with every data pointer NULL. */
typedef struct dsa_geometry {
  int B, qlen, H, topk, page, ctx, max_pages;
  int64_t pages, page_stride;
  st_dsa_index_decode_args args;
} dsa_geometry;

static st_status read_geometry(const st_params *shape, int cold, int64_t l2_bytes, dsa_geometry *g, st_err *err) {
  memset(g, 0, sizeof *g);
  st_status s;
  if ((s = st_case_shape_int(shape, "H", 1, ST_DSA_INDEX_DECODE_MAX_HEADS, &g->H, err)) ||
      (s = st_case_shape_int(shape, "qlen", 1, ST_DSA_INDEX_DECODE_MAX_QLEN, &g->qlen, err)) ||
      (s = st_case_shape_int(shape, "topk", 1, ST_DSA_INDEX_DECODE_MAX_TOPK, &g->topk, err)) ||
      (s = st_case_shape_int(shape, "page", 1, ST_DSA_INDEX_DECODE_MAX_PAGE_SIZE, &g->page, err)) ||
      (s = st_case_shape_int(shape, "B", 1, 65535, &g->B, err)) ||
      (s = st_case_shape_int(shape, "ctx", 1, ST_DSA_INDEX_DECODE_MAX_CONTEXT, &g->ctx, err)))
    return s;
  g->max_pages = (g->ctx + g->page - 1) / g->page;
  const int64_t page_bytes = (int64_t)g->page * (HEAD_DIM + 4);
  g->page_stride = (page_bytes + 15) / 16 * 16;
  int64_t pages = (int64_t)g->B * g->max_pages;
  if (pages > POOL_MAX_PAGES) pages = POOL_MAX_PAGES;
  const int64_t l2_pages = POOL_L2S * l2_bytes / g->page_stride;
  if (pages < l2_pages) pages = l2_pages;
  if (pages < POOL_MIN_PAGES) pages = POOL_MIN_PAGES;
  g->pages = st_cold_pool_pages(cold, pages, g->page_stride, l2_bytes);
  const int64_t rows = (int64_t)g->B * g->qlen;
  st_dsa_index_decode_args *a = &g->args;
  st_dsa_index_decode_args_init(a);
  st_tensor_contiguous(&a->q, NULL, ST_DTYPE_FP8_E4M3, 3, (int64_t[]){rows, g->H, HEAD_DIM});
  st_tensor_contiguous(&a->weights, NULL, ST_DTYPE_FP32, 2, (int64_t[]){rows, g->H});
  st_tensor_contiguous(&a->k_cache, NULL, ST_DTYPE_FP8_E4M3, 2, (int64_t[]){g->pages, page_bytes});
  a->k_cache.stride[0] = g->page_stride;
  st_tensor_contiguous(&a->block_table, NULL, ST_DTYPE_INT32, 2, (int64_t[]){g->B, g->max_pages});
  st_tensor_contiguous(&a->seq_lens, NULL, ST_DTYPE_INT32, 1, (int64_t[]){g->B});
  st_tensor_contiguous(&a->topk_idx, NULL, ST_DTYPE_INT32, 2, (int64_t[]){rows, g->topk});
  a->qlen = g->qlen;
  a->topk = g->topk;
  a->page_size = g->page;
  a->max_context = g->ctx;
  return ST_OK;
}

/* Block-table entries past each request's last visible page (a padding
 * request's whole row) hold garbage the kernels must never follow. */
static void table_garbage(int32_t *bt, int R, int cols, const int32_t *seq, int page, int64_t pages) {
  const int32_t garbage[] = {-1, INT32_MIN, pages > INT32_MAX ? INT32_MAX : (int32_t)pages, INT32_MAX};
  for (int r = 0; r < R; r++)
    for (int j = seq[r] > 0 ? (seq[r] - 1) / page + 1 : 0; j < cols; j++)
      bt[(size_t)r * cols + j] = garbage[(r + j) % 4];
}

/* Every NAN_STRIDE-th value byte of the pool (scales left alone) is an
 * e4m3 NaN with nan=1: its token's logits are NaN and rank as -inf. */
#define NAN_STRIDE 4099
#define FP8_NAN 0x7f

/* Fills the host inputs of `c` (sized by g) from `seed`. ties 1: every
 * token of the pool the same values and scale, so every visible logit of a
 * row ties (the selection's equal-key path); ties 2: every token of a page
 * a copy of the page's first, so logits tie in runs of page_size (more
 * ties at the k-th logit than wanted, among few candidates). nan: NaN
 * values (NAN_STRIDE). */
static st_status fill_inputs(dsa_case *c, const dsa_geometry *g, const char *lens, int ties, int nan, uint64_t seed,
                             int threads, st_err *err) {
  const size_t rows = (size_t)g->B * (size_t)g->qlen;
  const size_t q_bytes = rows * (size_t)g->H * HEAD_DIM, pool_bytes = (size_t)g->pages * (size_t)g->page_stride;
  st_fill_uniform(c->h_q, ST_DTYPE_FP8_E4M3, q_bytes, -4.0f, 4.0f, seed ^ 0x71, threads);
  st_fill_uniform(c->h_w, ST_DTYPE_FP32, rows * (size_t)g->H, -1.0f, 1.0f, seed ^ 0x77, threads);
  st_fill_uniform(c->h_pool, ST_DTYPE_FP8_E4M3, pool_bytes, -4.0f, 4.0f, seed ^ 0x6b, threads);
  uint64_t rng = seed ^ 0x73;
  for (int64_t pg = 0; pg < g->pages; pg++) {
    uint8_t *page = c->h_pool + pg * g->page_stride;
    for (int k = 0; k < g->page; k++) {
      if (ties == 1 && (pg > 0 || k > 0))
        memcpy(page + (size_t)k * HEAD_DIM, c->h_pool, HEAD_DIM); /* page 0's token 0 */
      if (ties == 2 && k > 0) memcpy(page + (size_t)k * HEAD_DIM, page, HEAD_DIM);
      /* 2^-3 .. 2^1: scales of both sides of 1, exact in fp32. */
      const float scale = ties ? 0.5f : (float)(0.125 + 1.875 * (double)st_rand_below(&rng, 1u << 20) / (1u << 20));
      memcpy(page + (size_t)g->page * HEAD_DIM + (size_t)k * 4, &scale, 4);
    }
    if (nan)
      for (int64_t i = (NAN_STRIDE - pg * g->page_stride % NAN_STRIDE) % NAN_STRIDE; i < (int64_t)g->page * HEAD_DIM;
           i += NAN_STRIDE)
        page[i] = FP8_NAN;
  }
  const size_t bt_elems = (size_t)g->B * (size_t)g->max_pages;
  for (size_t i = 0; i < bt_elems; i++) c->h_bt[i] = (int32_t)st_rand_below(&rng, (uint64_t)g->pages);
  st_status s = st_case_seq_lens(c->h_seq, g->B, g->ctx, lens, &rng, err);
  if (s != ST_OK) return s;
  table_garbage(c->h_bt, g->B, g->max_pages, c->h_seq, g->page, g->pages);
  return ST_OK;
}

static st_status case_create(const st_cu *cu, const st_device_info *dev, const st_params *shape, const st_case_opts *o,
                             void **out, st_err *err) {
  dsa_geometry g;
  st_status s = read_geometry(shape, o->cold, dev->l2_bytes, &g, err);
  if (s != ST_OK) return s;
  /* Optional ties=1 or 2 (GPU tests): logits that tie (fill_inputs). */
  int ties = 0, nan = 0;
  if (st_params_get(shape, "ties") && (s = st_case_shape_int(shape, "ties", 0, 2, &ties, err))) return s;
  /* Optional nan=1 (GPU tests): NaN values in the pool. */
  if (st_params_get(shape, "nan") && (s = st_case_shape_int(shape, "nan", 0, 1, &nan, err))) return s;
  dsa_case *c = calloc(1, sizeof *c);
  if (!c) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  c->cu = cu;
  c->dev = *dev;
  const size_t rows = (size_t)g.B * (size_t)g.qlen;
  const size_t q_bytes = rows * (size_t)g.H * HEAD_DIM, pool_bytes = (size_t)g.pages * (size_t)g.page_stride;
  const size_t bt_elems = (size_t)g.B * (size_t)g.max_pages, out_elems = rows * (size_t)g.topk;
  c->h_q = malloc(q_bytes);
  c->h_w = malloc(rows * (size_t)g.H * 4);
  c->h_pool = malloc(pool_bytes);
  c->h_bt = malloc(bt_elems * 4);
  c->h_seq = malloc((size_t)g.B * 4);
  c->logits = malloc(sizeof(double) * rows * (size_t)g.ctx);
  c->h_out = malloc(out_elems * 4);
  if (!c->h_q || !c->h_w || !c->h_pool || !c->h_bt || !c->h_seq || !c->logits || !c->h_out) {
    case_destroy(c);
    return st_fail(err, ST_ERR_NOMEM, "out of host memory for a case of %zu pool bytes", pool_bytes);
  }
  if ((s = fill_inputs(c, &g, st_params_get(shape, "lens"), ties, nan, o->seed, o->threads, err)) != ST_OK) {
    case_destroy(c);
    return s;
  }
  c->ref = (st_ref_dsa_index_decode){.R = g.B,
                                     .qlen = g.qlen,
                                     .H = g.H,
                                     .topk = g.topk,
                                     .page_size = g.page,
                                     .max_context = g.ctx,
                                     .bt_cols = g.max_pages,
                                     .pages = g.pages,
                                     .page_stride = g.page_stride,
                                     .q = c->h_q,
                                     .weights = c->h_w,
                                     .k_pool = c->h_pool,
                                     .block_table = c->h_bt,
                                     .seq_lens = c->h_seq};
  if (st_ref_dsa_index_decode_logits(&c->ref, c->logits, o->threads) != 0) {
    case_destroy(c);
    return st_fail(err, ST_ERR_NOMEM, "the reference could not run (threads or memory)");
  }
  if ((s = st_case_upload(cu, &c->d_q, c->h_q, q_bytes, err)) ||
      (s = st_case_upload(cu, &c->d_w, c->h_w, rows * (size_t)g.H * 4, err)) ||
      (s = st_case_upload(cu, &c->d_pool, c->h_pool, pool_bytes, err)) ||
      (s = st_case_upload(cu, &c->d_bt, c->h_bt, bt_elems * 4, err)) ||
      (s = st_case_upload(cu, &c->d_seq, c->h_seq, (size_t)g.B * 4, err))) {
    case_destroy(c);
    return s;
  }
  CUresult rc = cu->cuMemAlloc(&c->d_out, out_elems * 4);
  if (rc != CUDA_SUCCESS) {
    case_destroy(c);
    return st_cu_fail(cu, rc, "cuMemAlloc", err);
  }
  st_dsa_index_decode_args *a = &c->args;
  *a = g.args;
  a->q.data = (void *)(uintptr_t)c->d_q;
  a->weights.data = (void *)(uintptr_t)c->d_w;
  a->k_cache.data = (void *)(uintptr_t)c->d_pool;
  a->block_table.data = (void *)(uintptr_t)c->d_bt;
  a->seq_lens.data = (void *)(uintptr_t)c->d_seq;
  a->topk_idx.data = (void *)(uintptr_t)c->d_out;
  c->cold = (st_cold_tables){.own = c->d_bt, .entries = bt_elems, .pages = g.pages, .seed = o->seed};
  if ((s = st_dsa_index_decode_check_args(a, err)) != ST_OK) {
    case_destroy(c);
    return s;
  }
  *out = c;
  return ST_OK;
}

/* The pool has a warm case's pages (no L2 known: the minimum): a larger
 * pool changes no field of the key and no check. */
static st_status dispatch_args(const st_params *shape, void *args, st_err *err) {
  dsa_geometry g;
  const st_status s = read_geometry(shape, 0, 0, &g, err);
  if (s != ST_OK) return s;
  st_dsa_index_decode_args *a = args;
  *a = g.args;
  st_tensor *const t[] = {&a->q, &a->weights, &a->k_cache, &a->block_table, &a->seq_lens, &a->topk_idx};
  st_case_stand_ins(t, sizeof t / sizeof t[0]);
  return ST_OK;
}

static void unbind(void *p) {
  dsa_bound *b = p;
  if (!b) return;
  if (b->ws) b->c->cu->cuMemFree(b->ws);
  free(b);
}

static st_status bind(void *pc, const st_params *kernel, const st_params *launch, CUmodule mod, void **out,
                      st_err *err) {
  dsa_case *c = pc;
  const st_cu *cu = c->cu;
  dsa_bound *b = calloc(1, sizeof *b);
  if (!b) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  b->c = c;
  st_status s;
  if ((s = st_dsa_index_decode_config_from_params(kernel, launch, &b->cfg, err)) ||
      (s = st_dsa_index_decode_check_fit(&b->cfg, &c->args, err)) ||
      (s = st_dsa_index_decode_plan_make(&b->cfg, &c->args, c->dev.sm_count, &b->plan, err)))
    goto fail;
  CUresult rc = cu->cuModuleGetFunction(&b->main_fn, mod, ST_DSA_INDEX_DECODE_MAIN_KERNEL);
  if (rc == CUDA_SUCCESS) rc = cu->cuModuleGetFunction(&b->merge_fn, mod, ST_DSA_INDEX_DECODE_MERGE_KERNEL);
  if (rc != CUDA_SUCCESS) {
    s = st_cu_fail(cu, rc, "binding dsa_index_decode variant", err);
    goto fail;
  }
  if ((s = st_case_workspace(cu, NULL, &b->ws, b->plan.workspace_bytes, err)) != ST_OK) goto fail;
  *out = b;
  return ST_OK;
fail:
  unbind(b);
  return s;
}

static st_status bind_runtime(void *pc, void *rt, void **out, st_err *err) {
  dsa_case *c = pc;
  dsa_bound *b = calloc(1, sizeof *b);
  if (!b) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  b->c = c;
  b->rt = rt;
  size_t bytes = 0;
  st_status s = st_dsa_index_decode_workspace_size(rt, &c->args, &bytes);
  if (s == ST_OK) s = st_dsa_index_decode_prepare(rt, &c->args);
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
  dsa_bound *b = pb;
  if (b->rt) {
    st_status s = st_dsa_index_decode(b->rt, &b->c->args, (void *)(uintptr_t)b->ws, b->plan.workspace_bytes, stream);
    return s == ST_OK ? ST_OK : st_fail(err, s, "runtime: %s", st_last_error(b->rt));
  }
  return st_dsa_index_decode_launch(b->c->cu, b->main_fn, b->merge_fn, &b->plan, (void *)(uintptr_t)b->ws,
                                    b->plan.workspace_bytes, stream, err);
}

/* The tie tolerance: fp32 accumulation of 128 exact fp8 products and of
 * 64 weighted heads stays many orders under 1e-4 of a row's largest
 * logit; a wrong token is off by far more. */
#define TIE_REL_TOL 1e-4

static int check(void *pc, double *worst, char *why, size_t cap) {
  const dsa_case *c = pc;
  return st_ref_dsa_index_decode_verify(&c->ref, c->logits, c->h_out, c->ref.topk, TIE_REL_TOL, worst, why, cap);
}

static st_status verify(void *pb, CUstream stream, int *ok, double *max_err, char *msg, size_t cap, st_err *err) {
  dsa_case *c = ((dsa_bound *)pb)->c;
  const size_t n = (size_t)c->ref.R * (size_t)c->ref.qlen * (size_t)c->ref.topk;
  /* Poison: an id no row can hold, so an unwritten slot fails the check. */
  const st_verify_out out = {.buf = {{c->d_out, c->h_out, n, 4, 0x7fff0000u}}, .check = check, .ctx = c, .item = "row"};
  return st_verify_twice(c->cu, stream, launch, pb, &out, ok, max_err, msg, cap, err);
}

static st_status cold_sets(void *pc, int n, st_err *err) {
  dsa_case *c = pc;
  return st_cold_make(c->cu, &c->cold, n, err);
}

/* Input set i: block table i; a variant's own plan is made again for it. */
static st_status rotate(void *pb, int i, st_err *err) {
  dsa_bound *b = pb;
  dsa_case *c = b->c;
  const st_status s = st_cold_point(&c->cold, &c->args.block_table, i, err);
  return s != ST_OK || b->rt ? s : st_dsa_index_decode_plan_make(&b->cfg, &c->args, c->dev.sm_count, &b->plan, err);
}

static void set_pdl(void *pc, int on) { ((dsa_case *)pc)->args.pdl = on; }

/* Each visible token's 128 values and scale once, q and weights once,
 * topk_idx written once (the logits' round trip through the workspace is
 * the kernels' own cost, not the op's). */
static double min_bytes(const void *pc) {
  const dsa_case *c = pc;
  double bytes = 0;
  for (int r = 0; r < c->ref.R; r++) {
    const int seq = c->h_seq[r] < c->ref.max_context ? c->h_seq[r] : c->ref.max_context;
    bytes += (double)(seq > 0 ? seq : 0) * (HEAD_DIM + 4);
  }
  const double rows = (double)c->ref.R * c->ref.qlen;
  bytes += rows * c->ref.H * (HEAD_DIM + 4); /* q and weights */
  bytes += rows * c->ref.topk * 4;           /* topk_idx */
  return bytes;
}

const st_op_harness st_dsa_index_decode_harness = {
    .op = ST_DSA_INDEX_DECODE_OP,
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
