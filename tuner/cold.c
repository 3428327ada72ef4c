/* cold.c - cold-cache timing's input sets (cold.h). */
#include "cold.h"

#include <math.h>
#include <stdlib.h>

#include "random_fill.h"

int st_cold_rotations(double bytes_per_call, int64_t l2_bytes) {
  const double want = ST_COLD_CYCLE_L2 * (double)(l2_bytes > 0 ? l2_bytes : 1);
  const double n = bytes_per_call > 0 ? ceil(want / bytes_per_call) : ST_TIMING_MAX_ROTATIONS;
  return n < 2 ? 2 : n > ST_TIMING_MAX_ROTATIONS ? ST_TIMING_MAX_ROTATIONS : (int)n;
}

int64_t st_cold_pool_pages(int cold, int64_t pages, int64_t page_bytes, int64_t l2_bytes) {
  if (!cold || page_bytes <= 0) return pages;
  const int64_t want = (ST_COLD_POOL_L2 * l2_bytes + page_bytes - 1) / page_bytes;
  return pages > want ? pages : want;
}

st_status st_cold_make(const st_cu *cu, st_cold_tables *t, int n, st_err *err) {
  if (n < 2 || n > ST_TIMING_MAX_ROTATIONS || t->entries == 0 || t->pages <= 0 || t->more)
    return st_fail(err, ST_ERR_INVALID_ARG, "cold-cache tables: %d sets of %zu entries over %lld pages (once a case)",
                   n, t->entries, (long long)t->pages);
  const size_t total = (size_t)(n - 1) * t->entries;
  int32_t *h = malloc(total * 4);
  if (!h) return st_fail(err, ST_ERR_NOMEM, "out of host memory for %d cold-cache block tables", n - 1);
  uint64_t rng = t->seed ^ 0x636f6c64; /* "cold": other draws than the case's own table */
  for (size_t i = 0; i < total; i++) h[i] = (int32_t)st_rand_below(&rng, (uint64_t)t->pages);
  CUresult rc = cu->cuMemAlloc(&t->more, total * 4);
  if (rc == CUDA_SUCCESS) rc = cu->cuMemcpyHtoD(t->more, h, total * 4);
  free(h);
  if (rc != CUDA_SUCCESS) return st_cu_fail(cu, rc, "uploading cold-cache block tables", err);
  t->n = n;
  return ST_OK;
}

void *st_cold_pick(const st_cold_tables *t, int i) {
  if (i == 0) return (void *)(uintptr_t)t->own;
  if (i < 0 || i >= t->n) return NULL;
  return (void *)(uintptr_t)(t->more + (CUdeviceptr)((size_t)(i - 1) * t->entries * 4));
}

st_status st_cold_point(const st_cold_tables *t, st_tensor *block_table, int i, st_err *err) {
  void *table = st_cold_pick(t, i);
  if (!table) return st_fail(err, ST_ERR_INVALID_ARG, "no cold-cache input set %d", i);
  block_table->data = table;
  return ST_OK;
}

void st_cold_free(const st_cu *cu, st_cold_tables *t) {
  if (t->more) cu->cuMemFree(t->more);
  t->more = 0;
  t->n = 0;
}

st_status st_cold_prepare(const st_op_harness *h, void *kase, const st_device_info *dev, st_timing_opts *o,
                          st_err *err) {
  if (!h->cold_sets) return ST_OK;
  const int n = st_cold_rotations(h->min_bytes(kase), dev->l2_bytes);
  st_status st = h->cold_sets(kase, n, err);
  if (st != ST_OK) return st;
  o->rotations = n;
  o->rotate = h->rotate;
  return ST_OK;
}
