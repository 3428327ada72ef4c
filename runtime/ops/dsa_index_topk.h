/* ops/dsa_index_topk.h - the one launcher of dsa_index_topk (DeepSeek-V3.2's
 * indexer top-k for prefill: each query row's topk largest logits in its
 * [ks, ke) range), used by the tuner and by the runtime, so what was timed
 * is exactly what runs.
 *
 * It validates arguments against the op contract (sparsetune.h), decides
 * whether a variant fits a call, turns (arguments, variant) into grid,
 * block, shared memory and the kernel's argument block, and launches. */
#ifndef ST_OPS_DSA_INDEX_TOPK_H
#define ST_OPS_DSA_INDEX_TOPK_H

#include <stddef.h>

#include "cuda_driver.h"
#include "error.h"
#include "params.h"
#include "params/dsa_index_topk.h" /* templates/: the kernel argument block */
#include "sparsetune.h"

#define ST_DSA_INDEX_TOPK_OP "dsa_index_topk"
#define ST_DSA_INDEX_TOPK_MAIN_KERNEL "st_dsa_index_topk_main"
#define ST_DSA_INDEX_TOPK_MAX_TOPK 2048
/* Query rows and positions a call may have: positions stay far inside int,
 * and the grid's rows inside its x dimension. */
#define ST_DSA_INDEX_TOPK_MAX_TOKENS (1 << 24)

/* A variant: kernel config only (baked into the source). */
typedef struct st_dsa_index_topk_config {
  int threads; /* 256, 512 or 1024: one row's CTA                         */
  int filter;  /* 1: a range longer than the staged ones stages its
                  candidates after one pass; 0: every pass reads the row   */
} st_dsa_index_topk_config;

/* Reads a config from the variant's parameters (names as in
 * generator/ops/dsa_index_topk.lua). */
st_status st_dsa_index_topk_config_from_params(const st_params *kernel, const st_params *launch,
                                               st_dsa_index_topk_config *cfg, st_err *err);

/* Checks arguments against the op contract: dtypes, ranks, shapes, strides,
 * alignment, limits. Pointers are checked for NULL and alignment only. */
st_status st_dsa_index_topk_check_args(const st_dsa_index_topk_args *a, st_err *err);

typedef struct st_dsa_index_topk_plan {
  st_dsa_index_topk_params params;
  unsigned grid[3];
  unsigned block;
  unsigned smem_bytes; /* dynamic shared memory: staged keys or candidates */
} st_dsa_index_topk_plan;

/* Plans a launch for valid arguments. Depends only on host-known values
 * (never ks or ke): grid s_q, stage_cap from s_kv. Every variant fits every
 * valid call. */
st_status st_dsa_index_topk_plan_make(const st_dsa_index_topk_config *cfg, const st_dsa_index_topk_args *a,
                                      st_dsa_index_topk_plan *plan, st_err *err);

/* Launches the planned kernel on `stream`. */
st_status st_dsa_index_topk_launch(const st_cu *cu, CUfunction fn, const st_dsa_index_topk_plan *plan, CUstream stream,
                                   st_err *err);

/* The dispatch key of a call: the host-known shape subset winners are
 * recorded under ("dsa_index_topk:B=4096,kv=65536,topk=2048": B = s_q,
 * kv = s_kv), also as params. */
st_status st_dsa_index_topk_dispatch_key(const st_dsa_index_topk_args *a, char *key, size_t cap, st_params *fields,
                                         st_err *err);

#endif
