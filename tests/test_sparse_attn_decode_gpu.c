/* Every generated sparse_attn_decode variant against the double-precision
 * reference over the edge cases of the op contract: sequence lengths 1,
 * 127, 128, 129, 4133 and 131072, padding rows, qlen 1 to 4, selections
 * with -1 entries and blocks past the query's own, both paged KV layouts,
 * bf16 and fp8 caches with all three scale modes (and per-token views of
 * one scale each, run from device memory), GQA groups 1, 4, 8, 16 and
 * 32, head_dim 64, 128 and 256, topk 4 to 64, with and without lse, and q
 * beyond f16's range with fp8 caches. Each variant runs twice per shape
 * (the second run checks that the workspace was left ready for a replay).
 * Skips where there is no driver or GPU. */
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "variant_matrix.h"

typedef struct edge {
  const char *dtype, *scale, *layout, *sel;
  int D, Hq, Hkv, qlen, topk, lse, ctx;
  const char *lens;
  int q_log2; /* 0: q in [-1, 1); else [-2^q_log2, 2^q_log2) */
} edge;

static const edge edges[] = {
    {"bf16", "none", "pages2", "random", 128, 32, 2, 1, 16, 1, 131072, "1;127;128;129;4133;0;131072"},
    {"fp8", "scalar", "interleaved", "holes", 128, 32, 2, 1, 16, 1, 131072, "1;127;128;129;4133;0;131072"},
    {"fp8", "tensor", "pages2", "random", 128, 16, 1, 2, 8, 0, 9000, "1;2;129;300;0;9000;4133"},
    {"bf16", "none", "interleaved", "holes", 64, 32, 32, 3, 4, 1, 1024, "3;130;256;257;0;1024"},
    {"bf16", "none", "pages2", "local", 256, 32, 1, 4, 32, 1, 9000, "3;128;4133;9000;0;1"},
    {"fp8", "tensor", "interleaved", "random", 256, 64, 2, 1, 64, 1, 20000, "20000;129;0;1;17000"},
    {"fp8", "none", "pages2", "holes", 64, 16, 2, 4, 16, 0, 40000, "1;8000;40000"},
    {"bf16", "none", "interleaved", "random", 128, 16, 4, 1, 5, 0, 4133, "4133;128;129"},
    /* q past f16's largest value (65504): the fp8 kernels' f16 q is scaled */
    {"fp8", "none", "pages2", "random", 128, 32, 2, 1, 16, 1, 9000, "9000;129;1;0", 17},
    {"fp8", "tensor", "interleaved", "holes", 64, 16, 2, 2, 16, 1, 4133, "4133;300", 17},
    /* one K and one V scale in device memory, as vLLM passes them */
    {"fp8", "one", "interleaved", "random", 128, 32, 2, 1, 16, 1, 32768, "1;127;129;4133;0;32768"},
    {"fp8", "one", "pages2", "holes", 128, 16, 1, 2, 8, 0, 9000, "1;2;129;300;0;9000;4133"},
};

static void make_shape(const edge *e, st_shape *s) {
  memset(s, 0, sizeof *s);
  st_err err = {{0}};
  int B = 1;
  for (const char *p = e->lens; *p; p++) B += *p == ';';
  snprintf(s->op, sizeof s->op, "sparse_attn_decode");
  st_params_set(&s->params, "dtype", e->dtype, &err);
  st_params_set(&s->params, "scale", e->scale, &err);
  st_params_set(&s->params, "layout", e->layout, &err);
  st_params_set(&s->params, "sel", e->sel, &err);
  st_params_set(&s->params, "lens", e->lens, &err);
  st_params_set_int(&s->params, "D", e->D, &err);
  st_params_set_int(&s->params, "Hq", e->Hq, &err);
  st_params_set_int(&s->params, "Hkv", e->Hkv, &err);
  st_params_set_int(&s->params, "qlen", e->qlen, &err);
  st_params_set_int(&s->params, "topk", e->topk, &err);
  st_params_set_int(&s->params, "lse", e->lse, &err);
  st_params_set_int(&s->params, "B", B, &err);
  st_params_set_int(&s->params, "ctx", e->ctx, &err);
  if (e->q_log2) st_params_set_int(&s->params, "q_log2", e->q_log2, &err);
  snprintf(s->key, sizeof s->key, "edge:%s,%s,%s,%s,D=%d,Hq=%d,Hkv=%d,qlen=%d,topk=%d,lens=%s,q_log2=%d", e->dtype,
           e->scale, e->layout, e->sel, e->D, e->Hq, e->Hkv, e->qlen, e->topk, e->lens, e->q_log2);
}

static uint64_t g_seed;

static void test_every_variant_matches_the_reference_on_edge_cases(void **state) {
  (void)state;
  const int nshapes = (int)(sizeof edges / sizeof edges[0]);
  st_shape shapes[sizeof edges / sizeof edges[0]];
  for (int i = 0; i < nshapes; i++) make_shape(&edges[i], &shapes[i]);
  st_test_every_variant("sparse_attn_decode", shapes, nshapes, g_seed);
}

int main(void) {
  int rc = st_test_require_gpu();
  if (rc) return rc;
  g_seed = st_test_seed("sparse_attn_decode_gpu");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_variant_matches_the_reference_on_edge_cases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
