// varlen.cuh - where a query token of a varlen batch sits: its request
// (cu_seqlens_q, R + 1 entries, gives each request's first token) and its
// position in that request's sequence (seq_lens[r] tokens, the request's
// q_len of them last): the contract of every prefill op.
#ifndef ST_VARLEN_CUH
#define ST_VARLEN_CUH

// The request of query token i: the last one starting at or before it (a
// binary search of cu_seqlens_q).
__device__ __forceinline__ int st_request_of(const int32_t *cu_seqlens_q, int num_requests, int i) {
  int lo = 0, hi = num_requests; // cu[lo] <= i < cu[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (cu_seqlens_q[mid] <= i)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

// Position of query token i of request r: seq_lens[r] - q_len[r] + (i - first).
__device__ __forceinline__ int st_position_in(const int32_t *cu_seqlens_q, const int32_t *seq_lens, int r, int i) {
  const int start = cu_seqlens_q[r];
  return seq_lens[r] - (cu_seqlens_q[r + 1] - start) + (i - start);
}

#endif // ST_VARLEN_CUH
