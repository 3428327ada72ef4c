// dsa_index_logits.cu - DeepSeek-V3.2's lightning indexer logits for a
// prefill batch (vLLM's fp8_mqa_logits contract):
//   logits[i][j] = sum_h w[i][h] * relu(dot(q[i][h], k[j]) * k_scale[j])
// for ks[i] <= j < ke[i] (clamped to 0..s_kv), -inf for the other j < s_kv.
//
// One launch, grid (ceil(s_q / QUERIES), splits), THREADS threads (CUDA-graph
// safe: the grid comes from s_q, s_kv and the launcher's split count).
// CTA (x, y) scores queries x*QUERIES.. against the y-th slice of
// tiles_per_split TOKENS-row tiles of k. It is a GEMM tile: the mma rows
// are (query, head) pairs, QUERIES x MAX_HEADS of them, the columns tokens,
// the reduction head_dim (128: 8 k-steps of mma.sync m16n8k16, f16 in,
// fp32 accumulate; fp8 e4m3 widens to f16 exactly by cvt).
//  - Warps: warp w takes query slot w / (WARPS_PER_QUERY * TOKEN_GROUPS),
//    head group (w / TOKEN_GROUPS) % WARPS_PER_QUERY (HEAD_TILES row tiles
//    of 16 heads) and token group w % TOKEN_GROUPS (every TOKEN_GROUPS-th
//    16-token step of a tile). Its q rows are read once from global memory
//    into registers as mma A fragments (32 registers a row tile) and kept
//    for every tile of the slice.
//  - K tiles: the tiles of the slice that some query of the CTA sees (a
//    contiguous run: the CTA's union of ranges is taken as one interval) are
//    copied by cp.async into a ring of STAGES buffers, raw fp8 rows (16-byte
//    units swizzled, see st_k_unit) and their scales; the slice's other
//    tiles are written -inf without math.
//  - Scoring: per 16-token step a lane reads 2 x 16 bytes of each of two
//    tokens' rows (the B fragments of 8 k-steps for two 8-token column
//    tiles), widens them and runs 8 k-steps x 2 column tiles x HEAD_TILES
//    mma. Steps no token of which the warp's query sees are skipped. Each
//    lane then scales, applies relu and the weights of its two heads per
//    row tile, and a 4-shuffle reduce-scatter over the 8 lanes of a column
//    sums the 16 heads of every row tile: 16 lanes end with one token's
//    partial logit each, which goes to shared memory.
//  - Writing: after a barrier the CTA sums the head groups' partials, puts
//    -inf outside each query's range and stores its QUERIES rows of the
//    tile with 16-byte stores (scalar ones at a row's end).
//
// Bytes per call: q (s_q*H*128) and the weights once, the k rows and
// scales a CTA's queries see once per query tile (132 bytes a row; from L2
// after the first query tile), logits s_q x s_kv x 4 written once.
// FLOPs: 2 * H * 128 per (query, visible token) on tensor cores (more where
// H is not a multiple of 16 or a tile is partly seen); compute-bound on
// Hopper for long prefills (docs/kernels/dsa_index_logits.md).

// The compile-time constants ST_P_*: rendering puts a variant's values
// in place of this include (generator/render.lua).
#include "defaults/dsa_index_logits.cuh"
constexpr int MAX_HEADS = ST_P_MAX_HEADS;   // heads scored per query (H <= this)
constexpr int QUERIES = ST_P_QUERIES;       // query tokens a CTA scores
constexpr int HEAD_TILES = ST_P_HEAD_TILES; // 16-head row tiles a warp holds
constexpr int TOKENS = ST_P_TOKENS;         // index-K rows of one tile
constexpr int THREADS = ST_P_THREADS;
constexpr int STAGES = ST_P_STAGES; // K tiles in flight

#include "params/dsa_index_logits.h"
#include "common/params_gate.cuh"
#include "common/mma.cuh"
#include "common/smem_tile.cuh" // cp.async, st_e4m3x4_to_f16x2x2, st_lds_v4

ST_PARAMS_GATE(st_dsa_index_logits_params)

constexpr int HEAD_DIM = 128;
constexpr int ROW_UNITS = HEAD_DIM / 16; // 16-byte units of a k row
constexpr int WARPS = THREADS / 32;
constexpr int HEAD_GROUPS = MAX_HEADS / 16 / HEAD_TILES; // warps of one query's heads
constexpr int TOKEN_GROUPS = WARPS / (QUERIES * HEAD_GROUPS);
constexpr int STEP = 16; // tokens of one warp step: two mma column tiles
constexpr int STEPS = TOKENS / STEP;
constexpr int K_TILE_BYTES = TOKENS * HEAD_DIM;
// Registers are capped so that 512 threads share a multiprocessor (128 a
// thread): two CTAs of 256 threads, whose shared memory fits too.
constexpr int MIN_CTAS_PER_SM = 512 / THREADS > 0 ? 512 / THREADS : 1;

static_assert(MAX_HEADS % (16 * HEAD_TILES) == 0 && MAX_HEADS <= 64, "whole row tiles, at most 64 heads");
static_assert(THREADS % 32 == 0 && WARPS % (QUERIES * HEAD_GROUPS) == 0, "warps divide into (query, head group)");
static_assert(TOKEN_GROUPS >= 1 && STEPS % TOKEN_GROUPS == 0, "token groups take whole steps of every tile");
static_assert(TOKENS % STEP == 0 && (TOKENS * ROW_UNITS) % 32 == 0, "whole steps; whole warps of copies");
static_assert(STAGES >= 2, "a tile computed while the next is copied");

// relu that keeps NaN (NaN < 0 is false), as the reference has it.
__device__ __forceinline__ float st_relu(float x) { return x < 0.f ? 0.f : x; }

// Where 16-byte unit u of tile row r sits: u ^ 4 on odd rows. A lane
// (g, c) of a fragment load reads unit ch * 4 + c of row 8n + g; the 8
// lanes of a quarter warp (g = 2m, 2m + 1, c = 0..3) then take 8 distinct
// 16-byte bank groups (rows are 128 bytes, one bank cycle apart).
__device__ __forceinline__ int st_k_unit(int r, int u) { return u ^ ((r & 1) << 2); }

// Tile `tile`'s rows and scales into stage buffer `stage` (rows past s_kv
// as zeros; their logits are never written).
__device__ __forceinline__ void st_copy_tile(const st_dsa_index_logits_params &p, uint8_t *s_k, float *s_scale,
                                             int tile, int stage) {
  const uint32_t k_base = st_smem_addr(s_k + stage * K_TILE_BYTES);
  for (int i = threadIdx.x; i < TOKENS * ROW_UNITS; i += THREADS) {
    const int r = i / ROW_UNITS, u = i % ROW_UNITS, tok = tile * TOKENS + r;
    const bool in = tok < p.s_kv;
    const uint8_t *src = p.k + (in ? (int64_t)tok * p.k_stride + u * 16 : 0);
    st_cp_async16(k_base + r * HEAD_DIM + st_k_unit(r, u) * 16, src, in ? 16 : 0);
  }
  const uint32_t s_base = st_smem_addr(s_scale + stage * TOKENS);
  for (int r = threadIdx.x; r < TOKENS; r += THREADS) {
    const int tok = tile * TOKENS + r;
    const bool in = tok < p.s_kv;
    st_cp_async4(s_base + r * 4, p.k_scale + (in ? tok : 0), in ? 4 : 0);
  }
}

// -inf into row `row`'s tokens [from, to) (from a multiple of 4, to <=
// s_kv), by the CTA's threads: 16-byte stores, scalar ones at the end.
__device__ __forceinline__ void st_fill_neg_inf(const st_dsa_index_logits_params &p, int row, int from, int to) {
  float *out = p.logits + (int64_t)row * p.logit_stride;
  const float ninf = -__int_as_float(0x7f800000);
  for (int j = from + threadIdx.x * 4; j < to; j += THREADS * 4) {
    if (j + 4 <= to) {
      *(float4 *)(out + j) = make_float4(ninf, ninf, ninf, ninf);
    } else {
      for (int e = j; e < to; e++) out[e] = ninf;
    }
  }
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_CTAS_PER_SM)
    st_dsa_index_logits_main(const st_dsa_index_logits_params p) {
  // [STAGES][TOKENS][128] raw fp8 k rows, [STAGES][TOKENS] scales,
  // [QUERIES][HEAD_GROUPS][TOKENS] partial logits
  // (runtime/ops/dsa_index_logits.c st_dsa_index_logits_smem_bytes).
  extern __shared__ __align__(16) uint8_t s_dyn[];
  uint8_t *s_k = s_dyn;
  float *s_scale = (float *)(s_dyn + STAGES * K_TILE_BYTES);
  float *s_part = s_scale + STAGES * TOKENS;
  __shared__ int s_lo[QUERIES], s_hi[QUERIES]; // each query's [lo, hi), empty as lo == hi

  const int q0 = blockIdx.x * QUERIES;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  const int slot = warp / (HEAD_GROUPS * TOKEN_GROUPS);
  const int hgroup = warp / TOKEN_GROUPS % HEAD_GROUPS;
  const int tgroup = warp % TOKEN_GROUPS;
  const int H = p.num_heads;

  if (threadIdx.x < QUERIES) {
    const int i = q0 + threadIdx.x;
    int lo = 0, hi = 0;
    if (i < p.s_q) {
      lo = min(max(p.ks[i], 0), p.s_kv);
      hi = min(max(p.ke[i], 0), p.s_kv);
      if (hi < lo) hi = lo;
    }
    s_lo[threadIdx.x] = lo;
    s_hi[threadIdx.x] = hi;
  }

  // This warp's q rows as A fragments: row tile t holds heads
  // (hgroup * HEAD_TILES + t) * 16 + 0..15; lane (g, c) has rows g (qa) and
  // g + 8 (qb), bytes [ch*64 + c*16, +16) of each, widened: register 2j
  // (2j + 1) of chunk ch is k-step 4ch + j's lower (upper) k half, in the
  // k order the B fragments below use (common/mma.cuh: a k permutation
  // applied to both operands leaves the product unchanged).
  const int i_mine = q0 + slot;
  uint32_t qa[HEAD_TILES][2][8], qb[HEAD_TILES][2][8];
  float wa[HEAD_TILES], wb[HEAD_TILES];
#pragma unroll
  for (int t = 0; t < HEAD_TILES; t++) {
    const int ha = (hgroup * HEAD_TILES + t) * 16 + g, hb = ha + 8;
    wa[t] = i_mine < p.s_q && ha < H ? p.weights[(int64_t)i_mine * p.w_stride_row + ha] : 0.f;
    wb[t] = i_mine < p.s_q && hb < H ? p.weights[(int64_t)i_mine * p.w_stride_row + hb] : 0.f;
#pragma unroll
    for (int ch = 0; ch < 2; ch++) {
      uint4 ra = make_uint4(0, 0, 0, 0), rb = make_uint4(0, 0, 0, 0); // heads past H multiply as zeros
      const uint8_t *row = p.q + (int64_t)i_mine * p.q_stride_row + ch * 64 + c * 16;
      if (i_mine < p.s_q && ha < H) ra = *(const uint4 *)(row + (int64_t)ha * p.q_stride_head);
      if (i_mine < p.s_q && hb < H) rb = *(const uint4 *)(row + (int64_t)hb * p.q_stride_head);
      st_e4m3x4_to_f16x2x2(ra.x, qa[t][ch][0], qa[t][ch][1]);
      st_e4m3x4_to_f16x2x2(ra.y, qa[t][ch][2], qa[t][ch][3]);
      st_e4m3x4_to_f16x2x2(ra.z, qa[t][ch][4], qa[t][ch][5]);
      st_e4m3x4_to_f16x2x2(ra.w, qa[t][ch][6], qa[t][ch][7]);
      st_e4m3x4_to_f16x2x2(rb.x, qb[t][ch][0], qb[t][ch][1]);
      st_e4m3x4_to_f16x2x2(rb.y, qb[t][ch][2], qb[t][ch][3]);
      st_e4m3x4_to_f16x2x2(rb.z, qb[t][ch][4], qb[t][ch][5]);
      st_e4m3x4_to_f16x2x2(rb.w, qb[t][ch][6], qb[t][ch][7]);
    }
  }
  __syncthreads(); // s_lo, s_hi

  // Row tiles with a head below H, and head groups with one (the others
  // neither score nor write partials).
  const int live_groups = (H + 16 * HEAD_TILES - 1) / (16 * HEAD_TILES);
  int lo_all = p.s_kv, hi_all = 0;
#pragma unroll
  for (int s = 0; s < QUERIES; s++)
    if (s_lo[s] < s_hi[s]) {
      lo_all = min(lo_all, s_lo[s]);
      hi_all = max(hi_all, s_hi[s]);
    }
  const int tiles = (p.s_kv + TOKENS - 1) / TOKENS;
  const int slice_first = blockIdx.y * p.tiles_per_split;
  const int slice_last = min(slice_first + p.tiles_per_split, tiles);
  if (slice_first >= slice_last) return;
  int first = slice_last, last = slice_last; // the tiles some query sees
  if (lo_all < hi_all) {
    first = max(slice_first, lo_all / TOKENS);
    last = min(slice_last, (hi_all + TOKENS - 1) / TOKENS);
    if (first > last) first = last;
  }

  // The slice's tiles no query of the CTA sees: -inf, no math.
  for (int s = 0; s < QUERIES && q0 + s < p.s_q; s++) {
    st_fill_neg_inf(p, q0 + s, slice_first * TOKENS, min(first * TOKENS, p.s_kv));
    st_fill_neg_inf(p, q0 + s, last * TOKENS, min(slice_last * TOKENS, p.s_kv));
  }
  const int n = last - first;
  if (n <= 0) return;

  const int my_lo = s_lo[slot], my_hi = s_hi[slot];
#pragma unroll
  for (int s = 0; s < STAGES - 1; s++) {
    if (s < n) st_copy_tile(p, s_k, s_scale, first + s, s);
    st_cp_async_commit();
  }
  for (int it = 0; it < n; it++) {
    st_cp_async_wait<STAGES - 2>();
    __syncthreads(); // tile it is in; stage (it - 1) % STAGES and s_part are free
    if (it + STAGES - 1 < n) st_copy_tile(p, s_k, s_scale, first + it + STAGES - 1, (it + STAGES - 1) % STAGES);
    st_cp_async_commit();
    const int stage = it % STAGES, tile = first + it;
    const uint32_t k_tile = st_smem_addr(s_k + stage * K_TILE_BYTES);
    const float *sc = s_scale + stage * TOKENS;
    float *part = s_part + (slot * HEAD_GROUPS + hgroup) * TOKENS;

    for (int step = tgroup; hgroup < live_groups && step < STEPS; step += TOKEN_GROUPS) {
      const int n0 = step * STEP, tok0 = tile * TOKENS + n0;
      if (tok0 + STEP <= my_lo || tok0 >= my_hi) continue; // nothing here this query sees
      float acc[HEAD_TILES][2][4];
#pragma unroll
      for (int t = 0; t < HEAD_TILES; t++)
#pragma unroll
        for (int nt = 0; nt < 2; nt++) acc[t][nt][0] = acc[t][nt][1] = acc[t][nt][2] = acc[t][nt][3] = 0.f;
#pragma unroll
      for (int ch = 0; ch < 2; ch++) {
#pragma unroll
        for (int nt = 0; nt < 2; nt++) {
          const int r = n0 + nt * 8 + g;
          const uint4 raw = st_lds_v4(k_tile + r * HEAD_DIM + st_k_unit(r, ch * 4 + c) * 16);
          uint32_t b[8];
          st_e4m3x4_to_f16x2x2(raw.x, b[0], b[1]);
          st_e4m3x4_to_f16x2x2(raw.y, b[2], b[3]);
          st_e4m3x4_to_f16x2x2(raw.z, b[4], b[5]);
          st_e4m3x4_to_f16x2x2(raw.w, b[6], b[7]);
#pragma unroll
          for (int t = 0; t < HEAD_TILES; t++) {
            if ((hgroup * HEAD_TILES + t) * 16 >= H) continue; // no head of this row tile
#pragma unroll
            for (int j = 0; j < 4; j++)
              st_mma_f16_16816(acc[t][nt], qa[t][ch][2 * j], qb[t][ch][2 * j], qa[t][ch][2 * j + 1],
                               qb[t][ch][2 * j + 1], b[2 * j], b[2 * j + 1]);
          }
        }
      }
      // acc[t][nt][e]: head row g (e < 2) or g + 8 (e >= 2), token
      // n0 + nt*8 + 2c + (e & 1). Heads past H are left out, not weighted
      // by zero: a zero product times an infinite scale would be NaN.
      float x[2][2];
#pragma unroll
      for (int nt = 0; nt < 2; nt++) {
        const float2 s2 = *(const float2 *)(sc + n0 + nt * 8 + 2 * c);
        const float scl[2] = {s2.x, s2.y};
#pragma unroll
        for (int e = 0; e < 2; e++) {
          float v = 0.f;
#pragma unroll
          for (int t = 0; t < HEAD_TILES; t++) {
            const int ha = (hgroup * HEAD_TILES + t) * 16 + g;
            if (ha < H) v += wa[t] * st_relu(acc[t][nt][e] * scl[e]);
            if (ha + 8 < H) v += wb[t] * st_relu(acc[t][nt][2 + e] * scl[e]);
          }
          x[nt][e] = v;
        }
      }
      // Reduce-scatter over the column's 8 lanes (g): after the xor-4
      // exchange lane g keeps column tile nt = g & 1, after xor 8 token
      // e = (g >> 1) & 1 of it, and xor 16 completes the sum.
      const int keep_nt = g & 1, keep_e = (g >> 1) & 1;
      const float send0 = keep_nt ? x[0][0] : x[1][0], send1 = keep_nt ? x[0][1] : x[1][1];
      const float y0 = (keep_nt ? x[1][0] : x[0][0]) + __shfl_xor_sync(0xffffffffu, send0, 4);
      const float y1 = (keep_nt ? x[1][1] : x[0][1]) + __shfl_xor_sync(0xffffffffu, send1, 4);
      float z = (keep_e ? y1 : y0) + __shfl_xor_sync(0xffffffffu, keep_e ? y0 : y1, 8);
      z += __shfl_xor_sync(0xffffffffu, z, 16);
      if (g < 4) part[n0 + keep_nt * 8 + 2 * c + keep_e] = z;
    }
    __syncthreads(); // every head group's partials of the tile

    // Rows of the tile: the head groups' sum inside each query's range,
    // -inf outside it. Tokens a warp skipped hold stale partials; they are
    // outside the range and never read.
    const float ninf = -__int_as_float(0x7f800000);
    for (int idx = threadIdx.x; idx < QUERIES * (TOKENS / 4); idx += THREADS) {
      const int s = idx / (TOKENS / 4), j = idx % (TOKENS / 4) * 4, tok = tile * TOKENS + j;
      if (q0 + s >= p.s_q || tok >= p.s_kv) continue;
      const int lo = s_lo[s], hi = s_hi[s];
      float v[4];
#pragma unroll
      for (int e = 0; e < 4; e++) {
        float sum = 0.f;
        for (int hg = 0; hg < live_groups; hg++) sum += s_part[(s * HEAD_GROUPS + hg) * TOKENS + j + e];
        v[e] = tok + e >= lo && tok + e < hi ? sum : ninf;
      }
      float *out = p.logits + (int64_t)(q0 + s) * p.logit_stride + tok;
      if (tok + 4 <= p.s_kv) {
        *(float4 *)out = make_float4(v[0], v[1], v[2], v[3]);
      } else {
#pragma unroll
        for (int e = 0; e < 4; e++)
          if (tok + e < p.s_kv) out[e] = v[e];
      }
    }
  }
}
