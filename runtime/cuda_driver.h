/* cuda_driver.h - the CUDA driver API, loaded at run time.
 *
 * Build and CI machines have the CUDA toolkit's headers but no libcuda.so.1,
 * so nothing links against the driver. st_cu_load() dlopen()s it once per
 * process, resolves every entry point below through cuGetProcAddress (so each
 * gets the ABI version the headers were written for), and calls cuInit.
 * Without a driver or device it fails with ST_ERR_NO_DRIVER / ST_ERR_NO_DEVICE
 * and a message saying so plainly. */
#ifndef ST_CUDA_DRIVER_H
#define ST_CUDA_DRIVER_H

#include <cuda.h>

#include "device_info.h"
#include "error.h"

/* Every driver function sparsetune calls: X(name). Each is looked up by the
 * name as written here, so it must be the name whose current signature the
 * headers declare: cuGraphInstantiateWithFlags, not cuGraphInstantiate (which
 * cuGetProcAddress resolves to the older five-argument function). */
#define ST_CU_FUNCS(X)                                                                         \
  X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName)                  \
  X(cuDeviceGetAttribute) X(cuDeviceGetUuid) X(cuDeviceTotalMem)                               \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent)                  \
  X(cuCtxGetCurrent) X(cuCtxPushCurrent) X(cuCtxPopCurrent) X(cuCtxSynchronize)                \
  X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuFuncSetAttribute)           \
  X(cuFuncGetAttribute) X(cuLaunchKernel) X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD)           \
  X(cuMemcpyDtoH) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync)               \
  X(cuMemsetD8Async) X(cuMemsetD16Async) X(cuMemsetD32Async) X(cuMemGetInfo) X(cuStreamCreate) X(cuStreamDestroy)  \
  X(cuStreamCreateWithPriority) X(cuCtxGetStreamPriorityRange) X(cuStreamWaitEvent)          \
  X(cuStreamSynchronize) X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuStreamIsCapturing) \
  X(cuGraphInstantiateWithFlags) X(cuGraphLaunch) X(cuGraphDestroy) X(cuGraphExecDestroy)               \
  X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime)                \
  X(cuEventDestroy) X(cuGetErrorName) X(cuGetErrorString) X(cuPointerGetAttribute)             \
  X(cuTensorMapEncodeTiled) X(cuLaunchKernelEx) X(cuFuncGetModule)

typedef struct st_cu {
#define ST_CU_FIELD(name) __typeof__(name) *name;
  ST_CU_FUNCS(ST_CU_FIELD)
#undef ST_CU_FIELD
  int driver_version;
} st_cu;

/* Loads the driver once per process (thread-safe) and returns the table,
 * valid until exit. Later calls return the first call's result. */
st_status st_cu_load(const st_cu **out, st_err *err);

/* Formats a failed driver call: "cuModuleLoadData: CUDA_ERROR_INVALID_IMAGE
 * (device kernel image is invalid)" and returns ST_ERR_CUDA. */
st_status st_cu_fail(const st_cu *cu, CUresult rc, const char *what, st_err *err);

/* Checks a call: `ST_CU_TRY(cu, cu->cuMemAlloc(&p, n), err);` returns from
 * the enclosing function with ST_ERR_CUDA on failure. */
#define ST_CU_TRY(cu, call, err)                                                               \
  do {                                                                                         \
    CUresult st_rc_ = (call);                                                                  \
    if (st_rc_ != CUDA_SUCCESS) return st_cu_fail((cu), st_rc_, #call, (err));                 \
  } while (0)

/* Fills `info` for device `ordinal` (ST_ERR_NO_DEVICE if it does not exist).
 * arch is "sm_XYa" for 9.0 and later (the arch-specific features sparsetune
 * uses), "sm_XY" before. */
st_status st_cu_device_info(const st_cu *cu, int ordinal, st_device_info *info, st_err *err);

#endif
