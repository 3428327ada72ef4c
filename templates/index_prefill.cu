// index_prefill.cu - the prefill indexer in one call: block scores and the
// top-k, two algorithms chosen per variant (ALGO_FUSED).
//
// fused: st_index_prefill_main runs index_score's loop
// (common/score_tile.cuh) but, instead of storing a row's block score,
// keeps the row's best non-forced blocks of the CTA's chunk in a list in
// shared memory (one lane owns a row and keeps the list's lowest key in a
// register: a block that does not beat it costs one compare). At the end
// each row's list (its `topk` best in no order, key 0 = none) goes to the
// workspace: the score matrix is never written.
// composed: the main kernel stores every visible block's score key into a
// [H][total_q][max_blocks] workspace (index_score's loop and stores), and
// the merge selects from the whole row (index_topk's warp algorithm).
//
// st_index_prefill_merge, a warp per (head, token), takes the forced
// blocks (init_blocks first, local_blocks last visible) and the best of the
// row's candidates (common/warp_topk.cuh), and writes topk_idx as
// index_topk does: forced ids, chosen ids, -1 after.

// The compile-time constants ST_P_*: rendering puts a variant's values
// in place of this include (generator/render.lua).
#include "defaults/index_prefill.cuh"
constexpr int IS_FP8 = ST_P_IS_FP8;
constexpr int HEAD_DIM = ST_P_HEAD_DIM;
constexpr int ROWS = ST_P_ROWS;
constexpr int WARPGROUPS = ST_P_WARPGROUPS;
constexpr int STAGES = ST_P_STAGES;
constexpr int TOPK_CAP = ST_P_TOPK;
constexpr bool ALGO_FUSED = ST_P_FUSED != 0;

// The argument block first: it brings the fixed-width integer types the
// common headers use under NVRTC (no C library there).
#include "params/index_prefill.h"
#include "common/params_gate.cuh"
#include "common/score_tile.cuh"
#include "common/score_key.cuh"
#include "common/warp_topk.cuh"
#include "common/varlen.cuh"

ST_PARAMS_GATE(st_index_prefill_params)

// Words per row list: odd, so the eight rows a warp's list owners update
// at once fall in different banks.
constexpr int LIST_STRIDE = TOPK_CAP + 1;
constexpr int LIST_BYTES = ALGO_FUSED ? 2 * ROWS * LIST_STRIDE * 4 : 0; // keys, then block ids
constexpr int MERGE_WARPS = 8;
// Candidates a merge warp holds: 32 per key register, at most 16 registers
// for fused lists (ST_INDEX_PREFILL_MERGE_MAX), 32 for composed rows of
// blocks (ST_INDEX_PREFILL_COMPOSED_MAX_BLOCKS): the launcher's fit.
constexpr int MERGE_MAX = 32 * (ALGO_FUSED ? 16 : 32);

static_assert(TOPK_CAP >= 1 && TOPK_CAP <= 64, "the op's topk range");

// Named barrier 3: the compute threads only (the copying warp has left).
__device__ __forceinline__ void st_compute_sync() {
  asm volatile("bar.sync 3, %0;\n" ::"n"(COMPUTE_THREADS) : "memory");
}

// Forced blocks of a token with nb visible ones are [0, lo) and [hi, nb).
struct st_forced {
  int lo, hi;
};
__device__ __forceinline__ st_forced st_forced_of(const st_index_prefill_params &pp, int nb) {
  st_forced f;
  f.lo = min(pp.init_blocks, nb);
  f.hi = max(nb - pp.local_blocks, f.lo);
  return f;
}

// fused: the chunk's best blocks of each row, through shared memory.
__device__ __forceinline__ void st_prefill_lists(const st_index_prefill_params &pp) {
  extern __shared__ uint8_t s_raw[];
  const st_index_score_params &p = pp.score;
  uint32_t *s_key = (uint32_t *)s_raw;
  int32_t *s_id = (int32_t *)(s_raw + LIST_BYTES / 2);
  for (int e = threadIdx.x; e < ROWS * LIST_STRIDE; e += THREADS) s_key[e] = 0u; // ordered by the loop's barriers

  st_score_tile t = {}; // set by st_score_blocks before any call of keep
  // The lowest key of the row list this lane owns (st_score_own: a lane
  // stores one row of the tile): most blocks lose to it in a register
  // compare. The lists are unsorted; a winner replaces the lowest entry, and
  // one pass over the list finds the new lowest.
  uint32_t low = 0u;
  auto keep = [&](int tok, int, int row, int j, float mx) {
    const uint32_t key = st_score_key(mx); // the positive scale changes no order
    if (key <= low) return;                // ties keep the earlier block
    const st_forced f = st_forced_of(pp, st_visible_blocks(p, t.pos0 + tok));
    if (j < f.lo || j >= f.hi) return;
    uint32_t *kk = s_key + row * LIST_STRIDE;
    int at = 0;
    uint32_t lowest = kk[0], second = 0xffffffffu;
    // Unrolled to the capacity: the loads issue back to back (a loop to
    // the runtime topk waits out one load's latency per entry).
#pragma unroll
    for (int k = 1; k < TOPK_CAP; k++) {
      const uint32_t v = k < pp.topk ? kk[k] : 0xffffffffu;
      if (v < lowest) {
        second = lowest;
        lowest = v;
        at = k;
      } else if (v < second) {
        second = v;
      }
    }
    kk[at] = key;
    s_id[row * LIST_STRIDE + at] = j;
    low = min(key, second);
  };
  if (!st_score_blocks(p, s_raw + LIST_BYTES, &t, keep)) return;

  st_compute_sync(); // every row's list is final
  const int topk = pp.topk;
  for (int e = threadIdx.x; e < ROWS * topk; e += COMPUTE_THREADS) {
    const int row = e / topk, k = e - row * topk;
    const int tok = row >> p.head_shift, h = row & ((1 << p.head_shift) - 1);
    if (tok >= t.ntok || h >= p.num_heads) continue;
    const uint64_t v = (uint64_t)s_key[row * LIST_STRIDE + k] << 32 | (uint32_t)s_id[row * LIST_STRIDE + k];
    pp.partial[(((int64_t)h * p.total_q + t.start + tok) * pp.max_chunks + blockIdx.y) * topk + k] = v;
  }
}

// composed: every visible block's key, as index_score stores its score.
__device__ __forceinline__ void st_prefill_keys(const st_index_prefill_params &pp) {
  extern __shared__ uint8_t s_raw[];
  const st_index_score_params &p = pp.score;
  st_score_tile t = {}; // set by st_score_blocks before any store
  auto store = [&](int tok, int h, int, int j, float mx) {
    pp.keys[((int64_t)h * p.total_q + t.start + tok) * p.max_blocks + j] = st_score_key(mx);
  };
  st_score_blocks(p, s_raw, &t, store);
}

extern "C" __global__ void __launch_bounds__(THREADS, 1) st_index_prefill_main(const __grid_constant__ st_index_prefill_params pp) {
  if constexpr (ALGO_FUSED)
    st_prefill_lists(pp);
  else
    st_prefill_keys(pp);
}

// ---- the merge -------------------------------------------------------------

// Visible blocks of query token i (0 past total_q).
__device__ __forceinline__ int st_token_blocks(const st_index_score_params &p, int i) {
  if (i >= p.total_q) return 0;
  const int r = st_request_of(p.cu_seqlens_q, p.num_requests, i);
  return st_visible_blocks(p, st_position_in(p.cu_seqlens_q, p.seq_lens, r, i));
}

// The row's n candidates (n <= 32 * N) into registers, then its choice.
template <int N>
__device__ __forceinline__ int st_merge_row(const uint64_t *cand, int n, int want, int32_t *out, int forced) {
  const int lane = threadIdx.x & 31;
  uint32_t key[N];
  int32_t id[N];
  int present = 0;
#pragma unroll
  for (int m = 0; m < N; m++) {
    const int e = lane + 32 * m;
    const uint64_t v = e < n ? cand[e] : 0ull;
    key[m] = (uint32_t)(v >> 32);
    id[m] = (int32_t)(uint32_t)v;
    present += key[m] != 0u;
  }
  present = (int)__reduce_add_sync(0xffffffffu, (unsigned)present);
  return st_warp_topk(key, want, present, n, [&](int m, int rank) { out[forced + rank] = id[m]; });
}

// composed: the row's non-forced visible keys (columns lo .. hi - 1, hi <=
// 32 * N) into registers, then its choice.
template <int N>
__device__ __forceinline__ int st_merge_keys(const uint32_t *row, st_forced f, int want, int32_t *out, int forced) {
  const int lane = threadIdx.x & 31;
  uint32_t key[N];
#pragma unroll
  for (int m = 0; m < N; m++) {
    const int j = lane + 32 * m;
    key[m] = j >= f.lo && j < f.hi ? __ldg(row + j) : 0u;
  }
  return st_warp_topk(key, want, f.hi - f.lo, f.hi, [&](int m, int rank) { out[forced + rank] = lane + 32 * m; });
}

extern "C" __global__ void __launch_bounds__(MERGE_WARPS * 32) st_index_prefill_merge(const st_index_prefill_params pp) {
  const st_index_score_params &p = pp.score;
  const int lane = threadIdx.x & 31, h = blockIdx.y;
  const int i = blockIdx.x * MERGE_WARPS + (int)threadIdx.x / 32;
  if (i >= p.total_q) return;
  const int nb = st_token_blocks(p, i);
  const st_forced f = st_forced_of(pp, nb);
  const int forced = f.lo + (nb - f.hi), want = min(pp.topk, nb) - forced;
  int32_t *out = pp.topk_idx + (int64_t)h * pp.out_stride_head + (int64_t)i * pp.out_stride_row;
  for (int k = lane; k < forced; k += 32) out[k] = k < f.lo ? k : f.hi + (k - f.lo);
  // Chunk c holds blocks [c * chunk_blocks, ...): the row's lists are those
  // of the chunks it sees, contiguous in the workspace.
  int chosen = 0;
  if constexpr (ALGO_FUSED) {
    const int n = (nb + p.chunk_blocks - 1) / p.chunk_blocks * pp.topk;
    if (n > MERGE_MAX) __trap(); // the launcher's fit keeps max_chunks * topk within
    const uint64_t *cand = pp.partial + ((int64_t)h * p.total_q + i) * pp.max_chunks * pp.topk;
    if (want > 0) {
      if (n <= 32) chosen = st_merge_row<1>(cand, n, want, out, forced);
      else if (n <= 64) chosen = st_merge_row<2>(cand, n, want, out, forced);
      else if (n <= 128) chosen = st_merge_row<4>(cand, n, want, out, forced);
      else if (n <= 256) chosen = st_merge_row<8>(cand, n, want, out, forced);
      else chosen = st_merge_row<16>(cand, n, want, out, forced);
    }
  } else {
    if (f.hi > MERGE_MAX) __trap(); // the launcher's fit keeps max_blocks within
    const uint32_t *row = pp.keys + ((int64_t)h * p.total_q + i) * p.max_blocks;
    if (want > 0) {
      if (f.hi <= 32) chosen = st_merge_keys<1>(row, f, want, out, forced);
      else if (f.hi <= 64) chosen = st_merge_keys<2>(row, f, want, out, forced);
      else if (f.hi <= 128) chosen = st_merge_keys<4>(row, f, want, out, forced);
      else if (f.hi <= 256) chosen = st_merge_keys<8>(row, f, want, out, forced);
      else if (f.hi <= 512) chosen = st_merge_keys<16>(row, f, want, out, forced);
      else chosen = st_merge_keys<32>(row, f, want, out, forced);
    }
  }
  for (int k = forced + chosen + lane; k < pp.topk; k += 32) out[k] = -1;
}
