// kv_stage.cuh - copying one 128-token block of a paged K/V cache into
// shared memory for the attention kernels: STAGES buffers in flight
// (cp.async), bf16 rows straight into swizzled tiles, fp8 rows raw (with
// their per-token scales) and widened to bf16 tiles afterwards.
//
// The caches are strided views [pages, kv heads, 128, HEAD_DIM] (both
// paged layouts in use); P is the kernel's argument block, which names
// k_cache / v_cache, their page, head and token strides, scale_mode and
// the k_scales / v_scales views (*s_stride_page, _head, _token) alike in
// every attention op.
//
// Region layout (bytes from its start; 16-byte aligned pieces):
//   bf16: STAGES x (K tile, V tile)
//   fp8:  STAGES x (raw K rows, raw V rows, K scales, V scales), then one
//         bf16 K tile and V tile the math reads, and with K_SCALE_ROW
//         the K tile's 128 per-token scales (tensor mode: widen copies
//         them there, for kernels that refill the stage before the math;
//         the others read them in the stage); with K_REGS only the
//         V tile (which may be f16: widen's V_F16): the math reads K's raw
//         rows straight into its mma fragments (st_kv_k_chunk says where a
//         row's 16-byte chunk lies) and their scales from the stage
// A bf16 tile's rows are swizzled (common/smem_tile.cuh); with PANELS they
// are the 64-dim panels wgmma reads instead (st_panel_offset: the same for
// HEAD_DIM 64).
#ifndef ST_KV_STAGE_CUH
#define ST_KV_STAGE_CUH

#include "common/smem_tile.cuh"

// fp8 with K_REGS: raw K chunk c of row tok sits at chunk c ^ swizzle(tok),
// so that the 8 rows an mma fragment load touches (32 bytes each) fall in
// distinct banks two by two (two wavefronts for 256 bytes, the least).
template <int HEAD_DIM> __device__ __forceinline__ int st_kv_k_chunk(int tok, int c) {
  constexpr int CHUNKS = HEAD_DIM / 16, ROWS_PER_LINE = 128 / HEAD_DIM > 1 ? 128 / HEAD_DIM : 1;
  constexpr int MASK = (CHUNKS < 8 ? CHUNKS : 8) - 1;
  return c ^ ((tok / ROWS_PER_LINE) & MASK);
}

// fp8 V rows read raw by the values loop (sparse_attn_decode's k_regs 2):
// chunk c of row tok sits at chunk c ^ (tok & 7) (HEAD_DIM 128: the bulk
// tensor copy's 128-byte swizzle, which K's st_kv_k_chunk is too), so
// that the rows 2t + o (t = 0..3, o fixed) a fragment load takes 32 bytes
// from fall in distinct banks (two-way at HEAD_DIM 64, whose rows are 64
// bytes). Rows 2t and 2t + 1 differ in the last bit only: the values loop
// finds the odd row's chunk one over (st_kv_v_odd_delta).
template <int HEAD_DIM> __device__ __forceinline__ int st_kv_v_chunk(int tok, int c) {
  constexpr int CHUNKS = HEAD_DIM / 16;
  return c ^ ((tok & 7) & (CHUNKS - 1));
}

// Byte offset of chunk c of row 2t + 1 from chunk c of row 2t (t any):
// +16 where c (so c ^ 2t) is even, -16 where odd.
__device__ __forceinline__ int st_kv_v_odd_delta(int c) { return (c & 1) ? -16 : 16; }

template <int IS_FP8, int HEAD_DIM, int STAGES, int THREADS, int K_REGS = 0, int PANELS = 0, int K_SCALE_ROW = 0>
struct st_kv_stages {
  static constexpr int BLOCK_TOKENS = 128;
  static constexpr int ELEM = IS_FP8 ? 1 : 2;                    // cache bytes per value
  static constexpr int ROW_CHUNKS = HEAD_DIM / 8;                // 16-byte chunks of a bf16 row
  static constexpr int SRC_CHUNKS = HEAD_DIM * ELEM / 16;        // 16-byte chunks of a cache row
  static constexpr int TILE_BYTES = BLOCK_TOKENS * HEAD_DIM * 2; // one bf16 K or V tile
  static constexpr int RAW_BYTES = 2 * BLOCK_TOKENS * HEAD_DIM;  // fp8 K and V rows as read
  static constexpr int SCALE_BYTES = 2 * BLOCK_TOKENS * 4;       // per-token K and V scales
  static constexpr int STAGE_BYTES = IS_FP8 ? RAW_BYTES + SCALE_BYTES : 2 * TILE_BYTES;
  static constexpr int WIDE_TILES = IS_FP8 ? (K_REGS ? 1 : 2) : 0; // bf16 tiles widened into
  static constexpr int K_SCALE_BYTES = IS_FP8 && !K_REGS && K_SCALE_ROW ? BLOCK_TOKENS * 4 : 0; // the K tile's scales
  static constexpr int BYTES = STAGES * STAGE_BYTES + WIDE_TILES * TILE_BYTES + K_SCALE_BYTES;
  static_assert(!K_REGS || IS_FP8, "K_REGS reads raw fp8 rows");
  static_assert(!(K_REGS && PANELS), "K_REGS feeds mma.sync, PANELS wgmma");

  // Byte offset of bf16 chunk c of row tok in a tile.
  static __device__ __forceinline__ uint32_t tile_offset(int tok, int c) {
    return PANELS ? st_panel_offset(BLOCK_TOKENS, tok, c) : (uint32_t)st_swizzle_offset<ROW_CHUNKS>(tok, c);
  }

  // Thread t copies chunk t % SRC_CHUNKS of rows t / SRC_CHUNKS,
  // + ROWS_PER_PASS, ...: one pointer step per row, no division per chunk
  // (v1 spent ~20 instructions a chunk on index arithmetic, which with two
  // warps per CTA was most of a small batch's time).
  static constexpr int ROWS_PER_PASS = THREADS / SRC_CHUNKS;
  static_assert(THREADS % SRC_CHUNKS == 0, "whole rows per pass");

  // Issues the copies of (page, kv head g)'s block into stage `buf`; rows
  // at or past `ntok` become zeros (a masked key's value must be 0, not
  // garbage: its weight is exactly 0, but 0 * NaN is not). Those rows'
  // addresses are inside the page, and nothing is read from them.
  template <class P>
  static __device__ __forceinline__ void issue(const P &p, int g, int page, int ntok, char *region, int buf) {
    char *stage = region + buf * STAGE_BYTES;
    const int c = threadIdx.x % SRC_CHUNKS, r0 = threadIdx.x / SRC_CHUNKS;
    const int64_t k_step = p.k_stride_token * ELEM * ROWS_PER_PASS, v_step = p.v_stride_token * ELEM * ROWS_PER_PASS;
    const char *ks = (const char *)p.k_cache +
                     ((int64_t)page * p.k_stride_page + (int64_t)g * p.k_stride_head + r0 * p.k_stride_token) * ELEM +
                     c * 16;
    const char *vs = (const char *)p.v_cache +
                     ((int64_t)page * p.v_stride_page + (int64_t)g * p.v_stride_head + r0 * p.v_stride_token) * ELEM +
                     c * 16;
    const uint32_t k_tile = st_smem_addr(stage), v_tile = k_tile + (IS_FP8 ? BLOCK_TOKENS * HEAD_DIM : TILE_BYTES);
#pragma unroll 4
    for (int tok = r0; tok < BLOCK_TOKENS; tok += ROWS_PER_PASS) {
      const int bytes = tok < ntok ? 16 : 0;
      uint32_t off, k_off;
      if (IS_FP8) {
        off = (uint32_t)(tok * HEAD_DIM + c * 16);
        k_off = K_REGS ? (uint32_t)(tok * HEAD_DIM + st_kv_k_chunk<HEAD_DIM>(tok, c) * 16) : off;
      } else {
        off = k_off = tile_offset(tok, c);
      }
      st_cp_async16(k_tile + k_off, ks, bytes);
      st_cp_async16(v_tile + off, vs, bytes);
      ks += k_step;
      vs += v_step;
    }
    if (IS_FP8 && p.scale_mode == 2)
      issue_scales(p, g, page, ntok, st_smem_addr(stage + RAW_BYTES), threadIdx.x, THREADS);
  }

  // fp8, tensor mode: cp.async copies of (page, kv head g)'s 128 K and then
  // 128 V per-token scales to shared address `dst`, scale e by thread
  // e % threads (`thread` is the caller's index among them); scales at or
  // past `ntok` become zeros (their slot-0 address is not read).
  template <class P>
  static __device__ __forceinline__ void issue_scales(const P &p, int g, int page, int ntok, uint32_t dst, int thread,
                                                      int threads) {
    for (int e = thread; e < 2 * BLOCK_TOKENS; e += threads) {
      const int which = e / BLOCK_TOKENS, tok = e % BLOCK_TOKENS;
      const int64_t slot = tok < ntok ? tok : 0;
      const float *src = which ? p.v_scales + (int64_t)page * p.vs_stride_page + (int64_t)g * p.vs_stride_head +
                                     slot * p.vs_stride_token
                               : p.k_scales + (int64_t)page * p.ks_stride_page + (int64_t)g * p.ks_stride_head +
                                     slot * p.ks_stride_token;
      st_cp_async4(dst + 4 * e, src, tok < ntok ? 4 : 0);
    }
  }

  // fp8: widens stage `buf`'s raw rows (K_REGS: V's only) into the bf16
  // tiles. In tensor mode V's rows are times their per-token scales; K's
  // are not (e4m3 is exact in bf16): a scaled K rounded to bf16 moves a
  // score by up to 2^-9 of sum |q k s|, which with large q or a long head
  // flips near-equal keys, so the math multiplies each score by its
  // token's scale in fp32 instead (wide_k_scales; K_SCALE_ROW: copied
  // here). Scalar scales are the caller's to fold into the score scale
  // and the output. V_F16: the V tile is f16 instead unless in tensor
  // mode (one conversion a pair, no multiply; a scaled value could leave
  // f16's range). No-op for bf16.
  template <bool V_F16 = false, class P>
  static __device__ __forceinline__ void widen(const P &p, char *region, int buf) {
    if (!IS_FP8) return;
    const char *stage = region + buf * STAGE_BYTES;
    const float *scales = (const float *)(stage + RAW_BYTES);
    char *tiles = region + STAGES * STAGE_BYTES;
    const int c = threadIdx.x % SRC_CHUNKS, r0 = threadIdx.x / SRC_CHUNKS;
    const bool tensor = p.scale_mode == 2;
    for (int which = K_REGS; which < 2; which++) {
      const char *raw_rows = stage + which * BLOCK_TOKENS * HEAD_DIM;
      char *tile = tiles + (which - K_REGS) * TILE_BYTES;
#pragma unroll 2
      for (int tok = r0; tok < BLOCK_TOKENS; tok += ROWS_PER_PASS) {
        const uint4 raw = *(const uint4 *)(raw_rows + tok * HEAD_DIM + c * 16);
        uint32_t b[8];
        if (tensor && which == 1)
          st_e4m3x16_widen<false, true>(raw, scales[BLOCK_TOKENS + tok], b);
        else if (V_F16 && which == 1)
          st_e4m3x16_widen<true, false>(raw, 1.f, b);
        else
          st_e4m3x16_widen<false, false>(raw, 1.f, b);
        // 16 fp8 values = two bf16 chunks (2c, 2c+1) of the row.
        *(uint4 *)(tile + tile_offset(tok, 2 * c)) = make_uint4(b[0], b[1], b[2], b[3]);
        *(uint4 *)(tile + tile_offset(tok, 2 * c + 1)) = make_uint4(b[4], b[5], b[6], b[7]);
      }
    }
    if (K_SCALE_BYTES && tensor) {
      float *row = (float *)(tiles + WIDE_TILES * TILE_BYTES);
      for (int tok = threadIdx.x; tok < BLOCK_TOKENS; tok += THREADS) row[tok] = scales[tok];
    }
  }

  // The per-token scales of the K tile widened from stage `buf`, which the
  // math multiplies its scores by (tensor mode): in the stage, or with
  // K_SCALE_ROW where widen copied them. nullptr in the other modes and
  // where K is not widened (bf16, K_REGS).
  template <class P> static __device__ __forceinline__ const float *wide_k_scales(const P &p, char *region, int buf) {
    if (!IS_FP8 || K_REGS || p.scale_mode != 2) return nullptr;
    if (K_SCALE_ROW) return (const float *)(region + STAGES * STAGE_BYTES + WIDE_TILES * TILE_BYTES);
    return k_scales(region, buf);
  }

  // The K tile the math reads after block `buf` arrived (and, for fp8, was
  // widened); the V tile follows it at + TILE_BYTES. (K_REGS: no K tile;
  // raw_k gives K's rows.)
  static __device__ __forceinline__ uint32_t k_tile(char *region, int buf) {
    return st_smem_addr(region + (IS_FP8 ? STAGES * STAGE_BYTES : buf * STAGE_BYTES));
  }
  static __device__ __forceinline__ uint32_t v_tile(char *region, int buf) {
    return K_REGS ? st_smem_addr(region + STAGES * STAGE_BYTES) : k_tile(region, buf) + TILE_BYTES;
  }
  // fp8: stage `buf`'s raw K rows (swizzled by st_kv_k_chunk with K_REGS)
  // and its per-token K scales (tensor mode).
  static __device__ __forceinline__ uint32_t raw_k(char *region, int buf) {
    return st_smem_addr(region + buf * STAGE_BYTES);
  }
  static __device__ __forceinline__ const float *k_scales(char *region, int buf) {
    return (const float *)(region + buf * STAGE_BYTES + RAW_BYTES);
  }
};

#endif // ST_KV_STAGE_CUH
