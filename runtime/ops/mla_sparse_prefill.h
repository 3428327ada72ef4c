/* ops/mla_sparse_prefill.h - the one launcher of mla_sparse_prefill, used
 * by the tuner and by the runtime, so what was timed is exactly what runs.
 *
 * The kernels are mla_sparse_decode's (templates/common/mla_sparse_attend.cuh)
 * with unpaged kv rows and the max_logits output, so is most of the launch
 * math: a prefill call is planned as a decode batch of one-token requests
 * (qlen 1, a request per query token) over a cache of one-token pages (a
 * page per kv row), through mla_sparse_decode's fit, shared-memory and plan
 * functions, and max_logits added. Its own are the argument checks against
 * its contract (sparsetune.h), the bf16-only variant config and the
 * dispatch key. */
#ifndef ST_OPS_MLA_SPARSE_PREFILL_H
#define ST_OPS_MLA_SPARSE_PREFILL_H

#include <stddef.h>

#include "cuda_driver.h"
#include "error.h"
#include "ops/mla_sparse_decode.h"
#include "params.h"
#include "params/mla_sparse_prefill.h" /* templates/: the kernel argument block */
#include "sparsetune.h"

#define ST_MLA_SPARSE_PREFILL_OP "mla_sparse_prefill"
#define ST_MLA_SPARSE_PREFILL_MAIN_KERNEL "st_mla_sparse_prefill_main"
#define ST_MLA_SPARSE_PREFILL_MERGE_KERNEL "st_mla_sparse_prefill_merge"
/* Query tokens a call takes: rows x splits (<= 128) CTAs stay within the
 * grid's 2^31 - 1. */
#define ST_MLA_SPARSE_PREFILL_MAX_ROWS (1 << 20)

/* A variant: mla_sparse_decode's config with dtype bf16 (the kv rows). */
typedef st_mla_sparse_decode_config st_mla_sparse_prefill_config;

/* Reads a config from the variant's parameters (names as in
 * generator/ops/mla_sparse_prefill.lua); dtype must be bf16. */
st_status st_mla_sparse_prefill_config_from_params(const st_params *kernel, const st_params *launch,
                                                   st_mla_sparse_prefill_config *cfg, st_err *err);

/* Checks arguments against the op contract: dtypes, ranks, shapes, strides,
 * alignment, limits. Device data (indices, lengths, sinks) is not read. */
st_status st_mla_sparse_prefill_check_args(const st_mla_sparse_prefill_args *a, st_err *err);

/* ST_OK if the variant can run these (valid) arguments, else
 * ST_ERR_NO_VARIANT with the reason. */
st_status st_mla_sparse_prefill_check_fit(const st_mla_sparse_prefill_config *cfg, const st_mla_sparse_prefill_args *a,
                                          st_err *err);

/* mla_sparse_decode's plan, its params filled for the prefill kernels
 * (page_size 1, qlen 1, max_logits). */
typedef st_mla_sparse_decode_plan st_mla_sparse_prefill_plan;

/* Plans a launch for valid, fitting arguments on a GPU with `sm_count`
 * multiprocessors (one wave of CTAs, as mla_sparse_decode: with many query
 * tokens, one split). Depends only on host-known values. */
st_status st_mla_sparse_prefill_plan_make(const st_mla_sparse_prefill_config *cfg, const st_mla_sparse_prefill_args *a,
                                          int sm_count, st_mla_sparse_prefill_plan *plan, st_err *err);

/* Launches the planned kernels on `stream`, as st_mla_sparse_decode_launch
 * (the workspace needs no clearing). */
st_status st_mla_sparse_prefill_launch(const st_cu *cu, CUfunction main_fn, CUfunction merge_fn,
                                       const st_mla_sparse_prefill_plan *plan, void *workspace, size_t workspace_bytes,
                                       CUstream stream, st_err *err);

/* The dispatch key of a call, the host-known shape subset winners are
 * recorded under ("mla_sparse_prefill:Hq=128,s_q=4096,topk=2048"), also as
 * params. */
st_status st_mla_sparse_prefill_dispatch_key(const st_mla_sparse_prefill_args *a, char *key, size_t cap,
                                             st_params *fields, st_err *err);

#endif
