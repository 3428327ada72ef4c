// bound_topk.cuh - the whole CTA selects, for each of several columns, the
// `want` largest of n keys (key 0 = absent, as common/score_key.cuh makes
// it): short columns by ranks of every key or one warp's bit search,
// longer ones by ranks of the keys above a bound; no histogram, no radix
// passes.
//
// Up to ST_BOUND_WARP_MAX keys: where the CTA has a thread for every key
// of every column, each key is ranked against its column (st_rank_short);
// otherwise one warp selects a column alone. Longer
// columns' keys are spread over the lanes of 1, 2 or 4 warps, 8 keys a
// lane a round (one round up to 1024 keys). In each warp, the lane maximum
// of rank want - 1 among the warp's 32 (ranked by shuffles) bounds the
// column's want-th largest key from below (want distinct keys are at or
// above it); the column's bound is the largest of its warps'. Only keys >=
// the bound can be chosen: on random scores want plus a few dozen. Those
// candidates are gathered in shared memory (one atomic a warp and round)
// and each is ranked against the others by one thread; rank < want is
// chosen and the rank is its slot. Two barriers between the loads and the
// emits. This replaced two bit-by-bit warp searches in sequence (32
// dependent warp reductions each) and a gather with an atomic and a
// shuffle per key (index_decode v6, docs/kernels/index_decode.md).
//
// Ties: lane maxima and candidates are ranked by (key, position), so equal
// keys are chosen in an arbitrary but consistent order, as the op contract
// allows. More than st_bound_cap candidates in a column (many keys equal
// to the bound, or want > 32: no lane maximum has that rank, so every
// present key is a candidate) make the call return false with nothing
// emitted, and the caller falls back to st_cta_topk.
#ifndef ST_BOUND_TOPK_CUH
#define ST_BOUND_TOPK_CUH

#include "common/warp_topk.cuh"

constexpr int ST_BOUND_PER_LANE = 8; // keys a lane holds a round
// Columns of at most this many keys are short: ranked whole
// (st_rank_short) or selected by one warp alone in registers
// (common/warp_topk.cuh's bit search, one barrier). At n = 64 (B = 1 8K)
// the warp measured 0.7-0.9 us faster than the bound's ranks below, at n =
// 256 (B = 8 32K) 0.2-0.5 us slower (index_decode v6).
constexpr int ST_BOUND_WARP_MAX = 128;
// Candidates a column may gather: at most 2048 in all (16 KiB), so that
// with the launchers' dynamic shared memory the kernels stay under the 48
// KiB that need no opt-in; up to 8 columns: 256 each.
template <int MAXC> constexpr int st_bound_cap() { return MAXC <= 8 ? 256 : 128; }

template <int MAXC> struct st_bound_topk_smem {
  static constexpr int CAP = st_bound_cap<MAXC>();
  uint32_t warp_bound[MAXC][4]; // each of the column's warps' bound (0: none)
  int want[MAXC];               // want(c)
  int count[MAXC];              // candidates found (may exceed CAP)
  int chosen[MAXC];             // after the call: keys emitted for the column
  alignas(16) uint32_t key[MAXC][CAP];
  int idx[MAXC][CAP];
};

// Key m of round s of lane v (of V) in a column: entry (8 s + m) V + v,
// absent past n, read by load(c, i).
template <class Load>
__device__ __forceinline__ void st_bound_load_round(Load &load, int c, int s, int v, int V, int n,
                                                    uint32_t (&key)[ST_BOUND_PER_LANE]) {
#pragma unroll
  for (int m = 0; m < ST_BOUND_PER_LANE; m++) {
    const int i = (s * ST_BOUND_PER_LANE + m) * V + v;
    key[m] = i < n ? load(c, i) : 0u;
  }
}

// How many of row[from, to) rank above `mine`, the entry at position `at`:
// larger keys, and equal keys at lower positions. row is 16-byte aligned
// and `from` a multiple of 4; entries at or past `to` are not counted.
__device__ __forceinline__ int st_bound_rank(const uint32_t *row, int from, int to, uint32_t mine, int at) {
  int above = 0;
#pragma unroll 2
  for (int j = from; j < to; j += 4) {
    const uint4 q = *reinterpret_cast<const uint4 *>(row + j);
    const uint32_t k[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int u = 0; u < 4; u++) above += (j + u < to) & ((k[u] > mine) | ((k[u] == mine) & (j + u < at)));
  }
  return above;
}

// Columns short enough that every key has a thread (ncols * n <= the
// CTA's threads, n <= ST_BOUND_WARP_MAX): each key is ranked against its
// whole column at once, by 1, 2 or 4 adjacent lanes (each a part of the
// column, summed by shuffles); rank < want is chosen and the rank is its
// slot. One L2 round trip, one barrier and a few dozen compares a thread,
// in place of one warp a column searching bit by bit (14 or so dependent
// warp reductions on random scores) while the other warps wait
// (index_decode v7, docs/kernels/index_decode.md). Present keys (> 0)
// rank above absent ones, so the largest chosen rank + 1 is min(want,
// present). Same contract as st_bound_topk; all threads call.
template <int MAXC, class Load, class Want, class Emit>
__device__ void st_rank_short(int n, int ncols, Load &load, Want &want, st_bound_topk_smem<MAXC> &sm, Emit &emit) {
  const int per = ncols * n, nthreads = blockDim.x;
  const int span = nthreads >= 4 * per ? 4 : nthreads >= 2 * per ? 2 : 1;
  const int k = threadIdx.x / span, part = threadIdx.x - k * span;
  const int c = k / n, i = k - c * n; // a key when k < per
  uint32_t mine = 0u;
  if (k < per) {
    mine = load(c, i);
    if (part == 0) sm.key[c][i] = mine;
  }
  if ((int)threadIdx.x < ncols) {
    sm.want[threadIdx.x] = want(threadIdx.x);
    sm.chosen[threadIdx.x] = 0;
  }
  __syncthreads();
  const int seg = (n + 4 * span - 1) / (4 * span) * 4; // each part's entries, a multiple of 4
  int above = k < per && mine != 0u ? st_bound_rank(sm.key[c], part * seg, min(part * seg + seg, n), mine, i) : 0;
  for (int o = 1; o < span; o <<= 1) above += __shfl_xor_sync(0xffffffffu, above, o);
  if (k < per && part == 0 && mine != 0u && above < sm.want[c]) {
    emit(c, i, above);
    atomicMax(&sm.chosen[c], above + 1);
  }
  __syncthreads();
}

// Column c's key i is load(c, i), i < n (called up to twice per key, by
// any thread); want(c) keys are wanted (<= 0: none). emit(c, i, slot) is
// called once per chosen key, with distinct slots 0, 1, ... Returns true
// (the same in every thread, after a barrier) with sm.chosen[c] =
// min(want(c), present keys); false when a column had too many candidates,
// with nothing emitted.
template <int MAXC, class Load, class Want, class Emit>
__device__ bool st_bound_topk(int n, int ncols, Load load, Want want, st_bound_topk_smem<MAXC> &sm, Emit emit) {
  constexpr int CAP = st_bound_topk_smem<MAXC>::CAP;
  constexpr uint32_t ALL = 0xffffffffu;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  if (n <= ST_BOUND_WARP_MAX) {
    if (ncols * n <= nwarps * 32) {
      st_rank_short(n, ncols, load, want, sm, emit);
      return true;
    }
    for (int c = warp; c < ncols; c += nwarps) {
      uint32_t key[ST_BOUND_WARP_MAX / 32];
      unsigned present = 0;
#pragma unroll
      for (int m = 0; m < ST_BOUND_WARP_MAX / 32; m++) {
        const int i = 32 * m + lane;
        key[m] = i < n ? load(c, i) : 0u;
        present += key[m] != 0u;
      }
      const int chosen = st_warp_topk(key, want(c), (int)__reduce_add_sync(ALL, present), n,
                                      [&](int m, int slot) { emit(c, 32 * m + lane, slot); });
      if (lane == 0) sm.chosen[c] = chosen;
    }
    __syncthreads();
    return true;
  }
  // Warps a column: several when there are fewer columns than warps, at
  // most 4 (a power of two, so entry / V is a shift).
  int wpc = ncols < nwarps ? nwarps / ncols : 1;
  wpc = wpc >= 4 ? 4 : wpc >= 2 ? 2 : 1;
  const int V = 32 * wpc, first_col = warp / wpc, sub = warp - first_col * wpc, v = sub * 32 + lane;
  const int col_step = nwarps / wpc; // columns in flight at once
  const int rounds = (n + V * ST_BOUND_PER_LANE - 1) / (V * ST_BOUND_PER_LANE);
  if ((int)threadIdx.x < ncols) {
    sm.want[threadIdx.x] = want(threadIdx.x);
    sm.count[threadIdx.x] = 0;
  }
  // Each warp's bound. Its first round stays in registers for the
  // gathering: usually the only one it has, which saves that pass an L2
  // round trip.
  uint32_t kept[ST_BOUND_PER_LANE];
  for (int c = first_col; c < ncols; c += col_step) {
    uint32_t mx = 0u;
    for (int s = 0; s < rounds; s++) {
      uint32_t key[ST_BOUND_PER_LANE];
      st_bound_load_round(load, c, s, v, V, n, key);
#pragma unroll
      for (int m = 0; m < ST_BOUND_PER_LANE; m++) {
        if (c == first_col && s == 0) kept[m] = key[m];
        mx = max(mx, key[m]);
      }
    }
    int above = 0;
#pragma unroll
    for (int j = 0; j < 32; j++) {
      const uint32_t o = __shfl_sync(ALL, mx, j);
      above += (o > mx) | ((o == mx) & (j < lane));
    }
    const uint32_t hit = __ballot_sync(ALL, mx != 0u && above == want(c) - 1);
    const uint32_t b = __shfl_sync(ALL, mx, hit ? __ffs(hit) - 1 : 0);
    if (lane == 0) sm.warp_bound[c][sub] = hit ? b : 0u;
  }
  __syncthreads();
  // The candidates: every key >= the column's bound (>= 1 without one).
  const uint32_t below = st_lanemask_lt();
  for (int c = first_col; c < ncols; c += col_step) {
    if (sm.want[c] <= 0) continue;
    uint32_t cut = 1u;
    for (int w = 0; w < wpc; w++) cut = max(cut, sm.warp_bound[c][w]);
    for (int s = 0; s < rounds; s++) {
      uint32_t key[ST_BOUND_PER_LANE];
      if (c == first_col && s == 0) {
#pragma unroll
        for (int m = 0; m < ST_BOUND_PER_LANE; m++) key[m] = kept[m];
      } else {
        st_bound_load_round(load, c, s, v, V, n, key);
      }
      uint32_t taken[ST_BOUND_PER_LANE];
      int before[ST_BOUND_PER_LANE], total = 0;
#pragma unroll
      for (int m = 0; m < ST_BOUND_PER_LANE; m++) {
        taken[m] = __ballot_sync(ALL, key[m] >= cut);
        before[m] = total;
        total += __popc(taken[m]);
      }
      if (total == 0) continue; // warp-uniform
      int base = 0;
      if (lane == 0) base = atomicAdd(&sm.count[c], total);
      base = __shfl_sync(ALL, base, 0);
#pragma unroll
      for (int m = 0; m < ST_BOUND_PER_LANE; m++) {
        const int slot = base + before[m] + __popc(taken[m] & below);
        if (key[m] >= cut && slot < CAP) {
          sm.key[c][slot] = key[m];
          sm.idx[c][slot] = (s * ST_BOUND_PER_LANE + m) * V + v;
        }
      }
    }
  }
  __syncthreads();
  bool overflow = false;
  for (int c = 0; c < ncols; c++) overflow |= sm.count[c] > CAP; // the same in every thread
  if (overflow) {
    __syncthreads(); // the caller's fallback may reuse this shared memory
    return false;
  }
  // Each candidate ranked against its column's others: rank < want is chosen.
  const int tpc = blockDim.x / ncols, c = threadIdx.x / tpc, r0 = threadIdx.x - c * tpc;
  if (c < ncols) {
    const int cnt = sm.count[c], w = sm.want[c];
    for (int i = r0; i < cnt; i += tpc) {
      const int rank = cnt <= w ? i : st_bound_rank(sm.key[c], 0, cnt, sm.key[c][i], i);
      if (rank < w) emit(c, sm.idx[c][i], rank);
    }
    if (r0 == 0) sm.chosen[c] = min(max(w, 0), cnt);
  }
  __syncthreads();
  return true;
}

#endif // ST_BOUND_TOPK_CUH
