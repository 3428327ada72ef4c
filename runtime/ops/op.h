/* ops/op.h - what the runtime knows of an op: one descriptor per op.
 *
 * The handle (reading recorded variants), dispatch (does a variant fit a
 * call) and the public entry points (api.c: validate, choose, plan, launch)
 * are written once against this descriptor. Each op defines its own,
 * st_<name>_op, beside its launcher in ops/<name>.c, and joins the list in
 * ops/op_list.h. Every function takes the op's own types behind the void
 * pointers: `args` is an st_<name>_args, `plan` the op's member of
 * st_op_plan, `cfg` its member of st_variant_config. */
#ifndef ST_OPS_OP_H
#define ST_OPS_OP_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_driver.h"
#include "error.h"
#include "ops/op_list.h"
#include "ops/side_stream.h"
#include "params.h"

#define ST_OP_ID(name, NAME) ST_OP_##NAME,
typedef enum st_op_id { ST_OP_LIST(ST_OP_ID) ST_OP_COUNT } st_op_id;
#undef ST_OP_ID

/* A variant's parsed config; which member is live is the op's. */
#define ST_OP_MEMBER(name, NAME) st_##name##_config name;
typedef union st_variant_config {
  ST_OP_LIST(ST_OP_MEMBER)
} st_variant_config;
#undef ST_OP_MEMBER

/* A call's launch plan; which member is live is the op's. */
#define ST_OP_MEMBER(name, NAME) st_##name##_plan name;
typedef union st_op_plan {
  ST_OP_LIST(ST_OP_MEMBER)
} st_op_plan;
#undef ST_OP_MEMBER

/* A call's arguments, for a copy whose pointers are stand-ins. */
#define ST_OP_MEMBER(name, NAME) st_##name##_args name;
typedef union st_op_args {
  ST_OP_LIST(ST_OP_MEMBER)
} st_op_args;
#undef ST_OP_MEMBER

/* What the generic code needs of a plan. */
typedef struct st_plan_info {
  size_t workspace_bytes;
  unsigned smem_bytes, merge_smem_bytes; /* dynamic shared memory per kernel */
  int side_stream;                       /* launches fork onto the handle's side stream */
  int splits; /* the launch's effective split count (an automatic count resolved); 0: the op has none */
} st_plan_info;

/* Stand-in device address for tensor number `i` in the calls that read no
 * pointer (workspace size, prepare): distinct per tensor, far apart,
 * aligned beyond any vector width, so the launchers' NULL and alignment
 * checks pass on the shapes alone. Never dereferenced. */
#define ST_STAND_IN_SPACING ((uintptr_t)1 << 40)
#define ST_STAND_IN(i) ((void *)(((uintptr_t)(i) + 1) * ST_STAND_IN_SPACING))

typedef struct st_op_desc {
  const char *name;         /* "index_decode": generator, database, files */
  const char *main_kernel;  /* the kernels' names in the module            */
  const char *merge_kernel; /* NULL: the op has none                       */
  /* sizeof the kernels' argument block (params/<op>.h) as this library
   * fills it: a module must name it (templates/common/params_gate.cuh). */
  size_t params_bytes;
  /* A recorded variant's parameters into its config, and its rank among
   * the op's defaults (smallest first: the default that fits with the
   * smallest rank is the fallback). ST_ERR_INVALID_ARG naming the
   * parameter this build cannot read. */
  st_status (*parse_config)(const st_params *kernel, const st_params *launch, st_variant_config *cfg, int *rank,
                            st_err *why);
  /* Whether a variant's module must have merge_kernel; NULL: whenever the
   * op has one. */
  int (*needs_merge)(const st_variant_config *cfg);
  /* The op contract (sparsetune.h); device data is not read. */
  st_status (*check_args)(const void *args, st_err *err);
  /* `copy` = `args` with every data pointer a stand-in (NULL stays NULL
   * where NULL means "not wanted"). */
  void (*shape_only)(const void *args, st_op_args *copy);
  /* The call's host-known bound on sequence lengths. */
  int (*max_context)(const void *args);
  /* The call's load on a device of `sm_count` multiprocessors, in the op's
   * own unit, which its defaults' load ranges use (generator/ops/<op>.lua);
   * NULL: the op's defaults have none. */
  double (*load)(const void *args, int sm_count);
  /* The call's query tokens a request, which its defaults' qlen ranges use
   * beside the load; NULL: the op's defaults have none. */
  int (*qlen)(const void *args);
  /* Whether default `cfg`, in its load and qlen ranges, is also meant for
   * the call by what those ranges leave out (sparse_attn_decode: the split
   * count its launcher would pick); a default that is not stays a
   * candidate, after those that are. NULL: every default is. */
  int (*default_meant_for)(const st_variant_config *cfg, const void *args, int sm_count);
  /* Run-time properties of a call that its dispatch key leaves out but
   * that change which variants fit (a scale mode, views the copy engine
   * cannot address): calls of one key with other tags are memoized apart,
   * each with its own choice. NULL: none. */
  uint32_t (*memo_tag)(const void *args);
  /* The dispatch key ("index_decode:B=8,...") and its fields. */
  st_status (*dispatch_key)(const void *args, char *key, size_t cap, st_params *fields, st_err *err);
  /* Whether the variant runs the (valid) call on a device of `sm_count`
   * multiprocessors, and its plan there: ST_ERR_NO_VARIANT with the reason
   * when it does not fit. */
  st_status (*plan)(const st_variant_config *cfg, const void *args, int sm_count, st_op_plan *plan, st_plan_info *info,
                    st_err *err);
  /* Launches a plan (`side`: the handle's side stream, when info said so). */
  st_status (*launch)(const st_cu *cu, CUfunction main_fn, CUfunction merge_fn, const st_op_plan *plan, void *workspace,
                      size_t workspace_bytes, CUstream stream, st_side_stream *side, st_err *err);
  /* 1: a winner serves only calls of its own dispatch key; the built-in
   * choice goes before the winners of other keys (measured on held-out
   * shapes, docs/method.md "How winners are picked"). 0: winners of keys
   * within ST_DISPATCH_NEAREST_RADIUS go first. */
  int exact_keys_only;
} st_op_desc;

/* The descriptor functions every op has alike: its launcher's typed
 * check_args and dispatch_key behind void pointers, and its max_context
 * field. An op's file expands it once and names these in its descriptor. */
#define ST_OP_TYPED_ADAPTERS(name)                                                                                     \
  static st_status check_args(const void *args, st_err *err) { return st_##name##_check_args(args, err); }             \
  static int max_context(const void *args) { return ((const st_##name##_args *)args)->max_context; }                   \
  static st_status dispatch_key(const void *args, char *key, size_t cap, st_params *fields, st_err *err) {             \
    return st_##name##_dispatch_key(args, key, cap, fields, err);                                                      \
  }

#define ST_OP_DESC(name, NAME) extern const st_op_desc st_##name##_op;
ST_OP_LIST(ST_OP_DESC)
#undef ST_OP_DESC

/* The descriptor of `op`, NULL for an id out of range. */
const st_op_desc *st_op_desc_of(st_op_id op);

/* "index_decode", ...; "?" for an id out of range. */
const char *st_op_name(st_op_id op);

#endif
