/* test_builtin_variants.c - the runtime's built-in variants are the
 * generator's defaults: same names, parameters, sources (by hash) and ids,
 * for every op; and their sources compile where NVRTC is present. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "generator.h"
#include "identity.h"
#include "testutil.h"

/* The generator's defaults of `op`, by id. */
static const st_gen_variant *find_default(const st_gen_variant *v, int n, const char *id) {
  for (int i = 0; i < n; i++)
    if (v[i].row.is_default && strcmp(v[i].row.id, id) == 0) return &v[i];
  return NULL;
}

static void every_op_has_the_generators_defaults(void **state) {
  (void)state;
  st_gen *g = NULL;
  st_err err = {{0}};
  assert_int_equal(st_gen_open(NULL, NULL, &g, &err), ST_OK);
  int total = 0;
  for (int op = 0; op < ST_OP_COUNT; op++) {
    const char *name = st_op_name((st_op_id)op);
    st_gen_variant *gv = NULL;
    int ng = 0;
    assert_int_equal(st_gen_variants(g, name, NULL, 0, &gv, &ng, &err), ST_OK);
    st_dispatch_variant *bv = NULL;
    size_t nb = 0;
    assert_int_equal(st_builtin_variants((st_op_id)op, &bv, &nb, &err), ST_OK);
    int ndefaults = 0;
    for (int i = 0; i < ng; i++) ndefaults += gv[i].row.is_default;
    printf("# %s: %zu built-in variants, %d generator defaults\n", name, nb, ndefaults);
    assert_true(nb > 0);
    assert_int_equal((int)nb, ndefaults);
    for (size_t i = 0; i < nb; i++) {
      const st_gen_variant *d = find_default(gv, ng, bv[i].id);
      if (!d) fail_msg("%s: built-in %s (id %s) is no generator default", name, bv[i].name, bv[i].id);
      assert_string_equal(bv[i].name, d->row.name);
      assert_string_equal(bv[i].source_hash, d->row.source_hash);
      assert_int_equal(bv[i].builtin > 0, 1);
      /* The text itself, not only its hash. */
      char *text = NULL;
      size_t len = 0;
      assert_int_equal(st_builtin_source(&bv[i], &text, &len, &err), ST_OK);
      assert_int_equal(len, strlen(d->source));
      assert_memory_equal(text, d->source, len);
      free(text);
      /* Dispatch order: rank never decreases. */
      if (i > 0) assert_true(bv[i - 1].rank <= bv[i].rank);
    }
    total += (int)nb;
    free(bv);
    st_gen_free_variants(gv, ng);
  }
  printf("# %d built-in variants in all\n", total);
  st_gen_close(g);
}

static void a_recorded_variant_has_no_builtin_source(void **state) {
  (void)state;
  st_dispatch_variant v;
  memset(&v, 0, sizeof v);
  snprintf(v.name, sizeof v.name, "index_decode.recorded");
  char *text = NULL;
  size_t len = 0;
  st_err err = {{0}};
  assert_int_equal(st_builtin_source(&v, &text, &len, &err), ST_ERR_INVALID_ARG);
  assert_null(text);
  assert_non_null(strstr(err.msg, "not built in"));
  v.builtin = 1 << 30;
  assert_int_equal(st_builtin_source(&v, &text, &len, &err), ST_ERR_INVALID_ARG);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_op_has_the_generators_defaults),
      cmocka_unit_test(a_recorded_variant_has_no_builtin_source),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
