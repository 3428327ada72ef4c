/* ops/launch.h - one kernel launch, plain or programmatic.
 *
 * A programmatic launch (CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
 * lets the kernel's CTAs be placed while the kernel before it in the stream
 * still runs; the kernel must wait (griddepcontrol.wait,
 * templates/common/pdl.cuh) before touching memory. Captured into a CUDA
 * graph it becomes a programmatic edge. The decode ops launch their own
 * second kernel (a merge) this way always, and their first when the caller
 * asks (the args' `pdl`). */
#ifndef ST_OPS_LAUNCH_H
#define ST_OPS_LAUNCH_H

#include "cuda_driver.h"
#include "error.h"

/* Launches `fn` on `stream` with kernel arguments `kargs` (cuLaunchKernel's
 * kernelParams); `programmatic` non-zero adds the attribute above. */
st_status st_launch_kernel(const st_cu *cu, CUfunction fn, const unsigned grid[3], unsigned block, unsigned smem,
                           CUstream stream, void **kargs, int programmatic, st_err *err);

#endif
