/* tuner/ops/mla_sparse_prefill.c - builds mla_sparse_prefill cases and
 * checks variants on them. Inputs as an engine builds them: q [s_q, Hq,
 * 576] and kv [s_kv, 1, 576] uniform in [-1, 1) bf16; each query token's
 * topk entries distinct random rows of kv (repeats where topk > s_kv);
 * sm_scale 1/sqrt(192) as DeepSeek-V3.2 uses. Shape fields
 * (generator/ops/mla_sparse_prefill.lua): tlen random gives token i a
 * topk_length uniform in 0..topk (the first 0, the last topk); sink 1 an
 * attn_sink uniform in [-2, 2) with head 0 +inf and head 1 -inf; lse and
 * ml ask for those outputs; sel edge mixes into the rows -1 holes, entries
 * >= s_kv and repeats, and gives the first token no valid entry. kv is not
 * paged: cold timing is the warm one. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_harness.h"
#include "ops/case_inputs.h"
#include "ops/mla_sparse_prefill.h"
#include "ops/tensor_check.h"
#include "random_fill.h"
#include "reference/mla_sparse_decode.h"
#include "reference/mla_sparse_prefill.h"
#include "verify_twice.h"

/* The relative L2 error design.md allows for attention outputs. */
#define ATTN_TOL 2e-2

typedef struct msp_case {
  const st_cu *cu;
  st_device_info dev;
  st_ref_mla_sparse_prefill ref; /* host inputs; points at the h_* arrays */
  int s_q, Hq, s_kv, topk, want_lse, want_ml, want_sink, edge, random_tlen;
  uint16_t *h_q, *h_kv;
  int32_t *h_idx, *h_tlen;
  float *h_sink;
  double *ref_o, *ref_lse, *ref_ml;
  uint16_t *got_o;
  float *got_stats; /* [2][s_q][Hq]: lse, then max_logits */
  /* d_stats holds lse and max_logits one after the other, so that one
   * poisoned download checks both */
  CUdeviceptr d_q, d_kv, d_idx, d_tlen, d_sink, d_o, d_stats;
  st_mla_sparse_prefill_args args;
} msp_case;

typedef struct msp_bound {
  msp_case *c;
  st_handle *rt; /* not NULL: launch through the runtime's dispatch */
  st_mla_sparse_prefill_config cfg;
  st_mla_sparse_prefill_plan plan;
  CUfunction main_fn, merge_fn;
  CUdeviceptr ws;
} msp_bound;

static size_t pairs_of(const msp_case *c) { return (size_t)c->s_q * (size_t)c->Hq; }

static void case_destroy(void *p) {
  msp_case *c = p;
  if (!c) return;
  CUdeviceptr bufs[] = {c->d_q, c->d_kv, c->d_idx, c->d_tlen, c->d_sink, c->d_o, c->d_stats};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) c->cu->cuMemFree(bufs[i]);
  void *host[] = {c->h_q,   c->h_kv,    c->h_idx,  c->h_tlen, c->h_sink,
                  c->ref_o, c->ref_lse, c->ref_ml, c->got_o,  c->got_stats};
  for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) free(host[i]);
  free(c);
}

static st_status read_shape(msp_case *c, const st_params *shape, st_err *err) {
  st_status st;
  if ((st = st_case_shape_int(shape, "s_q", 1, ST_MLA_SPARSE_PREFILL_MAX_ROWS, &c->s_q, err)) ||
      (st = st_case_shape_int(shape, "Hq", 16, ST_MLA_SPARSE_DECODE_MAX_HEADS, &c->Hq, err)) ||
      (st = st_case_shape_int(shape, "s_kv", 1, INT32_MAX, &c->s_kv, err)) ||
      (st = st_case_shape_int(shape, "topk", 1, ST_MLA_SPARSE_DECODE_MAX_TOPK, &c->topk, err)) ||
      (st = st_case_shape_int(shape, "lse", 0, 1, &c->want_lse, err)) ||
      (st = st_case_shape_int(shape, "ml", 0, 1, &c->want_ml, err)) ||
      (st = st_case_shape_int(shape, "sink", 0, 1, &c->want_sink, err)))
    return st;
  const char *tlen = st_params_get(shape, "tlen"), *sel = st_params_get(shape, "sel");
  if (!tlen || (strcmp(tlen, "none") && strcmp(tlen, "random")))
    return st_fail(err, ST_ERR_INVALID_ARG, "shape field tlen=%s is not none or random", tlen ? tlen : "(missing)");
  if (!sel || (strcmp(sel, "random") && strcmp(sel, "edge")))
    return st_fail(err, ST_ERR_INVALID_ARG, "shape field sel=%s is not random or edge", sel ? sel : "(missing)");
  c->random_tlen = strcmp(tlen, "random") == 0;
  c->edge = strcmp(sel, "edge") == 0;
  return ST_OK;
}

/* What a shape makes of a call, for case_create and dispatch_args alike:
 * the shape's fields and c->args with every data pointer NULL. */
static st_status read_geometry(msp_case *c, const st_params *shape, st_err *err) {
  const st_status st = read_shape(c, shape, err);
  if (st != ST_OK) return st;
  st_mla_sparse_prefill_args *a = &c->args;
  st_mla_sparse_prefill_args_init(a);
  st_tensor_contiguous(&a->q, NULL, ST_DTYPE_BF16, 3, (int64_t[]){c->s_q, c->Hq, ST_MLA_DIM_QK});
  st_tensor_contiguous(&a->kv, NULL, ST_DTYPE_BF16, 3, (int64_t[]){c->s_kv, 1, ST_MLA_DIM_QK});
  st_tensor_contiguous(&a->indices, NULL, ST_DTYPE_INT32, 3, (int64_t[]){c->s_q, 1, c->topk});
  if (c->random_tlen) st_tensor_contiguous(&a->topk_length, NULL, ST_DTYPE_INT32, 1, (int64_t[]){c->s_q});
  if (c->want_sink) st_tensor_contiguous(&a->attn_sink, NULL, ST_DTYPE_FP32, 1, (int64_t[]){c->Hq});
  st_tensor_contiguous(&a->o, NULL, ST_DTYPE_BF16, 3, (int64_t[]){c->s_q, c->Hq, ST_MLA_DIM_V});
  if (c->want_lse) st_tensor_contiguous(&a->lse, NULL, ST_DTYPE_FP32, 2, (int64_t[]){c->s_q, c->Hq});
  if (c->want_ml) st_tensor_contiguous(&a->max_logits, NULL, ST_DTYPE_FP32, 2, (int64_t[]){c->s_q, c->Hq});
  a->sm_scale = (float)(1.0 / sqrt(192.0));
  return ST_OK;
}

/* Token i's entries: distinct random rows of kv (repeats where topk >
 * s_kv); sel edge then plants the contract's edge cases. `seen` holds
 * s_kv zeros and is left so. */
static void fill_indices(msp_case *c, uint64_t *rng, uint8_t *seen) {
  for (int i = 0; i < c->s_q; i++) {
    int32_t *idx = c->h_idx + (size_t)i * (size_t)c->topk;
    for (int e = 0; e < c->topk; e++) {
      int r = (int)st_rand_below(rng, (uint64_t)c->s_kv);
      for (int tries = 0; seen[r] && c->topk <= c->s_kv && tries < 64; tries++)
        r = (int)st_rand_below(rng, (uint64_t)c->s_kv);
      seen[r] = 1;
      idx[e] = r;
    }
    for (int e = 0; e < c->topk; e++) seen[idx[e]] = 0;
    if (!c->edge) continue;
    for (int e = 0; e < c->topk; e++) {
      const uint64_t r = st_rand_below(rng, 8);
      if (r == 0)
        idx[e] = -1; /* a hole */
      else if (r == 1)
        idx[e] = e % 2 ? c->s_kv : (e % 3 ? INT32_MAX : -7); /* out of range: none */
      else if (r == 2 && e > 0)
        idx[e] = idx[st_rand_below(rng, (uint64_t)e)]; /* a repeat */
    }
    if (i == 0) /* no valid entry */
      for (int e = 0; e < c->topk; e++)
        idx[e] = e % 2 ? -1 : (int32_t)(c->s_kv > INT32_MAX - e ? INT32_MAX : c->s_kv + e);
  }
}

/* q, kv, indices, lengths and sinks on the host, and room for results. */
static st_status fill_host(msp_case *c, uint64_t seed, int threads, st_err *err) {
  const size_t pairs = pairs_of(c), kv_values = (size_t)c->s_kv * ST_MLA_DIM_QK;
  c->h_q = malloc(pairs * ST_MLA_DIM_QK * 2);
  c->h_kv = malloc(kv_values * 2);
  c->h_idx = malloc((size_t)c->s_q * (size_t)c->topk * 4);
  c->h_tlen = malloc((size_t)c->s_q * 4);
  c->h_sink = malloc((size_t)c->Hq * 4);
  c->ref_o = malloc(pairs * ST_MLA_DIM_V * sizeof(double));
  c->ref_lse = malloc(pairs * sizeof(double));
  c->ref_ml = malloc(pairs * sizeof(double));
  c->got_o = malloc(pairs * ST_MLA_DIM_V * 2);
  c->got_stats = malloc(2 * pairs * 4);
  uint8_t *seen = calloc((size_t)c->s_kv, 1);
  if (!c->h_q || !c->h_kv || !c->h_idx || !c->h_tlen || !c->h_sink || !c->ref_o || !c->ref_lse || !c->ref_ml ||
      !c->got_o || !c->got_stats || !seen) {
    free(seen);
    return st_fail(err, ST_ERR_NOMEM, "out of host memory for a case of %d query tokens", c->s_q);
  }
  st_fill_uniform(c->h_q, ST_DTYPE_BF16, pairs * ST_MLA_DIM_QK, -1.f, 1.f, seed ^ 0x71, threads);
  st_fill_uniform(c->h_kv, ST_DTYPE_BF16, kv_values, -1.f, 1.f, seed ^ 0x6b, threads);
  uint64_t rng = seed ^ 0x62;
  fill_indices(c, &rng, seen);
  free(seen);
  for (int i = 0; i < c->s_q; i++) c->h_tlen[i] = (int32_t)st_rand_below(&rng, (uint64_t)c->topk + 1);
  c->h_tlen[0] = 0;
  if (c->s_q > 1) c->h_tlen[c->s_q - 1] = c->topk;
  for (int h = 0; h < c->Hq; h++) c->h_sink[h] = (float)st_rand_below(&rng, 1u << 20) / (float)(1u << 18) - 2.f;
  c->h_sink[0] = INFINITY;
  c->h_sink[1] = -INFINITY;
  return ST_OK;
}

static void fill_reference(msp_case *c) {
  c->ref = (st_ref_mla_sparse_prefill){.s_q = c->s_q,
                                       .h_q = c->Hq,
                                       .s_kv = c->s_kv,
                                       .topk = c->topk,
                                       .q = c->h_q,
                                       .q_stride = {c->args.q.stride[0], c->args.q.stride[1]},
                                       .kv = c->h_kv,
                                       .kv_stride = c->args.kv.stride[0],
                                       .indices = c->h_idx,
                                       .topk_length = c->random_tlen ? c->h_tlen : NULL,
                                       .sink = c->want_sink ? c->h_sink : NULL,
                                       .sm_scale = c->args.sm_scale};
}

static st_status upload_all(msp_case *c, st_err *err) {
  const st_cu *cu = c->cu;
  const size_t pairs = pairs_of(c);
  st_status st;
  if ((st = st_case_upload(cu, &c->d_kv, c->h_kv, (size_t)c->s_kv * ST_MLA_DIM_QK * 2, err)) ||
      (st = st_case_upload(cu, &c->d_q, c->h_q, pairs * ST_MLA_DIM_QK * 2, err)) ||
      (st = st_case_upload(cu, &c->d_idx, c->h_idx, (size_t)c->s_q * (size_t)c->topk * 4, err)) ||
      (c->random_tlen && (st = st_case_upload(cu, &c->d_tlen, c->h_tlen, (size_t)c->s_q * 4, err))) ||
      (c->want_sink && (st = st_case_upload(cu, &c->d_sink, c->h_sink, (size_t)c->Hq * 4, err))))
    return st;
  ST_CU_TRY(cu, cu->cuMemAlloc(&c->d_o, pairs * ST_MLA_DIM_V * 2), err);
  ST_CU_TRY(cu, cu->cuMemAlloc(&c->d_stats, 2 * pairs * 4), err);
  return ST_OK;
}

/* Points c->args at the uploaded buffers (optional ones: 0 when not wanted). */
static void point_args(msp_case *c) {
  st_mla_sparse_prefill_args *a = &c->args;
  a->q.data = (void *)(uintptr_t)c->d_q;
  a->kv.data = (void *)(uintptr_t)c->d_kv;
  a->indices.data = (void *)(uintptr_t)c->d_idx;
  a->topk_length.data = (void *)(uintptr_t)c->d_tlen;
  a->attn_sink.data = (void *)(uintptr_t)c->d_sink;
  a->o.data = (void *)(uintptr_t)c->d_o;
  a->lse.data = c->want_lse ? (void *)(uintptr_t)c->d_stats : NULL;
  a->max_logits.data = c->want_ml ? (void *)(uintptr_t)(c->d_stats + pairs_of(c) * 4) : NULL;
}

static st_status case_create(const st_cu *cu, const st_device_info *dev, const st_params *shape, const st_case_opts *o,
                             void **out, st_err *err) {
  msp_case *c = calloc(1, sizeof *c);
  if (!c) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  c->cu = cu;
  c->dev = *dev;
  st_status st = read_geometry(c, shape, err);
  if (st != ST_OK || (st = fill_host(c, o->seed, o->threads, err)) != ST_OK) goto fail;
  fill_reference(c);
  if (st_ref_mla_sparse_prefill_compute(&c->ref, c->ref_o, c->ref_lse, c->ref_ml, o->threads) != 0) {
    st = st_fail(err, ST_ERR_NOMEM, "the reference could not run (threads or memory)");
    goto fail;
  }
  if ((st = upload_all(c, err)) != ST_OK) goto fail;
  point_args(c);
  if ((st = st_mla_sparse_prefill_check_args(&c->args, err)) != ST_OK) goto fail;
  *out = c;
  return ST_OK;
fail:
  case_destroy(c);
  return st;
}

static st_status dispatch_args(const st_params *shape, void *args, st_err *err) {
  msp_case *c = calloc(1, sizeof *c);
  if (!c) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  const st_status st = read_geometry(c, shape, err);
  if (st == ST_OK) {
    st_mla_sparse_prefill_args *a = args;
    *a = c->args;
    st_tensor *const t[] = {&a->q, &a->kv, &a->indices, &a->topk_length, &a->attn_sink, &a->o, &a->lse, &a->max_logits};
    st_case_stand_ins(t, sizeof t / sizeof t[0]);
  }
  case_destroy(c);
  return st;
}

static void unbind(void *p) {
  msp_bound *b = p;
  if (!b) return;
  if (b->ws) b->c->cu->cuMemFree(b->ws);
  free(b);
}

static st_status bind(void *pc, const st_params *kernel, const st_params *launch, CUmodule mod, void **out,
                      st_err *err) {
  msp_case *c = pc;
  msp_bound *b = calloc(1, sizeof *b);
  if (!b) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  b->c = c;
  st_status s;
  if ((s = st_mla_sparse_prefill_config_from_params(kernel, launch, &b->cfg, err)) ||
      (s = st_mla_sparse_prefill_check_fit(&b->cfg, &c->args, err)) ||
      (s = st_mla_sparse_prefill_plan_make(&b->cfg, &c->args, c->dev.sm_count, &b->plan, err)))
    goto fail;
  CUresult rc = c->cu->cuModuleGetFunction(&b->main_fn, mod, ST_MLA_SPARSE_PREFILL_MAIN_KERNEL);
  if (rc == CUDA_SUCCESS && b->plan.merge_block)
    rc = c->cu->cuModuleGetFunction(&b->merge_fn, mod, ST_MLA_SPARSE_PREFILL_MERGE_KERNEL);
  if (rc != CUDA_SUCCESS) {
    s = st_cu_fail(c->cu, rc, "binding mla_sparse_prefill variant", err);
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
  msp_case *c = pc;
  msp_bound *b = calloc(1, sizeof *b);
  if (!b) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  b->c = c;
  b->rt = rt;
  size_t bytes = 0;
  st_status s = st_mla_sparse_prefill_workspace_size(rt, &c->args, &bytes);
  if (s == ST_OK) s = st_mla_sparse_prefill_prepare(rt, &c->args);
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
  msp_bound *b = pb;
  if (b->rt) {
    st_status s = st_mla_sparse_prefill(b->rt, &b->c->args, (void *)(uintptr_t)b->ws, b->plan.workspace_bytes, stream);
    return s == ST_OK ? ST_OK : st_fail(err, s, "runtime: %s", st_last_error(b->rt));
  }
  return st_mla_sparse_prefill_launch(b->c->cu, b->main_fn, b->merge_fn, &b->plan, (void *)(uintptr_t)b->ws,
                                      b->plan.workspace_bytes, stream, err);
}

static int check(void *pc, double *worst, char *why, size_t cap) {
  const msp_case *c = pc;
  const float *got_lse = c->got_stats, *got_ml = c->got_stats + pairs_of(c);
  return st_ref_mla_sparse_prefill_verify(&c->ref, c->ref_o, c->want_lse ? c->ref_lse : NULL, c->ref_ml, c->got_o,
                                          c->want_lse ? got_lse : NULL, c->want_ml ? got_ml : NULL, ATTN_TOL, worst,
                                          why, cap);
}

static st_status verify(void *pb, CUstream stream, int *ok, double *max_err, char *msg, size_t cap, st_err *err) {
  msp_case *c = ((msp_bound *)pb)->c;
  const size_t pairs = pairs_of(c);
  /* Poison: NaN in o, lse and max_logits, so an unwritten element fails
   * the check. */
  const st_verify_out out = {.buf = {{c->d_o, c->got_o, pairs * ST_MLA_DIM_V, 2, 0x7fc0u},
                                     {c->d_stats, c->got_stats, 2 * pairs, 4, 0x7fc00000u}},
                             .check = check,
                             .ctx = c,
                             .item = "(token, head) pair"};
  return st_verify_twice(c->cu, stream, launch, pb, &out, ok, max_err, msg, cap, err);
}

/* The valid entries of every token (topk_length applied). */
static double valid_entries(const msp_case *c) {
  double n = 0;
  for (int i = 0; i < c->s_q; i++) {
    const int32_t *idx = c->h_idx + (size_t)i * (size_t)c->topk;
    int entries = c->random_tlen ? c->h_tlen[i] : c->topk;
    entries = entries < 0 ? 0 : entries > c->topk ? c->topk : entries;
    for (int e = 0; e < entries; e++) n += idx[e] >= 0 && idx[e] < c->s_kv;
  }
  return n;
}

/* Each valid entry's kv row once per query token (rows repeat across
 * tokens, but a least-bytes count cannot know which stay in L2), the
 * indices, q, o and the optional outputs. */
static double min_bytes(const void *pc) {
  const msp_case *c = pc;
  const double pairs = (double)pairs_of(c);
  double bytes = valid_entries(c) * ST_MLA_DIM_QK * 2 + (double)c->s_q * c->topk * 4;
  bytes += pairs * (ST_MLA_DIM_QK + ST_MLA_DIM_V) * 2;
  bytes += pairs * 4 * (c->want_lse + c->want_ml);
  return bytes;
}

/* 2 x Hq x (576 + 512) per valid entry: q.k and p.v, as FlashMLA counts
 * them. */
static double flops(const void *pc) {
  const msp_case *c = pc;
  return 2.0 * c->Hq * (ST_MLA_DIM_QK + ST_MLA_DIM_V) * valid_entries(c);
}

const st_op_harness st_mla_sparse_prefill_harness = {
    .op = ST_MLA_SPARSE_PREFILL_OP,
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
