/* reference/dtype.h - host conversions of the kernels' storage types.
 * bf16: the upper half of an IEEE float. fp8 e4m3 (OCP "e4m3fn"): 1 sign,
 * 4 exponent (bias 7), 3 mantissa bits, no infinities, S.1111.111 is NaN,
 * largest finite 448. */
#ifndef ST_REFERENCE_DTYPE_H
#define ST_REFERENCE_DTYPE_H

#include <stdint.h>

float st_bf16_to_float(uint16_t v);
/* Round to nearest even; NaN stays NaN. */
uint16_t st_float_to_bf16(float f);
float st_fp8_e4m3_to_float(uint8_t v);
/* Round to nearest even, saturating to +-448 (as a plain cast to e4m3 with
 * saturation does); NaN gives the NaN code. */
uint8_t st_float_to_fp8_e4m3(float f);

#endif
