/* ops/index_prefill.h - the one launcher of the fused index_prefill
 * (scores and top-k in one pass), used by the tuner and by the runtime:
 * validation, fit, launch math, launch. The scoring half is index_score's
 * (ops/index_score.h), planned on the same inputs. */
#ifndef ST_OPS_INDEX_PREFILL_H
#define ST_OPS_INDEX_PREFILL_H

#include <stddef.h>

#include "cuda_driver.h"
#include "error.h"
#include "ops/index_score.h"
#include "params.h"
#include "params/index_prefill.h" /* templates/: the kernel argument block */
#include "sparsetune.h"

#define ST_INDEX_PREFILL_OP "index_prefill"
#define ST_INDEX_PREFILL_MAIN_KERNEL "st_index_prefill_main"
#define ST_INDEX_PREFILL_MERGE_KERNEL "st_index_prefill_merge"
#define ST_INDEX_PREFILL_MAX_TOPK 64
/* Candidates one merge warp holds: chunks of a row x topk (the template's
 * MERGE_MAX). */
#define ST_INDEX_PREFILL_MERGE_MAX 512
/* Blocks of a row the composed merge holds (the template's MERGE_MAX): a
 * 131072-token context. */
#define ST_INDEX_PREFILL_COMPOSED_MAX_BLOCKS 1024
#define ST_INDEX_PREFILL_MERGE_THREADS 256

typedef enum st_index_prefill_algo {
  ST_INDEX_PREFILL_FUSED = 0,   /* row lists per chunk, never the score matrix */
  ST_INDEX_PREFILL_COMPOSED = 1 /* every block's key to the workspace, then the selection */
} st_index_prefill_algo;

typedef struct st_index_prefill_config {
  st_index_score_config score; /* the scoring loop; its chunk_blocks is the launch parameter */
  st_index_prefill_algo algo;
  int topk_cap; /* fused: the rows' list length, 16, 32, 64; composed: 64 (any topk) */
} st_index_prefill_config;

st_status st_index_prefill_config_from_params(const st_params *kernel, const st_params *launch,
                                              st_index_prefill_config *cfg, st_err *err);

/* Checks arguments against the op contract (index_score's inputs, topk,
 * init_blocks, local_blocks, topk_idx). Device data is not read. */
st_status st_index_prefill_check_args(const st_index_prefill_args *a, st_err *err);

/* Shared memory of a variant's scoring CTA: the row lists, then index_score's. */
unsigned st_index_prefill_smem_bytes(const st_index_prefill_config *cfg);

typedef struct st_index_prefill_plan {
  st_index_prefill_params params; /* partial filled at launch from the workspace, the
                                     score loop's k_map from k_cache                 */
  st_tensor k_cache;
  unsigned grid[3], merge_grid[3];
  unsigned block, merge_block;
  unsigned smem_bytes;
  size_t workspace_bytes; /* fused: the chunks' lists, H x total_q x max_chunks x topk x 8;
                             composed: the keys, H x total_q x max_blocks x 4; in the
                             scratch (ops/workspace.h), past the counter area          */
} st_index_prefill_plan;

/* Plans a launch for valid arguments on a GPU with `sm_count`
 * multiprocessors; ST_ERR_NO_VARIANT if the variant does not fit. */
st_status st_index_prefill_plan_make(const st_index_prefill_config *cfg, const st_index_prefill_args *a, int sm_count,
                                     st_index_prefill_plan *plan, st_err *err);

/* Both kernels on `stream`; `workspace` holds plan->workspace_bytes. */
st_status st_index_prefill_launch(const st_cu *cu, CUfunction main_fn, CUfunction merge_fn,
                                  const st_index_prefill_plan *plan, void *workspace, CUstream stream, st_err *err);

/* "index_prefill:B=16384,D=128,H=2,dtype=bf16,topk=16", also as params. */
st_status st_index_prefill_dispatch_key(const st_index_prefill_args *a, char *key, size_t cap, st_params *fields,
                                        st_err *err);

#endif
