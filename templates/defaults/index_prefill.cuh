// defaults/index_prefill.cuh - the compile-time constants of index_prefill.cu
// at one valid point of its variant space, so that the template compiles as
// written, for compilers, linters and editors. Rendering replaces the include
// of this file with these #define lines at a variant's values
// (generator/render.lua); besides them the file may hold only comments and
// #pragma once. The values are those of the first default variant of
// generator/ops/index_prefill.lua (tests/test_generator_lua.c checks them).
#pragma once
#define ST_P_IS_FP8 0
#define ST_P_HEAD_DIM 64
#define ST_P_ROWS 128
#define ST_P_WARPGROUPS 2
#define ST_P_STAGES 3
#define ST_P_TOPK 64
#define ST_P_FUSED 0
