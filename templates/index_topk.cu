// index_topk.cu - the indexer's block selection for a varlen prefill batch.
//
// Two algorithms, one chosen per variant (ALGO_WARP); both keep the row's
// visible, non-forced block scores as order-preserving integer keys
// (common/score_key.cuh: forced and invisible blocks as key 0, "absent";
// NaN as -inf) and write each row as forced ids first, the chosen ones,
// -1 after. A row is one (index head h, query token i); each token finds
// its request by a binary search of cu_seqlens_q.
//
// cta (v1): grid (ceil(total_q / ROWS), H); THREADS threads. CTA (tile, h)
// selects for the ROWS query tokens tile*ROWS .. of head h (a tile may
// straddle requests). It stages the ROWS rows' keys in shared memory and
// runs one CTA-wide top-k over them at once (common/cta_topk.cuh, the
// selection index_decode uses). Handles any max_blocks that fits in
// shared memory.
//
// warp (v2): grid (ceil(total_q / ROWS), H) with ROWS = THREADS / 32; warp
// w of CTA (tile, h) owns row (h, tile*ROWS + w) alone, no barrier and no
// shared memory. Lane l holds the keys of columns l + 32*m, m < KEYS, in
// registers (coalesced loads), so a variant takes rows of up to 32*KEYS
// blocks. The free-th largest key T is found bit by bit from bit 31 (a
// warp-wide count of the keys >= each candidate, one __reduce_add_sync
// per bit; it stops as soon as a candidate splits off exactly `free`
// keys); then every key > T and as many keys == T as still wanted (in
// column order) get their output slots from a ballot and a popc.
//
// Bytes: each visible score once (4 B per block) and the ids; no arithmetic
// to speak of: bound by the score reads and the selection's latency (cta)
// or its instruction count (warp: 2*KEYS + 13 per searched bit, about 25
// per KEYS group of 32 columns written; docs/kernels/index_topk.md v2).

// The compile-time constants ST_P_*: rendering puts a variant's values
// in place of this include (generator/render.lua).
#include "defaults/index_topk.cuh"
constexpr int ROWS = ST_P_ROWS;
constexpr int THREADS = ST_P_THREADS;
constexpr int TOPK_CAP = ST_P_TOPK;
constexpr bool ALGO_WARP = ST_P_ALGO_WARP != 0;
constexpr int KEYS = ST_P_KEYS; // warp: keys per lane; cta: 0

// The argument block first: it brings the fixed-width integer types the
// common headers use under NVRTC (no C library there).
#include "params/index_topk.h"
#include "common/params_gate.cuh"
#include "common/score_key.cuh"
#include "common/cta_topk.cuh"
#include "common/warp_topk.cuh"
#include "common/varlen.cuh"

ST_PARAMS_GATE(st_index_topk_params)

constexpr int BLOCK_TOKENS = 128;

static_assert(THREADS % 32 == 0 && THREADS >= ROWS, "whole warps, a thread per row for the positions");
static_assert(TOPK_CAP >= 1 && TOPK_CAP <= 64, "the op's topk range (p.topk <= TOPK_CAP: the launcher's fit)");
static_assert(ALGO_WARP ? KEYS >= 1 && KEYS <= 32 && (KEYS & (KEYS - 1)) == 0 && ROWS == THREADS / 32 : KEYS == 0,
              "warp: 1..32 keys per lane (a power of two) and a row per warp; cta: no keys");
// The warp algorithm's register array; cta variants never touch it.
constexpr int LANE_KEYS = KEYS > 0 ? KEYS : 1;

struct st_topk_row {
  int nb;     // visible blocks (0: padding, or a token past total_q)
  int lo, hi; // forced blocks are [0, lo) and [hi, nb)
  int free;   // ids chosen by score: min(topk, nb) - forced
};

__device__ __forceinline__ st_topk_row st_topk_row_of(const st_index_topk_params &p, int i) {
  st_topk_row w;
  w.nb = 0;
  if (i < p.total_q) {
    const int r = st_request_of(p.cu_seqlens_q, p.num_requests, i);
    const int pos = st_position_in(p.cu_seqlens_q, p.seq_lens, r, i);
    w.nb = pos >= 0 ? min(pos / BLOCK_TOKENS + 1, p.max_blocks) : 0;
  }
  w.lo = min(p.init_blocks, w.nb);
  w.hi = max(w.nb - p.local_blocks, w.lo);
  w.free = min(p.topk, w.nb) - (w.lo + (w.nb - w.hi));
  return w;
}

__device__ __forceinline__ int32_t *st_topk_out_row(const st_index_topk_params &p, int h, int i) {
  return p.topk_idx + (int64_t)h * p.out_stride_head + (int64_t)i * p.out_stride_row;
}

// cta (v1): ROWS rows in lock step through shared memory.
__device__ __forceinline__ void st_index_topk_cta(const st_index_topk_params &p) {
  extern __shared__ uint32_t s_keys[]; // [ROWS][max_blocks]
  __shared__ st_cta_topk_smem<ROWS> s_sel;
  __shared__ st_topk_row s_row[ROWS];
  const int tile = blockIdx.x, h = blockIdx.y, i0 = tile * ROWS;
  for (int t = threadIdx.x; t < ROWS; t += THREADS) s_row[t] = st_topk_row_of(p, i0 + t);
  __syncthreads();

  const int mb = p.max_blocks;
  for (int t = 0; t < ROWS; t++) {
    const st_topk_row w = s_row[t];
    const float *srow = p.score + (int64_t)h * p.score_stride_head + (int64_t)(i0 + t) * p.score_stride_row;
    for (int j = threadIdx.x; j < mb; j += THREADS)
      s_keys[t * mb + j] = j >= w.lo && j < w.hi ? st_score_key(__ldg(srow + j)) : 0u;
  }
  __syncthreads();

  st_cta_topk<ROWS>(
      s_keys, mb, mb, ROWS, [&](int c) { return s_row[c].free; }, s_sel,
      [&](int c, int j, int slot) {
        const st_topk_row w = s_row[c];
        st_topk_out_row(p, h, i0 + c)[w.lo + (w.nb - w.hi) + slot] = j;
      });

  // Forced ids, then -1 after the chosen ones; a warp per row.
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  for (int t = warp; t < ROWS; t += THREADS / 32) {
    if (i0 + t >= p.total_q) continue;
    const st_topk_row w = s_row[t];
    int32_t *out = st_topk_out_row(p, h, i0 + t);
    const int forced = w.lo + (w.nb - w.hi);
    for (int k = lane; k < forced; k += 32) out[k] = k < w.lo ? k : w.hi + (k - w.lo);
    for (int k = forced + s_sel.chosen[t] + lane; k < p.topk; k += 32) out[k] = -1;
  }
}

// warp (v2): this warp's row alone; every branch below is warp-uniform
// (the row's bounds and the reduced counts are the same on every lane).
__device__ __forceinline__ void st_index_topk_warp(const st_index_topk_params &p) {
  const int lane = threadIdx.x & 31, h = blockIdx.y;
  const int i = blockIdx.x * ROWS + (int)threadIdx.x / 32;
  if (i >= p.total_q) return; // the last tile's spare warps
  const st_topk_row w = st_topk_row_of(p, i);
  const float *srow = p.score + (int64_t)h * p.score_stride_head + (int64_t)i * p.score_stride_row;
  // Every load issued before any use; hi <= nb <= max_blocks <= 32 * KEYS
  // (the launcher's fit), so no column is left out.
  uint32_t key[LANE_KEYS];
#pragma unroll
  for (int m = 0; m < LANE_KEYS; m++) {
    const int j = lane + 32 * m;
    key[m] = j >= w.lo && j < w.hi ? st_score_key(__ldg(srow + j)) : 0u;
  }
  int32_t *out = st_topk_out_row(p, h, i);
  const int forced = w.lo + (w.nb - w.hi), present = w.hi - w.lo;
  for (int k = lane; k < forced; k += 32) out[k] = k < w.lo ? k : w.hi + (k - w.lo);
  // free >= 0: init + local <= topk. Keys sit in columns < hi.
  const int chosen = st_warp_topk(key, w.free, present, w.hi, [&](int m, int rank) { out[forced + rank] = lane + 32 * m; });
  for (int k = forced + chosen + lane; k < p.topk; k += 32) out[k] = -1;
}

extern "C" __global__ void __launch_bounds__(THREADS) st_index_topk_main(const st_index_topk_params p) {
  if constexpr (ALGO_WARP)
    st_index_topk_warp(p);
  else
    st_index_topk_cta(p);
}
