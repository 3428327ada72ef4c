/* params/mla_sparse_prefill.h - the argument block of the
 * mla_sparse_prefill kernels: the token-sparse MLA attention's
 * (common/mla_sparse_attend_params.h says what each field holds), shared
 * with mla_sparse_decode. The launcher (runtime/ops/mla_sparse_prefill.c)
 * fills it as for a decode batch of one-token requests (qlen 1, a row per
 * query token) over kv rows (page_size 1; slots are kv rows). */
#ifndef ST_MLA_SPARSE_PREFILL_PARAMS_H
#define ST_MLA_SPARSE_PREFILL_PARAMS_H

#include "common/mla_sparse_attend_params.h"

typedef st_mla_sparse_attend_params st_mla_sparse_prefill_params;

#endif
