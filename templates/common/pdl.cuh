// pdl.cuh - programmatic dependent launch (Hopper, griddepcontrol).
//
// A kernel launched with the programmatic-serialization attribute may have
// its CTAs placed while the kernel before it in the stream still runs;
// st_pdl_wait() holds the CTA until that kernel has finished and its writes
// are visible. So every decode kernel waits before its first global memory
// access (read or write: inputs, outputs and the workspace's counters may
// all belong to the kernel before), and does nothing before it but set up
// registers, shared memory and barriers. Launched without the attribute the
// wait returns at once.
//
// st_pdl_trigger() lets the next kernel, if launched with the attribute,
// be placed once every CTA of this grid has triggered or exited; its CTAs
// then wait in their own st_pdl_wait() for this grid to finish, so an early
// trigger changes no result, only when the next launch's placement starts.
// Every grid must keep at least one CTA that waits, so that its completion
// still implies the completion of the kernels before it.
#ifndef ST_PDL_CUH
#define ST_PDL_CUH

__device__ __forceinline__ void st_pdl_wait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void st_pdl_trigger() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

#endif
