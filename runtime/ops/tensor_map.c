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
  const int n = cache->ndim;
  if (n != 3 && n != 4)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s has %d dimensions, not [pages, (heads,) 128, D]", name, n);
  const int64_t elem = st_dtype_bytes(cache->dtype), row_bytes = cache->shape[n - 1] * elem;
  if (row_bytes % 128)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s rows of %lld bytes are not whole 128-byte panels", name,
                   (long long)row_bytes);
  /* Dimensions innermost first: a row's elements, the page's rows, (heads,)
   * pages; strides in bytes for all but the first. */
  cuuint64_t dims[4], strides[3];
  cuuint32_t box[4], unit[4];
  for (int d = 0; d < n; d++) {
    dims[d] = (cuuint64_t)cache->shape[n - 1 - d];
    box[d] = d == 0 ? (cuuint32_t)(128 / elem) : d == 1 ? (cuuint32_t)cache->shape[n - 2] : 1u;
    unit[d] = 1;
    if (d == 0) continue;
    const int64_t bytes = cache->stride[n - 1 - d] * elem;
    if (bytes % 16 || bytes >= (1ll << 40))
      return st_fail(err, ST_ERR_INVALID_ARG,
                     "%s.stride[%d]=%lld elements (%lld bytes) must be a multiple of 16 bytes below 2^40 for tensor "
                     "copies",
                     name, n - 1 - d, (long long)cache->stride[n - 1 - d], (long long)bytes);
    strides[d - 1] = (cuuint64_t)bytes;
  }
  if ((uintptr_t)cache->data % 16)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s.data=%p is not 16-byte aligned for tensor copies", name, cache->data);
  CUtensorMap m;
  ST_CU_TRY(cu,
            cu->cuTensorMapEncodeTiled(
                &m, cache->dtype == ST_DTYPE_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_UINT8,
                (cuuint32_t)n, cache->data, dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            err);
  memcpy(map, &m, sizeof m);
  return ST_OK;
}
