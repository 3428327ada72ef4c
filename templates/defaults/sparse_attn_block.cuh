// defaults/sparse_attn_block.cuh - the compile-time constants of
// sparse_attn_block.cu at one valid point of its variant space, so that the
// template compiles as written, for compilers, linters and editors. Rendering
// replaces the include of this file with these #define lines at a variant's
// values (generator/render.lua); besides them the file may hold only comments
// and #pragma once. The values are those of the first default variant of
// generator/ops/sparse_attn.lua that renders this template
// (tests/test_generator_lua.c checks them).
#pragma once
#define ST_P_IS_FP8 0
#define ST_P_HEAD_DIM 128
#define ST_P_GROUP 16
#define ST_P_TOKENS 8
#define ST_P_WARPS 4
#define ST_P_CTAS 2
#define ST_P_PART_F32 0
#define ST_P_STAGES 1
#define ST_P_MTILES 2
#define ST_P_WGMMA 1
