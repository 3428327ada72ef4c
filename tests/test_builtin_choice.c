/* test_builtin_choice.c - which built-in variant a decode or prefill call
 * runs with no database (st_builtin_choose: the library's own defaults in
 * dispatch order, by the op's load and qlen ranges and its
 * default_meant_for, each fitted by its launcher's plan) on a device of
 * 132 multiprocessors. Pins the rules of generator/ops/index_decode.lua,
 * sparse_attn_decode.lua and sparse_attn.lua (docs/kernels/<op>.md) to
 * calls on both sides of each boundary. No GPU: the plans read shapes only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "cmd_in_process.h"
#include "commands.h"
#include "dispatch.h"
#include "ops/index_decode.h"
#include "ops/op.h"
#include "ops/sparse_attn.h"
#include "ops/sparse_attn_decode.h"
#include "ops/tensor_check.h"
#include "testutil.h"

#define FAKE(p) ((void *)(uintptr_t)(p))
enum { SMS = 132, PAGES = 4096 };

/* The name of the built-in variant the library runs for `args` of `op`. */
static void expect_first(st_op_id op, const void *args, const char *want) {
  st_dispatch_variant v;
  st_err err = {{0}};
  char key[ST_DISPATCH_KEY_MAX];
  assert_int_equal(st_op_desc_of(op)->dispatch_key(args, key, sizeof key, NULL, &err), ST_OK);
  const st_status st = st_builtin_choose(op, args, SMS, &v, &err);
  if (st != ST_OK || strcmp(v.name, want) != 0)
    fail_msg("%s: first %s, want %s", key, st == ST_OK ? v.name : err.msg, want);
}

/* The split count the chosen built-in's launch plan resolves ("auto"):
 * what `sparsetune builtin` prints beside the variant. */
static void expect_splits(st_op_id op, const void *args, int want) {
  st_dispatch_variant v;
  st_err err = {{0}};
  assert_int_equal(st_builtin_choose(op, args, SMS, &v, &err), ST_OK);
  st_op_plan plan;
  st_plan_info info = {0};
  assert_int_equal(st_op_desc_of(op)->plan(&v.cfg, args, SMS, &plan, &info, &err), ST_OK);
  if (info.splits != want) fail_msg("%s: %d splits, want %d", v.name, info.splits, want);
}

static st_index_decode_args index_call(st_dtype dt, int64_t B, int64_t H, int qlen, int ctx, int topk) {
  st_index_decode_args a;
  st_index_decode_args_init(&a);
  const int64_t cols = (ctx + 127) / 128;
  st_tensor_contiguous(&a.q, FAKE(0x10000), dt, 3, (int64_t[]){B * qlen, H, 128});
  st_tensor_contiguous(&a.k_cache, FAKE(0x100000000ull), dt, 3, (int64_t[]){PAGES, 128, 128});
  st_tensor_contiguous(&a.block_table, FAKE(0x30000), ST_DTYPE_INT32, 2, (int64_t[]){B, cols});
  st_tensor_contiguous(&a.seq_lens, FAKE(0x40000), ST_DTYPE_INT32, 1, (int64_t[]){B});
  st_tensor_contiguous(&a.topk_idx, FAKE(0x50000), ST_DTYPE_INT32, 3, (int64_t[]){H, B * qlen, topk});
  a.qlen = qlen;
  a.topk = topk;
  a.init_blocks = 1;
  a.local_blocks = 2;
  a.max_context = ctx;
  return a;
}

/* Paged K and V caches, (pages, 2, 128, Hkv, 128) bytes of a page: K then V. */
static st_sparse_attn_decode_args attn_call(st_dtype dt, int64_t B, int64_t Hkv, int qlen, int topk) {
  st_sparse_attn_decode_args a;
  st_sparse_attn_decode_args_init(&a);
  st_tensor_contiguous(&a.q, FAKE(0x10000), ST_DTYPE_BF16, 3, (int64_t[]){B * qlen, 16 * Hkv, 128});
  const int64_t shape[4] = {PAGES, Hkv, 128, 128};
  const int64_t stride[4] = {2 * 128 * Hkv * 128, 128, Hkv * 128, 1};
  st_tensor *kv[2] = {&a.k_cache, &a.v_cache};
  for (int i = 0; i < 2; i++) {
    kv[i]->data = FAKE(0x100000000ull + (uintptr_t)(i * 128 * Hkv * 128 * st_dtype_bytes(dt)));
    kv[i]->dtype = dt;
    kv[i]->ndim = 4;
    memcpy(kv[i]->shape, shape, sizeof shape);
    memcpy(kv[i]->stride, stride, sizeof stride);
  }
  if (dt == ST_DTYPE_FP8_E4M3) {
    a.scale_mode = ST_KV_SCALE_SCALAR;
    a.k_scale = a.v_scale = 1.0f;
  }
  st_tensor_contiguous(&a.topk_idx, FAKE(0x50000), ST_DTYPE_INT32, 3, (int64_t[]){Hkv, B * qlen, topk});
  st_tensor_contiguous(&a.block_table, FAKE(0x30000), ST_DTYPE_INT32, 2, (int64_t[]){B, 256});
  st_tensor_contiguous(&a.seq_lens, FAKE(0x40000), ST_DTYPE_INT32, 1, (int64_t[]){B});
  st_tensor_contiguous(&a.o, FAKE(0x60000), ST_DTYPE_BF16, 3, (int64_t[]){B * qlen, 16 * Hkv, 128});
  a.sm_scale = 0.088f;
  a.qlen = qlen;
  a.max_context = 32768;
  return a;
}

/* One prefill request of `tokens` query tokens after `prefix` cached ones. */
static st_sparse_attn_args prefill_call(int64_t tokens, int prefix, int64_t Hkv, int topk) {
  st_sparse_attn_args a;
  st_sparse_attn_args_init(&a);
  st_tensor_contiguous(&a.q, FAKE(0x10000), ST_DTYPE_BF16, 3, (int64_t[]){tokens, 16 * Hkv, 128});
  st_tensor_contiguous(&a.k_cache, FAKE(0x100000000ull), ST_DTYPE_BF16, 4, (int64_t[]){PAGES, Hkv, 128, 128});
  const int64_t stride[4] = {2 * 128 * Hkv * 128, 128, Hkv * 128, 1};
  memcpy(a.k_cache.stride, stride, sizeof stride);
  a.v_cache = a.k_cache;
  a.v_cache.data = FAKE(0x100000000ull + 128 * Hkv * 128 * 2);
  st_tensor_contiguous(&a.topk_idx, FAKE(0x50000), ST_DTYPE_INT32, 3, (int64_t[]){Hkv, tokens, topk});
  st_tensor_contiguous(&a.block_table, FAKE(0x30000), ST_DTYPE_INT32, 2, (int64_t[]){1, 1024});
  st_tensor_contiguous(&a.cu_seqlens_q, FAKE(0x38000), ST_DTYPE_INT32, 1, (int64_t[]){2});
  st_tensor_contiguous(&a.seq_lens, FAKE(0x40000), ST_DTYPE_INT32, 1, (int64_t[]){1});
  st_tensor_contiguous(&a.o, FAKE(0x60000), ST_DTYPE_BF16, 3, (int64_t[]){tokens, 16 * Hkv, 128});
  a.sm_scale = 0.088f;
  a.max_context = (int)(prefix + tokens);
  return a;
}

/* The kernel of as many query tokens as the call has (1, 2, else 4); four
 * heads a CTA of 3-4 tokens only above 32 blocks of (request, head) an SM
 * (bf16) or 128 (fp8); more heads a CTA only above heads / 2; fp8 CTAs of
 * 8 or more columns on 256 threads up to a load of 32, else 128. */
static void index_decode_query_tokens_and_heads(void **state) {
  (void)state;
  const st_dtype bf = ST_DTYPE_BF16, f8 = ST_DTYPE_FP8_E4M3;
  const struct {
    st_dtype dt;
    int64_t B, H;
    int qlen, ctx, topk;
    const char *want;
  } cases[] = {
      {bf, 3, 4, 2, 49792, 30, "index_decode.bf16.d128.k32.h4.q2.t256.u1.b2.split/auto"},
      /* load 4 x 4 x 131 / 132 = 15.9: 8 columns on 256 threads */
      {f8, 4, 4, 2, 16768, 17, "index_decode.fp8.d128.k32.h4.q2.t256.u1.b2.split/auto"},
      /* load 8 x 4 x 132 / 132 = 32, then 8 x 4 x 133 / 132: 128 threads */
      {f8, 8, 4, 2, 16896, 17, "index_decode.fp8.d128.k32.h4.q2.t256.u1.b2.split/auto"},
      {f8, 8, 4, 2, 16897, 17, "index_decode.fp8.d128.k32.h4.q2.t128.u1.b2.split/auto"},
      /* 4 columns (two heads of 2 tokens): 128 threads at any load */
      {f8, 4, 2, 2, 16768, 17, "index_decode.fp8.d128.k32.h2.q2.t128.u1.b2.split/auto"},
      /* load 4 x 4 x 109 / 132 = 13.2: two heads a CTA */
      {bf, 4, 4, 3, 13952, 10, "index_decode.bf16.d128.k16.h2.q4.t256.u1.b2.split/auto"},
      /* load 8 x 4 x 226 / 132 = 54.8: four heads in bf16, two in fp8 */
      {bf, 8, 4, 4, 28928, 21, "index_decode.bf16.d128.k32.h4.q4.t256.u1.b2.split/auto"},
      {f8, 8, 4, 4, 28928, 21, "index_decode.fp8.d128.k32.h2.q4.t128.u1.b2.split/auto"},
      /* load 256 x 4 x 48 / 132 = 372: four */
      {f8, 256, 4, 3, 6144, 8, "index_decode.fp8.d128.k8.h4.q4.t128.u1.b2.split/auto"},
      {bf, 32, 2, 1, 32768, 16, "index_decode.bf16.d128.k16.h2.q1.t256.u1.b2.split/auto"},
      /* load 1 x 2 x 64 / 132 = 0.97: one head a CTA */
      {bf, 1, 2, 1, 8192, 16, "index_decode.bf16.d128.k16.h1.q1.t256.u1.b2.split/auto"},
      {f8, 8, 3, 4, 32768, 20, "index_decode.fp8.d128.k32.h1.q4.t128.u1.b2.split/auto"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    st_index_decode_args a =
        index_call(cases[i].dt, cases[i].B, cases[i].H, cases[i].qlen, cases[i].ctx, cases[i].topk);
    expect_first(ST_OP_INDEX_DECODE, &a, cases[i].want);
  }
}

/* fp8 clusters up to 1.25 items an SM (150 items; 166 go one CTA an
 * item), and only where they split: of 4 at 2-4 splits, of 8 at 8; the
 * cluster of 16 only where it splits 8-16 ways (topk 16 over 2 items;
 * topk 9 and 13 split 2 and 4 ways: the cluster of 4); bf16 clusters of 8
 * below 0.4 items an SM (52 of 132; 54 go one CTA an item), up to 0.5
 * with 2-4 query tokens (64; 68 do not), then one CTA an item, without the
 * copy engine from 1.4, two stages for 4 query tokens. */
static void sparse_attn_decode_families_by_load_and_splits(void **state) {
  (void)state;
  const st_dtype bf = ST_DTYPE_BF16, f8 = ST_DTYPE_FP8_E4M3;
  const struct {
    st_dtype dt;
    int64_t B, Hkv;
    int qlen, topk;
    const char *want;
  } cases[] = {
      {f8, 75, 2, 1, 19, "sparse_attn_decode.fp8.d128.g16.w4.s1.kvr.tma.pvd.ring3.single.c4/auto"},
      /* 21 items of topk 24: 8 splits of 3 blocks */
      {f8, 21, 1, 1, 24, "sparse_attn_decode.fp8.d128.g16.w4.s1.kvr.tma.pvd.ring3.single.c8/auto"},
      {f8, 83, 2, 1, 19, "sparse_attn_decode.fp8.d128.g16.w4.s1.kvr.tma.pvd.single/s1"},
      /* 132 items of topk 4: two splits of 2 blocks at 2 CTAs an SM are not
       * worth it, one split in a cluster is not either */
      {f8, 22, 2, 3, 4, "sparse_attn_decode.fp8.d128.g16.w4.s1.kvr.tma.pvd.single/s1"},
      {f8, 128, 2, 1, 16, "sparse_attn_decode.fp8.d128.g16.w4.s1.kvr.tma.pvd.single/s1"},
      {f8, 1, 2, 1, 16, "sparse_attn_decode.fp8.d128.g16.w4.s1.kvr.tma.pvd.ring3.single.c16/auto"},
      {f8, 1, 2, 1, 13, "sparse_attn_decode.fp8.d128.g16.w4.s1.kvr.tma.pvd.ring3.single.c4/auto"},
      {bf, 1, 2, 1, 16, "sparse_attn_decode.bf16.d128.g16.w4.s1.tma.pvd.single.c16/auto"},
      {bf, 2, 1, 1, 9, "sparse_attn_decode.bf16.d128.g16.w4.s1.tma.single.c8/auto"},
      {bf, 8, 2, 1, 16, "sparse_attn_decode.bf16.d128.g16.w4.s1.tma.single.c8/auto"},
      {bf, 26, 2, 1, 16, "sparse_attn_decode.bf16.d128.g16.w4.s1.tma.single.c8/auto"},
      {bf, 27, 2, 1, 16, "sparse_attn_decode.bf16.d128.g16.w4.s3.tma.single/s1"},
      {bf, 16, 2, 2, 16, "sparse_attn_decode.bf16.d128.g16.w4.s1.tma.single.c8/auto"},
      {bf, 17, 2, 2, 16, "sparse_attn_decode.bf16.d128.g16.w4.s3.tma.single/s1"},
      {bf, 128, 2, 1, 16, "sparse_attn_decode.bf16.d128.g16.w4.s1.single/s1"},
      {bf, 64, 2, 3, 16, "sparse_attn_decode.bf16.d128.g16.w4.s1.single/s1"},
      {bf, 48, 2, 4, 16, "sparse_attn_decode.bf16.d128.g16.w4.s2.single/s1"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    st_sparse_attn_decode_args a = attn_call(cases[i].dt, cases[i].B, cases[i].Hkv, cases[i].qlen, cases[i].topk);
    expect_first(ST_OP_SPARSE_ATTN_DECODE, &a, cases[i].want);
  }
}

/* Prefill: the tile kernel for small calls over at most 6 blocks; the
 * dense launch where no request reaches past topk blocks (every token
 * selects every block it sees); else the block kernel's sparse path. */
static void sparse_attn_dense_only_where_every_token_is(void **state) {
  (void)state;
  const struct {
    int64_t tokens;
    int prefix;
    int64_t Hkv;
    int topk;
    const char *want;
  } cases[] = {
      {1852, 0, 4, 20, "sparse_attn.bf16.d128.g16.block.t8.s1.wg2.pbf16.c2/auto.dn"},
      {2048, 0, 2, 16, "sparse_attn.bf16.d128.g16.block.t8.s1.wg2.pbf16.c2/auto.dn"},
      {2049, 0, 2, 16, "sparse_attn.bf16.d128.g16.block.t8.s1.wg2.pbf16.c2/q3072.ov"},
      {4096, 0, 2, 16, "sparse_attn.bf16.d128.g16.block.t8.s1.wg2.pbf16.c2/q3072.ov"},
      {1852, 4096, 4, 20, "sparse_attn.bf16.d128.g16.block.t8.s1.wg2.pbf16.c2/q3072.ov"},
      {64, 0, 2, 16, "sparse_attn.bf16.d128.g16.t2.k16.s1"}, /* load 0.97: half the tokens a CTA */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    st_sparse_attn_args a = prefill_call(cases[i].tokens, cases[i].prefix, cases[i].Hkv, cases[i].topk);
    expect_first(ST_OP_SPARSE_ATTN, &a, cases[i].want);
  }
}

/* Every shape of every named suite has a built-in variant that fits, on
 * the H100/H200's 132 multiprocessors and on a smaller GPU's 78 (the
 * `builtin` command exits 1 naming the shapes that have none). */
static void every_suite_shape_has_a_builtin(void **state) {
  (void)state;
  static const char *const suites[] = {
      "smoke",          "anchors",      "m3-decode",     "m3-prefill",           "engine-decode",
      "engine-prefill", "dsv32-decode", "dsv32-prefill", "random-decode:201:34", "random-prefill:205:15"};
  for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++)
    for (int k = 0; k < 2; k++) {
      const int rc = st_test_cmd(st_cmd_builtin, "builtin",
                                 (const char *[]){"--suite", suites[i], "--sms", k ? "78" : "132", "--json", NULL});
      if (rc != 0)
        fail_msg("suite %s, %s SMs: a shape has no built-in variant (exit %d)", suites[i], k ? "78" : "132", rc);
    }
}

/* The plan names the split count the launcher resolved for an automatic
 * one: index_decode one wave (8 x 4 heads over 132 blocks: 64 slices,
 * 512 CTAs at 4 an SM); sparse_attn_decode's cluster of 8 at 64 bf16
 * items of topk 16 (4 splits of 4 blocks); one CTA an item above. The
 * prefill ops have no split count (0). */
static void plans_name_their_split_count(void **state) {
  (void)state;
  st_index_decode_args ix = index_call(ST_DTYPE_FP8_E4M3, 8, 4, 2, 16896, 17);
  expect_splits(ST_OP_INDEX_DECODE, &ix, 64);
  st_sparse_attn_decode_args at = attn_call(ST_DTYPE_BF16, 16, 2, 2, 16);
  expect_splits(ST_OP_SPARSE_ATTN_DECODE, &at, 4);
  at = attn_call(ST_DTYPE_BF16, 17, 2, 2, 16);
  expect_splits(ST_OP_SPARSE_ATTN_DECODE, &at, 1);
  st_sparse_attn_args pf = prefill_call(4096, 0, 2, 16);
  expect_splits(ST_OP_SPARSE_ATTN, &pf, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_suite_shape_has_a_builtin),
      cmocka_unit_test(sparse_attn_dense_only_where_every_token_is),
      cmocka_unit_test(index_decode_query_tokens_and_heads),
      cmocka_unit_test(sparse_attn_decode_families_by_load_and_splits),
      cmocka_unit_test(plans_name_their_split_count),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
