// sparse_attn_dense.cuh - the dense tiles of a block-major sparse_attn call
// (included by templates/sparse_attn_block.cu, launch parameter `dense`).
//
// A query token whose position is below topk x 128 sees at most topk
// blocks, and an indexer that keeps every visible block selects them all:
// its valid entries are exactly blocks 0 .. its own, each once. Where
// DENSE_TOKENS neighbouring tokens of a request (one tile: 128 q rows of
// one kv head) all select so, their attention is dense causal attention
// over the request's first blocks, and the block-major path (a partial
// state per entry, then a merge) moves ~3 KiB of partials an entry for it:
// at 4096:0 the first 2048 tokens, a third of the replay's partials
// (docs/kernels/sparse_attn.md, v2.35). Here such a tile
// is one work item of st_sparse_attn_dense: two consumer warpgroups of 64
// rows keep O in registers over the tile's blocks (online softmax, each
// K/V copy serving all 128 rows) and write o and lse themselves. The
// count step leaves those tokens' entries out of the lists (key -2) and
// the merges skip them.
//
// The launcher (runtime/ops/sparse_attn.c) runs two steps of
// st_sparse_attn_merge before the chunks, and the kernel before them too
// (dense 1, on every SM) or after the last chunk's blocks kernel, beside
// its merge (dense 2):
//   step 4 (find): a thread per (candidate tile, token) checks the token's
//     entries; a tile is dense when every present token is. Candidate
//     tiles are (kv head g, request r, tile k < dense_tiles) with
//     dense_tiles = topk x 128 / DENSE_TOKENS: past that no token can be
//     dense. A dense tile gets a place among the tiles of its block count
//     (ws_dense[c] = rank << 8 | blocks, 0: not dense); the last CTA turns
//     the counts into offsets, heaviest first, so that the kernel's CTAs
//     take the longest tiles first.
//   step 5 (place): each dense tile into its slot of ws_dense_list.
#ifndef ST_SPARSE_ATTN_DENSE_CUH
#define ST_SPARSE_ATTN_DENSE_CUH

#include "common/q_f16.cuh"

constexpr int DENSE_ROWS = 128;
constexpr int DENSE_TOKENS = DENSE_ROWS / GROUP;
// Two-pass kernels have the q map and the K/V maps the dense kernel copies
// by (the launcher offers `dense` on them alone); fp8 ones widen the raw
// rows in place as theirs do (RAW_IN_PLACE).
constexpr bool DENSE_OK = PASSES2 && HEAD_DIM == 128 && DENSE_ROWS % GROUP == 0 && DENSE_TOKENS <= 32;
// ws_dense_header: [0] CTAs counted in (step 4), [1] the kernel's next
// tile, [2] dense tiles; tiles of b blocks: count at [DENSE_COUNT + b],
// first place in the list at [DENSE_OFFSET + b] (b <= 64 = the largest topk).
enum : int { DENSE_COUNT = 8, DENSE_OFFSET = DENSE_COUNT + 65, DENSE_HEADER_WORDS = DENSE_OFFSET + 65 };

// Whether query token i (of request r) lies in a dense tile of kv head g.
__device__ __forceinline__ bool st_dense_token(const st_sparse_attn_params &p, int g, int r, int i) {
  if (p.dense_tiles == 0) return false;
  const int k = (i - p.cu_seqlens_q[r]) / DENSE_TOKENS;
  return k < p.dense_tiles && p.ws_dense[((int64_t)g * p.num_requests + r) * p.dense_tiles + k] != 0;
}
// The same for a token whose request is not known yet: the request's binary
// search runs only when the call has dense tiles (the merges' common case has none).
__device__ __forceinline__ bool st_dense_token_of(const st_sparse_attn_params &p, int g, int i) {
  if (p.dense_tiles == 0) return false;
  return st_dense_token(p, g, st_request_of(p.cu_seqlens_q, p.num_requests, i), i);
}

// Step 4. Token t of candidate c = (g * R + r) * dense_tiles + k is the
// request's token k * DENSE_TOKENS + t; lanes of a tile are one aligned
// DENSE_TOKENS-lane segment of a warp.
__device__ void st_dense_find(const st_sparse_attn_params &p) {
  __shared__ bool s_last;
  const int64_t e = (int64_t)blockIdx.x * STEP_THREADS + threadIdx.x;
  const int64_t cands = (int64_t)p.num_kv_heads * p.num_requests * p.dense_tiles;
  const int64_t c = e / DENSE_TOKENS;
  const int t = (int)(e % DENSE_TOKENS);
  bool present = false, dense = true;
  int blocks = 0;
  if (c < cands) {
    const int k = (int)(c % p.dense_tiles), r = (int)(c / p.dense_tiles % p.num_requests),
              g = (int)(c / p.dense_tiles / p.num_requests);
    const int first = p.cu_seqlens_q[r], qlen = p.cu_seqlens_q[r + 1] - first, il = k * DENSE_TOKENS + t;
    present = il < qlen;
    if (present) {
      const int pos = p.seq_lens[r] - qlen + il, own = pos / BLOCK_TOKENS;
      blocks = own + 1;
      dense = blocks <= p.topk && own < p.max_blocks;
      const int32_t *row = p.topk_idx + (int64_t)g * p.idx_stride_head + (int64_t)(first + il) * p.idx_stride_row;
      uint64_t seen = 0;
      for (int kk = 0; kk < p.topk && dense; kk++) {
        const int j = row[kk];
        if (j < 0 || j > own) continue; // not valid: ignored by the block-major path as well
        dense = !(seen >> j & 1);       // listed twice counts twice: not dense
        seen |= 1ull << j;
      }
      dense = dense && __popcll(seen) == blocks;
    }
  }
#pragma unroll
  for (int o = 1; o < DENSE_TOKENS; o *= 2) { // the tile's lanes: all present dense, any present, most blocks
    dense = __shfl_xor_sync(0xffffffffu, (int)dense, o) && dense;
    present = __shfl_xor_sync(0xffffffffu, (int)present, o) || present;
    blocks = max(blocks, __shfl_xor_sync(0xffffffffu, blocks, o));
  }
  if (c < cands && t == 0) {
    const bool tile_dense = dense && present;
    const int rank = tile_dense ? (int)atomicAdd(&p.ws_dense_header[DENSE_COUNT + blocks], 1u) : 0;
    p.ws_dense[c] = tile_dense ? rank << 8 | blocks : 0;
  }
  __syncthreads();
  if (threadIdx.x == 0) s_last = st_last_to_arrive(&p.ws_dense_header[0], gridDim.x);
  __syncthreads();
  if (!s_last || threadIdx.x != 0) return;
  uint32_t total = 0;
  for (int b = 64; b >= 1; b--) { // heaviest first
    p.ws_dense_header[DENSE_OFFSET + b] = total;
    total += __ldcg(&p.ws_dense_header[DENSE_COUNT + b]);
    p.ws_dense_header[DENSE_COUNT + b] = 0u;
  }
  p.ws_dense_header[1] = 0u;
  p.ws_dense_header[2] = total;
  p.ws_dense_header[0] = 0u; // ready for the next launch
}

// Step 5: a thread per candidate.
__device__ void st_dense_place(const st_sparse_attn_params &p) {
  const int64_t c = (int64_t)blockIdx.x * STEP_THREADS + threadIdx.x;
  if (c >= (int64_t)p.num_kv_heads * p.num_requests * p.dense_tiles) return;
  const int32_t f = p.ws_dense[c];
  if (f) p.ws_dense_list[__ldcg(&p.ws_dense_header[DENSE_OFFSET + (f & 0xff)]) + (f >> 8)] = (int32_t)c;
}

// ---- the dense kernel -------------------------------------------------------

// A tile as the producer hands it to the consumers: kv head, request, its
// first query token and position, present tokens and blocks (0: no more
// tiles).
struct st_dense_tile {
  int g, r, token0, pos0, n, blocks;
};

constexpr int DENSE_STAGES = 2; // K/V blocks in flight
constexpr int DENSE_Q_BYTES = DENSE_ROWS * HEAD_DIM * 2;
constexpr int DENSE_TILE_BYTES = BLOCK_TOKENS * HEAD_DIM * 2; // a bf16 K or V tile
// A stage: the K and V tiles; RAW_IN_PLACE: and the block's K and V scales
// (st_widen_in_place's layout), padded to a swizzle atom for the next stage.
constexpr int DENSE_KV_BYTES = RAW_IN_PLACE ? (2 * DENSE_TILE_BYTES + 2 * BLOCK_TOKENS * 4 + 1023) / 1024 * 1024
                                            : 2 * DENSE_TILE_BYTES;
// Two q tiles (the next tile's rows load under this one's blocks), the
// stages, 1024 bytes to start the panels on a swizzle atom; the launcher
// (runtime/ops/sparse_attn.c, ST_SPARSE_ATTN_DENSE_SMEM) counts the same.
constexpr int DENSE_SMEM_BYTES = 2 * DENSE_Q_BYTES + DENSE_STAGES * DENSE_KV_BYTES + 1024;
constexpr int DENSE_CONSUMERS = 256; // two warpgroups, 64 rows each
// And a producer warpgroup, of which one warp copies (RAW_IN_PLACE: and
// all four widen each block, under the consumers' products of the one
// before). ptxas budgets a CTA of 288 threads (one producer warp) like one
// of 384: 168 registers a thread, where a consumer's O, S and P spilled;
// so the producer warpgroup gives registers back (setmaxnreg) and the
// consumers take 232. A widening producer keeps 64 (ptxas, fp8 wg2.c2:
// 48 and 56 spilled) and leaves its consumers 216 (no spills).
// setmaxnreg.inc waits for registers given back by the CTA's other warps:
// the CTA holds what ptxas gave at launch (DENSE_LAUNCH_REGS a thread:
// 65536 / 384, down to a multiple of 8), and asking for more hangs (a
// first fp8 version, 64 + 224, did). The launcher refuses a kernel built
// with another count (ST_SPARSE_ATTN_DENSE_REGS).
constexpr int DENSE_THREADS = DENSE_CONSUMERS + 128, DENSE_LAUNCH_REGS = 65536 / DENSE_THREADS / 8 * 8;
constexpr int DENSE_PRODUCER_REGS = RAW_IN_PLACE ? 64 : 40, DENSE_CONSUMER_REGS = RAW_IN_PLACE ? 216 : 232;
static_assert(128 * DENSE_PRODUCER_REGS + DENSE_CONSUMERS * DENSE_CONSUMER_REGS <= DENSE_THREADS * DENSE_LAUNCH_REGS,
              "the registers the consumers take are those the producer gives back");
// Barriers (s_dense_bar + index): tile records, q tiles, K/V stages, each a
// full / empty pair per slot; `empty` ones count the 8 consumer warps.
// RAW_IN_PLACE: KV_FULL says the raw rows landed (the producer warps wait
// for it), KV_WIDE that the 4 producer warps widened them (the consumers
// wait for that).
enum : int {
  DBAR_REC_FULL = 0,
  DBAR_REC_EMPTY = 2,
  DBAR_Q_FULL = 4,
  DBAR_Q_EMPTY = 6,
  DBAR_KV_FULL = 8,
  DBAR_KV_EMPTY = 8 + DENSE_STAGES,
  DBAR_KV_WIDE = 8 + 2 * DENSE_STAGES,
  DENSE_BARS = 8 + 3 * DENSE_STAGES
};

// RAW_IN_PLACE: producer warp w (0 .. 3) widens its rows of the stage of
// the kv-th block the CTA copies, once they land; ntok (rows seen, for the
// V tail) is in s_ntok[stage], 0: no more blocks (returns false). The
// rows of a warp are its own to read and write (st_widen_in_place), so
// the warps meet only in KV_WIDE, each arriving when its rows are done.
template <bool TENSOR>
__device__ __forceinline__ bool st_dense_widen(const st_sparse_attn_params &p, const int *s_ntok, char *kv0,
                                               uint32_t bar0, int kv) {
  const int s = kv % DENSE_STAGES;
  st_mbar_wait(bar0 + 8 * (DBAR_KV_FULL + s), (kv / DENSE_STAGES) & 1);
  const int ntok = s_ntok[s];
  if (ntok == 0) return false;
  st_widen_in_place<TENSOR, 128, true>(p, kv0 + s * DENSE_KV_BYTES, ntok, threadIdx.x - DENSE_CONSUMERS);
  __syncwarp();
  if ((threadIdx.x & 31) == 0) st_mbar_arrive(bar0 + 8 * (DBAR_KV_WIDE + s));
  return true;
}

// The producer warp: takes tiles from ws_dense_list through the header's
// counter, hands each over in a record slot, copies its q rows (a token's
// GROUP heads a box, as st_issue_q_half) and then its blocks 0 ..
// blocks - 1 into the stages. The block table's pages of a tile are read
// by the lanes up front (two loads a lane at most), not one after another.
// RAW_IN_PLACE: it widens each block it copied (one of the four warps that
// do), and ends the others' loop with a stage of no rows.
template <bool TENSOR>
__device__ void st_dense_produce(const st_sparse_attn_params &p, st_dense_tile *s_tile, int *s_ntok,
                                 uint32_t q0_tile, char *kv0, uint32_t bar0) {
  const int lane = threadIdx.x & 31;
  const int total = (int)__ldcg(&p.ws_dense_header[2]);
  for (int x = 0, kv = 0;; x++) {
    const int slot = x & 1;
    if (x >= 2) st_mbar_wait(bar0 + 8 * (DBAR_REC_EMPTY + slot), ((x >> 1) - 1) & 1);
    int claim = lane == 0 ? (int)atomicAdd(&p.ws_dense_header[1], 1u) : 0;
    claim = __shfl_sync(0xffffffffu, claim, 0);
    if (claim >= total) {
      if (lane == 0) {
        s_tile[slot].blocks = 0;
        st_mbar_arrive(bar0 + 8 * (DBAR_REC_FULL + slot));
      }
      if (RAW_IN_PLACE && lane == 0) { // the other producer warps' end: a stage with no rows
        const int s = kv % DENSE_STAGES;
        if (kv >= DENSE_STAGES) st_mbar_wait(bar0 + 8 * (DBAR_KV_EMPTY + s), (kv / DENSE_STAGES - 1) & 1);
        s_ntok[s] = 0;
        st_mbar_arrive(bar0 + 8 * (DBAR_KV_FULL + s));
      }
      return;
    }
    const int c = __ldcg(&p.ws_dense_list[claim]), blocks = __ldcg(&p.ws_dense[c]) & 0xff;
    const int k = c % p.dense_tiles, r = c / p.dense_tiles % p.num_requests, g = c / p.dense_tiles / p.num_requests;
    const int first = p.cu_seqlens_q[r], qlen = p.cu_seqlens_q[r + 1] - first;
    const int n = min(DENSE_TOKENS, qlen - k * DENSE_TOKENS), token0 = first + k * DENSE_TOKENS;
    const int32_t *bt = p.block_table + (int64_t)r * p.bt_stride;
    const int page_a = lane < blocks ? bt[lane] : 0, page_b = lane + 32 < blocks ? bt[lane + 32] : 0;
    if (lane == 0) {
      s_tile[slot] = st_dense_tile{g, r, token0, p.seq_lens[r] - qlen + k * DENSE_TOKENS, n, blocks};
      st_mbar_arrive(bar0 + 8 * (DBAR_REC_FULL + slot));
    }
    if (x >= 2) st_mbar_wait(bar0 + 8 * (DBAR_Q_EMPTY + slot), ((x >> 1) - 1) & 1);
    if (lane == 0) {
      const uint32_t q_tile = q0_tile + slot * DENSE_Q_BYTES, bar = bar0 + 8 * (DBAR_Q_FULL + slot);
      st_mbar_arrive_expect_tx(bar, (uint32_t)(n * GROUP * HEAD_DIM * 2));
      for (int t = 0; t < n; t++)
#pragma unroll
        for (int ch = 0; ch < HEAD_DIM / 64; ch++)
          st_tma_load_3d(q_tile + ch * DENSE_ROWS * 128 + t * GROUP * 128, &p.q_map, ch * 64, g * GROUP, token0 + t,
                         bar);
    }
    const int tail = (p.seq_lens[r] - qlen + k * DENSE_TOKENS + n - 1) % BLOCK_TOKENS + 1; // the last block's rows seen
    for (int j = 0; j < blocks; j++, kv++) {
      const int s = kv % DENSE_STAGES;
      const int page = __shfl_sync(0xffffffffu, j < 32 ? page_a : page_b, j & 31);
      const uint32_t bar = bar0 + 8 * (DBAR_KV_FULL + s);
      char *stage = kv0 + s * DENSE_KV_BYTES;
      if (kv >= DENSE_STAGES) st_mbar_wait(bar0 + 8 * (DBAR_KV_EMPTY + s), (kv / DENSE_STAGES - 1) & 1);
      if (RAW_IN_PLACE && p.scale_mode == 2) {
        st_issue_kv_scales(p, g, page, j == blocks - 1 ? tail : BLOCK_TOKENS, stage, bar);
        __syncwarp(); // every lane's tracking arrival before lane 0's
      }
      if (lane == 0) {
        if (RAW_IN_PLACE) s_ntok[s] = j == blocks - 1 ? tail : BLOCK_TOKENS; // (before the arrival that hands it over)
        const uint32_t k_tile = st_smem_addr(stage);
        st_copy_kv_block(p, g, page, k_tile, k_tile + DENSE_TILE_BYTES, bar);
      }
      if (RAW_IN_PLACE) st_dense_widen<TENSOR>(p, s_ntok, kv0, bar0, kv);
    }
  }
}

// The 256 consumer threads alone (named barrier 1).
__device__ __forceinline__ void st_dense_consumer_sync() { asm volatile("bar.sync 1, 256;\n" ::: "memory"); }

// RAW_IN_PLACE (v2.41): a consumer warp's 16 rows of the q tile, from m,
// into f16 in place (common/q_f16.cuh), since the producer widens K to f16
// (one conversion a pair where bf16 took four, in the producer warps that
// bound the fp8 kernel). Two lanes a row, 8 chunks each. unscale gets the
// 2^-e of the rows the thread's accumulators hold (m + lane / 4, + 8).
__device__ __forceinline__ void st_dense_q_to_f16(char *q_tile, int m, float (&unscale)[2]) {
  constexpr int CH = HEAD_DIM / 8 / 2; // a lane's chunks
  const int lane = threadIdx.x & 31, row = m + lane / 2, c0 = (lane & 1) * CH;
  uint4 v[CH];
  uint32_t amax = 0;
#pragma unroll
  for (int i = 0; i < CH; i++) {
    v[i] = *(const uint4 *)(q_tile + st_panel_offset(DENSE_ROWS, row, c0 + i));
    amax = st_bf16x8_amax(v[i], amax);
  }
  amax = max(amax & 0xffffu, amax >> 16);
  amax = max(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  const int e = st_f16_row_exponent(amax);
  const float up = st_pow2(e), down = st_pow2(-e);
#pragma unroll
  for (int i = 0; i < CH; i++)
    *(uint4 *)(q_tile + st_panel_offset(DENSE_ROWS, row, c0 + i)) = st_bf16x8_to_f16(v[i], up);
#pragma unroll
  for (int rr = 0; rr < 2; rr++) unscale[rr] = __shfl_sync(0xffffffffu, down, 2 * (lane / 4 + 8 * rr));
}

// A consumer warp's end of a tile: its 16 rows' O / l as bf16 through its
// own rows of the q tile (free: the warpgroup's last score product is
// done) to o in 16-byte pieces, and lse; rows of tokens past the tile's
// present ones are not written.
__device__ __forceinline__ void st_dense_store(const st_sparse_attn_params &p, const st_dense_tile &tile,
                                               const st_softmax_state<HEAD_DIM> &st, int m0, char *q_tile) {
  const int lane = threadIdx.x & 31;
  const uint32_t q_addr = st_smem_addr(q_tile);
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    const int m = m0 + (lane >> 2) + rr * 8, t = m / GROUP, h = m % GROUP;
    const float inv = st.l[rr] > 0.f ? 1.f / st.l[rr] : 0.f;
    if (p.lse && t < tile.n && (lane & 3) == 0)
      p.lse[(int64_t)(tile.token0 + t) * p.lse_stride_row + (int64_t)(tile.g * GROUP + h) * p.lse_stride_head] =
          st.l[rr] > 0.f ? (st.m[rr] + __log2f(st.l[rr])) * LN2 : -ST_INF;
#pragma unroll
    for (int dt = 0; dt < HEAD_DIM / 8; dt++) {
      const uint32_t two = st_pack_bf16(st.o[dt][rr * 2] * inv * p.v_scale, st.o[dt][rr * 2 + 1] * inv * p.v_scale);
      asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(q_addr + st_panel_offset(DENSE_ROWS, m, dt) + 4 * (lane & 3)),
                   "r"(two)
                   : "memory");
    }
  }
  __syncwarp();
#pragma unroll
  for (int e = lane; e < 16 * (HEAD_DIM / 8); e += 32) {
    const int m = m0 + e / (HEAD_DIM / 8), ch = e % (HEAD_DIM / 8), t = m / GROUP, h = m % GROUP;
    if (t >= tile.n) continue;
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(q_addr + st_panel_offset(DENSE_ROWS, m, ch))
                 : "memory");
    *(uint4 *)((uint16_t *)p.o + (int64_t)(tile.token0 + t) * p.o_stride_row +
               (int64_t)(tile.g * GROUP + h) * p.o_stride_head + ch * 8) = v;
  }
  st_fence_proxy_async(); // these generic accesses, before the next tile's rows are copied in
  __syncwarp();
}

// The consumer warpgroups: warpgroup w takes rows 64 w .. of every tile,
// over its blocks in order (block 0 first: every present row sees a key
// there, so its m is finite from then on). (A template, so that kernels of
// other head dims do not instantiate it.) RAW_IN_PLACE: a block is theirs
// once the producer warps widened it (KV_WIDE), TENSOR as the two-pass
// kernel's consumers take it (v2.34).
template <int D, bool TENSOR>
__device__ void st_dense_consume(const st_sparse_attn_params &p, const st_dense_tile *s_tile, char *q0_smem,
                                 char *kv0, uint32_t bar0) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int m0 = __shfl_sync(0xffffffffu, warp / 4 * 64, 0); // warp-uniform for the descriptors
  for (int x = 0, kv = 0;; x++) {
    const int slot = x & 1;
    st_mbar_wait(bar0 + 8 * (DBAR_REC_FULL + slot), (x >> 1) & 1);
    const st_dense_tile tile = s_tile[slot];
    if (tile.blocks == 0) return;
    __syncwarp();
    if (lane == 0) st_mbar_arrive(bar0 + 8 * (DBAR_REC_EMPTY + slot)); // the record is read
    int pos[2];
    bool present[2];
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
      const int t = (m0 + (warp % 4) * 16 + (lane >> 2) + rr * 8) / GROUP;
      present[rr] = t < tile.n;
      pos[rr] = tile.pos0 + t;
    }
    // The V rows past the tile's last visible token of its last block:
    // the page's rows there may hold anything, and 0 * NaN is not 0.
    const int tail = (tile.pos0 + tile.n - 1) % BLOCK_TOKENS + 1;
    st_softmax_state<HEAD_DIM> st;
    st_softmax_init(st);
    char *q_tile = q0_smem + slot * DENSE_Q_BYTES;
    st_mbar_wait(bar0 + 8 * (DBAR_Q_FULL + slot), (x >> 1) & 1);
    float scale_log2[2] = {p.score_scale_log2, p.score_scale_log2};
    if constexpr (RAW_IN_PLACE) {
      float unscale[2];
      st_dense_q_to_f16(q_tile, m0 + (warp % 4) * 16, unscale);
      scale_log2[0] *= unscale[0];
      scale_log2[1] *= unscale[1];
      st_fence_proxy_async(); // the f16 rows, before the warpgroup's products read them
      if (warp < 4) // the warpgroup's 64 rows (immediate ids: a register one makes ptxas reserve all 16)
        asm volatile("bar.sync 2, 128;\n" ::: "memory");
      else
        asm volatile("bar.sync 3, 128;\n" ::: "memory");
    }
    for (int j = 0; j < tile.blocks; j++, kv++) {
      const int s = kv % DENSE_STAGES;
      char *stage = kv0 + s * DENSE_KV_BYTES;
      const uint32_t k_tile = st_smem_addr(stage), v_tile = k_tile + DENSE_TILE_BYTES;
      st_mbar_wait(bar0 + 8 * ((RAW_IN_PLACE ? DBAR_KV_WIDE : DBAR_KV_FULL) + s), (kv / DENSE_STAGES) & 1);
      if (!RAW_IN_PLACE && j == tile.blocks - 1 && tail < BLOCK_TOKENS) { // (RAW_IN_PLACE: zeroed when widened)
        for (int e = threadIdx.x; e < (BLOCK_TOKENS - tail) * (HEAD_DIM / 8); e += DENSE_CONSUMERS) {
          const int tok = tail + e / (HEAD_DIM / 8), ch = e % (HEAD_DIM / 8);
          asm volatile(
              "st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(v_tile + st_panel_offset(BLOCK_TOKENS, tok, ch)),
              "r"(0)
              : "memory");
        }
        st_fence_proxy_async();
      }
      // The last block's zeroed rows, before either warpgroup's products
      // read them. (No barrier at the other blocks: the warpgroups share no
      // data but the stage, and ptxas keeps the wgmma asynchronous without.)
      if (!RAW_IN_PLACE && j == tile.blocks - 1) st_dense_consumer_sync();
      int lim[2];
#pragma unroll
      for (int rr = 0; rr < 2; rr++) {
        const int own = pos[rr] / BLOCK_TOKENS;
        lim[rr] = !present[rr] || j > own ? 0 : j < own ? BLOCK_TOKENS : pos[rr] % BLOCK_TOKENS + 1;
      }
      const float *k_scale = TENSOR ? (const float *)(stage + 2 * DENSE_TILE_BYTES) : nullptr;
      st_attend_next_block_wg<D, DENSE_ROWS, TENSOR, RAW_IN_PLACE && !TENSOR, RAW_IN_PLACE>(
          st_smem_addr(q_tile), m0, k_tile, v_tile, lim, scale_log2, k_scale, st);
      __syncwarp();
      if (lane == 0) st_mbar_arrive(bar0 + 8 * (DBAR_KV_EMPTY + s)); // this warp's products of the stage are done
    }
    st_softmax_finish_l(st);
    st_dense_store(p, tile, st, m0 + (warp % 4) * 16, q_tile);
    if (lane == 0) st_mbar_arrive(bar0 + 8 * (DBAR_Q_EMPTY + slot));
  }
}

// The kernel's body; TENSOR: fp8 in tensor mode. Two entry points, one
// instance each: both instances in one kernel spilled 120 bytes a consumer
// thread (ptxas, fp8 wg2.c2 source), each alone none.
template <bool TENSOR> __device__ __forceinline__ void st_dense_main(const st_sparse_attn_params &p) {
  __shared__ st_dense_tile s_tile[2];
  __shared__ int s_ntok[DENSE_STAGES];
  __shared__ __align__(8) uint64_t s_dense_bar[DENSE_BARS];
  char *q0_smem = s_dyn + ((1024u - (st_smem_addr(s_dyn) & 1023u)) & 1023u);
  char *kv0 = q0_smem + 2 * DENSE_Q_BYTES;
  const uint32_t bar0 = st_smem_addr(&s_dense_bar[0]);
  if (threadIdx.x == 0) {
    st_need_dynamic_smem(DENSE_SMEM_BYTES);
    for (int b = 0; b < DENSE_BARS; b++) {
      const bool empty = (b >= DBAR_REC_EMPTY && b < DBAR_Q_FULL) || (b >= DBAR_Q_EMPTY && b < DBAR_KV_FULL) ||
                         (b >= DBAR_KV_EMPTY && b < DBAR_KV_WIDE);
      st_mbar_init(bar0 + 8 * b, empty ? DENSE_CONSUMERS / 32 : b >= DBAR_KV_WIDE ? 4 : 1);
    }
    st_mbar_init_fence();
  }
  __syncthreads();
  if (threadIdx.x >= DENSE_CONSUMERS) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(DENSE_PRODUCER_REGS));
    if (threadIdx.x < DENSE_CONSUMERS + 32) {
      st_dense_produce<TENSOR>(p, s_tile, s_ntok, st_smem_addr(q0_smem), kv0, bar0);
    } else if (RAW_IN_PLACE) {
      for (int kv = 0; st_dense_widen<TENSOR>(p, s_ntok, kv0, bar0, kv); kv++) {
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(DENSE_CONSUMER_REGS));
    st_dense_consume<HEAD_DIM, TENSOR>(p, s_tile, q0_smem, kv0, bar0);
  }
}

// bf16, and fp8 without per-token scales (runtime/ops/sparse_attn.c picks
// the entry by the call's scale mode).
extern "C" __global__ void __launch_bounds__(DENSE_THREADS, 1)
    st_sparse_attn_dense(const __grid_constant__ st_sparse_attn_params p) {
  if constexpr (DENSE_OK) st_dense_main<false>(p);
}

// fp8 in tensor mode (empty elsewhere).
extern "C" __global__ void __launch_bounds__(DENSE_THREADS, 1)
    st_sparse_attn_dense_tensor(const __grid_constant__ st_sparse_attn_params p) {
  if constexpr (DENSE_OK && RAW_IN_PLACE) st_dense_main<true>(p);
}

#endif // ST_SPARSE_ATTN_DENSE_CUH
