/* ops/tensor_map.h - tensor maps for the kernels that copy 128-byte panels
 * (whole 128-row pages of paged caches, rows of q or of partial outputs)
 * with the bulk tensor copy engine (TMA). */
#ifndef ST_OPS_TENSOR_MAP_H
#define ST_OPS_TENSOR_MAP_H

#include "common/st_types.h" /* templates/: st_tensor_map */
#include "cuda_driver.h"
#include "error.h"
#include "sparsetune.h"

/* A map of `cache`, a [pages, 128, D] or [pages, heads, 128, D] view
 * (strides in elements, innermost 1) of bf16 or fp8 e4m3, whose boxes are
 * 128 bytes of a row x the page's 128 rows (x one head) x one page with
 * the 128-byte swizzle: one copy lands one 128-byte panel of a page in the
 * layout wgmma reads (common/wgmma.cuh). Box coordinates, innermost first:
 * (panel x 128 bytes in elements, 0, (head,) page). Each access brings
 * `promote_bytes` (128 or 256) around it into L2: 256 where a page's
 * neighbouring panels are read next, 128 where they belong to others (the
 * other heads' halves of an fp8 row pair: 256 cost fp8 decode 37% in a
 * ring-streaming probe on the H100). Refuses views the copy
 * engine cannot address (unaligned base or strides, rows not whole
 * 128-byte panels) with a message naming the value. */
st_status st_tensor_map_pages(const st_cu *cu, const st_tensor *cache, const char *name, int promote_bytes,
                              st_tensor_map *map, st_err *err);

/* ST_OK if st_tensor_map_pages can map `cache` (no driver needed), else
 * its refusal: for launchers that check a variant's fit before launching. */
st_status st_tensor_map_pages_check(const st_tensor *cache, const char *name, st_err *err);

/* A map of `n` (2..5) dimensions of bf16 or fp8 e4m3 at `data`, with the
 * 128-byte swizzle: dims[d] elements along dimension d (innermost first,
 * contiguous), stride_bytes[d - 1] bytes between its steps for d >= 1, and
 * boxes of box[d] elements (box[0] x the element size: at most 128 bytes).
 * Refuses with a message naming `name` what the copy engine cannot
 * address: an unaligned base or stride, a box past the 128-byte swizzle. */
st_status st_tensor_map_swizzled(const st_cu *cu, const char *name, void *data, st_dtype dtype, int n,
                                 const int64_t *dims, const int64_t *stride_bytes, const uint32_t *box,
                                 st_tensor_map *map, st_err *err);

#endif
