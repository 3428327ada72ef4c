/* The index_score (prefill) launcher: bad arguments are refused with a
 * message naming the argument and value; variants fit or not for the right
 * reasons; the plan's grid, block and shared memory are what the kernel
 * expects. No GPU needed: pointers are fake and never dereferenced. */
#include <stdio.h>
#include <string.h>

#include "common/score_work.h" /* templates/ */
#include "ops/index_score.h"
#include "ops/tensor_check.h"
#include "ops/tensor_map.h"
#include "testutil.h"

#define FAKE(p) ((void *)(uintptr_t)(p))

enum { H = 2, D = 128, TOTAL_Q = 5000, COLS = 512, R = 3, PAGES = 4096 };

static st_index_score_args valid_args(void) {
  st_index_score_args a;
  memset(&a, 0, sizeof a);
  st_tensor_contiguous(&a.q, FAKE(0x100000), ST_DTYPE_BF16, 3, (int64_t[]){TOTAL_Q, H, D});
  st_tensor_contiguous(&a.k_cache, FAKE(0x200000), ST_DTYPE_BF16, 3, (int64_t[]){PAGES, 128, D});
  st_tensor_contiguous(&a.block_table, FAKE(0x10000), ST_DTYPE_INT32, 2, (int64_t[]){R, COLS});
  st_tensor_contiguous(&a.cu_seqlens_q, FAKE(0x20000), ST_DTYPE_INT32, 1, (int64_t[]){R + 1});
  st_tensor_contiguous(&a.seq_lens, FAKE(0x30000), ST_DTYPE_INT32, 1, (int64_t[]){R});
  st_tensor_contiguous(&a.score, FAKE(0x400000), ST_DTYPE_FP32, 3, (int64_t[]){H, TOTAL_Q, COLS + 1});
  a.scale = 0.125f;
  a.max_context = COLS * 128;
  return a;
}

static void expect_refused(const st_index_score_args *a, const char *fragment) {
  st_err err = {{0}};
  st_status s = st_index_score_check_args(a, &err);
  if (s != ST_ERR_INVALID_ARG || !strstr(err.msg, fragment))
    fail_msg("expected refusal with '%s', got status %d: '%s'", fragment, (int)s, err.msg);
}

static void test_bad_arguments_are_refused_by_name(void **state) {
  (void)state;
  st_err err = {{0}};
  st_index_score_args a = valid_args();
  assert_int_equal(st_index_score_check_args(&a, &err), ST_OK);
  a.q.dtype = ST_DTYPE_FP32;
  expect_refused(&a, "q.dtype=");
  a = valid_args();
  a.k_cache.dtype = ST_DTYPE_FP8_E4M3;
  expect_refused(&a, "k_cache.dtype");
  a = valid_args();
  a.k_cache.shape[1] = 64;
  expect_refused(&a, "k_cache.shape=[4096,64,128] must be [pages,128,128]");
  a = valid_args();
  a.k_cache.shape[2] = 64;
  expect_refused(&a, "must be [pages,128,128]");
  a = valid_args();
  a.q.stride[2] = 2;
  expect_refused(&a, "innermost stride must be 1");
  a = valid_args();
  a.q.stride[0] = H * D + 3; /* rows no longer 16-byte aligned */
  expect_refused(&a, "q");
  a = valid_args();
  a.cu_seqlens_q.shape[0] = R;
  expect_refused(&a, "cu_seqlens_q.shape[0]=3 must be seq_lens.shape[0]=3 + 1");
  a = valid_args();
  a.block_table.shape[0] = R + 1;
  expect_refused(&a, "block_table.shape[0]=4 must equal the 3 requests");
  a = valid_args();
  a.score.shape[1] = TOTAL_Q - 1;
  expect_refused(&a, "score.shape=[2,4999,513] must be [H=2, total_q=5000, blocks]");
  a = valid_args();
  a.score.dtype = ST_DTYPE_BF16;
  expect_refused(&a, "score.dtype");
  a = valid_args();
  a.scale = 0.0f;
  expect_refused(&a, "scale=0 must be positive and finite");
  a = valid_args();
  a.scale = -1.0f;
  expect_refused(&a, "scale=-1 must be positive");
  a = valid_args();
  a.max_context = COLS * 128 + 1;
  expect_refused(&a, "max_context=65537 is outside 1..65536");
  a = valid_args();
  a.score.shape[2] = 100; /* fewer score columns than max_context's blocks */
  expect_refused(&a, "max_context=65536 is outside 1..12800");
  a = valid_args();
  a.max_context = 0;
  expect_refused(&a, "max_context=0 is outside");
  a = valid_args();
  a.seq_lens.data = NULL;
  expect_refused(&a, "seq_lens.data is NULL");
  expect_refused(NULL, "args is NULL");
}

/* The parameters of a variant, as the generator writes them. */
static st_status parse(const char *dtype, int head_dim, int rows, int wgs, int stages, int chunk,
                       st_index_score_config *c, st_err *err) {
  st_params k = {0}, l = {0};
  st_params_set(&k, "dtype", dtype, err);
  st_params_set_int(&k, "head_dim", head_dim, err);
  st_params_set_int(&k, "rows", rows, err);
  st_params_set_int(&k, "warpgroups", wgs, err);
  st_params_set_int(&k, "stages", stages, err);
  st_params_set_int(&l, "chunk_blocks", chunk, err);
  return st_index_score_config_from_params(&k, &l, c, err);
}

static st_index_score_config config(const char *dtype, int head_dim, int rows, int wgs, int stages, int chunk) {
  st_err err = {{0}};
  st_index_score_config c;
  if (parse(dtype, head_dim, rows, wgs, stages, chunk, &c, &err) != ST_OK) fail_msg("%s", err.msg);
  return c;
}

static void expect_config_refused(const char *dtype, int head_dim, int rows, int wgs, int stages,
                                  const char *fragment) {
  st_err err = {{0}};
  st_index_score_config c;
  st_status s = parse(dtype, head_dim, rows, wgs, stages, 0, &c, &err);
  if (s != ST_ERR_INVALID_ARG || !strstr(err.msg, fragment))
    fail_msg("expected config refusal with '%s', got status %d: '%s'", fragment, (int)s, err.msg);
}

static void test_configs_hold_what_the_kernel_can_do(void **state) {
  (void)state;
  const st_index_score_config c = config("fp8", 128, 256, 2, 4, 16);
  assert_int_equal(c.dtype, ST_DTYPE_FP8_E4M3);
  assert_int_equal(c.rows, 256);
  assert_int_equal(c.chunk_blocks, 16);
  /* q tile + stages of 128 K rows + alignment slack. */
  assert_int_equal(st_index_score_smem_bytes(&c), 256 * 128 + 4 * 128 * 128 + 1024);
  expect_config_refused("fp8", 64, 128, 1, 2, "64 bytes, not whole 128-byte panels");
  expect_config_refused("bf16", 128, 256, 1, 2, "rows=256 is not one or two 64-row slices per warpgroup (1)");
  expect_config_refused("bf16", 256, 256, 2, 4, "shared memory");
  expect_config_refused("int8", 128, 128, 1, 2, "dtype='int8' is not bf16 or fp8");
  expect_config_refused("bf16", 128, 128, 3, 2, "warpgroups");
}

static void test_fit_and_plan(void **state) {
  (void)state;
  st_err err = {{0}};
  st_index_score_args a = valid_args();
  st_index_score_config c = config("fp8", 128, 256, 2, 3, 0);
  assert_int_equal(st_index_score_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "variant is for dtype fp8, call is bf16"));
  c = config("bf16", 64, 256, 2, 3, 0);
  assert_int_equal(st_index_score_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "head_dim 64, call has 128"));
  a.q.shape[1] = a.score.shape[0] = 300; /* more heads than rows */
  c = config("bf16", 128, 256, 2, 3, 0);
  assert_int_equal(st_index_score_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "H=300 > 256"));

  a = valid_args();
  st_index_score_plan p;
  c = config("bf16", 128, 256, 2, 3, 32);
  assert_int_equal(st_index_score_plan_make(&c, &a, 132, &p, &err), ST_OK);
  /* 128 tokens per tile; a partial tile per request at most. */
  assert_int_equal(p.grid[0], (TOTAL_Q + 127) / 128 + R);
  assert_int_equal(p.grid[1], COLS / 32);
  assert_int_equal(p.block, 2 * 128 + 32); /* two warpgroups and the copying warp */
  assert_int_equal(p.smem_bytes, 256 * 256 + 3 * 128 * 256 + 1024);
  assert_int_equal(p.params.head_shift, 1);
  assert_int_equal(p.params.chunk_blocks, 32);
  assert_int_equal(p.params.max_blocks, COLS);
  assert_int_equal(p.params.score_stride_row, COLS + 1);
  /* Three heads take four rows a token (one of padding): 64 tokens a tile. */
  a.q.shape[1] = a.score.shape[0] = 3;
  assert_int_equal(st_index_score_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.params.num_heads, 3);
  assert_int_equal(p.params.head_shift, 2);
  assert_int_equal(p.grid[0], (TOTAL_Q + 63) / 64 + R);
  a = valid_args();
  /* chunk_blocks 0: the balanced schedule, one CTA per SM splitting the
   * batch's (tile, block) pairs; fewer CTAs only when there are fewer pairs. */
  c = config("bf16", 128, 256, 2, 3, 0);
  assert_int_equal(c.balanced, 1);
  assert_int_equal(st_index_score_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.grid[0], 132);
  assert_int_equal(p.grid[1], 1);
  assert_int_equal(p.params.balanced, 1);
  a.max_context = 128; /* 43 tiles of one block each */
  assert_int_equal(st_index_score_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.grid[0], (TOTAL_Q + 127) / 128 + R);
  /* Automatic chunks (index_prefill's chunk grid): about four CTAs per SM
   * over the grid, at least 8. */
  a = valid_args();
  c.balanced = 0;
  assert_int_equal(st_index_score_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.params.balanced, 0);
  assert_int_equal(p.grid[0], (TOTAL_Q + 127) / 128 + R);
  assert_int_equal(p.params.chunk_blocks, (COLS * ((TOTAL_Q + 127) / 128) + 4 * 132 - 1) / (4 * 132));
  a.max_context = 1000; /* 8 blocks: never more than the blocks */
  assert_int_equal(st_index_score_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.params.chunk_blocks, 8);
  assert_int_equal(p.grid[1], 1);
  char key[128];
  assert_int_equal(st_index_score_dispatch_key(&a, key, sizeof key, NULL, &err), ST_OK);
  assert_string_equal(key, "index_score:B=5000,D=128,H=2,dtype=bf16");
}

/* The balanced schedule's closed-form pair counts (common/score_work.h)
 * against a count tile by tile, over tile sizes 1..256, prefixes around
 * block edges, short and long requests and max_blocks clamps. */
static int64_t counted_work(int64_t pos0, int64_t qlen, int64_t tokens, int64_t max_blocks, int64_t m) {
  int64_t w = 0;
  for (int64_t i = 0; i < m; i++) {
    const int64_t end = (i + 1) * tokens < qlen ? (i + 1) * tokens : qlen;
    const int64_t nb = (pos0 + end - 1) / 128 + 1;
    w += nb < max_blocks ? nb : max_blocks;
  }
  return w;
}

static void test_balanced_pair_counts_match_a_count(void **state) {
  (void)state;
  const int64_t pos0s[] = {0, 1, 5, 127, 128, 129, 1000, 4133, 57344, 65535};
  const int64_t qlens[] = {1, 2, 63, 64, 65, 127, 128, 129, 300, 1024, 4097};
  const int64_t maxbs[] = {1, 3, 9, 40, 600};
  for (int64_t tokens = 1; tokens <= 256; tokens *= 2)
    for (size_t a = 0; a < sizeof pos0s / sizeof pos0s[0]; a++)
      for (size_t b = 0; b < sizeof qlens / sizeof qlens[0]; b++)
        for (size_t c = 0; c < sizeof maxbs / sizeof maxbs[0]; c++) {
          const int64_t pos0 = pos0s[a], qlen = qlens[b], maxb = maxbs[c];
          const int64_t ntiles = (qlen + tokens - 1) / tokens;
          for (int64_t m = 0; m <= ntiles; m++) {
            const int64_t want = counted_work(pos0, qlen, tokens, maxb, m);
            const int64_t got = st_score_tiles_work(pos0, qlen, tokens, maxb, m);
            if (got != want)
              fail_msg("pos0=%lld qlen=%lld tokens=%lld max_blocks=%lld m=%lld: %lld pairs, counted %lld",
                       (long long)pos0, (long long)qlen, (long long)tokens, (long long)maxb, (long long)m,
                       (long long)got, (long long)want);
          }
        }
  assert_int_equal(st_score_tiles_work(0, 0, 128, 8, 0), 0);
  assert_int_equal(st_score_tiles_work(-5, 10, 128, 8, 1), 0); /* seq_len < q_len: no pairs */
}

/* Views the tensor copies cannot address are refused before the driver is
 * asked (cu is NULL here: reaching it would crash). */
static void expect_map_refused(const st_tensor *t, const char *fragment) {
  st_err err = {{0}};
  st_tensor_map map;
  const st_status s = st_tensor_map_pages(NULL, t, "k_cache", 256, &map, &err);
  if (s != ST_ERR_INVALID_ARG || !strstr(err.msg, fragment))
    fail_msg("expected tensor map refusal with '%s', got status %d: '%s'", fragment, (int)s, err.msg);
}

static void test_tensor_maps_refuse_what_the_copy_engine_cannot_address(void **state) {
  (void)state;
  st_index_score_args a = valid_args();
  st_tensor t = a.k_cache;
  t.dtype = ST_DTYPE_FP32;
  expect_map_refused(&t, "k_cache.dtype=");
  t = a.k_cache;
  t.shape[2] = 32; /* 64-byte rows */
  t.stride[1] = 32;
  expect_map_refused(&t, "k_cache rows of 64 bytes are not whole 128-byte panels");
  t = a.k_cache;
  t.data = FAKE(0x200008);
  expect_map_refused(&t, "k_cache.data=0x200008 is not 16-byte aligned for tensor copies");
  t = a.k_cache;
  t.stride[0] = 128 * D + 4; /* a page stride of 8 bytes past whole rows */
  expect_map_refused(&t, "k_cache.stride[0]=16388 elements (32776 bytes) must be a positive multiple of 16 bytes below 2^40");
  t = a.k_cache;
  t.stride[0] = (int64_t)1 << 40;
  expect_map_refused(&t, "k_cache.stride[0]=1099511627776 elements");
  t = a.k_cache;
  t.ndim = 2;
  expect_map_refused(&t, "k_cache has 2 dimensions, not [pages, (heads,) 128, D]");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tensor_maps_refuse_what_the_copy_engine_cannot_address),
      cmocka_unit_test(test_balanced_pair_counts_match_a_count),
      cmocka_unit_test(test_bad_arguments_are_refused_by_name),
      cmocka_unit_test(test_configs_hold_what_the_kernel_can_do),
      cmocka_unit_test(test_fit_and_plan),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
