// sparse_attn_block.cu - block-sparse GQA attention for a varlen prefill
// batch, block-major: each selected block is read once per TOKENS of the
// query tokens that selected it, instead of once per token (or per tile of
// neighbouring tokens, templates/sparse_attn.cu). With selections that
// neighbouring tokens do not share (random blocks of a long prefix), the
// token-major kernels read ~1 MiB of K/V per token and kv head from L2,
// whose rate (~7 TB/s measured on the H100, all SMs reading 64 KiB blocks)
// then bounds them; here each (block, TOKENS tokens) work item reads 64 KiB
// once and leaves one partial softmax state per (token, selection entry),
// which a merge combines (docs/kernels/sparse_attn.md).
//
// The launcher runs the batch in chunks of query tokens [q0, q0 + nq), four
// launches each:
//   st_sparse_attn_merge, step 0 (count): every valid entry (token, kv head
//     g, k) of the chunk finds its key (g, request, block) and takes a place
//     in the key's list (atomic count); the last CTA to finish scans the
//     counts into offsets and work items (TOKENS entries an item) and
//     leaves the counts zero for the next launch.
//   st_sparse_attn_merge, step 1 (scatter): entries into their work items'
//     records (key, page, entries, and the entries themselves).
//   st_sparse_attn_main (blocks): persistent CTAs (CTAS_PER_SM an SM), each
//     walking work items: the block's K and V to shared memory, the item's
//     tokens' q rows (GROUP heads each), scores, softmax and P.V over the
//     block's visible keys for each row (common/attn_tile.cuh, MTILES 2:
//     attn_tile_x2.cuh; WGMMA: a warpgroup's 64 rows on Hopper wgmma,
//     common/attn_wgmma.cuh, with q, K and V in 64-dim panels; WGMMA with
//     MTILES 2: two 64-row passes a warpgroup, a producer warp copying),
//     and per (entry, q head) the partial state (m, l) and O / l.
//   st_sparse_attn_merge, step 2 (merge): per (token, kv head) the topk
//     partials into o and lse.
// A block listed twice by a token is two entries, two partials of equal
// weight: the same as the contract's "counts twice".
// With launch parameter `dense`, tiles of tokens whose selection is every
// block they see go to a dense kernel instead (steps 4 and 5 and
// st_sparse_attn_dense, sparse_attn_dense.cuh): the count leaves their
// entries out and the merges skip them.
//
// Keys are numbered within the chunk's requests r0 .. r0 + nr - 1: key
// (g * nr + r - r0) * max_blocks + j, so the scan covers only them.

// The compile-time constants ST_P_*: rendering puts a variant's values
// in place of this include (generator/render.lua).
#include "defaults/sparse_attn_block.cuh"
constexpr int IS_FP8 = ST_P_IS_FP8;
constexpr int HEAD_DIM = ST_P_HEAD_DIM;
constexpr int GROUP = ST_P_GROUP;
constexpr int TOKENS = ST_P_TOKENS;
constexpr int WARPS = ST_P_WARPS;
constexpr int CTAS_PER_SM = ST_P_CTAS;
constexpr int PART_F32 = ST_P_PART_F32;
constexpr int STAGES = ST_P_STAGES;
constexpr int MTILES = ST_P_MTILES; // 16-row m-tiles a warp takes (2: common/attn_tile_x2.cuh; WGMMA: PASSES)
constexpr int WGMMA = ST_P_WGMMA;   // 1: warpgroups of 64 rows on wgmma (common/attn_wgmma.cuh)

#include "params/sparse_attn.h"
#include "common/params_gate.cuh"
#include "common/attn_tile.cuh"
#include "common/attn_tile_x2.cuh"
#include "common/attn_wgmma.cuh"
#include "common/kv_stage.cuh"
#include "common/last_cta.cuh"
#include "common/mbarrier.cuh"
#include "common/varlen.cuh"

// Dynamic shared memory, of every kernel and step here (laid out by each).
extern __shared__ __align__(128) char s_dyn[];

// Traps when the launch gave less dynamic shared memory than `bytes` (the
// launcher's layout disagrees with this kernel's).
__device__ __forceinline__ void st_need_dynamic_smem(unsigned bytes) {
  unsigned dyn;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
  if (dyn < bytes) __trap();
}

constexpr int THREADS = 32 * WARPS; // the math warps (PASSES2: and a producer warp, BLOCK_THREADS)
constexpr int REAL_ROWS = TOKENS * GROUP;
constexpr int WARP_ROWS = 16 * MTILES;
constexpr int ROW_UNIT = WGMMA ? 64 * MTILES : WARP_ROWS; // rows are padded to whole warpgroups' / warps' m-tiles
constexpr int ROWS = (REAL_ROWS + ROW_UNIT - 1) / ROW_UNIT * ROW_UNIT;
constexpr int MATH_WARPS = ROWS / WARP_ROWS;
// fp8 on wgmma with MTILES 2: the raw K and V rows come by tensor maps
// too, into the upper half of the bf16 K/V tiles (raw K where the V tile
// starts, raw V after it), with the block's per-token scales (tensor mode)
// after the tiles; the consumer warps widen them in place
// (st_widen_in_place). So the kernel keeps bf16's ~97 KiB and two CTAs an
// SM, where a raw stage beside the tiles would leave room for one.
constexpr bool RAW_IN_PLACE = IS_FP8 && WGMMA && MTILES == 2;
// bf16 on wgmma (and RAW_IN_PLACE): one thread copies a block's K and V by
// tensor maps (four 128-byte panels of 128 rows; cp.async by every thread
// cost index_score a quarter of its tensor rate,
// docs/kernels/index_score.md v3.1), counted on the stage's barrier.
constexpr bool KV_TMA = WGMMA && (!IS_FP8 || RAW_IN_PLACE);
// KV_TMA with one stage: the q rows are double-buffered instead (a q tile
// more), and the next item's K and V are copied as soon as this item's
// products no longer read them: the next item's q rows then load under
// this item's math and its K and V under this item's partial writes, where
// one stage left every item's copies exposed (ncu: the CTA's wait for its
// copies was the largest stall).
constexpr bool SPLIT = KV_TMA && STAGES == 1;
// WGMMA with MTILES 2 (SPLIT only): a warpgroup takes two 64-row m-tiles
// of an item in turn, so one K/V block serves 8 tokens of 16 heads with the
// registers of 4 (one warpgroup, two CTAs an SM): half the K/V bytes and
// half the barriers a token of MTILES 1 (docs/kernels/sparse_attn.md,
// v2.12-v2.16). The q tile's two halves (a pass's rows each) are its
// double buffer: a producer warp copies the next item's first half once
// this item's first-pass partials have been read out of it
// (st_produce_items).
constexpr bool PASSES2 = WGMMA && MTILES == 2;
constexpr int HALF_ROWS = ROWS / 2; // PASSES2: q half h holds rows h * HALF_ROWS ..
constexpr int BLOCK_THREADS = THREADS + (PASSES2 ? 32 : 0);
constexpr int BLOCK_TOKENS = 128;
constexpr int ROW_CHUNKS = HEAD_DIM / 8;
constexpr int DT = HEAD_DIM / 8;
// Tokens of an attend step: as many as registers allow
// (common/attn_tile_x2.cuh), with CTAS_PER_SM CTAs sharing the register file.
constexpr int REG_BUDGET = 65536 / (THREADS * CTAS_PER_SM) < 255 ? 65536 / (THREADS * CTAS_PER_SM) : 255;
constexpr int STEP_TOKENS = st_attend_step_tokens<HEAD_DIM>(MTILES, REG_BUDGET);
using st_kv = st_kv_stages<IS_FP8, HEAD_DIM, STAGES, THREADS, 0, WGMMA>;
// Dynamic shared memory: STAGES q tiles [ROWS][HEAD_DIM] bf16 (swizzled;
// WGMMA: panels),
// then the K/V region of STAGES blocks; runtime/ops/sparse_attn.c computes
// the same.
constexpr int Q_BYTES = ROWS * HEAD_DIM * 2;
// WGMMA: 1024 bytes more, to start the panels on a swizzle atom.
constexpr int Q_STAGES = PASSES2 ? 1 : SPLIT ? 2 : STAGES; // q tiles in shared memory
constexpr int ITEM_STAGES = SPLIT ? 2 : STAGES;            // item records in shared memory
// RAW_IN_PLACE: the two bf16 tiles (the raw rows land in their upper
// half) and the block's K and V scales.
constexpr int KV_BYTES = RAW_IN_PLACE ? 2 * st_kv::TILE_BYTES + st_kv::SCALE_BYTES : st_kv::BYTES;
constexpr int SMEM_BYTES = Q_STAGES * Q_BYTES + KV_BYTES + (WGMMA ? 1024 : 0);
constexpr int STEP_THREADS = 256; // st_sparse_attn_merge's CTA
// A work item's record in the workspace: key, page, entries, 0, then TOKENS
// entry words (-1 past its entries), padded to 16 bytes; the launcher
// (runtime/ops/sparse_attn.c) sizes it alike.
constexpr int REC_HEAD = 4;
constexpr int REC_INTS = (REC_HEAD + TOKENS + 3) / 4 * 4;
constexpr float LN2 = 0.69314718055994530942f;

static_assert(MATH_WARPS <= WARPS, "a warp per m-tile");
static_assert(HEAD_DIM % 64 == 0, "whole groups of 8 swizzled chunks per row");
static_assert(TOKENS <= 16 && STAGES >= 1 && STAGES <= 2, "an item's entries on lanes of warp 0; one or two stages");
static_assert(MTILES == 1 || (MTILES == 2 && HEAD_DIM <= 128), "two m-tiles hold 2 x HEAD_DIM / 2 output registers");
static_assert(!WGMMA || (HEAD_DIM == 128 && THREADS * MTILES == 2 * ROWS),
              "wgmma: a warpgroup per 64 rows of each pass, head_dim 128");
static_assert(!WGMMA || MTILES == 1 || (SPLIT && THREADS == 128), "wgmma passes: one stage, one warpgroup");

// RAW_IN_PLACE, tensor mode, the producer warp: the block's 128 K and 128
// V scales (rows past the item's most visible token: zeros) by cp.async,
// whose completion the stage's barrier tracks (cp.async.mbarrier.arrive
// without .noinc adds nothing to its count, so its phase waits for them
// too). Every lane, before lane 0's st_issue_kv_maps arrives.
__device__ __forceinline__ void st_issue_kv_scales(const st_sparse_attn_params &p, int g, int page, int ntok,
                                                   char *region, uint32_t kv_bar) {
  st_kv::issue_scales(p, g, page, ntok, st_smem_addr(region) + 2 * st_kv::TILE_BYTES, threadIdx.x & 31, 32);
  asm volatile("cp.async.mbarrier.arrive.shared::cta.b64 [%0];\n" ::"r"(kv_bar) : "memory");
}

// RAW_IN_PLACE, the consumer warps, once the block has landed (v2.31; V
// widened under the first pass's score products instead, then a
// warpgroup barrier, was 1-4% slower, and every raw row loaded before
// the first conversion spilled): raw K into the bf16 K tile, then raw V
// into the V tile. TENSOR (tensor mode): V as bf16 times its per-token
// scales (K's multiply the scores instead: common/kv_stage.cuh's widen
// says why; a scaled value could leave f16's range); else V as f16, one
// conversion a pair (e4m3 is exact in f16; bf16 takes four); K as bf16
// (K_F16: f16, for the dense kernel's q.K on f16). Rows at and
// past the item's most visible token become zeros (as st_zero_v_tail
// leaves them). Raw rows are 128 bytes with the copy's 128-byte swizzle,
// the layout of one bf16 panel (st_panel_offset). The 8 lanes of a quarter
// warp widen one row, chunk c each, rows r0, r0 + WIDEN_THREADS / 8, ...
// a lane (WIDEN_THREADS: the threads that widen, numbered tid = 0 ..
// WIDEN_THREADS - 1: the two-pass kernel's consumer warpgroup, the dense
// kernel's producer warpgroup); a V
// row's panel 0 lies where raw K's row of the same number was, its panel 1
// where raw V's was, so a row is only overwritten by the lanes that read
// it: a __syncwarp orders the reads and writes, no CTA barrier. Lanes with
// c >= 4 store their second chunk first, so that a quarter warp's stores
// fall in eight distinct bank groups.
template <bool TENSOR, int WIDEN_THREADS = 128, bool K_F16 = false>
__device__ __forceinline__ void st_widen_in_place(const st_sparse_attn_params &p, char *region, int ntok, int tid) {
  constexpr int CH = HEAD_DIM / 16, RPP = WIDEN_THREADS / CH, N = BLOCK_TOKENS / RPP, BATCH = 4; // rows a pass, passes
  static_assert(!RAW_IN_PLACE || (CH == 8 && N % BATCH == 0), "rows of 128 bytes, one raw panel");
  const int c = tid % CH, r0 = tid / CH, first = c >= CH / 2;
  const uint32_t k_tile = st_smem_addr(region), v_tile = k_tile + st_kv::TILE_BYTES;
  const char *raw_k = region + st_kv::TILE_BYTES, *raw_v = raw_k + BLOCK_TOKENS * HEAD_DIM;
  const float *v_scale = (const float *)(region + 2 * st_kv::TILE_BYTES) + BLOCK_TOKENS;
  // b: a row's 16 values (one raw chunk) as its chunks 2c and 2c + 1, into
  // the row of `tile`.
  const auto store = [&](uint32_t tile, int tok, const uint32_t (&b)[8]) {
    uint32_t x[4], y[4]; // the chunk stored first, then the other (selects: b stays in registers)
#pragma unroll
    for (int j = 0; j < 4; j++) {
      x[j] = first ? b[4 + j] : b[j];
      y[j] = first ? b[j] : b[4 + j];
    }
    const uint32_t at0 = tile + st_kv::tile_offset(tok, 2 * c + first),
                   at1 = tile + st_kv::tile_offset(tok, 2 * c + 1 - first);
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(at0), "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3])
                 : "memory");
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(at1), "r"(y[0]), "r"(y[1]), "r"(y[2]), "r"(y[3])
                 : "memory");
  };
#pragma unroll 2
  for (int i = 0; i < N; i++) {
    const int tok = r0 + i * RPP;
    uint32_t b[8];
    st_e4m3x16_widen<K_F16, false>(*(const uint4 *)(raw_k + st_panel_offset(BLOCK_TOKENS, tok, c)), 1.f, b);
    store(k_tile, tok, b);
  }
#pragma unroll 1
  for (int i0 = 0; i0 < N; i0 += BATCH) {
    uint4 raw[BATCH];
#pragma unroll
    for (int i = 0; i < BATCH; i++)
      raw[i] = *(const uint4 *)(raw_v + st_panel_offset(BLOCK_TOKENS, r0 + (i0 + i) * RPP, c));
    __syncwarp(); // this warp's rows, raw K's (i0 = 0) and raw V's, are read before they are overwritten
#pragma unroll
    for (int i = 0; i < BATCH; i++) {
      const int tok = r0 + (i0 + i) * RPP;
      uint32_t b[8];
      st_e4m3x16_widen<!TENSOR, TENSOR>(raw[i], TENSOR ? v_scale[tok] : 1.f, b);
      if (tok >= ntok)
#pragma unroll
        for (int j = 0; j < 8; j++) b[j] = 0u;
      store(v_tile, tok, b);
    }
  }
  st_fence_proxy_async(); // wgmma reads the tiles
}

// K and V of block `page`, kv head g, by the tensor maps, counted on
// `bar`, by one thread: bf16 into the tiles at k_tile and v_tile (64-dim
// panels of 128 rows); RAW_IN_PLACE: the raw rows into the V tile's place,
// raw K then raw V (one 128-byte panel each: HEAD_DIM is 128), for
// st_widen_in_place.
__device__ __forceinline__ void st_copy_kv_block(const st_sparse_attn_params &p, int g, int page, uint32_t k_tile,
                                                 uint32_t v_tile, uint32_t bar) {
  if constexpr (RAW_IN_PLACE) {
    st_mbar_arrive_expect_tx(bar, 2 * BLOCK_TOKENS * HEAD_DIM);
    st_tma_load_4d(v_tile, &p.k_map, 0, 0, g, page, bar);
    st_tma_load_4d(v_tile + BLOCK_TOKENS * HEAD_DIM, &p.v_map, 0, 0, g, page, bar);
    return;
  }
  st_mbar_arrive_expect_tx(bar, 2 * BLOCK_TOKENS * HEAD_DIM * 2);
#pragma unroll
  for (int c = 0; c < HEAD_DIM / 64; c++) {
    st_tma_load_4d(k_tile + c * BLOCK_TOKENS * 128, &p.k_map, c * 64, 0, g, page, bar);
    st_tma_load_4d(v_tile + c * BLOCK_TOKENS * 128, &p.v_map, c * 64, 0, g, page, bar);
  }
}

#include "sparse_attn_dense.cuh"

ST_PARAMS_GATE(st_sparse_attn_params)

// ---- step 0: count, and the last CTA's scan ---------------------------------

// The last CTA: offsets and work items of keys 0 .. nkeys - 1 (exclusive
// sums, one more slot each for the totals), counts back to zero.
__device__ void st_scan_keys(const st_sparse_attn_params &p, int r0, int nr, int (*s_sum)[STEP_THREADS]) {
  const int nkeys = p.num_kv_heads * nr * p.max_blocks;
  const int per = (nkeys + STEP_THREADS - 1) / STEP_THREADS, k0 = min(nkeys, (int)threadIdx.x * per),
            k1 = min(nkeys, k0 + per);
  int entries = 0, items = 0;
  for (int k = k0; k < k1; k++) {
    const int c = __ldcg(&p.ws_count[k]);
    entries += c;
    items += (c + TOKENS - 1) / TOKENS;
  }
  s_sum[0][threadIdx.x] = entries;
  s_sum[1][threadIdx.x] = items;
  __syncthreads();
  for (int d = 1; d < STEP_THREADS; d *= 2) { // inclusive sums (Hillis-Steele)
    const int e = threadIdx.x >= d ? s_sum[0][threadIdx.x - d] : 0, it = threadIdx.x >= d ? s_sum[1][threadIdx.x - d] : 0;
    __syncthreads();
    s_sum[0][threadIdx.x] += e;
    s_sum[1][threadIdx.x] += it;
    __syncthreads();
  }
  int off = s_sum[0][threadIdx.x] - entries, item = s_sum[1][threadIdx.x] - items;
  for (int k = k0; k < k1; k++) {
    const int c = __ldcg(&p.ws_count[k]);
    p.ws_offset[k] = off;
    p.ws_item[k] = item;
    p.ws_count[k] = 0;
    off += c;
    item += (c + TOKENS - 1) / TOKENS;
  }
  if (threadIdx.x == STEP_THREADS - 1) {
    p.ws_offset[nkeys] = s_sum[0][STEP_THREADS - 1];
    p.ws_item[nkeys] = s_sum[1][STEP_THREADS - 1];
    p.ws_header[1] = (uint32_t)r0;
    p.ws_header[2] = (uint32_t)nr;
    p.ws_header[3] = (uint32_t)nkeys;
    p.ws_header[4] = (uint32_t)s_sum[1][STEP_THREADS - 1];
    p.ws_header[5] = 0u; // the bulk merge's next (token, kv head) pair (st_merge_bulk)
  }
}

// Entries of one (kv head, request) count their keys in shared memory
// first, and a CTA adds each key's total to the global count once, where
// one global atomic an entry had serialized (block 0, chosen by every
// token of a request, took 2048 atomics a kv head in a chunk of 2048
// tokens: the count step was 9-15 us in an H100 kernel timeline,
// 2026-11-26). HIST_BLOCKS bounds the shared counts: entries of
// other (kv head, request) pairs than the CTA's first entry's, or of blocks
// past it, count globally as before.
// The counts and the scan's sums are in dynamic shared memory
// (STEP_SMEM_BYTES, given at the count's launch), so that the merge
// launches of the same kernel do not reserve them.
constexpr int HIST_BLOCKS = 2048;
// runtime/ops/sparse_attn.h: ST_SPARSE_ATTN_COUNT_SMEM, the same.
constexpr int STEP_SMEM_BYTES = (HIST_BLOCKS + 2 * STEP_THREADS) * 4;

__device__ void st_count_entries(const st_sparse_attn_params &p) {
  __shared__ bool s_last;
  if (threadIdx.x == 0) st_need_dynamic_smem(STEP_SMEM_BYTES);
  int *s_hist = (int *)s_dyn;
  const int r0 = st_request_of(p.cu_seqlens_q, p.num_requests, p.q0);
  const int nr = st_request_of(p.cu_seqlens_q, p.num_requests, p.q0 + p.nq - 1) - r0 + 1;
  const int per_head = p.nq * p.topk, e = blockIdx.x * STEP_THREADS + threadIdx.x;
  const int e_first = blockIdx.x * STEP_THREADS, g_first = e_first / per_head;
  const int r_first = st_request_of(p.cu_seqlens_q, p.num_requests, p.q0 + (e_first - g_first * per_head) / p.topk);
  const int hist = min(HIST_BLOCKS, p.max_blocks), key_first = (g_first * nr + r_first - r0) * p.max_blocks;
  for (int j = threadIdx.x; j < hist; j += STEP_THREADS) s_hist[j] = 0;
  __syncthreads();
  int key = -1, rank = 0, ntok = 0;
  bool local = false;
  if (e < p.num_kv_heads * per_head) {
    const int g = e / per_head, il = (e - g * per_head) / p.topk, k = e - g * per_head - il * p.topk, i = p.q0 + il;
    const int r = st_request_of(p.cu_seqlens_q, p.num_requests, i);
    const int pos = st_position_in(p.cu_seqlens_q, p.seq_lens, r, i);
    const int32_t j = p.topk_idx[(int64_t)g * p.idx_stride_head + (int64_t)i * p.idx_stride_row + k];
    if (st_dense_token(p, g, r, i)) {
      key = -2; // the dense kernel's (sparse_attn_dense.cuh)
    } else if (j >= 0 && j <= pos / BLOCK_TOKENS && j < p.max_blocks) { // as sparse_attn.cu's entries
      key = (g * nr + r - r0) * p.max_blocks + j;
      ntok = min(BLOCK_TOKENS, pos - j * BLOCK_TOKENS + 1);
      local = g == g_first && r == r_first && j < hist;
      rank = local ? atomicAdd(&s_hist[j], 1) : atomicAdd(&p.ws_count[key], 1);
    }
  }
  __syncthreads();
  for (int j = threadIdx.x; j < hist; j += STEP_THREADS) { // each key's total once; its base in its place
    const int n = s_hist[j];
    if (n) s_hist[j] = atomicAdd(&p.ws_count[key_first + j], n);
  }
  __syncthreads();
  if (e < p.num_kv_heads * per_head) {
    if (local) rank += s_hist[key - key_first];
    p.ws_key[e] = key;
    p.ws_rank[e] = key < 0 ? 0 : rank << 8 | (ntok - 1); // the launcher keeps entries < 2^23
  }
  __syncthreads();
  if (threadIdx.x == 0) s_last = st_last_to_arrive(&p.ws_header[0], gridDim.x);
  __syncthreads();
  if (!s_last) return;
  st_scan_keys(p, r0, nr, (int(*)[STEP_THREADS])(s_dyn + HIST_BLOCKS * 4));
  if (threadIdx.x == 0) p.ws_header[0] = 0u; // ready for the next launch
}

// ---- step 1: scatter -----------------------------------------------------------

// Every valid entry writes itself, (e within its head) << 8 | (visible
// tokens - 1), into its slot of its work item's record; the first entry of
// each item also writes the record's head (key, page, entries) and -1 into
// the slots past its entries. So a block CTA reads an item in one load of
// REC_INTS words, one a lane, with no second load that depends on it. An
// entry that is not valid sets its (m, l) pairs for the merge instead.
// The (m, l) pairs of a warp's entries that are not valid are written by
// the whole warp, one entry's 2 x GROUP floats at a time: a thread writing
// its own entry's 16 pairs stored 8 bytes a line per instruction (the
// scatter took 15 us for a chunk of 2048 tokens of 4096:0, half of whose
// entries are not valid; H100 kernel timeline, 2026-11-26).
__device__ void st_scatter_entries(const st_sparse_attn_params &p) {
  const int per_head = p.nq * p.topk, e = blockIdx.x * STEP_THREADS + threadIdx.x, lane = threadIdx.x & 31;
  const bool in = e < p.num_kv_heads * per_head;
  const int key = in ? p.ws_key[e] : 0;
  for (unsigned idle = __ballot_sync(0xffffffffu, in && key == -1); idle; idle &= idle - 1) { // (-2: a dense token's)
    float *pairs = (float *)p.ws_part_ml + (int64_t)(e - lane + __ffs(idle) - 1) * 2 * GROUP; // weight 0 in the merge
    for (int w = lane; w < 2 * GROUP; w += 32) pairs[w] = w & 1 ? 0.f : -ST_INF;
  }
  if (!in || key < 0) return;
  const int packed = p.ws_rank[e], rank = packed >> 8;
  int32_t *rec = p.ws_item_rec + (int64_t)(p.ws_item[key] + rank / TOKENS) * REC_INTS;
  rec[REC_HEAD + rank % TOKENS] = (e % per_head) << 8 | (packed & 0xff);
  if (rank % TOKENS) return;
  const int per_r = (int)p.ws_header[2] * p.max_blocks, j = key % p.max_blocks;
  const int r = (int)p.ws_header[1] + (key % per_r) / p.max_blocks;
  const int n = min(TOKENS, p.ws_offset[key + 1] - p.ws_offset[key] - rank);
  *(int4 *)rec = make_int4(key, p.block_table[(int64_t)r * p.bt_stride + j], n, 0);
  for (int t = n; t < TOKENS; t++) rec[REC_HEAD + t] = -1;
}

// ---- step 2: merge -------------------------------------------------------------

// Grid (nq, Hkv): token q0 + blockIdx.x, kv head blockIdx.y; a thread per
// 8 dimensions of a q head. Each thread reads its head's topk (m, l) pairs
// itself (the 16 threads of a head read the same words, so one L1 line
// serves them), weighs the entries l_k 2^(m_k - m) / L, and sums the
// weighted partial outputs of the valid ones, MERGE_BATCH loads in flight.
// Two dependent rounds of loads and no CTA barrier: v2.16 read the keys,
// then the pairs into shared memory, then the partials, with two barriers
// between (93 us a chunk of 1664 tokens, 2.4 TB/s). The scatter step gave
// the entries that are not valid (m, l) = (-inf, 0), weight 0. The
// partials are loaded evict-first (and were stored so, st_store_partials):
// read once, they would otherwise push out of L2 the K/V blocks and q rows
// that the next chunk's blocks kernel, running beside the merge, reuses
// (v2.20).
constexpr int MERGE_BATCH = 8;

// A piece of a partial output, 8 dimensions, as floats: bf16 in `lo`, or
// (PART_F32) fp32 in `lo` and `hi`. Both merges read pieces so.
__device__ __forceinline__ void st_partial_piece(uint4 lo, uint4 hi, float (&v)[8]) {
  if (PART_F32) {
    const uint32_t w8[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
    for (int c = 0; c < 8; c++) v[c] = __uint_as_float(w8[c]);
  } else {
    const uint32_t w4[4] = {lo.x, lo.y, lo.z, lo.w};
#pragma unroll
    for (int c = 0; c < 4; c++) {
      v[2 * c] = __uint_as_float(w4[c] << 16);
      v[2 * c + 1] = __uint_as_float(w4[c] & 0xffff0000u);
    }
  }
}

__device__ void st_merge_partials(const st_sparse_attn_params &p) {
  const int il = blockIdx.x, g = blockIdx.y, i = p.q0 + il, topk = p.topk;
  if (st_dense_token_of(p, g, i)) return; // the dense kernel's
  const int64_t e0 = ((int64_t)g * p.nq + il) * topk;
  const float2 *pair = (const float2 *)p.ws_part_ml;
  for (int piece = threadIdx.x; piece < GROUP * (HEAD_DIM / 8); piece += STEP_THREADS) {
    const int h = piece / (HEAD_DIM / 8), d = (piece - h * (HEAD_DIM / 8)) * 8;
    float m = -ST_INF;
    for (int k = 0; k < topk; k++) {
      const float2 ml = pair[(e0 + k) * GROUP + h];
      if (ml.y > 0.f) m = fmaxf(m, ml.x);
    }
    float l = 0.f; // in the order of v2.16's sums (L1 hits from here on)
    for (int k = 0; k < topk; k++) {
      const float2 ml = pair[(e0 + k) * GROUP + h];
      l += ml.y > 0.f ? ml.y * exp2f(ml.x - m) : 0.f;
    }
    const float inv = l > 0.f ? 1.f / l : 0.f;
    if (p.lse && d == 0)
      p.lse[(int64_t)i * p.lse_stride_row + (int64_t)(g * GROUP + h) * p.lse_stride_head] =
          l > 0.f ? (m + __log2f(l)) * LN2 : -ST_INF;
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    for (int k0 = 0; k0 < topk; k0 += MERGE_BATCH) {
      float w[MERGE_BATCH];
      uint4 raw[PART_F32 ? 2 * MERGE_BATCH : MERGE_BATCH];
#pragma unroll
      for (int j = 0; j < MERGE_BATCH; j++) {
        const float2 ml = k0 + j < topk ? pair[(e0 + k0 + j) * GROUP + h] : make_float2(-ST_INF, 0.f);
        w[j] = ml.y > 0.f ? ml.y * exp2f(ml.x - m) * inv : 0.f;
      }
#pragma unroll
      for (int j = 0; j < MERGE_BATCH; j++) {
        const int64_t at = ((e0 + k0 + j) * GROUP + h) * HEAD_DIM + d;
        raw[PART_F32 ? 2 * j : j] = raw[PART_F32 ? 2 * j + 1 : j] = make_uint4(0u, 0u, 0u, 0u);
        if (w[j] == 0.f) continue; // not valid (or past topk): its partial was never written
        if (PART_F32) {
          raw[2 * j] = __ldcs((const uint4 *)((const float *)p.ws_part_o + at));
          raw[2 * j + 1] = __ldcs((const uint4 *)((const float *)p.ws_part_o + at + 4));
        } else {
          raw[j] = __ldcs((const uint4 *)((const uint16_t *)p.ws_part_o + at));
        }
      }
#pragma unroll
      for (int j = 0; j < MERGE_BATCH; j++) {
        if (w[j] == 0.f) continue;
        float v[8];
        st_partial_piece(raw[PART_F32 ? 2 * j : j], raw[PART_F32 ? 2 * j + 1 : j], v);
#pragma unroll
        for (int c = 0; c < 8; c++) acc[c] += v[c] * w[j];
      }
    }
    uint16_t *out = (uint16_t *)p.o + (int64_t)i * p.o_stride_row + (int64_t)(g * GROUP + h) * p.o_stride_head + d;
    uint32_t two[4];
#pragma unroll
    for (int c = 0; c < 4; c++) two[c] = st_pack_bf16(acc[2 * c] * p.v_scale, acc[2 * c + 1] * p.v_scale);
    *(uint4 *)out = make_uint4(two[0], two[1], two[2], two[3]);
  }
}

// ---- step 3: the merge by bulk copies ---------------------------------------

// The same sums as step 2, for merges that run beside the next chunk's
// blocks kernel. There a merge CTA gets only the room two blocks CTAs leave
// an SM (registers for two warps, ~29 KiB of shared memory), and step 2's
// loads in registers keep ~8 KiB a CTA in flight: 0.6 TB/s over the
// machine, a merge beside the blocks took 3x its time alone (H100 kernel
// timeline; docs/kernels/sparse_attn.md, v2.24 and v2.26). Here the bulk
// copy engine keeps p.merge_slots slices of partials in flight a CTA in
// shared memory, at no register cost. A work unit is a (token, kv head) pair's heads in
// BULK_PARTS parts (so that a lane sums at most 4 x 8 dimensions): its
// slice of an entry's partials is HEAD_DIM x GROUP / BULK_PARTS values (2
// KiB for M3). A CTA is two warps: warp 1 takes work units from a counter
// (ws_header[5], zeroed by the count step; CTAs placed late find none
// left), copies the pair's (m, l) words, then the slices of its valid
// entries into a ring of slots; warp 0 weighs them as step 2 does, in the
// same order, and writes o and lse. Launched with two warps
// (ST_SPARSE_ATTN_BULK_THREADS) and the dynamic shared memory of this layout
// (runtime/ops/sparse_attn.c, plan_block, counts the same; too little traps).
constexpr int BULK_PIECES = GROUP * HEAD_DIM / 8; // 8 dimensions of a q head each
constexpr int BULK_PARTS = (BULK_PIECES + 127) / 128;
constexpr int BULK_HEADS = GROUP / BULK_PARTS; // q heads a work unit
constexpr int BULK_PER_LANE = (BULK_HEADS * HEAD_DIM / 8 + 31) / 32;
constexpr bool BULK_OK = GROUP % BULK_PARTS == 0; // the launcher refuses the others
constexpr int BULK_SLICE = BULK_HEADS * HEAD_DIM * (PART_F32 ? 4 : 2);
// Whether a work unit's token lies in a dense tile of its kv head.
__device__ __forceinline__ bool st_dense_unit(const st_sparse_attn_params &p, int unit) {
  const int pair = unit / BULK_PARTS, g = pair / p.nq, i = p.q0 + pair % p.nq;
  return st_dense_token_of(p, g, i);
}
// A pair's (m, l) words, with room to start the copy 16 bytes aligned below.
__device__ __forceinline__ int st_bulk_pair_bytes(int topk) { return (topk * GROUP * 8 + 16 + 15) / 16 * 16; }

__device__ void st_merge_bulk(const st_sparse_attn_params &p) {
  if constexpr (BULK_OK) {
    const int slots = p.merge_slots, topk = p.topk, warp = threadIdx.x / 32, lane = threadIdx.x & 31;
    const int pair_bytes = st_bulk_pair_bytes(topk), nunits = p.num_kv_heads * p.nq * BULK_PARTS;
    char *ring = s_dyn, *pairs = s_dyn + slots * BULK_SLICE;
    int *s_unit = (int *)(pairs + 2 * pair_bytes), *s_off = s_unit + 2;
    uint64_t *bars = (uint64_t *)(s_unit + 4); // full[slots], empty[slots], pair full[2], pair empty[2]
    float2 *s_minv = (float2 *)(bars + 2 * slots + 4); // [BULK_HEADS] the unit's heads' m and 1 / l
    const uint32_t full0 = st_smem_addr(bars), empty0 = full0 + 8 * slots, pfull0 = empty0 + 8 * slots,
                   pempty0 = pfull0 + 16;
    if (threadIdx.x == 0) {
      st_need_dynamic_smem(st_smem_addr(s_minv + BULK_HEADS) - st_smem_addr(s_dyn));
      for (int s = 0; s < 2 * slots + 4; s++) st_mbar_init(full0 + 8 * s, 1);
      st_mbar_init_fence();
    }
    __syncthreads();
    if (warp == 1) { // the copies
      const uint64_t policy = st_l2_evict_first();
      for (int j = 0, u = 0;; j++) {
        const int ps = j & 1;
        if (j >= 2) st_mbar_wait(pempty0 + 8 * ps, ((j >> 1) - 1) & 1);
        int unit;
        do { // (units of dense tokens are the dense kernel's)
          unit = lane == 0 ? (int)atomicAdd(&p.ws_header[5], 1u) : 0;
          unit = __shfl_sync(0xffffffffu, unit, 0);
        } while (unit < nunits && st_dense_unit(p, unit));
        if (unit >= nunits) {
          if (lane == 0) {
            s_unit[ps] = -1;
            st_mbar_arrive(pfull0 + 8 * ps);
          }
          return;
        }
        const int pair = unit / BULK_PARTS, part = unit - pair * BULK_PARTS;
        if (lane == 0) {
          const char *src = (const char *)p.ws_part_ml + (int64_t)pair * topk * GROUP * 8;
          const char *at = (const char *)((unsigned long long)src & ~15ull);
          s_unit[ps] = unit;
          s_off[ps] = (int)(src - at);
          const uint32_t bytes = (uint32_t)((src - at) + topk * GROUP * 8 + 15) / 16 * 16;
          st_mbar_arrive_expect_tx(pfull0 + 8 * ps, bytes);
          st_bulk_copy_g2s(st_smem_addr(pairs + ps * pair_bytes), at, bytes, pfull0 + 8 * ps);
        }
        st_mbar_wait(pfull0 + 8 * ps, (j >> 1) & 1);
        const float2 *ml = (const float2 *)(pairs + ps * pair_bytes + s_off[ps]);
        const char *part_o = (const char *)p.ws_part_o + ((int64_t)pair * topk * BULK_PARTS + part) * BULK_SLICE;
        for (int k0 = 0; k0 < topk; k0 += 32) {
          for (unsigned valid = __ballot_sync(0xffffffffu, k0 + lane < topk && ml[(k0 + lane) * GROUP].y > 0.f); valid;
               valid &= valid - 1, u++) {
            const int k = k0 + __ffs(valid) - 1, s = u % slots;
            if (u >= slots) st_mbar_wait(empty0 + 8 * s, (u / slots - 1) & 1);
            if (lane == 0) {
              st_mbar_arrive_expect_tx(full0 + 8 * s, BULK_SLICE);
              st_bulk_copy_g2s_hint(st_smem_addr(ring + s * BULK_SLICE), part_o + (int64_t)k * BULK_PARTS * BULK_SLICE,
                                    BULK_SLICE, full0 + 8 * s, policy);
            }
          }
        }
      }
    }
    // warp 0: the sums
    for (int j = 0, u = 0;; j++) {
      const int ps = j & 1;
      st_mbar_wait(pfull0 + 8 * ps, (j >> 1) & 1);
      const int unit = s_unit[ps];
      if (unit < 0) return;
      const int pair = unit / BULK_PARTS, h0 = (unit - pair * BULK_PARTS) * BULK_HEADS;
      const float2 *ml = (const float2 *)(pairs + ps * pair_bytes + s_off[ps]) + h0;
      const int g = pair / p.nq, il = pair - g * p.nq, i = p.q0 + il;
      float m = -ST_INF, l = 0.f; // lane h: q head h0 + h's, in the order of step 2
      if (lane < BULK_HEADS) {
        for (int k = 0; k < topk; k++) {
          const float2 x = ml[k * GROUP + lane];
          if (x.y > 0.f) m = fmaxf(m, x.x);
        }
        for (int k = 0; k < topk; k++) {
          const float2 x = ml[k * GROUP + lane];
          l += x.y > 0.f ? x.y * exp2f(x.x - m) : 0.f;
        }
        if (p.lse)
          p.lse[(int64_t)i * p.lse_stride_row + (int64_t)(g * GROUP + h0 + lane) * p.lse_stride_head] =
              l > 0.f ? (m + __log2f(l)) * LN2 : -ST_INF;
      }
      if (lane < BULK_HEADS) s_minv[lane] = make_float2(m, l > 0.f ? 1.f / l : 0.f);
      __syncwarp();
      float acc[BULK_PER_LANE][8];
#pragma unroll
      for (int c = 0; c < BULK_PER_LANE; c++)
#pragma unroll
        for (int d = 0; d < 8; d++) acc[c][d] = 0.f;
      for (int k0 = 0; k0 < topk; k0 += 32) {
        for (unsigned valid = __ballot_sync(0xffffffffu, k0 + lane < topk && ml[(k0 + lane) * GROUP - h0].y > 0.f);
             valid; valid &= valid - 1, u++) {
          const int k = k0 + __ffs(valid) - 1, s = u % slots;
          st_mbar_wait(full0 + 8 * s, (u / slots) & 1);
          const char *slice = ring + s * BULK_SLICE;
#pragma unroll
          for (int c = 0; c < BULK_PER_LANE; c++) {
            const int piece = lane + 32 * c;
            if (piece >= BULK_HEADS * HEAD_DIM / 8) break;
            const float2 x = ml[k * GROUP + piece / (HEAD_DIM / 8)], mi = s_minv[piece / (HEAD_DIM / 8)];
            const float w = x.y > 0.f ? x.y * exp2f(x.x - mi.x) * mi.y : 0.f;
            const uint4 *at = (const uint4 *)slice + (PART_F32 ? 2 * piece : piece);
            float v[8];
            st_partial_piece(at[0], PART_F32 ? at[1] : at[0], v);
#pragma unroll
            for (int d = 0; d < 8; d++) acc[c][d] += v[d] * w;
          }
          __syncwarp();
          if (lane == 0) st_mbar_arrive(empty0 + 8 * s);
        }
      }
      __syncwarp(); // and s_minv is read before the next unit writes it
      if (lane == 0) st_mbar_arrive(pempty0 + 8 * ps);
#pragma unroll
      for (int c = 0; c < BULK_PER_LANE; c++) {
        const int piece = lane + 32 * c;
        if (piece >= BULK_HEADS * HEAD_DIM / 8) break;
        const int h = h0 + piece / (HEAD_DIM / 8), d = (piece % (HEAD_DIM / 8)) * 8;
        uint16_t *out = (uint16_t *)p.o + (int64_t)i * p.o_stride_row + (int64_t)(g * GROUP + h) * p.o_stride_head + d;
        uint32_t two[4];
#pragma unroll
        for (int e = 0; e < 4; e++) two[e] = st_pack_bf16(acc[c][2 * e] * p.v_scale, acc[c][2 * e + 1] * p.v_scale);
        *(uint4 *)out = make_uint4(two[0], two[1], two[2], two[3]);
      }
    }
  }
}

extern "C" __global__ void __launch_bounds__(STEP_THREADS, 4) st_sparse_attn_merge(const st_sparse_attn_params p) {
  if (p.step == 0)
    st_count_entries(p);
  else if (p.step == 1)
    st_scatter_entries(p);
  else if (p.step == 2)
    st_merge_partials(p);
  else if (p.step == 3)
    st_merge_bulk(p);
  else if (p.step == 4)
    st_dense_find(p);
  else
    st_dense_place(p);
}

// ---- the blocks ------------------------------------------------------------------

// One work item in shared memory: its kv head, page and entries (entry
// within the head's part of the chunk, and how many of the block's tokens
// it sees), and per token where its q rows start (elements from p.q, kv
// head included) and its first partial state (entry * GROUP, kv head
// included), so the copies and the writes need no division.
struct st_item {
  int g, page, n, ntok_max;
  int reuse;                       // PASSES2: the tiles hold this block already (st_produce_items)
  int ntok[TOKENS], token[TOKENS]; // token: its row of q
  int64_t q_at[TOKENS], state[TOKENS];
};

// Warp 0: lane i loads word i of item x's record (in flight until used).
__device__ __forceinline__ int st_load_record(const st_sparse_attn_params &p, int x, int items) {
  const int lane = threadIdx.x & 31;
  return x < items && lane < REC_INTS ? __ldcg(p.ws_item_rec + (int64_t)x * REC_INTS + lane) : -1;
}

// Warp 0: the record's words (lane i: word i) into `it`. The caller syncs
// before anyone reads it.
__device__ __forceinline__ void st_store_item(const st_sparse_attn_params &p, int word, int keys_per_head,
                                              st_item &it) {
  const int lane = threadIdx.x & 31, t = lane - REC_HEAD;
  const int key = __shfl_sync(0xffffffffu, word, 0), page = __shfl_sync(0xffffffffu, word, 1),
            n = __shfl_sync(0xffffffffu, word, 2);
  const bool slot = t >= 0 && t < TOKENS, entry_ok = slot && word >= 0;
  const int ntok = entry_ok ? (word & 0xff) + 1 : 0;
  int most = ntok; // the item's most visible tokens
#pragma unroll
  for (int o = 16; o >= 1; o /= 2) most = max(most, __shfl_xor_sync(0xffffffffu, most, o));
  const int g = key / keys_per_head;
  if (slot) {
    const int entry = entry_ok ? word >> 8 : 0;
    it.ntok[t] = ntok;
    it.token[t] = p.q0 + entry / p.topk;
    it.q_at[t] = (int64_t)(p.q0 + entry / p.topk) * p.q_stride_row + (int64_t)g * GROUP * p.q_stride_head;
    it.state[t] = ((int64_t)g * p.nq * p.topk + entry) * GROUP;
  }
  if (lane == 0) {
    it.g = g;
    it.page = page;
    it.n = n;
    it.ntok_max = most;
  }
}

// Byte offset of chunk c of q row m in a q tile (wgmma: panels).
__device__ __forceinline__ uint32_t st_q_offset(int m, int c) {
  return WGMMA ? st_panel_offset(ROWS, m, c) : (uint32_t)st_swizzle_offset<ROW_CHUNKS>(m, c);
}

// After a sync: the copies of item `it`'s block (rows past its most visible
// token zeroed) and q rows (row m = token slot t * GROUP + head h, zeros
// past the item's tokens) into stage b.
// KV_TMA: the copies of item `it`'s K and V into stage b on barrier
// kv_bar, by the calling thread.
// RAW_IN_PLACE: raw K (one 128-byte panel: HEAD_DIM is 128) into the
// region's upper half, raw V after it, in stage 0.
__device__ __forceinline__ void st_issue_kv_maps(const st_sparse_attn_params &p, const st_item &it, char *region, int b,
                                                 uint32_t kv_bar) {
  const uint32_t k_tile = RAW_IN_PLACE ? st_smem_addr(region) : st_kv::k_tile(region, b);
  st_copy_kv_block(p, it.g, it.page, k_tile, k_tile + st_kv::TILE_BYTES, kv_bar);
}

__device__ __forceinline__ void st_issue_kv(const st_sparse_attn_params &p, const st_item &it, char *region, int b,
                                            uint32_t kv_bar) {
  if constexpr (KV_TMA) {
    if (threadIdx.x == 0) st_issue_kv_maps(p, it, region, b, kv_bar);
  } else {
    st_kv::issue(p, it.g, it.page, it.ntok_max, region, b);
  }
}

__device__ __forceinline__ void st_issue_q(const st_sparse_attn_params &p, const st_item &it, char *q_smem, int qb) {
  const uint32_t q_tile = st_smem_addr(q_smem + qb * Q_BYTES);
  const int c = threadIdx.x % ROW_CHUNKS;
  for (int m = threadIdx.x / ROW_CHUNKS; m < ROWS; m += THREADS / ROW_CHUNKS) {
    const int t = m / GROUP, h = m % GROUP;
    const bool real = m < REAL_ROWS && t < it.n;
    const uint16_t *src = (const uint16_t *)p.q;
    if (real) src += it.q_at[t] + (int64_t)h * p.q_stride_head + c * 8;
    st_cp_async16(q_tile + st_q_offset(m, c), src, real ? 16 : 0);
  }
}

__device__ __forceinline__ void st_issue_item(const st_sparse_attn_params &p, const st_item &it, char *q_smem,
                                              char *region, int b, uint32_t kv_bar) {
  st_issue_kv(p, it, region, b, kv_bar);
  st_issue_q(p, it, q_smem, b);
}

// KV_TMA: after stage b's copies have landed, its V rows at and past the
// item's most visible token become zeros, as st_kv::issue leaves them (a
// masked key's weight is exactly 0, but 0 * NaN is not, and the copy brought
// the page's rows as they are). Then a proxy fence: wgmma reads them.
__device__ __forceinline__ void st_zero_v_tail(char *region, int b, int ntok) {
  if (ntok >= st_kv::BLOCK_TOKENS) return;
  const uint32_t v_tile = st_kv::k_tile(region, b) + st_kv::TILE_BYTES;
  for (int e = threadIdx.x; e < (st_kv::BLOCK_TOKENS - ntok) * ROW_CHUNKS; e += THREADS) {
    const int tok = ntok + e / ROW_CHUNKS, c = e % ROW_CHUNKS;
    asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(v_tile + st_kv::tile_offset(tok, c)), "r"(0)
                 : "memory");
  }
  st_fence_proxy_async();
}

// The partials of a warp's m-tile (rows m0 ..): (m, l) and O / l of each
// row that saw a key. bf16: O / l goes through the warp's own rows of the
// q tile at q_tile (free once its products are done), so that the global
// writes are whole 16-byte chunks of rows, not 4-byte pieces (v2.3 spent
// a quarter of its issue stalls on those).
__device__ __forceinline__ void st_write_partials(const st_sparse_attn_params &p, const st_item &it,
                                                  const st_softmax_state<HEAD_DIM> &st, int m0, const int (&lim)[2],
                                                  char *q_tile) {
  const int lane = threadIdx.x & 31;
  if (!PART_F32) __syncwarp(); // every lane's ldmatrix reads of these rows are done
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    const int m = m0 + (lane >> 2) + rr * 8, t = m / GROUP, h = m % GROUP;
    if (lim[rr] == 0) continue;
    const int64_t state = it.state[t] + h;
    const float l_row = st.l[rr], inv = l_row > 0.f ? 1.f / l_row : 0.f;
    if ((lane & 3) == 0) *(float2 *)(p.ws_part_ml + state * 2) = make_float2(st.m[rr], l_row);
#pragma unroll
    for (int dt = 0; dt < DT; dt++) {
      const int d = dt * 8 + 2 * (lane & 3);
      const float a = st.o[dt][rr * 2] * inv, c = st.o[dt][rr * 2 + 1] * inv;
      if (PART_F32)
        *(float2 *)((float *)p.ws_part_o + state * HEAD_DIM + d) = make_float2(a, c);
      else
        *(uint32_t *)(q_tile + st_q_offset(m, dt) + 4 * (lane & 3)) = st_pack_bf16(a, c);
    }
  }
  if (PART_F32) return;
  __syncwarp();
  // 16 rows x ROW_CHUNKS chunks, a lane per chunk: rows of one token's
  // heads are consecutive states, so a warp writes whole rows.
#pragma unroll
  for (int e = lane; e < 16 * ROW_CHUNKS; e += 32) {
    const int m = m0 + e / ROW_CHUNKS, c = e % ROW_CHUNKS, t = m / GROUP, h = m % GROUP;
    if (m >= REAL_ROWS || t >= it.n) continue; // padding rows: nothing to write
    *(uint4 *)((uint16_t *)p.ws_part_o + (it.state[t] + h) * HEAD_DIM + c * 8) = *(const uint4 *)(q_tile + st_q_offset(m, c));
  }
}

// PASSES2: q half `half` of item `it` (its tokens' rows, GROUP heads each,
// one 128-byte panel a copy) into the q tile at q_tile by tensor maps, on
// barrier `bar` (thread 0). Slots past the item's tokens are not copied:
// their rows see no key (lim 0), so whatever the tile held there is masked
// to -inf before the softmax and never written out.
__device__ __forceinline__ void st_issue_q_half(const st_sparse_attn_params &p, const st_item &it, uint32_t q_tile,
                                                int half, uint32_t bar) {
  constexpr int HALF_TOKENS = HALF_ROWS / GROUP;
  const int t0 = half * HALF_TOKENS, n = min(max(it.n - t0, 0), HALF_TOKENS);
  st_mbar_arrive_expect_tx(bar, (uint32_t)(n * GROUP * HEAD_DIM * 2));
  for (int t = t0; t < t0 + n; t++)
#pragma unroll
    for (int c = 0; c < HEAD_DIM / 64; c++)
      st_tma_load_3d(q_tile + c * ROWS * 128 + t * GROUP * 128, &p.q_map, c * 64, it.g * GROUP, it.token[t], bar);
}

// PASSES2, bf16 partials: the warp's 16 rows from m0 (st_write_partials'
// rows: (m, l) written, O / l as bf16) into the q tile at q_tile by
// stmatrix (4 n-tiles' fragments a store), then to the workspace by
// tensor maps: a box of min(GROUP, 16) rows of one token per panel, from
// lane 0, in its bulk group. The tile's rows may be written again once
// lane 0 has waited for the group's reads (st_bulk_wait_read).
__device__ __forceinline__ void st_store_partials(const st_sparse_attn_params &p, const st_item &it,
                                                  const st_softmax_state<HEAD_DIM> &st, int m0, const int (&lim)[2],
                                                  uint32_t q_tile) {
  constexpr int BOX = GROUP < 16 ? GROUP : 16;
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    if (lim[rr] == 0) continue;
    const int m = m0 + (lane >> 2) + rr * 8, t = m / GROUP, h = m % GROUP;
    if ((lane & 3) == 0) *(float2 *)(p.ws_part_ml + (it.state[t] + h) * 2) = make_float2(st.m[rr], st.l[rr]);
  }
  const float inv[2] = {st.l[0] > 0.f ? __frcp_rn(st.l[0]) : 0.f, st.l[1] > 0.f ? __frcp_rn(st.l[1]) : 0.f};
  // Lane i addresses row i % 8 of matrix i / 8: rows m0 + 8 (j % 2) ..,
  // chunk dt + j / 2 (8 dimensions a chunk).
  const int row = m0 + (lane & 7) + ((lane >> 3) & 1) * 8, half_chunk = lane >> 4;
#pragma unroll
  for (int dt = 0; dt < DT; dt += 2) {
    const uint32_t r[4] = {st_pack_bf16(st.o[dt][0] * inv[0], st.o[dt][1] * inv[0]),
                           st_pack_bf16(st.o[dt][2] * inv[1], st.o[dt][3] * inv[1]),
                           st_pack_bf16(st.o[dt + 1][0] * inv[0], st.o[dt + 1][1] * inv[0]),
                           st_pack_bf16(st.o[dt + 1][2] * inv[1], st.o[dt + 1][3] * inv[1])};
    st_stmatrix_x4(q_tile + st_q_offset(row, dt + half_chunk), r);
  }
  st_fence_proxy_async(); // this lane's stores, before the copy engine reads them
  __syncwarp();
  if (lane != 0) return;
  const uint64_t stream = st_l2_evict_first(); // read once, by the merge
#pragma unroll
  for (int r0 = 0; r0 < 16; r0 += BOX) {
    const int m = m0 + r0, t = m / GROUP;
    if (m >= REAL_ROWS || t >= it.n) continue; // padding rows: nothing to write
#pragma unroll
    for (int c = 0; c < HEAD_DIM / 64; c++)
      st_tma_store_2d(&p.part_map, c * 64, (int)(it.state[t] + m % GROUP), q_tile + c * ROWS * 128 + m * 128, stream);
  }
  st_bulk_commit();
}

// PASSES2: the CTA is four consumer warps (one warpgroup: the products,
// softmax and partials) and a producer warp (records and every copy), which
// hand buffers over on mbarriers alone: no CTA-wide barrier in the loop.
// The producer fills a buffer as soon as the consumers have arrived on its
// `empty` barrier (one arrival a consumer warp): the next item's q half 0
// once this item's first-pass partials have been read out of it (which a
// warp waits for after issuing its second-pass scores, v2.18), its K and V
// once the second pass's products are done, its q half 1 once the second
// pass's partials have been read out (waited for after the next item's
// first scores). Records go through two slots of shared memory: the
// producer's lanes write one, __syncwarp, and lane 0 arrives on its `full`
// barrier (a release); the consumers wait on it (an acquire) and, done,
// arrive on its `empty` barrier likewise. (racecheck reports the slot's
// writes and reads as hazards, with named barriers too, even blocking ones
// on both sides, so the report is taken for the tool's: it seems not to
// order accesses across barriers that only some warps take;
// docs/kernels/sparse_attn.md, "racecheck and the record handoff".)
// Barriers, at bar0 + 8 x index (s_pass_bar):
enum : int {
  BAR_REC_FULL = 0,
  BAR_REC_EMPTY = 2,
  BAR_KV_FULL = 4,
  BAR_KV_EMPTY = 5,
  BAR_Q_FULL = 6,
  BAR_Q_EMPTY = 8,
  PASS_BARS = 10
};

// The consumer warps alone (named barrier 1): after mbarrier waits, so that
// ptxas does not take the warps for divergent and serialize the wgmma, and
// after the V rows past an item's tokens are zeroed.
__device__ __forceinline__ void st_consumer_sync() { asm volatile("bar.sync 1, 128;\n" ::: "memory"); }

// PASSES2: the CTA's items of the chunk, first, first + stride, ...
// (count of them). RAW_IN_PLACE (v2.33): a contiguous range. A key's
// items are consecutive (st_scan_keys), so a CTA's next item then mostly
// reads the block it already holds, which is neither copied nor widened
// again (st_produce_items): fp8 4096:0 -10%, 8192:57344 -14%. bf16 keeps
// c, c + gridDim.x, ...: with contiguous ranges it was 0-2% slower (its
// copies cost less than a widening, and neighbouring CTAs then read
// different blocks).
struct st_item_walk {
  int first, stride, count;
  __device__ explicit st_item_walk(int items) {
    if (RAW_IN_PLACE) {
      first = (int)((int64_t)blockIdx.x * items / gridDim.x);
      stride = 1;
      count = (int)((int64_t)(blockIdx.x + 1) * items / gridDim.x) - first;
    } else {
      first = blockIdx.x;
      stride = gridDim.x;
      count = (int)blockIdx.x < items ? (items - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;
    }
  }
};

// PASSES2, the producer warp: the CTA's items (st_item_walk). An item
// reuses the block in the tiles when it is the same (kv head, page) and
// sees no more of its tokens than the item that brought it (whose most
// visible token bounded the rows kept: the V rows past it are zeros); then
// the stage's barrier gets a plain arrival instead of copies.
__device__ __forceinline__ void st_produce_items(const st_sparse_attn_params &p, st_item *s_it, uint32_t q_tile,
                                                 char *region, uint32_t bar0, int items, int keys_per_head) {
  const int lane = threadIdx.x & 31;
  const st_item_walk walk(items);
  int word = st_load_record(p, walk.first, walk.count > 0 ? items : 0);
  int held_g = -1, held_page = -1, held_ntok = 0; // the block the tiles hold (every lane alike)
  for (int step = 0; step < walk.count; step++) {
    const int slot = step & 1;
    if (step >= 2) st_mbar_wait(bar0 + 8 * (BAR_REC_EMPTY + slot), ((step >> 1) - 1) & 1);
    st_store_item(p, word, keys_per_head, s_it[slot]);
    word = st_load_record(p, walk.first + (step + 1) * walk.stride, step + 1 < walk.count ? items : 0);
    __syncwarp();
    const st_item &it = s_it[slot];
    const bool reuse = it.g == held_g && it.page == held_page && it.ntok_max <= held_ntok;
    if (lane == 0) {
      s_it[slot].reuse = reuse;
      st_mbar_arrive(bar0 + 8 * (BAR_REC_FULL + slot));
    }
    if (step >= 1) st_mbar_wait(bar0 + 8 * BAR_Q_EMPTY, (step - 1) & 1);
    if (lane == 0) st_issue_q_half(p, it, q_tile, 0, bar0 + 8 * BAR_Q_FULL);
    if (step >= 1) st_mbar_wait(bar0 + 8 * BAR_KV_EMPTY, (step - 1) & 1);
    if (reuse) {
      if (lane == 0) st_mbar_arrive(bar0 + 8 * BAR_KV_FULL);
    } else {
      held_g = it.g;
      held_page = it.page;
      held_ntok = it.ntok_max;
      if (RAW_IN_PLACE && p.scale_mode == 2) {
        st_issue_kv_scales(p, it.g, it.page, it.ntok_max, region, bar0 + 8 * BAR_KV_FULL);
        __syncwarp(); // every lane's tracking arrival before lane 0's
      }
      if (lane == 0) st_issue_kv_maps(p, it, region, 0, bar0 + 8 * BAR_KV_FULL);
    }
    if (step >= 1) st_mbar_wait(bar0 + 8 * (BAR_Q_EMPTY + 1), (step - 1) & 1);
    if (lane == 0) st_issue_q_half(p, it, q_tile, 1, bar0 + 8 * (BAR_Q_FULL + 1));
  }
}

// PASSES2, the consumer warps: each item in two passes of HALF_ROWS q rows
// over its K/V block. (A template, so that kernels without passes, of
// other head dims, do not instantiate it.) TENSOR: RAW_IN_PLACE in tensor
// mode, whose scores take the block's K scales and whose V is bf16. The
// kernel picks the instance once, for the whole loop: with the choice
// inside it, per block, ptxas serialized the fp8 c2 kernel's wgmma for
// want of registers (C7512; v2.34, docs/kernels/sparse_attn.md).
template <int D, bool TENSOR>
__device__ __forceinline__ void st_consume_items(const st_sparse_attn_params &p, const st_item *s_it, char *q_stage,
                                                 char *region, uint32_t bar0, int items) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const uint32_t q_tile = st_smem_addr(q_stage),
                 k_tile = RAW_IN_PLACE ? st_smem_addr(region) : st_kv::k_tile(region, 0);
  static_assert(RAW_IN_PLACE || !TENSOR, "tensor-mode K/V widened in place");
  const float *k_scale = TENSOR ? (const float *)(region + 2 * st_kv::TILE_BYTES) : nullptr;
  // The q half whose partials' copies this warp has not yet waited for
  // (-1: none). It waits once the next pass's score products are issued,
  // so the copies read the tile under those products (v2.18; waiting right
  // after the copies took 8% of the math warps' samples), and then gives
  // the half back.
  int unread = -1;
  const auto give_back_half = [&]() {
    if (unread < 0) return;
    if (lane == 0) {
      st_bulk_wait_read();
      st_mbar_arrive(bar0 + 8 * (BAR_Q_EMPTY + unread)); // this warp's rows of the half are free
    }
    __syncwarp();
    unread = -1;
  };
  const int steps = st_item_walk(items).count;
  for (int step = 0; step < steps; step++) {
    const int slot = step & 1, phase = step & 1;
    st_mbar_wait(bar0 + 8 * (BAR_REC_FULL + slot), (step >> 1) & 1);
    const st_item &it = s_it[slot];
    st_mbar_wait(bar0 + 8 * BAR_KV_FULL, phase);
    if (!it.reuse) { // (reused: the tiles hold the block, widened, its V tail zeroed)
      if constexpr (RAW_IN_PLACE) {
        st_widen_in_place<TENSOR>(p, region, it.ntok_max, threadIdx.x);
      } else {
        st_zero_v_tail(region, 0, it.ntok_max);
      }
    }
#pragma unroll 1
    for (int pass = 0; pass < 2; pass++) {
      st_mbar_wait(bar0 + 8 * (BAR_Q_FULL + pass), phase);
      st_consumer_sync(); // pass 0: the zeroed (RAW_IN_PLACE: widened) K and V rows too
      // Warpgroup rows m0 ..; warp-uniform through lane 0, as in the
      // kernel's one-pass path.
      const int m0 = __shfl_sync(0xffffffffu, pass * HALF_ROWS, 0);
      const bool rows = __shfl_sync(0xffffffffu, m0 < REAL_ROWS && m0 / GROUP < it.n, 0);
      int lim[2];
#pragma unroll
      for (int rr = 0; rr < 2; rr++) {
        const int m = pass * HALF_ROWS + warp * 16 + (lane >> 2) + rr * 8, t = m / GROUP;
        lim[rr] = m < REAL_ROWS && t < it.n ? it.ntok[t] : 0; // padding rows see nothing
      }
      st_softmax_state<HEAD_DIM> st;
      if (rows) {
        // RAW_IN_PLACE: V is f16 unless in tensor mode
        st_attend_block_wg<D, ROWS, TENSOR, RAW_IN_PLACE && !TENSOR>(q_tile, m0, k_tile, k_tile + st_kv::TILE_BYTES,
                                                                     lim, p.score_scale_log2, k_scale, st,
                                                                     give_back_half);
        st_softmax_finish_l(st);
      }
      give_back_half(); // (no products this pass)
      if (pass == 1 && lane == 0) st_mbar_arrive(bar0 + 8 * BAR_KV_EMPTY); // this warp's products are done
      if (rows && !PART_F32) {
        st_store_partials(p, it, st, pass * HALF_ROWS + warp * 16, lim, q_tile);
        unread = pass;
      } else {
        if (rows) st_write_partials(p, it, st, pass * HALF_ROWS + warp * 16, lim, q_stage);
        __syncwarp();
        if (lane == 0) st_mbar_arrive(bar0 + 8 * (BAR_Q_EMPTY + pass)); // this warp's rows of the half are free
      }
    }
    __syncwarp();
    if (lane == 0) st_mbar_arrive(bar0 + 8 * (BAR_REC_EMPTY + slot)); // this warp is done with the record
  }
  give_back_half();
  if (!PART_F32 && lane == 0) st_bulk_wait(); // the partials' copies, done before the CTA leaves
}

// Persistent: CTA c takes work items c, c + gridDim.x, ... of the chunk
// (ws_header[4] in all; PASSES2: st_item_walk). With STAGES 2 the next
// item's block and q rows load while this one's are used; with SPLIT its q
// rows do, and its block loads while this one's partials are written.
// Records are read one item ahead of their use (warp 0 holds the words in
// a register meanwhile), so no CTA waits on a record's load.
extern "C" __global__ void __launch_bounds__(BLOCK_THREADS, CTAS_PER_SM)
    st_sparse_attn_main(const __grid_constant__ st_sparse_attn_params p) {
  __shared__ st_item s_it[ITEM_STAGES];
  __shared__ __align__(8) uint64_t s_kv_bar[STAGES];                    // KV_TMA: stage b's K and V have landed
  __shared__ __align__(8) uint64_t s_pass_bar[PASSES2 ? PASS_BARS : 1]; // PASSES2: st_consume_items' barriers
  // wgmma's 128-byte swizzle is of address bits: panels start on
  // 1024-byte boundaries (the static s_it comes before s_dyn).
  char *q_smem = WGMMA ? s_dyn + ((1024u - (st_smem_addr(s_dyn) & 1023u)) & 1023u) : s_dyn;
  char *region = q_smem + Q_STAGES * Q_BYTES;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, items = (int)p.ws_header[4];
  const int keys_per_head = (int)p.ws_header[2] * p.max_blocks; // the chunk's requests x blocks
  if (threadIdx.x == 0) {
    st_need_dynamic_smem(SMEM_BYTES);
    if (KV_TMA) {
      for (int b = 0; b < STAGES; b++) st_mbar_init(st_smem_addr(&s_kv_bar[b]), 1);
      if (PASSES2)
        for (int b = 0; b < PASS_BARS; b++) // `empty` barriers count the consumer warps, the rest one arrival
          st_mbar_init(st_smem_addr(&s_pass_bar[b]),
                       b == BAR_KV_EMPTY || (b >= BAR_REC_EMPTY && b < BAR_KV_FULL) || b >= BAR_Q_EMPTY ? WARPS : 1);
      st_mbar_init_fence();
    }
  }
  if (KV_TMA) __syncthreads(); // the barriers, before any copy signals them
  if constexpr (PASSES2) {
    const uint32_t bar0 = st_smem_addr(&s_pass_bar[0]);
    if (warp == WARPS)
      st_produce_items(p, s_it, st_smem_addr(q_smem), region, bar0, items, keys_per_head);
    else if (RAW_IN_PLACE && p.scale_mode == 2) // (TENSOR = RAW_IN_PLACE, true here: bf16 never instantiates it)
      st_consume_items<HEAD_DIM, RAW_IN_PLACE>(p, s_it, q_smem, region, bar0, items);
    else
      st_consume_items<HEAD_DIM, false>(p, s_it, q_smem, region, bar0, items);
    return;
  }
  // word: warp 0's register copy of the record after the one in s_it.
  int word = warp == 0 ? st_load_record(p, blockIdx.x, items) : 0;
  if ((STAGES == 2 || SPLIT) && (int)blockIdx.x < items) {
    if (warp == 0) {
      st_store_item(p, word, keys_per_head, s_it[0]);
      word = st_load_record(p, blockIdx.x + gridDim.x, items);
    }
    __syncthreads();
    st_issue_item(p, s_it[0], q_smem, region, 0, st_smem_addr(&s_kv_bar[0]));
    st_cp_async_commit();
  }
  for (int x = blockIdx.x, step = 0; x < items; x += gridDim.x, step++) {
    // b: this item's K/V stage; qb: its q tile and record.
    const int b = STAGES == 2 ? step & 1 : 0, qb = Q_STAGES == 2 ? step & 1 : 0, next = x + gridDim.x;
    if (SPLIT) { // s_it[qb ^ 1] and q tile qb ^ 1 were last read before the previous step's closing sync
      if (warp == 0 && next < items) {
        st_store_item(p, word, keys_per_head, s_it[qb ^ 1]);
        word = st_load_record(p, next + gridDim.x, items);
      }
      __syncthreads();
      if (next < items) st_issue_q(p, s_it[qb ^ 1], q_smem, qb ^ 1); // its K and V follow this item's products
      st_cp_async_commit();
      st_cp_async_wait<1>();
    } else if (STAGES == 2) { // s_it[b ^ 1] and stage b ^ 1 were last read before the previous step's closing sync
      if (warp == 0 && next < items) {
        st_store_item(p, word, keys_per_head, s_it[b ^ 1]);
        word = st_load_record(p, next + gridDim.x, items);
      }
      __syncthreads();
      if (next < items) st_issue_item(p, s_it[b ^ 1], q_smem, region, b ^ 1, st_smem_addr(&s_kv_bar[b ^ 1]));
      st_cp_async_commit();
      st_cp_async_wait<1>();
    } else {
      if (warp == 0) {
        st_store_item(p, word, keys_per_head, s_it[0]);
        word = st_load_record(p, next, items);
      }
      __syncthreads();
      st_issue_item(p, s_it[0], q_smem, region, 0, st_smem_addr(&s_kv_bar[0]));
      st_cp_async_commit();
      st_cp_async_wait<0>();
    }
    if (WGMMA) st_fence_proxy_async(); // this thread's copies, before wgmma reads them
    if (KV_TMA) { // stage b's K and V (its (step / STAGES)-th use); the V rows past the item's tokens zeroed
      st_mbar_wait(st_smem_addr(&s_kv_bar[b]), (step / STAGES) & 1);
      st_zero_v_tail(region, b, s_it[qb].ntok_max);
    }
    __syncthreads(); // item x's block and q rows are in, from every thread's copies
    if (IS_FP8) {
      st_kv::widen(p, region, b);
      if (WGMMA) st_fence_proxy_async();
      __syncthreads();
    }
    const st_item &it = s_it[qb];
    char *q_stage = q_smem + qb * Q_BYTES;
    const uint32_t k_tile = st_kv::k_tile(region, b), q_tile = st_smem_addr(q_stage);
    const float *k_scale = st_kv::wide_k_scales(p, region, b);
    const float bias[2] = {0.f, 0.f};
    int lim[MTILES][2];
#pragma unroll
    for (int mt = 0; mt < MTILES; mt++)
#pragma unroll
      for (int rr = 0; rr < 2; rr++) {
        const int m = warp * WARP_ROWS + mt * 16 + (lane >> 2) + rr * 8, t = m / GROUP;
        lim[mt][rr] = m < REAL_ROWS && t < it.n ? it.ntok[t] : 0; // padding rows see nothing
      }
    if constexpr (WGMMA) {
      // Warpgroup warp / 4 takes rows 64 (warp / 4) ..; it skips the block
      // when they are all padding (the same answer for all its threads).
      // (__shfl_sync from lane 0 shows ptxas the branch is warp-uniform:
      // wgmma in a branch it thinks divergent is serialized.)
      const int m0 = __shfl_sync(0xffffffffu, warp / 4 * 64, 0);
      const bool rows = __shfl_sync(0xffffffffu, m0 < REAL_ROWS && m0 / GROUP < it.n, 0);
      st_softmax_state<HEAD_DIM> st;
      if (rows) {
        st_with_k_scale(k_scale, [&](auto flag) {
          st_attend_block_wg<HEAD_DIM, ROWS, decltype(flag)::value>(q_tile, m0, k_tile, k_tile + st_kv::TILE_BYTES,
                                                                    lim[0], p.score_scale_log2, k_scale, st);
        });
        st_softmax_finish_l(st);
      }
      if (SPLIT) {
        __syncthreads(); // no product reads this item's K and V any more
        if (next < items) st_issue_kv(p, s_it[qb ^ 1], region, 0, st_smem_addr(&s_kv_bar[0]));
      }
      if (rows) st_write_partials(p, it, st, warp * 16, lim[0], q_stage);
      __syncthreads(); // stage b and q tile qb are free
      continue;
    }
    bool any = false;
#pragma unroll
    for (int mt = 0; mt < MTILES; mt++) any |= lim[mt][0] > 0 || lim[mt][1] > 0;
    if (warp < MATH_WARPS && __any_sync(0xffffffffu, any)) {
      st_softmax_state<HEAD_DIM> st[MTILES];
#pragma unroll
      for (int mt = 0; mt < MTILES; mt++) st_softmax_init(st[mt]);
      st_with_k_scale(k_scale, [&](auto flag) {
        constexpr bool KS = decltype(flag)::value;
        for (int tok0 = 0; tok0 < BLOCK_TOKENS; tok0 += STEP_TOKENS) {
          if (MTILES == 1)
            st_attend_tile<HEAD_DIM, STEP_TOKENS, KS>(q_tile, warp * WARP_ROWS, k_tile, k_tile + st_kv::TILE_BYTES,
                                                      tok0, lim[0], bias, p.score_scale_log2, k_scale, st[0]);
          else
            st_attend_tile_x2<HEAD_DIM, STEP_TOKENS, KS>(q_tile, warp * WARP_ROWS, k_tile, k_tile + st_kv::TILE_BYTES,
                                                         tok0, lim[0], lim[MTILES - 1], bias, bias, p.score_scale_log2,
                                                         k_scale, st[0], st[MTILES - 1]);
        }
      });
#pragma unroll
      for (int mt = 0; mt < MTILES; mt++) {
        st_softmax_finish_l(st[mt]);
        st_write_partials(p, it, st[mt], warp * WARP_ROWS + mt * 16, lim[mt], q_stage);
      }
    }
    __syncthreads(); // stage b is free
  }
}
