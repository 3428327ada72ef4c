// score_tile.cuh - the prefill indexer's scoring loop with Hopper wgmma,
// shared by index_score (which stores each block score) and index_prefill
// (which keeps each row's best blocks instead).
//
// The including template defines IS_FP8, HEAD_DIM, ROWS, WARPGROUPS and
// STAGES, and includes params/index_score.h first.
//
// A CTA scores tiles of consecutive query tokens of ONE request, all H
// index heads of each: ROWS rows (token, head) = ROWS / H tokens, the rows
// of the matrix product's A operand (q rows are [token][head][D], so the
// tile is a plain run of rows). Which (tile, block) pairs a CTA takes is
// the schedule, chosen by the launcher (p.balanced):
// - chunks: grid (tile slots, block chunks); slot x names the x-th tile of
//   the batch in request order, heaviest (last) tile of each request first;
//   y takes chunk_blocks consecutive blocks of it, so a long prefix spreads
//   over many CTAs. Slots and chunks past the tile's work return at once.
//   index_prefill's fused lists are per chunk, so it always runs this one.
// - balanced: one CTA per SM; the batch's (tile, visible block) pairs,
//   numbered in request order, tiles in position order, are split into
//   gridDim.x equal runs (common/score_work.h counts them in closed form),
//   and a CTA walks its run across tiles and requests, reloading its q rows
//   at each new tile. Causal tiles of unequal length then end together,
//   where whole chunks left the last wave of CTAs part-empty (8192 tokens
//   after a 57344 prefix: 4.4 waves of 63-block chunks).
//
// Per block: its 128 K rows (one KV page, through block_table) stream into
// one of STAGES shared-memory stages by tensor-map copies (p.k_map),
// swizzled for wgmma; each warpgroup multiplies its MT 64-row slices of q
// by them (m64n128k16 bf16 / m64n128k32 e4m3, K-major operands in shared
// memory)
// and reduces every row's 128 products to their max (masked past the
// token's position in its own block). K is read once per CTA for all ROWS
// rows: 2 * ROWS FLOP per K byte from L2.
#ifndef ST_SCORE_TILE_CUH
#define ST_SCORE_TILE_CUH

#include "common/smem_tile.cuh"
#include "common/mbarrier.cuh"
#include "common/wgmma.cuh"
#include "common/score_work.h"

constexpr int BLOCK_TOKENS = 128;
constexpr int COMPUTE_THREADS = 128 * WARPGROUPS;
constexpr int THREADS = COMPUTE_THREADS + 32; // and one copying warp
constexpr int MT = ROWS / (64 * WARPGROUPS); // 64-row slices per warpgroup
constexpr int ELEM_BYTES = IS_FP8 ? 1 : 2;
constexpr int ROW_BYTES = HEAD_DIM * ELEM_BYTES;
constexpr int PANELS = ROW_BYTES / 128;    // 128-byte swizzle panels per row
constexpr int ROW_CHUNKS = ROW_BYTES / 16; // 16-byte copies per row
constexpr int KSTEPS = ROW_BYTES / 32;     // wgmma k-steps (32 bytes each)
constexpr int Q_BYTES = ROWS * ROW_BYTES;
constexpr int STAGE_BYTES = BLOCK_TOKENS * ROW_BYTES;

static_assert(ROW_BYTES % 128 == 0 && KSTEPS == 4 * PANELS, "rows of whole 128-byte swizzle panels, 4 k-steps each");
static_assert(MT >= 1 && MT <= 2 && MT * 64 * WARPGROUPS == ROWS, "one or two 64-row slices per warpgroup");
static_assert(STAGES >= 2, "at least double buffering");

// Inclusive sum of v over the CTA; `scratch` holds a value per warp.
template <class T> __device__ __forceinline__ T st_cta_inclusive_sum(T v, T *scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const T u = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += u;
  }
  if (lane == 31) scratch[warp] = v;
  __syncthreads();
  for (int w = 0; w < warp; w++) v += scratch[w];
  __syncthreads();
  return v;
}

struct st_score_tile {
  int req;   // -1: slot past the batch's tiles
  int start; // first query token of the tile (global index)
  int ntok;  // its tokens (<= ROWS / H)
  int pos0;  // absolute position of its first token
};

// Slot x -> the tile: request r has ceil(q_len / tokens) tiles; slots count
// them in request order, each request's last tile first.
__device__ st_score_tile st_find_tile(const st_index_score_params &p, int tokens, int x) {
  __shared__ int s_scan[THREADS / 32];
  __shared__ int s_req, s_k, s_carry;
  if (threadIdx.x == 0) {
    s_req = -1;
    s_k = 0;
    s_carry = 0;
  }
  __syncthreads();
  for (int base = 0; base < p.num_requests; base += THREADS) {
    const int r = base + threadIdx.x;
    int n = 0;
    if (r < p.num_requests) n = (p.cu_seqlens_q[r + 1] - p.cu_seqlens_q[r] + tokens - 1) / tokens;
    const int incl = st_cta_inclusive_sum(n, s_scan);
    const int before = s_carry + incl - n;
    if (x >= before && x < before + n) {
      s_req = r;
      s_k = x - before;
    }
    __syncthreads();
    if (threadIdx.x == THREADS - 1) s_carry += incl;
    __syncthreads();
    if (s_req >= 0) break;
  }
  st_score_tile t;
  t.req = s_req;
  t.start = t.ntok = t.pos0 = 0;
  if (t.req < 0) return t;
  const int start = p.cu_seqlens_q[t.req], qlen = p.cu_seqlens_q[t.req + 1] - start;
  const int ntiles = (qlen + tokens - 1) / tokens;
  const int first = (ntiles - 1 - s_k) * tokens; // heaviest first
  t.start = start + first;
  t.ntok = min(tokens, qlen - first);
  t.pos0 = p.seq_lens[t.req] - qlen + first;
  return t;
}

// Visible blocks of a token at absolute position pos.
__device__ __forceinline__ int st_visible_blocks(const st_index_score_params &p, int pos) {
  return pos >= 0 ? min(pos / BLOCK_TOKENS + 1, p.max_blocks) : 0;
}

// The 128 K rows of block j (one page) into a stage: one tensor-map copy
// per 128-byte panel (p.k_map's boxes: 128 bytes of each of the page's 128
// rows, written with the 128-byte swizzle wgmma reads), by one thread, the
// stage's bytes announced on its `full` barrier. cp.async by the 32 lanes
// of a warp cost the tensor cores a quarter of their rate
// (a probe of this loop, H100: 717-730 against 955-982 TFLOP/s).
__device__ __forceinline__ void st_load_k_block(const st_index_score_params &p, int req, int j, uint32_t stage,
                                                uint32_t full) {
  const int page = __ldg(p.block_table + (int64_t)req * p.bt_stride + j);
  st_mbar_arrive_expect_tx(full, STAGE_BYTES);
#pragma unroll
  for (int c = 0; c < PANELS; c++)
    st_tma_load_3d(stage + c * BLOCK_TOKENS * 128, &p.k_map, c * (128 / ELEM_BYTES), 0, page, full);
}

// Rows [row0, row0 + nrows) of the tile's q (row = token * 2^head_shift + head), by
// `nthreads` threads numbered `tid`; rows past the tile are zeros.
__device__ __forceinline__ void st_load_q_rows(const st_index_score_params &p, const st_score_tile &t, uint32_t s_q,
                                               int row0, int nrows, int tid, int nthreads) {
  for (int e = tid; e < nrows * ROW_CHUNKS; e += nthreads) {
    const int row = row0 + e / ROW_CHUNKS, c = e % ROW_CHUNKS;
    const int tok = row >> p.head_shift, h = row & ((1 << p.head_shift) - 1);
    const bool ok = tok < t.ntok && h < p.num_heads; // padding heads load zeros
    const char *src = (const char *)p.q;
    if (ok) src += ((int64_t)(t.start + tok) * p.q_stride_row + (int64_t)h * p.q_stride_head) * ELEM_BYTES + c * 16;
    st_cp_async16(s_q + st_panel_offset(ROWS, row, c), src, ok ? 16 : 0);
  }
}

// A k-step's descriptors are the first k-step's plus a constant: the
// start address field holds bytes / 16, and shared addresses stay below
// 256 KiB, so adding offset / 16 never carries out of the field. (Building
// each descriptor from its address took ~15 instructions a k-step.)
__device__ __forceinline__ void st_score_mma(float (&d)[64], uint64_t a_desc, uint64_t b_desc) {
#pragma unroll
  for (int ks = 0; ks < KSTEPS; ks++) {
    const uint32_t koff = (uint32_t)((ks & 3) * 32); // within a panel
    const uint64_t a = a_desc + (((ks >> 2) * ROWS * 128 + koff) >> 4);
    const uint64_t b = b_desc + (((ks >> 2) * BLOCK_TOKENS * 128 + koff) >> 4);
    if constexpr (IS_FP8) st_wgmma_m64n128k32_e4m3(d, a, b, ks > 0);
    else st_wgmma_m64n128k16_bf16(d, a, b, ks > 0);
  }
}

// The row a lane stores. The four lanes of a quad hold the same rows' 128
// columns between them (two rows a slice: lo and hi = lo + 8), so they take
// the quad's 2 MT rows in turn: lane q stores slot q, row lo (q even) or hi
// (q odd) of slice q / 2, and keeps that row for the whole tile.
struct st_score_own {
  int row, tok, h;
  int nb; // blocks the row's token sees; 0: the lane has no row (MT = 1, q >= 2) or the tile no such token
};

// row_base: the first row of the warp's 16 in slice 0.
__device__ __forceinline__ st_score_own st_score_own_row(const st_index_score_params &p, const st_score_tile &t,
                                                         int row_base) {
  const int q = threadIdx.x & 3;
  st_score_own o;
  o.row = row_base + (q >> 1) * 64 + (threadIdx.x & 31) / 4 + (q & 1) * 8;
  o.tok = o.row >> p.head_shift;
  o.h = o.row & ((1 << p.head_shift) - 1);
  o.nb = (q >> 1) < MT && o.tok < t.ntok && o.h < p.num_heads ? st_visible_blocks(p, t.pos0 + o.tok) : 0;
  return o;
}

// Last visible column of block j for the token of `row` (127: all of it).
__device__ __forceinline__ int st_last_col(const st_index_score_params &p, const st_score_tile &t, int row, int j) {
  const int pos = t.pos0 + (row >> p.head_shift);
  return pos >= j * BLOCK_TOKENS + BLOCK_TOKENS - 1 ? BLOCK_TOKENS - 1 : pos - j * BLOCK_TOKENS;
}

// Slice m's 64 x 128 products of block j (rows row0 + lane / 4 and 8
// more): each row's max over the columns its token sees, over the quad's
// four lanes, handed by the row's own lane to out(tok, head, row, j, max)
// if block j is visible to its token. All 32 lanes must call.
template <class RowOut>
__device__ __forceinline__ void st_score_epilogue(const st_index_score_params &p, const st_score_tile &t,
                                                  const float (&d)[64], int row0, int m, int j,
                                                  const st_score_own &own, RowOut &out) {
  const int lane = threadIdx.x & 31;
  float lo = __int_as_float(0xff800000), hi = lo; // -inf
  if (j * BLOCK_TOKENS + BLOCK_TOKENS - 1 <= t.pos0) { // every token of the tile sees the whole block
#pragma unroll
    for (int n = 0; n < 16; n++) {
      lo = fmaxf(lo, fmaxf(d[4 * n], d[4 * n + 1]));
      hi = fmaxf(hi, fmaxf(d[4 * n + 2], d[4 * n + 3]));
    }
  } else {
    const int r_lo = row0 + lane / 4;
    const int lim_lo = st_last_col(p, t, r_lo, j), lim_hi = st_last_col(p, t, r_lo + 8, j);
#pragma unroll
    for (int n = 0; n < 16; n++) {
#pragma unroll
      for (int e = 0; e < 2; e++) {
        const int col = 8 * n + 2 * (lane & 3) + e;
        if (col <= lim_lo) lo = fmaxf(lo, d[4 * n + e]);
        if (col <= lim_hi) hi = fmaxf(hi, d[4 * n + 2 + e]);
      }
    }
  }
  lo = fmaxf(lo, __shfl_xor_sync(0xffffffffu, lo, 1));
  hi = fmaxf(hi, __shfl_xor_sync(0xffffffffu, hi, 1));
  lo = fmaxf(lo, __shfl_xor_sync(0xffffffffu, lo, 2));
  hi = fmaxf(hi, __shfl_xor_sync(0xffffffffu, hi, 2));
  const int q = lane & 3;
  if ((q >> 1) == m && j < own.nb) out(own.tok, own.h, own.row, j, (q & 1) ? hi : lo);
}

// ---- the walk over (tile, block) pairs ------------------------------------

// Where a CTA stands: tile t, its next block j and its end nb (the tile's
// visible blocks; under the chunk schedule the chunk's end). Under the
// balanced schedule, t is tile `tile` of its request's `ntiles` in
// position order.
struct st_score_cursor {
  st_score_tile t;
  int tile, ntiles, j, nb;
};

// What a unit of the compute loop in flight scores: block j of tile t.
struct st_score_unit {
  st_score_tile t;
  int j;
};

// Tiles of request r under the balanced schedule: none where seq_len <
// q_len (outside the contract: positions before 0; score_work.h counts no
// pairs there either).
__device__ __forceinline__ int st_request_tiles(const st_index_score_params &p, int tokens, int r) {
  const int qlen = p.cu_seqlens_q[r + 1] - p.cu_seqlens_q[r];
  if (qlen <= 0 || p.seq_lens[r] < qlen) return 0;
  return (qlen + tokens - 1) / tokens;
}

// Pairs of request r (0 past the batch).
__device__ __forceinline__ int64_t st_request_work(const st_index_score_params &p, int tokens, int r) {
  if (r >= p.num_requests) return 0;
  const int qlen = p.cu_seqlens_q[r + 1] - p.cu_seqlens_q[r];
  return st_score_tiles_work((int64_t)p.seq_lens[r] - qlen, qlen, tokens, p.max_blocks,
                             st_request_tiles(p, tokens, r));
}

__device__ __forceinline__ void st_cursor_at_tile(const st_index_score_params &p, int tokens, int r, int i,
                                                  st_score_cursor &c) {
  const int start = p.cu_seqlens_q[r], qlen = p.cu_seqlens_q[r + 1] - start;
  c.t.req = r;
  c.t.start = start + i * tokens;
  c.t.ntok = min(tokens, qlen - i * tokens);
  c.t.pos0 = p.seq_lens[r] - qlen + i * tokens;
  c.tile = i;
  c.j = 0;
  c.nb = st_visible_blocks(p, c.t.pos0 + c.t.ntok - 1);
}

// The next pair; called only while the CTA's run holds one, so under the
// chunk schedule j never passes the chunk, and under the balanced one the
// walk never passes the batch's last pair.
__device__ __forceinline__ void st_cursor_next(const st_index_score_params &p, int tokens, st_score_cursor &c) {
  if (++c.j < c.nb) return;
  int r = c.t.req, i = c.tile + 1;
  for (;;) {
    while (i >= c.ntiles) {
      if (++r >= p.num_requests) return;
      i = 0;
      c.ntiles = st_request_tiles(p, tokens, r);
    }
    st_cursor_at_tile(p, tokens, r, i, c);
    if (c.nb > 0) return;
    i++;
  }
}

// The balanced schedule's start: CTA b of G takes pairs [W b / G,
// W (b + 1) / G) of the batch's W. Sets the cursor on the first and returns
// how many; every thread of the CTA must call (two scans over the requests).
__device__ int64_t st_balanced_start(const st_index_score_params &p, int tokens, st_score_cursor &c) {
  __shared__ int64_t s_scan[THREADS / 32], s_batch, s_off;
  __shared__ int s_req;
  int64_t total = 0;
  for (int base = 0; base < p.num_requests; base += THREADS) {
    const int64_t incl = st_cta_inclusive_sum(st_request_work(p, tokens, base + threadIdx.x), s_scan);
    if (threadIdx.x == THREADS - 1) s_batch = incl;
    __syncthreads();
    total += s_batch;
    __syncthreads();
  }
  const int64_t lo = total * blockIdx.x / gridDim.x, hi = total * (blockIdx.x + 1) / gridDim.x;
  if (lo >= hi) return 0;

  if (threadIdx.x == 0) s_req = -1;
  int64_t before_batch = 0;
  for (int base = 0; base < p.num_requests; base += THREADS) {
    const int r = base + threadIdx.x;
    const int64_t w = st_request_work(p, tokens, r);
    const int64_t before = before_batch + st_cta_inclusive_sum(w, s_scan) - w;
    if (w > 0 && lo >= before && lo < before + w) {
      s_req = r;
      s_off = lo - before;
    }
    if (threadIdx.x == THREADS - 1) s_batch = before + w;
    __syncthreads();
    before_batch = s_batch;
    const bool found = s_req >= 0;
    __syncthreads();
    if (found) break;
  }
  const int r = s_req;
  const int64_t off = s_off;
  if (r < 0) return 0; // unreachable: lo < total
  // The tile of the run's first pair: the last m with work(first m tiles) <= off.
  const int qlen = p.cu_seqlens_q[r + 1] - p.cu_seqlens_q[r];
  const int64_t pos0 = (int64_t)p.seq_lens[r] - qlen;
  c.ntiles = st_request_tiles(p, tokens, r);
  int m_lo = 0, m_hi = c.ntiles - 1;
  while (m_lo < m_hi) {
    const int mid = (m_lo + m_hi + 1) / 2;
    if (st_score_tiles_work(pos0, qlen, tokens, p.max_blocks, mid) <= off) m_lo = mid;
    else m_hi = mid - 1;
  }
  st_cursor_at_tile(p, tokens, r, m_lo, c);
  c.j = (int)(off - st_score_tiles_work(pos0, qlen, tokens, p.max_blocks, m_lo));
  return hi - lo;
}

// ---- synchronization (stage barriers: mbarrier.cuh) -------------------------

// Named barriers 3 and 4: one warpgroup's threads alone (its q rows reloaded).
__device__ __forceinline__ void st_warpgroup_sync(int wg) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(3 + wg) : "memory");
}

// ---- the loop ------------------------------------------------------------
//
// Warps 0 .. 4*WARPGROUPS-1 compute; one thread of the last warp only
// copies K blocks, STAGES ahead: it waits for a stage's `empty` barrier
// (every compute thread has finished its products on the block there) and
// starts the next block's tensor-map copies, which complete the stage's
// `full` barrier by their bytes (they write through the async proxy that
// wgmma reads, so no proxy fence). Each warpgroup keeps two units of
// products in flight (two accumulator sets), so its row maxima and stores
// run while its next products occupy the tensor cores; the warpgroups need
// no turns.
//
// st_score_blocks runs it for the CTA: its run of (tile, block) pairs
// under the launcher's schedule. Every (row, visible block) max goes to
// out(tok, head, row, j, max), always from the same lane for a row of a
// tile (st_score_own). Returns true on the compute threads of a CTA
// that had blocks to score (after their last call of out), false on the
// copying warp and on every thread of a CTA with nothing to do; *tile gets
// the tile, updated before the first out() of each new tile.
template <class RowOut>
__device__ __forceinline__ bool st_score_blocks(const st_index_score_params &p, uint8_t *s_raw, st_score_tile *tile,
                                                RowOut &out) {
  __shared__ __align__(8) uint64_t s_full[STAGES], s_empty[STAGES];
  const int tokens = ROWS >> p.head_shift;
  st_score_cursor c = {};
  int n;
  if (p.balanced) {
    n = (int)st_balanced_start(p, tokens, c);
  } else {
    c.t = st_find_tile(p, tokens, blockIdx.x);
    if (c.t.req < 0) return false;
    c.j = blockIdx.y * p.chunk_blocks;
    c.nb = min(c.j + p.chunk_blocks, st_visible_blocks(p, c.t.pos0 + c.t.ntok - 1));
    n = c.nb - c.j;
  }
  if (n <= 0) return false;
  *tile = c.t;

  // Swizzle atoms must sit on 1024-byte boundaries (the launcher adds the slack).
  const uint32_t s_q = (st_smem_addr(s_raw) + 1023u) & ~1023u;
  const uint32_t s_k = s_q + Q_BYTES;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; s++) {
      st_mbar_init(st_smem_addr(&s_full[s]), 1);
      st_mbar_init(st_smem_addr(&s_empty[s]), COMPUTE_THREADS);
    }
    st_mbar_init_fence();
  }
  st_load_q_rows(p, c.t, s_q, 0, ROWS, threadIdx.x, THREADS);
  st_cp_async_commit();
  st_cp_async_wait<0>();
  st_fence_proxy_async();
  __syncthreads(); // q tile and barriers ready for every thread

  if (threadIdx.x >= COMPUTE_THREADS) { // the copying warp: one thread, on its own walk
    if (threadIdx.x > COMPUTE_THREADS) return false;
    for (int i = 0; i < n; i++) {
      const int s = i % STAGES;
      if (i >= STAGES) st_mbar_wait(st_smem_addr(&s_empty[s]), (i / STAGES - 1) & 1);
      st_load_k_block(p, c.t.req, c.j, s_k + s * STAGE_BYTES, st_smem_addr(&s_full[s]));
      if (i + 1 < n) st_cursor_next(p, tokens, c);
    }
    return false;
  }

  // Units u = i * MT + m (block i, slice m) in a two-deep pipeline: unit
  // u + 1's products are issued into the other accumulators before unit
  // u's row maxima are taken, so the tensor cores keep working while this
  // warpgroup reduces and stores. With MT = 2 the even units are slice 0
  // and the odd ones slice 1, so every slice index below is a constant.
  // wg through a shuffle from lane 0: ptxas then knows it is warp-uniform
  // and keeps the descriptors built from it in uniform registers.
  const int wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0);
  const int row_base = wg * MT * 64 + ((threadIdx.x / 32) & 3) * 16;
  constexpr int M_ODD = MT == 2 ? 1 : 0;
  const int units = n * MT;
  int q_start = c.t.start; // the tile whose q rows are in shared memory
  float acc0[64], acc1[64];
  st_score_unit u0, u1; // what acc0 and acc1 hold
  uint64_t a_desc[MT];
#pragma unroll
  for (int m = 0; m < MT; m++) a_desc[m] = st_wgmma_desc(s_q + (wg * MT + m) * 64 * 128);
  const uint64_t b_desc0 = st_wgmma_desc(s_k);
  auto issue = [&](int u, float(&acc)[64], st_score_unit &unit, int m) {
    const int i = u / MT;
    if (m == 0) {
      if (i > 0) {
        st_cursor_next(p, tokens, c);
        if (c.t.start != q_start) { // a new tile (balanced schedule): reload this warpgroup's q
          st_wgmma_wait<0>();       // rows once no product in flight reads them
          st_load_q_rows(p, c.t, s_q, wg * MT * 64, MT * 64, threadIdx.x & 127, 128);
          st_cp_async_commit();
          st_cp_async_wait<0>();
          st_fence_proxy_async();
          st_warpgroup_sync(wg);
          q_start = c.t.start;
        }
      }
      st_mbar_wait(st_smem_addr(&s_full[i % STAGES]), (i / STAGES) & 1);
    }
    unit.t = c.t;
    unit.j = c.j;
    st_wgmma_fence_regs(acc);
    st_wgmma_fence();
    // The stage's offset through a shuffle, so that ptxas keeps the B
    // descriptors in uniform registers too.
    const uint32_t stage_units = __shfl_sync(0xffffffffu, (uint32_t)(i % STAGES) * (STAGE_BYTES >> 4), 0);
    st_score_mma(acc, a_desc[m], b_desc0 + stage_units);
    st_wgmma_commit();
  };
  st_score_own own = st_score_own_row(p, c.t, row_base);
  int own_start = c.t.start;
  auto finish = [&](int u, const st_score_unit &unit, float(&acc)[64], int m) {
    st_wgmma_fence_regs(acc);
    if (m == MT - 1) st_mbar_arrive(st_smem_addr(&s_empty[u / MT % STAGES])); // the block's products are done
    if (unit.t.start != own_start) {
      own = st_score_own_row(p, unit.t, row_base);
      own_start = unit.t.start;
    }
    *tile = unit.t;
    st_score_epilogue(p, unit.t, acc, row_base + m * 64, m, unit.j, own, out);
  };
  // No exit from the middle of the loop: ptxas then cannot tell which
  // accumulators are in flight on the way out and waits for all of them
  // in every iteration (C7517).
  issue(0, acc0, u0, 0);
  int u = 0;
  for (; u + 2 < units; u += 2) {
    issue(u + 1, acc1, u1, M_ODD);
    st_wgmma_wait<1>();
    finish(u, u0, acc0, 0);
    issue(u + 2, acc0, u0, 0);
    st_wgmma_wait<1>();
    finish(u + 1, u1, acc1, M_ODD);
  }
  if (u + 1 < units) { // the last two units
    issue(u + 1, acc1, u1, M_ODD);
    st_wgmma_wait<1>();
    finish(u, u0, acc0, 0);
    st_wgmma_wait<0>();
    finish(u + 1, u1, acc1, M_ODD);
  } else {
    st_wgmma_wait<0>();
    finish(u, u0, acc0, 0);
  }
  return true;
}

#endif // ST_SCORE_TILE_CUH
