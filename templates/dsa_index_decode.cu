// dsa_index_decode.cu - DeepSeek-V3.2's lightning indexer for a decode
// batch: token logits over the paged fp8 index-K cache, then the top-k
// tokens of each query token.
//
// Query token t of request r (row r*qlen + t) sits at p = seq - qlen + t
// (seq = min(seq_lens[r], max_context)) and sees tokens 0..p;
//   logit(k) = sum_h w[row][h] * relu(scale_k * dot(q[row][h], kv_k))
// with kv_k token k's 128 fp8 values and scale_k its fp32 scale. The top
// min(topk, p + 1) positions are written to topk_idx[row], -1 after them.
//
// Two launches (CUDA-graph safe: grids from R, qlen and the launcher's
// split count only):
//  st_dsa_index_decode_main, grid (splits, R), THREADS threads. CTA (s, r)
//   takes the s-th of `splits` slices (whole 16-token tiles) of request r's
//   seq tokens, for every query token of r, so each index-K row is read
//   once per request. The CTA first widens q (fp8 -> f16, exact) of its
//   qlen x H heads into shared memory in mma B-fragment order, and the
//   weights beside it. A warp then scores one 16-token tile at a time
//   (TILES_IN_FLIGHT tiles loaded before any is computed): tokens are the
//   16 rows of mma.sync m16n8k16 (f16 in, fp32 accumulate; K rows loaded
//   straight from the pages into A fragments and widened from e4m3 in
//   registers), heads the 8-wide columns (H / 8 column tiles), head_dim
//   the k dimension (8 k-steps). Each lane then holds, per tile, two
//   tokens x two heads of each column tile: it scales, applies relu and
//   the weights, sums its heads, and a 4-lane shuffle sums the rest; lane
//   c = 0 stores the token's logit (fp32) to the workspace row.
//   Tensor cores, but not the fp8 ones: Hopper runs mma.sync e4m3 through
//   f16 (wgmma is its fp8 path), so this family widens once itself.
//  st_dsa_index_decode_merge, grid (R*qlen), MERGE_THREADS threads: one
//   CTA selects one row's top-k by radix select on the logits' order-
//   preserving 32-bit keys (common/radix_topk_row.cuh over the keys of
//   common/score_key.cuh; NaN as -inf): three
//   passes of 12-, 10- and 10-bit digits, each a shared-memory histogram
//   of the keys that still match the prefix and a CTA-wide scan from the
//   top, settle the k-th key exactly; then every key above it is emitted
//   in any order, and of the keys equal to it the lowest positions, by a
//   running count in position order (ties as the reference breaks them).
//   Rows that see no more than topk tokens are written without reading a
//   logit. A row of up to stage_cap (32K) logits is read once into shared
//   memory and every pass runs there. A longer row: with MERGE_FILTER, the
//   first pass reads it from L2, a second read emits the keys above the
//   k-th key's 12-bit bin and stages that bin's keys and positions (the
//   candidates, if at most cand_cap) for the last two passes; otherwise
//   all five passes read the row from L2.
//
// Bytes per call: the visible index-K rows once (132 bytes a token: values
// and scale), q (R*qlen*H*128) and weights, the logits written once and
// read 1 (staged), 2 (filtered) or 5 times (4 bytes a token and query
// token), topk_idx.
// FLOPs: 2 * H * 128 per visible token and query token (the products), on
// tensor cores; the op is bound by the index-K bytes on Hopper
// (docs/kernels/dsa_index_decode.md).

// The compile-time constants ST_P_*: rendering puts a variant's values
// in place of this include (generator/render.lua).
#include "defaults/dsa_index_decode.cuh"
constexpr int MAX_HEADS = ST_P_MAX_HEADS;
constexpr int MAX_QLEN = ST_P_MAX_QLEN;
constexpr int THREADS = ST_P_THREADS;
constexpr int TILES_IN_FLIGHT = ST_P_TILES_IN_FLIGHT;
constexpr int MERGE_THREADS = ST_P_MERGE_THREADS;
// 1: the merge stages a long row's candidates (the k-th key's first-digit
// bin) in shared memory after one pass (below, "the merge"); 0: every pass
// reads the row.
constexpr int MERGE_FILTER = ST_P_MERGE_FILTER;

#include "params/dsa_index_decode.h"
#include "common/params_gate.cuh"
#include "common/load.cuh"
#include "common/mma.cuh"
#include "common/smem_tile.cuh" // st_e4m3x4_to_f16x2x2
#include "common/radix_topk_row.cuh"
#include "common/pdl.cuh"

ST_PARAMS_GATE(st_dsa_index_decode_params)

constexpr int HEAD_DIM = 128;
constexpr int TILE = 16;              // tokens of one mma row tile
constexpr int NT = MAX_HEADS / 8;     // head column tiles
constexpr int CHUNKS = HEAD_DIM / 64; // 64-byte pieces of a row: 4 lanes x 16 bytes
constexpr int WARPS = THREADS / 32;
constexpr int SCALE_OFFSET = HEAD_DIM; // a page's scales start at page_size * this

// CTAs of the main kernel a multiprocessor must hold at once: the
// launcher's one-wave split rule counts 512 threads an SM
// (runtime/ops/dsa_index_decode.c, ST_DSA_SM_THREADS), so registers are
// capped to allow it (128 a thread).
constexpr int SM_THREADS = 512;
constexpr int MIN_CTAS_PER_SM = SM_THREADS / THREADS > 0 ? SM_THREADS / THREADS : 1;

static_assert(MAX_HEADS % 8 == 0 && MAX_HEADS <= 64, "whole mma column tiles, at most 64 heads");
static_assert(THREADS % 32 == 0 && MERGE_THREADS % 32 == 0, "whole warps");
static_assert(MAX_QLEN >= 1 && MAX_QLEN <= 4, "speculative decode: 1..4 query tokens");

// relu that keeps NaN (NaN < 0 is false): a NaN product makes the logit
// NaN, which ranks as -inf, as the reference has it.
__device__ __forceinline__ float st_relu(float x) { return x < 0.f ? 0.f : x; }

// q in shared memory: per query token t, column tile nt, chunk ch and half
// hf, 32 lanes x 16 bytes, lane (g, c) holding the f16 words of bytes
// [ch*64 + c*16 + hf*8, +8) of head nt*8 + g widened (4 words): the B
// fragments of the mma k-steps 4*ch + 2*hf and + 1, in the k order the
// K rows' A fragments use (common/mma.cuh: a k permutation applied to both
// operands leaves the product unchanged). A warp's read of one (t, nt, ch,
// hf) is 512 contiguous bytes: no bank conflict.
__device__ __forceinline__ int st_q_slot(int t, int nt, int ch, int hf, int lane) {
  return (((t * NT + nt) * CHUNKS + ch) * 2 + hf) * 32 + lane;
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_CTAS_PER_SM) st_dsa_index_decode_main(const st_dsa_index_decode_params p) {
  // [qlen][NT][CHUNKS][2][32] uint4 q fragments, then [qlen][MAX_HEADS]
  // fp32 weights (runtime/ops/dsa_index_decode.c sizes it for p.qlen).
  extern __shared__ __align__(16) uint4 s_dyn[];
  const int split = blockIdx.x, r = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, gq = lane >> 2, cq = lane & 3;
  st_pdl_wait(); // common/pdl.cuh: nothing global before this
  const int seq = min(p.seq_lens[r], p.max_context);
  // A request whose every row sees at most topk tokens needs no logit: the
  // merge writes its positions alone. Padding rows (seq <= 0) too.
  if (seq <= p.topk) return;
  const int qlen = p.qlen;
  // Slices of whole tiles, by this request's own length (device data, but
  // only the work of a CTA depends on it, never the grid).
  const int per = (seq + p.splits - 1) / p.splits;
  const int chunk = (per + TILE - 1) / TILE * TILE;
  const int lo = split * chunk;
  if (lo >= seq) return;
  const int hi = min(lo + chunk, seq);

  uint4 *s_q = s_dyn;
  float *s_w = (float *)(s_dyn + qlen * NT * CHUNKS * 2 * 32);
  for (int i = threadIdx.x; i < qlen * NT * CHUNKS * 32; i += THREADS) {
    const int l = i & 31, ch = (i >> 5) % CHUNKS, nt = (i >> 5) / CHUNKS % NT, t = (i >> 5) / CHUNKS / NT;
    const int h = nt * 8 + (l >> 2);
    uint4 raw = make_uint4(0, 0, 0, 0); // heads past H multiply as zeros
    if (h < p.num_heads)
      raw = *(const uint4 *)(p.q + (int64_t)(r * qlen + t) * p.q_stride_row + (int64_t)h * p.q_stride_head + ch * 64 +
                             (l & 3) * 16);
    uint32_t w[8];
    st_e4m3x4_to_f16x2x2(raw.x, w[0], w[1]);
    st_e4m3x4_to_f16x2x2(raw.y, w[2], w[3]);
    st_e4m3x4_to_f16x2x2(raw.z, w[4], w[5]);
    st_e4m3x4_to_f16x2x2(raw.w, w[6], w[7]);
    s_q[st_q_slot(t, nt, ch, 0, l)] = make_uint4(w[0], w[1], w[2], w[3]);
    s_q[st_q_slot(t, nt, ch, 1, l)] = make_uint4(w[4], w[5], w[6], w[7]);
  }
  for (int i = threadIdx.x; i < qlen * MAX_HEADS; i += THREADS) {
    const int t = i / MAX_HEADS, h = i % MAX_HEADS;
    s_w[i] = h < p.num_heads ? p.weights[(int64_t)(r * qlen + t) * p.w_stride_row + h] : 0.f;
  }
  __syncthreads();

  const int32_t *bt = p.block_table + (int64_t)r * p.bt_stride;
  const int ntiles = (hi - lo + TILE - 1) / TILE;
  for (int base = warp; base < ntiles; base += WARPS * TILES_IN_FLIGHT) {
    // Rows gq and gq + 8 of each tile: 16 bytes of each 64-byte chunk (the
    // A fragments) and the token's scale. Every load of the batch is
    // issued before any product.
    uint4 a[TILES_IN_FLIGHT][CHUNKS][2];
    float sc[TILES_IN_FLIGHT][2];
#pragma unroll
    for (int u = 0; u < TILES_IN_FLIGHT; u++) {
#pragma unroll
      for (int hf = 0; hf < 2; hf++) {
        const int tok = lo + (base + u * WARPS) * TILE + gq + 8 * hf;
        sc[u][hf] = 0.f;
#pragma unroll
        for (int ch = 0; ch < CHUNKS; ch++) a[u][ch][hf] = make_uint4(0, 0, 0, 0);
        if (tok < hi) {
          const uint8_t *page = p.k_cache + (int64_t)bt[tok / p.page_size] * p.page_stride;
          const int off = tok % p.page_size;
#pragma unroll
          for (int ch = 0; ch < CHUNKS; ch++) a[u][ch][hf] = st_ld_stream16(page + off * HEAD_DIM + ch * 64 + cq * 16);
          sc[u][hf] = __ldg((const float *)(page + p.page_size * SCALE_OFFSET) + off);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < TILES_IN_FLIGHT; u++) {
      const int tile = base + u * WARPS;
      if (tile >= ntiles) break;
      // The tile's K rows as f16 pairs: row gq (l16) and gq + 8 (h16),
      // word k of chunk ch = bytes 2k, 2k+1 of the lane's 16.
      uint32_t l16[CHUNKS][8], h16[CHUNKS][8];
#pragma unroll
      for (int ch = 0; ch < CHUNKS; ch++) {
        const uint4 x = a[u][ch][0], y = a[u][ch][1];
        st_e4m3x4_to_f16x2x2(x.x, l16[ch][0], l16[ch][1]);
        st_e4m3x4_to_f16x2x2(x.y, l16[ch][2], l16[ch][3]);
        st_e4m3x4_to_f16x2x2(x.z, l16[ch][4], l16[ch][5]);
        st_e4m3x4_to_f16x2x2(x.w, l16[ch][6], l16[ch][7]);
        st_e4m3x4_to_f16x2x2(y.x, h16[ch][0], h16[ch][1]);
        st_e4m3x4_to_f16x2x2(y.y, h16[ch][2], h16[ch][3]);
        st_e4m3x4_to_f16x2x2(y.z, h16[ch][4], h16[ch][5]);
        st_e4m3x4_to_f16x2x2(y.w, h16[ch][6], h16[ch][7]);
      }
      const int tok0 = lo + tile * TILE + gq;
      // Unrolled to MAX_QLEN: the query tokens' products are independent
      // chains on the same A fragments.
#pragma unroll
      for (int t = 0; t < MAX_QLEN; t++) {
        if (t >= qlen) break;
        float acc[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
          acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
          if (nt * 8 >= p.num_heads) continue;
#pragma unroll
          for (int ch = 0; ch < CHUNKS; ch++) {
            const uint4 b0 = s_q[st_q_slot(t, nt, ch, 0, lane)], b1 = s_q[st_q_slot(t, nt, ch, 1, lane)];
            st_mma_f16_16816(acc[nt], l16[ch][0], h16[ch][0], l16[ch][1], h16[ch][1], b0.x, b0.y);
            st_mma_f16_16816(acc[nt], l16[ch][2], h16[ch][2], l16[ch][3], h16[ch][3], b0.z, b0.w);
            st_mma_f16_16816(acc[nt], l16[ch][4], h16[ch][4], l16[ch][5], h16[ch][5], b1.x, b1.y);
            st_mma_f16_16816(acc[nt], l16[ch][6], h16[ch][6], l16[ch][7], h16[ch][7], b1.z, b1.w);
          }
        }
        // acc[nt][0..1]: token gq, heads nt*8 + 2cq + {0,1}; [2..3]: token
        // gq + 8. Heads past H are left out, not weighted by zero: a zero
        // product times an infinite scale would be NaN.
        float lg0 = 0.f, lg1 = 0.f;
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
#pragma unroll
          for (int i = 0; i < 2; i++) {
            const int h = nt * 8 + 2 * cq + i;
            if (h >= p.num_heads) continue;
            const float w = s_w[t * MAX_HEADS + h];
            lg0 += w * st_relu(acc[nt][i] * sc[u][0]);
            lg1 += w * st_relu(acc[nt][2 + i] * sc[u][1]);
          }
        }
        lg0 += __shfl_xor_sync(0xffffffffu, lg0, 1);
        lg0 += __shfl_xor_sync(0xffffffffu, lg0, 2);
        lg1 += __shfl_xor_sync(0xffffffffu, lg1, 1);
        lg1 += __shfl_xor_sync(0xffffffffu, lg1, 2);
        const int pos = seq - qlen + t;
        float *out = p.logits + (int64_t)(r * qlen + t) * p.logit_stride;
        if (cq == 0 && tok0 < hi && tok0 <= pos) out[tok0] = lg0;
        if (cq == 0 && tok0 + 8 < hi && tok0 + 8 <= pos) out[tok0 + 8] = lg1;
      }
    }
  }
}

// ---- the merge: one row's top-k (common/radix_topk_row.cuh) -----------------

// Grid (R*qlen), MERGE_THREADS threads. Dynamic shared memory: the row's
// keys when it has at most stage_cap logits; else (MERGE_FILTER) the
// candidates' keys and positions, cand_cap of each.
extern "C" __global__ void __launch_bounds__(MERGE_THREADS, 1)
    st_dsa_index_decode_merge(const st_dsa_index_decode_params p) {
  extern __shared__ __align__(16) uint32_t s_merge[];
  __shared__ st_radix_smem<MERGE_THREADS> sm;
  const int row = blockIdx.x, r = row / p.qlen, t = row % p.qlen;
  st_pdl_wait(); // launched programmatically after the main kernel: its logits
  const int seq = min(p.seq_lens[r], p.max_context);
  const int n = seq > 0 ? max(seq - p.qlen + t + 1, 0) : 0; // tokens this row sees
  int32_t *out = p.topk_idx + (int64_t)row * p.out_stride_row;
  if (n <= p.topk) {
    for (int i = threadIdx.x; i < p.topk; i += MERGE_THREADS) out[i] = i < n ? i : -1;
    return;
  }
  // The main kernel of this launch wrote the logits: the row reads them
  // from L2.
  st_radix_topk_row<MERGE_THREADS, MERGE_FILTER>(p.logits + (int64_t)row * p.logit_stride, n, p.topk, p.stage_cap,
                                                 p.cand_cap, out, 0, s_merge, sm);
}
