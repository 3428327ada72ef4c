// last_cta.cuh - "the last CTA of a group to finish does the rest" (the
// single-launch merges of index_decode and sparse_attn_decode).
#ifndef ST_LAST_CTA_CUH
#define ST_LAST_CTA_CUH

// Thread 0 only, after a __syncthreads() that follows every thread's
// writes of the CTA's part: counts the CTA in and returns whether it was
// the last of `ctas`. The add has acq_rel semantics at GPU scope: its
// release, cumulative through the barrier, publishes the whole CTA's
// writes before the count; in the last CTA its acquire makes every other
// CTA's writes visible to thread 0, and the caller's next __syncthreads()
// passes them on to the CTA. (Two __threadfence() around a plain atomicAdd
// did the same with two MEMBAR.SC.GPU; this is one MEMBAR.ALL.GPU and an L1
// invalidate. ncu put 15% of index_decode's B = 8, 8K stall samples on the
// SC fences and the barrier behind them.)
__device__ __forceinline__ bool st_last_to_arrive(uint32_t *counter, uint32_t ctas) {
  uint32_t before;
  asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], 1;" : "=r"(before) : "l"(counter) : "memory");
  return before == ctas - 1;
}

#endif
