/* bench_case.c - see bench_case.h. */
#include "bench_case.h"

#include <string.h>

st_status st_bench_case_make(const st_op_harness *h, const st_cu *cu, const st_device_info *dev, const st_params *shape,
                             const st_case_opts *o, void *rt, CUstream stream, st_bench_case *c, int *ok, char *why,
                             size_t cap, st_err *err) {
  memset(c, 0, sizeof *c);
  c->h = h;
  *ok = 0;
  st_status s = h->case_create(cu, dev, shape, o, &c->kase, err);
  if (s == ST_OK) s = h->bind_runtime(c->kase, rt, &c->bound, err);
  double max_err = 0;
  if (s == ST_OK) s = h->verify(c->bound, stream, ok, &max_err, why, cap, err);
  return s;
}

void st_bench_case_free(st_bench_case *c) {
  if (c->bound) c->h->unbind(c->bound);
  if (c->kase) c->h->case_destroy(c->kase);
  memset(c, 0, sizeof *c);
}
