// defaults/dsa_index_logits.cuh - the compile-time constants of
// dsa_index_logits.cu at one valid point of its variant space, so that the
// template compiles as written, for compilers, linters and editors.
// Rendering replaces the include of this file with these #define lines at a
// variant's values (generator/render.lua); besides them the file may hold
// only comments and #pragma once. The values are those of the first default
// variant of generator/ops/dsa_index_logits.lua (tests/test_generator_lua.c
// checks them).
#pragma once
#define ST_P_MAX_HEADS 16
#define ST_P_QUERIES 8
#define ST_P_HEAD_TILES 1
#define ST_P_TOKENS 128
#define ST_P_THREADS 256
#define ST_P_STAGES 3
