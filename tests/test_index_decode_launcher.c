/* The index_decode launcher: bad arguments are refused with a message naming
 * the argument and value; variants fit or not for the right reasons; plans
 * depend only on host-known values and size the workspace and grid as the
 * kernels expect. No GPU needed: pointers are fake and never dereferenced. */
#include <stdio.h>
#include <string.h>

#include "ops/index_decode.h"
#include "ops/op.h"
#include "ops/tensor_check.h"
#include "testutil.h"

#define FAKE(p) ((void *)(uintptr_t)(p))

/* R=8 requests, qlen 2, H=2, D=128, topk 16, 256 blocks of table. */
static st_index_decode_args valid_args(void) {
  st_index_decode_args a;
  memset(&a, 0, sizeof a);
  st_tensor_contiguous(&a.q, FAKE(0x10000), ST_DTYPE_BF16, 3, (int64_t[]){16, 2, 128});
  st_tensor_contiguous(&a.k_cache, FAKE(0x20000), ST_DTYPE_BF16, 3, (int64_t[]){4096, 128, 128});
  st_tensor_contiguous(&a.block_table, FAKE(0x30000), ST_DTYPE_INT32, 2, (int64_t[]){8, 256});
  st_tensor_contiguous(&a.seq_lens, FAKE(0x40000), ST_DTYPE_INT32, 1, (int64_t[]){8});
  st_tensor_contiguous(&a.topk_idx, FAKE(0x50000), ST_DTYPE_INT32, 3, (int64_t[]){2, 16, 16});
  a.qlen = 2;
  a.topk = 16;
  a.init_blocks = 1;
  a.local_blocks = 2;
  a.max_context = 32768;
  return a;
}

static void expect_refused(const st_index_decode_args *a, const char *fragment) {
  st_err err = {{0}};
  st_status s = st_index_decode_check_args(a, &err);
  if (s != ST_ERR_INVALID_ARG || !strstr(err.msg, fragment))
    fail_msg("expected refusal containing '%s', got status %d: '%s'", fragment, (int)s, err.msg);
}

static void test_valid_arguments_pass(void **state) {
  (void)state;
  st_index_decode_args a = valid_args();
  st_err err = {{0}};
  assert_int_equal(st_index_decode_check_args(&a, &err), ST_OK);
}

static void test_bad_arguments_are_refused_by_name(void **state) {
  (void)state;
  st_index_decode_args a;
  a = valid_args(); a.topk = 80; expect_refused(&a, "topk=80 is outside 1..64");
  a = valid_args(); a.topk = 0; expect_refused(&a, "topk=0");
  a = valid_args(); a.qlen = 5; expect_refused(&a, "qlen=5 is outside 1..4");
  a = valid_args(); a.init_blocks = 10; a.local_blocks = 7; expect_refused(&a, "exceeds topk=16");
  a = valid_args(); a.local_blocks = -1; expect_refused(&a, "must not be negative");
  a = valid_args(); a.q.dtype = ST_DTYPE_FP32; expect_refused(&a, "q.dtype=4");
  a = valid_args(); a.k_cache.dtype = ST_DTYPE_FP8_E4M3; expect_refused(&a, "k_cache.dtype");
  a = valid_args(); a.q.ndim = 2; expect_refused(&a, "q.ndim=2");
  a = valid_args(); a.q.shape[0] = 15; expect_refused(&a, "not a multiple of qlen=2");
  a = valid_args(); a.q.stride[2] = 2; expect_refused(&a, "innermost stride must be 1");
  a = valid_args(); a.q.data = NULL; expect_refused(&a, "q.data is NULL");
  a = valid_args(); a.q.data = FAKE(0x10008); expect_refused(&a, "not 16-byte aligned");
  a = valid_args(); a.k_cache.shape[1] = 64; expect_refused(&a, "k_cache.shape");
  a = valid_args(); a.k_cache.shape[2] = 64; expect_refused(&a, "k_cache.shape");
  a = valid_args(); a.k_cache.stride[1] = 129; expect_refused(&a, "k_cache.stride[1]=129");
  a = valid_args(); a.block_table.shape[0] = 7; expect_refused(&a, "block_table.shape[0]=7");
  a = valid_args(); a.block_table.dtype = ST_DTYPE_FP32; expect_refused(&a, "block_table.dtype");
  a = valid_args(); a.seq_lens.shape[0] = 9; expect_refused(&a, "seq_lens.shape[0]=9");
  a = valid_args(); a.topk_idx.shape[2] = 8; expect_refused(&a, "topk_idx.shape");
  a = valid_args(); a.topk_idx.shape[0] = 1; expect_refused(&a, "topk_idx.shape");
  a = valid_args(); a.max_context = 256 * 128 + 1; expect_refused(&a, "max_context=32769 is outside");
  a = valid_args(); a.max_context = 0; expect_refused(&a, "max_context=0");
  a = valid_args(); a.seq_lens.stride[0] = -1; expect_refused(&a, "seq_lens.stride[0]=-1 is negative");
  a = valid_args(); a.pdl = 2; expect_refused(&a, "pdl=2 must be 0 or 1");
  a = valid_args(); a.pdl = -1; expect_refused(&a, "pdl=-1 must be 0 or 1");
  expect_refused(NULL, "args is NULL");
}

static st_index_decode_config config(const char *dtype, int topk, int hpc, int maxq, const char *algo, int splits) {
  st_params k = {0}, l = {0};
  st_err err = {{0}};
  st_params_set(&k, "dtype", dtype, &err);
  st_params_set(&k, "algo", algo, &err);
  st_params_set_int(&k, "head_dim", 128, &err);
  st_params_set_int(&k, "topk", topk, &err);
  st_params_set_int(&k, "heads_per_cta", hpc, &err);
  st_params_set_int(&k, "max_qlen", maxq, &err);
  st_params_set_int(&k, "threads", 256, &err);
  st_params_set_int(&k, "units_in_flight", 2, &err);
  st_params_set_int(&l, "splits", splits, &err);
  st_index_decode_config c;
  assert_int_equal(st_index_decode_config_from_params(&k, &l, &c, &err), ST_OK);
  return c;
}

static void test_variant_fit_names_the_mismatch(void **state) {
  (void)state;
  st_index_decode_args a = valid_args();
  st_err err = {{0}};
  st_index_decode_config c = config("bf16", 16, 2, 2, "single", 4);
  assert_int_equal(st_index_decode_check_fit(&c, &a, &err), ST_OK);
  c = config("fp8", 16, 2, 2, "single", 4);
  assert_int_equal(st_index_decode_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "dtype fp8"));
  c = config("bf16", 8, 2, 2, "single", 4);
  assert_int_equal(st_index_decode_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "topk <= 8"));
  c = config("bf16", 16, 4, 2, "single", 4);
  assert_int_equal(st_index_decode_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "does not divide H=2"));
  c = config("bf16", 16, 2, 1, "single", 4);
  assert_int_equal(st_index_decode_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "qlen <= 1"));
  /* Bulk copies only where a page's rows are dense. */
  c = config("bf16", 16, 2, 2, "single", 4);
  c.bulk_stages = 2;
  assert_int_equal(st_index_decode_check_fit(&c, &a, &err), ST_OK);
  a.k_cache.stride[1] = 2 * a.k_cache.shape[2];
  a.k_cache.stride[0] = 128 * a.k_cache.stride[1];
  assert_int_equal(st_index_decode_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "bulk variant needs dense pages (k_cache.stride[1]=256"));
  c.bulk_stages = 0;
  assert_int_equal(st_index_decode_check_fit(&c, &a, &err), ST_OK);
}

static void test_bad_variant_parameters_are_refused(void **state) {
  (void)state;
  st_params k = {0}, l = {0};
  st_err err = {{0}};
  st_index_decode_config c;
  assert_int_equal(st_index_decode_config_from_params(&k, &l, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "dtype"));
  st_params_set(&k, "dtype", "bf16", &err);
  st_params_set(&k, "algo", "magic", &err);
  assert_int_equal(st_index_decode_config_from_params(&k, &l, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "algo='magic'"));
  /* bulk_stages: optional (variants recorded before it: 0), else 0..8. */
  st_params_set(&k, "algo", "single", &err);
  st_params_set_int(&k, "head_dim", 128, &err);
  st_params_set_int(&k, "topk", 16, &err);
  st_params_set_int(&k, "heads_per_cta", 1, &err);
  st_params_set_int(&k, "max_qlen", 1, &err);
  st_params_set_int(&k, "threads", 256, &err);
  st_params_set_int(&k, "units_in_flight", 1, &err);
  st_params_set_int(&l, "splits", 0, &err);
  assert_int_equal(st_index_decode_config_from_params(&k, &l, &c, &err), ST_OK);
  assert_int_equal(c.bulk_stages, 0);
  st_params_set_int(&k, "bulk_stages", 9, &err);
  assert_int_equal(st_index_decode_config_from_params(&k, &l, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "bulk_stages"));
  st_params_set_int(&k, "bulk_stages", 4, &err);
  assert_int_equal(st_index_decode_config_from_params(&k, &l, &c, &err), ST_OK);
  assert_int_equal(c.bulk_stages, 4);
}

static void test_plans_size_grid_and_workspace(void **state) {
  (void)state;
  st_index_decode_args a = valid_args();
  st_err err = {{0}};
  st_index_decode_plan p;
  /* single, 4 splits: counters + block keys, one launch. Eight requests:
   * balanced slices, one column of CTAs more than the splits. */
  st_index_decode_config c = config("bf16", 16, 2, 2, "single", 4);
  assert_int_equal(st_index_decode_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.params.balanced, 1);
  assert_int_equal(p.params.splits, 4);
  assert_int_equal(p.grid[0], 5);
  assert_int_equal(p.grid[1], 8);
  assert_int_equal(p.grid[2], 1);
  assert_int_equal(p.block, 256);
  assert_int_equal(p.merge_block, 0);
  assert_int_equal(p.params.chunk_cap, 64); /* 256 blocks / 4 splits */
  assert_int_equal(p.params.sel_cols, 4); /* 2 heads x max_qlen 2; 256 keys each fit */
  const size_t keys = (size_t)8 * 2 * 2 * 256 * 4; /* R x H x qlen x max_blocks keys */
  assert_true(p.block_keys_offset >= 8 * 4);
  assert_true(p.workspace_bytes >= p.block_keys_offset + keys);
  /* bulk stages follow the keys and pages, 128-byte aligned: (2*2 + 1) x 64
   * words = 1280 bytes, then 2 stages of 128 rows x 128 bf16. */
  c.bulk_stages = 2;
  assert_int_equal(st_index_decode_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.smem_bytes, 1280 + 2 * 128 * 128 * 2);
  c.bulk_stages = 0;
  assert_int_equal(st_index_decode_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.smem_bytes, 4096); /* the merge's 4 columns x 256 keys */
  /* single with 1 split: balanced, a long request may still take two
   * slices, so the keys and counters stay; one request writes its output
   * directly and needs no workspace. */
  c = config("bf16", 16, 2, 2, "single", 1);
  assert_int_equal(st_index_decode_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.grid[0], 2);
  assert_true(p.workspace_bytes >= keys);
  st_index_decode_args one = a;
  one.q.shape[0] = 2; /* one request of qlen 2 */
  one.block_table.shape[0] = one.seq_lens.shape[0] = 1;
  one.topk_idx.shape[1] = 2;
  assert_int_equal(st_index_decode_plan_make(&c, &one, 132, &p, &err), ST_OK);
  assert_int_equal(p.params.balanced, 0);
  assert_int_equal(p.grid[0], 1);
  assert_int_equal(p.workspace_bytes, 0);
  /* split: a merge launch over (R, groups). */
  c = config("bf16", 16, 1, 2, "split", 8);
  assert_int_equal(st_index_decode_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.merge_grid[0], 8);
  assert_int_equal(p.merge_grid[1], 2);
  assert_int_equal(p.merge_block, 256);
  /* pdl: only whether the main kernel's launch is programmatic. */
  assert_int_equal(p.pdl, 0);
  a.pdl = 1;
  st_index_decode_plan pp;
  assert_int_equal(st_index_decode_plan_make(&c, &a, 132, &pp, &err), ST_OK);
  assert_int_equal(pp.pdl, 1);
  pp.pdl = 0;
  assert_memory_equal(&p, &pp, sizeof p);
  a.pdl = 0;
  /* auto splits: one wave, the largest power of two within three CTAs
   * an SM for bf16 (8 x 32 <= 396 < 8 x 64; 100 SMs: 8 x 32 <= 300) and
   * four for fp8 (8 x 64 <= 528), never more than the blocks. */
  c = config("bf16", 16, 2, 2, "single", 0);
  assert_int_equal(st_index_decode_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.splits, 32);
  assert_int_equal(st_index_decode_plan_make(&c, &a, 100, &p, &err), ST_OK);
  assert_int_equal(p.splits, 32);
  assert_int_equal(st_index_decode_plan_make(&c, &a, 60, &p, &err), ST_OK);
  assert_int_equal(p.splits, 16); /* 8 x 16 <= 180 < 8 x 32 */
  st_index_decode_config c8 = config("fp8", 16, 2, 2, "single", 0);
  st_index_decode_args a8 = a;
  a8.q.dtype = a8.k_cache.dtype = ST_DTYPE_FP8_E4M3;
  assert_int_equal(st_index_decode_plan_make(&c8, &a8, 132, &p, &err), ST_OK);
  assert_int_equal(p.splits, 64);
  /* fp8 with one head a CTA: six an SM (16 x 32 <= 600; four would give 16). */
  c8 = config("fp8", 16, 1, 2, "single", 0);
  assert_int_equal(st_index_decode_plan_make(&c8, &a8, 100, &p, &err), ST_OK);
  assert_int_equal(p.splits, 32);
  a.max_context = 200;
  assert_int_equal(st_index_decode_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.splits, 2);
  /* Same plan whatever the data: the kernel argument block holds no lengths. */
  a = valid_args();
  st_index_decode_plan p2;
  c = config("bf16", 16, 2, 2, "single", 4);
  assert_int_equal(st_index_decode_plan_make(&c, &a, 132, &p, &err), ST_OK);
  a.seq_lens.data = FAKE(0x90000);
  assert_int_equal(st_index_decode_plan_make(&c, &a, 132, &p2, &err), ST_OK);
  assert_int_equal(p.workspace_bytes, p2.workspace_bytes);
  assert_memory_equal(p.grid, p2.grid, sizeof p.grid);
}

/* The call's load, which the defaults' ranges use: blocks of (request,
 * index head) per SM; more heads a CTA only above half of their count. */
static void test_load_counts_request_head_blocks_per_sm(void **state) {
  (void)state;
  st_index_decode_args a = valid_args(); /* 8 requests, 2 heads, 32768 tokens */
  const st_op_desc *d = st_op_desc_of(ST_OP_INDEX_DECODE);
  assert_non_null(d);
  assert_non_null(d->load);
  assert_float_equal(d->load(&a, 132), 8.0 * 2.0 * 256.0 / 132.0, 1e-12);
  a.max_context = 129; /* two blocks */
  assert_float_equal(d->load(&a, 64), 8.0 * 2.0 * 2.0 / 64.0, 1e-12);
}

static void test_dispatch_key_is_canonical(void **state) {
  (void)state;
  st_index_decode_args a = valid_args();
  char key[256];
  st_params f = {0};
  st_err err = {{0}};
  assert_int_equal(st_index_decode_dispatch_key(&a, key, sizeof key, &f, &err), ST_OK);
  assert_string_equal(key, "index_decode:B=8,D=128,H=2,ctx=32768,dtype=bf16,qlen=2,topk=16");
  assert_string_equal(st_params_get(&f, "B"), "8");
  st_params parsed = {0};
  assert_int_equal(st_params_parse_key(key, &parsed, &err), ST_OK);
  char j1[512], j2[512];
  st_params_to_json(&f, j1, sizeof j1);
  st_params_to_json(&parsed, j2, sizeof j2);
  assert_string_equal(j1, j2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_valid_arguments_pass),
      cmocka_unit_test(test_bad_arguments_are_refused_by_name),
      cmocka_unit_test(test_variant_fit_names_the_mismatch),
      cmocka_unit_test(test_bad_variant_parameters_are_refused),
      cmocka_unit_test(test_plans_size_grid_and_workspace),
      cmocka_unit_test(test_load_counts_request_head_blocks_per_sm),
      cmocka_unit_test(test_dispatch_key_is_canonical),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
