// attn_tile.cuh - one warp's share of one 128-token K/V block of block-
// sparse attention: S = q K^T on tensor cores (bf16 mma m16n8k16, operands
// from swizzled shared-memory tiles via ldmatrix), masking, the online-
// softmax update in registers and O += P V.
//
// The warp owns 16 rows of the q tile (m0 .. m0 + 15; a row is one q head
// of one query token) and TOKENS tokens of the block (tok0 ..). Lane holds
// rows m0 + lane/4 ("rr" 0) and m0 + lane/4 + 8 (rr 1). Scores are kept in
// log2 units (score * scale_log2), so exp2 is one instruction.
#ifndef ST_ATTN_TILE_CUH
#define ST_ATTN_TILE_CUH

#include "common/mma.cuh"
#include "common/smem_tile.cuh"

#define ST_INF __int_as_float(0x7f800000)

// 2^x by the special-function unit alone (ex2.approx.ftz: relative error
// ~2^-22, -inf gives 0). exp2f wraps the same instruction in a range check
// and two multiplies so that results below 2^-126 keep their bits; a
// softmax weight that small is as good as 0, and those three instructions
// a weight were a tenth of a decode CTA's softmax.
__device__ __forceinline__ float st_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Running state of the warp's two rows per lane: max m (log2 units), sum l
// of 2^(score - m) over this lane's columns only (the quad sums at the end),
// and the unnormalized output O (accumulator layout, HEAD_DIM / 8 tiles).
template <int HEAD_DIM> struct st_softmax_state {
  float m[2], l[2];
  float o[HEAD_DIM / 8][4];
};

template <int HEAD_DIM> __device__ __forceinline__ void st_softmax_init(st_softmax_state<HEAD_DIM> &st) {
  st.m[0] = st.m[1] = -ST_INF;
  st.l[0] = st.l[1] = 0.f;
#pragma unroll
  for (int dt = 0; dt < HEAD_DIM / 8; dt++) st.o[dt][0] = st.o[dt][1] = st.o[dt][2] = st.o[dt][3] = 0.f;
}

// Chunk c of row r of a K or V tile: rows swizzled whole
// (st_swizzle_offset), or with PANEL_ROWS > 0 as 128-byte panels of that
// many rows (st_panel_offset: what the bulk tensor copy's 128-byte swizzle
// lands).
template <int ROW_CHUNKS, int PANEL_ROWS>
__device__ __forceinline__ uint32_t st_tile_at(uint32_t tile, int r, int c) {
  return PANEL_ROWS ? tile + st_panel_offset(PANEL_ROWS, r, c) : st_swizzled<ROW_CHUNKS>(tile, r, c);
}

// S = q K^T for the warp's 16 rows (m0 ..) and TOKENS tokens (tok0 ..);
// K's tile as st_tile_at lays it out.
template <int HEAD_DIM, int TOKENS, int PANEL_ROWS = 0>
__device__ __forceinline__ void st_tile_qk(uint32_t q_tile, int m0, uint32_t k_tile, int tok0,
                                           float (&s)[TOKENS / 8][4]) {
  constexpr int ROW_CHUNKS = HEAD_DIM / 8, DK = HEAD_DIM / 16, NT = TOKENS / 8;
  static_assert(TOKENS % 16 == 0, "whole 16-token k-steps");
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int nt = 0; nt < NT; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
  for (int ks = 0; ks < DK; ks++) {
    uint32_t a[4];
    st_ldmatrix_x4(a, st_swizzled<ROW_CHUNKS>(q_tile, m0 + (lane & 7) + ((lane >> 3) & 1) * 8, ks * 2 + (lane >> 4)));
#pragma unroll
    for (int n2 = 0; n2 < NT / 2; n2++) {
      uint32_t b[4];
      st_ldmatrix_x4(b, st_tile_at<ROW_CHUNKS, PANEL_ROWS>(k_tile, tok0 + n2 * 16 + (lane & 7) + (lane >> 4) * 8,
                                                           ks * 2 + ((lane >> 3) & 1)));
      st_mma_bf16_16816(s[2 * n2], a[0], a[1], a[2], a[3], b[0], b[1]);
      st_mma_bf16_16816(s[2 * n2 + 1], a[0], a[1], a[2], a[3], b[2], b[3]);
    }
  }
}

// Tensor-mode fp8 (common/kv_stage.cuh's wide_k_scales): the scores of
// tokens tok0 .. (accumulator layout: s[nt][2 rr + cc] is column
// 8 nt + 2 (lane % 4) + cc) times their tokens' K scales, in fp32.
//
// The block functions take it as a template flag, K_SCALE, and the kernels
// pick the instance by the scale mode (st_with_k_scale): a runtime branch
// in the fp8 prefill kernels at 255 registers spilled 24-88 bytes more in
// every mode (ptxas, sm_90a).
template <int NT>
__device__ __forceinline__ void st_scale_scores(const float *k_scale, int tok0, float (&s)[NT][4]) {
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int nt = 0; nt < NT; nt++) {
    const float2 ks = *(const float2 *)(k_scale + tok0 + nt * 8 + 2 * t);
    s[nt][0] *= ks.x;
    s[nt][1] *= ks.y;
    s[nt][2] *= ks.x;
    s[nt][3] *= ks.y;
  }
}

template <bool B> struct st_flag {
  static constexpr bool value = B;
};
// Calls f(st_flag<true>()) where k_scale is not nullptr, else
// f(st_flag<false>()): f passes decltype(flag)::value on as K_SCALE.
template <class F> __device__ __forceinline__ void st_with_k_scale(const float *k_scale, F &&f) {
  if (k_scale)
    f(st_flag<true>());
  else
    f(st_flag<false>());
}

// How far (log2 units) a LAZY softmax lets a row's scores rise above the
// maximum its state is kept at before it rescales: P <= 2^8, still exact
// in bf16 and f16 to their precision, and l and O in fp32 (the rescale
// FlashAttention-4 skips the same way).
#define ST_LAZY_SLACK 8.f

// The first half of st_tile_softmax: the scores of tokens tok0 .. times
// scale_log2[rr], plus bias[rr] (BIAS), masked past lim[rr] (LAZY: not on
// a tile every row sees whole), and each row's maximum over the quad
// (the warp's TOKENS tokens) in mx.
template <int TOKENS, bool BIAS, bool LAZY>
__device__ __forceinline__ void st_tile_scale_max(int tok0, const int (&lim)[2], const float (&bias)[2],
                                                  const float (&scale_log2)[2], float (&s)[TOKENS / 8][4],
                                                  float (&mx)[2]) {
  constexpr int NT = TOKENS / 8;
  const int lane = threadIdx.x & 31;
  const auto scale_and_mask = [&](auto masked) {
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
      mx[rr] = -ST_INF;
#pragma unroll
      for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int cc = 0; cc < 2; cc++) {
          const int tok = tok0 + nt * 8 + 2 * (lane & 3) + cc;
          float &v = s[nt][rr * 2 + cc];
          const float x = BIAS ? v * scale_log2[rr] + bias[rr] : v * scale_log2[rr];
          v = !decltype(masked)::value || tok < lim[rr] ? x : -ST_INF;
          mx[rr] = fmaxf(mx[rr], v);
        }
    }
  };
  if (LAZY && tok0 + TOKENS <= min(lim[0], lim[1]))
    scale_and_mask(st_flag<false>());
  else
    scale_and_mask(st_flag<true>());
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    mx[rr] = fmaxf(mx[rr], __shfl_xor_sync(0xffffffffu, mx[rr], 1));
    mx[rr] = fmaxf(mx[rr], __shfl_xor_sync(0xffffffffu, mx[rr], 2));
  }
}

// P = 2^(s - m[rr]) in place (m -inf: nothing seen yet, 2^s of -inf
// scores, 0), and each row's sum over this lane's columns in sum.
template <int NT>
__device__ __forceinline__ void st_tile_exp(const float (&m)[2], float (&s)[NT][4], float (&sum)[2]) {
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    const float m_use = m[rr] == -ST_INF ? 0.f : m[rr];
    sum[rr] = 0.f;
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
      for (int cc = 0; cc < 2; cc++) {
        float &v = s[nt][rr * 2 + cc];
        v = st_exp2(v - m_use);
        sum[rr] += v;
      }
  }
}

// Raises each row's kept maximum to at least mx[rr], l and O rescaled to
// it.
template <int HEAD_DIM>
__device__ __forceinline__ void st_softmax_raise(st_softmax_state<HEAD_DIM> &st, const float (&mx)[2]) {
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    const float m_new = fmaxf(st.m[rr], mx[rr]);
    const float alpha = st_exp2(st.m[rr] - (m_new == -ST_INF ? 0.f : m_new)); // nothing seen yet: keep 0s
    st.m[rr] = m_new;
    st.l[rr] *= alpha;
#pragma unroll
    for (int dt = 0; dt < HEAD_DIM / 8; dt++) {
      st.o[dt][rr * 2] *= alpha;
      st.o[dt][rr * 2 + 1] *= alpha;
    }
  }
}

// The online-softmax update of `st` with the scores s of tokens tok0 ..:
// row rr sees the tokens < lim[rr] (0: none), with bias[rr] added to its
// scores (log2 of how many times its selection lists the block: 0 once, 1
// twice; BIAS false: none, as in decode), each score times scale_log2[rr].
// Leaves P (unnormalized probabilities) in s.
//
// LAZY (decode): the warp rescales l and O (HEAD_DIM / 4 multiplies a
// lane) only where some row's maximum grew past m + ST_LAZY_SLACK; m, l
// and O stay consistent either way (O and l are sums of 2^(score - m)),
// so the merges and lse are unchanged. And a tile every row sees whole
// skips the masks. (Not used by prefill, whose kernels were tuned with
// the plain update.)
template <int HEAD_DIM, int TOKENS, bool BIAS = true, bool LAZY = false>
__device__ __forceinline__ void st_tile_softmax(int tok0, const int (&lim)[2], const float (&bias)[2],
                                                const float (&scale_log2)[2], st_softmax_state<HEAD_DIM> &st,
                                                float (&s)[TOKENS / 8][4]) {
  float mx[2];
  st_tile_scale_max<TOKENS, BIAS, LAZY>(tok0, lim, bias, scale_log2, s, mx);
  const bool grow =
      !LAZY || __any_sync(0xffffffffu, mx[0] > st.m[0] + ST_LAZY_SLACK || mx[1] > st.m[1] + ST_LAZY_SLACK);
  if (grow) st_softmax_raise(st, mx);
  float sum[2];
  st_tile_exp(st.m, s, sum);
  st.l[0] += sum[0];
  st.l[1] += sum[1];
}

// The same, one scale for both rows.
template <int HEAD_DIM, int TOKENS, bool BIAS = true, bool LAZY = false>
__device__ __forceinline__ void st_tile_softmax(int tok0, const int (&lim)[2], const float (&bias)[2], float scale_log2,
                                                st_softmax_state<HEAD_DIM> &st, float (&s)[TOKENS / 8][4]) {
  const float scale[2] = {scale_log2, scale_log2};
  st_tile_softmax<HEAD_DIM, TOKENS, BIAS, LAZY>(tok0, lim, bias, scale, st, s);
}

// O += P V: P (accumulator layout of two 8-token tiles) is the A fragment of
// one 16-token k-step. F16: the V tile holds f16 values (fp8 widened
// without a scale), and P is rounded to f16 to match (P <= 1). V's tile as
// st_tile_at lays it out.
template <int HEAD_DIM, int TOKENS, bool F16 = false, int PANEL_ROWS = 0>
__device__ __forceinline__ void st_tile_values(uint32_t v_tile, int tok0, const float (&s)[TOKENS / 8][4],
                                               st_softmax_state<HEAD_DIM> &st) {
  constexpr int ROW_CHUNKS = HEAD_DIM / 8, DT = HEAD_DIM / 8, KT = TOKENS / 16;
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int kk = 0; kk < KT; kk++) {
    uint32_t a[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const float lo = s[2 * kk + i / 2][(i & 1) * 2], hi = s[2 * kk + i / 2][(i & 1) * 2 + 1];
      a[i] = F16 ? st_pack_f16(lo, hi) : st_pack_bf16(lo, hi);
    }
#pragma unroll
    for (int d2 = 0; d2 < DT / 2; d2++) {
      uint32_t b[4];
      st_ldmatrix_x4_trans(b, st_tile_at<ROW_CHUNKS, PANEL_ROWS>(
                                  v_tile, tok0 + kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, d2 * 2 + (lane >> 4)));
      if (F16) {
        st_mma_f16_16816(st.o[2 * d2], a[0], a[1], a[2], a[3], b[0], b[1]);
        st_mma_f16_16816(st.o[2 * d2 + 1], a[0], a[1], a[2], a[3], b[2], b[3]);
      } else {
        st_mma_bf16_16816(st.o[2 * d2], a[0], a[1], a[2], a[3], b[0], b[1]);
        st_mma_bf16_16816(st.o[2 * d2 + 1], a[0], a[1], a[2], a[3], b[2], b[3]);
      }
    }
  }
}

// One block: scores (K_SCALE: times k_scale's per-token K scales,
// st_scale_scores), softmax update, values. The values loop is
// st_tile_values written out: called as a function here, ptxas allocates
// the fp8 prefill kernels 254 registers instead of 202 (same instructions;
// not measured on a GPU), so prefill keeps the code it was tuned with.
template <int HEAD_DIM, int TOKENS, bool K_SCALE = false>
__device__ __forceinline__ void st_attend_tile(uint32_t q_tile, int m0, uint32_t k_tile, uint32_t v_tile, int tok0,
                                               const int (&lim)[2], const float (&bias)[2], float scale_log2,
                                               const float *k_scale, st_softmax_state<HEAD_DIM> &st) {
  constexpr int ROW_CHUNKS = HEAD_DIM / 8, DT = HEAD_DIM / 8, KT = TOKENS / 16;
  const int lane = threadIdx.x & 31;
  float s[TOKENS / 8][4];
  st_tile_qk<HEAD_DIM, TOKENS>(q_tile, m0, k_tile, tok0, s);
  if (K_SCALE) st_scale_scores(k_scale, tok0, s);
  st_tile_softmax<HEAD_DIM, TOKENS>(tok0, lim, bias, scale_log2, st, s);
#pragma unroll
  for (int kk = 0; kk < KT; kk++) {
    const uint32_t a0 = st_pack_bf16(s[2 * kk][0], s[2 * kk][1]), a1 = st_pack_bf16(s[2 * kk][2], s[2 * kk][3]);
    const uint32_t a2 = st_pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    const uint32_t a3 = st_pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
    for (int d2 = 0; d2 < DT / 2; d2++) {
      uint32_t b[4];
      st_ldmatrix_x4_trans(b, st_swizzled<ROW_CHUNKS>(v_tile, tok0 + kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                                      d2 * 2 + (lane >> 4)));
      st_mma_bf16_16816(st.o[2 * d2], a0, a1, a2, a3, b[0], b[1]);
      st_mma_bf16_16816(st.o[2 * d2 + 1], a0, a1, a2, a3, b[2], b[3]);
    }
  }
}

// Sums l over the 4 lanes of a quad (each held its own columns' share).
template <int HEAD_DIM> __device__ __forceinline__ void st_softmax_finish_l(st_softmax_state<HEAD_DIM> &st) {
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    st.l[rr] += __shfl_xor_sync(0xffffffffu, st.l[rr], 1);
    st.l[rr] += __shfl_xor_sync(0xffffffffu, st.l[rr], 2);
  }
}

#endif // ST_ATTN_TILE_CUH
