// load.cuh - global loads with the cache behaviour each stream wants.
#ifndef ST_LOAD_CUH
#define ST_LOAD_CUH

// 16 bytes that are read once (KV and index-K cache rows): read-only path,
// not kept in L1.
__device__ __forceinline__ uint4 st_ld_stream16(const void *p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// Data another CTA of this launch wrote (block keys): read from L2.
__device__ __forceinline__ uint32_t st_ld_l2_u32(const uint32_t *p) { return __ldcg(p); }

#endif // ST_LOAD_CUH
