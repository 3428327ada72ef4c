/* ops/case_inputs.h - what the op harnesses share when they build a case:
 * reading shape fields, request lengths, and device copies of host arrays. */
#ifndef ST_OPS_CASE_INPUTS_H
#define ST_OPS_CASE_INPUTS_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_driver.h"
#include "error.h"
#include "params.h"
#include "sparsetune.h"

/* Integer shape field `key` in lo..hi into *out. */
st_status st_case_shape_int(const st_params *shape, const char *key, long long lo, long long hi, int *out, st_err *err);

/* Sequence lengths of R requests: "full" puts every request at ctx; "mixed"
 * draws lengths in 1..ctx (most not multiples of 128), one request at ctx,
 * every eighth a padding row (0); a list "1;127;0;4133" gives each request's
 * length (edge cases), R entries, each at most ctx. NULL means "full". */
st_status st_case_seq_lens(int32_t *seq, int R, int ctx, const char *lens, uint64_t *rng, st_err *err);

/* Block-table entries past each request's last visible block (all of a
 * padding request's row) set to garbage (-1, INT32_MIN, pages, INT32_MAX in
 * turn): the contract asks nothing of them, so a kernel that copies from
 * such a page faults or is caught by memcheck. bt is [R, cols]. */
void st_case_table_garbage(int32_t *bt, int R, int cols, const int32_t *seq, int64_t pages);

/* A varlen batch "q_len:prefix;..." (seq_len = prefix + q_len; an item
 * "q_len:prefix*count" stands for count such requests; at most 4096):
 * *cu_seqlens_q [R+1] and *seq_lens [R], allocated here (the caller frees
 * them, also on failure), *R, *total_q and *max_context (the longest
 * seq_len, at least 1). */
st_status st_case_requests(const char *reqs, int32_t **cu_seqlens_q, int32_t **seq_lens, int *R, int *total_q,
                           int *max_context, st_err *err);

/* Points t[i] at ST_STAND_IN(i) (runtime/ops/op.h) for each tensor of
 * t[0..n-1] that has dims: the arguments of a harness's dispatch_args. A
 * tensor left without dims (ndim 0) is one the call does not want (lse=0,
 * the scales of a scale mode without them) and stays NULL. */
void st_case_stand_ins(st_tensor *const *t, size_t n);

/* Zeroed host memory of `size` bytes aligned to `align` (a power of two),
 * freed with free(); NULL when out of memory. For the harnesses' bound
 * variants, which hold kernel argument blocks whose tensor maps ask for
 * 128-byte alignment (calloc gives 16). */
void *st_case_zalloc_aligned(size_t align, size_t size);

/* cuMemAlloc + copy of `bytes` of host memory, complete when it returns. */
st_status st_case_upload(const st_cu *cu, CUdeviceptr *d, const void *h, size_t bytes, st_err *err);

/* A variant's workspace of `bytes` (0: none, *d stays 0) into *d, cleared,
 * the clear complete when it returns: through the runtime's
 * st_workspace_clear where `rt` is a handle (as an engine clears it), else
 * by memset; then the scratch past the counter area filled with ones, as
 * an earlier call of another op may leave it. *d is set as soon as it is allocated, also on a failure after
 * (the caller frees it). */
st_status st_case_workspace(const st_cu *cu, void *rt, CUdeviceptr *d, size_t bytes, st_err *err);

#endif
