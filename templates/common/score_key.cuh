// score_key.cuh - float scores as unsigned keys whose integer order is the
// float order, so max and top-k run on integers (atomicMax, radix select).
//
// Key 0 is reserved for "no score" (invisible, forced or empty slot): every
// real score, -inf included, maps above it. NaN maps to the key of -inf, as
// the op contract counts NaN scores as -inf.
#ifndef ST_SCORE_KEY_CUH
#define ST_SCORE_KEY_CUH

__device__ __forceinline__ uint32_t st_score_key(float f) {
  uint32_t u = __float_as_uint(f);
  if (f != f) u = 0xff800000u; // NaN -> -inf
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float st_key_score(uint32_t key) {
  uint32_t u = (key & 0x80000000u) ? (key & 0x7fffffffu) : ~key;
  return __uint_as_float(u);
}

#endif // ST_SCORE_KEY_CUH
