// radix_topk_row.cuh - one row's top-k by one CTA: radix select on the
// logits' order-preserving 32-bit keys (common/score_key.cuh; NaN as
// -inf, -0 as +0), shared by dsa_index_decode's merge and dsa_index_topk.
//
// Three passes of 12-, 10- and 10-bit digits, each a shared-memory
// histogram of the keys that still match the prefix and a CTA-wide scan
// from the top, settle the k-th key exactly; then every key above it is
// emitted in any order, and of the keys equal to it the lowest positions,
// by a running count in position order (ties as the references break
// them). A row of up to stage_cap logits is read once into shared memory
// and every pass runs there. A longer row: with FILTER, the first pass
// reads it from L2, a second read emits the keys above the k-th key's
// 12-bit bin and stages that bin's keys and positions (the candidates, if
// at most cand_cap) for the last two passes; otherwise all five passes
// read the row from L2 (the first three, the emit and the ties).
//
// Every function takes the CTA's thread count as THREADS (a power of two,
// 64..1024) and is called by every thread of the CTA.
#ifndef ST_RADIX_TOPK_ROW_CUH
#define ST_RADIX_TOPK_ROW_CUH

#include "common/score_key.cuh"

// Digits of the radix select from the top: 12 bits first (4096 bins, an
// eighth of a binade of fp32 logits each, so the bin of the k-th logit
// holds few of a row's tokens), then 10 and 10.
constexpr int ST_RADIX_FIRST_BITS = 12, ST_RADIX_LATER_BITS = 10;
constexpr int ST_RADIX_MAX_BINS = 1 << ST_RADIX_FIRST_BITS;
static_assert(ST_RADIX_FIRST_BITS + 2 * ST_RADIX_LATER_BITS == 32, "three digits cover a key");

// The selection's shared state (about 16.5 KiB: launchers' opt-in
// thresholds for dynamic shared memory count on it).
template <int THREADS> struct st_radix_smem {
  uint32_t hist[ST_RADIX_MAX_BINS];
  uint32_t warp_sum[THREADS / 32];
  uint32_t prefix, want, emitted, count;
};

// A logit's key. + 0 turns -0 into +0 (round to nearest): the two are
// one value to the contract, so they must tie and go by position, as in
// the reference, not rank by their sign bit.
__device__ __forceinline__ uint32_t st_logit_key_of(float logit) { return st_score_key(logit + 0.f); }

// After a pass's histogram (sm.hist[0..BINS)): the digit at `shift` of
// the k-th largest key, with `want` keys still wanted among those that
// match `prefix`. Thread i scans bins BINS-1-i*PER down, a CTA-wide scan
// of the threads' sums gives the keys in the bins above each thread's;
// the one thread whose bins hold the want-th key sets prefix and want.
template <int THREADS, int BINS>
__device__ __forceinline__ void st_find_digit(st_radix_smem<THREADS> &sm, int shift, uint32_t &prefix,
                                              uint32_t &want) {
  static_assert((THREADS & (THREADS - 1)) == 0, "the digit scan splits bins evenly over the threads");
  static_assert(THREADS >= 64 && THREADS <= 1024, "the warp counts fit one warp's scan");
  constexpr int SCANNERS = BINS < THREADS ? BINS : THREADS;
  constexpr int PER = BINS / SCANNERS;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid / 32;
  uint32_t sum = 0;
  if (tid < SCANNERS) {
#pragma unroll
    for (int j = 0; j < PER; j++) sum += sm.hist[BINS - 1 - tid * PER - j];
  }
  uint32_t incl = sum;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const uint32_t v = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += v;
  }
  if (lane == 31) sm.warp_sum[warp] = incl;
  __syncthreads();
  uint32_t above = incl - sum;
  for (int w = 0; w < warp; w++) above += sm.warp_sum[w];
  if (tid < SCANNERS && above < want && want <= above + sum) {
    for (int j = 0; j < PER; j++) {
      const int bin = BINS - 1 - tid * PER - j;
      const uint32_t c = sm.hist[bin];
      if (above + c >= want) {
        sm.prefix = prefix | ((uint32_t)bin << shift);
        sm.want = want - above;
        break;
      }
      above += c;
    }
  }
  __syncthreads();
  prefix = sm.prefix;
  want = sm.want;
  __syncthreads(); // hist, warp_sum and prefix are rewritten after this
}

// One radix pass over the keys key_at(i), i < n, that match prefix on
// mask: their digit at `shift` (BITS wide) into the histogram, then
// st_find_digit. Leaves the pass's histogram in sm.hist.
template <int THREADS, int BITS, class KeyAt>
__device__ __forceinline__ void st_radix_pass(KeyAt key_at, int n, int shift, uint32_t &prefix, uint32_t &mask,
                                              uint32_t &want, st_radix_smem<THREADS> &sm) {
  constexpr int BINS = 1 << BITS;
  for (int b = threadIdx.x; b < BINS; b += THREADS) sm.hist[b] = 0u;
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += THREADS) {
    const uint32_t k = key_at(i);
    if ((k & mask) == prefix) atomicAdd(&sm.hist[(k >> shift) & (BINS - 1)], 1u);
  }
  __syncthreads();
  st_find_digit<THREADS, BINS>(sm, shift, prefix, want);
  mask |= (uint32_t)(BINS - 1) << shift;
}

// The `want` lowest positions i < n whose key equals the k-th key, as
// base + i into out[first..]: a running count over the row in position
// order, one CTA-wide step of THREADS positions at a time (ties as the
// reference breaks them).
template <int THREADS, class KeyAt>
__device__ __forceinline__ void st_emit_ties_in_order(KeyAt key_at, int n, uint32_t kth, int want, int first,
                                                      int32_t *out, int base, st_radix_smem<THREADS> &sm) {
  constexpr int WARPS = THREADS / 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  int taken = 0;
  for (int b = 0; b < n && taken < want; b += THREADS) {
    const int i = b + threadIdx.x;
    const bool eq = i < n && key_at(i) == kth;
    const uint32_t ballot = __ballot_sync(0xffffffffu, eq);
    if (lane == 0) sm.warp_sum[warp] = (uint32_t)__popc(ballot);
    __syncthreads();
    int before = 0, total = 0;
    for (int w = 0; w < WARPS; w++) {
      const int v = (int)sm.warp_sum[w];
      before += w < warp ? v : 0;
      total += v;
    }
    const int rank = taken + before + __popc(ballot & ((1u << lane) - 1u));
    if (eq && rank < want) out[first + rank] = base + i;
    taken += total;
    __syncthreads(); // warp_sum is rewritten in the next step
  }
}

// Once prefix is the k-th key: every key above it (any order, a slot
// counter), then the ties.
template <int THREADS, class KeyAt>
__device__ __forceinline__ void st_emit(KeyAt key_at, int n, uint32_t kth, int want, int topk, int32_t *out, int base,
                                        st_radix_smem<THREADS> &sm) {
  if (threadIdx.x == 0) sm.emitted = 0u;
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += THREADS)
    if (key_at(i) > kth) out[atomicAdd(&sm.emitted, 1u)] = base + i;
  st_emit_ties_in_order<THREADS>(key_at, n, kth, want, topk - want, out, base, sm);
}

// The top `topk` of the n > topk logits lg[0..n) as positions base + i
// into out[0..topk), in no particular order. lg is read with __ldcg (the
// logits were written by an earlier kernel: from L2, not a stale L1).
// s_dyn: dynamic shared memory of stage_cap keys (a row of n <= stage_cap
// is staged) or, with FILTER, 2 x cand_cap words for a longer row's
// candidates (cand_cap 0: none).
template <int THREADS, int FILTER>
__device__ __forceinline__ void st_radix_topk_row(const float *lg, int n, int topk, int stage_cap, int cand_cap,
                                                  int32_t *out, int base, uint32_t *s_dyn,
                                                  st_radix_smem<THREADS> &sm) {
  constexpr int FIRST = ST_RADIX_FIRST_BITS, LATER = ST_RADIX_LATER_BITS;
  const auto from_l2 = [&](int i) { return st_logit_key_of(__ldcg(lg + i)); };
  uint32_t prefix = 0, mask = 0, want = (uint32_t)topk;
  if (n <= stage_cap) { // the whole row in shared memory, every pass there
    for (int i = threadIdx.x; i < n; i += THREADS) s_dyn[i] = from_l2(i);
    __syncthreads();
    const auto staged = [&](int i) { return s_dyn[i]; };
    st_radix_pass<THREADS, FIRST>(staged, n, 32 - FIRST, prefix, mask, want, sm);
    st_radix_pass<THREADS, LATER>(staged, n, LATER, prefix, mask, want, sm);
    st_radix_pass<THREADS, LATER>(staged, n, 0, prefix, mask, want, sm);
    st_emit<THREADS>(staged, n, prefix, (int)want, topk, out, base, sm);
    return;
  }
  st_radix_pass<THREADS, FIRST>(from_l2, n, 32 - FIRST, prefix, mask, want, sm);
  const uint32_t m = sm.hist[prefix >> (32 - FIRST)]; // keys in the k-th key's bin
  if (FILTER && m <= (uint32_t)cand_cap) {
    // A second read of the row: keys of higher bins are chosen at once,
    // those of the k-th key's bin staged as candidates; the last two
    // digits are found among the candidates alone.
    uint32_t *cand_key = s_dyn, *cand_pos = s_dyn + cand_cap;
    if (threadIdx.x == 0) sm.emitted = sm.count = 0u;
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += THREADS) {
      const uint32_t k = from_l2(i);
      if ((k & mask) > prefix) {
        out[atomicAdd(&sm.emitted, 1u)] = base + i;
      } else if ((k & mask) == prefix) {
        const uint32_t c = atomicAdd(&sm.count, 1u);
        cand_key[c] = k;
        cand_pos[c] = (uint32_t)i;
      }
    }
    __syncthreads();
    const auto cand = [&](int c) { return cand_key[c]; };
    st_radix_pass<THREADS, LATER>(cand, (int)m, LATER, prefix, mask, want, sm);
    st_radix_pass<THREADS, LATER>(cand, (int)m, 0, prefix, mask, want, sm);
    const uint32_t ties = sm.hist[prefix & ((1u << LATER) - 1u)]; // candidates equal to the k-th key
    for (int c = threadIdx.x; c < (int)m; c += THREADS) {
      const uint32_t k = cand_key[c];
      if (k > prefix || (k == prefix && ties == want)) out[atomicAdd(&sm.emitted, 1u)] = base + (int32_t)cand_pos[c];
    }
    // More ties than wanted: the lowest positions, which the candidates'
    // order (atomic slots) does not give: in position order from the row.
    if (ties != want) st_emit_ties_in_order<THREADS>(from_l2, n, prefix, (int)want, topk - (int)want, out, base, sm);
    return;
  }
  st_radix_pass<THREADS, LATER>(from_l2, n, LATER, prefix, mask, want, sm);
  st_radix_pass<THREADS, LATER>(from_l2, n, 0, prefix, mask, want, sm);
  st_emit<THREADS>(from_l2, n, prefix, (int)want, topk, out, base, sm);
}

#endif // ST_RADIX_TOPK_ROW_CUH
