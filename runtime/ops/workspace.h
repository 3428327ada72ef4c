/* ops/workspace.h - the layout every op's workspace follows, so that one
 * workspace serves every op, and every shape of each, in turn on a stream.
 *
 * Its first ST_WS_COUNTER_BYTES hold only counters: words a launch needs
 * zero when it starts and leaves zero when it ends (st_workspace_clear
 * zeroes them once). Everything else a launch writes (partial results,
 * lists, logits) lies past them, in the scratch, where a call may leave
 * anything: a later call, of another op or of the same op with other
 * sizes, lays the scratch out differently, so a counter placed there
 * would start as the earlier call's data. Counters too many for the area
 * go to the scratch, and their launch zeroes them first (a memset node
 * in a graph; only calls far larger than an engine's decode steps).
 *
 * An op that needs no workspace at all reports 0 bytes and gets none. */
#ifndef ST_OPS_WORKSPACE_H
#define ST_OPS_WORKSPACE_H

#include <stddef.h>

/* Alignment of every piece: whole 256-byte lines for the kernels'
 * vector and bulk accesses. */
#define ST_WS_ALIGN ((size_t)256)

/* The counter area: 16384 words. The decode ops' counters (one per
 * request and head group, or per row and KV head) fit in it up to
 * thousands of rows. */
#define ST_WS_COUNTER_BYTES ((size_t)64 * 1024)

static inline size_t st_ws_align(size_t x) { return (x + ST_WS_ALIGN - 1) / ST_WS_ALIGN * ST_WS_ALIGN; }

/* Takes `bytes` of scratch at *off (aligned), which starts at
 * ST_WS_COUNTER_BYTES; returns the piece's offset from the workspace. */
static inline size_t st_ws_take(size_t *off, size_t bytes) {
  if (*off < ST_WS_COUNTER_BYTES) *off = ST_WS_COUNTER_BYTES;
  const size_t at = *off;
  *off = st_ws_align(at + bytes);
  return at;
}

/* Places `bytes` of counters: at offset 0, in the counter area, when they
 * fit (*zero_at_launch = 0; the workspace then spans the area), else
 * taken from the scratch at *off (*zero_at_launch = 1: the launch zeroes
 * them). */
static inline size_t st_ws_take_counters(size_t *off, size_t bytes, int *zero_at_launch) {
  *zero_at_launch = bytes > ST_WS_COUNTER_BYTES;
  if (*zero_at_launch) return st_ws_take(off, bytes);
  if (*off < ST_WS_COUNTER_BYTES) *off = ST_WS_COUNTER_BYTES;
  return 0;
}

#endif
