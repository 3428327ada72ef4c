/* tuner/ops/dsa_index_topk.c - builds dsa_index_topk cases and checks
 * variants on them. Inputs as an engine has them after dsa_index_logits
 * for a varlen prefill batch "q_len:prefix;...": the logits' columns are
 * every request's rows (its prefix, then its query tokens) one after
 * another, query t of request r seeing its request's rows up to its own
 * position (ks = the request's first row, ke = that + prefix + t + 1);
 * logits uniform in [-4, 4) inside each range and -inf outside it, as
 * dsa_index_logits writes them. Input patterns (shape fields, GPU tests):
 * pad=1 rows of the logits and of topk_idx further apart than their
 * lengths; ranges=1 every ST_DSA_EDGE_RANGE_EVERY-th query an edge range
 * (ops/dsa_query_ranges.h); ties=1 every
 * TIES_EVERY-th row's logits rounded to a few values (runs of ties at the
 * k-th); nan=1 NaN, +inf, -inf, -0 and +0 scattered inside the ranges.
 * topk_idx is poisoned before each launch: an unwritten slot fails the
 * check, a written one past topk too. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_harness.h"
#include "ops/case_inputs.h"
#include "ops/dsa_index_topk.h"
#include "ops/dsa_query_ranges.h"
#include "ops/tensor_check.h"
#include "random_fill.h"
#include "reference/dsa_index_topk.h"
#include "verify_twice.h"

/* pad=1: extra elements a row of the logits and of topk_idx. */
#define LOGIT_ROW_PAD 8
#define OUT_ROW_PAD 3
/* ties=1: every TIES_EVERY-th row keeps TIE_LEVELS distinct logits. */
#define TIES_EVERY 3
#define TIE_LEVELS 5
/* nan=1: every SPECIAL_STRIDE-th logit of the matrix one of the specials. */
#define SPECIAL_STRIDE 13
/* The poison of topk_idx (and + 1 for the second launch): an id no row
 * holds. */
#define POISON 0x7fff0000u

typedef struct dt_case {
  const st_cu *cu;
  st_ref_dsa_index_topk ref; /* host inputs; points at the h_* arrays */
  float *h_logits;           /* [s_q][logit_stride] */
  int32_t *h_ks, *h_ke;
  int32_t *h_out; /* copy of the kernel's topk_idx [s_q][out_stride] */
  int64_t out_stride;
  CUdeviceptr d_logits, d_ks, d_ke, d_out;
  st_dsa_index_topk_args args;
} dt_case;

typedef struct dt_bound {
  dt_case *c;
  st_handle *rt; /* not NULL: launch through the runtime's dispatch */
  st_dsa_index_topk_config cfg;
  st_dsa_index_topk_plan plan;
  CUfunction fn;
} dt_bound;

static void case_destroy(void *p) {
  dt_case *c = p;
  if (!c) return;
  CUdeviceptr bufs[] = {c->d_logits, c->d_ks, c->d_ke, c->d_out};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) c->cu->cuMemFree(bufs[i]);
  free(c->h_logits);
  free(c->h_ks);
  free(c->h_ke);
  free(c->h_out);
  free(c);
}

/* What a shape makes of a call, for case_create and dispatch_args alike:
 * its sizes, each query's range (ks, ke: allocated here, the caller frees
 * them, also on failure) and the arguments with every data pointer NULL. */
typedef struct dt_geometry {
  int s_q, s_kv, topk, pad, ranges, ties, nan;
  int64_t logit_stride, out_stride;
  int32_t *ks, *ke;
  st_dsa_index_topk_args args;
} dt_geometry;

static st_status read_geometry(const st_params *shape, dt_geometry *g, st_err *err) {
  memset(g, 0, sizeof *g);
  st_status s;
  if ((s = st_case_shape_int(shape, "B", 1, ST_DSA_INDEX_TOPK_MAX_TOKENS, &g->s_q, err)) ||
      (s = st_case_shape_int(shape, "kv", 1, ST_DSA_INDEX_TOPK_MAX_TOKENS, &g->s_kv, err)) ||
      (s = st_case_shape_int(shape, "topk", 1, ST_DSA_INDEX_TOPK_MAX_TOPK, &g->topk, err)))
    return s;
  /* Optional input patterns (GPU tests): see the top of the file. */
  const char *opt[] = {"pad", "ranges", "ties", "nan"};
  int *val[] = {&g->pad, &g->ranges, &g->ties, &g->nan};
  for (int i = 0; i < 4; i++)
    if (st_params_get(shape, opt[i]) && (s = st_case_shape_int(shape, opt[i], 0, 1, val[i], err))) return s;
  if ((s = st_dsa_query_ranges(shape, g->s_q, g->s_kv, g->ranges, &g->ks, &g->ke, err)) != ST_OK) return s;
  g->logit_stride = ((int64_t)g->s_kv + 3) / 4 * 4 + (g->pad ? LOGIT_ROW_PAD : 0);
  g->out_stride = g->topk + (g->pad ? OUT_ROW_PAD : 0);
  st_dsa_index_topk_args *a = &g->args;
  st_dsa_index_topk_args_init(a);
  st_tensor_contiguous(&a->logits, NULL, ST_DTYPE_FP32, 2, (int64_t[]){g->s_q, g->s_kv});
  a->logits.stride[0] = g->logit_stride;
  st_tensor_contiguous(&a->ks, NULL, ST_DTYPE_INT32, 1, (int64_t[]){g->s_q});
  st_tensor_contiguous(&a->ke, NULL, ST_DTYPE_INT32, 1, (int64_t[]){g->s_q});
  st_tensor_contiguous(&a->topk_idx, NULL, ST_DTYPE_INT32, 2, (int64_t[]){g->s_q, g->topk});
  a->topk_idx.stride[0] = g->out_stride;
  a->topk = g->topk;
  return ST_OK;
}

/* ties=1: a row's logits rounded to TIE_LEVELS values in [-4, 4). */
static void make_ties(float *row, int lo, int hi) {
  for (int j = lo; j < hi; j++) row[j] = floorf((row[j] + 4.0f) * TIE_LEVELS / 8.0f) * (8.0f / TIE_LEVELS) - 4.0f;
}

/* The host logits of `c` (sized by g) from `seed`: uniform inside each
 * range, -inf elsewhere up to s_kv, NaN in the row padding (never read). */
static void fill_logits(dt_case *c, const dt_geometry *g, uint64_t seed, int threads) {
  const size_t cells = (size_t)g->s_q * (size_t)g->logit_stride;
  st_fill_uniform(c->h_logits, ST_DTYPE_FP32, cells, -4.0f, 4.0f, seed ^ 0x6c, threads);
  const float special[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f};
  for (int i = 0; i < g->s_q; i++) {
    float *row = c->h_logits + (int64_t)i * g->logit_stride;
    int lo, hi;
    st_ref_dsa_index_topk_range(&c->ref, i, &lo, &hi);
    if (g->ties && i % TIES_EVERY == 0) make_ties(row, lo, hi);
    for (int j = 0; j < lo; j++) row[j] = -INFINITY;
    for (int j = hi; j < g->s_kv; j++) row[j] = -INFINITY;
    for (int64_t j = g->s_kv; j < g->logit_stride; j++) row[j] = NAN;
    if (g->nan)
      for (int j = lo + i % SPECIAL_STRIDE; j < hi; j += SPECIAL_STRIDE) row[j] = special[(j / SPECIAL_STRIDE) % 5];
  }
}

static st_status upload_inputs(dt_case *c, const dt_geometry *g, st_err *err) {
  const size_t logit_bytes = (size_t)g->s_q * (size_t)g->logit_stride * 4;
  const size_t out_bytes = (size_t)g->s_q * (size_t)g->out_stride * 4;
  st_status s;
  if ((s = st_case_upload(c->cu, &c->d_logits, c->h_logits, logit_bytes, err)) ||
      (s = st_case_upload(c->cu, &c->d_ks, c->h_ks, (size_t)g->s_q * 4, err)) ||
      (s = st_case_upload(c->cu, &c->d_ke, c->h_ke, (size_t)g->s_q * 4, err)))
    return s;
  CUresult rc = c->cu->cuMemAlloc(&c->d_out, out_bytes);
  if (rc != CUDA_SUCCESS) return st_cu_fail(c->cu, rc, "cuMemAlloc", err);
  st_dsa_index_topk_args *a = &c->args;
  *a = g->args;
  a->logits.data = (void *)(uintptr_t)c->d_logits;
  a->ks.data = (void *)(uintptr_t)c->d_ks;
  a->ke.data = (void *)(uintptr_t)c->d_ke;
  a->topk_idx.data = (void *)(uintptr_t)c->d_out;
  return st_dsa_index_topk_check_args(a, err);
}

static st_status case_build(dt_case *c, const dt_geometry *g, const st_case_opts *o, st_err *err) {
  const size_t cells = (size_t)g->s_q * (size_t)g->logit_stride;
  c->h_logits = malloc(cells * 4);
  c->h_ks = malloc((size_t)g->s_q * 4);
  c->h_ke = malloc((size_t)g->s_q * 4);
  c->h_out = malloc((size_t)g->s_q * (size_t)g->out_stride * 4);
  if (!c->h_logits || !c->h_ks || !c->h_ke || !c->h_out)
    return st_fail(err, ST_ERR_NOMEM, "out of host memory for a case of %zu logits", cells);
  memcpy(c->h_ks, g->ks, sizeof(int32_t) * (size_t)g->s_q);
  memcpy(c->h_ke, g->ke, sizeof(int32_t) * (size_t)g->s_q);
  c->out_stride = g->out_stride;
  c->ref = (st_ref_dsa_index_topk){.s_q = g->s_q,
                                   .s_kv = g->s_kv,
                                   .topk = g->topk,
                                   .logit_stride = g->logit_stride,
                                   .logits = c->h_logits,
                                   .ks = c->h_ks,
                                   .ke = c->h_ke};
  fill_logits(c, g, o->seed, o->threads);
  return upload_inputs(c, g, err);
}

static st_status case_create(const st_cu *cu, const st_device_info *dev, const st_params *shape, const st_case_opts *o,
                             void **out, st_err *err) {
  (void)dev;
  dt_geometry g;
  st_status s = read_geometry(shape, &g, err);
  dt_case *c = s == ST_OK ? calloc(1, sizeof *c) : NULL;
  if (s == ST_OK && !c) s = st_fail(err, ST_ERR_NOMEM, "out of host memory");
  if (s == ST_OK) {
    c->cu = cu;
    s = case_build(c, &g, o, err);
  }
  free(g.ks);
  free(g.ke);
  if (s != ST_OK) {
    case_destroy(c);
    return s;
  }
  *out = c;
  return ST_OK;
}

static st_status dispatch_args(const st_params *shape, void *args, st_err *err) {
  dt_geometry g;
  const st_status s = read_geometry(shape, &g, err);
  free(g.ks);
  free(g.ke);
  if (s != ST_OK) return s;
  st_dsa_index_topk_args *a = args;
  *a = g.args;
  st_tensor *const t[] = {&a->logits, &a->ks, &a->ke, &a->topk_idx};
  st_case_stand_ins(t, sizeof t / sizeof t[0]);
  return ST_OK;
}

static void unbind(void *p) { free(p); }

static st_status bind(void *pc, const st_params *kernel, const st_params *launch, CUmodule mod, void **out,
                      st_err *err) {
  dt_case *c = pc;
  dt_bound *b = calloc(1, sizeof *b);
  if (!b) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  b->c = c;
  st_status s;
  if ((s = st_dsa_index_topk_config_from_params(kernel, launch, &b->cfg, err)) ||
      (s = st_dsa_index_topk_plan_make(&b->cfg, &c->args, &b->plan, err))) {
    unbind(b);
    return s;
  }
  const CUresult rc = c->cu->cuModuleGetFunction(&b->fn, mod, ST_DSA_INDEX_TOPK_MAIN_KERNEL);
  if (rc != CUDA_SUCCESS) {
    unbind(b);
    return st_cu_fail(c->cu, rc, "binding dsa_index_topk variant", err);
  }
  *out = b;
  return ST_OK;
}

static st_status bind_runtime(void *pc, void *rt, void **out, st_err *err) {
  dt_case *c = pc;
  dt_bound *b = calloc(1, sizeof *b);
  if (!b) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  b->c = c;
  b->rt = rt;
  size_t bytes = 0;
  st_status s = st_dsa_index_topk_workspace_size(rt, &c->args, &bytes);
  if (s == ST_OK) s = st_dsa_index_topk_prepare(rt, &c->args);
  if (s == ST_OK && bytes)
    s = st_fail(err, ST_ERR_UNSUPPORTED, "dsa_index_topk asked for %zu bytes of workspace", bytes);
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
  dt_bound *b = pb;
  if (b->rt) {
    const st_status s = st_dsa_index_topk(b->rt, &b->c->args, NULL, 0, stream);
    return s == ST_OK ? ST_OK : st_fail(err, s, "runtime: %s", st_last_error(b->rt));
  }
  return st_dsa_index_topk_launch(b->c->cu, b->fn, &b->plan, stream, err);
}

/* No slot past topk written (each launch poisons with POISON + run), then
 * every row against the reference's rule. */
static int check(void *pc, double *worst, char *why, size_t cap) {
  const dt_case *c = pc;
  *worst = 0;
  for (int i = 0; i < c->ref.s_q; i++) {
    const int32_t *row = c->h_out + (int64_t)i * c->out_stride;
    for (int64_t j = c->ref.topk; j < c->out_stride; j++) {
      if ((uint32_t)row[j] == POISON || (uint32_t)row[j] == POISON + 1) continue;
      snprintf(why, cap, "row %d slot %lld past topk=%d was written (%d)", i, (long long)j, c->ref.topk, row[j]);
      *worst = INFINITY;
      return 1;
    }
  }
  const int bad = st_ref_dsa_index_topk_verify(&c->ref, c->h_out, c->out_stride, why, cap);
  if (bad) *worst = INFINITY;
  return bad < 0 ? 1 : bad;
}

static st_status verify(void *pb, CUstream stream, int *ok, double *max_err, char *msg, size_t cap, st_err *err) {
  dt_case *c = ((dt_bound *)pb)->c;
  const size_t n = (size_t)c->ref.s_q * (size_t)c->out_stride;
  const st_verify_out out = {.buf = {{c->d_out, c->h_out, n, 4, POISON}}, .check = check, .ctx = c, .item = "row"};
  return st_verify_twice(c->cu, stream, launch, pb, &out, ok, max_err, msg, cap, err);
}

/* Each row: ks and ke, its range's logits once when the range is longer
 * than topk (a shorter one is written without them), topk_idx once. */
static double min_bytes(const void *pc) {
  const dt_case *c = pc;
  double bytes = 0;
  for (int i = 0; i < c->ref.s_q; i++) {
    int lo, hi;
    st_ref_dsa_index_topk_range(&c->ref, i, &lo, &hi);
    bytes += 8 + (double)c->ref.topk * 4 + (hi - lo > c->ref.topk ? (double)(hi - lo) * 4 : 0);
  }
  return bytes;
}

const st_op_harness st_dsa_index_topk_harness = {
    .op = ST_DSA_INDEX_TOPK_OP,
    .case_create = case_create,
    .case_destroy = case_destroy,
    .dispatch_args = dispatch_args,
    .bind = bind,
    .bind_runtime = bind_runtime,
    .launch = launch,
    .verify = verify,
    .unbind = unbind,
    .cold_sets = NULL,
    .rotate = NULL,
    .set_pdl = NULL,
    .min_bytes = min_bytes,
    .flops = NULL,
    .bench_iters = 20,
};
