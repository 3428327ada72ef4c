// bound_topk.cuh - the whole CTA selects, for each of several columns, the
// `want` largest of n keys (key 0 = absent, as common/score_key.cuh makes
// it), warp by warp: no histogram, no radix passes.
//
//  - n <= ST_BOUND_CHUNK: one warp per column holds the column in
//    registers and selects it alone (common/warp_topk.cuh).
//  - longer columns are cut into chunks of ST_BOUND_CHUNK keys spread over
//    the column's warps. A chunk's want-th largest key is a lower bound of
//    the column's (the chunk alone has `want` keys at or above it), so only
//    keys >= the largest chunk bound can be chosen: those (the wanted ones
//    plus a few on random scores) are gathered in shared memory and one
//    warp selects among them.
//
// With one chunk a warp (up to 1024 keys a column over 4 warps): two warp
// bit searches in sequence and four barriers, where
// common/cta_topk.cuh's radix select runs up to five passes of four
// barriers each (index_decode v4.1: ~10000 cycles for 2 columns of 1024
// keys; docs/kernels/index_decode.md, v5). More than st_bound_cap
// candidates in a column (many keys equal to its bound) make the call
// return false with nothing emitted, and the caller falls back to
// st_cta_topk.
#ifndef ST_BOUND_TOPK_CUH
#define ST_BOUND_TOPK_CUH

#include "common/warp_topk.cuh"

constexpr int ST_BOUND_PER_LANE = 8; // keys a lane holds per chunk
constexpr int ST_BOUND_CHUNK = 32 * ST_BOUND_PER_LANE;
// Candidates a column may gather: at most 2048 in all (16 KiB), so that
// with the launchers' dynamic shared memory the kernels stay under the 48
// KiB that need no opt-in; up to 8 columns: 256 each (want 64 over 4
// chunks).
template <int MAXC> constexpr int st_bound_cap() { return MAXC <= 8 ? 256 : 128; }

template <int MAXC> struct st_bound_topk_smem {
  static constexpr int CAP = st_bound_cap<MAXC>();
  uint32_t bound[MAXC]; // largest chunk bound of the column
  int count[MAXC];      // candidates found (may exceed CAP)
  int chosen[MAXC];     // after the call: keys emitted for the column
  uint32_t key[MAXC][CAP];
  int idx[MAXC][CAP];
};

// Chunk q of a column: lane l's key m is entry q * ST_BOUND_CHUNK + 32 m + l
// (absent past n), read by load(c, i).
template <class Load>
__device__ __forceinline__ void st_bound_load_chunk(Load &load, int c, int q, int n,
                                                    uint32_t (&key)[ST_BOUND_PER_LANE]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int m = 0; m < ST_BOUND_PER_LANE; m++) {
    const int i = q * ST_BOUND_CHUNK + 32 * m + lane;
    key[m] = i < n ? load(c, i) : 0u;
  }
}

// Keys of the chunk >= v, warp-wide (v = 1: the present ones).
__device__ __forceinline__ int st_bound_count_ge(const uint32_t (&key)[ST_BOUND_PER_LANE], uint32_t v) {
  unsigned c = 0;
#pragma unroll
  for (int m = 0; m < ST_BOUND_PER_LANE; m++) c = st_count_ge(c, key[m], v);
  return (int)__reduce_add_sync(0xffffffffu, c);
}

// Column c's key i is load(c, i), i < n (called up to twice per key, by
// any thread); want(c) keys are wanted (<= 0: none). emit(c, i, slot) is
// called once per chosen key, with distinct slots 0, 1, ... Returns true
// (the same in every thread, after a barrier) with sm.chosen[c] =
// min(want(c), present keys); false when a column had too many candidates,
// with nothing emitted.
template <int MAXC, class Load, class Want, class Emit>
__device__ bool st_bound_topk(int n, int ncols, Load load, Want want, st_bound_topk_smem<MAXC> &sm, Emit emit) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  // Warps per column: several when there are fewer columns than warps.
  const int wpc = ncols < nwarps ? nwarps / ncols : 1;
  const int first_col = warp / wpc, sub = warp - first_col * wpc;
  const int col_step = wpc == 1 ? nwarps : ncols; // past the last column after one step
  const int nchunks = (n + ST_BOUND_CHUNK - 1) / ST_BOUND_CHUNK;
  if (nchunks <= 1) {
    for (int c = first_col; c < ncols && sub == 0; c += col_step) {
      uint32_t key[ST_BOUND_PER_LANE];
      st_bound_load_chunk(load, c, 0, n, key);
      const int chosen = st_warp_topk(key, want(c), st_bound_count_ge(key, 1u), n,
                                      [&](int m, int slot) { emit(c, 32 * m + lane, slot); });
      if (lane == 0) sm.chosen[c] = chosen;
    }
    __syncthreads();
    return true;
  }
  if ((int)threadIdx.x < ncols) {
    sm.bound[threadIdx.x] = 0u;
    sm.count[threadIdx.x] = 0;
  }
  __syncthreads();
  // The warp's first chunk (column first_col, chunk sub) stays in registers
  // for the gathering pass: usually the only one it has (1024 keys a
  // column over 4 warps), which saves that pass an L2 round trip.
  uint32_t kept[ST_BOUND_PER_LANE];
  for (int c = first_col; c < ncols; c += col_step) {
    const int w = want(c);
    if (w <= 0) continue;
    uint32_t bound = 0u;
    for (int q = sub; q < nchunks; q += wpc) {
      uint32_t key[ST_BOUND_PER_LANE];
      st_bound_load_chunk(load, c, q, n, key);
      if (c == first_col && q == sub)
#pragma unroll
        for (int m = 0; m < ST_BOUND_PER_LANE; m++) kept[m] = key[m];
      // Only a chunk with `w` keys at or above the bound so far can raise it.
      if (st_bound_count_ge(key, max(bound, 1u)) >= w) {
        bool exact;
        bound = st_warp_kth(key, w, &exact);
      }
    }
    if (lane == 0 && bound != 0u) atomicMax(&sm.bound[c], bound);
  }
  __syncthreads();
  const uint32_t below = st_lanemask_lt();
  for (int c = first_col; c < ncols; c += col_step) {
    if (want(c) <= 0) continue;
    const uint32_t cut = max(sm.bound[c], 1u);
    for (int q = sub; q < nchunks; q += wpc) {
      uint32_t key[ST_BOUND_PER_LANE];
      if (c == first_col && q == sub) {
#pragma unroll
        for (int m = 0; m < ST_BOUND_PER_LANE; m++) key[m] = kept[m];
      } else {
        st_bound_load_chunk(load, c, q, n, key);
      }
#pragma unroll
      for (int m = 0; m < ST_BOUND_PER_LANE; m++) {
        const bool take = key[m] >= cut;
        const uint32_t taken = __ballot_sync(0xffffffffu, take);
        if (taken == 0u) continue;
        int base = 0;
        if (lane == 0) base = atomicAdd(&sm.count[c], __popc(taken));
        base = __shfl_sync(0xffffffffu, base, 0) + __popc(taken & below);
        if (take && base < sm.CAP) {
          sm.key[c][base] = key[m];
          sm.idx[c][base] = q * ST_BOUND_CHUNK + 32 * m + lane;
        }
      }
    }
  }
  __syncthreads();
  bool overflow = false;
  for (int c = 0; c < ncols; c++) overflow |= sm.count[c] > sm.CAP; // the same in every thread
  if (overflow) {
    __syncthreads(); // the caller's fallback may reuse this shared memory
    return false;
  }
  for (int c = warp; c < ncols; c += nwarps) {
    constexpr int N = st_bound_topk_smem<MAXC>::CAP / 32;
    const int cnt = sm.count[c]; // every candidate is present (>= cut >= 1)
    uint32_t key[N];
#pragma unroll
    for (int m = 0; m < N; m++) key[m] = 32 * m + lane < cnt ? sm.key[c][32 * m + lane] : 0u;
    const int chosen = st_warp_topk(key, want(c), cnt, cnt,
                                    [&](int m, int slot) { emit(c, sm.idx[c][32 * m + lane], slot); });
    if (lane == 0) sm.chosen[c] = chosen;
  }
  __syncthreads();
  return true;
}

#endif // ST_BOUND_TOPK_CUH
