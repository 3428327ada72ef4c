/* api_common.h - what the public st_<op> entry points share: the workspace
 * check, the stand-in pointers of the calls that read none, and making the
 * handle's context current around a launch. Private to libsparsetune. */
#ifndef ST_API_COMMON_H
#define ST_API_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "handle.h"

/* Stand-in device address for tensor number `i` in the calls that read no
 * pointer (workspace size, prepare): distinct per tensor, far apart,
 * aligned beyond any vector width, so the launchers' NULL and alignment
 * checks pass on the shapes alone. Never dereferenced. */
#define ST_STAND_IN_SPACING ((uintptr_t)1 << 40)
#define ST_STAND_IN(i) ((void *)(((uintptr_t)(i) + 1) * ST_STAND_IN_SPACING))

/* ST_ERR_WORKSPACE unless `workspace` holds the `need` bytes variant `v`
 * needs; `size_fn` names the op's workspace query in the message. */
st_status st_api_check_workspace(size_t need, const st_dispatch_variant *v, const void *workspace,
                                 size_t workspace_bytes, const char *size_fn, st_err *err);

/* Makes the handle's context current (ST_ERR_NO_DRIVER for a handle bound
 * to no device); st_api_pop_ctx undoes a successful push. */
st_status st_api_push_ctx(const st_handle *h, st_err *err);
void st_api_pop_ctx(const st_handle *h);

/* Resolves the variant of `op` for a call (memoized, under the handle's
 * lock): `key` and `fields` are its dispatch key, `args` the op's
 * arguments, `max_context` their host-known bound on sequence lengths. */
st_status st_api_resolve(st_handle *h, st_op_id op, const char *key, const st_params *fields, const void *args,
                         int max_context, st_dispatch_choice *choice, st_err *err);

/* Lets the chosen module's kernels use the plan's dynamic shared memory
 * (a driver call only the first time a larger size is needed). */
st_status st_api_reserve_smem(st_handle *h, const st_dispatch_choice *choice, unsigned main_bytes, unsigned merge_bytes,
                              st_err *err);

#endif
