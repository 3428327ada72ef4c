/* ops/side_stream.c - create and release a side stream and its events. */
#include "ops/side_stream.h"

#include <string.h>

st_status st_side_stream_create(const st_cu *cu, st_side_stream *s, st_err *err) {
  memset(s, 0, sizeof *s);
  if (!cu) return st_fail(err, ST_ERR_NO_DRIVER, "a side stream needs the CUDA driver");
  int least = 0, greatest = 0;
  CUresult rc = cu->cuCtxGetStreamPriorityRange(&least, &greatest);
  if (rc == CUDA_SUCCESS) rc = cu->cuStreamCreateWithPriority(&s->stream, CU_STREAM_NON_BLOCKING, greatest);
  CUevent *ev[] = {&s->fork, &s->done, &s->freed[0], &s->freed[1]};
  for (size_t i = 0; i < sizeof ev / sizeof ev[0] && rc == CUDA_SUCCESS; i++)
    rc = cu->cuEventCreate(ev[i], CU_EVENT_DISABLE_TIMING);
  if (rc != CUDA_SUCCESS) {
    st_side_stream_destroy(cu, s);
    return st_cu_fail(cu, rc, "creating a side stream and its events", err);
  }
  return ST_OK;
}

void st_side_stream_destroy(const st_cu *cu, st_side_stream *s) {
  if (!cu || !s) return;
  CUevent ev[] = {s->fork, s->done, s->freed[0], s->freed[1]};
  for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++)
    if (ev[i]) cu->cuEventDestroy(ev[i]);
  if (s->stream) cu->cuStreamDestroy(s->stream);
  memset(s, 0, sizeof *s);
}
