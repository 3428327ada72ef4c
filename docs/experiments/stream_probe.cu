// stream_probe.cu - where does index_decode's time go at small batch?
// A standalone probe (nvcc, not part of the product): for one request of ctx
// tokens, bf16, D = 128, two index heads per CTA, it times by CUDA-graph
// replay (median of 5 x 40, as ../../shared/anchors.md) kernels that each do
// one stage of the op over `ncta` CTAs:
//   empty   one store: the replay floor
//   chain   seq_len -> page id -> one 4 KB tile -> store, fence, counter atomic,
//           the last CTA reads every CTA's value: the dependent round trips
//   touch   plain 16-byte loads of the slice's pages (U per lane in flight), summed
//   reg     the v3 scoring loop: register loads, mma, block max to smem, out
//   bulk    whole pages by cp.async.bulk into S shared-memory stages, mma from there
// Build: nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o stream_probe stream_probe.cu
#include <cuda_bf16.h>
#include <cstdint>
#include "graph_time.cuh"

constexpr int D = 128, ROW = D * 2, PAGE_BYTES = 128 * ROW, CHUNKS = ROW / 64;

struct Args {
  const char *k; const int *bt; const int *seq; const __nv_bfloat16 *q;
  int nblocks, ncta; float *out; unsigned *counter; float *vals;
};

__device__ __forceinline__ uint4 ld_stream(const void *p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ void mma(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t key(float f) {
  uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ void slice(const Args &a, int &j0, int &n) {
  const int chunk = (a.nblocks + a.ncta - 1) / a.ncta;
  j0 = min(blockIdx.x * chunk, a.nblocks);
  n = min(chunk, a.nblocks - j0);
}

__global__ void k_empty(Args a) { if (threadIdx.x == 0) a.out[blockIdx.x] = 1.f; }

__global__ void k_chain(Args a) {
  __shared__ int last;
  const int seq = a.seq[0];
  const int page = a.bt[blockIdx.x % max(1, (seq + 127) / 128)];
  const uint4 v = ld_stream(a.k + (size_t)page * PAGE_BYTES + threadIdx.x * 16);
  float s = __uint_as_float(v.x & 0x7f7fffffu);
  for (int o = 16; o; o >>= 1) s = fmaxf(s, __shfl_xor_sync(~0u, s, o));
  __syncthreads();
  if (threadIdx.x == 0) {
    a.vals[blockIdx.x] = s;
    __threadfence();
    last = atomicAdd(a.counter, 1u) == gridDim.x - 1;
    if (last) __threadfence();
  }
  __syncthreads();
  if (!last) return;
  float m = 0.f;
  for (int i = threadIdx.x; i < gridDim.x; i += blockDim.x) m = fmaxf(m, __ldcg(a.vals + i));
  if (threadIdx.x == 0) { a.out[0] = m; *a.counter = 0; }
}

template <int U>
__global__ void __launch_bounds__(256) k_touch(Args a) {
  int j0, n;
  slice(a, j0, n);
  const int per_page = PAGE_BYTES / 16;
  uint32_t acc = 0;
  const int total = n * per_page;
  for (int base = threadIdx.x; base < total; base += 256 * U) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int i = base + u * 256;
      v[u] = i < total ? ld_stream(a.k + (size_t)a.bt[j0 + i / per_page] * PAGE_BYTES + (i % per_page) * 16) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; u++) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x12345678u) a.out[blockIdx.x] = 1.f; // keeps the loads
}

// q fragments for columns 0,1 (heads), rows of the B operand.
__device__ __forceinline__ void load_q(const Args &a, uint4 (&qf)[CHUNKS]) {
  const int lane = threadIdx.x & 31, gq = lane >> 2, cq = lane & 3;
#pragma unroll
  for (int ch = 0; ch < CHUNKS; ch++)
    qf[ch] = gq < 2 ? *(const uint4 *)((const char *)a.q + gq * ROW + ch * 64 + cq * 16) : make_uint4(0, 0, 0, 0);
}

__device__ __forceinline__ void tile_max(const uint4 (&lo)[CHUNKS], const uint4 (&hi)[CHUNKS], const uint4 (&qf)[CHUNKS],
                                         uint32_t *smax, int jl) {
  const int lane = threadIdx.x & 31, cq = lane & 3, gq = lane >> 2;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int ch = 0; ch < CHUNKS; ch++) {
    mma(acc, lo[ch].x, hi[ch].x, lo[ch].y, hi[ch].y, qf[ch].x, qf[ch].y);
    mma(acc, lo[ch].z, hi[ch].z, lo[ch].w, hi[ch].w, qf[ch].z, qf[ch].w);
  }
  uint32_t k0 = max(key(acc[0]), key(acc[2]));
  for (int o = 4; o < 32; o <<= 1) k0 = max(k0, __shfl_xor_sync(~0u, k0, o));
  if (gq == 0 && cq == 0) atomicMax(&smax[jl], k0); // column 0 (head 0); head 1 is acc[1]/acc[3]
  uint32_t k1 = max(key(acc[1]), key(acc[3]));
  for (int o = 4; o < 32; o <<= 1) k1 = max(k1, __shfl_xor_sync(~0u, k1, o));
  if (gq == 0 && cq == 0) atomicMax(&smax[64 + jl], k1);
}

template <int U>
__global__ void __launch_bounds__(256) k_reg(Args a) {
  __shared__ uint32_t smax[128];
  __shared__ int pages[64];
  int j0, n;
  slice(a, j0, n);
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, gq = lane >> 2, cq = lane & 3;
  if (threadIdx.x < 128) smax[threadIdx.x] = 0;
  if (threadIdx.x < n) pages[threadIdx.x] = a.bt[j0 + threadIdx.x];
  uint4 qf[CHUNKS];
  load_q(a, qf);
  __syncthreads();
  const int nunits = n * 8;
  for (int base = warp; base < nunits; base += 8 * U) {
    uint4 lo[U][CHUNKS], hi[U][CHUNKS];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int unit = base + u * 8;
      if (unit < nunits) {
        const char *r0 = a.k + (size_t)pages[unit / 8] * PAGE_BYTES + ((unit % 8) * 16 + gq) * ROW + cq * 16;
#pragma unroll
        for (int ch = 0; ch < CHUNKS; ch++) { lo[u][ch] = ld_stream(r0 + ch * 64); hi[u][ch] = ld_stream(r0 + 8 * ROW + ch * 64); }
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int unit = base + u * 8;
      if (unit < nunits) tile_max(lo[u], hi[u], qf, smax, unit / 8);
    }
  }
  __syncthreads();
  if (threadIdx.x < n) {
    a.out[j0 + threadIdx.x] = __uint_as_float(smax[threadIdx.x]);
    a.out[a.nblocks + j0 + threadIdx.x] = __uint_as_float(smax[64 + threadIdx.x]);
  }
}

__device__ __forceinline__ void mbar_init(uint64_t *b, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"((unsigned)__cvta_generic_to_shared(b)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t *b, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"((unsigned)__cvta_generic_to_shared(b)), "r"(bytes));
}
__device__ __forceinline__ void mbar_wait(uint64_t *b, unsigned phase) {
  asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}" ::"r"(
                   (unsigned)__cvta_generic_to_shared(b)), "r"(phase));
}
__device__ __forceinline__ void bulk_copy(void *dst, const void *src, unsigned bytes, uint64_t *b) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   (unsigned)__cvta_generic_to_shared(dst)), "l"(src), "r"(bytes), "r"((unsigned)__cvta_generic_to_shared(b))
               : "memory");
}

template <int S>
__global__ void __launch_bounds__(256) k_bulk(Args a) {
  extern __shared__ __align__(128) char stage[];
  __shared__ uint64_t full[S];
  __shared__ uint32_t smax[128];
  int j0, n;
  slice(a, j0, n);
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, gq = lane >> 2, cq = lane & 3;
  if (threadIdx.x < 128) smax[threadIdx.x] = 0;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; s++) mbar_init(&full[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0)
    for (int s = 0; s < S && s < n; s++) {
      mbar_expect_tx(&full[s], PAGE_BYTES);
      bulk_copy(stage + s * PAGE_BYTES, a.k + (size_t)a.bt[j0 + s] * PAGE_BYTES, PAGE_BYTES, &full[s]);
    }
  uint4 qf[CHUNKS];
  load_q(a, qf);
  for (int i = 0; i < n; i++) {
    const int s = i % S;
    mbar_wait(&full[s], (i / S) & 1);
    const char *r0 = stage + s * PAGE_BYTES + (warp * 16 + gq) * ROW + cq * 16;
    uint4 lo[CHUNKS], hi[CHUNKS];
#pragma unroll
    for (int ch = 0; ch < CHUNKS; ch++) { lo[ch] = *(const uint4 *)(r0 + ch * 64); hi[ch] = *(const uint4 *)(r0 + 8 * ROW + ch * 64); }
    tile_max(lo, hi, qf, smax, i);
    __syncthreads();
    if (threadIdx.x == 0 && i + S < n) {
      mbar_expect_tx(&full[s], PAGE_BYTES);
      bulk_copy(stage + s * PAGE_BYTES, a.k + (size_t)a.bt[j0 + i + S] * PAGE_BYTES, PAGE_BYTES, &full[s]);
    }
  }
  __syncthreads();
  if (threadIdx.x < n) {
    a.out[j0 + threadIdx.x] = __uint_as_float(smax[threadIdx.x]);
    a.out[a.nblocks + j0 + threadIdx.x] = __uint_as_float(smax[64 + threadIdx.x]);
  }
}

typedef void (*kern)(Args);

static float time_graph(kern f, int ncta, size_t smem, Args a, cudaStream_t st) {
  return graph_time_us(st, [&](cudaStream_t s) { f<<<ncta, 256, smem, s>>>(a); });
}

int main() {
  const int pool = 4096;
  char *k;
  CK(cudaMalloc(&k, (size_t)pool * PAGE_BYTES));
  {
    std::vector<__nv_bfloat16> h((size_t)pool * PAGE_BYTES / 2);
    for (size_t i = 0; i < h.size(); i++) h[i] = __float2bfloat16((float)((i * 2654435761u) % 2001) / 1000.f - 1.f);
    CK(cudaMemcpy(k, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  }
  std::vector<int> perm(pool);
  for (int i = 0; i < pool; i++) perm[i] = i;
  srand(7);
  for (int i = pool - 1; i > 0; i--) std::swap(perm[i], perm[rand() % (i + 1)]);
  int *bt, *seq;
  __nv_bfloat16 *q;
  float *out, *vals;
  unsigned *counter;
  CK(cudaMalloc(&bt, pool * 4));
  CK(cudaMemcpy(bt, perm.data(), pool * 4, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&seq, 4));
  CK(cudaMalloc(&q, 2 * D * 2));
  CK(cudaMemset(q, 0x3c, 2 * D * 2));
  CK(cudaMalloc(&out, 2 * pool * 4));
  CK(cudaMalloc(&vals, 4096 * 4));
  CK(cudaMalloc(&counter, 4));
  CK(cudaMemset(counter, 0, 4));
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  for (int S : {2, 3, 4, 6}) (void)S;
  CK(cudaFuncSetAttribute(k_bulk<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, 2 * PAGE_BYTES));
  CK(cudaFuncSetAttribute(k_bulk<3>, cudaFuncAttributeMaxDynamicSharedMemorySize, 3 * PAGE_BYTES));
  CK(cudaFuncSetAttribute(k_bulk<6>, cudaFuncAttributeMaxDynamicSharedMemorySize, 6 * PAGE_BYTES));
  printf("%-8s %6s %5s %8s %8s\n", "kernel", "ctx", "ncta", "us", "GB/s");
  for (int ctx : {8192, 131072}) {
    const int nb = ctx / 128;
    CK(cudaMemcpy(seq, &ctx, 4, cudaMemcpyHostToDevice));
    const double bytes = (double)nb * PAGE_BYTES;
    std::vector<int> nctas = ctx == 8192 ? std::vector<int>{16, 32, 64} : std::vector<int>{64, 128, 132, 256, 264, 512, 1024};
    for (int ncta : nctas) {
      Args a{k, bt, seq, q, nb, ncta, out, counter, vals};
      struct { const char *name; kern f; size_t smem; } ks[] = {
          {"empty", k_empty, 0}, {"chain", k_chain, 0}, {"touch1", k_touch<1>, 0}, {"touch4", k_touch<4>, 0},
          {"touch8", k_touch<8>, 0}, {"reg1", k_reg<1>, 0}, {"reg2", k_reg<2>, 0}, {"reg4", k_reg<4>, 0},
          {"bulk2", k_bulk<2>, 2 * PAGE_BYTES}, {"bulk3", k_bulk<3>, 3 * PAGE_BYTES}, {"bulk6", k_bulk<6>, 6 * PAGE_BYTES}};
      for (auto &kk : ks) {
        if (nb / ncta > 64 && kk.f == (kern)k_reg<1>) continue;
        if ((nb + ncta - 1) / ncta > 64 && (kk.f == (kern)k_reg<2> || kk.f == (kern)k_reg<4> || kk.f == (kern)k_reg<1>)) continue;
        const float us = time_graph(kk.f, ncta, kk.smem, a, st);
        printf("%-8s %6d %5d %8.2f %8.0f\n", kk.name, ctx, ncta, us, bytes / us / 1e3);
      }
    }
  }
  return 0;
}
