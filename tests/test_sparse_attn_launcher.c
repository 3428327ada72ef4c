/* The sparse_attn (prefill) launcher: bad arguments are refused with a
 * message naming the argument and value; variants fit or not for the right
 * reasons; the plan's grid, block and shared memory are what the kernel
 * expects. No GPU needed: pointers are fake and never dereferenced. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/op.h"
#include "ops/sparse_attn.h"
#include "ops/tensor_check.h"
#include "testutil.h"

#define FAKE(p) ((void *)(uintptr_t)(p))

enum { R = 3, TOTAL_Q = 5000, HQ = 32, HKV = 2, D = 128, TOPK = 16, PAGES = 4096, BT_COLS = 512 };

static st_sparse_attn_args valid_args(void) {
  st_sparse_attn_args a;
  memset(&a, 0, sizeof a);
  st_tensor_contiguous(&a.q, FAKE(0x10000), ST_DTYPE_BF16, 3, (int64_t[]){TOTAL_Q, HQ, D});
  /* (pages, 2, 128, Hkv, D) */
  st_tensor_contiguous(&a.k_cache, FAKE(0x100000000ull), ST_DTYPE_BF16, 4, (int64_t[]){PAGES, HKV, 128, D});
  const int64_t stride[4] = {2 * 128 * HKV * D, D, HKV * D, 1};
  memcpy(a.k_cache.stride, stride, sizeof stride);
  a.v_cache = a.k_cache;
  a.v_cache.data = FAKE(0x100000000ull + 128 * HKV * D * 2);
  st_tensor_contiguous(&a.topk_idx, FAKE(0x50000), ST_DTYPE_INT32, 3, (int64_t[]){HKV, TOTAL_Q, TOPK});
  st_tensor_contiguous(&a.block_table, FAKE(0x30000), ST_DTYPE_INT32, 2, (int64_t[]){R, BT_COLS});
  st_tensor_contiguous(&a.cu_seqlens_q, FAKE(0x38000), ST_DTYPE_INT32, 1, (int64_t[]){R + 1});
  st_tensor_contiguous(&a.seq_lens, FAKE(0x40000), ST_DTYPE_INT32, 1, (int64_t[]){R});
  st_tensor_contiguous(&a.o, FAKE(0x60000), ST_DTYPE_BF16, 3, (int64_t[]){TOTAL_Q, HQ, D});
  a.sm_scale = 0.088f;
  a.max_context = 65536;
  return a;
}

static void expect_refused(const st_sparse_attn_args *a, st_status want, const char *fragment) {
  st_err err = {{0}};
  st_status s = st_sparse_attn_check_args(a, &err);
  if (s != want || !strstr(err.msg, fragment))
    fail_msg("expected status %d with '%s', got status %d: '%s'", (int)want, fragment, (int)s, err.msg);
}

static void test_valid_arguments_pass(void **state) {
  (void)state;
  st_err err = {{0}};
  st_sparse_attn_args a = valid_args();
  assert_int_equal(st_sparse_attn_check_args(&a, &err), ST_OK);
  st_tensor_contiguous(&a.lse, FAKE(0x70000), ST_DTYPE_FP32, 2, (int64_t[]){TOTAL_Q, HQ});
  assert_int_equal(st_sparse_attn_check_args(&a, &err), ST_OK);
}

static void test_bad_arguments_are_refused_by_name(void **state) {
  (void)state;
  const st_status I = ST_ERR_INVALID_ARG, U = ST_ERR_UNSUPPORTED;
  st_sparse_attn_args a;
  a = valid_args();
  a.sm_scale = -1;
  expect_refused(&a, I, "sm_scale=-1 must be positive");
  a = valid_args();
  a.q.dtype = ST_DTYPE_FP8_E4M3;
  expect_refused(&a, I, "q.dtype=2");
  a = valid_args();
  a.q.shape[2] = a.o.shape[2] = 32;
  expect_refused(&a, U, "head_dim=32");
  a = valid_args();
  a.k_cache.shape[2] = 64;
  expect_refused(&a, I, "k_cache.shape");
  a = valid_args();
  a.v_cache.stride[1] = 3;
  expect_refused(&a, I, "v_cache.stride[1]=3");
  a = valid_args();
  a.cu_seqlens_q.shape[0] = R;
  expect_refused(&a, I, "cu_seqlens_q.shape[0]=3 must be the 3 requests + 1");
  a = valid_args();
  a.cu_seqlens_q.dtype = ST_DTYPE_FP32;
  expect_refused(&a, I, "cu_seqlens_q.dtype");
  a = valid_args();
  a.seq_lens.shape[0] = R + 1;
  expect_refused(&a, I, "seq_lens.shape[0]=4");
  a = valid_args();
  a.topk_idx.shape[1] = TOTAL_Q - 1;
  expect_refused(&a, I, "topk_idx.shape");
  a = valid_args();
  a.topk_idx.shape[2] = 65;
  expect_refused(&a, I, "topk=65");
  a = valid_args();
  a.max_context = BT_COLS * 128 + 1;
  expect_refused(&a, I, "max_context=65537 is outside");
  a = valid_args();
  a.o.shape[0] = TOTAL_Q + 1;
  expect_refused(&a, I, "o.shape");
  a = valid_args();
  st_tensor_contiguous(&a.lse, FAKE(0x70000), ST_DTYPE_FP32, 2, (int64_t[]){TOTAL_Q, 2});
  expect_refused(&a, I, "lse.shape=[5000,2] must be [total_q=5000, Hq=32]");
  a = valid_args();
  a.scale_mode = ST_KV_SCALE_TENSOR;
  expect_refused(&a, I, "fp8 caches only");
  a = valid_args();
  a.q.shape[1] = a.o.shape[1] = 31;
  expect_refused(&a, I, "not a multiple of Hkv=2");
  expect_refused(NULL, I, "args is NULL");
}

static st_sparse_attn_config config(const char *dtype, int group, int tokens, int topk, int stages) {
  st_params k = {0}, l = {0};
  st_err err = {{0}};
  st_params_set(&k, "dtype", dtype, &err);
  st_params_set_int(&k, "head_dim", D, &err);
  st_params_set_int(&k, "group", group, &err);
  st_params_set_int(&k, "tokens", tokens, &err);
  st_params_set_int(&k, "topk", topk, &err);
  st_params_set_int(&k, "stages", stages, &err);
  st_sparse_attn_config c;
  if (st_sparse_attn_config_from_params(&k, &l, &c, &err) != ST_OK) fail_msg("%s", err.msg);
  return c;
}

static void test_variant_parameters_and_fit(void **state) {
  (void)state;
  st_err err = {{0}};
  st_params k = {0}, l = {0};
  st_sparse_attn_config c;
  st_params_set(&k, "dtype", "bf16", &err);
  st_params_set_int(&k, "head_dim", D, &err);
  st_params_set_int(&k, "group", 16, &err);
  st_params_set_int(&k, "tokens", 6, &err);
  st_params_set_int(&k, "topk", 16, &err);
  st_params_set_int(&k, "stages", 1, &err);
  assert_int_equal(st_sparse_attn_config_from_params(&k, &l, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "powers of two"));
  st_params_set_int(&k, "tokens", 32, &err);
  assert_int_equal(st_sparse_attn_config_from_params(&k, &l, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "512 q rows, more than 128"));

  st_sparse_attn_args a = valid_args();
  c = config("bf16", 16, 8, 16, 2);
  assert_int_equal(st_sparse_attn_check_fit(&c, &a, &err), ST_OK);
  c = config("fp8", 16, 8, 16, 2);
  assert_int_equal(st_sparse_attn_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "fp8 cache, call has bf16"));
  c = config("bf16", 8, 8, 16, 2);
  assert_int_equal(st_sparse_attn_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "8 q heads per kv head"));
  a.topk_idx.shape[2] = 20;
  c = config("bf16", 16, 8, 16, 2);
  assert_int_equal(st_sparse_attn_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "topk <= 16, call has 20"));
}

/* The kernel's layout (templates/sparse_attn.cu): q tile, K/V stages, then
 * the selection lists of the tile's union of blocks. */
static void test_plan_and_shared_memory_follow_the_kernel(void **state) {
  (void)state;
  st_err err = {{0}};
  st_sparse_attn_config c = config("bf16", 16, 8, 16, 2);
  const unsigned entries = 8 * 16, lists = entries * 16 + 2 * entries * 12 + entries * 8 * 4 + 8 * 8;
  assert_int_equal(st_sparse_attn_smem_bytes(&c), 8 * 16 * D * 2 + 2 * 2 * 128 * D * 2 + lists);
  assert_int_equal(st_sparse_attn_threads(&c), 256); /* 128 q rows: 8 warps */
  c = config("bf16", 1, 16, 16, 1);
  assert_int_equal(st_sparse_attn_threads(&c), 128); /* 16 rows: one math warp, four for the copies */
  c = config("bf16", 2, 4, 64, 1);
  assert_int_equal(st_sparse_attn_threads(&c), 128); /* 8 rows padded to one m-tile */
  assert_int_equal(st_sparse_attn_smem_bytes(&c),
                   16 * D * 2 + 2 * 128 * D * 2 + 256 * 16 + 512 * 12 + 256 * 4 * 4 + 4 * 8);
  st_sparse_attn_args a = valid_args();
  st_sparse_attn_plan p;
  c = config("bf16", 16, 8, 16, 2);
  assert_int_equal(st_sparse_attn_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.grid[0], (TOTAL_Q + 7) / 8);
  assert_int_equal(p.grid[1], HKV);
  assert_int_equal(p.block, 256);
  assert_int_equal(p.workspace_bytes, 0);
  assert_int_equal(p.params.total_q, TOTAL_Q);
  assert_int_equal(p.params.num_requests, R);
  assert_int_equal(p.params.max_blocks, 512);
  assert_float_equal(p.params.score_scale_log2, 0.088 * 1.4426950408889634, 1e-6);
}

/* chunk, overlap < 0: the launch parameter is absent. */
static st_status block_config_ov(const char *part, int ctas, int tokens, int stages, int chunk, int overlap,
                                 st_sparse_attn_config *c, st_err *err) {
  st_params k = {0}, l = {0};
  st_params_set(&k, "algo", "block", err);
  st_params_set(&k, "dtype", "bf16", err);
  st_params_set_int(&k, "head_dim", D, err);
  st_params_set_int(&k, "group", 16, err);
  st_params_set_int(&k, "tokens", tokens, err);
  st_params_set_int(&k, "topk", 16, err);
  st_params_set_int(&k, "stages", stages, err);
  st_params_set(&k, "part", part, err);
  st_params_set_int(&k, "ctas", ctas, err);
  st_params_set_int(&k, "mtiles", 1, err);
  if (chunk >= 0) st_params_set_int(&l, "chunk", chunk, err);
  if (overlap >= 0) st_params_set_int(&l, "overlap", overlap, err);
  return st_sparse_attn_config_from_params(&k, &l, c, err);
}

static st_status block_config(const char *part, int ctas, int tokens, int stages, int chunk, st_sparse_attn_config *c,
                              st_err *err) {
  return block_config_ov(part, ctas, tokens, stages, chunk, -1, c, err);
}

/* Block-major variants (templates/sparse_attn_block.cu): parameters, fit
 * at any topk, the chunked workspace, the persistent grid, and the
 * launcher's refusals before anything reaches the driver. */
static void test_block_major_variants_plan_chunks_and_workspace(void **state) {
  (void)state;
  st_err err = {{0}};
  st_sparse_attn_config c;
  assert_int_equal(block_config("f16", 1, 8, 1, 0, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "part='f16' is not bf16 or f32"));
  assert_int_equal(block_config("bf16", 3, 8, 1, 0, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "ctas"));
  assert_int_equal(block_config("bf16", 1, 8, 1, 100, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "chunk=100 is not a multiple of 64"));
  assert_int_equal(block_config("bf16", 2, 8, 1, -1, &c, &err), ST_OK); /* no chunk: 0, by the budget */
  assert_int_equal(c.algo, ST_SPARSE_ATTN_BLOCK);
  assert_int_equal(c.chunk_q, 0);
  assert_int_equal(c.ctas, 2);
  /* The q tile and one block per stage. */
  assert_int_equal(st_sparse_attn_smem_bytes(&c), 8 * 16 * D * 2 + 2 * 128 * D * 2);
  assert_int_equal(st_sparse_attn_threads(&c), 256);
  c.mtiles = 2; /* two m-tiles a warp: 128 rows on 4 warps */
  assert_int_equal(st_sparse_attn_threads(&c), 128);
  assert_int_equal(st_sparse_attn_smem_bytes(&c), 8 * 16 * D * 2 + 2 * 128 * D * 2);
  /* wgmma: a warpgroup (4 warps) per 64 rows; 1024 bytes to align the panels;
   * bf16 with one stage: two q tiles (the next item's q loads under this
   * item's math). */
  c.mtiles = 1;
  c.wgmma = 1;
  assert_int_equal(st_sparse_attn_threads(&c), 256);
  assert_int_equal(c.stages, 1);
  assert_int_equal(st_sparse_attn_smem_bytes(&c), 2 * 8 * 16 * D * 2 + 2 * 128 * D * 2 + 1024);
  c.stages = 2;
  assert_int_equal(st_sparse_attn_smem_bytes(&c), 2 * (8 * 16 * D * 2 + 2 * 128 * D * 2) + 1024);
  c.stages = 1;
  c.tokens = 4;
  assert_int_equal(st_sparse_attn_threads(&c), 128);
  /* Two passes (mtiles 2): one warpgroup takes 128 rows in two turns, in
   * one q tile whose halves are the double buffer; a producer warp copies. */
  c.tokens = 8;
  c.mtiles = 2;
  assert_int_equal(st_sparse_attn_threads(&c), 160);
  assert_int_equal(st_sparse_attn_smem_bytes(&c), 8 * 16 * D * 2 + 2 * 128 * D * 2 + 1024);
  /* fp8: the raw rows land in the bf16 tiles' upper half and are widened in
   * place; the block's 128 K and 128 V scales follow the tiles. */
  c.dtype = ST_DTYPE_FP8_E4M3;
  assert_int_equal(st_sparse_attn_smem_bytes(&c), 8 * 16 * D * 2 + 2 * 128 * D * 2 + 2 * 128 * 4 + 1024);
  c.dtype = ST_DTYPE_BF16;
  c.mtiles = 1;
  st_params k = {0}, l = {0};
  st_params_set(&k, "algo", "block", &err);
  st_params_set(&k, "dtype", "bf16", &err);
  st_params_set_int(&k, "head_dim", 64, &err);
  st_params_set_int(&k, "group", 16, &err);
  st_params_set_int(&k, "tokens", 8, &err);
  st_params_set_int(&k, "topk", 16, &err);
  st_params_set_int(&k, "stages", 1, &err);
  st_params_set(&k, "part", "bf16", &err);
  st_params_set_int(&k, "ctas", 1, &err);
  st_params_set(&k, "mma", "wgmma", &err);
  assert_int_equal(st_sparse_attn_config_from_params(&k, &l, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "mma=wgmma needs head_dim 128"));
  st_params_set_int(&k, "head_dim", 128, &err);
  assert_int_equal(st_sparse_attn_config_from_params(&k, &l, &c, &err), ST_OK);
  assert_int_equal(c.wgmma, 1);
  st_params_set_int(&k, "mtiles", 2, &err);
  assert_int_equal(st_sparse_attn_config_from_params(&k, &l, &c, &err), ST_OK);
  assert_int_equal(c.mtiles, 2);
  st_params_set_int(&k, "stages", 2, &err);
  assert_int_equal(st_sparse_attn_config_from_params(&k, &l, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "mma=wgmma and mtiles=2 need one stage"));
  st_params_set_int(&k, "stages", 1, &err);
  st_params_set_int(&k, "tokens", 4, &err);
  assert_int_equal(st_sparse_attn_config_from_params(&k, &l, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "tokens*group a multiple of 64 x mtiles, not 128 and 64 (mtiles 2)"));
  st_params_set_int(&k, "tokens", 8, &err);
  st_params_set_int(&k, "mtiles", 1, &err);
  st_params_set(&k, "mma", "tensor", &err);
  assert_int_equal(st_sparse_attn_config_from_params(&k, &l, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "mma='tensor' is not sync or wgmma"));
  k = (st_params){0};
  st_params_set(&k, "algo", "blocks", &err);
  assert_int_equal(st_sparse_attn_config_from_params(&k, &l, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "algo='blocks' is not tile or block"));

  st_sparse_attn_args a = valid_args();
  a.topk_idx.shape[2] = 40; /* no list capacity: any topk fits */
  assert_int_equal(block_config("bf16", 1, 8, 2, 0, &c, &err), ST_OK);
  assert_int_equal(st_sparse_attn_check_fit(&c, &a, &err), ST_OK);
  a = valid_args();
  st_sparse_attn_plan p;
  assert_int_equal(st_sparse_attn_plan_make(&c, &a, 132, &p, &err), ST_OK);
  /* 5000 tokens x 32 entries x (16 heads x (128 x 2 + 8) bytes of partials
   * + lists) exceed 256 MiB: chunks of a multiple of 64 tokens within it. */
  assert_true(p.chunk_q >= 64 && p.chunk_q < TOTAL_Q && p.chunk_q % 64 == 0);
  { /* Equal chunks: the last one short of the others by less than 64 tokens a chunk. */
    const int passes = (TOTAL_Q + p.chunk_q - 1) / p.chunk_q, last = TOTAL_Q - (passes - 1) * p.chunk_q;
    assert_true(last > p.chunk_q - 64 * passes);
  }
  assert_true(p.workspace_bytes <= ST_SPARSE_ATTN_BLOCK_WS && p.workspace_bytes > ST_SPARSE_ATTN_BLOCK_WS / 2);
  assert_int_equal(p.grid[0], 132); /* persistent: ctas (1) per SM */
  assert_int_equal(p.block, 256);
  const size_t entries = (size_t)HKV * (size_t)p.chunk_q * TOPK;
  assert_true(p.off_part_o + entries * 16 * D * 2 <= p.workspace_bytes);
  assert_true(p.off_part_ml + entries * 16 * 8 <= p.off_part_o);
  assert_int_equal(block_config("f32", 2, 4, 1, 1024, &c, &err), ST_OK);
  assert_int_equal(st_sparse_attn_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.chunk_q, 1024);
  assert_int_equal(p.grid[0], 264);
  assert_true(p.off_part_o + (size_t)HKV * 1024 * TOPK * 16 * D * 4 <= p.workspace_bytes);
  /* A chunk given at launch is the most a pass holds: 5000 tokens in two
   * equal passes of 2560, not 3072 + 1928. */
  assert_int_equal(block_config("bf16", 2, 8, 1, 3072, &c, &err), ST_OK);
  assert_int_equal(st_sparse_attn_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.chunk_q, 2560);

  /* The launcher refuses before touching the driver (cu is not needed). */
  assert_int_equal(
      st_sparse_attn_launch(NULL, (CUfunction)FAKE(8), NULL, &p, FAKE(0x1000), p.workspace_bytes, NULL, NULL, &err),
      ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "needs its merge kernel"));
  assert_int_equal(
      st_sparse_attn_launch(NULL, (CUfunction)FAKE(8), (CUfunction)FAKE(16), &p, FAKE(0x1000), 4096, NULL, NULL, &err),
      ST_ERR_WORKSPACE);
  assert_non_null(strstr(err.msg, "smaller than the"));
}

/* overlap: the same chunks in two workspace halves (offsets within a
 * half), and a side stream required at launch. */
static void test_overlapped_chunks_take_two_workspace_halves(void **state) {
  (void)state;
  st_err err = {{0}};
  st_sparse_attn_config c;
  assert_int_equal(block_config_ov("bf16", 2, 4, 1, 0, 2, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "overlap"));
  assert_int_equal(block_config_ov("bf16", 2, 4, 1, 0, -1, &c, &err), ST_OK);
  assert_int_equal(c.overlap, 0); /* absent: recorded before the parameter */
  const st_sparse_attn_args a = valid_args();
  st_sparse_attn_plan one, two;
  assert_int_equal(st_sparse_attn_plan_make(&c, &a, 132, &one, &err), ST_OK);
  assert_int_equal(one.overlap, 0);
  assert_int_equal(one.workspace_bytes, 65536 + one.half_bytes); /* after the counter area */
  assert_int_equal(block_config_ov("bf16", 2, 4, 1, 0, 1, &c, &err), ST_OK);
  assert_int_equal(c.overlap, 1);
  assert_int_equal(st_sparse_attn_plan_make(&c, &a, 132, &two, &err), ST_OK);
  assert_int_equal(two.overlap, 1);
  assert_int_equal(two.chunk_q, one.chunk_q); /* the budget holds per half */
  assert_int_equal(two.half_bytes, one.half_bytes);
  assert_int_equal(two.workspace_bytes, 65536 + 2 * one.half_bytes);
  assert_int_equal(two.off_part_o, one.off_part_o);
  assert_true(two.half_bytes % 256 == 0); /* the second half starts aligned */
  assert_int_equal(st_sparse_attn_launch(NULL, (CUfunction)FAKE(8), (CUfunction)FAKE(16), &two, FAKE(0x1000),
                                         two.workspace_bytes, NULL, NULL, &err),
                   ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "needs a side stream"));
  const st_side_stream none = {0};
  assert_int_equal(st_sparse_attn_launch(NULL, (CUfunction)FAKE(8), (CUfunction)FAKE(16), &two, FAKE(0x1000),
                                         two.workspace_bytes, NULL, &none, &err),
                   ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "needs a side stream"));
  assert_int_equal(st_sparse_attn_launch(NULL, (CUfunction)FAKE(8), (CUfunction)FAKE(16), &two, FAKE(0x1000),
                                         one.workspace_bytes, NULL, &none, &err),
                   ST_ERR_INVALID_ARG); /* the side stream is checked first; then the size: */
  st_side_stream fake = {.stream = (CUstream)FAKE(32)};
  assert_int_equal(st_sparse_attn_launch(NULL, (CUfunction)FAKE(8), (CUfunction)FAKE(16), &two, FAKE(0x1000),
                                         one.workspace_bytes, NULL, &fake, &err),
                   ST_ERR_WORKSPACE);
  assert_non_null(strstr(err.msg, "smaller than the"));
}

/* A block config with chunk 2048, overlap and launch parameters bulk and
 * first (each absent if NULL). */
static st_status bulk_first_config(const char *part, const char *bulk, const char *first, st_sparse_attn_config *c,
                                   st_err *err) {
  st_params k = {0}, l = {0};
  st_params_set(&k, "algo", "block", err);
  st_params_set(&k, "dtype", "bf16", err);
  st_params_set_int(&k, "head_dim", D, err);
  st_params_set_int(&k, "group", 16, err);
  st_params_set_int(&k, "tokens", 4, err);
  st_params_set_int(&k, "topk", 16, err);
  st_params_set_int(&k, "stages", 1, err);
  st_params_set(&k, "part", part, err);
  st_params_set_int(&k, "ctas", 2, err);
  st_params_set_int(&k, "mtiles", 1, err);
  st_params_set_int(&l, "chunk", 2048, err);
  st_params_set_int(&l, "overlap", 1, err);
  if (bulk) st_params_set(&l, "bulk", bulk, err);
  if (first) st_params_set(&l, "first", first, err);
  return st_sparse_attn_config_from_params(&k, &l, c, err);
}

static st_status bulk_config(const char *part, const char *bulk, st_sparse_attn_config *c, st_err *err) {
  return bulk_first_config(part, bulk, NULL, c, err);
}

/* bulk: the merge by bulk copies (templates/sparse_attn_block.cu, step 3).
 * Its shared memory is the ring of slices (an entry's partials of 8 of the
 * 16 q heads: 2 KiB in bf16), two copies of a pair's (m, l) words with 16
 * bytes of alignment room, and fixed parts; slots that would pass 48 KiB are
 * dropped (fp32 partials: 4 KiB slices). */
static void test_bulk_merge_launch_parameter_and_plan(void **state) {
  (void)state;
  st_err err = {{0}};
  st_sparse_attn_config c;
  const char *bad[] = {"-1", "17", "eight"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(bulk_config("bf16", bad[i], &c, &err), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "bulk"));
  }
  const st_sparse_attn_args a = valid_args();
  st_sparse_attn_plan p;
  assert_int_equal(bulk_config("bf16", NULL, &c, &err), ST_OK);
  assert_int_equal(c.merge_slots, 0); /* absent: recorded before the bulk merge */
  assert_int_equal(st_sparse_attn_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.merge_slots, 0);
  assert_int_equal(p.merge_smem, 0);
  const unsigned pair_bytes = (TOPK * 16 * 8 + 16 + 15) / 16 * 16, fixed = 2 * pair_bytes + 16 + 4 * 8 + 32 * 8;
  assert_int_equal(bulk_config("bf16", "8", &c, &err), ST_OK);
  assert_int_equal(c.merge_slots, 8);
  assert_int_equal(st_sparse_attn_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.merge_slots, 8);
  assert_int_equal(p.merge_smem, fixed + 8 * (8 * D * 2 + 16));
  assert_int_equal(p.merge_grid_cap, 132 * ST_SPARSE_ATTN_BULK_CTAS_PER_SM);
  assert_int_equal(bulk_config("f32", "16", &c, &err), ST_OK);
  assert_int_equal(st_sparse_attn_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.merge_slots, (48 * 1024 - fixed) / (8 * D * 4 + 16)); /* 10 of the 16 fit */
  assert_true(p.merge_smem <= 48 * 1024);
}

/* first: the first chunk's tokens, the rest (5000 - first) in equal chunks
 * of at most `chunk`; the workspace holds the larger. */
static void test_first_chunk_launch_parameter_and_plan(void **state) {
  (void)state;
  st_err err = {{0}};
  st_sparse_attn_config c;
  const char *bad[] = {"-64", "100", "many"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(bulk_first_config("bf16", "8", bad[i], &c, &err), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "first"));
  }
  const st_sparse_attn_args a = valid_args();
  st_sparse_attn_plan p, even;
  assert_int_equal(bulk_first_config("bf16", "8", NULL, &c, &err), ST_OK);
  assert_int_equal(c.first_q, 0); /* absent: recorded before the parameter */
  assert_int_equal(st_sparse_attn_plan_make(&c, &a, 132, &even, &err), ST_OK);
  assert_int_equal(even.first_q, 0);
  assert_int_equal(even.chunk_q, 1728); /* 5000 in 3 chunks of at most 2048, rounded to 64 */
  assert_int_equal(bulk_first_config("bf16", "8", "1024", &c, &err), ST_OK);
  assert_int_equal(c.first_q, 1024);
  assert_int_equal(st_sparse_attn_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.first_q, 1024);
  assert_int_equal(p.chunk_q, 2048); /* 3976 in 2 chunks of at most 2048 (1988 rounds up to 2048) */
  assert_int_equal(bulk_first_config("bf16", "8", "4608", &c, &err), ST_OK);
  assert_int_equal(st_sparse_attn_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.first_q, 4608);
  assert_int_equal(p.chunk_q, 4608); /* the rest, 392 tokens, in one chunk; the first is the larger */
  assert_true(p.workspace_bytes > even.workspace_bytes);
  assert_int_equal(bulk_first_config("bf16", "8", "5056", &c, &err), ST_OK);
  assert_int_equal(st_sparse_attn_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.first_q, 0); /* the whole batch: as without */
  assert_int_equal(p.chunk_q, even.chunk_q);
}

/* A block config of tokens 8, group 16 (mma and mtiles as given: wgmma 2
 * is the bf16 two-pass kernel) with launch parameter dense (absent if
 * NULL). */
static st_status dense_config(const char *dtype, const char *mma, int mtiles, const char *dense,
                              st_sparse_attn_config *c, st_err *err) {
  st_params k = {0}, l = {0};
  st_params_set(&k, "algo", "block", err);
  st_params_set(&k, "dtype", dtype, err);
  st_params_set_int(&k, "head_dim", D, err);
  st_params_set_int(&k, "group", 16, err);
  st_params_set_int(&k, "tokens", 8, err);
  st_params_set_int(&k, "topk", 16, err);
  st_params_set_int(&k, "stages", 1, err);
  st_params_set(&k, "part", "bf16", err);
  st_params_set_int(&k, "ctas", 2, err);
  st_params_set_int(&k, "mtiles", mtiles, err);
  st_params_set(&k, "mma", mma, err);
  if (dense) st_params_set(&l, "dense", dense, err);
  return st_sparse_attn_config_from_params(&k, &l, c, err);
}

/* dense: the dense tiles (templates/sparse_attn_dense.cuh) on two-pass
 * variants alone; candidates are topk x group tiles (of 128 /
 * group tokens) a kv head and request, their header, flags and list after
 * the chunks' workspace, one dense CTA an SM. */
static void test_dense_launch_parameter_and_plan(void **state) {
  (void)state;
  st_err err = {{0}};
  st_sparse_attn_config c;
  const char *bad[] = {"3", "-1", "yes"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(dense_config("bf16", "wgmma", 2, bad[i], &c, &err), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "dense"));
  }
  assert_int_equal(dense_config("bf16", "sync", 2, "1", &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "dense=1 needs a two-pass wgmma variant"));
  assert_int_equal(dense_config("bf16", "wgmma", 1, "1", &c, &err), ST_ERR_INVALID_ARG);
  st_params k = {0}, l = {0};
  st_params_set(&k, "dtype", "bf16", &err); /* a tile variant */
  st_params_set_int(&k, "head_dim", D, &err);
  st_params_set_int(&k, "group", 16, &err);
  st_params_set_int(&k, "tokens", 8, &err);
  st_params_set_int(&k, "topk", 16, &err);
  st_params_set_int(&k, "stages", 1, &err);
  st_params_set(&l, "dense", "1", &err);
  assert_int_equal(st_sparse_attn_config_from_params(&k, &l, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "dense is for block-major variants"));

  st_sparse_attn_args a = valid_args();
  st_sparse_attn_plan off, on;
  assert_int_equal(dense_config("bf16", "wgmma", 2, NULL, &c, &err), ST_OK);
  assert_int_equal(c.dense, 0); /* absent: recorded before the parameter */
  assert_int_equal(st_sparse_attn_plan_make(&c, &a, 132, &off, &err), ST_OK);
  assert_int_equal(off.dense, 0);
  assert_int_equal(off.params.dense_tiles, 0);
  assert_int_equal(dense_config("bf16", "wgmma", 2, "1", &c, &err), ST_OK);
  assert_int_equal(c.dense, 1);
  assert_int_equal(st_sparse_attn_plan_make(&c, &a, 132, &on, &err), ST_OK);
  assert_int_equal(on.dense, 1);
  assert_int_equal(on.params.dense_tiles, TOPK * 16);
  assert_int_equal(on.dense_cands, HKV * R * TOPK * 16);
  assert_int_equal(on.dense_grid, 132);
  assert_int_equal(on.off_dense, off.workspace_bytes - 65536); /* from the scratch's start */
  assert_int_equal(on.workspace_bytes, off.workspace_bytes + 768 + 2 * HKV * R * TOPK * 16 * 4);
  assert_int_equal(on.chunk_q, off.chunk_q); /* the chunks as without */
  assert_int_equal(on.dense_smem, 2 * 32768 + 2 * 65536 + 1024);
  assert_int_equal(dense_config("fp8", "wgmma", 2, "1", &c, &err), ST_OK); /* widened in place: scales in each stage */
  a.k_cache.dtype = a.v_cache.dtype = ST_DTYPE_FP8_E4M3;
  assert_int_equal(st_sparse_attn_plan_make(&c, &a, 132, &on, &err), ST_OK);
  assert_int_equal(on.dense_smem, 2 * 32768 + 2 * (65536 + 1024) + 1024);
  a.k_cache.dtype = a.v_cache.dtype = ST_DTYPE_BF16;
  /* dense 2 without overlap: after the chunks on the caller's stream, every SM */
  assert_int_equal(dense_config("bf16", "wgmma", 2, "2", &c, &err), ST_OK);
  assert_int_equal(st_sparse_attn_plan_make(&c, &a, 132, &on, &err), ST_OK);
  assert_int_equal(on.dense, 2);
  assert_int_equal(on.dense_grid, 132);
}

static void test_dispatch_key_counts_query_tokens_as_the_batch(void **state) {
  (void)state;
  st_sparse_attn_args a = valid_args();
  char key[256];
  st_params f = {0};
  st_err err = {{0}};
  assert_int_equal(st_sparse_attn_dispatch_key(&a, key, sizeof key, &f, &err), ST_OK);
  assert_string_equal(key, "sparse_attn:B=5000,D=128,Hkv=2,Hq=32,dtype=bf16,topk=16");
  assert_string_equal(st_params_get(&f, "B"), "5000");
}

/* The call's load, which orders the built-in variants (the tile kernel
 * first up to 90 entries a multiprocessor): entries of (token, KV head,
 * block) over the multiprocessors, a token's blocks counted as many as it
 * may attend; a context of more than 6 blocks is the block kernel's
 * whatever the call's size or topk. */
static void test_load_counts_the_blocks_a_token_may_attend(void **state) {
  (void)state;
  const st_op_desc *d = st_op_desc_of(ST_OP_SPARSE_ATTN);
  assert_non_null(d->load);
  st_sparse_attn_args a = valid_args(); /* 5000 tokens, 512 blocks, topk 16 */
  assert_true(d->load(&a, 132) == ST_SPARSE_ATTN_LOAD_MANY);
  a.q.shape[0] = 1; /* one token of 16 blocks: still the block kernel's */
  assert_true(d->load(&a, 132) == ST_SPARSE_ATTN_LOAD_MANY);
  a.max_context = 128; /* one block */
  assert_true(fabs(d->load(&a, 132) - 2.0 / 132) < 1e-12);
  a.q.shape[0] = 1024, a.max_context = 6 * 128 - 5; /* 6 blocks */
  assert_true(fabs(d->load(&a, 132) - 1024.0 * 2 * 6 / 132) < 1e-9);
  a.max_context = 6 * 128 + 1; /* 7 */
  assert_true(d->load(&a, 132) == ST_SPARSE_ATTN_LOAD_MANY);
  a.max_context = 6 * 128, a.topk_idx.shape[2] = 4; /* topk bounds a token's blocks */
  assert_true(fabs(d->load(&a, 1) - 1024.0 * 2 * 4) < 1e-9);
  a.max_context = 14 * 128; /* topk 4 of 14 blocks: the tile CTA may walk all 14 */
  assert_true(d->load(&a, 132) == ST_SPARSE_ATTN_LOAD_MANY);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_valid_arguments_pass),
      cmocka_unit_test(test_load_counts_the_blocks_a_token_may_attend),
      cmocka_unit_test(test_bad_arguments_are_refused_by_name),
      cmocka_unit_test(test_variant_parameters_and_fit),
      cmocka_unit_test(test_plan_and_shared_memory_follow_the_kernel),
      cmocka_unit_test(test_block_major_variants_plan_chunks_and_workspace),
      cmocka_unit_test(test_overlapped_chunks_take_two_workspace_halves),
      cmocka_unit_test(test_bulk_merge_launch_parameter_and_plan),
      cmocka_unit_test(test_first_chunk_launch_parameter_and_plan),
      cmocka_unit_test(test_dense_launch_parameter_and_plan),
      cmocka_unit_test(test_dispatch_key_counts_query_tokens_as_the_batch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
