// index_decode.cu - lightning-indexer block selection for a decode batch.
//
// For request r, index head h and query token t (position p = seq - qlen + t,
// nb = p/128 + 1 visible blocks), score[j] = max over positions pos <= p of
// block j of dot(q[r,t,h], k[pos]); keep the init_blocks first and the
// local_blocks last visible blocks, then the highest-scoring others, up to
// min(topk, nb) ids (rest -1). The index-K cache is shared by all heads.
//
// Grid (splits, R, H / HEADS_PER_CTA); THREADS threads. CTA (s, r, g) scores
// the s-th of `splits` equal slices of request r's visible blocks for the
// HEADS_PER_CTA heads of group g and all qlen tokens ("columns" = heads x
// tokens, at most 16): K rows are read once per CTA and multiplied against
// every column with tensor-core mma (m16n8k16: bf16, or fp8 widened to f16).
// A warp handles one 16-token tile of a block per step ("unit"); the max over
// a tile's rows reduces in registers and shuffles, the max over a block's 8
// tiles by atomicMax on integer keys in shared memory. Each CTA writes its
// blocks' keys (forced blocks as 0) to the workspace, one row of max_blocks
// keys per column; no CTA selects on its own slice, because a slice's own
// top-k must then be merged again and cost more than the selection itself
// (docs/kernels/index_decode.md, v4).
// Balanced (p.balanced, batches of more than one request): the grid is
// (splits + 1, R, groups) and the CTAs of a head group share the batch's
// visible blocks by the actual lengths, not `splits` to a request: with N
// blocks in all, request r gets S_r = max(1, ceil(nb_r / W)) slices of
// W = ceil(N / (R * splits)) blocks at most (sum S_r <= R * (splits + 1)),
// in request order; the CTAs past the last slice exit. A batch of equal
// lengths gets `splits` slices a request as before; in a batch of mixed
// lengths the longest request no longer sets the time alone (one long
// request among short ones took splits equal slices of its whole length).
//   single: the last CTA of (r, g) to finish selects from every split's keys
//           with the whole CTA and writes topk_idx (one launch; counters
//           reset by that CTA).
//   split:  st_index_decode_merge does that selection in a second launch.
// With one split and the single algorithm the CTA selects from its shared
// memory and writes topk_idx directly.
//
// Bytes: the visible K rows once per head group (R * nb * 128 * D * elem);
// q, block table and block keys are small. FLOPs: 2 * 128 * D * columns per
// visible block, on tensor cores: the op is bandwidth-bound.

// The compile-time constants ST_P_*: rendering puts a variant's values
// in place of this include (generator/render.lua).
#include "defaults/index_decode.cuh"
constexpr int IS_FP8 = ST_P_IS_FP8;
constexpr int HEAD_DIM = ST_P_HEAD_DIM;
constexpr int TOPK_CAP = ST_P_TOPK;
constexpr int HEADS_PER_CTA = ST_P_HEADS_PER_CTA;
constexpr int MAX_QLEN = ST_P_MAX_QLEN;
constexpr int THREADS = ST_P_THREADS;
constexpr int UNITS = ST_P_UNITS_IN_FLIGHT;
constexpr int ALGO_SPLIT = ST_P_ALGO_SPLIT;
// 0: each warp loads its tiles' K rows straight into mma fragments
// (units_in_flight tiles at a time). N > 0: one thread copies whole blocks
// into N shared-memory stages with the bulk copy engine (cp.async.bulk,
// mbarriers) and the warps read their tiles from there.
constexpr int BULK_STAGES = ST_P_BULK_STAGES;

#include "params/index_decode.h"
#include "common/params_gate.cuh"
#include "common/load.cuh"
#include "common/mbarrier.cuh"
#include "common/smem_tile.cuh" // st_smem_addr
#include "common/mma.cuh"
#include "common/score_key.cuh"
#include "common/cta_topk.cuh"
#include "common/bound_topk.cuh"
#include "common/last_cta.cuh"
#include "common/pdl.cuh"

ST_PARAMS_GATE(st_index_decode_params)

constexpr int BLOCK_TOKENS = 128;
constexpr int TILES_PER_BLOCK = BLOCK_TOKENS / 16;
constexpr int WARPS = THREADS / 32;
constexpr int ELEM_BYTES = IS_FP8 ? 1 : 2;
constexpr int ROW_BYTES = HEAD_DIM * ELEM_BYTES;
// A chunk is the 64 bytes of a row that 4 lanes load with 16 bytes each; it
// feeds two mma k-steps.
constexpr int CHUNKS = ROW_BYTES / 64;
constexpr int MAX_COLS = HEADS_PER_CTA * MAX_QLEN;
constexpr int NTILES = (MAX_COLS + 7) / 8;
constexpr int BLOCK_BYTES = BLOCK_TOKENS * ROW_BYTES;

static_assert(THREADS % 32 == 0 && THREADS >= 64, "whole warps");
static_assert(ROW_BYTES % 64 == 0, "rows of whole 64-byte chunks");
static_assert(MAX_COLS <= 16, "at most two mma column tiles");
// Bulk variants: each warp takes BULK_TILES of a block's tiles.
constexpr int BULK_TILES = TILES_PER_BLOCK / WARPS;
static_assert(BULK_STAGES == 0 || TILES_PER_BLOCK % WARPS == 0, "a block's tiles shared evenly by the warps");

struct st_column {
  int head;   // index head
  int row;    // row of q / topk_idx (r * qlen + t)
  int pos;    // absolute position of the query token (-1 and below: none)
  int nb;     // visible blocks
  int lo, hi; // forced blocks are [0, lo) and [hi, nb)
  int want;   // ids to output: min(topk, nb)
  int free;   // of which chosen by score: want - forced
};

__device__ __forceinline__ st_column st_make_column(const st_index_decode_params &p, int r, int g, int n,
                                                     int seq) {
  st_column c;
  const int t = n % p.qlen;
  c.head = g * HEADS_PER_CTA + n / p.qlen;
  c.row = r * p.qlen + t;
  c.pos = seq - p.qlen + t;
  c.nb = c.pos >= 0 ? min(c.pos / BLOCK_TOKENS + 1, p.max_blocks) : 0;
  c.lo = min(p.init_blocks, c.nb);
  c.hi = max(c.nb - p.local_blocks, c.lo);
  c.want = min(p.topk, c.nb);
  c.free = c.want - (c.lo + (c.nb - c.hi));
  return c;
}

__device__ __forceinline__ bool st_forced(const st_column &c, int j) { return j < c.lo || j >= c.hi; }

// Writes the forced ids of a column into slots [0, forced) and -1 into
// [used, topk): `used` = forced + the ids chosen by score (already written).
__device__ void st_write_forced_and_pad(const st_index_decode_params &p, const st_column &c, int chosen) {
  int32_t *out = p.topk_idx + (int64_t)c.head * p.out_stride_head + (int64_t)c.row * p.out_stride_row;
  const int lane = threadIdx.x & 31;
  const int forced = c.lo + (c.nb - c.hi);
  for (int i = lane; i < forced; i += 32) out[i] = i < c.lo ? i : c.hi + (i - c.lo);
  for (int i = forced + chosen + lane; i < p.topk; i += 32) out[i] = -1;
}

__device__ __forceinline__ int32_t *st_out_row(const st_index_decode_params &p, const st_column &c) {
  return p.topk_idx + (int64_t)c.head * p.out_stride_head + (int64_t)c.row * p.out_stride_row;
}

// A padding request (seq_len <= 0) gets -1 everywhere and touches nothing else.
__device__ void st_write_padding(const st_index_decode_params &p, int r, int g) {
  const int ncols = HEADS_PER_CTA * p.qlen;
  for (int n = 0; n < ncols; n++) {
    const int t = n % p.qlen;
    int32_t *out = p.topk_idx + (int64_t)(g * HEADS_PER_CTA + n / p.qlen) * p.out_stride_head +
                   (int64_t)(r * p.qlen + t) * p.out_stride_row;
    for (int i = threadIdx.x; i < p.topk; i += THREADS) out[i] = -1;
  }
}

// Row of block_keys for request r, head h, query token t.
__device__ __forceinline__ int64_t st_key_row(const st_index_decode_params &p, int r, int h, int t) {
  return ((int64_t)r * p.num_heads + h) * p.qlen + t;
}

// The rank selection (common/bound_topk.cuh) runs first; the radix
// select only when it gives up (many equal keys), so the two never hold
// their shared memory at the same time.
union st_select_smem {
  st_bound_topk_smem<MAX_COLS> bound;
  st_cta_topk_smem<MAX_COLS> radix;
};

// Emits chosen id j of column c0+cl into its slot (after the forced ids).
struct st_emit_chosen {
  const st_index_decode_params &p;
  int r, g, seq, c0;
  __device__ void operator()(int cl, int j, int slot) const {
    const st_column c = st_make_column(p, r, g, c0 + cl, seq);
    st_out_row(p, c)[c.lo + (c.nb - c.hi) + slot] = j;
  }
};

// After the chosen ids of columns c0 .. c0+nc-1 are written (chosen[cl]
// of them): the forced ids and the -1 padding.
__device__ void st_finish_columns(const st_index_decode_params &p, int r, int g, int seq, int c0, int nc,
                                  const int *chosen) {
  const int warp = threadIdx.x / 32;
  for (int cl = warp; cl < nc; cl += WARPS)
    st_write_forced_and_pad(p, st_make_column(p, r, g, c0 + cl, seq), chosen[cl]);
  __syncthreads(); // the caller may reuse the keys and sm
}

// Columns c0 .. c0+nc-1 of (r, g): load(cl, j) is the key of block j of
// column c0+cl (j < nb_all; forced and invisible blocks hold 0). Writes
// their topk_idx rows with the rank selection and returns true, or
// returns false having written nothing (too many equal keys).
template <class Load>
__device__ bool st_select_fast(const st_index_decode_params &p, int r, int g, int seq, int c0, int nc, int nb_all,
                               Load load, st_select_smem &sm) {
  const bool ok = st_bound_topk<MAX_COLS>(
      nb_all, nc, load, [&](int cl) { return st_make_column(p, r, g, c0 + cl, seq).free; }, sm.bound,
      st_emit_chosen{p, r, g, seq, c0});
  if (ok) st_finish_columns(p, r, g, seq, c0, nc, sm.bound.chosen);
  return ok;
}

// The same with the radix select, for keys in shared memory:
// keys[cl * stride + j].
__device__ void st_select_radix(const st_index_decode_params &p, int r, int g, int seq, int c0, int nc,
                                const uint32_t *keys, int stride, int nb_all, st_select_smem &sm) {
  st_cta_topk<MAX_COLS>(
      keys, stride, nb_all, nc, [&](int cl) { return st_make_column(p, r, g, c0 + cl, seq).free; }, sm.radix,
      st_emit_chosen{p, r, g, seq, c0});
  st_finish_columns(p, r, g, seq, c0, nc, sm.radix.chosen);
}

// The merge of (r, g): every split has written its blocks' keys to the
// workspace (rows of max_blocks keys, one per column, consecutive for the
// columns of (r, g)), read from L2: other CTAs of this launch wrote them.
// The rank selection reads them straight into registers; the radix
// fallback stages up to sel_cols columns at a time in shared memory.
__device__ void st_merge_from_workspace(const st_index_decode_params &p, int r, int g, int seq, uint32_t *buf,
                                        st_select_smem &sm) {
  const int ncols = HEADS_PER_CTA * p.qlen;
  const int nb_all = min((seq - 1) / BLOCK_TOKENS + 1, p.max_blocks);
  const uint32_t *keys = p.block_keys + st_key_row(p, r, g * HEADS_PER_CTA, 0) * p.max_blocks;
  if (st_select_fast(p, r, g, seq, 0, ncols, nb_all,
                     [&](int cl, int j) { return st_ld_l2_u32(keys + (int64_t)cl * p.max_blocks + j); }, sm))
    return;
  for (int c0 = 0; c0 < ncols; c0 += p.sel_cols) {
    const int nc = min(p.sel_cols, ncols - c0);
    // MERGE_LOADS independent loads per thread before the first store: one
    // L2 round trip per batch, not one per key.
    constexpr int MERGE_LOADS = 8;
    for (int e0 = threadIdx.x; e0 < nc * nb_all; e0 += THREADS * MERGE_LOADS) {
      uint32_t v[MERGE_LOADS];
#pragma unroll
      for (int u = 0; u < MERGE_LOADS; u++) {
        const int e = e0 + u * THREADS;
        const int cl = e / nb_all, j = e - cl * nb_all;
        v[u] = e < nc * nb_all ? st_ld_l2_u32(keys + (int64_t)(c0 + cl) * p.max_blocks + j) : 0u;
      }
#pragma unroll
      for (int u = 0; u < MERGE_LOADS; u++)
        if (e0 + u * THREADS < nc * nb_all) buf[e0 + u * THREADS] = v[u];
    }
    __syncthreads();
    st_select_radix(p, r, g, seq, c0, nc, buf, nb_all, nb_all, sm);
  }
}

// The columns' q as the products take it: per column tile nt and 64-byte
// chunk ch, lane (gq, cq) holds bytes [ch*64 + cq*16, +16) of column
// nt*8 + gq's row, the bytes its K loads cover (A and B share the lane's k
// slots, so that k order needs no shuffles). fp8 holds them widened to f16
// (two words a word), once per CTA: mma.sync e4m3 on Hopper widens both
// operands at every call (ptxas emits 12 conversions and 2 f16 HMMA for
// each), so the tiles now widen only K (v8, docs/kernels/index_decode.md).
constexpr int QWORDS = IS_FP8 ? 8 : 4;
struct st_q_frag {
  uint32_t w[NTILES][CHUNKS][QWORDS];
};

// acc[nt] = one 16-token tile's rows x column tile nt. a[ch][0] / a[ch][1]
// hold bytes [ch*64 + cq*16, +16) of rows gq and gq + 8 (the mma A
// fragments). fp8: each 4-byte word of a row is two f16x2 (bytes 0-1 in k
// slots 2cq.., 2-3 in 8 + 2cq.. of an m16n8k16), q's words the same.
__device__ __forceinline__ void st_tile_products(const uint4 (&a)[CHUNKS][2], const st_q_frag &q, int ncols,
                                                 float (&acc)[NTILES][4]) {
#pragma unroll
  for (int nt = 0; nt < NTILES; nt++) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
#pragma unroll
  for (int ch = 0; ch < CHUNKS; ch++) {
    const uint32_t lo[4] = {a[ch][0].x, a[ch][0].y, a[ch][0].z, a[ch][0].w};
    const uint32_t hi[4] = {a[ch][1].x, a[ch][1].y, a[ch][1].z, a[ch][1].w};
    if (IS_FP8) {
      uint32_t l16[8], h16[8];
#pragma unroll
      for (int k = 0; k < 4; k++) {
        st_e4m3x4_to_f16x2x2(lo[k], l16[2 * k], l16[2 * k + 1]);
        st_e4m3x4_to_f16x2x2(hi[k], h16[2 * k], h16[2 * k + 1]);
      }
#pragma unroll
      for (int nt = 0; nt < NTILES; nt++) {
        if (nt * 8 >= ncols) break;
        const uint32_t *b = q.w[nt][ch];
#pragma unroll
        for (int k = 0; k < 4; k++)
          st_mma_f16_16816(acc[nt], l16[2 * k], h16[2 * k], l16[2 * k + 1], h16[2 * k + 1], b[2 * k], b[2 * k + 1]);
      }
    } else {
#pragma unroll
      for (int nt = 0; nt < NTILES; nt++) {
        if (nt * 8 >= ncols) break;
        const uint32_t *b = q.w[nt][ch];
        st_mma_bf16_16816(acc[nt], lo[0], hi[0], lo[1], hi[1], b[0], b[1]);
        st_mma_bf16_16816(acc[nt], lo[2], hi[2], lo[3], hi[3], b[2], b[3]);
      }
    }
  }
}

// The max per column of T tiles of one block (acc[t], whose row gq sits
// at absolute position pos0[t]), positions past each column's query token
// left out, into keys[n * chunk] by atomicMax (a block's tiles share the
// key): the tiles are maxed in registers first, so T tiles cost one
// shuffle reduction and one atomic.
template <int T>
__device__ __forceinline__ void st_tiles_key(const float (*acc)[NTILES][4], const int *pos0,
                                             const int (&col_pos)[NTILES][2], int ncols, uint32_t *keys, int chunk) {
  const int lane = threadIdx.x & 31, gq = lane >> 2, cq = lane & 3;
#pragma unroll
  for (int nt = 0; nt < NTILES; nt++) {
    if (nt * 8 >= ncols) break;
#pragma unroll
    for (int cc = 0; cc < 2; cc++) {
      const int lim = col_pos[nt][cc];
      uint32_t key = 0u;
#pragma unroll
      for (int t = 0; t < T; t++) {
        if (pos0[t] <= lim) key = max(key, st_score_key(acc[t][nt][cc]));
        if (pos0[t] + 8 <= lim) key = max(key, st_score_key(acc[t][nt][2 + cc]));
      }
      key = max(key, __shfl_xor_sync(0xffffffffu, key, 4));
      key = max(key, __shfl_xor_sync(0xffffffffu, key, 8));
      key = max(key, __shfl_xor_sync(0xffffffffu, key, 16));
      const int n = nt * 8 + 2 * cq + cc;
      if (gq == 0 && key != 0u && n < ncols) atomicMax(&keys[n * chunk], key);
    }
  }
}

// Byte offset of the bulk stages in dynamic shared memory: after the score
// keys and pages ((MAX_COLS + 1) * chunk_cap words), 128-byte aligned. The
// launcher (runtime/ops/index_decode.c) computes the same.
__device__ __forceinline__ int st_stage_offset(const st_index_decode_params &p) {
  return ((MAX_COLS + 1) * p.chunk_cap * 4 + 127) / 128 * 128;
}

// Warp 0 (all lanes) copies block i, at `page`, into stage i % BULK_STAGES.
// A page whose rows are contiguous (k_stride_token = head_dim) is one copy;
// else the lanes copy it row by row (not reached yet: the launcher gives
// strided pages to register variants until a GPU test covers this path).
__device__ __forceinline__ void st_issue_block(const st_index_decode_params &p, char *stages, uint64_t *full, int i,
                                               int page) {
  const int lane = threadIdx.x & 31;
  const int st = i % BULK_STAGES;
  const uint32_t bar = st_smem_addr(&full[st]), dst = st_smem_addr(stages + st * BLOCK_BYTES);
  const char *src = (const char *)p.k_cache + (int64_t)page * p.k_stride_page * ELEM_BYTES;
  if (lane == 0) st_mbar_arrive_expect_tx(bar, BLOCK_BYTES);
  __syncwarp();
  if (p.k_stride_token * ELEM_BYTES == ROW_BYTES) {
    if (lane == 0) st_bulk_copy_g2s(dst, src, BLOCK_BYTES, bar);
  } else {
    for (int t = lane; t < BLOCK_TOKENS; t += 32)
      st_bulk_copy_g2s(dst + t * ROW_BYTES, src + (int64_t)t * p.k_stride_token * ELEM_BYTES, ROW_BYTES, bar);
  }
}

// BULK_STAGES > 0: the slice's nloc blocks pass through the stages in order.
// The first min(BULK_STAGES, nloc) copies were issued before the setup
// barrier (st_index_decode_main); warp 0 copies block i + BULK_STAGES into
// stage i % BULK_STAGES once every thread has released block i there (empty
// barrier); a warp waits for a block's bytes (full barrier), scores its
// tiles, then releases.
__device__ void st_score_bulk(const st_index_decode_params &p, const int32_t *s_pages, int nloc, int j0, int chunk,
                              int ncols, const st_q_frag &q, const int (&col_pos)[NTILES][2], uint32_t *s_keys,
                              char *stages, uint64_t *full, uint64_t *empty) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, gq = lane >> 2, cq = lane & 3;
  for (int i = 0; i < nloc; i++) {
    const int st = i % BULK_STAGES, parity = (i / BULK_STAGES) & 1;
    st_mbar_wait(st_smem_addr(&full[st]), parity);
    const char *blk = stages + st * BLOCK_BYTES;
    // The warp's tiles of the block at once (independent products, one key
    // reduction): warp w takes tiles w, w + WARPS, ...
    uint4 a[BULK_TILES][CHUNKS][2];
#pragma unroll
    for (int t = 0; t < BULK_TILES; t++) {
      const char *row0 = blk + ((warp + t * WARPS) * 16 + gq) * ROW_BYTES + cq * 16;
#pragma unroll
      for (int ch = 0; ch < CHUNKS; ch++) {
        a[t][ch][0] = *(const uint4 *)(row0 + ch * 64);
        a[t][ch][1] = *(const uint4 *)(row0 + 8 * ROW_BYTES + ch * 64);
      }
    }
    float acc[BULK_TILES][NTILES][4];
    int pos0[BULK_TILES];
#pragma unroll
    for (int t = 0; t < BULK_TILES; t++) {
      st_tile_products(a[t], q, ncols, acc[t]);
      pos0[t] = (j0 + i) * BLOCK_TOKENS + (warp + t * WARPS) * 16 + gq;
    }
    st_tiles_key<BULK_TILES>(acc, pos0, col_pos, ncols, s_keys + i, chunk);
    // Every thread releases its own reads of the stage (an arrive orders
    // only the arriving thread's accesses before the next copy's writes).
    st_mbar_arrive(st_smem_addr(&empty[st]));
    if (warp == 0 && i + BULK_STAGES < nloc) {
      st_mbar_wait(st_smem_addr(&empty[st]), parity);
      st_issue_block(p, stages, full, i + BULK_STAGES, s_pages[i + BULK_STAGES]);
    }
  }
}

// Blocks of request r that any of its query tokens sees (0: padding).
__device__ __forceinline__ int st_request_blocks(const st_index_decode_params &p, int seq) {
  return seq > 0 ? min((seq - 1) / BLOCK_TOKENS + 1, p.max_blocks) : 0;
}

struct st_slice {
  int r;      // request (-1: no slice, the CTA exits)
  int split;  // which of the request's slices
  int splits; // the request's slices
};

// The balanced schedule's slice of CTA number c (of gridDim.x * R). Warp 0
// reads the lengths once (lane l holds requests l, l + 32, ...; the first
// SLICE_RUNS runs stay in registers: one round trip for batches up to 256,
// as many as reading the CTA's own length took), sums the blocks, then
// scans S_r in request order, 32 requests a step, until it passes c. Every
// CTA computes the same W from the same lengths, so the slices tile each
// request exactly once.
constexpr int SLICE_RUNS = 8;
__device__ st_slice st_balanced_slice(const st_index_decode_params &p, int c) {
  __shared__ st_slice s_slice;
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    const int R = p.num_requests;
    int held[SLICE_RUNS];
    long long total = 0;
#pragma unroll
    for (int k = 0; k < SLICE_RUNS; k++) {
      const int i = k * 32 + lane;
      held[k] = i < R ? st_request_blocks(p, p.seq_lens[i]) : 0;
      total += held[k];
    }
    for (int i = SLICE_RUNS * 32 + lane; i < R; i += 32) total += st_request_blocks(p, p.seq_lens[i]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) total += __shfl_xor_sync(0xffffffffu, total, o);
    const long long slots = (long long)R * p.splits;
    const int w = (int)max(1LL, (total + slots - 1) / slots);
    if (lane == 0) s_slice = st_slice{-1, 0, 0};
    __syncwarp();
    int done = 0; // slices of the requests before this step's
    for (int k = 0; k * 32 < R && done <= c; k++) {
      const int i = k * 32 + lane;
      int nb = 0;
#pragma unroll
      for (int j = 0; j < SLICE_RUNS; j++)
        if (j == k) nb = held[j];
      if (k >= SLICE_RUNS && i < R) nb = st_request_blocks(p, p.seq_lens[i]);
      const int n = i < R ? max(1, (nb + w - 1) / w) : 0;
      int incl = n;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int v = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += v;
      }
      const int first = done + incl - n;
      if (n > 0 && c >= first && c < first + n) s_slice = st_slice{i, c - first, n};
      done += __shfl_sync(0xffffffffu, incl, 31);
    }
  }
  __syncthreads();
  return s_slice;
}

extern "C" __global__ void __launch_bounds__(THREADS, 1) st_index_decode_main(const st_index_decode_params p) {
  // [MAX_COLS][chunk_cap] score keys, [chunk_cap] pages; then the merge's
  // buffers. 128-byte aligned: the bulk copies' stages follow at a multiple
  // of 128 from here, and a stage that starts off a 32-byte sector boundary
  // (the static variables before it decide where it starts) streamed 30%
  // slower (docs/kernels/index_decode.md, v11).
  extern __shared__ __align__(128) uint32_t s_dyn[];
  __shared__ st_select_smem s_sel;
  __shared__ int s_last;
  __shared__ uint64_t s_full[BULK_STAGES > 0 ? BULK_STAGES : 1], s_empty[BULK_STAGES > 0 ? BULK_STAGES : 1];

  const int g = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  st_pdl_wait(); // common/pdl.cuh: nothing global before this
  st_slice sl{(int)blockIdx.y, (int)blockIdx.x, p.splits};
  if (p.balanced) {
    sl = st_balanced_slice(p, blockIdx.y * gridDim.x + blockIdx.x);
    if (sl.r < 0) return;
  }
  const int split = sl.split, r = sl.r;
  const int seq = p.seq_lens[r];
  if (seq <= 0) {
    if (!ALGO_SPLIT && split == 0) st_write_padding(p, r, g);
    return;
  }
  const int qlen = p.qlen;
  const int ncols = HEADS_PER_CTA * qlen;
  const int nb_all = st_request_blocks(p, seq); // blocks of the last token
  const int chunk = min((nb_all + sl.splits - 1) / sl.splits, p.chunk_cap);
  const int j0 = min(split * chunk, nb_all);
  const int nloc = min(chunk, nb_all - j0);

  if (BULK_STAGES > 0 && threadIdx.x == 0) {
    // The launcher sizes the stages with the same formula; a mismatch must
    // not let the copies run past the allocation.
    uint32_t dyn_bytes;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn_bytes));
    if (dyn_bytes < (uint32_t)(st_stage_offset(p) + BULK_STAGES * BLOCK_BYTES)) __trap();
    for (int i = 0; i < BULK_STAGES; i++) {
      st_mbar_init(st_smem_addr(&s_full[i]), 1);
      st_mbar_init(st_smem_addr(&s_empty[i]), THREADS);
    }
    st_mbar_init_fence();
  }
  // q's words first (held raw until after the setup barrier), so that
  // nothing below waits for them.
  const int gq = lane >> 2, cq = lane & 3;
  uint4 q_raw[NTILES][CHUNKS];
#pragma unroll
  for (int nt = 0; nt < NTILES; nt++) {
    const int n = nt * 8 + gq;
    const char *qrow = nullptr;
    if (n < ncols) {
      const int h = g * HEADS_PER_CTA + n / qlen, t = n % qlen;
      qrow = (const char *)p.q + ((int64_t)(r * qlen + t) * p.q_stride_row + (int64_t)h * p.q_stride_head) * ELEM_BYTES;
    }
#pragma unroll
    for (int ch = 0; ch < CHUNKS; ch++)
      q_raw[nt][ch] = qrow ? *(const uint4 *)(qrow + ch * 64 + cq * 16) : make_uint4(0, 0, 0, 0);
  }
  const int32_t *bt = p.block_table + (int64_t)r * p.bt_stride + j0;
  // Register path: a warp's K rows of UNITS tiles (16 rows each) into
  // mma fragments. The first batch is issued here with its pages read
  // straight from the block table (a warp's lanes read one entry), so that
  // its round trip runs under q's and the setup barrier's; later batches
  // read their pages from s_pages.
  const char *kbase = (const char *)p.k_cache;
  const int nunits = nloc * TILES_PER_BLOCK;
  uint4 a[UNITS][CHUNKS][2];
  auto load_units = [&](int base, auto page_of) {
#pragma unroll
    for (int u = 0; u < UNITS; u++) {
      const int unit = base + u * WARPS;
      if (unit < nunits) {
        const int page = page_of(unit / TILES_PER_BLOCK);
        const int tok = (unit % TILES_PER_BLOCK) * 16 + gq;
        const char *row0 = kbase + ((int64_t)page * p.k_stride_page + (int64_t)tok * p.k_stride_token) * ELEM_BYTES;
        const char *row1 = row0 + (int64_t)8 * p.k_stride_token * ELEM_BYTES;
#pragma unroll
        for (int ch = 0; ch < CHUNKS; ch++) {
          a[u][ch][0] = st_ld_stream16(row0 + ch * 64 + cq * 16);
          a[u][ch][1] = st_ld_stream16(row1 + ch * 64 + cq * 16);
        }
      }
    }
  };
  if (BULK_STAGES == 0) load_units(warp, [&](int jl) { return bt[jl]; });
  // Bulk path: warp 0 issues the first stages' copies now, their pages read
  // straight from the block table (lane i reads block i's), for the same
  // reason; thread 0 initialized the barriers above (st_issue_block's
  // __syncwarp orders that before any other lane's copy).
  if (BULK_STAGES > 0 && warp == 0) {
    const int first = min(BULK_STAGES, nloc);
    const int page = lane < first ? bt[lane] : 0;
    for (int i = 0; i < first; i++)
      st_issue_block(p, (char *)s_dyn + st_stage_offset(p), s_full, i, __shfl_sync(0xffffffffu, page, i));
  }
  for (int i = threadIdx.x; i < ncols * chunk; i += THREADS) s_dyn[i] = 0u;
  // The slice's pages, read once up front: the scoring loop's K loads then
  // wait for nothing but themselves (one round trip per step, not two).
  int32_t *s_pages = (int32_t *)(s_dyn + MAX_COLS * p.chunk_cap);
  for (int i = threadIdx.x; i < nloc; i += THREADS) s_pages[i] = bt[i];

  // q fragments (st_q_frag).
  st_q_frag q;
#pragma unroll
  for (int nt = 0; nt < NTILES; nt++) {
#pragma unroll
    for (int ch = 0; ch < CHUNKS; ch++) {
      const uint4 v = q_raw[nt][ch];
      const uint32_t words[4] = {v.x, v.y, v.z, v.w};
      // (% QWORDS keeps the bf16 instantiation's dead fp8 branch in bounds.)
#pragma unroll
      for (int k = 0; k < 4; k++) {
        if (IS_FP8)
          st_e4m3x4_to_f16x2x2(words[k], q.w[nt][ch][2 * k % QWORDS], q.w[nt][ch][(2 * k + 1) % QWORDS]);
        else
          q.w[nt][ch][k] = words[k];
      }
    }
  }
  // Position limit of each accumulator column this lane holds (2 per tile).
  int col_pos[NTILES][2];
#pragma unroll
  for (int nt = 0; nt < NTILES; nt++)
#pragma unroll
    for (int cc = 0; cc < 2; cc++) {
      const int n = nt * 8 + 2 * cq + cc;
      col_pos[nt][cc] = n < ncols ? seq - qlen + n % qlen : -1;
    }
  __syncthreads();

  if (BULK_STAGES > 0) {
    st_score_bulk(p, s_pages, nloc, j0, chunk, ncols, q, col_pos, s_dyn, (char *)s_dyn + st_stage_offset(p), s_full,
                  s_empty);
  } else {
    for (int base = warp; base < nunits; base += WARPS * UNITS) {
      if (base != warp) load_units(base, [&](int jl) { return s_pages[jl]; });
      // Every unit's products before any key reduction: independent chains.
      float acc[UNITS][NTILES][4];
#pragma unroll
      for (int u = 0; u < UNITS; u++) {
        if (base + u * WARPS >= nunits) break;
        st_tile_products(a[u], q, ncols, acc[u]);
      }
#pragma unroll
      for (int u = 0; u < UNITS; u++) {
        const int unit = base + u * WARPS;
        if (unit >= nunits) break;
        const int jl = unit / TILES_PER_BLOCK;
        const int pos0 = (j0 + jl) * BLOCK_TOKENS + (unit % TILES_PER_BLOCK) * 16 + gq;
        st_tiles_key<1>(&acc[u], &pos0, col_pos, ncols, s_dyn + jl, chunk);
      }
    }
  }
  __syncthreads();

  // Forced blocks are never chosen by score: their keys become 0.
  const bool direct = !ALGO_SPLIT && sl.splits == 1;
  for (int e = threadIdx.x; e < ncols * nloc; e += THREADS) {
    const int col = e / nloc, i = e - col * nloc;
    const st_column c = st_make_column(p, r, g, col, seq);
    const uint32_t key = st_forced(c, j0 + i) ? 0u : s_dyn[col * chunk + i];
    if (direct)
      s_dyn[col * chunk + i] = key;
    else
      p.block_keys[st_key_row(p, r, c.head, col % qlen) * p.max_blocks + j0 + i] = key;
  }
  if (direct) { // one CTA saw every block: select here
    __syncthreads();
    if (!st_select_fast(p, r, g, seq, 0, ncols, nloc, [&](int cl, int j) { return s_dyn[cl * chunk + j]; }, s_sel))
      st_select_radix(p, r, g, seq, 0, ncols, s_dyn, chunk, nloc, s_sel);
    return;
  }
  if (ALGO_SPLIT) return;

  // single: the last CTA of (r, g) to get here merges (common/last_cta.cuh).
  __syncthreads();
  if (threadIdx.x == 0) s_last = st_last_to_arrive(&p.counters[r * gridDim.z + g], (uint32_t)sl.splits);
  __syncthreads();
  if (!s_last) return;
  st_merge_from_workspace(p, r, g, seq, s_dyn, s_sel);
  if (threadIdx.x == 0) p.counters[r * gridDim.z + g] = 0u; // ready for the next launch
}

// split: grid (R, H / HEADS_PER_CTA), THREADS threads; dynamic shared memory
// holds sel_cols * max_blocks keys.
extern "C" __global__ void __launch_bounds__(THREADS, 1) st_index_decode_merge(const st_index_decode_params p) {
  extern __shared__ uint32_t s_dyn[];
  __shared__ st_select_smem s_sel;
  const int r = blockIdx.x, g = blockIdx.y;
  st_pdl_wait(); // launched programmatically after the main kernel: its keys
  const int seq = p.seq_lens[r];
  if (seq <= 0) {
    st_write_padding(p, r, g);
    return;
  }
  st_merge_from_workspace(p, r, g, seq, s_dyn, s_sel);
}
