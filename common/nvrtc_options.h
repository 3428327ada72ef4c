/* nvrtc_options.h - the options every kernel source is compiled with, by
 * the tuner (tuner/compile.c) and by the runtime (runtime/nvrtc_loader.c), so that
 * a built-in variant the runtime compiles is the binary the tuner timed.
 * The architecture option comes first and is the caller's:
 * "--gpu-architecture=sm_90a". No -lineinfo: it leaves the machine code
 * byte for byte the same and makes a cubin 2.6x larger (the PTX text and
 * line tables), which every database and export carries; add it by hand
 * to read source lines in a profiler. */
#ifndef ST_NVRTC_OPTIONS_H
#define ST_NVRTC_OPTIONS_H

#define ST_NVRTC_OPTIONS "-std=c++17", "-default-device"
#define ST_NVRTC_OPTION_COUNT 2

#endif
