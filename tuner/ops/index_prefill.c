/* tuner/ops/index_prefill.c - builds fused index_prefill cases and checks
 * variants on them. The inputs and reference scores are ops/index_inputs.c's
 * (index_score's); the reference selection is index_topk's rule on them,
 * and a variant passes if every row holds its forced blocks and no left-out
 * block beats a chosen one by more than the fp32 products' rounding
 * (st_ref_index_topk_verify). The shape adds topk, init and local. The
 * output is poisoned before each launch and the workspace is not cleared
 * between the two launches (a replay must not need it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_harness.h"
#include "ops/case_inputs.h"
#include "ops/index_inputs.h"
#include "ops/index_prefill.h"
#include "ops/tensor_check.h"
#include "verify_twice.h"

typedef struct ip_case {
  const st_cu *cu;
  st_device_info dev;
  st_index_case in;
  int32_t *got;
  CUdeviceptr d_out;
  st_index_prefill_args args;
} ip_case;

typedef struct ip_bound {
  ip_case *c;
  st_handle *rt;
  st_index_prefill_config cfg;
  st_index_prefill_plan plan;
  CUfunction main_fn, merge_fn;
  CUdeviceptr d_ws;
  size_t ws_bytes;
} ip_bound;

static void case_destroy(void *p) {
  ip_case *c = p;
  if (!c) return;
  if (c->d_out) c->cu->cuMemFree(c->d_out);
  st_index_case_free(c->cu, &c->in);
  free(c->got);
  free(c);
}

/* What a shape makes of a call, for case_create and dispatch_args alike:
 * the inputs' geometry (st_index_case_shape; pool grown where `cold`, for
 * an L2 of l2_bytes), the selection's topk, init and local, and c->args
 * with every data pointer NULL. On failure c holds what was made:
 * case_destroy frees it. */
static st_status read_geometry(ip_case *c, const st_params *shape, int cold, int64_t l2_bytes, st_err *err) {
  st_index_case *in = &c->in;
  int topk = 0, init = 0, local = 0;
  st_status st;
  if ((st = st_index_case_shape(shape, cold, l2_bytes, in, err)) ||
      (st = st_case_shape_int(shape, "topk", 1, 64, &topk, err)) ||
      (st = st_case_shape_int(shape, "init", 0, 64, &init, err)) ||
      (st = st_case_shape_int(shape, "local", 0, 64, &local, err)))
    return st;
  in->ref.topk = topk;
  in->ref.init_blocks = init;
  in->ref.local_blocks = local;
  st_index_prefill_args *a = &c->args;
  st_index_prefill_args_init(a);
  st_index_case_tensors(in, &a->q, &a->k_cache, &a->block_table, &a->cu_seqlens_q, &a->seq_lens);
  st_tensor_contiguous(&a->topk_idx, NULL, ST_DTYPE_INT32, 3, (int64_t[]){in->ref.H, in->total_q, topk});
  a->topk = topk;
  a->init_blocks = init;
  a->local_blocks = local;
  a->max_context = in->max_context;
  return ST_OK;
}

static st_status make_output(ip_case *c, st_err *err) {
  const st_index_case *in = &c->in;
  const size_t n = (size_t)in->ref.H * in->total_q * in->ref.topk;
  c->got = malloc(n * 4);
  if (!c->got) return st_fail(err, ST_ERR_NOMEM, "out of host memory for %zu ids", n);
  ST_CU_TRY(c->cu, c->cu->cuMemAlloc(&c->d_out, n * 4), err);
  st_index_prefill_args *a = &c->args;
  st_index_case_point(in, &a->q, &a->k_cache, &a->block_table, &a->cu_seqlens_q, &a->seq_lens);
  a->topk_idx.data = (void *)(uintptr_t)c->d_out;
  return st_index_prefill_check_args(a, err);
}

static st_status case_create(const st_cu *cu, const st_device_info *dev, const st_params *shape,
                             const st_case_opts *o, void **out, st_err *err) {
  ip_case *c = calloc(1, sizeof *c);
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
  ip_case *c = calloc(1, sizeof *c);
  if (!c) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  const st_status st = read_geometry(c, shape, 0, 0, err);
  if (st == ST_OK) {
    st_index_prefill_args *a = args;
    *a = c->args;
    st_tensor *const t[] = {&a->q, &a->k_cache, &a->block_table, &a->cu_seqlens_q, &a->seq_lens, &a->topk_idx};
    st_case_stand_ins(t, sizeof t / sizeof t[0]);
  }
  case_destroy(c);
  return st;
}

static void unbind(void *p) {
  ip_bound *b = p;
  if (!b) return;
  if (b->d_ws) b->c->cu->cuMemFree(b->d_ws);
  free(b);
}

/* A workspace of `bytes`, filled with a pattern no list entry has, so a
 * kernel that read an entry it did not write would choose garbage. */
static st_status alloc_workspace(ip_bound *b, size_t bytes, st_err *err) {
  b->ws_bytes = bytes;
  if (!bytes) return ST_OK;
  const st_cu *cu = b->c->cu;
  ST_CU_TRY(cu, cu->cuMemAlloc(&b->d_ws, bytes), err);
  ST_CU_TRY(cu, cu->cuMemsetD32Async(b->d_ws, 0x7ff00001u, bytes / 4, NULL), err);
  ST_CU_TRY(cu, cu->cuStreamSynchronize(NULL), err);
  return ST_OK;
}

static st_status bind(void *pc, const st_params *kernel, const st_params *launch, CUmodule mod, void **out,
                      st_err *err) {
  ip_case *c = pc;
  ip_bound *b = st_case_zalloc_aligned(_Alignof(ip_bound), sizeof *b);
  if (!b) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  b->c = c;
  st_status s;
  if ((s = st_index_prefill_config_from_params(kernel, launch, &b->cfg, err)) ||
      (s = st_index_prefill_plan_make(&b->cfg, &c->args, c->dev.sm_count, &b->plan, err))) {
    unbind(b);
    return s;
  }
  CUresult rc = c->cu->cuModuleGetFunction(&b->main_fn, mod, ST_INDEX_PREFILL_MAIN_KERNEL);
  if (rc == CUDA_SUCCESS) rc = c->cu->cuModuleGetFunction(&b->merge_fn, mod, ST_INDEX_PREFILL_MERGE_KERNEL);
  if (rc != CUDA_SUCCESS) {
    unbind(b);
    return st_cu_fail(c->cu, rc, "binding index_prefill variant", err);
  }
  if ((s = alloc_workspace(b, b->plan.workspace_bytes, err)) != ST_OK) {
    unbind(b);
    return s;
  }
  *out = b;
  return ST_OK;
}

static st_status bind_runtime(void *pc, void *rt, void **out, st_err *err) {
  ip_case *c = pc;
  ip_bound *b = st_case_zalloc_aligned(_Alignof(ip_bound), sizeof *b);
  if (!b) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  b->c = c;
  b->rt = rt;
  size_t bytes = 0;
  st_status s = st_index_prefill_workspace_size(rt, &c->args, &bytes);
  if (s == ST_OK) s = st_index_prefill_prepare(rt, &c->args);
  if (s != ST_OK) st_err_format(err, "runtime: %s", st_last_error(rt));
  if (s == ST_OK) s = alloc_workspace(b, bytes, err);
  if (s != ST_OK) {
    unbind(b);
    return s;
  }
  *out = b;
  return ST_OK;
}

static st_status launch(void *pb, CUstream stream, st_err *err) {
  ip_bound *b = pb;
  void *ws = (void *)(uintptr_t)b->d_ws;
  if (b->rt) {
    st_status s = st_index_prefill(b->rt, &b->c->args, ws, b->ws_bytes, stream);
    return s == ST_OK ? ST_OK : st_fail(err, s, "runtime: %s", st_last_error(b->rt));
  }
  return st_index_prefill_launch(b->c->cu, b->main_fn, b->merge_fn, &b->plan, ws, stream, err);
}

/* The kernel ranks fp32 products the reference sums in double: a block may
 * swap with one within their rounding (relative to the row's largest score;
 * e4m3 wgmma keeps fewer accumulator bits). */
static int check(void *pc, double *worst, char *why, size_t cap) {
  const ip_case *c = pc;
  const st_index_case *in = &c->in;
  const double rel_tol = in->ref.dtype == ST_DTYPE_BF16 ? 1e-5 : 2e-3;
  return st_ref_index_topk_verify(&in->ref, in->ref_score, c->got, (int64_t)in->total_q * in->ref.topk, in->ref.topk,
                                  rel_tol, worst, why, cap);
}

static st_status verify(void *pb, CUstream stream, int *ok, double *max_err, char *msg, size_t cap, st_err *err) {
  ip_case *c = ((ip_bound *)pb)->c;
  const size_t n = (size_t)c->in.ref.H * c->in.total_q * c->in.ref.topk;
  /* Poison: an id no row can hold, so an unwritten slot fails the check. */
  const st_verify_out out = {.buf = {{c->d_out, c->got, n, 4, 0x7fff0000u}}, .check = check, .ctx = c, .item = "row"};
  return st_verify_twice(c->cu, stream, launch, pb, &out, ok, max_err, msg, cap, err);
}

/* q once, each request's index-K rows once, the ids written once. */
static st_status cold_sets(void *pc, int n, st_err *err) {
  ip_case *c = pc;
  return st_cold_make(c->cu, &c->in.cold, n, err);
}

/* Input set i: block table i; a variant's own plan is made again for it. */
static st_status rotate(void *pb, int i, st_err *err) {
  ip_bound *b = pb;
  ip_case *c = b->c;
  const st_status s = st_cold_point(&c->in.cold, &c->args.block_table, i, err);
  return s != ST_OK || b->rt ? s : st_index_prefill_plan_make(&b->cfg, &c->args, c->dev.sm_count, &b->plan, err);
}

static double min_bytes(const void *pc) {
  const ip_case *c = pc;
  return st_index_case_input_bytes(&c->in) + (double)c->in.ref.H * c->in.total_q * c->in.ref.topk * 4.0;
}

/* index_score's FLOPs (the selection adds no arithmetic to speak of). */
static double flops(const void *pc) {
  const ip_case *c = pc;
  return st_index_case_visible_blocks(&c->in) * 2.0 * c->in.ref.D * c->in.ref.H * 128;
}

const st_op_harness st_index_prefill_harness = {
    .op = ST_INDEX_PREFILL_OP,
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
