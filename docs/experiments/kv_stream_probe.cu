// kv_stream_probe.cu - how fast can sparse_attn_decode's CTAs stream their
// K and V blocks, by copy mechanism, with no math? (standalone, nvcc; not
// part of the product.) At B = 32 the tuned kernel (w4.s2, one split: 64
// CTAs on 64 SMs, 16 blocks of 64 KiB each) reads at 77% of the copy
// bandwidth, ~36 GB/s per SM, and 3 or 4 stages did not change it
// (docs/kernels/sparse_attn_decode.md, v2.4). Candidates: the SM's limit on
// outstanding 16-byte cp.async requests (then the bulk copy engine, one
// request per 256-byte row, should stream faster per SM), or the DRAM side
// (then neither mechanism nor more CTAs help).
//
// Data as the anchors' B = 32 row: bf16, Hkv 2, D 128, 8192 pages (1 GiB),
// 16 distinct random pages per item (request x kv head), in both paged
// layouts of sparsetune.h: pages2 (pages, 2, 128, Hkv, D), where a head's
// rows are every other 256 bytes of the page's K (then V) half, and
// interleaved (pages, Hkv, 128, 2D), where a head's block is 64 KiB in one
// piece. Each CTA copies its blocks' K and V rows of its kv head (128 +
// 128 rows of 256 bytes) into STAGES shared-memory stages and reads one
// word of each, as the attention would before its math:
//   async  cp.async 16 bytes a thread (the kernel's mechanism today),
//          128 threads, a commit group per block
//   bulk   cp.async.bulk, one 256-byte row per copy, issued by warp 0 on a
//          per-stage mbarrier (rows padded to 272 bytes, as a bank-conflict
//          free ldmatrix layout would need)
// over both layouts, splits 1, 2 and 4 (CTAs per item, blocks per CTA
// 16 / splits), stages 1 to 3, and batch 8, 32 and 128. Prints microseconds per replay
// (CUDA graph, median of 5 x 40) and GB/s of K and V bytes.
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I templates -o build/kv_stream_probe \
//        docs/experiments/kv_stream_probe.cu
// Run: build/kv_stream_probe (a few seconds).
#include "graph_time.cuh"

#include <cstdint>

#include "common/mbarrier.cuh"
#include "common/smem_tile.cuh"
#include "probe_pages.cuh"

namespace {

constexpr int D = 128, HKV = 2, TOPK = 16, PAGES = 8192, BLOCK_TOKENS = 128, THREADS = 128;
constexpr int ROW_BYTES = D * 2;                                  // one token's K (or V) of one head
constexpr int64_t PAGE_BYTES = 2LL * BLOCK_TOKENS * HKV * ROW_BYTES; // either layout
constexpr int ASYNC_TILE = BLOCK_TOKENS * ROW_BYTES;              // 32 KiB
constexpr int BULK_ROW = ROW_BYTES + 16;                          // padded
constexpr int BULK_TILE = BLOCK_TOKENS * BULK_ROW;

struct Args {
  const char *pool;
  const int *pages; // [items][TOPK]
  int splits;
  int interleaved; // 0: pages2 (pages, 2, 128, Hkv, D); 1: (pages, Hkv, 128, 2D)
  float *out;
};

// The CTA's item and blocks: item = blockIdx.x / splits, blocks
// [s * per, (s + 1) * per) of its TOPK.
struct Slice {
  int item, g, b0, n;
};

__device__ __forceinline__ Slice slice_of(const Args &a) {
  const int per = TOPK / a.splits, item = blockIdx.x / a.splits, s = blockIdx.x % a.splits;
  return {item, item % HKV, s * per, per};
}

// K (which 0) or V (1) row `tok` of head g of page `page`.
__device__ __forceinline__ const char *row_src(const Args &a, int page, int which, int g, int tok) {
  const char *base = a.pool + (int64_t)page * PAGE_BYTES;
  if (a.interleaved) return base + ((int64_t)(g * BLOCK_TOKENS + tok) * 2 + which) * ROW_BYTES;
  return base + ((int64_t)(which * BLOCK_TOKENS + tok) * HKV + g) * ROW_BYTES;
}

template <int STAGES> __global__ void __launch_bounds__(THREADS) k_async(Args a) {
  extern __shared__ __align__(128) char smem[];
  const Slice sl = slice_of(a);
  const int *pages = a.pages + sl.item * TOPK + sl.b0;
  const int c = threadIdx.x % 16, r0 = threadIdx.x / 16; // 16 chunks a row, 8 rows a pass
  auto issue = [&](int b, int buf) {
    if (b < sl.n)
      for (int which = 0; which < 2; which++) {
        const uint32_t tile = st_smem_addr(smem + (buf * 2 + which) * ASYNC_TILE);
        for (int tok = r0; tok < BLOCK_TOKENS; tok += THREADS / 16)
          st_cp_async16(tile + tok * ROW_BYTES + c * 16, row_src(a, pages[b], which, sl.g, tok) + c * 16, 16);
      }
    st_cp_async_commit();
  };
  for (int s = 0; s < STAGES; s++) issue(s, s);
  float acc = 0.f;
  for (int i = 0; i < sl.n; i++) {
    const int buf = i % STAGES;
    st_cp_async_wait<STAGES - 1>();
    __syncthreads();
    acc += __uint_as_float(*(const uint32_t *)(smem + (buf * 2) * ASYNC_TILE + threadIdx.x * 4) & 0x3f7fffffu);
    acc += __uint_as_float(*(const uint32_t *)(smem + (buf * 2 + 1) * ASYNC_TILE + threadIdx.x * 4) & 0x3f7fffffu);
    __syncthreads();
    issue(i + STAGES, buf);
  }
  if (acc == 1234.5f) a.out[blockIdx.x] = acc; // never true; keeps the reads
}

template <int STAGES> __global__ void __launch_bounds__(THREADS) k_bulk(Args a) {
  extern __shared__ __align__(128) char smem[];
  __shared__ __align__(8) uint64_t full[STAGES];
  const Slice sl = slice_of(a);
  const int *pages = a.pages + sl.item * TOPK + sl.b0;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; s++) st_mbar_init(st_smem_addr(&full[s]), 1);
    st_mbar_init_fence();
  }
  __syncthreads();
  auto issue = [&](int b, int buf) { // warp 0 only
    if (b >= sl.n) return;
    const uint32_t bar = st_smem_addr(&full[buf]);
    if (lane == 0) st_mbar_arrive_expect_tx(bar, 2u * BLOCK_TOKENS * ROW_BYTES);
    __syncwarp();
    for (int which = 0; which < 2; which++) {
      const uint32_t tile = st_smem_addr(smem + (buf * 2 + which) * BULK_TILE);
      for (int tok = lane; tok < BLOCK_TOKENS; tok += 32)
        st_bulk_copy_g2s(tile + tok * BULK_ROW, row_src(a, pages[b], which, sl.g, tok), ROW_BYTES, bar);
    }
  };
  if (warp == 0)
    for (int s = 0; s < STAGES; s++) issue(s, s);
  float acc = 0.f;
  for (int i = 0; i < sl.n; i++) {
    const int buf = i % STAGES;
    st_mbar_wait(st_smem_addr(&full[buf]), (i / STAGES) & 1);
    acc += __uint_as_float(*(const uint32_t *)(smem + (buf * 2) * BULK_TILE + threadIdx.x * 4) & 0x3f7fffffu);
    acc += __uint_as_float(*(const uint32_t *)(smem + (buf * 2 + 1) * BULK_TILE + threadIdx.x * 4) & 0x3f7fffffu);
    __syncthreads(); // every thread read stage buf
    if (warp == 0) issue(i + STAGES, buf);
  }
  if (acc == 1234.5f) a.out[blockIdx.x] = acc;
}

template <class K> void run(const char *mode, K kernel, int stages, int smem, int batch, const Args &a,
                            cudaStream_t st) {
  const int splits = a.splits;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int ctas = batch * HKV * splits;
  const float us = graph_time_us(st, [&](cudaStream_t s) { kernel<<<ctas, THREADS, smem, s>>>(a); });
  const double bytes = (double)batch * HKV * TOPK * 2 * BLOCK_TOKENS * ROW_BYTES;
  printf("%-11s %-5s B=%-3d splits=%d stages=%d ctas=%-4d %9.2f us %7.0f GB/s\n",
         a.interleaved ? "interleaved" : "pages2", mode, batch, splits, stages, ctas, us, bytes / (us * 1e-6) / 1e9);
}

} // namespace

int main() {
  char *pool;
  CK(cudaMalloc(&pool, (size_t)PAGES * PAGE_BYTES));
  CK(cudaMemset(pool, 0x11, (size_t)PAGES * PAGE_BYTES));
  float *out;
  CK(cudaMalloc(&out, 4096 * sizeof(float)));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  std::mt19937 rng(20261123);
  for (int batch : {8, 32, 128}) {
    const int items = batch * HKV;
    int *pages = probe_device_pages(items, TOPK, PAGES, rng);
    for (int interleaved : {0, 1})
      for (int splits : {1, 2, 4}) {
        const Args a{pool, pages, splits, interleaved, out};
        run("async", k_async<1>, 1, 2 * ASYNC_TILE, batch, a, st);
        run("async", k_async<2>, 2, 4 * ASYNC_TILE, batch, a, st);
        run("async", k_async<3>, 3, 6 * ASYNC_TILE, batch, a, st);
        run("bulk", k_bulk<1>, 1, 2 * BULK_TILE, batch, a, st);
        run("bulk", k_bulk<2>, 2, 4 * BULK_TILE, batch, a, st);
        run("bulk", k_bulk<3>, 3, 6 * BULK_TILE, batch, a, st);
      }
    CK(cudaFree(pages));
  }
  CK(cudaFree(out));
  CK(cudaFree(pool));
  return 0;
}
