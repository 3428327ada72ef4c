// e4m3_bf16_check.cu - an e4m3 -> bf16 widening without the conversion
// unit, checked against st_e4m3x2_to_bf16x2 (four conversions a pair) on
// every pair of e4m3 bytes, in both halves of the word: bit for bit, NaN
// for NaN. Exact on the H100 (twenty-fourth session: 0 of 262144), but
// not kept: as the K widening of the fp8 dense kernel it made that kernel
// slower, 102.30 -> 111.36 us (docs/kernels/sparse_attn.md, v2.38).
// On the device: nvcc -arch=sm_90a -std=c++17 -I templates \
//   docs/experiments/e4m3_bf16_check.cu -o /tmp/e4m3_check && /tmp/e4m3_check
#include <cstdint>
#include <cstdio>

#include "common/smem_tile.cuh"

// Four e4m3 values (low byte first) as two bf16x2: bytes 0, 1 in `lo`, 2, 3
// in `hi`. A byte's exponent and mantissa bits, moved to the low end of
// bf16's, read as bf16 are the value times 2^-120 (subnormals too: bf16
// has them there), and one bf16x2 multiply by 2^120 (exact) finishes the
// pair. NaN bytes (0x7f, 0xff) become all-ones halves first.
__device__ __forceinline__ void e4m3x4_to_bf16x2x2_bits(uint32_t four, uint32_t &lo, uint32_t &hi) {
  const uint32_t mag = four & 0x7f7f7f7fu, sign = four & 0x80808080u;
  const uint32_t nan = (mag + 0x01010101u) & 0x80808080u; // a byte's bit 7: it was 0x7f (no carry between bytes)
  // prmt: selector nibble n picks byte n of {0, x}; 8 | n fills the result
  // byte with byte n's bit 7.
  const auto half_pair = [&](uint32_t sel_mag, uint32_t sel_sign, uint32_t sel_nan) {
    uint32_t m, sg, nn, out;
    asm("prmt.b32 %0, %1, 0, %2;\n" : "=r"(m) : "r"(mag), "r"(sel_mag));
    asm("prmt.b32 %0, %1, 0, %2;\n" : "=r"(sg) : "r"(sign), "r"(sel_sign));
    asm("prmt.b32 %0, %1, 0, %2;\n" : "=r"(nn) : "r"(nan), "r"(sel_nan));
    const uint32_t bits = (m * 16u + sg) | nn; // exponent and mantissa at bits 10..4 of each half, the sign at 15
    asm("mul.rn.bf16x2 %0, %1, %2;\n" : "=r"(out) : "r"(bits), "r"(0x7b807b80u)); // 2^120 in each half
    return out;
  };
  lo = half_pair(0x4140u, 0x1404u, 0x9988u);
  hi = half_pair(0x4342u, 0x3424u, 0xbbaau);
}

__device__ bool st_bf16_nan(uint32_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0u; }

// Thread v: bytes v (low pair) and v ^ 0xa5c3 (high pair); a mismatch count
// and the first mismatching word.
__global__ void check(unsigned *bad, unsigned *first) {
  const uint32_t v = blockIdx.x * blockDim.x + threadIdx.x;
  if (v > 0xffffu) return;
  const uint32_t four = v | ((v ^ 0xa5c3u) << 16);
  uint32_t lo, hi;
  e4m3x4_to_bf16x2x2_bits(four, lo, hi);
  const uint32_t want[2] = {st_e4m3x2_to_bf16x2(four & 0xffffu), st_e4m3x2_to_bf16x2(four >> 16)};
  const uint32_t got[2] = {lo, hi};
  for (int i = 0; i < 2; i++)
    for (int h = 0; h < 2; h++) {
      const uint32_t a = (got[i] >> (16 * h)) & 0xffffu, b = (want[i] >> (16 * h)) & 0xffffu;
      if (a != b && !(st_bf16_nan(a) && st_bf16_nan(b))) {
        if (atomicAdd(bad, 1u) == 0u) *first = four;
      }
    }
}

int main() {
  unsigned *d, h[2] = {0, 0};
  cudaMalloc(&d, 2 * sizeof(unsigned));
  cudaMemset(d, 0, 2 * sizeof(unsigned));
  check<<<256, 256>>>(d, d + 1);
  const cudaError_t e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) {
    printf("CUDA error: %s\n", cudaGetErrorString(e));
    return 2;
  }
  printf("e4m3 -> bf16: %u mismatching values of 262144 (first word 0x%08x)\n", h[0], h[1]);
  return h[0] != 0u;
}
