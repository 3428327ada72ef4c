/* api_common.c - helpers of the public st_<op> entry points. */
#include "api_common.h"

#include "module_cache.h"

st_status st_api_check_workspace(size_t need, const st_dispatch_variant *v, const void *workspace,
                                 size_t workspace_bytes, const char *size_fn, st_err *err) {
  if (need == 0) return ST_OK;
  if (!workspace)
    return st_fail(err, ST_ERR_WORKSPACE,
                   "workspace is NULL (workspace_bytes=%zu): variant %s needs "
                   "%zu bytes for this shape (%s)",
                   workspace_bytes, v->name, need, size_fn);
  if (workspace_bytes < need)
    return st_fail(err, ST_ERR_WORKSPACE,
                   "workspace_bytes=%zu is too small: variant %s needs %zu "
                   "bytes for this shape (%s)",
                   workspace_bytes, v->name, need, size_fn);
  return ST_OK;
}

st_status st_api_push_ctx(const st_handle *h, st_err *err) {
  const st_cu *cu = h->cu;
  if (!cu || !h->ctx) return st_fail(err, ST_ERR_NO_DRIVER, "this handle is bound to no CUDA device");
  CUresult rc = cu->cuCtxPushCurrent(h->ctx);
  return rc == CUDA_SUCCESS ? ST_OK : st_cu_fail(cu, rc, "cuCtxPushCurrent", err);
}

void st_api_pop_ctx(const st_handle *h) {
  CUcontext popped = NULL;
  (void)h->cu->cuCtxPopCurrent(&popped); /* cannot fail after a successful push */
}

st_status st_api_resolve(st_handle *h, st_op_id op, const char *key, const st_params *fields, const void *args,
                         int max_context, st_dispatch_choice *choice, st_err *err) {
  const st_dispatch_hooks hooks = {.fit = h->fit, .fit_ctx = h->fit_ctx, .load = h->load, .load_ctx = h->hook_ctx};
  st_op_tables *t = &h->ops[op];
  pthread_mutex_lock(&h->lock);
  st_status st = st_dispatch_resolve(&t->table, &t->memo, key, fields, args, max_context, &hooks, choice, err);
  pthread_mutex_unlock(&h->lock);
  return st;
}

st_status st_api_reserve_smem(st_handle *h, const st_dispatch_choice *choice, unsigned main_bytes, unsigned merge_bytes,
                              st_err *err) {
  if (main_bytes <= ST_DEFAULT_DYNAMIC_SMEM_LIMIT && merge_bytes <= ST_DEFAULT_DYNAMIC_SMEM_LIMIT) return ST_OK;
  pthread_mutex_lock(&h->lock);
  st_status st = h->reserve_smem(h->hook_ctx, choice->loaded, main_bytes, merge_bytes, err);
  pthread_mutex_unlock(&h->lock);
  return st;
}
