// timeline_probe.cu - where one replay of an index_decode split variant
// spends its time, CTA by CTA (standalone, nvcc; not part of the product).
// The kernel source comes from `sparsetune generate --print` with ST_TL
// marks added by make_timeline_probe.sh: thread 0 of each CTA of the main
// kernel records %globaltimer at its start, when the request's length has
// arrived, after the setup barrier (pages and q loaded), when each of its
// first four blocks' bytes have arrived (bulk variants), and after its key
// stores; its %smid too; the merge's CTAs record their start, the length's
// arrival and their end. Inputs as the anchors' decode rows (fp8, D 128,
// H 2, topk 16, init 1, local 2, qlen 1, every request at ctx, a pool of
// max(4096, B * ctx / 128) pages, block tables uniformly random over it);
// main then merge in one CUDA graph, timed as graph_time.cuh does, and the
// marks of the last replay printed relative to its first CTA's start.
//   make_timeline_probe.sh builds build/tl_<tag>; run: tl_<tag> B CTX SPLITS [PDL]
// (PDL 1, the default: the merge launched programmatically, as the runtime
// does; 0: a plain launch).
// (thirty-sixth session: fp8 B = 8 32K's main kernel takes ~9.5 us of a
// replay where a plain gather of its bytes takes ~6).
#include <cstdint>
__device__ unsigned long long *st_tl_main, *st_tl_merge;
#define ST_TL_SLOTS 16
#define ST_TL_AT(buf, cta, k)                                                                                          \
  do {                                                                                                                 \
    if (threadIdx.x == 0) {                                                                                            \
      unsigned long long t_;                                                                                           \
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_));                                                           \
      (buf)[(cta)*ST_TL_SLOTS + (k)] = t_;                                                                             \
    }                                                                                                                  \
  } while (0)
#define ST_TL(k) ST_TL_AT(st_tl_main, blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z), k)
#define ST_TLM(k) ST_TL_AT(st_tl_merge, blockIdx.x + gridDim.x * blockIdx.y, k)
#define ST_TL_SMID()                                                                                                   \
  do {                                                                                                                 \
    unsigned s_;                                                                                                       \
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s_));                                                                    \
    if (threadIdx.x == 0)                                                                                              \
      st_tl_main[(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)) * ST_TL_SLOTS + 8] = s_;             \
  } while (0)
#include "graph_time.cuh"
#include KERNEL
#include <cstring>
#include <random>

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s B CTX SPLITS [PDL]\n", argv[0]);
    return 2;
  }
  const int B = atoi(argv[1]), ctx = atoi(argv[2]), splits = atoi(argv[3]);
  const int pdl = argc > 4 ? atoi(argv[4]) : 1; // the merge launched programmatically
  const int H = 2, D = HEAD_DIM, max_blocks = ctx / 128, cols = HEADS_PER_CTA * MAX_QLEN, groups = H / HEADS_PER_CTA;
  const int pages = std::max(4096, std::min(B * max_blocks, 65536));
  std::mt19937 rng(36);
  std::vector<uint8_t> pool((size_t)pages * 128 * D * ELEM_BYTES), hq((size_t)B * H * D * ELEM_BYTES);
  // Finite e4m3 bytes; bf16 from uniform floats in [-1, 1) (masked bytes
  // would give bf16 so few distinct values that block maxima tie and the
  // merge's selection runs its slow tie paths).
  auto fill = [&](std::vector<uint8_t> &v) {
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (size_t i = 0; i < v.size(); i += ELEM_BYTES) {
      if (ELEM_BYTES == 1) {
        v[i] = (uint8_t)(rng() & 0x77);
      } else {
        const float f = u(rng);
        uint32_t bits;
        memcpy(&bits, &f, 4);
        v[i] = (uint8_t)(bits >> 16);
        v[i + 1] = (uint8_t)(bits >> 24);
      }
    }
  };
  fill(pool);
  fill(hq);
  std::vector<int> bt((size_t)B * max_blocks), seq(B, ctx);
  for (auto &v : bt) v = (int)(rng() % pages);
  void *k, *q, *ws;
  int *d_bt, *d_seq, *out;
  CK(cudaMalloc(&k, pool.size()));
  CK(cudaMemcpy(k, pool.data(), pool.size(), cudaMemcpyHostToDevice));
  CK(cudaMalloc(&q, hq.size()));
  CK(cudaMemcpy(q, hq.data(), hq.size(), cudaMemcpyHostToDevice));
  CK(cudaMalloc(&d_bt, bt.size() * 4));
  CK(cudaMemcpy(d_bt, bt.data(), bt.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&d_seq, B * 4));
  CK(cudaMemcpy(d_seq, seq.data(), B * 4, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&out, (size_t)H * B * 16 * 4));
  const size_t ws_bytes = 4096 + (size_t)B * H * max_blocks * 4;
  CK(cudaMalloc(&ws, ws_bytes));
  CK(cudaMemset(ws, 0, ws_bytes));
  const int nctas = splits * B * groups, nmerge = B * groups;
  unsigned long long *tl, *tlm;
  CK(cudaMalloc(&tl, (size_t)nctas * ST_TL_SLOTS * 8));
  CK(cudaMalloc(&tlm, (size_t)nmerge * ST_TL_SLOTS * 8));
  CK(cudaMemcpyToSymbol(st_tl_main, &tl, sizeof tl));
  CK(cudaMemcpyToSymbol(st_tl_merge, &tlm, sizeof tlm));
  st_index_decode_params p = {};
  p.q = q;
  p.k_cache = k;
  p.block_table = d_bt;
  p.seq_lens = d_seq;
  p.topk_idx = out;
  p.counters = (uint32_t *)ws;
  p.block_keys = (uint32_t *)((char *)ws + 4096);
  p.q_stride_row = H * D;
  p.q_stride_head = D;
  p.k_stride_page = 128 * D;
  p.k_stride_token = D;
  p.bt_stride = max_blocks;
  p.out_stride_head = (int64_t)B * 16;
  p.out_stride_row = 16;
  p.num_requests = B;
  p.qlen = 1;
  p.num_heads = H;
  p.topk = 16;
  p.init_blocks = 1;
  p.local_blocks = 2;
  p.max_blocks = max_blocks;
  p.splits = splits;
  p.chunk_cap = (max_blocks + splits - 1) / splits;
  p.sel_cols = std::min(cols, 8192 / max_blocks);
  const int stage_off = ((MAX_COLS + 1) * p.chunk_cap * 4 + 127) / 128 * 128;
  const int smem = BULK_STAGES > 0 ? stage_off + BULK_STAGES * BLOCK_BYTES : (cols + 1) * p.chunk_cap * 4;
  const int merge_smem = p.sel_cols * max_blocks * 4;
  CK(cudaFuncSetAttribute(st_index_decode_main, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  const float us = graph_time_us(st, [&](cudaStream_t s) {
    st_index_decode_main<<<dim3(splits, B, groups), THREADS, smem, s>>>(p);
    if (pdl) { // as runtime/ops/launch.c launches the merge
      cudaLaunchAttribute attr = {};
      attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr.val.programmaticStreamSerializationAllowed = 1;
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(B, groups);
      cfg.blockDim = dim3(THREADS);
      cfg.dynamicSmemBytes = merge_smem;
      cfg.stream = s;
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
      CK(cudaLaunchKernelEx(&cfg, st_index_decode_merge, p));
    } else {
      st_index_decode_merge<<<dim3(B, groups), THREADS, merge_smem, s>>>(p);
    }
  });
  CK(cudaDeviceSynchronize());
  std::vector<unsigned long long> t((size_t)nctas * ST_TL_SLOTS), tm((size_t)nmerge * ST_TL_SLOTS);
  CK(cudaMemcpy(t.data(), tl, t.size() * 8, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(tm.data(), tlm, tm.size() * 8, cudaMemcpyDeviceToHost));
  unsigned long long t0 = ~0ull;
  for (int c = 0; c < nctas; c++) t0 = std::min(t0, t[c * ST_TL_SLOTS]);
  auto rel = [&](unsigned long long v) { return (double)(v - t0) / 1e3; };
  printf("B %d ctx %d splits %d pdl %d: %d CTAs of %d threads, smem %d; replay %.2f us\n", B, ctx, splits, pdl, nctas,
         THREADS, smem, us);
  const char *names[] = {"start", "length", "setup", "block0", "block1", "block2", "block3", "end"};
  const int marks = BULK_STAGES > 0 ? 8 : 3;
  for (int m = 0; m < 8; m++) {
    if (m >= marks && m != 7) continue;
    std::vector<double> v;
    for (int c = 0; c < nctas; c++)
      if (t[c * ST_TL_SLOTS + m] >= t0) v.push_back(rel(t[c * ST_TL_SLOTS + m]));
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    printf("  main %-7s us: min %6.2f  p10 %6.2f  median %6.2f  p90 %6.2f  max %6.2f\n", names[m], v[0],
           v[v.size() / 10], v[v.size() / 2], v[v.size() * 9 / 10], v.back());
  }
  // Intervals per CTA: the setup chain and each block's wait.
  const int steps[][2] = {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}, {6, 7}};
  for (auto &s : steps) {
    if (BULK_STAGES == 0 && s[1] > 2 && s[1] != 7) continue;
    std::vector<double> v;
    for (int c = 0; c < nctas; c++) {
      const unsigned long long a = t[c * ST_TL_SLOTS + s[0]], b = t[c * ST_TL_SLOTS + s[1]];
      if (a >= t0 && b >= a) v.push_back((double)(b - a) / 1e3);
    }
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    printf("  %-7s -> %-7s us: min %5.2f median %5.2f p90 %5.2f max %5.2f\n", names[s[0]], names[s[1]], v[0],
           v[v.size() / 2], v[v.size() * 9 / 10], v.back());
  }
  // CTAs per SM, and how many are running at each half microsecond.
  std::vector<int> per_sm(256, 0);
  for (int c = 0; c < nctas; c++) per_sm[t[c * ST_TL_SLOTS + 8] & 255]++;
  int lo = 1 << 30, hi = 0, used = 0;
  for (int x : per_sm)
    if (x) lo = std::min(lo, x), hi = std::max(hi, x), used++;
  printf("  SMs used %d, CTAs an SM %d..%d\n", used, lo, hi);
  // Do CTAs that share their SM with more CTAs end later (the scoring is
  // the SM's issue, not the memory's)? Median end by the SM's CTA count.
  for (int n = lo; n <= hi && used; n++) {
    std::vector<double> v;
    for (int c = 0; c < nctas; c++)
      if (per_sm[t[c * ST_TL_SLOTS + 8] & 255] == n) v.push_back(rel(t[c * ST_TL_SLOTS + 7]));
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    printf("  SMs of %d CTAs: %zu CTAs, end median %.2f, max %.2f us\n", n, v.size(), v[v.size() / 2], v.back());
  }
  printf("  running:");
  for (double x = 0; x < 16; x += 0.5) {
    int n = 0;
    for (int c = 0; c < nctas; c++) n += rel(t[c * ST_TL_SLOTS]) <= x && rel(t[c * ST_TL_SLOTS + 7]) > x;
    printf(" %.1f:%d", x, n);
  }
  printf("\n");
  double ms = 1e9, ml = 0, me = 0;
  for (int c = 0; c < nmerge; c++) {
    ms = std::min(ms, rel(tm[c * ST_TL_SLOTS]));
    ml = std::max(ml, rel(tm[c * ST_TL_SLOTS + 1]));
    me = std::max(me, rel(tm[c * ST_TL_SLOTS + 2]));
  }
  printf("  merge: first start %.2f, last length %.2f, last end %.2f us\n", ms, ml, me);
  return 0;
}
