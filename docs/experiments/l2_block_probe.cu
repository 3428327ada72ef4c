// l2_block_probe.cu - how fast can all SMs read 64 KiB K/V blocks that sit in
// L2? (standalone, nvcc; not part of the product.) sparse_attn prefill v1.1
// reads each token's 16 selected blocks (K and V, 64 KiB per kv head) and
// at the anchors' 8192:57344 row moves ~5.6 TB/s of such reads, most of them
// L2 hits (the whole KV of a kv head, 512 blocks, is 32 MiB). 2x the peer
// there needs either ~12-14 TB/s of block reads or a kernel that reads each
// block once (block-major, docs/kernels/sparse_attn.md). This probe prices
// the first: every CTA of a full grid copies `reads` blocks picked at random
// from a pool of `pool` blocks (4 MiB to 256 MiB, so from all-L2 to
// all-HBM) into shared memory by 16-byte cp.async, STAGES blocks in flight,
// and touches one word of each, as the attention would before its math.
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o build/l2_block_probe \
//        docs/experiments/l2_block_probe.cu
// Run: build/l2_block_probe (a few seconds). Prints us per replay (CUDA
// graph, median of 5 x 40) and TB/s of block bytes read.
#include "graph_time.cuh"

#include <cstdint>
#include <random>

namespace {

constexpr int BLOCK_BYTES = 64 * 1024, THREADS = 256, READS = 64;

struct Args {
  const char *pool;
  const int *picks; // [ctas][READS]
  float *out;
};

__device__ __forceinline__ void cp16(uint32_t dst, const void *src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}

// One block (or a `part` of it: STAGES x part bytes of shared memory) per stage.
template <int STAGES, int PART> __global__ void __launch_bounds__(THREADS, 1) reader(Args a) {
  extern __shared__ __align__(128) char smem[];
  const uint32_t base = (uint32_t)__cvta_generic_to_shared(smem);
  const int *picks = a.picks + blockIdx.x * READS;
  constexpr int PARTS = BLOCK_BYTES / PART, STEPS = READS * PARTS;
  auto issue = [&](int step) {
    if (step < STEPS) {
      const char *src = a.pool + (size_t)picks[step / PARTS] * BLOCK_BYTES + (step % PARTS) * PART;
      const uint32_t dst = base + (step % STAGES) * PART;
      for (int o = threadIdx.x * 16; o < PART; o += THREADS * 16) cp16(dst + o, src + o);
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  for (int s = 0; s < STAGES - 1; s++) issue(s);
  float acc = 0.f;
  for (int step = 0; step < STEPS; step++) {
    issue(step + STAGES - 1);
    asm volatile("cp.async.wait_group %0;" ::"n"(STAGES - 1) : "memory");
    __syncthreads();
    acc += *(const float *)(smem + (step % STAGES) * PART + threadIdx.x * 4);
    __syncthreads();
  }
  if (acc == 12345.f) a.out[blockIdx.x] = acc;
}

template <int STAGES, int PART> void run(cudaStream_t st, const char *pool, int pool_blocks, int ctas, int *picks,
                                         float *out) {
  std::mt19937 rng(pool_blocks * 7 + ctas);
  std::vector<int> h(ctas * READS);
  for (int &x : h) x = (int)(rng() % pool_blocks);
  CK(cudaMemcpy(picks, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
  const int smem = STAGES * PART;
  CK(cudaFuncSetAttribute(reader<STAGES, PART>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  Args a{pool, picks, out};
  const float us = graph_time_us(st, [&](cudaStream_t s) { reader<STAGES, PART><<<ctas, THREADS, smem, s>>>(a); });
  const double bytes = (double)ctas * READS * BLOCK_BYTES;
  printf("pool %4d blocks (%4d MiB) stages %d x %5d B  ctas %4d  %9.2f us  %6.2f TB/s\n", pool_blocks,
         pool_blocks / 16, STAGES, PART, ctas, us, bytes / us / 1e6);
}

} // namespace

int main() {
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  const int max_pool = 4096, max_ctas = 132 * 4;
  char *pool;
  int *picks;
  float *out;
  CK(cudaMalloc(&pool, (size_t)max_pool * BLOCK_BYTES));
  CK(cudaMemset(pool, 1, (size_t)max_pool * BLOCK_BYTES));
  CK(cudaMalloc(&picks, max_ctas * READS * 4));
  CK(cudaMalloc(&out, max_ctas * 4));
  for (int pool_blocks : {64, 256, 512, 768, 1024, 4096}) {
    run<2, 65536>(st, pool, pool_blocks, 132, picks, out);
    run<4, 32768>(st, pool, pool_blocks, 132, picks, out);
    run<3, 16384>(st, pool, pool_blocks, 264, picks, out);
    run<6, 16384>(st, pool, pool_blocks, 132, picks, out);
  }
  CK(cudaFree(pool));
  CK(cudaFree(picks));
  CK(cudaFree(out));
  return 0;
}
