#include "identity.h"

#include <stdio.h>
#include <xxhash.h>

static void hex(XXH128_hash_t h, char out[ST_HASH_HEX_LEN + 1]) {
  snprintf(out, ST_HASH_HEX_LEN + 1, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
}

void st_hash_hex(const void *data, size_t len, char out[ST_HASH_HEX_LEN + 1]) { hex(XXH3_128bits(data, len), out); }

void st_hash_hex_parts(const void *const *data, const size_t *len, int n, char out[ST_HASH_HEX_LEN + 1]) {
  XXH3_state_t state;
  (void)XXH3_128bits_reset(&state); /* cannot fail on a valid state */
  for (int i = 0; i < n; i++) (void)XXH3_128bits_update(&state, data[i], len[i]);
  hex(XXH3_128bits_digest(&state), out);
}

st_status st_variant_id(const char *op, const st_params *kernel, const st_params *launch, const char *source_hash,
                        char out[ST_HASH_HEX_LEN + 1], st_err *err) {
  char kernel_json[4096], launch_json[4096], text[8192 + 128];
  if (st_params_to_json(kernel, kernel_json, sizeof kernel_json) < 0 ||
      st_params_to_json(launch, launch_json, sizeof launch_json) < 0)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s variant: parameters too long for JSON", op);
  const int len = snprintf(text, sizeof text, "%s\n%s\n%s\n%s", op, kernel_json, launch_json, source_hash);
  if (len < 0 || (size_t)len >= sizeof text)
    return st_fail(err, ST_ERR_INVALID_ARG, "%s variant: identity text too long", op);
  st_hash_hex(text, (size_t)len, out);
  return ST_OK;
}
