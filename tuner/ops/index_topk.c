/* tuner/ops/index_topk.c - builds index_topk (prefill) cases and checks
 * variants on them. A shape lists its requests as "q_len:prefix;..."; the
 * scores [H][total_q][max_blocks] are uniform random fp32 in [-4, 4) with
 * every 97th a NaN (counted as -inf) and every 89th a copy of its left
 * neighbour (ties), written over the whole row, invisible blocks included
 * (a kernel must not read them). The reference selects on the same fp32
 * values, widened to double. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_harness.h"
#include "ops/case_inputs.h"
#include "ops/index_topk.h"
#include "ops/tensor_check.h"
#include "random_fill.h"
#include "reference/index_prefill.h"
#include "verify_twice.h"

typedef struct it_case {
  const st_cu *cu;
  st_device_info dev;
  st_ref_index_prefill ref;
  int R, total_q, max_context, max_blocks;
  float *h_score;
  double *ref_score;
  int32_t *h_cu, *h_seq, *got;
  CUdeviceptr d_score, d_cu, d_seq, d_out;
  st_index_topk_args args;
} it_case;

typedef struct it_bound {
  it_case *c;
  st_handle *rt;
  st_index_topk_config cfg;
  st_index_topk_plan plan;
  CUfunction main_fn;
} it_bound;

static void case_destroy(void *p) {
  it_case *c = p;
  if (!c) return;
  CUdeviceptr bufs[] = {c->d_score, c->d_cu, c->d_seq, c->d_out};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) c->cu->cuMemFree(bufs[i]);
  free(c->h_score);
  free(c->ref_score);
  free(c->h_cu);
  free(c->h_seq);
  free(c->got);
  free(c);
}

static st_status read_shape(it_case *c, const st_params *shape, st_err *err) {
  int B = 0, H = 0, topk = 0, init = 0, local = 0;
  st_status st;
  if ((st = st_case_shape_int(shape, "B", 1, 1 << 24, &B, err)) ||
      (st = st_case_shape_int(shape, "H", 1, 65535, &H, err)) ||
      (st = st_case_shape_int(shape, "topk", 1, 64, &topk, err)) ||
      (st = st_case_shape_int(shape, "init", 0, 64, &init, err)) ||
      (st = st_case_shape_int(shape, "local", 0, 64, &local, err)) ||
      (st = st_case_requests(st_params_get(shape, "reqs"), &c->h_cu, &c->h_seq, &c->R, &c->total_q, &c->max_context,
                             err)))
    return st;
  if (B != c->total_q)
    return st_fail(err, ST_ERR_INVALID_ARG, "shape B=%d is not the %d query tokens of its requests", B, c->total_q);
  c->max_blocks = (c->max_context + ST_BLOCK_TOKENS - 1) / ST_BLOCK_TOKENS;
  c->ref = (st_ref_index_prefill){.dtype = ST_DTYPE_BF16,
                                  .R = c->R,
                                  .H = H,
                                  .D = 1,
                                  .max_blocks = c->max_blocks,
                                  .bt_cols = c->max_blocks,
                                  .cu_seqlens_q = c->h_cu,
                                  .seq_lens = c->h_seq,
                                  .scale = 1.0,
                                  .topk = topk,
                                  .init_blocks = init,
                                  .local_blocks = local};
  return ST_OK;
}

static st_status fill_scores(it_case *c, uint64_t seed, int threads, st_err *err) {
  const size_t n = (size_t)c->ref.H * (size_t)c->total_q * (size_t)c->max_blocks;
  c->h_score = malloc(n * 4);
  c->ref_score = malloc(n * sizeof(double));
  c->got = malloc((size_t)c->ref.H * (size_t)c->total_q * (size_t)c->ref.topk * 4);
  if (!c->h_score || !c->ref_score || !c->got)
    return st_fail(err, ST_ERR_NOMEM, "out of host memory for %zu scores", n);
  st_fill_uniform(c->h_score, ST_DTYPE_FP32, n, -4.0f, 4.0f, seed ^ 0x53, threads);
  for (size_t e = 0; e < n; e++) {
    if (e % 97 == 13)
      c->h_score[e] = NAN;
    else if (e % 89 == 5 && e > 0)
      c->h_score[e] = c->h_score[e - 1];
    c->ref_score[e] = c->h_score[e];
  }
  return ST_OK;
}

/* What a shape makes of a call, for case_create and dispatch_args alike:
 * the shape's fields and requests (read_shape) and c->args with every data
 * pointer NULL. On failure c holds what was made: case_destroy frees it. */
static st_status read_geometry(it_case *c, const st_params *shape, st_err *err) {
  const st_status st = read_shape(c, shape, err);
  if (st != ST_OK) return st;
  st_index_topk_args *a = &c->args;
  st_index_topk_args_init(a);
  st_tensor_contiguous(&a->score, NULL, ST_DTYPE_FP32, 3, (int64_t[]){c->ref.H, c->total_q, c->max_blocks});
  st_tensor_contiguous(&a->cu_seqlens_q, NULL, ST_DTYPE_INT32, 1, (int64_t[]){c->R + 1});
  st_tensor_contiguous(&a->seq_lens, NULL, ST_DTYPE_INT32, 1, (int64_t[]){c->R});
  st_tensor_contiguous(&a->topk_idx, NULL, ST_DTYPE_INT32, 3, (int64_t[]){c->ref.H, c->total_q, c->ref.topk});
  a->topk = c->ref.topk;
  a->init_blocks = c->ref.init_blocks;
  a->local_blocks = c->ref.local_blocks;
  a->max_context = c->max_context;
  return ST_OK;
}

static st_status upload_all(it_case *c, st_err *err) {
  const st_cu *cu = c->cu;
  const size_t n = (size_t)c->ref.H * (size_t)c->total_q * (size_t)c->max_blocks;
  st_status st;
  if ((st = st_case_upload(cu, &c->d_score, c->h_score, n * 4, err)) ||
      (st = st_case_upload(cu, &c->d_cu, c->h_cu, (size_t)(c->R + 1) * 4, err)) ||
      (st = st_case_upload(cu, &c->d_seq, c->h_seq, (size_t)c->R * 4, err)))
    return st;
  ST_CU_TRY(cu, cu->cuMemAlloc(&c->d_out, (size_t)c->ref.H * (size_t)c->total_q * (size_t)c->ref.topk * 4), err);
  st_index_topk_args *a = &c->args;
  a->score.data = (void *)(uintptr_t)c->d_score;
  a->cu_seqlens_q.data = (void *)(uintptr_t)c->d_cu;
  a->seq_lens.data = (void *)(uintptr_t)c->d_seq;
  a->topk_idx.data = (void *)(uintptr_t)c->d_out;
  return st_index_topk_check_args(a, err);
}

static st_status case_create(const st_cu *cu, const st_device_info *dev, const st_params *shape,
                             const st_case_opts *o, void **out, st_err *err) {
  const uint64_t seed = o->seed;
  const int threads = o->threads;
  it_case *c = calloc(1, sizeof *c);
  if (!c) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  c->cu = cu;
  c->dev = *dev;
  st_status st;
  if ((st = read_geometry(c, shape, err)) || (st = fill_scores(c, seed, threads, err)) || (st = upload_all(c, err))) {
    case_destroy(c);
    return st;
  }
  *out = c;
  return ST_OK;
}

/* index_topk reads no paged pool: its arguments are the case's as they are. */
static st_status dispatch_args(const st_params *shape, void *args, st_err *err) {
  it_case *c = calloc(1, sizeof *c);
  if (!c) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  const st_status st = read_geometry(c, shape, err);
  if (st == ST_OK) {
    st_index_topk_args *a = args;
    *a = c->args;
    st_tensor *const t[] = {&a->score, &a->cu_seqlens_q, &a->seq_lens, &a->topk_idx};
    st_case_stand_ins(t, sizeof t / sizeof t[0]);
  }
  case_destroy(c);
  return st;
}

static void unbind(void *p) { free(p); }

static st_status bind(void *pc, const st_params *kernel, const st_params *launch, CUmodule mod, void **out,
                      st_err *err) {
  it_case *c = pc;
  it_bound *b = calloc(1, sizeof *b);
  if (!b) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  b->c = c;
  st_status s;
  if ((s = st_index_topk_config_from_params(kernel, launch, &b->cfg, err)) ||
      (s = st_index_topk_plan_make(&b->cfg, &c->args, &b->plan, err))) {
    unbind(b);
    return s;
  }
  CUresult rc = c->cu->cuModuleGetFunction(&b->main_fn, mod, ST_INDEX_TOPK_MAIN_KERNEL);
  if (rc != CUDA_SUCCESS) {
    unbind(b);
    return st_cu_fail(c->cu, rc, "binding index_topk variant", err);
  }
  *out = b;
  return ST_OK;
}

static st_status bind_runtime(void *pc, void *rt, void **out, st_err *err) {
  it_case *c = pc;
  it_bound *b = calloc(1, sizeof *b);
  if (!b) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  b->c = c;
  b->rt = rt;
  size_t bytes = 0;
  st_status s = st_index_topk_workspace_size(rt, &c->args, &bytes);
  if (s == ST_OK) s = st_index_topk_prepare(rt, &c->args);
  if (s == ST_OK && bytes)
    s = st_fail(err, ST_ERR_UNSUPPORTED, "index_topk asked for %zu bytes of workspace", bytes);
  else if (s != ST_OK)
    st_err_format(err, "runtime: %s", st_last_error(rt));
  if (s != ST_OK) {
    unbind(b);
    return s;
  }
  *out = b;
  return ST_OK;
}

static st_status launch(void *pb, CUstream stream, st_err *err) {
  it_bound *b = pb;
  if (b->rt) {
    st_status s = st_index_topk(b->rt, &b->c->args, NULL, 0, stream);
    return s == ST_OK ? ST_OK : st_fail(err, s, "runtime: %s", st_last_error(b->rt));
  }
  return st_index_topk_launch(b->c->cu, b->main_fn, &b->plan, stream, err);
}

/* The kernel selects on the very fp32 values the reference reads: only
 * ties may differ. */
static int check(void *pc, double *worst, char *why, size_t cap) {
  const it_case *c = pc;
  return st_ref_index_topk_verify(&c->ref, c->ref_score, c->got, (int64_t)c->total_q * c->ref.topk, c->ref.topk, 1e-7,
                                  worst, why, cap);
}

static st_status verify(void *pb, CUstream stream, int *ok, double *max_err, char *msg, size_t cap, st_err *err) {
  it_case *c = ((it_bound *)pb)->c;
  const size_t n = (size_t)c->ref.H * (size_t)c->total_q * (size_t)c->ref.topk;
  /* Poison: an id no row can hold, so an unwritten slot fails the check. */
  const st_verify_out out = {.buf = {{c->d_out, c->got, n, 4, 0x7fff0000u}}, .check = check, .ctx = c, .item = "row"};
  return st_verify_twice(c->cu, stream, launch, pb, &out, ok, max_err, msg, cap, err);
}

/* The visible scores once and the ids. */
static double min_bytes(const void *pc) {
  const it_case *c = pc;
  double blocks = 0;
  for (int i = 0; i < c->total_q; i++) {
    const int pos = st_ref_index_prefill_position(&c->ref, i, NULL);
    blocks += pos >= 0 ? pos / ST_BLOCK_TOKENS + 1 : 0;
  }
  return (blocks * 4.0 + (double)c->total_q * c->ref.topk * 4.0) * c->ref.H;
}

const st_op_harness st_index_topk_harness = {
    .op = ST_INDEX_TOPK_OP,
    .case_create = case_create,
    .case_destroy = case_destroy,
    .dispatch_args = dispatch_args,
    .bind = bind,
    .bind_runtime = bind_runtime,
    .launch = launch,
    .verify = verify,
    .unbind = unbind,
    .min_bytes = min_bytes,
    .flops = NULL,
    .bench_iters = 10,
};
