// defaults/mla_sparse_prefill.cuh - the compile-time constants of
// mla_sparse_prefill.cu at one valid point of its variant space, so that the
// template compiles as written, for compilers, linters and editors. Rendering
// replaces the include of this file with these #define lines at a variant's
// values (generator/render.lua); besides them the file may hold only comments
// and #pragma once. The values are those of the first default variant of
// generator/ops/mla_sparse_prefill.lua (tests/test_generator_lua.c checks
// them).
#pragma once
#define ST_P_HEADS_PER_CTA 64
#define ST_P_TILE_TOKENS 64
#define ST_P_THREADS 512
#define ST_P_MMA 1
#define ST_P_PIPE 0
