/* test_runtime_dispatch.c - choosing a variant: exact winner, nearest key
 * (batch, context and the other numbers), default by topk capacity, fallback
 * past broken binaries, memo.
 *
 * Drives runtime/dispatch.c alone, with in-memory winner and default lists,
 * a stand-in fit check and a stand-in loader: no database, no GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "testutil.h"

/* ---- building tables ------------------------------------------------------
 */

typedef struct call {
  st_index_decode_args args;
  char key[ST_DISPATCH_KEY_MAX];
  st_params fields;
} call;

static const char *dtype_text(st_dtype d) { return d == ST_DTYPE_FP8_E4M3 ? "fp8" : "bf16"; }

/* The key fields as the launcher writes them (B, D, H, dtype, qlen, topk). */
static void set_fields(st_params *f, long long B, int D, int H, st_dtype dt, int qlen, int topk) {
  f->n = 0;
  assert_int_equal(st_params_set_int(f, "B", B, NULL), ST_OK);
  assert_int_equal(st_params_set_int(f, "D", D, NULL), ST_OK);
  assert_int_equal(st_params_set_int(f, "H", H, NULL), ST_OK);
  assert_int_equal(st_params_set(f, "dtype", dtype_text(dt), NULL), ST_OK);
  assert_int_equal(st_params_set_int(f, "qlen", qlen, NULL), ST_OK);
  assert_int_equal(st_params_set_int(f, "topk", topk, NULL), ST_OK);
}

static call make_call(long long B, int D, int H, st_dtype dt, int qlen, int topk) {
  call c;
  memset(&c, 0, sizeof c);
  c.args.q.dtype = dt;
  c.args.q.ndim = 3;
  c.args.q.shape[0] = B * qlen;
  c.args.q.shape[1] = H;
  c.args.q.shape[2] = D;
  c.args.qlen = qlen;
  c.args.topk = topk;
  c.args.max_context = 4096;
  snprintf(c.key, sizeof c.key, "index_decode:B=%lld,D=%d,H=%d,dtype=%s,qlen=%d,topk=%d", B, D, H, dtype_text(dt), qlen,
           topk);
  set_fields(&c.fields, B, D, H, dt, qlen, topk);
  return c;
}

static st_dispatch_variant make_variant(const char *id, st_dtype dt, int D, int topk_cap, int heads_per_cta) {
  st_dispatch_variant v;
  memset(&v, 0, sizeof v);
  snprintf(v.id, sizeof v.id, "%s", id);
  snprintf(v.name, sizeof v.name, "index_decode_%s", id);
  snprintf(v.source_hash, sizeof v.source_hash, "src_%s", id);
  v.cfg.index_decode = (st_index_decode_config){.dtype = dt,
                                                .head_dim = D,
                                                .topk_cap = topk_cap,
                                                .heads_per_cta = heads_per_cta,
                                                .max_qlen = 4,
                                                .threads = 128,
                                                .units_in_flight = 2};
  v.rank = topk_cap;
  return v;
}

/* A winner for (B, D=128, H=2, bf16, qlen=1, topk=16) unless `H` differs. */
static st_dispatch_winner make_winner(const char *id, long long B, int H, int64_t run_id) {
  st_dispatch_winner w;
  memset(&w, 0, sizeof w);
  set_fields(&w.fields, B, 128, H, ST_DTYPE_BF16, 1, 16);
  w.batch = B;
  w.run_id = run_id;
  w.median_us = 10.0;
  w.v = make_variant(id, ST_DTYPE_BF16, 128, 16, 1);
  return w;
}

/* ---- stand-in hooks
 * ---------------------------------------------------------- */

#define MAX_IDS 8

typedef struct fake {
  const char *broken[MAX_IDS];   /* loading these gives ST_ERR_NO_VARIANT  */
  const char *fatal;             /* loading this gives ST_ERR_CUDA         */
  const char *rejected[MAX_IDS]; /* these never fit                        */
  int loads;
  int fits;
} fake;

static int listed(const char *const *ids, const char *id) {
  for (int i = 0; i < MAX_IDS; i++)
    if (ids[i] && strcmp(ids[i], id) == 0) return 1;
  return 0;
}

static st_status fake_fit(void *ctx, st_op_id op, const st_dispatch_variant *v, const void *args, st_err *err) {
  fake *f = ctx;
  f->fits++;
  assert_int_equal(op, ST_OP_INDEX_DECODE);
  const st_index_decode_config *cfg = &v->cfg.index_decode;
  const st_index_decode_args *a = args;
  if (listed(f->rejected, v->id)) return st_fail(err, ST_ERR_NO_VARIANT, "rejected by the test");
  if (cfg->dtype != a->q.dtype) return st_fail(err, ST_ERR_NO_VARIANT, "dtype differs");
  if (cfg->head_dim != a->q.shape[2]) return st_fail(err, ST_ERR_NO_VARIANT, "head_dim %d differs", cfg->head_dim);
  if (cfg->topk_cap < a->topk)
    return st_fail(err, ST_ERR_NO_VARIANT, "variant holds topk <= %d, call asks %d", cfg->topk_cap, a->topk);
  if (a->q.shape[1] % cfg->heads_per_cta) return st_fail(err, ST_ERR_NO_VARIANT, "heads_per_cta does not divide H");
  return ST_OK;
}

static st_status fake_load(void *ctx, st_op_id op, const st_dispatch_variant *v, void **loaded, st_err *err) {
  fake *f = ctx;
  assert_int_equal(op, ST_OP_INDEX_DECODE);
  f->loads++;
  if (f->fatal && strcmp(f->fatal, v->id) == 0)
    return st_fail(err, ST_ERR_CUDA, "cuModuleLoadData failed: CUDA_ERROR_OUT_OF_MEMORY (test)");
  if (listed(f->broken, v->id))
    return st_fail(err, ST_ERR_NO_VARIANT, "variant %s: source has no binary for sm_90a (test)", v->id);
  *loaded = (void *)v;
  return ST_OK;
}

static st_dispatch_hooks hooks_of(fake *f) {
  return (st_dispatch_hooks){.fit = fake_fit, .fit_ctx = f, .load = fake_load, .load_ctx = f};
}

static st_dispatch_table table_of(st_dispatch_winner *w, size_t nw, st_dispatch_variant *d, size_t nd) {
  st_dispatch_sort_winners(w, nw);
  st_dispatch_sort_defaults(d, nd);
  return (st_dispatch_table){.op = ST_OP_INDEX_DECODE,
                             .winners = w,
                             .n_winners = nw,
                             .defaults = d,
                             .n_defaults = nd,
                             .source = "unit.db",
                             .nearest_radius = ST_DISPATCH_NEAREST_RADIUS};
}

/* Chooses for `c` and returns the chosen id ("" on failure, with *st set). */
static const char *choose(const st_dispatch_table *t, fake *f, const call *c, st_status *st, st_err *err,
                          st_dispatch_rule *rule) {
  st_dispatch_hooks h = hooks_of(f);
  st_dispatch_choice ch;
  memset(&ch, 0, sizeof ch);
  *st = st_dispatch_choose(t, c->key, &c->fields, &c->args, &h, &ch, err);
  if (rule) *rule = ch.rule;
  if (*st != ST_OK) return "";
  assert_ptr_equal(ch.loaded, ch.v);
  return ch.v->id;
}

static const char *choose_ok(const st_dispatch_table *t, fake *f, const call *c, st_dispatch_rule *rule) {
  st_status st;
  st_err err = {{0}};
  const char *id = choose(t, f, c, &st, &err, rule);
  if (st != ST_OK) fail_msg("expected a choice, got %s: %s", st_status_name(st), err.msg);
  return id;
}

/* ---- tests
 * ------------------------------------------------------------------- */

static void exact_winner_is_chosen_when_it_fits(void **state) {
  (void)state;
  st_dispatch_winner w[] = {make_winner("w4", 4, 2, 1), make_winner("w8", 8, 2, 1), make_winner("w16", 16, 2, 1)};
  st_dispatch_variant d[] = {make_variant("d16", ST_DTYPE_BF16, 128, 16, 1)};
  st_dispatch_table t = table_of(w, 3, d, 1);
  fake f = {0};
  st_dispatch_rule rule;
  call c = make_call(8, 128, 2, ST_DTYPE_BF16, 1, 16);
  assert_string_equal(choose_ok(&t, &f, &c, &rule), "w8");
  assert_int_equal(rule, ST_DISPATCH_EXACT);
  assert_int_equal(f.loads, 1);
}

static void newest_run_wins_among_exact_winners(void **state) {
  (void)state;
  st_dispatch_winner w[] = {make_winner("old", 8, 2, 3), make_winner("new", 8, 2, 7)};
  st_dispatch_table t = table_of(w, 2, NULL, 0);
  fake f = {0};
  call c = make_call(8, 128, 2, ST_DTYPE_BF16, 1, 16);
  assert_string_equal(choose_ok(&t, &f, &c, NULL), "new");
}

static void exact_winner_that_does_not_fit_falls_to_nearest_batch(void **state) {
  (void)state;
  st_dispatch_winner w[] = {make_winner("w8", 8, 2, 1), make_winner("w16", 16, 2, 1), make_winner("w2", 2, 2, 1)};
  st_dispatch_table t = table_of(w, 3, NULL, 0);
  fake f = {.rejected = {"w8"}};
  st_dispatch_rule rule;
  call c = make_call(8, 128, 2, ST_DTYPE_BF16, 1, 16);
  assert_string_equal(choose_ok(&t, &f, &c, &rule), "w16"); /* 2x away; w2 is 4x away */
  assert_int_equal(rule, ST_DISPATCH_NEAREST);
}

/* A winner tuned at (B, ctx), as index_decode's keys now hold the context. */
static st_dispatch_winner winner_at(const char *id, long long B, long long ctx) {
  st_dispatch_winner w = make_winner(id, B, 2, 1);
  assert_int_equal(st_params_set_int(&w.fields, "ctx", ctx, NULL), ST_OK);
  w.context = ctx;
  return w;
}

static call call_at(long long B, long long ctx) {
  call c = make_call(B, 128, 2, ST_DTYPE_BF16, 1, 16);
  c.args.max_context = (int)ctx;
  assert_int_equal(st_params_set_int(&c.fields, "ctx", ctx, NULL), ST_OK);
  snprintf(c.key, sizeof c.key, "index_decode:B=%lld,D=128,H=2,ctx=%lld,dtype=bf16,qlen=1,topk=16", B, ctx);
  return c;
}

static void nearest_shape_adds_the_log2_distances_of_batch_and_context(void **state) {
  (void)state;
  st_dispatch_winner w[] = {winner_at("b1c8k", 1, 8192), winner_at("b1c128k", 1, 131072),
                            winner_at("b8c32k", 8, 32768)};
  st_dispatch_table t = table_of(w, 3, NULL, 0);
  fake f = {0};
  st_dispatch_rule rule;
  call c = call_at(1, 131072);
  assert_string_equal(choose_ok(&t, &f, &c, &rule), "b1c128k");
  assert_int_equal(rule, ST_DISPATCH_EXACT);
  c = call_at(1, 100000); /* 0.4 from b1c128k, 3.6 from b1c8k, 4.6 from b8c32k */
  assert_string_equal(choose_ok(&t, &f, &c, &rule), "b1c128k");
  assert_int_equal(rule, ST_DISPATCH_NEAREST);
  c = call_at(2, 32768); /* 2 from b8c32k, 3 from both B = 1 winners */
  assert_string_equal(choose_ok(&t, &f, &c, NULL), "b8c32k");
  c = call_at(1, 16384); /* 1 from b1c8k */
  assert_string_equal(choose_ok(&t, &f, &c, NULL), "b1c8k");
  c = call_at(1, 32768); /* 2 from both B = 1 winners: the larger context */
  assert_string_equal(choose_ok(&t, &f, &c, NULL), "b1c128k");
}

static void winners_recorded_without_a_context_match_by_batch(void **state) {
  (void)state;
  st_dispatch_winner w[] = {make_winner("old_b1", 1, 2, 1), winner_at("b8c32k", 8, 32768)};
  st_dispatch_table t = table_of(w, 2, NULL, 0);
  fake f = {0};
  st_dispatch_rule rule;
  call c = call_at(1, 65536);
  assert_string_equal(choose_ok(&t, &f, &c, &rule), "old_b1");
  assert_int_equal(rule, ST_DISPATCH_NEAREST);
}

static void nearest_batch_is_nearest_in_log2(void **state) {
  (void)state;
  st_dispatch_winner w[] = {make_winner("w1", 1, 2, 1), make_winner("w4", 4, 2, 1), make_winner("w8", 8, 2, 1),
                            make_winner("w64", 64, 2, 1)};
  st_dispatch_table t = table_of(w, 4, NULL, 0);
  fake f = {0};
  /* B=2: 2/1 = 4/2, a tie, so the larger; B=22: 22/8 = 2.75 < 64/22 = 2.91;
   * B=23: 23/8 = 2.88 > 64/23 = 2.78. */
  struct {
    long long B;
    const char *want;
  } cases[] = {{6, "w8"}, {5, "w4"}, {3, "w4"}, {2, "w4"}, {100, "w64"}, {22, "w8"}, {23, "w64"}, {24, "w64"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    call c = make_call(cases[i].B, 128, 2, ST_DTYPE_BF16, 1, 16);
    st_dispatch_rule rule;
    const char *got = choose_ok(&t, &f, &c, &rule);
    if (strcmp(got, cases[i].want) != 0) fail_msg("B=%lld: chose %s, expected %s", cases[i].B, got, cases[i].want);
    assert_int_equal(rule, ST_DISPATCH_NEAREST);
  }
}

static void nearest_batch_tie_goes_to_the_larger_batch(void **state) {
  (void)state;
  st_dispatch_winner w[] = {make_winner("w16", 16, 2, 1), make_winner("w4", 4, 2, 1)};
  st_dispatch_table t = table_of(w, 2, NULL, 0);
  fake f = {0};
  call c = make_call(8, 128, 2, ST_DTYPE_BF16, 1, 16);
  assert_string_equal(choose_ok(&t, &f, &c, NULL), "w16");
  st_dispatch_winner w2[] = {make_winner("w2", 2, 2, 1), make_winner("w8", 8, 2, 1)};
  st_dispatch_table t2 = table_of(w2, 2, NULL, 0);
  c = make_call(4, 128, 2, ST_DTYPE_BF16, 1, 16);
  assert_string_equal(choose_ok(&t2, &f, &c, NULL), "w8");
}

static void nearest_key_may_differ_in_any_number_but_not_in_text(void **state) {
  (void)state;
  /* H 4 against 2: log2 distance 1, the radius; B 256 against 8: 5 */
  st_dispatch_winner w[] = {make_winner("h4", 8, 4, 1), make_winner("h2_far", 256, 2, 1)};
  st_dispatch_table t = table_of(w, 2, NULL, 0);
  fake f = {0};
  st_dispatch_rule rule;
  call c = make_call(8, 128, 2, ST_DTYPE_BF16, 1, 16);
  assert_string_equal(choose_ok(&t, &f, &c, &rule), "h4");
  assert_int_equal(rule, ST_DISPATCH_NEAREST);
  /* topk 32 against 20 (0.68), with a capacity that holds 20 */
  st_dispatch_winner k32 = make_winner("k32", 8, 2, 1);
  assert_int_equal(st_params_set_int(&k32.fields, "topk", 32, NULL), ST_OK);
  k32.v = make_variant("k32", ST_DTYPE_BF16, 128, 32, 1);
  st_dispatch_table tk = table_of(&k32, 1, NULL, 0);
  c = make_call(8, 128, 2, ST_DTYPE_BF16, 1, 20);
  assert_string_equal(choose_ok(&tk, &f, &c, &rule), "k32");
  assert_int_equal(rule, ST_DISPATCH_NEAREST);
  /* another dtype is no neighbour at any distance */
  st_dispatch_winner fp8 = make_winner("fp8", 8, 2, 1);
  assert_int_equal(st_params_set(&fp8.fields, "dtype", "fp8", NULL), ST_OK);
  st_dispatch_table tf = table_of(&fp8, 1, NULL, 0);
  st_status st;
  st_err err = {{0}};
  c = make_call(8, 128, 2, ST_DTYPE_BF16, 1, 16);
  choose(&tf, &f, &c, &st, &err, NULL);
  assert_int_equal(st, ST_ERR_NO_VARIANT);
}

static void a_near_winner_no_better_than_the_defaults_follows_them(void **state) {
  (void)state;
  st_dispatch_variant d[] = {make_variant("d16", ST_DTYPE_BF16, 128, 16, 1)};
  st_dispatch_winner w = make_winner("w16", 16, 2, 1); /* distance 1 from B 8 */
  w.median_us = 10.0;
  w.default_us = 10.2; /* the defaults within 5% on its own key */
  st_dispatch_table t = table_of(&w, 1, d, 1);
  fake f = {0};
  st_dispatch_rule rule;
  call c = make_call(8, 128, 2, ST_DTYPE_BF16, 1, 16);
  assert_string_equal(choose_ok(&t, &f, &c, &rule), "d16");
  assert_int_equal(rule, ST_DISPATCH_DEFAULT);
  w.default_us = 11.0; /* 10% better: before the defaults */
  t = table_of(&w, 1, d, 1);
  assert_string_equal(choose_ok(&t, &f, &c, &rule), "w16");
  assert_int_equal(rule, ST_DISPATCH_NEAREST);
  c = make_call(16, 128, 2, ST_DTYPE_BF16, 1, 16); /* its own key: exact, margin or not */
  w.default_us = 10.0;
  t = table_of(&w, 1, d, 1);
  assert_string_equal(choose_ok(&t, &f, &c, &rule), "w16");
  assert_int_equal(rule, ST_DISPATCH_EXACT);
}

/* A default that some key tuned to a win no better than the defaults
 * (so an unsupported nearest winner) keeps its place among the defaults
 * for the call's load: it is not sent to the end behind the general one. */
static void a_default_that_is_also_a_far_winner_keeps_its_place(void **state) {
  (void)state;
  st_dispatch_variant d[] = {make_variant("fast", ST_DTYPE_BF16, 128, 16, 1),
                             make_variant("general", ST_DTYPE_BF16, 128, 16, 1)};
  d[0].load_lo = 0, d[0].load_hi = 1.0; /* "general" has no range: any load */
  st_dispatch_table t = table_of(NULL, 0, d, 2);
  st_dispatch_winner w = make_winner("fast", 16, 2, 1); /* distance 1 from B 8 */
  w.default_us = 10.0;                                  /* the default won its own key */
  t.winners = &w;
  t.n_winners = 1;
  fake f = {0};
  st_dispatch_hooks h = hooks_of(&f);
  h.call_load = 0.5;
  call c = make_call(8, 128, 2, ST_DTYPE_BF16, 1, 16);
  st_dispatch_candidate out[3];
  size_t n = 0;
  st_dispatch_candidates(&t, &c.fields, &c.args, &h, out, &n, NULL);
  assert_int_equal(n, 2);
  assert_string_equal(out[0].v->id, "fast");
  assert_int_equal(out[0].rule, ST_DISPATCH_DEFAULT);
  assert_string_equal(out[1].v->id, "general");
  /* Beyond the radius too. */
  c = make_call(2, 128, 2, ST_DTYPE_BF16, 1, 16);
  st_dispatch_candidates(&t, &c.fields, &c.args, &h, out, &n, NULL);
  assert_int_equal(n, 2);
  assert_string_equal(out[0].v->id, "fast");
  assert_int_equal(out[0].rule, ST_DISPATCH_DEFAULT);
}

/* An op whose winners serve only their own keys (radius 0): a winner one
 * batch doubling away goes after the defaults however much it won; its own
 * key, and a key lacking the call's context field (distance 0), still take
 * it first. */
static void exact_keys_only_puts_the_defaults_before_other_keys(void **state) {
  (void)state;
  st_dispatch_variant d[] = {make_variant("d16", ST_DTYPE_BF16, 128, 16, 1)};
  st_dispatch_winner w = make_winner("w16", 16, 2, 1);
  w.default_us = 20.0; /* twice as fast as the defaults on its own key */
  st_dispatch_table t = table_of(&w, 1, d, 1);
  t.nearest_radius = 0.0;
  fake f = {0};
  st_dispatch_rule rule;
  call c = make_call(8, 128, 2, ST_DTYPE_BF16, 1, 16);
  assert_string_equal(choose_ok(&t, &f, &c, &rule), "d16");
  assert_int_equal(rule, ST_DISPATCH_DEFAULT);
  c = make_call(16, 128, 2, ST_DTYPE_BF16, 1, 16);
  assert_string_equal(choose_ok(&t, &f, &c, &rule), "w16");
  assert_int_equal(rule, ST_DISPATCH_EXACT);
  st_dispatch_winner old = make_winner("old", 16, 2, 1); /* recorded without ctx */
  t = table_of(&old, 1, d, 1);
  t.nearest_radius = 0.0;
  c = call_at(16, 32768);
  assert_string_equal(choose_ok(&t, &f, &c, &rule), "old");
  assert_int_equal(rule, ST_DISPATCH_NEAREST);
  /* With no default that fits, the other key's winner still runs. */
  f.rejected[0] = "d16";
  t = table_of(&w, 1, d, 1);
  t.nearest_radius = 0.0;
  c = make_call(8, 128, 2, ST_DTYPE_BF16, 1, 16);
  assert_string_equal(choose_ok(&t, &f, &c, &rule), "w16");
  assert_int_equal(rule, ST_DISPATCH_NEAREST);
}

static void default_prefers_the_smallest_topk_capacity_that_fits(void **state) {
  (void)state;
  st_dispatch_variant d[] = {
      make_variant("d64", ST_DTYPE_BF16, 128, 64, 1), make_variant("d16", ST_DTYPE_BF16, 128, 16, 1),
      make_variant("d32", ST_DTYPE_BF16, 128, 32, 1), make_variant("d8", ST_DTYPE_BF16, 128, 8, 1),
      make_variant("d4_fp8", ST_DTYPE_FP8_E4M3, 128, 4, 1)};
  st_dispatch_table t = table_of(NULL, 0, d, 5);
  fake f = {0};
  st_dispatch_rule rule;
  call c = make_call(8, 128, 2, ST_DTYPE_BF16, 1, 20);
  assert_string_equal(choose_ok(&t, &f, &c, &rule), "d32");
  assert_int_equal(rule, ST_DISPATCH_DEFAULT);
  c = make_call(8, 128, 2, ST_DTYPE_BF16, 1, 4);
  assert_string_equal(choose_ok(&t, &f, &c, NULL), "d8");
  c = make_call(8, 128, 2, ST_DTYPE_BF16, 1, 64);
  assert_string_equal(choose_ok(&t, &f, &c, NULL), "d64");
}

/* The four defaults of `t`, in the order dispatch lists them for a call
 * of `load` and `qlen`, must be `order`. */
static void expect_order(const st_dispatch_table *t, const call *c, st_dispatch_hooks *h, double load, int qlen,
                         const char *const order[4]) {
  h->call_load = load;
  h->call_qlen = qlen;
  st_dispatch_candidate out[4];
  size_t n = 0;
  st_dispatch_candidates(t, &c->fields, &c->args, h, out, &n, NULL);
  assert_int_equal(n, 4);
  for (size_t j = 0; j < 4; j++)
    if (strcmp(out[j].v->id, order[j]) != 0)
      fail_msg("load %g, qlen %d: candidate %zu is %s, want %s", load, qlen, j, out[j].v->id, order[j]);
}

/* Four defaults in table order: "small" for loads in (0, 0.04], "middle"
 * (0.04, 1], "any" with no range, "large" (1, inf). */
static void load_ranged_defaults(st_dispatch_variant d[4]) {
  static const char *const ids[] = {"small", "middle", "any", "large"};
  for (int i = 0; i < 4; i++) d[i] = make_variant(ids[i], ST_DTYPE_BF16, 128, 16, 1);
  d[0].load_lo = 0, d[0].load_hi = 0.04;
  d[1].load_lo = 0.04, d[1].load_hi = 1.0;
  d[3].load_lo = 1.0, d[3].load_hi = 1e9;
}

/* Defaults meant for the call's load come first, in table order; the rest
 * follow, also in table order; an unknown load (< 0) reorders nothing. */
static void defaults_meant_for_the_calls_load_come_first(void **state) {
  (void)state;
  st_dispatch_variant d[4];
  load_ranged_defaults(d);
  st_dispatch_table t = {.op = ST_OP_INDEX_DECODE, .defaults = d, .n_defaults = 4, .source = "unit.db"};
  call c = make_call(8, 128, 2, ST_DTYPE_BF16, 1, 16);
  fake f = {0};
  st_dispatch_hooks h = hooks_of(&f);
  const struct {
    double load;
    const char *order[4];
  } cases[] = {{0.01, {"small", "any", "middle", "large"}},
               {0.04, {"small", "any", "middle", "large"}}, /* (lo, hi]: 0.04 is small's */
               {0.5, {"middle", "any", "small", "large"}},
               {3.0, {"any", "large", "small", "middle"}},
               {-1, {"small", "middle", "any", "large"}}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    expect_order(&t, &c, &h, cases[i].load, 0, cases[i].order);
  /* A default meant for the load that does not fit is passed over. */
  f.rejected[0] = "middle";
  h.call_load = 0.5;
  st_dispatch_choice ch;
  st_err err = {{0}};
  assert_int_equal(st_dispatch_choose(&t, c.key, &c.fields, &c.args, &h, &ch, &err), ST_OK);
  assert_string_equal(ch.v->id, "any");
}

/* A default may also be meant for some query tokens a request: it goes
 * first only where both the call's load and its qlen are in its ranges;
 * an unknown qlen (0) is in every range. */
static void defaults_meant_for_the_calls_qlen_come_first(void **state) {
  (void)state;
  st_dispatch_variant d[] = {
      make_variant("short", ST_DTYPE_BF16, 128, 16, 1), make_variant("long", ST_DTYPE_BF16, 128, 16, 1),
      make_variant("pvd", ST_DTYPE_BF16, 128, 16, 1), make_variant("any", ST_DTYPE_BF16, 128, 16, 1)};
  d[0].load_lo = 1.4, d[0].load_hi = 1e9, d[0].qlen_lo = 0, d[0].qlen_hi = 2;
  d[1].load_lo = 1.4, d[1].load_hi = 1e9, d[1].qlen_lo = 2, d[1].qlen_hi = 4;
  d[2].load_lo = 1.0, d[2].load_hi = 1.4;
  st_dispatch_table t = {.op = ST_OP_INDEX_DECODE, .defaults = d, .n_defaults = 4, .source = "unit.db"};
  call c = make_call(8, 128, 2, ST_DTYPE_BF16, 1, 16);
  fake f = {0};
  st_dispatch_hooks h = hooks_of(&f);
  const struct {
    double load;
    int qlen;
    const char *order[4];
  } cases[] = {
      {3.0, 1, {"short", "any", "long", "pvd"}}, {3.0, 2, {"short", "any", "long", "pvd"}}, /* (lo, hi]: 2 is short's */
      {3.0, 4, {"long", "any", "short", "pvd"}}, {1.2, 4, {"pvd", "any", "short", "long"}},
      {3.0, 0, {"short", "long", "any", "pvd"}}, {-1, 3, {"long", "pvd", "any", "short"}}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    expect_order(&t, &c, &h, cases[i].load, cases[i].qlen, cases[i].order);
}

/* The op's own hook (st_op_desc.default_meant_for) can take a default
 * out of the front: it follows the defaults meant for the call, still a
 * candidate (chosen where those do not fit), and the hook is asked even
 * where the call has no load or qlen. */
static int not_small(void *ctx, st_op_id op, const st_dispatch_variant *v, const void *args) {
  (void)op, (void)args;
  (*(int *)ctx)++;
  return strcmp(v->id, "small") != 0;
}

static void the_ops_hook_moves_a_default_back(void **state) {
  (void)state;
  st_dispatch_variant d[4];
  load_ranged_defaults(d);
  st_dispatch_table t = {.op = ST_OP_INDEX_DECODE, .defaults = d, .n_defaults = 4, .source = "unit.db"};
  call c = make_call(8, 128, 2, ST_DTYPE_BF16, 1, 16);
  fake f = {0};
  st_dispatch_hooks h = hooks_of(&f);
  int asked = 0;
  h.meant_for = not_small;
  h.meant_ctx = &asked;
  expect_order(&t, &c, &h, 0.01, 0, (const char *const[]){"any", "small", "middle", "large"});
  assert_true(asked > 0);
  expect_order(&t, &c, &h, -1, 0, (const char *const[]){"middle", "any", "large", "small"});
  f.rejected[0] = "any";
  h.call_load = 0.01;
  st_dispatch_choice ch;
  st_err err = {{0}};
  assert_int_equal(st_dispatch_choose(&t, c.key, &c.fields, &c.args, &h, &ch, &err), ST_OK);
  assert_string_equal(ch.v->id, "small");
}

/* A winner more than ST_DISPATCH_NEAREST_RADIUS (log2) from the call
 * yields to the defaults; within it, it goes first. */
static void winners_beyond_the_radius_follow_the_defaults(void **state) {
  (void)state;
  st_dispatch_winner w[] = {winner_at("b32c32k", 32, 32768), winner_at("b8c128k", 8, 131072)};
  st_dispatch_variant d[] = {make_variant("d16", ST_DTYPE_BF16, 128, 16, 1)};
  st_dispatch_table t = table_of(w, 2, d, 1);
  fake f = {0};
  st_dispatch_rule rule;
  call c = call_at(16, 32768); /* 1 from b32c32k: within */
  assert_string_equal(choose_ok(&t, &f, &c, &rule), "b32c32k");
  assert_int_equal(rule, ST_DISPATCH_NEAREST);
  c = call_at(8, 32768); /* 2 from both */
  assert_string_equal(choose_ok(&t, &f, &c, &rule), "d16");
  assert_int_equal(rule, ST_DISPATCH_DEFAULT);
  /* Then the far winners, nearest first (the tie: the larger batch). */
  st_dispatch_hooks h = hooks_of(&f);
  h.call_load = -1;
  st_dispatch_candidate out[3];
  size_t n = 0;
  st_dispatch_candidates(&t, &c.fields, &c.args, &h, out, &n, NULL);
  assert_int_equal(n, 3);
  assert_string_equal(out[0].v->id, "d16");
  assert_string_equal(out[1].v->id, "b32c32k");
  assert_string_equal(out[2].v->id, "b8c128k");
  c = call_at(4, 262144); /* 2 and 6 away: both after the default */
  st_dispatch_candidates(&t, &c.fields, &c.args, &h, out, &n, NULL);
  assert_string_equal(out[0].v->id, "d16");
  assert_string_equal(out[1].v->id, "b8c128k");
  assert_string_equal(out[2].v->id, "b32c32k");
  /* A far winner still runs where no default fits. */
  f.rejected[0] = "d16";
  assert_string_equal(choose_ok(&t, &f, &c, &rule), "b8c128k");
  assert_int_equal(rule, ST_DISPATCH_NEAREST);
}

static void nothing_fits_names_the_shape_and_the_database(void **state) {
  (void)state;
  st_dispatch_winner w[] = {make_winner("w8", 8, 2, 1)};
  st_dispatch_variant d[] = {make_variant("d64", ST_DTYPE_BF16, 128, 64, 1)};
  st_dispatch_table t = table_of(w, 1, d, 1);
  fake f = {0};
  st_status st;
  st_err err = {{0}};
  call c = make_call(8, 64, 2, ST_DTYPE_FP8_E4M3, 1, 40);
  choose(&t, &f, &c, &st, &err, NULL);
  printf("# message: %s\n", err.msg);
  assert_int_equal(st, ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "no compiled index_decode variant for "));
  assert_non_null(strstr(err.msg, "dtype=fp8"));
  assert_non_null(strstr(err.msg, "D=64"));
  assert_non_null(strstr(err.msg, "topk=40"));
  assert_non_null(strstr(err.msg, "in unit.db"));
  assert_non_null(strstr(err.msg, "run sparsetune tune/compile"));
  assert_non_null(strstr(err.msg, "dtype differs"));
  assert_null(strstr(err.msg, "index_decode:")); /* the key's op prefix is not shape */
  assert_int_equal(f.loads, 0);

  st_dispatch_table empty = {.source = "unit.db",
                             .note = "st_open left out 1 recorded variant "
                                     "whose parameters this build cannot read"};
  choose(&empty, &f, &c, &st, &err, NULL);
  assert_int_equal(st, ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "no winner and no default"));
  assert_non_null(strstr(err.msg, "st_open left out 1 recorded variant"));
}

static void winner_with_a_missing_binary_falls_back(void **state) {
  (void)state;
  st_dispatch_winner w[] = {make_winner("w8", 8, 2, 1), make_winner("w16", 16, 2, 1)};
  st_dispatch_variant d[] = {make_variant("d16", ST_DTYPE_BF16, 128, 16, 1)};
  st_dispatch_table t = table_of(w, 2, d, 1);
  call c = make_call(8, 128, 2, ST_DTYPE_BF16, 1, 16);
  st_dispatch_rule rule;

  fake f1 = {.broken = {"w8"}};
  assert_string_equal(choose_ok(&t, &f1, &c, &rule), "w16");
  assert_int_equal(rule, ST_DISPATCH_NEAREST);
  assert_int_equal(f1.loads, 2);

  fake f2 = {.broken = {"w8", "w16"}};
  assert_string_equal(choose_ok(&t, &f2, &c, &rule), "d16");
  assert_int_equal(rule, ST_DISPATCH_DEFAULT);

  fake f3 = {.broken = {"w8", "w16", "d16"}};
  st_status st;
  st_err err = {{0}};
  choose(&t, &f3, &c, &st, &err, NULL);
  assert_int_equal(st, ST_ERR_NO_VARIANT);
  assert_non_null(strstr(err.msg, "3 variants fit but none could be loaded"));
  assert_non_null(strstr(err.msg, "variant d16: source has no binary"));

  /* A driver failure is not the variant's fault: no fallback, its message. */
  fake f4 = {.fatal = "w8"};
  choose(&t, &f4, &c, &st, &err, NULL);
  assert_int_equal(st, ST_ERR_CUDA);
  assert_non_null(strstr(err.msg, "CUDA_ERROR_OUT_OF_MEMORY"));
  assert_int_equal(f4.loads, 1);
}

static void candidates_are_ordered_and_listed_once(void **state) {
  (void)state;
  st_dispatch_winner w[] = {make_winner("w8_old", 8, 2, 1), make_winner("w8_new", 8, 2, 2),
                            make_winner("w32", 32, 2, 1), make_winner("w4", 4, 2, 1), make_winner("d16", 2, 2, 1)};
  st_dispatch_variant d[] = {make_variant("d16", ST_DTYPE_BF16, 128, 16, 1),
                             make_variant("d32", ST_DTYPE_BF16, 128, 32, 1)};
  st_dispatch_table t = table_of(w, 5, d, 2);
  fake f = {0};
  st_dispatch_hooks h = hooks_of(&f);
  call c = make_call(8, 128, 2, ST_DTYPE_BF16, 1, 16);
  st_dispatch_candidate out[7];
  size_t n = 0;
  st_dispatch_candidates(&t, &c.fields, &c.args, &h, out, &n, NULL);
  /* w4 is within the radius, w32 and the winner of B=2 beyond it: after
   * the defaults (d16 listed once, as a default). */
  const char *want[] = {"w8_new", "w8_old", "w4", "d16", "d32", "w32"};
  assert_int_equal(n, 6);
  for (size_t i = 0; i < n; i++) {
    if (strcmp(out[i].v->id, want[i]) != 0) fail_msg("candidate %zu is %s, expected %s", i, out[i].v->id, want[i]);
  }
  assert_int_equal(out[0].rule, ST_DISPATCH_EXACT);
  assert_int_equal(out[2].rule, ST_DISPATCH_NEAREST);
  assert_int_equal(out[3].rule, ST_DISPATCH_DEFAULT); /* d16, also the winner of B=2 */
  assert_int_equal(out[5].rule, ST_DISPATCH_NEAREST);
}

static void memo_answers_a_repeated_call_without_loading(void **state) {
  (void)state;
  st_dispatch_winner w[] = {make_winner("w8", 8, 2, 1)};
  st_dispatch_variant d[] = {make_variant("d16", ST_DTYPE_BF16, 128, 16, 1)};
  st_dispatch_table t = table_of(w, 1, d, 1);
  st_dispatch_memo *memo = calloc(1, sizeof *memo);
  assert_non_null(memo);
  fake f = {0};
  st_dispatch_hooks h = hooks_of(&f);
  call c = make_call(8, 128, 2, ST_DTYPE_BF16, 1, 16);
  st_dispatch_choice ch;
  st_err err = {{0}};
  for (int i = 0; i < 5; i++) {
    assert_int_equal(st_dispatch_resolve(&t, memo, c.key, &c.fields, &c.args, c.args.max_context, 0, &h, &ch, &err),
                     ST_OK);
    assert_string_equal(ch.v->id, "w8");
  }
  assert_int_equal(f.loads, 1);

  /* Another max_context is another entry. */
  c.args.max_context = 8192;
  assert_int_equal(st_dispatch_resolve(&t, memo, c.key, &c.fields, &c.args, c.args.max_context, 0, &h, &ch, &err),
                   ST_OK);
  assert_int_equal(f.loads, 2);

  /* A remembered variant that no longer fits is replaced. */
  f.rejected[0] = "w8";
  assert_int_equal(st_dispatch_resolve(&t, memo, c.key, &c.fields, &c.args, c.args.max_context, 0, &h, &ch, &err),
                   ST_OK);
  assert_string_equal(ch.v->id, "d16");
  assert_int_equal(f.loads, 3);
  assert_int_equal(st_dispatch_resolve(&t, memo, c.key, &c.fields, &c.args, c.args.max_context, 0, &h, &ch, &err),
                   ST_OK);
  assert_int_equal(f.loads, 3);

  /* Another memo tag (a call of the key whose other arguments change what
   * fits, such as its scale mode) is another entry with its own choice: a
   * call where w8 fits gets w8, not the d16 a call of the key where it did
   * not fit was given. */
  c.args.max_context = 16384;
  f.rejected[0] = "w8";
  assert_int_equal(st_dispatch_resolve(&t, memo, c.key, &c.fields, &c.args, c.args.max_context, 1, &h, &ch, &err),
                   ST_OK);
  assert_string_equal(ch.v->id, "d16");
  f.rejected[0] = NULL;
  assert_int_equal(st_dispatch_resolve(&t, memo, c.key, &c.fields, &c.args, c.args.max_context, 2, &h, &ch, &err),
                   ST_OK);
  assert_string_equal(ch.v->id, "w8");
  assert_int_equal(st_dispatch_resolve(&t, memo, c.key, &c.fields, &c.args, c.args.max_context, 1, &h, &ch, &err),
                   ST_OK);
  assert_string_equal(ch.v->id, "d16"); /* still fits: its entry kept */
  assert_null(st_dispatch_memo_find(memo, c.key, c.args.max_context, 3));

  /* Failures are not remembered. */
  call none = make_call(8, 64, 2, ST_DTYPE_BF16, 1, 16);
  assert_int_equal(
      st_dispatch_resolve(&t, memo, none.key, &none.fields, &none.args, none.args.max_context, 0, &h, &ch, &err),
      ST_ERR_NO_VARIANT);
  assert_null(st_dispatch_memo_find(memo, none.key, none.args.max_context, 0));
  free(memo);
}

static void memo_replaces_the_oldest_entry_when_full(void **state) {
  (void)state;
  st_dispatch_memo *memo = calloc(1, sizeof *memo);
  assert_non_null(memo);
  st_dispatch_variant v[ST_DISPATCH_MEMO_SLOTS + 1];
  char key[64];
  for (int i = 0; i <= ST_DISPATCH_MEMO_SLOTS; i++) {
    snprintf(key, sizeof key, "index_decode:B=%d", i);
    st_dispatch_choice ch = {.v = &v[i], .rule = ST_DISPATCH_EXACT, .loaded = &v[i]};
    st_dispatch_memo_put(memo, key, 4096, 0, &ch);
  }
  assert_null(st_dispatch_memo_find(memo, "index_decode:B=0", 4096, 0));
  for (int i = 1; i <= ST_DISPATCH_MEMO_SLOTS; i++) {
    snprintf(key, sizeof key, "index_decode:B=%d", i);
    const st_dispatch_choice *ch = st_dispatch_memo_find(memo, key, 4096, 0);
    assert_non_null(ch);
    assert_ptr_equal(ch->v, &v[i]);
  }
  /* Putting a remembered key again replaces it in place: nothing is evicted. */
  st_dispatch_choice again = {.v = &v[0]};
  st_dispatch_memo_put(memo, "index_decode:B=5", 4096, 0, &again);
  assert_ptr_equal(st_dispatch_memo_find(memo, "index_decode:B=5", 4096, 0)->v, &v[0]);
  assert_non_null(st_dispatch_memo_find(memo, "index_decode:B=1", 4096, 0));
  assert_null(st_dispatch_memo_find(memo, "index_decode:B=5", 2048, 0));
  assert_null(st_dispatch_memo_find(memo, "index_decode:B=5", 4096, 1)); /* another tag */
  free(memo);
}

/* Random tables: the choice equals the brute-force rule. */
static void nearest_batch_matches_brute_force_on_random_tables(void **state) {
  (void)state;
  uint64_t rng = st_test_seed("nearest_batch_matches_brute_force_on_random_tables");
  enum { N = 24 };
  for (int round = 0; round < 500; round++) {
    st_dispatch_winner w[N];
    char ids[N][16];
    int n = (int)st_rand_int(&rng, 1, N);
    for (int i = 0; i < n; i++) {
      snprintf(ids[i], sizeof ids[i], "w%d", i);
      w[i] = make_winner(ids[i], st_rand_int(&rng, 1, 512), st_rand_int(&rng, 0, 3) == 0 ? 4 : 2, i);
    }
    st_dispatch_table t = table_of(w, (size_t)n, NULL, 0);
    long long B = st_rand_int(&rng, 1, 600);
    call c = make_call(B, 128, 2, ST_DTYPE_BF16, 1, 16);

    /* Brute force over the sorted table (newest run first among equals):
     * the least log2 distance, |log2 B'/B| + 1 for H 4 against the call's
     * 2, the larger batch on a tie. */
    const st_dispatch_winner *best = NULL;
    double best_d = 0.0;
    for (int i = 0; i < n; i++) {
      const st_dispatch_winner *x = &t.winners[i];
      const int h4 = st_params_get_int(&x->fields, "H", 4, 4, &(long long){0}, NULL) == ST_OK;
      const double dx = fabs(log2((double)x->batch / (double)B)) + (h4 ? 1.0 : 0.0);
      if (!best || dx < best_d - 1e-9 || (dx <= best_d + 1e-9 && x->batch > best->batch)) {
        best = x;
        best_d = dx;
      }
    }
    fake f = {0};
    st_status st;
    st_err err = {{0}};
    const char *got = choose(&t, &f, &c, &st, &err, NULL);
    if (!best) {
      assert_int_equal(st, ST_ERR_NO_VARIANT);
      continue;
    }
    if (st != ST_OK || strcmp(got, best->v.id) != 0)
      fail_msg("round %d B=%lld: chose '%s' (%s), expected %s (batch %lld)", round, B, got,
               st == ST_OK ? "ok" : err.msg, best->v.id, best->batch);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(exact_winner_is_chosen_when_it_fits),
      cmocka_unit_test(newest_run_wins_among_exact_winners),
      cmocka_unit_test(exact_winner_that_does_not_fit_falls_to_nearest_batch),
      cmocka_unit_test(nearest_batch_is_nearest_in_log2),
      cmocka_unit_test(nearest_shape_adds_the_log2_distances_of_batch_and_context),
      cmocka_unit_test(winners_recorded_without_a_context_match_by_batch),
      cmocka_unit_test(nearest_batch_tie_goes_to_the_larger_batch),
      cmocka_unit_test(nearest_key_may_differ_in_any_number_but_not_in_text),
      cmocka_unit_test(a_near_winner_no_better_than_the_defaults_follows_them),
      cmocka_unit_test(a_default_that_is_also_a_far_winner_keeps_its_place),
      cmocka_unit_test(exact_keys_only_puts_the_defaults_before_other_keys),
      cmocka_unit_test(default_prefers_the_smallest_topk_capacity_that_fits),
      cmocka_unit_test(the_ops_hook_moves_a_default_back),
      cmocka_unit_test(defaults_meant_for_the_calls_load_come_first),
      cmocka_unit_test(defaults_meant_for_the_calls_qlen_come_first),
      cmocka_unit_test(winners_beyond_the_radius_follow_the_defaults),
      cmocka_unit_test(nothing_fits_names_the_shape_and_the_database),
      cmocka_unit_test(winner_with_a_missing_binary_falls_back),
      cmocka_unit_test(candidates_are_ordered_and_listed_once),
      cmocka_unit_test(memo_answers_a_repeated_call_without_loading),
      cmocka_unit_test(memo_replaces_the_oldest_entry_when_full),
      cmocka_unit_test(nearest_batch_matches_brute_force_on_random_tables),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
