/* ops/tensor_check.h - argument checks every op launcher shares. */
#ifndef ST_OPS_TENSOR_CHECK_H
#define ST_OPS_TENSOR_CHECK_H

#include "error.h"
#include "sparsetune.h"

/* Launchers plan workspace sizes in int64 and hand them out as size_t. */
_Static_assert(SIZE_MAX >= INT64_MAX, "size_t holds every int64 workspace size");

/* Bytes of one element of `d` (0 for an unknown dtype). */
int st_dtype_bytes(st_dtype d);

/* "bf16", "fp8" (e4m3), "int32", "fp32", or "?": the spelling of dispatch
 * keys and messages. */
const char *st_dtype_name(st_dtype d);

/* `t` (called `name` in messages) has dtype `dtype` (a known one), `ndim`
 * dims, the extent st_check_extent asks, innermost stride 1, and non-NULL
 * data aligned to its elements. */
st_status st_check_tensor(const st_tensor *t, const char *name, st_dtype dtype, int ndim, st_err *err);

/* The first `ndim` dims of `t` have shapes in 1..INT32_MAX and non-negative
 * strides, each stride times the element size fits in int64, and so does
 * the byte just past the largest element, (1 + sum(stride[i] x (shape[i] -
 * 1))) x the element size: any index x stride sum a launcher or kernel
 * forms in int64 then cannot overflow. */
st_status st_check_extent(const st_tensor *t, const char *name, int ndim, st_err *err);

/* Every row of `t` (innermost dim) starts `align`-byte aligned and its length
 * in bytes is a multiple of `align`: base pointer and all outer strides. */
st_status st_check_vector_rows(const st_tensor *t, const char *name, int align, st_err *err);

/* The indexer's selection arguments (index_decode, index_topk,
 * index_prefill): topk in 1..max_topk, init_blocks and local_blocks not
 * negative and together at most topk. */
st_status st_check_selection(int topk, int max_topk, int init_blocks, int local_blocks, st_err *err);

/* Fills `t` as a dense row-major view of `data` with the given shape; a
 * stride past INT64_MAX is stored as INT64_MAX (st_check_tensor refuses
 * the view). */
void st_tensor_contiguous(st_tensor *t, void *data, st_dtype dtype, int ndim, const int64_t *shape);

/* The 128-token blocks that hold `tokens` (max_context) tokens, in 64-bit
 * arithmetic: (INT_MAX + 127) / 128 does not fit the int it came in. */
int64_t st_blocks_of(int tokens);

#endif
