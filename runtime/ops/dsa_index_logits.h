/* ops/dsa_index_logits.h - the one launcher of dsa_index_logits
 * (DeepSeek-V3.2's lightning indexer logits for prefill: every query token
 * against the fp8 index-K rows in its [ks, ke) range), used by the tuner
 * and by the runtime, so what was timed is exactly what runs.
 *
 * It validates arguments against the op contract (sparsetune.h), decides
 * whether a variant fits a call, turns (arguments, variant) into grid,
 * block, shared memory and the kernel's argument block, and launches. */
#ifndef ST_OPS_DSA_INDEX_LOGITS_H
#define ST_OPS_DSA_INDEX_LOGITS_H

#include <stddef.h>

#include "cuda_driver.h"
#include "error.h"
#include "params.h"
#include "params/dsa_index_logits.h" /* templates/: the kernel argument block */
#include "sparsetune.h"

#define ST_DSA_INDEX_LOGITS_OP "dsa_index_logits"
#define ST_DSA_INDEX_LOGITS_MAIN_KERNEL "st_dsa_index_logits_main"
#define ST_DSA_INDEX_LOGITS_HEAD_DIM 128
#define ST_DSA_INDEX_LOGITS_MAX_HEADS 64
/* Query tokens and index-K rows a call may have: positions stay far inside
 * int, and the grid's query tiles inside its x dimension. */
#define ST_DSA_INDEX_LOGITS_MAX_TOKENS (1 << 24)
/* The grid's y dimension: token slices of one query tile. */
#define ST_DSA_INDEX_LOGITS_MAX_SPLITS 65535

/* A variant: kernel config (baked into the source) plus launch config. */
typedef struct st_dsa_index_logits_config {
  int max_heads;  /* 16, 32 or 64: heads a CTA scores for each query      */
  int queries;    /* query tokens a CTA scores: 1..8                       */
  int head_tiles; /* 16-head mma row tiles a warp holds in registers: 1, 2 */
  int tokens;     /* index-K rows of one shared-memory tile: 64, 128       */
  int threads;    /* 128, 256 or 512                                        */
  int stages;     /* K tiles in flight (cp.async): 2..4                    */
  int splits;     /* launch: token slices per query tile; 0 = the launcher's */
} st_dsa_index_logits_config;

/* Reads a config from the variant's parameters (names as in
 * generator/ops/dsa_index_logits.lua) and checks that its warps divide
 * into (query, head group, token group) as the kernel assigns them. */
st_status st_dsa_index_logits_config_from_params(const st_params *kernel, const st_params *launch,
                                                 st_dsa_index_logits_config *cfg, st_err *err);

/* Checks arguments against the op contract: dtypes, ranks, shapes, strides,
 * alignment, limits. Pointers are checked for NULL and alignment only. */
st_status st_dsa_index_logits_check_args(const st_dsa_index_logits_args *a, st_err *err);

/* ST_OK if the variant can run these (valid) arguments, else
 * ST_ERR_NO_VARIANT with the reason. */
st_status st_dsa_index_logits_check_fit(const st_dsa_index_logits_config *cfg, const st_dsa_index_logits_args *a,
                                        st_err *err);

typedef struct st_dsa_index_logits_plan {
  st_dsa_index_logits_params params;
  unsigned grid[3];
  unsigned block;
  unsigned smem_bytes; /* dynamic shared memory: K tiles, scales, partial sums */
  int splits;          /* effective token slices per query tile               */
} st_dsa_index_logits_plan;

/* Dynamic shared memory of a variant: `stages` K tiles (128 bytes a row)
 * and their scales, then the head groups' partial logits of one tile. */
size_t st_dsa_index_logits_smem_bytes(const st_dsa_index_logits_config *cfg);

/* Plans a launch for valid, fitting arguments on a GPU with `sm_count`
 * multiprocessors. Depends only on host-known values (never ks or ke). */
st_status st_dsa_index_logits_plan_make(const st_dsa_index_logits_config *cfg, const st_dsa_index_logits_args *a,
                                        int sm_count, st_dsa_index_logits_plan *plan, st_err *err);

/* Launches the planned kernel on `stream`. */
st_status st_dsa_index_logits_launch(const st_cu *cu, CUfunction fn, const st_dsa_index_logits_plan *plan,
                                     CUstream stream, st_err *err);

/* The dispatch key of a call: the host-known shape subset winners are
 * recorded under ("dsa_index_logits:B=4096,H=64,kv=65536": B = s_q,
 * kv = s_kv), also as params. */
st_status st_dsa_index_logits_dispatch_key(const st_dsa_index_logits_args *a, char *key, size_t cap, st_params *fields,
                                           st_err *err);

#endif
