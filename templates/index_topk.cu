// index_topk.cu - the indexer's block selection for a varlen prefill batch.
//
// Grid (ceil(total_q / ROWS), H); THREADS threads. CTA (tile, h) selects for
// the ROWS query tokens tile*ROWS .. of index head h (a tile may straddle
// requests: each token finds its request by a binary search of
// cu_seqlens_q). It stages every row's visible, non-forced block scores as
// order-preserving integer keys in shared memory (forced and invisible
// blocks as key 0, "absent"; NaN as -inf), runs one CTA-wide top-k over the
// ROWS rows at once (common/cta_topk.cuh, the selection index_decode uses),
// then writes each row: forced ids first, the chosen ones, -1 after.
//
// Bytes: each visible score once (4 B per block) and the ids; no arithmetic
// to speak of: bound by the score reads and the selection's latency.

constexpr int ROWS = ${rows};
constexpr int THREADS = ${threads};
constexpr int TOPK_CAP = ${topk};

// The argument block first: it brings the fixed-width integer types the
// common headers use under NVRTC (no C library there).
#include "params/index_topk.h"
#include "common/score_key.cuh"
#include "common/cta_topk.cuh"

constexpr int BLOCK_TOKENS = 128;

static_assert(THREADS % 32 == 0 && THREADS >= ROWS, "whole warps, a thread per row for the positions");

struct st_topk_row {
  int nb;     // visible blocks (0: padding, or a token past total_q)
  int lo, hi; // forced blocks are [0, lo) and [hi, nb)
  int free;   // ids chosen by score: min(topk, nb) - forced
};

__device__ __forceinline__ st_topk_row st_topk_row_of(const st_index_topk_params &p, int i) {
  st_topk_row w;
  w.nb = 0;
  if (i < p.total_q) {
    int lo = 0, hi = p.num_requests; // cu[lo] <= i < cu[hi]
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      if (p.cu_seqlens_q[mid] <= i) lo = mid;
      else hi = mid;
    }
    const int start = p.cu_seqlens_q[lo];
    const int pos = p.seq_lens[lo] - (p.cu_seqlens_q[lo + 1] - start) + (i - start);
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

extern "C" __global__ void __launch_bounds__(THREADS) st_index_topk_main(const st_index_topk_params p) {
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
