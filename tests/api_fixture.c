/* api_fixture.c - a handle without a GPU for the entry points' CPU tests. */
#include "api_fixture.h"

#include <stdlib.h>
#include <string.h>

#include "testutil.h"

void assert_contains(const char *text, const char *part) {
  if (!strstr(text, part)) fail_msg("expected \"%s\" in \"%s\"", part, text);
}

st_status fake_load(void *ctx, st_op_id op, const st_dispatch_variant *v, void **loaded, st_err *err) {
  (void)op;
  (void)v;
  (void)err;
  fake_loader *f = ctx;
  f->loads++;
  *loaded = &f->module;
  return ST_OK;
}

st_status fake_reserve(void *ctx, void *loaded, unsigned main_bytes, unsigned merge_bytes, st_err *err) {
  (void)ctx;
  (void)loaded;
  (void)main_bytes;
  (void)merge_bytes;
  (void)err;
  return ST_OK;
}

st_handle *bare_handle(st_op_id op, const st_dispatch_variant *def, fake_loader *f) {
  st_handle *h = NULL;
  st_err err = {{0}};
  assert_int_equal(st_handle_alloc(&h, &err), ST_OK);
  h->dev.sm_count = 132;
  h->db_path = strdup("unit.db");
  if (def) {
    st_op_tables *t = &h->ops[op];
    t->defaults = malloc(sizeof *def);
    assert_non_null(t->defaults);
    *t->defaults = *def;
    t->n_defaults = 1;
  }
  st_handle_bind_tables(h);
  h->load = fake_load;
  h->reserve_smem = fake_reserve;
  h->hook_ctx = f;
  return h;
}
