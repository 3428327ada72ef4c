/* identity.h - the content addresses of sources and variants.
 *
 * A source is named by the hash of its text, a variant by the hash of its
 * op, parameters and source hash, so that changing a template changes the
 * ids and stale timings are never applied to new code. The generator
 * (recording variants) and the runtime (its built-in variants) name them
 * with these functions, so both give one variant one id. */
#ifndef ST_IDENTITY_H
#define ST_IDENTITY_H

#include <stddef.h>

#include "error.h"
#include "params.h"

/* Length of a hash in hex, NUL excluded. */
#define ST_HASH_HEX_LEN 32

/* XXH3-128 of `data` as 32 lower-case hex digits and a NUL. */
void st_hash_hex(const void *data, size_t len, char out[ST_HASH_HEX_LEN + 1]);

/* The same of the n parts `data[i]` (`len[i]` bytes each) one after
 * another, without joining them. */
void st_hash_hex_parts(const void *const *data, const size_t *len, int n, char out[ST_HASH_HEX_LEN + 1]);

/* A variant's id: the hash of op "\n" kernel JSON "\n" launch JSON "\n"
 * source_hash, the JSON canonical (st_params_to_json). ST_ERR_INVALID_ARG
 * when the parameters are too long to name. */
st_status st_variant_id(const char *op, const st_params *kernel, const st_params *launch, const char *source_hash,
                        char out[ST_HASH_HEX_LEN + 1], st_err *err);

#endif
