// score_copy_probe.cu - index_score's loop with its copies, piece by piece
// (standalone, nvcc; not part of the product). wgmma_rate_probe.cu showed
// the loop's products and per-block maxima alone run at ~91% of the
// tensor peak (two warpgroups, m64n128k16 from shared memory), where the
// kernel reaches ~57-60%. This probe adds back what the kernel has around
// them: a ninth warp copying each 128-row K page (32 KiB, from a 16 MiB
// pool that stays in L2) into a ring of stages, announced on mbarriers,
// and asks which copy mechanism keeps up:
//   none:    no copies (every block reads stage 0), the handshake kept
//   cp.async: the kernel's copies (16 bytes a lane, 64 a lane a page, the
//            128-byte swizzle by address), wait_group, proxy fence, arrive
//   tma:     one lane issues two tensor-map copies a page (one per 64-dim
//            panel, SWIZZLE_128B writes wgmma's layout), counted in bytes
//            on the stage's barrier
// Each CTA (one an SM): 256 q rows (two warpgroups x two 64-row slices)
// against `blocks` pages. It first checks that the TMA and cp.async copies
// of a page leave the same bytes in shared memory.
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I templates -o build/score_copy_probe \
//        docs/experiments/score_copy_probe.cu -lcuda
// Run: build/score_copy_probe (a few seconds).
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/mbarrier.cuh"
#include "common/smem_tile.cuh"
#include "common/wgmma.cuh"
#include "graph_time.cuh" // CK, best_of_5_ms


namespace {

enum Copy { NONE, CPASYNC, TMA };
constexpr int PAGES = 512, PAGE_BYTES = 128 * 256, Q_BYTES = 256 * 256, THREADS = 288;

__device__ __forceinline__ void tma_panel(uint32_t dst, const CUtensorMap *map, int col, int page, uint32_t bar) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
               "[%5];\n" ::"r"(dst),
               "l"(map), "r"(col), "r"(0), "r"(page), "r"(bar)
               : "memory");
}

// The kernel's copy of one page by the 32 lanes (score_tile.cuh's
// st_load_k_block for bf16, head_dim 128: 16 chunks a row, 2 rows a copy).
__device__ __forceinline__ void cpasync_page(uint32_t stage, const uint8_t *page) {
  const int lane = threadIdx.x & 31, c = lane % 16, r0 = lane / 16;
  const uint8_t *src = page + r0 * 256 + c * 16;
  uint32_t dst[4];
#pragma unroll
  for (int m = 0; m < 4; m++) dst[m] = stage + (uint32_t)((c >> 3) * 128 * 128 + r0 * 128 + (((c & 7) ^ r0 ^ ((2 * m) & 7)) << 4));
#pragma unroll
  for (int i = 0; i < 64; i++) {
    st_cp_async16(dst[i % 4] + (uint32_t)(i * 2 * 128), src, 16);
    src += 2 * 256;
  }
}

__device__ __forceinline__ void fence_acc(float (&d)[64]) {
#pragma unroll
  for (int i = 0; i < 64; i++) asm volatile("" : "+f"(d[i])::"memory");
}

__device__ __forceinline__ float row_max(float (&d)[64]) {
  fence_acc(d);
  float lo = d[0], hi = d[2];
#pragma unroll
  for (int i = 0; i < 64; i += 4) {
    lo = fmaxf(lo, fmaxf(d[i], d[i + 1]));
    hi = fmaxf(hi, fmaxf(d[i + 2], d[i + 3]));
  }
  lo = fmaxf(lo, __shfl_xor_sync(0xffffffffu, lo, 1));
  hi = fmaxf(hi, __shfl_xor_sync(0xffffffffu, hi, 2));
  return lo + hi;
}

__device__ __forceinline__ int page_of(int i) { return (int)((blockIdx.x * 7919u + i * 131u) % PAGES); }

template <Copy COPY, int STAGES>
__global__ void __launch_bounds__(THREADS, 1) loop(const __grid_constant__ CUtensorMap map, const uint8_t *pool,
                                                   int blocks, float *sink) {
  extern __shared__ __align__(1024) uint8_t smem[];
  __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
  const uint32_t s_q = ((uint32_t)__cvta_generic_to_shared(smem) + 1023u) & ~1023u, s_k = s_q + Q_BYTES;
  for (uint32_t i = threadIdx.x; i < Q_BYTES / 4; i += THREADS)
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(s_q + 4 * i), "r"(0x3f003f00u + (i * 2654435761u & 0x007f007fu)));
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; s++) {
      st_mbar_init(__cvta_generic_to_shared(&full[s]), COPY == TMA ? 1 : 32);
      st_mbar_init(__cvta_generic_to_shared(&empty[s]), 256);
    }
    st_mbar_init_fence();
  }
  if (COPY == NONE) // stage 0 holds a page for good
    for (uint32_t i = threadIdx.x; i < PAGE_BYTES / 4; i += THREADS)
      asm volatile("st.shared.u32 [%0], %1;" ::"r"(s_k + 4 * i), "r"(0x3f003f00u + (i * 40503u & 0x007f007fu)));
  st_fence_proxy_async();
  __syncthreads();

  if (threadIdx.x >= 256) { // the copying warp
    const int lane = threadIdx.x & 31;
    for (int i = 0; i < blocks; i++) {
      const int s = i % STAGES;
      const uint32_t bar = __cvta_generic_to_shared(&full[s]);
      if (i >= STAGES) st_mbar_wait(__cvta_generic_to_shared(&empty[s]), (i / STAGES - 1) & 1);
      if (COPY == NONE) {
        st_mbar_arrive(bar);
      } else if (COPY == TMA) {
        if (lane == 0) {
          st_mbar_arrive_expect_tx(bar, PAGE_BYTES);
          const uint32_t stage = s_k + s * PAGE_BYTES;
          tma_panel(stage, &map, 0, page_of(i), bar);
          tma_panel(stage + 128 * 128, &map, 64, page_of(i), bar);
        }
      } else {
        cpasync_page(s_k + s * PAGE_BYTES, pool + (size_t)page_of(i) * PAGE_BYTES);
        st_cp_async_commit();
        if (i >= STAGES - 1) {
          st_cp_async_wait<STAGES - 1>();
          st_fence_proxy_async();
          st_mbar_arrive(__cvta_generic_to_shared(&full[(i - (STAGES - 1)) % STAGES]));
        }
      }
    }
    if (COPY == CPASYNC) {
      st_cp_async_wait<0>();
      st_fence_proxy_async();
      for (int i = blocks > STAGES - 1 ? blocks - (STAGES - 1) : 0; i < blocks; i++)
        st_mbar_arrive(__cvta_generic_to_shared(&full[i % STAGES]));
    }
    return;
  }

  const int wg = threadIdx.x / 128;
  float a0[64], a1[64], keep = 0.f;
  for (int i = 0; i < blocks; i++) {
    const int s = i % STAGES;
    st_mbar_wait(__cvta_generic_to_shared(&full[s]), (i / STAGES) & 1);
    const uint32_t b_stage = s_k + (COPY == NONE ? 0 : s * PAGE_BYTES);
    fence_acc(a0);
    fence_acc(a1);
    st_wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 8; ks++) {
      const uint64_t b = st_wgmma_desc(b_stage + (ks >> 2) * 128 * 128 + (ks & 3) * 32);
      st_wgmma_m64n128k16_bf16(a0, st_wgmma_desc(s_q + (ks >> 2) * 256 * 128 + (wg * 2) * 64 * 128 + (ks & 3) * 32), b,
                               ks > 0);
      st_wgmma_m64n128k16_bf16(
          a1, st_wgmma_desc(s_q + (ks >> 2) * 256 * 128 + (wg * 2 + 1) * 64 * 128 + (ks & 3) * 32), b, ks > 0);
    }
    st_wgmma_commit();
    st_wgmma_wait<0>();
    fence_acc(a0);
    fence_acc(a1);
    st_mbar_arrive(__cvta_generic_to_shared(&empty[s]));
    keep += row_max(a0) + row_max(a1);
  }
  if (keep == 12345.f) sink[threadIdx.x] = keep; // never true; keeps the work
}

// One CTA: page 3 by TMA into buffer 0 and by cp.async into buffer 1.
__global__ void same_bytes(const __grid_constant__ CUtensorMap map, const uint8_t *pool, uint8_t *out) {
  extern __shared__ __align__(1024) uint8_t smem[];
  __shared__ __align__(8) uint64_t bar;
  const uint32_t b0 = ((uint32_t)__cvta_generic_to_shared(smem) + 1023u) & ~1023u, b1 = b0 + PAGE_BYTES;
  const uint32_t mb = __cvta_generic_to_shared(&bar);
  if (threadIdx.x == 0) {
    st_mbar_init(mb, 1);
    st_mbar_init_fence();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    st_mbar_arrive_expect_tx(mb, PAGE_BYTES);
    tma_panel(b0, &map, 0, 3, mb);
    tma_panel(b0 + 128 * 128, &map, 64, 3, mb);
  }
  if (threadIdx.x < 32) {
    cpasync_page(b1, pool + 3 * (size_t)PAGE_BYTES);
    st_cp_async_commit();
    st_cp_async_wait<0>();
  }
  st_mbar_wait(mb, 0);
  __syncthreads();
  const uint8_t *base = smem + (b0 - (uint32_t)__cvta_generic_to_shared(smem));
  for (int i = threadIdx.x; i < 2 * PAGE_BYTES; i += blockDim.x) out[i] = base[i];
}

CUtensorMap make_map(void *pool) {
  CUtensorMap map;
  const cuuint64_t dims[3] = {128, 128, PAGES};      // head dim, token, page
  const cuuint64_t strides[2] = {256, PAGE_BYTES};   // bytes, dims 1 and 2
  const cuuint32_t box[3] = {64, 128, 1}, elem[3] = {1, 1, 1};
  CUresult r = cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, pool, dims, strides, box, elem,
                                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "cuTensorMapEncodeTiled: %d\n", (int)r);
    exit(1);
  }
  return map;
}

template <Copy COPY, int STAGES>
void run(const char *name, const CUtensorMap &map, const uint8_t *pool, int sms, float *sink) {
  const int blocks = 2000;
  const size_t smem = Q_BYTES + (size_t)STAGES * PAGE_BYTES + 1024;
  auto k = loop<COPY, STAGES>;
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  const float best = best_of_5_ms([&] { k<<<sms, THREADS, smem>>>(map, pool, blocks, sink); });
  const double flop = 2.0 * 256 * 128 * 128 * (double)blocks * sms;
  printf("%-8s stages=%d: %7.1f TFLOP/s (%.3f ms; %.2f us a block an SM)\n", name, STAGES,
         flop / (best * 1e-3) / 1e12, best, best * 1e3 / blocks);
}

} // namespace

int main() {
  CK(cudaSetDevice(0));
  CK(cudaFree(0)); // the runtime's context, current for the driver API too
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::vector<uint16_t> h((size_t)PAGES * PAGE_BYTES / 2);
  uint32_t x = 12345;
  for (auto &v : h) {
    x = x * 1664525u + 1013904223u;
    v = (uint16_t)(0x3f00 + ((x >> 16) & 0x7f)); // bf16 in [0.5, 1)
  }
  uint8_t *pool, *out;
  float *sink;
  CK(cudaMalloc(&pool, (size_t)PAGES * PAGE_BYTES));
  CK(cudaMalloc(&out, 2 * PAGE_BYTES));
  CK(cudaMalloc(&sink, 1024 * sizeof(float)));
  CK(cudaMemcpy(pool, h.data(), (size_t)PAGES * PAGE_BYTES, cudaMemcpyHostToDevice));
  const CUtensorMap map = make_map(pool);

  CK(cudaFuncSetAttribute(same_bytes, cudaFuncAttributeMaxDynamicSharedMemorySize, 2 * PAGE_BYTES + 1024));
  same_bytes<<<1, 128, 2 * PAGE_BYTES + 1024>>>(map, pool, out);
  std::vector<uint8_t> got(2 * PAGE_BYTES);
  CK(cudaMemcpy(got.data(), out, got.size(), cudaMemcpyDeviceToHost));
  int diff = 0;
  for (int i = 0; i < PAGE_BYTES; i++) diff += got[i] != got[PAGE_BYTES + i];
  printf("TMA page against cp.async page: %d bytes differ of %d\n", diff, PAGE_BYTES);

  run<NONE, 2>("none", map, pool, sms, sink);
  run<CPASYNC, 2>("cp.async", map, pool, sms, sink);
  run<CPASYNC, 3>("cp.async", map, pool, sms, sink);
  run<CPASYNC, 4>("cp.async", map, pool, sms, sink);
  run<TMA, 2>("tma", map, pool, sms, sink);
  run<TMA, 3>("tma", map, pool, sms, sink);
  run<TMA, 4>("tma", map, pool, sms, sink);
  CK(cudaFree(pool));
  CK(cudaFree(out));
  CK(cudaFree(sink));
  return 0;
}
