// wgmma_rate_probe.cu - the H100's rate for the wgmma shapes the prefill
// kernels use, with nothing else in the loop (standalone, nvcc; not part
// of the product). docs/kernels/index_score.md (v3) found index_score's
// loop at ~57% tensor activity with neither its copies nor its epilogue
// in the way; this probe says what the instruction shape itself allows.
//
// Every CTA (one an SM, 1-3 warpgroups) runs `blocks` steps from shared
// memory only (operands are whatever the shared memory holds; the tensor
// cores' timing does not depend on values). A step is one 128-dim block:
// 8 k-steps of m64nNk16 bf16 into one accumulator set, then
//   gemm:  commit, keep one group in flight (a GEMM main loop: the next
//          step accumulates into the same registers)
//   score: commit, wait for it, take the max of the 64 x N products per
//          row (index_score's epilogue without its stores)
// with A (64 q rows per warpgroup) from shared memory (SS) or registers
// (RS), B (N key rows) from shared memory, N = 128 or 256.
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I templates -o build/wgmma_rate_probe \
//        docs/experiments/wgmma_rate_probe.cu
// Run: build/wgmma_rate_probe (a few seconds).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "common/wgmma.cuh"
#include "graph_time.cuh" // CK, best_of_5_ms


namespace {

enum Mode { GEMM, SCORE };

#define A8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define A64(o) A8(o), A8(o + 8), A8(o + 16), A8(o + 24), A8(o + 32), A8(o + 40), A8(o + 48), A8(o + 56)
#define REGS128                                                                                                        \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,"  \
  "%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,"  \
  "%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,"  \
  "%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,"   \
  "%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}"
#define REGS64                                                                                                         \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,"  \
  "%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,"  \
  "%58,%59,%60,%61,%62,%63}"

__device__ __forceinline__ void ss256(float (&d)[128], uint64_t a, uint64_t b, int acc) {
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %130, 0;\n"
               " wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " REGS128 ", %128, %129, p, 1, 1, 0, 0;\n}\n"
               : A64(0), A64(64)
               : "l"(a), "l"(b), "r"(acc));
}

// A from registers, B K-major (imm-trans-b 0).
__device__ __forceinline__ void rs128(float (&d)[64], const uint32_t (&a)[4], uint64_t b, int acc) {
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %69, 0;\n"
               " wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " REGS64
               ", {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
               : A64(0)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(acc));
}

template <int N> struct Acc {
  float d[N / 2];
};

template <int N> __device__ __forceinline__ void fence_regs(Acc<N> &x) {
#pragma unroll
  for (int i = 0; i < N / 2; i++) asm volatile("" : "+f"(x.d[i])::"memory");
}

// One step's 8 k-steps into x (first overwrites unless accumulating).
template <int N, bool RS>
__device__ __forceinline__ void step(Acc<N> &x, uint32_t s_a, uint32_t s_b, const uint32_t (&af)[8][4], bool accumulate) {
  fence_regs(x);
  st_wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 8; ks++) {
    const uint64_t b = st_wgmma_desc(s_b + (ks >> 2) * N * 128 + (ks & 3) * 32);
    const int acc = accumulate || ks > 0;
    if constexpr (N == 256) {
      ss256(x.d, st_wgmma_desc(s_a + (ks >> 2) * 64 * 128 + (ks & 3) * 32), b, acc);
    } else if constexpr (RS) {
      rs128(x.d, af[ks], b, acc);
    } else {
      st_wgmma_m64n128k16_bf16(x.d, st_wgmma_desc(s_a + (ks >> 2) * 64 * 128 + (ks & 3) * 32), b, acc);
    }
  }
  st_wgmma_commit();
}

template <int N> __device__ __forceinline__ float row_max(Acc<N> &x) {
  fence_regs(x);
  float lo = x.d[0], hi = x.d[2];
#pragma unroll
  for (int i = 0; i < N / 2; i += 4) {
    lo = fmaxf(lo, fmaxf(x.d[i], x.d[i + 1]));
    hi = fmaxf(hi, fmaxf(x.d[i + 2], x.d[i + 3]));
  }
  lo = fmaxf(lo, __shfl_xor_sync(0xffffffffu, lo, 1));
  lo = fmaxf(lo, __shfl_xor_sync(0xffffffffu, lo, 2));
  hi = fmaxf(hi, __shfl_xor_sync(0xffffffffu, hi, 1));
  hi = fmaxf(hi, __shfl_xor_sync(0xffffffffu, hi, 2));
  return lo + hi;
}

template <int WGS, int N, bool RS, Mode MODE>
__global__ void __launch_bounds__(WGS * 128, 1) rate(int blocks, float *sink) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const uint32_t base = ((uint32_t)__cvta_generic_to_shared(smem) + 1023u) & ~1023u;
  const int wg = threadIdx.x / 128;
  const uint32_t s_a = base + wg * 64 * 256, s_b = base + WGS * 64 * 256;
  // Bits that are neither zero nor NaN-heavy: bf16 pairs of ~[0.5, 1).
  for (uint32_t i = threadIdx.x; i < (WGS * 64 * 256 + N * 256) / 4; i += blockDim.x)
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(base + 4 * i), "r"(0x3f003f00u + (i * 2654435761u & 0x007f007fu)));
  st_fence_proxy_async();
  __syncthreads();
  uint32_t af[8][4];
#pragma unroll
  for (int k = 0; k < 8; k++)
#pragma unroll
    for (int j = 0; j < 4; j++) af[k][j] = 0x3f003f00u + ((threadIdx.x * 8 + k * 4 + j) & 0x7f);
  float keep = 0.f;
  Acc<N> x0;
  if constexpr (MODE == GEMM) {
    for (int b = 0; b < blocks; b++) {
      step<N, RS>(x0, s_a, s_b, af, b > 0);
      st_wgmma_wait<1>();
    }
    st_wgmma_wait<0>();
    keep = row_max(x0);
  } else {
    for (int b = 0; b < blocks; b++) {
      step<N, RS>(x0, s_a, s_b, af, false);
      st_wgmma_wait<0>();
      keep += row_max(x0);
    }
  }
  if (keep == 12345.f) sink[threadIdx.x] = keep; // never true; keeps the work
}

template <int WGS, int N, bool RS, Mode MODE> void run(const char *name, int sms, float *sink) {
  const int blocks = 4000;
  const size_t smem = (size_t)WGS * 64 * 256 + (size_t)N * 256 + 1024;
  auto k = rate<WGS, N, RS, MODE>;
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  const float best = best_of_5_ms([&] { k<<<sms, WGS * 128, smem>>>(blocks, sink); });
  const double flop = 2.0 * 64 * N * 128 * (double)blocks * WGS * sms;
  printf("%-8s N=%d %s warpgroups=%d: %7.1f TFLOP/s (%.3f ms)\n", name, N, RS ? "RS" : "SS", WGS,
         flop / (best * 1e-3) / 1e12, best);
}

} // namespace

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  float *sink;
  CK(cudaMalloc(&sink, 1024 * sizeof(float)));
  run<1, 128, false, GEMM>("gemm", sms, sink);
  run<2, 128, false, GEMM>("gemm", sms, sink);
  run<3, 128, false, GEMM>("gemm", sms, sink);
  run<2, 128, true, GEMM>("gemm", sms, sink);
  run<2, 256, false, GEMM>("gemm", sms, sink);
  run<2, 128, false, SCORE>("score", sms, sink);
  run<3, 128, false, SCORE>("score", sms, sink);
  run<2, 128, true, SCORE>("score", sms, sink);
  run<2, 256, false, SCORE>("score", sms, sink);
  CK(cudaFree(sink));
  return 0;
}
