/* ops/tensor_map.c - tensor maps of paged caches (see tensor_map.h). */
#include "ops/tensor_map.h"

#include <string.h>

#include "ops/tensor_check.h"

_Static_assert(sizeof(st_tensor_map) == sizeof(CUtensorMap), "st_tensor_map mirrors CUtensorMap");
_Static_assert(_Alignof(st_tensor_map) == _Alignof(CUtensorMap), "st_tensor_map mirrors CUtensorMap's alignment");

st_status st_tensor_map_pages(const st_cu *cu, const st_tensor *cache, const char *name, st_tensor_map *map,
                              st_err *err) {
  if (cache->dtype != ST_DTYPE_BF16 && cache->dtype != ST_DTYPE_FP8_E4M3)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s.dtype=%d is not bf16 or fp8_e4m3", name, (int)cache->dtype);
  const int64_t elem = st_dtype_bytes(cache->dtype);
  const int64_t row_bytes = cache->shape[2] * elem;
  const int64_t token_bytes = cache->stride[1] * elem, page_bytes = cache->stride[0] * elem;
  if (row_bytes % 128)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s rows of %lld bytes are not whole 128-byte panels", name,
                   (long long)row_bytes);
  if ((uintptr_t)cache->data % 16 || token_bytes % 16 || page_bytes % 16)
    return st_fail(err, ST_ERR_INVALID_ARG,
                   "%s.data=%p, row stride %lld and page stride %lld bytes must be multiples of 16 for tensor copies",
                   name, cache->data, (long long)token_bytes, (long long)page_bytes);
  if (token_bytes >= (1ll << 40) || page_bytes >= (1ll << 40))
    return st_fail(err, ST_ERR_INVALID_ARG, "%s strides of %lld and %lld bytes exceed tensor copies' 2^40", name,
                   (long long)token_bytes, (long long)page_bytes);
  /* Dimensions innermost first: a row's elements, the page's rows, pages. */
  const cuuint64_t dims[3] = {(cuuint64_t)cache->shape[2], (cuuint64_t)cache->shape[1], (cuuint64_t)cache->shape[0]};
  const cuuint64_t strides[2] = {(cuuint64_t)token_bytes, (cuuint64_t)page_bytes};
  const cuuint32_t box[3] = {(cuuint32_t)(128 / elem), (cuuint32_t)cache->shape[1], 1}, unit[3] = {1, 1, 1};
  CUtensorMap m;
  ST_CU_TRY(cu,
            cu->cuTensorMapEncodeTiled(&m,
                                       cache->dtype == ST_DTYPE_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                                     : CU_TENSOR_MAP_DATA_TYPE_UINT8,
                                       3, cache->data, dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                       CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            err);
  memcpy(map, &m, sizeof m);
  return ST_OK;
}
