/* api_index_decode.c - the public st_index_decode* entry points.
 *
 * Every call validates, builds the dispatch key and resolves it through the
 * handle's memo (a hit costs a string compare and the fit re-check), plans
 * the launch in host arithmetic, and launches outside the handle's lock. The
 * first call of a key may read the database and load a module; later ones
 * allocate nothing and never block on the device, so they can be captured
 * in a CUDA graph. */
#include <stdint.h>
#include <string.h>

#include "handle.h"
#include "ops/index_decode.h"

/* Stand-in device addresses for the calls that read no pointer (workspace
 * size, prepare): distinct per tensor, far apart, aligned beyond any vector
 * width, so the launcher's NULL, alignment and overlap checks pass on the
 * shapes alone. Never dereferenced. */
#define ST_STAND_IN_SPACING ((uintptr_t)1 << 40)

static void shape_only(const st_index_decode_args *a, st_index_decode_args *copy) {
  *copy = *a;
  st_tensor *t[] = {&copy->q, &copy->k_cache, &copy->block_table, &copy->seq_lens, &copy->topk_idx};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) t[i]->data = (void *)((i + 1) * ST_STAND_IN_SPACING);
}

/* Chooses (memoized) and plans the launch of valid arguments. */
static st_status resolve(st_handle *h, const st_index_decode_args *a, st_dispatch_choice *choice,
                         st_index_decode_plan *plan, st_err *err) {
  char key[ST_DISPATCH_KEY_MAX];
  st_params fields;
  fields.n = 0;
  st_status st = st_index_decode_dispatch_key(a, key, sizeof key, &fields, err);
  if (st != ST_OK) return st;

  const st_dispatch_hooks hooks = {.fit = h->fit, .fit_ctx = h->fit_ctx, .load = h->load, .load_ctx = h->hook_ctx};
  pthread_mutex_lock(&h->lock);
  st = st_dispatch_resolve(&h->id_table, &h->id_memo, key, &fields, a, &hooks, choice, err);
  pthread_mutex_unlock(&h->lock);
  if (st != ST_OK) return st;

  st = st_index_decode_plan_make(&choice->v->cfg, a, h->dev.sm_count, plan, err);
  if (st != ST_OK) return st;
  if (plan->smem_bytes <= ST_DEFAULT_DYNAMIC_SMEM_LIMIT && plan->merge_smem_bytes <= ST_DEFAULT_DYNAMIC_SMEM_LIMIT)
    return ST_OK;
  pthread_mutex_lock(&h->lock);
  st = h->reserve_smem(h->hook_ctx, choice->loaded, plan, err);
  pthread_mutex_unlock(&h->lock);
  return st;
}

/* Validation shared by the calls that read no pointer. */
static st_status resolve_shape(st_handle *h, const st_index_decode_args *args, st_index_decode_plan *plan,
                               st_err *err) {
  if (!args) return st_fail(err, ST_ERR_INVALID_ARG, "args is NULL");
  st_index_decode_args a;
  shape_only(args, &a);
  st_status st = st_index_decode_check_args(&a, err);
  if (st != ST_OK) return st;
  st_dispatch_choice choice;
  return resolve(h, &a, &choice, plan, err);
}

st_status st_index_decode_workspace_size(st_handle *handle, const st_index_decode_args *args, size_t *bytes) {
  st_err err = {{0}};
  if (!handle) return st_api_fail(NULL, st_fail(&err, ST_ERR_INVALID_ARG, "handle is NULL"), &err);
  if (!bytes) return st_api_fail(handle, st_fail(&err, ST_ERR_INVALID_ARG, "bytes is NULL"), &err);
  *bytes = 0;
  st_index_decode_plan plan;
  st_status st = resolve_shape(handle, args, &plan, &err);
  if (st != ST_OK) return st_api_fail(handle, st, &err);
  *bytes = plan.workspace_bytes;
  return ST_OK;
}

st_status st_index_decode_prepare(st_handle *handle, const st_index_decode_args *args) {
  st_err err = {{0}};
  if (!handle) return st_api_fail(NULL, st_fail(&err, ST_ERR_INVALID_ARG, "handle is NULL"), &err);
  st_index_decode_plan plan;
  st_status st = resolve_shape(handle, args, &plan, &err);
  return st == ST_OK ? ST_OK : st_api_fail(handle, st, &err);
}

static st_status check_workspace(const st_index_decode_plan *plan, const st_dispatch_variant *v,
                                 const void *workspace, size_t workspace_bytes, st_err *err) {
  if (plan->workspace_bytes == 0) return ST_OK;
  if (!workspace)
    return st_fail(err, ST_ERR_WORKSPACE,
                   "workspace is NULL (workspace_bytes=%zu): variant %s needs %zu bytes for this shape "
                   "(st_index_decode_workspace_size)",
                   workspace_bytes, v->name, plan->workspace_bytes);
  if (workspace_bytes < plan->workspace_bytes)
    return st_fail(err, ST_ERR_WORKSPACE,
                   "workspace_bytes=%zu is too small: variant %s needs %zu bytes for this shape "
                   "(st_index_decode_workspace_size)",
                   workspace_bytes, v->name, plan->workspace_bytes);
  return ST_OK;
}

static st_status launch(st_handle *h, const st_dispatch_choice *choice, const st_index_decode_plan *plan,
                        void *workspace, size_t workspace_bytes, void *stream, st_err *err) {
  const st_cu *cu = h->cu;
  if (!cu || !h->ctx) return st_fail(err, ST_ERR_NO_DRIVER, "this handle is bound to no CUDA device");
  const st_module *m = choice->loaded;
  CUresult rc = cu->cuCtxPushCurrent(h->ctx);
  if (rc != CUDA_SUCCESS) return st_cu_fail(cu, rc, "cuCtxPushCurrent", err);
  st_status st = st_index_decode_launch(cu, m->main_fn, m->merge_fn, plan, workspace, workspace_bytes,
                                        (CUstream)stream, err);
  CUcontext popped = NULL;
  (void)cu->cuCtxPopCurrent(&popped); /* cannot fail after a successful push */
  return st;
}

st_status st_index_decode(st_handle *handle, const st_index_decode_args *args, void *workspace,
                          size_t workspace_bytes, void *stream) {
  st_err err;
  err.msg[0] = '\0'; /* the launch path touches no more than it must */
  if (!handle) return st_api_fail(NULL, st_fail(&err, ST_ERR_INVALID_ARG, "handle is NULL"), &err);
  if (!args) return st_api_fail(handle, st_fail(&err, ST_ERR_INVALID_ARG, "args is NULL"), &err);
  st_status st = st_index_decode_check_args(args, &err);
  if (st != ST_OK) return st_api_fail(handle, st, &err);
  st_dispatch_choice choice;
  st_index_decode_plan plan;
  if ((st = resolve(handle, args, &choice, &plan, &err)) != ST_OK ||
      (st = check_workspace(&plan, choice.v, workspace, workspace_bytes, &err)) != ST_OK ||
      (st = launch(handle, &choice, &plan, workspace, workspace_bytes, stream, &err)) != ST_OK)
    return st_api_fail(handle, st, &err);
  st_api_set_variant(handle, choice.v);
  return ST_OK;
}
