// wgmma.cuh - Hopper warpgroup matrix products (sm_90a) on operands in
// shared memory (and A from registers), for the prefill indexer's scoring
// loop and the block-major attention kernel (common/attn_wgmma.cuh).
//
// Operand layout: "K-major" rows of 128 bytes with the 128-byte swizzle, the
// layout of common/smem_tile.cuh for 8-chunk rows: row r's logical 16-byte
// chunk c sits at r * 128 + ((c ^ (r % 8)) << 4), in regions aligned to
// 1024 bytes (one swizzle atom = 8 rows). A row longer than 128 bytes is
// stored as several such regions ("panels"), one per 128 bytes of it. A
// k-step reads 32 bytes of every row: the descriptor's start address moves
// by 32 bytes within a panel (the swizzle is applied to the final address
// bits, so this is the logical offset).
//
// Accumulators of m64n128 in fp32, thread t of the warpgroup (warp w = t/32,
// lane l): d[4n + 0..1] = row 16w + l/4, columns 8n + 2(l%4) + 0..1;
// d[4n + 2..3] = row 16w + l/4 + 8, the same columns (n = 0..15).
#ifndef ST_WGMMA_CUH
#define ST_WGMMA_CUH

#include "common/mbarrier.cuh" // st_fence_proxy_async

// Shared-memory matrix descriptor (PTX "matrix descriptor"): start address,
// leading byte offset 16 (unused with a swizzle), stride byte offset 1024
// (from one 8-row atom to the next), 128-byte swizzle (mode 1 in bits 62-63).
__device__ __forceinline__ uint64_t st_wgmma_desc(uint32_t smem_addr) {
  return (uint64_t)((smem_addr & 0x3ffffu) >> 4) | ((uint64_t)(16 >> 4) << 16) | ((uint64_t)(1024 >> 4) << 32) |
         (1ull << 62);
}

// The descriptor of a B operand read transposed ("MN-major", imm-trans-b
// 1): rows of 128 bytes along N (V's dims in its 64-dim panels, one row a
// token), the 16 rows of a k-step from `smem_addr` on. Leading byte offset:
// from one panel of 64 columns to the next (`panel_bytes`); stride: from one
// 8-row atom to the next (1024). Settled on the H100 by a probe checked
// against the CPU (the other order reads garbage).
__device__ __forceinline__ uint64_t st_wgmma_desc_mn(uint32_t smem_addr, uint32_t panel_bytes) {
  return (uint64_t)((smem_addr & 0x3ffffu) >> 4) | ((uint64_t)(panel_bytes >> 4) << 16) |
         ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void st_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void st_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void st_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Keeps the compiler from moving accumulator reads or writes across an
// asynchronous product still in flight.
__device__ __forceinline__ void st_wgmma_fence_regs(float (&d)[64]) {
#pragma unroll
  for (int i = 0; i < 64; i++) asm volatile("" : "+f"(d[i])::"memory");
}

#define ST_WG_ACC8(i)                                                                                                  \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]),          \
      "+f"(d[i + 7])
#define ST_WG_ACC64                                                                                                    \
  ST_WG_ACC8(0), ST_WG_ACC8(8), ST_WG_ACC8(16), ST_WG_ACC8(24), ST_WG_ACC8(32), ST_WG_ACC8(40), ST_WG_ACC8(48),        \
      ST_WG_ACC8(56)
#define ST_WG_REGS64                                                                                                   \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "  \
  "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, "   \
  "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"

// d (+)= A[64 x 16] * B[16 x 128]^T, bf16, both K-major in shared memory;
// accumulate = 0 overwrites d.
__device__ __forceinline__ void st_wgmma_m64n128k16_bf16(float (&d)[64], uint64_t a, uint64_t b, int accumulate) {
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
               " wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " ST_WG_REGS64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
               : ST_WG_ACC64
               : "l"(a), "l"(b), "r"(accumulate));
}

// The same with f16 A and B (sparse_attn's dense fp8 scores: q.K on f16).
__device__ __forceinline__ void st_wgmma_m64n128k16_f16(float (&d)[64], uint64_t a, uint64_t b, int accumulate) {
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
               " wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " ST_WG_REGS64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
               : ST_WG_ACC64
               : "l"(a), "l"(b), "r"(accumulate));
}

// The same for e4m3 x e4m3, k = 32 (32 bytes of each row, as bf16's k16).
__device__ __forceinline__ void st_wgmma_m64n128k32_e4m3(float (&d)[64], uint64_t a, uint64_t b, int accumulate) {
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
               " wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " ST_WG_REGS64 ", %64, %65, p, 1, 1;\n}\n"
               : ST_WG_ACC64
               : "l"(a), "l"(b), "r"(accumulate));
}

// d (+)= A[64 x 16] * B[16 x 128], bf16: A from registers (per warp the
// A fragment of mma.sync m16n8k16 for its 16 rows: a[0..3] = rows l/4 and
// l/4 + 8, k 2(l%4) and + 8), B by an MN-major descriptor
// (st_wgmma_desc_mn), read transposed.
__device__ __forceinline__ void st_wgmma_m64n128k16_bf16_rs_tb(float (&d)[64], const uint32_t (&a)[4], uint64_t b,
                                                               int accumulate) {
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %69, 0;\n"
               " wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " ST_WG_REGS64
               ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
               : ST_WG_ACC64
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
}

// The same with f16 A and B (sparse_attn's fp8 V widened to f16).
__device__ __forceinline__ void st_wgmma_m64n128k16_f16_rs_tb(float (&d)[64], const uint32_t (&a)[4], uint64_t b,
                                                              int accumulate) {
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %69, 0;\n"
               " wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " ST_WG_REGS64
               ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
               : ST_WG_ACC64
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
}

#define ST_WG_ACC32 ST_WG_ACC8(0), ST_WG_ACC8(8), ST_WG_ACC8(16), ST_WG_ACC8(24)
#define ST_WG_REGS32                                                                                                   \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "  \
  "%24, %25, %26, %27, %28, %29, %30, %31}"

// d (+)= A[64 x 16] * B[16 x 64]^T, bf16, both K-major in shared memory
// (m64n64: d[4n + 0..3] as m64n128's for n = 0..7); accumulate = 0
// overwrites d. mla_sparse_decode's scores over a 64-token tile.
__device__ __forceinline__ void st_wgmma_m64n64k16_bf16(float (&d)[32], uint64_t a, uint64_t b, int accumulate) {
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"
               " wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " ST_WG_REGS32 ", %32, %33, p, 1, 1, 0, 0;\n}\n"
               : ST_WG_ACC32
               : "l"(a), "l"(b), "r"(accumulate));
}

// The accumulators of an m64n64 product, as st_wgmma_fence_regs does for
// m64n128's.
__device__ __forceinline__ void st_wgmma_fence_regs32(float (&d)[32]) {
#pragma unroll
  for (int i = 0; i < 32; i++) asm volatile("" : "+f"(d[i])::"memory");
}

#undef ST_WG_ACC8
#undef ST_WG_ACC32
#undef ST_WG_ACC64
#undef ST_WG_REGS32
#undef ST_WG_REGS64

#endif // ST_WGMMA_CUH
