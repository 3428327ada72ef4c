/* Every generated index_topk variant against the double-precision
 * reference over varlen edge cases: single-token requests, a request with
 * no query token, prefixes not multiples of 128, tokens with fewer visible
 * blocks than topk, init/local ranges that overlap on short prefixes, NaN
 * scores (as -inf) and ties, topk 3 to 64, 1 to 4 heads, rows of 1 to 514
 * blocks (every warp variant's key capacity). Each variant runs
 * twice per shape. Skips where there is no driver or GPU. */
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "variant_matrix.h"

typedef struct edge {
  int H, topk, init, local;
  const char *reqs; /* q_len:prefix;... */
} edge;

static const edge edges[] = {
    {2, 16, 1, 2, "300:4133;1:0;1024:0;200:20000;0:5000"},
    {2, 16, 1, 2, "4096:0"},
    {1, 4, 2, 2, "129:0;1:127;700:1000"},
    {4, 8, 0, 1, "513:3000;64:0"},
    {2, 32, 4, 4, "100:9000;3:0"},
    {2, 64, 8, 8, "77:20000;1:0"},
    {1, 5, 2, 3, "257:8000;31:31"},
    /* Rows long enough for every warp variant's key capacity (keys x 32
     * blocks) to be the smallest or next one that holds them. */
    {1, 3, 1, 1, "100:12000;5:0"},  /*  95 blocks */
    {2, 4, 0, 2, "64:50000;1:0"},   /* 392 blocks */
    {2, 8, 2, 2, "40:40000;200:0"}, /* 313 blocks */
    {2, 16, 1, 2, "130:16000;7:0"}, /* 127 blocks */
    {1, 12, 1, 2, "90:65600"},      /* 514 blocks */
    {2, 20, 2, 2, "600:3000"},      /*  29 blocks */
    {1, 32, 4, 4, "50:45000;2:0"},  /* 352 blocks */
};

static void make_shape(const edge *e, st_shape *s) {
  st_test_varlen_shape(s, "index_topk", e->reqs);
  st_err err = {{0}};
  st_params_set_int(&s->params, "H", e->H, &err);
  st_params_set_int(&s->params, "topk", e->topk, &err);
  st_params_set_int(&s->params, "init", e->init, &err);
  st_params_set_int(&s->params, "local", e->local, &err);
  snprintf(s->key, sizeof s->key, "edge:H=%d,topk=%d,init=%d,local=%d,reqs=%s", e->H, e->topk, e->init, e->local,
           e->reqs);
}

static uint64_t g_seed;

static void test_every_variant_matches_the_reference_on_edge_cases(void **state) {
  (void)state;
  const int nshapes = (int)(sizeof edges / sizeof edges[0]);
  st_shape shapes[sizeof edges / sizeof edges[0]];
  for (int i = 0; i < nshapes; i++) make_shape(&edges[i], &shapes[i]);
  st_test_every_variant("index_topk", shapes, nshapes, g_seed);
}

int main(void) {
  int rc = st_test_require_gpu();
  if (rc) return rc;
  g_seed = st_test_seed("index_topk_gpu");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_variant_matches_the_reference_on_edge_cases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
