/* ops/side_stream.h - a second stream and the events that fork work from a
 * caller's stream onto it and join it back, for launchers that keep two
 * chains of kernels in flight at once (sparse_attn's overlapped chunks:
 * one chunk's merge beside the next chunk's blocks).
 *
 * The side stream has the device's greatest priority, so its kernels' CTAs
 * are placed first whenever the two chains compete for an SM. Every
 * dependency goes through events, so the pattern is legal inside a CUDA
 * graph capture of the caller's stream (the side stream joins the capture
 * at its first wait and is joined back by the caller's last wait).
 *
 * Events bind at the wait, so one set serves any number of launches as
 * long as one launcher enqueues at a time: the owner serializes the
 * enqueues (the runtime handle under a mutex, a tuner case by itself). */
#ifndef ST_OPS_SIDE_STREAM_H
#define ST_OPS_SIDE_STREAM_H

#include "cuda_driver.h"
#include "error.h"

typedef struct st_side_stream {
  CUstream stream;  /* the second chain's stream (greatest priority)                 */
  CUevent fork;     /* caller's stream -> side: work before the launch               */
  CUevent done;     /* side -> caller's stream: a chunk's blocks finished            */
  CUevent freed[2]; /* caller's stream -> side: a workspace half's merge finished    */
} st_side_stream;

/* Creates the stream and its events in the current context; on failure
 * nothing is left allocated and `s` is zeroed. */
st_status st_side_stream_create(const st_cu *cu, st_side_stream *s, st_err *err);

/* Releases what st_side_stream_create made (a zeroed `s`: nothing). Work
 * already enqueued completes; the driver frees the objects after it. */
void st_side_stream_destroy(const st_cu *cu, st_side_stream *s);

#endif
