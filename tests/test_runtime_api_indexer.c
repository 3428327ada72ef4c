/* test_runtime_api_indexer.c - the public entry points of the prefill
 * indexer (st_index_score*, st_index_topk*, st_index_prefill*) on a
 * machine without a GPU: NULL handles and arguments, bad arguments with the
 * launcher's message, no variant named with the op and shape, workspace
 * sizes and checks, and the launch refused plainly without a device (the
 * handle of api_fixture.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_fixture.h"
#include "ops/tensor_check.h"
#include "testutil.h"

enum { TOTAL_Q = 1000, H = 2, D = 128, R = 2, COLS = 512, TOPK = 16 };

/* The scoring inputs both entry points share. */
#define SET_INPUTS(a)                                                                                                  \
  do {                                                                                                                 \
    st_tensor_contiguous(&(a).q, FAKE_PTR(1), ST_DTYPE_BF16, 3, (int64_t[]){TOTAL_Q, H, D});                           \
    st_tensor_contiguous(&(a).k_cache, FAKE_PTR(2), ST_DTYPE_BF16, 3, (int64_t[]){4096, 128, D});                      \
    st_tensor_contiguous(&(a).block_table, FAKE_PTR(3), ST_DTYPE_INT32, 2, (int64_t[]){R, COLS});                      \
    st_tensor_contiguous(&(a).cu_seqlens_q, FAKE_PTR(4), ST_DTYPE_INT32, 1, (int64_t[]){R + 1});                       \
    st_tensor_contiguous(&(a).seq_lens, FAKE_PTR(5), ST_DTYPE_INT32, 1, (int64_t[]){R});                               \
    (a).max_context = COLS * 128;                                                                                      \
  } while (0)

static st_index_score_args score_args(void) {
  st_index_score_args a;
  st_index_score_args_init(&a);
  SET_INPUTS(a);
  st_tensor_contiguous(&a.score, FAKE_PTR(6), ST_DTYPE_FP32, 3, (int64_t[]){H, TOTAL_Q, COLS});
  a.scale = 0.088f;
  return a;
}

static st_index_prefill_args prefill_args(void) {
  st_index_prefill_args a;
  st_index_prefill_args_init(&a);
  SET_INPUTS(a);
  st_tensor_contiguous(&a.topk_idx, FAKE_PTR(7), ST_DTYPE_INT32, 3, (int64_t[]){H, TOTAL_Q, TOPK});
  a.topk = TOPK;
  a.init_blocks = 1;
  a.local_blocks = 2;
  return a;
}

static st_index_topk_args topk_args(void) {
  st_index_topk_args a;
  st_index_topk_args_init(&a);
  st_tensor_contiguous(&a.score, FAKE_PTR(6), ST_DTYPE_FP32, 3, (int64_t[]){H, TOTAL_Q, COLS});
  st_tensor_contiguous(&a.cu_seqlens_q, FAKE_PTR(4), ST_DTYPE_INT32, 1, (int64_t[]){R + 1});
  st_tensor_contiguous(&a.seq_lens, FAKE_PTR(5), ST_DTYPE_INT32, 1, (int64_t[]){R});
  st_tensor_contiguous(&a.topk_idx, FAKE_PTR(7), ST_DTYPE_INT32, 3, (int64_t[]){H, TOTAL_Q, TOPK});
  a.topk = TOPK;
  a.init_blocks = 1;
  a.local_blocks = 2;
  a.max_context = COLS * 128;
  return a;
}

static st_index_score_config score_config(void) {
  return (st_index_score_config){
      .dtype = ST_DTYPE_BF16, .head_dim = D, .rows = 256, .warpgroups = 2, .stages = 2, .chunk_blocks = 0};
}

static st_dispatch_variant variant(const char *id, st_op_id op) {
  st_dispatch_variant v;
  memset(&v, 0, sizeof v);
  snprintf(v.id, sizeof v.id, "%s", id);
  snprintf(v.name, sizeof v.name, "%s_%s", st_op_name(op), id);
  snprintf(v.source_hash, sizeof v.source_hash, "src_%s", id);
  if (op == ST_OP_INDEX_SCORE) v.cfg.index_score = score_config();
  if (op == ST_OP_INDEX_PREFILL)
    v.cfg.index_prefill =
        (st_index_prefill_config){.score = score_config(), .algo = ST_INDEX_PREFILL_FUSED, .topk_cap = 16};
  if (op == ST_OP_INDEX_TOPK) v.cfg.index_topk = (st_index_topk_config){.rows = 8, .threads = 256, .topk_cap = 16};
  return v;
}

static void null_handles_and_arguments_are_named(void **state) {
  (void)state;
  st_index_score_args s = score_args();
  st_index_prefill_args p = prefill_args();
  st_index_topk_args k = topk_args();
  size_t bytes = 9;
  assert_int_equal(st_index_score_workspace_size(NULL, &s, &bytes), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(NULL), "handle is NULL");
  assert_int_equal(st_index_score(NULL, &s, NULL, 0, NULL), ST_ERR_INVALID_ARG);
  assert_int_equal(st_index_prefill_prepare(NULL, &p), ST_ERR_INVALID_ARG);
  assert_int_equal(st_index_prefill(NULL, &p, NULL, 0, NULL), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(NULL), "handle is NULL");
  assert_int_equal(st_index_topk_workspace_size(NULL, &k, &bytes), ST_ERR_INVALID_ARG);

  fake_loader f = {0};
  st_handle *h = bare_handle(ST_OP_INDEX_SCORE, NULL, &f);
  assert_int_equal(st_index_score_workspace_size(h, NULL, &bytes), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "args is NULL");
  assert_int_equal(st_index_prefill_workspace_size(h, &p, NULL), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "bytes is NULL");
  assert_int_equal(st_index_prefill(h, NULL, NULL, 0, NULL), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "args is NULL");
  assert_int_equal(st_index_topk_prepare(h, NULL), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "args is NULL");
  assert_int_equal(f.loads, 0);
  st_close(h);
}

static void invalid_arguments_carry_the_launcher_message(void **state) {
  (void)state;
  fake_loader f = {0};
  st_handle *h = bare_handle(ST_OP_INDEX_SCORE, NULL, &f);
  size_t bytes = 0;
  st_index_score_args s = score_args();
  s.scale = -2.0f;
  assert_int_equal(st_index_score_workspace_size(h, &s, &bytes), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "scale=-2 must be positive and finite");
  s = score_args();
  s.k_cache.shape[2] = 64;
  assert_int_equal(st_index_score(h, &s, NULL, 0, NULL), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "k_cache.shape=[4096,128,64] must be [pages,128,128]");
  st_index_prefill_args p = prefill_args();
  p.init_blocks = 15;
  assert_int_equal(st_index_prefill_prepare(h, &p), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "init_blocks + local_blocks = 15 + 2 exceeds topk=16");
  p = prefill_args();
  p.topk_idx.data = NULL; /* the launch reads pointers, the size query does not */
  assert_int_equal(st_index_prefill(h, &p, NULL, 0, NULL), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "topk_idx.data is NULL");
  assert_int_equal(st_index_prefill_workspace_size(h, &p, &bytes), ST_ERR_NO_VARIANT); /* past validation */
  st_index_topk_args k = topk_args();
  k.topk = 70;
  assert_int_equal(st_index_topk(h, &k, NULL, 0, NULL), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "topk=70 is outside 1..64");
  st_close(h);
}

static void no_variant_names_the_op_and_shape(void **state) {
  (void)state;
  fake_loader f = {0};
  st_dispatch_variant v = variant("fused16", ST_OP_INDEX_PREFILL);
  st_handle *h = bare_handle(ST_OP_INDEX_PREFILL, &v, &f);
  st_index_prefill_args p = prefill_args();
  p.topk = 40; /* above the only variant's lists */
  p.topk_idx.shape[2] = 40;
  size_t bytes = 3;
  assert_int_equal(st_index_prefill_workspace_size(h, &p, &bytes), ST_ERR_NO_VARIANT);
  assert_int_equal(bytes, 0);
  printf("# no variant: %s\n", st_last_error(h));
  assert_contains(st_last_error(h), "no compiled index_prefill variant for B=1000");
  assert_contains(st_last_error(h), "lists of 16 blocks, call asks topk=40");
  st_index_score_args s = score_args();
  assert_int_equal(st_index_score_prepare(h, &s), ST_ERR_NO_VARIANT);
  assert_contains(st_last_error(h), "no compiled index_score variant");
  assert_contains(st_last_error(h), "no winner and no default");
  assert_int_equal(f.loads, 0);
  st_close(h);
}

static void workspace_is_sized_checked_and_the_launch_needs_a_device(void **state) {
  (void)state;
  fake_loader f = {0};
  st_dispatch_variant v = variant("fused16", ST_OP_INDEX_PREFILL);
  st_handle *h = bare_handle(ST_OP_INDEX_PREFILL, &v, &f);
  st_index_prefill_args p = prefill_args();
  size_t bytes = 0;
  assert_int_equal(st_index_prefill_workspace_size(h, &p, &bytes), ST_OK);
  assert_true(bytes > 0 && bytes % 256 == 0); /* the chunks' row lists */
  assert_int_equal(st_index_prefill(h, &p, FAKE_PTR(9), bytes - 1, NULL), ST_ERR_WORKSPACE);
  char needed[64];
  snprintf(needed, sizeof needed, "needs %zu bytes", bytes);
  assert_contains(st_last_error(h), needed);
  assert_contains(st_last_error(h), "st_index_prefill_workspace_size");
  assert_int_equal(st_index_prefill(h, &p, NULL, 0, NULL), ST_ERR_WORKSPACE);
  assert_contains(st_last_error(h), "workspace is NULL");
  assert_int_equal(st_index_prefill(h, &p, FAKE_PTR(9), bytes, NULL), ST_ERR_NO_DRIVER);
  assert_contains(st_last_error(h), "no CUDA device");
  assert_int_equal(f.loads, 1); /* loaded once, remembered */
  st_close(h);

  st_dispatch_variant sv = variant("score", ST_OP_INDEX_SCORE);
  h = bare_handle(ST_OP_INDEX_SCORE, &sv, &f);
  st_index_score_args s = score_args();
  assert_int_equal(st_index_score_workspace_size(h, &s, &bytes), ST_OK);
  assert_int_equal(bytes, 0);
  assert_int_equal(st_index_score(h, &s, NULL, 0, NULL), ST_ERR_NO_DRIVER);
  assert_contains(st_last_error(h), "no CUDA device");
  st_close(h);

  st_dispatch_variant kv = variant("topk", ST_OP_INDEX_TOPK);
  h = bare_handle(ST_OP_INDEX_TOPK, &kv, &f);
  st_index_topk_args k = topk_args();
  assert_int_equal(st_index_topk_workspace_size(h, &k, &bytes), ST_OK);
  assert_int_equal(bytes, 0);
  assert_int_equal(st_index_topk(h, &k, NULL, 0, NULL), ST_ERR_NO_DRIVER);
  assert_string_equal(st_last_variant(h), "");
  st_close(h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(null_handles_and_arguments_are_named),
      cmocka_unit_test(invalid_arguments_carry_the_launcher_message),
      cmocka_unit_test(no_variant_names_the_op_and_shape),
      cmocka_unit_test(workspace_is_sized_checked_and_the_launch_needs_a_device),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
