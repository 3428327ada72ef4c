/* One decode step from bench rows (tuner/decode_step.c): which indexer and
 * attention rows pair up, their added times, and the geometric mean. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode_step.h"
#include "test_db_fixture.h"
#include "testutil.h"

static st_shape shape(const char *op, const char *dtype, int B, int topk, int ctx) {
  st_shape s;
  memset(&s, 0, sizeof s);
  st_err err = {{0}};
  snprintf(s.op, sizeof s.op, "%s", op);
  assert_int_equal(st_params_set(&s.params, "dtype", dtype, &err), ST_OK);
  assert_int_equal(st_params_set_int(&s.params, "B", B, &err), ST_OK);
  assert_int_equal(st_params_set_int(&s.params, "topk", topk, &err), ST_OK);
  assert_int_equal(st_params_set_int(&s.params, "qlen", 1, &err), ST_OK);
  assert_int_equal(st_params_set_int(&s.params, "ctx", ctx, &err), ST_OK);
  assert_int_equal(st_params_set(&s.params, "lens", "full", &err), ST_OK);
  return s;
}

/* What st_decode_step_print writes for these pairs (json 0: the table,
 * echoed), in a buffer the caller frees; *size its length. */
static char *printed(const st_step_row *rows, const st_step_pair *p, int np, int json, size_t *size) {
  char *buf = NULL;
  FILE *f = open_memstream(&buf, size);
  assert_non_null(f);
  st_decode_step_print(f, rows, p, np, json);
  assert_int_equal(fclose(f), 0);
  if (!json) printf("%s", buf);
  return buf;
}

static void test_rows_pair_by_dtype_batch_topk_qlen_and_lens(void **state) {
  (void)state;
  st_shape sh[] = {
      shape("index_decode", "bf16", 1, 16, 8192),         /* 0: pairs with 3 */
      shape("index_decode", "bf16", 1, 16, 131072),       /* 1: pairs with 3 too */
      shape("index_decode", "fp8", 1, 16, 8192),          /* 2: no fp8 attention row */
      shape("sparse_attn_decode", "bf16", 1, 16, 32768),  /* 3 */
      shape("sparse_attn_decode", "bf16", 32, 4, 32768),  /* 4: topk 4, no indexer row */
      shape("index_decode", "bf16", 32, 16, 32768),       /* 5: pairs with 7, not 4 */
      shape("index_prefill", "bf16", 1, 16, 8192),        /* 6: not a decode op */
      shape("sparse_attn_decode", "bf16", 32, 16, 32768), /* 7 */
      shape("index_decode", "bf16", 8, 16, 32768),        /* 8: failed (no time) */
      shape("sparse_attn_decode", "bf16", 8, 16, 32768),  /* 9 */
  };
  const st_step_row rows[] = {{&sh[0], 7.0, 10.0}, {&sh[1], 18.0, 16.0}, {&sh[2], 7.0, 10.0},  {&sh[3], 8.0, 7.6},
                              {&sh[4], 9.0, 11.9}, {&sh[5], 94.0, 89.0}, {&sh[6], 25.0, 47.0}, {&sh[7], 29.0, 31.5},
                              {&sh[8], 0.0, 26.7}, {&sh[9], 11.0, 10.5}};
  st_step_pair p[8];
  assert_int_equal(st_decode_steps(rows, 10, p, 8), 3);
  assert_int_equal(p[0].index_row, 0);
  assert_int_equal(p[0].attn_row, 3);
  assert_true(fabs(p[0].us - 15.0) < 1e-12 && fabs(p[0].peer_us - 17.6) < 1e-12);
  assert_true(fabs(p[0].speedup - 17.6 / 15.0) < 1e-12);
  assert_int_equal(p[1].index_row, 1);
  assert_int_equal(p[1].attn_row, 3);
  assert_int_equal(p[2].index_row, 5);
  assert_int_equal(p[2].attn_row, 7);
  const double want = cbrt((17.6 / 15.0) * (23.6 / 26.0) * (120.5 / 123.0));
  int counted = 0;
  assert_true(fabs(st_decode_step_geomean(p, 3, &counted) - want) < 1e-12);
  assert_int_equal(counted, 3);
  /* A short buffer: the count is still all of them, only cap are filled. */
  st_step_pair one[1];
  assert_int_equal(st_decode_steps(rows, 10, one, 1), 3);
  assert_int_equal(one[0].index_row, 0);
  assert_int_equal(st_decode_steps(rows, 10, NULL, 0), 3);
}

static void test_geomean_of_nothing_is_zero_and_of_opposites_one(void **state) {
  (void)state;
  assert_true(st_decode_step_geomean(NULL, 0, NULL) == 0);
  const st_step_pair p[] = {{0, 1, 1.0, 2.0, 2.0}, {2, 3, 2.0, 1.0, 0.5}, {4, 5, 3.0, 0.0, 0.0}};
  int counted = -1;
  /* The third pair has no peer time: it takes no part. */
  assert_true(fabs(st_decode_step_geomean(p, 3, &counted) - 1.0) < 1e-12);
  assert_int_equal(counted, 2);
  assert_true(st_decode_step_geomean(p + 2, 1, &counted) == 0);
  assert_int_equal(counted, 0);
}

/* Peer times of another device come as 0 (tuner/cmd_bench.c): the steps
 * still pair and add up, without a speed-up; one side's peer time alone
 * gives none either. */
static void test_steps_without_peer_times_pair_without_a_speedup(void **state) {
  (void)state;
  st_shape sh[] = {shape("index_decode", "bf16", 1, 16, 8192), shape("sparse_attn_decode", "bf16", 1, 16, 32768),
                   shape("index_decode", "fp8", 1, 16, 8192), shape("sparse_attn_decode", "fp8", 1, 16, 32768)};
  const st_step_row rows[] = {{&sh[0], 6.33, 0.0}, {&sh[1], 7.33, 0.0}, {&sh[2], 6.11, 10.0}, {&sh[3], 7.31, 0.0}};
  st_step_pair p[4];
  assert_int_equal(st_decode_steps(rows, 4, p, 4), 2);
  assert_true(fabs(p[0].us - 13.66) < 1e-12 && p[0].peer_us == 0 && p[0].speedup == 0);
  assert_true(fabs(p[1].us - 13.42) < 1e-12 && p[1].peer_us == 0 && p[1].speedup == 0);
  size_t size = 0;
  char *buf = printed(rows, p, 2, 0, &size);
  assert_non_null(strstr(buf, "  bf16 B=1    ctx=8192        13.66 us (6.33 + 7.33)  (no peer time on this device)\n"));
  assert_non_null(strstr(buf, "no speed-up: the peer was not timed on this device"));
  assert_null(strstr(buf, "geometric mean"));
  free(buf);
}

static void test_a_shape_without_the_fields_never_pairs(void **state) {
  (void)state;
  st_shape a, b = shape("sparse_attn_decode", "bf16", 1, 16, 32768);
  memset(&a, 0, sizeof a);
  snprintf(a.op, sizeof a.op, "index_decode"); /* no parameters at all */
  const st_step_row rows[] = {{&a, 7.0, 10.0}, {&b, 8.0, 7.6}};
  assert_int_equal(st_decode_steps(rows, 2, NULL, 0), 0);
}

static void test_the_table_and_the_json_line(void **state) {
  (void)state;
  st_shape sh[] = {shape("index_decode", "bf16", 1, 16, 8192), shape("sparse_attn_decode", "bf16", 1, 16, 32768),
                   shape("index_decode", "fp8", 128, 16, 131072), shape("sparse_attn_decode", "fp8", 128, 16, 32768)};
  snprintf(sh[0].key, sizeof sh[0].key, "index_decode:B=1,dtype=bf16");
  snprintf(sh[1].key, sizeof sh[1].key, "sparse_attn_decode:B=1,dtype=bf16");
  snprintf(sh[2].key, sizeof sh[2].key, "index_decode:B=128,dtype=fp8");
  snprintf(sh[3].key, sizeof sh[3].key, "sparse_attn_decode:B=128,dtype=fp8");
  const st_step_row rows[] = {
      {&sh[0], 7.37, 10.6}, {&sh[1], 8.14, 7.6}, {&sh[2], 705.39, 718.4}, {&sh[3], 58.56, 79.7}};
  st_step_pair p[4];
  assert_int_equal(st_decode_steps(rows, 4, p, 4), 2);
  size_t size = 0;
  char *buf = printed(rows, p, 2, 0, &size);
  assert_non_null(strstr(buf, "  bf16 B=1    ctx=8192        15.51 us (7.37 + 8.14)  peer     18.2  1.17x\n"));
  assert_non_null(strstr(buf, "  fp8  B=128  ctx=131072     763.95 us (705.39 + 58.56)  peer    798.1  1.04x\n"));
  assert_non_null(strstr(buf, "geometric mean over 2 rows: 1.11x the peer"));
  free(buf);
  buf = printed(rows, p, 2, 1, &size);
  assert_true(fx_json_valid(buf));
  char *key = fx_json_get(buf, "$.decode_step.pairs[1].attention");
  assert_string_equal(key, "sparse_attn_decode:B=128,dtype=fp8");
  free(key);
  char *g = fx_json_get(buf, "$.decode_step.geomean");
  assert_true(fabs(atof(g) - sqrt((18.2 / 15.51) * (798.1 / 763.95))) < 1e-4);
  free(g);
  free(buf);
  /* No pairs: nothing at all. */
  buf = printed(rows, p, 0, 1, &size);
  assert_int_equal(size, 0);
  free(buf);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rows_pair_by_dtype_batch_topk_qlen_and_lens),
      cmocka_unit_test(test_geomean_of_nothing_is_zero_and_of_opposites_one),
      cmocka_unit_test(test_steps_without_peer_times_pair_without_a_speedup),
      cmocka_unit_test(test_a_shape_without_the_fields_never_pairs),
      cmocka_unit_test(test_the_table_and_the_json_line),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
