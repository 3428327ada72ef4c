// sparse_attn_decode.cu - block-sparse GQA attention for a decode batch.
//
// Work item (row, g): query token row = r*qlen + t of request r at position
// p = seq_lens[r] - qlen + t, and the GROUP q heads of kv head g. They
// attend to the keys of the blocks topk_idx[g][row][:] lists (entries < 0
// and blocks past p's own skipped; positions > p masked).
//
// Grid (splits, R*qlen, Hkv); THREADS = 32 * WARPS_N * M_TILES threads. CTA
// (s, row, g) takes entries [s*blocks_per_split, (s+1)*blocks_per_split) of
// the row's list. Per block it copies the 128 K and 128 V rows of kv head g
// into shared memory (cp.async, STAGES blocks in flight; fp8 rows land in a
// staging buffer and are widened to bf16 with their scales), then warp
// (wm, wn) computes for q heads wm*16 .. wm*16+15 and tokens
// wn*WARP_TOKENS .. +WARP_TOKENS: S = q K^T on tensor cores (bf16 m16n8k16,
// q and K from ldmatrix), an online softmax in registers (base 2, scores
// pre-scaled by sm_scale*log2 e), and O += P V with P re-used from the
// accumulator registers as the A operand and V from ldmatrix.trans. At the
// end the WARPS_N warps of an m-tile combine their (m, l, O) in shared
// memory. One split: the CTA writes o and lse. Several: each CTA writes
// its partial (O, m, l) to the workspace and the last CTA of the item
// (single) or st_sparse_attn_decode_merge (split) combines them.
//
// Bytes per item: (valid selected blocks) * 128 * D * 2 (K and V) * elem,
// plus q and o; FLOPs: 4 * GROUP * 128 * D per block. At GROUP 16 that is
// 16 FLOPs per byte of bf16 KV: bandwidth-bound on tensor cores.

constexpr int IS_FP8 = ${is_fp8};
constexpr int HEAD_DIM = ${head_dim};
constexpr int GROUP = ${group};
constexpr int M_TILES = ${m_tiles};
constexpr int WARPS_N = ${warps_n};
constexpr int STAGES = ${stages};
constexpr int ALGO_SPLIT = ${algo_split};

#include "params/sparse_attn_decode.h"
#include "common/attn_tile.cuh"
#include "common/kv_stage.cuh"

constexpr int WARPS = WARPS_N * M_TILES;
constexpr int THREADS = 32 * WARPS;
constexpr int BLOCK_TOKENS = 128;
constexpr int MAX_TOPK = 64;
constexpr int WARP_TOKENS = BLOCK_TOKENS / WARPS_N;
constexpr int DT = HEAD_DIM / 8;         // output tiles (8 dims)
constexpr int ROW_CHUNKS = HEAD_DIM / 8; // 16-byte chunks of a bf16 row
using st_kv = st_kv_stages<IS_FP8, HEAD_DIM, STAGES, THREADS>;

// Shared memory (dynamic), in this order; runtime/ops/sparse_attn_decode.c
// computes the same total (st_sparse_attn_decode_smem_bytes).
//   q tile      [M_TILES*16][HEAD_DIM] bf16, swizzled, heads >= GROUP zero
//   KV region   bf16: STAGES x (K tile, V tile)
//               fp8:  STAGES x (raw K+V rows, K+V scales), then one K and V tile
//               after the last block: per warp (O [16][HEAD_DIM], m[16], l[16]) fp32
//   block list  [MAX_TOPK] pages, [MAX_TOPK] visible tokens
constexpr int Q_BYTES = M_TILES * 16 * HEAD_DIM * 2;
constexpr int KV_BYTES = st_kv::BYTES;
constexpr int COMBINE_BYTES = WARPS * 16 * (HEAD_DIM + 2) * 4;
constexpr int REGION_BYTES = KV_BYTES > COMBINE_BYTES ? KV_BYTES : COMBINE_BYTES;
constexpr int SMEM_BYTES = Q_BYTES + REGION_BYTES + MAX_TOPK * 8;
constexpr float LN2 = 0.69314718055994530942f;
// The merge's weights: (m or weight, l) per split and q head.
constexpr int MAX_SPLITS = MAX_TOPK;
constexpr int MERGE_SMEM = 2 * MAX_SPLITS * GROUP * 4;
static_assert(MERGE_SMEM <= REGION_BYTES, "the merging CTA reuses its tile region");

static_assert(HEAD_DIM % 64 == 0, "whole groups of 8 swizzled chunks per row");
static_assert(WARP_TOKENS % 16 == 0, "a warp covers whole 16-token k-steps");
static_assert(GROUP <= 16 * M_TILES && GROUP > 16 * (M_TILES - 1), "M_TILES = ceil(GROUP / 16)");

struct st_item {
  int row, g, r, pos; // pos < 0: nothing visible (padding)
  int64_t id;         // row * Hkv + g
};

__device__ __forceinline__ st_item st_item_of(const st_sparse_attn_decode_params &p, int row, int g) {
  st_item it;
  it.row = row;
  it.g = g;
  it.r = row / p.qlen;
  it.pos = p.seq_lens[it.r] - p.qlen + (row - it.r * p.qlen);
  it.id = (int64_t)row * p.num_kv_heads + g;
  return it;
}

// Writes o (normalized, times the scalar V scale) of q head h, dimensions
// d .. d+3, and (with d == 0) its lse, from the combined state (m in log2
// units, l, unnormalized o).
__device__ __forceinline__ void st_write_out(const st_sparse_attn_decode_params &p, const st_item &it, int h, int d,
                                             float m, float l, float4 o) {
  const int head = it.g * GROUP + h;
  uint16_t *out = (uint16_t *)p.o + (int64_t)it.row * p.o_stride_row + (int64_t)head * p.o_stride_head + d;
  const float inv = l > 0.f ? p.v_scale / l : 0.f;
  const uint32_t lo = st_pack_bf16(o.x * inv, o.y * inv), hi = st_pack_bf16(o.z * inv, o.w * inv);
  out[0] = (uint16_t)(lo & 0xffffu);
  out[1] = (uint16_t)(lo >> 16);
  out[2] = (uint16_t)(hi & 0xffffu);
  out[3] = (uint16_t)(hi >> 16);
  if (d == 0 && p.lse)
    p.lse[(int64_t)it.row * p.lse_stride_row + (int64_t)head * p.lse_stride_head] =
        l > 0.f ? (m + __log2f(l)) * LN2 : -ST_INF;
}

// Combines the splits' partial states of an item from the workspace (read
// from L2: other CTAs of this launch or the previous one wrote them), with
// `scratch` (MERGE_SMEM bytes of shared memory) for the splits' weights.
// The (m, l) pairs are read once, not once per output dimension (v1 read
// them per dimension in a dependent loop: 16 splits cost ~20 us at B = 1),
// and each thread's partial-output loads are independent of each other.
__device__ void st_merge_splits(const st_sparse_attn_decode_params &p, const st_item &it, float *scratch) {
  const int64_t base = it.id * p.splits;
  const int splits = p.splits;
  float *w = scratch;                       // [splits][GROUP]: m, then the weight 2^(m_s - M) / L
  float *l_s = scratch + MAX_SPLITS * GROUP; // [splits][GROUP]
  for (int e = threadIdx.x; e < splits * GROUP; e += THREADS) {
    const int64_t ps = base * GROUP + e; // split e / GROUP, head e % GROUP: the workspace's order
    w[e] = __ldcg(p.part_ml + ps * 2);
    l_s[e] = __ldcg(p.part_ml + ps * 2 + 1);
  }
  __syncthreads();
  for (int h = threadIdx.x; h < GROUP; h += THREADS) {
    float m = -ST_INF, l = 0.f;
    for (int s = 0; s < splits; s++) m = fmaxf(m, w[s * GROUP + h]);
    for (int s = 0; s < splits; s++) {
      const float ms = w[s * GROUP + h];
      const float wt = ms == -ST_INF ? 0.f : exp2f(ms - m);
      l += l_s[s * GROUP + h] * wt;
      w[s * GROUP + h] = wt;
    }
    const float inv = l > 0.f ? 1.f / l : 0.f;
    for (int s = 0; s < splits; s++) w[s * GROUP + h] *= inv;
    if (p.lse)
      p.lse[(int64_t)it.row * p.lse_stride_row + (int64_t)(it.g * GROUP + h) * p.lse_stride_head] =
          l > 0.f ? (m + __log2f(l)) * LN2 : -ST_INF;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < GROUP * HEAD_DIM / 4; e += THREADS) {
    const int h = e / (HEAD_DIM / 4), d = (e - h * (HEAD_DIM / 4)) * 4;
    float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 8
    for (int s = 0; s < splits; s++) {
      const float4 v = __ldcg((const float4 *)(p.part_o + ((base + s) * GROUP + h) * HEAD_DIM + d));
      const float wt = w[s * GROUP + h];
      o.x += v.x * wt;
      o.y += v.y * wt;
      o.z += v.z * wt;
      o.w += v.w * wt;
    }
    // The weights hold 1 / L already: write with l = 1 (lse was written above).
    uint16_t *out = (uint16_t *)p.o + (int64_t)it.row * p.o_stride_row + (int64_t)(it.g * GROUP + h) * p.o_stride_head + d;
    const uint32_t lo = st_pack_bf16(o.x * p.v_scale, o.y * p.v_scale), hi = st_pack_bf16(o.z * p.v_scale, o.w * p.v_scale);
    out[0] = (uint16_t)(lo & 0xffffu);
    out[1] = (uint16_t)(lo >> 16);
    out[2] = (uint16_t)(hi & 0xffffu);
    out[3] = (uint16_t)(hi >> 16);
  }
}

extern "C" __global__ void __launch_bounds__(THREADS) st_sparse_attn_decode_main(const st_sparse_attn_decode_params p) {
  extern __shared__ __align__(128) char s_dyn[];
  __shared__ int s_nblk, s_last;
  char *q_smem = s_dyn;
  char *region = s_dyn + Q_BYTES;
  int32_t *s_page = (int32_t *)(region + REGION_BYTES);
  int32_t *s_ntok = s_page + MAX_TOPK;
  const int split = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const st_item it = st_item_of(p, blockIdx.y, blockIdx.z);
  if (threadIdx.x == 0) {
    unsigned dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    if (dyn < (unsigned)SMEM_BYTES) __trap(); // the launcher's layout disagrees with this kernel's
  }

  // The CTA's blocks, compacted: valid entries only, with their page and
  // visible token count (a padding row reads nothing).
  if (warp == 0) {
    const int e0 = split * p.blocks_per_split, e1 = min(e0 + p.blocks_per_split, p.topk);
    const int nb = it.pos >= 0 ? min(it.pos / BLOCK_TOKENS + 1, p.max_blocks) : 0;
    const int32_t *sel = p.topk_idx + (int64_t)it.g * p.idx_stride_head + (int64_t)it.row * p.idx_stride_row;
    int n = 0;
    for (int e = e0; e < e1 && nb > 0; e += 32) {
      const int j = e + lane < e1 ? sel[e + lane] : -1;
      const bool ok = j >= 0 && j < nb;
      const uint32_t mask = __ballot_sync(0xffffffffu, ok);
      if (ok) {
        const int at = n + __popc(mask & ((1u << lane) - 1u));
        s_page[at] = p.block_table[(int64_t)it.r * p.bt_stride + j];
        s_ntok[at] = min(BLOCK_TOKENS, it.pos - j * BLOCK_TOKENS + 1);
      }
      n += __popc(mask);
    }
    if (lane == 0) s_nblk = n;
  }
  // q rows of the group, heads past GROUP as zeros.
  const uint32_t q_tile = st_smem_addr(q_smem);
  for (int e = threadIdx.x; e < M_TILES * 16 * ROW_CHUNKS; e += THREADS) {
    const int h = e / ROW_CHUNKS, c = e % ROW_CHUNKS;
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (h < GROUP && it.pos >= 0)
      v = *(const uint4 *)((const uint16_t *)p.q + (int64_t)it.row * p.q_stride_row +
                           (int64_t)(it.g * GROUP + h) * p.q_stride_head + c * 8);
    *(uint4 *)(q_smem + st_swizzle_offset<ROW_CHUNKS>(h, c)) = v;
  }
  __syncthreads();
  const int nblk = s_nblk;

  const float scale_log2 = p.score_scale_log2;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  st_softmax_state<HEAD_DIM> st;
  st_softmax_init(st);

#pragma unroll
  for (int s = 0; s < STAGES; s++) {
    if (s < nblk) st_kv::issue(p, it.g, s_page[s], s_ntok[s], region, s);
    st_cp_async_commit();
  }
  for (int i = 0; i < nblk; i++) {
    const int buf = i % STAGES;
    st_cp_async_wait<STAGES - 1>();
    __syncthreads(); // block i is in shared memory, for every thread's copies
    if (IS_FP8) {
      st_kv::widen(p, region, buf);
      __syncthreads();
      // The stage is free again: start the block STAGES ahead now.
      if (i + STAGES < nblk) st_kv::issue(p, it.g, s_page[i + STAGES], s_ntok[i + STAGES], region, buf);
      st_cp_async_commit();
    }
    const uint32_t k_tile = st_kv::k_tile(region, buf), v_tile = k_tile + st_kv::TILE_BYTES;
    const int lim[2] = {s_ntok[i], s_ntok[i]};
    const float bias[2] = {0.f, 0.f};
    st_attend_tile<HEAD_DIM, WARP_TOKENS>(q_tile, wm * 16, k_tile, v_tile, wn * WARP_TOKENS, lim, bias, scale_log2, st);
    __syncthreads(); // every warp is done with the tiles
    if (!IS_FP8) {
      if (i + STAGES < nblk) st_kv::issue(p, it.g, s_page[i + STAGES], s_ntok[i + STAGES], region, buf);
      st_cp_async_commit();
    }
  }

  // Combine the WARPS_N warps of each m-tile (the tiles are free now).
  float *c_o = (float *)region;                       // [WARPS][16][HEAD_DIM]
  float *c_ml = c_o + WARPS * 16 * HEAD_DIM;          // [WARPS][16][2]
  st_softmax_finish_l(st);
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    const int row = (lane >> 2) + rr * 8;
#pragma unroll
    for (int dt = 0; dt < DT; dt++)
      *(float2 *)(c_o + (warp * 16 + row) * HEAD_DIM + dt * 8 + 2 * (lane & 3)) =
          make_float2(st.o[dt][rr * 2], st.o[dt][rr * 2 + 1]);
    if ((lane & 3) == 0) {
      c_ml[(warp * 16 + row) * 2] = st.m[rr];
      c_ml[(warp * 16 + row) * 2 + 1] = st.l[rr];
    }
  }
  __syncthreads();
  const bool direct = p.splits == 1;
  // Four dimensions per thread and step: 16-byte shared and global accesses.
  for (int e = threadIdx.x; e < GROUP * HEAD_DIM / 4; e += THREADS) {
    const int h = e / (HEAD_DIM / 4), d = (e - h * (HEAD_DIM / 4)) * 4;
    const int w0 = (h / 16) * WARPS_N, hr = h % 16;
    float m = -ST_INF;
#pragma unroll
    for (int w = 0; w < WARPS_N; w++) m = fmaxf(m, c_ml[((w0 + w) * 16 + hr) * 2]);
    float l = 0.f;
    float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
    if (m != -ST_INF)
#pragma unroll
      for (int w = 0; w < WARPS_N; w++) {
        const float mw = c_ml[((w0 + w) * 16 + hr) * 2];
        const float wt = mw == -ST_INF ? 0.f : exp2f(mw - m);
        l += c_ml[((w0 + w) * 16 + hr) * 2 + 1] * wt;
        const float4 ow = *(const float4 *)(c_o + ((w0 + w) * 16 + hr) * HEAD_DIM + d);
        o.x += ow.x * wt;
        o.y += ow.y * wt;
        o.z += ow.z * wt;
        o.w += ow.w * wt;
      }
    if (direct) {
      st_write_out(p, it, h, d, m, l, o);
    } else {
      const int64_t ps = (it.id * p.splits + split) * GROUP + h;
      *(float4 *)(p.part_o + ps * HEAD_DIM + d) = o;
      if (d == 0) {
        p.part_ml[ps * 2] = m;
        p.part_ml[ps * 2 + 1] = l;
      }
    }
  }
  if (direct || ALGO_SPLIT) return;

  // single: the last CTA of the item merges. The barrier orders every
  // thread's partial writes before thread 0's fence, which publishes them
  // at device scope before the count (as index_decode does).
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    const uint32_t done = atomicAdd(&p.counters[it.id], 1u);
    s_last = done == (uint32_t)p.splits - 1;
    if (s_last) __threadfence();
  }
  __syncthreads();
  if (!s_last) return;
  st_merge_splits(p, it, (float *)region); // the tiles and combine area are free by now
  if (threadIdx.x == 0) p.counters[it.id] = 0u; // ready for the next launch (graph replay)
}

// split: grid (R*qlen, Hkv), THREADS threads.
extern "C" __global__ void __launch_bounds__(THREADS) st_sparse_attn_decode_merge(const st_sparse_attn_decode_params p) {
  __shared__ float s_merge[MERGE_SMEM / 4];
  st_merge_splits(p, st_item_of(p, blockIdx.x, blockIdx.y), s_merge);
}
