// cluster_merge_probe.cu - what sparse_attn_decode's cluster merge costs by
// mechanism, apart from the attention around it (standalone, nvcc; not part
// of the product). The B = 1 stage cuts put 2.6 us on the merge
// (docs/kernels/sparse_attn_decode.md); this separates the cluster launch,
// the barriers and the data movement, so that the next design is chosen on
// measurements:
//   empty     the launch of 2 clusters of 16 CTAs (128 threads, 70 KiB of
//             dynamic shared memory each, as the B = 1 winner)
//   barriers  two cluster barriers (release/acquire, then relaxed), no data
//   pull      today's merge: every CTA leaves 16 heads x 128 dims of fp32 O
//             and (m, l) in its shared memory, release/acquire barrier, each
//             CTA loads its 1/16 slice from all 16 CTAs (one round trip),
//             sums, stores, relaxed barrier
//   push      the candidate: one barrier after the receive mbarriers are
//             initialized (arrived at the start, waited on before pushing),
//             each CTA writes the slices other CTAs own straight into their
//             shared memory with st.async (complete_tx on the owner's
//             mbarrier); each owner waits for its bytes, sums, stores
//   skew      push, after thread 0 of each CTA spins a CTA-dependent number
//             of cycles first (0..15 x 200): how much of a merge's time is
//             waiting for the slowest CTA
// Every variant writes o so that nothing is optimized away; pull and push
// check their sums (each element of O is a known function of the CTA).
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o build/cluster_merge_probe \
//        docs/experiments/cluster_merge_probe.cu
// Run: build/cluster_merge_probe (about a second).
#include "graph_time.cuh"

#include <cstdint>

namespace {

constexpr int CLUSTER = 16, THREADS = 128, GROUP = 16, HEAD_DIM = 128;
constexpr int NE = GROUP * HEAD_DIM / 4;  // float4 pieces of an item's O
constexpr int PER = NE / CLUSTER;         // pieces each CTA owns
constexpr int DYN_SMEM = 70 * 1024;       // the B = 1 winner's footprint
constexpr int O_BYTES = NE * 16;          // a CTA's O (pull: read by others)
constexpr int RECV_BYTES = CLUSTER * PER * 16; // push: what a CTA receives

enum Mode { EMPTY, BARRIERS, PULL, PUSH, SKEW };

__device__ __forceinline__ uint32_t smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

__device__ __forceinline__ uint32_t map_rank(uint32_t addr, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}

__device__ __forceinline__ void sync_release_acquire() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void sync_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.aligned;\n" ::: "memory");
}

__device__ __forceinline__ float4 ld_cluster_f4(uint32_t addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr));
  return v;
}

// 16 bytes into another CTA's shared memory, counted on its mbarrier.
__device__ __forceinline__ void st_async_f4(uint32_t addr, float4 v, uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(
                   addr),
               "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(bar)
               : "memory");
}

// The value CTA `src` holds for piece e (every component the same).
__device__ __forceinline__ float piece_value(int src, int e) { return (float)(src + 1) * 0.5f + (float)(e & 7); }

template <Mode MODE> __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS) k_merge(float *o) {
  extern __shared__ __align__(128) char dyn[];
  __shared__ uint64_t s_recv_bar;
  if (MODE == EMPTY) return;
  const uint32_t rank = cluster_rank();
  const int cluster = blockIdx.x / CLUSTER;
  float4 *my_o = (float4 *)dyn;                 // PULL: [NE]
  float4 *recv = (float4 *)(dyn + O_BYTES);     // PUSH: [CLUSTER][PER]
  if (MODE == BARRIERS) {
    sync_release_acquire();
    sync_relaxed();
    if (threadIdx.x == 0) o[blockIdx.x] = (float)rank;
    return;
  }
  if (MODE == PULL) {
    for (int e = threadIdx.x; e < NE; e += THREADS) {
      const float v = piece_value((int)rank, e);
      my_o[e] = make_float4(v, v, v, v);
    }
    sync_release_acquire();
    for (int i = threadIdx.x; i < PER; i += THREADS) {
      const int e = (int)rank * PER + i;
      float4 got[CLUSTER];
#pragma unroll
      for (int c = 0; c < CLUSTER; c++) got[c] = ld_cluster_f4(map_rank(smem_addr(&my_o[e]), (uint32_t)c));
      float s = 0.f;
#pragma unroll
      for (int c = 0; c < CLUSTER; c++) s += got[c].x + got[c].y + got[c].z + got[c].w;
      o[(int64_t)cluster * NE + e] = s;
    }
    sync_relaxed();
    return;
  }
  // PUSH and SKEW: the receive barrier expects every byte this CTA owns.
  const uint32_t bar = smem_addr(&s_recv_bar);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
  if (threadIdx.x == 0)
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(RECV_BYTES) : "memory");
  if (MODE == SKEW && threadIdx.x == 0) {
    const long long t0 = clock64();
    while (clock64() - t0 < 200LL * rank) {
    }
  }
  __syncthreads();
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory"); // every receive barrier is initialized
  // Piece e goes to its owner e / PER, at slot rank * PER + e % PER there.
  for (int e = threadIdx.x; e < NE; e += THREADS) {
    const uint32_t owner = (uint32_t)(e / PER);
    const float v = piece_value((int)rank, e);
    const uint32_t dst = map_rank(smem_addr(&recv[rank * PER + e % PER]), owner);
    st_async_f4(dst, make_float4(v, v, v, v), map_rank(bar, owner));
  }
  asm volatile("{\n .reg .pred done;\n wait:\n"
               " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n"
               " @!done bra wait;\n}\n" ::"r"(bar)
               : "memory");
  for (int i = threadIdx.x; i < PER; i += THREADS) {
    float s = 0.f;
#pragma unroll
    for (int c = 0; c < CLUSTER; c++) {
      const float4 g = recv[c * PER + i];
      s += g.x + g.y + g.z + g.w;
    }
    o[(int64_t)cluster * NE + (int)rank * PER + i] = s;
  }
}

template <Mode MODE> float time_mode(cudaStream_t st, float *o) {
  CK(cudaFuncSetAttribute(k_merge<MODE>, cudaFuncAttributeMaxDynamicSharedMemorySize, DYN_SMEM));
  CK(cudaFuncSetAttribute(k_merge<MODE>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  return graph_time_us(st, [&](cudaStream_t s) { k_merge<MODE><<<2 * CLUSTER, THREADS, DYN_SMEM, s>>>(o); });
}

// The sums pull and push must produce: sum over sources of 4 x piece_value.
int check(const float *d_o, const char *what) {
  std::vector<float> h(2 * NE);
  CK(cudaMemcpy(h.data(), d_o, h.size() * 4, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 2 * NE; i++) {
    const int e = i % NE;
    double want = 0;
    for (int c = 0; c < CLUSTER; c++) want += 4.0 * ((c + 1) * 0.5 + (e & 7));
    if (h[i] != (float)want) {
      printf("%s: o[%d] = %g, want %g\n", what, i, h[i], want);
      return 1;
    }
  }
  return 0;
}

} // namespace

int main() {
  static_assert(O_BYTES + RECV_BYTES <= DYN_SMEM, "the probe's buffers fit the footprint");
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  float *o;
  CK(cudaMalloc(&o, 2 * NE * sizeof(float)));
  int bad = 0;
  printf("empty    %6.2f us\n", time_mode<EMPTY>(st, o));
  printf("barriers %6.2f us\n", time_mode<BARRIERS>(st, o));
  CK(cudaMemset(o, 0, 2 * NE * sizeof(float)));
  printf("pull     %6.2f us\n", time_mode<PULL>(st, o));
  bad |= check(o, "pull");
  CK(cudaMemset(o, 0, 2 * NE * sizeof(float)));
  printf("push     %6.2f us\n", time_mode<PUSH>(st, o));
  bad |= check(o, "push");
  printf("skew     %6.2f us (push after 0..3000 cycles of per-CTA delay)\n", time_mode<SKEW>(st, o));
  bad |= check(o, "skew");
  CK(cudaDeviceSynchronize());
  return bad;
}
