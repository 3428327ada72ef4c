// attn_phase_probe.cu - times one rendered sparse_attn_decode variant at the
// B = 1 anchor shape with stages cut out, to place where a launch's time
// goes (standalone, nvcc; not part of the product). The kernel source comes
// from `sparsetune generate --print` with #ifdef CUT_EMPTY / CUT_SKIP_COPY /
// CUT_SKIP_MATH / CUT_SKIP_MERGE markers added (make_attn_phase_probes.sh
// says where and why); one binary per (variant, cut):
//   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -I docs/experiments \
//        -DKERNEL='"k.cuh"' -DAP_TAG='"x"' -DAP_CUT='"FULL"' -DCUT_FULL attn_phase_probe.cu
// Run: no arguments. Prints `ap TAG CUT US us ...`; the EMPTY cut also times
// a plain empty kernel (`floor`), FULL checks o against a host reference.
//
// Shape (../../shared/anchors.md, tuner/ops/sparse_attn_decode.c): B = AP_B
// requests (default 1), qlen 1, Hq 32 over Hkv 2 (GROUP 16), head_dim 128,
// topk 16, context 32768 (256 blocks), the anchors' pool of max(4096,
// min(B * 256, 32768)) pages in the (pages, 2, 128, Hkv, D) layout, each
// request's block table distinct pages of it, no lse; bf16 with scale mode
// none, fp8 with the anchors' scalar scales (k 0.75, v 1.5; the kernel's
// code path is the same as none). Every launch parameter is computed as
// runtime/ops/sparse_attn_decode.c computes it (splits auto unless AP_SPLITS
// names them, as a tuned launch does; grid padded to whole clusters, shared
// memory, workspace).
#include "graph_time.cuh"
#include <cmath>
#include <cstring>
#include KERNEL

#ifndef AP_TAG
#define AP_TAG "?"
#endif
#ifndef AP_CUT
#define AP_CUT "?"
#endif

namespace {

#ifndef AP_B
#define AP_B 1
#endif
#ifndef AP_SPLITS
#define AP_SPLITS 0
#endif
constexpr int kB = AP_B, kQlen = 1, kHkv = 2, kHq = 32, kTopk = 16, kCtx = 32768;
constexpr int kMaxBlocks = (kCtx + BLOCK_TOKENS - 1) / BLOCK_TOKENS;
constexpr int kBlocks = kB * kMaxBlocks; // every request's block table
constexpr int kPool = kBlocks < 4096 ? 4096 : kBlocks > 32768 ? 32768 : kBlocks;
static_assert(kBlocks <= kPool, "every request's block table takes its own pages");
constexpr int kElem = IS_FP8 ? 1 : 2;
constexpr float kKScale = IS_FP8 ? 0.75f : 1.f, kVScale = IS_FP8 ? 1.5f : 1.f; // scalar mode for fp8
constexpr int kScaleMode = IS_FP8 ? 1 : 0;
static_assert(kHq / kHkv == GROUP && HEAD_DIM == 128, "the variant must be the anchors' d128 g16");
// Layout (pages, 2, 128, Hkv, D): K then V of a page, token-major, heads inside.
constexpr int64_t kStridePage = 2LL * BLOCK_TOKENS * kHkv * HEAD_DIM, kStrideHead = HEAD_DIM,
                  kStrideToken = (int64_t)kHkv * HEAD_DIM, kVOffset = (int64_t)BLOCK_TOKENS * kHkv * HEAD_DIM;
constexpr int64_t kPoolElems = kPool * kStridePage;

// Launcher mirrors (runtime/ops/sparse_attn_decode.c).
constexpr unsigned smem_bytes(int wide_tiles) { // smem_bytes
  const int64_t D = HEAD_DIM, mt = (GROUP + 15) / 16, warps = (int64_t)WARPS_N * mt;
  const int64_t q_bytes = mt * 16 * D * 2, tile = BLOCK_TOKENS * D * 2;
  const int64_t stage = IS_FP8 ? 2 * BLOCK_TOKENS * D + 2 * BLOCK_TOKENS * 4 : 2 * tile;
  const int64_t kv = STAGES * stage + wide_tiles * tile + (wide_tiles == 2 ? BLOCK_TOKENS * 4 : 0),
                combine = warps * 16 * (D + 2) * 4;
  const int64_t recv = CLUSTER > 1 ? (int64_t)GROUP * D * 4 + (int64_t)CLUSTER * GROUP * 8 : 0; // push merge
  return (unsigned)(q_bytes + (kv > combine ? kv : combine) + MAX_TOPK * 8 + recv);
}
// st_sparse_attn_decode_launch_smem_bytes, scale mode none or scalar: k_regs
// 2 reads K and V raw (no widened tile), k_regs 1 widens V, fp8 otherwise
// both.
constexpr unsigned launcher_smem_bytes() { return smem_bytes(!IS_FP8 || K_REGS == 2 ? 0 : K_REGS ? 1 : 2); }
static_assert(launcher_smem_bytes() >= (unsigned)(K_REGS == 2 ? SMEM_BYTES_RAW : SMEM_BYTES),
              "the launcher would give this kernel too little smem");
constexpr int kThreads = 32 * WARPS_N * ((GROUP + 15) / 16);
static_assert(kThreads == THREADS, "block size as the launcher computes it");

int choose_splits(int64_t items, int sm_count) { // auto splits, single algo
  if (AP_SPLITS > 0) return AP_SPLITS;
  const int64_t want = (2 * (int64_t)sm_count + items - 1) / items;
  int64_t s = 1;
  while (2 * s <= want) s *= 2;
  return (int)(s > kTopk ? kTopk : s);
}

size_t align_up(size_t x) { return (x + 255) / 256 * 256; }

// Pool and q values: a hash of the element's index, random sign, moderate
// magnitude, never zero (bf16 [2^-7, 1), e4m3 [0.25, 7.5]).
__host__ __device__ inline uint32_t ap_hash(uint64_t i, uint32_t seed) {
  uint32_t x = (uint32_t)i * 0x9e3779b1u ^ (uint32_t)(i >> 32) * 0x27d4eb2fu ^ seed * 0x85ebca6bu;
  x ^= x >> 16;
  x *= 0x85ebca6bu;
  x ^= x >> 13;
  x *= 0xc2b2ae35u;
  x ^= x >> 16;
  return x;
}
__host__ __device__ inline uint16_t bf16_bits(uint32_t h) {
  return (uint16_t)((h >> 31) << 15 | (120u + (h >> 8) % 7u) << 7 | (h & 0x7fu));
}
__host__ __device__ inline uint8_t e4m3_bits(uint32_t h) {
  return (uint8_t)((h >> 31) << 7 | (5u + (h >> 8) % 5u) << 3 | (h & 7u));
}
constexpr uint32_t kPoolSeed = 0x6b, kQSeed = 0x71;

__global__ void ap_fill_pool(void *pool, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const uint32_t h = ap_hash((uint64_t)i, kPoolSeed);
    if (IS_FP8)
      ((uint8_t *)pool)[i] = e4m3_bits(h);
    else
      ((uint16_t *)pool)[i] = bf16_bits(h);
  }
}

#ifdef CUT_EMPTY
__global__ void ap_null() {}
#endif

uint32_t rng_next(uint64_t &s) { // xorshift64*
  s ^= s >> 12;
  s ^= s << 25;
  s ^= s >> 27;
  return (uint32_t)((s * 0x2545f4914f6cdd1dULL) >> 32);
}

// topk_idx [Hkv][B][topk]: block 0, the last block and 14 distinct others,
// shuffled (as st_attn_make_selection's "random"); block_table [B][256]:
// request r takes entries r * 256 .. of one random permutation of the pool.
void make_indices(std::vector<int32_t> &idx, std::vector<int32_t> &bt, uint64_t seed) {
  uint64_t s = seed;
  idx.assign((size_t)kHkv * kB * kTopk, 0);
  for (int g = 0; g < kHkv; g++)
    for (int r = 0; r < kB; r++) {
      std::vector<int32_t> row = {0, kMaxBlocks - 1};
      while ((int)row.size() < kTopk) {
        const int32_t j = 1 + (int32_t)(rng_next(s) % (kMaxBlocks - 2));
        if (std::find(row.begin(), row.end(), j) == row.end()) row.push_back(j);
      }
      for (int i = kTopk - 1; i > 0; i--) std::swap(row[i], row[rng_next(s) % (i + 1)]);
      std::copy(row.begin(), row.end(), idx.begin() + ((size_t)g * kB + r) * kTopk);
    }
  std::vector<int32_t> perm(kPool);
  for (int i = 0; i < kPool; i++) perm[i] = i;
  for (int i = kPool - 1; i > 0; i--) std::swap(perm[i], perm[rng_next(s) % (i + 1)]);
  bt.assign(perm.begin(), perm.begin() + (size_t)kB * kMaxBlocks);
}

#ifdef CUT_FULL
float bf16_value(uint16_t b) {
  const uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
float e4m3_value(uint8_t b) {
  const float m = std::ldexp(1.f + (b & 7) / 8.f, ((b >> 3) & 15) - 7);
  return (b & 0x80) ? -m : m;
}
float pool_value(int64_t i) {
  const uint32_t h = ap_hash((uint64_t)i, kPoolSeed);
  return IS_FP8 ? e4m3_value(e4m3_bits(h)) : bf16_value(bf16_bits(h));
}

// Relative L2 error of o (bf16 [B][Hq][D]) against softmax(q K^T sm_scale
// k_scale) V v_scale over the selected blocks (all full: context 32768).
double reference_error(const std::vector<uint16_t> &q, const std::vector<int32_t> &idx, const std::vector<int32_t> &bt,
                       const std::vector<uint16_t> &o, float sm_scale) {
  const int n = kTopk * BLOCK_TOKENS;
  std::vector<float> k((size_t)n * HEAD_DIM), v((size_t)n * HEAD_DIM);
  std::vector<double> sc(n);
  double num = 0, den = 0;
  for (int r = 0; r < kB; r++)
    for (int g = 0; g < kHkv; g++) {
      const int32_t *sel = &idx[((size_t)g * kB + r) * kTopk];
      for (int e = 0; e < kTopk; e++)
        for (int t = 0; t < BLOCK_TOKENS; t++)
          for (int d = 0; d < HEAD_DIM; d++) {
            const int64_t at =
                bt[(size_t)r * kMaxBlocks + sel[e]] * kStridePage + g * kStrideHead + t * kStrideToken + d;
            k[((size_t)e * BLOCK_TOKENS + t) * HEAD_DIM + d] = pool_value(at);
            v[((size_t)e * BLOCK_TOKENS + t) * HEAD_DIM + d] = pool_value(at + kVOffset);
          }
      for (int h = g * GROUP; h < (g + 1) * GROUP; h++) {
        const size_t qo = ((size_t)r * kHq + h) * HEAD_DIM;
        double mx = -1e300, l = 0;
        for (int j = 0; j < n; j++) {
          double s = 0;
          for (int d = 0; d < HEAD_DIM; d++) s += (double)bf16_value(q[qo + d]) * k[(size_t)j * HEAD_DIM + d];
          sc[j] = s * sm_scale * kKScale;
          mx = std::max(mx, sc[j]);
        }
        for (int j = 0; j < n; j++) l += (sc[j] = std::exp(sc[j] - mx));
        for (int d = 0; d < HEAD_DIM; d++) {
          double acc = 0;
          for (int j = 0; j < n; j++) acc += sc[j] * v[(size_t)j * HEAD_DIM + d];
          acc = acc / l * kVScale;
          const double got = bf16_value(o[qo + d]);
          num += (got - acc) * (got - acc);
          den += acc * acc;
        }
      }
    }
  return std::sqrt(num / (den > 0 ? den : 1));
}
#endif

} // namespace

int main() {
  const uint64_t seed = 0xa77e;
  printf("# %s %s: seed 0x%llx\n", AP_TAG, AP_CUT, (unsigned long long)seed);
  int dev = 0, sm_count = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, dev));

  // Inputs, once.
  void *pool, *q, *o, *ws;
  int32_t *d_idx, *d_bt, *d_seq;
  CK(cudaMalloc(&pool, (size_t)kPoolElems * kElem));
  ap_fill_pool<<<4 * sm_count, 256>>>(pool, kPoolElems);
  CK(cudaGetLastError());
  std::vector<uint16_t> hq((size_t)kB * kQlen * kHq * HEAD_DIM);
  for (size_t i = 0; i < hq.size(); i++) hq[i] = bf16_bits(ap_hash(i, kQSeed));
  std::vector<int32_t> idx, bt;
  make_indices(idx, bt, seed);
  const std::vector<int32_t> seq(kB, kCtx);
  CK(cudaMalloc(&q, hq.size() * 2));
  CK(cudaMemcpy(q, hq.data(), hq.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&d_idx, idx.size() * 4));
  CK(cudaMemcpy(d_idx, idx.data(), idx.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&d_bt, bt.size() * 4));
  CK(cudaMemcpy(d_bt, bt.data(), bt.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&d_seq, seq.size() * 4));
  CK(cudaMemcpy(d_seq, seq.data(), seq.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&o, hq.size() * 2));
  CK(cudaMemset(o, 0, hq.size() * 2));

  // Plan (st_sparse_attn_decode_plan_make).
  const int64_t rows = (int64_t)kB * kQlen, items = rows * kHkv;
  int splits = choose_splits(items, sm_count);
  const int per_split = (kTopk + splits - 1) / splits;
  splits = (kTopk + per_split - 1) / per_split;
  size_t off = 0, counters_off = 0, part_o_off = 0, part_ml_off = 0;
  if (splits > 1) {
    const size_t states = (size_t)items * splits * GROUP;
    counters_off = off; // single algo
    off = align_up(off + (size_t)items * 4);
    part_o_off = off;
    off = align_up(off + states * HEAD_DIM * 4);
    part_ml_off = off;
    off = align_up(off + states * 2 * 4);
  }
  const size_t ws_bytes = off > 0 ? off : 256;
  CK(cudaMalloc(&ws, ws_bytes));
  CK(cudaMemset(ws, 0, ws_bytes)); // counters start at 0; the merging CTA resets them

  const float sm_scale = 1.f / std::sqrt((float)HEAD_DIM);
  st_sparse_attn_decode_params p;
  memset(&p, 0, sizeof p);
  p.q = q;
  p.q_stride_row = (int64_t)kHq * HEAD_DIM;
  p.q_stride_head = HEAD_DIM;
  p.k_cache = pool;
  p.v_cache = (const char *)pool + kVOffset * kElem;
  p.k_stride_page = p.v_stride_page = kStridePage;
  p.k_stride_head = p.v_stride_head = kStrideHead;
  p.k_stride_token = p.v_stride_token = kStrideToken;
  p.scale_mode = kScaleMode;
  p.score_scale_log2 = (float)((double)sm_scale * 1.4426950408889634 * (kScaleMode == 1 ? (double)kKScale : 1.0));
  p.v_scale = kScaleMode == 1 ? kVScale : 1.f;
  p.topk_idx = d_idx;
  p.idx_stride_head = (int64_t)rows * kTopk;
  p.idx_stride_row = kTopk;
  p.block_table = d_bt;
  p.bt_stride = kMaxBlocks;
  p.seq_lens = d_seq;
  p.o = o;
  p.o_stride_row = (int64_t)kHq * HEAD_DIM;
  p.o_stride_head = HEAD_DIM;
  p.lse = nullptr;
  p.num_requests = kB;
  p.qlen = kQlen;
  p.num_kv_heads = kHkv;
  p.topk = kTopk;
  p.max_blocks = kMaxBlocks;
  p.splits = splits;
  p.blocks_per_split = per_split;
  if (splits > 1) {
    p.counters = (uint32_t *)((char *)ws + counters_off);
    p.part_o = (float *)((char *)ws + part_o_off);
    p.part_ml = (float *)((char *)ws + part_ml_off);
  }
  const dim3 grid((unsigned)((rows * splits + CLUSTER - 1) / CLUSTER * CLUSTER), kHkv, 1);
  const unsigned smem = launcher_smem_bytes();
  if (smem > 48 * 1024 - 1024)
    CK(cudaFuncSetAttribute(st_sparse_attn_decode_main, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  if (CLUSTER > 8) // compile-time __cluster_dims__(16): must be allowed, as the launcher does
    CK(cudaFuncSetAttribute(st_sparse_attn_decode_main, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  CK(cudaDeviceSynchronize());

  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  auto launch = [&](cudaStream_t s) { st_sparse_attn_decode_main<<<grid, THREADS, smem, s>>>(p); };
  launch(st); // one plain launch first: a fault shows here, not inside the graph
  CK(cudaStreamSynchronize(st));
  CK(cudaGetLastError());
  const float us = graph_time_us(st, launch);
  CK(cudaDeviceSynchronize());
  CK(cudaGetLastError());
  // How many of the grid's clusters the device holds at once: fewer than
  // the grid has means waves.
  int max_clusters = 0;
  {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = CLUSTER;
    attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
    cfg.gridDim = grid;
    cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    CK(cudaOccupancyMaxActiveClusters(&max_clusters, st_sparse_attn_decode_main, &cfg));
  }
  printf("ap %s %s %.2f us (splits %d, grid %ux%u, cluster %d, %d threads, %u B smem, %d SMs, %d clusters at once of "
         "%u)\n",
         AP_TAG, AP_CUT, us, splits, grid.x, grid.y, CLUSTER, THREADS, smem, sm_count, max_clusters,
         grid.x / CLUSTER * grid.y);
#ifdef CUT_EMPTY
  const float floor_us = graph_time_us(st, [](cudaStream_t s) { ap_null<<<1, 32, 0, s>>>(); });
  CK(cudaDeviceSynchronize());
  printf("floor %s %.2f us (empty kernel, 1 CTA of 32 threads, no cluster, no smem)\n", AP_TAG, floor_us);
#endif
#ifdef CUT_FULL
  std::vector<uint16_t> got(hq.size());
  CK(cudaMemcpy(got.data(), o, got.size() * 2, cudaMemcpyDeviceToHost));
  const double err = reference_error(hq, idx, bt, got, sm_scale);
  printf("check %s: o rel L2 error %.2e against the host reference (tol 2e-2): %s\n", AP_TAG, err,
         err <= 2e-2 ? "ok" : "WRONG");
  if (!(err <= 2e-2)) return 2;
#endif
  CK(cudaStreamDestroy(st));
  CK(cudaFree(pool));
  CK(cudaFree(q));
  CK(cudaFree(o));
  CK(cudaFree(ws));
  CK(cudaFree(d_idx));
  CK(cudaFree(d_bt));
  CK(cudaFree(d_seq));
  return 0;
}
