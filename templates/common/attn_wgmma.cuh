// attn_wgmma.cuh - one warpgroup's 64 q rows against one whole 128-token
// K/V block on Hopper wgmma (sm_90a): the block-major attention kernel's
// math (templates/sparse_attn_block.cu, mma = wgmma).
//
//   S = Q K^T  Q's 64 rows and K's 128 rows in shared memory as 64-dim
//              panels (st_panel_offset), both K-major: 8 wgmma m64n128k16.
//   softmax    st_block_softmax (one whole block, fresh state), or the
//              online softmax over a run of blocks (st_attend_next_block_wg,
//              the dense kernel's): per warp the m64n128 accumulators are
//              the m16n8 tiles of its 16 rows.
//   O += P V   P from registers (S packed to bf16 is the A fragment), V's
//              panels read transposed: 8 more wgmma.
// Both products and the descriptors were checked against the CPU, and the
// step timed from shared memory (622 TFLOP/s of the H100 with two
// warpgroups a CTA, against 409 for eight warps on mma.sync), by a
// standalone probe (kept on the branch experiments-archive).
#ifndef ST_ATTN_WGMMA_CUH
#define ST_ATTN_WGMMA_CUH

#include "common/attn_tile.cuh"
#include "common/wgmma.cuh"

// Scores of columns at or past a row's lim (its visible keys) become
// -inf; a warp whose rows all see the whole block skips the masks.
template <int BLOCK_TOKENS>
__device__ __forceinline__ void st_mask_scores(const int (&lim)[2], float (&s)[BLOCK_TOKENS / 8][4]) {
  constexpr int NT = BLOCK_TOKENS / 8;
  const int lane = threadIdx.x & 31;
  if (!__all_sync(0xffffffffu, lim[0] == BLOCK_TOKENS && lim[1] == BLOCK_TOKENS)) {
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
      for (int e = 0; e < 4; e++)
        if (nt * 8 + 2 * (lane & 3) + (e & 1) >= lim[e >> 1]) s[nt][e] = -ST_INF;
  }
}

// The max of row rr's scores (rows spread over a quad of lanes).
template <int BLOCK_TOKENS> __device__ __forceinline__ float st_row_max(const float (&s)[BLOCK_TOKENS / 8][4], int rr) {
  float mx = -ST_INF;
#pragma unroll
  for (int nt = 0; nt < BLOCK_TOKENS / 8; nt++) mx = fmaxf(mx, fmaxf(s[nt][rr * 2], s[nt][rr * 2 + 1]));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  return fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
}

// Row rr's scores become P = 2^(s scale_log2 - m_use) (one FFMA and one
// exp2 a column); returns the thread's share of their sum.
template <int BLOCK_TOKENS>
__device__ __forceinline__ float st_row_exp2(float (&s)[BLOCK_TOKENS / 8][4], int rr, float scale_log2, float m_use) {
  float sum = 0.f;
#pragma unroll
  for (int nt = 0; nt < BLOCK_TOKENS / 8; nt++)
#pragma unroll
    for (int cc = 0; cc < 2; cc++) {
      float &v = s[nt][rr * 2 + cc];
      v = st_exp2(fmaf(v, scale_log2, -m_use));
      sum += v;
    }
  return sum;
}

// The softmax of one whole block from a fresh state, for the thread's two
// rows (accumulator layout: s[nt][2 rr + cc] is column 8 nt + 2 (lane % 4)
// + cc of row rr): m = the row's max of the visible columns (col < lim), P =
// 2^(s scale_log2 - m scale_log2), l = the sum of the thread's P (quads
// add theirs later: st_softmax_finish_l). o is not touched: the P V
// product that follows overwrites it. scale_log2 > 0 (the launchers refuse
// other scales), so the max of s is taken before scaling and the scale
// folds into one FFMA a column; a warp whose rows all see the whole block
// skips the masks. A row that sees nothing keeps m = -inf and P = 0.
template <int BLOCK_TOKENS, int HEAD_DIM>
__device__ __forceinline__ void st_block_softmax(const int (&lim)[2], float scale_log2, st_softmax_state<HEAD_DIM> &st,
                                                 float (&s)[BLOCK_TOKENS / 8][4]) {
  st_mask_scores<BLOCK_TOKENS>(lim, s);
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    const float mx = st_row_max<BLOCK_TOKENS>(s, rr);
    const float m = mx * scale_log2, m_use = mx == -ST_INF ? 0.f : m; // nothing seen: keep 0s
    st.m[rr] = m;
    st.l[rr] = st_row_exp2<BLOCK_TOKENS>(s, rr, scale_log2, m_use);
  }
}

struct st_nothing_meanwhile {
  __device__ void operator()() const {}
};

// S = Q K^T issued (not waited for) into d: the warpgroup's 64 rows from m0
// of q_tile (Q_ROWS rows in panels) against the 128 keys of k_tile, bf16
// (F16: both tiles f16). A k-step's descriptors are the first one's plus a
// constant (the start address field counts 16 bytes and never carries:
// shared addresses stay below 256 KiB).
template <int HEAD_DIM, int Q_ROWS, bool F16 = false>
__device__ __forceinline__ void st_wg_scores(uint32_t q_tile, int m0, uint32_t k_tile, float (&d)[64]) {
  constexpr int KSTEPS = HEAD_DIM / 16, PANEL_K = 128 * 128;
  const uint64_t q_desc = st_wgmma_desc(q_tile + m0 * 128), k_desc = st_wgmma_desc(k_tile);
  st_wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < KSTEPS; ks++) { // 4 k-steps of 32 bytes within each panel
    const uint64_t a = q_desc + (((ks / 4) * Q_ROWS * 128 + (ks % 4) * 32) >> 4),
                   b = k_desc + (((ks / 4) * PANEL_K + (ks % 4) * 32) >> 4);
    if (F16)
      st_wgmma_m64n128k16_f16(d, a, b, ks > 0);
    else
      st_wgmma_m64n128k16_bf16(d, a, b, ks > 0);
  }
  st_wgmma_commit();
}

// O (+)= P V, waited for: P = s as bf16 (V_F16: f16) A fragments, all
// packed before the first product (a register written between two
// products of one group makes ptxas fence each one), V's panels at v_tile
// read transposed. accumulate 0: the first product overwrites o.
template <int BLOCK_TOKENS, bool V_F16>
__device__ __forceinline__ void st_wg_pv(const float (&s)[BLOCK_TOKENS / 8][4], uint32_t v_tile, float (&o)[64],
                                         int accumulate) {
  const auto pack = [](float lo, float hi) { return V_F16 ? st_pack_f16(lo, hi) : st_pack_bf16(lo, hi); };
  const uint64_t v_desc = st_wgmma_desc_mn(v_tile, BLOCK_TOKENS * 128);
  uint32_t a[BLOCK_TOKENS / 16][4];
#pragma unroll
  for (int kk = 0; kk < BLOCK_TOKENS / 16; kk++) { // tokens 16kk ..: n-tiles 2kk and 2kk + 1 of S
    a[kk][0] = pack(s[2 * kk][0], s[2 * kk][1]);
    a[kk][1] = pack(s[2 * kk][2], s[2 * kk][3]);
    a[kk][2] = pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    a[kk][3] = pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
  }
  st_wgmma_fence_regs(o);
  st_wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < BLOCK_TOKENS / 16; kk++)
    if (V_F16)
      st_wgmma_m64n128k16_f16_rs_tb(o, a[kk], v_desc + ((kk * 16 * 128) >> 4), kk > 0 || accumulate);
    else
      st_wgmma_m64n128k16_bf16_rs_tb(o, a[kk], v_desc + ((kk * 16 * 128) >> 4), kk > 0 || accumulate);
  st_wgmma_commit();
  st_wgmma_wait<0>();
  st_wgmma_fence_regs(o);
}

// Warpgroup (128 threads, warp w = its 16 rows m0 + 16w ..) over the block
// in k_tile / v_tile (BLOCK_TOKENS rows each, panels); q_tile holds Q_ROWS
// rows in panels, the warpgroup's from m0 (a multiple of 64; pass it
// warp-uniform, e.g. through a shuffle from lane 0, so that the
// descriptors stay in uniform registers). lim / scale_log2 as
// st_block_softmax takes them, K_SCALE and k_scale as common/attn_tile.cuh's
// st_attend_tile does; st.m, st.l and st.o are written (one whole
// block: no earlier state). `while_scores` runs while the score products
// are in flight (the caller's work that need not wait for them). V_F16:
// the V tile is f16 (P is packed as f16 for the product; P <= 1).
template <int HEAD_DIM, int Q_ROWS, bool K_SCALE = false, bool V_F16 = false, typename Meanwhile = st_nothing_meanwhile>
__device__ __forceinline__ void
st_attend_block_wg(uint32_t q_tile, int m0, uint32_t k_tile, uint32_t v_tile, const int (&lim)[2], float scale_log2,
                   const float *k_scale, st_softmax_state<HEAD_DIM> &st, const Meanwhile &while_scores = Meanwhile()) {
  constexpr int BLOCK_TOKENS = 128;
  static_assert(HEAD_DIM == 128, "one m64n128 product for O: head_dim 128");
  static_assert(Q_ROWS % 64 == 0, "whole warpgroups of rows");
  float s[BLOCK_TOKENS / 8][4];
  float(&d)[64] = reinterpret_cast<float(&)[64]>(s);
  st_wg_scores<HEAD_DIM, Q_ROWS>(q_tile, m0, k_tile, d);
  while_scores();
  st_wgmma_wait<0>();
  st_wgmma_fence_regs(d);
  if (K_SCALE) st_scale_scores(k_scale, 0, s);
  st_block_softmax<BLOCK_TOKENS, HEAD_DIM>(lim, scale_log2, st, s);
  st_wg_pv<BLOCK_TOKENS, V_F16>(s, v_tile, reinterpret_cast<float(&)[64]>(st.o), 0);
}

// The same warpgroup over one block of a run of blocks that its rows see
// in turn (templates/sparse_attn_dense.cuh): the online softmax carries
// st (m, the thread's share of l, O; start from st_softmax_init) across
// them. O and l are rescaled by 2^(m_old - m_new) before P V adds the
// block's share. A row that has seen nothing yet keeps m = -inf and O = 0
// (P and the rescale use 0 for its max: every weight is 0, no NaN).
// K_SCALE, k_scale and V_F16 as st_attend_block_wg takes them; QK_F16: q
// and K tiles are f16 (q rows scaled by common/q_f16.cuh). scale_log2 is
// per row (rr): a scaled f16 row's takes its 2^-e.
template <int HEAD_DIM, int Q_ROWS, bool K_SCALE = false, bool V_F16 = false, bool QK_F16 = false>
__device__ __forceinline__ void st_attend_next_block_wg(uint32_t q_tile, int m0, uint32_t k_tile, uint32_t v_tile,
                                                        const int (&lim)[2], const float (&scale_log2)[2],
                                                        const float *k_scale, st_softmax_state<HEAD_DIM> &st) {
  constexpr int BLOCK_TOKENS = 128, NT = BLOCK_TOKENS / 8;
  static_assert(HEAD_DIM == 128, "one m64n128 product for O: head_dim 128");
  float s[NT][4];
  float(&d)[64] = reinterpret_cast<float(&)[64]>(s);
  st_wg_scores<HEAD_DIM, Q_ROWS, QK_F16>(q_tile, m0, k_tile, d);
  st_wgmma_wait<0>();
  st_wgmma_fence_regs(d);
  if (K_SCALE) st_scale_scores(k_scale, 0, s);
  st_mask_scores<BLOCK_TOKENS>(lim, s);
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    const float mx = st_row_max<BLOCK_TOKENS>(s, rr);
    const float m = fmaxf(st.m[rr], mx * scale_log2[rr]), m_use = m == -ST_INF ? 0.f : m;
    const float alpha = st_exp2(st.m[rr] - m_use); // m_old = -inf: 0 (O and l are 0 then)
    const float sum = st_row_exp2<BLOCK_TOKENS>(s, rr, scale_log2[rr], m_use);
    st.m[rr] = m;
    st.l[rr] = st.l[rr] * alpha + sum;
#pragma unroll
    for (int dt = 0; dt < HEAD_DIM / 8; dt++) {
      st.o[dt][rr * 2] *= alpha;
      st.o[dt][rr * 2 + 1] *= alpha;
    }
  }
  st_wg_pv<BLOCK_TOKENS, V_F16>(s, v_tile, reinterpret_cast<float(&)[64]>(st.o), 1);
}

#endif // ST_ATTN_WGMMA_CUH
