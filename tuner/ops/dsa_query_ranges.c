/* ops/dsa_query_ranges.c - the prefill indexer harnesses' query ranges
 * (dsa_query_ranges.h). */
#include "ops/dsa_query_ranges.h"

#include <stdlib.h>

#include "ops/case_inputs.h"

static void edge_range(int i, int s_kv, int32_t *ks, int32_t *ke) {
  const int32_t lo[] = {5, -100, 3, s_kv - 1, -5, 0};
  const int32_t hi[] = {2, s_kv + 100, 3, s_kv + 5, 3, s_kv};
  const int k = i / ST_DSA_EDGE_RANGE_EVERY % 6;
  *ks = lo[k];
  *ke = hi[k];
}

st_status st_dsa_query_ranges(const st_params *shape, int s_q, int s_kv, int edge_ranges, int32_t **ks, int32_t **ke,
                              st_err *err) {
  int32_t *cu = NULL, *seq = NULL;
  int R = 0, total_q = 0, longest = 0;
  st_status s = st_case_requests(st_params_get(shape, "reqs"), &cu, &seq, &R, &total_q, &longest, err);
  int64_t rows = 0;
  for (int r = 0; s == ST_OK && r < R; r++) rows += seq[r];
  if (s == ST_OK && (total_q != s_q || rows != s_kv))
    s = st_fail(err, ST_ERR_INVALID_ARG, "shape B=%d and kv=%d are not reqs' %d query tokens and %lld rows", s_q, s_kv,
                total_q, (long long)rows);
  if (s == ST_OK) {
    *ks = malloc(sizeof(int32_t) * (size_t)s_q);
    *ke = malloc(sizeof(int32_t) * (size_t)s_q);
    if (!*ks || !*ke) s = st_fail(err, ST_ERR_NOMEM, "out of host memory");
  }
  int32_t base = 0;
  for (int r = 0; s == ST_OK && r < R; r++) {
    const int32_t q_len = cu[r + 1] - cu[r], prefix = seq[r] - q_len;
    for (int t = 0; t < q_len; t++) {
      const int i = cu[r] + t;
      (*ks)[i] = base;
      (*ke)[i] = base + prefix + t + 1;
      if (edge_ranges && i % ST_DSA_EDGE_RANGE_EVERY == ST_DSA_EDGE_RANGE_EVERY - 1)
        edge_range(i, s_kv, &(*ks)[i], &(*ke)[i]);
    }
    base += seq[r];
  }
  free(cu);
  free(seq);
  return s;
}
