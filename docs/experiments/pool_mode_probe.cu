// pool_mode_probe.cu - why does the same index_decode kernel on the same
// inputs time 14.2, 17.1 or 19.3 us at B = 1, 128K, by process? (standalone,
// nvcc; not part of the product.) That row reads 1024 random 32 KiB blocks
// (33.5 MB) of a 128 MiB pool, replayed warm: between what L2 (50 MiB) holds
// and what it does not. This probe does the same gather with no math (256
// CTAs of 256 threads, four blocks each; all four blocks' 16-byte loads in
// flight at once, or one block at a time as the u1 kernels stream; by
// ld.global.cg or the kernels' ld.global.nc) on random data in a pool
// allocated one of five ways, so one process per way says
// whether the allocation (its pages: placement, page size, TLB reach) sets
// the mode:
//   plain     cudaMalloc, as the tuner and bench allocate
//   frag      cudaMalloc after 2 GiB were allocated in 64 MiB pieces and
//             every other piece freed (a process with history)
//   vmm       cuMemCreate + cuMemMap at the allocation granularity (2 MiB)
//   vmm_frag  both
//   htod      cudaMalloc, the data uploaded from the host (cudaMemcpy), as
//             the tuner and bench upload theirs (the others fill it by a
//             kernel)
// and a control with the 1024 blocks contiguous (32 MiB pool, each once).
// A mode containing "tail" puts a one-CTA kernel after the gather in each
// replay, as the split variants' merge follows their main kernel (an empty
// one: adds its launch, ~1-2 us, to the period): does a second kernel a
// replay change which SMs read which blocks from one replay to the next,
// and with it what stays in L2 (thirty-third session)?
// A mode containing "bump" runs a one-thread kernel after the gather each
// replay that advances a counter; "rot" does that and the gather's CTA x
// reads the blocks of CTA (x + counter * 37) % CTAS, so the same blocks are
// read each replay but by other SMs (thirty-fourth session). H100's L2 is
// two partitions, each caching what the SMs of its half read: if a block
// read from the other half the next replay is cached a second time there,
// 33.5 MB read from changing SMs no longer fits, and "rot" runs at DRAM's
// rate while "bump" stays in L2; if both stay in L2, that reading of the
// process modes is wrong. The "sm" modes ("smid", "smfix", "smrot")
// test the remedy the same way: one CTA an SM reading its blocks by the
// SM's own number, by block index, or rotated each replay (see gather_sm).
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o build/pool_mode_probe \
//        docs/experiments/pool_mode_probe.cu -lcuda
// (here: -L/usr/local/cuda/lib64/stubs). Run: build/pool_mode_probe MODE.
#include "graph_time.cuh"

#include <cstdint>
#include <cstring>
#include <cuda.h>
#include <random>

namespace {

// The row's shape, B = 1 128K bf16, unless compiled with -D: e.g. fp8 B = 8
// 32K (2048 blocks of 16 KiB, a 64 MiB pool, t128 s64: 512 CTAs of 128
// threads, four blocks each) is -DPROBE_BLOCK_KIB=16 -DPROBE_THREADS=128
// -DPROBE_CTAS=512 (thirty-sixth session).
#ifndef PROBE_BLOCK_KIB
#define PROBE_BLOCK_KIB 32
#endif
#ifndef PROBE_THREADS
#define PROBE_THREADS 256
#endif
#ifndef PROBE_CTAS
#define PROBE_CTAS 256
#endif
constexpr int BLOCK_BYTES = PROBE_BLOCK_KIB * 1024, THREADS = PROBE_THREADS, PER_CTA = 4, CTAS = PROBE_CTAS;
constexpr int LOADS = PER_CTA * BLOCK_BYTES / 16 / THREADS; // 32 a thread
// "cold": as bench --cold, a pool of 16 x L2 and 16 sets of picks, the
// next set each replay, so every block comes from DRAM (and its page
// often misses the TLB): the gather's own cold rate, to set beside the
// kernels' 21.5 us (1.56 TB/s) cold at B = 1 128K.
constexpr int COLD_SETS = 16;

// NC: the index kernels' load (ld.global.nc.L1::no_allocate), else L2-only
// (ld.global.cg). SEQ: one block at a time (the next block's address waits
// on this one's data, as the u1 kernels stream), else all four in flight.
template <bool NC> __device__ __forceinline__ uint4 load16(const void *p) {
  uint4 v;
  if (NC)
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
  else
    v = __ldcg((const uint4 *)p);
  return v;
}

// DEP: the picks' address waits on a load (the shift and set words), as the
// kernels' block-table reads wait on the request's length: two dependent
// round trips before the data. Without (mode "nodep"): one, the picks.
template <bool NC, bool SEQ, bool DEP = true>
__global__ void __launch_bounds__(THREADS)
    gather(const char *pool, const int *picks, float *out, const int *shift, const int *set) {
  const int *my = DEP ? picks + (*set % COLD_SETS) * CTAS * PER_CTA + (blockIdx.x + *shift * 37) % CTAS * PER_CTA
                      : picks + blockIdx.x * PER_CTA;
  constexpr int PER_BLOCK = LOADS / PER_CTA;
  uint32_t x = 0;
  if (SEQ) {
    for (int b = 0; b < PER_CTA; b++) {
      const char *blk = pool + (size_t)my[b] * BLOCK_BYTES + (x == 0x9e3779b9u ? 16 : 0); // a dependence, never taken
      uint4 v[PER_BLOCK];
#pragma unroll
      for (int i = 0; i < PER_BLOCK; i++) v[i] = load16<NC>((const uint4 *)blk + i * THREADS + threadIdx.x);
#pragma unroll
      for (int i = 0; i < PER_BLOCK; i++) x ^= v[i].x ^ v[i].y ^ v[i].z ^ v[i].w;
    }
  } else {
    uint4 v[LOADS];
#pragma unroll
    for (int i = 0; i < LOADS; i++) {
      const int b = i / PER_BLOCK, o = (i % PER_BLOCK) * THREADS + threadIdx.x;
      v[i] = load16<NC>((const uint4 *)(pool + (size_t)my[b] * BLOCK_BYTES) + o);
    }
#pragma unroll
    for (int i = 0; i < LOADS; i++) x ^= v[i].x ^ v[i].y ^ v[i].z ^ v[i].w;
  }
  if (x == 0x12345678u) out[blockIdx.x] = (float)x;
}

// The merge's stand-in: one CTA, no work.
__global__ void tail(float *out) {
  if (threadIdx.x == 1024) out[0] = 0.f; // never
}

// "sm" modes: one CTA an SM (its shared memory leaves no room for a
// second), 1024 threads, each CTA reading the slots slot, slot + nsm, ...
// (<= 8 blocks, all in flight), where slot is the SM's dense number
// ("smid": the same SM reads the same blocks every replay), blockIdx.x
// ("smfix": whichever SM the scheduler gives that CTA), or
// (blockIdx.x + 37 * counter) % nsm ("smrot": other SMs every replay).
constexpr int SM_THREADS = 1024, SM_MAX = 8;

__device__ __forceinline__ int smid() {
  int id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

// Once: each SM's dense number (%smid need not be contiguous).
__global__ void number_sms(int *dense, int *next) {
  extern __shared__ char pad[];
  if (threadIdx.x == 0) dense[smid()] = atomicAdd(next, 1) + (pad[0] & 0);
}

template <int HOW>
__global__ void __launch_bounds__(SM_THREADS) gather_sm(const char *pool, const int *picks, float *out,
                                                        const int *shift, const int *dense, int reads) {
  extern __shared__ char pad[];
  const int nsm = gridDim.x;
  const int slot = HOW == 0 ? dense[smid()] : (blockIdx.x + (HOW == 2 ? *shift * 37 : 0)) % nsm;
  uint4 v[SM_MAX * 2];
#pragma unroll
  for (int k = 0; k < SM_MAX; k++) {
    const int b = slot + k * nsm;
    const uint4 *blk = (const uint4 *)(pool + (size_t)picks[b < reads ? b : slot] * BLOCK_BYTES);
    v[2 * k] = b < reads ? __ldcg(blk + threadIdx.x) : make_uint4(0, 0, 0, 0);
    v[2 * k + 1] = b < reads ? __ldcg(blk + SM_THREADS + threadIdx.x) : make_uint4(0, 0, 0, 0);
  }
  uint32_t x = pad[threadIdx.x] & 0;
#pragma unroll
  for (int i = 0; i < SM_MAX * 2; i++) x ^= v[i].x ^ v[i].y ^ v[i].z ^ v[i].w;
  if (x == 0x12345678u) out[blockIdx.x] = (float)x;
}

// "bump", "rot", "smrot": the next replay's shift.
__global__ void bump(int *counter) { *counter += 1; }

// Random words (a hash of the index), as the kernels' random bf16 data.
__global__ void fill(uint32_t *p, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 0x9e3779b1u;
    h ^= h >> 15;
    h *= 0x85ebca77u;
    p[i] = h ^ (h >> 13);
  }
}

#define CU(x)                                                                                                          \
  do {                                                                                                                 \
    CUresult r_ = (x);                                                                                                 \
    if (r_ != CUDA_SUCCESS) {                                                                                          \
      fprintf(stderr, "%s:%d driver error %d\n", __FILE__, __LINE__, (int)r_);                                         \
      exit(1);                                                                                                         \
    }                                                                                                                  \
  } while (0)

char *vmm_alloc(size_t bytes) {
  int dev = 0;
  CK(cudaGetDevice(&dev));
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran = 0;
  CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  bytes = (bytes + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle h;
  CU(cuMemCreate(&h, bytes, &prop, 0));
  CUdeviceptr p;
  CU(cuMemAddressReserve(&p, bytes, gran, 0, 0));
  CU(cuMemMap(p, bytes, 0, h, 0));
  CUmemAccessDesc acc;
  memset(&acc, 0, sizeof acc);
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CU(cuMemSetAccess(p, bytes, &acc, 1));
  printf("vmm granularity %zu KiB\n", gran / 1024);
  return (char *)p;
}

} // namespace

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "plain";
  CK(cudaFree(nullptr));
  std::vector<void *> held;
  if (strstr(mode, "frag")) {
    for (int i = 0; i < 32; i++) {
      void *p;
      CK(cudaMalloc(&p, 64u << 20));
      held.push_back(p);
    }
    for (int i = 0; i < 32; i += 2) CK(cudaFree(held[i]));
  }
  const bool cold = strstr(mode, "cold") != nullptr;
  const int pool_blocks = cold ? 25600 : 4096, reads = CTAS * PER_CTA; // 800 MiB = 16 x 50 MiB cold
  const int sets = cold ? COLD_SETS : 1;
  const size_t pool_bytes = (size_t)pool_blocks * BLOCK_BYTES;
  char *pool;
  if (strstr(mode, "vmm"))
    pool = vmm_alloc(pool_bytes);
  else
    CK(cudaMalloc(&pool, pool_bytes));
  if (strstr(mode, "htod")) { // uploaded from the host, as the tuner's and bench's cases are
    std::vector<uint32_t> host(pool_bytes / 4);
    for (size_t i = 0; i < host.size(); i++) host[i] = (uint32_t)(i * 0x9e3779b1u) ^ (uint32_t)(i >> 7);
    CK(cudaMemcpy(pool, host.data(), pool_bytes, cudaMemcpyHostToDevice));
  } else {
    fill<<<1024, 256>>>((uint32_t *)pool, pool_bytes / 4);
  }
  CK(cudaDeviceSynchronize());
  int *picks;
  float *out;
  CK(cudaMalloc(&picks, (size_t)COLD_SETS * reads * 4));
  CK(cudaMalloc(&out, CTAS * 4));
  int *counter, *zero; // "rot" shifts by the counter, the other modes by a zero
  CK(cudaMalloc(&counter, 4));
  CK(cudaMalloc(&zero, 4));
  CK(cudaMemset(counter, 0, 4));
  CK(cudaMemset(zero, 0, 4));
  const int *shift = strstr(mode, "rot") ? counter : zero;
  const int *set = cold ? counter : zero;
  const bool with_bump = strstr(mode, "bump") || strstr(mode, "rot") || cold;
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  const double bytes = (double)reads * BLOCK_BYTES;
  // pass 0: uniformly random over the pool, as the anchors' block tables;
  // pass 1: the control, blocks 0 .. reads - 1 each once.
  for (int pass = 0; pass < 2; pass++) {
    std::mt19937 rng(20261127);
    std::vector<int> h((size_t)COLD_SETS * reads);
    for (int s = 0; s < COLD_SETS; s++) {
      for (int i = 0; i < reads; i++)
        h[s * reads + i] = pass == 0 ? (int)(rng() % pool_blocks) : (s % sets) * reads + i;
      if (pass == 1) std::shuffle(h.begin() + s * reads, h.begin() + (s + 1) * reads, rng);
    }
    CK(cudaMemcpy(picks, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    auto time = [&](auto kernel, const char *how) {
      for (int i = 0; i < 20000; i++) { // clocks up (~0.3 s)
        kernel<<<CTAS, THREADS, 0, st>>>(pool, picks, out, shift, set);
        if (with_bump) bump<<<1, 1, 0, st>>>(counter);
      }
      const bool with_tail = strstr(mode, "tail") != nullptr;
      const float us = graph_time_us(st, [&](cudaStream_t s) {
        kernel<<<CTAS, THREADS, 0, s>>>(pool, picks, out, shift, set);
        if (with_tail) tail<<<1, 256, 0, s>>>(out);
        if (with_bump) bump<<<1, 1, 0, s>>>(counter);
      });
      printf("%-9s %-10s %-7s %8.2f us  %5.2f TB/s\n", mode, pass == 0 ? "random" : "contiguous", how, us,
             bytes / us / 1e6);
    };
    if (strstr(mode, "sm")) {
      int nsm = 0, dev = 0;
      CK(cudaGetDevice(&dev));
      CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev));
      const int smem = 120 * 1024; // more than half an SM's 228 KiB: one CTA an SM
      int *dense, *next;
      CK(cudaMalloc(&dense, 1024 * 4));
      CK(cudaMalloc(&next, 4));
      CK(cudaMemset(next, 0, 4));
      CK(cudaFuncSetAttribute(number_sms, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      number_sms<<<nsm, 32, smem>>>(dense, next);
      const int how = strstr(mode, "smid") ? 0 : strstr(mode, "smfix") ? 1 : 2;
      auto k = how == 0 ? gather_sm<0> : how == 1 ? gather_sm<1> : gather_sm<2>;
      CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      if (nsm * SM_MAX < reads) {
        fprintf(stderr, "%d SMs x %d blocks < %d reads\n", nsm, SM_MAX, reads);
        exit(1);
      }
      auto launch = [&](cudaStream_t s) {
        k<<<nsm, SM_THREADS, smem, s>>>(pool, picks, out, counter, dense, reads);
        bump<<<1, 1, 0, s>>>(counter);
      };
      for (int i = 0; i < 20000; i++) launch(st);
      const float us = graph_time_us(st, launch);
      printf("%-9s %-10s %-7s %8.2f us  %5.2f TB/s\n", mode, pass == 0 ? "random" : "contiguous", "cg.sm", us,
             bytes / us / 1e6);
      CK(cudaFree(dense));
      CK(cudaFree(next));
      continue;
    }
    if (strstr(mode, "nodep")) {
      time(gather<false, false, false>, "cg.all");
      time(gather<true, false, false>, "nc.all");
      time(gather<false, true, false>, "cg.seq");
      time(gather<true, true, false>, "nc.seq");
    } else {
      time(gather<false, false>, "cg.all");
      time(gather<true, false>, "nc.all");
      time(gather<false, true>, "cg.seq");
      time(gather<true, true>, "nc.seq");
    }
  }
  return 0;
}
