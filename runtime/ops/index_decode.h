/* ops/index_decode.h - the one launcher of index_decode, used by the tuner
 * and by the runtime, so what was timed is exactly what runs.
 *
 * It validates arguments against the op contract, decides whether a variant
 * fits a call, turns (arguments, variant) into grid, block, shared memory,
 * workspace layout and the kernel's argument block, and launches. */
#ifndef ST_OPS_INDEX_DECODE_H
#define ST_OPS_INDEX_DECODE_H

#include <stddef.h>

#include "cuda_driver.h"
#include "error.h"
#include "params/index_decode.h" /* templates/: the kernel argument block */
#include "params.h"
#include "sparsetune.h"

#define ST_INDEX_DECODE_OP "index_decode"
#define ST_INDEX_DECODE_MAIN_KERNEL "st_index_decode_main"
#define ST_INDEX_DECODE_MERGE_KERNEL "st_index_decode_merge"
#define ST_INDEX_DECODE_MAX_QLEN 4
#define ST_INDEX_DECODE_MAX_TOPK 64

typedef enum st_index_decode_algo {
  ST_INDEX_DECODE_SINGLE = 0, /* one launch: the last CTA of a request merges  */
  ST_INDEX_DECODE_SPLIT = 1   /* two launches: partial top-k, then merge       */
} st_index_decode_algo;

/* A variant: kernel config (baked into the source) plus launch config. */
typedef struct st_index_decode_config {
  st_dtype dtype;          /* ST_DTYPE_BF16 or ST_DTYPE_FP8_E4M3             */
  int head_dim;            /* 64 or 128                                       */
  int topk_cap;            /* the kernel's top-k capacity: 4, 8, 16, 32, 64   */
  int heads_per_cta;       /* index heads one CTA scores: 1, 2, 4             */
  int max_qlen;            /* 1..4                                            */
  int threads;             /* 128 or 256                                      */
  int units_in_flight;     /* 16-token tiles each warp loads before computing */
  int bulk_stages;         /* 0: loads into registers; N: whole blocks copied
                              into N shared-memory stages (cp.async.bulk)    */
  st_index_decode_algo algo;
  int splits;              /* launch: CTAs per (request, head group); 0 = auto */
} st_index_decode_config;

/* Reads a config from the variant's parameters (names as in
 * generator/ops/index_decode.lua). */
st_status st_index_decode_config_from_params(const st_params *kernel, const st_params *launch,
                                             st_index_decode_config *cfg, st_err *err);

/* Checks arguments against the op contract: dtypes, ranks, shapes, strides,
 * alignment, limits. Pointers are checked for NULL and alignment only. */
st_status st_index_decode_check_args(const st_index_decode_args *a, st_err *err);

/* ST_OK if the variant can run these (valid) arguments, else
 * ST_ERR_NO_VARIANT with the reason. */
st_status st_index_decode_check_fit(const st_index_decode_config *cfg, const st_index_decode_args *a,
                                    st_err *err);

typedef struct st_index_decode_plan {
  st_index_decode_params params; /* pointers to workspace filled at launch   */
  unsigned grid[3];
  unsigned block;
  unsigned smem_bytes;           /* dynamic shared memory of the main kernel */
  unsigned merge_grid[3];        /* SPLIT only                               */
  unsigned merge_block;          /* 0: no merge launch                       */
  unsigned merge_smem_bytes;
  int splits;                    /* effective split count                    */
  int pdl;                       /* the main kernel launched programmatically */
  size_t workspace_bytes;        /* laid out as ops/workspace.h says      */
  size_t counters_offset, block_keys_offset;
  size_t counters_bytes;         /* SINGLE: a word a (request, head group) */
  int zero_counters;             /* 1: past the counter area, zeroed first */
} st_index_decode_plan;

/* Plans a launch for valid, fitting arguments on a GPU with `sm_count`
 * multiprocessors. Depends only on host-known values (never seq_lens). */
st_status st_index_decode_plan_make(const st_index_decode_config *cfg, const st_index_decode_args *a,
                                    int sm_count, st_index_decode_plan *plan, st_err *err);

/* Launches the planned kernels on `stream`. `merge` may be NULL for SINGLE.
 * The workspace must be at least plan->workspace_bytes and cleared once. */
st_status st_index_decode_launch(const st_cu *cu, CUfunction main_fn, CUfunction merge_fn,
                                 const st_index_decode_plan *plan, void *workspace,
                                 size_t workspace_bytes, CUstream stream, st_err *err);

/* The dispatch key of a call: the host-known shape subset winners are
 * recorded under ("dtype=bf16,D=128,H=2,qlen=1,topk=16,B=8"), also as params. */
st_status st_index_decode_dispatch_key(const st_index_decode_args *a, char *key, size_t cap,
                                       st_params *fields, st_err *err);

#endif
