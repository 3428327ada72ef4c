// mbarrier.cuh - shared-memory barriers that count arrivals and bytes, and
// the bulk copy engine (cp.async.bulk) that signals them: stage handoffs
// between a copying thread and the warps that read the stage.
#ifndef ST_MBARRIER_CUH
#define ST_MBARRIER_CUH

// Orders this thread's generic-proxy writes to shared memory (st.shared,
// cp.async) before later async-proxy accesses of it (wgmma operands, bulk
// copies into it or out of it).
__device__ __forceinline__ void st_fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// `bar` arguments are shared-memory addresses (__cvta_generic_to_shared).
__device__ __forceinline__ void st_mbar_init(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

// After the barriers are initialized, before any other thread or the copy
// engine uses them (then a __syncthreads).
__device__ __forceinline__ void st_mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

__device__ __forceinline__ void st_mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// Arrives and announces `bytes` that copies will complete on this phase.
__device__ __forceinline__ void st_mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

// Waits until the barrier's phase with this parity has completed.
__device__ __forceinline__ void st_mbar_wait(uint32_t bar, int parity) {
  asm volatile("{\n .reg .pred done;\n wait:\n"
               " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
               " @!done bra wait;\n}\n" ::"r"(bar),
               "r"(parity)
               : "memory");
}

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from
// global memory to shared memory with the bulk copy engine; completion
// counts the bytes on barrier `bar`.
__device__ __forceinline__ void st_bulk_copy_g2s(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}

// st_bulk_copy_g2s under L2 cache policy `policy` (st_l2_evict_first).
__device__ __forceinline__ void st_bulk_copy_g2s_hint(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar,
                                                      uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n" ::"r"(
          dst),
      "l"(src), "r"(bytes), "r"(bar), "l"(policy)
      : "memory");
}

// Copies box (c0, c1, c2) of the tensor map at `map` (the address of a
// __grid_constant__ kernel argument's field) to shared memory `dst` (1024-byte
// aligned for the 128-byte swizzle) with the bulk tensor copy engine;
// completion counts the box's bytes on barrier `bar`.
__device__ __forceinline__ void st_tma_load_3d(uint32_t dst, const void *map, int c0, int c1, int c2, uint32_t bar) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
               "[%5];\n" ::"r"(dst),
               "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
               : "memory");
}

// The same for a 4-dimensional map (box (c0, c1, c2, c3)).
__device__ __forceinline__ void st_tma_load_4d(uint32_t dst, const void *map, int c0, int c1, int c2, int c3,
                                               uint32_t bar) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
               "%5}], [%6];\n" ::"r"(dst),
               "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
               : "memory");
}

// An L2 cache policy under which the lines an access brings in are the
// first to be evicted: for data that streams through once (sparse_attn's
// partials), so that it does not push out the lines other CTAs reuse.
__device__ __forceinline__ uint64_t st_l2_evict_first() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

// Copies box (c0, c1) of shared memory `src` (1024-byte aligned for the
// 128-byte swizzle) to the tensor map's global memory, in this thread's bulk
// group, under L2 cache policy `policy` (st_l2_evict_first). The writes to
// `src` must be fenced for the async proxy first (st_fence_proxy_async, by
// each writing thread, then a barrier).
__device__ __forceinline__ void st_tma_store_2d(const void *map, int c0, int c1, uint32_t src, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group.L2::cache_hint [%0, {%1, %2}], [%3], %4;\n" ::"l"(map),
      "r"(c0), "r"(c1), "r"(src), "l"(policy)
      : "memory");
}

// Closes this thread's bulk group of stores.
__device__ __forceinline__ void st_bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }

// Waits until this thread's bulk stores have read their shared memory (it
// may be written again).
__device__ __forceinline__ void st_bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }

// Waits until this thread's bulk stores are done.
__device__ __forceinline__ void st_bulk_wait() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

#endif // ST_MBARRIER_CUH
