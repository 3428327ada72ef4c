#include "ops/tensor_check.h"

#include <stdint.h>
#include <string.h>

int st_dtype_bytes(st_dtype d) {
  switch (d) {
  case ST_DTYPE_BF16: return 2;
  case ST_DTYPE_FP8_E4M3: return 1;
  case ST_DTYPE_INT32:
  case ST_DTYPE_FP32: return 4;
  }
  return 0;
}

const char *st_dtype_name(st_dtype d) {
  switch (d) {
  case ST_DTYPE_BF16: return "bf16";
  case ST_DTYPE_FP8_E4M3: return "fp8";
  case ST_DTYPE_INT32: return "int32";
  case ST_DTYPE_FP32: return "fp32";
  }
  return "?";
}

st_status st_check_extent(const st_tensor *t, const char *name, int ndim, st_err *err) {
  const int64_t eb = st_dtype_bytes(t->dtype);
  int64_t last = 0; /* the largest element's offset so far, in elements */
  for (int i = 0; i < ndim; i++) {
    const int64_t n = t->shape[i], stride = t->stride[i];
    if (n <= 0 || n > INT32_MAX)
      return st_fail(err, ST_ERR_INVALID_ARG, "%s.shape[%d]=%lld is outside 1..%d", name, i, (long long)n, INT32_MAX);
    if (stride < 0)
      return st_fail(err, ST_ERR_INVALID_ARG, "%s.stride[%d]=%lld is negative", name, i, (long long)stride);
    /* Launchers and kernels scale strides to bytes and add index x stride
     * terms in int64: the stride in bytes and the byte just past the
     * largest element must fit. */
    int64_t step, bytes, end;
    if (__builtin_mul_overflow(stride, eb, &bytes) || __builtin_mul_overflow(stride, n - 1, &step) ||
        __builtin_add_overflow(last, step, &last) || __builtin_add_overflow(last, 1, &end) ||
        __builtin_mul_overflow(end, eb, &end))
      return st_fail(err, ST_ERR_INVALID_ARG, "%s.stride[%d]=%lld (shape[%d]=%lld) takes %s past 2^63 bytes", name, i,
                     (long long)stride, i, (long long)n, name);
  }
  return ST_OK;
}

st_status st_check_tensor(const st_tensor *t, const char *name, st_dtype dtype, int ndim, st_err *err) {
  if (t->dtype != dtype)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s.dtype=%d, expected %d", name, (int)t->dtype, (int)dtype);
  const int eb = st_dtype_bytes(dtype);
  if (eb == 0) return st_fail(err, ST_ERR_INVALID_ARG, "%s.dtype=%d is not an st_dtype", name, (int)dtype);
  if (t->ndim != ndim) return st_fail(err, ST_ERR_INVALID_ARG, "%s.ndim=%d, expected %d", name, t->ndim, ndim);
  st_status s = st_check_extent(t, name, ndim, err);
  if (s != ST_OK) return s;
  if (t->stride[ndim - 1] != 1)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s.stride[%d]=%lld: the innermost stride must be 1", name, ndim - 1,
                   (long long)t->stride[ndim - 1]);
  if (!t->data) return st_fail(err, ST_ERR_INVALID_ARG, "%s.data is NULL", name);
  if ((uintptr_t)t->data % (uintptr_t)eb)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s.data=%p is not %d-byte aligned", name, t->data, eb);
  return ST_OK;
}

st_status st_check_vector_rows(const st_tensor *t, const char *name, int align, st_err *err) {
  const int64_t eb = st_dtype_bytes(t->dtype);
  if ((uintptr_t)t->data % (uintptr_t)align)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s.data=%p is not %d-byte aligned", name, t->data, align);
  /* (x * eb) % align computed as ((x % align) * eb) % align: no product of
   * a caller's stride can overflow here, checked or not. */
  const int64_t row = t->shape[t->ndim - 1];
  if (row % align * eb % align)
    return st_fail(err, ST_ERR_INVALID_ARG,
                   "%s.shape[%d]=%lld: rows of %lld-byte elements are not a multiple of %d bytes", name, t->ndim - 1,
                   (long long)row, (long long)eb, align);
  for (int i = 0; i < t->ndim - 1; i++)
    if (t->stride[i] % align * eb % align)
      return st_fail(err, ST_ERR_INVALID_ARG, "%s.stride[%d]=%lld elements is not a multiple of %d bytes", name, i,
                     (long long)t->stride[i], align);
  return ST_OK;
}

void st_tensor_contiguous(st_tensor *t, void *data, st_dtype dtype, int ndim, const int64_t *shape) {
  memset(t, 0, sizeof *t);
  t->data = data;
  t->dtype = dtype;
  t->ndim = ndim;
  int64_t stride = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    t->shape[i] = shape[i];
    t->stride[i] = stride;
    /* Saturated: a view too large for int64 then fails st_check_tensor
     * with its size named, instead of wrapping into a plausible stride. */
    if (i > 0 && __builtin_mul_overflow(stride, shape[i], &stride)) stride = INT64_MAX;
  }
}

st_status st_check_selection(int topk, int max_topk, int init_blocks, int local_blocks, st_err *err) {
  if (topk < 1 || topk > max_topk) return st_fail(err, ST_ERR_INVALID_ARG, "topk=%d is outside 1..%d", topk, max_topk);
  if (init_blocks < 0 || local_blocks < 0)
    return st_fail(err, ST_ERR_INVALID_ARG, "init_blocks=%d and local_blocks=%d must not be negative", init_blocks,
                   local_blocks);
  /* Both are in 0..INT_MAX here, their sum perhaps not: compare without it. */
  if (init_blocks > topk || local_blocks > topk - init_blocks)
    return st_fail(err, ST_ERR_INVALID_ARG, "init_blocks + local_blocks = %d + %d exceeds topk=%d", init_blocks,
                   local_blocks, topk);
  return ST_OK;
}

int64_t st_blocks_of(int tokens) { return ((int64_t)tokens + ST_BLOCK_TOKENS - 1) / ST_BLOCK_TOKENS; }
