// pdl_probe.cu - what programmatic dependent launch saves between two small
// decode kernels in one CUDA graph (twenty-second session).
//
// A stands for index_decode at small batch: `a_ctas` CTAs of 128 threads,
// each busy for `spin_ns` (globaltimer), then a write B depends on. B stands
// for sparse_attn_decode at B = 1: 32 CTAs of 128 threads with 64 KiB of
// dynamic shared memory, optionally in clusters of 16; its prologue touches
// shared memory (and meets the cluster barrier), then waits for A
// (griddepcontrol.wait), then reads A's output. Timed as graph replays
// (graph_time.cuh):
//   A alone, B alone, A;B plain, A;B with B launched programmatically
//   (A never triggering: B may start when A's CTAs exit), A;B with A
//   triggering at its start (griddepcontrol.launch_dependents).
// Build: nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o pdl_probe pdl_probe.cu
#include "graph_time.cuh"

__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void a_kernel(int *buf, long long spin_ns, int trigger) {
  if (trigger) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const unsigned long long t0 = now_ns();
  while ((long long)(now_ns() - t0) < spin_ns) {
  }
  if (threadIdx.x == 0) buf[blockIdx.x] = blockIdx.x + 1;
}

__global__ void b_kernel(int *buf, int n, int *out, int cluster, int check) {
  extern __shared__ int smem[];
  for (int i = threadIdx.x; i < 1024; i += blockDim.x) smem[i] = i;
  if (cluster) {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
  } else {
    __syncthreads();
  }
  asm volatile("griddepcontrol.wait;" ::: "memory");
  // CTA 0 checks every value A wrote in this replay, then clears them, so a
  // read that overtook A's writes is counted in out[0].
  if (!check || blockIdx.x != 0 || threadIdx.x != 0) return;
  int s = smem[0];
  for (int i = 0; i < n; i++) s += buf[i];
  for (int i = 0; i < n; i++) buf[i] = 0;
  if (s != n * (n + 1) / 2) out[0] += 1;
}

struct shape {
  const char *name;
  int a_ctas;
  long long spin_ns;
};

static void launch_a(cudaStream_t st, int *buf, const shape &s, int trigger, int pdl) {
  cudaLaunchConfig_t c = {};
  cudaLaunchAttribute at[1];
  c.gridDim = dim3(s.a_ctas);
  c.blockDim = dim3(128);
  c.stream = st;
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = pdl;
  c.attrs = at;
  c.numAttrs = 1;
  CK(cudaLaunchKernelEx(&c, a_kernel, buf, s.spin_ns, trigger));
}

static void launch_b(cudaStream_t st, int *buf, int n, int *out, int cluster, int pdl, int check = 1) {
  cudaLaunchConfig_t c = {};
  cudaLaunchAttribute at[2];
  c.gridDim = dim3(32);
  c.blockDim = dim3(128);
  c.dynamicSmemBytes = 64 * 1024;
  c.stream = st;
  int na = 0;
  at[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[na++].val.programmaticStreamSerializationAllowed = pdl;
  if (cluster) {
    at[na].id = cudaLaunchAttributeClusterDimension;
    at[na].val.clusterDim.x = 16;
    at[na].val.clusterDim.y = 1;
    at[na++].val.clusterDim.z = 1;
  }
  c.attrs = at;
  c.numAttrs = na;
  CK(cudaLaunchKernelEx(&c, b_kernel, buf, n, out, cluster, check));
}

int main() {
  CK(cudaFuncSetAttribute(b_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024));
  CK(cudaFuncSetAttribute(b_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  int *buf, *out;
  CK(cudaMalloc(&buf, 4096 * sizeof(int)));
  CK(cudaMalloc(&out, 64 * sizeof(int)));
  CK(cudaMemset(buf, 0, 4096 * sizeof(int)));
  CK(cudaMemset(out, 0, 64 * sizeof(int)));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const shape shapes[] = {{"B1-like: A 64 CTAs, 3 us", 64, 3000},
                          {"B8-like: A 264 CTAs, 5 us", 264, 5000},
                          {"A 64 CTAs, 0 us", 64, 0}};
  printf("%-28s %-8s %8s %8s %8s %10s %10s %10s\n", "shape", "B", "A", "B", "A+B", "A;B", "A;B pdl", "pdl+trig");
  for (const shape &s : shapes) {
    for (int cluster = 0; cluster < 2; cluster++) {
      const float ta = graph_time_us(st, [&](cudaStream_t x) { launch_a(x, buf, s, 0, 0); });
      const float tb = graph_time_us(st, [&](cudaStream_t x) { launch_b(x, buf, s.a_ctas, out, cluster, 0, 0); });
      const float plain = graph_time_us(st, [&](cudaStream_t x) {
        launch_a(x, buf, s, 0, 0);
        launch_b(x, buf, s.a_ctas, out, cluster, 0);
      });
      const float pdl = graph_time_us(st, [&](cudaStream_t x) {
        launch_a(x, buf, s, 0, 0);
        launch_b(x, buf, s.a_ctas, out, cluster, 1);
      });
      const float trig = graph_time_us(st, [&](cudaStream_t x) {
        launch_a(x, buf, s, 1, 0);
        launch_b(x, buf, s.a_ctas, out, cluster, 1);
      });
      int bad = 0;
      CK(cudaMemcpy(&bad, out, sizeof bad, cudaMemcpyDeviceToHost));
      CK(cudaMemset(out, 0, sizeof(int)));
      printf("%-28s %-8s %8.2f %8.2f %8.2f %10.2f %10.2f %10.2f  %s\n", s.name, cluster ? "c16" : "plain", ta, tb,
             ta + tb, plain, pdl, trig, bad ? "STALE READS" : "ok");
    }
  }
  CK(cudaFree(buf));
  CK(cudaFree(out));
  return 0;
}
