/* ops/index_inputs.c - the inputs of a prefill indexer case (index_inputs.h). */
#include "ops/index_inputs.h"

#include <stdlib.h>
#include <string.h>

#include "ops/case_inputs.h"
#include "ops/tensor_check.h"
#include "random_fill.h"

#define POOL_NAN_EVERY 4099

static st_status read_shape(st_index_case *c, const st_params *shape, int cold, int64_t l2_bytes, st_err *err) {
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
  const int max_blocks = (c->max_context + ST_BLOCK_TOKENS - 1) / ST_BLOCK_TOKENS;
  int64_t blocks = 0;
  for (int r = 0; r < R; r++) blocks += (c->h_seq[r] + ST_BLOCK_TOKENS - 1) / ST_BLOCK_TOKENS;
  int64_t pages = blocks < 65536 ? blocks : 65536;
  if (pages < 4096) pages = 4096;
  pages = st_cold_pool_pages(cold, pages, ST_BLOCK_TOKENS * (int64_t)D * (strcmp(dts, "bf16") == 0 ? 2 : 1), l2_bytes);
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

/* Random q, pool (with NaNs) and block tables (garbage past each request's
 * length: st_case_table_garbage), then the reference scores. */
static st_status fill_inputs(st_index_case *c, uint64_t seed, int threads, st_err *err) {
  const st_ref_index_prefill *r = &c->ref;
  const size_t eb = (size_t)st_dtype_bytes(r->dtype);
  const size_t q_elems = (size_t)c->total_q * r->H * r->D, pool_elems = (size_t)r->pages * ST_BLOCK_TOKENS * r->D;
  const size_t bt_elems = (size_t)r->R * r->bt_cols, score_elems = (size_t)r->H * c->total_q * r->max_blocks;
  c->h_q = malloc(q_elems * eb);
  c->h_pool = malloc(pool_elems * eb);
  c->h_bt = malloc(bt_elems * 4);
  c->ref_score = malloc(score_elems * sizeof(double));
  if (!c->h_q || !c->h_pool || !c->h_bt || !c->ref_score)
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
  st_case_table_garbage(c->h_bt, r->R, r->bt_cols, c->h_seq, r->pages);
  c->ref.q = c->h_q;
  c->ref.k_pool = c->h_pool;
  c->ref.block_table = c->h_bt;
  if (st_ref_index_score(&c->ref, c->ref_score, threads) != 0)
    return st_fail(err, ST_ERR_NOMEM, "the index_score reference could not run (inputs, threads or memory)");
  return ST_OK;
}

static st_status upload(const st_cu *cu, st_index_case *c, st_err *err) {
  const st_ref_index_prefill *r = &c->ref;
  const size_t eb = (size_t)st_dtype_bytes(r->dtype);
  const size_t q_elems = (size_t)c->total_q * r->H * r->D, pool_elems = (size_t)r->pages * ST_BLOCK_TOKENS * r->D;
  st_status st;
  if ((st = st_case_upload(cu, &c->d_q, c->h_q, q_elems * eb, err)) ||
      (st = st_case_upload(cu, &c->d_pool, c->h_pool, pool_elems * eb, err)) ||
      (st = st_case_upload(cu, &c->d_bt, c->h_bt, (size_t)r->R * r->bt_cols * 4, err)) ||
      (st = st_case_upload(cu, &c->d_cu, c->h_cu, (size_t)(r->R + 1) * 4, err)) ||
      (st = st_case_upload(cu, &c->d_seq, c->h_seq, (size_t)r->R * 4, err)))
    return st;
  return ST_OK;
}

st_status st_index_case_shape(const st_params *shape, int cold, int64_t l2_bytes, st_index_case *c, st_err *err) {
  memset(c, 0, sizeof *c);
  return read_shape(c, shape, cold, l2_bytes, err);
}

st_status st_index_case_build(const st_cu *cu, const st_case_opts *o, st_index_case *c, st_err *err) {
  st_status st;
  if ((st = fill_inputs(c, o->seed, o->threads, err)) || (st = upload(cu, c, err))) return st;
  c->cold = (st_cold_tables){
      .own = c->d_bt, .entries = (size_t)c->ref.R * c->ref.bt_cols, .pages = c->ref.pages, .seed = o->seed};
  return ST_OK;
}

void st_index_case_free(const st_cu *cu, st_index_case *c) {
  if (!c) return;
  CUdeviceptr bufs[] = {c->d_q, c->d_pool, c->d_bt, c->d_cu, c->d_seq};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) cu->cuMemFree(bufs[i]);
  st_cold_free(cu, &c->cold);
  free(c->h_q);
  free(c->h_pool);
  free(c->h_cu);
  free(c->h_seq);
  free(c->h_bt);
  free(c->ref_score);
  memset(c, 0, sizeof *c);
}

void st_index_case_tensors(const st_index_case *c, st_tensor *q, st_tensor *k_cache, st_tensor *block_table,
                           st_tensor *cu_seqlens_q, st_tensor *seq_lens) {
  const st_ref_index_prefill *r = &c->ref;
  st_tensor_contiguous(q, NULL, r->dtype, 3, (int64_t[]){c->total_q, r->H, r->D});
  st_tensor_contiguous(k_cache, NULL, r->dtype, 3, (int64_t[]){r->pages, ST_BLOCK_TOKENS, r->D});
  st_tensor_contiguous(block_table, NULL, ST_DTYPE_INT32, 2, (int64_t[]){r->R, r->bt_cols});
  st_tensor_contiguous(cu_seqlens_q, NULL, ST_DTYPE_INT32, 1, (int64_t[]){r->R + 1});
  st_tensor_contiguous(seq_lens, NULL, ST_DTYPE_INT32, 1, (int64_t[]){r->R});
}

void st_index_case_point(const st_index_case *c, st_tensor *q, st_tensor *k_cache, st_tensor *block_table,
                         st_tensor *cu_seqlens_q, st_tensor *seq_lens) {
  q->data = (void *)(uintptr_t)c->d_q;
  k_cache->data = (void *)(uintptr_t)c->d_pool;
  block_table->data = (void *)(uintptr_t)c->d_bt;
  cu_seqlens_q->data = (void *)(uintptr_t)c->d_cu;
  seq_lens->data = (void *)(uintptr_t)c->d_seq;
}

double st_index_case_visible_blocks(const st_index_case *c) {
  double blocks = 0;
  for (int i = 0; i < c->total_q; i++) {
    const int pos = st_ref_index_prefill_position(&c->ref, i, NULL);
    blocks += pos >= 0 ? pos / ST_BLOCK_TOKENS + 1 : 0;
  }
  return blocks;
}

double st_index_case_input_bytes(const st_index_case *c) {
  double k_rows = 0;
  for (int r = 0; r < c->ref.R; r++) k_rows += c->h_seq[r];
  return ((double)c->total_q * c->ref.H + k_rows) * c->ref.D * st_dtype_bytes(c->ref.dtype);
}
