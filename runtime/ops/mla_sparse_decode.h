/* ops/mla_sparse_decode.h - the one launcher of mla_sparse_decode, used by
 * the tuner and by the runtime, so what was timed is exactly what runs.
 *
 * It validates arguments against the op contract (sparsetune.h), decides
 * whether a variant fits a call, turns (arguments, variant) into grid,
 * block, shared memory, workspace layout and the kernel's argument block,
 * and launches. */
#ifndef ST_OPS_MLA_SPARSE_DECODE_H
#define ST_OPS_MLA_SPARSE_DECODE_H

#include <stddef.h>

#include "cuda_driver.h"
#include "error.h"
#include "params.h"
#include "params/mla_sparse_decode.h" /* templates/: the kernel argument block */
#include "sparsetune.h"

#define ST_MLA_SPARSE_DECODE_OP "mla_sparse_decode"
#define ST_MLA_SPARSE_DECODE_MAIN_KERNEL "st_mla_sparse_decode_main"
#define ST_MLA_SPARSE_DECODE_MERGE_KERNEL "st_mla_sparse_decode_merge"
#define ST_MLA_SPARSE_DECODE_MAX_QLEN 4
#define ST_MLA_SPARSE_DECODE_MAX_TOPK 2048
#define ST_MLA_SPARSE_DECODE_MAX_HEADS 128
#define ST_MLA_SPARSE_DECODE_HEAD_ALIGN 16 /* Hq a multiple of the smallest head tile */
#define ST_MLA_SPARSE_DECODE_MIN_PAGE 16
#define ST_MLA_SPARSE_DECODE_MAX_PAGE 1024
#define ST_MLA_SPARSE_DECODE_DIM_QK 576
#define ST_MLA_SPARSE_DECODE_DIM_V 512
#define ST_MLA_SPARSE_DECODE_FP8_ROW 656 /* bytes of a packed fp8 token row */
/* Split CTAs per (row, head tile): the merge kernel reads each split's
 * (m, l) twice, a bound keeps that and the workspace small. */
#define ST_MLA_SPARSE_DECODE_MAX_SPLITS 128

/* A variant: kernel config (baked into the source) plus launch config. */
typedef struct st_mla_sparse_decode_config {
  st_dtype dtype;    /* KV cache: ST_DTYPE_BF16 or ST_DTYPE_FP8_E4M3 (656-byte rows) */
  int heads_per_cta; /* 16, 32 or 64: q heads one CTA computes, sharing each K row */
  int tile_tokens;   /* 16, 32 or 64: cache rows staged in shared memory at once */
  int threads;       /* 128, 256 or 512                                          */
  int mma;           /* 0: CUDA cores (fp32); 1: tensor cores (mma.sync bf16),
                        threads = 8 x heads_per_cta, tile_tokens 32 or 64;
                        2: wgmma, two warpgroups on 64 heads, 64-token tiles  */
  int pipe;          /* mma 1 and 2 (2: always): 1 = the next tile's raw rows copied by
                        cp.async under the current tile's math                  */
  int splits;        /* launch: CTAs per (row, head tile); 0 = auto               */
} st_mla_sparse_decode_config;

/* Reads a config from the variant's parameters (names as in
 * generator/ops/mla_sparse_decode.lua). */
st_status st_mla_sparse_decode_config_from_params(const st_params *kernel, const st_params *launch,
                                                  st_mla_sparse_decode_config *cfg, st_err *err);

/* Checks arguments against the op contract: dtypes, ranks, shapes, strides,
 * alignment, limits. Device data (indices, lengths, sinks) is not read. */
st_status st_mla_sparse_decode_check_args(const st_mla_sparse_decode_args *a, st_err *err);

/* ST_OK if the variant can run these (valid) arguments, else
 * ST_ERR_NO_VARIANT with the reason. */
st_status st_mla_sparse_decode_check_fit(const st_mla_sparse_decode_config *cfg, const st_mla_sparse_decode_args *a,
                                         st_err *err);

/* Dynamic shared memory of the main kernel (templates/mla_sparse_decode.cu
 * lays it out; the kernel traps if given less). */
unsigned st_mla_sparse_decode_smem_bytes(const st_mla_sparse_decode_config *cfg);

typedef struct st_mla_sparse_decode_plan {
  st_mla_sparse_decode_params params; /* workspace pointers filled at launch */
  unsigned grid[3];                   /* (rows * splits, Hq / heads_per_cta, 1) */
  unsigned block;
  unsigned smem_bytes;
  unsigned merge_grid[3]; /* (rows, Hq, 1) */
  unsigned merge_block;   /* 0: no merge launch (one split) */
  int splits;             /* effective split count */
  int pdl;
  size_t workspace_bytes;
  size_t part_o_offset, part_ml_offset;
} st_mla_sparse_decode_plan;

/* Plans a launch for valid, fitting arguments on a GPU with `sm_count`
 * multiprocessors. Depends only on host-known values. */
st_status st_mla_sparse_decode_plan_make(const st_mla_sparse_decode_config *cfg, const st_mla_sparse_decode_args *a,
                                         int sm_count, st_mla_sparse_decode_plan *plan, st_err *err);

/* Launches the planned kernels on `stream`; `merge_fn` may be NULL when the
 * plan has no merge launch. The workspace must hold plan->workspace_bytes
 * (no clearing needed: every split writes its whole partial state). */
st_status st_mla_sparse_decode_launch(const st_cu *cu, CUfunction main_fn, CUfunction merge_fn,
                                      const st_mla_sparse_decode_plan *plan, void *workspace, size_t workspace_bytes,
                                      CUstream stream, st_err *err);

/* The dispatch key of a call, the host-known shape subset winners are
 * recorded under ("mla_sparse_decode:B=32,Hq=128,dtype=fp8,qlen=1,
 * topk=2048"), also as params. */
st_status st_mla_sparse_decode_dispatch_key(const st_mla_sparse_decode_args *a, char *key, size_t cap,
                                            st_params *fields, st_err *err);

#endif
