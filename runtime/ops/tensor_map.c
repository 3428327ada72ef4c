/* ops/tensor_map.c - tensor maps for the bulk tensor copy engine (see tensor_map.h). */
#include "ops/tensor_map.h"

#include <string.h>

#include "ops/tensor_check.h"

_Static_assert(sizeof(st_tensor_map) == sizeof(CUtensorMap), "st_tensor_map mirrors CUtensorMap");
_Static_assert(_Alignof(st_tensor_map) == _Alignof(CUtensorMap), "st_tensor_map mirrors CUtensorMap's alignment");

/* What st_tensor_map_swizzled's arguments must be, checked without the
 * driver. */
static st_status check_swizzled(const char *name, const void *data, st_dtype dtype, int n, const int64_t *dims,
                                const int64_t *stride_bytes, const uint32_t *box, st_err *err) {
  if (dtype != ST_DTYPE_BF16 && dtype != ST_DTYPE_FP8_E4M3)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s.dtype=%d is not bf16 or fp8_e4m3", name, (int)dtype);
  if (n < 2 || n > 5) return st_fail(err, ST_ERR_INVALID_ARG, "%s: a tensor map of %d dimensions", name, n);
  const int64_t elem = st_dtype_bytes(dtype);
  if (box[0] * elem > 128 || box[0] * elem % 16)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s: boxes of %lld bytes a row do not fit the 128-byte swizzle", name,
                   (long long)(box[0] * elem));
  if ((uintptr_t)data % 16)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s.data=%p is not 16-byte aligned for tensor copies", name, data);
  for (int d = 0; d < n; d++) {
    if (dims[d] < 1 || dims[d] > (1ll << 32) || box[d] < 1 || box[d] > 256)
      return st_fail(err, ST_ERR_INVALID_ARG, "%s: dimension %d of %lld elements, boxes of %u, is out of range", name,
                     d, (long long)dims[d], box[d]);
    if (d == 0) continue;
    const int64_t bytes = stride_bytes[d - 1];
    if (bytes <= 0 || bytes % 16 || bytes >= (1ll << 40))
      return st_fail(err, ST_ERR_INVALID_ARG,
                     "%s: a stride of %lld bytes (dimension %d) must be a positive multiple of 16 below 2^40 for "
                     "tensor copies",
                     name, (long long)bytes, d);
  }
  return ST_OK;
}

/* st_tensor_map_swizzled, fetching `promotion` around each access into L2. */
static st_status map_swizzled(const st_cu *cu, const char *name, void *data, st_dtype dtype, int n, const int64_t *dims,
                              const int64_t *stride_bytes, const uint32_t *box, CUtensorMapL2promotion promotion,
                              st_tensor_map *map, st_err *err) {
  const st_status s = check_swizzled(name, data, dtype, n, dims, stride_bytes, box, err);
  if (s != ST_OK) return s;
  cuuint64_t d64[5], s64[4];
  cuuint32_t b32[5], unit[5];
  for (int d = 0; d < n; d++) {
    d64[d] = (cuuint64_t)dims[d];
    b32[d] = box[d];
    unit[d] = 1;
    if (d > 0) s64[d - 1] = (cuuint64_t)stride_bytes[d - 1];
  }
  CUtensorMap m;
  ST_CU_TRY(cu,
            cu->cuTensorMapEncodeTiled(
                &m, dtype == ST_DTYPE_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_UINT8,
                (cuuint32_t)n, data, d64, s64, b32, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            err);
  memcpy(map, &m, sizeof m);
  return ST_OK;
}

st_status st_tensor_map_swizzled(const st_cu *cu, const char *name, void *data, st_dtype dtype, int n,
                                 const int64_t *dims, const int64_t *stride_bytes, const uint32_t *box,
                                 st_tensor_map *map, st_err *err) {
  return map_swizzled(cu, name, data, dtype, n, dims, stride_bytes, box, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, map, err);
}

/* The pages map's dimensions, strides (bytes) and boxes of `cache`, or why
 * they cannot be (a stride named by the cache's own dimension; what every
 * map needs besides, check_swizzled). */
static st_status page_geometry(const st_tensor *cache, const char *name, int64_t *dims, int64_t *strides,
                               uint32_t *box, st_err *err) {
  const int n = cache->ndim;
  if (n != 3 && n != 4)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s has %d dimensions, not [pages, (heads,) 128, D]", name, n);
  /* On the launch path views come checked (st_check_tensor: strides and
   * extent fit int64 in bytes); for any other caller a product that would
   * overflow saturates, and is refused below as out of range. */
  const int64_t elem = st_dtype_bytes(cache->dtype);
  int64_t row_bytes;
  if (__builtin_mul_overflow(cache->shape[n - 1], elem, &row_bytes)) row_bytes = INT64_MAX;
  if (elem > 0 && row_bytes % 128)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s rows of %lld bytes are not whole 128-byte panels", name,
                   (long long)row_bytes);
  /* Dimensions innermost first: a row's elements, the page's rows, (heads,)
   * pages; boxes of one 128-byte panel of a whole page of one head. */
  for (int d = 0; d < n; d++) {
    dims[d] = cache->shape[n - 1 - d];
    box[d] = d == 0 ? (uint32_t)(elem > 0 ? 128 / elem : 1) : d == 1 ? (uint32_t)cache->shape[n - 2] : 1u;
    if (d == 0) continue;
    if (__builtin_mul_overflow(cache->stride[n - 1 - d], elem, &strides[d - 1])) strides[d - 1] = INT64_MAX;
    if (strides[d - 1] <= 0 || strides[d - 1] % 16 || strides[d - 1] >= (1ll << 40))
      return st_fail(err, ST_ERR_INVALID_ARG,
                     "%s.stride[%d]=%lld elements (%lld bytes) must be a positive multiple of 16 bytes below 2^40 for "
                     "tensor copies",
                     name, n - 1 - d, (long long)cache->stride[n - 1 - d], (long long)strides[d - 1]);
  }
  return ST_OK;
}

st_status st_tensor_map_pages_check(const st_tensor *cache, const char *name, st_err *err) {
  int64_t dims[4], strides[3];
  uint32_t box[4];
  const st_status s = page_geometry(cache, name, dims, strides, box, err);
  if (s != ST_OK) return s;
  return check_swizzled(name, cache->data, cache->dtype, cache->ndim, dims, strides, box, err);
}

st_status st_tensor_map_pages(const st_cu *cu, const st_tensor *cache, const char *name, int promote_bytes,
                              st_tensor_map *map, st_err *err) {
  if (promote_bytes != 128 && promote_bytes != 256)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s: L2 promotion of %d bytes is not 128 or 256", name, promote_bytes);
  int64_t dims[4], strides[3];
  uint32_t box[4];
  const st_status s = page_geometry(cache, name, dims, strides, box, err);
  if (s != ST_OK) return s;
  return map_swizzled(cu, name, cache->data, cache->dtype, cache->ndim, dims, strides, box,
                      promote_bytes == 128 ? CU_TENSOR_MAP_L2_PROMOTION_L2_128B : CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                      map, err);
}
