/* tuner/ops/index_decode.c - builds index_decode cases and checks variants
 * on them. Inputs follow docs/method.md: an index-K pool of
 * max(4096, min(B*ctx/128, 65536)) pages, block tables uniformly random over
 * the pool, q and K uniform random (bf16 in [-1,1), fp8 in [-4,4)). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cold.h"
#include "op_harness.h"
#include "ops/case_inputs.h"
#include "ops/index_decode.h"
#include "ops/tensor_check.h"
#include "random_fill.h"
#include "reference/index_decode.h"
#include "verify_twice.h"

typedef struct id_case {
  const st_cu *cu;
  st_device_info dev;
  st_ref_index_decode ref; /* host inputs; points at the h_* arrays */
  void *h_q, *h_pool;
  int32_t *h_bt, *h_seq;
  double *scores; /* reference scores [H][R*qlen][max_blocks] */
  int32_t *h_out; /* copy of the kernel's output */
  CUdeviceptr d_q, d_pool, d_bt, d_seq, d_out;
  st_cold_tables cold; /* --cold: the block tables of the other input sets */
  st_index_decode_args args;
} id_case;

typedef struct id_bound {
  id_case *c;
  st_handle *rt; /* not NULL: launch through the runtime's dispatch */
  st_index_decode_config cfg;
  st_index_decode_plan plan;
  CUfunction main_fn, merge_fn;
  CUdeviceptr ws;
} id_bound;

static void case_destroy(void *p) {
  id_case *c = p;
  if (!c) return;
  const st_cu *cu = c->cu;
  CUdeviceptr bufs[] = {c->d_q, c->d_pool, c->d_bt, c->d_seq, c->d_out};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) cu->cuMemFree(bufs[i]);
  st_cold_free(cu, &c->cold);
  free(c->h_q);
  free(c->h_pool);
  free(c->h_bt);
  free(c->h_seq);
  free(c->scores);
  free(c->h_out);
  free(c);
}

/* What a shape makes of a call, for case_create and dispatch_args alike:
 * its sizes, the index-K pool's pages (grown where `cold`, for an L2 of
 * l2_bytes) and the arguments with every data pointer NULL. */
typedef struct id_geometry {
  st_dtype dtype;
  int B, qlen, H, D, topk, init, local, ctx, max_blocks;
  int64_t pages;
  st_index_decode_args args;
} id_geometry;

static st_status read_geometry(const st_params *shape, int cold, int64_t l2_bytes, id_geometry *g, st_err *err) {
  memset(g, 0, sizeof *g);
  st_status s;
  if ((s = st_case_shape_int(shape, "D", 1, 1024, &g->D, err)) ||
      (s = st_case_shape_int(shape, "H", 1, 64, &g->H, err)) ||
      (s = st_case_shape_int(shape, "qlen", 1, 4, &g->qlen, err)) ||
      (s = st_case_shape_int(shape, "topk", 1, 64, &g->topk, err)) ||
      (s = st_case_shape_int(shape, "init", 0, 64, &g->init, err)) ||
      (s = st_case_shape_int(shape, "local", 0, 64, &g->local, err)) ||
      (s = st_case_shape_int(shape, "B", 1, 65535, &g->B, err)) ||
      (s = st_case_shape_int(shape, "ctx", 1, 1 << 24, &g->ctx, err)))
    return s;
  const char *dts = st_params_get(shape, "dtype");
  if (!dts || (strcmp(dts, "bf16") && strcmp(dts, "fp8")))
    return st_fail(err, ST_ERR_INVALID_ARG, "shape dtype='%s' is not bf16 or fp8", dts ? dts : "(missing)");
  g->dtype = strcmp(dts, "bf16") == 0 ? ST_DTYPE_BF16 : ST_DTYPE_FP8_E4M3;
  g->max_blocks = (g->ctx + 127) / 128;
  int64_t pages = (int64_t)g->B * g->max_blocks;
  if (pages > 65536) pages = 65536;
  if (pages < 4096) pages = 4096;
  g->pages = st_cold_pool_pages(cold, pages, 128 * (int64_t)g->D * st_dtype_bytes(g->dtype), l2_bytes);
  const int64_t rows = (int64_t)g->B * g->qlen;
  st_index_decode_args *a = &g->args;
  st_index_decode_args_init(a);
  st_tensor_contiguous(&a->q, NULL, g->dtype, 3, (int64_t[]){rows, g->H, g->D});
  st_tensor_contiguous(&a->k_cache, NULL, g->dtype, 3, (int64_t[]){g->pages, 128, g->D});
  st_tensor_contiguous(&a->block_table, NULL, ST_DTYPE_INT32, 2, (int64_t[]){g->B, g->max_blocks});
  st_tensor_contiguous(&a->seq_lens, NULL, ST_DTYPE_INT32, 1, (int64_t[]){g->B});
  st_tensor_contiguous(&a->topk_idx, NULL, ST_DTYPE_INT32, 3, (int64_t[]){g->H, rows, g->topk});
  a->qlen = g->qlen;
  a->topk = g->topk;
  a->init_blocks = g->init;
  a->local_blocks = g->local;
  a->max_context = g->ctx;
  return ST_OK;
}

static st_status case_create(const st_cu *cu, const st_device_info *dev, const st_params *shape,
                             const st_case_opts *o, void **out, st_err *err) {
  const uint64_t seed = o->seed;
  const int threads = o->threads;
  id_geometry g;
  st_status s = read_geometry(shape, o->cold, dev->l2_bytes, &g, err);
  if (s != ST_OK) return s;
  /* Optional ties=1 (GPU tests): the selection's many-equal-keys path. */
  int ties = 0;
  if (st_params_get(shape, "ties") && (s = st_case_shape_int(shape, "ties", 0, 1, &ties, err))) return s;
  const char *lens = st_params_get(shape, "lens");
  const st_dtype dt = g.dtype;
  const size_t eb = (size_t)st_dtype_bytes(dt);
  const int B = g.B, max_blocks = g.max_blocks;
  const int64_t pages = g.pages;

  id_case *c = calloc(1, sizeof *c);
  if (!c) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  c->cu = cu;
  c->dev = *dev;
  const size_t rows = (size_t)B * (size_t)g.qlen;
  const size_t q_elems = rows * (size_t)g.H * (size_t)g.D, pool_elems = (size_t)pages * 128 * (size_t)g.D;
  const size_t bt_elems = (size_t)B * (size_t)max_blocks, out_elems = (size_t)g.H * rows * (size_t)g.topk;
  c->h_q = malloc(q_elems * eb);
  c->h_pool = malloc(pool_elems * eb);
  c->h_bt = malloc(bt_elems * 4);
  c->h_seq = malloc((size_t)B * 4);
  c->scores = malloc(sizeof(double) * (size_t)g.H * rows * (size_t)max_blocks);
  c->h_out = malloc(out_elems * 4);
  if (!c->h_q || !c->h_pool || !c->h_bt || !c->h_seq || !c->scores || !c->h_out) {
    case_destroy(c);
    return st_fail(err, ST_ERR_NOMEM, "out of host memory for a case of %zu pool bytes", pool_elems * eb);
  }
  const float amp = dt == ST_DTYPE_BF16 ? 1.0f : 4.0f;
  st_fill_uniform(c->h_q, dt, q_elems, -amp, amp, seed ^ 0x71, threads);
  st_fill_uniform(c->h_pool, dt, pool_elems, -amp, amp, seed ^ 0x6b, threads);
  if (ties) /* every index-K row the same: all visible blocks of a request tie */
    for (size_t e = 1; e < pool_elems; e++) memcpy((char *)c->h_pool + e * eb, c->h_pool, eb);
  uint64_t rng = seed ^ 0x62;
  for (size_t i = 0; i < bt_elems; i++) c->h_bt[i] = (int32_t)st_rand_below(&rng, (uint64_t)pages);
  if ((s = st_case_seq_lens(c->h_seq, B, g.ctx, lens, &rng, err)) != ST_OK) {
    case_destroy(c);
    return s;
  }
  st_case_table_garbage(c->h_bt, B, max_blocks, c->h_seq, pages);

  c->ref = (st_ref_index_decode){.dtype = dt,
                                 .R = B,
                                 .qlen = g.qlen,
                                 .H = g.H,
                                 .D = g.D,
                                 .topk = g.topk,
                                 .init_blocks = g.init,
                                 .local_blocks = g.local,
                                 .max_blocks = max_blocks,
                                 .bt_cols = max_blocks,
                                 .pages = pages,
                                 .q = c->h_q,
                                 .k_pool = c->h_pool,
                                 .block_table = c->h_bt,
                                 .seq_lens = c->h_seq};
  if (st_ref_index_decode_scores(&c->ref, c->scores, threads) != 0) {
    case_destroy(c);
    return st_fail(err, ST_ERR_NOMEM, "the reference could not run (threads or memory)");
  }
  if ((s = st_case_upload(cu, &c->d_q, c->h_q, q_elems * eb, err)) ||
      (s = st_case_upload(cu, &c->d_pool, c->h_pool, pool_elems * eb, err)) ||
      (s = st_case_upload(cu, &c->d_bt, c->h_bt, bt_elems * 4, err)) ||
      (s = st_case_upload(cu, &c->d_seq, c->h_seq, (size_t)B * 4, err))) {
    case_destroy(c);
    return s;
  }
  CUresult rc = cu->cuMemAlloc(&c->d_out, out_elems * 4);
  if (rc != CUDA_SUCCESS) {
    case_destroy(c);
    return st_cu_fail(cu, rc, "cuMemAlloc", err);
  }
  st_index_decode_args *a = &c->args;
  *a = g.args;
  a->q.data = (void *)(uintptr_t)c->d_q;
  a->k_cache.data = (void *)(uintptr_t)c->d_pool;
  a->block_table.data = (void *)(uintptr_t)c->d_bt;
  a->seq_lens.data = (void *)(uintptr_t)c->d_seq;
  a->topk_idx.data = (void *)(uintptr_t)c->d_out;
  c->cold = (st_cold_tables){.own = c->d_bt, .entries = bt_elems, .pages = pages, .seed = seed};
  if ((s = st_index_decode_check_args(a, err)) != ST_OK) {
    case_destroy(c);
    return s;
  }
  *out = c;
  return ST_OK;
}

/* The pool has a warm case's pages: a cold case's larger pool changes no
 * field of the key and no check. */
static st_status dispatch_args(const st_params *shape, void *args, st_err *err) {
  id_geometry g;
  const st_status s = read_geometry(shape, 0, 0, &g, err);
  if (s != ST_OK) return s;
  st_index_decode_args *a = args;
  *a = g.args;
  st_tensor *const t[] = {&a->q, &a->k_cache, &a->block_table, &a->seq_lens, &a->topk_idx};
  st_case_stand_ins(t, sizeof t / sizeof t[0]);
  return ST_OK;
}

static void unbind(void *p) {
  id_bound *b = p;
  if (!b) return;
  if (b->ws) b->c->cu->cuMemFree(b->ws);
  free(b);
}

static st_status bind(void *pc, const st_params *kernel, const st_params *launch, CUmodule mod, void **out,
                      st_err *err) {
  id_case *c = pc;
  const st_cu *cu = c->cu;
  id_bound *b = calloc(1, sizeof *b);
  if (!b) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  b->c = c;
  st_status s;
  if ((s = st_index_decode_config_from_params(kernel, launch, &b->cfg, err)) ||
      (s = st_index_decode_check_fit(&b->cfg, &c->args, err)) ||
      (s = st_index_decode_plan_make(&b->cfg, &c->args, c->dev.sm_count, &b->plan, err)))
    goto fail;
  CUresult rc = cu->cuModuleGetFunction(&b->main_fn, mod, ST_INDEX_DECODE_MAIN_KERNEL);
  if (rc == CUDA_SUCCESS && b->plan.merge_block)
    rc = cu->cuModuleGetFunction(&b->merge_fn, mod, ST_INDEX_DECODE_MERGE_KERNEL);
  if (rc != CUDA_SUCCESS) {
    s = st_cu_fail(cu, rc, "binding index_decode variant", err);
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
  id_case *c = pc;
  id_bound *b = calloc(1, sizeof *b);
  if (!b) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  b->c = c;
  b->rt = rt;
  size_t bytes = 0;
  st_status s = st_index_decode_workspace_size(rt, &c->args, &bytes);
  if (s == ST_OK) s = st_index_decode_prepare(rt, &c->args);
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
  id_bound *b = pb;
  if (b->rt) {
    st_status s = st_index_decode(b->rt, &b->c->args, (void *)(uintptr_t)b->ws, b->plan.workspace_bytes, stream);
    return s == ST_OK ? ST_OK : st_fail(err, s, "runtime: %s", st_last_error(b->rt));
  }
  return st_index_decode_launch(b->c->cu, b->main_fn, b->merge_fn, &b->plan, (void *)(uintptr_t)b->ws,
                                b->plan.workspace_bytes, stream, err);
}

static int check(void *pc, double *worst, char *why, size_t cap) {
  const id_case *c = pc;
  return st_ref_index_decode_verify(&c->ref, c->scores, c->h_out, (int64_t)c->ref.R * c->ref.qlen * c->ref.topk,
                                    c->ref.topk, 1e-4, worst, why, cap);
}

static st_status verify(void *pb, CUstream stream, int *ok, double *max_err, char *msg, size_t cap, st_err *err) {
  id_case *c = ((id_bound *)pb)->c;
  const size_t n = (size_t)c->ref.H * (size_t)c->ref.R * (size_t)c->ref.qlen * (size_t)c->ref.topk;
  /* Poison: an id no row can hold, so an unwritten slot fails the check. */
  const st_verify_out out = {.buf = {{c->d_out, c->h_out, n, 4, 0x7fff0000u}}, .check = check, .ctx = c, .item = "row"};
  return st_verify_twice(c->cu, stream, launch, pb, &out, ok, max_err, msg, cap, err);
}

static st_status cold_sets(void *pc, int n, st_err *err) {
  id_case *c = pc;
  return st_cold_make(c->cu, &c->cold, n, err);
}

/* Input set i: block table i; a variant's own plan is made again for it. */
static st_status rotate(void *pb, int i, st_err *err) {
  id_bound *b = pb;
  id_case *c = b->c;
  const st_status s = st_cold_point(&c->cold, &c->args.block_table, i, err);
  return s != ST_OK || b->rt ? s : st_index_decode_plan_make(&b->cfg, &c->args, c->dev.sm_count, &b->plan, err);
}

static void set_pdl(void *pc, int on) { ((id_case *)pc)->args.pdl = on; }

static double min_bytes(const void *pc) {
  const id_case *c = pc;
  const double eb = c->ref.dtype == ST_DTYPE_BF16 ? 2 : 1;
  double bytes = 0;
  for (int r = 0; r < c->ref.R; r++) bytes += (double)(c->h_seq[r] > 0 ? c->h_seq[r] : 0) * c->ref.D * eb;
  bytes += (double)c->ref.R * c->ref.qlen * c->ref.H * c->ref.D * eb;   /* q */
  bytes += (double)c->ref.H * c->ref.R * c->ref.qlen * c->ref.topk * 4; /* topk_idx */
  return bytes;
}

const st_op_harness st_index_decode_harness = {
    .op = ST_INDEX_DECODE_OP,
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
