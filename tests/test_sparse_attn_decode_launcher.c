/* The sparse_attn_decode launcher: bad arguments are refused with a message
 * naming the argument and value; both paged KV layouts and all scale modes
 * pass; variants fit or not for the right reasons; plans depend only on
 * host-known values and size grid, shared memory and workspace as the
 * kernels expect. No GPU needed: pointers are fake and never dereferenced. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/op.h"
#include "ops/sparse_attn_decode.h"
#include "ops/tensor_check.h"
#include "testutil.h"

#define FAKE(p) ((void *)(uintptr_t)(p))

enum { R = 8, QLEN = 2, HQ = 32, HKV = 2, D = 128, TOPK = 16, PAGES = 4096, BT_COLS = 256 };

/* The (pages, 2, 128, Hkv, D) layout: K and V of a page side by side. */
static void layout_pages2(st_sparse_attn_decode_args *a, st_dtype dt, uintptr_t base) {
  const int64_t shape[4] = {PAGES, HKV, 128, D};
  const int64_t stride[4] = {2 * 128 * HKV * D, D, HKV * D, 1};
  const int64_t eb = st_dtype_bytes(dt);
  st_tensor *t[2] = {&a->k_cache, &a->v_cache};
  for (int i = 0; i < 2; i++) {
    memset(t[i], 0, sizeof *t[i]);
    t[i]->data = FAKE(base + (uintptr_t)(i * 128 * HKV * D * eb));
    t[i]->dtype = dt;
    t[i]->ndim = 4;
    memcpy(t[i]->shape, shape, sizeof shape);
    memcpy(t[i]->stride, stride, sizeof stride);
  }
}

/* The (pages, Hkv, 128, 2*D) layout: K and V of a token side by side. */
static void layout_interleaved(st_sparse_attn_decode_args *a, st_dtype dt, uintptr_t base) {
  layout_pages2(a, dt, base);
  const int64_t stride[4] = {HKV * 128 * 2 * D, 128 * 2 * D, 2 * D, 1};
  memcpy(a->k_cache.stride, stride, sizeof stride);
  memcpy(a->v_cache.stride, stride, sizeof stride);
  a->v_cache.data = FAKE(base + (uintptr_t)(D * st_dtype_bytes(dt)));
}

static st_sparse_attn_decode_args valid_args(void) {
  st_sparse_attn_decode_args a;
  memset(&a, 0, sizeof a);
  st_tensor_contiguous(&a.q, FAKE(0x10000), ST_DTYPE_BF16, 3, (int64_t[]){R * QLEN, HQ, D});
  layout_pages2(&a, ST_DTYPE_BF16, 0x100000000ull);
  st_tensor_contiguous(&a.topk_idx, FAKE(0x50000), ST_DTYPE_INT32, 3, (int64_t[]){HKV, R * QLEN, TOPK});
  st_tensor_contiguous(&a.block_table, FAKE(0x30000), ST_DTYPE_INT32, 2, (int64_t[]){R, BT_COLS});
  st_tensor_contiguous(&a.seq_lens, FAKE(0x40000), ST_DTYPE_INT32, 1, (int64_t[]){R});
  st_tensor_contiguous(&a.o, FAKE(0x60000), ST_DTYPE_BF16, 3, (int64_t[]){R * QLEN, HQ, D});
  a.sm_scale = 0.088f;
  a.qlen = QLEN;
  a.max_context = 32768;
  return a;
}

/* fp8 cache with per-(page, head, slot) scales kept slot-major
 * ([pages][128][Hkv]). */
static st_sparse_attn_decode_args valid_fp8_tensor_args(void) {
  st_sparse_attn_decode_args a = valid_args();
  layout_interleaved(&a, ST_DTYPE_FP8_E4M3, 0x100000000ull);
  a.scale_mode = ST_KV_SCALE_TENSOR;
  st_tensor *s[2] = {&a.k_scales, &a.v_scales};
  for (int i = 0; i < 2; i++) {
    st_tensor_contiguous(s[i], FAKE(0x200000000ull + (uintptr_t)i * 0x10000000ull), ST_DTYPE_FP32, 3,
                         (int64_t[]){PAGES, HKV, 128});
    s[i]->stride[0] = 128 * HKV;
    s[i]->stride[1] = 1;
    s[i]->stride[2] = HKV;
  }
  return a;
}

static void expect_refused(const st_sparse_attn_decode_args *a, st_status want, const char *fragment) {
  st_err err = {{0}};
  st_status s = st_sparse_attn_decode_check_args(a, &err);
  if (s != want || !strstr(err.msg, fragment))
    fail_msg("expected status %d with '%s', got status %d: '%s'", (int)want, fragment, (int)s, err.msg);
}

static void test_valid_arguments_pass_in_both_layouts_and_all_scale_modes(void **state) {
  (void)state;
  st_err err = {{0}};
  st_sparse_attn_decode_args a = valid_args();
  assert_int_equal(st_sparse_attn_decode_check_args(&a, &err), ST_OK);
  layout_interleaved(&a, ST_DTYPE_BF16, 0x100000000ull);
  assert_int_equal(st_sparse_attn_decode_check_args(&a, &err), ST_OK);
  layout_pages2(&a, ST_DTYPE_FP8_E4M3, 0x100000000ull);
  assert_int_equal(st_sparse_attn_decode_check_args(&a, &err), ST_OK); /* fp8, no scale */
  a.scale_mode = ST_KV_SCALE_SCALAR;
  a.k_scale = 0.5f;
  a.v_scale = 2.0f;
  assert_int_equal(st_sparse_attn_decode_check_args(&a, &err), ST_OK);
  a = valid_fp8_tensor_args();
  assert_int_equal(st_sparse_attn_decode_check_args(&a, &err), ST_OK);
  /* lse wanted. */
  a = valid_args();
  st_tensor_contiguous(&a.lse, FAKE(0x70000), ST_DTYPE_FP32, 2, (int64_t[]){R * QLEN, HQ});
  assert_int_equal(st_sparse_attn_decode_check_args(&a, &err), ST_OK);
}

static void test_bad_arguments_are_refused_by_name(void **state) {
  (void)state;
  const st_status I = ST_ERR_INVALID_ARG, U = ST_ERR_UNSUPPORTED;
  st_sparse_attn_decode_args a;
  a = valid_args();
  a.qlen = 5;
  expect_refused(&a, I, "qlen=5 is outside 1..4");
  a = valid_args();
  a.qlen = 0;
  expect_refused(&a, I, "qlen=0");
  a = valid_args();
  a.pdl = 2;
  expect_refused(&a, I, "pdl=2 must be 0 or 1");
  a = valid_args();
  a.sm_scale = 0;
  expect_refused(&a, I, "sm_scale=0 must be positive");
  a = valid_args();
  a.sm_scale = NAN;
  expect_refused(&a, I, "sm_scale=nan");
  a = valid_args();
  a.q.dtype = ST_DTYPE_FP8_E4M3;
  expect_refused(&a, I, "q.dtype=2");
  a = valid_args();
  a.q.shape[0] = 15;
  expect_refused(&a, I, "not a multiple of qlen=2");
  a = valid_args();
  a.q.shape[2] = 96;
  a.o.shape[2] = 96;
  expect_refused(&a, U, "head_dim=96");
  a = valid_args();
  a.q.data = FAKE(0x10008);
  expect_refused(&a, I, "q.data=0x10008 is not 16-byte aligned");
  a = valid_args();
  a.q.stride[2] = 2;
  expect_refused(&a, I, "innermost stride must be 1");
  a = valid_args();
  a.k_cache.dtype = ST_DTYPE_FP32;
  expect_refused(&a, I, "k_cache.dtype=4");
  a = valid_args();
  a.v_cache.dtype = ST_DTYPE_FP8_E4M3;
  expect_refused(&a, I, "v_cache.dtype");
  a = valid_args();
  a.k_cache.ndim = 3;
  expect_refused(&a, I, "k_cache.ndim=3");
  a = valid_args();
  a.k_cache.shape[2] = 64;
  expect_refused(&a, I, "k_cache.shape");
  a = valid_args();
  a.v_cache.shape[1] = 4;
  expect_refused(&a, I, "v_cache.shape");
  a = valid_args();
  a.v_cache.stride[2] = 129;
  expect_refused(&a, I, "v_cache.stride[2]=129");
  a = valid_args();
  a.k_cache.data = NULL;
  expect_refused(&a, I, "k_cache.data is NULL");
  a = valid_args();
  a.q.shape[1] = 33;
  a.o.shape[1] = 33;
  expect_refused(&a, I, "not a multiple of Hkv=2");
  a = valid_args();
  a.q.shape[1] = 128;
  a.o.shape[1] = 128;
  expect_refused(&a, U, "Hq/Hkv=64");
  a = valid_args();
  a.scale_mode = ST_KV_SCALE_SCALAR;
  a.k_scale = a.v_scale = 1;
  expect_refused(&a, I, "fp8 caches only");
  a = valid_args();
  a.scale_mode = (st_kv_scale_mode)7;
  expect_refused(&a, I, "scale_mode=7");
  a = valid_fp8_tensor_args();
  a.scale_mode = ST_KV_SCALE_SCALAR;
  a.k_scale = -1;
  a.v_scale = 1;
  expect_refused(&a, I, "k_scale=-1");
  a = valid_fp8_tensor_args();
  a.scale_mode = ST_KV_SCALE_SCALAR;
  a.k_scale = 1;
  a.v_scale = INFINITY;
  expect_refused(&a, I, "v_scale=inf");
  a = valid_fp8_tensor_args();
  a.k_scales.data = NULL;
  expect_refused(&a, I, "k_scales.data is NULL");
  a = valid_fp8_tensor_args();
  a.v_scales.shape[2] = 64;
  expect_refused(&a, I, "v_scales.shape");
  a = valid_fp8_tensor_args();
  a.k_scales.dtype = ST_DTYPE_BF16;
  expect_refused(&a, I, "k_scales must be a 3-d fp32");
  a = valid_fp8_tensor_args();
  a.v_scales.stride[0] = -4;
  expect_refused(&a, I, "v_scales.stride[0]=-4");
  a = valid_args();
  a.topk_idx.shape[2] = 65;
  expect_refused(&a, I, "topk=65");
  a = valid_args();
  a.topk_idx.shape[0] = 1;
  expect_refused(&a, I, "topk_idx.shape");
  a = valid_args();
  a.topk_idx.dtype = ST_DTYPE_FP32;
  expect_refused(&a, I, "topk_idx.dtype");
  a = valid_args();
  a.block_table.shape[0] = 7;
  expect_refused(&a, I, "block_table.shape[0]=7");
  a = valid_args();
  a.seq_lens.shape[0] = 9;
  expect_refused(&a, I, "seq_lens.shape[0]=9");
  a = valid_args();
  a.max_context = BT_COLS * 128 + 1;
  expect_refused(&a, I, "max_context=32769 is outside");
  a = valid_args();
  a.o.shape[1] = 16;
  expect_refused(&a, I, "o.shape");
  a = valid_args();
  a.o.dtype = ST_DTYPE_FP32;
  expect_refused(&a, I, "o.dtype");
  a = valid_args();
  st_tensor_contiguous(&a.lse, FAKE(0x70000), ST_DTYPE_FP32, 2, (int64_t[]){R * QLEN, 16});
  expect_refused(&a, I, "lse.shape");
  a = valid_args();
  st_tensor_contiguous(&a.lse, FAKE(0x70002), ST_DTYPE_FP32, 2, (int64_t[]){R * QLEN, HQ});
  expect_refused(&a, I, "lse.data=0x70002 is not 4-byte aligned");
  expect_refused(NULL, I, "args is NULL");
}

static void set_kernel(st_params *k, const char *dtype, int group, int warps_n, int stages, const char *algo,
                       int cluster) {
  st_err err = {{0}};
  st_params_set(k, "dtype", dtype, &err);
  st_params_set(k, "algo", algo, &err);
  st_params_set_int(k, "head_dim", D, &err);
  st_params_set_int(k, "group", group, &err);
  st_params_set_int(k, "warps_n", warps_n, &err);
  st_params_set_int(k, "stages", stages, &err);
  st_params_set_int(k, "cluster", cluster, &err);
}

static st_sparse_attn_decode_config config_in(const char *dtype, int group, int warps_n, int stages, const char *algo,
                                              int splits, int cluster) {
  st_params k = {0}, l = {0};
  st_err err = {{0}};
  set_kernel(&k, dtype, group, warps_n, stages, algo, cluster);
  st_params_set_int(&l, "splits", splits, &err);
  st_sparse_attn_decode_config c;
  if (st_sparse_attn_decode_config_from_params(&k, &l, &c, &err) != ST_OK) fail_msg("%s", err.msg);
  return c;
}

static st_sparse_attn_decode_config config(const char *dtype, int group, int warps_n, int stages, const char *algo,
                                           int splits) {
  return config_in(dtype, group, warps_n, stages, algo, splits, 1);
}

static void expect_cluster_refused(const char *dtype, int group, int warps_n, int stages, const char *algo, int cluster,
                                   const char *fragment) {
  st_params k = {0}, l = {0};
  st_err err = {{0}};
  set_kernel(&k, dtype, group, warps_n, stages, algo, cluster);
  st_params_set_int(&l, "splits", 0, &err);
  st_sparse_attn_decode_config c;
  assert_int_equal(st_sparse_attn_decode_config_from_params(&k, &l, &c, &err), ST_ERR_INVALID_ARG);
  if (!strstr(err.msg, fragment)) fail_msg("expected '%s' in '%s'", fragment, err.msg);
}

static void test_clusters_only_where_the_kernel_can_have_one(void **state) {
  (void)state;
  const st_sparse_attn_decode_config c = config_in("bf16", 16, 4, 1, "single", 0, 16);
  assert_int_equal(c.cluster, 16);
  expect_cluster_refused("bf16", 16, 8, 1, "single", 16, "cluster=16 needs 1, 8 with algo single");
  expect_cluster_refused("bf16", 16, 8, 1, "single", 16, "or 16 with algo single, <= 128 threads (has 256)");
  expect_cluster_refused("bf16", 16, 4, 1, "split", 16, "with algo single");
  expect_cluster_refused("bf16", 16, 4, 2, "single", 16, "two CTAs per SM");
  /* 8: any CTA size, single kernels of at most 2 stages. */
  const st_sparse_attn_decode_config c8 = config_in("bf16", 16, 8, 2, "single", 0, 8);
  assert_int_equal(c8.cluster, 8);
  expect_cluster_refused("bf16", 16, 8, 3, "single", 8, "<= 2 stages (has 3)");
  expect_cluster_refused("bf16", 16, 8, 1, "split", 8, "cluster=8 needs 1, 8 with algo single");
  expect_cluster_refused("bf16", 16, 4, 1, "single", 4, "4 with algo single and pv_dims 1 (has 0)");
  expect_cluster_refused("bf16", 16, 4, 1, "single", 2, "cluster=2 needs 1, 8");
  expect_cluster_refused("bf16", 16, 4, 1, "single", 17, "cluster=17 is outside 1..16");
  /* pv_dims: 16 of up to 256 threads, counted at the raw launch's shared
   * memory (2 stages: the widening path's would not fit two). */
  st_err err = {{0}};
  st_sparse_attn_decode_config p16 = config("fp8", 16, 8, 2, "single", 0);
  p16.cluster = 16;
  p16.k_regs = 2;
  p16.tma = 1;
  assert_int_equal(st_sparse_attn_decode_check_cluster(&p16, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "<= 128 threads (has 256)"));
  p16.pv_dims = 1;
  assert_int_equal(st_sparse_attn_decode_check_cluster(&p16, &err), ST_OK);
  p16.warps_n = 4;
  assert_int_equal(st_sparse_attn_decode_check_cluster(&p16, &err), ST_OK);
  p16.pv_dims = 0;
  assert_int_equal(st_sparse_attn_decode_check_cluster(&p16, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "two CTAs per SM"));
  /* 4: single pv_dims kernels (two stages included), for their merge. */
  st_sparse_attn_decode_config p4 = p16;
  p4.cluster = 4;
  p4.pv_dims = 1;
  assert_int_equal(st_sparse_attn_decode_check_cluster(&p4, &err), ST_OK);
  p4.algo = ST_SPARSE_ATTN_DECODE_SPLIT;
  assert_int_equal(st_sparse_attn_decode_check_cluster(&p4, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "4 with algo single and pv_dims 1"));
}

/* Calls of one dispatch key whose scale mode, or whether the copy engine
 * can address K and V, differ are memoized apart (their fits differ). */
static void test_memo_tag_tells_apart_what_the_fit_reads(void **state) {
  (void)state;
  uint32_t (*tag)(const void *) = st_sparse_attn_decode_op.memo_tag;
  assert_non_null(tag);
  st_sparse_attn_decode_args a = valid_args();
  layout_pages2(&a, ST_DTYPE_FP8_E4M3, 0x100000000ull);
  a.scale_mode = ST_KV_SCALE_SCALAR;
  a.k_scale = a.v_scale = 1.0f;
  const uint32_t scalar = tag(&a);
  layout_interleaved(&a, ST_DTYPE_FP8_E4M3, 0x100000000ull);
  assert_int_equal(tag(&a), scalar); /* both layouts addressable */
  a.v_cache.stride[1] = 0;           /* heads sharing a page's rows */
  assert_int_not_equal(tag(&a), scalar);
  const st_sparse_attn_decode_args t = valid_fp8_tensor_args();
  assert_int_not_equal(tag(&t), scalar);
  a = valid_args(); /* bf16, no scales */
  assert_int_not_equal(tag(&a), scalar);
}

/* Per-token scale views of one scale each (every stride 0, as vLLM passes
 * its scalar scale tensors): variants of scale_ptr 1 run them as the
 * scalar mode, the scales read from device memory (pv_dims and tma allowed,
 * the host folding neither scale in); variants recorded before scale_ptr
 * run them as per-token scales. */
static void test_one_scale_each_runs_as_the_scalar_mode(void **state) {
  (void)state;
  st_sparse_attn_decode_args a = valid_fp8_tensor_args();
  layout_pages2(&a, ST_DTYPE_FP8_E4M3, 0x100000000ull);
  for (int i = 0; i < 3; i++) a.k_scales.stride[i] = a.v_scales.stride[i] = 0;
  st_params k = {0}, l = {0};
  st_err err = {{0}};
  set_kernel(&k, "fp8", HQ / HKV, 4, 1, "single", 8);
  st_params_set_int(&k, "k_regs", 2, &err);
  st_params_set_int(&k, "tma", 1, &err);
  st_params_set_int(&k, "pv_dims", 1, &err);
  st_params_set_int(&l, "splits", 0, &err);
  st_sparse_attn_decode_config c;
  assert_int_equal(st_sparse_attn_decode_config_from_params(&k, &l, &c, &err), ST_OK);
  assert_int_equal(c.scale_ptr, 0); /* recorded before it */
  assert_int_equal(st_sparse_attn_decode_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  st_params_set_int(&k, "scale_ptr", 1, &err);
  assert_int_equal(st_sparse_attn_decode_config_from_params(&k, &l, &c, &err), ST_OK);
  assert_int_equal(c.scale_ptr, 1);
  assert_int_equal(st_sparse_attn_decode_check_fit(&c, &a, &err), ST_OK);
  st_sparse_attn_decode_plan p;
  assert_int_equal(st_sparse_attn_decode_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.params.scale_mode, ST_KV_SCALE_SCALAR);
  assert_ptr_equal(p.params.k_scale_ptr, a.k_scales.data);
  assert_ptr_equal(p.params.v_scale_ptr, a.v_scales.data);
  assert_null(p.params.k_scales);
  assert_true(fabsf(p.params.score_scale_log2 - a.sm_scale * 1.4426950f) < 1e-6f); /* no K scale folded in */
  assert_true(p.params.v_scale == 1.0f);
  assert_int_equal(p.kv_maps, 1);
  /* One view with a stride: per-token scales, which pv_dims refuses. */
  a.v_scales.stride[2] = 1;
  assert_int_equal(st_sparse_attn_decode_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "per-token"));
}

static void test_variant_fit_names_the_mismatch(void **state) {
  (void)state;
  st_sparse_attn_decode_args a = valid_args();
  st_err err = {{0}};
  st_sparse_attn_decode_config c = config("bf16", 16, 4, 2, "single", 4);
  assert_int_equal(st_sparse_attn_decode_check_fit(&c, &a, &err), ST_OK);
  c = config("fp8", 16, 4, 2, "single", 4);
  assert_int_equal(st_sparse_attn_decode_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "fp8 cache, call has bf16"));
  c = config("bf16", 8, 4, 2, "single", 4);
  assert_int_equal(st_sparse_attn_decode_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "8 q heads per kv head, call has 16"));
  a.q.shape[2] = a.o.shape[2] = 64;
  c = config("bf16", 16, 4, 2, "single", 4);
  assert_int_equal(st_sparse_attn_decode_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "head_dim 128, call has 64"));
  /* tma: views the copy engine cannot address fit no tma variant (the
   * call goes to another), and name the stride. */
  a = valid_args();
  c = config("bf16", 16, 4, 2, "single", 4);
  c.tma = 1;
  assert_int_equal(st_sparse_attn_decode_check_fit(&c, &a, &err), ST_OK);
  a.k_cache.stride[1] = 0; /* one kv head's rows shared by both: valid, but no tensor map */
  a.v_cache.stride[1] = 0;
  assert_int_equal(st_sparse_attn_decode_check_args(&a, &err), ST_OK);
  assert_int_equal(st_sparse_attn_decode_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "tma variant: k_cache.stride[1]=0 elements"));
  c.tma = 0;
  assert_int_equal(st_sparse_attn_decode_check_fit(&c, &a, &err), ST_OK);
  /* pv_dims: per-token scales go to another variant. */
  a = valid_args();
  c = config("fp8", 16, 4, 2, "single", 4);
  c.k_regs = 2;
  c.tma = 1;
  c.pv_dims = 1;
  a.k_cache.dtype = a.v_cache.dtype = ST_DTYPE_FP8_E4M3;
  assert_int_equal(st_sparse_attn_decode_check_fit(&c, &a, &err), ST_OK);
  a.scale_mode = ST_KV_SCALE_TENSOR;
  assert_int_equal(st_sparse_attn_decode_check_fit(&c, &a, &err), ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "pv_dims variant takes no per-token scales: another variant runs them"));
  c.pv_dims = 0;
  assert_int_equal(st_sparse_attn_decode_check_fit(&c, &a, &err), ST_OK);
}

/* st_sparse_attn_decode_config_from_params refuses k and l, naming
 * `fragment`. */
static void expect_params_refused(const st_params *k, const st_params *l, const char *fragment) {
  st_err err = {{0}};
  st_sparse_attn_decode_config c;
  assert_int_equal(st_sparse_attn_decode_config_from_params(k, l, &c, &err), ST_ERR_INVALID_ARG);
  if (!strstr(err.msg, fragment)) fail_msg("expected '%s' in '%s'", fragment, err.msg);
}

static void test_bad_variant_parameters_are_refused(void **state) {
  (void)state;
  st_params k = {0}, l = {0};
  st_err err = {{0}};
  st_sparse_attn_decode_config c;
  expect_params_refused(&k, &l, "dtype");
  st_params_set(&k, "dtype", "fp8", &err);
  st_params_set(&k, "algo", "single", &err);
  st_params_set_int(&k, "head_dim", 128, &err);
  st_params_set_int(&k, "group", 16, &err);
  st_params_set_int(&k, "warps_n", 3, &err);
  st_params_set_int(&k, "stages", 1, &err);
  st_params_set_int(&k, "cluster", 1, &err);
  st_params_set_int(&l, "splits", 0, &err);
  expect_params_refused(&k, &l, "warps_n=3");
  st_params_set_int(&k, "warps_n", 4, &err);
  st_params_set_int(&l, "splits", 65, &err);
  expect_params_refused(&k, &l, "splits");
  /* k_regs: absent (variants recorded before it) is 0; 0..2; fp8 only. */
  st_params_set_int(&l, "splits", 0, &err);
  assert_int_equal(st_sparse_attn_decode_config_from_params(&k, &l, &c, &err), ST_OK);
  assert_int_equal(c.k_regs, 0);
  for (int kr = 1; kr <= 2; kr++) {
    st_params_set_int(&k, "k_regs", kr, &err);
    assert_int_equal(st_sparse_attn_decode_config_from_params(&k, &l, &c, &err), ST_OK);
    assert_int_equal(c.k_regs, kr);
  }
  st_params_set_int(&k, "k_regs", 3, &err);
  expect_params_refused(&k, &l, "k_regs");
  st_params_set_int(&k, "k_regs", 2, &err);
  st_params_set(&k, "dtype", "bf16", &err);
  expect_params_refused(&k, &l, "k_regs=2 needs dtype fp8");
  /* tma: absent is 0; 1 only with head_dim 128 and, for fp8, k_regs 2. */
  st_params_set(&k, "dtype", "fp8", &err);
  assert_int_equal(st_sparse_attn_decode_config_from_params(&k, &l, &c, &err), ST_OK);
  assert_int_equal(c.tma, 0);
  st_params_set_int(&k, "tma", 1, &err);
  assert_int_equal(st_sparse_attn_decode_config_from_params(&k, &l, &c, &err), ST_OK);
  assert_int_equal(c.tma, 1);
  st_params_set_int(&k, "k_regs", 1, &err);
  expect_params_refused(&k, &l, "tma=1 needs head_dim 128 and with fp8 k_regs 2");
  st_params_set_int(&k, "k_regs", 2, &err);
  st_params_set_int(&k, "head_dim", 64, &err);
  expect_params_refused(&k, &l, "head_dim 64");
  st_params_set_int(&k, "head_dim", 128, &err);
  st_params_set_int(&k, "k_regs", 0, &err);
  st_params_set(&k, "dtype", "bf16", &err); /* bf16 rows: copied whole */
  assert_int_equal(st_sparse_attn_decode_config_from_params(&k, &l, &c, &err), ST_OK);
  assert_int_equal(c.tma, 1);
  st_params_set_int(&k, "tma", 2, &err);
  expect_params_refused(&k, &l, "tma");
  /* pv_dims: absent is 0; 1 only with tma, group <= 16, 1 or 2 stages and
   * 4 or 8 warps (bf16 or fp8). */
  st_params_set_int(&k, "tma", 1, &err);
  st_params_set(&k, "dtype", "fp8", &err);
  st_params_set_int(&k, "k_regs", 2, &err);
  st_params_set_int(&k, "stages", 2, &err);
  assert_int_equal(st_sparse_attn_decode_config_from_params(&k, &l, &c, &err), ST_OK);
  assert_int_equal(c.pv_dims, 0);
  st_params_set_int(&k, "pv_dims", 1, &err);
  for (int w = 4; w <= 8; w += 4) {
    st_params_set_int(&k, "warps_n", w, &err);
    assert_int_equal(st_sparse_attn_decode_config_from_params(&k, &l, &c, &err), ST_OK);
    assert_int_equal(c.pv_dims, 1);
  }
  st_params_set_int(&k, "warps_n", 2, &err);
  expect_params_refused(&k, &l, "pv_dims=1 needs tma 1, group <= 16, 1 or 2 stages and 4 or 8 warps");
  expect_params_refused(&k, &l, "2 warps");
  st_params_set_int(&k, "warps_n", 4, &err);
  st_params_set_int(&k, "stages", 3, &err);
  expect_params_refused(&k, &l, "3 stages");
  st_params_set_int(&k, "stages", 1, &err);
  assert_int_equal(st_sparse_attn_decode_config_from_params(&k, &l, &c, &err), ST_OK);
  st_params_set_int(&k, "group", 32, &err);
  expect_params_refused(&k, &l, "group 32");
  st_params_set_int(&k, "group", 16, &err);
  st_params_set_int(&k, "tma", 0, &err);
  expect_params_refused(&k, &l, "tma 0");
  st_params_set(&k, "dtype", "bf16", &err); /* bf16 rows: copied whole */
  st_params_set_int(&k, "k_regs", 0, &err);
  st_params_set_int(&k, "tma", 1, &err);
  assert_int_equal(st_sparse_attn_decode_config_from_params(&k, &l, &c, &err), ST_OK);
  assert_int_equal(c.pv_dims, 1);
  /* ring_extra: absent is 0; 1 only with pv_dims and 1 stage. */
  st_params_set_int(&k, "ring_extra", 1, &err);
  assert_int_equal(st_sparse_attn_decode_config_from_params(&k, &l, &c, &err), ST_OK);
  assert_int_equal(c.ring_extra, 1);
  st_params_set_int(&k, "stages", 2, &err);
  expect_params_refused(&k, &l, "ring_extra=1 needs pv_dims 1 and 1 stage, has pv_dims 1, 2 stages");
  st_params_set_int(&k, "stages", 1, &err);
  st_params_set_int(&k, "pv_dims", 0, &err);
  expect_params_refused(&k, &l, "has pv_dims 0");
  st_params_set_int(&k, "ring_extra", 2, &err);
  expect_params_refused(&k, &l, "ring_extra");
  st_params_set_int(&k, "ring_extra", 0, &err);
  st_params_set_int(&k, "pv_dims", 2, &err);
  expect_params_refused(&k, &l, "pv_dims");
}

/* The kernel's layout (templates/sparse_attn_decode.cu): q tile, then the
 * larger of the KV stages and the warps' combine area, then the block list. */
static void test_shared_memory_follows_the_kernel_layout(void **state) {
  (void)state;
  st_sparse_attn_decode_config c = config("bf16", 16, 4, 2, "single", 0);
  assert_int_equal(st_sparse_attn_decode_smem_bytes(&c), 16 * D * 2 + 2 * 2 * 128 * D * 2 + 64 * 8);
  c = config("fp8", 16, 4, 2, "single", 0);
  assert_int_equal(st_sparse_attn_decode_smem_bytes(&c), /* the widened K and V tiles, then K's scales */
                   16 * D * 2 + 2 * (2 * 128 * D + 2 * 128 * 4) + 2 * 128 * D * 2 + 128 * 4 + 64 * 8);
  /* k_regs 1 and 2: the V tile only is widened (2: in tensor mode). */
  for (c.k_regs = 1; c.k_regs <= 2; c.k_regs++)
    assert_int_equal(st_sparse_attn_decode_smem_bytes(&c),
                     16 * D * 2 + 2 * (2 * 128 * D + 2 * 128 * 4) + 128 * D * 2 + 64 * 8);
  /* A launch needs that, except k_regs 2 without per-token scales (K and V
   * read raw): no wide tile. */
  const unsigned no_tile = 16 * D * 2 + 2 * (2 * 128 * D + 2 * 128 * 4) + 64 * 8;
  c.k_regs = 2;
  assert_int_equal(st_sparse_attn_decode_launch_smem_bytes(&c, ST_KV_SCALE_NONE), no_tile);
  assert_int_equal(st_sparse_attn_decode_launch_smem_bytes(&c, ST_KV_SCALE_SCALAR), no_tile);
  assert_int_equal(st_sparse_attn_decode_launch_smem_bytes(&c, ST_KV_SCALE_TENSOR),
                   st_sparse_attn_decode_smem_bytes(&c));
  /* tma: the stages are the ring's raw halves (no scales), and 1024 bytes
   * start them on the swizzle's boundary; in tensor mode it runs the
   * widening path, 1024 bytes more. */
  const unsigned ring_base = 16 * D * 2 + 64 * 8 + 1024;
  c.tma = 1;
  assert_int_equal(st_sparse_attn_decode_launch_smem_bytes(&c, ST_KV_SCALE_NONE), ring_base + 4 * 128 * D);
  assert_int_equal(st_sparse_attn_decode_launch_smem_bytes(&c, ST_KV_SCALE_SCALAR), ring_base + 4 * 128 * D);
  assert_int_equal(st_sparse_attn_decode_launch_smem_bytes(&c, ST_KV_SCALE_TENSOR),
                   st_sparse_attn_decode_smem_bytes(&c));
  /* pv_dims: after the ring P twice (16 x 128 f16) and the warps' row
   * maxima; its combine area (one O) fits in the ring. */
  c.pv_dims = 1;
  const unsigned pv_dims = 2 * 16 * 128 * 2 + 4 * 16 * 4;
  assert_int_equal(st_sparse_attn_decode_launch_smem_bytes(&c, ST_KV_SCALE_NONE), ring_base + 4 * 128 * D + pv_dims);
  c.pv_dims = 0;
  c.tma = 0;
  st_sparse_attn_decode_config b = config("bf16", 16, 4, 2, "single", 0);
  const unsigned bf16_smem = st_sparse_attn_decode_smem_bytes(&b);
  b.tma = 1; /* the ring is the stages' tiles */
  assert_int_equal(st_sparse_attn_decode_launch_smem_bytes(&b, ST_KV_SCALE_NONE), bf16_smem + 1024);
  b.pv_dims = 1;
  assert_int_equal(st_sparse_attn_decode_launch_smem_bytes(&b, ST_KV_SCALE_NONE), bf16_smem + 1024 + pv_dims);
  /* ring_extra: a third half slot (one stage): fp8 16 KB more than the
   * ring, bf16 32 KB more than the stage's tiles. */
  c.tma = c.pv_dims = 1;
  c.stages = 1;
  c.ring_extra = 1;
  assert_int_equal(st_sparse_attn_decode_launch_smem_bytes(&c, ST_KV_SCALE_NONE), ring_base + 3 * 128 * D + pv_dims);
  c.tma = c.pv_dims = c.ring_extra = 0;
  c.stages = 2;
  b.stages = 1;
  const unsigned bf16_one_stage = st_sparse_attn_decode_smem_bytes(&b);
  b.ring_extra = 1;
  assert_int_equal(st_sparse_attn_decode_smem_bytes(&b), bf16_one_stage + 128 * D * 2);
  b.pv_dims = b.ring_extra = 0;
  b.stages = 2;
  c.k_regs = 1;
  assert_int_equal(st_sparse_attn_decode_launch_smem_bytes(&c, ST_KV_SCALE_NONE), st_sparse_attn_decode_smem_bytes(&c));
  /* 16 warps of one stage: the combine area is the larger. */
  c = config("bf16", 32, 8, 1, "single", 0);
  assert_int_equal(st_sparse_attn_decode_smem_bytes(&c), 32 * D * 2 + 16 * 16 * (D + 2) * 4 + 64 * 8);
}

static void test_plans_size_grid_and_workspace(void **state) {
  (void)state;
  st_sparse_attn_decode_args a = valid_args();
  st_err err = {{0}};
  st_sparse_attn_decode_plan p;
  const size_t items = (size_t)R * QLEN * HKV;
  /* single, 4 splits: one launch; x holds the (row, split) pairs, no
   * cluster (two stages of 64 KiB leave one CTA an SM): counters and
   * partial states. */
  st_sparse_attn_decode_config c = config("bf16", 16, 4, 2, "single", 4);
  assert_int_equal(st_sparse_attn_decode_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.cluster, 1);
  assert_int_equal(p.grid[0], R * QLEN * 4);
  assert_int_equal(p.grid[1], HKV);
  assert_int_equal(p.grid[2], 1);
  assert_int_equal(p.block, 128);
  assert_int_equal(p.merge_block, 0);
  assert_int_equal(p.params.blocks_per_split, 4);
  assert_true(p.part_o_offset >= items * 4);
  assert_true(p.part_ml_offset >= p.part_o_offset + items * 4 * 16 * D * 4);
  assert_true(p.workspace_bytes >= p.part_ml_offset + items * 4 * 16 * 2 * 4);
  assert_int_equal(p.smem_bytes, st_sparse_attn_decode_smem_bytes(&c));
  /* fp8 k_regs 2 launches with the shared memory its scale mode needs. */
  st_sparse_attn_decode_config kvr = config("fp8", 16, 4, 2, "single", 4);
  kvr.k_regs = 2;
  st_sparse_attn_decode_args fa = valid_fp8_tensor_args();
  assert_int_equal(st_sparse_attn_decode_plan_make(&kvr, &fa, 132, &p, &err), ST_OK);
  assert_int_equal(p.smem_bytes, st_sparse_attn_decode_launch_smem_bytes(&kvr, ST_KV_SCALE_TENSOR));
  layout_pages2(&fa, ST_DTYPE_FP8_E4M3, 0x100000000ull);
  fa.scale_mode = ST_KV_SCALE_NONE;
  memset(&fa.k_scales, 0, sizeof fa.k_scales);
  memset(&fa.v_scales, 0, sizeof fa.v_scales);
  assert_int_equal(st_sparse_attn_decode_plan_make(&kvr, &fa, 132, &p, &err), ST_OK);
  assert_int_equal(p.smem_bytes, st_sparse_attn_decode_launch_smem_bytes(&kvr, ST_KV_SCALE_NONE));
  assert_true(p.smem_bytes < st_sparse_attn_decode_smem_bytes(&kvr));
  /* One split writes o directly: no workspace; 16 rows fill one cluster
   * (16: one stage, 69 KiB and 128 threads, two CTAs an SM; the workspace
   * stays reserved for splits that do not divide it). */
  c = config_in("bf16", 16, 4, 1, "single", 1, 16);
  assert_int_equal(st_sparse_attn_decode_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.workspace_bytes, 0);
  assert_int_equal(p.cluster, 16);
  assert_int_equal(p.grid[0], 16);
  /* 3 splits of 6, 6, 4 entries: 48 pairs in 3 clusters of 16. */
  c = config_in("bf16", 16, 4, 1, "single", 3, 16);
  assert_int_equal(st_sparse_attn_decode_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.splits, 3);
  assert_int_equal(p.grid[0], 48);
  /* 256 threads: no cluster; 16 rows x 5 splits of 16 entries, which make
   * 4 of 4 = 64 pairs. */
  c = config("bf16", 16, 8, 1, "single", 5);
  assert_int_equal(st_sparse_attn_decode_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.cluster, 1);
  assert_int_equal(p.grid[0], 64);
  /* A grid padded to whole clusters: 1 row of 16 splits into 16, 2 rows of
   * 3 splits into 16. */
  a.q.shape[0] = a.o.shape[0] = QLEN;
  a.topk_idx.shape[1] = QLEN;
  a.seq_lens.shape[0] = a.block_table.shape[0] = 1;
  c = config_in("bf16", 16, 4, 1, "single", 3, 16);
  assert_int_equal(st_sparse_attn_decode_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.grid[0], 16);
  a = valid_args();
  /* split: a merge launch over the items; 5 splits of 16 entries make 4 of 4.
   */
  c = config("bf16", 16, 4, 1, "split", 5);
  assert_int_equal(st_sparse_attn_decode_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.splits, 4);
  assert_int_equal(p.cluster, 1); /* split launches no clusters */
  assert_int_equal(p.grid[0], R * QLEN * 4);
  assert_int_equal(p.merge_grid[0], R * QLEN);
  assert_int_equal(p.merge_grid[1], HKV);
  assert_int_equal(p.merge_block, 128);
  /* pdl: only whether the main kernel's launch is programmatic. */
  assert_int_equal(p.pdl, 0);
  a.pdl = 1;
  st_sparse_attn_decode_plan pp;
  assert_int_equal(st_sparse_attn_decode_plan_make(&c, &a, 132, &pp, &err), ST_OK);
  assert_int_equal(pp.pdl, 1);
  pp.pdl = 0;
  assert_memory_equal(&p, &pp, sizeof p);
  a.pdl = 0;
  /* auto over 32 items of 16 blocks: at least 3.5 blocks a split -> 4
   * (three CTAs an SM would allow 8 of 132 SMs); bf16: one split where
   * 32 items are 40% of the SMs (80), four again just below that (81). */
  c = config("bf16", 16, 4, 2, "single", 0);
  assert_int_equal(st_sparse_attn_decode_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_int_equal(p.splits, 4);
  assert_int_equal(st_sparse_attn_decode_plan_make(&c, &a, 80, &p, &err), ST_OK);
  assert_int_equal(p.splits, 1);
  assert_int_equal(st_sparse_attn_decode_plan_make(&c, &a, 81, &p, &err), ST_OK);
  assert_int_equal(p.splits, 4);
  /* fp8 blocks are half the bytes: one split only from one item an SM. */
  {
    st_sparse_attn_decode_args f = valid_fp8_tensor_args();
    st_sparse_attn_decode_config c8 = config("fp8", 16, 4, 2, "single", 0);
    assert_int_equal(st_sparse_attn_decode_plan_make(&c8, &f, 80, &p, &err), ST_OK);
    assert_int_equal(p.splits, 4);
    assert_int_equal(st_sparse_attn_decode_plan_make(&c8, &f, 32, &p, &err), ST_OK);
    assert_int_equal(p.splits, 1);
  }
  /* A cluster of 8, 32 items of 16 blocks: the largest power of two up to
   * 8 that keeps three blocks a split once the CTAs pass one an SM (4);
   * on 300 SMs 8 x 32 CTAs are under one an SM (8). topk 13: 8 splits
   * would round to 7 (13 / 2 blocks), so 4. */
  {
    st_sparse_attn_decode_config cc = config_in("bf16", 16, 4, 1, "single", 0, 8);
    assert_int_equal(st_sparse_attn_decode_plan_make(&cc, &a, 132, &p, &err), ST_OK);
    assert_int_equal(p.splits, 4);
    assert_int_equal(st_sparse_attn_decode_plan_make(&cc, &a, 300, &p, &err), ST_OK);
    assert_int_equal(p.splits, 8);
    st_sparse_attn_decode_args t13 = a;
    t13.topk_idx.shape[2] = 13;
    assert_int_equal(st_sparse_attn_decode_plan_make(&cc, &t13, 300, &p, &err), ST_OK);
    assert_int_equal(p.splits, 4);
    /* bf16 clusters of 2-4 query tokens split up to half an item an SM:
     * 32 items are 50% of 64 SMs (4 splits), 51% of 63 (none) */
    assert_int_equal(st_sparse_attn_decode_plan_make(&cc, &a, 64, &p, &err), ST_OK);
    assert_int_equal(p.splits, 4);
    assert_int_equal(st_sparse_attn_decode_plan_make(&cc, &a, 63, &p, &err), ST_OK);
    assert_int_equal(p.splits, 1);
  }
  /* fp8 clusters split in two up to 1.25 items an SM (150 and 165 items on
   * 132 SMs), not past it (166); non-cluster fp8 kernels stop at one. */
  {
    st_sparse_attn_decode_args f = valid_fp8_tensor_args();
    st_sparse_attn_decode_config cc = config_in("fp8", 16, 4, 1, "single", 0, 8);
    const struct {
      int64_t rows;
      int splits;
    } cases[] = {{75, 2}, {82, 2}, {83, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      f.q.shape[0] = cases[i].rows; /* x 2 KV heads: the items */
      assert_int_equal(st_sparse_attn_decode_plan_make(&cc, &f, 132, &p, &err), ST_OK);
      if (p.splits != cases[i].splits)
        fail_msg("%lld items: %d splits, want %d", (long long)(2 * cases[i].rows), p.splits, cases[i].splits);
    }
    st_sparse_attn_decode_config one = config("fp8", 16, 4, 2, "single", 0);
    f.q.shape[0] = 75;
    assert_int_equal(st_sparse_attn_decode_plan_make(&one, &f, 132, &p, &err), ST_OK);
    assert_int_equal(p.splits, 1);
  }
  /* Scales fold into the argument block: scalar K scale into the score scale.
   */
  a = valid_fp8_tensor_args();
  a.scale_mode = ST_KV_SCALE_SCALAR;
  a.k_scale = 0.5f;
  a.v_scale = 3.0f;
  c = config("fp8", 16, 4, 2, "single", 1);
  assert_int_equal(st_sparse_attn_decode_plan_make(&c, &a, 132, &p, &err), ST_OK);
  assert_float_equal(p.params.score_scale_log2, 0.088 * 1.4426950408889634 * 0.5, 1e-6);
  assert_float_equal(p.params.v_scale, 3.0, 0);
  /* Same plan whatever the data: nothing depends on seq_lens. */
  a = valid_args();
  st_sparse_attn_decode_plan p2;
  c = config("bf16", 16, 4, 2, "single", 0);
  assert_int_equal(st_sparse_attn_decode_plan_make(&c, &a, 132, &p, &err), ST_OK);
  a.seq_lens.data = FAKE(0x90000);
  assert_int_equal(st_sparse_attn_decode_plan_make(&c, &a, 132, &p2, &err), ST_OK);
  assert_int_equal(p.workspace_bytes, p2.workspace_bytes);
  assert_memory_equal(p.grid, p2.grid, sizeof p.grid);
}

/* The cluster-16 default is meant for a call only where the launcher
 * splits it at least 8 ways; every other default wherever its ranges say. */
static void test_cluster_16_default_only_at_8_or_16_splits(void **state) {
  (void)state;
  st_sparse_attn_decode_args a = valid_args();
  a.q.shape[0] = QLEN; /* one request: 4 items */
  st_variant_config v;
  v.sparse_attn_decode = config_in("bf16", 16, 4, 1, "single", 0, 16);
  const st_op_desc *d = &st_sparse_attn_decode_op;
  assert_non_null(d->default_meant_for);
  const struct {
    int64_t topk;
    int meant;
  } cases[] = {{16, 1}, {32, 1}, {24, 1}, {13, 0}, {9, 0}, {4, 0}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    a.topk_idx.shape[2] = cases[i].topk;
    if (d->default_meant_for(&v, &a, 132) != cases[i].meant)
      fail_msg("topk %lld: meant %d, want %d", (long long)cases[i].topk, !cases[i].meant, cases[i].meant);
  }
  a.topk_idx.shape[2] = 13;
  v.sparse_attn_decode = config_in("bf16", 16, 4, 1, "single", 4, 16); /* its own split count */
  assert_true(d->default_meant_for(&v, &a, 132));
  v.sparse_attn_decode = config_in("bf16", 16, 4, 1, "single", 0, 8);
  assert_true(d->default_meant_for(&v, &a, 132));
}

/* The cluster of 4 (automatic split count) only where a cluster of 16
 * would split the call 2-4 ways: one item a cluster. 4 items: topk 16 and
 * 32 split 16 ways, 13 and 4 four ways, 9 and 2 two ways (the counts that
 * divide topk exactly), 1 not at all. */
static void test_cluster_4_default_only_at_2_to_4_splits(void **state) {
  (void)state;
  st_sparse_attn_decode_args a = valid_fp8_tensor_args();
  a.q.shape[0] = QLEN; /* one request: 4 items */
  st_params k = {0}, l = {0};
  st_err err = {{0}};
  set_kernel(&k, "fp8", 16, 4, 1, "single", 4);
  /* the built-in's kernel: a cluster of 4 takes P.V by dimensions, which
   * takes the copy engine, which takes fp8 rows in registers */
  st_params_set_int(&k, "pv_dims", 1, &err);
  st_params_set_int(&k, "tma", 1, &err);
  st_params_set_int(&k, "k_regs", 2, &err);
  st_params_set_int(&l, "splits", 0, &err);
  st_variant_config v;
  if (st_sparse_attn_decode_config_from_params(&k, &l, &v.sparse_attn_decode, &err) != ST_OK) fail_msg("%s", err.msg);
  const st_op_desc *d = &st_sparse_attn_decode_op;
  const struct {
    int64_t topk;
    int meant;
  } cases[] = {{16, 0}, {32, 0}, {13, 1}, {9, 1}, {4, 1}, {2, 1}, {1, 0}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    a.topk_idx.shape[2] = cases[i].topk;
    if (d->default_meant_for(&v, &a, 132) != cases[i].meant)
      fail_msg("topk %lld: meant %d, want %d", (long long)cases[i].topk, !cases[i].meant, cases[i].meant);
  }
}

static void test_dispatch_key_is_canonical(void **state) {
  (void)state;
  st_sparse_attn_decode_args a = valid_args();
  char key[256];
  st_params f = {0};
  st_err err = {{0}};
  assert_int_equal(st_sparse_attn_decode_dispatch_key(&a, key, sizeof key, &f, &err), ST_OK);
  assert_string_equal(key, "sparse_attn_decode:B=8,D=128,Hkv=2,Hq=32,dtype=bf16,qlen=2,topk=16");
  st_params parsed = {0};
  assert_int_equal(st_params_parse_key(key, &parsed, &err), ST_OK);
  char j1[512], j2[512];
  st_params_to_json(&f, j1, sizeof j1);
  st_params_to_json(&parsed, j2, sizeof j2);
  assert_string_equal(j1, j2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_valid_arguments_pass_in_both_layouts_and_all_scale_modes),
      cmocka_unit_test(test_bad_arguments_are_refused_by_name),
      cmocka_unit_test(test_memo_tag_tells_apart_what_the_fit_reads),
      cmocka_unit_test(test_one_scale_each_runs_as_the_scalar_mode),
      cmocka_unit_test(test_variant_fit_names_the_mismatch),
      cmocka_unit_test(test_bad_variant_parameters_are_refused),
      cmocka_unit_test(test_clusters_only_where_the_kernel_can_have_one),
      cmocka_unit_test(test_shared_memory_follows_the_kernel_layout),
      cmocka_unit_test(test_plans_size_grid_and_workspace),
      cmocka_unit_test(test_cluster_16_default_only_at_8_or_16_splits),
      cmocka_unit_test(test_cluster_4_default_only_at_2_to_4_splits),
      cmocka_unit_test(test_dispatch_key_is_canonical),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
