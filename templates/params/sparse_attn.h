/* params/sparse_attn.h - the argument block of the sparse_attn (prefill)
 * kernel.
 *
 * Plain C shared by the host launcher (runtime/ops/sparse_attn.c) and the
 * NVRTC-compiled kernel (templates/sparse_attn.cu), which takes it by
 * value. Strides are in elements; every innermost (head_dim) stride is 1.
 *
 * Query token i of request r (cu_seqlens_q[r] <= i < cu_seqlens_q[r+1])
 * sits at p_i = seq_lens[r] - q_len[r] + (i - cu_seqlens_q[r]). A CTA takes
 * TOKENS consecutive query tokens (a tile may straddle requests) and one kv
 * head. Field names of the cache views match the decode op's: the shared
 * block copy (common/kv_stage.cuh) reads either. */
#ifndef ST_SPARSE_ATTN_PARAMS_H
#define ST_SPARSE_ATTN_PARAMS_H

#include "common/st_types.h"

typedef struct st_sparse_attn_params {
  const void *q;               /* [total_q, Hq, D] bf16                            */
  const void *k_cache;         /* [pages, Hkv, 128, D] view, bf16 or fp8 e4m3      */
  const void *v_cache;         /* same shape and dtype                             */
  const float *k_scales;       /* [pages, Hkv, 128] view (scale_mode 2), else NULL */
  const float *v_scales;
  const int32_t *topk_idx;     /* [Hkv, total_q, topk]                             */
  const int32_t *block_table;  /* [R, bt_stride...]                                */
  const int32_t *cu_seqlens_q; /* [R+1]                                            */
  const int32_t *seq_lens;     /* [R]                                              */
  void *o;                     /* out [total_q, Hq, D] bf16                        */
  float *lse;                  /* out [total_q, Hq] or NULL                        */
  int64_t q_stride_row, q_stride_head;
  int64_t k_stride_page, k_stride_head, k_stride_token;
  int64_t v_stride_page, v_stride_head, v_stride_token;
  int64_t ks_stride_page, ks_stride_head, ks_stride_token;
  int64_t vs_stride_page, vs_stride_head, vs_stride_token;
  int64_t idx_stride_head, idx_stride_row;
  int64_t bt_stride;
  int64_t o_stride_row, o_stride_head;
  int64_t lse_stride_row, lse_stride_head;
  float score_scale_log2; /* sm_scale * log2(e) (* k_scale in scalar mode)     */
  float v_scale;          /* scalar mode: v_scale, else 1                      */
  int32_t scale_mode;     /* 0 none, 1 scalar, 2 tensor (st_kv_scale_mode)     */
  int32_t num_requests;   /* R                                                 */
  int32_t total_q;        /* cu_seqlens_q[R], as q.shape[0] says               */
  int32_t num_kv_heads;   /* Hkv                                               */
  int32_t topk;           /* entries per topk_idx row, <= the kernel's TOPK_CAP */
  int32_t max_blocks;     /* ceil(max_context / 128)                           */
  /* The block-major kernels only (templates/sparse_attn_block.cu): the
   * launcher runs the batch in chunks of query tokens [q0, q0 + nq), each
   * through four launches (count, scatter, blocks, merge); their lists and
   * partial results live in the caller's workspace. Entry e of a chunk is
   * (g * nq + token - q0) * topk + k; a key is (kv head, request, block)
   * numbered within the chunk's requests (see the template). */
  uint32_t *ws_header;    /* [8]: CTAs counted in, first request, requests, keys, items */
  int32_t *ws_count;      /* [max_keys] entries per key, zero between launches   */
  int32_t *ws_offset;     /* [max_keys + 1] entries of the keys before each key  */
  int32_t *ws_item;       /* [max_keys + 1] first work item of each key          */
  int32_t *ws_key;        /* [max_entries] key of each entry, -1: not valid      */
  int32_t *ws_rank;       /* [max_entries] its place in its key's list << 8 | visible tokens - 1 */
  int32_t *ws_item_rec;   /* [max_items][(4 + tokens) rounded up to 4] each work item: key, page,
                             entries, 0, then per entry (token - q0) * topk + k) << 8 | visible
                             tokens - 1 (-1 past its entries) */
  float *ws_part_ml;      /* [max_entries][GROUP] (m log2 units, l) per q head   */
  void *ws_part_o;        /* [max_entries][GROUP][D] O / l, bf16 or fp32         */
  int32_t q0, nq;         /* this chunk's query tokens                          */
  int32_t step;           /* st_sparse_attn_merge: 0 count, 1 scatter, 2 merge, 3 bulk merge,
                             4 dense find, 5 dense place                          */
  int32_t merge_slots;    /* step 3: partial copies in flight a merge CTA      */
  /* Block-major bf16 kernels on wgmma: k_cache and v_cache as tensor maps
   * (runtime/ops/tensor_map.c: 128-byte x 128-row boxes of one head of one
   * page), set at launch; zeros elsewhere. */
  st_tensor_map k_map, v_map;
  /* Two-pass bf16 wgmma kernels (mtiles 2): q as [total_q, Hq, D] in boxes
   * of one 128-byte panel of a token's GROUP heads, and (bf16 partials) the
   * workspace half's ws_part_o as [entries * GROUP, D] rows in boxes of one
   * panel of min(GROUP, 16) rows; set at launch, zeros elsewhere. */
  st_tensor_map q_map, part_map;
  /* Launch parameter `dense` (templates/sparse_attn_dense.cuh): candidate
   * tiles of DENSE_TOKENS tokens, dense_tiles a (kv head, request), 0: no
   * dense path. Outside the chunks' workspace halves. */
  int32_t dense_tiles;
  uint32_t *ws_dense_header; /* counts, offsets and the kernel's counter      */
  int32_t *ws_dense;         /* [Hkv][R][dense_tiles] rank << 8 | blocks, 0: not dense */
  int32_t *ws_dense_list;    /* the dense tiles' candidate indices, heaviest first */
} st_sparse_attn_params;

#endif
