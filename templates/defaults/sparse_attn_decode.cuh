// defaults/sparse_attn_decode.cuh - the compile-time constants of
// sparse_attn_decode.cu at one valid point of its variant space, so that the
// template compiles as written, for compilers, linters and editors. Rendering
// replaces the include of this file with these #define lines at a variant's
// values (generator/render.lua); besides them the file may hold only comments
// and #pragma once. The values are those of the first default variant of
// generator/ops/sparse_attn_decode.lua (tests/test_generator_lua.c checks
// them).
#pragma once
#define ST_P_IS_FP8 0
#define ST_P_HEAD_DIM 64
#define ST_P_GROUP 1
#define ST_P_M_TILES 1
#define ST_P_WARPS_N 4
#define ST_P_STAGES 1
#define ST_P_ALGO_SPLIT 0
#define ST_P_K_REGS 0
#define ST_P_TMA 0
#define ST_P_RING_EXTRA 0
#define ST_P_PV_DIMS 0
#define ST_P_CLUSTER 1
