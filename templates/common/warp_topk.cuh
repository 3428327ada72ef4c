// warp_topk.cuh - one warp picks the largest of up to 32 * N integer keys
// held in registers (lane l's key[m] is entry l + 32 m; key 0 = absent, as
// common/score_key.cuh makes it), for rows that one warp owns alone: no
// shared memory, no barrier.
//
// The want-th largest key T is found bit by bit from bit 31: a warp-wide
// count of the keys >= each candidate (one __reduce_add_sync per bit),
// stopping as soon as a candidate splits off exactly `want` keys. Then
// every key > T and as many keys == T as still wanted (in entry order) are
// chosen, ranked by a ballot and a popc.
#ifndef ST_WARP_TOPK_CUH
#define ST_WARP_TOPK_CUH

#include "common/cta_topk.cuh" // st_lanemask_lt

// c + (key >= cand) in two instructions (ISETP, predicated IADD); the
// plain `c += key >= cand` compiles to three (ISETP, VIADD, IMAD.MOV), and
// this is the inner loop of the search: N of them per bit.
__device__ __forceinline__ unsigned st_count_ge(unsigned c, uint32_t key, uint32_t cand) {
  asm("{\n\t.reg .pred q;\n\tsetp.ge.u32 q, %1, %2;\n\t@q add.u32 %0, %0, 1;\n\t}" : "+r"(c) : "r"(key), "r"(cand));
  return c;
}

// The want-th largest of the warp's keys, 1 <= want <= present (the
// number of non-zero keys): the largest v with at least `want` keys >= v.
// *exact says that exactly `want` keys are >= it (no ties straddle it).
// Warp-uniform arguments; all 32 lanes call.
template <int N>
__device__ __forceinline__ uint32_t st_warp_kth(const uint32_t (&key)[N], int want, bool *exact) {
  uint32_t prefix = 0u;
  bool hit = false;
  for (int b = 31; b >= 0 && !hit; b--) {
    const uint32_t cand = prefix | (1u << b);
    unsigned c = 0;
#pragma unroll
    for (int m = 0; m < N; m++) c = st_count_ge(c, key[m], cand);
    const int count = (int)__reduce_add_sync(0xffffffffu, c);
    if (count >= want) {
      prefix = cand;
      hit = count == want; // the keys >= cand are the answer
    }
  }
  *exact = hit;
  return prefix;
}

// Chooses min(want, present) keys, `present` being the number of non-zero
// keys (the caller knows it), and calls put(m, rank) on the lane holding
// each chosen key[m], ranks 0, 1, ... in entry order. Entries at or past
// `limit` must be absent (they are not scanned). Warp-uniform arguments;
// all 32 lanes call. Returns the number chosen.
template <int N, class Put>
__device__ __forceinline__ int st_warp_topk(const uint32_t (&key)[N], int want, int present, int limit, Put &&put) {
  constexpr uint32_t ALL = 0xffffffffu;
  const int chosen = min(want, present);
  if (chosen <= 0) return 0;
  // Chosen: the keys >= cut, and the first `ties` keys == tie. With no
  // more wanted than present every present key (> 0) is.
  uint32_t cut = 1u, tie = 0u;
  int ties = 0;
  if (want < present) {
    bool exact;
    const uint32_t kth = st_warp_kth(key, want, &exact); // > 0, as want <= present
    if (exact) {
      cut = kth;
    } else { // keys == kth straddle the cut: take keys > kth, then ties
      unsigned c = 0;
#pragma unroll
      for (int m = 0; m < N; m++) c += key[m] > kth;
      cut = kth + 1u; // kth <= the key of +inf, 0xff800000: no wrap
      tie = kth;
      ties = want - (int)__reduce_add_sync(ALL, c);
    }
  }
  const int lane = threadIdx.x & 31;
  const uint32_t below = st_lanemask_lt();
  int slot = 0, ties_seen = 0;
#pragma unroll
  for (int m = 0; m < N; m++) {
    if (32 * m >= limit) break; // no present key from here on
    // Bitwise, not short-circuit: no divergent branch per key. With no
    // ties wanted (ties = 0) no rank is below the quota.
    const uint32_t eq = __ballot_sync(ALL, key[m] == tie);
    const bool take = (key[m] >= cut) | (((eq >> lane & 1u) != 0u) & (ties_seen + __popc(eq & below) < ties));
    const uint32_t taken = __ballot_sync(ALL, take);
    if (take) put(m, slot + __popc(taken & below));
    slot += __popc(taken);
    ties_seen += __popc(eq);
  }
  return chosen;
}

#endif // ST_WARP_TOPK_CUH
