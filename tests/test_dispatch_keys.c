/* test_dispatch_keys.c - the runtime dispatches every suite shape under the
 * generator's key.
 *
 * A dispatch key is written twice: by the generator (DISPATCH_FIELDS in
 * generator/ops/<op>.lua), which the tuner records winners under, and by
 * the launcher (st_<op>_dispatch_key), which a call looks them up by. A
 * difference sends every such call to the nearest or the default variant,
 * silently. For every op of the list, every suite of the generator and
 * every shape of the op in it, the arguments the runtime is called with
 * (the harness's dispatch_args) must pass the op's check_args and give the
 * generator's key, as text and as the fields dispatch matches winners on. No
 * GPU: the arguments' pointers are stand-ins. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generator.h"
#include "op_harness.h"
#include "ops/op.h"
#include "ops/tensor_check.h"
#include "testutil.h"

#define GEN_DIR ST_SOURCE_DIR "/generator"

/* Room for a message naming op, suite, shape and both keys. */
#define WHY_CAP 2048

static st_gen *open_gen(void) {
  st_gen *g = NULL;
  st_err err = {{0}};
  const st_status s = st_gen_open(GEN_DIR, NULL, &g, &err);
  if (s != ST_OK) print_error("st_gen_open: %s\n", err.msg);
  assert_int_equal(s, ST_OK);
  return g;
}

/* The shapes of `op` in `suite` (*shapes malloc'ed). */
static int load_shapes(st_gen *g, const char *suite, const char *op, st_shape **shapes) {
  st_err err = {{0}};
  int n = 0;
  const st_status s = st_gen_suite(g, suite, op, shapes, &n, &err);
  if (s != ST_OK) print_error("st_gen_suite(%s, %s): %s\n", suite, op, err.msg);
  assert_int_equal(s, ST_OK);
  return n;
}

/* "k=v,..." of `ps` in their order, for messages. */
static void fields_text(const st_params *ps, char *out, size_t cap) {
  out[0] = '\0';
  for (int i = 0; i < ps->n; i++) {
    const size_t used = strlen(out);
    snprintf(out + used, cap - used, "%s%s=%s", i ? "," : "", ps->p[i].key, ps->p[i].val);
  }
}

/* Whether `fields` are the fields of the generator's key `want` (same
 * names, same values, none more): the winners' recorded fields are parsed
 * from that key, and dispatch matches a call's fields against them. */
static int same_fields(const st_params *fields, const char *want) {
  st_params parsed;
  st_err err = {{0}};
  if (st_params_parse_key(want, &parsed, &err) != ST_OK || parsed.n != fields->n) return 0;
  for (int i = 0; i < fields->n; i++) {
    const char *v = st_params_get(&parsed, fields->p[i].key);
    if (!v || strcmp(v, fields->p[i].val) != 0) return 0;
  }
  return 1;
}

/* 0 when the runtime's key `key` and its `fields` are the generator's key
 * of shape `s` (of suite `suite`); else 1 with `why` naming the op, the
 * suite, the shape and both keys. */
static int runtime_key_differs(const char *op, const char *suite, const st_shape *s, const char *key,
                               const st_params *fields, char *why, size_t cap) {
  if (strcmp(key, s->dispatch_key) != 0) {
    snprintf(why, cap,
             "%s, suite %s, shape %s:\n  the generator's dispatch key: %s\n  the runtime's dispatch key:   %s", op,
             suite, s->key, s->dispatch_key, key);
    return 1;
  }
  if (same_fields(fields, s->dispatch_key)) return 0;
  char text[ST_PARAMS_MAX * (ST_PARAM_KEY_MAX + ST_PARAM_VAL_MAX)];
  fields_text(fields, text, sizeof text);
  snprintf(why, cap,
           "%s, suite %s, shape %s:\n  the generator's dispatch key: %s\n  the runtime's key fields:     %s "
           "(its key text agrees)",
           op, suite, s->key, s->dispatch_key, text);
  return 1;
}

/* The comparison of one shape: 0 when `args` pass the op's check_args and
 * the op's dispatch_key of them is the generator's key of `s`; else 1 with
 * `why` naming the op, the suite, the shape and what differs. */
static int shape_key_differs(const st_op_desc *d, const void *args, const char *suite, const st_shape *s, char *why,
                             size_t cap) {
  st_err err = {{0}};
  if (d->check_args(args, &err) != ST_OK) {
    snprintf(why, cap, "%s, suite %s, shape %s: check_args refuses its arguments: %s", d->name, suite, s->key, err.msg);
    return 1;
  }
  char key[sizeof s->dispatch_key];
  st_params fields = {0};
  if (d->dispatch_key(args, key, sizeof key, &fields, &err) != ST_OK) {
    snprintf(why, cap, "%s, suite %s, shape %s: the runtime's dispatch key cannot be made: %s", d->name, suite, s->key,
             err.msg);
    return 1;
  }
  return runtime_key_differs(d->name, suite, s, key, &fields, why, cap);
}

/* The runtime's arguments for `s` (the harness's dispatch_args) into *args;
 * 0, or 1 with `why` when the harness cannot make them. */
static int shape_args(const st_op_harness *h, const char *suite, const st_shape *s, st_op_args *args, char *why,
                      size_t cap) {
  st_err err = {{0}};
  memset(args, 0, sizeof *args);
  if (h->dispatch_args(&s->params, args, &err) != ST_OK) {
    snprintf(why, cap, "%s, suite %s, shape %s: dispatch_args: %s", h->op, suite, s->key, err.msg);
    return 1;
  }
  size_t struct_size; /* every st_<op>_args begins with it: set up by st_<op>_args_init */
  memcpy(&struct_size, args, sizeof struct_size);
  if (struct_size != 0) return 0;
  snprintf(why, cap, "%s, suite %s, shape %s: dispatch_args left struct_size 0 (no st_%s_args_init)", h->op, suite,
           s->key, h->op);
  return 1;
}

/* Compares every shape of op `d` in `suite`; returns how many were compared
 * and adds the differences (each printed) to *differences. */
static int compare_suite(st_gen *g, const st_op_desc *d, const st_op_harness *h, const char *suite, int *differences) {
  st_shape *shapes = NULL;
  const int n = load_shapes(g, suite, d->name, &shapes);
  for (int i = 0; i < n; i++) {
    char why[WHY_CAP];
    st_op_args args;
    if (shape_args(h, suite, &shapes[i], &args, why, sizeof why) ||
        shape_key_differs(d, &args, suite, &shapes[i], why, sizeof why)) {
      print_error("%s\n", why);
      (*differences)++;
    }
  }
  free(shapes);
  return n;
}

static void test_every_suite_shape_gets_the_generators_dispatch_key(void **state) {
  (void)state;
  st_gen *g = open_gen();
  const char **suites = NULL;
  int n_suites = 0;
  st_err err = {{0}};
  assert_int_equal(st_gen_suites(g, &suites, &n_suites, &err), ST_OK);
  int differences = 0, shapeless = 0, total = 0;
  for (int id = 0; id < ST_OP_COUNT; id++) {
    const st_op_desc *d = st_op_desc_of((st_op_id)id);
    const st_op_harness *h = st_harness_find(d->name);
    assert_non_null(h);
    assert_non_null(h->dispatch_args);
    int compared = 0;
    for (int i = 0; i < n_suites; i++) {
      const int n = compare_suite(g, d, h, suites[i], &differences);
      print_message("%-20s %-12s %3d shapes compared\n", d->name, suites[i], n);
      compared += n;
    }
    if (compared == 0) {
      print_error("%s has no shape in any suite: nothing checks its dispatch key\n", d->name);
      shapeless++;
    }
    total += compared;
  }
  st_gen_close(g);
  if (differences)
    print_error("%d of %d suite shapes: the runtime's dispatch key is not the generator's (above)\n", differences,
                total);
  assert_int_equal(differences, 0);
  assert_int_equal(shapeless, 0);
}

/* The first shape of op `d` in the smoke suite and its arguments, whose
 * keys agree. */
static void smoke_shape(st_gen *g, const st_op_desc *d, st_shape **shapes, st_op_args *args) {
  assert_true(load_shapes(g, "smoke", d->name, shapes) >= 1);
  char why[WHY_CAP];
  const int failed = shape_args(st_harness_find(d->name), "smoke", &(*shapes)[0], args, why, sizeof why) ||
                     shape_key_differs(d, args, "smoke", &(*shapes)[0], why, sizeof why);
  if (failed) print_error("%s\n", why);
  assert_false(failed);
}

static void assert_names_both_keys(const char *why, const st_shape *s, const char *runtime_part) {
  print_message("reported as expected:\n%s\n", why);
  assert_non_null(strstr(why, "index_prefill, suite smoke, shape "));
  assert_non_null(strstr(why, s->key));
  assert_non_null(strstr(why, s->dispatch_key));
  assert_non_null(strstr(why, runtime_part));
}

/* The runtime side drifts (a call whose topk is one more): the comparison
 * the suites go through reports it, with both keys. */
static void test_a_runtime_key_that_drifts_is_reported(void **state) {
  (void)state;
  st_gen *g = open_gen();
  const st_op_desc *d = st_op_desc_of(ST_OP_INDEX_PREFILL);
  st_shape *shapes = NULL;
  st_op_args args;
  smoke_shape(g, d, &shapes, &args);
  st_index_prefill_args *a = &args.index_prefill;
  a->topk++; /* with its output grown to match: a valid call, whose key alone differs */
  st_tensor_contiguous(&a->topk_idx, a->topk_idx.data, ST_DTYPE_INT32, 3,
                       (int64_t[]){a->topk_idx.shape[0], a->topk_idx.shape[1], a->topk});
  char why[WHY_CAP], drifted[32];
  assert_int_equal(shape_key_differs(d, &args, "smoke", &shapes[0], why, sizeof why), 1);
  snprintf(drifted, sizeof drifted, "topk=%d", a->topk);
  assert_names_both_keys(why, &shapes[0], drifted);
  free(shapes);
  st_gen_close(g);
}

/* The key text agrees but a field the runtime matches winners on is
 * misnamed: reported too. */
static void test_runtime_key_fields_that_drift_are_reported(void **state) {
  (void)state;
  st_gen *g = open_gen();
  const st_op_desc *d = st_op_desc_of(ST_OP_INDEX_PREFILL);
  st_shape *shapes = NULL;
  st_op_args args;
  smoke_shape(g, d, &shapes, &args);
  char key[sizeof shapes[0].dispatch_key], why[WHY_CAP];
  st_params fields = {0};
  st_err err = {{0}};
  assert_int_equal(d->dispatch_key(&args, key, sizeof key, &fields, &err), ST_OK);
  assert_int_equal(runtime_key_differs(d->name, "smoke", &shapes[0], key, &fields, why, sizeof why), 0);
  int renamed = 0;
  for (int i = 0; i < fields.n; i++)
    if (strcmp(fields.p[i].key, "topk") == 0) renamed = snprintf(fields.p[i].key, sizeof fields.p[i].key, "top_k");
  assert_true(renamed > 0);
  assert_int_equal(runtime_key_differs(d->name, "smoke", &shapes[0], key, &fields, why, sizeof why), 1);
  assert_names_both_keys(why, &shapes[0], "top_k=");
  free(shapes);
  st_gen_close(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_suite_shape_gets_the_generators_dispatch_key),
      cmocka_unit_test(test_a_runtime_key_that_drifts_is_reported),
      cmocka_unit_test(test_runtime_key_fields_that_drift_are_reported),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
