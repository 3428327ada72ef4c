// warp_topk.cuh - one warp selects the k largest keys of an array.
//
// Radix select over the 32-bit keys of score_key.cuh: four 8-bit digit
// passes (a 256-bin histogram in the warp's own shared memory) find the k-th
// largest key exactly, then one ordered compaction pass emits every key above
// it and, among keys equal to it, those of lowest index: the contract's tie
// rule. Key 0 means "absent" and is never selected. Cost per call: five reads
// of the array by the warp, about 5 * n / 32 steps per lane plus 4 scans of
// 256 bins; histogram updates are aggregated per bin within a step. Emission order is index order, so the emitted slots of several
// calls over consecutive index ranges stay in global index order.
#ifndef ST_WARP_TOPK_CUH
#define ST_WARP_TOPK_CUH

__device__ __forceinline__ uint32_t st_lanemask_lt() {
  uint32_t m;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
  return m;
}

// Up to 32 keys, one per lane: each lane counts the keys ranked above its
// own (larger, or equal at a lower index) in 32 shuffle steps, with no shared
// memory round trips; far cheaper than the radix passes for short arrays.
template <class Emit>
__device__ int st_warp_topk_small(const uint32_t *keys, int n, int k, Emit emit) {
  const int lane = threadIdx.x & 31;
  const uint32_t key = lane < n ? keys[lane] : 0u;
  int above = 0;
#pragma unroll
  for (int j = 0; j < 32; j++) {
    const uint32_t other = __shfl_sync(0xffffffffu, key, j);
    above += other > key || (other == key && j < lane);
  }
  const bool take = key != 0u && above < k;
  const uint32_t bal = __ballot_sync(0xffffffffu, take);
  if (take) emit(lane, __popc(bal & st_lanemask_lt()));
  return __popc(bal);
}

// keys: n keys (shared memory, or anything the warp may read repeatedly);
// hist: 256 words of shared memory owned by this warp.
// emit(i, slot) is called by the lane that owns element i, slot in [0, count).
// Returns count = min(k, number of non-zero keys), the same on every lane.
template <class Emit>
__device__ int st_warp_topk(const uint32_t *keys, int n, int k, uint32_t *hist, Emit emit) {
  const int lane = threadIdx.x & 31;
  if (k <= 0 || n <= 0) return 0;
  if (n <= 32) return st_warp_topk_small(keys, n, k, emit);
  uint32_t prefix = 0, mask = 0, thr = 1;
  int remaining = k, need_eq = 0;
  for (int pass = 0; pass < 4; pass++) {
    const int shift = 24 - 8 * pass;
    __syncwarp(); // every lane has read the previous pass's bins
    for (int b = lane; b < 256; b += 32) hist[b] = 0;
    __syncwarp();
    // Scores of a row share their leading bits, so most lanes of a step fall
    // in the same bin: lanes with equal bins add once, through their leader,
    // instead of serializing 32 atomics on one address.
    for (int i0 = 0; i0 < n; i0 += 32) {
      const int i = i0 + lane;
      const uint32_t key = i < n ? keys[i] : 0u;
      const bool counted = key != 0 && (key & mask) == prefix;
      const uint32_t bin = counted ? (key >> shift) & 255u : 256u;
      const uint32_t same = __match_any_sync(0xffffffffu, bin);
      if (counted && (same & st_lanemask_lt()) == 0) atomicAdd(&hist[bin], (uint32_t)__popc(same));
    }
    __syncwarp();
    // Lane l owns bins 255-8l down to 248-8l (descending digit order).
    uint32_t c[8];
    uint32_t own = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
      c[i] = hist[255 - 8 * lane - i];
      own += c[i];
    }
    uint32_t incl = own;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const uint32_t v = __shfl_up_sync(0xffffffffu, incl, d);
      if (lane >= d) incl += v;
    }
    const uint32_t total = __shfl_sync(0xffffffffu, incl, 31);
    if (pass == 0) {
      if (total == 0) return 0;
      if (total <= (uint32_t)k) { // every present key is selected
        remaining = (int)total;
        thr = 1;
        need_eq = 0;
        break;
      }
    }
    // Find the digit where the running count (from the top) reaches `remaining`.
    uint32_t run = incl - own;
    int found = -1;
    uint32_t above = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
      if (found < 0 && run < (uint32_t)remaining && run + c[i] >= (uint32_t)remaining) {
        found = 255 - 8 * lane - i;
        above = run;
      }
      run += c[i];
    }
    const uint32_t who = __ballot_sync(0xffffffffu, found >= 0);
    const int src = __ffs(who) - 1;
    const int digit = __shfl_sync(0xffffffffu, found, src);
    above = __shfl_sync(0xffffffffu, above, src);
    remaining -= (int)above;
    prefix |= (uint32_t)digit << shift;
    mask |= 0xffu << shift;
    if (pass == 3) {
      thr = prefix + 1; // keys >= thr are strictly above the k-th key
      need_eq = remaining;
    }
  }
  // Ordered compaction: keys >= thr, then the first need_eq keys == thr-1.
  const uint32_t kth = thr - 1;
  const uint32_t lt = st_lanemask_lt();
  int slot = 0, eq_taken = 0;
  for (int base = 0; base < n; base += 32) {
    const int i = base + lane;
    const uint32_t key = i < n ? keys[i] : 0u;
    const bool gt = key >= thr && key != 0;
    const bool eq = need_eq > 0 && key == kth;
    const uint32_t bal_eq = __ballot_sync(0xffffffffu, eq);
    const bool take = gt || (eq && eq_taken + __popc(bal_eq & lt) < need_eq);
    const uint32_t bal = __ballot_sync(0xffffffffu, take);
    if (take) emit(i, slot + __popc(bal & lt));
    slot += __popc(bal);
    const int eqs = __popc(bal_eq);
    eq_taken += eqs < need_eq - eq_taken ? eqs : need_eq - eq_taken;
  }
  return slot;
}

#endif // ST_WARP_TOPK_CUH
