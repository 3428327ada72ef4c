// select_probe.cu - cycles of st_cta_topk alone (one CTA, keys already in
// shared memory), per row length and column count; standalone, nvcc.
//   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -I templates select_probe.cu
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <vector>
#include "common/cta_topk.cuh"

template <int T>
__global__ void __launch_bounds__(T) k_select(const uint32_t *g_keys, int n, int ncols, int want, int *out,
                                                long long *cycles) {
  __shared__ uint32_t keys[8192];
  __shared__ st_cta_topk_smem<16> sm;
  for (int e = threadIdx.x; e < n * ncols; e += blockDim.x) keys[e] = g_keys[e];
  __syncthreads();
  long long t0 = clock64();
  for (int rep = 0; rep < 10; rep++)
    st_cta_topk<16>(keys, n, n, ncols, [&](int) { return want; }, sm,
                    [&](int c, int i, int slot) { out[c * 64 + slot] = i; });
  long long t1 = clock64();
  if (threadIdx.x == 0) *cycles = (t1 - t0) / 10;
}

int main() {
  uint32_t *keys;
  int *out;
  long long *cyc;
  cudaMalloc(&keys, 8192 * 4);
  cudaMalloc(&out, 16 * 64 * 4);
  cudaMalloc(&cyc, 8);
  std::vector<uint32_t> h(8192);
  srand(3);
  for (auto &k : h) { float f = 20.f + (rand() % 100000) / 10000.f; uint32_t u; memcpy(&u, &f, 4); k = u | 0x80000000u; }
  cudaMemcpy(keys, h.data(), 8192 * 4, cudaMemcpyHostToDevice);
  for (int threads : {128, 256})
    for (int n : {64, 128, 256, 1024, 4096})
      for (int ncols : {1, 2, 4, 8}) {
        if (n * ncols > 8192) continue;
        if (threads == 128) k_select<128><<<1, 128>>>(keys, n, ncols, 13, out, cyc);
        else k_select<256><<<1, 256>>>(keys, n, ncols, 13, out, cyc);
        long long c;
        cudaMemcpy(&c, cyc, 8, cudaMemcpyDeviceToHost);
        printf("threads %3d n %5d cols %2d: %7lld cycles per selection (%s)\n", threads, n, ncols, c,
               cudaGetErrorString(cudaGetLastError()));
      }
}
