// sparse_attn_decode.cu - block-sparse GQA attention for a decode batch.
//
// Work item (row, g): query token row = r*qlen + t of request r at position
// p = seq_lens[r] - qlen + t, and the GROUP q heads of kv head g. They
// attend to the keys of the blocks topk_idx[g][row][:] lists (entries < 0
// and blocks past p's own skipped; positions > p masked).
//
// Grid (pad(R*qlen*splits, CLUSTER), Hkv); THREADS = 32 * WARPS_N * M_TILES
// threads. CTA x of column g takes item (row = x / splits, g) and entries
// [s*blocks_per_split, (s+1)*blocks_per_split) of its list, s = x % splits
// (CTAs past the last item, padding to whole clusters, do nothing). Warp 0
// reads the request's length, the CTA's selected entries and their pages
// at once (two dependent round trips, while q lands by cp.async). Per block
// the CTA copies the 128 K and 128 V rows of kv head g into shared memory
// (cp.async, STAGES blocks in flight, or with TMA thread 0's tensor-map
// copies into a ring of 2 * STAGES half blocks; bf16: K and V as separate
// groups, so the scores start while V is on its way, and with one stage
// the next block's K is on its way under the values; fp8: rows land in a staging
// buffer and are widened to bf16 (V times its per-token scales; K's
// scale multiplies the scores, in fp32), and the stage is
// refilled before the math; with K_REGS only V is widened (to f16 unless
// scales are per token), and q.K reads K's raw rows into f16 mma fragments
// (q made f16 once, in the fragments' order, with a power-of-two scale),
// converting in registers, while V is being widened), and warp (wm, wn)
// computes for q heads wm*16 .. wm*16+15 and tokens wn*WARP_TOKENS ..
// +WARP_TOKENS: S = q K^T on tensor cores (bf16 m16n8k16, q and K from
// ldmatrix), an online softmax in registers (base 2, scores pre-scaled by
// sm_scale*log2 e), then O += P V with P re-used from the accumulator
// registers as the A operand and V from ldmatrix.trans. At the end the
// WARPS_N warps of an m-tile combine their (m, l, O) in shared memory. One
// split: the CTA writes o and lse. Several (single): where the splits divide
// CLUSTER > 1, the item's CTAs sit in one thread-block cluster; each owns a
// 1/splits slice of the output, and every CTA pushes its state of each slice
// into the owner's shared memory (st.async on the owner's mbarrier: no
// workspace round trip, no fence); otherwise each CTA writes its partial
// (O, m, l) to the workspace and the item's last CTA merges them. split:
// the partials go to the workspace and st_sparse_attn_decode_merge
// combines them.
//
// Bytes per item: (valid selected blocks) * 128 * D * 2 (K and V) * elem,
// plus q and o; FLOPs: 4 * GROUP * 128 * D per block. At GROUP 16 that is
// 16 FLOPs per byte of bf16 KV: bandwidth-bound on tensor cores.

// The compile-time constants ST_P_*: rendering puts a variant's values
// in place of this include (generator/render.lua).
#include "defaults/sparse_attn_decode.cuh"
constexpr int IS_FP8 = ST_P_IS_FP8;
constexpr int HEAD_DIM = ST_P_HEAD_DIM;
constexpr int GROUP = ST_P_GROUP;
constexpr int M_TILES = ST_P_M_TILES;
constexpr int WARPS_N = ST_P_WARPS_N;
constexpr int STAGES = ST_P_STAGES;
constexpr int ALGO_SPLIT = ST_P_ALGO_SPLIT;
// fp8: 1 reads K's raw rows straight into the mma fragments; 2 also V's,
// where scales are not per token (tensor mode runs as 1).
constexpr int K_REGS = ST_P_K_REGS;
// bf16 or fp8 k_regs 2, HEAD_DIM 128: 1 copies K and V with the bulk
// tensor copy engine (one thread issues each half of a block, 16 KB fp8
// or 32 KB bf16, by the launcher's tensor maps; a full mbarrier a slot
// says when one landed) into a ring of HALVES = 2 * STAGES (+ RING_EXTRA)
// slots, in place of every thread's cp.async and the barrier after each
// wait. fp8 rows land in st_kv_k_chunk / st_kv_v_chunk's order (the
// 128-byte swizzle), bf16 rows as 128-byte panels (st_panel_offset), which
// the tile loops read with PANEL_ROWS. Per-token scales run the widening
// path, with cp.async. (Without pv_dims, a ring of 2 * STAGES + 1 halves,
// the next block's K a block earlier, measured the same: not kept, v2.44
// in docs/kernels/sparse_attn_decode.md.)
constexpr int TMA = ST_P_TMA;
// pv_dims with one stage: 1 gives the ring one slot more (three halves):
// V of the next block is copied a block ahead, as with two stages, in
// 16 KB (fp8) less than a second stage, so that three CTAs fit an SM with
// a cluster's receive area.
constexpr int RING_EXTRA = ST_P_RING_EXTRA;
constexpr int HALVES = TMA ? 2 * STAGES + RING_EXTRA : 0;
// tma, one m tile, no per-token scales: 1 splits P.V by dimensions
// instead of tokens. Warp w still scores tokens w * WARP_TOKENS ..; the
// warps share each row's maximum (kept LAZY, as one), hand their P to
// each other in shared memory, and warp w accumulates O's dimensions
// w * WARP_DIMS .. over all 128 tokens: O is HEAD_DIM / WARPS_N columns a
// warp instead of HEAD_DIM (16 registers instead of 64 at 4 warps), no
// warps' combine at the end (the B = 1 CTA's tail), and more warps a CTA
// at the same registers. A block takes one CTA barrier where no row's
// maximum grows (two where one does); with 2 stages V of the next block is
// in flight under this one's, with 1 it is copied after this block's
// barrier (a CTA of one block, B = 1, copies nothing more).
constexpr int PV_DIMS = ST_P_PV_DIMS;

#include "params/sparse_attn_decode.h"
#include "common/params_gate.cuh"
#include "common/attn_tile.cuh"
#include "common/kv_stage.cuh"
#include "common/mbarrier.cuh"
#include "common/last_cta.cuh"
#include "common/pdl.cuh"
#include "common/q_f16.cuh"

ST_PARAMS_GATE(st_sparse_attn_decode_params)

constexpr int WARPS = WARPS_N * M_TILES;
constexpr int THREADS = 32 * WARPS;
constexpr int BLOCK_TOKENS = 128;
constexpr int MAX_TOPK = 64;
constexpr int WARP_TOKENS = BLOCK_TOKENS / WARPS_N;
constexpr int DT = HEAD_DIM / 8;         // output tiles (8 dims)
constexpr int ROW_CHUNKS = HEAD_DIM / 8; // 16-byte chunks of a bf16 row
constexpr int NE = GROUP * HEAD_DIM / 4; // 4-dimension pieces of an item's output
using st_kv = st_kv_stages<IS_FP8, HEAD_DIM, STAGES, THREADS, (K_REGS > 0), 0, 1>; // refilled before the math
static_assert(K_REGS >= 0 && K_REGS <= 2 && (!K_REGS || IS_FP8), "k_regs 1 and 2 read raw fp8 rows");
static_assert(!TMA || ((IS_FP8 ? K_REGS == 2 : K_REGS == 0) && HEAD_DIM == 128), "tma: bf16 or fp8 k_regs 2, d128");
static_assert(!PV_DIMS || (TMA && M_TILES == 1 && STAGES <= 2 && (WARPS_N == 4 || WARPS_N == 8)),
              "pv_dims: tma, one m tile, 1 or 2 stages, 4 or 8 warps");
static_assert(!RING_EXTRA || (PV_DIMS && STAGES == 1), "ring_extra: pv_dims with one stage");
// The dimensions of O a warp accumulates, and (pv_dims) a block's P as
// A fragments (st_store_p), twice, and each warp's row maxima.
constexpr int WARP_DIMS = PV_DIMS ? HEAD_DIM / WARPS_N : HEAD_DIM;
constexpr int P_BYTES = 16 * BLOCK_TOKENS * 2;
constexpr int PVD_BYTES = PV_DIMS ? 2 * P_BYTES + WARPS_N * 16 * 4 : 0;

// Shared memory (dynamic), in this order; runtime/ops/sparse_attn_decode.c
// computes the same total (st_sparse_attn_decode_smem_bytes).
//   q tile      [M_TILES*16][HEAD_DIM] bf16 (fp8 K_REGS: f16 from the first
//               block on), swizzled, heads >= GROUP zero
//   KV region   bf16: STAGES x (K tile, V tile)
//               fp8:  STAGES x (raw K+V rows, K+V scales), then one K and V tile
//                     (K_REGS: the V tile only; none where k_regs 2 reads V
//                     raw: those launches get the smaller SMEM_BYTES_RAW;
//                     tma's raw region is its ring: HALVES x 128 raw rows,
//                     pv_dims: then P twice and the warps' row maxima)
//               after the last block: per warp (O [16][HEAD_DIM], m[16], l[16]) fp32
//               (pv_dims: one O [16][HEAD_DIM], the warps' dimensions of it)
//   block list  [MAX_TOPK] pages, [MAX_TOPK] visible tokens
//   receive     (cluster kernels) what the item's CTAs push to this one:
//               [splits][NE / splits] float4 pieces of O, then
//               [splits][GROUP] (m, l)
// tma: all of it from the first 1024-byte boundary on (the swizzle's; q
// and a ring slot are whole multiples of 1024 bytes), 1024 bytes more.
constexpr int Q_BYTES = M_TILES * 16 * HEAD_DIM * 2;
constexpr int HALF_BYTES = BLOCK_TOKENS * HEAD_DIM * (IS_FP8 ? 1 : 2); // tma: a ring slot
// (bf16 tma: the stages' tiles are its ring, with ring_extra one slot more)
constexpr int KV_BYTES = (st_kv::BYTES > HALVES * HALF_BYTES ? st_kv::BYTES : HALVES * HALF_BYTES) + PVD_BYTES;
constexpr int COMBINE_WARPS = PV_DIMS ? 1 : WARPS; // the O tiles the warps' combine reads
constexpr int COMBINE_BYTES = (COMBINE_WARPS * 16 * HEAD_DIM + WARPS * 16 * 2) * 4;
constexpr int REGION_BYTES = KV_BYTES > COMBINE_BYTES ? KV_BYTES : COMBINE_BYTES;
constexpr int PANELS = HEAD_DIM * (IS_FP8 ? 1 : 2) / 128;                // tma: 128-byte boxes a row
constexpr int KV_BYTES_RAW =
    TMA ? HALVES * HALF_BYTES + PVD_BYTES : K_REGS == 2 ? STAGES * st_kv::STAGE_BYTES : KV_BYTES;
static_assert(KV_BYTES_RAW <= KV_BYTES, "SMEM_BYTES, the widening path's, is the most any launch needs");
constexpr int REGION_BYTES_RAW = KV_BYTES_RAW > COMBINE_BYTES ? KV_BYTES_RAW : COMBINE_BYTES;
constexpr int BLOCK_LIST_BYTES = MAX_TOPK * 8;
constexpr float LN2 = 0.69314718055994530942f;
// The merge's weights: (m or weight, l) per split and q head.
constexpr int MAX_SPLITS = MAX_TOPK;
constexpr int MERGE_SMEM = 2 * MAX_SPLITS * GROUP * 4;
static_assert(MERGE_SMEM <= REGION_BYTES_RAW, "the merging CTA reuses its tile region");

// CTAs per thread-block cluster: 1; 16 (a non-portable size; the launcher
// allows it) for single kernels of at most 128 threads (pv_dims: 256, by
// the raw launch's shared memory, the only one they run) of which two fit an
// SM by shared memory; 8 (portable) for single kernels of at most 2
// stages, which merge 2-8 splits of wider CTAs; or 4 for single pv_dims
// kernels, which merge 2-4 splits (the generator's constraints and the
// launcher's st_sparse_attn_decode_check_cluster). A cluster is
// placed as a whole within one GPC, and large grids pay for it: clusters of
// 16 cost 256-CTA grids 8% (bf16) to 68% (fp8) and save B = 1 about 2 us
// (docs/kernels/sparse_attn_decode.md, v2.1): a tuned parameter.
#if ST_P_CLUSTER > 1
#define ST_CLUSTER ST_P_CLUSTER
#define ST_CLUSTER_DIMS __cluster_dims__(ST_CLUSTER, 1, 1)
#else
#define ST_CLUSTER 1
#define ST_CLUSTER_DIMS
#endif
constexpr int CLUSTER = ST_CLUSTER;
// The cluster merge's receive area: every piece of an item's O once (from
// its splits), and each split's (m, l) of every q head.
constexpr int RECV_BYTES = CLUSTER > 1 ? NE * 16 + CLUSTER * GROUP * 8 : 0;
constexpr int ALIGN_BYTES = TMA ? 1024 : 0;
constexpr int SMEM_BYTES = Q_BYTES + REGION_BYTES + BLOCK_LIST_BYTES + RECV_BYTES + ALIGN_BYTES;
constexpr int SMEM_BYTES_RAW = Q_BYTES + REGION_BYTES_RAW + BLOCK_LIST_BYTES + RECV_BYTES + ALIGN_BYTES;
static_assert(!TMA || (Q_BYTES % 1024 == 0 && HALF_BYTES % 1024 == 0), "tma slots on 1024-byte boundaries");
// The CTAs an SM may hold, for the registers ptxas may give a thread. By
// default it capped some kernels for more CTAs than their shared memory
// allows (128 registers at 128 and 256 threads: 16-104 bytes of spills in
// 9 of 160 anchors sources): ask for the CTAs the shared memory allows
// (k_regs 2: without per-token scales), at most 3 of 128 threads (170
// registers, what bf16 B = 128 runs at), 4 of 64 and 1 of 256. Clusters of
// 8 take CTAs of up to 256 threads and ask for one (their push code
// spilled 32-40 bytes at 128 registers). pv_dims kernels, whose O is a
// quarter or an eighth of that, ask for the CTAs their shared memory
// allows, at most 24 warps an SM.
constexpr int st_min_ctas() {
  const int by_smem = 228 * 1024 / ((K_REGS == 2 ? SMEM_BYTES_RAW : SMEM_BYTES) + 1024);
  const int by_default = PV_DIMS ? 768 / THREADS : THREADS <= 64 ? 4 : 384 / THREADS;
  const int n = by_smem < by_default ? by_smem : by_default;
  return (CLUSTER == 8 && !PV_DIMS) || n < 1 ? 1 : n;
}
#define ST_LAUNCH_BOUNDS __launch_bounds__(THREADS, st_min_ctas())
static_assert(CLUSTER == 1 || NE % CLUSTER == 0, "every split divides the pieces evenly");
static_assert(CLUSTER == 1 || (CLUSTER == 8 && !ALGO_SPLIT && STAGES <= 2) ||
                  (CLUSTER == 4 && !ALGO_SPLIT && PV_DIMS) ||
                  (CLUSTER == 16 && !ALGO_SPLIT && THREADS <= (PV_DIMS ? 256 : 128) &&
                   2 * ((PV_DIMS ? SMEM_BYTES_RAW : SMEM_BYTES) + 1024) <= 228 * 1024),
              "a cluster of 8 single-launch CTAs of <= 2 stages, of 4 pv_dims ones, or of 16 of <= 128 threads, "
              "two per SM");

static_assert(HEAD_DIM % 64 == 0, "whole groups of 8 swizzled chunks per row");
static_assert(WARP_TOKENS % 16 == 0, "a warp covers whole 16-token k-steps");
static_assert(GROUP <= 16 * M_TILES && GROUP > 16 * (M_TILES - 1), "M_TILES = ceil(GROUP / 16)");
static_assert(MAX_TOPK <= 64, "warp 0 reads a CTA's entries as two per lane");

struct st_item {
  int row, g, r;
  int64_t id; // row * Hkv + g
};

__device__ __forceinline__ st_item st_item_of(const st_sparse_attn_decode_params &p, int row, int g) {
  st_item it;
  it.row = row;
  it.g = g;
  it.r = row / p.qlen;
  it.id = (int64_t)row * p.num_kv_heads + g;
  return it;
}

// The scalar V scale o is multiplied by: the call's, or one read from
// device memory (params' v_scale_ptr: scale views of one scale each).
__device__ __forceinline__ float st_out_v_scale(const st_sparse_attn_decode_params &p) {
  return p.v_scale_ptr ? p.v_scale * __ldg(p.v_scale_ptr) : p.v_scale;
}

// Writes o (normalized, times the scalar V scale) of q head h, dimensions
// d .. d+3, and (with d == 0) its lse, from the combined state (m in log2
// units, l, unnormalized o).
__device__ __forceinline__ void st_write_out(const st_sparse_attn_decode_params &p, const st_item &it, int h, int d,
                                             float m, float l, float4 o) {
  const int head = it.g * GROUP + h;
  uint16_t *out = (uint16_t *)p.o + (int64_t)it.row * p.o_stride_row + (int64_t)head * p.o_stride_head + d;
  const float inv = l > 0.f ? st_out_v_scale(p) / l : 0.f;
  const uint32_t lo = st_pack_bf16(o.x * inv, o.y * inv), hi = st_pack_bf16(o.z * inv, o.w * inv);
  out[0] = (uint16_t)(lo & 0xffffu);
  out[1] = (uint16_t)(lo >> 16);
  out[2] = (uint16_t)(hi & 0xffffu);
  out[3] = (uint16_t)(hi >> 16);
  if (d == 0 && p.lse)
    p.lse[(int64_t)it.row * p.lse_stride_row + (int64_t)head * p.lse_stride_head] =
        l > 0.f ? (m + __log2f(l)) * LN2 : -ST_INF;
}

// Combines the splits' partial states of an item from the workspace (read
// from L2: other CTAs of this launch or the previous one wrote them), with
// `scratch` (MERGE_SMEM bytes of shared memory) for the splits' weights.
// The (m, l) pairs are read once, not once per output dimension (v1 read
// them per dimension in a dependent loop: 16 splits cost ~20 us at B = 1),
// and each thread's partial-output loads are independent of each other.
__device__ void st_merge_splits(const st_sparse_attn_decode_params &p, const st_item &it, float *scratch) {
  const int64_t base = it.id * p.splits;
  const int splits = p.splits;
  float *w = scratch;                       // [splits][GROUP]: m, then the weight 2^(m_s - M) / L
  float *l_s = scratch + MAX_SPLITS * GROUP; // [splits][GROUP]
  for (int e = threadIdx.x; e < splits * GROUP; e += THREADS) {
    const int64_t ps = base * GROUP + e; // split e / GROUP, head e % GROUP: the workspace's order
    w[e] = __ldcg(p.part_ml + ps * 2);
    l_s[e] = __ldcg(p.part_ml + ps * 2 + 1);
  }
  __syncthreads();
  for (int h = threadIdx.x; h < GROUP; h += THREADS) {
    float m = -ST_INF, l = 0.f;
    for (int s = 0; s < splits; s++) m = fmaxf(m, w[s * GROUP + h]);
    for (int s = 0; s < splits; s++) {
      const float ms = w[s * GROUP + h];
      const float wt = ms == -ST_INF ? 0.f : exp2f(ms - m);
      l += l_s[s * GROUP + h] * wt;
      w[s * GROUP + h] = wt;
    }
    const float inv = l > 0.f ? 1.f / l : 0.f;
    for (int s = 0; s < splits; s++) w[s * GROUP + h] *= inv;
    if (p.lse)
      p.lse[(int64_t)it.row * p.lse_stride_row + (int64_t)(it.g * GROUP + h) * p.lse_stride_head] =
          l > 0.f ? (m + __log2f(l)) * LN2 : -ST_INF;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < NE; e += THREADS) {
    const int h = e / (HEAD_DIM / 4), d = (e - h * (HEAD_DIM / 4)) * 4;
    float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 8
    for (int s = 0; s < splits; s++) {
      const float4 v = __ldcg((const float4 *)(p.part_o + ((base + s) * GROUP + h) * HEAD_DIM + d));
      const float wt = w[s * GROUP + h];
      o.x += v.x * wt;
      o.y += v.y * wt;
      o.z += v.z * wt;
      o.w += v.w * wt;
    }
    // The weights hold 1 / L already: write with l = 1 (lse was written above).
    uint16_t *out = (uint16_t *)p.o + (int64_t)it.row * p.o_stride_row + (int64_t)(it.g * GROUP + h) * p.o_stride_head + d;
    const float vs = st_out_v_scale(p);
    const uint32_t lo = st_pack_bf16(o.x * vs, o.y * vs), hi = st_pack_bf16(o.z * vs, o.w * vs);
    out[0] = (uint16_t)(lo & 0xffffu);
    out[1] = (uint16_t)(lo >> 16);
    out[2] = (uint16_t)(hi & 0xffffu);
    out[3] = (uint16_t)(hi >> 16);
  }
}

// ---- thread-block clusters: the push merge --------------------------------
//
// Where the splits divide the cluster, the item's CTAs (cluster ranks
// rank0 .. rank0 + splits - 1) each own NE / splits pieces of the item's
// output. After its warps' combine, a CTA writes each piece of its state and
// its (m, l) straight into the owner's receive area with st.async, which
// counts the bytes on the owner's mbarrier; each owner waits for all of
// them, merges and writes o and lse. One cluster barrier, arrived at the
// start once the mbarriers are initialized and waited on just before the
// first push; no fence and no barrier after the pushes (v2.2 pulled the
// pieces between a release/acquire and a relaxed cluster barrier: 2.6 us of
// the B = 1 launch, docs/kernels/sparse_attn_decode.md).

__device__ __forceinline__ void st_cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void st_cluster_wait() { asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory"); }

__device__ __forceinline__ uint32_t st_cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

// The same shared-memory offset in the CTA of cluster rank `rank`.
__device__ __forceinline__ uint32_t st_cluster_map(uint32_t addr, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}

// 16 / 8 bytes into another CTA's shared memory (mapped addresses), counted
// on its mbarrier `bar` (mapped too).
__device__ __forceinline__ void st_push_f4(uint32_t addr, float4 v, uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(
                   addr),
               "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(bar)
               : "memory");
}

__device__ __forceinline__ void st_push_f2(uint32_t addr, float2 v, uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];\n" ::"r"(addr),
               "f"(v.x), "f"(v.y), "r"(bar)
               : "memory");
}

// Bytes an owner receives: a piece of O from every split for each piece it
// owns (NE in all), and every split's (m, l) of each q head.
__device__ __forceinline__ uint32_t st_recv_bytes(int splits) { return (uint32_t)(NE * 16 + splits * GROUP * 8); }

// The receive area of this CTA (byte offsets in shared memory).
struct st_recv {
  uint32_t o, ml; // [splits][NE / splits] float4, then [splits][GROUP] float2
};

// The combined (m, l) of q head h over the WARPS_N warps of its m-tile
// (c_ml: [WARPS][16][2], m in log2 units), and each warp's weight
// 2^(m_w - m) (0 for a warp that saw no key). The combine and the cluster
// push both take it from here, so they agree bit for bit, and the combine
// reuses the weights (v2.6-v2.8 computed every exp2 twice).
struct st_combined {
  float m, l, wt[WARPS_N];
};

__device__ __forceinline__ st_combined st_combine_ml(const float *c_ml, int h) {
  const int w0 = (h / 16) * WARPS_N, hr = h % 16;
  st_combined c;
  c.m = -ST_INF;
#pragma unroll
  for (int w = 0; w < WARPS_N; w++) c.m = fmaxf(c.m, c_ml[((w0 + w) * 16 + hr) * 2]);
  c.l = 0.f;
#pragma unroll
  for (int w = 0; w < WARPS_N; w++) {
    const float mw = c_ml[((w0 + w) * 16 + hr) * 2];
    c.wt[w] = mw == -ST_INF ? 0.f : exp2f(mw - c.m);
    c.l += c_ml[((w0 + w) * 16 + hr) * 2 + 1] * c.wt[w];
  }
  return c;
}

// After the warps' combine: the CTA's state of piece e goes to its owner.
// The splits divide CLUSTER here, so they are a power of two (2^split_shift)
// and NE / splits needs no division (v2.5 divided twice per piece: a third
// of the push's instructions at B = 1).
__device__ __forceinline__ void st_push_piece(int split, int split_shift, uint32_t rank0, const st_recv &recv,
                                              uint32_t bar, int e, float4 o) {
  const int per = NE >> split_shift, owner = (e << split_shift) / NE;
  const uint32_t to = rank0 + (uint32_t)owner;
  st_push_f4(st_cluster_map(recv.o + (uint32_t)(split * per + e - owner * per) * 16u, to), o,
             st_cluster_map(bar, to));
}

// The owner's merge once every byte is in: pieces [split * per, (split +
// 1) * per) of the item from all splits. Where the CTA has more threads
// than pieces (B = 1: 32 pieces, 128 threads), `lanes` adjacent lanes share
// a piece, each taking every lanes-th split, and add up by shuffles (v2.5
// left three of four warps idle here). Every thread runs the same rounds,
// so the shuffles see whole warps.
__device__ __forceinline__ void st_merge_received(const st_sparse_attn_decode_params &p, const st_item &it, int split,
                                                  int split_shift, const char *recv_o, const char *recv_ml) {
  const int splits = p.splits, per = NE >> split_shift;
  int lane_shift = 0;
  while (lane_shift < 5 && (per << (lane_shift + 1)) <= THREADS && (2 << lane_shift) <= splits) lane_shift++;
  const int lanes = 1 << lane_shift, sub = threadIdx.x & (lanes - 1);
  const float2 *ml_in = (const float2 *)recv_ml;
  for (int base = 0; base < (per << lane_shift); base += THREADS) {
    const int i = (base + (int)threadIdx.x) >> lane_shift;
    const bool active = i < per;
    const int e = split * per + (active ? i : 0);
    const int h = e / (HEAD_DIM / 4), d = (e - h * (HEAD_DIM / 4)) * 4;
    float m = -ST_INF;
    if (active)
      for (int c = sub; c < splits; c += lanes) m = fmaxf(m, ml_in[c * GROUP + h].x);
    for (int x = 1; x < lanes; x *= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, x));
    float l = 0.f;
    float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
    if (active && m != -ST_INF)
      for (int c = sub; c < splits; c += lanes) {
        const float2 ml = ml_in[c * GROUP + h];
        const float wt = ml.x == -ST_INF ? 0.f : exp2f(ml.x - m);
        const float4 oc = ((const float4 *)recv_o)[c * per + i];
        l += ml.y * wt;
        o.x += oc.x * wt;
        o.y += oc.y * wt;
        o.z += oc.z * wt;
        o.w += oc.w * wt;
      }
    for (int x = 1; x < lanes; x *= 2) {
      l += __shfl_xor_sync(0xffffffffu, l, x);
      o.x += __shfl_xor_sync(0xffffffffu, o.x, x);
      o.y += __shfl_xor_sync(0xffffffffu, o.y, x);
      o.z += __shfl_xor_sync(0xffffffffu, o.z, x);
      o.w += __shfl_xor_sync(0xffffffffu, o.w, x);
    }
    if (active && sub == 0) st_write_out(p, it, h, d, m, l, o);
  }
}

// ---- bf16 and raw fp8 copies: K and V of a block as two commit groups ----
// The layout is st_kv's (common/kv_stage.cuh); the copies are issued per
// half so that the scores can start while V is still on its way. This
// serves bf16 and the fp8 kernels that read both K and V raw (k_regs 2,
// no per-token scales): their rows land as the math reads them, K by
// st_kv_k_chunk, V by st_kv_v_chunk. (The fp8 kernels that widen keep
// st_kv's one group per block: with K and V widened apart, two more
// barriers a block and the refill later, v2's first run measured fp8
// B = 128 25% slower, also in variants without clusters.)

// Where the 16 bytes of chunk c of row tok of half `which` (0: K, 1: V)
// land, from the stage's start.
__device__ __forceinline__ uint32_t st_half_offset(int which, int tok, int c) {
  if (!IS_FP8) return (uint32_t)(which * st_kv::TILE_BYTES + st_swizzle_offset<ROW_CHUNKS>(tok, c));
  const int chunk = which ? st_kv_v_chunk<HEAD_DIM>(tok, c) : st_kv_k_chunk<HEAD_DIM>(tok, c);
  return (uint32_t)(which * BLOCK_TOKENS * HEAD_DIM + tok * HEAD_DIM + chunk * 16);
}

// Issues the copies of half `which` of (page, kv head g)'s block into stage
// `buf`; rows at or past `ntok` become zeros (a masked key's value must be
// 0, not garbage: its weight is exactly 0, but 0 * NaN is not). Those rows'
// addresses are inside the page; nothing is read.
__device__ __forceinline__ void st_issue_half(const st_sparse_attn_decode_params &p, int which, int g, int page,
                                              int ntok, char *region, int buf) {
  const uint32_t stage = st_smem_addr(region + buf * st_kv::STAGE_BYTES);
  const int c = threadIdx.x % st_kv::SRC_CHUNKS, r0 = threadIdx.x / st_kv::SRC_CHUNKS;
  const int64_t s_page = which ? p.v_stride_page : p.k_stride_page;
  const int64_t s_head = which ? p.v_stride_head : p.k_stride_head;
  const int64_t s_tok = which ? p.v_stride_token : p.k_stride_token;
  const char *src = (const char *)(which ? p.v_cache : p.k_cache) +
                    ((int64_t)page * s_page + (int64_t)g * s_head + r0 * s_tok) * st_kv::ELEM + c * 16;
  const int64_t step = s_tok * st_kv::ELEM * st_kv::ROWS_PER_PASS;
#pragma unroll 4
  for (int tok = r0; tok < BLOCK_TOKENS; tok += st_kv::ROWS_PER_PASS) {
    st_cp_async16(stage + st_half_offset(which, tok, c), src, tok < ntok ? 16 : 0);
    src += step;
  }
}

// Half `which` of block b (if it exists) into stage `buf`, as one commit
// group, committed (empty) even past the last block so that every
// thread's group count stays uniform.
__device__ __forceinline__ void st_issue_half_group(const st_sparse_attn_decode_params &p, int which, int g,
                                                    const int32_t *pages, const int32_t *ntoks, int b, int nblk,
                                                    char *region, int buf) {
  if (b < nblk) st_issue_half(p, which, g, pages[b], ntoks[b], region, buf);
  st_cp_async_commit();
}

// Block b into stage `buf`: two commit groups, K then V.
__device__ __forceinline__ void st_issue_block(const st_sparse_attn_decode_params &p, int g, const int32_t *pages,
                                               const int32_t *ntoks, int b, int nblk, char *region, int buf) {
  st_issue_half_group(p, 0, g, pages, ntoks, b, nblk, region, buf);
  st_issue_half_group(p, 1, g, pages, ntoks, b, nblk, region, buf);
}

// ---- tma: the ring of halves ---------------------------------------------
// Half h of the CTA's stream is K (h even) or V (h odd) of block h / 2, in
// slot h % HALVES at HALF_BYTES a slot, landing on the slot's full barrier
// (at full + 8 slot) in its (h / HALVES)-th phase. A slot is copied into
// again once every warp is done with its last half (a CTA barrier, or
// pv_dims's count of the warps done with V, st_release_v).

// Half h, if the CTA's blocks have it, by the calling thread: the page's
// 128 rows of kv head g, one copy a 128-byte panel. The rows past the
// block's visible tokens come as the page holds them (st_zero_v_rows).
__device__ __forceinline__ void st_issue_half(const st_sparse_attn_decode_params &p, int g, const int32_t *pages, int h,
                                              int nblk, char *region, uint32_t full) {
  if (h >= 2 * nblk) return;
  const int slot = h % HALVES;
  const uint32_t bar = full + 8u * (uint32_t)slot;
  st_mbar_arrive_expect_tx(bar, HALF_BYTES);
  const void *map = (h & 1) ? (const void *)&p.v_map : (const void *)&p.k_map;
#pragma unroll
  for (int c = 0; c < PANELS; c++)
    st_tma_load_4d(st_smem_addr(region + slot * HALF_BYTES + c * BLOCK_TOKENS * 128), map, c * 128 / st_kv::ELEM, 0, g,
                   pages[h / 2], bar);
}

// st_issue_half by thread 0.
__device__ __forceinline__ void st_copy_half(const st_sparse_attn_decode_params &p, int g, const int32_t *pages, int h,
                                             int nblk, char *region, uint32_t full) {
  if (threadIdx.x == 0) st_issue_half(p, g, pages, h, nblk, region, full);
}

// Waits until half h has landed; returns its slot's shared address.
__device__ __forceinline__ uint32_t st_wait_half(char *region, int h, uint32_t full) {
  const int slot = h % HALVES;
  st_mbar_wait(full + 8u * (uint32_t)slot, (h / HALVES) & 1);
  return st_smem_addr(region + slot * HALF_BYTES);
}

// V rows at and past `lim` of the warp's tokens tok0 .. (the only ones it
// reads) become zeros, as cp.async leaves them (a masked key's weight is
// exactly 0, but 0 * NaN is not). Only a query's own, partial block has
// any. Then a proxy fence: a later copy writes there.
__device__ __forceinline__ void st_zero_v_rows(uint32_t v_rows, int tok0, int lim) {
  if (lim >= tok0 + WARP_TOKENS) return;
  const uint32_t lane = threadIdx.x & 31;
  for (int tok = max(lim, tok0); tok < tok0 + WARP_TOKENS; tok++)
#pragma unroll
    for (int c = 0; c < PANELS; c++) // a panel's row is 32 words
      asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(v_rows + (uint32_t)(c * BLOCK_TOKENS * 128 + tok * 128) + lane * 4u),
                   "r"(0)
                   : "memory");
  __syncwarp();
  st_fence_proxy_async();
}

// ---- one warp's share of a block: st_attend_tile (common/attn_tile.cuh)
// in two halves, so that the scores need only K and the values only V -----

constexpr int NT = WARP_TOKENS / 8, DK = HEAD_DIM / 16;

// K_REGS: q.K runs on f16 operands (common/q_f16.cuh). The CTA turns the q
// tile into f16, rewritten in the order the mma's A fragments take it
// (st_q_frag); unscale[row] gets 2^-e, which the row's scores take back.
// Every thread takes a share: Q_LANES consecutive lanes a row, Q_CHUNKS
// 16-byte chunks each (one warp doing it all kept the CTA at block 0's
// barrier ~500 instructions long, the B = 1 CTA's whole copy time).
constexpr int Q_LANES = 2 * WARPS_N < ROW_CHUNKS ? 2 * WARPS_N : ROW_CHUNKS; // THREADS / rows, at most a row's chunks
constexpr int Q_CHUNKS = ROW_CHUNKS / Q_LANES;
static_assert(M_TILES * 16 * Q_LANES <= THREADS && Q_LANES <= 32 && 32 % Q_LANES == 0, "whole rows per warp");

// Byte offset of A fragment h (0, 1) of k-range j (32 values) of m-tile mt
// for lane `lane`: 16 bytes, its registers a0 .. a3 in order, so that one
// 16-byte load gives the mma its operand. Read from the row-major tile, a
// fragment takes two rows' loads and four register moves (the fp8 B = 32
// loop spent 109 of its 891 instructions a block on those moves, sm_90a
// SASS, before v2.43).
__device__ __forceinline__ uint32_t st_q_frag(int mt, int j, int h, int lane) {
  return (uint32_t)((((mt * (DK / 2) + j) * 2 + h) * 32 + lane) * 16);
}

__device__ __forceinline__ void st_q_to_f16(char *q_smem, float *unscale) {
  const int row = threadIdx.x / Q_LANES, c0 = threadIdx.x % Q_LANES;
  const bool active = row < M_TILES * 16; // whole warps (rows * Q_LANES is a multiple of 32)
  uint4 v[Q_CHUNKS];
  if (active) {
    uint32_t amax = 0; // largest finite |q| of the thread's values, as bf16 bits
#pragma unroll
    for (int i = 0; i < Q_CHUNKS; i++) {
      v[i] = *(const uint4 *)(q_smem + st_swizzle_offset<ROW_CHUNKS>(row, c0 + i * Q_LANES));
      amax = st_bf16x8_amax(v[i], amax);
    }
    amax = max(amax & 0xffffu, amax >> 16);
#pragma unroll
    for (int o = 1; o < Q_LANES; o *= 2) amax = max(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const int e = st_f16_row_exponent(amax);
    const float up = st_pow2(e);
#pragma unroll
    for (int i = 0; i < Q_CHUNKS; i++) v[i] = st_bf16x8_to_f16(v[i], up);
    if (c0 == 0) unscale[row] = st_pow2(-e);
  }
  __syncthreads(); // every row is read before the fragments overwrite the tile
  if (!active) return;
  // Chunk c of row row (k = 8c .. 8c + 7) is lane (row % 8, c % 4)'s share of
  // k-range c / 4: its words 0, 1 go to fragment 0, words 2, 3 to fragment 1,
  // each in slot (row % 16) / 8 (+ 2 for the second word).
  const int mt = row / 16, rr = (row / 8) & 1;
#pragma unroll
  for (int i = 0; i < Q_CHUNKS; i++) {
    const int c = c0 + i * Q_LANES, lane = (row & 7) * 4 + (c & 3);
    uint32_t *f0 = (uint32_t *)(q_smem + st_q_frag(mt, c / 4, 0, lane));
    uint32_t *f1 = (uint32_t *)(q_smem + st_q_frag(mt, c / 4, 1, lane));
    f0[rr] = v[i].x;
    f0[rr + 2] = v[i].y;
    f1[rr] = v[i].z;
    f1[rr + 2] = v[i].w;
  }
}

// S = q K^T for rows m0 .. m0+15 and tokens tok0 .. tok0+WARP_TOKENS-1 (as
// common/attn_tile.cuh's st_tile_qk) from the f16 q tile (st_q_to_f16) and
// the stage's raw fp8 K rows (K_REGS), converted in registers. The dot
// product may take its 16 k values per mma in any order as long as q and
// K agree: lane (g = lane/4, t = lane%4) of k-step 2j + h holds k = 32j +
// 8t + 4h + {0, 1} in the fragments' slots 2t, 2t+1 and + {2, 3} in slots
// 2t+8, 2t+9. So one 8-byte load gives a lane its K for two k-steps (k =
// 32j + 8t .. + 7 of its token row), and one 16-byte load per k-step its
// q fragment (st_q_frag: those k of rows g and g + 8). In tensor mode
// each score is then taken times its token's K scale, in fp32
// (st_scale_scores); the rows' unscale (st_q_to_f16) is left to the
// softmax's per-row scale (st_f16_row_scales).
// Addresses: tok0 is a multiple of 16, so a lane's K rows tok0 + 8 nt + g
// all take the swizzle of row g, and its loads differ by constants.
template <bool TENSOR>
__device__ __forceinline__ void st_block_qk_f16(uint32_t q_tile, int m0, uint32_t raw_k, const float *k_scales,
                                                int tok0, float (&s)[NT][4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const uint32_t k_lane = raw_k + (uint32_t)((tok0 + g) * HEAD_DIM + (t & 1) * 8);
#pragma unroll
  for (int nt = 0; nt < NT; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
  for (int j = 0; j < DK / 2; j++) {
    const uint32_t k_at = k_lane + (uint32_t)st_kv_k_chunk<HEAD_DIM>(g, 2 * j + (t >> 1)) * 16;
    const uint4 qa0 = st_lds_v4(q_tile + st_q_frag(m0 / 16, j, 0, lane)); // rows g, g + 8: k = 32j + 8t + 0 .. 3
    const uint4 qa1 = st_lds_v4(q_tile + st_q_frag(m0 / 16, j, 1, lane)); // k + 4 .. 7
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
      const uint2 r = st_lds_v2(k_at + nt * 8 * HEAD_DIM);
      uint32_t b[4];
      st_e4m3x4_to_f16x2x2(r.x, b[0], b[1]);
      st_e4m3x4_to_f16x2x2(r.y, b[2], b[3]);
      st_mma_f16_16816(s[nt], qa0.x, qa0.y, qa0.z, qa0.w, b[0], b[1]);
      st_mma_f16_16816(s[nt], qa1.x, qa1.y, qa1.z, qa1.w, b[2], b[3]);
    }
  }
  if (TENSOR) st_scale_scores(k_scales, tok0, s);
}

// The softmax's per-row scales of a warp's rows m0 + lane / 4 (+ 8) where
// q.K ran on f16 q (st_q_to_f16): scale_log2 times the row's unscale, one
// multiply a score instead of two.
__device__ __forceinline__ void st_f16_row_scales(const float *unscale, int m0, float scale_log2, float (&sc)[2]) {
  const int g = (threadIdx.x & 31) >> 2;
  sc[0] = scale_log2 * unscale[m0 + g];
  sc[1] = scale_log2 * unscale[m0 + g + 8];
}

// The softmax update of common/attn_tile.cuh: every row sees the tokens <
// lim, no bias; row rr's scores times scale[rr]. fp8 runs it LAZY (the
// rescale only where a row's maximum grows by more than ST_LAZY_SLACK, no
// masks on whole tiles): with the f16 q fragments, fp8 B = 32's winner
// 17.36 -> 16.50 us; bf16 B = 32's 29.35 -> 29.58, so bf16 keeps the
// plain update (v2.43, docs/kernels/sparse_attn_decode.md).
__device__ __forceinline__ void st_block_softmax(int tok0, int lim, const float (&scale)[2],
                                                 st_softmax_state<HEAD_DIM> &st, float (&s)[NT][4]) {
  const int lims[2] = {lim, lim};
  const float unused[2] = {0.f, 0.f};
  st_tile_softmax<HEAD_DIM, WARP_TOKENS, false, IS_FP8 != 0>(tok0, lims, unused, scale, st, s);
}

__device__ __forceinline__ void st_block_softmax(int tok0, int lim, float scale_log2, st_softmax_state<HEAD_DIM> &st,
                                                 float (&s)[NT][4]) {
  const float scale[2] = {scale_log2, scale_log2};
  st_block_softmax(tok0, lim, scale, st, s);
}

// Scores from the bf16 K tile (K_SCALE: times their K scales,
// st_scale_scores), then the softmax update.
// PANEL_ROWS: the K tile as tma lands bf16 rows (st_tile_at).
template <bool K_SCALE = false, int PANEL_ROWS = 0>
__device__ __forceinline__ void st_block_scores(uint32_t q_tile, int m0, uint32_t k_tile, const float *k_scale,
                                                int tok0, int lim, float scale_log2, st_softmax_state<HEAD_DIM> &st,
                                                float (&s)[NT][4]) {
  st_tile_qk<HEAD_DIM, WARP_TOKENS, PANEL_ROWS>(q_tile, m0, k_tile, tok0, s);
  if (K_SCALE) st_scale_scores(k_scale, tok0, s);
  st_block_softmax(tok0, lim, scale_log2, st, s);
}

// O += P V (common/attn_tile.cuh); F16: the V tile is f16; PANEL_ROWS: as
// tma lands bf16 rows.
template <bool F16 = false, int PANEL_ROWS = 0>
__device__ __forceinline__ void st_block_values(uint32_t v_tile, int tok0, const float (&s)[NT][4],
                                                st_softmax_state<HEAD_DIM> &st) {
  st_tile_values<HEAD_DIM, WARP_TOKENS, F16, PANEL_ROWS>(v_tile, tok0, s, st);
}

// O += P V from the stage's raw fp8 V rows (k_regs 2): no widened tile, no
// barrier for one. Lane (g, t) of a 16-token k-step needs, for each n-tile,
// V at tokens 2t, 2t + 1 (b0) and 2t + 8, 2t + 9 (b1) of one dimension:
// two rows per register. The n-tiles' dimensions are permuted so that four
// consecutive bytes of a row serve four n-tiles: column n of n-tile
// 4 jb + i holds dimension 32 jb + 4 n + i (st_raw_v_dim). So per four
// n-tiles a lane loads 4 bytes of each of its four rows and pairs them up
// with byte permutes, then one conversion per pair (e4m3 -> f16, exact).
// P is rounded to f16 (<= 1). The accumulators come out permuted alike.
// Addresses: tok0 is a multiple of 16, so the rows 2t + 8, 2t + 9 a lane
// reads take the swizzle of rows 2t, 2t + 1, whose chunks sit one apart
// (st_kv_v_chunk): its loads differ by constants and one per-lane offset.
// A lane's words of one 16-token k-step and 32-dimension group: rows 2t,
// 2t + 1, 2t + 8, 2t + 9 of the k-step, from v_at (row 2t's word; the odd
// rows' chunk sits `odd` bytes over).
__device__ __forceinline__ void st_raw_v_words(uint32_t v_at, uint32_t odd, uint32_t (&w)[4]) {
#pragma unroll
  for (int q = 0; q < 4; q++) w[q] = st_lds_u32(v_at + ((q & 1) + (q >> 1) * 8) * HEAD_DIM + ((q & 1) ? odd : 0));
}

// The B fragments those words give, e4m3 -> f16: bytes i of rows (2t,
// 2t + 1) in b0[i], of rows (2t + 8, 2t + 9) in b1[i], for n-tile 4 jb + i.
// N 4: all four; N 2: the two of byte pair `pair` (0x5140: bytes 0, 1;
// 0x7362: bytes 2, 3).
template <int N>
__device__ __forceinline__ void st_raw_v_frags(const uint32_t (&w)[4], uint32_t pair, uint32_t (&b0)[N],
                                               uint32_t (&b1)[N]) {
  static_assert(N == 2 || N == 4, "two or four n-tiles");
  const uint32_t lo01 = __byte_perm(w[0], w[1], N == 4 ? 0x5140u : pair), lo23 = __byte_perm(w[0], w[1], 0x7362);
  const uint32_t hi01 = __byte_perm(w[2], w[3], N == 4 ? 0x5140u : pair), hi23 = __byte_perm(w[2], w[3], 0x7362);
  st_e4m3x4_to_f16x2x2(lo01, b0[0], b0[1]);
  if (N == 4) st_e4m3x4_to_f16x2x2(lo23, b0[N - 2], b0[N - 1]);
  st_e4m3x4_to_f16x2x2(hi01, b1[0], b1[1]);
  if (N == 4) st_e4m3x4_to_f16x2x2(hi23, b1[N - 2], b1[N - 1]);
}

__device__ __forceinline__ void st_block_values_raw(uint32_t raw_v, int tok0, const float (&s)[NT][4],
                                                    st_softmax_state<HEAD_DIM> &st) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const uint32_t v_lane = raw_v + (uint32_t)((tok0 + 2 * t) * HEAD_DIM + (g & 3) * 4);
  const uint32_t odd = (uint32_t)st_kv_v_odd_delta(g >> 2); // rows 2t + 1, 2t + 9: their chunk is one over
#pragma unroll
  for (int kk = 0; kk < NT / 2; kk++) {
    uint32_t a[4];
#pragma unroll
    for (int i = 0; i < 4; i++) a[i] = st_pack_f16(s[2 * kk + i / 2][(i & 1) * 2], s[2 * kk + i / 2][(i & 1) * 2 + 1]);
#pragma unroll
    for (int jb = 0; jb < HEAD_DIM / 32; jb++) {
      // dimension 32 jb + 4 g: chunk 2 jb + g / 4, byte 4 (g % 4) of it
      const uint32_t v_at = v_lane + (uint32_t)st_kv_v_chunk<HEAD_DIM>(2 * t, 2 * jb + (g >> 2)) * 16;
      uint32_t w[4], b0[4], b1[4]; // b0[i], b1[i]: n-tile 4 jb + i
      st_raw_v_words(v_at + kk * 16 * HEAD_DIM, odd, w);
      st_raw_v_frags<4>(w, 0u, b0, b1);
#pragma unroll
      for (int i = 0; i < 4; i++) st_mma_f16_16816(st.o[4 * jb + i], a[0], a[1], a[2], a[3], b0[i], b1[i]);
    }
  }
}

// The dimension column n of n-tile dt holds after st_block_values_raw.
__device__ __forceinline__ int st_raw_v_dim(int dt, int n) { return (dt >> 2) * 32 + 4 * n + (dt & 3); }

// A block's scores and softmax update where K and V are read as they
// landed (the raw fp8 and the bf16 loops, cp.async or tma): K's rows at
// k_rows, raw fp8 (f16 q, the rows' scales q_scale) or a bf16 tile
// (PANEL_ROWS: tma's panels; q_scale holds the score scale twice).
template <int PANEL_ROWS>
__device__ __forceinline__ void st_block_scores_of(uint32_t q_tile, int m0, uint32_t k_rows, int tok0, int lim,
                                                   const float (&q_scale)[2], st_softmax_state<HEAD_DIM> &st,
                                                   float (&s)[NT][4]) {
  if (IS_FP8) {
    st_block_qk_f16<false>(q_tile, m0, k_rows, nullptr, tok0, s);
    st_block_softmax(tok0, lim, q_scale, st, s);
  } else {
    st_block_scores<false, PANEL_ROWS>(q_tile, m0, k_rows, nullptr, tok0, lim, q_scale[0], st, s);
  }
}

// Its values, V's rows at v_rows: raw fp8, or a bf16 tile as above.
template <int PANEL_ROWS>
__device__ __forceinline__ void st_block_values_of(uint32_t v_rows, int tok0, const float (&s)[NT][4],
                                                   st_softmax_state<HEAD_DIM> &st) {
  if (IS_FP8)
    st_block_values_raw(v_rows, tok0, s, st);
  else
    st_block_values<false, PANEL_ROWS>(v_rows, tok0, s, st);
}

// ---- pv_dims: P.V by dimensions -----------------------------------------
// Warp w scores its tokens as above; P of the whole block goes through
// shared memory, and the warp accumulates O's n-tiles w * NTW .. (in
// st_block_values_raw's permuted order: dimensions (dt / 4) * 32 + 4 n +
// dt % 4 of n-tile dt) over all 128 tokens.

// n-tiles of O a warp holds (4 stands in where pv_dims is 0: none of this
// runs there)
constexpr int NTW = PV_DIMS ? WARP_DIMS / 8 : 4;

// P of the warp's tokens tok0 .. (s: probabilities) as the A fragments
// (f16 for fp8's f16 mma, bf16 for bf16's) of the 16-token k-steps they
// cover, in the order st_block_values_raw builds them: k-step kk's for
// lane l, 16 bytes at (kk * 32 + l) * 16 (one 16-byte store and load a
// lane, conflict-free).
__device__ __forceinline__ void st_store_p(uint32_t p_buf, int tok0, const float (&s)[NT][4]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int kk = 0; kk < NT / 2; kk++) {
    uint32_t a[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const float lo = s[2 * kk + i / 2][(i & 1) * 2], hi = s[2 * kk + i / 2][(i & 1) * 2 + 1];
      a[i] = IS_FP8 ? st_pack_f16(lo, hi) : st_pack_bf16(lo, hi);
    }
    const uint32_t at = p_buf + (uint32_t)(((tok0 / 16 + kk) * 32 + lane) * 16);
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(at), "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3])
                 : "memory");
  }
}

// O += P V for the warp's n-tiles over the block's 128 tokens, P from
// st_store_p, V from the raw rows as st_block_values_raw reads them (the
// same loads a k-step, so conflict-free alike). With 4 warps a warp's
// n-tiles are one 32-dimension group's four; with 8 two of them, bytes 0,
// 1 or 2, 3 of each 4-byte word. MASKED (a query's own, partial block):
// V rows at and past lim count as zeros (the copy brought them as the page
// holds them; their P is 0, but 0 * NaN is not).
template <bool MASKED>
__device__ __forceinline__ void st_pvd_values(uint32_t raw_v, uint32_t p_buf, int lim,
                                              st_softmax_state<WARP_DIMS> &st) {
  static_assert(NTW == 2 || NTW == 4, "two or four n-tiles a warp");
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, warp = threadIdx.x / 32;
  const int jb = warp * NTW / 4;
  const uint32_t pair = NTW == 2 && (warp & 1) ? 0x7362u : 0x5140u; // bytes 2, 3 or 0, 1 of two rows' words
  const uint32_t v_lane = raw_v + (uint32_t)(2 * t * HEAD_DIM + (g & 3) * 4 +
                                             st_kv_v_chunk<HEAD_DIM>(2 * t, 2 * jb + (g >> 2)) * 16);
  const uint32_t odd = (uint32_t)st_kv_v_odd_delta(g >> 2);
#pragma unroll
  for (int kk = 0; kk < BLOCK_TOKENS / 16; kk++) {
    const uint4 a = st_lds_v4(p_buf + (uint32_t)((kk * 32 + lane) * 16));
    uint32_t w[4], b0[NTW], b1[NTW];
    st_raw_v_words(v_lane + kk * 16 * HEAD_DIM, odd, w);
#pragma unroll
    for (int q = 0; q < 4; q++)
      if (MASKED && kk * 16 + 2 * t + (q & 1) + (q >> 1) * 8 >= lim) w[q] = 0u; // row past the visible tokens
    st_raw_v_frags<NTW>(w, pair, b0, b1);
#pragma unroll
    for (int i = 0; i < NTW; i++) st_mma_f16_16816(st.o[i], a.x, a.y, a.z, a.w, b0[i], b1[i]);
  }
}

// The same for bf16 V as tma lands it (128-byte panels, st_tile_at):
// the warp's n-tiles are dimensions warp * WARP_DIMS .. in order, two a
// transposing ldmatrix (st_tile_values' loads for the warp's dimensions
// only). MASKED: rows at and past lim count as zeros, in registers (each
// register holds two rows of one dimension).
template <bool MASKED>
__device__ __forceinline__ void st_pvd_values_bf16(uint32_t v_tile, uint32_t p_buf, int lim,
                                                   st_softmax_state<WARP_DIMS> &st) {
  const int lane = threadIdx.x & 31, t = lane & 3, warp = threadIdx.x / 32;
#pragma unroll
  for (int kk = 0; kk < BLOCK_TOKENS / 16; kk++) {
    const uint4 a = st_lds_v4(p_buf + (uint32_t)((kk * 32 + lane) * 16));
    uint32_t keep[2] = {~0u, ~0u}; // rows kk * 16 + 2t, + 1 (b0, b2) and the same + 8 (b1, b3)
    if (MASKED)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int row = kk * 16 + 2 * t + 8 * h;
        keep[h] = (row < lim ? 0xffffu : 0u) | (row + 1 < lim ? 0xffff0000u : 0u);
      }
#pragma unroll
    for (int d2 = 0; d2 < NTW / 2; d2++) {
      uint32_t b[4];
      st_ldmatrix_x4_trans(b, st_tile_at<ROW_CHUNKS, BLOCK_TOKENS>(v_tile, kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                                                    warp * (NTW / 2) * 2 + d2 * 2 + (lane >> 4)));
      st_mma_bf16_16816(st.o[2 * d2], a.x, a.y, a.z, a.w, b[0] & keep[0], b[1] & keep[1]);
      st_mma_bf16_16816(st.o[2 * d2 + 1], a.x, a.y, a.z, a.w, b[2] & keep[0], b[3] & keep[1]);
    }
  }
}

// The slot of V of block i is copied into by the last warp done with it
// where its next half is V (2 or 4 halves: V of block i + STAGES), before
// the next block's scores. With 3 halves it is K of block i + 2, which
// would share the bandwidth with V of block i + 1, needed first (fp8 B32
// measured 14.2 us so against 14.0): it waits for block i + 1's barrier.
constexpr bool V_AT_RELEASE = HALVES % 2 == 0;

// Warp's V of block i done with; the last warp of the CTA to be done (every
// warp's V of block i - 1 was before block i's barrier, so one running
// count serves) copies the slot's next half. Its read values are in
// registers; the count orders them before the copy, as an empty barrier
// would.
__device__ __forceinline__ void st_release_v(const st_sparse_attn_decode_params &p, int g, const int32_t *s_page, int i,
                                             int nblk, char *region, uint32_t full, int *v_done) {
  if (!V_AT_RELEASE) return;
  __syncwarp();
  if ((threadIdx.x & 31) != 0) return;
  __threadfence_block();
  if (atomicAdd(v_done, 1) != (i + 1) * WARPS - 1) return;
  __threadfence_block();
  st_issue_half(p, g, s_page, 2 * i + 1 + HALVES, nblk, region, full);
}

// The ring's blocks, pv_dims: per block, the warp's scores and row maxima;
// where no warp's maximum grows past the kept one (LAZY), P is stored
// before the one CTA barrier (votes with it); where one does, every warp
// raises its rows to the maxima of all warps after it, stores P again and
// meets one barrier more. After block i's barrier every warp is done with
// K of block i: its slot is copied into then. V's slot is copied into as
// soon as the last warp is done with its products (st_release_v), a
// score's time before the next barrier, or at that barrier (3 halves).
// p_bufs: two P buffers (P_BYTES each), row_max [WARPS][16], v_done: the
// count of the warps' V releases.
__device__ __forceinline__ void st_pvd_blocks(const st_sparse_attn_decode_params &p, int g, const int32_t *s_page,
                                              const int32_t *s_ntok, int nblk, char *region, uint32_t full,
                                              uint32_t q_tile, const float (&q_scale)[2], uint32_t p_bufs,
                                              float *row_max, int *v_done, st_softmax_state<WARP_DIMS> &st) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, tok0 = warp * WARP_TOKENS;
  const float no_bias[2] = {0.f, 0.f};
  for (int i = 0; i < nblk; i++) {
    const int lims[2] = {s_ntok[i], s_ntok[i]};
    const uint32_t p_buf = p_bufs + (uint32_t)((i & 1) * P_BYTES);
    float s[NT][4], mx[2], sum[2];
    const uint32_t k_rows = st_wait_half(region, 2 * i, full);
    if (IS_FP8)
      st_block_qk_f16<false>(q_tile, 0, k_rows, nullptr, tok0, s);
    else
      st_tile_qk<HEAD_DIM, WARP_TOKENS, BLOCK_TOKENS>(q_tile, 0, k_rows, tok0, s);
    st_tile_scale_max<WARP_TOKENS, false, true>(tok0, lims, no_bias, q_scale, s, mx);
    const bool grow =
        __any_sync(0xffffffffu, mx[0] > st.m[0] + ST_LAZY_SLACK || mx[1] > st.m[1] + ST_LAZY_SLACK);
    if ((lane & 3) == 0) {
      row_max[warp * 16 + (lane >> 2)] = mx[0];
      row_max[warp * 16 + (lane >> 2) + 8] = mx[1];
    }
    float pr[NT][4]; // P at the kept maxima, if no warp's grows
    if (!grow) {
#pragma unroll
      for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) pr[nt][e] = s[nt][e];
      st_tile_exp(st.m, pr, sum);
      st_store_p(p_buf, tok0, pr);
    }
    const bool any_grow = __syncthreads_or(grow);
    // into the slot of K of block i (2 or 4 halves: K of block i + STAGES;
    // 3: V of block i + 1, and K of block i + 1 into V of block i - 1's)
    st_copy_half(p, g, s_page, 2 * i + HALVES, nblk, region, full);
    if (!V_AT_RELEASE && i > 0) st_copy_half(p, g, s_page, 2 * i - 1 + HALVES, nblk, region, full);
    if (any_grow) {
      float m_all[2] = {-ST_INF, -ST_INF};
#pragma unroll
      for (int w = 0; w < WARPS; w++)
#pragma unroll
        for (int rr = 0; rr < 2; rr++) m_all[rr] = fmaxf(m_all[rr], row_max[w * 16 + (lane >> 2) + rr * 8]);
      st_softmax_raise(st, m_all);
      st_tile_exp(st.m, s, sum);
      st_store_p(p_buf, tok0, s);
      __syncthreads(); // every warp's P
    }
    st.l[0] += sum[0];
    st.l[1] += sum[1];
    const uint32_t v_rows = st_wait_half(region, 2 * i + 1, full);
    const bool partial = lims[0] < BLOCK_TOKENS;
    if (IS_FP8 && partial)
      st_pvd_values<true>(v_rows, p_buf, lims[0], st);
    else if (IS_FP8)
      st_pvd_values<false>(v_rows, p_buf, lims[0], st);
    else if (partial)
      st_pvd_values_bf16<true>(v_rows, p_buf, lims[0], st);
    else
      st_pvd_values_bf16<false>(v_rows, p_buf, lims[0], st);
    st_release_v(p, g, s_page, i, nblk, region, full, v_done);
  }
}

// ---- the kernels ---------------------------------------------------------

extern "C" __global__ void ST_LAUNCH_BOUNDS ST_CLUSTER_DIMS
    st_sparse_attn_decode_main(const __grid_constant__ st_sparse_attn_decode_params p) {
  extern __shared__ __align__(128) char s_dyn[];
  __shared__ int s_nblk, s_last;
  __shared__ uint64_t s_recv_bar; // cluster merge: the bytes pushed to this CTA
  __shared__ float s_q_unscale[M_TILES * 16]; // K_REGS: 2^-e of each f16 q row (st_q_to_f16)
  __shared__ __align__(8) uint64_t s_full[TMA ? HALVES : 1]; // tma: the ring's slots landed
  __shared__ int s_v_done;                                     // pv_dims: the warps' V releases
  // fp8 k_regs 2 without per-token scales reads K and V raw (the bf16 loop's
  // shape), with no wide tile; with them it runs as k_regs 1 (pv_dims: the
  // launcher gives those calls other variants).
  const bool raw_v = K_REGS == 2 && (PV_DIMS || p.scale_mode != 2);
  char *q_smem = TMA ? s_dyn + ((1024u - (st_smem_addr(s_dyn) & 1023u)) & 1023u) : s_dyn;
  char *region = q_smem + Q_BYTES;
  int32_t *s_page = (int32_t *)(region + (raw_v ? REGION_BYTES_RAW : REGION_BYTES));
  int32_t *s_ntok = s_page + MAX_TOPK;
  char *recv_o = (char *)(s_ntok + MAX_TOPK);
  char *recv_ml = recv_o + NE * 16;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  if (threadIdx.x == 0) {
    unsigned dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    if (dyn < (unsigned)(raw_v ? SMEM_BYTES_RAW : SMEM_BYTES)) __trap(); // the launcher's layout disagrees
  }
  // Splits that divide the cluster keep an item's CTAs in one cluster.
  const bool cluster_merge = CLUSTER > 1 && p.splits > 1 && CLUSTER % p.splits == 0;
  const uint32_t recv_bar = st_smem_addr(&s_recv_bar);
  const uint32_t full = st_smem_addr(s_full);
  if (TMA && (raw_v || !IS_FP8) && threadIdx.x == 0) { // ordered before their use by the block list's barrier
    for (int b = 0; b < HALVES; b++) st_mbar_init(full + 8u * (uint32_t)b, 1);
    st_mbar_init_fence();
    s_v_done = 0;
  }
  const int row = blockIdx.x / p.splits, split = blockIdx.x - row * p.splits;
  const bool padding = row >= p.num_requests * p.qlen; // padding to whole clusters: no item
  if (cluster_merge) {
    // A padding CTA receives nothing (a cluster holds whole items), so it
    // arms no receive barrier: a phase it would never wait on is what
    // compute-sanitizer's synccheck reports as a missing wait.
    if (threadIdx.x == 0 && !padding) {
      st_mbar_init(recv_bar, 1);
      st_mbar_arrive_expect_tx(recv_bar, st_recv_bytes(p.splits));
      st_mbar_init_fence();
    }
    st_cluster_arrive_relaxed(); // waited on before the first push
  }
  if (padding) {
    if (cluster_merge) st_cluster_wait(); // but every CTA of a cluster meets its barrier
    return;
  }
  const st_item it = st_item_of(p, row, blockIdx.y);
  // common/pdl.cuh: the shared memory check, the barriers' set-up and the
  // cluster's arrival above overlap the kernel before; memory waits.
  st_pdl_wait();

  // q rows of the group (heads past GROUP as zeros), in flight while warp 0
  // builds the block list.
  const uint32_t q_tile = st_smem_addr(q_smem);
  {
    const uint16_t *q_rows = (const uint16_t *)p.q + (int64_t)it.row * p.q_stride_row +
                             (int64_t)(it.g * GROUP) * p.q_stride_head;
    for (int e = threadIdx.x; e < M_TILES * 16 * ROW_CHUNKS; e += THREADS) {
      const int h = e / ROW_CHUNKS, c = e % ROW_CHUNKS;
      const bool in = h < GROUP;
      st_cp_async16(q_tile + (uint32_t)st_swizzle_offset<ROW_CHUNKS>(h, c),
                    q_rows + (in ? (int64_t)h * p.q_stride_head : 0) + c * 8, in ? 16 : 0);
    }
    st_cp_async_commit();
  }

  // The CTA's blocks, compacted: valid entries only, with their page and
  // visible token count. The request's length, the entries (two per lane)
  // and, for each entry naming a column of the block table, its page are
  // read before any of them is used: two dependent round trips instead of
  // three. A page read for an entry that turns out invalid (past the
  // query's block, or a padding row) stays inside the block table, and no
  // K/V byte is read for it.
  if (warp == 0) {
    const int e0 = split * p.blocks_per_split, e1 = min(e0 + p.blocks_per_split, p.topk);
    const int32_t *sel = p.topk_idx + (int64_t)it.g * p.idx_stride_head + (int64_t)it.row * p.idx_stride_row;
    const int32_t *bt = p.block_table + (int64_t)it.r * p.bt_stride;
    const int seq_len = __ldg(p.seq_lens + it.r);
    int j[2], page[2];
#pragma unroll
    for (int k = 0; k < 2; k++) j[k] = e0 + k * 32 + lane < e1 ? __ldg(sel + e0 + k * 32 + lane) : -1;
#pragma unroll
    for (int k = 0; k < 2; k++) page[k] = j[k] >= 0 && j[k] < p.max_blocks ? __ldg(bt + j[k]) : 0;
    const int pos = seq_len - p.qlen + (it.row - it.r * p.qlen); // < 0: padding, nothing visible
    const int nb = pos >= 0 ? min(pos / BLOCK_TOKENS + 1, p.max_blocks) : 0;
    int n = 0;
#pragma unroll
    for (int k = 0; k < 2; k++) {
      const bool ok = j[k] >= 0 && j[k] < nb;
      const uint32_t mask = __ballot_sync(0xffffffffu, ok);
      if (ok) {
        const int at = n + __popc(mask & ((1u << lane) - 1u));
        s_page[at] = page[k];
        s_ntok[at] = min(BLOCK_TOKENS, pos - j[k] * BLOCK_TOKENS + 1);
      }
      n += __popc(mask);
    }
    if (lane == 0) s_nblk = n;
  }
  st_cp_async_wait<0>(); // this thread's q chunks
  __syncthreads();       // the block list and every thread's q chunks
  const int nblk = s_nblk;

  // The K scale read from device memory where the call's scale views hold
  // one scale each (after st_pdl_wait: a kernel before may write it).
  const float scale_log2 = p.k_scale_ptr ? p.score_scale_log2 * __ldg(p.k_scale_ptr) : p.score_scale_log2;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  st_softmax_state<HEAD_DIM> st;
  st_softmax_init(st);
  st_softmax_state<WARP_DIMS> sd; // pv_dims: the warp's dimensions
  st_softmax_init(sd);

  if (IS_FP8 && !raw_v) {
    // One commit group per block (st_kv): the raw K and V rows are widened
    // together, and the stage is refilled before the math.
#pragma unroll
    for (int s = 0; s < STAGES; s++) {
      if (s < nblk) st_kv::issue(p, it.g, s_page[s], s_ntok[s], region, s);
      st_cp_async_commit();
    }
    // K_REGS: q in f16 (ordered before its readers by block 0's barrier);
    // V too unless in tensor mode, where the V tile stays bf16. (k_regs 2
    // comes here in tensor mode only: the other branches are not compiled,
    // which keeps the code a B = 1 CTA fetches once, from L2, smaller.)
    const bool tensor = K_REGS == 2 || p.scale_mode == 2;
    // K_REGS: the rows' unscale in the softmax's scale
    float q_scale[2] = {scale_log2, scale_log2};
    if (K_REGS) {
      st_q_to_f16(q_smem, s_q_unscale);
      st_f16_row_scales(s_q_unscale, wm * 16, scale_log2, q_scale);
    }
    for (int i = 0; i < nblk; i++) {
      const int buf = i % STAGES, lim = s_ntok[i];
      st_cp_async_wait<STAGES - 1>();
      __syncthreads(); // block i is in shared memory, for every thread's copies
      st_kv::widen<K_REGS != 0>(p, region, buf); // K_REGS: V only
      float s[NT][4];
      if (K_REGS) { // q.K from the raw rows while the others widen V
        if (tensor)
          st_block_qk_f16<true>(q_tile, wm * 16, st_kv::raw_k(region, buf), st_kv::k_scales(region, buf),
                                wn * WARP_TOKENS, s);
        else
          st_block_qk_f16<false>(q_tile, wm * 16, st_kv::raw_k(region, buf), nullptr, wn * WARP_TOKENS, s);
      }
      __syncthreads(); // the tiles are widened (K_REGS: and every warp read its raw K)
      if (i + STAGES < nblk) st_kv::issue(p, it.g, s_page[i + STAGES], s_ntok[i + STAGES], region, buf);
      st_cp_async_commit();
      if (K_REGS) {
        st_block_softmax(wn * WARP_TOKENS, lim, q_scale, st, s);
        if (tensor)
          st_block_values(st_kv::v_tile(region, buf), wn * WARP_TOKENS, s, st);
        else
          st_block_values<true>(st_kv::v_tile(region, buf), wn * WARP_TOKENS, s, st);
      } else {
        const float *k_scale = st_kv::wide_k_scales(p, region, buf);
        st_with_k_scale(k_scale, [&](auto flag) {
          st_block_scores<decltype(flag)::value>(q_tile, wm * 16, st_kv::k_tile(region, buf), k_scale,
                                                 wn * WARP_TOKENS, lim, scale_log2, st, s);
        });
        st_block_values(st_kv::v_tile(region, buf), wn * WARP_TOKENS, s, st);
      }
      __syncthreads(); // every warp is done with the widened tiles
    }
  } else {
    // Every stage's block in flight at once (all of a CTA's blocks where
    // nblk <= STAGES), two groups each (tma: the ring's first halves).
    // Group count before block i's waits: 2 * (STAGES + i), so K of block
    // i is in once at most 2*STAGES - 1 are pending, V once 2*STAGES - 2.
    if (!TMA)
#pragma unroll
      for (int s = 0; s < STAGES; s++) st_issue_block(p, it.g, s_page, s_ntok, s, nblk, region, s);
    else
      for (int h = 0; h < HALVES; h++) st_copy_half(p, it.g, s_page, h, nblk, region, full);
    // raw_v: q.K in f16 too, the rows' unscale in the softmax's scale
    float q_scale[2] = {scale_log2, scale_log2};
    if (IS_FP8) {
      st_q_to_f16(q_smem, s_q_unscale);
      st_f16_row_scales(s_q_unscale, wm * 16, scale_log2, q_scale);
      // The fragments, for every warp: cp.async's first wait has a barrier
      // after it; tma's waits are the mbarriers' (racecheck found the reads
      // of other warps' fragments without it).
      if (TMA) __syncthreads();
    }
    // tma: block i is halves 2i and 2i + 1 of the ring; the slot of each is
    // copied into again, with half 2i + HALVES or 2i + 1 + HALVES, as soon
    // as every warp is done with it.
    if (PV_DIMS) {
      char *after_ring = region + HALVES * HALF_BYTES;
      st_pvd_blocks(p, it.g, s_page, s_ntok, nblk, region, full, q_tile, q_scale, st_smem_addr(after_ring),
                    (float *)(after_ring + 2 * P_BYTES), &s_v_done, sd);
      __syncthreads(); // every warp is done with the ring and P (the combine area overlaps them)
    }
    for (int i = 0; TMA && !PV_DIMS && i < nblk; i++) {
      const int lim = s_ntok[i];
      float s[NT][4];
      st_block_scores_of<BLOCK_TOKENS>(q_tile, wm * 16, st_wait_half(region, 2 * i, full), wn * WARP_TOKENS, lim,
                                       q_scale, st, s);
      __syncthreads(); // every warp is done with K of block i
      st_copy_half(p, it.g, s_page, 2 * i + HALVES, nblk, region, full);
      const uint32_t v_rows = st_wait_half(region, 2 * i + 1, full);
      st_zero_v_rows(v_rows, wn * WARP_TOKENS, lim);
      st_block_values_of<BLOCK_TOKENS>(v_rows, wn * WARP_TOKENS, s, st);
      __syncthreads(); // every warp is done with V of block i
      st_copy_half(p, it.g, s_page, 2 * i + 1 + HALVES, nblk, region, full);
    }
    for (int i = 0; !TMA && i < nblk; i++) {
      const int buf = i % STAGES, lim = s_ntok[i];
      float s[NT][4];
      st_cp_async_wait<2 * STAGES - 1>();
      __syncthreads(); // K of block i is in shared memory, for every thread's copies
      st_block_scores_of<0>(q_tile, wm * 16, st_kv::raw_k(region, buf), wn * WARP_TOKENS, lim, q_scale, st, s);
      st_cp_async_wait<2 * STAGES - 2>();
      __syncthreads(); // V of block i; and every warp is done with K of block i
      // One stage: the next block's K lands under these values, not after
      // them (the same commit order, so the waits' counts hold). Its wait
      // was the largest stall of fp8 B = 32's w4.s1 (ncu: 16% of the
      // samples); deeper pipelines have it in flight already, and bf16 B =
      // 32's w4.s2 ran 0.4 us slower with it (v2.42).
      if (STAGES == 1) st_issue_half_group(p, 0, it.g, s_page, s_ntok, i + 1, nblk, region, buf);
      // (the stage's K rows, then its V rows: fp8 raw, bf16 a tile)
      st_block_values_of<0>(st_kv::raw_k(region, buf) + (IS_FP8 ? BLOCK_TOKENS * HEAD_DIM : st_kv::TILE_BYTES),
                            wn * WARP_TOKENS, s, st);
      __syncthreads(); // every warp is done with V of block i
      if (STAGES > 1) st_issue_half_group(p, 0, it.g, s_page, s_ntok, i + STAGES, nblk, region, buf);
      st_issue_half_group(p, 1, it.g, s_page, s_ntok, i + STAGES, nblk, region, buf);
    }
  }

  // Combine the WARPS_N warps of each m-tile (the tiles are free now).
  // pv_dims: each warp's dimensions of the one O.
  float *c_o = (float *)region;                      // [COMBINE_WARPS][16][HEAD_DIM]
  float *c_ml = c_o + COMBINE_WARPS * 16 * HEAD_DIM; // [WARPS][16][2]
  st_softmax_finish_l(st);
  st_softmax_finish_l(sd);
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    const int hrow = (lane >> 2) + rr * 8;
    float *o_row = c_o + (PV_DIMS ? hrow : warp * 16 + hrow) * HEAD_DIM;
    if (PV_DIMS && IS_FP8) { // the warp's n-tiles warp * NTW .., permuted as in the branch below
#pragma unroll
      for (int j = 0; j < NTW; j += 2)
#pragma unroll
        for (int cc = 0; cc < 2; cc++)
          *(float2 *)(o_row + st_raw_v_dim(warp * NTW + j, 2 * (lane & 3) + cc)) =
              make_float2(sd.o[j][rr * 2 + cc], sd.o[j + 1][rr * 2 + cc]);
    } else if (PV_DIMS) { // bf16: the warp's n-tiles in order
#pragma unroll
      for (int j = 0; j < NTW; j++)
        *(float2 *)(o_row + (warp * NTW + j) * 8 + 2 * (lane & 3)) = make_float2(sd.o[j][rr * 2], sd.o[j][rr * 2 + 1]);
    } else if (IS_FP8 && raw_v) { // dimensions permuted (st_raw_v_dim): n-tiles 2i' and 2i'+1 hold adjacent ones
#pragma unroll
      for (int dt = 0; dt < DT; dt += 2)
#pragma unroll
        for (int cc = 0; cc < 2; cc++)
          *(float2 *)(o_row + st_raw_v_dim(dt, 2 * (lane & 3) + cc)) =
              make_float2(st.o[dt][rr * 2 + cc], st.o[dt + 1][rr * 2 + cc]);
    } else {
#pragma unroll
      for (int dt = 0; dt < DT; dt++)
        *(float2 *)(o_row + dt * 8 + 2 * (lane & 3)) = make_float2(st.o[dt][rr * 2], st.o[dt][rr * 2 + 1]);
    }
    if ((lane & 3) == 0) { // pv_dims: every warp's m is the same, its l the share of its tokens
      c_ml[(warp * 16 + hrow) * 2] = PV_DIMS ? sd.m[rr] : st.m[rr];
      c_ml[(warp * 16 + hrow) * 2 + 1] = PV_DIMS ? sd.l[rr] : st.l[rr];
    }
  }
  __syncthreads();
  const bool direct = p.splits == 1;
  const uint32_t rank0 = cluster_merge ? st_cluster_rank() - (uint32_t)split : 0u;
  const st_recv recv = {st_smem_addr(recv_o), st_smem_addr(recv_ml)};
  if (cluster_merge) st_cluster_wait(); // every receive barrier of the cluster is initialized
  const int split_shift = cluster_merge ? __ffs(p.splits) - 1 : 0;
  // Four dimensions per thread and step: 16-byte shared and global accesses.
  for (int e = threadIdx.x; e < NE; e += THREADS) {
    const int h = e / (HEAD_DIM / 4), d = (e - h * (HEAD_DIM / 4)) * 4;
    const int w0 = (h / 16) * WARPS_N, hr = h % 16;
    const st_combined c = st_combine_ml(c_ml, h);
    const float2 ml = make_float2(c.m, c.l);
    float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
    if (ml.x != -ST_INF)
#pragma unroll
      for (int w = 0; w < COMBINE_WARPS / M_TILES; w++) {
        const float wt = c.wt[w];
        const float4 ow = *(const float4 *)(c_o + ((w0 + w) * 16 + hr) * HEAD_DIM + d);
        o.x += ow.x * wt;
        o.y += ow.y * wt;
        o.z += ow.z * wt;
        o.w += ow.w * wt;
      }
    if (direct) {
      st_write_out(p, it, h, d, ml.x, ml.y, o);
    } else if (cluster_merge) {
      st_push_piece(split, split_shift, rank0, recv, recv_bar, e, o);
    } else {
      const int64_t ps = (it.id * p.splits + split) * GROUP + h;
      *(float4 *)(p.part_o + ps * HEAD_DIM + d) = o;
      if (d == 0) {
        p.part_ml[ps * 2] = ml.x;
        p.part_ml[ps * 2 + 1] = ml.y;
      }
    }
  }
  // Each head's (m, l) to every owner: one (head, owner) pair per thread
  // (v2.5 had one lane per head push to all owners in turn).
  if (cluster_merge)
    for (int k = threadIdx.x; k < (GROUP << split_shift); k += THREADS) {
      const int h = k % GROUP;
      const uint32_t to = rank0 + (uint32_t)(k / GROUP);
      const st_combined c = st_combine_ml(c_ml, h);
      st_push_f2(st_cluster_map(recv.ml + (uint32_t)(split * GROUP + h) * 8u, to), make_float2(c.m, c.l),
                 st_cluster_map(recv_bar, to));
    }
  if (cluster_merge) {
    st_mbar_wait(recv_bar, 0); // every split's pieces of this CTA's slice are in
    st_merge_received(p, it, split, split_shift, recv_o, recv_ml);
    return;
  }
  if (direct || ALGO_SPLIT) return;

  // single, splits not dividing the cluster: the last CTA of the item
  // merges from the workspace (common/last_cta.cuh).
  __syncthreads();
  if (threadIdx.x == 0) s_last = st_last_to_arrive(&p.counters[it.id], (uint32_t)p.splits);
  __syncthreads();
  if (!s_last) return;
  st_merge_splits(p, it, (float *)region); // the tiles and combine area are free by now
  if (threadIdx.x == 0) p.counters[it.id] = 0u; // ready for the next launch (graph replay)
}

// split: grid (R*qlen, Hkv), THREADS threads.
extern "C" __global__ void __launch_bounds__(THREADS) st_sparse_attn_decode_merge(const st_sparse_attn_decode_params p) {
  __shared__ float s_merge[MERGE_SMEM / 4];
  st_pdl_wait(); // launched programmatically after the main kernel: its partials
  st_merge_splits(p, st_item_of(p, blockIdx.x, blockIdx.y), s_merge);
}
