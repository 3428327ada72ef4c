// mma.cuh - the warp-level tensor-core products (mma.sync) of the scoring
// and attention loops.
//
// Each computes D[16x8] += A[16xK] * B[Kx8] in fp32, A row-major, B
// column-major, per the PTX fragment layouts (g = lane/4, c = lane%4):
//   A regs: a0 = row g, a1 = row g+8, a2 = row g (upper k half), a3 = row g+8 (upper)
//   B regs: b0 = col g (lower k half), b1 = col g (upper k half)
//   C regs: c0,c1 = row g, cols 2c,2c+1; c2,c3 = row g+8, cols 2c,2c+1
// Because A and B take their k slots from the same c, a k permutation applied
// to both leaves the product unchanged: callers load 16 contiguous bytes per
// lane and hand registers over without shuffling.
#ifndef ST_MMA_CUH
#define ST_MMA_CUH

// bf16 x bf16, K = 16: each register holds 2 bf16.
__device__ __forceinline__ void st_mma_bf16_16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                                  uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// f16 x f16, K = 16: each register holds 2 f16 (the fp8 attention and
// decode-indexer math, whose e4m3 operands widen to f16 in one
// instruction).
__device__ __forceinline__ void st_mma_f16_16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                                 uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

#endif // ST_MMA_CUH
