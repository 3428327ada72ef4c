/* tuner/ops/index_score.c - builds index_score (prefill block scores) cases
 * and checks variants on them. The inputs and reference scores are
 * ops/index_inputs.c's (a NaN product never wins a max). The score rows are
 * 3 columns wider than the blocks (a row stride the kernel must honour) and
 * poisoned with NaN before each launch, so an unwritten visible entry
 * fails. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_harness.h"
#include "ops/case_inputs.h"
#include "ops/index_inputs.h"
#include "ops/index_score.h"
#include "ops/tensor_check.h"
#include "verify_twice.h"

#define SCORE_PAD_COLS 3

typedef struct is_case {
  const st_cu *cu;
  st_device_info dev;
  st_index_case in;
  int score_cols;
  float *got;
  CUdeviceptr d_score;
  st_index_score_args args;
} is_case;

typedef struct is_bound {
  is_case *c;
  st_handle *rt;
  st_index_score_config cfg;
  st_index_score_plan plan;
  CUfunction main_fn;
} is_bound;

static void case_destroy(void *p) {
  is_case *c = p;
  if (!c) return;
  if (c->d_score) c->cu->cuMemFree(c->d_score);
  st_index_case_free(c->cu, &c->in);
  free(c->got);
  free(c);
}

/* What a shape makes of a call, for case_create and dispatch_args alike:
 * the inputs' geometry (st_index_case_shape; pool grown where `cold`, for
 * an L2 of l2_bytes), the score matrix SCORE_PAD_COLS wider than the blocks
 * and c->args with every data pointer NULL. On failure c holds what was
 * made: case_destroy frees it. */
static st_status read_geometry(is_case *c, const st_params *shape, int cold, int64_t l2_bytes, st_err *err) {
  const st_status st = st_index_case_shape(shape, cold, l2_bytes, &c->in, err);
  if (st != ST_OK) return st;
  const st_index_case *in = &c->in;
  c->score_cols = in->ref.max_blocks + SCORE_PAD_COLS;
  st_index_score_args *a = &c->args;
  st_index_score_args_init(a);
  st_index_case_tensors(in, &a->q, &a->k_cache, &a->block_table, &a->cu_seqlens_q, &a->seq_lens);
  st_tensor_contiguous(&a->score, NULL, ST_DTYPE_FP32, 3, (int64_t[]){in->ref.H, in->total_q, c->score_cols});
  a->scale = (float)in->ref.scale;
  a->max_context = in->max_context;
  return ST_OK;
}

static st_status make_output(is_case *c, st_err *err) {
  const st_index_case *in = &c->in;
  const size_t n = (size_t)in->ref.H * in->total_q * c->score_cols;
  c->got = malloc(n * 4);
  if (!c->got) return st_fail(err, ST_ERR_NOMEM, "out of host memory for %zu scores", n);
  ST_CU_TRY(c->cu, c->cu->cuMemAlloc(&c->d_score, n * 4), err);
  st_index_score_args *a = &c->args;
  st_index_case_point(in, &a->q, &a->k_cache, &a->block_table, &a->cu_seqlens_q, &a->seq_lens);
  a->score.data = (void *)(uintptr_t)c->d_score;
  return st_index_score_check_args(a, err);
}

static st_status case_create(const st_cu *cu, const st_device_info *dev, const st_params *shape,
                             const st_case_opts *o, void **out, st_err *err) {
  is_case *c = calloc(1, sizeof *c);
  if (!c) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  c->cu = cu;
  c->dev = *dev;
  st_status st;
  if ((st = read_geometry(c, shape, o->cold, dev->l2_bytes, err)) || (st = st_index_case_build(cu, o, &c->in, err)) ||
      (st = make_output(c, err))) {
    case_destroy(c);
    return st;
  }
  *out = c;
  return ST_OK;
}

/* The pool has a warm case's pages: a cold case's larger pool changes no
 * field of the key and no check. */
static st_status dispatch_args(const st_params *shape, void *args, st_err *err) {
  is_case *c = calloc(1, sizeof *c);
  if (!c) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  const st_status st = read_geometry(c, shape, 0, 0, err);
  if (st == ST_OK) {
    st_index_score_args *a = args;
    *a = c->args;
    st_tensor *const t[] = {&a->q, &a->k_cache, &a->block_table, &a->cu_seqlens_q, &a->seq_lens, &a->score};
    st_case_stand_ins(t, sizeof t / sizeof t[0]);
  }
  case_destroy(c);
  return st;
}

static void unbind(void *p) { free(p); }

static st_status bind(void *pc, const st_params *kernel, const st_params *launch, CUmodule mod, void **out,
                      st_err *err) {
  is_case *c = pc;
  is_bound *b = st_case_zalloc_aligned(_Alignof(is_bound), sizeof *b);
  if (!b) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  b->c = c;
  st_status s;
  if ((s = st_index_score_config_from_params(kernel, launch, &b->cfg, err)) ||
      (s = st_index_score_plan_make(&b->cfg, &c->args, c->dev.sm_count, &b->plan, err))) {
    unbind(b);
    return s;
  }
  CUresult rc = c->cu->cuModuleGetFunction(&b->main_fn, mod, ST_INDEX_SCORE_MAIN_KERNEL);
  if (rc != CUDA_SUCCESS) {
    unbind(b);
    return st_cu_fail(c->cu, rc, "binding index_score variant", err);
  }
  *out = b;
  return ST_OK;
}

static st_status bind_runtime(void *pc, void *rt, void **out, st_err *err) {
  is_case *c = pc;
  is_bound *b = st_case_zalloc_aligned(_Alignof(is_bound), sizeof *b);
  if (!b) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  b->c = c;
  b->rt = rt;
  size_t bytes = 0;
  st_status s = st_index_score_workspace_size(rt, &c->args, &bytes);
  if (s == ST_OK) s = st_index_score_prepare(rt, &c->args);
  if (s == ST_OK && bytes)
    s = st_fail(err, ST_ERR_UNSUPPORTED, "index_score asked for %zu bytes of workspace", bytes);
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
  is_bound *b = pb;
  if (b->rt) {
    st_status s = st_index_score(b->rt, &b->c->args, NULL, 0, stream);
    return s == ST_OK ? ST_OK : st_fail(err, s, "runtime: %s", st_last_error(b->rt));
  }
  return st_index_score_launch(b->c->cu, b->main_fn, &b->plan, stream, err);
}

/* fp32 sums of D products: bf16 wgmma accumulates in fp32; e4m3 wgmma
 * keeps fewer accumulator bits (about 14 below the leading one), so fp8 gets
 * a tolerance on the scale of D * amp^2 * 2^-13. */
static int check(void *pc, double *worst, char *why, size_t cap) {
  const is_case *c = pc;
  const st_index_case *in = &c->in;
  const double mag = in->ref.D * (double)in->amp * in->amp * in->ref.scale;
  const double atol = in->ref.dtype == ST_DTYPE_BF16 ? 1e-5 * mag : 1.5e-4 * mag;
  const double rtol = in->ref.dtype == ST_DTYPE_BF16 ? 1e-5 : 1e-3;
  return st_ref_index_score_verify(&in->ref, in->ref_score, c->got, (int64_t)in->total_q * c->score_cols, c->score_cols,
                                   atol, rtol, worst, why, cap);
}

static st_status verify(void *pb, CUstream stream, int *ok, double *max_err, char *msg, size_t cap, st_err *err) {
  is_case *c = ((is_bound *)pb)->c;
  const size_t n = (size_t)c->in.ref.H * c->in.total_q * c->score_cols;
  /* Poison: NaN, so an unwritten score fails the check. */
  const st_verify_out out = {
      .buf = {{c->d_score, c->got, n, 4, 0x7fbad000u}}, .check = check, .ctx = c, .item = "score"};
  return st_verify_twice(c->cu, stream, launch, pb, &out, ok, max_err, msg, cap, err);
}

/* q once, each request's index-K rows once, the visible scores once. */
static st_status cold_sets(void *pc, int n, st_err *err) {
  is_case *c = pc;
  return st_cold_make(c->cu, &c->in.cold, n, err);
}

/* Input set i: block table i; a variant's own plan is made again for it. */
static st_status rotate(void *pb, int i, st_err *err) {
  is_bound *b = pb;
  is_case *c = b->c;
  const st_status s = st_cold_point(&c->in.cold, &c->args.block_table, i, err);
  return s != ST_OK || b->rt ? s : st_index_score_plan_make(&b->cfg, &c->args, c->dev.sm_count, &b->plan, err);
}

static double min_bytes(const void *pc) {
  const is_case *c = pc;
  return st_index_case_input_bytes(&c->in) + st_index_case_visible_blocks(&c->in) * c->in.ref.H * 4.0;
}

/* As docs/method.md counts them: 2 x D x H x 128 per visible block. */
static double flops(const void *pc) {
  const is_case *c = pc;
  return st_index_case_visible_blocks(&c->in) * 2.0 * c->in.ref.D * c->in.ref.H * 128;
}

const st_op_harness st_index_score_harness = {
    .op = ST_INDEX_SCORE_OP,
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
