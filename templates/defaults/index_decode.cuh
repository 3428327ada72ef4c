// defaults/index_decode.cuh - the compile-time constants of index_decode.cu at
// one valid point of its variant space, so that the template compiles as
// written, for compilers, linters and editors. Rendering replaces the include
// of this file with these #define lines at a variant's values
// (generator/render.lua); besides them the file may hold only comments and
// #pragma once. The values are those of the first default variant of
// generator/ops/index_decode.lua (tests/test_generator_lua.c checks them).
#pragma once
#define ST_P_IS_FP8 0
#define ST_P_HEAD_DIM 64
#define ST_P_TOPK 4
#define ST_P_HEADS_PER_CTA 4
#define ST_P_MAX_QLEN 1
#define ST_P_THREADS 256
#define ST_P_UNITS_IN_FLIGHT 1
#define ST_P_ALGO_SPLIT 1
#define ST_P_BULK_STAGES 2
