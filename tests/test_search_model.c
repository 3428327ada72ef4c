/* The tune's search model (tuner/search_model.c): which variants a shape
 * leaves out after the shapes before it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "search_model.h"
#include "testutil.h"

/* An index_decode shape "B=<b>,ctx=<ctx>" (dtype bf16, topk 16). */
static st_shape decode(int B, int ctx) {
  st_shape s;
  memset(&s, 0, sizeof s);
  snprintf(s.op, sizeof s.op, "index_decode");
  snprintf(s.key, sizeof s.key, "index_decode:B=%d,ctx=%d,dtype=bf16,topk=16", B, ctx);
  st_err err = {{0}};
  st_params_set_int(&s.params, "B", B, &err);
  st_params_set_int(&s.params, "ctx", ctx, &err);
  st_params_set(&s.params, "dtype", "bf16", &err);
  st_params_set_int(&s.params, "topk", 16, &err);
  return s;
}

static const st_search_opts opts = {.threshold = 1.3, .neighbours = 2, .radius = 3.0};

/* Shape s measured: "best" at 10 us, variant `v` at `us` (status). */
static void measured(st_search_model *m, const st_shape *s, const char *v, const char *status, double us) {
  assert_int_equal(st_search_model_add(m, s, "best", "ok", 10.0), 0);
  assert_int_equal(st_search_model_add(m, s, v, status, us), 0);
}

static void test_a_variant_slow_on_the_two_nearest_shapes_is_left_out(void **state) {
  (void)state;
  st_search_model *m = st_search_model_new(&opts);
  assert_non_null(m);
  const st_shape a = decode(8, 8192), b = decode(8, 16384), c = decode(16, 8192);
  char why[256];
  assert_false(st_search_model_skip(m, &c, "v", why, sizeof why)); /* no history */
  measured(m, &a, "v", "ok", 20.0);
  assert_false(st_search_model_skip(m, &c, "v", why, sizeof why)); /* one neighbour is not enough */
  measured(m, &b, "v", "ok", 14.0);
  assert_true(st_search_model_skip(m, &c, "v", why, sizeof why));
  assert_non_null(strstr(why, "2.00x the best"));
  assert_non_null(strstr(why, "1.40x the best"));
  /* the best of both is tried; so is a variant never tried near */
  assert_false(st_search_model_skip(m, &c, "best", why, sizeof why));
  assert_false(st_search_model_skip(m, &c, "other", why, sizeof why));
  st_search_model_free(m);
}

static void test_a_variant_close_on_one_neighbour_is_tried(void **state) {
  (void)state;
  st_search_model *m = st_search_model_new(&opts);
  const st_shape a = decode(8, 8192), b = decode(8, 16384), c = decode(16, 8192);
  measured(m, &a, "v", "ok", 20.0);
  measured(m, &b, "v", "ok", 12.0); /* 1.2x: within the threshold */
  assert_false(st_search_model_skip(m, &c, "v", NULL, 0));
  st_search_model_free(m);
}

static void test_stopped_wrong_and_failed_count_as_slow(void **state) {
  (void)state;
  st_search_model *m = st_search_model_new(&opts);
  const st_shape a = decode(8, 8192), b = decode(8, 16384), c = decode(16, 8192);
  measured(m, &a, "v", "pruned", 16.0); /* the probe's time: 1.6x, stopped */
  measured(m, &b, "v", "wrong", 0.0);
  char why[256];
  assert_true(st_search_model_skip(m, &c, "v", why, sizeof why));
  assert_non_null(strstr(why, "stopped or wrong"));
  st_search_model_free(m);
}

static void test_only_near_shapes_of_the_same_op_count(void **state) {
  (void)state;
  st_search_model *m = st_search_model_new(&opts);
  /* B 1 and 256 at 1K: log2 distances 7+ from B 16 at 128K */
  const st_shape far1 = decode(1, 1024), far2 = decode(256, 1024), c = decode(16, 131072);
  measured(m, &far1, "v", "ok", 30.0);
  measured(m, &far2, "v", "ok", 30.0);
  assert_false(st_search_model_skip(m, &c, "v", NULL, 0));
  /* another op's shapes, however alike, are no neighbours */
  st_shape o1 = decode(16, 65536), o2 = decode(16, 131072 / 2 + 1);
  snprintf(o1.op, sizeof o1.op, "sparse_attn_decode");
  snprintf(o2.op, sizeof o2.op, "sparse_attn_decode");
  snprintf(o1.key, sizeof o1.key, "sparse_attn_decode:1");
  snprintf(o2.key, sizeof o2.key, "sparse_attn_decode:2");
  measured(m, &o1, "v", "ok", 30.0);
  measured(m, &o2, "v", "ok", 30.0);
  assert_false(st_search_model_skip(m, &c, "v", NULL, 0));
  assert_true(isinf(st_search_distance(&o1, &c)));
  st_search_model_free(m);
}

static void test_the_shape_itself_is_no_neighbour(void **state) {
  (void)state;
  /* A resumed run holds the running shape's own measurements: they are
   * not "before" it. */
  st_search_model *m = st_search_model_new(&opts);
  const st_shape a = decode(8, 8192), c = decode(16, 8192);
  measured(m, &a, "v", "ok", 20.0);
  measured(m, &c, "v", "ok", 20.0);
  assert_false(st_search_model_skip(m, &c, "v", NULL, 0));
  st_search_model_free(m);
}

static void test_distances(void **state) {
  (void)state;
  const st_shape a = decode(8, 8192), b = decode(16, 8192), c = decode(8, 32768);
  /* |log2 (9/17)| for B; ctx the same */
  assert_float_equal(st_search_distance(&a, &b), log2(17.0 / 9.0), 1e-9);
  assert_float_equal(st_search_distance(&a, &c), log2(32769.0 / 8193.0), 1e-9);
  st_shape d = a;
  st_err err = {{0}};
  st_params_set(&d.params, "dtype", "fp8", &err); /* a text that differs: 1 */
  assert_float_equal(st_search_distance(&a, &d), 1.0, 1e-9);
  st_params_set(&d.params, "lens", "mixed", &err); /* a field one side lacks: 1 */
  assert_float_equal(st_search_distance(&a, &d), 2.0, 1e-9);
  /* prefill batches by their numbers, not their text: 2 x 4096 tokens is
   * twice the requests and the query tokens of 1 x 4096, same context */
  st_shape p1, p2;
  memset(&p1, 0, sizeof p1);
  snprintf(p1.op, sizeof p1.op, "sparse_attn");
  snprintf(p1.key, sizeof p1.key, "sparse_attn:1");
  st_params_set(&p1.params, "reqs", "4096:0", &err);
  p2 = p1;
  snprintf(p2.key, sizeof p2.key, "sparse_attn:2");
  st_params_set(&p2.params, "reqs", "4096:0*2", &err);
  assert_float_equal(st_search_distance(&p1, &p2), log2(3.0 / 2.0) + log2(8193.0 / 4097.0), 1e-9);
  st_params_set(&p2.params, "reqs", "not a batch", &err); /* unparsable: compared as text */
  assert_float_equal(st_search_distance(&p1, &p2), 3.0 + 1.0, 1e-9);
}

static void test_a_replay_counts_what_would_have_been_left_out_and_its_cost(void **state) {
  (void)state;
  const st_shape shapes[] = {decode(8, 8192), decode(8, 16384), decode(16, 8192)};
  /* "v" 2x and 1.5x the best on the first two shapes, the best on the
   * third: left out there, at a cost of 12 us against 10. "d", a default
   * as slow, is never left out. */
  const st_search_pair pairs[] = {
      {0, "best", "ok", 10.0, 0}, {0, "v", "ok", 20.0, 0},  {0, "d", "ok", 20.0, 1},
      {1, "best", "ok", 10.0, 0}, {1, "v", "ok", 15.0, 0},  {1, "d", "ok", 20.0, 1},
      {2, "best", "ok", 12.0, 0}, {2, "v", "ok", 10.0, 0},  {2, "d", "ok", 30.0, 1},
      {2, "w", "wrong", 0.0, 0},
  };
  st_search_replayed r[3];
  assert_int_equal(st_search_replay(&opts, shapes, 3, pairs, (int)(sizeof pairs / sizeof pairs[0]), r), 0);
  assert_int_equal(r[0].pairs, 3);
  assert_int_equal(r[0].left_out, 0);
  assert_int_equal(r[1].left_out, 0); /* one shape before: no two neighbours */
  assert_int_equal(r[2].pairs, 4);
  assert_int_equal(r[2].left_out, 1);
  assert_float_equal(r[2].best_us, 10.0, 1e-12);
  assert_float_equal(r[2].kept_us, 12.0, 1e-12);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_variant_slow_on_the_two_nearest_shapes_is_left_out),
      cmocka_unit_test(test_a_variant_close_on_one_neighbour_is_tried),
      cmocka_unit_test(test_stopped_wrong_and_failed_count_as_slow),
      cmocka_unit_test(test_only_near_shapes_of_the_same_op_count),
      cmocka_unit_test(test_the_shape_itself_is_no_neighbour),
      cmocka_unit_test(test_distances),
      cmocka_unit_test(test_a_replay_counts_what_would_have_been_left_out_and_its_cost),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
