/* cold.h - cold-cache timing (`sparsetune tune --cold`, `bench --cold`).
 *
 * By default an op is timed as the peer was timed (docs/method.md): the
 * same inputs every replay, so whatever of them fits in L2 stays there (a
 * decode batch of one request reads 1-32 MiB; an H100's L2 holds 50 MB, an
 * H200's 60 MB).
 * An engine sees its paged caches cold: between two calls of one layer's
 * op, the other layers read theirs. In cold mode every paged pool holds at
 * least ST_COLD_POOL_L2 times the L2 size, and the timed replays cycle
 * through input sets that differ in their block tables alone, each drawn
 * uniformly over the pool as the case's own is: a replay's pages were not
 * read by the replays shortly before it, and it finds about L2 / pool of
 * them (1 / ST_COLD_POOL_L2) in L2 by chance. The other inputs (q, the
 * selections, lengths, scores) stay as they are: in an engine the kernel
 * before produced them moments ago. The work of every set is the same;
 * only set 0, the case's own, is verified against the reference.
 * index_topk reads no paged pool: its cold timing is its warm one. */
#ifndef ST_COLD_H
#define ST_COLD_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_driver.h"
#include "device_info.h"
#include "error.h"
#include "op_harness.h"
#include "run_args.h"
#include "sparsetune.h"
#include "timing.h"

#define ST_COLD_POOL_L2 16
/* A cycle of input sets reads at least this many times the L2 size. */
#define ST_COLD_CYCLE_L2 3

/* Input sets for calls of `bytes_per_call` each: enough that a cycle reads
 * ST_COLD_CYCLE_L2 x l2_bytes, at least 2, at most ST_TIMING_MAX_ROTATIONS. */
int st_cold_rotations(double bytes_per_call, int64_t l2_bytes);

/* Pages of a pool of `pages` pages of `page_bytes` each, grown where cold to
 * hold ST_COLD_POOL_L2 x l2_bytes (not cold: `pages` as is). */
int64_t st_cold_pool_pages(int cold, int64_t pages, int64_t page_bytes, int64_t l2_bytes);

/* A case's block tables for cold timing: set 0 is the case's own (`own`),
 * sets 1..n-1 are made by st_cold_make. */
typedef struct st_cold_tables {
  CUdeviceptr own;  /* the case's table                                      */
  size_t entries;   /* int32 entries of a table                              */
  int64_t pages;    /* of the pool they index: entries are uniform in [0, pages) */
  uint64_t seed;    /* the case's                                            */
  CUdeviceptr more; /* tables 1..n-1, one after another                     */
  int n;            /* sets made, own included (0: none yet)               */
} st_cold_tables;

/* Draws and uploads tables 1..n-1 (n >= 2; once per case). */
st_status st_cold_make(const st_cu *cu, st_cold_tables *t, int n, st_err *err);

/* The device address of table i, or NULL if there is no set i. */
void *st_cold_pick(const st_cold_tables *t, int i);

/* A harness's rotate: points `block_table` (the case's argument) at table
 * i; fails for a set that was not made. */
st_status st_cold_point(const st_cold_tables *t, st_tensor *block_table, int i, st_err *err);

/* Frees what st_cold_make allocated (a zeroed struct is fine). */
void st_cold_free(const st_cu *cu, st_cold_tables *t);

/* For a case built cold: readies the harness's input sets (its cold_sets,
 * sized by st_cold_rotations over its min_bytes) and sets o's rotations and
 * rotate. An op without paged input leaves o as it is. */
st_status st_cold_prepare(const st_op_harness *h, void *kase, const st_device_info *dev, st_timing_opts *o,
                          st_err *err);

#endif
