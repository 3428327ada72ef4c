// sparse_attn.cu - block-sparse GQA attention for a varlen prefill batch.
//
// Grid (ceil(total_q / TOKENS), Hkv); THREADS = 32 * WARPS threads. CTA
// (tile, g) takes the TOKENS query tokens tile*TOKENS .. and kv head g: its
// q tile has TOKENS * GROUP rows, row m = token t * GROUP + head h, padded
// with zero rows to whole warps' MTILES 16-row m-tiles.
// Neighbouring tokens select mostly the same blocks, so the CTA walks the
// union of its tokens' selected blocks once: each block's K and V rows are
// copied into shared memory once (common/kv_stage.cuh) and every warp that
// has a row selecting it multiplies its 16 (MTILES 2: 32) rows against all
// 128 tokens (common/attn_tile.cuh, attn_tile_x2.cuh): the matrix products
// are ROWS tall instead of GROUP, and a block costs one read for the whole
// tile. A row masks blocks its token did not select (skipped outright when
// none of a warp's rows did), positions past its own (causal inside the
// query's own block), and adds log2(n) to the scores of a block its
// selection lists n > 1 times.
//
// The union: every valid (token, entry) pair (0 <= block j < nb(p)) is
// inserted by its logical block (request * max_blocks + j) into a shared-
// memory hash table; the entry with the lowest (token, entry) index of a
// block owns it, and owners are numbered in that order (deterministic order
// of blocks, so of the floating-point sums); then every pair adds itself to
// the cell (union block, token): count << 16 | visible tokens. Logical, not
// physical: two blocks a block table maps to one page hold different
// positions (v1 keyed pages and merged them, found by the tuner's random
// block tables).
//
// Bytes per CTA: (union blocks) * 128 * D * 2 * elem of K and V, plus q and
// o; FLOPs: 4 * 16 * 128 * D per (block, m-tile of a warp with a selecting
// row).

// The compile-time constants ST_P_*: rendering puts a variant's values
// in place of this include (generator/render.lua).
#include "defaults/sparse_attn.cuh"
constexpr int IS_FP8 = ST_P_IS_FP8;
constexpr int HEAD_DIM = ST_P_HEAD_DIM;
constexpr int GROUP = ST_P_GROUP;
constexpr int TOKENS = ST_P_TOKENS;
constexpr int TOPK_CAP = ST_P_TOPK;
constexpr int STAGES = ST_P_STAGES;
constexpr int WARPS = ST_P_WARPS;
constexpr int MTILES = ST_P_MTILES; // 16-row m-tiles a warp takes (2: common/attn_tile_x2.cuh)

// The argument block first: it brings the fixed-width integer types the
// common headers use under NVRTC (no C library there).
#include "params/sparse_attn.h"
#include "common/params_gate.cuh"
#include "common/attn_tile.cuh"
#include "common/attn_tile_x2.cuh"
#include "common/kv_stage.cuh"
#include "common/varlen.cuh"

ST_PARAMS_GATE(st_sparse_attn_params)

constexpr int THREADS = 32 * WARPS;
constexpr int REAL_ROWS = TOKENS * GROUP;        // q rows of the tile's tokens
constexpr int WARP_ROWS = 16 * MTILES;
constexpr int ROWS = (REAL_ROWS + WARP_ROWS - 1) / WARP_ROWS * WARP_ROWS; // whole warps' m-tiles (zero rows)
constexpr int MATH_WARPS = ROWS / WARP_ROWS;
constexpr int BLOCK_TOKENS = 128;
constexpr int ROW_CHUNKS = HEAD_DIM / 8;
constexpr int DT = HEAD_DIM / 8;
// Tokens of a block one attend step covers: as many as registers allow
// (common/attn_tile_x2.cuh).
constexpr int REG_BUDGET = 65536 / THREADS < 255 ? 65536 / THREADS : 255;
constexpr int STEP_TOKENS = st_attend_step_tokens<HEAD_DIM>(MTILES, REG_BUDGET);
constexpr int ENTRIES = TOKENS * TOPK_CAP; // (token, entry) pairs, and the most union blocks
constexpr int HASH_SLOTS = 2 * ENTRIES;    // power of two: TOKENS and TOPK_CAP are
using st_kv = st_kv_stages<IS_FP8, HEAD_DIM, STAGES, THREADS, 0, 0, 1>; // the stage is refilled before the math
// Shared memory (dynamic), in this order; runtime/ops/sparse_attn.c computes
// the same total (st_sparse_attn_smem_bytes); all pieces 16-byte multiples.
//   q tile      [ROWS][HEAD_DIM] bf16, swizzled
//   KV region   st_kv::BYTES
//   entries     [ENTRIES] logical block of each (token, entry) pair (-1: invalid), [ENTRIES] its visible tokens
//   hash        [HASH_SLOTS] logical block, [HASH_SLOTS] first entry index, [HASH_SLOTS] union index
//   union       [ENTRIES] page, [ENTRIES] most visible tokens
//   cells       [ENTRIES][TOKENS] count << 16 | visible tokens
//   tokens      [TOKENS] request, [TOKENS] position (int)
constexpr int Q_BYTES = ROWS * HEAD_DIM * 2;
constexpr int LIST_BYTES = ENTRIES * 4 * 4 + HASH_SLOTS * 4 * 3 + ENTRIES * TOKENS * 4 + TOKENS * 8;
constexpr int SMEM_BYTES = Q_BYTES + st_kv::BYTES + LIST_BYTES;
constexpr float LN2 = 0.69314718055994530942f;

static_assert(MATH_WARPS <= WARPS, "a warp per MTILES m-tiles");
static_assert(MTILES == 1 || (MTILES == 2 && HEAD_DIM <= 128), "two m-tiles hold 2 x HEAD_DIM / 2 output registers");
static_assert((TOKENS & (TOKENS - 1)) == 0 && (TOPK_CAP & (TOPK_CAP - 1)) == 0, "the hash needs a power of two");
static_assert(HEAD_DIM % 64 == 0, "whole groups of 8 swizzled chunks per row");

struct st_lists {
  int32_t *ent_block, *ent_ntok;             // [ENTRIES]
  int32_t *hash_block, *hash_first, *hash_u; // [HASH_SLOTS]
  int32_t *u_page, *u_ntok;                  // [ENTRIES]
  uint32_t *cell;                            // [ENTRIES][TOKENS]
  int32_t *tok_r, *tok_p;                    // [TOKENS]
};

__device__ __forceinline__ st_lists st_lists_at(char *base) {
  st_lists l;
  int32_t *w = (int32_t *)base;
  l.ent_block = w;
  l.ent_ntok = w += ENTRIES;
  l.hash_block = w += ENTRIES;
  l.hash_first = w += HASH_SLOTS;
  l.hash_u = w += HASH_SLOTS;
  l.u_page = w += HASH_SLOTS;
  l.u_ntok = w += ENTRIES;
  l.cell = (uint32_t *)(w += ENTRIES);
  l.tok_r = (int32_t *)(l.cell + ENTRIES * TOKENS);
  l.tok_p = l.tok_r + TOKENS;
  return l;
}

__device__ __forceinline__ int st_hash_slot(int32_t block) {
  return (int)(((uint32_t)block * 2654435761u) >> 7) & (HASH_SLOTS - 1);
}

// The request and position of every token of the tile (binary search of
// cu_seqlens_q: the last request starting at or before the token).
__device__ void st_locate_tokens(const st_sparse_attn_params &p, int tile, const st_lists &l) {
  for (int t = threadIdx.x; t < TOKENS; t += THREADS) {
    const int i = tile * TOKENS + t;
    int r = -1, pos = -1;
    if (i < p.total_q) {
      r = st_request_of(p.cu_seqlens_q, p.num_requests, i);
      pos = st_position_in(p.cu_seqlens_q, p.seq_lens, r, i);
    }
    l.tok_r[t] = r;
    l.tok_p[t] = pos;
  }
}

// Reads the tile's selections and builds the union of their blocks (see the
// file comment). Returns the number of union blocks (every thread).
__device__ int st_build_union(const st_sparse_attn_params &p, int tile, int g, const st_lists &l, int *s_count) {
  for (int e = threadIdx.x; e < HASH_SLOTS; e += THREADS) {
    l.hash_block[e] = -1;
    l.hash_first[e] = ENTRIES;
  }
  for (int e = threadIdx.x; e < ENTRIES * TOKENS; e += THREADS) l.cell[e] = 0u;
  __syncthreads();
  // Entries and hash keys.
  for (int e = threadIdx.x; e < ENTRIES; e += THREADS) {
    const int t = e / TOPK_CAP, k = e % TOPK_CAP, i = tile * TOKENS + t, pos = l.tok_p[t];
    int32_t block = -1, ntok = 0;
    if (k < p.topk && pos >= 0) {
      const int32_t j = p.topk_idx[(int64_t)g * p.idx_stride_head + (int64_t)i * p.idx_stride_row + k];
      if (j >= 0 && j <= pos / BLOCK_TOKENS && j < p.max_blocks) {
        block = l.tok_r[t] * p.max_blocks + j;
        ntok = min(BLOCK_TOKENS, pos - j * BLOCK_TOKENS + 1);
      }
    }
    l.ent_block[e] = block;
    l.ent_ntok[e] = ntok;
    if (block < 0) continue;
    for (int s = st_hash_slot(block);; s = (s + 1) & (HASH_SLOTS - 1)) {
      const int32_t prev = atomicCAS(&l.hash_block[s], -1, block);
      if (prev == -1 || prev == block) {
        atomicMin(&l.hash_first[s], e);
        break;
      }
    }
  }
  __syncthreads();
  // Owners numbered in entry order by warp 0.
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    int count = 0;
    for (int e0 = 0; e0 < ENTRIES; e0 += 32) {
      const int e = e0 + lane;
      const int32_t block = e < ENTRIES ? l.ent_block[e] : -1;
      int s = -1;
      if (block >= 0)
        for (s = st_hash_slot(block); l.hash_block[s] != block; s = (s + 1) & (HASH_SLOTS - 1)) {
        }
      const bool owner = block >= 0 && l.hash_first[s] == e;
      const uint32_t mask = __ballot_sync(0xffffffffu, owner);
      if (owner) {
        const int u = count + __popc(mask & ((1u << lane) - 1u));
        l.hash_u[s] = u;
        const int r = block / p.max_blocks;
        l.u_page[u] = p.block_table[(int64_t)r * p.bt_stride + (block - r * p.max_blocks)];
        l.u_ntok[u] = 0;
      }
      count += __popc(mask);
    }
    if (lane == 0) *s_count = count;
  }
  __syncthreads();
  // Cells and the most visible tokens of each union block.
  for (int e = threadIdx.x; e < ENTRIES; e += THREADS) {
    const int32_t block = l.ent_block[e];
    if (block < 0) continue;
    int s = st_hash_slot(block);
    while (l.hash_block[s] != block) s = (s + 1) & (HASH_SLOTS - 1);
    const int u = l.hash_u[s], t = e / TOPK_CAP, ntok = l.ent_ntok[e];
    atomicAdd(&l.cell[u * TOKENS + t], (1u << 16) + (uint32_t)ntok);
    atomicMax(&l.u_ntok[u], ntok);
  }
  __syncthreads();
  return *s_count;
}

// Row rr of this lane in the m-tile of rows m0 ..: the visible-token limit
// and score bias of union block u (0 and anything: not selected).
__device__ __forceinline__ void st_row_mask(const st_lists &l, int u, int m0, int (&lim)[2], float (&bias)[2]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    const int m = m0 + (lane >> 2) + rr * 8, t = m / GROUP;
    const uint32_t cell = m < REAL_ROWS ? l.cell[u * TOKENS + t] : 0u; // padding rows see nothing
    const uint32_t count = cell >> 16, ntok = cell & 0xffffu;
    lim[rr] = count == 0u ? 0 : (int)(count == 1u ? ntok : ntok / count);
    bias[rr] = count > 1u ? __log2f((float)count) : 0.f;
  }
}

// The lane's two rows of the m-tile of rows m0 ..: o = O / l (times the
// scalar V scale), lse.
__device__ __forceinline__ void st_write_rows(const st_sparse_attn_params &p, int tile, int g,
                                              st_softmax_state<HEAD_DIM> &st, int m0) {
  const int lane = threadIdx.x & 31;
  st_softmax_finish_l(st);
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    const int m = m0 + (lane >> 2) + rr * 8, t = m / GROUP, h = m % GROUP, i = tile * TOKENS + t;
    if (m >= REAL_ROWS || i >= p.total_q) continue;
    const float l_row = st.l[rr];
    const float inv = l_row > 0.f ? p.v_scale / l_row : 0.f;
    const int head = g * GROUP + h;
    uint16_t *out = (uint16_t *)p.o + (int64_t)i * p.o_stride_row + (int64_t)head * p.o_stride_head;
#pragma unroll
    for (int dt = 0; dt < DT; dt++) {
      const uint32_t two = st_pack_bf16(st.o[dt][rr * 2] * inv, st.o[dt][rr * 2 + 1] * inv);
      const int d = dt * 8 + 2 * (lane & 3);
      out[d] = (uint16_t)(two & 0xffffu);
      out[d + 1] = (uint16_t)(two >> 16);
    }
    if ((lane & 3) == 0 && p.lse)
      p.lse[(int64_t)i * p.lse_stride_row + (int64_t)head * p.lse_stride_head] =
          l_row > 0.f ? (st.m[rr] + __log2f(l_row)) * LN2 : -ST_INF;
  }
}

extern "C" __global__ void __launch_bounds__(THREADS) st_sparse_attn_main(const __grid_constant__ st_sparse_attn_params p) {
  extern __shared__ __align__(128) char s_dyn[];
  __shared__ int s_count;
  char *q_smem = s_dyn;
  char *region = s_dyn + Q_BYTES;
  const st_lists l = st_lists_at(region + st_kv::BYTES);
  const int tile = blockIdx.x, g = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  if (threadIdx.x == 0) {
    unsigned dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    if (dyn < (unsigned)SMEM_BYTES) __trap(); // the launcher's layout disagrees with this kernel's
  }

  st_locate_tokens(p, tile, l);
  // q rows: row m = token t * GROUP + head h.
  const uint32_t q_tile = st_smem_addr(q_smem);
  for (int e = threadIdx.x; e < ROWS * ROW_CHUNKS; e += THREADS) {
    const int m = e / ROW_CHUNKS, c = e % ROW_CHUNKS, t = m / GROUP, h = m % GROUP, i = tile * TOKENS + t;
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (m < REAL_ROWS && i < p.total_q)
      v = *(const uint4 *)((const uint16_t *)p.q + (int64_t)i * p.q_stride_row +
                           (int64_t)(g * GROUP + h) * p.q_stride_head + c * 8);
    *(uint4 *)(q_smem + st_swizzle_offset<ROW_CHUNKS>(m, c)) = v;
  }
  __syncthreads(); // token positions for the union
  const int nblk = st_build_union(p, tile, g, l, &s_count);

  st_softmax_state<HEAD_DIM> st[MTILES];
#pragma unroll
  for (int mt = 0; mt < MTILES; mt++) st_softmax_init(st[mt]);
  const float scale_log2 = p.score_scale_log2;
#pragma unroll
  for (int s = 0; s < STAGES; s++) {
    if (s < nblk) st_kv::issue(p, g, l.u_page[s], l.u_ntok[s], region, s);
    st_cp_async_commit();
  }
  for (int u = 0; u < nblk; u++) {
    const int buf = u % STAGES;
    st_cp_async_wait<STAGES - 1>();
    __syncthreads(); // block u is in shared memory, for every thread's copies
    if (IS_FP8) {
      st_kv::widen(p, region, buf);
      __syncthreads();
      if (u + STAGES < nblk) st_kv::issue(p, g, l.u_page[u + STAGES], l.u_ntok[u + STAGES], region, buf);
      st_cp_async_commit();
    }
    if (warp < MATH_WARPS) {
      int lim[MTILES][2];
      float bias[MTILES][2];
      bool any = false;
#pragma unroll
      for (int mt = 0; mt < MTILES; mt++) {
        st_row_mask(l, u, warp * WARP_ROWS + mt * 16, lim[mt], bias[mt]);
        any |= lim[mt][0] > 0 || lim[mt][1] > 0;
      }
      if (__any_sync(0xffffffffu, any)) {
        const uint32_t k_tile = st_kv::k_tile(region, buf);
        const float *k_scale = st_kv::wide_k_scales(p, region, buf);
        st_with_k_scale(k_scale, [&](auto flag) {
          constexpr bool KS = decltype(flag)::value;
          for (int tok0 = 0; tok0 < BLOCK_TOKENS; tok0 += STEP_TOKENS) {
            if (MTILES == 1)
              st_attend_tile<HEAD_DIM, STEP_TOKENS, KS>(q_tile, warp * WARP_ROWS, k_tile, k_tile + st_kv::TILE_BYTES,
                                                        tok0, lim[0], bias[0], scale_log2, k_scale, st[0]);
            else
              st_attend_tile_x2<HEAD_DIM, STEP_TOKENS, KS>(q_tile, warp * WARP_ROWS, k_tile,
                                                           k_tile + st_kv::TILE_BYTES, tok0, lim[0], lim[MTILES - 1],
                                                           bias[0], bias[MTILES - 1], scale_log2, k_scale, st[0],
                                                           st[MTILES - 1]);
          }
        });
      }
    }
    __syncthreads(); // every warp is done with the tiles
    if (!IS_FP8) {
      if (u + STAGES < nblk) st_kv::issue(p, g, l.u_page[u + STAGES], l.u_ntok[u + STAGES], region, buf);
      st_cp_async_commit();
    }
  }
  if (warp >= MATH_WARPS) return;

  // Each lane writes its two rows of each m-tile: o = O / l (times the
  // scalar V scale), lse.
#pragma unroll
  for (int mt = 0; mt < MTILES; mt++) st_write_rows(p, tile, g, st[mt], warp * WARP_ROWS + mt * 16);
}
