/* tuner/ops/dsa_index_logits.c - builds dsa_index_logits cases and checks
 * variants on them. Inputs as an engine builds them for a varlen prefill
 * batch "q_len:prefix;...": the index-K rows of every request (its prefix,
 * then its query tokens) one after another, query t of request r seeing
 * its request's rows up to its own position (ks = the request's first row,
 * ke = that + prefix + t + 1; ranges=1: edge ranges, ops/dsa_query_ranges.h);
 * fp8 q and k uniform in [-4, 4) and never
 * zero, a positive fp32 scale per row in [2^-3, 2^1), weights in [-1, 1):
 * both signs, as the folded-in scales give them. The logits' rows are a
 * multiple of 4 wide (pad=1: 8 more, and k rows 16 bytes apart more than
 * their 128), poisoned with NaN before each launch: an unwritten element
 * of a row fails the check, a written one past s_kv too. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_harness.h"
#include "ops/case_inputs.h"
#include "ops/dsa_index_logits.h"
#include "ops/dsa_query_ranges.h"
#include "ops/tensor_check.h"
#include "random_fill.h"
#include "reference/dsa_index_logits.h"
#include "verify_twice.h"

#define HEAD_DIM ST_DSA_INDEX_LOGITS_HEAD_DIM
/* pad=1: extra bytes between k rows, extra logits a row. */
#define K_ROW_PAD 16
#define LOGIT_ROW_PAD 8
/* nan=1: every NAN_STRIDE-th byte of k is an e4m3 NaN. */
#define NAN_STRIDE 4099
#define FP8_NAN 0x7f
/* The NaN the outputs are poisoned with (and + 1 for the second launch):
 * no kernel arithmetic makes it (the GPU's NaN is 0x7fffffff). */
#define POISON 0x7fc0d000u

typedef struct dl_case {
  const st_cu *cu;
  st_device_info dev;
  st_ref_dsa_index_logits ref; /* host inputs; points at the h_* arrays */
  uint8_t *h_q, *h_k;
  float *h_w, *h_scale;
  int32_t *h_ks, *h_ke;
  double *logits, *row_scale; /* the reference's */
  float *h_out;               /* copy of the kernel's logits [s_q][stride] */
  int64_t out_stride;
  CUdeviceptr d_q, d_k, d_w, d_scale, d_ks, d_ke, d_out;
  st_dsa_index_logits_args args;
} dl_case;

typedef struct dl_bound {
  dl_case *c;
  st_handle *rt; /* not NULL: launch through the runtime's dispatch */
  st_dsa_index_logits_config cfg;
  st_dsa_index_logits_plan plan;
  CUfunction fn;
} dl_bound;

static void case_destroy(void *p) {
  dl_case *c = p;
  if (!c) return;
  CUdeviceptr bufs[] = {c->d_q, c->d_k, c->d_w, c->d_scale, c->d_ks, c->d_ke, c->d_out};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) c->cu->cuMemFree(bufs[i]);
  free(c->h_q);
  free(c->h_k);
  free(c->h_w);
  free(c->h_scale);
  free(c->h_ks);
  free(c->h_ke);
  free(c->logits);
  free(c->row_scale);
  free(c->h_out);
  free(c);
}

/* What a shape makes of a call, for case_create and dispatch_args alike:
 * its sizes, each query's range (ks, ke: allocated here, the caller frees
 * them, also on failure) and the arguments with every data pointer NULL. */
typedef struct dl_geometry {
  int s_q, s_kv, H, pad, ranges, nan;
  int64_t k_stride, out_stride;
  int32_t *ks, *ke;
  st_dsa_index_logits_args args;
} dl_geometry;

static st_status read_geometry(const st_params *shape, dl_geometry *g, st_err *err) {
  memset(g, 0, sizeof *g);
  st_status s;
  if ((s = st_case_shape_int(shape, "B", 1, ST_DSA_INDEX_LOGITS_MAX_TOKENS, &g->s_q, err)) ||
      (s = st_case_shape_int(shape, "H", 1, ST_DSA_INDEX_LOGITS_MAX_HEADS, &g->H, err)) ||
      (s = st_case_shape_int(shape, "kv", 1, ST_DSA_INDEX_LOGITS_MAX_TOKENS, &g->s_kv, err)))
    return s;
  /* Optional pad=1, ranges=1, nan=1 (GPU tests): see the top of the file. */
  if (st_params_get(shape, "pad") && (s = st_case_shape_int(shape, "pad", 0, 1, &g->pad, err))) return s;
  if (st_params_get(shape, "ranges") && (s = st_case_shape_int(shape, "ranges", 0, 1, &g->ranges, err))) return s;
  if (st_params_get(shape, "nan") && (s = st_case_shape_int(shape, "nan", 0, 1, &g->nan, err))) return s;
  if ((s = st_dsa_query_ranges(shape, g->s_q, g->s_kv, g->ranges, &g->ks, &g->ke, err)) != ST_OK) return s;
  g->k_stride = HEAD_DIM + (g->pad ? K_ROW_PAD : 0);
  g->out_stride = ((int64_t)g->s_kv + 3) / 4 * 4 + (g->pad ? LOGIT_ROW_PAD : 0);
  st_dsa_index_logits_args *a = &g->args;
  st_dsa_index_logits_args_init(a);
  st_tensor_contiguous(&a->q, NULL, ST_DTYPE_FP8_E4M3, 3, (int64_t[]){g->s_q, g->H, HEAD_DIM});
  st_tensor_contiguous(&a->k, NULL, ST_DTYPE_FP8_E4M3, 2, (int64_t[]){g->s_kv, HEAD_DIM});
  a->k.stride[0] = g->k_stride;
  st_tensor_contiguous(&a->k_scale, NULL, ST_DTYPE_FP32, 1, (int64_t[]){g->s_kv});
  st_tensor_contiguous(&a->weights, NULL, ST_DTYPE_FP32, 2, (int64_t[]){g->s_q, g->H});
  st_tensor_contiguous(&a->ks, NULL, ST_DTYPE_INT32, 1, (int64_t[]){g->s_q});
  st_tensor_contiguous(&a->ke, NULL, ST_DTYPE_INT32, 1, (int64_t[]){g->s_q});
  st_tensor_contiguous(&a->logits, NULL, ST_DTYPE_FP32, 2, (int64_t[]){g->s_q, g->s_kv});
  a->logits.stride[0] = g->out_stride;
  return ST_OK;
}

/* fp8 zeros (either sign) become 1: the inputs are never zero, so that
 * every dot product depends on every value. */
static void no_zeros(uint8_t *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    if ((v[i] & 0x7f) == 0) v[i] |= 0x38;
}

/* The host inputs of `c` (sized by g) from `seed`. */
static void fill_inputs(dl_case *c, const dl_geometry *g, uint64_t seed, int threads) {
  const size_t q_bytes = (size_t)g->s_q * (size_t)g->H * HEAD_DIM, k_bytes = (size_t)g->s_kv * (size_t)g->k_stride;
  st_fill_uniform(c->h_q, ST_DTYPE_FP8_E4M3, q_bytes, -4.0f, 4.0f, seed ^ 0x71, threads);
  st_fill_uniform(c->h_k, ST_DTYPE_FP8_E4M3, k_bytes, -4.0f, 4.0f, seed ^ 0x6b, threads);
  st_fill_uniform(c->h_w, ST_DTYPE_FP32, (size_t)g->s_q * (size_t)g->H, -1.0f, 1.0f, seed ^ 0x77, threads);
  no_zeros(c->h_q, q_bytes);
  no_zeros(c->h_k, k_bytes);
  uint64_t rng = seed ^ 0x73;
  /* 2^-3 .. 2^1: scales of both sides of 1, exact in fp32. */
  for (int j = 0; j < g->s_kv; j++)
    c->h_scale[j] = (float)(0.125 + 1.875 * (double)st_rand_below(&rng, 1u << 20) / (1u << 20));
  if (g->nan)
    for (size_t i = NAN_STRIDE - 1; i < k_bytes; i += NAN_STRIDE) c->h_k[i] = FP8_NAN;
  memcpy(c->h_ks, g->ks, sizeof(int32_t) * (size_t)g->s_q);
  memcpy(c->h_ke, g->ke, sizeof(int32_t) * (size_t)g->s_q);
}

static st_status upload_inputs(dl_case *c, const dl_geometry *g, st_err *err) {
  const size_t q_bytes = (size_t)g->s_q * (size_t)g->H * HEAD_DIM, k_bytes = (size_t)g->s_kv * (size_t)g->k_stride;
  const size_t out_bytes = (size_t)g->s_q * (size_t)g->out_stride * 4;
  st_status s;
  if ((s = st_case_upload(c->cu, &c->d_q, c->h_q, q_bytes, err)) ||
      (s = st_case_upload(c->cu, &c->d_k, c->h_k, k_bytes, err)) ||
      (s = st_case_upload(c->cu, &c->d_w, c->h_w, (size_t)g->s_q * (size_t)g->H * 4, err)) ||
      (s = st_case_upload(c->cu, &c->d_scale, c->h_scale, (size_t)g->s_kv * 4, err)) ||
      (s = st_case_upload(c->cu, &c->d_ks, c->h_ks, (size_t)g->s_q * 4, err)) ||
      (s = st_case_upload(c->cu, &c->d_ke, c->h_ke, (size_t)g->s_q * 4, err)))
    return s;
  CUresult rc = c->cu->cuMemAlloc(&c->d_out, out_bytes);
  if (rc != CUDA_SUCCESS) return st_cu_fail(c->cu, rc, "cuMemAlloc", err);
  st_dsa_index_logits_args *a = &c->args;
  *a = g->args;
  a->q.data = (void *)(uintptr_t)c->d_q;
  a->k.data = (void *)(uintptr_t)c->d_k;
  a->k_scale.data = (void *)(uintptr_t)c->d_scale;
  a->weights.data = (void *)(uintptr_t)c->d_w;
  a->ks.data = (void *)(uintptr_t)c->d_ks;
  a->ke.data = (void *)(uintptr_t)c->d_ke;
  a->logits.data = (void *)(uintptr_t)c->d_out;
  return st_dsa_index_logits_check_args(a, err);
}

static st_status case_build(dl_case *c, const dl_geometry *g, const st_case_opts *o, st_err *err) {
  const size_t q_bytes = (size_t)g->s_q * (size_t)g->H * HEAD_DIM, k_bytes = (size_t)g->s_kv * (size_t)g->k_stride;
  const size_t cells = (size_t)g->s_q * (size_t)g->s_kv;
  c->h_q = malloc(q_bytes);
  c->h_k = malloc(k_bytes);
  c->h_w = malloc((size_t)g->s_q * (size_t)g->H * 4);
  c->h_scale = malloc((size_t)g->s_kv * 4);
  c->h_ks = malloc((size_t)g->s_q * 4);
  c->h_ke = malloc((size_t)g->s_q * 4);
  c->logits = malloc(sizeof(double) * cells);
  c->row_scale = malloc(sizeof(double) * (size_t)g->s_q);
  c->h_out = malloc((size_t)g->s_q * (size_t)g->out_stride * 4);
  if (!c->h_q || !c->h_k || !c->h_w || !c->h_scale || !c->h_ks || !c->h_ke || !c->logits || !c->row_scale || !c->h_out)
    return st_fail(err, ST_ERR_NOMEM, "out of host memory for a case of %zu logits", cells);
  fill_inputs(c, g, o->seed, o->threads);
  c->out_stride = g->out_stride;
  c->ref = (st_ref_dsa_index_logits){.s_q = g->s_q,
                                     .s_kv = g->s_kv,
                                     .H = g->H,
                                     .k_stride = g->k_stride,
                                     .q = c->h_q,
                                     .weights = c->h_w,
                                     .k = c->h_k,
                                     .k_scale = c->h_scale,
                                     .ks = c->h_ks,
                                     .ke = c->h_ke};
  if (st_ref_dsa_index_logits_compute(&c->ref, c->logits, c->row_scale, o->threads) != 0)
    return st_fail(err, ST_ERR_NOMEM, "the reference could not run (memory)");
  return upload_inputs(c, g, err);
}

static st_status case_create(const st_cu *cu, const st_device_info *dev, const st_params *shape, const st_case_opts *o,
                             void **out, st_err *err) {
  dl_geometry g;
  st_status s = read_geometry(shape, &g, err);
  dl_case *c = s == ST_OK ? calloc(1, sizeof *c) : NULL;
  if (s == ST_OK && !c) s = st_fail(err, ST_ERR_NOMEM, "out of host memory");
  if (s == ST_OK) {
    c->cu = cu;
    c->dev = *dev;
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
  dl_geometry g;
  const st_status s = read_geometry(shape, &g, err);
  free(g.ks);
  free(g.ke);
  if (s != ST_OK) return s;
  st_dsa_index_logits_args *a = args;
  *a = g.args;
  st_tensor *const t[] = {&a->q, &a->k, &a->k_scale, &a->weights, &a->ks, &a->ke, &a->logits};
  st_case_stand_ins(t, sizeof t / sizeof t[0]);
  return ST_OK;
}

static void unbind(void *p) { free(p); }

static st_status bind(void *pc, const st_params *kernel, const st_params *launch, CUmodule mod, void **out,
                      st_err *err) {
  dl_case *c = pc;
  dl_bound *b = calloc(1, sizeof *b);
  if (!b) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  b->c = c;
  st_status s;
  if ((s = st_dsa_index_logits_config_from_params(kernel, launch, &b->cfg, err)) ||
      (s = st_dsa_index_logits_plan_make(&b->cfg, &c->args, c->dev.sm_count, &b->plan, err))) {
    unbind(b);
    return s;
  }
  const CUresult rc = c->cu->cuModuleGetFunction(&b->fn, mod, ST_DSA_INDEX_LOGITS_MAIN_KERNEL);
  if (rc != CUDA_SUCCESS) {
    unbind(b);
    return st_cu_fail(c->cu, rc, "binding dsa_index_logits variant", err);
  }
  *out = b;
  return ST_OK;
}

static st_status bind_runtime(void *pc, void *rt, void **out, st_err *err) {
  dl_case *c = pc;
  dl_bound *b = calloc(1, sizeof *b);
  if (!b) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  b->c = c;
  b->rt = rt;
  size_t bytes = 0;
  st_status s = st_dsa_index_logits_workspace_size(rt, &c->args, &bytes);
  if (s == ST_OK) s = st_dsa_index_logits_prepare(rt, &c->args);
  if (s == ST_OK && bytes)
    s = st_fail(err, ST_ERR_UNSUPPORTED, "dsa_index_logits asked for %zu bytes of workspace", bytes);
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
  dl_bound *b = pb;
  if (b->rt) {
    const st_status s = st_dsa_index_logits(b->rt, &b->c->args, NULL, 0, stream);
    return s == ST_OK ? ST_OK : st_fail(err, s, "runtime: %s", st_last_error(b->rt));
  }
  return st_dsa_index_logits_launch(b->c->cu, b->fn, &b->plan, stream, err);
}

/* fp32 accumulation of 128 exact fp8 products and of H weighted heads:
 * errors of a few 2^-24 x (128 + H) of the sum of absolute terms, which the
 * row's scale bounds; a wrong token, head or scale is off by far more. */
#define REL_TOL 1e-4

static int is_poison(float v) {
  uint32_t bits;
  memcpy(&bits, &v, 4);
  return bits == POISON || bits == POISON + 1;
}

/* Every element of a row written (none left poisoned) up to s_kv and none
 * past it, then the values against the reference. */
static int check(void *pc, double *worst, char *why, size_t cap) {
  const dl_case *c = pc;
  int bad = 0;
  for (int i = 0; i < c->ref.s_q && !bad; i++) {
    const float *row = c->h_out + (int64_t)i * c->out_stride;
    for (int64_t j = 0; j < c->out_stride; j++) {
      if (is_poison(row[j]) == (j >= c->ref.s_kv)) continue;
      snprintf(why, cap, "query %d element %lld %s (s_kv %d, row stride %lld)", i, (long long)j,
               j < c->ref.s_kv ? "was not written" : "past s_kv was written", c->ref.s_kv, (long long)c->out_stride);
      bad++;
      break;
    }
  }
  if (bad) {
    *worst = INFINITY;
    return bad;
  }
  return st_ref_dsa_index_logits_verify(&c->ref, c->logits, c->row_scale, c->h_out, c->out_stride, REL_TOL, worst, why,
                                        cap);
}

static st_status verify(void *pb, CUstream stream, int *ok, double *max_err, char *msg, size_t cap, st_err *err) {
  dl_case *c = ((dl_bound *)pb)->c;
  const size_t n = (size_t)c->ref.s_q * (size_t)c->out_stride;
  const st_verify_out out = {.buf = {{c->d_out, c->h_out, n, 4, POISON}}, .check = check, .ctx = c, .item = "logit"};
  return st_verify_twice(c->cu, stream, launch, pb, &out, ok, max_err, msg, cap, err);
}

/* Query rows with their visible tokens, in all. */
static double visible_pairs(const dl_case *c) {
  double pairs = 0;
  for (int i = 0; i < c->ref.s_q; i++) {
    int lo, hi;
    st_ref_dsa_index_logits_range(&c->ref, i, &lo, &hi);
    pairs += hi - lo;
  }
  return pairs;
}

/* q, weights, ranges, k rows and their scales once each; every logit
 * written once. */
static double min_bytes(const void *pc) {
  const dl_case *c = pc;
  const double s_q = c->ref.s_q, s_kv = c->ref.s_kv;
  return s_q * c->ref.H * (HEAD_DIM + 4) + s_q * 8 + s_kv * (HEAD_DIM + 4) + s_q * s_kv * 4;
}

/* 2 x H x 128 per visible (query, token) pair: each token counted alone,
 * not whole 128-token blocks as index_score's count (docs/method.md) has
 * it, since the op's ranges end at any token. */
static double flops(const void *pc) {
  const dl_case *c = pc;
  return visible_pairs(c) * 2.0 * c->ref.H * HEAD_DIM;
}

const st_op_harness st_dsa_index_logits_harness = {
    .op = ST_DSA_INDEX_LOGITS_OP,
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
    .flops = flops,
    .bench_iters = 10,
};
