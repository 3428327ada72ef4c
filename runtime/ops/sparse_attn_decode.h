/* ops/sparse_attn_decode.h - the one launcher of sparse_attn_decode, used by
 * the tuner and by the runtime, so what was timed is exactly what runs.
 *
 * It validates arguments against the op contract (sparsetune.h), decides
 * whether a variant fits a call, turns (arguments, variant) into grid,
 * block, shared memory, workspace layout and the kernel's argument block,
 * and launches. */
#ifndef ST_OPS_SPARSE_ATTN_DECODE_H
#define ST_OPS_SPARSE_ATTN_DECODE_H

#include <stddef.h>

#include "cuda_driver.h"
#include "error.h"
#include "params.h"
#include "params/sparse_attn_decode.h" /* templates/: the kernel argument block */
#include "sparsetune.h"

#define ST_SPARSE_ATTN_DECODE_OP "sparse_attn_decode"
#define ST_SPARSE_ATTN_DECODE_MAIN_KERNEL "st_sparse_attn_decode_main"
#define ST_SPARSE_ATTN_DECODE_MERGE_KERNEL "st_sparse_attn_decode_merge"
#define ST_SPARSE_ATTN_DECODE_MAX_QLEN 4
#define ST_SPARSE_ATTN_DECODE_MAX_TOPK 64
#define ST_SPARSE_ATTN_DECODE_MAX_GROUP 32

typedef enum st_sparse_attn_decode_algo {
  ST_SPARSE_ATTN_DECODE_SINGLE = 0, /* one launch: the last CTA of an item
                                       merges, or with a cluster the item's
                                       CTAs (splits dividing it) */
  ST_SPARSE_ATTN_DECODE_SPLIT = 1   /* a second launch merges the splits */
} st_sparse_attn_decode_algo;

/* A variant: kernel config (baked into the source) plus launch config. */
typedef struct st_sparse_attn_decode_config {
  st_dtype dtype; /* KV cache: ST_DTYPE_BF16 or ST_DTYPE_FP8_E4M3          */
  int head_dim;   /* 64, 128, 256                                         */
  int group;      /* q heads per kv head, exactly the call's Hq / Hkv     */
  int warps_n;    /* warps splitting a block's 128 tokens                 */
  int stages;     /* blocks in flight per CTA                             */
  st_sparse_attn_decode_algo algo;
  int cluster; /* CTAs per thread-block cluster: 1, 4, 8 or 16        */
  int k_regs;  /* fp8: 1 = K read raw into the mma fragments, only V
                  widened in shared memory; 2 = V read raw too where
                  scales are not per token                            */
  int tma;     /* head_dim 128, bf16 or fp8 k_regs 2: K and V by tensor
                  maps into a ring of 2 * stages halves               */
  int pv_dims; /* tma, group <= 16, 1 or 2 stages, 4 or 8 warps: P.V
                  split over the warps by dimensions; calls with
                  per-token scales go to other variants               */
  int ring_extra; /* pv_dims with 1 stage: a third half slot in the
                     tma ring (V a block ahead)                       */
  int scale_ptr;  /* 1: runs per-token scale views of one scale each (every
                     stride 0) as the scalar mode, the two scales read
                     from device memory; 0 (variants recorded before
                     it): as per-token scales                           */
  int splits;  /* launch: CTAs per work item; 0 = auto                 */
} st_sparse_attn_decode_config;

/* Reads a config from the variant's parameters (names as in
 * generator/ops/sparse_attn_decode.lua). */
st_status st_sparse_attn_decode_config_from_params(const st_params *kernel, const st_params *launch,
                                                   st_sparse_attn_decode_config *cfg, st_err *err);

/* Checks arguments against the op contract: dtypes, ranks, shapes, strides,
 * alignment, scales, limits. Pointers are checked for NULL and alignment. */
st_status st_sparse_attn_decode_check_args(const st_sparse_attn_decode_args *a, st_err *err);

/* ST_OK if the variant can run these (valid) arguments, else
 * ST_ERR_NO_VARIANT with the reason. */
st_status st_sparse_attn_decode_check_fit(const st_sparse_attn_decode_config *cfg, const st_sparse_attn_decode_args *a,
                                          st_err *err);

/* Dynamic shared memory of the main kernel (templates/sparse_attn_decode.cu
 * lays it out; the kernel traps if given less): the most any launch needs. */
unsigned st_sparse_attn_decode_smem_bytes(const st_sparse_attn_decode_config *cfg);

/* What a launch with this KV scale mode needs: less than the most where
 * k_regs 2 reads K and V raw (no per-token scales), which needs no wide
 * tile. Plans launch with this. */
unsigned st_sparse_attn_decode_launch_smem_bytes(const st_sparse_attn_decode_config *cfg, st_kv_scale_mode scale_mode);

/* ST_OK if the config's cluster is one the kernel can have (the template's
 * static_assert and the generator's constraint): 1; 8 for single kernels
 * of at most 2 stages; 4 for single pv_dims kernels; 16 for single
 * kernels of at most 128 threads (pv_dims: 256, counted at the raw
 * launch's shared memory) of which two fit an SM by shared memory.
 * The grid is padded to whole clusters. */
st_status st_sparse_attn_decode_check_cluster(const st_sparse_attn_decode_config *cfg, st_err *err);

typedef struct st_sparse_attn_decode_plan {
  st_sparse_attn_decode_params params; /* workspace pointers filled at launch */
  unsigned grid[3];                    /* (pad(R*qlen*splits, cluster), Hkv, 1) */
  unsigned cluster;                    /* CTAs per cluster of the main kernel */
  unsigned block;
  unsigned smem_bytes;
  unsigned merge_grid[3];
  unsigned merge_block; /* 0: no merge launch */
  int splits;           /* effective split count */
  int pdl;              /* the main kernel launched programmatically (ops/launch.h) */
  size_t workspace_bytes; /* laid out as ops/workspace.h says */
  size_t counters_offset, part_o_offset, part_ml_offset;
  size_t counters_bytes;  /* SINGLE with splits: a word a (row, KV head) */
  int zero_counters;      /* 1: past the counter area, zeroed first     */
  int kv_maps;                /* tma: params' k_map / v_map encoded at launch */
  st_tensor k_cache, v_cache; /* the views they map                           */
} st_sparse_attn_decode_plan;

/* Plans a launch for valid, fitting arguments on a GPU with `sm_count`
 * multiprocessors. Depends only on host-known values (never seq_lens). */
st_status st_sparse_attn_decode_plan_make(const st_sparse_attn_decode_config *cfg, const st_sparse_attn_decode_args *a,
                                          int sm_count, st_sparse_attn_decode_plan *plan, st_err *err);

/* Launches the planned kernels on `stream`; `merge_fn` may be NULL when the
 * plan has no merge launch. The workspace must hold plan->workspace_bytes
 * and have been cleared once (laid out as ops/workspace.h says). */
st_status st_sparse_attn_decode_launch(const st_cu *cu, CUfunction main_fn, CUfunction merge_fn,
                                       const st_sparse_attn_decode_plan *plan, void *workspace, size_t workspace_bytes,
                                       CUstream stream, st_err *err);

/* The dispatch key of a call, the host-known shape subset winners are
 * recorded under ("sparse_attn_decode:B=8,D=128,Hkv=2,Hq=32,dtype=bf16,
 * qlen=1,topk=16"), also as params. */
st_status st_sparse_attn_decode_dispatch_key(const st_sparse_attn_decode_args *a, char *key, size_t cap,
                                             st_params *fields, st_err *err);

#endif
