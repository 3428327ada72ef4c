/* test_runtime_api_attention.c - the public entry points of the attention
 * ops (st_sparse_attn_decode*, st_sparse_attn*) on a machine without a GPU.
 *
 * A handle made without a device (st_handle_alloc, a stand-in loader, one
 * default variant per op) runs the calls through validation, dispatch, plan
 * and workspace checks up to the launch: NULL handles and arguments, bad
 * arguments with the launcher's message, no variant named with the op and
 * shape, a workspace too small, and the launch refused plainly without a
 * device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_fixture.h"
#include "handle.h"
#include "ops/tensor_check.h"
#include "testutil.h"

static st_dispatch_variant decode_variant(const char *id, int splits) {
  st_dispatch_variant v;
  memset(&v, 0, sizeof v);
  snprintf(v.id, sizeof v.id, "%s", id);
  snprintf(v.name, sizeof v.name, "sparse_attn_decode_%s", id);
  snprintf(v.source_hash, sizeof v.source_hash, "src_%s", id);
  v.cfg.sparse_attn_decode = (st_sparse_attn_decode_config){.dtype = ST_DTYPE_BF16,
                                                            .head_dim = 128,
                                                            .group = 16,
                                                            .warps_n = 4,
                                                            .stages = 1,
                                                            .algo = ST_SPARSE_ATTN_DECODE_SINGLE,
                                                            .cluster = 1,
                                                            .splits = splits};
  return v;
}

static st_dispatch_variant prefill_variant(const char *id) {
  st_dispatch_variant v;
  memset(&v, 0, sizeof v);
  snprintf(v.id, sizeof v.id, "%s", id);
  snprintf(v.name, sizeof v.name, "sparse_attn_%s", id);
  snprintf(v.source_hash, sizeof v.source_hash, "src_%s", id);
  v.cfg.sparse_attn = (st_sparse_attn_config){
      .dtype = ST_DTYPE_BF16, .head_dim = 128, .group = 16, .tokens = 4, .topk_cap = 16, .stages = 1};
  v.rank = 16;
  return v;
}

/* The (pages, 2, 128, Hkv, D) cache of both ops' arguments. */
#define SET_CACHES(a, pages, Hkv, D)                                                                                   \
  do {                                                                                                                 \
    st_tensor_contiguous(&(a).k_cache, FAKE_PTR(2), ST_DTYPE_BF16, 4, (int64_t[]){pages, Hkv, 128, D});                \
    const int64_t stride_[4] = {2 * 128 * (Hkv) * (D), D, (Hkv) * (D), 1};                                             \
    memcpy((a).k_cache.stride, stride_, sizeof stride_);                                                               \
    (a).v_cache = (a).k_cache;                                                                                         \
    (a).v_cache.data = (char *)FAKE_PTR(2) + 128 * (Hkv) * (D)*2;                                                      \
  } while (0)

static st_sparse_attn_decode_args decode_args(int R) {
  st_sparse_attn_decode_args a;
  st_sparse_attn_decode_args_init(&a);
  st_tensor_contiguous(&a.q, FAKE_PTR(1), ST_DTYPE_BF16, 3, (int64_t[]){R, 32, 128});
  SET_CACHES(a, 4096, 2, 128);
  st_tensor_contiguous(&a.topk_idx, FAKE_PTR(3), ST_DTYPE_INT32, 3, (int64_t[]){2, R, 16});
  st_tensor_contiguous(&a.block_table, FAKE_PTR(4), ST_DTYPE_INT32, 2, (int64_t[]){R, 256});
  st_tensor_contiguous(&a.seq_lens, FAKE_PTR(5), ST_DTYPE_INT32, 1, (int64_t[]){R});
  st_tensor_contiguous(&a.o, FAKE_PTR(6), ST_DTYPE_BF16, 3, (int64_t[]){R, 32, 128});
  a.sm_scale = 0.088f;
  a.qlen = 1;
  a.max_context = 32768;
  return a;
}

static st_sparse_attn_args prefill_args(int total_q) {
  st_sparse_attn_args a;
  st_sparse_attn_args_init(&a);
  st_tensor_contiguous(&a.q, FAKE_PTR(1), ST_DTYPE_BF16, 3, (int64_t[]){total_q, 32, 128});
  SET_CACHES(a, 4096, 2, 128);
  st_tensor_contiguous(&a.topk_idx, FAKE_PTR(3), ST_DTYPE_INT32, 3, (int64_t[]){2, total_q, 16});
  st_tensor_contiguous(&a.block_table, FAKE_PTR(4), ST_DTYPE_INT32, 2, (int64_t[]){2, 512});
  st_tensor_contiguous(&a.cu_seqlens_q, FAKE_PTR(7), ST_DTYPE_INT32, 1, (int64_t[]){3});
  st_tensor_contiguous(&a.seq_lens, FAKE_PTR(5), ST_DTYPE_INT32, 1, (int64_t[]){2});
  st_tensor_contiguous(&a.o, FAKE_PTR(6), ST_DTYPE_BF16, 3, (int64_t[]){total_q, 32, 128});
  a.sm_scale = 0.088f;
  a.max_context = 65536;
  return a;
}

static void null_handles_and_arguments_are_named(void **state) {
  (void)state;
  st_sparse_attn_decode_args d = decode_args(8);
  st_sparse_attn_args p = prefill_args(1000);
  size_t bytes = 9;
  assert_int_equal(st_sparse_attn_decode_workspace_size(NULL, &d, &bytes), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(NULL), "handle is NULL");
  assert_int_equal(st_sparse_attn_decode(NULL, &d, NULL, 0, NULL), ST_ERR_INVALID_ARG);
  assert_int_equal(st_sparse_attn_prepare(NULL, &p), ST_ERR_INVALID_ARG);
  assert_int_equal(st_sparse_attn(NULL, &p, NULL, 0, NULL), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(NULL), "handle is NULL");

  fake_loader f = {0};
  st_handle *h = bare_handle(ST_OP_SPARSE_ATTN, NULL, &f);
  assert_int_equal(st_sparse_attn_decode_workspace_size(h, NULL, &bytes), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "args is NULL");
  assert_int_equal(st_sparse_attn_decode_workspace_size(h, &d, NULL), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "bytes is NULL");
  assert_int_equal(st_sparse_attn_workspace_size(h, NULL, &bytes), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "args is NULL");
  assert_int_equal(st_sparse_attn(h, NULL, NULL, 0, NULL), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "args is NULL");
  assert_int_equal(f.loads, 0);
  st_close(h);
}

static void invalid_arguments_carry_the_launcher_message(void **state) {
  (void)state;
  fake_loader f = {0};
  st_handle *h = bare_handle(ST_OP_SPARSE_ATTN_DECODE, NULL, &f);
  size_t bytes = 0;
  st_sparse_attn_decode_args d = decode_args(8);
  d.qlen = 7;
  assert_int_equal(st_sparse_attn_decode_workspace_size(h, &d, &bytes), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "qlen=7 is outside 1..4");
  d = decode_args(8);
  d.scale_mode = ST_KV_SCALE_TENSOR;
  assert_int_equal(st_sparse_attn_decode(h, &d, NULL, 0, NULL), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "fp8 caches only");
  st_sparse_attn_args p = prefill_args(1000);
  p.cu_seqlens_q.shape[0] = 2;
  assert_int_equal(st_sparse_attn_prepare(h, &p), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "cu_seqlens_q.shape[0]=2 must be the 2 requests + 1");
  p = prefill_args(1000);
  p.o.data = NULL; /* the launch reads pointers, the size query does not */
  assert_int_equal(st_sparse_attn(h, &p, NULL, 0, NULL), ST_ERR_INVALID_ARG);
  assert_contains(st_last_error(h), "o.data is NULL");
  assert_int_equal(st_sparse_attn_workspace_size(h, &p, &bytes), ST_ERR_NO_VARIANT); /* past validation */
  st_close(h);
}

static void no_variant_names_the_op_and_shape(void **state) {
  (void)state;
  fake_loader f = {0};
  st_dispatch_variant v = prefill_variant("d128");
  st_handle *h = bare_handle(ST_OP_SPARSE_ATTN, &v, &f);
  st_sparse_attn_args p = prefill_args(1000);
  p.topk_idx.shape[2] = 40; /* above the only variant's capacity */
  size_t bytes = 3;
  assert_int_equal(st_sparse_attn_workspace_size(h, &p, &bytes), ST_ERR_NO_VARIANT);
  assert_int_equal(bytes, 0);
  printf("# no variant: %s\n", st_last_error(h));
  assert_contains(st_last_error(h), "no compiled sparse_attn variant for B=1000");
  assert_contains(st_last_error(h), "topk=40");
  assert_contains(st_last_error(h), "topk <= 16");
  st_sparse_attn_decode_args d = decode_args(8);
  assert_int_equal(st_sparse_attn_decode_prepare(h, &d), ST_ERR_NO_VARIANT);
  assert_contains(st_last_error(h), "no compiled sparse_attn_decode variant");
  assert_contains(st_last_error(h), "no winner and no default");
  assert_int_equal(f.loads, 0);
  st_close(h);
}

static void workspace_is_sized_checked_and_the_launch_needs_a_device(void **state) {
  (void)state;
  fake_loader f = {0};
  st_dispatch_variant v = decode_variant("s4", 4);
  st_handle *h = bare_handle(ST_OP_SPARSE_ATTN_DECODE, &v, &f);
  st_sparse_attn_decode_args d = decode_args(8);
  size_t bytes = 0;
  assert_int_equal(st_sparse_attn_decode_workspace_size(h, &d, &bytes), ST_OK);
  assert_true(bytes > 0); /* 4 splits: partial states and counters */
  assert_int_equal(st_sparse_attn_decode(h, &d, FAKE_PTR(9), bytes - 1, NULL), ST_ERR_WORKSPACE);
  char needed[64];
  snprintf(needed, sizeof needed, "needs %zu bytes", bytes);
  assert_contains(st_last_error(h), needed);
  assert_contains(st_last_error(h), "st_sparse_attn_decode_workspace_size");
  assert_int_equal(st_sparse_attn_decode(h, &d, FAKE_PTR(9), bytes, NULL), ST_ERR_NO_DRIVER);
  assert_contains(st_last_error(h), "no CUDA device");
  assert_int_equal(f.loads, 1); /* loaded once, remembered */
  st_close(h);

  st_dispatch_variant pv = prefill_variant("d128");
  h = bare_handle(ST_OP_SPARSE_ATTN, &pv, &f);
  st_sparse_attn_args p = prefill_args(1000);
  assert_int_equal(st_sparse_attn_workspace_size(h, &p, &bytes), ST_OK);
  assert_int_equal(bytes, 0);
  assert_int_equal(st_sparse_attn(h, &p, NULL, 0, NULL), ST_ERR_NO_DRIVER);
  assert_contains(st_last_error(h), "no CUDA device");
  assert_string_equal(st_last_variant(h), "");
  st_close(h);

  /* A block-major winner keeps its lists and partials in the workspace. */
  st_dispatch_variant bv = prefill_variant("block");
  bv.cfg.sparse_attn.algo = ST_SPARSE_ATTN_BLOCK;
  bv.cfg.sparse_attn.tokens = 8;
  bv.cfg.sparse_attn.ctas = 2;
  bv.cfg.sparse_attn.mtiles = 2;
  h = bare_handle(ST_OP_SPARSE_ATTN, &bv, &f);
  assert_int_equal(st_sparse_attn_workspace_size(h, &p, &bytes), ST_OK);
  assert_true(bytes > (size_t)1000 * 2 * 16 * 16 * 128 * 2); /* at least the bf16 partials of 1000 tokens */
  assert_int_equal(st_sparse_attn(h, &p, FAKE_PTR(9), bytes - 1, NULL), ST_ERR_WORKSPACE);
  assert_contains(st_last_error(h), "st_sparse_attn_workspace_size");
  assert_int_equal(st_sparse_attn(h, &p, FAKE_PTR(9), bytes, NULL), ST_ERR_NO_DRIVER);
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
