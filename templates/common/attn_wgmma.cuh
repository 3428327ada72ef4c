// attn_wgmma.cuh - one warpgroup's 64 q rows against one whole 128-token
// K/V block on Hopper wgmma (sm_90a): the block-major attention kernel's
// math (templates/sparse_attn_block.cu, mma = wgmma).
//
//   S = Q K^T  Q's 64 rows and K's 128 rows in shared memory as 64-dim
//              panels (st_panel_offset), both K-major: 8 wgmma m64n128k16.
//   softmax    common/attn_tile.cuh's st_tile_softmax, unchanged: per warp
//              the m64n128 accumulators are the m16n8 tiles of its 16 rows.
//   O += P V   P from registers (S packed to bf16 is the A fragment), V's
//              panels read transposed: 8 more wgmma.
// Both products and the descriptors were checked against the CPU, and the
// step timed from shared memory (622 TFLOP/s of the H100 with two
// warpgroups a CTA, against 409 for eight warps on mma.sync), by
// docs/experiments/wgmma_attn_probe.cu.
#ifndef ST_ATTN_WGMMA_CUH
#define ST_ATTN_WGMMA_CUH

#include "common/attn_tile.cuh"
#include "common/wgmma.cuh"

// Warpgroup (128 threads, warp w = its 16 rows m0 + 16w ..) over the block
// in k_tile / v_tile (BLOCK_TOKENS rows each, panels); q_tile holds Q_ROWS
// rows in panels, the warpgroup's from m0 (a multiple of 64). lim / bias /
// scale_log2 / st as st_tile_softmax takes them, for the thread's two rows;
// st enters initialized (this is one whole block: st.o scaled by 0 is 0).
template <int HEAD_DIM, int Q_ROWS>
__device__ __forceinline__ void st_attend_block_wg(uint32_t q_tile, int m0, uint32_t k_tile, uint32_t v_tile,
                                                   const int (&lim)[2], const float (&bias)[2], float scale_log2,
                                                   st_softmax_state<HEAD_DIM> &st) {
  constexpr int BLOCK_TOKENS = 128, KSTEPS = HEAD_DIM / 16, PANEL_K = BLOCK_TOKENS * 128;
  static_assert(HEAD_DIM == 128, "one m64n128 product for O: head_dim 128");
  static_assert(Q_ROWS % 64 == 0, "whole warpgroups of rows");
  float s[BLOCK_TOKENS / 8][4];
  float(&d)[64] = reinterpret_cast<float(&)[64]>(s);
  st_wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < KSTEPS; ks++) // 4 k-steps of 32 bytes within each panel
    st_wgmma_m64n128k16_bf16(d, st_wgmma_desc(q_tile + (ks / 4) * Q_ROWS * 128 + m0 * 128 + (ks % 4) * 32),
                             st_wgmma_desc(k_tile + (ks / 4) * PANEL_K + (ks % 4) * 32), ks > 0);
  st_wgmma_commit();
  st_wgmma_wait<0>();
  st_wgmma_fence_regs(d);
  st_tile_softmax<HEAD_DIM, BLOCK_TOKENS>(0, lim, bias, scale_log2, st, s);
  float(&o)[64] = reinterpret_cast<float(&)[64]>(st.o);
  st_wgmma_fence_regs(o);
  st_wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < BLOCK_TOKENS / 16; kk++) { // tokens 16kk ..: n-tiles 2kk and 2kk + 1 of S
    const uint32_t a[4] = {st_pack_bf16(s[2 * kk][0], s[2 * kk][1]), st_pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                           st_pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                           st_pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
    st_wgmma_m64n128k16_bf16_rs_tb(o, a, st_wgmma_desc_mn(v_tile + kk * 16 * 128, PANEL_K), 1);
  }
  st_wgmma_commit();
  st_wgmma_wait<0>();
  st_wgmma_fence_regs(o);
}

#endif // ST_ATTN_WGMMA_CUH
