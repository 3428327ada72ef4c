/* test_params_gate.c - every op's module names the argument block the
 * library fills (templates/common/params_gate.cuh): each op's first
 * built-in variant, compiled with NVRTC, holds the kernel
 * st_params_bytes<sizeof> under the name the module cache looks up for the
 * op's params_bytes, and no gate of another size. So the device's layout
 * of each params struct is the host's, and a binary built from other
 * templates is told apart at load. Skips where NVRTC cannot be loaded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "module_cache.h"
#include "nvrtc_loader.h"
#include "ops/op.h"
#include "testutil.h"

#define ARCH "sm_90a"

static int holds(const void *image, size_t size, const char *name) {
  const size_t n = strlen(name) + 1; /* with its NUL: a whole symbol name */
  const char *p = image;
  for (size_t i = 0; i + n <= size; i++)
    if (p[i] == name[0] && memcmp(p + i, name, n) == 0) return 1;
  return 0;
}

static void every_ops_module_names_the_hosts_params_size(void **state) {
  (void)state;
  st_err err = {{0}};
  const st_nvrtc *nvrtc = NULL;
  if (st_nvrtc_load(&nvrtc, &err) != ST_OK) {
    printf("# skipped: %s\n", err.msg);
    skip();
  }
  for (int op = 0; op < ST_OP_COUNT; op++) {
    const st_op_desc *d = st_op_desc_of((st_op_id)op);
    assert_non_null(d);
    assert_true(d->params_bytes > 0);
    st_dispatch_variant *bv = NULL;
    size_t nb = 0;
    assert_int_equal(st_builtin_variants((st_op_id)op, &bv, &nb, &err), ST_OK);
    assert_true(nb > 0);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(st_builtin_source(&bv[0], &text, &len, &err), ST_OK);
    void *cubin = NULL;
    size_t size = 0;
    if (st_nvrtc_compile(nvrtc, text, bv[0].name, ARCH, &cubin, &size, &err) != ST_OK)
      fail_msg("%s: %s", bv[0].name, err.msg);
    char gate[64], other[64], below[64];
    st_params_gate_name(d->params_bytes, gate, sizeof gate);
    st_params_gate_name(d->params_bytes + 8, other, sizeof other);
    st_params_gate_name(d->params_bytes - 8, below, sizeof below);
    printf("# %s: %zu-byte argument block, %s\n", d->name, d->params_bytes, gate);
    if (!holds(cubin, size, gate))
      fail_msg("%s: the module of %s lacks %s: the device's params struct is not the host's %zu bytes", d->name,
               bv[0].name, gate, d->params_bytes);
    assert_false(holds(cubin, size, other));
    assert_false(holds(cubin, size, below));
    free(cubin);
    free(text);
    free(bv);
  }
}

static void the_gate_name_is_the_mangled_template_kernel(void **state) {
  (void)state;
  char name[64];
  st_params_gate_name(1208, name, sizeof name);
  assert_string_equal(name, "_Z15st_params_bytesILy1208EEvv");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_gate_name_is_the_mangled_template_kernel),
      cmocka_unit_test(every_ops_module_names_the_hosts_params_size),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
