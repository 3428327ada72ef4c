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
#endif
