// q_f16.cuh - bf16 q rows turned into f16 for q.K on f16 operands: fp8 K
// widens to f16 in one instruction (cvt.rn.f16x2.e4m3x2, exact), to bf16
// in four. f16's range is narrower than bf16's, so a row is taken times
// 2^e, e putting its largest finite |q| in [2^14, 2^15): every value down
// to 2^-28 of it keeps all of its bits (f16's least normal is 2^-14), and
// the row's scores take 2^-e back in fp32. Inf and NaN count as 0 in the
// maximum and stay what they are.
#ifndef ST_Q_F16_CUH
#define ST_Q_F16_CUH

#include "common/smem_tile.cuh"

// amax (two packed bf16 magnitudes, as bits) raised by the 8 values of a
// 16-byte chunk.
__device__ __forceinline__ uint32_t st_bf16x8_amax(uint4 v, uint32_t amax) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int k = 0; k < 4; k++) {
    const uint32_t a = w[k] & 0x7fff7fffu;
    amax = __vmaxu2(amax, a & __vcmpltu2(a, 0x7f807f80u)); // inf and NaN count as 0
  }
  return amax;
}

// The e of a row whose largest magnitude has the bf16 bits `amax` (one
// value, the row's maximum; 0 for a row of zeros: e stays in [-120, 120]).
__device__ __forceinline__ int st_f16_row_exponent(uint32_t amax) {
  return min(max(14 - ((int)(amax >> 7) - 127), -120), 120);
}

// 2^e for e in [-126, 127].
__device__ __forceinline__ float st_pow2(int e) { return __uint_as_float((uint32_t)(127 + e) << 23); }

// A chunk of 8 bf16 values as 8 f16 values, each times `up` (a power of two).
__device__ __forceinline__ uint4 st_bf16x8_to_f16(uint4 v, float up) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  uint32_t h[4];
#pragma unroll
  for (int k = 0; k < 4; k++)
    h[k] = st_pack_f16(__uint_as_float(w[k] << 16) * up, __uint_as_float(w[k] & 0xffff0000u) * up);
  return make_uint4(h[0], h[1], h[2], h[3]);
}

#endif // ST_Q_F16_CUH
