/* ops/index_topk.h - the one launcher of index_topk (prefill), used by the
 * tuner and by the runtime: validation, fit, launch math, launch. */
#ifndef ST_OPS_INDEX_TOPK_H
#define ST_OPS_INDEX_TOPK_H

#include <stddef.h>

#include "cuda_driver.h"
#include "error.h"
#include "params.h"
#include "params/index_topk.h" /* templates/: the kernel argument block */
#include "sparsetune.h"

#define ST_INDEX_TOPK_OP "index_topk"
#define ST_INDEX_TOPK_MAIN_KERNEL "st_index_topk_main"
#define ST_INDEX_TOPK_MAX_TOPK 64
#define ST_INDEX_TOPK_MAX_KEYS 32 /* warp: keys per lane */

typedef enum st_index_topk_algo {
  ST_INDEX_TOPK_CTA = 0, /* the CTA selects for `rows` rows through shared memory */
  ST_INDEX_TOPK_WARP = 1 /* a warp per row, `keys` keys per lane in registers   */
} st_index_topk_algo;

/* A variant (compile-time only). */
typedef struct st_index_topk_config {
  st_index_topk_algo algo;
  int keys;     /* warp: keys per lane, 1, 2, 4 .. 32 (rows of <= 32 * keys blocks); cta: 0 */
  int rows;     /* query tokens one CTA selects for: 1, 2, 4, 8 (warp: threads / 32)    */
  int threads;  /* 128, 256, 512                                                        */
  int topk_cap; /* the kernel's top-k capacity: 4, 8, 16, 32, 64                        */
} st_index_topk_config;

/* Reads a config from the variant's parameters (names as in
 * generator/ops/index_topk.lua); ST_ERR_INVALID_ARG naming the parameter
 * when one is missing, out of range, or inconsistent with algo. */
st_status st_index_topk_config_from_params(const st_params *kernel, const st_params *launch, st_index_topk_config *cfg,
                                           st_err *err);

/* Checks arguments against the op contract; cu_seqlens_q's and seq_lens'
 * values are device data (not read). */
st_status st_index_topk_check_args(const st_index_topk_args *a, st_err *err);

/* ST_OK if the variant can run these (valid) arguments, else
 * ST_ERR_NO_VARIANT with the reason. */
st_status st_index_topk_check_fit(const st_index_topk_config *cfg, const st_index_topk_args *a, st_err *err);

typedef struct st_index_topk_plan {
  st_index_topk_params params;
  unsigned grid[3];
  unsigned block;
  unsigned smem_bytes;    /* cta: rows x max_blocks score keys; warp: 0 */
  size_t workspace_bytes; /* 0 */
} st_index_topk_plan;

st_status st_index_topk_plan_make(const st_index_topk_config *cfg, const st_index_topk_args *a,
                                  st_index_topk_plan *plan, st_err *err);

st_status st_index_topk_launch(const st_cu *cu, CUfunction main_fn, const st_index_topk_plan *plan, CUstream stream,
                               st_err *err);

/* "index_topk:B=16384,H=2,topk=16" (B = total_q), also as params. */
st_status st_index_topk_dispatch_key(const st_index_topk_args *a, char *key, size_t cap, st_params *fields,
                                     st_err *err);

#endif
