/* api.c - the public entry points of every op (st_<op>_workspace_size,
 * st_<op>_prepare, st_<op>), written once against the op descriptors
 * (ops/op.h) and made for each op of ops/op_list.h.
 *
 * Every call validates, builds the dispatch key and resolves it through the
 * handle's memo (a hit costs a string compare and the fit re-check), plans
 * the launch in host arithmetic, and launches outside the handle's lock.
 * The first call of a key may read the database and load a module; later
 * ones allocate nothing and never block on the device, so they can be
 * captured in a CUDA graph. The workspace query and prepare read no
 * pointer: they run on a copy of the arguments whose data pointers are
 * stand-ins (ST_STAND_IN). */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "handle.h"
#include "module_cache.h"
#include "ops/op.h"

/* ST_ERR_WORKSPACE unless `workspace` holds the `need` bytes variant `v`
 * needs; `size_fn` names the op's workspace query in the message. */
static st_status check_workspace(size_t need, const st_dispatch_variant *v, const void *workspace,
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

/* Makes the handle's context current (ST_ERR_NO_DRIVER for a handle bound
 * to no device); pop_ctx undoes a successful push. */
static st_status push_ctx(const st_handle *h, st_err *err) {
  const st_cu *cu = h->cu;
  if (!cu || !h->ctx) return st_fail(err, ST_ERR_NO_DRIVER, "this handle is bound to no CUDA device");
  CUresult rc = cu->cuCtxPushCurrent(h->ctx);
  return rc == CUDA_SUCCESS ? ST_OK : st_cu_fail(cu, rc, "cuCtxPushCurrent", err);
}

static void pop_ctx(const st_handle *h) {
  CUcontext popped = NULL;
  (void)h->cu->cuCtxPopCurrent(&popped); /* cannot fail after a successful push */
}

/* Lets the chosen module's kernels use the plan's dynamic shared memory
 * (a driver call only the first time a larger size is needed). */
static st_status reserve_smem(st_handle *h, const st_dispatch_choice *choice, const st_plan_info *info, st_err *err) {
  if (info->smem_bytes <= ST_DEFAULT_DYNAMIC_SMEM_LIMIT && info->merge_smem_bytes <= ST_DEFAULT_DYNAMIC_SMEM_LIMIT)
    return ST_OK;
  pthread_mutex_lock(&h->lock);
  st_status st = h->reserve_smem(h->hook_ctx, choice->loaded, info->smem_bytes, info->merge_smem_bytes, err);
  pthread_mutex_unlock(&h->lock);
  return st;
}

/* Chooses (memoized, under the handle's lock) and plans the launch of
 * valid arguments `a` of `op`. `stream` is the launch's (launch != 0): a
 * built-in variant is not compiled while it is being captured. */
static st_status resolve(st_handle *h, st_op_id op, const void *a, int launch, void *stream, st_dispatch_choice *choice,
                         st_op_plan *plan, st_plan_info *info, st_err *err) {
  const st_op_desc *d = st_op_desc_of(op);
  char key[ST_DISPATCH_KEY_MAX];
  st_params fields;
  fields.n = 0;
  st_status st = d->dispatch_key(a, key, sizeof key, &fields, err);
  if (st == ST_OK) {
    const int sms = h->dev.sm_count > 0 ? h->dev.sm_count : 1;
    st_dispatch_hooks hooks = {.fit = h->fit, .fit_ctx = h->fit_ctx, .load = h->load, .load_ctx = h->hook_ctx};
    st_dispatch_call_hooks(op, a, &sms, &hooks);
    st_op_tables *t = &h->ops[op];
    pthread_mutex_lock(&h->lock);
    h->load_stream = (CUstream)stream;
    h->load_stream_checked = launch;
    st = st_dispatch_resolve(&t->table, &t->memo, key, &fields, a, d->max_context(a), d->memo_tag ? d->memo_tag(a) : 0,
                             &hooks, choice, err);
    pthread_mutex_unlock(&h->lock);
  }
  if (st == ST_OK) st = d->plan(&choice->v->cfg, a, h->dev.sm_count, plan, info, err);
  if (st == ST_OK) st = reserve_smem(h, choice, info, err);
  return st;
}

/* The size each op's argument block has in this library (sparsetune.h:
 * blocks of other sizes are refused). */
#define ST_OP_ARGS_SIZE(name, NAME) [ST_OP_##NAME] = sizeof(st_##name##_args),
static const size_t args_size[ST_OP_COUNT] = {ST_OP_LIST(ST_OP_ARGS_SIZE)};
#undef ST_OP_ARGS_SIZE

/* A block begins with its struct_size (every st_<op>_args does). */
static st_status check_struct_size(st_op_id op, const void *args, st_err *err) {
  size_t size;
  memcpy(&size, args, sizeof size);
  if (size == args_size[op]) return ST_OK;
  const char *name = st_op_name(op);
  if (size == 0)
    return st_fail(err, ST_ERR_INVALID_ARG, "args.struct_size=0: call st_%s_args_init(&args) before filling it in",
                   name);
  return st_fail(err, ST_ERR_INVALID_ARG,
                 "args.struct_size=%zu, but st_%s_args has %zu bytes in this library (version %s): build against "
                 "its sparsetune.h and call st_%s_args_init first",
                 size, name, args_size[op], SPARSETUNE_VERSION_STRING, name);
}

/* Validation and choice for the calls that read no pointer. */
static st_status resolve_shape(st_handle *h, st_op_id op, const void *args, st_op_plan *plan, st_plan_info *info,
                               st_err *err) {
  if (!args) return st_fail(err, ST_ERR_INVALID_ARG, "args is NULL");
  st_status st = check_struct_size(op, args, err);
  if (st != ST_OK) return st;
  const st_op_desc *d = st_op_desc_of(op);
  st_op_args a;
  d->shape_only(args, &a);
  st = d->check_args(&a, err);
  if (st != ST_OK) return st;
  st_dispatch_choice choice;
  return resolve(h, op, &a, 0, NULL, &choice, plan, info, err);
}

static st_status workspace_size(st_handle *handle, st_op_id op, const void *args, size_t *bytes) {
  st_err err = {{0}};
  if (!handle) return st_api_fail(NULL, st_fail(&err, ST_ERR_INVALID_ARG, "handle is NULL"), &err);
  if (!bytes) return st_api_fail(handle, st_fail(&err, ST_ERR_INVALID_ARG, "bytes is NULL"), &err);
  *bytes = 0;
  st_op_plan plan;
  st_plan_info info;
  st_status st = resolve_shape(handle, op, args, &plan, &info, &err);
  if (st != ST_OK) return st_api_fail(handle, st, &err);
  *bytes = info.workspace_bytes;
  return ST_OK;
}

/* The handle's side stream, made if it is not yet; the caller holds
 * side_lock with the handle's context current. */
static st_status side_stream(st_handle *h, st_err *err) {
  return h->side.stream ? ST_OK : st_side_stream_create(h->cu, &h->side, err);
}

static st_status prepare(st_handle *handle, st_op_id op, const void *args) {
  st_err err = {{0}};
  if (!handle) return st_api_fail(NULL, st_fail(&err, ST_ERR_INVALID_ARG, "handle is NULL"), &err);
  st_op_plan plan;
  st_plan_info info;
  st_status st = resolve_shape(handle, op, args, &plan, &info, &err);
  /* A plan that forks onto the side stream: the stream now, not at the
   * first launch (which may be inside a graph capture). */
  if (st == ST_OK && info.side_stream && (st = push_ctx(handle, &err)) == ST_OK) {
    pthread_mutex_lock(&handle->side_lock);
    st = side_stream(handle, &err);
    pthread_mutex_unlock(&handle->side_lock);
    pop_ctx(handle);
  }
  return st == ST_OK ? ST_OK : st_api_fail(handle, st, &err);
}

static st_status launch(st_handle *h, st_op_id op, const st_dispatch_choice *choice, const st_op_plan *plan,
                        const st_plan_info *info, void *workspace, size_t workspace_bytes, void *stream, st_err *err) {
  st_status st = push_ctx(h, err);
  if (st != ST_OK) return st;
  const st_op_desc *d = st_op_desc_of(op);
  const st_module *m = choice->loaded;
  if (!info->side_stream) {
    st = d->launch(h->cu, m->main_fn, m->merge_fn, plan, workspace, workspace_bytes, (CUstream)stream, NULL, err);
  } else { /* the handle's side stream, one launch at a time (handle.h) */
    pthread_mutex_lock(&h->side_lock);
    st = side_stream(h, err);
    if (st == ST_OK)
      st = d->launch(h->cu, m->main_fn, m->merge_fn, plan, workspace, workspace_bytes, (CUstream)stream, &h->side, err);
    pthread_mutex_unlock(&h->side_lock);
  }
  pop_ctx(h);
  return st;
}

static st_status run(st_handle *handle, st_op_id op, const void *args, void *workspace, size_t workspace_bytes,
                     void *stream, const char *size_fn) {
  st_err err;
  err.msg[0] = '\0'; /* the launch path touches no more than it must */
  if (!handle) return st_api_fail(NULL, st_fail(&err, ST_ERR_INVALID_ARG, "handle is NULL"), &err);
  if (!args) return st_api_fail(handle, st_fail(&err, ST_ERR_INVALID_ARG, "args is NULL"), &err);
  st_status st = check_struct_size(op, args, &err);
  if (st == ST_OK) st = st_op_desc_of(op)->check_args(args, &err);
  if (st != ST_OK) return st_api_fail(handle, st, &err);
  st_dispatch_choice choice;
  st_op_plan plan;
  st_plan_info info;
  if ((st = resolve(handle, op, args, 1, stream, &choice, &plan, &info, &err)) != ST_OK ||
      (st = check_workspace(info.workspace_bytes, choice.v, workspace, workspace_bytes, size_fn, &err)) != ST_OK ||
      (st = launch(handle, op, &choice, &plan, &info, workspace, workspace_bytes, stream, &err)) != ST_OK)
    return st_api_fail(handle, st, &err);
  st_api_set_variant(handle, choice.v);
  return ST_OK;
}

/* The four entry points of each op, as sparsetune.h declares them. */
#define ST_API_ENTRY_POINTS(name, NAME)                                                                                \
  void st_##name##_args_init(st_##name##_args *args) {                                                                 \
    if (!args) return;                                                                                                 \
    memset(args, 0, sizeof *args);                                                                                     \
    args->struct_size = sizeof *args;                                                                                  \
  }                                                                                                                    \
  st_status st_##name##_workspace_size(st_handle *handle, const st_##name##_args *args, size_t *bytes) {               \
    return workspace_size(handle, ST_OP_##NAME, args, bytes);                                                          \
  }                                                                                                                    \
  st_status st_##name##_prepare(st_handle *handle, const st_##name##_args *args) {                                     \
    return prepare(handle, ST_OP_##NAME, args);                                                                        \
  }                                                                                                                    \
  st_status st_##name(st_handle *handle, const st_##name##_args *args, void *workspace, size_t workspace_bytes,        \
                      void *stream) {                                                                                  \
    return run(handle, ST_OP_##NAME, args, workspace, workspace_bytes, stream, "st_" #name "_workspace_size");         \
  }

ST_OP_LIST(ST_API_ENTRY_POINTS)
