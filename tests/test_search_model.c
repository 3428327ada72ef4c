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

/* Variants of two structs, FAST and SLOW, each made for several topk
 * capacities (kN) and query counts (qN), launched with 1 or 4 splits. */
#define FAST_K16 "index_decode.bf16.d128.k16.h1.q1.t128.single/s1"
#define FAST_K32 "index_decode.bf16.d128.k32.h1.q2.t128.single/s1"
#define SLOW_K16 "index_decode.bf16.d128.k16.h2.q1.t256.split/s1"
#define SLOW_K16_S4 "index_decode.bf16.d128.k16.h2.q1.t256.split/s4"
#define SLOW_K32 "index_decode.bf16.d128.k32.h2.q2.t256.split/s4"
#define SLOW_K64 "index_decode.bf16.d128.k64.h2.q4.t256.split/s1"

static const char *const both[] = {FAST_K16, SLOW_K64};

/* The defaults, with the family rule off unless a test turns it on. */
static st_search_opts struct_only(void) {
  st_search_opts o = st_search_default_opts();
  o.by_family.neighbours = 0;
  return o;
}

static void add(st_search_model *m, const st_shape *s, const char *name, const char *status, double us) {
  assert_int_equal(st_search_model_add(m, s, name, status, us), 0);
}

/* The fast struct at 10 us and the slow one at slow_us on s: one shape
 * of the history most tests build. */
static void ran(st_search_model *m, const st_shape *s, double slow_us) {
  add(m, s, FAST_K16, "ok", 10.0);
  add(m, s, SLOW_K16, "ok", slow_us);
}

static void begin(st_search_model *m, const st_shape *s, const char *const *names, int n) {
  assert_int_equal(st_search_model_begin_shape(m, s, names, n), 0);
}

static void test_a_struct_slow_on_the_two_nearest_shapes_is_left_out(void **state) {
  (void)state;
  const st_search_opts o = struct_only();
  st_search_model *m = st_search_model_new(&o);
  assert_non_null(m);
  const st_shape a = decode(8, 8192), b = decode(8, 16384), c = decode(16, 8192);
  char why[256];
  begin(m, &c, both, 2);
  assert_false(st_search_model_skip(m, SLOW_K64, why, sizeof why)); /* no history */
  ran(m, &a, 20.0);
  assert_false(st_search_model_skip(m, SLOW_K64, why, sizeof why)); /* one shape is not enough */
  /* Another k and q of the same struct, its best split 1.2x the best. */
  add(m, &b, FAST_K32, "ok", 10.0);
  add(m, &b, SLOW_K32, "ok", 12.0);
  add(m, &b, SLOW_K16_S4, "ok", 30.0);
  assert_true(st_search_model_skip(m, SLOW_K64, why, sizeof why));
  if (!strstr(why, "struct index_decode.bf16.d128.h2.t256.split: 2.00x the best") || !strstr(why, "1.20x the best"))
    fail_msg("why: %s", why);
  assert_false(st_search_model_skip(m, FAST_K16, why, sizeof why)); /* the best of both */
  assert_string_equal(why, "");
  /* An h1 variant with another thread count is another struct, never tried. */
  assert_false(st_search_model_skip(m, "index_decode.bf16.d128.k64.h1.q4.t256.single/s1", NULL, 0));
  st_search_model_free(m);
}

static void test_a_time_at_the_threshold_is_slow(void **state) {
  (void)state;
  const st_search_opts o = struct_only();
  st_search_model *m = st_search_model_new(&o);
  const st_shape a = decode(8, 8192), b = decode(8, 16384), c = decode(16, 8192);
  ran(m, &a, 11.5);  /* exactly 1.15x */
  ran(m, &b, 11.49); /* just under */
  begin(m, &c, both, 2);
  assert_false(st_search_model_skip(m, SLOW_K64, NULL, 0));
  add(m, &b, SLOW_K16_S4, "ok", 11.5); /* the struct's best on b is still 11.49 */
  assert_false(st_search_model_skip(m, SLOW_K64, NULL, 0));
  const st_shape d = decode(8, 4096);
  add(m, &d, FAST_K16, "ok", 20.0);
  add(m, &d, SLOW_K16, "ok", 23.0); /* d is nearer than b: 1.15x on a and d */
  assert_true(st_search_model_skip(m, SLOW_K64, NULL, 0));
  st_search_model_free(m);
}

static void test_a_struct_that_came_close_on_the_nearest_shape_is_kept(void **state) {
  (void)state;
  const st_search_opts o = struct_only();
  st_search_model *m = st_search_model_new(&o);
  /* Slow on two shapes at distances 1 and 2, within 1.1x on one nearer. */
  const st_shape near = decode(16, 12288), far1 = decode(33, 8192), far2 = decode(16, 32768), c = decode(16, 8192);
  ran(m, &far1, 30.0);
  ran(m, &far2, 30.0);
  begin(m, &c, both, 2);
  assert_true(st_search_model_skip(m, SLOW_K64, NULL, 0));
  add(m, &near, FAST_K16, "ok", 10.0);
  add(m, &near, SLOW_K32, "ok", 11.0);
  assert_true(st_search_distance(&near, &c) < st_search_distance(&far1, &c));
  assert_false(st_search_model_skip(m, SLOW_K64, NULL, 0));
  st_search_model_free(m);
}

static void test_pruned_wrong_and_failed_count_as_slow(void **state) {
  (void)state;
  const st_search_opts o = struct_only();
  st_search_model *m = st_search_model_new(&o);
  const st_shape a = decode(8, 8192), b = decode(8, 16384), c = decode(16, 8192);
  add(m, &a, FAST_K16, "ok", 10.0);
  add(m, &a, SLOW_K16, "pruned", 10.5); /* stopped by the probe: however close its probe's time */
  add(m, &b, FAST_K16, "ok", 10.0);
  add(m, &b, SLOW_K16, "wrong", 0.0);
  add(m, &b, SLOW_K16_S4, "failed", 0.0);
  begin(m, &c, both, 2);
  char why[256];
  assert_true(st_search_model_skip(m, SLOW_K64, why, sizeof why));
  if (!strstr(why, "stopped or wrong")) fail_msg("why: %s", why);
  /* A struct is as fast as its best member: one ok split that came close. */
  add(m, &b, SLOW_K32, "ok", 11.0);
  assert_false(st_search_model_skip(m, SLOW_K64, NULL, 0));
  st_search_model_free(m);
}

static void test_a_faster_struct_that_does_not_apply_here_does_not_make_a_variant_slow(void **state) {
  (void)state;
  /* "vs common": FAST beat SLOW by 1.3x on the shapes before, but cannot
   * run on c; there SLOW meets only MID, which it beat. */
  const st_search_opts o = struct_only();
  st_search_model *m = st_search_model_new(&o);
  const char *mid = "index_decode.bf16.d128.k16.h4.q1.t128.single/s2";
  const st_shape a = decode(8, 8192), b = decode(8, 16384), c = decode(16, 8192);
  for (int i = 0; i < 2; i++) {
    const st_shape *s = i ? &b : &a;
    ran(m, s, 13.0);
    add(m, s, mid, "ok", 14.0);
  }
  const char *const without_fast[] = {SLOW_K64, mid};
  begin(m, &c, without_fast, 2);
  assert_false(st_search_model_skip(m, SLOW_K64, NULL, 0));
  assert_false(st_search_model_skip(m, mid, NULL, 0)); /* 1.08x SLOW */
  const char *const with_fast[] = {SLOW_K64, mid, FAST_K32};
  begin(m, &c, with_fast, 3);
  assert_true(st_search_model_skip(m, SLOW_K64, NULL, 0));
  assert_true(st_search_model_skip(m, mid, NULL, 0));
  /* What applies is the shape begun's: another shape starts afresh. */
  begin(m, &c, without_fast, 2);
  assert_false(st_search_model_skip(m, SLOW_K64, NULL, 0));
  st_search_model_free(m);
}

static void test_the_family_rule_reaches_any_distance_by_a_wider_margin(void **state) {
  (void)state;
  const st_search_opts o = st_search_default_opts();
  st_search_model *m = st_search_model_new(&o);
  /* log2 distances 7+7 from c: beyond the struct rule's radius */
  const st_shape far1 = decode(1, 1024), far2 = decode(1, 2048), c = decode(256, 131072);
  assert_true(st_search_distance(&far1, &c) > ST_SEARCH_STRUCT_RADIUS);
  ran(m, &far1, 14.9); /* slow for the struct rule, not for the family's */
  add(m, &far1, SLOW_K16_S4, "ok", 40.0);
  ran(m, &far2, 15.0);
  const char *const here[] = {FAST_K16, SLOW_K16_S4};
  begin(m, &c, here, 2);
  assert_false(st_search_model_skip(m, SLOW_K16_S4, NULL, 0)); /* 1.5x on far2, 1.49x on far1 */
  add(m, &far1, SLOW_K16, "pruned", 30.0);                     /* the family's best is still 14.9 */
  assert_false(st_search_model_skip(m, SLOW_K16_S4, NULL, 0));
  const st_shape far3 = decode(2, 1024);
  add(m, &far3, FAST_K16, "ok", 10.0);
  add(m, &far3, SLOW_K16_S4, "ok", 16.0);
  char why[256];
  assert_true(st_search_model_skip(m, SLOW_K16_S4, why, sizeof why));
  if (!strstr(why, "family index_decode.bf16.d128.k16.h2.q1.t256.split:")) fail_msg("why: %s", why);
  /* Only the family's own members count: k64 is another family, of the same struct. */
  assert_false(st_search_model_skip(m, SLOW_K64, NULL, 0));
  st_search_model_free(m);
}

static void test_only_shapes_of_the_same_op_within_the_radius_count(void **state) {
  (void)state;
  const st_search_opts o = struct_only();
  st_search_model *m = st_search_model_new(&o);
  /* B 1 and 256 at 1K: log2 distances 7+ from B 16 at 128K */
  const st_shape far1 = decode(1, 1024), far2 = decode(256, 1024), c = decode(16, 131072);
  ran(m, &far1, 30.0);
  ran(m, &far2, 30.0);
  begin(m, &c, both, 2);
  assert_false(st_search_model_skip(m, SLOW_K64, NULL, 0));
  /* another op's shapes, however alike, are no neighbours */
  st_shape o1 = decode(16, 65536), o2 = decode(16, 131072 / 2 + 1);
  snprintf(o1.op, sizeof o1.op, "sparse_attn_decode");
  snprintf(o2.op, sizeof o2.op, "sparse_attn_decode");
  snprintf(o1.key, sizeof o1.key, "sparse_attn_decode:1");
  snprintf(o2.key, sizeof o2.key, "sparse_attn_decode:2");
  for (int i = 0; i < 2; i++) {
    ran(m, i ? &o2 : &o1, 30.0);
  }
  assert_false(st_search_model_skip(m, SLOW_K64, NULL, 0));
  assert_true(isinf(st_search_distance(&o1, &c)));
  st_search_model_free(m);
}

static void test_the_shape_itself_is_no_neighbour(void **state) {
  (void)state;
  /* A resumed run holds the running shape's own measurements: they are
   * not "before" it. */
  const st_search_opts o = struct_only();
  st_search_model *m = st_search_model_new(&o);
  const st_shape a = decode(8, 8192), c = decode(16, 8192);
  for (int i = 0; i < 2; i++) {
    ran(m, i ? &c : &a, 20.0);
  }
  begin(m, &c, both, 2);
  assert_false(st_search_model_skip(m, SLOW_K64, NULL, 0));
  st_search_model_free(m);
}

/* c with `lens` set to a text: such shapes are all 1 apart. */
static st_shape with_lens(const char *lens) {
  st_shape s = decode(16, 8192);
  st_err err = {{0}};
  st_params_set(&s.params, "lens", lens, &err);
  snprintf(s.key, sizeof s.key, "index_decode:B=16,ctx=8192,dtype=bf16,lens=%s,topk=16", lens);
  return s;
}

static void test_ties_in_distance_go_to_the_shape_measured_first(void **state) {
  (void)state;
  st_search_opts o = struct_only();
  o.by_struct.neighbours = 1;
  const st_shape slow = with_lens("full"), close = with_lens("mixed"), c = with_lens("short");
  assert_float_equal(st_search_distance(&slow, &c), st_search_distance(&close, &c), 0);
  for (int slow_first = 0; slow_first < 2; slow_first++) {
    st_search_model *m = st_search_model_new(&o);
    for (int i = 0; i < 2; i++) {
      const int is_slow = i == 0 ? slow_first : !slow_first;
      ran(m, is_slow ? &slow : &close, is_slow ? 20.0 : 10.5);
    }
    begin(m, &c, both, 2);
    assert_int_equal(st_search_model_skip(m, SLOW_K64, NULL, 0), slow_first);
    st_search_model_free(m);
  }
}

static void test_nothing_is_left_out_before_a_shape_begins(void **state) {
  (void)state;
  const st_search_opts o = struct_only();
  st_search_model *m = st_search_model_new(&o);
  const st_shape a = decode(8, 8192), b = decode(8, 16384);
  for (int i = 0; i < 2; i++) {
    ran(m, i ? &b : &a, 20.0);
  }
  assert_false(st_search_model_skip(m, SLOW_K64, NULL, 0));
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

static void test_a_replay_leaves_out_no_default_and_counts_the_cost(void **state) {
  (void)state;
  const st_shape shapes[] = {decode(8, 8192), decode(8, 16384), decode(16, 8192)};
  /* SLOW 2x and 1.5x the best on the first two shapes, the best on the
   * third: left out there, at a cost of 12 us against 10. DEF, a default
   * of the same struct, is never left out. */
  const char *def = "index_decode.bf16.d128.k16.h2.q1.t256.split/auto";
  const st_search_pair pairs[] = {
      {0, FAST_K16, "ok", 10.0, 0},      {0, SLOW_K16, "ok", 20.0, 0}, {0, def, "ok", 20.0, 1},
      {1, FAST_K16, "ok", 10.0, 0},      {1, SLOW_K32, "ok", 15.0, 0}, {1, def, "ok", 20.0, 1},
      {2, FAST_K16, "ok", 12.0, 0},      {2, SLOW_K64, "ok", 10.0, 0}, {2, def, "ok", 30.0, 1},
      {2, SLOW_K16_S4, "wrong", 0.0, 0},
  };
  st_search_replayed r[3];
  const st_search_opts o = st_search_default_opts();
  assert_int_equal(st_search_replay(&o, shapes, 3, pairs, (int)(sizeof pairs / sizeof pairs[0]), r), 0);
  assert_int_equal(r[0].pairs, 3);
  assert_int_equal(r[0].left_out, 0);
  assert_int_equal(r[1].left_out, 0); /* one shape before: not two */
  assert_int_equal(r[2].pairs, 4);
  assert_int_equal(r[2].left_out, 2); /* SLOW_K64 and SLOW_K16_S4; not DEF */
  assert_float_equal(r[2].best_us, 10.0, 1e-12);
  assert_float_equal(r[2].kept_us, 12.0, 1e-12);
}

/* ---- random histories ---- */

#define RND_SHAPES 12
#define RND_NAMES 24

typedef struct rnd_run {
  st_shape shapes[RND_SHAPES + 1]; /* the last is the one asked about */
  char names[RND_NAMES][96];
  int measured[RND_SHAPES][RND_NAMES]; /* 0: not run, 1: ok, 2: pruned, 3: wrong */
  double us[RND_SHAPES][RND_NAMES];
  int applies[RND_NAMES];
} rnd_run;

static void rnd_fill(rnd_run *r, uint64_t *rng) {
  memset(r, 0, sizeof *r);
  for (int i = 0; i <= RND_SHAPES; i++)
    r->shapes[i] = decode((int)st_rand_int(rng, 1, 64), 1024 << st_rand_int(rng, 0, 7));
  for (int i = 0; i <= RND_SHAPES; i++) /* keys unique: a clash is the same shape */
    snprintf(r->shapes[i].key + strlen(r->shapes[i].key), 8, ",n=%d", i);
  static const char *const st[] = {"single", "split"};
  for (int v = 0; v < RND_NAMES; v++) {
    snprintf(r->names[v], sizeof r->names[v], "index_decode.bf16.k%d.h%d.q%d.%s/s%d", 16 << st_rand_int(rng, 0, 2),
             (int)st_rand_int(rng, 1, 3), (int)st_rand_int(rng, 1, 2), st[st_rand_int(rng, 0, 1)],
             1 << st_rand_int(rng, 0, 2));
    r->applies[v] = st_rand_int(rng, 0, 3) != 0;
  }
  for (int i = 0; i < RND_SHAPES; i++)
    for (int v = 0; v < RND_NAMES; v++) {
      r->measured[i][v] = (int)st_rand_int(rng, 0, 3);
      r->us[i][v] = st_rand_uniform(rng, 10.0, 30.0);
    }
}

/* What the model leaves out of the last shape after the others: skip[v].
 * The measurements go in `order` (a permutation of shape x name) and each
 * shape's times are scaled by scale[shape]. */
static void rnd_decide(const rnd_run *r, const st_search_opts *o, const int *order, const double *scale, int *skip) {
  st_search_model *m = st_search_model_new(o);
  assert_non_null(m);
  static const char *const status[] = {"", "ok", "pruned", "wrong"};
  for (int k = 0; k < RND_SHAPES * RND_NAMES; k++) {
    const int i = order[k] / RND_NAMES, v = order[k] % RND_NAMES;
    if (r->measured[i][v]) add(m, &r->shapes[i], r->names[v], status[r->measured[i][v]], r->us[i][v] * scale[i]);
  }
  const char *names[RND_NAMES];
  int n = 0;
  for (int v = 0; v < RND_NAMES; v++)
    if (r->applies[v]) names[n++] = r->names[v];
  begin(m, &r->shapes[RND_SHAPES], names, n);
  for (int v = 0; v < RND_NAMES; v++) skip[v] = st_search_model_skip(m, r->names[v], NULL, 0);
  st_search_model_free(m);
}

static void test_decisions_depend_on_each_shapes_ratios_not_on_the_order_of_measurements(void **state) {
  (void)state;
  uint64_t rng = st_test_seed("test_search_model random histories");
  int order[RND_SHAPES * RND_NAMES], shuffled[RND_SHAPES * RND_NAMES];
  double one[RND_SHAPES], scaled[RND_SHAPES];
  for (int k = 0; k < RND_SHAPES * RND_NAMES; k++) order[k] = k;
  int left_out = 0;
  for (int round = 0; round < 200; round++) {
    rnd_run r;
    rnd_fill(&r, &rng);
    /* Within a shape only (ties in distance go to the shape measured first). */
    memcpy(shuffled, order, sizeof order);
    for (int i = 0; i < RND_SHAPES; i++) {
      int *row = shuffled + i * RND_NAMES;
      for (int k = RND_NAMES - 1; k > 0; k--) {
        const int j = (int)st_rand_int(&rng, 0, k), t = row[k];
        row[k] = row[j];
        row[j] = t;
      }
      one[i] = 1.0;
      scaled[i] = ldexp(1.0, (int)st_rand_int(&rng, -3, 3)); /* exact: the ratios stay the same */
    }
    st_search_opts o = st_search_default_opts();
    o.by_struct.radius = st_rand_uniform(&rng, 2.0, 12.0);
    int a[RND_NAMES], b[RND_NAMES], stricter[RND_NAMES];
    rnd_decide(&r, &o, order, one, a);
    rnd_decide(&r, &o, shuffled, scaled, b);
    o.by_struct.threshold *= 1.2;
    o.by_family.threshold *= 1.2;
    rnd_decide(&r, &o, order, one, stricter);
    for (int v = 0; v < RND_NAMES; v++) {
      if (a[v] != b[v]) fail_msg("round %d: %s decided %d, then %d", round, r.names[v], a[v], b[v]);
      if (stricter[v] && !a[v]) fail_msg("round %d: %s left out only at a higher threshold", round, r.names[v]);
      left_out += a[v];
    }
  }
  assert_true(left_out > 0); /* the histories did leave things out */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_struct_slow_on_the_two_nearest_shapes_is_left_out),
      cmocka_unit_test(test_a_time_at_the_threshold_is_slow),
      cmocka_unit_test(test_a_struct_that_came_close_on_the_nearest_shape_is_kept),
      cmocka_unit_test(test_pruned_wrong_and_failed_count_as_slow),
      cmocka_unit_test(test_a_faster_struct_that_does_not_apply_here_does_not_make_a_variant_slow),
      cmocka_unit_test(test_the_family_rule_reaches_any_distance_by_a_wider_margin),
      cmocka_unit_test(test_only_shapes_of_the_same_op_within_the_radius_count),
      cmocka_unit_test(test_the_shape_itself_is_no_neighbour),
      cmocka_unit_test(test_ties_in_distance_go_to_the_shape_measured_first),
      cmocka_unit_test(test_nothing_is_left_out_before_a_shape_begins),
      cmocka_unit_test(test_distances),
      cmocka_unit_test(test_a_replay_leaves_out_no_default_and_counts_the_cost),
      cmocka_unit_test(test_decisions_depend_on_each_shapes_ratios_not_on_the_order_of_measurements),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
