/* ops/case_inputs.c - shape fields, request lengths and uploads for the op
 * harnesses. */
#include "ops/case_inputs.h"

#include <stdlib.h>
#include <string.h>

#include "ops/op.h"
#include "ops/workspace.h"
#include "random_fill.h"
#include "sparsetune.h"

st_status st_case_shape_int(const st_params *shape, const char *key, long long lo, long long hi, int *out,
                            st_err *err) {
  long long v;
  st_status s = st_params_get_int(shape, key, lo, hi, &v, err);
  if (s == ST_OK) *out = (int)v;
  return s;
}

void st_case_stand_ins(st_tensor *const *t, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (t[i]->ndim > 0) t[i]->data = ST_STAND_IN(i);
}

void st_case_table_garbage(int32_t *bt, int R, int cols, const int32_t *seq, int64_t pages) {
  const int32_t garbage[] = {-1, INT32_MIN, pages > INT32_MAX ? INT32_MAX : (int32_t)pages, INT32_MAX};
  for (int r = 0; r < R; r++)
    for (int j = seq[r] > 0 ? (seq[r] - 1) / ST_BLOCK_TOKENS + 1 : 0; j < cols; j++)
      bt[(size_t)r * cols + j] = garbage[(r + j) % 4];
}

st_status st_case_seq_lens(int32_t *seq, int R, int ctx, const char *lens, uint64_t *rng, st_err *err) {
  if (lens && lens[0] >= '0' && lens[0] <= '9') {
    const char *p = lens;
    for (int r = 0; r < R; r++) {
      char *end = NULL;
      const long v = strtol(p, &end, 10);
      if (end == p || v < 0 || v > ctx || (*end != ';' && *end != '\0') || (*end == '\0' && r != R - 1))
        return st_fail(err, ST_ERR_INVALID_ARG, "shape lens='%s' must list B=%d lengths in 0..ctx=%d", lens, R, ctx);
      seq[r] = (int32_t)v;
      p = *end ? end + 1 : end;
    }
    if (*p) return st_fail(err, ST_ERR_INVALID_ARG, "shape lens='%s' lists more than B=%d lengths", lens, R);
    return ST_OK;
  }
  const int mixed = lens && strcmp(lens, "mixed") == 0;
  if (lens && !mixed && strcmp(lens, "full"))
    return st_fail(err, ST_ERR_INVALID_ARG, "shape lens='%s' is not full, mixed or a list of lengths", lens);
  for (int r = 0; r < R; r++) {
    if (!mixed)
      seq[r] = ctx;
    else if (r % 8 == 7)
      seq[r] = 0;
    else
      seq[r] = 1 + (int32_t)st_rand_below(rng, (uint64_t)ctx);
  }
  if (mixed) seq[0] = ctx;
  return ST_OK;
}

void *st_case_zalloc_aligned(size_t align, size_t size) {
  const size_t rounded = (size + align - 1) / align * align; /* aligned_alloc wants a multiple */
  void *p = aligned_alloc(align, rounded ? rounded : align);
  if (p) memset(p, 0, rounded ? rounded : align);
  return p;
}

st_status st_case_upload(const st_cu *cu, CUdeviceptr *d, const void *h, size_t bytes, st_err *err) {
  ST_CU_TRY(cu, cu->cuMemAlloc(d, bytes), err);
  ST_CU_TRY(cu, cu->cuMemcpyHtoD(*d, h, bytes), err);
  /* From pageable memory the copy may return before its DMA is done, on
   * the legacy stream, which the worker's non-blocking stream does not
   * wait for: the inputs are complete before any launch reads them. */
  ST_CU_TRY(cu, cu->cuStreamSynchronize(NULL), err);
  return ST_OK;
}

st_status st_case_workspace(const st_cu *cu, void *rt, CUdeviceptr *d, size_t bytes, st_err *err) {
  if (!bytes) return ST_OK;
  ST_CU_TRY(cu, cu->cuMemAlloc(d, bytes), err);
  if (rt) {
    const st_status s = st_workspace_clear(rt, (void *)(uintptr_t)*d, bytes, NULL);
    if (s != ST_OK) return st_fail(err, s, "runtime: %s", st_last_error(rt));
  } else {
    ST_CU_TRY(cu, cu->cuMemsetD8Async(*d, 0, bytes, NULL), err);
  }
  /* The scratch past the counter area as another call may leave it
   * (ops/workspace.h): all ones, NaN as floats and -1 as ints, so a
   * kernel that reads scratch it has not written, or keeps a counter
   * there, fails its check. */
  if (bytes > ST_WS_COUNTER_BYTES)
    ST_CU_TRY(cu, cu->cuMemsetD8Async(*d + ST_WS_COUNTER_BYTES, 0xFF, bytes - ST_WS_COUNTER_BYTES, NULL), err);
  /* The clear runs on the legacy stream; the launches on the worker's
   * non-blocking stream, which does not wait for it. A fresh allocation
   * often holds the previous variant's workspace, whose data a launch that
   * overtook the clear read as counters (docs/kernels/sparse_attn_decode.md,
   * 2026-11-26). */
  ST_CU_TRY(cu, cu->cuStreamSynchronize(NULL), err);
  return ST_OK;
}

/* One item "q_len:prefix" or "q_len:prefix*count" at *p; moves *p past it
 * and its ';'. Returns 0 if malformed. */
static int parse_request_item(const char **p, long *q, long *prefix, long *count) {
  char *end = NULL;
  *q = strtol(*p, &end, 10);
  if (end == *p || *end != ':') return 0;
  *p = end + 1;
  *prefix = strtol(*p, &end, 10);
  if (end == *p) return 0;
  *count = 1;
  if (*end == '*') {
    *p = end + 1;
    *count = strtol(*p, &end, 10);
    if (end == *p || *count < 1) return 0;
  }
  if ((*end != ';' && *end != '\0') || (*end == ';' && end[1] == '\0')) return 0; /* no empty last item */
  *p = *end ? end + 1 : end;
  return *q >= 0 && *prefix >= 0;
}

st_status st_case_requests(const char *reqs, int32_t **cu_seqlens_q, int32_t **seq_lens, int *R, int *total_q,
                           int *max_context, st_err *err) {
  enum { MAX_REQUESTS = 4096 };
  *cu_seqlens_q = NULL;
  *seq_lens = NULL;
  if (!reqs) return st_fail(err, ST_ERR_INVALID_ARG, "shape field reqs is missing");
  long n = 0, q, prefix, count;
  for (const char *p = reqs; *p;) {
    if (!parse_request_item(&p, &q, &prefix, &count)) goto bad;
    if (count > MAX_REQUESTS - n)
      return st_fail(err, ST_ERR_INVALID_ARG, "shape reqs='%s' lists more than %d requests", reqs, MAX_REQUESTS);
    n += count;
  }
  if (n == 0) goto bad;
  int32_t *cu = *cu_seqlens_q = malloc(sizeof(int32_t) * (size_t)(n + 1));
  int32_t *seq = *seq_lens = malloc(sizeof(int32_t) * (size_t)n);
  if (!cu || !seq) return st_fail(err, ST_ERR_NOMEM, "out of host memory");
  cu[0] = 0;
  *max_context = 1;
  long r = 0;
  for (const char *p = reqs; *p;) {
    parse_request_item(&p, &q, &prefix, &count);
    for (long c = 0; c < count; c++, r++) {
      /* q and prefix are what strtol read, up to LONG_MAX: each is bounded
       * before a sum is formed (seq_len <= 2^24, total_q <= 2^30). */
      if (q > (1L << 24) || prefix > (1L << 24) - q || q > (1L << 30) - cu[r]) goto bad;
      cu[r + 1] = cu[r] + (int32_t)q;
      seq[r] = (int32_t)(q + prefix);
      if (seq[r] > *max_context) *max_context = seq[r];
    }
  }
  *R = (int)r; /* == n: both passes parse the same text */
  *total_q = cu[r];
  return ST_OK;
bad:
  return st_fail(err, ST_ERR_INVALID_ARG, "shape reqs='%s' is not a list of q_len:prefix[*count]", reqs);
}
