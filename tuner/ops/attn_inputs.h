/* ops/attn_inputs.h - the K/V side of an attention case, shared by the
 * sparse_attn and sparse_attn_decode harnesses: a paged pool in one of the
 * two layouts (sized as docs/method.md says), fp8 scales, selections as
 * the indexer returns them, and the cache views for the reference (element
 * strides) and the kernels (st_tensor). */
#ifndef ST_OPS_ATTN_INPUTS_H
#define ST_OPS_ATTN_INPUTS_H

#include <stdint.h>

#include "cuda_driver.h"
#include "error.h"
#include "params.h"
#include "sparsetune.h"

typedef struct st_attn_kv_case {
  st_dtype dtype; /* of the cache: bf16 or fp8 e4m3 */
  st_kv_scale_mode scale;
  int one_scale;   /* shape scale=one: TENSOR views with every stride 0 over
                      d_scales' two floats (K's, V's), as vLLM passes scalar
                      scale tensors; the reference runs them as SCALAR */
  int interleaved; /* layout (pages, Hkv, 128, 2*D); else (pages, 2, 128, Hkv, D) */
  int Hkv, D;
  int64_t pages;
  int64_t stride[3];      /* page, head, token of both views, in elements */
  int64_t v_offset;       /* elements from the K view's start to the V view's */
  float k_scale, v_scale; /* SCALAR and one: 0.75 and 1.5; else 1 */
  void *h_pool;           /* [pages * 2 * 128 * Hkv * D] in the layout */
  float *h_scales;        /* TENSOR: [2][pages][128][Hkv] (K then V, slot-major); one: K's, V's */
  CUdeviceptr d_pool, d_scales;
} st_attn_kv_case;

/* Reads the shape fields dtype, scale, layout, D and Hkv (and checks sel,
 * returned in *sel: random, holes, local or repeats). */
st_status st_attn_kv_read_shape(const st_params *shape, st_attn_kv_case *kv, const char **sel, st_err *err);

/* The softmax scale of every attention case, 1/sqrt(D): the reference's,
 * and the call's sm_scale as fp32. */
double st_attn_sm_scale(const st_attn_kv_case *kv);

/* Bytes of one page of the pool (K and V of every kv head). */
int64_t st_attn_kv_page_bytes(const st_attn_kv_case *kv);

/* The pool's geometry: `pages` pages in the shape's layout (strides and
 * v_offset). */
void st_attn_kv_layout(st_attn_kv_case *kv, int64_t pages);

/* Allocates and fills the pool that st_attn_kv_layout laid out (K, V
 * uniform: bf16 in [-1, 1), fp8 in [-4, 4)) and, in TENSOR mode, scales in
 * [0.25, 2). */
st_status st_attn_kv_fill(st_attn_kv_case *kv, uint64_t seed, int threads, st_err *err);

/* Writes NaN into K and V of every kv head at slots `from` .. 127 of
 * `page` (filled, not uploaded yet): the slots past a request's length,
 * which a kernel may copy but must never let into its products (0 * NaN
 * is NaN). */
void st_attn_kv_poison_tail(st_attn_kv_case *kv, int64_t page, int from);

st_status st_attn_kv_upload(const st_cu *cu, st_attn_kv_case *kv, st_err *err);

/* Frees host and device memory (cu may be NULL when nothing was uploaded). */
void st_attn_kv_free(const st_cu *cu, st_attn_kv_case *kv);

/* The views of the args: k_cache, v_cache, k_scales, v_scales (those two
 * in TENSOR mode only, else left without dims), the scale mode and scalar
 * scales of an st_sparse_attn_args or st_sparse_attn_decode_args (same
 * field names); every data pointer NULL (the geometry of a laid-out pool). */
void st_attn_kv_tensors(const st_attn_kv_case *kv, st_tensor *k, st_tensor *v, st_tensor *ks, st_tensor *vs);
#define ST_ATTN_KV_ARGS(a, kv)                                                                                         \
  do {                                                                                                                 \
    st_attn_kv_tensors((kv), &(a)->k_cache, &(a)->v_cache, &(a)->k_scales, &(a)->v_scales);                            \
    (a)->scale_mode = (kv)->scale;                                                                                     \
    (a)->k_scale = (kv)->k_scale;                                                                                      \
    (a)->v_scale = (kv)->v_scale;                                                                                      \
  } while (0)

/* Points those views at the uploaded pool and scales. */
void st_attn_kv_point(const st_attn_kv_case *kv, st_tensor *k, st_tensor *v, st_tensor *ks, st_tensor *vs);
#define ST_ATTN_KV_POINT(a, kv) st_attn_kv_point((kv), &(a)->k_cache, &(a)->v_cache, &(a)->k_scales, &(a)->v_scales)

/* The host views of a reference input (st_ref_sparse_attn or
 * st_ref_sparse_attn_decode: same field names). */
#define ST_ATTN_KV_REF(ref, kv)                                                                                        \
  do {                                                                                                                 \
    (ref)->kv_dtype = (kv)->dtype;                                                                                     \
    (ref)->Hkv = (kv)->Hkv;                                                                                            \
    (ref)->D = (kv)->D;                                                                                                \
    (ref)->pages = (kv)->pages;                                                                                        \
    (ref)->k_cache = (kv)->h_pool;                                                                                     \
    (ref)->v_cache = (const char *)(kv)->h_pool + (size_t)(kv)->v_offset * (size_t)st_dtype_bytes((kv)->dtype);        \
    for (int i_ = 0; i_ < 3; i_++) (ref)->k_stride[i_] = (ref)->v_stride[i_] = (kv)->stride[i_];                       \
    (ref)->scale_mode = (kv)->one_scale ? ST_KV_SCALE_SCALAR : (kv)->scale;                                            \
    (ref)->k_scale = (kv)->k_scale;                                                                                    \
    (ref)->v_scale = (kv)->v_scale;                                                                                    \
    if ((kv)->h_scales && !(kv)->one_scale) {                                                                          \
      (ref)->k_scales = (kv)->h_scales;                                                                                \
      (ref)->v_scales = (kv)->h_scales + (size_t)(kv)->pages * 128 * (size_t)(kv)->Hkv;                                \
      const int64_t ss_[3] = {(int64_t)128 * (kv)->Hkv, 1, (kv)->Hkv};                                                 \
      for (int i_ = 0; i_ < 3; i_++) (ref)->ks_stride[i_] = (ref)->vs_stride[i_] = ss_[i_];                            \
    }                                                                                                                  \
  } while (0)

/* One topk row for a query at position `pos` of a request whose block table
 * has `max_blocks` columns, as the indexer would return it (entry order
 * shuffled, so no kernel can lean on it):
 *   random  block 0, the query's own block and distinct random other
 *           visible blocks (all visible blocks when fewer than topk), -1 after;
 *   holes   the same with about a quarter of the entries -1 or past the
 *           query's own block (both must be skipped);
 *   local   the last topk visible blocks;
 *   repeats random, with about an eighth of the entries a copy of another
 *           entry of the row (a block listed twice counts twice). */
void st_attn_make_selection(int32_t *row, int topk, int pos, int max_blocks, const char *sel, uint64_t *rng);

/* Whole 128-token blocks a selection row makes a query at `pos` read. */
int st_attn_selected_blocks(const int32_t *row, int topk, int pos);

#endif
