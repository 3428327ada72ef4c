// persistent_ring_probe.cu - how fast would a persistent, warp-specialized
// sparse_attn_decode stream the fp8 anchors' K/V blocks? (standalone, nvcc;
// not part of the product.) The twenty-seventh session counted such a kernel
// at ~14 us for fp8 B = 32 (docs/kernels/sparse_attn_decode.md, v2.43),
// assuming it streams as fast as the kernels' own cp.async gather does
// (row_width_probe.cu: 11.65 us a replay at B = 32, 48.5-49.3 at B = 128).
// This probe measures that term instead of assuming it.
//
// Layout and data as row_width_probe.cu: fp8, pages2 (pages, 2, 128, Hkv,
// D), Hkv 2, D 128, topk 16, distinct random pages per (request, head)
// from a pool of 32768 pages. Work: the (item, block) units of B requests x
// 2 heads x 16 blocks, cut into equal contiguous runs, one run a CTA, 1-3
// CTAs an SM. A CTA has one producer warp (one lane issues two tensor-map
// copies a block, K and V: 128 tokens x 128 bytes at a 256-byte stride,
// 128-byte swizzle, counted in bytes on the stage's "full" mbarrier) and
// CONSUMERS warps that wait for the stage, read a word a lane of K and V,
// run MATH dependent FMAs (a stand-in for the block's products), and
// release the stage on its "empty" mbarrier; the tensor map's L2 promotion
// 128 bytes (a row piece), none, or 256 bytes (which also fetches the
// other head's half of each row). Prints microseconds per replay (CUDA
// graph, median of 5 x 40) and GB/s of K and V bytes.
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I templates -I docs/experiments \
//        -o build/persistent_ring_probe docs/experiments/persistent_ring_probe.cu -lcuda
// Run: build/persistent_ring_probe (a few seconds).
#include <cuda.h>

#include "graph_time.cuh"

#include <cstdint>

#include "common/mbarrier.cuh"
#include "common/smem_tile.cuh"
#include "probe_pages.cuh"

namespace {

constexpr int D = 128, HKV = 2, TOPK = 16, PAGES = 32768, BLOCK_TOKENS = 128;
constexpr int TILE = BLOCK_TOKENS * D;            // fp8 K (or V) of one head's block: 16 KiB
constexpr int64_t PAGE_BYTES = 2LL * BLOCK_TOKENS * HKV * D;
constexpr int MAX_STAGES = 8;

struct Args {
  const int *pages; // [items][TOPK]
  int units;        // items * TOPK
  float *out;
};

template <int STAGES, int CONSUMERS, int MATH>
__global__ void __launch_bounds__(32 * (1 + CONSUMERS)) k_ring(const __grid_constant__ CUtensorMap map, Args a) {
  extern __shared__ __align__(1024) char smem_raw[];
  __shared__ __align__(8) uint64_t full[MAX_STAGES], empty[MAX_STAGES];
  char *smem = (char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023); // the 128-byte swizzle's alignment
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; s++) {
      st_mbar_init(st_smem_addr(&full[s]), 1);
      st_mbar_init(st_smem_addr(&empty[s]), CONSUMERS);
    }
    st_mbar_init_fence();
  }
  __syncthreads();
  const int u0 = (int)((int64_t)blockIdx.x * a.units / gridDim.x);
  const int u1 = (int)((int64_t)(blockIdx.x + 1) * a.units / gridDim.x);
  if (warp == 0) {
    if (lane == 0)
      for (int u = u0; u < u1; u++) {
        const int i = u - u0, s = i % STAGES;
        if (i >= STAGES) st_mbar_wait(st_smem_addr(&empty[s]), ((i / STAGES) - 1) & 1);
        const uint32_t bar = st_smem_addr(&full[s]);
        st_mbar_arrive_expect_tx(bar, 2 * TILE);
        const int item = u / TOPK, page = __ldg(a.pages + u), g = item % HKV;
        const uint32_t dst = st_smem_addr(smem + s * 2 * TILE);
        st_tma_load_3d(dst, &map, g * D, 0, page, bar);                      // K
        st_tma_load_3d(dst + TILE, &map, g * D, BLOCK_TOKENS, page, bar);    // V
      }
    return;
  }
  float acc = 0.f, x = (float)lane;
  for (int u = u0; u < u1; u++) {
    const int i = u - u0, s = i % STAGES;
    st_mbar_wait(st_smem_addr(&full[s]), (i / STAGES) & 1);
    const char *stage = smem + s * 2 * TILE;
    const int at = ((warp - 1) * 32 + lane) * 4;
    acc += __uint_as_float(*(const uint32_t *)(stage + at) & 0x3f7fffffu);
    acc += __uint_as_float(*(const uint32_t *)(stage + TILE + at) & 0x3f7fffffu);
#pragma unroll 8
    for (int k = 0; k < MATH; k++) x = fmaf(x, 0.999f, acc);
    __syncwarp();
    if (lane == 0) st_mbar_arrive(st_smem_addr(&empty[s]));
  }
  if (acc + x == 1234.5f) a.out[blockIdx.x] = acc; // never true; keeps the reads and the FMAs
}

CUtensorMap make_map(void *pool, CUtensorMapL2promotion promotion) {
  CUtensorMap map;
  const cuuint64_t dims[3] = {HKV * D, 2 * BLOCK_TOKENS, PAGES}; // bytes of a token row, K and V rows, pages
  const cuuint64_t strides[2] = {HKV * D, PAGE_BYTES};           // bytes, dims 1 and 2
  const cuuint32_t box[3] = {D, BLOCK_TOKENS, 1}, elem[3] = {1, 1, 1};
  CUresult r = cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, pool, dims, strides, box, elem,
                                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                      promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "cuTensorMapEncodeTiled: %d\n", (int)r);
    exit(1);
  }
  return map;
}

template <int STAGES, int CONSUMERS, int MATH>
void run(int batch, const CUtensorMap &map, const char *promotion, const int *pages, int ctas_per_sm, int sms,
         float *out, cudaStream_t st) {
  constexpr int SMEM = STAGES * 2 * TILE + 1024;
  static_assert(STAGES <= MAX_STAGES, "barrier arrays");
  auto kernel = k_ring<STAGES, CONSUMERS, MATH>;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
  const int ctas = sms * ctas_per_sm;
  const Args a{pages, batch * HKV * TOPK, out};
  const float us =
      graph_time_us(st, [&](cudaStream_t s) { kernel<<<ctas, 32 * (1 + CONSUMERS), SMEM, s>>>(map, a); });
  const double bytes = (double)batch * HKV * TOPK * 2 * TILE;
  printf("ring fp8 B=%-3d L2 promotion %-4s ctas/SM=%d stages=%d consumers=%d math=%-4d %8.2f us %6.0f GB/s\n", batch,
         promotion, ctas_per_sm, STAGES, CONSUMERS, MATH, us, bytes / (us * 1e-6) / 1e9);
}

} // namespace

int main() {
  const size_t pool_bytes = (size_t)PAGES * PAGE_BYTES; // 2 GiB of fp8
  char *pool;
  CK(cudaMalloc(&pool, pool_bytes));
  CK(cudaMemset(pool, 0x11, pool_bytes));
  float *out;
  CK(cudaMalloc(&out, 4096 * sizeof(float)));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const CUtensorMap map128 = make_map(pool, CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
  const CUtensorMap map256 = make_map(pool, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
  const CUtensorMap map_none = make_map(pool, CU_TENSOR_MAP_L2_PROMOTION_NONE);
  std::mt19937 rng(20261127);
  for (int batch : {32, 128}) {
    int *pages = probe_device_pages(batch * HKV, TOPK, PAGES, rng);
    // 256-byte promotion fetches the other head's half of every row too.
    run<3, 4, 0>(batch, map256, "256B", pages, 2, sms, out, st);
    run<3, 4, 0>(batch, map_none, "none", pages, 2, sms, out, st);
    run<6, 4, 0>(batch, map128, "128B", pages, 1, sms, out, st);
    run<4, 4, 0>(batch, map128, "128B", pages, 1, sms, out, st);
    run<3, 4, 0>(batch, map128, "128B", pages, 2, sms, out, st);
    run<2, 4, 0>(batch, map128, "128B", pages, 2, sms, out, st);
    run<2, 4, 0>(batch, map128, "128B", pages, 3, sms, out, st);
    run<6, 4, 400>(batch, map128, "128B", pages, 1, sms, out, st);
    run<3, 4, 400>(batch, map128, "128B", pages, 2, sms, out, st);
    run<2, 4, 400>(batch, map128, "128B", pages, 3, sms, out, st);
    run<3, 4, 800>(batch, map128, "128B", pages, 2, sms, out, st);
    run<2, 4, 800>(batch, map128, "128B", pages, 3, sms, out, st);
    CK(cudaFree(pages));
  }
  CK(cudaFree(out));
  CK(cudaFree(pool));
  return 0;
}
