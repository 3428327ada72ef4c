// mla_sparse_attend.cuh - DeepSeek-V3.2 token-sparse MLA attention: the
// kernels' bodies that mla_sparse_decode.cu and mla_sparse_prefill.cu share.
//
// MLA with one latent KV head: a cache row is K (576 dims: 512 latent, 64
// RoPE) and V is its first 512 dims. A query row lists token slots; every
// q head of the row attends to the same tokens, so one CTA takes HEADS q
// heads and reads each cache row once for all of them. Decode's rows are
// b*qlen + t of B requests and its slots page * page_size + offset;
// prefill's rows are query tokens (one-token requests, qlen 1) and its
// slots kv rows (KV_PAGED 0).
//
// Grid (rows * splits, Hq / HEADS); THREADS threads. CTA x takes row
// x / splits, heads blockIdx.y * HEADS .. +HEADS, and the entries
// [s * entries_per_split, (s+1) * entries_per_split) of the row (s = x %
// splits), cut at the request's topk_length. Per tile of TILE entries:
//   1. threads 0..TILE-1 read the entries' slots (none: < 0, >= num_slots,
//      or past the CTA's range);
//   2. all threads copy the tile's cache rows to shared memory in 16-byte
//      loads (fp8: latent times its group's scale, RoPE from bf16; rows of
//      no token are zeros, so a zero weight never meets a NaN): fp32 rows
//      for the CUDA-core family, bf16 rows for the tensor-core one. With
//      PIPE the rows come from a raw copy in shared memory that cp.async
//      filled during the previous tile's math, and the next tile's copy is
//      issued right after (slots of two tiles kept, by parity);
//   3. scores S = q K^T over the 576 dims, times sm_scale * log2(e), into
//      shared memory (-inf for no token):
//        MMA 0: thread pairs (head, token) on CUDA cores, q from a bf16
//               tile read as bf16x2, cache rows padded to 577 floats (the
//               lanes' tokens in distinct banks);
//        MMA 1: warp (m, w4) of the 4 * HEADS / 16 warps takes q heads
//               16m .. 16m+15 and tokens w4 * TILE / 4 ..: mma.sync
//               m16n8k16 bf16 (A: q rows, B: cache rows, both read as
//               bf16 pairs from shared rows of 584, 4 banks apart);
//   4. 8 threads a head run its online softmax in base 2 (max and sum
//      reduced by shuffles): new max, the rescale factor of the old state,
//      the tile's weights P (MMA 1: also as bf16, the A operand of P.V);
//   5. o = o * alpha + P V:
//        MMA 0: each thread 4 dims (dg + 128 i) of HEADS / (THREADS / 128)
//               heads;
//        MMA 1: warp (m, w4) dims w4 * 128 .. +128 of heads 16m ..: 16
//               accumulator tiles of mma.sync, V's pairs of tokens packed
//               from the bf16 rows.
// MMA 2 (wgmma) keeps the grid and the copies but not steps 3-5 as above:
// two warpgroups on 64 heads, scores, softmax and P.V in registers (its
// body is the second st_mla_sparse_attend_main below).
// One split: the CTA writes o (divided by l, times the sink's factor), lse
// and max_logits (the running max m in natural units; where asked). Several:
// it writes its partial (o, m, l) to the workspace and the merge (grid
// (rows, Hq), 128 threads) combines them by their log-sum-exp, applies the
// sink and writes o, lse and max_logits (the largest m of the splits).
//
// Bytes per call: the valid entries' cache rows, each read once per head
// tile (1152 bytes bf16, 656 fp8), plus q (1152 bytes a head), o (1024
// bytes a head), the indices and, with splits, 2 x 2056 bytes a (row, head,
// split) of workspace. FLOPs: 2 * rows * Hq * entries * (576 + 512): on
// CUDA cores in fp32 (MMA 0, the correctness baseline, bound by shared
// memory at ~10 TFLOP/s) or on tensor cores (MMA 1, bf16 operands, fp32
// accumulation; docs/kernels/mla_sparse_decode.md).
//
// The including template defines, before including this file, the
// constexpr ints IS_FP8, HEADS, TILE, THREADS, MMA and PIPE (a variant's
// values: mla_sparse_decode.cu says what each means), KV_PAGED (1:
// slots are page * page_size + offset; 0: slots are rows, kv_stride_page
// apart) and MAX_LOGITS (1: the kernels write max_logits where its pointer
// is set; 0: they hold no code for it, so decode's kernels are what they
// were before prefill shared them), and its extern "C" kernels call st_mla_sparse_attend_main and
// st_mla_sparse_attend_merge.
#ifndef ST_MLA_SPARSE_ATTEND_CUH
#define ST_MLA_SPARSE_ATTEND_CUH

#include "common/mla_sparse_attend_params.h"
#include "common/pdl.cuh"
#include "common/smem_tile.cuh"
#include "common/attn_wgmma.cuh"

constexpr int DIM_QK = 576;
constexpr int DIM_V = 512;
constexpr int DIM_ROPE = 64;
constexpr int FP8_GROUP = 128;          // latent values per fp32 scale
constexpr int FP8_SCALES_AT = DIM_V;    // byte offset of the scales in an fp8 row
constexpr int FP8_ROPE_AT = DIM_V + 16; // byte offset of the RoPE bf16 values
// Shared rows, padded (runtime/ops/mla_sparse_decode.c mirrors them): q
// rows of 584 bf16 (neighbouring heads 4 banks apart, rows 16-byte
// aligned); cache rows of 577 floats (MMA 0: neighbouring tokens 1 bank
// apart) or 584 bf16 (MMA 1, as q's); MMA 1's weights in rows of TILE + 8
// bf16 (the A fragments' 8 rows in distinct banks for TILE 32 and 64).
constexpr int Q_LD = 584;
constexpr int KV_LD = MMA ? Q_LD : 577;
constexpr int P_LD = TILE + 8;
// 16-byte vectors of a row: bf16 72; fp8 32 latent + 8 RoPE (the scales
// are read where they are used).
constexpr int VEC_BF16 = 8;
constexpr int VEC_FP8 = 16;
constexpr int Q_VECS = DIM_QK / VEC_BF16;
constexpr int LATENT_VECS = DIM_V / VEC_FP8;
constexpr int ROPE_VECS = DIM_ROPE / VEC_BF16;
constexpr int ROW_VECS = IS_FP8 ? LATENT_VECS + ROPE_VECS : Q_VECS;
constexpr int ROW_ELEM_BYTES = IS_FP8 ? 1 : 2; // the cache's element (strides count these)
// o's update: DIM_THREADS threads cover a head's 512 dims, DIMS_PER_THREAD
// each; the CTA's threads are HEAD_GROUPS such groups.
constexpr int DIM_THREADS = 128;
constexpr int DIMS_PER_THREAD = DIM_V / DIM_THREADS;
constexpr int HEAD_GROUPS = THREADS / DIM_THREADS;
constexpr int HEADS_PER_THREAD = HEADS / HEAD_GROUPS;
constexpr float LN2 = 0.693147180559945309f;
// Threads a head's online softmax takes (their max and sum reduced by
// shuffles within the group): every variant has at least 8 threads a head.
constexpr int SOFTMAX_LANES = 8;

// MMA 1: 4 warps an m tile of 16 heads, each a quarter of the tile's
// tokens (scores) and of o's dims (P.V).
constexpr int M_TILES = HEADS / 16;
constexpr int WARP_TOKENS = TILE / 4;
constexpr int WARP_DIMS = DIM_V / 4;
constexpr int QK_STEPS = DIM_QK / 16; // k steps of the scores
// (at least 1: MMA 0 builds compile the MMA 1 functions too, unused)
constexpr int S_NTILES = WARP_TOKENS / 8 > 0 ? WARP_TOKENS / 8 : 1;
constexpr int O_NTILES = WARP_DIMS / 8;
// k steps of the scores unrolled: with 512 threads (128 registers) more
// spill beside o's 64 accumulators; 16 warps hide the loads' latency.
constexpr int QK_UNROLL = THREADS >= 512 ? 1 : 4;

static_assert(THREADS % DIM_THREADS == 0 && THREADS <= 1024, "threads are whole groups of 128");
static_assert(HEADS % HEAD_GROUPS == 0, "every head group holds whole heads");
static_assert(MMA || HEADS_PER_THREAD * DIMS_PER_THREAD <= 64, "o accumulators a thread holds");
static_assert(MMA != 1 || (THREADS == 4 * 32 * M_TILES && HEADS % 16 == 0 && WARP_TOKENS % 8 == 0),
              "MMA 1: 4 warps an m tile of 16 heads, each whole 8-token n tiles");
static_assert(MMA == 2 || (THREADS >= SOFTMAX_LANES * HEADS && THREADS >= TILE),
              "softmax lanes per head, a thread per entry");
static_assert(MMA == 2 || (TILE % SOFTMAX_LANES == 0 && (SOFTMAX_LANES * HEADS) % 32 == 0),
              "whole warps of whole groups");
static_assert(MMA != 2 || (HEADS == 64 && TILE == 64 && THREADS == 256 && PIPE),
              "MMA 2: two warpgroups on 64 heads, 64-token tiles, the rows copied by cp.async");
static_assert(TILE % 16 == 0, "tiles of 16 entries");
static_assert(S_NTILES == 1 || S_NTILES % 2 == 0, "the scores' B fragments: one n tile, or pairs by ldmatrix x4");

// Dynamic shared memory: q tile, cache tile, scores (then weights), MMA
// 1's weights in bf16, each head's m, l and rescale factor, the tile's
// slots.
constexpr unsigned Q_BYTES = HEADS * Q_LD * 2;
constexpr unsigned KV_BYTES = TILE * KV_LD * (MMA ? 2 : 4);
constexpr unsigned S_BYTES = HEADS * TILE * 4;
constexpr unsigned P_BYTES = MMA ? HEADS * P_LD * 2 : 0;
// PIPE: the raw rows (656 or 1152 bytes, 16-byte chunks) of the tile in
// flight, and a second list of slots (the next tile's).
constexpr int RAW_ROW = IS_FP8 ? 656 : DIM_QK * 2;
constexpr int RAW_CHUNKS = RAW_ROW / 16;
constexpr unsigned RAW_BYTES = PIPE ? TILE * RAW_ROW : 0;
constexpr int SLOT_LISTS = PIPE ? 2 : 1;
// MMA 2: q and the cache tile as wgmma operands (rows of 1152 bytes in 9
// panels of 128, the 128-byte swizzle), the raw rows, two lists of slots.
constexpr unsigned WG_Q_BYTES = HEADS * DIM_QK * 2;
constexpr unsigned WG_KV_BYTES = TILE * DIM_QK * 2;
constexpr unsigned SMEM_BYTES =
    MMA == 2 ? WG_Q_BYTES + WG_KV_BYTES + RAW_BYTES + SLOT_LISTS * TILE * 4
             : Q_BYTES + KV_BYTES + RAW_BYTES + S_BYTES + P_BYTES + HEADS * 3 * 4 + SLOT_LISTS * TILE * 4;

// ---- conversions -----------------------------------------------------------

__device__ __forceinline__ float st_bf16_lo(uint32_t pair) { return __uint_as_float(pair << 16); }
__device__ __forceinline__ float st_bf16_hi(uint32_t pair) { return __uint_as_float(pair & 0xffff0000u); }

// Round to nearest even; NaN stays NaN.
__device__ __forceinline__ uint16_t st_to_bf16(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

// e4m3 (OCP e4m3fn): bias 7, no infinities, S.1111.111 is NaN.
__device__ __forceinline__ float st_e4m3(uint32_t b) {
  const uint32_t sign = (b & 0x80u) << 24, e = (b >> 3) & 15u, m = b & 7u;
  if (e == 0) return __uint_as_float(__float_as_uint((float)m * 0.001953125f) | sign); // m/8 * 2^-6
  if (e == 15 && m == 7) return __uint_as_float(0x7fc00000u);
  return __uint_as_float(sign | ((e + 120u) << 23) | (m << 20));
}

// ---- the main kernel's steps -------------------------------------------------

// The entries of row `row` that count: topk, or clamp(topk_length[b]).
__device__ __forceinline__ int st_row_entries(const st_mla_sparse_attend_params &p, int row) {
  if (!p.topk_length) return p.topk;
  const int n = p.topk_length[(int64_t)(row / p.qlen) * p.topk_length_stride];
  return n < 0 ? 0 : n > p.topk ? p.topk : n;
}

// A staged cache element: fp32 (MMA 0) or bf16 (MMA 1, rounded to nearest).
template <bool BF16> struct st_kv_elem { typedef float type; };
template <> struct st_kv_elem<true> { typedef uint16_t type; };
typedef st_kv_elem<MMA != 0>::type kv_t;
__device__ __forceinline__ void st_put(float *dst, float v) { *dst = v; }
__device__ __forceinline__ void st_put(uint16_t *dst, float v) { *dst = st_to_bf16(v); }

// The cache row of a (valid) slot: page slot / page_size, token slot %
// page_size where KV_PAGED, else row `slot` (no division).
__device__ __forceinline__ const char *st_slot_row(const st_mla_sparse_attend_params &p, int32_t slot) {
  if (!KV_PAGED) return (const char *)p.kv + (int64_t)slot * p.kv_stride_page * ROW_ELEM_BYTES;
  return (const char *)p.kv +
         ((int64_t)(slot / p.page_size) * p.kv_stride_page + (int64_t)(slot % p.page_size) * p.kv_stride_token) *
             ROW_ELEM_BYTES;
}

// One 16-byte vector `v` of a cache row (global, or PIPE's raw copy in
// shared memory: the same layout): its bytes and, for fp8 latent values,
// their group's scale. Loading is split from storing so that a thread has
// a batch of loads in flight before it waits for any (st_stage_rows).
struct st_raw_vector {
  uint4 raw;
  float scale;
};

__device__ __forceinline__ void st_load_vector(const char *row, int v, st_raw_vector &x) {
  if (!row) return;
  const bool latent = IS_FP8 && v < LATENT_VECS;
  if (latent) {
    x.raw = *(const uint4 *)(row + v * VEC_FP8);
    x.scale = *(const float *)(row + FP8_SCALES_AT + 4 * (v * VEC_FP8 / FP8_GROUP));
  } else {
    x.raw = *(const uint4 *)(row + (IS_FP8 ? FP8_ROPE_AT + (v - LATENT_VECS) * 16 : v * 16));
  }
}

// Vector `v` into shared row `dst` (zeros for no row): fp32 values (MMA
// 0), or bf16 stored 16 bytes at a time (MMA 1: a bf16 vector as it is,
// fp8 latent values widened by cvt and scaled, rounded once).
__device__ __forceinline__ void st_store_vector(bool valid, const st_raw_vector &x, int v, kv_t *dst) {
  const bool latent = IS_FP8 && v < LATENT_VECS;
  kv_t *out = !IS_FP8 ? dst + v * VEC_BF16 : latent ? dst + v * VEC_FP8 : dst + DIM_V + (v - LATENT_VECS) * VEC_BF16;
  if (MMA) {
    uint4 *o = (uint4 *)out;
    if (!valid) {
      o[0] = make_uint4(0u, 0u, 0u, 0u);
      if (latent) o[1] = make_uint4(0u, 0u, 0u, 0u);
    } else if (latent) {
      uint32_t b[8];
      st_e4m3x16_widen<false, true>(x.raw, x.scale, b);
      o[0] = make_uint4(b[0], b[1], b[2], b[3]);
      o[1] = make_uint4(b[4], b[5], b[6], b[7]);
    } else {
      o[0] = x.raw;
    }
    return;
  }
  if (!valid) {
    for (int i = 0; i < (latent ? VEC_FP8 : VEC_BF16); i++) st_put(out + i, 0.f);
    return;
  }
  const uint32_t w[4] = {x.raw.x, x.raw.y, x.raw.z, x.raw.w};
  if (latent) {
#pragma unroll
    for (int i = 0; i < 16; i++) st_put(out + i, st_e4m3((w[i / 4] >> (8 * (i % 4))) & 0xffu) * x.scale);
    return;
  }
  // bf16 values: a bf16 cache's vector v, or an fp8 row's RoPE
#pragma unroll
  for (int i = 0; i < 4; i++) {
    st_put(out + 2 * i, st_bf16_lo(w[i]));
    st_put(out + 2 * i + 1, st_bf16_hi(w[i]));
  }
}

// Step 2: the tile's rows into the shared cache tile. The rows come from
// global memory (FROM_RAW false: the slots' cache rows) or from PIPE's raw
// copy (row t at raw + t * RAW_ROW); each thread loads STAGE_BATCH
// vectors before it converts and stores any, so that many gathers are in
// flight at once instead of one.
constexpr int STAGE_VECS = TILE * ROW_VECS;
constexpr int STAGE_PER_THREAD = (STAGE_VECS + THREADS - 1) / THREADS;
// The batch is what registers allow beside o's accumulators: 512 threads
// have 128 registers each (3 vectors of a global gather fit without
// spilling; from PIPE's shared copy, whose latency is short, one).
constexpr int STAGE_BATCH_MOST = PIPE ? (THREADS >= 512 ? 1 : 4) : (THREADS >= 512 ? 3 : 8);
[[maybe_unused]] constexpr int STAGE_BATCH = STAGE_PER_THREAD < STAGE_BATCH_MOST ? STAGE_PER_THREAD : STAGE_BATCH_MOST;
template <bool FROM_RAW>
__device__ __forceinline__ void st_stage_rows(const st_mla_sparse_attend_params &p, const int32_t *s_slot,
                                              const char *raw, kv_t *s_kv, int tid) {
  for (int j0 = 0; j0 < STAGE_PER_THREAD; j0 += STAGE_BATCH) {
    st_raw_vector x[STAGE_BATCH];
    bool valid[STAGE_BATCH];
#pragma unroll
    for (int j = 0; j < STAGE_BATCH; j++) {
      const int i = tid + (j0 + j) * THREADS;
      valid[j] = false;
      if (j0 + j < STAGE_PER_THREAD && i < STAGE_VECS) {
        const int t = i / ROW_VECS;
        valid[j] = s_slot[t] >= 0;
        if (valid[j]) st_load_vector(FROM_RAW ? raw + t * RAW_ROW : st_slot_row(p, s_slot[t]), i % ROW_VECS, x[j]);
      }
    }
#pragma unroll
    for (int j = 0; j < STAGE_BATCH; j++) {
      const int i = tid + (j0 + j) * THREADS;
      if (j0 + j < STAGE_PER_THREAD && i < STAGE_VECS)
        st_store_vector(valid[j], x[j], i % ROW_VECS, s_kv + (i / ROW_VECS) * KV_LD);
    }
  }
}

// Step 3: score of (head h, token t) in log2 units; -inf for no token.
__device__ __forceinline__ float st_score(const st_mla_sparse_attend_params &p, const uint16_t *s_q, const float *s_kv,
                                          const int32_t *s_slot, int h, int t) {
  if (s_slot[t] < 0) return -__int_as_float(0x7f800000);
  const uint32_t *q = (const uint32_t *)(s_q + h * Q_LD);
  const float *k = s_kv + t * KV_LD;
  float acc0 = 0.f, acc1 = 0.f; // two chains: the dims' pairs
#pragma unroll 8
  for (int d2 = 0; d2 < DIM_QK / 2; d2++) {
    const uint32_t qq = q[d2];
    acc0 = fmaf(st_bf16_lo(qq), k[2 * d2], acc0);
    acc1 = fmaf(st_bf16_hi(qq), k[2 * d2 + 1], acc1);
  }
  return (acc0 + acc1) * p.score_scale_log2;
}

// ---- MMA 1: tensor cores -------------------------------------------------------
//
// mma.sync m16n8k16, bf16 in, fp32 accumulate. Lane = 4 g + c. A (16 x 16,
// row-major): a[0] = (g, 2c..2c+1), a[1] = (g+8, 2c..), a[2] = (g, 2c+8..),
// a[3] = (g+8, 2c+8..); B (16 x 8, k by n): b[0] = (k 2c..2c+1, n g), b[1]
// = (k 2c+8.., n g); C: c[0..1] = (g, 2c..2c+1), c[2..3] = (g+8, 2c..).
// Each register holds two bf16, the lower index in the low half.
__device__ __forceinline__ void st_mma_bf16(float *c, const uint32_t *a, const uint32_t *b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Two 8x8 b16 matrices; lanes 0-15 give the row addresses (matrix lane /
// 8), the other lanes' addresses are not read.
__device__ __forceinline__ void st_ldmatrix_x2(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}

// Fragments come from shared memory by ldmatrix. Every tile they read has
// rows 16 bytes modulo 128 apart (q and cache rows of 1168 bytes, weight
// rows of 144 or 80), so the 8 rows of one matrix fall in 8 distinct bank
// groups.
//
// The address lane `lane` gives for the A fragment (x4) of rows r0 ..
// r0+15 of a bf16 tile with rows of `ld` elements, at column 0: matrices
// (rows 0-7, cols 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15) are a[0..3].
__device__ __forceinline__ uint32_t st_frag_a_addr(uint32_t tile, int ld, int r0, int lane) {
  return tile + (uint32_t)(((r0 + (lane & 15)) * ld + 8 * (lane >> 4)) * 2);
}

// Step 3, MMA 1: warp (mt, w4) scores heads 16 mt .. and tokens w4 *
// WARP_TOKENS ..; the cache tile's rows are B's columns (k contiguous), so
// one ldmatrix x4 gives the B fragments of two n tiles: matrices (tokens
// 0-7, dims 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15).
__device__ __forceinline__ void st_scores_mma(const st_mla_sparse_attend_params &p, const uint16_t *s_q,
                                              const uint16_t *s_kv, const int32_t *s_slot, float *s_s, int warp,
                                              int lane) {
  const int mt = warp / 4, t0 = (warp % 4) * WARP_TOKENS, g = lane >> 2, c = lane & 3;
  const uint32_t a_addr = st_frag_a_addr(st_smem_addr(s_q), Q_LD, 16 * mt, lane);
  const uint32_t b_addr =
      st_smem_addr(s_kv) + (uint32_t)(((t0 + (lane & 7) + 8 * (lane >> 4)) * KV_LD + 8 * ((lane >> 3) & 1)) * 2);
  float acc[S_NTILES][4];
#pragma unroll
  for (int j = 0; j < S_NTILES; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
#pragma unroll(QK_UNROLL)
  for (int ks = 0; ks < QK_STEPS; ks++) {
    uint32_t a[4];
    st_ldmatrix_x4(a, a_addr + 32 * ks);
    if (S_NTILES == 1) {
      uint32_t b[2];
      st_ldmatrix_x2(b, b_addr + 32 * ks);
      st_mma_bf16(acc[0], a, b);
    } else {
#pragma unroll
      for (int j = 0; j + 1 < S_NTILES; j += 2) {
        uint32_t b[4];
        st_ldmatrix_x4(b, b_addr + (uint32_t)(16 * j * KV_LD) + 32 * ks);
        st_mma_bf16(acc[j], a, b);
        st_mma_bf16(acc[j + 1], a, b + 2);
      }
    }
  }
#pragma unroll
  for (int j = 0; j < S_NTILES; j++)
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int h = 16 * mt + g + 8 * (i / 2), t = t0 + 8 * j + 2 * c + (i % 2);
      s_s[h * TILE + t] = s_slot[t] < 0 ? -__int_as_float(0x7f800000) : acc[j][i] * p.score_scale_log2;
    }
}

// Step 5, MMA 1: warp (mt, w4) adds P V to its o tiles, dims w4 *
// WARP_DIMS .. of heads 16 mt ..; V's B fragments of two n tiles by one
// ldmatrix x4 .trans of the token-major rows: matrices (tokens 0-7, dims
// 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15).
__device__ __forceinline__ void st_pv_mma(float (*acc)[4], const uint16_t *s_p, const uint16_t *s_kv,
                                          const float *s_alpha, int warp, int lane) {
  const int mt = warp / 4, d0 = (warp % 4) * WARP_DIMS, g = lane >> 2;
  const float a_lo = s_alpha[16 * mt + g], a_hi = s_alpha[16 * mt + g + 8];
#pragma unroll
  for (int j = 0; j < O_NTILES; j++) {
    acc[j][0] *= a_lo;
    acc[j][1] *= a_lo;
    acc[j][2] *= a_hi;
    acc[j][3] *= a_hi;
  }
  const uint32_t a_addr = st_frag_a_addr(st_smem_addr(s_p), P_LD, 16 * mt, lane);
  const uint32_t v_addr =
      st_smem_addr(s_kv) + (uint32_t)((((lane & 7) + 8 * ((lane >> 3) & 1)) * KV_LD + d0 + 8 * (lane >> 4)) * 2);
#pragma unroll
  for (int kk = 0; kk < TILE / 16; kk++) {
    uint32_t a[4];
    st_ldmatrix_x4(a, a_addr + 32 * kk);
#pragma unroll
    for (int j = 0; j < O_NTILES; j += 2) {
      uint32_t b[4];
      st_ldmatrix_x4_trans(b, v_addr + (uint32_t)((16 * kk * KV_LD + 8 * j) * 2));
      st_mma_bf16(acc[j], a, b);
      st_mma_bf16(acc[j + 1], a, b + 2);
    }
  }
}

// The sink's factor exp(lse) / (exp(lse) + exp(sink)) = 1 / (1 + exp(sink -
// lse)), lse in natural log: 0 for a +inf sink, 1 for -inf or none.
__device__ __forceinline__ float st_sink_factor(const st_mla_sparse_attend_params &p, int h, float lse) {
  if (!p.sink) return 1.f;
  return 1.f / (1.f + expf(p.sink[(int64_t)h * p.sink_stride] - lse));
}

// PIPE: one 16-byte chunk copied asynchronously into shared memory.
__device__ __forceinline__ void st_copy16_async(void *dst, const void *src) {
  st_cp_async16(st_smem_addr(dst), src, 16);
}

// PIPE: the raw rows of the tile whose slots `slots` holds, copied into
// `raw` (rows of no token are not copied: widening writes their zeros).
__device__ __forceinline__ void st_issue_tile(const st_mla_sparse_attend_params &p, const int32_t *slots, char *raw,
                                              int tid) {
  for (int i = tid; i < TILE * RAW_CHUNKS; i += THREADS) {
    const int t = i / RAW_CHUNKS, c = i % RAW_CHUNKS;
    if (slots[t] >= 0) st_copy16_async(raw + t * RAW_ROW + 16 * c, st_slot_row(p, slots[t]) + 16 * c);
  }
  st_cp_async_commit();
}

// The slot of entry e0 + t of the row, -1 for none (past `end`, < 0, or
// past the pool).
__device__ __forceinline__ int32_t st_entry_slot(const st_mla_sparse_attend_params &p, int row, int e, int end) {
  int32_t slot = -1;
  if (e < end) slot = p.indices[row * p.idx_stride_row + e];
  return slot >= 0 && (int64_t)slot < p.num_slots ? slot : -1;
}

// ---- the kernels -------------------------------------------------------------

// A thread's o accumulators: ACC_ROWS x 4, element (j, i) o's (head, dim)
// by st_acc_at (MMA 0: heads hg + HEAD_GROUPS j, dims dg + 128 i; MMA 1:
// the C fragments of the warp's O_NTILES tiles).
[[maybe_unused]] constexpr int ACC_ROWS = MMA ? O_NTILES : HEADS_PER_THREAD;
__device__ __forceinline__ void st_acc_at(int tid, int j, int i, int *hl, int *d) {
  if (MMA) {
    const int warp = tid / 32, g = (tid & 31) >> 2, c = tid & 3;
    *hl = 16 * (warp / 4) + g + 8 * (i / 2);
    *d = (warp % 4) * WARP_DIMS + 8 * j + 2 * c + (i % 2);
  } else {
    *hl = tid / DIM_THREADS + HEAD_GROUPS * j;
    *d = tid % DIM_THREADS + DIM_THREADS * i;
  }
}

// The natural-log lse of a head's (m, l): -inf without a token.
__device__ __forceinline__ float st_lse(float m, float l) {
  return l > 0.f ? (m + log2f(l)) * LN2 : -__int_as_float(0x7f800000);
}

// The largest score s = sm_scale * dot(q, k) of a head's (m, l), m being
// the running max in log2 units (s * log2(e)): -inf without a token.
__device__ __forceinline__ float st_max_logit(float m, float l) {
  return l > 0.f ? m * LN2 : -__int_as_float(0x7f800000);
}

#if ST_P_MMA != 2
// The main kernel's body: the including template's extern "C" kernel,
// launched with THREADS threads (__launch_bounds__(THREADS, 1)), calls it.
__device__ __forceinline__ void st_mla_sparse_attend_main(const st_mla_sparse_attend_params &p) {
  extern __shared__ __align__(16) char s_dyn[];
  uint16_t *s_q = (uint16_t *)s_dyn;
  kv_t *s_kv = (kv_t *)(s_dyn + Q_BYTES);
  char *s_raw = s_dyn + Q_BYTES + KV_BYTES; // PIPE
  float *s_s = (float *)(s_raw + RAW_BYTES);
  uint16_t *s_p = (uint16_t *)(s_raw + RAW_BYTES + S_BYTES); // MMA 1
  float *s_m = (float *)(s_raw + RAW_BYTES + S_BYTES + P_BYTES);
  float *s_l = s_m + HEADS;
  float *s_alpha = s_l + HEADS;
  int32_t *s_slots = (int32_t *)(s_alpha + HEADS); // SLOT_LISTS lists of TILE
  const int tid = threadIdx.x, warp = tid / 32, lane = tid & 31;
  if (tid == 0) {
    unsigned dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    if (dyn < SMEM_BYTES) __trap(); // the launcher's layout disagrees
  }
  const int row = blockIdx.x / p.splits, split = blockIdx.x % p.splits;
  const int h0 = blockIdx.y * HEADS;
  if (tid < HEADS) {
    s_m[tid] = -__int_as_float(0x7f800000);
    s_l[tid] = 0.f;
  }
  st_pdl_wait(); // launched programmatically: inputs may be the previous kernel's
  for (int i = tid; i < HEADS * Q_VECS; i += THREADS) {
    const int h = i / Q_VECS, v = i % Q_VECS;
    const uint16_t *src = (const uint16_t *)p.q + row * p.q_stride_row + (int64_t)(h0 + h) * p.q_stride_head;
    *(uint4 *)(s_q + h * Q_LD + v * VEC_BF16) = *(const uint4 *)(src + v * VEC_BF16);
  }
  const int n = st_row_entries(p, row);
  const int begin = split * p.entries_per_split;
  const int end = min(begin + p.entries_per_split, n);
  float acc[ACC_ROWS][4];
#pragma unroll
  for (int j = 0; j < ACC_ROWS; j++)
#pragma unroll
    for (int i = 0; i < 4; i++) acc[j][i] = 0.f;

  if (PIPE && begin < end) { // the first tile's slots and rows on their way
    if (tid < TILE) s_slots[tid] = st_entry_slot(p, row, begin + tid, end);
    __syncthreads();
    st_issue_tile(p, s_slots, s_raw, tid);
  }
  for (int e0 = begin, it = 0; e0 < end; e0 += TILE, it++) {
    const int32_t *s_slot = s_slots + (PIPE ? (it & 1) * TILE : 0);
    if (PIPE) { // 1-2. the tile's rows landed: widen them; the next tile's slots
      st_cp_async_wait<0>();
      __syncthreads();
      st_stage_rows<true>(p, s_slot, s_raw, s_kv, tid);
      int32_t *next = s_slots + ((it + 1) & 1) * TILE;
      if (tid < TILE) next[tid] = st_entry_slot(p, row, e0 + TILE + tid, end);
      __syncthreads();
      if (e0 + TILE < end) st_issue_tile(p, next, s_raw, tid); // lands under this tile's math
    } else {
      if (tid < TILE) s_slots[tid] = st_entry_slot(p, row, e0 + tid, end); // 1. the tile's slots
      __syncthreads();
      st_stage_rows<false>(p, s_slot, s_raw, s_kv, tid); // 2. the rows
      __syncthreads();
    }
    if (MMA) { // 3. scores
      st_scores_mma(p, s_q, (const uint16_t *)s_kv, s_slot, s_s, warp, lane);
    } else {
      for (int i = tid; i < HEADS * TILE; i += THREADS)
        s_s[i] = st_score(p, s_q, (const float *)s_kv, s_slot, i / TILE, i % TILE);
    }
    __syncthreads();
    if (tid < HEADS * SOFTMAX_LANES) { // 4. online softmax, base 2: SOFTMAX_LANES threads a head
      const int h = tid / SOFTMAX_LANES, part = tid % SOFTMAX_LANES;
      float *s = s_s + h * TILE;
      const float old = s_m[h];
      float top = old;
      for (int t = part; t < TILE; t += SOFTMAX_LANES) top = fmaxf(top, s[t]);
#pragma unroll
      for (int x = 1; x < SOFTMAX_LANES; x *= 2) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, x));
      const bool none = top == -__int_as_float(0x7f800000); // no token yet: nothing to weigh
      float sum = 0.f;
      for (int t = part; t < TILE; t += SOFTMAX_LANES) {
        const float w = none ? 0.f : exp2f(s[t] - top);
        s[t] = w;
        sum += w;
        if (MMA) s_p[h * P_LD + t] = st_to_bf16(w);
      }
#pragma unroll
      for (int x = 1; x < SOFTMAX_LANES; x *= 2) sum += __shfl_xor_sync(0xffffffffu, sum, x);
      __syncwarp(); // every lane of the group has read s_m[h] before lane 0 writes it
      if (part == 0) {
        const float alpha = none ? 1.f : exp2f(old - top);
        s_l[h] = s_l[h] * alpha + sum;
        s_m[h] = top;
        s_alpha[h] = alpha;
      }
    }
    __syncthreads();
    if (MMA) { // 5. o = o * alpha + P V
      st_pv_mma(acc, s_p, (const uint16_t *)s_kv, s_alpha, warp, lane);
    } else {
      const float *kv = (const float *)s_kv;
      const int dg = tid % DIM_THREADS, hg = tid / DIM_THREADS;
#pragma unroll
      for (int j = 0; j < HEADS_PER_THREAD; j++) {
        const float alpha = s_alpha[hg + HEAD_GROUPS * j];
#pragma unroll
        for (int i = 0; i < DIMS_PER_THREAD; i++) acc[j][i] *= alpha;
      }
      for (int t = 0; t < TILE; t++) {
        float v[DIMS_PER_THREAD];
#pragma unroll
        for (int i = 0; i < DIMS_PER_THREAD; i++) v[i] = kv[t * KV_LD + dg + DIM_THREADS * i];
#pragma unroll
        for (int j = 0; j < HEADS_PER_THREAD; j++) {
          const float w = s_s[(hg + HEAD_GROUPS * j) * TILE + t];
#pragma unroll
          for (int i = 0; i < DIMS_PER_THREAD; i++) acc[j][i] = fmaf(w, v[i], acc[j][i]);
        }
      }
    }
    __syncthreads(); // the tile's buffers are free for the next one
  }
  __syncthreads(); // a split with no entries ran no tile: s_m and s_l as set above

  if (p.splits == 1) {
#pragma unroll
    for (int j = 0; j < ACC_ROWS; j++)
#pragma unroll
      for (int i = 0; i < 4; i++) {
        int hl, d;
        st_acc_at(tid, j, i, &hl, &d);
        const float l = s_l[hl];
        const float f = l > 0.f ? st_sink_factor(p, h0 + hl, st_lse(s_m[hl], l)) / l : 0.f;
        uint16_t *o = (uint16_t *)p.o + row * p.o_stride_row + (int64_t)(h0 + hl) * p.o_stride_head;
        o[d] = st_to_bf16(acc[j][i] * f);
      }
    if (p.lse && tid < HEADS)
      p.lse[row * p.lse_stride_row + (int64_t)(h0 + tid) * p.lse_stride_head] = st_lse(s_m[tid], s_l[tid]);
    if (MAX_LOGITS && p.max_logits && tid < HEADS)
      p.max_logits[row * p.max_logits_stride_row + (int64_t)(h0 + tid) * p.max_logits_stride_head] =
          st_max_logit(s_m[tid], s_l[tid]);
    return;
  }
  const int64_t state0 = ((int64_t)row * p.splits + split) * p.num_heads + h0; // this CTA's first state
#pragma unroll
  for (int j = 0; j < ACC_ROWS; j++)
#pragma unroll
    for (int i = 0; i < 4; i++) {
      int hl, d;
      st_acc_at(tid, j, i, &hl, &d);
      p.part_o[(state0 + hl) * DIM_V + d] = acc[j][i];
    }
  if (tid < HEADS) {
    p.part_ml[(state0 + tid) * 2] = s_m[tid];
    p.part_ml[(state0 + tid) * 2 + 1] = s_l[tid];
  }
}
#else
// MMA 2: two warpgroups on 64 heads. Both widen each 64-token tile into
// one bf16 tile laid out for wgmma (q's too: rows of 576 values in 9
// panels of 64, the 128-byte swizzle); each warpgroup then scores the whole
// tile (S = q K^T: 36 wgmma m64n64k16, q and K read K-major from shared
// memory), runs the online softmax in registers (a thread holds rows
// 16w + lane/4 and + 8 of its warp w, as the accumulators lay them out) and
// adds P V for its half of o's dims (256: 2 x 4 wgmma m64n128k16, P from
// registers, V the same tile read transposed). The scores are computed
// twice, once a warpgroup, which costs less than passing P between them;
// the next tile's rows arrive by cp.async meanwhile.
__device__ __forceinline__ uint32_t st_wg_chunk(uint32_t tile, int rows, int r, int c) {
  return tile + st_panel_offset(rows, r, c);
}

// Vector v of row t (st_load_vector's) into the swizzled tile: fp8 latent
// values as two chunks, bf16 values as one; zeros for no row.
__device__ __forceinline__ void st_wg_store_vector(bool valid, const st_raw_vector &x, int v, uint32_t tile, int t) {
  const bool latent = IS_FP8 && v < LATENT_VECS;
  const int c = !IS_FP8 ? v : latent ? 2 * v : DIM_V / 8 + (v - LATENT_VECS);
  uint4 lo = make_uint4(0u, 0u, 0u, 0u), hi = lo;
  if (valid && latent) {
    uint32_t b[8];
    st_e4m3x16_widen<false, true>(x.raw, x.scale, b);
    lo = make_uint4(b[0], b[1], b[2], b[3]);
    hi = make_uint4(b[4], b[5], b[6], b[7]);
  } else if (valid) {
    lo = x.raw;
  }
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(st_wg_chunk(tile, TILE, t, c)), "r"(lo.x), "r"(lo.y),
               "r"(lo.z), "r"(lo.w)
               : "memory");
  if (latent)
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(st_wg_chunk(tile, TILE, t, c + 1)), "r"(hi.x),
                 "r"(hi.y), "r"(hi.z), "r"(hi.w)
                 : "memory");
}

// The main kernel's body for MMA 2 (the including template's extern "C"
// kernel, launched with THREADS threads, calls it).
__device__ __forceinline__ void st_mla_sparse_attend_main(const st_mla_sparse_attend_params &p) {
  extern __shared__ __align__(1024) char s_dyn[];
  const uint32_t q_tile = st_smem_addr(s_dyn), kv_tile = q_tile + WG_Q_BYTES;
  char *s_raw = s_dyn + WG_Q_BYTES + WG_KV_BYTES;
  int32_t *s_slots = (int32_t *)(s_raw + RAW_BYTES); // two lists of TILE
  const int tid = threadIdx.x, wg = tid / 128, lane = tid & 31;
  if (tid == 0) {
    unsigned dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    if (dyn < SMEM_BYTES || (q_tile & 1023u)) __trap(); // the launcher's layout disagrees
  }
  const int row = blockIdx.x / p.splits, split = blockIdx.x % p.splits;
  const int h0 = blockIdx.y * HEADS;
  st_pdl_wait(); // launched programmatically: inputs may be the previous kernel's
  for (int i = tid; i < HEADS * Q_VECS; i += THREADS) {
    const int h = i / Q_VECS, c = i % Q_VECS;
    const uint16_t *src = (const uint16_t *)p.q + row * p.q_stride_row + (int64_t)(h0 + h) * p.q_stride_head;
    const uint4 v = *(const uint4 *)(src + c * VEC_BF16);
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(st_wg_chunk(q_tile, HEADS, h, c)), "r"(v.x),
                 "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
  }
  const int n = st_row_entries(p, row);
  const int begin = split * p.entries_per_split;
  const int end = min(begin + p.entries_per_split, n);
  // The thread's two rows (heads 16 w + lane / 4 and + 8 of its warp w in
  // the warpgroup): m in log2 units, its share of l, o for the warpgroup's
  // dims 256 wg + 128 j ...
  float m[2] = {-ST_INF, -ST_INF}, l[2] = {0.f, 0.f};
  float o[2][64];
#pragma unroll
  for (int j = 0; j < 2; j++)
#pragma unroll
    for (int i = 0; i < 64; i++) o[j][i] = 0.f;

  if (begin < end) { // the first tile's slots and rows on their way
    if (tid < TILE) s_slots[tid] = st_entry_slot(p, row, begin + tid, end);
    __syncthreads();
    st_issue_tile(p, s_slots, s_raw, tid);
  }
  for (int e0 = begin, it = 0; e0 < end; e0 += TILE, it++) {
    const int32_t *s_slot = s_slots + (it & 1) * TILE;
    st_cp_async_wait<0>();
    __syncthreads(); // the rows landed; the previous tile's products are done
    for (int i = tid; i < TILE * ROW_VECS; i += THREADS) {
      const int t = i / ROW_VECS;
      st_raw_vector x;
      const bool valid = s_slot[t] >= 0;
      if (valid) st_load_vector(s_raw + t * RAW_ROW, i % ROW_VECS, x);
      st_wg_store_vector(valid, x, i % ROW_VECS, kv_tile, t);
    }
    st_fence_proxy_async(); // the tile (and q) written by this thread, for wgmma's reads
    int32_t *next = s_slots + ((it + 1) & 1) * TILE;
    if (tid < TILE) next[tid] = st_entry_slot(p, row, e0 + TILE + tid, end);
    __syncthreads();
    if (e0 + TILE < end) st_issue_tile(p, next, s_raw, tid); // lands under this tile's math

    float s[TILE / 8][4];
    float(&d)[32] = reinterpret_cast<float(&)[32]>(s);
    {
      const uint64_t q_desc = st_wgmma_desc(q_tile), k_desc = st_wgmma_desc(kv_tile);
      st_wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < QK_STEPS; ks++)
        st_wgmma_m64n64k16_bf16(d, q_desc + (((ks / 4) * HEADS * 128 + (ks % 4) * 32) >> 4),
                                k_desc + (((ks / 4) * TILE * 128 + (ks % 4) * 32) >> 4), ks > 0);
      st_wgmma_commit();
      st_wgmma_wait<0>();
      st_wgmma_fence_regs32(d);
    }
#pragma unroll
    for (int nt = 0; nt < TILE / 8; nt++)
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const int t = 8 * nt + 2 * (lane & 3) + (i & 1);
        s[nt][i] = s_slot[t] < 0 ? -ST_INF : s[nt][i] * p.score_scale_log2;
      }
#pragma unroll
    for (int rr = 0; rr < 2; rr++) { // online softmax of row rr, base 2
      float top = -ST_INF;
#pragma unroll
      for (int nt = 0; nt < TILE / 8; nt++) top = fmaxf(top, fmaxf(s[nt][2 * rr], s[nt][2 * rr + 1]));
      top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 1));
      top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 2));
      const float m_new = fmaxf(m[rr], top), m_use = m_new == -ST_INF ? 0.f : m_new;
      const float alpha = exp2f(m[rr] - m_use); // no token yet: m = -inf, o = l = 0
      float sum = 0.f;
#pragma unroll
      for (int nt = 0; nt < TILE / 8; nt++)
#pragma unroll
        for (int i = 2 * rr; i < 2 * rr + 2; i++) {
          s[nt][i] = exp2f(s[nt][i] - m_use);
          sum += s[nt][i];
        }
      m[rr] = m_new;
      l[rr] = l[rr] * alpha + sum;
#pragma unroll
      for (int j = 0; j < 2; j++)
#pragma unroll
        for (int nt = 0; nt < 16; nt++) {
          o[j][4 * nt + 2 * rr] *= alpha;
          o[j][4 * nt + 2 * rr + 1] *= alpha;
        }
    }
#pragma unroll
    for (int j = 0; j < 2; j++) // dims 256 wg + 128 j: panels 4 wg + 2 j and the next
      st_wg_pv<TILE, false>(s, kv_tile + (uint32_t)((4 * wg + 2 * j) * TILE * 128), o[j], 1);
  }
  __syncthreads(); // a split with no entries ran no tile

#pragma unroll
  for (int rr = 0; rr < 2; rr++) { // the row's l: the four lanes that share it
    l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], 1);
    l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], 2);
  }
  const int hw = 16 * ((tid / 32) % 4) + lane / 4; // the thread's first row in the CTA's heads
  const int64_t state0 = ((int64_t)row * p.splits + split) * p.num_heads + h0;
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    const int hl = hw + 8 * rr;
    float f = 1.f;
    if (p.splits == 1) f = l[rr] > 0.f ? st_sink_factor(p, h0 + hl, st_lse(m[rr], l[rr])) / l[rr] : 0.f;
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
      for (int nt = 0; nt < 16; nt++) {
        const int dim = 256 * wg + 128 * j + 8 * nt + 2 * (lane & 3);
        const float v0 = o[j][4 * nt + 2 * rr], v1 = o[j][4 * nt + 2 * rr + 1];
        if (p.splits == 1) {
          uint16_t *out = (uint16_t *)p.o + row * p.o_stride_row + (int64_t)(h0 + hl) * p.o_stride_head + dim;
          out[0] = st_to_bf16(v0 * f); // o's strides need not keep a pair 4-byte aligned
          out[1] = st_to_bf16(v1 * f);
        } else {
          *(float2 *)(p.part_o + (state0 + hl) * DIM_V + dim) = make_float2(v0, v1);
        }
      }
    if (wg == 0 && (lane & 3) == 0) { // one thread a row
      if (p.splits == 1) {
        if (p.lse) p.lse[row * p.lse_stride_row + (int64_t)(h0 + hl) * p.lse_stride_head] = st_lse(m[rr], l[rr]);
        if (MAX_LOGITS && p.max_logits)
          p.max_logits[row * p.max_logits_stride_row + (int64_t)(h0 + hl) * p.max_logits_stride_head] =
              st_max_logit(m[rr], l[rr]);
      } else {
        p.part_ml[(state0 + hl) * 2] = m[rr];
        p.part_ml[(state0 + hl) * 2 + 1] = l[rr];
      }
    }
  }
}
#endif

// The merge kernel's body (the template's extern "C" kernel, launched with
// DIM_THREADS threads, calls it). Grid (rows, Hq), 128 threads: the
// splits' partial states of one (row, head), combined by their maxima;
// each thread 4 dims (d = tid + 128 i).
__device__ __forceinline__ void st_mla_sparse_attend_merge(const st_mla_sparse_attend_params &p) {
  st_pdl_wait(); // launched programmatically after the main kernel: its partials
  const int row = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
  const int64_t state0 = (int64_t)row * p.splits * p.num_heads + h; // split s: state0 + s * num_heads
  float top = -__int_as_float(0x7f800000);
  for (int s = 0; s < p.splits; s++) {
    const float *ml = p.part_ml + (state0 + (int64_t)s * p.num_heads) * 2;
    if (ml[1] > 0.f) top = fmaxf(top, ml[0]);
  }
  float sum = 0.f, acc[DIMS_PER_THREAD] = {};
  for (int s = 0; s < p.splits; s++) {
    const int64_t st = state0 + (int64_t)s * p.num_heads;
    const float l = p.part_ml[st * 2 + 1];
    if (!(l > 0.f)) continue; // a split with no token holds nothing
    const float w = exp2f(p.part_ml[st * 2] - top);
    sum += l * w;
#pragma unroll
    for (int i = 0; i < DIMS_PER_THREAD; i++) acc[i] = fmaf(w, p.part_o[st * DIM_V + tid + DIM_THREADS * i], acc[i]);
  }
  const float lse = sum > 0.f ? (top + log2f(sum)) * LN2 : -__int_as_float(0x7f800000);
  const float f = sum > 0.f ? st_sink_factor(p, h, lse) / sum : 0.f;
  uint16_t *o = (uint16_t *)p.o + row * p.o_stride_row + (int64_t)h * p.o_stride_head;
#pragma unroll
  for (int i = 0; i < DIMS_PER_THREAD; i++) o[tid + DIM_THREADS * i] = st_to_bf16(acc[i] * f);
  if (p.lse && tid == 0) p.lse[row * p.lse_stride_row + (int64_t)h * p.lse_stride_head] = lse;
  if (MAX_LOGITS && p.max_logits && tid == 0)
    p.max_logits[row * p.max_logits_stride_row + (int64_t)h * p.max_logits_stride_head] = st_max_logit(top, sum);
}

#endif
