/* ops/index_score.h - the one launcher of index_score (prefill block scores),
 * used by the tuner and by the runtime: validation, fit, launch math,
 * launch. */
#ifndef ST_OPS_INDEX_SCORE_H
#define ST_OPS_INDEX_SCORE_H

#include <stddef.h>

#include "cuda_driver.h"
#include "error.h"
#include "params.h"
#include "params/index_score.h" /* templates/: the kernel argument block */
#include "sparsetune.h"

#define ST_INDEX_SCORE_OP "index_score"
#define ST_INDEX_SCORE_MAIN_KERNEL "st_index_score_main"
/* Dynamic shared memory a variant may take: 227 KiB, the sm_90 opt-in
 * limit, less 1 KiB for the kernels' static part (barriers, scratch). */
#define ST_INDEX_SCORE_MAX_SMEM (226 * 1024)

/* A variant: kernel config (baked into the source) plus launch config. */
typedef struct st_index_score_config {
  st_dtype dtype;   /* ST_DTYPE_BF16 or ST_DTYPE_FP8_E4M3 (q and k alike)      */
  int head_dim;     /* 64 or 128 (bf16), 128 (fp8): rows of 128-byte panels  */
  int rows;         /* (token, head) rows per CTA: 128 or 256                */
  int warpgroups;   /* 1 or 2; rows / (64 * warpgroups) is 1 or 2            */
  int stages;       /* K blocks in flight in shared memory: 2..4             */
  int chunk_blocks; /* launch: blocks per CTA; 0 = auto from the SM count    */
  int balanced;     /* chunk_blocks 0 of index_score: one CTA per SM, each an
                       equal run of the batch's (tile, block) pairs; 0 under
                       index_prefill, whose fused lists are per chunk       */
} st_index_score_config;

/* Reads a config from the variant's parameters (names as in
 * generator/ops/index_score.lua). */
st_status st_index_score_config_from_params(const st_params *kernel, const st_params *launch,
                                            st_index_score_config *cfg, st_err *err);

/* Checks arguments against the op contract: dtypes, ranks, shapes, strides,
 * alignment, scale, max_context. Device data (cu_seqlens_q, seq_lens,
 * block_table values) is not read. */
st_status st_index_score_check_args(const st_index_score_args *a, st_err *err);

/* ST_OK if the variant can run these (valid) arguments, else
 * ST_ERR_NO_VARIANT with the reason. */
st_status st_index_score_check_fit(const st_index_score_config *cfg, const st_index_score_args *a, st_err *err);

/* Shared memory a variant's CTA takes: its q tile, its K stages and the
 * slack that aligns them to 1024 bytes. */
unsigned st_index_score_smem_bytes(const st_index_score_config *cfg);

typedef struct st_index_score_plan {
  st_index_score_params params; /* k_map filled at launch from k_cache */
  st_tensor k_cache;
  unsigned grid[3];
  unsigned block;
  unsigned smem_bytes;
  size_t workspace_bytes; /* 0 */
} st_index_score_plan;

/* Plans a launch for valid arguments on a GPU with `sm_count`
 * multiprocessors (the balanced grid, the automatic chunk size); checks the
 * fit first. The grid depends on total_q, R, H, max_context and sm_count
 * only. */
st_status st_index_score_plan_make(const st_index_score_config *cfg, const st_index_score_args *a, int sm_count,
                                   st_index_score_plan *plan, st_err *err);

st_status st_index_score_launch(const st_cu *cu, CUfunction main_fn, const st_index_score_plan *plan, CUstream stream,
                                st_err *err);

/* "index_score:B=16384,D=128,H=2,dtype=bf16" (B = total_q), also as params. */
st_status st_index_score_dispatch_key(const st_index_score_args *a, char *key, size_t cap, st_params *fields,
                                      st_err *err);

#endif
