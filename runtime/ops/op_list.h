/* ops/op_list.h - the ops the runtime dispatches: the one list.
 *
 * Each line X(name, NAME) names an op as the generator, the database and
 * every folder spell it (templates/<name>.cu, generator/ops/<name>.lua,
 * runtime/ops/<name>.c, tuner/ops/<name>.c, ...). The op ids, the variant
 * config and plan unions, the op descriptors, the public entry points
 * (api.c), the tuner's harnesses and the build's per-op sources are all
 * made from this list; docs/adding-an-op.md says what else a new op needs.
 * The build reads the X(...) lines too: keep one per line, in this form. */
#ifndef ST_OPS_OP_LIST_H
#define ST_OPS_OP_LIST_H

#include "ops/dsa_index_decode.h"
#include "ops/dsa_index_logits.h"
#include "ops/dsa_index_topk.h"
#include "ops/index_decode.h"
#include "ops/index_prefill.h"
#include "ops/index_score.h"
#include "ops/index_topk.h"
#include "ops/mla_sparse_decode.h"
#include "ops/mla_sparse_prefill.h"
#include "ops/sparse_attn.h"
#include "ops/sparse_attn_decode.h"

/* In st_op_id order; a new op goes last (ids are not stored anywhere, but
 * the order is the order of st_open's loading and of messages). */
#define ST_OP_LIST(X)                        \
  X(index_decode, INDEX_DECODE)              \
  X(sparse_attn_decode, SPARSE_ATTN_DECODE)  \
  X(sparse_attn, SPARSE_ATTN)                \
  X(index_topk, INDEX_TOPK)                  \
  X(index_score, INDEX_SCORE)                \
  X(index_prefill, INDEX_PREFILL)            \
  X(mla_sparse_decode, MLA_SPARSE_DECODE)    \
  X(dsa_index_decode, DSA_INDEX_DECODE)      \
  X(mla_sparse_prefill, MLA_SPARSE_PREFILL)  \
  X(dsa_index_logits, DSA_INDEX_LOGITS)      \
  X(dsa_index_topk, DSA_INDEX_TOPK)

#endif
