// phase_probe.cu - times one rendered index_decode variant with stages cut
// out, to place where a launch's time goes (standalone, nvcc; not part of
// the product). The kernel source comes from `sparsetune generate --print`,
// with #ifdef SKIP_SCORE / SKIP_SELECT / SKIP_MERGE markers added around the
// scoring loop, the merge's selection and the whole merge; build one binary
// per marker set:
//   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -I templates \
//        -DKERNEL='"k.cuh"' [-DSKIP_...] phase_probe.cu   (make_phase_probes.sh does it)
// Run: phase_probe CTX SPLITS...  (B = 1, H = 2, D = 128 bf16, topk 16,
// init 1, local 2; pool, random block table and graph-replay timing as in
// ../../shared/anchors.md).
#include "graph_time.cuh"
#include KERNEL

int main(int argc, char **argv) {
  const int ctx = atoi(argv[1]), H = 2, D = 128, pool = 4096, R = 1;
  const int max_blocks = ctx / 128;
  std::vector<uint16_t> hk((size_t)pool * 128 * D);
  srand(11);
  for (auto &v : hk) v = (uint16_t)(0x3c00 + (rand() % 512) - 256) ^ (rand() & 0x8000); // bf16 of moderate magnitude, both signs
  void *k, *q, *ws;
  int *bt, *seq, *out;
  CK(cudaMalloc(&k, hk.size() * 2));
  CK(cudaMemcpy(k, hk.data(), hk.size() * 2, cudaMemcpyHostToDevice));
  std::vector<int> perm(pool);
  for (int i = 0; i < pool; i++) perm[i] = i;
  for (int i = pool - 1; i > 0; i--) std::swap(perm[i], perm[rand() % (i + 1)]);
  CK(cudaMalloc(&bt, pool * 4));
  CK(cudaMemcpy(bt, perm.data(), pool * 4, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&seq, 4));
  CK(cudaMemcpy(seq, &ctx, 4, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&q, H * D * 2));
  CK(cudaMemcpy(q, hk.data() + 12345, H * D * 2, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&out, H * 16 * 4));
  const size_t ws_bytes = 4096 + (size_t)R * H * max_blocks * 4;
  CK(cudaMalloc(&ws, ws_bytes));
  CK(cudaMemset(ws, 0, ws_bytes));
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  for (int a = 2; a < argc; a++) {
    const int splits = atoi(argv[a]);
    const int cols = HEADS_PER_CTA * MAX_QLEN, groups = H / HEADS_PER_CTA;
    st_index_decode_params p = {};
    p.q = q; p.k_cache = k; p.block_table = bt; p.seq_lens = seq; p.topk_idx = out;
    p.counters = (uint32_t *)ws; p.block_keys = (uint32_t *)((char *)ws + 4096);
    p.q_stride_row = H * D; p.q_stride_head = D; p.k_stride_page = 128 * D; p.k_stride_token = D;
    p.bt_stride = pool; p.out_stride_head = 16; p.out_stride_row = 16;
    p.num_requests = R; p.qlen = 1; p.num_heads = H; p.topk = 16; p.init_blocks = 1; p.local_blocks = 2;
    p.max_blocks = max_blocks; p.splits = splits; p.chunk_cap = (max_blocks + splits - 1) / splits;
    p.sel_cols = std::min(cols, 8192 / max_blocks);
    const int smem = std::max((cols + 1) * p.chunk_cap * 4, p.sel_cols * max_blocks * 4);
    CK(cudaFuncSetAttribute(st_index_decode_main, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const float us = graph_time_us(st, [&](cudaStream_t s) {
      st_index_decode_main<<<dim3(splits, R, groups), THREADS, smem, s>>>(p);
    });
    printf("ctx %6d splits %4d ctas %4d: %7.2f us\n", ctx, splits, splits * groups, us);
  }
  return 0;
}
