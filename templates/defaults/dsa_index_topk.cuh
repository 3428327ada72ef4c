// defaults/dsa_index_topk.cuh - the compile-time constants of
// dsa_index_topk.cu at one valid point of its variant space, so that the
// template compiles as written, for compilers, linters and editors.
// Rendering replaces the include of this file with these #define lines at a
// variant's values (generator/render.lua); besides them the file may hold
// only comments and #pragma once. The values are those of the first default
// variant of generator/ops/dsa_index_topk.lua (tests/test_generator_lua.c
// checks them).
#pragma once
#define ST_P_THREADS 1024
#define ST_P_FILTER 1
