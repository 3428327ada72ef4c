/* api_sparse_attn.c - the public st_sparse_attn* entry points (prefill).
 *
 * As the decode entry points: validate, build the dispatch key (total_q is
 * its batch field), resolve it through the handle's memo, plan in host
 * arithmetic and launch outside the handle's lock. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "api_common.h"
#include "module_cache.h"
#include "ops/sparse_attn.h"

static void shape_only(const st_sparse_attn_args *a, st_sparse_attn_args *copy) {
  *copy = *a;
  st_tensor *t[] = {&copy->q,        &copy->k_cache,     &copy->v_cache,  &copy->k_scales, &copy->v_scales,
                    &copy->topk_idx, &copy->block_table, &copy->seq_lens, &copy->o,        &copy->cu_seqlens_q};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) t[i]->data = ST_STAND_IN(i);
  if (a->lse.data) copy->lse.data = ST_STAND_IN(sizeof t / sizeof t[0]); /* NULL: not wanted, stays NULL */
}

static st_status resolve(st_handle *h, const st_sparse_attn_args *a, st_dispatch_choice *choice,
                         st_sparse_attn_plan *plan, st_err *err) {
  char key[ST_DISPATCH_KEY_MAX];
  st_params fields;
  fields.n = 0;
  st_status st = st_sparse_attn_dispatch_key(a, key, sizeof key, &fields, err);
  if (st == ST_OK) st = st_api_resolve(h, ST_OP_SPARSE_ATTN, key, &fields, a, a->max_context, choice, err);
  if (st == ST_OK) st = st_sparse_attn_plan_make(&choice->v->cfg.sparse_attn, a, h->dev.sm_count, plan, err);
  if (st == ST_OK) st = st_api_reserve_smem(h, choice, plan->smem_bytes, 0, err);
  return st;
}

static st_status resolve_shape(st_handle *h, const st_sparse_attn_args *args, st_sparse_attn_plan *plan, st_err *err) {
  if (!args) return st_fail(err, ST_ERR_INVALID_ARG, "args is NULL");
  st_sparse_attn_args a;
  shape_only(args, &a);
  st_status st = st_sparse_attn_check_args(&a, err);
  if (st != ST_OK) return st;
  st_dispatch_choice choice;
  return resolve(h, &a, &choice, plan, err);
}

st_status st_sparse_attn_workspace_size(st_handle *handle, const st_sparse_attn_args *args, size_t *bytes) {
  st_err err = {{0}};
  if (!handle) return st_api_fail(NULL, st_fail(&err, ST_ERR_INVALID_ARG, "handle is NULL"), &err);
  if (!bytes) return st_api_fail(handle, st_fail(&err, ST_ERR_INVALID_ARG, "bytes is NULL"), &err);
  *bytes = 0;
  st_sparse_attn_plan plan;
  st_status st = resolve_shape(handle, args, &plan, &err);
  if (st != ST_OK) return st_api_fail(handle, st, &err);
  *bytes = plan.workspace_bytes;
  return ST_OK;
}

/* The handle's side stream, made if it is not yet; the caller holds
 * side_lock with the handle's context current. */
static st_status side_stream(st_handle *h, st_err *err) {
  return h->side.stream ? ST_OK : st_side_stream_create(h->cu, &h->side, err);
}

st_status st_sparse_attn_prepare(st_handle *handle, const st_sparse_attn_args *args) {
  st_err err = {{0}};
  if (!handle) return st_api_fail(NULL, st_fail(&err, ST_ERR_INVALID_ARG, "handle is NULL"), &err);
  st_sparse_attn_plan plan;
  st_status st = resolve_shape(handle, args, &plan, &err);
  /* Overlapped chunks: the side stream now, not at the first launch (which
   * may be inside a graph capture). */
  if (st == ST_OK && plan.overlap && (st = st_api_push_ctx(handle, &err)) == ST_OK) {
    pthread_mutex_lock(&handle->side_lock);
    st = side_stream(handle, &err);
    pthread_mutex_unlock(&handle->side_lock);
    st_api_pop_ctx(handle);
  }
  return st == ST_OK ? ST_OK : st_api_fail(handle, st, &err);
}

static st_status launch(st_handle *h, const st_dispatch_choice *choice, const st_sparse_attn_plan *plan,
                        void *workspace, size_t workspace_bytes, void *stream, st_err *err) {
  st_status st = st_api_push_ctx(h, err);
  if (st != ST_OK) return st;
  const st_module *m = choice->loaded;
  if (!plan->overlap) {
    st = st_sparse_attn_launch(h->cu, m->main_fn, m->merge_fn, plan, workspace, workspace_bytes, (CUstream)stream, NULL,
                               err);
  } else { /* the handle's side stream, one launch at a time (handle.h) */
    pthread_mutex_lock(&h->side_lock);
    st = side_stream(h, err);
    if (st == ST_OK)
      st = st_sparse_attn_launch(h->cu, m->main_fn, m->merge_fn, plan, workspace, workspace_bytes, (CUstream)stream,
                                 &h->side, err);
    pthread_mutex_unlock(&h->side_lock);
  }
  st_api_pop_ctx(h);
  return st;
}

st_status st_sparse_attn(st_handle *handle, const st_sparse_attn_args *args, void *workspace, size_t workspace_bytes,
                         void *stream) {
  st_err err;
  err.msg[0] = '\0';
  if (!handle) return st_api_fail(NULL, st_fail(&err, ST_ERR_INVALID_ARG, "handle is NULL"), &err);
  if (!args) return st_api_fail(handle, st_fail(&err, ST_ERR_INVALID_ARG, "args is NULL"), &err);
  st_status st = st_sparse_attn_check_args(args, &err);
  if (st != ST_OK) return st_api_fail(handle, st, &err);
  st_dispatch_choice choice;
  st_sparse_attn_plan plan;
  if ((st = resolve(handle, args, &choice, &plan, &err)) != ST_OK ||
      (st = st_api_check_workspace(plan.workspace_bytes, choice.v, workspace, workspace_bytes,
                                   "st_sparse_attn_workspace_size", &err)) != ST_OK ||
      (st = launch(handle, &choice, &plan, workspace, workspace_bytes, stream, &err)) != ST_OK)
    return st_api_fail(handle, st, &err);
  st_api_set_variant(handle, choice.v);
  return ST_OK;
}
