/* api_fixture.h - a handle without a GPU for the public entry points' CPU
 * tests: one default variant per op, a stand-in module loader that counts
 * loads, so calls run through validation, dispatch, plan and workspace
 * checks up to the launch (api_fixture.c). */
#ifndef ST_TEST_API_FIXTURE_H
#define ST_TEST_API_FIXTURE_H

#include "handle.h"

/* A pointer never dereferenced, aligned for every check. */
#define FAKE_PTR(n) ((void *)(uintptr_t)(0x100000000ull * (n)))

typedef struct fake_loader {
  int loads;
  st_module module; /* what a load returns: never launched */
} fake_loader;

/* Fails the test unless `text` contains `part`. */
void assert_contains(const char *text, const char *part);

st_status fake_load(void *ctx, st_op_id op, const st_dispatch_variant *v, void **loaded, st_err *err);
st_status fake_reserve(void *ctx, void *loaded, unsigned main_bytes, unsigned merge_bytes, st_err *err);

/* A handle whose only variant is `def` for `op` (none when def is NULL). */
st_handle *bare_handle(st_op_id op, const st_dispatch_variant *def, fake_loader *f);

#endif
