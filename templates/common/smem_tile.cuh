// smem_tile.cuh - 128-token K/V tiles in shared memory: asynchronous copies
// in, swizzled rows, ldmatrix fragments out, and the conversions the
// attention kernels feed the tensor cores with.
//
// A tile row is one token's head_dim bf16 values, ROW_CHUNKS 16-byte chunks.
// Chunk c of row r is stored at chunk c ^ (r % 8): the 8 rows one ldmatrix
// reads at the same logical chunk then sit in 8 different 16-byte bank
// groups (no bank conflict), for rows of any multiple of 8 chunks.
#ifndef ST_SMEM_TILE_CUH
#define ST_SMEM_TILE_CUH

__device__ __forceinline__ uint32_t st_smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

// Byte offset of logical chunk `chunk` of row `row` in a swizzled tile.
template <int ROW_CHUNKS> __device__ __forceinline__ int st_swizzle_offset(int row, int chunk) {
  static_assert(ROW_CHUNKS % 8 == 0, "the swizzle permutes chunks within groups of 8");
  return row * ROW_CHUNKS * 16 + ((chunk ^ (row & 7)) << 4);
}

// The same as a shared-memory address, for ldmatrix and cp.async.
template <int ROW_CHUNKS> __device__ __forceinline__ uint32_t st_swizzled(uint32_t tile, int row, int chunk) {
  return tile + (uint32_t)st_swizzle_offset<ROW_CHUNKS>(row, chunk);
}

// Byte offset of chunk c of row r in a tile of `rows` rows stored as
// panels of 8 chunks (128 bytes) a row, panel p at p * rows * 128: the
// 128-byte-swizzled operand layout of wgmma (common/wgmma.cuh). For rows
// of 8 chunks it is st_swizzle_offset<8>.
__device__ __forceinline__ uint32_t st_panel_offset(int rows, int r, int c) {
  return (uint32_t)((c >> 3) * rows * 128 + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

// 16 bytes global -> shared, bypassing L1; src_bytes < 16 zero-fills the
// rest (0: nothing is read, the destination becomes zeros).
__device__ __forceinline__ void st_cp_async16(uint32_t dst, const void *src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

__device__ __forceinline__ void st_cp_async4(uint32_t dst, const void *src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

__device__ __forceinline__ void st_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until at most N of this thread's committed groups are in flight.
template <int N> __device__ __forceinline__ void st_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Four 8x8 b16 matrices; lane l gives the row address of matrix l / 8.
__device__ __forceinline__ void st_ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// The same, each matrix transposed (lane i gets rows 2(i%4), 2(i%4)+1 of
// column i/4): B fragments from a row-major [k][n] tile.
__device__ __forceinline__ void st_ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// Stores four 8x8 b16 matrices from their mma fragments (r[j]: matrix j's
// two values of row lane / 4, columns 2 (lane % 4) ..), lane i giving the
// address of row i % 8 of matrix i / 8: the inverse of st_ldmatrix_x4.
__device__ __forceinline__ void st_stmatrix_x4(uint32_t addr, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(addr), "r"(r[0]), "r"(r[1]),
               "r"(r[2]), "r"(r[3])
               : "memory");
}

// Plain 16-, 8- and 4-byte shared-memory loads by address (volatile, like the
// ldmatrix loads: they must stay between the barriers around them).
__device__ __forceinline__ uint4 st_lds_v4(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}

__device__ __forceinline__ uint32_t st_lds_u32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}

__device__ __forceinline__ uint2 st_lds_v2(uint32_t addr) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(addr));
  return v;
}

// Two floats as bf16x2, `lo` in the low half (round to nearest even).
__device__ __forceinline__ uint32_t st_pack_bf16(float lo, float hi) {
  uint32_t d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}

// Two e4m3 values (low byte first) as floats: e4m3 -> f16 is exact, and so
// is f16 -> f32.
__device__ __forceinline__ void st_e4m3x2_to_f32x2(uint32_t two, float &lo, float &hi) {
  uint32_t h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h2) : "h"((unsigned short)two));
  asm("{\n .reg .f16 l, h;\n mov.b32 {l, h}, %2;\n cvt.f32.f16 %0, l;\n cvt.f32.f16 %1, h;\n}\n"
      : "=f"(lo), "=f"(hi)
      : "r"(h2));
}

// Two floats as f16x2, `lo` in the low half (round to nearest even).
__device__ __forceinline__ uint32_t st_pack_f16(float lo, float hi) {
  uint32_t d;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}

// Two e4m3 values (low byte first) as f16x2: one instruction, exact (e4m3's
// range and 3 mantissa bits fit f16's). The fp8 math uses f16 operands
// wherever no scale has to be applied first, for this.
__device__ __forceinline__ uint32_t st_e4m3x2_to_f16x2(uint32_t two) {
  uint32_t h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h2) : "h"((unsigned short)two));
  return h2;
}

// Four e4m3 values (low byte first) as two f16x2: bytes 0, 1 in `lo`, 2, 3
// in `hi`. The halves are handed to the conversions as 16-bit registers,
// which lets ptxas read the upper one in place instead of shifting it down.
__device__ __forceinline__ void st_e4m3x4_to_f16x2x2(uint32_t four, uint32_t &lo, uint32_t &hi) {
  asm("{\n .reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.rn.f16x2.e4m3x2 %0, l;\n cvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
      : "=r"(lo), "=r"(hi)
      : "r"(four));
}

// Two e4m3 values as bf16x2, exactly (3 mantissa bits fit bf16's 7).
__device__ __forceinline__ uint32_t st_e4m3x2_to_bf16x2(uint32_t two) {
  float lo, hi;
  st_e4m3x2_to_f32x2(two, lo, hi);
  return st_pack_bf16(lo, hi);
}

// The same times `scale` (rounded once, to bf16).
__device__ __forceinline__ uint32_t st_e4m3x2_to_bf16x2(uint32_t two, float scale) {
  float lo, hi;
  st_e4m3x2_to_f32x2(two, lo, hi);
  return st_pack_bf16(lo * scale, hi * scale);
}

// A 16-byte chunk of 16 e4m3 values (lowest byte first) as 8 pairs, in
// order: TO_F16, f16 (exact); else bf16 (exact), times `scale` if SCALED
// (rounded once). The widening of fp8 K/V rows into 16-bit tiles.
template <bool TO_F16, bool SCALED>
__device__ __forceinline__ void st_e4m3x16_widen(uint4 raw, float scale, uint32_t (&b)[8]) {
  static_assert(!(TO_F16 && SCALED), "a scaled value could leave f16's range");
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const uint32_t lo = w[i] & 0xffffu, hi = w[i] >> 16;
    b[2 * i] = TO_F16 ? st_e4m3x2_to_f16x2(lo) : SCALED ? st_e4m3x2_to_bf16x2(lo, scale) : st_e4m3x2_to_bf16x2(lo);
    b[2 * i + 1] = TO_F16 ? st_e4m3x2_to_f16x2(hi) : SCALED ? st_e4m3x2_to_bf16x2(hi, scale) : st_e4m3x2_to_bf16x2(hi);
  }
}

#endif // ST_SMEM_TILE_CUH
