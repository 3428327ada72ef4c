// attn_tile_x2.cuh - common/attn_tile.cuh's per-warp block math over two
// 16-row m-tiles at once (rows m0 .. m0 + 31): every K and V fragment read
// from shared memory feeds two mma instead of one, and the two tiles' chains
// (scores, softmax, P.V) interleave. ncu put the block-major prefill kernel
// with one m-tile a warp at 2 warps a scheduler, 5.6 cycles between a
// warp's instructions and 35% of issue slots busy: latency, one dependent
// chain per warp (docs/kernels/sparse_attn.md, v2). The softmax is
// attn_tile.cuh's, per tile.
#ifndef ST_ATTN_TILE_X2_CUH
#define ST_ATTN_TILE_X2_CUH

#include "common/attn_tile.cuh"

// Tokens of a block one attend step covers, as many as `reg_budget`
// registers a thread allow: a lane holds mtiles x HEAD_DIM / 2 output and
// mtiles x STEP / 2 score floats, plus about 100 registers of fragments and
// addresses (ptxas spilled at head_dim 256 with 64-token steps; with two
// m-tiles ~90, and 24-48 bytes spill at 32-token steps and 255 registers).
template <int HEAD_DIM> constexpr int st_attend_step_tokens(int mtiles, int reg_budget) {
  return mtiles == 1 ? (HEAD_DIM / 2 + 64 + 100 <= reg_budget   ? 128
                        : HEAD_DIM / 2 + 32 + 100 <= reg_budget ? 64
                        : HEAD_DIM / 2 + 16 + 100 <= reg_budget ? 32
                                                                : 16)
                     : (HEAD_DIM + 128 + 90 <= reg_budget  ? 128
                        : HEAD_DIM + 64 + 90 <= reg_budget ? 64
                        : HEAD_DIM + 32 + 90 <= reg_budget ? 32
                                                           : 16);
}

// S0 = q[m0 ..] K^T and S1 = q[m0 + 16 ..] K^T for TOKENS tokens (tok0 ..).
template <int HEAD_DIM, int TOKENS>
__device__ __forceinline__ void st_tile_qk_x2(uint32_t q_tile, int m0, uint32_t k_tile, int tok0,
                                              float (&s0)[TOKENS / 8][4], float (&s1)[TOKENS / 8][4]) {
  constexpr int ROW_CHUNKS = HEAD_DIM / 8, DK = HEAD_DIM / 16, NT = TOKENS / 8;
  static_assert(TOKENS % 16 == 0, "whole 16-token k-steps");
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int nt = 0; nt < NT; nt++)
#pragma unroll
    for (int c = 0; c < 4; c++) s0[nt][c] = s1[nt][c] = 0.f;
#pragma unroll
  for (int ks = 0; ks < DK; ks++) {
    uint32_t a0[4], a1[4];
    const int ar = (lane & 7) + ((lane >> 3) & 1) * 8, ac = ks * 2 + (lane >> 4);
    st_ldmatrix_x4(a0, st_swizzled<ROW_CHUNKS>(q_tile, m0 + ar, ac));
    st_ldmatrix_x4(a1, st_swizzled<ROW_CHUNKS>(q_tile, m0 + 16 + ar, ac));
#pragma unroll
    for (int n2 = 0; n2 < NT / 2; n2++) {
      uint32_t b[4];
      st_ldmatrix_x4(b, st_swizzled<ROW_CHUNKS>(k_tile, tok0 + n2 * 16 + (lane & 7) + (lane >> 4) * 8,
                                                ks * 2 + ((lane >> 3) & 1)));
      st_mma_bf16_16816(s0[2 * n2], a0[0], a0[1], a0[2], a0[3], b[0], b[1]);
      st_mma_bf16_16816(s1[2 * n2], a1[0], a1[1], a1[2], a1[3], b[0], b[1]);
      st_mma_bf16_16816(s0[2 * n2 + 1], a0[0], a0[1], a0[2], a0[3], b[2], b[3]);
      st_mma_bf16_16816(s1[2 * n2 + 1], a1[0], a1[1], a1[2], a1[3], b[2], b[3]);
    }
  }
}

// O0 += P0 V and O1 += P1 V, each V fragment read once.
template <int HEAD_DIM, int TOKENS>
__device__ __forceinline__ void st_tile_values_x2(uint32_t v_tile, int tok0, const float (&s0)[TOKENS / 8][4],
                                                  const float (&s1)[TOKENS / 8][4], st_softmax_state<HEAD_DIM> &st0,
                                                  st_softmax_state<HEAD_DIM> &st1) {
  constexpr int ROW_CHUNKS = HEAD_DIM / 8, DT = HEAD_DIM / 8, KT = TOKENS / 16;
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int kk = 0; kk < KT; kk++) {
    uint32_t p0[4], p1[4];
    p0[0] = st_pack_bf16(s0[2 * kk][0], s0[2 * kk][1]);
    p0[1] = st_pack_bf16(s0[2 * kk][2], s0[2 * kk][3]);
    p0[2] = st_pack_bf16(s0[2 * kk + 1][0], s0[2 * kk + 1][1]);
    p0[3] = st_pack_bf16(s0[2 * kk + 1][2], s0[2 * kk + 1][3]);
    p1[0] = st_pack_bf16(s1[2 * kk][0], s1[2 * kk][1]);
    p1[1] = st_pack_bf16(s1[2 * kk][2], s1[2 * kk][3]);
    p1[2] = st_pack_bf16(s1[2 * kk + 1][0], s1[2 * kk + 1][1]);
    p1[3] = st_pack_bf16(s1[2 * kk + 1][2], s1[2 * kk + 1][3]);
#pragma unroll
    for (int d2 = 0; d2 < DT / 2; d2++) {
      uint32_t b[4];
      st_ldmatrix_x4_trans(b, st_swizzled<ROW_CHUNKS>(v_tile, tok0 + kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                                      d2 * 2 + (lane >> 4)));
      st_mma_bf16_16816(st0.o[2 * d2], p0[0], p0[1], p0[2], p0[3], b[0], b[1]);
      st_mma_bf16_16816(st1.o[2 * d2], p1[0], p1[1], p1[2], p1[3], b[0], b[1]);
      st_mma_bf16_16816(st0.o[2 * d2 + 1], p0[0], p0[1], p0[2], p0[3], b[2], b[3]);
      st_mma_bf16_16816(st1.o[2 * d2 + 1], p1[0], p1[1], p1[2], p1[3], b[2], b[3]);
    }
  }
}

// One step of TOKENS tokens of a block for both tiles (lim / bias per tile
// and row as st_tile_softmax takes them, K_SCALE and k_scale as
// st_attend_tile does).
template <int HEAD_DIM, int TOKENS, bool K_SCALE = false>
__device__ __forceinline__ void st_attend_tile_x2(uint32_t q_tile, int m0, uint32_t k_tile, uint32_t v_tile, int tok0,
                                                  const int (&lim0)[2], const int (&lim1)[2], const float (&bias0)[2],
                                                  const float (&bias1)[2], float scale_log2, const float *k_scale,
                                                  st_softmax_state<HEAD_DIM> &st0, st_softmax_state<HEAD_DIM> &st1) {
  float s0[TOKENS / 8][4], s1[TOKENS / 8][4];
  st_tile_qk_x2<HEAD_DIM, TOKENS>(q_tile, m0, k_tile, tok0, s0, s1);
  if (K_SCALE) {
    st_scale_scores(k_scale, tok0, s0);
    st_scale_scores(k_scale, tok0, s1);
  }
  st_tile_softmax<HEAD_DIM, TOKENS>(tok0, lim0, bias0, scale_log2, st0, s0);
  st_tile_softmax<HEAD_DIM, TOKENS>(tok0, lim1, bias1, scale_log2, st1, s1);
  st_tile_values_x2<HEAD_DIM, TOKENS>(v_tile, tok0, s0, s1, st0, st1);
}

#endif // ST_ATTN_TILE_X2_CUH
