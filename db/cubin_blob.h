/* cubin_blob.h - how a cubin lies in binaries.cubin.
 *
 * Two forms, told apart by the first bytes:
 *  - as compiled: the ELF image itself (0x7f 'E' 'L' 'F'), what compile
 *    writes into a tuned database (writing stays a plain copy);
 *  - compressed: "STZ1", the cubin's size (8 bytes, little-endian), then
 *    one zlib stream of the cubin, what an export writes (cubins are ~99%
 *    of an export and zlib keeps about a quarter of their bytes).
 * A blob that begins with "STZ" is in the compressed family; a later format
 * would change the fourth byte, and this version refuses any but '1'.
 * Every reader of the column goes through db_cubin_unpack, so whoever reads
 * a binary gets the compiled bytes whatever form they were stored in; the
 * length of the column is the stored size, not the cubin's. */
#ifndef ST_DB_CUBIN_BLOB_H
#define ST_DB_CUBIN_BLOB_H

#include <stddef.h>

#include "error.h"

#define DB_CUBIN_FAMILY_BYTES 3  /* "STZ": the compressed family, any version */
#define DB_CUBIN_HEADER_BYTES 12 /* "STZ1" and the size */
/* No cubin comes near it (a large one is ~400 KB): a recorded size above
 * it is corruption, not an allocation to attempt. */
#define DB_CUBIN_MAX_BYTES ((size_t)256 << 20)

/* 1 when `blob` (n bytes) is in the compressed family ("STZ..."). */
int db_cubin_is_packed(const void *blob, size_t n);

/* The compressed form of `cubin` (n bytes, 1 to DB_CUBIN_MAX_BYTES) into
 * *blob (malloc'ed, the caller frees it) of *blob_n bytes. `what` names the
 * binary in messages ("the sm_90a binary of source ab12..."). */
st_status db_cubin_pack(const void *cubin, size_t n, void **blob, size_t *blob_n, const char *what, st_err *err);

/* The cubin a stored blob (n > 0 bytes, either form) holds, into *cubin
 * (malloc'ed, the caller frees it) of *cubin_n bytes: a copy of a compiled
 * one, the inflated bytes of a compressed one. A compressed blob whose
 * header or stream is corrupt, whose recorded size is 0 or above
 * DB_CUBIN_MAX_BYTES, or that inflates to another size gives ST_ERR_DB
 * naming `what` and why, with *cubin NULL. */
st_status db_cubin_unpack(const void *blob, size_t n, void **cubin, size_t *cubin_n, const char *what, st_err *err);

#endif
