/* ops/launch.c - see launch.h. */
#include "ops/launch.h"

#include <string.h>

st_status st_launch_kernel(const st_cu *cu, CUfunction fn, const unsigned grid[3], unsigned block, unsigned smem,
                           CUstream stream, void **kargs, int programmatic, st_err *err) {
  if (!programmatic) {
    ST_CU_TRY(cu, cu->cuLaunchKernel(fn, grid[0], grid[1], grid[2], block, 1, 1, smem, stream, kargs, NULL), err);
    return ST_OK;
  }
  CUlaunchAttribute attr;
  memset(&attr, 0, sizeof attr);
  attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = grid[0];
  cfg.gridDimY = grid[1];
  cfg.gridDimZ = grid[2];
  cfg.blockDimX = block;
  cfg.blockDimY = 1;
  cfg.blockDimZ = 1;
  cfg.sharedMemBytes = smem;
  cfg.hStream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  ST_CU_TRY(cu, cu->cuLaunchKernelEx(&cfg, fn, kargs, NULL), err);
  return ST_OK;
}
