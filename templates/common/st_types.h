/* st_types.h - fixed-width integers for headers shared by host C and NVRTC.
 * NVRTC compiles without the C library's headers, so it gets its own. */
#ifndef ST_TYPES_H
#define ST_TYPES_H
#ifdef __CUDACC_RTC__
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#else
#include <stdint.h>
#endif

/* A CUDA tensor map (the driver's CUtensorMap: 128 opaque bytes, 128-byte
 * aligned), for argument blocks that NVRTC compiles without cuda.h. The
 * host fills it with cuTensorMapEncodeTiled; a kernel takes the argument
 * block as a __grid_constant__ parameter so that its address is the
 * parameter's, as bulk tensor copies require. */
#ifdef __cplusplus
#define ST_ALIGNED(n) alignas(n)
#else
#define ST_ALIGNED(n) _Alignas(n)
#endif
typedef struct st_tensor_map {
  ST_ALIGNED(128) uint64_t opaque[16];
} st_tensor_map;
#endif
