/* Every generated index_score variant against the double-precision
 * reference over varlen edge cases: single-token requests, a request with
 * no query token, prefixes not multiples of 128, tokens whose own block is
 * their only one, a 131072-token context, 1 to 8 heads (3: padded rows), head_dim 64 and
 * 128, bf16 and fp8, NaN keys in the pool, 310 requests in one batch.
 * Each variant runs twice per shape. Skips where there is no driver or
 * GPU. */
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "variant_matrix.h"

typedef struct edge {
  const char *dtype;
  int D, H;
  const char *reqs; /* q_len:prefix;... */
} edge;

static const edge edges[] = {
    {"bf16", 128, 2, "300:4133;1:0;1024:0;200:20000;0:5000"},
    {"bf16", 128, 2, "129:0;1:127;700:1000"},
    {"bf16", 128, 4, "513:3000;64:0"},
    {"bf16", 128, 8, "100:9000;3:0"},
    {"bf16", 128, 3, "300:4133;1:0;1024:0;0:77"}, /* a padding row a token */
    {"bf16", 128, 2, "64:131008"},
    {"bf16", 64, 1, "257:8000;31:31"},
    /* More requests than a CTA has threads: the tile searches scan in batches. */
    {"bf16", 128, 2, "3:130*200;70:4000*100;1:0*10"},
    {"fp8", 128, 2, "300:4133;1:0;1024:0"},
    {"fp8", 128, 1, "129:0;77:20000"},
    {"fp8", 128, 3, "117:0;778:0;65:9000"},
};

static void make_shape(const edge *e, st_shape *s) {
  st_test_varlen_shape(s, "index_score", e->reqs);
  st_err err = {{0}};
  st_params_set(&s->params, "dtype", e->dtype, &err);
  st_params_set_int(&s->params, "D", e->D, &err);
  st_params_set_int(&s->params, "H", e->H, &err);
  snprintf(s->key, sizeof s->key, "edge:dtype=%s,D=%d,H=%d,reqs=%s", e->dtype, e->D, e->H, e->reqs);
}

static uint64_t g_seed;

static void test_every_variant_matches_the_reference_on_edge_cases(void **state) {
  (void)state;
  const int nshapes = (int)(sizeof edges / sizeof edges[0]);
  st_shape shapes[sizeof edges / sizeof edges[0]];
  for (int i = 0; i < nshapes; i++) make_shape(&edges[i], &shapes[i]);
  st_test_every_variant("index_score", shapes, nshapes, g_seed);
}

int main(void) {
  int rc = st_test_require_gpu();
  if (rc) return rc;
  g_seed = st_test_seed("index_score_gpu");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_variant_matches_the_reference_on_edge_cases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
