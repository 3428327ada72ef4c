// cta_topk.cuh - the whole CTA selects, for each of several columns, the k
// largest keys of that column's array.
//
// Keys are the 32-bit keys of score_key.cuh; key 0 means "absent" and is
// never selected; among equal keys the choice is arbitrary, as the op
// contract allows; chosen keys are emitted in no particular order.
//
// The selection runs once per launch on the critical path of a single CTA,
// so what counts is its chain of dependent steps, not its work
// (docs/kernels/index_decode.md, v4):
//  - short rows (ncols * n <= threads, n <= ST_RANK_MAX): one thread per key
//    counts the keys of its column ranked above its own; rank < k is chosen
//    and the rank is its slot. One pass, one barrier.
//  - otherwise radix select, 8-bit digits from the top, every column in lock
//    step: in a pass each thread adds the keys that still match their
//    column's prefix to that column's 256-bin histogram (a warp whose keys
//    share a bin, as a column's scores share their leading bits in the first
//    pass, adds once), ST_UNROLL keys per thread at a time so their loads
//    and atomics overlap; then one warp per column finds the digit at which
//    the count from the top reaches the keys still wanted. A column is
//    settled as soon as the whole bucket of that digit is wanted (on real
//    scores usually after two or three passes), else after four, when the
//    prefix is the k-th key itself. One last pass emits every key above the
//    cut and keys equal to it up to the quota.
#ifndef ST_CTA_TOPK_CUH
#define ST_CTA_TOPK_CUH

__device__ __forceinline__ uint32_t st_lanemask_lt() {
  uint32_t m;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
  return m;
}

constexpr int ST_RANK_MAX = 128;
constexpr int ST_UNROLL = 8;

// Adds one to a histogram bin. For an add of the constant 1, atomicAdd or
// red.shared alike, ptxas emits a warp-aggregating loop that runs once per
// distinct address in the warp (SASS: VOTEU.ANY + ATOMS.POPC.INC), up to 32
// serial steps per call once a pass's bins spread: 10 us for 2 x 1024 keys.
// An increment it cannot prove constant (the caller passes a 1 computed from
// data) keeps the plain single-instruction add.
__device__ __forceinline__ void st_smem_add(uint32_t *p, uint32_t v) {
  asm volatile("red.shared.add.u32 [%0], %1;" ::"r"((uint32_t)__cvta_generic_to_shared(p)), "r"(v) : "memory");
}

template <int MAXC> struct st_cta_topk_smem {
  uint32_t hist[MAXC][256];
  // Column c takes every key k with (k & mask) > prefix and up to `quota`
  // keys with (k & mask) == prefix.
  uint32_t prefix[MAXC], mask[MAXC];
  int want[MAXC];    // keys still to find inside the current bucket
  int quota[MAXC];
  int settled[MAXC]; // no more passes for this column
  int eq_taken[MAXC];
  int chosen[MAXC];  // keys emitted (after the call: the column's count)
};

// The radix passes give each column tpc = blockDim.x / ncols threads (the
// rest idle): thread t works on column t / tpc, on its keys r0, r0 + tpc, ...
// (r0 = t % tpc), so a thread reads its column's state once per pass and
// no key index is ever divided (v4 divided every key's index by n: 25
// instructions a key, and the passes ran 7x slower than their loads).
struct st_topk_lane {
  int col;    // column of this thread (0 when idle, with no keys)
  int r0;     // first key index
  int tpc;    // threads per column = key index step
  int steps;  // load steps of ST_UNROLL keys, the same for every thread
  bool active;
};

__device__ __forceinline__ st_topk_lane st_topk_lane_of(int n, int ncols) {
  st_topk_lane l;
  l.tpc = (int)blockDim.x / ncols;
  const int c = (int)threadIdx.x / l.tpc;
  l.active = c < ncols;
  l.col = l.active ? c : 0;
  l.r0 = (int)threadIdx.x - c * l.tpc;
  l.steps = (n + l.tpc * ST_UNROLL - 1) / (l.tpc * ST_UNROLL);
  return l;
}

// Step s: ST_UNROLL keys of this thread's column, all loads issued before
// any use; 0 (absent) past the end or when idle.
__device__ __forceinline__ void st_topk_load_step(const uint32_t *kc, int n, const st_topk_lane &l, int s,
                                                  uint32_t (&key)[ST_UNROLL]) {
#pragma unroll
  for (int u = 0; u < ST_UNROLL; u++) {
    const int i = (s * ST_UNROLL + u) * l.tpc + l.r0;
    key[u] = l.active && i < n ? kc[i] : 0u;
  }
}

// Column c's keys are keys[c * stride + i], i < n (shared memory: read up to
// five times); want(c) keys are wanted (<= 0: none; the same on every call). emit(c, i, slot) is
// called once per chosen key, by any thread, with distinct slots 0, 1, ...
// On return (after a barrier) sm.chosen[c] is min(want(c), non-zero keys).
template <int MAXC, class Want, class Emit>
__device__ void st_cta_topk(const uint32_t *keys, int stride, int n, int ncols, Want want,
                            st_cta_topk_smem<MAXC> &sm, Emit emit) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  const int total_keys = ncols * n;
  if (total_keys <= (int)blockDim.x && n <= ST_RANK_MAX) {
    if (threadIdx.x < ncols) sm.chosen[threadIdx.x] = 0;
    __syncthreads();
    if ((int)threadIdx.x < total_keys) {
      const int c = threadIdx.x / n, i = threadIdx.x - c * n;
      const uint32_t *kc = keys + c * stride;
      const uint32_t key = kc[i];
      // ST_UNROLL independent loads per step: the loop is a chain of
      // shared-memory latencies otherwise (1900 cycles for n = 64).
      int above = 0;
      for (int j0 = 0; j0 < n; j0 += ST_UNROLL) {
        uint32_t other[ST_UNROLL];
#pragma unroll
        for (int u = 0; u < ST_UNROLL; u++) other[u] = j0 + u < n ? kc[j0 + u] : 0u;
#pragma unroll
        for (int u = 0; u < ST_UNROLL; u++) above += other[u] > key || (other[u] == key && j0 + u < i);
      }
      if (key != 0u && above < want(c)) {
        emit(c, i, above);
        atomicAdd(&sm.chosen[c], 1);
      }
    }
    __syncthreads();
    return;
  }
  if (threadIdx.x < ncols) {
    const int c = threadIdx.x, w = want(c);
    sm.prefix[c] = 0u;
    sm.mask[c] = 0u;
    sm.want[c] = w;
    sm.quota[c] = 0;
    sm.settled[c] = w <= 0;
    sm.eq_taken[c] = 0;
    sm.chosen[c] = 0;
  }
  __syncthreads();
  const st_topk_lane l = st_topk_lane_of(n, ncols);
  const uint32_t *kc = keys + l.col * stride;
  for (int pass = 0; pass < 4; pass++) {
    const int shift = 24 - 8 * pass;
    for (int e = threadIdx.x; e < ncols * 256; e += blockDim.x) sm.hist[e >> 8][e & 255] = 0u;
    __syncthreads();
    const bool live = l.active && !sm.settled[l.col];
    const uint32_t mask = sm.mask[l.col], prefix = sm.prefix[l.col];
    // Every lane of a warp runs the same steps (the vote needs the whole
    // warp); a warp may straddle two columns, whose bins differ.
    for (int s = 0; s < l.steps; s++) {
      uint32_t key[ST_UNROLL];
      st_topk_load_step(kc, n, l, s, key);
#pragma unroll
      for (int u = 0; u < ST_UNROLL; u++) {
        const bool counted = live && key[u] != 0u && (key[u] & mask) == prefix;
        const uint32_t bin = counted ? (uint32_t)l.col << 8 | ((key[u] >> shift) & 255u) : 0xffffffffu;
        const uint32_t lead = __shfl_sync(0xffffffffu, bin, 0);
        if (__all_sync(0xffffffffu, bin == lead)) {
          if (lane == 0 && lead != 0xffffffffu) st_smem_add(&sm.hist[lead >> 8][lead & 255u], 32u);
        } else if (bin != 0xffffffffu) {
          st_smem_add(&sm.hist[bin >> 8][bin & 255u], 1u + (bin >> 31)); // bin < 2^31 here
        }
      }
    }
    __syncthreads();
    for (int c = warp; c < ncols; c += nwarps) {
      if (sm.settled[c]) continue;
      // Lane l owns bins 255-8l down to 248-8l (descending digit order).
      uint32_t cnt[8], own = 0;
#pragma unroll
      for (int i = 0; i < 8; i++) {
        cnt[i] = sm.hist[c][255 - 8 * lane - i];
        own += cnt[i];
      }
      uint32_t incl = own;
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) {
        const uint32_t v = __shfl_up_sync(0xffffffffu, incl, d);
        if (lane >= d) incl += v;
      }
      const uint32_t total = __shfl_sync(0xffffffffu, incl, 31);
      const uint32_t w = (uint32_t)sm.want[c];
      // One lane writes this column's want, quota and settled flag below, after
      // every lane read them; a shuffle or ballot orders execution, not memory.
      __syncwarp();
      if (pass == 0 && total <= w) { // every present key is wanted
        if (lane == 0) {
          sm.quota[c] = (int)total;
          sm.settled[c] = 1;
        }
        continue;
      }
      // The digit where the running count from the top first reaches w
      // (the bucket holds at least w keys, so some lane finds it).
      uint32_t run = incl - own, above = 0, in_bin = 0;
      int found = -1;
#pragma unroll
      for (int i = 0; i < 8; i++) {
        if (found < 0 && run < w && run + cnt[i] >= w) {
          found = 255 - 8 * lane - i;
          above = run;
          in_bin = cnt[i];
        }
        run += cnt[i];
      }
      const int src = __ffs(__ballot_sync(0xffffffffu, found >= 0)) - 1;
      if (lane == src) {
        const int left = (int)(w - above);
        sm.prefix[c] |= (uint32_t)found << shift;
        sm.mask[c] |= 0xffu << shift;
        sm.want[c] = left;
        if ((uint32_t)left == in_bin || pass == 3) {
          sm.quota[c] = left;
          sm.settled[c] = 1;
        }
      }
    }
    __syncthreads();
    bool open = false;
    for (int c = 0; c < ncols; c++) open |= !sm.settled[c];
    if (!open) break;
  }
  const uint32_t mask = sm.mask[l.col], prefix = sm.prefix[l.col];
  const int quota = sm.quota[l.col];
  for (int s = 0; s < l.steps; s++) {
    uint32_t key[ST_UNROLL];
    st_topk_load_step(kc, n, l, s, key);
#pragma unroll
    for (int u = 0; u < ST_UNROLL; u++) {
      if (key[u] == 0u) continue;
      const uint32_t masked = key[u] & mask;
      if (masked > prefix || (masked == prefix && atomicAdd(&sm.eq_taken[l.col], 1) < quota))
        emit(l.col, (s * ST_UNROLL + u) * l.tpc + l.r0, atomicAdd(&sm.chosen[l.col], 1));
    }
  }
  __syncthreads();
}

#endif // ST_CTA_TOPK_CUH
