/* Every generated index_decode variant against the double-precision
 * reference over the edge cases of the op contract: sequence lengths 1, 127,
 * 128, 129, 4133 and 131072, padding rows, qlen 1 to 4, topk above the
 * visible blocks, init/local blocks that overlap on short requests, bf16 and
 * fp8, head_dim 64 and 128, 1, 2 and 4 heads, and requests whose blocks all
 * tie (ties: every index-K row equal, the selection's fallback when too
 * many keys equal the bound), and a batch of 40 mixed lengths (the balanced
 * slices' scan over more than one warp's worth of requests, padding rows
 * among them). Each variant runs twice per
 * shape (the second run checks that the workspace was left ready for a
 * replay). Skips where there is no driver or GPU. */
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "variant_matrix.h"

typedef struct edge {
  const char *dtype;
  int D, H, qlen, topk, init, local, ctx;
  const char *lens; /* the lengths, or "mixed" for B random ones */
  int ties;
  int B; /* "mixed" only */
} edge;

static const edge edges[] = {
    {"bf16", 128, 2, 1, 16, 1, 2, 131072, "1;127;128;129;4133;0;131072", 0},
    {"fp8", 128, 2, 1, 16, 1, 2, 131072, "1;127;128;129;4133;0;131072", 0},
    {"bf16", 128, 4, 2, 8, 2, 2, 9000, "1;2;129;300;0;9000;4133", 0},
    {"fp8", 64, 2, 3, 4, 2, 2, 1024, "3;130;256;257;0;1024", 0},
    {"bf16", 64, 1, 4, 32, 1, 4, 9000, "3;128;4133;9000;0;1", 0},
    {"fp8", 128, 4, 4, 16, 4, 12, 20000, "20000;129;0;1;17000", 0},
    {"bf16", 128, 2, 1, 64, 8, 8, 40000, "1;8000;40000", 0},
    {"bf16", 128, 1, 1, 5, 0, 1, 4133, "4133;128;129", 0},
    {"bf16", 128, 2, 2, 16, 1, 2, 131072, "131072;5000;300;0", 1},
    {"bf16", 128, 2, 1, 16, 1, 2, 40000, "mixed", 0, 40},
};

static void make_shape(const edge *e, st_shape *s) {
  memset(s, 0, sizeof *s);
  st_err err = {{0}};
  int B = e->B;
  if (strcmp(e->lens, "mixed") != 0) {
    B = 1;
    for (const char *p = e->lens; *p; p++) B += *p == ';';
  }
  snprintf(s->op, sizeof s->op, "index_decode");
  st_params_set(&s->params, "dtype", e->dtype, &err);
  st_params_set_int(&s->params, "D", e->D, &err);
  st_params_set_int(&s->params, "H", e->H, &err);
  st_params_set_int(&s->params, "qlen", e->qlen, &err);
  st_params_set_int(&s->params, "topk", e->topk, &err);
  st_params_set_int(&s->params, "init", e->init, &err);
  st_params_set_int(&s->params, "local", e->local, &err);
  st_params_set_int(&s->params, "B", B, &err);
  st_params_set_int(&s->params, "ctx", e->ctx, &err);
  st_params_set(&s->params, "lens", e->lens, &err);
  st_params_set_int(&s->params, "ties", e->ties, &err);
  snprintf(s->key, sizeof s->key, "edge:%s,B=%d,D=%d,H=%d,qlen=%d,topk=%d,lens=%s,ties=%d", e->dtype, B, e->D, e->H,
           e->qlen, e->topk, e->lens, e->ties);
}

static uint64_t g_seed;

static void test_every_variant_matches_the_reference_on_edge_cases(void **state) {
  (void)state;
  const int nshapes = (int)(sizeof edges / sizeof edges[0]);
  st_shape shapes[sizeof edges / sizeof edges[0]];
  for (int i = 0; i < nshapes; i++) make_shape(&edges[i], &shapes[i]);
  st_test_every_variant("index_decode", shapes, nshapes, g_seed);
}

int main(void) {
  int rc = st_test_require_gpu();
  if (rc) return rc;
  g_seed = st_test_seed("index_decode_gpu");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_variant_matches_the_reference_on_edge_cases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
