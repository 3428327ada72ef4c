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
// The kernels do not trigger their dependents early
// (griddepcontrol.launch_dependents): a grid's exit triggers them. Measured
// on the one-graph decode step (H100, docs/kernels/sparse_attn_decode.md,
// v2.14): wait only, 0-2.9% faster than plain launches on every row; a
// trigger at every kernel's start, 3-8% slower at B <= 8; a trigger in
// index_decode after its scoring, -7.8% to +0.8% by row.
#ifndef ST_PDL_CUH
#define ST_PDL_CUH

__device__ __forceinline__ void st_pdl_wait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

#endif
