/* nvrtc_loader.h - NVRTC, loaded at run time, to compile built-in variants.
 *
 * libsparsetune links no compiler: an engine whose database holds every
 * binary it needs never loads one. The first built-in variant that has no
 * binary loads NVRTC with dlopen: $SPARSETUNE_NVRTC if set (a path), else
 * libnvrtc.so.13, libnvrtc.so.12 or libnvrtc.so from the loader's path, else
 * the same names under $CUDA_HOME/lib64 and /usr/local/cuda/lib64. Where
 * none loads, the call fails with ST_ERR_NO_VARIANT and a message that says
 * so and what to do. */
#ifndef ST_NVRTC_LOADER_H
#define ST_NVRTC_LOADER_H

#include <stddef.h>

#include "error.h"

typedef struct st_nvrtc st_nvrtc;

/* Loads NVRTC once per process (thread-safe); later calls return the first
 * call's result. */
st_status st_nvrtc_load(const st_nvrtc **out, st_err *err);

/* "nvrtc 13.0": the compiler, for cache keys and messages. */
const char *st_nvrtc_name(const st_nvrtc *n);

/* Compiles `source` for `arch` ("sm_90a") with the tuner's options
 * (nvrtc_options.h) into a malloc'ed cubin. A source that does not compile
 * is ST_ERR_NO_VARIANT with the first lines of the compiler's log. */
st_status st_nvrtc_compile(const st_nvrtc *n, const char *source, const char *name, const char *arch, void **cubin,
                           size_t *size, st_err *err);

#endif
