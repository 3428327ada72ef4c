/* ops/dsa_index_decode.h - the one launcher of dsa_index_decode
 * (DeepSeek-V3.2's lightning indexer for decode: token logits over the paged
 * fp8 index-K cache and their top-k), used by the tuner and by the runtime,
 * so what was timed is exactly what runs.
 *
 * It validates arguments against the op contract (sparsetune.h), decides
 * whether a variant fits a call, turns (arguments, variant) into grid,
 * block, shared memory, workspace layout and the kernels' argument block,
 * and launches. */
#ifndef ST_OPS_DSA_INDEX_DECODE_H
#define ST_OPS_DSA_INDEX_DECODE_H

#include <stddef.h>

#include "cuda_driver.h"
#include "error.h"
#include "params.h"
#include "params/dsa_index_decode.h" /* templates/: the kernel argument block */
#include "sparsetune.h"

#define ST_DSA_INDEX_DECODE_OP "dsa_index_decode"
#define ST_DSA_INDEX_DECODE_MAIN_KERNEL "st_dsa_index_decode_main"
#define ST_DSA_INDEX_DECODE_MERGE_KERNEL "st_dsa_index_decode_merge"
#define ST_DSA_INDEX_DECODE_HEAD_DIM 128
#define ST_DSA_INDEX_DECODE_MAX_HEADS 64
#define ST_DSA_INDEX_DECODE_MAX_QLEN 4
#define ST_DSA_INDEX_DECODE_MAX_TOPK 2048
#define ST_DSA_INDEX_DECODE_MAX_PAGE_SIZE 1024
/* Tokens a request may have: the logits' positions stay far inside int. */
#define ST_DSA_INDEX_DECODE_MAX_CONTEXT (1 << 24)

/* A variant: kernel config (baked into the source) plus launch config. */
typedef struct st_dsa_index_decode_config {
  int max_heads;       /* 32 or 64: heads whose q the main kernel holds     */
  int max_qlen;        /* 1, 2 or 4: query tokens it holds                  */
  int threads;         /* main kernel: 128 or 256                           */
  int tiles_in_flight; /* 16-token tiles a warp loads before computing: 1, 2 */
  int merge_threads;   /* the selection's CTA: 256, 512 or 1024             */
  int merge_filter;    /* 1: a long row's candidates staged after one pass  */
  int splits;          /* launch: CTAs per request; 0 = the launcher's choice */
} st_dsa_index_decode_config;

/* Reads a config from the variant's parameters (names as in
 * generator/ops/dsa_index_decode.lua). */
st_status st_dsa_index_decode_config_from_params(const st_params *kernel, const st_params *launch,
                                                 st_dsa_index_decode_config *cfg, st_err *err);

/* Checks arguments against the op contract: dtypes, ranks, shapes, strides,
 * alignment, limits. Pointers are checked for NULL and alignment only. */
st_status st_dsa_index_decode_check_args(const st_dsa_index_decode_args *a, st_err *err);

/* ST_OK if the variant can run these (valid) arguments, else
 * ST_ERR_NO_VARIANT with the reason. */
st_status st_dsa_index_decode_check_fit(const st_dsa_index_decode_config *cfg, const st_dsa_index_decode_args *a,
                                        st_err *err);

typedef struct st_dsa_index_decode_plan {
  st_dsa_index_decode_params params; /* logits pointed into the workspace at launch */
  unsigned grid[3];
  unsigned block;
  unsigned smem_bytes; /* dynamic shared memory of the main kernel */
  unsigned merge_grid[3];
  unsigned merge_block;
  unsigned merge_smem_bytes; /* the merge's staged logits or candidates */
  int splits;                /* effective split count                  */
  int pdl;                   /* the main kernel launched programmatically */
  size_t workspace_bytes;    /* laid out as ops/workspace.h says        */
  size_t logits_offset;      /* in the scratch                          */
} st_dsa_index_decode_plan;

/* Plans a launch for valid, fitting arguments on a GPU with `sm_count`
 * multiprocessors. Depends only on host-known values (never seq_lens). */
st_status st_dsa_index_decode_plan_make(const st_dsa_index_decode_config *cfg, const st_dsa_index_decode_args *a,
                                        int sm_count, st_dsa_index_decode_plan *plan, st_err *err);

/* Launches the planned kernels on `stream`. The workspace must be at least
 * plan->workspace_bytes; its contents do not matter (every launch writes
 * the logits it reads). */
st_status st_dsa_index_decode_launch(const st_cu *cu, CUfunction main_fn, CUfunction merge_fn,
                                     const st_dsa_index_decode_plan *plan, void *workspace, size_t workspace_bytes,
                                     CUstream stream, st_err *err);

/* The dispatch key of a call: the host-known shape subset winners are
 * recorded under ("B=32,H=64,ctx=131072,page=64,qlen=1,topk=2048"), also as
 * params. */
st_status st_dsa_index_decode_dispatch_key(const st_dsa_index_decode_args *a, char *key, size_t cap, st_params *fields,
                                           st_err *err);

#endif
