/* The index_topk (prefill) launcher: bad arguments are refused with a
 * message naming the argument and value; variants fit or not for the right
 * reasons; the plan's grid, block and shared memory are what the kernel
 * expects. No GPU needed: pointers are fake and never dereferenced. */
#include <stdio.h>
#include <string.h>

#include "ops/index_topk.h"
#include "ops/tensor_check.h"
#include "testutil.h"

#define FAKE(p) ((void *)(uintptr_t)(p))

enum { H = 2, TOTAL_Q = 5000, COLS = 512, R = 3, TOPK = 16 };

static st_index_topk_args valid_args(void) {
  st_index_topk_args a;
  memset(&a, 0, sizeof a);
  st_tensor_contiguous(&a.score, FAKE(0x100000), ST_DTYPE_FP32, 3, (int64_t[]){H, TOTAL_Q, COLS});
  st_tensor_contiguous(&a.cu_seqlens_q, FAKE(0x20000), ST_DTYPE_INT32, 1, (int64_t[]){R + 1});
  st_tensor_contiguous(&a.seq_lens, FAKE(0x30000), ST_DTYPE_INT32, 1, (int64_t[]){R});
  st_tensor_contiguous(&a.topk_idx, FAKE(0x40000), ST_DTYPE_INT32, 3, (int64_t[]){H, TOTAL_Q, TOPK});
  a.topk = TOPK;
  a.init_blocks = 1;
  a.local_blocks = 2;
  a.max_context = COLS * 128;
  return a;
}

static void expect_refused(const st_index_topk_args *a, const char *fragment) {
  st_err err = {{0}};
  st_status s = st_index_topk_check_args(a, &err);
  if (s != ST_ERR_INVALID_ARG || !strstr(err.msg, fragment))
    fail_msg("expected refusal with '%s', got status %d: '%s'", fragment, (int)s, err.msg);
}

static void test_bad_arguments_are_refused_by_name(void **state) {
  (void)state;
  st_err err = {{0}};
  st_index_topk_args a = valid_args();
  assert_int_equal(st_index_topk_check_args(&a, &err), ST_OK);
  a = valid_args();
  a.topk = 65;
  expect_refused(&a, "topk=65 is outside 1..64");
  a = valid_args();
  a.init_blocks = 10;
  a.local_blocks = 7;
  expect_refused(&a, "exceeds topk=16");
  a = valid_args();
  a.local_blocks = -1;
  expect_refused(&a, "must not be negative");
  a = valid_args();
  a.score.dtype = ST_DTYPE_BF16;
  expect_refused(&a, "score.dtype");
  a = valid_args();
  a.score.stride[2] = 2;
  expect_refused(&a, "innermost stride must be 1");
  a = valid_args();
  a.cu_seqlens_q.shape[0] = R;
  expect_refused(&a, "cu_seqlens_q.shape[0]=3 must be seq_lens.shape[0]=3 + 1");
  a = valid_args();
  a.topk_idx.shape[1] = TOTAL_Q + 1;
  expect_refused(&a, "topk_idx.shape");
  a = valid_args();
  a.max_context = COLS * 128 + 1;
  expect_refused(&a, "max_context=65537 is outside");
  a = valid_args();
  a.seq_lens.data = NULL;
  expect_refused(&a, "seq_lens.data is NULL");
  expect_refused(NULL, "args is NULL");
}

/* The kernel parameters of a variant, as the generator writes them. */
static st_params kernel_params(const char *algo, int keys, int rows, int threads, int topk) {
  st_params k = {0};
  st_err err = {{0}};
  st_params_set(&k, "algo", algo, &err);
  st_params_set_int(&k, "keys", keys, &err);
  st_params_set_int(&k, "rows", rows, &err);
  st_params_set_int(&k, "threads", threads, &err);
  st_params_set_int(&k, "topk", topk, &err);
  return k;
}

static st_index_topk_config parsed(const st_params *k) {
  st_params l = {0};
  st_err err = {{0}};
  st_index_topk_config c;
  if (st_index_topk_config_from_params(k, &l, &c, &err) != ST_OK) fail_msg("%s", err.msg);
  return c;
}

static st_index_topk_config config(int rows, int threads, int topk) {
  const st_params k = kernel_params("cta", 0, rows, threads, topk);
  return parsed(&k);
}

/* A warp variant: a row per warp, so rows = threads / 32. */
static st_index_topk_config warp_config(int keys, int threads, int topk) {
  const st_params k = kernel_params("warp", keys, threads / 32, threads, topk);
  return parsed(&k);
}

static void expect_config_refused(const st_params *k, const char *fragment) {
  st_params l = {0};
  st_err err = {{0}};
  st_index_topk_config c;
  st_status s = st_index_topk_config_from_params(k, &l, &c, &err);
  if (s != ST_ERR_INVALID_ARG || !strstr(err.msg, fragment))
    fail_msg("expected config refusal with '%s', got status %d: '%s'", fragment, (int)s, err.msg);
}

static void test_fit_and_plan(void **state) {
  (void)state;
  st_err err = {{0}};
  st_index_topk_args a = valid_args();
  st_index_topk_config c = config(8, 256, 8);
  assert_int_equal(st_index_topk_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "topk <= 8, call asks 16"));
  st_index_topk_plan p;
  c = config(8, 256, 16);
  assert_int_equal(st_index_topk_plan_make(&c, &a, &p, &err), ST_OK);
  assert_int_equal(p.grid[0], (TOTAL_Q + 7) / 8);
  assert_int_equal(p.grid[1], H);
  assert_int_equal(p.block, 256);
  assert_int_equal(p.smem_bytes, 8 * COLS * 4); /* a row of keys per token */
  assert_int_equal(p.params.max_blocks, COLS);
  assert_int_equal(p.params.num_requests, R);
  /* 1M tokens of context: 8 rows of 8192 keys do not fit; 1 row does. */
  a.score.shape[2] = 8192;
  a.max_context = 8192 * 128;
  assert_int_equal(st_index_topk_plan_make(&c, &a, &p, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "shared memory"));
  c = config(1, 256, 16);
  assert_int_equal(st_index_topk_plan_make(&c, &a, &p, &err), ST_OK);
  char key[128];
  assert_int_equal(st_index_topk_dispatch_key(&a, key, sizeof key, NULL, &err), ST_OK);
  assert_string_equal(key, "index_topk:B=5000,H=2,topk=16");
}

static void test_warp_config_takes_power_of_two_keys_and_a_row_per_warp(void **state) {
  (void)state;
  for (int keys = 1; keys <= 32; keys *= 2) {
    const st_index_topk_config c = warp_config(keys, 256, 16);
    assert_int_equal(c.algo, ST_INDEX_TOPK_WARP);
    assert_int_equal(c.keys, keys);
    assert_int_equal(c.rows, 8);
    assert_int_equal(c.threads, 256);
    assert_int_equal(c.topk_cap, 16);
  }
  const st_index_topk_config c = config(4, 256, 16);
  assert_int_equal(c.algo, ST_INDEX_TOPK_CTA);
  assert_int_equal(c.keys, 0);

  st_params k = kernel_params("cta", 4, 4, 256, 16);
  expect_config_refused(&k, "keys=4 must be 0 with algo cta");
  k = kernel_params("warp", 0, 8, 256, 16);
  expect_config_refused(&k, "keys=0 is not a power of two in 1..32 with algo warp");
  k = kernel_params("warp", 3, 8, 256, 16);
  expect_config_refused(&k, "keys=3 is not a power of two");
  k = kernel_params("warp", 64, 8, 256, 16);
  expect_config_refused(&k, "keys=64 is outside 0..32");
  k = kernel_params("warp", 4, 4, 256, 16);
  expect_config_refused(&k, "rows=4 is not threads/32 = 8 with algo warp");
  k = kernel_params("block", 0, 4, 256, 16);
  expect_config_refused(&k, "algo='block' is not cta or warp");
  st_params partial = {0}; /* a variant written before algo and keys existed */
  expect_config_refused(&partial, "algo='(missing)' is not cta or warp");
  st_err err = {{0}};
  assert_int_equal(st_params_set(&partial, "algo", "warp", &err), ST_OK);
  expect_config_refused(&partial, "parameter 'keys' is missing");
}

static void test_warp_fit_refuses_rows_longer_than_its_keys_hold(void **state) {
  (void)state;
  st_err err = {{0}};
  st_index_topk_args a = valid_args(); /* 512 score columns, max_context = 512 blocks */
  st_index_topk_config c = warp_config(16, 256, 16);
  assert_int_equal(st_index_topk_check_fit(&c, &a, &err), ST_OK);
  c = warp_config(8, 256, 16);
  assert_int_equal(st_index_topk_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "holds rows of <= 256 blocks (32 lanes x keys=8), call has max_blocks=512"));
  st_index_topk_plan p;
  assert_int_equal(st_index_topk_plan_make(&c, &a, &p, &err), ST_ERR_NO_VARIANT);
  /* max_blocks is ceil(max_context / 128): one token past 256 blocks is 257. */
  a.max_context = 256 * 128;
  assert_int_equal(st_index_topk_check_fit(&c, &a, &err), ST_OK);
  a.max_context = 256 * 128 + 1;
  assert_int_equal(st_index_topk_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "call has max_blocks=257 (max_context=32769)"));
  /* The topk capacity is checked first, as for cta. */
  c = warp_config(32, 256, 8);
  assert_int_equal(st_index_topk_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "topk <= 8, call asks 16"));
  /* 32 keys hold 1024 blocks (128K tokens), with no shared memory. */
  a.score.shape[2] = 1024;
  a.max_context = 1024 * 128;
  c = warp_config(32, 128, 16);
  assert_int_equal(st_index_topk_check_fit(&c, &a, &err), ST_OK);
  a.score.shape[2] = 1025;
  a.max_context = 1024 * 128 + 1;
  assert_int_equal(st_index_topk_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
}

static void test_warp_plan_has_a_row_per_warp_and_no_shared_memory(void **state) {
  (void)state;
  st_err err = {{0}};
  const st_index_topk_args a = valid_args();
  st_index_topk_plan p;
  st_index_topk_config c = warp_config(16, 256, 16);
  assert_int_equal(st_index_topk_plan_make(&c, &a, &p, &err), ST_OK);
  assert_int_equal(p.grid[0], (TOTAL_Q + 7) / 8); /* 8 warps = 8 rows per CTA */
  assert_int_equal(p.grid[1], H);
  assert_int_equal(p.grid[2], 1);
  assert_int_equal(p.block, 256);
  assert_int_equal(p.smem_bytes, 0);
  assert_int_equal(p.workspace_bytes, 0);
  assert_int_equal(p.params.max_blocks, COLS);
  assert_int_equal(p.params.total_q, TOTAL_Q);
  c = warp_config(32, 128, 16);
  assert_int_equal(st_index_topk_plan_make(&c, &a, &p, &err), ST_OK);
  assert_int_equal(p.grid[0], (TOTAL_Q + 3) / 4); /* 5000 rows, 4 per CTA: 1250 */
  assert_int_equal(p.block, 128);
  assert_int_equal(p.smem_bytes, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_arguments_are_refused_by_name),
      cmocka_unit_test(test_fit_and_plan),
      cmocka_unit_test(test_warp_config_takes_power_of_two_keys_and_a_row_per_warp),
      cmocka_unit_test(test_warp_fit_refuses_rows_longer_than_its_keys_hold),
      cmocka_unit_test(test_warp_plan_has_a_row_per_warp_and_no_shared_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
