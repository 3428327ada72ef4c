#include "verify_twice.h"

#include <stdio.h>

static st_status poison(const st_cu *cu, CUstream stream, const st_verify_buf *b, int run, st_err *err) {
  if (!b->d) return ST_OK;
  const uint32_t v = b->poison + (uint32_t)run;
  if (b->elem_bytes == 2)
    ST_CU_TRY(cu, cu->cuMemsetD16Async(b->d, (unsigned short)v, b->n, stream), err);
  else
    ST_CU_TRY(cu, cu->cuMemsetD32Async(b->d, v, b->n, stream), err);
  return ST_OK;
}

static st_status fetch(const st_cu *cu, const st_verify_buf *b, st_err *err) {
  if (b->d) ST_CU_TRY(cu, cu->cuMemcpyDtoH(b->host, b->d, b->n * (size_t)b->elem_bytes), err);
  return ST_OK;
}

st_status st_verify_twice(const st_cu *cu, CUstream stream, st_launch_fn launch, void *bound, const st_verify_out *out,
                          int *ok, double *max_err, char *msg, size_t cap, st_err *err) {
  *ok = 1;
  *max_err = 0;
  for (int run = 0; run < 2; run++) {
    st_status s = ST_OK;
    for (int i = 0; i < 2 && s == ST_OK; i++) s = poison(cu, stream, &out->buf[i], run, err);
    if (s == ST_OK) s = run ? st_replay_once(cu, stream, launch, bound, err) : launch(bound, stream, err);
    if (s != ST_OK) return s;
    ST_CU_TRY(cu, cu->cuStreamSynchronize(stream), err);
    for (int i = 0; i < 2 && s == ST_OK; i++) s = fetch(cu, &out->buf[i], err);
    if (s != ST_OK) return s;
    double worst = 0;
    char why[400];
    const int bad = out->check(out->ctx, &worst, why, sizeof why);
    if (worst > *max_err) *max_err = worst;
    if (bad) {
      *ok = 0;
      snprintf(msg, cap, "%s%d wrong %s%s; first: %s",
               run ? "on the second launch (a CUDA graph replay: not capture-safe, or the workspace not left ready?): "
                   : "",
               bad, out->item, bad == 1 ? "" : "s", why);
      return ST_OK;
    }
  }
  return ST_OK;
}
