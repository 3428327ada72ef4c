/* ops/sparse_attn.h - the one launcher of sparse_attn (prefill), used by the
 * tuner and by the runtime, so what was timed is exactly what runs.
 *
 * It validates arguments against the op contract (sparsetune.h), decides
 * whether a variant fits a call, and turns (arguments, variant) into grid,
 * block, shared memory and the kernel's argument block, and launches. */
#ifndef ST_OPS_SPARSE_ATTN_H
#define ST_OPS_SPARSE_ATTN_H

#include <stddef.h>

#include "cuda_driver.h"
#include "error.h"
#include "ops/side_stream.h"
#include "params.h"
#include "params/sparse_attn.h" /* templates/: the kernel argument block */
#include "sparsetune.h"

#define ST_SPARSE_ATTN_OP "sparse_attn"
#define ST_SPARSE_ATTN_MAIN_KERNEL "st_sparse_attn_main"
/* Block-major variants only: the count, scatter and merge steps. */
#define ST_SPARSE_ATTN_MERGE_KERNEL "st_sparse_attn_merge"
/* ... and, with `dense`, the dense tiles' kernel, from the merge kernel's
 * module (the same source). */
#define ST_SPARSE_ATTN_DENSE_KERNEL "st_sparse_attn_dense"
#define ST_SPARSE_ATTN_DENSE_TENSOR_KERNEL "st_sparse_attn_dense_tensor" /* fp8, per-token scales */
#define ST_SPARSE_ATTN_MAX_TOPK 64
#define ST_SPARSE_ATTN_MAX_GROUP 32
#define ST_SPARSE_ATTN_MAX_CHUNK (1 << 20)
/* The call's load (the op descriptor's, runtime/ops/sparse_attn.c) where
 * the context holds more than ST_SPARSE_ATTN_TILE_MAX_BLOCKS blocks: within
 * the block defaults' range only (generator/ops/sparse_attn.lua). */
#define ST_SPARSE_ATTN_TILE_MAX_BLOCKS 6
#define ST_SPARSE_ATTN_LOAD_MANY 1e9

/* The kernel families (templates/sparse_attn.cu and sparse_attn_block.cu). */
typedef enum st_sparse_attn_algo {
  ST_SPARSE_ATTN_TILE = 0,  /* a CTA per `tokens` neighbouring query tokens, over the union of their blocks */
  ST_SPARSE_ATTN_BLOCK = 1, /* a CTA per selected block and `tokens` of the query tokens that selected it,
                               partial states merged afterwards; needs a workspace */
} st_sparse_attn_algo;

/* A variant: compile-time parameters, and for block-major ones the launch
 * parameters chunk and overlap. */
typedef struct st_sparse_attn_config {
  st_sparse_attn_algo algo;
  st_dtype dtype; /* KV cache: ST_DTYPE_BF16 or ST_DTYPE_FP8_E4M3            */
  int head_dim;   /* 64, 128, 256                                           */
  int group;      /* q heads per kv head, exactly the call's Hq / Hkv       */
  int tokens;     /* query tokens per CTA: 1, 2, 4, 8, 16                    */
  int topk_cap;   /* tile: topk_idx entries per row the CTA's lists hold: 16, 32, 64 */
  int stages;     /* blocks in flight per CTA (block: 2 = the next item's block
                     and q rows load while this one's are used)           */
  int part_f32;   /* block: partial outputs in fp32 (1) or bf16 (0)         */
  int ctas;       /* block: CTAs per SM the registers are budgeted for: 1, 2 */
  int mtiles;     /* block: 16-row m-tiles a warp takes: 1, 2 (tile: 1)      */
  int wgmma;      /* block: 1 = warpgroups of 64 q rows on wgmma (sm_90a;
                     head_dim 128, mtiles 1); 0 = mma.sync per warp        */
  int chunk_q;    /* block, launch parameter `chunk`: the most query tokens a pass
                     (a multiple of 64; 0: as many as the workspace budget allows);
                     the batch runs in passes of equal size */
  int overlap;    /* block, launch parameter `overlap`: 1 = each chunk's merge runs
                     on the caller's stream beside the next chunk's count, scatter
                     and blocks on a side stream (two workspace halves) */
  int merge_slots; /* block, launch parameter `bulk`: > 0 = the merge by bulk copies,
                      that many slices of partials in flight a merge CTA (at most
                      ST_SPARSE_ATTN_BULK_MAX_SLOTS; fewer where they would not fit
                      48 KiB of shared memory); absent or 0: a merge CTA a (token,
                      kv head) */
  int first_q;     /* block, launch parameter `first`: the first chunk's query tokens (a
                      multiple of 64), the rest in chunks of chunk_q; 0 or absent: all
                      alike. A small first chunk shortens the blocks kernel that runs
                      beside no merge */
  int dense;       /* block, launch parameter `dense`: tiles of 128 / group tokens that
                      select every block they see, each once, run as dense causal
                      attention by st_sparse_attn_dense (templates/sparse_attn_dense.cuh;
                      two-pass variants only): 1 = before the chunks, on every SM;
                      2 = after the last chunk's blocks, beside its merge (with overlap:
                      on 3/4 of the SMs, the merge's CTAs on the rest) */
} st_sparse_attn_config;

/* Reads a config from the variant's parameters (names as in
 * generator/ops/sparse_attn.lua). */
st_status st_sparse_attn_config_from_params(const st_params *kernel, const st_params *launch,
                                            st_sparse_attn_config *cfg, st_err *err);

/* Checks arguments against the op contract. Pointers are checked for NULL
 * and alignment only; cu_seqlens_q's values are device data (not read). */
st_status st_sparse_attn_check_args(const st_sparse_attn_args *a, st_err *err);

/* ST_OK if the variant can run these (valid) arguments, else
 * ST_ERR_NO_VARIANT with the reason. */
st_status st_sparse_attn_check_fit(const st_sparse_attn_config *cfg, const st_sparse_attn_args *a, st_err *err);

/* Threads per CTA: a warp per 16 q rows (tokens x group, padded to whole
 * 16-row tiles), at least 4. */
int st_sparse_attn_threads(const st_sparse_attn_config *cfg);

/* Dynamic shared memory of the kernel (templates/sparse_attn.cu lays it
 * out; the kernel traps if given less). */
unsigned st_sparse_attn_smem_bytes(const st_sparse_attn_config *cfg);

/* Block-major: the batch runs in chunks of `chunk_q` query tokens (the
 * workspace holds one chunk's lists and partials, ST_SPARSE_ATTN_BLOCK_WS
 * bytes at most where a chunk of 64 tokens fits; overlap: two such halves,
 * chunk c in half c % 2), each through four launches: count and scatter
 * (count_grid CTAs of 256 threads), the blocks (at most items_bound CTAs)
 * and the merge (a CTA per token and kv head; with `bulk`, persistent CTAs
 * that take (token, kv head) work from a counter). */
#define ST_SPARSE_ATTN_BLOCK_WS (256u << 20)
#define ST_SPARSE_ATTN_STEP_THREADS 256
/* The count step's dynamic shared memory (its counts and the scan's sums;
 * templates/sparse_attn_block.cu, STEP_SMEM_BYTES). */
#define ST_SPARSE_ATTN_COUNT_SMEM ((2048 + 2 * ST_SPARSE_ATTN_STEP_THREADS) * 4)
/* The merge by bulk copies: persistent 64-thread CTAs, at most this many an
 * SM, each with up to ST_SPARSE_ATTN_BULK_MAX_SLOTS slices in flight. */
#define ST_SPARSE_ATTN_BULK_THREADS 64
#define ST_SPARSE_ATTN_BULK_CTAS_PER_SM 8
#define ST_SPARSE_ATTN_BULK_MAX_SLOTS 16
/* The dense kernel (templates/sparse_attn_dense.cuh): 384 threads, one CTA
 * an SM, two q tiles and two K/V stages of head_dim 128 (fp8: each with the
 * block's scales, padded to 1024 bytes; + 1024 to align); its header words
 * (DENSE_HEADER_WORDS). */
#define ST_SPARSE_ATTN_DENSE_THREADS 384
/* The registers a thread it must be compiled with: its warpgroups trade
 * registers by setmaxnreg within what the CTA got at launch (65536 / 384,
 * down to a multiple of 8); with fewer, the consumers would wait forever. */
#define ST_SPARSE_ATTN_DENSE_REGS 168
#define ST_SPARSE_ATTN_DENSE_SMEM(fp8) (2 * 128 * 128 * 2 + 2 * (2 * 128 * 128 * 2 + ((fp8) ? 1024 : 0)) + 1024)
#define ST_SPARSE_ATTN_DENSE_HEADER_WORDS (8 + 2 * 65)

typedef struct st_sparse_attn_plan {
  st_sparse_attn_params params;
  unsigned grid[3];
  unsigned block;
  unsigned smem_bytes;
  size_t workspace_bytes; /* tile: 0 */
  /* block-major only */
  int algo, chunk_q, max_keys, tokens, persistent; /* persistent: block CTAs a launch */
  int kv_maps;                                     /* bf16 on wgmma: params' k_map / v_map encoded at launch */
  int overlap;                                     /* merges on the caller's stream, the rest on a side stream */
  int merge_slots;                                 /* > 0: the merge by bulk copies (step 3), its slots    */
  int first_q;                                     /* tokens of the first chunk, 0: chunk_q                 */
  unsigned merge_smem, merge_grid_cap;             /* ... its dynamic shared memory and most CTAs a launch  */
  size_t half_bytes;                               /* a workspace half (offsets: in a half), from the scratch */
  st_tensor k_cache, v_cache;                      /* the views they map                                      */
  int q_maps;          /* two-pass bf16 wgmma (mtiles 2): params' q_map encoded at launch             */
  int part_maps;       /* ... with bf16 partials: params' part_map, per workspace half                */
  st_tensor q;         /* the view q_map maps                                                           */
  int64_t part_rows;   /* rows of a half's ws_part_o: entries x group                                   */
  int dense;           /* the dense tiles: steps 4 and 5 first, the dense kernel first (1) or last (2)  */
  int64_t dense_cands; /* ... over this many candidate tiles (params' dense_tiles a kv head and request) */
  unsigned dense_grid; /* ... its CTAs                                                                  */
  unsigned dense_smem; /* ... and their dynamic shared memory                                           */
  size_t off_dense;    /* ... their header, flags and list: after the halves         */
  int group, head_dim; /* q heads per kv head; D                                                        */
  size_t off_header, off_count, off_offset, off_item, off_key, off_rank, off_item_rec, off_part_ml, off_part_o;
} st_sparse_attn_plan;

/* sm_count: the device's SMs (block-major kernels are persistent: ctas
 * CTAs an SM, each walking work items); <= 0 counts as 1. */
st_status st_sparse_attn_plan_make(const st_sparse_attn_config *cfg, const st_sparse_attn_args *a, int sm_count,
                                   st_sparse_attn_plan *plan, st_err *err);

/* Launches the planned kernels on `stream`; `merge_fn` may be NULL for tile
 * variants, and `workspace` must hold plan->workspace_bytes (laid out as
 * ops/workspace.h says: block-major variants zero their counters in the
 * scratch at each chunk). `side` is needed only when
 * plan->overlap (else NULL is fine); its owner lets one launch enqueue on it
 * at a time. Work on the side stream is joined back into `stream` before
 * this returns, so `stream` alone orders what comes after. */
st_status st_sparse_attn_launch(const st_cu *cu, CUfunction main_fn, CUfunction merge_fn,
                                const st_sparse_attn_plan *plan, void *workspace, size_t workspace_bytes,
                                CUstream stream, const st_side_stream *side, st_err *err);

/* The dispatch key: "sparse_attn:B=4096,D=128,Hkv=2,Hq=32,dtype=bf16,topk=16",
 * B being total_q (the query tokens of the call: winners of the nearest
 * token count serve others), also as params. */
st_status st_sparse_attn_dispatch_key(const st_sparse_attn_args *a, char *key, size_t cap, st_params *fields,
                                      st_err *err);

#endif
