#include "reference/dtype.h"

#include <math.h>
#include <string.h>

float st_bf16_to_float(uint16_t v) {
  uint32_t u = (uint32_t)v << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t st_float_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if (isnan(f)) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

float st_fp8_e4m3_to_float(uint8_t v) {
  const int sign = v >> 7, exp = (v >> 3) & 15, man = v & 7;
  float mag;
  if (exp == 15 && man == 7) return NAN;
  if (exp == 0) mag = ldexpf((float)man, -9); /* subnormal: man/8 * 2^-6 */
  else mag = ldexpf(1.0f + (float)man / 8.0f, exp - 7);
  return sign ? -mag : mag;
}

uint8_t st_float_to_fp8_e4m3(float f) {
  if (isnan(f)) return 0x7f;
  const uint8_t sign = signbit(f) ? 0x80 : 0;
  float a = fabsf(f);
  if (a >= 448.0f) return sign | 0x7e;
  if (a == 0.0f) return sign;
  /* Candidates are exactly representable: scan by rounding the scaled value. */
  int e;
  frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1) */
  int exp = e - 1 + 7; /* biased exponent of a normal encoding */
  if (exp < 1) { /* subnormal range: step 2^-9 */
    float q = nearbyintf(a * 512.0f); /* round half to even (default mode) */
    if (q >= 8.0f) return sign | 0x08; /* rounds up into the smallest normal */
    return sign | (uint8_t)q;
  }
  float step = ldexpf(1.0f, exp - 7 - 3);
  float q = nearbyintf(a / step); /* in [8, 16] */
  if (q >= 16.0f) {
    q = 8.0f;
    exp++;
  }
  if (exp > 15 || (exp == 15 && q > 14.0f)) return sign | 0x7e;
  return sign | (uint8_t)(exp << 3) | (uint8_t)((int)q - 8);
}
