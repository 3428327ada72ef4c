/* Every generated sparse_attn (prefill) variant against the double-precision
 * reference over the edge cases of the op contract: varlen batches mixing
 * short and long requests (single-token requests, a request with no query
 * token), prefixes that are not multiples of 128, selections with -1 entries
 * and blocks past the query's own, both paged KV layouts, bf16 and fp8
 * caches with all three scale modes, GQA groups 1, 4, 16 and 32, head_dim
 * 64, 128 and 256, topk 4 to 64, with and without lse. Each variant runs
 * twice per shape. Skips where there is no driver or GPU. */
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "variant_matrix.h"

typedef struct edge {
  const char *dtype, *scale, *layout, *sel;
  int D, Hq, Hkv, topk, lse;
  const char *reqs; /* q_len:prefix;... */
} edge;

static const edge edges[] = {
    {"bf16", "none", "pages2", "random", 128, 32, 2, 16, 1, "300:4133;1:0;1024:0;200:20000;0:5000"},
    {"fp8", "scalar", "interleaved", "holes", 128, 32, 2, 16, 1, "129:0;1:127;700:1000"},
    {"fp8", "tensor", "pages2", "random", 128, 16, 1, 8, 0, "513:3000;64:0"},
    {"bf16", "none", "interleaved", "holes", 64, 32, 32, 4, 1, "40:300;17:0"},
    {"bf16", "none", "pages2", "local", 256, 32, 1, 32, 1, "100:9000;3:0"},
    {"fp8", "tensor", "interleaved", "random", 256, 64, 2, 64, 1, "77:20000;1:0"},
    {"fp8", "none", "pages2", "holes", 64, 8, 2, 16, 0, "257:8000;31:31"},
    {"bf16", "none", "interleaved", "random", 128, 16, 4, 5, 0, "2000:0"},
    {"bf16", "none", "pages2", "holes", 128, 32, 1, 16, 1, "300:500;2:0"},
    /* 16 q heads a kv head (the two-pass wgmma kernels' shapes):
     * entries listed twice, entries -1 or past the token's own block, and
     * requests whose tokens select every visible block. */
    {"bf16", "none", "interleaved", "repeats", 128, 32, 2, 16, 1, "700:0;131:900;9:0"},
    {"bf16", "none", "pages2", "holes", 128, 32, 2, 16, 0, "260:0;64:300"},
    /* The same in fp8, whose two-pass kernels widen the raw rows in place:
     * no scales, and per-token scales on the interleaved layout. */
    {"fp8", "none", "interleaved", "repeats", 128, 32, 2, 16, 1, "700:0;131:900;9:0"},
    {"fp8", "tensor", "interleaved", "holes", 128, 32, 2, 16, 1, "260:0;64:300"},
};

static void make_shape(const edge *e, st_shape *s) {
  st_test_varlen_shape(s, "sparse_attn", e->reqs);
  st_err err = {{0}};
  st_params_set(&s->params, "dtype", e->dtype, &err);
  st_params_set(&s->params, "scale", e->scale, &err);
  st_params_set(&s->params, "layout", e->layout, &err);
  st_params_set(&s->params, "sel", e->sel, &err);
  st_params_set_int(&s->params, "D", e->D, &err);
  st_params_set_int(&s->params, "Hq", e->Hq, &err);
  st_params_set_int(&s->params, "Hkv", e->Hkv, &err);
  st_params_set_int(&s->params, "topk", e->topk, &err);
  st_params_set_int(&s->params, "lse", e->lse, &err);
  snprintf(s->key, sizeof s->key, "edge:%s,%s,%s,%s,D=%d,Hq=%d,Hkv=%d,topk=%d,reqs=%s", e->dtype, e->scale, e->layout,
           e->sel, e->D, e->Hq, e->Hkv, e->topk, e->reqs);
}

static uint64_t g_seed;

static void test_every_variant_matches_the_reference_on_edge_cases(void **state) {
  (void)state;
  const int nshapes = (int)(sizeof edges / sizeof edges[0]);
  st_shape shapes[sizeof edges / sizeof edges[0]];
  for (int i = 0; i < nshapes; i++) make_shape(&edges[i], &shapes[i]);
  st_test_every_variant("sparse_attn", shapes, nshapes, g_seed);
}

int main(void) {
  int rc = st_test_require_gpu();
  if (rc) return rc;
  g_seed = st_test_seed("sparse_attn_gpu");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_variant_matches_the_reference_on_edge_cases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
