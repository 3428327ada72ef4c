// cluster_sync_probe.cu - does compute-sanitizer's synccheck stop a launch
// of many clusters of 16 that push to each other, with no kernel of ours
// in it? (standalone, nvcc; not part of the product.) sparse_attn_decode's
// c16/s8 kernels stop under synccheck with an illegal address once a
// launch has 8 clusters of 16 (7 pass; plain runs and memcheck are right
// and clean). This kernel keeps only their merge's pattern: every CTA arms
// a receive mbarrier for the bytes its cluster's CTAs will push, meets the
// cluster barrier, pushes 16-byte pieces into each CTA of its cluster with
// st.async (complete_tx on the receiver's mbarrier), waits on its own
// mbarrier and checks what arrived.
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o build/cluster_sync_probe \
//        docs/experiments/cluster_sync_probe.cu
// Run: build/cluster_sync_probe CLUSTERS SMEM_KB [ROWS [DELAY [THREADS [HIGH [PUSHES [PDL]]]]]]
// (plain, then under compute-sanitizer --tool synccheck): CLUSTERS
// clusters a grid row, ROWS rows (gridDim.y, the kernel's kv heads;
// default 1); DELAY > 0 splits the cluster barrier's arrive and wait, as
// the kernel does, by up to DELAY cycles of spinning that differ by CTA;
// THREADS a CTA (64 or 128); HIGH 1 puts the receive area at the end of
// the dynamic shared memory, as the kernel's is (else static); PUSHES
// pieces from each CTA to each (default 1; the c16/s8 kernel pushes 40 a
// peer: 640 st.async a CTA); PDL 1 launches it as the kernels are, with
// programmatic stream serialization after a kernel on the same stream,
// waiting (griddepcontrol.wait) after the cluster arrive. Prints "ok" or
// the first wrong CTA.
#include "graph_time.cuh" // CK

#include <cstdint>

constexpr int CLUSTER = 16, THREADS = 128; // the most a CTA has

__device__ __forceinline__ uint32_t smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS)
    pushes(float *out, long long delay, int high, int smem, int reps, int pdl) {
  extern __shared__ __align__(16) char dyn[];           // sized by the launch: sets how many CTAs an SM holds
  __shared__ __align__(16) float4 recv_static[CLUSTER]; // one piece from each CTA of the cluster (reps 1)
  float4 *recv = high || reps > 1 ? (float4 *)(dyn + smem - CLUSTER * 16 * reps) : recv_static;
  __shared__ __align__(8) uint64_t bar;
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  const uint32_t b = smem_addr(&bar);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b) : "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(CLUSTER * 16 * reps)
                 : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if (threadIdx.x == 0) dyn[0] = 1; // touch the dynamic part
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  if (pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
  if (delay > 0) { // the kernel's front end between its arrive and its wait
    const long long t0 = clock64(), d = delay * (long long)((blockIdx.x * 7 + blockIdx.y * 3) % 16) / 16;
    while (clock64() - t0 < d) {
    }
  }
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
  for (int k = threadIdx.x; k < CLUSTER * reps; k += blockDim.x) { // piece k / CLUSTER to rank k % CLUSTER
    const int to = k % CLUSTER, j = k / CLUSTER;
    uint32_t to_slot, to_bar;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                 : "=r"(to_slot)
                 : "r"(smem_addr(&recv[j * CLUSTER + rank])), "r"(to));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(to_bar) : "r"(b), "r"(to));
    const float v = (float)(blockIdx.x * 1000 + to);
    asm volatile(
        "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(to_slot),
        "f"(v), "f"(v), "f"(v), "f"(v), "r"(to_bar)
        : "memory");
  }
  uint32_t done = 0;
  while (!done)
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n selp.u32 %0, 1, 0, p;\n}"
                 : "=r"(done)
                 : "r"(b)
                 : "memory");
  if (threadIdx.x == 0) {
    // rank r's piece: (its block) * 1000 + this CTA's rank
    const int base = blockIdx.x - (int)rank;
    float bad = 0.f;
    for (int j = 0; j < reps; j++)
      for (int r = 0; r < CLUSTER; r++)
        if (recv[j * CLUSTER + r].x != (float)((base + r) * 1000 + (int)rank)) bad = 1.f;
    out[blockIdx.y * gridDim.x + blockIdx.x] = bad;
  }
}

__global__ void before(float *out) { out[threadIdx.x] = 0.f; } // the kernel a PDL launch follows

int main(int argc, char **argv) {
  const int clusters = argc > 1 ? atoi(argv[1]) : 8, smem_kb = argc > 2 ? atoi(argv[2]) : 1;
  const int rows = argc > 3 ? atoi(argv[3]) : 1, threads = argc > 5 ? atoi(argv[5]) : THREADS;
  const long long delay = argc > 4 ? atoll(argv[4]) : 0;
  const int high = argc > 6 ? atoi(argv[6]) : 0, reps = argc > 7 ? atoi(argv[7]) : 1;
  const int pdl = argc > 8 ? atoi(argv[8]) : 0;
  const int ctas = clusters * CLUSTER * rows, smem = smem_kb * 1024;
  if ((high || reps > 1) && CLUSTER * 16 * reps > smem) { // the receive area would start below the dynamic part
    fprintf(stderr, "%d pushes a peer need %d bytes of dynamic shared memory, not %d\n", reps, CLUSTER * 16 * reps, smem);
    return 2;
  }
  float *out;
  CK(cudaMalloc(&out, ctas * 4));
  CK(cudaMemset(out, 0xff, ctas * 4));
  CK(cudaFuncSetAttribute(pushes, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  CK(cudaFuncSetAttribute(pushes, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int max_clusters = 0;
  {
    cudaLaunchConfig_t q = {};
    q.gridDim = dim3(clusters * CLUSTER, rows);
    q.blockDim = dim3(threads);
    q.dynamicSmemBytes = smem;
    CK(cudaOccupancyMaxActiveClusters(&max_clusters, pushes, &q));
  }
  if (pdl) {
    float *scratch;
    CK(cudaMalloc(&scratch, 1024 * 4));
    before<<<1, 1024>>>(scratch);
    cudaLaunchConfig_t q = {};
    q.gridDim = dim3(clusters * CLUSTER, rows);
    q.blockDim = dim3(threads);
    q.dynamicSmemBytes = smem;
    cudaLaunchAttribute a[1];
    a[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    a[0].val.programmaticStreamSerializationAllowed = 1;
    q.attrs = a;
    q.numAttrs = 1;
    CK(cudaLaunchKernelEx(&q, pushes, out, delay, high, smem, reps, pdl));
    CK(cudaDeviceSynchronize());
    CK(cudaFree(scratch));
  } else {
    pushes<<<dim3(clusters * CLUSTER, rows), threads, smem>>>(out, delay, high, smem, reps, pdl);
  }
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> h(ctas);
  CK(cudaMemcpy(h.data(), out, ctas * 4, cudaMemcpyDeviceToHost));
  int wrong = -1;
  for (int i = 0; i < ctas; i++)
    if (h[i] != 0.f) {
      wrong = i;
      break;
    }
  printf("clusters %d x %d rows of %d (max active %d), %d KB dynamic, delay %lld, %d threads, high %d, %d pushes, "
         "pdl %d: %s",
         clusters, rows, CLUSTER, max_clusters, smem_kb, delay, threads, high, reps, pdl,
         wrong < 0 ? "ok\n" : "WRONG at CTA ");
  if (wrong >= 0) printf("%d\n", wrong);
  CK(cudaFree(out));
  return wrong < 0 ? 0 : 1;
}
