/* ops/index_inputs.h - the inputs of a prefill indexer case, shared by the
 * index_score and index_prefill harnesses: a varlen batch "q_len:prefix;...",
 * q and an index-K pool sized as docs/method.md says (max(4096,
 * min(blocks of all requests, 65536)) pages, block tables uniformly random
 * over it, bf16 in [-1, 1) or fp8 in [-4, 4), every 4099th pool value a
 * NaN), on the host and the device, and the double-precision reference
 * scores of them. */
#ifndef ST_OPS_INDEX_INPUTS_H
#define ST_OPS_INDEX_INPUTS_H

#include <stdint.h>

#include "cold.h"
#include "cuda_driver.h"
#include "error.h"
#include "op_harness.h"
#include "params.h"
#include "reference/index_prefill.h"
#include "sparsetune.h"

typedef struct st_index_case {
  st_ref_index_prefill ref; /* host views; scale 1/sqrt(128); topk fields for the caller */
  int total_q, max_context;
  float amp; /* inputs are uniform in [-amp, amp) */
  void *h_q, *h_pool;
  int32_t *h_cu, *h_seq, *h_bt;
  double *ref_score; /* [H][total_q][max_blocks] */
  CUdeviceptr d_q, d_pool, d_bt, d_cu, d_seq;
  st_cold_tables cold; /* cold: the block tables of the other input sets (cold.h) */
} st_index_case;

/* The geometry of the inputs: reads the shape fields B, H, D, dtype and
 * reqs (the requests' lengths on the host) and sizes the pool (grown where
 * `cold`, as cold.h says, for an L2 of l2_bytes). On failure *c holds what
 * was made: free it. */
st_status st_index_case_shape(const st_params *shape, int cold, int64_t l2_bytes, st_index_case *c, st_err *err);

/* Fills the inputs of a case st_index_case_shape sized from o->seed,
 * computes the reference scores on o->threads CPU threads and uploads the
 * inputs. On failure *c holds what was made: free it. */
st_status st_index_case_build(const st_cu *cu, const st_case_opts *o, st_index_case *c, st_err *err);

/* Frees host and device memory (a zeroed case is fine, cu NULL too where
 * nothing was uploaded). */
void st_index_case_free(const st_cu *cu, st_index_case *c);

/* The inputs as dense tensors, every data pointer NULL (the geometry). */
void st_index_case_tensors(const st_index_case *c, st_tensor *q, st_tensor *k_cache, st_tensor *block_table,
                           st_tensor *cu_seqlens_q, st_tensor *seq_lens);

/* Points those tensors at the uploaded inputs. */
void st_index_case_point(const st_index_case *c, st_tensor *q, st_tensor *k_cache, st_tensor *block_table,
                         st_tensor *cu_seqlens_q, st_tensor *seq_lens);

/* Visible blocks summed over the query tokens (one head). */
double st_index_case_visible_blocks(const st_index_case *c);

/* Bytes of q and of each request's index-K rows, read once. */
double st_index_case_input_bytes(const st_index_case *c);

#endif
