/* ops/tensor_map.h - tensor maps of paged caches, for the kernels that copy
 * whole 128-row pages with the bulk tensor copy engine (TMA). */
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
 * (panel x 128 bytes in elements, 0, (head,) page). Refuses views the copy
 * engine cannot address (unaligned base or strides, rows not whole
 * 128-byte panels) with a message naming the value. */
st_status st_tensor_map_pages(const st_cu *cu, const st_tensor *cache, const char *name, st_tensor_map *map,
                              st_err *err);

#endif
