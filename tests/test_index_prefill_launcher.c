/* The fused index_prefill launcher: bad arguments are refused with a
 * message naming the argument and value; variants fit or not for the right
 * reasons (list capacity, the merge's candidates); the plan's grids, shared
 * memory and workspace are what the kernels expect. No GPU needed: pointers
 * are fake and never dereferenced. */
#include <stdio.h>
#include <string.h>

#include "ops/index_prefill.h"
#include "ops/tensor_check.h"
#include "testutil.h"

#define FAKE(p) ((void *)(uintptr_t)(p))

enum { H = 2, D = 128, TOTAL_Q = 5000, COLS = 512, R = 3, PAGES = 4096, TOPK = 16 };

static st_index_prefill_args valid_args(void) {
  st_index_prefill_args a;
  memset(&a, 0, sizeof a);
  st_tensor_contiguous(&a.q, FAKE(0x100000), ST_DTYPE_BF16, 3, (int64_t[]){TOTAL_Q, H, D});
  st_tensor_contiguous(&a.k_cache, FAKE(0x200000), ST_DTYPE_BF16, 3, (int64_t[]){PAGES, 128, D});
  st_tensor_contiguous(&a.block_table, FAKE(0x10000), ST_DTYPE_INT32, 2, (int64_t[]){R, COLS});
  st_tensor_contiguous(&a.cu_seqlens_q, FAKE(0x20000), ST_DTYPE_INT32, 1, (int64_t[]){R + 1});
  st_tensor_contiguous(&a.seq_lens, FAKE(0x30000), ST_DTYPE_INT32, 1, (int64_t[]){R});
  st_tensor_contiguous(&a.topk_idx, FAKE(0x400000), ST_DTYPE_INT32, 3, (int64_t[]){H, TOTAL_Q, TOPK});
  a.topk = TOPK;
  a.init_blocks = 1;
  a.local_blocks = 2;
  a.max_context = COLS * 128;
  return a;
}

static void expect_refused(const st_index_prefill_args *a, const char *fragment) {
  st_err err = {{0}};
  st_status s = st_index_prefill_check_args(a, &err);
  if (s != ST_ERR_INVALID_ARG || !strstr(err.msg, fragment))
    fail_msg("expected refusal with '%s', got status %d: '%s'", fragment, (int)s, err.msg);
}

static void test_bad_arguments_are_refused_by_name(void **state) {
  (void)state;
  st_err err = {{0}};
  st_index_prefill_args a = valid_args();
  assert_int_equal(st_index_prefill_check_args(&a, &err), ST_OK);
  a.topk = 0;
  expect_refused(&a, "topk=0 is outside 1..64");
  a = valid_args();
  a.init_blocks = 10;
  a.local_blocks = 7;
  expect_refused(&a, "init_blocks + local_blocks = 10 + 7 exceeds topk=16");
  a = valid_args();
  a.init_blocks = -1;
  expect_refused(&a, "must not be negative");
  a = valid_args();
  a.topk_idx.shape[2] = TOPK + 1;
  expect_refused(&a, "topk_idx.shape=[2,5000,17] must be [H=2, total_q=5000, topk=16]");
  a = valid_args();
  a.topk_idx.dtype = ST_DTYPE_FP32;
  expect_refused(&a, "topk_idx.dtype");
  a = valid_args();
  a.topk_idx.data = FAKE(0x400002);
  expect_refused(&a, "topk_idx.data=");
  /* index_score's checks of the shared inputs. */
  a = valid_args();
  a.k_cache.dtype = ST_DTYPE_FP8_E4M3;
  expect_refused(&a, "k_cache.dtype");
  a = valid_args();
  a.block_table.shape[0] = R + 1;
  expect_refused(&a, "block_table.shape[0]=4 must equal the 3 requests");
  a = valid_args();
  a.max_context = COLS * 128 + 1;
  expect_refused(&a, "max_context=65537 is outside 1..65536");
  a = valid_args();
  a.q.data = NULL;
  expect_refused(&a, "q.data is NULL");
  expect_refused(NULL, "args is NULL");
}

static st_index_prefill_config config_of(const char *algo, int rows, int wgs, int stages, int topk, int chunk) {
  st_params k = {0}, l = {0};
  st_err err = {{0}};
  st_params_set(&k, "algo", algo, &err);
  st_params_set(&k, "dtype", "bf16", &err);
  st_params_set_int(&k, "head_dim", D, &err);
  st_params_set_int(&k, "rows", rows, &err);
  st_params_set_int(&k, "warpgroups", wgs, &err);
  st_params_set_int(&k, "stages", stages, &err);
  st_params_set_int(&k, "topk", topk, &err);
  st_params_set_int(&l, "chunk_blocks", chunk, &err);
  st_index_prefill_config c;
  if (st_index_prefill_config_from_params(&k, &l, &c, &err) != ST_OK) fail_msg("%s", err.msg);
  return c;
}

static st_index_prefill_config config(int rows, int wgs, int stages, int topk, int chunk) {
  return config_of("fused", rows, wgs, stages, topk, chunk);
}

static void test_config_names_its_algorithm(void **state) {
  (void)state;
  st_params k = {0}, l = {0};
  st_err err = {{0}};
  st_params_set(&k, "algo", "composed", &err);
  st_params_set(&k, "dtype", "bf16", &err);
  st_params_set_int(&k, "head_dim", D, &err);
  st_params_set_int(&k, "rows", 128, &err);
  st_params_set_int(&k, "warpgroups", 2, &err);
  st_params_set_int(&k, "stages", 2, &err);
  st_params_set_int(&k, "topk", 16, &err);
  st_params_set_int(&l, "chunk_blocks", 0, &err);
  st_index_prefill_config c;
  assert_int_equal(st_index_prefill_config_from_params(&k, &l, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "topk=16 must be 64 with algo composed"));
  st_params_set(&k, "algo", "sorted", &err);
  assert_int_equal(st_index_prefill_config_from_params(&k, &l, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "algo='sorted' is not fused or composed"));
}

static void test_fit_and_plan(void **state) {
  (void)state;
  st_err err = {{0}};
  st_index_prefill_args a = valid_args();
  st_index_prefill_plan p;
  st_index_prefill_config c = config(256, 2, 2, 16, 64);
  assert_int_equal(st_index_prefill_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.grid[0], (TOTAL_Q + 127) / 128 + R); /* index_score's grid */
  assert_int_equal(p.grid[1], COLS / 64);
  assert_int_equal(p.block, 2 * 128 + 32);
  assert_int_equal(p.params.max_chunks, COLS / 64);
  assert_int_equal(p.params.score.chunk_blocks, 64);
  assert_int_equal(p.merge_grid[0], (TOTAL_Q + 7) / 8); /* a warp per (token, head) */
  assert_int_equal(p.merge_grid[1], H);
  assert_int_equal(p.merge_block, 256);
  /* Row lists (keys and ids, topk + 1 words a row) before index_score's CTA. */
  assert_int_equal(p.smem_bytes, 2 * 256 * 17 * 4 + 256 * 256 + 2 * 128 * 256 + 1024);
  assert_int_equal(p.workspace_bytes, 65536 + (size_t)H * TOTAL_Q * (COLS / 64) * TOPK * 8); /* past the counters */
  assert_int_equal(p.params.topk, TOPK);
  assert_int_equal(p.params.init_blocks, 1);
  assert_int_equal(p.params.local_blocks, 2);
  assert_null(p.params.score.score);

  /* A list shorter than topk does not fit. */
  a.topk = 32;
  a.topk_idx.shape[2] = 32;
  assert_int_equal(st_index_prefill_plan_make(&c, &a, 132, &p, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "lists of 16 blocks, call asks topk=32"));
  /* 16 chunks x topk 64 = 1024 candidates: more than a merge warp holds. */
  a.topk = 64;
  a.topk_idx.shape[2] = 64;
  c = config(128, 2, 2, 64, 32);
  assert_int_equal(st_index_prefill_plan_make(&c, &a, 132, &p, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "16 chunks x topk 64 exceed the merge's 512 candidates"));
  /* The automatic chunk (index_score's: about four CTAs per SM, here 1000
   * SMs ask for 8 blocks) is raised to what the merge holds: 512 x 64 / 512. */
  c = config(128, 2, 2, 64, 0);
  assert_int_equal(c.score.balanced, 0); /* index_score's chunk 0 is balanced; the lists need chunks */
  assert_int_equal(st_index_prefill_plan_make(&c, &a, 1000, &p, &err), ST_OK);
  assert_int_equal(p.params.score.balanced, 0);
  assert_int_equal(p.params.score.chunk_blocks, 64);
  assert_int_equal(p.params.max_chunks, 8);
  assert_int_equal(p.grid[1], 8);
  /* On 132 SMs the automatic chunk is larger already: kept. */
  assert_int_equal(st_index_prefill_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.params.score.chunk_blocks, (COLS * ((TOTAL_Q + 63) / 64) + 4 * 132 - 1) / (4 * 132));
  assert_true(p.params.max_chunks * 64 <= ST_INDEX_PREFILL_MERGE_MAX);

  /* index_score's fit: H up to the CTA's rows (3 heads: padded to 4 rows a
   * token, the merge's grid over the 3 real ones). */
  a = valid_args();
  a.q.shape[1] = a.topk_idx.shape[0] = 3;
  c = config(256, 2, 2, 16, 0);
  assert_int_equal(st_index_prefill_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.params.score.head_shift, 2);
  assert_int_equal(p.merge_grid[1], 3);
  a.q.shape[1] = a.topk_idx.shape[0] = 300;
  assert_int_equal(st_index_prefill_plan_make(&c, &a, 132, &p, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "H=300 > 256"));

  /* Composed: any topk, the keys of every block in the workspace, rows of
   * at most 1024 blocks. */
  a = valid_args();
  c = config_of("composed", 256, 2, 2, 64, 0);
  assert_int_equal(c.algo, ST_INDEX_PREFILL_COMPOSED);
  assert_int_equal(st_index_prefill_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.workspace_bytes, 65536 + (size_t)H * TOTAL_Q * COLS * 4);
  assert_int_equal(p.smem_bytes, 256 * 256 + 2 * 128 * 256 + 1024); /* no lists */
  a.block_table.shape[1] = 1025;
  a.max_context = 1025 * 128;
  assert_int_equal(st_index_prefill_plan_make(&c, &a, 132, &p, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "composed variant selects from rows of <= 1024 blocks, call has 1025"));

  a = valid_args();
  char key[128];
  assert_int_equal(st_index_prefill_dispatch_key(&a, key, sizeof key, NULL, &err), ST_OK);
  assert_string_equal(key, "index_prefill:B=5000,D=128,H=2,dtype=bf16,topk=16");
}

/* Every topk and context: a row's chunks x topk candidates within what a
 * fused merge warp holds (past it the merge traps). 762 blocks at topk 28
 * once made 19 chunks of 42 blocks, 532 candidates. */
static void test_fused_chunks_fit_the_merge(void **state) {
  (void)state;
  st_err err = {{0}};
  st_index_prefill_plan p;
  const st_index_prefill_config c = config(128, 2, 2, 64, 0);
  for (int topk = 1; topk <= 64; topk++) {
    for (int blocks = 1; blocks <= COLS; blocks++) {
      for (int sms = 132; sms <= 1000; sms += 868) {
        st_index_prefill_args a = valid_args();
        a.topk = topk;
        a.init_blocks = a.local_blocks = 0;
        a.topk_idx.shape[2] = topk;
        a.max_context = blocks * 128 - 77;
        assert_int_equal(st_index_prefill_plan_make(&c, &a, sms, &p, &err), ST_OK);
        const int chunk = p.params.score.chunk_blocks;
        if ((int64_t)(blocks + chunk - 1) / chunk * topk > ST_INDEX_PREFILL_MERGE_MAX)
          fail_msg("topk %d, %d blocks, %d SMs: chunks of %d blocks make %d candidates a row", topk, blocks, sms,
                   chunk, (blocks + chunk - 1) / chunk * topk);
        assert_true(p.params.max_chunks * topk <= ST_INDEX_PREFILL_MERGE_MAX);
      }
    }
  }
  /* The shape that trapped: 762 blocks (97487 tokens), topk 28. */
  st_index_prefill_args a = valid_args();
  a.topk = 28;
  a.topk_idx.shape[2] = 28;
  a.block_table.shape[1] = 800;
  a.max_context = 97487;
  assert_int_equal(st_index_prefill_plan_make(&c, &a, 100000, &p, &err), ST_OK); /* the smallest chunks */
  assert_int_equal(p.params.score.chunk_blocks, 43);
  assert_int_equal(p.params.max_chunks, 18); /* 504 candidates */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_arguments_are_refused_by_name),
      cmocka_unit_test(test_config_names_its_algorithm),
      cmocka_unit_test(test_fit_and_plan),
      cmocka_unit_test(test_fused_chunks_fit_the_merge),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
