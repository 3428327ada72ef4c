// cvt_rate_probe.cu - warp instructions per cycle per SM of the ways to widen
// e4m3 to f16 on this GPU (standalone, nvcc; not part of the product):
// cvt.rn.f16x2.e4m3x2 (SASS F2FP.F16.E4M3.UNPACK_B), and the bit moves
// that give the same f16 bits times 2^-8 (sign kept, exponent and mantissa
// shifted right one: (x & 0x80008000) | ((x & 0x7f007f00) >> 1) and the
// same of x << 8), as shifts and logic ops or as integer multiply-adds.
//   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o cvt_rate_probe cvt_rate_probe.cu
// Prints, per way, ns per launch and 4-byte words widened per cycle per SM
// (clock from the device attribute; boost clocks make it approximate).
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>

constexpr int kIters = 4096, kChains = 8, kThreads = 256;

__device__ __forceinline__ void cvt_hw(uint32_t w, uint32_t &lo, uint32_t &hi) {
  asm("{ .reg .b16 a, b;\n mov.b32 {a, b}, %2;\n cvt.rn.f16x2.e4m3x2 %0, a;\n cvt.rn.f16x2.e4m3x2 %1, b;\n}\n"
      : "=r"(lo), "=r"(hi) : "r"(w));
}

// Bytes 3 and 1 of x as f16 bits (times 2^-8), then bytes 2 and 0.
__device__ __forceinline__ void cvt_bits(uint32_t x, uint32_t &lo, uint32_t &hi) {
  lo = (x & 0x80008000u) | ((x & 0x7f007f00u) >> 1);
  const uint32_t y = x << 8;
  hi = (y & 0x80008000u) | ((y & 0x7f007f00u) >> 1);
}

// The same on the multiply-add pipe where it can: shifts as multiplies,
// the merge of disjoint bits as an add.
__device__ __forceinline__ void cvt_imad(uint32_t x, uint32_t &lo, uint32_t &hi) {
  uint32_t m, y;
  asm("mul.lo.u32 %0, %1, 256;" : "=r"(y) : "r"(x));
  lo = (x & 0x80008000u) + ((x & 0x7f007f00u) >> 1);
  asm("mad.lo.u32 %0, %1, 1, %2;" : "=r"(m) : "r"(y & 0x7f007f00u), "r"(0u));
  hi = (y & 0x80008000u) + (m >> 1);
}

template <int WAY> __global__ void probe(uint32_t *out, uint32_t seed) {
  uint32_t v[kChains];
#pragma unroll
  for (int c = 0; c < kChains; c++) v[c] = seed * (threadIdx.x + 1) + c * 0x01010101u;
  for (int i = 0; i < kIters; i++) {
#pragma unroll
    for (int c = 0; c < kChains; c++) {
      uint32_t lo, hi;
      if (WAY == 0) cvt_hw(v[c], lo, hi);
      else if (WAY == 1) cvt_bits(v[c], lo, hi);
      else cvt_imad(v[c], lo, hi);
      v[c] = lo ^ hi; // the next word depends on both halves
    }
  }
  uint32_t x = 0;
#pragma unroll
  for (int c = 0; c < kChains; c++) x ^= v[c];
  if (x == 0x12345678u) out[threadIdx.x] = x;
}

template <int WAY> void run(const char *name, int sms, int clock_khz) {
  uint32_t *out;
  cudaMalloc(&out, 4096);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  const int blocks = sms * 8; // 64 warps an SM
  probe<WAY><<<blocks, kThreads>>>(out, 3u);
  cudaEventRecord(a);
  for (int r = 0; r < 10; r++) probe<WAY><<<blocks, kThreads>>>(out, 3u);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0.f;
  cudaEventElapsedTime(&ms, a, b);
  const double ns = ms * 1e6 / 10;
  const double words = (double)blocks * kThreads * kIters * kChains;
  const double cycles = ns * clock_khz * 1e-6;
  printf("cvt %-5s %10.0f ns  %6.1f words per cycle per SM (%s)\n", name, ns, words / cycles / sms,
         cudaGetErrorString(cudaGetLastError()));
  cudaFree(out);
}

int main() {
  int sms = 0, clock_khz = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  printf("%d SMs, clock %d MHz\n", sms, clock_khz / 1000);
  run<0>("hw", sms, clock_khz);
  run<1>("bits", sms, clock_khz);
  run<2>("imad", sms, clock_khz);
  return 0;
}
