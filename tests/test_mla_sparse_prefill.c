/* test_mla_sparse_prefill - the mla_sparse_prefill launcher and, on a GPU,
 * every variant against the double-precision reference.
 *
 * cpu: argument checks (each refusal's status and the argument it names),
 * the variant config (bf16 only), the plan as a decode batch of one-token
 * requests over one-token pages (grid, splits, workspace, shared memory,
 * max_logits in the argument block) and the dispatch key. The prefill
 * reference's own tests are in test_mla_sparse_decode (it is a view onto
 * that reference). gpu: every generated variant over the contract's edge
 * cases (tuner/ops/mla_sparse_prefill.c builds the inputs; with
 * ST_TEST_COMPILE_ONLY it only compiles them). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/mla_sparse_prefill.h"
#include "ops/tensor_check.h"
#include "testutil.h"
#include "variant_matrix.h"

#define FAKE(p) ((void *)(uintptr_t)(p))

static uint64_t g_seed;

/* ---- the launcher ------------------------------------------------------- */

enum { LSQ = 4096, LHQ = 128, LSKV = 32768, LTOPK = 2048 };

static st_mla_sparse_prefill_args valid_args(void) {
  st_mla_sparse_prefill_args a;
  st_mla_sparse_prefill_args_init(&a);
  st_tensor_contiguous(&a.q, FAKE(0x10000), ST_DTYPE_BF16, 3, (int64_t[]){LSQ, LHQ, 576});
  st_tensor_contiguous(&a.kv, FAKE(0x100000000ull), ST_DTYPE_BF16, 3, (int64_t[]){LSKV, 1, 576});
  st_tensor_contiguous(&a.indices, FAKE(0x50000), ST_DTYPE_INT32, 3, (int64_t[]){LSQ, 1, LTOPK});
  st_tensor_contiguous(&a.o, FAKE(0x60000), ST_DTYPE_BF16, 3, (int64_t[]){LSQ, LHQ, 512});
  a.sm_scale = 0.0721f;
  return a;
}

static void with_every_option(st_mla_sparse_prefill_args *a) {
  st_tensor_contiguous(&a->topk_length, FAKE(0x70000), ST_DTYPE_INT32, 1, (int64_t[]){a->q.shape[0]});
  st_tensor_contiguous(&a->attn_sink, FAKE(0x71000), ST_DTYPE_FP32, 1, (int64_t[]){a->q.shape[1]});
  st_tensor_contiguous(&a->lse, FAKE(0x72000), ST_DTYPE_FP32, 2, (int64_t[]){a->q.shape[0], a->q.shape[1]});
  st_tensor_contiguous(&a->max_logits, FAKE(0x73000), ST_DTYPE_FP32, 2, (int64_t[]){a->q.shape[0], a->q.shape[1]});
}

static void expect_refused(const st_mla_sparse_prefill_args *a, st_status want, const char *fragment) {
  st_err err = {{0}};
  const st_status s = st_mla_sparse_prefill_check_args(a, &err);
  if (s != want || !strstr(err.msg, fragment))
    fail_msg("expected status %d with '%s', got status %d: '%s'", (int)want, fragment, (int)s, err.msg);
}

static void test_valid_arguments_pass_with_every_option(void **state) {
  (void)state;
  st_err err = {{0}};
  st_mla_sparse_prefill_args a = valid_args();
  assert_int_equal(st_mla_sparse_prefill_check_args(&a, &err), ST_OK);
  with_every_option(&a);
  assert_int_equal(st_mla_sparse_prefill_check_args(&a, &err), ST_OK);
  a = valid_args();
  a.kv.stride[0] = 640; /* padded rows */
  a.q.stride[1] = 584;
  a.q.stride[0] = 584 * LHQ;
  a.indices.stride[0] = LTOPK + 4;
  assert_int_equal(st_mla_sparse_prefill_check_args(&a, &err), ST_OK);
  a = valid_args();
  a.q.shape[0] = a.o.shape[0] = a.indices.shape[0] = 1; /* one token, h_q 16, a kv of one row */
  a.q.shape[1] = a.o.shape[1] = 16;
  a.kv.shape[0] = 1;
  assert_int_equal(st_mla_sparse_prefill_check_args(&a, &err), ST_OK);
}

static void test_bad_arguments_are_refused_by_name(void **state) {
  (void)state;
  const st_status I = ST_ERR_INVALID_ARG, U = ST_ERR_UNSUPPORTED;
  expect_refused(NULL, I, "args is NULL");
  st_mla_sparse_prefill_args a;
  a = valid_args();
  a.sm_scale = 0;
  expect_refused(&a, I, "sm_scale=0 must be positive");
  a = valid_args();
  a.sm_scale = NAN;
  expect_refused(&a, I, "must be positive and finite");
  a = valid_args();
  a.q.data = NULL;
  expect_refused(&a, I, "q");
  a = valid_args();
  a.q.dtype = ST_DTYPE_FP32;
  expect_refused(&a, I, "q.dtype");
  a = valid_args();
  a.q.shape[2] = 512;
  expect_refused(&a, I, "q.shape[2]=512 must be 576");
  a = valid_args();
  a.q.shape[1] = a.o.shape[1] = 24;
  expect_refused(&a, U, "h_q=24 (q.shape[1]) is not a multiple of 16");
  a = valid_args();
  a.q.shape[1] = a.o.shape[1] = 256;
  expect_refused(&a, U, "h_q=256");
  a = valid_args();
  a.q.shape[0] = a.o.shape[0] = a.indices.shape[0] = (1 << 20) + 1;
  expect_refused(&a, I, "s_q=1048577 (q.shape[0]) is outside 1..1048576");
  a = valid_args();
  a.q.data = FAKE(0x10008);
  expect_refused(&a, I, "q.data=0x10008 is not 16-byte aligned");
  a = valid_args();
  a.kv.dtype = ST_DTYPE_FP8_E4M3;
  expect_refused(&a, I, "kv.dtype=");
  a = valid_args();
  a.kv.data = NULL;
  expect_refused(&a, I, "kv");
  a = valid_args();
  a.kv.shape[1] = 2;
  expect_refused(&a, I, "kv.shape=[32768,2,576] must be [s_kv, 1, 576]");
  a = valid_args();
  a.kv.shape[2] = 656;
  expect_refused(&a, I, "kv.shape=[32768,1,656]");
  a = valid_args();
  a.kv.stride[0] = 580; /* rows 1160 bytes apart: not 16-byte aligned */
  expect_refused(&a, I, "kv.stride[0]=580");
  a = valid_args();
  a.indices.dtype = ST_DTYPE_FP32;
  expect_refused(&a, I, "indices.dtype");
  a = valid_args();
  a.indices.ndim = 2;
  expect_refused(&a, I, "indices");
  a = valid_args();
  a.indices.shape[0] = 4095;
  expect_refused(&a, I, "indices.shape=[4095,1,2048] must be [s_q=4096, 1, topk]");
  a = valid_args();
  a.indices.shape[1] = 2;
  expect_refused(&a, I, "indices.shape=[4096,2,2048]");
  a = valid_args();
  a.indices.shape[2] = 4096;
  expect_refused(&a, I, "topk=4096 (indices.shape[2]) is outside 1..2048");
  a = valid_args();
  st_tensor_contiguous(&a.topk_length, FAKE(0x70000), ST_DTYPE_INT32, 1, (int64_t[]){LSQ - 1});
  expect_refused(&a, I, "topk_length.shape[0]=4095 must be 4096 (s_q)");
  a = valid_args();
  st_tensor_contiguous(&a.topk_length, FAKE(0x70000), ST_DTYPE_FP32, 1, (int64_t[]){LSQ});
  expect_refused(&a, I, "topk_length.dtype");
  a = valid_args();
  st_tensor_contiguous(&a.attn_sink, FAKE(0x71000), ST_DTYPE_BF16, 1, (int64_t[]){LHQ});
  expect_refused(&a, I, "attn_sink.dtype");
  a = valid_args();
  st_tensor_contiguous(&a.attn_sink, FAKE(0x71000), ST_DTYPE_FP32, 1, (int64_t[]){64});
  expect_refused(&a, I, "attn_sink.shape[0]=64 must be 128 (h_q)");
  a = valid_args();
  a.o.shape[2] = 576;
  expect_refused(&a, I, "o.shape=[4096,128,576] must be [s_q=4096, h_q=128, 512]");
  a = valid_args();
  a.o.dtype = ST_DTYPE_FP32;
  expect_refused(&a, I, "o.dtype");
  a = valid_args();
  a.o.data = NULL;
  expect_refused(&a, I, "o");
  a = valid_args();
  st_tensor_contiguous(&a.lse, FAKE(0x72000), ST_DTYPE_FP32, 2, (int64_t[]){LSQ, 64});
  expect_refused(&a, I, "lse.shape[1]=64 must be 128 ([s_q, h_q])");
  a = valid_args();
  st_tensor_contiguous(&a.max_logits, FAKE(0x73000), ST_DTYPE_FP32, 2, (int64_t[]){LHQ, LSQ});
  expect_refused(&a, I, "max_logits.shape[0]=128 must be 4096 ([s_q, h_q])");
  a = valid_args();
  st_tensor_contiguous(&a.max_logits, FAKE(0x73000), ST_DTYPE_BF16, 2, (int64_t[]){LSQ, LHQ});
  expect_refused(&a, I, "max_logits.dtype");
  a = valid_args();
  a.pdl = 3;
  expect_refused(&a, I, "pdl=3 must be 0 or 1");
}

static st_mla_sparse_prefill_config config(int heads, int tile, int threads, int mma, int splits) {
  return (st_mla_sparse_prefill_config){.dtype = ST_DTYPE_BF16,
                                        .heads_per_cta = heads,
                                        .tile_tokens = tile,
                                        .threads = threads,
                                        .mma = mma,
                                        .splits = splits};
}

static void test_variants_are_bf16_and_fit_by_heads_and_shared_memory(void **state) {
  (void)state;
  st_err err = {{0}};
  st_params k = {0}, l = {0};
  st_params_set(&k, "dtype", "fp8", &err);
  st_params_set_int(&k, "heads_per_cta", 64, &err);
  st_params_set_int(&k, "tile_tokens", 64, &err);
  st_params_set_int(&k, "threads", 512, &err);
  st_params_set_int(&k, "mma", 1, &err);
  st_params_set_int(&l, "splits", 0, &err);
  st_mla_sparse_prefill_config c;
  assert_int_equal(st_mla_sparse_prefill_config_from_params(&k, &l, &c, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "dtype='fp8'"));
  st_params_set(&k, "dtype", "bf16", &err);
  assert_int_equal(st_mla_sparse_prefill_config_from_params(&k, &l, &c, &err), ST_OK);
  assert_int_equal(c.heads_per_cta, 64);
  assert_int_equal(c.mma, 1);
  st_mla_sparse_prefill_args a = valid_args();
  assert_int_equal(st_mla_sparse_prefill_check_fit(&c, &a, &err), ST_OK);
  a.q.shape[1] = a.o.shape[1] = 48; /* 64 heads a CTA do not divide 48 */
  assert_int_equal(st_mla_sparse_prefill_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "Hq=48"));
  a = valid_args();
  c.pipe = 1; /* bf16 with 64 heads and 64-token tiles staged twice: 244 KiB */
  assert_int_equal(st_mla_sparse_prefill_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "shared memory"));
}

static void test_plans_a_decode_batch_of_one_token_requests(void **state) {
  (void)state;
  st_err err = {{0}};
  st_mla_sparse_prefill_args a = valid_args();
  with_every_option(&a);
  a.kv.stride[0] = 640;
  a.indices.stride[0] = LTOPK + 4;
  a.max_logits.stride[0] = 2 * LHQ;
  st_mla_sparse_prefill_config c = config(64, 64, 512, 1, 0);
  st_mla_sparse_prefill_plan p;
  assert_int_equal(st_mla_sparse_prefill_plan_make(&c, &a, 132, &p, &err), ST_OK);
  /* 4096 tokens x 2 head tiles fill the SMs: one split, no workspace */
  assert_int_equal(p.splits, 1);
  assert_int_equal(p.workspace_bytes, 0);
  assert_int_equal(p.merge_block, 0);
  assert_int_equal(p.grid[0], LSQ);
  assert_int_equal(p.grid[1], 2);
  assert_int_equal(p.block, 512);
  assert_int_equal(p.smem_bytes, 64 * 584 * 2 + 64 * 584 * 2 + 64 * 64 * 4 + 64 * 72 * 2 + 64 * 12 + 64 * 4);
  /* the argument block: one-token requests over one-token pages */
  assert_int_equal(p.params.qlen, 1);
  assert_int_equal(p.params.rows, LSQ);
  assert_int_equal(p.params.page_size, 1);
  assert_int_equal(p.params.num_slots, LSKV);
  assert_int_equal(p.params.kv_stride_page, 640);
  assert_int_equal(p.params.idx_stride_row, LTOPK + 4);
  assert_int_equal(p.params.topk, LTOPK);
  assert_ptr_equal(p.params.topk_length, FAKE(0x70000));
  assert_ptr_equal(p.params.sink, FAKE(0x71000));
  assert_ptr_equal(p.params.lse, FAKE(0x72000));
  assert_ptr_equal(p.params.max_logits, FAKE(0x73000));
  assert_int_equal(p.params.max_logits_stride_row, 2 * LHQ);
  assert_int_equal(p.params.max_logits_stride_head, 1);
  /* One token: splits fill the SMs (2 head tiles, 2 tiles of entries each
   * at least: 16 splits of 128 entries), and the merge writes the outputs */
  a = valid_args();
  a.q.shape[0] = a.o.shape[0] = a.indices.shape[0] = 1;
  assert_int_equal(st_mla_sparse_prefill_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.splits, 16);
  assert_int_equal(p.params.entries_per_split, 128);
  assert_int_equal(p.merge_grid[0], 1);
  assert_int_equal(p.merge_grid[1], LHQ);
  assert_int_equal(p.merge_block, 128);
  assert_true(p.workspace_bytes >= (size_t)16 * LHQ * (512 + 2) * 4);
  assert_null(p.params.max_logits);
  /* Explicit splits: at most topk, none empty (100 entries in 3 of 34) */
  a.indices.shape[2] = 100;
  c.splits = 3;
  assert_int_equal(st_mla_sparse_prefill_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.splits, 3);
  assert_int_equal(p.params.entries_per_split, 34);
}

static void test_dispatch_key_is_canonical(void **state) {
  (void)state;
  st_err err = {{0}};
  st_mla_sparse_prefill_args a = valid_args();
  a.q.shape[1] = a.o.shape[1] = 64;
  char key[256];
  st_params fields = {0};
  assert_int_equal(st_mla_sparse_prefill_dispatch_key(&a, key, sizeof key, &fields, &err), ST_OK);
  assert_string_equal(key, "mla_sparse_prefill:Hq=64,s_q=4096,topk=2048");
  assert_string_equal(st_params_get(&fields, "Hq"), "64");
  assert_string_equal(st_params_get(&fields, "s_q"), "4096");
  assert_string_equal(st_params_get(&fields, "topk"), "2048");
  assert_int_equal(st_mla_sparse_prefill_dispatch_key(&a, key, 10, NULL, &err), ST_ERR_INVALID_ARG);
}

/* ---- gpu: every variant over the edge cases ------------------------------ */

typedef struct edge {
  const char *tlen, *sel;
  int s_q, Hq, s_kv, topk, sink, lse, ml;
} edge;

static const edge edges[] = {
    /* 128 heads, every edge of the indices (-1, >= s_kv, repeats, a token
     * with none), topk_length 0 and below topk, sinks +-inf and finite */
    {"random", "edge", 3, 128, 4096, 2048, 1, 1, 1},
    /* 64 heads, lse without max_logits; topk not a multiple of a tile */
    {"none", "edge", 5, 64, 1000, 300, 0, 1, 0},
    /* 16 heads, max_logits without lse; kv shorter than topk: repeats */
    {"none", "random", 4, 16, 5, 7, 1, 0, 1},
    /* many tokens (one split), neither optional output */
    {"random", "random", 300, 32, 2000, 100, 0, 0, 0},
    /* one token, top-1024: split and merged */
    {"none", "random", 1, 128, 32768, 1024, 1, 1, 1},
};

static void make_shape(const edge *e, st_shape *s) {
  memset(s, 0, sizeof *s);
  st_err err = {{0}};
  snprintf(s->op, sizeof s->op, "mla_sparse_prefill");
  st_params_set(&s->params, "tlen", e->tlen, &err);
  st_params_set(&s->params, "sel", e->sel, &err);
  st_params_set_int(&s->params, "s_q", e->s_q, &err);
  st_params_set_int(&s->params, "Hq", e->Hq, &err);
  st_params_set_int(&s->params, "s_kv", e->s_kv, &err);
  st_params_set_int(&s->params, "topk", e->topk, &err);
  st_params_set_int(&s->params, "sink", e->sink, &err);
  st_params_set_int(&s->params, "lse", e->lse, &err);
  st_params_set_int(&s->params, "ml", e->ml, &err);
  snprintf(s->key, sizeof s->key, "edge:tlen=%s,sel=%s,s_q=%d,Hq=%d,s_kv=%d,topk=%d,sink=%d,lse=%d,ml=%d", e->tlen,
           e->sel, e->s_q, e->Hq, e->s_kv, e->topk, e->sink, e->lse, e->ml);
}

static void test_every_variant_matches_the_reference_on_edge_cases(void **state) {
  (void)state;
  const int n = (int)(sizeof edges / sizeof edges[0]);
  st_shape shapes[sizeof edges / sizeof edges[0]];
  for (int i = 0; i < n; i++) make_shape(&edges[i], &shapes[i]);
  st_test_every_variant("mla_sparse_prefill", shapes, n, g_seed);
}

int main(int argc, char **argv) {
  const char *part = argc > 1 ? argv[1] : "";
  if (strcmp(part, "cpu") == 0) {
    g_seed = st_test_seed("mla_sparse_prefill_cpu");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_arguments_pass_with_every_option),
        cmocka_unit_test(test_bad_arguments_are_refused_by_name),
        cmocka_unit_test(test_variants_are_bf16_and_fit_by_heads_and_shared_memory),
        cmocka_unit_test(test_plans_a_decode_batch_of_one_token_requests),
        cmocka_unit_test(test_dispatch_key_is_canonical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
  }
  if (strcmp(part, "gpu") == 0) {
    const int rc = st_test_require_gpu();
    if (rc) return rc;
    g_seed = st_test_seed("mla_sparse_prefill_gpu");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_variant_matches_the_reference_on_edge_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
  }
  fprintf(stderr, "usage: %s cpu|gpu\n", argv[0]);
  return 2;
}
