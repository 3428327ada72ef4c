// params_gate.cuh - a module names the size of the argument block its
// kernels were compiled for.
//
// A kernel reads its parameters as the struct of params/<op>.h laid out when
// it was compiled; the runtime fills that struct as laid out when the
// library was built. A binary from a database tuned by another version of
// the project may expect another layout, and launching it would read
// arguments from the wrong offsets. So every template instantiates
// st_params_bytes<sizeof its params struct>, an empty kernel that is never
// launched, and the runtime looks that kernel up under the size it knows
// (runtime/module_cache.c): a module without it is passed over for the next
// candidate, as a binary that does not load is. The size is a cheap
// fingerprint: a field added or removed changes it; fields reordered or
// retyped at equal size go unseen.
//
// The mangled name is _Z15st_params_bytesILy<N>EEvv (N in decimal: the
// template argument is an unsigned long long), so host code spells it
// without the compiler.
#ifndef ST_PARAMS_GATE_CUH
#define ST_PARAMS_GATE_CUH

template <unsigned long long Bytes> __global__ void st_params_bytes() {}

#define ST_PARAMS_GATE(params_type) template __global__ void st_params_bytes<sizeof(params_type)>();

#endif
