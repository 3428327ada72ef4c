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
//   preserving 32-bit keys (common/score_key.cuh; NaN as -inf): four 8-bit
//   passes, each a shared-memory histogram of the keys that still match
//   the prefix, settle the k-th key exactly; then every key above it is
//   emitted in any order, and of the keys equal to it the lowest
//   positions, by a running count in position order (ties as the
//   reference breaks them). Rows that see no more than topk tokens are
//   written without reading a logit. A row's keys stay in shared memory
//   between passes when the launcher's stage_cap holds them (rows up to
//   32K tokens); longer rows are read from L2 in each of the six passes.
//
// Bytes per call: the visible index-K rows once (132 bytes a token: values
// and scale), q (R*qlen*H*128) and weights, the logits written once and
// read 2 (staged) to 6 times (4 bytes a token and query token), topk_idx.
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

#include "params/dsa_index_decode.h"
#include "common/load.cuh"
#include "common/mma.cuh"
#include "common/smem_tile.cuh" // st_e4m3x4_to_f16x2x2
#include "common/score_key.cuh"
#include "common/pdl.cuh"

constexpr int HEAD_DIM = 128;
constexpr int TILE = 16;              // tokens of one mma row tile
constexpr int NT = MAX_HEADS / 8;     // head column tiles
constexpr int CHUNKS = HEAD_DIM / 64; // 64-byte pieces of a row: 4 lanes x 16 bytes
constexpr int WARPS = THREADS / 32;
constexpr int MERGE_WARPS = MERGE_THREADS / 32;
constexpr int RADIX_BINS = 256;        // 8-bit digits
constexpr int SCALE_OFFSET = HEAD_DIM; // a page's scales start at page_size * this

// CTAs of the main kernel a multiprocessor must hold at once: the
// launcher's one-wave split rule counts 512 threads an SM
// (runtime/ops/dsa_index_decode.c, ST_DSA_SM_THREADS), so registers are
// capped to allow it (128 a thread).
constexpr int SM_THREADS = 512;
constexpr int MIN_CTAS_PER_SM = SM_THREADS / THREADS > 0 ? SM_THREADS / THREADS : 1;

static_assert(MAX_HEADS % 8 == 0 && MAX_HEADS <= 64, "whole mma column tiles, at most 64 heads");
static_assert(THREADS % 32 == 0 && MERGE_THREADS % 32 == 0, "whole warps");
static_assert(MERGE_THREADS >= 64 && MERGE_THREADS <= 1024, "the merge's warp counts fit one warp's scan");
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

// The selection's shared state.
struct st_merge_smem {
  uint32_t hist[RADIX_BINS];
  uint32_t warp_count[MERGE_WARPS];
  uint32_t prefix, want, emitted;
};

// A logit's key. + 0 turns -0 into +0 (round to nearest): the two are
// one value to the contract, so they must tie and go by position, as in
// the reference, not rank by their sign bit.
__device__ __forceinline__ uint32_t st_logit_key_of(float logit) { return st_score_key(logit + 0.f); }

// Key of logit i of the row: from shared memory once staged, else from L2
// (the main kernel of this launch wrote it).
__device__ __forceinline__ uint32_t st_logit_key(const float *row, const uint32_t *staged, bool is_staged, int i) {
  return is_staged ? staged[i] : st_logit_key_of(__ldcg(row + i));
}

extern "C" __global__ void __launch_bounds__(MERGE_THREADS)
    st_dsa_index_decode_merge(const st_dsa_index_decode_params p) {
  extern __shared__ __align__(16) uint32_t s_keys[]; // stage_cap keys
  __shared__ st_merge_smem sm;
  const int row = blockIdx.x, r = row / p.qlen, t = row % p.qlen;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  st_pdl_wait(); // launched programmatically after the main kernel: its logits
  const int seq = min(p.seq_lens[r], p.max_context);
  const int n = seq > 0 ? max(seq - p.qlen + t + 1, 0) : 0; // tokens this row sees
  int32_t *out = p.topk_idx + (int64_t)row * p.out_stride_row;
  if (n <= p.topk) {
    for (int i = threadIdx.x; i < p.topk; i += MERGE_THREADS) out[i] = i < n ? i : -1;
    return;
  }
  const float *lg = p.logits + (int64_t)row * p.logit_stride;
  const bool staged = n <= p.stage_cap;

  // Radix select: after the pass at `shift`, prefix holds the k-th key's
  // digits from bit 31 down to shift, and want the keys still to take
  // among those equal to it so far.
  uint32_t prefix = 0, mask = 0, want = (uint32_t)p.topk;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < RADIX_BINS; b += MERGE_THREADS) sm.hist[b] = 0u;
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += MERGE_THREADS) {
      uint32_t k;
      if (shift == 24) {
        k = st_logit_key_of(__ldcg(lg + i));
        if (staged) s_keys[i] = k;
      } else {
        k = st_logit_key(lg, s_keys, staged, i);
      }
      if ((k & mask) == prefix) atomicAdd(&sm.hist[(k >> shift) & (RADIX_BINS - 1)], 1u);
    }
    __syncthreads();
    if (warp == 0) {
      // Lane l holds bins 255 - 8l .. 248 - 8l (highest first); a scan of
      // the lanes' sums gives the keys in bins above each lane's.
      uint32_t c[8], sum = 0;
#pragma unroll
      for (int j = 0; j < 8; j++) {
        c[j] = sm.hist[RADIX_BINS - 1 - 8 * lane - j];
        sum += c[j];
      }
      uint32_t incl = sum;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const uint32_t v = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += v;
      }
      uint32_t above = incl - sum;
      if (above < want && want <= incl) {
#pragma unroll
        for (int j = 0; j < 8; j++) {
          if (above + c[j] >= want) {
            sm.prefix = prefix | ((uint32_t)(RADIX_BINS - 1 - 8 * lane - j) << shift);
            sm.want = want - above;
            break;
          }
          above += c[j];
        }
      }
    }
    __syncthreads();
    prefix = sm.prefix;
    want = sm.want;
    mask |= (uint32_t)(RADIX_BINS - 1) << shift;
  }
  // prefix is now the k-th largest key; topk - want keys lie above it.
  if (threadIdx.x == 0) sm.emitted = 0u;
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += MERGE_THREADS)
    if (st_logit_key(lg, s_keys, staged, i) > prefix) out[atomicAdd(&sm.emitted, 1u)] = i;
  // The `want` lowest positions whose key equals the k-th: a running count
  // over the row in position order, one CTA-wide step of MERGE_THREADS.
  const int first = p.topk - (int)want;
  int taken = 0;
  for (int base = 0; base < n && taken < (int)want; base += MERGE_THREADS) {
    const int i = base + threadIdx.x;
    const bool eq = i < n && st_logit_key(lg, s_keys, staged, i) == prefix;
    const uint32_t ballot = __ballot_sync(0xffffffffu, eq);
    if (lane == 0) sm.warp_count[warp] = (uint32_t)__popc(ballot);
    __syncthreads();
    int before = 0, total = 0;
    for (int w = 0; w < MERGE_WARPS; w++) {
      const int v = (int)sm.warp_count[w];
      before += w < warp ? v : 0;
      total += v;
    }
    const int rank = taken + before + __popc(ballot & ((1u << lane) - 1u));
    if (eq && rank < (int)want) out[first + rank] = i;
    taken += total;
    __syncthreads(); // warp_count is rewritten in the next step
  }
}
