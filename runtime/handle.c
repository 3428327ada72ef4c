/* handle.c - st_open, st_close, st_workspace_clear: the life of a handle. */
#include "handle.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"

/* Handle serials only need to differ within the process; starting at 1
 * keeps 0 meaning "no handle" in the per-thread records. */
static atomic_uint_fast64_t g_last_serial;

/* ---- recorded variants, through the op's descriptor ---------------------- */

/* Parses a recorded variant's parameters into v->cfg for `op` and sets its
 * rank among defaults. */
static st_status parse_config(st_op_id op, const st_params *kernel, const st_params *launch, st_dispatch_variant *v,
                              st_err *why) {
  const st_op_desc *d = st_op_desc_of(op);
  if (!d) return st_fail(why, ST_ERR_INVALID_ARG, "unknown op %d", (int)op);
  return d->parse_config(kernel, launch, &v->cfg, &v->rank, why);
}

/* ---- default hooks: the launcher's fit check and the module cache ------- */

static st_status builtin_text(const void *ctx, char **text, size_t *len, st_err *err) {
  return st_builtin_source(ctx, text, len, err);
}

static st_status load_from_cache(void *ctx, st_op_id op, const st_dispatch_variant *v, void **loaded, st_err *err) {
  st_handle *h = ctx;
  const st_op_desc *d = st_op_desc_of(op);
  if (!d) return st_fail(err, ST_ERR_INVALID_ARG, "unknown op %d", (int)op);
  const int need_merge = d->merge_kernel && (!d->needs_merge || d->needs_merge(&v->cfg));
  char prepare_fn[64];
  snprintf(prepare_fn, sizeof prepare_fn, "st_%s_prepare", d->name);
  const st_module_source src = {.name = v->name,
                                .text = builtin_text,
                                .ctx = v,
                                .check_capture = h->load_stream_checked,
                                .stream = h->load_stream,
                                .prepare_fn = prepare_fn};
  st_module *m = NULL;
  st_err why;
  st_status st = st_module_cache_get(&h->modules, v->source_hash, d->main_kernel, d->merge_kernel, d->params_bytes, need_merge,
                                     v->builtin ? &src : NULL, &m, &why);
  if (st != ST_OK) return st_fail(err, st, "variant %s (%.12s): %s", v->name, v->id, why.msg);
  *loaded = m;
  return ST_OK;
}

static st_status reserve_smem_in_cache(void *ctx, void *loaded, unsigned main_bytes, unsigned merge_bytes,
                                       st_err *err) {
  st_handle *h = ctx;
  return st_module_reserve_smem(&h->modules, loaded, main_bytes, merge_bytes, err);
}

/* A variant fits when the launcher accepts it for the call and can plan the
 * call on this device (a plan may run out of shared memory, and its split
 * count depends on the multiprocessor count). */
static st_status fit_on_device(void *ctx, st_op_id op, const st_dispatch_variant *v, const void *args, st_err *err) {
  const st_handle *h = ctx;
  const st_op_desc *d = st_op_desc_of(op);
  if (!d) return st_fail(err, ST_ERR_INVALID_ARG, "unknown op %d", (int)op);
  st_op_plan plan;
  st_plan_info info;
  return d->plan(&v->cfg, args, h->dev.sm_count, &plan, &info, err);
}

/* ---- allocation ---------------------------------------------------------- */

void st_handle_bind_tables(st_handle *h) {
  for (int op = 0; op < ST_OP_COUNT; op++) {
    st_op_tables *t = &h->ops[op];
    const st_op_desc *d = st_op_desc_of((st_op_id)op);
    t->table = (st_dispatch_table){
        .op = (st_op_id)op,
        .winners = t->winners,
        .n_winners = t->n_winners,
        .defaults = t->defaults,
        .n_defaults = t->n_defaults,
        .source = h->db_path ? h->db_path : "no database (built-in variants only)",
        .note = t->note.msg[0] ? t->note.msg : NULL,
        .nearest_radius = d && d->exact_keys_only ? 0.0 : ST_DISPATCH_NEAREST_RADIUS,
    };
  }
}

st_status st_handle_alloc(st_handle **out, st_err *err) {
  st_handle *h = calloc(1, sizeof *h);
  if (!h) return st_fail(err, ST_ERR_NOMEM, "out of host memory allocating a handle (%zu bytes)", sizeof *h);
  int rc = pthread_mutex_init(&h->lock, NULL);
  if (rc == 0 && (rc = pthread_mutex_init(&h->side_lock, NULL)) != 0) pthread_mutex_destroy(&h->lock);
  if (rc != 0) {
    free(h);
    return st_fail(err, ST_ERR_NOMEM, "pthread_mutex_init failed (error %d)", rc);
  }
  h->serial = atomic_fetch_add(&g_last_serial, 1) + 1;
  h->fit = fit_on_device;
  h->fit_ctx = h;
  h->load = load_from_cache;
  h->reserve_smem = reserve_smem_in_cache;
  h->hook_ctx = h;
  st_handle_bind_tables(h);
  *out = h;
  return ST_OK;
}

void st_handle_free(st_handle *h) {
  if (!h) return;
  st_module_cache_free(&h->modules); /* before the context goes */
  if (h->side.stream && h->cu->cuCtxPushCurrent(h->ctx) == CUDA_SUCCESS) {
    CUcontext popped = NULL;
    st_side_stream_destroy(h->cu, &h->side);
    (void)h->cu->cuCtxPopCurrent(&popped);
  }
  if (h->ctx) (void)h->cu->cuDevicePrimaryCtxRelease(h->device); /* cannot fail for a retained context */
  if (h->db) st_db_close(h->db);
  for (int op = 0; op < ST_OP_COUNT; op++) {
    free(h->ops[op].winners);
    free(h->ops[op].defaults);
  }
  free(h->db_path);
  pthread_mutex_destroy(&h->side_lock);
  pthread_mutex_destroy(&h->lock);
  free(h);
}

/* ---- st_open steps ---------------------------------------------------------
 */

static st_status open_device(st_handle *h, int ordinal, st_err *err) {
  const st_cu *cu = h->cu;
  st_status st = st_cu_device_info(cu, ordinal, &h->dev, err);
  if (st != ST_OK) return st;
  ST_CU_TRY(cu, cu->cuDeviceGet(&h->device, ordinal), err);
  CUcontext ctx = NULL;
  ST_CU_TRY(cu, cu->cuDevicePrimaryCtxRetain(&ctx, h->device), err);
  h->ctx = ctx;
  return ST_OK;
}

static st_status open_db(st_handle *h, const char *path, st_err *err) {
  if (!(h->db_path = strdup(path))) return st_fail(err, ST_ERR_NOMEM, "out of host memory copying db_path");
  st_status st = st_db_open_readonly(path, &h->db, err);
  if (st != ST_OK) h->db = NULL;
  return st == ST_OK || st == ST_ERR_NOMEM ? st : ST_ERR_DB;
}

/* Recorded variants this build cannot use (their parameters do not parse):
 * they are left out, and a later ST_ERR_NO_VARIANT message says so. */
typedef struct skip_log {
  int n;
  st_err first;
} skip_log;

static void note_skipped(skip_log *log, const char *what, const char *name, const st_err *why) {
  if (log->n++ == 0) st_err_format(&log->first, "%s %s: %s", what, name, why->msg);
}

typedef struct winner_rows {
  const char *op; /* the op whose winners are collected */
  st_winner_row *rows;
  size_t n, cap;
  int out_of_memory;
} winner_rows;

static int collect_winner(void *ctx, const st_winner_row *w) {
  winner_rows *r = ctx;
  if (strcmp(w->op, r->op) != 0) return 0;
  if (r->n == r->cap) {
    size_t cap = r->cap ? 2 * r->cap : 16;
    st_winner_row *grown = realloc(r->rows, cap * sizeof *grown);
    if (!grown) {
      r->out_of_memory = 1;
      return 1; /* stop */
    }
    r->rows = grown;
    r->cap = cap;
  }
  r->rows[r->n++] = *w;
  return 0;
}

/* Turns the collected rows into dispatch winners (variant rows read from the
 * database). A variant this build cannot read the parameters of is left out
 * and noted; a winner naming a variant the database lacks is corruption. */
static st_status build_winners(st_handle *h, st_op_id op, const winner_rows *r, skip_log *skipped, st_err *err) {
  st_op_tables *t = &h->ops[op];
  if (r->n == 0) return ST_OK;
  if (!(t->winners = calloc(r->n, sizeof *t->winners)))
    return st_fail(err, ST_ERR_NOMEM, "out of host memory for %zu winners", r->n);
  for (size_t i = 0; i < r->n; i++) {
    const st_winner_row *row = &r->rows[i];
    st_variant_row vrow;
    st_err why;
    if (st_db_get_variant(h->db, row->variant_id, &vrow, &why) != ST_OK)
      return st_fail(err, ST_ERR_DB, "%s: the winner for %s names variant %s, which cannot be read: %s", h->db_path,
                     row->dispatch_key, row->variant_id, why.msg);
    st_dispatch_winner *w = &t->winners[t->n_winners];
    if (parse_config(op, &vrow.kernel, &vrow.launch, &w->v, &why) != ST_OK) {
      note_skipped(skipped, "variant", vrow.name, &why);
      continue;
    }
    if (row->dispatch.n > 0)
      w->fields = row->dispatch;
    else if (st_params_parse_key(row->dispatch_key, &w->fields, &why) != ST_OK) /* a row without its fields */
      return st_fail(err, ST_ERR_DB, "%s: winner key '%s' cannot be read: %s", h->db_path, row->dispatch_key, why.msg);
    w->batch = st_dispatch_key_int(&w->fields, ST_DISPATCH_BATCH_FIELD);
    w->context = st_dispatch_key_int(&w->fields, ST_DISPATCH_CONTEXT_FIELD);
    w->run_id = row->run_id;
    w->median_us = row->median_us;
    w->default_us = row->default_us;
    snprintf(w->v.id, sizeof w->v.id, "%s", vrow.id);
    snprintf(w->v.name, sizeof w->v.name, "%s", vrow.name);
    snprintf(w->v.source_hash, sizeof w->v.source_hash, "%s", vrow.source_hash);
    t->n_winners++;
  }
  return ST_OK;
}

/* Loads the winners of this device model (when there is a database) and
 * the built-in variants of `op`, which stand in where no winner fits. */
static st_status load_op(st_handle *h, st_op_id op, st_err *err) {
  st_op_tables *t = &h->ops[op];
  skip_log skipped = {0};
  st_status st = ST_OK;
  if (h->db) {
    winner_rows wr = {.op = st_op_name(op)};
    st = st_db_each_winner(h->db, h->dev.name, h->dev.arch, collect_winner, &wr, err);
    if (wr.out_of_memory)
      st = st_fail(err, ST_ERR_NOMEM, "out of host memory reading winners");
    else if (st != ST_OK)
      st = ST_ERR_DB;
    if (st == ST_OK) st = build_winners(h, op, &wr, &skipped, err);
    free(wr.rows);
    if (st != ST_OK) return st;
  }
  if ((st = st_builtin_variants(op, &t->defaults, &t->n_defaults, err)) != ST_OK) return st;

  if (skipped.n > 0)
    st_err_format(&t->note,
                  "st_open left out %d recorded variant%s whose parameters this "
                  "build cannot read, "
                  "the first: %s",
                  skipped.n, skipped.n == 1 ? "" : "s", skipped.first.msg);
  st_dispatch_sort_winners(t->winners, t->n_winners);
  st_handle_bind_tables(h);
  return ST_OK;
}

/* ---- public
 * ------------------------------------------------------------------ */

st_status st_open(const char *db_path, int device_ordinal, st_handle **out) {
  st_err err = {{0}};
  st_handle *h = NULL;
  const st_cu *cu = NULL;
  st_status st;
  if (!out) {
    st = st_fail(&err, ST_ERR_INVALID_ARG, "out is NULL: st_open needs somewhere to store the handle");
    goto cleanup;
  }
  *out = NULL;
  if (db_path && !db_path[0]) {
    st = st_fail(&err, ST_ERR_INVALID_ARG, "db_path is empty (NULL opens no database)");
    goto cleanup;
  }
  if (device_ordinal < 0) {
    st = st_fail(&err, ST_ERR_INVALID_ARG, "device_ordinal=%d is negative", device_ordinal);
    goto cleanup;
  }
  if ((st = st_cu_load(&cu, &err)) != ST_OK) goto cleanup;
  if ((st = st_handle_alloc(&h, &err)) != ST_OK) goto cleanup;
  h->cu = cu;
  if ((st = open_device(h, device_ordinal, &err)) != ST_OK) goto cleanup;
  if (db_path && (st = open_db(h, db_path, &err)) != ST_OK) goto cleanup;
  for (int op = 0; op < ST_OP_COUNT && st == ST_OK; op++) st = load_op(h, (st_op_id)op, &err);
  if (st != ST_OK) goto cleanup;
  st_module_cache_init(&h->modules, cu, h->ctx, h->db, h->dev.arch, h->db_path);
  *out = h;
  return ST_OK;

cleanup:
  st_handle_free(h);
  return st_api_fail(NULL, st, &err);
}

void st_close(st_handle *handle) {
  if (!handle) return;
  st_api_forget(handle);
  st_handle_free(handle);
}

st_status st_workspace_clear(st_handle *handle, void *workspace, size_t bytes, void *stream) {
  st_err err = {{0}};
  if (!handle) return st_api_fail(NULL, st_fail(&err, ST_ERR_INVALID_ARG, "handle is NULL"), &err);
  if (bytes == 0) return ST_OK;
  if (!workspace)
    return st_api_fail(handle, st_fail(&err, ST_ERR_INVALID_ARG, "workspace is NULL (bytes=%zu)", bytes), &err);
  const st_cu *cu = handle->cu;
  if (!cu || !handle->ctx)
    return st_api_fail(handle, st_fail(&err, ST_ERR_NO_DRIVER, "this handle is bound to no CUDA device"), &err);
  CUresult rc = cu->cuCtxPushCurrent(handle->ctx);
  if (rc != CUDA_SUCCESS) return st_api_fail(handle, st_cu_fail(cu, rc, "cuCtxPushCurrent", &err), &err);
  rc = cu->cuMemsetD8Async((CUdeviceptr)(uintptr_t)workspace, 0, bytes, (CUstream)stream);
  CUcontext popped = NULL;
  (void)cu->cuCtxPopCurrent(&popped); /* cannot fail after a successful push */
  if (rc != CUDA_SUCCESS) return st_api_fail(handle, st_cu_fail(cu, rc, "cuMemsetD8Async", &err), &err);
  return ST_OK;
}
