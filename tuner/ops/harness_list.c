#include <string.h>

#include "op_harness.h"

static const st_op_harness *const all[] = {&st_index_decode_harness, &st_sparse_attn_decode_harness,
                                           &st_sparse_attn_harness,  &st_index_topk_harness,
                                           &st_index_score_harness,  &st_index_prefill_harness};

const st_op_harness *st_harness_find(const char *op) {
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (strcmp(all[i]->op, op) == 0) return all[i];
  return NULL;
}
