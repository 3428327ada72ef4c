/* params/mla_sparse_decode.h - the argument block of the mla_sparse_decode
 * kernels: the token-sparse MLA attention's
 * (common/mla_sparse_attend_params.h says what each field holds), shared
 * with mla_sparse_prefill. The launcher (runtime/ops/mla_sparse_decode.c)
 * leaves max_logits NULL: decode has no such output. */
#ifndef ST_MLA_SPARSE_DECODE_PARAMS_H
#define ST_MLA_SPARSE_DECODE_PARAMS_H

#include "common/mla_sparse_attend_params.h"

typedef st_mla_sparse_attend_params st_mla_sparse_decode_params;

#endif
