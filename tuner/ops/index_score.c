/* tuner/ops/index_score.c - builds index_score (prefill block scores) cases
 * and checks variants on them. A shape lists its requests as
 * "q_len:prefix;..."; inputs follow ../shared/anchors.md: an index-K pool of
 * max(4096, min(blocks of all requests, 65536)) pages, block tables
 * uniformly random over it, q and K uniform random (bf16 in [-1, 1), fp8 in
 * [-4, 4)), every 4099th pool value a NaN (a NaN product never wins a max).
 * The score rows are 3 columns wider than the blocks (a row stride the
 * kernel must honour) and poisoned with NaN before each launch, so an
 * unwritten visible entry fails. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_harness.h"
#include "ops/case_inputs.h"
#include "ops/index_score.h"
#include "ops/tensor_check.h"
#include "random_fill.h"
#include "reference/index_prefill.h"

#define BLOCK_TOKENS 128
#define SCORE_PAD_COLS 3
#define POOL_NAN_EVERY 4099

typedef struct is_case {
  const st_cu *cu;
  st_device_info dev;
  st_ref_index_prefill ref;
  int total_q, max_context, score_cols;
  float amp;
  void *h_q, *h_pool;
  int32_t *h_cu, *h_seq, *h_bt;
  double *ref_score;
  float *got;
  CUdeviceptr d_q, d_pool, d_bt, d_cu, d_seq, d_score;
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
  CUdeviceptr bufs[] = {c->d_q, c->d_pool, c->d_bt, c->d_cu, c->d_seq, c->d_score};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) c->cu->cuMemFree(bufs[i]);
  free(c->h_q);
  free(c->h_pool);
  free(c->h_cu);
  free(c->h_seq);
  free(c->h_bt);
  free(c->ref_score);
  free(c->got);
  free(c);
}

static st_status read_shape(is_case *c, const st_params *shape, st_err *err) {
  int B = 0, H = 0, D = 0, R = 0;
  st_status st;
  if ((st = st_case_shape_int(shape, "B", 1, 1 << 24, &B, err)) ||
      (st = st_case_shape_int(shape, "H", 1, 256, &H, err)) || (st = st_case_shape_int(shape, "D", 16, 512, &D, err)) ||
      (st = st_case_requests(st_params_get(shape, "reqs"), &c->h_cu, &c->h_seq, &R, &c->total_q, &c->max_context, err)))
    return st;
  if (B != c->total_q)
    return st_fail(err, ST_ERR_INVALID_ARG, "shape B=%d is not the %d query tokens of its requests", B, c->total_q);
  const char *dts = st_params_get(shape, "dtype");
  if (!dts || (strcmp(dts, "bf16") && strcmp(dts, "fp8")))
    return st_fail(err, ST_ERR_INVALID_ARG, "shape dtype='%s' is not bf16 or fp8", dts ? dts : "(missing)");
  const int max_blocks = (c->max_context + BLOCK_TOKENS - 1) / BLOCK_TOKENS;
  int64_t blocks = 0;
  for (int r = 0; r < R; r++) blocks += (c->h_seq[r] + BLOCK_TOKENS - 1) / BLOCK_TOKENS;
  int64_t pages = blocks < 65536 ? blocks : 65536;
  if (pages < 4096) pages = 4096;
  c->score_cols = max_blocks + SCORE_PAD_COLS;
  c->amp = strcmp(dts, "bf16") == 0 ? 1.0f : 4.0f;
  c->ref = (st_ref_index_prefill){.dtype = strcmp(dts, "bf16") == 0 ? ST_DTYPE_BF16 : ST_DTYPE_FP8_E4M3,
                                  .R = R,
                                  .H = H,
                                  .D = D,
                                  .max_blocks = max_blocks,
                                  .bt_cols = max_blocks,
                                  .pages = pages,
                                  .cu_seqlens_q = c->h_cu,
                                  .seq_lens = c->h_seq,
                                  .scale = 0.0883883476483184, /* 1 / sqrt(128): not a power of two */
                                  .topk = 1};
  return ST_OK;
}

/* Random q, pool (with NaNs) and block tables, then the reference scores. */
static st_status fill_inputs(is_case *c, uint64_t seed, int threads, st_err *err) {
  const st_ref_index_prefill *r = &c->ref;
  const size_t eb = (size_t)st_dtype_bytes(r->dtype);
  const size_t q_elems = (size_t)c->total_q * r->H * r->D, pool_elems = (size_t)r->pages * BLOCK_TOKENS * r->D;
  const size_t bt_elems = (size_t)r->R * r->bt_cols, score_elems = (size_t)r->H * c->total_q * r->max_blocks;
  c->h_q = malloc(q_elems * eb);
  c->h_pool = malloc(pool_elems * eb);
  c->h_bt = malloc(bt_elems * 4);
  c->ref_score = malloc(score_elems * sizeof(double));
  c->got = malloc((size_t)r->H * c->total_q * c->score_cols * 4);
  if (!c->h_q || !c->h_pool || !c->h_bt || !c->ref_score || !c->got)
    return st_fail(err, ST_ERR_NOMEM, "out of host memory for a case of %zu pool bytes", pool_elems * eb);
  st_fill_uniform(c->h_q, r->dtype, q_elems, -c->amp, c->amp, seed ^ 0x71, threads);
  st_fill_uniform(c->h_pool, r->dtype, pool_elems, -c->amp, c->amp, seed ^ 0x6b, threads);
  for (size_t e = POOL_NAN_EVERY / 2; e < pool_elems; e += POOL_NAN_EVERY) {
    if (eb == 2)
      ((uint16_t *)c->h_pool)[e] = 0x7fc0; /* bf16 NaN */
    else
      ((uint8_t *)c->h_pool)[e] = 0x7f; /* e4m3 NaN */
  }
  uint64_t rng = seed ^ 0x62;
  for (size_t i = 0; i < bt_elems; i++) c->h_bt[i] = (int32_t)st_rand_below(&rng, (uint64_t)r->pages);
  c->ref.q = c->h_q;
  c->ref.k_pool = c->h_pool;
  c->ref.block_table = c->h_bt;
  if (st_ref_index_score(&c->ref, c->ref_score, threads) != 0)
    return st_fail(err, ST_ERR_NOMEM, "the index_score reference could not run (inputs, threads or memory)");
  return ST_OK;
}

static st_status upload_all(is_case *c, st_err *err) {
  const st_cu *cu = c->cu;
  const st_ref_index_prefill *r = &c->ref;
  const size_t eb = (size_t)st_dtype_bytes(r->dtype);
  const size_t q_elems = (size_t)c->total_q * r->H * r->D, pool_elems = (size_t)r->pages * BLOCK_TOKENS * r->D;
  st_status st;
  if ((st = st_case_upload(cu, &c->d_q, c->h_q, q_elems * eb, err)) ||
      (st = st_case_upload(cu, &c->d_pool, c->h_pool, pool_elems * eb, err)) ||
      (st = st_case_upload(cu, &c->d_bt, c->h_bt, (size_t)r->R * r->bt_cols * 4, err)) ||
      (st = st_case_upload(cu, &c->d_cu, c->h_cu, (size_t)(r->R + 1) * 4, err)) ||
      (st = st_case_upload(cu, &c->d_seq, c->h_seq, (size_t)r->R * 4, err)))
    return st;
  ST_CU_TRY(cu, cu->cuMemAlloc(&c->d_score, (size_t)r->H * c->total_q * c->score_cols * 4), err);
  st_index_score_args *a = &c->args;
  memset(a, 0, sizeof *a);
  st_tensor_contiguous(&a->q, (void *)(uintptr_t)c->d_q, r->dtype, 3, (int64_t[]){c->total_q, r->H, r->D});
  st_tensor_contiguous(&a->k_cache, (void *)(uintptr_t)c->d_pool, r->dtype, 3,
                       (int64_t[]){r->pages, BLOCK_TOKENS, r->D});
  st_tensor_contiguous(&a->block_table, (void *)(uintptr_t)c->d_bt, ST_DTYPE_INT32, 2, (int64_t[]){r->R, r->bt_cols});
  st_tensor_contiguous(&a->cu_seqlens_q, (void *)(uintptr_t)c->d_cu, ST_DTYPE_INT32, 1, (int64_t[]){r->R + 1});
  st_tensor_contiguous(&a->seq_lens, (void *)(uintptr_t)c->d_seq, ST_DTYPE_INT32, 1, (int64_t[]){r->R});
  st_tensor_contiguous(&a->score, (void *)(uintptr_t)c->d_score, ST_DTYPE_FP32, 3,
                       (int64_t[]){r->H, c->total_q, c->score_cols});
  a->scale = (float)r->scale;
  a->max_context = c->max_context;
  return st_index_score_check_args(a, err);
}

static st_status case_create(const st_cu *cu, const st_device_info *dev, const st_params *shape, uint64_t seed,
                             int threads, void **out, st_err *err) {
  is_case *c = calloc(1, sizeof *c);
  if (!c) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  c->cu = cu;
  c->dev = *dev;
  st_status st;
  if ((st = read_shape(c, shape, err)) || (st = fill_inputs(c, seed, threads, err)) || (st = upload_all(c, err))) {
    case_destroy(c);
    return st;
  }
  *out = c;
  return ST_OK;
}

static void unbind(void *p) { free(p); }

static st_status bind(void *pc, const st_params *kernel, const st_params *launch, CUmodule mod, void **out,
                      st_err *err) {
  is_case *c = pc;
  is_bound *b = calloc(1, sizeof *b);
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
  is_bound *b = calloc(1, sizeof *b);
  if (!b) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  b->c = c;
  b->rt = rt;
  size_t bytes = 0;
  st_status s = st_index_score_workspace_size(rt, &c->args, &bytes);
  if (s == ST_OK) s = st_index_score_prepare(rt, &c->args);
  if (s == ST_OK && bytes)
    s = st_fail(err, ST_ERR_UNSUPPORTED, "index_score asked for %zu bytes of workspace", bytes);
  else if (s != ST_OK)
    st_fail(err, s, "runtime: %s", st_last_error(rt));
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

static st_status verify(void *pb, CUstream stream, int *ok, double *max_err, char *msg, size_t cap, st_err *err) {
  is_bound *b = pb;
  is_case *c = b->c;
  const st_cu *cu = c->cu;
  const size_t n = (size_t)c->ref.H * c->total_q * c->score_cols;
  /* fp32 sums of D products: bf16 wgmma accumulates in fp32; e4m3 wgmma
   * keeps fewer accumulator bits (about 14 below the leading one), so fp8
   * gets a tolerance on the scale of D * amp^2 * 2^-13. */
  const double mag = c->ref.D * (double)c->amp * c->amp * c->ref.scale;
  const double atol = c->ref.dtype == ST_DTYPE_BF16 ? 1e-5 * mag : 1.5e-4 * mag;
  const double rtol = c->ref.dtype == ST_DTYPE_BF16 ? 1e-5 : 1e-3;
  *ok = 1;
  *max_err = 0;
  for (int run = 0; run < 2; run++) {
    ST_CU_TRY(cu, cu->cuMemsetD32Async(c->d_score, 0x7fbad000u + (unsigned)run, n, stream), err); /* NaN */
    st_status s = launch(b, stream, err);
    if (s != ST_OK) return s;
    ST_CU_TRY(cu, cu->cuStreamSynchronize(stream), err);
    ST_CU_TRY(cu, cu->cuMemcpyDtoH(c->got, c->d_score, n * 4), err);
    double worst = 0;
    char why[400];
    const int bad = st_ref_index_score_verify(&c->ref, c->ref_score, c->got, (int64_t)c->total_q * c->score_cols,
                                              c->score_cols, atol, rtol, &worst, why, sizeof why);
    if (worst > *max_err) *max_err = worst;
    if (bad) {
      *ok = 0;
      snprintf(msg, cap, "%s%d wrong score%s; first: %s", run ? "on the second launch: " : "", bad, bad == 1 ? "" : "s",
               why);
      return ST_OK;
    }
  }
  return ST_OK;
}

static double visible_blocks(const is_case *c) {
  double blocks = 0;
  for (int i = 0; i < c->total_q; i++) {
    const int pos = st_ref_index_prefill_position(&c->ref, i, NULL);
    blocks += pos >= 0 ? pos / BLOCK_TOKENS + 1 : 0;
  }
  return blocks;
}

/* q once, each request's index-K rows once, the visible scores once. */
static double min_bytes(const void *pc) {
  const is_case *c = pc;
  const double eb = st_dtype_bytes(c->ref.dtype);
  double k_rows = 0;
  for (int r = 0; r < c->ref.R; r++) k_rows += c->h_seq[r];
  return ((double)c->total_q * c->ref.H + k_rows) * c->ref.D * eb + visible_blocks(c) * c->ref.H * 4.0;
}

/* As ../shared/anchors.md counts them: 2 x D x H x 128 per visible block. */
static double flops(const void *pc) {
  const is_case *c = pc;
  return visible_blocks(c) * 2.0 * c->ref.D * c->ref.H * BLOCK_TOKENS;
}

const st_op_harness st_index_score_harness = {
    .op = ST_INDEX_SCORE_OP,
    .case_create = case_create,
    .case_destroy = case_destroy,
    .bind = bind,
    .bind_runtime = bind_runtime,
    .launch = launch,
    .verify = verify,
    .unbind = unbind,
    .min_bytes = min_bytes,
    .flops = flops,
    .bench_iters = 10,
};
