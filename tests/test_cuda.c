/* test_cuda.c - the GPU tests' CUDA setup (test_cuda.h). */
#include "test_cuda.h"

#include "testutil.h"

CUstream st_test_cuda_stream(const st_cu *cu, CUdevice *device) {
  CUcontext ctx;
  CUstream stream = NULL;
  assert_int_equal(cu->cuDeviceGet(device, 0), CUDA_SUCCESS);
  assert_int_equal(cu->cuDevicePrimaryCtxRetain(&ctx, *device), CUDA_SUCCESS);
  assert_int_equal(cu->cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  assert_int_equal(cu->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  return stream;
}
