/* last_error.c - st_last_error and st_last_variant: per thread, per handle.
 *
 * Each thread keeps one record of its last failure on a handle (the handle's
 * address and serial, so a handle later allocated at the same address does
 * not inherit it), one of its last failure without a handle (st_open, or a
 * call given a NULL handle), and one of its last launched variant. A failure
 * on another handle replaces the record: st_last_error(h) is "" then. */
#include <stdio.h>
#include <string.h>

#include "handle.h"

typedef struct error_record {
  const st_handle *h;
  uint64_t serial;
  char msg[ST_ERR_MSG_MAX];
} error_record;

typedef struct variant_record {
  const st_handle *h;
  uint64_t serial;
  const st_dispatch_variant *v;
  char text[sizeof(((const st_dispatch_variant *)0)->id) + sizeof(((const st_dispatch_variant *)0)->name) + 1];
} variant_record;

static _Thread_local error_record t_handle_error;
static _Thread_local char t_open_error[ST_ERR_MSG_MAX];
static _Thread_local variant_record t_variant;

st_status st_api_fail(const st_handle *h, st_status status, const st_err *err) {
  const char *msg = err && err->msg[0] ? err->msg : st_status_name(status);
  if (!h) {
    snprintf(t_open_error, sizeof t_open_error, "%s", msg);
    return status;
  }
  t_handle_error.h = h;
  t_handle_error.serial = h->serial;
  snprintf(t_handle_error.msg, sizeof t_handle_error.msg, "%s", msg);
  return status;
}

void st_api_set_variant(const st_handle *h, const st_dispatch_variant *v) {
  t_variant.h = h;
  t_variant.serial = h->serial;
  t_variant.v = v;
}

void st_api_forget(const st_handle *h) {
  if (t_handle_error.h == h) memset(&t_handle_error, 0, sizeof t_handle_error);
  if (t_variant.h == h) memset(&t_variant, 0, sizeof t_variant);
}

const char *st_last_error(const st_handle *handle) {
  if (!handle) return t_open_error;
  if (t_handle_error.h != handle || t_handle_error.serial != handle->serial) return "";
  return t_handle_error.msg;
}

const char *st_last_variant(const st_handle *handle) {
  if (!handle || t_variant.h != handle || t_variant.serial != handle->serial || !t_variant.v) return "";
  snprintf(t_variant.text, sizeof t_variant.text, "%s %s", t_variant.v->id, t_variant.v->name);
  return t_variant.text;
}
