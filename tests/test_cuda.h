/* test_cuda.h - the CUDA setup every GPU test makes: device 0's primary
 * context, current on this thread, and a stream of its own. */
#ifndef ST_TEST_CUDA_H
#define ST_TEST_CUDA_H

#include "cuda_driver.h"

/* Retains device 0's primary context (release it with
 * cuDevicePrimaryCtxRelease(*device)), makes it current and creates a
 * non-blocking stream; a failing call fails the test. */
CUstream st_test_cuda_stream(const st_cu *cu, CUdevice *device);

#endif
